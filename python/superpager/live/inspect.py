"""`superpager inspect PID`: a real process's mapping sizes, bloat and physical contiguity.

The scan runs in Rust (superpager-live's inspect.rs) and returns a report; this module renders
it as text, JSON, an HTML page with a map of the address space coloured by mapping size, or a
PNG of the same map.
"""
from __future__ import annotations

import html
import json

from .. import _core
from .sysfs import restore_stale

# One colour per mapping size, the same in the HTML and the PNG.
COLOURS = {"4KiB": "#c9d3dd", "16KiB": "#9ecae1", "32KiB": "#6baed6", "64KiB": "#4292c6", "128KiB": "#2171b5",
           "256KiB": "#08519c", "512KiB": "#08306b", "1MiB": "#54278f", "2MiB": "#e6550d", "1GiB": "#a50f15", "mixed": "#fdae6b"}


def inspect(pid: int, bloat_samples: int = 8, seed: int = 1) -> dict:
    """The report of process `pid` (ProcessLookupError when it does not exist)."""
    restore_stale()
    return json.loads(_core.live_inspect(pid, bloat_samples, seed))


def _size(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return f"{n / (1 << k):.1f}{unit}"
    return f"{n}B"


def _sizes_line(u: dict) -> str:
    by = u["by_size"]
    order = sorted(by, key=lambda s: _bytes(s))
    return ", ".join(f"{s} {_size(by[s])}" for s in order) or "nothing resident"


def _bytes(name: str) -> int:
    units = {"KiB": 10, "MiB": 20, "GiB": 30}
    for u, k in units.items():
        if name.endswith(u):
            return int(name[:-3]) << k
    return 0


def render_text(r: dict, all_vmas: bool = False) -> str:
    t = r["total"]
    c = t["contiguity"]
    b = t["bloat"]
    out = [f"pid {r['pid']} ({r['comm']}): {_size(t['present'])} resident, {_size(t['swapped'])} swapped, {_size(t['zero_page'])} on the zero page",
           f"  mapped by size:   {_sizes_line(t)}",
           f"  kernel (smaps):   Rss {_size(t['kernel_rss'])}, AnonHugePages {_size(t['kernel_anon_huge'])}, other PMD-mapped {_size(t['kernel_pmd_other'])}"]
    if t["folios"]:
        out.append("  large folios:     " + ", ".join(f"{k} {_size(v)}" for k, v in sorted(t["folios"].items(), key=lambda kv: _bytes(kv[0]))))
    if r["pfns_visible"]:
        out.append(f"  2MB ranges:       {c['pmd_ranges']} aligned inside VMAs: {c['pmd_huge']} huge, {c['pmd_full']} fully populated, "
                   f"{c['pmd_in_place_full']} complete and in place (promotable without copying), {c['pmd_collapsible']} collapsible "
                   f"({_size(c['pmd_collapsible_bytes'])} resident)")
        out.append(f"  in place:         {_size(c['pmd_in_place_bytes'])} of small pages sit at their offset in an aligned 2MB frame; "
                   f"{_size(c['pud_in_place_bytes'])} in an aligned 1GB frame ({c['pud_ranges']} aligned 1GB ranges, {c['pud_huge']} huge)")
    if b["pieces_sampled"]:
        out.append(f"  bloat (sampled):  {b['pieces_zero']} of {b['pieces_sampled']} sampled 4KB pieces of huge pages read as zeros: "
                   f"about {_size(b['estimate_bytes'])} of {_size(b['huge_bytes'])} (an upper bound: a program may have written zeros)")
    out.append("")
    out.append(f"  {'start':>14} {'end':>14} {'perm':4} {'kind':7} {'resident':>9} {'4KiB':>9} {'huge':>9} {'in place':>9}  name")
    for v in r["vmas"]:
        u = v["usage"]
        if not all_vmas and u["present"] < (1 << 20):
            continue
        huge = sum(n for s, n in u["by_size"].items() if s != "4KiB")
        out.append(f"  {v['start']:#14x} {v['end']:#14x} {v['perms']:4} {v['kind']:7} {_size(u['present']):>9} {_size(u['by_size'].get('4KiB', 0)):>9} "
                   f"{_size(huge):>9} {_size(u['contiguity']['pmd_in_place_bytes']):>9}  {v['name']}")
    if not all_vmas:
        out.append("  (VMAs under 1MiB resident left out; --all shows them)")
    for n in r["notes"]:
        out.append(f"  note: {n}")
    return "\n".join(out)


def _rows(r: dict, per_row: int = 128) -> list[tuple[int, list[dict | None]]]:
    """The map: rows of `per_row` 2MB blocks; runs of empty rows between mappings are dropped."""
    cells = {c["start"]: c for c in r["cells"]}
    rows: dict[int, list[dict | None]] = {}
    span = per_row * (2 << 20)
    for start, c in cells.items():
        row = start // span * span
        rows.setdefault(row, [None] * per_row)[(start - row) // (2 << 20)] = c
    return sorted(rows.items())


def write_html(r: dict, path: str) -> None:
    rows = _rows(r)
    px, gap = 7, 1
    width = 128 * (px + gap) + 150
    height = max(1, len(rows)) * (px + gap) + 20
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" font-size="9">']
    for i, (row, cells) in enumerate(rows):
        y = i * (px + gap)
        svg.append(f'<text x="0" y="{y + px}">{row:#x}</text>')
        for j, c in enumerate(cells):
            if c is None:
                continue
            tip = f"{c['start']:#x}: {c['size']}, {c['present_pages']} of 512 pages resident, {c['in_place_pages']} in place"
            svg.append(f'<rect x="{150 + j * (px + gap)}" y="{y}" width="{px}" height="{px}" fill="{COLOURS.get(c["size"], "#777")}">'
                       f'<title>{html.escape(tip)}</title></rect>')
    svg.append("</svg>")
    legend = " ".join(f'<span style="background:{col};padding:0 .6em">&nbsp;</span> {html.escape(k)}' for k, col in COLOURS.items())
    text = html.escape(render_text(r, all_vmas=True))
    page = (f"<!doctype html><meta charset='utf-8'><title>superpager inspect {r['pid']}</title>"
            f"<h1>pid {r['pid']} ({html.escape(r['comm'])})</h1>"
            f"<p>Each square is a 2MB block of the address space with something resident, coloured by the size that maps it "
            f"(mixed: 4KB pages and large folios); a row is 256MB; empty rows are left out. Hover for details.</p>"
            f"<p>{legend}</p>{''.join(svg)}<pre>{text}</pre>")
    with open(path, "w") as f:
        f.write(page)


def write_png(r: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    rows = _rows(r)
    fig_h = max(2.0, 0.12 * len(rows) + 1.5)
    fig, ax = plt.subplots(figsize=(12, fig_h))
    for i, (_row, cells) in enumerate(rows):
        for j, c in enumerate(cells):
            if c is not None:
                ax.add_patch(plt.Rectangle((j, -i - 1), 0.9, 0.9, color=COLOURS.get(c["size"], "#777")))
    ax.set_xlim(0, 128)
    ax.set_ylim(-max(1, len(rows)), 0)
    ax.set_yticks([-i - 0.5 for i in range(len(rows))][:: max(1, len(rows) // 20)])
    ax.set_yticklabels([f"{row:#x}" for row, _ in rows][:: max(1, len(rows) // 20)], fontsize=6)
    ax.set_xlabel("2MB block within a 256MB row")
    ax.set_title(f"pid {r['pid']} ({r['comm']}): address space by mapping size")
    used = sorted({c["size"] for c in r["cells"]}, key=_bytes)
    ax.legend(handles=[Patch(color=COLOURS.get(s, "#777"), label=s) for s in used], loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
