#!/usr/bin/env bash
# The GPU check on the machine the `device` tool lends (docs/GPU.md "On the lent GPU machine"): it has
# no network and no Rust, and its Python holds PyTorch 2.11 (CUDA 13) and a CPU onnxruntime 1.30.
# So the binary is built here, against the CPU part of the same PyTorch version, and carried there
# alone; there it links the machine's own libtorch, loads its libtorch_cuda.so, and scripts/gpu-check.sh
# runs every GPU path it can (doctor, train --device cuda --amp, plan against the CUDA allocator's peak;
# the CUDA and TensorRT execution providers are skipped: that ONNX Runtime is a CPU build).
#
#   scripts/device-check.sh build   here: scripts/setup.sh --libs device (libtorch 2.11.0, ONNX
#                                   Runtime 1.30.0), a dev build with the cuda and tensorrt features into
#                                   ${CARGO_TARGET_DIR:-target}-device, stripped to .device/headroom
#                                   (git-ignored, ~15 MB: carry it)
#   scripts/device-check.sh run     there: python3's torch and onnxruntime, .device/headroom,
#                                   scripts/gpu-check.sh with results under $OUT/gpu-check
#   scripts/device-check.sh smoke   here: .device/headroom --version and doctor against the device
#                                   set's CPU libraries (what `build` can check without a GPU)
# The device tool's call: run(command="bash scripts/device-check.sh run", carry=[".device"],
# timeout_s=540). Record what it printed in docs/GPU.md and docs/GUIDE.md.
# shellcheck source=lib/errtrap.sh
source "$(dirname "$0")/lib/errtrap.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "device-check: error: $*" >&2; exit 2; }
step() { headroom_step "$*"; echo "device-check: $*" >&2; }
bin="$root/.device/headroom"

case "${1:-}" in
  build)
    step "scripts/setup.sh --libs device"
    "$root/scripts/setup.sh" --libs device || fail "scripts/setup.sh --libs device (see above)"
    # shellcheck source=/dev/null
    source "$root/.deps/env-device.sh"
    target_dir="${CARGO_TARGET_DIR:-$root/target}-device"
    step "cargo build -p headroom-cli --features cuda,tensorrt into $target_dir (against libtorch $(cat "$LIBTORCH/build-version"))"
    (cd "$root" && CARGO_TARGET_DIR="$target_dir" cargo build -p headroom-cli --locked --features cuda,tensorrt) \
      || fail "cargo build failed (see above)"
    mkdir -p "$root/.device"
    strip --strip-debug -o "$bin.tmp" "$target_dir/debug/headroom" && mv "$bin.tmp" "$bin" || fail "strip failed"
    step "ready: $bin ($(du -m "$bin" | cut -f1) MB): carry .device to the device and run scripts/device-check.sh run"
    ;;
  smoke)
    [ -x "$bin" ] || fail "$bin is missing: scripts/device-check.sh build"
    # shellcheck source=/dev/null
    source "$root/.deps/env-device.sh"
    "$bin" --version
    "$bin" doctor
    ;;
  run)
    [ -x "$bin" ] || fail "$bin is missing: run scripts/device-check.sh build here, and carry .device"
    out="${OUT:-$root/runs}/gpu-check"
    step "scripts/gpu-check.sh with $bin and python3's libraries; results in $out"
    HEADROOM_GPU_BIN="$bin" HEADROOM_GPU_LIBS=python HEADROOM_GPU_CHECK_OUT="$out" \
      HEADROOM_GPU_CHECK_BUDGET_S="${HEADROOM_GPU_CHECK_BUDGET_S:-400}" bash "$root/scripts/gpu-check.sh"
    ;;
  *) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
