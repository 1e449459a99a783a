"""Hook implementations of the metal plugin."""

from __future__ import annotations

from cactus_core.plugins import hookimpl

#: Above cpu_neon (100) and mlx_ref (20): on Apple silicon the GPU wins.
PRIORITY = 150


@hookimpl
def cactus_register_backends(register, device):
    from .backend import create, unavailable_reason

    register("metal", create, priority=PRIORITY, unavailable_reason=unavailable_reason(device))
