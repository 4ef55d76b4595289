# shellcheck shell=bash
# headroom_target_guard DIR ROOT — sourced by scripts/test.sh and .ci/run.
# Cargo reuses a workspace crate's build made from another checkout of the same sources (it does
# not notice the move), and such a build embeds that checkout's path: tests read their fixtures
# through env!("CARGO_MANIFEST_DIR"), so a clean clone sharing a target dir with an older one would
# test against the old clone's files, or fail once it is gone. When DIR last built another
# checkout (or nothing records which), forget the workspace crates' fingerprints so they build
# again here; dependencies — libtorch's C++ wrapper among them — stay built. Its incremental caches
# go too: they are for crates that now build again from nothing, and left alone they grew by
# gigabytes a checkout (11 GB in target/debug/incremental after a few, on a 252 GB disk shared with
# every other cache: a full disk fails `cargo test` with "failed to parse process output").
headroom_target_guard() {
  local dir=$1 root=$2 stamp
  mkdir -p "$dir"
  stamp="$dir/.headroom-checkout"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$root" ]; then
    if [ -d "$dir" ] && find "$dir" -path '*/.fingerprint/headroom-*' -print -quit | grep -q .; then
      echo "target dir $dir last built $(cat "$stamp" 2>/dev/null || echo 'an unrecorded checkout'): the workspace crates build again for $root" >&2
      find "$dir" -path '*/.fingerprint/headroom-*' -prune -exec rm -rf {} +
      find "$dir" -maxdepth 3 -type d -name incremental -prune -exec rm -rf {} +
    fi
  fi
  printf '%s\n' "$root" > "$stamp"
}
