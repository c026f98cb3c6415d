"""Goal-motion priorities (``prioritized=True, priority="goal_motion"``), numpy and torch.

Every transition of an episode is drawn in proportion to ``(motion + eps) ** alpha``,
where ``motion`` is the path length of the episode's achieved goal with each step's move
scaled per entry by ``motion_weights`` and clipped to ``motion_clip``. The buffer is fed
the tagged episodes of model.py, their achieved goal moving at a known speed
(some not at all), through rings that wrap and retire whole episodes, with envs that end
episodes together and apart.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.cli import main
from goalenvs.her.settings import check_motion_weights
from tests.her.model import DEVICES, SPEEDS, Feeder, make, to_numpy
from tests.her.test_buffer_backends import ENERGY, GM

EPS = 1e-6


def goal_motion(
    device: Any, n_envs: int, rows: int, alpha: float, clip: Any, weights: Any = None
) -> Any:
    extra = {} if weights is None else {"motion_weights": weights}
    return make(device, rows * n_envs, n_envs=n_envs, seed=0, prioritized=True, alpha=alpha,
                priority_eps=EPS, priority="goal_motion", motion_clip=clip, **extra)  # fmt: skip


def check_leaves(buffer: Any, feeder: Feeder, alpha: float, clip: Any, weights: Any = None) -> None:
    """Every sampleable row's draw weight is its episode's ``(motion + eps) ** alpha``
    and every other row's 0."""
    leaves = to_numpy(buffer.priorities.weights()).reshape(-1)
    live = np.flatnonzero(leaves)
    assert live.size == buffer.n_transitions
    tags = to_numpy(buffer.state().fields["obs/observation"]).reshape(-1, 3)[live].astype(int)
    expected = [(feeder.motion(e, m, clip, weights) + EPS) ** alpha for e, m, _ in tags.tolist()]
    np.testing.assert_allclose(leaves[live], expected, rtol=1e-6)


@settings(max_examples=50, deadline=None)
@given(
    device=st.sampled_from([None, "cpu"]),
    n_envs=st.integers(1, 3),
    rows=st.integers(6, 30),
    lengths=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    speeds=st.lists(st.integers(0, len(SPEEDS) - 1), min_size=1, max_size=5),
    alpha=st.sampled_from([0.0, 0.6, 1.0]),
    clip=st.sampled_from([None, 0.3, 5.0]),
    weights=st.sampled_from([None, (1.0, 1.0, 4.0), (0.0, 2.0, 0.5)]),
    adds=st.integers(1, 90),
)
def test_each_transition_carries_its_episodes_clipped_goal_motion(
    device, n_envs, rows, lengths, speeds, alpha, clip, weights, adds
) -> None:
    """One length: every env ends its episodes in lockstep; several: apart."""
    buffer = goal_motion(device, n_envs, rows, alpha, clip, weights)
    feeder = Feeder(buffer, lengths, speeds)
    for _ in range(adds):
        feeder.add()
        check_leaves(buffer, feeder, alpha, clip, weights)
    if buffer.can_sample():
        batch = buffer.sample(16)
        np.testing.assert_array_equal(to_numpy(batch.weights), 1.0)
        with pytest.raises(RuntimeError, match=r"priority='goal_motion'.*TD errors set the"):
            buffer.update_priorities(batch.indices[:4], np.ones(4))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("n_envs", "rows", "weights", "speeds"),
    [
        (1, 200, None, [0, 1, 2, 3]),
        (3, 30, None, [0, 1, 2, 3]),
        (3, 30, (0.0, 1.0, 4.0), [0, 1, 2, 3]),
        (2, 48, None, [0]),  # nothing moved: every weight EPS, the draws uniform
    ],
)
def test_draws_follow_the_goal_motion_within_their_binomial_interval(
    device, n_envs, rows, weights, speeds
) -> None:
    # Episodes of 4 steps cycling speeds 0, 0.25, 0.5*sqrt(2), 3 per step; with 3 envs in
    # a ring of 30 rows that wraps and retires episodes. Weighted (0, 1, 4): the second
    # speed (along x) counts nothing, the last two 0.5*sqrt(17) and 2*sqrt(65).
    buffer = goal_motion(device, n_envs, rows, 1.0, None, weights)
    feeder = Feeder(buffer, [4], speeds)
    feeder.add(4 * 4 * 3)  # three rounds of the four speeds: 12 episodes per env
    check_leaves(buffer, feeder, 1.0, None, weights)
    held = {(e, m) for e in range(n_envs) for m in range(12) if 4 * (12 - m) <= rows}
    assert set(feeder.model.live()) == held  # whole episodes in the ring's last rows
    mass = np.zeros((4, 4))  # by speed and step
    for (e, m), t in itertools.product(held, range(4)):
        mass[feeder.speed(e, m), t] += feeder.motion(e, m, None, weights) + EPS
    expected, draws = mass / mass.sum(), 100_000
    batch = buffer.sample(draws)
    tags = to_numpy(batch.observations["observation"]).astype(int)
    assert {(e, m) for e, m, _ in tags.tolist()} <= held
    speed = np.array([feeder.speed(e, m) for e, m, _ in tags.tolist()])
    for i, t in itertools.product(range(4), range(4)):
        share = np.mean((speed == i) & (tags[:, 2] == t))
        sigma = np.sqrt(expected[i, t] * (1 - expected[i, t]) / draws)
        assert abs(share - expected[i, t]) <= 4 * sigma + 1e-9, (i, t, share, expected[i, t])
    assert len(speeds) == 1 or np.mean(speed == 0) < 1e-3  # those where nothing moved: ~never
    if weights is not None:  # nor those that moved only along the axis weighted 0
        assert np.mean(speed == 1) < 1e-3
    np.testing.assert_array_equal(to_numpy(batch.weights), 1.0)


def test_the_priority_flags_reach_the_config_and_weights_that_do_not_fit_stop_train(capsys):
    argv = ["train", "goalenvs/PointReach-v0", "--priority", "goal_motion"]
    assert main([*argv, "--motion-clip", "0.05", "--show-config"]) == 0
    out = capsys.readouterr().out
    assert '"prioritized": true' in out and '"priority": "goal_motion"' in out
    assert '"motion_clip": 0.05' in out
    assert main([*argv, "--motion-clip", "0.05", "--motion-weights", "1,4", "--show-config"]) == 0
    assert '"motion_weights": [\n    1.0,\n    4.0\n  ]' in capsys.readouterr().out
    tiny = ["--epochs", "1", "--quiet", "--no-preflight"]
    assert main([*argv, *tiny, "--motion-weights", "1,1,4"]) == 2
    err = capsys.readouterr().err
    assert "motion_weights=[1.0, 1.0, 4.0] has 3 weights; expected one per achieved_goal" in err


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"priority": "goal_motion"}, "priority 'goal_motion' sets what prioritized replay"),
        ({"prioritized": True, "motion_clip": 0.1}, "motion_clip=0.1 only applies"),
        ({"prioritized": True, "motion_weights": "1,1,4"}, "motion_weights='1,1,4' only applies"),
        ({**GM, "motion_weights": "1,x,4"},
         r"motion_weights must be finite weights >= 0, one per achieved_goal entry.*got '1,x,4'"),
        ({**GM, "motion_weights": [1, True]}, r"finite weights.*got \[1, True\]"),
        ({**GM, "motion_weights": "0,0"}, r"not all 0.*got '0,0'"),
        ({"prioritized": True, "priority": "energy"}, ENERGY),
    ],
)  # fmt: skip
def test_bad_priority_config_names_the_field(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        DDPGConfig(**kwargs)


def test_motion_weights_are_read_from_numbers_arrays_and_text_only_where_text_is_allowed() -> None:
    for weights, text, expected in [
        (np.array([1.0, 1.0, 4.0]), False, (1.0, 1.0, 4.0)),  # a numpy row, as saved
        ([np.float32(0.5), 2], False, (0.5, 2.0)),
        ((0, 0, 1), False, (0.0, 0.0, 1.0)),
        ("1, 1,4", True, (1.0, 1.0, 4.0)),  # command-line text
    ]:
        assert check_motion_weights(weights, "goal_motion", text=text) == expected
    for weights in ("1,1,4", ["1", "4"]):
        with pytest.raises(ValueError, match="motion_weights must be finite weights"):
            check_motion_weights(weights, "goal_motion")
