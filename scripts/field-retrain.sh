#!/usr/bin/env bash
# The field retraining loop, as a device runs it every night (docs/FIELD.md):
#   new images → label with the teacher → plan for this device → train (resumable) → export
#   (FP16, INT8 + TensorRT cache) → evaluate candidate and deployed model on a held-out set →
#   deploy only if better: atomic swap of the file the inference service reads, the previous one
#   kept beside it for --rollback → summary JSON.
#
#   scripts/field-retrain.sh --images DIR --deployed PATH.onnx --holdout data.yaml [options]
#   scripts/field-retrain.sh --rollback --deployed PATH.onnx
#
# Options:
#   --teacher T.onnx     teacher that labels the images [models/demo/teacher-shapes-160.onnx]
#   --preset NAME        run preset of configs/runs.toml: field-quick (default), field-accurate
#   --replay OLD.yaml    old-scene data replayed against forgetting (recommended)
#   --device NAME        device preset for the planner (headroom plan --help) [x86-cpu]
#   --reserve SIZE       memory left to the running inference service [0]
#   --epochs N           [the preset's: 10]
#   --train PART         what trains: head, neck+head, all [the preset's: head]
#   --min-gain P         deploy when candidate mAP50-95 >= deployed + P (points) [the preset's: 0.1]
#   --work DIR           state folder [<deployed's folder>/.headroom-field]
#   --threads N          threads for every step [0: defaults]
# Env: HEADROOM_BIN (the binary; default: `headroom` on PATH, else this checkout's debug build).
#
# Safe to kill at any moment: each step is resumable or restartable and marks itself done; a rerun
# continues the unfinished run. The deployed file is only ever replaced by rename(2) of a complete
# copy in the same folder, so the service sees the old model or the new one, never a partial file.
# One run at a time: a second one exits 3 while the first holds <work>/lock.
# Exit: 0 done (deployed or kept), 1 a step failed, 2 usage, 3 another run holds the lock.
# Testing hook: HEADROOM_FIELD_KILL_AT=<step>[:mid] kills this script (and the step's process) with
# SIGKILL at that point; steps: label plan train export eval deploy deploy-swap (scripts/tests/field_retrain.sh).
set -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/errtrap.sh
source "$root/scripts/lib/errtrap.sh"

fail() { echo "field-retrain: FAILED: $*" >&2; exit 1; }
usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
log() { printf '%s field-retrain: %s\n' "$(date -u +%FT%TZ)" "$*" >&2; }

images="" deployed="" holdout="" teacher="$root/models/demo/teacher-shapes-160.onnx" replay=""
device="x86-cpu" reserve="0" epochs="" min_gain="" part="" preset=field-quick work="" threads=0 rollback=0
while [ $# -gt 0 ]; do
  case "$1" in
    --images) images=$2; shift 2 ;;
    --deployed) deployed=$2; shift 2 ;;
    --holdout) holdout=$2; shift 2 ;;
    --teacher) teacher=$2; shift 2 ;;
    --replay) replay=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --reserve) reserve=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --train) part=$2; shift 2 ;;
    --preset) preset=$2; shift 2 ;;
    --min-gain) min_gain=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rollback) rollback=1; shift ;;
    -h|--help) usage ;;
    *) echo "field-retrain: unknown argument '$1'" >&2; usage ;;
  esac
done
# The preset fills what the command line left unset.
preset_values=$(python3 - "$root/configs/runs.toml" "$preset" <<'PY'
import sys, tomllib
presets = tomllib.load(open(sys.argv[1], "rb"))
if sys.argv[2] not in presets:
    sys.exit(f"unknown preset `{sys.argv[2]}`; known: {', '.join(presets)}")
p = presets[sys.argv[2]]
print(p["epochs"], p["train"], p["min_gain"], p.get("nbs", 64), int(p.get("augment", False)), int(p.get("distill", False)))
PY
) || { echo "field-retrain: --preset $preset: see above (configs/runs.toml)" >&2; exit 2; }
read -r preset_epochs preset_train preset_gain preset_nbs preset_augment preset_distill <<<"$preset_values"
epochs=${epochs:-$preset_epochs} part=${part:-$preset_train} min_gain=${min_gain:-$preset_gain}
[ -n "$deployed" ] || { echo "field-retrain: --deployed PATH.onnx is required" >&2; usage; }
[ -f "$deployed" ] || fail "--deployed $deployed: no such file (the model the inference service reads)"
deployed=$(cd "$(dirname "$deployed")" && pwd)/$(basename "$deployed")
previous="$deployed.prev"
work=${work:-$(dirname "$deployed")/.headroom-field}
mkdir -p "$work" || fail "cannot create $work"

# One run at a time (flock is released by the kernel when this process dies, even by SIGKILL).
exec 9>"$work/lock"
flock -n 9 || { echo "field-retrain: another run holds $work/lock" >&2; exit 3; }

sha() { sha256sum "$1" | cut -d' ' -f1; }

# swap SRC: make SRC the deployed file, keeping the current one as .prev. Each step is a rename in
# the deployed file's folder; rerunning after a kill at any point ends in the same state.
swap_in() {
  local src=$1 dir tmp
  dir=$(dirname "$deployed")
  if [ "$(sha "$deployed")" = "$(sha "$src")" ]; then return 0; fi   # already in place
  tmp="$dir/.$(basename "$deployed").incoming"
  cp "$src" "$tmp" && sync "$tmp" || fail "copying $src next to $deployed"
  # Keep the current model for rollback: a complete copy renamed over .prev (skipped when .prev
  # already holds it: a rerun after a kill between this and the swap).
  if [ ! -f "$previous" ] || [ "$(sha "$previous")" != "$(sha "$deployed")" ]; then
    cp "$deployed" "$dir/.$(basename "$deployed").prev-new" && sync "$dir/.$(basename "$deployed").prev-new" \
      && mv -f "$dir/.$(basename "$deployed").prev-new" "$previous" || fail "keeping $deployed as $previous"
  fi
  kill_point deploy-swap
  mv -f "$tmp" "$deployed" || fail "replacing $deployed"
  sync "$dir" 2>/dev/null || true
}

kill_point() {
  if [ "${HEADROOM_FIELD_KILL_AT:-}" = "$1" ]; then
    log "HEADROOM_FIELD_KILL_AT=$1: SIGKILL"
    kill -9 $$
  fi
}

# run_step NAME CMD...: runs CMD; with HEADROOM_FIELD_KILL_AT=NAME:mid, kills it and this script
# after HEADROOM_FIELD_KILL_AFTER seconds (2).
run_step() {
  local name=$1; shift
  if [ "${HEADROOM_FIELD_KILL_AT:-}" = "$name:mid" ]; then
    "$@" & local child=$!
    sleep "${HEADROOM_FIELD_KILL_AFTER:-2}"
    log "HEADROOM_FIELD_KILL_AT=$name:mid: SIGKILL to the step (pid $child) and this script"
    kill -9 "$child" 2>/dev/null
    kill -9 $$
  fi
  "$@"
}

if [ "$rollback" = 1 ]; then
  [ -f "$previous" ] || fail "no previous model to roll back to ($previous does not exist)"
  log "rolling back: $previous → $deployed"
  current=$(mktemp "$work/rollback.XXXXXX") && cp "$deployed" "$current" || fail "saving the current model"
  swap_in "$previous"
  # The model rolled back from becomes .prev, so a second --rollback undoes the first.
  mv -f "$current" "$previous" || fail "writing $previous"
  log "rolled back; $deployed sha256 $(sha "$deployed")"
  exit 0
fi

[ -n "$images" ] && [ -d "$images" ] || { echo "field-retrain: --images DIR is required (a folder of new images)" >&2; usage; }
[ -n "$holdout" ] && [ -f "$holdout" ] || { echo "field-retrain: --holdout data.yaml is required (held-out labelled images)" >&2; usage; }
[ -f "$teacher" ] || fail "--teacher $teacher: no such file"
[ -z "$replay" ] || [ -f "$replay" ] || fail "--replay $replay: no such file"

bin=${HEADROOM_BIN:-}
if [ -z "$bin" ]; then
  if command -v headroom >/dev/null; then bin=$(command -v headroom)
  else
    bin="${CARGO_TARGET_DIR:-$root/target}/debug/headroom"
    [ -x "$bin" ] || { (cd "$root" && cargo build --locked -p headroom-cli) || fail "cargo build"; }
    # shellcheck source=/dev/null
    [ -f "$root/.deps/env.sh" ] && source "$root/.deps/env.sh"
  fi
fi
[ -x "$bin" ] || fail "headroom binary $bin is not executable (set HEADROOM_BIN)"

# The run: continued when unfinished, else a new one.
run="$work/run"
if [ -f "$run/done" ]; then
  mkdir -p "$work/history" && mv "$run" "$work/history/$(cat "$run/id")" || fail "archiving the last run"
fi
if [ ! -d "$run" ]; then
  mkdir -p "$run.new" && date -u +%Y%m%dT%H%M%SZ > "$run.new/id" \
    && cp "$deployed" "$run.new/base.onnx" && mv "$run.new" "$run" || fail "starting a run in $run"
  log "new run $(cat "$run/id"): base model sha256 $(sha "$run/base.onnx")"
else
  log "continuing run $(cat "$run/id")"
fi
started=$(date +%s)
step_time() { echo "\"$1\": $(( $(date +%s) - $2 ))"; }
times=()

# 1. label: resumable (headroom label keeps what it wrote; never overwrites a human label).
t=$(date +%s)
if [ ! -f "$run/label.done" ]; then
  kill_point label
  log "labelling $images with $(basename "$teacher")"
  run_step label "$bin" -q label --teacher "$teacher" --images "$images" --out "$run/labelled" --threads "$threads" \
    || fail "headroom label"
  names=$("$bin" inspect "$run/base.onnx" --json | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["names"]))') \
    || fail "reading the class names of $deployed"
  holdout_abs=$(cd "$(dirname "$holdout")" && pwd)/$(basename "$holdout")
  val=$(python3 - "$holdout_abs" <<'PY'
import sys, re
from pathlib import Path
cfg = Path(sys.argv[1]); text = cfg.read_text()
def key(k):
    m = re.search(rf"^{k}:\s*(.+)$", text, re.M)
    return m.group(1).strip() if m else None
base = Path(key("path") or cfg.parent)
base = base if base.is_absolute() else cfg.parent / base
print(base / (key("val") or "images/val"))
PY
) || fail "reading $holdout"
  printf 'path: %s\ntrain: labelled/images\nval: %s\nnames: %s\n' "$run" "$val" "$names" > "$run/data.yaml.tmp" \
    && mv "$run/data.yaml.tmp" "$run/data.yaml" && touch "$run/label.done" || fail "writing $run/data.yaml"
fi
times+=("$(step_time label "$t")")

# 2. plan: what fits this device now.
t=$(date +%s)
if [ ! -f "$run/plan.done" ]; then
  kill_point plan
  run_step plan "$bin" -q plan --model "$run/base.onnx" --device "$device" --reserve "$reserve" --train "$part" --json > "$run/plan.json.tmp" \
    || fail "headroom plan: nothing fits $device (see above)"
  mv "$run/plan.json.tmp" "$run/plan.json" && touch "$run/plan.done"
fi
times+=("$(step_time plan "$t")")

# 3. train: resumable from its last checkpoint.
t=$(date +%s)
if [ ! -f "$run/train.done" ]; then
  kill_point train
  if [ -f "$run/train/config.toml" ]; then
    # The run layer resumes from the run's saved spec alone: what it started training, it trains.
    log "training: resuming $run/train"
    run_step train "$bin" -q train --resume "$run/train" --threads "$threads" || fail "headroom train --resume"
  else
    # Killed before the run saved its spec: nothing of it to keep.
    rm -rf "$run/train"
    replay_args=()
    [ -n "$replay" ] && replay_args=(--replay "$replay")
    # Preset keys augment (Ultralytics' augmentation values) and distill (dense distillation from
    # the labelling teacher): docs/BENCHMARKS.md "Adaptation".
    [ "$preset_augment" = 1 ] && replay_args+=(--mosaic 1 --scale 0.5 --translate 0.1 --hsv 0.015,0.7,0.4)
    [ "$preset_distill" = 1 ] && replay_args+=(--teacher "$teacher")
    log "training: $part ($preset), plan auto for $device"
    run_step train "$bin" -q train --model "$run/base.onnx" --data "$run/data.yaml" "${replay_args[@]}" \
      --epochs "$epochs" --train "$part" --nbs "$preset_nbs" --plan auto --device "$device" --reserve "$reserve" --threads "$threads" \
      --project "$run" --name train || fail "headroom train"
  fi
  [ -f "$run/train/best.onnx" ] || fail "headroom train wrote no $run/train/best.onnx"
  touch "$run/train.done"
fi
times+=("$(step_time train "$t")")

# 4. export: FP16, INT8 Q/DQ and the TensorRT calibration cache, calibrated on the new images.
t=$(date +%s)
if [ ! -f "$run/export.done" ]; then
  kill_point export
  run_step export "$bin" -q export --model "$run/train/best.onnx" --fp16 --int8 --calib "$images" \
    --out "$run/export" --force --threads "$threads" --json > "$run/export.json.tmp" || fail "headroom export"
  mv "$run/export.json.tmp" "$run/export.json" && touch "$run/export.done"
fi
times+=("$(step_time export "$t")")

# 5. eval: the candidate and the deployed model on the held-out set.
t=$(date +%s)
if [ ! -f "$run/eval.done" ]; then
  kill_point eval
  run_step eval "$bin" -q eval --model "$run/train/best.onnx" --data "$holdout" --threads "$threads" \
    --json-out "$run/eval-candidate.json" >/dev/null || fail "headroom eval of the candidate"
  "$bin" -q eval --model "$run/base.onnx" --data "$holdout" --threads "$threads" \
    --json-out "$run/eval-deployed.json" >/dev/null || fail "headroom eval of the deployed model"
  touch "$run/eval.done"
fi
times+=("$(step_time eval "$t")")
map() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics"]["map50_95"])' "$1"; }
candidate_map=$(map "$run/eval-candidate.json") || fail "reading $run/eval-candidate.json"
deployed_map=$(map "$run/eval-deployed.json") || fail "reading $run/eval-deployed.json"
better=$(python3 -c 'import sys; print(int(float(sys.argv[1]) >= float(sys.argv[2]) + float(sys.argv[3]) / 100))' \
  "$candidate_map" "$deployed_map" "$min_gain")

# 6. deploy only if better.
t=$(date +%s)
decision=kept
if [ "$better" = 1 ]; then
  decision=deployed
  if [ ! -f "$run/deploy.done" ]; then
    kill_point deploy
    # The service may have been given another model since the run began: never replace that.
    current=$(sha "$deployed")
    if [ "$current" != "$(sha "$run/base.onnx")" ] && [ "$current" != "$(sha "$run/train/best.onnx")" ]; then
      fail "$deployed changed since this run started (sha256 $current): not replacing it; remove $run to start over"
    fi
    log "deploying: mAP50-95 $candidate_map >= $deployed_map + $min_gain points"
    swap_in "$run/train/best.onnx"
    touch "$run/deploy.done"
  fi
else
  log "keeping the deployed model: candidate mAP50-95 $candidate_map < $deployed_map + $min_gain points"
fi
times+=("$(step_time deploy "$t")")

# 7. summary (atomic), then the run is done.
IFS=,
python3 - "$run" "$decision" "$candidate_map" "$deployed_map" "$deployed" "$previous" "$(sha "$deployed")" \
  "$(( $(date +%s) - started ))" "{${times[*]}}" > "$run/summary.json.tmp" <<'PY' || fail "writing the summary"
import json, sys
run, decision, cand, dep, deployed, previous, sha, seconds, times = sys.argv[1:]
export = json.load(open(f"{run}/export.json"))
print(json.dumps({
    "run": open(f"{run}/id").read().strip(),
    "decision": decision,
    "map50_95": {"candidate": float(cand), "deployed_before": float(dep)},
    "deployed": deployed, "deployed_sha256": sha, "previous": previous if decision == "deployed" else None,
    "artefacts": {f["precision"]: f["path"] for f in export["files"]},
    "calibration_cache": f"{run}/export/best.int8.calib", "plan": f"{run}/plan.json",
    "seconds_this_invocation": int(seconds), "step_seconds": json.loads(times),
}, indent=2))
PY
unset IFS
mv "$run/summary.json.tmp" "$run/summary.json" && touch "$run/done" || fail "finishing the run"
cat "$run/summary.json"
log "done: $decision (candidate $candidate_map, deployed $deployed_map); summary $run/summary.json"
