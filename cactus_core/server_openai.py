"""The OpenAI wire format: request validation and response building, no I/O.

Requests are checked field by field before they reach the engine, so every
mistake becomes a 4xx :class:`ApiError` naming the field, never a 500.  Responses
carry OpenAI's fields plus Cactus's own (confidence, cloud handoff, speeds, RAM,
RAG sources).
"""

from __future__ import annotations

import base64
import json
import math
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .chat_template import apply_tool_choice, validate_messages, validate_tools
from .errors import CactusError

#: Cactus fields copied from the engine result into every chat response.
EXTRAS = ("confidence", "cloud_handoff", "cloud_handoff_reason", "time_to_first_token_ms",
          "prefill_tps", "decode_tps", "ram_usage_mb")
#: Accepted for compatibility and ignored (they do not change a local answer).
IGNORED = {"user": str, "metadata": dict, "store": bool, "parallel_tool_calls": bool, "service_tier": str}
FINISH = {"stop": "stop", "length": "length", "context": "length", "tool_calls": "tool_calls",
          "cancelled": "stop", "handoff": "stop"}


class ApiError(Exception):
    """An error the client caused (or an overload): OpenAI's error JSON with a status code."""

    def __init__(self, status: int, message: str, param: Optional[str] = None,
                 code: Optional[str] = None, type: str = "invalid_request_error", headers: Optional[dict] = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = status, message, param, code, type
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad(message: str, param: Optional[str] = None, code: Optional[str] = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def parse_body(raw: bytes) -> dict:
    """The request body as a JSON object, or a 400 that says what is wrong with it."""
    if not raw.strip():
        raise bad("request body is empty; send a JSON object")
    try:
        body = json.loads(raw)
    except UnicodeDecodeError:
        raise bad("request body is not UTF-8 text") from None
    except ValueError as exc:
        raise bad(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise bad(f"request body must be a JSON object, got {type(body).__name__}")
    return body


# --- field checks ---------------------------------------------------------------------
def _number(body: dict, name: str, lo: float, hi: float) -> Optional[float]:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
        raise bad(f"{name} must be a number in [{lo}, {hi}], got {v!r}", param=name)
    return float(v)


def _int(body: dict, name: str, lo: int = 1) -> Optional[int]:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise bad(f"{name} must be an integer >= {lo}, got {v!r}", param=name)
    return v


def _typed(body: dict, name: str, kind: type, what: str) -> Any:
    v = body.get(name)
    if v is not None and (not isinstance(v, kind) or (kind is int and isinstance(v, bool))):
        raise bad(f"{name} must be {what}, got {type(v).__name__}", param=name)
    return v


def _check_fields(body: dict, known: set[str]) -> None:
    unknown = sorted(set(body) - known - set(IGNORED))
    if unknown:
        raise bad(f"unknown field '{unknown[0]}'; supported fields: {', '.join(sorted(known))}", param=unknown[0])
    for name, kind in IGNORED.items():
        _typed(body, name, kind, kind.__name__)


@dataclass
class ChatRequest:
    messages: list
    tools: Optional[list]
    stream: bool = False
    include_usage: bool = False
    options: dict = field(default_factory=dict)  # keyword arguments of Engine.complete


CHAT_FIELDS = {"model", "messages", "tools", "tool_choice", "max_tokens", "max_completion_tokens", "temperature",
               "top_p", "stop", "seed", "n", "stream", "stream_options", "frequency_penalty", "presence_penalty",
               "logprobs", "top_logprobs", "response_format", "logit_bias",
               # Cactus extensions (llama.cpp-style samplers and routing)
               "top_k", "min_p", "repetition_penalty", "confidence_threshold", "cloud_handoff"}


def parse_chat(body: dict, default_max_tokens: int) -> ChatRequest:
    """Validate a /v1/chat/completions body into engine arguments."""
    _check_fields(body, CHAT_FIELDS)
    _typed(body, "model", str, "a string")
    if "messages" not in body:
        raise bad("'messages' is required: a list of {'role': ..., 'content': ...} objects", param="messages")
    try:
        messages = validate_messages(body["messages"])
    except CactusError as exc:
        raise bad(str(exc), param="messages") from None
    try:
        tools = validate_tools(body.get("tools"))
    except CactusError as exc:
        raise bad(str(exc), param="tools") from None
    try:  # checked here for a 400 naming the field; the engine enforces it
        apply_tool_choice(body.get("tool_choice"), tools)
    except CactusError as exc:
        raise bad(str(exc), param="tool_choice") from None
    if _int(body, "n") not in (None, 1):
        raise bad("only n=1 is supported", param="n")
    for name in ("frequency_penalty", "presence_penalty"):
        if _number(body, name, -2.0, 2.0):
            raise bad(f"{name} is not supported; use repetition_penalty", param=name)
    if _typed(body, "logprobs", bool, "a boolean") or body.get("top_logprobs") is not None:
        raise bad("logprobs are not supported", param="logprobs")
    if _typed(body, "logit_bias", dict, "an object"):
        raise bad("logit_bias is not supported", param="logit_bias")
    fmt = _typed(body, "response_format", dict, "an object")
    if fmt is not None and fmt.get("type") != "text":
        raise bad(f"response_format type {fmt.get('type')!r} is not supported (only 'text')", param="response_format")
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str) and not (
            isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise bad("stop must be a string or a list of strings", param="stop")
    stream = bool(_typed(body, "stream", bool, "a boolean"))
    stream_options = _typed(body, "stream_options", dict, "an object") or {}
    if stream_options and not stream:
        raise bad("stream_options is only allowed with stream=true", param="stream_options")
    if set(stream_options) - {"include_usage"} or not isinstance(stream_options.get("include_usage", False), bool):
        raise bad("stream_options supports only {'include_usage': bool}", param="stream_options")
    max_tokens = _int(body, "max_completion_tokens")
    max_tokens = max_tokens if max_tokens is not None else _int(body, "max_tokens")
    options = {
        "max_tokens": max_tokens or default_max_tokens,
        "temperature": _number(body, "temperature", 0.0, 2.0),
        "top_p": _number(body, "top_p", 0.0, 1.0),
        "top_k": _int(body, "top_k", 0),
        "min_p": _number(body, "min_p", 0.0, 1.0),
        "repetition_penalty": _number(body, "repetition_penalty", 0.01, 10.0),
        "seed": _int(body, "seed", -(2**63)),
        "stop": stop,
        "confidence_threshold": _number(body, "confidence_threshold", 0.0, 1.0),
    }
    options = {k: v for k, v in options.items() if v is not None}
    if body.get("tool_choice") is not None:
        options["tool_choice"] = body["tool_choice"]
    options.setdefault("temperature", 1.0)  # OpenAI's default
    if _typed(body, "cloud_handoff", bool, "a boolean") is False:
        options["cloud"] = False
    if options.get("seed") is not None and options["seed"] < 0:
        options["seed"] &= 2**64 - 1  # numpy seeds must be non-negative
    return ChatRequest(messages, tools, stream, bool(stream_options.get("include_usage")), options)


# --- responses ------------------------------------------------------------------------
def new_id(prefix: str = "chatcmpl") -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


def tool_calls(function_calls: list[dict]) -> list[dict]:
    """Engine function calls ``{name, arguments: dict}`` -> OpenAI tool calls (arguments as a JSON string)."""
    return [{"id": f"call_{secrets.token_hex(12)}", "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"] if isinstance(c["arguments"], str)
                          else json.dumps(c["arguments"], ensure_ascii=False)}}
            for c in function_calls]


def usage(result: dict) -> dict:
    prompt = int(result.get("prompt_tokens") or result.get("prefill_tokens") or 0)
    completion = int(result.get("decode_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": max(0, prompt - int(result.get("prefill_tokens") or 0))}}


def extras(result: dict) -> dict:
    out = {k: result.get(k) for k in EXTRAS}
    if "sources" in result:
        out["sources"] = result["sources"]
    return out


def finish_reason(result: dict) -> str:
    if result.get("function_calls"):
        return "tool_calls"
    return FINISH.get(result.get("finish_reason") or "stop", "stop")


def chat_response(result: dict, model: str, request_id: Optional[str] = None,
                  created: Optional[int] = None) -> dict:
    """A successful engine result as a ``chat.completion`` object."""
    calls = tool_calls(result.get("function_calls") or [])
    message: dict = {"role": "assistant", "content": result.get("response") or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return {"id": request_id or new_id(), "object": "chat.completion", "created": created or int(time.time()),
            "model": model, "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason(result)}],
            "usage": usage(result), **extras(result)}


def chat_chunk(request_id: str, created: int, model: str, delta: dict,
               finish: Optional[str] = None, **more: Any) -> dict:
    """One ``chat.completion.chunk`` of a stream."""
    return {"id": request_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **more}


def engine_error(result: dict) -> ApiError:
    """A failed engine result as the matching HTTP error."""
    message = result.get("error") or "request failed"
    if message.startswith("internal error"):
        return ApiError(500, "internal server error; see the server log", type="server_error")
    code = "context_length_exceeded" if "context" in message and "tokens" in message else None
    return bad(message, code=code, param="messages" if code else None)


# --- embeddings -----------------------------------------------------------------------
EMBED_FIELDS = {"model", "input", "encoding_format", "dimensions"}
MAX_EMBED_INPUTS = 2048


def parse_embeddings(body: dict) -> tuple[list[str], str, Optional[int]]:
    """Validate a /v1/embeddings body: (texts, encoding_format, dimensions)."""
    _check_fields(body, EMBED_FIELDS)
    _typed(body, "model", str, "a string")
    if "input" not in body:
        raise bad("'input' is required: a string or a list of strings", param="input")
    texts = body["input"]
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not texts:
        raise bad("input must be a non-empty string or a non-empty list of strings", param="input")
    if not all(isinstance(t, str) for t in texts):
        raise bad("input must hold strings; token-id input is not supported", param="input")
    if any(not t for t in texts):
        raise bad("input must not contain empty strings", param="input")
    if len(texts) > MAX_EMBED_INPUTS:
        raise bad(f"input has {len(texts)} items; at most {MAX_EMBED_INPUTS} per request", param="input")
    fmt = body.get("encoding_format") or "float"
    if fmt not in ("float", "base64"):
        raise bad("encoding_format must be 'float' or 'base64'", param="encoding_format")
    return texts, fmt, _int(body, "dimensions")


def embeddings_response(vectors: np.ndarray, model: str, prompt_tokens: int, encoding_format: str) -> dict:
    def encode(v: np.ndarray) -> Any:
        if encoding_format == "base64":  # what the openai client asks for by default
            return base64.b64encode(np.ascontiguousarray(v, dtype="<f4").tobytes()).decode("ascii")
        return [float(x) for x in v]

    return {"object": "list", "model": model,
            "data": [{"object": "embedding", "index": i, "embedding": encode(v)} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}}
