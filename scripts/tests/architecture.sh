#!/usr/bin/env bash
# docs/ARCHITECTURE.md's crate dependency table against the manifests (`cargo metadata --no-deps`:
# no build, no network): every workspace crate has a row, and each row names exactly the headroom
# crates its [dependencies] name. Exit 1 naming the rows that differ.
# shellcheck source=../lib/errtrap.sh
source "$(dirname "$0")/../lib/errtrap.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
metadata=$(cargo metadata --no-deps --format-version 1 --offline)
python3 - docs/ARCHITECTURE.md "$metadata" <<'PY'
import json, re, sys

doc, metadata = open(sys.argv[1]).read(), json.loads(sys.argv[2])
block = re.search(r"<!-- architecture:dependencies -->(.*?)<!-- /architecture:dependencies -->", doc, re.S)
if not block:
    sys.exit("architecture.sh: docs/ARCHITECTURE.md has no <!-- architecture:dependencies --> table")
documented = {}
for line in block.group(1).splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != 2 or not cells[0].startswith("`headroom-"):
        continue
    deps = set(re.findall(r"`([a-z]+)`", cells[1]))
    documented[cells[0].strip("`")] = {f"headroom-{d}" for d in deps}
actual = {}
for package in metadata["packages"]:
    if package["name"].startswith("headroom-"):
        actual[package["name"]] = {d["name"] for d in package["dependencies"]
                                   if d["name"].startswith("headroom-") and d["kind"] is None}
problems = []
for name in sorted(set(actual) | set(documented)):
    if name not in documented:
        problems.append(f"{name}: a workspace crate with no row")
    elif name not in actual:
        problems.append(f"{name}: a row for no workspace crate")
    elif documented[name] != actual[name]:
        short = lambda s: ", ".join(sorted(d.removeprefix("headroom-") for d in s)) or "none"
        problems.append(f"{name}: the table says {short(documented[name])}, Cargo.toml says {short(actual[name])}")
if problems:
    print("docs/ARCHITECTURE.md's dependency table disagrees with the manifests:", file=sys.stderr)
    for p in problems:
        print(f"  FAIL {p}", file=sys.stderr)
    sys.exit(1)
print(f"architecture.sh: {len(actual)} crates, their dependencies as docs/ARCHITECTURE.md says")
PY
