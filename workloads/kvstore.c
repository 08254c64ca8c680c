/* Redis-like in-memory key-value store (Trident's Redis, 43.6GB): a chained hash table of
 * malloc'd entries, loaded by SETs of values of 64 to 1024 bytes, then a mix of GETs (Zipf-like
 * popular keys), overwrites and deletes. It grows as it goes: small objects come from malloc's
 * heap (brk, extended a little at a time) and the bucket array doubles when full (a new, larger
 * array, rehashed, the old one freed), as Redis's dict does. Incremental: at fault time its
 * memory is rarely 1GB-mappable, so Trident maps it with 1GB pages only by promotion.
 * usage: kvstore [footprint in MiB (default 256)] [operations after loading, in thousands
 * (default 1000)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    struct entry *next;
    uint64_t key;
    uint32_t len;
    char val[];
} entry_t;

static uint64_t rng = 0xdeadbeefcafef00dULL;
static inline uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static entry_t **table;
static size_t buckets = 1024, used;

static inline size_t slot(uint64_t key, size_t nb)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 20) & (nb - 1);
}

static void grow(void)
{
    size_t nb = buckets * 2;
    entry_t **t = calloc(nb, sizeof *t);
    if (!t) {
        perror("kvstore: calloc");
        exit(1);
    }
    for (size_t b = 0; b < buckets; b++)
        for (entry_t *e = table[b], *n; e; e = n) {
            n = e->next;
            size_t s = slot(e->key, nb);
            e->next = t[s];
            t[s] = e;
        }
    free(table);
    table = t;
    buckets = nb;
}

static void set(uint64_t key)
{
    uint32_t len = 64 + (uint32_t)(next() % 961);
    entry_t **p = &table[slot(key, buckets)];
    for (; *p; p = &(*p)->next)
        if ((*p)->key == key) {
            entry_t *old = *p;
            *p = old->next;
            free(old);
            used--;
            break;
        }
    entry_t *e = malloc(sizeof *e + len);
    if (!e) {
        perror("kvstore: malloc");
        exit(1);
    }
    e->key = key;
    e->len = len;
    memset(e->val, (int)(key & 0xff), len);
    e->next = table[slot(key, buckets)];
    table[slot(key, buckets)] = e;
    if (++used > buckets)
        grow();
}

static size_t get(uint64_t key)
{
    for (entry_t *e = table[slot(key, buckets)]; e; e = e->next)
        if (e->key == key)
            return (size_t)e->val[e->len / 2];
    return 0;
}

static void del(uint64_t key)
{
    for (entry_t **p = &table[slot(key, buckets)]; *p; p = &(*p)->next)
        if ((*p)->key == key) {
            entry_t *e = *p;
            *p = e->next;
            free(e);
            used--;
            return;
        }
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 256;
    size_t ops = (argc > 2 ? strtoull(argv[2], 0, 0) : 1000) * 1000;
    /* About 600 bytes per key: the average value, the entry header and malloc's overhead. */
    size_t keys = (mib << 20) / 600;
    table = calloc(buckets, sizeof *table);
    for (size_t k = 0; k < keys; k++)
        set(k);
    size_t sum = 0;
    for (size_t i = 0; i < ops; i++) {
        uint64_t r = next();
        /* Popular keys: the product of two uniform draws favours low key numbers. */
        uint64_t key = ((r & 0xffffffffu) * (r >> 32) >> 32) * keys >> 32;
        unsigned op = (unsigned)(next() % 100);
        if (op < 80)
            sum += get(key);
        else if (op < 95)
            set(key);
        else
            del(key);
    }
    printf("kvstore: %zu keys, %zu buckets, %zu operations, checksum %zu\n", used, buckets, ops, sum);
    return 0;
}
