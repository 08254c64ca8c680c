#!/usr/bin/env bash
# Installs what superpager needs on Debian/Ubuntu into a virtual environment at .venv; safe to
# run again (it skips what is present). Debian's own Python refuses system-wide pip installs
# (PEP 668), so everything Python goes into .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

apt_install() {
  echo "setup: installing Debian packages: $*"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v valgrind >/dev/null 2>&1 || need_apt+=(valgrind)   # lackey traces, capture --lackey
command -v qemu-x86_64 >/dev/null 2>&1 || need_apt+=(qemu-user) # capture: runs programs with our TCG plugin
command -v gzip >/dev/null 2>&1 || need_apt+=(gzip)             # real programs in the workload suite
command -v bzip2 >/dev/null 2>&1 || need_apt+=(bzip2)
command -v sqlite3 >/dev/null 2>&1 || need_apt+=(sqlite3)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)     # reports are checked in headless Chromium
# Python headers: pycachesim (the test peer) compiles a C extension.
python3 -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null \
  || need_apt+=(python3-dev)
if [ ${#need_apt[@]} -gt 0 ]; then apt_install "${need_apt[@]}"; fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: a Rust toolchain (cargo) is required: see https://rustup.rs" >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  if ! python3 -m venv "$VENV" 2>/dev/null; then
    rm -rf "$VENV"
    apt_install python3-venv
    python3 -m venv "$VENV"
  fi
fi

# Build and runtime dependencies, the test peer, and the linter (make lint).
"$VENV/bin/python" - <<'PY'
import importlib.util, subprocess, sys
want = {"maturin": "maturin>=1.5,<2", "pyarrow": "pyarrow>=12", "pandas": "pandas>=1.5",
        "pytest": "pytest>=7", "cachesim": "pycachesim>=0.3", "ruff": "ruff>=0.5",
        "mypy": "mypy>=1.8", "matplotlib": "matplotlib>=3.6", "duckdb": "duckdb>=1.0", "ray": "ray>=2.9"}
missing = [spec for mod, spec in want.items() if importlib.util.find_spec(mod) is None]
if missing:
    print("setup: installing Python packages:", " ".join(missing), flush=True)
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", *missing])
PY
