"""Load run against `cactus serve`: N requests at C concurrent, with the official client.

    python benchmarks/server_load.py [MODEL] [--requests 200] [--concurrency 8] [--max-tokens 32]

Starts the server as a subprocess on a free 127.0.0.1 port, sends chat requests
from C threads (each with its own `openai.OpenAI` client), and reports errors,
latency percentiles, throughput, and the server's resident memory sampled
through the run (it should stay flat: no growth per request).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

import httpx
import openai

PROMPTS = ["Set an alarm for 6:45 tomorrow", "What's the weather in Lisbon?", "Turn off the kitchen lights",
           "Remind me to call mum at 5pm", "What is 17 times 3?", "Tell me a fun fact about cacti"]


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default=None)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--backend", default="auto")
    args = ap.parse_args()

    port = free_port()
    cmd = [sys.executable, "-m", "cactus_core.cli", "serve", *([args.model] if args.model else []),
           "--port", str(port), "--queue-size", str(args.concurrency + 2), "--backend", args.backend,
           "--no-cloud-handoff"]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.time() > deadline:
                raise SystemExit(f"server did not start: {server.stderr.read()[-500:]}")
            time.sleep(0.2)

        samples: list[tuple[int, float]] = []
        done = 0
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                samples.append((done, rss_mb(server.pid)))
                stop.wait(0.5)

        local = threading.local()

        def one(i: int) -> tuple[float, str]:
            nonlocal done
            if not hasattr(local, "client"):
                local.client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=300)
            t = time.perf_counter()
            try:
                r = local.client.chat.completions.create(
                    model="cactus", messages=[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                    max_tokens=args.max_tokens, temperature=0)
                err = "" if r.choices else "no choices"
            except openai.OpenAIError as exc:
                err = f"{type(exc).__name__}: {exc}"
            done += 1
            return time.perf_counter() - t, err

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        start = time.perf_counter()
        with cf.ThreadPoolExecutor(args.concurrency) as pool:
            results = list(pool.map(one, range(args.requests)))
        wall = time.perf_counter() - start
        stop.set()
        sampler.join()
    finally:
        server.terminate()
        server.wait(timeout=10)

    lat = sorted(r[0] for r in results)
    errors = [r[1] for r in results if r[1]]
    q = statistics.quantiles(lat, n=100)
    first = [m for n, m in samples if n <= args.requests * 0.1] or [samples[0][1]]
    last = [m for n, m in samples if n >= args.requests * 0.9] or [samples[-1][1]]
    print(f"{args.requests} requests, {args.concurrency} concurrent, max_tokens {args.max_tokens}, "
          f"{os.cpu_count()} CPUs")
    print(f"errors: {len(errors)}" + (f" (first: {errors[0]})" if errors else ""))
    print(f"latency s: p50 {q[49]:.3f}  p90 {q[89]:.3f}  p99 {q[98]:.3f}  max {lat[-1]:.3f}")
    print(f"throughput: {args.requests / wall:.2f} requests/s over {wall:.1f} s")
    print(f"server RSS MB: first 10% {statistics.median(first):.1f}, last 10% {statistics.median(last):.1f}, "
          f"max {max(m for _, m in samples):.1f}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
