"""DAMON physical-address access monitoring through its sysfs interface
(Documentation/admin-guide/mm/damon/usage.rst), for damon-live.

superpager adds its own kdamond with one `paddr` context and a `stat` scheme whose tried
regions (refreshed by writing `update_schemes_tried_regions` to the kdamond's `state`) are the
regions DAMON saw accessed, with their `nr_accesses`. Every write goes through `SysfsChanges`,
so the monitor is torn down on exit and after a crash. The sysfs root is a parameter: tests
drive this class against a directory tree shaped like the kernel's.

The kernel refuses to add a kdamond while another one runs (`nr_kdamonds` returns EBUSY); the
machines here run one for the platform's own reclaim. damon-live then reports DAMON as
unavailable and never stops or edits a monitor it did not create.
"""
from __future__ import annotations

import os
from pathlib import Path

from .sysfs import SysfsChanges

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
