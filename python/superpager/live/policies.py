"""The live policies: names, parameters and what each needs. `superpager run --policy P`.

    base          PR_SET_THP_DISABLE for the program: 4KB pages only (the baseline)
    thp           the kernel's own THP; when the system mode is `madvise`, the LD_PRELOAD shim
                  advises the program's large anonymous allocations MADV_HUGEPAGE
    navarro-live  Navarro's incremental promotion: collapses an aligned 2MB range of an
                  anonymous VMA (process_madvise MADV_COLLAPSE) once promote_at of its 512
                  pages are populated; `reserve` faults the copy's new frame in beforehand
    damon-live    collapses the hottest 2MB ranges first, by DAMON's physical-address monitor,
                  through the same frame reserve (`reserve`); a kdamond of its own, or where the
                  kernel refuses one, the running paddr kdamond's results (its trace events)
    hugetlb-1g    the shim maps allocations of at least 1GB on reserved 1GB hugetlb pages
"""
from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable

from .budget import parse_max_cpu

MiB = 1 << 20


def _parse_reserve(v: str) -> str:
    if v not in ("on", "off", "auto"):
        raise ValueError(v)
    return v


@dataclass(frozen=True)
class Param:
    default: float | int | str
    help: str
    kind: Callable = int


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    summary: str
    needs_root: bool
    params: dict[str, Param] = field(default_factory=dict)


_BUDGET = {
    "interval_ms": Param(50, "time between two scans of the process (ms)"),
    "max_cpu": Param("auto", "the policy's CPU budget (its own time, collapses included): a share of one CPU in (0, 1], "
                             "or auto: the CPU the machine leaves idle, at least 0.1 and at most one", parse_max_cpu),
    "per_step": Param(64, "collapses at most this many 2MB ranges per scan"),
}

# navarro-live and damon-live collapse through the same path (crates/live/src/reserve.rs).
_RESERVE = Param("auto", "fault in each collapse's 2MB frame in superpager's own thread and free it just before the "
                         "collapse, so the copy (which holds the program's mmap lock) does not wait on the hypervisor: "
                         "on, off, or auto: on where a virtio balloon reports free pages to the host", _parse_reserve)

POLICIES: dict[str, PolicyInfo] = {
    "base": PolicyInfo("base", "4KB pages only: PR_SET_THP_DISABLE for the program", False),
    "thp": PolicyInfo("thp", "the kernel's THP; in madvise mode the shim advises allocations >= min bytes MADV_HUGEPAGE", False,
                      {"min": Param(2 * MiB, "smallest allocation the shim advises (bytes)")}),
    "navarro-live": PolicyInfo("navarro-live", "collapse an aligned 2MB range once promote_at of its 512 pages are populated (Navarro's promotion)", True,
                               {"promote_at": Param(512, "populated pages of 512 that trigger a collapse (512: fully populated, Navarro)"),
                                "reserve": _RESERVE,
                                **_BUDGET}),
    "damon-live": PolicyInfo("damon-live", "collapse the hottest 2MB ranges first, by DAMON's physical-address access monitor", True,
                             {"sample_us": Param(5000, "DAMON's sampling interval (us; a kdamond of its own only)"),
                              "aggr_us": Param(100000, "DAMON's aggregation interval (us; a kdamond of its own only)"),
                              "reserve": _RESERVE,
                              **{**_BUDGET, "interval_ms": Param(200, "time between two steps (ms); a step ranks again when the monitor's regions have changed"), "per_step": Param(32, "collapses per step, hottest ranked range first")}}),
    "hugetlb-1g": PolicyInfo("hugetlb-1g", "the shim maps allocations >= min bytes on 1GB hugetlb pages (falls back to thp placement)", False,
                             {"min": Param(1 << 30, "smallest allocation put on 1GB pages (bytes)"),
                              "reserve": Param(0, "1GB pages to reserve for the run (nr_hugepages, restored after; needs root)")}),
}


@dataclass
class LivePolicy:
    name: str
    params: dict[str, float | int | str]

    def __getitem__(self, k: str):
        return self.params[k]

    def spec(self) -> str:
        info = POLICIES[self.name]
        changed = [f"{k}={v}" for k, v in self.params.items() if v != info.params[k].default]
        return self.name + (":" + ",".join(changed) if changed else "")


def parse_policy(spec: str) -> LivePolicy:
    """`navarro-live:promote_at=256,max_cpu=0.2` -> LivePolicy; ValueError names the bad key."""
    name, _, rest = spec.partition(":")
    if name not in POLICIES:
        raise ValueError(f"--policy {spec}: unknown live policy '{name}' (one of: {', '.join(POLICIES)})")
    info = POLICIES[name]
    params: dict[str, float | int | str] = {k: p.default for k, p in info.params.items()}
    for kv in filter(None, rest.split(",")):
        k, eq, v = kv.partition("=")
        if not eq or k not in info.params:
            known = ", ".join(info.params) or "none"
            raise ValueError(f"--policy {spec}: unknown parameter '{k}' for {name} (parameters: {known})")
        try:
            val = info.params[k].kind(v)
        except ValueError:
            if k == "max_cpu":
                raise ValueError(f"--policy {spec}: max_cpu must be auto or a share of one CPU in (0, 1]") from None
            if k == "reserve":
                raise ValueError(f"--policy {spec}: reserve must be on, off or auto") from None
            raise ValueError(f"--policy {spec}: {k}={v} is not a{'n integer' if info.params[k].kind is int else ' number'}") from None
        params[k] = val
    p = LivePolicy(name, params)
    if name == "navarro-live" and not 1 <= int(p["promote_at"]) <= 512:
        raise ValueError(f"--policy {spec}: promote_at must be 1..512 (pages of a 2MB range)")
    for k in ("interval_ms", "per_step"):
        if k in params and int(p[k]) < 1:
            raise ValueError(f"--policy {spec}: {k} must be at least 1")
    return p


def describe() -> str:
    """The policies and their parameters, for --help."""
    lines = []
    for p in POLICIES.values():
        lines.append(f"  {p.name:<13} {p.summary}{' (root)' if p.needs_root else ''}")
        for k, prm in p.params.items():
            lines.append(f"      {k}={prm.default}  {prm.help}")
    return "\n".join(lines)
