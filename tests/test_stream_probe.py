"""calibrate's stream probe (model/chase.c `sweep`, model/calibrate.py `stream_probe` and
`fit_stream_ahead`; docs/RUNTIME_MODEL.md, "Streams across pages"): a sequential read timed on
both page sizes, and the share of a stream's walks the machine does ahead, from the model's run
of the same sweep."""

import pytest

from superpager.model import calibrate as cal
from test_calibrate_refit import LEVELS, _written


def test_chase_sweep_times_a_page_of_reads_and_refuses_a_size_no_power_of_two():
    f = cal._run_chase(cal.chase_binary(), ["sweep", str(1 << 20), "4k", str(1 << 20)], "the stream probe")
    # 512 reads a page, each at least a cycle's worth of work on any core here.
    assert float(f["ns_page"]) > 512 * 0.1, f
    with pytest.raises(cal.CalibrateError, match="sweep needs a power of two bytes"):
        cal._run_chase(cal.chase_binary(), ["sweep", str(3 << 20), "4k", "100"], "the stream probe")


def test_the_probe_alternates_page_sizes_and_takes_medians(monkeypatch):
    seen = []

    def fake(binary, args, what, absent=None):
        seen.append(args[2])
        ns = {"4k": [300.0, 290.0, 310.0], "2m": [280.0, 295.0, 285.0]}[args[2]][sum(1 for s in seen if s == args[2]) - 1]
        return {"ns_page": str(ns), "huge_bytes": str(cal.STREAM_PROBE_BYTES)}

    monkeypatch.setattr(cal, "_run_chase", fake)
    monkeypatch.setattr(cal, "STREAM_PROBE_RUNS", 3)
    p = cal.stream_probe(cal.chase_binary(), 2)
    assert seen == ["4k", "2m"] * 3, "at least STREAM_PROBE_RUNS runs of each"
    assert p == {"footprint": cal.STREAM_PROBE_BYTES, "ns_4k": 300.0, "ns_2m": 285.0}
    # Without 2MB pages there is no probe.
    monkeypatch.setattr(cal, "_run_chase", lambda b, a, w, absent=None: {"ns_page": "1.0", "huge_bytes": "0"})
    assert cal.stream_probe(cal.chase_binary(), 3) is None


@pytest.mark.skipif(len(LEVELS) < 2, reason="CPUID and sysfs give fewer than two data-cache levels here")
def test_the_fit_is_the_share_of_the_models_walk_stall_the_machine_does_not_show(tmp_path):
    _, text = _written(tmp_path)
    probe = {"footprint": 16 << 20, "ns_4k": 100.0, "ns_2m": 100.0}
    first = cal.fit_stream_ahead(text, probe)
    m4, m2 = first["model_4k"], first["model_2m"]
    assert m4 > m2 > 0 or (m4 > 0 and m2 == 0), first
    assert first["stream_ahead"] == 1.0, "the machine's 4KB pages add nothing"
    added = m4 - m2
    for shown, want in [(added / 2, 0.5), (2 * added, 0.0), (-added, 1.0)]:
        got = cal.fit_stream_ahead(text, {**probe, "ns_4k": 100.0 + shown})
        assert got["stream_ahead"] == pytest.approx(want, abs=2e-3), (shown, got)
        assert (got["model_4k"], got["model_2m"]) == (m4, m2), "the model's run does not depend on the probe's times"


@pytest.mark.skipif(len(LEVELS) < 2, reason="CPUID and sysfs give fewer than two data-cache levels here")
def test_a_refit_fits_the_files_probe_again_and_host_takes_it(tmp_path):
    import tomllib
    path, text = _written(tmp_path)
    # A probe as an earlier fit left it: the refit keeps its times and fits the share anew.
    stale = '\n[calibration.stream_probe]\nfootprint = "16MiB"\nns_4k = 100.0\nns_2m = 100.0\nmodel_4k = 1.0\nmodel_2m = 0.5\nstream_ahead = 0.0\n'
    path.write_text(text + stale)
    out = tmp_path / "refit.toml"
    cal.refit(path, out, last_level_fit=False)
    v = tomllib.loads(out.read_text())
    p = v["calibration"]["stream_probe"]
    assert (p["footprint"], p["ns_4k"], p["ns_2m"]) == ("16MiB", 100.0, 100.0)
    assert p["stream_ahead"] == 1.0 and p["model_4k"] > p["model_2m"], p
    assert v["cache"]["stream_ahead"] == 1.0
