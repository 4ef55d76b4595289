#!/usr/bin/env bash
# Builds headroom's install bundle on a Jetson (or any machine) against the PyTorch and ONNX Runtime
# that its Python already has — on JetPack 6, the Jetson AI Lab's or NVIDIA's CUDA wheels of torch
# (2.5-2.8) and onnxruntime-gpu (1.20-1.23) — with the CUDA and TensorRT features. No source build of
# either library. docker/Dockerfile.jetson only runs this script; run it by hand on a Jetson too.
#
# Usage: scripts/jetson-bundle.sh [--out DIR] [--profile release|dev] [--libtorch DIR]
#                                 [--onnxruntime FILE] [--features LIST] [--label NAME]
#   --libtorch DIR      default: the folder of `python3 -c 'import torch'` (site-packages/torch)
#   --onnxruntime FILE  default: libonnxruntime.so.* of `python3 -c 'import onnxruntime'`
#   --features LIST     default cuda,tensorrt ("" for a CPU build, as scripts/tests/bundle.sh does)
#   --label NAME        default: l4t-rMAJOR.MINOR from /etc/nv_tegra_release, else "local"
# Steps: find both libraries, refuse versions outside what headroom builds against (libtorch 2.5 to
# 2.13, ONNX Runtime 1.20 or newer; docs/DECISIONS.md), then scripts/bundle.sh --target native.
# Env: PYTHON (default python3), CARGO_TARGET_DIR.
# shellcheck source=lib/errtrap.sh
source "$(dirname "$0")/lib/errtrap.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "jetson-bundle: error: $*" >&2; exit 1; }
step() { headroom_step "$*"; echo "jetson-bundle: $*" >&2; }

TORCH_OLDEST=2.5 TORCH_NEWEST=2.13 ORT_OLDEST=1.20
out="$root/dist" profile=release torch_dir="" ort_lib="" features=cuda,tensorrt label=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out|--profile|--libtorch|--onnxruntime|--features|--label)
      [ $# -ge 2 ] || fail "$1 needs a value"
      case "$1" in
        --out) out=$2 ;; --profile) profile=$2 ;; --libtorch) torch_dir=$2 ;;
        --onnxruntime) ort_lib=$2 ;; --features) features=$2 ;; --label) label=$2 ;;
      esac
      shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) fail "unknown argument '$1' (see --help)" ;;
  esac
done
python=${PYTHON:-python3}

step "finding PyTorch and ONNX Runtime"
if [ -z "$torch_dir" ]; then
  torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null) \
    || fail "$python cannot import torch: install JetPack's PyTorch (docs/GUIDE.md, Jetson) or pass --libtorch DIR"
fi
if [ -z "$ort_lib" ]; then
  ort_capi=$("$python" -c 'import os, onnxruntime; print(os.path.join(os.path.dirname(onnxruntime.__file__), "capi"))' 2>/dev/null) \
    || fail "$python cannot import onnxruntime: install onnxruntime-gpu for JetPack or pass --onnxruntime FILE"
  ort_lib=$(find "$ort_capi" -maxdepth 1 -name 'libonnxruntime.so.*' -print -quit)
  [ -n "$ort_lib" ] || fail "no libonnxruntime.so.* in $ort_capi"
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
  *,cuda,*) [ "$cuda" = yes ] || echo "jetson-bundle: warning: $torch_dir has no libtorch_cuda.so: training will run on the CPU" >&2 ;;
esac
if [ -z "$label" ]; then
  label=local
  if [ -r /etc/nv_tegra_release ]; then
    # "# R36 (release), REVISION: 4.0, ..." -> l4t-r36.4
    label=$(sed -n 's/^# R\([0-9]*\) (release), REVISION: \([0-9]*\).*/l4t-r\1.\2/p' /etc/nv_tegra_release)
    label=${label:-l4t}
  fi
fi
step "PyTorch $torch_version (CUDA build: $cuda) from $torch_dir; ONNX Runtime $ort_version from $ort_lib; features: ${features:-none}; label: $label"
exec bash "$root/scripts/bundle.sh" --target native --profile "$profile" --out "$out" \
  --libtorch "$torch_dir" --onnxruntime "$ort_lib" --features "$features" --label "$label"
