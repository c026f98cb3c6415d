"""What DDPG+HER and DQN+HER share: input normalization, targets, acting, state.

An agent is an ``nn.Module`` whose ``policy_modules`` (the normalizer and the acting
network) are all a saved policy needs, and whose ``training_modules`` add what resuming
a run needs (critics, target networks, optimizers).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from goalenvs.core import GOAL_KEYS
from goalenvs.her.config import TrainConfig
from goalenvs.her.normalizer import GoalNormalizer


def flat_size(space: spaces.Space) -> int:
    """Number of scalars in one sample of ``space``."""
    return int(np.prod(space.shape)) if space.shape else 1


class Agent(nn.Module):
    """Base of the HER agents: the normalizer, the discount and target clipping."""

    def __init__(
        self,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        config: TrainConfig,
        gamma: float,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.action_space = action_space
        self.gamma = float(gamma)
        # Rewards in [-1, 0] bound every return to [-1/(1-gamma), 0] (baselines' clip_return).
        self.clip_low = -1.0 / (1.0 - self.gamma) if config.clip_return else -float("inf")
        self.clip_high = 0.0 if config.clip_return else float("inf")
        self.normalizer = GoalNormalizer(
            flat_size(observation_space["observation"]),
            flat_size(observation_space["desired_goal"]),
            eps=config.norm_eps,
            clip=config.norm_clip,
            clip_obs=config.clip_obs,
        )
        self.rng = np.random.default_rng(seed)

    @property
    def device(self) -> torch.device:
        """Where the agent's tensors live."""
        return self.normalizer.obs.mean.device

    def inputs(self, observations: dict[str, Any]) -> torch.Tensor:
        """Normalized network inputs from a batched observation dict (arrays or tensors)."""
        tensors = {
            key: torch.as_tensor(
                np.asarray(observations[key], dtype=np.float32), device=self.device
            )
            if not isinstance(observations[key], torch.Tensor)
            else observations[key].to(self.device, torch.float32)
            for key in GOAL_KEYS
        }
        return self.normalizer(tensors)

    def targets(
        self, rewards: torch.Tensor, dones: torch.Tensor, next_values: torch.Tensor
    ) -> torch.Tensor:
        """Bellman targets ``r + gamma * (1 - done) * Q'``, clipped to the return range."""
        target = rewards + self.gamma * (1.0 - dones) * next_values
        return target.clamp(self.clip_low, self.clip_high)

    @torch.no_grad()
    def soft_update(self, target: nn.Module, online: nn.Module) -> None:
        """``target <- polyak * target + (1 - polyak) * online``."""
        for t, o in zip(target.parameters(), online.parameters(), strict=True):
            t.lerp_(o, 1.0 - self.config.polyak)

    def act(self, observations: dict[str, Any], explore: bool) -> np.ndarray:
        """Actions for a batch of observations; ``explore`` adds the training exploration."""
        raise NotImplementedError

    def update(self, batch: Any) -> dict[str, torch.Tensor]:
        """One gradient step on a HER batch; returns the losses as (detached) tensors."""
        raise NotImplementedError

    def update_targets(self) -> None:
        """Moves the target networks towards the online ones."""
        raise NotImplementedError

    def policy_modules(self) -> dict[str, nn.Module]:
        """The modules a saved policy needs to act."""
        raise NotImplementedError

    def training_modules(self) -> dict[str, Any]:
        """Everything else resuming training needs (modules and optimizers)."""
        raise NotImplementedError

    def gradient_parameters(self) -> list[nn.Parameter]:
        """Parameters trained by gradient descent (to check they match across workers)."""
        return [p for p in self.parameters() if p.requires_grad]
