"""Sampling and the decode loop's stop handling, with a scripted model."""

from __future__ import annotations

import numpy as np
import pytest

from cactus_core.generate import Generator, SamplingParams, sample


class ScriptedModel:
    """Emits a fixed token sequence; lets stop and streaming logic be tested exactly."""

    n_layers, n_kv_heads, head_dim, max_context, vocab_size = 1, 1, 2, 64, 10

    def __init__(self, script):
        self.script = list(script)
        self.captured = {}

    def forward(self, ids, cache):
        cache.advance(ids.shape[1])
        return np.zeros((1, ids.shape[1], 2), dtype=np.float32) + cache.offset

    def logits(self, h):
        pos = int(h[0, -1, 0])
        z = np.zeros((1, h.shape[1], self.vocab_size), dtype=np.float32)
        z[0, -1, self.script[min(pos - 3, len(self.script) - 1)]] = 10.0
        return z


LETTERS = "abcdefghij"


def run(script, **kw):
    pieces = []
    res = Generator(ScriptedModel(script)).generate(
        [1, 2, 3], SamplingParams(**kw), decode=lambda t: LETTERS[t], on_text=pieces.append)
    return res, pieces


def test_stop_string_is_cut_and_never_streamed():
    res, pieces = run([0, 1, 2, 3, 4, 5], max_tokens=10, stop=["cd"])
    assert res.text == "ab" and res.finish_reason == "stop"
    assert "".join(pieces) == "ab"


def test_partial_stop_prefix_is_released_when_it_does_not_complete():
    res, pieces = run([0, 2, 4, 5, 6], max_tokens=5, stop=["cx"])
    assert res.text == "acefg" and "".join(pieces) == "acefg"


def test_eos_and_max_tokens():
    res, _ = run([0, 1, 9], max_tokens=10, eos_token_ids=[9])
    assert res.tokens == [0, 1] and res.finish_reason == "stop"
    res, _ = run([0, 1, 2, 3], max_tokens=3)
    assert res.tokens == [0, 1, 2] and res.finish_reason == "length"


def test_callback_can_cancel():
    pieces = []
    res = Generator(ScriptedModel([0, 1, 2, 3])).generate(
        [1, 2, 3], SamplingParams(max_tokens=10), decode=lambda t: LETTERS[t],
        on_text=lambda p: pieces.append(p) or len(pieces) < 2)
    assert res.finish_reason == "cancelled" and len(res.tokens) == 2


def test_after_prefill_can_skip_decoding():
    res = Generator(ScriptedModel([0, 1])).generate(
        [1, 2, 3], SamplingParams(max_tokens=10), decode=lambda t: "x", after_prefill=lambda l: False)
    assert res.tokens == [] and res.finish_reason == "handoff"


def test_sampling_filters():
    rng = np.random.default_rng(0)
    logits = np.array([5.0, 4.9, 1.0, -3.0], dtype=np.float32)
    assert sample(logits, SamplingParams(), [], rng) == 0
    picks = {sample(logits, SamplingParams(temperature=1.0, top_k=2), [], rng) for _ in range(200)}
    assert picks == {0, 1}
    picks = {sample(logits, SamplingParams(temperature=1.0, top_p=0.5), [], rng) for _ in range(100)}
    assert picks == {0}
    picks = {sample(logits, SamplingParams(temperature=1.0, min_p=0.5), [], rng) for _ in range(200)}
    assert picks == {0, 1}
    # A repetition penalty pushes a seen token below its rival.
    assert sample(logits, SamplingParams(repetition_penalty=2.0), [0], rng) == 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_seeded_sampling_is_reproducible(seed):
    logits = np.linspace(0, 1, 10).astype(np.float32)
    a = [sample(logits, SamplingParams(temperature=1.0), [], np.random.default_rng(seed)) for _ in range(5)]
    b = [sample(logits, SamplingParams(temperature=1.0), [], np.random.default_rng(seed)) for _ in range(5)]
    assert a == b


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_kv_cache_memory_is_resident_only_where_written():
    """A 4096-position cache holding a short prompt costs that prompt's pages, not the whole cache."""
    import os

    from cactus_core.generate import KVCache

    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs Linux's /proc to read the resident set")
    before = _rss_kb()
    cache = KVCache(n_layers=16, n_kv_heads=8, head_dim=64, max_len=4096, dtype=np.float16)  # 2 x 64 MiB
    assert cache.nbytes == 128 * 2**20 and not cache.keys.any()
    for layer in range(16):  # an 8-token prompt, as attention writes it: the start of each head's run
        cache.update(layer, np.ones((1, 8, 8, 64), np.float32), np.ones((1, 8, 8, 64), np.float32))
    cache.advance(8)
    grown_mb = (_rss_kb() - before) / 1024
    # 16 layers x 8 heads x 2 tensors x one 4 KB page each is 1 MiB; huge pages made it all 128
    assert grown_mb < 16, grown_mb
    k, v = cache.layer(3, 0)
    assert k[0, :, :8].min() == 1 and not k[0, :, 8:].any() and v.dtype == np.float16
