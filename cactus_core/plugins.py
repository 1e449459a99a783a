"""The plugin manager: built-in plugins, entry points, and the registries built from them.

Plugins come from the entry-point group ``cactus`` plus the built-in
``cactus_core.plugin`` (numpy_ref and the built-in routers: defaults are plugins
too).  Environment:

- ``CACTUS_DISABLE_PLUGIN_AUTOLOAD=1`` loads no entry points (tests use this and
  register what they need through fixtures);
- ``CACTUS_LOAD_PLUGINS=a,b`` loads only the named entry points;
- ``CACTUS_BACKEND=name`` overrides automatic backend selection.
"""

from __future__ import annotations

import importlib.metadata
import os
from typing import Any, Callable, Optional

import attrs
import pluggy

from . import hookspecs
from .device import Device, detect_device
from .errors import BackendError, PluginError

hookimpl = pluggy.HookimplMarker("cactus")

_pm: Optional[pluggy.PluginManager] = None


@attrs.define
class BackendInfo:
    """A registered backend: what ``cactus plugins`` lists and selection ranks."""

    name: str
    factory: Callable[[], Any]
    priority: int = 0
    unavailable_reason: Optional[str] = None
    plugin: str = ""

    @property
    def available(self) -> bool:
        return self.unavailable_reason is None


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group="cactus"))


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    if os.environ.get("CACTUS_DISABLE_PLUGIN_AUTOLOAD", "").strip() not in ("", "0"):
        return
    wanted = os.environ.get("CACTUS_LOAD_PLUGINS")
    names = None if wanted is None else {n.strip() for n in wanted.split(",") if n.strip()}
    for ep in _entry_points():
        if names is not None and ep.name not in names:
            continue
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        try:
            module = ep.load()
        except Exception as exc:  # a broken plugin must not take the engine down
            raise PluginError(f"plugin '{ep.name}' failed to import: {exc}") from exc
        pm.register(module, name=ep.name)


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, created and populated on first use."""
    global _pm
    if _pm is None:
        pm = pluggy.PluginManager("cactus")
        pm.add_hookspecs(hookspecs)
        from . import plugin as builtin

        pm.register(builtin, name="cactus_core")
        _load_entry_points(pm)
        _pm = pm
    return _pm


def reset_plugin_manager() -> None:
    """Forget the plugin manager so the next use re-reads entry points and env."""
    global _pm
    _pm = None


def plugin_names() -> list[str]:
    """Names of the registered plugins, built-in first."""
    pm = get_plugin_manager()
    return [pm.get_name(p) for p in pm.get_plugins()][::-1]


def _collect(hook_name: str, kind: str, **kwargs) -> dict[str, tuple[Any, dict, str]]:
    """Call a registration hook; returns name -> (object, options, plugin name)."""
    pm = get_plugin_manager()
    found: dict[str, tuple[Any, dict, str]] = {}
    hook = getattr(pm.hook, hook_name)
    for impl in hook.get_hookimpls():
        plugin_name = impl.plugin_name

        def register(name: str, obj: Any, _plugin=plugin_name, **options) -> None:
            if not isinstance(name, str) or not name:
                raise PluginError(f"plugin '{_plugin}' registered a {kind} without a name")
            if name in found and found[name][2] != _plugin:
                raise PluginError(
                    f"{kind} '{name}' is registered by both '{found[name][2]}' and '{_plugin}'"
                )
            found[name] = (obj, options, _plugin)

        impl.function(register=register, **{k: v for k, v in kwargs.items() if k in impl.argnames})
    return found


def backends(device: Optional[Device] = None) -> list[BackendInfo]:
    """All registered backends for ``device``, highest priority first."""
    device = device or detect_device()
    infos = [
        BackendInfo(
            name=name,
            factory=obj,
            priority=int(opts.get("priority", 0)),
            unavailable_reason=opts.get("unavailable_reason"),
            plugin=plugin,
        )
        for name, (obj, opts, plugin) in _collect(
            "cactus_register_backends", "backend", device=device
        ).items()
    ]
    return sorted(infos, key=lambda b: (-b.priority, b.name))


def select_backends(name: Optional[str] = "auto", device: Optional[Device] = None) -> list:
    """Instantiate the backend chain for ``name`` (or ``CACTUS_BACKEND``, or auto).

    The chain starts at the chosen backend and continues with every other
    available backend by priority, so ops the chosen one lacks fall back,
    ending at numpy_ref.
    """
    infos = backends(device)
    usable = [b for b in infos if b.available]
    if name in (None, "", "auto"):
        name = os.environ.get("CACTUS_BACKEND", "auto") or "auto"
    explicit = name != "auto"
    if explicit:
        match = [b for b in infos if b.name == name]
        usable_names = ", ".join(b.name for b in usable) or "none"
        if not match:
            raise BackendError(f"unknown backend '{name}'; usable on this device: {usable_names}")
        if not match[0].available:
            raise BackendError(
                f"backend '{name}' is not usable here ({match[0].unavailable_reason}); "
                f"usable on this device: {usable_names}"
            )
        usable = match + [b for b in usable if b.name != name]
    chain = []
    for i, info in enumerate(usable):
        try:
            chain.append(info.factory())
        except Exception as exc:
            if explicit and i == 0:
                raise BackendError(f"backend '{info.name}' failed to start: {exc}") from exc
            # automatic selection skips a backend that cannot start here
    if not chain:
        raise BackendError("no usable kernel backend on this device")
    return chain


def quantizers() -> dict[str, Any]:
    """Registered quantization schemes by name."""
    return {n: obj for n, (obj, _, _) in _collect("cactus_register_quantizers", "quantizer").items()}


def routers() -> dict[str, Any]:
    """Registered router factories by name."""
    return {n: obj for n, (obj, _, _) in _collect("cactus_register_routers", "router").items()}


def cloud_providers() -> dict[str, Any]:
    """Registered cloud provider factories by name."""
    return {
        n: obj
        for n, (obj, _, _) in _collect("cactus_register_cloud_providers", "cloud provider").items()
    }
