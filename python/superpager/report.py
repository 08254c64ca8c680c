"""Static HTML reports of simulated runs: a summary table; TLB misses, walks and estimated cycles
per policy; page-size mix and fragmentation over time; why regions were not promoted; and an
animated physical-memory map. The page opens from disk with no network (figures are files
beside it, the map's frames are inline data); every figure is also written as PNG and SVG.

    report.write([(run_id, result), ...], "report/", title="...")
"""
from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Sequence

from . import api
from .fmt import human, human_bytes, mix_str

#: Runs drawn in the over-time figures (the table lists every run).
MAX_TIME_RUNS = 12
#: Runs whose memory map is drawn.
MAX_MAPS = 8

#: Map cell colours, by the legend's state name (os/physmap.rs); superpage sizes in order.
STATE_COLOURS = {"free": "#f2f2f2", "partly used": "#9ecae1", "reserved": "#fdd49e", "unmovable": "#636363"}
SUPER_COLOURS = ["#74c476", "#238b45", "#00441b", "#41ab5d"]

# Counters that say why something did not become a superpage, by policy family: (pattern, label).
# Outcomes that are successes are left out.
WHY_NOT = [
    (re.compile(r"^policy\.khugepaged\.scan(?:_(1g|2m))?\.(\w+)$"), lambda m: None if m[2] == "succeed" else f"khugepaged{' ' + m[1].upper() + 'B' if m[1] else ''}: {m[2]}"),
    (re.compile(r"^policy\.thp_fault_fallback$"), lambda m: "fault: no huge page free (fallback)"),
    (re.compile(r"^policy\.fault\.(1g|2m)_fallback$"), lambda m: f"fault: no {m[1].upper()}B block (fallback)"),
    (re.compile(r"^policy\.navarro\.unpromoted\.(\w+)\.(\w+)$"), lambda m: None if m[1].startswith("pages") else f"reservation {m[2]}: {m[1]}"),
    (re.compile(r"^policy\.romer\.not_promoted\.(\w+)\.(\w+)$"), lambda m: f"potential {m[1]} superpage: {m[2]}"),
]


def why_not(counters: dict[str, int]) -> dict[str, int]:
    """The "why not promoted" breakdown of one run: reason -> count (non-zero only)."""
    out: dict[str, int] = {}
    for k, v in counters.items():
        if not v:
            continue
        for pat, label in WHY_NOT:
            m = pat.match(k)
            if m:
                name = label(m)
                if name:
                    out[name] = out.get(name, 0) + v
                break
    return out


def load_dir(d: str) -> list[tuple[str, api.Result]]:
    """The runs of a results directory (simulate/compare --out), named by position."""
    path = os.path.join(d, "results.json")
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        from . import _core

        raise _core.FileAccessError(f"{path}: no such file (a results directory holds results.json)") from None
    except json.JSONDecodeError as e:
        from . import _core

        raise _core.FileAccessError(f"{path}: not valid JSON: {e}") from None
    return [(f"run{i + 1}", api.Result.from_json(json.dumps(r))) for i, r in enumerate(data)]


def _name(rid: str, r: api.Result, runs: Sequence[tuple[str, api.Result]]) -> str:
    """A short label: the parts that differ between runs (trace, machine, policy, memory)."""
    parts = []
    for attr in ("trace", "machine", "policy", "memory"):
        vals = {os.path.basename(getattr(x, attr)) for _, x in runs}
        if len(vals) > 1:
            parts.append(os.path.basename(getattr(r, attr)))
    return " ".join(parts) or r.policy


def _figures(runs, out: str) -> list[tuple[str, str, str]]:
    """Draw every figure; (file stem, title, caption) of each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "superpager", "font.size": 9})
    figdir = os.path.join(out, "figures")
    os.makedirs(figdir, exist_ok=True)
    made = []

    def save(fig, stem: str, title: str, caption: str) -> None:
        fig.tight_layout()
        fig.savefig(os.path.join(figdir, f"{stem}.png"), dpi=110)
        fig.savefig(os.path.join(figdir, f"{stem}.svg"), metadata={"Date": None})
        plt.close(fig)
        made.append((stem, title, caption))

    # Per policy: mean over the runs of each policy (each machine apart when there are several).
    groups: dict[str, list[api.Result]] = {}
    machines = {r.machine for _, r in runs}
    for _, r in runs:
        groups.setdefault(r.policy + (f" @ {r.machine}" if len(machines) > 1 else ""), []).append(r)
    labels = list(groups)
    for stem, title, value in (
        ("tlb_misses", "TLB misses per policy", lambda r: r.tlb_misses()),
        ("walks", "Page walks per policy", lambda r: r.counters.get("walks", 0)),
        ("cycles", "Estimated cycles per policy", lambda r: r.counters.get("cycles.total", 0)),
    ):
        fig, ax = plt.subplots(figsize=(7, 0.45 * len(labels) + 1.2))
        vals = [sum(value(r) for r in groups[g]) / len(groups[g]) for g in labels]
        ax.barh(range(len(labels)), vals, color="#3182bd")
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
        ax.set_xlabel(title.split(" per ")[0] + (" (mean over runs)" if any(len(v) > 1 for v in groups.values()) else ""))
        save(fig, stem, title, f"{title}; the mean of {sum(len(v) for v in groups.values())} runs over {len(labels)} groups.")

    shown = runs[:MAX_TIME_RUNS]
    more = f" (the first {len(shown)} of {len(runs)} runs)" if len(runs) > len(shown) else ""
    # Page-size mix over time: resident bytes per page size, stacked.
    with_series = [(rid, r) for rid, r in shown if len(r.series) > 1]
    if with_series:
        n = len(with_series)
        cols = min(3, n)
        rows = (n + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.6 * rows), squeeze=False)
        for ax, (rid, r) in zip(axes.flat, with_series):
            sizes = list(r.series[-1].get("resident", {}))
            xs = [s["accesses"] for s in r.series]
            ys = [[s.get("resident", {}).get(z, 0) / 2**30 for s in r.series] for z in sizes]
            ax.stackplot(xs, ys, labels=sizes)
            ax.set_title(_name(rid, r, runs), fontsize=8)
            ax.set_xlabel("accesses")
            ax.set_ylabel("resident GiB")
        axes.flat[0].legend(loc="upper left", fontsize=7)
        for ax in list(axes.flat)[n:]:
            ax.axis("off")
        save(fig, "page_size_mix", "Page-size mix over time", f"Resident memory by page size as the run goes{more}.")
        # Fragmentation over time: the unusable free space index of each superpage size.
        zs = sorted({z for _, r in with_series for z in r.series[-1].get("unusable_index", {})}, key=_bytes)
        if zs:
            fig, axes = plt.subplots(1, len(zs), figsize=(4.2 * len(zs), 3.2), squeeze=False)
            for ax, z in zip(axes.flat, zs):
                for rid, r in with_series:
                    xs = [s["accesses"] for s in r.series]
                    ax.plot(xs, [s.get("unusable_index", {}).get(z, 0) for s in r.series], label=_name(rid, r, runs))
                ax.set_title(f"{z} blocks", fontsize=8)
                ax.set_xlabel("accesses")
                ax.set_ylabel("unusable free space index")
                ax.set_ylim(-0.02, 1.02)
            axes.flat[0].legend(fontsize=7)
            save(fig, "fragmentation", "Fragmentation over time",
                 "Gorman's unusable free space index for each superpage size: the share of free memory not in free blocks "
                 f"of that size (0: all of it usable; 1: none){more}.")
    # Why not promoted.
    why: dict[str, dict[str, int]] = {g: {} for g in labels}
    for g in labels:
        for r in groups[g]:
            for k, v in why_not(r.counters).items():
                why[g][k] = why[g].get(k, 0) + v
    reasons = sorted({k for d in why.values() for k in d})
    if reasons:
        fig, ax = plt.subplots(figsize=(8, 0.45 * len(labels) + 1.6))
        left = [0.0] * len(labels)
        cmap = plt.get_cmap("tab20")
        for i, k in enumerate(reasons):
            vals = [why[g].get(k, 0) for g in labels]
            ax.barh(range(len(labels)), vals, left=left, label=k, color=cmap(i % 20))
            left = [a + b for a, b in zip(left, vals)]
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
        ax.set_xlabel("count (summed over runs)")
        ax.legend(fontsize=7, loc="lower right")
        save(fig, "why_not_promoted", "Why regions were not promoted",
             "Every counted reason a region did not become a superpage, per policy (khugepaged's scan results, fault fallbacks, "
             "unpromoted reservations, Romer's potential superpages below threshold).")
    # Memory maps: the first, middle and last frame of each run that kept a map.
    for rid, r in [(rid, r) for rid, r in runs if r.map and r.map.get("frames")][:MAX_MAPS]:
        frames = r.map["frames"]
        pick = sorted({0, len(frames) // 2, len(frames) - 1})
        cols = _map_cols(len(frames[0]["cells"]))
        cmap, norm = _map_cmap(r.map["legend"])
        fig, axes = plt.subplots(1, len(pick), figsize=(3.2 * len(pick), 3.0), squeeze=False)
        for ax, i in zip(axes.flat, pick):
            ax.imshow(_grid(frames[i]["cells"], cols), cmap=cmap, norm=norm, interpolation="nearest")
            ax.set_title(f"after {human(frames[i]['accesses'])} accesses", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
        save(fig, f"map_{rid}", f"Physical memory: {_name(rid, r, runs)}",
             f"Each cell an aligned {human_bytes(r.map['region_bytes'])} of physical memory; first, middle and last of {len(frames)} frames.")
    return made


def _bytes(size: str) -> int:
    m = re.fullmatch(r"(\d+)(KiB|MiB|GiB|TiB)", size)
    return int(m[1]) << {"KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]] if m else 0


def _map_cols(cells: int) -> int:
    """Columns of the map's grid: square-ish, at most 128 wide."""
    c = 1
    while c * c < cells and c < 128:
        c += 1
    return c


def _grid(cells: str, cols: int):
    import numpy as np

    codes = [ord(ch) - 48 for ch in cells]
    rows = (len(codes) + cols - 1) // cols
    a = np.full(rows * cols, np.nan)
    a[: len(codes)] = codes
    return a.reshape(rows, cols)


def _colours(legend: list[str]) -> list[str]:
    out, k = [], 0
    for name in legend:
        if name in STATE_COLOURS:
            out.append(STATE_COLOURS[name])
        else:
            out.append(SUPER_COLOURS[k % len(SUPER_COLOURS)])
            k += 1
    return out


def _map_cmap(legend: list[str]):
    from matplotlib.colors import BoundaryNorm, ListedColormap

    cols = _colours(legend)
    return ListedColormap(cols), BoundaryNorm([i - 0.5 for i in range(len(cols) + 1)], len(cols))


CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1180px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 12px; margin: 1em 0; }
th, td { border: 1px solid #ddd; padding: 3px 6px; } th { background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.5em 0; } figcaption { color: #555; font-size: 12px; } img { max-width: 100%; }
.map canvas { border: 1px solid #ccc; image-rendering: pixelated; }
.legend span { display: inline-block; margin-right: 1em; font-size: 12px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -2px; border: 1px solid #999; }
"""

# The map's player: draws a frame on a canvas, steps through them on a timer; no dependencies.
JS = """
(function () {
  function draw(el, i) {
    var d = el._map, f = d.frames[i], cv = el.querySelector('canvas'), cx = cv.getContext('2d');
    var s = d.scale, cols = d.cols;
    for (var k = 0; k < f.cells.length; k++) {
      cx.fillStyle = d.colours[f.cells.charCodeAt(k) - 48] || '#000';
      cx.fillRect((k % cols) * s, Math.floor(k / cols) * s, s, s);
    }
    el.querySelector('input').value = i;
    el.querySelector('.at').textContent = 'frame ' + (i + 1) + ' of ' + d.frames.length + ', after ' + f.accesses.toLocaleString() + ' accesses';
    el._at = i;
    el.dataset.drawn = String(Number(el.dataset.drawn || 0) + 1);
  }
  document.querySelectorAll('.map').forEach(function (el) {
    el._map = JSON.parse(el.querySelector('script[type="application/json"]').textContent);
    var d = el._map, cv = el.querySelector('canvas');
    var rows = Math.ceil(d.frames[0].cells.length / d.cols);
    cv.width = d.cols * d.scale; cv.height = rows * d.scale;
    var input = el.querySelector('input'), button = el.querySelector('button'), timer = null;
    input.max = d.frames.length - 1;
    input.addEventListener('input', function () { draw(el, Number(input.value)); });
    button.addEventListener('click', function () {
      if (timer) { clearInterval(timer); timer = null; button.textContent = 'play'; return; }
      button.textContent = 'pause';
      timer = setInterval(function () {
        draw(el, (el._at + 1) % d.frames.length);
      }, 150);
    });
    draw(el, 0);
  });
  window.addEventListener('load', function () {
    document.querySelectorAll('img').forEach(function (img) {
      if (img.complete && img.naturalWidth > 0) { img.dataset.loaded = '1'; }
      else { console.error('figure did not load: ' + img.getAttribute('src')); }
    });
    document.body.dataset.ready = '1';
  });
})();
"""


def write(runs: Sequence[tuple[str, api.Result]], out: str, title: str = "superpager report") -> str:
    """Write out/index.html and out/figures/*.{png,svg}; the path of index.html."""
    from . import output

    runs = list(runs)
    os.makedirs(out, exist_ok=True)
    figs = _figures(runs, out)
    e = html.escape
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>",
             f"<style>{CSS}</style></head><body>", f"<h1>{e(title)}</h1>",
             f"<p>{len(runs)} runs. Figures are also in <code>figures/</code> as PNG and SVG.</p>",
             "<h2>Summary</h2>", "<table class=summary><thead><tr>"]
    heads = ["run", "trace", "machine", "policy", "memory", "accesses", "TLB misses", "walks", "walks / 1k", "cycles",
             "cycles / access", "faults", "page sizes at the end"]
    parts.append("".join(f"<th>{h}</th>" for h in heads) + "</tr></thead><tbody>")
    for rid, r in runs:
        c = r.counters
        acc = max(c.get("accesses", 0), 1)
        cells = [e(rid), e(os.path.basename(r.trace)), e(r.machine), e(r.policy), e(r.memory)]
        nums = [human(c.get("accesses", 0)), human(r.tlb_misses()), human(c.get("walks", 0)), f"{1000 * c.get('walks', 0) / acc:.2f}",
                human(c.get("cycles.total", 0)), f"{c.get('cycles.total', 0) / acc:.2f}", human(c.get("faults", 0))]
        parts.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "".join(f"<td class=n>{x}</td>" for x in nums)
                     + f"<td>{e(mix_str(r.page_size_mix))}</td></tr>")
    parts.append("</tbody></table>")
    why_rows = [(rid, r, why_not(r.counters)) for rid, r in runs]
    if any(w for _, _, w in why_rows):
        parts += ["<h2>Why not promoted</h2>", "<table class=why><thead><tr><th>run</th><th>policy</th><th>reason</th><th>count</th></tr></thead><tbody>"]
        for rid, r, w in why_rows:
            for k, v in sorted(w.items(), key=lambda kv: -kv[1]):
                parts.append(f"<tr><td>{e(rid)}</td><td>{e(r.policy)}</td><td>{e(k)}</td><td class=n>{v:,}</td></tr>")
        parts.append("</tbody></table>")
    parts.append("<h2>Figures</h2>")
    for stem, ftitle, caption in figs:
        parts.append(f"<figure class=fig id='{e(stem)}'><img src='figures/{e(stem)}.png' alt='{e(ftitle)}'>"
                     f"<figcaption><b>{e(ftitle)}.</b> {e(caption)} <a href='figures/{e(stem)}.svg'>SVG</a></figcaption></figure>")
    maps = [(rid, r) for rid, r in runs if r.map and r.map.get("frames")][:MAX_MAPS]
    if maps:
        parts.append("<h2>Physical memory over time</h2>")
    for rid, r in maps:
        cols = _map_cols(len(r.map["frames"][0]["cells"]))
        data = {"cols": cols, "scale": max(2, min(24, 640 // cols)), "colours": _colours(r.map["legend"]), "frames": r.map["frames"]}
        legend = "".join(f"<span><i style='background:{c}'></i>{e(n)}</span>" for n, c in zip(r.map["legend"], _colours(r.map["legend"])))
        blob = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
        parts.append(f"<div class=map id='map-{e(rid)}' data-frames='{len(r.map['frames'])}'><h3>{e(_name(rid, r, runs))} ({e(rid)})</h3>"
                     f"<p>Each cell an aligned {human_bytes(r.map['region_bytes'])} of the {e(r.memory)} of physical memory.</p>"
                     f"<div class=legend>{legend}</div><canvas></canvas><div><button type=button>play</button> "
                     f"<input type=range min=0 value=0> <span class=at></span></div>"
                     f"<script type='application/json'>{blob}</script></div>")
    parts.append(f"<script>{JS}</script></body></html>")
    text = "\n".join(parts) + "\n"
    return output.write_text(os.path.join(out, "index.html"), text)


def chromium() -> str | None:
    """A headless-capable Chromium on PATH (Debian's `chromium`; make setup installs it)."""
    import shutil

    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def open_in_browser(index: str, screenshot: str | None = None, width: int = 1280, height: int = 2400,
                    budget_ms: int = 3000) -> tuple[str, list[str]]:
    """Load a report in headless Chromium: (the DOM after its scripts ran, the console messages).
    With `screenshot`, also write a PNG of the page."""
    import subprocess
    import tempfile

    exe = chromium()
    if exe is None:
        from . import _core

        raise _core.UsageError("no Chromium found (Debian: apt install chromium; make setup installs it)")
    url = "file://" + os.path.abspath(index)
    with tempfile.TemporaryDirectory(prefix="superpager-chromium-") as prof:
        common = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
                  f"--user-data-dir={prof}", f"--virtual-time-budget={budget_ms}", f"--window-size={width},{height}"]
        p = subprocess.run([*common, "--enable-logging=stderr", "--v=0", "--dump-dom", url], capture_output=True, text=True, timeout=120)
        console = [l for l in p.stderr.splitlines() if ":CONSOLE" in l]
        if screenshot:
            subprocess.run([*common, f"--screenshot={os.path.abspath(screenshot)}", url], capture_output=True, timeout=120, check=True)
    return p.stdout, console
