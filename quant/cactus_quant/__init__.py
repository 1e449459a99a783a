"""cactus-quant: Cactus Quants (CQ4/CQ3/CQ2, mixed CQ3.26/CQ2.54), GPTQ and RTN.

The tensor formats these write live in :mod:`cactus_core.formats` (``cq``,
``int4``, ``int8``); docs/formats.md specifies them for kernel authors and
docs/quantization.md records how the schemes were chosen and how well they do.
"""

from .cq import CQQuantizer, cq_quantize
from .gptq import GPTQQuantizer, gptq_quantize, hessian
from .mixed import Allocation, MixedCQQuantizer, allocate_bits, proxy_measure
from .rtn import RTNQuantizer, rtn_quantize
from .widen import WidenedCQQuantizer

__all__ = [
    "CQQuantizer",
    "cq_quantize",
    "GPTQQuantizer",
    "gptq_quantize",
    "hessian",
    "Allocation",
    "MixedCQQuantizer",
    "allocate_bits",
    "proxy_measure",
    "RTNQuantizer",
    "rtn_quantize",
    "WidenedCQQuantizer",
]
