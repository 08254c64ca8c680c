/* FFT-like: an in-place radix-2 complex FFT along each dimension of a 3-D array (FFTW's
 * 3-D transforms in Navarro et al.'s Table 1). Butterflies pair elements at power-of-two
 * distances, so the later stages and the slower dimensions stride across many pages.
 * usage: fft [MiB of complex data (default 64)] [transforms (default 2)] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { double re, im; } cplx;

/* FFT of n points spaced `stride` elements apart, starting at a. */
static void fft1d(cplx *a, size_t n, size_t stride)
{
    for (size_t i = 1, j = 0; i < n; i++) { /* bit reversal */
        size_t bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) { cplx t = a[i * stride]; a[i * stride] = a[j * stride]; a[j * stride] = t; }
    }
    for (size_t len = 2; len <= n; len <<= 1) {
        double ang = -2 * M_PI / (double)len;
        cplx w = {cos(ang), sin(ang)};
        for (size_t i = 0; i < n; i += len) {
            cplx u = {1, 0};
            for (size_t k = 0; k < len / 2; k++) {
                cplx *p = &a[(i + k) * stride], *q = &a[(i + k + len / 2) * stride];
                cplx v = {q->re * u.re - q->im * u.im, q->re * u.im + q->im * u.re};
                q->re = p->re - v.re, q->im = p->im - v.im;
                p->re += v.re, p->im += v.im;
                cplx nu = {u.re * w.re - u.im * w.im, u.re * w.im + u.im * w.re};
                u = nu;
            }
        }
    }
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 64;
    int reps = argc > 2 ? atoi(argv[2]) : 2;
    size_t n = 1; /* n^3 points fit in the size */
    while ((2 * n) * (2 * n) * (2 * n) * sizeof(cplx) <= (mib << 20)) n *= 2;
    cplx *a = malloc(n * n * n * sizeof *a);
    if (!a) { perror("fft: malloc"); return 1; }
    for (size_t i = 0; i < n * n * n; i++) a[i].re = (double)(i % 17), a[i].im = 0;
    for (int r = 0; r < reps; r++) {
        for (size_t y = 0; y < n * n; y++) fft1d(a + y * n, n, 1);                 /* x lines */
        for (size_t z = 0; z < n; z++)
            for (size_t x = 0; x < n; x++) fft1d(a + z * n * n + x, n, n);          /* y lines */
        for (size_t y = 0; y < n * n; y++) fft1d(a + y, n, n * n);                 /* z lines */
    }
    printf("fft: %d transforms of %zu^3 points, a[1] = %g\n", reps, n, a[1].re);
    return 0;
}
