"""Constrained decoding of Gemma's Python-style tool calls (cactus_core.constrain_python)."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import cactus_core as cactus
from cactus_core.constrain import CallWatcher
from cactus_core.constrain_python import PythonCall, PythonCallConstraint
from cactus_core.tool_calls import parse_tool_calls
from test_constrain import ALARM, TOOLS
from tinymodel import TEMPLATES, make_chat_model, train_tokenizer


def _ok(text: str) -> bool:
    state = PythonCall(TOOLS)
    return state.feed(text) and state.done


def test_calls_follow_names_keys_types_and_required():
    assert _ok('set_alarm(time="7", on=True, repeat=-3, volume=None)')
    assert _ok('set_alarm(time="7:30", days=["mon", "tue"], extra={"any": [1, False]}, volume=2.5e-1)')
    assert _ok('get_weather(city="Lisbon \\"old town\\"")')  # escapes inside strings
    assert _ok('set_alarm( time="7",  on=False)')  # spaces where Python allows them
    assert not _ok('set_alarms(time="7")')  # not an offered tool
    assert not _ok('get_weather(time="7")')  # not get_weather's parameter
    assert not _ok('set_alarm(on=True)')  # "time" is required
    assert not _ok('set_alarm(time=7)')  # a string parameter
    assert not _ok('set_alarm(time="7", repeat=1.5)')  # an integer parameter
    assert not _ok('set_alarm(time="7", on=Yes)')  # not a Python literal
    assert not _ok('set_alarm(time="7", time="8")')  # a keyword twice
    assert not _ok('set_alarm("7")')  # positional: the schema fixes no order
    assert not _ok("set_alarm(time='7')")  # steered to double quotes
    assert not _ok('get_weather(city="a\\/b")')  # a JSON escape that Python reads otherwise
    assert not _ok('set_alarm(time="7", days=["wed"])')  # enum
    assert not PythonCall(TOOLS).feed('set_alarm(time="7"))')  # nothing after the call


def test_a_model_that_wants_anything_still_writes_a_valid_python_call():
    """Random logits over a real byte-level BPE vocabulary: every walk ends, within a bounded
    number of tokens, in a call the gemma parser reads and that follows the tool's schema."""
    tok = train_tokenizer()
    texts = [tok.decode([i]) for i in range(tok.get_vocab_size())]
    rng = np.random.default_rng(0)
    for walk in range(40):
        prefix = "set_alarm(" if walk % 3 == 0 else ""
        constraint = PythonCallConstraint(prefix, TOOLS)
        out = prefix
        for _ in range(4000):
            token = int(np.argmax(constraint.mask(rng.normal(size=len(texts)), texts.__getitem__)))
            out += texts[token]
            constraint.advance(texts[token])
            if constraint.done:
                break
        assert constraint.done, out[-200:]
        rest, calls = parse_tool_calls("```tool_code\n" + out + constraint.closing, "gemma", tools=TOOLS)
        assert len(calls) == 1 and rest == "", out
        call = calls[0]
        params = ALARM if call["name"] == "set_alarm" else TOOLS[1]["function"]["parameters"]
        assert set(params["required"]) <= set(call["arguments"]) <= set(params["properties"])
        for key, value in call["arguments"].items():
            want = params["properties"][key].get("type")
            if want == "integer":
                assert isinstance(value, int) and not isinstance(value, bool)
            elif want == "string":
                assert isinstance(value, str)
            elif want == "boolean":
                assert isinstance(value, bool)


def test_watcher_constrains_tool_code_blocks_only():
    tok = train_tokenizer()
    texts = [tok.decode([i]) for i in range(tok.get_vocab_size())]
    watcher = CallWatcher(TOOLS, "```tool_code\n", constraint=PythonCallConstraint)
    logits = np.random.default_rng(1).normal(size=len(texts))
    for piece in ["Let me check.\n", "```tool_", "code\n"]:
        assert watcher.mask(logits, texts.__getitem__) is logits  # plain text is never touched
        watcher.advance(piece)
    masked = watcher.mask(logits, texts.__getitem__)
    allowed = [texts[i] for i in np.flatnonzero(np.isfinite(masked))]
    assert allowed and all("set_alarm".startswith(t) or "get_weather".startswith(t) for t in allowed)
    for piece in ['get_weather(city="Oslo")']:
        watcher.advance(piece)
    assert watcher.active is None  # the call is whole: the model closes the fence itself


@pytest.fixture(scope="module")
def gemma_engine(tmp_path_factory):
    """A random model whose chat template is Gemma's, so calls are ```tool_code blocks."""
    path = make_chat_model(tmp_path_factory.mktemp("gemma") / "m", max_positions=4096)
    with open(os.path.join(TEMPLATES, "gemma3_style.jinja"), encoding="utf-8") as f:
        template = f.read()
    cfg_path = os.path.join(path, "tokenizer_config.json")
    with open(cfg_path, encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["chat_template"] = template
    with open(cfg_path, "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    engine = cactus.load(path, backend="numpy_ref", context_length=4096)
    assert engine.tokenizer.tool_call_style == "gemma"
    yield engine
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_forced_gemma_call_from_an_untrained_model_parses(gemma_engine, choice):
    r = gemma_engine.complete([{"role": "user", "content": "hi"}], tools=TOOLS, max_tokens=3000,
                              tool_choice=choice, temperature=0.7, seed=3)
    assert r["success"] and r["finish_reason"] == "tool_calls", r
    (call,) = r["function_calls"]
    assert call["name"] in ("set_alarm", "get_weather")
    if isinstance(choice, dict):
        assert call["name"] == "get_weather" and isinstance(call["arguments"]["city"], str)
