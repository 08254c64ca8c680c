"""Intermediate page sizes (docs/INTERMEDIATE.md): joined traces of many short processes, the
exec workload's 64KB file pages shared across processes on `neoverse-n1`, and 64KB demotions by
reason on `protfork`. Capture needs qemu-user and a C compiler; make setup installs both."""
import shutil

import pytest

import superpager as sp
from superpager import api
from superpager import workloads as W
from superpager.reproduce_intermediate import FREEBSD  # the thesis's system: FreeBSD

need_qemu = pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-user is not installed (make setup installs it)")
need_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


def test_join_makes_each_input_new_processes(cli, tmp_path):
    for name, seed in (("a", 1), ("b", 2)):
        cli("gen", "seq", "--size", "1MiB", "--accesses", "5000", "--seed", seed, "-o", tmp_path / f"{name}.spt", check=True)
    code, out, err = cli("trace", "join", "a.spt", "b.spt", "a.spt", "-o", "j.spt")
    assert code == 0, err
    assert "3 processes" in out
    a, j = api.trace_info(tmp_path / "a.spt"), api.trace_info(tmp_path / "j.spt")
    assert j["processes"] == [1, 2, 3]
    assert j["accesses"] == 3 * a["accesses"]
    # The joined trace simulates as three processes, one after another.
    r = sp.simulate(tmp_path / "j.spt", policy="base", machine="skylake")
    assert r["accesses"] == j["accesses"]


def test_join_refuses_bad_inputs_with_one_line(cli, tmp_path):
    cli("gen", "seq", "--size", "1MiB", "--accesses", "5000", "-o", tmp_path / "a.spt", check=True)
    (tmp_path / "bad.spt").write_bytes(b"not a trace at all")
    code, _, err = cli("trace", "join", "a.spt", "bad.spt", "-o", "j.spt")
    assert code != 0 and "bad.spt" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "j.spt").exists()
    code, _, err = cli("trace", "join", "a.spt", "-o", "a.spt")
    assert code != 0 and "a.spt" in err, err


@need_qemu
@need_cc
def test_exec_runs_share_64k_file_pages_on_neoverse(tmp_path):
    r = W.capture("exec", out=str(tmp_path / "exec.spt"), fetches=True)
    assert r.status == 0 and r.processes == W.EXEC_RUNS
    info = api.trace_info(r.path)
    assert info["accesses_by_kind"]["fetch"] > 0
    rs = api.run(r.path, [("neoverse-n1", "base"), ("neoverse-n1", f"navarro:sizes=64KiB+2MiB,{FREEBSD}")], "1GiB", 0)
    base, two = rs[0], rs[1]
    # Later runs map the C library's cached 64KB extents whole at their first fault.
    assert two["file.mapped_at_fault.64KiB"] > 0
    assert two["file.readahead_pages"] > 0
    assert two["tlb.L1i.misses"] < base["tlb.L1i.misses"]
    assert two["faults"] < base["faults"]


@need_qemu
@need_cc
def test_protfork_demotes_64k_pages_by_reason(tmp_path):
    r = W.capture("protfork", out=str(tmp_path / "pf.spt"), size="8MiB")
    assert r.status == 0 and r.processes == 5
    split, copy = api.run(r.path, [("neoverse-n1", f"navarro:sizes=64KiB+2MiB,{FREEBSD}"),
                                   ("neoverse-n1", "navarro:sizes=64KiB+2MiB,readahead=15,cow=copy")], "1GiB", 0)
    for why in ("protection", "partial_unmap", "cow", "dirty"):
        assert split[f"demote.{why}.64KiB"] > 0, why
    # Copying whole (Linux before 5.8) demotes nothing at a copy-on-write break.
    assert copy["demote.cow.64KiB"] == 0
    assert copy["demote.protection.64KiB"] == split["demote.protection.64KiB"]
