#!/usr/bin/env python3
"""Fails when a repository path cited in the docs or in a module header does not exist.

A citation is a markdown link's relative target (resolved from its document), or a backticked text in `README.md`, `BENCHMARKS.md`, `RELIABILITY.md`,
`docs/*.md` and the `//!` header of every `.rs` file that starts with one of the repository's
top-level folders or files (`shared/src/…`, `scripts/test.sh`, `docs/…`, `template.yaml`): such
a path must name a file or folder of the checkout. A path inside a crate (`store/event.rs`,
`delivery/worker/mod.rs`) must name a file under one of the crates' `src/` (or `local/tests/`). A `:line`, `#anchor` or trailing `/` is
dropped before the check; a path with a glob or a placeholder (`*`, `<`, `{`, `…`) is checked up
to its first such part. Paths under `target/`, `.local/` and the virtualenvs are produced by runs
and are not checked.

    scripts/cited_paths.py          # exit 1 and list every missing path, 0 when all exist
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ("target/", ".local/", ".venv", ".aws-sam/", "node_modules/")
# `code` spans and the targets of markdown links.
CITED = re.compile(r"`([^`\s]+)`|\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"[*<{…$]")
SOURCE = re.compile(r"\.(rs|md|py|sh|yaml|toml)$")
CRATE_SOURCES = ("shared/src", "local/src", "local/tests", "console/src", "cli/src", "docs")


def roots() -> set[str]:
    return {p.name for p in ROOT.iterdir() if not p.name.startswith(".git")}


def candidates(text: str, top: set[str], here: Path):
    for m in CITED.finditer(text):
        raw = m.group(1) or m.group(2)
        if "://" in raw or "::" in raw or raw.startswith(("#", "mailto:")):
            continue
        if m.group(2):
            # A markdown link's target is relative to its document.
            target = raw.split("#", 1)[0]
            if target and not target.startswith("/"):
                resolved = (here / target).resolve()
                yield raw, [resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else target]
            continue
        path = raw.split("#", 1)[0]
        path = re.sub(r":\d+(-\d+)?$", "", path)
        path = path.lstrip("./") if path.startswith("./") else path
        first = path.split("/", 1)[0]
        if first not in top or ("/" not in path and "." not in first):
            # A path inside a crate (`store/event.rs`) is read from the crate's `src/`.
            if "/" in path and SOURCE.search(path) and not path.startswith("/") and not PLACEHOLDER.search(path):
                yield raw, [f"{src}/{path}" for src in CRATE_SOURCES]
            continue
        if path.startswith(GENERATED):
            continue
        cut = PLACEHOLDER.search(path)
        if cut:
            path = path[: cut.start()]
            path = path.rsplit("/", 1)[0] if "/" in path else path
        yield raw, [path.rstrip("/")]


def header(rs: Path) -> str:
    lines = []
    for line in rs.read_text(encoding="utf-8").splitlines():
        if line.startswith("//!"):
            lines.append(line)
        elif line.strip() and lines:
            break
        elif line.strip() and not line.startswith("//"):
            break
    return "\n".join(lines)


def documents():
    for name in ("README.md", "BENCHMARKS.md", "RELIABILITY.md"):
        p = ROOT / name
        if p.exists():
            yield p, p.read_text(encoding="utf-8")
    for p in sorted((ROOT / "docs").glob("**/*.md")):
        yield p, p.read_text(encoding="utf-8")
    for p in sorted(ROOT.glob("**/*.rs")):
        rel = p.relative_to(ROOT).as_posix()
        if rel.startswith(GENERATED) or "/target/" in rel:
            continue
        yield p, header(p)


def main() -> int:
    top = roots()
    missing = []
    for doc, text in documents():
        for raw, paths in candidates(text, top, doc.parent):
            if paths[0] and not any((ROOT / p).exists() for p in paths):
                missing.append(f"{doc.relative_to(ROOT)}: `{raw}` (no {' or '.join(paths)})")
    for line in missing:
        print(line)
    print(f"cited paths: {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
