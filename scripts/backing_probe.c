/* backing_probe: does this (virtual) machine's TLB hold a guest's 2MB pages whole anywhere, or
 * splinter them into 4KB pieces everywhere? docs/RUNTIME_MODEL.md, "Partial 2MB backing?".
 *
 * A TLB entry caches the whole guest-virtual to host-physical translation, so it holds a guest
 * 2MB page whole only where the host backs it with a 2MB page too. The probe maps MiB mebibytes
 * of THP (MADV_HUGEPAGE, every page written), then for each 32MiB group of 16 2MB pages times a
 * dependent chase over 8,192 lines, one in each 4KB piece of the group (at a hashed offset, so the
 * lines spread over the cache sets). Held whole, the group is 16 TLB entries and no step walks;
 * splintered, it is 8,192 4KB entries, beyond any second-level TLB, and most steps walk. A group
 * partly backed by host 2MB pages falls between. Two controls, the same 8,192 lines on 4KB pages
 * (MADV_NOHUGEPAGE): spread one per 4KB page (every step walks) and packed into 512KB (few TLB
 * entries, the cache latency alone).
 *
 * build: cc -O2 -o backing_probe scripts/backing_probe.c
 * usage: backing_probe [MiB (default 4096)] [repeats (3)] [steps (200000)]
 * prints: how much of the region is on 2MB pages, the two controls, then a line per group: index,
 * ns a step (median of repeats), and the guest-physical 2MB frame of its first page (from
 * /proc/self/pagemap; 0 without root). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define LINES 8192 /* 4KB pieces in a 32MiB group */
#define GROUP (32ul << 20)
#define HUGE (2ul << 20)

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) /* xorshift64 */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* Link the lines at at[0..LINES) into one random cycle: each holds the address of the next. */
static void link_cycle(char **at)
{
    static int order[LINES];
    for (int i = 0; i < LINES; i++)
        order[i] = i;
    for (int i = LINES - 1; i > 0; i--) {
        int j = next() % (i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (int i = 0; i < LINES; i++)
        *(char **)at[order[i]] = at[order[(i + 1) % LINES]];
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ns a step of the chase from at[0]: one lap untimed, then `steps` timed; median of `repeats`. */
static double chase_ns(char **at, int repeats, long steps)
{
    double t[16];
    for (int r = 0; r < repeats; r++) {
        char *p = at[0];
        for (long i = 0; i < LINES; i++)
            p = *(char **)p;
        double a = now_ns();
        for (long i = 0; i < steps; i++)
            p = *(char **)p;
        t[r] = (now_ns() - a) / steps;
        if (!p)
            puts("");
    }
    qsort(t, repeats, sizeof t[0], by_value);
    return t[repeats / 2];
}

static char *aligned_map(size_t len, int advice)
{
    char *raw = mmap(0, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        perror("backing_probe: mmap");
        exit(1);
    }
    char *p = (char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    if (madvise(p, len, advice))
        perror("backing_probe: madvise");
    memset(p, 1, len);
    return p;
}

/* The process's AnonHugePages in bytes (smaps_rollup), or -1 if it cannot be read. */
static long long anon_huge_bytes(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* Line i of a group at `base`: a line of its i-th 4KB piece, at an offset a hash of i picks. */
static char *spread_line(char *base, long i)
{
    return base + i * 4096 + ((i * 2654435761u) >> 7) % 64 * 64;
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 4096;
    int repeats = argc > 2 ? atoi(argv[2]) : 3;
    long steps = argc > 3 ? atol(argv[3]) : 200000;
    if (mib < 32 || repeats < 1 || repeats > 16 || steps < 1) {
        fprintf(stderr, "usage: backing_probe [MiB >= 32] [repeats 1..16] [steps]\n");
        return 2;
    }
    size_t len = (size_t)mib << 20;
    char *huge = aligned_map(len, MADV_HUGEPAGE);
    char *small = aligned_map(GROUP, MADV_NOHUGEPAGE);
    long long huge_bytes = anon_huge_bytes();
    printf("THP: %lld of %zu MiB on 2MB pages\n", huge_bytes < 0 ? -1 : huge_bytes >> 20, len >> 20);
    if (huge_bytes >= 0 && (size_t)huge_bytes < len / 2)
        fprintf(stderr, "backing_probe: warning: fewer than half the region's pages are 2MB pages; groups on 4KB pages read as splintered\n");
    static char *at[LINES];
    for (long i = 0; i < LINES; i++)
        at[i] = small + i * 64;
    link_cycle(at);
    double packed = chase_ns(at, repeats, steps);
    for (long i = 0; i < LINES; i++)
        at[i] = spread_line(small, i);
    link_cycle(at);
    double spread = chase_ns(at, repeats, steps);
    printf("control: packed into 512KB of 4KB pages %.2f ns, spread over 32MiB of 4KB pages %.2f ns\n", packed, spread);
    FILE *pagemap = fopen("/proc/self/pagemap", "rb");
    for (size_t g = 0; g < len / GROUP; g++) {
        char *base = huge + g * GROUP;
        for (long i = 0; i < LINES; i++)
            at[i] = spread_line(base, i);
        link_cycle(at);
        uint64_t e = 0;
        if (pagemap && (fseek(pagemap, (long)((uintptr_t)base / 4096 * 8), SEEK_SET) || fread(&e, 8, 1, pagemap) != 1))
            e = 0;
        printf("%zu %.2f %llu\n", g, chase_ns(at, repeats, steps), (unsigned long long)((e & ((1ull << 55) - 1)) >> 9));
    }
    return 0;
}
