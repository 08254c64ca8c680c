"""DAMON physical-address access monitoring through its sysfs interface
(Documentation/admin-guide/mm/damon/usage.rst), for damon-live.

superpager adds its own kdamond with one `paddr` context and a `stat` scheme whose tried
regions (refreshed by writing `update_schemes_tried_regions` to the kdamond's `state`) are the
regions DAMON saw accessed, with their `nr_accesses`. Every write goes through `SysfsChanges`,
so the monitor is torn down on exit and after a crash. The sysfs root is a parameter: tests
drive this class against a directory tree shaped like the kernel's.

The kernel refuses to add a kdamond while another one runs (`nr_kdamonds` returns EBUSY); the
machines here run one for the platform's own reclaim. superpager never stops or edits a monitor
it did not create. Where the running one monitors physical memory (`paddr`), damon-live reads
its results instead (`DamonTrace`): every aggregation interval a kdamond emits one
`damon:damon_aggregated` trace event per region (start, end, nr_accesses, age;
include/trace/events/damon.h), whatever its schemes do. superpager enables that event in a
tracefs instance of its own, so the system's trace buffer and the monitor's settings stay as
they were; the instance (and tracefs's mount, where none was mounted) is recorded in
`SysfsChanges` and removed on exit and after a crash; a mount of its own sits in superpager's
state directory, so no path of the system's changes. The monitor's own intervals then apply
(here: sampling every 0.5 s, aggregating every 5 s), not damon-live's `sample_us`/`aggr_us`,
and the report says so.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from .sysfs import SysfsChanges, state_dir

DAMON_ADMIN = "/sys/kernel/mm/damon/admin"


class DamonUnavailable(Exception):
    """DAMON cannot be used here; the message says why in one line."""


class Damon:
    def __init__(self, root: str = DAMON_ADMIN):
        self.root = Path(root)
        self.kd: Path | None = None

    def check(self) -> None:
        """Raises DamonUnavailable with the reason when a kdamond of ours cannot be added."""
        nr = self.root / "kdamonds" / "nr_kdamonds"
        if not nr.exists():
            raise DamonUnavailable(f"DAMON's sysfs interface is missing ({nr}): a kernel without CONFIG_DAMON_SYSFS")
        if not os.access(nr, os.W_OK):
            raise DamonUnavailable(f"{nr} is not writable (DAMON needs root)")
        ctx_ops = list((self.root / "kdamonds").glob("*/contexts/*/avail_operations"))
        if ctx_ops and "paddr" not in ctx_ops[0].read_text():
            raise DamonUnavailable("this kernel's DAMON has no paddr operations (CONFIG_DAMON_PADDR)")
        for st in (self.root / "kdamonds").glob("*/state"):
            if st.read_text().strip() == "on":
                pid = (st.parent / "pid").read_text().strip() if (st.parent / "pid").exists() else "?"
                raise DamonUnavailable(f"a kdamond superpager did not start is running ({st.parent.name}, pid {pid}); "
                                       f"the kernel refuses new kdamonds while one runs, and superpager does not stop another agent's monitor")

    def start(self, changes: SysfsChanges, sample_us: int, aggr_us: int, update_us: int,
              min_regions: int = 100, max_regions: int = 1000) -> None:
        """Adds and starts kdamond 0 with a paddr context and a stat scheme (restored by `changes`)."""
        self.check()
        k = self.root / "kdamonds"
        changes.set(str(k / "nr_kdamonds"), "1")
        kd = k / "0"
        c = kd / "contexts"
        changes.set(str(c / "nr_contexts"), "1")
        ctx = c / "0"
        changes.set(str(ctx / "operations"), "paddr")
        iv = ctx / "monitoring_attrs" / "intervals"
        changes.set(str(iv / "sample_us"), str(sample_us))
        changes.set(str(iv / "aggr_us"), str(aggr_us))
        changes.set(str(iv / "update_us"), str(update_us))
        nr = ctx / "monitoring_attrs" / "nr_regions"
        changes.set(str(nr / "min"), str(min_regions))
        changes.set(str(nr / "max"), str(max_regions))
        changes.set(str(ctx / "targets" / "nr_targets"), "1")
        changes.set(str(ctx / "schemes" / "nr_schemes"), "1")
        s = ctx / "schemes" / "0"
        changes.set(str(s / "action"), "stat")
        ap = s / "access_pattern"
        changes.set(str(ap / "nr_accesses" / "min"), "1")
        changes.set(str(ap / "age" / "min"), "0")
        changes.set(str(kd / "state"), "on")
        self.kd = kd

    def hot_regions(self) -> list[tuple[int, int, int]]:
        """The regions accessed in the last aggregation: [(start, end, nr_accesses)] in bytes."""
        if self.kd is None:
            return []
        (self.kd / "state").write_text("update_schemes_tried_regions")
        tr = self.kd / "contexts" / "0" / "schemes" / "0" / "tried_regions"
        out = []
        for r in sorted((p for p in tr.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
            try:
                out.append((int((r / "start").read_text()), int((r / "end").read_text()), int((r / "nr_accesses").read_text())))
            except (OSError, ValueError):
                continue  # the kernel rebuilt the directory under us: next round
        return out


# One damon_aggregated event as trace_pipe prints it (include/trace/events/damon.h's format):
# "... damon_aggregated: target_id=0 nr_regions=1199 4294967296-4306739200: 3 8".
_AGGREGATED = re.compile(r"damon_aggregated: target_id=(\d+) nr_regions=(\d+) (\d+)-(\d+): (\d+) (\d+)")


def running_paddr_kdamond(root: str = DAMON_ADMIN) -> tuple[Path, str] | None:
    """The first running kdamond with a paddr context, and a one-line description of it (its pid
    and intervals), or None."""
    for st in sorted(Path(root).glob("kdamonds/*/state")):
        try:
            if st.read_text().strip() != "on":
                continue
            kd = st.parent
            ctx = kd / "contexts" / "0"
            if (ctx / "operations").read_text().strip() != "paddr":
                continue
            iv = ctx / "monitoring_attrs" / "intervals"
            sample, aggr = (int((iv / k).read_text()) for k in ("sample_us", "aggr_us"))
            pid = (kd / "pid").read_text().strip() if (kd / "pid").exists() else "?"
        except (OSError, ValueError):
            continue
        return kd, f"kdamond {kd.name} (pid {pid}; sampling every {sample} us, aggregating every {aggr} us)"
    return None


def tracefs_mount() -> str | None:
    """Where tracefs is mounted (/proc/mounts), or None."""
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            f = line.split()
            if len(f) >= 3 and f[2] == "tracefs":
                return f[1]
    except OSError:
        pass
    return None


class DamonTrace:
    """A running paddr kdamond's results, read from its damon_aggregated events (the module
    docstring says why). `hot_regions` has the interface of `Damon.hot_regions`.

    Invariants: `latest` is the last aggregation read whole (its event count equals the events'
    nr_regions), or empty before the first; `partial` holds the events of an aggregation whose
    burst was cut by the end of a read, in address order."""

    EVENT = Path("events") / "damon" / "damon_aggregated" / "enable"

    def __init__(self, root: str = DAMON_ADMIN, tracefs: str | None = None):
        self.root = root
        self.tracefs = tracefs
        self.instance: Path | None = None
        self.monitor = ""
        self.latest: list[tuple[int, int, int]] = []
        self.partial: list[tuple[int, int, int]] = []
        self.partial_n = 0
        self.aggregations = 0

    def check(self) -> str:
        """The monitor to be read, described in one line; raises DamonUnavailable with the reason."""
        found = running_paddr_kdamond(self.root)
        if found is None:
            raise DamonUnavailable("no running kdamond monitors physical memory (paddr), and none of superpager's could be added")
        return found[1]

    def _make_instance(self, changes: SysfsChanges, path: Path) -> None:
        """Creates the tracefs instance (the kernel fills it with the event tree)."""
        changes.make_dir(str(path))

    def start(self, changes: SysfsChanges) -> None:
        """Enables damon_aggregated in a tracefs instance of ours (mounting tracefs where none
        is); every change is recorded in `changes`."""
        self.monitor = self.check()
        top = self.tracefs or tracefs_mount()
        if top is None:
            # A mount of our own, on a directory of our own: the system's mount table keeps its
            # paths, and no other user of tracefs loses it when this run unmounts.
            if not Path("/sys/kernel/tracing").is_dir():
                raise DamonUnavailable("tracefs is not mounted and /sys/kernel/tracing is missing (a kernel without CONFIG_TRACING)")
            d = state_dir()
            d.mkdir(parents=True, exist_ok=True)
            top = str(d / f"tracefs-{os.getpid()}")
            changes.make_dir(top)
            changes.mount("tracefs", top)
        inst = Path(top) / "instances" / f"superpager-{os.getpid()}"
        if not (Path(top) / self.EVENT).exists():
            raise DamonUnavailable(f"{Path(top) / self.EVENT} is missing: this kernel has no damon_aggregated trace event")
        self._make_instance(changes, inst)
        self.instance = inst
        changes.set(str(inst / self.EVENT), "1")

    def read_events(self) -> None:
        """Reads what trace_pipe holds, without waiting, into `latest` and `partial`."""
        if self.instance is None:
            return
        try:
            fd = os.open(self.instance / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return
        chunks = []
        try:
            while True:
                try:
                    b = os.read(fd, 1 << 16)
                except BlockingIOError:  # EAGAIN: nothing more until the next aggregation
                    break
                if not b:
                    break
                chunks.append(b)
        finally:
            os.close(fd)
        self.feed(b"".join(chunks).decode("ascii", "replace"))

    def feed(self, text: str) -> None:
        """Takes trace_pipe lines: each aggregation is a burst of nr_regions events in address
        order, so a region starting at or below the last one (or another nr_regions) begins the
        next aggregation."""
        for m in _AGGREGATED.finditer(text):
            if int(m.group(1)) != 0:
                continue  # a paddr context has one target
            n, start, end, acc = int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5))
            if self.partial and (start <= self.partial[-1][0] or n != self.partial_n):
                self.partial = []  # a burst cut short: its rest was lost (a full buffer)
            if not self.partial:
                self.partial_n = n
            self.partial.append((start, end, acc))
            if len(self.partial) == self.partial_n:
                self.latest, self.partial = self.partial, []
                self.aggregations += 1

    def hot_regions(self) -> list[tuple[int, int, int]]:
        """The regions accessed in the last whole aggregation read: [(start, end, nr_accesses)]."""
        self.read_events()
        return [r for r in self.latest if r[2] > 0]


def open_monitor(changes: SysfsChanges, sample_us: int, aggr_us: int, update_us: int,
                 root: str = DAMON_ADMIN, tracefs: str | None = None) -> tuple[Damon | DamonTrace, str]:
    """damon-live's monitor: a kdamond of superpager's own where one can be added, else the
    running paddr kdamond's events. Returns it and a note for the report ("" for our own).
    Raises DamonUnavailable (with both reasons) where neither can be had."""
    own = Damon(root)
    try:
        own.start(changes, sample_us, aggr_us, update_us)
        return own, ""
    except (DamonUnavailable, OSError) as e:
        why = str(e)
    shared = DamonTrace(root, tracefs)
    try:
        shared.start(changes)
    except DamonUnavailable as e:
        raise DamonUnavailable(f"{why}; {e}") from None
    return shared, (f"damon-live reads {shared.monitor} through its damon_aggregated trace events, since {why}; "
                    f"that monitor's intervals apply, not sample_us={sample_us} and aggr_us={aggr_us}")


def availability(root: str = DAMON_ADMIN) -> tuple[bool, str]:
    """(usable, note) without changing anything: whether damon-live has a monitor here, and the
    note its runs will carry (or why it has none)."""
    try:
        Damon(root).check()
        return True, ""
    except DamonUnavailable as e:
        own = str(e)
    try:
        desc = DamonTrace(root).check()
    except DamonUnavailable as e:
        return False, f"{own}; {e}"
    if not os.access(root, os.W_OK) or os.geteuid() != 0:
        return False, f"{own}; reading {desc}'s trace events needs root"
    return True, f"damon-live reads {desc} through its damon_aggregated trace events, since {own}"
