"""Run cactus-metal's MSL kernel bodies on the CPU, in place of ``mx.fast.metal_kernel``.

``metal_kernel(...)`` here has MLX's signature.  Like MLX it writes the Metal
function signature from the inputs' dtypes and the names the body uses
(``const device T* name``, ``name_shape``, ``const constant T& name`` for 0-d
inputs), instantiates the integer template arguments, and dispatches threads
over the grid (threads past the grid edge are not launched).  The body is
compiled with g++ against msl_shim.h and each threadgroup runs as real
std::threads so ``simd_sum`` and ``threadgroup_barrier`` synchronise as on the
GPU.  Each SIMD-group is 32 consecutive threads of its threadgroup.

What it proves: the kernels' indexing, bit unpacking, tiling, reductions and
online softmax compute what numpy_ref computes.  What it cannot: MSL-only
compile rules, GPU memory ordering beyond barriers, or speed.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import subprocess
import tempfile

import numpy as np

SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "msl_shim.h")
_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float16): "half", np.dtype(np.uint8): "uint8_t",
           np.dtype(np.int32): "int", np.dtype(np.uint32): "uint"}
_THREAD_ATTRS = ("thread_position_in_grid", "thread_position_in_threadgroup", "threadgroup_position_in_grid")
_CACHE_DIR = os.path.join(tempfile.gettempdir(), "cactus_msl_emulator")

DRIVER = r"""
extern "C" void launch(void** ins, const int** shapes, void** outs, const int* grid, const int* tg_in) {
  int tg[3], groups[3];
  for (int a = 0; a < 3; ++a) tg[a] = std::min(tg_in[a], grid[a]);  // as MLX's dispatch does
  int size = tg[0] * tg[1] * tg[2];
  for (int a = 0; a < 3; ++a) groups[a] = (grid[a] + tg[a] - 1) / tg[a];
  for (int gz = 0; gz < groups[2]; ++gz) for (int gy = 0; gy < groups[1]; ++gy) for (int gx = 0; gx < groups[0]; ++gx) {
    std::vector<uint3> local;
    for (int z = 0; z < tg[2]; ++z) for (int y = 0; y < tg[1]; ++y) for (int x = 0; x < tg[0]; ++x)
      if (gx * tg[0] + x < grid[0] && gy * tg[1] + y < grid[1] && gz * tg[2] + z < grid[2])
        local.push_back(uint3{uint(x), uint(y), uint(z)});
    int n = int(local.size());
    std::barrier<> group_bar(n);
    std::vector<std::unique_ptr<std::barrier<>>> simd_bars;
    std::vector<float> slots(size_t(n + 32), 0.0f);
    for (int s = 0; s < n; s += 32) simd_bars.emplace_back(new std::barrier<>(std::min(32, n - s)));
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t) threads.emplace_back([&, t] {
      emu = EmuThread{simd_bars[t / 32].get(), slots.data() + (t / 32) * 32, t % 32, std::min(32, n - (t / 32) * 32), &group_bar};
      uint3 l = local[t];
      uint3 g{uint(gx), uint(gy), uint(gz)};
      uint3 p{g.x * tg[0] + l.x, g.y * tg[1] + l.y, g.z * tg[2] + l.z};
      CALL;
    });
    for (auto& th : threads) th.join();
  }
}
"""


def _uses(source: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", source) is not None


class EmulatedKernel:
    """What ``mx.fast.metal_kernel`` returns: call it with MLX's keyword arguments."""

    def __init__(self, mx, name, input_names, output_names, source, header="", **_):
        self.mx, self.name = mx, name
        self.inputs, self.outputs = list(input_names), list(output_names)
        self.source, self.header = source, header
        self._libs: dict = {}

    def _signature(self, arrays) -> tuple[str, str]:
        params, args = [], []
        for i, (name, a) in enumerate(zip(self.inputs, arrays)):
            ctype = _CTYPES[a.dtype]
            if a.ndim == 0:
                params.append(f"const constant {ctype}& {name}")
                args.append(f"*(const {ctype}*)ins[{i}]")
            else:
                params.append(f"const device {ctype}* {name}")
                args.append(f"(const {ctype}*)ins[{i}]")
                if _uses(self.source, f"{name}_shape"):
                    params.append(f"const constant int* {name}_shape")
                    args.append(f"shapes[{i}]")
        for i, name in enumerate(self.outputs):
            params.append(f"device float* {name}")
            args.append(f"(float*)outs[{i}]")
        for attr, var in zip(_THREAD_ATTRS, ("p", "l", "g")):
            if _uses(self.source, attr):
                params.append(f"uint3 {attr}")
                args.append(var)
        return ", ".join(params), ", ".join(args)

    def _library(self, arrays, template):
        params, args = self._signature(arrays)
        tmpl = ", ".join(f"int {k}" for k, _ in template)
        targs = ", ".join(str(int(v)) for _, v in template)
        fn = f"{self.name}<{targs}>" if template else self.name
        code = "\n".join([
            "#define MSL_EMULATE 1", f'#include "{SHIM}"', self.header,
            f"{'template <' + tmpl + '>' if tmpl else ''} void {self.name}({params}) {{{self.source}}}",
            DRIVER.replace("CALL", f"{fn}({args})"),
        ])
        key = hashlib.sha256(code.encode()).hexdigest()[:20]
        lib = self._libs.get(key)
        if lib is None:
            os.makedirs(_CACHE_DIR, exist_ok=True)
            so = os.path.join(_CACHE_DIR, f"{self.name}_{key}.so")
            if not os.path.exists(so):
                src = so[:-3] + ".cpp"
                with open(src, "w") as f:
                    f.write(code)
                res = subprocess.run(["g++", "-std=c++20", "-O0", "-shared", "-fPIC", "-pthread", src, "-o", so + ".tmp"],
                                     capture_output=True, text=True)
                if res.returncode:
                    raise RuntimeError(f"emulated build of {self.name} failed:\n{res.stderr[-3000:]}")
                os.replace(so + ".tmp", so)
            lib = self._libs[key] = ctypes.CDLL(so)
        return lib

    def __call__(self, *, inputs, grid, threadgroup, output_shapes, output_dtypes, template=(), **_):
        mx = self.mx
        arrays = [np.array(np.asarray(a), order="C", copy=True) for a in inputs]  # keeps 0-d
        lib = self._library(arrays, list(template))
        outs = [np.zeros(shape, dtype=np.float32) for shape in output_shapes]
        shapes = [np.asarray(a.shape if a.ndim else (1,), dtype=np.int32) for a in arrays]
        ptrs = lambda xs: (ctypes.c_void_p * len(xs))(*[x.ctypes.data for x in xs])  # noqa: E731
        int_ptrs = (ctypes.POINTER(ctypes.c_int) * len(shapes))(
            *[s.ctypes.data_as(ctypes.POINTER(ctypes.c_int)) for s in shapes])
        lib.launch(ptrs(arrays), int_ptrs, ptrs(outs), (ctypes.c_int * 3)(*grid), (ctypes.c_int * 3)(*threadgroup))
        return [mx.array(o).astype(dt) for o, dt in zip(outs, output_dtypes)]


def metal_kernel_emulator(mx):
    """A drop-in for ``mx.fast.metal_kernel`` that runs kernels on the CPU."""
    return lambda **spec: EmulatedKernel(mx, **spec)
