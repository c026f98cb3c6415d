"""The reference Hindsight Experience Replay buffer.

Storage
-------
Each parallel env writes its own *stream* of ``rows_per_env = buffer_size // n_envs``
rows, used as a ring. A row holds one observation (every key of the observation Dict, in
the space's dtype) and the transition taken from it (action, reward, terminated,
truncated and the declared info values). An episode of ``T`` transitions occupies
``T + 1`` consecutive rows: row ``t`` holds ``obs_t`` and transition ``t``, and the next
observation of transition ``t`` is simply row ``t + 1``, so ``next_obs`` is never stored
twice. The extra last row holds the episode's final observation and no transition.

The streams are interleaved: row ``r`` of env ``e`` is element ``r * n_envs + e`` of every
flat array, so that envs which write the same row (all of them, while their episodes end
together, as under a time limit) store a step with one slice per array. The observation
keys, the action and the reward of a row live together in one record of a structured
array (``_records``; the per-field arrays are views of it): sampling gathers whole records
in one pass, and with one env a mid-episode step (action and reward of record ``r``,
observation of record ``r + 1``) is one contiguous run of bytes, written at once. The
bookkeeping columns and the info values stay separate arrays.

Every stream counts rows and transitions with *unwrapped* counters that only grow (the
physical row is ``counter % rows_per_env``): the row of the next observation, the start
of the episode in progress, ``valid_lo`` (first row of the oldest intact episode), and the
range of valid transitions ``[t_lo, t_hi)``. When a write would overwrite a row at or
after ``valid_lo``, the whole oldest episode leaves the valid range first, so a
half-overwritten episode is never sampled.

Three int32 columns make sampling and relabeling pure index arithmetic:
``trans_row[k]`` is the physical row of the stream's transition ``k`` (a ring too),
``to_start[row]`` the row's offset in its episode, and ``ep_len[start_row]`` (written at
the episode's first row when the episode ends) its number of transitions ``T``.

Sampling
--------
A transition is drawn uniformly among all complete, intact episodes of every stream,
relabeled with probability ``k / (k + 1)`` (``k = n_sampled_goal``), and the rewards of
the whole batch come from one ``compute_reward(next_achieved_goal, desired_goal, info)``
call. The sampling half of the class lives in :mod:`goalenvs.her.buffer_sampling`, the
saved file in :mod:`goalenvs.her.buffer_file`, and what both HER buffers share (settings,
input checks, prioritized replay's rules) in :mod:`goalenvs.her.settings` and
:mod:`goalenvs.her.common`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs.her.buffer_file import load_buffer, save_buffer
from goalenvs.her.buffer_sampling import HerSampling
from goalenvs.her.common import ReplayBufferBase
from goalenvs.her.settings import BufferSettings, GoalSelectionStrategy
from goalenvs.her.sumtree import SumTree

__all__ = ["HerReplayBuffer"]

_BOOL = np.dtype(bool)


class HerReplayBuffer(HerSampling, ReplayBufferBase):
    """Hindsight Experience Replay buffer with relabeling at sample time.

    Args:
        buffer_size: rows of storage over all envs (each env gets ``buffer_size // n_envs``).
            A row holds one transition; each stored episode also uses one row for its final
            observation, so episodes of ``T`` steps fill ``T / (T + 1)`` of it with
            transitions.
        observation_space: the single-env goal Dict space (``observation``,
            ``achieved_goal``, ``desired_goal``; other keys are stored alike).
        action_space: the single-env action space (Box, Discrete or MultiBinary).
        compute_reward: a goal env (single or vector, possibly wrapped) or a callable
            ``(achieved_goal, desired_goal, info) -> rewards`` over a batch.
        n_envs: parallel envs writing into the buffer, one transition each per ``add``.
        n_sampled_goal: ``k``: a sampled transition is relabeled with probability
            ``k / (k + 1)``; 0 disables relabeling.
        goal_selection_strategy: ``"future"``, ``"final"``, ``"episode"`` or ``"random"``
            (see :class:`GoalSelectionStrategy`).
        handle_timeout_termination: when True, a truncated (time-limit) transition still
            bootstraps (``dones`` = terminated); when False, ``dones`` = terminated or
            truncated.
        info_keys: keys of the step info that ``compute_reward`` needs; their values are
            stored as arrays and passed back as a dict of batched arrays.
        compute_terminated: None keeps the stored ``terminated`` for relabeled goals (as
            stable-baselines3); a goal env or callable recomputes it for relabeled goals.
        seed: seed of the numpy Generator that draws every sample.
        prioritized: proportional prioritized replay (Schaul et al. 2016) over the stored
            transitions instead of uniform draws: transition ``i`` is drawn with probability
            ``p_i ** alpha / sum_j p_j ** alpha``; relabeling still happens at sample time.
            New transitions get the largest priority seen so far; the learner reports TD
            errors through :meth:`update_priorities`.
        alpha: how much the priorities count, in [0, 1] (0: uniform).
        beta: importance-sampling correction, in [0, 1] (1: full); ``weights`` are
            ``(N * P(i)) ** -beta`` over their batch maximum. May be changed between
            samples (annealed towards 1).
        priority_eps: added to ``|td_error|`` so that no transition stops being drawn.
    """

    _NAME = "HerReplayBuffer"

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        compute_reward: Any,
        n_envs: int = 1,
        n_sampled_goal: int = 4,
        goal_selection_strategy: str | GoalSelectionStrategy = "future",
        handle_timeout_termination: bool = True,
        info_keys: Sequence[str] = (),
        compute_terminated: Any = None,
        seed: int | None = None,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        priority_eps: float = 1e-6,
    ) -> None:
        settings = BufferSettings(
            buffer_size,
            observation_space,
            action_space,
            n_envs,
            n_sampled_goal,
            goal_selection_strategy,
            handle_timeout_termination,
            info_keys,
            seed,
            prioritized,
            alpha,
            beta,
            priority_eps,
        )
        self._configure(settings, compute_reward, compute_terminated)
        self._rng = np.random.default_rng(seed)
        self._max_priority = 1.0
        n, rows = self.n_envs, self.rows_per_env
        # Leaf row * n_envs + env holds p ** alpha of that row's transition while it can be
        # sampled (its episode is complete and intact), 0 otherwise.
        self._tree = SumTree(rows * n) if self.prioritized else None
        self._allocate(observation_space, action_space)

        # Counters (see the module docstring). Every add() stores one transition per env,
        # so one int counts them for all envs (``_t``); an env's head row is that count plus
        # the rows its closed episodes' final observations took, one each (``_skip``).
        self._env = np.arange(n, dtype=np.int64)
        self._t = 0  # transitions each env has added
        self._skip = np.zeros(n, dtype=np.int64)  # episodes each env has closed
        self._ep_start = np.zeros(n, dtype=np.int64)  # first row of the episode in progress
        self._valid_lo = np.zeros(n, dtype=np.int64)  # first row of the oldest intact episode
        self._t_lo = np.zeros(n, dtype=np.int64)  # valid transitions: [t_lo, t_hi)
        self._t_hi = np.zeros(n, dtype=np.int64)
        self._starting = np.ones(n, dtype=bool)  # the env's next add() starts an episode
        self._n_starting = n
        self._make_views()
        self._action_full_shape = (n, *self.action_shape)
        self._vector_shape = (n,)
        # Episode offsets 0 0 .. 1 1 .. (each repeated n_envs times), grown on demand: the
        # to_start values of episodes that every env ends together.
        self._offsets = np.zeros(0, dtype=np.int32)
        self._no_flags = bytes(n)  # tobytes() of an all-False flag vector: a cheap any()
        self._all_flags = bytes([1]) * n  # and of an all-True one
        self._summarize()
        self._out_cache: dict[int, dict[str, Any]] = {}

    def _allocate(self, observation_space: spaces.Dict, action_space: spaces.Space) -> None:
        """The storage: the records, the flags, the info stores (empty until the first
        add) and the three int32 columns of the index arithmetic."""
        n = self.n_envs
        total = self.rows_per_env * n
        self._obs_shapes = {
            key: (n, *space.shape) for key, space in observation_space.spaces.items()
        }
        if isinstance(action_space, spaces.Discrete):
            self.action_shape: tuple[int, ...] = ()
            action_dtype = np.dtype(np.int64)
        else:
            self.action_shape = tuple(action_space.shape)
            action_dtype = np.dtype(action_space.dtype)
            # Actors emit float32 whatever the Box says: float64 actions are stored (and
            # sampled) as float32, as stable-baselines3 does.
            if action_dtype == np.float64:
                action_dtype = np.dtype(np.float32)
        # One record per (row, env) holds the observation keys, the action and the reward,
        # in that order (see _make_views).
        fields = [
            (f"obs/{key}", space.dtype, space.shape)
            for key, space in observation_space.spaces.items()
        ]
        fields += [("action", action_dtype, self.action_shape), ("reward", np.float32, ())]
        self._records = np.zeros(total, np.dtype(fields, align=True))
        self._terminated = np.zeros(total, dtype=bool)
        self._truncated = np.zeros(total, dtype=bool)
        # Allocated at the first add(), when the values show their dtype and shape.
        self._infos: dict[str, np.ndarray] = {}
        self._to_start = np.zeros(total, dtype=np.int32)
        self._ep_len = np.zeros(total, dtype=np.int32)
        self._trans_row = np.zeros(total, dtype=np.int32)

    # Views of the records; rebuilt after unpickling, where pickled views would come back as
    # copies detached from the storage.
    _VIEWS = (
        "_obs",
        "_actions",
        "_rewards",
        "_obs_rows",
        "_action_rows",
        "_reward_rows",
        "_packed",
    )

    def _make_views(self) -> None:
        """Per-field views of the record array, and the bytes view of a one-env step.

        ``_obs[key]``, ``_actions`` and ``_rewards`` are (rows * n_envs, ...) views indexed
        by flat row ``row * n_envs + env``; the ``*_rows`` views split that axis into
        (rows, n_envs).
        """
        rows, n = self.rows_per_env, self.n_envs
        records = self._records
        self._obs = {key: records[f"obs/{key}"] for key in self._obs_shapes}
        self._actions = records["action"]
        self._rewards = records["reward"]

        def by_row(store: np.ndarray) -> np.ndarray:
            return store.reshape(rows, n, *store.shape[1:])

        self._obs_rows = tuple((key, by_row(store)) for key, store in self._obs.items())
        self._action_rows = by_row(self._actions)
        self._reward_rows = by_row(self._rewards)
        # With one env and records without padding, the bytes of a step (action and reward
        # of record ``row``, then the observation keys of record ``row + 1``) are one
        # contiguous run: ``_packed`` = (bytes view, record size, action offset, action
        # dtype, reward dtype, (key, shape, dtype) per observation key) lets add() store
        # them with one bytes join and one write (_step_bytes), where a numpy assignment
        # per field costs about twice as much. None otherwise.
        layout = records.dtype
        offsets = [layout.fields[name][1] for name in layout.names]
        sizes = [layout.fields[name][0].itemsize for name in layout.names]
        packed = offsets == list(np.cumsum([0, *sizes[:-1]])) and sum(sizes) == layout.itemsize
        self._packed = None
        if n == 1 and packed:
            self._packed = (
                memoryview(records.view(np.uint8)),
                layout.itemsize,
                layout.fields["action"][1],
                self._actions.dtype,
                self._rewards.dtype,
                tuple(
                    (key, self._obs_shapes[key], store.dtype) for key, store in self._obs.items()
                ),
            )

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in self._VIEWS:
            del state[name]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._make_views()

    def _summarize(self) -> None:
        """Rewrites the two summaries of ``_skip`` and ``_valid_lo`` that add() tests.

        Called wherever those arrays change (closing, retiring, loading), so the summaries
        are never stale: ``_in_step`` is the common ``_skip`` while every env writes the
        same row (episodes that end together), else None; add() must retire an old episode
        once ``_t + 1 - rows_per_env`` reaches ``_retire_t``.
        """
        skip = self._skip
        self._in_step = int(skip[0]) if _all_equal(skip) else None
        self._retire_t = int(np.subtract(self._valid_lo, skip).min())

    @property
    def _head(self) -> np.ndarray:
        """Row of each env's next observation (unwrapped)."""
        return self._t + self._skip

    @property
    def _t_count(self) -> np.ndarray:
        """Transitions each env has added (the same for every env)."""
        return np.full(self.n_envs, self._t, dtype=np.int64)

    # ------------------------------------------------------------------ properties
    @property
    def episodes_in_progress(self) -> int:
        """Envs whose current episode has stored transitions but has not ended."""
        return self.n_envs - self._n_starting

    def can_sample(self) -> bool:
        """Whether the buffer holds a complete, intact episode (``sample`` works)."""
        return self.n_transitions > 0

    def __repr__(self) -> str:
        return (
            f"HerReplayBuffer(buffer_size={self.buffer_size}, n_envs={self.n_envs}, "
            f"n_sampled_goal={self.n_sampled_goal}, "
            f"goal_selection_strategy={self.goal_selection_strategy.value!r}, "
            f"n_transitions={self.n_transitions})"
        )

    # ------------------------------------------------------------------ writing
    def add(
        self,
        obs: Mapping[str, np.ndarray],
        next_obs: Mapping[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        infos: Mapping[str, np.ndarray] | Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Stores one transition per env; every array has leading dimension ``n_envs``.

        ``next_obs`` is the true next observation (the final one on an episode's last
        step, not the reset observation of the next episode). An env's episode ends when
        ``terminated | truncated``; its next ``add`` starts a new episode. Within an
        episode ``obs`` is the previous ``next_obs``: it is neither stored nor checked again.
        ``infos`` is a dict of per-env arrays (gymnasium vector envs) or a sequence of
        per-env dicts (stable-baselines3); only ``info_keys`` are read.
        """
        R = self.rows_per_env
        # ``obs`` is read only where an episode starts (mid-episode it is the stored
        # previous next_obs), so only then is it checked.
        if self._n_starting:
            obs = self._check_obs("obs", obs)
        if type(action) is not np.ndarray or action.shape != self._action_full_shape:
            action = self._check_action(action)
        if type(reward) is not np.ndarray or reward.shape != self._vector_shape:
            reward = self._per_env("reward", reward, None)
        parts = self._step_bytes(action, reward, next_obs) if self._packed else None
        if parts is None:
            next_obs = self._check_obs("next_obs", next_obs)
        # Mid-episode the flags are all False: n zero bytes of a bool array says so, and
        # that it holds n values, in one comparison. Anything else (a flag set, another
        # dtype or type, a wrong size) is read the careful way.
        no_flags = self._no_flags
        try:
            ending = not (
                terminated.dtype is _BOOL
                and truncated.dtype is _BOOL
                and terminated.tobytes() == no_flags
                and truncated.tobytes() == no_flags
            )
        except AttributeError:  # not arrays
            ending = True
        if ending:
            terminated, truncated, done, ending = self._read_flags(terminated, truncated)
        info_values = self._info_values(infos) if self.info_keys else None

        t = self._t
        if t + 1 - R >= self._retire_t:
            # Writing next_obs at row head + 1 overwrites row head + 1 - R of its stream:
            # first retire, whole, the oldest episode that row belongs to.
            self._retire_overwritten(t + 1 - R + self._skip)
        # Each env writes its observation (at an episode's start) and transition at row head,
        # its next observation at row head + 1 of the (rows, n_envs) views: an int row while
        # every env writes the same one (episodes that end together), else (rows, envs).
        skip = self._in_step
        if skip is not None:
            here = (t + skip) % R
            there = here + 1 if here + 1 < R else 0
        else:
            head = t + self._skip
            here = (head % R, self._env)
            there = ((head + 1) % R, self._env)
        if self._n_starting:
            self._write_first_obs(obs, here)
        if parts is not None and skip is not None and there:
            # The step's bytes are one contiguous run of the records (see _make_views).
            at = self._packed[1] * here + self._packed[2]
            self._packed[0][at : at + self._packed[1]] = b"".join(parts)
        else:
            for key, rows in self._obs_rows:
                rows[there] = next_obs[key]
            self._action_rows[here] = action
            self._reward_rows[here] = reward
        if info_values:
            self._write_infos(info_values, here)
        self._t = t + 1
        if ending:
            self._close_done(done, terminated, truncated)

    def _write_infos(self, values: dict[str, np.ndarray], here: Any) -> None:
        """Writes a step's info values at row ``here`` (as add() indexes it)."""
        R, n = self.rows_per_env, self.n_envs
        for key, value in values.items():
            store = self._infos[key]
            store.reshape(R, n, *store.shape[1:])[here] = value

    def _close_done(self, done: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> None:
        """Ends the episodes of the envs where ``done`` (flags one per env)."""
        if done.tobytes() == self._all_flags:
            self._close_episodes(slice(None), terminated, truncated)
        else:
            envs = np.flatnonzero(done)
            self._close_episodes(envs, terminated[envs], truncated[envs])

    def _read_flags(self, terminated: Any, truncated: Any) -> tuple[Any, Any, Any, bool]:
        """The flags of a step read the careful way (add()'s fast test did not vouch for
        them): ``(terminated, truncated, done, whether any episode ends)``."""
        terminated = self._per_env("terminated", terminated, None).astype(bool, copy=False)
        truncated = self._per_env("truncated", truncated, None).astype(bool, copy=False)
        done = terminated | truncated
        return terminated, truncated, done, done.tobytes() != self._no_flags

    def _write_first_obs(self, obs: Mapping[str, np.ndarray], here: Any) -> None:
        """Writes the first observation of each env that starts an episode at row ``here``
        (an int while every env writes the same row, else a pair ``(rows, envs)``)."""
        if self._n_starting == self.n_envs:
            for key, rows in self._obs_rows:
                rows[here] = obs[key]
        else:
            envs = np.flatnonzero(self._starting)
            first = (here if isinstance(here, int) else here[0][envs], envs)
            for key, rows in self._obs_rows:
                rows[first] = np.asarray(obs[key])[envs]
        self._starting[:] = False
        self._n_starting = 0

    def _step_bytes(self, action: np.ndarray, reward: np.ndarray, next_obs: Any) -> Any:
        """The bytes of a one-env step as they lie in the records (action, reward, then the
        next observation's keys), or None when a key of ``next_obs`` is missing or not an
        array of the expected shape (add() then checks it the careful way)."""
        _, _, _, action_dtype, reward_dtype, obs_layout = self._packed
        parts = [
            action.tobytes()
            if action.dtype is action_dtype
            else action.astype(action_dtype).tobytes(),
            reward.tobytes()
            if reward.dtype is reward_dtype
            else reward.astype(reward_dtype).tobytes(),
        ]
        try:
            if len(next_obs) != len(obs_layout):
                return None
            for key, shape, dtype in obs_layout:
                value = next_obs[key]
                if type(value) is not np.ndarray or value.shape != shape:
                    return None
                parts.append(
                    value.tobytes() if value.dtype is dtype else value.astype(dtype).tobytes()
                )
        except (TypeError, KeyError):
            return None
        return parts

    def _close_episodes(self, envs: Any, terminated: Any, truncated: Any) -> None:
        """Ends the episodes in progress of ``envs`` (an index array, or ``slice(None)``
        for every env) with the given flags, one per env of ``envs``.

        The final observation already sits at row head (written as the last next_obs); the
        next episode starts after it. Only an episode's last transition can be terminated
        or truncated: the flags, the row offsets and the transitions' rows are written once
        per episode, here. The writes go through index arrays, which are slices (and the
        per-env values scalars) when every env ends an episode of the same rows: the
        common case of a time limit over envs reset together.
        """
        R, n = self.rows_per_env, self.n_envs
        t = self._t
        start = self._ep_start[envs]
        # Slices when every env ends an episode of the same rows and transitions, neither
        # wrapping around the ring.
        aligned = isinstance(envs, slice) and self._in_step is not None and _all_equal(start)
        if aligned:
            start = int(start[0])
            head = t + self._in_step
            length = head - start
            first_row, first_k = start % R, (t - length) % R
            aligned = first_row + length <= R and first_k + length <= R
        if aligned:
            count = length * n
            if self._offsets.size < count:
                self._offsets = np.repeat(np.arange(max(length, 64), dtype=np.int32), n)
            offset = self._offsets[:count]
            rows = offset + first_row
            lo = first_row * n
            flat = slice(lo, lo + count)
            trans = slice(first_k * n, first_k * n + count)
            last = slice(lo + count - n, lo + count)
            first = slice(lo, lo + n)
        else:
            env = self._env[envs]
            start = self._ep_start[envs]
            head = t + self._skip[envs]
            length = head - start
            offset = _offsets_within(length)
            rows = (np.repeat(start, length) + offset) % R
            flat = rows * n + np.repeat(env, length)
            trans = ((np.repeat(t - length, length) + offset) % R) * n + np.repeat(env, length)
            last = ((head - 1) % R) * n + env
            first = (start % R) * n + env
        self._to_start[flat] = offset
        self._trans_row[trans] = rows
        self._terminated[flat] = False
        self._truncated[flat] = False
        self._terminated[last] = terminated
        self._truncated[last] = truncated
        self._ep_len[first] = length
        if self._tree is not None:
            leaves = np.arange(flat.start, flat.stop) if isinstance(flat, slice) else flat
            self._tree.update(leaves, self._max_priority**self.alpha)
        self._t_hi[envs] = t
        self._skip[envs] += 1
        self._ep_start[envs] = head + 1
        self._starting[envs] = True
        self._n_starting += n if isinstance(envs, slice) else envs.size
        self._summarize()

    def _retire_overwritten(self, victim: np.ndarray) -> None:
        """Retires, whole, each env's oldest episodes that hold its row ``victim[env]``."""
        R, n = self.rows_per_env, self.n_envs
        valid_lo = self._valid_lo
        while True:
            hit = victim >= valid_lo
            if hit.tobytes() == self._no_flags:
                break
            envs = slice(None) if hit.tobytes() == self._all_flags else np.flatnonzero(hit)
            lo = valid_lo[envs]
            if (lo >= self._ep_start[envs]).any():
                env = int(np.flatnonzero(hit & (valid_lo >= self._ep_start))[0])
                raise ValueError(
                    f"the episode of env {env} has reached {R - 1} transitions without ending: "
                    f"it no longer fits in its {R} rows (buffer_size={self.buffer_size} // "
                    f"n_envs={n}); use a larger buffer_size"
                )
            env = self._env[envs]
            length = self._ep_len[(lo % R) * n + env]
            if self._tree is not None:
                offset = _offsets_within(length)
                rows = (np.repeat(lo, length) + offset) % R
                self._tree.update(rows * n + np.repeat(env, length), 0.0)
            self._t_lo[envs] += length
            valid_lo[envs] = lo + length + 1
        self._summarize()

    def truncate_last_trajectory(self) -> None:
        """Ends every episode in progress at its last stored transition, as a truncation.

        Use it when collection stops mid-episode for good (for example before saving a
        buffer that will not be resumed): the cut episodes become sampleable and bootstrap
        from their last observation (when ``handle_timeout_termination``).
        """
        envs = np.flatnonzero(~self._starting)
        if envs.size == 0:
            return
        self._close_episodes(envs, np.zeros(envs.size, bool), np.ones(envs.size, bool))

    def _check_obs(self, name: str, obs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        # The hot path of add(): one shape comparison per key; anything else falls through
        # to the careful checks below, which coerce or explain.
        try:
            if len(obs) == len(self._obs_shapes):
                for key, expected in self._obs_shapes.items():
                    if obs[key].shape != expected:
                        break
                else:
                    return obs
        except (TypeError, KeyError, AttributeError):
            pass
        return self._check_obs_fully(name, obs)

    def _convert(self, name: str, value: Any, dtype: Any) -> np.ndarray:
        # Stored as given: the store's assignment casts, as numpy does.
        return np.asarray(value)

    def _info_values(self, infos: Any) -> dict[str, np.ndarray]:
        n = self.n_envs
        values = {}
        for key in self.info_keys:
            value = np.asarray(self._info_value(infos, key))
            if value.ndim == 0 or value.shape[0] != n or value.dtype == object:
                raise ValueError(
                    f"infos[{key!r}] has shape {value.shape} (dtype {value.dtype}), expected a "
                    f"numeric array with leading dimension n_envs={n}"
                )
            store = self._infos.get(key)
            if store is None:
                store = np.zeros((self.rows_per_env * n, *value.shape[1:]), dtype=value.dtype)
                self._infos[key] = store
            elif value.shape[1:] != store.shape[1:]:
                raise ValueError(
                    f"infos[{key!r}] has shape {value.shape}, expected {(n, *store.shape[1:])}"
                )
            elif not np.can_cast(value.dtype, store.dtype, "safe"):
                # The store took the dtype of the first value seen (an int 0, say); a later
                # value it cannot hold widens it rather than being cast down silently.
                store = store.astype(np.result_type(store.dtype, value.dtype))
                self._infos[key] = store
            values[key] = value
        return values

    # ------------------------------------------------------------------ save / load
    def save(self, path: str | os.PathLike) -> None:
        """Writes the whole buffer to ``path`` as an uncompressed ``.npz`` (no pickle).

        The file holds the storage, the episode bookkeeping, the configuration and the
        sampling generator's state. Episodes in progress are written as truncated at their
        last stored transition (as :meth:`truncate_last_trajectory` would make them); the
        live buffer is left as it was, so collection goes on across a save. The file is
        written whole to a temporary file beside ``path`` and then renamed over it: a
        crash never leaves a half-written ``path``. The reward function is not saved: pass
        it again to :meth:`load`.
        """
        save_buffer(self, path)

    # The arrays that closing an episode writes: a saved snapshot gets its own copies.
    _BOOKKEEPING = ("_terminated", "_truncated", "_to_start", "_ep_len", "_trans_row", "_skip",
                    "_ep_start", "_valid_lo", "_t_lo", "_t_hi", "_starting")  # fmt: skip

    def _closed_copy(self) -> HerReplayBuffer:
        """This buffer with its episodes in progress truncated, sharing the records.

        Closing an episode writes only bookkeeping (flags, offsets, counters), never the
        records or infos, so the copy shares those and copies the rest.
        """
        if self._n_starting == self.n_envs:
            return self
        snapshot = copy.copy(self)
        for name in self._BOOKKEEPING:
            setattr(snapshot, name, getattr(self, name).copy())
        snapshot._tree = copy.deepcopy(self._tree)
        snapshot.truncate_last_trajectory()
        return snapshot

    def _state_arrays(self) -> dict[str, np.ndarray]:
        """The arrays a saved file holds besides the observations, priorities and infos
        (each attribute ``_name``; ``_head`` and ``_t_count`` are computed, fresh arrays)."""
        names = ("actions", "rewards", "terminated", "truncated", "to_start", "ep_len", "trans_row",
                 "head", "ep_start", "valid_lo", "t_count", "t_lo", "t_hi")  # fmt: skip
        return {name: getattr(self, "_" + name) for name in names}

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        compute_reward: Any,
        compute_terminated: Any = None,
    ) -> HerReplayBuffer:
        """Reads a buffer written by :meth:`save`; sampling continues where it left off.

        A file that is truncated, corrupt or not written by :meth:`save` raises a
        ValueError naming the file.
        """
        return load_buffer(cls, path, compute_reward, compute_terminated)


# ---------------------------------------------------------------------- helpers


def _offsets_within(length: np.ndarray) -> np.ndarray:
    """Each row's offset in its episode, for episodes of ``length`` rows laid end to end:
    lengths (2, 3) give 0 1 | 0 1 2."""
    return np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length)


def _all_equal(values: np.ndarray) -> bool:
    """Whether every element of the 1-d contiguous array ``values`` equals the first
    (compared as bytes: several times cheaper than numpy on a few elements)."""
    raw = values.tobytes()
    return raw == raw[: values.itemsize] * values.size
