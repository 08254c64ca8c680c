# superpager: the two commands a new user runs are `make demo` and `make test`.
# Both install what they need first (idempotent): Debian packages, a virtual environment at
# .venv with the Python packages, and the build of the Rust core.

VENV ?= .venv
PY := $(VENV)/bin/python
# maturin's build backend runs the `maturin` program it installed into the venv: put the venv's
# bin first on PATH so that a build works without an activated environment.
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: demo test lint setup install dev bench bench-os bench-capture fuzz clean

setup:
	@bash scripts/setup.sh

install: setup
	$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation .

demo: install
	$(VENV)/bin/superpager demo

test: setup
	$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation -e .
	cargo test --profile ci-test --workspace --exclude superpager-py
	$(PY) -m pytest -q tests

# Linters, as CI runs them: rustfmt (rustfmt.toml), clippy with warnings as errors, ruff and
# mypy (their settings in pyproject.toml).
lint: setup
	cargo fmt --all -- --check
	cargo clippy --release --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests scripts
	$(VENV)/bin/mypy

# Fast rebuild of the extension in place (after `make test` made an editable install).
dev:
	cargo build --release -p superpager-py
	# Replace by rename: a running superpager keeps the old file mapped, unharmed.
	cp target/release/lib_core.so python/superpager/_core.abi3.so.tmp
	mv -f python/superpager/_core.abi3.so.tmp python/superpager/_core.abi3.so
	# `make install` or `make bench` replace the editable install with a copy, which this rebuild
	# would not reach: say so instead of leaving the old build in use.
	@$(PY) -c "import superpager._core as c, sys; sys.exit(0 if c.__file__.startswith('$(abspath python)/') else 1)" 2>/dev/null \
	  || { echo "make dev: the environment imports an installed copy, not python/superpager; run 'make test' (editable install) first" >&2; exit 1; }

bench: install
	$(VENV)/bin/superpager bench --out docs/PERFORMANCE.md

bench-os: install
	$(VENV)/bin/superpager bench --os --repeats 3 --out docs/OS_SCALE.md

bench-capture: install
	$(VENV)/bin/superpager bench --capture --repeats 3 --out docs/PERFORMANCE.md

# Fuzz every target for FUZZ_SECONDS each (default 600): docs/RELIABILITY.md.
fuzz:
	bash scripts/fuzz.sh $${FUZZ_SECONDS:-600}

clean:
	rm -rf target build dist demo-out python/superpager/_core*.so
