"""`capture --collapse line` and `trace import --collapse line` (docs/CAPTURE.md, "Runs"): a
thread's consecutive data accesses join into one record only while they stay in one 64-byte
line, so every line a run touches keeps a record, in the order it was first touched; with the
default (`page`) they join while they stay in one 4KiB page. The probe (programs/line_probe.c)
reads two words of 16 scattered lines in each of four pages. Skips where qemu-user or a C
compiler is missing; make setup installs both."""
import json
import os
import shutil
import subprocess

import pytest

from superpager import _core
from superpager import capture as cap

HERE = os.path.dirname(__file__)
need_qemu = pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-user is not installed (make setup installs it)")
need_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
REGION = 5 * 4096


def records(path):
    d = _core.TraceDumper(path, True)
    out = []
    while chunk := d.lines(100_000):
        out += chunk
    return out


def probe_records(path):
    """(offset in the probe's region, count) of each access record inside it."""
    lines = records(path)
    region = [l.split() for l in lines if l.startswith("mmap ") and int(l.split()[2], 16) == REGION]
    assert len(region) == 1, region
    base = int(region[0][1], 16)
    out = []
    for l in lines:
        f = l.split()
        if f[0] in ("L", "S", "M") and base <= int(f[1], 16) < base + REGION:
            assert f[0] == "L", l
            out.append((int(f[1], 16) - base, int(f[3][1:]) if len(f) > 3 else 1))
    return out


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    d = tmp_path_factory.mktemp("line")
    exe = d / "line_probe"
    subprocess.run(["cc", "-O2", "-o", str(exe), os.path.join(HERE, "programs", "line_probe.c")], check=True)
    return d, exe


def expected_lines():
    return [(p * 4096 + (7 * p + 13 * j) % 64 * 64, 2) for p in range(4) for j in range(16)]


@need_qemu
@need_cc
def test_line_collapse_keeps_every_line_of_a_run(probe):
    d, exe = probe
    out = str(d / "line.spt")
    r = cap.capture([str(exe)], out, stdout=subprocess.DEVNULL, collapse="line")
    assert r.status == 0
    assert probe_records(out) == expected_lines()
    assert json.loads(_core.TraceDumper(out).header())["collapse"] == "line"


@need_qemu
@need_cc
def test_page_collapse_joins_a_page_into_its_first_access(probe):
    d, exe = probe
    out = str(d / "page.spt")
    r = cap.capture([str(exe)], out, stdout=subprocess.DEVNULL)
    assert r.status == 0
    assert probe_records(out) == [(p * 4096 + (7 * p) % 64 * 64, 32) for p in range(4)]
    assert json.loads(_core.TraceDumper(out).header())["collapse"] == "page"


def test_an_unknown_collapse_is_one_clear_error(tmp_path):
    with pytest.raises(cap.CaptureError, match="unknown collapse 'word'; use page or line"):
        cap.capture(["true"], str(tmp_path / "x.spt"), collapse="word")


def test_text_import_collapses_by_line_page_or_not_at_all(tmp_path, cli):
    src = tmp_path / "t.txt"
    src.write_text("L 0x1000 8\nL 0x1008 8\nL 0x1040 8\nS 0x1048 8\nL 0x1010 8\nL 0x2000 8\n")
    want = {
        "line": ["L 0x1000 8 x2", "M 0x1040 8 x2", "L 0x1010 8", "L 0x2000 8"],
        "page": ["M 0x1000 8 x5", "L 0x2000 8"],
        None: ["L 0x1000 8", "L 0x1008 8", "L 0x1040 8", "S 0x1048 8", "L 0x1010 8", "L 0x2000 8"],
    }
    for how, lines in want.items():
        out = str(tmp_path / f"{how}.spt")
        args = ["--collapse", how] if how else ["--no-collapse"]
        code, _, err = cli("trace", "import", str(src), "--from", "text", "-o", out, *args)
        assert code == 0, err
        assert [l.split("#")[0].strip() for l in records(out) if l[:2] in ("L ", "S ", "M ")] == lines, how
        assert json.loads(_core.TraceDumper(out).header())["collapse"] == (how or "none")


def test_predict_notes_a_trace_collapsed_by_page_on_a_machine_with_caches(tmp_path, cli):
    src = tmp_path / "t.txt"
    src.write_text("".join(f"L {0x10000 + 64 * i:#x} 8\n" for i in range(256)))
    notes = {}
    for how in ("page", "line"):
        out = str(tmp_path / f"{how}.spt")
        assert cli("trace", "import", str(src), "--from", "text", "-o", out, "--collapse", how)[0] == 0
        for machine in ("host", "host+nocache"):
            code, _, err = cli("predict", out, "--machine", machine, "--policies", "base")
            assert code == 0, err
            notes[how, machine] = "runs were collapsed by 4KiB page" in err and "the prefetcher sees no stream" in err
    assert notes == {("page", "host"): True, ("page", "host+nocache"): False, ("line", "host"): False, ("line", "host+nocache"): False}


def test_gen_collapses_by_line_or_page_and_predicts_note_says_how_to_make_it_again(tmp_path, cli):
    """`gen --collapse line` keeps a record per line (a sequential read of 8 words a line: 8 to a
    record), `page` one per page (512 to a record); predict's note on the page trace says to
    generate it again, and on an imported one to import it again (not to capture)."""
    got = {}
    for how in ("page", "line"):
        out = str(tmp_path / f"{how}.spt")
        code, _, err = cli("gen", "seq", "--size", "64KiB", "--collapse", how, "-o", out)
        assert code == 0, err
        counts = [l.split("#")[0].split() for l in records(out) if l.startswith("L ")]
        got[how] = (len(counts), {c[3] for c in counts})
        assert json.loads(_core.TraceDumper(out).header())["collapse"] == how
    assert got == {"page": (16, {"x512"}), "line": (1024, {"x8"})}, got
    code, _, err = cli("predict", str(tmp_path / "page.spt"), "--machine", "host", "--policies", "base")
    assert code == 0 and "generate it again with --collapse line" in err, err
    src = tmp_path / "t.txt"
    src.write_text("".join(f"L {0x10000 + 8 * i:#x} 8\n" for i in range(64)))
    assert cli("trace", "import", str(src), "--from", "text", "-o", str(tmp_path / "i.spt"))[0] == 0
    code, _, err = cli("predict", str(tmp_path / "i.spt"), "--machine", "host", "--policies", "base")
    assert code == 0 and "import it again with --collapse line" in err, err
    code, _, err = cli("gen", "seq", "--size", "64KiB", "--collapse", "word", "-o", str(tmp_path / "w.spt"))
    assert code == 2 and "word" in err and not (tmp_path / "w.spt").exists(), err
