"""Hook implementations: the quantization schemes of cactus-quant."""

from __future__ import annotations

from cactus_core.plugins import hookimpl


@hookimpl
def cactus_register_quantizers(register):
    from .cq import CQQuantizer
    from .gptq import GPTQQuantizer
    from .mixed import MixedCQQuantizer
    from .rtn import RTNQuantizer
    from .widen import WidenedCQQuantizer

    register("cq4", WidenedCQQuantizer("cq4"))
    for bits in (3, 2):
        register(f"cq{bits}", CQQuantizer(f"cq{bits}", bits))
    register("cq3.26", MixedCQQuantizer("cq3.26", 3.26))
    register("cq2.54", MixedCQQuantizer("cq2.54", 2.54))
    register("gptq4", GPTQQuantizer("gptq4", 4))
    register("rtn4", RTNQuantizer("rtn4", 4))
    register("rtn8", RTNQuantizer("rtn8", 8))
