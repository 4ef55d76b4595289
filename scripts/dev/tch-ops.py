#!/usr/bin/env python3
"""The generated tch functions headroom compiles (vendor/torch-sys/README.md).

  tch-ops.py used BINARY...   print the atg_* functions linked into these binaries (one a line):
                              the ones headroom calls, since the linker drops the rest
  tch-ops.py write            write vendor/torch-sys/libtch/headroom_ops.cpp: the functions named in
                              vendor/torch-sys/ops.txt, copied from upstream's torch_api_generated.cpp
  tch-ops.py check            exit 1 when headroom_ops.cpp is not what `write` would write

After adding a tch call that needs a new function (the link fails with "undefined reference to
`atg_...`"), add its name to ops.txt and run `write`.
"""
import re
import subprocess
import sys
from pathlib import Path

VENDOR = Path(__file__).resolve().parents[2] / "vendor" / "torch-sys"
GENERATED = VENDOR / "libtch" / "torch_api_generated.cpp"
OPS = VENDOR / "ops.txt"
OUT = VENDOR / "libtch" / "headroom_ops.cpp"
NAME = re.compile(r"^\S.*?\b(atg_\w+)\(", re.M)


def used(binaries):
    names = set()
    for binary in binaries:
        out = subprocess.run(["nm", "--defined-only", binary], check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "Tt" and parts[2].startswith("atg_"):
                names.add(parts[2])
    return sorted(names)


def functions():
    text = GENERATED.read_text()
    blocks = {}
    for block in text.split("\n\n"):
        m = NAME.search(block)
        if m and block.lstrip().startswith(("void", "tensor", "int", "double", "bool", "raw_tensor", "int64_t")):
            blocks[m.group(1)] = block.strip("\n")
    return blocks


def render():
    wanted = [line.strip() for line in OPS.read_text().splitlines() if line.strip() and not line.startswith("#")]
    blocks = functions()
    missing = [name for name in wanted if name not in blocks]
    if missing:
        sys.exit(f"tch-ops.py: not in {GENERATED}: {', '.join(missing)}")
    head = (
        "// Written by scripts/dev/tch-ops.py from torch_api_generated.cpp (tch 0.26.0) and ops.txt:\n"
        "// the generated functions headroom calls. Do not edit; edit ops.txt and run `tch-ops.py write`.\n"
        '#include "torch_api_generated.h"\n'
    )
    return head + "\n" + "\n\n".join(blocks[name] for name in wanted) + "\n"


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "used":
        print("\n".join(used(sys.argv[2:])))
    elif sys.argv[1:] == ["write"]:
        OUT.write_text(render())
        print(f"wrote {OUT}")
    elif sys.argv[1:] == ["check"]:
        if OUT.read_text() != render():
            sys.exit(f"tch-ops.py: {OUT} is stale: run scripts/dev/tch-ops.py write")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
