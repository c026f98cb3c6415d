"""Prioritized HER (HerReplayBuffer(prioritized=True)) and its sum-tree, against slow models.

The sum-tree is checked against a plain cumulative sum. The buffer is fed tagged
episodes (every observation is ``(env, episode, step)``) and checked against a reference
that keeps one priority per transition of every complete episode the ring still holds:
new transitions get the largest priority seen so far, ``update_priorities`` sets
``|td| + eps``, and a sampled batch's weights are ``(N * P(i)) ** -beta`` over their
largest with ``P(i) = p_i ** alpha / sum_j p_j ** alpha``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from goalenvs.her import HerReplayBuffer
from goalenvs.her.sumtree import SumTree

BIG = 1e6
SPACE = spaces.Dict(
    observation=spaces.Box(-BIG, BIG, (3,), np.float32),
    achieved_goal=spaces.Box(-BIG, BIG, (3,), np.float32),
    desired_goal=spaces.Box(-BIG, BIG, (3,), np.float32),
)
ACTIONS = spaces.Box(-BIG, BIG, (3,), np.float32)
EPS = 1e-6


def reward(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: object) -> np.ndarray:
    return -(np.abs(achieved_goal - desired_goal).sum(-1) > 0).astype(np.float32)


# ---------------------------------------------------------------------- sum-tree


@settings(max_examples=80, deadline=None)
@given(
    capacity=st.integers(1, 70),
    updates=st.lists(
        st.lists(st.tuples(st.integers(0, 69), st.integers(0, 9)), min_size=1, max_size=12),
        min_size=1,
        max_size=8,
    ),
    draws=st.lists(st.floats(0, 1, exclude_max=True), min_size=1, max_size=30),
)
def test_sum_tree_matches_a_cumulative_sum(
    capacity: int, updates: list[list[tuple[int, int]]], draws: list[float]
) -> None:
    tree = SumTree(capacity)
    leaves = np.zeros(capacity)
    for batch in updates:
        indices = np.array([i % capacity for i, _ in batch])
        values = np.array([v for _, v in batch], float)  # integers: sums are exact
        tree.update(indices, values)
        for i, v in zip(indices, values, strict=True):  # the last value of an index wins
            leaves[i] = v
        np.testing.assert_array_equal(tree.leaves, leaves)
        assert tree.total == leaves.sum()
        if leaves.sum() == 0:
            continue
        x = np.array(draws) * leaves.sum()
        expected = np.searchsorted(np.cumsum(leaves), x, side="right")
        np.testing.assert_array_equal(tree.find(x), expected)
        assert (leaves[tree.find(x)] > 0).all()
    rebuilt = SumTree(capacity)
    rebuilt.set_all(leaves)
    np.testing.assert_array_equal(rebuilt.nodes, tree.nodes)


def test_sum_tree_never_returns_an_empty_leaf_at_the_top_of_its_range() -> None:
    tree = SumTree(5)
    tree.update(np.array([1, 3]), np.array([0.1, 0.2]))
    top = np.nextafter(tree.total, 0)
    assert tree.find(np.array([top, 0.0, 0.1, 0.0999999]))[0] == 3
    np.testing.assert_array_equal(tree.find(np.array([0.0, 0.1, 0.0999999])), [1, 3, 1])


def test_sum_tree_bad_arguments() -> None:
    with pytest.raises(ValueError, match="capacity must be >= 1, got 0"):
        SumTree(0)
    with pytest.raises(IndexError, match=r"leaf indices must be in \[0, 4\)"):
        SumTree(4).update(np.array([4]), np.array([1.0]))


# ---------------------------------------------------------------------- buffer model


class Reference:
    """Feeds a buffer tagged episodes and keeps the priorities prioritized replay must have."""

    def __init__(self, buffer: HerReplayBuffer, lengths: list[int], alpha: float) -> None:
        self.buffer = buffer
        self.lengths = lengths  # episode lengths, cycled; env e starts e steps into the cycle
        self.alpha = alpha
        n = buffer.n_envs
        self.episode = [0] * n
        self.step = [0] * n
        self.rows_written = [0] * n
        self.starts: list[dict[int, int]] = [{} for _ in range(n)]
        self.ended: list[dict[int, int]] = [{} for _ in range(n)]
        self.priority: dict[tuple[int, int, int], float] = {}
        self.max_priority = 1.0

    def length(self, env: int, episode: int) -> int:
        return self.lengths[(episode + env) % len(self.lengths)]

    def add_step(self) -> None:
        n = self.buffer.n_envs

        def tags(offset: int) -> dict[str, np.ndarray]:
            rows = np.array(
                [[e, self.episode[e], self.step[e] + offset] for e in range(n)], np.float32
            )
            goals = np.array([[-1, e, self.episode[e]] for e in range(n)], np.float32)
            return {"observation": rows, "achieved_goal": rows.copy(), "desired_goal": goals}

        done = np.array(
            [self.step[e] + 1 >= self.length(e, self.episode[e]) for e in range(n)], bool
        )
        self.buffer.add(
            tags(0), tags(1), tags(0)["observation"], np.zeros(n), np.zeros(n, bool), done
        )
        for e in range(n):
            if self.step[e] == 0:
                self.starts[e][self.episode[e]] = self.rows_written[e]
                self.rows_written[e] += 1
            self.rows_written[e] += 1
            if done[e]:
                self.ended[e][self.episode[e]] = self.step[e] + 1
                for i in range(self.step[e] + 1):  # new transitions: the largest priority
                    self.priority[(e, self.episode[e], i)] = self.max_priority
                self.episode[e] += 1
                self.step[e] = 0
            else:
                self.step[e] += 1
        live = self.live()
        self.priority = {tag: p for tag, p in self.priority.items() if tag in live}

    def live(self) -> set[tuple[int, int, int]]:
        """Transitions of complete episodes whose rows the ring has not overwritten."""
        rows = self.buffer.rows_per_env
        out = set()
        for e in range(self.buffer.n_envs):
            for m, length in self.ended[e].items():
                if self.starts[e][m] >= self.rows_written[e] - rows:
                    out.update((e, m, i) for i in range(length))
        return out

    def update(self, tags: np.ndarray, td_errors: np.ndarray) -> None:
        for tag, td in zip(map(tuple, tags.astype(int).tolist()), td_errors, strict=True):
            self.priority[tag] = abs(float(td)) + EPS
        self.max_priority = max(self.max_priority, float(np.abs(td_errors).max()) + EPS)

    def check(self, batch_size: int, beta: float) -> np.ndarray:
        buffer = self.buffer
        assert set(self.priority) == self.live()
        assert buffer.n_transitions == len(self.priority)
        leaves = buffer.state().priorities
        assert leaves is not None and np.count_nonzero(leaves) == len(self.priority)
        expected_total = sum(p**self.alpha for p in self.priority.values())
        np.testing.assert_allclose(buffer._tree.total, expected_total, rtol=1e-9)
        batch = buffer.sample(batch_size, copy=True)
        tags = batch.observations["observation"].astype(int)
        p = np.array([self.priority[tuple(t)] for t in tags.tolist()]) ** self.alpha
        np.testing.assert_allclose(leaves[batch.indices], p, rtol=1e-9)
        weights = (len(self.priority) * p / expected_total) ** -beta
        np.testing.assert_allclose(batch.weights, weights / weights.max(), rtol=1e-5)
        assert batch.weights.dtype == np.float32 and batch.weights.max() == 1.0
        return batch


@settings(max_examples=60, deadline=None)
@given(
    n_envs=st.integers(1, 3),
    rows=st.integers(6, 24),
    lengths=st.lists(st.integers(1, 5), min_size=1, max_size=6),
    alpha=st.sampled_from([0.0, 0.6, 1.0]),
    beta=st.sampled_from([0.0, 0.4, 1.0]),
    ops=st.lists(st.sampled_from(["add", "add", "add", "update", "save"]), max_size=80),
    seed=st.integers(0, 2**16),
)
def test_priorities_follow_the_reference_under_wrap_around_and_overwriting(
    n_envs: int,
    rows: int,
    lengths: list[int],
    alpha: float,
    beta: float,
    ops: list[str],
    seed: int,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    buffer = HerReplayBuffer(
        rows * n_envs, SPACE, ACTIONS, reward, n_envs=n_envs, seed=seed,
        prioritized=True, alpha=alpha, beta=beta, priority_eps=EPS,
    )  # fmt: skip
    model = Reference(buffer, lengths, alpha)
    rng = np.random.default_rng(seed)
    for op in [*ops, "add"]:
        if op == "add":
            model.add_step()
        elif not model.priority:
            continue
        elif op == "update":
            batch = model.check(16, beta)
            td = rng.normal(size=16) * rng.choice([0.01, 1.0, 100.0])
            buffer.update_priorities(batch.indices, td)
            model.update(batch.observations["observation"], td)
        else:  # a saved and loaded buffer has the same priorities (no episode open matters)
            path = tmp_path_factory.mktemp("prioritized") / "buffer.npz"
            buffer.save(path)
            loaded = HerReplayBuffer.load(path, reward)
            if buffer.episodes_in_progress == 0:
                np.testing.assert_array_equal(loaded._tree.nodes, buffer._tree.nodes)
            assert loaded.prioritized and loaded.alpha == alpha and loaded.beta == beta
            assert loaded.state().max_priority == buffer.state().max_priority
        if model.priority:
            model.check(32, beta)


def test_draws_follow_the_priorities() -> None:
    # Two 1-step episodes then priorities 1 : 3 (alpha 1): draws 1/4 : 3/4, weights 1 : 1/3.
    buffer = HerReplayBuffer(
        20, SPACE, ACTIONS, reward, seed=0, prioritized=True, alpha=1.0, beta=1.0
    )
    model = Reference(buffer, [1], alpha=1.0)
    model.add_step()
    model.add_step()
    first = {}
    batch = buffer.sample(50, copy=True)
    for t, i in zip(batch.observations["observation"], batch.indices, strict=True):
        first[int(t[1])] = int(i)
    buffer.update_priorities(np.array([first[0], first[1]]), np.array([1.0, -3.0]))
    batch = buffer.sample(40_000)
    episode = batch.observations["observation"][:, 1]
    assert abs((episode == 1).mean() - 0.75) < 0.01  # 4 sigma = 0.0087
    np.testing.assert_allclose(batch.weights[episode == 1], 1 / 3, rtol=1e-5)
    np.testing.assert_array_equal(batch.weights[episode == 0], 1.0)


def test_uniform_buffer_gives_unit_weights_and_indices_that_locate_the_rows() -> None:
    buffer = HerReplayBuffer(30, SPACE, ACTIONS, reward, n_envs=3, seed=1)
    model = Reference(buffer, [2, 3], alpha=1.0)
    for _ in range(9):
        model.add_step()
    batch = buffer.sample(64)
    np.testing.assert_array_equal(batch.weights, np.ones(64, np.float32))
    rows = buffer.state().storage.records[batch.indices]
    np.testing.assert_array_equal(rows["obs/observation"], batch.observations["observation"])
    with pytest.raises(RuntimeError, match="prioritized=True"):
        buffer.update_priorities(batch.indices, np.zeros(64))


def test_torch_batches_carry_weights_and_indices() -> None:
    torch = pytest.importorskip("torch")
    buffer = HerReplayBuffer(20, SPACE, ACTIONS, reward, seed=0, prioritized=True)
    model = Reference(buffer, [3], alpha=0.6)
    for _ in range(6):
        model.add_step()
    batch = buffer.sample(8, device="cpu")
    assert batch.weights.dtype == torch.float32 and batch.indices.dtype == torch.int64
    td = torch.arange(8, dtype=torch.float32).reshape(8, 1)  # a critic's (B, 1) output
    buffer.update_priorities(batch.indices, td)
    np.testing.assert_allclose(
        buffer.state().priorities[batch.indices.numpy()[-1]], (7 + buffer.priority_eps) ** 0.6
    )


def test_prioritized_bad_input_is_a_clear_error() -> None:
    for name, value in (("alpha", 1.5), ("alpha", -0.1), ("beta", 2.0)):
        with pytest.raises(ValueError, match=rf"{name} must be in \[0, 1\], got {value}"):
            HerReplayBuffer(20, SPACE, ACTIONS, reward, prioritized=True, **{name: value})
    with pytest.raises(TypeError, match="alpha must be a float"):
        HerReplayBuffer(20, SPACE, ACTIONS, reward, prioritized=True, alpha="high")
    with pytest.raises(ValueError, match="priority_eps must be a positive"):
        HerReplayBuffer(20, SPACE, ACTIONS, reward, prioritized=True, priority_eps=0.0)
    buffer = HerReplayBuffer(20, SPACE, ACTIONS, reward, seed=0, prioritized=True)
    Reference(buffer, [3], alpha=0.6).add_step()
    with pytest.raises(ValueError, match="beta must be in"):
        buffer.beta = 1.2
    with pytest.raises(ValueError, match=r"indices has shape \(3,\) and td_errors shape \(2,\)"):
        buffer.update_priorities(np.array([0, 1, 2]), np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match=r"td_errors\[1\] = nan; expected finite"):
        buffer.update_priorities(np.array([0, 1]), np.array([0.1, np.nan]))
    with pytest.raises(ValueError, match=r"indices must be in \[0, 20\)"):
        buffer.update_priorities(np.array([0, 20]), np.array([0.1, 0.2]))
    with pytest.raises(TypeError, match="indices must be integers"):
        buffer.update_priorities(np.array([0.5]), np.array([0.1]))


def test_load_rejects_negative_or_nan_priorities(tmp_path: Path) -> None:
    buffer = HerReplayBuffer(20, SPACE, ACTIONS, reward, seed=0, prioritized=True)
    model = Reference(buffer, [2], alpha=0.6)
    for _ in range(4):
        model.add_step()
    buffer.save(tmp_path / "good.npz")
    with np.load(tmp_path / "good.npz") as data:
        arrays = dict(data)
    for bad in (-1.0, np.nan):
        arrays["priorities"] = arrays["priorities"].copy()
        arrays["priorities"][0] = bad
        np.savez(tmp_path / "bad.npz", **arrays)
        with pytest.raises(ValueError, match=r"bad\.npz: priorities hold negative or NaN"):
            HerReplayBuffer.load(tmp_path / "bad.npz", reward)
