"""The reference Hindsight Experience Replay buffer.

:class:`HerReplayBuffer` writes episodes into the storage that
:mod:`goalenvs.her.buffer_state` describes (flat ring buffers, one stream per env, one
row per observation) and samples them through its :class:`~goalenvs.her.buffer_sampling.
HerSampler`: a transition is drawn uniformly among all complete, intact episodes of every
stream, relabeled with probability ``k / (k + 1)`` (``k = n_sampled_goal``), and the
rewards of the whole batch come from one ``compute_reward(next_achieved_goal,
desired_goal, info)`` call. Its file is :mod:`goalenvs.her.buffer_file`'s; what both HER
buffers share (settings, input checks, copies, prioritized replay's rules) lives in
:mod:`goalenvs.her.settings` and :mod:`goalenvs.her.common`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from gymnasium import spaces

from goalenvs.core.types import DeviceLike
from goalenvs.her.buffer_file import read_buffer_file, write_buffer_file
from goalenvs.her.buffer_sampling import HerSampler
from goalenvs.her.buffer_state import HerBufferState, HerStorage
from goalenvs.her.common import HerBatch, ReplayBufferBase, to_numpy
from goalenvs.her.goal_mix import GoalMix
from goalenvs.her.settings import BufferSettings, GoalSelectionStrategy, check_batch_size
from goalenvs.her.sumtree import SumTree

__all__ = ["HerReplayBuffer"]

# Where a step is written in the (rows, n_envs) views: one row for every env (episodes
# that end together), else a pair of index arrays (rows, envs).
Row = int | tuple[np.ndarray, np.ndarray]

_BOOL = np.dtype(bool)


class _StepBytes(NamedTuple):
    """Where the bytes of a one-env mid-episode step go: the action and reward of record
    ``row`` and the observation keys of record ``row + 1`` lie in one contiguous run of the
    records' bytes (when the records have no padding), so add() writes them with one
    bytes join and one copy, where a numpy assignment per field costs about twice as much.
    """

    #: The records' bytes.
    memory: memoryview
    #: Bytes per record.
    record_size: int
    #: Where the action starts within a record.
    action_offset: int
    action_dtype: np.dtype
    reward_dtype: np.dtype
    #: (key, shape of the one env's value, dtype) per observation key, in the records' order.
    observation_layout: tuple[tuple[str, tuple[int, ...], np.dtype], ...]

    @classmethod
    def of(cls, records: np.ndarray) -> _StepBytes | None:
        """The layout of ``records``, or None when its fields are padded."""
        layout = records.dtype
        names = layout.names or ()
        by_name: Mapping[str, Any] = layout.fields or {}
        fields = [by_name[name] for name in names]
        offsets = [offset for _, offset, *_ in fields]
        sizes = [dtype.itemsize for dtype, *_ in fields]
        if offsets != list(np.cumsum([0, *sizes[:-1]])) or sum(sizes) != layout.itemsize:
            return None
        observation_layout = tuple(
            (name[4:], (1, *dtype.shape), dtype.base)
            for name, (dtype, *_) in zip(names, fields, strict=True)
            if name.startswith("obs/")
        )
        action, reward = records["action"], records["reward"]
        return cls(
            memory=records.view(np.uint8).data,
            record_size=layout.itemsize,
            action_offset=by_name["action"][1],
            action_dtype=action.dtype,
            reward_dtype=reward.dtype,
            observation_layout=observation_layout,
        )

    def join(self, action: np.ndarray, reward: np.ndarray, next_obs: Any) -> bytes | None:
        """The bytes of a step (action, reward, then the next observation's keys), or None
        when a key of ``next_obs`` is missing or not an array of the expected shape (add()
        then checks it the careful way)."""
        # Each value's bytes in the records' dtype, cast first where it has another one
        # (written out rather than a helper call: add() runs this once per env step).
        action_dtype, reward_dtype = self.action_dtype, self.reward_dtype
        parts = [
            action.tobytes()
            if action.dtype is action_dtype
            else action.astype(action_dtype).tobytes(),
            reward.tobytes()
            if reward.dtype is reward_dtype
            else reward.astype(reward_dtype).tobytes(),
        ]
        try:
            if len(next_obs) != len(self.observation_layout):
                return None
            for key, shape, dtype in self.observation_layout:
                value = next_obs[key]
                if type(value) is not np.ndarray or value.shape != shape:
                    return None
                parts.append(
                    value.tobytes() if value.dtype is dtype else value.astype(dtype).tobytes()
                )
        except (TypeError, KeyError):
            return None
        return b"".join(parts)

    def write(self, row: int, step: bytes) -> None:
        """Writes a step's bytes (see :meth:`join`) from the action of record ``row`` on."""
        at = self.record_size * row + self.action_offset
        self.memory[at : at + len(step)] = step


class HerReplayBuffer(ReplayBufferBase):
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
            ``(achieved_goal, desired_goal, info) -> rewards`` over a batch: one reward per
            goal pair (a single value for the whole batch is an error at ``sample``).
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
        seed: seed of the numpy Generator (``rng``) that draws every sample.
        prioritized: proportional prioritized replay (Schaul et al. 2016) over the stored
            transitions instead of uniform draws: transition ``i`` is drawn with probability
            ``p_i ** alpha / sum_j p_j ** alpha``; relabeling still happens at sample time.
            New transitions get the largest priority seen so far; the learner reports TD
            errors through :meth:`update_priorities`.
        alpha: how much the priorities count, in [0, 1] (0: uniform).
        beta: importance-sampling correction, in [0, 1] (1: full); ``weights`` are
            ``(N * P(i)) ** -beta`` over their batch maximum. May be changed between
            samples (annealed towards 1).
        priority_eps: added to ``|td_error|`` (or to an episode's goal motion) so that no
            transition stops being drawn.
        goal_mix: where the goals of sampled transitions come from, as fractions of
            future / final / episode / achieved / desired / original goals (a
            :class:`~goalenvs.her.goal_mix.GoalMix`, a dict or ``"future=0.4,desired=0.4,
            original=0.2"``); it replaces ``goal_selection_strategy`` and
            ``n_sampled_goal`` (leave those at their defaults). None: the strategy's mix,
            ``k / (k + 1)`` of its goals and the rest original.
        goal_mix_warmup: env steps stored (``add`` calls times ``n_envs``) before the mix
            applies; until then every sampled goal is a future one (mrl's warm-up).
        priority: what a prioritized buffer draws by: ``"td_error"`` (above), or
            ``"goal_motion"``: every transition of an episode gets, when the episode ends,
            the path length of its achieved goal, ``sum_t min(|ag_{t+1} - ag_t|,
            motion_clip)`` plus ``priority_eps`` (an env-agnostic, kinetic form of Zhao &
            Tresp's energy-based prioritization, 2018): episodes where the object moved
            are replayed more, those where nothing moved almost never once some did.
            The draws carry no importance weights (``weights`` stay ones: the skew is the
            point) and TD errors do not change them.
        motion_clip: for ``"goal_motion"``, the most one step's move counts (a falling or
            thrown object does not take over the draws); None: unclipped.
        motion_weights: for ``"goal_motion"``, a weight per achieved-goal entry that
            scales each step before its length is taken (and clipped): ``[1, 1, 4]`` makes
            a Fetch object's lift count four times a slide as long (the height term of
            Zhao & Tresp's energy); None: every entry counts alike.
        n_step: the steps of each sampled return: ``rewards`` sums the rewards of the
            transition and of the ``n_step - 1`` after it in its episode (each recomputed
            for a relabeled goal), discounted by ``gamma``, ``next_observations`` is the
            observation after the last of them and ``discounts`` is ``gamma`` to the
            power of the steps summed (fewer near an episode's end or a termination).
            1 (the default): one-step transitions, ``discounts`` None.
        gamma: the discount of n-step returns, in (0, 1): the agent's. Needed when
            ``n_step > 1``.
    Its whole content is :meth:`state`; :meth:`from_state` rebuilds a buffer from one, and
    copies and pickles go through it (see :class:`~goalenvs.her.common.ReplayBufferBase`).
    """

    _NAME = "HerReplayBuffer"

    #: The generator of every draw of :meth:`sample`.
    rng: np.random.Generator

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        compute_reward: object,
        n_envs: int = 1,
        n_sampled_goal: int = 4,
        goal_selection_strategy: str | GoalSelectionStrategy = "future",
        handle_timeout_termination: bool = True,
        info_keys: Sequence[str] = (),
        compute_terminated: object = None,
        seed: int | None = None,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        priority_eps: float = 1e-6,
        goal_mix: GoalMix | Mapping[str, float] | str | None = None,
        goal_mix_warmup: int = 0,
        priority: str = "td_error",
        motion_clip: float | None = None,
        motion_weights: Sequence[float] | None = None,
        n_step: int = 1,
        gamma: float | None = None,
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
            goal_mix,
            goal_mix_warmup,
            priority,
            motion_clip,
            motion_weights,
            n_step,
            gamma,
        )
        rng_state = dict(np.random.default_rng(seed).bit_generator.state)
        self._adopt(HerBufferState.empty(settings, rng_state), compute_reward, compute_terminated)

    def _adopt(
        self, state: HerBufferState, compute_reward: object, compute_terminated: object
    ) -> None:
        """Makes this object the buffer ``state`` describes, on the state's arrays."""
        if not isinstance(state, HerBufferState):
            raise TypeError(f"state must be a HerBufferState, got {type(state).__name__}")
        state.check()
        settings, storage = state.settings, state.storage
        self._configure(
            settings,
            compute_reward,
            compute_terminated,
            {key: values.dtype for key, values in storage.observations.items()},
            storage.actions.dtype,
        )
        self.rng = _generator_from_state(state.rng_state)
        self._storage = storage
        self._steps_added = state.steps_added
        self._max_priority = float(state.max_priority)
        weights = settings.motion_weights
        self._motion_weights = None if weights is None else np.asarray(weights, np.float64)
        self._tree: SumTree | None = None
        if state.priorities is not None:
            # Leaf row * n_envs + env holds p ** alpha of that row's transition while it can
            # be sampled (its episode is complete and intact), 0 otherwise.
            self._tree = SumTree(state.priorities.size)
            self._tree.set_all(state.priorities)
        self._sampler = HerSampler(settings, storage, self._tree)

        n, rows = settings.n_envs, settings.rows_per_env
        self._rows = rows  # rows_per_env, read once per add()
        self._env_index = np.arange(n, dtype=np.int64)
        head = self._steps_added + storage.episodes_closed
        # Envs whose next add() starts an episode: those with no transition in progress.
        self._at_episode_start = storage.episode_start == head
        self._n_at_episode_start = int(self._at_episode_start.sum())
        # (rows, n_envs) views of the per-row values that add() writes.
        self._obs_rows = tuple(
            (key, values.reshape(rows, n, *values.shape[1:]))
            for key, values in storage.observations.items()
        )
        self._action_rows = storage.actions.reshape(rows, n, *storage.actions.shape[1:])
        self._reward_rows = storage.rewards.reshape(rows, n)
        self._step_bytes = _StepBytes.of(storage.records) if n == 1 else None
        self._action_full_shape = (n, *self.action_shape)
        self._per_env_shape = (n,)
        # Episode offsets 0 0 .. 1 1 .. (each repeated n_envs times), grown on demand: the
        # offset_in_episode values of episodes that every env ends together.
        self._lockstep_offsets = np.zeros(0, dtype=np.int32)
        self._all_false = bytes(n)  # the bytes of an all-False flag array of n_envs
        self._summarize()

    # ------------------------------------------------------------------ state
    def state(self, *, truncate_in_progress: bool = False) -> HerBufferState:
        """The buffer's whole content but its goal functions, on the buffer's own arrays
        (no copy: ``state().copy()`` for a snapshot).

        With ``truncate_in_progress``, the episodes in progress are ended at their last
        stored transition, as :meth:`truncate_last_trajectory` would, in copies of the
        bookkeeping arrays that this leaves to the state (the records and infos stay
        shared): the live buffer goes on with its episodes in progress.
        """
        tree = self._tree
        state = HerBufferState(
            settings=self._settings,
            storage=self._storage,
            steps_added=self._steps_added,
            priorities=None if tree is None else tree.leaves,
            max_priority=self._max_priority,
            rng_state=dict(self.rng.bit_generator.state),
        )
        if not truncate_in_progress or self._n_at_episode_start == self.n_envs:
            return state
        closed = self.from_state(
            dataclasses.replace(state, storage=self._storage.with_copied_bookkeeping()),
            self.compute_reward,
            self.compute_terminated,
        )
        closed.truncate_last_trajectory()
        return closed.state()

    def _state_from_legacy(self, pickled: dict[str, Any]) -> HerBufferState:
        """The state of a buffer pickled by goalenvs 0.1.0's code (its ``__dict__``)."""
        if "_records" not in pickled:
            return super()._state_from_legacy(pickled)
        settings = BufferSettings(
            pickled["buffer_size"],
            pickled["observation_space"],
            pickled["action_space"],
            pickled["n_envs"],
            pickled["n_sampled_goal"],
            pickled["goal_selection_strategy"],
            pickled["handle_timeout_termination"],
            pickled["info_keys"],
            None,
            pickled.get("prioritized", False),
            pickled.get("alpha", 0.6),
            pickled.get("_beta", 0.4),
            pickled.get("priority_eps", 1e-6),
        )
        storage = HerStorage(
            records=pickled["_records"],
            terminated=pickled["_terminated"],
            truncated=pickled["_truncated"],
            infos=pickled["_infos"],
            offset_in_episode=pickled["_to_start"],
            episode_length=pickled["_ep_len"],
            transition_row=pickled["_trans_row"],
            episode_start=pickled["_ep_start"],
            intact_start=pickled["_valid_lo"],
            sampleable_from=pickled["_t_lo"],
            sampleable_to=pickled["_t_hi"],
            episodes_closed=pickled["_skip"],
        )
        tree = pickled.get("_tree")
        return HerBufferState(
            settings=settings,
            storage=storage,
            steps_added=int(pickled["_t"]),
            priorities=None if tree is None else np.array(tree.leaves),
            max_priority=float(pickled.get("_max_priority", 1.0)),
            rng_state=dict(pickled["_rng"].bit_generator.state),
        )

    def _summarize(self) -> None:
        """Rewrites the two summaries of the per-env counters that add() tests.

        Called wherever ``episodes_closed`` or ``intact_start`` change (closing, retiring,
        adopting a state), so the summaries are never stale. While every env has closed
        the same number of episodes, every env writes the same row and
        ``_common_episodes_closed`` is that number (else None). add() must retire an old
        episode once ``_steps_added`` reaches ``_next_retire_step``: the step whose next
        observation lands on the first row of an env's oldest intact episode.
        """
        storage = self._storage
        closed = storage.episodes_closed
        self._common_episodes_closed = int(closed[0]) if _all_equal(closed) else None
        oldest = int(np.subtract(storage.intact_start, closed).min())
        self._next_retire_step = oldest + self.rows_per_env - 1

    # ------------------------------------------------------------------ properties
    @property
    def n_transitions(self) -> int:
        """Transitions that can be sampled: those of complete, intact episodes."""
        return self._sampler.n_transitions

    @property
    def episodes_in_progress(self) -> int:
        """Envs whose current episode has stored transitions but has not ended."""
        return self.n_envs - self._n_at_episode_start

    def can_sample(self) -> bool:
        """Whether the buffer holds a complete, intact episode (``sample`` works), and a
        second one once the mix draws other episodes' desired goals."""
        if self.n_transitions == 0:
            return False
        return not self._sampler.needs_other_episode(self._steps_added) or (
            self._sampler.holds_two_episodes()
        )

    def __repr__(self) -> str:
        return (
            f"HerReplayBuffer(buffer_size={self.buffer_size}, n_envs={self.n_envs}, "
            f"{self._relabelling_repr()}, n_transitions={self.n_transitions})"
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
        infos: Mapping[str, np.ndarray] | Sequence[Mapping[str, object]] | None = None,
    ) -> None:
        """Stores one transition per env; every array has leading dimension ``n_envs``.

        ``next_obs`` is the true next observation (the final one on an episode's last
        step, not the reset observation of the next episode). An env's episode ends when
        ``terminated | truncated``; its next ``add`` starts a new episode. Within an
        episode ``obs`` is the previous ``next_obs``: it is neither stored nor checked again.
        ``infos`` is a dict of per-env arrays (gymnasium vector envs) or a sequence of
        per-env dicts (stable-baselines3); only ``info_keys`` are read.
        """
        rows = self._rows
        # ``obs`` is read only where an episode starts (mid-episode it is the stored
        # previous next_obs), so only then is it checked.
        if self._n_at_episode_start:
            obs = self._check_obs("obs", obs)
        if type(action) is not np.ndarray or action.shape != self._action_full_shape:
            action = self._check_action(action)
        if type(reward) is not np.ndarray or reward.shape != self._per_env_shape:
            reward = self._per_env("reward", reward, None)
        step_bytes = self._step_bytes
        step = None if step_bytes is None else step_bytes.join(action, reward, next_obs)
        if step is None:
            next_obs = self._check_obs("next_obs", next_obs)
        if _both_all_false(terminated, truncated, self._all_false):
            ending = False
        else:
            terminated, truncated, done, ending = self._read_flags(terminated, truncated)
        info_values = self._info_values(infos) if self._settings.info_keys else None

        steps = self._steps_added
        if steps >= self._next_retire_step:
            # Writing next_obs at row head + 1 overwrites row head + 1 - rows of its
            # stream: first retire, whole, the oldest episode that row belongs to.
            self._retire_overwritten(steps + 1 - rows + self._storage.episodes_closed)
        # Each env writes its observation (at an episode's start) and transition at its
        # head row, its next observation at the row after, in the (rows, n_envs) views: an
        # int row while every env writes the same one (episodes that end together), else
        # a pair of index arrays (rows, envs).
        closed = self._common_episodes_closed
        row: Row
        next_row: Row
        if closed is not None:
            row = (steps + closed) % rows
            next_row = row + 1 if row + 1 < rows else 0
        else:
            head = steps + self._storage.episodes_closed
            row = (head % rows, self._env_index)
            next_row = ((head + 1) % rows, self._env_index)
        if self._n_at_episode_start:
            self._write_first_obs(obs, row)
        if step is not None and step_bytes is not None and isinstance(row, int) and next_row:
            # One env, and the next observation's record follows the transition's.
            step_bytes.write(row, step)
        else:
            for key, values in self._obs_rows:
                values[next_row] = next_obs[key]
            self._action_rows[row] = action
            self._reward_rows[row] = reward
        if info_values:
            self._write_infos(info_values, row)
        self._steps_added = steps + 1
        if ending:
            self._close_done(done, terminated, truncated)

    def _read_flags(
        self, terminated: object, truncated: object
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        """The flags of a step read the careful way (add()'s fast test did not vouch for
        them): ``(terminated, truncated, done, whether any episode ends)``."""
        ended = self._per_env("terminated", terminated, None).astype(bool, copy=False)
        cut = self._per_env("truncated", truncated, None).astype(bool, copy=False)
        done = ended | cut
        return ended, cut, done, bool(done.any())

    def _write_first_obs(self, obs: Mapping[str, np.ndarray], row: Row) -> None:
        """Writes the first observation of each env that starts an episode at ``row`` (an
        int while every env writes the same row, else a pair ``(rows, envs)``)."""
        if self._n_at_episode_start == self.n_envs:
            for key, values in self._obs_rows:
                values[row] = obs[key]
        else:
            envs = np.flatnonzero(self._at_episode_start)
            first = (row if isinstance(row, int) else row[0][envs], envs)
            for key, values in self._obs_rows:
                values[first] = np.asarray(obs[key])[envs]
        self._at_episode_start[:] = False
        self._n_at_episode_start = 0

    def _write_infos(self, values: dict[str, np.ndarray], row: Row) -> None:
        """Writes a step's info values at ``row`` (as add() indexes the row views)."""
        rows, n = self.rows_per_env, self.n_envs
        for key, value in values.items():
            store = self._storage.infos[key]
            store.reshape(rows, n, *store.shape[1:])[row] = value

    def _close_done(self, done: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> None:
        """Ends the episodes of the envs where ``done`` (flags one per env)."""
        if done.all():
            self._close_episodes(slice(None), terminated, truncated)
        else:
            envs = np.flatnonzero(done)
            self._close_episodes(envs, terminated[envs], truncated[envs])

    def _close_episodes(
        self, envs: slice | np.ndarray, terminated: np.ndarray, truncated: np.ndarray
    ) -> None:
        """Ends the episodes in progress of ``envs`` (an index array, or ``slice(None)``
        for every env) with the given flags, one per env of ``envs``.

        The final observation already sits at the env's head row (written as the last
        next_obs); the next episode starts after it. Only an episode's last transition can
        be terminated or truncated: the flags, the row offsets and the transitions' rows
        are written once per episode, here. The writes go through index arrays, which are
        slices (and the per-env values scalars) when every env ends an episode of the same
        rows: the common case of a time limit over envs reset together.
        """
        rows, n, storage = self.rows_per_env, self.n_envs, self._storage
        steps = self._steps_added
        closed = self._common_episodes_closed
        # Slices when every env ends an episode of the same rows and transitions, neither
        # wrapping around the ring.
        lockstep = False
        if isinstance(envs, slice) and closed is not None:
            starts = storage.episode_start[envs]
            if _all_equal(starts):
                start = int(starts[0])
                length = steps + closed - start
                first_row, first_k = start % rows, (steps - length) % rows
                lockstep = first_row + length <= rows and first_k + length <= rows
        if lockstep:
            head: int | np.ndarray = start + length
            count = length * n
            if self._lockstep_offsets.size < count:
                self._lockstep_offsets = np.repeat(np.arange(max(length, 64), dtype=np.int32), n)
            offset = self._lockstep_offsets[:count]
            episode_rows = offset + first_row
            lo = first_row * n
            flat: slice | np.ndarray = slice(lo, lo + count)
            transitions: slice | np.ndarray = slice(first_k * n, first_k * n + count)
            last: slice | np.ndarray = slice(lo + count - n, lo + count)
            first: slice | np.ndarray = slice(lo, lo + n)
        else:
            env = self._env_index[envs]
            first_rows = storage.episode_start[envs]
            head = steps + storage.episodes_closed[envs]
            length = head - first_rows
            offset = _offsets_within(length)
            episode_rows = (np.repeat(first_rows, length) + offset) % rows
            flat = episode_rows * n + np.repeat(env, length)
            k = (np.repeat(steps - length, length) + offset) % rows
            transitions = k * n + np.repeat(env, length)
            last = ((head - 1) % rows) * n + env
            first = (first_rows % rows) * n + env
        storage.offset_in_episode[flat] = offset
        storage.transition_row[transitions] = episode_rows
        storage.terminated[flat] = False
        storage.truncated[flat] = False
        storage.terminated[last] = terminated
        storage.truncated[last] = truncated
        storage.episode_length[first] = length
        if self._tree is not None:
            leaves = np.arange(flat.start, flat.stop) if isinstance(flat, slice) else flat
            if self.priority == "goal_motion":
                motion = self._episode_motion(leaves, length, lockstep)
                self._tree.update(leaves, (motion + self.priority_eps) ** self.alpha)
            else:
                self._tree.update(leaves, self._max_priority**self.alpha)
        storage.sampleable_to[envs] = steps
        storage.episodes_closed[envs] += 1
        storage.episode_start[envs] = head + 1
        self._at_episode_start[envs] = True
        self._n_at_episode_start += n if isinstance(envs, slice) else envs.size
        self._summarize()

    def _episode_motion(
        self, leaves: np.ndarray, length: int | np.ndarray, lockstep: bool
    ) -> np.ndarray:
        """For each of the closing episodes' transitions (at flat indices ``leaves``, laid
        out as :meth:`_close_episodes` writes them), its episode's goal motion: the sum of
        ``min(|w * (ag_{t+1} - ag_t)|, motion_clip)`` over the episode; the achieved goals
        are read from the rows (a transition's next observation is the next row of its env).
        """
        n, flat_rows = self.n_envs, self._rows * self.n_envs
        achieved = self._storage.observations["achieved_goal"]
        here = achieved[leaves].reshape(leaves.size, -1).astype(np.float64)
        after = achieved[(leaves + n) % flat_rows].reshape(leaves.size, -1)
        moved = after - here
        if self._motion_weights is not None:
            moved *= self._motion_weights
        step = np.linalg.norm(moved, axis=1)
        if self.motion_clip is not None:
            np.minimum(step, self.motion_clip, out=step)
        if lockstep:  # row-major: length rows of every env
            return np.tile(step.reshape(int(length), n).sum(axis=0), int(length))
        # One env's episode after another, each ``length[i]`` transitions long.
        counts = np.asarray(length)
        totals = np.add.reduceat(step, np.cumsum(counts) - counts)
        return np.repeat(totals, counts)

    def _retire_overwritten(self, victim: np.ndarray) -> None:
        """Retires, whole, each env's oldest episodes that hold its row ``victim[env]``."""
        rows, n, storage = self.rows_per_env, self.n_envs, self._storage
        intact_start = storage.intact_start
        while True:
            hit = victim >= intact_start
            if not hit.any():
                break
            envs = slice(None) if hit.all() else np.flatnonzero(hit)
            oldest = intact_start[envs]
            if (oldest >= storage.episode_start[envs]).any():
                env = int(np.flatnonzero(hit & (intact_start >= storage.episode_start))[0])
                raise ValueError(
                    f"the episode of env {env} has reached {rows - 1} transitions without "
                    f"ending: it no longer fits in its {rows} rows (buffer_size="
                    f"{self.buffer_size} // n_envs={n}); use a larger buffer_size"
                )
            envs_hit = self._env_index[envs]
            length = storage.episode_length[(oldest % rows) * n + envs_hit]
            if self._tree is not None:
                offset = _offsets_within(length)
                episode_rows = (np.repeat(oldest, length) + offset) % rows
                self._tree.update(episode_rows * n + np.repeat(envs_hit, length), 0.0)
            storage.sampleable_from[envs] += length
            intact_start[envs] = oldest + length + 1
        self._summarize()

    def truncate_last_trajectory(self) -> None:
        """Ends every episode in progress at its last stored transition, as a truncation.

        Use it when collection stops mid-episode for good (for example before saving a
        buffer that will not be resumed): the cut episodes become sampleable and bootstrap
        from their last observation (when ``handle_timeout_termination``).
        """
        envs = np.flatnonzero(~self._at_episode_start)
        if envs.size == 0:
            return
        self._close_episodes(envs, np.zeros(envs.size, bool), np.ones(envs.size, bool))

    # ------------------------------------------------------------------ input checks
    def _check_obs(self, name: str, obs: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        # The hot path of add(): one shape comparison per key; anything else falls through
        # to the careful checks, which coerce or explain.
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

    def _convert(self, name: str, value: object, dtype: object) -> np.ndarray:
        # Stored as given: the store's assignment casts, as numpy does.
        return np.asarray(value)

    def _info_values(self, infos: object) -> dict[str, np.ndarray]:
        n, rows, stores = self.n_envs, self.rows_per_env, self._storage.infos
        values = {}
        for key in self.info_keys:
            value = np.asarray(self._info_value(infos, key))
            if value.ndim == 0 or value.shape[0] != n or value.dtype == object:
                raise ValueError(
                    f"infos[{key!r}] has shape {value.shape} (dtype {value.dtype}), expected a "
                    f"numeric array with leading dimension n_envs={n}"
                )
            store = stores.get(key)
            if store is None:
                stores[key] = np.zeros((rows * n, *value.shape[1:]), dtype=value.dtype)
            elif value.shape[1:] != store.shape[1:]:
                raise ValueError(
                    f"infos[{key!r}] has shape {value.shape}, expected {(n, *store.shape[1:])}"
                )
            elif not np.can_cast(value.dtype, store.dtype, "safe"):
                # The store took the dtype of the first value seen (an int 0, say); a later
                # value it cannot hold widens it rather than being cast down silently.
                stores[key] = store.astype(np.result_type(store.dtype, value.dtype))
            values[key] = value
        return values

    # ------------------------------------------------------------------ sampling
    def sample(self, batch_size: int, device: DeviceLike = None, *, copy: bool = False) -> HerBatch:
        """Samples ``batch_size`` transitions, each one's goal drawn from the relabelling
        mix (relabeled with probability k/(k+1) by a strategy's).

        Returns numpy arrays when ``device`` is None, else torch tensors on ``device``
        (on the CPU without a copy: ``torch.from_numpy`` of the same arrays).

        The arrays are preallocated per batch size and **reused by the next call with the
        same batch_size**: consume a batch before sampling the next one, or pass
        ``copy=True`` for arrays the caller owns.
        """
        return self._sampler.sample(
            check_batch_size(batch_size),
            self.rng,
            self.compute_reward,
            self.compute_terminated,
            self.beta,
            self._steps_added,
            device,
            copy,
        )

    # The array operations of ReplayBufferBase.update_priorities.
    def _priority_input(self, value: object) -> np.ndarray:
        return to_numpy(value)

    def _priority_indices_are_integers(self, indices: np.ndarray) -> bool:
        return bool(np.issubdtype(indices.dtype, np.integer))

    def _priority_capacity(self) -> int:
        assert self._tree is not None
        return self._tree.capacity

    def _priority_of(
        self, indices: np.ndarray, td_errors: np.ndarray, capacity: int
    ) -> tuple[object, ...]:
        if indices.min() < 0 or indices.max() >= capacity:
            return indices, None, True, False
        priority = np.abs(td_errors.astype(np.float64)) + self.priority_eps
        return indices, priority, False, not np.isfinite(priority).all()

    def _priority_set(self, indices: np.ndarray, priority: np.ndarray) -> None:
        tree = self._tree
        assert tree is not None
        live = tree.nodes[tree.size + indices] > 0
        tree.update(indices[live], priority[live] ** self.alpha)
        self._max_priority = max(self._max_priority, float(priority.max()))

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
        write_buffer_file(self.state(truncate_in_progress=True), path)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        compute_reward: object,
        compute_terminated: object = None,
    ) -> HerReplayBuffer:
        """Reads a buffer written by :meth:`save`; sampling continues where it left off.

        A file that is truncated, corrupt or not written by :meth:`save` raises a
        ValueError naming the file.
        """
        return cls.from_state(read_buffer_file(path), compute_reward, compute_terminated)


# ---------------------------------------------------------------------- helpers


def _generator_from_state(state: Mapping[str, object]) -> np.random.Generator:
    """A numpy Generator in ``state`` (a ``bit_generator.state``)."""
    name = state.get("bit_generator") if isinstance(state, Mapping) else None
    bit_generator = getattr(np.random, str(name), None)
    if not (isinstance(bit_generator, type) and issubclass(bit_generator, np.random.BitGenerator)):
        raise ValueError(f"rng_state names no numpy bit generator: {name!r}")
    generator = np.random.Generator(bit_generator())
    generator.bit_generator.state = dict(state)
    return generator


def _both_all_false(terminated: Any, truncated: Any, all_false: bytes) -> bool:
    """Whether both flag arrays are bool arrays of n_envs False values, ``all_false``
    being the bytes of such an array: the test add() makes on every mid-episode step,
    where comparing bytes is several times cheaper than ``any()``. Anything else (a flag
    set, another dtype or type, a wrong size) is False: add() then reads the flags the
    careful way."""
    try:
        return (
            terminated.dtype is _BOOL
            and truncated.dtype is _BOOL
            and terminated.tobytes() == all_false
            and truncated.tobytes() == all_false
        )
    except AttributeError:  # not arrays
        return False


def _offsets_within(length: np.ndarray) -> np.ndarray:
    """Each row's offset in its episode, for episodes of ``length`` rows laid end to end:
    lengths (2, 3) give 0 1 | 0 1 2."""
    return np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length)


def _all_equal(values: np.ndarray) -> bool:
    """Whether every element of the 1-d contiguous array ``values`` equals the first
    (compared as bytes: several times cheaper than numpy on a few elements)."""
    raw = values.tobytes()
    return raw == raw[: values.itemsize] * values.size
