/* Graph500-like: breadth-first search over a generated scale-free graph (the Graph500 BFS
 * kernel; Trident's Graph500 used 63.5GB). It generates an edge list, builds a compressed
 * sparse row graph from it, frees the edge list, and runs BFS from several roots. The BFS state
 * (parent array and frontier queues) is small next to the graph and the most often missed:
 * Trident found Graph500's hottest region, about 800MB, mappable by 2MB pages but not by 1GB
 * ones, so Trident-1G-only maps it with 4KB pages and loses to THP.
 * usage: graph500 [footprint in MiB (default 256)] [BFS roots (default 2)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* xorshift64; the state lives in a local of main, so it stays in a register. */
static inline uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A vertex with skewed popularity (a product of two uniform draws, whose density -ln x makes
 * low-numbered vertices hubs, as R-MAT's does), scrambled so hubs are scattered over the arrays. */
static inline uint32_t vertex(uint64_t *s, uint32_t n)
{
    uint64_t a = next(s);
    uint64_t v = ((a & 0xffffffffu) * (a >> 32) >> 32) * n >> 32;
    return (uint32_t)((v * 2654435761u) % n);
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 256;
    int roots = argc > 2 ? atoi(argv[2]) : 2;
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    /* Edge factor 16 (Graph500's). Per vertex: 16 edges x 8 bytes in the list (freed after the
     * build), 16 x 4 bytes of adjacency, 8 of offsets, 8 of parent, 4 + 4 of queues. */
    size_t n = (mib << 20) / (16 * 8 + 16 * 4 + 24);
    size_t m = 16 * n;
    uint32_t (*edges)[2] = malloc(m * sizeof *edges);
    uint64_t *offset = calloc(n + 1, 8);
    if (!edges || !offset) {
        perror("graph500: malloc");
        return 1;
    }
    for (size_t e = 0; e < m; e++) {
        edges[e][0] = vertex(&rng, (uint32_t)n);
        edges[e][1] = vertex(&rng, (uint32_t)n);
        offset[edges[e][0] + 1]++;
        offset[edges[e][1] + 1]++;
    }
    for (size_t v = 0; v < n; v++)
        offset[v + 1] += offset[v];
    uint32_t *adj = malloc(offset[n] * 4);
    uint64_t *fill = malloc(n * 8);
    if (!adj || !fill) {
        perror("graph500: malloc");
        return 1;
    }
    for (size_t v = 0; v < n; v++)
        fill[v] = offset[v];
    for (size_t e = 0; e < m; e++) {
        adj[fill[edges[e][0]]++] = edges[e][1];
        adj[fill[edges[e][1]]++] = edges[e][0];
    }
    free(fill);
    free(edges);
    /* The BFS state: allocated after the graph, each array on its own. */
    int64_t *parent = malloc(n * 8);
    uint32_t *queue = malloc(n * 4), *nextq = malloc(n * 4);
    if (!parent || !queue || !nextq) {
        perror("graph500: malloc");
        return 1;
    }
    size_t visited = 0;
    for (int r = 0; r < roots; r++) {
        for (size_t v = 0; v < n; v++)
            parent[v] = -1;
        uint32_t root = vertex(&rng, (uint32_t)n);
        parent[root] = root;
        size_t qn = 1, nn;
        queue[0] = root;
        while (qn) {
            nn = 0;
            for (size_t i = 0; i < qn; i++) {
                uint32_t u = queue[i];
                for (uint64_t k = offset[u]; k < offset[u + 1]; k++) {
                    uint32_t w = adj[k];
                    if (parent[w] < 0) {
                        parent[w] = u;
                        nextq[nn++] = w;
                    }
                }
            }
            uint32_t *t = queue;
            queue = nextq;
            nextq = t;
            qn = nn;
            visited += nn;
        }
    }
    printf("graph500: %zu vertices, %zu edges, %d BFS, %zu visited\n", n, m, roots, visited);
    return 0;
}
