"""The HER algorithms: one file per algorithm (its config dataclass beside its agent),
the shared base, networks, normalizer and loss helpers, and the registry
(:mod:`goalenvs.agents.registry`).

Importing this package stays light (no torch): the names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it
_LAZY = {
    "TrainConfig": "goalenvs.agents.config",
    "STRATEGIES": "goalenvs.agents.config",
    "DEVICES": "goalenvs.agents.config",
    "ENV_DEVICES": "goalenvs.agents.config",
    "DDPGConfig": "goalenvs.agents.ddpg",
    "DDPG": "goalenvs.agents.ddpg",
    "DQNConfig": "goalenvs.agents.dqn",
    "DQN": "goalenvs.agents.dqn",
    "SACConfig": "goalenvs.agents.sac",
    "SAC": "goalenvs.agents.sac",
    "TD3Config": "goalenvs.agents.td3",
    "TD3": "goalenvs.agents.td3",
    "Agent": "goalenvs.agents.base",
    "BoxAgent": "goalenvs.agents.base",
    "ALGOS": "goalenvs.agents.registry",
    "Algo": "goalenvs.agents.registry",
    "algo_for": "goalenvs.agents.registry",
    "check_action_space": "goalenvs.agents.registry",
    "config_from_dict": "goalenvs.agents.registry",
    "get_algo": "goalenvs.agents.registry",
    "make_agent": "goalenvs.agents.registry",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'goalenvs.agents' has no attribute {name!r}")


__all__ = sorted(_LAZY)
