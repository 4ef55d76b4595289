#!/usr/bin/env bash
# The deploy gate of `headroom field run` (docs/FIELD.md "The gate"), measured on the demo scenario:
#  1. two whole field runs on the demo models (64 `field` images, seed 11, pseudo-labelled by the demo
#     teacher; holdout `field` seed 12; old scenes `base` seed 2), with `field-quick` and
#     `field-accurate`: wall time per step, what the gate decided;
#  2. how often the gate deploys a candidate that is no better: the deployed model with seeded
#     multiplicative noise on its weights (crates/onnx/examples/perturb.rs, sigma FIELD_GATE_SIGMA),
#     NOISE seeds × HOLDOUTS independent holdouts (`field` seeds 100.., HOLDOUT_IMAGES images each);
#     beside it, how often the old rule of scripts/field-retrain.sh (candidate ≥ deployed + 0.1 point
#     on the holdout, no interval) would have;
#  3. how often it deploys the two real candidates of step 1 on those holdouts.
#
# Usage: scripts/bench/gate.sh [WORK_DIR]
# Env: GATE_NOISE (10), GATE_HOLDOUTS (10), GATE_HOLDOUT_IMAGES (48), FIELD_GATE_SIGMA (0.01),
#      GATE_ACCURATE_EPOCHS (30: field-accurate's).
# Needs scripts/setup.sh and a built headroom (cargo build -p headroom-cli) and the perturb example
# (built here). Prints Markdown tables and the load average.
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/tmp/headroom-gate}
# shellcheck source=/dev/null
source "$root/.deps/env.sh"
target=${CARGO_TARGET_DIR:-$root/target}
bin=${HEADROOM:-$target/debug/headroom}
[ -x "$bin" ] || { echo "gate.sh: no headroom binary at $bin (cargo build -p headroom-cli, or set HEADROOM)" >&2; exit 2; }
(cd "$root" && cargo build -q --locked -p headroom-onnx --example perturb) || { echo "gate.sh: building the perturb example failed" >&2; exit 1; }
perturb=$target/debug/examples/perturb
noise=${GATE_NOISE:-10} holdouts=${GATE_HOLDOUTS:-10} holdout_images=${GATE_HOLDOUT_IMAGES:-48}
sigma=${FIELD_GATE_SIGMA:-0.01} accurate_epochs=${GATE_ACCURATE_EPOCHS:-30}
model=$root/models/demo/yolov8n-shapes-160.onnx
teacher=$root/models/demo/teacher-shapes-160.onnx
mkdir -p "$work"
synth() { [ -f "$work/$1/data.yaml" ] || "$bin" -q synth --preset "$2" --seed "$3" --train "$4" --val "$5" --out "$work/$1" >/dev/null; }
synth field-train field 11 64 1
synth holdout field 12 1 48
synth old base 2 64 48
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "| preset | decision (decided by) | holdout mAP50-95 candidate / deployed | gain interval (points) | old scenes | label | train | export | gate | whole run |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for preset in field-quick field-accurate; do
  app="$work/app-$preset"
  rm -rf "$app" && mkdir -p "$app" && cp "$model" "$app/model.onnx"
  extra=()
  [ "$preset" = field-accurate ] && extra=(--epochs "$accurate_epochs")
  start=$(date +%s)
  "$bin" -q field run --images "$work/field-train/images/train" --teacher "$teacher" --model "$app/model.onnx" \
    --holdout "$work/holdout/data.yaml" --old "$work/old/data.yaml" --preset "$preset" "${extra[@]}" --json \
    > "$app/summary.json" || { echo "gate.sh: field run $preset failed" >&2; exit 1; }
  seconds=$(( $(date +%s) - start ))
  python3 - "$app/summary.json" "$preset" "$seconds" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); t = s["step_seconds"]
old = s["old_scenes"]
print(f"| {sys.argv[2]} | {s['decision']} ({s['decided_by']}) | {s['map50_95']['candidate']:.3f} / {s['map50_95']['deployed_before']:.3f} "
      f"| {100*s['gain_interval'][0]:+.1f} .. {100*s['gain_interval'][1]:+.1f} | {old['candidate']:.3f} / {old['deployed']:.3f} "
      + "".join(f"| {t.get(k, 0):.0f} s " for k in ["label", "train", "export", "eval"]) + f"| {sys.argv[3]} s |")
PY
  cp "$app/.headroom-field/model.onnx/run/train/best.onnx" "$work/candidate-$preset.onnx"
done

for n in $(seq 1 "$noise"); do
  [ -f "$work/noise-$n.onnx" ] || "$perturb" "$model" "$work/noise-$n.onnx" --sigma "$sigma" --seed "$n"
done
results="$work/gate-results.jsonl"
: > "$results"
for h in $(seq 1 "$holdouts"); do
  synth "holdout-$h" field $((100 + h)) 1 "$holdout_images"
  for candidate in $(seq 1 "$noise" | sed 's/^/noise-/') candidate-field-quick candidate-field-accurate; do
    "$bin" -q field gate --candidate "$work/$candidate.onnx" --model "$model" --holdout "$work/holdout-$h/data.yaml" \
      --old "$work/old/data.yaml" --json > "$work/gate.json" && rc=0 || rc=$?
    [ "$rc" -le 1 ] || { echo "gate.sh: field gate failed (exit $rc) on $candidate, holdout $h" >&2; exit 1; }
    python3 - "$work/gate.json" "$candidate" "$h" >> "$results" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
kind = "noise" if sys.argv[2].startswith("noise") else sys.argv[2].removeprefix("candidate-")
print(json.dumps({"kind": kind, "holdout": int(sys.argv[3]), "deploy": g["deploy"], "decided_by": g["decided_by"],
                  "diff": g["bootstrap"]["difference"], "low": g["bootstrap"]["low"], "high": g["bootstrap"]["high"]}))
PY
  done
done
python3 - "$results" "$sigma" "$holdout_images" <<'PY'
import json, sys
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1])]
by = defaultdict(list)
for r in rows:
    by[r["kind"]].append(r)
print()
print(f"| candidate | trials | gate deploys | old rule (>= +0.1 point) deploys | mean gain (points) | mean interval width | decided by |")
print("|---|---|---|---|---|---|---|")
names = {"noise": f"deployed + noise (sigma {sys.argv[2]}): no better", "field-quick": "field-quick run (head, 10 epochs)",
         "field-accurate": "field-accurate run"}
for kind in ["noise", "field-quick", "field-accurate"]:
    rs = by[kind]
    if not rs:
        continue
    n = len(rs); d = sum(r["deploy"] for r in rs); old = sum(r["diff"] >= 0.001 for r in rs)
    gain = 100 * sum(r["diff"] for r in rs) / n; width = 100 * sum(r["high"] - r["low"] for r in rs) / n
    reasons = defaultdict(int)
    for r in rs:
        reasons[r["decided_by"]] += 1
    why = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1]))
    print(f"| {names[kind]} | {n} | {d} ({100*d/n:.0f} %) | {old} ({100*old/n:.0f} %) | {gain:+.2f} | {width:.2f} | {why} |")
print(f"\n{sys.argv[3]} images per holdout.")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
