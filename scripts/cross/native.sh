# shellcheck shell=bash disable=SC2154  # root, TARGET, QEMU_CPU, CARGO_BIN: set by scripts/cross-build.sh
# `scripts/cross-build.sh native`: the full headroom binary (default features: tch/libtorch and
# ort/ONNX Runtime) cross-built for aarch64 and run under qemu. Sourced by scripts/cross-build.sh,
# whose functions (fail, step, preflight, cmd_env, glibc_needed) and variables (root, TARGET,
# CARGO_BIN, QEMU_CPU) it uses. docs/CROSS.md, "Native aarch64 build (libtorch + ONNX Runtime) under qemu".
#
# Usage: scripts/cross-build.sh native [deps|build|run|env]   (no word: all three, in order)
#   deps   download the aarch64 wheels of the versions scripts/setup.sh pins, unpack libtorch
#          and ONNX Runtime under $HEADROOM_DEPS_AARCH64 (idempotent; no root)
#   cuda-deps  deps, then the CUDA half of the torch wheel and the CUDA 13 wheels it pins, flat in
#          $HEADROOM_DEPS_AARCH64/cuda/lib (~3 GB; for scripts/bundle.sh --target aarch64-jetpack7)
#   build  cargo build -p headroom-cli --target aarch64-unknown-linux-gnu, default features
#   run    --help, doctor, inspect --check, synth + label, a short train, under qemu: a table
#   env    print the environment build/run use (to source)
# Env:   HEADROOM_DEPS_AARCH64  default /var/cache/headroom/deps-aarch64
#        NATIVE_TARGET_DIR      default /var/cache/headroom/target-aarch64-native (its own:
#                               another feature set and LIBTORCH than `build`'s target dir)
#        NATIVE_JOBS            cargo -j (default 2); NATIVE_NICE niceness (default 10)
#        NATIVE_TIMEOUT         seconds each run step may take (default 900)
#        NATIVE_LOG_DIR         where run keeps each step's log (default: logs/ in its work dir)

native_deps="${HEADROOM_DEPS_AARCH64:-/var/cache/headroom/deps-aarch64}"
native_lt="$native_deps/libtorch"

# The pins, read from scripts/setup.sh so that the two can never differ.
native_pin() {
  local v
  v=$(sed -n "s/^$1=\([0-9.]*\).*/\1/p" "$root/scripts/setup.sh" | head -n1)
  [ -n "$v" ] || fail "scripts/setup.sh has no $1=...: the aarch64 route reads its pins from there"
  echo "$v"
}

native_versions() {
  TORCH_VERSION=$(native_pin TORCH_VERSION)
  CUDART_VERSION=$(native_pin CUDART_VERSION)
  CUPTI_VERSION=$(native_pin CUPTI_VERSION)
  CRT_VERSION=$(native_pin CRT_VERSION)
  native_cuda_include="$native_deps/cuda-headers-$CUDART_VERSION-$CRT_VERSION/nvidia/cu13/include"
  ORT_VERSION=$(native_pin ORT_VERSION)
  native_ort_lib="$native_deps/onnxruntime-$ORT_VERSION/onnxruntime/capi/libonnxruntime.so.$ORT_VERSION"
}

# shellcheck source=../lib/wheels.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/wheels.sh"
native_download() {
  mkdir -p "$native_deps/wheels" || fail "cannot create $native_deps/wheels (set HEADROOM_DEPS_AARCH64)"
  wheel_download "$native_deps/wheels" aarch64 "$@"
}
native_extract() { wheel_extract "$@"; }

# The CPU half of the aarch64 torch wheel. Unlike x86's, its libtorch_cpu.so also needs Arm Compute
# Library, NVPL BLAS/LAPACK and libgfortran (all in torch/lib). libtorch.so and libtorch_cuda.so are
# left out: with libtorch_cuda.so present torch-sys links the CUDA build (430 MB more).
NATIVE_TORCH_LIBS=(libtorch_cpu.so libc10.so libgomp.so.1 libarm_compute.so libarm_compute_graph.so
  libnvpl_blas_core.so.0 libnvpl_blas_lp64_gomp.so.0 libnvpl_lapack_core.so.0
  libnvpl_lapack_lp64_gomp.so.0 libgfortran.so.5)

cmd_native_deps() {
  if ! { command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1; }; then
    fail "python3 and pip are needed to download the wheels (apt-get install python3-pip)"
  fi
  native_versions
  if [ "$(cat "$native_lt/build-version" 2>/dev/null)" != "$TORCH_VERSION" ]; then
    rm -rf "$native_lt" "$native_deps/torch-$TORCH_VERSION"
    local torch_whl cudart_whl cupti_whl src got f members=()
    native_download "torch==$TORCH_VERSION" "torch-$TORCH_VERSION-cp311-*aarch64.whl"; torch_whl=$WHEEL
    native_download "nvidia-cuda-runtime==$CUDART_VERSION" "nvidia_cuda_runtime-$CUDART_VERSION-*aarch64.whl"; cudart_whl=$WHEEL
    native_download "nvidia-cuda-cupti==$CUPTI_VERSION" "nvidia_cuda_cupti-$CUPTI_VERSION-*aarch64.whl"; cupti_whl=$WHEEL
    step "unpacking aarch64 libtorch $TORCH_VERSION (CPU libraries only) into $native_deps"
    src="$native_deps/torch-$TORCH_VERSION"
    for f in "${NATIVE_TORCH_LIBS[@]}"; do members+=("torch/lib/$f"); done
    native_extract "$torch_whl" "$src" "${members[@]}" torch/include/ torch/version.py
    native_extract "$cudart_whl" "$src" nvidia/cu13/lib/libcudart.so.13
    native_extract "$cupti_whl" "$src" nvidia/cu13/lib/libcupti.so.13
    got=$(sed -n "s/^__version__ = '\([^'+]*\).*/\1/p" "$src/torch/version.py")
    [ "$got" = "$TORCH_VERSION" ] || fail "the aarch64 torch wheel says version '$got', expected $TORCH_VERSION"
    mkdir -p "$native_lt/lib"
    for f in "${NATIVE_TORCH_LIBS[@]}"; do ln -s "$src/torch/lib/$f" "$native_lt/lib/$f"; done
    ln -s "$src/torch/lib/libtorch_cpu.so" "$native_lt/lib/libtorch.so"
    ln -s "$src/torch/lib/libgomp.so.1" "$native_lt/lib/libgomp.so"
    ln -s "$src/nvidia/cu13/lib/libcudart.so.13" "$native_lt/lib/libcudart.so.13"
    ln -s "$src/nvidia/cu13/lib/libcupti.so.13" "$native_lt/lib/libcupti.so.13"
    ln -s "$src/torch/include" "$native_lt/include"
    echo "$TORCH_VERSION" > "$native_lt/build-version"   # torch-sys checks this file
  fi
  if [ ! -f "$native_ort_lib" ]; then
    rm -rf "$native_deps/onnxruntime-$ORT_VERSION"
    native_download "onnxruntime==$ORT_VERSION" "onnxruntime-$ORT_VERSION-cp311-*aarch64.whl"
    step "unpacking aarch64 ONNX Runtime $ORT_VERSION"
    native_extract "$WHEEL" "$native_deps/onnxruntime-$ORT_VERSION" \
      "onnxruntime/capi/libonnxruntime.so.$ORT_VERSION" onnxruntime/capi/libonnxruntime_providers_shared.so
    [ -f "$native_ort_lib" ] || fail "the aarch64 onnxruntime wheel has no libonnxruntime.so.$ORT_VERSION"
  fi
  # The CUDA runtime headers (no library) for headroom's CUDA memory readings (scripts/setup.sh).
  if [ ! -f "$native_cuda_include/crt/host_config.h" ]; then
    local headers="$native_deps/cuda-headers-$CUDART_VERSION-$CRT_VERSION"
    rm -rf "$headers"
    native_download "nvidia-cuda-runtime==$CUDART_VERSION" "nvidia_cuda_runtime-$CUDART_VERSION-*aarch64.whl"
    native_extract "$WHEEL" "$headers" nvidia/cu13/include/
    native_download "nvidia-cuda-crt==$CRT_VERSION" "nvidia_cuda_crt-$CRT_VERSION-*aarch64.whl"
    native_extract "$WHEEL" "$headers" nvidia/cu13/include/
    [ -f "$native_cuda_include/crt/host_config.h" ] || fail "no $native_cuda_include/crt/host_config.h in the CUDA wheels"
  fi
  native_check_deps
  step "aarch64 deps ready: libtorch $TORCH_VERSION in $native_lt, ONNX Runtime $ORT_VERSION at $native_ort_lib"
}

# The CUDA half of the aarch64 torch wheel and the CUDA 13 libraries it was built with, for the
# JetPack 7 bundle (scripts/bundle.sh --target aarch64-jetpack7; docs/DECISIONS.md "The JetPack 7
# bundle"): JetPack 7.2 puts Orin on the SBSA CUDA 13 userspace these PyPI wheels are built for.
# The versions are the torch wheel's own pins (its Requires-Dist, and those of the cuda-toolkit
# meta-package it pins), read from the downloaded wheels: nothing here can drift from torch. Every
# shared library of those wheels is unpacked, flat, into $native_cuda_lib (which bundle.sh searches);
# left out: cuSOLVER (only libtorch_cuda_linalg.so, which torch opens for linear algebra, needs it)
# and NVTX (headers).
native_cuda_lib="$native_deps/cuda/lib"
NATIVE_CUDA_TORCH_LIBS=(libtorch_cuda.so libc10_cuda.so libtorch_nvshmem.so)
NATIVE_CUDA_TOOLKIT_PARTS=(nvidia-cublas nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusparse nvidia-nvjitlink
  nvidia-cuda-nvrtc)
NATIVE_CUDA_TORCH_PARTS=(nvidia-cudnn-cu13 nvidia-cusparselt-cu13 nvidia-nccl-cu13 nvidia-nvshmem-cu13)

# wheel_pin WHEEL NAME: the version WHEEL's metadata pins NAME to (`NAME==V` or `NAME==V.*`;
# `NAME<14,>=V` gives V).
wheel_pin() {
  python3 - "$1" "$2" <<'PY' || fail "$1 pins no version of $2"
import re, sys, zipfile
wheel, name = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        m = re.match(rf"Requires-Dist: {re.escape(name)}(?:\[[^\]]*\])?\s*(?:==\s*([0-9][0-9.]*?)(?:\.\*)?|<[0-9.]+,\s*>=\s*([0-9.]+))\s*(;|$)", line)
        if m and "aarch64" in line or m and "platform_machine" not in line:
            print(m.group(1) or m.group(2)); sys.exit(0)
sys.exit(1)
PY
}

cmd_native_cuda_deps() {
  cmd_native_deps
  local torch_whl toolkit_whl toolkit part pin stamp="$native_deps/cuda/versions" want="" got
  torch_whl=$(find "$native_deps/wheels" -maxdepth 1 -name "torch-$TORCH_VERSION-cp311-*aarch64.whl" -print -quit)
  [ -n "$torch_whl" ] || fail "no torch $TORCH_VERSION aarch64 wheel in $native_deps/wheels"
  toolkit=$(wheel_pin "$torch_whl" cuda-toolkit) || exit 1
  want="torch $TORCH_VERSION cuda-toolkit $toolkit"
  for part in "${NATIVE_CUDA_TORCH_PARTS[@]}"; do want+=" $part $(wheel_pin "$torch_whl" "$part")" || exit 1; done
  got=$(cat "$stamp" 2>/dev/null || true)
  if [ "$got" = "$want" ] && [ -f "$native_cuda_lib/libtorch_cuda.so" ]; then
    step "aarch64 CUDA libraries ready in $native_cuda_lib ($want)"
    return 0
  fi
  rm -rf "$native_deps/cuda"
  mkdir -p "$native_cuda_lib" "$native_deps/cuda/unpack"
  native_download "cuda-toolkit==$toolkit" "cuda_toolkit-$toolkit*.whl"; toolkit_whl=$WHEEL
  local specs=()
  for part in "${NATIVE_CUDA_TOOLKIT_PARTS[@]}"; do
    pin=$(wheel_pin "$toolkit_whl" "$part") || exit 1
    specs+=("$part==$pin")
  done
  for part in "${NATIVE_CUDA_TORCH_PARTS[@]}"; do specs+=("$part==$(wheel_pin "$torch_whl" "$part")"); done
  local spec name version members=()
  for spec in "${specs[@]}"; do
    name=${spec%%==*} version=${spec#*==}
    # pip's wheel names: dashes become underscores; the version may carry a post-release suffix.
    native_download "$spec" "${name//-/_}-$version*aarch64.whl"
    native_extract "$WHEEL" "$native_deps/cuda/unpack" nvidia/
  done
  step "unpacking the CUDA part of aarch64 torch $TORCH_VERSION"
  for f in "${NATIVE_CUDA_TORCH_LIBS[@]}"; do members+=("torch/lib/$f"); done
  native_extract "$torch_whl" "$native_deps/cuda/unpack" "${members[@]}"
  # Flat: each library under its file name (the names the loader asks for: sonames).
  find "$native_deps/cuda/unpack" -type f -path '*/lib/*.so*' -exec mv -t "$native_cuda_lib" {} +
  rm -rf "$native_deps/cuda/unpack"
  for f in "${NATIVE_CUDA_TORCH_LIBS[@]}" libcudnn.so.9 libcublas.so.13 libnccl.so.2; do
    [ -f "$native_cuda_lib/$f" ] || fail "the CUDA wheels gave no $f (in $native_cuda_lib)"
  done
  echo "$want" > "$stamp"
  step "aarch64 CUDA libraries ready in $native_cuda_lib: $(du -sm "$native_cuda_lib" | cut -f1) MB ($want)"
}

# Every NEEDED of libtorch_cpu.so and libonnxruntime must be in libtorch/lib or the arm64 multiarch
# glibc/libstdc++ the qemu loader uses (libc6:arm64, libstdc++6:arm64, zlib1g:arm64 from setup).
native_check_deps() {
  local lib needed missing=()
  for lib in "$native_lt"/lib/*.so* "$native_ort_lib"; do
    [ -e "$lib" ] || fail "$lib is a dangling link: delete $native_deps and run scripts/cross-build.sh native deps"
    for needed in $(aarch64-linux-gnu-readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [ -e "$native_lt/lib/$needed" ] || [ -e "/lib/aarch64-linux-gnu/$needed" ] \
        || [ -e "/usr/lib/aarch64-linux-gnu/$needed" ] || [ "$needed" = ld-linux-aarch64.so.1 ] \
        || missing+=("$(basename "$lib") needs $needed")
    done
  done
  [ ${#missing[@]} -eq 0 ] || fail "aarch64 libraries not found: ${missing[*]} \
(libstdc++6:arm64, zlib1g:arm64 come with scripts/cross-build.sh setup's packages)"
}

# The build/run environment: cross-build.sh's, plus libtorch for torch-sys (which compiles its C++
# wrapper with CXX_aarch64_unknown_linux_gnu) and, for the guest only, LD_LIBRARY_PATH through
# QEMU_SET_ENV (x86 tools in this shell never see aarch64 libraries) and ORT_DYLIB_PATH.
native_env() {
  native_versions
  export CARGO_TARGET_DIR="${NATIVE_TARGET_DIR:-/var/cache/headroom/target-aarch64-native}"
  preflight
  if [ ! -f "$native_lt/build-version" ] || [ ! -f "$native_ort_lib" ] || [ ! -f "$native_cuda_include/crt/host_config.h" ]; then
    fail "the aarch64 libtorch, ONNX Runtime or CUDA runtime headers are missing: run scripts/cross-build.sh native deps"
  fi
  export LIBTORCH="$native_lt" LIBTORCH_CXX11_ABI=1
  unset LIBTORCH_USE_PYTORCH LIBTORCH_INCLUDE LIBTORCH_LIB
  # GNU ld resolves libtorch_cpu.so's own NEEDED libraries (ACL, NVPL, CUDA runtime) when linking;
  # the $ORIGIN in its RUNPATH finds them in libtorch/lib today, -rpath-link whatever the layout.
  export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C link-arg=-Wl,-rpath-link,$native_lt/lib"
  export ORT_DYLIB_PATH="$native_ort_lib"
  export HEADROOM_CUDA_INCLUDE="$native_cuda_include"
  export QEMU_SET_ENV="LD_LIBRARY_PATH=$native_lt/lib"
  NATIVE_BIN="$CARGO_TARGET_DIR/$TARGET/debug/headroom"
}

cmd_native_build() {
  native_env
  step "building headroom-cli (default features: libtorch $TORCH_VERSION, ONNX Runtime $ORT_VERSION) for $TARGET into $CARGO_TARGET_DIR"
  local t0=$SECONDS
  (cd "$root" && nice -n "${NATIVE_NICE:-10}" "$CARGO_BIN" build -p headroom-cli --target "$TARGET" \
    -j "${NATIVE_JOBS:-2}" "$@") \
    || fail "cargo build -p headroom-cli --target $TARGET (default features) failed (see above)"
  step "built $NATIVE_BIN in $((SECONDS - t0)) s; it needs glibc >= $(glibc_needed "$NATIVE_BIN")"
}

# native_step NAME NEEDS CHECK -- ARGS...: runs `headroom ARGS` under qemu (NATIVE_TIMEOUT each),
# logs to $native_logs/NAME.log, and records PASS/FAIL/SKIP and the wall time. NEEDS: a step that
# must have passed first (or -); CHECK: an extended regex the output must match (or -).
native_step() {
  local name=$1 needs=$2 check=$3 t0 rc=0 result; shift 4
  local log="$native_logs/$name.log"
  native_cmd[$name]="headroom $*"; native_order+=("$name")
  if [ "$needs" != - ] && [ "${native_result[$needs]:-}" != PASS ]; then
    native_result[$name]="SKIP ($needs did not pass)"; native_time[$name]=-
    return 0
  fi
  step "native run: headroom $*"
  t0=$(date +%s.%N)
  (cd "$native_work" && timeout "${NATIVE_TIMEOUT:-900}" "$root/scripts/cross/qemu-runner.sh" "$NATIVE_BIN" "$@") \
    > "$log" 2>&1 || rc=$?
  native_time[$name]=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  result=PASS
  if [ "$rc" != 0 ]; then
    result="FAIL (exit $rc$([ "$rc" != 124 ] || echo ", timed out"))"
  elif [ "$check" != - ] && ! grep -Eq "$check" "$log"; then
    result="FAIL (no /$check/ in the output)"
  fi
  native_result[$name]=$result
  [ "$result" = PASS ] || { echo "---- last lines of $log:" >&2; tail -n 15 "$log" >&2; }
}

cmd_native_run() {
  native_env
  [ -x "$NATIVE_BIN" ] || fail "$NATIVE_BIN is missing: run scripts/cross-build.sh native build"
  native_work=$(mktemp -d)
  native_logs="${NATIVE_LOG_DIR:-$native_work/logs}"
  mkdir -p "$native_logs"
  declare -gA native_result=() native_time=() native_cmd=()
  native_order=()
  local fixture="$root/tests/fixtures/onnx/yolov8n-w00625-nc3-160.onnx"
  local teacher="$root/models/demo/teacher-shapes-160.onnx" t0=$SECONDS
  step "running $NATIVE_BIN under $(qemu-aarch64-static --version | head -n1) (QEMU_CPU=$QEMU_CPU), \
work dir $native_work, logs in $native_logs"
  native_step help - 'Usage: headroom' -- --help
  native_step doctor - 'libtorch +ok' -- doctor
  native_step inspect - 'PASS' -- inspect "$fixture" --check
  native_step synth - - -- synth --out synth --train 4 --val 2 --size 160x160
  native_step label synth 'labelled 4 of 4' -- label --teacher "$teacher" --images synth/images/train \
    --out labelled --workers 1
  # 4 images, batch 2, nominal batch 2: two optimiser steps, then the epoch's evaluation.
  native_step train label - -- train --model "$fixture" --data labelled/data.yaml --epochs 1 --batch 2 \
    --nbs 2 --threads 2 --project runs --name native
  if [ "${native_result[train]}" = PASS ] && [ ! -f "$native_work/runs/native/best.onnx" ]; then
    native_result[train]="FAIL (no runs/native/best.onnx)"
  fi
  native_report "$((SECONDS - t0))"
}

# The table (markdown, so docs/CROSS.md can take it as is); fails when any step did not pass.
native_report() {
  local name failed=0
  {
    echo
    echo "aarch64 headroom (libtorch $TORCH_VERSION, ONNX Runtime $ORT_VERSION) under \
$(qemu-aarch64-static --version | head -n1), QEMU_CPU=$QEMU_CPU: $1 s in all"
    echo
    echo "| step | result | wall s | command |"
    echo "|---|---|---|---|"
    for name in "${native_order[@]}"; do
      echo "| $name | ${native_result[$name]} | ${native_time[$name]} | \`${native_cmd[$name]//$root\//}\` |"
      [ "${native_result[$name]}" = PASS ] || failed=1
    done
    echo
  } >&2
  [ "$failed" = 0 ] || fail "native run under qemu: a step failed (logs in $native_logs)"
  rm -rf "$native_work/synth" "$native_work/labelled" "$native_work/runs"
  step "native run: all steps passed (logs in $native_logs)"
}

cmd_native_env() {
  native_env
  cmd_env | grep -v '^#'
  cat <<EOF
export LIBTORCH=$LIBTORCH
export LIBTORCH_CXX11_ABI=$LIBTORCH_CXX11_ABI
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS"
export ORT_DYLIB_PATH=$ORT_DYLIB_PATH
export QEMU_SET_ENV=$QEMU_SET_ENV
export NATIVE_CUDA_LIB=$native_cuda_lib
export HEADROOM_CUDA_INCLUDE=$native_cuda_include
# then: $CARGO_BIN build -p headroom-cli --target $TARGET
#       scripts/cross/qemu-runner.sh $NATIVE_BIN doctor
EOF
}

cmd_native() {
  case "${1:-all}" in
    deps) shift; cmd_native_deps "$@" ;;
    cuda-deps) shift; cmd_native_cuda_deps "$@" ;;
    build) shift; cmd_native_build "$@" ;;
    run) shift; cmd_native_run "$@" ;;
    env) shift; cmd_native_env "$@" ;;
    all) [ $# -eq 0 ] || shift; cmd_native_deps; cmd_native_build; cmd_native_run ;;
    *) fail "native: unknown step '$1' (deps, cuda-deps, build, run, env; none for deps, build and run)" ;;
  esac
}
