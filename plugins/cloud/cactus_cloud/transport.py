"""HTTP for every provider: a total time budget, retries, and key-free errors.

``timeout_s`` given to ``complete()`` is the whole budget: connecting, waiting,
reading, every retry and every back-off sleep.  Three things enforce it:

- each attempt gets an httpx timeout equal to what is left of the budget;
- once headers arrive, a watchdog shuts the socket down at the deadline, so a
  body that trickles or stalls mid-stream cannot outlive the budget;
- a back-off (or a server's ``Retry-After``) that would not fit in the budget
  is not slept: the call fails at once and says why.

Retried: HTTP 408, 429 and 5xx, and connection errors.  Not retried: other
4xx (the request is wrong), 2xx bodies that are not what the API promises, and
streams that break after the first byte (text may already be shown to the user).
"""

from __future__ import annotations

import email.utils
import json
import random
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import httpx
import structlog
from cactus_core.errors import CloudError

log = structlog.get_logger("cactus_cloud")

RETRY_STATUS = frozenset({408, 429}) | frozenset(range(500, 600))
MAX_ERROR_BODY = 64 * 1024


class Budget:
    """A deadline on the monotonic clock."""

    def __init__(self, seconds: float):
        self.total = float(seconds)
        self.deadline = time.monotonic() + self.total

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def expired(self) -> bool:
        return self.remaining() <= 0


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret, and any word sharing a secret's 8-char head
    or tail (vendors echo keys half-masked: ``sk-abcd****wxyz``), replaced."""
    for s in secrets:
        if s and s in text:
            text = text.replace(s, "***")
    if not any(len(s) >= 16 for s in secrets):
        return text
    words = text.split(" ")
    for i, w in enumerate(words):
        for s in secrets:
            if len(s) >= 16 and (s[:8] in w or s[-8:] in w):
                words[i] = "***"
    return " ".join(words)


def retry_after_s(headers: httpx.Headers) -> Optional[float]:
    """Seconds a server asks us to wait: ``retry-after-ms``, or ``Retry-After``
    as seconds or an HTTP date; None when absent or unreadable."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_message(body: bytes) -> str:
    """The human part of an error body: ``error.message`` in all three vendors'
    JSON shapes, else the start of the text."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        text = body.decode("utf-8", "replace").strip()
        return text[:200] or "(empty body)"
    if isinstance(data, list) and data:  # Gemini sometimes wraps errors in a list
        data = data[0]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or err.get("type")
            if msg:
                return str(msg)[:300]
        elif isinstance(err, str):
            return err[:300]
        if isinstance(data.get("detail"), str):
            return data["detail"][:300]
    return json.dumps(data)[:200]


class _Watchdog:
    """Shuts a response's socket down at the deadline, unblocking any read."""

    def __init__(self, response: httpx.Response, budget: Budget):
        stream = response.extensions.get("network_stream")
        self._sock = stream.get_extra_info("socket") if stream is not None else None
        self._lock = threading.Lock()
        self._done = False
        self.fired = False
        self._timer = threading.Timer(max(0.0, budget.remaining()), self._fire)
        self._timer.daemon = True
        if self._sock is not None:
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.fired = True
            try:
                # The plain-socket shutdown also works under TLS and wakes a
                # thread blocked in recv(); close() alone would not.
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()


class Transport:
    """POSTs JSON for one provider, with retries inside a :class:`Budget`."""

    def __init__(
        self,
        provider: str,
        headers: dict[str, str],
        secrets: tuple[str, ...],
        max_retries: int = 2,
        backoff_s: float = 0.5,
    ):
        self.provider = provider
        self.headers = headers
        self.secrets = secrets
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        # No redirects: a redirect could carry our key headers to another host.
        self.client = httpx.Client(follow_redirects=False, trust_env=True)

    def close(self) -> None:
        self.client.close()

    def fail(self, message: str) -> CloudError:
        return CloudError(redact(f"{self.provider}: {message}", self.secrets))

    def _timeout_error(self, budget: Budget, what: str = "") -> CloudError:
        return self.fail(f"timed out after the {budget.total:g}s budget{what}")

    def post_json(self, url: str, body: dict, budget: Budget) -> Any:
        """POST ``body``; the decoded JSON of a 2xx reply."""
        attempt = 0
        while True:
            response, attempt = self._send(url, body, budget, attempt)
            dog = _Watchdog(response, budget)
            try:
                raw = response.read()
            except httpx.HTTPError as exc:
                if dog.fired or budget.expired():
                    raise self._timeout_error(budget, " while reading the reply") from None
                attempt = self._before_retry(
                    attempt, budget, f"connection broke while reading ({type(exc).__name__})"
                )
                continue
            finally:
                dog.stop()
                response.close()
            try:
                return json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                snippet = raw[:80].decode("utf-8", "replace")
                raise self.fail(f"reply is not JSON (HTTP {response.status_code}): {snippet!r}") from None

    @contextmanager
    def stream(self, url: str, body: dict, budget: Budget) -> Iterator[Iterator[str]]:
        """POST ``body`` and yield the reply's text lines as they arrive."""
        response, _ = self._send(url, body, budget, 0, accept="text/event-stream")
        dog = _Watchdog(response, budget)

        def lines() -> Iterator[str]:
            try:
                for line in response.iter_lines():
                    if budget.expired():
                        raise self._timeout_error(budget, " while streaming")
                    yield line
            except httpx.HTTPError as exc:
                if dog.fired or budget.expired():
                    raise self._timeout_error(budget, " while streaming") from None
                raise self.fail(f"stream broke ({type(exc).__name__}); reply is incomplete") from None

        try:
            yield lines()
        finally:
            dog.stop()
            response.close()

    def _send(
        self, url: str, body: dict, budget: Budget, attempt: int, accept: str = "application/json"
    ) -> tuple[httpx.Response, int]:
        """An open 2xx response (body unread) and the attempt number it took,
        retrying what is worth retrying."""
        host = httpx.URL(url).host
        while True:
            left = budget.remaining()
            if left <= 0:
                raise self._timeout_error(budget)
            headers = {"content-type": "application/json", "accept": accept, **self.headers}
            request = self.client.build_request(
                "POST", url, json=body, headers=headers, timeout=httpx.Timeout(left)
            )
            wait: Optional[float] = None
            try:
                response = self.client.send(request, stream=True)
            except httpx.TimeoutException:
                if budget.expired():
                    raise self._timeout_error(budget, f" waiting for {host}") from None
                reason = f"timed out talking to {host}"
            except httpx.TransportError as exc:
                reason = f"cannot reach {host} ({type(exc).__name__})"
            else:
                if response.status_code < 300:
                    return response, attempt
                detail = self._error_body(response, budget)
                status = response.status_code
                if 300 <= status < 400:
                    raise self.fail(f"HTTP {status} from {host}: redirects are not followed; check api_base")
                if status not in RETRY_STATUS:
                    raise self.fail(f"HTTP {status} from {host}: {detail}")
                reason = f"HTTP {status} from {host}: {detail}"
                wait = retry_after_s(response.headers)
            attempt = self._before_retry(attempt, budget, reason, wait)

    def _error_body(self, response: httpx.Response, budget: Budget) -> str:
        dog = _Watchdog(response, budget)
        chunks, size = [], 0
        try:
            for chunk in response.iter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size >= MAX_ERROR_BODY:
                    break
        except httpx.HTTPError:
            pass  # the status alone is enough to report
        finally:
            dog.stop()
            response.close()
        return error_message(b"".join(chunks))

    def _before_retry(
        self, attempt: int, budget: Budget, reason: str, wait: Optional[float] = None
    ) -> int:
        """Sleep before the next attempt, or raise when retrying cannot help."""
        if attempt >= self.max_retries:
            raise self.fail(f"{reason} (gave up after {attempt + 1} attempts)")
        left = budget.remaining()
        if wait is not None:
            if wait >= left:
                raise self.fail(
                    f"{reason}; server asks to retry after {wait:.3g}s but only "
                    f"{max(left, 0):.3g}s of the {budget.total:g}s budget is left"
                )
        else:
            wait = self.backoff_s * (2**attempt) * random.uniform(0.75, 1.0)
            # Shrink the back-off rather than skip the retry, keeping at least
            # half of what is left for the attempt itself.
            wait = min(wait, left / 2)
            if left - wait < 0.05:
                raise self.fail(f"{reason}; no time left in the {budget.total:g}s budget to retry")
        log.warning(
            "cloud_retry",
            provider=self.provider,
            attempt=attempt + 1,
            wait_s=round(wait, 3),
            reason=redact(reason, self.secrets),
        )
        time.sleep(wait)
        return attempt + 1
