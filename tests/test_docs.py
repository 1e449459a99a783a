"""docs/ stays true: every hook and each of its arguments is documented."""

from __future__ import annotations

import inspect
import os
import re

from cactus_core import hookspecs

DOCS = os.path.join(os.path.dirname(__file__), "..", "docs")


def _hooks():
    return {n: f for n, f in vars(hookspecs).items() if n.startswith("cactus_") and callable(f)}


def test_every_hook_and_argument_is_documented():
    with open(os.path.join(DOCS, "plugin_hooks.md"), encoding="utf-8") as f:
        text = f.read()
    hooks = _hooks()
    assert len(hooks) >= 4
    for name, fn in hooks.items():
        params = list(inspect.signature(fn).parameters)
        heading = re.search(rf"^## `{name}\(([^)]*)\)`", text, re.M)
        assert heading, f"docs/plugin_hooks.md has no section for {name}"
        assert [p.strip() for p in heading.group(1).split(",")] == params, f"{name} arguments differ"
        section = text[heading.end():].split("\n## ", 1)[0]
        for p in params:
            assert f"`{p}" in section, f"argument {p} of {name} is not described"


def test_every_hookspec_has_a_docstring():
    for name, fn in _hooks().items():
        assert fn.__doc__ and len(fn.__doc__.strip()) > 40, name
