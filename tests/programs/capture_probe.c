/* The capture check's probe: touches a known set of pages of its own mapping in a known order,
 * and at a marked point copies the address space as the kernel (here: qemu-user) shows it.
 * usage: capture_probe MAPS_OUT [fork]
 *   1. mmap 64 pages; store to page (i * 37) % 64 for i < 48 (48 distinct pages), then load
 *      from the same pages in reverse order; 8-byte volatile accesses at offset 8 * i.
 *   2. madvise(first page, MADV_NORMAL) — the marker; then copy /proc/self/maps to MAPS_OUT;
 *      print how many of the 64 pages mincore() finds resident.
 *   3. with "fork": fork a child that stores to 5 pages of a new mapping, and start a thread
 *      that stores to 3 pages; wait for both. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGES 64
#define TOUCHED 48

static void *thread_main(void *arg)
{
    volatile uint64_t *q = mmap(0, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < 3; i++) q[i * 512] = 7;
    return arg;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    volatile uint64_t *p = mmap(0, PAGES * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 3;
    for (int i = 0; i < TOUCHED; i++) p[((i * 37) % PAGES) * 512 + i] = (uint64_t)i;
    uint64_t sum = 0;
    for (int i = TOUCHED - 1; i >= 0; i--) sum += p[((i * 37) % PAGES) * 512 + i];
    madvise((void *)p, 4096, MADV_NORMAL); /* the marker: changes nothing */
    char buf[65536];
    int in = open("/proc/self/maps", O_RDONLY), out = open(argv[1], O_CREAT | O_TRUNC | O_WRONLY, 0644);
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0) (void)!write(out, buf, (size_t)n);
    close(in);
    close(out);
    unsigned char vec[PAGES];
    int resident = 0;
    if (mincore((void *)p, PAGES * 4096, vec) == 0)
        for (int i = 0; i < PAGES; i++) resident += vec[i] & 1;
    printf("probe: sum %llu resident %d\n", (unsigned long long)sum, resident);
    fflush(stdout);
    if (argc > 2) {
        pid_t c = fork();
        if (c == 0) {
            volatile uint64_t *q = mmap(0, 5 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            for (int i = 0; i < 5; i++) q[i * 512] = 1;
            _exit(0);
        }
        pthread_t t;
        pthread_create(&t, NULL, thread_main, NULL);
        pthread_join(t, NULL);
        waitpid(c, NULL, 0);
    }
    return 0;
}
