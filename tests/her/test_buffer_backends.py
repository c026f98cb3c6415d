"""The HER buffer's semantics held on both backends: HerReplayBuffer (numpy) and
DeviceHerReplayBuffer (torch, on the CPU here; the CUDA variants skip without a GPU).

The buffers are filled with *tagged* transitions (as test_buffer.py): every observation of
env ``e``, episode ``m`` (counted per env), step ``i`` carries ``(e, m, i)`` in its
observation and achieved goal, and the episode's own desired goal is ``(-1, e, m)``, so a
sampled batch says where every value came from. :class:`Writer` models which episodes are
complete and intact in the ring (an episode of ``T`` transitions spends ``T`` rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

import goalenvs  # noqa: F401  (registers the env ids)
from goalenvs.her import GoalSelectionStrategy, HerBatch, HerReplayBuffer
from goalenvs.her.device_buffer import DeviceHerReplayBuffer

BIG = 1e6
TAG_SPACE = spaces.Dict(
    observation=spaces.Box(-BIG, BIG, (3,), np.float32),
    achieved_goal=spaces.Box(-BIG, BIG, (3,), np.float32),
    desired_goal=spaces.Box(-BIG, BIG, (3,), np.float32),
)
TAG_ACTIONS = spaces.Box(-BIG, BIG, (3,), np.float32)
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
BACKENDS = ["numpy", "cpu", pytest.param("cuda", marks=CUDA)]
STRATEGIES = list(GoalSelectionStrategy)


def tag_reward(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
    """A reward that differs for every goal pair, on numpy arrays or tensors alike."""
    a, d = achieved_goal, desired_goal
    return (a[..., 0] + 10 * a[..., 1] + 100 * a[..., 2]) - (
        3 * d[..., 0] + 7 * d[..., 1] + 11 * d[..., 2]
    )


def stored_reward(env: Any, episode: Any, step: Any) -> np.ndarray:
    """The reward written at add(): never what tag_reward gives, so relabeling shows."""
    return (0.5 + np.asarray(env) + 1000.0 * np.asarray(episode) + 0.001 * np.asarray(step)).astype(
        np.float32
    )


def make_buffer(backend: str, buffer_size: int, n_envs: int, **kwargs: Any) -> Any:
    kwargs.setdefault("compute_reward", tag_reward)
    observation_space = kwargs.pop("observation_space", TAG_SPACE)
    action_space = kwargs.pop("action_space", TAG_ACTIONS)
    reward = kwargs.pop("compute_reward")
    if backend == "numpy":
        return HerReplayBuffer(
            buffer_size, observation_space, action_space, reward, n_envs=n_envs, **kwargs
        )
    return DeviceHerReplayBuffer(
        buffer_size,
        observation_space,
        action_space,
        reward,
        n_envs=n_envs,
        device=backend,
        **kwargs,
    )


def to_numpy(value: Any) -> np.ndarray:
    return value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def numpy_batch(batch: HerBatch) -> HerBatch:
    return HerBatch(
        {k: to_numpy(v) for k, v in batch.observations.items()},
        to_numpy(batch.actions),
        to_numpy(batch.rewards),
        {k: to_numpy(v) for k, v in batch.next_observations.items()},
        to_numpy(batch.dones),
        to_numpy(batch.weights),
        to_numpy(batch.indices),
    )


class Writer:
    """Feeds a buffer tagged episodes of given lengths per env and models which stay intact."""

    def __init__(self, buffer: Any, lengths: list[list[int]]) -> None:
        self.buffer = buffer
        self.lengths = lengths
        n = buffer.n_envs
        self.device = getattr(buffer, "device", None)
        self.final_row = 0  # rows an episode spends beyond its transitions
        self.episode = [0] * n
        self.step = [0] * n
        self.rows_written = [0] * n
        self.episode_rows: list[dict[int, tuple[int, int]]] = [{} for _ in range(n)]

    def obs(self, env: int, episode: int, step: int) -> dict[str, np.ndarray]:
        tag = np.array([env, episode, step], np.float32)
        return {
            "observation": tag,
            "achieved_goal": tag.copy(),
            "desired_goal": np.array([-1, env, episode], np.float32),
        }

    def convert(self, value: np.ndarray) -> Any:
        return value if self.device is None else torch.as_tensor(value, device=self.device)

    def add_step(self, infos: Any = None, terminated: bool = False) -> None:
        n = self.buffer.n_envs
        rows = [self.obs(e, self.episode[e], self.step[e]) for e in range(n)]
        next_rows = [self.obs(e, self.episode[e], self.step[e] + 1) for e in range(n)]
        done = np.array(
            [self.step[e] + 1 >= self.lengths[e][self.episode[e]] for e in range(n)], bool
        )
        flags = (done, np.zeros(n, bool)) if terminated else (np.zeros(n, bool), done)
        self.buffer.add(
            {k: self.convert(np.stack([r[k] for r in rows])) for k in TAG_SPACE.spaces},
            {k: self.convert(np.stack([r[k] for r in next_rows])) for k in TAG_SPACE.spaces},
            self.convert(np.stack([r["observation"] for r in rows])),
            self.convert(stored_reward(np.arange(n), self.episode, self.step)),
            self.convert(flags[0]),
            self.convert(flags[1]),
            infos,
        )
        for e in range(n):
            if self.step[e] == 0:
                self.episode_rows[e][self.episode[e]] = (self.rows_written[e], -1)
                self.rows_written[e] += self.final_row
            self.rows_written[e] += 1
            if done[e]:
                start, _ = self.episode_rows[e][self.episode[e]]
                self.episode_rows[e][self.episode[e]] = (start, self.step[e] + 1)
                self.episode[e] += 1
                self.step[e] = 0
            else:
                self.step[e] += 1

    def intact_episodes(self) -> dict[tuple[int, int], int]:
        """(env, episode) -> length of every complete episode with no row overwritten."""
        rows = self.buffer.rows_per_env
        out = {}
        for e in range(self.buffer.n_envs):
            oldest_row = self.rows_written[e] - rows
            for m, (start, length) in self.episode_rows[e].items():
                if length > 0 and start >= oldest_row:
                    out[(e, m)] = length
        return out


def check_batch(batch: HerBatch, writer: Writer, strategy: GoalSelectionStrategy) -> np.ndarray:
    """Asserts every provenance rule on a tagged batch; returns the relabeled mask."""
    batch = numpy_batch(batch)
    intact = writer.intact_episodes()
    obs, nxt = batch.observations, batch.next_observations
    tags = obs["observation"].astype(int)
    for e, m, i in tags:
        assert (e, m) in intact, f"sampled env {e} episode {m}, which is not complete and intact"
        assert 0 <= i < intact[(e, m)]
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
    goal_tags = goal[relabeled].astype(int)
    for (e, m, i), (ge, gm, gj) in zip(tags[relabeled], goal_tags, strict=True):
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


# ---------------------------------------------------------------------- relabeling


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_relabeled_goals_respect_strategy_episode_and_ring(
    backend: str, strategy: GoalSelectionStrategy
) -> None:
    # Three envs with episodes of different lengths that end at different steps, through
    # several wraps of a 23-row ring.
    n_envs, rows = 3, 23
    lengths = [[4, 6, 5, 3, 7, 1] * 30, [2, 9, 3] * 50, [5] * 100]
    for steps in (7, 40, 101):
        buffer = make_buffer(
            backend, rows * n_envs, n_envs, goal_selection_strategy=strategy, seed=steps
        )
        writer = Writer(buffer, lengths)
        for _ in range(steps):
            writer.add_step()
        intact = writer.intact_episodes()
        assert buffer.n_transitions == sum(intact.values())
        relabeled = check_batch(buffer.sample(600), writer, strategy)
        assert 0.65 < relabeled.mean() < 0.95  # k = 4: 0.8


@settings(max_examples=40, deadline=None)
@given(
    n_envs=st.integers(1, 4),
    rows_per_env=st.integers(10, 40),
    strategy=st.sampled_from(STRATEGIES),
    steps=st.integers(1, 120),
    lengths=st.lists(st.integers(1, 9), min_size=4, max_size=30),
    seed=st.integers(0, 2**16),
    prioritized=st.booleans(),
)
def test_device_buffer_samples_only_intact_episodes_for_any_lengths(
    n_envs: int,
    rows_per_env: int,
    strategy: GoalSelectionStrategy,
    steps: int,
    lengths: list[int],
    seed: int,
    prioritized: bool,
) -> None:
    buffer = make_buffer(
        "cpu",
        rows_per_env * n_envs,
        n_envs,
        goal_selection_strategy=strategy,
        seed=seed,
        prioritized=prioritized,
    )
    writer = Writer(buffer, [(lengths[e:] + lengths[:e]) * 100 for e in range(n_envs)])
    for _ in range(steps):
        writer.add_step()
    intact = writer.intact_episodes()
    assert buffer.n_transitions == sum(intact.values())
    if not intact:
        with pytest.raises(RuntimeError, match="before an episode has ended"):
            buffer.sample(8)
        return
    batch = buffer.sample(256)
    if prioritized:
        batch = batch._replace(weights=torch.ones(256))  # the weights are not all ones
    check_batch(batch, writer, strategy)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_sample_from_an_episode_in_progress_or_a_partly_overwritten_one(backend: str) -> None:
    # One env, 12 rows: episodes 0 and 1 of 4 steps, then 5 steps of episode 2 in
    # progress. Episode 0 has lost rows to the ring on both backends (numpy: rows 0..4
    # against writes up to row 15; device: transitions 0..3 against 13 adds), episode 1
    # is whole, episode 2 has not ended: every sample is from episode 1.
    buffer = make_buffer(backend, 12, 1, seed=3)
    writer = Writer(buffer, [[4, 4, 50]])
    for _ in range(13):
        writer.add_step()
    assert writer.intact_episodes() == {(0, 1): 4}
    assert buffer.n_transitions == 4
    batch = numpy_batch(buffer.sample(2000))
    episodes = batch.observations["observation"][:, 1]
    np.testing.assert_array_equal(episodes, np.ones(2000))
    steps = np.bincount(batch.observations["observation"][:, 2].astype(int), minlength=4)
    assert steps.min() > 400  # each of the 4 transitions ~500 times
    check_batch(buffer.sample(500), writer, GoalSelectionStrategy.FUTURE)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_ring_left_without_a_whole_episode_cannot_be_sampled(backend: str) -> None:
    # 10 rows: episode 0 (3 steps) is retired by the 8 steps of episode 1 in progress.
    buffer = make_buffer(backend, 10, 1, seed=0)
    writer = Writer(buffer, [[3, 9]])
    for _ in range(3):
        writer.add_step()
    assert buffer.sample(4).rewards.shape == (4,)
    for _ in range(8):
        writer.add_step()
    assert buffer.n_transitions == 0
    with pytest.raises(RuntimeError, match="before an episode has ended"):
        buffer.sample(4)
    if backend != "numpy":
        assert not buffer.can_sample()
        writer.add_step()  # episode 1 ends
        assert buffer.can_sample()


@pytest.mark.parametrize("backend", BACKENDS)
def test_sampling_before_any_complete_episode_is_an_error(backend: str) -> None:
    buffer = make_buffer(backend, 40, 2)
    writer = Writer(buffer, [[5], [6]])
    for _ in range(4):
        writer.add_step()
    with pytest.raises(RuntimeError, match="before an episode has ended"):
        buffer.sample(8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_episode_longer_than_the_ring_is_an_error(backend: str) -> None:
    buffer = make_buffer(backend, 8, 1)
    writer = Writer(buffer, [[100]])
    with pytest.raises(ValueError, match="use a larger buffer_size"):
        for _ in range(9):
            writer.add_step()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n_sampled_goal", [1, 4])
def test_relabel_fraction_is_k_over_k_plus_one(backend: str, n_sampled_goal: int) -> None:
    buffer = make_buffer(backend, 200, 2, n_sampled_goal=n_sampled_goal, seed=1)
    writer = Writer(buffer, [[5] * 40, [7] * 40])
    for _ in range(60):
        writer.add_step()
    batch = numpy_batch(buffer.sample(20_000))
    fraction = (batch.observations["desired_goal"][:, 0] >= 0).mean()
    # Binomial sd at 20k draws is <= 0.0036: 0.015 is > 4 sd.
    assert abs(fraction - n_sampled_goal / (n_sampled_goal + 1)) < 0.015


@pytest.mark.parametrize("strategy", ["future", "episode", "final"])
def test_both_backends_agree_on_the_distribution_of_relabel_offsets(strategy: str) -> None:
    # The same episodes stored in both; the histograms of (goal index - step) over a large
    # batch agree with each other and with the exact law of the strategy.
    lengths = [[3, 8, 5, 2, 6, 99], [4, 7, 1, 5, 9, 99], [6, 6, 6, 6, 6, 99]]
    batches = []
    for backend in ("numpy", "cpu"):
        buffer = make_buffer(backend, 3 * 64, 3, goal_selection_strategy=strategy, seed=11)
        writer = Writer(buffer, lengths)
        for _ in range(30):
            writer.add_step()
        batches.append(numpy_batch(buffer.sample(40_000)))
    # The exact law: transitions uniform over the stored ones; goal index j per strategy.
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
        step = batch.observations["observation"][:, 2]
        goal = batch.observations["desired_goal"]
        relabeled = goal[:, 0] >= 0
        offsets = (goal[relabeled, 2] - step[relabeled]).astype(int)
        counts = np.bincount(offsets - lo, minlength=hi - lo)[: hi - lo]
        histograms.append(counts / counts.sum())
    # Total variation distance: ~32k relabeled draws over <= 10 bins give ~0.01; an
    # off-by-one in the offset moves mass by >= 0.2.
    for histogram in histograms:
        assert 0.5 * np.abs(histogram - expected).sum() < 0.03
    assert 0.5 * np.abs(histograms[0] - histograms[1]).sum() < 0.03


# ---------------------------------------------------------------------- dones and infos


def one_step_buffer(backend: str, terminated: bool, **kwargs: Any) -> Any:
    buffer = make_buffer(backend, 40, 2, **kwargs)
    writer = Writer(buffer, [[1] * 10, [1] * 10])
    for _ in range(5):
        writer.add_step(terminated=terminated)
    return buffer


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("handle_timeout", [True, False])
def test_terminated_and_truncated_stay_apart(backend: str, handle_timeout: bool) -> None:
    truncated = one_step_buffer(
        backend, False, handle_timeout_termination=handle_timeout, n_sampled_goal=0
    )
    dones = to_numpy(truncated.sample(64).dones)
    assert dones.dtype == np.float32
    np.testing.assert_array_equal(dones, np.full(64, 0.0 if handle_timeout else 1.0))
    terminated = one_step_buffer(
        backend, True, handle_timeout_termination=handle_timeout, n_sampled_goal=0
    )
    np.testing.assert_array_equal(to_numpy(terminated.sample(64).dones), np.ones(64))


@pytest.mark.parametrize("backend", BACKENDS)
def test_compute_terminated_recomputes_done_for_relabeled_goals_only(backend: str) -> None:
    def reached(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        return achieved_goal[..., 2] == desired_goal[..., 2]  # the goal's step index

    buffer = make_buffer(backend, 120, 2, compute_terminated=reached, seed=4)
    writer = Writer(buffer, [[4] * 20, [6] * 20])
    for _ in range(40):
        writer.add_step()
    batch = numpy_batch(buffer.sample(2000))
    relabeled = batch.observations["desired_goal"][:, 0] >= 0
    hit = batch.next_observations["achieved_goal"][:, 2] == batch.observations["desired_goal"][:, 2]
    np.testing.assert_array_equal(batch.dones[relabeled], hit[relabeled].astype(np.float32))
    np.testing.assert_array_equal(batch.dones[~relabeled], 0.0)  # stored: truncations
    assert 0 < batch.dones[relabeled].mean() < 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("as_list", [False, True])
def test_info_values_are_stored_by_key_and_passed_back_batched(backend: str, as_list: bool) -> None:
    seen = []

    def reward(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        seen.append(info)
        return tag_reward(achieved_goal, desired_goal, info) + 1000 * info["penalty"]

    buffer = make_buffer(backend, 60, 2, compute_reward=reward, info_keys=("penalty",), seed=2)
    writer = Writer(buffer, [[3] * 20, [5] * 20])
    for step in range(20):
        penalty = np.array([step, 100 + step], np.float32)
        if as_list:
            infos: Any = [{"penalty": float(p), "other": "x"} for p in penalty]
        else:
            infos = {"penalty": writer.convert(penalty)}
        writer.add_step(infos)
    batch = numpy_batch(buffer.sample(500))
    info = seen[-1]
    assert set(info) == {"penalty"}
    penalty = to_numpy(info["penalty"])
    if backend != "numpy":
        assert isinstance(info["penalty"], torch.Tensor)
    # The penalty of a transition was its add() number (+100 for env 1): recover it from
    # the tags (env e's episodes of length L: number = episode * L + step).
    tags = batch.observations["observation"].astype(int)
    length = np.where(tags[:, 0] == 0, 3, 5)
    np.testing.assert_array_equal(penalty, tags[:, 1] * length + tags[:, 2] + 100 * tags[:, 0])
    relabeled = batch.observations["desired_goal"][:, 0] >= 0
    np.testing.assert_allclose(
        batch.rewards[relabeled],
        tag_reward(
            batch.next_observations["achieved_goal"], batch.observations["desired_goal"], None
        )[relabeled]
        + 1000 * penalty[relabeled],
        rtol=1e-6,
    )


# ---------------------------------------------------------------------- save / load


@pytest.mark.parametrize("backend", BACKENDS)
def test_save_load_round_trip_keeps_the_stored_transitions(backend: str, tmp_path: Path) -> None:
    buffer = make_buffer(backend, 3 * 20, 3, seed=9, n_sampled_goal=2)
    writer = Writer(buffer, [[4, 6, 5, 3] * 10, [2, 9] * 10, [5] * 20])
    for _ in range(37):
        writer.add_step()
    before = buffer.n_transitions
    path = tmp_path / "buffer.bin"
    buffer.save(path)
    assert buffer.n_transitions == before  # the live buffer keeps its open episodes
    cls = type(buffer)
    loaded = cls.load(path, tag_reward)
    # The saved file ended the open episodes as truncations: more sampleable transitions.
    open_transitions = sum(writer.step)
    assert loaded.n_transitions == before + open_transitions
    expected = numpy_batch(buffer.sample(300))
    got = numpy_batch(loaded.sample(300))  # the generator's state was saved
    saved_batch = numpy_batch(cls.load(path, tag_reward).sample(300))
    for key in TAG_SPACE.spaces:
        np.testing.assert_array_equal(got.observations[key], saved_batch.observations[key])
    np.testing.assert_array_equal(got.rewards, saved_batch.rewards)
    # The live buffer samples only the episodes that had ended; the loaded one also the
    # truncated ones, with the same stored values (tags, actions, rewards).
    check_batch(expected, writer, GoalSelectionStrategy.FUTURE)
    tags = got.observations["observation"].astype(int)
    np.testing.assert_array_equal(got.actions, tags)
    np.testing.assert_array_equal(got.next_observations["observation"], np.add(tags, [0, 0, 1]))
    # The loaded buffer samples the ended episodes and the open ones up to their last step.
    for e, m, i in tags:
        assert (e, m) in writer.intact_episodes() or (m == writer.episode[e] and i < writer.step[e])
    # It keeps collecting: the episodes in progress go on as new ones after the load.
    writer.buffer = loaded
    for _ in range(12):
        writer.add_step()
    batch = numpy_batch(loaded.sample(300))
    tags = batch.observations["observation"].astype(int)
    np.testing.assert_array_equal(batch.next_observations["observation"], np.add(tags, [0, 0, 1]))
    assert tags[:, 1].max() == max(writer.episode) - 1  # the new episodes are sampled


def test_a_corrupt_or_foreign_device_buffer_file_is_an_error_naming_it(tmp_path: Path) -> None:
    buffer = make_buffer("cpu", 40, 2, seed=0)
    writer = Writer(buffer, [[3] * 10, [4] * 10])
    for _ in range(12):
        writer.add_step()
    path = tmp_path / "buffer.pt"
    buffer.save(path)
    cut = tmp_path / "cut.pt"
    cut.write_bytes(path.read_bytes()[:500])
    with pytest.raises(ValueError, match=r"cut\.pt cannot be read"):
        DeviceHerReplayBuffer.load(cut, tag_reward)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    with pytest.raises(ValueError, match=r"other\.pt is not a goalenvs device HER buffer"):
        DeviceHerReplayBuffer.load(other, tag_reward)
    numpy_file = tmp_path / "numpy.npz"
    make_buffer("numpy", 40, 2).save(numpy_file)
    with pytest.raises(ValueError, match=r"numpy\.npz"):
        DeviceHerReplayBuffer.load(numpy_file, tag_reward)


# ---------------------------------------------------------------------- prioritized


@pytest.mark.parametrize("backend", BACKENDS)
def test_prioritized_draws_follow_priorities_and_weights_correct_them(backend: str) -> None:
    buffer = make_buffer(backend, 40, 1, prioritized=True, alpha=1.0, beta=1.0, seed=5)
    writer = Writer(buffer, [[4] * 10])
    for _ in range(8):
        writer.add_step()  # episodes 0 and 1: 8 transitions at priority 1
    batch = buffer.sample(500)
    first = numpy_batch(batch)
    np.testing.assert_array_equal(first.weights, np.ones(500))  # equal priorities
    # Transition (episode 0, step 2) gets priority 9 - eps + eps, every other stays at 1:
    # drawn with probability 9 / 16 and weighted (8 * 9/16) ** -1 / (8 * 1/16) ** -1 = 1/9.
    indices = to_numpy(batch.indices)
    tags = first.observations["observation"].astype(int)
    target = (tags[:, 1] == 0) & (tags[:, 2] == 2)
    assert 30 < target.sum() < 100  # 1/8 of 500
    index = indices[target][:1]
    td_error = np.array([9.0 - 1e-6], np.float32)
    buffer.update_priorities(writer.convert(index) if backend != "numpy" else index, td_error)
    batch = numpy_batch(buffer.sample(20_000))
    tags = batch.observations["observation"].astype(int)
    hit = (tags[:, 1] == 0) & (tags[:, 2] == 2)
    assert abs(hit.mean() - 9 / 16) < 0.015
    np.testing.assert_allclose(batch.weights[hit], 1 / 9, rtol=1e-4)
    np.testing.assert_allclose(batch.weights[~hit], 1.0, rtol=1e-4)


# ---------------------------------------------------------------------- device specifics


def test_bad_arguments_fail_with_clear_messages() -> None:
    with pytest.raises(ValueError, match=r"device='tpu9' is not a torch device"):
        make_buffer("tpu9", 40, 2)
    with pytest.raises(TypeError, match="device"):
        DeviceHerReplayBuffer(40, TAG_SPACE, TAG_ACTIONS, tag_reward)  # device is required
    with pytest.raises(ValueError, match="buffer_size=3 gives 1 rows per env"):
        make_buffer("cpu", 3, 2)
    with pytest.raises(ValueError, match="goal_selection_strategy='later'"):
        make_buffer("cpu", 40, 2, goal_selection_strategy="later")
    buffer = make_buffer("cpu", 40, 2)
    obs = {k: torch.zeros(2, 3) for k in TAG_SPACE.spaces}
    flags = torch.zeros(2, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"action is a tensor on meta, expected one on .*cpu"):
        buffer.add(obs, obs, torch.zeros(2, 3, device="meta"), torch.zeros(2), flags, flags)
    with pytest.raises(ValueError, match=r"next_obs\['observation'\] has shape \(3, 3\)"):
        buffer.add(obs, {**obs, "observation": torch.zeros(3, 3)}, obs["observation"], [0, 0],
                   flags, flags)  # fmt: skip
    with pytest.raises(ValueError, match=r"obs has keys \['achieved_goal', 'desired_goal'\]"):
        buffer.add({k: v for k, v in obs.items() if k != "observation"}, obs,
                   obs["observation"], [0, 0], flags, flags)  # fmt: skip
    with pytest.raises(ValueError, match=r"reward has shape \(3,\), expected \(2,\)"):
        buffer.add(obs, obs, obs["observation"], [0, 0, 0], flags, flags)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        buffer.sample(0)
    with pytest.raises(RuntimeError, match="needs a prioritized buffer"):
        buffer.update_priorities(torch.zeros(2, dtype=torch.int64), torch.zeros(2))


@pytest.mark.parametrize("env_id", ["goalenvs/PointReach-v0", "goalenvs/BitFlipping-v0"])
@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=CUDA)])
def test_a_device_twin_fills_the_buffer_and_rewards_match_its_compute_reward(
    backend: str, env_id: str, tmp_path: Path
) -> None:
    env = gym.make_vec(env_id, num_envs=16, device=backend, autoreset_mode="same_step")
    discrete = isinstance(env.single_action_space, spaces.Discrete)
    buffer = DeviceHerReplayBuffer(
        16 * 200,
        env.single_observation_space,
        env.single_action_space,
        env,
        n_envs=16,
        device=backend,
        seed=0,
    )
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
    moved = buffer.sample(8, device="cpu")
    assert moved.rewards.device.type == "cpu"
    buffer.save(tmp_path / "buffer.pt")
    loaded = DeviceHerReplayBuffer.load(tmp_path / "buffer.pt", env)
    # The stored rows come back as they were (the episode bookkeeping is the truncated
    # twin's: test_save_load_round_trip_keeps_the_stored_transitions).
    ours, theirs = loaded.state().storage, buffer.state().storage
    for name in ("records", "sampleable_from"):
        torch.testing.assert_close(getattr(ours, name), getattr(theirs, name), msg=name)
    # Each row's episode, its first counter and its terminated flag (its truncated flag is
    # the truncated twin's where an episode was open).
    torch.testing.assert_close(ours.row_meta[..., :3], theirs.row_meta[..., :3])
    assert list(ours.separate) == (["action"] if discrete else [])
    for name, values in ours.separate.items():
        torch.testing.assert_close(values, theirs.separate[name], msg=name)


@pytest.mark.parametrize("backend", BACKENDS)
def test_prioritized_draws_only_intact_episodes_through_ring_wraps(backend: str) -> None:
    buffer = make_buffer(backend, 3 * 23, 3, prioritized=True, seed=8)
    writer = Writer(buffer, [[4, 6, 5, 3, 7, 1] * 30, [2, 9, 3] * 50, [5] * 100])
    for steps in (9, 31, 40):
        for _ in range(steps):
            writer.add_step()
        batch = buffer.sample(400)
        buffer.update_priorities(batch.indices, to_numpy(batch.rewards) % 7)
        tags = to_numpy(batch.observations["observation"]).astype(int)
        intact = writer.intact_episodes()
        for e, m, i in tags:
            assert (e, m) in intact and 0 <= i < intact[(e, m)]


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=CUDA)])
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
    # Measured: reads after adds 9, 11, 51, 91, 131, 171 (each vouches for 40 more adds).
    assert len(reads) <= 7, reads  # over 190 samples and 200 adds
    if backend == "cuda":
        # Between two reads, add and sample never wait for the device (the inputs are made
        # on the device beforehand: copying numpy arrays there waits).
        obs = {k: torch.ones(4, 3, device=backend) for k in TAG_SPACE.spaces}
        action, reward = obs["observation"], torch.zeros(4, device=backend)
        flags = [torch.zeros(4, dtype=torch.bool, device=backend), torch.ones_like(reward) > 0]
        buffer._read_horizons()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for step in range(20):
                buffer.add(obs, obs, action, reward, flags[0], flags[step % 10 == 9])
                buffer.sample(64)
        finally:
            torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("backend", BACKENDS)
def test_prioritized_draws_every_transition_of_a_full_ring(backend: str) -> None:
    # Two episodes of 4 fill the ring exactly (numpy: 10 rows, device: 8): the oldest row,
    # the next one add() overwrites, still holds a sampleable transition.
    buffer = make_buffer(backend, 10 if backend == "numpy" else 8, 1, prioritized=True, seed=2)
    writer = Writer(buffer, [[4] * 4])
    for _ in range(8):
        writer.add_step()
    assert buffer.n_transitions == 8
    tags = to_numpy(buffer.sample(2000).observations["observation"]).astype(int)
    drawn = {(m, i) for _, m, i in tags}
    assert drawn == {(m, i) for m in (0, 1) for i in range(4)}


# ---------------------------------------------------------------------- a GPU learner's sample


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
@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=CUDA)])
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


def test_sample_gathers_the_batch_with_four_gathers_of_the_stored_rows() -> None:
    # The records (observations, next observations, action, reward), the rows' metadata
    # (episode, flags), the episodes' ends and the relabeled goals: one gather each,
    # however many observation keys there are.
    from torch.overrides import TorchFunctionMode

    buffer = make_buffer("cpu", 4 * 30, 4, seed=1)
    writer = Writer(buffer, [[5] * 20] * 4)
    for _ in range(12):
        writer.add_step()
    assert buffer.can_sample()
    storage = buffer.state().storage
    stored = {
        tensor.untyped_storage().data_ptr(): name
        for name, tensor in (
            ("records", storage.records),
            ("row_meta", storage.row_meta),
            ("episode_end", storage.episode_end),
        )
    }

    class Count(TorchFunctionMode):
        """Records the stored tensor each call reads from (its first argument)."""

        def __init__(self) -> None:
            super().__init__()
            self.reads: list[str] = []

        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            source = args[0] if args else None
            if isinstance(source, torch.Tensor) and source.numel() >= 30 * 4:
                name = stored.get(source.untyped_storage().data_ptr())
                if name is not None and getattr(func, "__name__", "") not in ("view", "reshape"):
                    self.reads.append(f"{name}.{getattr(func, '__name__', func)}")
            return func(*args, **(kwargs or {}))

    counter = Count()
    with counter:
        buffer.sample(64)
    assert sorted(counter.reads) == [
        "episode_end.index_select",
        "records.index_select",
        "records.index_select",  # the relabeled goals: a column of the next observations
        "row_meta.index_select",
    ], counter.reads


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=CUDA)])
def test_sample_draws_from_the_buffers_generator(backend: str) -> None:
    buffer = make_buffer(backend, 2 * 30, 2, seed=1, prioritized=True)
    writer = Writer(buffer, [[5] * 20] * 2)
    for _ in range(12):
        writer.add_step()
    assert isinstance(buffer.generator, torch.Generator)
    assert buffer.generator.device == buffer.device
    batches = []
    for _ in range(2):
        buffer.generator.manual_seed(123)
        batches.append(numpy_batch(buffer.sample(100)))
    first, second = batches
    for a, b in zip(first.observations.values(), second.observations.values(), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(batches[0].indices, batches[1].indices)


@pytest.mark.parametrize("prioritized", [False, True])
@CUDA
def test_a_sample_captured_in_a_cuda_graph_replays_fresh_draws_of_what_the_buffer_holds(
    prioritized: bool,
) -> None:
    # The trainer captures its update, sampling included: each replay must draw anew from
    # the buffer as it is then (new episodes in, old ones retired), and a new beta counts.
    buffer = make_buffer("cuda", 4 * 40, 4, seed=0, prioritized=prioritized, beta=1.0)
    writer = Writer(buffer, [[10] * 100] * 4)
    for _ in range(30):
        writer.add_step()
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
    # A capture runs no kernel: the batch holds draws only after a replay (the priorities
    # below are set at its indices).
    graph.replay()
    indices = []
    for _ in range(4):
        for _ in range(25):  # ends 10 episodes, retires the oldest
            writer.add_step()
        assert buffer.can_sample()
        if prioritized:
            buffer.update_priorities(batch.indices, torch.arange(256.0, device="cuda") % 5)
        graph.replay()
        torch.cuda.synchronize()
        if prioritized:
            checked = batch._replace(weights=torch.ones(256))
            assert batch.weights.min() < 1.0  # unequal priorities: unequal weights
        check_batch(checked if prioritized else batch, writer, GoalSelectionStrategy.FUTURE)
        tags = to_numpy(batch.observations["observation"]).astype(int)
        assert tags[:, 1].max() == max(writer.episode) - 1  # the newest episodes are drawn
        indices.append(to_numpy(batch.indices).copy())
    assert not (indices[0] == indices[1]).all()  # each replay draws anew
    if prioritized:
        buffer.beta = 0.0  # no correction: every weight 1, in the next replay
        graph.replay()
        np.testing.assert_array_equal(to_numpy(batch.weights), np.ones(256, np.float32))


def test_device_buffer_is_exported_without_loading_torch_at_import():
    """`goalenvs.her.DeviceHerReplayBuffer` is the device buffer, and importing goalenvs.her
    (the numpy buffer's users) still does not import torch."""
    import subprocess
    import sys

    import goalenvs.her
    from goalenvs.her.device_buffer import DeviceHerReplayBuffer

    assert goalenvs.her.DeviceHerReplayBuffer is DeviceHerReplayBuffer
    assert "DeviceHerReplayBuffer" in goalenvs.her.__all__
    code = "import sys, goalenvs.her; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
