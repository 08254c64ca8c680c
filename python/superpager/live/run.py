"""`superpager run` and `superpager attach`: a live policy on a real process, and its report.

The loop samples the process's smaps_rollup (the page-size mix over time), runs the policy's
scan when it is due and its CPU budget allows, and optionally inspects the whole process every
few seconds (bloat, contiguity). It ends when the process exits, on Ctrl-C or SIGTERM (the
program gets SIGINT, then SIGKILL after 5 s), or after --duration for attach. Every kernel
setting changed for the run is restored on every one of those paths (sysfs.py).
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Sequence

from .. import _core
from . import damon as dm
from .budget import Budget
from .policies import LivePolicy, POLICIES, parse_policy
from .sysfs import SysfsChanges, mm_path, proc_stat, read_setting, restore_stale

THP = "/sys/kernel/mm/transparent_hugepage"
HUGETLB_1G = "/sys/kernel/mm/hugepages/hugepages-1048576kB"
PR_SET_THP_DISABLE = 41  # include/uapi/linux/prctl.h


class LiveError(Exception):
    """A live run cannot start; the message says why in one line."""


def thp_mode() -> str | None:
    try:
        return read_setting(f"{THP}/enabled")
    except OSError:
        return None


def is_root() -> bool:
    return os.geteuid() == 0


def shim_library() -> Path:
    """The LD_PRELOAD shim, built from shim.c with the system's C compiler on first use (cached
    by the source's hash)."""
    from ..cbuild import BuildError, compiled
    try:
        return compiled(Path(__file__).with_name("shim.c"), "live", ["-O2", "-shared", "-fPIC"], suffix=".so")
    except BuildError as e:
        raise LiveError(f"the thp and hugetlb-1g policies need their shim: {e}") from None


def rollup(pid: int) -> dict[str, int] | None:
    """Rss, AnonHugePages and hugetlb bytes from /proc/PID/smaps_rollup; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    out = {"rss": 0, "anon_huge": 0, "hugetlb": 0}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        parts = v.split()
        if len(parts) == 2 and parts[1] == "kB":
            n = int(parts[0]) * 1024
            if k == "Rss":
                out["rss"] = n
            elif k == "AnonHugePages":
                out["anon_huge"] = n
            elif k in ("Private_Hugetlb", "Shared_Hugetlb"):
                out["hugetlb"] += n
    return out


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass
class Report:
    policy: str
    command: list[str]
    pid: int
    thp_mode: str | None
    root: bool
    notes: list[str] = field(default_factory=list)
    exit_status: int | None = None
    """The program's exit code; -N when a signal N ended it; None for attach."""
    wall_s: float = 0.0
    policy_cpu_s: float = 0.0
    """superpager's own CPU time (user + system: scans, collapses, samples), excluding the program's."""
    step_cpu_s: float = 0.0
    """The policy's part of policy_cpu_s: its scans and collapses, which max_cpu bounds."""
    sampling_cpu_s: float = 0.0
    """The measurement's part: smaps_rollup samples and inspections, kept under 5% of one CPU."""
    samples: list[dict] = field(default_factory=list)
    budget: dict | None = None
    """The CPU budget the policy ran under (max_cpu): its setting and the share of one CPU it
    allowed, mean, min and max over one-second windows (one value for a fixed share)."""
    counters: dict = field(default_factory=dict)
    shim: dict = field(default_factory=dict)
    inspect: dict | None = None
    """The last whole-process inspection (--inspect-every): bloat, contiguity, mapping sizes."""
    settings_restored: bool = True

    def to_json(self) -> dict:
        return dict(self.__dict__)


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived while a run or attach was under way."""


class _DamonCollapses:
    """damon-live's work once DAMON runs: rank the regions DAMON finds hot and collapse the
    hottest through navarro-live's frame reserve (the one Rust path, `LiveCollapser`)."""

    def __init__(self, damon: dm.Damon | dm.DamonTrace, pid: int, reserve: str):
        self.damon, self.pid = damon, pid
        self.collapser = _core.LiveCollapser(pid, reserve)
        self.counts: dict[str, int] = {"rankings": 0, "rankings_reused": 0, "no_hot_regions": 0, "collapsed": 0, "retried": 0, "regions_seen": 0}
        self.failed: dict[str, int] = {}
        # The last ranking: the regions it was made from, and its ranges not yet tried, hottest
        # first. While the monitor reports the same regions (a shared monitor aggregates every
        # few seconds, and steps come every interval_ms), the next step goes on down this list
        # instead of ranking again: a ranking reads the program's pagemap over every region.
        self.ranked_from: list[tuple[int, int, int]] | None = None
        self.queue: list[int] = []
        # Ranges of this ranking that failed once and were put back at its end (`retried` counts them).
        self.requeued: set[int] = set()

    def step(self, per: int) -> tuple[bool, bool]:
        """(busy, pending), as `Policy.step`: pending when the ranking holds ranges not yet tried
        and this step's collapses are not all failing (a failing kernel is not retried at once).
        A range that fails goes once to the end of the ranking, so a transient failure (EAGAIN: a
        page briefly locked or off the LRU; ENOMEM while compaction catches up) is retried a step
        later without reading the pagemap again; failing twice, it waits for the monitor's next
        aggregation to rank it again."""
        regions = self.damon.hot_regions()
        if not regions:
            # Nothing accessed in the monitor's last aggregation, or none has arrived yet (a
            # shared monitor aggregates on its own schedule): nothing to rank.
            self.counts["no_hot_regions"] += 1
            return False, False
        if regions != self.ranked_from:
            self.counts["rankings"] += 1
            self.counts["regions_seen"] += len(regions)
            self.queue = [addr for addr, _score in _core.live_rank(self.pid, regions)]
            self.ranked_from = regions
            self.requeued.clear()
        else:
            self.counts["rankings_reused"] += 1
        batch, self.queue = self.queue[:per], self.queue[per:]
        ok_count = 0
        for addr in batch:
            ok, reason, _errno = self.collapser.collapse(addr)
            if ok:
                self.counts["collapsed"] += 1
                ok_count += 1
            elif reason == "gone":
                raise ProcessLookupError(self.pid)
            else:
                self.failed[reason] = self.failed.get(reason, 0) + 1
                if addr not in self.requeued:
                    self.requeued.add(addr)
                    self.queue.append(addr)
                    self.counts["retried"] += 1
        return len(batch) > 0, bool(self.queue) and ok_count > 0

    def counters(self) -> dict:
        c = {**self.counts, "failed": self.failed, "reserve": json.loads(self.collapser.reserve_counters())}
        if isinstance(self.damon, dm.DamonTrace):
            # Another agent's monitor: how many of its aggregations arrived while the program ran
            # (none yet: nothing ranked, so nothing collapsed).
            c["monitor"], c["aggregations"] = "shared", self.damon.aggregations
        else:
            c["monitor"] = "own"
        return c


class Policy:
    """The active part of a policy: `step()` once per interval while the process runs."""

    def __init__(self, pol: LivePolicy, pid: int, rep: Report, changes: SysfsChanges, damon_root: str):
        self.pol, self.pid, self.rep = pol, pid, rep
        self.scanner = None
        self.damon: _DamonCollapses | None = None
        name = pol.name
        if name in ("navarro-live", "damon-live") and not is_root():
            rep.notes.append(f"{name} needs root (MADV_COLLAPSE on another process needs CAP_SYS_NICE): "
                             f"the program runs without a policy and the report shows what the kernel did")
            return
        reserve = str(pol.params.get("reserve", "auto"))
        if name == "damon-live":
            try:
                damon, note = dm.open_monitor(changes, int(pol["sample_us"]), int(pol["aggr_us"]),
                                              max(int(pol["aggr_us"]) * 10, 1000000), damon_root)
            except (dm.DamonUnavailable, OSError) as e:
                rep.notes.append(f"damon-live: DAMON is unavailable here: {e}; falling back to navarro-live's rule (collapse when fully populated)")
                name = "navarro-live"
            else:
                if note:
                    rep.notes.append(note)
                self.damon = _DamonCollapses(damon, pid, reserve)
        if name == "navarro-live":
            self.scanner = _core.NavarroLive(pid, int(pol.params.get("promote_at", 512)), reserve)

    @property
    def active(self) -> bool:
        return self.scanner is not None or self.damon is not None

    def step(self) -> tuple[bool, bool]:
        """One scan: (busy, pending). busy: it found work (collapsed, failed or deferred a range);
        pending: it left ranges it knows are ready because `per_step` was spent (`next_step_at`)."""
        per = int(self.pol["per_step"])
        if self.damon is not None:
            return self.damon.step(per)
        if self.scanner is not None:
            o = json.loads(self.scanner.step(per))
            return o["collapsed"] + o["failed"] + o["deferred"] > 0, o["deferred"] > 0
        return False, False

    def counters(self) -> dict:
        if self.damon is not None:
            return self.damon.counters()
        if self.scanner is not None:
            return json.loads(self.scanner.counters())
        return {}


class _Session:
    """What run and attach share: stale records restored first, SIGINT and SIGTERM turned into
    `Interrupted` while the policy works, and on the way out every setting restored (problems noted in
    the report), the signal handlers and the terminal's status line put back."""

    def __init__(self, label: str, quiet: bool):
        self.label, self.quiet = label, quiet
        self.changes = SysfsChanges(label)

    def __enter__(self) -> _Session:
        for line in restore_stale():
            print(f"superpager: {line}", file=sys.stderr)
        self.stop_requested = False
        self.old = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        return self

    def _on_signal(self, signum, frame) -> None:
        # Only a flag, never an exception: Python runs a handler between any two bytecodes, and an
        # exception raised just after subprocess's Popen._wait took its waitpid lock leaves the lock
        # held, so the next proc.wait() blocks for ever (seen once in CI: run ignored SIGINT).
        # The waits below poll the flag and raise Interrupted from a known place.
        self.stop_requested = True

    def check(self) -> None:
        """Raises Interrupted once SIGINT or SIGTERM has arrived."""
        if self.stop_requested:
            raise Interrupted()

    def waiter(self, done: Callable[[], bool], end: float = float("inf")) -> Callable[[float], bool]:
        """`_loop`'s wait: polls `done()` every 50 ms for up to `timeout` seconds, True once it
        holds or the monotonic time `end` has passed; raises Interrupted after a signal."""
        def wait(timeout: float) -> bool:
            deadline = min(time.monotonic() + timeout, end)
            while True:
                self.check()
                if done() or time.monotonic() >= end:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                time.sleep(min(left, 0.05))
        return wait

    def finish(self, rep: Report) -> None:
        problems = self.changes.restore()
        rep.settings_restored = not problems
        rep.notes.extend(problems)

    def __exit__(self, *exc) -> None:
        self.changes.restore()  # nothing left if finish ran; everything if it did not
        signal.signal(signal.SIGINT, self.old[0])
        signal.signal(signal.SIGTERM, self.old[1])
        if sys.stderr.isatty() and not self.quiet:
            sys.stderr.write("\r" + " " * 90 + "\r")


def _preexec(pol: LivePolicy) -> Callable[[], None] | None:
    if pol.name != "base":
        return None

    def f() -> None:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
            os.write(2, b"superpager run: prctl(PR_SET_THP_DISABLE) failed\n")
    return f


def _prepare(pol: LivePolicy, rep: Report, changes: SysfsChanges, sysfs: Sequence[tuple[str, str]], shim_report: Path) -> dict[str, str]:
    """Applies settings, checks what the policy needs; returns the program's extra environment."""
    for key, value in sysfs:
        try:
            changes.set(mm_path(key), value)
        except ValueError as e:
            raise LiveError(str(e)) from None
        except OSError as e:
            raise LiveError(f"--sysfs {key}={value}: {e.strerror}" + ("" if is_root() else " (changing kernel settings needs root)")) from None
    env: dict[str, str] = {}
    mode = thp_mode()
    if pol.name in ("thp", "navarro-live", "damon-live") and mode in (None, "never"):
        rep.notes.append(f"THP is {'missing' if mode is None else 'disabled (enabled=never)'} on this machine: the program gets 4KB pages"
                         + ("" if pol.name == "thp" else "; collapses may still be tried"))
    if pol.name == "hugetlb-1g":
        want = int(pol["reserve"])
        if want > 0:
            if not is_root():
                rep.notes.append("hugetlb-1g:reserve needs root: using the 1GB pages already reserved")
            elif not os.path.exists(HUGETLB_1G):
                rep.notes.append("this kernel has no 1GB hugetlb pages (hugepages-1048576kB missing)")
            else:
                # 1GB blocks exist only after the page cache is dropped and memory compacted (platform.md).
                for p, v in (("/proc/sys/vm/drop_caches", "3"), ("/proc/sys/vm/compact_memory", "1")):
                    try:
                        Path(p).write_text(v)
                    except OSError:
                        pass
                have = int(Path(f"{HUGETLB_1G}/nr_hugepages").read_text())
                changes.set(f"{HUGETLB_1G}/nr_hugepages", str(have + want))
                got = int(Path(f"{HUGETLB_1G}/nr_hugepages").read_text()) - have
                if got < want:
                    rep.notes.append(f"hugetlb-1g: reserved {got} of the {want} 1GB pages asked for (physical memory too fragmented)")
        free = int(Path(f"{HUGETLB_1G}/free_hugepages").read_text()) if os.path.exists(HUGETLB_1G) else 0
        if free == 0:
            rep.notes.append("no free 1GB hugetlb pages: allocations of 1GB or more fall back to 2MB-aligned THP placement "
                             "(reserve some with hugetlb-1g:reserve=N as root)")
    if pol.name in ("thp", "hugetlb-1g"):
        env.update({"LD_PRELOAD": str(shim_library()), "SUPERPAGER_SHIM_MODE": pol.name,
                    "SUPERPAGER_SHIM_MIN": str(int(pol["min"])), "SUPERPAGER_SHIM_REPORT": str(shim_report)})
        if pol.name == "thp" and mode == "always":
            rep.notes.append("THP mode is 'always': the kernel backs every eligible region with 2MB pages; the shim's advice changes nothing")
    return env


def _read_shim(path: Path) -> dict:
    """Sums the shim's per-process lines (a program that forks writes one per process)."""
    out: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            for kv in line.split():
                k, _, v = kv.partition("=")
                if k != "pid" and v.isdigit():
                    out[k] = out.get(k, 0) + int(v)
    except OSError:
        pass
    return out


# The samples and inspections are the measurement, not the policy: at most this share of one CPU
# goes to them (smaps_rollup walks every page table: 22ms for 4GiB of 4KB pages on the AMD EPYC
# host, so sampling every 100ms took 22% of a CPU), by spacing them out as the process grows.
SAMPLING_CPU_SHARE = 0.05


def next_step_at(now: float, interval: float, pending: bool, step_cpu: float, allowance: float, share: float) -> float:
    """When the policy's next step may start, `now` being the end of the last one.

    - The budget: the policy's CPU time stays under what `max_cpu` has allowed so far (for a
      fixed share, share x elapsed: the next step waits until t0 + step_cpu / share).
    - `pending`: the last step left ranges it had found ready for lack of `per_step` (deferred),
      so the next one follows as soon as the budget allows. Otherwise `interval` after. Before
      the twenty-seventh session a step with work left waited `interval` too: with 64 collapses
      of about 1.1ms each, that held navarro-live to 58% of the CPU `auto` gave it, and GUPS at
      4GiB went on collapsing 1.5 s into its access phase (docs/LIVE.md)."""
    over_budget = now + (step_cpu - allowance) / share
    return max(now if pending else now + interval, over_budget)


def _loop(rep: Report, policy: Policy, pol: LivePolicy, pid: int, wait: Callable[[float], bool],
          sample_s: float, inspect_every: float, status: Callable[[Report], None] | None) -> None:
    """Runs until `wait(timeout)` says the process is done (True)."""
    t0 = time.monotonic()
    cpu0 = cpu_self()
    base_interval = int(pol.params.get("interval_ms", 100)) / 1000
    interval = base_interval
    budget = Budget(pol.params.get("max_cpu", 1.0), t0, cpu0)
    step_cpu = 0.0  # the policy's own CPU time: its scans, and the collapses the kernel does for it
    sampling_cpu = 0.0
    next_step = t0
    next_sample = t0
    next_inspect = t0 + inspect_every if inspect_every > 0 else float("inf")
    while True:
        now = time.monotonic()
        if now >= next_sample:
            c0 = time.thread_time()
            r = rollup(pid)
            if r is not None:
                c = policy.counters()
                rep.samples.append({"t": round(now - t0, 4), **r, "collapsed": int(c.get("collapsed", 0))})
            took = time.thread_time() - c0
            sampling_cpu += took
            next_sample = time.monotonic() + max(sample_s, took / SAMPLING_CPU_SHARE)
        if policy.active and now >= next_step:
            c0 = time.thread_time()
            try:
                busy, pending = policy.step()
            except ProcessLookupError:
                break
            finally:
                step_cpu += time.thread_time() - c0
            # Nothing to do: scan half as often (up to 16x the interval), as khugepaged sleeps
            # between scans; any work brings the interval back.
            interval = base_interval if busy else min(interval * 2, base_interval * 16)
            after = time.monotonic()
            budget.update(after, cpu_self())
            next_step = next_step_at(after, interval, pending, step_cpu, budget.allowance(), budget.share())
        if now >= next_inspect:
            c0 = time.thread_time()
            try:
                rep.inspect = json.loads(_core.live_inspect(pid))
            except ProcessLookupError:
                break
            took = time.thread_time() - c0
            sampling_cpu += took
            next_inspect = time.monotonic() + max(inspect_every, took / SAMPLING_CPU_SHARE)
        if status:
            status(rep)
        nxt = min(next_sample, next_step if policy.active else float("inf"), next_inspect)
        if wait(max(0.0, nxt - time.monotonic())):
            break
    rep.wall_s = round(time.monotonic() - t0, 4)
    rep.policy_cpu_s = round(cpu_self() - cpu0, 4)
    rep.step_cpu_s = round(step_cpu, 4)
    rep.sampling_cpu_s = round(sampling_cpu, 4)
    if policy.active:
        rep.budget = budget.summary()
    rep.counters = policy.counters()


def _status_line(label: str) -> Callable[[Report], None] | None:
    if not sys.stderr.isatty():
        return None
    last = [0.0]

    def show(rep: Report) -> None:
        now = time.monotonic()
        if now - last[0] < 0.5 or not rep.samples:
            return
        last[0] = now
        s = rep.samples[-1]
        huge = (s["anon_huge"] + s["hugetlb"]) / s["rss"] if s["rss"] else 0.0
        sys.stderr.write(f"\r{label}: {s['t']:7.1f}s  rss {s['rss'] / 2**20:9.1f}MiB  huge {huge * 100:5.1f}%  collapsed {s['collapsed']:6d} ")
        sys.stderr.flush()
    return show


def run(command: Sequence[str], policy: str, report_dir: str | None = None, sysfs: Sequence[tuple[str, str]] = (),
        sample_ms: int = 100, inspect_every: float = 0.0, quiet: bool = False, damon_root: str = dm.DAMON_ADMIN,
        stdout=None) -> Report:
    """Runs `command` under a live policy; returns the report (and writes it to report_dir)."""
    pol = parse_policy(policy)
    if not command:
        raise LiveError("run: no command given (superpager run --policy P -- CMD ARGS)")
    if shutil.which(command[0]) is None and not os.path.exists(command[0]):
        raise LiveError(f"run: {command[0]}: command not found")
    rep = Report(pol.spec(), list(command), 0, thp_mode(), is_root())
    out_dir = Path(report_dir) if report_dir else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    shim_report = (out_dir or Path(os.environ.get("TMPDIR", "/tmp"))) / f"shim-{os.getpid()}.txt"
    shim_report.unlink(missing_ok=True)
    with _Session(f"run --policy {pol.spec()}", quiet) as ses:
        try:
            env = {**os.environ, **_prepare(pol, rep, ses.changes, sysfs, shim_report)}
            ses.check()
            proc = subprocess.Popen(list(command), env=env, preexec_fn=_preexec(pol), stdout=stdout)
            rep.pid = proc.pid
            wait = ses.waiter(lambda: proc.poll() is not None)
            policy_obj: Policy | None = None
            try:  # from here on, whatever happens, the program is stopped before superpager returns
                policy_obj = Policy(pol, proc.pid, rep, ses.changes, damon_root)
                for n in rep.notes:
                    print(f"superpager run: {n}", file=sys.stderr)
                _loop(rep, policy_obj, pol, proc.pid, wait, sample_ms / 1000, inspect_every, None if quiet else _status_line("run"))
            except Interrupted:
                rep.notes.append("interrupted: the program was sent SIGINT")
                if policy_obj is not None:
                    rep.counters = policy_obj.counters()
                raise
            finally:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
                    try:
                        proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
                rep.exit_status = proc.returncode
        finally:
            ses.finish(rep)
            rep.shim = _read_shim(shim_report)
            if not out_dir:
                shim_report.unlink(missing_ok=True)
            if out_dir:
                write_report(rep, out_dir)
    return rep


def attach(pid: int, policy: str, duration: float | None = None, report_dir: str | None = None,
           sample_ms: int = 100, inspect_every: float = 0.0, quiet: bool = False, damon_root: str = dm.DAMON_ADMIN) -> Report:
    """Applies a live policy to a running process until it exits, `duration` passes, or Ctrl-C."""
    pol = parse_policy(policy)
    if pol.name in ("base", "thp", "hugetlb-1g"):
        raise LiveError(f"attach: {pol.name} acts when a program starts (prctl, LD_PRELOAD); use `superpager run --policy {pol.name} -- CMD`")
    check_attachable(pid)
    rep = Report(pol.spec(), _cmdline(pid), pid, thp_mode(), is_root())
    out_dir = Path(report_dir) if report_dir else None
    end = time.monotonic() + duration if duration else float("inf")
    with _Session(f"attach {pid} --policy {pol.spec()}", quiet) as ses:
        try:
            policy_obj = Policy(pol, pid, rep, ses.changes, damon_root)
            for n in rep.notes:
                print(f"superpager attach: {n}", file=sys.stderr)
            wait = ses.waiter(lambda: not _alive(pid), end)
            try:
                _loop(rep, policy_obj, pol, pid, wait, sample_ms / 1000, inspect_every, None if quiet else _status_line(f"attach {pid}"))
            except Interrupted:
                rep.notes.append("interrupted (Ctrl-C): the process was left running")
                rep.counters = policy_obj.counters()
        finally:
            ses.finish(rep)
            if out_dir:
                out_dir.mkdir(parents=True, exist_ok=True)
                write_report(rep, out_dir)
    return rep


def _alive(pid: int) -> bool:
    f = proc_stat(pid)
    return f is not None and f[0] not in ("Z", "X")


def _cmdline(pid: int) -> list[str]:
    try:
        return [a for a in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if a]
    except OSError:
        return []


def check_attachable(pid: int) -> None:
    """Refuses, in one line, a process that does not exist or that this user may not ptrace."""
    if not _alive(pid):
        raise LiveError(f"attach: no process {pid}")
    try:
        with open(f"/proc/{pid}/mem", "rb"):
            pass  # opening mem is the kernel's PTRACE_MODE_ATTACH check
    except PermissionError:
        try:
            owner = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            owner = -1
        raise LiveError(f"attach: you may not ptrace process {pid} (owned by uid {owner}; you are uid {os.geteuid()}): "
                        f"run superpager as its owner with CAP_SYS_NICE, or as root") from None
    except FileNotFoundError:
        raise LiveError(f"attach: no process {pid}") from None


def mib(n: int) -> str:
    return f"{n / 2**20:.1f}MiB"


def summary(rep: Report) -> str:
    """The report as a few lines for the terminal (and report.md)."""
    lines = [f"policy {rep.policy} on pid {rep.pid}: {' '.join(rep.command)[:120]}",
             f"  wall {rep.wall_s:.2f}s, exit status {rep.exit_status}, superpager's own CPU {rep.policy_cpu_s:.3f}s (policy {rep.step_cpu_s:.3f}s, samples {rep.sampling_cpu_s:.3f}s), THP mode {rep.thp_mode}"]
    if rep.samples:
        last = rep.samples[-1]
        peak = max(s["rss"] for s in rep.samples)
        huge = last["anon_huge"] + last["hugetlb"]
        lines.append(f"  last sample ({last['t']:.1f}s): RSS {mib(last['rss'])}, {mib(last['anon_huge'])} in 2MB pages, {mib(last['hugetlb'])} hugetlb "
                     f"({huge / last['rss'] * 100 if last['rss'] else 0:.1f}% huge); peak RSS {mib(peak)}")
    if rep.budget:
        b = rep.budget
        lines.append(f"  CPU budget max_cpu={b['max_cpu']}: " + (f"{b['mean']:.2f} of a CPU on average ({b['min']:.2f}-{b['max']:.2f})"
                                                              if b["max_cpu"] == "auto" else f"{b['mean']:.2f} of a CPU"))
    c = rep.counters
    if c:
        failed = c.get("failed", {})
        lines.append(f"  collapses: {c.get('collapsed', 0)} done, {sum(failed.values())} failed"
                     + (f" ({', '.join(f'{k} {v}' for k, v in sorted(failed.items()))})" if failed else ""))
        rest = {k: v for k, v in c.items() if k not in ("collapsed", "failed", "reserve")}
        lines.append("  decisions: " + ", ".join(f"{k} {v}" for k, v in rest.items()))
        r = c.get("reserve")
        if r:
            fill = f" ({r['fill_s']:.2f} s, {1000 * r['fill_s'] / r['filled']:.2f} ms each)" if r.get("filled") else ""
            lines.append(f"  frame reserve ({r['mode']}): {r['filled']} 2MB frames faulted in{fill}, {r['handed_over']} freed for a collapse, "
                         f"{r['used']} taken by it, {r['missed']} not" + (f"; {r['not_huge']} fills got no 2MB page" if r["not_huge"] else "")
                         + (f"; {r['map_failed']} mmap failures" if r["map_failed"] else "")
                         + ("; turned itself off after fills in a row got no 2MB page" if r.get("gave_up") else ""))
    if rep.shim:
        lines.append("  shim: " + ", ".join(f"{k} {v}" for k, v in rep.shim.items() if v))
    if rep.inspect:
        b = rep.inspect["total"]["bloat"]
        lines.append(f"  bloat (last inspection, sampled): about {mib(b['estimate_bytes'])} of {mib(b['huge_bytes'])} in huge pages read as zeros")
    for n in rep.notes:
        lines.append(f"  note: {n}")
    if not rep.settings_restored:
        lines.append("  WARNING: some kernel settings could not be restored (see notes)")
    return "\n".join(lines)


def write_report(rep: Report, out_dir: Path) -> None:
    (out_dir / "report.json").write_text(json.dumps(rep.to_json(), indent=1, sort_keys=True) + "\n")
    with open(out_dir / "timeseries.csv", "w") as f:
        f.write("t_s,rss_bytes,anon_huge_bytes,hugetlb_bytes,collapsed\n")
        for s in rep.samples:
            f.write(f"{s['t']},{s['rss']},{s['anon_huge']},{s['hugetlb']},{s['collapsed']}\n")
    (out_dir / "report.md").write_text("# superpager live run\n\n```\n" + summary(rep) + "\n```\n\n"
                                       "`timeseries.csv`: RSS and huge-page bytes over time; `report.json`: everything.\n")


__all__ = ["run", "attach", "Report", "LiveError", "summary", "POLICIES", "check_attachable"]
