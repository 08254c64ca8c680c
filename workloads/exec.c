/* The program of an exec microbenchmark: what a short-lived process does between its exec and
 * its exit. The dynamic loader maps the C library (shared by every run), the program maps a
 * shared data file read-only (as programs map a locale archive or a dictionary) and reads a
 * sample of its pages, and it calls into libc (formatting, parsing, sorting, searching) so
 * that the library's code is fetched. `superpager workloads capture exec` runs it many times,
 * each run captured on its own (capture does not follow exec), and joins the runs into one
 * trace of many processes (Solomon's exec microbenchmark; lmbench's lat_proc exec).
 * usage: exec FILE [pages to read (default 64)] */
#define _GNU_SOURCE /* memmem */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: exec FILE [pages]\n");
        return 2;
    }
    long pages = argc > 2 ? strtol(argv[2], NULL, 10) : 64;
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
        perror(argv[1]);
        return 1;
    }
    const char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        perror("exec: mmap");
        return 1;
    }
    long npages = (long)((st.st_size + 4095) / 4096);
    /* Parse numbers out of a sample of the file's pages, spread over all of it. */
    size_t n = 0, cap = 4096;
    double *v = malloc(cap * sizeof *v);
    char buf[64];
    for (long i = 0; i < pages && v; i++) {
        long pg = (i * 7919) % npages;
        const char *p = m + pg * 4096, *end = m + st.st_size;
        for (int k = 0; k < 16 && p < end; k++) {
            while (p < end && (*p < '0' || *p > '9'))
                p++;
            char *e;
            double d = strtod(p, &e);
            if (e == p)
                break;
            p = e;
            if (n == cap) {
                cap *= 2;
                v = realloc(v, cap * sizeof *v);
                if (!v)
                    break;
            }
            v[n++] = d;
        }
    }
    if (!v) {
        perror("exec: malloc");
        return 1;
    }
    qsort(v, n, sizeof *v, cmp);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        snprintf(buf, sizeof buf, "%.3f", v[i]);
        sum += strlen(buf);
    }
    size_t head = st.st_size < 65536 ? (size_t)st.st_size : 65536;
    const char *hit = memmem(m, head, "zq", 2);
    printf("exec: %zu numbers, median %g, %g chars, first zq in the first 64KiB at %ld\n", n, n ? v[n / 2] : 0.0, sum,
           hit ? (long)(hit - m) : -1L);
    free(v);
    munmap((void *)m, (size_t)st.st_size);
    close(fd);
    return 0;
}
