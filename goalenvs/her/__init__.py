"""Hindsight Experience Replay: the reference replay buffer.

- :mod:`~goalenvs.her.buffer`: :class:`HerReplayBuffer`, the one buffer, on numpy or on a
  torch device (:class:`DeviceHerReplayBuffer`), with its state
  (:mod:`~goalenvs.her.buffer_state`) and its file (:mod:`~goalenvs.her.buffer_file`);
- :mod:`~goalenvs.her.settings`: its checked settings; :mod:`~goalenvs.her.common`: the
  batch it returns;
- :mod:`~goalenvs.her.goal_mix`: :class:`GoalMix`, where relabeled goals come from;
- :mod:`~goalenvs.her.sb3`: the stable-baselines3 adapter.

The algorithms live in :mod:`goalenvs.agents` and the training loop in
:mod:`goalenvs.train`. Importing this package stays light (numpy and gymnasium): torch is
imported only where a tensor is made, and stable-baselines3 only by :mod:`goalenvs.her.sb3`.
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
