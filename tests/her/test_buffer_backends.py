"""The HER buffer's rules, the same on each face of the one buffer: HerReplayBuffer (numpy,
``device=None``) and DeviceHerReplayBuffer on torch's CPU, and on CUDA where there is one.

The buffers are filled with *tagged* transitions: every observation of env ``e``, episode
``m`` (counted per env), step ``i`` carries ``(e, m, i)`` in its observation and achieved
goal, and the episode's own desired goal is ``(-1, e, m)``, so a sampled batch says where
every value came from. :class:`Writer` models which episodes are complete and intact in
the ring: an env holds its last ``rows`` transitions, and an episode leaves whole when its
first transition is overwritten.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

import goalenvs  # noqa: F401  (registers the env ids)
from goalenvs.her import GoalSelectionStrategy, HerBatch, HerReplayBuffer
from goalenvs.her.buffer import DeviceHerReplayBuffer
from tests.her.test_buffer_model import ACTIONS as TAG_ACTIONS
from tests.her.test_buffer_model import CUDA, to_numpy
from tests.her.test_buffer_model import SPACE as TAG_SPACE
from tests.her.test_buffer_model import goal_reward as tag_reward

torch.set_num_threads(1)

#: "numpy" is the numpy face (device=None); the others are torch devices.
BACKENDS = ["numpy", "cpu", pytest.param("cuda", marks=CUDA)]
TORCH = ["cpu", pytest.param("cuda", marks=CUDA)]
STRATEGIES = list(GoalSelectionStrategy)


def stored_reward(env: Any, episode: Any, step: Any) -> np.ndarray:
    """The reward written at add(): never what tag_reward gives, so relabeling shows."""
    value = 0.5 + np.asarray(env) + 1000.0 * np.asarray(episode) + 0.001 * np.asarray(step)
    return value.astype(np.float32)


def make_buffer(backend: str, buffer_size: int, n_envs: int, **kwargs: Any) -> Any:
    """The numpy face for ``"numpy"``, else the torch face on the device ``backend``."""
    reward = kwargs.pop("compute_reward", tag_reward)
    observation_space = kwargs.pop("observation_space", TAG_SPACE)
    action_space = kwargs.pop("action_space", TAG_ACTIONS)
    args = (buffer_size, observation_space, action_space, reward)
    if backend == "numpy":
        return HerReplayBuffer(*args, n_envs=n_envs, **kwargs)
    return DeviceHerReplayBuffer(*args, n_envs=n_envs, device=backend, **kwargs)


def numpy_batch(batch: HerBatch) -> HerBatch:
    """``batch`` with every array or tensor as a numpy array (no copy where it can)."""

    def host(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: to_numpy(item) for key, item in value.items()}
        return None if value is None else to_numpy(value)

    return HerBatch(*(host(value) for value in batch))


class Writer:
    """Feeds a buffer tagged episodes of given lengths per env and models which stay intact:
    ``episodes[e][m]`` is ``[first counter, length]`` (length 0 while in progress)."""

    def __init__(self, buffer: Any, lengths: list[list[int]]) -> None:
        self.buffer, self.lengths, n = buffer, lengths, buffer.n_envs
        self.episode, self.step, self.written = [0] * n, [0] * n, [0] * n
        self.episodes: list[list[list[int]]] = [[] for _ in range(n)]

    def convert(self, value: np.ndarray) -> Any:
        device = self.buffer.device
        return value if device is None else torch.as_tensor(value, device=device)

    def add_step(self, infos: Any = None, terminated: bool = False) -> None:
        n, zeros = self.buffer.n_envs, np.zeros(self.buffer.n_envs, bool)
        tags = np.array([[e, self.episode[e], self.step[e]] for e in range(n)], np.float32)
        goal = np.stack([np.full(n, -1.0), np.arange(n), self.episode], 1).astype(np.float32)
        done = np.array([self.step[e] + 1 >= self.lengths[e][self.episode[e]] for e in range(n)])
        after = tags.copy()
        after[:, 2] += 1
        obs = {"observation": tags, "achieved_goal": tags, "desired_goal": goal}
        nxt = {"observation": after, "achieved_goal": after, "desired_goal": goal}
        self.buffer.add(
            {k: self.convert(v) for k, v in obs.items()},
            {k: self.convert(v) for k, v in nxt.items()},
            self.convert(tags),
            self.convert(stored_reward(np.arange(n), self.episode, self.step)),
            self.convert(done if terminated else zeros),
            self.convert(zeros if terminated else done),
            infos,
        )
        for e in range(n):
            if self.step[e] == 0:
                self.episodes[e].append([self.written[e], 0])
            self.written[e] += 1
            self.step[e] += 1
            if done[e]:
                self.end_episode(e)

    def end_episode(self, e: int) -> None:
        """Ends env ``e``'s episode in the model after its ``step[e]`` transitions."""
        self.episodes[e][-1][1] = self.step[e]
        self.episode[e] += 1
        self.step[e] = 0

    def intact_episodes(self) -> dict[tuple[int, int], int]:
        """(env, episode) -> length of every complete episode whose first transition is
        still stored (an env holds its last ``rows_per_env`` transitions)."""
        oldest = [count - self.buffer.rows_per_env for count in self.written]
        return {
            (e, m): length
            for e, episodes in enumerate(self.episodes)
            for m, (start, length) in enumerate(episodes)
            if length > 0 and start >= oldest[e]
        }


def tagged(backend: str, size: int, lengths: list[list[int]], steps: int, **kwargs: Any) -> Any:
    """A buffer of ``len(lengths)`` envs fed ``steps`` tagged steps, and its Writer."""
    buffer = make_buffer(backend, size, len(lengths), **kwargs)
    writer = Writer(buffer, lengths)
    for _ in range(steps):
        writer.add_step()
    return buffer, writer


def check_batch(batch: HerBatch, writer: Writer, strategy: GoalSelectionStrategy) -> np.ndarray:
    """Asserts every provenance rule on a tagged batch; returns the relabeled mask."""
    batch = numpy_batch(batch)
    intact = writer.intact_episodes()
    obs, nxt = batch.observations, batch.next_observations
    tags = obs["observation"].astype(int)
    for e, m, i in tags:
        assert (e, m) in intact, f"sampled env {e} episode {m}, which is not complete and intact"
        assert 0 <= i < intact[(e, m)]
    np.testing.assert_array_equal(obs["achieved_goal"], obs["observation"])
    np.testing.assert_array_equal(batch.actions, obs["observation"])
    np.testing.assert_array_equal(nxt["observation"], obs["observation"] + [0, 0, 1])
    np.testing.assert_array_equal(nxt["achieved_goal"], nxt["observation"])
    np.testing.assert_array_equal(nxt["desired_goal"], obs["desired_goal"])
    goal = obs["desired_goal"]
    relabeled = goal[:, 0] >= 0
    original = ~relabeled
    np.testing.assert_array_equal(goal[original, 1:], tags[original, :2])
    np.testing.assert_array_equal(
        batch.rewards[original],
        stored_reward(tags[original, 0], tags[original, 1], tags[original, 2]),
    )
    np.testing.assert_allclose(
        batch.rewards[relabeled],
        tag_reward(nxt["achieved_goal"][relabeled], goal[relabeled], None),
        rtol=1e-6,
    )
    for (e, m, i), (ge, gm, gj) in zip(tags[relabeled], goal[relabeled].astype(int), strict=True):
        length = intact[(e, m)]
        if strategy is GoalSelectionStrategy.RANDOM:
            assert (ge, gm) in intact and 1 <= gj <= intact[(ge, gm)]
            continue
        assert (ge, gm) == (e, m), "a relabeled goal came from another episode"
        # gj is the index of the *next* achieved goal: transition j = gj - 1.
        allowed = {
            GoalSelectionStrategy.FUTURE: range(i + 1, length + 1),
            GoalSelectionStrategy.FINAL: range(length, length + 1),
            GoalSelectionStrategy.EPISODE: range(1, length + 1),
        }[strategy]
        assert gj in allowed, f"{strategy.value}: goal index {gj} for step {i} of {length}"
    np.testing.assert_array_equal(batch.weights, np.ones(len(tags), np.float32))
    return relabeled


def host_state(buffer: Any) -> dict[str, np.ndarray]:
    """Copies of every field and counter of a buffer's state, by name (numpy)."""
    state = buffer.state()
    out = {"steps_added": np.array(state.steps_added)}
    out.update({name: to_numpy(value).copy() for name, value in state.fields.items()})
    out.update({f"counter/{k}": to_numpy(v).copy() for k, v in state.counters.items()})
    if state.priorities is not None:
        out["priorities"] = to_numpy(state.priorities).copy()
    return out


def assert_same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for name, value in a.items():
        np.testing.assert_array_equal(value, b[name], err_msg=name)


def assert_same_batches(a: Any, b: Any, rounds: int = 3) -> None:
    """``a`` and ``b`` draw the same batches (same data, same generator state)."""
    for _ in range(rounds):
        x, y = numpy_batch(a.sample(16)), numpy_batch(b.sample(16))
        for key in TAG_SPACE.spaces:
            np.testing.assert_array_equal(x.observations[key], y.observations[key])
        for name in ("actions", "rewards", "dones", "indices"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)


# ---------------------------------------------------------------------- the ring


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_episode_leaves_whole_when_its_first_transition_is_overwritten(backend: str) -> None:
    # rows = 4, one env: episodes [0, 3) and [3, 4); add 4 overwrites counter 0, and
    # counters 1, 2 leave with it.
    buffer, writer = tagged(backend, 4, [[3, 1, 5]], 4, seed=0, n_sampled_goal=0)
    assert buffer.n_transitions == 4
    counters = {k: to_numpy(v).tolist() for k, v in buffer.state().counters.items()}
    assert counters["sampleable_from"] == [0] and counters["sampleable_to"] == [4]
    writer.add_step()
    assert to_numpy(buffer.state().counters["sampleable_from"]).tolist() == [3]
    assert buffer.n_transitions == 1 and buffer.episodes_in_progress == 1
    tags = to_numpy(buffer.sample(100).observations["observation"]).astype(int)
    np.testing.assert_array_equal(tags, np.tile([0, 1, 0], (100, 1)))  # episode 1 only


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prioritized", [False, True])
def test_an_env_holds_exactly_rows_transitions(backend: str, prioritized: bool) -> None:
    # Two episodes of 4 fill 8 rows exactly: every transition is drawn, the oldest too.
    buffer, writer = tagged(backend, 16, [[4] * 4, [8] * 2], 8, prioritized=prioritized, seed=2)
    assert buffer.rows_per_env == 8 and buffer.n_transitions == 16
    tags = to_numpy(buffer.sample(3000).observations["observation"]).astype(int)
    expected = {(0, m, i) for m in (0, 1) for i in range(4)} | {(1, 0, i) for i in range(8)}
    assert {tuple(t) for t in tags} == expected
    writer.add_step()  # the first transitions of env 0's and env 1's oldest episodes go
    assert buffer.n_transitions == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_can_sample_follows_the_episodes_that_end_and_leave(backend: str) -> None:
    # 10 rows: episode 0 (3 steps) is retired by the 8th step of episode 1 in progress.
    buffer = make_buffer(backend, 10, 1, seed=0)
    writer = Writer(buffer, [[3, 9]])
    assert not buffer.can_sample()
    for _ in range(2):
        writer.add_step()
    assert not buffer.can_sample()
    with pytest.raises(RuntimeError, match="no complete episode"):
        buffer.sample(4)
    writer.add_step()
    assert buffer.can_sample() and buffer.sample(4).rewards.shape == (4,)
    for _ in range(8):
        writer.add_step()
    assert buffer.n_transitions == 0 and not buffer.can_sample()
    with pytest.raises(RuntimeError, match="before an episode has ended"):
        buffer.sample(4)
    writer.add_step()  # episode 1 ends: 9 transitions in 10 rows
    assert buffer.can_sample() and buffer.n_transitions == 9


@pytest.mark.parametrize("backend", BACKENDS)
def test_truncate_last_trajectory_makes_episodes_in_progress_sampleable(backend: str) -> None:
    buffer, _ = tagged(backend, 100, [[3, 10], [10]], 6, n_sampled_goal=0, seed=0)
    assert buffer.n_transitions == 3 and buffer.episodes_in_progress == 2
    buffer.truncate_last_trajectory()
    assert buffer.n_transitions == 12 and buffer.episodes_in_progress == 0
    batch = numpy_batch(buffer.sample(3000))
    tags = batch.observations["observation"].astype(int)
    assert {(0, 1, 2), (1, 0, 5)} <= {tuple(t) for t in tags}  # the cut episodes' last steps
    assert not batch.dones.any()  # a truncation bootstraps (handle_timeout_termination)
    np.testing.assert_array_equal(to_numpy(buffer.state().fields["truncated"][5]), [1, 1])
    buffer.truncate_last_trajectory()  # nothing in progress: a no-op
    assert buffer.n_transitions == 12


# ---------------------------------------------------------------------- the draws


@pytest.mark.parametrize("backend", BACKENDS)
def test_transitions_are_sampled_uniformly_across_envs_and_episodes(backend: str) -> None:
    buffer, writer = tagged(backend, 200, [[2, 9, 4, 1] * 30, [6] * 100], 40, seed=0)
    intact = writer.intact_episodes()
    n, total = 40_000, sum(intact.values())
    tags = to_numpy(buffer.sample(n).observations["observation"]).astype(int)
    for (e, m), length in intact.items():
        share, p = np.mean((tags[:, 0] == e) & (tags[:, 1] == m)), length / total
        assert abs(share - p) < 5 * np.sqrt(p * (1 - p) / n), (e, m, share, p)


@pytest.mark.parametrize("strategy", ["future", "episode", "final"])
def test_both_modules_agree_on_the_law_of_relabel_offsets(strategy: str) -> None:
    # The same episodes stored on numpy and torch: the histograms of (goal index - step)
    # over a large batch agree with each other and with the exact law of the strategy
    # (future includes the transition's own next goal and reaches the final one).
    lengths = [[3, 8, 5, 2, 6, 99], [4, 7, 1, 5, 9, 99], [6, 6, 6, 6, 6, 99]]
    batches = []
    for backend in ("numpy", "cpu"):
        buffer, _ = tagged(backend, 3 * 64, lengths, 30, goal_selection_strategy=strategy, seed=11)
        batches.append(numpy_batch(buffer.sample(40_000)))
    law: dict[int, float] = {}
    episodes = [(e, m, n) for e, per_env in enumerate(lengths) for m, n in enumerate(per_env)]
    stored = [(e, m, n) for e, m, n in episodes if sum(lengths[e][: m + 1]) <= 30]
    total = sum(n for *_, n in stored)
    for _, _, n in stored:
        for i in range(n):
            goals = {"future": range(i + 1, n + 1), "final": [n], "episode": range(1, n + 1)}
            for j in goals[strategy]:
                law[j - i] = law.get(j - i, 0.0) + 1 / total / len(goals[strategy])
    lo, hi = min(law) - 1, max(law) + 2
    expected = np.array([law.get(k, 0.0) for k in range(lo, hi)])
    histograms = []
    for batch in batches:
        step, goal = batch.observations["observation"][:, 2], batch.observations["desired_goal"]
        relabeled = goal[:, 0] >= 0
        offsets = (goal[relabeled, 2] - step[relabeled]).astype(int)
        counts = np.bincount(offsets - lo, minlength=hi - lo)[: hi - lo]
        histograms.append(counts / counts.sum())
    # Total variation: ~32k relabeled draws over <= 10 bins give ~0.01; an off-by-one in
    # the offset moves mass by >= 0.2.
    for histogram in histograms:
        assert 0.5 * np.abs(histogram - expected).sum() < 0.03
    assert 0.5 * np.abs(histograms[0] - histograms[1]).sum() < 0.03


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_sample_returns_fresh_arrays_the_next_one_leaves_alone(backend: str) -> None:
    buffer, writer = tagged(backend, 60, [[5] * 20] * 2, 12, seed=0)

    def snapshot(batch: HerBatch) -> list[np.ndarray]:
        values = [*batch.observations.values(), *batch.next_observations.values()]
        values += [batch.actions, batch.rewards, batch.dones, batch.indices]
        return [to_numpy(value).copy() for value in values]

    first = buffer.sample(64)
    kept = snapshot(first)
    later = [buffer.sample(64) for _ in range(3)]
    writer.add_step()
    for a, b in zip(snapshot(first), kept, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any((to_numpy(b.indices) != kept[-1]).any() for b in later)  # other draws
    moved = buffer.sample(64, device="cpu")  # tensors on the CPU, whatever the face
    assert isinstance(moved.rewards, torch.Tensor) and moved.rewards.dtype == torch.float32
    assert moved.rewards.device.type == "cpu"
    check_batch(moved, writer, GoalSelectionStrategy.FUTURE)


# ---------------------------------------------------------------------- values in, values out


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_of_other_dtypes_layouts_and_types_are_stored_as_given(backend: str) -> None:
    # Strided and Fortran views, float64, int64, big-endian, lists: the same numbers; a
    # float64 Box's actions are stored and sampled as float32.
    buffer = make_buffer(backend, 40, 2, action_space=spaces.Box(-9, 9, (3,), np.float64))
    wide = np.arange(24, dtype=np.float32).reshape(2, 12)
    obs = {
        "observation": wide[:, ::4],
        "achieved_goal": np.array([[1, 2, 3], [4, 5, 6]], np.float64),
        "desired_goal": [[7, 8, 9], [10, 11, 12]],
    }
    next_obs = {
        "observation": np.asfortranarray(wide[:, :3] + 100),
        "achieved_goal": np.array([[1, 2, 3], [4, 5, 6]], np.int64) + 10,
        "desired_goal": np.array([[7, 8, 9], [10, 11, 12]], ">f4"),
    }
    action = np.array([[0.5, 1.5, 2.5], [3.5, 4.5, 5.5]])  # float64
    buffer.add(obs, next_obs, action, [1, 2], np.zeros(2), np.array([False, True]))
    f = {name: to_numpy(value) for name, value in buffer.state().fields.items()}
    for side, values in (("obs", obs), ("next_obs", next_obs)):
        for key, value in values.items():
            np.testing.assert_array_equal(f[f"{side}/{key}"][0], np.asarray(value, np.float32))
            assert f[f"{side}/{key}"].dtype == np.float32
    np.testing.assert_array_equal(f["action"][0], action.astype(np.float32))
    assert f["action"].dtype == np.float32
    batch = numpy_batch(buffer.sample(8))  # env 1's episode ended
    assert batch.actions.dtype == np.float32
    np.testing.assert_array_equal(batch.actions, np.tile(action[1:].astype(np.float32), (8, 1)))
    np.testing.assert_array_equal(f["reward"][0], [1.0, 2.0])
    # The buffer copied the values: changing the caller's arrays changes nothing stored.
    wide[:] = -1
    action[:] = -1
    stored = buffer.state().fields
    np.testing.assert_array_equal(to_numpy(stored["obs/observation"][0]), [[0, 4, 8], [12, 16, 20]])
    assert float(stored["action"][0, 0, 0]) == 0.5
    # A bad next_obs is an error naming it, and stores nothing.
    before = host_state(buffer)
    bad = {**next_obs, "achieved_goal": np.zeros((2, 4), np.float32)}
    with pytest.raises(ValueError, match=r"next_obs\['achieved_goal'\] has shape \(2, 4\)"):
        buffer.add(obs, bad, action, [1, 2], np.zeros(2), np.zeros(2))
    assert_same_arrays(host_state(buffer), before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_env_values_of_another_dtype_are_cast_not_copied_as_bytes(backend: str) -> None:
    # One env on numpy writes a row as the bytes of its values: an int32 goal has the
    # bytes of no float32 number it holds, a float64 twice the bytes, a view no bytes of
    # its own. Each must arrive as the number, like a float32 array of its shape.
    buffer = make_buffer(backend, 40, 1)
    wide = np.arange(12, dtype=np.float32).reshape(1, 12)
    obs = {
        "observation": wide[:, ::4],  # a strided view
        "achieved_goal": np.array([[1, 2, 3]], np.int32),
        "desired_goal": np.array([[7, 8, 9]], np.float64),
    }
    next_obs = {key: np.asarray(value, np.float32) + 10 for key, value in obs.items()}
    action = np.array([[0.5, -1, 2]], np.int32)
    buffer.add(obs, next_obs, action, np.array([-1], np.int32), [False], [True])
    f = {name: to_numpy(value) for name, value in buffer.state().fields.items()}
    for side, values in (("obs", obs), ("next_obs", next_obs)):
        for key, value in values.items():
            np.testing.assert_array_equal(f[f"{side}/{key}"][0], np.asarray(value, np.float32))
    np.testing.assert_array_equal(f["action"][0], [[0, -1, 2]])
    assert f["reward"][0, 0] == -1.0
    # float32 values of the stored shapes take the fast write: the same numbers.
    buffer.add(next_obs, next_obs, np.float32(action), np.array([-2], np.float32), [0], [1])
    f = {name: to_numpy(value) for name, value in buffer.state().fields.items()}
    np.testing.assert_array_equal(f["obs/observation"][1], [[10, 14, 18]])
    np.testing.assert_array_equal(f["action"][1], [[0, -1, 2]])
    assert f["reward"][1, 0] == -2.0


@pytest.mark.parametrize("backend", TORCH)
def test_a_device_buffer_stores_numpy_steps_as_the_numpy_buffer_does(backend: str) -> None:
    # Numpy envs feeding a device buffer: every value, the all-False flags of the steps
    # within an episode included, is copied onto the device.
    ours, theirs = make_buffer(backend, 40, 2), make_buffer("numpy", 40, 2)
    for t in range(12):
        obs = {key: np.full((2, 3), t, np.float32) for key in TAG_SPACE.spaces}
        step = (obs, obs, np.full((2, 3), -t, np.float32), np.full(2, t, np.float32))
        flags = (np.zeros(2, bool), np.array([t % 5 == 4, t % 3 == 2]))
        for buffer in (ours, theirs):
            buffer.add(*step, *flags)
    assert_same_arrays(host_state(ours), host_state(theirs))


@pytest.mark.parametrize("backend", BACKENDS)
def test_done_flags_of_any_dtype_end_exactly_the_flagged_episodes(backend: str) -> None:
    buffer = make_buffer(backend, 40, 2)
    obs = {key: np.zeros((2, 3), np.float32) for key in TAG_SPACE.spaces}
    action, reward = np.zeros((2, 3), np.float32), np.zeros(2, np.float32)
    flags = [
        (np.zeros(2, np.uint8), np.zeros(2, np.float64)),  # nothing ends
        (np.zeros(2, np.int8), np.array([0.0, 0.5])),  # env 1 truncated
        (np.array([1, 0], np.uint8), np.zeros(2, np.int64)),  # env 0 terminated
        (np.array([0, 3], np.int8), np.array([True, False])),  # env 1 terminated, 0 truncated
    ]
    for terminated, truncated in flags:
        buffer.add(obs, obs, action, reward, terminated, truncated)
    assert buffer.n_transitions == 3 + 1 + 2 + 2 and buffer.episodes_in_progress == 0
    f = buffer.state().fields
    np.testing.assert_array_equal(to_numpy(f["terminated"][:4]), [[0, 0], [0, 0], [1, 0], [0, 1]])
    np.testing.assert_array_equal(to_numpy(f["truncated"][:4]), [[0, 0], [0, 1], [0, 0], [1, 0]])
    np.testing.assert_array_equal(
        to_numpy(f["episode_start"][:4]), [[0, 0], [0, 0], [0, 2], [3, 2]]
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("handle_timeout", [True, False])
def test_terminated_and_truncated_stay_apart(backend: str, handle_timeout: bool) -> None:
    def one_step_episodes(terminated: bool) -> Any:
        buffer = make_buffer(
            backend, 40, 2, handle_timeout_termination=handle_timeout, n_sampled_goal=0
        )
        writer = Writer(buffer, [[1] * 10, [1] * 10])
        for _ in range(5):
            writer.add_step(terminated=terminated)
        return to_numpy(buffer.sample(64).dones)

    truncated = one_step_episodes(False)
    assert truncated.dtype == np.float32
    np.testing.assert_array_equal(truncated, np.full(64, 0.0 if handle_timeout else 1.0))
    np.testing.assert_array_equal(one_step_episodes(True), np.ones(64))


def reached(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
    return achieved_goal[..., 2] == desired_goal[..., 2]  # the goal's step index


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rule", [reached, False, np.False_, np.array(False), np.array([True])])
def test_compute_terminated_recomputes_done_for_relabeled_goals_only(
    backend: str, rule: Any
) -> None:
    # A constant (Fetch's compute_terminated returns a plain False) stands for the batch.
    terminated = rule if callable(rule) else lambda a, d, i: rule
    buffer, writer = tagged(
        backend, 120, [[4] * 20, [6] * 20], 40, compute_terminated=terminated, seed=4
    )
    batch = buffer.sample(2000)
    relabeled = check_batch(batch, writer, GoalSelectionStrategy.FUTURE)
    batch = numpy_batch(batch)
    hit = reached(batch.next_observations["achieved_goal"], batch.observations["desired_goal"], 0)
    expected = hit if callable(rule) else np.full(2000, bool(np.asarray(rule).item()))
    np.testing.assert_array_equal(batch.dones[relabeled], expected[relabeled])
    np.testing.assert_array_equal(batch.dones[~relabeled], 0.0)  # stored: truncations
    assert relabeled.any() and (not callable(rule) or 0 < batch.dones[relabeled].mean() < 1)
    buffer.compute_terminated = lambda a, d, i: np.zeros(7, bool)
    with pytest.raises(ValueError, match=r"compute_terminated returned shape \(7,\) for a batch"):
        buffer.sample(300)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reward_of_one_value_for_the_batch_is_refused_and_so_is_a_wrong_shape(
    backend: str,
) -> None:
    # Broadcast, one value would pay every relabeled transition the reward of one pair.
    def constant_reward(achieved_goal: Any, desired_goal: Any, info: Any) -> float:
        return -1.0

    buffer, _ = tagged(backend, 40, [[5] * 20], 12, seed=0, compute_reward=constant_reward)
    with pytest.raises(
        ValueError,
        match=r"^constant_reward returned shape \(\) for a batch of 200 goal pairs "
        r"\(achieved_goal and desired_goal of shape \(200, 3\)\); expected \(200,\)",
    ):
        buffer.sample(200)
    buffer.compute_reward = lambda a, d, i: np.zeros((200, 2))
    with pytest.raises(ValueError, match=r"returned shape \(200, 2\) for a batch of 200 goal"):
        buffer.sample(200)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("as_list", [False, True])
def test_info_values_are_stored_by_key_and_the_batch_rewarded_in_one_call(
    backend: str, as_list: bool
) -> None:
    seen = []

    def reward(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        seen.append(info)
        return tag_reward(achieved_goal, desired_goal, info) + 1000 * info["penalty"]

    buffer = make_buffer(backend, 60, 2, compute_reward=reward, info_keys=("penalty",), seed=2)
    writer = Writer(buffer, [[3] * 20, [5] * 20])
    for step in range(20):
        penalty = np.array([step, 100 + step], np.float32)
        if as_list:  # SB3's infos: a list of dicts; a vector env's: a dict of arrays
            infos: Any = [{"penalty": float(p), "other": "x"} for p in penalty]
        else:
            infos = {"penalty": writer.convert(penalty)}
        writer.add_step(infos)
    batch = numpy_batch(buffer.sample(500))
    assert len(seen) == 1  # the whole batch in one compute_reward call
    (info,) = seen
    assert set(info) == {"penalty"} and tuple(info["penalty"].shape) == (500,)
    assert isinstance(info["penalty"], np.ndarray if backend == "numpy" else torch.Tensor)
    # The penalty of a transition was its add() number (+100 for env 1), from the tags.
    penalty = to_numpy(info["penalty"])
    tags = batch.observations["observation"].astype(int)
    length = np.where(tags[:, 0] == 0, 3, 5)
    np.testing.assert_array_equal(penalty, tags[:, 1] * length + tags[:, 2] + 100 * tags[:, 0])
    relabeled = batch.observations["desired_goal"][:, 0] >= 0
    expected = tag_reward(
        batch.next_observations["achieved_goal"], batch.observations["desired_goal"], None
    )
    np.testing.assert_allclose(
        batch.rewards[relabeled], (expected + 1000 * penalty)[relabeled], rtol=1e-6
    )


# ---------------------------------------------------------------------- prioritized


@pytest.mark.parametrize("backend", BACKENDS)
def test_prioritized_draws_only_intact_episodes_through_ring_wraps(backend: str) -> None:
    buffer = make_buffer(backend, 3 * 23, 3, prioritized=True, seed=8)
    writer = Writer(buffer, [[4, 6, 5, 3, 7, 1] * 30, [2, 9, 3] * 50, [5] * 100])
    for steps in (9, 31, 40):
        for _ in range(steps):
            writer.add_step()
        batch = buffer.sample(400)
        buffer.update_priorities(batch.indices, to_numpy(batch.rewards) % 7 + 0.1)
        tags = to_numpy(batch.observations["observation"]).astype(int)
        intact = writer.intact_episodes()
        assert buffer.n_transitions == sum(intact.values())
        for e, m, i in tags:
            assert (e, m) in intact and 0 <= i < intact[(e, m)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_update_priorities_rejects_what_it_cannot_use(backend: str) -> None:
    # It never clamps an index nor keeps a priority that is not finite.
    buffer, writer = tagged(backend, 20, [[4] * 5], 8, prioritized=True, seed=0)
    indices = to_numpy(buffer.sample(4).indices)
    before = host_state(buffer)
    for bad in (-1, 10_000):
        wrong = indices.copy()
        wrong[0] = bad
        with pytest.raises(ValueError, match=r"indices must be in \[0, 20\)"):
            buffer.update_priorities(writer.convert(wrong), np.ones(4, np.float32))
    for bad in (np.nan, np.inf, -np.inf):
        td_errors = np.array([0.1, bad, 0.2, 0.3], np.float32)
        with pytest.raises(ValueError, match=r"td_errors\[1\] = (nan|-?inf); expected finite"):
            buffer.update_priorities(writer.convert(indices), td_errors)
    with pytest.raises(ValueError, match=r"indices has shape \(3,\) and td_errors shape \(2,\)"):
        buffer.update_priorities(np.array([0, 1, 2]), np.array([0.1, 0.2]))
    with pytest.raises(TypeError, match="indices must be integers"):
        buffer.update_priorities(np.array([0.5]), np.array([0.1]))
    buffer.update_priorities(np.array([], np.int64), np.array([], np.float32))  # a no-op
    assert_same_arrays(host_state(buffer), before)
    with pytest.raises(RuntimeError, match="needs a prioritized buffer"):
        make_buffer(backend, 20, 1).update_priorities(np.array([0]), np.array([0.1]))
    buffer.beta = 0.7
    with pytest.raises(ValueError, match=r"beta must be in \[0, 1\], got 1.2"):
        buffer.beta = 1.2
    assert buffer.beta == 0.7


# ---------------------------------------------------------------------- settings, bad input


def test_the_repr_names_the_settings_that_shape_the_draws() -> None:
    assert repr(make_buffer("numpy", 20, 2, n_sampled_goal=2)) == (
        "HerReplayBuffer(buffer_size=20, n_envs=2, n_sampled_goal=2, "
        "goal_selection_strategy='future', n_transitions=0)"
    )
    mixed = make_buffer("cpu", 20, 1, goal_mix="future=0.5,original=0.5", goal_mix_warmup=8)
    assert repr(mixed) == (
        "DeviceHerReplayBuffer(buffer_size=20, n_envs=1, goal_mix='future=0.5,original=0.5', "
        "goal_mix_warmup=8, device='cpu', n_transitions=0)"
    )


def built_error(backend: str, **kwargs: Any) -> BaseException:
    with pytest.raises((TypeError, ValueError)) as caught:
        make_buffer(backend, 20, kwargs.pop("n_envs", 1), **{"seed": 0, **kwargs})
    return caught.value


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"n_envs": 0}, ValueError, "n_envs must be >= 1, got 0"),
        ({"n_envs": 1.5}, TypeError, r"n_envs must be an int, got 1.5 \(float\)"),
        ({"prioritized": "yes"}, TypeError, "prioritized must be a bool, got 'yes'"),
        ({"alpha": 1.5}, ValueError, r"alpha must be in \[0, 1\], got 1.5"),
        ({"alpha": -0.1}, ValueError, r"alpha must be in \[0, 1\], got -0.1"),
        ({"alpha": "high"}, TypeError, "alpha must be a float"),
        ({"beta": "x"}, TypeError, r"beta must be a float in \[0, 1\], got 'x'"),
        ({"priority_eps": 0.0}, ValueError, "priority_eps must be a positive finite float"),
        ({"priority_eps": True}, TypeError, "priority_eps must be a float, got True"),
        ({"n_sampled_goal": -1}, ValueError, "n_sampled_goal must be >= 0, got -1"),
        ({"n_envs": 11}, ValueError, "buffer_size=20 gives 1 rows per env for n_envs=11"),
        ({"info_keys": "scale"}, TypeError, "info_keys must be a sequence of strings"),
        ({"seed": 1.0}, TypeError, "seed must be an int or None, got 1.0"),
        ({"compute_reward": 42}, TypeError, "compute_reward must be a goal env"),
        ({"goal_selection_strategy": "later"}, ValueError, r"'later' is not valid; expected one"),
        ({"observation_space": spaces.Box(0, 1, (2,))}, TypeError, "must be a gymnasium.spaces"),
        ({"observation_space": spaces.Dict(a=TAG_ACTIONS)}, ValueError, "'achieved_goal' is"),
        ({"action_space": spaces.Tuple([TAG_ACTIONS])}, TypeError, "Box, Discrete or MultiBin"),
    ],
)
def test_a_bad_setting_fails_with_the_same_message_on_every_face(
    kwargs: dict[str, Any], error: type, message: str
) -> None:
    for backend in ("numpy", "cpu"):
        caught = built_error(backend, **dict(kwargs))
        assert type(caught) is error and re.search(message, str(caught)), (backend, caught)


@pytest.mark.parametrize("backend", BACKENDS)
def test_add_and_sample_reject_bad_inputs_with_the_same_messages(backend: str) -> None:
    buffer = make_buffer(backend, 20, 1, info_keys=("scale",))
    obs = {k: np.zeros((1, 3), np.float32) for k in TAG_SPACE.spaces}
    good = dict(
        obs=obs,
        next_obs=obs,
        action=np.zeros((1, 3), np.float32),
        reward=np.zeros(1, np.float32),
        terminated=np.zeros(1, bool),
        truncated=np.zeros(1, bool),
        infos={"scale": np.ones(1, np.float32)},
    )
    cases = [
        ({"obs": [1, 2]}, TypeError, "obs must be a dict of"),
        ({"obs": {"observation": obs["observation"]}}, ValueError, "obs has keys"),
        (
            {"next_obs": {**obs, "achieved_goal": np.zeros((1, 4), np.float32)}},
            ValueError,
            r"next_obs\['achieved_goal'\] has shape \(1, 4\), expected \(1, 3\)",
        ),
        ({"action": np.zeros(3, np.float32)}, ValueError, r"action has shape \(3,\), expected"),
        ({"reward": np.zeros(2, np.float32)}, ValueError, r"reward has shape \(2,\), expected"),
        ({"infos": {}}, KeyError, "infos has no 'scale'"),
        ({"infos": [{}]}, KeyError, "an info dict has no 'scale'"),
        ({"infos": 3}, TypeError, "infos must be a dict of per-env"),
    ]
    for change, error, message in cases:
        with pytest.raises(error, match=message):
            buffer.add(**{**good, **change})
    assert buffer.state().steps_added == 0  # nothing was stored
    good["truncated"] = np.ones(1, bool)
    buffer.add(**good)
    assert buffer.n_transitions == 1
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        buffer.sample(0)
    with pytest.raises(TypeError, match=r"batch_size must be an int, got 2\.0"):
        buffer.sample(2.0)


@pytest.mark.parametrize("backend", TORCH)
def test_the_torch_face_names_a_bad_device(backend: str) -> None:
    with pytest.raises(ValueError, match=r"device='tpu9' is not a torch device"):
        make_buffer("tpu9", 40, 2)
    with pytest.raises(TypeError, match="device"):
        DeviceHerReplayBuffer(40, TAG_SPACE, TAG_ACTIONS, tag_reward)  # device is required
    buffer = make_buffer(backend, 40, 2)
    obs = {k: torch.zeros(2, 3, device=backend) for k in TAG_SPACE.spaces}
    flags = torch.zeros(2, dtype=torch.bool, device=backend)
    reward = torch.zeros(2, device=backend)
    with pytest.raises(ValueError, match=r"action is a tensor on meta, expected one on"):
        buffer.add(obs, obs, torch.zeros(2, 3, device="meta"), reward, flags, flags)


# ---------------------------------------------------------------------- copies, state, files


def filled(backend: str, **kwargs: Any) -> Any:
    """One env, episodes of 4 (truncated): two complete and one in progress (2 steps)."""
    buffer, writer = tagged(backend, 20, [[4] * 10], 10, seed=0, **kwargs)
    assert buffer.episodes_in_progress == 1 and buffer.n_transitions == 8
    return buffer, writer


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_a_copy_or_unpickled_buffer_samples_alike_and_goes_on_alone(backend: str, how: str) -> None:
    buffer, writer = filled(backend, prioritized=True)
    before = host_state(buffer)
    twin = {
        "copy": copy.copy,
        "deepcopy": copy.deepcopy,
        "pickle": lambda b: pickle.loads(pickle.dumps(b)),
    }[how](buffer)
    assert type(twin) is type(buffer) and twin.device == buffer.device
    assert twin.episodes_in_progress == 1 and twin.n_transitions == 8
    assert how != "copy" or twin.compute_reward is buffer.compute_reward
    assert_same_arrays(host_state(twin), before)
    assert_same_batches(buffer, twin)
    # The twin writes into its own storage (its packed fields too), through a ring wrap;
    # the original is left as it was.
    after_sampling = host_state(buffer)
    twin_writer = copy.deepcopy(writer)
    twin_writer.buffer = twin
    for _ in range(22):  # 32 transitions in 20 rows: the episodes of counters 12..31
        twin_writer.add_step()
    assert twin.n_transitions == 20 and twin.episodes_in_progress == 0
    check_batch(twin.sample(300), twin_writer, GoalSelectionStrategy.FUTURE)
    assert_same_arrays(host_state(buffer), after_sampling)
    assert buffer.n_transitions == 8 and buffer.episodes_in_progress == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_buffer_rebuilt_from_its_state_is_the_same_buffer(backend: str) -> None:
    buffer, writer = filled(backend)
    state = buffer.state()
    assert state.steps_added == 10 and state.settings == buffer.settings
    rebuilt = type(buffer).from_state(state.copy(), tag_reward)
    assert rebuilt.episodes_in_progress == 1 and rebuilt.n_transitions == 8
    assert_same_arrays(host_state(rebuilt), host_state(buffer))
    assert_same_batches(buffer, rebuilt)
    writer.add_step()  # into the original only: the copy's arrays are its own
    assert rebuilt.state().steps_added == 10
    # Without copy() the rebuilt buffer works on the state's own arrays.
    shared = type(buffer).from_state(buffer.state(), tag_reward)
    assert shared.state().records is buffer.state().records
    # A bare object brought to life by the two pickle hooks is the buffer too.
    # (the state in between shares the buffer's arrays: a pickle copies them).
    bare = type(buffer).__new__(type(buffer))
    bare.__setstate__(buffer.__getstate__())
    assert bare.episodes_in_progress == 1 and bare.n_transitions == 8
    bare.truncate_last_trajectory()
    assert bare.n_transitions == 11  # the open episode's three steps


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_state_that_does_not_fit_its_settings_is_a_clear_error(backend: str) -> None:
    buffer, _ = filled(backend)
    state = buffer.state()
    short = dict(state.fields, episode_start=state.fields["episode_start"][:-1])
    bad = dataclasses.replace(state, fields=short, records=None)
    with pytest.raises(ValueError, match=r"'episode_start'\] has shape \(19, 1\); expected its"):
        type(buffer).from_state(bad, tag_reward)
    with pytest.raises(TypeError, match="state must be a BufferState, got dict"):
        type(buffer).from_state({"records": None}, tag_reward)


def test_a_buffer_pickled_by_an_earlier_goalenvs_is_a_clear_error() -> None:
    # goalenvs 0.1.0 pickled a device buffer as its __dict__ (a "_state" dict of tensors).
    legacy = {"_state": {"records": torch.zeros(2, 1, 3)}, "compute_reward": tag_reward}
    bare = DeviceHerReplayBuffer.__new__(DeviceHerReplayBuffer)
    with pytest.raises(ValueError, match=r"pickled by an earlier goalenvs.*DeviceHerReplayBuffer"):
        bare.__setstate__(legacy)


@pytest.mark.parametrize("saved_on", BACKENDS)
@pytest.mark.parametrize("loaded_on", BACKENDS)
def test_a_saved_file_loads_on_either_module_as_the_truncated_twin(
    saved_on: str, loaded_on: str, tmp_path: Path
) -> None:
    buffer = make_buffer(
        saved_on, 3 * 20, 3, seed=9, n_sampled_goal=2, goal_selection_strategy="episode",
        handle_timeout_termination=False, prioritized=True, alpha=0.5, priority_eps=1e-4,
    )  # fmt: skip
    buffer.beta = 0.55  # the live value is saved, not the constructor's
    writer = Writer(buffer, [[4, 6, 5, 3] * 10, [2, 9] * 10, [5] * 20])
    for _ in range(37):  # wraps the 20-row rings; every env stops mid-episode
        writer.add_step()
    before = host_state(buffer)
    path = tmp_path / "buffer.npz"
    buffer.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["buffer.npz"]  # no temporary file left
    assert_same_arrays(host_state(buffer), before)  # the live buffer keeps its open episodes
    device = None if loaded_on == "numpy" else loaded_on
    loaded = type(make_buffer(loaded_on, 20, 1)).load(path, tag_reward, device=device)
    assert loaded.device == make_buffer(loaded_on, 20, 1).device
    for name in ("buffer_size", "n_envs", "n_sampled_goal", "goal_selection_strategy",
                 "handle_timeout_termination", "info_keys", "prioritized", "alpha", "beta",
                 "priority_eps", "observation_space", "action_space"):  # fmt: skip
        assert getattr(loaded, name) == getattr(buffer, name), name
    assert loaded.beta == 0.55 and loaded.episodes_in_progress == 0
    twin = copy.deepcopy(buffer)  # what the file holds: the open episodes truncated
    twin.truncate_last_trajectory()
    assert loaded.n_transitions == twin.n_transitions == buffer.n_transitions + sum(writer.step)
    assert_same_arrays(host_state(loaded), host_state(twin))
    if saved_on == loaded_on:  # the generator's state was saved too
        assert_same_batches(twin, loaded)
    # It keeps collecting: the cut episodes ended, the envs go on with new ones.
    for e in range(3):
        writer.end_episode(e)
    writer.buffer = loaded
    for _ in range(12):
        writer.add_step()
    batch = loaded.sample(300)
    check_batch(batch._replace(weights=np.ones(300)), writer, GoalSelectionStrategy.EPISODE)
    assert to_numpy(batch.observations["observation"])[:, 1].max() == max(writer.episode) - 1


# ---------------------------------------------------------------------- torch specifics


@pytest.mark.parametrize("env_id", ["goalenvs/PointReach-v0", "goalenvs/BitFlipping-v0"])
@pytest.mark.parametrize("backend", TORCH)
def test_a_device_twin_fills_the_buffer_and_rewards_match_its_compute_reward(
    backend: str, env_id: str, tmp_path: Path
) -> None:
    env = gym.make_vec(env_id, num_envs=16, device=backend, autoreset_mode="same_step")
    discrete = isinstance(env.single_action_space, spaces.Discrete)
    buffer = DeviceHerReplayBuffer(
        16 * 200, env.single_observation_space, env.single_action_space, env, n_envs=16,
        device=backend, seed=0,
    )  # fmt: skip
    obs, _ = env.reset(seed=0)
    generator = torch.Generator(device=backend).manual_seed(0)
    for _ in range(120):
        if discrete:  # an int64 store beside the float32 records
            action = torch.randint(0, 10, (16,), generator=generator, device=backend)
        else:
            action = torch.rand((16, 2), generator=generator, device=backend) * 2 - 1
        next_obs, reward, terminated, truncated, info = env.step(action)
        real_next = {k: v.clone() for k, v in next_obs.items()}
        if "final_obs" in info:  # the ended episodes' last observations, as the trainer does
            for i in np.flatnonzero(info["_final_obs"].cpu().numpy()):
                for key in real_next:
                    real_next[key][i] = info["final_obs"][i][key]
        buffer.add(obs, real_next, action, reward, terminated, truncated, info)
        obs = next_obs
    assert buffer.n_transitions > 0
    batch = buffer.sample(512)
    for value in (*batch.observations.values(), batch.rewards, batch.dones, batch.indices):
        assert value.device == buffer.device
    expected = env.unwrapped.compute_reward(
        batch.next_observations["achieved_goal"], batch.observations["desired_goal"], {}
    )
    torch.testing.assert_close(batch.rewards, expected)
    assert batch.actions.dtype == (torch.int64 if discrete else torch.float32)
    assert batch.indices.dtype == torch.int64
    buffer.save(tmp_path / "buffer.npz")
    loaded = DeviceHerReplayBuffer.load(tmp_path / "buffer.npz", env)
    ours, theirs = loaded.state(), buffer.state(truncate_in_progress=True)
    assert ours.fields.keys() == theirs.fields.keys()  # every column of the records included
    for name, value in theirs.fields.items():
        torch.testing.assert_close(ours.fields[name], value, msg=name)


@pytest.mark.parametrize("backend", TORCH)
def test_the_host_reads_the_device_about_once_per_ring_cycle(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4 envs, 50 rows, episodes of 10: after the first read, the next ones come when the
    # newest ended episode could have been overwritten (every ~40 adds), never per batch.
    buffer = make_buffer(backend, 4 * 50, 4, seed=0)
    reads = []
    original = DeviceHerReplayBuffer._read_horizons

    def counted(self: DeviceHerReplayBuffer) -> None:
        reads.append(self.state().steps_added)
        original(self)

    monkeypatch.setattr(DeviceHerReplayBuffer, "_read_horizons", counted)
    writer = Writer(buffer, [[10] * 100] * 4)
    for _ in range(9):
        writer.add_step()
    assert not buffer.can_sample()
    writer.add_step()
    for _ in range(190):
        writer.add_step()
        assert buffer.can_sample()
        buffer.sample(64)
    assert 2 <= len(reads) <= 8, reads  # over 190 samples and 200 adds


class _NoHostRead:
    """Makes every Python-level way a tensor's value reaches the host raise (bool(),
    int(), float(), .item(), .tolist(), .cpu(), .numpy(), nonzero): on the CPU, where
    torch's sync debug mode does not look."""

    NAMES = ("__bool__", "__int__", "__float__", "__index__", "item", "tolist", "cpu",
             "numpy", "nonzero")  # fmt: skip

    def __enter__(self) -> None:
        self.saved = {name: getattr(torch.Tensor, name) for name in self.NAMES}

        def refuse(name: str) -> Any:
            def method(*args: Any, **kwargs: Any) -> Any:
                raise AssertionError(f"sample read a tensor on the host: Tensor.{name}")

            return method

        for name in self.NAMES:
            setattr(torch.Tensor, name, refuse(name))
        self.nonzero, torch.nonzero = torch.nonzero, refuse("torch.nonzero")

    def __exit__(self, *exc: Any) -> None:
        for name, method in self.saved.items():
            setattr(torch.Tensor, name, method)
        torch.nonzero = self.nonzero


@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("backend", TORCH)
def test_sample_reads_nothing_on_the_host_once_can_sample_said_yes(
    backend: str, strategy: GoalSelectionStrategy, prioritized: bool
) -> None:
    # What a CUDA graph capture of sample needs: no host read, so no data-dependent shape
    # or branch, whatever the strategy, the handling of timeouts or the priorities.
    def done_if_close(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        return (achieved_goal - desired_goal).abs().sum(-1) < 1.0

    buffer = make_buffer(
        backend, 3 * 40, 3, goal_selection_strategy=strategy, prioritized=prioritized, seed=6,
        compute_terminated=done_if_close, handle_timeout_termination=False,
    )  # fmt: skip
    writer = Writer(buffer, [[4, 6, 5] * 20, [2, 9] * 20, [5] * 40])
    for _ in range(30):
        writer.add_step()
    assert buffer.can_sample()
    if backend == "cuda":
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            batch = buffer.sample(128)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    else:
        with _NoHostRead():
            batch = buffer.sample(128)
    if prioritized:
        batch = batch._replace(weights=torch.ones(128))
    check_batch(batch, writer, strategy)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prioritized", [False, True])
def test_the_seed_makes_the_draws_and_rng_or_generator_draws_them(
    backend: str, prioritized: bool
) -> None:
    buffers = [
        tagged(backend, 60, [[5] * 20, [3] * 20], 15, seed=7, prioritized=prioritized)[0]
        for _ in range(2)
    ]
    numpy_face = backend == "numpy"
    source = buffers[1].rng if numpy_face else buffers[1].generator
    assert isinstance(source, np.random.Generator if numpy_face else torch.Generator)
    assert (buffers[1].generator if numpy_face else buffers[1].rng) is None
    assert numpy_face or source.device == buffers[1].device
    assert_same_batches(*buffers)
    if numpy_face:  # one draw more: the next batches differ
        source.random()
    else:
        torch.rand(1, generator=source, device=source.device)
    a, b = buffers[0].sample(64), buffers[1].sample(64)
    assert (to_numpy(a.indices) != to_numpy(b.indices)).any()


@pytest.mark.parametrize("prioritized", [False, True])
@CUDA
def test_a_sample_captured_in_a_cuda_graph_replays_fresh_draws_of_what_the_buffer_holds(
    prioritized: bool,
) -> None:
    # The trainer captures its update, sampling included: each replay must draw anew from
    # the buffer as it is then (new episodes in, old ones retired), and a new beta counts.
    buffer, writer = tagged(
        "cuda", 4 * 40, [[10] * 100] * 4, 30, seed=0, prioritized=prioritized, beta=1.0
    )
    assert buffer.can_sample()  # reads the horizons now, not inside the capture
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            buffer.sample(256)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(buffer.generator)
    with torch.cuda.graph(graph):
        batch = buffer.sample(256)
    graph.replay()  # a capture runs no kernel: the batch holds draws after a replay
    indices = []
    for _ in range(4):
        for _ in range(25):  # ends 10 episodes, retires the oldest
            writer.add_step()
        assert buffer.can_sample()
        if prioritized:
            buffer.update_priorities(batch.indices, torch.arange(256.0, device="cuda") % 5)
        graph.replay()
        torch.cuda.synchronize()
        checked = batch
        if prioritized:
            checked = batch._replace(weights=torch.ones(256))
            assert batch.weights.min() < 1.0  # unequal priorities: unequal weights
        check_batch(checked, writer, GoalSelectionStrategy.FUTURE)
        tags = to_numpy(batch.observations["observation"]).astype(int)
        assert tags[:, 1].max() == max(writer.episode) - 1  # the newest episodes are drawn
        indices.append(to_numpy(batch.indices).copy())
    assert not (indices[0] == indices[1]).all()  # each replay draws anew
    if prioritized:
        buffer.beta = 0.0  # no correction: every weight 1, in the next replay
        graph.replay()
        np.testing.assert_array_equal(to_numpy(batch.weights), np.ones(256, np.float32))


def test_device_buffer_is_exported_without_loading_torch_at_import() -> None:
    import subprocess
    import sys

    import goalenvs.her

    assert goalenvs.her.DeviceHerReplayBuffer is DeviceHerReplayBuffer
    assert "DeviceHerReplayBuffer" in goalenvs.her.__all__
    code = "import sys, goalenvs.her; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
