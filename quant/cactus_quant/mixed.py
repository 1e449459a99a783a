"""Mixed precision (``cq3.26``, ``cq2.54``): bits per tensor from measured sensitivity.

Each tensor gets one of the CQ widths at or above the target's floor (``cq3.26``: 3 or
4 bits; ``cq2.54``: 2, 3 or 4; :func:`floor_widths`) so that the size-weighted
TRUE bits per weight of the whole model (scales and tables included) lands on
the target, while the summed sensitivity is as small as possible.  This is a
multiple-choice knapsack; :func:`allocate_bits` solves it by dynamic
programming over the spare bit budget cut into ``resolution`` units, then
repairs the rounding exactly: never over the target, and equal to the brute-force
optimum on every small problem tested.

Sensitivity comes from a callback ``measure(tensor_name, bits) -> float``:
:class:`cactus_quant.sensitivity.KLSensitivity` (the model-level KL divergence
with only that tensor quantized, on self-generated text: what ``cactus convert``
uses), or the cheap fallback :func:`proxy_measure` (weight MSE times activation
scale) when no forward pass is possible.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

import attrs
import numpy as np

from cactus_core.errors import QuantizationError

from .cq import CQQuantizer, check_matrix

BIT_CHOICES = (2, 3, 4)


@attrs.frozen
class Allocation:
    """The outcome of :func:`allocate_bits`."""

    bits: dict[str, int]  # tensor name -> bit width
    average_bpw: float  # size-weighted true bits per weight achieved
    total_error: float  # summed sensitivity at the chosen widths


def allocate_bits(
    sizes: Mapping[str, int],
    target_bpw: float,
    measure: Callable[[str, int], float],
    choices: Sequence[int] = BIT_CHOICES,
    cost: Optional[Callable[[str, int], float]] = None,
    resolution: int = 4000,
) -> Allocation:
    """Pick a bit width per tensor so the average true bpw is at most ``target_bpw``.

    ``sizes``: tensor name -> number of weights.  ``measure(name, bits)``: the
    error the tensor adds at that width (any additive unit, e.g. KL divergence).
    ``cost(name, bits)``: true bits per weight of that tensor at that width
    (default: the CQ format's exact count needs shapes, so plain ``bits``).
    """
    if not sizes:
        raise QuantizationError("nothing to allocate: no tensors")
    # widths (ints), or any orderable labels a caller's ``cost`` and ``measure`` understand
    choices = sorted(set(choices))
    cost = cost or (lambda _name, bits: float(bits))
    names = list(sizes)
    err = {n: {b: float(measure(n, b)) for b in choices} for n in names}
    bpw = {n: {b: float(cost(n, b)) for b in choices} for n in names}
    total_w = float(sum(sizes.values()))
    budget = target_bpw * total_w
    pick = {n: min(choices, key=lambda b, n=n: bpw[n][b]) for n in names}
    used = sum(sizes[n] * bpw[n][pick[n]] for n in names)
    if used > budget + 1e-9:
        raise QuantizationError(
            f"target {target_bpw} bpw is below the smallest width ({used / total_w:.3f} bpw)"
        )
    # Multiple-choice knapsack by dynamic programming over the spare bits in
    # `resolution` units (rounded costs), then an exact repair below.
    slack = budget - used
    unit = max(slack, 1e-9) / resolution
    best = np.zeros(resolution + 1)  # best[c]: least error of the tensors so far within c units
    choice = np.zeros((len(names), resolution + 1), dtype=np.int8)
    for t, n in enumerate(names):
        base = pick[n]
        new = np.full(resolution + 1, np.inf)
        for k, b in enumerate(choices):
            extra = sizes[n] * (bpw[n][b] - bpw[n][base])
            if extra < 0:
                continue
            units = int(round(extra / unit))
            if units > resolution:
                continue
            cand = np.full(resolution + 1, np.inf)
            cand[units:] = err[n][b] + best[: resolution + 1 - units]
            better = cand < new
            new[better], choice[t, better] = cand[better], k
        best = new
    c = resolution
    for t in range(len(names) - 1, -1, -1):  # walk the choices back
        n = names[t]
        b = choices[choice[t, c]]
        extra = sizes[n] * (bpw[n][b] - bpw[n][pick[n]])
        c -= int(round(extra / unit))
        pick[n] = b
    used = sum(sizes[n] * bpw[n][pick[n]] for n in names)
    # rounding may overshoot by a few units: step down where it hurts least,
    # then spend what is left where it helps most
    while used > budget + 1e-9:
        moves = [
            ((err[n][b] - err[n][pick[n]]) / (sizes[n] * (bpw[n][pick[n]] - bpw[n][b])), n, b)
            for n in names for b in choices if bpw[n][b] < bpw[n][pick[n]]
        ]
        _, n, b = min(moves)
        used -= sizes[n] * (bpw[n][pick[n]] - bpw[n][b])
        pick[n] = b
    while True:
        moves = [
            ((err[n][pick[n]] - err[n][b]) / (sizes[n] * (bpw[n][b] - bpw[n][pick[n]])), n, b)
            for n in names for b in choices
            if bpw[n][b] > bpw[n][pick[n]] and used + sizes[n] * (bpw[n][b] - bpw[n][pick[n]]) <= budget + 1e-9
        ]
        if not moves:
            break
        gain, n, b = max(moves)
        if gain <= 0:
            break
        used += sizes[n] * (bpw[n][b] - bpw[n][pick[n]])
        pick[n] = b
    return Allocation(
        bits=pick,
        average_bpw=used / total_w,
        total_error=sum(err[n][pick[n]] for n in names),
    )


def proxy_measure(
    weights: Mapping[str, Any],
    act_scale: Optional[Mapping[str, float]] = None,
    quantizers: Optional[Mapping[int, CQQuantizer]] = None,
) -> Callable[[str, int], float]:
    """The cheap sensitivity: ``||W - deq(W)||_F^2 * act_scale[name]``.

    That is the expected squared output error when the layer's inputs have mean
    square ``act_scale`` per channel (1.0 when unknown).  Results are cached.
    """
    quantizers = quantizers or {b: CQQuantizer(f"cq{b}", b) for b in BIT_CHOICES}
    cache: dict[tuple[str, int], float] = {}

    def measure(name: str, bits: int) -> float:
        key = (name, bits)
        if key not in cache:
            w = check_matrix(name, weights[name])
            deq = quantizers[bits].quantize(name, w).dequantize_unrotated()
            scale = 1.0 if act_scale is None else float(act_scale.get(name, 1.0))
            cache[key] = float(np.sum((deq - w) ** 2, dtype=np.float64)) * scale
        return cache[key]

    return measure


def floor_widths(target_bpw: float, choices: Sequence[int] = BIT_CHOICES) -> tuple[int, ...]:
    """The widths a plan for ``target_bpw`` may use: none below the target's floor.

    Per-tensor KL is measured one tensor at a time and summed; a width below the floor
    lets the plan pay for CQ4 tensors with CQ2 ones, whose joint damage the sum
    underrates.  Measured on the default model (docs/quantization.md, session 10),
    CQ3.26 from {2, 3, 4} had 1.7x uniform CQ3's KL on stage 19 (0.0095 vs 0.0056) and
    from {3, 4} 0.0057; on stage 18 {3, 4} gave 0.0091 against {2, 3, 4}'s 0.0112 and
    uniform CQ3's 0.0133.  CQ2.54 keeps all three (2 is its floor)."""
    low = int(np.floor(target_bpw + 1e-9))
    return tuple(b for b in choices if b >= low) or tuple(choices)


class MixedCQQuantizer:
    """``cq3.26`` / ``cq2.54``: CQ widths per tensor from a sensitivity plan.

    Call :meth:`plan` with the model's weights (or their shapes plus a
    ``measure`` callback) first; :meth:`quantize` then uses the planned width,
    or an explicit ``bits=`` option.
    """

    def __init__(self, name: str, target_bpw: float, choices: Optional[Sequence[int]] = None):
        self.name, self.target_bpw = name, float(target_bpw)
        if choices is None:
            choices = floor_widths(target_bpw)
        self.inner = {b: CQQuantizer(f"cq{b}", b) for b in choices}
        self.allocation: Optional[Allocation] = None
        #: (name, bits) -> tensor already made (e.g. while measuring sensitivity), reused by quantize
        self.made: dict[tuple[str, int], Any] = {}

    @property
    def bits_per_weight(self) -> float:
        """The achieved average once planned, else the target."""
        return self.allocation.average_bpw if self.allocation else self.target_bpw

    def plan(
        self,
        weights: Mapping[str, Any],
        measure: Optional[Callable[[str, int], float]] = None,
        act_scale: Optional[Mapping[str, float]] = None,
    ) -> Allocation:
        """Allocate widths for ``weights`` (name -> array, or name -> shape with ``measure``)."""
        shapes = {n: tuple(np.shape(w)) if not isinstance(w, tuple) else w for n, w in weights.items()}
        if measure is None:
            measure = proxy_measure(weights, act_scale, self.inner)
        self.allocation = allocate_bits(
            {n: int(np.prod(s)) for n, s in shapes.items()},
            self.target_bpw,
            measure,
            choices=tuple(self.inner),
            cost=lambda n, b: self.inner[b].bits_for_shape(shapes[n]),
        )
        return self.allocation

    def quantize(self, name: str, array: Any, **options: Any):
        """Quantize ``name`` at its planned width (``bits=`` overrides)."""
        bits = options.pop("bits", None)
        if bits is None:
            if self.allocation is None or name not in self.allocation.bits:
                raise QuantizationError(
                    f"{self.name} has no width for '{name}': call plan() with the model's weights first"
                )
            bits = self.allocation.bits[name]
        if int(bits) not in self.inner:
            raise QuantizationError(f"{self.name}: bits must be one of {sorted(self.inner)}, got {bits}")
        made = self.made.get((name, int(bits)))
        return made if made is not None else self.inner[int(bits)].quantize(name, array, **options)
