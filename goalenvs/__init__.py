"""goalenvs: goal-conditioned environments, a goal-env checker, and a reference HER.

Importing the package registers the environment ids (``goalenvs/...``) with gymnasium::

    import gymnasium as gym
    import goalenvs

    env = gym.make("goalenvs/PointReach-v0")
    envs = gym.make_vec("goalenvs/PointReach-v0", num_envs=1024)  # native vector twin
"""

from __future__ import annotations

from goalenvs.core import GoalEnv, GoalVectorEnv
from goalenvs.registration import ENV_IDS, register_envs

__version__ = "0.1.0"
__all__ = ["ENV_IDS", "GoalEnv", "GoalVectorEnv", "__version__", "register_envs"]

register_envs()
