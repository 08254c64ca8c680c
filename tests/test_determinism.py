"""The same inputs and seed give byte-identical traces and result files."""
import filecmp

import superpager as sp


def test_gen_is_byte_identical(tmp_path):
    for kind in ["gups", "zipf", "chase", "rbtree", "transpose"]:
        a, b = tmp_path / f"a-{kind}.spt", tmp_path / f"b-{kind}.spt"
        sp.gen(kind, str(a), size="8MiB", accesses=50_000, seed=11, progress=False)
        sp.gen(kind, str(b), size="8MiB", accesses=50_000, seed=11, progress=False)
        assert a.read_bytes() == b.read_bytes(), kind
    c = tmp_path / "c.spt"
    sp.gen("gups", str(c), size="8MiB", accesses=50_000, seed=12, progress=False)
    assert c.read_bytes() != (tmp_path / "a-gups.spt").read_bytes()


def test_result_files_are_byte_identical(cli, tmp_path):
    t = tmp_path / "z.spt"
    sp.gen("zipf", str(t), size="64MiB", accesses=300_000, seed=3, progress=False)
    for d in ["r1", "r2"]:
        cli("compare", t, "--machines", "skylake,zen3,romer95", "--policies", "base,fixed:2MiB", "--out", tmp_path / d,
            "--sample-every", "50000", check=True)
    for f in ["results.json", "counters.parquet", "series.parquet"]:
        assert filecmp.cmp(tmp_path / "r1" / f, tmp_path / "r2" / f, shallow=False), f


def test_wide_tlb_path_changes_no_result(tmp_path):
    """Where the CPU has AVX2, LRU sets of 4, 8, 12 and 16 ways are searched four tags at a
    time; SUPERPAGER_SCALAR_TLB=1 turns that off. Both must give the same result file."""
    import os
    import subprocess
    import sys

    t = tmp_path / "z.spt"
    sp.gen("zipf", str(t), size="64MiB", accesses=300_000, seed=5, progress=False)
    outs = []
    for scalar in [False, True]:
        env = dict(os.environ)
        env.pop("SUPERPAGER_SCALAR_TLB", None)
        if scalar:
            env["SUPERPAGER_SCALAR_TLB"] = "1"
        d = tmp_path / ("scalar" if scalar else "wide")
        subprocess.run([sys.executable, "-m", "superpager.cli", "compare", str(t), "--machines", "skylake,zen3,neoverse-n1",
                        "--policies", "base,navarro", "--out", str(d)], env=env, check=True, capture_output=True, timeout=600)
        outs.append((d / "results.json").read_bytes())
    assert outs[0] == outs[1]
