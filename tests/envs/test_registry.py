"""Every registered id builds through gym.make and gym.make_vec, and `goalenvs list` shows it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import goalenvs
from goalenvs.cli import main
from goalenvs.core import GoalEnv, GoalVectorEnv


@pytest.mark.parametrize("env_id", goalenvs.ENV_IDS)
def test_id_makes_single_env_and_native_vector_twin(env_id):
    env = gym.make(env_id)
    assert isinstance(env.unwrapped, GoalEnv)
    obs, info = env.reset(seed=0)
    assert set(obs) == {"observation", "achieved_goal", "desired_goal"}
    assert isinstance(info["is_success"], (bool, np.bool_))
    env.close()

    envs = gym.make_vec(env_id, num_envs=3)
    assert isinstance(envs.unwrapped, GoalVectorEnv)
    obs, _ = envs.reset(seed=0)
    assert obs["desired_goal"].shape[0] == 3
    envs.close()


def test_list_prints_one_line_per_id(capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(goalenvs.ENV_IDS)
