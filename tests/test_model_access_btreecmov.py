"""workloads/model_access.c's btreecmov looks keys up as btree does, node for node, and differs only
in how it picks the child: a count of compares on the node's keys instead of a scan that leaves
at the first key at or above the one sought. So the bench's difference between the two
(docs/RUNTIME_MODEL.md, "A B-tree without branches") is what the scan's branches let the core do,
not another access pattern; and the model, which sees only the lines, is given the difference as
`dependence` and `walk_ahead` alone (bench_model.DEPENDENCE, WALK_AHEAD)."""

import subprocess

from test_capture import need_cc, need_qemu, records
from test_capture_from_mark import split_at_mark

from superpager import bench_model
from superpager import capture as cap
from superpager import workloads

MIB = 1
LOOKUPS = 2000


def table_lines(tmp_path, kind: str) -> list[int]:
    """The lines (address / 64) of the access phase's loads from the table, in order, one a
    record: captured by line, so a record is a run of loads inside one line."""
    out = str(tmp_path / f"{kind}.spt")
    exe = str(workloads.build("model_access"))
    r = cap.capture([exe, kind, str(MIB), str(LOOKUPS / 1e6)], out, stdout=subprocess.DEVNULL, collapse="line")
    assert r.status == 0 and r.phase_marks == 1 and not r.truncated, r.notes
    _, from_mark = split_at_mark(records(out))
    page = int(from_mark[0].split()[1], 16)  # the mark is at the table's page
    span = range(page, page + (MIB << 20))
    return [int(line.split()[1], 16) >> 6 for line in from_mark[1:] if line[:2] == "L " and int(line.split()[1], 16) in span]


@need_qemu
@need_cc
def test_btreecmov_reads_the_nodes_btree_reads_in_the_same_order(tmp_path):
    branchy, counted = table_lines(tmp_path, "btree"), table_lines(tmp_path, "btreecmov")
    # 16384 nodes of 64 bytes: a complete 8-ary tree five levels deep (4681 nodes) and a sixth
    # level in part, so each lookup reads five or six nodes, fewer when it finds its key above.
    assert 4 * LOOKUPS <= len(branchy) <= 6 * LOOKUPS
    assert counted == branchy


def test_the_bench_marks_btreecmov_a_chain_that_runs_nothing_ahead():
    assert "btreecmov" in bench_model.OPTIONAL and "btreecmov" not in bench_model.PROGRAMS
    # Without the scan's branches nothing is guessed: every node waits (1) and so does its walk
    # (0), where btree's guessed child lets one miss in eight run under the one before (0.875).
    assert bench_model.DEPENDENCE["btreecmov"] == 1.0 > bench_model.DEPENDENCE["btree"]
    assert bench_model.WALK_AHEAD["btreecmov"] == 0.0 < bench_model.WALK_AHEAD["btree"]
