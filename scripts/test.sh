#!/usr/bin/env bash
# The README's test command: tests the install scripts' logic against stubs and docs/ARCHITECTURE.md's
# crate dependency table against the manifests (seconds), installs the
# native dependencies (scripts/setup.sh), then runs every test of the workspace with libtorch and ONNX Runtime for real, clippy and rustfmt,
# then every test again against the oldest supported libraries (libtorch 2.5.1, ONNX Runtime 1.20.1),
# and the install bundle with an empty environment (scripts/tests/bundle.sh). The field loop's kill
# tests are Rust integration tests (crates/cli/tests/field.rs), part of cargo test.
# Env: CARGO_TARGET_DIR (keep it between runs: a first build takes ~9 minutes per libtorch set).
# shellcheck source=lib/errtrap.sh
source "$(dirname "$0")/lib/errtrap.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

stage() { headroom_step "$*"; printf '\n== %s (at %ss)\n' "$*" "$SECONDS" >&2; }
fail() { echo "test.sh: FAILED: $*" >&2; exit 1; }

# shellcheck source=lib/target_guard.sh
source "$root/scripts/lib/target_guard.sh"
headroom_target_guard "${CARGO_TARGET_DIR:-$root/target}" "$root"

command -v cargo >/dev/null || fail "cargo not found: install Rust (https://rustup.rs is not reachable here; use the machine's toolchain)"

stage "install-logic tests (scripts/tests/install_logic.sh)"
bash scripts/tests/install_logic.sh || fail "the install scripts' logic (see the FAIL lines above)"
stage "the Jetson route's logic (scripts/tests/jetson_bundle_logic.sh)"
bash scripts/tests/jetson_bundle_logic.sh || fail "scripts/jetson-bundle.sh's logic (see the FAIL lines above)"

stage "the crate dependencies as docs/ARCHITECTURE.md draws them (scripts/tests/architecture.sh)"
bash scripts/tests/architecture.sh || fail "docs/ARCHITECTURE.md's dependency table (see the FAIL lines above)"
stage "no import circle between the files of any crate (scripts/tests/module_circles.py)"
python3 scripts/tests/module_circles.py || fail "an import circle between files of one crate (see the FAIL lines above)"

stage "native dependencies (scripts/setup.sh)"
scripts/setup.sh || fail "scripts/setup.sh (see its message above)"
# shellcheck source=/dev/null
source .deps/env.sh

stage "cargo fmt --check"
cargo fmt --all --check || fail "formatting: run 'cargo fmt --all'"

stage "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings || fail "clippy"

stage "a renamed RunRequest field breaks the field loop's build where it sets it (scripts/tests/request_rename.py)"
python3 scripts/tests/request_rename.py || fail "the field loop against a renamed RunRequest field (see the FAIL lines above)"

stage "cargo test --workspace (libtorch and ONNX Runtime linked)"
cargo test --workspace --locked || fail "cargo test"

stage "doctor reads the GPU code of the pinned wheel's libtorch_cuda.so without loading it (scripts/tests/gpu_code.sh)"
cargo build -p headroom-cli --locked || fail "cargo build -p headroom-cli"
bash scripts/tests/gpu_code.sh "${CARGO_TARGET_DIR:-$root/target}/debug/headroom" \
  || fail "doctor's gpu code row on the wheel's libtorch_cuda.so (see the FAIL lines above)"

stage "field run --metrics parses with Prometheus' own parser (scripts/tests/metrics.sh)"
bash scripts/tests/metrics.sh "${CARGO_TARGET_DIR:-$root/target}/debug/headroom" \
  || fail "the field loop's Prometheus metrics (see the FAIL lines above)"

# The oldest libraries of the supported range (libtorch 2.5.1, ONNX Runtime 1.20.1: what JetPack 6
# ships): the same tests, in a target dir of their own (another LIBTORCH rebuilds every dependant).
stage "cargo test --workspace against the oldest libraries (scripts/setup.sh --libs oldest)"
scripts/setup.sh --libs oldest || fail "scripts/setup.sh --libs oldest (see its message above)"
oldest_target="${CARGO_TARGET_DIR:-$root/target}-oldest"
headroom_target_guard "$oldest_target" "$root"
(
  # shellcheck source=/dev/null
  source .deps/env-oldest.sh
  CARGO_TARGET_DIR="$oldest_target" cargo test --workspace --locked
) || fail "cargo test against the oldest libraries (libtorch 2.5.1, ONNX Runtime 1.20.1)"
stage "the Jetson route (scripts/jetson-bundle.sh) against the oldest libraries, bundle run with an empty environment"
CARGO_TARGET_DIR="$oldest_target" bash scripts/tests/bundle.sh --profile dev --target native-oldest \
  || fail "the native bundle against the oldest libraries (see the FAIL lines above)"

stage "the install bundle run with an empty environment (scripts/tests/bundle.sh --profile dev)"
bash scripts/tests/bundle.sh --profile dev || fail "the install bundle (see the FAIL lines above)"

stage "cargo check -p headroom-cli --features cuda,tensorrt (GPU paths compile; they cannot run here)"
cargo check -p headroom-cli --features cuda,tensorrt --locked || fail "the CUDA/TensorRT build does not compile"

stage "all checks passed"
