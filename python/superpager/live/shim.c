/* superpager's live shim, LD_PRELOADed by `superpager run` (policies thp and hugetlb-1g).
 *
 * thp:        every anonymous mapping and heap allocation of at least SUPERPAGER_SHIM_MIN bytes
 *             (default 2MiB) is placed at a 2MB-aligned address and advised MADV_HUGEPAGE, so that
 *             the kernel's THP in `madvise` mode backs it with 2MB pages at fault and khugepaged
 *             may collapse it; smaller allocations stay with glibc's malloc.
 * hugetlb-1g: allocations of at least SUPERPAGER_SHIM_MIN bytes (default 1GiB) are mapped with
 *             MAP_HUGETLB|MAP_HUGE_1GB when 1GB pages are reserved; when none is free the
 *             allocation falls back to the thp placement and the fall-back is counted.
 *
 * The program's own anonymous mmap calls are advised too; glibc's malloc calls mmap internally
 * (not through the PLT), so large malloc/calloc/realloc/aligned allocations are served here.
 * Counters go to SUPERPAGER_SHIM_REPORT (one line of key=value) at exit. The shim never touches
 * the contents of memory it did not allocate. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <dlfcn.h>
#include <unistd.h>

#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << 26) /* include/uapi/asm-generic/hugetlb_encode.h: log2(1GB) << MAP_HUGE_SHIFT */
#endif
#define HUGE_2M (2UL << 20)
#define HUGE_1G (1UL << 30)
#define SLOTS 16384

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

enum { MODE_OFF, MODE_THP, MODE_1G };
static int mode = -1;
static size_t min_bytes;
/* Allocations served here: user pointer, user size, mapping start and length. */
static struct { void *p; size_t n; void *map; size_t len; } slot[SLOTS];
static volatile int lock;
static int n_live; /* slots in use */
static unsigned long long n_thp, b_thp, n_1g, b_1g, n_1g_fail, n_mmap_advised, b_mmap_advised, n_table_full;

static void lk(void) { while (__atomic_test_and_set(&lock, __ATOMIC_ACQUIRE)) ; }
static void ul(void) { __atomic_clear(&lock, __ATOMIC_RELEASE); }

static void *raw_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
    return (void *)syscall(SYS_mmap, a, n, prot, flags, fd, off);
}

static void init(void)
{
    if (mode >= 0)
        return;
    const char *m = getenv("SUPERPAGER_SHIM_MODE");
    int md = !m ? MODE_OFF : !strcmp(m, "thp") ? MODE_THP : !strcmp(m, "hugetlb-1g") ? MODE_1G : MODE_OFF;
    const char *s = getenv("SUPERPAGER_SHIM_MIN");
    min_bytes = s ? strtoull(s, 0, 0) : (md == MODE_1G ? HUGE_1G : HUGE_2M);
    if (min_bytes < 4096)
        min_bytes = 4096;
    mode = md;
}

/* A 2MB-aligned anonymous mapping of n bytes (rounded up to 2MB), advised MADV_HUGEPAGE. */
static void *thp_map(size_t n, size_t *len, void **map)
{
    size_t want = (n + HUGE_2M - 1) & ~(HUGE_2M - 1);
    char *m = raw_mmap(0, want + HUGE_2M, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 0;
    char *a = (char *)(((uintptr_t)m + HUGE_2M - 1) & ~(HUGE_2M - 1));
    if (a > m)
        munmap(m, a - m);
    size_t tail = (m + want + HUGE_2M) - (a + want);
    if (tail)
        munmap(a + want, tail);
    madvise(a, want, MADV_HUGEPAGE);
    *len = want;
    *map = a;
    return a;
}

static void *big_alloc(size_t n)
{
    size_t len = 0;
    void *map = 0, *p = 0;
    if (mode == MODE_1G) {
        size_t want = (n + HUGE_1G - 1) & ~(HUGE_1G - 1);
        void *m = raw_mmap(0, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_1GB, -1, 0);
        if (m != MAP_FAILED) {
            p = map = m;
            len = want;
            __atomic_add_fetch(&n_1g, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&b_1g, want, __ATOMIC_RELAXED);
        } else {
            __atomic_add_fetch(&n_1g_fail, 1, __ATOMIC_RELAXED);
        }
    }
    if (!p) {
        p = thp_map(n, &len, &map);
        if (!p)
            return 0;
        __atomic_add_fetch(&n_thp, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&b_thp, len, __ATOMIC_RELAXED);
    }
    lk();
    for (int i = 0; i < SLOTS; i++)
        if (!slot[i].p) {
            slot[i].p = p, slot[i].n = n, slot[i].map = map, slot[i].len = len;
            n_live++;
            ul();
            return p;
        }
    ul();
    /* No slot left: give the memory back and let glibc serve it. */
    munmap(map, len);
    __atomic_add_fetch(&n_table_full, 1, __ATOMIC_RELAXED);
    return __libc_malloc(n);
}

/* The slot index of a pointer served here, or -1. */
static int find(void *p)
{
    /* Everything served here is 2MB-aligned; glibc's chunks (16 bytes past a header) almost
     * never are: most frees leave at once, without the lock. */
    if (!p || ((uintptr_t)p & (HUGE_2M - 1)) || !__atomic_load_n(&n_live, __ATOMIC_RELAXED))
        return -1;
    lk();
    for (int i = 0; i < SLOTS; i++)
        if (slot[i].p == p) {
            ul();
            return i;
        }
    ul();
    return -1;
}

static int big(size_t n) { init(); return mode != MODE_OFF && n >= min_bytes; }

void *malloc(size_t n) { return big(n) ? big_alloc(n) : __libc_malloc(n); }

void *calloc(size_t k, size_t n)
{
    size_t t;
    if (__builtin_mul_overflow(k, n, &t)) {
        errno = ENOMEM;
        return 0;
    }
    return big(t) ? big_alloc(t) /* fresh anonymous memory reads as zeros */ : __libc_calloc(k, n);
}

void free(void *p)
{
    int i = find(p);
    if (i < 0) {
        __libc_free(p);
        return;
    }
    lk();
    void *map = slot[i].map;
    size_t len = slot[i].len;
    slot[i].p = 0;
    n_live--;
    ul();
    munmap(map, len);
}

size_t malloc_usable_size(void *p)
{
    int i = find(p);
    if (i >= 0)
        return slot[i].n;
    static size_t (*real)(void *);
    if (!real)
        real = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    return real ? real(p) : 0;
}

void *realloc(void *p, size_t n)
{
    int i = find(p);
    if (i < 0 && !big(n))
        return __libc_realloc(p, n);
    if (i >= 0 && n <= slot[i].len && (n >= min_bytes || n == slot[i].n)) {
        slot[i].n = n; /* fits in place: same mapping */
        return p;
    }
    size_t old = i >= 0 ? slot[i].n : (p ? malloc_usable_size(p) : 0);
    void *q = malloc(n);
    if (!q)
        return 0;
    if (p) {
        memcpy(q, p, old < n ? old : n);
        free(p);
    }
    return q;
}

static void *aligned(size_t al, size_t n)
{
    if (big(n) && al <= HUGE_2M)
        return big_alloc(n); /* 2MB- (or 1GB-) aligned already */
    return __libc_memalign(al, n);
}

int posix_memalign(void **out, size_t al, size_t n)
{
    if (al < sizeof(void *) || (al & (al - 1)))
        return EINVAL;
    void *p = aligned(al, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t al, size_t n) { return aligned(al, n); }
void *memalign(size_t al, size_t n) { return aligned(al, n); }

/* The program's own anonymous private mappings: advised (thp), or placed on 1GB pages. */
void *mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
    init();
    int anon = (flags & MAP_ANONYMOUS) && !(flags & MAP_SHARED) && !(flags & MAP_HUGETLB);
    if (mode == MODE_OFF || !anon || n < min_bytes || a)
        return raw_mmap(a, n, prot, flags, fd, off);
    if (mode == MODE_1G && !(n & (HUGE_1G - 1))) {
        void *m = raw_mmap(0, n, prot, flags | MAP_HUGETLB | MAP_HUGE_1GB, fd, off);
        if (m != MAP_FAILED) {
            __atomic_add_fetch(&n_1g, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&b_1g, n, __ATOMIC_RELAXED);
            return m;
        }
        __atomic_add_fetch(&n_1g_fail, 1, __ATOMIC_RELAXED);
    }
    void *m = raw_mmap(0, n, prot, flags, fd, off);
    if (m != MAP_FAILED) {
        madvise(m, n, MADV_HUGEPAGE);
        __atomic_add_fetch(&n_mmap_advised, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&b_mmap_advised, n, __ATOMIC_RELAXED);
    }
    return m;
}
void *mmap64(void *a, size_t n, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("SUPERPAGER_SHIM_REPORT");
    if (!path || mode <= MODE_OFF)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    char buf[512];
    int k = snprintf(buf, sizeof buf,
                     "pid=%d thp_allocs=%llu thp_bytes=%llu hugetlb_1g_allocs=%llu hugetlb_1g_bytes=%llu hugetlb_1g_fallbacks=%llu "
                     "mmap_advised=%llu mmap_advised_bytes=%llu table_full=%llu\n",
                     (int)getpid(), n_thp, b_thp, n_1g, b_1g, n_1g_fail, n_mmap_advised, b_mmap_advised, n_table_full);
    if (k > 0)
        (void)!write(fd, buf, (size_t)k);
    close(fd);
}
