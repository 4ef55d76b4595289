#!/usr/bin/env bash
# The memory planner against measurement: one whole training step (twice) per configuration, each in
# its own process, the planner's estimate beside the measured peak (docs/PLAN.md, docs/BENCHMARKS.md).
#
#   scripts/bench/plan_memory.sh [MODEL_DIR] [THREADS]
#
# MODEL_DIR holds yolov8n-nc3-dyn.onnx and yolov5nu-nc3-dyn.onnx (full-width dynamic exports made by
# scripts/fixtures/make_plan_models.py; default .deps/plan-models). Prints one JSON line per run
# (crates/train/examples/checkpoint_memory.rs --window step), a table, and the machine load.
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
cd "$(dirname "$0")/../.."
dir=${1:-.deps/plan-models}
threads=${2:-2}
fail() { echo "plan_memory.sh: error: $*" >&2; exit 1; }
[ -f .deps/env.sh ] || fail ".deps/env.sh is missing: run scripts/setup.sh"
for m in yolov8n-nc3-dyn yolov5nu-nc3-dyn; do
    [ -f "$dir/$m.onnx" ] || fail "$dir/$m.onnx is missing: run scripts/fixtures/make_plan_models.py"
done
# shellcheck source=/dev/null
source .deps/env.sh
headroom_step "building the checkpoint_memory example"
cargo build --quiet -p headroom-train --example checkpoint_memory || fail "cargo build of the checkpoint_memory example"
bin="${CARGO_TARGET_DIR:-target}/debug/examples/checkpoint_memory"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# model imgsz batch train mode optimizer
while read -r model imgsz batch train mode optimizer; do
    # Freed tensors must leave the resident set for VmHWM to mean "needed at once".
    MALLOC_MMAP_THRESHOLD_=65536 "$bin" "$dir/$model.onnx" --window step --imgsz "$imgsz" --batch "$batch" \
        --train "$train" --mode "$mode" --optimizer "$optimizer" --objects 8 --threads "$threads" | tee -a "$out"
done <<'CONFIGS'
yolov8n-nc3-dyn 640 1 head plain sgd
yolov8n-nc3-dyn 640 2 head checkpointed sgd
yolov8n-nc3-dyn 640 1 neck+head plain sgd
yolov8n-nc3-dyn 640 2 neck+head checkpointed adamw
yolov8n-nc3-dyn 320 2 all plain sgd
yolov8n-nc3-dyn 320 1 all checkpointed sgd
yolov5nu-nc3-dyn 640 2 head plain sgd
yolov5nu-nc3-dyn 640 1 neck+head checkpointed sgd
yolov5nu-nc3-dyn 320 2 all checkpointed adamw
yolov5nu-nc3-dyn 320 1 all plain sgd
CONFIGS
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" <<'PY'
import json, sys
print("| family | imgsz | batch | train | backward | optimizer | estimate MB | measured MB | error |")
print("|---|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(f"| {d['family']} | {d['imgsz']} | {d['batch']} | {d['train']} | {d['mode']} | {d['optimizer']} | "
          f"{d['estimate_mb']:.1f} | {d['measured_mb']:.1f} | {d['error_pct']:+.1f} % |")
PY
