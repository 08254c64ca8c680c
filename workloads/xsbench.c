/* XSBench-like: the Monte Carlo neutron-transport macroscopic cross-section lookup kernel
 * (Tramm et al., XSBench; Trident's largest workload, 117GB). It pre-allocates all of its
 * memory at start (nuclide grids, the unionized energy grid and its index grid), fills it, and
 * then does random lookups: a binary search in the unionized grid, then for each nuclide of a
 * material one index-grid entry and two nuclide-grid points. Pre-allocating: Trident maps it
 * with 1GB pages at fault.
 * usage: xsbench [footprint in MiB (default 256)] [lookups in thousands (default 200)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define ISOTOPES 68 /* XSBench "small" has 68 nuclides */
#define XS 5        /* total, elastic, absorption, fission, nu-fission */

typedef struct {
    double energy;
    double xs[XS];
} point_t;

/* xorshift64; the state lives in a local of main, so it stays in a register. */
static inline uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 256;
    size_t lookups = (argc > 2 ? strtoull(argv[2], 0, 0) : 200) * 1000;
    uint64_t rng = 0x2545f4914f6cdd1dULL;
    /* Bytes per gridpoint of one nuclide: its point (48), its unionized energy (8) and its
     * index-grid row (ISOTOPES ints). */
    size_t per = sizeof(point_t) + 8 + ISOTOPES * 4;
    size_t points = (mib << 20) / (ISOTOPES * per);
    size_t n_union = points * ISOTOPES;
    point_t *grid = malloc(n_union * sizeof(point_t));
    double *uenergy = malloc(n_union * 8);
    int32_t *index = malloc(n_union * ISOTOPES * 4);
    if (!grid || !uenergy || !index) {
        perror("xsbench: malloc");
        return 1;
    }
    /* Nuclide grids: each nuclide's energies ascending in [0, 1). */
    for (size_t n = 0; n < ISOTOPES; n++)
        for (size_t i = 0; i < points; i++) {
            point_t *p = &grid[n * points + i];
            p->energy = (i + (next(&rng) % 1000) / 1000.0) / points;
            for (int x = 0; x < XS; x++)
                p->xs[x] = (next(&rng) % 10000) / 10000.0;
        }
    /* Unionized grid: all energies in order (every nuclide's grid is uniform, so interleave). */
    for (size_t u = 0; u < n_union; u++)
        uenergy[u] = (double)u / n_union;
    /* Index grid: for each union energy, the point of each nuclide at or below it (the same
     * for every nuclide here, since the grids are uniform). */
    for (size_t u = 0; u < n_union; u++) {
        size_t at = u / ISOTOPES;
        int32_t v = (int32_t)(at < points - 1 ? at : points - 2);
        for (size_t n = 0; n < ISOTOPES; n++)
            index[u * ISOTOPES + n] = v;
    }
    double sum = 0;
    for (size_t l = 0; l < lookups; l++) {
        double e = (next(&rng) % 1000000) / 1000000.0;
        size_t lo = 0, hi = n_union - 1;
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (uenergy[mid] > e)
                hi = mid;
            else
                lo = mid;
        }
        /* A material of 4 to 27 nuclides (XSBench's fuel has 34 of the 68; others fewer). */
        int nucs = 4 + (int)(next(&rng) % 24);
        for (int k = 0; k < nucs; k++) {
            size_t n = next(&rng) % ISOTOPES;
            int32_t i = index[lo * ISOTOPES + n];
            point_t *a = &grid[n * points + i], *b = a + 1;
            double f = (b->energy - e) / (b->energy - a->energy + 1e-12);
            for (int x = 0; x < XS; x++)
                sum += b->xs[x] - f * (b->xs[x] - a->xs[x]);
        }
    }
    printf("xsbench: %zu lookups over %zu MiB, checksum %.3f\n", lookups, mib, sum);
    return 0;
}
