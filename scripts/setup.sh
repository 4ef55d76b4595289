#!/usr/bin/env bash
# Installs headroom's native dependencies (git-ignored), idempotently, from pinned PyPI wheels
# (nothing else is downloaded), in one of two sets, the ends of the range headroom builds against
# (docs/DECISIONS.md "libtorch and ONNX Runtime versions"):
#   newest (default): libtorch 2.13.0 (tch 0.26.0's own), ONNX Runtime 1.31.1
#   oldest:           libtorch 2.5.1 (JetPack 6's PyTorch is 2.5), ONNX Runtime 1.20.1 (JetPack 6's)
# Each set is the light CPU part of the PyPI torch wheel (libtorch_cpu, libc10, libgomp and the two
# CUDA runtime libraries libtorch_cpu links even on CPU) and libonnxruntime from its wheel. It writes
# .deps/env.sh (newest) or .deps/env-oldest.sh (oldest), which every other script sources
# (LIBTORCH, LIBTORCH_CXX11_ABI, ORT_DYLIB_PATH, LD_LIBRARY_PATH).
#
# Usage: scripts/setup.sh [--libs newest|oldest|device]   (then: source .deps/env.sh, env-oldest.sh or env-device.sh)
# Env:   HEADROOM_LIBS         the set, when --libs is not given (default newest).
#        HEADROOM_DEPS         where the libraries go (default .deps). CI points it outside the clone:
#                              tch's C++ wrapper is rebuilt whenever LIBTORCH's path changes.
#        HEADROOM_WHEEL_CACHE  folder for downloaded wheels (default $HEADROOM_DEPS/wheels).
# The env files are always written inside the checkout.
# shellcheck source=lib/errtrap.sh
source "$(dirname "$0")/lib/errtrap.sh"
headroom_step "checking prerequisites"

fail() { echo "setup: error: $*" >&2; exit 1; }
step() { headroom_step "$*"; echo "setup: $*" >&2; }

# The newest set (scripts/cross/native.sh reads these four lines for its aarch64 wheels).
TORCH_VERSION=2.13.0
CUDART_VERSION=13.0.96   # libcudart.so.13: libtorch_cpu links it even on CPU
CUPTI_VERSION=13.0.85    # libcupti.so.13: likewise (profiler)
CRT_VERSION=13.0.88      # nvidia-cuda-crt: crt/host_config.h, which the CUDA runtime headers include
ORT_VERSION=1.31.1
# The oldest set: JetPack 6's PyTorch 2.5 and ONNX Runtime 1.20; PyPI's torch 2.5.1 links CUDA 12.4's.
OLDEST_TORCH_VERSION=2.5.1
OLDEST_CUDA12_VERSION=12.4.127
OLDEST_ORT_VERSION=1.20.1
# The device set: the lent GPU machine's PyTorch 2.11 and ONNX Runtime 1.30, to build a binary here
# that runs there on its own CUDA libtorch (scripts/device-check.sh; not tested in CI).
DEVICE_TORCH_VERSION=2.11.0
DEVICE_ORT_VERSION=1.30.0

libs=${HEADROOM_LIBS:-newest}
case "${1:-}" in
  --libs) [ $# -ge 2 ] || fail "--libs needs newest, oldest or device"; libs=$2 ;;
  --libs=*) libs=${1#--libs=} ;;
  "") ;;
  *) fail "unknown argument '$1' (usage: scripts/setup.sh [--libs newest|oldest|device])" ;;
esac
case "$libs" in
  newest)
    CUDA_HEADERS=cu13
    CUDART_WHEEL=nvidia-cuda-runtime==$CUDART_VERSION CUDART_LIB=nvidia/cu13/lib/libcudart.so.13
    CUPTI_WHEEL=nvidia-cuda-cupti==$CUPTI_VERSION CUPTI_LIB=nvidia/cu13/lib/libcupti.so.13
    LAYOUT=libtorch LT_NAME=libtorch ENV_NAME=env.sh ;;
  oldest)
    CUDA_HEADERS=""   # the CUDA memory readings are compiled without headers here (they answer "not built in")
    TORCH_VERSION=$OLDEST_TORCH_VERSION ORT_VERSION=$OLDEST_ORT_VERSION
    CUDART_WHEEL=nvidia-cuda-runtime-cu12==$OLDEST_CUDA12_VERSION CUDART_LIB=nvidia/cuda_runtime/lib/libcudart.so.12
    CUPTI_WHEEL=nvidia-cuda-cupti-cu12==$OLDEST_CUDA12_VERSION CUPTI_LIB=nvidia/cuda_cupti/lib/libcupti.so.12
    LAYOUT=wheel ENV_NAME=env-oldest.sh ;;
  device)
    CUDA_HEADERS=cu13
    TORCH_VERSION=$DEVICE_TORCH_VERSION ORT_VERSION=$DEVICE_ORT_VERSION
    CUDART_WHEEL=nvidia-cuda-runtime==$CUDART_VERSION CUDART_LIB=nvidia/cu13/lib/libcudart.so.13
    CUPTI_WHEEL=nvidia-cuda-cupti==$CUPTI_VERSION CUPTI_LIB=nvidia/cu13/lib/libcupti.so.13
    LAYOUT=libtorch LT_NAME=libtorch-device ENV_NAME=env-device.sh ;;
  *) fail "unknown set '$libs': newest, oldest or device" ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
deps="${HEADROOM_DEPS:-$root/.deps}"
wheels="${HEADROOM_WHEEL_CACHE:-$deps/wheels}"

mkdir -p "$deps" "$wheels" "$root/.deps" \
  || fail "cannot create $deps, $wheels or $root/.deps (set HEADROOM_DEPS / HEADROOM_WHEEL_CACHE)"

command -v python3 >/dev/null || fail "python3 is needed to download the pinned wheels (apt-get install python3 python3-pip)"
python3 -m pip --version >/dev/null 2>&1 || fail "pip is needed (apt-get install python3-pip)"

# shellcheck source=lib/wheels.sh
source "$(dirname "$0")/lib/wheels.sh"
download() { wheel_download "$wheels" x86_64 "$@"; }
extract() { wheel_extract "$@"; }
# The file name pattern of a NAME==VERSION wheel (pip's names: '-' becomes '_').
wheel_glob() { local name=${1%%==*}; printf '%s-%s-*.whl' "${name//-/_}" "${1#*==}"; }

[ "$(uname -m)" = x86_64 ] || fail "scripts/setup.sh installs x86_64 libraries; on $(uname -m) see docs/CROSS.md"

# --- libtorch -----------------------------------------------------------------------------
# Two layouts: newest, a libtorch folder of links (lib/, include/; LIBTORCH=$deps/libtorch); oldest,
# the wheel's own (LIBTORCH=$deps/torch-VERSION/torch, CUDA libraries in ../nvidia/, found through
# libtorch_cpu's RPATH), the layout of a pip-installed PyTorch on a Jetson, which the oldest CI run
# and scripts/tests/bundle.sh --native build against as JetPack's would be.
src="$deps/torch-$TORCH_VERSION"
if [ "$LAYOUT" = libtorch ]; then lt="$deps/$LT_NAME"; else lt="$src/torch"; fi
if [ "$(cat "$lt/build-version" 2>/dev/null)" != "$TORCH_VERSION" ]; then
  rm -rf "$src"
  if [ "$LAYOUT" = libtorch ]; then rm -rf "$lt"; fi
  download "torch==$TORCH_VERSION" "torch-$TORCH_VERSION-cp311-*.whl"; torch_whl=$WHEEL
  download "$CUDART_WHEEL" "$(wheel_glob "$CUDART_WHEEL")"; cudart_whl=$WHEEL
  download "$CUPTI_WHEEL" "$(wheel_glob "$CUPTI_WHEEL")"; cupti_whl=$WHEEL
  step "unpacking libtorch $TORCH_VERSION (CPU libraries only)"
  # libgomp is libgomp.so.1 in newer wheels, libgomp-HASH.so.1 in older ones.
  extract "$torch_whl" "$src" torch/lib/libtorch_cpu.so torch/lib/libtorch.so torch/lib/libc10.so \
    torch/lib/libgomp torch/include/ torch/version.py
  extract "$cudart_whl" "$src" "$CUDART_LIB"
  extract "$cupti_whl" "$src" "$CUPTI_LIB"
  got=$(sed -n "s/^__version__ = '\([^'+]*\).*/\1/p" "$src/torch/version.py")
  [ "$got" = "$TORCH_VERSION" ] || fail "the torch wheel says version '$got', expected $TORCH_VERSION"
  gomp=$(find "$src/torch/lib" -maxdepth 1 -name 'libgomp*.so.1' -print -quit)
  [ -n "$gomp" ] || fail "the torch $TORCH_VERSION wheel has no torch/lib/libgomp*.so.1"
  if [ "$LAYOUT" = libtorch ]; then
    mkdir -p "$lt/lib"
    # Only these: with libtorch_cuda.so present, torch-sys would link the CUDA build.
    ln -s "$src/torch/lib/libtorch_cpu.so" "$lt/lib/libtorch_cpu.so"
    ln -s "$src/torch/lib/libtorch_cpu.so" "$lt/lib/libtorch.so"
    ln -s "$src/torch/lib/libc10.so" "$lt/lib/libc10.so"
    ln -s "$gomp" "$lt/lib/$(basename "$gomp")"
    ln -s "$gomp" "$lt/lib/libgomp.so"
    ln -s "$src/$CUDART_LIB" "$lt/lib/$(basename "$CUDART_LIB")"
    ln -s "$src/$CUPTI_LIB" "$lt/lib/$(basename "$CUPTI_LIB")"
    ln -s "$src/torch/include" "$lt/include"
  fi
  echo "$TORCH_VERSION" > "$lt/build-version"
fi

# --- ONNX Runtime -------------------------------------------------------------------------
ort_dir="$deps/onnxruntime-$ORT_VERSION"
ort_lib="$ort_dir/onnxruntime/capi/libonnxruntime.so.$ORT_VERSION"
if [ ! -f "$ort_lib" ]; then
  rm -rf "$ort_dir"
  download "onnxruntime==$ORT_VERSION" "onnxruntime-$ORT_VERSION-cp311-*.whl"; ort_whl=$WHEEL
  step "unpacking ONNX Runtime $ORT_VERSION"
  extract "$ort_whl" "$ort_dir" "onnxruntime/capi/libonnxruntime.so.$ORT_VERSION" \
    onnxruntime/capi/libonnxruntime_providers_shared.so
  [ -f "$ort_lib" ] || fail "the onnxruntime wheel has no libonnxruntime.so.$ORT_VERSION"
fi

# --- CUDA runtime headers ---------------------------------------------------------------
# Only headers, no library: vendor/torch-sys compiles headroom's CUDA memory readings with them
# (libtch/headroom_cuda.cpp), which then work wherever libtorch's CUDA part is loaded at run time.
cuda_include_line=""
if [ -n "$CUDA_HEADERS" ]; then
  cuda_include="$deps/cuda-headers-$CUDART_VERSION-$CRT_VERSION/nvidia/$CUDA_HEADERS/include"
  if [ ! -f "$cuda_include/cuda_runtime.h" ] || [ ! -f "$cuda_include/crt/host_config.h" ]; then
    rm -rf "$deps/cuda-headers-$CUDART_VERSION-$CRT_VERSION"
    download "$CUDART_WHEEL" "$(wheel_glob "$CUDART_WHEEL")"; cudart_whl=$WHEEL
    download "nvidia-cuda-crt==$CRT_VERSION" "$(wheel_glob "nvidia-cuda-crt==$CRT_VERSION")"; crt_whl=$WHEEL
    step "unpacking the CUDA $CUDART_VERSION runtime headers"
    extract "$cudart_whl" "$deps/cuda-headers-$CUDART_VERSION-$CRT_VERSION" "nvidia/$CUDA_HEADERS/include/"
    extract "$crt_whl" "$deps/cuda-headers-$CUDART_VERSION-$CRT_VERSION" "nvidia/$CUDA_HEADERS/include/"
    [ -f "$cuda_include/crt/host_config.h" ] || fail "the CUDA runtime and crt wheels gave no $cuda_include/crt/host_config.h"
  fi
  cuda_include_line="export HEADROOM_CUDA_INCLUDE=\"$cuda_include\""
fi

# --- checks -------------------------------------------------------------------------------
for f in "$lt/lib/libtorch_cpu.so" "$lt/lib/libtorch.so" "$lt/lib/libc10.so" "$src/$CUDART_LIB" "$src/$CUPTI_LIB"; do
  [ -e "$f" ] || fail "$f is missing: delete $deps and run scripts/setup.sh again"
done
missing=$(LD_LIBRARY_PATH="$lt/lib" ldd "$lt/lib/libtorch_cpu.so" | grep 'not found' || true)
[ -z "$missing" ] || fail "libtorch_cpu.so cannot find: $missing"
missing=$(ldd "$ort_lib" | grep 'not found' || true)
[ -z "$missing" ] || fail "libonnxruntime cannot find: $missing"

# The PyPI wheels up to 2.5 use the old C++ string ABI, later ones the C++11 ABI: libc10's names say.
abi=0
if grep -q B5cxx11 "$lt/lib/libc10.so"; then abi=1; fi
cat > "$root/.deps/$ENV_NAME" <<ENV
# Written by scripts/setup.sh --libs $libs: source it before cargo or the headroom binary.
export LIBTORCH="$lt"
export LIBTORCH_CXX11_ABI=$abi
export ORT_DYLIB_PATH="$ort_lib"
export LD_LIBRARY_PATH="$lt/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
${cuda_include_line:-unset HEADROOM_CUDA_INCLUDE}
ENV
step "ready ($libs set, .deps/$ENV_NAME): libtorch $TORCH_VERSION in $lt, ONNX Runtime $ORT_VERSION at $ort_lib ($({ du -shL "$deps" --exclude=wheels --exclude=ultralytics 2>/dev/null || true; } | cut -f1) installed)"
