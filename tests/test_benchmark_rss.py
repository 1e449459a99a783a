"""benchmarks/vs_llamacpp.py measures a child's own peak RSS, not the benchmark process's."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def vs():
    spec = importlib.util.spec_from_file_location("vs_llamacpp", ROOT / "benchmarks" / "vs_llamacpp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(sys.platform != "linux", reason="the carried high-water mark is Linux's exec behaviour")
def test_child_peak_is_its_own_not_the_parents(vs):
    held = np.ones(400 << 17)  # 400 MB resident in this process
    held += 1
    out, small = vs.timed_child([sys.executable, "-c", "print('hi')"])
    assert out.strip() == "hi"
    assert small < 100, small  # a bare interpreter, not this process's 400 MB and more
    _, big = vs.timed_child([sys.executable, "-c", "b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096])"])
    assert 300 < big < 400, big
    del held


def test_a_failing_child_is_one_clear_error(vs):
    with pytest.raises(RuntimeError, match="failed"):
        vs.timed_child([sys.executable, "-c", "import sys; sys.exit('no model file')"])
