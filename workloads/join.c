/* Index nested-loop join over a static hash file (a deductive database's nested join, like the
 * coral benchmark of Romer et al.). The inner relation lives in a hash file of one-page
 * buckets, about four tuples per bucket, so by chance about 2% of the bucket pages receive no
 * tuple and are never touched: the working set is large and hot, yet almost no aligned region
 * of it is fully referenced. The outer relation is scanned again and again, each tuple probing
 * its bucket. The database's catalog keeps one descriptor per relation, each at the head of
 * its own 256KB buffer that is mostly never used: cold, sparse memory.
 * usage: join [MiB of hash file (default 32)] [probes in millions (default 12)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 4096
#define SLOTS 15               /* 256-byte tuples per bucket page, after the header */
#define RELATIONS 256
#define REL_BUF (256 << 10)

struct tuple { uint64_t key; uint64_t payload[31]; };
struct bucket { uint32_t n; uint32_t pad[63]; struct tuple t[SLOTS]; };
struct relation { char name[32]; uint64_t tuples; uint64_t probes; };

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
    return x;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 32;
    size_t probes = (argc > 2 ? strtoull(argv[2], 0, 0) : 12) * 1000000;
    size_t pages = (mib << 20) / PAGE, n = pages * 4;
    struct bucket *file; /* page-aligned, untouched until written */
    if (posix_memalign((void **)&file, PAGE, pages * sizeof(struct bucket))) { perror("join: alloc"); return 1; }
    uint64_t *outer = malloc(n * sizeof *outer);
    struct relation *cat[RELATIONS];
    if (!outer) { perror("join: alloc"); return 1; }
    for (int r = 0; r < RELATIONS; r++) {
        cat[r] = malloc(REL_BUF);
        if (!cat[r]) { perror("join: alloc"); return 1; }
        snprintf(cat[r]->name, sizeof cat[r]->name, "rel%d", r);
        cat[r]->tuples = cat[r]->probes = 0;
    }
    /* Build the inner relation: tuple i goes to bucket mix(key) % pages. */
    size_t stored = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t key = mix(i + 1);
        struct bucket *b = &file[key % pages];
        if (b->n == SLOTS) continue; /* a full bucket drops the tuple (rare at 4 per page) */
        b->t[b->n].key = key;
        b->t[b->n].payload[0] = i;
        b->n++;
        outer[stored++] = key;
    }
    cat[0]->tuples = stored;
    /* Shuffle the outer relation so consecutive probes land on unrelated buckets. */
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (size_t i = stored - 1; i > 0; i--) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t j = x % (i + 1);
        uint64_t t = outer[i]; outer[i] = outer[j]; outer[j] = t;
    }
    /* The join: scan the outer relation repeatedly; each tuple probes its bucket. */
    uint64_t sum = 0, found = 0;
    for (size_t p = 0; p < probes; p++) {
        uint64_t key = outer[p % stored];
        struct bucket *b = &file[key % pages];
        for (uint32_t s = 0; s < b->n; s++)
            if (b->t[s].key == key) { sum += b->t[s].payload[0]; found++; break; }
    }
    cat[0]->probes = probes;
    uint64_t total = 0;
    for (int r = 0; r < RELATIONS; r++) total += cat[r]->tuples;
    printf("join: %zu buckets, %zu tuples, %zu probes, %llu found, sum %llx\n", pages, (size_t)total,
           probes, (unsigned long long)found, (unsigned long long)sum);
    return 0;
}
