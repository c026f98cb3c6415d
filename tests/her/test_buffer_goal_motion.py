"""Goal-motion priorities (``HerReplayBuffer(prioritized=True, priority="goal_motion")``).

Every transition of an episode is drawn in proportion to ``(motion + eps) ** alpha``,
where ``motion`` is the path length of the episode's achieved goal with each step's move
clipped to ``motion_clip`` (and each step scaled per entry by ``motion_weights`` first).
The buffer is fed tagged
episodes whose achieved goal moves at a known speed (some not at all), through a ring that
wraps and retires episodes, with envs that end episodes together (the lockstep writes) and
apart.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.cli import main
from goalenvs.her import HerReplayBuffer
from goalenvs.her.device_buffer import DeviceHerReplayBuffer

BIG = 1e6
SPACE = spaces.Dict(
    observation=spaces.Box(-BIG, BIG, (3,), np.float32),
    achieved_goal=spaces.Box(-BIG, BIG, (3,), np.float32),
    desired_goal=spaces.Box(-BIG, BIG, (3,), np.float32),
)
ACTIONS = spaces.Box(-1, 1, (2,), np.float32)
EPS = 1e-6
# Speeds of the achieved goal per step, exact in float32; (0, 0, 0): an episode where
# nothing moved.
SPEEDS = [(0.0, 0.0, 0.0), (0.25, 0.0, 0.0), (0.0, 0.5, 0.5), (1.0, 2.0, 2.0)]


def reward(achieved_goal, desired_goal, info: object):
    """-1 unless the goals agree, for arrays and tensors alike."""
    far = abs(achieved_goal - desired_goal).sum(-1) > 0.01
    return -(far.float() if isinstance(far, torch.Tensor) else far.astype(np.float32))


class Feeder:
    """Adds tagged transitions: observation ``(env, episode, step)``, an achieved goal
    that starts at ``(env, episode, 0)`` and moves by ``SPEEDS[speed(env, episode)]``
    each step, episodes of ``lengths`` cycled (env e starts e episodes into the cycle)."""

    def __init__(self, buffer: HerReplayBuffer, lengths: list[int], speeds: list[int]) -> None:
        self.buffer, self.lengths, self.speeds = buffer, lengths, speeds
        n = buffer.n_envs
        self.episode, self.step = [0] * n, [0] * n

    def length(self, env: int, episode: int) -> int:
        return self.lengths[(episode + env) % len(self.lengths)]

    def velocity(self, env: int, episode: int) -> np.ndarray:
        return np.array(SPEEDS[self.speeds[(episode + 2 * env) % len(self.speeds)]], np.float32)

    def motion(
        self,
        env: int,
        episode: int,
        clip: float | None,
        weights: tuple | None = None,
    ) -> float:
        """The episode's clipped path."""
        velocity = self.velocity(env, episode).astype(np.float64)
        if weights is not None:
            velocity = velocity * np.asarray(weights)
        step = float(np.linalg.norm(velocity))
        return self.length(env, episode) * (step if clip is None else min(step, clip))

    def add(self) -> None:
        n = self.buffer.n_envs

        def obs(offset: int) -> dict[str, np.ndarray]:
            tags = np.array(
                [[e, self.episode[e], self.step[e] + offset] for e in range(n)], np.float32
            )
            start = tags.copy()
            start[:, 2] = 0
            moved = np.stack(
                [(self.step[e] + offset) * self.velocity(e, self.episode[e]) for e in range(n)]
            )
            return {"observation": tags, "achieved_goal": start + moved, "desired_goal": start}

        done = np.array(
            [self.step[e] + 1 >= self.length(e, self.episode[e]) for e in range(n)], bool
        )
        action = np.zeros((n, 2), np.float32)
        self.buffer.add(obs(0), obs(1), action, np.zeros(n), np.zeros(n, bool), done)
        for e in range(n):
            if done[e]:
                self.episode[e] += 1
                self.step[e] = 0
            else:
                self.step[e] += 1


def make(
    n_envs: int,
    rows: int,
    alpha: float,
    clip: float | None,
    backend: str = "numpy",
    weights: tuple | None = None,
) -> HerReplayBuffer | DeviceHerReplayBuffer:
    """A goal-motion buffer in host memory (``"numpy"``) or on the CPU device (``"torch"``)."""
    kwargs: dict = {"device": "cpu"} if backend == "torch" else {}
    if weights is not None:
        kwargs["motion_weights"] = weights
    cls = DeviceHerReplayBuffer if backend == "torch" else HerReplayBuffer
    return cls(
        rows * n_envs, SPACE, ACTIONS, reward, n_envs=n_envs, seed=0, prioritized=True,
        alpha=alpha, priority_eps=EPS, priority="goal_motion", motion_clip=clip, **kwargs,
    )  # fmt: skip


def as_numpy(value: object) -> np.ndarray:
    return value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def check_leaves(
    buffer: HerReplayBuffer,
    feeder: Feeder,
    alpha: float,
    clip: float | None,
    weights: tuple | None = None,
) -> int:
    """Every sampleable transition's leaf holds its episode's ``(motion + eps) ** alpha``
    and every other leaf 0; returns how many are sampleable."""
    state = buffer.state()
    leaves = state.priorities
    assert leaves is not None
    live = np.flatnonzero(leaves)
    assert live.size == buffer.n_transitions
    tags = state.storage.observations["observation"][live].astype(int)
    expected = [(feeder.motion(e, m, clip, weights) + EPS) ** alpha for e, m, _ in tags.tolist()]
    np.testing.assert_allclose(leaves[live], expected, rtol=1e-6)
    return int(live.size)


@settings(max_examples=60, deadline=None)
@given(
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
    n_envs: int,
    rows: int,
    lengths: list[int],
    speeds: list[int],
    alpha: float,
    clip: float | None,
    weights: tuple | None,
    adds: int,
) -> None:
    buffer = make(n_envs, rows, alpha, clip, weights=weights)
    feeder = Feeder(buffer, lengths, speeds)
    for _ in range(adds):
        feeder.add()
        check_leaves(buffer, feeder, alpha, clip, weights)
    if buffer.can_sample():
        batch = buffer.sample(16)
        np.testing.assert_array_equal(batch.weights, np.ones(16, np.float32))


def test_envs_ending_together_and_apart_write_the_same_priorities() -> None:
    # Same lengths in every env: every episode closes in lockstep (the slice writes);
    # lengths cycled per env: they close apart (the index-array writes).
    for lengths in ([4], [2, 3, 5]):
        buffer = make(3, 40, 1.0, None)
        feeder = Feeder(buffer, lengths, [0, 1, 2, 3])
        for _ in range(100):  # more than the ring's 40 rows: it wraps
            feeder.add()
        assert check_leaves(buffer, feeder, 1.0, None) > 20


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize(
    ("n_envs", "rows", "weights"),
    [(1, 200, None), (3, 30, None), (3, 30, (0.0, 1.0, 4.0))],
)
def test_draws_follow_the_goal_motion_within_their_binomial_interval(
    backend, n_envs, rows, weights
) -> None:
    # Episodes of 4 steps cycling speeds 0, 0.25, 0.5*sqrt(2), 3 per step; with 3 envs in
    # a ring of 30 rows that wraps and retires episodes. Weighted (0, 1, 4): the second
    # speed (along x) counts nothing, the last two 0.5*sqrt(17) and 2*sqrt(65).
    buffer = make(n_envs, rows, 1.0, None, backend, weights)
    feeder = Feeder(buffer, [4], [0, 1, 2, 3])
    for _ in range(4 * 4 * 3):  # three rounds of the four speeds: 12 episodes per env
        feeder.add()
    # The episodes the ring holds: whole ones in its last rows (the host buffer writes an
    # episode's final observation in a row of its own).
    per_episode = 5 if backend == "numpy" else 4
    held = {(e, m) for e in range(n_envs) for m in range(12) if per_episode * (12 - m) <= rows}
    mass = np.zeros((4, 4))  # by speed and step
    for e, m in held:
        for t in range(4):
            motion = feeder.motion(e, m, None, weights)
            mass[feeder.speeds[(m + 2 * e) % 4], t] += motion + EPS
    expected = mass / mass.sum()
    draws = 100_000
    batch = buffer.sample(draws)
    tags = as_numpy(batch.observations["observation"]).astype(int)
    assert {(e, m) for e, m, _ in tags.tolist()} <= held
    speed = np.array([feeder.speeds[(m + 2 * e) % 4] for e, m, _ in tags.tolist()])
    for i, t in itertools.product(range(4), range(4)):
        share = np.mean((speed == i) & (tags[:, 2] == t))
        sigma = np.sqrt(expected[i, t] * (1 - expected[i, t]) / draws)
        assert abs(share - expected[i, t]) <= 4 * sigma + 1e-9, (i, t, share, expected[i, t])
    assert np.mean(speed == 0) < 1e-3  # the episodes where nothing moved: almost never
    if weights is not None:  # nor those that moved only along the axis weighted 0
        assert np.mean(speed == 1) < 1e-3
    np.testing.assert_array_equal(as_numpy(batch.weights), 1.0)


def test_a_buffer_where_nothing_moved_draws_uniformly() -> None:
    buffer = make(2, 50, 1.0, None)
    feeder = Feeder(buffer, [5], [0])
    for _ in range(20):
        feeder.add()
    leaves = buffer.state().priorities
    assert leaves is not None
    np.testing.assert_allclose(leaves[leaves > 0], EPS)
    steps = buffer.sample(20_000).observations["observation"][:, 2]
    counts = np.bincount(steps.astype(int), minlength=5)
    assert counts.min() > 3500  # 4000 expected per step


def test_saved_and_loaded_buffer_keeps_its_priorities_and_settings(tmp_path) -> None:
    # Saved between episodes (a save writes episodes in progress as truncated).
    buffer = make(2, 30, 0.6, 0.3)
    feeder = Feeder(buffer, [3], [0, 1, 2, 3])
    for _ in range(24):
        feeder.add()
    path = tmp_path / "buffer.npz"
    buffer.save(path)
    loaded = HerReplayBuffer.load(path, reward)
    assert (loaded.priority, loaded.motion_clip) == ("goal_motion", 0.3)
    np.testing.assert_array_equal(loaded.state().priorities, buffer.state().priorities)
    for _ in range(24):  # the loaded buffer goes on writing goal-motion priorities
        feeder.buffer = loaded
        feeder.add()
    check_leaves(loaded, feeder, 0.6, 0.3)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_motion_weights_survive_a_save_and_weigh_the_new_episodes(tmp_path, backend) -> None:
    weights = (0.0, 1.0, 4.0)
    buffer = make(2, 30, 1.0, None, backend, weights)
    feeder = Feeder(buffer, [3], [0, 1, 2, 3])
    for _ in range(24):
        feeder.add()
    cls = type(buffer)
    path = tmp_path / ("buffer.pt" if backend == "torch" else "buffer.npz")
    buffer.save(path)
    loaded = cls.load(path, reward, **({"device": "cpu"} if backend == "torch" else {}))
    assert loaded.motion_weights == weights
    feeder.buffer = loaded
    for _ in range(24):  # the loaded buffer weighs the episodes it goes on storing
        feeder.add()
    if backend == "numpy":
        check_leaves(loaded, feeder, 1.0, None, weights)
    tags = as_numpy(loaded.sample(20_000).observations["observation"]).astype(int)
    drawn = {(e, m) for e, m, _ in tags.tolist()}
    assert min(feeder.motion(e, m, None, weights) for e, m in drawn) > 0
    assert any(m >= 8 for _, m in drawn)  # episodes stored after the load are drawn


def test_td_errors_do_not_set_goal_motion_priorities() -> None:
    buffer = make(1, 20, 1.0, None)
    feeder = Feeder(buffer, [3], [1])
    for _ in range(6):
        feeder.add()
    batch = buffer.sample(4)
    with pytest.raises(RuntimeError, match=r"priority='goal_motion'.*TD errors set the"):
        buffer.update_priorities(batch.indices, np.ones(4))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"priority": "energy"},
            ValueError,
            r"priority='energy' is not valid; expected one of \['td_error', 'goal_motion'\]",
        ),
        ({"priority": "goal_motion"}, ValueError, "got prioritized=False: pass prioritized"),
        (
            {"prioritized": True, "motion_clip": 0.1},
            ValueError,
            "motion_clip=0.1 only applies to priority='goal_motion'",
        ),
        (
            {"prioritized": True, "priority": "goal_motion", "motion_clip": -1.0},
            ValueError,
            "motion_clip must be a positive finite distance",
        ),
        (
            {"prioritized": True, "priority": "goal_motion", "motion_clip": float("nan")},
            ValueError,
            "motion_clip must be a positive finite distance",
        ),
        (
            {"prioritized": True, "motion_weights": (1.0, 1.0, 4.0)},
            ValueError,
            r"motion_weights=\(1.0, 1.0, 4.0\) only applies to priority='goal_motion'",
        ),
        (
            {"prioritized": True, "priority": "goal_motion", "motion_weights": (1.0, 4.0)},
            ValueError,
            r"motion_weights=\[1.0, 4.0\] has 2 weights; expected one per achieved_goal "
            r"entry \(3, its shape \(3,\)\)",
        ),
        (
            {"prioritized": True, "priority": "goal_motion", "motion_weights": (1, -1, 1)},
            ValueError,
            r"motion_weights must be finite weights >= 0.*got \(1, -1, 1\)",
        ),
        (
            {"prioritized": True, "priority": "goal_motion", "motion_weights": (0, 0, 0)},
            ValueError,
            "not all 0",
        ),
        (
            {"prioritized": True, "priority": "goal_motion", "motion_weights": "1,1,4"},
            ValueError,
            "motion_weights must be finite weights",
        ),
    ],
)
def test_bad_priority_settings_name_the_argument(kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        HerReplayBuffer(100, SPACE, ACTIONS, reward, **kwargs)


def test_the_device_buffer_keeps_its_goal_motion_across_a_save(tmp_path) -> None:
    buffer = make(2, 30, 1.0, 0.3, "torch")
    feeder = Feeder(buffer, [3], [0, 1, 2, 3])
    for _ in range(24):
        feeder.add()
    path = tmp_path / "buffer.pt"
    buffer.save(path)
    loaded = DeviceHerReplayBuffer.load(path, reward, device="cpu")
    assert (loaded.priority, loaded.motion_clip) == ("goal_motion", 0.3)
    with pytest.raises(RuntimeError, match="TD errors set the priorities of priority='td_error'"):
        loaded.update_priorities(torch.zeros(2, dtype=torch.long), torch.ones(2))
    tags = as_numpy(loaded.sample(20_000).observations["observation"]).astype(int)
    moved = {(e, m): feeder.motion(e, m, 0.3) for e, m, _ in tags.tolist()}
    assert min(moved.values()) > 0  # no draw from an episode that did not move


def test_the_priority_flag_reaches_the_config(capsys) -> None:
    argv = ["train", "goalenvs/PointReach-v0", "--priority", "goal_motion", "--motion-clip"]
    assert main([*argv, "0.05", "--show-config"]) == 0
    out = capsys.readouterr().out
    assert '"prioritized": true' in out and '"priority": "goal_motion"' in out
    assert '"motion_clip": 0.05' in out
    assert main([*argv, "0.05", "--motion-weights", "1,4", "--show-config"]) == 0
    assert '"motion_weights": [\n    1.0,\n    4.0\n  ]' in capsys.readouterr().out


def test_motion_weights_that_do_not_fit_the_goal_stop_train_with_the_reason(capsys) -> None:
    argv = ["train", "goalenvs/PointReach-v0", "--priority", "goal_motion", "--epochs", "1"]
    assert main([*argv, "--motion-weights", "1,1,4", "--quiet", "--no-preflight"]) == 2
    err = capsys.readouterr().err
    assert "motion_weights=[1.0, 1.0, 4.0] has 3 weights; expected one per achieved_goal" in err


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"priority": "goal_motion"}, "priority 'goal_motion' sets what prioritized replay"),
        ({"prioritized": True, "motion_clip": 0.1}, "motion_clip=0.1 only applies"),
        ({"prioritized": True, "motion_weights": "1,1,4"}, "motion_weights='1,1,4' only applies"),
        (
            {"prioritized": True, "priority": "goal_motion", "motion_weights": "1,x,4"},
            r"motion_weights must be finite weights >= 0, one per achieved_goal entry.*got '1,x,4'",
        ),
        (
            {"prioritized": True, "priority": "goal_motion", "motion_weights": [1, True]},
            r"motion_weights must be finite weights.*got \[1, True\]",
        ),
        (
            {"prioritized": True, "priority": "goal_motion", "motion_weights": "0,0"},
            r"not all 0.*got '0,0'",
        ),
        (
            {"prioritized": True, "priority": "energy"},
            r"priority='energy' is not valid; expected one of \['td_error', 'goal_motion'\]",
        ),
    ],
)
def test_bad_priority_config_names_the_field(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        DDPGConfig(**kwargs)


@pytest.mark.parametrize(
    ("weights", "text", "expected"),
    [
        (np.array([1.0, 1.0, 4.0]), False, (1.0, 1.0, 4.0)),  # a numpy row, as saved
        ([np.float32(0.5), 2], False, (0.5, 2.0)),
        ((0, 0, 1), False, (0.0, 0.0, 1.0)),
        ("1, 1,4", True, (1.0, 1.0, 4.0)),  # command-line text
    ],
)
def test_motion_weights_are_read_from_numbers_arrays_and_text(weights, text, expected) -> None:
    from goalenvs.her.settings import check_motion_weights

    assert check_motion_weights(weights, "goal_motion", text=text) == expected


@pytest.mark.parametrize("weights", ["1,1,4", ["1", "4"]])
def test_motion_weights_as_text_are_refused_where_numbers_are_expected(weights) -> None:
    from goalenvs.her.settings import check_motion_weights

    with pytest.raises(ValueError, match="motion_weights must be finite weights"):
        check_motion_weights(weights, "goal_motion")
