/* superpager calibrate's microbenchmark: a dependent pointer chase over a random cycle of
 * 64-byte lines spread over FOOTPRINT bytes, on 4KB pages (MADV_NOHUGEPAGE) or 2MB pages
 * (MADV_HUGEPAGE, checked in /proc/self/smaps). Each load's address comes from the previous
 * load, so nothing overlaps: ns per step = the latency of wherever the lines live, plus the
 * walk when the TLB misses.
 *
 * LAYOUT `dense` (the default) chases every line of the footprint; `sparse` chases one line
 * per 4KB page of it, at a pseudo-random offset within the page (so the lines spread over the
 * caches' sets): as many lines as a dense footprint 64 times smaller, behind 64 times as many
 * 4KB translations. On 2MB pages a TLB that holds them whole sees no difference between the
 * two; one that holds them as 4KB pieces (a virtual machine whose host backs guest memory with
 * 4KB pages) misses in the sparse chase.
 *
 * usage: chase FOOTPRINT_BYTES PAGES(4k|2m) STEPS SEED [dense|sparse]
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

/* Line i of the chase: the i-th 64-byte line, or (sparse) a line of the i-th 4KB page at an
 * offset a multiplicative hash of i picks. */
static char *line_at(char *buf, uint64_t i, int sparse) {
    if (!sparse) return buf + i * 64;
    return buf + i * 4096 + ((i * 2654435761u) >> 7) % 64 * 64;
}

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
    if (argc != 5 && argc != 6) { fprintf(stderr, "usage: chase FOOTPRINT PAGES(4k|2m) STEPS SEED [dense|sparse]\n"); return 2; }
    int sparse = argc == 6 && strcmp(argv[5], "sparse") == 0;
    if (argc == 6 && !sparse && strcmp(argv[5], "dense") != 0) { fprintf(stderr, "chase: layout '%s' is not dense or sparse\n", argv[5]); return 2; }
    uint64_t bytes = strtoull(argv[1], 0, 10), steps = strtoull(argv[3], 0, 10);
    int huge = strcmp(argv[2], "2m") == 0;
    rng = strtoull(argv[4], 0, 10) | 1;
    uint64_t align = 2u << 20, len = (bytes + align - 1) / align * align;
    char *raw = mmap(0, len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) { perror("mmap"); return 1; }
    char *buf = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    if (madvise(buf, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE)) { perror("madvise"); return 1; }
    uint64_t n = bytes / (sparse ? 4096 : 64);
    if (n < 2) n = 2;
    if (n * (sparse ? 4096 : 64) > len) { fprintf(stderr, "chase: footprint %llu is too small\n", (unsigned long long)bytes); return 2; }
    /* A random cyclic order of the n lines (Sattolo's algorithm), stored as next pointers. */
    uint32_t *perm = malloc(n * sizeof *perm);
    if (!perm) { perror("malloc"); return 1; }
    for (uint64_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    for (uint64_t i = n - 1; i > 0; i--) { uint64_t j = next() % i; uint32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    for (uint64_t i = 0; i < n; i++) *(char **)line_at(buf, perm[i], sparse) = line_at(buf, perm[(i + 1) % n], sparse);
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
