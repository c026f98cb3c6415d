"""Hindsight Experience Replay: the replay buffers (numpy, on-device, the SB3 adapter).

The agents live in :mod:`goalenvs.agents` and the training loop in :mod:`goalenvs.train`;
their old paths (``goalenvs.her.trainer``, ``goalenvs.her.ddpg``, ...) keep working as
aliases of the new modules (:data:`MOVED`), and this package still exports the trainer's
public names.

Importing this package stays light (numpy and gymnasium): torch is imported only where a
tensor is made, and stable-baselines3 only by :mod:`goalenvs.her.sb3`.
"""

from __future__ import annotations

import importlib
from typing import Any

from goalenvs.core.aliases import alias_modules
from goalenvs.her.buffer import GoalSelectionStrategy, HerBatch, HerReplayBuffer

# Old module path -> where it lives now: an alias (see goalenvs.core.aliases), not a file.
MOVED = {
    "goalenvs.her.agents": "goalenvs.agents.base",
    "goalenvs.her.algos": "goalenvs.agents.registry",
    "goalenvs.her.config": "goalenvs.agents",  # the algorithm configs are one per file now,
    "goalenvs.her.ddpg": "goalenvs.agents.ddpg",
    "goalenvs.her.distributed": "goalenvs.agents.distributed",
    "goalenvs.her.dqn": "goalenvs.agents.dqn",
    "goalenvs.her.networks": "goalenvs.agents.networks",
    "goalenvs.her.normalizer": "goalenvs.agents.normalizer",
    "goalenvs.her.sac": "goalenvs.agents.sac",
    "goalenvs.her.td3": "goalenvs.agents.td3",
    "goalenvs.her.checkpoint": "goalenvs.train.checkpoint",
    "goalenvs.her.cli": "goalenvs.train.cli",
    "goalenvs.her.curves": "goalenvs.train.curves",
    "goalenvs.her.policy": "goalenvs.train.policy",
    "goalenvs.her.presets": "goalenvs.train.presets",
    "goalenvs.her.trainer": "goalenvs.train.trainer",
}


alias_modules(MOVED)

# The trainer's public names load on first use, so importing goalenvs.her stays free of torch.
_LAZY = {
    "train": "goalenvs.train.trainer",
    "TrainResult": "goalenvs.train.trainer",
    "TrainingError": "goalenvs.train.trainer",
    "DDPGConfig": "goalenvs.agents.ddpg",
    "DQNConfig": "goalenvs.agents.dqn",
    "load_policy": "goalenvs.train.policy",
    "Policy": "goalenvs.train.policy",
    "CheckpointError": "goalenvs.train.checkpoint",
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
