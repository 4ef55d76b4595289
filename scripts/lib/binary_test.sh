# shellcheck shell=bash
# The shared head of the scripts/tests/*.sh that check a built headroom binary, sourced after
# errtrap.sh by a script called as `SCRIPT [HEADROOM_BINARY]`: sets `root`, `bin` (the argument, else
# $CARGO_TARGET_DIR/debug/headroom), `deps` and `wheels` (setup.sh's wheel cache), defines `fail` and
# `step` naming the script, sources .deps/env.sh and scripts/lib/wheels.sh. Needs scripts/setup.sh
# to have run.
name=$(basename "$0")
root=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "$name: FAIL: $*" >&2; exit 1; }
step() { echo "$name: $*" >&2; }
bin=${1:-${CARGO_TARGET_DIR:-$root/target}/debug/headroom}
[ -x "$bin" ] || fail "no headroom binary at $bin (cargo build -p headroom-cli first)"
[ -f "$root/.deps/env.sh" ] || fail "no .deps/env.sh: run scripts/setup.sh first"
# shellcheck source=/dev/null
source "$root/.deps/env.sh"
deps="${HEADROOM_DEPS:-$root/.deps}"
wheels="${HEADROOM_WHEEL_CACHE:-$deps/wheels}"
mkdir -p "$wheels"
# shellcheck source=wheels.sh
source "$root/scripts/lib/wheels.sh"
