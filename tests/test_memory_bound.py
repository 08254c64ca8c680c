"""The memory bound of docs/RELIABILITY.md, checked under a hard address-space limit
(RLIMIT_AS, what `ulimit -v` sets): every hostile input of the fuzz corpus, its regressions and
issue 18's cases runs through the command that reads it, and each process either finishes or
stops with a one-line error; none is killed by a signal, panics or prints a traceback."""
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

import superpager as sp

ROOT = Path(__file__).resolve().parents[1]
FUZZ = ROOT / "fuzz"
MEMORY = 256 << 20
SWAP = 64 << 20


def bound_bytes(memory: int, swap: int, page_tables: int) -> int:
    """docs/RELIABILITY.md: 400 MiB (interpreter, libraries, buffers) + 20 B per simulated
    frame + twice the simulated page-table bytes + 64 B per swap slot."""
    return (400 << 20) + 20 * (memory // 4096) + 2 * page_tables + 64 * (swap // 4096)


# Page tables can use all of simulated memory at worst.
LIMIT = bound_bytes(MEMORY, SWAP, MEMORY)


def limited(*args, cwd):
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "superpager.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300, preexec_fn=cap, env=env)


def clean(p) -> None:
    assert p.returncode in (0, 1, 2), f"killed by signal {-p.returncode}: {p.stderr[-500:]}"
    for bad in ("Traceback", "panicked", "memory allocation of"):
        assert bad not in p.stderr, p.stderr[-800:]


def inputs(target):
    out = []
    for kind in ("corpus", "regressions"):
        d = FUZZ / kind / target
        if d.is_dir():
            out += sorted(p for p in d.iterdir() if p.is_file())
    return out


HOSTILE_TEXT = [
    "open 5 4096 /f\nmmap 0x10000000 0x1000 r-- shared 5 0xfffffffffffff000\nL 0x10000000 8\n"
    "read 5 0xfffffffffffff000 0xfffffffffffff000",
    "open 5 8000000000 /big\nread 5 0x0 5000000000\nread 5 0x7000000000000000 0x10000000",
    "mmap 0x40000000 0x400000 rw- private|anonymous -1 0x0\nS 0x40000000 8\nmadvise 0x0 0xffffffffffffffff 25\n"
    "madvise 0x0 0x7ffffffff000 25",
    # One page in every 2MiB region of 64GiB: page tables, not data, fill simulated memory.
    "mmap 0x100000000 0x1000000000 rw- private|anonymous -1 0x0\n"
    + "\n".join(f"S {0x100000000 + i * (2 << 20):#x} 8" for i in range(32768)),
    # 100k short-lived processes: each exited one keeps a few hundred bytes, found by a map.
    "\n".join(f"ctx {i} {i}\nmmap 0x10000000 0x1000 rw- private|anonymous -1 0x0\nS 0x10000000 8\nexit 0"
              for i in range(2, 100002)),
    # Descriptors past fs.nr_open, and many opens.
    "open -5 4096 /a\nopen 2000000000 4096 /b\n" + "\n".join(f"open {i} 4096 /f{i}" for i in range(3, 50000)),
]


@pytest.mark.parametrize("i", range(len(HOSTILE_TEXT)))
def test_hostile_text_traces_stay_under_the_bound(tmp_path, i):
    (tmp_path / "t.txt").write_text("ctx 1 1\n" + HOSTILE_TEXT[i] + "\nexit 0\n")
    p = limited("trace", "import", "t.txt", "--from", "text", "-o", "t.spt", cwd=tmp_path)
    clean(p)
    assert p.returncode == 0, p.stderr
    p = limited("simulate", "t.spt", "--memory", MEMORY, "--swap", SWAP, "--out", "res", cwd=tmp_path)
    clean(p)


def test_fuzz_inputs_stay_under_the_bound(tmp_path):
    n = 0
    for f in inputs("spt"):
        clean(limited("trace", "info", f, "--allow-truncated", cwd=tmp_path))
        clean(limited("simulate", f, "--memory", MEMORY, "--allow-truncated", cwd=tmp_path))
        n += 1
    for target, fmt in (("text", "text"), ("lackey", "lackey"), ("champsim", "champsim")):
        for f in inputs(target):
            p = limited("trace", "import", f, "--from", fmt, "-o", "x.spt", cwd=tmp_path)
            clean(p)
            if p.returncode == 0:
                clean(limited("simulate", "x.spt", "--memory", MEMORY, cwd=tmp_path))
            n += 1
    for f in inputs("simulate_text"):
        (tmp_path / "s.txt").write_bytes(f.read_bytes()[1:])
        p = limited("trace", "import", "s.txt", "--from", "text", "-o", "s.spt", cwd=tmp_path)
        clean(p)
        if p.returncode == 0:
            clean(limited("simulate", "s.spt", "--memory", MEMORY, "--swap", SWAP, cwd=tmp_path))
        n += 1
    for f in inputs("machine_toml"):
        clean(limited("machines", f, cwd=tmp_path))
        n += 1
    assert n >= 20


def test_the_bound_is_not_loose_enough_to_hide_a_leak(tmp_path):
    """A run that really needs more than the limit fails cleanly (so the limit is in force)."""
    sp.gen("seq", str(tmp_path / "g.spt"), size="1MiB", progress=False)
    r = limited("simulate", "g.spt", "--memory", "1TiB", cwd=tmp_path)
    clean(r)
    assert r.returncode == 2 and "frame table" in r.stderr, r.stderr
