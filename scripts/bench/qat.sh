#!/usr/bin/env bash
# INT8 after quantization-aware fine-tuning against post-training INT8 and FP16 (issue 49 item 2).
# For the demo student (base scenes) and the demo teacher (field scenes): `headroom export --fp16
# --int8` with its defaults (post-training), then the same with `--qat` on labelled images of the
# scenes the model knows. Each file is scored on 48 held-out val images that chose nothing (seeds
# used by no other benchmark). The QAT export's wall time and peak resident set are measured with
# /usr/bin/time.
#
#   scripts/bench/qat.sh [WORK_DIR] [QAT_EPOCHS]
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

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| model (160 px, 3 classes) | FP32 | FP16 | INT8 PTQ | PTQ − FP16 | fine-tuned FP16 | INT8 QAT | QAT − FP16 (original) | QAT − FP16 (fine-tuned) | QAT time | QAT peak RSS |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
bench() {
  local name=$1 label=$2 model=$3 train=$4 val=$5
  "$bin" -q export --model "$model" --fp16 --int8 --calib "$train/images/train" --data "$val/data.yaml" \
    --out "$work/ptq-$name" --json >"$work/ptq-$name.json" 2>"$work/ptq-$name.log" \
    || { echo "qat.sh: export ($name) failed; log: $work/ptq-$name.log" >&2; tail -5 "$work/ptq-$name.log" >&2; exit 1; }
  /usr/bin/time -v "$bin" -q export --model "$model" --fp16 --int8 --calib "$train/images/train" \
    --qat "$train/data.yaml" --qat-epochs "$epochs" --data "$val/data.yaml" --out "$work/qat-$name" --json \
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
bench student "demo student (base scenes)" "$root/models/demo/yolov8n-shapes-160.onnx" "$work/base-train" "$work/base-val"
bench teacher "demo teacher (field scenes)" "$root/models/demo/teacher-shapes-160.onnx" "$work/field-train" "$work/field-val"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
