/* GUPS (HPC Challenge RandomAccess): random read-modify-write updates to a large table.
 * The TLB-hostile workload of the superpage papers (Trident, Solomon, Navarro's "random").
 * usage: gups [table size in MiB (default 256)] [rounds (default 1): rounds x words/4 updates; a fraction
 *        such as 0.25 keeps a large table's trace short] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define POLY 0x0000000000000007ULL /* HPCC RandomAccess's generator polynomial */

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 256;
    double rounds = argc > 2 ? strtod(argv[2], 0) : 1;
    if (!(rounds > 0)) {
        fprintf(stderr, "gups: rounds must be a positive number, got '%s'\n", argv[2]);
        return 2;
    }
    size_t words = (mib << 20) / 8;
    uint64_t *t = malloc(words * 8);
    if (!t) {
        perror("gups: malloc");
        return 1;
    }
    for (size_t i = 0; i < words; i++)
        t[i] = i;
    uint64_t ran[128];
    for (int j = 0; j < 128; j++)
        ran[j] = (uint64_t)j * 0x9e3779b97f4a7c15ULL + 1;
    size_t updates = (size_t)((double)(words / 4) * rounds);
    for (size_t i = 0; i < updates / 128; i++)
        for (int j = 0; j < 128; j++) {
            ran[j] = (ran[j] << 1) ^ ((int64_t)ran[j] < 0 ? POLY : 0);
            t[ran[j] & (words - 1)] ^= ran[j];
        }
    uint64_t sum = 0;
    for (size_t i = 0; i < words; i += 4096)
        sum += t[i];
    printf("gups: %zu updates on %zu MiB, checksum %llx\n", updates, mib, (unsigned long long)sum);
    return 0;
}
