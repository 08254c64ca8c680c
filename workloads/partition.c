/* Radix partitioning (the first pass of a partitioned database join): scatter a large array of
 * tuples into 4096 output partitions. Each input tuple is written to one of thousands of
 * concurrently open output streams, so the working set of pages is large and sparse: the
 * pattern on which Romer et al.'s promotion policies differ most.
 * usage: partition [MiB of input (default 128)] [passes (default 2)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FANOUT 4096

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 128;
    int passes = argc > 2 ? atoi(argv[2]) : 2;
    size_t n = (mib << 20) / 16;
    uint64_t (*in)[2] = malloc(n * 16), (*out)[2] = malloc(n * 16);
    size_t *count = calloc(FANOUT, sizeof *count), *pos = malloc(FANOUT * sizeof *pos);
    if (!in || !out || !count || !pos) { perror("partition: alloc"); return 1; }
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        in[i][0] = x, in[i][1] = i;
    }
    for (int p = 0; p < passes; p++) {
        int shift = 12 * p % 52;
        for (size_t b = 0; b < FANOUT; b++) count[b] = 0;
        for (size_t i = 0; i < n; i++) count[(in[i][0] >> shift) & (FANOUT - 1)]++; /* histogram */
        size_t s = 0;
        for (size_t b = 0; b < FANOUT; b++) pos[b] = s, s += count[b];
        for (size_t i = 0; i < n; i++) { /* scatter */
            size_t b = (in[i][0] >> shift) & (FANOUT - 1);
            out[pos[b]][0] = in[i][0];
            out[pos[b]++][1] = in[i][1];
        }
        uint64_t (*t)[2] = in; in = out; out = t;
    }
    printf("partition: %zu tuples into %d partitions, %d passes, first %llx\n", n, FANOUT, passes,
           (unsigned long long)in[0][0]);
    return 0;
}
