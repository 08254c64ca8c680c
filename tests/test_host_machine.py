"""`superpager machines host --explain`: what was read from this CPU, and from where."""
import json
import os
import subprocess
import sys

CLI = [sys.executable, "-m", "superpager.cli"]


def test_host_explain_names_every_source():
    r = subprocess.run(CLI + ["machines", "host", "--explain", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    items = {i["item"]: i for i in d["items"]}
    assert items["cpu"]["source"].startswith("CPUID")
    assert all(i["source"] for i in d["items"])
    caches = [i for i in d["items"] if i["item"].endswith("cache")]
    if os.path.isdir("/sys/devices/system/cpu/cpu0/cache/index0"):
        assert caches, "this machine describes its caches in sysfs; CPUID or sysfs must give them"
    tlbs = [i for i in d["items"] if "TLB" in i["item"]]
    assert tlbs or any("no TLB geometry" in n for n in d["notes"]), "either TLBs from CPUID or a note saying why not"


def test_explain_is_for_host_only():
    r = subprocess.run(CLI + ["machines", "skylake", "--explain"], capture_output=True, text=True)
    assert r.returncode == 2 and "host machine only" in r.stderr


def test_a_calibration_named_by_the_environment_that_does_not_exist_is_noted(cli, monkeypatch, tmp_path):
    """SUPERPAGER_CALIBRATION names the file on purpose, so its absence is said (the default
    file's absence is not: a machine never calibrated has none)."""
    monkeypatch.setenv("SUPERPAGER_CALIBRATION", str(tmp_path / "missing.toml"))
    code, out, err = cli("machines", "host", "--explain")
    assert code == 0, err
    assert f"SUPERPAGER_CALIBRATION names {tmp_path / 'missing.toml'}, which does not exist" in out + err
    (tmp_path / "missing.toml").write_text("")
    code, out, err = cli("machines", "host", "--explain")
    assert code == 0 and "which does not exist" not in out + err, out + err
