"""What the model writes for its own calibration (calibrate.py): template frames cut
at the right tokens, and multi-turn chats that follow the template's own seams."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cactus_core.errors import QuantizationError

SPINE = Path(__file__).resolve().parents[2] / "models" / "spine"


def test_chat_frame_does_not_swallow_a_byte_the_probes_share():
    """The default model's byte-level BPE splits the probe characters into byte tokens
    that start alike; the frame must stop at the template's own text."""
    from cactus_core.tokenizer import Tokenizer
    from cactus_quant.calibrate import _chat_frame, _turn_break

    tok = Tokenizer.from_dir(str(SPINE))
    pre, post = _chat_frame(tok)
    assert tok.decode(pre) == "<|im_start|>user\n"
    assert tok.decode(post) == "<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(_turn_break(tok)) == "<|im_end|>\n<|im_start|>user\n"


def test_multi_turn_chats_follow_the_template(tiny_chat):
    from cactus_core.engine import Engine
    from cactus_quant.calibrate import USER_TOKENS, _chat_frame, _turn_break, self_written_tokens

    engine = Engine.load(tiny_chat, context_length=8)
    tok = engine.tokenizer
    (pre, post), seam = _chat_frame(tok), _turn_break(tok)
    assert seam and len(pre) and len(post)
    # the frame and seam rebuild the template's own rendering of a two-round chat around the contents
    two = tok.encode_chat([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "sure"},
                           {"role": "user", "content": "thanks"}], add_generation_prompt=True)
    assert two[: len(pre)] == pre and two[len(two) - len(post):] == post
    assert any(two[i : i + len(seam)] == seam for i in range(len(two)))

    texts = self_written_tokens(engine, samples=4, length=16, seed=2, turns=3)
    assert texts == self_written_tokens(engine, samples=4, length=16, seed=2, turns=3)  # seeded
    plain, chats = texts[:2], texts[2:]
    assert all(len(t) == 17 for t in plain)
    reply = 16 // 2
    for t in chats:
        assert len(t) == len(pre) + 3 * (USER_TOKENS + len(post) + reply) + 2 * len(seam)
        at = len(pre)
        assert t[:at] == pre
        for r in range(3):  # user turn, template close + generation prompt, reply, seam
            at += USER_TOKENS
            assert t[at : at + len(post)] == post
            at += len(post) + reply
            if r < 2:
                assert t[at : at + len(seam)] == seam
                at += len(seam)
    # one round is the single-turn chat of before
    one = self_written_tokens(engine, samples=4, length=16, seed=2)
    assert all(len(t) == len(pre) + USER_TOKENS + len(post) + reply for t in one[2:])
    with pytest.raises(QuantizationError, match="turns"):
        self_written_tokens(engine, samples=2, length=8, turns=0)


def test_tokens_after_a_closed_turn_are_found():
    from cactus_quant.calibrate import _after_end

    ids = [5, 6, 9, 7, 8, 1, 2, 9, 3]
    sampled = np.array([0, 1, 1, 1, 1, 0, 0, 1, 1], dtype=bool)  # two sampled runs after forced tokens
    # 9 closes the first run: 7 and 8 come after it; the forced 1, 2 reopen; 9 then closes the second run
    assert _after_end(ids, sampled, {9}).tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 1]
    assert not _after_end(ids, np.zeros(len(ids), dtype=bool), {9}).any()  # forced end tokens close nothing


def test_past_end_false_leaves_out_only_tokens_after_a_closed_turn(tiny_chat):
    from cactus_core.engine import Engine
    from cactus_quant.calibrate import _chat_frame, self_written

    engine = Engine.load(tiny_chat, context_length=8)
    ends = set(engine.tokenizer.eos_token_ids)
    texts, keep = self_written(engine, samples=8, length=16, seed=4, turns=2, past_end=False)
    again, keep_all = self_written(engine, samples=8, length=16, seed=4, turns=2)
    assert texts == again and all(k.all() for k in keep_all)  # the mask changes the record, not the text
    assert all(k.all() for k in keep[:4])  # plain text keeps every token
    pre = _chat_frame(engine.tokenizer)[0]
    for t, k in zip(texts[4:], keep[4:]):
        assert len(k) == len(t) and k[: len(pre)].all()
        for i in np.flatnonzero(~k):  # every dropped token follows an end token of the same turn
            assert any(x in ends for x in t[len(pre) : i])
    assert any(not k.all() for k in keep[4:])  # a random model closes some turns early


def test_masked_tokens_are_read_as_context_but_not_recorded(tiny_chat):
    from cactus_core import plugins
    from cactus_core.engine import Engine
    from cactus_quant.calibrate import HessianOps, read_back, self_written_tokens

    texts = self_written_tokens(Engine.load(tiny_chat, context_length=8), samples=4, length=24, seed=1)[:2]

    def record(tokens, keep=None):
        ops = HessianOps(plugins.select_backends("numpy_ref"))
        read_back(Engine.load(tiny_chat, context_length=8, ops=ops), tokens, keep)
        return ops

    k = 10
    keep = [np.ones(len(texts[0]), dtype=bool), np.arange(len(texts[1])) < k]
    masked, cut = record(texts, keep), record([texts[0], texts[1][:k]])  # causal: a prefix reads the same
    name = "model.layers.1.mlp.down_proj.weight"
    assert masked.counts[name] == cut.counts[name] == len(texts[0]) + k
    hm, hc = masked.hessians(), cut.hessians()
    for n in hc:
        assert np.allclose(hm[n], hc[n], rtol=1e-4, atol=1e-6 * np.abs(hc[n]).max()), n


def test_shrinkage_weight_follows_the_noise_and_lowers_the_error():
    """Split-half shrinkage towards the diagonal: strong when the halves disagree (few
    tokens), weak when they agree (many), and closer to the true second moment than
    the plain estimate when the tokens are few."""
    from cactus_quant.calibrate import shrink_hessian

    rng = np.random.default_rng(7)
    n = 48
    mix = rng.standard_normal((n, n)) / np.sqrt(n) + np.eye(n)
    true = mix @ mix.T
    gains, alphas = [], {}
    for tokens in (64, 256, 16384):
        errs = []
        for trial in range(4):
            x = rng.standard_normal((tokens, n)) @ mix.T
            a, b = x[::2], x[1::2]
            h_a, h_b = a.T @ a / len(a), b.T @ b / len(b)
            shrunk, alpha = shrink_hessian(h_a, len(a), h_b, len(b))
            plain = x.T @ x / len(x)
            assert np.allclose(np.diag(shrunk), np.diag(plain))  # the diagonal is kept
            assert 0 <= alpha <= 1
            alphas.setdefault(tokens, []).append(alpha)
            errs.append((np.linalg.norm(shrunk - true), np.linalg.norm(plain - true)))
        gains.append(np.mean([s / p for s, p in errs]))
    assert np.mean(alphas[64]) > np.mean(alphas[256]) > np.mean(alphas[16384])
    assert np.mean(alphas[16384]) < 0.05
    assert gains[0] < 0.95 and gains[1] < 1.0  # shrinking helps where the estimate is noisy


def test_default_conversion_is_deterministic_per_calibration_seed(tiny_chat, tmp_path):
    from cactus_quant import calibrate
    from cactus_quant.convert import convert

    assert calibrate.CHAT_TURNS > 1 and not calibrate.PAST_END  # the defaults measured in docs/quantization.md
    runs = {}
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        rep = convert(tiny_chat, tmp_path / name, bits=4, progress=False, head="keep", calibration_samples=4,
                      calibration_seed=seed)
        assert rep["calibration"] == "self-written text"
        runs[name] = (tmp_path / name / "model.safetensors").read_bytes()
    assert runs["a"] == runs["b"] and runs["a"] != runs["c"]
