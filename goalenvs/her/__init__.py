"""Hindsight Experience Replay: replay buffer, agents, trainer.

Importing this package stays light (numpy and gymnasium): torch is imported only where a
tensor is made, and stable-baselines3 only by :mod:`goalenvs.her.sb3`.
"""

from __future__ import annotations

import importlib
from typing import Any

from goalenvs.her.buffer import GoalSelectionStrategy, HerBatch, HerReplayBuffer

# The trainer's public names load on first use, so importing goalenvs.her stays free of torch.
_LAZY = {
    "train": "goalenvs.her.trainer",
    "TrainResult": "goalenvs.her.trainer",
    "TrainingError": "goalenvs.her.trainer",
    "DDPGConfig": "goalenvs.her.config",
    "DQNConfig": "goalenvs.her.config",
    "load_policy": "goalenvs.her.policy",
    "Policy": "goalenvs.her.policy",
    "CheckpointError": "goalenvs.her.checkpoint",
    "DeviceHerReplayBuffer": "goalenvs.her.device_buffer",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'goalenvs.her' has no attribute {name!r}")


__all__ = [
    "CheckpointError",
    "DDPGConfig",
    "DQNConfig",
    "DeviceHerReplayBuffer",
    "GoalSelectionStrategy",
    "HerBatch",
    "HerReplayBuffer",
    "Policy",
    "TrainResult",
    "TrainingError",
    "load_policy",
    "train",
]
