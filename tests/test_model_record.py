"""The model's record (superpager.model_record): tables read back from markdown, row by row."""

import re
from pathlib import Path

from superpager import model_record as mr

DOC = """# Validation

### A bench (first)

Measured on AMD EPYC (family 25, model 17); access-phase speedup ...

| program | size | base s | thp s | measured | range | model | error | linear | error | model base s | native | error |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
| rand | 64MiB | 0.136 | 0.126 | 1.093x | 0.93–1.14 | 1.068x | -2.3% ok | 5.31x | +386% | 0.128 | 1.027x | -6.0% |
| gups | 4096MiB | 0.333 | 0.137 | 2.440x | 1.21–2.73 | 2.900x | +19.0% **miss** | 5.85x | +140% | 0.244 | 1.259x | -48.4% |

Within ±15%: 1 of 2 (model)

### A bench on another machine, without the range column

Measured on Intel(R) Xeon(R) Processor; access-phase speedup ...

| program | size | base s | thp s | measured | model | error | linear | error |
|---|---|---|---|---|---|---|---|---|
| rand | 64MiB | 0.1 | 0.1 | 1.000x | 1.100x | +10.0% ok | 5.0x | +400% |
| gups | 4096MiB | 0.3 | 0.1 | 2.000x | 2.100x | +5.0% ok | 5.0x | +150% |

| program | size | tables | within |
|---|---|---:|---:|
| rand | 64MiB | 3 | 3 |
"""


def test_each_table_is_found_with_its_machine_heading_and_the_models_error_column():
    tables = mr.parse("x.md", DOC)
    assert len(tables) == 2
    first, second = tables
    assert first.heading == "A bench (first)" and first.machine == "AMD EPYC (family 25, model 17)"
    # The model's error, not the linear model's (+386%) or the native column's (-6.0%).
    assert first.errors == {("rand", 64): -2.3, ("gups", 4096): 19.0}
    assert first.within() == 1
    rand, gups = first.rows[("rand", 64)], first.rows[("gups", 4096)]
    assert rand.spread == (0.93, 1.14) and abs(rand.base_error - (0.128 / 0.136 - 1) * 100) < 1e-9
    assert rand.miss_inside_spread() is None  # within: not a miss
    assert gups.predicted == 2.9 and gups.miss_inside_spread() is False  # 2.900 above 1.21–2.73
    assert gups.miss_inside_spread(tolerance=20) is None
    assert second.machine == "Intel(R) Xeon(R) Processor"
    assert second.errors == {("rand", 64): 10.0, ("gups", 4096): 5.0}
    assert second.within() == 2 and second.within(tolerance=8) == 1
    # No range or model base time columns: nothing read for them.
    assert second.rows[("rand", 64)].spread is None and second.rows[("rand", 64)].base_error is None
    assert second.rows[("rand", 64)].miss_inside_spread(tolerance=5) is None


def test_the_record_gathers_each_rows_errors_across_tables():
    rows = {(r.program, r.mib): r for r in mr.record(mr.parse("x.md", DOC))}
    assert rows[("rand", 64)].errors == [-2.3, 10.0]
    assert rows[("gups", 4096)].within() == 1
    assert rows[("gups", 4096)].misses_inside() == (0, 1)
    assert rows[("gups", 4096)].misses_inside(tolerance=1) == (0, 1)  # the second table has no range
    text = mr.summary(mr.parse("x.md", DOC), markdown=True)
    assert "2 tables (first listed first: 1/2, 2/2)" in text
    assert "Tables with every row within ±15%: 1 of 2 (the 2nd listed)." in text
    assert "every row within ±1%: 0 of 2." in mr.summary(mr.parse("x.md", DOC), tolerance=1)
    assert "| gups | 4096MiB | 2 | 1 | +12.0% | +5.0% to +19.0% | 0 of 1 | -26.7% |" in text
    assert "inside the range of the measured pairs' ratios: 0 of 1" in text


def test_the_docs_marked_table_reads_back_as_its_own_tally_says():
    doc = Path(__file__).resolve().parent.parent / "docs" / "RUNTIME_MODEL.md"
    text = doc.read_text()
    marked = text[text.index("<!-- bench --model: start -->"):]
    tally = re.search(r"Within ±15%: (\d+) of (\d+) \(model\)", marked)
    start_line = text[: text.index("<!-- bench --model: start -->")].count("\n") + 1
    table = next(t for t in mr.parse(doc) if t.line > start_line)
    assert len(table.errors) == int(tally.group(2))
    assert table.within() == int(tally.group(1))


def test_a_missing_file_is_one_line_and_a_non_zero_exit(capsys):
    assert mr.main(["/nonexistent/record.md"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("model_record: /nonexistent/record.md:") and "\n" not in err
