"""Changes to kernel settings, each undone: a restore record is written before a value changes.

Every setting a live run changes (THP and mTHP modes, hugetlb reservations, a DAMON monitor) goes
through `SysfsChanges.set`, which first appends the old value to a record file (fsync'd), then
writes the new one. A directory it creates in a pseudo filesystem (a tracefs instance:
`make_dir`) and a filesystem it mounts (tracefs where none is mounted: `mount`) are recorded the
same way, and undone by rmdir and umount. `restore()` puts every value back in reverse order and deletes the record;
`run` and `attach` call it on exit, Ctrl-C and SIGTERM. If superpager itself dies (SIGKILL, a
crash), the record stays: `restore_stale()` — run at the start of every live command and by
`superpager restore` — restores the records whose owner is no longer running.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

SYSFS_MM = "/sys/kernel/mm"


def state_dir() -> Path:
    """Where restore records live: $SUPERPAGER_STATE, else /run/superpager as root (cleared at
    boot, as the settings are), else ~/.cache/superpager/live."""
    env = os.environ.get("SUPERPAGER_STATE")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/run/superpager")
    return Path.home() / ".cache" / "superpager" / "live"


def read_setting(path: str) -> str:
    """A sysfs value as it would be written back: the bracketed choice of `always [madvise] never`."""
    text = Path(path).read_text().strip()
    if "[" in text and "]" in text:
        return text[text.index("[") + 1:text.index("]")]
    return text


def _remove_dir(path: str) -> None:
    """rmdir: a tracefs instance goes with the files the kernel put in it."""
    os.rmdir(path)


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def proc_stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields from the state (field 3) on, or None when there is no such
    process. The command name before them may hold spaces and parentheses: cut at the last ')'."""
    try:
        s = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return s[s.rindex(")") + 2:].split()


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (/proc/PID/stat field 22): tells a PID reused."""
    f = proc_stat(pid)
    return f[19] if f else None


# What a record entry undoes: a value written (its old value goes back), a directory made
# (removed), a filesystem mounted (unmounted). Records written before kinds existed hold values.
VALUE, DIR, MOUNT = "value", "dir", "mount"


class SysfsChanges:
    """Settings changed by this process, with their restore record. Use as a context manager.

    Invariant: every entry of `changes` is (path, old, kind) and is in the record file on disk
    before the change it undoes is made."""

    def __init__(self, label: str = "live"):
        self.label = label
        self.changes: list[tuple[str, str, str]] = []
        self.record: Path | None = None

    def _save(self) -> None:
        d = state_dir()
        d.mkdir(parents=True, exist_ok=True)
        if self.record is None:
            self.record = d / f"restore-{os.getpid()}-{int(time.time() * 1000)}.json"
        tmp = self.record.with_suffix(".tmp")
        body = {"pid": os.getpid(), "start": _start_time(os.getpid()), "label": self.label,
                "changes": [{"path": p, "old": o, "kind": k} for p, o, k in self.changes]}
        with open(tmp, "w") as f:
            json.dump(body, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.record)

    def set(self, path: str, value: str) -> None:
        """Records the old value of `path`, then writes `value`. Raises OSError as the kernel does."""
        old = read_setting(path)
        if old == value:
            return
        self._recorded(path, old, VALUE, lambda: _write(path, value))

    def make_dir(self, path: str) -> None:
        """Creates directory `path` (a tracefs instance), recorded so that restore removes it.
        Raises OSError as the kernel does (FileExistsError where it is there already)."""
        self._recorded(path, "", DIR, lambda: os.mkdir(path))

    def mount(self, fstype: str, path: str) -> None:
        """Mounts a `fstype` filesystem on directory `path`, recorded so that restore unmounts it.
        Raises OSError with mount's message where it fails."""
        def do() -> None:
            r = subprocess.run(["mount", "-t", fstype, fstype, path], capture_output=True, text=True)
            if r.returncode != 0:
                raise OSError(f"mount -t {fstype} {path}: {(r.stderr or r.stdout).strip()}")
        self._recorded(path, fstype, MOUNT, do)

    def _recorded(self, path: str, old: str, kind: str, change) -> None:
        """Records how to undo a change, then makes it; where it fails, the record drops it."""
        self.changes.append((path, old, kind))
        self._save()
        try:
            change()
        except OSError:
            self.changes.pop()
            self._save()
            raise

    def restore(self) -> list[str]:
        """Undoes every change, newest first; returns the problems (empty when all went back)."""
        problems = []
        for path, old, kind in reversed(self.changes):
            try:
                if kind == DIR:
                    if os.path.isdir(path):
                        _remove_dir(path)
                elif kind == MOUNT:
                    if os.path.ismount(path):
                        r = subprocess.run(["umount", path], capture_output=True, text=True)
                        if r.returncode != 0:
                            problems.append(f"{path}: could not unmount {old}: {(r.stderr or r.stdout).strip()}")
                elif os.path.exists(path) and read_setting(path) != old:
                    _write(path, old)
            except OSError as e:
                what = "remove it" if kind == DIR else f"restore '{old}'"
                problems.append(f"{path}: could not {what}: {e.strerror}")
        self.changes.clear()
        if self.record is not None:
            self.record.unlink(missing_ok=True)
            self.record = None
        return problems

    def __enter__(self) -> SysfsChanges:
        return self

    def __exit__(self, *exc) -> None:
        for p in self.restore():
            print(f"superpager: {p}", flush=True)


def restore_stale() -> list[str]:
    """Restores the records of superpager processes that died without restoring; returns one line
    per record restored or that could not be."""
    d = state_dir()
    out: list[str] = []
    try:
        records = sorted(d.glob("restore-*.json")) if d.is_dir() else []
    except OSError:
        return out  # another user's state directory: theirs to restore
    for rec in records:
        try:
            body = json.loads(rec.read_text())
            pid, start = int(body["pid"]), body.get("start")
            changes = [(c["path"], c["old"], c.get("kind", VALUE)) for c in body["changes"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            out.append(f"{rec}: unreadable restore record, left in place ({e})")
            continue
        if _start_time(pid) is not None and _start_time(pid) == start:
            continue  # its owner is alive and will restore
        s = SysfsChanges(body.get("label", "stale"))
        s.changes, s.record = list(changes), rec
        problems = s.restore()
        out.append(f"restored {len(changes)} setting(s) left changed by superpager pid {pid} ({body.get('label')})"
                   + (f"; {'; '.join(problems)}" if problems else ""))
    return out


def mm_path(key: str) -> str:
    """`transparent_hugepage/hugepages-64kB/enabled` -> its path under /sys/kernel/mm; refuses
    anything outside it."""
    p = os.path.normpath(os.path.join(SYSFS_MM, key))
    if not p.startswith(SYSFS_MM + "/"):
        raise ValueError(f"--sysfs {key}: only settings under {SYSFS_MM} may be changed")
    if not os.path.isfile(p):
        raise ValueError(f"--sysfs {key}: no such setting ({p})")
    return p
