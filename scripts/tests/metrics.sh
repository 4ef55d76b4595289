#!/usr/bin/env bash
# `headroom field run --metrics FILE` (issue 50 item 8) writes Prometheus' text exposition format
# that Prometheus' own Python parser (prometheus_client, pinned, a pure-Python wheel from PyPI put
# on PYTHONPATH) reads: for a night that deploys, a quiet night after it, and a night that fails,
# each with the decision and exit status it had, on the demo models and synthetic scenes.
# Usage: scripts/tests/metrics.sh [HEADROOM_BINARY]   (default: $CARGO_TARGET_DIR/debug/headroom)
# Needs scripts/setup.sh to have run (.deps/env.sh).
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
# shellcheck source=../lib/binary_test.sh
source "$(dirname "$0")/../lib/binary_test.sh"
wheel_download "$wheels" x86_64 "prometheus_client==0.26.0" "prometheus_client-0.26.0-*.whl"
parser=$WHEEL

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" -q synth --out "$tmp/new" --preset field --seed 11 --train 12 --val 1 || fail "synth"
"$bin" -q synth --out "$tmp/holdout" --preset field --seed 12 --train 1 --val 8 || fail "synth"
touch -d '1 minute ago' "$tmp"/new/images/train/*
mkdir -p "$tmp/app"
cp "$root/models/demo/yolov8n-shapes-160.onnx" "$tmp/app/model.onnx"
# One head-only epoch and a gate that deploys any candidate: this test is about the file, not the gate.
printf 'epochs = 1\ntrain = "head"\n[gate]\nmin_gain = -100\nold_tolerance = 100\nclass_tolerance = 100\nresamples = 50\n' \
  > "$tmp/always.toml"
night() {
  "$bin" -q field run --images "$tmp/new/images/train" --model "$tmp/app/model.onnx" \
    --holdout "$tmp/holdout/data.yaml" --preset "$tmp/always.toml" --threads 2 \
    --metrics "$tmp/headroom-field.prom" "$@"
}

# check WANT_DECISION WANT_EXIT: the file parses with prometheus_client and says so.
check() {
  PYTHONPATH="$parser" python3 - "$tmp/headroom-field.prom" "$1" "$2" <<'PY' || fail "$1 night: see above"
import sys
from prometheus_client.parser import text_string_to_metric_families

path, want, code = sys.argv[1], sys.argv[2], float(sys.argv[3])
text = open(path).read()
families = {f.name: f for f in text_string_to_metric_families(text)}
def samples(name):
    assert name in families, f"{name} missing from {path}:\n{text}"
    return families[name].samples
taken = [s.labels["decision"] for s in samples("headroom_field_decision") if s.value == 1]
assert taken == [want], f"decision {taken}, want {want}"
assert samples("headroom_field_exit_code")[0].value == code, samples("headroom_field_exit_code")
assert all(s.labels["model"].endswith("model.onnx") for f in families.values() for s in f.samples)
if want == "deployed":
    gain = {s.labels["bound"]: s.value for s in samples("headroom_field_gain_map50_95")}
    assert gain["low"] <= gain["high"] and abs(gain["point"]) < 1, gain
    steps = {s.labels["step"] for s in samples("headroom_field_step_seconds")}
    assert {"label", "train", "export", "eval", "deploy"} <= steps, steps
    assert samples("headroom_field_train_peak_memory_bytes")[0].value > 100e6
    assert samples("headroom_field_state_bytes")[0].value > 0
if want != "failed":
    assert len(samples("headroom_field_deployed_model_info")[0].labels["sha256"]) == 64
print(f"metrics.sh: {want} night: {len(families)} metric families parse with prometheus_client", file=sys.stderr)
PY
}

step "a night that deploys"
night --teacher "$root/models/demo/teacher-shapes-160.onnx" || fail "the deploying night failed"
check deployed 0
step "a quiet night (nothing new)"
night --teacher "$root/models/demo/teacher-shapes-160.onnx" || fail "the quiet night failed"
check nothing_new 0
step "a night that fails (no such teacher)"
rc=0
night --teacher "$tmp/no-such-teacher.onnx" 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "the failing night exited $rc, not 2"
check failed 2
step "PASS"
