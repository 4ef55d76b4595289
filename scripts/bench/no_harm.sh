#!/usr/bin/env bash
# Do no harm at short lengths (issue 34 item 7): the demo model fine-tuned on its own kind of data
# (`base` seed 1, 160 training images, its own 48-image val split picking best.onnx) for EPOCHS
# epochs, with the defaults and with `--train head`; then `headroom eval` of the starting model,
# `last.onnx` and `best.onnx` on a held-out `base` set (seed 2, 48 images) that no run sees.
# Prints a Markdown table: mAP50-95 held out, the change in points, and which epoch best.onnx is.
#
# Usage: scripts/bench/no_harm.sh [WORK_DIR] [EPOCHS (3)]
# Env: HEADROOM (the binary; default the dev build), NO_HARM_THREADS (1).
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/tmp/headroom-no-harm}
epochs=${2:-3}
# shellcheck source=/dev/null
source "$root/.deps/env.sh"
bin=${HEADROOM:-${CARGO_TARGET_DIR:-$root/target}/debug/headroom}
[ -x "$bin" ] || { echo "no_harm.sh: no headroom binary at $bin (cargo build -p headroom-cli, or set HEADROOM)" >&2; exit 2; }
threads=${NO_HARM_THREADS:-1}
model=$root/models/demo/yolov8n-shapes-160.onnx
mkdir -p "$work"
[ -f "$work/own/data.yaml" ] || "$bin" -q synth --preset base --seed 1 --train 160 --val 48 --out "$work/own" >/dev/null
[ -f "$work/held/data.yaml" ] || "$bin" -q synth --preset base --seed 2 --train 1 --val 48 --out "$work/held" >/dev/null
map() { "$bin" -q eval --model "$1" --data "$work/held/data.yaml" --json | python3 -c "import json,sys; print(f\"{json.load(sys.stdin)['metrics']['map50_95']:.4f}\")"; }
start=$(map "$model")
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| run ($epochs epochs) | held-out mAP50-95 of last.onnx | change | of best.onnx | change | best.onnx is | seconds |"
echo "|---|---|---|---|---|---|---|"
echo "| the starting model | $start | | | | | |"
for run in "defaults:" "head:--train head"; do
  name=${run%%:*} flags=${run#*:}
  rm -rf "$work/runs/$name"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  "$bin" -q train --model "$model" --data "$work/own/data.yaml" --epochs "$epochs" --threads "$threads" \
    --project "$work/runs" --name "$name" $flags >/dev/null
  seconds=$(( $(date +%s) - t0 ))
  last=$(map "$work/runs/$name/last.onnx") best=$(map "$work/runs/$name/best.onnx")
  epoch=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['best_epoch'])" "$work/runs/$name/results.json")
  python3 - "$name" "$start" "$last" "$best" "$epoch" "$seconds" <<'PY'
import sys
name, start, last, best, epoch, seconds = sys.argv[1:]
start, last, best = float(start), float(last), float(best)
which = "the starting model (epoch 0)" if epoch == "0" else f"epoch {epoch}"
print(f"| {name} | {last:.4f} | {100 * (last - start):+.2f} | {best:.4f} | {100 * (best - start):+.2f} | {which} | {seconds} |")
PY
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
