"""Real HTTP servers on 127.0.0.1 for the cloud provider tests.

``ScriptedServer`` answers each request with the next scripted :class:`Reply`
(status, headers, body, delays, streamed chunks, a connection cut short) and
records every request, headers included, so a test can check exactly what a
provider sent.  ``UvicornServer`` runs an ASGI app (the fake OpenAI server in
``fake_openai.py``) in a thread.
"""

from __future__ import annotations

import collections
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

import attrs


@attrs.define
class Reply:
    """One scripted answer.

    ``chunks`` streams the body piece by piece (``chunk_delay_s`` apart), ended
    by closing the connection; ``cut`` promises more body than is sent (a
    Content-Length, or an unfinished chunked encoding when streaming), then
    closes, which is what a dropped connection looks like.
    """

    status: int = 200
    json: Any = None
    body: bytes = b""
    headers: dict = attrs.Factory(dict)
    delay_s: float = 0.0
    chunks: Optional[list] = None
    chunk_delay_s: float = 0.0
    stall_after: Optional[int] = None  # stop sending (but keep open) after N chunks
    cut: bool = False


@attrs.define
class Request:
    method: str
    path: str
    headers: dict
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def sse(*events: Any, event_names: Optional[list] = None) -> list[bytes]:
    """SSE chunks: one ``data:`` event per item (dicts are JSON-encoded)."""
    out = []
    for i, e in enumerate(events):
        data = e if isinstance(e, str) else json.dumps(e)
        name = event_names[i] if event_names else None
        out.append((f"event: {name}\n" if name else "").encode() + f"data: {data}\n\n".encode())
    return out


class ScriptedServer:
    """A threaded http.server that plays back scripted replies."""

    def __init__(self):
        self.replies: collections.deque[Reply] = collections.deque()
        self.requests: list[Request] = []
        self.stop_event = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                server.requests.append(
                    Request("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                reply = server.replies.popleft() if server.replies else Reply(
                    500, json={"error": {"message": "no scripted reply left"}}
                )
                try:
                    server._play(self, reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first; that is often the point
                self.close_connection = True

            do_GET = do_POST

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def reset(self) -> None:
        self.replies.clear()
        self.requests.clear()

    def close(self) -> None:
        self.stop_event.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _sleep(self, seconds: float) -> None:
        self.stop_event.wait(seconds)

    def _play(self, h: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.delay_s:
            self._sleep(reply.delay_s)
        body = reply.body if reply.json is None else json.dumps(reply.json).encode()
        streaming = reply.chunks is not None
        h.send_response(reply.status)
        ctype = "text/event-stream" if streaming else "application/json"
        headers = {"content-type": ctype, "connection": "close", **reply.headers}
        for k, v in headers.items():
            h.send_header(k, v)
        if streaming:
            h.send_header("transfer-encoding", "chunked")
        else:
            h.send_header("content-length", str(len(body) + (100 if reply.cut else 0)))
        h.end_headers()
        if not streaming:
            h.wfile.write(body)
            h.wfile.flush()
            return
        for i, chunk in enumerate(reply.chunks):
            if reply.stall_after is not None and i >= reply.stall_after:
                self._sleep(30)
                return
            if i and reply.chunk_delay_s:
                self._sleep(reply.chunk_delay_s)
            h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            h.wfile.flush()
        if not reply.cut:
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()


class UvicornServer:
    """An ASGI app served by uvicorn from a thread, on a socket we bound."""

    def __init__(self, app):
        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)
        self.sock.close()
