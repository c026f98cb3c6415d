"""Loss helpers every agent shares."""

from __future__ import annotations

import torch


def weighted_mean(values: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``mean(weights * values)``: prioritized replay's importance-weighted loss; the plain
    mean when ``weights`` is None."""
    if weights is None:
        return values.mean()
    return (weights.to(values.dtype) * values).mean()
