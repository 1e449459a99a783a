"""Install plugin distributions the way a user would, into a private folder, for tests."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Iterator

from cactus_core import plugins


@contextlib.contextmanager
def installed(sources: Iterable[Path], work: Path, modules: tuple[str, ...]) -> Iterator[Path]:
    """pip-install copies of ``sources`` (so builds leave nothing in the tree) into
    ``work/site`` and put it on ``sys.path``; afterwards forget ``modules``."""
    target = work / "site"
    copies = []
    for src in sources:
        dst = work / Path(src).name
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        copies.append(str(dst))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), *copies],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    sys.path.insert(0, str(target))
    try:
        yield target
    finally:
        sys.path.remove(str(target))
        for name in [m for m in sys.modules if m.startswith(modules)]:
            del sys.modules[name]


@contextlib.contextmanager
def autoloading(monkeypatch, names: str) -> Iterator[None]:
    """Entry-point autoload switched on for the named plugins only, with a fresh manager."""
    monkeypatch.delenv("CACTUS_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setenv("CACTUS_LOAD_PLUGINS", names)
    plugins.reset_plugin_manager()
    try:
        yield
    finally:
        plugins.reset_plugin_manager()
