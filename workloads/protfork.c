/* A workload that changes its mappings under superpages: the events that break ARM
 * contiguous-bit (64KB) and 2MB pages. Like a managed runtime with a forking server, it
 *   1. fills a heap (anonymous memory) and a shared file mapping, both dense;
 *   2. write-protects one page in every 64 of the heap (guard pages, GC card marking);
 *   3. unmaps one page in every 128 (a freed slice);
 *   4. forks children that each write to scattered heap pages and exit (copy on write);
 *   5. writes to a few pages of the clean shared file mapping (dirtying file superpages);
 *   6. reads the heap again.
 * The shared file is FILE when given (opened read-write; its size must be a quarter of the
 * heap's, so that capture sees its size at the open), else a temporary file in the cwd.
 * usage: protfork [MiB of heap (default 32)] [children (default 4)] [FILE] */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096L

int main(int argc, char **argv)
{
    long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 32;
    int kids = argc > 2 ? atoi(argv[2]) : 4;
    if (mib <= 0 || kids < 0) {
        fprintf(stderr, "usage: protfork [MiB > 0] [children >= 0]\n");
        return 2;
    }
    long bytes = mib << 20, pages = bytes / PAGE;
    char *heap = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (heap == MAP_FAILED) {
        perror("protfork: mmap");
        return 1;
    }
    for (long i = 0; i < bytes; i += 64)
        heap[i] = (char)i;

    /* A shared file of a quarter of the heap's size, read whole (clean), in the cwd. */
    long fbytes = bytes / 4;
    char name[] = "protfork-XXXXXX";
    int fd = argc > 3 ? open(argv[3], O_RDWR) : mkstemp(name);
    if (fd < 0 || ftruncate(fd, fbytes) != 0) {
        perror(argc > 3 ? argv[3] : "protfork: file");
        return 1;
    }
    if (argc <= 3)
        unlink(name);
    char *file = mmap(NULL, fbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (file == MAP_FAILED) {
        perror("protfork: mmap file");
        return 1;
    }
    long sum = 0;
    for (long r = 0; r < 2; r++)
        for (long i = 0; i < fbytes; i += 256)
            sum += file[i];

    for (long p = 13; p < pages; p += 64)
        if (mprotect(heap + p * PAGE, PAGE, PROT_READ) != 0) {
            perror("protfork: mprotect");
            return 1;
        }
    for (long p = 101; p < pages; p += 128)
        if (munmap(heap + p * PAGE, PAGE) != 0) {
            perror("protfork: munmap");
            return 1;
        }

    for (int k = 0; k < kids; k++) {
        pid_t c = fork();
        if (c < 0) {
            perror("protfork: fork");
            return 1;
        }
        if (c == 0) {
            uint64_t x = 0x9E3779B97F4A7C15ULL * (uint64_t)(k + 1);
            for (long n = 0; n < pages / 16; n++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                long p = (long)(x % (uint64_t)pages);
                if (p % 64 == 13 || p % 128 == 101)
                    continue; /* read-only or unmapped */
                heap[p * PAGE + (long)(x >> 40) % PAGE] += 1;
            }
            _exit(0);
        }
        int st;
        waitpid(c, &st, 0);
    }

    for (long i = 0; i < fbytes; i += fbytes / 16)
        file[i] = 1;

    for (long p = 0; p < pages; p++)
        if (p % 128 != 101)
            sum += heap[p * PAGE];
    printf("protfork: %ld MiB, %d children, checksum %ld\n", mib, kids, sum);
    return 0;
}
