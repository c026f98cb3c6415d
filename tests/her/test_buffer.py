"""goalenvs.her.HerReplayBuffer: relabeling, episode bookkeeping, save/load, bad input.

The property tests against a slow reference model of the ring are test_buffer_model.py.

Most tests fill the buffer with *tagged* transitions: every observation row of env ``e``,
episode ``m`` (counted per env), step ``i`` carries ``(e, m, i)`` in its observation and
achieved goal, and the episode's own desired goal is ``(-1, e, m)``. A sampled batch then
says exactly where every value came from, and a plain Python model of the ring says which
episodes must still be intact.
"""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from goalenvs.core import GoalEnv
from goalenvs.her import GoalSelectionStrategy, HerBatch, HerReplayBuffer

BIG = 1e6
TAG_SPACE = spaces.Dict(
    observation=spaces.Box(-BIG, BIG, (3,), np.float32),
    achieved_goal=spaces.Box(-BIG, BIG, (3,), np.float32),
    desired_goal=spaces.Box(-BIG, BIG, (3,), np.float32),
)
TAG_ACTIONS = spaces.Box(-BIG, BIG, (3,), np.float32)


def tag_reward(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: object) -> np.ndarray:
    """A reward that differs for every goal pair, so a wrong pairing shows."""
    return (achieved_goal * [1.0, 10.0, 100.0]).sum(-1) - (desired_goal * [3.0, 7.0, 11.0]).sum(-1)


def stored_reward(env: np.ndarray, episode: np.ndarray, step: np.ndarray) -> np.ndarray:
    """The reward written at add(): never what tag_reward gives, so relabeling shows."""
    return (0.5 + env + 1000.0 * episode + 0.001 * step).astype(np.float32)


class TaggedWriter:
    """Feeds a buffer tagged episodes of given lengths and models which stay intact."""

    def __init__(self, buffer: HerReplayBuffer, lengths: list[list[int]]) -> None:
        self.buffer = buffer
        self.lengths = lengths
        n = buffer.n_envs
        self.episode = [0] * n
        self.step = [0] * n
        self.rows_written = [0] * n  # unwrapped rows each stream has used
        self.episode_rows: list[dict[int, tuple[int, int]]] = [{} for _ in range(n)]

    def obs(self, env: int, episode: int, step: int) -> dict[str, np.ndarray]:
        tag = np.array([env, episode, step], np.float32)
        return {
            "observation": tag,
            "achieved_goal": tag.copy(),
            "desired_goal": np.array([-1, env, episode], np.float32),
        }

    def add_step(self) -> None:
        n = self.buffer.n_envs
        rows = [self.obs(e, self.episode[e], self.step[e]) for e in range(n)]
        next_rows = [self.obs(e, self.episode[e], self.step[e] + 1) for e in range(n)]
        done = np.array(
            [self.step[e] + 1 >= self.lengths[e][self.episode[e]] for e in range(n)], bool
        )
        ep = np.array(self.episode)
        st_ = np.array(self.step)
        self.buffer.add(
            {k: np.stack([r[k] for r in rows]) for k in TAG_SPACE.spaces},
            {k: np.stack([r[k] for r in next_rows]) for k in TAG_SPACE.spaces},
            np.stack([np.array([e, self.episode[e], self.step[e]], np.float32) for e in range(n)]),
            stored_reward(np.arange(n), ep, st_),
            np.zeros(n, bool),
            done,
        )
        for e in range(n):
            if self.step[e] == 0:
                self.episode_rows[e][self.episode[e]] = (self.rows_written[e], -1)
                self.rows_written[e] += 1  # the first observation's row
            self.rows_written[e] += 1  # the next observation's row
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


def check_batch(
    batch: HerBatch,
    writer: TaggedWriter,
    strategy: GoalSelectionStrategy,
) -> np.ndarray:
    """Asserts every provenance rule on a tagged batch; returns the relabeled mask."""
    intact = writer.intact_episodes()
    obs, nxt = batch.observations, batch.next_observations
    tags = obs["observation"].astype(int)
    for e, m, i in tags:
        assert (e, m) in intact, f"sampled env {e} episode {m}, which is not complete and intact"
        assert 0 <= i < intact[(e, m)], (
            f"step {i} is not a transition of an episode of {intact[(e, m)]}"
        )
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
    return relabeled


def tagged_buffer(buffer_size: int, n_envs: int, **kwargs: object) -> HerReplayBuffer:
    return HerReplayBuffer(buffer_size, TAG_SPACE, TAG_ACTIONS, tag_reward, n_envs=n_envs, **kwargs)


@settings(max_examples=60, deadline=None)
@given(
    n_envs=st.integers(1, 4),
    rows_per_env=st.integers(12, 40),
    strategy=st.sampled_from(list(GoalSelectionStrategy)),
    n_sampled_goal=st.integers(0, 6),
    steps=st.integers(1, 160),
    lengths=st.lists(st.integers(1, 10), min_size=4, max_size=40),
    seed=st.integers(0, 2**16),
    same_lengths=st.booleans(),
)
def test_relabeled_goals_respect_strategy_episode_and_ring(
    n_envs: int,
    rows_per_env: int,
    strategy: GoalSelectionStrategy,
    n_sampled_goal: int,
    steps: int,
    lengths: list[int],
    seed: int,
    same_lengths: bool,
) -> None:
    buffer = tagged_buffer(
        rows_per_env * n_envs,
        n_envs,
        n_sampled_goal=n_sampled_goal,
        goal_selection_strategy=strategy,
        seed=seed,
    )
    # Each env cycles through the drawn lengths, from its own offset (interleaved episodes
    # that end at different steps) or in lockstep (the add() path for streams in step).
    per_env = [
        (lengths if same_lengths else lengths[e:] + lengths[:e]) * 200 for e in range(n_envs)
    ]
    writer = TaggedWriter(buffer, per_env)
    for _ in range(steps):
        writer.add_step()
    intact = writer.intact_episodes()
    assert buffer.n_transitions == sum(intact.values())
    if not intact:
        with pytest.raises(RuntimeError, match="before an episode has ended"):
            buffer.sample(8)
        return
    batch = buffer.sample(512)
    relabeled = check_batch(batch, writer, strategy)
    if n_sampled_goal == 0:
        assert not relabeled.any()


def test_streams_in_step_with_some_envs_starting_an_episode() -> None:
    # Both envs reach row 3 after one episode each, env 1 at the start of its next one:
    # the streams are in step while only some envs write a first observation.
    buffer = tagged_buffer(40, 2, seed=5)
    writer = TaggedWriter(buffer, [[1, 3] * 10, [2, 4] * 10])
    for _ in range(2):
        writer.add_step()
    assert next_rows(buffer) == [3, 3]
    assert buffer.state().storage.episodes_closed.tolist() == [1, 1]
    assert buffer.episodes_in_progress == 1
    for _ in range(30):
        writer.add_step()
    check_batch(buffer.sample(500), writer, GoalSelectionStrategy.FUTURE)


def next_rows(buffer: HerReplayBuffer) -> list[int]:
    """Each env's next row (unwrapped): a row per transition and per closed episode."""
    state = buffer.state()
    return (state.steps_added + state.storage.episodes_closed).tolist()


def assert_same_storage(a: HerReplayBuffer, b: HerReplayBuffer) -> None:
    """Every array and counter of two buffers' states are equal."""
    first, second = a.state(), b.state()
    assert first.steps_added == second.steps_added
    for name in first.storage._fields:
        if name == "infos":
            assert first.storage.infos.keys() == second.storage.infos.keys()
            for key, values in first.storage.infos.items():
                np.testing.assert_array_equal(values, second.storage.infos[key], err_msg=key)
        elif name == "records":  # field by field: a loaded space may list its keys sorted
            for field in first.storage.records.dtype.names or ():
                np.testing.assert_array_equal(
                    first.storage.records[field], second.storage.records[field], err_msg=field
                )
        else:
            np.testing.assert_array_equal(
                getattr(first.storage, name), getattr(second.storage, name), err_msg=name
            )


@pytest.mark.parametrize("n_envs", [1, 3])
def test_episodes_ended_in_step_store_what_the_general_path_stores(n_envs: int) -> None:
    # While every env writes the same row, add() and _close_episodes index the storage
    # with slices; a twin buffer denied them (its summary never says the envs are in
    # step, and it closes episodes through an index array of the envs) must hold the same
    # state after every step, through ring wraps and an episode that straddles the
    # ring's end.
    fast, general = tagged_buffer(23 * n_envs, n_envs), tagged_buffer(23 * n_envs, n_envs)

    def summarize_out_of_step() -> None:
        HerReplayBuffer._summarize(general)
        general._common_episodes_closed = None

    def close_with_an_index_array(envs: Any, terminated: Any, truncated: Any) -> None:
        envs = np.arange(n_envs)[envs]
        HerReplayBuffer._close_episodes(general, envs, terminated, truncated)

    general._summarize = summarize_out_of_step
    general._close_episodes = close_with_an_index_array
    general._summarize()
    lengths = [[4, 6, 5, 3, 7] * 12] * n_envs
    writers = TaggedWriter(fast, lengths), TaggedWriter(general, lengths)
    for _ in range(150):
        for writer in writers:
            writer.add_step()
        assert_same_storage(fast, general)
        np.testing.assert_array_equal(fast._at_episode_start, general._at_episode_start)
        assert fast.episodes_in_progress == general.episodes_in_progress
        assert fast._next_retire_step == general._next_retire_step
        assert fast._common_episodes_closed is not None
        assert general._common_episodes_closed is None
    check_batch(fast.sample(400), writers[0], GoalSelectionStrategy.FUTURE)


def test_an_unpickled_buffer_keeps_writing_into_its_storage() -> None:
    # add() writes through views of the storage; pickle would bring them back as detached
    # copies, so they are rebuilt on unpickling (stable-baselines3 pickles its buffers).
    buffer = tagged_buffer(60, 2, seed=2)
    writer = TaggedWriter(buffer, [[5, 3] * 20, [5, 3] * 20])
    for _ in range(20):
        writer.add_step()
    writer.buffer = pickle.loads(pickle.dumps(buffer))
    for _ in range(40):  # wraps the 30-row streams: every row is rewritten
        writer.add_step()
    check_batch(writer.buffer.sample(500), writer, GoalSelectionStrategy.FUTURE)


def test_values_of_other_dtypes_layouts_and_types_are_stored_as_given() -> None:
    # Values in the storage's dtype are copied as bytes; others are cast by numpy. Both,
    # and strided views and lists, must store the same numbers.
    buffer = tagged_buffer(40, 2)
    wide = np.arange(24, dtype=np.float32).reshape(2, 12)
    obs = {
        "observation": wide[:, ::4],  # strided float32 view
        "achieved_goal": np.array([[1, 2, 3], [4, 5, 6]], np.float64),
        "desired_goal": [[7, 8, 9], [10, 11, 12]],
    }
    next_obs = {
        "observation": np.asfortranarray(wide[:, :3] + 100),
        "achieved_goal": np.array([[1, 2, 3], [4, 5, 6]], np.int64) + 10,
        "desired_goal": np.array([[7, 8, 9], [10, 11, 12]], ">f4"),  # big-endian
    }
    action = np.array([[0.5, 1.5, 2.5], [3.5, 4.5, 5.5]])  # float64
    buffer.add(obs, next_obs, action, [1, 2], np.zeros(2), np.array([False, True]))
    stored = buffer.state().storage
    for key, value in obs.items():
        np.testing.assert_array_equal(stored.observations[key][:2], np.asarray(value, np.float32))
    for key, value in next_obs.items():
        np.testing.assert_array_equal(stored.observations[key][2:4], np.asarray(value, np.float32))
    np.testing.assert_array_equal(stored.actions[:2], action.astype(np.float32))
    np.testing.assert_array_equal(stored.rewards[:2], [1.0, 2.0])
    # The buffer copied the values: changing the caller's arrays changes nothing stored.
    wide[:] = -1
    next_obs["observation"][:] = -1
    action[:] = -1
    np.testing.assert_array_equal(stored.observations["observation"][:2], [[0, 4, 8], [12, 16, 20]])
    np.testing.assert_array_equal(stored.observations["observation"][2:4, 0], [100, 112])
    assert stored.actions[0, 0] == 0.5


def test_one_env_mid_episode_steps_of_arrays_in_the_stored_dtypes_are_not_checked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The fast path of the common case: with one env, a mid-episode step of arrays of the
    # stored shapes and dtypes is written as one run of bytes; only an episode's first
    # step has its observation checked.
    buffer = tagged_buffer(40, 1)
    checked = []
    original = HerReplayBuffer._check_obs

    def counted(self: HerReplayBuffer, name: str, obs: Any) -> Any:
        checked.append(name)
        return original(self, name, obs)

    monkeypatch.setattr(HerReplayBuffer, "_check_obs", counted)
    obs = {key: np.zeros((1, 3), np.float32) for key in TAG_SPACE.spaces}
    action, reward, flags = np.zeros((1, 3), np.float32), np.zeros(1, np.float32), np.zeros(1, bool)
    for _ in range(5):
        buffer.add(obs, obs, action, reward, flags, flags)
    assert checked == ["obs"]


def test_one_env_mid_episode_steps_store_values_of_any_dtype_layout_and_type() -> None:
    # With one env a mid-episode step is stored as one run of bytes (action, reward, next
    # observation): values of another dtype, byte order or memory layout are converted
    # first, lists take the careful way; all must store the same numbers.
    buffer = tagged_buffer(40, 1)
    first = {key: np.zeros((1, 3), np.float32) for key in TAG_SPACE.spaces}
    wide = np.arange(12, dtype=np.float32).reshape(1, 12)
    steps = [
        ({"observation": wide[:, ::4], "achieved_goal": np.array([[1, 2, 3]], np.float64),
          "desired_goal": np.array([[7, 8, 9]], ">f4")},
         np.array([[0.5, 1.5, 2.5]]), np.array([1.0])),
        ({"observation": np.asfortranarray(wide[:, :3] + 100),
          "achieved_goal": np.array([[4, 5, 6]], np.int64), "desired_goal": [[1, 1, 1]]},
         [[3.5, 4.5, 5.5]], [2]),
        ({"observation": np.full((1, 3), 9, np.float32),
          "achieved_goal": np.full((1, 3), 8, np.float32),
          "desired_goal": np.full((1, 3), 7, np.float32)},
         np.full((1, 3), 6, np.float32), np.array([5], np.float32)),
    ]  # fmt: skip
    obs = first
    for next_obs, action, reward in steps:
        buffer.add(obs, next_obs, action, reward, np.zeros(1, bool), np.zeros(1, bool))
        obs = next_obs
    stored = buffer.state().storage
    for row, (next_obs, action, reward) in enumerate(steps):
        for key, value in next_obs.items():
            np.testing.assert_array_equal(stored.observations[key][row + 1], np.asarray(value)[0])
        np.testing.assert_array_equal(stored.actions[row], np.asarray(action, np.float32)[0])
        assert stored.rewards[row] == np.asarray(reward)[0]
    # A bad next_obs mid-episode is an error naming it, and stores nothing.
    before = stored.records.copy()
    bad = {**steps[-1][0], "achieved_goal": np.zeros((1, 4), np.float32)}
    with pytest.raises(ValueError, match=r"next_obs\['achieved_goal'\] has shape \(1, 4\)"):
        buffer.add(obs, bad, steps[-1][1], steps[-1][2], np.zeros(1, bool), np.zeros(1, bool))
    np.testing.assert_array_equal(stored.records, before)
    assert buffer.state().steps_added == 3 and next_rows(buffer) == [3]


def test_done_flags_of_any_dtype_end_exactly_the_flagged_episodes() -> None:
    # add() first compares the flags' bytes with all-zero bytes; other dtypes are cast.
    buffer = tagged_buffer(40, 2)
    obs = {key: np.zeros((2, 3), np.float32) for key in TAG_SPACE.spaces}
    action, reward = np.zeros((2, 3), np.float32), np.zeros(2, np.float32)
    flags = [
        (np.zeros(2, np.uint8), np.zeros(2, np.float64)),  # nothing ends
        (np.zeros(2, np.int8), np.array([0.0, 0.5])),  # env 1 truncated
        (np.array([1, 0], np.uint8), np.zeros(2, np.int64)),  # env 0 terminated
        (np.array([0, 3], np.int8), np.array([True, False])),  # env 1 terminated, env 0 truncated
    ]
    for terminated, truncated in flags:
        buffer.add(obs, obs, action, reward, terminated, truncated)
    assert buffer.n_transitions == (3 + 1) + (2 + 2)  # env 0's episodes, env 1's
    assert buffer.episodes_in_progress == 0
    assert next_rows(buffer) == [6, 6]
    # Env e's row r is element r * 2 + e. Env 0: transitions at rows 0-2 (terminated at 2)
    # and 4 (truncated); env 1: rows 0-1 (truncated at 1) and 3-4 (terminated at 4).
    stored = buffer.state().storage
    np.testing.assert_array_equal(stored.terminated[:10], [0, 0, 0, 0, 1, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(stored.truncated[:10], [0, 0, 0, 1, 0, 0, 0, 0, 1, 0])


@pytest.mark.parametrize("n_sampled_goal", [1, 4])
def test_relabel_fraction_is_k_over_k_plus_one(n_sampled_goal: int) -> None:
    buffer = tagged_buffer(400, 2, n_sampled_goal=n_sampled_goal, seed=3)
    writer = TaggedWriter(buffer, [[7, 3, 12] * 50, [5] * 100])
    for _ in range(300):
        writer.add_step()
    n = 20_000
    relabeled = buffer.sample(n).observations["desired_goal"][:, 0] >= 0
    p = n_sampled_goal / (n_sampled_goal + 1)
    # 5 standard deviations of a binomial proportion: fails by chance about once in 10^6.
    assert abs(relabeled.mean() - p) < 5 * np.sqrt(p * (1 - p) / n)


def test_transitions_are_sampled_uniformly_across_envs_and_episodes() -> None:
    buffer = tagged_buffer(200, 2, seed=0)
    writer = TaggedWriter(buffer, [[2, 9, 4, 1] * 30, [6] * 100])
    for _ in range(40):
        writer.add_step()
    intact = writer.intact_episodes()
    n = 40_000
    tags = buffer.sample(n).observations["observation"].astype(int)
    total = sum(intact.values())
    for (e, m), length in intact.items():
        share = np.mean((tags[:, 0] == e) & (tags[:, 1] == m))
        p = length / total
        assert abs(share - p) < 5 * np.sqrt(p * (1 - p) / n), (e, m, share, p)


def test_future_includes_the_current_transition_and_reaches_the_final_goal() -> None:
    buffer = tagged_buffer(100, 1, n_sampled_goal=1_000_000, seed=1)
    writer = TaggedWriter(buffer, [[4] * 10])
    for _ in range(4):
        writer.add_step()
    batch = buffer.sample(4000)
    step = batch.observations["observation"][:, 2].astype(int)
    goal_index = batch.observations["desired_goal"][:, 2].astype(int)
    # Transition t's own next achieved goal (index t + 1) and the final one are both drawn.
    for t in range(4):
        assert set(goal_index[step == t]) == set(range(t + 1, 5))


def test_final_and_episode_strategies_pick_their_indices() -> None:
    for strategy, expected in (("final", {5}), ("episode", {1, 2, 3, 4, 5})):
        buffer = tagged_buffer(100, 1, goal_selection_strategy=strategy, seed=2)
        writer = TaggedWriter(buffer, [[5] * 10])
        for _ in range(5):
            writer.add_step()
        batch = buffer.sample(2000)
        relabeled = batch.observations["desired_goal"][:, 0] >= 0
        assert set(batch.observations["desired_goal"][relabeled, 2].astype(int)) == expected


def test_sampling_before_any_complete_episode_is_an_error() -> None:
    buffer = tagged_buffer(100, 2)
    writer = TaggedWriter(buffer, [[5] * 3, [5] * 3])
    for _ in range(4):
        writer.add_step()
    assert buffer.n_transitions == 0
    with pytest.raises(RuntimeError, match="no complete episode"):
        buffer.sample(1)


def test_an_episode_longer_than_the_ring_is_an_error() -> None:
    buffer = tagged_buffer(10, 1)
    writer = TaggedWriter(buffer, [[50]])
    with pytest.raises(ValueError, match="no longer fits"):
        for _ in range(20):
            writer.add_step()


def test_truncate_last_trajectory_makes_episodes_in_progress_sampleable() -> None:
    buffer = tagged_buffer(100, 2, n_sampled_goal=0, seed=0)
    writer = TaggedWriter(buffer, [[3, 10], [10]])
    for _ in range(6):
        writer.add_step()
    # env 0: episode 0 complete (3 steps), episode 1 in progress (3 steps); env 1: 6 steps
    assert buffer.n_transitions == 3
    buffer.truncate_last_trajectory()
    assert buffer.n_transitions == 12
    batch = buffer.sample(3000)
    tags = batch.observations["observation"].astype(int)
    last = ((tags[:, 0] == 0) & (tags[:, 1] == 1) & (tags[:, 2] == 2)) | (
        (tags[:, 0] == 1) & (tags[:, 2] == 5)
    )
    assert last.any()
    # A truncation bootstraps: dones stay 0 with handle_timeout_termination=True.
    assert not batch.dones.any()
    last_rows = (np.array(next_rows(buffer)) - 2) % buffer.rows_per_env
    assert buffer.state().storage.truncated[last_rows * 2 + [0, 1]].all()
    buffer.truncate_last_trajectory()  # nothing in progress: a no-op
    assert buffer.n_transitions == 12


def _one_step_buffer(**kwargs: object) -> HerReplayBuffer:
    """Two 1-step episodes of env 0: one terminated, one truncated."""
    buffer = tagged_buffer(20, 1, n_sampled_goal=0, seed=0, **kwargs)
    writer = TaggedWriter(buffer, [[1, 1]])
    for terminated, truncated in ((True, False), (False, True)):
        obs, nxt = writer.obs(0, writer.episode[0], 0), writer.obs(0, writer.episode[0], 1)
        buffer.add(
            {k: v[None] for k, v in obs.items()},
            {k: v[None] for k, v in nxt.items()},
            np.zeros((1, 3)),
            np.zeros(1),
            np.array([terminated]),
            np.array([truncated]),
        )
        writer.episode[0] += 1
    return buffer


@pytest.mark.parametrize("handle_timeout", [True, False])
def test_terminated_and_truncated_stay_apart(handle_timeout: bool) -> None:
    buffer = _one_step_buffer(handle_timeout_termination=handle_timeout)
    batch = buffer.sample(200)
    episode = batch.observations["observation"][:, 1].astype(int)
    assert set(episode) == {0, 1}
    np.testing.assert_array_equal(batch.dones[episode == 0], 1.0)
    np.testing.assert_array_equal(batch.dones[episode == 1], 0.0 if handle_timeout else 1.0)
    assert batch.dones.dtype == np.float32


def test_compute_terminated_recomputes_done_for_relabeled_goals_only() -> None:
    def reached(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: object) -> np.ndarray:
        return np.all(achieved_goal == desired_goal, axis=-1)

    buffer = tagged_buffer(200, 1, compute_terminated=reached, seed=0)
    writer = TaggedWriter(buffer, [[6] * 30])
    for _ in range(60):
        writer.add_step()
    batch = buffer.sample(4000)
    relabeled = batch.observations["desired_goal"][:, 0] >= 0
    hit = np.all(batch.next_observations["achieved_goal"] == batch.observations["desired_goal"], 1)
    np.testing.assert_array_equal(batch.dones[relabeled], hit[relabeled])
    assert hit[relabeled].any() and not hit[relabeled].all()
    np.testing.assert_array_equal(batch.dones[~relabeled], 0.0)  # stored: never terminated


def test_info_values_are_stored_by_key_and_passed_as_batched_arrays() -> None:
    seen = []

    def reward(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: dict) -> np.ndarray:
        seen.append(info)
        return -10.0 * info["crashed"] - np.abs(achieved_goal - desired_goal).sum(-1)

    space = spaces.Dict(
        observation=spaces.Box(-9, 9, (1,)),
        achieved_goal=spaces.Box(-9, 9, (1,)),
        desired_goal=spaces.Box(-9, 9, (1,)),
    )
    buffer = HerReplayBuffer(
        64, space, spaces.Discrete(3), reward, n_envs=2, info_keys=("crashed",), seed=0
    )
    for t in range(4):
        obs = {k: np.full((2, 1), t, np.float32) for k in space.spaces}
        nxt = {k: np.full((2, 1), t + 1, np.float32) for k in space.spaces}
        crashed = np.array([t == 2, False])
        # vector-env infos (dict of arrays) and SB3 infos (list of dicts) both work
        infos = {"crashed": crashed} if t % 2 else [{"crashed": c} for c in crashed]
        buffer.add(obs, nxt, np.array([1, 2]), np.zeros(2), np.zeros(2), np.full(2, t == 3), infos)
    batch = buffer.sample(500)
    assert len(seen) == 1  # the whole batch in one compute_reward call
    info = seen[0]
    assert set(info) == {"crashed"} and info["crashed"].shape == (500,)
    step = batch.observations["observation"][:, 0].astype(int)
    # which env a row came from is in the action: env 0 took action 1, env 1 action 2
    env = batch.actions - 1
    assert batch.actions.dtype == np.int64 and batch.actions.shape == (500,)
    np.testing.assert_array_equal(info["crashed"], (step == 2) & (env == 0))


class TinyGoalEnv(GoalEnv):
    """A 1D goal env, enough to hand the buffer a real env's compute_reward."""

    def __init__(self) -> None:
        box = spaces.Box(-BIG, BIG, (3,), np.float32)
        self.observation_space = spaces.Dict(observation=box, achieved_goal=box, desired_goal=box)
        self.action_space = spaces.Box(-1, 1, (3,), np.float32)

    def compute_reward(self, achieved_goal, desired_goal, info):
        return tag_reward(achieved_goal, desired_goal, info)

    def compute_terminated(self, achieved_goal, desired_goal, info):
        return np.zeros(np.shape(achieved_goal)[:-1], bool)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        zero = np.zeros(3, np.float32)
        return {"observation": zero, "achieved_goal": zero, "desired_goal": zero}, {}

    def step(self, action):
        obs, _ = self.reset()
        return obs, 0.0, False, False, {}


@pytest.mark.parametrize(
    "source",
    [
        lambda: gym.wrappers.TimeLimit(TinyGoalEnv(), 10),
        lambda: gym.vector.SyncVectorEnv([lambda: gym.wrappers.TimeLimit(TinyGoalEnv(), 10)]),
        lambda: TinyGoalEnv().compute_reward,
    ],
    ids=["wrapped-env", "sync-vector-env", "callable"],
)
def test_compute_reward_from_env_vector_env_or_callable(source: object) -> None:
    buffer = HerReplayBuffer(200, TAG_SPACE, TAG_ACTIONS, source(), seed=0)
    writer = TaggedWriter(buffer, [[5] * 20])
    for _ in range(12):
        writer.add_step()
    check_batch(buffer.sample(300), writer, GoalSelectionStrategy.FUTURE)


def test_save_load_round_trip_gives_the_truncated_twin_and_keeps_collecting(
    tmp_path: Path,
) -> None:
    buffer = tagged_buffer(60, 2, info_keys=(), seed=11, goal_selection_strategy="episode")
    writer = TaggedWriter(buffer, [[4, 7, 3] * 20, [5, 2] * 30])
    for _ in range(45):  # wraps the 30-row streams; both envs stop mid-episode
        writer.add_step()
    path = tmp_path / "buffer.npz"
    buffer.save(path)
    loaded = HerReplayBuffer.load(path, tag_reward)
    twin = copy.deepcopy(buffer)  # what the file holds: the open episodes truncated
    twin.truncate_last_trajectory()
    assert loaded.n_transitions == twin.n_transitions
    assert loaded.goal_selection_strategy is GoalSelectionStrategy.EPISODE
    for _ in range(3):
        a, b = twin.sample(256, copy=True), loaded.sample(256, copy=True)
        for key in TAG_SPACE.spaces:
            np.testing.assert_array_equal(a.observations[key], b.observations[key])
            np.testing.assert_array_equal(a.next_observations[key], b.next_observations[key])
        np.testing.assert_array_equal(a.rewards, b.rewards)
        np.testing.assert_array_equal(a.actions, b.actions)
    # Both go on with new episodes (the cut ones ended at their last stored step) alike.
    second = TaggedWriter(loaded, writer.lengths)
    for name in ("episode", "step", "rows_written", "episode_rows"):
        setattr(second, name, copy.deepcopy(getattr(writer, name)))
    for e in range(2):
        start, _ = second.episode_rows[e][second.episode[e]]
        second.episode_rows[e][second.episode[e]] = (start, second.step[e])
        second.episode[e] += 1
        second.step[e] = 0
    third = copy.deepcopy(second)
    third.buffer = twin
    for _ in range(20):
        second.add_step()
        third.add_step()
    np.testing.assert_array_equal(
        twin.sample(256).observations["desired_goal"],
        loaded.sample(256).observations["desired_goal"],
    )
    check_batch(loaded.sample(256), second, GoalSelectionStrategy.EPISODE)
    with np.load(path, allow_pickle=False) as data:  # the file needs no pickle to read
        assert json.loads(str(data["meta"]))["format"] == "goalenvs.her.HerReplayBuffer"


def test_load_rejects_a_file_of_another_layout(tmp_path: Path) -> None:
    other = tmp_path / "other.npz"
    np.savez(other, observations=np.zeros((4, 3)))
    with pytest.raises(ValueError, match="not a goalenvs HER buffer file"):
        HerReplayBuffer.load(other, tag_reward)
    buffer = tagged_buffer(20, 1)
    path = tmp_path / "buffer.npz"
    buffer.save(path)
    with np.load(path) as data:
        arrays = dict(data)
    arrays["rewards"] = np.zeros(3, np.float32)
    np.savez(tmp_path / "broken.npz", **arrays)
    with pytest.raises(ValueError, match="rewards has shape"):
        HerReplayBuffer.load(tmp_path / "broken.npz", tag_reward)
    meta = json.loads(str(arrays["meta"]))
    meta["version"] = 99
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(tmp_path / "future.npz", **arrays)
    with pytest.raises(ValueError, match="layout version 99"):
        HerReplayBuffer.load(tmp_path / "future.npz", tag_reward)


def test_cpu_tensors_share_the_sampled_arrays_and_arrays_are_reused() -> None:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    buffer = tagged_buffer(200, 1, seed=0)
    writer = TaggedWriter(buffer, [[5] * 40])
    for _ in range(20):
        writer.add_step()
    batch = buffer.sample(64, device="cpu")
    assert isinstance(batch.rewards, torch.Tensor) and batch.rewards.dtype == torch.float32
    again = buffer.sample(64)
    # torch.from_numpy of the preallocated arrays: no copy on the CPU...
    assert (
        batch.observations["observation"].data_ptr()
        == again.observations["observation"].ctypes.data
    )
    assert batch.rewards.data_ptr() == again.rewards.ctypes.data
    # ...which the next sample of the same size overwrites, unless copy=True.
    kept = buffer.sample(64, copy=True)
    snapshot = kept.observations["observation"].copy()
    buffer.sample(64)
    np.testing.assert_array_equal(kept.observations["observation"], snapshot)
    assert not np.shares_memory(kept.rewards, buffer.sample(64).rewards)


def test_bad_arguments_fail_with_clear_messages() -> None:
    with pytest.raises(ValueError, match=r"goal_selection_strategy='later'.*'future', 'final'"):
        tagged_buffer(20, 1, goal_selection_strategy="later")
    with pytest.raises(ValueError, match="n_sampled_goal must be >= 0, got -1"):
        tagged_buffer(20, 1, n_sampled_goal=-1)
    with pytest.raises(ValueError, match="buffer_size=3 gives 1 rows per env"):
        tagged_buffer(3, 2)
    with pytest.raises(TypeError, match=r"observation_space must be a gymnasium\.spaces\.Dict"):
        HerReplayBuffer(20, spaces.Box(0, 1, (3,)), TAG_ACTIONS, tag_reward)
    with pytest.raises(TypeError, match="info_keys must be a sequence of strings"):
        tagged_buffer(20, 1, info_keys="crashed")
    with pytest.raises(TypeError, match="compute_reward must be a goal env"):
        tagged_buffer(20, 1).__class__(20, TAG_SPACE, TAG_ACTIONS, 42)
    assert GoalSelectionStrategy.parse("FUTURE") is GoalSelectionStrategy.FUTURE

    buffer = tagged_buffer(40, 2)
    good = {k: np.zeros((2, 3), np.float32) for k in TAG_SPACE.spaces}
    args = (np.zeros((2, 3)), np.zeros(2), np.zeros(2), np.zeros(2))
    with pytest.raises(
        ValueError, match=r"obs\['achieved_goal'\] has shape \(2, 2\), expected \(2, 3\)"
    ):
        buffer.add({**good, "achieved_goal": np.zeros((2, 2))}, good, *args)
    with pytest.raises(ValueError, match="next_obs has keys"):
        buffer.add(good, {"observation": good["observation"]}, *args)
    with pytest.raises(ValueError, match=r"action has shape \(3,\), expected \(2, 3\)"):
        buffer.add(good, good, np.zeros(3), *args[1:])
    with pytest.raises(ValueError, match=r"reward has shape \(3,\), expected \(2,\)"):
        buffer.add(good, good, args[0], np.zeros(3), *args[2:])
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        buffer.sample(0)
    with pytest.raises(TypeError, match="batch_size must be an int"):
        buffer.sample(2.5)


def test_fed_by_a_native_vector_env_with_terminations_and_saved_with_its_infos(
    tmp_path: Path,
) -> None:
    from gymnasium.vector import AutoresetMode

    import goalenvs  # noqa: F401  (registers the ids)

    envs = gym.make_vec(
        "goalenvs/BitFlipping-v0",
        num_envs=3,
        vectorization_mode="vector_entry_point",
        autoreset_mode=AutoresetMode.SAME_STEP,
        n_bits=3,
    )
    buffer = HerReplayBuffer(
        300,
        envs.single_observation_space,
        envs.single_action_space,
        envs,  # the native vector env lends its compute_reward
        n_envs=3,
        info_keys=("is_success",),
        compute_terminated=envs,
        seed=4,
    )
    rng = np.random.default_rng(0)
    obs, _ = envs.reset(seed=0)
    ends = {"terminated": 0, "truncated": 0}
    for _ in range(150):
        action = rng.integers(0, 3, 3)
        obs_next, reward, terminated, truncated, info = envs.step(action)
        next_obs = {k: v.copy() for k, v in obs_next.items()}
        success = info["is_success"].copy()
        for i in np.flatnonzero(terminated | truncated):  # same-step autoreset
            for key in next_obs:
                next_obs[key][i] = info["final_obs"][i][key]
            success[i] = info["final_info"]["is_success"][i]
        infos = {"is_success": success}
        buffer.add(obs, next_obs, action, reward, terminated, truncated, infos)
        ends["terminated"] += int(terminated.sum())
        ends["truncated"] += int(truncated.sum())
        obs = obs_next
    assert ends["terminated"] > 0 and ends["truncated"] > 0  # both kinds of episode end
    batch = buffer.sample(1000, copy=True)
    achieved, goal = batch.next_observations["achieved_goal"], batch.observations["desired_goal"]
    np.testing.assert_array_equal(
        batch.rewards, envs.unwrapped.compute_reward(achieved, goal, None)
    )
    # Terminated (success) recomputed for relabeled goals, stored for the others: either
    # way a sample is done exactly when its next achieved goal is its goal.
    np.testing.assert_array_equal(batch.dones, np.all(achieved == goal, axis=1))
    assert 0 < batch.dones.mean() < 1
    path = tmp_path / "bits.npz"
    buffer.save(path)
    loaded = HerReplayBuffer.load(path, envs, compute_terminated=envs)
    assert (
        loaded.info_keys == ("is_success",)
        and loaded.state().storage.infos["is_success"].dtype == bool
    )
    twin = copy.deepcopy(buffer)  # the file holds the open episodes truncated
    twin.truncate_last_trajectory()
    a, b = twin.sample(300, copy=True), loaded.sample(300, copy=True)
    np.testing.assert_array_equal(a.observations["desired_goal"], b.observations["desired_goal"])
    np.testing.assert_array_equal(a.rewards, b.rewards)
    np.testing.assert_array_equal(a.dones, b.dones)


@pytest.mark.parametrize("constant", [False, np.False_, np.array(False), np.array([True])])
def test_a_constant_scalar_from_compute_terminated_stands_for_the_whole_batch(
    constant: object,
) -> None:
    # Fetch's compute_terminated returns a plain False whatever the batch.
    buffer = tagged_buffer(60, 2, seed=3, compute_terminated=lambda a, d, i: constant)
    writer = TaggedWriter(buffer, [[5] * 20, [4] * 20])
    for _ in range(25):
        writer.add_step()
    batch = buffer.sample(300)
    relabeled = check_batch(batch, writer, GoalSelectionStrategy.FUTURE)
    np.testing.assert_array_equal(batch.dones[relabeled], float(np.asarray(constant).item()))


def test_a_reward_of_one_value_for_the_batch_is_refused_and_so_is_a_wrong_shape() -> None:
    # Broadcast, one value would pay every relabeled transition, those at their goal
    # included, the reward of a single pair.
    buffer = tagged_buffer(40, 1, seed=0, n_sampled_goal=4)

    def constant_reward(achieved_goal: Any, desired_goal: Any, info: Any) -> float:
        return -1.0

    buffer.compute_reward = constant_reward
    writer = TaggedWriter(buffer, [[5] * 20])
    for _ in range(12):
        writer.add_step()
    with pytest.raises(
        ValueError,
        match=r"^constant_reward returned shape \(\) for a batch of 200 goal pairs "
        r"\(achieved_goal and desired_goal of shape \(200, 3\)\); expected \(200,\)",
    ):
        buffer.sample(200)
    buffer.compute_reward = lambda a, d, i: np.zeros((200, 2))
    with pytest.raises(ValueError, match=r"returned shape \(200, 2\) for a batch of 200 goal"):
        buffer.sample(200)


@pytest.mark.parametrize("given_dtype", [np.float32, np.float64])
def test_float64_box_actions_are_stored_and_sampled_as_float32(given_dtype: type) -> None:
    actions = spaces.Box(-1.0, 1.0, (3,), np.float64)
    for n_envs in (1, 2):
        buffer = HerReplayBuffer(40, TAG_SPACE, actions, tag_reward, n_envs=n_envs, seed=0)
        writer = TaggedWriter(buffer, [[4] * 20] * n_envs)
        add = buffer.add

        def cast_add(obs, next_obs, action, *rest, add=add):
            add(obs, next_obs, np.asarray(action, given_dtype), *rest)

        buffer.add = cast_add
        for _ in range(10):
            writer.add_step()
        batch = buffer.sample(100)
        assert batch.actions.dtype == np.float32
        np.testing.assert_array_equal(batch.actions, batch.observations["observation"])


def test_save_leaves_the_live_buffer_as_it_was_and_writes_open_episodes_truncated(
    tmp_path: Path,
) -> None:
    buffer = tagged_buffer(60, 2, seed=4, handle_timeout_termination=False)
    writer = TaggedWriter(buffer, [[4, 7, 3] * 20, [5, 2] * 30])
    for _ in range(45):  # wraps the 30-row streams; both envs stop mid-episode
        writer.add_step()
    assert buffer.episodes_in_progress == 2
    before = pickle.dumps(buffer)
    expected = copy.deepcopy(buffer)
    expected.truncate_last_trajectory()
    buffer.save(tmp_path / "buffer.npz")
    assert pickle.dumps(buffer) == before  # nothing of the live buffer changed
    assert [p.name for p in tmp_path.iterdir()] == ["buffer.npz"]  # no temporary file left
    loaded = HerReplayBuffer.load(tmp_path / "buffer.npz", tag_reward)
    assert loaded.episodes_in_progress == 0
    assert loaded.n_transitions == expected.n_transitions > buffer.n_transitions
    assert_same_storage(loaded, expected)
    a, b = loaded.sample(256, copy=True), expected.sample(256, copy=True)
    for key in TAG_SPACE.spaces:
        np.testing.assert_array_equal(a.observations[key], b.observations[key])
    np.testing.assert_array_equal(a.dones, b.dones)
    # The live buffer goes on with its episodes whole: no sample comes from a cut episode.
    for _ in range(20):
        writer.add_step()
    check_batch(buffer.sample(512), writer, GoalSelectionStrategy.FUTURE)


def test_a_failed_save_leaves_the_previous_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    buffer = tagged_buffer(20, 1, seed=0)
    writer = TaggedWriter(buffer, [[3] * 20])
    for _ in range(6):
        writer.add_step()
    path = tmp_path / "buffer.npz"
    buffer.save(path)
    saved = path.read_bytes()
    writer.add_step()

    def broken_savez(file: object, **arrays: object) -> None:
        file.write(b"PK\x03\x04 half a file")  # type: ignore[attr-defined]
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        buffer.save(path)
    assert path.read_bytes() == saved
    assert [p.name for p in tmp_path.iterdir()] == ["buffer.npz"]


def test_load_of_a_truncated_corrupt_or_foreign_file_names_the_file(tmp_path: Path) -> None:
    buffer = tagged_buffer(20, 1, seed=0)
    writer = TaggedWriter(buffer, [[3] * 20])
    for _ in range(6):
        writer.add_step()
    path = tmp_path / "buffer.npz"
    buffer.save(path)
    whole = path.read_bytes()
    cases = {
        "truncated.npz": whole[: len(whole) // 2],
        "empty.npz": b"",
        "garbage.npz": bytes(range(256)) * 8,
        "flipped.npz": whole[:200] + bytes(b ^ 0xFF for b in whole[200:400]) + whole[400:],
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=name) as caught:
            HerReplayBuffer.load(tmp_path / name, tag_reward)
        assert "HER buffer file" in str(caught.value)
    np.save(tmp_path / "one_array.npy", np.zeros(3))
    with pytest.raises(ValueError, match=r"one_array\.npy is not a goalenvs HER buffer file"):
        HerReplayBuffer.load(tmp_path / "one_array.npy", tag_reward)
