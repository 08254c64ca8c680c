"""The workload suite: small C programs modelled on the superpage papers' benchmarks (sources in
the repository's `workloads/`), and real programs from Debian packages, each with a size knob.

    superpager workloads list
    superpager workloads capture gups --size 256MiB
    superpager workloads capture gzip --size 8MiB --out gzip.spt
"""
from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Sequence

from . import capture as cap

MiB = 1 << 20


def sources_dir() -> Path:
    """The suite's C sources: `workloads/` of the source tree (or $SUPERPAGER_WORKLOADS)."""
    env = os.environ.get("SUPERPAGER_WORKLOADS")
    d = Path(env) if env else Path(__file__).resolve().parents[2] / "workloads"
    if not (d / "gups.c").exists():
        raise cap.CaptureError(f"workloads: the suite's sources are not at {d}; run from a superpager source "
                               f"checkout or set SUPERPAGER_WORKLOADS to its workloads/ directory")
    return d


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # "suite" (our C program) or "real" (a Debian package's program)
    default_size: str
    description: str
    models: str
    argv: Callable[[int, Path], list[str]]
    """(size in bytes, work directory) -> the command line (the program first)."""
    program: str = ""
    """For real programs: the executable's absolute path; for the suite: the source's stem."""
    runs: Callable[[int, Path], list[list[str]]] | None = None
    """For workloads of many short processes (kind "runs"): (size, work directory) -> one
    command line per process. Each is captured on its own (capture does not follow exec) and
    the traces are joined in order into one trace of many processes (`trace join`)."""


def _mib(size: int) -> str:
    return str(max(1, size // MiB))


def _suite(name, size, desc, models, extra=()):
    return Workload(name, "suite", size, desc, models,
                    lambda s, d, n=name, e=extra: [str(build(n)), _mib(s), *e], program=name)


def _text_input(size: int, work: Path) -> Path:
    """A deterministic compressible input: pseudo-English words and numbers (seeded)."""
    p = work / f"input-{size}.txt"
    if p.exists() and p.stat().st_size == size:
        return p
    rng = random.Random(20261122)
    vocab = [("".join(rng.choice("etaoinshrdlucmfwypvbgkjqxz") for _ in range(rng.randint(2, 9)))) for _ in range(4000)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    out = bytearray()
    while len(out) < size:
        words = rng.choices(vocab, weights, k=20000)
        line = " ".join(w if rng.random() > 0.05 else str(rng.randint(0, 99999)) for w in words)
        out += line.encode() + b"\n"
    tmp = p.with_suffix(".tmp")
    tmp.write_bytes(bytes(out[:size]))
    os.replace(tmp, p)
    return p


def _zero_file(size: int, work: Path) -> Path:
    """A file of `size` zero bytes that a workload may write to (protfork's shared mapping)."""
    p = work / f"zero-{size}.dat"
    if not (p.exists() and p.stat().st_size == size):
        with open(p, "wb") as f:
            f.truncate(size)
    return p


def _sqlite_sql(size: int) -> str:
    rows = max(1000, size // 64)
    return (f"create table t(id integer primary key, k integer, v text);"
            f"with recursive c(i) as (select 1 union all select i + 1 from c where i < {rows}) "
            f"insert into t select i, (i * 2654435761) % 1000003, hex(randomblob(16)) from c;"
            f"create index tk on t(k);"
            f"select count(*), sum(length(v)) from t where k % 7 = 3;"
            f"select k % 100, count(*) from t group by k % 100 order by 2 desc limit 3;")


PY_SCRIPT = ("import sys\nn = int(sys.argv[1])\nd = {i * 2654435761 % 1000003: str(i) for i in range(n)}\n"
             "s = sorted(d.items(), key=lambda kv: kv[1])\nprint('python3:', len(d), s[0], s[-1])\n")


EXEC_RUNS = 32
"""Processes in the exec microbenchmark."""
CC_UNITS = 8
"""Compiler processes in the compile-like run."""
CC_FUNCTIONS = 6
"""Functions in each compiled source."""
RUNS_VERSION = f"exec {EXEC_RUNS}x8 pages; cc {CC_UNITS} units of {CC_FUNCTIONS} functions, generator v2"
"""What the "runs" workloads' traces depend on besides their sources (cached traces' key)."""


def cc1_path() -> str:
    """gcc's compiler proper (what `gcc -c` execs for each source file)."""
    cc = shutil.which("gcc") or "gcc"
    try:
        r = subprocess.run([cc, "-print-prog-name=cc1"], capture_output=True, text=True, timeout=30)
        p = r.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        p = ""
    return p if os.path.isabs(p) else "/usr/lib/gcc/x86_64-linux-gnu/12/cc1"


def _exec_runs(size: int, work: Path) -> list[list[str]]:
    data = _text_input(size, work)
    prog = str(build("exec"))
    return [[prog, str(data), "8"] for _ in range(EXEC_RUNS)]


def _cc_sources(size: int, work: Path) -> tuple[Path, list[Path]]:
    """Generated C: shared headers of about `size` bytes (types, macros, static inline
    functions) and CC_UNITS sources that include them all and use a different part of each
    (seeded, so the same size gives the same files)."""
    d = work / f"cc-{size}-v2"
    srcs = [d / f"unit{u:02d}.c" for u in range(CC_UNITS)]
    if all(p.exists() for p in srcs):
        return d, srcs
    rng = random.Random(20261125)
    d.mkdir(parents=True, exist_ok=True)
    nh = 4
    per = max(1, size // nh // 420)  # one declaration group is about 420 bytes
    for h in range(nh):
        out = [f"#ifndef H{h}\n#define H{h}\n"]
        for i in range(per):
            n = f"h{h}_{i}"
            f1, f2 = rng.randint(1, 9), rng.randint(1, 9)
            out.append(f"struct {n} {{ long a; int b[{f1}]; double c; struct {n} *next; }};\n"
                       f"#define {n.upper()}_K ({f2} * {f1} + {i % 97})\n"
                       f"static inline long {n}_f(const struct {n} *p, long x) {{ long s = x; "
                       f"for (int i = 0; i < {f1}; i++) s += p->b[i] * {f2} + (long)p->c; "
                       f"return p->next ? s ^ p->next->a : s + {n.upper()}_K; }}\n")
        out.append("#endif\n")
        (d / f"common{h}.h").write_text("".join(out))
    for u, src in enumerate(srcs):
        body = ["".join(f'#include "common{h}.h"\n' for h in range(nh))]
        for k in range(CC_FUNCTIONS):
            calls = []
            for _ in range(4):
                h, i = rng.randrange(nh), rng.randrange(per)
                calls.append(f"{{ struct h{h}_{i} v = {{0}}; v.a = x; s += h{h}_{i}_f(&v, x + {k}); }}")
            body.append(f"long unit{u}_fn{k}(long x) {{ long s = 0; " + " ".join(calls)
                        + " for (int j = 0; j < (int)(x & 15); j++) s = s * 31 + j; return s; }\n")
        src.write_text("".join(body))
    return d, srcs


def _cc_runs(size: int, work: Path) -> list[list[str]]:
    d, srcs = _cc_sources(size, work)
    cc1 = cc1_path()
    return [[cc1, "-quiet", "-O1", "-I", str(d), str(p), "-o", str(d / (p.stem + ".s"))] for p in srcs]


def _real(name, path, size, desc, models, argv):
    return Workload(name, "real", size, desc, models, argv, program=path)


WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    _suite("gups", "256MiB", "random read-modify-write updates to a table (HPCC RandomAccess)", "Trident, Solomon, Navarro 'random'"),
    _suite("btree", "128MiB", "B-tree (order 32) of random keys, then random lookups", "Navarro 'Tree'"),
    _suite("rbtree", "64MiB", "red-black tree of small malloc'd nodes, then random lookups", "Navarro 'Tree', std::map-style heaps"),
    _suite("transpose", "64MiB", "non-blocked matrix transpose, column-order writes", "Romer; Navarro 'matrix'"),
    _suite("hashjoin", "128MiB", "hash join: build an open-addressing table, probe it", "database joins (Trident, Solomon)"),
    _suite("pagerank", "128MiB", "PageRank over a generated skewed graph in CSR form", "graph analytics (Trident)"),
    _suite("fft", "64MiB", "3-D in-place radix-2 FFT: strided butterflies along each dimension", "Navarro 'FFTW'"),
    _suite("stream", "64MiB", "STREAM triad sweeps over three arrays", "McCalpin STREAM; sequential baseline"),
    _suite("partition", "128MiB", "radix partitioning into 4096 outputs: a large sparse working set", "Romer (sparse, large working set)"),
    _suite("join", "32MiB", "index nested-loop join over a hash file of one-page buckets (about 2% never touched), 12M probes",
           "Romer 'coral' (large, sparse, hot working set)"),
    _suite("webserver", "64MiB", "small-file web server: open, read, close Zipf-popular files", "Navarro 'web'"),
    _suite("xsbench", "256MiB", "XSBench-like cross-section lookups: pre-allocated nuclide, unionized and index grids, random lookups",
           "Trident XSBench (pre-allocating)"),
    _suite("graph500", "256MiB", "Graph500-like BFS: edge list, CSR build, BFS from 2 roots over a skewed graph",
           "Trident Graph500 (hot BFS state not 1GB-mappable)"),
    _suite("kvstore", "256MiB", "Redis-like key-value store: chained hash table of malloc'd values, doubling, GET/SET/DEL",
           "Trident Redis (incremental)"),
    _suite("slabcache", "256MiB", "Memcached-like cache: 1MB slab pages malloc'd on demand, size classes, FIFO eviction",
           "Trident Memcached (incremental)"),
    Workload("protfork", "suite", "32MiB", "a heap and a shared file, then guard pages (mprotect), freed pages (munmap), "
             "forked writers (copy on write) and writes to the clean file", "Solomon (contiguous-bit demotions by reason)",
             lambda s, d: [str(build("protfork")), _mib(s), "4", str(_zero_file(s // 4, d))], program="protfork"),
    _suite("compile", "32MiB", "compiler-like: many small short-lived objects, a symbol table", "Navarro/Romer 'gcc'"),
    Workload("exec", "runs", "4MiB", f"exec microbenchmark: {EXEC_RUNS} short runs of one small dynamically linked program "
             "that maps a shared data file (the size) and calls into libc", "Solomon 'exec' (many short processes)",
             lambda s, d: _exec_runs(s, d)[0], program="exec", runs=_exec_runs),
    Workload("cc", "runs", "256KiB", f"compile-like: {CC_UNITS} short cc1 (gcc's compiler) processes over generated sources "
             "that include the same headers (the size)", "Solomon 'compile' (many short compiler processes)",
             lambda s, d: _cc_runs(s, d)[0], program="cc1", runs=_cc_runs),
    _real("gzip", "/usr/bin/gzip", "16MiB", "gzip -6 of generated text (Debian gzip)", "AMSQM traces",
          lambda s, d: ["/usr/bin/gzip", "-6", "-c", str(_text_input(s, d))]),
    _real("bzip2", "/usr/bin/bzip2", "8MiB", "bzip2 -9 of generated text (Debian bzip2)", "AMSQM traces",
          lambda s, d: ["/usr/bin/bzip2", "-9", "-c", str(_text_input(s, d))]),
    _real("sqlite3", "/usr/bin/sqlite3", "16MiB", "in-memory SQLite: insert rows, index, aggregate (Debian sqlite3)", "database workloads",
          lambda s, d: ["/usr/bin/sqlite3", ":memory:", _sqlite_sql(s)]),
    _real("python3", "/usr/bin/python3", "32MiB", "CPython building and sorting a dict (Debian python3)", "interpreters",
          lambda s, d: ["/usr/bin/python3", "-c", PY_SCRIPT, str(max(1000, s // 200))]),
]}


def parse_size(s: str) -> int:
    units = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": MiB, "mb": MiB, "mib": MiB,
             "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}
    t = s.strip().lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(num):]
    try:
        if unit not in units:
            raise ValueError
        return int(float(num) * units[unit])
    except ValueError:
        raise cap.CaptureError(f"workloads: --size {s!r}: expected a size like 64MiB, 512KiB or 2GiB") from None


def get(name: str) -> Workload:
    if name not in WORKLOADS:
        raise cap.CaptureError(f"workloads: unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    return WORKLOADS[name]


def available(w: Workload) -> str | None:
    """None if the workload can run here, else why not."""
    if w.kind == "real" and not os.path.exists(w.program):
        pkg = os.path.basename(w.program)
        return f"{w.program} is not installed (Debian package {pkg}; make setup installs it)"
    if w.kind in ("suite", "runs") and not (shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")):
        return "no C compiler (cc)"
    if w.program == "cc1" and not os.path.exists(cc1_path()):
        return f"gcc's cc1 is not at {cc1_path()} (Debian package gcc; make setup installs build-essential)"
    return None


def build(name: str) -> Path:
    """Compile a suite program (cached by source hash)."""
    src = sources_dir() / f"{name}.c"
    h = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
    out = cap.cache_dir() / "workloads" / f"{name}-{h}"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise cap.CaptureError("workloads: no C compiler (cc); install build-essential (make setup does)")
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    r = subprocess.run([cc, "-O2", "-Wall", "-o", str(tmp), str(src), "-lm"], capture_output=True, text=True)
    if r.returncode != 0:
        raise cap.CaptureError(f"workloads: compiling {src} failed:\n{r.stderr.strip()}")
    os.replace(tmp, out)
    return out


def command(name: str, size: str | None = None, workdir: str | None = None, args: Sequence[str] = ()) -> list[str]:
    """The command line that runs workload `name` at `size` (default: its own). `args` follow
    the size for suite programs (e.g. stream's passes, gups' rounds: see each source's usage)."""
    w = get(name)
    why = available(w)
    if why:
        raise cap.CaptureError(f"workloads: {name}: {why}")
    if args and w.kind != "suite":
        raise cap.CaptureError(f"workloads: {name}: extra arguments are for the suite's own programs")
    return w.argv(parse_size(size or w.default_size), _data_dir(workdir)) + list(args)


def _data_dir(workdir: str | None = None) -> Path:
    d = Path(workdir or (cap.cache_dir() / "workloads" / "data"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def commands(name: str, size: str | None = None, workdir: str | None = None) -> list[list[str]]:
    """Every process's command line: one for most workloads, one per run for kind "runs"."""
    w = get(name)
    if w.runs is None:
        return [command(name, size, workdir)]
    why = available(w)
    if why:
        raise cap.CaptureError(f"workloads: {name}: {why}")
    return w.runs(parse_size(size or w.default_size), _data_dir(workdir))


def capture(name: str, out: str | None = None, size: str | None = None, fetches: bool = False,
            progress=None, args: Sequence[str] = ()) -> cap.CaptureResult:
    """Build (or prepare the input of) workload `name` and capture it. Its output is discarded;
    suite programs that write files (webserver) do so in a scratch directory."""
    scratch = cap.cache_dir() / "workloads" / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    out = out or f"{name}.spt"
    if get(name).runs is None:
        argv = command(name, size, args=args)
        return cap.capture(argv, out, fetches=fetches, progress=progress, stdout=subprocess.DEVNULL, cwd=str(scratch))
    if args:
        raise cap.CaptureError(f"workloads: {name}: takes no extra arguments")
    return _capture_runs(name, commands(name, size), out, fetches, progress, str(scratch))


def _capture_runs(name: str, argvs: list[list[str]], out: str, fetches: bool, progress, cwd: str) -> cap.CaptureResult:
    """Capture each process of a "runs" workload on its own, then join the traces in order."""
    import tempfile

    from . import api

    outdir = os.path.dirname(os.path.abspath(out))
    parts: list[cap.CaptureResult] = []
    done = 0
    with tempfile.TemporaryDirectory(prefix=f".{name}-runs-", dir=outdir) as tmp:
        for i, argv in enumerate(argvs):
            def step(accesses: int, seconds: float, base=done) -> None:
                if progress:
                    progress(base + accesses, seconds)
            r = cap.capture(argv, os.path.join(tmp, f"run{i:03d}.spt"), fetches=fetches, progress=step,
                            stdout=subprocess.DEVNULL, cwd=cwd)
            if r.status != 0 or r.truncated or r.write_error:
                r.notes.append(f"{name}: run {i + 1} of {len(argvs)} ({os.path.basename(argv[0])}) did not finish cleanly; "
                               f"nothing was joined")
                return r
            parts.append(r)
            done += r.accesses
        try:
            j = api.trace_join([p.path for p in parts], out, progress=False)
        except Exception as e:  # a SuperpagerError: name the workload
            raise cap.CaptureError(f"workloads: {name}: joining the runs: {e}") from None
    return cap.CaptureResult(path=out, command=argvs[0], recorder=parts[0].recorder, accesses=j["accesses"],
                             records=j["records"], bytes=j["bytes"], seconds=sum(p.seconds for p in parts), status=0,
                             truncated=False, processes=j["processes"], threads=sum(p.threads for p in parts),
                             notes=[f"{name}: {len(parts)} processes, each captured on its own and joined (trace join)"])
