"""workloads/model_access.c's sweep reads what stream reads, word for word and in the same order,
and differs only in how it wraps the index: a compare instead of stream's modulo, a 64-bit
division an element that sets stream's pace on the machine. So the bench's difference between
the two (docs/RUNTIME_MODEL.md, "A sweep without a division") is the divider's, not another
access pattern; the model, which sees only the accesses and the instruction counts, gets the
same loads from both captures."""

from test_capture import need_cc, need_qemu
from test_model_access_bsearchcmov import table_loads
from test_model_access_layout import _run

from superpager import bench_model
from superpager import workloads

# 2.5 passes over a 1MiB table (131072 words), so the wrap is taken twice.
OPS_MILLIONS = 0.32768


@need_cc
def test_sweep_sums_the_words_stream_sums():
    exe = str(workloads.build("model_access"))
    stream, sweep = (_run(exe, kind, mib=1, ops_millions=OPS_MILLIONS) for kind in ("stream", "sweep"))
    assert sweep["kind"] == "sweep" and sweep["ops"] == stream["ops"] == "327680"
    # Over 2.5 passes of odd keys 2i + 1 the sum is not a multiple of any one pass: a sweep that
    # wrapped early or late, or skipped a word, would sum something else.
    assert sweep["checksum"] == stream["checksum"]
    words = 131072
    expect = 2 * sum(2 * i + 1 for i in range(words)) + sum(2 * i + 1 for i in range(words // 2))
    assert int(sweep["checksum"], 16) == expect


@need_qemu
@need_cc
def test_sweep_loads_the_table_exactly_as_stream_does(tmp_path):
    # By line: a record a line of eight words. table_loads runs 2000 operations (its SEARCHES):
    # 2000 words, 250 lines, in the table's first 16KiB (the wrap is the checksum test's).
    streamed, swept = table_loads(tmp_path, "stream", "line"), table_loads(tmp_path, "sweep", "line")
    assert 240 <= len(streamed) <= 260
    assert swept == streamed


def test_the_bench_runs_sweep_only_when_named_and_marks_it_independent():
    assert "sweep" in bench_model.OPTIONAL and "sweep" not in bench_model.PROGRAMS
    assert bench_model.DEPENDENCE["sweep"] == bench_model.DEPENDENCE["stream"] == 0.0
    assert bench_model.command("/x/model_access", "sweep", 256) == ["/x/model_access", "sweep", "256"]
