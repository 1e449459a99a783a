"""OpenAI-compatible HTTP server: ``cactus serve`` (starlette + uvicorn).

One engine answers requests one at a time, in arrival order, on a worker
thread, so the event loop stays free to accept, stream and refuse requests.  At
most ``queue_size`` requests are admitted at once (the running one included);
past that the server answers 503 with ``Retry-After``.  A client that goes away
stops its own generation: the token callback returns False once the request's
cancel flag is set.

Endpoints: ``POST /v1/chat/completions`` (JSON or SSE stream), ``POST
/v1/embeddings``, ``GET /v1/models``, ``GET /health``, ``GET /openapi.json``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import hmac
import json
import logging
import queue
import threading
import time
from typing import Any, Callable, Optional

from .errors import CactusError
from .server_openai import (ApiError, chat_chunk, chat_response, embeddings_response, engine_error, extras,
                            finish_reason, new_id, parse_body, parse_chat, parse_embeddings, tool_calls, usage)

log = logging.getLogger("cactus.server")

MAX_BODY = 4 * 2**20
DEFAULT_QUEUE = 8
RETRY_AFTER_S = 1


class Job:
    """One request's work for the worker thread, and the way its results come back to the event loop."""

    def __init__(self, fn: Callable[["Job"], Any], loop: asyncio.AbstractEventLoop, stream: bool):
        self.fn, self.loop, self.stream = fn, loop, stream
        self.id = new_id()
        self.cancel = threading.Event()
        self.events: asyncio.Queue = asyncio.Queue()  # ("token", text) ... then ("done", result | exception)

    def emit(self, kind: str, value: Any) -> None:
        """Thread-safe: hand an event to the request's coroutine."""
        self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))

    def on_token(self, piece: str) -> bool:
        """The engine's ``on_token``: forward the piece; False stops decoding once the client is gone."""
        if self.cancel.is_set():
            return False
        if self.stream:
            self.emit("token", piece)
        return True


class Worker:
    """A single thread that runs jobs in order; admits at most ``max_pending`` at a time."""

    def __init__(self, max_pending: int = DEFAULT_QUEUE):
        if max_pending < 1:
            raise CactusError(f"queue size must be at least 1, got {max_pending}")
        self.max_pending = max_pending
        self.pending = 0
        self._lock = threading.Lock()
        self._jobs: queue.Queue = queue.Queue()
        self.finished: collections.deque = collections.deque(maxlen=64)  # summaries, newest last
        self._thread = threading.Thread(target=self._run, name="cactus-worker", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[Job], Any], stream: bool = False) -> Job:
        """Queue ``fn(job)``; raises a 503 ApiError when the queue is full."""
        with self._lock:
            if self.pending >= self.max_pending:
                raise ApiError(503, f"the server is busy ({self.pending} requests queued); retry shortly",
                               type="server_error", code="queue_full",
                               headers={"Retry-After": str(RETRY_AFTER_S)})
            self.pending += 1
        job = Job(fn, asyncio.get_running_loop(), stream)
        self._jobs.put(job)
        return job

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                if job.cancel.is_set():  # the client left while it waited
                    outcome: Any = ApiError(499, "client closed the request")
                else:
                    outcome = job.fn(job)
            except BaseException as exc:  # noqa: BLE001 - delivered to the request, never lost
                outcome = exc
            finally:
                with self._lock:
                    self.pending -= 1
            if isinstance(outcome, dict):
                self.finished.append({"id": job.id, "cancelled": job.cancel.is_set(),
                                      "decode_tokens": outcome.get("decode_tokens"),
                                      "finish_reason": outcome.get("finish_reason")})
            job.emit("done", outcome)

    def close(self) -> None:
        self._jobs.put(None)


# --- HTTP plumbing -------------------------------------------------------------------
def _json_response(body: Any, status: int = 200, headers: Optional[dict] = None):
    from starlette.responses import JSONResponse

    return JSONResponse(body, status_code=status, headers=headers)


def error_response(err: ApiError):
    return _json_response(err.body(), err.status, err.headers)


async def _read_json(request) -> dict:
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > MAX_BODY:
        raise ApiError(413, f"request body is {int(length)} bytes; the limit is {MAX_BODY}", code="request_too_large")
    raw = bytearray()
    async for part in request.stream():
        raw += part
        if len(raw) > MAX_BODY:
            raise ApiError(413, f"request body exceeds the limit of {MAX_BODY} bytes", code="request_too_large")
    return parse_body(bytes(raw))


async def _until_disconnect(receive, job: Job) -> None:
    """Set the job's cancel flag when the client disconnects (the body has been read already)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            job.cancel.set()
            return


async def _next_event(job: Job, receive) -> tuple[str, Any]:
    """The job's next event, cancelling it if the client leaves first."""
    watcher = asyncio.ensure_future(_until_disconnect(receive, job))
    try:
        return await job.events.get()
    finally:
        watcher.cancel()


def _outcome(value: Any) -> dict:
    """The worker's final value: a result dict, or raise it as the right error."""
    if isinstance(value, ApiError):
        raise value
    if isinstance(value, CactusError):
        raise ApiError(400, str(value))
    if isinstance(value, BaseException):
        raise value
    return value


class EventStream:
    """The SSE response of a streamed chat completion (an ASGI app, so it can watch for disconnects)."""

    def __init__(self, job: Job, first: tuple[str, Any], model: str, include_usage: bool):
        self.job, self.first, self.model = job, first, model
        self.include_usage = include_usage
        self.created = int(time.time())

    def _event(self, delta: dict, finish: Optional[str] = None, **more: Any) -> bytes:
        chunk = chat_chunk(self.job.id, self.created, self.model, delta, finish, **more)
        return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()

    async def _chunks(self):
        yield self._event({"role": "assistant", "content": ""})
        kind, value = self.first
        while kind == "token":
            if value:  # the engine already withholds tool-call markup
                yield self._event({"content": value})
            kind, value = await self.job.events.get()
        try:
            result = _outcome(value)
            if not result["success"]:
                raise engine_error(result)
        except ApiError as err:  # headers are gone: report it in the stream, as OpenAI does
            yield f"data: {json.dumps(err.body())}\n\n".encode()
        except Exception:
            log.exception("streamed request %s failed", self.job.id)
            err = ApiError(500, "internal server error; see the server log", type="server_error")
            yield f"data: {json.dumps(err.body())}\n\n".encode()
        else:
            delta: dict = {}
            if result["function_calls"]:
                delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(tool_calls(result["function_calls"]))]
            yield self._event(delta, finish_reason(result), **extras(result))
            if self.include_usage:
                chunk = dict(chat_chunk(self.job.id, self.created, self.model, {}), choices=[], usage=usage(result))
                yield f"data: {json.dumps(chunk)}\n\n".encode()
        yield b"data: [DONE]\n\n"

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream; charset=utf-8"),
                                (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]})
        watcher = asyncio.ensure_future(_until_disconnect(receive, self.job))
        try:
            async for data in self._chunks():
                await send({"type": "http.response.body", "body": data, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went away mid-send (ASGI 2.4)
            self.job.cancel.set()
        finally:
            watcher.cancel()


class BearerAuth:
    """ASGI middleware: every request needs ``Authorization: Bearer <key>`` (compared in constant time)."""

    def __init__(self, app, api_key: str):
        self.app, self.state = app, app.state
        self._digest = hashlib.sha256(api_key.encode()).digest()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            header = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, token = header.partition(b" ")
            supplied = hashlib.sha256(token.strip()).digest()  # hashing first hides the key's length too
            if scheme.lower() != b"bearer" or not hmac.compare_digest(supplied, self._digest):
                err = ApiError(401, "missing or invalid API key; send 'Authorization: Bearer <key>'",
                               code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
                return await error_response(err)(scope, receive, send)
        await self.app(scope, receive, send)


# --- the application --------------------------------------------------------------------
def create_app(engine, api_key: Optional[str] = None, queue_size: int = DEFAULT_QUEUE, embedder=None):
    """The ASGI app serving ``engine`` (and ``embedder`` for /v1/embeddings, default: the engine)."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.routing import Route

    from .server_schema import openapi_schema

    worker = Worker(queue_size)
    embedder = embedder or engine
    chat_capable = getattr(engine, "generator", None) is not None
    started = int(time.time())

    def endpoint(fn):
        async def handler(request):
            try:
                return await fn(request)
            except ApiError as err:
                return error_response(err)
            except Exception:  # a bug: log it here, give the client one line
                log.exception("request to %s failed", request.url.path)
                return error_response(ApiError(500, "internal server error; see the server log", type="server_error"))
        return handler

    async def chat(request):
        body = await _read_json(request)
        req = parse_chat(body, default_max_tokens=engine.context_length)
        if not chat_capable:
            raise ApiError(400, f"{engine.name} is an embedding model; use /v1/embeddings", param="model")

        def run(job: Job) -> dict:
            return engine.complete(req.messages, tools=req.tools, on_token=job.on_token, **req.options)

        job = worker.submit(run, stream=req.stream)
        kind, value = await _next_event(job, request.receive)
        if req.stream:
            if kind == "done":
                result = _outcome(value)
                if not result["success"]:
                    raise engine_error(result)
            return EventStream(job, (kind, value), engine.name, req.include_usage)
        result = _outcome(value)
        if not result["success"]:
            raise engine_error(result)
        return _json_response(chat_response(result, engine.name, job.id))

    async def embeddings(request):
        body = await _read_json(request)
        texts, fmt, dimensions = parse_embeddings(body)

        def run(job: Job) -> dict:
            vectors = embedder.embed(texts)
            tokens = sum(len(embedder.tokenizer.encode(t, add_special_tokens=True)) for t in texts)
            return {"vectors": vectors, "tokens": tokens}

        job = worker.submit(run)
        kind, value = await _next_event(job, request.receive)
        out = _outcome(value)
        if dimensions is not None and dimensions != out["vectors"].shape[1]:
            raise ApiError(400, f"{embedder.name} makes {out['vectors'].shape[1]}-dimensional embeddings; "
                                f"dimensions={dimensions} is not supported", param="dimensions")
        return _json_response(embeddings_response(out["vectors"], embedder.name, out["tokens"], fmt))

    def model_cards() -> list[dict]:
        names = dict.fromkeys([engine.name, embedder.name])
        return [{"id": n, "object": "model", "created": started, "owned_by": "cactus"} for n in names]

    async def models(request):
        return _json_response({"object": "list", "data": model_cards()})

    async def model(request):
        name = request.path_params["name"]
        for card in model_cards():
            if card["id"] == name:
                return _json_response(card)
        raise ApiError(404, f"model '{name}' is not served here", param="model", code="model_not_found")

    async def health(request):
        return _json_response({"status": "ok", "model": engine.name, "backend": engine.backend,
                               "queue": {"pending": worker.pending, "max": worker.max_pending}})

    async def schema(request):
        return _json_response(openapi_schema())

    async def http_error(request, exc: HTTPException):
        return error_response(ApiError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}",
                                       code="not_found" if exc.status_code == 404 else None))

    routes = [Route("/v1/chat/completions", endpoint(chat), methods=["POST"]),
              Route("/v1/embeddings", endpoint(embeddings), methods=["POST"]),
              Route("/v1/models", endpoint(models), methods=["GET"]),
              Route("/v1/models/{name:path}", endpoint(model), methods=["GET"]),
              Route("/health", endpoint(health), methods=["GET"]),
              Route("/openapi.json", endpoint(schema), methods=["GET"])]
    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        worker.close()

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error}, lifespan=lifespan)
    app.state.worker, app.state.engine = worker, engine
    return BearerAuth(app, api_key) if api_key else app


def serve(engine, host: str = "127.0.0.1", port: int = 8080, api_key: Optional[str] = None,
          queue_size: int = DEFAULT_QUEUE, embedder=None, log_level: str = "info") -> None:
    """Run the server until interrupted."""
    import uvicorn

    if host not in ("127.0.0.1", "localhost", "::1") and not api_key:
        log.warning("serving on %s without --api-key: anyone who can reach this port can use the model", host)
    app = create_app(engine, api_key=api_key, queue_size=queue_size, embedder=embedder)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=2)
