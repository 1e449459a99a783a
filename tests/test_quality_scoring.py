"""benchmarks/quant_quality_spine.py scores what the model generates: each scored turn
ends at its end-of-turn token.  The template's newline after ``<|im_end|>`` is never
generated (decoding stops at the end-of-turn token) and models/spine was never taught it
(NLL ~10), so when it was scored it carried over 99% of every row's KL (session 12)."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bench():
    spec = importlib.util.spec_from_file_location("quant_quality_spine",
                                                  os.path.join(ROOT, "benchmarks", "quant_quality_spine.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_end_of_turn_includes_the_eos_token_and_nothing_after():
    end_of_turn = _bench().end_of_turn
    assert end_of_turn([5, 6, 7, 2, 9], 1, [2]) == 4  # through the eos token at 3
    assert end_of_turn([5, 2, 7, 2, 9], 2, [2]) == 4  # the first eos from start on
    assert end_of_turn([5, 6, 7], 0, [2]) == 3  # no eos: the whole turn


def test_scored_turns_of_the_default_model_end_at_their_end_of_turn_token():
    import cactus_core as cactus

    if not os.path.isfile(os.path.join(ROOT, "models", "spine", "config.json")):
        pytest.skip("models/spine is not in this checkout")
    bench = _bench()
    engine = cactus.load(os.path.join(ROOT, "models", "spine"), backend="numpy_ref")
    segments = bench.heldout_segments(engine, n=12)
    assert len(segments) >= 10
    eos = set(engine.tokenizer.eos_token_ids)
    for ids, pos in segments:
        assert ids[pos[-1]] in eos  # the last scored token is the end of the turn
        assert not eos & {ids[p] for p in pos[:-1]}  # and only the last
        assert np.all(np.diff(pos) == 1)


def _quality():
    """benchmarks/quant_quality.py (MiniLM and the default model in one table)."""
    spec = importlib.util.spec_from_file_location("quant_quality", os.path.join(ROOT, "benchmarks", "quant_quality.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_table_row_with_a_default_model_column_names_a_spine_row():
    rows = _quality().DEFAULT_MODEL_ROWS
    assert set(rows) >= {"CQ4", "CQ3", "CQ2", "CQ3.26", "CQ2.54", "GPTQ-4 g128", "RTN int4 g128",
                         "MLX affine 4-bit g64"}
    missing = [r for r in rows.values() if r not in _bench().ROWS]
    assert not missing


def test_the_default_model_columns_come_from_a_real_conversion_and_score():
    if not os.path.isfile(os.path.join(ROOT, "models", "spine", "config.json")):
        pytest.skip("models/spine is not in this checkout")
    got = _quality().default_model_rows(os.path.join(ROOT, "models", "spine"), ["RTN int4 g128", "CQ4 +feedback"])
    assert list(got) == ["RTN int4 g128"]  # "CQ4 +feedback" is MiniLM's only
    r = got["RTN int4 g128"]
    assert 4.0 < r["bpw"] < 5.0
    assert 0.0 < r["kl_mean"] < 1.0 and r["tokens"] > 10000
    assert abs(r["perplexity_delta_pct"]) < 20.0
