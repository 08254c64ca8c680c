"""The CPU line every benchmark report starts with names the family and model, which a VM's
model name ("AMD EPYC") leaves out."""
import os

from superpager.hostinfo import cpu_model, machine_line


def test_family_and_model_follow_the_name(tmp_path):
    # The first processor's block of this Zen 5 VM's /proc/cpuinfo (2026-12-02), shortened.
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
                    "model name\t: AMD EPYC\n\nprocessor\t: 1\ncpu family\t: 99\nmodel\t\t: 9\nmodel name\t: other\n")
    assert cpu_model(str(info)) == "AMD EPYC (family 26, model 2)"
    assert machine_line(str(info)) == f"AMD EPYC (family 26, model 2; {os.cpu_count()} CPUs)"


def test_a_cpuinfo_without_family_gives_the_name_alone(tmp_path):
    # AArch64's cpuinfo has no "cpu family"; an unreadable file falls back to what Python knows.
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Neoverse-N1\n")
    assert cpu_model(str(info)) == "Neoverse-N1"
    assert machine_line(str(info)).endswith(" CPUs)") and "family" not in machine_line(str(info))
    assert cpu_model(str(tmp_path / "missing"))
