#!/usr/bin/env bash
# Run the cargo-fuzz targets (fuzz/, docs/RELIABILITY.md).
#   scripts/fuzz.sh                 # every target for 60 s
#   FUZZ_SEED=1 scripts/fuzz.sh 15  # what CI runs: 15 s each, from a fixed seed (repeatable)
#   scripts/fuzz.sh 3600 text spt   # an hour each on two targets (a long run)
#   FUZZ_JOBS=2 scripts/fuzz.sh 15  # two targets at a time (one core each)
#   scripts/fuzz.sh --build         # only build the instrumented targets (CI starts this early,
#                                   # at low priority, so that it uses the core the tests leave idle)
# New inputs that reach new code go to fuzz/work/<target> (not committed; `cargo fuzz cmin`
# then copy into fuzz/corpus/ to keep them). A crash stops the run, is saved under
# fuzz/artifacts/<target>/ and makes this script fail: copy it into fuzz/regressions/<target>/,
# where `make test` replays it forever (crates/core/tests/fuzz_corpus.rs), and fix it.
# Each finished run appends a line to fuzz/work/hours.log: date, target, seconds, runs, crashes.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_ONLY=0
if [ "${1:-}" = "--build" ]; then BUILD_ONLY=1; shift; fi
SECONDS_EACH=${1:-${FUZZ_SECONDS:-60}}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(spt text lackey champsim machine_toml scenario_toml policy_spec simulate_text predict_text)

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: skipped: no nightly Rust toolchain (cargo-fuzz needs one: rustup toolchain install nightly)" >&2
  exit 0
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz from crates.io" >&2
  cargo install --locked cargo-fuzz >/dev/null 2>&1 || { echo "fuzz: skipped: cargo install cargo-fuzz failed" >&2; exit 0; }
fi
cd fuzz
cargo +nightly fuzz build -O >/dev/null 2>&1 || cargo +nightly fuzz build -O
[ "$BUILD_ONLY" -eq 0 ] || exit 0
BIN=target/x86_64-unknown-linux-gnu/release
mkdir -p work
JOBS=${FUZZ_JOBS:-1}
# One target's run; its status is 1 on a crash or a timeout.
fuzz_one() {
  local t=$1 log t0 crashes runs what
  mkdir -p "work/$t" "regressions/$t" "artifacts/$t"
  log="work/$t.log"
  t0=$SECONDS
  # -timeout: an input taking over 30 s is a hang (on this instrumented build the slowest found,
  # 2 GiB reads into 64 MiB of memory, takes 6 s alone and over 10 s beside other work; under a
  # second in a release build); -rss_limit_mb: one over 2 GiB is a leak or an allocation without bound
  # (docs/RELIABILITY.md states the bound).
  # The binary built above, run directly: `cargo fuzz run` would rebuild on every source change.
  if "$BIN/$t" "work/$t" "corpus/$t" "regressions/$t" -artifact_prefix="artifacts/$t/" \
       -max_total_time="$SECONDS_EACH" -timeout=30 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
       ${FUZZ_SEED:+-seed=$FUZZ_SEED} >"$log" 2>&1; then
    crashes=0
  else
    crashes=1
    what=CRASH; grep -q "libFuzzer: timeout" "$log" && what="TIMEOUT (an input over 30 s)"
    echo "fuzz: $t: $what; see fuzz/$log and fuzz/artifacts/$t/" >&2
    grep -m3 -E "panicked|ERROR|SUMMARY" "$log" >&2 || true
  fi
  runs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" | tail -1)
  echo "$(date -u +%FT%TZ) $t $((SECONDS - t0))s runs=${runs:-?} crashes=$crashes" | tee -a work/hours.log >&2
  return "$crashes"
}
status=0
running=0
for t in "${TARGETS[@]}"; do
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
