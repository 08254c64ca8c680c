/* superpager calibrate's microbenchmark: a dependent pointer chase over a random cycle of
 * 64-byte lines spread over FOOTPRINT bytes, on 4KB pages (MADV_NOHUGEPAGE) or 2MB pages
 * (MADV_HUGEPAGE, checked in /proc/self/smaps). Each load's address comes from the previous
 * load, so nothing overlaps: ns per step = the latency of wherever the lines live, plus the
 * walk when the TLB misses.
 *
 * usage: chase FOOTPRINT_BYTES PAGES(4k|2m) STEPS SEED
 * prints: ns_per_step=<f> huge_bytes=<n>
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static uint64_t rng;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static long anon_huge_kb(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256]; long kb = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: chase FOOTPRINT PAGES(4k|2m) STEPS SEED\n"); return 2; }
    uint64_t bytes = strtoull(argv[1], 0, 10), steps = strtoull(argv[3], 0, 10);
    int huge = strcmp(argv[2], "2m") == 0;
    rng = strtoull(argv[4], 0, 10) | 1;
    uint64_t align = 2u << 20, len = (bytes + align - 1) / align * align;
    char *raw = mmap(0, len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) { perror("mmap"); return 1; }
    char *buf = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    if (madvise(buf, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE)) { perror("madvise"); return 1; }
    uint64_t n = bytes / 64;
    if (n < 2) n = 2;
    /* A random cyclic order of the n lines (Sattolo's algorithm), stored as next pointers. */
    uint32_t *perm = malloc(n * sizeof *perm);
    if (!perm) { perror("malloc"); return 1; }
    for (uint64_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    for (uint64_t i = n - 1; i > 0; i--) { uint64_t j = next() % i; uint32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    for (uint64_t i = 0; i < n; i++) *(char **)(buf + (uint64_t)perm[i] * 64) = buf + (uint64_t)perm[(i + 1) % n] * 64;
    free(perm);
    long huge_kb = anon_huge_kb();
    /* Warm up: one pass over the cycle (at most the step count). */
    char *p = buf;
    uint64_t warm = n < steps ? n : steps;
    for (uint64_t i = 0; i < warm; i++) p = *(char **)p;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (uint64_t i = 0; i < steps; i++) p = *(char **)p;
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("ns_per_step=%.4f huge_bytes=%ld sink=%d\n", ns / steps, huge_kb * 1024, (int)((uintptr_t)p & 1));
    return 0;
}
