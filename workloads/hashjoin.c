/* Hash join: build an open-addressing hash table on relation R, probe it with relation S
 * (a database equi-join). Random accesses into a table sized by R.
 * usage: hashjoin [MiB of hash table (default 128)] [probes per build tuple (default 4)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct slot { uint64_t key, payload; };
static uint64_t mix(uint64_t x) { x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; return x; }

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 128;
    size_t fan = argc > 2 ? strtoull(argv[2], 0, 0) : 4;
    size_t slots = 1;
    while (slots * 2 * sizeof(struct slot) <= (mib << 20)) slots *= 2;
    size_t r = slots / 2; /* load factor 0.5 */
    struct slot *t = calloc(slots, sizeof *t);
    uint64_t *rel = malloc(r * sizeof *rel);
    if (!t || !rel) { perror("hashjoin: alloc"); return 1; }
    for (size_t i = 0; i < r; i++) rel[i] = mix(i + 1) | 1;
    for (size_t i = 0; i < r; i++) { /* build */
        size_t h = mix(rel[i]) & (slots - 1);
        while (t[h].key) h = (h + 1) & (slots - 1);
        t[h].key = rel[i];
        t[h].payload = i;
    }
    uint64_t matches = 0, sum = 0;
    for (size_t i = 0; i < r * fan; i++) { /* probe: half the keys match */
        uint64_t k = (i & 1) ? rel[mix(i) % r] : (mix(i) << 1);
        size_t h = mix(k) & (slots - 1);
        while (t[h].key && t[h].key != k) h = (h + 1) & (slots - 1);
        if (t[h].key == k) matches++, sum += t[h].payload;
    }
    printf("hashjoin: %zu build, %zu probes, %llu matches (%llx)\n", r, r * fan,
           (unsigned long long)matches, (unsigned long long)sum);
    return 0;
}
