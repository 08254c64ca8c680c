/* live_access: the access-phase benchmark of `superpager bench --live` (docs/LIVE.md).
 * Populates a table, then times an access phase of one of three TLB-hostile shapes:
 *   gups     random read-modify-write of 8-byte words (HPC Challenge RandomAccess's generator)
 *   chase    a dependent pointer chase through one cycle over every word: word i holds the next
 *            index of a full-period LCG modulo the (power-of-two) word count, so the cycle is
 *            built by a sequential pass and followed at pseudo-random addresses (Knuth, TAOCP
 *            vol. 2, 3.2.1.2: c odd and a = 1 mod 4 give period 2^k)
 *   bsearch  binary searches of random keys in a sorted array
 * With `holes`, it also keeps a sparse side table as large as the main one that it touches once
 * per 2MB (what a sparse hash index or a lazily filled array leaves): huge pages at fault back
 * all of it (bloat), a policy that waits for population does not.
 * usage: live_access gups|chase|bsearch MiB [ops (millions; default gups 64, chase 16, bsearch 2)] [holes]
 * prints one line of key=value: populate_s access_s touched_bytes rss_bytes anon_huge_bytes checksum */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLY 0x0000000000000007ULL /* HPCC RandomAccess's generator polynomial */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void) /* xorshift64*, fixed seed: the same accesses every run */
{
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

static long long kb_field(const char *key)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long long v = -1;
    size_t k = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && line[k] == ':')
            v = strtoll(line + k + 1, 0, 10);
    if (f)
        fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: live_access gups|chase|bsearch MiB [ops millions] [holes]\n");
        return 2;
    }
    const char *mode = argv[1];
    int m = !strcmp(mode, "gups") ? 0 : !strcmp(mode, "chase") ? 1 : !strcmp(mode, "bsearch") ? 2 : -1;
    size_t mib = strtoull(argv[2], 0, 0);
    if (m < 0 || mib == 0) {
        fprintf(stderr, "live_access: unknown mode '%s' or zero size\n", mode);
        return 2;
    }
    double ops_m = argc > 3 ? strtod(argv[3], 0) : (m == 0 ? 64 : m == 1 ? 16 : 2);
    int holes = argc > 4 && !strcmp(argv[4], "holes");
    size_t words = (mib << 20) / 8, ops = (size_t)(ops_m * 1e6);
    uint64_t *t = malloc(words * 8);
    char *side = holes ? malloc(mib << 20) : 0;
    if (!t || (holes && !side)) {
        perror("live_access: malloc");
        return 1;
    }
    double t0 = now();
    if (m == 1) {
        if (words & (words - 1)) {
            fprintf(stderr, "live_access: chase needs a power-of-two size in MiB, got %zu\n", mib);
            return 2;
        }
        for (size_t i = 0; i < words; i++) /* Knuth's MMIX LCG constants */
            t[i] = (6364136223846793005ULL * i + 1442695040888963407ULL) & (words - 1);
    } else {
        for (size_t i = 0; i < words; i++)
            t[i] = 2 * i + 1; /* sorted, odd keys: bsearch looks up hits and misses */
    }
    size_t touched = words * 8;
    if (holes)
        for (size_t off = 0; off < (mib << 20); off += 2 << 20)
            side[off] = 1, touched += 4096;
    double t1 = now();
    uint64_t sum = 0;
    if (m == 0) {
        uint64_t ran = 1;
        for (size_t i = 0; i < ops; i++) {
            ran = (ran << 1) ^ ((int64_t)ran < 0 ? POLY : 0);
            t[ran % words] ^= ran;
            if (holes && !(i & 63))
                sum += side[(ran % mib) << 20 & ~((size_t)(2 << 20) - 1)];
        }
        sum += t[ops % words];
    } else if (m == 1) {
        uint64_t p = 0;
        for (size_t i = 0; i < ops; i++) {
            p = t[p];
            if (holes && !(i & 63))
                sum += side[(p % mib) << 20 & ~((size_t)(2 << 20) - 1)];
        }
        sum += p;
    } else {
        for (size_t i = 0; i < ops; i++) {
            uint64_t key = next() % (2 * words);
            size_t lo = 0, hi = words;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (t[mid] < key)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            sum += lo < words && t[lo] == key;
            if (holes && !(i & 63))
                sum += side[(key % mib) << 20 & ~((size_t)(2 << 20) - 1)];
        }
    }
    double t2 = now();
    printf("live_access mode=%s mib=%zu ops=%zu holes=%d populate_s=%.4f access_s=%.4f touched_bytes=%zu rss_bytes=%lld anon_huge_bytes=%lld checksum=%llx\n",
           mode, mib, ops, holes, t1 - t0, t2 - t1, touched, kb_field("Rss") * 1024, kb_field("AnonHugePages") * 1024,
           (unsigned long long)sum);
    return 0;
}
