"""The live policies' CPU budget (`max_cpu`): how much of one CPU their scans and collapses may use.

A number is a fixed share of one CPU. `auto` (the default) takes the CPU the machine leaves idle:
a promotion daemon should use capacity nobody else wants, as khugepaged does by running at the
lowest priority, and no more than one CPU (the policy is one thread).

Invariants:
- `share()` is always in [FLOOR, 1] for `auto`, and the given number otherwise.
- The allowance only accumulates: `allowance(t)` is the integral of the share over time since
  the start, so a fixed share gives exactly `share x elapsed` (the budget before `auto` existed).
- `auto` reads the machine's idle time from /proc/stat at most once a WINDOW_S (the first
  window, FIRST_WINDOW_S, is shorter), so its cost is a file read a second; the reader is injected so the arithmetic is testable without a machine.
"""
from __future__ import annotations

from collections.abc import Callable

# `auto` never goes below this share, so a policy on a busy machine still makes progress (as
# khugepaged at nice 19 still gets a little time).
FLOOR = 0.1
# `auto`'s share before its first window has been measured: the fixed default before `auto`.
START = 0.5
# How often `auto` reads /proc/stat and sets its share.
WINDOW_S = 1.0
# The first window is shorter: until it closes the policy runs at START, and a program that
# populates its memory in its first seconds is when a promotion daemon has most to do. A whole
# second at 0.5 held navarro-live to half a CPU while GUPS populated 4GiB in about 2 s on a
# machine with a CPU idle (docs/LIVE.md, twenty-seventh session). /proc/stat counts in 10ms ticks
# (USER_HZ = 100), so 0.25 s on 2 CPUs is 50 ticks: the idle share within 2%.
FIRST_WINDOW_S = 0.25


def read_proc_stat(path: str = "/proc/stat") -> tuple[float, float, int]:
    """(idle jiffies, total jiffies, online CPUs) from the first lines of /proc/stat."""
    idle = total = 0.0
    cpus = 0
    with open(path) as f:
        for line in f:
            if line.startswith("cpu "):
                v = [float(x) for x in line.split()[1:]]
                # user nice system idle iowait irq softirq steal (guest time is inside user)
                idle = v[3] + (v[4] if len(v) > 4 else 0.0)
                total = sum(v[:8])
            elif line.startswith("cpu"):
                cpus += 1
            else:
                break
    return idle, total, max(cpus, 1)


def parse_max_cpu(v: str) -> float | str:
    """`auto` or a share of one CPU in (0, 1]; ValueError otherwise."""
    if v == "auto":
        return v
    x = float(v)
    if not 0 < x <= 1:
        raise ValueError(v)
    return x


class Budget:
    """`max_cpu` for one run: `share()` now, `allowance()` so far."""

    def __init__(self, spec: float | str, t0: float, own_cpu0: float,
                 stat: Callable[[], tuple[float, float, int]] = read_proc_stat):
        self.auto = spec == "auto"
        self._share = START if self.auto else float(spec)
        self._stat = stat
        self._t = t0
        self._allowed = 0.0
        # A fixed share never looks at the machine: no /proc/stat read for it.
        self._window = (t0, own_cpu0, self._read() if self.auto else None)
        self.shares: list[float] = [self._share]
        self._windows = 0  # windows closed so far

    def _read(self) -> tuple[float, float, int] | None:
        try:
            return self._stat()
        except (OSError, ValueError):
            return None

    def share(self) -> float:
        return self._share

    def update(self, now: float, own_cpu: float) -> None:
        """Credit the time since the last update at the current share; with `auto`, once a
        window has passed, set the share to the idle CPUs seen in it plus what the policy itself
        used (its own time was not taken from anyone), between FLOOR and one CPU."""
        self._allowed += self._share * max(0.0, now - self._t)
        self._t = now
        if not self.auto or now - self._window[0] < (WINDOW_S if self._windows else FIRST_WINDOW_S):
            return
        t_prev, own_prev, stat_prev = self._window
        stat = self._read()
        if stat is not None and stat_prev is not None and stat[1] > stat_prev[1]:
            idle_cpus = (stat[0] - stat_prev[0]) / (stat[1] - stat_prev[1]) * stat[2]
            own = (own_cpu - own_prev) / (now - t_prev)
            self._share = min(1.0, max(FLOOR, idle_cpus + own))
            self.shares.append(self._share)
        self._window = (now, own_cpu, stat)
        self._windows += 1

    def allowance(self) -> float:
        """CPU seconds the policy may have used by the last update."""
        return self._allowed

    def summary(self) -> dict:
        s = self.shares
        return {"max_cpu": "auto" if self.auto else self._share, "mean": round(sum(s) / len(s), 3),
                "min": round(min(s), 3), "max": round(max(s), 3)}
