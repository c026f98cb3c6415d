"""The HER algorithms: one file per algorithm (its config dataclass beside its agent),
the shared base, networks, normalizer and loss helpers, and the registry
(:mod:`goalenvs.agents.registry`).

Importing this package stays light (no torch): the names below load on first use."""

from __future__ import annotations

import importlib

# module -> the names it defines, each loaded on first use
_MODULES = {
    "goalenvs.agents.config": ("TrainConfig", "STRATEGIES", "DEVICES", "ENV_DEVICES", "PRECISIONS"),
    "goalenvs.agents.ddpg": ("DDPGConfig", "DDPG"),
    "goalenvs.agents.dqn": ("DQNConfig", "DQN"),
    "goalenvs.agents.sac": ("SACConfig", "SAC"),
    "goalenvs.agents.td3": ("TD3Config", "TD3"),
    "goalenvs.agents.base": ("Agent", "BoxAgent"),
    "goalenvs.agents.learner": ("Learner",),
    "goalenvs.agents.registry": (
        *("ALGOS", "Algo", "algo_for", "check_action_space"),
        *("config_from_dict", "get_algo", "make_agent"),
    ),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'goalenvs.agents' has no attribute {name!r}")


__all__ = sorted(_LAZY)
