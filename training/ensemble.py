"""Greedy decoding from the mean log-probabilities of several checkpoints (an output ensemble).

    python -m training.evaluate --model M1 --ensemble M2 M3 M4 --data DIR --split val

Used to ask whether an ensemble of a soup's members beats the soup itself, i.e. whether
distilling the ensemble into one model has headroom (docs/training.md, session 10: on
stage 19's four members it did not). Left-padded batches, one key/value cache per model;
position ids are counted from the attention mask, as ``generate`` does, so one model
through here gives ``training.evaluate``'s greedy answers.
"""
from __future__ import annotations


def generate(tok, models, prompts: list[str], max_new_tokens: int = 160, batch_size: int = 32) -> list[str]:
    """Greedy continuations under the models' mean log-probabilities (special tokens kept,
    cut at <|im_end|>), in input order."""
    import inspect

    import torch

    from .evaluate import reply_text

    # transformers 5 renamed the cache argument and output (past_key_values -> cache)
    key = "cache" if "cache" in inspect.signature(models[0].forward).parameters else "past_key_values"
    eos = {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}
    pad = tok.convert_tokens_to_ids("<|endoftext|>")
    device = models[0].device
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: list[str] = [""] * len(prompts)
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        enc = tok([prompts[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False)
        ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        caches = [None] * len(models)
        done = torch.zeros(len(idx), dtype=torch.bool, device=device)
        steps = []
        with torch.no_grad():
            for _ in range(max_new_tokens):
                logp = 0
                for k, model in enumerate(models):
                    o = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                              **{key: caches[k]})
                    caches[k] = getattr(o, key)
                    logp = logp + torch.log_softmax(o.logits[:, -1].float(), -1)
                nxt = torch.where(done, torch.full_like(done, pad, dtype=torch.long), logp.argmax(-1))
                steps.append(nxt)
                done |= torch.isin(nxt, torch.tensor(sorted(eos), device=device))
                if done.all():
                    break
                ids, pos = nxt[:, None], pos[:, -1:] + 1
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
        for i, row in zip(idx, torch.stack(steps, 1)):
            out[i] = reply_text(tok, row)
    return out
