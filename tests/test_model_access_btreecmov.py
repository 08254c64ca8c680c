"""workloads/model_access.c's btreecmov looks keys up as btree does, node for node, and differs only
in how it picks the child: a count of compares on the node's keys instead of a scan that leaves
at the first key at or above the one sought. So the bench's difference between the two
(docs/RUNTIME_MODEL.md, "A B-tree without branches") is what the scan's branches let the core do,
not another access pattern; and the model, which sees only the lines, is given the difference as
`dependence` and `walk_ahead` alone (bench_model.DEPENDENCE, WALK_AHEAD)."""

from test_capture import need_cc, need_qemu
from test_model_access_bsearchcmov import SEARCHES as LOOKUPS
from test_model_access_bsearchcmov import table_loads

from superpager import bench_model


def table_lines(tmp_path, kind: str) -> list[int]:
    """The lines (address / 64) of the access phase's loads from the table, in order, one a
    record: captured by line, so a record is a run of loads inside one line."""
    return [int(r.split()[1], 16) >> 6 for r in table_loads(tmp_path, kind, collapse="line")]


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
