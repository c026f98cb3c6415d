"""Sampling from a :class:`~goalenvs.her.buffer.HerReplayBuffer`: the draws, the relabeling
index arithmetic, the batch's reused output arrays and prioritized replay's draws.

:class:`HerSampler` is a part of the buffer: it reads the buffer's storage through the
named arrays of a :class:`~goalenvs.her.buffer_state.HerStorage` (and the sum-tree of the
priorities) and never writes them. The buffer hands it the generator, the goal functions
and ``beta`` at each call, so that replacing them on the buffer takes effect at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from goalenvs.her.buffer_state import HerStorage
from goalenvs.her.common import NO_EPISODE_YET, HerBatch, batch_shape_error, batch_to
from goalenvs.her.settings import BufferSettings, GoalFunction, GoalSelectionStrategy
from goalenvs.her.sumtree import SumTree

__all__ = ["HerSampler"]


class _Outputs:
    """The arrays one batch size samples into, and the torch views of them."""

    def __init__(self, batch_size: int, storage: HerStorage) -> None:
        B, records = batch_size, storage.records
        observations = storage.observations

        def like(store: np.ndarray) -> np.ndarray:
            return np.empty((B, *store.shape[1:]), store.dtype)

        self.observations = {key: like(store) for key, store in observations.items()}
        self.next_observations = {key: like(store) for key, store in observations.items()}
        self.actions = like(storage.actions)
        self.rewards = np.empty(B, np.float32)
        self.dones = np.empty(B, np.float32)
        self.weights = np.ones(B, np.float32)  # stays all ones for a uniform buffer
        self.indices = np.empty(B, np.int64)
        # The gathered records of the transitions and of their next rows, and the
        # (output, field of a gathered record) pairs that sample() copies.
        self.records = np.empty(B, records.dtype)
        self.next_records = np.empty(B, records.dtype)
        self.fields = [(self.observations[k], self.records[f"obs/{k}"]) for k in observations]
        self.fields += [
            (self.next_observations[k], self.next_records[f"obs/{k}"]) for k in observations
        ]
        self.fields += [
            (self.actions, self.records["action"]),
            (self.rewards, self.records["reward"]),
        ]
        self.tensors: HerBatch | None = None  # torch views of the arrays, made on first use

    def batch(self) -> HerBatch:
        return HerBatch(
            self.observations,
            self.actions,
            self.rewards,
            self.next_observations,
            self.dones,
            self.weights,
            self.indices,
        )


class HerSampler:
    """``sample`` and its draws, over the storage of a numpy HER buffer.

    Args:
        settings: the buffer's settings.
        storage: the buffer's arrays (read, never written).
        tree: the sum-tree of the priorities of a prioritized buffer, else None.
    """

    def __init__(self, settings: BufferSettings, storage: HerStorage, tree: SumTree | None) -> None:
        self.rows_per_env = settings.rows_per_env
        self.n_envs = settings.n_envs
        self.her_ratio = settings.her_ratio
        self.strategy = GoalSelectionStrategy.parse(settings.goal_selection_strategy)
        self.handle_timeout_termination = settings.handle_timeout_termination
        self.storage = storage
        self.tree = tree
        self._achieved_goals = storage.observations["achieved_goal"]
        self._reused: dict[int, _Outputs] = {}

    @property
    def n_transitions(self) -> int:
        """Transitions that can be sampled: those of complete, intact episodes."""
        storage = self.storage
        return int((storage.sampleable_to - storage.sampleable_from).sum())

    def sample(
        self,
        batch_size: int,
        rng: np.random.Generator,
        compute_reward: GoalFunction,
        compute_terminated: GoalFunction | None,
        beta: float,
        device: Any = None,
        copy: bool = False,
    ) -> HerBatch:
        """A batch of ``batch_size`` transitions drawn with ``rng``, each relabeled with
        probability k/(k+1) (see :meth:`goalenvs.her.buffer.HerReplayBuffer.sample`)."""
        B = batch_size
        R, n, storage = self.rows_per_env, self.n_envs, self.storage
        if self.tree is None:
            env, row = self._draw_transitions(rng, B)
            weights = None
        else:
            env, row, weights = self._draw_prioritized(rng, B, beta)
        if n == 1:
            index = row
            next_index = row + 1
            next_index[next_index == R] = 0
        else:
            index = row * n + env
            next_index = ((row + 1) % R) * n + env
        relabel, goal_index = self._draw_goals(rng, B, env, row, index)

        out = _Outputs(B, storage) if copy else self._outputs(B)
        obs, next_obs = out.observations, out.next_observations
        np.copyto(out.indices, index)
        if weights is not None:
            np.copyto(out.weights, weights)
        # Whole records in two gathers (the record array is contiguous, the per-field views
        # of it are not, and np.take copies a non-contiguous source whole), then each field
        # into its own contiguous output array.
        np.take(storage.records, index, out=out.records, mode="wrap")
        np.take(storage.records, next_index, out=out.next_records, mode="wrap")
        for target, source in out.fields:
            np.copyto(target, source)
        goals = self._achieved_goals[goal_index]
        mask = relabel.reshape((B,) + (1,) * (goals.ndim - 1))
        np.copyto(obs["desired_goal"], goals, where=mask)
        np.copyto(next_obs["desired_goal"], goals, where=mask)

        info = {key: values[index] for key, values in storage.infos.items()}
        new_reward = _batch_of(
            "compute_reward",
            compute_reward(next_obs["achieved_goal"], obs["desired_goal"], info),
            B,
        )
        np.copyto(out.rewards, new_reward, where=relabel, casting="unsafe")

        terminated = storage.terminated[index]
        if compute_terminated is not None:
            new_terminated = _batch_of(
                "compute_terminated",
                compute_terminated(next_obs["achieved_goal"], obs["desired_goal"], info),
                B,
            ).astype(bool)
            terminated = np.where(relabel, new_terminated, terminated)
        if not self.handle_timeout_termination:
            terminated |= storage.truncated[index]
        np.copyto(out.dones, terminated)
        return _deliver(out, device)

    def _draw_transitions(self, rng: np.random.Generator, count: int) -> tuple[Any, np.ndarray]:
        """Draws ``count`` transitions uniformly from the complete, intact episodes.

        Returns ``(env, row)``: each transition's env (an int when there is one env) and
        physical row.
        """
        storage = self.storage
        first = storage.sampleable_from
        width = storage.sampleable_to - first
        total = int(width.sum())
        if total == 0:
            raise RuntimeError(NO_EPISODE_YET)
        R, n = self.rows_per_env, self.n_envs
        x = rng.integers(0, total, size=count)
        if n == 1:
            return 0, storage.transition_row[(x + first[0]) % R].astype(np.int64)
        # x indexes the concatenation of the streams' sampleable transitions: find the
        # stream, then the transition counter within it.
        cum = np.cumsum(width)
        env = np.searchsorted(cum, x, side="right")
        k = x + (first - (cum - width))[env]
        return env, storage.transition_row[(k % R) * n + env].astype(np.int64)

    def _draw_prioritized(
        self, rng: np.random.Generator, count: int, beta: float
    ) -> tuple[Any, np.ndarray, np.ndarray]:
        """Draws ``count`` transitions in proportion to their priority ** alpha.

        Returns ``(env, row, weights)`` as :meth:`_draw_transitions`, with the
        importance-sampling weights ``(N * P(i)) ** -beta`` over their largest.
        """
        tree = self.tree
        assert tree is not None
        total = tree.total
        if not total > 0:
            raise RuntimeError(NO_EPISODE_YET)
        flat = tree.find(rng.random(count) * total)
        probability = tree.nodes[tree.size + flat] / total
        weights = (self.n_transitions * probability) ** -beta
        weights /= weights.max()
        n = self.n_envs
        if n == 1:
            return 0, flat, weights
        return flat % n, flat // n, weights

    def _draw_goals(
        self, rng: np.random.Generator, B: int, env: Any, row: np.ndarray, index: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Which of the ``B`` transitions (at physical ``row`` of ``env``, flat ``index``)
        are relabeled, and the flat row of each one's new goal (an achieved goal).

        Worked example, one env, R = 8 rows: an episode of T = 3 transitions written at
        unwrapped rows 6..9, physical rows 6, 7, 0, 1 (row 1 holds the final observation).
        The transition at row 7 has offset a = 1 (offset_in_episode), so its episode
        starts at row 7 - 1 = 6, where episode_length says T = 3. Its next observation is
        row (7 + 1) % 8 = 0. "future" draws a goal row in 7 + 1 .. 6 + T, i.e.
        (8..9) % 8 = 0..1: the next achieved goals of transitions 1..2 (t..T-1); "final"
        takes (6 + 3) % 8 = 1; "episode" a row in 6 + 1 .. 6 + 3.
        """
        R, n, storage = self.rows_per_env, self.n_envs, self.storage
        offset = storage.offset_in_episode[index]
        start = row - offset
        length = storage.episode_length[(start % R) * n + env]
        relabel = rng.random(B) < self.her_ratio
        strategy = self.strategy
        if strategy is GoalSelectionStrategy.RANDOM:
            goal_env, goal_row = self._draw_transitions(rng, B)
            return relabel, ((goal_row + 1) % R) * n + goal_env
        if strategy is GoalSelectionStrategy.FUTURE:
            first, span = row + 1, length - offset
        elif strategy is GoalSelectionStrategy.FINAL:
            first, span = start + length, 1
        else:
            first, span = start + 1, length
        # floor(r * span) can round up to span for r just below 1: clamp it.
        pick = np.minimum((rng.random(B) * span).astype(np.int64), np.subtract(span, 1))
        return relabel, ((first + pick) % R) * n + env

    def _outputs(self, batch_size: int) -> _Outputs:
        """The reused output arrays of ``batch_size``."""
        out = self._reused.get(batch_size)
        if out is None:
            out = self._reused[batch_size] = _Outputs(batch_size, self.storage)
        return out


def _deliver(out: _Outputs, device: Any) -> HerBatch:
    """The batch as numpy arrays (``device`` None), else as torch tensors on ``device``."""
    if device is None:
        return out.batch()
    import torch

    views = out.tensors
    if views is None:
        batch = out.batch()
        views = out.tensors = HerBatch(
            {k: torch.from_numpy(v) for k, v in batch.observations.items()},
            torch.from_numpy(batch.actions),
            torch.from_numpy(batch.rewards),
            {k: torch.from_numpy(v) for k, v in batch.next_observations.items()},
            torch.from_numpy(batch.dones),
            torch.from_numpy(batch.weights),
            torch.from_numpy(batch.indices),
        )
    if torch.device(device).type == "cpu":
        return views
    return batch_to(views, device)


def _batch_of(name: str, value: Any, batch_size: int) -> np.ndarray:
    """``value`` as a ``(batch_size,)`` array; a scalar (Fetch's ``compute_terminated``
    returns a constant ``False``) stands for the whole batch."""
    array = np.asarray(value)
    if array.shape == (batch_size,):
        return array
    if array.size == 1 and array.ndim <= 1:
        return np.broadcast_to(array.reshape(()), (batch_size,))
    raise batch_shape_error(name, array.shape, batch_size)
