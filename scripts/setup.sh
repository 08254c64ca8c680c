#!/usr/bin/env bash
# Installs what superpager needs on Debian/Ubuntu; safe to run again (it skips what is present).
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
$(command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1) || need_apt+=(python3-pip)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: a Rust toolchain (cargo) is required: https://rustup.rs" >&2
  exit 1
fi

# Python build and runtime dependencies (pinned loosely; the registry is PyPI).
python3 - <<'PY'
import importlib.util, subprocess, sys
want = {"maturin": "maturin>=1.5,<2", "pyarrow": "pyarrow>=12", "pandas": "pandas>=1.5",
        "pytest": "pytest>=7", "cachesim": "pycachesim>=0.3"}
missing = [spec for mod, spec in want.items() if importlib.util.find_spec(mod) is None]
if missing:
    print("setup: installing Python packages:", " ".join(missing))
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *missing])
PY
