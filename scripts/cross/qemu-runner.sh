#!/usr/bin/env bash
# Cargo runner for aarch64-unknown-linux-gnu binaries on an x86_64 host (set by scripts/cross-build.sh
# through CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER; also usable by hand: qemu-runner.sh ./headroom).
#
# - QEMU_CPU=cortex-a76: the qemu CPU closest to Jetson Orin's Cortex-A78AE (ARMv8.2, no SVE).
# - QEMU_LD_PREFIX points at a folder holding ONLY fake files (an ARM /proc/cpuinfo and the
#   midr_el1 registers in /sys, made by `scripts/cross-build.sh setup`). qemu looks every absolute
#   path up in that folder first and falls back to the real one, so the ELF interpreter and the
#   libraries still come from the host's arm64 multiarch glibc. Never use /usr/aarch64-linux-gnu
#   as the prefix: the cross glibc mixed with the multiarch loader makes threaded programs hang.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
prefix="${HEADROOM_QEMU_PREFIX:-$root/.deps/qemu-prefix}"
if [ ! -f "$prefix/proc/cpuinfo" ]; then
  echo "qemu-runner: error: $prefix/proc/cpuinfo is missing: run scripts/cross-build.sh setup" >&2
  exit 127
fi
export QEMU_CPU="${QEMU_CPU:-cortex-a76}"
export QEMU_LD_PREFIX="$prefix"
exec qemu-aarch64-static "$@"
