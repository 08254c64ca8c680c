"""Capture (docs/CAPTURE.md): a probe program touches a known set of pages in a known order;
its trace must hold exactly those accesses in its own mapping, its VMAs must match the maps it
read at a marked point, and its footprint must match mincore(). Real programs (gzip, bzip2)
must simulate end to end; bad commands, crashes, kills and a full disk must end cleanly.
Skips (with the reason) where qemu-user or a C compiler is missing; make setup installs both."""
import os
import shutil
import subprocess

import pytest

import superpager as sp
from superpager import _core
from superpager import capture as cap
from superpager import workloads as W

HERE = os.path.dirname(__file__)
need_qemu = pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-user is not installed (make setup installs it)")
need_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
PAGES, TOUCHED = 64, 48


def records(path):
    """All records of a trace as text lines (small traces only)."""
    d = _core.TraceDumper(path, True)
    out = []
    while True:
        chunk = d.lines(100_000)
        if not chunk:
            return out
        out += chunk


def collapse(accesses):
    """The .spt run collapse: consecutive accesses to one 4KiB page are one record (kind M when
    it both loads and stores), keeping the first offset."""
    out = []
    for k, off in accesses:
        if out and out[-1][1] // 4096 == off // 4096:
            k0, o0, n0 = out[-1]
            out[-1] = (k0 if k0 == k else "M", o0, n0 + 1)
        else:
            out.append((k, off, 1))
    return out


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    d = tmp_path_factory.mktemp("probe")
    exe = d / "capture_probe"
    subprocess.run(["cc", "-O2", "-pthread", "-o", str(exe), os.path.join(HERE, "programs", "capture_probe.c")], check=True)
    return d, exe


@need_qemu
@need_cc
def test_probe_accesses_vmas_and_footprint_match(probe):
    d, exe = probe
    maps = d / "maps.txt"
    out = str(d / "probe.spt")
    with open(d / "stdout.txt", "w") as so:
        r = cap.capture([str(exe), str(maps)], out, stdout=so)
    assert r.status == 0 and not r.truncated
    lines = records(out)
    # The probe's own mapping: the only 64-page anonymous mmap.
    region = [l for l in lines if l.startswith("mmap ") and l.split()[2] == hex(PAGES * 4096)]
    assert len(region) == 1, region
    base = int(region[0].split()[1], 16)
    inside = [l.split() for l in lines if l[:2] in ("L ", "S ", "M ") and base <= int(l.split()[1], 16) < base + PAGES * 4096]
    stores = [("S", (i * 37) % PAGES * 4096 + 8 * i) for i in range(TOUCHED)]
    expected = collapse(stores + [("L", off) for _, off in reversed(stores)])
    got = [(f[0], int(f[1], 16) - base, int(f[3][1:]) if len(f) > 3 else 1) for f in inside]
    assert got == expected
    assert all(f[2] == "8" for f in inside), "8-byte accesses"
    # Footprint: the pages touched in the trace are the pages mincore() found resident.
    pages = {(int(f[1], 16) - base) // 4096 for f in inside}
    assert pages == {(i * 37) % PAGES for i in range(TOUCHED)}
    # VMAs: replay the trace's address-space events up to the marker, page by page.
    vm = {}
    brk0 = None
    for l in lines:
        f = l.split()
        if f[0] == "madvise" and int(f[1], 16) == base and f[3] == "0":
            break  # the marker
        if f[0] in ("mmap", "munmap", "mprotect"):
            a, n = int(f[1], 16), int(f[2], 16)
            pages_ = range(a >> 12, (a + n + 4095) >> 12)
            for p in pages_:
                if f[0] == "munmap":
                    vm.pop(p, None)
                else:
                    vm[p] = f[3][:2]
        elif f[0] == "brk":
            b = int(f[1], 16)
            brk0 = brk0 or b
            for p in range(brk0 >> 12, (b + 4095) >> 12):
                vm[p] = "rw"
    real = {}
    for line in maps.read_text().splitlines():
        f = line.split()
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        if lo >= 0xffff800000000000:
            continue  # [vsyscall]: not the program's
        for p in range(lo >> 12, hi >> 12):
            real[p] = f[1][:2]
    missing = sorted(set(real) - set(vm))
    extra = sorted(set(vm) - set(real))
    wrong = sorted(p for p in set(vm) & set(real) if vm[p] != real[p])
    assert len(real) > 100 and not missing and not extra and not wrong, (missing[:5], extra[:5], wrong[:5])
    # Footprint as the kernel saw it.
    assert f"resident {TOUCHED}" in (d / "stdout.txt").read_text()


@need_qemu
@need_cc
def test_fork_and_threads_are_followed(probe):
    d, exe = probe
    out = str(d / "fork.spt")
    with open(d / "stdout2.txt", "w") as so:
        r = cap.capture([str(exe), str(d / "maps2.txt"), "fork"], out, stdout=so)
    assert r.status == 0 and not r.truncated
    assert r.processes == 2 and r.threads >= 3
    lines = records(out)
    fork_at = lines.index("fork 2")
    first_child = next(i for i, l in enumerate(lines) if l.startswith("ctx 2 "))
    assert fork_at < first_child, "the child's records come after the fork that made it"
    # The child's 5-page mapping and its 5 stores belong to process 2; the thread's 3 stores to
    # process 1 under a thread id of its own.
    pid, tid = 1, 1
    child_region = thread_region = None
    child_stores = thread_stores = 0
    for l in lines[fork_at:]:
        f = l.split()
        if f[0] == "ctx":
            pid, tid = int(f[1]), int(f[2])
        elif f[0] == "mmap" and f[2] == hex(5 * 4096):
            assert pid == 2
            child_region = int(f[1], 16)
        elif f[0] == "mmap" and f[2] == hex(3 * 4096):
            assert pid == 1 and tid != 1
            thread_region = int(f[1], 16)
        elif f[0] == "S" and child_region and pid == 2 and 0 <= int(f[1], 16) - child_region < 5 * 4096:
            child_stores += 1
        elif f[0] == "S" and thread_region and pid == 1 and 0 <= int(f[1], 16) - thread_region < 3 * 4096:
            thread_stores += 1
    assert (child_stores, thread_stores) == (5, 3)
    res = sp.simulate(out, machine="skylake", policy="base")
    assert res.killed == {} and res["accesses"] == r.accesses


@need_qemu
@pytest.mark.parametrize("name", ["gzip", "bzip2"])
def test_real_programs_simulate_end_to_end(tmp_path, name):
    w = W.get(name)
    if W.available(w):
        pytest.skip(W.available(w))
    out = str(tmp_path / f"{name}.spt")
    r = W.capture(name, out=out, size="1MiB")
    assert r.status == 0 and not r.truncated and r.accesses > 1_000_000
    info = _core.trace_info(out, ["4KiB"], False)
    assert dict(info["events"]).get("open", 0) >= 1 and dict(info["events"]).get("read", 0) >= 1, "it read its input file"
    for policy in ["base", "linux-thp"]:
        res = sp.simulate(out, machine="skylake", policy=policy)
        assert res.killed == {}, (policy, res.killed)
        assert res["accesses"] == r.accesses
        assert res["faults"] > 100


@need_qemu
def test_missing_command_is_one_clear_line(cli):
    code, out, err = cli("capture", "--", "no-such-program-xyz")
    assert code == 127
    assert err.strip() == "superpager: error: capture: 'no-such-program-xyz': command not found"


@need_qemu
@need_cc
@pytest.mark.parametrize("how,status,signame", [("segv", 139, "SIGSEGV"), ("kill", 137, "SIGKILL")])
def test_crashing_and_killed_programs_leave_a_readable_truncated_trace(tmp_path, cli, how, status, signame):
    src = tmp_path / "crash.c"
    src.write_text("#include <signal.h>\n#include <stdlib.h>\n#include <string.h>\n#include <unistd.h>\n"
                   "int main(int c, char **v) { char *p = malloc(64 << 20); memset(p, 1, 64 << 20);\n"
                   "  if (v[1][0] == 'k') kill(getpid(), SIGKILL);\n  *(volatile int *)16 = 1; return 0; }\n")
    subprocess.run(["cc", "-O2", "-o", str(tmp_path / "crash"), str(src)], check=True)
    code, out, err = cli("capture", "-o", "crash.spt", "--", str(tmp_path / "crash"), how)
    assert code == status
    msg = [l for l in err.splitlines() if l.startswith("superpager:")]
    assert len(msg) == 1 and f"killed by signal {status - 128} ({signame})" in msg[0] and "truncated" in msg[0]
    meta = _core.trace_info(str(tmp_path / "crash.spt"), ["4KiB"], False)
    assert meta["truncated"] and meta["accesses"] > 1_000_000, "most of the 64MiB memset is in the trace (the last packet is lost)"
    res = sp.simulate(str(tmp_path / "crash.spt"), machine="skylake", policy="base")
    assert res["accesses"] == meta["accesses"]


@need_qemu
@need_cc
def test_full_disk_stops_the_program_and_keeps_a_truncated_trace(tmp_path, cli):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount tmpfs here")
    try:
        exe = W.build("gups")
        code, out, err = cli("capture", "-o", str(mnt / "g.spt"), "--", str(exe), "64", "8")
        assert code == 1
        msg = [l for l in err.splitlines() if l.startswith("superpager:")]
        assert len(msg) == 1 and "No space left on device" in msg[0] and "truncated" in msg[0], err
        meta = _core.trace_info(str(mnt / "g.spt"), ["4KiB"], False)
        assert meta["truncated"] and meta["accesses"] > 0
    finally:
        subprocess.run(["umount", str(mnt)])


@need_cc
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed (make setup installs it)")
def test_lackey_fallback(probe, tmp_path):
    d, exe = probe
    out = str(tmp_path / "lackey.spt")
    with open(tmp_path / "so.txt", "w") as so:
        r = cap.capture([str(exe), str(tmp_path / "m.txt")], out, lackey=True, stdout=so)
    assert r.status == 0 and r.recorder == "valgrind lackey" and r.accesses > 10_000
    assert sp.simulate(out, machine="skylake", policy="base")["accesses"] == r.accesses


@need_qemu
@need_cc
def test_workloads_list_and_capture(cli, tmp_path):
    code, out, _ = cli("workloads", "list")
    assert code == 0
    for n in ["gups", "btree", "rbtree", "transpose", "hashjoin", "pagerank", "stream", "partition", "webserver",
              "compile", "fft", "gzip", "bzip2", "sqlite3", "python3"]:
        assert f"\n{n} " in "\n" + out
    code, out, err = cli("workloads", "capture", "webserver", "--size", "1MiB")
    assert code == 0, err
    info = _core.trace_info(str(tmp_path / "webserver.spt"), ["4KiB"], False)
    assert dict(info["events"]).get("read", 0) > 100 and dict(info["events"]).get("open", 0) > 100
    code, _, err = cli("workloads", "capture", "nonesuch")
    assert code == 2 and "unknown workload 'nonesuch'" in err


@need_qemu
def test_exec_is_reported_not_silently_dropped(tmp_path):
    if not os.path.exists("/bin/sh") or not os.path.exists("/bin/true"):
        pytest.skip("no /bin/sh or /bin/true")
    out = str(tmp_path / "sh.spt")
    r = cap.capture(["/bin/sh", "-c", "/bin/true; echo hi"], out, stdout=subprocess.DEVNULL)
    assert r.status == 0 and r.processes == 2 and not r.truncated
    assert [e["end"] for e in r.endings] == ["exit", "exec"] and r.endings[1]["program"] == "/bin/true"
    assert any("execve(/bin/true)" in n and "not in the trace" in n for n in r.notes)
    # The exec'd process ends in the trace (an exit), so a simulation releases its memory.
    lines = records(out)
    assert lines[-2:] == ["ctx 2 2", "exit 0"]
