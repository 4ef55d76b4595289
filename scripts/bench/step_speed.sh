#!/usr/bin/env bash
# Issue 34's speed matrix: seconds per image and peak memory of `headroom train` with its defaults
# (every layer, batch B, the default allocator and fusion) beside Ultralytics' full fine-tune
# (`freeze=None`, the same batch, threads and images), at 640 and 160, one thread and two, batch 2
# and 8; each cell one run of scripts/bench/train_speed.py (3 epochs each, epochs 2-3 timed).
# Prints one JSON report per cell (kept in WORK/reports) and a Markdown table with the load.
#
# Usage: scripts/bench/step_speed.sh [WORK_DIR] [-- "NAME:FLAGS" ...]
# Env: HEADROOM (the binary; default the release build), SIZES ("640 160"), THREADS ("2 1"),
#      BATCHES ("2 8"), STUDENT (an ONNX student for headroom instead of the work folder's export:
#      a run with a teacher needs the data's class names, e.g. models/demo/yolov8n-shapes-160.onnx).
# Needs scripts/ultralytics-env.sh (the peer) and scripts/setup.sh.
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/tmp/headroom-step-speed}
shift || true
[ "${1:-}" = "--" ] && shift
runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=("defaults:--train all")
# shellcheck source=/dev/null
source "$root/.deps/env.sh"
[ -f "$root/.deps/ultralytics.env" ] || { echo "step_speed.sh: run scripts/ultralytics-env.sh first" >&2; exit 2; }
# shellcheck source=/dev/null
source "$root/.deps/ultralytics.env"
bin=${HEADROOM:-${CARGO_TARGET_DIR:-$root/target}/release/headroom}
[ -x "$bin" ] || { echo "step_speed.sh: no headroom binary at $bin (cargo build --release -p headroom-cli, or set HEADROOM)" >&2; exit 2; }
mkdir -p "$work/reports"
run_args=()
for r in "${runs[@]}"; do run_args+=(--run "$r"); done
for size in ${SIZES:-640 160}; do
  for threads in ${THREADS:-2 1}; do
    for batch in ${BATCHES:-2 8}; do
      report="$work/reports/$size-t$threads-b$batch.json"
      python3 "$root/scripts/bench/train_speed.py" --headroom "$bin" --work "$work/w$size" --imgsz "$size" \
        --threads "$threads" --batch "$batch" --freeze 0 ${STUDENT:+--student "$STUDENT"} "${run_args[@]}" > "$report.tmp"
      mv "$report.tmp" "$report"
    done
  done
done
python3 - "$work/reports" <<'PY'
import json, sys
from pathlib import Path
print("| imgsz | threads | batch | run | s/image | peak MB | Ultralytics s/image | peak MB | time ratio | memory ratio | load before/after |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for f in sorted(Path(sys.argv[1]).glob("*.json"), key=lambda p: (-int(p.stem.split("-")[0]), p.stem)):
    r = json.load(open(f))
    u = r["ultralytics"]
    for h in r["headroom"]:
        print(f"| {r['imgsz']} | {r['threads']} | {r['batch']} | {h['extra']} | {h['per_image']:.4f} | {h['peak_mb']:.0f} | "
              f"{u['per_image']:.4f} | {u['peak_mb']:.0f} | {h['per_epoch'] / u['per_epoch']:.2f} | "
              f"{h['peak_mb'] / u['peak_mb']:.2f} | {r['load_before'][0]:.1f}/{r['load_after'][0]:.1f} |")
PY
