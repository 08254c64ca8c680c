/* thp_probe: a small real program for comparing the simulator's linux-thp with this machine's
 * kernel. It maps four anonymous regions at fixed addresses, advises some of them with
 * MADV_HUGEPAGE / MADV_NOHUGEPAGE, writes to them in different patterns, and records its own
 * address-space calls and page touches as a superpager text trace (argv[1]). Then it prints
 * "ready" and waits, so the caller can read AnonHugePages from /proc/PID/smaps.
 *
 *   A  64MiB at a 2MiB boundary, MADV_HUGEPAGE, every page written
 *   B  32MiB, no advice, every page written
 *   C  40MiB starting 1MiB past a 2MiB boundary, MADV_HUGEPAGE, one page in every third 2MiB
 *   D  16MiB, MADV_HUGEPAGE then MADV_NOHUGEPAGE on its upper half, every page written
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MB (1UL << 20)
#define BASE 0x200000000000UL

static FILE *out;

static char *map(unsigned long addr, unsigned long len) {
    void *p = mmap((void *)addr, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED || (unsigned long)p != addr) {
        perror("mmap");
        exit(3);
    }
    fprintf(out, "mmap %#lx %#lx rw- private|anonymous -1 0x0\n", addr, len);
    return p;
}

static void advise(char *p, unsigned long len, int advice) {
    if (madvise(p, len, advice) != 0) {
        perror("madvise");
        exit(3);
    }
    fprintf(out, "madvise %#lx %#lx %d\n", (unsigned long)p, len, advice);
}

static void touch(char *p) {
    *(volatile char *)p = 1;
    fprintf(out, "S %#lx 8\n", (unsigned long)p);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: thp_probe TRACE.txt\n");
        return 2;
    }
    out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        return 2;
    }
    fprintf(out, "# superpager text trace v1\n# thp_probe: self-recorded trace\nctx 1 1\n");
    char *a = map(BASE, 64 * MB);
    advise(a, 64 * MB, MADV_HUGEPAGE);
    for (unsigned long o = 0; o < 64 * MB; o += 4096) touch(a + o);

    char *b = map(BASE + 1024 * MB, 32 * MB);
    for (unsigned long o = 0; o < 32 * MB; o += 4096) touch(b + o);

    char *c = map(BASE + 2048 * MB + MB, 40 * MB);
    advise(c, 40 * MB, MADV_HUGEPAGE);
    for (unsigned long o = MB; o < 40 * MB; o += 6 * MB) touch(c + o + 8192);

    char *d = map(BASE + 3072 * MB, 16 * MB);
    advise(d, 16 * MB, MADV_HUGEPAGE);
    advise(d + 8 * MB, 8 * MB, MADV_NOHUGEPAGE);
    for (unsigned long o = 0; o < 16 * MB; o += 4096) touch(d + o);

    fclose(out);
    printf("ready\n");
    fflush(stdout);
    pause();
    return 0;
}
