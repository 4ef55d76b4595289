#!/usr/bin/env bash
# The memory planner against whole training runs, with and without a dense-distillation teacher:
# each configuration trains the demo student (models/demo, 160) for one epoch on 16 images of the
# teacher's pseudo-labels in its own process, and its results.json holds the measured peak
# (`peak_rss_mb`, whole process) beside the planner's estimate of that run (`planner.estimate_mb`).
# The teacher is the demo's (models/demo/teacher-shapes-160.onnx, a second YOLOv8n).
#
#   scripts/bench/plan_run.sh [WORK_DIR] [-- "NAME:FLAGS" ...]
#
# Needs scripts/setup.sh and a built headroom (HEADROOM, else $CARGO_TARGET_DIR/debug/headroom).
# Prints a Markdown table (estimate, measured, error) and the load average.
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/tmp/headroom-plan-run}
shift || true
[ "${1:-}" = "--" ] && shift
configs=("$@")
teacher=$root/models/demo/teacher-shapes-160.onnx
if [ ${#configs[@]} -eq 0 ]; then
  configs=("all (the default):" "all, teacher:--teacher TEACHER" "head:--train head"
    "head, teacher (ONNX Runtime):--train head --teacher TEACHER" "head, teacher (libtorch):--train head --trunk torch --teacher TEACHER")
fi
# shellcheck source=/dev/null
source "$root/.deps/env.sh"
bin=${HEADROOM:-${CARGO_TARGET_DIR:-$root/target}/debug/headroom}
[ -x "$bin" ] || { echo "plan_run.sh: no headroom binary at $bin (cargo build -p headroom-cli, or set HEADROOM)" >&2; exit 2; }
model=$root/models/demo/yolov8n-shapes-160.onnx
mkdir -p "$work/runs"
[ -f "$work/field/data.yaml" ] || "$bin" -q synth --preset field --seed 11 --train 16 --val 1 --out "$work/field" >/dev/null
[ -f "$work/labelled/data.yaml" ] || "$bin" -q label --teacher "$teacher" --images "$work/field/images/train" \
  --out "$work/labelled" >/dev/null
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| configuration | estimate MB | measured MB | error |"
echo "|---|---|---|---|"
for config in "${configs[@]}"; do
  name=${config%%:*} flags=${config#*:}
  flags=${flags//TEACHER/$teacher}
  dir="$work/runs/$(echo "$name" | tr ' +(),' '_____')"
  rm -rf "$dir"
  # shellcheck disable=SC2086
  "$bin" -q train --model "$model" --data "$work/labelled/data.yaml" --epochs 1 --threads 1 \
    --project "$(dirname "$dir")" --name "$(basename "$dir")" $flags >"$dir.log" 2>&1 \
    || { echo "| $name | failed (see $dir.log) | | |"; continue; }
  python3 - "$name" "$dir/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
e, m = r["planner"]["estimate_mb"], r["peak_rss_mb"]
print(f"| {sys.argv[1]} | {e:.1f} | {m:.1f} | {100 * (e - m) / m:+.1f} % |", flush=True)
PY
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
