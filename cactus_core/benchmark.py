"""``cactus benchmark``: prefill and decode speed, time to first token, peak memory.

Like llama-bench's pp/tg tests: a prompt of ``--prompt-tokens`` random token
ids is prefilled from an empty cache (its time is the time to first token),
then ``--gen-tokens`` are decoded greedily one at a time from an empty context
(EOS ignored), ``--repeats`` times after one warm-up.  Figures are
reported as mean ± sd and median.
"""

from __future__ import annotations

import json
import os
import statistics
import time
import numpy as np

from .device import detect_device, peak_rss_mb, rss_mb


def _stats(xs: list[float]) -> dict:
    return {"mean": statistics.fmean(xs), "sd": statistics.stdev(xs) if len(xs) > 1 else 0.0,
            "median": statistics.median(xs), "runs": xs}


def run_benchmark(engine, prompt_tokens: int = 512, gen_tokens: int = 128, repeats: int = 5,
                  seed: int = 0, progress: bool = True) -> dict:
    """Time prefill and decode on ``engine``; returns the report dict."""
    from tqdm import tqdm

    gen = engine.generator
    if gen is None:
        raise ValueError("benchmark needs a generative model")
    need = max(prompt_tokens, gen_tokens) + 1
    if need > gen.context_length:
        from .errors import BadRequestError

        raise BadRequestError(f"{prompt_tokens}+{gen_tokens} tokens exceed the context of {gen.context_length}; "
                              "lower them or raise --context")
    rng = np.random.default_rng(seed)
    vocab = engine.model.vocab_size
    rows = {"prefill_tps": [], "decode_tps": [], "ttft_ms": []}
    for i in tqdm(range(repeats + 1), desc="benchmark", disable=not progress):
        ids = rng.integers(0, vocab, size=prompt_tokens).tolist()
        gen.reset()
        t0 = time.perf_counter()
        logits, _ = gen.prefill(ids)
        tok = int(np.argmax(logits))
        t1 = time.perf_counter()
        # Like llama-bench's tg test, decoding starts from an empty context.
        gen.reset()
        t2 = time.perf_counter()
        for _ in range(gen_tokens):
            tok = int(np.argmax(gen.step(tok)))
        t3 = time.perf_counter()
        if i == 0:
            continue  # warm-up: page in the weights, let backends prepare
        rows["prefill_tps"].append(prompt_tokens / (t1 - t0))
        rows["decode_tps"].append(gen_tokens / (t3 - t2))
        rows["ttft_ms"].append((t1 - t0) * 1000.0)
    gen.reset()
    d = detect_device()
    return {
        "model": engine.name, "backend": engine.backend, "prompt_tokens": prompt_tokens,
        "gen_tokens": gen_tokens, "repeats": repeats,
        "threads": int(os.environ.get("CACTUS_THREADS") or d.physical_cores),
        "prefill_tps": _stats(rows["prefill_tps"]), "decode_tps": _stats(rows["decode_tps"]),
        "time_to_first_token_ms": _stats(rows["ttft_ms"]),
        "peak_rss_mb": peak_rss_mb(), "rss_mb": rss_mb(),
        "kv_cache_mb": gen.cache.nbytes / 2**20,
        "device": f"{d.os} {d.arch} {d.cpu_model} ({d.physical_cores} cores)",
    }


def add_benchmark_command(sub) -> None:
    p = sub.add_parser("benchmark", help="measure prefill/decode tokens/s, time to first token, peak RAM")
    p.add_argument("model", nargs="?", default=None)
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--gen-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--backend", default="auto")
    p.add_argument("--threads", type=int, default=None, help="kernel threads (sets CACTUS_THREADS)")
    p.add_argument("--context", type=int, default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_benchmark)


def _cmd_benchmark(args) -> int:
    from .engine import Engine
    from .errors import BadRequestError

    for name in ("prompt_tokens", "gen_tokens", "repeats"):
        if getattr(args, name) < 1:
            raise BadRequestError(f"--{name.replace('_', '-')} must be at least 1")
    if args.threads is not None:
        os.environ["CACTUS_THREADS"] = str(args.threads)
    context = args.context or max(4096, args.prompt_tokens + args.gen_tokens)
    engine = Engine.load(args.model, backend=args.backend, context_length=context)
    report = run_benchmark(engine, args.prompt_tokens, args.gen_tokens, args.repeats)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    fmt = lambda s: f"{s['mean']:.2f} ± {s['sd']:.2f} (median {s['median']:.2f})"  # noqa: E731
    print(f"{report['model']} on {report['backend']}, {report['threads']} threads, {report['device']}")
    print(f"prefill {args.prompt_tokens} tokens: {fmt(report['prefill_tps'])} tokens/s")
    print(f"decode  {args.gen_tokens} tokens: {fmt(report['decode_tps'])} tokens/s")
    print(f"time to first token: {fmt(report['time_to_first_token_ms'])} ms")
    print(f"peak RSS {report['peak_rss_mb']:.1f} MB (KV cache {report['kv_cache_mb']:.1f} MB)")
    return 0
