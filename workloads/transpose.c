/* Non-blocked matrix transpose: b[j][i] = a[i][j]. Every column write touches a new page once
 * a row exceeds 4KiB: the classic TLB-miss generator of Romer et al. and Navarro et al.
 * usage: transpose [MiB per matrix (default 64)] [passes (default 2)] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 64;
    int passes = argc > 2 ? atoi(argv[2]) : 2;
    size_t n = 1;
    while ((n * 2) * (n * 2) * sizeof(double) <= (mib << 20)) n *= 2;
    double *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b);
    if (!a || !b) { perror("transpose: malloc"); return 1; }
    for (size_t i = 0; i < n * n; i++) a[i] = (double)i;
    for (int p = 0; p < passes; p++)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                b[j * n + i] = a[i * n + j];
    printf("transpose: %d passes of %zux%zu, b[1] = %g\n", passes, n, n, b[1]);
    return 0;
}
