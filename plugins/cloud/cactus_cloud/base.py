"""What every built-in provider shares: config checks, the key, and ``complete``.

A subclass sets ``name`` (and ``default_api_base``/``default_model``) and
implements ``auth_headers``, ``url``, ``request_body``, ``parse`` and
``parse_stream``; third-party providers may subclass it too (see
docs/writing_a_cloud_provider.md).  A provider whose stream is not
server-sent events overrides ``stream_reply`` instead of ``parse_stream``.  The key is kept only inside the transport's headers and its list
of secrets to redact; ``repr`` shows model and api_base, never the key.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Iterator, Optional
from urllib.parse import urlsplit

from cactus_core.errors import CloudError

from . import messages as msgs
from .config import parse_headers
from .sse import Event, iter_events
from .transport import Budget, Transport

# Headers whose values are credentials even when not the api_key itself.
_SECRET_HEADER_WORDS = ("auth", "key", "token", "secret", "cookie", "signature")


class Provider:
    """Base class for HTTP providers built from a config dict."""

    name = "provider"
    default_api_base = ""
    default_model = ""

    def __init__(self, config: dict):
        if not isinstance(config, dict):
            raise CloudError(f"{self.name}: config must be a dict")
        self.model = str(config.get("model") or self.default_model or "")
        if not self.model:
            raise CloudError(f"{self.name}: no model configured; set CACTUS_CLOUD_MODEL")
        self.api_base = str(config.get("api_base") or self.default_api_base).strip().rstrip("/")
        parts = urlsplit(self.api_base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CloudError(f"{self.name}: api_base must be an http(s) URL")
        extra = parse_headers(config.get("headers"), source=f"{self.name} headers")
        key = config.get("api_key") or None
        if key is not None and not isinstance(key, str):
            raise CloudError(f"{self.name}: api_key must be a string")
        max_retries = config.get("max_retries", 2)
        if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
            raise CloudError(f"{self.name}: max_retries must be a whole number >= 0")
        try:
            backoff = float(config.get("retry_backoff_s", 0.5))
        except (TypeError, ValueError):
            raise CloudError(f"{self.name}: retry_backoff_s must be a number of seconds") from None
        secrets = tuple(
            v
            for k, v in extra.items()
            if v and any(w in k.lower() for w in _SECRET_HEADER_WORDS)
        ) + ((key,) if key else ())
        headers = {**self.auth_headers(key), **extra}
        self._transport = Transport(self.name, headers, secrets, max_retries, backoff)

    # -- for subclasses -------------------------------------------------

    def auth_headers(self, key: Optional[str]) -> dict[str, str]:
        raise NotImplementedError

    def url(self, stream: bool) -> str:
        raise NotImplementedError

    def request_body(
        self, messages: list[dict], tools: list[msgs.Tool], max_tokens: int, temperature: float, stream: bool
    ) -> dict:
        raise NotImplementedError

    def force_tool(self, body: dict, name: str) -> None:
        """Make ``body`` demand a tool call: of tool ``name``, or of any tool when ``""``."""
        raise NotImplementedError

    def parse(self, data: Any) -> dict:
        raise NotImplementedError

    def parse_stream(self, events: Iterator[Event], on_token: Callable[[str], Any]) -> dict:
        raise NotImplementedError

    def stream_reply(self, lines: Iterator[str], on_token: Callable[[str], Any]) -> dict:
        """The result of a streamed reply given its raw text lines (default: SSE)."""
        return self.parse_stream(iter_events(lines), on_token)

    # -- the contract ---------------------------------------------------

    def complete(
        self,
        messages: list[dict],
        tools: Optional[list[dict]] = None,
        *,
        max_tokens: int,
        temperature: float,
        timeout_s: float,
        on_token: Optional[Callable[[str], Any]] = None,
        tool_choice: Optional[str] = None,
    ) -> dict:
        """Send the conversation; ``{"response", "function_calls", "model"}``.

        ``timeout_s`` bounds the whole call, retries included.  With
        ``on_token`` the reply is streamed and each text delta passed to it;
        an exception raised by ``on_token`` propagates unchanged.
        ``tool_choice`` forces a call: ``""`` of any tool, a name of that tool
        (``None``: the model decides).
        """
        if not isinstance(timeout_s, (int, float)) or not math.isfinite(timeout_s) or timeout_s <= 0:
            raise CloudError(f"{self.name}: timeout_s must be a positive number of seconds")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise CloudError(f"{self.name}: max_tokens must be a positive whole number")
        if not isinstance(temperature, (int, float)) or isinstance(temperature, bool):
            raise CloudError(f"{self.name}: temperature must be a number")
        budget = Budget(timeout_s)
        messages = msgs.check_messages(self.name, messages)
        tools_ = msgs.check_tools(self.name, tools)
        stream = on_token is not None
        body = self.request_body(messages, tools_, max_tokens, float(temperature), stream)
        if tool_choice is not None:
            if not isinstance(tool_choice, str) or not tools_ or (
                    tool_choice and tool_choice not in {t.name for t in tools_}):
                raise CloudError(f"{self.name}: tool_choice must name one of the tools (or be '' for any)")
            self.force_tool(body, tool_choice)
        if not stream:
            return self.parse(self._transport.post_json(self.url(False), body, budget))
        with self._transport.stream(self.url(True), body, budget) as lines:
            return self.stream_reply(lines, on_token)

    def close(self) -> None:
        """Close pooled connections."""
        self._transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, api_base={self.api_base!r})"

    def bad_reply(self, what: str) -> CloudError:
        """A CloudError for a reply that does not follow the vendor's API."""
        return self._transport.fail(f"unexpected reply from {self.api_base}: {what}")

    def decode(self, data: str) -> Any:
        """JSON from one streamed event, or a CloudError naming the problem."""
        try:
            return json.loads(data)
        except ValueError:
            raise self.bad_reply(f"stream event is not JSON: {data[:80]!r}") from None
