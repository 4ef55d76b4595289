#!/usr/bin/env bash
# Creates the Ultralytics development environment in .deps/ultralytics (git-ignored).
# Ultralytics is a development tool here: fixtures, golden numbers, peer benchmarks.
# It is never a dependency of the product or of `cargo test` (DESIGN.md).
# Usage: scripts/ultralytics-env.sh   then   source .deps/ultralytics.env
# shellcheck source=/dev/null
source "$(dirname "$0")/lib/errtrap.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.deps/ultralytics"
pins=(ultralytics==8.4.190 torch==2.13.0 torchvision==0.28.0 onnx==1.23.2 onnxslim==0.1.98
      onnxruntime==1.31.1 pycocotools==2.0.11)
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# Offline settings (DESIGN.md): no font download, no hub access, writable config dirs.
cfg="$root/.deps/ultralytics-config"
mkdir -p "$cfg/Ultralytics" "$root/.deps/mpl"
export YOLO_OFFLINE=1 YOLO_CONFIG_DIR="$cfg" MPLCONFIGDIR="$root/.deps/mpl"
if ! "$venv/bin/python" -c 'import ultralytics, onnx, onnxslim, onnxruntime, pycocotools' 2>/dev/null; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}" || {
    echo "error: pip could not install ${pins[*]} into $venv" >&2; exit 1; }
fi
font=$(find /usr/share/fonts "$venv" -name '*.ttf' -print -quit 2>/dev/null)
if [ -z "$font" ]; then echo "error: no TTF font found to stand in for Arial.ttf" >&2; exit 1; fi
for f in Arial.ttf Arial.Unicode.ttf; do [ -f "$cfg/Ultralytics/$f" ] || cp "$font" "$cfg/Ultralytics/$f"; done
cat > "$root/.deps/ultralytics.env" <<ENV
export YOLO_OFFLINE=1
export YOLO_CONFIG_DIR="$cfg"
export MPLCONFIGDIR="$root/.deps/mpl"
export PATH="$venv/bin:\$PATH"
ENV
echo "ultralytics environment ready: source $root/.deps/ultralytics.env"
