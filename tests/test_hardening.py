"""Issue 18's cases, one test each: hostile or careless input gets a clear error or a bounded,
counted outcome, never a crash, a hang or lost data (docs/RELIABILITY.md lists them)."""
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import superpager as sp

HUGE = "0xfffffffffffff000"


def text_trace(tmp_path, body: str, name="t") -> str:
    """A text trace (one process) imported to .spt."""
    src = tmp_path / f"{name}.txt"
    src.write_text("ctx 1 1\n" + body.strip() + "\nexit 0\n")
    out = str(tmp_path / f"{name}.spt")
    sp.trace_import(str(src), "text", out, progress=False)
    return out


def one_line_error(err: str) -> None:
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err


# --- aborts and hangs on bad traces ------------------------------------------------------------

def test_file_mmap_at_an_offset_near_2_64_is_refused_not_allocated(tmp_path):
    t = text_trace(tmp_path, f"""
open 5 4096 /data/f
mmap 0x10000000 0x1000 r-- shared 5 {HUGE}
L 0x10000000 8
read 5 {HUGE} {HUGE}
""")
    r = sp.simulate(t, memory="256MiB", validate=True, progress=False)
    assert r["os.rejected.offset"] == 2
    # The refused mmap maps nothing: no page of the file was read (the page cache once sized an
    # array by the offset: 2^54 bytes).
    assert r["pagecache.misses"] == 0


def test_mmap_past_the_address_space_is_refused(tmp_path):
    t = text_trace(tmp_path, "mmap 0xfffffffffff00000 0x200000 rw- private|anonymous -1 0x0\nmunmap 0x1000 " + HUGE)
    r = sp.simulate(t, memory="256MiB", progress=False)
    assert r["os.rejected.range"] == 2


def test_one_read_moves_at_most_max_rw_count(tmp_path):
    # 5GB in one read(2): Linux transfers MAX_RW_COUNT (2GiB - 4KiB); the model did 5GB of pages.
    t = text_trace(tmp_path, "open 5 8000000000 /data/big\nread 5 0x0 5000000000")
    r = sp.simulate(t, memory="256MiB", progress=False)
    assert r["file.reads_clamped"] == 1
    assert r["pagecache.misses"] == 0x7FFFF000 // 4096


def test_madvise_collapse_of_the_whole_address_space_finishes(tmp_path):
    t = text_trace(tmp_path, """
mmap 0x40000000 0x400000 rw- private|anonymous -1 0x0
S 0x40000000 8
madvise 0x0 0xffffffffffffffff 25
madvise 0x0 0x7ffffffff000 25
""")
    t0 = time.monotonic()
    r = sp.simulate(t, memory="256MiB", progress=False)
    assert time.monotonic() - t0 < 30
    assert r["os.rejected.range"] == 1
    assert r["collapse.succeed"] == 1  # the one PMD inside a VMA, the rest refused uncounted-cost


@pytest.mark.parametrize("prelude,key", [
    ('kind = "webserver"\nalpha = nan', "alpha"),
    ('kind = "webserver"\nalpha = inf', "alpha"),
    ('kind = "wired"\ncount = 999999999999', "count"),
    ('kind = "trident"\nreads = "1000G"', "reads"),
    ('kind = "webserver"\nmin_size = "1MiB"\nmax_size = "4KiB"', "max_size"),
], ids=["alpha-nan", "alpha-inf", "wired-count", "trident-reads", "sizes-inverted"])
def test_scenario_preludes_that_would_hang_are_refused(cli, tmp_path, prelude, key):
    (tmp_path / "s.toml").write_text(f'memory = "256MiB"\n[[prelude]]\n{prelude}\n[[process]]\ngen = "seq"\nsize = "1MiB"\n')
    t0 = time.monotonic()
    code, _, err = cli("simulate", "--scenario", "s.toml")
    assert code == 2 and f"prelude[0].{key}" in err, err
    assert time.monotonic() - t0 < 30
    one_line_error(err)


@pytest.mark.parametrize("process,key", [('start = inf', "start"), ('start = -1', "start"), ('passes = 0', "gen"),
                                         ('alpha = nan', "alpha")], ids=["start-inf", "start-negative", "passes-0", "alpha-nan"])
def test_scenario_processes_with_nonsense_values_are_refused(cli, tmp_path, process, key):
    (tmp_path / "s.toml").write_text(f'memory = "256MiB"\n[[process]]\ngen = "zipf"\nsize = "1MiB"\n{process}\n')
    code, _, err = cli("simulate", "--scenario", "s.toml")
    assert code == 2 and key in err, err
    one_line_error(err)


def test_sample_every_1_keeps_a_bounded_series(tmp_path):
    p = str(tmp_path / "g.spt")
    sp.gen("gups", p, size="64MiB", accesses=30_000, progress=False)  # 30k records of 2 accesses
    r = sp.simulate(p, sample_every=1, progress=False)
    assert len(r.series) <= 16384 + 1
    assert r["series.decimations"] >= 1 and r["series.sample_every"] >= 2
    # Still spans the run, evenly.
    assert r.series[0]["accesses"] <= 2 and r.series[-1]["accesses"] == 60_000


def test_a_huge_provenance_length_is_refused_before_reading(cli, tmp_path):
    p = tmp_path / "h.spt"
    with open(p, "wb") as f:
        f.write(b"SPTRACE2" + struct.pack("<I", 1 << 31))
        f.truncate(3 << 30)  # sparse: 3GiB that read as zeros
    t0 = time.monotonic()
    code, _, err = cli("trace", "info", p)
    assert code == 2 and "over the format's limit" in err and "byte 8" in err, err
    assert time.monotonic() - t0 < 10


def test_negative_max_entries_is_a_usage_error(cli):
    code, _, err = cli("mrc", "x.spt", "--max-entries", "-1")
    assert code == 2 and "--max-entries" in err and "Traceback" not in err, err


# --- data loss ---------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["/dev/full", "fifo"])
def test_gen_never_replaces_a_device_or_fifo(cli, tmp_path, target):
    if target == "fifo":
        target = str(tmp_path / "fifo")
        os.mkfifo(target)
    elif not stat.S_ISCHR(os.stat(target).st_mode):
        pytest.skip(f"{target} is not a character device on this machine (an older superpager replaced it?)")
    kind = os.stat(target).st_mode
    code, _, err = cli("gen", "seq", "--size", "1MiB", "-o", target)
    assert code == 2 and "not a regular file" in err, err
    assert stat.S_IFMT(os.stat(target).st_mode) == stat.S_IFMT(kind)
    assert not os.path.exists(target + ".partial")


def test_import_onto_its_own_source_is_refused(cli, tmp_path):
    src = tmp_path / "x.txt"
    src.write_text("ctx 1 1\nL 0x1000 8\n")
    before = src.read_bytes()
    code, _, err = cli("trace", "import", src, "--from", "text", "-o", src)
    assert code == 2 and "is also the input" in err, err
    assert src.read_bytes() == before


def test_a_failed_results_write_leaves_the_old_set_whole(tmp_path):
    from superpager import output
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("old")
    (out / "counters.parquet").write_text("old")

    def boom(p):
        with open(p, "w") as f:
            f.write("partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        output.write_set(str(out), {"counters.parquet": lambda p: open(p, "w").write("new"), "results.json": boom})
    assert (out / "results.json").read_text() == "old" and (out / "counters.parquet").read_text() == "old"
    assert not [f for f in os.listdir(out) if ".tmp-" in f]


def test_a_new_results_set_removes_the_files_the_old_one_had(tmp_path):
    out = tmp_path / "out"
    r = sp.Result(machine="m", policy="p", memory="1GiB", counters={"walks": 1}, page_size_mix={}, derived={},
                  killed={}, series=[{"accesses": 1}])
    sp.write_results([r], out)
    assert (out / "series.parquet").exists()
    r.series = []
    sp.write_results([r], out)
    assert not (out / "series.parquet").exists()
    assert json.loads((out / "results.json").read_text())[0]["series"] == []


def test_two_runs_into_one_out_do_not_mix(cli, tmp_path):
    from superpager import output
    p = str(tmp_path / "g.spt")
    sp.gen("seq", p, size="1MiB", progress=False)
    with output.locked_dir(str(tmp_path / "res")):
        code, _, err = cli("simulate", p, "--out", "res")
    assert code == 2 and "another superpager run" in err, err
    assert not (tmp_path / "res" / "results.json").exists()
    cli("simulate", p, "--out", "res", check=True)
    assert (tmp_path / "res" / "results.json").exists()


def test_interrupted_write_leaves_nothing_half_written(tmp_path):
    from superpager import output
    p = tmp_path / "report.md"
    p.write_text("old report")

    def w(tmp):
        with open(tmp, "w") as f:
            f.write("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        output.write_file(str(p), w)
    assert p.read_text() == "old report" and os.listdir(tmp_path) == ["report.md"]


# --- nonsense accepted -------------------------------------------------------------------------

def test_gen_base_that_wraps_past_2_64_is_refused(cli):
    code, _, err = cli("gen", "seq", "--size", "64MiB", "--base", "0xfffffffffffff000", "-o", "w.spt")
    assert code == 2 and "user address space" in err, err
    code, _, err = cli("gen", "seq", "--size", "1MiB", "--passes", "0", "-o", "w.spt")
    assert code == 2 and "--passes" in err, err


@pytest.mark.parametrize("args,needle", [
    (["--machines", ""], "names no machine"),
    (["--policies", ","], "names no policy"),
    (["--policies", "base,base"], "more than once"),
])
def test_compare_lists_must_name_something(cli, tmp_path, args, needle):
    p = str(tmp_path / "g.spt")
    sp.gen("seq", p, size="1MiB", progress=False)
    code, _, err = cli("compare", p, *args)
    assert code == 2 and needle in err, err


@pytest.mark.parametrize("policy,needle", [("", "--policy is empty"), ("navarro:demote_p=0,demote_p=1", "given twice"),
                                           (":x=1", "empty policy name")])
def test_policy_specs_that_mean_nothing_are_refused(cli, tmp_path, policy, needle):
    p = str(tmp_path / "g.spt")
    sp.gen("seq", p, size="1MiB", progress=False)
    code, _, err = cli("simulate", p, "--policy", policy)
    assert code == 2 and needle in err, err


def test_cycle_costs_that_would_saturate_are_refused(cli, tmp_path):
    src = (Path(sp.__file__).parents[2] / "crates/core/src/machines/skylake.toml").read_text()
    bad = src.replace("fault_cycles = ", "fault_cycles = 1e300 #", 1)
    assert bad != src
    (tmp_path / "m.toml").write_text(bad)
    code, _, err = cli("machines", "m.toml")
    assert code == 2 and "cost.fault_cycles" in err and "implausibly large" in err, err


def test_lackey_log_without_its_exit_line_is_marked_truncated(tmp_path):
    log = "==9== Lackey\nI  04000000,3\n L 1ffefff8c0,8\n"
    (tmp_path / "cut.lackey").write_text(log)
    (tmp_path / "whole.lackey").write_text(log + "==9== \n==9== Exit code:       0\n")
    cut = sp.trace_import(str(tmp_path / "cut.lackey"), "lackey", str(tmp_path / "cut.spt"), progress=False)
    whole = sp.trace_import(str(tmp_path / "whole.lackey"), "lackey", str(tmp_path / "whole.spt"), progress=False)
    assert cut["truncated"] and not whole["truncated"]
    assert sp.trace_info(str(tmp_path / "cut.spt"))["truncated"]
    assert not sp.trace_info(str(tmp_path / "whole.spt"))["truncated"]


def test_allow_truncated_reads_a_file_whose_index_was_cut_and_says_so(cli, tmp_path):
    p = tmp_path / "g.spt"
    sp.gen("seq", str(p), size="4MiB", progress=False)
    data = p.read_bytes()
    cut = tmp_path / "cut.spt"
    cut.write_bytes(data[:-10])  # the chunks whole, the index's tail gone
    code, _, err = cli("simulate", cut)
    assert code == 2 and "allow-truncated" in err, err
    r = sp.simulate(str(cut), allow_truncated=True, progress=False)
    assert r.trace_truncated and r["accesses"] == sp.simulate(str(p), progress=False)["accesses"]
    code, out, _ = cli("simulate", cut, "--allow-truncated")
    assert code == 0 and "truncated" in out
    cli("simulate", cut, "--allow-truncated", "--out", "res", check=True)
    assert json.loads((tmp_path / "res" / "results.json").read_text())[0]["trace_truncated"] is True


# --- output never mixes with the program's -----------------------------------------------------

@pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-user is not installed (make setup installs it)")
@pytest.mark.skipif(shutil.which("gzip") is None, reason="gzip is not installed")
def test_capture_keeps_stdout_for_the_program(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(os.urandom(1 << 16) + b"x" * (1 << 16))
    with open(tmp_path / "out.gz", "wb") as out:
        p = subprocess.run([sys.executable, "-m", "superpager.cli", "capture", "-o", str(tmp_path / "gz.spt"), "--", "gzip", "-c",
                            str(f)], stdout=out, stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "wrote" in p.stderr
    assert subprocess.run(["gunzip", "-t", str(tmp_path / "out.gz")]).returncode == 0


# --- newcomer friction -------------------------------------------------------------------------

def test_python_api_takes_pathlib_paths(tmp_path):
    p = tmp_path / "g.spt"
    sp.gen("gups", p, size="1MiB", accesses=1000, progress=False)
    r = sp.simulate(p, policy="fixed:2MiB", progress=False)
    assert r["accesses"] == 2000
    assert sp.trace_info(p)["accesses"] == 2000
    assert sp.compare(p, ["skylake"], ["base"], progress=False)[0]["accesses"] == 2000
    assert sp.mrc(p, max_entries=8, progress=False)["accesses"] == 2000
    sp.write_results([r], tmp_path / "res")
    assert (tmp_path / "res" / "results.json").exists()


def test_gups_says_its_accesses_are_twice_its_updates(cli):
    code, out, _ = cli("gen", "gups", "--size", "1MiB", "--accesses", "4k", "-o", "g.spt")
    assert code == 0 and "8.00k accesses (4.00k updates, each a load and a store)" in out, out
    _, help_text, _ = cli("gen", "--help")
    assert "--accesses 4M gives 8M accesses" in " ".join(help_text.split())


def test_summary_shows_every_cycle_part_and_the_policy_parameters(cli, tmp_path):
    p = str(tmp_path / "g.spt")
    sp.gen("seq", p, size="4MiB", progress=False)
    code, out, _ = cli("simulate", p, "--machine", "romer95", "--policy", "romer:online,threshold=8")
    assert code == 0
    r = sp.simulate(p, machine="romer95", policy="romer:online,threshold=8", progress=False)
    assert r["cycles.bookkeeping"] > 0 and "bookkeeping" in out, out
    assert "threshold=8" in out.splitlines()[1], out
    code, out, _ = cli("simulate", p, "--policy", "linux-thp:enabled=always")
    assert "enabled=always" in out.splitlines()[1], out
    assert "MiB" in out and "MB " not in out


def test_every_verb_has_help_examples():
    from superpager.cli import build_parser

    p = build_parser()
    sub = next(a for a in p._actions if a.choices and "simulate" in a.choices)
    verbs = dict(sub.choices)
    for parent in ("trace", "workloads"):
        inner = next(a for a in verbs[parent]._actions if getattr(a, "choices", None))
        verbs.update({f"{parent} {k}": v for k, v in inner.choices.items()})
    lacking = [n for n, v in verbs.items() if "superpager " not in (v.epilog or "")]
    assert not lacking, f"no --help examples: {lacking}"


def test_the_simulate_help_scenario_example_runs(cli):
    _, help_text, _ = cli("simulate", "--help")
    line = next(l for l in help_text.splitlines() if "--scenario trident-fragmented" in l)
    assert os.path.exists(sp.api.scenario_path(line.split("--scenario")[1].split()[0]))


def test_bench_leaves_no_traces_behind(monkeypatch, tmp_path):
    import tempfile

    from superpager import cli as C

    seen = {}

    def fake(a):
        seen["dir"] = a.workdir
        Path(a.workdir, "bench-gups.spt").write_bytes(b"x" * 1000)
        return 0

    monkeypatch.setattr(C, "_bench", fake)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    C.main(["bench", "--accesses", "1k"])
    assert seen["dir"].startswith(str(tmp_path)) and not os.path.exists(seen["dir"])


def test_cache_clean_removes_the_cache(cli, tmp_path, monkeypatch):
    env_home = tmp_path / "xdg"
    (env_home / "superpager" / "traces").mkdir(parents=True)
    (env_home / "superpager" / "traces" / "t.spt").write_bytes(b"x" * 4096)
    env = dict(os.environ, XDG_CACHE_HOME=str(env_home))
    run = lambda *a: subprocess.run([sys.executable, "-m", "superpager.cli", "cache", *a], capture_output=True, text=True, env=env)
    shown = run()
    assert shown.returncode == 0 and "4.00KiB" in shown.stdout, shown.stdout
    assert run("clean").returncode == 0
    assert not (env_home / "superpager" / "traces").exists()


def test_readme_says_to_activate_the_venv_before_its_commands():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    using = readme[readme.index("## Using it"):]
    assert using.index(". .venv/bin/activate") < using.index("superpager gen")
    # Its bench examples write a scratch file, not the tracked report.
    assert "bench --out docs/" not in readme


def test_reproduce_quick_help_gives_the_measured_time(cli):
    _, out, _ = cli("reproduce", "--help")
    text = " ".join(out.split())
    assert "a minute or two" not in text and "about 4" in text
