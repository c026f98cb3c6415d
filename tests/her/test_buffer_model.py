"""goalenvs.her.buffer against a slow reference model (the behaviour tests are test_buffer.py).

An independent reading of HerReplayBuffer's index arithmetic, checked against a slow model.

The model keeps every episode every env ever wrote (a list of episodes per env, each with
its start row, length and how it ended) and decides which ones a ring of
``rows_per_env`` rows still holds whole. Every value written into the buffer names its own
origin: observations, achieved goals, actions and the ``tag`` info are ``(env, episode,
step)``, the episode's desired goal is ``(-1, env, episode)``, the stored reward is a
function of the three. A sampled batch is then checked field by field against the model:
which episodes may appear, which goal indices each strategy may draw, which reward, which
done, which info row, and that a saved-and-loaded buffer or a torch batch gives exactly the
same values as a twin that never went through either.
"""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from goalenvs.her import GoalSelectionStrategy, HerBatch, HerReplayBuffer

BIG = 1e6
SPACE = spaces.Dict(
    observation=spaces.Box(-BIG, BIG, (3,), np.float32),
    achieved_goal=spaces.Box(-BIG, BIG, (3,), np.float32),
    desired_goal=spaces.Box(-BIG, BIG, (3,), np.float32),
)
ACTIONS = spaces.Box(-BIG, BIG, (3,), np.float32)
FUTURE, FINAL, EPISODE, RANDOM = (
    GoalSelectionStrategy.FUTURE,
    GoalSelectionStrategy.FINAL,
    GoalSelectionStrategy.EPISODE,
    GoalSelectionStrategy.RANDOM,
)


def goal_reward(achieved_goal: np.ndarray, desired_goal: np.ndarray) -> np.ndarray:
    """Differs for every (achieved, desired) pair of tags, so a wrong pairing shows."""
    return (achieved_goal * [1.0, 10.0, 100.0]).sum(-1) - (desired_goal * [3.0, 7.0, 11.0]).sum(-1)


def stored_reward(env: Any, episode: Any, step: Any) -> np.ndarray:
    """What add() is given: never a goal_reward value (those are integers)."""
    return np.asarray(
        0.25 + np.asarray(env) + 100.0 * np.asarray(episode) + 0.001 * np.asarray(step), np.float32
    )


class RecordingReward:
    """compute_reward / compute_terminated that remember every call's arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]] = []

    def reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        self.calls.append(
            (achieved_goal.copy(), desired_goal.copy(), {k: v.copy() for k, v in info.items()})
        )
        return goal_reward(achieved_goal, desired_goal)

    @staticmethod
    def reached(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        return np.all(achieved_goal == desired_goal, axis=-1)


@dataclass
class Episode:
    env: int
    number: int  # per env
    start: int  # unwrapped row of the first observation
    length: int = 0
    terminated: bool = False
    truncated: bool = False
    complete: bool = False


class Model:
    """The slow reference: every episode, and which ones a ring of R rows holds whole."""

    def __init__(self, n_envs: int, rows_per_env: int, plans: list[list[tuple[int, str]]]):
        self.n, self.R = n_envs, rows_per_env
        self.plans = plans  # per env: (length, how it ends) of its successive episodes
        self.planned = [0] * n_envs  # index into plans of the episode in progress
        self.episodes: list[list[Episode]] = [[] for _ in range(n_envs)]
        self.next_start = [0] * n_envs
        self.last_row = [-1] * n_envs  # highest unwrapped row ever written

    def current(self, e: int) -> Episode:
        eps = self.episodes[e]
        if not eps or eps[-1].complete:
            eps.append(Episode(e, len(eps), self.next_start[e]))
        return eps[-1]

    def step_arrays(self) -> dict[str, np.ndarray]:
        """The arguments of the next add(), and the model advanced past it."""
        n = self.n
        tag, next_tag = np.zeros((n, 3), np.float32), np.zeros((n, 3), np.float32)
        goal = np.zeros((n, 3), np.float32)
        terminated, truncated = np.zeros(n, bool), np.zeros(n, bool)
        for e in range(n):
            ep = self.current(e)
            i = ep.length
            tag[e], next_tag[e], goal[e] = (
                (e, ep.number, i),
                (e, ep.number, i + 1),
                (-1, e, ep.number),
            )
            ep.length += 1
            self.last_row[e] = ep.start + ep.length
            length, end = self.plans[e][self.planned[e] % len(self.plans[e])]
            if ep.length >= length:
                ep.terminated, ep.truncated = (
                    end in ("terminated", "both"),
                    end in ("truncated", "both"),
                )
                terminated[e], truncated[e] = ep.terminated, ep.truncated
                self.close(ep)
        return {
            "tag": tag,
            "next_tag": next_tag,
            "goal": goal,
            "terminated": terminated,
            "truncated": truncated,
        }

    def close(self, ep: Episode) -> None:
        ep.complete = True
        self.next_start[ep.env] = ep.start + ep.length + 1
        self.planned[ep.env] += 1

    def truncate_last_trajectory(self) -> None:
        for e in range(self.n):
            eps = self.episodes[e]
            if eps and not eps[-1].complete:
                eps[-1].truncated = True
                self.close(eps[-1])

    def live(self) -> dict[tuple[int, int], Episode]:
        """Complete episodes none of whose rows has been written over."""
        return {
            (ep.env, ep.number): ep
            for e in range(self.n)
            for ep in self.episodes[e]
            if ep.complete and ep.start > self.last_row[e] - self.R
        }


def add_step(buffers: list[HerReplayBuffer], model: Model, dict_infos: bool) -> None:
    a = model.step_arrays()
    tag, nxt, goal = a["tag"], a["next_tag"], a["goal"]
    obs = {"observation": tag, "achieved_goal": tag.copy(), "desired_goal": goal}
    next_obs = {"observation": nxt, "achieved_goal": nxt.copy(), "desired_goal": goal.copy()}
    odd = tag[:, 2].astype(int) % 2 == 1
    infos: Any = (
        {"tag": tag.copy(), "odd": odd, "_odd": np.ones_like(odd)}
        if dict_infos
        else [{"tag": tag[e].copy(), "odd": bool(odd[e]), "other": "x"} for e in range(model.n)]
    )
    reward = stored_reward(tag[:, 0], tag[:, 1], tag[:, 2])
    for buffer in buffers:
        buffer.add(obs, next_obs, tag.copy(), reward, a["terminated"], a["truncated"], infos)


def check_batch(
    batch: HerBatch,
    model: Model,
    strategy: GoalSelectionStrategy,
    recorder: RecordingReward,
    handle_timeout: bool,
    recompute_terminated: bool,
) -> np.ndarray:
    """Every provenance rule on one batch; returns the relabeled mask."""
    live = model.live()
    obs, nxt = batch.observations, batch.next_observations
    tags = obs["observation"].astype(np.int64)
    for e, m, i in tags:
        assert (e, m) in live, f"sampled env {e} episode {m}: not complete and intact"
        assert 0 <= i < live[(e, m)].length
    np.testing.assert_array_equal(obs["achieved_goal"], obs["observation"])
    np.testing.assert_array_equal(batch.actions, obs["observation"])
    # The next observation is the same episode's next step, also for its last transition
    # (the stored final observation, not the next episode's first one).
    np.testing.assert_array_equal(nxt["observation"], obs["observation"] + [0, 0, 1])
    np.testing.assert_array_equal(nxt["achieved_goal"], nxt["observation"])
    goal = obs["desired_goal"]
    np.testing.assert_array_equal(nxt["desired_goal"], goal)
    relabeled = goal[:, 0] >= 0
    original = ~relabeled
    np.testing.assert_array_equal(goal[original, 0], -1.0)
    np.testing.assert_array_equal(goal[original, 1:], tags[original, :2])

    # Exactly one compute_reward call for the whole batch, fed the batch's own goals and
    # the info of the transition that produced next_obs.
    assert len(recorder.calls) == 1
    achieved, desired, info = recorder.calls.pop()
    np.testing.assert_array_equal(achieved, nxt["achieved_goal"])
    np.testing.assert_array_equal(desired, goal)
    assert set(info) == {"tag", "odd"}
    np.testing.assert_array_equal(info["tag"], obs["observation"])
    assert info["odd"].dtype == bool
    np.testing.assert_array_equal(info["odd"], tags[:, 2] % 2 == 1)

    expected_reward = stored_reward(tags[:, 0], tags[:, 1], tags[:, 2])
    expected_reward[relabeled] = goal_reward(nxt["achieved_goal"], goal)[relabeled]
    np.testing.assert_array_equal(batch.rewards, expected_reward)
    assert batch.rewards.dtype == np.float32 and batch.dones.dtype == np.float32

    last = np.array([i == live[(e, m)].length - 1 for e, m, i in tags], bool)
    term = last & np.array([live[(e, m)].terminated for e, m, _ in tags], bool)
    trunc = last & np.array([live[(e, m)].truncated for e, m, _ in tags], bool)
    if recompute_terminated:
        term = np.where(relabeled, np.all(nxt["achieved_goal"] == goal, axis=1), term)
    done = term if handle_timeout else term | trunc
    np.testing.assert_array_equal(batch.dones, done.astype(np.float32))

    for (e, m, i), (ge, gm, gj) in zip(tags[relabeled], goal[relabeled].astype(int), strict=True):
        length = live[(e, m)].length
        if strategy is RANDOM:
            # the next achieved goal of any live transition, of any env
            assert (ge, gm) in live and 1 <= gj <= live[(ge, gm)].length, (ge, gm, gj)
            continue
        assert (ge, gm) == (e, m), "a relabeled goal came from another episode"
        allowed = {
            FUTURE: range(i + 1, length + 1),  # next achieved goals of t..T-1
            FINAL: range(length, length + 1),
            EPISODE: range(1, length + 1),
        }[strategy]
        assert gj in allowed, f"{strategy.value}: goal step {gj} for step {i} of {length}"
    return relabeled


def assert_same_batch(a: HerBatch, b: HerBatch) -> None:
    def arr(x: Any) -> np.ndarray:
        return x.numpy() if hasattr(x, "numpy") else np.asarray(x)

    for key in SPACE.spaces:
        np.testing.assert_array_equal(arr(a.observations[key]), arr(b.observations[key]))
        np.testing.assert_array_equal(arr(a.next_observations[key]), arr(b.next_observations[key]))
    for name in ("actions", "rewards", "dones"):
        np.testing.assert_array_equal(arr(getattr(a, name)), arr(getattr(b, name)))


def make_buffer(
    rows: int, n_envs: int, recorder: RecordingReward, spare: int = 0, **kwargs: Any
) -> HerReplayBuffer:
    """``rows`` per env; ``spare`` (< n_envs) extra buffer_size rows that no env can use."""
    return HerReplayBuffer(
        rows * n_envs + spare,
        SPACE,
        ACTIONS,
        recorder.reward,
        n_envs=n_envs,
        info_keys=("tag", "odd"),
        **kwargs,
    )


plan_entry = st.tuples(st.integers(1, 5), st.sampled_from(["terminated", "truncated", "both"]))


@settings(max_examples=40, deadline=None)
@given(
    n_envs=st.integers(1, 3),
    rows=st.integers(6, 16),
    strategy=st.sampled_from(list(GoalSelectionStrategy)),
    n_sampled_goal=st.integers(0, 4),
    handle_timeout=st.booleans(),
    recompute_terminated=st.booleans(),
    plan=st.lists(plan_entry, min_size=1, max_size=12),
    lockstep=st.booleans(),
    dict_infos=st.booleans(),
    # 0: truncate_last_trajectory, 1: save and load, 2-3: sample, otherwise 1-3 add()s
    ops=st.lists(st.integers(0, 15), min_size=1, max_size=90),
    seed=st.integers(0, 2**20),
    spare=st.integers(0, 2),
)
def test_every_sample_matches_the_reference_model(
    n_envs: int,
    rows: int,
    strategy: GoalSelectionStrategy,
    n_sampled_goal: int,
    handle_timeout: bool,
    recompute_terminated: bool,
    plan: list[tuple[int, str]],
    lockstep: bool,
    dict_infos: bool,
    ops: list[int],
    seed: int,
    spare: int,
) -> None:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    plans = [
        plan if lockstep else plan[e % len(plan) :] + plan[: e % len(plan)] for e in range(n_envs)
    ]
    model = Model(n_envs, rows, plans)
    recorder, twin_recorder = RecordingReward(), RecordingReward()
    options = {
        "n_sampled_goal": n_sampled_goal,
        "goal_selection_strategy": strategy,
        "handle_timeout_termination": handle_timeout,
        "compute_terminated": RecordingReward.reached if recompute_terminated else None,
        "seed": seed,
        "spare": min(spare, n_envs - 1),
    }
    buffer = make_buffer(rows, n_envs, recorder, **options)
    # The twin sees the same calls but is never saved and loaded, and samples as torch.
    twin = make_buffer(rows, n_envs, twin_recorder, **options)
    assert buffer.rows_per_env == rows
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "buffer.npz"
        for op in [*ops, 2]:
            if op == 0:
                model.truncate_last_trajectory()
                buffer.truncate_last_trajectory()
                twin.truncate_last_trajectory()
            elif op == 1:
                # The file holds the open episodes truncated: the loaded buffer goes on
                # as the twin does after truncate_last_trajectory().
                model.truncate_last_trajectory()
                twin.truncate_last_trajectory()
                buffer.save(path)
                buffer = HerReplayBuffer.load(
                    path, recorder.reward, compute_terminated=options["compute_terminated"]
                )
            elif op in (2, 3):
                live = model.live()
                assert (
                    buffer.n_transitions
                    == twin.n_transitions
                    == sum(ep.length for ep in live.values())
                )
                assert buffer.episodes_in_progress == sum(
                    1 for eps in model.episodes if eps and not eps[-1].complete
                )
                if not live:
                    with pytest.raises(RuntimeError, match="no complete episode"):
                        buffer.sample(4)
                    continue
                batch = buffer.sample(64)
                check_batch(batch, model, strategy, recorder, handle_timeout, recompute_terminated)
                assert_same_batch(batch, twin.sample(64, device="cpu"))
                twin_recorder.calls.clear()
            else:
                for _ in range(1 + op % 3):
                    add_step([buffer, twin], model, dict_infos)


def fill(buffer: HerReplayBuffer, model: Model, steps: int) -> None:
    for _ in range(steps):
        add_step([buffer], model, dict_infos=True)


def straddling_buffer(
    strategy: GoalSelectionStrategy, k: int = 1_000_000
) -> tuple[HerReplayBuffer, Model, RecordingReward]:
    """One env, 10 rows: episode 0 (4 steps) at rows 0..4, episode 1 (5 steps) at rows
    5..10, i.e. physical rows 5..9 and 0: the second episode straddles the ring's end
    and retired the first one by writing its final observation over row 0."""
    recorder = RecordingReward()
    buffer = make_buffer(
        10, 1, recorder, n_sampled_goal=k, goal_selection_strategy=strategy, seed=7
    )
    model = Model(1, 10, [[(4, "truncated"), (5, "terminated")]])
    fill(buffer, model, 9)
    assert set(model.live()) == {(0, 1)}
    return buffer, model, recorder


@pytest.mark.parametrize("strategy", [FUTURE, FINAL, EPISODE])
def test_goal_indices_of_an_episode_straddling_the_ring_end_are_uniform_and_exact(
    strategy: GoalSelectionStrategy,
) -> None:
    buffer, model, recorder = straddling_buffer(strategy)
    assert buffer.n_transitions == 5
    batch = buffer.sample(20_000)
    check_batch(batch, model, strategy, recorder, True, False)
    step = batch.observations["observation"][:, 2].astype(int)
    goal_step = batch.observations["desired_goal"][:, 2].astype(int)
    # the final observation, sitting at physical row 0, is the next observation of step 4
    np.testing.assert_array_equal(
        batch.next_observations["observation"][step == 4], [[0, 1, 5]] * int((step == 4).sum())
    )
    for t in range(5):
        allowed = {FUTURE: range(t + 1, 6), FINAL: range(5, 6), EPISODE: range(1, 6)}[strategy]
        drawn = goal_step[step == t]
        assert set(drawn) == set(allowed)
        for j in allowed:  # uniform over the allowed indices, within 5 standard deviations
            p = 1 / len(allowed)
            assert abs(np.mean(drawn == j) - p) < 5 * np.sqrt(p * (1 - p) / len(drawn)) + 1e-9


def test_random_goals_are_uniform_over_live_next_achieved_goals_of_every_env() -> None:
    recorder = RecordingReward()
    buffer = make_buffer(
        12, 3, recorder, n_sampled_goal=1_000_000, goal_selection_strategy="random", seed=3
    )
    plans = [
        [(3, "truncated"), (5, "terminated")],
        [(2, "terminated")],
        [(7, "both"), (1, "truncated")],
    ]
    model = Model(3, 12, plans)
    fill(buffer, model, 23)
    live = model.live()
    batch = buffer.sample(30_000)
    check_batch(batch, model, RANDOM, recorder, True, False)
    goals = [tuple(g) for g in batch.observations["desired_goal"].astype(int)]
    allowed = {(e, m, j) for (e, m), ep in live.items() for j in range(1, ep.length + 1)}
    assert set(goals) == allowed  # every live next achieved goal, and nothing else
    p = 1 / len(allowed)
    counts = {g: 0 for g in allowed}
    for g in goals:
        counts[g] += 1
    for g, c in counts.items():
        assert abs(c / len(goals) - p) < 5 * np.sqrt(p * (1 - p) / len(goals)), g


@pytest.mark.parametrize("n_sampled_goal", [0, 2])
def test_relabel_fraction_and_k_zero(n_sampled_goal: int) -> None:
    recorder = RecordingReward()
    buffer = make_buffer(30, 2, recorder, n_sampled_goal=n_sampled_goal, seed=1)
    model = Model(2, 30, [[(4, "truncated"), (6, "terminated")], [(3, "terminated")]])
    fill(buffer, model, 50)
    n = 20_000
    relabeled = check_batch(buffer.sample(n), model, FUTURE, recorder, True, False)
    p = n_sampled_goal / (n_sampled_goal + 1)
    if n_sampled_goal == 0:
        assert not relabeled.any()
    else:
        assert abs(relabeled.mean() - p) < 5 * np.sqrt(p * (1 - p) / n)


def test_episodes_of_length_one_in_a_ring_of_two_rows() -> None:
    recorder = RecordingReward()
    buffer = make_buffer(2, 2, recorder, seed=0, handle_timeout_termination=False)
    model = Model(2, 2, [[(1, "terminated"), (1, "truncated")], [(1, "both")]])
    for step in range(6):
        fill(buffer, model, 1)
        # each one-step episode fills both rows of its stream, retiring the previous one
        assert buffer.n_transitions == 2
        batch = buffer.sample(200)
        check_batch(batch, model, FUTURE, recorder, False, False)
        assert set(batch.observations["observation"][:, 1].astype(int)) == {step}
        # every transition ends its episode: done for both envs (no timeout handling)
        np.testing.assert_array_equal(batch.dones, 1.0)


def test_an_exactly_full_ring_keeps_every_episode_until_the_next_write() -> None:
    recorder = RecordingReward()
    buffer = make_buffer(9, 1, recorder, seed=0)
    model = Model(1, 9, [[(2, "terminated")]])
    fill(buffer, model, 6)  # three episodes of 3 rows each: rows 0..8, the whole ring
    assert buffer.n_transitions == 6 and len(model.live()) == 3
    check_batch(buffer.sample(300), model, FUTURE, recorder, True, False)
    fill(buffer, model, 1)  # the next episode's rows 9, 10 = physical rows 0, 1
    assert buffer.n_transitions == 4 and set(model.live()) == {(0, 1), (0, 2)}
    check_batch(buffer.sample(300), model, FUTURE, recorder, True, False)


def test_the_longest_episode_that_fits_is_rows_minus_one_and_one_more_is_an_error() -> None:
    recorder = RecordingReward()
    buffer = make_buffer(8, 1, recorder, seed=0, n_sampled_goal=3)
    model = Model(1, 8, [[(7, "truncated")]])
    for _ in range(3):  # each 7-step episode takes all 8 rows and retires its predecessor
        fill(buffer, model, 7)
        assert buffer.n_transitions == 7
        check_batch(buffer.sample(500), model, FUTURE, recorder, True, False)
    recorder = RecordingReward()
    too_small = make_buffer(8, 2, recorder, seed=0)
    model = Model(2, 8, [[(3, "terminated")], [(50, "terminated")]])
    fill(too_small, model, 7)
    with pytest.raises(ValueError, match=r"env 1 .*no longer fits.*buffer_size=16"):
        fill(too_small, model, 1)


def test_sample_arrays_are_reused_per_batch_size_and_torch_views_share_them() -> None:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    buffer, _, _ = straddling_buffer(FUTURE, k=1)
    first = buffer.sample(32)
    kept = {k: v.copy() for k, v in first.observations.items()}
    second = buffer.sample(32)
    assert second.observations["observation"] is first.observations["observation"]
    assert second.rewards is first.rewards
    other_size = buffer.sample(33)
    assert not np.shares_memory(other_size.rewards, first.rewards)
    owned = buffer.sample(32, copy=True)
    assert not np.shares_memory(owned.rewards, first.rewards)
    tensors = buffer.sample(32, device="cpu")
    assert np.shares_memory(tensors.rewards.numpy(), first.rewards)
    # a fresh seeded buffer replays the same draws: the first batch was what it was
    again, _, _ = straddling_buffer(FUTURE, k=1)
    np.testing.assert_array_equal(
        again.sample(32).observations["desired_goal"], kept["desired_goal"]
    )


def test_save_after_the_ring_wrapped_writes_the_truncated_twin_and_the_live_one_goes_on(
    tmp_path: Path,
) -> None:
    recorder, twin_recorder = RecordingReward(), RecordingReward()
    options = {"goal_selection_strategy": "episode", "seed": 5, "handle_timeout_termination": False}
    buffer = make_buffer(11, 3, recorder, **options)
    twin = make_buffer(11, 3, twin_recorder, **options)
    plans = [
        [(3, "truncated"), (4, "terminated")],
        [(2, "both"), (5, "truncated")],
        [(6, "terminated")],
    ]
    model = Model(3, 11, plans)
    for _ in range(40):  # every stream has wrapped several times; all stop mid-episode
        add_step([buffer, twin], model, dict_infos=False)
    assert all(eps[-1].complete is False for eps in model.episodes)
    truncated = copy.deepcopy(buffer)
    truncated.truncate_last_trajectory()
    buffer.save(tmp_path / "ring.npz")
    loaded = HerReplayBuffer.load(tmp_path / "ring.npz", recorder.reward)
    assert loaded.episodes_in_progress == 0 and buffer.episodes_in_progress == 3
    assert loaded.n_transitions == truncated.n_transitions
    assert_same_batch(loaded.sample(256), truncated.sample(256))
    recorder.calls.clear()
    for _ in range(4):  # the saved buffer keeps retiring whole episodes as the twin does
        for _ in range(9):
            add_step([buffer, twin], model, dict_infos=True)
        assert buffer.n_transitions == sum(ep.length for ep in model.live().values())
        batch = buffer.sample(256)
        check_batch(batch, model, EPISODE, recorder, False, False)
        assert_same_batch(batch, twin.sample(256))
        twin_recorder.calls.clear()


def test_an_info_value_is_not_silently_cast_to_the_dtype_of_the_first_add() -> None:
    seen: list[dict[str, np.ndarray]] = []

    def reward(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        seen.append(info)
        return goal_reward(achieved_goal, desired_goal)

    buffer = HerReplayBuffer(20, SPACE, ACTIONS, reward, info_keys=("distance",), seed=0)
    model = Model(1, 20, [[(2, "truncated")]])
    for distance in ([0], [0.75]):  # SB3-style infos: the first value happens to be an int
        a = model.step_arrays()
        obs = {"observation": a["tag"], "achieved_goal": a["tag"], "desired_goal": a["goal"]}
        nxt = {k: a["next_tag"] if k != "desired_goal" else a["goal"] for k in SPACE.spaces}
        infos = [{"distance": distance[0]}]
        buffer.add(obs, nxt, a["tag"], np.zeros(1), a["terminated"], a["truncated"], infos)
    batch = buffer.sample(64)
    step = batch.observations["observation"][:, 2]
    # The int first value did not fix the column's dtype: 0.75 comes back as 0.75, not 0.
    assert np.issubdtype(seen[0]["distance"].dtype, np.floating)
    np.testing.assert_array_equal(seen[0]["distance"], np.where(step == 1, 0.75, 0.0))
    assert (step == 1).any()  # the sample holds the 0.75 transition


def test_the_spaces_dtypes_are_kept_exactly() -> None:
    space = spaces.Dict(
        observation=spaces.Box(-BIG, BIG, (2,), np.float64),
        achieved_goal=spaces.MultiBinary(4),
        desired_goal=spaces.MultiBinary(4),
    )

    def mismatches(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        return -(achieved_goal != desired_goal).sum(-1).astype(np.float32)

    buffer = HerReplayBuffer(
        30, space, spaces.Discrete(5), mismatches, n_sampled_goal=1_000_000, seed=0
    )
    bits = np.eye(4, dtype=np.int8)  # step i achieves bit i - 1; the goal is never achieved
    for i in range(3):
        obs = {
            "observation": np.array([[1 + 1e-12 * i, i]]),  # not representable in float32
            "achieved_goal": np.zeros((1, 4), np.int8) if i == 0 else bits[i - 1 : i],
            "desired_goal": np.ones((1, 4), np.int8),
        }
        nxt = {
            "observation": np.array([[1 + 1e-12 * (i + 1), i + 1]]),
            "achieved_goal": bits[i : i + 1],
            "desired_goal": np.ones((1, 4), np.int8),
        }
        buffer.add(obs, nxt, np.array([[i + 1]]), np.zeros(1), [False], [i == 2])
    batch = buffer.sample(500)
    obs, nxt = batch.observations, batch.next_observations
    assert obs["observation"].dtype == np.float64 and obs["desired_goal"].dtype == np.int8
    step = obs["observation"][:, 1].astype(int)
    np.testing.assert_array_equal(obs["observation"][:, 0], 1 + 1e-12 * step)
    np.testing.assert_array_equal(nxt["observation"][:, 0], 1 + 1e-12 * (step + 1))
    np.testing.assert_array_equal(batch.actions, step + 1)
    assert batch.actions.dtype == np.int64
    # future goals: one-hot bits j in step..2, i.e. one of the next achieved goals
    goal_bit = obs["desired_goal"].argmax(1)
    assert (obs["desired_goal"].sum(1) == 1).all() and (goal_bit >= step).all()
    np.testing.assert_array_equal(
        batch.rewards, mismatches(nxt["achieved_goal"], obs["desired_goal"], None)
    )
