"""The batch a HER buffer's ``sample`` returns: :class:`HerBatch`."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["HerBatch"]


class HerBatch(NamedTuple):
    """A sampled batch of fresh arrays (or tensors), leading dimension ``batch_size``; each
    field is in docs/buffer.md's table. The target is ``rewards + gamma * (1 - dones) * Q'``
    (``discounts`` in place of ``gamma`` after an n-step return)."""

    observations: dict[str, Any]
    actions: Any
    rewards: Any
    next_observations: dict[str, Any]
    dones: Any
    weights: Any = None  # importance-sampling weights, max 1; ones unless prioritized
    indices: Any = None  # storage indices (int64), for update_priorities
    discounts: Any = None  # gamma ** steps summed (n-step); None for one-step transitions
