# shellcheck shell=bash
# Pinned wheels from PyPI for a given CPU: sourced by scripts/setup.sh (x86_64) and
# scripts/cross/native.sh (aarch64), which define `fail` and `step`.

# wheel_download DIR ARCH NAME==VERSION GLOB: sets WHEEL to the CPython 3.11 (or pure) manylinux wheel for
# ARCH (x86_64, aarch64) in DIR, downloading it when no file there matches GLOB.
# (Not used as $(wheel_download ...): in a subshell its fail would be reported twice, under the wrong step.)
wheel_download() {
  local wheels=$1 arch=$2 spec=$3 glob=$4 found what
  found=$(find "$wheels" -maxdepth 1 -name "$glob" -print -quit)
  if [ -z "$found" ]; then
    what=$spec
    [ "$arch" = x86_64 ] || what="the $arch wheel of $spec"
    step "downloading $what from PyPI"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps \
      --only-binary=:all: --platform "manylinux_2_28_$arch" --platform "manylinux2014_$arch" \
      --platform "manylinux_2_17_$arch" --platform "manylinux_2_25_$arch" \
      --platform "manylinux_2_18_$arch" --platform "manylinux_2_24_$arch" --platform "manylinux_2_26_$arch" \
      --platform "manylinux_2_27_$arch" \
      --python-version 3.11 --implementation cp -d "$wheels" "$spec" >&2 \
      || fail "pip could not download $what (is PyPI reachable?)"
    found=$(find "$wheels" -maxdepth 1 -name "$glob" -print -quit)
    [ -n "$found" ] || fail "downloaded $spec but found no file matching $glob in $wheels"
  fi
  # shellcheck disable=SC2034  # read by the caller
  WHEEL=$found
}

# wheel_extract WHEEL DEST MEMBER...: unpack the named members (prefix match) of a wheel.
wheel_extract() {
  local wheel=$1 dest=$2; shift 2
  python3 - "$wheel" "$dest" "$@" <<'PY' || fail "could not unpack $wheel"
import sys, zipfile
wheel, dest, prefixes = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if any(n.startswith(p) for p in prefixes)]
    if not names:
        sys.exit(f"{wheel}: none of {prefixes} inside")
    for n in names:
        z.extract(n, dest)
PY
}
