"""CLI of the runtime model: `superpager predict` and `superpager calibrate`
(docs/RUNTIME_MODEL.md)."""

from __future__ import annotations

import json
from pathlib import Path

from . import _core
from .fmt import table

PREDICT_EPILOG = """\
The model (docs/RUNTIME_MODEL.md): the machine's TLBs and page walker as in simulate, plus data
caches through which the program's accesses and the walker's page-table references go by
physical address, and an overlap model (independent misses overlap up to the core's window and
miss buffers; a dependent chain does not). On a machine without a [cache] section (the presets
other than host), or with MACHINE+nocache, it is the old linear model.

The time covers what follows the trace's phase mark (a zero-length madvise, which the workloads
issue when their access phase starts), else the whole run. Columns, in seconds at the machine's
clock: work (the program's own instructions), data (data-cache stalls), walk (TLB misses: walks
and second-level TLB hits), faults, zeroing, copying (promotion copies the program waits for);
daemon_copy_mib is what daemons copied on another core (not charged). bound: which of the core's
resources limits how far the independent misses overlap, the largest of the overlap.*_cycles
counters: fill_buffers (misses in flight, mlp), window (instructions the core holds, rob) or
walkers (page walks in flight); none without data caches; dependent with --dependence 1
(every miss waits for the one before: nothing overlaps).

Capture the trace with `capture --collapse line`: a trace collapsed by 4KiB page (the default)
hands the caches only the first line of each run of accesses inside a page, and predict says so
in a note.

examples:
  superpager calibrate                                   # once per machine: measure latencies
  superpager capture --collapse line -o gups.spt -- ./gups   # every line a run touches, for the caches
  superpager predict gups.spt --policies base,fixed:2MiB
  superpager predict chase.spt --dependence 1            # a pointer chase: misses serialize
  superpager predict btree.spt --dependence 0.875 --walk-ahead 0.97 --walk-ahead2 0.758 --walk-ahead3 0.121
                                                         # a B-tree descent: walks start early
  superpager predict prog.spt --machine host --policies base,linux-thp,navarro --linear
"""

CALIBRATE_EPILOG = """\
Runs a dependent pointer chase (model/chase.c, compiled on first use) over footprints from 16KiB
to --largest, on 2MB and on 4KB pages, in --repeats passes over every footprint (a point's median
is of runs a pass apart), and takes each cache level's latency (the fastest point, on either page
size, from four times the level above to half the level), memory's latency and the sizes the
levels are seen to hold. Then the TLB probe: one line per 4KB page over 32MiB on 2MB
pages against the same lines packed together, which tells whether the TLB holds 2MB pages whole (a
virtual machine whose host uses 4KB pages splinters them); where it does not, host is modelled as
that guest: nested walks over 4KB host pages, and memory's latency taken short of the TLB's reach,
at the chase twice the last level's size (host+native: as if 2MB pages were held whole). Next, the
walk probe: 1 to 32 chases at once over --largest, on 4KB and 2MB pages; how far the time a load
takes falls as chases are added gives how many misses overlap (the model's mlp), and one walk's
time (a 4KB load less one that does not walk: the 2MB chase's, or memory short of the TLB's reach
where 2MB pages are splintered) over the 4KB load's time at each count gives how many page walks
the busiest needs (walkers; 32 is the most it can find). Next, the window probe: independent loads
over --largest, each followed by 0 to 192 register adds, on 2MB and 4KB pages; how fast the time a
load takes grows with the adds gives how many instructions the core holds behind an outstanding
load (the model's rob), and how much of what 4KB pages add to one load alone shows when many loads
are in flight gives how much of a walk a full window hides (walk_hiding). The scan probe steps a
chase over 3/4 of the level above the last between 8 random loads over --largest, and records
whether the caches keep that hot set while lines read once stream past (an LRU hierarchy would
not; the model does not use it yet). Then the last level's fit (with the last level's latency
read where each size tried holds the chase whole): the model itself runs the chase at --largest and at every quarter of it down to four times
the last level, with the last cache level at up to 11 sizes, from the size seen (else CPUID's)
down to the level above's, fits memory's latency to each size, and keeps the pair at which it
takes the times measured there on 4KB and 2MB pages (a virtual machine gets only a share of a
shared last level, and memory's latency read from one point mixes in a level's hits or the walks;
--no-last-level-fit keeps the size and memory's latency as read). From the size chosen and the
chase's own fills of the level it derives how fast other tenants fill the level (tenant_fill_rate):
host then simulates the level at CPUID's size, shared, each run keeping the part its own fills
earn, and takes the core's page walkers over the walk probe's. With the level shared, the walk
probe run again over four times --largest (the far walk probe; it needs that much memory free and
2GiB more) lets the model fit how a program's share grows with its fills: w / ways = F^a / (F^a +
R^a), the exponent a tried from 1 down to 0.5 with walk_hiding 0, against the model as written;
the nearest to both probes is kept (--no-share-fit skips both). Where its two timings of one
chase over --largest on 4KB pages (among the points, and the walk probe's single chase) are more
than 15% apart, it warns that the machine changed while it measured. --refit FILE measures
nothing and fits FILE's own measurements again by this version's rules. Writes a machine TOML:
the host preset (geometry from CPUID) with the measured numbers and a [calibration] table saying
how they were measured. Times become cycles at the clock a chain of dependent adds measures (a
virtual machine's /proc/cpuinfo gives only the nominal clock). The host machine reads it from
then on (superpager machines host --explain shows it), as long as it was made on this CPU. Takes
about three minutes; nothing else should run meanwhile.

examples:
  superpager calibrate
  superpager calibrate --out mybox.toml && superpager predict t.spt --machine mybox.toml
  superpager calibrate --refit old.toml --out refit.toml     # this version's fits, the old measurements
"""


def cmd_predict(a) -> int:
    import sys
    from .model.predict import collapse_note, predict
    machine = a.machine
    if a.dependence is not None:
        machine = f"{machine}+dependence={a.dependence}"
    for key in ("walk_ahead", "walk_ahead2", "walk_ahead3"):
        if getattr(a, key) is not None:
            machine = f"{machine}+{key}={getattr(a, key)}"
    policies = [p for p in _split(a.policies)]
    if not policies:
        raise _core.UsageError(f"--policies '{a.policies}' names no policy (e.g. --policies base,fixed:2MiB)")
    rows = predict(a.trace, machine, policies, memory=a.memory)
    note = collapse_note(a.trace, machine)
    if note:
        print(f"note: {note}", file=sys.stderr)
    if a.machine.split("+")[0] == "host":
        # What the host machine's numbers rest on, where that limits the prediction (estimated
        # latencies, a calibration of another CPU, 2MB pages the TLB splinters).
        for n in _core.host_explain()[1]:
            print(f"note: {n}", file=sys.stderr)
    linear = None
    if a.linear:
        info = _core.machine_info(a.machine)
        if info.get("cache") is None:
            raise _core.UsageError(f"--linear: machine '{a.machine}' has no [cache] section, so its model is already the linear one")
        linear = predict(a.trace, f"{a.machine}+nocache", policies, memory=a.memory)
        for r, l in zip(rows, linear):
            r["linear_seconds"] = l["seconds"]
            r["linear_speedup"] = l["speedup"]
    if a.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return 0
    cols = ["policy", "seconds", "speedup", "work", "data", "walk", "faults", "zeroing", "copying", "daemon_copy_mib", "bound"]
    if linear:
        cols += ["linear_seconds", "linear_speedup"]
    body = [[r["policy"]] + [f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]) for c in cols[1:]] for r in rows]
    print(f"machine {rows[0]['machine']}, {rows[0]['scope']}")
    print(table(body, cols))
    return 0


def _split(spec: str) -> list[str]:
    from .cli import split_policies
    return split_policies(spec)


def cmd_calibrate(a) -> int:
    from .cbuild import BuildError
    from .model.calibrate import CalibrateError
    from .fmt import human_bytes
    out = Path(a.out) if a.out else default_calibration_path()
    largest = a.largest
    before = previous_tlb_probe(out)
    try:
        if a.refit:
            r = calibrate_on_terminal(out, refit=Path(a.refit), last_level_fit=a.last_level_fit, bounds_norm_fit=a.bounds_norm_fit,
                                      share_fit=a.share_fit)
        else:
            r = calibrate_on_terminal(out, largest=largest, steps=a.steps, repeats=a.repeats, last_level_fit=a.last_level_fit,
                                      bounds_norm_fit=a.bounds_norm_fit, share_fit=a.share_fit)
    except (CalibrateError, BuildError) as e:
        raise _core.UsageError(f"calibrate: {e}") from None
    if a.json:
        print(json.dumps(r, indent=2))
        return 0
    info = _core.machine_info(str(out))
    # A level's size as the written file holds it: the seen size where calibrate gave one.
    fitted = r.get("last_level_fit")
    n_levels = len(info["cache"]["levels"])
    how = "shared" if fitted and fitted.get("tenant_fill_rate") else "fitted"
    rows = [[name, f"{c:.1f}", (f"{human_bytes(b)} ({how})" if fitted and i == n_levels - 1 else human_bytes(b) if r["level_sizes"][i] else "as CPUID")]
            for i, (name, b, _w, c) in enumerate(info["cache"]["levels"])]
    # Splintered with a near point: host is nested, with that point as memory's latency.
    near = r.get("near_memory") if (r.get("tlb_probe") or {}).get("splintered") else None
    fitted_memory = fitted["memory_cycles"][fitted["sizes"].index(fitted["chosen"])] if fitted and fitted.get("memory_cycles") else None
    if fitted and fitted_memory is not None:
        read = (f"the 2MB chase at {human_bytes(near['footprint'])} read {near['cycles']:.1f}" if near is not None
                else f"the largest point read {r['dram_cycles']:.1f}")
        rows.append(["memory", f"{fitted_memory:.1f}", f"(fitted with the last level, over the chase from {human_bytes(fitted['footprints'][0])} up; {read})"])
    elif near is not None:
        # host is nested here: memory's latency short of the TLB's reach (calibrate.near_memory).
        rows.append(["memory", f"{near['cycles']:.1f}", f"(the 2MB chase at {human_bytes(near['footprint'])}; {r['dram_cycles']:.1f} at the largest)"])
    else:
        rows.append(["memory", f"{r['dram_cycles']:.1f}", ""])
    print(table(rows, ["level", "cycles", "size simulated"]))
    print(f"{r['clock_how']}; {len(r['points'])} points")
    for k in r.get("read_short", []):
        print(f"{info['cache']['levels'][k['level']][0]} reads as memory ({k['ns_inside']:.1f} ns) from four times the level above on, so its "
              f"latency is read at {human_bytes(k['footprint'])} ({k['ns']:.1f} ns), a lower bound (docs/RUNTIME_MODEL.md, \"A last level read short\")")
    walk = {(fp, pg): ns for fp, pg, ns in r["points"]}
    big = max(fp for fp, _ in walk)
    if (big, "4k") in walk:
        print(f"a 4KB-page chase over {human_bytes(big)} takes {walk[(big, '4k')]:.1f} ns a step, {walk[(big, '2m')]:.1f} on 2MB pages")
    p = r.get("tlb_probe")
    if p is None:
        print("TLB probe: not run (no 2MB pages to be had here)")
    else:
        held = ("as smaller pieces (splintered: host is modelled as a guest over 4KB host pages, nested walks; host+native for one-dimensional ones)"
                if near is not None else "as smaller pieces (splintered)" if p["splintered"] else "whole")
        print(f"TLB probe: 2MB pages are held {held}; one line per 4KB page over {human_bytes(p['span'])} on 2MB pages takes "
              f"{p['sparse_2m_ns']:.1f} ns a step, {p['packed_2m_ns']:.1f} packed together, {p['sparse_4k_ns']:.1f} on 4KB pages")
    changed = tlb_verdict_change(before, p)
    if changed:
        print(changed)
    print(walk_probe_line(r.get("walk_probe")))
    print(window_probe_line(r.get("window_probe")))
    print(frame_probe_line(r.get("frames")))
    print(host_frames_line(r.get("host_frames"), near is not None))
    print(scan_probe_line(r.get("scan_probe")))
    f = r.get("last_level_fit")
    if f is None:
        print(f"last-level fit: not run ({r['last_level_fit_skipped']}); the last level keeps "
              f"{'the size the chase saw' if r['level_sizes'][-1] else 'the size CPUID gives'}")
    else:
        at = f["sizes"].index(f["chosen"])
        memory = f" and memory at {fitted_memory:.0f} cycles" if fitted_memory is not None else ""
        print(f"last-level fit: {rows[-2][0]} simulated at {human_bytes(f['chosen'])}{memory}; there the model takes {f['ns_4k'][at]:.1f} ns a step "
              f"on 4KB pages and {f['ns_2m'][at]:.1f} on 2MB for the chase over {human_bytes(f['footprint'])}, against "
              f"{f['measured_4k_ns']:.1f} and {f['measured_2m_ns']:.1f} measured ({len(f['sizes'])} sizes tried, "
              f"{human_bytes(f['sizes'][0])} to {human_bytes(f['sizes'][-1])})")
        if f.get("rms"):
            each = ", ".join(f"{human_bytes(n)} {m:.0f} cycles {e * 100:.1f}%" for n, m, e in zip(f["sizes"], f["memory_cycles"], f["rms"]))
            print(f"  over the chase at {', '.join(human_bytes(x) for x in f['footprints'])} on both page sizes, each size with "
                  f"memory's latency fitted to it, root mean square off the measured times: {each}")
        if f.get("tenant_fill_rate"):
            print(f"  the {rows[-2][0]} is shared: other tenants fill it at {f['tenant_fill_rate']:.4f} lines a ns, the rate that leaves "
                  f"this chase {human_bytes(f['chosen'])} of {human_bytes(info['cache']['levels'][-1][1])}; host simulates it whole and each run "
                  "keeps the share of its ways that its own fills are of all fills (docs/RUNTIME_MODEL.md, \"A last level shared by the second\")")
    print(share_fit_line(r.get("share_fit"), r.get("share_fit_skipped")))
    if r.get("unsteady"):
        print(f"warning: {r['unsteady']}")
    print(f"wrote {out}")
    return 0


def share_fit_line(f: dict | None, skipped: str | None) -> str:
    """calibrate's line on the share's exponent (model/calibrate.py `fit_share_exponent`)."""
    if f is None:
        return f"share's exponent: not fitted ({skipped or 'no reason recorded'}); [cache] keeps the exponent 1"
    each = ", ".join(f"{a:g}: {e:.3f}" for a, e in f["errors"])
    if f.get("walk_hiding") is None:
        return (f"share's exponent: 1 kept, the model as written being nearest the walk probes (error {f['as_written_error']:.3f}; "
                f"with walk_hiding 0, by exponent: {each})")
    return (f"share's exponent: {f['exponent']:g} with walk_hiding 0 and tenants at {f['tenant_fill_rate']:.4f} lines a ns "
            f"(error against both walk probes by exponent: {each}; as written {f['as_written_error']:.3f}; "
            "docs/RUNTIME_MODEL.md, \"The share's exponent, fitted\")")


def window_probe_line(w: dict | None) -> str:
    """calibrate's line on the window probe (model/calibrate.py `window_probe`)."""
    from .fmt import human_bytes
    if w is None:
        return "window probe: not run (no 2MB pages to be had here, or no add chain for this architecture); the window is the core table's reorder buffer"
    window = (f"the core holds {w['window']} instructions behind an outstanding load (the model's rob)" if w["window"] is not None
              else "no window read (too few loads overlapped), so rob from the core table")
    hides = (f"a full window hides walks as walk_hiding {w['walk_hiding']:.3f} says" if w["walk_hiding"] is not None
             else "4KB pages added nothing to one load alone, so walks are not hidden (walk_hiding 0)")
    by_pad = ", ".join(f"{p}: {b:.1f} / {a:.1f}" for p, a, b in zip(w["pads"], w["ns_4k"], w["ns_2m"]))
    return (f"window probe: {window}; {hides}; independent loads over {human_bytes(w['footprint'])}, ns a load on 2MB / 4KB pages "
            f"by adds after each: {by_pad}; one load alone {w['dep_2m']:.1f} / {w['dep_4k']:.1f}")


def frame_probe_line(f: dict | None) -> str:
    """calibrate's line on the frame probe (model/calibrate.py `frame_probe`)."""
    if f is None:
        return ("frame probe: not run (/proc/self/pagemap gave no frame numbers: run as root); host places 4KB pages "
                "in the buddy allocator's address order")
    each = ", ".join(f"{x:.2f}" for x in f["new_runs"])
    line = (f"frame probe: of {f['footprint'] >> 20} MiB touched page by page on 4KB pages, {f['scatter']:.2f} of the pages start "
            f"a new run of physical frames (median of {each}); host scatters its 4KB pages so ([frames] scatter)")
    if f.get("groups_8") and f.get("groups_512"):
        g8 = ", ".join(f"{x:.3f}" for x in f["groups_8"])
        g512 = ", ".join(f"{x:.4f}" for x in f["groups_512"])
        line += (f"; they lie in {g8} distinct groups of 8 frames a page and {g512} of 512 (recorded, not used: "
                 "how many host page-table lines and pages a nested walk reads)")
    return line


def scan_probe_line(p: dict | None) -> str:
    """calibrate's line on the scan probe (model/calibrate.py `scan_probe`)."""
    from .fmt import human_bytes
    if p is None:
        return "scan probe: not run (no 2MB pages to be had here, one data-cache level, or --largest no power of two)"
    passing = p["hot"] // 64 * (1 + p["streams"]) * 64
    return (f"scan probe: a chase over {human_bytes(p['hot'])} stepped between {p['streams']} random loads over "
            f"{human_bytes(p['region'])} takes {p['ns_hot']:.1f} ns an iteration, the random loads alone {p['ns_alone']:.1f} "
            f"({human_bytes(passing)} of lines pass between two reads of a hot line: an LRU hierarchy would miss them all); "
            f"recorded, not yet used by the model (its caches are LRU)")


def host_frames_line(h: dict | None, nested: bool) -> str:
    """calibrate's line on the host-frames probe (model/calibrate.py `host_frames_probe`);
    `nested`: host is nested here (its TLB splinters 2MB pages), the only case it counts."""
    if h is None:
        return "host-frames probe: not run (no 2MB pages to be had here)"
    seen = ("does not see the guest's address bits 12-15 (the host scatters a 2MB page's 4KB pieces)" if h["scattered"]
            else "sees the guest's address bits 12-15 (a 2MB page's 4KB pieces in order)")
    use = ((", so host's caches see guest memory in scattered host frames ([walker.nested] host_frames)" if h["scattered"]
            else "; host keeps guest memory in order") if nested else "; host is not nested here, so it does not enter the model")
    return (f"host-frames probe: one line every 64KiB on 2MB pages takes {h['strided_ns']:.1f} ns a step, one every 68KiB "
            f"{h['control_ns']:.1f} ({h['strided_ns'] / h['control_ns']:.2f}x): the L2 {seen}{use}")


def walk_probe_line(w: dict | None) -> str:
    """calibrate's one line on its walk probe (None: not run)."""
    from .fmt import human_bytes
    if w is None:
        return "walk probe: not run (no 2MB pages to be had here)"
    top = max(w["chains"])

    def seen(n: int, what: str, key: str) -> str:
        # At the probe's largest chase count the overlap may go further than it can see.
        if n >= top:
            return f"at least {n} {what}, as many as the chases the probe runs at once (the model's {key}: {n})"
        return f"{n} {what} at most (the model's {key})"
    # Walkers are read as the most any chase needs, so a bound from below at every k
    # (docs/RUNTIME_MODEL.md, "Walks under data misses").
    one = f", one walk {w['walk_ns']:.1f} ns" if w.get("walk_ns") is not None else ""
    walks = (f"at least {w['walkers']} walks in flight, what the busiest chase needs (the model's walkers: {w['walkers']}{one})" if w["walkers"] is not None
             else "a walk costs nothing with one chase, so walkers from the core table")
    misses = seen(w["mlp"], "misses in flight", "mlp") if w["mlp"] is not None else "no miss overlap measured, so mlp from the core table"
    extra = ", ".join(f"{k}: {a - b:.1f}" for k, a, b in zip(w["chains"], w["ns_4k"], w["ns_2m"]))
    return (f"walk probe: {misses}, {walks}; by chases at once over "
            f"{human_bytes(w['footprint'])}, ns a load on 2MB pages: {', '.join(f'{k}: {b:.1f}' for k, b in zip(w['chains'], w['ns_2m']))}; "
            f"what 4KB pages add: {extra}")


def footprint(s: str) -> int:
    """--largest: a size of at least 1MiB (the chase needs footprints beyond the first levels)."""
    import argparse
    from .capture import CaptureError
    from .workloads import parse_size
    try:
        n = parse_size(s)
    except CaptureError:
        raise argparse.ArgumentTypeError(f"'{s}' is not a size (e.g. 1GiB, 256MiB)") from None
    if n < 1 << 20:
        raise argparse.ArgumentTypeError(f"'{s}' is below 1MiB: the chase needs footprints beyond the first cache levels")
    return n


def _positive(s: str) -> int:
    import argparse
    try:
        n = int(s)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"'{s}' is not a positive whole number")
    return n


def previous_tlb_probe(path: Path) -> tuple[bool, str] | None:
    """The TLB probe's verdict in the calibration at `path` that calibrate is about to replace:
    (splintered, its date), or None where there is none to read."""
    cal = read_calibration(path)
    if cal is None:
        return None
    try:
        return bool(cal["tlb_probe"]["splintered"]), str(cal.get("date", "an earlier day"))
    except (KeyError, TypeError):
        return None


def tlb_verdict_change(before: tuple[bool, str] | None, probe: dict | None) -> str | None:
    """A line saying that the TLB probe's verdict differs from the one in the calibration it
    replaced, or None where it does not (or either is missing). A virtual machine's hypervisor
    may back its memory with 2MB pages one day and 4KB pages the next (docs/RUNTIME_MODEL.md,
    "`superpager bench --model`"), which turns `host` from native to nested or back."""
    if before is None or probe is None or bool(probe["splintered"]) == before[0]:
        return None
    def say(splintered: bool) -> str:
        return "splintered" if splintered else "held whole"
    now = bool(probe["splintered"])
    return (f"TLB probe: the calibration this replaces ({before[1]}) found 2MB pages {say(before[0])}, now they are {say(now)}: "
            f"the hypervisor backs this machine's memory differently, and host is now {'nested' if now else 'native'} "
            f"where it was {'nested' if before[0] else 'native'}")


def calibrate_on_terminal(out: Path, **kw) -> dict:
    """`model.calibrate.calibrate` with its progress on a terminal: the step it is at, on one
    line rewritten, and the line ended once it has written `out` (`calibrate` and
    `bench --model --model-calibrate` both run it so)."""
    import sys
    from .model import calibrate as cal_mod

    def progress(done: int, total: int, what: str) -> None:
        if sys.stderr.isatty():
            print(f"\r[{done}/{total}] {what}      ", end="", file=sys.stderr, flush=True)

    refit = kw.pop("refit", None)
    r = cal_mod.refit(refit, out, progress=progress, **kw) if refit else cal_mod.calibrate(out, progress=progress, **kw)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return r


def read_calibration(path: Path) -> dict | None:
    """The `[calibration]` table of the machine file at `path`, or None: no file, or one that
    does not parse."""
    import tomllib
    try:
        cal = tomllib.loads(path.read_text()).get("calibration", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return cal if isinstance(cal, dict) else None


def default_calibration_path() -> Path:
    import os
    if os.environ.get("SUPERPAGER_CALIBRATION"):
        return Path(os.environ["SUPERPAGER_CALIBRATION"])
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "superpager" / "host.toml"


def add_parsers(sub, raw) -> None:
    p = sub.add_parser("predict", help="predicted run time and speedup of policies for a program, from its trace",
                       formatter_class=raw, epilog=PREDICT_EPILOG)
    p.add_argument("trace")
    p.add_argument("--machine", default="host", help="machine (default: host, this CPU with its data caches)")
    p.add_argument("--policies", default="base,fixed:2MiB", help="comma-separated policies; speedups are over the first (default: base,fixed:2MiB)")
    p.add_argument("--dependence", type=float, metavar="F",
                   help="fraction of the program's misses on a chain of dependent loads (a pointer chase 1; a B-tree descent 0.875 and "
                        "a binary search 0.5, the share of their branches the core guesses wrong; default: the machine's, 0)")
    p.add_argument("--walk-ahead", type=float, metavar="F",
                   help="fraction of that chain's walks that start under the step before's miss, because branches the core "
                        "predicts pick the next address (a B-tree descent 0.97, a binary search 0.5, a pointer chase 0; default: the machine's, 0)")
    p.add_argument("--walk-ahead2", type=float, metavar="F",
                   help="fraction of that chain's walks whose guess made two steps before lands in the walk's page, so that the walk "
                        "starts under both steps' misses (a B-tree descent 0.758, a binary search 0.25; at most --walk-ahead; default: the machine's, 0)")
    p.add_argument("--walk-ahead3", type=float, metavar="F",
                   help="the same from three steps before (a B-tree descent 0.121, a binary search 0.125; at most --walk-ahead2; default: the machine's, 0)")
    p.add_argument("--memory", default="64GiB", help="simulated physical memory (default: 64GiB)")
    p.add_argument("--linear", action="store_true", help="also show the old linear model's prediction (MACHINE+nocache)")
    p.add_argument("--json", action="store_true", help="print a JSON list, one object per policy")
    p.set_defaults(fn=cmd_predict)

    c = sub.add_parser("calibrate", help="measure this machine's cache and memory latencies for the runtime model",
                       formatter_class=raw, epilog=CALIBRATE_EPILOG)
    c.add_argument("--out", help="machine TOML to write (default: $SUPERPAGER_CALIBRATION, else ~/.config/superpager/host.toml, which host reads)")
    c.add_argument("--largest", default="1GiB", type=footprint, help="largest chase footprint (default: 1GiB; memory's latency is taken there)")
    c.add_argument("--steps", type=_positive, default=2_000_000, help="chase steps per point (default: 2000000)")
    c.add_argument("--repeats", type=_positive, default=3, help="runs per point; the median is kept (default: 3)")
    c.add_argument("--no-last-level-fit", dest="last_level_fit", action="store_false",
                   help="keep the last cache level at the size CPUID gives (or the chase saw) instead of fitting it "
                        "to the chase at --largest (docs/RUNTIME_MODEL.md, \"The last level's fit\")")
    c.add_argument("--bounds-norm-fit", dest="bounds_norm_fit", action="store_true",
                   help="also fit the norm by which the overlap's bounds combine to the walk probe, and write it into [cache] "
                        "(a what-if: off by default, since it helped on two hours' runs and hurt on a third; "
                        "docs/RUNTIME_MODEL.md, \"Bounds near each other\")")
    c.add_argument("--no-share-fit", dest="share_fit", action="store_false",
                   help="skip the far walk probe (the walk probe over four times --largest) and the fit of how a program's "
                        "share of a shared last level grows with its fills; [cache] then keeps the exponent 1 and the window "
                        "probe's walk_hiding (docs/RUNTIME_MODEL.md, \"The share's exponent, fitted\")")
    c.add_argument("--refit", metavar="FILE",
                   help="measure nothing: fit the machine file FILE (one calibrate wrote) again from the measurements it holds, "
                        "by this version's rules, and write the result to --out (docs/RUNTIME_MODEL.md, \"Memory's latency, fitted\")")
    c.add_argument("--json", action="store_true", help="print the measurements as JSON")
    c.set_defaults(fn=cmd_calibrate)
