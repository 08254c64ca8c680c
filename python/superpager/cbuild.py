"""Small C programs superpager compiles on first use (the live shim, calibrate's chase, the
workload suite), cached under ~/.cache/superpager by the source's hash so an edit rebuilds."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path


class BuildError(Exception):
    """No C compiler, or the source did not compile (the message says which)."""


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "superpager"


def compiled(src: Path, subdir: str, flags: list[str], suffix: str = "", libs: tuple[str, ...] = ()) -> Path:
    """`src` compiled with the system C compiler and `flags` into cache_root()/subdir, named
    after the source and its hash; built once, then reused."""
    digest = hashlib.sha256(src.read_bytes() + " ".join(flags).encode()).hexdigest()[:16]
    out = cache_root() / subdir / f"{src.stem}-{digest}{suffix}"
    if out.exists():
        return out
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise BuildError(f"building {src.name} needs a C compiler (make setup installs build-essential)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    r = subprocess.run([cc, *flags, "-o", str(tmp), str(src), *libs], capture_output=True, text=True)
    if r.returncode != 0:
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        raise BuildError(f"compiling {src} failed: {last}")
    os.replace(tmp, out)
    return out
