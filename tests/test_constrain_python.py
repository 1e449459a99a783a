"""Constrained decoding of Gemma's Python-style tool calls (cactus_core.constrain_python);
the engine-level forced-call tests in test_constrain.py run a Gemma-style model too."""
from __future__ import annotations

import numpy as np

from cactus_core.constrain import CallWatcher
from cactus_core.constrain_python import PythonCall, PythonCallConstraint
from cactus_core.tool_calls import parse_tool_calls
from test_constrain import TOOLS, assert_follows_schema
from tinymodel import train_tokenizer


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
        assert_follows_schema(calls[0])


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
