"""Hook implementations of the mlx_ref plugin."""

from __future__ import annotations

from cactus_core.plugins import hookimpl

#: On Apple silicon MLX runs on the GPU: above numpy_ref (0), below cpu_neon (100).
GPU_PRIORITY = 20
#: On other hosts mlx[cpu] links a reference BLAS and pays a numpy round trip per op,
#: so it is measured slower than numpy_ref: it stays selectable by name only.
CPU_PRIORITY = -10


@hookimpl
def cactus_register_backends(register, device):
    from .backend import create, unavailable_reason

    priority = GPU_PRIORITY if device.apple_silicon else CPU_PRIORITY
    register("mlx_ref", create, priority=priority, unavailable_reason=unavailable_reason())
