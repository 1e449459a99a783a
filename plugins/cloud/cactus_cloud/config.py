"""Cloud configuration from flags and environment, with key-routing rules.

The one rule that matters for privacy: a vendor's own key variable
(``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``/``GOOGLE_API_KEY``)
is only ever used for that vendor's provider talking to that vendor's official
host.  A custom ``api_base`` (a proxy, a local vLLM, another company's endpoint)
gets a key only when one is given explicitly (``CACTUS_CLOUD_API_KEY`` or
``--cloud-api-key``), so pointing Cactus at a new URL never leaks a key that
happens to sit in the environment.

Setting a vendor key alone does not turn cloud handoff on: the user opts in
with ``CACTUS_CLOUD_PROVIDER``, ``CACTUS_CLOUD_MODEL`` or ``CACTUS_CLOUD_API_BASE``
(or the matching flags).
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional
from urllib.parse import urlsplit

import structlog
from cactus_core.errors import CloudError

log = structlog.get_logger("cactus_cloud")

# provider -> (default api_base, default model, vendor key variables in order)
VENDORS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "openai": ("https://api.openai.com/v1", "gpt-4o-mini", ("OPENAI_API_KEY",)),
    "anthropic": ("https://api.anthropic.com", "claude-haiku-4-5", ("ANTHROPIC_API_KEY",)),
    "gemini": (
        "https://generativelanguage.googleapis.com",
        "gemini-2.5-flash",
        ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    ),
}

_ENV = {
    "provider": "CACTUS_CLOUD_PROVIDER",
    "model": "CACTUS_CLOUD_MODEL",
    "api_base": "CACTUS_CLOUD_API_BASE",
    "api_key": "CACTUS_CLOUD_API_KEY",
    "headers": "CACTUS_CLOUD_HEADERS",
    "max_retries": "CACTUS_CLOUD_MAX_RETRIES",
}


def parse_headers(value: Any, source: str = "CACTUS_CLOUD_HEADERS") -> dict[str, str]:
    """Headers from a dict, a JSON object string, or ``K=V,K2=V2``.

    Error messages name the position of a bad entry, never its value: header
    values are often credentials.
    """
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "["):
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise CloudError(f"{source} is not valid JSON (at character {exc.pos})") from None
            if not isinstance(obj, dict):
                raise CloudError(f"{source} must be a JSON object or K=V,K2=V2")
            items = list(obj.items())
        else:
            items = []
            for i, part in enumerate(p for p in text.split(",") if p.strip()):
                if "=" not in part:
                    raise CloudError(f"{source}: entry {i + 1} has no '='; use K=V,K2=V2 or JSON")
                k, v = part.split("=", 1)
                items.append((k, v))
    else:
        raise CloudError(f"{source} must be a dict, a JSON object or K=V,K2=V2")
    headers = {}
    for i, (k, v) in enumerate(items):
        k = str(k).strip()
        if not k or any(c in k for c in " :\r\n\t") or not isinstance(v, (str, int, float)):
            raise CloudError(f"{source}: header {i + 1} has an invalid name or a non-text value")
        v = str(v).strip()
        if "\n" in v or "\r" in v:
            raise CloudError(f"{source}: header '{k}' value contains a line break")
        headers[k] = v
    return headers


def official_host(provider: str, api_base: Optional[str]) -> bool:
    """True when ``api_base`` is unset or is ``provider``'s own HTTPS host."""
    if provider not in VENDORS:
        return False
    if not api_base:
        return True
    want, got = urlsplit(VENDORS[provider][0]), urlsplit(api_base.strip())
    return got.scheme == "https" and (got.hostname or "").lower() == want.hostname


def infer_provider(model: Optional[str]) -> str:
    """The provider a bare model name most likely belongs to (default openai)."""
    name = (model or "").lower().removeprefix("models/")
    if name.startswith("claude"):
        return "anthropic"
    if name.startswith("gemini") or name.startswith("gemma"):
        return "gemini"
    return "openai"


def _vendor_key(provider: str, env: Mapping[str, str]) -> Optional[str]:
    for var in VENDORS[provider][2]:
        if env.get(var, "").strip():
            return env[var].strip()
    return None


def from_env(
    overrides: Optional[Mapping[str, Any]] = None, env: Optional[Mapping[str, str]] = None
) -> Optional[dict]:
    """The cloud provider config, or None when cloud handoff is not configured.

    ``overrides`` (from CLI flags or ``complete(cloud=...)``) win over the
    environment; None values in it are ignored.  The result has ``provider``,
    ``model``, ``api_base``, ``api_key`` (may be None), ``headers`` and
    ``max_retries``; pass it to ``cloud_providers()[cfg["provider"]](cfg)``.
    """
    env = os.environ if env is None else env
    given = {k: v for k, v in (overrides or {}).items() if v is not None and v != ""}
    cfg: dict[str, Any] = {}
    for key, var in _ENV.items():
        if key in given:
            cfg[key] = given[key]
        elif env.get(var, "").strip():
            cfg[key] = env[var].strip()
    if not any(k in cfg for k in ("provider", "model", "api_base")):
        return None

    provider = str(cfg.get("provider") or "").strip().lower()
    if not provider:
        provider = "openai" if "api_base" in cfg else infer_provider(cfg.get("model"))
    cfg["provider"] = provider
    defaults = VENDORS.get(provider)
    if "model" not in cfg and defaults:
        cfg["model"] = defaults[1]
    if "api_base" not in cfg and defaults:
        cfg["api_base"] = defaults[0]
    cfg["headers"] = parse_headers(cfg.get("headers"))
    if "max_retries" in cfg:
        try:
            cfg["max_retries"] = int(cfg["max_retries"])
        except (TypeError, ValueError):
            raise CloudError("CACTUS_CLOUD_MAX_RETRIES must be a whole number") from None

    if "api_key" not in cfg:
        cfg["api_key"] = None
        if defaults:
            key = _vendor_key(provider, env)
            if key and official_host(provider, cfg.get("api_base")):
                cfg["api_key"] = key
            elif key:
                # Say so (without the key): a silent 401 from a proxy is confusing.
                log.info(
                    "cloud_vendor_key_withheld",
                    provider=provider,
                    reason="api_base is not the vendor's host; set CACTUS_CLOUD_API_KEY",
                )
    return cfg
