"""The plugin system: built-ins, a real out-of-tree distribution found through
its entry point, selection by priority, overrides, and per-op fallback."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import cactus_core as cactus
from cactus_core import plugins
from cactus_core.device import detect_device
from cactus_core.errors import BackendError, PluginError
from cactus_core.graph import Backend, Ops
from cactus_core.plugins import hookimpl
from distributions import autoloading, installed

EXAMPLE = os.path.join(os.path.dirname(__file__), "fixtures", "example_backend")


@pytest.fixture(scope="module")
def installed_example(tmp_path_factory):
    """pip-install the example plugin distribution into a private directory."""
    with installed([Path(EXAMPLE)], tmp_path_factory.mktemp("dists"), ("cactus_example_backend",)) as target:
        yield target


@pytest.fixture
def autoload(monkeypatch, installed_example):
    with autoloading(monkeypatch, "example_backend"):
        yield


def test_builtins_are_plugins_too(plugin_manager):
    assert "cactus_core" in plugins.plugin_names()
    names = [b.name for b in plugins.backends()]
    assert names[-1] == "numpy_ref"
    assert {"entropy", "always_local", "always_cloud"} <= set(plugins.routers())


def test_out_of_tree_distribution_is_registered_and_selected(autoload):
    assert "example_backend" in plugins.plugin_names()
    infos = {b.name: b for b in plugins.backends()}
    assert infos["example"].priority == 50 and infos["example"].plugin == "example_backend"
    assert not infos["example_gpu"].available
    chain = plugins.select_backends("auto")
    assert [b.name for b in chain] == ["example", "numpy_ref"]


def test_per_op_fallback_runs_a_whole_model(autoload, tmp_path):
    from tinymodel import make_chat_model

    engine = cactus.load(make_chat_model(tmp_path / "m"))
    assert engine.backend == "example"
    assert engine.ops.backend_for("linear", "float32") == "example"
    assert engine.ops.backend_for("rms_norm") == "numpy_ref"
    before = type(engine.ops.backends[0]).calls
    r = engine.complete([{"role": "user", "content": "hi"}], max_tokens=3)
    assert r["success"] and r["backend"] == "example"
    assert type(engine.ops.backends[0]).calls > before


def test_load_plugins_filter_excludes_others(monkeypatch, installed_example):
    monkeypatch.delenv("CACTUS_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setenv("CACTUS_LOAD_PLUGINS", "something_else")
    plugins.reset_plugin_manager()
    try:
        assert "example_backend" not in plugins.plugin_names()
    finally:
        plugins.reset_plugin_manager()


def test_backend_override_and_errors(autoload, monkeypatch):
    assert plugins.select_backends("numpy_ref")[0].name == "numpy_ref"
    monkeypatch.setenv("CACTUS_BACKEND", "numpy_ref")
    assert plugins.select_backends("auto")[0].name == "numpy_ref"
    with pytest.raises(BackendError, match=r"unknown backend 'metal'; usable on this device: example, numpy_ref"):
        plugins.select_backends("metal")
    with pytest.raises(BackendError, match="not usable here \\(needs a GPU"):
        plugins.select_backends("example_gpu")


class HalfBackend(Backend):
    """Implements one op and one format only."""

    name = "half"
    formats = frozenset({"float16"})

    def linear(self, x, w, bias=None):
        return (x @ w.astype(np.float32).T).astype(np.float32) + 1000.0  # marked output


class HalfPlugin:
    @hookimpl
    def cactus_register_backends(self, register, device):
        register("half", HalfBackend, priority=10)


def test_fallback_by_weight_format(register_plugin):
    register_plugin(HalfPlugin(), name="half_plugin")
    ops = Ops(plugins.select_backends())
    x = np.ones((1, 1, 4), dtype=np.float32)
    assert ops.linear(x, np.ones((2, 4), dtype=np.float16))[0, 0, 0] == 1004.0
    assert ops.linear(x, np.ones((2, 4), dtype=np.float32))[0, 0, 0] == 4.0
    assert ops.backend_for("attention") == "numpy_ref"


class Clash:
    @hookimpl
    def cactus_register_backends(self, register, device):
        register("numpy_ref", HalfBackend)


def test_duplicate_names_are_refused(register_plugin):
    register_plugin(Clash(), name="clash")
    with pytest.raises(PluginError, match="registered by both"):
        plugins.backends()


def test_device_detection_is_sane():
    d = detect_device()
    assert d.os in ("linux", "macos", "windows") and d.arch
    assert d.logical_cores >= d.physical_cores >= 1 or d.logical_cores >= 1
    assert d.total_memory_mb > 0 and 0 < d.available_memory_mb <= d.total_memory_mb
    if d.arch == "arm64":
        assert d.has("neon")
    assert isinstance(d.to_dict()["simd"], list)
