"""What can be checked of cactus-metal without a Mac: the plugin registers as
unavailable with its reason, the MSL kernel bodies parse and type-check as C++
against a small MSL shim, and the Python wrapper builds the metal_kernel calls
it should.  GPU results are checked only by test_metal_conformance.py on Apple
silicon."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from cactus_core import plugins
from cactus_core.device import detect_device
from cactus_core.errors import BackendError
from cactus_metal import kernels as K
from cactus_metal.backend import unavailable_reason

SHIM = os.path.join(os.path.dirname(__file__), "msl_shim.h")
THREAD_ARGS = "uint3 thread_position_in_grid, uint3 thread_position_in_threadgroup, uint3 threadgroup_position_in_grid"


def test_plugin_lists_metal_as_unavailable_off_apple_silicon(register_plugin):
    from cactus_metal import plugin

    device = detect_device()
    if device.apple_silicon:
        pytest.skip("this is an Apple silicon Mac: the backend is usable here")
    register_plugin(plugin, name="metal")
    info = {b.name: b for b in plugins.backends()}["metal"]
    assert not info.available and info.unavailable_reason.startswith("needs macOS on Apple silicon")
    with pytest.raises(BackendError) as exc:
        plugins.select_backends("metal")
    msg = str(exc.value)
    assert "\n" not in msg and msg.endswith("usable on this device: numpy_ref")


def _signature(spec: K.KernelSpec) -> str:
    params = []
    for name, typ in zip(spec.inputs, spec.types):
        params += [f"const device {typ}* {name}", f"const constant int* {name}_shape"]
    params += [f"device float* {name}" for name in spec.outputs]
    return ", ".join(params + [THREAD_ARGS])


LAUNCHES = [
    K.cq_linear_launch(1, 64, 8, 2, 128), K.cq_linear_launch(5, 64, 6, 2, 128),
    K.cq_linear_launch(8, 64, 3, 1, 32), K.cq_linear_launch(40, 64, 8, 4, 128),
    K.cq_linear_launch(33, 64, 4, 1, 64), K.rms_norm_launch(3, True), K.rope_launch(6, 64),
    K.gated_activation_launch(100, "gelu"), K.attention_launch(1, 8, 1, 128),
]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to syntax-check the MSL sources")
def test_kernel_sources_type_check_as_cpp(tmp_path):
    units = [f'#include "{SHIM}"', K.HEADER]
    for name, spec in K.KERNELS.items():
        launches = [launch for launch in LAUNCHES if launch.kernel == name]
        assert launches, f"no launch exercises {name}"
        tmpl = ", ".join(f"int {t}" for t, _ in launches[0].template)
        units.append(f"{'template <' + tmpl + '> ' if tmpl else ''}void {spec.name}({_signature(spec)}) {{{spec.source}}}")
        for i, launch in enumerate(launches):  # taking the address instantiates the template
            args = ", ".join(str(v) for _, v in launch.template)
            units.append(f"auto* use_{spec.name}_{i} = &{spec.name}{'<' + args + '>' if args else ''};")
    src = tmp_path / "kernels.cpp"
    src.write_text("\n".join(units))
    res = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wno-unused-variable", str(src)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.mark.parametrize("rows,expect", [(1, "cq_matvec"), (8, "cq_matvec"), (9, "cq_matmul"), (512, "cq_matmul")])
def test_cq_launch_covers_every_output(rows, expect):
    n_out = 100
    launch = K.cq_linear_launch(rows, n_out, 8, 2, 128)
    assert launch.kernel == expect
    gx, gy, _ = launch.grid
    tx, ty, _ = launch.threadgroup
    assert tx * ty <= 1024 and gx % tx == 0 and gy % ty == 0
    if expect == "cq_matvec":  # one SIMD-group per output row, all rows in registers
        assert (gx, gy) == (32, n_out) and dict(launch.template)["M"] == rows
    else:  # 32x32 output tiles
        assert gx // tx * K.TILE >= n_out and gy // ty * K.TILE >= rows


class _Recorder:
    """Stands in for mx.fast.metal_kernel: records each build and call."""

    def __init__(self, mx):
        self.mx, self.built, self.calls = mx, {}, []

    def __call__(self, **spec):
        self.built[spec["name"]] = spec

        def run(**call):
            self.calls.append((spec["name"], call))
            return [self.mx.zeros(shape, dtype=dt) for shape, dt in zip(call["output_shapes"], call["output_dtypes"])]

        return run


def test_wrapper_builds_the_right_kernel_calls(monkeypatch):
    mx = pytest.importorskip("mlx.core", reason="mlx is not installed: pip install 'mlx[cpu]'")
    from cactus_core.formats import CQTensor, pack_bits
    from cactus_metal.backend import MetalBackend

    rec = _Recorder(mx)
    monkeypatch.setattr(mx.fast, "metal_kernel", rec)
    b = MetalBackend()
    rng = np.random.default_rng(0)
    n, n_out = 64, 24
    w = CQTensor((n_out, n), dict(index_bits=6, vec_dim=2, group_size=32, block_size=32, seed=1),
                 codes=pack_bits(rng.integers(0, 64, size=(n_out, n // 2)), 6),
                 scales=np.ones((n_out, 2), np.float16), codebook=np.ones((64, 2), np.float16),
                 signs=np.zeros(n // 8, np.uint8))
    assert b.linear(rng.standard_normal((1, 3, n)).astype(np.float32), w).shape == (1, 3, n_out)
    assert b.linear(rng.standard_normal((20, n)).astype(np.float32), w).shape == (20, n_out)
    b.rms_norm(np.ones((2, 5, 16), np.float32), np.ones(16, np.float32), 1e-6, unit_offset=True)
    b.rope(np.ones((1, 2, 3, 16), np.float32), np.arange(3), np.ones(4, np.float32))
    b.gated_activation(np.ones((1, 3, 7), np.float32), np.ones((1, 3, 7), np.float32), "gelu_tanh")
    b.attention(np.ones((1, 4, 2, 16), np.float32), np.ones((1, 2, 9, 16), np.float32),
                np.ones((1, 2, 9, 16), np.float32), scale=0.25, q_offset=7, sliding_window=4)

    assert [name for name, _ in rec.calls] == ["cactus_cq_matvec", "cactus_cq_matmul", "cactus_rms_norm",
                                               "cactus_rope", "cactus_gated_activation", "cactus_attention"]
    for name, call in rec.calls:
        spec = next(s for s in K.KERNELS.values() if s.name == name)
        assert rec.built[name]["input_names"] == list(spec.inputs)
        assert len(call["inputs"]) == len(spec.inputs)
        for arr, typ in zip(call["inputs"], spec.types):
            want = {"float": mx.float32, "half": mx.float16, "uint8_t": mx.uint8, "int": mx.int32}[typ]
            assert arr.dtype == want and arr.ndim >= 1, f"{name}: input of type {typ} passed as {arr.dtype}"
        for tname, _ in call["template"]:
            assert tname in spec.source or tname in K.HEADER
    matvec = rec.calls[0][1]
    assert matvec["inputs"][1].shape == (n_out, 6 * 32 // 8 + 2)  # codes padded by two bytes a row
    assert dict(matvec["template"]) == {"BITS": 6, "VD": 2, "GROUP": 32, "M": 3}
    attn = rec.calls[-1][1]
    assert attn["inputs"][3].tolist() == [7, 1, 4] and attn["grid"] == (32, 2, 4)


def test_cli_backend_metal_is_one_line_off_apple_silicon(register_plugin, tmp_path, capsys):
    from cactus_core.cli import main
    from cactus_metal import plugin
    from tinymodel import make_chat_model

    if detect_device().apple_silicon:
        pytest.skip("this is an Apple silicon Mac: the backend is usable here")
    register_plugin(plugin, name="metal")
    model = make_chat_model(tmp_path / "m", num_hidden_layers=1)
    capsys.readouterr()  # drop the model writer's progress bar
    rc = main(["benchmark", model, "--backend", "metal", "--prompt-tokens", "4", "--gen-tokens", "2",
               "--repeats", "1"])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and "\n" not in err
    assert err.startswith("error: backend 'metal' is not usable here (needs macOS on Apple silicon")
    assert err.endswith("usable on this device: numpy_ref")
