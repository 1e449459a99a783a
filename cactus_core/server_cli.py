"""The ``cactus serve`` and ``cactus embed`` subcommands (kept light: heavy imports happen on use)."""

from __future__ import annotations

import json
import os
import sys


def add_serve(sub) -> None:
    from .cli import add_model_flags, add_routing_flags

    p = sub.add_parser("serve", help="OpenAI-compatible HTTP server (/v1/chat/completions, /v1/embeddings)")
    add_model_flags(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--api-key", default=None,
                   help="require 'Authorization: Bearer KEY' (default: $CACTUS_API_KEY, else no key)")
    p.add_argument("--queue-size", type=int, default=8, help="requests admitted at once, the running one included")
    add_routing_flags(p)
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
    from .cli import add_model_flags

    p = sub.add_parser("embed", help="print embedding vectors of texts as JSON")
    add_model_flags(p, model_required=True)
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
