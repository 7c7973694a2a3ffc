#!/usr/bin/env python3
"""Lists the module dependencies of a Rust crate and fails on import cycles.

Every `.rs` file under the crate's `src/` is one module (`lib.rs` is the crate root, `foo/mod.rs`
and `foo.rs` are `crate::foo`). An edge `a -> b` means that module `a` names an item of module `b`:
through a `use` (nested trees, `crate::`, `super::`, `self::` and child-module paths) or through an
inline path such as `crate::store::keys::event_pk(…)`. Comments and string literals are ignored,
so doc links do not count. Test modules inside a file count like the rest of the file. A path
through a crate the root re-exports (`pub use ::domain;` in `shared`) names another crate, not an
edge.

    scripts/import_cycles.py                      # the shared crate, one node per file
    scripts/import_cycles.py --depth 1            # collapse to top-level modules (api, store, …)
    scripts/import_cycles.py --src domain/src     # the domain crate
    scripts/import_cycles.py --under notify --edges   # only modules under crate::notify, list edges
    scripts/import_cycles.py --allow-up           # a child may use what its parent's mod.rs defines

Exit status 1 when a cycle is found among the selected modules, 0 otherwise.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path


RAW = re.compile(r'r(#*)"')
CHAR = re.compile(r"'(\\.[^']*|[^\\'])'")


def starts_a_token(text: str, i: int) -> bool:
    return i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")


def strip_comments_and_strings(text: str) -> str:
    """Blanks out comments, string literals and char literals, keeping line structure."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if text[i] == "\n" else "")
                    i += 1
        elif c == "r" and RAW.match(text, i) and starts_a_token(text, i - (text[i - 1 : i] == "b")):
            hashes = len(RAW.match(text, i).group(1))
            end = text.find('"' + "#" * hashes, i + 2 + hashes)
            end = n if end < 0 else end + 1 + hashes
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}') or a lifetime ('a).
            m = CHAR.match(text, i)
            if m:
                out.append("' '")
                i = m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def module_of(path: Path, src: Path) -> tuple[str, ...]:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "main", "mod"):
        parts.pop()
    return tuple(parts)


def expand_use_tree(tree: str) -> list[list[str]]:
    """`a::{b, c::{d, e as f}, self}` -> [[a, b], [a, c, d], [a, c, e], [a]]."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)

    def parse(s: str, i: int) -> tuple[list[list[str]], int]:
        prefix: list[str] = []
        segment = ""
        while i < len(s):
            if s.startswith("::", i):
                prefix.append(segment)
                segment, i = "", i + 2
            elif s[i] == "{":
                paths: list[list[str]] = []
                i += 1
                while s[i] != "}":
                    sub, i = parse(s, i)
                    paths.extend(prefix + p for p in sub)
                    if s[i] == ",":
                        i += 1
                return paths, i + 1
            elif s[i] in ",}":
                break
            else:
                segment += s[i]
                i += 1
        path = prefix + ([segment] if segment and segment != "*" else [])
        if path[-1:] == ["self"]:
            path = path[:-1]
        return [path], i

    paths, _ = parse(tree, 0)
    return paths


USE = re.compile(r"\b(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")
INLINE = re.compile(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)")


INLINE_MOD = re.compile(r"\bmod\s+(\w+)\s*\{")


def split_inline_modules(text: str, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], str]]:
    """The file's own text and that of each inline `mod x { … }`, with the module path each is
    written in (so that `super::` inside `mod tests` means the file's module)."""
    pieces: list[tuple[tuple[str, ...], str]] = []
    outer: list[str] = []
    i = 0
    while True:
        m = INLINE_MOD.search(text, i)
        if not m:
            outer.append(text[i:])
            break
        outer.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        pieces.extend(split_inline_modules(text[m.end() : j - 1], path + (m.group(1),)))
        i = j
    pieces.append((path, "".join(outer)))
    return pieces


# Modules re-exported under another path (`pub use plumbing::{keys, read};` in `store/mod.rs`
# makes `crate::store::keys` the file module `crate::store::plumbing::keys`).
ALIASES: dict[tuple[str, ...], tuple[str, ...]] = {}
PUB_USE = re.compile(r"\bpub\s+use\s+([^;]+);")
# Other crates the crate root re-exports under its own path (`pub use ::domain;`, `pub use
# ::domain::ids;` make `crate::domain` and `crate::ids` the `domain` crate's).
EXTERNAL: set[str] = set()
EXTERN_USE = re.compile(r"\bpub\s+use\s+::(\w+(?:::\w+)*)\s*;")


def external_reexports(text: str) -> set[str]:
    """The names under which the crate root re-exports another crate (or a module of one)."""
    return {m.group(1).split("::")[-1] for m in EXTERN_USE.finditer(text)}


def module_aliases(module: tuple[str, ...], text: str, modules: set[tuple[str, ...]]) -> dict:
    """The modules that `module` re-exports under its own path, by the name they get there."""
    found = {}
    for m in PUB_USE.finditer(text):
        for path in expand_use_tree(m.group(1)):
            if not path or path[-1] in ("self", "*"):
                continue
            base = () if path[0] == "crate" else module
            rest = path[1:] if path[0] in ("crate", "self") else path
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
            target = base + tuple(rest)
            if target in modules and module + (path[-1],) not in modules:
                found[module + (path[-1],)] = target
    return found


def edges_of(module: tuple[str, ...], text: str, modules: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for written_in, piece in split_inline_modules(text, module):
        found |= edges_in(written_in, piece, modules)
    # Naming an item of your own file is not an edge.
    found.discard(module)
    return found


def edges_in(module: tuple[str, ...], text: str, modules: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    children = {m[-1] for m in modules if len(m) == len(module) + 1 and m[: len(module)] == module}

    def resolve(path: list[str]) -> tuple[str, ...] | None:
        if not path:
            return None
        if path[0] == "crate":
            if path[1:2] and path[1] in EXTERNAL:
                return None  # another crate, re-exported by the root
            base, rest = (), path[1:]
        elif path[0] in ("super", "self"):
            base = module
            rest = path
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    base = base[:-1]
                rest = rest[1:]
        elif path[0] in children:
            base, rest = module, path
        else:
            return None  # an external crate, a prelude item or a local name
        # The longest prefix that is a file module (an inline module belongs to its file).
        target = base
        while target not in modules and target:
            target = target[:-1]
        for segment in rest:
            if target + (segment,) in modules:
                target = target + (segment,)
            elif target + (segment,) in ALIASES:
                target = ALIASES[target + (segment,)]
            else:
                break
        return target

    found: set[tuple[str, ...]] = set()
    for m in USE.finditer(text):
        for path in expand_use_tree(m.group(1)):
            target = resolve(path)
            if target is not None:
                found.add(target)
    for m in INLINE.finditer(text):
        target = resolve(m.group(1).split("::"))
        if target is not None:
            found.add(target)
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; returns the components with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete cycle through the component's first node, for the report."""
    members = set(component)
    start = component[0]
    parents = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while parents[path[-1]] is not None:
                        path.append(parents[path[-1]])
                    return list(reversed(path)) + [start]
                if w not in parents:
                    parents[w] = v
                    nxt.append(w)
        frontier = nxt
    return component


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", default=str(Path(__file__).resolve().parent.parent / "shared" / "src"))
    parser.add_argument("--depth", type=int, default=0, help="collapse modules to this many path segments (0: one node per file)")
    parser.add_argument("--under", default="", help="only modules under this path, e.g. store or notify")
    parser.add_argument("--edges", action="store_true", help="print every edge")
    parser.add_argument(
        "--allow-up",
        action="store_true",
        help="ignore edges from a module to its own ancestors (items a parent's mod.rs defines)",
    )
    args = parser.parse_args()

    src = Path(args.src)
    files = {module_of(p, src): p for p in sorted(src.rglob("*.rs"))}
    modules = set(files)
    under = tuple(s for s in args.under.split("::") if s) if args.under else ()
    if () in files:
        EXTERNAL.update(external_reexports(strip_comments_and_strings(files[()].read_text())))
    for module, path in files.items():
        ALIASES.update(module_aliases(module, strip_comments_and_strings(path.read_text()), modules))

    def node(m: tuple[str, ...]) -> str:
        if args.depth:
            m = m[: args.depth]
        return "crate" + "".join("::" + s for s in m)

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        if module[: len(under)] != under:
            continue
        text = strip_comments_and_strings(path.read_text())
        source = node(module)
        graph.setdefault(source, set())
        for target in edges_of(module, text, modules):
            if target[: len(under)] != under:
                continue
            if args.allow_up and module[: len(target)] == target:
                continue
            t = node(target)
            if t != source:
                graph[source].add(t)
                graph.setdefault(t, set())

    if args.edges:
        for source in sorted(graph):
            for target in sorted(graph[source]):
                print(f"{source} -> {target}")
    components = strongly_connected(graph)
    edges = sum(len(v) for v in graph.values())
    scope = node(under) if under else "crate"
    if not components:
        print(f"no import cycles among {len(graph)} modules under {scope} ({edges} edges)")
        return 0
    print(f"{len(components)} import cycle(s) among {len(graph)} modules under {scope}:")
    for component in components:
        print("  " + " -> ".join(a_cycle(graph, component)) + f"   (component of {len(component)})")
    return 1


if __name__ == "__main__":
    sys.exit(main())
