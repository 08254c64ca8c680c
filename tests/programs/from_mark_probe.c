/* The --from-mark check's probe: builds, marks, works.
 * usage: from_mark_probe
 *   1. mmap 64 pages; store twice to page (i * 37) % 64 for i < 48 (48 distinct pages), then
 *      load from each of them once (the build: many accesses per page).
 *      Then address-space events after touches near them: munmap pages 56-59 of the mapping;
 *      grow the break by a page, write it, and grow it by 1MiB more.
 *   2. madvise(p, 0, MADV_NORMAL): a zero-length madvise, the phase mark.
 *   3. load from page (i * 5) % 64 for i < 16 and store to page 63, which the build did not
 *      touch (the work). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGES 64
#define TOUCHED 48

int main(void)
{
    volatile uint64_t *p = mmap(0, PAGES * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 3;
    for (int i = 0; i < TOUCHED; i++) {
        p[((i * 37) % PAGES) * 512 + i] = (uint64_t)i;
        p[((i * 37) % PAGES) * 512 + 256] = (uint64_t)i;
    }
    uint64_t sum = 0;
    for (int i = 0; i < TOUCHED; i++) sum += p[((i * 37) % PAGES) * 512 + 128];
    munmap((void *)(p + 56 * 512), 4 * 4096);
    volatile char *b = sbrk(4096);
    if (b == (void *)-1) return 4;
    b[0] = 1;
    if (sbrk(1 << 20) == (void *)-1) return 5;
    madvise((void *)p, 0, MADV_NORMAL); /* the phase mark */
    for (int i = 0; i < 16; i++) sum += p[((i * 5) % PAGES) * 512];
    p[63 * 512] = sum;
    printf("from_mark_probe: sum %llu\n", (unsigned long long)sum);
    return 0;
}
