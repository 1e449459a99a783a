"""Shared fixtures.  Tests never autoload installed plugins: each test that needs
one registers it explicitly and unregisters it afterwards."""

from __future__ import annotations

import os
import sys

import pytest

os.environ["CACTUS_DISABLE_PLUGIN_AUTOLOAD"] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tests use tiny matrices, where OpenBLAS's thread pool only spins against the
# other processes of a busy 2-core machine: one thread is far faster there.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `import conformance`

from cactus_core import plugins  # noqa: E402


@pytest.fixture
def plugin_manager():
    """A fresh plugin manager; any plugin a test registers is gone afterwards."""
    plugins.reset_plugin_manager()
    pm = plugins.get_plugin_manager()
    yield pm
    plugins.reset_plugin_manager()


@pytest.fixture
def register_plugin(plugin_manager):
    """Register a test plugin object (module or class instance) for one test."""
    registered = []

    def register(obj, name=None):
        name = plugin_manager.register(obj, name=name)
        registered.append(obj)
        return name

    yield register
    for obj in registered:
        if plugin_manager.is_registered(obj):
            plugin_manager.unregister(obj)
