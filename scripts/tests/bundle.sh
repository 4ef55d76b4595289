#!/usr/bin/env bash
# Test of the install bundle (scripts/bundle.sh, issue 22): builds it, unpacks it into an empty
# folder and runs it there with an empty environment (`env -i PATH=/usr/bin:/bin`: no LIBTORCH,
# LD_LIBRARY_PATH or ORT_DYLIB_PATH): --version, doctor (both libraries loaded from the bundle's
# lib/), synth, label with the demo teacher, a 2-step train of the demo student; then install.sh
# into a prefix with --systemd (units pointing at the installed binary) and the installed doctor;
# and install.sh's refusal of a prefix it cannot create.
#   scripts/tests/bundle.sh [--profile dev|release] [--target x86_64|aarch64|aarch64-jetpack7|native-oldest]
# (default dev: reuses scripts/test.sh's build). aarch64: the bundle of `scripts/bundle.sh --target
# aarch64`, every command run under qemu (scripts/cross/qemu-runner.sh, itself under env -i), and
# install.sh must refuse it on this x86_64 host. native-oldest: the Jetson route
# (scripts/jetson-bundle.sh, as docker/Dockerfile.jetson runs it) on this machine, against the oldest
# supported libraries in a pip wheel's layout (scripts/setup.sh --libs oldest: libtorch 2.5.1, ONNX
# Runtime 1.20.1), without the CUDA features (CPU wheels); the bundle is named ...-linux-oldest.
# aarch64-jetpack7: the aarch64 bundle with the CUDA half of the torch wheel and its CUDA 13
# libraries (issue 33): under qemu with an empty environment, doctor must load lib/libtorch_cuda.so
# (and so every library it needs, on the real aarch64 files) and report that no CUDA device is
# present; every NEEDED of every lib/ file resolves in lib/ or the system; then the same commands.
# Prints PASS/FAIL per step; exits 1 on any failure. Env: CARGO_TARGET_DIR, HEADROOM_DEPS.
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
profile=dev target=x86_64
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=${2:?--profile needs dev or release}; shift 2 ;;
    --target) target=${2:?--target needs x86_64, aarch64, aarch64-jetpack7 or native-oldest}; shift 2 ;;
    *) echo "bundle.sh (test): unknown argument '$1'" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
# check DESCRIPTION CMD...: runs CMD (output to $tmp/log), prints PASS or FAIL with the log's tail.
check() {
  local what=$1; shift
  if "$@" >"$tmp/log" 2>&1; then
    echo "PASS $what"
  else
    echo "FAIL $what (exit $?)" >&2
    tail -n 15 "$tmp/log" | sed 's/^/     /' >&2
    failures=$((failures + 1))
  fi
}
clean() { env -i PATH=/usr/bin:/bin "$@"; }
# hr BIN ARGS...: runs a headroom binary of the bundle's target with an empty environment.
cross=0
case "$target" in aarch64|aarch64-jetpack7) cross=1 ;; esac
if [ "$cross" = 0 ]; then
  hr() { clean "$@"; }
else
  hr() { clean "$root/scripts/cross/qemu-runner.sh" "$@"; }
fi

if [ "$target" = native-oldest ]; then
  check "scripts/setup.sh --libs oldest" bash "$root/scripts/setup.sh" --libs oldest
  ort_oldest=$(sed -n 's/^export ORT_DYLIB_PATH="\(.*\)"$/\1/p' "$root/.deps/env-oldest.sh")
  torch_oldest=$(sed -n 's/^export LIBTORCH="\(.*\)"$/\1/p' "$root/.deps/env-oldest.sh")
  check "scripts/jetson-bundle.sh --profile $profile against $torch_oldest and $ort_oldest (no CUDA features)" \
    bash "$root/scripts/jetson-bundle.sh" --profile "$profile" --libtorch "$torch_oldest" \
    --onnxruntime "$ort_oldest" --features "" --label oldest --out "$tmp/dist"
  pattern="headroom-*-$(uname -m)-linux-oldest.tar.gz"
  target=$(uname -m)
else
  check "scripts/bundle.sh --profile $profile --target $target builds the bundle" \
    bash "$root/scripts/bundle.sh" --profile "$profile" --target "$target" --out "$tmp/dist"
  pattern="headroom-*-$target-linux.tar.gz"
  if [ "$target" = aarch64-jetpack7 ]; then pattern="headroom-*-aarch64-linux-jetpack7.tar.gz"; fi
fi
tarball=$(find "$tmp/dist" -maxdepth 1 -name "$pattern" -print -quit)
if [ -z "$tarball" ]; then
  echo "FAIL no $pattern in $tmp/dist: nothing else to test" >&2
  exit 1
fi
# bundle.sh's own unpacked copy is not needed here, and it is as big as what unpacks below (500 MB
# for x86_64, 4 GB for JetPack 7): gone first, so the disk holds two copies at most, not three.
rm -rf "${tarball%.tar.gz}"
mkdir "$tmp/unpacked"
# shellcheck source=../lib/disk.sh
source "$root/scripts/lib/disk.sh"
# Unpacked, a bundle is about twice its tarball (libraries compress by half); a margin on top.
check "room to unpack the tarball" headroom_need_disk "$tmp" $(( $(du -m "$tarball" | cut -f1) * 5 / 2 + 512 )) "unpacking $(basename "$tarball")"
check "the tarball unpacks into an empty folder" tar -C "$tmp/unpacked" -xzf "$tarball"
b=$(find "$tmp/unpacked" -mindepth 1 -maxdepth 1 -type d -print -quit)
b=${b:-$tmp/unpacked/missing}
echo "     bundle: $(du -m "$tarball" | cut -f1) MB packed, $(du -sm "$b" | cut -f1) MB unpacked"

has_layout() {
  local f
  for f in bin/headroom install.sh BUILD-INFO SHA256SUMS configs/devices.toml configs/runs.toml \
    scripts/field-retrain.sh scripts/lib/errtrap.sh models/demo/teacher-shapes-160.onnx \
    share/doc/headroom/headroom.txt share/doc/headroom/headroom-train.txt \
    lib/libtorch_cpu.so lib/libc10.so; do
    [ -f "$b/$f" ] || { echo "missing $f"; return 1; }
  done
  compgen -G "$b/lib/libonnxruntime.so.*" >/dev/null || { echo "missing lib/libonnxruntime.so.*"; return 1; }
  if find "$b" -type l | grep .; then echo "symlinks above"; return 1; fi
  (cd "$b" && sha256sum --quiet -c SHA256SUMS)
}
check "layout: bin/, lib/ (real files), configs/, scripts/, models/, share/doc/ with --help texts, checksums" has_layout
check "scripts/gpu-check.sh is in the bundle (it runs with the bundle's binary)" test -x "$b/scripts/gpu-check.sh"
if [ "$target" = aarch64-jetpack7 ]; then
  carries_cuda() {
    local f
    for f in libtorch_cuda.so libc10_cuda.so libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 \
      libcudnn_engines_precompiled.so.9 libcufft.so.12 libcurand.so.10 libcusparse.so.12 libcusparseLt.so.0 \
      libnccl.so.2 libnvrtc.so.13 libnvJitLink.so.13 libtorch_nvshmem.so; do
      [ -f "$b/lib/$f" ] || { echo "missing lib/$f"; return 1; }
    done
    grep -q 'CUDA build: yes (lib/libtorch_cuda.so)' "$b/BUILD-INFO" && grep -q '^libcuda.so.1 => ' "$b/SYSTEM-LIBS"
  }
  check "lib/ carries libtorch_cuda.so and the CUDA 13 libraries it needs; SYSTEM-LIBS names the driver" carries_cuda
  # The loader's whole chain, read statically: every NEEDED of every file resolves in lib/ or the
  # arm64 system (glibc, libstdc++), or is the driver.
  needed_resolve() {
    local file soname missing=0
    for file in "$b/bin/headroom" "$b"/lib/*; do
      for soname in $(aarch64-linux-gnu-readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        [ -e "$b/lib/$soname" ] || [ -e "/usr/lib/aarch64-linux-gnu/$soname" ] || [ -e "/lib/aarch64-linux-gnu/$soname" ] \
          || [ "$soname" = ld-linux-aarch64.so.1 ] || [ "$soname" = libcuda.so.1 ] \
          || { echo "$(basename "$file") needs $soname: not in lib/ nor the system"; missing=1; }
      done
    done
    return "$missing"
  }
  check "every NEEDED of bin/headroom and lib/* resolves in lib/ or the system" needed_resolve
fi
if [ -n "${ort_oldest:-}" ]; then
  check "BUILD-INFO names libtorch 2.5.1 and ONNX Runtime 1.20.1; SYSTEM-LIBS lists what is left to the system" \
    bash -c "grep -q '^libtorch: 2.5.1; ONNX Runtime: 1.20.1\$' '$b/BUILD-INFO' && test -f '$b/SYSTEM-LIBS'"
fi
# shellcheck disable=SC2016  # a literal $ORIGIN
check 'bin/headroom has RUNPATH $ORIGIN/../lib' bash -c "readelf -d '$b/bin/headroom' | grep 'RUNPATH.*\$ORIGIN/\.\./lib'"
# Lazy binding (crates/cli/build.rs): a libtorch of another minor version reaches headroom's own
# refusal instead of the loader's "undefined symbol" before main.
check 'bin/headroom binds lazily (no BIND_NOW, no NOW flag)' bash -c "! readelf -d '$b/bin/headroom' | grep -E 'BIND_NOW|FLAGS.* NOW'"

check "env -i bin/headroom --version" hr "$b/bin/headroom" --version
t0=$(date +%s.%N)
check "env -i bin/headroom doctor" hr "$b/bin/headroom" doctor
t1=$(date +%s.%N)
echo "     doctor: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s wall"
doctor_loads_from_bundle() {
  hr "$b/bin/headroom" doctor --json > "$tmp/doctor.json" || return 1
  python3 - "$tmp/doctor.json" "$b/lib" <<'PY'
import json, os, sys
report, lib = json.load(open(sys.argv[1])), os.path.realpath(sys.argv[2])
for name in ("onnxruntime", "libtorch"):
    path = report[name].get("library") or ""
    print(name, report[name].get("version"), path)
    assert os.path.realpath(path).startswith(lib + os.sep), f"{name} loaded from {path}, not {lib}"
print("cuda", report["cuda"])
assert report["cuda"]["ok"], report["cuda"]
PY
}
check "doctor --json: ONNX Runtime and libtorch are loaded from the bundle's lib/" doctor_loads_from_bundle
if [ "$target" = aarch64-jetpack7 ]; then
  doctor_loads_cuda() {
    python3 - "$tmp/doctor.json" "$b/lib" <<'PY'
import json, os, sys
cuda, lib = json.load(open(sys.argv[1]))["cuda"], os.path.realpath(sys.argv[2])
print(cuda)
assert os.path.realpath(cuda.get("library") or "") == os.path.join(lib, "libtorch_cuda.so"), cuda
assert "no CUDA device visible" in cuda["detail"], cuda
# The allocator's readings reach libc10_cuda.so's allocator (through dlsym) on the real library.
assert "CUDA allocator readings: ready" in cuda["detail"], cuda
PY
  }
  check "doctor loaded lib/libtorch_cuda.so (its whole chain) and reports no CUDA device under qemu" doctor_loads_cuda
  # The GPU code the bundle's libtorch carries, read from lib/libtorch_cuda.so (issue 48): printed
  # for the record, and it must name Orin's verdict either way.
  check "doctor --json: the gpu code row lists lib/libtorch_cuda.so's SASS and gives Orin's (sm_87) verdict" \
    python3 -c "import json; c=json.load(open('$tmp/doctor.json'))['gpu_code']; print(c['detail']); assert c['ok'] and 'SASS sm_' in c['detail'] and 'Orin (sm_87): ' in c['detail'], c"
else
  check "doctor --json: a CPU libtorch has no CUDA part to load" \
    python3 -c "import json,sys; c=json.load(open('$tmp/doctor.json'))['cuda']; print(c); assert c['ok'] and c['library'] is None"
  check "doctor --json: a CPU libtorch carries no GPU code to read" \
    python3 -c "import json,sys; c=json.load(open('$tmp/doctor.json'))['gpu_code']; print(c); assert c['ok'] and 'no libtorch_cuda.so' in c['detail']"
fi

if [ "$cross" = 0 ] && command -v cc >/dev/null; then
  # The loader's chain for a CUDA libtorch, with a real dlopen: a lib/libtorch_cuda.so that needs a
  # libcudnn.so.9 the system lacks (both built here, the first without the second in lib/).
  cuda_dependency_missing() {
    local fake="$tmp/fake-cuda" out rc=0
    mkdir -p "$fake"
    echo 'int headroom_fake_cudnn;' > "$fake/cudnn.c"
    echo 'extern int headroom_fake_cudnn; int headroom_fake_torch_cuda(void) { return headroom_fake_cudnn; }' \
      > "$fake/torch_cuda.c"
    cc -shared -fPIC -Wl,-soname,libcudnn.so.9 -o "$fake/libcudnn.so.9" "$fake/cudnn.c" &&
      cc -shared -fPIC -o "$b/lib/libtorch_cuda.so" "$fake/torch_cuda.c" -Wl,--no-as-needed -L"$fake" -l:libcudnn.so.9 \
      || return 1
    out=$(hr "$b/bin/headroom" doctor 2>&1) || rc=$?
    rm -f "$b/lib/libtorch_cuda.so"
    echo "$out"
    [ "$rc" = 1 ] && grep -Eq "^cuda +FAIL cannot load $b/lib/libtorch_cuda.so: libcudnn.so.9: cannot open shared object file.* install cuDNN" <<<"$out"
  }
  check "a lib/libtorch_cuda.so whose libcudnn.so.9 is missing: doctor's cuda row fails with the loader's words and what to install (exit 1)" \
    cuda_dependency_missing
fi

check "env -i bin/headroom synth (4 train + 2 val images)" \
  hr "$b/bin/headroom" -q synth --out "$tmp/data" --train 4 --val 2 --seed 3
check "env -i bin/headroom label 4 images with models/demo/teacher-shapes-160.onnx" \
  hr "$b/bin/headroom" -q label --teacher "$b/models/demo/teacher-shapes-160.onnx" \
  --images "$tmp/data/images/train" --out "$tmp/labelled"
check "env -i bin/headroom train: 2 steps (--epochs 1 --nbs 2) of models/demo/yolov8n-shapes-160.onnx" \
  hr "$b/bin/headroom" -q train --model "$b/models/demo/yolov8n-shapes-160.onnx" \
  --data "$tmp/labelled/data.yaml" --epochs 1 --batch 2 --nbs 2 --threads 2 \
  --project "$tmp/runs" --name bundle
check "train wrote best.onnx" test -s "$tmp/runs/bundle/best.onnx"

refuses_foreign() {
  local out rc=0
  out=$(clean bash "$b/install.sh" --prefix "$tmp/opt" 2>&1) || rc=$?
  echo "$out"
  [ "$rc" = 1 ] && grep -q "this bundle is for ${target%%-*}" <<<"$out" && [ ! -e "$tmp/opt" ]
}
if [ "${target%%-*}" != "$(uname -m)" ]; then
  check "install.sh refuses an ${target%%-*} bundle ($target) on this $(uname -m) machine" refuses_foreign
  if [ "$failures" -gt 0 ]; then echo "bundle.sh: $failures check(s) FAILED" >&2; exit 1; fi
  echo "bundle.sh: all checks passed ($target under qemu; install.sh runs only on the device)"
  exit 0
fi

touch "$tmp/a-file"
refuses() {
  local out rc=0
  out=$(clean bash "$b/install.sh" --prefix "$tmp/a-file/opt" 2>&1) || rc=$?
  echo "$out"
  [ "$rc" = 1 ] && grep -q "not a folder" <<<"$out" && [ ! -e "$tmp/a-file/opt" ]
}
check "install.sh refuses a prefix it cannot create (exit 1, says why)" refuses
check "install.sh --prefix TMP/opt --systemd" \
  clean bash "$b/install.sh" --prefix "$tmp/opt" --systemd --systemd-dir "$tmp/systemd"
check "env -i TMP/opt/bin/headroom doctor (installed)" clean "$tmp/opt/bin/headroom" doctor
units_point_at_install() {
  grep -qxF "ExecStart=$tmp/opt/bin/headroom field run \$HEADROOM_FIELD_ARGS" "$tmp/systemd/headroom-field.service" &&
    grep -q "^EnvironmentFile=$tmp/opt/etc/field.env$" "$tmp/systemd/headroom-field.service" &&
    grep -q '^HEADROOM_FIELD_ARGS="--images ' "$tmp/opt/etc/field.env" &&
    grep -q '^OnCalendar=' "$tmp/systemd/headroom-field.timer"
}
check "the systemd service and timer run \`headroom field run\` with the installed binary" units_point_at_install
field_loop_starts() {
  local out rc=0
  out=$(clean "$tmp/opt/bin/headroom" field rollback --model "$tmp/none.onnx" 2>&1) || rc=$?
  echo "$out"
  [ "$rc" = 2 ] && grep -q "no previous model to roll back to" <<<"$out"
}
check "the installed field loop starts (rollback with nothing deployed: exit 2, says why)" field_loop_starts
echo 'HEADROOM_FIELD_ARGS=--images /mine' > "$tmp/opt/etc/field.env"
check "a reinstall replaces the files and keeps etc/field.env" \
  bash -c "env -i PATH=/usr/bin:/bin bash '$b/install.sh' --prefix '$tmp/opt' --systemd --systemd-dir '$tmp/systemd' && grep -qx 'HEADROOM_FIELD_ARGS=--images /mine' '$tmp/opt/etc/field.env' && env -i PATH=/usr/bin:/bin '$tmp/opt/bin/headroom' --version"

if [ "$failures" -gt 0 ]; then
  echo "bundle.sh: $failures check(s) FAILED" >&2
  exit 1
fi
echo "bundle.sh: all checks passed"
