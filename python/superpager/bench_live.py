"""`superpager bench --live`: the access phase of our GUPS-, pointer-chase- and binary-search-
shaped programs (workloads/live_access.c) on this machine under the live policies, against
`base` (4KB pages), medians of alternating runs (issue 23, docs/LIVE.md).

Each round runs every policy once per (program, size), the order rotated from round to round so
that no policy always follows another; the program times its own access phase (population is
slow and erratic on these machines and is reported apart). Bloat is what the program's own
smaps_rollup shows at the end minus the bytes it touched."""
from __future__ import annotations

import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass

from .hostinfo import machine_line

START = "<!-- bench --live: start -->"
END = "<!-- bench --live: end -->"
POLICIES = ["base", "thp", "navarro-live", "damon-live"]
PROGRAMS = ["gups", "chase", "bsearch"]
SIZES_MIB = [128, 512, 1024, 4096]
HOLES = [("gups", 1024)]
# GUPS at 4GiB with an access phase eight times longer: collapsing 4GiB by copying takes longer
# than the default phase on these machines (docs/LIVE.md), this row shows the policy once done.
LONG = [("gups", 4096, "512")]
MiB = 1 << 20


@dataclass
class Run:
    access_s: float
    populate_s: float
    bloat: int
    collapsed: int
    policy_cpu_s: float
    huge_fraction: float
    aggregations: int = 0
    """damon-live on another agent's monitor: its DAMON aggregations that arrived during the run."""


def key_values(text: str) -> dict[str, str]:
    """The `key=value` words a program of ours prints (model_access's one line), as a dict."""
    return dict(re.findall(r"(\w+)=(\S+)", text))


def run_program(cmd: list[str], policy: str, bench: str, what: str | None = None):
    """Run `cmd` under a live `policy`, its output kept: the live report and the output's
    `key=value` words. A non-zero exit is an error naming the bench and `what` ran (the
    command by default) with the end of its output."""
    from . import live
    with tempfile.TemporaryFile("w+") as out:
        rep = live.run(cmd, policy, quiet=True, stdout=out)
        out.seek(0)
        text = out.read()
    if rep.exit_status != 0:
        raise RuntimeError(f"{bench}: {what or ' '.join(cmd)} under {policy} exited with {rep.exit_status}: {text.strip()[-200:]}")
    return rep, key_values(text)


def one(exe: str, program: str, mib: int, policy: str, holes: bool, ops: str | None = None) -> Run:
    cmd = [exe, program, str(mib)] + ([ops or _ops(program)] if holes or ops else []) + (["holes"] if holes else [])
    rep, kv = run_program(cmd, policy, "bench --live")
    rss, touched, huge = int(kv["rss_bytes"]), int(kv["touched_bytes"]), int(kv["anon_huge_bytes"])
    return Run(float(kv["access_s"]), float(kv["populate_s"]), max(0, rss - touched), int(rep.counters.get("collapsed", 0)),
               rep.step_cpu_s, huge / rss if rss else 0.0, int(rep.counters.get("aggregations", 0)))


def _ops(program: str) -> str:
    return {"gups": "64", "chase": "16", "bsearch": "2"}[program]


def main(a) -> int:
    from . import workloads
    from .live.run import thp_mode
    from .live.damon import availability

    def say(m: str) -> None:
        print(f"bench --live: {m}", file=sys.stderr, flush=True)

    if os.geteuid() != 0:
        say("navarro-live and damon-live need root; run as root for the full table")
    mode = thp_mode()
    if mode in (None, "never"):
        print("superpager: error: bench --live needs transparent huge pages (enabled is "
              f"{'missing' if mode is None else 'never'})", file=sys.stderr)
        return 2
    policies = list(POLICIES)
    damon_ok, damon_note = availability()
    # Why damon-live is left out, or how it sees DAMON where it runs (another agent's monitor).
    damon_why, damon_how = ("", damon_note) if damon_ok else (damon_note, "")
    if damon_why:
        policies.remove("damon-live")
        say(f"damon-live left out: {damon_why}")
    elif damon_how:
        say(damon_how)
    from .live.policies import parse_policy
    for extra in a.live_policy or []:
        try:
            parse_policy(extra)
        except ValueError as e:
            print(f"superpager: error: bench --live: {e}", file=sys.stderr)
            return 2
        if extra not in policies:
            policies.append(extra)
    exe = str(workloads.build("live_access"))
    sizes = [int(s) for s in a.live_sizes.split(",")] if a.live_sizes else SIZES_MIB
    programs = a.live_programs.split(",") if a.live_programs else PROGRAMS
    unknown = [p for p in programs if p not in PROGRAMS]
    if unknown:
        print(f"superpager: error: bench --live: unknown program(s) {', '.join(unknown)} (one of {', '.join(PROGRAMS)})", file=sys.stderr)
        return 2
    cases: list[tuple[str, int, bool, str | None]] = [(p, s, False, None) for p in programs for s in sizes]
    if not a.live_sizes:
        cases += [(p, s, True, None) for p, s in HOLES] + [(p, s, False, ops) for p, s, ops in LONG]
    runs: dict[tuple[str, int, bool, str | None, str], list[Run]] = {}
    total = len(cases) * a.repeats
    done = 0
    for program, mib, holes, ops in cases:
        for rnd in range(a.repeats):
            order = policies[rnd % len(policies):] + policies[:rnd % len(policies)]
            for pol in order:
                # An idle machine first: on a VM whose host takes freed memory back, that
                # memory is then cold, as for a program started on an idle machine.
                time.sleep(a.live_idle)
                runs.setdefault((program, mib, holes, ops, pol), []).append(one(exe, program, mib, pol, holes, ops))
            done += 1
            say(f"{_label(program, holes, ops)} {mib}MiB: round {rnd + 1}/{a.repeats} ({done}/{total})")
    report = render(runs, cases, policies, a.repeats, damon_why, mode, a.live_idle, damon_how)
    if a.out:
        from .bench_capture import write_section
        write_section(a.out, report, START, END)
        say(f"wrote {a.out}")
    print(report)
    return 0


def _label(program: str, holes: bool, ops: str | None) -> str:
    return program + (" + holes" if holes else "") + (f", {ops}M ops" if ops else "")


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def render(runs, cases, policies, repeats: int, damon_why: str, mode: str | None, idle: float = 0.0, damon_note: str = "") -> str:
    flags = f" --live-idle {idle:g}" if idle else ""
    lines = [START, "## Measured: access-phase speedup over `base` (`bench --live`)", "",
             f"Produced by `superpager bench --live --repeats {repeats}{flags}` on {machine_line()}, THP mode `{mode}`. "
             + (f"Each run started after {idle:g} s with the machine idle. " if idle else "") +
             f"Each cell: the median over {repeats} alternating runs of base's access time divided by the policy's, "
             "with the slowest and fastest ratio of paired runs in brackets; bloat is resident bytes the program never touched "
             "(its smaps_rollup Rss at the end minus what it wrote), median.", ""]
    if damon_why:
        lines += [f"damon-live is not in the table: {damon_why}.", ""]
    elif damon_note and "damon-live" in policies:
        lines += [f"How damon-live saw DAMON: {damon_note}.", ""]
    head = "| program | size | base access s (median, min–max) | " + " | ".join(f"`{p}` speedup" for p in policies if p != "base") + \
        " | bloat thp | bloat navarro-live | navarro-live collapses, its CPU s | huge share at exit (thp / navarro-live) | populate s (base / thp / navarro-live)" \
        " | whole run s, populate + access (base / thp / navarro-live) |"
    damon = "damon-live" in policies
    if damon:
        head += " damon-live collapses, DAMON aggregations read, huge share at exit, bloat |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    verdicts = []
    for program, mib, holes, ops in cases:
        base = runs[(program, mib, holes, ops, "base")]
        bt = [r.access_s for r in base]
        cells = [_label(program, holes, ops), f"{mib}MiB", f"{_med(bt):.3f} ({min(bt):.3f}–{max(bt):.3f})"]
        sp = {}
        for p in policies:
            if p == "base":
                continue
            rs = runs.get((program, mib, holes, ops, p))
            if not rs:
                cells.append("–")
                continue
            ratios = [b.access_s / r.access_s for b, r in zip(base, rs)]
            s = _med(bt) / _med([r.access_s for r in rs])
            sp[p] = s
            cells.append(f"{s:.2f}x ({min(ratios):.2f}–{max(ratios):.2f})")
        thp, nl = runs[(program, mib, holes, ops, "thp")], runs[(program, mib, holes, ops, "navarro-live")]
        cells += [f"{_med([r.bloat for r in thp]) / MiB:.1f}MiB", f"{_med([r.bloat for r in nl]) / MiB:.1f}MiB",
                  f"{_med([r.collapsed for r in nl]):.0f}, {_med([r.policy_cpu_s for r in nl]):.2f}",
                  f"{_med([r.huge_fraction for r in thp]) * 100:.0f}% / {_med([r.huge_fraction for r in nl]) * 100:.0f}%",
                  " / ".join(f"{_med([r.populate_s for r in x]):.2f}" for x in (base, thp, nl)),
                  # The access phase alone hides what collapses during population cost the program.
                  " / ".join(f"{_med([r.populate_s + r.access_s for r in x]):.2f}" for x in (base, thp, nl))]
        if damon:
            dl = runs.get((program, mib, holes, ops, "damon-live"))
            cells.append(f"{_med([r.collapsed for r in dl]):.0f}, {_med([r.aggregations for r in dl]):.0f}, "
                         f"{_med([r.huge_fraction for r in dl]) * 100:.0f}%, {_med([r.bloat for r in dl]) / MiB:.1f}MiB" if dl else "–")
        lines.append("| " + " | ".join(cells) + " |")
        if "thp" in sp and "navarro-live" in sp:
            within = sp["navarro-live"] >= 0.9 * sp["thp"]
            less_bloat = _med([r.bloat for r in nl]) < _med([r.bloat for r in thp])
            verdicts.append((_label(program, holes, ops), mib, holes, sp["thp"], sp["navarro-live"], within, less_bloat))
    lines += ["", "navarro-live against thp (target: a speedup at least 90% of thp's, i.e. navarro-live's speedup / thp's >= 0.9; "
              "with less bloat where the program leaves holes). The share of thp's gain, (navarro-live - 1) / (thp - 1), "
              "is the stricter reading and is given beside it:", ""]
    for label, mib, holes, t, n, within, less in verdicts:
        # The share of a gain is undefined where thp gained nothing (its speedup at most 1).
        gain = f"{(n - 1) / (t - 1) * 100:.0f}% of thp's gain over base" if t > 1 else "thp gained nothing over base"
        lines.append(f"- {label} {mib}MiB: thp {t:.2f}x, navarro-live {n:.2f}x = {n / t * 100:.0f}% of thp's speedup: "
                     f"{'within 10%' if within else 'NOT within 10%'} ({gain})"
                     + (f"; bloat {'less' if less else 'NOT less'} than thp's" if holes else ""))
    held = sum(v[5] for v in verdicts)
    lines += ["", f"Within 10% of thp on {held} of {len(verdicts)} cases.", END]
    return "\n".join(lines)
