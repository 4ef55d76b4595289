#!/usr/bin/env bash
# What a step costs when `--nbs auto` makes one every pass: the field-accurate configuration on the
# demo scenario (the work folder of scripts/bench/adaptation.sh) for a few epochs, with the old
# checkpoint rule (every 10 optimiser steps) and with the default (every 60 s), alternated ROUNDS
# times so that both see the same load; prints each run's training seconds (metrics.csv, summed
# over the epochs: validation and writing ONNX are outside it), its checkpoints written (the debug
# line of each, epoch ends included) and their seconds, and where
# the time went (the `epoch N time:` debug line: data, trunk + teacher, head, loss, optimiser step).
#
# Usage: scripts/bench/step_cost.sh WORK_DIR [EPOCHS (3)] [ROUNDS (2)]
# Env: STEP_ALLOCATOR (fast), STEP_THREADS (1). Needs scripts/setup.sh and a built headroom.
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:?usage: step_cost.sh WORK_DIR [EPOCHS] [ROUNDS]}
epochs=${2:-3} rounds=${3:-2}
# shellcheck source=/dev/null
source "$root/.deps/env.sh"
bin=${HEADROOM:-${CARGO_TARGET_DIR:-$root/target}/debug/headroom}
[ -f "$work/labelled/data.yaml" ] || { echo "step_cost.sh: run scripts/bench/adaptation.sh $work first (it makes the data)" >&2; exit 2; }
echo "| rule | round | training seconds | checkpoints (their seconds) | data | trunk + teacher | head | loss | step |"
echo "|---|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
  for rule in "every 10 steps:--save-period 10 --save-interval 0" "every 60 s (default):"; do
    name=${rule%%:*} flags=${rule#*:} dir="$work/step-cost/r$round-${name%% *}${name##* }"
    rm -rf "$dir"; mkdir -p "$(dirname "$dir")"
    # shellcheck disable=SC2086
    "$bin" -v train --model "$root/models/demo/yolov8n-shapes-160.onnx" --data "$work/labelled/data.yaml" \
      --replay "$work/base-train/data.yaml" --preset field-accurate --teacher "$root/models/demo/teacher-shapes-160.onnx" \
      --epochs "$epochs" --threads "${STEP_THREADS:-1}" --allocator "${STEP_ALLOCATOR:-fast}" \
      --project "$(dirname "$dir")" --name "$(basename "$dir")" $flags >"$dir.log" 2>&1
    python3 - "$name" "$round" "$dir" <<'PY'
import csv, re, sys
name, rnd, d = sys.argv[1:4]
rows = list(csv.DictReader(open(f"{d}/metrics.csv")))
seconds = sum(float(r["seconds"]) for r in rows)
log = open(f"{d}.log", errors="replace").read()
writes = [float(x) for x in re.findall(r"checkpoint \S*ckpt/last.pt written: [0-9.]+ MB in ([0-9.]+) s", log)]
saves = f"{len(writes)} ({sum(writes):.1f} s)"
phases = {}
for line in re.findall(r"epoch \d+ time: (.*)", log):
    for part in line.split("; "):
        k, v = part.rsplit(" ", 2)[0], float(part.rsplit(" ", 2)[1])
        phases[k] = phases.get(k, 0.0) + v
print(f"| {name} | {rnd} | {seconds:.1f} | {saves} | " + " | ".join(f"{v:.1f}" for v in phases.values()) + " |")
PY
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
