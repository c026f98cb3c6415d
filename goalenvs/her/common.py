"""The batch a HER buffer's ``sample`` returns: :class:`HerBatch`."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["HerBatch"]


class HerBatch(NamedTuple):
    """A sampled batch; arrays (or tensors) have leading dimension ``batch_size``.

    ``observations["desired_goal"]`` and ``next_observations["desired_goal"]`` hold the
    (possibly relabeled) goal, ``rewards`` (float32) are the rewards for that goal, and
    ``dones`` (float32) is 1.0 where the target must not bootstrap (an n-step buffer's
    ``rewards`` are the discounted sums of its returns, with ``discounts`` beside them:
    the target is ``rewards + discounts * (1 - dones) * Q'``). Discrete actions come
    as int64 of shape ``(batch_size,)``. ``weights`` and ``indices`` serve prioritized
    replay (ones and the sampled indices for a uniform buffer, so agents can always use
    them).

    Every ``sample`` returns fresh arrays (or tensors), which no later call writes into.
    """

    observations: dict[str, Any]
    actions: Any
    rewards: Any
    next_observations: dict[str, Any]
    dones: Any
    #: Importance-sampling weights (float32), normalized by the batch's largest weight;
    #: all ones unless the buffer is ``prioritized``. Multiply the per-sample losses by them.
    weights: Any = None
    #: The transitions' storage indices (int64): pass them back to ``update_priorities``.
    indices: Any = None
    #: Per transition, the discount of the bootstrapped value: ``gamma ** m`` for the ``m``
    #: steps an n-step return summed (float32); None for one-step transitions, whose
    #: discount is the agent's ``gamma``.
    discounts: Any = None
