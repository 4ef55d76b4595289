#!/usr/bin/env bash
# The cross image built and proven (issue 53, docs/DOCKER.md): makes the base image from Debian's
# packages when no registry can be reached (debootstrap minbase bookworm with the official image's
# apt sources, `podman import`; cached as a tarball), builds docker/Dockerfile.cross (what `cross`
# uses, Cross.toml), and inside it, with an EMPTY cargo home (crates fetched inside, as a `cross`
# user's first build), cross-builds the pure workspace for aarch64, runs the aarch64 binary's
# --version and the pure crates' tests under the image's qemu runner.
#
# Engine: docker where a daemon answers, else podman without a daemon (runc, vfs storage, host
# network, explicit ulimits: crun and the default limits fail in this sandbox). Installs podman,
# runc and debootstrap with apt-get when root and they are missing.
# Usage: scripts/tests/docker-cross.sh
# Env:   HEADROOM_DOCKER_CACHE  the base tarball, podman's storage and the aarch64 target dir
#                               (default /var/cache/headroom/docker; empty it to start from nothing)
#        HEADROOM_DOCKER_CA_BUNDLE  the host's CA bundle, mounted over the image's (default
#                               /etc/ssl/certs/ca-certificates.crt: a TLS-inspecting proxy's CA)
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${HEADROOM_DOCKER_CACHE:-/var/cache/headroom/docker}
base=docker.io/library/debian:bookworm
image=localhost/headroom-cross:test
fail() { echo "docker-cross.sh: FAIL: $*" >&2; exit 1; }
step() { headroom_step "$*"; echo "docker-cross.sh: $* (at ${SECONDS}s)" >&2; }
mkdir -p "$cache" || fail "cannot create $cache (set HEADROOM_DOCKER_CACHE)"

# --- the engine -------------------------------------------------------------------------------
step "choosing a container engine"
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  engine=(docker) opts=(--network host)
else
  if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
      || fail "no container engine: no docker daemon answers and podman/runc are missing (apt-get install podman runc)"
    step "installing podman and runc (Debian's packages)"
    apt-get install -y -qq podman runc >/dev/null \
      || { apt-get update -qq >/dev/null && apt-get install -y -qq podman runc >/dev/null; } \
      || fail "apt-get install podman runc failed"
  fi
  # runc: crun, podman's default, fails here ("cgroups in hybrid mode not supported"); vfs: no
  # overlay mounts in the sandbox; the storage lives in the cache so the image survives the run.
  engine=(podman --root "$cache/storage" --runroot "$cache/run" --runtime runc --storage-driver vfs
    --cgroup-manager cgroupfs --events-backend none)
  opts=(--network host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
fi
echo "docker-cross.sh: engine: ${engine[0]} $("${engine[0]}" --version | head -n 1)" >&2

# --- the base image ---------------------------------------------------------------------------
tarball="$cache/debian-bookworm-minbase.tar"
if ! "${engine[@]}" image exists "$base" 2>/dev/null && ! "${engine[@]}" image inspect "$base" >/dev/null 2>&1; then
  if [ ! -s "$tarball" ]; then
    if ! command -v debootstrap >/dev/null; then
      [ "$(id -u)" = 0 ] || fail "debootstrap is missing (apt-get install debootstrap)"
      apt-get install -y -qq debootstrap >/dev/null || fail "apt-get install debootstrap failed"
    fi
    step "making $base from Debian's packages (debootstrap --variant=minbase bookworm)"
    rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
    trap 'rm -rf "$rootfs"' EXIT
    debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian > "$cache/debootstrap.log" 2>&1 \
      || fail "debootstrap failed: $(tail -n 3 "$cache/debootstrap.log")"
    # The official image's apt sources, the security suite included: without it rustc-web is 1.85
    # and `cross-build.sh setup` (rightly) refuses it.
    rm -f "$rootfs/etc/apt/sources.list"
    cat > "$rootfs/etc/apt/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"*
    tar -C "$rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball" || fail "cannot write $tarball"
    rm -rf "$rootfs"
    trap - EXIT
  fi
  step "importing $tarball as $base"
  "${engine[@]}" import "$tarball" "$base" > "$cache/import.log" 2>&1 \
    || fail "importing $tarball failed: $(tail -n 3 "$cache/import.log")"
fi

# --- the image ----------------------------------------------------------------------------------
step "building docker/Dockerfile.cross (context scripts/) as $image"
"${engine[@]}" build "${opts[@]}" -f "$root/docker/Dockerfile.cross" -t "$image" "$root/scripts" \
  > "$cache/build.log" 2>&1 || fail "the image did not build: $(tail -n 15 "$cache/build.log")"
echo "docker-cross.sh: image built ($(grep -c '^STEP' "$cache/build.log") steps; log $cache/build.log)" >&2

# --- inside: build, run, test --------------------------------------------------------------------
# The clone read-only at /src; the aarch64 target dir cached; CARGO_HOME empty each time. The
# host's CA bundle replaces the image's (which ca-certificates provides since this test first ran:
# without it cargo failed with "[77] Problem with the SSL CA cert"): a host behind a TLS-inspecting
# proxy (this machine's registries are reached through one) trusts its CA, the image cannot.
mkdir -p "$cache/target-aarch64"
ca_bundle=${HEADROOM_DOCKER_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
ca_mount=()
[ ! -s "$ca_bundle" ] || ca_mount=(-v "$ca_bundle:/etc/ssl/certs/ca-certificates.crt:ro")
inside() {
  "${engine[@]}" run --rm "${opts[@]}" -v "$root:/src:ro" -v "$cache/target-aarch64:/target" "${ca_mount[@]}" \
    -e CARGO_TARGET_DIR=/target -e CARGO_HOME=/tmp/cargo-home -w /src "$image" bash -c "$1"
}
step "inside: cargo build --workspace --no-default-features --target aarch64-unknown-linux-gnu (empty cargo home)"
inside 'cargo build --workspace --no-default-features --target aarch64-unknown-linux-gnu --locked' \
  || fail "the aarch64 build inside the image failed (above)"
step "inside: the aarch64 binary's --version under the image's qemu runner"
version=$(inside '$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER /target/aarch64-unknown-linux-gnu/debug/headroom --version') \
  || fail "the aarch64 headroom did not run under qemu"
echo "docker-cross.sh: $version" >&2
grep -q '^headroom ' <<<"$version" || fail "--version printed '$version'"
file=$(inside 'od -An -tx1 -j18 -N2 /target/aarch64-unknown-linux-gnu/debug/headroom | tr -d " "')
[ "$file" = b700 ] || fail "the binary is not aarch64 (ELF machine $file, expected b700)"
step "inside: the pure crates' tests under qemu (headroom-core, -onnx, -plan, -trt)"
inside 'cargo test --no-default-features --target aarch64-unknown-linux-gnu --locked -p headroom-core -p headroom-onnx -p headroom-plan -p headroom-trt' \
  > "$cache/test.log" 2>&1 || { tail -n 40 "$cache/test.log" >&2; fail "the pure crates' tests failed under qemu (log: $cache/test.log)"; }
results=$(grep -E '^test result:' "$cache/test.log" || true)
[ -n "$results" ] || fail "no test ran (log: $cache/test.log)"
passed=$(awk '{ for (i = 1; i < NF; i++) if ($(i + 1) == "passed;") n += $i } END { print n + 0 }' <<<"$results")
[ "$passed" -gt 0 ] || fail "no test passed (log: $cache/test.log)"
echo "docker-cross.sh: $passed tests passed under qemu inside the image" >&2
# --- Dockerfile.jetson: what can be checked without NVIDIA's L4T base ----------------------------
# Its base (nvcr.io/nvidia/l4t-jetpack) cannot be had here. Given the Debian base instead, the
# engine must parse the whole file, start its first stage and stop at the stage's own guard (not
# Ubuntu 22.04) - not at a syntax error; every --build-arg DOCKER.md names must be one of its ARGs;
# the script its build stage runs must be the tested one.
step "Dockerfile.jetson: parsed and its first stage's guard reached with a non-Ubuntu base"
if "${engine[@]}" build "${opts[@]}" --build-arg "L4T_BASE=$base" -f "$root/docker/Dockerfile.jetson" \
  -t localhost/headroom-jetson:parse "$root" > "$cache/jetson.log" 2>&1; then
  fail "Dockerfile.jetson built on a Debian base: its Ubuntu 22.04 guard did not stop it"
fi
grep -q 'Dockerfile.jetson is for JetPack 6 (Ubuntu 22.04)' "$cache/jetson.log" \
  || fail "Dockerfile.jetson did not reach its first stage's guard: $(tail -n 5 "$cache/jetson.log")"
args=$(sed -n 's/^ARG \([A-Z_0-9]*\).*/\1/p' "$root/docker/Dockerfile.jetson" | sort -u)
for documented in $(grep -o -- '--build-arg [A-Z_0-9]*' "$root/docs/DOCKER.md" | awk '{print $2}' | sort -u); do
  grep -qx "$documented" <<<"$args" || fail "docs/DOCKER.md names --build-arg $documented, which Dockerfile.jetson does not declare"
done
grep -q 'scripts/jetson-bundle.sh' "$root/docker/Dockerfile.jetson" && [ -x "$root/scripts/jetson-bundle.sh" ] \
  || fail "Dockerfile.jetson's build stage must run scripts/jetson-bundle.sh (the tested route)"
# Images a changed Dockerfile left untagged (2.5 GB each with vfs) and the Jetson check's partial
# build: gone, so the cache does not grow run after run.
"${engine[@]}" image prune -f > /dev/null 2>&1 || true
echo "docker-cross.sh: Dockerfile.jetson parses; its first stage refused a non-Ubuntu base with its own message; its ARGs: $(tr '\n' ' ' <<<"$args")" >&2

echo "docker-cross.sh: PASS in ${SECONDS}s: the cross image builds, cross-builds headroom for aarch64 with an empty cargo home, and runs it and the pure crates' tests under qemu"
