"""`superpager bench --model`: the runtime model against this machine (issue 24,
docs/RUNTIME_MODEL.md). For each program of workloads/model_access.c and each size: the measured
access-phase speedup of 2MB pages (`superpager run --policy thp`) over 4KB pages (`base`),
medians of alternating runs taken in rounds over every case (`schedule`), beside the speedup `predict` gives from a capture of the same
program (its phase mark starts the costed part), with the runtime model (host) and with the old
linear model (host+nocache).

Which programs chase dependent loads is marked here from their code, not fitted: a pointer chase
issues each load from the word the one before loaded (dependence 1); a binary search and a B-tree
descent pick the next load by a branch on the loaded key, so the misses that wait are those the
core's guess gets wrong (0.5 and 0.875; DEPENDENCE's comments derive each); random reads, GUPS, a
hash join's probes and a sweep issue independent loads (dependence 0). The real Debian program is
python3 (workloads/model_dict.py: lookups of random keys in a large dict); its lookups are
independent of each other (dependence 0).

How far a dependent chain's translations run ahead of it is marked from the code the same way
(`walk_ahead`, docs/RUNTIME_MODEL.md, "Walks ahead of a dependent chain"): a pointer chase's next
address is the word it loaded, so nothing starts early (0). A B-tree descent's and a binary
search's next address is picked by branches on the loaded keys; the core predicts them and
starts the next load, and its walk, before the keys arrive, and the walk serves wherever the
guess lands in the right page (WALK_AHEAD's comments derive each fraction)."""
from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

START = "<!-- bench --model: start -->"
END = "<!-- bench --model: end -->"
PROGRAMS = ["rand", "gups", "chase", "bsearch", "btree", "hashjoin", "stream", "python3-dict"]
# Benched only when `--model-programs` names them: bsearch's searches without its branches, to
# tell what the branches hide from what the loads cost (docs/RUNTIME_MODEL.md, "A binary search
# without branches"); and btree's lookups without the node scan's branches likewise ("A B-tree
# without branches"); and stream's reads with the index wrapped by a compare instead of a
# division, so memory's line rate, not the divider, sets the pace ("A sweep without a division").
OPTIONAL = ["bsearchcmov", "btreecmov", "sweep"]
# The share of a program's misses that wait for the one before (`+dependence=F`), argued from its
# code in model_access.c, never fitted (docs/RUNTIME_MODEL.md, "Marks argued from the branch,
# through the bench").
DEPENDENCE = {
    "rand": 0.0, "gups": 0.0, "hashjoin": 0.0, "stream": 0.0, "sweep": 0.0, "python3-dict": 0.0,
    # Each step's address is the word the step before loaded: nothing can be issued early.
    "chase": 1.0,
    # The compare on a random key goes the way the core guessed one time in two; a right guess has
    # the next probe's load issued under the current miss, so one miss in two waits (the same coin
    # as its walk_ahead 0.5). Since the sixty-fourth session; 1 before.
    "bsearch": 0.5,
    # A node's scan leaves at one of its eight keys: the core's guess names the child whose line
    # is loaded next about one time in eight, so 7 misses in 8 wait. Since the sixty-fourth
    # session; 1 before.
    "btree": 0.875,
    # The half is picked by a mask on the loaded key: no guess, every probe waits for the key.
    "bsearchcmov": 1.0,
    # The child is a count of compares on the loaded keys: no guess, every node waits for the one
    # before.
    "btreecmov": 1.0,
}
WALK_AHEAD = {
    "chase": 0.0,
    # The next probe is one of two candidates half the remaining range apart: in the levels that
    # walk (candidates at least a page apart) a guess is in the right page one time in two.
    "bsearch": 0.5,
    # Node i's eight children are one 512-byte block at byte 512i + 64 (model_access.c), inside
    # one 4KB page for 7 blocks in 8; in the eighth the last child is on the next page, and a
    # guess is in the right page (7/8)^2 + (1/8)^2 of the time: 7/8 + 1/8 x 50/64 = 0.97.
    "btree": 0.97,
    # The half is picked by a mask on the loaded key, not a branch: nothing is guessed, so the
    # next probe's address, and its walk, waits for the key (0).
    "bsearchcmov": 0.0,
    # The child is counted from the loaded keys, not guessed: the next node's walk waits for them.
    "btreecmov": 0.0,
}
# The core runs ahead down its guesses more than one step: a walk can start under the misses of
# the two or three steps before it where the guess made that far back lands in the walk's page
# (`+walk_ahead2=F`, `+walk_ahead3=F`; docs/RUNTIME_MODEL.md, "Walks ahead of a dependent chain",
# sixty-sixth session). Argued from the layout as WALK_AHEAD is, never fitted; the model
# credits them only as far as the window holds that many steps (a btree level is about 25
# instructions, a bsearch level about 6, against a window of hundreds).
WALK_AHEAD2 = {
    # Both guesses right: 1/2 x 1/2 (in the levels that walk, a wrong one is a page away or more).
    "bsearch": 0.25,
    # Node a's 64 grandchildren are nodes 64a + 9 to 64a + 72, 55 of them in one 4KB page and 9
    # in the next (64 nodes a page): a guess lands in the right page (55^2 + 9^2) / 64^2.
    "btree": 0.758,
}
WALK_AHEAD3 = {
    "bsearch": 0.125,
    # Its 512 great-grandchildren, nodes 512a + 73 to 512a + 584: 55, then 7 pages of 64, then 9:
    # (55^2 + 7 x 64^2 + 9^2) / 512^2.
    "btree": 0.121,
}


def command(exe: str, program: str, mib: int) -> list[str]:
    """The command line of `program` at `mib` (model_access.c's kinds, or python3 on model_dict.py)."""
    if program == "python3-dict":
        import shutil
        from .workloads import sources_dir
        py = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else (shutil.which("python3") or "python3")
        return [py, str(sources_dir() / "model_dict.py"), str(mib)]
    return [exe, program, str(mib)]


def same_command(captured: list[str] | None, now: list[str]) -> bool:
    """Whether a kept capture ran `now`: the same arguments, file names compared by their last
    part (the workload's build and the source directory may have moved since)."""
    if not captured or len(captured) != len(now):
        return False
    return all(os.path.basename(a) == os.path.basename(b) for a, b in zip(captured[1:], now[1:])) and \
        os.path.basename(captured[0]).split("-")[0] == os.path.basename(now[0]).split("-")[0]


SIZES_MIB = [64, 256, 1024, 4096]
# python3 executes tens of accesses per byte of its dict while building it (3.2G accesses at 64MiB):
# its capture records from the phase mark on only (`capture --from-mark`: before the mark, one
# access per resident page), which is what makes the 1GiB and 4GiB captures possible. The
# other programs build their tables with a few accesses per word and are captured whole.
FROM_MARK = {"python3-dict"}
# A record per cache line, not per page (`capture --collapse line`, since the sixty-third session):
# a run collapsed to its page hands the model's caches only its first line, so a binary search's
# last probes, all inside one page, and a sweep's lines after the first counted as first-level
# hits (docs/RUNTIME_MODEL.md, "A record per line").
CAPTURE_COLLAPSE = "line"
TOLERANCE = 0.15


def measure(exe: str, program: str, mib: int, policy: str) -> float:
    from .bench_live import run_program
    _, kv = run_program(command(exe, program, mib), policy, "bench --model", f"{program} {mib}MiB")
    return float(kv["access_s"])


def predicted(trace: str, program: str) -> tuple[float, float, float, float | None, tuple[str, str]]:
    """(model speedup, linear speedup, model base seconds, native speedup, bounds) of fixed:2MiB
    over base. Native: where `host` is nested (its TLB splinters 2MB pages), the same model with
    one-dimensional walks and 2MB pages held whole (`host+native`), else None. Bounds: the
    resource that bounds the model's overlap on base and on fixed:2MiB (`predict`'s `bound`)."""
    from . import _core
    from .model.predict import predict
    dep = f"+dependence={DEPENDENCE[program]}+walk_ahead={WALK_AHEAD.get(program, 0.0)}"
    dep += "".join(f"+{k}={v[program]}" for k, v in (("walk_ahead2", WALK_AHEAD2), ("walk_ahead3", WALK_AHEAD3)) if program in v)
    nested = bool(_core.machine_info("host")["nested"])
    m = predict(trace, f"host{dep}", ["base", "fixed:2MiB"])
    # The old linear model is the native one: one-cycle accesses, walk references at a fixed
    # cost, 2MB pages held whole.
    lin = predict(trace, "host+native+nocache" if nested else "host+nocache", ["base", "fixed:2MiB"])
    if m[0]["scope"] != "phase":
        raise RuntimeError(f"bench --model: the capture of {program} has no phase mark")
    native = None
    if nested:
        native = predict(trace, f"host+native{dep}", ["base", "fixed:2MiB"])[1]["speedup"]
    return m[1]["speedup"], lin[1]["speedup"], m[0]["seconds"], native, (m[0]["bound"], m[1]["bound"])


def _calibration() -> dict | None:
    """The `[calibration]` table of the file `host` reads, or None: no file, one that does not
    parse, or one `host` does not use (another CPU's: only a calibration made on this CPU says
    what the predictions rest on)."""
    from . import _core
    from .cli_model import default_calibration_path, read_calibration
    path = default_calibration_path()
    if not path.exists() or not any("measured by superpager calibrate" in src for _, _, src in _core.host_explain()[0]):
        return None
    return read_calibration(path)


def calibrated_chase() -> tuple[int, float, float, str] | None:
    """The chase at the calibration's largest footprint as calibrate measured it: (footprint,
    ns a step on 4KB pages, on 2MB pages, the date), from the file `host` reads; None without
    one, or without both points."""
    cal = _calibration()
    if cal is None:
        return None
    from .model.calibrate import points_of
    pts = points_of(cal)
    if not pts:
        return None
    big = max(fp for fp, _, _ in pts)
    at = {pg: ns for fp, pg, ns in pts if fp == big}
    if "4k" not in at or "2m" not in at:
        return None
    return big, at["4k"], at["2m"], str(cal.get("date", ""))


def chase_now(footprint: int, repeats: int = 3) -> tuple[float, float] | None:
    """calibrate's chase at `footprint` now (ns a step on 4KB and on 2MB pages, medians of
    `repeats`): whether the machine is still in the state it was calibrated in (on a shared
    host, a neighbour's load moves it). None where 2MB pages could not be had."""
    from .model.calibrate import chase_binary, median_chase
    b = chase_binary()
    ns_4k, _ = median_chase(b, footprint, "4k", 2_000_000, repeats)
    ns_2m, huge = median_chase(b, footprint, "2m", 2_000_000, repeats)
    return None if huge < footprint // 2 else (ns_4k, ns_2m)


def calibrated_walk_probes() -> list[dict] | None:
    """The two walk probes the share's fit reads (`[calibration.walk_probe]` and
    `walk_probe_far`: footprint, chains, ns_4k, ns_2m) as calibrate measured them, from the file
    `host` reads; None without both, or where the file has no share's fit to redo."""
    cal = _calibration()
    if cal is None or not isinstance(cal.get("share_fit"), dict):
        return None
    from .model.calibrate import WALK_CHAINS, _input_of
    keys = ("footprint", "chains", "ns_4k", "ns_2m")
    out = []
    for key in ("walk_probe", "walk_probe_far"):
        p = cal.get(key)
        # Chains other than the probe's own could not be read again (`walk_times` runs WALK_CHAINS).
        if not isinstance(p, dict) or not all(k in p for k in keys) or list(p["chains"]) != list(WALK_CHAINS):
            return None
        q = _input_of(p)
        out.append({k: q[k] for k in keys})
    return out


def walk_probes_now(probes: list[dict]) -> list[dict] | None:
    """One reading of both walk probes now, over the calibrated ones' footprints (one run of
    each page size, `walk_times`): the share's fit's inputs in the machine's present state.
    None where either could not be read (no 2MB pages, too little memory free for the far one)."""
    from .model.calibrate import chase_binary, memory_short, walk_times
    b = chase_binary()
    out = []
    for p in probes:
        t = None if memory_short(p["footprint"]) else walk_times(b, p["footprint"], 2_000_000)
        if t is None:
            return None
        out.append(t)
    return out


def median_walk_probes(calibrated: list[dict], readings: list) -> tuple[list[dict], int]:
    """The walk probes through the bench: at each chain count and page size, the median of the
    calibrated probe and the readings since (`walk_probes_now`; None readings left out), and how
    many readings that is, the calibrated one counted."""
    from .model.calibrate import median_walk_times
    seen = [calibrated] + [r for r in readings if r]
    return [median_walk_times([r[i] for r in seen]) for i in range(len(calibrated))], len(seen)


def median_state(cal: tuple[int, float, float, str], states: list) -> tuple[float, float]:
    """The machine's state through the bench: the median, on each page size, of calibrate's chase
    at the calibration's largest footprint as calibrated (`cal`) and as read since (`states`,
    `chase_now`'s readings; None where no 2MB pages were to be had)."""
    seen = [(cal[1], cal[2])] + [r for r in states if r]
    return statistics.median(r[0] for r in seen), statistics.median(r[1] for r in seen)


def refit_at(footprint: int, median: tuple[float, float], out: Path, say, walks: tuple[list[dict], int] | None = None) -> tuple[str | None, str]:
    """The calibration `host` reads, fitted again (calibrate's refit: nothing measured) with its
    chase at `footprint` taken as `median` (ns a step on 4KB, 2MB pages) and, where `walks` is
    given (`median_walk_probes`: the probes, how many readings), the share's fit on those walk
    probes, written to `out`: (the machine file, the report's clause on what the fit chose);
    (None, why) where the fit fails."""
    from .cli_model import default_calibration_path
    from .model.calibrate import CalibrateError, refit, size_text
    say(f"calibrate's fit again, with its chase over {footprint >> 20}MiB at the median of the bench's readings, "
        f"{median[0]:.1f} / {median[1]:.1f} ns" + (f", and the share's fit on the walk probes' medians over {walks[1]} readings" if walks else "")
        + " (a few minutes)")
    try:
        r = refit(default_calibration_path(), out, points={(footprint, "4k"): median[0], (footprint, "2m"): median[1]},
                  share_probes=walks[0] if walks else None)
    except (CalibrateError, OSError) as e:
        say(f"the fit again failed ({e}); predicting from the calibration as it is")
        return None, f"calibrate's fit redone with it failed ({e}), so `host` as calibrated"
    f = r.get("last_level_fit")
    if isinstance(f, dict) and f.get("chosen") in f.get("sizes", []):
        i = f["sizes"].index(f["chosen"])
        chose = f"the last level at {size_text(f['chosen'])} and memory at {f['memory_cycles'][i]:.0f} cycles"
        if f.get("tenant_fill_rate"):
            chose += f", other tenants filling the level at {f['tenant_fill_rate']:.4f} lines a ns"
        s = r.get("share_fit")
        if s and s.get("walk_hiding") is not None:
            chose += (f", the share's exponent at {s['exponent']:g} with walk_hiding 0 and the tenants at {s['tenant_fill_rate']:.4f} "
                      f"(error {dict((a, e) for a, e in s['errors'])[s['exponent']]:.3f}, as written {s['as_written_error']:.3f})")
        elif s:
            chose += f", the share's exponent kept at 1 (as written nearest, {s['as_written_error']:.3f})"
        else:
            chose += f", no share fit ({r.get('share_fit_skipped') or 'none ran'})"
    else:
        chose = f"no last-level fit ({r.get('last_level_fit_skipped') or 'none ran'})"
    probes = (f"the share's fit on the two walk probes' medians over {walks[1]} readings (the calibration's and {walks[1] - 1} through the bench), "
              if walks else "") + "its other points and probes as calibrated"
    return out.read_text(), (f"calibrate's fit redone with it in place of the first pair, {probes}, "
                             f"chose {chose} (docs/RUNTIME_MODEL.md, \"The machine's state through the bench\")")


def _host_text(machine_toml: str | None):
    """A block in which `host` is read from `machine_toml` (calibrate's `host_from`); as it is with
    None."""
    from .model.calibrate import host_from
    return contextlib.nullcontext() if machine_toml is None else host_from(machine_toml)


def calibrated_tlb_probe() -> tuple[float, bool] | None:
    """calibrate's TLB probe as the file `host` reads recorded it: (sparse / packed, both on 2MB
    pages; whether it found 2MB pages splintered), or None without one."""
    return _probe_verdict((_calibration() or {}).get("tlb_probe"))


def _probe_verdict(p) -> tuple[float, bool] | None:
    """(sparse / packed on 2MB pages, splintered) of one TLB probe, as calibrate's `tlb_probe`
    returns it or a calibration file records it; None for no probe or one missing a number."""
    if not isinstance(p, dict):
        return None
    try:
        return float(p["sparse_2m_ns"]) / float(p["packed_2m_ns"]), bool(p["splintered"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def tlb_probe_now(repeats: int = 3) -> tuple[float, bool] | None:
    """calibrate's TLB probe now, as `calibrated_tlb_probe` gives it: whether the TLB still
    holds 2MB pages as it did when `host` was calibrated (a hypervisor may back this VM's memory
    with 2MB pages one hour and 4KB pages the next, which makes `host` nested or not). None
    where 2MB pages could not be had."""
    from .model.calibrate import chase_binary, tlb_probe
    return _probe_verdict(tlb_probe(chase_binary(), 2_000_000, repeats))


def main(a) -> int:
    from . import _core, workloads
    from .live.run import thp_mode
    from .model.predict import trace_collapse, trace_command

    def say(m: str) -> None:
        print(f"bench --model: {m}", file=sys.stderr, flush=True)

    if thp_mode() in (None, "never"):
        print("superpager: error: bench --model needs transparent huge pages", file=sys.stderr)
        return 2
    exe = str(workloads.build("model_access"))
    sizes = [int(s) for s in a.model_sizes.split(",")] if a.model_sizes else SIZES_MIB
    programs = a.model_programs.split(",") if a.model_programs else PROGRAMS
    bad = [p for p in programs if p not in PROGRAMS + OPTIONAL]
    if bad:
        print(f"superpager: error: bench --model: unknown program(s) {', '.join(bad)} (one of {', '.join(PROGRAMS + OPTIONAL)})", file=sys.stderr)
        return 2
    fresh = bool(getattr(a, "model_calibrate", False))
    if fresh:
        from .cbuild import BuildError
        from .cli_model import calibrate_on_terminal, default_calibration_path
        from .model.calibrate import CalibrateError
        out = default_calibration_path()
        say(f"calibrating first (superpager calibrate's defaults, a few minutes), into {out}")
        try:
            calibrate_on_terminal(out)
        except (CalibrateError, BuildError, OSError) as e:
            print(f"superpager: error: bench --model: calibrate: {e}", file=sys.stderr)
            return 2
    rows = []
    cal = calibrated_chase()
    states: list = []
    # The share's fit's walk probes are read with the chase (docs/RUNTIME_MODEL.md, "The share's
    # probes through the bench"); not where predictions are asked at calibration.
    at_calibration = bool(getattr(a, "model_at_calibration", False))
    walk_cal = calibrated_walk_probes() if cal is not None and not at_calibration else None
    walks: list = []

    def read_state(when: str) -> None:
        """The machine's state between runs, read as calibrate reads it."""
        assert cal is not None
        say(f"calibrate's chase over {cal[0] >> 20}MiB, {when}")
        states.append(chase_now(cal[0]))
        if walk_cal is not None:
            sizes = " and ".join(f"{p['footprint'] >> 20}MiB" for p in walk_cal)
            say(f"the share's walk probes over {sizes}, {when}")
            walks.append(walk_probes_now(walk_cal))
            say("  " + ("; ".join(f"{r['footprint'] >> 20}MiB ns_4k {r['ns_4k']} ns_2m {r['ns_2m']}" for r in walks[-1])
                        if walks[-1] else "not read (no 2MB pages, or too little memory free)"))

    if cal is not None:
        read_state(f"as at the start (it was {cal[1]:.1f} / {cal[2]:.1f} ns on 4KB / 2MB pages when calibrated)")

    probe = calibrated_tlb_probe()
    probes = []
    if probe is not None:
        say("calibrate's TLB probe, as at the start (whether 2MB pages are held whole)")
        probes.append(tlb_probe_now())
    keep = a.model_traces
    if keep:
        os.makedirs(keep, exist_ok=True)
    cases = [(program, mib) for program in programs for mib in sizes]
    refitted = None
    with tempfile.TemporaryDirectory(prefix="superpager-model-") as tmp:
        # Captures first: a capture that fails stops the bench before its first timed run.
        traces = {}
        for program, mib in cases:
            trace = traces[(program, mib)] = os.path.join(keep or tmp, f"{program}-{mib}.spt")
            kept = trace_collapse(trace) if keep and os.path.exists(trace) else None
            ran = trace_command(trace) if kept else None
            if kept == CAPTURE_COLLAPSE and same_command(ran, command(exe, program, mib)):
                say(f"{program} {mib}MiB: captured before ({trace})")
                continue
            if kept and kept != CAPTURE_COLLAPSE:
                say(f"{program} {mib}MiB: {trace} has runs collapsed by {kept}, not by {CAPTURE_COLLAPSE}: capturing again")
            elif kept:
                say(f"{program} {mib}MiB: {trace} ran {' '.join(ran[1:]) if ran else 'an unknown command'}, "
                    f"not {' '.join(command(exe, program, mib)[1:])}: capturing again")
            else:
                say(f"{program} {mib}MiB: capturing")
            _capture(exe, program, mib, trace)
        times: dict = {(c, pol): [] for c in cases for pol in ("base", "thp")}
        last = None
        for rnd, case, pair in schedule(cases, a.repeats):
            if cal is not None and last is not None and rnd != last:
                read_state(f"after round {last + 1}")
            last = rnd
            for pol in pair:
                times[(case, pol)].append(measure(exe, case[0], case[1], pol))
            say(f"round {rnd + 1} of {a.repeats}: {case[0]} {case[1]}MiB {times[(case, 'base')][-1] / times[(case, 'thp')][-1]:.3f}x")
        if cal is not None:
            read_state("as at the end")
        if probe is not None:
            say("calibrate's TLB probe, as at the end")
            probes.append(tlb_probe_now())
        # Predictions last, from the machine as it was through the runs they are held against.
        through = None
        if cal is not None and not at_calibration:
            median = median_state(cal, states)
            refitted, clause = (None, "the calibration's own pair, so `host` as calibrated")
            through_walks = median_walk_probes(walk_cal, walks) if walk_cal is not None and any(walks) else None
            if median != (cal[1], cal[2]) or through_walks:
                refitted, clause = refit_at(cal[0], median, Path(tmp) / "host-through-the-bench.toml", say, through_walks)
            through = (median, clause)
        preds = {}
        with _host_text(refitted):
            for case in cases:
                say(f"{case[0]} {case[1]}MiB: predicting from {traces[case]}")
                preds[case] = predicted(traces[case], case[0])
                if not keep:
                    os.unlink(traces[case])
    for case in cases:
        base, thp = times[(case, "base")], times[(case, "thp")]
        ms, ls, base_pred, native, bounds = preds[case]
        speed = [b / t for b, t in zip(base, thp)]
        rows.append((case[0], case[1], statistics.median(base), statistics.median(thp), statistics.median(speed), min(speed), max(speed), ms, ls, base_pred, native, bounds,
                     median_interval(speed)))
        say(f"{case[0]} {case[1]}MiB: measured {rows[-1][4]:.3f}x, model {ms:.3f}x, linear {ls:.3f}x")
    from .model.calibrate import unsteady_in
    calibration = _calibration()
    with _host_text(refitted):
        notes = _core.host_explain()[1]
    report = render(rows, a.repeats, notes=notes, state=(cal, states) if cal is not None else None, fresh=fresh,
                    through=through,
                    tlb=(probe, probes) if probe is not None else None,
                    frames=frames_line(calibration) if calibration is not None else None,
                    unsteady=unsteady_in(calibration) if calibration is not None else None)
    if a.out:
        from .bench_capture import write_section
        write_section(a.out, report, START, END)
        say(f"wrote {a.out}")
    print(report)
    return 0


# How sure the interval around a measured median is (`median_interval`): 90% or more.
INTERVAL_LEVEL = 0.90


def interval_rank(n: int, level: float = INTERVAL_LEVEL) -> tuple[int, float]:
    """(j, coverage): of n values, the interval from the j-th smallest to the j-th largest is
    the narrowest that holds the median of what they were drawn from with at least `level`
    probability. Each value falls below the median with chance one half, so the interval misses
    it only where j or more fall on one side: coverage = 1 - 2 P(B < j), B binomial (n, 1/2)
    (the sign test's interval; nothing assumed of the noise's shape). With 5 to 7 values only
    their range reaches 90% (93.75% at 5); with 9, the 2nd to the 8th (96.1%). Where nothing
    reaches `level` (fewer than 5 values), the range (j = 1), with its lower coverage."""
    from math import comb
    if n < 1:
        raise ValueError("interval_rank: no values")

    def coverage(j: int) -> float:
        return 1.0 - 2.0 * sum(comb(n, i) for i in range(j)) / 2.0 ** n

    j = 1
    while j + 1 <= (n + 1) // 2 and coverage(j + 1) >= level:
        j += 1
    return j, coverage(j)


def median_interval(values: list[float], level: float = INTERVAL_LEVEL) -> tuple[float, float, float]:
    """(lo, hi, coverage): `interval_rank`'s interval over `values`."""
    xs = sorted(values)
    j, cov = interval_rank(len(xs), level)
    return xs[j - 1], xs[len(xs) - j], cov


def schedule(cases: list, repeats: int):
    """The order of the timed runs: `repeats` rounds, each visiting every case once with one pair
    of runs (round, case, (first policy, second)). The pair's order alternates from round to
    round, and every other round visits the cases backwards, so that a slow spell of a shared
    machine falls on every case alike instead of on the few measured during it, and each case's
    runs sit, on average, near the middle of the bench (as `superpager bench`'s rounds do for
    speed)."""
    for rnd in range(repeats):
        pair = ("base", "thp") if rnd % 2 == 0 else ("thp", "base")
        for case in (cases if rnd % 2 == 0 else cases[::-1]):
            yield rnd, case, pair


def _capture(exe: str, program: str, mib: int, trace: str) -> None:
    import subprocess
    from .capture import capture
    capture(command(exe, program, mib), trace, stdout=subprocess.DEVNULL, from_mark=program in FROM_MARK,
            collapse=CAPTURE_COLLAPSE)


def render(rows, repeats: int, notes: list[str] | None = None, state=None, fresh: bool = False, tlb=None,
           frames: str | None = None, unsteady: str | None = None, through=None) -> str:
    """The report section. `notes`: what the host machine's numbers rest on, where that limits
    the predictions (`machines host --explain`'s notes: estimated latencies, a calibration of
    another CPU, 2MB pages the TLB splinters); None reads them here. `state`: calibrate's chase
    when calibrated (`calibrated_chase`) and at the bench's start and end (`chase_now`), or
    None. `fresh`: this bench calibrated `host` right before its first run (--model-calibrate).
    `tlb`: calibrate's TLB probe when calibrated (`calibrated_tlb_probe`) and at the bench's
    start and end (`tlb_probe_now`), or None. `frames`: the line on where `host` puts 4KB pages
    (`frames_line`), or None. `unsteady`: calibrate's warning that the machine changed while it
    measured (model/calibrate.py `unsteady_in`), or None."""
    from .hostinfo import cpu_model
    # Rows may carry an 11th entry, the native model's speedup (None where host was not nested),
    # a 12th, the bounds of the model's base and fixed:2MiB predictions (`predicted`), and a
    # 13th, the interval around the measured median (`median_interval`).
    any_native = any(len(r) > 10 and r[10] is not None for r in rows)
    out = [START, f"Measured on {cpu_model()}; access-phase speedup of 2MB pages (thp) over 4KB pages (base), median of {repeats} "
           f"alternating pairs, with the range of the pairs' ratios, one pair a case in each of {repeats} rounds over every case; predictions from one capture each (`superpager predict "
           "--policies base,fixed:2MiB`), the runtime model on the calibrated `host`, the linear model on "
           + ("`host+native+nocache` (`host` is nested here, its TLB splintering 2MB pages; the linear model stays the native one), "
              "and the runtime model native on `host+native`. " if any_native else "`host+nocache`. ")
           + f"Error = prediction / measurement - 1; within ±{TOLERANCE:.0%} is marked ok.", "",
           "| program | size | base s | thp s | measured | range | model | error | linear | error | model base s |"
           + (" native | error |" if any_native else ""),
           "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if any_native else "")]
    ok = native_ok = 0
    misses = []
    intervals = []  # (inside, a miss, "program MiB (lo-hi)") of each row that has one
    for program, mib, b, t, s, lo, hi, ms, ls, bp, *rest in rows:
        e, le = ms / s - 1, ls / s - 1
        ok += abs(e) <= TOLERANCE
        mark = "ok" if abs(e) <= TOLERANCE else "**miss**"
        line = f"| {program} | {mib}MiB | {b:.3f} | {t:.3f} | {s:.3f}x | {lo:.2f}–{hi:.2f} | {ms:.3f}x | {e:+.1%} {mark} | {ls:.2f}x | {le:+.0%} | {bp:.3f} |"
        nat = rest[0] if rest else None
        if len(rest) > 2 and rest[2]:
            ilo, ihi, _ = rest[2]
            intervals.append((ilo <= ms <= ihi, abs(e) > TOLERANCE, f"{program} {mib}MiB ({ilo:.2f}–{ihi:.2f})"))
        if abs(e) > TOLERANCE and len(rest) > 1 and rest[1]:
            misses.append(f"{program} {mib}MiB {'over' if e > 0 else 'under'}, {rest[1][0]} / {rest[1][1]}")
        if any_native:
            if nat is None:
                line += " – | – |"
            else:
                native_ok += abs(nat / s - 1) <= TOLERANCE
                line += f" {nat:.3f}x | {nat / s - 1:+.1%} |"
        out.append(line)
    out += ["", f"Within ±{TOLERANCE:.0%}: {ok} of {len(rows)} (model); linear model: "
            f"{sum(abs(r[8] / r[4] - 1) <= TOLERANCE for r in rows)} of {len(rows)}"
            + (f"; native (`host+native`: one-dimensional walks, 2MB pages whole): {native_ok} of {len(rows)}." if any_native else ".")]
    if misses:
        out.append("Where the misses sit: the resource that bounds the model's overlap of independent misses on 4KB / 2MB pages "
                   "(`predict`'s `bound`; a row the walkers bound follows the walkers number alone, docs/RUNTIME_MODEL.md, "
                   "\"Which bound each miss sits on\"): " + "; ".join(misses) + ".")
    if intervals:
        out.append(interval_line(intervals, repeats))
    if notes is None:
        from . import _core
        notes = _core.host_explain()[1]
    out += [f"Note on `host`: {n}." if not n.endswith(".") else f"Note on `host`: {n}" for n in notes]
    if state is not None:
        (fp, c4, c2, date), now = state
        whens = ["at the bench's start"] + [f"after round {i}" for i in range(1, len(now) - 1)] + (["at the bench's end"] if len(now) > 1 else [])
        said = "; ".join(f"{when} {s[0]:.1f} / {s[1]:.1f}" if s else f"{when}: no 2MB pages to be had" for when, s in zip(whens, now))
        line = (f"The machine's state: calibrate's chase over {fp >> 20}MiB took {c4:.1f} / {c2:.1f} ns a step on 4KB / 2MB pages "
                f"when `host` was calibrated ({date}); {said}.")
        if through is None:
            line += (" The predictions rest on the first pair (`--model-at-calibration`); where the later ones differ, the machine "
                     "(a shared host's caches) was not what it was calibrated in.")
        else:
            line += f" The predictions rest on the median of these readings, {through[0][0]:.1f} / {through[0][1]:.1f}: {through[1]}."
        out.append(line)
    if tlb is not None:
        out.append(tlb_state_line(*tlb))
    if frames is not None:
        out.append(frames)
    if unsteady:
        out.append(f"Calibration: {unsteady} (docs/RUNTIME_MODEL.md, \"A steady machine?\").")
    if fresh:
        out.append("`host` was calibrated by this bench (`--model-calibrate`), right before its first run.")
    out.append(END)
    return "\n".join(out)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th to 13th, 21st."""
    return f"{n}{'th' if n % 100 in (11, 12, 13) else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def interval_line(intervals: list, repeats: int) -> str:
    """The report's line on how far the runs pin each speedup down: the predictions inside the
    interval that holds the measured median with `INTERVAL_LEVEL` confidence or more
    (`median_interval`), and where each miss's prediction falls against its own. A miss inside
    its interval is one the runs cannot tell from noise; the count within ±15% stays the test."""
    j, cov = interval_rank(repeats)
    nth = ordinal(j)
    how = "their range" if j == 1 else f"the {nth} smallest to the {nth} largest"
    line = (f"How far the runs pin the speedups down: {sum(i for i, _, _ in intervals)} of {len(intervals)} predictions lie inside the "
            f"interval that holds the measured median with {cov:.1%} confidence (the sign test's interval over the pairs' ratios: "
            f"{how} at {repeats} pairs; nothing assumed of the noise's shape)")
    inside = [w for i, m, w in intervals if m and i]
    outside = [w for i, m, w in intervals if m and not i]
    if inside:
        line += "; misses inside theirs, which these runs do not tell from noise: " + ", ".join(inside)
    if outside:
        line += "; misses outside theirs: " + ", ".join(outside)
    return line + "."


def frames_line(calibration: dict) -> str:
    """The report's line on where `host` puts a program's 4KB pages: scattered as calibrate's
    frame probe read them (`[calibration.frames]`), or in the buddy's address order where the
    calibration has no probe. Where `host` is nested (its TLB probe splintered), a second
    sentence on where the host puts guest memory (`[calibration.host_frames]`)."""
    f = calibration.get("frames") or {}
    try:
        each = ", ".join(f"{float(x):.2f}" for x in f["new_runs"])
        line = (f"4KB pages: `host` scatters them as calibrate's frame probe read them ({calibration.get('date', 'undated')}): "
                f"{float(f['scatter']):.2f} of a process's pages start a new run of frames (readings {each}; docs/RUNTIME_MODEL.md, "
                "\"Scattered frames\").")
    except (KeyError, TypeError, ValueError):
        line = ("4KB pages: `host` places them in the buddy allocator's address order (the calibration has no frame probe; "
                "calibrate reads one as root).")
    if not (calibration.get("tlb_probe") or {}).get("splintered"):
        return line
    h = calibration.get("host_frames") or {}
    try:
        ratio = float(h["strided_ns"]) / float(h["control_ns"])
        return line + (f" Guest memory in the host's frames: {'scattered' if h['scattered'] else 'in order'}, as calibrate's "
                       f"host-frames probe read the L2 (one line every 64KiB on 2MB pages {ratio:.2f}x the time of one every 68KiB; "
                       "docs/RUNTIME_MODEL.md, \"Host frames\").")
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return line + " Guest memory in the host's frames: in order (the calibration has no host-frames probe)."


def tlb_state_line(calibrated: tuple[float, bool], now: list) -> str:
    """The report's line on calibrate's TLB probe: its verdict when `host` was calibrated (what
    the predictions rest on) and at the bench's start and end, each with its ratio (sparse /
    packed on 2MB pages; splintered above calibrate's SPLINTER_RATIO)."""
    from .model.calibrate import SPLINTER_RATIO

    def verdict(p) -> str:
        return "no 2MB pages to be had" if p is None else f"{'splintered' if p[1] else 'held whole'} ({p[0]:.2f})"

    said = "; ".join(f"at the bench's {when} {verdict(p)}" for when, p in zip(("start", "end"), now))
    changed = any(p is not None and p[1] != calibrated[1] for p in now)
    return (f"2MB pages in the TLB (calibrate's TLB probe, sparse / packed on 2MB pages, splintered above {SPLINTER_RATIO}): "
            f"{verdict(calibrated)} when `host` was calibrated; {said}. "
            + ("**The verdict changed**: the hypervisor backed this machine's memory differently during the bench than when "
               f"`host` was calibrated, so `host` ({'nested' if calibrated[1] else 'native'}, as calibrated) does not describe "
               "every run; calibrate again (or `--model-calibrate`) and compare."
               if changed else "`host` models the machine as it was when these runs were made."))
