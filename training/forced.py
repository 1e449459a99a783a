"""Score a checkpoint by teacher forcing: one forward pass per conversation, no decoding.

    python -m training.evaluate --model DIR --data /tmp/H --split val --category single --forced

Greedy decoding writes the expected answer exactly when, at every token of that answer
(its closing <|im_end|> included), the expected token is the model's argmax given the
expected tokens before it. So "every answer token is the argmax" is greedy exact match,
read off a single batched forward pass instead of one pass per generated token: on the
2-core development machine the 1200-request guide takes minutes instead of 19. The two
verdicts can differ only where greedy writes JSON equal to the answer in other tokens
(another key order or spacing, or the same text split into other tokens), which the
chat format leaves little room for; ``agreement`` in the CLI output measures it against
a generated run. Beside the verdict each request gets a margin: the smallest gap, over
the answer's tokens, between the expected token's logit and the best other one (below
0: a miss), a smoother signal than a count for telling close checkpoints apart.
"""
from __future__ import annotations

import json

import numpy as np

from .chat_format import render_segments


def forced(tok, model, prompts: list[str], turns: list[dict], batch_size: int = 32) -> list[dict]:
    """Per prompt (rendered up to its generation prompt) and expected assistant turn: ``ok``
    (every token of the turn is the argmax) and ``margin`` (the smallest expected-minus-best-other
    logit gap over the turn), in input order."""
    import torch

    pad = tok.convert_tokens_to_ids("<|endoftext|>")
    seqs = []
    for prompt, turn in zip(prompts, turns):
        # the turn's trained text: its body with the closing <|im_end|>, as training sees it
        answer = next(t for t, trained in render_segments([turn]) if trained)
        p = tok(prompt, add_special_tokens=False)["input_ids"]
        full = tok(prompt + answer, add_special_tokens=False)["input_ids"]
        # the prompt ends on "assistant\n" and answers start with an added token or a non-space,
        # so the prompt's tokens are the whole text's first tokens (checked, not assumed)
        if full[:len(p)] != p:
            raise ValueError("the answer's first token merges with the prompt's last one")
        seqs.append((full, len(p)))
    out: list[dict] = [{}] * len(seqs)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i][0]))
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        width = max(len(seqs[i][0]) for i in idx)
        ids = torch.full((len(idx), width), pad, dtype=torch.long)
        att = torch.zeros((len(idx), width), dtype=torch.long)
        for b, i in enumerate(idx):
            full = seqs[i][0]
            ids[b, :len(full)] = torch.tensor(full)
            att[b, :len(full)] = 1
        with torch.no_grad():
            hidden = model.get_decoder()(input_ids=ids.to(model.device),
                                         attention_mask=att.to(model.device)).last_hidden_state
            # the vocabulary projection only where an answer token is predicted: prompts are
            # ten times longer than answers, and the projection is a tenth of the model's work
            logits = [model.get_output_embeddings()(hidden[b, seqs[i][1] - 1:len(seqs[i][0]) - 1]).float().cpu()
                      for b, i in enumerate(idx)]
        for b, i in enumerate(idx):
            full, n_prompt = seqs[i]
            # row t of lg (position n_prompt - 1 + t) predicts answer token t
            lg = logits[b]
            want = torch.tensor(full[n_prompt:])
            right = lg.gather(1, want[:, None])[:, 0]
            other = lg.scatter(1, want[:, None], float("-inf")).max(1).values
            gap = (right - other).numpy()
            out[i] = {"ok": bool((gap > 0).all()), "margin": float(np.min(gap))}
    return out


def agreement(forced_ok: list[bool], generated_json: str) -> dict:
    """How often the forced verdicts match a generated run's (training.evaluate --out FILE) on the same rows."""
    ex = json.load(open(generated_json))["examples"]
    gen = [bool(e["ok"]) for e in ex]
    if len(gen) != len(forced_ok):
        raise ValueError(f"{generated_json} holds {len(gen)} examples, this run scored {len(forced_ok)}")
    both = sum(a == b for a, b in zip(forced_ok, gen))
    return {"same": both, "n": len(gen), "forced_only": sum(a and not b for a, b in zip(forced_ok, gen)),
            "generated_only": sum(b and not a for a, b in zip(forced_ok, gen))}
