"""The CLI commands and the Python API do what their help says."""
import gzip
import json
import lzma
import struct

import pandas as pd
import pytest

import superpager as sp


@pytest.fixture
def gups(tmp_path):
    p = tmp_path / "gups.spt"
    sp.gen("gups", str(p), size="64MiB", accesses=100_000, seed=1, progress=False)
    return p


def test_simulate_json_has_the_documented_fields(cli, gups):
    rc, out, err = cli("simulate", gups, "--machine", "skylake", "--policy", "base", "--json")
    assert rc == 0, err
    r = json.loads(out)
    c = r["counters"]
    for k in ["accesses", "walks", "tlb.L1d-4K.hits", "tlb.L1d-4K.misses", "tlb.STLB.hits", "tlb.STLB.misses",
              "tlb.L1i.hits", "walk.refs", "pwc.hits", "faults", "cycles.total", "cycles.walk"]:
        assert k in c, k
    assert c["accesses"] == 200_000
    assert set(r["page_size_mix"]) == {"4KiB", "2MiB", "1GiB"}
    assert r["page_size_mix"]["4KiB"] == 1.0
    rc, out, _ = cli("simulate", gups, "--tlb", "64:4", "--json")
    c = json.loads(out)["counters"]
    assert c["tlb.L1.hits"] + c["tlb.L1.misses"] == c["accesses"]
    assert c["walks"] == c["tlb.L1.misses"]


def test_fixed_2m_maps_everything_with_2m_pages(cli, gups):
    r = json.loads(cli("simulate", gups, "--policy", "fixed:2MiB", "--json", check=True)[1])
    assert r["page_size_mix"]["2MiB"] == 1.0
    assert r["counters"]["walks"] <= 64


def test_compare_table_and_outputs(cli, gups, tmp_path):
    rc, out, err = cli("compare", gups, "--machines", "skylake,zen3", "--policies", "base,fixed:2MiB", "--out", tmp_path / "o")
    assert rc == 0, err
    assert out.count("skylake") >= 2 and out.count("zen3") >= 2 and "fixed:2MiB" in out
    df = pd.read_parquet(tmp_path / "o" / "counters.parquet")
    assert len(df) == 4 and set(df["policy"]) == {"base", "fixed:2MiB"}
    s = pd.read_parquet(tmp_path / "o" / "series.parquet")
    assert len(s) >= 4 and "resident.4KiB" in s.columns


def test_api_result_converts_to_dataframes(gups):
    r = sp.simulate(str(gups), machine="zen3", policy="base", progress=False, sample_every=20_000)
    df = r.to_pandas()
    assert df.loc[0, "accesses"] == 200_000 and df.loc[0, "machine"] == "zen3"
    s = r.series_frame()
    assert len(s) >= 10 and s["accesses"].is_monotonic_increasing
    rs = sp.compare(str(gups), ["skylake", "romer95"], ["base", "fixed:2MiB"], progress=False)
    assert len(rs.to_pandas()) == 4


def test_machines_and_policies_list(cli):
    rc, out, _ = cli("machines")
    for m in ["alpha21264", "romer95", "skylake", "zen3", "neoverse-n1", "amsqm09"]:
        assert m in out
    rc, out, _ = cli("machines", "skylake")
    assert "STLB" in out and "1536" in out
    rc, out, _ = cli("policies")
    assert "base" in out and "fixed" in out


def test_every_generator_kind(cli, tmp_path):
    for kind in ["seq", "stride", "gups", "zipf", "chase", "transpose", "rbtree"]:
        rc, out, err = cli("gen", kind, "--size", "4MiB", "--accesses", "20k", "-o", tmp_path / f"{kind}.spt")
        assert rc == 0, (kind, err)
        info = sp.trace_info(str(tmp_path / f"{kind}.spt"))
        assert info["accesses"] > 0
        r = sp.simulate(str(tmp_path / f"{kind}.spt"), progress=False)
        assert r["os.segv"] == 0, kind


def test_info_and_dump_roundtrip_through_text(cli, tmp_path, gups):
    rc, out, _ = cli("trace", "info", gups)
    assert "footprint" in out and "mmap" in out
    rc, text, _ = cli("trace", "dump", gups)
    (tmp_path / "t.txt").write_text(text)
    cli("trace", "import", tmp_path / "t.txt", "--from", "text", "-o", tmp_path / "t.spt", check=True)
    rc, text2, _ = cli("trace", "dump", tmp_path / "t.spt")
    body = lambda t: [l for l in t.splitlines() if not l.startswith("#")]
    assert body(text) == body(text2)
    rc, few, _ = cli("trace", "dump", gups, "--limit", "5")
    assert len(body(few)) == 5


def test_trace_totals_read_from_the_index_match_a_full_read(gups, tmp_path):
    from superpager import _core

    info = sp.trace_info(gups)
    records, accesses = _core.trace_totals(str(gups))
    assert accesses == info["accesses"]
    assert records >= info["records"]  # the index counts event records too
    cut = tmp_path / "cut.spt"
    cut.write_bytes(open(gups, "rb").read()[:-40])  # the index gone: no totals without reading
    assert _core.trace_totals(str(cut)) is None
    (tmp_path / "not.spt").write_bytes(b"not a trace")
    with pytest.raises(sp.SuperpagerError, match="not.spt"):
        _core.trace_totals(str(tmp_path / "not.spt"))


def champsim_record(ip, loads=(), stores=()):
    src = list(loads) + [0] * (4 - len(loads))
    dst = list(stores) + [0] * (2 - len(stores))
    return struct.pack("<QBB2s4s2Q4Q", ip, 0, 0, b"\0\0", b"\0\0\0\0", *dst, *src)


@pytest.mark.parametrize("compress", ["plain", "gz", "xz"])
def test_champsim_import(cli, tmp_path, compress):
    recs = b"".join(champsim_record(0x400000 + 4 * i, loads=[0x7f0000000000 + 64 * i], stores=[0x7f0001000000 + 8 * i] if i % 2 else [])
                    for i in range(1000))
    assert len(recs) == 64 * 1000
    p = tmp_path / f"t.champsim.{compress}"
    p.write_bytes({"plain": lambda b: b, "gz": gzip.compress, "xz": lzma.compress}[compress](recs))
    cli("trace", "import", p, "--from", "champsim", "-o", tmp_path / "c.spt", check=True)
    info = sp.trace_info(str(tmp_path / "c.spt"))
    assert info["accesses_by_kind"]["fetch"] == 1000
    assert info["accesses_by_kind"]["load"] + info["accesses_by_kind"]["modify"] >= 1000 - 500
    assert dict(info["events"])["insns"] >= 1
    assert info["accesses"] == 1000 + 1000 + 500


def test_lackey_import_text(cli, tmp_path):
    p = tmp_path / "t.lackey"
    p.write_text("==1== Lackey, an example Valgrind tool\nI  04010173,3\n L 7ff000ab8,8\n S 7ff000ab0,8\n M 0421f4d8,4\nI  04010176,3\n")
    cli("trace", "import", p, "--from", "lackey", "-o", tmp_path / "l.spt", check=True)
    k = sp.trace_info(str(tmp_path / "l.spt"))["accesses_by_kind"]
    # The load and store to one page collapse into a read-modify-write run of 2.
    assert k == {"load": 0, "store": 0, "modify": 3, "fetch": 2}


def test_reproduce_names_the_papers_it_knows(cli):
    code, _, err = cli("reproduce", "nosuch")
    assert code == 2 and "no experiments for 'nosuch'" in err and "navarro" in err


def test_navarro_is_listed_with_its_parameters(cli):
    code, out, _ = cli("policies")
    assert code == 0 and "navarro" in out and "sizes=" in out
    cli("gen", "seq", "-o", "t.spt", "--size", "1MiB", "--accesses", "1000", check=True)
    code, _, err = cli("simulate", "t.spt", "--policy", "navarro:sizes=3KiB")
    assert code == 2 and "policy navarro: sizes" in err
    code, _, err = cli("simulate", "t.spt", "--machine", "skylake", "--policy", "navarro:sizes=64KiB")
    assert code == 2 and "no 64KiB superpages" in err


def test_bench_splits_the_zipf_time_into_fixed_and_per_reference_parts():
    from superpager.bench import ZIPF, ZIPF_LONGER, fixed_and_steady

    # rows as bench builds them: (name, refs, rate, records/s, bytes, walks, spread, faults, scalar)
    def row(name, refs):
        return (name, refs, 0.0, 0.0, 0, 0, (0, 0), 1000, 0.0)

    rows = [row(ZIPF, 4_000_000), row(ZIPF_LONGER, 16_000_000)]
    # 40 ms fixed + 20 ns per reference: 120 ms and 360 ms.
    line = fixed_and_steady(rows, {ZIPF: [0.120, 0.125, 0.119], ZIPF_LONGER: [0.360]})
    assert "fixed part of 40 ms (33% of" in line and "20.0 ns per reference" in line
    # A run where the longer trace was not slower per extra reference says so instead of a split.
    odd = fixed_and_steady(rows, {ZIPF: [0.3], ZIPF_LONGER: [0.2]})
    assert "do not split" in odd
    assert fixed_and_steady(rows[:1], {}) is None


def test_nested_flag_runs_each_machine_as_a_guest(cli, gups):
    """--nested adds MACHINE+nested: the same TLB misses, each walk two-dimensional (MODEL.md)."""
    rs = json.loads(cli("compare", gups, "--policies", "base", "--nested", "--json", check=True)[1])
    by = {r["machine"]: r["counters"] for r in rs}
    native, guest = by["skylake"], by["skylake+nested"]
    assert native["walks"] == guest["walks"] > 0
    # 4KB+4KB cold walks cost up to 24 references against 4 natively (page-walk caches shorten both).
    assert guest["walk.refs"] > 3 * native["walk.refs"]
    r = json.loads(cli("simulate", gups, "--nested", "4KiB", "--policy", "fixed:1GiB", "--json", check=True)[1])
    assert r["machine"] == "skylake+nested=4KiB"
    assert "splintered into 4KiB TLB entries" in cli("machines", "skylake+nested=4KiB", check=True)[1]
    assert "splintered" not in cli("machines", "skylake+nested", check=True)[1]
    rc, _, err = cli("simulate", gups, "--machine", "skylake+nested", "--nested")
    assert rc != 0 and "already nested" in err and len(err.strip().splitlines()) == 1


def test_bloat_flag_reports_untouched_superpage_bytes(cli, gups):
    r = json.loads(cli("simulate", gups, "--policy", "fixed:1GiB", "--bloat", "--json", check=True)[1])
    c = r["counters"]
    # A 64MiB table inside one 1GB page: at least the 960MiB around it was never touched.
    assert c["bloat.1GiB"] >= (1 << 30) - (64 << 20) and c["bloat.total"] == c["bloat.1GiB"] + c["bloat.2MiB"]
    plain = json.loads(cli("simulate", gups, "--policy", "fixed:1GiB", "--json", check=True)[1])
    assert "bloat.total" not in plain["counters"]


def test_zen3_coalesces_and_nocoalesce_turns_it_off(cli, tmp_path):
    """zen3 caches aligned contiguous groups of base PTEs as 16KB/32KB entries (MODEL.md);
    zen3+nocoalesce is the same machine without. Sequential first touches in fresh memory get
    ascending frames, so nearly every resident page sits in a coalescible group."""
    p = tmp_path / "seq.spt"
    sp.gen("seq", str(p), size="8MiB", accesses=400_000, seed=1, progress=False)
    on = json.loads(cli("simulate", p, "--machine", "zen3", "--json", check=True)[1])["counters"]
    off = json.loads(cli("simulate", p, "--machine", "zen3+nocoalesce", "--json", check=True)[1])["counters"]
    assert on["coalesce.fills"] > 0 and on["coalesce.hits"] > 0
    assert on["coalesce.fills"] == on["coalesce.fills.16KiB"] + on["coalesce.fills.32KiB"]
    assert "coalesce.fills" not in off
    for c in (on, off):
        assert c["contiguity.grouped.32KiB"] > 0.9 * c["contiguity.base_pages"]
    rc, out, err = cli("machines", "zen3")
    assert rc == 0 and "amd: 16KiB, 32KiB entries from the 8 PTEs of a line" in out, out + err
    rc, _out, err = cli("simulate", p, "--machine", "skylake+nocoalesce")
    assert rc != 0 and "does not coalesce" in err and len(err.strip().splitlines()) == 1, err
