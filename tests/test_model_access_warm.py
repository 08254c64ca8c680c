"""workloads/model_access.c reads its table once through after building it and before the phase
mark (the warm pass; docs/RUNTIME_MODEL_HISTORY.md, "Warm tables"), so the access phase the bench times,
and the simulator costs, starts with the table read since it was written."""

import subprocess

from test_capture import need_cc, need_qemu, records
from test_capture_from_mark import split_at_mark

from superpager import capture as cap
from superpager import workloads

MIB = 1


@need_qemu
@need_cc
def test_every_line_of_the_table_is_read_after_its_last_write_and_before_the_mark(tmp_path):
    out = str(tmp_path / "stream.spt")
    exe = str(workloads.build("model_access"))
    r = cap.capture([exe, "stream", str(MIB), "0.0001"], out, stdout=subprocess.DEVNULL)
    assert r.status == 0 and r.phase_marks == 1 and not r.truncated, r.notes
    before, from_mark = split_at_mark(records(out))
    # The mark is a zero-length madvise at the table's page; the table starts in that page.
    page = int(from_mark[0].split()[1], 16)
    span = range(page, page + (MIB << 20) + 4096)
    pre = [(k, l.split()) for k, l in enumerate(before) if l[:2] in ("L ", "S ", "M ")]
    in_table = [(k, f) for k, f in pre if int(f[1], 16) in span]
    last_write = max(k for k, f in in_table if f[0] in ("S", "M"))
    reads = [int(f[1], 16) for k, f in in_table if k > last_write and f[0] == "L"]
    assert reads, "nothing of the table is read between its last write and the mark"
    read = {a >> 6 for a in reads}
    # The table's first word is the first read after the last write; from there one a line.
    first = min(reads)
    want = {(first >> 6) + i for i in range((MIB << 20) // 64)}
    assert want <= read, f"{len(want - read)} of {len(want)} lines not read before the mark"
