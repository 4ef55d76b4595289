#!/usr/bin/env bash
# End-to-end test of scripts/field-retrain.sh on CPU with the demo models: one field run killed with
# SIGKILL at every step (mid-label, before plan, mid-train, mid-export, before eval, before deploy,
# between keeping the old model and the final rename), each kill followed by a rerun that goes on;
# after every kill the deployed file is whole (the original model, byte for byte) and no partial file
# sits under its name; the last rerun deploys the candidate and keeps the original as .prev. Then
# --rollback twice (back and forth), the lock (a second run exits 3), and a run that keeps the model
# when the candidate is not better.
#   scripts/tests/field_retrain.sh [HEADROOM_BIN]   (default: the debug build of this checkout)
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-${CARGO_TARGET_DIR:-$root/target}/debug/headroom}
[ -x "$bin" ] || { echo "field_retrain.sh: FAIL: no headroom binary at $bin (cargo build -p headroom-cli)" >&2; exit 1; }
export HEADROOM_BIN=$bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
check() { # check DESCRIPTION CONDITION...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what" >&2; failures=$((failures + 1)); fi
}
sha() { sha256sum "$1" | cut -d' ' -f1; }

"$bin" -q synth --preset field --seed 11 --train 24 --val 1 --out "$tmp/new" >/dev/null
"$bin" -q synth --preset field --seed 12 --train 1 --val 16 --out "$tmp/holdout" >/dev/null
mkdir -p "$tmp/app"
cp "$root/models/demo/yolov8n-shapes-160.onnx" "$tmp/app/model.onnx"
original=$(sha "$tmp/app/model.onnx")
work="$tmp/app/.headroom-field"
args=(--images "$tmp/new/images/train" --deployed "$tmp/app/model.onnx" --holdout "$tmp/holdout/data.yaml"
      --epochs 1 --min-gain -100 --threads 2)

for point in label:mid plan train:mid export:mid eval deploy deploy-swap; do
  rc=0
  HEADROOM_FIELD_KILL_AT=$point HEADROOM_FIELD_KILL_AFTER=4 bash "$root/scripts/field-retrain.sh" "${args[@]}" \
    >"$tmp/log-$point" 2>&1 || rc=$?
  check "killed at $point (exit $rc = SIGKILL)" test "$rc" = 137
  check "after the kill at $point the deployed file is the original, whole" test "$(sha "$tmp/app/model.onnx")" = "$original"
  check "after the kill at $point the run is unfinished" test ! -f "$work/run/done"
done
check "the kill between keeping .prev and the swap left .prev = the original" test "$(sha "$tmp/app/model.onnx.prev")" = "$original"
check "the kill before the swap left the incoming copy aside, not under the deployed name" \
  test -f "$tmp/app/.model.onnx.incoming"

rc=0
bash "$root/scripts/field-retrain.sh" "${args[@]}" >"$tmp/log-finish" 2>&1 || rc=$?
check "the rerun finishes (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || tail -n 20 "$tmp/log-finish" >&2
candidate=$(sha "$work/run/train/best.onnx")
check "the candidate is deployed" test "$(sha "$tmp/app/model.onnx")" = "$candidate"
check "the original is kept as .prev" test "$(sha "$tmp/app/model.onnx.prev")" = "$original"
check "no incoming copy is left" test ! -e "$tmp/app/.model.onnx.incoming"
check "the summary says deployed" grep -q '"decision": "deployed"' "$work/run/summary.json"
check "every rerun continued the same run" grep -q "continuing run" "$tmp/log-finish" "$tmp/log-eval"
runs_deployed() { "$bin" -q eval --model "$tmp/app/model.onnx" --data "$tmp/holdout/data.yaml" >/dev/null; }
check "ONNX Runtime runs the deployed file" runs_deployed

bash "$root/scripts/field-retrain.sh" --rollback --deployed "$tmp/app/model.onnx" >"$tmp/log-rollback" 2>&1
check "--rollback restores the original" test "$(sha "$tmp/app/model.onnx")" = "$original"
check "--rollback keeps the candidate as .prev" test "$(sha "$tmp/app/model.onnx.prev")" = "$candidate"
bash "$root/scripts/field-retrain.sh" --rollback --deployed "$tmp/app/model.onnx" >"$tmp/log-rollback2" 2>&1
check "a second --rollback undoes the first" test "$(sha "$tmp/app/model.onnx")" = "$candidate"

# The holder becomes `sleep` itself, so killing it releases the lock.
( flock 9 && exec sleep 20 ) 9>"$work/lock" &
holder=$!
sleep 0.5
rc=0
bash "$root/scripts/field-retrain.sh" "${args[@]}" >"$tmp/log-locked" 2>&1 || rc=$?
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
check "a second run while one holds the lock exits 3" test "$rc" = 3
check "and says why" grep -q "another run holds" "$tmp/log-locked"

# Not better by a margin no candidate can reach: the deployed model stays, the run is archived.
rc=0
before=$(sha "$tmp/app/model.onnx")
bash "$root/scripts/field-retrain.sh" "${args[@]/-100/100}" >"$tmp/log-keep" 2>&1 || rc=$?
check "a run whose candidate is not better finishes (exit $rc)" test "$rc" = 0
check "and keeps the deployed model" test "$(sha "$tmp/app/model.onnx")" = "$before"
check "and says kept" grep -q '"decision": "kept"' "$work/run/summary.json"
check "the previous run was archived" test -n "$(ls "$work/history")"

bash "$root/scripts/field-retrain.sh" --deployed "$tmp/app/nope.onnx" --images "$tmp/new" --holdout x >"$tmp/log-bad" 2>&1 || true
check "a missing deployed model is a clear error" grep -q "nope.onnx: no such file" "$tmp/log-bad"
rc=0
bash "$root/scripts/field-retrain.sh" --preset nope "${args[@]}" >"$tmp/log-preset" 2>&1 || rc=$?
check "an unknown preset exits 2 naming the known ones" grep -q "known: field-quick, field-accurate" "$tmp/log-preset"
check "  (exit $rc)" test "$rc" = 2

if [ "$failures" -gt 0 ]; then
  echo "field_retrain.sh: $failures check(s) failed; logs were in $tmp (removed)" >&2
  exit 1
fi
echo "field_retrain.sh: all checks passed"
