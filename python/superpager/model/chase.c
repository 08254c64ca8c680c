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
 * LAYOUT `strided:BYTES` chases one line every BYTES (a multiple of 64), each at the same offset:
 * with BYTES 64KiB on 2MB pages every line has the same address bits 6-15, the set index of a
 * 1MiB 16-way L2, unless the host scatters the guest's 4KB pieces over its own frames (caches
 * are indexed by the host's physical address). calibrate's host-frames probe compares that
 * chase with one at BYTES 68KiB, whose lines differ in bits 12-15 whatever the host does.
 *
 * CHAINS (a comma list, e.g. 1,4,16) runs, for each k in it, k chases at once over the same
 * cycle, entered at k evenly spaced points and stepped in turn in one loop: the k loads of a
 * round are independent of each other, so as many misses (and, on 4KB pages, walks) can be in
 * flight as the core allows, up to k. STEPS counts loads in all chains together. calibrate's
 * walk probe compares 4KB and 2MB pages at each k: how far the extra cost of 4KB pages falls
 * as k grows says how many walks the machine overlaps.
 *
 * usage: chase FOOTPRINT_BYTES PAGES(4k|2m) STEPS SEED [dense|sparse|strided:BYTES [CHAINS]]
 * prints: ns_per_step=<f> huge_bytes=<n> sink=<0|1>, and with CHAINS ns_k<k>=<f> for each k
 *
 * usage: chase window FOOTPRINT_BYTES PAGES(4k|2m) STEPS SEED
 * prints: dep=<f> ns_p<P>=<f> for each P in WINDOW_PADS, huge_bytes=<n>: the window probe. STEPS
 * loads at random 64-byte lines of FOOTPRINT, each address from a xorshift kept in a register, so
 * no load waits on another and the loop's own work is a few instructions; after each load, P
 * adds (in four chains of P/4, so they never wait on each other or on the load). How many loads
 * are in flight is how many loops' instructions the core's window holds, so ns a load grows with
 * P by a load's latency over the window's size in instructions. `dep` is the same loop with each
 * address taking the load before's value (ANDed with a zero the compiler cannot see): one load's
 * latency, walk included, with nothing overlapping.
 *
 * usage: chase scan HOT_BYTES REGION_BYTES STREAMS STEPS SEED
 * prints: ns_hot=<f> ns_alone=<f> huge_bytes=<n>: the scan probe, on 2MB pages. STEPS iterations,
 * each one step of a dependent chase over a random cycle of HOT_BYTES of lines, then STREAMS
 * independent loads at random lines of REGION_BYTES (a power of two lines; addresses from a xorshift kept in a
 * register). An iteration takes at least the hot step's latency, since the hot chain runs
 * through every iteration. Between two reads of a hot line HOT_BYTES / 64 x (1 + STREAMS)
 * distinct lines pass: where that is more than the caches hold, an LRU hierarchy misses every
 * hot read, and one that keeps lines read again (scan resistance) does not. `ns_alone` is the
 * same loop with a hot cycle of one line (the random loads alone).
 *
 * usage: chase sweep FOOTPRINT_BYTES PAGES(4k|2m) STEPS
 * prints: ns_page=<f> huge_bytes=<n>: the stream probe. STEPS 8-byte reads in address order over
 * FOOTPRINT (a power of two bytes), wrapping, each added to a sum: no read waits on another, and
 * a 4KB page is crossed every 512 reads. ns per 4KB page (512 reads), after one untimed pass. On
 * 4KB pages each crossing needs the next page's translation, on 2MB pages one in 512 does: where
 * the two take the same time, the machine translates a stream's next page ahead of it.
 *
 * usage: chase clock STEPS
 * prints: ns_per_add=<f>: STEPS additions, each taking the one before's result, so each takes
 * one cycle (an integer add's latency on every x86-64 and AArch64 core) and 1 / ns_per_add is
 * the clock the core runs at now, which a virtual machine's /proc/cpuinfo does not tell (it
 * gives the nominal clock, not the boosted one). Exit status 3 on other architectures.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MAX_CHAINS 64

static uint64_t rng;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

/* Line i of the chase: (stride 64, dense) the i-th 64-byte line; (stride 0, sparse) a line of the
 * i-th 4KB page at an offset a multiplicative hash of i picks; else the line at i * stride. */
static char *line_at(char *buf, uint64_t i, uint64_t stride) {
    if (stride) return buf + i * stride;
    return buf + i * 4096 + ((i * 2654435761u) >> 7) % 64 * 64;
}

/* Nanoseconds from a to b. */
static double ns_between(struct timespec a, struct timespec b) {
    return (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
}
/* The plain dependent chase: `steps` loads from p, the pointer kept in a register, so each
 * step's latency is the load's alone. */
static char *chase1(char *p, uint64_t steps) {
    for (uint64_t i = 0; i < steps; i++) p = *(char **)p;
    return p;
}
/* The plain chase from *p: `warm` loads untimed, then `steps` loads timed; ns per load. Until the
 * twenty-seventh session the latency points went through chase_ns with k = 1, whose pointer
 * lives in q[] in memory: each step then also waited for its store to reach the next load
 * (store-to-load forwarding), a few cycles on every level's latency (9.2 cycles for L1 on a
 * Zen 2, whose documented L1 latency is 4-5). */
static double chase_plain_ns(char **p, uint64_t warm, uint64_t steps) {
    struct timespec a, b;
    *p = chase1(*p, warm);
    clock_gettime(CLOCK_MONOTONIC, &a);
    *p = chase1(*p, steps);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ns_between(a, b) / (double)(steps ? steps : 1);
}
/* k chases stepped in turn from q[0..k) (left where they stopped): `warm` loads untimed, then
 * `steps` loads timed; ns per load. Each chain's pointer lives in q[], so every step also pays
 * a store-to-load forwarding: the walk probe compares 4KB with 2MB pages at the same k, where
 * that cost is the same on both sides. */
static double chase_ns(char **q, int k, uint64_t warm, uint64_t steps) {
    uint64_t rounds = steps / k ? steps / k : 1, warm_rounds = warm / k;
    for (uint64_t r = 0; r < warm_rounds; r++)
        for (int j = 0; j < k; j++) q[j] = *(char **)q[j];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (uint64_t r = 0; r < rounds; r++)
        for (int j = 0; j < k; j++) q[j] = *(char **)q[j];
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ns_between(a, b) / (double)(rounds * k);
}

/* `steps` dependent adds (rounded up to 64), in blocks of 64 so the loop's own counter and
 * branch run beside the chain; ns per add. Each adds a register, not an immediate: Golden Cove
 * and Raptor Cove fold chains of add-immediate at rename. On the Emerald Rapids VM of the
 * thirty-first session `addq $1` ran at 0.06-0.08 ns an add ("13-17 GHz"), `addq %reg` at 0.343
 * ns (2.9 GHz), as a chain of imul (3 cycles each) confirmed at 1.04 ns. */
static int add_chain_ns(uint64_t steps, double *ns) {
#if defined(__x86_64__) || defined(__aarch64__)
    uint64_t x = 0, one = 1, blocks = (steps + 63) / 64;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (uint64_t i = 0; i < blocks; i++) {
#if defined(__x86_64__)
        __asm__ volatile(".rept 64\n\taddq %1, %0\n\t.endr" : "+r"(x) : "r"(one));
#else
        __asm__ volatile(".rept 64\n\tadd %0, %0, %1\n\t.endr" : "+r"(x) : "r"(one));
#endif
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    *ns = ns_between(a, b) / (double)(blocks * 64);
    return x == blocks * 64;
#else
    (void)steps; (void)ns;
    return -1;
#endif
}
/* `bytes` rounded up to whole 2MB, mapped anonymous at a 2MB boundary and advised onto 2MB pages
 * (`huge`) or 4KB ones; its length in *len. NULL (with the reason printed) where either fails. */
static char *mapped(uint64_t bytes, int huge, uint64_t *len) {
    uint64_t align = 2u << 20;
    *len = (bytes + align - 1) / align * align;
    char *raw = mmap(0, *len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) { perror("mmap"); return NULL; }
    char *buf = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    if (madvise(buf, *len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE)) { perror("madvise"); return NULL; }
    return buf;
}

/* The window probe's loop (usage above): `steps` loads from `buf`'s `lines` 64-byte lines, each
 * followed by PADS x 4 register adds; DEP: each address takes the load before's value ANDed with
 * zero. ns per load. */
#if defined(__x86_64__)
#define WINDOW_ADDS(n) __asm__ volatile(".rept " #n "\n\taddq %4, %0\n\taddq %4, %1\n\taddq %4, %2\n\taddq %4, %3\n\t.endr" \
                                        : "+r"(a), "+r"(b), "+r"(c), "+r"(d) : "r"(one))
#elif defined(__aarch64__)
#define WINDOW_ADDS(n) __asm__ volatile(".rept " #n "\n\tadd %0, %0, %4\n\tadd %1, %1, %4\n\tadd %2, %2, %4\n\tadd %3, %3, %4\n\t.endr" \
                                        : "+r"(a), "+r"(b), "+r"(c), "+r"(d) : "r"(one))
#endif
#ifdef WINDOW_ADDS
#define WINDOW_LOOP(NAME, PADS, DEP) \
    static double NAME(char *buf, uint64_t lines, uint64_t steps, uint64_t seed, uint64_t *sink) { \
        uint64_t r = seed, a = 0, b = 0, c = 0, d = 0, one = 1, sum = 0, zero = 0; \
        __asm__ volatile("" : "+r"(zero)); \
        struct timespec t0, t1; \
        clock_gettime(CLOCK_MONOTONIC, &t0); \
        for (uint64_t i = 0; i < steps; i++) { \
            r ^= r << 13; r ^= r >> 7; r ^= r << 17; \
            uint64_t v = *(volatile uint64_t *)(buf + (uint64_t)(((unsigned __int128)r * lines) >> 64) * 64); \
            sum += v; \
            if (DEP) r ^= v & zero; \
            WINDOW_ADDS(PADS); \
        } \
        clock_gettime(CLOCK_MONOTONIC, &t1); \
        *sink ^= sum ^ a ^ b ^ c ^ d; \
        return ns_between(t0, t1) / (double)(steps ? steps : 1); \
    }
WINDOW_LOOP(window_dep, 0, 1)
WINDOW_LOOP(window_p0, 0, 0)
WINDOW_LOOP(window_p16, 4, 0)
WINDOW_LOOP(window_p32, 8, 0)
WINDOW_LOOP(window_p64, 16, 0)
WINDOW_LOOP(window_p96, 24, 0)
WINDOW_LOOP(window_p192, 48, 0)
/* The adds after each load, and the loop that runs them. */
static const int WINDOW_PADS[] = {0, 16, 32, 64, 96, 192};
static double (*const WINDOW_RUN[])(char *, uint64_t, uint64_t, uint64_t, uint64_t *) = {window_p0, window_p16, window_p32, window_p64, window_p96, window_p192};
#endif

/* The scan probe's loop (usage above): `steps` iterations of one step of the hot chain at *p and
 * `streams` loads at random lines of `region`'s `lines` lines. Returns ns an iteration. */
static double scan_ns(char **p, char *region, uint64_t lines, int streams, uint64_t steps, uint64_t seed, uint64_t *sink) {
    uint64_t x = seed | 1, s = 0;
    char *q = *p;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t i = 0; i < steps; i++) {
        q = *(char **)q;
        for (int r = 0; r < streams; r++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            s += *(volatile uint64_t *)(region + (x & (lines - 1)) * 64);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *p = q;
    *sink += s;
    return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)steps;
}

/* The stream probe's loop (usage above): `steps` reads of `t`'s `words` words (a power of two)
 * in order, wrapping. Returns ns per 512 reads (a 4KB page). */
static double sweep_ns(const uint64_t *t, uint64_t words, uint64_t steps, uint64_t *sink) {
    uint64_t s = 0, mask = words - 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t i = 0; i < steps; i++) s += t[i & mask];
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *sink += s;
    return ns_between(t0, t1) * 512.0 / (double)(steps ? steps : 1);
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
    if (argc == 3 && strcmp(argv[1], "clock") == 0) {
        double ns;
        int ok = add_chain_ns(strtoull(argv[2], 0, 10), &ns);
        if (ok < 0) { fprintf(stderr, "chase: clock: no add chain for this architecture\n"); return 3; }
        printf("ns_per_add=%.5f sink=%d\n", ns, ok);
        return 0;
    }
    if (argc == 6 && strcmp(argv[1], "window") == 0) {
#ifdef WINDOW_ADDS
        uint64_t bytes = strtoull(argv[2], 0, 10), steps = strtoull(argv[4], 0, 10), seed = strtoull(argv[5], 0, 10) | 1;
        int huge = strcmp(argv[3], "2m") == 0;
        uint64_t len, lines = bytes / 64;
        if (lines < 2) { fprintf(stderr, "chase: window footprint %llu is too small\n", (unsigned long long)bytes); return 2; }
        char *buf = mapped(bytes, huge, &len);
        if (!buf) return 1;
        memset(buf, 1, len);
        uint64_t sink = 0;
        window_p0(buf, lines, steps / 4, seed, &sink); /* warm the TLBs and caches as the runs will find them */
        printf("dep=%.4f", window_dep(buf, lines, steps / 4, seed, &sink));
        for (size_t i = 0; i < sizeof WINDOW_PADS / sizeof *WINDOW_PADS; i++) printf(" ns_p%d=%.4f", WINDOW_PADS[i], WINDOW_RUN[i](buf, lines, steps, seed + i, &sink));
        printf(" huge_bytes=%ld sink=%d\n", anon_huge_kb() * 1024, (int)(sink & 1));
        return 0;
#else
        fprintf(stderr, "chase: window: no add chain for this architecture\n");
        return 3;
#endif
    }
    if (argc == 5 && strcmp(argv[1], "sweep") == 0) {
        uint64_t bytes = strtoull(argv[2], 0, 10), steps = strtoull(argv[4], 0, 10), len;
        int huge = strcmp(argv[3], "2m") == 0;
        uint64_t words = bytes / 8;
        if (words < 512 || (words & (words - 1))) { fprintf(stderr, "chase: sweep needs a power of two bytes, at least 4KiB\n"); return 2; }
        uint64_t *t = (uint64_t *)mapped(bytes, huge, &len);
        if (!t) return 1;
        for (uint64_t i = 0; i < words; i++) t[i] = i;
        uint64_t sink = 0;
        sweep_ns(t, words, words, &sink); /* one pass untimed: every page touched, as the runs find them */
        double ns = sweep_ns(t, words, steps, &sink);
        printf("ns_page=%.4f huge_bytes=%ld sink=%d\n", ns, anon_huge_kb() * 1024, (int)(sink & 1));
        return 0;
    }
    if (argc == 7 && strcmp(argv[1], "scan") == 0) {
        uint64_t hot = strtoull(argv[2], 0, 10), region = strtoull(argv[3], 0, 10), steps = strtoull(argv[5], 0, 10);
        long streams = strtol(argv[4], 0, 10);
        rng = strtoull(argv[6], 0, 10) | 1;
        uint64_t n = hot / 64, lines = region / 64, hlen, rlen;
        if (n < 2 || lines < 2 || (lines & (lines - 1)) || streams < 0 || streams > 64) {
            fprintf(stderr, "chase: scan needs two hot lines, a region of a power of two lines and 0..64 streams\n");
            return 2;
        }
        char *h = mapped(hot, 1, &hlen), *b = mapped(region, 1, &rlen);
        if (!h || !b) return 1;
        memset(h, 1, hlen);
        memset(b, 1, rlen);
        uint32_t *perm = malloc(n * sizeof *perm);
        if (!perm) { perror("malloc"); return 1; }
        for (uint64_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
        for (uint64_t i = n - 1; i > 0; i--) { uint64_t j = next() % i; uint32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
        for (uint64_t i = 0; i < n; i++) *(char **)(h + (uint64_t)perm[i] * 64) = h + (uint64_t)perm[(i + 1) % n] * 64;
        free(perm);
        char *p = h, *one = b;
        *(char **)one = one; /* the cycle of one line: the random loads alone */
        uint64_t sink = 0, seed = rng;
        scan_ns(&p, b, lines, (int)streams, 2 * n, seed, &sink); /* every hot line read once before timing */
        double with_hot = scan_ns(&p, b, lines, (int)streams, steps, seed + 1, &sink);
        double alone = scan_ns(&one, b, lines, (int)streams, steps, seed + 2, &sink);
        printf("ns_hot=%.4f ns_alone=%.4f huge_bytes=%ld sink=%d\n", with_hot, alone, anon_huge_kb() * 1024, (int)((sink ^ (uintptr_t)p ^ (uintptr_t)one) & 1));
        return 0;
    }
    if (argc < 5 || argc > 7) { fprintf(stderr, "usage: chase FOOTPRINT PAGES(4k|2m) STEPS SEED [dense|sparse|strided:BYTES [CHAINS]]\n"); return 2; }
    /* The distance between lines: 64 (dense), 0 (sparse: one a 4KB page, see line_at), BYTES. */
    uint64_t stride = 64;
    if (argc >= 6 && strcmp(argv[5], "sparse") == 0) stride = 0;
    else if (argc >= 6 && strncmp(argv[5], "strided:", 8) == 0) {
        stride = strtoull(argv[5] + 8, 0, 10);
        if (stride < 64 || stride % 64) { fprintf(stderr, "chase: stride '%s' is not a multiple of 64\n", argv[5] + 8); return 2; }
    } else if (argc >= 6 && strcmp(argv[5], "dense") != 0) { fprintf(stderr, "chase: layout '%s' is not dense, sparse or strided:BYTES\n", argv[5]); return 2; }
    /* The chain counts to run (CHAINS), at most MAX_CHAINS of them, each 1..MAX_CHAINS. */
    int chains[MAX_CHAINS], nchains = 0;
    if (argc == 7) {
        for (char *tok = strtok(argv[6], ","); tok; tok = strtok(0, ",")) {
            long k = strtol(tok, 0, 10);
            if (k < 1 || k > MAX_CHAINS || nchains == MAX_CHAINS) { fprintf(stderr, "chase: chain count '%s' is not 1..%d\n", tok, MAX_CHAINS); return 2; }
            chains[nchains++] = (int)k;
        }
    }
    uint64_t bytes = strtoull(argv[1], 0, 10), steps = strtoull(argv[3], 0, 10);
    int huge = strcmp(argv[2], "2m") == 0;
    rng = strtoull(argv[4], 0, 10) | 1;
    uint64_t len;
    char *buf = mapped(bytes, huge, &len);
    if (!buf) return 1;
    uint64_t unit = stride ? stride : 4096, n = bytes / unit;
    if (n < 2) n = 2;
    if (n * unit > len) { fprintf(stderr, "chase: footprint %llu is too small\n", (unsigned long long)bytes); return 2; }
    /* A random cyclic order of the n lines (Sattolo's algorithm), stored as next pointers. */
    uint32_t *perm = malloc(n * sizeof *perm);
    if (!perm) { perror("malloc"); return 1; }
    for (uint64_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    for (uint64_t i = n - 1; i > 0; i--) { uint64_t j = next() % i; uint32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    for (uint64_t i = 0; i < n; i++) *(char **)line_at(buf, perm[i], stride) = line_at(buf, perm[(i + 1) % n], stride);
    /* Chain j of k enters the cycle at its (j * n / k)-th line. */
    static char *entry[MAX_CHAINS][MAX_CHAINS];
    for (int c = 0; c < nchains; c++)
        for (int j = 0; j < chains[c]; j++) entry[c][j] = line_at(buf, perm[(uint64_t)j * n / chains[c]], stride);
    free(perm);
    long huge_kb = anon_huge_kb();
    uint64_t warm = n < steps ? n : steps;
    if (nchains == 0) {
        char *p = buf;
        double ns = chase_plain_ns(&p, warm, steps);
        printf("ns_per_step=%.4f huge_bytes=%ld sink=%d\n", ns, huge_kb * 1024, (int)((uintptr_t)p & 1));
        return 0;
    }
    double ns[MAX_CHAINS];
    uintptr_t sink = 0;
    for (int c = 0; c < nchains; c++) {
        ns[c] = chase_ns(entry[c], chains[c], warm, steps);
        for (int j = 0; j < chains[c]; j++) sink ^= (uintptr_t)entry[c][j];
    }
    printf("ns_per_step=%.4f huge_bytes=%ld sink=%d", ns[0], huge_kb * 1024, (int)(sink & 1));
    for (int c = 0; c < nchains; c++) printf(" ns_k%d=%.4f", chains[c], ns[c]);
    printf("\n");
    return 0;
}
