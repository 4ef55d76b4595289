#!/usr/bin/env bash
# The README's main command: the main job on the shipped defaults.
#   1. installs the native dependencies (scripts/setup.sh) and builds headroom
#   2. generates a synthetic shapes dataset (preset `base`) and a domain-shifted one (`field`)
#   3. evaluates the shipped demo model (models/demo/yolov8n-shapes-160.onnx) on both
# The gap between the two is what on-device retraining recovers (later: label → train → export).
# Output: demo-out/ (git-ignored). Env: CARGO_TARGET_DIR to reuse a build.
# shellcheck source=lib/errtrap.sh
source "$(dirname "$0")/lib/errtrap.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fail() { echo "demo.sh: FAILED: $*" >&2; exit 1; }
stage() { headroom_step "$*"; printf '\n== %s\n' "$*" >&2; }

model=models/demo/yolov8n-shapes-160.onnx
out=${HEADROOM_DEMO_OUT:-demo-out}
[ -f "$model" ] || fail "$model is missing from the checkout"

stage "native dependencies (scripts/setup.sh)"
scripts/setup.sh || fail "scripts/setup.sh (see its message above)"
# shellcheck source=/dev/null
source .deps/env.sh

stage "building headroom"
cargo build --locked -p headroom-cli || fail "cargo build"
bin="${CARGO_TARGET_DIR:-$root/target}/debug/headroom"

stage "headroom doctor"
"$bin" doctor --model "$model" || fail "headroom doctor: a native library does not work"

for preset in base field; do
  stage "headroom synth --preset $preset"
  "$bin" synth --preset "$preset" --seed 7 --train 1 --val 64 --out "$out/$preset" || fail "headroom synth"
done
for preset in base field; do
  stage "headroom eval on $preset"
  "$bin" eval --model "$model" --data "$out/$preset/data.yaml" --json-out "$out/eval-$preset.json" \
    || fail "headroom eval on $preset"
done

stage "headroom label: the demo model as teacher pseudo-labels the field images"
"$bin" label --teacher "$model" --images "$out/field/images/val" --out "$out/field-labelled" \
  || fail "headroom label"

stage "headroom inspect --check: can headroom train this model? (ONNX Runtime vs the libtorch executor)"
"$bin" inspect "$model" --check | tail -n 3 || fail "headroom inspect --check"

stage "summary"
python3 - "$out" <<'PY' 2>/dev/null || cat "$out"/eval-*.json
import json, sys
base, field = (json.load(open(f"{sys.argv[1]}/eval-{p}.json"))["metrics"] for p in ("base", "field"))
print(f"mAP50-95 on base (the model's own domain): {base['map50_95']:.3f}")
print(f"mAP50-95 on field (domain shift):          {field['map50_95']:.3f}")
print("Retraining on the device closes this gap: `headroom train` fine-tunes the head (docs/TRAIN.md);")
print("the demo's label -> train loop waits for a teacher that knows the field scenes; export comes next.")
PY
