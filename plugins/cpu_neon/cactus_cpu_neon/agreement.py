"""Do the inexact fast paths pick the same tokens as the exact kernels?

    python -m cactus_cpu_neon.agreement MODEL [--tools FILE] [--tokens 48] [--json]

Loads MODEL (a CQ bundle) twice on cpu_neon, once with the exact kernels and
once with CQ decode in int8 activations and CQ prefill in bfloat16 (each
where this build has it), and for each prompt of a fixed list (chat turns
through the model's template, with ``--tools`` if given):

- greedy generation on both: are the token sequences identical, and where do
  they first differ;
- teacher-forced: fed the exact run's tokens, at how many positions does the
  fast run's argmax differ, how close the exact run's top two logits were
  there (their gap over the logits' range: a near-tie when small), and the
  largest difference of the logits relative to their largest magnitude (the
  first row is the prefill's).
"""

from __future__ import annotations

import argparse
import json
from typing import Optional, Sequence

import numpy as np

from cactus_core.errors import CactusError

PROMPTS = (
    "Set an alarm for 7:30 tomorrow morning",
    "What's the weather like in Lisbon today?",
    "Book me a flight to Paris",
    "Text Maria that I'm running ten minutes late",
    "Turn off the kitchen lights and set a timer for 20 minutes",
    "Wake me at 6:45",
    "Call my mom",
    "Remind me to buy milk when I get home",
    "How are you today?",
    "Play some jazz music",
    "What time is it in Tokyo?",
    "Set a timer for 3 minutes",
    "Tell me a joke",
    "Send an email to John about the meeting tomorrow",
    "Turn the volume down",
    "What's 17 times 23?",
)


def _engine(model: str, fast: bool):
    import cactus_core as cactus
    from cactus_core.backends.numpy_ref import NumpyBackend
    from cactus_core.graph import Ops

    from .backend import KernelArgumentError, NeonBackend

    backend = NeonBackend(int8_activations=fast, bf16_prefill=fast)
    if fast and not (backend._int8_for(8, 2) or backend._int8_for(4, 1) or backend.bf16_prefill):
        raise KernelArgumentError("this build of cpu_neon has neither int8-activation decode nor bfloat16 "
                                  "prefill (NEON through SIMDe without AVX2 or AVX-512): nothing to compare")
    return cactus.load(model, ops=Ops([backend, NumpyBackend()]))


def _greedy(engine, prompt: Sequence[int], tokens: int) -> list[int]:
    from cactus_core.generate import SamplingParams

    engine.generator.reset()
    params = SamplingParams(max_tokens=tokens, eos_token_ids=engine.tokenizer.eos_token_ids)
    return engine.generator.generate(list(prompt), params, decode=lambda t: "").tokens


def _forced_logits(engine, prompt: Sequence[int], tokens: Sequence[int]) -> np.ndarray:
    """Logits after the prompt and after each of tokens[:-1], fed one at a time."""
    gen = engine.generator
    gen.reset()
    rows = [gen.prefill(list(prompt))[0]]
    for t in tokens[:-1]:
        rows.append(gen.step(int(t)))
    return np.stack(rows)


def agreement(model: str, tools: Optional[list] = None, tokens: int = 48,
              prompts: Sequence[str] = PROMPTS) -> dict:
    """Per prompt and in total: greedy agreement and teacher-forced argmax flips."""
    exact, fast = _engine(model, False), _engine(model, True)
    rows = []
    for text in prompts:
        prompt = exact.tokenizer.encode_chat([{"role": "user", "content": text}], tools=tools,
                                             add_generation_prompt=True)
        want, got = _greedy(exact, prompt, tokens), _greedy(fast, prompt, tokens)
        first = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), None)
        if first is None and len(want) != len(got):
            first = min(len(want), len(got))
        la, lb = _forced_logits(exact, prompt, want), _forced_logits(fast, prompt, want)
        flipped = np.nonzero(la.argmax(-1) != lb.argmax(-1))[0]
        top = np.sort(la[flipped], axis=-1)
        margins = ((top[:, -1] - top[:, -2]) / (top[:, -1] - top[:, 0])).tolist()
        rel = float(np.abs(la - lb).max() / np.abs(la).max())
        rows.append(dict(prompt=text, tokens=len(want), identical=first is None, first_difference=first,
                         forced_flips=len(flipped), flip_margins=margins, max_rel_logit_diff=rel))
    steps = sum(r["tokens"] for r in rows)
    return dict(model=model, backend=fast.ops.resolve("linear", "float32").__self__.describe(),
                prompts=len(rows), identical=sum(r["identical"] for r in rows), steps=steps,
                forced_flips=sum(r["forced_flips"] for r in rows),
                max_rel_logit_diff=max(r["max_rel_logit_diff"] for r in rows), rows=rows)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--tools", help="a JSON file of tool definitions (e.g. examples/phone_tools.json)")
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    tools = json.load(open(a.tools)) if a.tools else None
    try:
        r = agreement(a.model, tools, a.tokens)
    except CactusError as exc:
        raise SystemExit(f"error: {exc}") from None
    if a.json:
        print(json.dumps(r, indent=2))
        return
    for row in r["rows"]:
        where = "identical" if row["identical"] else f"differs from token {row['first_difference']}"
        gaps = "".join(f" (top-2 gap {m:.1e} of the range)" for m in row["flip_margins"])
        print(f"{row['prompt'][:48]:50s} {row['tokens']:3d} tokens, {where}; forced flips {row['forced_flips']}"
              f"{gaps}, logits {row['max_rel_logit_diff']:.1e}")
    print(f"{r['backend']}: {r['identical']}/{r['prompts']} prompts identical, {r['forced_flips']} argmax flips "
          f"in {r['steps']} teacher-forced steps (prefill + decode), largest logit difference "
          f"{r['max_rel_logit_diff']:.1e} of the largest logit")


if __name__ == "__main__":
    main()
