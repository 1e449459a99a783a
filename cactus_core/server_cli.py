"""The ``cactus serve`` and ``cactus embed`` subcommands (kept light: heavy imports happen on use)."""

from __future__ import annotations

import json
import os
import sys


def _engine_flags(p, model_required: bool = False) -> None:
    if model_required:
        p.add_argument("model", help="model directory or name")
    else:
        p.add_argument("model", nargs="?", default=None, help="model directory or name (default: the embedded model)")
    p.add_argument("--backend", default="auto", help="kernel backend (see `cactus plugins`)")
    p.add_argument("--context", type=int, default=None, help="context length (default 4096 or the model's)")


def add_serve(sub) -> None:
    p = sub.add_parser("serve", help="OpenAI-compatible HTTP server (/v1/chat/completions, /v1/embeddings)")
    _engine_flags(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--api-key", default=None,
                   help="require 'Authorization: Bearer KEY' (default: $CACTUS_API_KEY, else no key)")
    p.add_argument("--queue-size", type=int, default=8, help="requests admitted at once, the running one included")
    p.add_argument("--corpus", default=None, help="answer with RAG over the .txt/.md files of this directory")
    p.add_argument("--embedder", default=None, help="embedding model for /v1/embeddings and --corpus")
    p.add_argument("--confidence-threshold", type=float, default=None)
    p.add_argument("--cloud-timeout-ms", type=int, default=None)
    p.add_argument("--no-cloud-handoff", action="store_true", help="always answer locally")
    p.add_argument("--router", help="routing policy: probe, entropy, always_local, always_cloud")
    p.add_argument("--cloud-provider", help="openai, anthropic, gemini, or a plugin's provider")
    p.add_argument("--cloud-model", help="the cloud model to hand off to")
    p.add_argument("--cloud-api-base", help="base URL of the provider (any OpenAI-compatible server)")
    p.add_argument("--cloud-header", action="append", default=[], metavar="K=V",
                   help="extra HTTP header for the provider (repeatable)")
    p.add_argument("--tier", action="append", default=[], metavar="MODEL[@THRESHOLD]",
                   help="a larger local model to ask before the cloud (repeatable, in order)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args) -> int:
    from .cli import _load_engine
    from .errors import CactusError
    from .server import serve

    if not 0 < args.port < 65536:
        raise CactusError(f"--port must be in 1..65535, got {args.port}")
    api_key = args.api_key or os.environ.get("CACTUS_API_KEY") or None
    embedder = None
    if args.embedder:
        from . import load

        embedder = args.embedder = load(args.embedder, backend=args.backend)  # one instance for both uses
    engine = _load_engine(args)
    print(f"cactus: serving {engine.name} on http://{args.host}:{args.port}/v1"
          f"{' (API key required)' if api_key else ''}", file=sys.stderr)
    serve(engine, host=args.host, port=args.port, api_key=api_key, queue_size=args.queue_size, embedder=embedder)
    return 0


def add_embed(sub) -> None:
    p = sub.add_parser("embed", help="print embedding vectors of texts as JSON")
    _engine_flags(p, model_required=True)
    p.add_argument("texts", nargs="+", metavar="TEXT", help="texts to embed ('-' reads one text per line from stdin)")
    p.set_defaults(func=cmd_embed)


def cmd_embed(args) -> int:
    from .engine import Engine

    texts = [line.rstrip("\n") for line in sys.stdin] if args.texts == ["-"] else args.texts
    engine = Engine.load(args.model, backend=args.backend, context_length=args.context)
    vectors = engine.embed(texts)
    json.dump([[round(float(x), 7) for x in v] for v in vectors], sys.stdout)
    print()
    return 0
