#!/usr/bin/env bash
# The README's main command: the main job on the shipped defaults — the field retraining loop.
#   1. installs the native dependencies (scripts/setup.sh) and builds headroom
#   2. generates synthetic data: the scenes the demo model knows (`base`) and shifted ones (`field`)
#   3. evaluates the shipped student (models/demo/yolov8n-shapes-160.onnx) and the field-aware teacher
#      (models/demo/teacher-shapes-160.onnx) on both
#   4. headroom label: the teacher pseudo-labels the field training images (boxes + soft scores) and
#      holds a fifth of them out (label's val split, pseudo-labelled too)
#   5. headroom train --preset field-accurate --plan auto --board orin-nano-4, as the field loop
#      trains (configs/runs.toml, the best measured in docs/BENCHMARKS.md "Adaptation"): every
#      layer, Ultralytics' augmentation, 100 epochs with dense distillation from the teacher run on
#      each batch (gain 3), --nbs auto's optimiser steps, AdamW at 0.004; the plan fits it to an Orin
#      Nano 4GB's budget (no checkpointing when it fits) and times the batches up to --nbs that fit,
#      training with the fastest per image here; on label's train split, replaying base images
#      against forgetting, picking best.onnx on label's held-out split
#   6. evaluates the retrained student (best.onnx) on both: field/ (true labels) picked nothing
#   (plan: the memory of each training configuration on an Orin Nano 4GB, charted in the report)
#   7. headroom export: FP16 and INT8 (Q/DQ + TensorRT calibration cache, calibrated on the field
#      images) of the retrained student, each scored on the field val split; prints the tables and
#      writes demo-out/report/ (summary.md with the tables and step times, PNG plots)
# Output: demo-out/ (git-ignored). Env: CARGO_TARGET_DIR to reuse a build; HEADROOM_DEMO_EPOCHS (the
# preset's 100; fewer for a quicker look that adapts less).
# shellcheck source=lib/errtrap.sh
source "$(dirname "$0")/lib/errtrap.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fail() { echo "demo.sh: FAILED: $*" >&2; exit 1; }
stage() { headroom_step "$*"; printf '\n== %s\n' "$*" >&2; }

model=models/demo/yolov8n-shapes-160.onnx
teacher=models/demo/teacher-shapes-160.onnx
out=${HEADROOM_DEMO_OUT:-demo-out}
epochs=()
if [ -n "${HEADROOM_DEMO_EPOCHS:-}" ]; then epochs=(--epochs "$HEADROOM_DEMO_EPOCHS"); fi
[ -f "$model" ] || fail "$model is missing from the checkout"
[ -f "$teacher" ] || fail "$teacher is missing from the checkout (scripts/fixtures/train_demo_teacher.py makes it)"

stage "native dependencies (scripts/setup.sh)"
scripts/setup.sh || fail "scripts/setup.sh (see its message above)"
# shellcheck source=/dev/null
source .deps/env.sh

stage "building headroom"
cargo build --locked -p headroom-cli || fail "cargo build"
bin="${CARGO_TARGET_DIR:-$root/target}/debug/headroom"

stage "headroom doctor"
"$bin" doctor --model "$model" || fail "headroom doctor: a native library does not work"

# The same seeds as docs/BENCHMARKS.md: base train 1 (what the student learnt), base val 2, field
# train 11 (what the teacher labels), field val 12; the teacher was trained on seeds 21/22.
stage "headroom synth: base and field scenes"
# The demo's own folders: made again each run (synth refuses to mix settings in one folder).
rm -rf "$out/base-train" "$out/base" "$out/field-train" "$out/field"
"$bin" -q synth --preset base --seed 1 --train 64 --val 1 --out "$out/base-train" || fail "headroom synth"
"$bin" -q synth --preset base --seed 2 --train 1 --val 48 --out "$out/base" || fail "headroom synth"
"$bin" -q synth --preset field --seed 11 --train 64 --val 1 --out "$out/field-train" || fail "headroom synth"
"$bin" -q synth --preset field --seed 12 --train 1 --val 48 --out "$out/field" || fail "headroom synth"

declare -A times
times[start]=$SECONDS
stage "headroom eval: the student and the teacher on base and field (before)"
for who in student teacher; do
  m=$model; [ "$who" = teacher ] && m=$teacher
  for preset in base field; do
    "$bin" -q eval --model "$m" --data "$out/$preset/data.yaml" --json-out "$out/eval-$who-$preset.json" \
      || fail "headroom eval of the $who on $preset"
  done
done

times[eval-before]=$SECONDS
stage "headroom label: the teacher pseudo-labels the field training images, a fifth held out"
rm -rf "$out/field-labelled"
# Its data.yaml names a train split and a held-out val split (both pseudo-labelled): train picks
# best.onnx on that val split, so field/ (seed 12, true labels), where the tables are measured,
# selects nothing.
"$bin" label --teacher "$teacher" --images "$out/field-train/images/train" --out "$out/field-labelled" \
  --val-fraction 0.2 --seed 0 || fail "headroom label"
times[label]=$SECONDS

stage "headroom plan: training memory of the student on a Jetson Orin Nano 4GB, by configuration"
mkdir -p "$out/report"
# The run below (the whole model, with the teacher) from batch 16 without checkpointing, to show
# the ladder (plain `headroom plan` starts from `headroom train`'s defaults: all, batch 2).
"$bin" -q plan --model "$model" --board orin-nano-4 --teacher "$teacher" --batch 16 --no-checkpoint \
  --chart "$out/report/plan.png" || fail "headroom plan"
times[plan]=$SECONDS

stage "headroom train --preset field-accurate --plan auto: the student on the pseudo-labels (all layers, augmentation, the teacher distilled, --replay base), fitted to an Orin Nano 4GB"
rm -rf "$out/runs/field"
"$bin" train --model "$model" --data "$out/field-labelled/data.yaml" --replay "$out/base-train/data.yaml" \
  --preset field-accurate "${epochs[@]}" --teacher "$teacher" --plan auto --board orin-nano-4 \
  --project "$out/runs" --name field \
  || fail "headroom train"

times[train]=$SECONDS
stage "headroom eval: the retrained student on base and field (after)"
for preset in base field; do
  "$bin" -q eval --model "$out/runs/field/best.onnx" --data "$out/$preset/data.yaml" \
    --json-out "$out/eval-retrained-$preset.json" || fail "headroom eval of the retrained student on $preset"
done

times[eval-after]=$SECONDS
stage "headroom inspect --check: the retrained file runs the same in ONNX Runtime and headroom's executor"
"$bin" inspect "$out/runs/field/best.onnx" --check | tail -n 3 || fail "headroom inspect --check"

times[check]=$SECONDS
stage "headroom export: FP16 and INT8 of the retrained student (calibrated on the field images)"
"$bin" -q export --model "$out/runs/field/best.onnx" --fp16 --int8 --calib "$out/field-train/images/train" \
  --data "$out/field/data.yaml" --out "$out/export" --force --json > "$out/export.json" || fail "headroom export"

times[export]=$SECONDS
stage "summary"
marks=""
for k in start eval-before label plan train eval-after check export; do marks+="$k=${times[$k]} "; done
python3 - "$out" "$marks" <<'PY' || cat "$out"/eval-*.json
import json, shutil, sys
out, marks = sys.argv[1], sys.argv[2]
m = lambda who, p: json.load(open(f"{out}/eval-{who}-{p}.json"))["metrics"]["map50_95"]
print(f"{'mAP50-95':<34}{'base (old scenes)':>18}{'field (new scenes)':>20}")
for who, label in (("student", "student before"), ("retrained", "student after retraining"), ("teacher", "teacher (labelled the field)")):
    print(f"{label:<34}{m(who, 'base'):>18.3f}{m(who, 'field'):>20.3f}")
gap = m("teacher", "field") - m("student", "field")
gain = m("retrained", "field") - m("student", "field")
print(f"field gap recovered: {gain:+.3f} of {gap:.3f} ({100 * gain / gap:.0f} %); base change {m('retrained', 'base') - m('student', 'base'):+.3f}")
split = json.load(open(f"{out}/field-labelled/manifest.json"))["split"]
picked = (f"best.onnx picked on label's held-out split: {split['val']} pseudo-labelled field-train images "
          f"({split['train']} trained on); the tables are measured on field/ (true labels), which picked nothing")
print(picked)
print(f"run folder: {out}/runs/field (best.onnx, metrics.csv, plots)")
export = json.load(open(f"{out}/export.json"))
print(f"\n{'export':<8}{'MB':>8}{'mAP50-95 field':>16}  file")
for f in export["files"]:
    print(f"{f['precision']:<8}{f['bytes'] / 1e6:>8.2f}{f['map50_95']:>16.3f}  {f['path']}")
print(f"TensorRT calibration cache: {out}/export/best.int8.calib ({export['int8']['cache_tensors']} tensors)")

# The report folder: a Markdown summary and the PNG plots.
stamps = [(k, int(v)) for k, v in (m.split("=") for m in marks.split())]
steps = {b[0]: b[1] - a[1] for a, b in zip(stamps, stamps[1:])}
results = json.load(open(f"{out}/runs/field/results.json"))
report = f"{out}/report"
for png in ("loss", "map", "memory", "lr"):
    shutil.copy(f"{out}/runs/field/{png}.png", f"{report}/train-{png}.png")
rows = [("student before", "student"), ("student after retraining", "retrained"), ("teacher (labelled the field)", "teacher")]
md = ["# headroom demo: the field retraining loop", "",
      "| model | mAP50-95 base (old scenes) | mAP50-95 field (new scenes) |", "|---|---|---|"]
md += [f"| {label} | {m(who, 'base'):.3f} | {m(who, 'field'):.3f} |" for label, who in rows]
md += ["", f"Field gap recovered: {gain:+.3f} of {gap:.3f}; base change {m('retrained', 'base') - m('student', 'base'):+.3f}.", "",
       picked + ".", "",
       "| artefact | MB | ms per image (ONNX Runtime CPU) | mAP50-95 field |", "|---|---|---|---|"]
md += [f"| {f['precision']} | {f['bytes'] / 1e6:.2f} | {f['ms_per_image']:.2f} | {f['map50_95']:.3f} |" for f in export["files"]]
planner = results.get("planner") or {}
md += ["", f"Training peak memory (whole process, resident): {results['peak_rss_mb']:.0f} MB; "
       f"the planner estimated {planner.get('estimate_mb', float('nan')):.0f} MB.", "",
       "| step | seconds |", "|---|---|"]
md += [f"| {k} | {v} |" for k, v in steps.items()]
md += ["", "![plan](plan.png)", "", "![mAP](train-map.png) ![loss](train-loss.png) ![memory](train-memory.png)", ""]
open(f"{report}/summary.md", "w").write("\n".join(md))
print(f"report: {report}/summary.md (+ plan.png, train-*.png)")
PY
