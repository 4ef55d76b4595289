#!/usr/bin/env bash
# Installs headroom's native dependencies into .deps/ (git-ignored), idempotently:
#   - libtorch 2.13.0 (what tch 0.26.0 requires), the light CPU set from the PyPI torch wheel
#   - ONNX Runtime 1.31.1 (what ort 2.0.0-rc.15 with api-31 requires), from the PyPI wheel
# and writes .deps/env.sh, which every other script sources (LIBTORCH, ORT_DYLIB_PATH,
# LD_LIBRARY_PATH). Everything comes from pinned PyPI wheels: nothing else is downloaded.
#
# Usage: scripts/setup.sh            (then: source .deps/env.sh)
# Env:   HEADROOM_DEPS         where the libraries go (default .deps). CI points it outside the clone:
#                              tch's 7-minute C++ build is redone whenever LIBTORCH's path changes.
#        HEADROOM_WHEEL_CACHE  folder for downloaded wheels (default $HEADROOM_DEPS/wheels).
# .deps/env.sh is always written inside the checkout.
# shellcheck source=lib/errtrap.sh
source "$(dirname "$0")/lib/errtrap.sh"
headroom_step "checking prerequisites"

TORCH_VERSION=2.13.0
CUDART_VERSION=13.0.96   # libcudart.so.13: libtorch_cpu links it even on CPU
CUPTI_VERSION=13.0.85    # libcupti.so.13: likewise (profiler)
ORT_VERSION=1.31.1

root=$(cd "$(dirname "$0")/.." && pwd)
deps="${HEADROOM_DEPS:-$root/.deps}"
wheels="${HEADROOM_WHEEL_CACHE:-$deps/wheels}"

fail() { echo "setup: error: $*" >&2; exit 1; }
step() { headroom_step "$*"; echo "setup: $*" >&2; }

mkdir -p "$deps" "$wheels" "$root/.deps" \
  || fail "cannot create $deps, $wheels or $root/.deps (set HEADROOM_DEPS / HEADROOM_WHEEL_CACHE)"

command -v python3 >/dev/null || fail "python3 is needed to download the pinned wheels (apt-get install python3 python3-pip)"
python3 -m pip --version >/dev/null 2>&1 || fail "pip is needed (apt-get install python3-pip)"

# shellcheck source=lib/wheels.sh
source "$(dirname "$0")/lib/wheels.sh"
download() { wheel_download "$wheels" x86_64 "$@"; }
extract() { wheel_extract "$@"; }

[ "$(uname -m)" = x86_64 ] || fail "scripts/setup.sh installs x86_64 libraries; on $(uname -m) see docs/CROSS.md"

# --- libtorch -----------------------------------------------------------------------------
lt="$deps/libtorch"
if [ "$(cat "$lt/build-version" 2>/dev/null)" != "$TORCH_VERSION" ]; then
  rm -rf "$lt" "$deps/torch-$TORCH_VERSION"
  download "torch==$TORCH_VERSION" "torch-$TORCH_VERSION-cp311-*.whl"; torch_whl=$WHEEL
  download "nvidia-cuda-runtime==$CUDART_VERSION" "nvidia_cuda_runtime-$CUDART_VERSION-*.whl"; cudart_whl=$WHEEL
  download "nvidia-cuda-cupti==$CUPTI_VERSION" "nvidia_cuda_cupti-$CUPTI_VERSION-*.whl"; cupti_whl=$WHEEL
  step "unpacking libtorch $TORCH_VERSION (CPU libraries only)"
  src="$deps/torch-$TORCH_VERSION"
  extract "$torch_whl" "$src" torch/lib/libtorch_cpu.so torch/lib/libc10.so torch/lib/libgomp.so.1 \
    torch/include/ torch/version.py
  extract "$cudart_whl" "$src" nvidia/cu13/lib/libcudart.so.13
  extract "$cupti_whl" "$src" nvidia/cu13/lib/libcupti.so.13
  got=$(sed -n "s/^__version__ = '\([^'+]*\).*/\1/p" "$src/torch/version.py")
  [ "$got" = "$TORCH_VERSION" ] || fail "the torch wheel says version '$got', expected $TORCH_VERSION"
  mkdir -p "$lt/lib"
  # Only these: with libtorch_cuda.so present, torch-sys would link the CUDA build.
  ln -s "$src/torch/lib/libtorch_cpu.so" "$lt/lib/libtorch_cpu.so"
  ln -s "$src/torch/lib/libtorch_cpu.so" "$lt/lib/libtorch.so"
  ln -s "$src/torch/lib/libc10.so" "$lt/lib/libc10.so"
  ln -s "$src/torch/lib/libgomp.so.1" "$lt/lib/libgomp.so.1"
  ln -s "$src/torch/lib/libgomp.so.1" "$lt/lib/libgomp.so"
  ln -s "$src/nvidia/cu13/lib/libcudart.so.13" "$lt/lib/libcudart.so.13"
  ln -s "$src/nvidia/cu13/lib/libcupti.so.13" "$lt/lib/libcupti.so.13"
  ln -s "$src/torch/include" "$lt/include"
  echo "$TORCH_VERSION" > "$lt/build-version"   # torch-sys checks this file
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

# --- checks -------------------------------------------------------------------------------
for f in libtorch_cpu.so libc10.so libgomp.so.1 libcudart.so.13 libcupti.so.13; do
  [ -e "$lt/lib/$f" ] || fail "$lt/lib/$f is missing: delete $deps and run scripts/setup.sh again"
done
missing=$(LD_LIBRARY_PATH="$lt/lib" ldd "$lt/lib/libtorch_cpu.so" | grep 'not found' || true)
[ -z "$missing" ] || fail "libtorch_cpu.so cannot find: $missing"
missing=$(ldd "$ort_lib" | grep 'not found' || true)
[ -z "$missing" ] || fail "libonnxruntime cannot find: $missing"

cat > "$root/.deps/env.sh" <<ENV
# Written by scripts/setup.sh: source it before cargo or the headroom binary.
export LIBTORCH="$lt"
export LIBTORCH_CXX11_ABI=1
export ORT_DYLIB_PATH="$ort_lib"
export LD_LIBRARY_PATH="$lt/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
ENV
step "ready: libtorch $TORCH_VERSION in $lt, ONNX Runtime $ORT_VERSION at $ort_lib ($({ du -shL "$deps" --exclude=wheels --exclude=ultralytics 2>/dev/null || true; } | cut -f1) installed)"
