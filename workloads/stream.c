/* STREAM-like sweep (McCalpin's STREAM triad): a[i] = b[i] + s * c[i] over three arrays,
 * repeated. Sequential, TLB-friendly per access, with a footprint that still needs many pages.
 * usage: stream [MiB per array (default 64)] [passes (default 4)] */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 64;
    int passes = argc > 2 ? atoi(argv[2]) : 4;
    size_t n = (mib << 20) / sizeof(double);
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) {
        perror("stream: malloc");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = 1.0, b[i] = 2.0, c[i] = 0.5;
    for (int p = 0; p < passes; p++)
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] + 3.0 * c[i];
    printf("stream: %d passes over 3 x %zu MiB, a[n/2] = %g\n", passes, mib, a[n / 2]);
    return 0;
}
