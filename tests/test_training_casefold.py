"""The case-fold drill (datagen.casefold_drill, --casefold): off by default without a draw,
training-only when on, and it only capitalises the first letter of a copied value in the
request, leaving the calls as they are."""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import datagen  # noqa: E402

from test_training_compose import SPLITS, _gen  # noqa: E402


def _call(name: str, **args) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": args}}


def test_off_by_default_draws_nothing(tmp_path, monkeypatch):
    plain = _gen(tmp_path / "plain")

    def boom(*a, **k):
        raise AssertionError("casefold drawn while off")

    monkeypatch.setattr(datagen, "casefold_drill", boom)
    assert _gen(tmp_path / "zero", casefold=0.0) == plain


def test_training_only(tmp_path):
    plain, drilled = _gen(tmp_path / "plain"), _gen(tmp_path / "cf", casefold=0.5)
    assert drilled["val"] == plain["val"] and drilled["test"] == plain["test"]
    assert drilled["train"] != plain["train"]


def test_capitalises_one_copied_value_only():
    calls = [_call("set_lights", room="workshop", state="off")]
    assert datagen.casefold_drill("turn off the workshop lights", calls, random.Random(0)) == \
        "turn off the Workshop lights"
    # closed classes, already capitalised values and values inside other words are left alone
    assert datagen.casefold_drill("lights off today", [_call("get_calendar", day="today")],
                                  random.Random(0)) == "lights off today"
    assert datagen.casefold_drill("text Maria hi", [_call("send_message", recipient="Maria", message="hi")],
                                  random.Random(0)) == "text Maria Hi"
    assert datagen.casefold_drill("the workshops lights", calls, random.Random(0)) == "the workshops lights"
    items = [_call("add_to_shopping_list", items=["eggs", "milk"])]
    out = datagen.casefold_drill("add eggs and milk", items, random.Random(1))
    assert out in ("add Eggs and milk", "add eggs and Milk")


def test_drilled_requests_differ_only_in_case(tmp_path):
    datagen.generate(tmp_path / "d", seed=5, n_train=400, n_val=10, casefold=1.0)
    changed = 0
    for line in (tmp_path / "d" / "train.jsonl").read_text().splitlines():
        msgs = json.loads(line)["messages"]
        for m, nxt in zip(msgs, msgs[1:]):
            if m["role"] != "user" or not nxt.get("tool_calls"):
                continue
            for c in nxt["tool_calls"]:  # every copied value is still in the request, up to its first letter
                for k, v in c["function"]["arguments"].items():
                    for val in v if isinstance(v, list) else [v]:
                        if isinstance(val, str) and k not in datagen._CASEFOLD_SKIP and val[:1].islower() \
                                and val in m["content"].lower():
                            changed += (val[0].upper() + val[1:]) in m["content"]
    assert changed > 100
