#!/usr/bin/env bash
# Verifies headroom's GPU paths on any Linux machine with an NVIDIA GPU and its driver (docs/GPU.md).
# It installs the CUDA builds of the pinned native libraries from PyPI, builds headroom with the
# `cuda` and `tensorrt` features, then runs every GPU path, each timed and under a time limit:
#   doctor (GPU code carried, kernels launched) · label --ep cuda · label --ep tensorrt
#   · label --runtime torch (the teacher in libtorch, fp16) · train --device cuda --amp (2 epochs)
#   · plan, and the planner's estimate against the measured GPU peak · export --engine (if trtexec)
# and prints one table of PASS / FAIL / SKIP, also written to $OUT/results.txt (and .tsv).
#
# Usage: scripts/gpu-check.sh             (in a clone: install, build, check)
#        bundle/scripts/gpu-check.sh      (in an unpacked bundle: its bin/headroom and lib/, no build)
# Exit:  0 every check passed or was skipped; 1 a check failed; 2 it could not run (no GPU, no
#        driver, an install or a tool missing): the message says which.
# Env:   HEADROOM_GPU              GPU index (default 0)
#        HEADROOM_GPU_DEPS         where the CUDA libraries go (default .deps/gpu, ~6 GB)
#        HEADROOM_WHEEL_CACHE      pip's download cache (default $HEADROOM_GPU_DEPS/pip-cache)
#        HEADROOM_GPU_CHECK_OUT    results and logs (default runs/gpu-check)
#        HEADROOM_GPU_CHECK_BUDGET_S  seconds for all checks after install and build (default 480)
#        HEADROOM_GPU_SKIP_INSTALL=1  use LIBTORCH, ORT_DYLIB_PATH and LD_LIBRARY_PATH as they are
#                                  (a Jetson with JetPack's libraries, or any own CUDA build)
#        HEADROOM_GPU_LIBS=python  take libtorch and ONNX Runtime from python3's torch and
#                                  onnxruntime packages (JetPack's wheels; a machine with PyTorch)
#        HEADROOM_GPU_BIN          a headroom already built (against the same libtorch minor
#                                  version): no cargo, no build. Default in a bundle: its bin/headroom
#        CARGO_TARGET_DIR          default target/gpu (its own: other libtorch, other RUSTFLAGS)
#        TRTEXEC                   trtexec for the engine check (else JetPack's path, then PATH)
#        HEADROOM_GPU_CHECK_ROOT   read /etc/nv_tegra_release and /proc/device-tree/model under this
#                                  root (a container with the host's files mounted there)
# On a Jetson (Tegra: /etc/nv_tegra_release, a Jetson device tree, a GPU named Orin/nvgpu, or
# memory [N/A] on aarch64; nvidia-smi may be missing, as on JetPack 6)
# nvidia-smi reads [N/A] for memory (NVML has no memory queries there; CPU and GPU share one pool):
# the memory is MemTotal, the training peak comes from tegrastats' RAM (else MemTotal -
# MemAvailable), plan uses --board auto, and PyPI's CUDA 13 install is refused at once.
# Every variable it reads may be unset (`env -i`, systemd); nvidia-smi values that are not numbers
# are shown as unknown. Not yet run on a GPU: see docs/GPU.md for what that means for its results.
# shellcheck source=lib/errtrap.sh
source "$(dirname "$0")/lib/errtrap.sh"
headroom_step "checking for an NVIDIA GPU"

TORCH_VERSION=2.13.0           # tch 0.26.0 needs exactly this libtorch (PyPI's is a CUDA 13 build)
ORT_VERSION=1.31.1             # ort 2.0.0-rc.15 with api-31; onnxruntime-gpu 1.31.1 is built for CUDA 13
TRT_LIBS_VERSION=10.16.1.11    # ORT 1.31.1's TensorRT EP needs libnvinfer.so.10 (CUDA 13 build)
MIN_DRIVER=580                 # CUDA 13 needs driver >= 580
MIN_COMPUTE=7.5                # CUDA 13 dropped Maxwell, Pascal and Volta

root=$(cd "$(dirname "$0")/.." && pwd)
gpu="${HEADROOM_GPU:-0}"
deps="${HEADROOM_GPU_DEPS:-$root/.deps/gpu}"
out="${HEADROOM_GPU_CHECK_OUT:-$root/runs/gpu-check}"
budget="${HEADROOM_GPU_CHECK_BUDGET_S:-480}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/gpu}"
teacher="$root/models/demo/teacher-shapes-160.onnx"
student="$root/models/demo/yolov8n-shapes-160.onnx"

fail() { echo "gpu-check: error: $*" >&2; exit 2; }
step() { headroom_step "$*"; echo "gpu-check: $*" >&2; }

# ------------------------------------------------------------------------------------------
# preflight: fails in seconds, before anything is installed
# ------------------------------------------------------------------------------------------

# tegra_board_files: the board's own word that it is a Jetson, without nvidia-smi (JetPack 6 has
# none): the first line of /etc/nv_tegra_release, else a device-tree model naming a Jetson.
# HEADROOM_GPU_CHECK_ROOT reads them under another root (a container with the host's files mounted).
board_root="${HEADROOM_GPU_CHECK_ROOT:-}"
tegra_board_files() {
  local release="$board_root/etc/nv_tegra_release" model="$board_root/proc/device-tree/model" text
  if [ -r "$release" ]; then
    text=$(head -n 1 "$release" | sed 's/^# *//' || true)
    echo "L4T ${text:-(nv_tegra_release)}"
  elif [ -r "$model" ] && text=$(tr -d '\0' < "$model") && grep -qiE 'jetson|orin|tegra|xavier|thor' <<<"$text"; then
    echo "$text"
  fi
}
query() { timeout 30 nvidia-smi -i "$gpu" --query-gpu="$1" --format=csv,noheader,nounits 2>/dev/null | head -n1 | sed 's/^ *//; s/ *$//' || true; }
if command -v nvidia-smi >/dev/null; then
  gpus=$(timeout 30 nvidia-smi -L 2>&1) \
    || fail "no NVIDIA GPU usable: \`nvidia-smi -L\` failed or hung for 30 s: ${gpus:-no output} (is the driver loaded? in a container: --gpus all)"
  grep -q '^GPU ' <<<"$gpus" || fail "no NVIDIA GPU: nvidia-smi lists none ($gpus)"
  gpu_name=$(query name)
else
  board=$(tegra_board_files)
  [ -n "$board" ] \
    || fail "no NVIDIA GPU: nvidia-smi is not on PATH and this is no Jetson (no /etc/nv_tegra_release, no Jetson device tree): install the NVIDIA driver and check with \`nvidia-smi -L\` (docs/GPU.md)"
  # A Jetson without nvidia-smi: the GPU is the board's; nothing to query.
  query() { :; }
  gpus="GPU $gpu: $board"
  gpu_name="Jetson GPU (no nvidia-smi; $board)"
fi
# number VALUE: VALUE when it is a number or a dotted version, else nothing: nvidia-smi's [N/A],
# "Not Supported" and error text are unknown values, never compared.
number() { if [[ "${1:-}" =~ ^[0-9]+(\.[0-9]+)*$ ]]; then echo "$1"; fi; }
# meminfo_kib FIELD: a /proc/meminfo field (MemTotal, MemAvailable) in KiB, or nothing.
meminfo_kib() { awk -v f="$1:" '$1 == f { print $2; exit }' /proc/meminfo 2>/dev/null || true; }
# `nvidia-smi -L` names it too ("GPU 0: Orin (nvgpu)"), where the query does not answer.
[ -n "$gpu_name" ] || gpu_name=$(sed -n "s/^GPU $gpu: //p" <<<"$gpus" | sed 's/ (UUID: .*)$//' | head -n1 || true)
[ -n "$gpu_name" ] || fail "nvidia-smi knows no GPU $gpu (HEADROOM_GPU); it lists: $gpus"
driver_said=$(query driver_version)
driver=$(number "$driver_said")
gpu_mib=$(number "$(query memory.total)")
compute=$(number "$(query compute_cap)")
# A Jetson (jetson-containers issue 1403, anduril/jetpack-nixos pull request 371): nvidia-smi lists
# `Orin (nvgpu)` and reads [N/A] for memory; CPU and GPU share the DRAM, so the memory is MemTotal.
tegra=0
if [ -n "$(tegra_board_files)" ] || grep -qiE 'orin|nvgpu|tegra|xavier|thor|jetson' <<<"$gpu_name" \
  || { [ -z "$gpu_mib" ] && [ "$(uname -m)" = aarch64 ]; }; then
  tegra=1
  total_kib=$(number "$(meminfo_kib MemTotal)")
  gpu_mib=""
  [ -z "$total_kib" ] || gpu_mib=$((total_kib / 1024))
  memory_note="${gpu_mib:-unknown} MiB shared by CPU and GPU (MemTotal, /proc/meminfo)"
elif [ -n "$gpu_mib" ]; then
  memory_note="$gpu_mib MiB"
else
  memory_note="memory unknown (nvidia-smi)"
fi
# The PyPI wheels are CUDA 13 builds; libraries given with HEADROOM_GPU_SKIP_INSTALL (JetPack's
# CUDA 12, say) have their own requirements, which the checks themselves will show.
if [ "${HEADROOM_GPU_SKIP_INSTALL:-0}" != 1 ] && [ -z "${HEADROOM_GPU_BIN:-}" ] \
  && [ "${HEADROOM_GPU_LIBS:-}" != python ] && [ -f "$root/Cargo.toml" ]; then
  [ "$tegra" = 0 ] || fail "$gpu_name is a Jetson's GPU (Tegra): PyPI's CUDA 13 wheels, which this script installs \
by default, are x86_64 builds for a discrete GPU. Use JetPack's libraries: HEADROOM_GPU_LIBS=python (its torch and \
onnxruntime-gpu), HEADROOM_GPU_SKIP_INSTALL=1 with LIBTORCH and ORT_DYLIB_PATH, or the bundle of \
scripts/jetson-bundle.sh (docs/GPU.md, \"On a Jetson\")"
  if [ -z "$driver" ]; then
    echo "gpu-check: warning: the driver version is unknown (nvidia-smi said '${driver_said:-nothing}'): not checked against >= $MIN_DRIVER" >&2
  elif [ "${driver%%.*}" -lt "$MIN_DRIVER" ]; then
    fail "NVIDIA driver $driver is older than $MIN_DRIVER: torch $TORCH_VERSION and onnxruntime-gpu $ORT_VERSION from PyPI are CUDA 13 builds, which need driver >= $MIN_DRIVER"
  fi
  if [ -z "$compute" ]; then
    echo "gpu-check: warning: the compute capability is unknown: not checked against >= $MIN_COMPUTE" >&2
  elif awk -v c="$compute" -v m="$MIN_COMPUTE" 'BEGIN { exit !(c < m) }'; then
    fail "$gpu_name has compute capability $compute; the CUDA 13 builds need >= $MIN_COMPUTE"
  fi
fi
step "GPU $gpu: $gpu_name, $memory_note, compute ${compute:-unknown}, driver ${driver:-unknown}"

command -v python3 >/dev/null || fail "python3 is needed (pip downloads the pinned wheels; results are parsed with it)"
# In an unpacked bundle (bin/headroom beside scripts/, no Cargo.toml): its binary, its lib/.
prebuilt="${HEADROOM_GPU_BIN:-}"
if [ -z "$prebuilt" ] && [ -x "$root/bin/headroom" ] && [ ! -f "$root/Cargo.toml" ]; then prebuilt="$root/bin/headroom"; fi
if [ -n "$prebuilt" ]; then
  [ -x "$prebuilt" ] || fail "HEADROOM_GPU_BIN=$prebuilt is not an executable file"
else
  command -v cargo >/dev/null || fail "cargo is needed to build headroom: install Rust >= $(sed -n 's/^rust-version *= *"\(.*\)"/\1/p' "$root/Cargo.toml") (https://rustup.rs)"
  command -v c++ >/dev/null || fail "a C++ compiler is needed (torch-sys builds C++ against libtorch): apt-get install g++"
fi
for f in "$teacher" "$student"; do [ -f "$f" ] || fail "$f is missing: run from a full headroom checkout or an unpacked bundle"; done
mkdir -p "$out/logs" "$deps" || fail "cannot create $out or $deps (set HEADROOM_GPU_CHECK_OUT / HEADROOM_GPU_DEPS)"
rm -rf "$out/work" "$out/logs"/* "$out/results.txt" "$out/results.tsv"
work="$out/work"
mkdir -p "$work"

# ------------------------------------------------------------------------------------------
# the table
# ------------------------------------------------------------------------------------------

ROWS=()
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# record NAME STATUS SECONDS NOTE
record() {
  ROWS+=("$1"$'\t'"$2"$'\t'"$3"$'\t'"$4")
  printf 'gpu-check: %-26s %-4s %7s s  %s\n' "$1" "$2" "$3" "$4" >&2
}

# run_timed NAME LIMIT_S LOG CMD...: runs CMD with stdout+stderr to LOG under a time limit.
# Sets RC (124: timed out) and SECS. Never fails the script.
run_timed() {
  local name=$1 limit=$2 log=$3 t0; shift 3
  t0=$(now)
  step "$name (limit ${limit} s, log $log)"
  RC=0
  timeout --kill-after=15 "$limit" "$@" >"$log" 2>&1 || RC=$?
  SECS=$(since "$t0")
}

# Seconds left of the checks' budget, at least 0.
checks_t0=""
left() { awk -v b="$budget" -v a="$checks_t0" -v n="$(now)" 'BEGIN { l = b - (n - a); printf "%d", (l > 0 ? l : 0) }'; }
# limit WANTED: min(WANTED, time left); 0 when fewer than 15 s are left.
limit() { local l; l=$(left); [ "$l" -ge 15 ] || { echo 0; return; }; [ "$1" -lt "$l" ] && echo "$1" || echo "$l"; }

# json FILE EXPR: a value from a JSON file (EXPR in Python over `d`), or nothing.
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); v=$2; print('' if v is None else v)" "$1" 2>/dev/null || true; }
# First JSON object in a log that also holds other lines (stdout and stderr together).
json_of_log() { python3 - "$1" "$2" <<'PY' 2>/dev/null || true
import json, sys
text = open(sys.argv[1]).read()
start = text.find("{")
while start >= 0:
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[start:])
        json.dump(obj, open(sys.argv[2], "w"))
        break
    except ValueError:
        start = text.find("{", start + 1)
PY
}
# last_line LOG: the last non-empty line of a log, for a FAIL note.
last_line() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n1 | cut -c1-140 || true; }

finish() {
  local header line fails=0
  for line in "${ROWS[@]}"; do [[ "$line" != *$'\t'FAIL$'\t'* ]] || fails=$((fails + 1)); done
  header="headroom gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n): GPU $gpu $gpu_name ($memory_note, compute ${compute:-unknown}), driver ${driver:-unknown}; torch $TORCH_VERSION, onnxruntime-gpu $ORT_VERSION"
  {
    echo "$header"
    printf '%-26s %-6s %9s  %s\n' check result seconds note
    printf '%-26s %-6s %9s  %s\n' -------------------------- ------ --------- ----
    for line in "${ROWS[@]}"; do
      IFS=$'\t' read -r n s t note <<<"$line"
      printf '%-26s %-6s %9s  %s\n' "$n" "$s" "$t" "$note"
    done
    echo "logs: $out/logs"
  } | tee "$out/results.txt"
  { printf 'check\tresult\tseconds\tnote\n'; printf '%s\n' "${ROWS[@]}"; } > "$out/results.tsv"
  echo "gpu-check: results in $out/results.txt; $fails check(s) failed" >&2
  [ "$fails" = 0 ] || exit 1
  exit 0
}

# ------------------------------------------------------------------------------------------
# install (outside the checks' budget)
# ------------------------------------------------------------------------------------------

site="$deps/site-packages"
trt_site="$deps/tensorrt"
lt="$deps/libtorch"
trt_missing="" cuda_ep_missing=""
platforms=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux2010_x86_64)
for i in $(seq 5 35); do platforms+=(--platform "manylinux_2_${i}_x86_64"); done
pip_args=(--quiet --disable-pip-version-check --only-binary=:all: "${platforms[@]}"
          --python-version 3.11 --implementation cp --cache-dir "${HEADROOM_WHEEL_CACHE:-$deps/pip-cache}")

install_libraries() {
  [ "$(uname -m)" = x86_64 ] || fail "the CUDA wheels installed here are x86_64 ones; on $(uname -m) (a Jetson) \
install JetPack's libraries and run with HEADROOM_GPU_SKIP_INSTALL=1 LIBTORCH=... ORT_DYLIB_PATH=... (docs/GPU.md)"
  python3 -m pip --version >/dev/null 2>&1 || fail "pip is needed (apt-get install python3-pip)"
  local stamp="torch==$TORCH_VERSION onnxruntime-gpu[cuda,cudnn]==$ORT_VERSION"
  if [ "$(cat "$deps/installed" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$site" "$deps/installed"
    step "installing $stamp and their pinned CUDA 13 libraries into $site (about 4 GB download)"
    # One resolution, so torch's exact CUDA pins also serve onnxruntime-gpu (its are ~=13.0).
    python3 -m pip install "${pip_args[@]}" --target "$site" "torch==$TORCH_VERSION" \
      "onnxruntime-gpu[cuda,cudnn]==$ORT_VERSION" >&2 \
      || fail "pip could not install torch==$TORCH_VERSION and onnxruntime-gpu==$ORT_VERSION (is PyPI reachable? see pip's message above)"
    echo "$stamp" > "$deps/installed"
  fi
  local got
  got=$(sed -n "s/^__version__ = '\([^'+]*\).*/\1/p" "$site/torch/version.py" 2>/dev/null || true)
  [ "$got" = "$TORCH_VERSION" ] || fail "$site holds torch '$got', expected $TORCH_VERSION: delete $deps and rerun"
  grep -q "^cuda = '13" "$site/torch/version.py" || fail "the torch wheel in $site is not a CUDA 13 build: delete $deps and rerun"

  # TensorRT's libraries come from NVIDIA's index (PyPI only has a stub that fetches them). Without
  # them the TensorRT checks are skipped, not failed: the rest still says something.
  if [ ! -f "$trt_site/installed" ] || [ "$(cat "$trt_site/installed")" != "$TRT_LIBS_VERSION" ]; then
    rm -rf "$trt_site"
    step "installing tensorrt-cu13-libs==$TRT_LIBS_VERSION from https://pypi.nvidia.com"
    if python3 -m pip install "${pip_args[@]}" --no-deps --extra-index-url https://pypi.nvidia.com \
         --target "$trt_site" "tensorrt-cu13-libs==$TRT_LIBS_VERSION" >&2; then
      echo "$TRT_LIBS_VERSION" > "$trt_site/installed"
    else
      trt_missing="pip could not install tensorrt-cu13-libs==$TRT_LIBS_VERSION from pypi.nvidia.com"
      echo "gpu-check: warning: $trt_missing; the TensorRT checks will be skipped" >&2
    fi
  fi

  # LIBTORCH as torch-sys wants it: lib/ with every library of the wheel (libtorch_cuda.so
  # included, so torch-sys links the CUDA build), include/, and the build-version file.
  rm -rf "$lt"
  mkdir -p "$lt/lib"
  local f
  for f in "$site"/torch/lib/*.so*; do ln -s "$f" "$lt/lib/$(basename "$f")"; done
  ln -s "$site/torch/include" "$lt/include"
  echo "$TORCH_VERSION" > "$lt/build-version"

  local dirs
  dirs=$( { find "$site/nvidia" -mindepth 2 -maxdepth 2 -type d -name lib 2>/dev/null || true; } | sort | paste -sd: -)
  [ -d "$trt_site/tensorrt_libs" ] && dirs="$dirs:$trt_site/tensorrt_libs"
  export LIBTORCH="$lt" LIBTORCH_CXX11_ABI=1
  export ORT_DYLIB_PATH="$site/onnxruntime/capi/libonnxruntime.so.$ORT_VERSION"
  export LD_LIBRARY_PATH="$lt/lib:$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  cat > "$out/env.sh" <<ENV
# Written by scripts/gpu-check.sh: source it to run the CUDA build of headroom by hand.
export LIBTORCH="$LIBTORCH"
export LIBTORCH_CXX11_ABI=1
export ORT_DYLIB_PATH="$ORT_DYLIB_PATH"
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH"
export CARGO_TARGET_DIR="$CARGO_TARGET_DIR"
ENV
}

# missing_libs LIB: the "not found" lines of ldd for LIB, or nothing.
missing_libs() { { ldd "$1" 2>/dev/null || true; } | { grep 'not found' || true; } | awk '{print $1}' | paste -sd' ' -; }

check_libraries() {
  [ -f "$ORT_DYLIB_PATH" ] || fail "ORT_DYLIB_PATH=$ORT_DYLIB_PATH does not exist"
  [ -e "$LIBTORCH/lib/libtorch_cuda.so" ] || fail "$LIBTORCH/lib has no libtorch_cuda.so: not a CUDA libtorch"
  local m capi
  m=$(missing_libs "$LIBTORCH/lib/libtorch_cuda.so")
  [ -z "$m" ] || fail "libtorch_cuda.so cannot find: $m (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
  capi=$(dirname "$ORT_DYLIB_PATH")
  # A CPU ONNX Runtime still checks libtorch's CUDA paths: its CUDA and TensorRT checks are skipped.
  if [ ! -f "$capi/libonnxruntime_providers_cuda.so" ]; then
    cuda_ep_missing="$capi has no libonnxruntime_providers_cuda.so (a CPU build of ONNX Runtime)"
    trt_missing=${trt_missing:-$cuda_ep_missing}
    return 0
  fi
  m=$(missing_libs "$capi/libonnxruntime_providers_cuda.so")
  [ -z "$m" ] || fail "ONNX Runtime's CUDA provider cannot find: $m"
  if [ -z "$trt_missing" ]; then
    if [ ! -f "$capi/libonnxruntime_providers_tensorrt.so" ]; then
      trt_missing="this ONNX Runtime has no TensorRT provider"
    else
      m=$(missing_libs "$capi/libonnxruntime_providers_tensorrt.so")
      [ -z "$m" ] || trt_missing="ONNX Runtime's TensorRT provider cannot find $m"
    fi
  fi
}

# python_libraries: LIBTORCH, ORT_DYLIB_PATH and LD_LIBRARY_PATH from python3's own packages.
python_libraries() {
  local torch_dir capi
  torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null) \
    || fail "HEADROOM_GPU_LIBS=python: python3 cannot import torch"
  capi=$(python3 -c 'import os, onnxruntime; print(os.path.join(os.path.dirname(onnxruntime.__file__), "capi"))' 2>/dev/null) \
    || fail "HEADROOM_GPU_LIBS=python: python3 cannot import onnxruntime"
  ORT_DYLIB_PATH=$(find "$capi" -maxdepth 1 -name 'libonnxruntime.so.*' -print -quit)
  [ -n "$ORT_DYLIB_PATH" ] || fail "no libonnxruntime.so.* in $capi"
  export LIBTORCH="$torch_dir" ORT_DYLIB_PATH LD_LIBRARY_PATH="$torch_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  TORCH_VERSION=$(sed -n "s/^__version__ = '\([^']*\)'.*/\1/p" "$torch_dir/version.py" 2>/dev/null || echo '?')
  ORT_VERSION=${ORT_DYLIB_PATH##*libonnxruntime.so.}
}

t0=$(now)
if [ -n "$prebuilt" ] && [ "${HEADROOM_GPU_LIBS:-}" != python ] && [ "${HEADROOM_GPU_SKIP_INSTALL:-0}" != 1 ]; then
  # A bundle's binary finds its own lib/ (RUNPATH); nothing to install or check here.
  TORCH_VERSION="bundled" ORT_VERSION="bundled"
  record "install" SKIP "$(since "$t0")" "prebuilt $prebuilt with the libraries beside it"
elif [ "${HEADROOM_GPU_LIBS:-}" = python ]; then
  headroom_step "checking python3's libraries"
  python_libraries
  check_libraries
  record "install" SKIP "$(since "$t0")" "python3's torch $TORCH_VERSION ($LIBTORCH), onnxruntime $ORT_VERSION"
elif [ "${HEADROOM_GPU_SKIP_INSTALL:-0}" = 1 ]; then
  headroom_step "checking the given libraries"
  if [ -z "${LIBTORCH:-}" ] || [ -z "${ORT_DYLIB_PATH:-}" ]; then
    fail "HEADROOM_GPU_SKIP_INSTALL=1 needs LIBTORCH and ORT_DYLIB_PATH (and LD_LIBRARY_PATH) set"
  fi
  export LIBTORCH_CXX11_ABI="${LIBTORCH_CXX11_ABI:-1}"
  check_libraries
  record "install" SKIP "$(since "$t0")" "HEADROOM_GPU_SKIP_INSTALL=1: LIBTORCH=$LIBTORCH"
else
  install_libraries
  check_libraries
  trt_note="TensorRT libs $TRT_LIBS_VERSION"
  [ -z "$trt_missing" ] || trt_note="no TensorRT: $trt_missing"
  record "install" PASS "$(since "$t0")" "torch $TORCH_VERSION (CUDA 13), onnxruntime-gpu $ORT_VERSION, $trt_note"
fi

# ------------------------------------------------------------------------------------------
# build (outside the checks' budget)
# ------------------------------------------------------------------------------------------

bin="$CARGO_TARGET_DIR/release/headroom"
t0=$(now)
if [ -n "$prebuilt" ]; then
  bin=$prebuilt
  record "build" SKIP 0.0 "prebuilt: $bin ($("$bin" -V 2>&1 | head -n1))"
else
step "building headroom --release --features cuda,tensorrt into $CARGO_TARGET_DIR"
# No link flags: headroom loads libtorch_cuda.so itself when it asks for CUDA (docs/DECISIONS.md).
if (cd "$root" && cargo build --release --locked -p headroom-cli --features cuda,tensorrt) >"$out/logs/build.log" 2>&1; then
  record "build" PASS "$(since "$t0")" "$bin"
else
  record "build" FAIL "$(since "$t0")" "cargo build failed: $(last_line "$out/logs/build.log") (logs/build.log)"
  for n in synth doctor "label --ep cpu" "label --ep cuda" "label --ep tensorrt" "label --runtime torch" "train cuda --amp" plan "plan vs GPU peak" "export --engine"; do
    record "$n" SKIP 0.0 "no binary (build failed)"
  done
  finish
fi
fi

# ------------------------------------------------------------------------------------------
# checks (within the budget)
# ------------------------------------------------------------------------------------------

checks_t0=$(now)
# out_of_time NAME WANTED_S: sets LIMIT for the next check; when the budget is spent, records a
# SKIP for NAME and returns 0.
LIMIT=0
out_of_time() {
  LIMIT=$(limit "$2")
  [ "$LIMIT" -gt 0 ] && return 1
  record "$1" SKIP 0.0 "time budget (${budget} s) spent"
}

# --- doctor, first: the GPU code carried and real kernels launched --------------------------
if ! out_of_time "doctor" 120; then
  run_timed "doctor" "$LIMIT" "$out/logs/doctor.log" "$bin" doctor --json --model "$teacher"
  json_of_log "$out/logs/doctor.log" "$work/doctor.json"
  ort_ok=$(json "$work/doctor.json" "d['onnxruntime']['ok']")
  torch_ok=$(json "$work/doctor.json" "d['libtorch']['ok']")
  torch_detail=$(json "$work/doctor.json" "d['libtorch']['detail']")
  # The GPU code libtorch_cuda.so carries (read from the file) and the kernels launched on the GPU
  # (conv, GEMM, AMP, allocator, the executor on the teacher): the first CUDA error with its remedy.
  code_detail=$(json "$work/doctor.json" "d.get('gpu_code', {}).get('detail', 'not reported (an older headroom)')")
  gpu_detail=$(json "$work/doctor.json" "d.get('gpu', {}).get('detail', 'not reported (an older headroom)')")
  if [ "$RC" = 0 ] && [ "$ort_ok" = True ] && [ "$torch_ok" = True ] && [[ "$torch_detail" == *"CUDA available"* ]]; then
    record "doctor" PASS "$SECS" "$torch_detail; gpu code: $code_detail; gpu: $gpu_detail"
  elif [ "$RC" = 124 ]; then record "doctor" FAIL "$SECS" "timed out after $LIMIT s"
  else record "doctor" FAIL "$SECS" "exit $RC; onnxruntime ok=$ort_ok; libtorch: ${torch_detail:-$(last_line "$out/logs/doctor.log")}; gpu code: $code_detail; gpu: $gpu_detail"; fi
fi

# --- data -----------------------------------------------------------------------------------
synth="$work/synth"
if ! out_of_time "synth" 60; then
  run_timed "synth" "$LIMIT" "$out/logs/synth.log" "$bin" synth --out "$synth" --preset field --seed 7 --train 32 --val 16
  if [ "$RC" = 0 ] && [ -f "$synth/data.yaml" ]; then record "synth" PASS "$SECS" "32 train + 16 val field images"
  else record "synth" FAIL "$SECS" "exit $RC: $(last_line "$out/logs/synth.log")"; fi
fi
have_data=0; [ -f "$synth/data.yaml" ] && have_data=1

# The providers the ONNX Runtime headroom loaded was built with, as doctor names them ("providers:
# Azure, CPU"): a provider it lacks is skipped with the reason (a bundle's CPU-only ONNX Runtime),
# not failed.
ort_detail=$(json "$work/doctor.json" "d['onnxruntime']['detail']" 2>/dev/null || true)
ort_providers=$(sed -n 's/.*(providers: \([^)]*\)).*/\1/p' <<<"${ort_detail:-}" | head -n 1)
if [ -n "$ort_providers" ]; then
  if [ -z "$cuda_ep_missing" ] && ! grep -qi cuda <<<"$ort_providers"; then
    cuda_ep_missing="this ONNX Runtime has no CUDA provider (providers: $ort_providers)"
  fi
  if [ -z "$trt_missing" ] && ! grep -qi tensorrt <<<"$ort_providers"; then
    trt_missing="this ONNX Runtime has no TensorRT provider (providers: $ort_providers)"
  fi
fi

# --- label ----------------------------------------------------------------------------------
# label_check NAME TAG WANTED_S EP_ARGS...: labels the synth images with the teacher. Sets LABEL_RAN
# (0: skipped, already recorded), LABEL_OK, LABEL_NOTE and BOXES (the box count, empty on failure).
label_check() {
  local name=$1 tag=$2 wanted=$3 provider
  shift 3
  LABEL_RAN=0 LABEL_OK=0 LABEL_NOTE="" BOXES=""
  if [ "$have_data" = 0 ]; then record "$name" SKIP 0.0 "no synth images"; return 0; fi
  if out_of_time "$name" "$wanted"; then return 0; fi
  LABEL_RAN=1
  run_timed "$name" "$LIMIT" "$out/logs/label-$tag.log" "$bin" label --teacher "$teacher" \
    --images "$synth/images" --out "$work/label-$tag" --json "$@"
  json_of_log "$out/logs/label-$tag.log" "$work/label-$tag.json"
  provider=$(json "$work/label-$tag.json" "d['provider']")
  BOXES=$(json "$work/label-$tag.json" "d['counts']['boxes']")
  if [ "$RC" = 0 ] && [ -n "$BOXES" ]; then
    LABEL_OK=1
    LABEL_NOTE="provider $provider, $(json "$work/label-$tag.json" "d['counts']['labelled']") images, $BOXES boxes"
  else
    BOXES=""
    LABEL_NOTE="exit $RC: $(last_line "$out/logs/label-$tag.log")"
    [ "$RC" != 124 ] || LABEL_NOTE="timed out after $LIMIT s"
  fi
}
# record_label NAME TOLERANCE_PERCENT: records the last label_check; a GPU provider passes when its
# box count is within TOLERANCE of the CPU's (same teacher, same images, same thresholds).
record_label() {
  local name=$1 tol=$2
  [ "$LABEL_RAN" = 1 ] || return 0
  if [ "$LABEL_OK" = 0 ]; then record "$name" FAIL "$SECS" "$LABEL_NOTE"; return 0; fi
  if [ -z "$tol" ]; then record "$name" PASS "$SECS" "$LABEL_NOTE (the reference)"; return 0; fi
  if [ -z "$cpu_boxes" ]; then record "$name" PASS "$SECS" "$LABEL_NOTE (no CPU count to compare)"; return 0; fi
  if awk -v b="$BOXES" -v r="$cpu_boxes" -v t="$tol" 'BEGIN { d = b - r; if (d < 0) d = -d; exit !(d <= t / 100 * (r > 0 ? r : 1)) }'; then
    record "$name" PASS "$SECS" "$LABEL_NOTE; CPU $cpu_boxes (within $tol %)"
  else
    record "$name" FAIL "$SECS" "$LABEL_NOTE; CPU gave $cpu_boxes: off by more than $tol %"
  fi
}

cpu_boxes=""
label_check "label --ep cpu" cpu 120 --runtime onnxruntime --ep cpu
record_label "label --ep cpu" ""
cpu_boxes=$BOXES

if [ -n "$cuda_ep_missing" ]; then
  record "label --ep cuda" SKIP 0.0 "$cuda_ep_missing"
else
  label_check "label --ep cuda" cuda 120 --runtime onnxruntime --ep cuda --device "cuda:$gpu"
  record_label "label --ep cuda" 2
fi

if [ -n "$trt_missing" ]; then
  record "label --ep tensorrt" SKIP 0.0 "$trt_missing"
else
  # FP16 engines, cached in the work folder; this first run builds them (tens of seconds).
  label_check "label --ep tensorrt" tensorrt 300 --runtime onnxruntime --ep tensorrt --device "cuda:$gpu" --trt-fp16 \
    --trt-engine-cache "$work/trt-cache" --trt-timing-cache "$work/trt-cache"
  record_label "label --ep tensorrt" 5
fi

# The teacher in libtorch on the GPU, fp16 autocast (the route where ONNX Runtime has no GPU
# provider, as a Jetson bundle's): its box count within 2 % of ONNX Runtime's on the CPU.
label_check "label --runtime torch" torch 120 --runtime torch --device "cuda:$gpu"
record_label "label --runtime torch" 2

# --- train on CUDA with AMP, sampling the GPU's memory ----------------------------------------
# memory_used_mib: the memory in use now, in MiB, or nothing when unknown: on a Tegra the one pool
# of CPU and GPU (MemTotal - MemAvailable), else the GPU's (nvidia-smi memory.used).
memory_used_mib() {
  if [ "$tegra" = 1 ]; then
    local total available
    total=$(number "$(meminfo_kib MemTotal)") available=$(number "$(meminfo_kib MemAvailable)")
    if [ -n "$total" ] && [ -n "$available" ]; then echo $(((total - available) / 1024)); fi
  else
    number "$(timeout 5 nvidia-smi -i "$gpu" --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -n1 || true)"
  fi
}
# tegrastats_ram FILE: the RAM in use of each line of tegrastats (`RAM 2283/7620MB ...`), in MiB.
tegrastats_ram() {
  awk '{ for (i = 1; i < NF; i++) if ($i == "RAM" && split($(i + 1), v, "/") == 2) {
           u = v[1] + 0; if (v[2] ~ /GB$/) u *= 1024; else if (v[2] ~ /kB$/) u /= 1024; printf "%d\n", u } }' \
    "$1" 2>/dev/null || true
}
# Where the measured peak comes from, for the notes.
if [ "$tegra" = 1 ]; then memory_source="MemTotal - MemAvailable (/proc/meminfo)"; memory_what="CPU+GPU memory"
else memory_source="nvidia-smi memory.used"; memory_what="GPU memory"; fi
run_dir="$work/runs/cuda-amp"
gpu_peak_mib=""
train_ok=0
if [ "$have_data" = 0 ]; then
  record "train cuda --amp" SKIP 0.0 "no synth data"
elif ! out_of_time "train cuda --amp" 300; then
  baseline=$(memory_used_mib)
  ( while :; do memory_used_mib; sleep 0.2; done ) > "$work/gpu-memory.txt" &
  sampler=$!
  samplers=$sampler
  # Whatever ends the script (a signal, an error) ends the samplers too.
  trap 'kill $samplers 2>/dev/null || true' EXIT
  # On a Jetson tegrastats, where installed, samples the same pool; its first line is the baseline.
  tegrastats_pid=""
  if [ "$tegra" = 1 ] && command -v tegrastats >/dev/null; then
    tegrastats --interval 200 > "$work/tegrastats.txt" 2>&1 &
    tegrastats_pid=$!
    samplers="$sampler $tegrastats_pid"
    sleep 0.5
  fi
  run_timed "train cuda --amp" "$LIMIT" "$out/logs/train.log" "$bin" train --model "$student" \
    --data "$synth/data.yaml" --device "cuda:$gpu" --amp --epochs 2 --batch 2 \
    --project "$work/runs" --name cuda-amp
  for pid in $samplers; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  samplers=""
  samples="$work/gpu-memory.txt"
  if [ -n "$tegrastats_pid" ]; then
    tegrastats_ram "$work/tegrastats.txt" > "$work/tegrastats-ram.txt"
    if [ -s "$work/tegrastats-ram.txt" ]; then
      samples="$work/tegrastats-ram.txt" memory_source="tegrastats' RAM used"
      baseline=$(head -n1 "$samples")
    fi
  fi
  peak=$(awk '$1 ~ /^[0-9]+$/ && $1 > m { m = $1 } END { print m + 0 }' "$samples")
  if [[ "${baseline:-}" =~ ^[0-9]+$ ]] && [ "$peak" -gt 0 ]; then gpu_peak_mib=$((peak - baseline)); fi
  amp_on=0
  grep -Eq '^[[:space:]]*amp[[:space:]]*=[[:space:]]*true' "$run_dir/config.toml" 2>/dev/null && amp_on=1
  if [ "$RC" = 0 ] && [ -f "$run_dir/results.json" ] && [ "$amp_on" = 1 ] && ! grep -q 'on the CPU' "$out/logs/train.log"; then
    train_ok=1
    record "train cuda --amp" PASS "$SECS" "2 epochs; best fitness $(json "$run_dir/results.json" "d['best_fitness']"); $memory_what +${gpu_peak_mib:-?} MiB at peak ($memory_source)"
  elif [ "$RC" = 124 ]; then record "train cuda --amp" FAIL "$SECS" "timed out after $LIMIT s"
  elif [ "$RC" = 0 ]; then record "train cuda --amp" FAIL "$SECS" "ran, but not on CUDA with AMP (config.toml amp=$amp_on; see logs/train.log)"
  else record "train cuda --amp" FAIL "$SECS" "exit $RC: $(last_line "$out/logs/train.log")"; fi
fi

# --- plan, and its estimate against the measured peak ------------------------------------------
# tegra_board: the --board of `plan` on a Tegra: `auto` when the board has a model
# (/proc/device-tree/model, which headroom reads), so headroom picks the
# preset by model and MemTotal; without one (a container that hides /proc/device-tree) the Orin
# preset of configs/devices.toml whose memory is nearest to MemTotal (the smaller on a tie).
tegra_board() {
  local model=""
  if [ -r /proc/device-tree/model ]; then model=$(tr -d '\0' < /proc/device-tree/model || true); fi
  if [ -n "${model//[[:space:]]/}" ]; then echo auto; return 0; fi
  awk -v mib="${gpu_mib:-0}" 'BEGIN {
    n = split("orin-nano-4:4 orin-nano-8:8 orin-nx-16:16 orin-agx-32:32 orin-agx-64:64", presets, " ")
    for (i = 1; i <= n; i++) {
      split(presets[i], p, ":"); d = p[2] - mib / 1024; if (d < 0) d = -d
      if (i == 1 || d < best) { best = d; name = p[1] }
    }
    print name }'
}
if ! "$bin" plan --help >/dev/null 2>&1; then
  record "plan" SKIP 0.0 "headroom plan: not available in this build"
  record "plan vs GPU peak" SKIP 0.0 "headroom plan: not available in this build"
else
  # A discrete GPU: the gpu-8 preset, budget from the GPU's free memory. A Tegra: its own preset
  # (tegra_board), budget from MemAvailable (one pool for CPU and GPU).
  if [ "$tegra" = 1 ]; then board=$(tegra_board) budget_note="MemAvailable: CPU and GPU share it"
  else board=gpu-8 budget_note="free GPU memory"; fi
  if ! out_of_time "plan" 60; then
    run_timed "plan" "$LIMIT" "$out/logs/plan.log" "$bin" plan --model "$student" --board "$board" --device "cuda:$gpu" \
      --budget auto --train head --batch 2 --json
    json_of_log "$out/logs/plan.log" "$work/plan.json"
    chosen=$(json "$work/plan.json" "d['plan']['candidates'][d['plan']['chosen']]['rung'] if d['plan'].get('chosen') is not None else 'none fits'")
    if { [ "$RC" = 0 ] || [ "$RC" = 1 ]; } && [ -n "$chosen" ]; then
      board_note="--board $board"
      [ "$board" != auto ] || board_note="--board auto (preset $(json "$work/plan.json" "d['board']['name']"))"
      record "plan" PASS "$SECS" "$board_note, --budget auto ($budget_note): chosen rung: $chosen"
    else record "plan" FAIL "$SECS" "exit $RC: $(last_line "$out/logs/plan.log")"; fi
  fi
  estimate=""
  [ -f "$run_dir/results.json" ] && estimate=$(json "$run_dir/results.json" "d['planner']['estimate_mb']")
  # The run's own figure where it trained on CUDA (results.json `peak_mb`: the caching allocator's
  # reserved peak, plus the resident set on a unified board; crates/run/src/folder.rs); else the
  # sampled view.
  allocator=""
  [ -f "$run_dir/results.json" ] && allocator=$(json "$run_dir/results.json" \
    "d['peak_mb'] if d.get('peak_cuda_reserved_mb') is not None else None")
  if [ -n "$allocator" ] && [ "$allocator" != None ]; then
    measured=$allocator
    source_note="the run's CUDA figure (results.json peak_mb: $(json "$run_dir/results.json" "d['memory_pool']"); reserved $(json "$run_dir/results.json" "d['peak_cuda_reserved_mb']") MiB, allocated $(json "$run_dir/results.json" "d['peak_cuda_allocated_mb']") MiB, resident $(json "$run_dir/results.json" "d['peak_rss_mb']") MiB)"
  elif [ "$tegra" = 1 ]; then
    measured=${gpu_peak_mib:-}
    source_note="$memory_source above idle, sampled every 0.2 s: CPU and GPU memory together (nvidia-smi reads [N/A] on a Tegra), the whole process and any other included"
  else measured=${gpu_peak_mib:-}; source_note="nvidia-smi memory.used above idle, sampled every 0.2 s (CUDA context and cached blocks included)"; fi
  if [ "$train_ok" = 0 ]; then
    record "plan vs GPU peak" SKIP 0.0 "no CUDA training run to measure (train cuda --amp did not pass)"
  elif [ -z "$estimate" ] || [ -z "$measured" ]; then
    record "plan vs GPU peak" SKIP 0.0 "no planner estimate or no measured peak (train did not finish)"
  elif awk -v m="$measured" -v e="$estimate" 'BEGIN { exit !(m <= e) }'; then
    record "plan vs GPU peak" PASS 0.0 "estimate $estimate MiB >= measured $measured MiB ($(awk -v m="$measured" -v e="$estimate" 'BEGIN { printf "%.2f", e / (m > 0 ? m : 1) }')x); $source_note"
  else
    record "plan vs GPU peak" FAIL 0.0 "planner UNDER-estimates: $estimate MiB < measured $measured MiB; $source_note"
  fi
fi

# --- export with engines ------------------------------------------------------------------------
trtexec="${TRTEXEC:-}"
[ -n "$trtexec" ] || { [ -x /usr/src/tensorrt/bin/trtexec ] && trtexec=/usr/src/tensorrt/bin/trtexec; } || true
[ -n "$trtexec" ] || trtexec=$(command -v trtexec || true)
if [ -z "$trtexec" ]; then
  record "export --engine" SKIP 0.0 "no trtexec (TRTEXEC, /usr/src/tensorrt/bin/trtexec, PATH); pip's TensorRT has none"
elif [ "$have_data" = 0 ]; then
  record "export --engine" SKIP 0.0 "no synth images to calibrate on"
elif ! out_of_time "export --engine" 300; then
  # trtexec brings its own TensorRT: keep pip's TensorRT libraries out of its way.
  ld_export=$(tr ':' '\n' <<<"${LD_LIBRARY_PATH:-}" | { grep -v tensorrt_libs || true; } | paste -sd: -)
  run_timed "export --engine" "$LIMIT" "$out/logs/export.log" env LD_LIBRARY_PATH="$ld_export" \
    "$bin" export --model "$student" --fp16 --int8 --calib "$synth/images/train" --calib-images 32 \
    --engine --trtexec "$trtexec" --board gpu-check --out "$work/export" --force
  engines=$( { find "$work/export" -name '*.engine' 2>/dev/null || true; } | wc -l)
  if [ "$RC" = 0 ] && [ "$engines" -gt 0 ]; then
    record "export --engine" PASS "$SECS" "$engines engine(s) with $trtexec"
  elif [ "$RC" = 124 ]; then record "export --engine" FAIL "$SECS" "timed out after $LIMIT s"
  else record "export --engine" FAIL "$SECS" "exit $RC, $engines engine(s): $(last_line "$out/logs/export.log")"; fi
fi

finish
