"""The live face on this machine's kernel: inspect against the kernel's own accounting and
pagemap, navarro-live and the shim on real processes, and the safety rules (contents unchanged,
the target exiting or exec'ing, every sysfs value restored on Ctrl-C, on the target's death and
after superpager itself is killed, attach refused without ptrace rights). Tests that need root,
THP or a C compiler skip with the reason."""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import superpager.live as live
from superpager.live import damon as dm
from superpager.live.policies import parse_policy
from superpager.live.sysfs import SysfsChanges, read_setting, restore_stale

HERE = Path(__file__).parent
THP = "/sys/kernel/mm/transparent_hugepage"
MTHP64 = f"{THP}/hugepages-64kB"
CLI = [sys.executable, "-m", "superpager.cli"]
MB = 1 << 20


def thp_mode():
    try:
        return read_setting(f"{THP}/enabled")
    except OSError:
        return None


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root: pagemap frames, kpageflags and MADV_COLLAPSE on another process")


def need_thp():
    m = thp_mode()
    if m is None:
        pytest.skip(f"no transparent huge pages on this machine ({THP} missing)")
    if m == "never":
        pytest.skip("THP is disabled here (enabled=never)")


def cc():
    c = shutil.which("cc") or shutil.which("gcc")
    if not c:
        pytest.skip("no C compiler (make setup installs build-essential)")
    return c


@pytest.fixture(scope="module")
def layout_exe(tmp_path_factory):
    exe = tmp_path_factory.mktemp("live") / "live_layout"
    subprocess.run([cc(), "-O2", "-o", str(exe), str(HERE / "programs" / "live_layout.c")], check=True)
    return str(exe)


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """Restore records of these tests live in their own directory."""
    monkeypatch.setenv("SUPERPAGER_STATE", str(tmp_path / "state"))


class Layout:
    """The live_layout program, running; regions by name -> (address, bytes)."""

    def __init__(self, exe, e_mib=8):
        self.p = subprocess.Popen([exe, str(e_mib)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.regions = {}
        for line in self.p.stdout:
            if line.strip() == "ready":
                break
            name, addr, n = line.split()
            self.regions[name] = (int(addr, 16), int(n))
        else:
            raise RuntimeError("live_layout did not start")

    @property
    def pid(self):
        return self.p.pid

    def say(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()

    def check(self):
        self.say("check")
        return self.p.stdout.readline().strip()

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def vma_of(report, addr):
    return next(v for v in report["vmas"] if v["start"] <= addr < v["end"])


def smaps_field(pid, addr, key):
    inside = False
    for line in open(f"/proc/{pid}/smaps"):
        first = line.split()[0]
        if "-" in first and ":" not in first:
            a, b = (int(x, 16) for x in first.split("-"))
            inside = a <= addr < b
        elif inside and line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return None


def test_inspect_matches_the_kernel_on_a_known_layout(layout_exe):
    need_root()
    need_thp()
    if not os.path.exists(MTHP64):
        pytest.skip("this kernel has no 64kB mTHP size")
    with SysfsChanges("test") as ch:
        ch.set(f"{MTHP64}/enabled", "madvise")
        before = int(Path(f"{MTHP64}/stats/nr_anon").read_text()) if os.path.exists(f"{MTHP64}/stats/nr_anon") else None
        lay = Layout(layout_exe)
        try:
            r = live.inspect(lay.pid, bloat_samples=16)
            after = int(Path(f"{MTHP64}/stats/nr_anon").read_text()) if before is not None else None
            kernel_huge = sum(smaps_field(lay.pid, a, "AnonHugePages") for a, _ in lay.regions.values())
        finally:
            lay.close()
    assert r["pfns_visible"] and r["flags_visible"]
    t = r["total"]
    # The mix: 2MB pages are A and C (48MiB), as the kernel's AnonHugePages says.
    assert t["by_size"]["2MiB"] == 48 * MB == t["kernel_anon_huge"] == kernel_huge
    assert sum(t["by_size"].values()) == t["present"]
    a, c, d, b = (vma_of(r, lay.regions[k][0]) for k in "ACDB")
    assert a["usage"]["by_size"] == {"2MiB": 32 * MB}
    assert b["usage"]["by_size"] == {"4KiB": 32 * MB}
    # D: sixteen 64KB folios, as the kernel's mTHP counter of 64KB anonymous folios saw them made.
    assert d["usage"]["folios"].get("64KiB") == 1 * MB
    if before is not None:
        assert after - before == 16, (before, after)
    # Bloat: C's huge pages are zeros but for one byte each; A's hold no zero piece.
    assert c["usage"]["bloat"]["estimate_bytes"] >= 14 * MB
    assert a["usage"]["bloat"]["pieces_zero"] == 0
    assert a["usage"]["contiguity"]["pmd_huge"] == 16 and b["usage"]["contiguity"]["pmd_huge"] == 0
    e = vma_of(r, lay.regions["E"][0])
    assert e["usage"]["contiguity"]["pmd_collapsible"] == 4
    assert b["usage"]["contiguity"]["pmd_collapsible"] == 0, "MADV_NOHUGEPAGE ranges are not collapsible"


def test_contiguity_map_agrees_with_pagemap(layout_exe):
    need_root()
    lay = Layout(layout_exe)
    try:
        r = live.inspect(lay.pid, bloat_samples=0)
        cells = {c["start"]: c for c in r["cells"]}
        with open(f"/proc/{lay.pid}/pagemap", "rb") as f:
            for name in "BE":
                addr, n = lay.regions[name]
                for block in range(addr, addr + n, 2 * MB):
                    f.seek(block // 4096 * 8)
                    entries = struct.unpack("512Q", f.read(512 * 8))
                    pfns = [e & ((1 << 55) - 1) if e >> 63 else None for e in entries]
                    votes = {}
                    for i, p in enumerate(pfns):
                        if p is not None and p >= i and (p - i) % 512 == 0:
                            votes[p - i] = votes.get(p - i, 0) + 1
                    c = cells[block]
                    assert c["present_pages"] == sum(p is not None for p in pfns) == 512
                    assert c["in_place_pages"] == max(votes.values(), default=0), (name, hex(block))
                    assert c["size"] == "4KiB"
        for block in range(lay.regions["A"][0], sum(lay.regions["A"]), 2 * MB):
            assert cells[block]["size"] == "2MiB" and cells[block]["in_place_pages"] == 512
    finally:
        lay.close()


def test_inspect_a_running_python(tmp_path):
    code = "import sys, time\nx = bytearray(64 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1\nprint('ready', flush=True)\ntime.sleep(30)\n"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        r = live.inspect(p.pid)
        rollup = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in open(f"/proc/{p.pid}/smaps_rollup") if line.rstrip().endswith("kB")}
    finally:
        p.kill()
        p.wait()
    t = r["total"]
    assert sum(t["by_size"].values()) == t["present"] >= 64 * MB
    assert t["kernel_anon_huge"] == rollup["AnonHugePages"]
    if r["flags_visible"]:
        assert t["by_size"].get("2MiB", 0) == t["kernel_anon_huge"] + t["kernel_pmd_other"]
    else:
        assert any("hidden" in n or "kpageflags" in n for n in r["notes"])
    out = tmp_path / "map.html"
    live.write_html(r, str(out))
    assert "<svg" in out.read_text()


def test_inspect_cli_writes_json_html_and_png(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(8 << 20); print('ready', flush=True); time.sleep(30)"],
                         stdout=subprocess.PIPE, text=True)
    try:
        p.stdout.readline()
        r = subprocess.run(CLI + ["inspect", str(p.pid), "--json", "--html", str(tmp_path / "m.html"), "--png", str(tmp_path / "m.png")],
                           capture_output=True, text=True)
    finally:
        p.kill()
        p.wait()
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["pid"] == p.pid
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    gone = subprocess.run(CLI + ["inspect", str(p.pid)], capture_output=True, text=True)
    assert gone.returncode == 2 and f"no process {p.pid}" in gone.stderr


def test_navarro_live_collapses_full_ranges_and_keeps_contents(layout_exe):
    need_root()
    need_thp()
    lay = Layout(layout_exe, e_mib=16)
    try:
        rep = live.attach(lay.pid, "navarro-live", duration=1.5, quiet=True)
        e_addr = lay.regions["E"][0]
        e_huge = smaps_field(lay.pid, e_addr, "AnonHugePages")
        b_huge = smaps_field(lay.pid, lay.regions["B"][0], "AnonHugePages")
        assert lay.check() == "ok", "a collapse changed the program's memory"
    finally:
        lay.close()
    c = rep.counters
    assert c["collapsed"] >= 8 and e_huge == 16 * MB, (c, e_huge)
    assert b_huge == 0 and c["vma_skipped"].get("nohugepage", 0) >= 1
    assert c["already_huge"] >= 24  # A and C were huge from their first fault
    assert rep.policy_cpu_s > 0 and rep.settings_restored
    # The default budget follows the idle CPU, within its bounds (tests/test_live_budget.py).
    b = rep.budget
    assert b is not None and b["max_cpu"] == "auto" and 0.1 <= b["min"] <= b["mean"] <= b["max"] <= 1.0, b
    assert_one_decision_per_range(c)


def attached(layout_exe, spec: str, duration: float, e_mib: int = 8):
    """`spec` attached to the layout program for `duration` seconds (root and THP): its report
    and region E's AnonHugePages after it, once the program has checked every byte it wrote."""
    need_root()
    need_thp()
    lay = Layout(layout_exe, e_mib=e_mib)
    try:
        rep = live.attach(lay.pid, spec, duration=duration, quiet=True)
        e_huge = smaps_field(lay.pid, lay.regions["E"][0], "AnonHugePages")
        assert lay.check() == "ok", f"{spec} changed the program's memory"
    finally:
        lay.close()
    return rep, e_huge


def test_navarro_live_promote_at_threshold_waits_for_population(layout_exe):
    # C's ranges hold one page each: a threshold of 2 pages never collapses them (zero pages don't count).
    rep, _ = attached(layout_exe, "navarro-live:promote_at=2", 1.0)
    assert rep.counters["collapsed"] >= 4  # E
    assert sum(rep.counters["failed"].values()) == 0, rep.counters
    assert_one_decision_per_range(rep.counters)


def test_navarro_live_reserve_hands_each_collapse_a_frame_it_faulted_in(layout_exe):
    rep, e_huge = attached(layout_exe, "navarro-live:reserve=on", 1.5, e_mib=16)
    c, r = rep.counters, rep.counters["reserve"]
    assert e_huge == 16 * MB and c["collapsed"] >= 8, (c, e_huge)
    assert r["mode"] == "on"
    # Every collapse attempt was handed the frame filled for it, and each hand-over was checked.
    assert r["filled"] == r["handed_over"] == c["collapsed"] + sum(c["failed"].values()), r
    assert r["used"] + r["missed"] == r["handed_over"], r
    # The freed frame is where the collapse's allocation looks first (reserve.rs): most take it.
    assert r["used"] * 2 >= c["collapsed"], r
    assert_one_decision_per_range(c)


def test_navarro_live_reserve_off_touches_no_memory_of_its_own(layout_exe):
    rep, _ = attached(layout_exe, "navarro-live:reserve=off", 1.0)
    r = rep.counters["reserve"]
    assert rep.counters["collapsed"] >= 4 and r["mode"] == "off", rep.counters
    assert r["filled"] == r["handed_over"] == r["used"] == r["missed"] == 0, r


class _EveryFrameHot:
    """A stand-in for DAMON (taken by the platform on these machines): every physical byte equally
    hot, so damon-live's ranking lists each of the target's 2MB ranges not yet huge."""

    def __init__(self, root):
        pass

    def start(self, changes, sample_us, aggr_us, update_us):
        pass

    def hot_regions(self):
        return [(0, 1 << 46, 1)]


def test_damon_live_collapses_through_the_same_frame_reserve(layout_exe, monkeypatch):
    monkeypatch.setattr(dm, "Damon", _EveryFrameHot)
    rep, e_huge = attached(layout_exe, "damon-live:reserve=on", 1.5, e_mib=16)
    c, r = rep.counters, rep.counters["reserve"]
    assert c["rankings"] >= 1 and c["collapsed"] >= 8 and e_huge == 16 * MB, (c, e_huge)
    assert r["mode"] == "on" and r["fill_s"] > 0, r
    # As navarro-live's: one frame filled and handed over per attempt, each checked once.
    assert r["filled"] == r["handed_over"] == c["collapsed"] + sum(c["failed"].values()), (c, r)
    assert r["used"] + r["missed"] == r["handed_over"] and r["used"] * 2 >= c["collapsed"], r


def assert_one_decision_per_range(c):
    """Every 2MB range a scan visits gets exactly one counted decision (khugepaged's scan_result)."""
    decided = c["collapsed"] + c["already_huge"] + c["below_threshold"] + c["empty"] + c["deferred"] + sum(c["failed"].values())
    assert decided == c["ranges_scanned"], c


def test_navarro_live_defers_past_the_step_budget_and_collapses_later(layout_exe):
    # One collapse per scan: E's other 7 ranges wait as ready ranges and are collapsed by later scans.
    rep, e_huge = attached(layout_exe, "navarro-live:per_step=1,interval_ms=5", 1.5, e_mib=16)
    c = rep.counters
    assert e_huge == 16 * MB and c["collapsed"] >= 8, (c, e_huge)
    assert c["deferred"] >= 7 and c["steps"] >= 8, c
    assert_one_decision_per_range(c)


def test_run_thp_shim_and_base(tmp_path):
    need_thp()
    exe = tmp_path / "alloc"
    (tmp_path / "alloc.c").write_text(r'''
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Writes through a volatile pointer: the compiler may not drop stores to memory that is freed. */
static void fill(char *p, char v, size_t n) { volatile char *q = p; for (size_t i = 0; i < n; i += 512) q[i] = v; }
int main(void) {
    char *p = malloc(64 << 20); fill(p, 7, 64 << 20);
    char *q = realloc(p, 96 << 20); fill(q + (64 << 20), 9, 32 << 20);
    volatile char *v = q;
    int ok = v[0] == 7 && v[(64 << 20) - 512] == 7 && v[(96 << 20) - 512] == 9;
    volatile char *z = calloc(4 << 20, 1); ok &= z[12345] == 0;
    FILE *f = fopen("/proc/self/smaps_rollup", "r"); char l[256]; long huge = 0;
    while (fgets(l, sizeof l, f)) if (!strncmp(l, "AnonHugePages:", 14)) huge = atol(l + 14);
    printf("ok=%d huge_kb=%ld\n", ok, huge); free(q); free((void *)z); return ok ? 0 : 1; }
''')
    subprocess.run([cc(), "-O2", "-o", str(exe), str(tmp_path / "alloc.c")], check=True)
    out = {}
    for pol in ("base", "thp"):
        with open(tmp_path / f"{pol}.out", "w+") as f:
            rep = live.run([str(exe)], pol, report_dir=str(tmp_path / pol), quiet=True, stdout=f)
            f.seek(0)
            out[pol] = f.read()
        assert rep.exit_status == 0, out[pol]
        assert (tmp_path / pol / "report.json").exists() and (tmp_path / pol / "timeseries.csv").exists()
    assert "ok=1" in out["base"] and "ok=1" in out["thp"]
    assert "huge_kb=0" in out["base"], "base: PR_SET_THP_DISABLE gives no huge page"
    if thp_mode() in ("madvise", "always"):
        huge = int(out["thp"].split("huge_kb=")[1])
        assert huge >= 96 * 1024, out["thp"]
    rep = json.loads((tmp_path / "thp" / "report.json").read_text())
    assert rep["shim"]["thp_allocs"] >= 2 and rep["exit_status"] == 0


def _mthp_setting():
    if os.geteuid() != 0 or not os.path.exists(f"{MTHP64}/enabled"):
        pytest.skip("needs root and a kernel with the 64kB mTHP size (a setting to change and restore)")
    return f"{MTHP64}/enabled", "transparent_hugepage/hugepages-64kB/enabled"


def _other(value):
    return "madvise" if value != "madvise" else "never"


def _wait_for(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def test_sigint_to_run_restores_every_setting(tmp_path):
    path, key = _mthp_setting()
    old = read_setting(path)
    env = {**os.environ, "SUPERPAGER_STATE": str(tmp_path / "state")}
    p = subprocess.Popen(CLI + ["run", "--policy", "navarro-live", "--quiet", "--sysfs", f"{key}={_other(old)}", "--", "sleep", "30"],
                         env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(lambda: read_setting(path) == _other(old)), "run never applied its setting"
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert rc == 130, p.stderr.read()
    assert read_setting(path) == old
    assert not list((tmp_path / "state").glob("restore-*.json"))


def test_the_signal_handler_only_sets_a_flag(tmp_path, monkeypatch):
    # An exception raised from a handler can land just after subprocess's Popen._wait took its
    # waitpid lock and leave it held; run's clean-up then waited for ever (CI, once). The handler
    # must return normally, and Interrupted come from the session's own check.
    # The handlers the session finds are put back, whatever they were: a test run started in the
    # background by a shell without job control inherits SIGINT ignored.
    from superpager.live.run import Interrupted, _Session
    monkeypatch.setenv("SUPERPAGER_STATE", str(tmp_path / "state"))
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with _Session("test", quiet=True) as ses:
        handler = signal.getsignal(signal.SIGINT)
        assert handler not in before and signal.getsignal(signal.SIGTERM) == handler
        ses.check()
        assert handler(signal.SIGINT, None) is None
        with pytest.raises(Interrupted):
            ses.check()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_target_killed_during_collapse_restores_every_setting(layout_exe, tmp_path):
    need_thp()
    path, key = _mthp_setting()
    old = read_setting(path)
    env = {**os.environ, "SUPERPAGER_STATE": str(tmp_path / "state")}
    # A large E keeps navarro-live collapsing (per_step=1: one range per scan) when the target dies.
    p = subprocess.Popen(CLI + ["run", "--policy", "navarro-live:per_step=1,interval_ms=1", "--quiet", "--report", str(tmp_path / "r"),
                                "--sysfs", f"{key}={_other(old)}", "--", layout_exe, "512"],
                         env=env, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def target():
            kids = Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
            return int(kids[0]) if kids else None
        assert _wait_for(lambda: target() is not None)
        child = target()
        # A and C are huge from their first fault (48MiB): more than that is navarro-live's work on E.
        assert _wait_for(lambda: (smaps_total(child, "AnonHugePages") or 0) > 64 * MB, 30), "no collapse seen"
        os.kill(child, signal.SIGKILL)
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert rc == 128 + signal.SIGKILL, p.stderr.read()
    assert read_setting(path) == old
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    assert rep["exit_status"] == -signal.SIGKILL and rep["counters"]["collapsed"] >= 1 and rep["settings_restored"]


def smaps_total(pid, key):
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def test_a_crashed_superpager_is_restored_by_the_next_one(tmp_path):
    path, key = _mthp_setting()
    old = read_setting(path)
    env = {**os.environ, "SUPERPAGER_STATE": str(tmp_path / "state")}
    p = subprocess.Popen(CLI + ["run", "--policy", "base", "--quiet", "--sysfs", f"{key}={_other(old)}", "--", "sleep", "30"],
                         env=env, stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert _wait_for(lambda: read_setting(path) == _other(old))
        os.killpg(p.pid, signal.SIGKILL)  # superpager and its program, no chance to clean up
        p.wait()
        assert read_setting(path) == _other(old), "the crash left the setting changed (what restore is for)"
        assert len(list((tmp_path / "state").glob("restore-*.json"))) == 1
        r = subprocess.run(CLI + ["restore"], env=env, capture_output=True, text=True)
        assert r.returncode == 0 and "restored 1 setting" in r.stdout, r
    finally:
        restore_stale()
    assert read_setting(path) == old


def test_target_exec_mid_operation(layout_exe):
    need_root()
    need_thp()
    lay = Layout(layout_exe, e_mib=64)
    try:
        lay.say("exec")  # the address space is replaced by /bin/sleep's while navarro-live scans it
        rep = live.attach(lay.pid, "navarro-live:interval_ms=1", duration=10, quiet=True)
    finally:
        lay.close()
    assert rep.counters["steps"] >= 1 and rep.wall_s < 10, rep.counters
    assert lay.p.returncode == 0, "sleep ran to its end: the exec'd program was not disturbed"


def test_attach_refuses_a_process_it_may_not_ptrace():
    need_root()
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("setpriv (util-linux) missing")
    probe = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", "import superpager"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"user nobody cannot run this Python environment ({probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else ''})")
    target = subprocess.Popen(["sleep", "30"])
    try:
        r = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *CLI, "attach", str(target.pid), "--policy", "navarro-live"],
                           capture_output=True, text=True)
    finally:
        target.kill()
        target.wait()
    assert r.returncode == 2 and "may not ptrace" in r.stderr, r.stderr


def test_policy_specs_and_errors():
    assert parse_policy("navarro-live:promote_at=256,max_cpu=0.2").params["promote_at"] == 256
    assert parse_policy("thp").spec() == "thp"
    assert parse_policy("navarro-live").params["reserve"] == "auto"
    assert parse_policy("navarro-live:reserve=off").spec() == "navarro-live:reserve=off"
    for bad, says in [("nope", "unknown live policy"), ("navarro-live:promote_at=0", "1..512"), ("navarro-live:foo=1", "unknown parameter 'foo'"),
                      ("navarro-live:max_cpu=2", "max_cpu"), ("thp:min=big", "not an integer"),
                      ("navarro-live:reserve=yes", "reserve must be on, off or auto")]:
        with pytest.raises(ValueError, match=says):
            parse_policy(bad)
    r = subprocess.run(CLI + ["run", "--policy", "nope", "--", "true"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown live policy" in r.stderr
    r = subprocess.run(CLI + ["attach", "999999999", "--policy", "navarro-live"], capture_output=True, text=True)
    assert r.returncode == 2 and "no process" in r.stderr
    r = subprocess.run(CLI + ["run", "--policy", "base", "--", "/no/such/program"], capture_output=True, text=True)
    assert r.returncode == 2 and "command not found" in r.stderr


def test_restore_records_put_values_back(tmp_path):
    f = tmp_path / "enabled"
    f.write_text("always [madvise] never\n")
    g = tmp_path / "nr"
    g.write_text("0\n")
    ch = SysfsChanges("unit")
    ch.set(str(f), "never")
    ch.set(str(g), "3")
    rec = json.loads(next((tmp_path / "state").glob("restore-*.json")).read_text())
    assert [c["old"] for c in rec["changes"]] == ["madvise", "0"]
    assert f.read_text() == "never" and g.read_text() == "3"
    assert ch.restore() == []
    assert f.read_text() == "madvise" and g.read_text() == "0"
    assert not list((tmp_path / "state").glob("restore-*.json"))


def test_damon_driver_against_a_sysfs_shaped_tree(tmp_path):
    root = tmp_path / "admin"
    kd = root / "kdamonds"
    ctx = kd / "0" / "contexts" / "0"
    files = {kd / "nr_kdamonds": "0", kd / "0" / "state": "off", kd / "0" / "contexts" / "nr_contexts": "0",
             ctx / "avail_operations": "paddr", ctx / "operations": "vaddr",
             **{ctx / "monitoring_attrs" / "intervals" / k: "0" for k in ("sample_us", "aggr_us", "update_us")},
             ctx / "monitoring_attrs" / "nr_regions" / "min": "10", ctx / "monitoring_attrs" / "nr_regions" / "max": "1000",
             ctx / "targets" / "nr_targets": "0", ctx / "schemes" / "nr_schemes": "0", ctx / "schemes" / "0" / "action": "pageout",
             ctx / "schemes" / "0" / "access_pattern" / "nr_accesses" / "min": "0", ctx / "schemes" / "0" / "access_pattern" / "age" / "min": "0"}
    for p, v in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(v + "\n")
    for i, (s, e, n) in enumerate([(0x1000000, 0x1200000, 5), (0x4000000, 0x4400000, 1)]):
        d = ctx / "schemes" / "0" / "tried_regions" / str(i)
        d.mkdir(parents=True)
        for k, v in (("start", s), ("end", e), ("nr_accesses", n)):
            (d / k).write_text(f"{v}\n")
    d = dm.Damon(str(root))
    ch = SysfsChanges("damon-test")
    d.start(ch, 5000, 100000, 1000000)
    assert (kd / "0" / "state").read_text() == "update_schemes_tried_regions" or (kd / "0" / "state").read_text() == "on"
    assert (ctx / "operations").read_text() == "paddr" and (ctx / "schemes" / "0" / "action").read_text() == "stat"
    assert d.hot_regions() == [(0x1000000, 0x1200000, 5), (0x4000000, 0x4400000, 1)]
    ch.restore()
    assert read_setting(str(kd / "nr_kdamonds")) == "0" and read_setting(str(ctx / "operations")) == "vaddr"
    # Another agent's running kdamond: refused, untouched.
    (kd / "0" / "state").write_text("on\n")
    with pytest.raises(dm.DamonUnavailable, match="did not start"):
        dm.Damon(str(root)).check()


def test_rank_orders_ranges_by_physical_heat(layout_exe):
    need_root()
    from superpager import _core
    lay = Layout(layout_exe)
    try:
        e_addr = lay.regions["E"][0]
        with open(f"/proc/{lay.pid}/pagemap", "rb") as f:
            f.seek((e_addr + 2 * MB) // 4096 * 8)
            pfn = struct.unpack("Q", f.read(8))[0] & ((1 << 55) - 1)
        ranked = _core.live_rank(lay.pid, [(pfn * 4096, pfn * 4096 + 4096, 7)])
    finally:
        lay.close()
    assert ranked == [(e_addr + 2 * MB, 7)]


def _as_nobody():
    """setpriv's prefix that runs a command as user nobody, or skip with the reason."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to user nobody")
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("setpriv (util-linux) missing")
    pre = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run(pre + [sys.executable, "-c", "import superpager"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("user nobody cannot run this Python environment")
    return pre


def test_without_root_inspect_says_what_it_cannot_see(tmp_path):
    pre = _as_nobody()
    env = {**os.environ, "SUPERPAGER_STATE": str(tmp_path / "nobody-state"), "HOME": str(tmp_path)}
    os.chmod(tmp_path, 0o777)
    target = subprocess.Popen(pre + [sys.executable, "-c", "import time; x = bytearray(16 << 20); print('ready', flush=True); time.sleep(30)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        target.stdout.readline()
        r = subprocess.run(pre + CLI + ["inspect", str(target.pid), "--json"], capture_output=True, text=True, env=env)
    finally:
        target.kill()
        target.wait()
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert not rep["pfns_visible"] and not rep["flags_visible"]
    assert any("hidden" in n for n in rep["notes"])
    assert rep["total"]["present"] >= 16 * MB and sum(rep["total"]["by_size"].values()) == rep["total"]["present"]


def test_without_root_run_falls_back_in_one_line(tmp_path):
    pre = _as_nobody()
    env = {**os.environ, "SUPERPAGER_STATE": str(tmp_path / "nobody-state"), "HOME": str(tmp_path)}
    os.chmod(tmp_path, 0o777)
    r = subprocess.run(pre + CLI + ["run", "--policy", "navarro-live", "--quiet", "--", "true"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if "needs root" in x]
    assert len(lines) >= 1 and lines[0].startswith("superpager run: navarro-live needs root")


def test_hugetlb_1g_shim_places_a_gigabyte_on_a_1gb_page(tmp_path):
    need_root()
    if not os.path.exists("/sys/kernel/mm/hugepages/hugepages-1048576kB"):
        pytest.skip("this kernel has no 1GB hugetlb pages")
    exe = tmp_path / "big"
    (tmp_path / "big.c").write_text(r'''
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    volatile char *p = malloc(1UL << 30);
    for (size_t i = 0; i < (1UL << 30); i += 1 << 20) p[i] = 1;
    FILE *f = fopen("/proc/self/smaps_rollup", "r"); char l[256]; long h = 0;
    /* The kernel counts a private hugetlb page as Private_ or Shared_Hugetlb by its mapcount heuristics. */
    while (fgets(l, sizeof l, f)) { long v; if (sscanf(l, "Private_Hugetlb: %ld", &v) == 1 || sscanf(l, "Shared_Hugetlb: %ld", &v) == 1) h += v; }
    printf("hugetlb_kb=%ld\n", h); free((void *)p); return 0; }
''')
    subprocess.run([cc(), "-O2", "-o", str(exe), str(tmp_path / "big.c")], check=True)
    nr = "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
    before = read_setting(nr)
    with open(tmp_path / "out", "w+") as f:
        rep = live.run([str(exe)], "hugetlb-1g:reserve=1", quiet=True, stdout=f)
        f.seek(0)
        out = f.read()
    assert read_setting(nr) == before, "the reservation was given back"
    assert rep.exit_status == 0 and rep.settings_restored
    if any("reserved 0 of the 1" in n for n in rep.notes):
        assert rep.shim["hugetlb_1g_fallbacks"] >= 1 and "hugetlb_kb=0" in out
        pytest.skip("physical memory too fragmented for a 1GB page right now (the fall-back was checked)")
    assert rep.shim["hugetlb_1g_allocs"] == 1 and "hugetlb_kb=1048576" in out, (rep.shim, out, rep.notes)
