#!/usr/bin/env bash
# How much of the student-to-teacher gap a field retrain recovers, per `headroom train` setting, on
# the demo scenario (the seeds of scripts/demo.sh): the student (models/demo/yolov8n-shapes-160.onnx)
# and the field-aware teacher are scored on held-out `field` scenes (seed 12, true labels) and old
# `base` scenes (seed 2); the teacher pseudo-labels 64 `field` images (seed 11) with label's default
# held-out split (best.onnx is picked on it, so the reported splits selected nothing); each setting
# trains with 1:1 replay of 64 `base` images (seed 1) and `headroom train`'s defaults for what it
# does not set, and its best.onnx is scored on both. `TEACHER` in a setting's flags is the teacher.
# A setting whose flags start with `ultralytics` is an Ultralytics peer on the same pseudo-labels and
# the same replayed images (scripts/bench/train_peers.py FLAGS: its --freeze, --batch, --epochs;
# from the student rebuilt as a .pt by scripts/fixtures/onnx_to_pt.py, BatchNorms calibrated on the
# replayed images; its last.onnx scored as headroom's; needs scripts/ultralytics-env.sh), e.g.
#   "Ultralytics freeze=10 batch=2:ultralytics --freeze 10 --batch 2 --epochs 30"
# (TRUE_LABELS among its flags: the field images' true labels instead of the pseudo-labels).
#
# Usage: scripts/bench/adaptation.sh [WORK_DIR] [-- "NAME:FLAGS" ...]
#   e.g. scripts/bench/adaptation.sh /tmp/adapt "defaults:" "head:--train head --nbs 64"
# Env: ADAPT_EPOCHS (train's default; a setting's own --epochs wins), ADAPT_FIELD_IMAGES (64 field images labelled),
#      ADAPT_PRESET (field: the shifted scenes' synth preset), ADAPT_PARALLEL (1: settings at a time).
# Prints one Markdown row per setting (new scenes, share of the gap, old scenes, seconds; a peer's
# row adds its peak RSS) and the load average. Needs scripts/setup.sh and a built headroom (cargo build -p headroom-cli).
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/tmp/headroom-adaptation}
shift || true
[ "${1:-}" = "--" ] && shift
configs=("$@")
if [ ${#configs[@]} -eq 0 ]; then
  configs=("the old defaults (head, nbs 64, 10 epochs, no augmentation):--train head --nbs 64 --epochs 10 --mosaic 0 --scale 0 --translate 0 --hsv 0,0,0"
    "the defaults (all, nbs auto, 30 epochs, augmentation):"
    "the defaults with the teacher (field-accurate):--teacher TEACHER"
    "head with the teacher:--train head --teacher TEACHER")
fi
# shellcheck source=/dev/null
source "$root/.deps/env.sh"
bin=${HEADROOM:-${CARGO_TARGET_DIR:-$root/target}/debug/headroom}
[ -x "$bin" ] || { echo "adaptation.sh: no headroom binary at $bin (cargo build -p headroom-cli, or set HEADROOM)" >&2; exit 2; }
model=$root/models/demo/yolov8n-shapes-160.onnx
teacher=$root/models/demo/teacher-shapes-160.onnx
mkdir -p "$work"
synth() { [ -f "$work/$1/data.yaml" ] || "$bin" -q synth --preset "$2" --seed "$3" --train "$4" --val "$5" --out "$work/$1" >/dev/null; }
synth base-train base 1 64 1
synth base base 2 1 48
preset=${ADAPT_PRESET:-field} field_images=${ADAPT_FIELD_IMAGES:-64} epochs=${ADAPT_EPOCHS:-}
synth field-train "$preset" 11 "$field_images" 1
synth field "$preset" 12 1 48
[ -f "$work/labelled/data.yaml" ] || "$bin" -q label --teacher "$teacher" --images "$work/field-train/images/train" \
  --out "$work/labelled" >/dev/null
map() { "$bin" -q eval --model "$1" --data "$work/$2/data.yaml" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["metrics"]["map50_95"])'; }
student_field=$(map "$model" field) student_base=$(map "$model" base) teacher_field=$(map "$teacher" field)
python3 - "$student_field" "$teacher_field" "$student_base" <<'PY'
import sys
s, t, b = map(float, sys.argv[1:])
print(f"student: field {s:.3f}, base {b:.3f}; teacher: field {t:.3f}; gap {t - s:.3f}")
print("| setting | new scenes (field) | share of the gap | old scenes (base) | seconds |")
print("|---|---|---|---|---|")
PY
# run_one NAME FLAGS: trains one setting and prints its row.
run_one() {
  local name=$1 flags=$2 dir start seconds epoch_flag=()
  dir="$work/runs/$(echo "$name" | tr ' +()=,' '______')"
  rm -rf "$dir"
  flags=${flags//TEACHER/$teacher}
  [[ " $flags " == *" --epochs "* || -z "$epochs" ]] || epoch_flag=(--epochs "$epochs")
  [[ " $flags " == *" --batch "* ]] || epoch_flag+=(--batch 2)
  start=$(date +%s)
  # shellcheck disable=SC2086
  "$bin" -q train --model "$model" --data "$work/labelled/data.yaml" --replay "$work/base-train/data.yaml" \
    "${epoch_flag[@]}" --threads 1 --project "$(dirname "$dir")" --name "$(basename "$dir")" $flags \
    >"$dir.log" 2>&1 || { echo "| $name | failed (see $dir.log) | | | |"; return; }
  seconds=$(( $(date +%s) - start ))
  python3 - "$name" "$(map "$dir/best.onnx" field)" "$(map "$dir/best.onnx" base)" "$student_field" "$teacher_field" \
    "$student_base" "$seconds" <<'PY'
import sys
name = sys.argv[1]
f, b, s, t, sb = map(float, sys.argv[2:7])
print(f"| {name} | {f:.3f} ({f - s:+.3f}) | {100 * (f - s) / (t - s):.0f} % | {b:.3f} ({b - sb:+.3f}) | {sys.argv[7]} |", flush=True)
PY
}
# run_peer NAME FLAGS: an Ultralytics peer (FLAGS after `ultralytics`) and its row.
run_peer() {
  local name=$1 flags=${2#ultralytics} dir py=$root/.deps/ultralytics/bin/python json train=$work/labelled/train.txt
  # TRUE_LABELS: the field images with their true labels (all of field-train) instead of the teacher's.
  [[ " $flags " == *" TRUE_LABELS "* ]] && { train=$work/field-train/images/train; flags=${flags//TRUE_LABELS/}; }
  dir="$work/peers/$(echo "$name" | tr ' +()=,' '______')"
  [ -x "$py" ] || { echo "| $name | no Ultralytics environment (scripts/ultralytics-env.sh) | | | |"; return; }
  mkdir -p "$work/peers"
  (
    # shellcheck source=/dev/null
    source "$root/.deps/ultralytics.env"
    if [ ! -f "$work/student.pt" ]; then
      # Peers may run side by side: each converts into its own file, the rename publishes one.
      OMP_NUM_THREADS=1 "$py" "$root/scripts/fixtures/onnx_to_pt.py" "$model" "$work/student.$BASHPID.pt" \
        --headroom "$bin" --calibrate "$work/base-train/images/train" >"$work/student.pt.log" 2>&1 \
        || { echo "| $name | failed (see $work/student.pt.log) | | | |"; exit; }
      mv -f "$work/student.$BASHPID.pt" "$work/student.pt"
    fi
    # The same pseudo-labels (or true labels) and replayed images as headroom's runs (all of them each
    # epoch), label's held-out split as val.
    cat >"$dir.data.yaml" <<YAML
train: [$train, $work/base-train/images/train]
val: $work/labelled/val.txt
nc: 3
names: ["circle","square","triangle"]
YAML
    # shellcheck disable=SC2086
    json=$(OMP_NUM_THREADS=1 "$py" "$root/scripts/bench/train_peers.py" --headroom "$bin" --pt "$work/student.pt" \
      --data "$dir.data.yaml" --val "$work/field/data.yaml" "$work/base/data.yaml" --threads 1 \
      --work "$work/peers" --name "$(basename "$dir")" $flags 2>"$dir.log" | tail -n 1) \
      || { echo "| $name | failed (see $dir.log) | | | |"; exit; }
    python3 - "$name" "$json" "$student_field" "$teacher_field" "$student_base" "$work" <<'PY'
import json, sys
name, report = sys.argv[1], json.loads(sys.argv[2])
s, t, sb = map(float, sys.argv[3:6])
f = report["val"][f"{sys.argv[6]}/field/data.yaml"]["after"]["map50_95"]
b = report["val"][f"{sys.argv[6]}/base/data.yaml"]["after"]["map50_95"]
print(f"| {name} | {f:.3f} ({f - s:+.3f}) | {100 * (f - s) / (t - s):.0f} % | {b:.3f} ({b - sb:+.3f}) | "
      f"{report['seconds']:.0f} (peak {report['peak_mb']:.0f} MB at 160) |", flush=True)
PY
  )
}
mkdir -p "$work/runs"
parallel=${ADAPT_PARALLEL:-1}
for config in "${configs[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n; done
  case "${config#*:}" in
    ultralytics*) run_peer "${config%%:*}" "${config#*:}" & ;;
    *) run_one "${config%%:*}" "${config#*:}" & ;;
  esac
done
wait
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
