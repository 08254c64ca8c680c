/*
 * superpager's capture plugin for qemu-user (TCG plugin API version 1).
 *
 * It records what a guest program does to memory: every load and store (and, when asked,
 * every instruction fetch), instruction counts, and the system calls that shape the address
 * space or read files. It does no encoding or compression itself: records go, in packets, to a
 * SOCK_SEQPACKET socket whose other end is superpager's Rust trace writer (docs/CAPTURE.md).
 *
 * Hot path. A memory callback either extends the calling thread's open run (same 4KiB page,
 * or with `collapse=line` the same 64-byte line; same stream: the run collapse of the .spt
 * format, done here so sequential code costs a compare and an increment) or closes the run
 * into the thread's packet buffer. Nothing on it
 * allocates, locks or makes a system call; a full buffer is sent with one send(2).
 *
 * Threads. Every guest thread is a QEMU vCPU with its own state and packet buffer. A packet
 * names its process and thread (host ids: qemu-user runs the guest's threads and processes as
 * its own). When a process has several threads, each thread sends its buffer at every system
 * call it makes, so what the kernel orders (a munmap after another thread's last access, a
 * futex wake and wait) stays in order in the trace; between system calls, threads interleave
 * at packet granularity.
 *
 * Processes. fork is qemu-user's own fork: the child inherits this plugin, its buffers and the
 * socket. The parent sends its buffer before forking and a `fork` event right after; the child
 * drops the copies of other threads' buffers that it inherited.
 *
 * From the mark (`from_mark=on`, `superpager capture --from-mark`). A program that builds a large
 * structure and then works on it (the runtime model's programs: workloads/model_access.c,
 * model_dict.py) marks the start of the work with a zero-length madvise. Until that mark the
 * plugin registers no memory callback (blocks only count their instructions, inline), so the
 * build runs at qemu's own speed, and it stands for the build's accesses with touches of the
 * pages the guest has resident (/proc/self/pagemap), written in address order:
 *   - before each event that changes the address space, for the 2MiB-aligned span around the
 *     range it changes (so a page faulted before a brk or mmap grew its region, or before a
 *     munmap or mremap took it away, is faulted before that event in a simulation too: whether
 *     a 2MiB page fits depends on it);
 *   - at the mark, for the whole address space, before the mark's own record.
 * Then it asks QEMU to drop its callbacks and flush the translated code (qemu_plugin_reset),
 * and registers them again with a memory callback on every instruction: from the mark on, the
 * trace is complete. What is lost: the order of first touches between two events (address
 * order instead), every access after the first to a page, and the cache and TLB contents the
 * build left behind.
 *
 * Wire format (little-endian; every packet is one datagram, so writers never interleave):
 *   packet := u32 magic "SPQ1" | u32 pid | u32 tid | u32 nwords | u64 word[nwords]
 *   access := bit 63 = 0 | bits 61-62 kind (0 load, 1 store, 2 both, 3 fetch)
 *             | bits 58-60 log2 size | bit 57 a count word follows | bits 0-56 address
 *   event  := bit 63 = 1 | bits 48-55 code | bits 0-15 number of argument words that follow
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "qemu_plugin_v1.h"

SP_PLUGIN_EXPORT int qemu_plugin_version = SP_QEMU_PLUGIN_API_VERSION;

/* ---- wire format ------------------------------------------------------------------------ */

#define PKT_MAGIC 0x31515053u /* "SPQ1" */
#define PKT_WORDS 16384       /* 128 KiB of records per datagram */
#define ADDR_MASK ((1ull << 57) - 1)
#define COUNT_FOLLOWS (1ull << 57)
#define EVENT_BIT (1ull << 63)
#define RUN_MAX 0xffffffffu

enum kind { K_LOAD = 0, K_STORE = 1, K_MODIFY = 2, K_FETCH = 3 };

/* Event codes: the .spt event codes (docs/TRACE_FORMAT.md), plus plugin-only ones. */
enum ev {
    EV_MMAP = 1, EV_MUNMAP = 2, EV_MREMAP = 3, EV_MPROTECT = 4, EV_BRK = 5, EV_MADVISE = 6,
    EV_FORK = 7, EV_EXIT = 8, EV_OPEN = 9, EV_CLOSE = 10, EV_READ = 11, EV_INSNS = 12,
    EV_EXEC = 64,    /* execve(path) attempted: on success the new program runs untraced */
    EV_THREAD = 65,  /* a thread was created (child tid) */
    EV_SIGNAL = 66,  /* the process is ending without exit(2): killed by a signal */
};

struct packet {
    uint32_t magic, pid, tid, nwords;
    uint64_t w[PKT_WORDS];
};

/* One guest thread. `run_*` is the open run; it is not in the buffer until closed. */
struct vcpu {
    uint64_t run_addr;
    uint32_t run_count;
    uint8_t run_kind, run_shift, run_open, pad;
    uint64_t insns;
    /* system call in progress (pre-callback arguments, for the return callback) */
    int64_t sc_num;
    uint64_t sc_args[6];
    struct packet pkt;
};

#define MAX_VCPUS 1024
static struct vcpu *vcpus[MAX_VCPUS];
static int sock = -1;
static int want_fetches;
/* Data runs collapse within aligned blocks of 2^run_block_shift bytes: 12, a 4KiB page (the
 * .spt format's collapse), or 6 with collapse=line, a cache line, so that a data cache model
 * sees every line a run touches. */
static unsigned run_block_shift = 12;
static qemu_plugin_id_t plugin_id;
/* from_mark=on: touches of resident pages only, until the first phase mark (a zero-length
 * madvise); cleared, atomically, by the thread that makes the mark. */
static int warming;
/* Everything below this address is the guest's (send_initial_maps). */
static uint64_t guest_top = ~0ull;
/* The guest's program break as last returned by brk(2) (from_mark: a brk's span). */
static uint64_t last_brk;
/* Threads of this process. Counted up when the parent enters a thread-making clone (the new
 * thread can run, and even exit, before the parent returns from it), back down if the clone
 * failed or when a vCPU exits; updated atomically since every thread touches it. */
static int live_threads;
static int maps_sent;          /* the initial address space has been described */
static int exited;             /* exit(2)/exit_group(2) seen in this process */
#define MAX_TRACKED_FD 65536
static uint8_t file_fd[MAX_TRACKED_FD / 8]; /* fds naming regular files we reported */

static void die(const char *msg)
{
    /* The recorder is gone (or the socket broke): a capture without it is pointless. */
    fprintf(stderr, "superpager capture plugin: %s (%s)\n", msg, strerror(errno));
    _exit(125);
}

static uint64_t take_insns(struct vcpu *c);

static void send_packet(struct vcpu *c)
{
    struct packet *p = &c->pkt;
    if (p->nwords == 0)
        return;
    uint64_t insns = take_insns(c);
    if (insns) {
        p->w[p->nwords++] = EVENT_BIT | ((uint64_t)EV_INSNS << 48) | 1;
        p->w[p->nwords++] = insns;
    }
    p->magic = PKT_MAGIC;
    p->pid = (uint32_t)getpid();
    p->tid = (uint32_t)syscall(SYS_gettid);
    size_t len = 16 + 8 * (size_t)p->nwords;
    for (;;) {
        ssize_t n = send(sock, p, len, MSG_NOSIGNAL);
        if (n == (ssize_t)len)
            break;
        if (n < 0 && errno == EINTR)
            continue;
        die("cannot send records to superpager");
    }
    p->nwords = 0;
}

/* Records fill a packet up to PKT_WORDS - 2; the last two words are for the `insns` mark
 * that send_packet adds. */
static inline void ensure_room(struct vcpu *c, uint32_t words)
{
    if (c->pkt.nwords + words > PKT_WORDS - 2)
        send_packet(c);
}

static inline void close_run(struct vcpu *c)
{
    if (!c->run_open)
        return;
    ensure_room(c, 2);
    uint64_t w = (c->run_addr & ADDR_MASK) | ((uint64_t)c->run_kind << 61) |
                 ((uint64_t)c->run_shift << 58);
    struct packet *p = &c->pkt;
    if (c->run_count > 1) {
        p->w[p->nwords++] = w | COUNT_FOLLOWS;
        p->w[p->nwords++] = c->run_count;
    } else {
        p->w[p->nwords++] = w;
    }
    c->run_open = 0;
}

/* Close the open run, if any, and open one of `count` accesses at `va`. */
static inline void open_run(struct vcpu *c, uint64_t va, uint32_t count, int kind, unsigned shift)
{
    close_run(c);
    c->run_addr = va;
    c->run_count = count;
    c->run_kind = (uint8_t)kind;
    c->run_shift = (uint8_t)shift;
    c->run_open = 1;
}

/*
 * Decoding `info` without a call into QEMU per access. QEMU 7.2 builds it as
 * (MemOp << 4 | mmu index) | direction << 16, with the size in MemOp's low 3 bits
 * (include/qemu/plugin-memory.h, include/exec/memop.h). `check_info_layout` confirms that
 * layout against QEMU's own accessors at start-up; if it differs, the accessors are used.
 */
static int info_fast;

static inline int info_is_store(qemu_plugin_meminfo_t info)
{
    return info_fast ? (info >> 16) & QEMU_PLUGIN_MEM_W : qemu_plugin_mem_is_store(info);
}

static inline unsigned info_size_shift(qemu_plugin_meminfo_t info)
{
    return info_fast ? (info >> 4) & 7 : qemu_plugin_mem_size_shift(info);
}

static void check_info_layout(void)
{
    info_fast = 1;
    for (unsigned shift = 0; shift < 4; shift++)
        for (unsigned rw = 1; rw <= 2; rw++) {
            qemu_plugin_meminfo_t i = (shift << 4) | (rw << 16);
            if (qemu_plugin_mem_size_shift(i) != shift ||
                (int)qemu_plugin_mem_is_store(i) != (rw == QEMU_PLUGIN_MEM_W))
                info_fast = 0;
        }
}

static inline void data_access(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t va,
                               int kind)
{
    struct vcpu *c = vcpus[vcpu_index];
    if (c->run_open && ((va ^ c->run_addr) >> run_block_shift) == 0 && c->run_kind != K_FETCH &&
        c->run_count < RUN_MAX) {
        c->run_count++;
        if (c->run_kind != kind)
            c->run_kind = K_MODIFY;
        return;
    }
    open_run(c, va, 1, kind, info_size_shift(info));
}

/* One callback for both directions: qemu 7.2 calls a callback registered for loads only on
 * stores too (it does not filter by direction), so the direction comes from `info`. */
static void on_mem(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t va, void *u)
{
    (void)u;
    data_access(vcpu_index, info, va, info_is_store(info) ? K_STORE : K_LOAD);
}

/* ---- translation blocks: instruction counts and fetches ------------------------------------ */

/* What a translation block needs at run time: its instructions, split at 4KiB boundaries. */
struct tb_info {
    uint64_t vaddr;        /* first instruction */
    uint64_t vaddr2;       /* first instruction on the next page, if the block crosses one */
    uint32_t n, n_first;   /* all instructions; those on the first page */
};

static void fetch_run(struct vcpu *c, uint64_t va, uint32_t n)
{
    open_run(c, va, n, K_FETCH, 0);
}

/* With fetches: a callback per executed block records its fetch runs and counts. */
static void on_tb_exec(unsigned int vcpu_index, void *udata)
{
    struct vcpu *c = vcpus[vcpu_index];
    const struct tb_info *t = udata;
    c->insns += t->n;
    fetch_run(c, t->vaddr, t->n_first);
    if (t->n_first < t->n)
        fetch_run(c, t->vaddr2, t->n - t->n_first);
}

/* Without fetches (and, with them, before a from_mark capture's mark), blocks add their
 * instruction count inline (no call): to one counter per process, which a thread reads when it
 * sends a packet. With several threads, each `insns` mark then holds the process's instructions
 * since the previous mark of any thread. */
static uint64_t process_insns, process_insns_reported;

static uint64_t take_insns(struct vcpu *c)
{
    uint64_t n = c->insns;
    c->insns = 0;
    uint64_t now = __atomic_load_n(&process_insns, __ATOMIC_RELAXED);
    uint64_t before = __atomic_exchange_n(&process_insns_reported, now, __ATOMIC_RELAXED);
    if (now > before)
        n += now - before;
    return n;
}

static void emit_event(struct vcpu *c, int code, int nargs, const uint64_t *args);
static void send_initial_maps(struct vcpu *c);

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    int record = !__atomic_load_n(&warming, __ATOMIC_RELAXED);
    size_t n = qemu_plugin_tb_n_insns(tb);
    struct tb_info *t = calloc(1, sizeof *t);
    if (!t)
        die("out of memory");
    t->vaddr = qemu_plugin_tb_vaddr(tb);
    t->n = (uint32_t)n;
    t->n_first = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t va = qemu_plugin_insn_vaddr(insn);
        if (t->n_first == n && (va >> 12) != (t->vaddr >> 12)) {
            t->n_first = (uint32_t)i;
            t->vaddr2 = va;
        }
        if (record)
            qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS,
                                             QEMU_PLUGIN_MEM_RW, NULL);
    }
    if (want_fetches && record)
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS, t);
    else
        qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &process_insns, n);
}

/* ---- events ------------------------------------------------------------------------------- */

static void emit_event(struct vcpu *c, int code, int nargs, const uint64_t *args)
{
    close_run(c);
    ensure_room(c, 1 + (uint32_t)nargs);
    struct packet *p = &c->pkt;
    p->w[p->nwords++] = EVENT_BIT | ((uint64_t)code << 48) | (uint64_t)nargs;
    for (int i = 0; i < nargs; i++)
        p->w[p->nwords++] = args[i];
}

static void emit_insns(struct vcpu *c)
{
    uint64_t a = take_insns(c);
    if (a)
        emit_event(c, EV_INSNS, 1, &a);
}

/* An event with a path: fixed arguments, then the path's length and bytes in whole words. */
static void emit_path_event(struct vcpu *c, int code, int nfixed, const uint64_t *fixed,
                            const char *path)
{
    uint64_t args[4 + 512] = {0};
    size_t len = strnlen(path, 4000);
    for (int i = 0; i < nfixed; i++)
        args[i] = fixed[i];
    args[nfixed] = len;
    memcpy(&args[nfixed + 1], path, len);
    emit_event(c, code, nfixed + 1 + (int)((len + 7) / 8), args);
}

static int fd_tracked(int64_t fd)
{
    return fd >= 0 && fd < MAX_TRACKED_FD && (file_fd[fd / 8] >> (fd % 8)) & 1;
}

static void set_fd(int64_t fd, int on)
{
    if (fd < 0 || fd >= MAX_TRACKED_FD)
        return;
    if (on)
        file_fd[fd / 8] |= (uint8_t)(1u << (fd % 8));
    else
        file_fd[fd / 8] &= (uint8_t)~(1u << (fd % 8));
}

/* A newly opened descriptor: report it if it names a regular file. */
static void report_open(struct vcpu *c, int64_t fd)
{
    struct stat st;
    char link[64], path[4096];
    if (fd < 0 || fstat((int)fd, &st) != 0 || !S_ISREG(st.st_mode))
        return;
    snprintf(link, sizeof link, "/proc/self/fd/%d", (int)fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0)
        return;
    path[n] = 0;
    uint64_t fixed[2] = {(uint64_t)fd, (uint64_t)st.st_size};
    emit_path_event(c, EV_OPEN, 2, fixed, path);
    set_fd(fd, 1);
}

/*
 * The address space the guest starts with was built by qemu-user's ELF loader, not by system
 * calls: describe it once, before the first guest instruction. qemu-user places the guest at
 * host addresses equal to its own (guest_base 0 is checked by the driver), below qemu's own
 * executable; everything mapped there is the guest's.
 */
static void send_initial_maps(struct vcpu *c)
{
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0)
        return;
    self[sl] = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return;
    /* First pass: where qemu's own executable starts. */
    char line[4608];
    uint64_t qemu_start = ~0ull;
    while (fgets(line, sizeof line, f)) {
        unsigned long long s, e;
        char *path = strchr(line, '/');
        if (sscanf(line, "%llx-%llx", &s, &e) == 2 && path) {
            path[strcspn(path, "\n")] = 0;
            if (strcmp(path, self) == 0 && s < qemu_start)
                qemu_start = s;
        }
    }
    guest_top = qemu_start;
    rewind(f);
    int next_fd = 1 << 20; /* descriptor numbers no program uses, closed right after */
    while (fgets(line, sizeof line, f)) {
        unsigned long long s, e, off;
        char perms[8];
        if (sscanf(line, "%llx-%llx %7s %llx", &s, &e, perms, &off) != 4 || e > qemu_start)
            continue;
        uint64_t prot = (perms[0] == 'r' ? 1 : 0) | (perms[1] == 'w' ? 2 : 0) |
                        (perms[2] == 'x' ? 4 : 0);
        char *path = strchr(line, '/');
        if (path) {
            path[strcspn(path, "\n")] = 0;
            struct stat st;
            uint64_t size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
            uint64_t fixed[2] = {(uint64_t)next_fd, size};
            emit_path_event(c, EV_OPEN, 2, fixed, path);
            /* The guest's code shows as r-- on the host (qemu translates it); a file mapping
             * the loader made readable and not writable is the guest's text or rodata. */
            uint64_t a[6] = {s, e - s, prot, 0x02 /* MAP_PRIVATE */, (uint64_t)next_fd, off};
            emit_event(c, EV_MMAP, 6, a);
            uint64_t cl = (uint64_t)next_fd;
            emit_event(c, EV_CLOSE, 1, &cl);
            next_fd++;
        } else {
            uint64_t a[6] = {s, e - s, prot, 0x22 /* MAP_PRIVATE|MAP_ANONYMOUS */, (uint64_t)-1, 0};
            emit_event(c, EV_MMAP, 6, a);
        }
    }
    fclose(f);
}

/* ---- from the mark: touches of resident pages ------------------------------------------------ */

#define SPAN_ALIGN (2ull << 20)

/* One access record for a resident page. */
static void emit_touch(struct vcpu *c, uint64_t va, int kind)
{
    open_run(c, va, 1, kind, 3);
    close_run(c);
}

/* A touch for every page of [lo, hi) the guest has resident (present or swapped, from
 * /proc/self/pagemap), in address order: a store where the mapping is writable, a load
 * elsewhere. qemu-user maps the guest at host addresses equal to its own, so the guest's pages
 * are this process's. */
static void emit_resident(struct vcpu *c, uint64_t lo, uint64_t hi)
{
    FILE *f = fopen("/proc/self/maps", "re");
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (!f || pm < 0)
        die("from_mark: cannot read /proc/self/maps and /proc/self/pagemap");
    char line[4608];
    uint64_t ent[512];
    /* qemu-user keeps the pages of a break the guest lowered mapped (and resident): the guest's
     * heap ends at its break. */
    uint64_t brk_end = (last_brk + 4095) & ~4095ull;
    while (fgets(line, sizeof line, f)) {
        unsigned long long s, e;
        char perms[8];
        if (sscanf(line, "%llx-%llx %7s", &s, &e, perms) != 3 || e > guest_top || e <= lo || s >= hi)
            continue;
        int kind = perms[1] == 'w' ? K_STORE : K_LOAD;
        uint64_t end = e < hi ? e : hi;
        if (last_brk && s < brk_end && brk_end < end)
            end = brk_end;
        for (uint64_t va = s > lo ? s : lo; va < end;) {
            size_t n = (size_t)((end - va) >> 12);
            if (n > 512)
                n = 512;
            ssize_t got = pread(pm, ent, n * 8, (off_t)((va >> 12) * 8));
            if (got < 8)
                break;
            n = (size_t)got / 8;
            for (size_t i = 0; i < n; i++)
                if (ent[i] >> 62) /* bit 63 present, bit 62 swapped */
                    emit_touch(c, va + ((uint64_t)i << 12), kind);
            va += (uint64_t)n << 12;
        }
    }
    close(pm);
    fclose(f);
}

/* Before an event changes [addr, addr + len): the resident pages of the 2MiB-aligned span
 * around it. */
static void emit_resident_around(struct vcpu *c, uint64_t addr, uint64_t len)
{
    if (!__atomic_load_n(&warming, __ATOMIC_RELAXED) || len == 0)
        return;
    uint64_t lo = addr & ~(SPAN_ALIGN - 1);
    uint64_t hi = (addr + len + SPAN_ALIGN - 1) & ~(SPAN_ALIGN - 1);
    emit_resident(c, lo, hi);
}

static void register_callbacks(qemu_plugin_id_t id);

/* ---- system calls --------------------------------------------------------------------------- */

/* x86-64 system call numbers. */
enum {
    NR_read = 0, NR_open = 2, NR_close = 3, NR_mmap = 9, NR_mprotect = 10, NR_munmap = 11,
    NR_brk = 12, NR_pread64 = 17, NR_mremap = 25, NR_madvise = 28, NR_clone = 56, NR_fork = 57,
    NR_vfork = 58, NR_execve = 59, NR_exit = 60, NR_creat = 85, NR_exit_group = 231,
    NR_openat = 257, NR_execveat = 322, NR_clone3 = 435, NR_openat2 = 437,
};
#define CLONE_VM 0x100
#define CLONE_VFORK 0x4000

/* The clone flags of fork/vfork/clone/clone3 (clone3 passes them in its argument struct). */
static uint64_t clone_flags(int64_t num, uint64_t a1)
{
    if (num == NR_clone)
        return a1;
    if (num == NR_clone3)
        return a1 ? *(const uint64_t *)(uintptr_t)a1 : 0;
    return 0;
}

static int is_process_clone(int64_t num, uint64_t a1)
{
    if (num == NR_fork || num == NR_vfork)
        return 1;
    if (num != NR_clone && num != NR_clone3)
        return 0;
    /* qemu-user turns a vfork-style clone into fork; a clone sharing memory is a thread. */
    uint64_t flags = clone_flags(num, a1);
    return !(flags & CLONE_VM) || (flags & CLONE_VFORK);
}

static int is_thread_clone(int64_t num, uint64_t a1)
{
    return (num == NR_clone || num == NR_clone3) && !is_process_clone(num, a1);
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu_index, int64_t num, uint64_t a1,
                       uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
                       uint64_t a7, uint64_t a8)
{
    (void)id, (void)a7, (void)a8;
    struct vcpu *c = vcpus[vcpu_index];
    c->sc_num = num;
    c->sc_args[0] = a1, c->sc_args[1] = a2, c->sc_args[2] = a3;
    c->sc_args[3] = a4, c->sc_args[4] = a5, c->sc_args[5] = a6;
    /* from_mark: pages an event is about to unmap, move, split or free are touched first. */
    if (num == NR_munmap || num == NR_mprotect || (num == NR_madvise && a2 != 0) ||
        (num == NR_mmap && (a4 & 0x10 /* MAP_FIXED */)))
        emit_resident_around(c, a1, a2);
    else if (num == NR_mremap)
        emit_resident_around(c, a1, a2 > a3 ? a2 : a3);
    else if (num == NR_brk && a1 && last_brk) {
        uint64_t lo = a1 < last_brk ? a1 : last_brk, hi = a1 < last_brk ? last_brk : a1;
        emit_resident_around(c, lo, hi - lo);
    }
    switch (num) {
    case NR_exit_group:
    case NR_exit:
        emit_insns(c);
        if (num == NR_exit_group || __atomic_load_n(&live_threads, __ATOMIC_SEQ_CST) <= 1) {
            uint64_t code = (uint64_t)(int64_t)(int32_t)a1;
            emit_event(c, EV_EXIT, 1, &code);
            exited = 1;
        }
        close_run(c);
        send_packet(c);
        return;
    case NR_execve:
    case NR_execveat: {
        /* On success the new program runs natively (qemu-user does not follow exec): say so. */
        const char *path = (const char *)(uintptr_t)(num == NR_execve ? a1 : a2);
        emit_insns(c);
        emit_path_event(c, EV_EXEC, 0, NULL, path ? path : "");
        close_run(c);
        send_packet(c);
        return;
    }
    default:
        if (num == NR_clone || num == NR_fork || num == NR_vfork || num == NR_clone3) {
            if (is_thread_clone(num, a1))
                __atomic_add_fetch(&live_threads, 1, __ATOMIC_SEQ_CST);
            /* The child inherits this buffer: send it first so nothing is recorded twice. */
            emit_insns(c);
            close_run(c);
            send_packet(c);
        } else if (__atomic_load_n(&live_threads, __ATOMIC_RELAXED) > 1) {
            close_run(c);
            send_packet(c);
        }
    }
}

static void on_syscall_ret(qemu_plugin_id_t id, unsigned int vcpu_index, int64_t num, int64_t ret)
{
    (void)id;
    struct vcpu *c = vcpus[vcpu_index];
    const uint64_t *a = c->sc_args;
    if (c->sc_num != num)
        return; /* not the call we saw start (cannot happen in qemu-user; be safe) */
    int ok = ret >= 0 || ret < -4095;
    switch (num) {
    case NR_mmap:
        if (ok) {
            /* from_mark: a new mapping can merge with its neighbours; the pages they had
             * resident in its span were faulted before it. */
            emit_resident_around(c, (uint64_t)ret, a[1]);
            uint64_t e[6] = {(uint64_t)ret, a[1], a[2], a[3], (uint64_t)(int64_t)(int32_t)a[4], a[5]};
            emit_event(c, EV_MMAP, 6, e);
        }
        break;
    case NR_munmap:
        if (ret == 0)
            emit_event(c, EV_MUNMAP, 2, a);
        break;
    case NR_mremap:
        if (ok) {
            uint64_t e[4] = {a[0], a[1], (uint64_t)ret, a[2]};
            emit_event(c, EV_MREMAP, 4, e);
        }
        break;
    case NR_mprotect:
        if (ret == 0)
            emit_event(c, EV_MPROTECT, 3, a);
        break;
    case NR_madvise:
        if (ret == 0) {
            /* A zero-length madvise is a phase mark: the instructions before it are counted
             * before it, so the phase's count is exact, not packet-grained. */
            if (a[1] == 0)
                emit_insns(c);
            if (a[1] == 0 && __atomic_exchange_n(&warming, 0, __ATOMIC_SEQ_CST)) {
                /* The first phase mark of a from_mark capture: everything resident comes
                 * before the mark; then every block is translated again, recording. */
                emit_resident(c, 0, guest_top);
                qemu_plugin_reset(plugin_id, register_callbacks);
            }
            emit_event(c, EV_MADVISE, 3, a);
        }
        break;
    case NR_brk: {
        uint64_t b = (uint64_t)ret;
        last_brk = b;
        emit_event(c, EV_BRK, 1, &b);
        break;
    }
    case NR_open:
    case NR_openat:
    case NR_openat2:
    case NR_creat:
        if (ret >= 0)
            report_open(c, ret);
        break;
    case NR_close:
        if (ret == 0 && fd_tracked((int64_t)a[0])) {
            set_fd((int64_t)a[0], 0);
            emit_event(c, EV_CLOSE, 1, a);
        }
        break;
    case NR_read:
    case NR_pread64:
        if (ret > 0 && fd_tracked((int64_t)a[0])) {
            uint64_t off;
            if (num == NR_pread64) {
                off = a[3];
            } else {
                off_t pos = lseek((int)a[0], 0, SEEK_CUR);
                off = pos >= ret ? (uint64_t)(pos - ret) : 0;
            }
            uint64_t e[3] = {a[0], off, (uint64_t)ret};
            emit_event(c, EV_READ, 3, e);
        }
        break;
    case NR_clone:
    case NR_fork:
    case NR_vfork:
    case NR_clone3:
        if (ret > 0 && is_process_clone(num, a[0])) {
            uint64_t child = (uint64_t)ret;
            emit_event(c, EV_FORK, 1, &child);
            send_packet(c); /* the child's records must not wait long for this */
        } else if (ret > 0) {
            uint64_t child = (uint64_t)ret;
            emit_event(c, EV_THREAD, 1, &child);
        } else if (ret < 0 && is_thread_clone(num, a[0])) {
            __atomic_sub_fetch(&live_threads, 1, __ATOMIC_SEQ_CST); /* no thread after all */
        } else if (ret == 0 && is_process_clone(num, a[0])) {
            /* The child: only this thread exists here; the others' buffers are the parent's. */
            for (int i = 0; i < MAX_VCPUS; i++)
                if (vcpus[i] && (unsigned)i != vcpu_index)
                    vcpus[i]->pkt.nwords = 0, vcpus[i]->run_open = 0;
            c->insns = 0;
            process_insns_reported = __atomic_load_n(&process_insns, __ATOMIC_RELAXED);
            __atomic_store_n(&live_threads, 1, __ATOMIC_SEQ_CST);
            exited = 0;
        }
        break;
    default:
        break;
    }
    c->sc_num = -1;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    (void)id;
    if (vcpu_index >= MAX_VCPUS) {
        errno = 0;
        die("too many threads");
    }
    if (!vcpus[vcpu_index]) {
        struct vcpu *c;
        if (posix_memalign((void **)&c, 64, sizeof *c) != 0)
            die("out of memory");
        memset(c, 0, sizeof *c);
        c->sc_num = -1;
        vcpus[vcpu_index] = c;
    }
    int none = 0;
    __atomic_compare_exchange_n(&live_threads, &none, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

static void on_vcpu_exit(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    (void)id;
    struct vcpu *c = vcpus[vcpu_index];
    if (!c)
        return;
    emit_insns(c);
    close_run(c);
    send_packet(c);
    if (__atomic_sub_fetch(&live_threads, 1, __ATOMIC_SEQ_CST) < 1)
        __atomic_store_n(&live_threads, 1, __ATOMIC_SEQ_CST); /* the last one never leaves */
}

static void on_exit_all(qemu_plugin_id_t id, void *u)
{
    (void)id, (void)u;
    /* QEMU stopped every vCPU before calling this: all buffers are quiet. */
    struct vcpu *last = NULL;
    for (int i = 0; i < MAX_VCPUS; i++) {
        struct vcpu *c = vcpus[i];
        if (!c)
            continue;
        emit_insns(c);
        close_run(c);
        send_packet(c);
        last = c;
    }
    if (last && !exited) {
        /* Ending without exit(2): a fatal signal (qemu-user reports it on stderr). */
        emit_event(last, EV_SIGNAL, 0, NULL);
        send_packet(last);
    }
}

/* The first translation happens after the loader built the guest, before it runs. */
static void on_first_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    if (!maps_sent) {
        maps_sent = 1;
        for (int i = 0; i < MAX_VCPUS; i++)
            if (vcpus[i]) {
                send_initial_maps(vcpus[i]);
                break;
            }
    }
    on_tb_trans(id, tb);
}

SP_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                         char **argv)
{
    if (info->system_emulation) {
        fprintf(stderr, "superpager capture plugin: runs under qemu-user only\n");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "out=", 4) == 0)
            sock = atoi(argv[i] + 4);
        else if (strcmp(argv[i], "fetches=on") == 0)
            want_fetches = 1;
        else if (strcmp(argv[i], "fetches=off") == 0)
            want_fetches = 0;
        else if (strcmp(argv[i], "from_mark=on") == 0)
            warming = 1;
        else if (strcmp(argv[i], "collapse=line") == 0)
            run_block_shift = 6;
        else if (strcmp(argv[i], "collapse=page") == 0)
            run_block_shift = 12;
        else {
            fprintf(stderr, "superpager capture plugin: unknown argument '%s'\n", argv[i]);
            return -1;
        }
    }
    int type;
    socklen_t tl = sizeof type;
    if (sock < 0 || getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_SEQPACKET) {
        fprintf(stderr, "superpager capture plugin: out=FD must name a SOCK_SEQPACKET socket\n");
        return -1;
    }
    /* The recorder must not be inherited by programs the guest execs (they run untraced). */
    fcntl(sock, F_SETFD, FD_CLOEXEC);
    check_info_layout();
    plugin_id = id;
    register_callbacks(id);
    return 0;
}

/* At install, and again after a from_mark capture's reset (which dropped them all). */
static void register_callbacks(qemu_plugin_id_t id)
{
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_exit_cb(id, on_vcpu_exit);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_first_tb);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_vcpu_syscall_ret_cb(id, on_syscall_ret);
    qemu_plugin_register_atexit_cb(id, on_exit_all, NULL);
}
