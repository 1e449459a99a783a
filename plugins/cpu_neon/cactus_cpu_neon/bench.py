"""Quick kernel timings: cpu_neon against numpy_ref on decode- and prefill-sized shapes.

    python -m cactus_cpu_neon.bench [--threads N] [--cpu-time] [--json]
    python -m cactus_cpu_neon.bench --python-share MODEL [--tokens 32] [--threads N] [--cpu-time]
    python -m cactus_cpu_neon.bench --python-only MODEL [--tokens 64]
    python -m cactus_cpu_neon.bench --breakdown MODEL [--tokens 32] [--threads N] [--context N]
    python -m cactus_cpu_neon.bench --cq-decode [--threads N]
    python -m cactus_cpu_neon.bench --head [--threads N]

Shapes are those of a ~1B-parameter model (hidden 2048, MLP 8192, 32 query
heads over 8 KV heads of 64); CQ decode is timed on the exact kernel and
with int8 activations.  ``--head`` times one decode step of the tied output
head of Qwen3-0.6B and Llama-3.2-1B (vocabulary x hidden) in each ``cactus
convert --head`` format.  Each figure is the median of several runs;
the linear rows also give the weight bandwidth reached (bytes of weights
streamed per second), the number that bounds decode speed.  ``--python-share``
instead decodes with a model and reports the share of each step spent outside
the C kernels; ``--python-only`` times the Python of a decode step alone, with
every C call replaced by a no-op (thread CPU time, so a busy machine matters
little); ``--breakdown`` splits a decode step's wall time by C entry point (with
the weight bandwidth of the CQ linears) and the rest.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from cactus_core import formats as _formats
from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.device import detect_device
from cactus_core.formats import BFloat16, f32_to_bf16

from .backend import create


def _median_ms(fn, repeats: int, clock=time.perf_counter) -> float:
    fn()  # warm caches, page in weights, start threads
    times = []
    for _ in range(repeats):
        t = clock()
        fn()
        times.append(clock() - t)
    return 1000.0 * float(np.median(times))


def _cases(rng):
    def weight(n, k, dtype):
        w = (rng.standard_normal((n, k)) * 0.02).astype(np.float32)
        return BFloat16(f32_to_bf16(w)) if dtype == "bfloat16" else w.astype(dtype)

    for dtype in ("float32", "float16", "bfloat16"):
        w = weight(8192, 2048, dtype)
        for L in (1, 64):
            x = rng.standard_normal((1, L, 2048)).astype(np.float32)
            yield f"linear {dtype} L={L} 2048->8192", "linear", (x, w), {}, w.nbytes, None
    if hasattr(_formats, "CQTensor"):  # CQ4 / CQ3 / CQ2 layouts; timing does not depend on the values
        for name, (bits, d) in {"cq4": (8, 2), "cq3": (6, 2), "cq2": (8, 4)}.items():
            idx = rng.integers(0, 1 << bits, (8192, 2048 // d))
            meta = dict(index_bits=bits, vec_dim=d, group_size=128, block_size=128, seed=0)
            w = _formats.CQTensor(
                (8192, 2048), meta, codes=_formats.pack_bits(idx, bits),
                scales=(rng.random((8192, 16)) + 0.5).astype(np.float16),
                codebook=_codebook(rng, bits, d, uniform=name == "cq6"),
                signs=rng.integers(0, 256, 256).astype(np.uint8),
            )
            for L in (1, 64):
                x = rng.standard_normal((1, L, 2048)).astype(np.float32)
                if L == 1:  # decode: the exact kernel and the int8-activation one
                    for path in ("exact", "int8"):
                        yield f"linear {name} L=1 2048->8192 {path}", "linear", (x, w), {}, w.nbytes, path
                else:
                    yield f"linear {name} L={L} 2048->8192", "linear", (x, w), {}, w.nbytes, None
    for fmt, bits in (("int4", 4), ("int8", 8)):
        if fmt not in _formats.QUANTIZED_FORMATS:
            continue
        q = rng.integers(0, 1 << bits, (8192, 2048))
        w = _formats.QUANTIZED_FORMATS[fmt](
            (8192, 2048), {"group_size": 64}, codes=_formats.pack_bits(q, bits),
            scales=(rng.random((8192, 32)) * 0.01).astype(np.float16),
            biases=(rng.standard_normal((8192, 32)) * 0.01).astype(np.float16),
        )
        for L in (1, 64):
            x = rng.standard_normal((1, L, 2048)).astype(np.float32)
            yield f"linear {fmt} g64 L={L} 2048->8192", "linear", (x, w), {}, w.nbytes, None
    for S in (512, 4096):
        q = rng.standard_normal((1, 32, 1, 64)).astype(np.float32)
        kv = rng.standard_normal((1, 8, S, 64)).astype(np.float32)
        yield f"attention decode S={S} 32/8 heads", "attention", (q, kv, kv), dict(scale=0.125, q_offset=S - 1), 0, None
    q = rng.standard_normal((1, 32, 128, 64)).astype(np.float32)
    kv = rng.standard_normal((1, 8, 128, 64)).astype(np.float32)
    yield "attention prefill L=S=128", "attention", (q, kv, kv), dict(scale=0.125), 0, None
    x = rng.standard_normal((1, 1, 8192)).astype(np.float32)
    yield "gated silu 8192", "gated_activation", (x, x, "silu"), {}, 0, None
    yield "rms_norm 2048", "rms_norm", (x[..., :2048], np.ones(2048, np.float32), 1e-6), {}, 0, None


def run(threads=None, repeats: int = 7, cpu_time: bool = False) -> list[dict]:
    """Time every case on both backends; returns one dict per case.

    ``cpu_time`` measures process CPU time instead of wall time: on a busy
    machine it still gives fair single-thread figures (run with
    ``OPENBLAS_NUM_THREADS=1 --threads 1`` so numpy is single-threaded too).
    """
    ref = NumpyBackend()
    # CQ decode rows name their path (exact kernel or int8 activations); the rest use the default.
    neons = {None: create(threads), "exact": create(threads, False), "int8": create(threads, True)}
    clock = time.process_time if cpu_time else time.perf_counter
    rows, ref_ms = [], {}
    for name, op, args, kw, wbytes, path in _cases(np.random.default_rng(0)):
        neon = neons[path]
        t_neon = _median_ms(lambda: getattr(neon, op)(*args, **kw), repeats, clock)
        key = name.rsplit(" ", 1)[0] if path else name  # both CQ decode paths share one numpy_ref timing
        if key not in ref_ms:
            ref_ms[key] = _median_ms(lambda: getattr(ref, op)(*args, **kw), max(3, repeats // 2), clock)
        t_ref = ref_ms[key]
        row = dict(case=name, cpu_neon_ms=round(t_neon, 3), numpy_ref_ms=round(t_ref, 3),
                   speedup=round(t_ref / t_neon, 2))
        if wbytes:
            row["cpu_neon_weight_GBps"] = round(wbytes / t_neon / 1e6, 1)
        rows.append(row)
    return rows


def cq_decode(threads=None, repeats: int = 30) -> list[dict]:
    """GB/s of codes of CQ4 (its 4-bit codes, its widened 5- and 6-bit ones, and the old 2-vector CQ4) / CQ3 / CQ2
    decode, exact kernel against int8 activations.

    Two sizes: 8192 x 2048 (16 MiB of CQ4 codes: fits a large L3) and 65536 x 2048
    (128 MiB: streamed from DRAM).  Best of ``repeats`` calls (wall time), which
    is the kernel's speed when nothing else runs; medians on a busy machine
    measure the other processes too.
    """
    rng = np.random.default_rng(0)
    paths = {"exact": create(threads, False), "int8": create(threads, True)}
    rows = []
    # cq4: 4-bit scalar codes since session 12; cq4v: the 8-bit codes of 2-vectors before it;
    # cq5 / cq6: the widths cq4 widens its most sensitive tensors to (32 Lloyd-Max levels, 64
    # equally spaced ones)
    for name, bits, d in (("cq4", 4, 1), ("cq5", 5, 1), ("cq6", 6, 1), ("cq4v", 8, 2), ("cq3", 6, 2), ("cq2", 8, 4)):
        for N in (8192, 65536):
            meta = dict(index_bits=bits, vec_dim=d, group_size=128, block_size=128, seed=0)
            w = _formats.CQTensor(
                (N, 2048), meta, codes=_formats.pack_bits(rng.integers(0, 1 << bits, (N, 2048 // d)), bits),
                scales=(rng.random((N, 16)) + 0.5).astype(np.float16),
                codebook=_codebook(rng, bits, d, uniform=name == "cq6"),
                signs=rng.integers(0, 256, 256).astype(np.uint8))
            x = rng.standard_normal((1, 1, 2048)).astype(np.float32)
            for path, neon in paths.items():
                neon.linear(x, w)
                best = min(_median_ms(lambda: neon.linear(x, w), 1) for _ in range(repeats))
                rows.append(dict(case=f"{name} {N}x2048 {path}", ms=round(best, 3),
                                 codes_GBps=round(w.arrays["codes"].nbytes / best / 1e6, 1)))
    return rows


#: Tied output heads (vocabulary, hidden) of the shapes benchmarks/vs_llamacpp.py uses.
HEAD_SHAPES = {"qwen3-0.6b": (151936, 1024), "llama-3.2-1b": (128256, 2048)}
#: ``cactus convert --head`` formats: (format, index_bits, vec_dim); int8 is RTN's affine groups.
# cq4: 4-bit scalar codes since session 12 (convert --head cq4 follows the cq4 preset).
# cq6: equally spaced levels since session 13, as convert writes them; "cq6 table" is a 64-entry
# codebook of any levels (the cq6 heads written before), which the kernels look up.
HEAD_FORMATS = {"int8": ("int8", 8, 0), "cq6": ("cq", 6, 1), "cq6 table": ("cq", 6, 1), "cq5": ("cq", 5, 1),
                "cq4": ("cq", 4, 1)}


def _codebook(rng, bits: int, d: int, uniform: bool = False) -> np.ndarray:
    """A random float16 codebook, or convert's equally spaced cq6 levels (13/256 apart from 0)."""
    if uniform:
        return ((2 * np.arange(1 << bits) - ((1 << bits) - 1))[:, None] * (13 / 256)).astype(np.float16)
    return rng.standard_normal((1 << bits, d)).astype(np.float16)


def _head_tensor(rng, V: int, D: int, fmt: str, bits: int, d: int, uniform: bool = False):
    if fmt == "int8":
        return _formats.Int8Tensor((V, D), {"group_size": 128}, codes=rng.integers(0, 256, (V, D), dtype=np.uint8),
                                   scales=np.full((V, D // 128), 0.01, np.float16),
                                   biases=np.full((V, D // 128), -1.28, np.float16))
    meta = dict(index_bits=bits, vec_dim=d, group_size=128, block_size=128, seed=0)
    return _formats.CQTensor(
        (V, D), meta, codes=_formats.pack_bits(rng.integers(0, 1 << bits, (V, D // d), dtype=np.uint8), bits),
        scales=(rng.random((V, D // 128)) + 0.5).astype(np.float16),
        codebook=_codebook(rng, bits, d, uniform),
        signs=rng.integers(0, 256, D // 8).astype(np.uint8))


def head_decode(threads=None, repeats: int = 15, shapes=None) -> list[dict]:
    """One decode step of the tied output head (``linear`` of one token by the whole
    table) per ``--head`` format: ms (best of ``repeats``), bytes read, GB/s.

    CQ heads run on the exact kernel and with int8 activations (the default where
    measured faster); int8 heads have a single kernel.  The tables (75-310 MB)
    stream from DRAM on every call, as in a real decode step.
    """
    rng = np.random.default_rng(0)
    paths = {"exact": create(threads, False), "int8": create(threads, True)}
    rows = []
    for model, (V, D) in (shapes or HEAD_SHAPES).items():
        x = rng.standard_normal((1, 1, D)).astype(np.float32)
        for head, (fmt, bits, d) in HEAD_FORMATS.items():
            w = _head_tensor(rng, V, D, fmt, bits, d, uniform=head == "cq6")
            for path, neon in paths.items():
                if fmt == "int8" and path == "exact":
                    continue  # one kernel for int8 tables
                neon.linear(x, w)
                best = min(_median_ms(lambda: neon.linear(x, w), 1) for _ in range(repeats))
                rows.append(dict(case=f"{model} head {head} {path if fmt == 'cq' else 'affine'}", ms=round(best, 3),
                                 MB=round(w.nbytes / 1e6, 1), GBps=round(w.nbytes / best / 1e6, 1)))
            del w
    return rows


class _TimedLib:
    """Stands in for the cffi ``lib``: times every call into C."""

    def __init__(self, lib, clock):
        self._lib, self._clock, self.seconds, self.calls = lib, clock, 0.0, 0

    def __getattr__(self, name):
        fn = getattr(self._lib, name)
        if not callable(fn):
            return fn

        def timed(*args):
            t = self._clock()
            try:
                return fn(*args)
            finally:
                self.seconds += self._clock() - t
                self.calls += 1

        return timed


def python_share(model: str, tokens: int = 32, threads=None, cpu_time: bool = False) -> dict:
    """Decode ``tokens`` greedy steps on cpu_neon; time in C vs the whole step.

    ``cpu_time`` uses this thread's CPU time (meaningful with one thread on a
    busy machine); otherwise wall time.  The timing wrapper itself adds about a
    microsecond per call, counted as Python.
    """
    import os

    import cactus_core as cactus

    if threads:
        os.environ["CACTUS_THREADS"] = str(threads)
    engine = cactus.load(model, backend="cpu_neon")
    neon = engine.model.ops.resolve("linear", "float32").__self__
    clock = time.thread_time if cpu_time else time.perf_counter
    gen, tok = engine.generator, 1
    gen.reset()
    for _ in range(4):  # warm up: page in weights, build per-tensor tables
        tok = int(np.argmax(gen.step(tok)))
    gen.reset()
    timed = neon._lib = _TimedLib(neon._lib, clock)
    try:
        t = clock()
        for _ in range(tokens):
            tok = int(np.argmax(gen.step(tok)))
        total = clock() - t
    finally:
        neon._lib = timed._lib
    return {"model": model, "backend": neon.describe(), "ms_per_token": 1000 * total / tokens,
            "ms_in_c_per_token": 1000 * timed.seconds / tokens, "c_calls_per_token": timed.calls / tokens,
            "share_outside_c": 1.0 - timed.seconds / total}


def _weight_bytes(name: str, args) -> int:
    """Bytes of codes and scales a CQ linear call reads (0 for other calls)."""
    if name == "cn_cq_linear_multi":
        K, n, ws = args[2], args[3], args[4]
        return sum(ws[i].N * (ws[i].stride + 2 * (K // ws[i].group)) for i in range(n))
    if name in ("cn_cq_linear_i8", "cn_cq_linear"):
        K, stride, group, N = args[2], args[4], args[8], args[13]
        return N * (stride + 2 * (K // group))
    return 0


_BLOCK_PHASES = ("q/k/v (norm, rotation)", "QK-norm + RoPE", "K/V store + attention", "o_proj + residual",
                 "gate/up (norm, act)", "down + residual")


def breakdown(model: str, tokens: int = 32, threads=None, context: int = 0) -> dict:
    """Wall time of ``tokens`` greedy decode steps split by C entry point: calls, ms per
    token, us per call and, for CQ linears, GB/s of codes and scales; the rest is Python.
    The decoder blocks' own phases (their C timer, ``cn_block_profile``) come with it: a
    decode step is one ``cn_decoder_stack`` call that runs every block inside C.
    ``context`` tokens are decoded first (untimed), so attention sees that many keys."""
    import os

    import cactus_core as cactus

    if threads:
        os.environ["CACTUS_THREADS"] = str(threads)
    engine = cactus.load(model, backend="cpu_neon")
    neon = engine.model.ops.resolve("linear", "float32").__self__
    stats: dict[str, list] = {}

    class Timed:
        def __init__(self, lib):
            self._lib = lib

        def __getattr__(self, name):
            fn = getattr(self._lib, name)
            if not callable(fn):
                return fn
            entry = stats.setdefault(name, [0, 0.0, 0])

            def timed(*args):
                t = time.perf_counter()
                try:
                    return fn(*args)
                finally:
                    entry[0] += 1
                    entry[1] += time.perf_counter() - t
                    entry[2] += _weight_bytes(name, args)

            return timed

    gen, tok = engine.generator, 1
    gen.reset()
    for _ in range(8):
        tok = int(np.argmax(gen.step(tok)))
    gen.reset()
    for _ in range(context):
        tok = int(np.argmax(gen.step(tok)))
    start = context
    real, neon._lib = neon._lib, Timed(neon._lib)
    real.cn_block_profile(1)
    try:
        t = time.perf_counter()
        for _ in range(tokens):
            tok = int(np.argmax(gen.step(tok)))
        total = time.perf_counter() - t
    finally:
        neon._lib = real
        real.cn_block_profile(0)
    ns, nbytes = neon._ffi.new("int64_t[8]"), neon._ffi.new("int64_t[8]")
    blocks = real.cn_block_profile_read(ns, nbytes)
    phases = {name: dict(ms_per_token=ns[i] / 1e6 / tokens, us_per_block=ns[i] / 1e3 / max(blocks, 1),
                         **({"GBps": nbytes[i] / ns[i]} if nbytes[i] and ns[i] else {}))
              for i, name in enumerate(_BLOCK_PHASES)}
    in_c = sum(v[1] for v in stats.values())
    calls = {name: dict(calls=n / tokens, ms_per_token=1000 * sec / tokens, us_per_call=1e6 * sec / n,
                        **({"GBps": b / sec / 1e9, "MiB_per_token": b / tokens / 2**20} if b else {}))
             for name, (n, sec, b) in sorted(stats.items(), key=lambda kv: -kv[1][1])}
    return {"model": model, "backend": neon.describe(), "ms_per_token": 1000 * total / tokens,
            "ms_outside_c_per_token": 1000 * (total - in_c) / tokens, "calls": calls,
            "block_phases": phases if blocks else {}, "blocks_per_token": blocks / tokens,
            "context": [start, start + tokens]}


class _NullLib:
    """Stands in for the cffi ``lib``: every kernel returns 0 at once."""

    def __init__(self, lib):
        self._lib = lib

    def __getattr__(self, name):
        fn = getattr(self._lib, name)
        if callable(fn):
            fn = lambda *args: 0  # noqa: E731 - the cheapest callable
        setattr(self, name, fn)
        return fn


def python_only(model: str, tokens: int = 64, rounds: int = 5) -> dict:
    """Python time of a decode step (ms, thread CPU time, best of ``rounds``), its C calls stubbed.

    After four real steps (weights paged in, per-tensor tables built) the C library
    is replaced by no-ops and the backend's ``np.empty`` by ``np.zeros``, so the
    outputs the stubs never write hold zeros, not garbage whose NaN or denormal
    arithmetic would be slow.  One thread: no pool to wait for.
    """
    import os
    import types

    import cactus_core as cactus

    from . import backend as _backend

    threads, os.environ["CACTUS_THREADS"] = os.environ.get("CACTUS_THREADS"), "1"
    try:
        engine = cactus.load(model, backend="cpu_neon")
    finally:
        if threads is None:
            del os.environ["CACTUS_THREADS"]
        else:
            os.environ["CACTUS_THREADS"] = threads
    neon = engine.model.ops.resolve("linear", "float32").__self__
    gen, tok = engine.generator, 1
    gen.reset()
    for _ in range(4):
        tok = int(np.argmax(gen.step(tok)))
    real_lib, real_np = neon._lib, _backend.np
    zeros = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    zeros.empty, zeros.empty_like = np.zeros, np.zeros_like
    neon._lib, _backend.np = _NullLib(real_lib), zeros
    best = float("inf")
    try:
        with np.errstate(all="ignore"):
            for _ in range(rounds):
                gen.reset()
                t = time.thread_time()
                for _ in range(tokens):
                    gen.step(1)
                best = min(best, (time.thread_time() - t) / tokens)
    finally:
        neon._lib, _backend.np = real_lib, real_np
    return {"model": model, "python_ms_per_token": 1000 * best}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--cpu-time", action="store_true", help="time by process CPU time (busy machines)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--python-share", metavar="MODEL", help="share of decode time spent outside C")
    p.add_argument("--python-only", metavar="MODEL", help="Python ms per decode step, C calls stubbed")
    p.add_argument("--breakdown", metavar="MODEL", help="decode time per C entry point, with weight GB/s")
    p.add_argument("--context", type=int, default=0, metavar="N",
                   help="--breakdown: decode N tokens first, untimed (attention over N more keys)")
    p.add_argument("--tokens", type=int, default=None, help="decode steps (--python-share 32, --python-only 64)")
    p.add_argument("--cq-decode", action="store_true", help="CQ decode GB/s: exact kernel against int8 activations")
    p.add_argument("--head", action="store_true", help="output-head decode per --head format (int8, cq6, cq5, cq4)")
    a = p.parse_args(argv)
    if a.head:
        rows = head_decode(a.threads)
        print(json.dumps(rows, indent=2) if a.json else
              "\n".join(f"{r['case']:34s} {r['ms']:8.2f} ms {r['MB']:7.1f} MB {r['GBps']:6.1f} GB/s" for r in rows))
        return
    if a.cq_decode:
        rows = cq_decode(a.threads)
        print(json.dumps(rows, indent=2) if a.json else
              "\n".join(f"{r['case']:28s} {r['ms']:8.3f} ms {r['codes_GBps']:6.1f} GB/s of codes" for r in rows))
        return
    if a.breakdown:
        r = breakdown(a.breakdown, a.tokens or 32, a.threads, a.context)
        if a.json:
            print(json.dumps(r, indent=2))
            return
        print(f"{r['backend']}: {r['ms_per_token']:.2f} ms/token, {r['ms_outside_c_per_token']:.2f} outside C "
              f"(positions {r['context'][0]}-{r['context'][1]})")
        for name, c in r["calls"].items():
            gb = f" {c['GBps']:5.1f} GB/s {c['MiB_per_token']:6.1f} MiB/token" if "GBps" in c else ""
            print(f"  {name:22s} {c['calls']:5.1f} calls {c['ms_per_token']:7.3f} ms/token "
                  f"{c['us_per_call']:8.1f} us/call{gb}")
        if r["block_phases"]:
            print(f"  inside the decoder blocks ({r['blocks_per_token']:.0f} per token):")
        for name, c in r["block_phases"].items():
            gb = f" {c['GBps']:5.1f} GB/s" if "GBps" in c else ""
            print(f"    {name:26s} {c['ms_per_token']:7.3f} ms/token {c['us_per_block']:7.1f} us/block{gb}")
        return
    if a.python_only:
        r = python_only(a.python_only, a.tokens or 64)
        print(json.dumps(r, indent=2) if a.json else f"{r['python_ms_per_token']:.3f} ms of Python per token")
        return
    if a.python_share:
        r = python_share(a.python_share, a.tokens or 32, a.threads, a.cpu_time)
        if a.json:
            print(json.dumps(r, indent=2))
        else:
            print(f"{r['backend']}: {r['ms_per_token']:.2f} ms/token, {r['ms_in_c_per_token']:.2f} in C "
                  f"({r['c_calls_per_token']:.0f} calls), {100 * r['share_outside_c']:.1f}% outside C")
        return
    rows = run(a.threads, a.repeats, a.cpu_time)
    dev = detect_device()
    header = f"{dev.cpu_model} ({dev.arch}, {dev.physical_cores} cores, {' '.join(dev.simd)}), {create(a.threads).describe()}"
    if a.json:
        print(json.dumps({"device": header, "results": rows}, indent=2))
        return
    print(header)
    print(f"{'case':46s} {'cpu_neon ms':>12s} {'numpy_ref ms':>13s} {'speedup':>8s} {'GB/s':>6s}")
    for r in rows:
        gbps = r.get("cpu_neon_weight_GBps", "")
        print(f"{r['case']:46s} {r['cpu_neon_ms']:12.3f} {r['numpy_ref_ms']:13.3f} {r['speedup']:7.2f}x {gbps:>6}")


if __name__ == "__main__":
    main()
