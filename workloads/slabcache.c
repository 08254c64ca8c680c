/* Memcached-like caching store (Trident's Memcached, 79-137GB): a slab allocator over 1MB slab
 * pages, each malloc'd when its size class needs one (glibc serves them with separate mmaps,
 * which the kernel merges into one growing VMA), items in size classes a factor 1.25 apart,
 * a hash table, and eviction of a class's oldest item once the memory limit is reached. Loaded
 * by SETs, then GETs of popular keys and SETs of new ones. Incremental: memory arrives 1MB at
 * a time, so at fault time little of it is 1GB-mappable.
 * usage: slabcache [memory limit in MiB (default 256)] [operations after loading, in
 * thousands (default 1000)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLAB (1 << 20)
#define CLASSES 40

typedef struct item {
    struct item *hnext;
    uint64_t key;
    uint32_t len;
    char data[];
} item_t;

typedef struct {
    size_t size;     /* chunk size */
    char **slabs;    /* its slab pages, in allocation order */
    size_t nslabs, cap;
    size_t used;     /* chunks handed out so far (the next is at used) */
    size_t oldest;   /* once full: the chunk to evict next, round robin (FIFO) */
} class_t;

static class_t cls[CLASSES];
static int nclasses;
static item_t **hash;
static size_t hmask;
static size_t mem_limit, mem_used;

static uint64_t rng = 0x1234567887654321ULL;
static inline uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static inline size_t hslot(uint64_t key) { return (size_t)(key * 0x9e3779b97f4a7c15ULL >> 17) & hmask; }

static void unlink_item(item_t *it)
{
    for (item_t **p = &hash[hslot(it->key)]; *p; p = &(*p)->hnext)
        if (*p == it) {
            *p = it->hnext;
            return;
        }
}

static item_t *chunk(class_t *c, size_t i)
{
    size_t per = SLAB / c->size;
    return (item_t *)(c->slabs[i / per] + (i % per) * c->size);
}

static item_t *alloc_item(size_t need)
{
    int k = 0;
    while (k < nclasses - 1 && cls[k].size < need)
        k++;
    class_t *c = &cls[k];
    size_t per = SLAB / c->size;
    if (c->used == c->nslabs * per) {
        if (mem_used + SLAB <= mem_limit || c->nslabs == 0) {
            if (c->nslabs == c->cap) {
                c->cap = c->cap ? 2 * c->cap : 16;
                c->slabs = realloc(c->slabs, c->cap * sizeof *c->slabs);
            }
            char *s = malloc(SLAB);
            if (!s || !c->slabs) {
                perror("slabcache: malloc");
                exit(1);
            }
            c->slabs[c->nslabs++] = s;
            mem_used += SLAB;
        } else {
            /* Full: evict this class's oldest item and reuse its chunk. */
            item_t *it = chunk(c, c->oldest);
            unlink_item(it);
            c->oldest = (c->oldest + 1) % c->used;
            return it;
        }
    }
    return chunk(c, c->used++);
}

static void set(uint64_t key, uint32_t len)
{
    item_t *it = alloc_item(sizeof(item_t) + len);
    it->key = key;
    it->len = len;
    memset(it->data, (int)(key & 0xff), len);
    size_t s = hslot(key);
    it->hnext = hash[s];
    hash[s] = it;
}

static size_t get(uint64_t key)
{
    for (item_t *it = hash[hslot(key)]; it; it = it->hnext)
        if (it->key == key)
            return (size_t)(unsigned char)it->data[it->len / 2];
    return 0;
}

/* Value sizes: mostly small, a long tail (100 bytes to 16KB). */
static uint32_t value_len(void)
{
    uint64_t r = next();
    double u = (double)(r >> 11) / (double)(1ull << 53);
    return (uint32_t)(100 * (1 + 160 * u * u * u * u));
}

int main(int argc, char **argv)
{
    mem_limit = (argc > 1 ? strtoull(argv[1], 0, 0) : 256) << 20;
    size_t ops = (argc > 2 ? strtoull(argv[2], 0, 0) : 1000) * 1000;
    for (size_t s = 96; nclasses < CLASSES && s <= SLAB / 2; s = (s * 5 / 4 + 7) & ~7ul)
        cls[nclasses++].size = s;
    size_t hsize = 1;
    while (hsize < mem_limit / 1024)
        hsize <<= 1;
    hash = calloc(hsize, sizeof *hash);
    hmask = hsize - 1;
    /* Load until the memory limit is reached, then keep going a little (evictions begin). */
    uint64_t key = 0;
    while (mem_used + SLAB <= mem_limit)
        set(key++, value_len());
    size_t sum = 0;
    for (size_t i = 0; i < ops; i++) {
        uint64_t r = next();
        if (r % 10 < 9) {
            uint64_t k = ((r & 0xffffffffu) * (next() >> 32) >> 32) * key >> 32;
            sum += get(key - 1 - k);
        } else {
            set(key++, value_len());
        }
    }
    printf("slabcache: %zu MiB in slabs, %llu keys set, checksum %zu\n", mem_used >> 20, (unsigned long long)key, sum);
    return 0;
}
