"""The format contract: Hadamard, sign generator, bit packing, validation, serialisation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.errors import ModelLoadError
from cactus_core.formats import (
    QUANTIZED_FORMATS,
    CQTensor,
    FormatError,
    from_manifest,
    hadamard,
    pack_bits,
    random_signs,
    splitmix64,
    unpack_bits,
)
from cactus_quant import cq_quantize, rtn_quantize


@pytest.mark.parametrize("block", [1, 2, 32, 128])
def test_hadamard_is_orthonormal_and_matches_numpy_ref(block):
    h = hadamard(np.eye(block, dtype=np.float32), block)
    np.testing.assert_allclose(h @ h.T, np.eye(block), atol=1e-6)
    np.testing.assert_allclose(h, h.T, atol=0)  # symmetric, hence its own inverse
    x = np.random.default_rng(0).standard_normal((2, 3, 256)).astype(np.float32)
    np.testing.assert_array_equal(hadamard(x, block), NumpyBackend().hadamard(x, block))


def test_hadamard_sylvester_order():
    # row i of H_4 has sign (-1)^popcount(i & j) at column j
    expect = np.array([[(-1) ** bin(i & j).count("1") for j in range(4)] for i in range(4)]) / 2
    np.testing.assert_allclose(hadamard(np.eye(4, dtype=np.float32), 4), expect)


def test_hadamard_rejects_bad_blocks():
    with pytest.raises(FormatError):
        hadamard(np.zeros((2, 96), np.float32), 64)


def test_splitmix64_reference_values():
    # published outputs of SplitMix64 (Vigna's reference C code)
    assert [hex(int(v)) for v in splitmix64(0, 3)] == [
        "0xe220a8397b1dcdaf",
        "0x6e789e6aa1b965f4",
        "0x6c45d188009454f",
    ]
    assert [int(v) for v in splitmix64(1234567, 2)] == [6457827717110365317, 3203168211198807973]
    assert random_signs(0, 3).tolist() == [1, 0, 0]  # top bits of the above


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 6, 8])
def test_pack_bits_round_trip_and_layout(bits):
    codes = np.random.default_rng(bits).integers(0, 1 << bits, (5, 48))
    packed = pack_bits(codes, bits)
    assert packed.shape == (5, 48 * bits // 8) and packed.dtype == np.uint8
    np.testing.assert_array_equal(unpack_bits(packed, bits, 48), codes)
    if bits == 4:  # low nibble first
        np.testing.assert_array_equal(packed[:, 0], codes[:, 0] | (codes[:, 1] << 4))
    if bits == 3:  # 8 codes = one little-endian 24-bit word
        word = int(packed[0, 0]) | int(packed[0, 1]) << 8 | int(packed[0, 2]) << 16
        assert [(word >> (3 * j)) & 7 for j in range(8)] == codes[0, :8].tolist()


def _roundtrip(qt, tmp_path):
    """Write like a bundle (safetensors + cactus.json entry) and load back."""
    save_file(qt.named_arrays("layer.w"), str(tmp_path / "model.safetensors"))
    (tmp_path / "cactus.json").write_text(json.dumps({"layer.w": qt.manifest_entry()}))
    entry = json.loads((tmp_path / "cactus.json").read_text())["layer.w"]
    stored = load_file(str(tmp_path / "model.safetensors"))
    fields = {k.split(".")[-1]: v for k, v in stored.items()}
    for a in fields.values():
        a.setflags(write=False)  # bundles hand out read-only memory maps
    return QUANTIZED_FORMATS[entry["format"]](entry["shape"], entry["meta"], **fields)


@pytest.mark.parametrize("kind", ["cq4", "cq3", "cq2", "int4", "int8"])
def test_serialisation_round_trip(kind, tmp_path):
    w = np.random.default_rng(1).standard_normal((40, 256)).astype(np.float32)
    if kind.startswith("cq"):
        from cactus_quant.cq import PRESETS

        qt = cq_quantize(w, **PRESETS[int(kind[-1])])
    else:
        qt = rtn_quantize(w, int(kind[-1]))
    back = _roundtrip(qt, tmp_path)
    assert type(back) is type(qt) and back.shape == qt.shape and back.meta == qt.meta
    np.testing.assert_array_equal(back.dequantize(), qt.dequantize())
    x = np.random.default_rng(2).standard_normal((3, 256)).astype(np.float32)
    np.testing.assert_array_equal(NumpyBackend().linear(x, back), NumpyBackend().linear(x, qt))
    assert from_manifest(qt.manifest_entry(), qt.arrays).format == qt.format


def test_bad_fields_give_one_line_errors():
    w = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    qt = cq_quantize(w, 8, 2)
    arrays = dict(qt.arrays, scales=qt.arrays["scales"].astype(np.float32))
    with pytest.raises(ModelLoadError, match="field 'scales'"):
        CQTensor(qt.shape, qt.meta, **arrays)
    with pytest.raises(ModelLoadError, match="missing its 'signs'"):
        CQTensor(qt.shape, qt.meta, **{k: v for k, v in qt.arrays.items() if k != "signs"})
    with pytest.raises(ModelLoadError, match="block_size"):
        CQTensor(qt.shape, dict(qt.meta, block_size=48), **qt.arrays)
    with pytest.raises(ModelLoadError, match="unknown quantized format 'nf4'"):
        from_manifest({"format": "nf4", "shape": [8, 64]}, {})
