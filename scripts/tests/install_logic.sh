#!/usr/bin/env bash
# Tests of the install logic of scripts/cross-build.sh (setup) and scripts/setup.sh that need no
# fresh machine, no network and no root: the REAL scripts run with a folder of stub commands first
# on PATH (dpkg, dpkg-query, apt-cache, apt-get, sudo, id, uname, python3, pip). The stubs answer
# from a per-scenario state folder (what is installed, what apt offers before and after an update,
# whether the mirror or PyPI can be reached) and log every call, so each scenario checks what the
# script decided to run, what it printed and how it exited. Nothing real is installed, updated or
# downloaded: every command that could touch the system is a stub (the only real-world effect is
# setup.sh's `mkdir -p .deps` in the checkout, which is git-ignored).
#
# cross-build.sh's setup_packages is run by sourcing the script (sourced, it only defines its
# functions) with APT_LISTS pointed at a temporary folder; `cross-build.sh build` and setup.sh run
# as they are. scripts/gpu-check.sh runs under `env -i` with a stub nvidia-smi that answers as a
# Jetson Orin's and a stub headroom (HEADROOM_GPU_BIN): its preflight, the Tegra memory and the
# table, in about 2 s, with nothing built or downloaded. Plain bash and coreutils (and python3,
# which gpu-check parses JSON with); run by scripts/test.sh.
#
# Usage: scripts/tests/install_logic.sh   prints `ok - ...` / `FAIL - ...` per scenario, then
#        `N passed, M failed`; exits 1 if any failed. HEADROOM_TEST_KEEP=1 keeps the temp folder.
# shellcheck disable=SC2001  # sed indents multi-line text
set -uo pipefail   # not -e: the scenarios fail on purpose; every status is checked explicitly

scripts=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# None of the caller's settings may reach the scripts (CI sets HEADROOM_DEPS): a stub pip must
# never write its fake wheels into a real wheel cache.
unset HEADROOM_DEPS HEADROOM_WHEEL_CACHE HEADROOM_QEMU_PREFIX HEADROOM_QEMU_CPUS HEADROOM_MIN_RUST \
  HEADROOM_STEP CROSS_CARGO CARGO_TARGET_DIR
tmp=$(mktemp -d "${TMPDIR:-/tmp}/install-logic.XXXXXX") || { echo "cannot create a temp folder" >&2; exit 1; }
if [ "${HEADROOM_TEST_KEEP:-0}" = 1 ]; then echo "keeping $tmp" >&2; else trap 'rm -rf "$tmp"' EXIT; fi
stubs="$tmp/stubs"
mkdir -p "$stubs"

# ------------------------------------------------------------------------------------------
# stubs: each logs "NAME ARGS" to $STUB_STATE/calls.log and answers from $STUB_STATE
# ------------------------------------------------------------------------------------------
stub() { cat > "$stubs/$1"; chmod +x "$stubs/$1"; }

stub dpkg-query <<'EOF'
#!/usr/bin/env bash
echo "dpkg-query $*" >> "$STUB_STATE/calls.log"
pkg=${!#}
if [ -f "$STUB_STATE/installed/$pkg" ]; then
  echo "install ok installed $(cat "$STUB_STATE/installed/$pkg")"
  exit 0
fi
echo "dpkg-query: no packages found matching $pkg" >&2
exit 1
EOF

stub dpkg <<'EOF'
#!/usr/bin/env bash
echo "dpkg $*" >> "$STUB_STATE/calls.log"
case "$*" in
  --print-foreign-architectures) cat "$STUB_STATE/foreign-architectures" 2>/dev/null; exit 0 ;;
  "--add-architecture arm64") echo arm64 >> "$STUB_STATE/foreign-architectures"; exit 0 ;;
  *) echo "stub dpkg: unexpected arguments: $*" >&2; exit 99 ;;
esac
EOF

# apt-cache policy PKG: Candidate from candidate/PKG, or candidate-after/PKG once `apt-get update`
# has run (when that folder exists); a package apt does not know gives no output, like apt.
stub apt-cache <<'EOF'
#!/usr/bin/env bash
echo "apt-cache $*" >> "$STUB_STATE/calls.log"
[ "${1:-}" = policy ] && [ $# = 2 ] || { echo "stub apt-cache: unexpected arguments: $*" >&2; exit 99; }
pkg=$2 dir=candidate
[ -f "$STUB_STATE/updated" ] && [ -d "$STUB_STATE/candidate-after" ] && dir=candidate-after
if [ -f "$STUB_STATE/$dir/$pkg" ]; then
  installed=$(cat "$STUB_STATE/installed/$pkg" 2>/dev/null || echo "(none)")
  printf '%s:\n  Installed: %s\n  Candidate: %s\n  Version table:\n' "$pkg" "$installed" "$(cat "$STUB_STATE/$dir/$pkg")"
else
  echo "N: Unable to locate package $pkg" >&2
fi
exit 0
EOF

# apt-get update: like apt 2.6, an unreachable mirror is only a warning (exit 0) unless
# APT::Update::Error-Mode=any is set. apt-get install: logs DEBIAN_FRONTEND too.
stub apt-get <<'EOF'
#!/usr/bin/env bash
cmd="" error_any=0 args=("$@")
while [ $# -gt 0 ]; do
  case "$1" in
    -o) [ "${2:-}" = APT::Update::Error-Mode=any ] && error_any=1; shift 2 ;;
    -*) shift ;;
    *) cmd=$1; break ;;
  esac
done
case "$cmd" in
  update)
    echo "apt-get ${args[*]}" >> "$STUB_STATE/calls.log"
    if [ -f "$STUB_STATE/mirror-unreachable" ]; then
      echo "Err:1 http://deb.debian.org/debian bookworm InRelease"
      echo "  Temporary failure resolving 'deb.debian.org'"
      if [ $error_any = 1 ]; then
        echo "E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'" >&2
        exit 100
      fi
      echo "W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'" >&2
      echo "W: Some index files failed to download. They have been ignored, or old ones used instead." >&2
      exit 0
    fi
    touch "$STUB_STATE/updated"
    exit 0 ;;
  install)
    echo "apt-get ${args[*]} (DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-unset})" >> "$STUB_STATE/calls.log"
    exit 0 ;;
  *) echo "apt-get ${args[*]}" >> "$STUB_STATE/calls.log"; echo "stub apt-get: unexpected command: ${args[*]}" >&2; exit 99 ;;
esac
EOF

# sudo: like the real one with env_reset, it does not pass DEBIAN_FRONTEND on.
stub sudo <<'EOF'
#!/usr/bin/env bash
echo "sudo $*" >> "$STUB_STATE/calls.log"
exec env -u DEBIAN_FRONTEND "$@"
EOF

stub id <<'EOF'
#!/usr/bin/env bash
[ "$*" = -u ] || { echo "stub id: unexpected arguments: $*" >&2; exit 99; }
cat "$STUB_STATE/uid" 2>/dev/null || echo 0
EOF

stub uname <<'EOF'
#!/usr/bin/env bash
[ "$*" = -m ] || { echo "stub uname: unexpected arguments: $*" >&2; exit 99; }
cat "$STUB_STATE/arch" 2>/dev/null || echo x86_64
EOF

# python3 -m pip --version: works. python3 -m pip download ... -d DIR NAME==VERSION: fails like pip
# without network when pypi-unreachable exists, else writes an empty NAME-VERSION-cp311-...whl.
# python3 - (setup.sh's wheel extraction): reads the program, extracts nothing, exits 0.
stub python3 <<'EOF'
#!/usr/bin/env bash
echo "python3 $*" >> "$STUB_STATE/calls.log"
if [ "$*" = "-m pip --version" ]; then echo "pip 23.0.1 from /usr/lib/python3/dist-packages/pip (python 3.11)"; exit 0; fi
if [ "${1:-}" = - ]; then cat > /dev/null; exit 0; fi
if [ "${1:-} ${2:-} ${3:-}" = "-m pip download" ]; then
  dest="" spec=${!#}
  while [ $# -gt 0 ]; do [ "$1" = -d ] && dest=$2; shift; done
  [ -n "$dest" ] && [ -d "$dest" ] || { echo "stub python3: pip download without an existing -d DIR" >&2; exit 99; }
  if [ -f "$STUB_STATE/pypi-unreachable" ]; then
    echo "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError': /simple/${spec%%==*}/" >&2
    echo "ERROR: Could not find a version that satisfies the requirement $spec (from versions: none)" >&2
    echo "ERROR: No matching distribution found for $spec" >&2
    exit 1
  fi
  name=${spec%%==*} version=${spec#*==}
  : > "$dest/${name//-/_}-$version-cp311-cp311-manylinux_2_28_x86_64.whl"
  exit 0
fi
echo "stub python3: unexpected arguments: $*" >&2
exit 99
EOF

for guard in pip pip3 apt aptitude; do
  stub "$guard" <<'EOF'
#!/usr/bin/env bash
echo "${0##*/} $*" >> "$STUB_STATE/calls.log"
echo "stub ${0##*/}: the scripts must not call this here" >&2
exit 99
EOF
done

# ------------------------------------------------------------------------------------------
# scenario helpers
# ------------------------------------------------------------------------------------------
PACKAGES=(rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu g++-aarch64-linux-gnu
          libc6-dev-arm64-cross qemu-user-static)
NEW=1.96.0+dfsg1-1~deb12u2    # what Debian 12 offers today (docs/CROSS.md)
OLD=1.85.0+dfsg1-1~deb12u1    # older than the workspace's rust-version (HEADROOM_MIN_RUST below)
OTHER_VERSION=12.2.0-14       # any version for the packages whose version setup does not compare
UPDATE="apt-get -o APT::Update::Error-Mode=any update -q"
INSTALL="apt-get install -y -q --no-install-recommends"

passed=0 failed=0 n=0
state="" out="" rc=0 problems=()

# new_state: a fresh state folder for the next scenario (nothing installed, nothing known).
new_state() {
  n=$((n + 1))
  state="$tmp/scenario-$n"
  mkdir -p "$state/installed" "$state/candidate" "$state/lists"
  : > "$state/calls.log"
  problems=()
}
# installed PKG VERSION / candidate PKG VERSION / candidate_after_update PKG VERSION
installed() { echo "$2" > "$state/installed/$1"; }
candidate() { echo "$2" > "$state/candidate/$1"; }
candidate_after_update() { mkdir -p "$state/candidate-after"; echo "$2" > "$state/candidate-after/$1"; }
version_of() { case "$1" in rustc-web|cargo-web|libstd-rust-web-dev:arm64) echo "$NEW" ;; *) echo "$OTHER_VERSION" ;; esac; }
all_installed() { local p; for p in "${PACKAGES[@]}"; do installed "$p" "$(version_of "$p")"; done; }
all_candidates() { local p; for p in "${PACKAGES[@]}"; do candidate "$p" "$(version_of "$p")"; done; }
arm64_ready() { echo arm64 > "$state/foreign-architectures"; : > "$state/lists/deb.debian.org_debian_dists_bookworm_main_binary-arm64_Packages.lz4"; }

# run CMD...: runs CMD with the stubs first on PATH; sets out (stdout+stderr) and rc.
run() {
  out=$(PATH="$stubs:$PATH" STUB_STATE="$state" HEADROOM_MIN_RUST=1.92 CARGO_TARGET_DIR="$state/target" \
    HEADROOM_DEPS="$state/deps" HEADROOM_WHEEL_CACHE="$state/wheels" HEADROOM_QEMU_PREFIX="$state/qemu-prefix" \
    "$@" 2>&1)
  rc=$?
}
# run_setup_packages: the decision logic of `scripts/cross-build.sh setup`, from the real script.
run_setup_packages() {
  # shellcheck disable=SC2016  # expanded by the inner bash
  run bash -c 'source "$1"; APT_LISTS=$2; setup_packages' install-logic "$scripts/cross-build.sh" "$state/lists"
}

# What the script did to the system: the calls that change something (probes left out).
actions() { grep -E '^(apt-get|sudo|dpkg --add-architecture|python3 -m pip download|pip|pip3|apt|aptitude) ' "$state/calls.log" || true; }

expect_rc() {   # 0 or nonzero
  if [ "$1" = 0 ] && [ "$rc" != 0 ]; then problems+=("expected exit status 0, got $rc"); fi
  if [ "$1" = nonzero ] && [ "$rc" = 0 ]; then problems+=("expected a non-zero exit status, got 0"); fi
}
expect_actions() {   # the exact list of actions, one per line ("" for none)
  local want got
  want=$(printf '%s\n' "$@" | sed '/^$/d')
  got=$(actions)
  [ "$want" = "$got" ] || problems+=("expected these calls:
$(sed 's/^/      /' <<< "${want:-(none)}")
    got:
$(sed 's/^/      /' <<< "${got:-(none)}")")
}
expect_line() { grep -qxF -- "$1" <<< "$out" || problems+=("expected this line in the output: $1"); }
expect_output() { grep -qE -- "$1" <<< "$out" || problems+=("expected the output to match: $1"); }
expect_no_output() { ! grep -qE -- "$1" <<< "$out" || problems+=("expected the output NOT to match: $1"); }

report() {   # NAME
  if [ ${#problems[@]} -eq 0 ]; then
    passed=$((passed + 1)); echo "ok - $1"
  else
    failed=$((failed + 1)); echo "FAIL - $1"
    local p
    for p in "${problems[@]}"; do echo "    $p"; done
    echo "    exit status $rc; printed:"
    sed 's/^/      | /' <<< "$out"
  fi
}

# ------------------------------------------------------------------------------------------
# scripts/cross-build.sh setup: setup_packages
# ------------------------------------------------------------------------------------------

# The bug of the issue: dpkg-query exits 1 for every package, and setup ended silently.
new_state
candidate rustc-web "$NEW"; candidate cargo-web "$NEW"   # amd64 lists only: no arm64 candidates yet
for p in "${PACKAGES[@]}"; do candidate_after_update "$p" "$(version_of "$p")"; done
run_setup_packages
expect_rc 0
expect_actions "dpkg --add-architecture arm64" "$UPDATE" \
  "$INSTALL ${PACKAGES[*]} (DEBIAN_FRONTEND=noninteractive)"
expect_line "cross-build: installing ${PACKAGES[*]} (about 1.5 GB)"
report "cross-build setup, nothing installed (fresh machine): adds arm64, updates, installs the 7 packages"

new_state
all_installed; all_candidates; arm64_ready
run_setup_packages
expect_rc 0
expect_actions ""
expect_line "cross-build: packages already installed: ${PACKAGES[*]}"
report "cross-build setup, everything installed and matching: no apt-get, no dpkg call"

new_state
all_installed; all_candidates; arm64_ready
for p in rustc-web cargo-web libstd-rust-web-dev:arm64; do installed "$p" "$OLD"; candidate "$p" "$OLD"; candidate_after_update "$p" "$NEW"; done
run_setup_packages
expect_rc 0
expect_actions "$UPDATE" "$INSTALL rustc-web cargo-web libstd-rust-web-dev:arm64 (DEBIAN_FRONTEND=noninteractive)"
expect_line "cross-build: installed rustc-web $OLD / libstd-rust-web-dev:arm64 $OLD (need equal and >= 1.92): upgrading"
report "cross-build setup, old rustc-web ($OLD < 1.92): apt-get update, then upgrade of the 3 Rust packages"

new_state
all_installed; all_candidates; arm64_ready
installed libstd-rust-web-dev:arm64 1.96.0+dfsg1-1~deb12u1
run_setup_packages
expect_rc 0
expect_actions "$UPDATE" "$INSTALL rustc-web cargo-web libstd-rust-web-dev:arm64 (DEBIAN_FRONTEND=noninteractive)"
expect_line "cross-build: installed rustc-web $NEW / libstd-rust-web-dev:arm64 1.96.0+dfsg1-1~deb12u1 (need equal and >= 1.92): upgrading"
report "cross-build setup, rustc-web and libstd-rust-web-dev:arm64 differ: upgrade of the 3 Rust packages"

new_state
all_installed; all_candidates; arm64_ready
rm "$state/installed/libstd-rust-web-dev:arm64"; installed rustc-web "$OLD"; installed cargo-web "$OLD"
run_setup_packages
expect_rc 0
expect_actions "$UPDATE" "$INSTALL libstd-rust-web-dev:arm64 rustc-web cargo-web (DEBIAN_FRONTEND=noninteractive)"
report "cross-build setup, old rustc-web and no arm64 std: each package installed once"

new_state
all_installed; all_candidates; arm64_ready
rm "$state/installed/qemu-user-static"
echo 1000 > "$state/uid"
run_setup_packages
expect_rc 0
expect_actions "sudo env DEBIAN_FRONTEND=noninteractive $INSTALL qemu-user-static" \
  "$INSTALL qemu-user-static (DEBIAN_FRONTEND=noninteractive)"
report "cross-build setup, one package missing, not root: sudo apt-get install of just that one, no update"

new_state
arm64_ready; rm "$state/lists/"*
all_candidates; touch "$state/mirror-unreachable"
run_setup_packages
expect_rc nonzero
expect_actions "$UPDATE"
expect_output "^cross-build: error: apt-get update failed: is the Debian mirror reachable\?"
expect_output "Temporary failure resolving 'deb.debian.org'"
report "cross-build setup, mirror unreachable: apt-get update fails, says so, exits non-zero, installs nothing"

new_state
arm64_ready; candidate_after_update gcc-aarch64-linux-gnu "$OTHER_VERSION"   # no rustc-web anywhere (Debian 11)
run_setup_packages
expect_rc nonzero
expect_actions "$UPDATE"
expect_output "^cross-build: error: apt knows no package rustc-web: this route needs Debian 12"
report "cross-build setup, apt has no rustc-web even after an update: names the package, exits non-zero"

new_state
echo aarch64 > "$state/arch"
run_setup_packages
expect_rc nonzero
expect_actions ""
expect_output "^cross-build: error: this route cross-builds from x86_64; on aarch64 build natively"
report "cross-build setup on aarch64: refuses with a message, touches nothing"

# The real command, unchanged: a build before setup must say so (it used to exit 1 silently).
new_state
run bash "$scripts/cross-build.sh" build
expect_rc nonzero
expect_actions ""
expect_line "cross-build: error: rustc-web is not installed: run scripts/cross-build.sh setup"
report "cross-build.sh build before setup: says rustc-web is not installed, exits non-zero"

# ------------------------------------------------------------------------------------------
# scripts/setup.sh (run sets a temp HEADROOM_DEPS and HEADROOM_WHEEL_CACHE: nothing real is replaced)
# ------------------------------------------------------------------------------------------
new_state
touch "$state/pypi-unreachable"
run bash "$scripts/setup.sh"
expect_rc nonzero
expect_line "setup: downloading torch==2.13.0 from PyPI"
expect_line "ERROR: No matching distribution found for torch==2.13.0"
expect_line "setup: error: pip could not download torch==2.13.0 (is PyPI reachable?)"
expect_no_output "error at line"   # one report, not a second one from the ERR trap
[ "$(actions | wc -l)" = 1 ] || problems+=("expected exactly one pip download, got: $(actions)")
report "setup.sh, PyPI unreachable: names the wheel pip could not download, exits non-zero"

# An unexpected failure: the wheels "download" and "unpack" but hold no torch/version.py, so
# `got=$(sed ... version.py)` fails. The ERR trap must name the script, the line and the step.
new_state
run bash "$scripts/setup.sh"
# shellcheck disable=SC2016  # a literal $( to find
line=$(grep -n 'got=$(sed' "$scripts/setup.sh" | cut -d: -f1)
expect_rc nonzero
expect_output "^setup\.sh: error at line $line \(step: unpacking libtorch 2\.13\.0 \(CPU libraries only\)\): \`got=\\\$\(sed .*\` exited with status 2$"
report "ERR trap: an unexpected failure in setup.sh prints script, line ($line), step and command"

# ------------------------------------------------------------------------------------------
# scripts/gpu-check.sh on a Jetson (issue 33): an empty environment (`env -i`, as under systemd)
# and a stub nvidia-smi that answers as an Orin's does (jetson-containers issue 1403,
# anduril/jetpack-nixos pull request 371): `GPU 0: Orin (nvgpu)`, memory `[N/A]`. headroom is a stub
# (HEADROOM_GPU_BIN, as in an unpacked bundle): nothing is installed, built or downloaded.
# ------------------------------------------------------------------------------------------
gpu_stubs="$tmp/gpu-stubs"
mkdir -p "$gpu_stubs" "$tmp/none"
gpu_stub() { cat > "$gpu_stubs/$1"; chmod +x "$gpu_stubs/$1"; }

# nvidia-smi: driver_version and compute_cap from $STUB_STATE/driver and compute when they exist.
gpu_stub nvidia-smi <<'EOF'
#!/usr/bin/env bash
echo "nvidia-smi $*" >> "$STUB_STATE/calls.log"
[ "$*" = -L ] && { echo "GPU 0: Orin (nvgpu)"; exit 0; }
for a in "$@"; do
  case "$a" in
    --query-gpu=name) echo "Orin (nvgpu)" ;;
    --query-gpu=driver_version) cat "$STUB_STATE/driver" 2>/dev/null || echo 540.4.0 ;;
    --query-gpu=compute_cap) cat "$STUB_STATE/compute" 2>/dev/null || echo 8.7 ;;
    --query-gpu=*) echo "[N/A]" ;;
  esac
done
exit 0
EOF

# headroom as a bundle's binary on a board where libtorch sees no CUDA device: synth writes a
# data.yaml, doctor reports `CUDA not available` (and exits 0, as the real one does), label and
# export fail; train fails too, or with $STUB_STATE/train-passes writes a run whose planner
# estimate is 800 MiB after 0.6 s; plan answers with the board it was given.
gpu_stub headroom <<'EOF'
#!/usr/bin/env bash
echo "headroom $*" >> "$STUB_STATE/calls.log"
arg() { local want=$1; shift; while [ $# -gt 1 ]; do [ "$1" = "$want" ] && { echo "$2"; return; }; shift; done; }
case "${1:-}" in
  -V|--version) echo "headroom 0.0.0-stub" ;;
  synth) d=$(arg --out "$@"); mkdir -p "$d/images/train" "$d/images/val"; echo "path: $d" > "$d/data.yaml" ;;
  doctor)
    if [ -f "$STUB_STATE/gpu-ok" ]; then cat <<'JSON'
{
  "headroom": "0.0.0-stub",
  "onnxruntime": { "ok": true, "detail": "ONNX Runtime 1.32.0 from /opt/headroom/lib/libonnxruntime.so.1.32.0 (providers: Azure, CPU) — ran the model", "library": null, "version": "1.32.0" },
  "libtorch": { "ok": true, "detail": "libtorch 2.12.0 (built against 2.12.0) (6 threads, CUDA available): conv + Adam loss 1.0 -> 0.5", "library": null, "version": "2.12.0" },
  "cuda": { "ok": true, "detail": "libtorch_cuda.so from /opt/headroom/lib/libtorch_cuda.so; 1 CUDA device(s)", "library": null, "version": null },
  "gpu_code": { "ok": true, "detail": "SASS sm_87; Orin (sm_87): native code (SASS sm_87)", "library": null, "version": null },
  "gpu": { "ok": true, "detail": "ok conv: forward and backward", "library": null, "version": null }
}
JSON
      exit 0
    fi
    cat <<'JSON'
{
  "headroom": "0.0.0-stub",
  "onnxruntime": { "ok": true, "detail": "ONNX Runtime 1.20.1: ran the model", "library": null, "version": "1.20.1" },
  "libtorch": { "ok": true, "detail": "libtorch 2.5.1 (built against 2.5.1) (6 threads, CUDA not available): conv + Adam loss 1.0 -> 0.5", "library": null, "version": "2.5.1" },
  "cuda": { "ok": true, "detail": "libtorch_cuda.so from /usr/lib/libtorch_cuda.so; no CUDA device visible", "library": null, "version": null }
}
JSON
  ;;
  train)
    [ -f "$STUB_STATE/train-passes" ] || { echo "error: --device cuda:0: this libtorch sees no CUDA device" >&2; exit 2; }
    sleep 0.6
    d="$(arg --project "$@")/$(arg --name "$@")"; mkdir -p "$d"
    echo "amp = true" > "$d/config.toml"
    echo '{"best_fitness": 0.5, "planner": {"estimate_mb": 800}}' > "$d/results.json" ;;
  plan)
    [ "${2:-}" = --help ] && { echo "Usage: headroom plan [OPTIONS] --model <MODEL>"; exit 0; }
    printf '{"board": {"name": "%s"}, "plan": {"candidates": [{"rung": "head"}], "chosen": 0}}\n' "$(arg --board "$@")" ;;
  label)
    [ -f "$STUB_STATE/gpu-ok" ] || { echo "error: stub headroom: no label here" >&2; exit 2; }
    printf '{"provider": "%s", "runtime": "x", "counts": {"labelled": 32, "boxes": 40}}\n' "$(arg --ep "$@")" ;;
  *) echo "error: stub headroom: no $1 here" >&2; exit 2 ;;
esac
EOF

gpu_stub trtexec <<'EOF'
#!/usr/bin/env bash
echo "trtexec $*" >> "$STUB_STATE/calls.log"
exit 1
EOF

# tegrastats (in the second scenario only): 2000 MiB in use at first, 2600 MiB from then on; it
# ends by itself after 20 s, should gpu-check fail to stop it.
mkdir -p "$tmp/tegrastats"
cat > "$tmp/tegrastats/tegrastats" <<'EOF'
#!/usr/bin/env bash
echo "tegrastats $*" >> "$STUB_STATE/calls.log"
echo "12-01-2026 10:00:00 RAM 2000/7620MB (lfb 4x4MB) SWAP 0/3810MB (cached 0MB) CPU [1%@729,off] GR3D_FREQ 0%"
for _ in $(seq 200); do
  sleep 0.1
  echo "12-01-2026 10:00:01 RAM 2600/7620MB (lfb 4x4MB) SWAP 0/3810MB (cached 0MB) CPU [90%@1510,off] GR3D_FREQ 99%"
done
EOF
chmod +x "$tmp/tegrastats/tegrastats"

# python3 (in the third scenario only): nothing there may need it; a pip call would be a download.
mkdir -p "$tmp/no-python"
cat > "$tmp/no-python/python3" <<'EOF'
#!/usr/bin/env bash
echo "python3 $*" >> "$STUB_STATE/calls.log"
exit 99
EOF
chmod +x "$tmp/no-python/python3"

# The real python3 (gpu-check parses JSON with it) where /usr/bin has none (a pyenv, say).
if [ ! -x /usr/bin/python3 ] && [ ! -x /bin/python3 ] && command -v python3 >/dev/null; then
  ln -s "$(python3 -c 'import sys; print(sys.executable)')" "$gpu_stubs/python3"
fi

# run_gpu_check EXTRA_STUBS VAR=VALUE...: scripts/gpu-check.sh under `env -i` with these variables
# only, a 60 s budget for its checks and a 60 s limit on the whole run; sets out and rc.
run_gpu_check() {
  local extra=$1; shift
  mkdir -p "$state/home"
  out=$(env -i PATH="$extra:$gpu_stubs:/usr/bin:/bin" HOME="$state/home" STUB_STATE="$state" \
    HEADROOM_GPU_CHECK_OUT="$state/out" HEADROOM_GPU_DEPS="$state/deps" HEADROOM_GPU_CHECK_BUDGET_S=60 \
    "$@" timeout -k 5 60 bash "$scripts/gpu-check.sh" 2>&1)
  rc=$?
}
# What no run may print: a bash error, or the ERR trap's report of one.
expect_no_bash_error() {
  expect_no_output 'unbound variable|integer expression expected|syntax error|command not found|bad substitution|gpu-check\.sh: error at line|gpu-check\.sh: line [0-9]+:'
}
expect_table() {
  expect_output '^check +result +seconds +note$'
  [ -s "$state/out/results.txt" ] || problems+=("expected $state/out/results.txt")
}
mem_total_mib=$(( $(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) / 1024 ))

new_state
t0=$(date +%s.%N)
run_gpu_check "$tmp/none" HEADROOM_GPU_BIN="$gpu_stubs/headroom" TRTEXEC="$gpu_stubs/trtexec"
gpu_check_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
[ "$rc" = 1 ] || problems+=("expected exit status 1 (a check failed), got $rc")
expect_no_bash_error
expect_output "^gpu-check: GPU 0: Orin \(nvgpu\), $mem_total_mib MiB shared by CPU and GPU \(MemTotal, /proc/meminfo\), compute 8\.7, driver 540\.4\.0$"
expect_table
expect_output '^doctor +FAIL .*CUDA not available'
expect_output '^train cuda --amp +FAIL .*no CUDA device'
expect_output '^plan +PASS .*--board (auto|orin-[a-z]+-[0-9]+)'
expect_no_output 'gpu-8'
expect_output '^export --engine +FAIL'   # reached: TRTEXEC given, LD_LIBRARY_PATH unset
! grep -q -- '--query-gpu=memory.used' "$state/calls.log" || problems+=("nvidia-smi was sampled for memory.used on a Tegra")
report "gpu-check.sh on an Orin (nvgpu, memory [N/A]) under env -i: MemTotal, an Orin board for plan, the table, exit 1 (${gpu_check_s} s)"

new_state
echo "[N/A]" > "$state/driver"; echo "[N/A]" > "$state/compute"; touch "$state/train-passes"
run_gpu_check "$tmp/tegrastats" HEADROOM_GPU_BIN="$gpu_stubs/headroom"
[ "$rc" = 1 ] || problems+=("expected exit status 1 (doctor failed), got $rc")
expect_no_bash_error
expect_output "^gpu-check: GPU 0: Orin \(nvgpu\), $mem_total_mib MiB shared .*, compute unknown, driver unknown$"
expect_table
expect_output '^train cuda --amp +PASS .*memory \+600 MiB at peak'
expect_output '^plan vs GPU peak +PASS .*estimate 800 MiB >= measured 600 MiB.*tegrastats'
grep -q '^tegrastats ' "$state/calls.log" || problems+=("tegrastats was not run")
report "gpu-check.sh on an Orin with tegrastats, driver and compute [N/A]: the peak from tegrastats' RAM, 'unknown', exit 1"

new_state
run_gpu_check "$tmp/no-python"
[ "$rc" = 2 ] || problems+=("expected exit status 2 (could not run), got $rc")
expect_no_bash_error
expect_output '^gpu-check: error: .*Jetson.*HEADROOM_GPU_LIBS=python'
expect_no_output 'older than'
! grep -qE '^(python3|cargo) ' "$state/calls.log" || problems+=("it went on after the preflight: $(grep -E '^(python3|cargo) ' "$state/calls.log")")
report "gpu-check.sh in a clone on an Orin: refuses PyPI's CUDA 13 install at once (no 'driver older than 580'), exit 2"

# A Jetson without nvidia-smi (JetPack 6 has none), known by its device tree, whose bundle's ONNX
# Runtime is CPU-only (providers: Azure, CPU) while libtorch has CUDA: the preflight goes on, the
# CUDA and TensorRT provider checks are SKIP with the reason, every other check passes: exit 0.
mkdir -p "$tmp/nosmi/bin" "$tmp/jetson-root/proc/device-tree"
ln -sf "$gpu_stubs/headroom" "$tmp/nosmi/bin/headroom"
[ ! -e "$gpu_stubs/python3" ] || ln -sf "$gpu_stubs/python3" "$tmp/nosmi/bin/python3"
printf 'NVIDIA Jetson Orin Nano Developer Kit\0' > "$tmp/jetson-root/proc/device-tree/model"
new_state
touch "$state/gpu-ok" "$state/train-passes"
mkdir -p "$state/home"
out=$(env -i PATH="$tmp/tegrastats:$tmp/nosmi/bin:/usr/bin:/bin" HOME="$state/home" STUB_STATE="$state" \
  HEADROOM_GPU_CHECK_OUT="$state/out" HEADROOM_GPU_DEPS="$state/deps" HEADROOM_GPU_CHECK_BUDGET_S=60 \
  HEADROOM_GPU_BIN="$tmp/nosmi/bin/headroom" HEADROOM_GPU_CHECK_ROOT="$tmp/jetson-root" \
  timeout -k 5 60 bash "$scripts/gpu-check.sh" 2>&1)
rc=$?
[ "$rc" = 0 ] || problems+=("expected exit status 0 (every check that can run passed), got $rc")
expect_no_bash_error
expect_output "^gpu-check: GPU 0: Jetson GPU \(no nvidia-smi; NVIDIA Jetson Orin Nano Developer Kit\), $mem_total_mib MiB shared by CPU and GPU"
expect_table
expect_output '^doctor +PASS .*gpu code: SASS sm_87.*gpu: ok conv'
expect_output '^label --ep cpu +PASS'
expect_output '^label --ep cuda +SKIP .*no CUDA provider \(providers: Azure, CPU\)'
expect_output '^label --ep tensorrt +SKIP .*no TensorRT provider'
expect_output '^label --runtime torch +PASS .*within 2 %'
expect_output '^train cuda --amp +PASS'
expect_no_output ' FAIL '
! grep -q '^nvidia-smi' "$state/calls.log" || problems+=("nvidia-smi was called without being on PATH")
report "gpu-check.sh on a Jetson without nvidia-smi (device tree), CPU-only ONNX Runtime in the bundle: provider checks SKIP, torch labels on the GPU, exit 0"

new_state
mkdir -p "$state/home" "$tmp/pc-root"
out=$(env -i PATH="$tmp/nosmi/bin:/usr/bin:/bin" HOME="$state/home" STUB_STATE="$state" \
  HEADROOM_GPU_CHECK_OUT="$state/out" HEADROOM_GPU_BIN="$tmp/nosmi/bin/headroom" HEADROOM_GPU_CHECK_ROOT="$tmp/pc-root" \
  timeout -k 5 60 bash "$scripts/gpu-check.sh" 2>&1)
rc=$?
[ "$rc" = 2 ] || problems+=("expected exit status 2 (no GPU), got $rc")
expect_output '^gpu-check: error: no NVIDIA GPU: nvidia-smi is not on PATH and this is no Jetson'
report "gpu-check.sh without nvidia-smi on a machine that is no Jetson: exit 2, saying so"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
