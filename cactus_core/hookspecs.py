"""Hook specifications for Cactus plugins.

Each hook *registers* things and is called once when the plugin manager builds its
registries; none of them is on the per-token path.  Every hook receives a
``register`` callback so the core owns names, de-duplication and priorities.

A plugin implements any subset of these with ``@cactus.hookimpl`` (see
``cactus_core.plugins.hookimpl``) in its ``plugin.py`` and declares itself with::

    [project.entry-points.cactus]
    my_plugin = "my_package.plugin"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import pluggy

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .device import Device

hookspec = pluggy.HookspecMarker("cactus")

BackendRegister = Callable[..., None]
"""``register(name, factory, *, priority=0, unavailable_reason=None)``."""

QuantizerRegister = Callable[..., None]
"""``register(name, quantizer)``."""

RouterRegister = Callable[..., None]
"""``register(name, factory)``."""

CloudProviderRegister = Callable[..., None]
"""``register(name, factory)``."""


@hookspec
def cactus_register_backends(register: BackendRegister, device: "Device") -> None:
    """Register kernel backends usable on ``device``.

    Call ``register(name, factory, priority=0, unavailable_reason=None)`` once per
    backend.  ``factory`` is a zero-argument callable returning a
    :class:`cactus_core.graph.Backend`; it is only called when the backend is
    selected, so heavy or native imports belong inside it.  Higher ``priority``
    wins in automatic selection (numpy_ref is 0).  A plugin that cannot drive
    this device still registers, with ``unavailable_reason`` set to one line
    saying why (``cactus plugins`` shows it and ``--backend`` refuses it).
    """


@hookspec
def cactus_register_quantizers(register: QuantizerRegister) -> None:
    """Register quantization schemes.

    Call ``register(name, quantizer)`` where ``name`` is the scheme as the user
    types it (``"cq4"``, ``"cq3.26"``, ``"gptq4"``...) and ``quantizer`` is an
    object with ``quantize(name, array, **options) -> formats.QuantizedTensor``
    and a ``bits_per_weight`` attribute (the true average, scales included).
    """


@hookspec
def cactus_register_routers(register: RouterRegister) -> None:
    """Register routing policies.

    Call ``register(name, factory)``; ``factory(engine, **options)`` returns an
    object with ``score(prefill) -> float`` giving a confidence in [0, 1] (see
    ``cactus_core.routing.Router``).  Low confidence hands the request to the
    cloud.
    """


@hookspec
def cactus_register_cloud_providers(register: CloudProviderRegister) -> None:
    """Register cloud escalation providers.

    Call ``register(name, factory)``; ``factory(config: dict) -> provider`` where
    ``config`` holds ``model``, ``api_base``, ``api_key`` and ``headers`` (from
    flags, environment or config file) and the provider has
    ``complete(messages, tools=None, *, max_tokens, temperature, timeout_s,
    on_token=None) -> dict`` returning ``{"response": str, "function_calls":
    [{"name": str, "arguments": dict}], "model": str}`` or raising
    :class:`cactus_core.errors.CloudError`.
    """


__all__ = [
    "hookspec",
    "cactus_register_backends",
    "cactus_register_quantizers",
    "cactus_register_routers",
    "cactus_register_cloud_providers",
]
