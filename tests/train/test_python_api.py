"""Training in one call from Python: ``goalenvs.train(env_id, **fields)`` returns a result
whose ``.policy`` predicts, ``goalenvs.load_policy`` loads a saved one, and a keyword that
is no config field is one ValueError naming it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import goalenvs
import goalenvs.train.trainer  # the package imported first: goalenvs.train still trains

pytest.importorskip("torch")


def test_one_call_trains_and_its_policy_predicts_as_the_saved_one(tmp_path):
    result = goalenvs.train(
        "goalenvs/PointReach-v0", epochs=2, n_cycles=4, verbose=False, out=str(tmp_path)
    )
    assert result.epochs == 2 and result.run_dir == tmp_path
    assert result.env_steps == 2 * 4 * 5 * 8  # the point_reach preset's cycles: 5 steps x 8 envs
    env = gym.make("goalenvs/PointReach-v0")
    obs, _ = env.reset(seed=0)
    action = result.policy.predict(obs)
    assert action.shape == env.action_space.shape and env.action_space.contains(action)
    loaded = goalenvs.load_policy(result.best_policy)
    assert loaded.env_id == "goalenvs/PointReach-v0"
    np.testing.assert_array_equal(loaded.predict(obs), action)


@pytest.mark.parametrize(
    ("env_id", "keyword", "message"),
    [
        (
            "goalenvs/PointReach-v0",
            "actorlr",
            "goalenvs.train: actorlr=0.001 is not a field of any algorithm's config; "
            "did you mean actor_lr",
        ),
        (
            "goalenvs/BitFlipping-v0",
            "actor_lr",
            "goalenvs.train: actor_lr=0.001 is not a field of DQNConfig (algo 'dqn')",
        ),
    ],
)
def test_a_keyword_that_is_no_config_field_is_one_value_error_naming_it(env_id, keyword, message):
    with pytest.raises(ValueError) as raised:
        goalenvs.train(env_id, **{keyword: 1e-3})
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_goalenvs_names_only_what_it_has():
    with pytest.raises(AttributeError, match="no attribute 'trian'"):
        goalenvs.trian  # noqa: B018
