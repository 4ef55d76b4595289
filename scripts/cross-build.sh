#!/usr/bin/env bash
# Builds and tests headroom for aarch64-unknown-linux-gnu (Jetson Orin, JetPack 6) on an x86_64
# Debian 12 host WITHOUT Docker: Debian's Rust compiler and arm64 standard library, the GNU cross
# linker, and qemu-user to run the tests. See docs/CROSS.md (the Docker route is Cross.toml).
#
# Usage: scripts/cross-build.sh setup            install packages (apt, root), make the qemu prefix
#        scripts/cross-build.sh build [ARGS...]  cargo build --workspace --no-default-features
#        scripts/cross-build.sh test  [ARGS...]  cargo test (under qemu) + smoke test of `headroom`
#        scripts/cross-build.sh env              print the environment build/test use (to source)
#        scripts/cross-build.sh native [deps|build|run|env]  the full binary (libtorch + ONNX Runtime,
#                                                the aarch64 wheels of setup.sh's pins) run under qemu;
#                                                see scripts/cross/native.sh
# ARGS go to cargo (e.g. `test -p headroom-core`, or `build --release`).
# Env:   CARGO_TARGET_DIR      default /var/cache/headroom/target-aarch64 (never the host target/)
#        HEADROOM_QEMU_PREFIX  default .deps/qemu-prefix (fake /proc/cpuinfo and /sys files only)
#        HEADROOM_QEMU_CPUS    CPUs the fake /proc/cpuinfo lists (setup; default nproc)
#        QEMU_CPU              default cortex-a76 (closest qemu CPU to Orin's Cortex-A78AE)
#        HEADROOM_MIN_RUST     oldest acceptable Debian rustc (default: rust-version in Cargo.toml)
#        CROSS_CARGO           the cargo to drive Debian's rustc with (default: see pick_cargo)
# Sourcing this file (scripts/tests/install_logic.sh does) defines its functions without running a
# command, so setup's decisions can be tested against stub dpkg/apt commands.
# shellcheck source=lib/errtrap.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/errtrap.sh"

TARGET=aarch64-unknown-linux-gnu
PACKAGES=(rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu g++-aarch64-linux-gnu
          libc6-dev-arm64-cross qemu-user-static)
DEBIAN_RUSTC=/usr/bin/rustc     # rustup's rustc cannot use Debian's arm64 std: always this one
DEBIAN_RUSTDOC=/usr/bin/rustdoc # likewise for doctests (rustup's rustdoc finds no aarch64 std)
APT_LISTS=/var/lib/apt/lists    # where apt keeps its package lists (the tests point it elsewhere)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix="${HEADROOM_QEMU_PREFIX:-$root/.deps/qemu-prefix}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/headroom/target-aarch64}"

fail() { echo "cross-build: error: $*" >&2; exit 1; }
step() { headroom_step "$*"; echo "cross-build: $*" >&2; }

# The workspace's rust-version (e.g. 1.92): HEADROOM_MIN_RUST, else the root Cargo.toml's, else 0.
required_rust() {
  local v="${HEADROOM_MIN_RUST:-}"
  [ -n "$v" ] || v=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$root/Cargo.toml" 2>/dev/null | head -n1 || true)
  echo "${v:-0}"
}

# version_ge A B: true when dotted version A >= B.
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

# Upstream version (1.96.0) of an installed or candidate Debian version (1.96.0+dfsg1-1~deb12u1).
upstream() { sed 's/^[0-9]*://; s/[+~-].*//'; }

# The installed Debian version of a package, or nothing. Never fails: dpkg-query exits 1 for a
# package it does not know, which under pipefail and errexit would end the script silently.
installed_version() { { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null || true; } \
  | sed -n 's/^install ok installed //p'; }

candidate_version() { { apt-cache policy "$1" 2>/dev/null || true; } | sed -n 's/^ *Candidate: //p' | grep -v '(none)' || true; }

# ------------------------------------------------------------------------------------------
# setup
# ------------------------------------------------------------------------------------------

setup_packages() {
  [ "$(uname -m)" = x86_64 ] || fail "this route cross-builds from x86_64; on $(uname -m) build natively (docs/CROSS.md)"
  { command -v dpkg && command -v apt-get; } >/dev/null \
    || fail "dpkg and apt-get are needed (Debian 12 or a derivative); otherwise use the Docker route in docs/CROSS.md"
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || fail "installing packages needs root: run as root or install sudo"
    sudo=(sudo)
  fi

  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    step "adding the arm64 architecture to dpkg"
    "${sudo[@]}" dpkg --add-architecture arm64 || fail "dpkg --add-architecture arm64 failed"
  fi

  local missing=() p want need_update=0
  want=$(required_rust)
  for p in "${PACKAGES[@]}"; do
    [ -n "$(installed_version "$p")" ] || missing+=("$p")
  done
  # An installed Rust that is too old, or whose compiler and arm64 std differ: upgrade all three.
  local rc std
  rc=$(installed_version rustc-web)
  std=$(installed_version libstd-rust-web-dev:arm64)
  if [ -n "$rc" ] && { ! version_ge "$(echo "$rc" | upstream)" "$want" || { [ -n "$std" ] && [ "$rc" != "$std" ]; }; }; then
    step "installed rustc-web $rc / libstd-rust-web-dev:arm64 ${std:-none} (need equal and >= $want): upgrading"
    for p in rustc-web cargo-web libstd-rust-web-dev:arm64; do
      [[ " ${missing[*]} " == *" $p "* ]] || missing+=("$p")
    done
    need_update=1
  fi
  if [ ${#missing[@]} -eq 0 ]; then
    step "packages already installed: ${PACKAGES[*]}"
    return
  fi

  # apt-get update only when needed: no arm64 package list yet, a package apt does not know,
  # or a Debian rustc older than the workspace's rust-version (a stale list).
  compgen -G "$APT_LISTS/*_binary-arm64_Packages*" >/dev/null || need_update=1
  for p in "${missing[@]}"; do
    [ -n "$(candidate_version "$p")" ] || need_update=1
  done
  if [ $need_update = 0 ] && ! version_ge "$(candidate_version rustc-web | upstream)" "$want"; then
    need_update=1
  fi
  if [ $need_update = 1 ]; then
    step "apt-get update (package lists missing or stale)"
    # Error-Mode=any: by default apt-get update exits 0 when the mirror cannot be reached (only "W:"
    # lines), and setup would go on to a misleading "apt knows no package". Older apt ignores it.
    "${sudo[@]}" apt-get -o APT::Update::Error-Mode=any update -q >&2 \
      || fail "apt-get update failed: is the Debian mirror reachable? (see apt's messages above)"
  fi
  for p in "${missing[@]}"; do
    [ -n "$(candidate_version "$p")" ] || fail "apt knows no package $p: this route needs Debian 12 (bookworm) with the main component"
  done

  step "installing ${missing[*]} (about 1.5 GB)"
  # env after sudo: sudo's env_reset would drop a DEBIAN_FRONTEND set before it.
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
    || fail "apt-get could not install ${missing[*]} (see the apt messages above; try: apt-get update, then rerun setup)"
}

# Debian's rustc-web must match libstd-rust-web-dev:arm64 exactly: rustc refuses a std built by
# another compiler version ("found crate `std` compiled by an incompatible version of rustc").
check_versions() {
  local rc std want
  rc=$(installed_version rustc-web)
  std=$(installed_version libstd-rust-web-dev:arm64)
  [ -n "$rc" ] || fail "rustc-web is not installed: run scripts/cross-build.sh setup"
  [ -n "$std" ] || fail "libstd-rust-web-dev:arm64 is not installed: run scripts/cross-build.sh setup"
  [ "$rc" = "$std" ] || fail "rustc-web is $rc but libstd-rust-web-dev:arm64 is $std: they must be equal; \
run: apt-get install rustc-web=$std (or libstd-rust-web-dev:arm64=$rc)"
  { [ -x "$DEBIAN_RUSTC" ] && [ -x "$DEBIAN_RUSTDOC" ]; } \
    || fail "$DEBIAN_RUSTC or $DEBIAN_RUSTDOC is missing although rustc-web is installed: apt-get install --reinstall rustc-web"
  want=$(required_rust)
  version_ge "$(echo "$rc" | upstream)" "$want" \
    || fail "Debian's rustc-web is $rc, older than the workspace's rust-version $want: run scripts/cross-build.sh setup \
(it updates and upgrades); if Debian has nothing newer, build natively on the device with rustup (docs/CROSS.md)"
  [ -d "/usr/lib/rustlib/$TARGET/lib" ] \
    || fail "/usr/lib/rustlib/$TARGET/lib is missing: reinstall libstd-rust-web-dev:arm64"
  [ -e /lib/ld-linux-aarch64.so.1 ] \
    || fail "/lib/ld-linux-aarch64.so.1 is missing: apt-get install libc6:arm64 (qemu loads it from there)"
  local t
  for t in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ aarch64-linux-gnu-ar qemu-aarch64-static; do
    command -v "$t" >/dev/null || fail "$t is not on PATH: run scripts/cross-build.sh setup"
  done
  step "rustc-web and libstd-rust-web-dev:arm64 are both $rc; $(qemu-aarch64-static --version | head -n1)"
}

# The qemu prefix: only fake files. qemu 7.2 shows the host's x86 /proc/cpuinfo to the guest,
# which makes cpuinfo-based code (onnxruntime, libtorch's cpuinfo and oneDNN) crash. These files
# describe a Jetson Orin CPU (Cortex-A78AE r0p1, MIDR 0x410fd421) but list only the features that
# qemu's cortex-a76 really has, so nothing is told it may use an instruction qemu lacks.
make_prefix() {
  local n i tmp
  n="${HEADROOM_QEMU_CPUS:-$(nproc)}"
  tmp="$prefix.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp/proc"
  for ((i = 0; i < n; i++)); do
    cat <<EOF
processor	: $i
model name	: ARMv8 Processor rev 1 (v8l)
BogoMIPS	: 62.50
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x0
CPU part	: 0xd42
CPU revision	: 1

EOF
    mkdir -p "$tmp/sys/devices/system/cpu/cpu$i/regs/identification"
    echo 0x00000000410fd421 > "$tmp/sys/devices/system/cpu/cpu$i/regs/identification/midr_el1"
    echo 0x0000000000000000 > "$tmp/sys/devices/system/cpu/cpu$i/regs/identification/revidr_el1"
  done > "$tmp/proc/cpuinfo"
  echo "made by scripts/cross-build.sh setup for $n CPUs; holds only fake files (never libraries)" > "$tmp/README"
  rm -rf "$prefix"
  mv "$tmp" "$prefix"
}

# Checks, with a tiny static-free C program, that qemu with our prefix shows the ARM cpuinfo and
# that a threaded program finishes (the hang QEMU_LD_PREFIX=/usr/aarch64-linux-gnu causes).
check_prefix() {
  local dir
  dir=$(mktemp -d)
  cat > "$dir/probe.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <string.h>
static void *work(void *arg) { return arg; }
int main(void) {
  char line[256]; int part = 0, midr = 0;
  FILE *f = fopen("/proc/cpuinfo", "r");
  while (f && fgets(line, sizeof line, f)) if (strstr(line, "CPU part\t: 0xd42")) part = 1;
  if (f) fclose(f);
  f = fopen("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1", "r");
  if (f && fgets(line, sizeof line, f) && strstr(line, "410fd421")) midr = 1;
  if (f) fclose(f);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, work, 0);
  for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
  printf("cpuinfo=%d midr=%d threads=ok\n", part, midr);
  return part && midr ? 0 : 1;
}
EOF
  aarch64-linux-gnu-gcc -O1 -pthread -o "$dir/probe" "$dir/probe.c" \
    || fail "aarch64-linux-gnu-gcc cannot build a C program: reinstall gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
  local out
  out=$(timeout 60 "$root/scripts/cross/qemu-runner.sh" "$dir/probe" 2>&1) \
    || fail "the qemu probe failed ($out): qemu-aarch64-static does not see $prefix/proc/cpuinfo, or a threaded program hangs"
  rm -rf "$dir"
  step "qemu probe: $out (prefix $prefix)"
}

# ------------------------------------------------------------------------------------------
# build / test environment
# ------------------------------------------------------------------------------------------

# Sets CARGO_BIN, the cargo that drives Debian's rustc (not in $(...): its fail must end the script,
# and its note must not be lost): CROSS_CARGO, else Debian's own (cargo-web installs
# /usr/bin/cargo, same version as rustc-web), else the cargo on PATH. rustup's cargo 1.95 with
# RUSTC=/usr/bin/rustc 1.96 was tested and works too; a much older cargo may not.
pick_cargo() {
  if [ -n "${CROSS_CARGO:-}" ]; then CARGO_BIN=$CROSS_CARGO; return; fi
  local rustc_minor cargo_minor
  rustc_minor=$("$DEBIAN_RUSTC" --version | awk '{print $2}' | cut -d. -f1-2)
  cargo_minor=$({ /usr/bin/cargo --version 2>/dev/null || true; } | awk '{print $2}' | cut -d. -f1-2)
  if [ -n "$cargo_minor" ] && [ "$cargo_minor" = "$rustc_minor" ]; then CARGO_BIN=/usr/bin/cargo; return; fi
  CARGO_BIN=$(command -v cargo) || fail "no cargo found: apt-get install cargo-web (scripts/cross-build.sh setup)"
  step "note: /usr/bin/cargo is ${cargo_minor:-missing}, not $rustc_minor; using $CARGO_BIN"
}

# The newest glibc symbol version a binary needs (e.g. 2.34), or nothing. Never fails (a missing
# objdump or a binary without GLIBC_ symbols must not end a successful build).
glibc_needed() {
  { aarch64-linux-gnu-objdump -T "$1" 2>/dev/null || true; } | { grep -o 'GLIBC_[0-9.]*' || true; } \
    | sed 's/GLIBC_//' | sort -uV | tail -n1
}

cross_env() {
  export RUSTC="$DEBIAN_RUSTC" RUSTDOC="$DEBIAN_RUSTDOC"
  unset RUSTC_WRAPPER RUSTUP_TOOLCHAIN
  export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
  export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$root/scripts/cross/qemu-runner.sh"
  export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
  export CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
  export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
  export PKG_CONFIG_ALLOW_CROSS=1
  export HEADROOM_QEMU_PREFIX="$prefix"
  # Tests that spawn the headroom binary run it through this (no binfmt_misc needed).
  export HEADROOM_TEST_RUNNER="$root/scripts/cross/qemu-runner.sh"
  export QEMU_CPU="${QEMU_CPU:-cortex-a76}"
  pick_cargo
}

preflight() {
  # Quietly first; on failure again, loudly. The subshell matters: check_versions' fail exits, and
  # run in this shell with its output silenced it would end the script without a word.
  (check_versions) >/dev/null 2>&1 || check_versions
  [ -f "$prefix/proc/cpuinfo" ] || fail "$prefix is missing: run scripts/cross-build.sh setup"
  mkdir -p "$CARGO_TARGET_DIR" || fail "cannot create CARGO_TARGET_DIR=$CARGO_TARGET_DIR: set CARGO_TARGET_DIR to a writable folder"
  cross_env
}

cmd_build() {
  preflight
  step "building the workspace for $TARGET with $("$CARGO_BIN" --version) and $("$RUSTC" --version) into $CARGO_TARGET_DIR"
  (cd "$root" && "$CARGO_BIN" build --workspace --no-default-features --target "$TARGET" "$@") \
    || fail "cargo build for $TARGET failed (see above); the host build (cargo build) should be fixed first"
  local bin="$CARGO_TARGET_DIR/$TARGET/debug/headroom"
  [[ " $* " == *" --release "* ]] && bin="$CARGO_TARGET_DIR/$TARGET/release/headroom"
  if [ -f "$bin" ]; then
    local glibc
    glibc=$(glibc_needed "$bin")
    step "built $bin; it needs glibc >= ${glibc:-?} (JetPack 6 has 2.35; JetPack 5 has 2.31, too old)"
  fi
  return 0
}

# Runs the cross-built binary under qemu: --version, --help, and synth if the subcommand exists.
smoke_test() {
  local bin="$CARGO_TARGET_DIR/$TARGET/debug/headroom" run="$root/scripts/cross/qemu-runner.sh" out tmp
  [ -f "$bin" ] || { (cd "$root" && "$CARGO_BIN" build -p headroom-cli --no-default-features --target "$TARGET") \
    || fail "could not build the headroom binary for $TARGET"; }
  out=$("$run" "$bin" --version 2>&1) || fail "headroom --version failed under qemu: $out"
  step "smoke: headroom --version -> $out"
  "$run" "$bin" --help >/dev/null 2>&1 || fail "headroom --help failed under qemu"
  step "smoke: headroom --help -> ok"
  if "$run" "$bin" synth --help >/dev/null 2>&1; then
    tmp=$(mktemp -d)
    if out=$("$run" "$bin" synth --out "$tmp/synth" --train 4 --val 2 2>&1); then
      step "smoke: headroom synth --out $tmp/synth --train 4 --val 2 -> ok, $(find "$tmp/synth" -type f | wc -l) files"
      rm -rf "$tmp"
    else
      rm -rf "$tmp"
      fail "headroom synth failed under qemu: $out"
    fi
  else
    step "smoke: headroom has no synth subcommand yet: skipped"
  fi
}

# count_results WORD LOG: the sum of "N WORD" over the "test result:" lines of a cargo test log.
count_results() {
  awk -v word="$1" '/^test result:/ { for (i = 2; i <= NF; i++) { w = $i; sub(/[;,]$/, "", w); if (w == word) sum += $(i - 1) } }
    END { print sum + 0 }' "$2"
}

cmd_test() {
  preflight
  local log
  log=$(mktemp)
  step "testing the workspace for $TARGET under $(qemu-aarch64-static --version | head -n1) (QEMU_CPU=$QEMU_CPU)"
  local rc=0   # with pipefail, cargo's status (tee's is 0)
  (cd "$root" && "$CARGO_BIN" test --workspace --no-default-features --target "$TARGET" --no-fail-fast "$@") 2>&1 | tee "$log" \
    || rc=$?
  local passed failed ignored suites
  passed=$(count_results passed "$log")
  failed=$(count_results failed "$log")
  ignored=$(count_results ignored "$log")
  suites=$(grep -c '^test result:' "$log" || true)
  rm -f "$log"
  echo "cross-build: $TARGET under qemu: $passed passed, $failed failed, $ignored ignored in $suites test suites" >&2
  local smoke=0
  if [ $# -eq 0 ]; then
    (smoke_test) || smoke=1
  fi
  [ "$rc" = 0 ] || fail "cargo test for $TARGET failed (exit $rc): see the failing tests above; \
a test that passes on the host but not here may depend on the x86 CPU, or spawn the aarch64 binary directly \
(exit 127: without binfmt_misc it must be started through \$HEADROOM_TEST_RUNNER, see docs/CROSS.md)"
  [ "$smoke" = 0 ] || fail "the smoke test of the headroom binary under qemu failed (see above)"
  return 0
}

cmd_setup() {
  local t0=$SECONDS
  setup_packages
  check_versions
  make_prefix
  check_prefix
  step "setup done in $((SECONDS - t0)) s; next: scripts/cross-build.sh build"
}

cmd_env() {
  preflight
  cat <<EOF
export RUSTC=$RUSTC
export RUSTDOC=$RUSTDOC
export CARGO_TARGET_DIR=$CARGO_TARGET_DIR
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER
export CC_aarch64_unknown_linux_gnu=$CC_aarch64_unknown_linux_gnu
export CXX_aarch64_unknown_linux_gnu=$CXX_aarch64_unknown_linux_gnu
export AR_aarch64_unknown_linux_gnu=$AR_aarch64_unknown_linux_gnu
export PKG_CONFIG_ALLOW_CROSS=1
export HEADROOM_QEMU_PREFIX=$HEADROOM_QEMU_PREFIX
export HEADROOM_TEST_RUNNER=$HEADROOM_TEST_RUNNER
export QEMU_CPU=$QEMU_CPU
# then: $CARGO_BIN build --target $TARGET --workspace --no-default-features
EOF
}

[[ "${BASH_SOURCE[0]}" == "$0" ]] || return 0   # sourced: functions only

case "${1:-}" in
  setup) shift; cmd_setup "$@" ;;
  build) shift; cmd_build "$@" ;;
  test) shift; cmd_test "$@" ;;
  env) shift; cmd_env "$@" ;;
  native) shift
    # shellcheck source=cross/native.sh
    source "$root/scripts/cross/native.sh"
    cmd_native "$@" ;;
  *) echo "usage: scripts/cross-build.sh setup|build|test|env [cargo args...] | native [deps|build|run|env]  (docs/CROSS.md)" >&2; exit 2 ;;
esac
