"""`bench --live`'s report: speedups as medians of base's time over the policy's, the verdict
against thp, and what the table says about how it was run (`--live-idle`)."""
import subprocess
import sys

from superpager.bench_live import END, START, Run, render

CASES = [("gups", 512, False, None), ("chase", 512, False, None)]
POLICIES = ["base", "thp", "navarro-live", "navarro-live:reserve=off"]


def runs(access: dict[str, list[float]], program: str) -> dict:
    out = {}
    for pol, times in access.items():
        out[(program, 512, False, None, pol)] = [Run(t, 0.3, 1 << 20, 255 if "navarro" in pol else 0, 0.2, 1.0) for t in times]
    return out


def table(idle: float = 0.0) -> str:
    r = runs({"base": [1.0, 1.2, 1.1], "thp": [0.8, 0.8, 0.8], "navarro-live": [0.85, 0.9, 0.86],
              "navarro-live:reserve=off": [1.0, 1.0, 1.0]}, "gups")
    # chase: navarro-live gets 1.10x against thp's 1.375x: 80%, not within 10%.
    r |= runs({"base": [1.1, 1.1, 1.1], "thp": [0.8, 0.8, 0.8], "navarro-live": [1.0, 1.0, 1.0],
               "navarro-live:reserve=off": [1.1, 1.1, 1.1]}, "chase")
    return render(r, CASES, POLICIES, 3, "", "madvise", idle)


def test_speedups_are_medians_and_verdicts_compare_the_default_navarro_live_with_thp():
    t = table()
    assert t.startswith(START) and t.endswith(END)
    # gups: base median 1.1 / thp 0.8 = 1.375x; navarro-live 1.1 / 0.86 = 1.28x, 93% of thp's.
    assert "| gups | 512MiB | 1.100 (1.000–1.200) | 1.38x" in t
    assert "- gups 512MiB: thp 1.38x, navarro-live 1.28x = 93% of thp's speedup: within 10%" in t
    assert "- chase 512MiB: thp 1.38x, navarro-live 1.10x = 80% of thp's speedup: NOT within 10%" in t
    assert "`navarro-live:reserve=off` speedup" in t and "Within 10% of thp on 1 of 2 cases." in t
    assert "idle" not in t
    # The whole run beside the access phase: base 0.3 + 1.1, thp 0.3 + 0.8, navarro-live 0.3 + 0.86.
    assert "| 0.30 / 0.30 / 0.30 | 1.40 / 1.10 / 1.16 |" in t


def test_an_idle_wait_before_each_run_is_stated_in_the_table():
    t = table(idle=12)
    assert "`superpager bench --live --repeats 3 --live-idle 12`" in t
    assert "Each run started after 12 s with the machine idle." in t


def test_live_idle_refuses_what_is_not_a_number_of_seconds():
    for bad in ("-1", "soon", "inf"):
        r = subprocess.run([sys.executable, "-m", "superpager.cli", "bench", "--live", "--live-idle", bad], capture_output=True, text=True)
        assert r.returncode == 2 and "--live-idle" in r.stderr, (bad, r.stderr)


def test_damon_live_gets_its_speedup_its_collapses_and_how_it_saw_damon():
    r = runs({"base": [1.0, 1.0, 1.0], "thp": [0.8, 0.8, 0.8], "navarro-live": [0.85, 0.85, 0.85]}, "gups")
    r[("gups", 512, False, None, "damon-live")] = [Run(t, 0.3, 1 << 20, c, 0.2, h, a) for t, c, h, a in
                                                   ((0.9, 100, 0.4, 1), (0.95, 40, 0.2, 0), (0.92, 90, 0.35, 1))]
    note = "damon-live reads kdamond 0 (pid 73; ...) through its damon_aggregated trace events"
    t = render(r, CASES[:1], ["base", "thp", "navarro-live", "damon-live"], 3, "", "madvise", 0.0, note)
    assert f"How damon-live saw DAMON: {note}." in t
    # base 1.0 / damon-live's median 0.92 = 1.09x; collapses 90, aggregations 1, huge 35%, bloat 1MiB (medians).
    row = next(line for line in t.split("\n") if line.startswith("| gups | 512MiB"))
    assert "| 1.09x (1.05–1.11) |" in row and row.endswith("| 90, 1, 35%, 1.0MiB |"), row
    assert "damon-live collapses, DAMON aggregations read, huge share at exit, bloat" in t
