"""Loss helpers every agent shares."""

from __future__ import annotations

import torch


def weighted_mean(values: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``mean(weights * values)``: prioritized replay's importance-weighted loss; the plain
    mean when ``weights`` is None."""
    return values.mean() if weights is None else (weights.to(values.dtype) * values).mean()


def twin_critic_loss(
    q1: torch.Tensor, q2: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None
) -> torch.Tensor:
    """``(Q1 - y)^2 + (Q2 - y)^2``, each term :func:`weighted_mean`-ed: the loss of twin
    critics (TD3, SAC) against one target ``y``."""
    return weighted_mean((q1 - target).square(), weights) + weighted_mean(
        (q2 - target).square(), weights
    )
