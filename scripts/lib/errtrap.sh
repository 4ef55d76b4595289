# shellcheck shell=bash
# Sourced by every script that installs or builds (bash only). Turns on errexit, errtrace, nounset
# and pipefail, and makes an unexpected failure say where it happened instead of exiting silently:
#   cross-build.sh: error at line 76 (step: adding the arm64 architecture): `rc=$(installed_version rustc-web)` exited with status 1
# A failure inside $(...) is reported twice: once where it happened, once where its value was used.
# Scripts name the step they are in with `headroom_step "..."` (their step/stage helpers do it).
# The script named is the file holding the failing line (right also when a test sources a script).
# Expected failures stay the scripts' own business: `cmd || fail "..."`, `if cmd`, `cmd || true`
# do not fire the trap, and `exit` never does.
set -Eeuo pipefail
HEADROOM_STEP="${HEADROOM_STEP:-start}"
headroom_step() { HEADROOM_STEP="$*"; }
headroom_on_err() {
  # shellcheck disable=SC2016  # the backquotes are literal
  printf '%s: error at line %s (step: %s): `%s` exited with status %s\n' \
    "$(basename "${BASH_SOURCE[1]:-$0}")" "$2" "$HEADROOM_STEP" "$3" "$1" >&2
}
trap 'headroom_on_err $? $LINENO "$BASH_COMMAND"' ERR
