"""Typed errors: each kind of failure is a subclass of SuperpagerError that a caller can catch."""
import pytest

import superpager as sp


def test_a_malformed_trace_is_a_trace_error(tmp_path):
    bad = tmp_path / "bad.spt"
    bad.write_bytes(b"NOTATRACE" * 8)
    with pytest.raises(sp.TraceError, match="bad.spt"):
        sp.simulate(str(bad))


def test_an_unknown_policy_is_a_usage_error(tmp_path):
    t = str(tmp_path / "s.spt")
    sp.gen("seq", t, size="1MiB", progress=False)
    with pytest.raises(sp.UsageError, match="unknown policy"):
        sp.simulate(t, policy="nope")


def test_a_missing_file_is_a_file_access_error(tmp_path):
    with pytest.raises(sp.FileAccessError):
        sp.simulate(str(tmp_path / "absent.spt"))


def test_a_bad_machine_file_is_a_config_error(tmp_path):
    m = tmp_path / "m.toml"
    m.write_text("name = 'x'\n[[tlb]]\nentries = 'many'\n")
    t = str(tmp_path / "s.spt")
    sp.gen("seq", t, size="1MiB", progress=False)
    with pytest.raises(sp.ConfigError, match="m.toml"):
        sp.simulate(t, machine=str(m))


def test_running_out_of_simulated_memory_is_a_simulation_error(tmp_path):
    t = str(tmp_path / "g.spt")
    sp.gen("seq", t, size="256MiB", progress=False)
    with pytest.raises(sp.SimulationError, match="out of memory|memory"):
        sp.simulate(t, memory="64MiB")


def test_every_kind_is_a_superpager_error():
    for cls in (sp.TraceError, sp.ConfigError, sp.FileAccessError, sp.UsageError, sp.SimulationError):
        assert issubclass(cls, sp.SuperpagerError)
