#!/usr/bin/env bash
# `headroom label --runtime torch` against `--runtime onnxruntime` (issue 48, docs/BENCHMARKS.md
# "The teacher in libtorch"): the same binary, teacher, images and thread count, the two runtimes
# interleaved run by run; images/s as the manifest counts them (the pipeline's time: decoding,
# letterbox, inference, NMS, writing), median of --runs, and the ratio torch / ONNX Runtime.
# Teachers: the demo teacher at 160 (models/demo, 256x192 JPEG images) and the 640 export of the
# ONNX fixtures (640x480 JPEG images), or the files given with --teacher (repeatable; --size WxH
# for their images).
# Usage: scripts/bench/label_runtime.sh [--threads 2] [--images 256] [--runs 3] [--device cpu]
#        [--headroom BIN] [--out runs/bench/label-runtime] [--teacher T.onnx --size WxH]...
# On a GPU: --device cuda (torch runs fp16 autocast; ONNX Runtime needs its CUDA provider there).
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
threads=2 images=256 runs=3 device=cpu out=runs/bench/label-runtime
headroom=${HEADROOM:-${CARGO_TARGET_DIR:-$root/target}/release/headroom}
teachers=() sizes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --headroom) headroom=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --teacher) teachers+=("$2"); shift 2 ;;
    --size) sizes+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "label_runtime.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
fail() { echo "label_runtime.sh: FAILED: $*" >&2; exit 1; }
[ -x "$headroom" ] || fail "no headroom binary at $headroom (cargo build --release -p headroom-cli, or --headroom)"
# shellcheck source=/dev/null
[ -f .deps/env.sh ] && source .deps/env.sh
if [ ${#teachers[@]} -eq 0 ]; then
  teachers=(models/demo/teacher-shapes-160.onnx tests/fixtures/onnx/yolov8n-w00625-nc3-640.onnx)
  sizes=(256x192 640x480)
fi
[ ${#sizes[@]} -eq ${#teachers[@]} ] || fail "give one --size per --teacher"
mkdir -p "$out"
out=$(cd "$out" && pwd)
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
rate() { python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(m['counts']['labelled'] / m['pipeline_seconds'])" "$1"; }

echo "| teacher | images | ONNX Runtime (images/s) | torch (images/s) | torch / ONNX Runtime | load before → after |"
echo "|---|---|---|---|---|---|"
for i in "${!teachers[@]}"; do
  teacher=${teachers[$i]} size=${sizes[$i]}
  data="$out/data-$size"
  [ -d "$data/images/val" ] || "$headroom" -q synth --preset field --seed 48 --train 1 --val "$images" \
    --size "$size" --jpeg 90 --out "$data" > /dev/null || fail "headroom synth"
  load0=$(cut -d' ' -f1 /proc/loadavg)
  ort=() torch=()
  for run in $(seq "$runs"); do
    for runtime in onnxruntime torch; do
      dest="$out/$(basename "$teacher" .onnx)-$runtime-$run"
      rm -rf "$dest"
      "$headroom" -q label --teacher "$teacher" --images "$data/images/val" --out "$dest" --runtime "$runtime" \
        --device "$device" --threads "$threads" --settle 0 --json > "$dest.json" || fail "label --runtime $runtime ($teacher)"
      if [ "$runtime" = onnxruntime ]; then ort+=("$(rate "$dest.json")"); else torch+=("$(rate "$dest.json")"); fi
    done
  done
  load1=$(cut -d' ' -f1 /proc/loadavg)
  o=$(printf '%s\n' "${ort[@]}" | median) t=$(printf '%s\n' "${torch[@]}" | median)
  printf '| %s | %s %s | %.1f (%s) | %.1f (%s) | **%.2f×** | %s → %s |\n' "$(basename "$teacher")" "$images" "$size" \
    "$o" "$(printf '%.0f ' "${ort[@]}" | sed 's/ $//')" "$t" "$(printf '%.0f ' "${torch[@]}" | sed 's/ $//')" "$(awk -v a="$t" -v b="$o" 'BEGIN { print a / b }')" "$load0" "$load1"
done
echo
echo "$("$headroom" --version | head -n 1) ($headroom), --threads $threads, --device $device, $runs runs each (median; each run's figure in brackets), $(nproc) cores"
