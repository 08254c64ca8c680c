"""`superpager capture --from-mark` (docs/CAPTURE.md, "From the mark"): from the mark on, every
record exactly as a full capture has it, with the instructions split at the mark the same way;
before it, every page the build touched near an address-space event is touched before that event,
and at the mark every resident page once, in address order."""
import os
import shutil
import subprocess

import pytest
from test_capture import HERE, need_cc, need_qemu, records

import superpager as sp
from superpager import capture as cap

PAGES, TOUCHED = 64, 48


def split_at_mark(lines):
    """(records before the first zero-length madvise, it and the records after)."""
    i = next(k for k, l in enumerate(lines) if l.startswith("madvise ") and l.split()[2] == "0x0")
    return lines[:i], lines[i:]


def accesses(lines):
    return [l.split() for l in lines if l[:2] in ("L ", "S ", "M ")]


def insns(lines):
    return sum(int(l.split()[1]) for l in lines if l.startswith("insns "))


@need_qemu
@need_cc
def test_from_mark_records_the_phase_whole_and_the_build_as_resident_pages(tmp_path):
    exe = tmp_path / "from_mark_probe"
    subprocess.run(["cc", "-O2", "-o", str(exe), os.path.join(HERE, "programs", "from_mark_probe.c")], check=True)
    lines = {}
    for from_mark in (False, True):
        out = str(tmp_path / f"probe-{from_mark}.spt")
        r = cap.capture([str(exe)], out, stdout=subprocess.DEVNULL, from_mark=from_mark)
        assert r.status == 0 and not r.truncated and not r.notes, r.notes
        assert r.phase_marks == 1
        lines[from_mark] = records(out)
    full_pre, full_post = split_at_mark(lines[False])
    mark_pre, mark_post = split_at_mark(lines[True])
    # From the mark on, nothing differs: every access, event and instruction count.
    assert mark_post == full_post
    assert len(accesses(mark_post)) >= 17
    assert insns(mark_pre) == insns(full_pre) > 0
    # Before it: the same address-space events, and before each, every page the full capture
    # touched by then in the 2MiB-aligned span around what the event changes.
    full_ev, mark_ev = events(full_pre), events(mark_pre)
    assert [e for _, e in full_ev] == [e for _, e in mark_ev]
    checked = 0
    for (fi, ev), (mi, _) in zip(full_ev, mark_ev):
        lo, hi = span(ev)
        want = {p for p in touched(full_pre[:fi]) if lo <= p << 12 < hi}
        assert want <= touched(mark_pre[:mi]), (ev, sorted(want - touched(mark_pre[:mi]))[:5])
        checked += len(want)
    assert checked >= 48  # the munmap's span holds the probe's pages, the last brk's its page
    # At the mark: the probe's region once, in address order, one store per page the build
    # wrote and did not unmap (56, 57 and 59 were).
    region = [l for l in lines[True] if l.startswith("mmap ") and l.split()[2] == hex(PAGES * 4096)]
    assert len(region) == 1, region
    base = int(region[0].split()[1], 16)
    last = mark_ev[-1][0]
    got = [(f[0], (int(f[1], 16) - base) // 4096, int(f[3][1:]) if len(f) > 3 else 1)
           for f in accesses(mark_pre[last:]) if base <= int(f[1], 16) < base + PAGES * 4096]
    kept = sorted({(i * 37) % PAGES for i in range(TOUCHED)} - {56, 57, 59})
    assert got == [("S", p, 1) for p in kept]
    assert len(accesses(full_pre)) > 5 * len(accesses(mark_pre))
    # Simulated with 2MiB pages, both traces fault the same 2MiB pages, demote the same, and
    # the phases fault alike; nothing touches memory outside the program's mappings.
    runs = [sp.simulate(str(tmp_path / f"probe-{m}.spt"), machine="host+nocache", policy="fixed:2MiB",
                        memory="1GiB", progress=False) for m in (False, True)]
    for k in ("faults.2MiB", "demote.demoted", "os.segv"):
        assert runs[0].counters.get(k) == runs[1].counters.get(k), k
    assert runs[1].counters.get("os.segv", 0) == 0 and runs[1].counters["faults.2MiB"] > 0
    assert runs[0].phase["faults"] == runs[1].phase["faults"]


ADDRESS_SPACE = ("mmap", "munmap", "mprotect", "madvise", "brk", "mremap")


def events(lines):
    """(index, line) of each address-space event, with the break before each brk folded in."""
    out, brk = [], None
    for i, line in enumerate(lines):
        f = line.split()
        if f[0] in ADDRESS_SPACE:
            out.append((i, f"{line} from {brk}" if f[0] == "brk" else line))
            if f[0] == "brk":
                brk = f[1]
    return out


def span(ev):
    """The 2MiB-aligned span around what an event changes (empty where it changes nothing)."""
    f = ev.split()
    if f[0] == "brk":
        if f[-1] == "None":
            return 0, 0
        a, b = sorted((int(f[1], 16), int(f[-1], 16)))
        lo, n = a, b - a
    elif f[0] == "mremap":
        lo, n = int(f[1], 16), max(int(f[2], 16), int(f[4], 16))
    else:
        lo, n = int(f[1], 16), int(f[2], 16)
    if n == 0:
        return 0, 0
    align = 2 << 20
    return lo // align * align, -(-(lo + n) // align) * align


def touched(lines):
    return {int(f[1], 16) >> 12 for f in accesses(lines)}


@need_qemu
def test_from_mark_without_a_mark_says_so(tmp_path):
    true = shutil.which("true")
    if true is None:
        pytest.skip("no true(1)")
    r = cap.capture([true], str(tmp_path / "true.spt"), from_mark=True)
    assert r.status == 0 and r.accesses > 0 and r.phase_marks == 0
    assert any("made no phase mark" in n for n in r.notes), r.notes


def test_from_mark_with_lackey_is_refused(tmp_path):
    with pytest.raises(cap.CaptureError, match="--from-mark works with qemu-user only"):
        cap.capture(["true"], str(tmp_path / "x.spt"), lackey=True, from_mark=True)
