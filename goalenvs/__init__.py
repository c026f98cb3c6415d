"""goalenvs: goal-conditioned environments, a goal-env checker, and a reference HER.

Importing the package registers the environment ids (``goalenvs/...``) with gymnasium::

    import gymnasium as gym
    import goalenvs

    env = gym.make("goalenvs/PointReach-v0")
    envs = gym.make_vec("goalenvs/PointReach-v0", num_envs=1024)  # native vector twin

Training in one call (needs the ``train`` extra), and a saved policy back::

    result = goalenvs.train("goalenvs/PointReach-v0", epochs=5)
    result.policy.predict(obs)
    policy = goalenvs.load_policy("runs/<run>/policy_best.pt")
"""

from __future__ import annotations

import importlib
from typing import Any

from goalenvs.core import GoalEnv, GoalVectorEnv
from goalenvs.registration import ENV_IDS, register_envs

__version__ = "0.1.0"
__all__ = [
    "ENV_IDS",
    "GoalEnv",
    "GoalVectorEnv",
    "__version__",
    "load_policy",
    "register_envs",
    "train",
]

# Imported when first asked for, by name (importlib): this package sits below every room
# (each imports it), so it may not import the trainer, which needs torch besides. ``train``
# is the goalenvs.train package itself, callable (goalenvs/train/__init__.py).
_LAZY = {"train": ("goalenvs.train", None), "load_policy": ("goalenvs.train.policy", "load_policy")}


def __getattr__(name: str) -> Any:
    """``goalenvs.train(...)`` and ``goalenvs.load_policy(path)``, imported on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'goalenvs' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name)
    return module if attribute is None else getattr(module, attribute)


register_envs()
