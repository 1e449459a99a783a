"""Tokenizer loading, encode/decode parity with transformers, streaming decode,
tool-call parsing and request validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import AddedToken, Tokenizer as HFTokenizer, decoders, models, normalizers, pre_tokenizers, \
    processors, trainers

from cactus_core.chat_template import validate_messages, validate_tools
from cactus_core.errors import BadRequestError, ModelLoadError
from cactus_core.tokenizer import Tokenizer, parse_tool_calls, split_reasoning

CORPUS = ["Hello world, this is a tiny corpus for a tiny tokenizer.", "The weather in Paris is sunny today.",
          "Streaming text must never break a character in half.", "def add(a, b): return a + b"]
# Characters the tiny vocabularies never saw: each must be spelled from several byte tokens.
TEXTS = ["Hello 🌞 world", "漢字とテスト ça va — ok", "👩‍👩‍👧 family: emoji sequences!", "  leading  spaces\nand\ttabs ",
         "mixed<|im_end|>special 🎉 tokens<|endoftext|>end", "a"]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def byte_level(path: Path, generation_config=None, template=TEMPLATE) -> Path:
    """GPT-2/Qwen-style byte-level BPE."""
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS * 3, trainers.BpeTrainer(
        vocab_size=330, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tok.add_tokens([AddedToken("<tool_call>", special=False, normalized=False)])
    return _save(path, tok, {"eos_token": "<|im_end|>", "bos_token": None, "pad_token": "<|endoftext|>",
                             "chat_template": template}, generation_config)


def byte_fallback(path: Path) -> Path:
    """Llama-2/Gemma-style SentencePiece BPE: '▁' for spaces, <0xNN> tokens for unseen bytes, BOS added."""
    tok = HFTokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.train_from_iterator(CORPUS * 3, trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"],
                                                            show_progress=False))
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    spec["model"].update(byte_fallback=True, unk_token="<unk>")
    tok = HFTokenizer.from_str(json.dumps(spec))
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    return _save(path, tok, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "chat_template": TEMPLATE},
                 {"bos_token_id": 1, "eos_token_id": [2, tok.token_to_id("<|im_end|>")]})


def _save(path: Path, tok, config: dict, generation_config=None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", **config}))
    if generation_config is not None:
        (path / "generation_config.json").write_text(json.dumps(generation_config))
    return path


@pytest.fixture(scope="module", params=["byte_level", "byte_fallback"])
def tok_dir(request, tmp_path_factory):
    build = {"byte_level": byte_level, "byte_fallback": byte_fallback}[request.param]
    return build(tmp_path_factory.mktemp(request.param))


# ---------------------------------------------------------------- parity with transformers

def test_encode_decode_match_transformers(tok_dir):
    transformers = pytest.importorskip("transformers")
    ct, hf = Tokenizer.from_dir(tok_dir), transformers.AutoTokenizer.from_pretrained(str(tok_dir))
    assert ct.vocab_size == len(hf)
    assert ct.bos_token_id == hf.bos_token_id
    assert hf.eos_token_id in ct.eos_token_ids
    for text in TEXTS:
        for special in (False, True):
            ids = ct.encode(text, add_special_tokens=special)
            assert ids == hf.encode(text, add_special_tokens=special)
            for skip in (False, True):
                assert ct.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)
    msgs = [{"role": "user", "content": "Hi 🌞"}]
    ids = ct.encode_chat(msgs)
    assert ids == list(hf.apply_chat_template(msgs, add_generation_prompt=True, return_dict=False))
    if ct.bos_token_id is not None:  # the template writes BOS; encoding must not add a second one
        assert ids.count(ct.bos_token_id) == 1


def test_special_ids_and_style(tmp_path):
    ct = Tokenizer.from_dir(byte_fallback(tmp_path / "bf"))
    assert ct.bos_token_id == 1
    assert ct.eos_token_ids == [2, ct.token_to_id("<|im_end|>")]  # generation_config list, config eos deduplicated
    assert ct.tool_call_style == "none" and ct.is_special(1) and not ct.is_special(ct.encode("a")[-1])
    ct = Tokenizer.from_dir(byte_level(tmp_path / "bl", generation_config={"eos_token_id": 0}))
    assert ct.eos_token_ids == [0, ct.token_to_id("<|im_end|>")] and ct.bos_token_id is None
    assert ct.tool_call_style == "qwen"  # from the <tool_call> added token
    assert Tokenizer.from_dir(tmp_path / "bl", tool_call_style="gemma").tool_call_style == "gemma"
    with pytest.raises(ModelLoadError, match="tool_call_style"):
        Tokenizer.from_dir(tmp_path / "bl", tool_call_style="mistral")


# ---------------------------------------------------------------- loading errors

def test_missing_and_broken_files(tmp_path):
    def one_line(exc_info):
        assert "\n" not in str(exc_info.value)
        return str(exc_info.value)

    with pytest.raises(ModelLoadError, match="does not exist") as e:
        Tokenizer.from_dir(tmp_path / "nope")
    one_line(e)
    (tmp_path / "sp").mkdir()
    (tmp_path / "sp" / "tokenizer.model").write_bytes(b"\0")
    with pytest.raises(ModelLoadError, match="no tokenizer.json.*tokenizer.model"):
        Tokenizer.from_dir(tmp_path / "sp")
    d = byte_level(tmp_path / "ok")
    (d / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="tokenizer_config.json .*not valid JSON") as e:
        Tokenizer.from_dir(d)
    one_line(e)
    (d / "tokenizer_config.json").write_text("{}")  # no chat template: plain text still works
    ct = Tokenizer.from_dir(d)
    assert ct.decode(ct.encode("Hello world")) == "Hello world"
    with pytest.raises(ModelLoadError, match="no chat template"):
        ct.apply_chat_template([{"role": "user", "content": "hi"}])
    (d / "tokenizer.json").write_text('{"model": 3}')
    with pytest.raises(ModelLoadError, match="could not be loaded") as e:
        Tokenizer.from_dir(d)
    one_line(e)


# ---------------------------------------------------------------- streaming

def stream(ct: Tokenizer, ids, skip=True) -> list[str]:
    dec = ct.stream_decoder(skip_special_tokens=skip)
    return [dec.feed(i) for i in ids] + [dec.flush()]


@pytest.mark.parametrize("skip", [True, False])
def test_stream_decode_never_splits_characters(tok_dir, skip):
    ct = Tokenizer.from_dir(tok_dir)
    split_chars = 0
    for text in TEXTS + ["".join(TEXTS)]:
        ids = ct.encode(text)
        pieces = stream(ct, ids, skip)
        full = ct.decode(ids, skip_special_tokens=skip)
        assert "".join(pieces) == full
        assert "\ufffd" not in full and not any("\ufffd" in p for p in pieces)
        split_chars += sum("\ufffd" in ct.decode([i]) for i in ids)
    assert split_chars > 10  # the texts really do spread characters over several tokens


def test_stream_decode_random_text(tok_dir):
    import random

    ct = Tokenizer.from_dir(tok_dir)
    rng = random.Random(0)
    alphabet = list("abc XYZ.,\n\t") + ["é", "ß", "中", "文", "字", "😀", "🌞", "👍🏽", "\u200d", "ê", "Ω", "<|im_end|>"]
    for _ in range(150):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        ids = ct.encode(text)
        for skip in (True, False):
            pieces = stream(ct, ids, skip)
            assert "".join(pieces) == ct.decode(ids, skip_special_tokens=skip), text
            assert not any("\ufffd" in p for p in pieces), text


def test_stream_decode_keeps_spaces_and_lets_invalid_bytes_out(tmp_path):
    ct = Tokenizer.from_dir(byte_fallback(tmp_path))
    ids = ct.encode("Hello world the weather")
    pieces = stream(ct, ids)
    assert "".join(pieces) == "Hello world the weather"
    # Each token comes out as soon as it arrives, with its SentencePiece space intact.
    spelled = [ct._tok.id_to_token(i).replace("▁", " ") for i in ids]
    assert pieces[1:-1] == spelled[1:] and pieces[0] == spelled[0].lstrip() and sum(" " in p for p in pieces) >= 2
    # A lone lead byte never completes: it must not hold back the rest of the stream forever.
    ids = [ct.token_to_id("<0xF0>")] + ct.encode(" the weather in Paris is sunny today") * 2
    dec = ct.stream_decoder()
    out = [dec.feed(i) for i in ids]
    assert "".join(out).strip() and "".join(out) + dec.flush() == ct.decode(ids, skip_special_tokens=True)
    # Dangling half character at the very end comes out on flush.
    dec = ct.stream_decoder()
    held = [dec.feed(i) for i in ct.encode("ok 🌞")[:-1]]
    assert "\ufffd" not in "".join(held) and dec.flush().endswith("\ufffd")


def test_stream_decoder_speed(tok_dir):
    ct = Tokenizer.from_dir(tok_dir)
    ids = ct.encode(" ".join(TEXTS) * 20)
    import time
    t = time.perf_counter()
    "".join(stream(ct, ids))
    per_token_us = (time.perf_counter() - t) / len(ids) * 1e6
    assert per_token_us < 500, per_token_us  # far below a decode step of any model


# ---------------------------------------------------------------- tool-call parsing

WEATHER = {"name": "get_weather", "arguments": {"city": "Paris"}}
ADD = {"name": "add", "arguments": {"a": 1, "b": -2.5}}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}]


@pytest.mark.parametrize("style,text,response,calls", [
    ("qwen", 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
     "Sure.", [WEATHER]),
    ("qwen", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
             '<tool_call>\n{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": -2.5}"}\n</tool_call>',
     "", [WEATHER, ADD]),
    ("qwen", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}', "", [WEATHER]),  # cut at EOS
    ("qwen", "<tool_call>\n{not json}\n</tool_call>", "<tool_call>\n{not json}\n</tool_call>", []),
    ("qwen", "No tools needed: 東京 🌞", "No tools needed: 東京 🌞", []),
    ("llama3", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|eom_id|>', "", [WEATHER]),
    ("llama3", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; '
               '{"name": "add", "parameters": {"a": 1, "b": -2.5}}', "", [WEATHER, ADD]),
    ("llama3", ' {"name": "get_weather", "parameters": {"city": "Paris"}} ', "", [WEATHER]),
    ("llama3", '<|python_tag|>brave_search.call(query="weather")',
     "", [{"name": "brave_search.call", "arguments": {"query": "weather"}}]),
    ("llama3", '{"answer": 42}', '{"answer": 42}', []),
    ("llama3", "The answer is 42.", "The answer is 42.", []),
    ("gemma", 'Let me look.\n```tool_code\nget_weather(city="Paris")\n```', "Let me look.", [WEATHER]),
    ("gemma", "```tool_code\nget_weather(city='Paris')\nadd(a=1, b=-2.5)\n```\nDone.", "Done.", [WEATHER, ADD]),
    ("gemma", "[get_weather(city='Paris'), add(a=1, b=-2.5)]", "", [WEATHER, ADD]),
    ("gemma", '```tool_code\nf(x=[1, {"k": None}], y=true, z=null, w=(1, 2))\n```', "",
     [{"name": "f", "arguments": {"x": [1, {"k": None}], "y": True, "z": None, "w": [1, 2]}}]),
    ("gemma", '{"name": "get_weather", "parameters": {"city": "Paris"}}', "", [WEATHER]),
    ("gemma", "```tool_code\n__import__('os').system('echo hacked')\n```",
     "```tool_code\n__import__('os').system('echo hacked')\n```", []),
    ("gemma", "```tool_code\nget_weather(city=open('/etc/passwd').read())\n```",
     "```tool_code\nget_weather(city=open('/etc/passwd').read())\n```", []),
    ("gemma", 'Here is code:\n```python\nprint("hi")\n```', 'Here is code:\n```python\nprint("hi")\n```', []),
    ("none", '<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>',
     '<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>', []),
])
def test_parse_tool_calls(style, text, response, calls):
    assert parse_tool_calls(text, style) == (response, calls)


def test_parse_tool_calls_with_schemas():
    # Positional python arguments map to parameters in schema order, but only with the schema.
    assert parse_tool_calls("```tool_code\nadd(1, -2.5)\n```", "gemma", tools=TOOLS)[1] == [ADD]
    assert parse_tool_calls("```tool_code\nadd(1, -2.5)\n```", "gemma")[1] == []
    # Unmarked calls to unknown tools are just text when the request's tools are known.
    bare = '{"name": "launch_rocket", "parameters": {}}'
    assert parse_tool_calls(bare, "llama3", tools=TOOLS) == (bare, [])
    assert parse_tool_calls(bare, "llama3")[1] == [{"name": "launch_rocket", "arguments": {}}]
    # Llama's <|python_tag|> is special, so a skip-special decode drops it: bare calls still parse.
    assert parse_tool_calls('get_weather(city="Paris")', "llama3", tools=TOOLS) == ("", [WEATHER])
    assert parse_tool_calls('print("Paris")', "llama3", tools=TOOLS) == ('print("Paris")', [])
    assert parse_tool_calls('get_weather(city="Paris")', "llama3")[1] == []
    with pytest.raises(ValueError, match="unknown tool-call style"):
        parse_tool_calls("x", "mistral")


def test_split_reasoning():
    assert split_reasoning("<think>\nhmm, 2+2\n</think>\n\n4") == ("4", "hmm, 2+2")
    assert split_reasoning("hmm</think>4") == ("4", "hmm")  # template already opened <think>
    assert split_reasoning("just an answer") == ("just an answer", None)


# ---------------------------------------------------------------- validation

U = {"role": "user", "content": "hi"}


@pytest.mark.parametrize("messages,match", [
    ("hi", "must be a list"),
    ([], "empty"),
    (["hi"], r"messages\[0\] must be an object"),
    ([{"content": "hi"}], r"messages\[0\].role is None"),
    ([{"role": "robot", "content": "hi"}], "'robot'"),
    ([{"role": "user"}], "has no content"),
    ([{"role": "assistant", "content": None}], "has no content"),
    ([{"role": "user", "content": 42}], "must be a string or a list of text parts"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "'image_url' part"),
    ([{"role": "user", "content": [{"type": "text", "text": 3}]}], r"content\[0\].text must be a string"),
    ([U, {"role": "assistant", "tool_calls": "get_weather"}], "tool_calls must be a non-empty list"),
    ([U, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"arguments": "{}"}}]}],
     "function.name"),
    ([U, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}],
     "arguments is not valid JSON"),
    ([U, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}],
     "must be a JSON object"),
    ([{"role": "user", "content": "x", "tool_calls": [{"function": {"name": "f"}}]}], "only assistant"),
    ([U, {"role": "tool", "content": "3", "tool_call_id": 7}], "tool_call_id must be a string"),
])
def test_bad_messages(messages, match):
    with pytest.raises(BadRequestError, match=match) as e:
        validate_messages(messages)
    assert "\n" not in str(e.value)


def test_messages_are_normalised_copies():
    msgs = [{"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": None, "reasoning": "r", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
                {"name": "g", "arguments": {"y": 2}}]}]
    out = validate_messages(msgs)
    assert out[0] == {"role": "system", "content": "a\nb"}
    assert out[1] == {"thinking": "r", "role": "assistant", "reasoning": "r", "reasoning_content": "r", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"x": 1}}, "id": "c"},
        {"type": "function", "function": {"name": "g", "arguments": {"y": 2}}}]}
    assert validate_messages(out) == out  # the engine validates, then the tokenizer again: idempotent
    assert msgs[1]["content"] is None and msgs[1]["tool_calls"][0]["function"]["arguments"] == '{"x": 1}'


def fn(name="f", **kw):
    return {"type": "function", "function": {"name": name, **kw}}


@pytest.mark.parametrize("tools,match", [
    ({"type": "function"}, "tools must be a list"),
    (["get_weather"], r"tools\[0\] must look like"),
    ([{"name": "f", "parameters": {}}], r"tools\[0\] must look like"),
    ([{"type": "retrieval", "function": {"name": "f"}}], r"tools\[0\] must look like"),
    ([fn(None)], "not a valid tool name"),
    ([fn("get weather")], "'get weather' is not a valid tool name"),
    ([fn("9lives")], "not a valid tool name"),
    ([fn("f"), fn("f")], "used by two tools"),
    ([fn(description=3)], "description must be a string"),
    ([fn(parameters="{}")], "parameters must be a JSON-schema object"),
    ([fn(parameters={"type": "array"})], "parameters.type must be 'object'"),
    ([fn(parameters={"type": "object", "properties": ["a"]})], "properties must map"),
    ([fn(parameters={"type": "object", "required": "a"})], "required must be a list"),
])
def test_bad_tools(tools, match):
    with pytest.raises(BadRequestError, match=match) as e:
        validate_tools(tools)
    assert "\n" not in str(e.value)


def test_good_tools():
    assert validate_tools(None) is None and validate_tools([]) is None
    out = validate_tools(TOOLS)
    assert out == TOOLS and out[0] is not TOOLS[0]
    assert validate_tools([fn("ns.get-thing_2")])[0]["function"]["name"] == "ns.get-thing_2"


@pytest.mark.parametrize("style, pieces, has_calls, shown", [
    ("qwen", ["Sure", ", here", " <tool", "_call>\n{\"name\": \"f\"}", "</tool_call>"], True, "Sure, here "),
    ("qwen", ["a <", "b is less"], False, "a <b is less"),  # a held '<' is released by what follows
    ("qwen", ["x <tool_c"], False, "x <tool_c"),  # held at the end, no call: released by finish
    ("llama3", [" {\"name\"", ": \"f\", \"parameters\": {}}"], True, ""),  # a whole-reply call
    ("llama3", ["[1] is", " a citation"], False, "[1] is a citation"),  # looked like one, was not
    ("llama3", ["ok <|python", "_tag|>{}"], True, "ok "),
    ("gemma", ["Calling:\n```tool_", "code\nf()\n```"], True, "Calling:\n"),
    ("none", ["<tool_call>", " stays"], False, "<tool_call> stays"),
])
def test_call_markup_filter(style, pieces, has_calls, shown):
    from cactus_core.tool_calls import CallMarkupFilter

    f = CallMarkupFilter(style)
    out = "".join(f.feed(p) for p in pieces) + f.finish(has_calls)
    assert out == shown
