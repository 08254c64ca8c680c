"""HTML reports (`superpager report`): written from the store, rendered in headless Chromium
with no console errors, every table, figure and map frame present."""
import os
import re

import pytest

import superpager as sp
from superpager import report

pytest.importorskip("duckdb", reason="the results store needs duckdb (make setup installs it)")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    t = str(d / "g.spt")
    sp.gen("gups", t, size="512MiB", accesses=300_000, progress=False)
    from superpager import cli

    for p in ("base", "linux-thp:enabled=always", "navarro", "romer:online"):
        assert cli.main(["simulate", t, "--policy", p, "--memory", "2GiB", "--sample-every", "50k", "--map-every", "100k",
                         "--map-region", "16MiB", "--db", str(d / "r.duckdb"), "--json"]) == 0
    out = d / "rep"
    assert cli.main(["report", "--db", str(d / "r.duckdb"), "-o", str(out)]) == 0
    return d, out


def test_every_figure_is_written_as_png_and_svg(made):
    _, out = made
    stems = {os.path.splitext(f)[0] for f in os.listdir(out / "figures")}
    for s in ("tlb_misses", "walks", "cycles", "page_size_mix", "fragmentation", "why_not_promoted"):
        assert s in stems
    assert sum(1 for s in stems if s.startswith("map_")) == 4
    for s in stems:
        for ext in ("png", "svg"):
            assert (out / "figures" / f"{s}.{ext}").stat().st_size > 1000
    html = (out / "index.html").read_text()
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html, "the report must open with no network"


def test_why_not_promoted_names_each_policy_reason():
    c = {"policy.khugepaged.scan.exceed_none_pte": 3, "policy.khugepaged.scan.succeed": 9, "policy.khugepaged.scan_1g.vma_check": 2,
         "policy.navarro.unpromoted.not_fully_populated.2MiB": 5, "policy.navarro.unpromoted.pages_populated": 100,
         "policy.romer.not_promoted.64KiB.below_threshold": 7, "policy.thp_fault_fallback": 1, "walks": 10}
    assert report.why_not(c) == {"khugepaged: exceed_none_pte": 3, "khugepaged 1GB: vma_check": 2, "reservation 2MiB: not_fully_populated": 5,
                                 "potential 64KiB superpage: below_threshold": 7, "fault: no huge page free (fallback)": 1}


@pytest.mark.skipif(report.chromium() is None, reason="Chromium is not installed (make setup installs Debian's chromium)")
def test_the_report_renders_in_chromium_with_no_console_errors(made):
    d, out = made
    shot = d / "shot.png"
    dom, console = report.open_in_browser(str(out / "index.html"), screenshot=str(shot))
    assert console == [], console
    assert 'data-ready="1"' in dom
    # Tables: the summary has a row per run; the why-not table is there.
    summary = re.search(r"<table class=\"summary\">.*?</table>", dom, re.S).group(0)
    assert summary.count("<tr>") == 1 + 4
    assert '<table class="why">' in dom
    # Every figure's image loaded (the page's script marks each).
    figs = re.findall(r"<img [^>]*>", dom)
    assert len(figs) == len(os.listdir(out / "figures")) // 2
    assert all('data-loaded="1"' in f for f in figs), figs
    # Each map drew its first frame and knows all its frames.
    maps = re.findall(r'<div class="map" id="map-(\w+)" data-frames="(\d+)"[^>]*data-drawn="(\d+)"', dom)
    assert len(maps) == 4
    for rid, frames, drawn in maps:
        r = sp.results(db=str(d / "r.duckdb"), sql=f"SELECT count(*) AS n FROM maps WHERE run_id = '{rid}'")
        assert int(frames) == int(r.n[0]) >= 3
        assert int(drawn) >= 1
    assert re.search(r'class="at">frame 1 of \d+, after', dom)
    assert shot.stat().st_size > 20_000
