#!/usr/bin/env bash
# The `headroom label` benchmark of issue 4 (docs/BENCHMARKS.md), one command, same machine, same run:
# for two teachers (YOLOv8s at 640, YOLOv8n at 160), images/s of
#   headroom label  vs  Ultralytics predict(save_txt=True)  vs  bare onnxruntime (sess.run only)
#   vs a plain Python onnxruntime pipeline, all with the same thread count, plus the agreement of
# headroom's labels with Ultralytics' (same class, IoU >= 0.9). Prints a markdown table with `uptime`.
#
# Data: small teacher: `headroom synth --preset base` 256x192 images. Large teacher: 640x480 images
# tiled 4x4 from 160x120 synth images (scripts/bench/tile.py says why); both --images N (>= 256).
# Teachers: .deps/teachers/ (git-ignored), made by scripts/fixtures/make_teachers.py if missing
# (the small one in seconds, the large one in ~10 minutes of CPU).
#
# Usage: scripts/bench/label_bench.sh [--threads 2] [--images 256] [--small-images N] [--runs 3] [--out runs/bench/label]
#        [--headroom target/release/headroom] [--skip-headroom] [--label-args "--workers 2 --batch 8"]
# --only small|large runs one teacher. --small-images: images for the small teacher (default --images; a 256-image run of it lasts ~1 s,
# so use more for stable numbers). --threads is ONNX Runtime's intra-op thread count for every
# contender (headroom label --threads);
# --label-args passes more options to every `headroom label` call.
# Needs: a built headroom (release build for real numbers: cargo build --release -p headroom-cli),
# the Ultralytics dev env (scripts/ultralytics-env.sh). Dev tool, never in CI.
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
threads=2 images=256 small_images="" only="" runs=3 out=runs/bench/label skip_headroom=0 label_args=""
headroom=${HEADROOM:-${CARGO_TARGET_DIR:-$root/target}/release/headroom}
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --small-images) small_images=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --headroom) headroom=$2; shift 2 ;;
    --skip-headroom) skip_headroom=1; shift ;;
    --label-args) label_args=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "label_bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
fail() { echo "label_bench.sh: FAILED: $*" >&2; exit 1; }
[ -x "$headroom" ] || fail "no headroom binary at $headroom (cargo build --release -p headroom-cli, or --headroom)"
[ -f .deps/ultralytics.env ] || fail ".deps/ultralytics.env missing: run scripts/ultralytics-env.sh"
# shellcheck source=/dev/null
source .deps/ultralytics.env
# shellcheck source=/dev/null
[ -f .deps/env.sh ] && source .deps/env.sh
mkdir -p "$out"
out=$(cd "$out" && pwd)
teachers=.deps/teachers

[ -f "$teachers/yolov8n-shapes-160-batch.onnx" ] || python scripts/fixtures/make_teachers.py --headroom "$headroom" --only small \
  || fail "make_teachers.py --only small"
[ -f "$teachers/yolov8s-shapes-640-batch.onnx" ] || python scripts/fixtures/make_teachers.py --headroom "$headroom" --only large \
  || fail "make_teachers.py --only large"

small_images=${small_images:-$images}
echo "== data ($small_images images for the small teacher, $images for the large one)" >&2
"$headroom" -q synth --preset base --seed 21 --train 1 --val "$small_images" --out "$out/data-160" || fail "headroom synth"
"$headroom" -q synth --preset base --seed 22 --train 1 --val $((images * 16)) --size 160x120 --out "$out/tiles-src" \
  || fail "headroom synth (tiles)"
python scripts/bench/tile.py --src "$out/tiles-src/images/val" --out "$out/data-640" --grid 4x4 --count "$images" >/dev/null \
  || fail "tile.py"
rm -rf "$out/tiles-src"

# name  teacher  imgsz  data  [dynamic-batch variant]
cases=(
  "small|models/demo/yolov8n-shapes-160.onnx|160|$out/data-160/images/val|$teachers/yolov8n-shapes-160-batch.onnx"
  "large|$teachers/yolov8s-shapes-640.onnx|640|$out/data-640/images/val|$teachers/yolov8s-shapes-640-batch.onnx"
)

# Runs `headroom label` $runs times on a fresh output folder; writes $2/headroom.json (best and median images/s).
run_headroom() {
  local teacher=$1 dir=$2 images_dir=$3 tag=$4
  local rates=()
  for run in $(seq "$runs"); do
    rm -rf "$dir/headroom-$tag"
    local load t0 t1
    load=$(uptime)
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086  # label_args is a list of options
    "$headroom" -q label --teacher "$teacher" --images "$images_dir" --out "$dir/headroom-$tag" --threads "$threads" \
      $label_args || fail "headroom label --teacher $teacher"
    t1=$(date +%s.%N)
    rates+=("$(python - "$dir/headroom-$tag/manifest.json" "$t0" "$t1" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
print(json.dumps({"manifest_images_per_s": m.get("images_per_second"), "manifest_wall_s": m.get("wall_seconds"),
                  "command_wall_s": wall, "images": m.get("counts", {}).get("labelled"),
                  "batch": m.get("batch"), "workers": m.get("workers"), "streams": m.get("streams", 1), "provider": m.get("provider")}))
PY
)")
    echo "headroom label ($tag) run $run: ${rates[-1]} ($load)" >&2
  done
  printf '%s\n' "${rates[@]}" | python -c '
import json, statistics, sys
runs = [json.loads(l) for l in sys.stdin if l.strip()]
r = [x["manifest_images_per_s"] or x["images"] / x["command_wall_s"] for x in runs]
print(json.dumps({"images_per_s_best": max(r), "images_per_s_median": statistics.median(r), "runs": runs}, indent=2))
' > "$dir/headroom-$tag.json"
}

for case in "${cases[@]}"; do
  IFS='|' read -r name teacher imgsz data dynamic <<<"$case"
  [ -z "$only" ] || [ "$only" = "$name" ] || continue
  dir="$out/$name"
  mkdir -p "$dir"
  echo "== $name teacher: $teacher at $imgsz ($(uptime))" >&2
  python scripts/bench/label_peers.py --teacher "$teacher" --images "$data" --imgsz "$imgsz" --threads "$threads" \
    --runs "$runs" --out "$dir" || fail "label_peers.py ($name)"
  if [ -f "$dynamic" ]; then
    python scripts/bench/label_peers.py --teacher "$dynamic" --images "$data" --imgsz "$imgsz" --threads "$threads" \
      --runs "$runs" --out "$dir/dynamic" --skip ultralytics,python --batches 8 || fail "label_peers.py ($name, dynamic)"
  fi
  if [ "$skip_headroom" = 0 ]; then
    run_headroom "$teacher" "$dir" "$data" static
    [ -f "$dynamic" ] && run_headroom "$dynamic" "$dir" "$data" dynamic
    for tag in static dynamic; do
      [ -d "$dir/headroom-$tag/labels" ] || continue
      python scripts/bench/agreement.py --ultralytics-labels "$dir/ultralytics/labels" \
        --headroom-labels "$dir/headroom-$tag/labels" --json "$dir/agreement-$tag.json" || fail "agreement.py ($name)"
    done
  fi
  python scripts/bench/agreement.py --ultralytics-labels "$dir/ultralytics/labels" \
    --headroom-labels "$dir/python/labels" --json "$dir/agreement-python.json" >/dev/null || fail "agreement.py (python)"
done

python scripts/bench/report.py "$out" | tee "$out/report.md"
