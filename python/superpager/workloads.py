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
    _suite("compile", "32MiB", "compiler-like: many small short-lived objects, a symbol table", "Navarro/Romer 'gcc'"),
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
    if w.kind == "suite" and not (shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")):
        return "no C compiler (cc)"
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
    d = Path(workdir or (cap.cache_dir() / "workloads" / "data"))
    d.mkdir(parents=True, exist_ok=True)
    return w.argv(parse_size(size or w.default_size), d) + list(args)


def capture(name: str, out: str | None = None, size: str | None = None, fetches: bool = False,
            progress=None, args: Sequence[str] = ()) -> cap.CaptureResult:
    """Build (or prepare the input of) workload `name` and capture it. Its output is discarded;
    suite programs that write files (webserver) do so in a scratch directory."""
    argv = command(name, size, args=args)
    scratch = cap.cache_dir() / "workloads" / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    return cap.capture(argv, out or f"{name}.spt", fetches=fetches, progress=progress,
                       stdout=subprocess.DEVNULL, cwd=str(scratch))
