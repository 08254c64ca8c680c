"""Bad input: one line on stderr naming the file and byte offset (traces) or key (machines),
a non-zero exit status, no Python traceback and no Rust panic."""
import struct
import zlib

import pytest

import superpager as sp


def assert_clean_error(rc, out, err, *needles):
    assert rc != 0
    lines = [l for l in err.strip().splitlines() if l]
    assert len(lines) == 1, err
    assert lines[0].startswith("superpager: error: "), err
    assert "Traceback" not in err and "panicked" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def raw_zstd_frame(payload: bytes) -> bytes:
    """A zstd frame holding one raw (stored) block: enough to craft chunk payloads by hand."""
    assert len(payload) < 256
    fhd = 0x20  # single segment, 1-byte frame content size
    block = 1 | (0 << 1) | (len(payload) << 3)  # last block, raw
    return struct.pack("<IBB", 0xFD2FB528, fhd, len(payload)) + block.to_bytes(3, "little") + payload


def spt_with_chunk(payload: bytes, n_records: int, n_accesses: int) -> bytes:
    js = b"{}"
    head = b"SPTRACE1" + struct.pack("<I", len(js)) + js + struct.pack("<I", zlib.crc32(js))
    comp = raw_zstd_frame(payload)
    chunk = b"SPCK" + struct.pack("<IIIQI", len(payload), len(comp), n_records, n_accesses, zlib.crc32(comp)) + comp
    return head + chunk


@pytest.fixture
def good(tmp_path):
    p = tmp_path / "good.spt"
    sp.gen("gups", str(p), size="16MiB", accesses=20000, progress=False)
    return p


def test_truncated(cli, good, tmp_path):
    data = good.read_bytes()
    for cut in [3, 20, len(data) // 2, len(data) - 5]:
        p = tmp_path / f"cut{cut}.spt"
        p.write_bytes(data[:cut])
        rc, out, err = cli("simulate", p)
        assert_clean_error(rc, out, err, str(p.name), "byte ", "truncated")


def test_bad_magic(cli, good, tmp_path):
    p = tmp_path / "magic.spt"
    p.write_bytes(b"XPTRACE1" + good.read_bytes()[8:])
    assert_clean_error(*cli("simulate", p), "magic.spt", "byte 0", "SPTRACE1")


def test_bad_checksum(cli, good, tmp_path):
    d = bytearray(good.read_bytes())
    first_chunk = d.index(b"SPCK")
    d[first_chunk + 40] ^= 0x55
    p = tmp_path / "crc.spt"
    p.write_bytes(bytes(d))
    assert_clean_error(*cli("simulate", p), "crc.spt", f"byte {first_chunk}", "checksum")


def test_bad_varint(cli, tmp_path):
    p = tmp_path / "varint.spt"
    p.write_bytes(spt_with_chunk(bytes([0x00, 0xFF, 0xFF, 0xFF]), 1, 1))
    assert_clean_error(*cli("trace", "dump", p), "varint.spt", "byte 18", "bad varint")
    assert_clean_error(*cli("simulate", p), "varint.spt", "bad varint")


def test_bad_record_tag(cli, tmp_path):
    p = tmp_path / "tag.spt"
    p.write_bytes(spt_with_chunk(bytes([0xFE, 0x01]), 1, 0))
    assert_clean_error(*cli("trace", "info", p), "tag.spt", "unknown event tag")


def test_empty(cli, tmp_path):
    p = tmp_path / "empty.spt"
    p.write_bytes(b"")
    assert_clean_error(*cli("simulate", p), "empty.spt", "byte 0", "empty")


def test_wrong_format(cli, tmp_path):
    p = tmp_path / "trace.lackey"
    p.write_text("==1== Lackey\nI  04010173,3\n L 7ff000ab8,8\n")
    assert_clean_error(*cli("simulate", p), "trace.lackey", "byte 0", "trace import")
    p = tmp_path / "notes.txt"
    p.write_text("hello world, not a trace\n")
    assert_clean_error(*cli("trace", "info", p), "notes.txt", "byte 0")


def test_missing_file(cli, tmp_path):
    assert_clean_error(*cli("simulate", tmp_path / "nope.spt"), "nope.spt")


def test_bad_imports(cli, tmp_path):
    p = tmp_path / "bad.lackey"
    p.write_text("==1== x\n L 1000,8\n L zzzz,8\n")
    assert_clean_error(*cli("trace", "import", p, "--from", "lackey", "-o", tmp_path / "o.spt"), "bad.lackey", "line 3")
    assert not (tmp_path / "o.spt").exists(), "no partial output is left behind"
    p = tmp_path / "short.champsim"
    p.write_bytes(b"\0" * 100)
    assert_clean_error(*cli("trace", "import", p, "--from", "champsim", "-o", tmp_path / "o.spt"), "short.champsim", "byte 64")


def test_unknown_machine_lists_presets(cli, good):
    assert_clean_error(*cli("simulate", good, "--machine", "pentium4"), "pentium4", "skylake", "zen3", "alpha21264")


def test_unknown_policy_lists_policies(cli, good):
    assert_clean_error(*cli("simulate", good, "--policy", "navaro"), "navaro", "base", "fixed")


def test_malformed_machine_toml_names_the_key(cli, good, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nbase_page = "4KiB"\npage_sizes = ["4KiB"]\n[[tlb]]\nname = "L1"\nlevel = 1\nentries = 64\nways = "four"\n'
                   'page_sizes = ["4KiB"]\n[walker]\nlevels = 4\nbits_per_level = 9\nref_cycles = 1\n[cost]\n'
                   'cycles_per_access = 1\nfault_cycles = 1\nzero_cycles_per_kib = 1\n')
    assert_clean_error(*cli("simulate", good, "--machine", bad), "bad.toml", "ways")
    bad.write_text(bad.read_text().replace('ways = "four"', "ways = 5"))
    assert_clean_error(*cli("simulate", good, "--machine", bad), "bad.toml", "tlb[0].ways")
    bad.write_text(bad.read_text().replace("ways = 5", "ways = 4\nassoc = 2"))
    assert_clean_error(*cli("simulate", good, "--machine", bad), "bad.toml", "assoc")


def test_bad_tlb_flag(cli, good):
    assert_clean_error(*cli("simulate", good, "--tlb", "64:5"), "tlb 64:5", "divide")
