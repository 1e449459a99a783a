"""Handing a request to the next tier: a larger local model or a cloud provider.

Nothing leaves the device unless a provider is configured and handoff is not
disabled (``--no-cloud-handoff``, ``cloud=False`` or
``CACTUS_DISABLE_CLOUD_HANDOFF=1``: then no provider is even constructed, so
no connection can be opened).  Before anything is sent, personal data (e-mail
addresses, phone numbers, card and account numbers) is replaced by
placeholders such as ``[EMAIL_1]``; the cloud's answer has them put back on the
device, so the user sees the real values and the provider never does.
"""

from __future__ import annotations

import copy
import json
import os
import re
from typing import Any, Optional

from . import plugins
from .errors import CactusError, CloudError

# Reasons reported in ``cloud_handoff_reason``.
CONFIDENT, LOW_CONFIDENCE, NO_PROVIDER, DISABLED, TIMEOUT = (
    "confident", "low_confidence", "no_provider", "disabled", "cloud_timeout")


def _luhn_ok(digits: str) -> bool:
    total, alt = 0, False
    for ch in reversed(digits):
        d = int(ch)
        if alt:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
        alt = not alt
    return total % 10 == 0


_PATTERNS: list[tuple[str, re.Pattern, Any]] = [
    ("email", re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"), None),
    ("iban", re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b"), None),
    ("card", re.compile(r"\b\d(?:[ -]?\d){12,18}\b"),
     lambda m: _luhn_ok(re.sub(r"\D", "", m.group(0)))),
    ("account", re.compile(r"(?i)\b(?:account|acct|a/c)(?:\s*(?:no\.?|number|#))?[:\s#]*\d[\d -]{5,20}\d\b"), None),
    ("phone", re.compile(r"(?<![\w])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{2,4}\)[\s.-]?)?\d{2,4}(?:[\s.-]\d{2,4}){1,4}(?![\w])"),
     lambda m: 7 <= len(re.sub(r"\D", "", m.group(0))) <= 15),
]
KINDS = tuple(k for k, _, _ in _PATTERNS)


class Redactor:
    """Replaces personal data with numbered placeholders and can put it back."""

    def __init__(self, kinds: Optional[set] = None):
        self.kinds = set(KINDS if kinds is None else kinds)
        self.mapping: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    def text(self, s: str) -> str:
        for kind, pattern, accept in _PATTERNS:
            if kind not in self.kinds:
                continue

            def sub(m, kind=kind, accept=accept):
                if accept is not None and not accept(m):
                    return m.group(0)
                if "[" + kind.upper() in m.group(0):
                    return m.group(0)
                for placeholder, original in self.mapping.items():
                    if original == m.group(0):
                        return placeholder
                self.counts[kind] = self.counts.get(kind, 0) + 1
                placeholder = f"[{kind.upper()}_{self.counts[kind]}]"
                self.mapping[placeholder] = m.group(0)
                return placeholder

            s = pattern.sub(sub, s)
        return s

    def messages(self, messages: list[dict]) -> list[dict]:
        out = copy.deepcopy(messages)
        for m in out:
            if isinstance(m.get("content"), str):
                m["content"] = self.text(m["content"])
            for call in m.get("tool_calls") or []:
                fn = call.get("function", call)
                if "arguments" in fn:
                    fn["arguments"] = self._value(fn["arguments"])
        return out

    def _value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {k: self._value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self._value(x) for x in v]
        return v

    def restore(self, v: Any) -> Any:
        """Put the original values back into the cloud's answer."""
        if isinstance(v, str):
            for placeholder, original in self.mapping.items():
                v = v.replace(placeholder, original)
            return v
        if isinstance(v, dict):
            return {k: self.restore(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self.restore(x) for x in v]
        return v

    @property
    def report(self) -> list[dict]:
        return [{"type": k, "count": n} for k, n in sorted(self.counts.items())]


def handoff_disabled(request_cloud: Any, engine_options: dict) -> bool:
    """Whether every form of cloud handoff is switched off for this request."""
    env = os.environ.get("CACTUS_DISABLE_CLOUD_HANDOFF", "").strip().lower()
    return request_cloud is False or engine_options.get("cloud") is False or env in ("1", "true", "yes")


def cloud_config(request_cloud: Any, engine_options: dict) -> Optional[dict]:
    """The provider configuration: the request's dict, then the engine's, then the environment.

    With the cloud plugin installed its ``from_env`` fills the gaps (vendor
    defaults, each vendor's own key variable); without it only the
    ``CACTUS_CLOUD_*`` variables are read.
    """
    overrides = request_cloud if isinstance(request_cloud, dict) else engine_options.get("cloud")
    overrides = overrides if isinstance(overrides, dict) else None
    try:
        from cactus_cloud.config import from_env
    except ImportError:
        from_env = None
    if from_env is not None:
        return from_env(overrides)
    config = dict(overrides or {})
    for key in ("provider", "model", "api_base", "api_key", "headers"):
        value = os.environ.get(f"CACTUS_CLOUD_{key.upper()}")
        if value and key not in config:
            config[key] = value
    return config if config.get("provider") else None


def error_reason(exc: CactusError) -> str:
    """A short reason for a failed cloud call: ``cloud_timeout`` or ``cloud_error[: status]``."""
    reason = getattr(exc, "reason", None)
    if reason:
        return reason
    text = str(exc).lower()
    if "timed out" in text or "timeout" in text:
        return TIMEOUT
    m = re.search(r"\b(?:status|http)\s*([45]\d\d)\b", text)
    return f"cloud_error: {m.group(1)}" if m else "cloud_error"


def call_cloud(config: dict, messages: list[dict], tools: Optional[list], *, max_tokens: int,
               temperature: float, timeout_s: float, on_token, redact: Any = True,
               tool_choice: Optional[str] = None) -> dict:
    """Send the (redacted) conversation to the configured provider; raise CloudError on failure.

    ``tool_choice`` is the engine's forced call (``""`` any tool, else a name); it is
    passed only when set, so providers written before it keep working."""
    name = config.get("provider", "openai")
    providers = plugins.cloud_providers()
    if name not in providers:
        known = ", ".join(sorted(providers)) or "none installed"
        raise CloudError(f"cloud provider '{name}' is not installed (available: {known})")
    kinds = None if redact is True else (set() if not redact else set(redact))
    redactor = Redactor(kinds)
    safe = redactor.messages(messages)
    provider = providers[name](config)
    forced = {} if tool_choice is None else {"tool_choice": tool_choice}
    answer = provider.complete(safe, tools, max_tokens=max_tokens, temperature=temperature,
                               timeout_s=timeout_s, on_token=on_token, **forced)
    calls = []
    for c in answer.get("function_calls") or []:
        args = c.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = {"_raw": args}
        calls.append({"name": c.get("name", ""), "arguments": redactor.restore(args)})
    return {"response": redactor.restore(answer.get("response") or ""), "function_calls": calls,
            "model": answer.get("model"), "redactions": redactor.report}
