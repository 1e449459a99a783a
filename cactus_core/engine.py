"""The Engine: load a model, complete a conversation, embed text, score tokens.

``complete()`` is the product's one call: validate the request, render the
chat template, prefill (reusing the cached prefix of the same conversation),
ask the router how confident the model is, hand off to the cloud when it is
not, otherwise decode locally, and return the response JSON of DESIGN.md.  Bad
input never raises out of it: the result says ``success: false`` and why.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Optional, Sequence

import numpy as np
import structlog

from . import handoff, plugins
from .device import rss_mb
from .errors import BadRequestError, CactusError, ModelLoadError
from .generate import Generator, SamplingParams
from .graph import Ops
from .models import model_module
from .models.base import CausalLM
from .routing import DEFAULT_THRESHOLD, Prefill
from .weights import load_weights, read_json

log = structlog.get_logger("cactus")

DEFAULT_CONTEXT = 4096
DEFAULT_MODEL_NAME = "spine"
DEFAULT_CLOUD_TIMEOUT_MS = 15000


def default_model_dir() -> Optional[str]:
    """Where the embedded default model lives (``CACTUS_DEFAULT_MODEL`` overrides)."""
    env = os.environ.get("CACTUS_DEFAULT_MODEL")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.path.dirname(here), os.path.join(os.sys.prefix, "share", "cactus")):
        path = os.path.join(root, "models", DEFAULT_MODEL_NAME)
        if os.path.exists(os.path.join(path, "config.json")):
            return path
    return None


def resolve_model(model: Optional[str]) -> str:
    """A model argument (directory, known name, ``org/name`` on the hub, or None) -> a model directory."""
    if model is None or model == DEFAULT_MODEL_NAME:
        path = default_model_dir()
        if path is None:
            raise ModelLoadError(
                "no default model is installed; pass a model directory (cactus run PATH)"
            )
        return path
    if os.path.isdir(model):
        if not os.path.exists(os.path.join(model, "config.json")):
            raise ModelLoadError(f"{model} has no config.json; is it a Hugging Face checkpoint?")
        return model
    if os.path.exists(model):
        raise ModelLoadError(f"{model} is a file; pass the model's directory")
    from . import hub

    if hub.looks_like_repo_id(model):  # as the CLI: download and convert once, then reuse the bundle
        return hub.bundle_for(model, progress=False, log=lambda m: log.info("model", note=m))
    raise ModelLoadError(f"model '{model}' not found: no such directory, and not a known model name")


class Engine:
    """A loaded model with its tokenizer, kernel backends, generator and router."""

    def __init__(self, path: str, model, tokenizer, ops: Ops, config: dict, manifest: dict,
                 context_length: int, options: dict):
        self.path, self.model, self.tokenizer, self.ops = path, model, tokenizer, ops
        self.config, self.manifest, self.options = config, manifest, options
        self.name = options.get("name") or os.path.basename(os.path.normpath(path))
        self.generator = Generator(model, context_length) if isinstance(model, CausalLM) else None
        self._router = None
        self.rag = None  # a RagIndex when loaded with corpus_dir

    # --- loading -------------------------------------------------------------
    @classmethod
    def load(cls, model: Optional[str] = None, backend: str = "auto",
             context_length: Optional[int] = None, **options: Any) -> "Engine":
        """Load ``model`` (directory, name, or None for the default) on ``backend``."""
        path = resolve_model(model)
        config = read_json(os.path.join(path, "config.json"), "config.json")
        module = model_module(config)
        ops = options.pop("ops", None) or Ops(plugins.select_backends(backend))
        weights = load_weights(path)
        try:
            net = module.Model(config, weights, ops)
        except CactusError:
            raise
        except (KeyError, ValueError, TypeError) as exc:
            raise ModelLoadError(f"cannot build {config.get('model_type')} from {path}: {exc}") from exc
        from .tokenizer import Tokenizer

        tokenizer = Tokenizer.from_dir(path)
        ctx = min(context_length or DEFAULT_CONTEXT, getattr(net, "max_context", DEFAULT_CONTEXT))
        engine = cls(path, net, tokenizer, ops, config, weights.manifest, ctx, options)
        if options.get("corpus_dir"):
            from .rag import RagIndex

            engine.rag = RagIndex.open(options["corpus_dir"], embedder=options.get("embedder") or engine)
        return engine

    @property
    def backend(self) -> str:
        return self.ops.name

    @property
    def context_length(self) -> int:
        return self.generator.context_length if self.generator else DEFAULT_CONTEXT

    # --- routing -------------------------------------------------------------
    def _threshold(self, requested: Optional[float]) -> float:
        for value in (requested, self.options.get("confidence_threshold"),
                      (self.manifest.get("probe") or {}).get("threshold")):
            if value is not None:
                return _float(value, "confidence_threshold", 0.0, 1.0)
        return DEFAULT_THRESHOLD

    def router(self):
        """The routing policy: the bundle's probe if it ships one, else entropy."""
        if self._router is None:
            available = plugins.routers()
            name = self.options.get("router") or ("probe" if self.manifest.get("probe") and "probe" in available else "entropy")
            if name not in available:
                raise BadRequestError(f"unknown router '{name}'; available: {', '.join(sorted(available))}")
            self._router = available[name](self)
        return self._router

    def next_tier(self) -> Optional["Engine"]:
        """The larger local model to ask when this one is unsure (``tiers`` option), loaded once."""
        tiers = self.options.get("tiers") or []
        if not tiers:
            return None
        if getattr(self, "_next", None) is None:
            spec = dict(tiers[0]) if isinstance(tiers[0], dict) else {"model": tiers[0]}
            options = {k: v for k, v in self.options.items() if k not in ("tiers", "confidence_threshold", "name")}
            options["tiers"] = tiers[1:]
            if spec.get("confidence_threshold") is not None:
                options["confidence_threshold"] = spec["confidence_threshold"]
            self._next = Engine.load(spec["model"], backend=spec.get("backend", "auto"), **options)
        return self._next

    # --- the main call -----------------------------------------------------------
    def complete(self, messages: Any, tools: Any = None, max_tokens: int = 256,
                 temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0, min_p: float = 0.0,
                 repetition_penalty: float = 1.0, seed: Optional[int] = None,
                 stop: Optional[Sequence[str]] = None, confidence_threshold: Optional[float] = None,
                 cloud: Any = None, cloud_timeout_ms: Optional[int] = None,
                 on_token: Optional[Callable[[str], Any]] = None, tool_choice: Any = None) -> dict:
        """Answer a conversation; returns the response dict (never raises on bad input).

        ``tool_choice`` is OpenAI's: ``"auto"`` (default), ``"none"``, ``"required"`` or
        ``{"type": "function", "function": {"name": ...}}``; the last two are enforced by
        opening the assistant turn with the model's call markup.
        """
        t0 = time.perf_counter()
        result = _empty_result(self)
        try:
            from .chat_template import apply_tool_choice, validate_tools
            tools, forced = apply_tool_choice(tool_choice, validate_tools(tools))
            self._complete(result, t0, messages, tools, forced, on_token, cloud, cloud_timeout_ms,
                           confidence_threshold,
                           SamplingParams(max_tokens=_positive_int(max_tokens, "max_tokens"),
                                          temperature=_float(temperature, "temperature", 0.0),
                                          top_p=_float(top_p, "top_p", 0.0, 1.0), top_k=int(top_k or 0),
                                          min_p=_float(min_p, "min_p", 0.0, 1.0),
                                          repetition_penalty=_float(repetition_penalty, "repetition_penalty", 0.0),
                                          seed=seed, stop=_stops(stop),
                                          eos_token_ids=self.tokenizer.eos_token_ids))
        except CactusError as exc:
            result.update(success=False, error=str(exc))
        except Exception as exc:  # a bug must not take the caller down either
            log.exception("complete failed")
            result.update(success=False, error=f"internal error: {type(exc).__name__}: {exc}".splitlines()[0])
        result["total_time_ms"] = round((time.perf_counter() - t0) * 1000.0, 3)
        result["ram_usage_mb"] = round(rss_mb(), 1)
        return result

    def _complete(self, result, t0, messages, tools, forced, on_token, cloud, cloud_timeout_ms,
                  confidence_threshold, params: SamplingParams) -> None:
        from .chat_template import validate_messages
        from .tool_calls import (CallMarkupFilter, call_watcher, forced_call_constraint, forced_call_prefix,
                                 split_reasoning)

        if self.generator is None:
            raise BadRequestError(f"{self.name} is an embedding model; use embed(), not complete()")
        messages = validate_messages(messages)
        if self.rag is not None:
            messages, result["sources"] = self.rag.augment(messages)
        prompt = self.tokenizer.encode_chat(messages, tools=tools, add_generation_prompt=True)
        opening, constraint = "", None
        if forced is not None:  # the model continues an opened call: it cannot answer in text
            try:
                opening = forced_call_prefix(self.tokenizer.tool_call_style, forced or None)
            except ValueError as exc:
                raise BadRequestError(f"tool_choice: {exc}") from None
            prompt = prompt + self.tokenizer.encode(opening, add_special_tokens=False)
            constraint = forced_call_constraint(self.tokenizer.tool_call_style, opening, tools)
        elif tools and self.options.get("constrain_calls", True):  # calls the model opens itself
            constraint = call_watcher(self.tokenizer.tool_call_style, tools)
        limit = self.context_length
        if len(prompt) >= limit:
            raise BadRequestError(
                f"prompt is {len(prompt)} tokens but the context holds {limit}; "
                "shorten the conversation or load with a larger context_length"
            )
        params.max_tokens = min(params.max_tokens, limit - len(prompt))
        result["prompt_tokens"] = len(prompt)  # the whole prompt; prefill_tokens excludes the reused prefix
        threshold = self._threshold(confidence_threshold)
        result["confidence_threshold"] = threshold
        timeout_s = (cloud_timeout_ms or self.options.get("cloud_timeout_ms") or DEFAULT_CLOUD_TIMEOUT_MS) / 1000.0
        stream = self.tokenizer.stream_decoder()
        handed: dict = {}  # the answer of the tier or cloud that took over

        def after_prefill(logits: np.ndarray) -> bool:
            captured = dict(self.model.captured)
            self.model.capture = ()  # decode steps need no hidden states: all layers in one call again
            confidence = float(self.router().score(Prefill(logits, captured)))
            result["confidence"] = round(confidence, 4)
            if confidence >= threshold:
                result["cloud_handoff_reason"] = handoff.CONFIDENT
                return True
            if handoff.handoff_disabled(cloud, self.options):
                result["cloud_handoff_reason"] = handoff.DISABLED
                return True
            tier = self.next_tier()
            if tier is not None:  # small local -> large local -> ... -> cloud
                answer = tier.complete(messages, tools, max_tokens=params.max_tokens,
                                       temperature=params.temperature, cloud=cloud,
                                       cloud_timeout_ms=cloud_timeout_ms, on_token=on_token,
                                       tool_choice=_openai_tool_choice(forced))
                if answer["success"]:
                    handed.update(answer)
                    result["tier"] = answer["tier"]
                    result["cloud_handoff"] = answer["cloud_handoff"]
                    result["cloud_handoff_reason"] = (
                        handoff.LOW_CONFIDENCE if answer["cloud_handoff"] else answer["cloud_handoff_reason"])
                    return False
            config = handoff.cloud_config(cloud, self.options)
            if not config:
                result["cloud_handoff_reason"] = handoff.NO_PROVIDER
                return True
            try:
                handed.update(handoff.call_cloud(
                    config, messages, tools, max_tokens=params.max_tokens,
                    temperature=params.temperature, timeout_s=timeout_s, on_token=on_token,
                    redact=self.options.get("redact", True), tool_choice=forced))
            except CactusError as exc:  # the local answer is the fallback, never lost
                result["cloud_handoff_reason"] = handoff.error_reason(exc)
                result["cloud_error"] = str(exc)
                return True
            result["cloud_handoff"] = True
            result["cloud_handoff_reason"] = handoff.LOW_CONFIDENCE
            result["tier"] = "cloud"
            return False

        local_on_token, markup = on_token, None
        if on_token is not None and tools:  # stream the text, never the call markup
            markup = CallMarkupFilter(self.tokenizer.tool_call_style)
            markup.feed(opening)

            def local_on_token(piece: str):
                shown = markup.feed(piece)
                return on_token(shown) if shown else None

        self.model.capture = tuple(getattr(self.router(), "layers", ()))
        gen = self.generator.generate(prompt, params, stream.feed, on_text=local_on_token,
                                      after_prefill=after_prefill, flush=stream.flush, constraint=constraint,
                                      token_text=self._token_text)
        result["prefill_tokens"] = gen.prefill_tokens
        result["prefill_tps"] = round(gen.prefill_tokens / gen.prefill_s, 2) if gen.prefill_s > 0 else 0.0
        if handed:
            result["response"] = handed.get("response", "")
            result["function_calls"] = handed.get("function_calls", [])
            for key in ("redactions", "decode_tokens"):
                if handed.get(key):
                    result[key] = handed[key]
            result["cloud_model"] = handed.get("cloud_model") or handed.get("model")
            result["time_to_first_token_ms"] = round((time.perf_counter() - t0) * 1000.0, 3)
            result["finish_reason"] = handed.get("finish_reason") or "stop"
        else:
            closing = constraint.closing if constraint is not None and constraint.done else ""
            text, reasoning = split_reasoning(opening + gen.text + closing)
            content, calls = self.tokenizer.parse_tool_calls(text, tools=tools)
            if markup is not None and (tail := markup.finish(has_calls=bool(calls))):
                on_token(tail)
            result["response"] = content
            if reasoning:
                result["reasoning_content"] = reasoning
            result["function_calls"] = calls
            result["decode_tokens"] = len(gen.tokens)
            result["time_to_first_token_ms"] = round(gen.time_to_first_token_ms, 3)
            result["decode_tps"] = round(len(gen.tokens) / gen.decode_s, 2) if gen.decode_s > 0 else 0.0
            result["finish_reason"] = "tool_calls" if calls else gen.finish_reason
        result["total_tokens"] = result["prefill_tokens"] + result["decode_tokens"]

    def _token_text(self, token: int) -> str:
        """One token's own text (for constrained decoding), cached per token."""
        cache = self.__dict__.setdefault("_token_texts", {})
        text = cache.get(token)
        if text is None:
            text = cache[token] = self.tokenizer.decode([token])
        return text

    # --- embeddings and scoring ---------------------------------------------------
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised embeddings ``(n, dim)``: the model's own pooling, else mean pooling."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise BadRequestError("embed() takes a list of strings")
        if hasattr(self.model, "embed"):
            return self.model.embed(self.tokenizer, list(texts))
        out = []
        for text in texts:
            ids = self.tokenizer.encode(text, add_special_tokens=True)[: self.context_length] or [0]
            self.generator.reset()
            h = self.model.forward(np.asarray([ids], dtype=np.int64), self.generator.cache)[0]
            self.generator.reset()
            out.append(h.mean(axis=0))
        v = np.stack(out).astype(np.float32)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    def rag_query(self, text: str, k: int = 4) -> list[dict]:
        """The ``k`` corpus chunks closest to ``text``, with their scores and sources."""
        if self.rag is None:
            raise BadRequestError("no corpus loaded; pass corpus_dir= to cactus.load")
        return self.rag.query(text, k)

    def logits(self, token_ids: Sequence[int]) -> np.ndarray:
        """Next-token logits at every position ``(len, vocab)`` in float32."""
        ids = [int(t) for t in token_ids]
        if not ids:
            raise BadRequestError("logits() needs at least one token id")
        if len(ids) > self.context_length:
            raise BadRequestError(f"{len(ids)} tokens exceed the context of {self.context_length}")
        if min(ids) < 0 or max(ids) >= self.model.vocab_size:
            raise BadRequestError(f"token ids must be in [0, {self.model.vocab_size})")
        gen = self.generator
        gen.reset()
        h = self.model.forward(np.asarray([ids], dtype=np.int64), gen.cache)
        gen.cached_ids = list(ids)
        return self.model.logits(h)[0].astype(np.float32)


def _empty_result(engine: Engine) -> dict:
    return {
        "success": True, "error": None, "response": "", "function_calls": [],
        "confidence": None, "confidence_threshold": None, "cloud_handoff": False,
        "cloud_handoff_reason": None, "time_to_first_token_ms": 0.0, "total_time_ms": 0.0,
        "prefill_tps": 0.0, "decode_tps": 0.0, "ram_usage_mb": 0.0, "prefill_tokens": 0,
        "decode_tokens": 0, "total_tokens": 0, "model": engine.name, "backend": engine.backend,
        "finish_reason": None, "tier": engine.name,
    }


def _openai_tool_choice(forced: Optional[str]) -> Any:
    """The engine's forced call ("" any tool, else a name) back in OpenAI's form, for a next tier."""
    if forced is None:
        return None
    return "required" if forced == "" else {"type": "function", "function": {"name": forced}}


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise BadRequestError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _float(value: Any, name: str, lo: float, hi: Optional[float] = None) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise BadRequestError(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(v) or v < lo or (hi is not None and v > hi):
        rng = f"in [{lo:g}, {hi:g}]" if hi is not None else f">= {lo:g}"
        raise BadRequestError(f"{name} must be {rng}, got {value!r}")
    return v


def _stops(stop: Any) -> tuple[str, ...]:
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,)
    if isinstance(stop, (list, tuple)) and all(isinstance(s, str) for s in stop):
        return tuple(stop)
    raise BadRequestError("stop must be a string or a list of strings")
