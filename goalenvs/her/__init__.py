"""Hindsight Experience Replay: the reference replay buffer.

:class:`HerReplayBuffer` (:mod:`~goalenvs.her.buffer`, on numpy or a torch device), its
settings, state and file beside it, :class:`GoalMix` (where relabeled goals come from) and
the stable-baselines3 adapter (:mod:`~goalenvs.her.sb3`). Importing this package stays
light: torch is imported only where a tensor is made, stable-baselines3 only by the adapter.
"""

from __future__ import annotations

from goalenvs.her.buffer import DeviceHerReplayBuffer, HerReplayBuffer
from goalenvs.her.common import HerBatch
from goalenvs.her.goal_mix import GoalMix
from goalenvs.her.settings import GoalSelectionStrategy

__all__ = [
    "DeviceHerReplayBuffer",
    "GoalMix",
    "GoalSelectionStrategy",
    "HerBatch",
    "HerReplayBuffer",
]
