"""The runtime model (issue 24, docs/RUNTIME_MODEL.md): data caches in the machine model, phase
marks, predict and calibrate. The cache model's exactness is in test_cache_vs_pycachesim.py and
the overlap model's hand-worked example in mmu/cache.rs's unit tests."""

import json
import os
import subprocess
import sys

import pytest

import superpager as sp
from superpager import _core
from superpager.model import calibrate as calibrate_mod
from superpager.model.calibrate import fit
from test_hardening import text_trace  # one text-trace helper for the tests


@pytest.fixture(scope="module")
def gups(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("rm") / "gups.spt")
    sp.gen("gups", p, size="256MiB", accesses=200_000)
    return p


def test_machines_without_caches_report_what_they_did_before(gups):
    r = sp.simulate(gups, machine="skylake", policy="base")
    assert not any(k.startswith(("cache.", "overlap.")) for k in r.counters)
    assert "cycles.data" not in r.counters
    n = sp.simulate(gups, machine="host+nocache", policy="base")
    assert "cycles.data" not in n.counters and not any(k.startswith("cache.") for k in n.counters)
    # The linear model: every walk reference costs ref_cycles.
    info = _core.machine_info("host+nocache")
    assert n["cycles.walk"] == round(n["walk.refs"] * info["walk_ref_cycles"])


def test_host_sends_data_and_walk_references_through_its_caches(gups):
    r = sp.simulate(gups, machine="host", policy="base")
    levels = [name for name, *_ in _core.machine_info("host")["cache"]["levels"]]
    walk = sum(r[f"cache.{lv}.walk.hits"] for lv in levels) + r["cache.dram.walk"]
    assert walk == r["walk.refs"], "every walk reference went through the caches"

def test_a_nested_walks_host_references_go_through_the_caches_too(gups):
    # As a guest over 4KB host pages: each guest entry and the final address are translated by
    # a host walk whose entries the caches see (mmu/host_tables.rs), so every reference of a
    # walk is served by some level, and none is charged walker.ref_cycles. The host walks start
    # below the deepest host entry the host's page-walk caches hold (mmu/pwc.rs): of the
    # (g+1)(h+1)-1 references the linear model counts, each hit spares 1 to 3.
    levels = [name for name, *_ in _core.machine_info("host")["cache"]["levels"]]
    native = sp.simulate(gups, machine="host", policy="base")
    r = sp.simulate(gups, machine="host+nested=4KiB", policy="base")
    walk = sum(r[f"cache.{lv}.walk.hits"] for lv in levels) + r["cache.dram.walk"]
    assert walk == r["walk.refs"] > 2 * native["walk.refs"]
    assert r["walks"] == native["walks"]
    full = sp.simulate(gups, machine="host+nested=4KiB+nocache", policy="base")
    assert full["walks"] == r["walks"] and "pwc.host.hits" not in full.counters
    hits = r["pwc.host.hits"]
    assert hits > 0 and hits <= full["walk.refs"] - r["walk.refs"] <= 3 * hits
    # 2MB guest pages over 4KB host pages are splintered: as many walks as 4KB pages here
    # (256MiB of GUPS is far beyond the TLB's reach at 4KB), each shorter.
    s = sp.simulate(gups, machine="host+nested=4KiB", policy="fixed:2MiB")
    whole = sp.simulate(gups, machine="host+nested", policy="fixed:2MiB")
    assert s["walks"] > 100 * whole["walks"]
    assert s["walk.refs"] < r["walk.refs"]
    data = sum(r[f"cache.{lv}.data.hits"] for lv in levels) + r["cache.dram.data"]
    assert data == r["accesses"], "every data access did (no collapsed runs in a generated trace)"
    assert r["cycles.data"] > 0
    # A level only sees what the one above missed.
    for up, down in zip(levels, levels[1:]):
        assert r[f"cache.{up}.data.misses"] == r[f"cache.{down}.data.hits"] + r[f"cache.{down}.data.misses"]
    # 2MB pages: far fewer walk references, the same data references.
    h = sp.simulate(gups, machine="host", policy="fixed:2MiB")
    assert h["walk.refs"] < r["walk.refs"] / 20
    assert sum(h[f"cache.{lv}.data.hits"] for lv in levels) + h["cache.dram.data"] == h["accesses"]


def test_dependence_serializes_misses(gups):
    free = sp.simulate(gups, machine="host+dependence=0", policy="base")
    chain = sp.simulate(gups, machine="host+dependence=1", policy="base")
    assert chain["cycles.data"] > 3 * free["cycles.data"]
    assert chain["cache.dram.data"] == free["cache.dram.data"], "dependence changes cost, not what the caches did"


def test_a_chain_whose_branches_are_predicted_walks_ahead_under_its_misses(gups):
    # GUPS's misses as one dependent chain: with walk_ahead its walks start under the step
    # before's miss (docs/RUNTIME_MODEL.md, "Walks ahead of a dependent chain"), so the walk
    # stall falls and nothing else moves; independent misses are not changed by it.
    chain = sp.simulate(gups, machine="host+dependence=1", policy="base")
    ahead = sp.simulate(gups, machine="host+dependence=1+walk_ahead=1", policy="base")
    half = sp.simulate(gups, machine="host+dependence=1+walk_ahead=0.5", policy="base")
    assert chain["cycles.walk"] > 0
    assert ahead["cycles.walk"] < half["cycles.walk"] < chain["cycles.walk"]
    for k in ["cycles.data", "walks", "walk.refs", "cache.dram.data", "cache.dram.walk"]:
        assert ahead[k] == chain[k], k
    free = sp.simulate(gups, machine="host+dependence=0", policy="base")
    assert sp.simulate(gups, machine="host+dependence=0+walk_ahead=1", policy="base")["cycles.walk"] == free["cycles.walk"]
    assert _core.machine_info("host+walk_ahead=0.97")["cache"]["walk_ahead"] == 0.97


def test_a_full_window_hides_part_of_each_walk_as_walk_hiding_says(gups):
    # GUPS's misses are independent: with walk_hiding the window's chain shows less of each
    # walk (docs/RUNTIME_MODEL.md, "Walks in a full window"), so the walk stall can only fall
    # (the walkers still bound it), and nothing the caches or TLBs did moves.
    narrow = "host+rob=64"
    plain = sp.simulate(gups, machine=narrow, policy="base")
    hidden = sp.simulate(gups, machine=f"{narrow}+walk_hiding=1", policy="base")
    assert plain["cycles.walk"] > 0
    assert hidden["cycles.walk"] < plain["cycles.walk"]
    for k in ["cycles.data", "walks", "walk.refs", "cache.dram.data", "cache.dram.walk"]:
        assert hidden[k] == plain[k], k
    # A pointer chase holds one access in its window: nothing to hide under.
    chain = sp.simulate(gups, machine=f"{narrow}+dependence=1", policy="base")
    assert sp.simulate(gups, machine=f"{narrow}+dependence=1+walk_hiding=1", policy="base")["cycles.walk"] == chain["cycles.walk"]
    info = _core.machine_info("host+walk_hiding=0.35+rob=240")["cache"]
    assert (info["walk_hiding"], info["rob"]) == (0.35, 240)
    assert _core.machine_info("host")["cache"]["walk_hiding"] == 0, "off unless asked"


def test_fewer_walkers_can_only_lengthen_the_walk_stall(gups):
    # `+walkers=N` and `+mlp=N` are what-ifs of the core: the walkers' bound (Overlap) only
    # grows as they fall, and nothing the caches or TLBs did moves.
    many = sp.simulate(gups, machine="host+dependence=0+walkers=64", policy="base")
    one = sp.simulate(gups, machine="host+dependence=0+walkers=1", policy="base")
    assert one["cycles.walk"] > many["cycles.walk"]
    few = sp.simulate(gups, machine="host+dependence=0+mlp=1", policy="base")
    assert few["cycles.data"] > many["cycles.data"]
    for k in ["walks", "walk.refs", "cache.dram.data", "cache.dram.walk"]:
        assert one[k] == many[k] == few[k], k
    info = _core.machine_info("host+walkers=3+mlp=12")["cache"]
    assert (info["walkers"], info["mlp"]) == (3, 12)


def test_a_bounds_norm_can_only_lengthen_the_independent_stalls(gups):
    # `+bounds_norm=P` combines the overlap's three bounds by their P-norm (cache.rs
    # `combine_bounds`), never less than the largest, so GUPS's stalls can only grow; what the
    # caches and TLBs did, and the bounds themselves, do not move.
    stalls = lambda r: r["cycles.data"] + r["cycles.walk"] + r["cycles.tlb"]
    plain = sp.simulate(gups, machine="host+dependence=0", policy="base")
    soft = sp.simulate(gups, machine="host+dependence=0+bounds_norm=2", policy="base")
    assert stalls(soft) > stalls(plain)
    for k in ["walks", "walk.refs", "cache.dram.data", "cache.dram.walk", "overlap.window_cycles", "overlap.walkers_cycles"]:
        assert soft[k] == plain[k], k
    # A chain pays every miss in full: no bound to combine.
    chain = sp.simulate(gups, machine="host+dependence=1", policy="base")
    assert stalls(sp.simulate(gups, machine="host+dependence=1+bounds_norm=2", policy="base")) == stalls(chain)
    assert _core.machine_info("host+bounds_norm=3")["cache"]["bounds_norm"] == 3
    assert _core.machine_info("host+bounds_norm=3+bounds_norm=0")["cache"]["bounds_norm"] is None
    with pytest.raises(_core.UsageError, match=r"\+bounds_norm=0.5: 0 \(the largest bound\) or a number from 1 to 1e6"):
        _core.machine_info("host+bounds_norm=0.5")


def test_the_bound_names_the_busiest_of_the_overlap_counters(gups):
    from superpager.model.predict import BOUNDS, bound, prediction
    # GUPS with every miss independent: its stalls are the busiest resource's time; one
    # walker in flight makes that the walkers, one miss in flight the fill buffers.
    for extra, want in [("+walkers=1", "walkers"), ("+mlp=1", "fill_buffers"), ("+rob=1", "window")]:
        r = sp.simulate(gups, machine=f"host+dependence=0{extra}", policy="base")
        times = {b: r[f"overlap.{b}_cycles"] for b in BOUNDS}
        assert bound(r.counters) == want == max(times, key=times.get), (extra, times)
        stalls = r["cycles.data"] + r["cycles.walk"] + r["cycles.tlb"]
        assert abs(stalls - max(times.values())) <= 3, (extra, stalls, times)  # three roundings
        assert prediction(r, 1.0)["bound"] == want
    assert bound({}) == "none", "no data caches, no overlap model"
    # Every miss on one chain: nothing overlaps, so no resource bounds it.
    dep = sp.simulate(gups, machine="host+dependence=1+walkers=1", policy="base")
    assert bound(dep.counters, 1.0) == "dependent" and bound(dep.counters, 0.5) == "walkers"
    assert bound({}, 1.0) == "none"


def test_memory_s_line_rate_is_a_floor_under_the_whole_access_time(gups):
    # `+dram_line_cycles=N` (docs/RUNTIME_MODEL.md, "Memory's line rate"): at 5,000 cycles a line
    # GUPS's lines from memory take longer than its work and stalls, so the shortfall is
    # `cycles.bandwidth`, in predict's data column, and the bound says so; no count moves.
    from superpager.model.predict import bound, prediction
    plain = sp.simulate(gups, machine="host+dependence=0+dram_line_cycles=0", policy="base")
    slow = sp.simulate(gups, machine="host+dependence=0+dram_line_cycles=5000", policy="base")
    assert "cycles.bandwidth" not in plain.counters, "no rate, no part"
    lines = slow["cache.dram.data"] + slow["cache.dram.walk"]
    busy = sum(slow[k] for k in ("cycles.access", "cycles.data", "cycles.walk", "cycles.tlb"))
    assert slow["cycles.bandwidth"] > 0 and abs(busy + slow["cycles.bandwidth"] - 5000 * lines) <= 5
    assert slow["overlap.bandwidth_cycles"] == 5000 * lines
    for k in ["walks", "walk.refs", "cache.dram.data", "cache.dram.walk", "cycles.data", "cycles.walk"]:
        assert slow[k] == plain[k], k
    row = prediction(slow, 1.0)
    assert bound(slow.counters) == row["bound"] == "bandwidth"
    assert row["data"] == (slow["cycles.data"] + slow["cycles.bandwidth"]) / 1e9
    assert bound(plain.counters) != "bandwidth"
    assert _core.machine_info("host+dram_line_cycles=7.5")["cache"]["dram_line_cycles"] == 7.5


def test_bench_marks_walk_ahead_only_on_dependent_programs():
    from superpager.bench_model import DEPENDENCE, OPTIONAL, PROGRAMS, WALK_AHEAD
    assert set(DEPENDENCE) == set(PROGRAMS + OPTIONAL), "every program the bench takes has its mark"
    assert set(WALK_AHEAD) <= set(PROGRAMS + OPTIONAL)
    assert all(DEPENDENCE[p] > 0 and 0 <= f <= 1 for p, f in WALK_AHEAD.items())
    assert WALK_AHEAD["chase"] == 0, "a pointer chase's next address is the loaded word"


def test_bench_marks_deeper_guesses_no_likelier_than_nearer_ones_and_host_takes_them():
    from superpager.bench_model import WALK_AHEAD, WALK_AHEAD2, WALK_AHEAD3
    assert set(WALK_AHEAD3) <= set(WALK_AHEAD2) <= {p for p, f in WALK_AHEAD.items() if f > 0}
    for p, f2 in WALK_AHEAD2.items():
        f3 = WALK_AHEAD3.get(p, 0.0)
        assert WALK_AHEAD[p] >= f2 >= f3 >= 0, p
        c = _core.machine_info(f"host+dependence=1+walk_ahead={WALK_AHEAD[p]}+walk_ahead2={f2}+walk_ahead3={f3}")["cache"]
        assert (c["walk_ahead"], c["walk_ahead2"], c["walk_ahead3"]) == (WALK_AHEAD[p], f2, f3)


@pytest.mark.parametrize("spec,want", [
    ("skylake+dependence=0.5", "[cache]"),
    ("host+dependence=2", "fraction"),
    ("skylake+walk_ahead=0.5", "[cache]"),
    ("host+walk_ahead=-1", "fraction"),
    ("host+walk_ahead2=2", "fraction"),
    ("host+walk_ahead=0.5+walk_ahead2=0.6", "walk_ahead2 0.6 is more than walk_ahead 0.5"),
    ("host+walk_ahead=0.5+walk_ahead2=0.4+walk_ahead3=0.45", "walk_ahead3 0.45 is more than walk_ahead2 0.4"),
    ("skylake+walk_hiding=0.5", "[cache]"),
    ("host+walk_hiding=-1", "0 to 1e6"),
    ("host+rob=0", "1 to 1e6"),
    ("host+rob=many", "1 to 1e6"),
    ("host+walkers=0", "1 to 1e6"),
    ("skylake+walkers=2", "[cache]"),
    ("host+mlp=-3", "1 to 1e6"),
    ("skylake+nocache", "no [cache]"),
])
def test_modifier_errors_name_the_spec(spec, want):
    with pytest.raises(_core.SuperpagerError) as e:
        _core.machine_info(spec)
    assert want in str(e.value) and spec in str(e.value) and "\n" not in str(e.value)


def test_bad_cache_sections_name_the_key(tmp_path):
    src = _core.preset_toml("skylake")
    good = src + '\n[cache]\nlevels = [{ name = "L1d", size = "32KiB", ways = 8, cycles = 4 }]\ndram_cycles = 200\nmlp = 10\nwalkers = 2\nrob = 224\n'
    p = tmp_path / "m.toml"
    p.write_text(good)
    assert _core.machine_info(str(p))["cache"]["levels"][0][1] == 32768
    assert _core.machine_info(str(p))["cache"]["walk_fill_buffers"] is False, "off unless the file says so"
    p.write_text(good + "walk_fill_buffers = true\n")
    assert _core.machine_info(str(p))["cache"]["walk_fill_buffers"] is True
    for bad, key in [
        (good + "walk_fill_buffers = 3\n", "walk_fill_buffers"),
        (good.replace('"32KiB", ways = 8', '"32KiB", ways = 7'), "cache.levels[0].ways"),
        (good.replace("dram_cycles = 200", "dram_cycles = 2"), "cache.dram_cycles"),
        (good.replace("mlp = 10", "mlp = 0"), "cache.mlp"),
        (good + "walk_ahead = 1.5\n", "cache.walk_ahead"),
        (good + "walk_hiding = -0.5\n", "cache.walk_hiding"),
        (good.replace('size = "32KiB"', 'size = "32Q"'), "cache.levels[0].size"),
    ]:
        p.write_text(bad)
        with pytest.raises(_core.SuperpagerError) as e:
            _core.machine_info(str(p))
        assert key in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_phase_mark_costs_what_follows_it(tmp_path):
    body = "mmap 0x7f0000000000 0x4000000 rw- private|anonymous -1 0x0\n"
    # 5000 pages: more than host's second-level TLB holds, so the phase walks.
    body += "".join(f"S 0x{0x7f0000000000 + i * 4096:x} 8\n" for i in range(5000))
    body += "madvise 0x7f0000000000 0x0 0\n"
    body += "".join(f"L 0x{0x7f0000000000 + (i * 7919 % 5000) * 4096:x} 8\n" for i in range(3000))
    t = text_trace(tmp_path, body)
    r = sp.simulate(t, machine="host", policy="base")
    assert r.phase["accesses"] == 3000
    assert r.phase["faults"] == 0, "the faults were all before the mark"
    assert 0 < r.phase["cycles.total"] < r["cycles.total"]
    assert r.phase["cycles.fault"] == 0
    # What each cache level served in the phase, under the whole run's key names: every data
    # access of the phase is served by exactly one level, and its walks' references likewise.
    levels = [k for k in r.phase if k.startswith("cache.") and k.endswith(".data.hits")] + ["cache.dram.data"]
    assert len(levels) >= 3 and sum(r.phase[k] for k in levels) == 3000
    walk_served = sum(r.phase[k] for k in r.phase if k.startswith("cache.") and (k.endswith(".walk.hits") or k == "cache.dram.walk"))
    assert walk_served == r.phase["walk.refs"] > 0
    assert r.phase["cache.L1d.data.hits"] <= r["cache.L1d.data.hits"]
    # Without a mark: no phase.
    u = sp.simulate(text_trace(tmp_path, body.replace("madvise 0x7f0000000000 0x0 0\n", ""), "u"), machine="host", policy="base")
    assert u.phase == {} and "phase" not in u.to_dict()


def test_predict_prints_speedups_and_the_linear_model(gups, cli):
    code, out, err = cli("predict", gups, "--policies", "base,fixed:2MiB", "--linear", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["policy"] for r in rows] == ["base", "fixed:2MiB"]
    assert rows[0]["speedup"] == 1.0
    assert 1.0 < rows[1]["speedup"] < rows[1]["linear_speedup"], rows
    assert rows[0]["seconds"] == pytest.approx(sum(rows[0][c] for c in ("work", "data", "walk", "faults", "zeroing", "copying", "other")), rel=1e-6)
    code, out, err = cli("predict", gups, "--machine", "skylake", "--linear")
    assert code == 2 and "already the linear one" in err and "Traceback" not in err


def test_calibrate_refuses_bad_flags_in_one_line(cli, tmp_path):
    for args, want in [(["--largest", "12QB"], "not a size"), (["--largest", "64KiB"], "below 1MiB"), (["--repeats", "0"], "positive")]:
        code, _, err = cli("calibrate", "--out", tmp_path / "x.toml", *args)
        assert code == 2 and want in err and "Traceback" not in err, err
    assert not (tmp_path / "x.toml").exists()


def test_calibrate_fit_reads_latencies_and_the_size_a_level_holds():
    # A machine whose L3 (32MiB by CPUID) is seen to hold only 4MiB: beyond it, memory's time.
    levels = [("L1d", 32 << 10, 8, 0.0), ("L2", 1 << 20, 16, 0.0), ("L3", 32 << 20, 16, 0.0)]
    pts = []
    for fp in [16 << 10 << k for k in range(17)]:
        ns = 2.0 if fp <= 16 << 10 else 6.0 if fp <= 512 << 10 else 30.0 if fp <= 4 << 20 else 100.0
        pts += [(fp, "2m", ns), (fp, "4k", ns * 1.3)]
    f = fit(pts, levels, clock=2.0)
    assert f["level_cycles"] == [4.0, 12.0, 60.0]
    assert f["dram_cycles"] == 200.0
    assert f["level_sizes"][:2] == ["", ""]
    assert f["level_sizes"][2] == "4MiB"
    assert calibrate_mod.size_text(3 << 19) == "1536KiB" and calibrate_mod.size_text(1000) == "1000"
    # Memory short of the TLB's reach: the first point at least twice the 4MiB the L3 held.
    assert f["near_memory"] == {"footprint": 8 << 20, "ns": 100.0, "cycles": 200.0}
    assert calibrate_mod.near_memory([(1 << 20, 5.0)], 4 << 20, 2.0, 60.0) is None


def test_a_last_level_that_reads_as_memory_from_four_times_the_level_above_is_read_short():
    # The Sapphire Rapids VM's curve (2MB pages, ns): L2 2MiB; 31.7 at 2MiB, memory's time from
    # 4MiB on, so at 8MiB (four times the L2) the 105MiB L3 reads as memory.
    levels = [("L1d", 48 << 10, 12, 0.0), ("L2", 2 << 20, 16, 0.0), ("L3", 105 << 20, 15, 0.0)]
    curve = {16: 1.9, 32: 2.0, 64: 6.0, 128: 6.5, 256: 6.7, 512: 6.8, 1024: 6.8, 2048: 31.7, 4096: 137.0}
    pts = []
    for fp in [16 << 10 << k for k in range(15)]:
        ns = curve.get(fp >> 10, 160.0)
        pts += [(fp, "2m", ns), (fp, "4k", ns * 1.3)]
    f = fit(pts, levels, clock=2.5)
    assert f["level_cycles"][2] == pytest.approx(31.7 * 2.5)
    assert f["read_short"] == [{"level": 2, "footprint": 2 << 20, "ns": 31.7, "ns_inside": 160.0}]
    # Where the level serves at four times the level above, the rule stays out of it.
    curve[8192] = 40.0
    pts = [(fp, pg, curve.get(fp >> 10, 160.0) * (1.3 if pg == "4k" else 1.0)) for fp, pg, _ in pts]
    f = fit(pts, levels, clock=2.5)
    assert f["read_short"] == [] and f["level_cycles"][2] == pytest.approx(40.0 * 2.5)
    assert calibrate_mod.short_level_point([(2 << 20, 150.0)], 2 << 20, 160.0, 160.0) is None, "nothing faster than memory"


def test_memory_is_read_beyond_the_last_level_not_at_the_largest_footprint():
    # The Zen 5 VM's curve (2MB pages, ns; 2026-12-03, thirty-eighth session): its TLB splinters
    # 2MB pages, so the chase walks beyond 16MiB and is slowest at 1GiB (209.5). Its L3 (32MiB by
    # CPUID) served 2MiB and left by 4MiB. Against the largest point, 156 ns at 4MiB-8MiB read as
    # a level (below 0.8 x 209.5); against memory beyond the L3's size (164.8 at 32MiB) it reads
    # as memory, and the L3 is read short, at 2MiB.
    levels = [("L1d", 48 << 10, 12, 0.0), ("L2", 1 << 20, 16, 0.0), ("L3", 32 << 20, 16, 0.0)]
    curve = [1.121, 1.158, 4.053, 3.955, 3.956, 5.237, 13.997, 15.712, 156.076, 155.864, 153.054, 164.783, 168.804, 170.099,
             180.04, 191.873, 209.541]
    huge = [(16 << 10 << k, ns) for k, ns in enumerate(curve)]
    assert calibrate_mod.memory_ns(huge, 32 << 20) == 164.783
    assert calibrate_mod.memory_ns(huge, 4 << 30) == 209.541, "no point beyond the level: the largest"
    f = fit([(fp, "2m", ns) for fp, ns in huge], levels, clock=3.7)
    # Inside the L3 (4MiB up to half its 32MiB) the fastest point is 16MiB's 153.1 ns, also memory's.
    assert f["read_short"] == [{"level": 2, "footprint": 2 << 20, "ns": 15.712, "ns_inside": 153.054}]
    assert f["level_cycles"][2] == pytest.approx(15.712 * 3.7, abs=0.01)
    assert f["dram_cycles"] == pytest.approx(209.541 * 3.7, abs=0.01), "memory at the largest, as before"


def test_the_clock_is_the_fastest_add_chain_and_cpuinfo_only_where_there_is_none(tmp_path):
    # A stand-in for chase.c's `clock` mode: each call prints the next time, or exits 3 (no add
    # chain for this architecture).
    times = tmp_path / "times"
    times.write_text("0.5\n0.25\n0.4\n0.3\n0.26\n")
    fake = tmp_path / "chase"
    fake.write_text(f"#!/bin/sh\nt=$(head -n1 {times}); sed -i 1d {times}\n"
                    "[ -z \"$t\" ] && exit 3\necho ns_per_add=$t sink=1\n")
    fake.chmod(0o755)
    assert calibrate_mod.measured_clock_ghz(fake) == 4.0  # 1 / 0.25 ns, the fastest of five
    assert calibrate_mod.measured_clock_ghz(fake) is None  # exit 3: the caller takes /proc/cpuinfo
    fake.write_text("#!/bin/sh\necho broken >&2; exit 1\n")
    with pytest.raises(calibrate_mod.CalibrateError, match="clock measurement.*broken"):
        calibrate_mod.measured_clock_ghz(fake)
    # A chain the core folded (add-immediate on Golden Cove read 0.06 ns, "17 GHz"): refused,
    # not written into the calibration as a clock.
    fake.write_text("#!/bin/sh\necho ns_per_add=0.0587 sink=1\n")
    with pytest.raises(calibrate_mod.CalibrateError, match="faster than any core clocks"):
        calibrate_mod.measured_clock_ghz(fake)


def test_the_add_chain_runs_at_a_clock_a_core_can_have():
    # The real chase.c: one dependent add a cycle, so 1 / ns is a core's clock. Not a timing
    # target: any machine's is between 0.5 and 8 GHz, and an add chain the compiler folded or
    # a loop that does not depend on itself would read far outside.
    ghz = calibrate_mod.measured_clock_ghz(calibrate_mod.chase_binary())
    if ghz is None:
        pytest.skip("chase.c has no add chain for this architecture (x86-64 and AArch64 only)")
    assert 0.5 < ghz < 8.0, ghz


def test_tlb_probe_calls_2mb_pages_splintered_when_the_sparse_chase_is_slower(monkeypatch):
    # chase() stands in for model/chase.c: (ns, 2MB-page bytes) by pages and layout.
    def fake(times, huge=32 << 20):
        def chase(_b, footprint, pages, _steps, _seed, layout="dense"):
            return times[(pages, layout)], (huge if pages == "2m" else 0)
        return chase
    monkeypatch.setattr(calibrate_mod, "chase", fake({("2m", "dense"): 5.9, ("2m", "sparse"): 21.6, ("4k", "sparse"): 45.5}))
    p = calibrate_mod.tlb_probe(None, 1000, 3)
    assert p["splintered"] and p["sparse_2m_ns"] == 21.6 and p["packed_2m_ns"] == 5.9 and p["lines"] == 8192
    monkeypatch.setattr(calibrate_mod, "chase", fake({("2m", "dense"): 5.9, ("2m", "sparse"): 6.4, ("4k", "sparse"): 45.5}))
    assert calibrate_mod.tlb_probe(None, 1000, 3)["splintered"] is False
    # No 2MB pages to be had (THP off): no verdict rather than a wrong one.
    monkeypatch.setattr(calibrate_mod, "chase", fake({("2m", "dense"): 5.9, ("2m", "sparse"): 21.6, ("4k", "sparse"): 45.5}, huge=0))
    assert calibrate_mod.tlb_probe(None, 1000, 3) is None


def test_walkers_are_what_the_busiest_chase_needs():
    ks = [1, 2, 4, 8, 16, 32]

    def chases(data: float, walk: float, mlp: int, walkers: int) -> tuple[list[float], list[float]]:
        # What the overlap model says k chases take a load: the busiest of the window (each load a
        # chain of walk and miss), the fill buffers and the walkers.
        ns_2m = [data / min(k, mlp) for k in ks]
        ns_4k = [max((data + walk) / k, data / min(k, mlp), walk / min(k, walkers)) for k in ks]
        return ns_4k, ns_2m

    # Walks that reach memory (400 ns) on a core with 10 fill buffers and 6 walkers: at 32
    # chases the walkers are the bottleneck, 400 / 6 ns a load, and the rule reads 6 back.
    assert calibrate_mod.walkers_from(ks, *chases(300.0, 400.0, 10, 6)) == 6
    # Walks that hit the caches (150 ns) hide under the misses from 16 chases on: the rule can
    # only say at least 150 / 30 = 5 of them, never more than there are.
    assert calibrate_mod.walkers_from(ks, *chases(300.0, 150.0, 10, 6)) == 5
    # Overlap never counts above k: noise that makes a load free at 32 chases says 32.
    ns_4k, ns_2m = chases(300.0, 400.0, 10, 6)
    ns_4k[-1] = 0.0
    assert calibrate_mod.walkers_from(ks, ns_4k, ns_2m) == 32
    # This Sapphire Rapids VM's probe over 1GiB (2026-12-02): 4KB pages add 105.0 ns with one
    # chase and a load takes 18.3 ns at 32 chases: 105.0 / 18.3 = 5.7.
    ns_2m = [153.6, 76.5, 38.9, 21.1, 16.0, 16.1]
    extra = [105.0, 44.0, 15.3, 6.5, 4.2, 2.2]
    assert calibrate_mod.walkers_from(ks, [a + b for a, b in zip(ns_2m, extra)], ns_2m) == 6
    # No extra cost with one chase (THP failed, or a machine without walks to see): no verdict.
    assert calibrate_mod.walkers_from(ks, ns_2m, ns_2m) is None


def test_on_a_splintered_host_a_walk_is_timed_against_a_load_that_does_not_walk():
    # The Zen 5 VM's probe over 1GiB (2026-12-03, second calibration): its TLB splinters 2MB
    # pages, so the 2MB chase walks too and what 4KB pages add with one chase (89.9 ns) is the
    # difference of two walks. Against memory short of the TLB's reach (127.8 ns at 8MiB), one
    # walk takes 156.2 ns, and at 32 chases a 4KB load of 7.076 ns needs 22 walkers, not 13.
    ks = [1, 2, 4, 8, 16, 32]
    ns_2m = [194.056, 89.384, 43.58, 22.077, 11.411, 6.344]
    ns_4k = [283.971, 124.975, 51.308, 25.109, 12.882, 7.076]
    assert calibrate_mod.walk_ns(ks, ns_4k, ns_2m) == 89.915
    assert calibrate_mod.walkers_from(ks, ns_4k, ns_2m) == 13
    assert calibrate_mod.walk_ns(ks, ns_4k, ns_2m, miss_ns=127.777) == 156.194
    assert calibrate_mod.walkers_from(ks, ns_4k, ns_2m, miss_ns=127.777) == 22
    # A load without a walk slower than the 4KB one (noise): no verdict.
    assert calibrate_mod.walkers_from(ks, ns_4k, ns_2m, miss_ns=300.0) is None


def test_mlp_is_the_most_misses_seen_overlapping():
    ks = [1, 2, 4, 8, 16, 32]
    # 14 misses in flight at most: 280 ns alone, 20 ns a load from 14 chases on.
    assert calibrate_mod.mlp_from(ks, [280.0 / min(k, 14) for k in ks]) == 14
    assert calibrate_mod.mlp_from(ks, [280.0, 140.0, 70.0, 35.0, 17.5, 8.75]) == 32
    assert calibrate_mod.mlp_from(ks, [0.0] * 6) is None


def test_calibrate_says_when_the_walk_probe_reached_its_ceiling():
    from superpager.cli_model import walk_probe_line
    ks = [1, 2, 4, 8, 16, 32]
    # This Zen 5 VM's probe over 1GiB (2026-12-02): 4KB pages add nothing from 4 chases on, so
    # every k overlaps; 32 is all the probe can see, not a count of walkers.
    w = {"footprint": 1 << 30, "chains": ks, "mlp": 32, "walkers": 32,
         "ns_2m": [243.6, 115.1, 48.9, 23.8, 11.7, 6.4], "ns_4k": [401.4, 176.9, 73.0, 32.7, 13.7, 7.6]}
    line = walk_probe_line(w)
    assert "at least 32 walks in flight" in line and "at least 32 misses in flight" in line, line
    assert "what 4KB pages add: 1: 157.8" in line, line
    w.update(walkers=6, mlp=14)
    line = walk_probe_line(w)
    assert "14 misses in flight at most (the model's mlp)" in line, line
    # Walkers are what the busiest chase needs, so never more than a bound from below.
    assert "at least 6 walks in flight, what the busiest chase needs (the model's walkers: 6)" in line, line
    w["walk_ns"] = 157.8
    assert "(the model's walkers: 6, one walk 157.8 ns)" in walk_probe_line(w)
    assert walk_probe_line(None).startswith("walk probe: not run")


def test_walk_probe_takes_medians_and_needs_2mb_pages(monkeypatch):
    calls = []

    def fake(huge):
        def chains(_b, footprint, pages, _steps, seed, ks):
            calls.append((pages, seed))
            base = [300.0 / k for k in ks]
            w = 150.0 + seed  # 4 walkers, the bottleneck from 4 chases on
            ns = [max((300.0 + w) / k, w / min(k, 4)) for k in ks] if pages == "4k" else base
            return ns, (huge if pages == "2m" else 0)
        return chains
    monkeypatch.setattr(calibrate_mod, "chains", fake(1 << 30))
    w = calibrate_mod.walk_probe(None, 1 << 30, 1000, 3)
    assert w["chains"] == list(calibrate_mod.WALK_CHAINS) and w["walkers"] == 4
    assert w["mlp"] == 32, "the fake's 2MB loads overlap perfectly: 300 / k ns"
    assert w["ns_4k"][0] == 452.0, "the median of seeds 1-3 (151, 152, 153 over 300)"
    assert calls == [(pg, s) for s in (1, 2, 3) for pg in ("2m", "4k")], "the page sizes in turn"
    assert w["walk_ns"] == 152.0 and w["walkers_rule"] == "busiest-walk"
    # On a splintered host the walk is timed against memory short of the TLB's reach.
    assert calibrate_mod.walk_probe(None, 1 << 30, 1000, 3, miss_ns=200.0)["walk_ns"] == 252.0
    monkeypatch.setattr(calibrate_mod, "chains", fake(0))
    assert calibrate_mod.walk_probe(None, 1 << 30, 1000, 3) is None


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="needs Linux /proc")
def test_calibrate_writes_a_machine_host_then_reads(tmp_path):
    if not _core.host_cache_levels():
        pytest.skip("CPUID and sysfs give no data caches here")
    out = tmp_path / "host.toml"
    env = dict(os.environ, SUPERPAGER_CALIBRATION=str(out))
    p0 = p = subprocess.run([sys.executable, "-m", "superpager.cli", "calibrate", "--largest", "16MiB", "--steps", "20000", "--repeats", "1",
                             "--bounds-norm-fit"], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    assert str(out) in p.stdout
    # calibrate warns where its two timings of the largest chase on 4KB pages disagree, as the
    # file it wrote says they do.
    from superpager.cli_model import read_calibration
    assert ("warning: the machine changed during calibration" in p.stdout) == (calibrate_mod.unsteady_in(read_calibration(out)) is not None), p.stdout
    info = _core.machine_info(str(out))
    cyc = [c for *_, c in info["cache"]["levels"]]
    assert all(c > 0 for c in cyc) and cyc == sorted(cyc)
    assert info["cache"]["dram_cycles"] >= cyc[-1]
    p = subprocess.run([sys.executable, "-m", "superpager.cli", "machines", "host", "--explain", "--json"], capture_output=True, text=True, env=env)
    items = json.loads(p.stdout)["items"]
    lat = [i for i in items if i["item"].endswith("latency")]
    assert lat and all("measured by superpager calibrate" in i["source"] for i in lat), lat
    # The walk probe: its walkers, where it gave a verdict, are host's and say so.
    text = out.read_text()
    for item, key in [("page walks in flight", "walkers"), ("misses in flight", "mlp")]:
        row = [i for i in items if i["item"] == item]
        assert len(row) == 1, items
        if "[calibration.walk_probe]" in text and f"\n{key} = " in text.split("[calibration.walk_probe]")[1]:
            assert "measured by calibrate's walk probe" in row[0]["source"], row
            assert int(row[0]["value"]) == _core.machine_info(str(out))["cache"][key]
        else:
            assert "measured" not in row[0]["source"], row
    # The bounds' norm (--bounds-norm-fit): fitted where the walk probe ran past the walkers,
    # every norm's error written, the chosen one in [cache] unless the largest alone won.
    walk = text.split("[calibration.walk_probe]")[1].split("\n[")[0] if "[calibration.walk_probe]" in text else ""
    if "bounds_norm_errors" in walk:
        norm = [i for i in items if i["item"] == "bounds' norm"]
        assert len(norm) == 1 and "fitted to calibrate's walk probe" in norm[0]["source"], items
        chosen = float(walk.split("bounds_norm = ")[1].split("\n")[0])
        assert _core.machine_info(str(out))["cache"]["bounds_norm"] == (chosen or None)
    # The TLB probe: run wherever 2MB pages are to be had, and shown with its verdict.
    probe = [i for i in items if i["item"] == "2MB pages in the TLB"]
    if "[calibration.tlb_probe]" not in text:
        assert not probe and "TLB probe: not run" in p0.stdout
        return
    assert len(probe) == 1 and "one per 4KB page over 32MiB" in probe[0]["source"], probe
    splintered = "splintered = true" in text
    assert probe[0]["value"] == ("as smaller pieces (splintered)" if splintered else "whole")
    # predict on host says so when it is splintered (flipped here to see both ways).
    out.write_text(text.replace(f"splintered = {str(splintered).lower()}", "splintered = true"))
    trace = tmp_path / "g.spt"
    sp.gen("gups", str(trace), size="16MiB", accesses=2000)
    p = subprocess.run([sys.executable, "-m", "superpager.cli", "predict", str(trace), "--policies", "base,fixed:2MiB"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "TLB probe found 2MB pages held in the TLB as smaller pieces" in p.stderr, p.stderr
    # Splintered, with memory measured short of the TLB's reach: host is nested over 4KB host
    # pages and its memory latency is that point's, both shown with their source.
    if "[calibration.near_memory]" in text:
        p = subprocess.run([sys.executable, "-m", "superpager.cli", "machines", "host", "--explain", "--json"], capture_output=True, text=True, env=env)
        items = {i["item"]: i for i in json.loads(p.stdout)["items"]}
        assert items["page walks"]["value"] == "nested, over 4KB host pages", items
        assert "page-walk caches" in items["page walks"]["source"], items["page walks"]
        assert "short of the TLB's reach" in items["memory latency"]["source"], items["memory latency"]
        p = subprocess.run([sys.executable, "-m", "superpager.cli", "predict", str(trace), "--machine", "host+native", "--policies", "base"],
                           capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr


def test_calibrate_says_when_the_tlb_probes_verdict_differs_from_the_calibration_it_replaces(tmp_path):
    from superpager.cli_model import previous_tlb_probe, tlb_verdict_change
    f = tmp_path / "host.toml"
    assert previous_tlb_probe(f) is None  # no file yet
    f.write_text('[calibration]\ndate = "2026-12-02"\n[calibration.tlb_probe]\nsplintered = false\n')
    before = previous_tlb_probe(f)
    assert before == (False, "2026-12-02")
    line = tlb_verdict_change(before, {"splintered": True})
    assert line == ("TLB probe: the calibration this replaces (2026-12-02) found 2MB pages held whole, now they are splintered: "
                    "the hypervisor backs this machine's memory differently, and host is now nested where it was native")
    assert tlb_verdict_change(before, {"splintered": False}) is None
    assert tlb_verdict_change(before, None) is None and tlb_verdict_change(None, {"splintered": True}) is None
    f.write_text("not toml [")
    assert previous_tlb_probe(f) is None
