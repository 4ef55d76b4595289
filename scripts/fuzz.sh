#!/usr/bin/env bash
# Fuzzes headroom's parsers of untrusted input with cargo-fuzz and libFuzzer: the ONNX loader
# (fuzz/fuzz_targets/load.rs) for SECONDS (default 60), then the label-file and data.yaml parsers
# (dataset.rs) and image headers and decoding (image.rs) for a third of that each. Fails on a panic,
# abort, timeout or out-of-memory and prints the input that caused it.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: load dataset image; default all)
# Env:   HEADROOM_DEPS             where cargo-fuzz is installed (default .deps; CI: /var/cache/headroom/deps)
#        HEADROOM_FUZZ_TARGET_DIR  build folder and growing corpus (default /var/cache/headroom/target-fuzz)
#
# cargo-fuzz wants a nightly compiler for its -Z flags; RUSTC_BOOTSTRAP=1 lets the stable one accept
# them, and `--sanitizer none` needs no ASan runtime (panics, aborts, timeouts and the RSS limit are
# still caught; out-of-bounds reads in unsafe code would not be, and headroom has none).
# shellcheck source=lib/errtrap.sh
source "$(dirname "$0")/lib/errtrap.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

CARGO_FUZZ_VERSION=0.13.2
seconds=${1:-60}
deps="${HEADROOM_DEPS:-$root/.deps}"
target_dir="${HEADROOM_FUZZ_TARGET_DIR:-/var/cache/headroom/target-fuzz}"
shift $(( $# > 0 ? 1 : 0 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(load dataset image)

fail() { echo "fuzz.sh: FAILED: $*" >&2; exit 1; }
step() { headroom_step "$*"; echo "fuzz.sh: $*" >&2; }

[[ "$seconds" =~ ^[0-9]+$ ]] || fail "SECONDS must be a whole number, not '$seconds'"
command -v cargo >/dev/null || fail "cargo not found"
command -v c++ >/dev/null || fail "no C++ compiler: libfuzzer-sys compiles libFuzzer (apt-get install g++)"
mkdir -p "$deps" "$target_dir" 2>/dev/null \
  || fail "cannot create $deps or $target_dir (set HEADROOM_DEPS / HEADROOM_FUZZ_TARGET_DIR)"

bin="$deps/cargo-fuzz-$CARGO_FUZZ_VERSION/bin"
if [ "$("$bin/cargo-fuzz" --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
  step "installing cargo-fuzz $CARGO_FUZZ_VERSION into $bin (about 2 minutes)"
  # Its own temporary target dir: CARGO_TARGET_DIR would mix its build into the workspace's.
  env -u CARGO_TARGET_DIR cargo install cargo-fuzz --version "=$CARGO_FUZZ_VERSION" --locked \
    --root "$deps/cargo-fuzz-$CARGO_FUZZ_VERSION" \
    || fail "cargo install cargo-fuzz =$CARGO_FUZZ_VERSION (is crates.io reachable?)"
fi
export PATH="$bin:$PATH"

count() { find "$1" -type f | wc -l; }
started=$(mktemp)   # artifacts newer than this file are this run's findings
trap 'rm -f "$started"' EXIT

# fuzz_one TARGET SECONDS: build and run one target; fails on any finding.
fuzz_one() {
  local target=$1 secs=$2
  local corpus="$target_dir/corpus/$target"   # new inputs accumulate here, outside the clone
  local seeds="$root/fuzz/seeds/$target"      # committed, read-only
  local artifacts="$root/fuzz/artifacts/$target"
  local log="$target_dir/$target.log" dict=()
  [ -f "$root/fuzz/fuzz_targets/$target.rs" ] || fail "no fuzz target '$target' (fuzz/fuzz_targets/)"
  [ -f "$root/fuzz/$target.dict" ] && dict=(-dict="$root/fuzz/$target.dict")
  mkdir -p "$corpus" "$artifacts" || fail "cannot create $corpus or $artifacts"
  local fuzz=(cargo fuzz run "$target" --fuzz-dir "$root/fuzz" --sanitizer none --target-dir "$target_dir")
  step "building the fuzz target $target (release, debug assertions, libFuzzer; the first build ~5 minutes)"
  RUSTC_BOOTSTRAP=1 cargo fuzz build "$target" --fuzz-dir "$root/fuzz" --sanitizer none --target-dir "$target_dir" \
    || fail "building fuzz/fuzz_targets/$target.rs (see the compiler output above)"
  step "fuzzing $target for ${secs}s (corpus $corpus, $(count "$corpus") inputs so far)"
  local status=0
  RUSTC_BOOTSTRAP=1 "${fuzz[@]}" "$corpus" "$seeds" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -max_len=16384 \
    "${dict[@]}" -print_final_stats=1 > "$log" 2>&1 || status=$?
  local found first_error
  found=$(find "$artifacts" -type f -newer "$started" | sort)
  if [ "$status" -ne 0 ] || [ -n "$found" ]; then
    # From the first sign of trouble (panic message, libFuzzer's crash/timeout/OOM report) on.
    first_error=$({ grep -n -m1 -E 'panicked at|ERROR: libFuzzer' "$log" || true; } | cut -d: -f1)
    if [ -n "$first_error" ]; then
      tail -n +"$first_error" "$log" | grep -v '^#[0-9]' | head -n 120 >&2
    else
      tail -n 60 "$log" >&2
    fi
    [ -n "$found" ] || fail "the fuzzer exited with status $status and saved no input; full log: $log"
    while read -r f; do
      echo "fuzz.sh: input that fails: $f" >&2
    done <<< "$found"
    echo "fuzz.sh: reproduce with: RUSTC_BOOTSTRAP=1 PATH=$bin:\$PATH ${fuzz[*]} $(head -n 1 <<< "$found")" >&2
    fail "fuzz target $target crashed, hung or ran out of memory on a fuzzed input (full log: $log)"
  fi
  grep -E '^Done|stat::number_of_executed_units|stat::peak_rss_mb' "$log" >&2 || true
  step "$target: no crash in ${secs}s ($(count "$corpus") inputs in the corpus)"
}

for target in "${targets[@]}"; do
  if [ "$target" = load ]; then fuzz_one load "$seconds"; else fuzz_one "$target" $(( (seconds + 2) / 3 )); fi
done
