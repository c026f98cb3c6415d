"""Hindsight Experience Replay: replay buffer, agents, trainer."""

from __future__ import annotations

import importlib
from typing import Any

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
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'goalenvs.her' has no attribute {name!r}")


__all__ = sorted(_LAZY)
