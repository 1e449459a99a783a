"""Evaluate a checkpoint on the held-out test conversations with transformers' greedy generation.

    python -m training.evaluate --model models/spine --data DIR [--limit N] [--device cpu|cuda]

For each test conversation the final assistant turn is regenerated from everything before
it. Tool calls are compared as parsed JSON: single = exactly one call, same name and
arguments; multi = the same calls as a multiset; oos / missing = no tool call at all;
chat = no tool call, and the reply text itself for arithmetic and fixed replies.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .chat_format import parse_tool_calls


def _key(call: dict) -> str:
    return json.dumps({"name": call["name"], "arguments": call["arguments"]}, sort_keys=True)


def _norm_args(call: dict) -> dict:
    args = call.get("arguments", {})
    if isinstance(args, str):  # OpenAI style strings are allowed in input
        args = json.loads(args)
    return {"name": call["name"], "arguments": args}


def score(category: str, expected: dict, text: str) -> dict:
    """Per-example verdict for one generated assistant turn."""
    calls, parsed_ok = parse_tool_calls(text)
    want = [_norm_args(tc["function"]) for tc in expected.get("tool_calls") or []]
    r = {"valid_json": parsed_ok, "n_calls": len(calls)}
    if category == "single":
        r["exact"] = len(calls) == 1 and _key(calls[0]) == _key(want[0])
        r["name_ok"] = len(calls) == 1 and calls[0]["name"] == want[0]["name"]
    elif category == "multi":
        r["exact"] = sorted(map(_key, calls)) == sorted(map(_key, want))
        r["names_ok"] = sorted(c["name"] for c in calls) == sorted(c["name"] for c in want)
        got = [_key(c) for c in calls]
        r["calls_found"] = sum(1 for k in map(_key, want) if k in got)
        r["calls_wanted"] = len(want)
    else:
        r["exact"] = "<tool_call>" not in text
        r["reply_exact"] = text.strip() == (expected.get("content") or "").strip()
    return r


def load(model_dir: Path, device: str, float32: bool = False):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    tok.padding_side = "left"
    # fp16 matmuls are slow on CPU; float32 on a GPU keeps verdicts comparable with CPU runs
    dtype = torch.bfloat16 if device.startswith("cuda") and not float32 else torch.float32
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype).to(device).eval()
    return tok, model


def generate(tok, model, prompts: list[str], max_new_tokens: int = 160, batch_size: int = 64,
             beams: int = 1) -> list[str]:
    """Greedy continuations (special tokens kept, cut at <|im_end|>), in input order.
    With beams > 1, beam search with no length penalty: the most probable whole answer."""
    import torch

    eos = [tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")]
    beam = {"num_beams": beams, "length_penalty": 0.0} if beams > 1 else {}
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: list[str] = [""] * len(prompts)
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        enc = tok([prompts[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False)
        enc = {k: v.to(model.device) for k, v in enc.items()}
        with torch.no_grad():
            gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos,
                                 pad_token_id=eos[1], **beam)
        for i, row in zip(idx, gen[:, enc["input_ids"].shape[1]:]):
            out[i] = reply_text(tok, row)
    return out


def reply_text(tok, ids) -> str:
    """A generated row as text: special tokens kept, cut at <|im_end|>, padding dropped."""
    return tok.decode(ids, skip_special_tokens=False).split("<|im_end|>")[0].replace("<|endoftext|>", "")


def evaluate(model_dir: Path, test_path: Path, device: str = "cpu", limit: int | None = None,
             batch_size: int = 64, max_new_tokens: int = 160, ensemble: list[Path] | None = None,
             beams: int = 1, category: str | None = None, forced: bool = False) -> dict:
    """Accuracy per category on the test split, and every example (up to 2000) with its expected answer.
    With ``ensemble``, those checkpoints decode together with ``model_dir`` from their mean
    log-probabilities (training.ensemble); ``beams`` > 1 decodes by beam search instead of
    greedily, and ``category`` keeps that category's conversations only (after ``limit``).
    ``forced`` scores by teacher forcing instead (training.forced), in float32 on any device:
    exact means the model's argmax writes the expected turn token for token, and each
    example gets its margin."""
    tok, model = load(model_dir, device, float32=forced)
    rows = [json.loads(line) for line in open(test_path)]
    if limit:  # keep every category represented
        per = max(1, limit // 5)
        kept: list[dict] = []
        for cat in dict.fromkeys(r["category"] for r in rows):
            kept += [r for r in rows if r["category"] == cat][:per]
        rows = kept
    if category:
        rows = [r for r in rows if r["category"] == category]
    prompts, targets = [], []
    for r in rows:
        msgs = r["messages"]
        last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
        prompts.append(tok.apply_chat_template(msgs[:last_user + 1], tools=r["tools"] or None, tokenize=False,
                                               add_generation_prompt=True))
        targets.append(msgs[last_user + 1])
    t0 = time.time()
    if forced:
        return _forced_result(tok, model, rows, prompts, targets, device, t0)
    if ensemble:
        from .ensemble import generate as generate_ensemble

        models = [model] + [load(m, device)[1] for m in ensemble]
        texts = generate_ensemble(tok, models, prompts, max_new_tokens, batch_size)
    else:
        texts = generate(tok, model, prompts, max_new_tokens, batch_size, beams)
    secs = time.time() - t0
    res: dict = {"n": len(rows), "generate_seconds": round(secs, 1), "device": device, "by_category": {}}
    examples = []
    for r, target, text in zip(rows, targets, texts):
        v = score(r["category"], target, text)
        c = res["by_category"].setdefault(r["category"], {"n": 0, "exact": 0, "valid_json": 0})
        c["n"] += 1
        c["exact"] += v["exact"]
        c["valid_json"] += v["valid_json"]
        for k in ("name_ok", "names_ok", "reply_exact", "calls_found", "calls_wanted"):
            if k in v:
                c[k] = c.get(k, 0) + int(v[k])
        if len(examples) < 2000:
            examples.append(_example(r, target, output=text, ok=bool(v["exact"])))
    for c in res["by_category"].values():
        c["accuracy"] = round(c["exact"] / c["n"], 4)
    res["examples"] = examples
    return res


def _example(row: dict, target: dict, **verdict) -> dict:
    """One example as results list it: its category, final request and expected answer, and the verdict."""
    want = [json.dumps(_norm_args(tc["function"]), sort_keys=True) for tc in target.get("tool_calls") or []]
    user = [m for m in row["messages"] if m["role"] == "user"][-1]["content"]
    return {"category": row["category"], "user": user, **verdict, "want": want or target.get("content")}


def _forced_result(tok, model, rows: list[dict], prompts: list[str], targets: list[dict], device: str,
                   t0: float) -> dict:
    import numpy as np

    from .forced import forced

    verdicts = forced(tok, model, prompts, targets)
    res: dict = {"n": len(rows), "forced": True, "forward_seconds": round(time.time() - t0, 1), "device": device,
                 "by_category": {}}
    for r, v in zip(rows, verdicts):
        c = res["by_category"].setdefault(r["category"], {"n": 0, "exact": 0, "margins": []})
        c["n"] += 1
        c["exact"] += v["ok"]
        c["margins"].append(v["margin"])
    for c in res["by_category"].values():
        c["accuracy"] = round(c["exact"] / c["n"], 4)
        c["median_margin"] = round(float(np.median(c.pop("margins"))), 3)
    res["examples"] = [_example(r, t, ok=v["ok"], margin=round(v["margin"], 3))
                       for r, t, v in zip(rows, targets, verdicts)]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description="evaluate a checkpoint on the test split")
    ap.add_argument("--model", type=Path, default=Path("models/spine"))
    ap.add_argument("--data", type=Path, required=True, help="folder with test.jsonl (from training.datagen)")
    ap.add_argument("--split", default="test", choices=["test", "val"], help="which split of DATA to evaluate")
    ap.add_argument("--device", default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None, help="write the full result JSON here")
    ap.add_argument("--ensemble", type=Path, nargs="*", default=None,
                    help="more checkpoints that decode with --model from the mean log-probabilities")
    ap.add_argument("--beams", type=int, default=1, help="beam search with this many beams (1: greedy)")
    ap.add_argument("--category", default=None, choices=["single", "multi", "oos", "missing", "chat"],
                    help="score this category's conversations only")
    ap.add_argument("--forced", action="store_true",
                    help="score by teacher forcing (one forward pass per conversation) instead of decoding")
    ap.add_argument("--agree", type=Path, default=None,
                    help="with --forced: a generated run's --out FILE on the same rows, to count matching verdicts")
    a = ap.parse_args()
    if a.ensemble and a.beams > 1:
        ap.error("--beams works on one checkpoint, not with --ensemble")
    if a.forced and (a.ensemble or a.beams > 1):
        ap.error("--forced scores one checkpoint's greedy answer, not --ensemble or --beams")
    if a.agree and not a.forced:
        ap.error("--agree compares a --forced run with a generated one")
    import torch
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    res = evaluate(a.model, a.data / f"{a.split}.jsonl", device, a.limit, ensemble=a.ensemble, beams=a.beams,
                   category=a.category, forced=a.forced)
    if a.agree:
        from .forced import agreement

        res["agreement"] = agreement([e["ok"] for e in res["examples"]], a.agree)
    if a.out:
        a.out.write_text(json.dumps(res, indent=1))
    print(json.dumps({k: v for k, v in res.items() if k != "examples"}, indent=1))


if __name__ == "__main__":
    main()
