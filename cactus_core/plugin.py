"""Hook implementations for Cactus's built-in defaults (defaults are plugins too)."""

from __future__ import annotations

from .plugins import hookimpl


@hookimpl
def cactus_register_backends(register, device):
    from .backends import numpy_ref

    register("numpy_ref", numpy_ref.create, priority=0)


@hookimpl
def cactus_register_routers(register):
    from . import routing

    register("entropy", routing.EntropyRouter)
    register("always_local", routing.AlwaysLocalRouter)
    register("always_cloud", routing.AlwaysCloudRouter)
    from .probe import ProbeRouter

    register("probe", ProbeRouter)
