#!/usr/bin/env bash
# The memory planner against the field loop's measured training peak on scenarios it was never tuned
# on (issue 50 item 6): `headroom field run` with its defaults (the field-accurate preset, planned
# for this board, the teacher on every batch) on camera-sized JPEG frames, then on the same camera
# with two 8192² PNG frames among them. For each: the estimate of the configuration the plan chose
# (summary.json `plan.estimate`, training's `--plan auto`), training's own estimate of the run it
# made (train/results.json `planner.estimate_mb`) and the measured peak (`peak_mb`), with the error
# of each. (Before issue 51 the loop planned in a step of its own, whose plan.json was read here.)
#
#   scripts/bench/plan_field.sh [WORK_DIR] [EPOCHS]
#
# EPOCHS (default 3) shortens the nights: memory does not depend on the epoch count. Needs
# scripts/setup.sh and a built headroom (HEADROOM, else $CARGO_TARGET_DIR/debug/headroom).
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/tmp/headroom-plan-field}
epochs=${2:-3}
# shellcheck source=/dev/null
source "$root/.deps/env.sh"
bin=${HEADROOM:-${CARGO_TARGET_DIR:-$root/target}/debug/headroom}
[ -x "$bin" ] || { echo "plan_field.sh: no headroom binary at $bin (cargo build -p headroom-cli, or set HEADROOM)" >&2; exit 2; }
teacher=$root/models/demo/teacher-shapes-160.onnx
rm -rf "$work" && mkdir -p "$work"
# Seeds and a frame size no other benchmark uses: 1280x720 JPEG at quality 90, as a camera writes.
"$bin" -q synth --preset field --seed 71 --train 48 --val 1 --size 1280x720 --jpeg 90 --out "$work/camera" >/dev/null
"$bin" -q synth --preset field --seed 72 --train 1 --val 24 --size 1280x720 --jpeg 90 --out "$work/holdout" >/dev/null
"$bin" -q synth --preset base --seed 73 --train 1 --val 16 --out "$work/old" >/dev/null
"$bin" -q synth --preset field --seed 74 --train 2 --val 1 --size 8192x8192 --out "$work/large" >/dev/null

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| scenario | the plan's estimate | training's estimate | measured peak | error (plan) | error (training) |"
echo "|---|---|---|---|---|---|"
night() {
  local name=$1 images=$2
  local app=$work/app-$name
  mkdir -p "$app" && cp "$root/models/demo/yolov8n-shapes-160.onnx" "$app/model.onnx"
  "$bin" field run --images "$images" --teacher "$teacher" --model "$app/model.onnx" \
    --holdout "$work/holdout/data.yaml" --old "$work/old/data.yaml" --epochs "$epochs" \
    >"$work/$name.log" 2>&1 || { echo "plan_field.sh: field run ($name) failed; log: $work/$name.log" >&2; tail -5 "$work/$name.log" >&2; exit 1; }
  # A kept candidate's run stays in run/ until the next night; a deployed one is in history/.
  local run=$app/.headroom-field/model.onnx/run
  [ -d "$run" ] || run=$(find "$app/.headroom-field/model.onnx/history" -mindepth 1 -maxdepth 1 | sort | tail -1)
  python3 - "$name" "$run" <<'PY'
import json, sys
name, run = sys.argv[1], sys.argv[2]
chosen = json.load(open(f"{run}/summary.json"))["plan"]["estimate"] / 2**20
results = json.load(open(f"{run}/train/results.json"))
peak, estimate = results["peak_mb"], results["planner"]["estimate_mb"]
err = lambda e: f"{(e - peak) / peak * 100:+.1f} %"
print(f"| {name} | {chosen:.1f} MiB | {estimate:.1f} MiB | {peak:.1f} MiB | {err(chosen)} | {err(estimate)} |")
PY
}
night camera "$work/camera/images/train"
mkdir -p "$work/camera-large"
cp "$work/camera/images/train/"* "$work/camera-large/"
cp "$work/large/images/train/000000.png" "$work/camera-large/large-0.png"
cp "$work/large/images/train/000001.png" "$work/camera-large/large-1.png"
night camera-large "$work/camera-large"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
