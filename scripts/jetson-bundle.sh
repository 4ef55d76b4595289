#!/usr/bin/env bash
# Builds headroom's install bundle on a Jetson (or any machine) against the PyTorch and ONNX Runtime
# that a Python environment already has — on JetPack 6, the Jetson AI Lab's or NVIDIA's CUDA wheels
# of torch and onnxruntime-gpu — with the CUDA and TensorRT features. No source build of either
# library. docker/Dockerfile.jetson only runs this script; run it by hand on a Jetson too
# (docs/GUIDE.md "1. Get the binary").
#
# Usage: scripts/jetson-bundle.sh [--out DIR] [--profile release|dev] [--libtorch DIR]
#                                 [--onnxruntime FILE] [--features LIST] [--label NAME] [--check]
#                                 [--jetpack 7 [--venv DIR] [--index-url URL]]
#   --libtorch DIR      default: the folder of torch as PYTHON imports it (site-packages/torch)
#   --onnxruntime FILE  default: libonnxruntime.so.* in onnxruntime/capi/ as PYTHON imports it
#   --features LIST     default cuda,tensorrt ("" for a CPU build, as scripts/tests/bundle.sh does)
#   --label NAME        default: l4t-rMAJOR.MINOR from /etc/nv_tegra_release, else "local"
#   --check             find and check both libraries, print the scripts/bundle.sh command, build nothing
#   --jetpack 7         JetPack 7.2 (L4T r39, Ubuntu 24.04, Python 3.12, SBSA CUDA 13.2 with Orin): make
#                       (or reuse) a Python 3.12 venv and pip-install jetson-containers' torch built for
#                       sm_87 and onnxruntime-gpu with the TensorRT provider from the Jetson AI Lab index
#                       (JP7_TORCH, JP7_ORT below), then build against them; the bundle carries no
#                       CUDA, cuDNN or TensorRT library: JetPack's own are used. After the build, the
#                       bundle's `headroom doctor` must find sm_87 code in its libtorch_cuda.so.
#   --venv DIR          the venv of --jetpack 7 (default .deps/jetpack7-venv)
#   --index-url URL     the index of --jetpack 7 (default $JP7_INDEX); HEADROOM_JP7_TORCH and
#                       HEADROOM_JP7_ORT in the environment pick other versions
# Env: PYTHON  the interpreter whose torch and onnxruntime are used (default: python3 on PATH). Give a
#              virtual environment's own interpreter, e.g. PYTHON=~/headroom-venv/bin/python: on
#              JetPack 7 (Ubuntu 24.04, PEP 668) pip installs only into a venv, and the venv need not
#              be activated. Not needed when both --libtorch and --onnxruntime are given.
#      CARGO_TARGET_DIR  as for cargo.
#      HEADROOM_NV_TEGRA_RELEASE  the L4T release file (default /etc/nv_tegra_release)
# Steps: import torch and onnxruntime with PYTHON (an import that fails is shown with Python's own
# error and what to install for the known ones: cuDSS, cuSPARSELt, OpenBLAS, a libstdc++ with
# GLIBCXX_3.4.32), refuse versions outside what headroom builds against (libtorch 2.5 to 2.13,
# ONNX Runtime 1.20 or newer; docs/DECISIONS.md), then scripts/bundle.sh --target native.
# shellcheck source=lib/errtrap.sh
source "$(dirname "$0")/lib/errtrap.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "jetson-bundle: error: $*" >&2; exit 1; }
step() { headroom_step "$*"; echo "jetson-bundle: $*" >&2; }
usage() { awk 'NR == 1 {next} /^# shellcheck/ {exit} {sub(/^# ?/, ""); print}' "$0"; }

TORCH_OLDEST=2.5 TORCH_NEWEST=2.13 ORT_OLDEST=1.20
# JetPack 7.2: what jetson-containers builds for L4T >= 38 with CUDA >= 13.2 (packages/ml/pytorch/
# version.py: torch 2.12 for sm_87, 11.0, 12.0, 12.1; packages/ml/onnxruntime: 1.25.1 with the
# TensorRT provider), from its index for JetPack 7 and CUDA 13.2 (packages/cuda/cuda/config.py).
JP7_TORCH=2.12.0 JP7_ORT=1.25.1 JP7_INDEX=https://pypi.jetson-ai-lab.io/jp7/cu132
out="$root/dist" profile=release torch_dir="" ort_lib="" features=cuda,tensorrt label="" check=no
jetpack="" venv="$root/.deps/jetpack7-venv" index_url=$JP7_INDEX
release_file=${HEADROOM_NV_TEGRA_RELEASE:-/etc/nv_tegra_release}
while [ $# -gt 0 ]; do
  case "$1" in
    --out|--profile|--libtorch|--onnxruntime|--features|--label|--jetpack|--venv|--index-url)
      [ $# -ge 2 ] || fail "$1 needs a value"
      case "$1" in
        --out) out=$2 ;; --profile) profile=$2 ;; --libtorch) torch_dir=$2 ;;
        --onnxruntime) ort_lib=$2 ;; --features) features=$2 ;; --label) label=$2 ;;
        --jetpack) jetpack=$2 ;; --venv) venv=$2 ;; --index-url) index_url=$2 ;;
      esac
      shift 2 ;;
    --check) check=yes; shift ;;
    -h|--help) usage; exit 0 ;;
    *) fail "unknown argument '$1' (see --help)" ;;
  esac
done
python=${PYTHON:-python3}
case "$jetpack" in
  ""|7) ;;
  6) fail "--jetpack 6 is this script's default route (JetPack 6's own Python): run it without --jetpack" ;;
  *) fail "--jetpack $jetpack: only 7 (JetPack 7.2) has a route of its own" ;;
esac

# jetpack7_venv: JetPack 7.2's Python 3.12 refuses pip outside a venv (PEP 668): a venv at $venv with
# jetson-containers' torch (sm_87) and onnxruntime-gpu (TensorRT provider); PYTHON points at it.
jetpack7_venv() {
  local release="" major="" py=python3.12
  if [ -r "$release_file" ]; then
    release=$(head -n 1 "$release_file")
    major=$(sed -n 's/^# R\([0-9]*\) (release).*/\1/p' <<<"$release")
  fi
  if [ -z "$major" ]; then
    echo "jetson-bundle: warning: no L4T release in $release_file: not a Jetson; the venv is made all the same" >&2
  elif [ "$major" -lt 38 ]; then
    fail "$release_file says ${release#\# }: that is JetPack 6 or older; its route is this script without --jetpack (JetPack's Python, docs/GUIDE.md)"
  fi
  command -v "$py" >/dev/null || fail "$py is not on PATH: JetPack 7.2 (Ubuntu 24.04) ships it as python3.12 (apt-get install python3.12)"
  if [ ! -x "$venv/bin/python" ]; then
    step "making the venv $venv ($py -m venv)"
    local text
    text=$("$py" -m venv "$venv" 2>&1) || {
      echo "jetson-bundle: error: $py -m venv $venv failed:" >&2
      tail -n 4 <<<"$text" | sed 's/^/    /' >&2
      if grep -q ensurepip <<<"$text"; then echo "  What to do: apt-get install python3.12-venv" >&2; fi
      exit 1
    }
  fi
  step "installing torch==$JP7_TORCH and onnxruntime-gpu==$JP7_ORT from $index_url into $venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check --index-url "$index_url" \
    "torch==$JP7_TORCH" "onnxruntime-gpu==$JP7_ORT" >&2 \
    || fail "pip could not install torch==$JP7_TORCH and onnxruntime-gpu==$JP7_ORT from $index_url (is the index reachable? \
other versions: HEADROOM_JP7_TORCH=... HEADROOM_JP7_ORT=..., another index: --index-url URL)"
  python="$venv/bin/python"
}

# What to install for the import errors seen with the Jetson AI Lab wheels on JetPack 6
# (docs/GUIDE.md "1. Get the binary" has the commands; jetson-containers installs the same).
import_hints() {
  local text=$1 hinted=no
  if grep -q 'libcudss\.so' <<<"$text"; then
    echo "  - libcudss.so.0 is cuDSS (JetPack 6): NVIDIA's CUDA repository for Jetson (cuda-keyring of .../cuda/repos/ubuntu2204/arm64), then apt-get install cudss"
    hinted=yes
  fi
  if grep -q 'libcusparseLt\.so' <<<"$text"; then
    echo "  - libcusparseLt.so.0 is cuSPARSELt (JetPack 6): NVIDIA's libcusparse_lt-linux-aarch64-*_cuda12 archive unpacked into /usr/local/cuda/targets/aarch64-linux/lib, then ldconfig"
    hinted=yes
  fi
  if grep -q 'libopenblas\.so' <<<"$text"; then
    echo "  - libopenblas.so.0: apt-get install libopenblas-dev"
    hinted=yes
  fi
  if grep -q 'GLIBCXX_3\.4\.3[1-9]' <<<"$text"; then
    echo "  - GLIBCXX_3.4.32 is GCC 13's libstdc++; Ubuntu 22.04's is older: add-apt-repository ppa:ubuntu-toolchain-r/test, then apt-get install libstdc++6"
    hinted=yes
  fi
  if grep -q "No module named '\(torch\|onnxruntime\)'" <<<"$text"; then
    echo "  - not installed for $python: install it into that environment, or point PYTHON at the venv that has it (PYTHON=/path/to/venv/bin/python); on JetPack 7 pip installs only into a venv"
    hinted=yes
  fi
  if [ "$hinted" = no ] && grep -q 'cannot open shared object file' <<<"$text"; then
    echo "  - a native library the wheel was built against is missing: install the package that provides it (docs/GUIDE.md lists the known ones)"
  fi
  return 0
}

# py_locate NAME CODE: runs CODE (which prints "HEADROOM_PATH=...") with $python; prints the path, or
# fails with Python's own last lines and the hints above.
py_locate() {
  local name=$1 code=$2 text path
  if ! text=$("$python" -c "$code" 2>&1); then
    {
      echo "jetson-bundle: error: $python cannot import $name. Python says:"
      { grep -v '^HEADROOM_PATH=' <<<"$text" || true; } | tail -n 6 | sed 's/^/    /'
      echo "  What to do:"
      import_hints "$text"
      case "$name" in
        torch) echo "  - or pass --libtorch DIR (a libtorch 2.5-2.13 folder with include/ and lib/)" ;;
        onnxruntime) echo "  - or pass --onnxruntime FILE (libonnxruntime.so.X.Y.Z, 1.20 or newer)" ;;
      esac
    } >&2
    exit 1
  fi
  path=$(sed -n 's/^HEADROOM_PATH=//p' <<<"$text" | tail -n 1) || true
  [ -n "$path" ] || fail "$python imported $name but printed no path; it printed: $(tail -n 3 <<<"$text")"
  echo "$path"
}

if [ "$jetpack" = 7 ]; then
  JP7_TORCH=${HEADROOM_JP7_TORCH:-$JP7_TORCH} JP7_ORT=${HEADROOM_JP7_ORT:-$JP7_ORT}
  [ -z "$torch_dir$ort_lib" ] || fail "--jetpack 7 installs torch and onnxruntime-gpu itself: not with --libtorch or --onnxruntime"
  jetpack7_venv
fi
step "finding PyTorch and ONNX Runtime"
if [ -z "$torch_dir" ] || [ -z "$ort_lib" ]; then
  case "$python" in
    */*) [ -x "$python" ] || fail "PYTHON=$python is not an executable file (a venv's interpreter is VENV/bin/python)" ;;
    *) command -v "$python" >/dev/null || fail "$python is not on PATH: install Python 3, or set PYTHON=/path/to/venv/bin/python" ;;
  esac
  py_info=$("$python" -c 'import sys; print(sys.version.split()[0], "venv" if sys.prefix != sys.base_prefix else "no venv", sys.prefix)' 2>&1) \
    || fail "$python does not run: $(tail -n 2 <<<"$py_info")"
  step "Python: $python ($py_info)"
fi
if [ -z "$torch_dir" ]; then
  torch_dir=$(py_locate torch 'import os, torch; print("HEADROOM_PATH=" + os.path.dirname(torch.__file__))') || exit 1
fi
if [ -z "$ort_lib" ]; then
  ort_capi=$(py_locate onnxruntime 'import os, onnxruntime; print("HEADROOM_PATH=" + os.path.join(os.path.dirname(onnxruntime.__file__), "capi"))') || exit 1
  ort_lib=$(find "$ort_capi" -maxdepth 1 -name 'libonnxruntime.so.*' -print -quit)
  [ -n "$ort_lib" ] || fail "no libonnxruntime.so.* in $ort_capi: this onnxruntime wheel carries no shared C library \
(ONNX Runtime built without --build_shared_lib); pass --onnxruntime FILE (libonnxruntime.so.X.Y.Z, 1.20 or newer)"
fi
[ -f "$torch_dir/version.py" ] || [ -f "$torch_dir/build-version" ] \
  || fail "$torch_dir has no version.py or build-version: not a PyTorch or libtorch folder"

# version_key 2.5.1 -> 2005 (major*1000 + minor), for range checks.
version_key() { local major minor rest; IFS=. read -r major minor rest <<<"$1"; echo $((major * 1000 + minor)); }
if [ -f "$torch_dir/version.py" ]; then
  torch_version=$(sed -n "s/^__version__ = '\([0-9.]*\).*/\1/p" "$torch_dir/version.py")
else
  torch_version=$(tr -d '[:space:]' < "$torch_dir/build-version")
fi
ort_version=${ort_lib##*libonnxruntime.so.}
[ -n "$torch_version" ] || fail "cannot read the PyTorch version in $torch_dir"
if [ "$(version_key "$torch_version")" -lt "$(version_key "$TORCH_OLDEST")" ] \
  || [ "$(version_key "$torch_version")" -gt "$(version_key "$TORCH_NEWEST")" ]; then
  fail "PyTorch $torch_version in $torch_dir: headroom builds against libtorch $TORCH_OLDEST to $TORCH_NEWEST"
fi
if [ "$(version_key "$ort_version")" -lt "$(version_key "$ORT_OLDEST")" ]; then
  fail "ONNX Runtime $ort_version ($ort_lib): headroom needs $ORT_OLDEST or newer"
fi
cuda=no; [ -e "$torch_dir/lib/libtorch_cuda.so" ] && cuda=yes
case ",$features," in
  *,cuda,*) [ "$cuda" = yes ] || fail "PyTorch $torch_version in $torch_dir has no lib/libtorch_cuda.so (a CPU build), \
but --features $features asks for CUDA: install the CUDA wheel (docs/GUIDE.md), or pass --features \"\" for a CPU bundle" ;;
esac
if [ -z "$label" ]; then
  label=local
  if [ -r "$release_file" ]; then
    # "# R36 (release), REVISION: 4.0, ..." -> l4t-r36.4
    label=$(sed -n 's/^# R\([0-9]*\) (release), REVISION: \([0-9]*\).*/l4t-r\1.\2/p' "$release_file")
    label=${label:-l4t}
  fi
fi
step "PyTorch $torch_version (CUDA build: $cuda) from $torch_dir; ONNX Runtime $ort_version from $ort_lib; features: ${features:-none}; label: $label"
bundle=(bash "$root/scripts/bundle.sh" --target native --profile "$profile" --out "$out"
  --libtorch "$torch_dir" --onnxruntime "$ort_lib" --features "$features" --label "$label")
if [ "$check" = yes ]; then
  echo "jetson-bundle: --check: both libraries found and in range; the build would run:" >&2
  for arg in "${bundle[@]}"; do
    if [[ "$arg" =~ ^[A-Za-z0-9_./,:=+-]+$ ]]; then printf '%s ' "$arg"; else printf '%q ' "$arg"; fi
  done
  echo
  exit 0
fi
[ "$jetpack" = 7 ] || exec "${bundle[@]}"
# JetPack 7: the bundle's own doctor reads the GPU code its libtorch_cuda.so carries (no GPU
# needed): the route exists for sm_87, so a torch without it is an error, not a bundle.
"${bundle[@]}" || exit 1
built=$(find "$out" -maxdepth 2 -path "*-$label/bin/headroom" -newer "$root/scripts/jetson-bundle.sh" -print -quit)
[ -n "$built" ] || built=$(find "$out" -maxdepth 2 -path "*-$label/bin/headroom" -print -quit)
[ -n "$built" ] || fail "no bundle with label $label under $out after the build"
verdict=$(env -i "$built" doctor --json 2>/dev/null | "$python" -c 'import json, sys; print(json.load(sys.stdin)["gpu_code"]["detail"])') \
  || fail "$built doctor --json did not report the GPU code"
echo "jetson-bundle: $built doctor: $verdict" >&2
grep -qE 'Orin \(sm_87\): (native code|no SASS of its own; PTX)' <<<"$verdict" \
  || fail "torch $torch_version from $index_url carries no sm_87 code (doctor: $verdict): take another JP7_TORCH, or another --index-url"
