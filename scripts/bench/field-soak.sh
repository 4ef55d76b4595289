#!/usr/bin/env bash
# The field loop, night after night (issue 32): NIGHTS runs of `headroom field run` on the demo
# models, each night with new camera images (`field` scenes, a new seed) and now and then:
#   - bad files among them: a 0-byte JPEG (a camera still writing), a truncated JPEG, a 1x1 PNG;
#   - a SIGKILL at a random step (HEADROOM_FIELD_KILL_AT, read by the faulty binary beside the one
#     under test: crates/cli/examples/faulty.rs, the same verbs with kill points), then the night's
#     rerun by the binary under test;
#   - a damaged state: run/state.json, labelled/manifest.json or labelled/field-sources.json cut short;
# and on a fixed schedule (issue 50; night % 6): 2 a quiet night (no new image: it must end 0 saying
# "nothing new", the deployed model untouched), 3 the camera folder moved to a new path (the flags
# follow it), 4 labelled/images deleted, 5 a concurrent updater moving its model over the deployed
# one while the night trains (it must end 0 as superseded, the updater's model kept).
# After every night: the loop must end with exit 0 (after at most one rerun for a kill), the deployed
# file must be a whole detector, and the state folder must stay within its bound (--max-images,
# --keep-runs). Prints one row per night and a summary: nights, kills, damages, events, bytes.
# CI runs it short (SOAK_NIGHTS=6: each event once).
#
# Usage: scripts/bench/field-soak.sh [WORK_DIR]
# Env: SOAK_NIGHTS (30), SOAK_IMAGES (12 new images a night), SOAK_MAX_IMAGES (60),
#      SOAK_KEEP_RUNS (3), SOAK_SEED (1), HEADROOM (the binary; default the dev build),
#      HEADROOM_FAULTY (the binary with kill points; default the dev build's examples/faulty).
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/tmp/headroom-soak}
# shellcheck source=/dev/null
source "$root/.deps/env.sh"
target=${CARGO_TARGET_DIR:-$root/target}
bin=${HEADROOM:-$target/debug/headroom}
[ -x "$bin" ] || { echo "field-soak.sh: no headroom binary at $bin (cargo build -p headroom-cli, or set HEADROOM)" >&2; exit 2; }
faulty=${HEADROOM_FAULTY:-$target/debug/examples/faulty}
[ -x "$faulty" ] || { echo "field-soak.sh: no faulty binary at $faulty (cargo build -p headroom-cli --example faulty, or set HEADROOM_FAULTY)" >&2; exit 2; }
nights=${SOAK_NIGHTS:-30} per_night=${SOAK_IMAGES:-12} max_images=${SOAK_MAX_IMAGES:-60}
keep_runs=${SOAK_KEEP_RUNS:-3}
RANDOM=${SOAK_SEED:-1}
rm -rf "$work" && mkdir -p "$work/app" "$work/camera"
cp "$root/models/demo/yolov8n-shapes-160.onnx" "$work/app/model.onnx"
camera=$work/camera
teacher=$root/models/demo/teacher-shapes-160.onnx
"$bin" -q synth --preset field --seed 12 --train 1 --val 24 --out "$work/holdout" >/dev/null
"$bin" -q synth --preset base --seed 2 --train 24 --val 16 --out "$work/old" >/dev/null
# One head-only epoch a night, a gate that deploys any whole candidate: the loop is under test here,
# not the decision (docs/FIELD.md "The gate" has that).
cat > "$work/nightly.toml" <<'EOF'
epochs = 1
train = "head"
nbs = 8
augment = false
[gate]
min_gain = -100
old_tolerance = 100
class_tolerance = 100
resamples = 50
EOF
set_args() {
  args=(field run --images "$camera" --teacher "$teacher" --model "$work/app/model.onnx"
    --holdout "$work/holdout/data.yaml" --old "$work/old/data.yaml" --preset "$work/nightly.toml"
    --device cpu --threads 2 --max-images "$max_images" --keep-runs "$keep_runs")
}
set_args
state=$work/app/.headroom-field/model.onnx
points=(label:mid train train:mid export:mid eval deploy deploy-swap)
kills=0 damages=0 bad_files=0 reruns=0 deploys=0 max_bytes=0 total_seconds=0
quiet=0 moved=0 deleted=0 superseded=0
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| night | event | new images | bad files | kill at | damaged | exit (rerun) | deployed sha256 | labelled images | history runs | state bytes | seconds |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for night in $(seq 1 "$nights"); do
  start=$(date +%s)
  event="-"
  (( night > 1 )) && case $((night % 6)) in 2) event=quiet ;; 3) event=moved ;; 4) event=deleted ;; 5) event=updater ;; esac
  new=$per_night
  if [ "$event" = quiet ]; then
    new=0
  else
    # The camera's new images, modified a minute ago (a camera's finished files).
    "$bin" -q synth --preset field --seed $((1000 + night)) --train "$per_night" --val 1 --out "$work/scene-$night" >/dev/null
    mkdir -p "$camera/night-$night"
    for f in "$work/scene-$night"/images/train/*; do mv "$f" "$camera/night-$night/"; done
    rm -rf "$work/scene-$night"
    touch -d '-1 minute' "$camera/night-$night"/*
  fi
  if [ "$event" = moved ]; then
    # A USB camera drive remounted at another path: the same files, the flags follow it.
    mv "$camera" "$work/camera-$night" && camera=$work/camera-$night && set_args
    moved=$((moved + 1))
  fi
  if [ "$event" = deleted ]; then
    rm -rf "$state/labelled/images" && deleted=$((deleted + 1))
  fi
  bad="-"
  if [ "$event" = "-" ] && (( RANDOM % 3 == 0 )); then
    : > "$camera/night-$night/writing.jpg"
    # A camera's JPEG cut short (a fixture photo, 4,000 of its 10,641 bytes).
    head -c 4000 "$root/tests/fixtures/jpeg/photo_444.jpg" > "$camera/night-$night/cut.jpg"
    python3 -c "import base64,sys; open(sys.argv[1],'wb').write(base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='))" "$camera/night-$night/tiny.png"
    touch -d '-1 minute' "$camera/night-$night"/writing.jpg "$camera/night-$night"/cut.jpg "$camera/night-$night"/tiny.png
    bad_files=$((bad_files + 3)) bad=3
  fi
  damaged="-"
  if [ "$event" = "-" ] && (( night > 1 && RANDOM % 5 == 0 )); then
    victims=("$state/run/state.json" "$state/labelled/manifest.json" "$state/labelled/field-sources.json")
    victim=${victims[$((RANDOM % 3))]}
    if [ -f "$victim" ]; then
      head -c 7 "$victim" > "$victim.cut" && mv "$victim.cut" "$victim"
      damages=$((damages + 1)) damaged=$(basename "$victim")
    fi
  fi
  kill_at="-" codes=""
  if [ "$event" = "-" ] && (( RANDOM % 3 == 0 )); then
    kill_at=${points[$((RANDOM % ${#points[@]}))]}
    code=0
    HEADROOM_FIELD_KILL_AT=$kill_at "$faulty" -q "${args[@]}" > "$work/night-$night.kill.log" 2>&1 || code=$?
    codes="$code "
    kills=$((kills + 1))
    # Whatever the moment, the deployed file is a whole detector.
    "$bin" inspect "$work/app/model.onnx" > /dev/null || { echo "night $night: the deployed model is not whole after a kill at $kill_at" >&2; exit 1; }
  fi
  code=0
  before=$(sha256sum "$work/app/model.onnx" | cut -d' ' -f1)
  if [ "$event" = updater ]; then
    # The service's own updater moves its model in while the night trains: it must be kept.
    last_run=$(grep -o '"id": "[^"]*"' "$state/run/state.json" 2>/dev/null || true)
    "$bin" -q "${args[@]}" > "$work/night-$night.log" 2>&1 &
    pid=$!
    # Until tonight's run (another id than last night's) has begun training.
    until [ -f "$state/run/train/config.toml" ] \
      && [ "$(grep -o '"id": "[^"]*"' "$state/run/state.json" 2>/dev/null || true)" != "$last_run" ]; do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    cp "$root/models/demo/yolov8n-shapes-160.onnx" "$work/app/.incoming.onnx"
    mv "$work/app/.incoming.onnx" "$work/app/model.onnx"
    theirs=$(sha256sum "$work/app/model.onnx" | cut -d' ' -f1)
    wait "$pid" || code=$?
    [ "$code" = 0 ] || { echo "night $night: exit $code with a concurrent updater; log: $work/night-$night.log" >&2; exit 1; }
    grep -q '"decision": "superseded"' "$state/run/summary.json" \
      || { echo "night $night: the run was not superseded by the updater's model" >&2; exit 1; }
    [ "$(sha256sum "$work/app/model.onnx" | cut -d' ' -f1)" = "$theirs" ] \
      || { echo "night $night: the updater's model was overwritten" >&2; exit 1; }
    superseded=$((superseded + 1))
  else
    "$bin" -q "${args[@]}" > "$work/night-$night.log" 2>&1 || code=$?
  fi
  if [ "$event" = quiet ]; then
    [ "$code" = 0 ] && grep -q "nothing new since run" "$work/night-$night.log" \
      || { echo "night $night: a quiet night did not end 0 saying nothing new (exit $code); log: $work/night-$night.log" >&2; exit 1; }
    [ "$(sha256sum "$work/app/model.onnx" | cut -d' ' -f1)" = "$before" ] || { echo "night $night: a quiet night changed the model" >&2; exit 1; }
    quiet=$((quiet + 1))
  fi
  if [ "$code" != 0 ]; then
    # One rerun (a step's failure is retried by the next start: here, the same night).
    reruns=$((reruns + 1))
    code2=0
    "$bin" -q "${args[@]}" >> "$work/night-$night.log" 2>&1 || code2=$?
    codes="$codes$code ($code2)"
    [ "$code2" = 0 ] || { echo "night $night: field run failed twice (exit $code, $code2); log: $work/night-$night.log" >&2; tail -5 "$work/night-$night.log" >&2; exit 1; }
  else
    codes="${codes}0"
  fi
  "$bin" inspect "$work/app/model.onnx" > /dev/null || { echo "night $night: the deployed model is not whole" >&2; exit 1; }
  sha=$(sha256sum "$work/app/model.onnx" | cut -c1-12)
  if [ "$event" != quiet ] && grep -q '"decision": "deployed"' "$state/run/summary.json"; then deploys=$((deploys + 1)); fi
  labelled=$(find "$state/labelled/images" -mindepth 1 \( -type l -o -type f \) | wc -l)
  history=0
  if [ -d "$state/history" ]; then history=$(find "$state/history" -mindepth 1 -maxdepth 1 -type d | wc -l); fi
  bytes=$(du -sb "$state" | cut -f1)
  if (( bytes > max_bytes )); then max_bytes=$bytes; fi
  (( labelled <= max_images )) || { echo "night $night: $labelled labelled images, more than --max-images $max_images" >&2; exit 1; }
  (( history <= keep_runs )) || { echo "night $night: $history runs in history, more than --keep-runs $keep_runs" >&2; exit 1; }
  seconds=$(( $(date +%s) - start ))
  total_seconds=$((total_seconds + seconds))
  echo "| $night | $event | $new | $bad | $kill_at | $damaged | $codes | $sha | $labelled | $history | $bytes | $seconds |"
done
echo
echo "nights $nights, kills $kills, damaged state files $damages, bad files $bad_files, nights that needed a rerun $reruns, deployed $deploys times"
echo "quiet nights $quiet, camera folder moved $moved times, labelled images deleted $deleted times, superseded by a concurrent updater $superseded times"
echo "state folder: at most $max_bytes bytes (final $(du -sb "$state" | cut -f1)); camera folder $(du -sb "$camera" | cut -f1) bytes (the camera's, not bounded by headroom)"
echo "wall: $total_seconds s; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
