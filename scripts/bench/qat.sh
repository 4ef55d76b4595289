#!/usr/bin/env bash
# INT8 after quantization-aware fine-tuning against post-training INT8 and FP16 (issue 49 item 2).
# For the demo student (base scenes), the demo teacher (field scenes) and the demo student retrained
# on the shifted field scenes as the demo retrains it (the teacher's pseudo-labels, the
# field-accurate preset, base images replayed, fitted to an Orin Nano 4GB): `headroom export --fp16
# --int8` with its defaults (post-training), then the same with `--qat` on labelled images of the
# scenes the model knows (for the retrained student: the teacher's pseudo-labels it was trained on,
# as `field run --deploy int8` does). Each file is scored on 48 held-out val images that chose
# nothing (seeds used by no other benchmark). The QAT export's wall time and peak resident set are
# measured with /usr/bin/time. ONNX Runtime's quantize_static on the same models and calibration
# images: scripts/bench/int8_peers.py (docs/BENCHMARKS.md gives both commands).
#
#   scripts/bench/qat.sh [WORK_DIR] [QAT_EPOCHS]
#
# QAT_DEMO_OUT=DIR adds a row for the retrained student of `HEADROOM_DEMO_OUT=DIR scripts/demo.sh`
# (calibrated on its field images, fine-tuned on its pseudo-labels, scored on its field/ val split,
# which picked nothing).
#
# Needs scripts/setup.sh and a built headroom (HEADROOM, else $CARGO_TARGET_DIR/debug/headroom).
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/tmp/headroom-qat}
epochs=${2:-3}
# shellcheck source=/dev/null
source "$root/.deps/env.sh"
bin=${HEADROOM:-${CARGO_TARGET_DIR:-$root/target}/debug/headroom}
[ -x "$bin" ] || { echo "qat.sh: no headroom binary at $bin (cargo build -p headroom-cli, or set HEADROOM)" >&2; exit 2; }
rm -rf "$work" && mkdir -p "$work"
"$bin" -q synth --preset base --seed 81 --train 64 --val 1 --out "$work/base-train" >/dev/null
"$bin" -q synth --preset base --seed 82 --train 1 --val 48 --out "$work/base-val" >/dev/null
"$bin" -q synth --preset field --seed 83 --train 64 --val 1 --out "$work/field-train" >/dev/null
"$bin" -q synth --preset field --seed 84 --train 1 --val 48 --out "$work/field-val" >/dev/null

# The retrained student: the demo's `headroom train` on these seeds (label's held-out fifth picks best.onnx).
"$bin" -q label --teacher "$root/models/demo/teacher-shapes-160.onnx" --images "$work/field-train/images/train" \
  --out "$work/field-labelled" --val-fraction 0.2 --seed 0 >/dev/null
"$bin" -q train --model "$root/models/demo/yolov8n-shapes-160.onnx" --data "$work/field-labelled/data.yaml" \
  --replay "$work/base-train/data.yaml" --preset field-accurate --teacher "$root/models/demo/teacher-shapes-160.onnx" \
  --plan auto --board orin-nano-4 --project "$work/runs" --name field >"$work/train.log" 2>&1 \
  || { echo "qat.sh: train failed; log: $work/train.log" >&2; tail -5 "$work/train.log" >&2; exit 1; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| model (160 px, 3 classes) | FP32 | FP16 | INT8 PTQ | PTQ − FP16 | fine-tuned FP16 | INT8 QAT | QAT − FP16 (original) | QAT − FP16 (fine-tuned) | QAT time | QAT peak RSS |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
# bench NAME LABEL MODEL CALIB_IMAGES QAT_DATA VAL
bench() {
  local name=$1 label=$2 model=$3 calib=$4 qat=$5 val=$6
  "$bin" -q export --model "$model" --fp16 --int8 --calib "$calib" --data "$val/data.yaml" \
    --out "$work/ptq-$name" --json >"$work/ptq-$name.json" 2>"$work/ptq-$name.log" \
    || { echo "qat.sh: export ($name) failed; log: $work/ptq-$name.log" >&2; tail -5 "$work/ptq-$name.log" >&2; exit 1; }
  /usr/bin/time -v "$bin" -q export --model "$model" --fp16 --int8 --calib "$calib" \
    --qat "$qat" --qat-epochs "$epochs" --data "$val/data.yaml" --out "$work/qat-$name" --json \
    >"$work/qat-$name.json" 2>"$work/qat-$name.log" \
    || { echo "qat.sh: export --qat ($name) failed; log: $work/qat-$name.log" >&2; tail -5 "$work/qat-$name.log" >&2; exit 1; }
  python3 - "$label" "$work/ptq-$name.json" "$work/qat-$name.json" "$work/qat-$name.log" <<'PY'
import json, re, sys
name, ptq, qat, log = sys.argv[1:]
def maps(path):
    return {f["precision"]: f["map50_95"] for f in json.load(open(path))["files"]}
p, q = maps(ptq), maps(qat)
text = open(log).read()
wall = re.search(r"Elapsed \(wall clock\) time.*?: (\S+)", text).group(1)
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) / 1024
pts = lambda v: f"{v * 100:+.1f}"
print(f"| {name} | {p['fp32']:.4f} | {p['fp16']:.4f} | {p['int8']:.4f} | {pts(p['int8'] - p['fp16'])} | "
      f"{q['fp16']:.4f} | {q['int8']:.4f} | {pts(q['int8'] - p['fp16'])} | {pts(q['int8'] - q['fp16'])} | {wall} | {rss:.0f} MiB |")
PY
}
bench student "demo student (base scenes)" "$root/models/demo/yolov8n-shapes-160.onnx" \
  "$work/base-train/images/train" "$work/base-train/data.yaml" "$work/base-val"
bench teacher "demo teacher (field scenes)" "$root/models/demo/teacher-shapes-160.onnx" \
  "$work/field-train/images/train" "$work/field-train/data.yaml" "$work/field-val"
bench retrained "demo student retrained on field scenes" "$work/runs/field/best.onnx" \
  "$work/field-train/images/train" "$work/field-labelled/data.yaml" "$work/field-val"
if [ -n "${QAT_DEMO_OUT:-}" ]; then
  demo=$QAT_DEMO_OUT
  [ -f "$demo/runs/field/best.onnx" ] || { echo "qat.sh: no $demo/runs/field/best.onnx (run HEADROOM_DEMO_OUT=$demo scripts/demo.sh)" >&2; exit 2; }
  bench demo "the demo's retrained student (scripts/demo.sh)" "$demo/runs/field/best.onnx" \
    "$demo/field-train/images/train" "$demo/field-labelled/data.yaml" "$demo/field"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
