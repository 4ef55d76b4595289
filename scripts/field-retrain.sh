#!/usr/bin/env bash
# Kept for existing timers: the field loop is `headroom field run` (docs/FIELD.md). This wrapper maps
# the old flags (--deployed → --model, --replay → --old, --rollback → `headroom field rollback`) and
# runs the binary: HEADROOM_BIN, else `headroom` on PATH, else this checkout's debug build.
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${HEADROOM_BIN:-$(command -v headroom || echo "${CARGO_TARGET_DIR:-$root/target}/debug/headroom")}
[ -f "$root/.deps/env.sh" ] && [ -z "${HEADROOM_BIN:-}" ] && . "$root/.deps/env.sh"
verb=run args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --deployed) args+=(--model "$2"); shift 2 ;;
    --replay) args+=(--old "$2"); shift 2 ;;
    --rollback) verb=rollback; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
exec "$bin" field "$verb" "${args[@]}"
