"""The singles-vs-vector run that tests/envs holds every native twin to."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

import goalenvs  # noqa: F401  (registers the ids)


def run_singles_and_vector(
    env_id, seed, steps, autoreset_mode=AutoresetMode.NEXT_STEP, policy=None, **kwargs
):
    """Steps ``gym.make_vec(env_id, num_envs=4)`` and four single envs seeded ``seed + i``
    with the same actions (random, or ``policy`` of each single env's observation) and
    asserts equal observations, rewards, terminations and truncations, and same-step final
    observations, at every step. Returns how many episodes ended."""
    n = 4
    envs = gym.make_vec(env_id, num_envs=n, autoreset_mode=autoreset_mode, **kwargs)
    singles = [gym.make(env_id, **kwargs) for _ in range(n)]
    action_space = singles[0].action_space
    action_space.seed(seed)
    vector_obs, _ = envs.reset(seed=seed)
    single_obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(singles)]
    for key in vector_obs:
        np.testing.assert_array_equal(vector_obs[key], np.stack([o[key] for o in single_obs]))
    ended = [False] * n
    episodes_ended = 0
    for _ in range(steps):
        if policy is None:
            actions = [action_space.sample() for _ in range(n)]
        else:
            actions = [policy(obs) for obs in single_obs]
        vector_obs, reward, terminated, truncated, info = envs.step(np.stack(actions))
        for i, env in enumerate(singles):
            if ended[i] and autoreset_mode == AutoresetMode.NEXT_STEP:
                obs, r, te, tr = env.reset()[0], 0.0, False, False
            else:
                obs, r, te, tr, _ = env.step(actions[i])
            ended[i] = te or tr
            episodes_ended += ended[i]
            if ended[i] and autoreset_mode == AutoresetMode.SAME_STEP:
                np.testing.assert_equal(info["final_obs"][i], obs)
                obs = env.reset()[0]
            np.testing.assert_equal({k: v[i] for k, v in vector_obs.items()}, obs)
            assert (reward[i], terminated[i], truncated[i]) == (r, te, tr)
            single_obs[i] = obs
    return episodes_ended


def colour_at(env, frame: np.ndarray, xy) -> list[int]:
    """The colour of ``frame`` at the world point ``xy`` of ``env``'s drawing."""
    column, row = env.unwrapped.world_to_pixel(xy)
    return frame[row, column].tolist()
