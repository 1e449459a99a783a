"""Train the embedded default model end to end: data, tokenizer, Qwen3 model, checkpoint, eval.

    python -m training.train --seed 0 --out DIR [--steps N | --time-budget SECONDS]

Steps (each also runnable alone): training.datagen -> training.tokenizer -> this file's
training loop -> fp16 checkpoint in DIR/model -> training.evaluate on the test split.
With --time-budget the step count is fixed after 20 timed steps (inside warm-up, so the
schedule is unaffected) and logged; pass that number as --steps to reproduce the run.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

from . import sam
from .dataset import encode_conversations, encode_plain, make_batches
from .value_tags import make_head, tag_loss

ARCH = dict(hidden_size=320, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2, head_dim=40,
            intermediate_size=960, max_position_embeddings=2048, rope_theta=100000.0, rms_norm_eps=1e-6)


def build_model(vocab_size: int, tok, **shape):
    """A randomly initialised Qwen3ForCausalLM with tied embeddings; `shape` overrides ARCH's fields."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    arch = {**ARCH, **shape}
    theta = arch.pop("rope_theta")
    cfg = Qwen3Config(vocab_size=vocab_size, tie_word_embeddings=True, hidden_act="silu",
                      rope_parameters={"rope_type": "default", "rope_theta": theta},
                      bos_token_id=tok.token_to_id("<|endoftext|>"), eos_token_id=tok.token_to_id("<|im_end|>"),
                      pad_token_id=tok.token_to_id("<|endoftext|>"), use_cache=True, **arch)
    model = Qwen3ForCausalLM(cfg)
    model.tie_weights()
    return model


def lr_at(step: int, total: int, peak: float, warmup: int, floor: float = 0.1) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


def loss_on(model, ids, labels, first_weight: float = 1.0, backbone=None, tags=None, tagger=None):
    """Mean cross-entropy over trained positions only; the LM head runs on those rows alone.

    With first_weight > 1 the first trained token of each assistant turn (the one that
    decides between a tool call and a reply) counts that many times in the mean: it is one
    token in fifty of a turn, and the tool list must be read to get it right when the
    requested tool is missing, which the rest of the turn never asks for. `backbone` stands
    in for model.model (a compiled copy of it, with --compile). With tags and a tagger dict
    (head, layer, weight, detach), value_tags' loss on that layer's states is added, and
    the result is (total, tag loss); with detach only the head learns from it."""
    import torch
    import torch.nn.functional as F

    out = (model.model if backbone is None else backbone)(input_ids=ids, output_hidden_states=tags is not None)
    h = out.last_hidden_state
    sel = labels != -100
    logits = model.lm_head(h[sel])
    if first_weight == 1.0:
        lm = F.cross_entropy(logits.float(), labels[sel])
    else:
        prev = torch.zeros_like(sel)
        prev[:, 1:] = sel[:, :-1]
        w = torch.where((sel & ~prev)[sel], first_weight, 1.0)
        ce = F.cross_entropy(logits.float(), labels[sel], reduction="none")
        lm = (ce * w).sum() / w.sum()
    if tags is None:
        return lm
    h_tag = out.hidden_states[tagger["layer"]]
    tl = tag_loss(tagger["head"], h_tag.detach() if tagger["detach"] else h_tag, tags)
    return lm + tagger["weight"] * tl, tl


def add_dropout(model, resid: float = 0.0, attn: float = 0.0, embed: float = 0.0) -> list:
    """Training-time dropout on a stock Qwen3 model, without changing its modules or weights.

    Late in a stage the loss on trained tokens is 0.005-0.02 while validation stays near 0.5:
    the model memorises the training structures. Dropout on each block's two residual
    branches (attention and MLP outputs, as in GPT-2), on the attention probabilities and on
    the input embeddings is the usual counter. Forward hooks keep the checkpoint a plain
    Qwen3 one (no extra keys); they are no-ops in eval mode. Rates of 0 add nothing, so
    existing recipes run exactly as before. Returns the hook handles (remove() them)."""
    import torch.nn.functional as F

    def drop_out(p):
        def hook(module, _inputs, out):
            if isinstance(out, tuple):  # attention returns (output, weights)
                return (F.dropout(out[0], p, module.training), *out[1:])
            return F.dropout(out, p, module.training)
        return hook

    handles = []
    if embed:
        handles.append(model.model.embed_tokens.register_forward_hook(drop_out(embed)))
    for layer in model.model.layers:
        if resid:
            handles.append(layer.self_attn.register_forward_hook(drop_out(resid)))
            handles.append(layer.mlp.register_forward_hook(drop_out(resid)))
        if attn:  # read by the attention kernel in train mode only; save_checkpoint writes 0.0
            layer.self_attn.attention_dropout = attn
    if attn:
        model.config.attention_dropout = attn
    return handles


def train(args, tok, train_rows, val_rows, log) -> tuple[object, dict]:
    import torch

    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    if args.init:
        from transformers import Qwen3ForCausalLM
        model = Qwen3ForCausalLM.from_pretrained(str(args.init), dtype=torch.float32).to(dev)
    else:
        model = build_model(tok.get_vocab_size(), tok, **_shape(args)).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    arch = {k: getattr(model.config, k) for k in ARCH if k != "rope_theta"}
    log({"event": "model", "params": n_params, "arch": arch, "vocab": tok.get_vocab_size()})
    hooks = add_dropout(model, args.resid_dropout, args.attn_dropout, args.embed_dropout)
    tagger = None
    if args.tag_weight:  # a training-only head: its parameters are never saved
        tagger = {"head": make_head(model.config.hidden_size).to(dev), "weight": args.tag_weight,
                  "layer": args.tag_layer or model.config.num_hidden_layers, "detach": True}
    params = list(model.named_parameters()) + (list(tagger["head"].named_parameters()) if tagger else [])
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}]
    if tagger:  # a fresh probe on a trained model: it learns faster than the blocks it reads
        groups.append({"params": list(tagger["head"].parameters()), "weight_decay": 0.0, "scale": 10.0})
    sam_params = [p for _, p in model.named_parameters()]  # the tag head, if any, is not perturbed
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")
    rng = np.random.default_rng(args.seed)
    pad = tok.token_to_id("<|endoftext|>")
    val_batches = make_batches(val_rows, args.batch_tokens, np.random.default_rng(1), pad)[:args.val_batches]
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    # Training steps only: validation runs eager, so eval mode never costs a second compile.
    # Shapes vary from batch to batch (length buckets), hence dynamic.
    backbone = torch.compile(model.model, dynamic=True) if args.compile else None

    def val_loss() -> float:
        model.eval()
        tot = cnt = 0.0
        with torch.no_grad(), amp:
            for ids, lab in val_batches:
                lab_t = torch.from_numpy(lab).to(dev)
                n = int((lab_t != -100).sum())
                tot += float(loss_on(model, torch.from_numpy(ids).to(dev), lab_t)) * n
                cnt += n
        model.train()
        return tot / max(cnt, 1)

    def forward_backward(ids, lab, bb, tags=None):
        opt.zero_grad(set_to_none=True)
        with amp:
            loss = loss_on(model, ids, lab, args.first_weight, bb, tags, tagger)
        tl = None
        if isinstance(loss, tuple):
            loss, tl = loss
        loss.backward()
        return loss, tl

    total = args.steps or 10**9
    step, epoch, t0 = 0, 0, time.time()
    tokens = 0
    history = {"step": [], "loss": [], "val_step": [], "val_loss": []}
    model.train()
    while step < total:
        batches = make_batches(train_rows, args.batch_tokens, rng, pad)
        epoch += 1
        for ids_np, lab_np, *tag_np in batches:
            if step >= total:
                break
            if step == 25:  # after warm-up of the kernels: early steps overstate the cost
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                t_meas = time.time()
            if step == 75 and not args.steps:
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                per_step = (time.time() - t_meas) / 50
                total = max(100, int((args.time_budget - (time.time() - t0)) / per_step) + 75)
                log({"event": "steps_fixed", "total_steps": total, "sec_per_step": round(per_step, 4)})
            for g in opt.param_groups:
                g["lr"] = g.get("scale", 1.0) * lr_at(step, total if total < 10**9 else 10**6, args.lr, args.warmup)
            if tagger:  # during warm-up only the probe learns from the tags: its first guesses are noise
                tagger["detach"] = step < args.warmup
            ids = torch.from_numpy(ids_np).to(dev, non_blocking=True)
            lab = torch.from_numpy(lab_np).to(dev, non_blocking=True)
            tags = torch.from_numpy(tag_np[0]).to(dev, non_blocking=True) if tag_np and tagger else None
            try:
                loss, tl = forward_backward(ids, lab, backbone, tags)
            except Exception as e:  # noqa: BLE001 - a compiler failure must not cost the run
                if backbone is None or step > 1:  # the compiles happen on the first two shapes
                    raise
                log({"event": "compile_failed", "error": f"{type(e).__name__}: {str(e)[:300]}"})
                backbone = None
                loss, tl = forward_backward(ids, lab, None, tags)
            if args.sam:  # the step's gradient taken at the sharpest nearby point (training/sam.py)
                moves = sam.ascend(sam_params, args.sam)
                forward_backward(ids, lab, backbone, tags)
                sam.descend(sam_params, moves)
            gnorm = torch.nn.utils.clip_grad_norm_([p for _, p in params], 1.0)
            opt.step()
            tokens += ids_np.size
            step += 1
            if step % args.log_every == 0 or step == 1:
                lv = float(loss.detach())
                history["step"].append(step)
                history["loss"].append(lv)
                log({"step": step, "epoch": epoch, "loss": round(lv, 4), "gnorm": round(float(gnorm), 3),
                     "lr": round(opt.param_groups[0]["lr"], 6), "tokens": tokens, "elapsed": round(time.time() - t0, 1),
                     **({"tag_loss": round(float(tl.detach()), 4)} if tl is not None else {})})
            if step % args.val_every == 0 or step == total:
                vl = val_loss()
                history["val_step"].append(step)
                history["val_loss"].append(vl)
                log({"step": step, "val_loss": round(vl, 4)})
    for h in hooks:
        h.remove()
    summary = {"steps": step, "epochs_started": epoch, "tokens_seen": tokens, "train_seconds": round(time.time() - t0, 1),
               "params": n_params, "final_val_loss": history["val_loss"][-1] if history["val_loss"] else None}
    return model, {"summary": summary, "history": history}


def save_checkpoint(model, tok_dir: Path, out: Path, log) -> dict:
    """fp16 safetensors + config + generation config + tokenizer files; checks fp16 range."""
    import shutil

    import torch
    from transformers import GenerationConfig

    sd = {k: v.detach().float() for k, v in model.state_dict().items()}
    worst = max(float(v.abs().max()) for v in sd.values())
    if worst >= 65504:
        raise SystemExit(f"weight magnitude {worst} overflows float16")
    model = model.to(torch.float16)
    model.config.dtype = "float16"
    model.config.attention_dropout = 0.0  # a training-time setting (--attn-dropout), not the model's
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    cfg = json.loads((out / "config.json").read_text())
    cfg.setdefault("rope_theta", ARCH["rope_theta"])  # flat copy for loaders that predate rope_parameters
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    eos = [model.config.eos_token_id, model.config.pad_token_id]
    GenerationConfig(eos_token_id=eos, pad_token_id=model.config.pad_token_id, bos_token_id=model.config.bos_token_id,
                     do_sample=False, max_new_tokens=256).save_pretrained(str(out))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tok_dir / f, out / f)
    size = sum(p.stat().st_size for p in out.iterdir())
    info = {"max_abs_weight": round(worst, 3), "bytes": size}
    log({"event": "saved", **info})
    return info


def plot(history: dict, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:  # optional locally; the GPU image has it
        print("matplotlib not installed: no loss plot", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(history["step"], history["loss"], label="train (trained tokens)", lw=1)
    ax.plot(history["val_step"], history["val_loss"], "o-", label="validation", ms=3)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _shape(args) -> dict:
    """--layers / --intermediate / --hidden as build_model overrides (0: ARCH's value)."""
    shape = {k: v for k, v in (("num_hidden_layers", args.layers), ("intermediate_size", args.intermediate)) if v}
    if args.hidden:  # the heads keep their count, so each head widens with the residual stream
        if args.hidden % ARCH["num_attention_heads"]:
            raise SystemExit(f"error: --hidden {args.hidden} is not a multiple of {ARCH['num_attention_heads']} heads")
        shape.update(hidden_size=args.hidden, head_dim=args.hidden // ARCH["num_attention_heads"])
    return shape


def _shares(text: str) -> tuple[float, ...]:
    """'0.4,0.2,...' -> a tuple of non-negative weights (argparse type)."""
    try:
        vals = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if any(v < 0 for v in vals) or not sum(vals):
        raise argparse.ArgumentTypeError(f"shares must be non-negative and not all zero: {text!r}")
    return vals


def _share(text: str) -> float:
    """A share in [0, 1] (argparse type)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"a share must lie in [0, 1]: {text!r}")
    return v


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="train the default model end to end")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default=None)
    ap.add_argument("--n-train", type=int, default=120_000)
    ap.add_argument("--vocab", type=int, default=6144)
    ap.add_argument("--tokenizer-style", choices=("qwen", "bare"), default="qwen",
                    help="bare: words never carry a leading space, so copied values keep their tokens")
    ap.add_argument("--layers", type=int, default=0,
                    help="decoder blocks of a new model (0: ARCH's 8; a checkpoint given by --init keeps its own)")
    ap.add_argument("--intermediate", type=int, default=0,
                    help="MLP width of a new model (0: ARCH's 960)")
    ap.add_argument("--hidden", type=int, default=0,
                    help="residual width of a new model, eight heads wide (0: ARCH's 320)")
    ap.add_argument("--max-len", type=int, default=1024)
    ap.add_argument("--batch-tokens", type=int, default=65536)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--resid-dropout", type=_share, default=0.0,
                    help="dropout on each block's attention and MLP outputs before the residual add (training only)")
    ap.add_argument("--attn-dropout", type=_share, default=0.0,
                    help="dropout on the attention probabilities (training only; the saved config keeps 0.0)")
    ap.add_argument("--embed-dropout", type=_share, default=0.0,
                    help="dropout on the input embeddings (training only)")
    ap.add_argument("--first-weight", type=float, default=1.0,
                    help="weight of each assistant turn's first trained token in the loss (1: plain mean)")
    ap.add_argument("--tag-weight", type=float, default=0.0,
                    help="weight of the value-tag loss on requests (training/value_tags.py; 0: none)")
    ap.add_argument("--tag-layer", type=int, default=6,
                    help="blocks below the states the value-tag head reads (0: all of them)")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the blocks for the training steps (falls back to eager if it fails); "
                         "on the H200 its compiles cost more than they saved in runs of ~1500 steps (session 22)")
    ap.add_argument("--steps", type=int, default=3500, help="fixed step count (0: derive from --time-budget)")
    ap.add_argument("--time-budget", type=float, default=320.0, help="seconds of training when --steps is 0")
    ap.add_argument("--plain-repeat", type=int, default=3, help="copies of the plain-text rows per epoch")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--val-every", type=int, default=250)
    ap.add_argument("--val-batches", type=int, default=12)
    ap.add_argument("--no-preflight", dest="preflight", action="store_false")
    ap.add_argument("--no-copy-drill", dest="copy_drill", action="store_false",
                    help="invented values use no random tokenizer pieces")
    ap.add_argument("--init", type=Path, default=None, help="continue from this checkpoint (and its tokenizer)")
    ap.add_argument("--eval-limit", type=int, default=0, help="test conversations to evaluate (0: all)")
    ap.add_argument("--front", type=float, default=0.0,
                    help="share of training requests whose trailing time/day/place adjunct moves to the front")
    ap.add_argument("--synth", type=float, default=0.6,
                    help="share of train/val conversations whose open-class values are invented (copy drill)")
    ap.add_argument("--noise", type=float, default=0.0,
                    help="share of training requests with a word dropped, swapped or inserted (word-noise drill)")
    ap.add_argument("--phrase", type=float, default=0.0,
                    help="share of invented-value draws whose free text holds function words (at, to, is it)")
    ap.add_argument("--context", type=float, default=0.0,
                    help="share of training requests after a clause that carries no argument")
    ap.add_argument("--compose", type=float, default=0.0,
                    help="share of training tool requests built compositionally (training/compose.py) instead of from a pattern")
    ap.add_argument("--doc-values", type=_share, default=0.0,
                    help="share of training slot draws with docstring phrases as free-text values (doc_values.py)")
    ap.add_argument("--more-frames", action="store_true",
                    help="composed requests use compose.MORE's verb phrases too (session 22; with --compose)")
    ap.add_argument("--drill", type=_share, default=0.0,
                    help="share of training conversations that are structure-only drills: request -> call "
                         "exchanges without the tool schemas (datagen.drill_conversation)")
    ap.add_argument("--casefold", type=_share, default=0.0,
                    help="share of training tool requests that say one copied lower-case value capitalised "
                         "(datagen.casefold_drill; the call keeps its form)")
    ap.add_argument("--sam", type=float, default=0.0,
                    help="sharpness-aware minimisation with this radius (training/sam.py; 0: off, 2x cost)")
    ap.add_argument("--fold-val", type=_share, default=0.0,
                    help="share of training pattern requests drawn from validation's request patterns "
                         "(choose such runs on training.heldout, not on validation)")
    ap.add_argument("--round5", type=_share, default=0.0,
                    help="share of training single- and multi-call requests whose structure comes from "
                         "training/train_round5.py (opt-in; 0 leaves the data as before)")
    ap.add_argument("--round6", type=_share, default=0.0,
                    help="share of the training single- and multi-call requests left by --round5 whose "
                         "structure comes from training/train_round6.py (opt-in; 0 leaves the data as before)")
    ap.add_argument("--round7", type=_share, default=0.0,
                    help="share of the training single- and multi-call requests left by --round5 and --round6 "
                         "whose structure comes from training/train_round7.py (opt-in; 0 leaves the data as before)")
    ap.add_argument("--swap-verbs", type=_share, default=0.0,
                    help="share of training tool requests whose verb becomes an English verb no split uses "
                         "(verb_swap.py; the call keeps its form)")
    ap.add_argument("--drill-style", choices=("names", "none"), default="names",
                    help="drill prompt: a one-line system message naming the offered tools, or no system block")
    ap.add_argument("--mix", type=_shares, default=None,
                    help="training shares of single,multi,oos,missing,chat exchanges (default 0.40,0.22,0.10,0.10,0.18)")
    ap.add_argument("--turns", type=_shares, default=None,
                    help="training shares of conversations with 1,2,3 exchanges (default 0.6,0.3,0.1)")
    ap.add_argument("--val-eval", type=int, default=800, help="validation conversations to evaluate (0: none)")
    args = ap.parse_args(argv)
    for name, want in (("mix", 5), ("turns", 3)):
        if getattr(args, name) and len(getattr(args, name)) != want:
            ap.error(f"--{name} takes {want} shares, got {len(getattr(args, name))}")
    _shape(args)  # a bad shape fails here, before minutes of data generation

    import torch
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    random.seed(args.seed)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    logf = open(out / "train_log.jsonl", "w")

    def log(rec: dict) -> None:
        rec = {"t": round(time.time() - T0, 1), **rec}
        print(json.dumps(rec), flush=True)
        logf.write(json.dumps(rec) + "\n")
        logf.flush()

    log({"event": "start", "args": {k: str(v) for k, v in vars(args).items()}, "python": sys.version.split()[0],
         "torch": torch.__version__, "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu"})
    from . import datagen
    from .chat_format import CHAT_TEMPLATE
    from .plaintext import stdlib_docs
    from .tokenizer import corpus, save_hf, train_tokenizer
    docs = stdlib_docs()
    if args.init:  # continue training: keep the checkpoint's tokenizer
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(str(args.init / "tokenizer.json"))
        save_hf(tok, out / "tokenizer", CHAT_TEMPLATE)
    else:  # the tokenizer learns from a first draw of the training conversations
        datagen.generate(out / "data", args.seed, args.n_train)
        tok = train_tokenizer(corpus(out / "data", docs["train"]), args.vocab, args.tokenizer_style)
        save_hf(tok, out / "tokenizer", CHAT_TEMPLATE)
    log({"event": "tokenizer", "vocab": tok.get_vocab_size(), "plain_docs": {k: len(v) for k, v in docs.items()}})
    pieces = sorted({p.lstrip("Ġ") for p in tok.get_vocab() if p.lstrip("Ġ").isalpha() and p.lstrip("Ġ").isascii()
                     and len(p.lstrip("Ġ")) >= 2})
    stats = datagen.generate(out / "data", args.seed, args.n_train, token_words=pieces if args.copy_drill else None,
                             front=args.front, noise=args.noise, synth=args.synth, mix=args.mix, turns=args.turns,
                             phrase=args.phrase, context=args.context, compose=args.compose, more_frames=args.more_frames,
                             doc_values=args.doc_values,
                             drill=args.drill, drill_style=args.drill_style, casefold=args.casefold,
                             swap=args.swap_verbs, fold_val=args.fold_val, round5=args.round5,
                             round6=args.round6, round7=args.round7)
    log({"event": "data", "drill_pieces": len(pieces) if args.copy_drill else 0, **stats})

    train_rows, dropped = encode_conversations(tok, out / "data" / "train.jsonl", args.max_len,
                                               tags=args.tag_weight > 0)
    plain = encode_plain(tok, docs["train"], args.max_len)
    val_rows, _ = encode_conversations(tok, out / "data" / "val.jsonl", args.max_len)
    val_rows += encode_plain(tok, docs["val"], args.max_len)
    n_conv_tok = sum(len(r[0]) for r in train_rows)
    n_conv_trained = sum(int(r[1].sum()) for r in train_rows)
    n_plain = sum(len(x) for x, _ in plain)
    train_rows += plain * args.plain_repeat
    log({"event": "encoded", "conv_rows": len(train_rows) - len(plain) * args.plain_repeat, "dropped_too_long": dropped,
         "conv_tokens": n_conv_tok, "conv_trained_tokens": n_conv_trained, "plain_rows": len(plain),
         "plain_tokens": n_plain, "val_rows": len(val_rows)})

    from .evaluate import evaluate
    if args.preflight:  # save, reload and generate with an untrained model before spending the budget
        pre = build_model(tok.get_vocab_size(), tok, **_shape(args))
        save_checkpoint(pre, out / "tokenizer", out / "preflight", log)
        ev = evaluate(out / "preflight", out / "data" / "test.jsonl", args.device, 5, max_new_tokens=8)
        log({"event": "preflight_ok", "n": ev["n"]})
        del pre

    model, result = train(args, tok, train_rows, val_rows, log)
    ckpt = out / "model"
    info = save_checkpoint(model, out / "tokenizer", ckpt, log)
    (out / "history.json").write_text(json.dumps(result["history"]))
    plot(result["history"], out / "loss.png")

    bs = 128 if args.device == "cuda" else 16
    if args.val_eval:  # decisions between runs are taken on validation, never on test
        vev = evaluate(ckpt, out / "data" / "val.jsonl", args.device, args.val_eval, batch_size=bs)
        (out / "val_eval.json").write_text(json.dumps(vev, indent=1))
        log({"event": "val_eval", **{k: v for k, v in vev.items() if k != "examples"}})
    ev = evaluate(ckpt, out / "data" / "test.jsonl", args.device, args.eval_limit or None, batch_size=bs)
    (out / "eval.json").write_text(json.dumps(ev, indent=1))
    log({"event": "eval", **{k: v for k, v in ev.items() if k != "examples"}})
    log({"event": "done", **result["summary"], **info})


T0 = time.time()

if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    main()
