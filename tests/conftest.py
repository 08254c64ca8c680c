import os
import subprocess
import sys
import tempfile

import pytest

import superpager as sp

# `host` reads the calibration `superpager calibrate` wrote on this machine, if any; the tests
# run on the CPU's own numbers (as in CI, where none was made) unless a test points this at a
# file it wrote. A developer's calibration would otherwise change what host is (nested on a
# virtual machine whose TLB splinters 2MB pages) and with it what the tests see.
os.environ["SUPERPAGER_CALIBRATION"] = os.path.join(tempfile.gettempdir(), "superpager-tests-no-calibration", "host.toml")


@pytest.fixture
def cli(tmp_path):
    """Run the CLI in a subprocess: returns (exit status, stdout, stderr)."""

    def run(*args, check=False):
        p = subprocess.run([sys.executable, "-m", "superpager.cli", *map(str, args)], capture_output=True, text=True,
                           cwd=tmp_path, timeout=600)
        if check and p.returncode != 0:
            raise AssertionError(f"superpager {' '.join(map(str, args))} failed ({p.returncode}): {p.stderr}")
        return p.returncode, p.stdout, p.stderr

    return run


@pytest.fixture(scope="session")
def traces(tmp_path_factory):
    """Generated traces of at least 1M accesses, shared by the tests."""
    d = tmp_path_factory.mktemp("traces")
    out = {}
    for name, kind, size, opts in [
        ("random", "gups", "256MiB", {"accesses": 600_000}),  # a load and a store per update
        ("strided", "stride", "512MiB", {"accesses": 1_200_000, "stride": "12KiB"}),
        ("sequential", "seq", "16MiB", {"accesses": 1_200_000}),
    ]:
        p = str(d / f"{name}.spt")
        sp.gen(kind, p, size=size, seed=7, progress=False, **opts)
        out[name] = p
    return out
