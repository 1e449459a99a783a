"""BERT encoders for sentence embeddings (all-MiniLM, bge, e5 ...).

Post-LayerNorm blocks, learned absolute positions, bidirectional attention with
an additive padding mask, exact (erf) GELU.  Texts are embedded in padded
batches; pooling (mean / cls / max / mean-sqrt-len) and L2 normalisation follow
the sentence-transformers files beside the weights (``modules.json``,
``1_Pooling/config.json``, ``sentence_bert_config.json``), so the vectors are the
ones ``SentenceTransformer(model_dir).encode(texts)`` gives.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from ..errors import BadRequestError, ModelLoadError
from ..graph import Ops
from ..weights import Weights
from .base import Scope, args_from_config, norm_weight

BATCH_TOKENS = 2048  # padded tokens per forward pass; texts are sorted by length so padding stays small
MASKED = np.float32(-1e9)  # additive score for padding keys (finite: safe for every backend)


@dataclass
class ModelArgs:
    model_type: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    position_embedding_type: str = "absolute"

    def __post_init__(self):
        if self.position_embedding_type != "absolute":
            raise ModelLoadError(
                f"BERT position_embedding_type '{self.position_embedding_type}' is not supported (only 'absolute')")
        self.head_dim = self.hidden_size // self.num_attention_heads


_ACT = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}


_POOLING_KEYS = {  # 1_Pooling/config.json flag -> mode
    "pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean", "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len", "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


@dataclass
class Pooling:
    """How token states become one vector (sentence-transformers semantics)."""

    mode: str = "mean"  # mean | cls | max | mean_sqrt_len
    normalize: bool = True
    max_seq_length: Optional[int] = None

    @classmethod
    def from_dir(cls, model_dir: str) -> "Pooling":
        """Read modules.json and its Pooling/Normalize modules; mean + normalise without them."""
        modules = _json(os.path.join(model_dir, "modules.json"))
        st = _json(os.path.join(model_dir, "sentence_bert_config.json")) or {}
        if not isinstance(modules, list):
            return cls(max_seq_length=st.get("max_seq_length"))
        types = [str(m.get("type", "")) for m in modules if isinstance(m, dict)]
        pooling = next((m for m in modules if isinstance(m, dict) and str(m.get("type", "")).endswith(".Pooling")), None)
        mode = "mean"
        if pooling is not None:
            cfg = _json(os.path.join(model_dir, pooling.get("path", ""), "config.json")) or {}
            modes = [m for key, m in _POOLING_KEYS.items() if cfg.get(key)]
            if len(modes) > 1:
                raise ModelLoadError(f"pooling modes {'+'.join(modes)} are combined in {model_dir}; "
                                     "only one pooling mode at a time is supported")
            if modes and modes[0] not in ("cls", "mean", "max", "mean_sqrt_len"):
                raise ModelLoadError(f"pooling mode '{modes[0]}' in {model_dir} is not supported "
                                     "(supported: cls, mean, max, mean_sqrt_len)")
            mode = modes[0] if modes else "mean"
        return cls(mode=mode, normalize=any(t.endswith(".Normalize") for t in types),
                   max_seq_length=st.get("max_seq_length"))


def _json(path: str) -> Any:
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path} is not valid JSON: {exc}") from exc


class Embeddings:
    def __init__(self, args: ModelArgs, w: Scope):
        D = args.hidden_size
        self.eps = args.layer_norm_eps
        self.word_embeddings = w("word_embeddings.weight", (args.vocab_size, D))
        self.position_embeddings = w("position_embeddings.weight", (args.max_position_embeddings, D))
        self.token_type_embeddings = w("token_type_embeddings.weight", (args.type_vocab_size, D))
        self.LayerNorm = (norm_weight(w("LayerNorm.weight", (D,))), norm_weight(w("LayerNorm.bias", (D,))))

    def __call__(self, ops: Ops, ids: np.ndarray, token_type_ids: np.ndarray) -> np.ndarray:
        L = ids.shape[1]
        h = ops.embedding(self.word_embeddings, ids)  # (B, L, D)
        h = h + ops.embedding(self.position_embeddings, np.arange(L))[None]
        h = h + ops.embedding(self.token_type_embeddings, token_type_ids)
        return ops.layer_norm(h, *self.LayerNorm, self.eps)


class Attention:
    """``attention.self.{query,key,value}`` then ``attention.output.{dense,LayerNorm}`` (post-norm residual)."""

    def __init__(self, args: ModelArgs, w: Scope):
        D = args.hidden_size
        self.n_heads, self.head_dim, self.eps = args.num_attention_heads, args.head_dim, args.layer_norm_eps
        self.scale = args.head_dim ** -0.5
        s, o = w.sub("self."), w.sub("output.")
        self.query = (s("query.weight", (D, D), linear=True), norm_weight(s("query.bias", (D,))))
        self.key = (s("key.weight", (D, D), linear=True), norm_weight(s("key.bias", (D,))))
        self.value = (s("value.weight", (D, D), linear=True), norm_weight(s("value.bias", (D,))))
        self.dense = (o("dense.weight", (D, D), linear=True), norm_weight(o("dense.bias", (D,))))
        self.LayerNorm = (norm_weight(o("LayerNorm.weight", (D,))), norm_weight(o("LayerNorm.bias", (D,))))

    def __call__(self, ops: Ops, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        B, L, D = x.shape
        H, d = self.n_heads, self.head_dim
        q = ops.linear(x, *self.query).reshape(B, L, H, d).transpose(0, 2, 1, 3)  # (B, H, L, d)
        k = ops.linear(x, *self.key).reshape(B, L, H, d).transpose(0, 2, 1, 3)
        v = ops.linear(x, *self.value).reshape(B, L, H, d).transpose(0, 2, 1, 3)
        out = ops.attention(np.ascontiguousarray(q), np.ascontiguousarray(k), np.ascontiguousarray(v),
                            scale=self.scale, causal=False, mask=mask)
        out = out.transpose(0, 2, 1, 3).reshape(B, L, D)
        return ops.layer_norm(ops.linear(out, *self.dense) + x, *self.LayerNorm, self.eps)


class MLP:
    """``intermediate.dense`` -> act -> ``output.dense``, then ``output.LayerNorm`` over the residual."""

    def __init__(self, args: ModelArgs, w: Scope):
        D, F = args.hidden_size, args.intermediate_size
        self.eps = args.layer_norm_eps
        if args.hidden_act not in _ACT:
            raise ModelLoadError(f"BERT hidden_act '{args.hidden_act}' is not supported ({', '.join(_ACT)})")
        self.act = _ACT[args.hidden_act]
        self.intermediate = (w("intermediate.dense.weight", (F, D), linear=True),
                             norm_weight(w("intermediate.dense.bias", (F,))))
        self.output = (w("output.dense.weight", (D, F), linear=True), norm_weight(w("output.dense.bias", (D,))))
        self.LayerNorm = (norm_weight(w("output.LayerNorm.weight", (D,))), norm_weight(w("output.LayerNorm.bias", (D,))))

    def __call__(self, ops: Ops, x: np.ndarray) -> np.ndarray:
        h = ops.activation(ops.linear(x, *self.intermediate), self.act)
        return ops.layer_norm(ops.linear(h, *self.output) + x, *self.LayerNorm, self.eps)


class TransformerBlock:
    def __init__(self, args: ModelArgs, w: Scope):
        self.attention = Attention(args, w.sub("attention."))
        self.mlp = MLP(args, w)  # intermediate.* and output.* sit directly under the layer

    def __call__(self, ops: Ops, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self.mlp(ops, self.attention(ops, x, mask))


class Model:
    """BertModel: ``embeddings.*``, ``encoder.layer.N.*`` (``bert.`` prefix of task heads accepted).

    An encoder, not a :class:`CausalLM`: the engine gives it no generator and
    calls :meth:`embed` for ``Engine.embed``.
    """

    def __init__(self, config: dict, weights: Weights, ops: Ops):
        args = self.args = args_from_config(ModelArgs, config)
        self.ops = ops
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
        w = Scope(weights, prefix, ops)
        self.embeddings = Embeddings(args, w.sub("embeddings."))
        self.layers = [TransformerBlock(args, w.sub(f"encoder.layer.{i}.")) for i in range(args.num_hidden_layers)]
        self.pooling = Pooling.from_dir(weights.model_dir)
        self.max_context = min(args.max_position_embeddings, self.pooling.max_seq_length or args.max_position_embeddings)
        self.vocab_size, self.dim = args.vocab_size, args.hidden_size

    def forward(self, ids: np.ndarray, attention_mask: Optional[np.ndarray] = None,
                token_type_ids: Optional[np.ndarray] = None) -> np.ndarray:
        """Last hidden states ``(B, L, D)`` for ``ids`` ``(B, L)``; ``attention_mask`` is 1 for real tokens."""
        ids = np.asarray(ids, dtype=np.int64)
        if attention_mask is None:
            attention_mask = np.ones(ids.shape, dtype=np.int64)
        if token_type_ids is None:
            token_type_ids = np.zeros(ids.shape, dtype=np.int64)
        mask = np.where(np.asarray(attention_mask)[:, None, None, :] > 0, np.float32(0), MASKED)  # (B, 1, 1, L)
        h = self.embeddings(self.ops, ids, token_type_ids)
        for layer in self.layers:
            h = layer(self.ops, h, mask)
        return h

    def pool(self, h: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """Token states ``(B, L, D)`` -> sentence vectors ``(B, D)`` by the configured pooling."""
        m = np.asarray(attention_mask, dtype=np.float32)[..., None]  # (B, L, 1)
        mode = self.pooling.mode
        if mode == "cls":
            v = h[:, 0]
        elif mode == "max":
            v = np.where(m > 0, h, np.float32(-1e9)).max(axis=1)
        else:
            n = np.maximum(m.sum(axis=1), 1e-9)
            v = (h * m).sum(axis=1) / (np.sqrt(n) if mode == "mean_sqrt_len" else n)
        v = v.astype(np.float32)
        if self.pooling.normalize:
            v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return v

    def embed(self, tokenizer, texts: Sequence[str]) -> np.ndarray:
        """Sentence vectors ``(n, D)`` float32 for ``texts``, in padded length-sorted batches."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        seqs = [self._ids(tokenizer, t) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
        for idx in _batches(order, [len(s) for s in seqs]):
            L = len(seqs[idx[-1]])  # the longest: sorted ascending
            ids = np.zeros((len(idx), L), dtype=np.int64)  # pad id is irrelevant: masked out
            mask = np.zeros((len(idx), L), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, :len(seqs[i])] = seqs[i]
                mask[row, :len(seqs[i])] = 1
            out[idx] = self.pool(self.forward(ids, mask), mask)
        return out

    def _ids(self, tokenizer, text: str) -> list[int]:
        if not isinstance(text, str):
            raise BadRequestError(f"texts to embed must be strings, got {type(text).__name__}")
        ids = tokenizer.encode(text, add_special_tokens=True)
        if len(ids) > self.max_context:  # truncate the text, keep the closing [SEP]
            ids = ids[:self.max_context - 1] + ids[-1:]
        return ids


def _batches(order: list[int], lengths: list[int]) -> list[list[int]]:
    """Split length-sorted indices into batches of at most BATCH_TOKENS padded tokens."""
    batches: list[list[int]] = [[]]
    for i in order:
        batch = batches[-1]
        # Padding is wasted work (the erf GELU dominates): cap the batch and keep lengths within 2x.
        if batch and ((len(batch) + 1) * lengths[i] > BATCH_TOKENS or lengths[i] > 2 * lengths[batch[0]] + 8):
            batches.append([])
        batches[-1].append(i)
    return batches
