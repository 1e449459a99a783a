"""cq4's bit budget: 4-bit codes, with the tensors the model is most sensitive to widened.

Plain CQ4 spends 4.13-4.2 bits per weight (16 scalar levels plus a float16 scale per
group of 80-128).  The issue's budget is 4.25, and the KL a 4-bit model loses is far
from even: on the default model a layer's v_proj (2% of its weights) costs as much
output KL as its whole MLP (docs/quantization.md, session 13).  llama.cpp's Q4_K_M
answers the same observation with a fixed rule (attn_v and some ffn_down at 6 bits);
here the rule is measured per model:

1. every block linear is coded at 4 bits with the usual error feedback;
2. each one alone is swapped into the float model and the KL it adds on the
   self-written calibration text is measured (:class:`~.sensitivity.KLSensitivity`);
3. a tensor at 5 bits (32 Lloyd-Max levels) or 6 (64 equally spaced levels, which
   kernels multiply without a lookup) is expected to add that KL times the ratio of
   the two codebooks' squared error on Gaussian coordinates (:func:`width_error_ratio`:
   KL grows with the square of a small perturbation, so with its error energy);
4. :func:`~.mixed.allocate_bits` picks the widths that minimise the summed KL within
   the budget.

The scale groups, rotation and file format are those of any CQ tensor, so every backend
runs the result; the bundle simply holds tensors of different ``index_bits``.  Measuring
costs one forward pass per tensor over :func:`sensitivity_texts`, whose length shrinks
as the model grows (:func:`sensitivity_tokens`); on the default model the conversion
takes about twice as long as plain CQ4's.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from cactus_core.errors import QuantizationError

from .codebooks import scalar_codebook
from .cq import PRESETS, CQQuantizer, encode_groups
from .mixed import Allocation, allocate_bits

#: The true bits per weight of the block linears that cq4 may spend (issue #4's budget).
BUDGET_BPW = 4.25
#: Widths a cq4 tensor may be widened to -> the levels of its scalar codebook.
WIDE_LEVELS = {5: "gaussian", 6: "uniform"}
#: Multiply-adds the sensitivity passes may cost in all (tensors x tokens x parameters):
#: about 1.5K tokens per pass on the default model, the 256-token floor on Llama-3.2-1B.
SENSITIVITY_WORK = 1e12
#: refine.py's rounds (code sweep, then least-squares scales) after each tensor's error feedback.
REFINE_ROUNDS = 3
#: Tokens per self-written plain text for cq4's calibration (calibrate.DEFAULT_LENGTH is 256):
#: measured with coarse groups and refinement on the default model (docs/quantization.md, session 15).
CALIBRATION_LENGTH = 512
#: Scale groups of a coarse tensor (the largest divisor of its width up to this): twice cq4's
#: 128, so 80 -> 160 and 120 -> 240 inputs on the default model, 0.07-0.1 bpw saved.
COARSE_GROUP = 256
#: The fewest and the most tokens a sensitivity pass reads.
SENSITIVITY_TOKENS = (256, 6144)


def width_params(bits: int) -> dict[str, Any]:
    """CQ parameters of a cq4 tensor at ``bits``: the preset at 4 (and at 3: 6-bit codes of
    2-vectors), a scalar codebook of ``WIDE_LEVELS[bits]`` above."""
    if bits in WIDE_LEVELS:
        return {"index_bits": bits, "vec_dim": 1, "levels": WIDE_LEVELS[bits]}
    if bits in PRESETS:
        return {}
    raise QuantizationError(f"cq4 cannot code a tensor at {bits} bits; choose from 3, 4, {sorted(WIDE_LEVELS)}")


@lru_cache(maxsize=None)
def width_error_ratio(bits: int, samples: int = 512) -> float:
    """Squared error of a ``bits``-wide CQ code over cq4's, on Gaussian groups of 128 coded
    as cq4 codes them (scale search included): 0.25 at 5 bits, 0.088 at 6."""
    rng = np.random.default_rng(0)
    groups = rng.standard_normal((samples, 1, 128)).astype(np.float32)
    errs = {}
    for b in (4, bits):
        p = {**PRESETS[min(b, 4)], "levels": "gaussian", **width_params(b)}
        cb = scalar_codebook(p["index_bits"], p["vec_dim"], p["levels"]).astype(np.float16).astype(np.float32)
        idx, scales = encode_groups(groups, cb, scale_search=PRESETS[4]["scale_search"])
        deq = cb[idx].reshape(groups.shape) * scales.astype(np.float32)[..., None]
        errs[b] = float(np.mean((deq - groups) ** 2))
    return errs[bits] / errs[4]


def coarse_error_ratio(w: np.ndarray, rows: int = 512) -> float:
    """Squared error of ``w`` coded at 4 bits (data-free) with scale groups of
    :data:`COARSE_GROUP` over cq4's own groups, on up to ``rows`` evenly spaced rows:
    1.08-1.13 on the default model's tensors, whose rotated rows are not i.i.d. Gaussian
    (a Gaussian model of them predicts far less)."""
    w = np.asarray(w, dtype=np.float32)
    if w.shape[0] > rows:
        w = w[np.linspace(0, w.shape[0] - 1, rows).astype(np.int64)]
    errs = []
    for group in (PRESETS[4]["group_size"], COARSE_GROUP):
        deq = CQQuantizer("cq4", 4, group_size=group).quantize("w", w).dequantize_unrotated()
        errs.append(float(np.sum((deq - w) ** 2, dtype=np.float64)))
    return errs[1] / errs[0] if errs[0] > 0 else 1.0


def sensitivity_tokens(params: int, tensors: int, work: float = SENSITIVITY_WORK) -> int:
    """Tokens per sensitivity pass for a model of ``params`` weights with ``tensors`` to measure,
    so that the passes cost about ``work`` multiply-adds."""
    lo, hi = SENSITIVITY_TOKENS
    return int(min(hi, max(lo, work / max(1, params * tensors))))


def sensitivity_texts(texts: Sequence[Sequence[int]], keep: Optional[Sequence[np.ndarray]], budget: int,
                      plain: Optional[int] = None):
    """About ``budget`` tokens of the calibration texts for the sensitivity passes: the
    ``plain`` texts (first in the self-written list; default all) and the chats after them
    taken in turn, the last one cut to fit.  Returns :class:`~.sensitivity.CalibrationTexts`."""
    from .sensitivity import CalibrationTexts

    n = len(texts)
    chats = n if plain is None else min(max(plain, 0), n)
    order = [i for pair in zip(range(chats), range(chats, n)) for i in pair]
    order += [i for i in range(n) if i not in order]
    out, kept, used = CalibrationTexts(), [], 0
    for i in order:
        if used >= budget:
            break
        take = min(len(texts[i]), max(budget - used, 2))
        out.append(list(texts[i][:take]))
        kept.append(np.ones(take, dtype=bool) if keep is None else np.asarray(keep[i][:take], dtype=bool))
        used += take
    out.keep = kept
    return out


class WidenedCQQuantizer:
    """``cq4``: 4-bit CQ codes, with the most KL-sensitive tensors widened to 5 or 6 bits so the
    block linears land at or under :data:`BUDGET_BPW` (see the module docstring).

    Without a plan (no calibration text: an encoder, ``--no-calibrate``) every tensor stays
    at 4 bits, exactly plain CQ4.  :meth:`plan_widths` takes the measured 4-bit KL per tensor;
    :meth:`quantize` then codes each tensor at its planned width.
    """

    self_calibrate = True

    def __init__(self, name: str = "cq4", budget_bpw: float = BUDGET_BPW, widths: Sequence[int] = (5, 6),
                 sensitivity_work: float = SENSITIVITY_WORK, measured: Sequence[int] = (),
                 refine: int = REFINE_ROUNDS, coarse: bool = True,
                 calibration_length: Optional[int] = CALIBRATION_LENGTH):
        self.name, self.bits, self.budget_bpw = name, 4, float(budget_bpw)
        #: tokens per self-written plain text convert calibrates on (None: calibrate.DEFAULT_LENGTH)
        self.calibration_length = calibration_length
        #: multiply-adds the sensitivity passes may cost (:func:`sensitivity_tokens`)
        self.sensitivity_work = float(sensitivity_work)
        # refine.py's rounds after the error feedback, for every scalar width (not 3's 2-vectors)
        scalar = lambda b: {**PRESETS[min(b, 4)], **width_params(b)}["vec_dim"] == 1
        extra = lambda b: {"refine": refine} if refine and scalar(b) else {}
        self.base = CQQuantizer(name, 4, **extra(4))
        self.inner = {4: self.base, **{b: CQQuantizer(f"{name}@{b}", min(b, 4), **width_params(b), **extra(b))
                                       for b in widths if b != 4}}
        #: the same widths with scale groups twice as long (:data:`COARSE_GROUP`), where the plan
        #: may take them to pay for widening (scalar widths only)
        self.coarse = {b: CQQuantizer(f"{q.name}/g{COARSE_GROUP}", q.bits, **{**q.params, "group_size": COARSE_GROUP})
                       for b, q in self.inner.items() if coarse and q.params["vec_dim"] == 1}
        #: the tensors the plan gives coarse groups
        self.coarse_plan: set[str] = set()
        self.params = self.base.params
        #: widths whose KL is measured like 4 bits' rather than estimated from it (a pass per tensor each)
        self.measured = tuple(int(b) for b in measured if int(b) in self.inner and int(b) != 4)
        self.allocation: Optional[Allocation] = None
        #: (name, bits) -> tensor already made (while measuring), reused by quantize
        self.made: dict[tuple[str, int], Any] = {}

    @property
    def bits_per_weight(self) -> float:
        """Plain CQ4's on a 4096 x 4096 tensor; a planned model reports its own average."""
        return self.base.bits_per_weight

    def bits_for_shape(self, shape: tuple[int, int]) -> float:
        return self.base.bits_for_shape(shape)

    def plan_widths(self, shapes: Mapping[str, tuple[int, int]], kl: Callable[[str, int], float],
                    coarse_ratio: Optional[Mapping[str, float]] = None) -> Allocation:
        """Widths for every tensor of ``shapes`` from ``kl(name, bits)``, the KL that tensor adds
        at ``bits``; it is asked for 4 bits and the :attr:`measured` widths, the others are estimated.
        With :attr:`coarse` widths, ``coarse_ratio[name]`` (:func:`coarse_error_ratio`) scales a
        tensor's KL at coarse groups; the allocation's ``bits`` stay widths, and
        :attr:`coarse_plan` names the tensors given coarse groups."""
        ratio = {b: 1.0 if b == 4 else width_error_ratio(b) for b in self.inner}
        sizes = {n: int(np.prod(s)) for n, s in shapes.items()}
        options = {(b, False): q for b, q in self.inner.items()}
        if coarse_ratio is not None:
            options.update({(b, True): q for b, q in self.coarse.items()})

        def cost(n: str, choice: tuple[int, bool]) -> float:
            b, coarse = choice
            kl_b = kl(n, b) if b in self.measured else kl(n, 4) * ratio[b]
            return kl_b * (coarse_ratio[n] if coarse else 1.0)

        self.coarse_plan = set()
        try:
            plan = allocate_bits(sizes, self.budget_bpw, cost, choices=tuple(options),
                                 cost=lambda n, c: options[c].bits_for_shape(shapes[n]))
        except QuantizationError:  # plain CQ4 is already over the budget (narrow layers): no widening
            self.allocation = None
            return None
        self.coarse_plan = {n for n, (_, coarse) in plan.bits.items() if coarse}
        self.allocation = Allocation(bits={n: b for n, (b, _) in plan.bits.items()},
                                     average_bpw=plan.average_bpw, total_error=plan.total_error)
        return self.allocation

    def width(self, name: str) -> int:
        """The planned width of ``name`` (4 without a plan)."""
        return self.allocation.bits.get(name, 4) if self.allocation is not None else 4

    def quantize(self, name: str, array: Any, **options: Any):
        """Quantize ``name`` at its planned width (``bits=`` overrides)."""
        planned = "bits" not in options
        bits = int(options.pop("bits", self.width(name)))
        if bits not in self.inner:
            raise QuantizationError(f"{self.name}: bits must be one of {sorted(self.inner)}, got {bits}")
        if planned and name in self.coarse_plan and bits in self.coarse:
            return self.coarse[bits].quantize(name, array, **options)
        made = self.made.pop((name, bits), None)
        return made if made is not None else self.inner[bits].quantize(name, array, **options)

    def __repr__(self) -> str:
        return f"WidenedCQQuantizer({self.name!r}, budget {self.budget_bpw} bpw, widths {sorted(self.inner)})"
