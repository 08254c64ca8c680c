# superpager: the two commands a new user runs are `make demo` and `make test`.
# Both install what they need first (idempotent): Debian packages, Python packages, the build.

PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: demo test setup install dev bench clean

setup:
	@bash scripts/setup.sh

install: setup
	$(PIP) install --no-build-isolation .

demo: install
	superpager demo

test: setup
	$(PIP) install --no-build-isolation -e '.[test]'
	cargo test --release --workspace --exclude superpager-py
	$(PYTHON) -m pytest -q tests

# Fast rebuild of the extension in place (after `make test` made an editable install).
dev:
	cargo build --release -p superpager-py
	cp target/release/lib_core.so python/superpager/_core.abi3.so

bench: install
	superpager bench --out docs/PERFORMANCE.md

clean:
	rm -rf target build dist demo-out python/superpager/_core*.so
