#!/usr/bin/env python3
"""No import circles between the files of any crate (issue 31).

For each crate under crates/, every `use crate::…`, `use super::…` and `use self::…` of a source file
(braces expanded, `pub use` included), and every such path written out in its code
(`super::doctor::providers()`), is an arrow to the file of the module it names (the longest prefix
of the path that is a module file; inside an inline `mod tests { … }`, `super` is the file itself). A circle is a set of files that reach each other by these
arrows. Prints each circle with the names that tie it; exit 1 when there is one.

Usage: scripts/tests/module_circles.py [REPO_ROOT]
"""

import re
import sys
from pathlib import Path


def module_path(src: Path, file: Path) -> tuple:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "main", "mod"):
        parts.pop()
    return tuple(parts)


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def expand(tree: str) -> list:
    """`a::{b, c::{d, e}}` → [a::b, a::c::d, a::c::e] (`self` in a group is the prefix itself)."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    items, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(inner[start:i])
            start = i + 1
    items.append(inner[start:])
    out = []
    for item in (i.strip() for i in items if i.strip()):
        for path in expand(item):
            out.append(prefix.rstrip(":") if path == "self" else prefix + path)
    return out


def uses(text: str) -> list:
    """Each `use` path with the inline modules (`mod tests { … }`) it stands in."""
    text = strip_comments(text)
    opens = []  # (position of `{`, module name) of inline modules
    for m in re.finditer(r"\bmod\s+(\w+)\s*\{", text):
        opens.append((m.end() - 1, m.group(1)))
    depth_at, depth = {}, 0
    for i, c in enumerate(text):
        if c == "{":
            depth += 1
            depth_at[i] = depth
        elif c == "}":
            depth -= 1
            depth_at[i] = depth
    def inline_at(position):
        inline = []
        for start, name in opens:
            if start < position:
                # Open at `position` when the brace depth never fell below its level in between.
                level = depth_at[start]
                closed = any(depth_at.get(j, level) < level for j in range(start + 1, position) if text[j] == "}")
                if not closed:
                    inline.append(name)
        return tuple(inline)

    found = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        for path in expand(m.group(1)):
            path = re.sub(r"\s+as\s+\w+$", "", path.strip())
            found.append(([p for p in path.split("::") if p], inline_at(m.start())))
    # Paths written out in the code (`super::doctor::providers()`, `crate::run::open_detector(..)`).
    for m in re.finditer(r"(?<![\w:])(?:crate|super|self)(?:::\w+)+", text):
        found.append((m.group(0).split("::"), inline_at(m.start())))
    return found


def resolve(segments: list, here: tuple, modules: dict):
    """The module file a `use` path names and the names it takes from it; None for another crate."""
    if not segments:
        return None
    if segments[0] == "crate":
        base, rest = (), segments[1:]
    elif segments[0] in ("self", "super"):
        base, i = here, 0
        while i < len(segments) and segments[i] in ("self", "super"):
            if segments[i] == "super":
                base = base[:-1]
            i += 1
        rest = segments[i:]
    else:
        return None
    path = base + tuple(rest)
    for n in range(len(path), -1, -1):
        if path[:n] in modules:
            return path[:n], "::".join(path[n:])
    return None


def circles(graph: dict) -> list:
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
    found = []
    crates = sorted(p for p in (root / "crates").iterdir() if (p / "src").is_dir())
    for crate in crates:
        src = crate / "src"
        files = sorted(src.rglob("*.rs"))
        modules = {module_path(src, f): f for f in files}
        graph = {}
        for f in files:
            here = module_path(src, f)
            edges = graph.setdefault(f, {})
            for segments, inline in uses(f.read_text()):
                hit = resolve(segments, here + inline, modules)
                if hit is None:
                    continue
                target = modules[hit[0]]
                if target != f:
                    edges.setdefault(target, set()).add(hit[1] or "(the module)")
        for component in circles(graph):
            found.append((crate, component, graph))
    if not found:
        print(f"module_circles.py: {len(crates)} crates, no import circle between their files")
        return 0
    print("import circles (files that reach each other by `use`):", file=sys.stderr)
    for crate, component, graph in found:
        rel = lambda f: f.relative_to(root)
        print(f"  FAIL {crate.name}: {', '.join(str(rel(f)) for f in component)}", file=sys.stderr)
        for f in component:
            for target, names in sorted(graph[f].items()):
                if target in component:
                    print(f"       {rel(f)} -> {rel(target)}: {', '.join(sorted(names))}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
