"""linux-thp against this machine's kernel: a real program (tests/programs/thp_probe.c) maps and
touches memory with and without MADV_HUGEPAGE and records its own trace; the kernel's share of
that memory in 2MB pages (AnonHugePages in /proc/PID/smaps) and linux-thp's share on the trace,
with the kernel's own THP settings, must agree within 10 percentage points."""
import os
import re
import shutil
import subprocess

import pytest

import superpager as sp

HERE = os.path.dirname(__file__)
THP = "/sys/kernel/mm/transparent_hugepage"
REGION_LO, REGION_HI = 0x200000000000, 0x200400000000


def thp_setting(name: str) -> str | None:
    try:
        with open(os.path.join(THP, name)) as f:
            m = re.search(r"\[([^\]]+)\]", f.read())
            return m.group(1) if m else None
    except OSError:
        return None


def smaps_share(pid: int) -> tuple[int, int]:
    """(AnonHugePages, Rss) in KiB over the probe's regions."""
    huge = rss = 0
    inside = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) ", line)
            if m:
                inside = REGION_LO <= int(m.group(1), 16) < REGION_HI
            elif inside and line.startswith("AnonHugePages:"):
                huge += int(line.split()[1])
            elif inside and line.startswith("Rss:"):
                rss += int(line.split()[1])
    return huge, rss


def test_linux_thp_agrees_with_the_kernel(tmp_path):
    enabled, defrag = thp_setting("enabled"), thp_setting("defrag")
    if enabled is None or defrag is None:
        pytest.skip(f"no transparent huge pages on this machine ({THP} missing)")
    if enabled == "never":
        pytest.skip("THP is disabled on this machine (enabled=never)")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (scripts/setup.sh installs build-essential)")
    exe = tmp_path / "thp_probe"
    subprocess.run([cc, "-O2", "-o", str(exe), os.path.join(HERE, "programs", "thp_probe.c")], check=True)
    trace_txt = tmp_path / "probe.txt"
    p = subprocess.Popen([str(exe), str(trace_txt)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().strip()
        if line != "ready":
            err = p.stderr.read()
            pytest.skip(f"the probe could not map its regions here: {err.strip() or p.poll()}")
        huge_kib, rss_kib = smaps_share(p.pid)
    finally:
        p.kill()
        p.wait()
    assert rss_kib > 100 * 1024, "the probe touched about 126MiB"
    kernel = huge_kib / rss_kib
    spt = tmp_path / "probe.spt"
    sp.trace_import(str(trace_txt), "text", str(spt), progress=False)
    r = sp.simulate(str(spt), policy=f"linux-thp:enabled={enabled},defrag={defrag}", progress=False)
    sim = r.page_size_mix["2MiB"]
    assert r["footprint.bytes"] == rss_kib * 1024, "same resident memory in the model and the kernel"
    print(f"kernel AnonHugePages {huge_kib} KiB of {rss_kib} KiB = {kernel:.4f}; linux-thp {sim:.4f} "
          f"(enabled={enabled}, defrag={defrag})")
    assert abs(sim - kernel) <= 0.10, (sim, kernel)
