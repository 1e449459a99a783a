"""Quantization quality on the embedded default model (real trained weights).

    .venv/bin/python benchmarks/quant_quality_spine.py [--model models/spine] [--conversations 200]
        [--text stdlib|conversations] [--rows CQ4,MLX] [--all-turns] [--test-jsonl FILE] [--split test|val]
        [--calibration-draws K] [--json out.json]

Each row converts the model with ``cactus convert``'s own code path
(:func:`cactus_core.convert_cli.run_convert`), then scores the bundle against the
float model on held-out text: by default (``--text stdlib``, since session 12) the
95 standard-library docstrings of training's validation share (general English the
model is unsure of: float perplexity about 40); with ``--text conversations`` the
final assistant turns of test-split conversations (templates and entities the model
never saw; prompts are not scored, since it was never trained on them), each through
its end-of-turn token, where the model is nearly certain (float perplexity 1.00004)
and every 4-bit scheme sits at the floor.  The float model's log-probabilities are
computed once and reused.

Columns: true bits per weight of the block linears, of the whole model (embedding and
head included), mean KL(float || quant) per token with a 95% bootstrap interval over
conversations, the mean without the 5 worst tokens (a handful of tokens where the
float model sits on a knife edge dominate the mean on a model this small), p99, and
perplexity change with a paired 95% bootstrap interval over conversations (float and
quantized NLL summed over the same resampled conversations; it covers which test
conversations were drawn, not which calibration text: see ``--calibration-draws``).  The ratio to MLX is also split by the float model's own NLL
of the scored token (above ``UNSURE_NLL`` = 2: entities it never saw, ~5% of the
tokens and ~80% of any 4-bit scheme's KL on the test split), with how many tokens
carry 80% of the row's KL (docs/quantization.md, session 6).  MLX's affine 4-bit group-64 (``mlx.core.quantize``) is the
outside baseline, and every row's KL is also given as a ratio to MLX's with a
paired bootstrap interval (same resampled conversations for both), which is much
tighter than comparing the two intervals.  ``--all-turns`` scores every assistant
turn of each conversation instead of the last only (about 5x the tokens; not
comparable with the default table).  Rows run on numpy_ref by default, so kernel
work elsewhere cannot move the numbers.  "CQ4" is ``cactus convert --bits 4``'s
default (error feedback calibrated on text the model writes itself); "CQ4
data-free" is the encoder without it; "CQ4 --calibrate (16 samples)" is the
CLI's ``--calibrate`` path (fewer tokens, stronger damping); "CQ4 sequential",
"CQ4 512 samples" and "CQ4 one-round chats" (session 5's calibration text) are
calibration variants measured in docs/quantization.md.

A self-calibrated row's KL depends on which texts the model happened to write
(docs/quantization.md: one draw measured 0.40x MLX, another 0.86x), so
``--calibration-draws K`` converts such rows K times with calibration seeds
0..K-1 and reports each draw and the mean, spread and range of KL / MLX.  Tune
on ``--split val`` (validation conversations); the test split is for the table.
The test split lists its 1200 conversations by the category of their last turn
(``training.datagen.EVAL_COUNTS``: 600 "single", then multi, oos, missing, chat), so
``--conversations`` up to 600 takes more of one population and beyond it mixes in others.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# after PYTHONPATH, so a frozen snapshot of cactus_core (and training) placed there wins
sys.path.append(str(ROOT))

#: Stands for a file of training docstrings (written when a row asks for it).
STDLIB_TRAIN = "<stdlib train docstrings>"

#: label -> run_convert options ("mlx" is the outside baseline; a "self_calibrate"
#: key calls cactus_quant's convert directly, which run_convert does not expose)
ROWS = {
    "CQ4": dict(bits="4", head="keep"),  # self-calibrated error feedback (the default since session 4)
    "CQ4 data-free": dict(bits="4", head="keep", self_calibrate=False),
    "CQ4 --calibrate (16 samples)": dict(bits="4", head="keep", calibrate=True),
    "MLX affine 4-bit g64": "mlx",
    "CQ4 + head int8": dict(bits="4", head="int8"),
    "GPTQ-4 g128": dict(bits="4", method="gptq", head="keep"),
    "RTN int4 g128": dict(bits="4", method="rtn", head="keep"),
    "CQ3.26 KL plan": dict(bits="3.26", head="keep"),
    "CQ3.26 proxy plan": dict(bits="3.26", head="keep", sensitivity="proxy"),
    "CQ2.54 KL plan": dict(bits="2.54", head="keep"),
    "CQ2.54 proxy plan": dict(bits="2.54", head="keep", sensitivity="proxy"),
    # the plans' KL measured on CQ4's six-round self-written text (sensitivity.SELF_WRITTEN_TEXT)
    "CQ3.26 KL plan six-round": dict(bits="3.26", head="keep", plan_text="six-round"),
    "CQ2.54 KL plan six-round": dict(bits="2.54", head="keep", plan_text="six-round"),
    "CQ3": dict(bits="3", head="keep"),
    "CQ2": dict(bits="2", head="keep"),
    # error feedback at 3 and 2 bits (session 16): cq4's self-written Hessians, or the CLI's --calibrate
    "CQ3 self-calibrated": dict(bits="3", head="keep", self_calibrate=True),
    "CQ2 self-calibrated": dict(bits="2", head="keep", self_calibrate=True),
    "CQ3 --calibrate": dict(bits="3", head="keep", calibrate=True),
    "CQ2 --calibrate": dict(bits="2", head="keep", calibrate=True),
    "CQ3.26 KL plan --calibrate": dict(bits="3.26", head="keep", calibrate=True),
    "CQ2.54 KL plan --calibrate": dict(bits="2.54", head="keep", calibrate=True),
    "CQ4 + head cq4": dict(bits="4", head="cq4"),
    "CQ4 + head cq6": dict(bits="4", head="cq6"),
    # cq4's preset until session 12: 256 2-vectors (8-bit codes) instead of 16 scalar levels,
    # the same self-calibrated pipeline (docs/quantization.md, sessions 11-12)
    "CQ4 2-vector": dict(bits="4", head="keep", self_calibrate=True,
                         quantizer=("cq4", 4, dict(index_bits=8, vec_dim=2))),
    # calibrated on user text instead of self-written chats: 64 samples of 128 tokens from the
    # standard-library docstrings the model trained on (disjoint from --text stdlib's held-out ones)
    "CQ4 docstring calibration": dict(bits="4", head="keep", calibration_text=STDLIB_TRAIN, samples=64),
    # calibration variants (docs/quantization.md, session 5)
    "CQ4 sequential": dict(bits="4", head="keep", sequential=True),
    "CQ4 512 samples": dict(bits="4", head="keep", calibration_samples=512),
    # session 5's default text: 128 samples, chats of one round, every token recorded
    # session 13: the self-written text's sampling temperature and plain-text length (the
    # default became T = 1.3, 256 tokens: the "CQ4" row); each row states both
    "CQ4 128 tokens T=1.0 (before session 13)": dict(bits="4", head="keep", calibration_temperature=1.0,
                                                     calibration_length=128),
    **{f"CQ4 calibration T={t}": dict(bits="4", head="keep", calibration_temperature=t, calibration_length=128)
       for t in (0.7, 1.3, 1.6)},
    **{f"CQ4 {n}-token texts": dict(bits="4", head="keep", calibration_temperature=1.0, calibration_length=n)
       for n in (256, 384, 512)},
    **{f"CQ4 T={t} {n}-token texts": dict(bits="4", head="keep", calibration_temperature=t, calibration_length=n)
       for t, n in ((1.3, 256), (1.6, 256), (1.3, 512))},
    "CQ4 64 samples of 384 tokens": dict(bits="4", head="keep", calibration_temperature=1.0, calibration_length=384,
                                         calibration_samples=64),
    # session 13 probe: llama.cpp's Q4_K_M keeps attn_v at 6 bits; here every v_proj gets
    # 6-bit codes of equally spaced scalars (2.2% of the weights, +0.05 bpw)
    "CQ4 with v_proj at 6 bits": dict(bits="4", head="keep", self_calibrate=True, quantizer=lambda: VProj6()),
    "CQ4 with v_proj and k_proj at 6 bits": dict(bits="4", head="keep", self_calibrate=True,
                                                 quantizer=lambda: VProj6(("v_proj.weight", "k_proj.weight"))),
    "CQ4 with v_proj at 6 bits T=1.3 512-token texts": dict(bits="4", head="keep", self_calibrate=True,
                                                            quantizer=lambda: VProj6(), calibration_temperature=1.3,
                                                            calibration_length=512),
    # session 14: the "CQ4" row widens its most KL-sensitive tensors to 5 or 6 bits within 4.25
    # bpw (widen.py); these rows are its 4-bit-only self (the default before) and variants
    "CQ4 4-bit only (before session 14)": dict(bits="4", head="keep", self_calibrate=True,
                                                quantizer=("cq4", 4, {})),
    "CQ4 widened to 6 bits only": dict(bits="4", head="keep", self_calibrate=True,
                                       quantizer=lambda: widened(widths=(6,))),
    "CQ4 widened to 5 bits only": dict(bits="4", head="keep", self_calibrate=True,
                                       quantizer=lambda: widened(widths=(5,))),
    "CQ4 widened and narrowed to 3 bits": dict(bits="4", head="keep", self_calibrate=True,
                                               quantizer=lambda: widened(widths=(3, 5, 6))),
    "CQ4 widened and narrowed to 3 bits by measured KL": dict(
        bits="4", head="keep", self_calibrate=True, quantizer=lambda: widened(widths=(3, 5, 6), measured=(3,))),
    "CQ4 widened with KL measured at 5 and 6 bits": dict(bits="4", head="keep", self_calibrate=True,
                                                         quantizer=lambda: widened(measured=(5, 6))),
    "CQ4 widened T=1.3 512-token texts 4x the sensitivity tokens": dict(
        bits="4", head="keep", self_calibrate=True, quantizer=lambda: widened(sensitivity_work=4e12),
        calibration_temperature=1.3, calibration_length=512),
    "CQ4 widened 4x the sensitivity tokens": dict(bits="4", head="keep", self_calibrate=True,
                                                  quantizer=lambda: widened(sensitivity_work=4e12)),
    "CQ4 widened T=1.3 512-token texts": dict(bits="4", head="keep", calibration_temperature=1.3,
                                              calibration_length=512, quantizer=lambda: widened()),
    # session 15: refine.py's rounds of code sweeps and least-squares scales after the error feedback
    **{f"CQ4 widened refined {r}x": dict(bits="4", head="keep", self_calibrate=True,
                                          quantizer=lambda r=r: widened(refine=r)) for r in (1, 2, 3)},
    # ... and coarse scale groups (twice as long) where the plan trades them for more widening
    "CQ4 widened (session 14)": dict(bits="4", head="keep", self_calibrate=True, quantizer=lambda: widened()),
    "CQ4 widened coarse groups": dict(bits="4", head="keep", self_calibrate=True,
                                      quantizer=lambda: widened(coarse=True)),
    "CQ4 widened coarse groups refined 3x": dict(bits="4", head="keep", self_calibrate=True,
                                                 quantizer=lambda: widened(coarse=True, refine=3)),
    "CQ4 widened coarse groups refined 3x T=1.3 512-token texts": dict(
        bits="4", head="keep", self_calibrate=True, quantizer=lambda: widened(coarse=True, refine=3),
        calibration_temperature=1.3, calibration_length=512),
    "CQ4 4-bit only refined 3x": dict(bits="4", head="keep", self_calibrate=True,
                                      quantizer=("cq4", 4, {"refine": 3})),
    "CQ4 one-round chats": dict(bits="4", head="keep", calibration_samples=128, calibration_turns=1,
                                calibration_past_end=True),
}


#: Float NLL above which a scored token counts as one the float model gets wrong.
UNSURE_NLL = 2.0


class VProj6:
    """CQ4, but ``*.v_proj.weight`` (or the names ending in ``suffixes``) as 6-bit codes of 64
    equally spaced scalars (a probe)."""

    name, self_calibrate = "cq4", True

    def __init__(self, suffixes=("v_proj.weight",)):
        from cactus_quant.cq import CQQuantizer

        self.suffixes = tuple(suffixes)
        self.cq4 = CQQuantizer("cq4", 4)
        self.cq6 = CQQuantizer("cq6", 4, index_bits=6, vec_dim=1, levels="uniform")

    def quantize(self, name, array, **options):
        return (self.cq6 if name.endswith(self.suffixes) else self.cq4).quantize(name, array, **options)


def widened(**options):
    """cq4's widening quantizer (cactus_quant.widen) as session 14 shipped it, with ``options``."""
    from cactus_quant.widen import WidenedCQQuantizer

    # session 14's widening (no coarse groups, no refinement, 256-token texts) unless told
    return WidenedCQQuantizer("cq4", **{"coarse": False, "refine": 0, "calibration_length": None, **options})


def heldout_segments(engine, n: int = 200, seed: int = 0, all_turns: bool = False,
                     test_jsonl: str | None = None, split: str = "test") -> list[tuple[list[int], np.ndarray]]:
    """Test-split conversations as (ids, scored positions): the final assistant turn
    (or, with ``all_turns``, every assistant turn), since the model was trained on
    assistant turns, never on prompts."""
    if test_jsonl:
        lines = Path(test_jsonl).read_text().splitlines()
    else:
        from training.datagen import generate

        work = Path(tempfile.mkdtemp())
        generate(work, seed=seed, n_train=0, n_val=n if split == "val" else 1)
        lines = (work / f"{split}.jsonl").read_text().splitlines()
        shutil.rmtree(work)
    segments = []
    for r in (json.loads(line) for line in lines[:n]):
        msgs, tools = r["messages"], r.get("tools")
        turns = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
        turns = turns if all_turns else turns[-1:]
        full = engine.tokenizer.encode_chat(msgs[: turns[-1] + 1], tools=tools, add_generation_prompt=False)
        scored: list[int] = []
        for t in turns:
            prefix = engine.tokenizer.encode_chat(msgs[:t], tools=tools, add_generation_prompt=True)
            upto = engine.tokenizer.encode_chat(msgs[: t + 1], tools=tools, add_generation_prompt=False)
            # a template that rewrites earlier turns would misalign positions: skip the turn
            if upto[: len(prefix)] == prefix and full[: len(upto)] == upto:
                scored += range(len(prefix), end_of_turn(upto, len(prefix), engine.tokenizer.eos_token_ids))
        if scored and len(full) <= engine.context_length:  # a longer one cannot be scored whole
            segments.append((full, np.asarray(scored)))
    return segments


def plain_text_segments(engine, n: int = 200, max_tokens: int = 256) -> list[tuple[list[int], np.ndarray]]:
    """The first ``n`` held-out standard-library docstrings (training/plaintext.py's validation
    share, by content hash: never trained on), each ending in ``<|endoftext|>`` as in
    training and cut to ``max_tokens``; every token after the first is scored.  General
    English with real uncertainty, where the conversations' final turns are nearly certain
    for this model (float perplexity 1.00004 over them since session 12's scoring fix).
    The docstrings come from the running Python's standard library: record its version."""
    from training.plaintext import stdlib_docs

    eot = engine.tokenizer.encode("<|endoftext|>", add_special_tokens=False)
    segments = []
    for doc in stdlib_docs()["val"][:n]:
        ids = (engine.tokenizer.encode(doc) + eot)[: min(max_tokens, engine.context_length)]
        if len(ids) > 8:
            segments.append((ids, np.arange(1, len(ids))))
    return segments


def end_of_turn(ids: list[int], start: int, eos: list[int]) -> int:
    """One past the turn's end-of-turn token: what the template writes after it (a newline)
    is never generated, since decoding stops there, and the model was never taught it
    (NLL about 10 on models/spine), so scoring it let one noise token per conversation
    carry over 99% of the KL (session 12)."""
    for i in range(start, len(ids)):
        if ids[i] in eos:
            return i + 1
    return len(ids)


def mlx_affine_copy(src: str, out: str, group: int = 64, bits: int = 4) -> tuple[float, float]:
    """A float16 copy whose block linears went through mlx's quantize/dequantize.

    Returns (bits per weight of those linears, of the whole model with the rest in float16)."""
    import mlx.core as mx
    from safetensors.numpy import load_file, save_file

    shutil.copytree(src, out)
    (Path(out) / "cactus.json").unlink(missing_ok=True)
    tensors = load_file(str(Path(src) / "model.safetensors"))
    n, cost, total = 0, 0.0, sum(w.size for w in tensors.values())
    for name, w in tensors.items():
        if ".layers." in name and name.endswith("proj.weight") and w.ndim == 2 and w.shape[1] % group == 0:
            q, scales, biases = mx.quantize(mx.array(w.astype(np.float32)), group_size=group, bits=bits)
            tensors[name] = np.array(mx.dequantize(q, scales, biases, group_size=group, bits=bits)).astype(w.dtype)
            n += w.size
            cost += w.size * bits + (w.size // group) * 32  # fp16 scale and bias per group
    save_file(tensors, str(Path(out) / "model.safetensors"))
    return cost / n, (cost + 16.0 * (total - n)) / total


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def scored_logprobs(engine, segments) -> list[np.ndarray]:
    """Per conversation, log-probabilities of the scored tokens' predictions (float32)."""
    return [_log_softmax(np.asarray(engine.logits(ids))[pos - 1]).astype(np.float32) for ids, pos in segments]


def bootstrap_picks(n: int, boot: int = 2000, seed: int = 0) -> np.ndarray:
    """``boot`` resamples of ``n`` conversations (indices, with replacement)."""
    return np.random.default_rng(seed).integers(0, n, (boot, n))


def score(reference: list[np.ndarray], quant: list[np.ndarray], segments, boot: int = 2000) -> dict:
    """KL(float || quant) statistics, a conversation-level bootstrap interval, perplexities.

    The perplexity change gets a paired interval from the same resampled conversations
    (float and quant NLL summed over one resample: the tokens either model finds hard are
    shared, so the difference is much tighter than the two perplexities' own spread)."""
    kl_conv = [np.sum(np.exp(p) * (p - q), axis=-1) for p, q in zip(reference, quant)]
    nxt = [np.asarray(ids)[pos] for ids, pos in segments]
    nll_f_conv = np.array([-p[np.arange(len(t)), t].astype(np.float64).sum() for p, t in zip(reference, nxt)])
    nll_q_conv = np.array([-q[np.arange(len(t)), t].astype(np.float64).sum() for q, t in zip(quant, nxt)])
    nll_f, nll_q = nll_f_conv.sum(), nll_q_conv.sum()
    kl = np.concatenate(kl_conv)
    sums, counts = np.array([k.sum() for k in kl_conv]), np.array([len(k) for k in kl_conv])
    pick = bootstrap_picks(len(kl_conv), boot)
    means = sums[pick].sum(1) / counts[pick].sum(1)
    n_pick = counts[pick].sum(1)
    dppl = 100.0 * (np.exp((nll_q_conv[pick].sum(1) - nll_f_conv[pick].sum(1)) / n_pick) - 1.0)
    ppl_f, ppl_q = float(np.exp(nll_f / len(kl))), float(np.exp(nll_q / len(kl)))
    # tokens the float model gets wrong (an entity it never saw) carry most of the KL:
    # their share and the KL on the rest are reported apart
    unsure = np.concatenate([-p[np.arange(len(t)), t] > UNSURE_NLL for p, t in zip(reference, nxt)])
    return {"tokens": int(len(kl)), "conversations": int(len(kl_conv)), "kl_mean": float(kl.mean()),
            "kl_ci95": [float(x) for x in np.percentile(means, [2.5, 97.5])],
            "kl_trim5": float(np.sort(kl)[:-5].mean()), "kl_p99": float(np.quantile(kl, 0.99)),
            "unsure_tokens": int(unsure.sum()), "kl_sum_unsure": float(kl[unsure].sum()),
            "kl_sum_sure": float(kl[~unsure].sum()),
            "kl_tokens_for_80pct": int(np.searchsorted(np.cumsum(np.sort(kl)[::-1]) / max(kl.sum(), 1e-30), 0.8) + 1),
            "perplexity_float": ppl_f, "perplexity_quant": ppl_q, "perplexity_delta_pct": 100.0 * (ppl_q / ppl_f - 1.0),
            "perplexity_delta_ci95": [float(x) for x in np.percentile(dppl, [2.5, 97.5])],
            "kl_sum_per_conversation": [float(x) for x in sums],
            "tokens_per_conversation": [int(x) for x in counts],
            "nll_float_per_conversation": [float(x) for x in nll_f_conv],
            "nll_quant_per_conversation": [float(x) for x in nll_q_conv]}


def paired_ratio(rows: list[dict], base: dict, boot: int = 2000) -> None:
    """Each row's KL over ``base``'s, with a 95% interval from resampling conversations
    for both at once (the tokens where any 4-bit scheme slips are shared, so the
    ratio is far tighter than the two separate intervals suggest)."""
    b = np.asarray(base["kl_sum_per_conversation"])
    pick = bootstrap_picks(len(b), boot, seed=1)
    for r in rows:
        a = np.asarray(r["kl_sum_per_conversation"])
        ratios = a[pick].sum(1) / np.maximum(b[pick].sum(1), 1e-30)
        r["kl_ratio_to_mlx"] = float(a.sum() / max(b.sum(), 1e-30))
        r["kl_ratio_ci95"] = [float(x) for x in np.percentile(ratios, [2.5, 97.5])]
        r["kl_ratio_sure"] = r["kl_sum_sure"] / max(base["kl_sum_sure"], 1e-30)
        r["kl_ratio_unsure"] = r["kl_sum_unsure"] / max(base["kl_sum_unsure"], 1e-30)


def self_calibrated(spec) -> bool:
    """Whether a row's conversion calibrates on self-written text (so draws differ)."""
    return (isinstance(spec, dict) and spec.get("bits") == "4" and spec.get("method", "cq") == "cq"
            and spec.get("self_calibrate", True) is not False and not spec.get("calibrate")
            and not spec.get("calibration_text"))


def draw_summary(results: list[dict]) -> list[dict]:
    """Per row converted more than once: mean KL and the spread of KL / MLX over draws."""
    out = []
    for row in dict.fromkeys(r["row"] for r in results):
        rs = [r for r in results if r["row"] == row and r["calibration_seed"] is not None]
        if len(rs) < 2:
            continue
        s = {"row": row, "draws": len(rs), "kl_mean": float(np.mean([r["kl_mean"] for r in rs])),
             "ppl_delta_pct_mean": float(np.mean([r["perplexity_delta_pct"] for r in rs])),
             "ppl_delta_pct_sd": float(np.std([r["perplexity_delta_pct"] for r in rs], ddof=1)),
             "convert_seconds_mean": float(np.mean([r["convert_seconds"] for r in rs]))}
        if all("kl_ratio_to_mlx" in r for r in rs):
            ratios = np.array([r["kl_ratio_to_mlx"] for r in rs])
            s.update(kl_ratio_mean=float(ratios.mean()), kl_ratio_sd=float(ratios.std(ddof=1)),
                     kl_ratio_min=float(ratios.min()), kl_ratio_max=float(ratios.max()),
                     kl_ratio_sure_mean=float(np.mean([r["kl_ratio_sure"] for r in rs])),
                     kl_ratio_unsure_mean=float(np.mean([r["kl_ratio_unsure"] for r in rs])))
        out.append(s)
    return out


def convert_row(model: str, spec, out: Path, work: Path, seed: int | None) -> tuple[float, float]:
    """Convert ``model`` into ``out`` as row ``spec`` says; (bits/w of the block linears, of the model)."""
    from cactus_core.convert_cli import run_convert
    from cactus_quant import sensitivity as sens
    from cactus_quant.convert import convert as quant_convert
    from cactus_quant.cq import CQQuantizer

    if spec == "mlx":
        return mlx_affine_copy(model, str(out))
    if spec.get("calibration_text") == STDLIB_TRAIN:
        from training.plaintext import stdlib_docs

        path = work / "stdlib_train.txt"
        path.write_text("\n\n".join(stdlib_docs()["train"][:400]))
        spec = {**spec, "calibration_text": str(path)}
    if callable(spec.get("quantizer")):  # a scheme this script builds (VProj6)
        spec = {**spec, "quantizer": spec["quantizer"]()}
    elif "quantizer" in spec:  # a CQ scheme with other parameters than the preset's
        name, bits, params = spec["quantizer"]
        spec = {**spec, "quantizer": CQQuantizer(name, bits, **params)}
    if seed is not None:  # cactus_quant's convert takes the seed; run_convert does not
        rep = quant_convert(model, str(out), progress=False, calibration_seed=seed,
                            **{**spec, "bits": float(spec["bits"])})
    else:
        convert = quant_convert if "self_calibrate" in spec else run_convert
        opts = {k: v for k, v in spec.items() if k != "plan_text"}
        sens.SELF_WRITTEN_TEXT, was = "plan_text" in spec, sens.SELF_WRITTEN_TEXT
        try:
            rep = convert(model, str(out), progress=False, **opts)
        finally:
            sens.SELF_WRITTEN_TEXT = was
    return rep["bits_per_weight"], 8.0 * rep["bundle_bytes"] / rep["total_params"]


def measure_rows(model: str, jobs, segments, reference, work: Path, backend: str = "numpy_ref",
                 log=print) -> list[dict]:
    """Convert and score each (label, row, calibration seed) job; ``log`` gets a line as each ends.

    Rows needing mlx are skipped with a line when it is not installed."""
    import cactus_core as cactus

    results = []
    for label, row, seed in jobs:
        out, t = work / label.replace(" ", "_").replace("+", ""), time.time()
        try:
            bpw, model_bpw = convert_row(model, ROWS[row], out, work, seed)
        except ImportError:
            log(f"{label}: skipped (mlx is not installed: pip install 'mlx[cpu]')")
            continue
        convert_s = time.time() - t
        q = score(reference, scored_logprobs(cactus.load(str(out), backend=backend), segments), segments)
        results.append({"scheme": label, "row": row, "calibration_seed": seed, "bpw": bpw, "model_bpw": model_bpw,
                        "convert_seconds": convert_s, "seconds": time.time() - t, **q})
        log(f"{label:<22} {bpw:.3f} bpw  KL {q['kl_mean']:.4f} [{q['kl_ci95'][0]:.4f}, {q['kl_ci95'][1]:.4f}]  "
              f"trim5 {q['kl_trim5']:.4f}  ppl {q['perplexity_delta_pct']:+.2f}% "
              f"[{q['perplexity_delta_ci95'][0]:+.2f}, {q['perplexity_delta_ci95'][1]:+.2f}]  "
              f"(convert {convert_s:.0f}s, {time.time() - t:.0f}s)")
        shutil.rmtree(out, ignore_errors=True)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "spine"))
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--rows", help=f"comma-separated subset of: {', '.join(ROWS)}")
    ap.add_argument("--backend", default="numpy_ref")
    ap.add_argument("--all-turns", action="store_true", help="score every assistant turn, not only the last")
    ap.add_argument("--test-jsonl", help="test conversations from this file (default: generate the test split)")
    ap.add_argument("--split", default="test", choices=["test", "val"],
                    help="score test (the table) or validation conversations (tuning)")
    ap.add_argument("--calibration-draws", type=int, default=1, metavar="K",
                    help="convert each self-calibrated row K times (calibration seeds 0..K-1)")
    ap.add_argument("--calibration-seeds", metavar="S,S", help="these calibration seeds instead of 0..K-1 "
                    "(one draw per process, so draws can run side by side)")
    ap.add_argument("--text", default="stdlib", choices=["conversations", "stdlib"],
                    help="score test conversations' assistant turns, or held-out standard-library docstrings "
                         "(--conversations of them: the validation share holds 95)")
    ap.add_argument("--json", help="write the table here")
    args = ap.parse_args()
    if args.calibration_draws < 1:
        ap.error("--calibration-draws must be at least 1")

    import cactus_core as cactus

    rows = list(ROWS) if not args.rows else [r.strip() for r in args.rows.split(",")]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        ap.error(f"unknown rows {unknown}; choose from {list(ROWS)}")
    seeds = ([int(x) for x in args.calibration_seeds.split(",")] if args.calibration_seeds
             else list(range(args.calibration_draws)))
    jobs = []  # (label, row, calibration seed or None)
    for label in rows:
        draws = seeds if self_calibrated(ROWS[label]) else [None]
        jobs += [(f"{label} [seed {d}]" if (len(seeds) > 1 or args.calibration_seeds) and d is not None else label,
                  label, d) for d in draws]
    t0 = time.time()
    work = Path(tempfile.mkdtemp(prefix="cactus-qq-"))
    ref = cactus.load(args.model, backend=args.backend)
    if args.text == "stdlib":
        segments = plain_text_segments(ref, args.conversations)
        print(f"scoring {len(segments)} held-out docstrings of Python {sys.version.split()[0]}'s standard library",
              flush=True)
    else:
        segments = heldout_segments(ref, args.conversations, all_turns=args.all_turns, test_jsonl=args.test_jsonl,
                                    split=args.split)
    reference = scored_logprobs(ref, segments)
    results = measure_rows(args.model, jobs, segments, reference, work, backend=args.backend)
    mlx = next((r for r in results if r["scheme"].startswith("MLX")), None)
    if mlx is not None:
        paired_ratio(results, mlx)
    r0 = results[0]
    print(f"\nfloat perplexity {r0['perplexity_float']:.3f} on {r0['tokens']} held-out tokens of "
          + (f"{r0['conversations']} standard-library docstrings (Python {sys.version.split()[0]})"
             if args.text == "stdlib" else f"{r0['conversations']} conversations ({args.split} split)")
          + f"; {time.time() - t0:.0f}s in all")
    print("| scheme | bits/w (blocks) | bits/w (model) | KL mean | 95% CI | KL / MLX (paired 95% CI) "
          f"| / MLX, float NLL <= {UNSURE_NLL:g} | / MLX, above | tokens for 80% of KL | KL w/o worst 5 | KL p99 "
          "| ppl | Δppl | Δppl 95% CI (paired) |")
    print("| --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in results:
        ratio = (f"{r['kl_ratio_to_mlx']:.2f} ({r['kl_ratio_ci95'][0]:.2f}-{r['kl_ratio_ci95'][1]:.2f})"
                 if "kl_ratio_to_mlx" in r else "-")
        split_ratio = (f"{r['kl_ratio_sure']:.2f} | {r['kl_ratio_unsure']:.2f}" if "kl_ratio_sure" in r else "- | -")
        print(f"| {r['scheme']} | {r['bpw']:.3f} | {r['model_bpw']:.3f} | {r['kl_mean']:.4f} | "
              f"{r['kl_ci95'][0]:.4f}-{r['kl_ci95'][1]:.4f} | {ratio} | {split_ratio} | {r['kl_tokens_for_80pct']} | "
              f"{r['kl_trim5']:.4f} | {r['kl_p99']:.3f} | "
              f"{r['perplexity_quant']:.3f} | {r['perplexity_delta_pct']:+.2f}% | "
              f"{r['perplexity_delta_ci95'][0]:+.2f}% to {r['perplexity_delta_ci95'][1]:+.2f}% |")
    summary = draw_summary(results)
    if summary:
        print(f"\n| row | draws | KL mean | KL / MLX: mean ± sd (min-max) | float NLL <= {UNSURE_NLL:g} | above "
              "| Δppl mean ± sd | convert s (mean) |")
        print("| --- | ---: | ---: | --- | ---: | ---: | --- | ---: |")
        for s in summary:
            ratio = (f"{s['kl_ratio_mean']:.2f} ± {s['kl_ratio_sd']:.2f} ({s['kl_ratio_min']:.2f}-"
                     f"{s['kl_ratio_max']:.2f})" if "kl_ratio_mean" in s else "-")
            parts = (f"{s['kl_ratio_sure_mean']:.2f} | {s['kl_ratio_unsure_mean']:.2f}" if "kl_ratio_mean" in s
                     else "- | -")
            print(f"| {s['row']} | {s['draws']} | {s['kl_mean']:.4f} | {ratio} | {parts} | {s['ppl_delta_pct_mean']:+.2f}% ± {s['ppl_delta_pct_sd']:.2f} | "
                  f"{s['convert_seconds_mean']:.0f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": results, "draws": summary}, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
