/* PageRank on a generated power-law-ish graph in CSR form: sequential sweeps over edges with
 * random reads of the source ranks (the graph-analytics pattern of the Trident paper).
 * usage: pagerank [MiB of graph (default 128)] [iterations (default 4)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 128;
    int iters = argc > 2 ? atoi(argv[2]) : 4;
    size_t deg = 16, nv = (mib << 20) / (deg * 4 + 8 + 8 + 8), ne = nv * deg;
    uint32_t *src = malloc(ne * sizeof *src);
    uint64_t *off = malloc((nv + 1) * sizeof *off);
    double *rank = malloc(nv * sizeof *rank), *next_rank = malloc(nv * sizeof *next_rank);
    if (!src || !off || !rank || !next_rank) { perror("pagerank: malloc"); return 1; }
    for (size_t v = 0; v <= nv; v++) off[v] = v * deg;
    for (size_t e = 0; e < ne; e++) { /* skewed sources: half the edges come from 1/16 of the vertices */
        uint64_t x = next();
        src[e] = (uint32_t)((x & 1) ? (x >> 1) % (nv / 16 + 1) : (x >> 1) % nv);
    }
    for (size_t v = 0; v < nv; v++) rank[v] = 1.0 / nv;
    for (int it = 0; it < iters; it++) {
        for (size_t v = 0; v < nv; v++) {
            double s = 0;
            for (uint64_t e = off[v]; e < off[v + 1]; e++) s += rank[src[e]] / deg;
            next_rank[v] = 0.15 / nv + 0.85 * s;
        }
        double *t = rank; rank = next_rank; next_rank = t;
    }
    printf("pagerank: %zu vertices, %zu edges, %d iterations, rank[0] = %g\n", nv, ne, iters, rank[0]);
    return 0;
}
