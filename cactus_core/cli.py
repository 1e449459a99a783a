"""The ``cactus`` command.

Every failure the user can cause ends in one line on stderr and a non-zero
exit status, never a traceback.  Subcommands contributed by other parts of the
engine (convert, serve, benchmark...) register themselves in ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, Optional

from .errors import CactusError

EXIT_USAGE, EXIT_ERROR, EXIT_INTERRUPT = 2, 1, 130


def add_model_flags(p, model_required: bool = False) -> None:
    """MODEL, --backend and --context: what every command that loads a model takes."""
    if model_required:
        p.add_argument("model", help="model directory or name")
    else:
        p.add_argument("model", nargs="?", default=None,
                       help="model directory or name (default: the embedded model)")
    p.add_argument("--backend", default="auto", help="kernel backend (see `cactus plugins`)")
    p.add_argument("--context", type=int, default=None, help="context length (default 4096 or the model's)")


def add_routing_flags(p) -> None:
    """Routing, cloud, tiers and RAG: what `run` and `serve` pass to the engine."""
    p.add_argument("--confidence-threshold", type=float, default=None)
    p.add_argument("--cloud-timeout-ms", type=int, default=None)
    p.add_argument("--no-cloud-handoff", action="store_true", help="always answer locally")
    p.add_argument("--router", help="routing policy: probe, entropy, always_local, always_cloud")
    p.add_argument("--cloud-provider", help="openai, anthropic, gemini, or a plugin's provider")
    p.add_argument("--cloud-model", help="the cloud model to hand off to")
    p.add_argument("--cloud-api-base", help="base URL of the provider (any OpenAI-compatible server)")
    p.add_argument("--cloud-header", action="append", default=[], metavar="K=V",
                   help="extra HTTP header for the provider (repeatable); keys come from the environment")
    p.add_argument("--tier", action="append", default=[], metavar="MODEL[@THRESHOLD]",
                   help="a larger local model to ask before the cloud (repeatable, in order)")
    p.add_argument("--corpus", default=None, help="RAG: answer with the .txt/.md files of this directory")
    p.add_argument("--embedder", default=None, help="embedding model for --corpus (default: the chat model)")


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="chat with a model (one prompt, or a REPL without --prompt)")
    add_model_flags(p)
    p.add_argument("--prompt", "-p", help="answer this prompt and exit")
    p.add_argument("--system", help="system prompt")
    p.add_argument("--tools", help="JSON file with OpenAI-style tool definitions")
    p.add_argument("--json", action="store_true", help="print the full response JSON")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--seed", type=int, default=None)
    add_routing_flags(p)
    p.set_defaults(func=cmd_run)


def _add_plugins(sub) -> None:
    p = sub.add_parser("plugins", help="list plugins, this device, and the backends usable on it")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plugins)


def _load_engine(args):
    from .engine import Engine

    options = {}
    if getattr(args, "confidence_threshold", None) is not None:
        options["confidence_threshold"] = args.confidence_threshold
    if getattr(args, "cloud_timeout_ms", None) is not None:
        options["cloud_timeout_ms"] = args.cloud_timeout_ms
    if getattr(args, "no_cloud_handoff", False):
        options["cloud"] = False
    else:
        cloud = {"provider": args.cloud_provider, "model": args.cloud_model, "api_base": args.cloud_api_base}
        if args.cloud_header:
            cloud["headers"] = ",".join(args.cloud_header)
        cloud = {k: v for k, v in cloud.items() if v}
        if cloud:
            options["cloud"] = cloud
    if getattr(args, "router", None):
        options["router"] = args.router
    if getattr(args, "corpus", None):
        options["corpus_dir"] = args.corpus
    if getattr(args, "embedder", None):
        options["embedder"] = args.embedder
    tiers = []
    for spec in getattr(args, "tier", []):
        model, _, threshold = spec.partition("@")
        try:
            value = float(threshold) if threshold else None
        except ValueError:
            raise CactusError(f"--tier {spec}: the threshold after @ must be a number") from None
        tiers.append({"model": model, "confidence_threshold": value})
    if tiers:
        options["tiers"] = tiers
    return Engine.load(args.model, backend=args.backend, context_length=args.context, **options)


def _read_tools(path: Optional[str]):
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise CactusError(f"cannot read tools file {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise CactusError(f"tools file {path} is not valid JSON: {exc}") from exc


def _print_result(result: dict, as_json: bool, streamed: bool) -> int:
    if as_json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    elif not result["success"]:
        pass
    else:
        if not streamed:
            if result["response"] or not result["function_calls"]:
                print(result["response"])
        elif result["cloud_handoff"] or (result["response"] and not result["response"].endswith("\n")):
            print()
        for call in result["function_calls"]:
            print(f"[tool call] {call['name']}({json.dumps(call['arguments'], ensure_ascii=False)})")
    if not result["success"]:
        print(f"error: {result['error']}", file=sys.stderr)
        return EXIT_ERROR
    return 0


def cmd_run(args) -> int:
    from . import hub

    if args.model and hub.looks_like_repo_id(args.model):  # download and convert once, as Cactus does
        args.model = hub.bundle_for(args.model, log=lambda m: print(m, file=sys.stderr))
    engine = _load_engine(args)
    tools = _read_tools(args.tools)
    messages = [{"role": "system", "content": args.system}] if args.system else []
    opts = dict(tools=tools, max_tokens=args.max_tokens, temperature=args.temperature,
                top_p=args.top_p, top_k=args.top_k, seed=args.seed)
    if args.prompt is not None:
        messages.append({"role": "user", "content": args.prompt})
        # The engine withholds tool-call markup from the stream; calls are printed parsed.
        stream = None if args.json else (lambda t: (sys.stdout.write(t), sys.stdout.flush()))
        result = engine.complete(messages, on_token=stream, **opts)
        return _print_result(result, args.json, streamed=stream is not None)
    return _repl(engine, messages, opts, args.json)


def _repl(engine, messages: list, opts: dict, as_json: bool) -> int:
    interactive = sys.stdin.isatty()
    if interactive:
        print(f"cactus: {engine.name} on {engine.backend}. /reset clears the chat, /exit or Ctrl-D quits.")
    status = 0
    while True:
        try:
            line = input("> " if interactive else "")
        except EOFError:
            break
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            break
        if text == "/reset":
            messages = [m for m in messages if m["role"] == "system"]
            continue
        messages.append({"role": "user", "content": text})
        stream = None if as_json else (lambda t: (sys.stdout.write(t), sys.stdout.flush()))
        result = engine.complete(messages, on_token=stream, **opts)
        status = _print_result(result, as_json, streamed=stream is not None)
        if result["success"]:
            reply: dict = {"role": "assistant", "content": result["response"]}
            if result["function_calls"]:
                reply["tool_calls"] = [
                    {"id": f"call_{i}", "type": "function",
                     "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for i, c in enumerate(result["function_calls"])
                ]
            messages.append(reply)
        else:
            messages.pop()
    return status


def cmd_plugins(args) -> int:
    from . import plugins
    from .device import detect_device

    device = detect_device()
    backends = plugins.backends(device)
    info = {
        "plugins": plugins.plugin_names(),
        "device": device.to_dict(),
        "backends": [
            {"name": b.name, "priority": b.priority, "plugin": b.plugin,
             "available": b.available, "reason": b.unavailable_reason}
            for b in backends
        ],
        "quantizers": sorted(plugins.quantizers()),
        "routers": sorted(plugins.routers()),
        "cloud_providers": sorted(plugins.cloud_providers()),
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print("plugins:   " + ", ".join(info["plugins"]))
    d = info["device"]
    print(f"device:    {d['os']} {d['arch']}, {d['cpu_model'] or 'unknown CPU'}, "
          f"{d['physical_cores']} cores, {d['total_memory_mb']} MB RAM")
    print(f"simd:      {', '.join(d['simd']) or 'none detected'}")
    print(f"gpus:      {', '.join(d['gpus']) or 'none detected'}")
    print("backends (priority order):")
    for b in info["backends"]:
        state = "usable" if b["available"] else f"unavailable: {b['reason']}"
        print(f"  {b['name']:<12} priority {b['priority']:<4} [{b['plugin']}] {state}")
    for key in ("quantizers", "routers", "cloud_providers"):
        print(f"{key.replace('_', ' ')}: {', '.join(info[key]) or 'none'}")
    return 0


#: Subcommand builders; other modules append ``(name, builder)`` pairs.
def _add_probe(sub) -> None:
    from .probe_train import add_probe_command

    add_probe_command(sub)


def _add_benchmark(sub) -> None:
    from .benchmark import add_benchmark_command

    add_benchmark_command(sub)


def _add_download(sub) -> None:
    from .hub import add_download_command

    add_download_command(sub)


def _add_convert(sub) -> None:
    from .convert_cli import add_convert_command

    add_convert_command(sub)


from .server_cli import add_embed, add_serve  # noqa: E402 - light module; heavy imports happen on use

COMMANDS: list[Callable] = [_add_run, _add_plugins, _add_probe, _add_benchmark, _add_download, _add_convert,
                           add_serve, add_embed]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cactus", description="On-device LLM inference.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: Optional[list] = None) -> int:
    """Entry point of the ``cactus`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except CactusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPT
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
