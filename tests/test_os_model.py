"""The OS memory manager and linux-thp through the public API: THP behaviour on free and on
fragmented memory, conservation in the time series, scenario errors, segfaults as results."""

import pytest

import superpager as sp


def test_thp_maps_a_4gib_gups_table_with_2mb_pages():
    r = sp.simulate(scenario="thp-gups", policy="linux-thp:enabled=always", progress=False)
    c = r.counters
    assert c["footprint.bytes"] >= 4 << 30
    assert r.page_size_mix["2MiB"] >= 0.99, r.page_size_mix
    assert c["policy.thp_fault_alloc"] == c["faults.2MiB"] > 0
    # The same scenario under base pages maps nothing large (the policy, not the trace, decides).
    b = sp.simulate(scenario="thp-gups", policy="base", progress=False)
    assert b.page_size_mix["4KiB"] == 1.0
    assert b["walks"] > 2 * c["walks"]


def test_thp_never_and_madvise_modes_map_base_pages_here():
    for mode in ("never", "madvise"):
        r = sp.simulate(scenario="thp-gups", policy=f"linux-thp:enabled={mode}", progress=False)
        assert r.page_size_mix["4KiB"] == 1.0, (mode, r.page_size_mix)


@pytest.fixture(scope="module")
def fragmented():
    return sp.simulate(scenario="trident-fragmented", progress=False)


def test_fragmentation_makes_fault_time_thp_fail(fragmented):
    c = fragmented.counters
    assert c["policy.thp_fault_fallback"] > 0.9 * (c["policy.thp_fault_fallback"] + c["policy.thp_fault_alloc"])
    assert c["map.2MiB.no_contiguous_extent"] > 0
    first = fragmented.series[1]
    assert first["frames"]["file"] > 0.9 * sum(first["frames"].values()), "the prelude filled memory with page cache"
    running = fragmented.series[2]
    assert running["unusable_index"]["2MiB"] > 0.9, "once the program runs, free memory is in pieces below 2MB"


def test_khugepaged_and_compaction_recover_2mb_pages_over_time(fragmented):
    c = fragmented.counters
    assert c["collapse.succeed"] > 100
    assert c["compact.pages_migrated"] > 0
    huge = [s["resident"]["2MiB"] for s in fragmented.series]
    assert huge[0] == 0
    assert huge[-1] > 0.3 * (4 << 30), "a large share of the 4GiB table ends in 2MB pages"
    # The recovery is gradual: the 2MB share grows through the run, sample by sample.
    rises = sum(1 for a, b in zip(huge, huge[1:]) if b > a)
    assert rises >= len(huge) // 2
    # Every collapse failure has a counted reason.
    scans = sum(v for k, v in c.items() if k.startswith("collapse."))
    assert scans == sum(c[f"policy.khugepaged.scan.{k.split('.', 1)[1]}"] for k in c if k.startswith("collapse."))


def test_frames_are_conserved_in_every_sample(fragmented):
    total = fragmented["frames.total"]
    for s in fragmented.series:
        assert sum(s["frames"].values()) == total
        assert 0.0 <= s["contiguity"] <= 1.0


def test_scenario_results_are_deterministic(tmp_path):
    sc = tmp_path / "s.toml"
    sc.write_text('memory = "1GiB"\nseed = 5\n[[prelude]]\nkind = "webserver"\nfiles = 2000\nrequests = 5000\n'
                  '[[prelude]]\nkind = "wired"\ncount = 300\n[[process]]\ngen = "zipf"\nsize = "256MiB"\naccesses = "300K"\n'
                  '[[process]]\ngen = "gups"\nsize = "128MiB"\naccesses = "300K"\nstart = "1ms"\n')
    a = sp.simulate(scenario=str(sc), policy="linux-thp:defrag=always", progress=False, validate=True)
    b = sp.simulate(scenario=str(sc), policy="linux-thp:defrag=always", progress=False)
    assert a.to_json() == b.to_json()
    assert a["os.exits"] == 2, "both processes ran to their exit"
    assert a["frames.wired"] == 300


BAD = [
    ('memory = "8 gigs"\n[[process]]\ngen = "gups"\n', "memory", 1),
    ('memory = "1GiB"\n[[process]]\ngen = "gups"\nsize = "1GiB"\nwarp = 9\n', "process[0].warp", 5),
    ('memory = "1GiB"\n\n[[prelude]]\nkind = "trident"\nreads = "lots"\n[[process]]\ngen = "gups"\n', "prelude[0].reads", 5),
    ('memory = "1GiB"\n[[prelude]]\nkind = "earthquake"\n[[process]]\ngen = "gups"\n', "prelude[0].kind", 3),
    ('memory = "1GiB"\ncolour = "blue"\n', "colour", 2),
    ('memory = "1GiB"\n[[process]]\ntrace = "nowhere.spt"\n', "process[0].trace", 3),
    ('memory = 1GiB\n', "memory", 1),
]


@pytest.mark.parametrize("text,key,line", BAD)
def test_bad_scenarios_name_file_line_and_key(cli, tmp_path, text, key, line):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    code, out, err = cli("simulate", "--scenario", f)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert str(f) in lines[0] and f"key '{key}'" in lines[0] and f"line {line}" in lines[0], lines[0]


def test_segfault_in_a_scenario_is_a_result_not_a_crash(tmp_path):
    t = tmp_path / "t.txt"
    t.write_text("# superpager text trace v1\nctx 1 1\nmmap 0x10000000 0x10000 rw- private|anonymous -1 0x0\n"
                 "S 0x10000000 8\nL 0x50000000 8\nL 0x10000000 8\n")
    sp.trace_import(str(t), "text", str(tmp_path / "t.spt"), progress=False)
    sc = tmp_path / "s.toml"
    sc.write_text('memory = "256MiB"\n[[process]]\ntrace = "t.spt"\n')
    r = sp.simulate(scenario=str(sc), policy="linux-thp", progress=False)
    assert r["os.segv"] == 1
    assert "SIGSEGV at 0x50000000" in r.killed["1"]
    assert r["os.accesses_dropped"] == 2
