#!/usr/bin/env python3
"""The compiler, not a night, catches a renamed training setting (issue 51).

In a copy of the workspace, renames one field of headroom_run::request::RunRequest the way a
refactor of its owner would: the declaration, then every use the compiler points at in crates/run
(other types' fields of the same name are left alone), until crates/run compiles. Then checks the
field loop (crates/field) against it:

- a field the loop sets itself (`replay`: the old scenes it replays) must fail to compile in
  crates/field/src, the errors naming RunRequest and nothing else failing;
- a field the loop does not name (`cos_lr`) must compile: the loop carries the command line's and
  the preset's request whole (`..s.train.clone()` in field_run.rs), so the new name is passed on as
  it is (the request files' round trips, tests in crates/field and crates/run, show what is carried).

Usage: scripts/tests/request_rename.py   Env: CARGO_TARGET_DIR (its sibling "<dir>-rename" is used).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")) + "-rename"
REQUEST = "crates/run/src/request.rs"
# rustc's short messages: `crates/run/src/x.rs:12:5: error[E0609]: no field `cos_lr` on type ...`
ERROR = re.compile(r"^(crates/[a-z]+/src/[^:]+):(\d+):(\d+): error(\[E\d+\])?: (.*)$")


def copy(dest):
    """The workspace's sources and configs/ (which the crates embed); no tests, fixtures or docs."""
    for name in ("Cargo.toml", "Cargo.lock"):
        shutil.copy(os.path.join(ROOT, name), dest)
    ignore = shutil.ignore_patterns("tests", "fixtures", "target")
    for name in ("crates", "vendor", "configs"):
        shutil.copytree(os.path.join(ROOT, name), os.path.join(dest, name), ignore=ignore)


def check(ws, package):
    """`cargo check` of one package: (ok, [(file, line, col, message)], output)."""
    run = subprocess.run(
        ["cargo", "check", "-p", package, "--lib", "--locked", "--offline", "--message-format", "short"],
        cwd=ws, env={**os.environ, "CARGO_TARGET_DIR": TARGET}, capture_output=True, text=True)
    errors = [(m[1], int(m[2]), int(m[3]), m[5]) for m in map(ERROR.match, run.stderr.splitlines()) if m]
    return run.returncode == 0, errors, run.stderr


def rename(ws, field):
    """FIELD becomes FIELD_renamed in RunRequest's declaration and at every use in crates/run."""
    new = field + "_renamed"
    path = os.path.join(ws, REQUEST)
    text = open(path).read()
    start = text.index("pub struct RunRequest {")
    end = text.index("\n}\n", start)
    body, count = re.subn(rf"(\n    pub ){field}:", rf"\g<1>{new}:", text[start:end])
    if count != 1:
        sys.exit(f"request_rename.py: RunRequest has no field `{field}` any more: pick another")
    open(path, "w").write(text[:start] + body + text[end:])
    for _ in range(10):
        ok, errors, out = check(ws, "headroom-run")
        if ok:
            return
        ours = [e for e in errors if f"`{field}`" in e[3]]
        if not ours:
            sys.exit(f"request_rename.py: crates/run does not compile after renaming `{field}`:\n{out[-3000:]}")
        # From the last place in each file backwards, so earlier columns stay right.
        for file, line, col, _ in sorted(set(ours), reverse=True):
            lines = open(os.path.join(ws, file)).read().split("\n")
            text = lines[line - 1]
            at = col - 1
            if text[at:at + len(field)] != field:
                sys.exit(f"request_rename.py: {file}:{line}:{col} is not `{field}`: {text}")
            before = text[:at].rstrip()
            after = text[at + len(field):].lstrip()
            # `RunRequest { field, .. }` (a pattern or a literal in shorthand) keeps its binding.
            shorthand = (not before or before[-1] in "{,") and (not after or after[0] in ",}")
            lines[line - 1] = text[:at] + (f"{new}: {field}" if shorthand else new) + text[at + len(field):]
            open(os.path.join(ws, file), "w").write("\n".join(lines))
    sys.exit(f"request_rename.py: renaming `{field}` in crates/run did not settle in 10 rounds")


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        ws = os.path.join(tmp, "set")
        os.mkdir(ws)
        copy(ws)
        rename(ws, "replay")
        ok, errors, out = check(ws, "headroom-field")
        loop = [e for e in errors if e[0].startswith("crates/field/src/")]
        others = [e for e in errors if not e[0].startswith("crates/field/src/")]
        if ok:
            print("FAIL renaming RunRequest.replay: the field loop still compiles, so it does not set the old scenes itself", file=sys.stderr)
            failures += 1
        elif others or not loop or not all("RunRequest" in e[3] for e in loop):
            print("FAIL renaming RunRequest.replay: expected errors in crates/field/src naming RunRequest, and only those:", file=sys.stderr)
            print(out[-3000:], file=sys.stderr)
            failures += 1
        else:
            print("PASS renaming RunRequest.replay fails to compile where the loop sets it:")
            for file, line, col, message in loop:
                print(f"     {file}:{line}:{col}: {message}")

        shutil.rmtree(ws)
        os.mkdir(ws)
        copy(ws)
        rename(ws, "cos_lr")
        ok, errors, out = check(ws, "headroom-field")
        if ok:
            print("PASS renaming RunRequest.cos_lr (which the loop does not name) compiles: the loop carries it as it is")
        else:
            print("FAIL renaming RunRequest.cos_lr, which the loop does not name, broke the build:", file=sys.stderr)
            print(out[-3000:], file=sys.stderr)
            failures += 1
    if failures:
        sys.exit(f"request_rename.py: {failures} check(s) FAILED")


if __name__ == "__main__":
    main()
