"""Sampling from a :class:`~goalenvs.her.buffer.HerReplayBuffer`: the draws, the relabeling
index arithmetic, the batch's reused output arrays and prioritized replay's draws and
priority updates.

:class:`HerSampling` is the buffer's sampling half (the buffer inherits it): it reads the
storage and bookkeeping that :mod:`goalenvs.her.buffer` writes (``_records``, ``_obs``,
``_to_start``, ``_ep_len``, ``_trans_row``, ``_t_lo``, ``_t_hi``, ``_tree``) and never
writes them, but for the priorities.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from goalenvs.her.common import NO_EPISODE_YET, HerBatch, batch_shape_error, batch_to, to_numpy
from goalenvs.her.settings import GoalSelectionStrategy, check_batch_size

__all__ = ["HerSampling"]


class HerSampling:
    """``sample``, its draws and the priority operations of the numpy HER buffer."""

    # Set by HerReplayBuffer (see its constructor and goalenvs.her.buffer's docstring).
    rows_per_env: int
    n_envs: int
    her_ratio: float
    goal_selection_strategy: GoalSelectionStrategy
    handle_timeout_termination: bool
    compute_reward: Any
    compute_terminated: Any
    priority_eps: float
    alpha: float
    action_shape: tuple[int, ...]
    _beta: float
    _rng: np.random.Generator
    _tree: Any
    _max_priority: float
    _records: np.ndarray
    _obs: dict[str, np.ndarray]
    _actions: np.ndarray
    _infos: dict[str, np.ndarray]
    _terminated: np.ndarray
    _truncated: np.ndarray
    _to_start: np.ndarray
    _ep_len: np.ndarray
    _trans_row: np.ndarray
    _t_lo: np.ndarray
    _t_hi: np.ndarray
    _out_cache: dict[int, dict[str, Any]]

    @property
    def n_transitions(self) -> int:
        """Transitions that can be sampled: those of complete, intact episodes."""
        return int((self._t_hi - self._t_lo).sum())

    def _draw_transitions(self, count: int) -> tuple[Any, np.ndarray]:
        """Draws ``count`` transitions uniformly from the complete, intact episodes.

        Returns ``(env, row)``: each transition's env (an int when there is one env) and
        physical row.
        """
        width = self._t_hi - self._t_lo
        total = int(width.sum())
        if total == 0:
            raise RuntimeError(NO_EPISODE_YET)
        R, n = self.rows_per_env, self.n_envs
        x = self._rng.integers(0, total, size=count)
        if n == 1:
            return 0, self._trans_row[(x + self._t_lo[0]) % R].astype(np.int64)
        # x indexes the concatenation of the streams' valid transitions: find the stream,
        # then the transition counter within it.
        cum = np.cumsum(width)
        env = np.searchsorted(cum, x, side="right")
        k = x + (self._t_lo - (cum - width))[env]
        return env, self._trans_row[(k % R) * n + env].astype(np.int64)

    def _draw_prioritized(self, count: int) -> tuple[Any, np.ndarray, np.ndarray]:
        """Draws ``count`` transitions in proportion to their priority ** alpha.

        Returns ``(env, row, weights)`` as :meth:`_draw_transitions`, with the
        importance-sampling weights ``(N * P(i)) ** -beta`` over their largest.
        """
        tree = self._tree
        total = tree.total
        if not total > 0:
            raise RuntimeError(NO_EPISODE_YET)
        flat = tree.find(self._rng.random(count) * total)
        probability = tree.nodes[tree.size + flat] / total
        weights = (self.n_transitions * probability) ** -self._beta
        weights /= weights.max()
        n = self.n_envs
        if n == 1:
            return 0, flat, weights
        return flat % n, flat // n, weights

    # The array operations of ReplayBufferBase.update_priorities.
    def _priority_input(self, value: Any) -> np.ndarray:
        return to_numpy(value)

    def _priority_indices_are_integers(self, indices: np.ndarray) -> bool:
        return bool(np.issubdtype(indices.dtype, np.integer))

    def _priority_capacity(self) -> int:
        assert self._tree is not None
        return self._tree.capacity

    def _priority_of(self, indices: np.ndarray, td_errors: np.ndarray, capacity: int) -> tuple:
        bad_index = indices.min() < 0 or indices.max() >= capacity
        if bad_index:
            return indices, None, True, False
        priority = np.abs(td_errors.astype(np.float64)) + self.priority_eps
        return indices, priority, False, not np.isfinite(priority).all()

    def _priority_set(self, indices: np.ndarray, priority: np.ndarray) -> None:
        assert self._tree is not None
        live = self._tree.nodes[self._tree.size + indices] > 0
        self._tree.update(indices[live], priority[live] ** self.alpha)
        self._max_priority = max(self._max_priority, float(priority.max()))

    def sample(self, batch_size: int, device: Any = None, *, copy: bool = False) -> HerBatch:
        """Samples ``batch_size`` transitions, relabeling each with probability k/(k+1).

        Returns numpy arrays when ``device`` is None, else torch tensors on ``device``
        (on the CPU without a copy: ``torch.from_numpy`` of the same arrays).

        The arrays are preallocated per batch size and **reused by the next call with the
        same batch_size**: consume a batch before sampling the next one, or pass
        ``copy=True`` for arrays the caller owns.
        """
        B = check_batch_size(batch_size)
        R, n = self.rows_per_env, self.n_envs
        if self._tree is None:
            env, row = self._draw_transitions(B)
            weights = None
        else:
            env, row, weights = self._draw_prioritized(B)
        if n == 1:
            index = row
            next_index = row + 1
            next_index[next_index == R] = 0
        else:
            index = row * n + env
            next_index = ((row + 1) % R) * n + env
        relabel, goal_index = self._draw_goals(B, env, row, index)

        out = self._outputs(B, copy)
        obs, next_obs = out["observations"], out["next_observations"]
        np.copyto(out["indices"], index)
        if weights is not None:
            np.copyto(out["weights"], weights)
        # Whole records in two gathers (the record array is contiguous, the per-field views
        # of it are not, and np.take copies a non-contiguous source whole), then each field
        # into its own contiguous output array.
        here, there, fields = out["records"]
        np.take(self._records, index, out=here, mode="wrap")
        np.take(self._records, next_index, out=there, mode="wrap")
        for target, source in fields:
            np.copyto(target, source)
        goals = self._obs["achieved_goal"][goal_index]
        mask = relabel.reshape((B,) + (1,) * (goals.ndim - 1))
        np.copyto(obs["desired_goal"], goals, where=mask)
        np.copyto(next_obs["desired_goal"], goals, where=mask)

        info = {key: store[index] for key, store in self._infos.items()}
        new_reward = _batch_of(
            "compute_reward",
            self.compute_reward(next_obs["achieved_goal"], obs["desired_goal"], info),
            B,
        )
        rewards = out["rewards"]
        np.copyto(rewards, new_reward, where=relabel, casting="unsafe")

        terminated = self._terminated[index]
        if self.compute_terminated is not None:
            new_terminated = _batch_of(
                "compute_terminated",
                self.compute_terminated(next_obs["achieved_goal"], obs["desired_goal"], info),
                B,
            ).astype(bool)
            terminated = np.where(relabel, new_terminated, terminated)
        if not self.handle_timeout_termination:
            terminated |= self._truncated[index]
        np.copyto(out["dones"], terminated)
        return self._deliver(out, device)

    def _draw_goals(
        self, B: int, env: Any, row: np.ndarray, index: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Which of the ``B`` transitions (at physical ``row`` of ``env``, flat ``index``)
        are relabeled, and the flat row of each one's new goal (an achieved goal).

        Worked example, one env, R = 8 rows: an episode of T = 3 transitions written at
        unwrapped rows 6..9, physical rows 6, 7, 0, 1 (row 1 holds the final observation).
        The transition at row 7 has offset a = 1 (to_start), so its episode starts at
        row 7 - 1 = 6, where ep_len says T = 3. Its next observation is row (7 + 1) % 8 = 0.
        "future" draws a goal row in 7 + 1 .. 6 + T, i.e. (8..9) % 8 = 0..1: the next
        achieved goals of transitions 1..2 (t..T-1); "final" takes (6 + 3) % 8 = 1;
        "episode" a row in 6 + 1 .. 6 + 3.
        """
        R, n, rng = self.rows_per_env, self.n_envs, self._rng
        offset = self._to_start[index]
        start = row - offset
        length = self._ep_len[(start % R) * n + env]
        relabel = rng.random(B) < self.her_ratio
        strategy = self.goal_selection_strategy
        if strategy is GoalSelectionStrategy.RANDOM:
            goal_env, goal_row = self._draw_transitions(B)
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

    def _outputs(self, B: int, fresh: bool) -> dict[str, Any]:
        cached = None if fresh else self._out_cache.get(B)
        if cached is not None:
            return cached
        out: dict[str, Any] = {
            "observations": {k: np.empty((B, *v.shape[1:]), v.dtype) for k, v in self._obs.items()},
            "next_observations": {
                k: np.empty((B, *v.shape[1:]), v.dtype) for k, v in self._obs.items()
            },
            "actions": np.empty((B, *self.action_shape), self._actions.dtype),
            "rewards": np.empty(B, np.float32),
            "dones": np.empty(B, np.float32),
            "weights": np.ones(B, np.float32),  # stays all ones for a uniform buffer
            "indices": np.empty(B, np.int64),
            "tensors": None,  # torch views of the arrays above, made on first use
        }
        # The gathered records of the transitions and of their next rows, and the
        # (output, field of a gathered record) pairs that sample() copies.
        here, there = np.empty(B, self._records.dtype), np.empty(B, self._records.dtype)
        fields = [(out["observations"][k], here[f"obs/{k}"]) for k in self._obs]
        fields += [(out["next_observations"][k], there[f"obs/{k}"]) for k in self._obs]
        fields += [(out["actions"], here["action"]), (out["rewards"], here["reward"])]
        out["records"] = (here, there, fields)
        if not fresh:
            self._out_cache[B] = out
        return out

    @staticmethod
    def _deliver(out: dict[str, Any], device: Any) -> HerBatch:
        if device is None:
            return HerBatch(
                out["observations"],
                out["actions"],
                out["rewards"],
                out["next_observations"],
                out["dones"],
                out["weights"],
                out["indices"],
            )
        import torch

        views = out["tensors"]
        if views is None:
            views = HerBatch(
                {k: torch.from_numpy(v) for k, v in out["observations"].items()},
                torch.from_numpy(out["actions"]),
                torch.from_numpy(out["rewards"]),
                {k: torch.from_numpy(v) for k, v in out["next_observations"].items()},
                torch.from_numpy(out["dones"]),
                torch.from_numpy(out["weights"]),
                torch.from_numpy(out["indices"]),
            )
            out["tensors"] = views
        device = torch.device(device)
        if device.type == "cpu":
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
