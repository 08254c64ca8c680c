"""Capture: run a real program and record its memory accesses and address-space system calls
into an .spt trace.

The default recorder is qemu-user with superpager's own TCG plugin (spt_capture.c, built with
the system C compiler on first use and cached). The plugin sends raw records over a
SOCK_SEQPACKET socket to the Rust writer (superpager._core.CaptureSession), which encodes and
compresses on its own thread. `lackey=True` runs Valgrind lackey instead and converts its text
on the fly: slower by two orders of magnitude, for programs qemu-user cannot run.

    >>> from superpager.capture import capture
    >>> r = capture(["gzip", "-k", "-f", "data.bin"], "gzip.spt")
    >>> r.accesses, r.truncated, r.status
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Sequence

from .. import _core

HERE = Path(__file__).resolve().parent
PLUGIN_SOURCES = [HERE / "spt_capture.c", HERE / "qemu_plugin_v1.h"]
# How finely a thread's consecutive data accesses join into one record: within a 4KiB page, or a
# 64-byte line (docs/CAPTURE.md, "Runs"); the plugin's `collapse=` argument and the writer's.
COLLAPSES = ("page", "line")


class CaptureError(Exception):
    """A capture could not start or could not be completed (the message says why)."""

    def __init__(self, msg: str, status: int = 2):
        super().__init__(msg)
        self.status = status


@dataclass
class CaptureResult:
    path: str
    command: list[str]
    recorder: str
    accesses: int
    records: int
    bytes: int
    seconds: float
    status: int
    """The program's exit status; 128+N when signal N killed it (as shells report it)."""
    truncated: bool
    processes: int = 1
    threads: int = 1
    endings: list[dict] = field(default_factory=list)
    write_error: str | None = None
    notes: list[str] = field(default_factory=list)
    phase_marks: int = 0
    """Zero-length madvise calls in the trace (the phase marks `predict` costs from)."""

    @property
    def bytes_per_access(self) -> float:
        return self.bytes / max(self.accesses, 1)

    @property
    def rate(self) -> float:
        """Recorded accesses per second of wall time."""
        return self.accesses / max(self.seconds, 1e-9)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "superpager"


def plugin_path(rebuild: bool = False) -> Path:
    """The capture plugin's shared object, compiled on first use (cached by source hash)."""
    h = hashlib.sha256()
    for p in PLUGIN_SOURCES:
        h.update(p.read_bytes())
    d = cache_dir()
    so = d / f"spt_capture-{h.hexdigest()[:16]}.so"
    if so.exists() and not rebuild:
        return so
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise CaptureError("capture: no C compiler (cc) to build the qemu plugin; install build-essential (make setup does)")
    d.mkdir(parents=True, exist_ok=True)
    tmp = so.with_suffix(f".{os.getpid()}.tmp")
    cmd = [cc, "-O2", "-std=gnu11", "-Wall", "-Wextra", "-fPIC", "-shared", "-fvisibility=hidden",
           "-o", str(tmp), str(HERE / "spt_capture.c")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise CaptureError(f"capture: building the qemu plugin failed:\n{r.stderr.strip()}")
    os.replace(tmp, so)
    return so


def find_qemu() -> str:
    q = os.environ.get("SUPERPAGER_QEMU") or shutil.which("qemu-x86_64")
    if not q:
        raise CaptureError("capture: qemu-x86_64 not found; install the Debian package qemu-user "
                           "(make setup does), or use --lackey")
    return q


def resolve_command(cmd: Sequence[str]) -> list[str]:
    """The command with its program as an absolute path; a `#!` script becomes its interpreter
    running the script (qemu-user runs ELF files only)."""
    if not cmd:
        raise CaptureError("capture: no command given (usage: superpager capture [options] -- CMD ARGS)")
    prog = cmd[0]
    path = prog if "/" in prog else shutil.which(prog)
    if not path or not os.path.exists(path):
        raise CaptureError(f"capture: '{prog}': command not found", status=127)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise CaptureError(f"capture: '{prog}': not an executable file", status=126)
    path = os.path.abspath(path)
    with open(path, "rb") as f:
        head = f.read(256)
    if head.startswith(b"#!"):
        line = head[2:].split(b"\n", 1)[0].decode(errors="replace").strip().split(None, 1)
        if not line:
            raise CaptureError(f"capture: '{prog}': empty #! line", status=126)
        return resolve_command([line[0], *line[1:], path, *cmd[1:]])
    if not head.startswith(b"\x7fELF"):
        raise CaptureError(f"capture: '{prog}': not an ELF executable or a #! script", status=126)
    if head[4] != 2 or int.from_bytes(head[18:20], "little") != 62:
        raise CaptureError(f"capture: '{prog}': not an x86-64 executable (qemu-x86_64 runs those only)", status=126)
    return [path, *cmd[1:]]


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def capture(cmd: Sequence[str], out: str, fetches: bool = False, lackey: bool = False,
            progress: Callable[[int, float], None] | None = None, stdout=None,
            cwd: str | None = None, from_mark: bool = False, collapse: str = "page") -> CaptureResult:
    """Run `cmd` and record it into `out`. `progress(accesses, seconds)` is called about twice a
    second. The program's output goes where ours goes unless `stdout` says otherwise (as for
    subprocess); `cwd` is the directory it runs in. `from_mark`: before the program's first phase
    mark (a zero-length madvise), record no accesses but touches of the pages it has resident,
    before each address-space event near them and at the mark; from the mark on, everything
    (docs/CAPTURE.md, "From the mark"). `collapse`: consecutive data accesses of a thread join
    into one record while they stay in one 4KiB page ("page") or one 64-byte line ("line", so a
    data cache model sees every line; docs/CAPTURE.md, "Runs")."""
    if collapse not in COLLAPSES:
        raise CaptureError(f"capture: unknown collapse '{collapse}'; use {' or '.join(COLLAPSES)}")
    if from_mark and lackey:
        raise CaptureError("capture: --from-mark works with qemu-user only, not with --lackey")
    argv = resolve_command(cmd)
    from ..output import check_target

    try:
        check_target(out, [argv[0]])
    except _core.SuperpagerError as e:
        raise CaptureError(f"capture: {e}") from None
    run = dict(stdout=stdout, cwd=cwd, start_new_session=True)
    if lackey:
        return _capture_lackey(argv, list(cmd), out, fetches, progress, run, collapse)
    qemu = find_qemu()
    so = plugin_path()
    outdir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(outdir):
        raise CaptureError(f"capture: {out}: directory {outdir} does not exist")
    rx, tx = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for s, opt in ((tx, socket.SO_SNDBUF), (rx, socket.SO_RCVBUF)):
        try:
            s.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
        except OSError:
            pass
    plugin_arg = (f"{so},out={tx.fileno()},collapse={collapse}" + (",fetches=on" if fetches else "")
                  + (",from_mark=on" if from_mark else ""))
    meta = {
        "source": "capture",
        "recorder": "qemu-user TCG plugin (superpager spt_capture.c, plugin API v1)",
        "command": list(cmd),
        "fetches": fetches,
        "from_mark": from_mark,
        "collapse": collapse,
        "qemu": _qemu_version(qemu),
        "host": f"{platform.system()} {platform.release()} {platform.machine()}",
    }
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen([qemu, "-plugin", plugin_arg, *argv], pass_fds=[tx.fileno()], **run)
    except OSError as e:
        rx.close()
        tx.close()
        raise CaptureError(f"capture: cannot start {qemu}: {e}") from None
    tx.close()
    try:
        session = _core.CaptureSession(rx.fileno(), out, proc.pid, json.dumps(meta), collapse)
    except Exception:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        rx.close()
        raise
    interrupted = False  # read by the finally block if _watch raises
    try:
        interrupted = _watch(proc, session, progress, t0)
    finally:
        if proc.poll() is None:
            _kill(proc)
        if interrupted:
            # Give the recorder a few seconds to drain; a process that escaped the program's
            # process group may still hold the socket open, so do not wait for it forever.
            deadline = time.monotonic() + 5
            while not session.progress()[3] and time.monotonic() < deadline:
                time.sleep(0.05)
            session.stop()
        summary = session.finish(interrupted)
        rx.close()
    seconds = time.monotonic() - t0
    r = _result(out, list(cmd), "qemu-user", summary, proc.returncode, seconds, interrupted)
    if from_mark and not r.phase_marks:
        r.notes.append("--from-mark: the program made no phase mark (a zero-length madvise), so the trace holds "
                       "no accesses of its own, only touches of its resident pages before address-space events")
    return r


def _qemu_version(qemu: str) -> str:
    try:
        r = subprocess.run([qemu, "--version"], capture_output=True, text=True, timeout=10)
        return r.stdout.splitlines()[0] if r.stdout else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _watch(proc, session, progress, t0) -> bool:
    """Wait for the program and the recorder. Returns True if the user interrupted it."""
    try:
        while True:
            accesses, _, _, done, write_failed = session.progress()
            if progress:
                progress(accesses, time.monotonic() - t0)
            if done or write_failed:
                # Everyone holding the socket is gone, or the trace cannot be written (a full
                # disk): then the program is stopped below.
                break
            time.sleep(0.05 if time.monotonic() - t0 < 2 else 0.5)
        if proc.poll() is None:
            _kill(proc)
        proc.wait()
        session.stop()
        return False
    except KeyboardInterrupt:
        # Ctrl-C: pass it to the program (its own session), give it a moment, then stop it.
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            _kill(proc)
        # The recorder drains what was sent and sees the end of the stream by itself.
        return True


def _result(out, cmd, recorder, s, returncode, seconds, interrupted) -> CaptureResult:
    status = returncode if returncode >= 0 else 128 - returncode
    notes = []
    for e in s.get("endings", []):
        if e["end"] == "exec":
            notes.append(f"process {e['pid']} ran execve({e['program']}): qemu-user runs an exec'd program natively, "
                         f"so it is not in the trace (capture that program directly)")
    if s.get("orphans"):
        notes.append(f"{s['orphans']} process(es) appeared without the fork that made them (their parent was killed first)")
    if s.get("stream_error"):
        notes.append(f"the record stream broke: {s['stream_error']}")
    return CaptureResult(path=out, command=cmd, recorder=recorder, accesses=s["accesses"], records=s["records"],
                         bytes=s["bytes"], seconds=seconds, status=status, truncated=bool(s["truncated"]) or interrupted,
                         processes=s.get("processes", 1), threads=s.get("threads", 1), endings=s.get("endings", []),
                         write_error=s.get("write_error"), notes=notes, phase_marks=s.get("phase_marks", 0))


def _capture_lackey(argv, cmd, out, fetches, progress, run, collapse) -> CaptureResult:
    valgrind = shutil.which("valgrind")
    if not valgrind:
        raise CaptureError("capture: valgrind not found; install the Debian package valgrind (make setup does)")
    r, w = os.pipe()
    t0 = time.monotonic()
    proc = subprocess.Popen([valgrind, "--tool=lackey", "--trace-mem=yes", f"--log-fd={w}", *argv],
                            pass_fds=[w], **run)
    os.close(w)
    result: dict = {}

    def convert():
        try:
            result["summary"] = _core.trace_import(f"/dev/fd/{r}", "lackey", out, fetches=fetches, collapse=collapse)
        except Exception as e:  # reported below, after the program is stopped
            result["error"] = e

    t = threading.Thread(target=convert, name="lackey-import", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.5)
            if progress:
                progress(0, time.monotonic() - t0)
    except KeyboardInterrupt:
        _kill(proc)
        t.join()
    proc.wait()
    os.close(r)
    if "error" in result:
        if proc.poll() is None:
            _kill(proc)
        raise CaptureError(f"capture: converting lackey's output failed: {result['error']}", status=1)
    s = dict(result["summary"])
    # The importer marks the trace truncated when the log lacks lackey's closing line.
    s.update(truncated=bool(s.get("truncated")), endings=[])
    return _result(out, cmd, "valgrind lackey", s, proc.returncode, time.monotonic() - t0, False)
