#!/usr/bin/env bash
# Peak memory and time of one training backward, plain vs checkpointed, each in its own process.
#
#   scripts/bench/checkpoint_memory.sh MODEL.onnx [IMGSZ] [BATCH] [THREADS]
#
# MODEL: a full-width YOLOv8n export with a dynamic input (scripts/fixtures/make_teachers.py makes
# .deps/teachers/yolov8n-shapes-160-dyn.onnx). Prints one JSON line per run and the machine load.
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
cd "$(dirname "$0")/../.."
model=${1:?usage: checkpoint_memory.sh MODEL.onnx [IMGSZ] [BATCH] [THREADS]}
imgsz=${2:-640}
batch=${3:-2}
threads=${4:-2}
fail() { echo "checkpoint_memory.sh: error: $*" >&2; exit 1; }
[ -f .deps/env.sh ] || fail ".deps/env.sh is missing: run scripts/setup.sh"
# shellcheck source=/dev/null
source .deps/env.sh
headroom_step "building the checkpoint_memory example"
cargo build --quiet -p headroom-train --example checkpoint_memory || fail "cargo build of the checkpoint_memory example"
headroom_step "measuring"
bin="${CARGO_TARGET_DIR:-target}/debug/examples/checkpoint_memory"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for train in 10 neck+head head 0; do
    for mode in plain checkpointed; do
        # Freed tensors must leave the resident set for VmHWM to mean "needed at once".
        MALLOC_MMAP_THRESHOLD_=65536 "$bin" "$model" --imgsz "$imgsz" --batch "$batch" \
            --train "$train" --mode "$mode" --threads "$threads"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
