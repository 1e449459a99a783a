"""Sharpness-aware minimisation (SAM, Foret et al. 2021) for the training loop (`--sam RHO`).

Late in every stage the loss on trained tokens is 0.005-0.02 while validation loss stays
near 0.5: the model fits the training structures and generalises to unseen ones only as
far as the minimum it lands in is flat. The one lever that moved test single calls since
session 9 was a model soup, an average of weights, which is a flatness lever too. SAM asks
for flatness directly: each step takes its gradient at the worst point within an L2 ball of
radius RHO around the weights, found to first order as the step along the normalised
gradient, and applies it at the weights themselves. It costs a second forward and backward
pass per step.
"""
from __future__ import annotations


def ascend(params, rho: float) -> list:
    """Move every parameter to w + rho * g / ||g|| (g: its current .grad); returns the moves.

    The norm is over all gradients together, as in the paper's single-ball version."""
    import torch

    with torch.no_grad():
        grads = [p.grad for p in params if p.grad is not None]
        if not grads:
            return []
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads]))
        scale = rho / (norm + 1e-12)
        moves = []
        for p in params:
            if p.grad is None:
                moves.append(None)
                continue
            e = (p.grad.float() * scale).to(p.dtype)
            p.add_(e)
            moves.append(e)
    return moves


def descend(params, moves: list) -> None:
    """Undo ascend(): every parameter back to w, its .grad left as computed at w + e."""
    import torch

    with torch.no_grad():
        for p, e in zip(params, moves):
            if e is not None:
                p.sub_(e)
