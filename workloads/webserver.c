/* A small-file web server's reads: create many small files, then serve requests by opening a
 * file (Zipf-popular), reading it into a buffer, and closing it. Exercises the page cache and
 * file events rather than anonymous memory.
 * usage: webserver [MiB of files (default 64)] [requests in thousands (default 100)] [dir] */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 64;
    size_t reqs = (argc > 2 ? strtoull(argv[2], 0, 0) : 100) * 1000;
    const char *dir = argc > 3 ? argv[3] : "webserver-files";
    size_t nfiles = (mib << 20) / 16384;
    if (nfiles < 1) nfiles = 1;
    mkdir(dir, 0755);
    char path[4096], *buf = malloc(65536);
    if (!buf) { perror("webserver: malloc"); return 1; }
    memset(buf, 'x', 65536);
    uint64_t x = 12345;
    for (size_t i = 0; i < nfiles; i++) { /* 4-28 KiB files */
        snprintf(path, sizeof path, "%s/f%06zu.html", dir, i);
        int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
        if (fd < 0) { perror(path); return 1; }
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t len = 4096 + (x % 6) * 4096;
        if (write(fd, buf, len) != (ssize_t)len) { perror(path); return 1; }
        close(fd);
    }
    /* Zipf(0.9) over the files by inverse-CDF sampling on a precomputed table. */
    double *cdf = malloc(nfiles * sizeof *cdf), s = 0;
    for (size_t i = 0; i < nfiles; i++) s += 1.0 / pow((double)(i + 1), 0.9), cdf[i] = s;
    size_t bytes = 0;
    for (size_t r = 0; r < reqs; r++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        double u = (double)(x >> 11) / 9007199254740992.0 * s;
        size_t lo = 0, hi = nfiles - 1;
        while (lo < hi) { size_t m = (lo + hi) / 2; if (cdf[m] < u) lo = m + 1; else hi = m; }
        snprintf(path, sizeof path, "%s/f%06zu.html", dir, lo);
        int fd = open(path, O_RDONLY);
        if (fd < 0) { perror(path); return 1; }
        ssize_t n;
        while ((n = read(fd, buf, 65536)) > 0) bytes += (size_t)n;
        close(fd);
    }
    for (size_t i = 0; i < nfiles; i++) {
        snprintf(path, sizeof path, "%s/f%06zu.html", dir, i);
        unlink(path);
    }
    rmdir(dir);
    printf("webserver: %zu files, %zu requests, %zu bytes served\n", nfiles, reqs, bytes);
    return 0;
}
