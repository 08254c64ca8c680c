/* A known pattern inside pages, for `capture --collapse line` (tests/test_capture_collapse_line.py):
 * in each of the first four pages of a five-page anonymous mapping, 16 lines in a scattered order
 * (line (7p + 13j) mod 64 for j = 0..15), two 8-byte loads each (bytes 0 and 8 of the line). */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>

int main(void)
{
    volatile uint64_t *m = mmap(NULL, 5 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 1;
    uint64_t sum = 0;
    for (unsigned p = 0; p < 4; p++)
        for (unsigned j = 0; j < 16; j++) {
            unsigned line = (7 * p + 13 * j) % 64;
            sum += m[p * 512 + line * 8];
            sum += m[p * 512 + line * 8 + 1];
        }
    printf("%llu\n", (unsigned long long)sum);
    return 0;
}
