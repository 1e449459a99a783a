"""The committed default model (models/spine) loads with transformers and calls a tool."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPINE = ROOT / "models" / "spine"
sys.path.insert(0, str(ROOT))  # training/ is a folder of scripts, not an installed package

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from training.chat_format import parse_tool_calls, render  # noqa: E402
from training.tools import TOOLS  # noqa: E402


@pytest.fixture(scope="module")
def spine():
    if not (SPINE / "config.json").exists():
        pytest.skip("models/spine is not present")
    tok = transformers.AutoTokenizer.from_pretrained(str(SPINE))
    model = transformers.AutoModelForCausalLM.from_pretrained(str(SPINE), dtype=torch.float32).eval()
    return tok, model


def test_checkpoint_files_and_size():
    files = {p.name: p.stat().st_size for p in SPINE.iterdir()}
    for need in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json"):
        assert need in files, need
    assert sum(files.values()) <= 25 * 1024 * 1024
    cfg = json.loads((SPINE / "config.json").read_text())
    assert cfg["model_type"] == "qwen3" and cfg["architectures"] == ["Qwen3ForCausalLM"]
    assert cfg["tie_word_embeddings"] is True
    gen = json.loads((SPINE / "generation_config.json").read_text())
    assert cfg["eos_token_id"] in gen["eos_token_id"]


def test_chat_template_renders_tools_like_qwen3(spine):
    tok, _ = spine
    tools = [TOOLS["set_alarm"], TOOLS["get_weather"]]
    msgs = [{"role": "user", "content": "wake me at 6"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "set_alarm", "arguments": {"time": "06:00"}}}]},
            {"role": "tool", "content": "{\"status\": \"ok\"}"}]
    text = tok.apply_chat_template(msgs, tools=tools, tokenize=False, add_generation_prompt=True)
    assert text == render(msgs, tools, add_generation_prompt=True)
    assert "# Tools" in text and "<tools>\n{" in text
    assert '<tool_call>\n{"name": "set_alarm", "arguments": {"time": "06:00"}}\n</tool_call><|im_end|>' in text
    assert "<|im_start|>user\n<tool_response>\n{\"status\": \"ok\"}\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_greedy_tool_call(spine):
    tok, model = spine
    tools = [TOOLS["get_weather"], TOOLS["set_alarm"], TOOLS["send_message"]]
    prompt = tok.apply_chat_template([{"role": "user", "content": "Set an alarm for 7:30 am"}], tools=tools,
                                     tokenize=False, add_generation_prompt=True)
    ids = tok(prompt, return_tensors="pt", add_special_tokens=False)
    eos = [tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")]
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=40, do_sample=False, eos_token_id=eos, pad_token_id=eos[1])
    text = tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=False)
    calls, ok = parse_tool_calls(text)
    assert ok and len(calls) == 1, text
    assert calls[0]["name"] == "set_alarm"
    assert calls[0]["arguments"].get("time") == "07:30", text


def test_streamed_text_never_shows_call_markup():
    """With tools, complete(on_token=...) streams plain answers piece by piece but withholds
    the <tool_call> markup: the call comes back parsed instead."""
    import cactus_core as cactus

    engine = cactus.load(str(SPINE), backend="numpy_ref")
    tools = [TOOLS["set_alarm"], TOOLS["get_weather"], TOOLS["send_message"]]
    pieces: list[str] = []
    r = engine.complete([{"role": "user", "content": "Set an alarm for 7:30 am"}], tools=tools,
                        max_tokens=40, on_token=pieces.append)
    assert r["function_calls"] and r["function_calls"][0]["name"] == "set_alarm"
    assert "<tool" not in "".join(pieces) and "set_alarm" not in "".join(pieces)
    pieces.clear()
    r = engine.complete([{"role": "user", "content": "What is 23 plus 19?"}], tools=tools,
                        max_tokens=40, on_token=pieces.append)
    assert not r["function_calls"] and len(pieces) > 1
    assert "".join(pieces).strip() == r["response"].strip()


def test_tool_choice_is_enforced():
    """'required' and a named function are enforced by opening the call: the model answers
    arithmetic in text when free to, and with a call (the named one) when it is not."""
    import cactus_core as cactus

    engine = cactus.load(str(SPINE), backend="numpy_ref")
    tools = [TOOLS["set_alarm"], TOOLS["get_weather"]]
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    free = engine.complete([{"role": "user", "content": "What is 23 plus 19?"}], tools=tools, max_tokens=40)
    assert free["success"] and not free["function_calls"]
    forced = engine.complete([{"role": "user", "content": "What is 23 plus 19?"}], tools=tools, max_tokens=40,
                             tool_choice="required")
    assert forced["success"] and len(forced["function_calls"]) >= 1, forced["response"]
    assert forced["function_calls"][0]["name"] in {"set_alarm", "get_weather"}
    named = engine.complete(ask, tools=tools, max_tokens=40, tool_choice={"type": "function",
                                                                          "function": {"name": "set_alarm"}})
    assert [c["name"] for c in named["function_calls"]] == ["set_alarm"] and named["finish_reason"] == "tool_calls"
    assert engine.complete(ask, tools=tools, max_tokens=40, tool_choice="none")["function_calls"] == []
    for bad, why in [("required", "needs tools"), ({"type": "function", "function": {"name": "nope"}}, "not among"),
                     ("sometimes", "must be")]:
        r = engine.complete(ask, tools=None if bad == "required" else tools, tool_choice=bad)
        assert not r["success"] and why in r["error"] and "\n" not in r["error"]
