"""workloads/model_access.c's bsearchcmov searches as bsearch does, probe for probe, and differs
only in how it picks the half: a mask on the loaded key instead of a branch. So the bench's
difference between the two (docs/RUNTIME_MODEL.md, "A binary search without branches") is what
the branch lets the core do, not another access pattern; and the model, which sees only the
accesses, is given the difference as `walk_ahead` alone (bench_model.WALK_AHEAD)."""

import subprocess

from test_capture import need_cc, need_qemu, records
from test_capture_from_mark import split_at_mark

from superpager import bench_model
from superpager import capture as cap
from superpager import workloads

MIB = 1
SEARCHES = 2000


def table_loads(tmp_path, kind: str, collapse: str = "page") -> list[str]:
    """The records of the access phase's loads from the table, in order, as text: kind, address,
    size, and `xN` where a record stands for a run of N loads in one page (in one line, with
    `collapse` "line"). SEARCHES searches or lookups of `kind` over MIB."""
    out = str(tmp_path / f"{kind}.spt")
    exe = str(workloads.build("model_access"))
    r = cap.capture([exe, kind, str(MIB), str(SEARCHES / 1e6)], out, stdout=subprocess.DEVNULL, collapse=collapse)
    assert r.status == 0 and r.phase_marks == 1 and not r.truncated, r.notes
    _, from_mark = split_at_mark(records(out))
    page = int(from_mark[0].split()[1], 16)  # the mark is at the table's page
    span = range(page, page + (MIB << 20))
    return [line for line in from_mark[1:] if line[:2] == "L " and int(line.split()[1], 16) in span]


@need_qemu
@need_cc
def test_bsearchcmov_probes_the_table_exactly_as_bsearch_does(tmp_path):
    branchy, masked = table_loads(tmp_path, "bsearch"), table_loads(tmp_path, "bsearchcmov")
    # 2000 searches over 131072 keys in 256 pages: the first eight probes of each land in pages
    # of their own, the rest (and the final check) in one run of the last page.
    assert 8 * SEARCHES <= len(branchy) <= 19 * SEARCHES
    assert masked == branchy


def test_the_bench_marks_bsearchcmov_a_chain_that_runs_nothing_ahead():
    assert "bsearchcmov" in bench_model.OPTIONAL and "bsearchcmov" not in bench_model.PROGRAMS
    # Without a branch nothing is guessed: every probe waits (1), where bsearch's guessed half
    # lets one miss in two run under the one before (0.5).
    assert bench_model.DEPENDENCE["bsearchcmov"] == 1.0 > bench_model.DEPENDENCE["bsearch"] == 0.5
    assert bench_model.WALK_AHEAD["bsearchcmov"] == 0.0 < bench_model.WALK_AHEAD["bsearch"]
