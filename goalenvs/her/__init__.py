"""Hindsight Experience Replay: the replay buffers.

- :mod:`~goalenvs.her.buffer`: :class:`HerReplayBuffer`, the numpy buffer;
- :mod:`~goalenvs.her.device_buffer`: :class:`DeviceHerReplayBuffer`, the same buffer with
  its storage and sampling on a torch device;
- :mod:`~goalenvs.her.sb3`: the stable-baselines3 adapter;
- :mod:`~goalenvs.her.settings` and :mod:`~goalenvs.her.common`: what both buffers share;
- :mod:`~goalenvs.her.goal_mix`: :class:`GoalMix`, where relabeled goals come from.

The algorithms live in :mod:`goalenvs.agents` and the training loop in
:mod:`goalenvs.train`. Importing this package stays light (numpy and gymnasium): torch is
imported only where a tensor is made, and stable-baselines3 only by :mod:`goalenvs.her.sb3`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from goalenvs.her.buffer import HerReplayBuffer
from goalenvs.her.common import HerBatch
from goalenvs.her.goal_mix import GoalMix
from goalenvs.her.settings import GoalSelectionStrategy

if TYPE_CHECKING:
    from goalenvs.her.device_buffer import DeviceHerReplayBuffer

__all__ = [
    "DeviceHerReplayBuffer",
    "GoalMix",
    "GoalSelectionStrategy",
    "HerBatch",
    "HerReplayBuffer",
]


def __getattr__(name: str) -> object:
    # The device buffer is torch's: imported on first use, so that the numpy buffer
    # works where torch is not installed.
    if name == "DeviceHerReplayBuffer":
        from goalenvs.her.device_buffer import DeviceHerReplayBuffer

        return DeviceHerReplayBuffer
    raise AttributeError(f"module 'goalenvs.her' has no attribute {name!r}")
