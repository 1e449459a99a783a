"""Sharpness-aware minimisation (training/sam.py, --sam): the perturbation is the normalised
gradient scaled to the radius, it is undone exactly, and the gradient it leaves is the one
taken at the perturbed point."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

torch = pytest.importorskip("torch")

from training import sam  # noqa: E402


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _loss(net, x, y):
    return ((net(x) - y) ** 2).mean()


def test_ascend_moves_by_rho_along_the_gradient_and_descend_restores():
    net, x, y = _net(), torch.randn(16, 4), torch.randn(16, 1)
    params = list(net.parameters())
    _loss(net, x, y).backward()
    before = [p.detach().clone() for p in params]
    grads = [p.grad.clone() for p in params]
    moves = sam.ascend(params, 0.1)
    step = torch.cat([(p.detach() - b).flatten() for p, b in zip(params, before)])
    g = torch.cat([gr.flatten() for gr in grads])
    assert abs(float(step.norm()) - 0.1) < 1e-5
    assert float(torch.nn.functional.cosine_similarity(step, g, dim=0)) > 0.9999
    sam.descend(params, moves)
    assert all(torch.allclose(p, b, atol=1e-7) for p, b in zip(params, before))


def test_gradient_left_is_the_one_at_the_perturbed_point():
    net, x, y = _net(), torch.randn(16, 4), torch.randn(16, 1)
    params = list(net.parameters())
    _loss(net, x, y).backward()
    moves = sam.ascend(params, 0.5)
    net.zero_grad()
    sharp = _loss(net, x, y)
    sharp.backward()
    at_perturbed = [p.grad.clone() for p in params]
    sam.descend(params, moves)
    assert all(torch.equal(p.grad, g) for p, g in zip(params, at_perturbed))
    with torch.no_grad():  # the ascent raised the loss: the point is sharper, not flatter
        assert float(sharp) > float(_loss(net, x, y))


def test_parameters_without_gradients_stay_put():
    net = _net()
    params = list(net.parameters())
    assert sam.ascend(params, 0.1) == []
    params[0].grad = torch.ones_like(params[0])
    moves = sam.ascend(params, 0.1)
    assert moves[1] is None and moves[0] is not None
