# shellcheck shell=bash
# Disk helpers for .ci/run and the bundle test. The caches (target dirs, wheels, the cross image)
# share one disk with everything else on this machine, and a full disk fails far from its cause
# (tar exits 2, cargo "failed to parse process output"): say how much is free, and free what is
# rebuilt anyway.

# headroom_disk_report DIR: one line with the free space where DIR lives and what DIR holds.
headroom_disk_report() {
  local dir=$1
  mkdir -p "$dir"
  echo "disk: $(df -Pm "$dir" | awk 'NR==2 {printf "%.1f GB free", $4/1024}') where $dir lives; it holds $(du -sm "$dir" 2>/dev/null | awk '{printf "%.1f GB", $1/1024}')"
}

# headroom_prune_caches DIR: deletes, in every target dir under DIR, the test and example
# executables cargo left from earlier builds (each build links new ones; cargo links again any it
# needs) and the incremental caches. Dependencies' compiled crates and build outputs stay.
headroom_prune_caches() {
  local dir=$1 t
  for t in "$dir"/target*; do
    [ -d "$t" ] || continue
    find "$t" -maxdepth 4 -type d -name incremental -prune -exec rm -rf {} +
    find "$t" -maxdepth 4 -type d \( -name deps -o -name examples \) -path '*/debug/*' -print0 |
      xargs -0 -r -I{} find {} -maxdepth 1 -type f -executable ! -name '*.so' ! -name '*.so.*' ! -name '*.rlib' -delete
  done
}

# headroom_need_disk DIR MB WHAT: fails with a message naming WHAT when less than MB is free where
# DIR lives.
headroom_need_disk() {
  local dir=$1 mb=$2 what=$3 free
  free=$(df -Pm "$dir" | awk 'NR==2 {print $4}')
  if [ "$free" -lt "$mb" ]; then
    echo "error: $what needs about $mb MB free where $dir lives; $free MB are (free some disk: the caches under /var/cache/headroom, old runs)" >&2
    return 1
  fi
}
