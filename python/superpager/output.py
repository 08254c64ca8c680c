"""Writing results without losing anything: every output file is written whole (a temporary
file beside it, then a rename), an existing file that is not a regular file (a device, a FIFO,
a directory) is never replaced, an output is never one of the inputs, and a results directory
is locked for the whole run so that two runs cannot mix their files in it.

    with output.locked_dir("results/"):           # a second run into results/ stops at once
        ...simulate...
        output.write_set("results/", {"results.json": write_json, "counters.parquet": write_pq})
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator, Mapping, Sequence

from . import _core

LOCK_NAME = ".superpager.lock"
#: Files a results set may hold; those of an earlier run that the new set lacks are removed, so
#: a directory never mixes two runs' files.
RESULT_FILES = ("results.json", "counters.parquet", "series.parquet")
#: Directories whose lock this process holds (flock is per open file: taking it twice in one
#: process would fail against itself).
_held: set[str] = set()


def check_target(path: str, inputs: Sequence[str] = ()) -> None:
    """Raise SuperpagerError unless `path` may be written: absent, or a regular file that is none
    of `inputs` (the core's rule, shared with `gen` and `trace import`)."""
    _core.check_output(os.fspath(path), [os.fspath(i) for i in inputs])


def _tmp_name(path: str) -> str:
    d, b = os.path.split(path)
    return os.path.join(d, f".{b}.tmp-{os.getpid()}")


def write_file(path: str, write: Callable[[str], None], inputs: Sequence[str] = ()) -> str:
    """Write `path` whole: `write(tmp)` fills a temporary file beside it, which is then renamed
    over `path`. On any error (a full disk, Ctrl-C) the temporary file is removed and `path` is
    left as it was."""
    path = os.fspath(path)
    check_target(path, inputs)
    tmp = _tmp_name(path)
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def write_text(path: str, text: str, inputs: Sequence[str] = ()) -> str:
    def w(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write(text)

    return write_file(path, w, inputs)


@contextlib.contextmanager
def locked_dir(out_dir: str) -> Iterator[str]:
    """Create `out_dir` if needed and hold its lock until the block ends; a second holder fails
    at once with a one-line error naming the directory."""
    out_dir = os.fspath(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise _core.UsageError(f"{out_dir}: exists and is not a directory (--out names a directory)")
    os.makedirs(out_dir, exist_ok=True)
    key = os.path.realpath(out_dir)
    if key in _held:
        yield out_dir
        return
    fd = os.open(os.path.join(out_dir, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            raise _core.UsageError(f"{out_dir}: another superpager run (pid {holder}) is writing its results "
                                        f"here; wait for it to finish or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held.add(key)
        try:
            yield out_dir
        finally:
            _held.discard(key)
    finally:
        os.close(fd)


def write_set(out_dir: str, files: Mapping[str, Callable[[str], None]]) -> list[str]:
    """Write a results set into `out_dir` (whose lock the caller holds, or that this call takes):
    each file whole, results.json last, and any file of an earlier set that this one lacks
    removed first, so the directory never mixes two runs."""
    out_dir = os.fspath(out_dir)
    names = sorted(files, key=lambda n: n == "results.json")
    for n in names:
        check_target(os.path.join(out_dir, n))
    tmps = {}
    try:
        for n in names:
            tmp = _tmp_name(os.path.join(out_dir, n))
            tmps[n] = tmp
            files[n](tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        for stale in RESULT_FILES:
            if stale not in files:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(out_dir, stale))
        for n in names:
            os.replace(tmps.pop(n), os.path.join(out_dir, n))
    finally:
        for tmp in tmps.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return [os.path.join(out_dir, n) for n in names]
