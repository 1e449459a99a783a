"""training.crossed: single-call requests with one split's phrasings and another's entities."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # training/ is a folder of scripts, not an installed package

from training.crossed import crossed  # noqa: E402
from training.lexicon import split_lists  # noqa: E402


def _calls(path: Path) -> list[dict]:
    """The last call of each conversation (its single-call request's answer)."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert all(r["category"] == "single" for r in rows)
    return [[m for m in r["messages"] if m.get("tool_calls")][-1]["tool_calls"][0]["function"] for r in rows]


def test_each_crossing_takes_its_values_from_the_entity_split(tmp_path):
    counts = crossed(tmp_path, n=150, seed=1)
    splits = ("train", "val", "test")
    assert counts == {f"{t}-{e}": 150 for t in splits for e in splits}
    cities = {s: set(split_lists()[s]["cities"]) for s in splits}
    for pair in counts:
        entities = pair.split("-")[1]
        places = [c["arguments"]["location"] for c in _calls(tmp_path / pair / "val.jsonl")
                  if c["name"] == "get_weather" and "location" in c["arguments"]]
        assert places, pair  # weather requests with a city turn up in 150 draws
        assert all(p in cities[entities] and not any(p in cities[o] for o in splits if o != entities)
                   for p in places), pair
    again = crossed(tmp_path / "again", n=150, seed=1)  # reproducible from the seed
    assert again == counts
    for pair in counts:
        assert (tmp_path / pair / "val.jsonl").read_bytes() == (tmp_path / "again" / pair / "val.jsonl").read_bytes()
