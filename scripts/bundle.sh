#!/usr/bin/env bash
# Builds the install bundle headroom-VERSION-TARGET-linux.tar.gz: everything the binary needs to run
# with an empty environment, laid out as it is installed (docs/GUIDE.md "Get the binary"):
#   bin/headroom                 RUNPATH $ORIGIN/../lib (crates/cli/build.rs); debug info stripped
#   lib/                         exactly the libraries it loads that are not the system's: what `ldd`
#                                resolves into LIBTORCH (libtorch_cpu, libc10, libgomp, libcudart,
#                                libcupti) and libonnxruntime.so.X.Y.Z — real files, no symlinks; with
#                                a CUDA libtorch also libtorch_cuda.so and its closure under the torch
#                                root (the linker's --as-needed drops it from the binary; headroom
#                                dlopens it from lib/ at run time), cuDNN's engines, NVRTC's builtins
#   configs/                     device and run presets
#   scripts/field-retrain.sh     the field loop (docs/FIELD.md), with scripts/lib/errtrap.sh
#   scripts/gpu-check.sh         the GPU paths check (docs/GPU.md), run with the bundle's binary
#   models/demo/                 the demo student and teacher (the field loop's default teacher)
#   share/doc/headroom/          `headroom [CMD] --help` of every subcommand, README, FIELD.md
#   install.sh                   copies it under a prefix (default /opt/headroom); --systemd adds
#                                the field loop's service and timer
#   BUILD-INFO, SHA256SUMS
#
# Usage: scripts/bundle.sh [--profile release|dev] [--out DIR] [--target x86_64|aarch64|aarch64-jetpack7]
#        scripts/bundle.sh --target native --libtorch DIR --onnxruntime FILE [--features LIST] [--label NAME] ...
#   --profile  release (default; its first build compiles tch's C++ wrapper again, ~1 min on 2
#              cores) or dev (reuses the debug build of scripts/test.sh)
#   --out      where the tarball goes (default: dist/); the unpacked folder is left beside it
#   --target   x86_64 (default) or aarch64: cross-built by `scripts/cross-build.sh native` against
#              the aarch64 PyPI wheels (CPU only; after `scripts/cross-build.sh setup`), its
#              --help texts made under qemu
#   --target aarch64-jetpack7  the same binary, plus the CUDA half of the aarch64 torch wheel and
#              the CUDA 13 libraries it pins (`scripts/cross-build.sh native cuda-deps`): for Orin on
#              JetPack 7 (SBSA CUDA 13); only the driver (libcuda.so.1) comes from the system.
#              Named headroom-VER-aarch64-linux-jetpack7 (docs/DECISIONS.md "The JetPack 7 bundle")
#   --target native  builds for this machine (x86_64 or aarch64) against the libraries given, as on
#              a Jetson against JetPack's PyTorch and onnxruntime-gpu (docker/Dockerfile.jetson runs
#              scripts/jetson-bundle.sh, which calls this):
#     --libtorch DIR      a libtorch 2.5-2.13: a folder with include/ and lib/, e.g. a pip-installed
#                         .../site-packages/torch; lib/ gets what ldd resolves under DIR/.. (torch/,
#                         and nvidia/ of a PyPI CUDA wheel)
#     --onnxruntime FILE  libonnxruntime.so.X.Y.Z (1.20 or newer); its libonnxruntime_providers_*.so
#                         are bundled too
#     --features LIST     cargo features of headroom-cli (e.g. cuda,tensorrt)
#     --label NAME        appended to the bundle's name (headroom-VER-ARCH-linux-NAME)
#   Libraries resolved elsewhere (JetPack's CUDA, cuDNN, TensorRT) stay on the system: SYSTEM-LIBS
#   lists them as found at build time.
# Env: CARGO_TARGET_DIR (as for cargo; reused), HEADROOM_DEPS (see scripts/setup.sh); for aarch64
#      those of scripts/cross/native.sh (NATIVE_TARGET_DIR, HEADROOM_DEPS_AARCH64).
# shellcheck source=lib/errtrap.sh
source "$(dirname "$0")/lib/errtrap.sh"
root=$(cd "$(dirname "$0")/.." && pwd)

fail() { echo "bundle: error: $*" >&2; exit 1; }
step() { headroom_step "$*"; echo "bundle: $*" >&2; }
usage() { sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

profile=release out="$root/dist" target=x86_64 native_torch="" native_ort="" features="" label=""
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) [ $# -ge 2 ] || usage; profile=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
    --target) [ $# -ge 2 ] || usage; target=$2; shift 2 ;;
    --libtorch) [ $# -ge 2 ] || usage; native_torch=$2; shift 2 ;;
    --onnxruntime) [ $# -ge 2 ] || usage; native_ort=$2; shift 2 ;;
    --features) [ $# -ge 2 ] || usage; features=$2; shift 2 ;;
    --label) [ $# -ge 2 ] || usage; label=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bundle: unknown argument '$1'" >&2; usage ;;
  esac
done
case "$profile" in
  release) cargo_profile=(--release); profile_dir=release ;;
  dev) cargo_profile=(); profile_dir=debug ;;
  *) fail "--profile $profile: expected release or dev" ;;
esac
cross=0 cuda_target=0
case "$target" in aarch64|aarch64-jetpack7) cross=1 ;; esac
[ "$target" != aarch64-jetpack7 ] || { cuda_target=1; label=jetpack7; }
if [ "$target" = native ]; then
  [ -n "$native_torch" ] && [ -n "$native_ort" ] || fail "--target native needs --libtorch DIR and --onnxruntime FILE"
  [ -d "$native_torch/include/torch" ] && [ -d "$native_torch/lib" ] \
    || fail "--libtorch $native_torch: expected a folder with include/torch and lib/ (e.g. site-packages/torch)"
  [ -f "$native_ort" ] || fail "--onnxruntime $native_ort: not a file (libonnxruntime.so.X.Y.Z)"
  arch=$(uname -m)
else
  [ -z "$native_torch$native_ort$features" ] && { [ -z "$label" ] || [ "$cuda_target" = 1 ]; } \
    || fail "--libtorch, --onnxruntime, --features and --label go with --target native"
  [ "$(uname -m)" = x86_64 ] || fail "this script builds on x86_64; on $(uname -m) see docs/CROSS.md (or use --target native)"
  arch=${target%%-*}
fi
case "$target" in
  x86_64|native) tools=(cargo ldd readelf strip objdump); strip_tool="strip"; objdump_tool="objdump" ;;
  aarch64|aarch64-jetpack7) tools=(aarch64-linux-gnu-readelf aarch64-linux-gnu-strip aarch64-linux-gnu-objdump qemu-aarch64-static)
    strip_tool=aarch64-linux-gnu-strip; objdump_tool=aarch64-linux-gnu-objdump ;;
  *) fail "--target $target: expected x86_64, aarch64, aarch64-jetpack7 or native" ;;
esac
for tool in "${tools[@]}" tar gzip sha256sum; do
  command -v "$tool" >/dev/null || fail "$tool is needed (binutils, coreutils, tar, gzip, a Rust toolchain; aarch64: scripts/cross-build.sh setup)"
done
mkdir -p "$out" || fail "cannot create --out $out"
out=$(cd "$out" && pwd)

if [ "$target" = x86_64 ]; then
  # The libraries the checkout already builds with: without HEADROOM_DEPS, setup.sh would install a
  # second copy into .deps/ and point .deps/env.sh (and so the next cargo build) at it.
  if [ -z "${HEADROOM_DEPS:-}" ] && [ -f "$root/.deps/env.sh" ]; then
    existing=$(sed -n 's/^export LIBTORCH="\(.*\)"$/\1/p' "$root/.deps/env.sh")
    if [ -n "$existing" ]; then export HEADROOM_DEPS="${existing%/libtorch}"; fi
  fi
  step "native dependencies (scripts/setup.sh, HEADROOM_DEPS=${HEADROOM_DEPS:-$root/.deps})"
  "$root/scripts/setup.sh" || fail "scripts/setup.sh (see its message above)"
  # shellcheck source=/dev/null
  source "$root/.deps/env.sh"
  target_dir=${CARGO_TARGET_DIR:-$root/target}
  step "cargo build -p headroom-cli --locked ${cargo_profile[*]} (into $target_dir)"
  (cd "$root" && cargo build -p headroom-cli --locked "${cargo_profile[@]}") || fail "cargo build failed (see above)"
  built="$target_dir/$profile_dir/headroom"
  run_target() { "$@"; }
elif [ "$target" = native ]; then
  LIBTORCH=$(cd "$native_torch" && pwd)
  ORT_DYLIB_PATH=$(cd "$(dirname "$native_ort")" && pwd)/$(basename "$native_ort")
  LD_LIBRARY_PATH="$LIBTORCH/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LIBTORCH ORT_DYLIB_PATH LD_LIBRARY_PATH
  # As scripts/setup.sh writes it (the same value keeps a target dir's build): libc10's names say.
  LIBTORCH_CXX11_ABI=0
  if grep -q B5cxx11 "$LIBTORCH/lib/libc10.so"; then LIBTORCH_CXX11_ABI=1; fi
  export LIBTORCH_CXX11_ABI
  target_dir=${CARGO_TARGET_DIR:-$root/target}
  feature_args=(); [ -z "$features" ] || feature_args=(--features "$features")
  step "cargo build -p headroom-cli --locked ${cargo_profile[*]} ${feature_args[*]} against $LIBTORCH (into $target_dir)"
  (cd "$root" && cargo build -p headroom-cli --locked "${cargo_profile[@]}" "${feature_args[@]}") \
    || fail "cargo build failed (see above)"
  built="$target_dir/$profile_dir/headroom"
  run_target() { "$@"; }
else
  step "aarch64 libraries and build (scripts/cross-build.sh native deps, build ${cargo_profile[*]})"
  "$root/scripts/cross-build.sh" native deps || fail "scripts/cross-build.sh native deps (see above)"
  if [ "$cuda_target" = 1 ]; then
    "$root/scripts/cross-build.sh" native cuda-deps || fail "scripts/cross-build.sh native cuda-deps (see above)"
  fi
  "$root/scripts/cross-build.sh" native build --locked "${cargo_profile[@]}" \
    || fail "scripts/cross-build.sh native build (see above)"
  native_env_text=$("$root/scripts/cross-build.sh" native env) || fail "scripts/cross-build.sh native env failed"
  eval "$(grep '^export ' <<<"$native_env_text")"
  built="$CARGO_TARGET_DIR/aarch64-unknown-linux-gnu/$profile_dir/headroom"
  # An x86 host cannot exec the binary: qemu runs it (with the fake /proc/cpuinfo of the prefix).
  run_target() { "$root/scripts/cross/qemu-runner.sh" "$@"; }
fi
[ -x "$built" ] || fail "the build left no $built"
# shellcheck disable=SC2016  # a literal $ORIGIN
readelf -d "$built" | grep -q 'RUNPATH.*\$ORIGIN/\.\./lib' \
  || fail "$built has no RUNPATH \$ORIGIN/../lib (crates/cli/build.rs sets it): rebuild with cargo clean -p headroom-cli"

version=$(run_target "$built" -V | awk '{print $2}') || fail "$built -V failed"
[ -n "$version" ] || fail "$built -V printed no version"
name="headroom-$version-$arch-linux${label:+-$label}"
stage="$out/$name"
step "assembling $stage ($profile profile)"
rm -rf "$stage" "$stage.tmp"
mkdir -p "$stage.tmp"/{bin,lib,scripts/lib,models,share/doc/headroom}

"$strip_tool" --strip-debug -o "$stage.tmp/bin/headroom" "$built" || fail "strip $built"

# lib/: every library ldd resolves into LIBTORCH (transitively), copied under the name the loader
# asks for, as a real file; then ONNX Runtime, which the binary dlopens (crates/infer/src/runtime.rs).
# "Into LIBTORCH": under LIBTORCH itself or a folder its lib/ links point into (setup.sh's layout).
libtorch_roots=("$(cd "$LIBTORCH" && pwd -P)")
# A pip-installed torch (--target native) finds its CUDA wheels in ../nvidia/ through its RPATH.
if [ "$target" = native ]; then libtorch_roots=("$(cd "$LIBTORCH/.." && pwd -P)"); fi
for f in "$LIBTORCH"/lib/*; do libtorch_roots+=("$(dirname "$(readlink -f "$f")")"); done
from_libtorch() {
  local root
  for root in "${libtorch_roots[@]}"; do
    case "$1" in "$root"/*) return 0 ;; esac
  done
  return 1
}
copied=0 seen=" "
if [ "$cross" = 0 ]; then
  # copy_ldd_closure FILE: every library ldd resolves for FILE into LIBTORCH, into lib/.
  copy_ldd_closure() {
    local ldd_out soname path real
    ldd_out=$(LD_LIBRARY_PATH="$LIBTORCH/lib" ldd "$1") || fail "ldd $1 failed"
    if grep -q 'not found' <<<"$ldd_out"; then fail "ldd $1: $(grep 'not found' <<<"$ldd_out" | tr -s ' \t' ' ')"; fi
    while read -r soname path; do
      [ -e "$path" ] || continue
      real=$(readlink -f "$path")
      from_libtorch "$real" || from_libtorch "$(cd "$(dirname "$path")" && pwd -P)/x" || continue
      [ -e "$stage.tmp/lib/$soname" ] && continue
      cp "$real" "$stage.tmp/lib/$soname" || fail "cannot copy $real"
      copied=$((copied + 1))
      companions "$real"
    done < <(awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<<"$ldd_out")
  }
  copy_closure() { copy_ldd_closure "$@"; }
else
  # No ldd for a foreign binary: the closure of DT_NEEDED over the search folders, with readelf.
  needed() { aarch64-linux-gnu-readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
  search_dirs=("$LIBTORCH/lib")
  [ "$cuda_target" = 0 ] || search_dirs+=("$NATIVE_CUDA_LIB")
  copy_closure() {
    local queue=("$@") file soname dir real
    while [ ${#queue[@]} -gt 0 ]; do
      file=${queue[0]}; queue=("${queue[@]:1}")
      for soname in $(needed "$file"); do
        case "$seen" in *" $soname "*) continue ;; esac
        seen+="$soname "
        for dir in "${search_dirs[@]}"; do
          [ -e "$dir/$soname" ] || continue
          real=$(readlink -f "$dir/$soname")
          cp "$real" "$stage.tmp/lib/$soname" || fail "cannot copy $real"
          queue+=("$real")
          copied=$((copied + 1))
          companions "$real"
          break
        done
      done
    done
  }
fi
# companions FILE: what FILE's library opens by itself at run time, not through DT_NEEDED, from the
# folder it came from: cuDNN 9's sub-libraries (engines, graph, heuristics, ops), NVRTC's builtins.
companions() {
  local dir pattern f
  dir=$(dirname "$1")
  case "$(basename "$1")" in
    libcudnn.so.*) pattern='libcudnn_*.so*' ;;
    libnvrtc.so.*) pattern='libnvrtc-builtins*.so*' ;;
    *) return 0 ;;
  esac
  for f in "$dir"/$pattern; do
    [ -f "$f" ] && [ ! -e "$stage.tmp/lib/$(basename "$f")" ] || continue
    cp "$(readlink -f "$f")" "$stage.tmp/lib/$(basename "$f")" || fail "cannot copy $f"
    copied=$((copied + 1))
    [ "$cross" = 0 ] || copy_closure "$f"
  done
}
copy_closure "$built"
# libtorch's CUDA part: nothing in the binary references libtorch_cuda.so by symbol, so the
# linker's --as-needed drops it and the binary's closure never reaches it. headroom dlopens it at
# run time from beside lib/libtorch_cpu.so (crates/train/src/lib.rs, libtorch_cuda), so a CUDA
# libtorch's bundle carries it with its own closure.
cuda_lib=""
if [ "$cuda_target" = 1 ]; then
  cuda_lib=$NATIVE_CUDA_LIB
elif [ -e "$LIBTORCH/lib/libtorch_cuda.so" ]; then
  cuda_lib=$(dirname "$(readlink -f "$LIBTORCH/lib/libtorch_cuda.so")")
fi
case ",$features," in
  *,cuda,*) [ -n "$cuda_lib" ] || fail "--features $features asks for CUDA, but $LIBTORCH/lib has no libtorch_cuda.so \
(a CPU libtorch: training would run on the CPU); give the CUDA build of torch, or drop cuda from --features" ;;
esac
if [ -n "$cuda_lib" ]; then
  [ -f "$cuda_lib/libtorch_cuda.so" ] || fail "no libtorch_cuda.so in $cuda_lib"
  step "carrying libtorch's CUDA part: libtorch_cuda.so from $cuda_lib and its closure"
  cp "$(readlink -f "$cuda_lib/libtorch_cuda.so")" "$stage.tmp/lib/libtorch_cuda.so" || fail "cannot copy libtorch_cuda.so"
  seen+="libtorch_cuda.so "
  copy_closure "$cuda_lib/libtorch_cuda.so"
  for f in libtorch_cuda.so libc10_cuda.so; do
    [ -f "$stage.tmp/lib/$f" ] || fail "a CUDA build whose bundle has no lib/$f: training would run on the CPU"
  done
fi
[ "$copied" -gt 0 ] || fail "ldd resolved nothing into $LIBTORCH: is the binary built with the libtorch feature?"
[ -f "${ORT_DYLIB_PATH:-}" ] || fail "ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-} is not a file (scripts/setup.sh writes it)"
ort_real=$(readlink -f "$ORT_DYLIB_PATH")
cp "$ort_real" "$stage.tmp/lib/$(basename "$ort_real")" || fail "cannot copy $ort_real"
if [ "$target" = native ]; then
  # The execution providers ONNX Runtime dlopens from its own folder (CUDA, TensorRT, shared).
  for provider in "$(dirname "$ort_real")"/libonnxruntime_providers_*.so; do
    [ -f "$provider" ] || continue
    cp "$(readlink -f "$provider")" "$stage.tmp/lib/$(basename "$provider")" || fail "cannot copy $provider"
  done
fi
chmod 0644 "$stage.tmp"/lib/*
chmod 0755 "$stage.tmp/bin/headroom"

cp -R "$root/configs" "$stage.tmp/configs"
cp "$root/scripts/field-retrain.sh" "$root/scripts/gpu-check.sh" "$stage.tmp/scripts/"
cp "$root/scripts/lib/errtrap.sh" "$stage.tmp/scripts/lib/"
cp -R "$root/models/demo" "$stage.tmp/models/demo"
cp "$root/scripts/bundle/install.sh" "$stage.tmp/install.sh"
chmod 0755 "$stage.tmp/install.sh" "$stage.tmp/scripts/field-retrain.sh" "$stage.tmp/scripts/gpu-check.sh"
cp "$root/README.md" "$root/docs/FIELD.md" "$root/docs/GUIDE.md" "$stage.tmp/share/doc/headroom/"

# Every library the bundled binary needs must now resolve inside lib/ or on the system, with an
# empty environment.
# The driver comes from the system on every NVIDIA machine (L4T on a Jetson), never from a bundle.
driver_lib() { case "$1" in libcuda.so.1|libnvidia-ml.so.1) return 0 ;; esac; return 1; }
if [ "$cross" = 0 ]; then
  ldd_bundle=$(env -i PATH=/usr/bin:/bin ldd "$stage.tmp/bin/headroom") || fail "ldd of the bundled binary failed"
  if grep -q 'not found' <<<"$ldd_bundle"; then
    fail "the bundled binary cannot find: $(grep 'not found' <<<"$ldd_bundle" | tr -s ' \t' ' ')"
  fi
  while read -r soname path; do
    if from_libtorch "$(readlink -f "$path")"; then fail "the bundled binary loads $soname from $path, not from lib/"; fi
  done < <(awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<<"$ldd_bundle")
else
  for file in "$stage.tmp/bin/headroom" "$stage.tmp"/lib/*; do
    for soname in $(needed "$file"); do
      [ -e "$stage.tmp/lib/$soname" ] || [ -e "/lib/aarch64-linux-gnu/$soname" ] \
        || [ -e "/usr/lib/aarch64-linux-gnu/$soname" ] || [ "$soname" = ld-linux-aarch64.so.1 ] \
        || driver_lib "$soname" \
        || fail "$(basename "$file") needs $soname, which is neither in lib/ nor a system library"
    done
  done
fi
if find "$stage.tmp" -type l | grep -q .; then fail "symlinks in the bundle: $(find "$stage.tmp" -type l)"; fi

step "writing the --help text of every subcommand (by running the bundled binary)"
# With an empty environment: the bundle's RUNPATH and lib/ alone (qemu gets no LD_LIBRARY_PATH either).
if [ "$cross" = 0 ]; then
  run_bundled() { env -i PATH=/usr/bin:/bin "$stage.tmp/bin/headroom" "$@"; }
else
  run_bundled() { env -i PATH=/usr/bin:/bin "$root/scripts/cross/qemu-runner.sh" "$stage.tmp/bin/headroom" "$@"; }
fi
doc="$stage.tmp/share/doc/headroom"
run_bundled --help > "$doc/headroom.txt" || fail "bin/headroom --help failed with an empty environment"
subcommands=$(awk '/^Commands:/ {on = 1; next} on && /^$/ {exit} on && $1 != "help" {print $1}' "$doc/headroom.txt")
[ -n "$subcommands" ] || fail "found no subcommands in headroom --help"
for sub in $subcommands; do
  run_bundled "$sub" --help > "$doc/headroom-$sub.txt" || fail "bin/headroom $sub --help failed"
done

if [ "$target" = native ]; then
  # What the bundle expects from the system: every library the binary and lib/ resolve outside lib/,
  # other than the C and C++ runtimes (on a Jetson: JetPack's CUDA, cuDNN, TensorRT).
  for file in "$stage.tmp/bin/headroom" "$stage.tmp"/lib/*; do
    env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$stage.tmp/lib" ldd "$file" 2>/dev/null || true
  done | awk '$2 == "=>" {print $1, $3}' | sort -u \
    | grep -v -E '^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^ ]*)\.so' \
    | grep -v " $stage.tmp/lib/" > "$stage.tmp/SYSTEM-LIBS" || true
  cuda_build=no; [ -f "$stage.tmp/lib/libtorch_cuda.so" ] && cuda_build="yes (lib/libtorch_cuda.so)"
  libs_text="libtorch from $LIBTORCH (CUDA build: $cuda_build), ONNX Runtime from $(dirname "$ort_real"); features: ${features:-default}"
elif [ "$cuda_target" = 1 ]; then
  # What the JetPack 7 bundle leaves to the system: the driver, which libcudart opens by name
  # (no DT_NEEDED names it), and what every lib/ file needs from the arm64 system (glibc, libstdc++).
  {
    echo "libcuda.so.1 => the NVIDIA driver's (on a Jetson: Jetson Linux's own), opened by libcudart at run time"
    for file in "$stage.tmp/bin/headroom" "$stage.tmp"/lib/*; do needed "$file"; done | sort -u | while read -r soname; do
      [ -e "$stage.tmp/lib/$soname" ] || echo "$soname => the system's (Ubuntu 24.04 on JetPack 7)"
    done
  } > "$stage.tmp/SYSTEM-LIBS"
  libs_text="libtorch $(cat "$LIBTORCH/build-version") CUDA build \
(SBSA CUDA 13, PyPI wheels; CUDA build: yes (lib/libtorch_cuda.so) with the CUDA libraries its wheel pins), \
ONNX Runtime CPU (PyPI has no aarch64 CUDA build); for JetPack 7 (SBSA CUDA 13): only the driver from the system"
else
  libs_text="CPU (libtorch and ONNX Runtime CPU builds from PyPI wheels)"
fi
{
  echo "headroom $version, $arch Linux, $libs_text; $profile profile"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built: $(date -u +%FT%TZ) with $(rustc --version)"
  echo "libtorch: $(run_bundled --version | sed -n 's/^libtorch: built against \([0-9.]*\).*/\1/p'); ONNX Runtime: $(basename "$ort_real" | sed 's/^libonnxruntime\.so\.//')"
  echo "needs: glibc >= $("$objdump_tool" -T "$stage.tmp/bin/headroom" "$stage.tmp"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n1), libstdc++ (GLIBCXX) >= $("$objdump_tool" -T "$stage.tmp/bin/headroom" "$stage.tmp"/lib/*.so* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sed 's/GLIBCXX_//' | sort -uV | tail -n1) from the system"
  echo "lib/: $(find "$stage.tmp/lib" -type f -printf '%f\n' | sort | tr '\n' ' ')"
} > "$stage.tmp/BUILD-INFO"
sums=$(cd "$stage.tmp" && find . -type f -print0 | sort -z | xargs -0 sha256sum) || fail "sha256sum failed"
printf '%s\n' "$sums" > "$stage.tmp/SHA256SUMS"
mv "$stage.tmp" "$stage"

step "packing $out/$name.tar.gz"
tar -C "$out" -czf "$out/$name.tar.gz.tmp" "$name" || fail "tar failed (disk full?)"
mv "$out/$name.tar.gz.tmp" "$out/$name.tar.gz"
packed=$(du -m "$out/$name.tar.gz" | cut -f1)
unpacked=$(du -sm "$stage" | cut -f1)
step "done: $out/$name.tar.gz ($packed MB; $unpacked MB unpacked in $stage)"
echo "$out/$name.tar.gz"
