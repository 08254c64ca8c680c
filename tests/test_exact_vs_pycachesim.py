"""Single-size, single-structure LRU TLBs agree exactly with pycachesim set up as the same cache
with page-sized lines (every access as a load: a TLB does not care), and the one-pass
miss-ratio curve equals direct simulation."""
import array
import os
import shutil
import subprocess

import pytest

import superpager as sp
from superpager import _core

cachesim = pytest.importorskip("cachesim", reason="pycachesim is not installed (pip install pycachesim)")

GEOMETRIES = [(64, 4), (32, 32), (1536, 12), (16, 1), (256, 8)]


def pycachesim_misses(addrs, entries, ways, line=4096):
    from cachesim import Cache, CacheSimulator, MainMemory

    mem = MainMemory()
    c = Cache("L1", entries // ways, ways, line, "LRU")
    mem.load_to(c)
    mem.store_from(c)
    CacheSimulator(c, mem)
    c.backend.iterload(addrs, 1)
    return c.backend.MISS_count


def addresses(path):
    return array.array("Q", _core.read_addresses(path)).tolist()


@pytest.mark.parametrize("name", ["random", "strided", "sequential"])
def test_engine_matches_pycachesim(traces, name):
    path = traces[name]
    addrs = addresses(path)
    assert len(addrs) >= 1_000_000
    for entries, ways in GEOMETRIES:
        r = sp.simulate(path, tlb=f"{entries}:{ways}", progress=False)
        assert r["accesses"] == len(addrs)
        assert r["tlb.L1.misses"] == pycachesim_misses(addrs, entries, ways), (name, entries, ways)
        assert r["tlb.L1.hits"] + r["tlb.L1.misses"] == len(addrs)


def test_tlb_model_alone_matches_pycachesim(traces):
    raw = _core.read_addresses(traces["random"])
    addrs = array.array("Q", raw).tolist()
    for entries, ways in GEOMETRIES:
        h, m, _ = _core.tlb_only(raw, entries, ways, "4KiB")
        assert m == pycachesim_misses(addrs, entries, ways)


def test_larger_pages_match_pycachesim_with_larger_lines(traces):
    addrs = addresses(traces["strided"])
    r = sp.simulate(traces["strided"], tlb="32:32:2MiB", progress=False)
    assert r["tlb.L1.misses"] == pycachesim_misses(addrs, 32, 32, line=2 << 20)


@pytest.fixture(scope="module")
def lackey_trace(tmp_path_factory):
    if not shutil.which("valgrind"):
        pytest.skip("valgrind is not installed (apt-get install valgrind)")
    d = tmp_path_factory.mktemp("lackey")
    out = d / "true.lackey"
    with open(out, "w") as f:
        p = subprocess.run(["valgrind", "--tool=lackey", "--trace-mem=yes", "/bin/true"], stderr=f, stdout=subprocess.DEVNULL, timeout=300)
    if p.returncode != 0 or os.path.getsize(out) < 1000:
        pytest.skip("valgrind lackey did not run here")
    spt = str(d / "true.spt")
    sp.trace_import(str(out), "lackey", spt)
    return spt


def test_imported_lackey_trace_matches_pycachesim(lackey_trace):
    addrs = addresses(lackey_trace)
    assert len(addrs) > 50_000
    for entries, ways in [(64, 4), (16, 16), (8, 2)]:
        r = sp.simulate(lackey_trace, tlb=f"{entries}:{ways}", progress=False)
        assert r["tlb.L1.misses"] == pycachesim_misses(addrs, entries, ways)
        assert r["os.vmas_inferred"] > 0, "lackey traces have no address-space events"


@pytest.mark.parametrize("name", ["random", "strided"])
def test_mrc_equals_direct_simulation(traces, name):
    path = traces[name]
    curve = sp.mrc(path, "4KiB", 256)["misses"]
    for n in [1, 2, 3, 16, 64, 100, 256]:
        r = sp.simulate(path, tlb=f"{n}:{n}", progress=False)
        assert curve[n - 1] == r["tlb.L1.misses"], n


def test_mrc_is_monotone_and_cold_bounded(traces):
    m = sp.mrc(traces["random"], "4KiB", 512)
    c = m["misses"]
    assert all(a >= b for a, b in zip(c, c[1:]))
    assert c[-1] >= m["cold_misses"]
