"""mlx_ref beyond the shared suite: RoPE at long positions, the weight cache,
one-line errors, and how the plugin registers (available, or the install hint)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from cactus_core import plugins
from cactus_core.device import detect_device
from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.errors import BackendError
from cactus_core.formats import BFloat16, f32_to_bf16


def test_rope_is_exact_far_into_the_context(mlx_backend):
    # mx.fast.rope forms angles in float32 and is ~1.6e-3 off by position 30000;
    # the backend builds float64 angle tables like numpy_ref and agrees exactly.
    inv = (1.0 / 10000 ** (np.arange(0, 64, 2) / 64)).astype(np.float32)
    x = np.random.default_rng(0).standard_normal((1, 2, 8, 64)).astype(np.float32)
    pos = np.arange(30000, 30008)
    np.testing.assert_allclose(mlx_backend.rope(x, pos, inv), NumpyBackend().rope(x, pos, inv), rtol=0, atol=1e-6)


def test_weights_convert_once_and_are_dropped_with_their_source(mlx_backend):
    rng = np.random.default_rng(0)
    w = BFloat16(f32_to_bf16(rng.standard_normal((32, 16)).astype(np.float32)))
    assert mlx_backend.prepare(w) is w  # the model keeps the original (fallback-safe) object
    cached = len(mlx_backend._weights)
    x = rng.standard_normal((1, 4, 16)).astype(np.float32)
    for _ in range(3):
        mlx_backend.linear(x, w)
    mlx_backend.embedding(w, np.array([1, 2]))  # a tied table reads the same copy
    assert len(mlx_backend._weights) == cached
    del w
    assert len(mlx_backend._weights) == cached - 1


def test_outputs_are_plain_writable_float32(mlx_backend):
    y = mlx_backend.activation(np.ones((2, 3), dtype=np.float32), "silu")
    assert y.dtype == np.float32 and y.flags.c_contiguous and y.flags.writeable
    y += 1.0  # callers may update results in place


def test_bad_arguments_are_one_line_errors(mlx_backend):
    with pytest.raises(ValueError, match="input has 5 features, weight expects 4"):
        mlx_backend.linear(np.zeros((1, 5), np.float32), np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"token id out of range"):
        mlx_backend.embedding(np.zeros((10, 4), np.float32), np.array([10]))
    with pytest.raises(ValueError, match="unknown activation 'swish2'"):
        mlx_backend.activation(np.zeros(3, np.float32), "swish2")
    with pytest.raises(ValueError, match="power of two"):
        mlx_backend.hadamard(np.zeros((1, 12), np.float32), 12)


def test_device_is_mlx_default(mlx_backend):
    import mlx.core as mx

    assert mlx_backend.device == mx.default_device()
    assert str(mx.default_device()) in mlx_backend.describe()


def test_plugin_registers_usable_backend(mlx_backend_module, register_plugin):
    from cactus_mlx_ref import plugin

    register_plugin(plugin, name="mlx_ref")
    info = {b.name: b for b in plugins.backends()}["mlx_ref"]
    expected = plugin.GPU_PRIORITY if detect_device().apple_silicon else plugin.CPU_PRIORITY
    assert info.available and info.priority == expected < 100
    chain = plugins.select_backends("mlx_ref")
    assert [b.name for b in chain][:1] == ["mlx_ref"] and chain[-1].name == "numpy_ref"


def test_missing_mlx_gives_install_hint(register_plugin, monkeypatch):
    from cactus_mlx_ref import plugin
    from cactus_mlx_ref.backend import INSTALL_HINT

    monkeypatch.setitem(sys.modules, "mlx.core", None)  # `import mlx.core` now fails
    register_plugin(plugin, name="mlx_ref")
    info = {b.name: b for b in plugins.backends()}["mlx_ref"]
    assert info.unavailable_reason == INSTALL_HINT == "mlx is not installed: pip install 'mlx[cpu]'"
    with pytest.raises(BackendError) as exc:
        plugins.select_backends("mlx_ref")
    assert "\n" not in str(exc.value) and INSTALL_HINT in str(exc.value)
    assert "usable on this device: numpy_ref" in str(exc.value)
