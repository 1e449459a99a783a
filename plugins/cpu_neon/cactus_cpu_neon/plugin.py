"""Hook implementations of the cpu_neon plugin."""

from __future__ import annotations

from cactus_core.plugins import hookimpl

#: Above numpy_ref (0): preferred whenever the native kernels are built.
PRIORITY = 100


@hookimpl
def cactus_register_backends(register, device):
    from .backend import create, unavailable_reason

    register("cpu_neon", create, priority=PRIORITY, unavailable_reason=unavailable_reason())
