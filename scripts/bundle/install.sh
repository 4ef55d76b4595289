#!/usr/bin/env bash
# Installs this headroom bundle (made by scripts/bundle.sh) under a prefix, and optionally the
# systemd service and timer of the field retraining loop (share/doc/headroom/FIELD.md).
#
# Usage: ./install.sh [--prefix DIR] [--systemd] [--systemd-dir DIR] [--field-args "ARGS"]
#   --prefix DIR       where it goes (default /opt/headroom): DIR/bin/headroom, DIR/lib, DIR/configs,
#                      DIR/scripts, DIR/models, DIR/share; DIR/etc is yours and never overwritten
#   --systemd          also write headroom-field.service and headroom-field.timer (`headroom field
#                      install-service`), running DIR/bin/headroom field run with the flags in
#                      DIR/etc/field.env (written once, from --field-args or an example)
#   --systemd-dir DIR  where the units go (default /etc/systemd/system)
#   --field-args ARGS  the flags of `headroom field run` for DIR/etc/field.env (replaces the file's)
# Nothing is enabled: after editing DIR/etc/field.env, `systemctl enable --now headroom-field.timer`.
# A reinstall replaces bin/, lib/, configs/, scripts/, models/ and share/ whole, each by one rename.
# Exit: 0 installed, 1 it could not (the message says why), 2 usage.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -f "$here/scripts/lib/errtrap.sh" ] || { echo "install: error: $here is not a complete headroom bundle (no scripts/lib/errtrap.sh)" >&2; exit 1; }
# shellcheck source=SCRIPTDIR/../lib/errtrap.sh
source "$here/scripts/lib/errtrap.sh"

fail() { echo "install: error: $*" >&2; exit 1; }
step() { headroom_step "$*"; echo "install: $*" >&2; }
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

prefix=/opt/headroom systemd=0 unit_dir=/etc/systemd/system field_args="" field_args_given=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) [ $# -ge 2 ] || usage; prefix=$2; shift 2 ;;
    --systemd) systemd=1; shift ;;
    --systemd-dir) [ $# -ge 2 ] || usage; unit_dir=$2; shift 2 ;;
    --field-args) [ $# -ge 2 ] || usage; field_args=$2; field_args_given=1; shift 2 ;;
    -h|--help) usage ;;
    *) echo "install: unknown argument '$1'" >&2; usage ;;
  esac
done

parts=(bin lib configs scripts models share)
for part in "${parts[@]}"; do
  [ -d "$here/$part" ] || fail "$here/$part is missing: this is not a complete headroom bundle (unpack the whole tar.gz)"
done
[ -x "$here/bin/headroom" ] || fail "$here/bin/headroom is missing or not executable"
want_arch=$(sed -n 's/^headroom [^,]*, \([^ ]*\) Linux.*/\1/p' "$here/BUILD-INFO" 2>/dev/null || true)
if [ -n "$want_arch" ] && [ "$want_arch" != "$(uname -m)" ]; then
  fail "this bundle is for $want_arch; this machine is $(uname -m)"
fi
case "$prefix" in
  /*) ;;
  *) prefix="$(pwd)/$prefix" ;;
esac
prefix=${prefix%/}
[ -n "$prefix" ] || fail "--prefix / is not allowed"
case "$prefix/" in
  "$here/"*) fail "--prefix $prefix is inside the unpacked bundle $here: choose another folder" ;;
esac

# Refuse before touching anything: the nearest existing folder must be writable.
writable_or_fail() {
  local what=$1 dir=$2 probe=$2
  while [ ! -e "$probe" ]; do probe=$(dirname "$probe"); done
  [ -d "$probe" ] || fail "$what $dir: $probe is not a folder"
  [ -w "$probe" ] || fail "$what $dir: $probe is not writable by $(id -un): run as root (sudo $0 ...) or choose another $what"
}
writable_or_fail --prefix "$prefix"
if [ "$systemd" = 1 ]; then writable_or_fail --systemd-dir "$unit_dir"; fi

step "installing $(head -n1 "$here/BUILD-INFO" 2>/dev/null || echo headroom) into $prefix"
mkdir -p "$prefix/etc" || fail "cannot create $prefix/etc"
for part in "${parts[@]}"; do
  rm -rf "$prefix/.$part.new" "$prefix/.$part.old"
  cp -R "$here/$part" "$prefix/.$part.new" || fail "cannot copy $part/ into $prefix (disk full?)"
done
for f in BUILD-INFO SHA256SUMS; do
  [ ! -f "$here/$f" ] || cp "$here/$f" "$prefix/.$f.new" || fail "cannot copy $f into $prefix"
done
# Everything is copied: now each part is swapped in by renames (a running field loop sees the old
# files or the new ones).
for part in "${parts[@]}"; do
  [ ! -e "$prefix/$part" ] || mv "$prefix/$part" "$prefix/.$part.old" || fail "cannot move the old $prefix/$part aside"
  mv "$prefix/.$part.new" "$prefix/$part" || fail "cannot move $part/ into place in $prefix"
  rm -rf "$prefix/.$part.old"
done
for f in BUILD-INFO SHA256SUMS; do
  [ ! -f "$prefix/.$f.new" ] || mv "$prefix/.$f.new" "$prefix/$f" || fail "cannot move $f into place"
done

version=$(env -i PATH=/usr/bin:/bin "$prefix/bin/headroom" -V 2>&1) \
  || fail "the installed $prefix/bin/headroom does not start: $version"
step "installed $version: $prefix/bin/headroom (check it: $prefix/bin/headroom doctor)"

if [ "$systemd" = 1 ]; then
  env_file="$prefix/etc/field.env"
  service_args=(field install-service --unit-dir "$unit_dir" --env-file "$env_file")
  if [ "$field_args_given" = 1 ]; then
    # Real flags: install-service parses them as `field run` does and refuses paths that do not exist.
    case "$field_args" in *$'\n'*) fail "--field-args must be one line" ;; esac
    read -r -a words <<<"$field_args"
    service_args+=(-- "${words[@]}")
  elif [ ! -f "$env_file" ]; then
    # An example, written here (its paths do not exist yet, which install-service would refuse):
    # edit them in the env file before enabling the timer. install-service then keeps the file.
    mkdir -p "$(dirname "$env_file")" || fail "cannot create $(dirname "$env_file")"
    example="--images /data/camera/new --model /opt/detector/model.onnx --holdout /data/holdout/data.yaml --old /data/old-scenes/data.yaml --teacher /opt/detector/teacher.onnx --board auto --reserve 1GiB"
    # shellcheck disable=SC2016  # the backquotes are Markdown in the file's comment
    if ! printf '# Flags of `headroom field run` for headroom-field.service (docs/FIELD.md): an example,\n# edit the paths before enabling the timer.\nHEADROOM_FIELD_ARGS="%s"\n' "$example" \
      > "$env_file.tmp" || ! mv "$env_file.tmp" "$env_file"; then
      fail "cannot write $env_file"
    fi
  fi
  # The units run the installed binary (`headroom field run`), which finds its libraries by RUNPATH.
  env -i PATH=/usr/bin:/bin "$prefix/bin/headroom" "${service_args[@]}" \
    || fail "headroom field install-service failed (see above)"
  step "wrote $unit_dir/headroom-field.service and headroom-field.timer"
  if [ "$unit_dir" = /etc/systemd/system ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    systemctl daemon-reload || fail "systemctl daemon-reload failed"
  fi
  step "next: edit $env_file, then: systemctl enable --now headroom-field.timer"
fi
