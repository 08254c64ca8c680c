/* model_access: the programs the runtime model is checked against (superpager bench --model,
 * docs/RUNTIME_MODEL.md). Each builds a table of MiB mebibytes, reads it once through (the warm
 * pass, below), issues a zero-length madvise (the phase mark: the simulator costs what follows
 * it), then times an access phase:
 *   rand      independent random 8-byte reads (summed)
 *   gups      random read-modify-write of 8-byte words (HPC Challenge RandomAccess's generator)
 *   chase     a dependent pointer chase: word i holds the next index of a full-period LCG
 *             modulo the (power-of-two) word count (Knuth, TAOCP vol. 2, 3.2.1.2)
 *   bsearch   binary searches of random keys in a sorted array of 8-byte keys
 *   btree     lookups of random keys in a B-tree of 64-byte nodes (7 keys each), built level by
 *             level from sorted keys; each lookup descends root to leaf, a dependent chain
 *   hashjoin  the probe phase of a hash join: random keys looked up in an open-addressing table
 *             of 16-byte (key, payload) slots, linear probing, half full
 *   stream    a sequential sweep of 8-byte reads, wrapping around the table
 * and two crossings of rand and gups, not in the bench, to tell their generators from their
 * stores (docs/RUNTIME_MODEL.md, "What-ifs on the 4GiB misses"):
 *   gupsread  gups's generator, the words read and summed (no stores)
 *   randrmw   rand's generator, the words read, changed and written back
 * and one of bsearch, in the bench only when asked (`--model-programs`), to tell its branches
 * from its loads (docs/RUNTIME_MODEL.md, "A binary search without branches"):
 *   bsearchcmov  bsearch's searches, the same probes in the same order, with the half picked by
 *             a mask instead of a branch, so the next probe's address waits on the loaded key
 * and one of btree, likewise only when asked, to tell the node scan's branches from its loads
 * (docs/RUNTIME_MODEL.md, "A B-tree without branches"):
 *   btreecmov  btree's lookups, the same nodes in the same order, with the child picked by
 *             counting the node's keys below the key instead of a loop that leaves at the first
 *             key at or above it, so the next node's address waits on the loaded keys
 * and one of stream, likewise only when asked, to time a sweep by memory rather than by its
 * index's division (docs/RUNTIME_MODEL.md, "A sweep without a division"):
 *   sweep     stream's reads, the same words in the same order, the index wrapped by a compare
 *             instead of stream's modulo (a 64-bit division an element, which sets stream's pace)
 * usage: model_access KIND MiB [ops (millions; default: rand/gups/hashjoin and the crossings 8,
 *        chase 4, bsearch/bsearchcmov/btree/btreecmov 1, stream 64, sweep 256)]
 * prints one line of key=value: populate_s access_s ops checksum table_offset (the table's
 * address modulo 2MiB: 0, wherever malloc put it) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define POLY 0x0000000000000007ULL /* HPCC RandomAccess's generator polynomial */
#define TABLE_ALIGN ((size_t)2 << 20) /* where the table starts: a 2MB boundary (main) */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void) /* xorshift64*, fixed seed: the same accesses every run */
{
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

static const char *KINDS[] = {"rand", "gups", "chase", "bsearch", "btree", "hashjoin", "stream", "gupsread", "randrmw", "bsearchcmov", "btreecmov", "sweep"};
static const double DEFAULT_OPS[] = {8, 8, 4, 1, 1, 8, 64, 8, 8, 1, 1, 256};
enum { RAND, GUPS, CHASE, BSEARCH, BTREE, HASHJOIN, STREAM, GUPSREAD, RANDRMW, BSEARCHCMOV, BTREECMOV, SWEEP, NKINDS };

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: model_access rand|gups|chase|bsearch|btree|hashjoin|stream|gupsread|randrmw|bsearchcmov|btreecmov|sweep MiB [ops millions]\n");
        return 2;
    }
    int k = -1;
    for (int i = 0; i < NKINDS; i++)
        if (!strcmp(argv[1], KINDS[i]))
            k = i;
    size_t mib = strtoull(argv[2], 0, 0);
    if (k < 0 || mib == 0) {
        fprintf(stderr, "model_access: unknown kind '%s' or zero size\n", argv[1]);
        return 2;
    }
    size_t ops = (size_t)((argc > 3 ? strtod(argv[3], 0) : DEFAULT_OPS[k]) * 1e6);
    size_t bytes = mib << 20, words = bytes / 8;
    /* The table starts on a 2MB boundary under every policy, so the base and thp runs (and the
     * capture) lay it out alike. glibc's malloc put it 16 bytes past a page boundary, the thp
     * shim on a 2MB boundary: btree's 64-byte nodes then straddled two lines in the base runs
     * and sat in one each in the thp runs. A node a line alone made a lookup about 20% slower
     * on the Zen 5 VM, on either page size, so the bench measured 2MB pages slower than 4KB
     * (docs/RUNTIME_MODEL_HISTORY.md, "One layout"). */
    char *raw = malloc(bytes + TABLE_ALIGN);
    if (!raw) {
        perror("model_access: malloc");
        return 1;
    }
    uint64_t *t = (uint64_t *)(((uintptr_t)raw + TABLE_ALIGN - 1) & ~(uintptr_t)(TABLE_ALIGN - 1));
    double t0 = now();
    size_t n = 0; /* keys (bsearch, btree) or slots (hashjoin) */
    if (k == CHASE) {
        if (words & (words - 1)) {
            fprintf(stderr, "model_access: chase needs a power-of-two size in MiB, got %zu\n", mib);
            return 2;
        }
        for (size_t i = 0; i < words; i++) /* Knuth's MMIX LCG constants */
            t[i] = (6364136223846793005ULL * i + 1442695040888963407ULL) & (words - 1);
    } else if (k == BTREE || k == BTREECMOV) {
        /* Nodes of 8 words: word 0 = number of keys' level marker unused, words 1..7 keys.
         * Implicit layout: node i's children are 8i+1 .. 8i+8 (a complete 8-ary tree in
         * breadth-first order); keys are filled in order by an in-order walk below. */
        n = words / 8;
        for (size_t i = 0; i < words; i++)
            t[i] = UINT64_MAX;
        /* In-order fill without recursion: visit nodes in key order with an explicit stack. */
        size_t stack[64][2], sp = 0, key = 1;
        stack[sp][0] = 0, stack[sp][1] = 0, sp++;
        while (sp) {
            size_t node = stack[sp - 1][0], c = stack[sp - 1][1];
            if (node >= n || c > 7) {
                sp--;
                continue;
            }
            stack[sp - 1][1]++;
            if (c > 0)
                t[node * 8 + c] = key, key += 2; /* after child c-1: key c */
            if (c < 8 && 8 * node + 1 + c < n && sp < 64)
                stack[sp][0] = 8 * node + 1 + c, stack[sp][1] = 0, sp++;
        }
    } else if (k == HASHJOIN) {
        n = words / 2; /* (key, payload) slots, a power of two when MiB is */
        for (size_t i = 0; i < words; i++)
            t[i] = 0;
        for (size_t i = 0; i < n / 2; i++) {
            uint64_t key = 2 * i + 1, h = (key * 0x9E3779B97F4A7C15ULL) % n;
            while (t[2 * h])
                h = (h + 1) % n;
            t[2 * h] = key, t[2 * h + 1] = i;
        }
    } else {
        for (size_t i = 0; i < words; i++)
            t[i] = 2 * i + 1; /* sorted odd keys */
        n = words;
    }
    /* The warm pass: one read of every line of the freshly written table, so the access phase
     * times the steady state. On the Zen 5 VM the first read pass over a table of more than 1GiB
     * that a process had just written ran up to 2x slower on 4KB pages than every later pass
     * (docs/RUNTIME_MODEL_HISTORY.md, "Warm tables"), a cost of the host's that no model of the guest
     * sees; without this pass it decided the 4GiB rows. Captured too, so the simulator's caches
     * and TLBs start the phase as the machine's do. */
    volatile uint64_t warm = 0;
    for (size_t i = 0; i < words; i += 8)
        warm += t[i];
    /* The phase mark: a zero-length madvise (at a page-aligned address, or the kernel refuses
     * it and the capture records nothing). */
    if (madvise((void *)((uintptr_t)t & ~(uintptr_t)4095), 0, MADV_NORMAL))
        perror("model_access: madvise (phase mark)");
    double t1 = now();
    uint64_t sum = 0;
    switch (k) {
    case RAND:
        for (size_t i = 0; i < ops; i++)
            sum += t[next() % words];
        break;
    case GUPS: {
        uint64_t ran = 1;
        for (size_t i = 0; i < ops; i++) {
            ran = (ran << 1) ^ ((int64_t)ran < 0 ? POLY : 0);
            t[ran % words] ^= ran;
        }
        sum = t[ops % words];
        break;
    }
    case GUPSREAD: {
        uint64_t ran = 1;
        for (size_t i = 0; i < ops; i++) {
            ran = (ran << 1) ^ ((int64_t)ran < 0 ? POLY : 0);
            sum += t[ran % words];
        }
        break;
    }
    case RANDRMW:
        for (size_t i = 0; i < ops; i++) {
            uint64_t r = next();
            t[r % words] ^= r;
        }
        sum = t[ops % words];
        break;
    case CHASE: {
        uint64_t p = 0;
        for (size_t i = 0; i < ops; i++)
            p = t[p];
        sum = p;
        break;
    }
    case BSEARCH:
        for (size_t i = 0; i < ops; i++) {
            uint64_t key = next() % (2 * words);
            size_t lo = 0, hi = words;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (t[mid] < key)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            sum += lo < words && t[lo] == key;
        }
        break;
    case BSEARCHCMOV:
        /* bsearch without its branch: the core cannot guess which half comes next and run
         * ahead down it, so each probe's address, and its walk, waits for the key before it
         * (the mask compiles to conditional moves, or to and/or; never to a jump on the key). */
        for (size_t i = 0; i < ops; i++) {
            uint64_t key = next() % (2 * words);
            size_t lo = 0, hi = words;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                size_t below = -(size_t)(t[mid] < key); /* all ones where the key is above mid */
                lo = ((mid + 1) & below) | (lo & ~below);
                hi = (hi & below) | (mid & ~below);
            }
            sum += lo < words && t[lo] == key;
        }
        break;
    case BTREE:
        for (size_t i = 0; i < ops; i++) {
            uint64_t key = next() % (2 * n * 7);
            size_t node = 0;
            while (node < n) {
                size_t c = 1;
                while (c <= 7 && t[node * 8 + c] < key)
                    c++;
                if (c <= 7 && t[node * 8 + c] == key) {
                    sum++;
                    break;
                }
                node = 8 * node + c; /* child c-1 of node: 8*node + 1 + (c-1) */
            }
        }
        break;
    case BTREECMOV:
        /* btree without the scan's branches: the child is 1 + the number of the node's keys
         * below the key (sorted keys, so the same child the scan leaves at), summed from
         * compares (set-on-below and adds, never a jump on a key), so the core cannot guess
         * the child and run ahead into it: the next node's address, and its walk, waits for
         * this node's keys. Two branches are left, and neither picks the child: the found
         * key's exit, rarely taken above the last level a lookup reaches, and the loop's own at
         * a leaf. The found check reads word c & 7, word 0 (never a key) where c is 8, so no
         * compare on c branches either. Every read is in the node's line, so the lines read,
         * and their order, are btree's. */
        for (size_t i = 0; i < ops; i++) {
            uint64_t key = next() % (2 * n * 7);
            size_t node = 0;
            while (node < n) {
                const uint64_t *keys = t + node * 8;
                size_t c = 1 + (keys[1] < key) + (keys[2] < key) + (keys[3] < key) + (keys[4] < key) +
                           (keys[5] < key) + (keys[6] < key) + (keys[7] < key);
                if (keys[c & 7] == key) {
                    sum++;
                    break;
                }
                node = 8 * node + c;
            }
        }
        break;
    case HASHJOIN:
        for (size_t i = 0; i < ops; i++) {
            uint64_t key = next() % n | 1, h = (key * 0x9E3779B97F4A7C15ULL) % n;
            while (t[2 * h] && t[2 * h] != key)
                h = (h + 1) % n;
            sum += t[2 * h + 1];
        }
        break;
    case STREAM:
        for (size_t i = 0; i < ops; i++)
            sum += t[i % words];
        break;
    case SWEEP: {
        /* stream's reads in stream's order, the wrap a compare: nothing but the loads and the
         * adds sets its pace, so memory's line rate and the prefetcher do. */
        size_t j = 0;
        for (size_t i = 0; i < ops; i++) {
            sum += t[j];
            if (++j == words)
                j = 0;
        }
        break;
    }
    }
    double t2 = now();
    printf("model_access kind=%s mib=%zu ops=%zu populate_s=%.4f access_s=%.4f checksum=%llx table_offset=%zu\n", KINDS[k], mib, ops,
           t1 - t0, t2 - t1, (unsigned long long)sum, (size_t)((uintptr_t)t & (TABLE_ALIGN - 1)));
    return 0;
}
