#!/usr/bin/env python3
"""Fails when code outside `shared/src/store/` writes out a whole stored item as a struct literal.

A stored item's shape belongs to its module in the store: everything else builds one through the
item's constructors (`Delivery::ingested`, `Subscription::new`, ...) or changes fields of one it
has. A literal with a base (`Delivery { status, ..delivery }`) is not a whole item and is allowed.

    scripts/stored_literals.py            # shared/src, domain/src, functions, local/src, cli/src
    scripts/stored_literals.py PATH ...   # other files or folders

Exit status 1 when a whole literal is found (each is listed as FILE:LINE TYPE), 0 otherwise.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / "shared" / "src" / "store"
DEFAULT_PATHS = ["shared/src", "domain/src", "functions", "local/src", "cli/src"]

# The item kinds the store writes, by their Rust type (each module in store/ owns one).
ITEM_TYPES = [
    "Account", "Integration", "Subscription", "TokenRecord", "EventRecord", "Delivery",
    "AuditRecord", "ReplayJob", "Snapshot", "NoticeRecord", "NotificationDelivery", "WorkRow",
    "SupersedePointer", "ProviderRef", "ConsoleSession",
]
LITERAL = re.compile(r"(?<![A-Za-z0-9_:])(?:[a-z_]+::)*(" + "|".join(ITEM_TYPES) + r")\s*\{")
NOT_A_LITERAL = re.compile(r"(struct|enum|impl|fn|for|trait|->|mod)\s*[^;{}]*$")


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def body(text: str, start: int) -> str:
    """The text between the brace at `start` and its match."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return text[start + 1 :]


def top_level(inner: str) -> str:
    """`inner` without what nested brackets hold."""
    out, depth = [], 0
    for c in inner:
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


def enclosing_header(text: str, at: int) -> str:
    """The text that opens the innermost block around `at` (`enum Principal`, `fn f()`, …)."""
    depth = 0
    for i in range(at - 1, -1, -1):
        if text[i] == "}":
            depth += 1
        elif text[i] == "{":
            if depth == 0:
                start = max(text.rfind(c, 0, i) for c in ";{}") + 1
                return text[start:i]
            depth -= 1
    return ""


def imports_store_type(text: str, kind: str) -> bool:
    """Whether the file names the store's `kind` (a same-named type of its own is not one)."""
    return bool(
        re.search(r"store::(?:[a-z_]+::)*\{[^}]*\b" + kind + r"\b", text)
        or re.search(r"store::(?:[a-z_]+::)+" + kind + r"\b", text)
    )


def whole_literals(path: Path) -> list[tuple[int, str]]:
    text = strip_comments(path.read_text(encoding="utf-8"))
    found = []
    for m in LITERAL.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        before = text[line_start : m.start()]
        if NOT_A_LITERAL.search(before) or re.search(r"\benum\b", enclosing_header(text, m.start())):
            continue
        if not imports_store_type(text, m.group(1)):
            continue
        inner = top_level(body(text, m.end() - 1))
        fields = re.findall(r"\b[a-z_][a-z0-9_]*\s*:", inner)
        # A pattern (`Delivery { status, .. }`) or a literal with a base is not a whole item.
        if ".." in inner or not fields:
            continue
        found.append((text.count("\n", 0, m.start()) + 1, m.group(1)))
    return found


def main(args: list[str]) -> int:
    paths = [ROOT / p for p in (args or DEFAULT_PATHS)]
    files = [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*.rs")))]
    bad = [
        (f, line, kind)
        for f in files
        if STORE not in f.parents
        for line, kind in whole_literals(f)
    ]
    for f, line, kind in bad:
        print(f"{f.relative_to(ROOT)}:{line} {kind}")
    if bad:
        print(f"{len(bad)} whole stored-item literal(s) outside shared/src/store/: build them "
              "with the item's constructor")
        return 1
    print(f"no whole stored-item literal outside shared/src/store/ ({len(files)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
