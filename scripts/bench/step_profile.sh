#!/usr/bin/env bash
# Where a training step's time goes (issue 34, item 1): `headroom train --profile` (libtorch's own
# profiler) beside PyTorch's profiler on Ultralytics' full fine-tune of the same model (yolov8n,
# 3 classes, the export of the same yaml), data, batch and threads, each traced over PASSES passes
# after its first; prints both summed by phase and the costliest ops (scripts/bench/step_profile.py).
#
# Usage: scripts/bench/step_profile.sh [WORK_DIR]
# Env: SIZE (160), THREADS (1), BATCH (2), PASSES (8; the epoch has 32 images: PASSES < 32/BATCH),
#      HEADROOM (the binary; default the release build), EXTRA (more `headroom train` flags),
#      NAME (a suffix for the trace files of a run with EXTRA).
# Needs scripts/setup.sh and scripts/ultralytics-env.sh; never in CI.
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/tmp/headroom-step-profile}
size=${SIZE:-160} threads=${THREADS:-1} batch=${BATCH:-2} passes=${PASSES:-8}
# shellcheck source=/dev/null
source "$root/.deps/env.sh"
[ -f "$root/.deps/ultralytics.env" ] || { echo "step_profile.sh: run scripts/ultralytics-env.sh first" >&2; exit 2; }
# shellcheck source=/dev/null
source "$root/.deps/ultralytics.env"
bin=${HEADROOM:-${CARGO_TARGET_DIR:-$root/target}/release/headroom}
[ -x "$bin" ] || { echo "step_profile.sh: no headroom binary at $bin (cargo build --release -p headroom-cli, or set HEADROOM)" >&2; exit 2; }
w="$work/w$size"
if [ ! -f "$w/yolov8n-nc3-$size.onnx" ]; then
  # The data (headroom synth), the yaml and its export, made once by the memory benchmark.
  python3 "$root/scripts/bench/train_memory.py" --headroom "$bin" --work "$w" --imgsz "$size" --only headroom >/dev/null
fi
tag="$size-t$threads-b$batch${NAME:+-$NAME}"
stamp=$(date +%s)
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
"$bin" -q train --model "$w/yolov8n-nc3-$size.onnx" --data "$w/data/data.yaml" --batch "$batch" --epochs 1 \
  --threads "$threads" --project "$work/runs" --name "h-$tag-$stamp" --profile "$work/headroom-$tag.json" \
  --profile-passes "$passes" ${EXTRA:-} >/dev/null
python3 "$root/scripts/bench/step_profile.py" ultralytics --model "$w/yolov8n-nc3.yaml" --data "$w/data/data.yaml" \
  --imgsz "$size" --batch "$batch" --threads "$threads" --passes "$passes" --out "$work/ultralytics-$tag.json" \
  --project "$work/runs" >/dev/null 2>&1
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "imgsz $size, $threads thread(s), batch $batch, $passes passes each"
python3 "$root/scripts/bench/step_profile.py" compare "$work/headroom-$tag.json" "$passes" \
  "$work/ultralytics-$tag.json" "$passes"
