"""Running mean/std normalization of observations and goals, as in OpenAI baselines' HER.

Statistics accumulate as float64 sums (sum, sum of squares, count). With several workers
each one adds its new sums into ``pending`` and :meth:`Normalizer.recompute` all-reduces
the pending sums before folding them in, so every worker normalizes identically
(:meth:`GoalNormalizer.recompute` does both normalizers' in one all-reduce)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from goalenvs.agents import distributed
from goalenvs.core import GOAL_KEYS


class Normalizer(nn.Module):
    """Normalizes vectors of ``size`` to ``clip((x - mean) / std, -clip, clip)``.
    ``std = sqrt(max(eps**2, E[x**2] - E[x]**2))``: the floor keeps constant inputs (a goal
    coordinate that never changes) from blowing up."""

    sum: torch.Tensor
    sumsq: torch.Tensor
    count: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    _pending: torch.Tensor

    def __init__(self, size: int, eps: float = 0.01, clip: float = 5.0) -> None:
        super().__init__()
        self.size, self.eps, self.clip = int(size), float(eps), float(clip)
        self.register_buffer("sum", torch.zeros(self.size, dtype=torch.float64))
        self.register_buffer("sumsq", torch.zeros(self.size, dtype=torch.float64))
        self.register_buffer("count", torch.zeros(1, dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(self.size))
        self.register_buffer("std", torch.ones(self.size))
        # Not saved: recompute() empties it. It lives beside the statistics, so tensors
        # collected on a device are summed there, with no host copy.
        self.register_buffer(
            "_pending", torch.zeros(2 * self.size + 1, dtype=torch.float64), persistent=False
        )

    def update(self, x: np.ndarray | torch.Tensor) -> None:
        """Adds a batch ``(..., size)`` (an array, or a tensor summed on its device) to the
        pending sums (applied by :meth:`recompute`)."""
        size = self.size
        if isinstance(x, torch.Tensor):
            rows = x.detach().to(self._pending.device, torch.float64).reshape(-1, size)
            sums = torch.cat(
                [rows.sum(dim=0), rows.square().sum(dim=0), rows.new_full((1,), len(rows))]
            )
        else:
            array = np.asarray(x, dtype=np.float64).reshape(-1, size)
            host = np.concatenate([array.sum(axis=0), np.square(array).sum(axis=0), [len(array)]])
            sums = torch.from_numpy(host).to(self._pending.device)
        self._pending += sums

    def recompute(self) -> None:
        """Folds the pending sums (summed over workers) into the statistics."""
        self.fold(distributed.all_reduce_sum(self.take_pending()))

    def take_pending(self) -> torch.Tensor:
        """The pending sums ``[sum, sum of squares, count]`` (a copy), emptying them."""
        pending = self._pending.clone()
        self._pending.zero_()
        return pending

    def fold(self, pending: torch.Tensor) -> None:
        """Adds sums laid out as :meth:`take_pending` gives them (every worker's, once
        all-reduced) to the statistics and recomputes the mean and std."""
        pending = pending.to(self.sum.device)
        self.sum += pending[: self.size]
        self.sumsq += pending[self.size : 2 * self.size]
        self.count += pending[-1]
        count = self.count.clamp(min=1.0)
        mean = self.sum / count
        var = (self.sumsq / count - mean.square()).clamp(min=self.eps**2)
        self.mean.copy_(mean.float())
        self.std.copy_(var.sqrt().float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The normalized, clipped ``x``."""
        return ((x - self.mean) / self.std).clamp(-self.clip, self.clip)


class GoalNormalizer(nn.Module):
    """Turns a goal observation dict into one normalized network input.
    The input is ``[observation, achieved_goal, desired_goal]``, the two goals sharing one
    normalizer (they live in the same space). Raw values are clipped to ``+-clip_obs``."""

    def __init__(
        self,
        obs_size: int,
        goal_size: int,
        eps: float = 0.01,
        clip: float = 5.0,
        clip_obs: float = 200.0,
    ) -> None:
        super().__init__()
        self.clip_obs = float(clip_obs)
        self.obs = Normalizer(obs_size, eps, clip)
        self.goal = Normalizer(goal_size, eps, clip)
        self.input_size = obs_size + 2 * goal_size

    def update(self, observations: dict[str, np.ndarray | torch.Tensor]) -> None:
        """Adds collected observations and goals (arrays or tensors ``(..., size)``) to the
        statistics."""
        clip = self.clip_obs
        for key, normalizer in self._parts():
            value = observations[key]
            if isinstance(value, torch.Tensor):
                normalizer.update(value.clamp(-clip, clip))
            else:
                normalizer.update(np.clip(value, -clip, clip))

    def recompute(self) -> None:
        """Applies the pending statistics of both normalizers, all-reduced together."""
        obs_pending = self.obs.take_pending()
        pending = torch.cat([obs_pending, self.goal.take_pending().to(obs_pending.device)])
        pending = distributed.all_reduce_sum(pending)
        self.obs.fold(pending[: len(obs_pending)])
        self.goal.fold(pending[len(obs_pending) :])

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(B, input_size)`` normalized inputs from a dict of ``(B, size)`` tensors."""
        clip = self.clip_obs
        parts = [n(observations[key].flatten(1).clamp(-clip, clip)) for key, n in self._parts()]
        return torch.cat(parts, dim=-1)

    def _parts(self) -> tuple[tuple[str, Normalizer], ...]:
        """Each key of the input (:data:`GOAL_KEYS`' order) with the normalizer it goes
        through."""
        return tuple(zip(GOAL_KEYS, (self.obs, self.goal, self.goal), strict=True))
