/* A process with a known layout for the live tests (tests/test_live.py). Maps, 2MB-aligned:
 *   A  32MiB  MADV_HUGEPAGE, every byte written          -> 16 2MB pages at fault (THP madvise/always)
 *   B  32MiB  MADV_NOHUGEPAGE, every byte written        -> 4KB pages, never collapsed
 *   C  16MiB  MADV_HUGEPAGE, one byte per 2MB written    -> 8 2MB pages, 511/512 of them zeros
 *   D   1MiB  MADV_HUGEPAGE, at a 64KB- but not 2MB-aligned address, written -> 64KB folios when
 *             hugepages-64kB/enabled allows them, else 4KB pages
 *   E  E_MIB (argv[1], default 8) no advice, written    -> 4KB pages a collapse may make huge
 * prints "NAME 0xADDR BYTES" per region, then "ready", then obeys lines on stdin:
 *   check  -> prints "ok" if every region still holds what was written, else "corrupt"
 *   exec   -> execs /bin/sleep 3 (the address space goes away under a live policy)
 *   exit   -> exits 0 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MB (1UL << 20)

static char *map_aligned(size_t len, size_t align, size_t skew)
{
    char *m = mmap(0, len + 2 * align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("live_layout: mmap");
        exit(1);
    }
    char *a = (char *)(((uintptr_t)m + align - 1) & ~(align - 1)) + skew;
    return a;
}

static unsigned char pattern(size_t i) { return (unsigned char)(i * 2654435761u >> 24) | 1; }

int main(int argc, char **argv)
{
    size_t e_mib = argc > 1 ? strtoull(argv[1], 0, 0) : 8;
    struct { const char *name; size_t len; int advice; int sparse; size_t skew; char *p; } r[] = {
        {"A", 32 * MB, MADV_HUGEPAGE, 0, 0, 0},   {"B", 32 * MB, MADV_NOHUGEPAGE, 0, 0, 0},
        {"C", 16 * MB, MADV_HUGEPAGE, 1, 0, 0},   {"D", 1 * MB, MADV_HUGEPAGE, 0, 64 * 1024, 0},
        {"E", e_mib * MB, -1, 0, 0, 0},
    };
    int n = sizeof r / sizeof r[0];
    for (int k = 0; k < n; k++) {
        r[k].p = map_aligned(r[k].len, 2 * MB, r[k].skew);
        if (r[k].advice >= 0)
            madvise(r[k].p, r[k].len, r[k].advice);
        if (r[k].sparse)
            for (size_t i = 0; i < r[k].len; i += 2 * MB)
                r[k].p[i] = 1;
        else
            for (size_t i = 0; i < r[k].len; i++)
                r[k].p[i] = pattern(i);
        printf("%s %p %zu\n", r[k].name, (void *)r[k].p, r[k].len);
    }
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (!strncmp(line, "check", 5)) {
            int ok = 1;
            for (int k = 0; k < n; k++)
                for (size_t i = 0; i < r[k].len; i++) {
                    unsigned char want = r[k].sparse ? (i % (2 * MB) == 0) : pattern(i);
                    ok &= (unsigned char)r[k].p[i] == want;
                }
            printf(ok ? "ok\n" : "corrupt\n");
            fflush(stdout);
        } else if (!strncmp(line, "exec", 4)) {
            execl("/bin/sleep", "sleep", "3", (char *)0);
            perror("live_layout: exec");
            return 1;
        } else if (!strncmp(line, "exit", 4)) {
            return 0;
        }
    }
    return 0;
}
