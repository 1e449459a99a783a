"""The OpenAPI 3.1 description served at ``/openapi.json``.

Written out by hand (it is short) so it documents the Cactus extensions too:
the extra request samplers and the extra response fields.
"""

from __future__ import annotations

from . import __version__
from .server_openai import EXTRAS

_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["message", "type"],
    "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                   "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}}}

_MESSAGE = {"type": "object", "required": ["role"], "properties": {
    "role": {"enum": ["system", "developer", "user", "assistant", "tool"]},
    "content": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}, {"type": "null"}]},
    "tool_calls": {"type": "array", "items": {"$ref": "#/components/schemas/ToolCall"}},
    "tool_call_id": {"type": "string"}, "name": {"type": "string"}}}

_TOOL_CALL = {"type": "object", "required": ["id", "type", "function"], "properties": {
    "id": {"type": "string"}, "type": {"const": "function"},
    "function": {"type": "object", "required": ["name", "arguments"], "properties": {
        "name": {"type": "string"}, "arguments": {"type": "string", "description": "JSON-encoded arguments"}}}}}

_CHAT_REQUEST = {"type": "object", "required": ["messages"], "additionalProperties": False, "properties": {
    "model": {"type": "string", "description": "ignored: the server answers with the model it was started with"},
    "messages": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/Message"}},
    "tools": {"type": "array", "items": {"type": "object"}},
    "tool_choice": {"oneOf": [{"enum": ["none", "auto", "required"]}, {"type": "object"}]},
    "max_tokens": {"type": "integer", "minimum": 1},
    "max_completion_tokens": {"type": "integer", "minimum": 1},
    "temperature": {"type": "number", "minimum": 0, "maximum": 2, "default": 1},
    "top_p": {"type": "number", "minimum": 0, "maximum": 1, "default": 1},
    "stop": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
    "seed": {"type": "integer"}, "n": {"const": 1}, "stream": {"type": "boolean"},
    "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
    "top_k": {"type": "integer", "minimum": 0, "description": "Cactus extension"},
    "min_p": {"type": "number", "minimum": 0, "maximum": 1, "description": "Cactus extension"},
    "repetition_penalty": {"type": "number", "description": "Cactus extension"},
    "confidence_threshold": {"type": "number", "minimum": 0, "maximum": 1,
                             "description": "Cactus extension: hand off to the cloud below this confidence"},
    "cloud_handoff": {"type": "boolean", "description": "Cactus extension: false answers locally always"}}}

_USAGE = {"type": "object", "properties": {k: {"type": "integer"} for k in
                                           ("prompt_tokens", "completion_tokens", "total_tokens")}}

_CHAT_RESPONSE = {"type": "object", "required": ["id", "object", "created", "model", "choices", "usage"],
                  "properties": {
    "id": {"type": "string"}, "object": {"const": "chat.completion"}, "created": {"type": "integer"},
    "model": {"type": "string"},
    "choices": {"type": "array", "items": {"type": "object", "properties": {
        "index": {"type": "integer"},
        "message": {"type": "object", "properties": {
            "role": {"const": "assistant"}, "content": {"type": ["string", "null"]},
            "tool_calls": {"type": "array", "items": {"$ref": "#/components/schemas/ToolCall"}}}},
        "finish_reason": {"enum": ["stop", "length", "tool_calls"]}}}},
    "usage": _USAGE,
    **{k: {"description": "Cactus extension"} for k in EXTRAS},
    "sources": {"type": "array", "description": "RAG: the corpus chunks put into the prompt",
                "items": {"type": "object", "properties": {"source": {"type": "string"},
                                                           "chunk": {"type": "integer"},
                                                           "score": {"type": "number"}}}}}}

_EMBED_REQUEST = {"type": "object", "required": ["input"], "additionalProperties": False, "properties": {
    "model": {"type": "string"},
    "input": {"oneOf": [{"type": "string", "minLength": 1},
                        {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}]},
    "encoding_format": {"enum": ["float", "base64"]}, "dimensions": {"type": "integer"}}}

_EMBED_RESPONSE = {"type": "object", "properties": {
    "object": {"const": "list"}, "model": {"type": "string"}, "usage": _USAGE,
    "data": {"type": "array", "items": {"type": "object", "properties": {
        "object": {"const": "embedding"}, "index": {"type": "integer"},
        "embedding": {"oneOf": [{"type": "array", "items": {"type": "number"}}, {"type": "string"}]}}}}}}


def _errors(*codes: int) -> dict:
    ref = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    text = {400: "bad request", 401: "missing or invalid API key", 413: "body over 4 MB",
            503: "queue full; see Retry-After"}
    return {str(c): {"description": text[c], **ref} for c in codes}


def _json(schema_name: str) -> dict:
    return {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_name}"}}}}


def openapi_schema() -> dict:
    """The OpenAPI document of the server."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Cactus OpenAI-compatible API", "version": __version__},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": _ERROR, "Message": _MESSAGE, "ToolCall": _TOOL_CALL,
                        "ChatRequest": _CHAT_REQUEST, "ChatResponse": _CHAT_RESPONSE,
                        "EmbeddingsRequest": _EMBED_REQUEST, "EmbeddingsResponse": _EMBED_RESPONSE}},
        "security": [{"bearer": []}],
        "paths": {
            "/v1/chat/completions": {"post": {
                "summary": "Chat completion; with stream=true, server-sent events ending in [DONE]",
                "requestBody": {"required": True, **_json("ChatRequest")},
                "responses": {"200": {"description": "the completion (or an event stream)",
                                      **_json("ChatResponse")}, **_errors(400, 401, 413, 503)}}},
            "/v1/embeddings": {"post": {
                "summary": "Embed strings (L2-normalised vectors)",
                "requestBody": {"required": True, **_json("EmbeddingsRequest")},
                "responses": {"200": {"description": "the vectors", **_json("EmbeddingsResponse")},
                              **_errors(400, 401, 413, 503)}}},
            "/v1/models": {"get": {"summary": "The served models",
                                   "responses": {"200": {"description": "a list of models"}, **_errors(401)}}},
            "/health": {"get": {"summary": "Liveness, model and queue depth",
                                "responses": {"200": {"description": "ok"}, **_errors(401)}}},
        },
    }
