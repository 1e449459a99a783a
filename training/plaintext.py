"""General English text for the model: docstrings of the running Python's standard library.

The CPython standard library is under the Python Software Foundation License 2.0,
which allows use and derivative works; we only learn from the text (it is not shipped
with the model). The corpus depends on the Python version that runs this (3.11 here,
3.12 on the training GPU), so record that version next to any result.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import sys
import sysconfig
from pathlib import Path

_SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "turtledemo",
              "ensurepip", "__pycache__", "tkinter", "pydoc_data"}


def _docstrings(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc and len(doc) >= 120 and doc.isascii():
                out.append(inspect.cleandoc(doc))
    return out


def stdlib_docs(max_chars: int = 6_000_000) -> dict[str, list[str]]:
    """Deduplicated docstrings (>=120 chars), split ~97/3 into train/val by content hash."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if not (_SKIP_DIRS & set(p.relative_to(root).parts)))
    seen: set[str] = set()
    out: dict[str, list[str]] = {"train": [], "val": []}
    total = 0
    for f in files:
        for doc in _docstrings(f):
            h = hashlib.sha1(doc.encode()).hexdigest()
            if h in seen:
                continue
            seen.add(h)
            out["val" if int(h[:4], 16) % 100 < 3 else "train"].append(doc)
            total += len(doc)
            if total >= max_chars:
                return out
    return out


if __name__ == "__main__":
    docs = stdlib_docs()
    print(sys.version.split()[0], {k: (len(v), sum(map(len, v))) for k, v in docs.items()})
    print(docs["train"][0][:400])
