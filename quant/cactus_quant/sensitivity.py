"""Measured sensitivity: the KL divergence one quantized tensor adds to the model's output.

Mixed precision (``cq3.26``, ``cq2.54``) needs, for every tensor and width, how
much worse the model gets when only that tensor is quantized at that width.
The weight-error proxy (:func:`cactus_quant.mixed.proxy_measure`) ignores how
the rest of the network amplifies or absorbs a layer's error; this measures it:

1. the float model samples its own text (or the caller gives token ids), so no
   dataset is needed;
2. the float model's next-token log-probabilities on that text are kept;
3. for each (tensor, width), the engine runs again with only that tensor
   swapped for its quantized version (:class:`SwapOps` substitutes it at the
   ``linear`` call, nothing is reloaded) and the mean KL(float || swapped) over
   the text is the tensor's cost.

The quantized tensors made while measuring are kept, so the conversion that
follows reuses them instead of quantizing again.  Cost: one forward pass over
the text per (tensor, width), e.g. 168 passes for 56 tensors at 2/3/4 bits.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from cactus_core.graph import Ops


class SwapOps(Ops):
    """Ops that multiply by a substitute for chosen weights, found by tensor name."""

    def __init__(self, backends):
        super().__init__(backends)
        self.names: dict[int, str] = {}
        self.swap: dict[str, Any] = {}

    def name_weight(self, name: str, w) -> None:
        self.names[id(w)] = name

    def linear(self, x, w, bias=None):
        if self.swap:
            w = self.swap.get(self.names.get(id(w), ""), w)
        return super().linear(x, w, bias)


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def self_generated_tokens(engine, samples: int = 4, length: int = 128, seed: int = 0) -> list[list[int]]:
    """Token ids of ``samples`` texts the model samples itself from its start token."""
    from cactus_core.generate import SamplingParams

    bos = engine.tokenizer.bos_token_id
    start = [bos] if bos is not None else (engine.tokenizer.eos_token_ids[:1] or [0])
    texts = []
    for i in range(samples):
        res = engine.generator.generate(list(start), SamplingParams(max_tokens=length, temperature=1.0,
                                                                    top_p=0.95, seed=seed + i),
                                        decode=lambda t: "")
        texts.append(list(start) + list(res.tokens))
    return texts


def self_generated_chats(engine, samples: int = 4, length: int = 64, seed: int = 100) -> list[list[int]]:
    """Chats the model writes itself: a sampled text as the user turn, then its own reply.

    A chat model spends its life reading chat templates, whose control tokens
    carry activations plain text never produces; calibrating on both covers them.
    """
    from cactus_core.generate import SamplingParams

    chats = []
    for i, text in enumerate(self_generated_tokens(engine, samples, 48, seed)):
        user = engine.tokenizer.decode(text[1:])
        try:
            prompt = engine.tokenizer.encode_chat([{"role": "user", "content": user}], add_generation_prompt=True)
        except Exception:  # no chat template: plain text only
            return []
        res = engine.generator.generate(prompt, SamplingParams(max_tokens=length, temperature=1.0, top_p=0.95,
                                                               seed=seed + i), decode=lambda t: "")
        chats.append(list(prompt) + list(res.tokens))
    return chats


class CalibrationTexts(list):
    """Token ids of calibration texts (a list, so any caller can take it as one) with
    :attr:`keep`: per text, a bool per token, whether the model's output at that token
    counts (None: every token).  Self-written chats the model closes early go on, in
    lockstep, with text it writes after its turn was over; those tokens stay as
    context but are not scored (:func:`cactus_quant.calibrate.self_written`)."""

    keep: Optional[list[np.ndarray]] = None
    #: how many of the texts (the first ones) are plain text rather than chats, when known
    plain: Optional[int] = None


#: Whether :func:`calibration_tokens` (the mixed plans' KL sensitivity, GPTQ and
#: ``--calibrate``) samples CQ4's calibration text (:func:`cactus_quant.calibrate.self_written`:
#: six-round chats in the fixed chat frame, after-turn tokens not scored) instead of
#: the one-round sampler below.  Off: measured on stage 13 it lowered the KL of
#: CQ3.26 and CQ2.54 (0.84x, 0.74x) and CQ3.26's perplexity change (+2.70% to +0.19%),
#: but raised CQ2.54's (+1.43% to +5.19%) and made measuring 4-5x slower, one draw
#: each (docs/quantization.md, session 7).
SELF_WRITTEN_TEXT = False


def calibration_tokens(engine, samples: int = 8, length: int = 128, text: Optional[str] = None,
                       seed: int = 0, self_written: Optional[bool] = None) -> list[list[int]]:
    """Token ids to calibrate on: windows of ``text`` when given, else self-generated
    text plus (for chat models) self-generated chats, half each.  With
    :data:`SELF_WRITTEN_TEXT`, the self-generated part is the text ``cactus convert
    --bits 4`` calibrates on (:func:`cactus_quant.calibrate.self_written`: half plain
    text of ``length`` tokens, half chats of ``calibrate.CHAT_TURNS`` rounds in the
    model's chat template), returned as :class:`CalibrationTexts` whose ``keep``
    leaves out what a chat writes after closing its turn (``calibrate.PAST_END``).
    ``self_written`` overrides the module switch for one call."""
    if text is not None:
        ids = engine.tokenizer.encode(text)
        wins = [ids[i : i + length] for i in range(0, max(len(ids) - length, 0) + 1, length)]
        return [w for w in wins if len(w) > 1][: max(samples, 1)] or [ids]
    if SELF_WRITTEN_TEXT if self_written is None else self_written:
        from .calibrate import CHAT_TURNS, PAST_END
        from .calibrate import self_written as write

        texts, keep = write(engine, samples, length, seed, turns=CHAT_TURNS, past_end=PAST_END)
        out = CalibrationTexts(texts)
        out.keep = keep
        return out
    chats = self_generated_chats(engine, samples // 2, length // 2, seed + 100) if samples > 1 else []
    return self_generated_tokens(engine, samples - len(chats), length, seed) + chats


def record_inputs(model_dir: str, tokens: Sequence[Sequence[int]], max_rows: int = 4096,
                  backend: str = "auto") -> dict[str, np.ndarray]:
    """The inputs of every named linear layer while the float model reads ``tokens``."""
    from cactus_core import plugins
    from cactus_core.engine import Engine
    from cactus_core.quality import RecordingOps

    ops = RecordingOps(plugins.select_backends(backend), max_rows=max_rows)
    engine = Engine.load(model_dir, context_length=max(len(t) for t in tokens) + 8, ops=ops)
    for ids in tokens:
        engine.logits(list(ids))
    return {name: np.concatenate(rows)[:max_rows] for name, rows in ops.inputs.items()}


class KLSensitivity:
    """``measure(name, bits)``: mean KL(float || only ``name`` quantized at ``bits``).

    ``quantize(name, bits) -> QuantizedTensor`` makes the tensor (called once
    per pair; results stay in :attr:`tensors`).  ``tokens``: the texts to score
    (default: :func:`self_generated_tokens`; :func:`calibration_tokens` gives the
    texts ``cactus convert`` measures on, with the positions to score).
    """

    def __init__(self, model_dir: str, quantize: Callable[[str, int], Any],
                 tokens: Optional[Sequence[Sequence[int]]] = None, samples: int = 4, length: int = 128,
                 backend: str = "auto", progress: Optional[Callable[[], None]] = None):
        from cactus_core import plugins
        from cactus_core.engine import Engine

        self.ops = SwapOps(plugins.select_backends(backend))
        longest = length + 1 if tokens is None else max(len(t) for t in tokens)
        self.engine = Engine.load(model_dir, context_length=longest + 8, ops=self.ops)
        self.tokens = [list(t) for t in tokens] if tokens is not None else self_generated_tokens(
            self.engine, samples, length)
        keep = getattr(tokens, "keep", None)  # CalibrationTexts: score only the kept positions
        #: per text, which of its next-token predictions count (the output at a kept token)
        self.scored = [np.asarray(k, dtype=bool)[:-1] for k in keep] if keep is not None else None
        self.quantize = quantize
        self.progress = progress
        self.reference = [self._scored(i, _log_softmax(self.engine.logits(ids))[:-1])
                          for i, ids in enumerate(self.tokens)]
        self.tensors: dict[tuple[str, int], Any] = {}
        self.costs: dict[tuple[str, int], float] = {}

    def _scored(self, i: int, lp: np.ndarray) -> np.ndarray:
        return lp if self.scored is None else lp[self.scored[i]]

    def kl(self) -> float:
        """Mean KL of the engine as currently swapped against the float reference."""
        total, count = 0.0, 0
        for i, (ids, lp) in enumerate(zip(self.tokens, self.reference)):
            lq = self._scored(i, _log_softmax(self.engine.logits(ids))[:-1])
            total += float(np.sum(np.exp(lp) * (lp - lq)))
            count += len(lp)
        return total / max(count, 1)

    def __call__(self, name: str, bits: int) -> float:
        key = (name, int(bits))
        if key not in self.costs:
            qt = self.tensors.get(key)
            if qt is None:
                qt = self.tensors[key] = self.quantize(name, int(bits))
            self.ops.swap = {name: self.ops.prepare(qt)}
            try:
                self.costs[key] = self.kl()
            finally:
                self.ops.swap = {}
            if self.progress is not None:
                self.progress()
        return self.costs[key]
