"""A goal env whose collision penalty is paid outside ``compute_reward``, made HER-safe.

highway-env's ``parking-v0`` pays ``collision_reward`` (-5) in its step reward only, so
every reward HER recomputes forgets the crash (docs/training.md). :class:`CrashPenaltyInReward`
adds ``penalty * info["crashed"]`` in ``compute_reward``; step rewards are unchanged.

Importing this module registers ``parking-crash-v0`` (highway-env's ``parking-v0``,
wrapped), so ``goalenvs train goalenvs.wrappers.crash_penalty:parking-crash-v0`` trains on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

PARKING_CRASH_ID = "parking-crash-v0"


class CrashPenaltyInReward(gym.Wrapper):
    """Adds ``penalty * info[key]`` to the wrapped goal env's ``compute_reward``.

    Args:
        env: a goal env (Dict observation, ``compute_reward``) whose step reward already
            includes the penalty but whose ``compute_reward`` does not.
        penalty: the reward added on a crash (negative); None reads the env's
            ``config["collision_reward"]`` (highway-env's convention).
        key: the boolean info entry that flags the crash.

    ``compute_reward``'s ``info`` may be None (no crash), one info dict, a dict of
    per-transition arrays (goalenvs' buffer) or a sequence of info dicts
    (stable-baselines3's buffer); a missing ``key`` counts as no crash.
    """

    def __init__(self, env: gym.Env, penalty: float | None = None, key: str = "crashed") -> None:
        super().__init__(env)
        env_reward = getattr(env.unwrapped, "compute_reward", None)
        if not callable(env_reward):
            raise TypeError(
                f"env={env!r} has no compute_reward: CrashPenaltyInReward wraps a goal env"
            )
        # The reward without the penalty: the wrapped goal env's own compute_reward.
        self.env_reward: Callable[[Any, Any, Any], Any] = env_reward
        if penalty is None:
            config = getattr(env.unwrapped, "config", None)
            if not isinstance(config, Mapping) or "collision_reward" not in config:
                raise ValueError(
                    f"penalty=None but env={env.unwrapped!r} has no config['collision_reward']; "
                    "pass the penalty"
                )
            penalty = config["collision_reward"]
        if not np.isfinite(penalty):
            raise ValueError(f"penalty must be a finite number, got {penalty!r}")
        self.penalty = float(penalty)
        self.key = key

    def crashed(self, info: object) -> np.ndarray | float:
        """``info[key]`` as floats (0 where absent), for any of the info layouts."""
        if info is None:
            return 0.0
        if isinstance(info, Mapping):
            return np.asarray(info.get(self.key, False), dtype=np.float64)
        if isinstance(info, Sequence | np.ndarray):
            flag = np.frompyfunc(lambda one: float(one.get(self.key, False)), 1, 1)
            return np.asarray(flag(np.asarray(info, dtype=object)), dtype=np.float64)
        raise TypeError(
            f"info must be None, a dict or a sequence of dicts, got {type(info).__name__}"
        )

    def compute_reward(
        self, achieved_goal: object, desired_goal: object, info: object
    ) -> np.ndarray | float:
        """The wrapped env's reward plus ``penalty`` where ``info[key]`` is true: an array
        for a batch of goals, a float for one pair (as the wrapped env returns)."""
        base = np.asarray(self.env_reward(achieved_goal, desired_goal, info))
        total = base + self.penalty * self.crashed(info)
        return total if total.ndim else total.item()


def make_parking_crash(**kwargs: object) -> gym.Env:
    """highway-env's ``parking-v0`` (``kwargs`` go to it) with the crash in compute_reward."""
    try:
        from highway_env.envs.parking_env import ParkingEnv
    except ImportError:
        raise ImportError(
            f"{PARKING_CRASH_ID} needs highway-env: pip install highway-env"
        ) from None
    return CrashPenaltyInReward(ParkingEnv(**kwargs))


if PARKING_CRASH_ID not in gym.registry:
    gym.register(PARKING_CRASH_ID, entry_point=make_parking_crash)
