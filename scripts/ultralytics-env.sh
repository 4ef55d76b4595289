#!/usr/bin/env bash
# Creates the Ultralytics development environment in .deps/ultralytics (git-ignored).
# Ultralytics is a development tool here: fixtures, golden numbers, peer benchmarks.
# It is never a dependency of the product or of `cargo test` (docs/ARCHITECTURE.md).
# Usage: scripts/ultralytics-env.sh   then   source .deps/ultralytics.env
# shellcheck source=lib/errtrap.sh
source "$(dirname "$0")/lib/errtrap.sh"
fail() { echo "ultralytics-env: error: $*" >&2; exit 1; }
step() { headroom_step "$*"; echo "ultralytics-env: $*" >&2; }
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.deps/ultralytics"
pins=(ultralytics==8.4.190 torch==2.13.0 torchvision==0.28.0 onnx==1.23.2 onnxslim==0.1.98
      onnxruntime==1.31.1 pycocotools==2.0.11)
if [ ! -x "$venv/bin/python" ]; then
  step "creating the virtual environment $venv"
  python3 -m venv "$venv" || fail "python3 -m venv failed (apt-get install python3-venv)"
fi
# Offline settings (docs/ARCHITECTURE.md): no font download, no hub access, writable config dirs.
cfg="$root/.deps/ultralytics-config"
mkdir -p "$cfg/Ultralytics" "$root/.deps/mpl"
export YOLO_OFFLINE=1 YOLO_CONFIG_DIR="$cfg" MPLCONFIGDIR="$root/.deps/mpl"
if ! "$venv/bin/python" -c 'import ultralytics, onnx, onnxslim, onnxruntime, pycocotools' 2>/dev/null; then
  step "installing ${pins[*]} into $venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}" \
    || fail "pip could not install ${pins[*]} into $venv (is PyPI reachable?)"
fi
headroom_step "finding a TTF font"
# find exits 1 when /usr/share/fonts does not exist (a fresh machine) even if it found a font in
# the venv: without `|| true` that would end the script.
font=$(find /usr/share/fonts "$venv" -name '*.ttf' -print -quit 2>/dev/null || true)
[ -n "$font" ] || fail "no TTF font found to stand in for Arial.ttf (apt-get install fonts-dejavu-core)"
for f in Arial.ttf Arial.Unicode.ttf; do [ -f "$cfg/Ultralytics/$f" ] || cp "$font" "$cfg/Ultralytics/$f"; done
cat > "$root/.deps/ultralytics.env" <<ENV
export YOLO_OFFLINE=1
export YOLO_CONFIG_DIR="$cfg"
export MPLCONFIGDIR="$root/.deps/mpl"
export PATH="$venv/bin:\$PATH"
ENV
echo "ultralytics environment ready: source $root/.deps/ultralytics.env"
