"""The tokenizer of a model directory: HF ``tokenizers`` plus its chat template.

``Tokenizer.from_dir`` reads the same files ``transformers.AutoTokenizer`` does
(``tokenizer.json``, ``tokenizer_config.json``, ``chat_template.jinja``,
``special_tokens_map.json``, ``generation_config.json``) and reproduces its
``apply_chat_template`` byte for byte (see :mod:`cactus_core.chat_template`) and
its ``tokenize=True`` ids: the rendered prompt is encoded without adding special
tokens, because the template already wrote them.

Streaming output goes through :class:`StreamDecoder`, which only ever hands out
whole characters, even when one emoji or CJK character spans several tokens.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cactus_core.chat_template import (control_patterns, mark_control_tokens, render, template_literals,
                                       validate_messages, validate_tools)
from cactus_core.errors import BadRequestError, ModelLoadError
from cactus_core.tool_calls import STYLES, detect_style, parse_tool_calls, split_reasoning

__all__ = ["Tokenizer", "StreamDecoder", "parse_tool_calls", "split_reasoning",
           "validate_messages", "validate_tools"]

# The named special tokens transformers hands to every chat template.
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _read_json(path: Path, required: bool = False) -> dict:
    if not path.is_file():
        if required:
            raise ModelLoadError(f"{path} is missing")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelLoadError(f"{path.name} in {path.parent} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path.name} in {path.parent} must hold a JSON object")
    return data


def _token_text(value: Any) -> str | None:
    """Special tokens are stored as "<s>" or as a serialised AddedToken {"content": "<s>", ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


class Tokenizer:
    """A model's tokenizer and chat template, behaving like transformers' fast tokenizer."""

    def __init__(self, backend, config: dict | None = None, generation_config: dict | None = None,
                 special_tokens_map: dict | None = None, chat_template=None, tool_call_style: str | None = None,
                 name: str = "tokenizer"):
        self._tok = backend
        self.name = name
        config = config or {}
        legacy = special_tokens_map or {}
        self.special_tokens: dict[str, str] = {}
        for key in SPECIAL_TOKEN_NAMES:
            text = _token_text(config.get(key)) or _token_text(legacy.get(key))
            if text is not None:
                self.special_tokens[key] = text
        self.chat_template = chat_template if chat_template is not None else config.get("chat_template")
        self._chat_control_tokens = config.get("chat_control_tokens")
        if isinstance(self.chat_template, list):  # [{"name": ..., "template": ...}, ...]
            try:
                self.chat_template = {t["name"]: t["template"] for t in self.chat_template}
            except (TypeError, KeyError):
                raise ModelLoadError(f"{name}: chat_template list entries need 'name' and 'template'") from None
        if self.chat_template is not None and not isinstance(self.chat_template, (str, dict)):
            raise ModelLoadError(f"{name}: chat_template must be a string, got {type(self.chat_template).__name__}")

        bos = self.special_tokens.get("bos_token")
        self.bos_token_id = self._tok.token_to_id(bos) if bos else None
        if self.bos_token_id is None and isinstance((generation_config or {}).get("bos_token_id"), int):
            self.bos_token_id = generation_config["bos_token_id"]
        eos = (generation_config or {}).get("eos_token_id")
        ids = [eos] if isinstance(eos, int) else [i for i in (eos or []) if isinstance(i, int)]
        eos_text = self.special_tokens.get("eos_token")
        if eos_text and self._tok.token_to_id(eos_text) is not None:
            ids.append(self._tok.token_to_id(eos_text))
        self.eos_token_ids: list[int] = list(dict.fromkeys(ids))
        self.vocab_size: int = self._tok.get_vocab_size(with_added_tokens=True)
        self._special_ids = {i for i, t in self._tok.get_added_tokens_decoder().items() if t.special}

        if tool_call_style is None:
            templates = self.chat_template.values() if isinstance(self.chat_template, dict) else [self.chat_template]
            added = [t.content for t in self._tok.get_added_tokens_decoder().values()]
            tool_call_style = detect_style("\n".join(t for t in templates if t), added)
        if tool_call_style not in STYLES:
            raise ModelLoadError(f"unknown tool_call_style {tool_call_style!r}; use one of {', '.join(STYLES)}")
        self.tool_call_style: str = tool_call_style

    @classmethod
    def from_dir(cls, path, tool_call_style: str | None = None) -> "Tokenizer":
        """Load from a Hugging Face model directory."""
        from tokenizers import Tokenizer as HFTokenizer

        root = Path(path)
        if not root.is_dir():
            raise ModelLoadError(f"model directory {root} does not exist")
        tok_file = root / "tokenizer.json"
        if not tok_file.is_file():
            hint = (" (only a SentencePiece tokenizer.model is there; re-save it with transformers to get "
                    "tokenizer.json)" if (root / "tokenizer.model").is_file() else "")
            raise ModelLoadError(f"{root} has no tokenizer.json{hint}")
        try:
            backend = HFTokenizer.from_file(str(tok_file))
        except Exception as e:  # the Rust side raises a bare Exception with a long message
            raise ModelLoadError(f"{tok_file} could not be loaded: {str(e).splitlines()[0][:200]}") from None
        # Some tokenizer.json files (BERT exports) pin padding/truncation to 128; transformers
        # ignores those unless asked per call, and so do we: callers pad and truncate themselves.
        backend.no_padding()
        backend.no_truncation()
        config = _read_json(root / "tokenizer_config.json")
        template = None
        if (root / "chat_template.jinja").is_file():  # newer checkpoints keep it beside the config
            template = (root / "chat_template.jinja").read_text(encoding="utf-8")
        extra_dir = root / "additional_chat_templates"
        if extra_dir.is_dir():
            named = {p.stem: p.read_text(encoding="utf-8") for p in sorted(extra_dir.glob("*.jinja"))}
            if template is not None:
                named["default"] = template
            template = named or template
        return cls(backend, config=config, generation_config=_read_json(root / "generation_config.json"),
                   special_tokens_map=_read_json(root / "special_tokens_map.json"),
                   chat_template=template, tool_call_style=tool_call_style, name=root.name)

    # ------------------------------------------------------------ plain text

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``; added/special tokens written in the text are recognised."""
        if not isinstance(text, str):
            raise BadRequestError(f"text to encode must be a string, got {type(text).__name__}")
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """Text of ``ids`` (transformers skips its space clean-up for BPE models, and so do we)."""
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def is_special(self, token_id: int) -> bool:
        return token_id in self._special_ids

    # ------------------------------------------------------------ chat

    def _template_for(self, tools) -> str:
        t = self.chat_template
        if isinstance(t, dict):
            if tools and "tool_use" in t:
                return t["tool_use"]
            if "default" in t:
                return t["default"]
            raise ModelLoadError(f"{self.name} has several chat templates ({', '.join(sorted(t))}) "
                                 "and none named 'default'")
        if not t:
            raise ModelLoadError(f"{self.name} has no chat template (tokenizer_config.json 'chat_template' or "
                                 "chat_template.jinja); it is not a chat model, so use plain completion instead")
        return t

    def apply_chat_template(self, messages, tools=None, add_generation_prompt: bool = True,
                            documents=None, **extra) -> str:
        """Validate and render a conversation to the prompt text the model was trained on."""
        return self._render(messages, tools, add_generation_prompt, documents, extra, sanitize=False)[0]

    def encode_chat(self, messages, tools=None, add_generation_prompt: bool = True,
                    sanitize_control_tokens: bool = False, documents=None, **extra) -> list[int]:
        """Prompt token ids, exactly as transformers' ``apply_chat_template(tokenize=True)``.

        With ``sanitize_control_tokens`` (for untrusted input), control tokens written
        inside the request's strings are encoded as plain text, as transformers does
        with the same flag; only the template's own control tokens stay tokens.
        """
        text, source = self._render(messages, tools, add_generation_prompt, documents, extra,
                                    sanitize=sanitize_control_tokens)
        if not sanitize_control_tokens:
            return self.encode(text, add_special_tokens=False)
        return self._encode_marked(text, self._control_tokens(source))

    def _render(self, messages, tools, add_generation_prompt, documents, extra, sanitize):
        messages, tools = validate_messages(messages), validate_tools(tools)
        source = self._template_for(tools)
        if sanitize:
            pattern, _ = control_patterns(self._control_tokens(source))
            messages, tools, documents, extra = (mark_control_tokens(x, pattern)
                                                 for x in (messages, tools, documents, extra))
        text = render(source, messages, tools=tools, documents=documents, add_generation_prompt=add_generation_prompt,
                      special_tokens=self.special_tokens, **extra)
        return text, source

    def _control_tokens(self, source: str) -> tuple[str, ...]:
        """Special added tokens, plus the other added tokens the template itself writes (or the config lists)."""
        added = self._tok.get_added_tokens_decoder().values()
        if self._chat_control_tokens is not None:
            listed = set(self._chat_control_tokens)
            return tuple(t.content for t in added if t.special or t.content in listed)
        literals = template_literals(source)
        # Whitespace tokens (Gemma's "\n") appear in templates as ordinary text.
        return tuple(t.content for t in added if t.special or (t.content in literals and not t.content.isspace()))

    def _encode_marked(self, chat: str, control_tokens: tuple[str, ...]) -> list[int]:
        # split() gives [text, marked token, text, ...] with None for a stray marker.
        pieces = control_patterns(control_tokens)[1].split(chat)
        newline = self.encode("\n")
        ids = self.encode(pieces[0])
        for i, piece in enumerate(pieces[1:], start=1):
            if piece:
                ids += self._encode_piece(piece, as_text=i % 2 == 1, newline=newline)
        return ids

    def _encode_piece(self, piece: str, as_text: bool, newline: list[int]) -> list[int]:
        encode = self._encode_plain if as_text else self.encode
        # Encode after a newline so SentencePiece adds no word-start space mid-prompt, then drop it.
        ids = encode("\n" + piece)
        return ids[len(newline):] if ids[:len(newline)] == newline else encode(piece)

    def _encode_plain(self, text: str) -> list[int]:
        """Encode ignoring every added token, special or not: normaliser, pre-tokeniser, model."""
        tok = self._tok
        if tok.normalizer is not None:
            text = tok.normalizer.normalize_str(text)
        words = [w for w, _ in tok.pre_tokenizer.pre_tokenize_str(text)] if tok.pre_tokenizer is not None else [text]
        return [t.id for w in words for t in tok.model.tokenize(w)]

    def parse_tool_calls(self, text: str, tools=None, style: str | None = None) -> tuple[str, list[dict]]:
        """Split generated text into (response, function_calls) using this model's call format."""
        return parse_tool_calls(text, style or self.tool_call_style, tools=tools)

    def stream_decoder(self, skip_special_tokens: bool = True) -> "StreamDecoder":
        return StreamDecoder(self, skip_special_tokens=skip_special_tokens)


class StreamDecoder:
    """Incremental detokeniser: ``feed(id)`` returns only new, complete text.

    Decoding one token at a time is wrong twice over: a character split over
    byte tokens decodes to U+FFFD halves, and SentencePiece-style decoders drop
    a token's leading space at the start of a string.  So we decode a short window
    that starts a few tokens back (for context) and hand out only what it adds
    beyond the previous window, holding back while it ends in an incomplete
    character.  The concatenation of all pieces equals ``decode(all_ids)``.
    """

    # A UTF-8 character is at most 4 bytes, so 4+ held tokens still ending in U+FFFD
    # are genuinely invalid bytes, not a character in progress: let them out.
    MAX_HELD = 8

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = True):
        self._decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
        self._hidden = tokenizer.is_special if skip_special_tokens else (lambda token_id: False)
        self.ids: list[int] = []
        self._prefix = 0  # window start: context only, already emitted
        self._read = 0  # everything before this has been emitted

    def feed(self, token_id: int) -> str:
        """Add one token id; returns the text it completes (often '', never half a character)."""
        self.ids.append(int(token_id))
        return self._advance(final=False)

    def flush(self) -> str:
        """Whatever is still held back (e.g. a dangling partial character) at the end of generation."""
        return self._advance(final=True)

    def _advance(self, final: bool) -> str:
        if self._read == len(self.ids):
            return ""
        before = self._decode(self.ids[self._prefix:self._read])
        after = self._decode(self.ids[self._prefix:])
        held = len(self.ids) - self._read
        clean = after.startswith(before)
        if not final and held < self.MAX_HELD and (after.endswith("\ufffd") or not clean):
            return ""
        # A decoder that rewrote earlier text (only seen around invalid bytes) loses the
        # exact-concatenation property; give out the part that is new at least.
        cut = len(before) if clean else len(os.path.commonprefix([before, after]))
        new = after[cut:]
        # The next window starts where this chunk did (a character boundary), unless
        # the chunk is all skipped special tokens: a window's first visible token
        # loses its SentencePiece leading space, so it must be context, never new text.
        if not all(self._hidden(i) for i in self.ids[self._read:]):
            self._prefix = self._read
        self._read = len(self.ids)
        return new
