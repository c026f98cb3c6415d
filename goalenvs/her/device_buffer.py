"""The HER buffer on a torch device: storage, relabeling and rewards beside the networks.

:class:`DeviceHerReplayBuffer` has the constructor, ``add``, ``sample``, ``save`` /
``load`` and ``update_priorities`` of :class:`goalenvs.her.buffer.HerReplayBuffer` and its
sampling semantics, but keeps every value in torch tensors on one device (a CUDA GPU, or
the CPU) and runs ``add`` and ``sample`` as tensor operations only: a device twin
(``gym.make_vec(id, num_envs=N, device="cuda")``) feeds it tensors, and the batches go
to the networks without a copy through the host. Its storage is
:mod:`goalenvs.her.device_state`'s, its file :mod:`goalenvs.her.device_file`'s.

Sampling
--------
As HerReplayBuffer: a transition is drawn uniformly among every env's sampleable range (a
cumulative sum over the envs and a ``searchsorted``), or in proportion to
``priority ** alpha`` with ``prioritized=True`` (a cumulative sum over every row:
``O(rows * n_envs)`` per batch, cheap on a GPU); its goal is drawn from the relabelling
mix (:mod:`goalenvs.her.goal_mix`; a strategy relabels with probability ``k / (k + 1)``):
the next achieved goal of a transition ``j`` of the same episode (``future``: ``j``
uniform in ``t .. T-1``, inclusive of ``t``; ``final``: ``T-1``; ``episode``: uniform in
``0 .. T-1``) or of any sampleable transition (``achieved``, the ``random`` strategy), the
desired goal of a transition of another episode (``desired``) or its own (``original``);
and the rewards of the whole batch come from one
``compute_reward(next_achieved_goal, desired_goal, infos)`` call on tensors (the goalenvs
twins' ``compute_reward`` takes tensors and returns tensors). A batch is read with four
gathers of one index each (the records, the rows' metadata, the episodes' ends, the
relabeled goals), plus one per separate field and info key.

Host synchronisation and CUDA graphs
------------------------------------
``add`` and ``sample`` never copy a value to the host, with one exception: two facts the
host must know to raise the numpy buffer's errors (an episode that outgrows the ring in
``add``; sampling from a buffer without a complete episode) are read from the device in
one small transfer, and only when the last reading no longer vouches for them. Each
reading tells how many more ``add`` calls are safe (no episode in progress can reach
``rows + 1`` transitions before then, and the newest complete episode stays intact until
then), so with episodes much shorter than the ring it happens about once per
``rows - episode length`` adds, never per batch; ``can_sample()`` makes that reading, so
once it has returned True, ``sample`` reads nothing until more adds are made. A mix with
``desired`` goals (other episodes') needs one more fact, that two complete episodes are
held: ``sample`` reads it the same way, once its last reading no longer vouches for it.
``n_transitions`` (and ``len``) read the device each call: use them for logs, not in the
inner loop.

So ``sample`` can be captured in a CUDA graph (``torch.cuda.graph``) on a buffer that can
sample: it draws from :attr:`DeviceHerReplayBuffer.generator` (register it with the
graph: ``graph.register_generator_state(buffer.generator)``), has static shapes
(relabeling is a ``torch.where`` over the whole batch), and reads only tensors that
``add`` updates in place, the count of adds included, so each replay samples what the
buffer holds then. The goal functions must be capturable too (the goalenvs twins' are),
and an info key whose values widen to another dtype reallocates its store: capture after
the first ``add`` of every dtype.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from goalenvs.core.backend import resolve_device, torch_dtype
from goalenvs.her.common import (
    NO_EPISODE_YET,
    HerBatch,
    ReplayBufferBase,
    batch_shape_error,
    batch_to,
    no_other_episode_error,
    reward_shape_error,
)
from goalenvs.her.device_file import read_device_file, write_device_file
from goalenvs.her.device_state import (
    META_EPISODE,
    META_START,
    META_TERMINATED,
    META_TRUNCATED,
    DeviceBufferState,
    RecordField,
    record_layout,
)
from goalenvs.her.goal_mix import FUTURE_ONLY, IN_EPISODE, RELABELLING, GoalMix
from goalenvs.her.settings import BufferSettings, GoalSelectionStrategy, check_batch_size

__all__ = ["DeviceHerReplayBuffer"]


class DeviceHerReplayBuffer(ReplayBufferBase):
    """Hindsight Experience Replay buffer whose storage and sampling live on a torch device.

    The arguments are those of :class:`goalenvs.her.buffer.HerReplayBuffer` (read its
    docs) plus ``device``; the differences:

    - ``buffer_size // n_envs`` rows per env, each holding one transition with both of its
      observations: an episode of ``T`` transitions takes ``T`` rows (numpy: ``T + 1``),
      and may be up to ``rows`` transitions long.
    - ``seed`` seeds :attr:`generator`, a ``torch.Generator`` on ``device``: samples are
      reproducible on one device, not equal to the numpy buffer's draws.
    - ``compute_reward`` (and ``compute_terminated``) receive tensors on ``device`` and
      should return tensors there (a numpy result is copied to the device: a host round
      trip per batch).

    Args:
        buffer_size: rows of storage over all envs (each env gets ``buffer_size // n_envs``).
        observation_space: the single-env goal Dict space.
        action_space: the single-env action space (Box, Discrete or MultiBinary).
        compute_reward: a goal env (single or vector, possibly wrapped) or a callable
            ``(achieved_goal, desired_goal, info) -> rewards`` over a batch of tensors.
        device: where the storage lives and ``sample`` works (``"cpu"``, ``"cuda"``,
            ``"cuda:1"`` or a ``torch.device``).
        n_envs: parallel envs writing into the buffer, one transition each per ``add``.
        n_sampled_goal: ``k``: a sampled transition is relabeled with probability
            ``k / (k + 1)``; 0 disables relabeling.
        goal_selection_strategy: ``"future"``, ``"final"``, ``"episode"`` or ``"random"``.
        handle_timeout_termination: when True, a truncated (time-limit) transition still
            bootstraps (``dones`` = terminated); when False, ``dones`` = terminated or
            truncated.
        info_keys: keys of the step info that ``compute_reward`` needs; their values are
            stored and passed back as a dict of batched tensors.
        compute_terminated: None keeps the stored ``terminated`` for relabeled goals; a
            goal env or callable recomputes it for relabeled goals.
        seed: seed of the device generator that draws every sample.
        prioritized: proportional prioritized replay over the sampleable transitions.
        alpha: how much the priorities count, in [0, 1] (0: uniform).
        beta: importance-sampling correction, in [0, 1]; may be changed between samples.
        priority_eps: added to ``|td_error|`` (or an episode's goal motion) so that no
            transition stops being drawn.
        goal_mix: the relabelling mix (replaces ``goal_selection_strategy`` and
            ``n_sampled_goal``); None: the strategy's.
        goal_mix_warmup: env steps stored before the mix applies (only future goals
            until then).
        priority: ``"td_error"`` or ``"goal_motion"`` (each episode drawn by the path
            length of its achieved goal, as :class:`~goalenvs.her.buffer.HerReplayBuffer`;
            each row keeps the path up to its step, and a draw reads its episode's last).
        motion_clip: for ``"goal_motion"``, the most one step's move counts.
        motion_weights: for ``"goal_motion"``, a weight per achieved-goal entry applied to
            each step before its length is taken; None: all 1.
        n_step: the steps of each sampled return, as
            :class:`~goalenvs.her.buffer.HerReplayBuffer`'s (static shapes: every batch
            gathers ``n_step`` steps, masked past an episode's end or a termination).
        gamma: the discount of n-step returns, in (0, 1); needed when ``n_step > 1``.
    Its whole content is :meth:`state`; :meth:`from_state` rebuilds a buffer from one, and
    copies and pickles go through it (see :class:`~goalenvs.her.common.ReplayBufferBase`).
    """

    _NAME = "DeviceHerReplayBuffer"
    _INFO_VALUES = "values"
    _OBS_VALUES = "tensors"

    #: Where the storage lives and ``sample`` works.
    device: torch.device
    #: The generator of every draw of :meth:`sample`, on :attr:`device`.
    generator: torch.Generator

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
        *,
        device: Any,
    ) -> None:
        device = resolve_device(device)
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
        generator = torch.Generator(device=device)
        if seed is None:
            generator.seed()
        else:
            generator.manual_seed(int(seed))
        state = DeviceBufferState.empty(settings, device, generator.get_state())
        self._adopt(state, compute_reward, compute_terminated)

    def _adopt(
        self, state: DeviceBufferState, compute_reward: object, compute_terminated: object
    ) -> None:
        """Makes this object the buffer ``state`` describes, on the state's tensors."""
        if not isinstance(state, DeviceBufferState):
            raise TypeError(f"state must be a DeviceBufferState, got {type(state).__name__}")
        state.check()
        settings, storage = state.settings, state.storage
        layout = record_layout(settings)
        fields = {field.name: field for field in layout}
        obs_keys = sorted(settings.observation_space.spaces)
        self._configure(
            settings,
            compute_reward,
            compute_terminated,
            {key: fields[f"obs/{key}"].dtype for key in obs_keys},
            fields["action"].dtype,
        )
        self.device = storage.device
        self.generator = torch.Generator(device=self.device)
        if state.generator_state is None:
            self.generator.seed()
        else:
            self.generator.set_state(state.generator_state)
        self._storage = storage
        self._layout = layout
        self._steps_added = state.steps_added
        storage.steps_added.fill_(state.steps_added)
        self._max_priority = state.max_priority
        # goal_motion: a row's priority is its episode's path so far (see add).
        self._by_motion = settings.priority == "goal_motion"
        weights = settings.motion_weights
        self._motion_weights = (
            None
            if weights is None
            else torch.tensor(weights, dtype=torch.float32, device=self.device)
        )
        # beta as a tensor: sampling reads it on the device, where a captured graph sees
        # its value at each replay.
        self._beta_tensor = torch.tensor(settings.beta, dtype=torch.float64, device=self.device)
        # A new buffer knows its horizons; any other reads them at the first need.
        self._no_overflow_before = settings.rows_per_env if state.steps_added == 0 else -1
        self._nonempty_until = -1

        rows, n = settings.rows_per_env, settings.n_envs
        # Each field as (rows, n_envs, *shape): a view of records, or its own tensor.
        self._field_rows: dict[str, torch.Tensor] = {}
        for field in layout:
            if field.in_records:
                columns = storage.records[:, :, field.start : field.stop]
                self._field_rows[field.name] = (
                    columns.unflatten(-1, field.shape) if field.shape else columns[..., 0]
                )
            else:
                self._field_rows[field.name] = storage.separate[field.name]
        self._record_fields = [field for field in layout if field.in_records]
        # Flat (rows * n_envs, ...) views, gathered by flat index row * n_envs + env:
        # index_select on one index runs several times faster than indexing by two.
        self._records_flat = storage.records.view(rows * n, -1)
        self._meta_flat = storage.row_meta.view(rows * n, 4)
        self._episode_end_flat = storage.episode_end.view(rows * n)
        goal = self._field_rows["next_obs/achieved_goal"]
        self._goal_flat = goal.reshape(rows * n, *goal.shape[2:])
        desired = self._field_rows["obs/desired_goal"]
        self._desired_flat = desired.reshape(rows * n, *desired.shape[2:])
        self._env_zero = torch.zeros((), dtype=torch.int64, device=self.device)
        # The relabelling mix as sampling draws it: cumulative thresholds (float32, as the
        # uniform draws they are compared with), the warm-up's, and the sources drawn for
        # every batch (future too while a warm-up may need it).
        mix = settings.relabel_mix
        self._warmup = settings.goal_mix_warmup
        self._thresholds = torch.tensor(mix.thresholds(), device=self.device)
        self._warmup_thresholds = torch.tensor(FUTURE_ONLY.thresholds(), device=self.device)
        drawn = set(mix.sources) | ({"future"} if self._warmup else set())
        self._sources = tuple(name for name in RELABELLING if name in drawn)
        # Adds after which the buffer may hold fewer than two complete episodes (what a
        # draw of other episodes' desired goals needs); read from the device when passed.
        self._other_episode_until = -1

    # ------------------------------------------------------------------ state
    def state(self, *, truncate_in_progress: bool = False) -> DeviceBufferState:
        """The buffer's whole content but its goal functions, on the buffer's own tensors
        (no copy: ``state().copy()`` for a snapshot).

        With ``truncate_in_progress``, the episodes in progress are ended at their last
        stored transition, as :meth:`truncate_last_trajectory` would, in clones of the
        bookkeeping tensors that this leaves to the state (the stored fields stay
        shared): the live buffer goes on with its episodes in progress.
        """
        self._storage.steps_added.fill_(self._steps_added)
        state = DeviceBufferState(
            settings=self._settings,
            storage=self._storage,
            steps_added=self._steps_added,
            max_priority=self._max_priority,
            generator_state=self.generator.get_state(),
        )
        if not truncate_in_progress or self._steps_added == 0:
            return state
        closed = self.from_state(
            dataclasses.replace(state, storage=self._storage.with_cloned_bookkeeping()),
            self.compute_reward,
            self.compute_terminated,
        )
        closed.truncate_last_trajectory()
        return closed.state()

    @classmethod
    def from_state(
        cls,
        state: DeviceBufferState,
        compute_reward: object,
        compute_terminated: object = None,
        device: Any = None,
    ) -> DeviceHerReplayBuffer:
        """The buffer ``state`` describes, with these goal functions, on ``device`` (None:
        the state's; another one gets copies of the tensors).

        On the state's device the buffer takes the state's tensors as its own, without a
        copy: pass ``state.copy()`` to keep them apart from the new buffer's.
        """
        if device is not None:
            state = state.to(resolve_device(device))
        buffer = cls.__new__(cls)
        buffer._adopt(state, compute_reward, compute_terminated)
        return buffer

    def _beta_changed(self) -> None:
        self._beta_tensor.fill_(self.beta)

    # ------------------------------------------------------------------ properties
    @property
    def n_transitions(self) -> int:
        """Transitions that can be sampled (reads the device: one synchronisation)."""
        storage = self._storage
        return int((storage.sampleable_to - storage.sampleable_from).sum())

    @property
    def episodes_in_progress(self) -> int:
        """Envs whose episode in progress has stored transitions (reads the device)."""
        return int((self._storage.episode_start < self._steps_added).sum())

    def __repr__(self) -> str:
        return (
            f"DeviceHerReplayBuffer(buffer_size={self.buffer_size}, n_envs={self.n_envs}, "
            f"device='{self.device}', {self._relabelling_repr()})"
        )

    # ------------------------------------------------------------------ writing
    def add(
        self,
        obs: Mapping[str, object],
        next_obs: Mapping[str, object],
        action: object,
        reward: object,
        terminated: Any,
        truncated: Any,
        infos: Mapping[str, object] | Sequence[Mapping[str, object]] | None = None,
    ) -> None:
        """Stores one transition per env; every value has leading dimension ``n_envs``.

        The same arguments, in the same order, as :meth:`HerReplayBuffer.add`: tensors on
        this buffer's device (array-likes are copied there; a tensor on another device is
        an error). ``next_obs`` is the true next observation (the final one on an
        episode's last step). An env's episode ends when ``terminated | truncated``.
        ``infos`` is a dict of per-env values (a device twin's info) or a sequence of
        per-env dicts; only ``info_keys`` are read.
        """
        n, rows = self.n_envs, self.rows_per_env
        obs = self._check_obs_fully("obs", obs)
        next_obs = self._check_obs_fully("next_obs", next_obs)
        action = self._check_action(action)
        reward = self._per_env("reward", reward, torch.float32)
        terminated = self._per_env("terminated", terminated, torch.bool)
        truncated = self._per_env("truncated", truncated, torch.bool)
        info_values = self._info_values(infos) if self.info_keys else {}

        steps = self._steps_added
        storage = self._storage
        if steps >= self._no_overflow_before:
            self._read_horizons()
            if steps >= self._no_overflow_before:
                start = storage.episode_start
                env = int(torch.argmin(start))
                raise ValueError(
                    f"the episode of env {env} has reached {steps - int(start[env])} "
                    f"transitions without ending: one more does not fit in its {rows} rows "
                    f"(buffer_size={self.buffer_size} // n_envs={n}); use a larger buffer_size"
                )
        row = steps % rows
        if steps >= rows:
            # This add overwrites transition steps - rows of every env: an env whose oldest
            # intact episode starts there retires that episode whole (sampleable_from
            # moves to its end). Example, rows = 4, episodes [0, 3) and [3, 4) stored: add
            # number 4 overwrites transition 0 (row 0), so sampleable_from goes 0 -> 3 and
            # transitions 1, 2 leave with it. (sampleable_from == steps - rows with no
            # ended episode left would mean an episode in progress since steps - rows:
            # add() has refused it above as too long.)
            hit = storage.sampleable_from == steps - rows
            episode = storage.row_meta[row, :, META_EPISODE]
            end = storage.episode_end.gather(0, (episode % rows)[None])[0]
            torch.where(hit, end, storage.sampleable_from, out=storage.sampleable_from)
        values = {f"obs/{key}": value for key, value in obs.items()}
        values.update({f"next_obs/{key}": value for key, value in next_obs.items()})
        values["action"], values["reward"] = action, reward
        if self._record_fields:
            parts = [values[field.name] for field in self._record_fields]
            # Each as (n_envs, columns); most already are (a reshape costs ~1 us each).
            parts = [part if part.dim() == 2 else part.reshape(n, -1) for part in parts]
            storage.records[row] = torch.cat(parts, 1) if len(parts) > 1 else parts[0]
        for name, store in storage.separate.items():
            store[row] = values[name]
        storage.row_meta[row] = torch.stack(
            (storage.episode_start, storage.episode_count, terminated.long(), truncated.long()),
            1,
        )
        if storage.priorities is not None:
            if self._by_motion:
                # The achieved goal's path in the episode so far, this step included.
                step = (next_obs["achieved_goal"] - obs["achieved_goal"]).reshape(n, -1).float()
                if self._motion_weights is not None:
                    step = step * self._motion_weights
                moved = torch.linalg.vector_norm(step, dim=1)
                if self.motion_clip is not None:
                    moved = moved.clamp_(max=self.motion_clip)
                before = storage.priorities[(steps - 1) % rows]
                started = storage.episode_start < steps
                storage.priorities[row] = torch.where(started, before + moved, moved)
            else:
                storage.priorities[row] = self._max_priority**self.alpha
        if storage.priorities is not None or self._warmup:
            # Prioritized sampling and a warm-up read the count on the
            # device (state() refreshes it for a buffer whose sampling does not).
            storage.steps_added.fill_(steps + 1)
        for key, value in info_values.items():
            storage.infos[key][row] = value
        self._steps_added = steps + 1
        self._end_episodes(terminated | truncated)

    def _end_episodes(self, done: torch.Tensor) -> None:
        """Ends the episodes in progress of the envs where ``done``, after
        ``_steps_added`` adds."""
        storage, steps, rows = self._storage, self._steps_added, self.rows_per_env
        # In place, with a Python scalar where it can: each op costs ~5 us on the CPU and a
        # kernel on a GPU, and add() runs once per env step; in place also keeps the
        # tensors that a captured sample reads.
        slot = (storage.episode_count % rows)[None]
        ends = storage.episode_end.gather(0, slot).masked_fill_(done, steps)
        storage.episode_end.scatter_(0, slot, ends)
        storage.sampleable_to.masked_fill_(done, steps)
        torch.where(done, storage.episode_start, storage.newest_start, out=storage.newest_start)
        storage.episode_start.masked_fill_(done, steps)
        storage.episode_count.add_(done)

    def truncate_last_trajectory(self) -> None:
        """Ends every episode in progress at its last stored transition, as a truncation
        (see :meth:`HerReplayBuffer.truncate_last_trajectory`)."""
        if self._steps_added == 0:
            return
        storage = self._storage
        in_progress = storage.episode_start < self._steps_added
        last = storage.row_meta[(self._steps_added - 1) % self.rows_per_env, :, META_TRUNCATED]
        last |= in_progress
        self._end_episodes(in_progress)

    def can_sample(self) -> bool:
        """Whether the buffer holds a complete, intact episode (``sample`` works), and a
        second one once the mix draws other episodes' desired goals.

        Unlike ``n_transitions > 0`` it reads the device only when the last reading no
        longer vouches for it (about once per ring cycle): cheap to ask every step.
        """
        if self._steps_added > self._nonempty_until:
            self._read_horizons()
        if self._steps_added > self._nonempty_until:
            return False
        if self._needs_other_episode() and self._steps_added > self._other_episode_until:
            self._read_other_episode()
            return self._steps_added <= self._other_episode_until
        return True

    def _needs_other_episode(self) -> bool:
        """Whether a sample now draws other episodes' desired goals (the mix has some, and
        its warm-up is over)."""
        return "desired" in self._sources and self._steps_added * self.n_envs >= self._warmup

    def _read_horizons(self) -> None:
        """The one host read of add() and sample() (see the module docstring).

        After it, no episode in progress can outgrow the ring before ``add`` number
        ``_no_overflow_before`` (an episode that starts at ``s`` has ``rows`` transitions
        after add ``s + rows - 1``), and the newest ended episode (of any env) is intact
        while at most ``_nonempty_until`` adds have been made (its first row ``s`` is
        overwritten by add ``s + rows``); -1 when no episode has ended yet.
        """
        storage, rows = self._storage, self.rows_per_env
        ended = storage.sampleable_from < storage.sampleable_to
        newest = torch.where(ended, storage.newest_start, -1).max()
        oldest_open, newest_start = torch.stack([storage.episode_start.min(), newest]).tolist()
        self._no_overflow_before = oldest_open + rows
        self._nonempty_until = newest_start + rows if newest_start >= 0 else -1

    # ------------------------------------------------------------------ input checks
    def _convert(self, name: str, value: object, dtype: torch.dtype) -> torch.Tensor:
        """``value`` as a tensor of ``dtype`` on this buffer's device."""
        if isinstance(value, torch.Tensor):
            if value.device != self.device:
                raise ValueError(
                    f"{name} is a tensor on {value.device}, expected one on this buffer's "
                    f"device {self.device} (or an array-like)"
                )
            return value if value.dtype == dtype else value.to(dtype)
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as error:
            raise TypeError(f"{name} must be a tensor or an array-like, got {value!r}") from error
        if array.dtype == object:
            raise TypeError(f"{name} must hold numbers, got {value!r}")
        return torch.as_tensor(array, device=self.device).to(dtype)

    def _info_values(self, infos: object) -> dict[str, torch.Tensor]:
        n, stores = self.n_envs, self._storage.infos
        values = {}
        for key in self.info_keys:
            value = self._info_value(infos, key)
            if not isinstance(value, torch.Tensor):
                array = np.asarray(value)
                if array.dtype == object:
                    raise ValueError(f"infos[{key!r}] must hold numbers, got {value!r}")
                value = array
            value = self._convert(f"infos[{key!r}]", value, _info_dtype(value))
            if value.ndim == 0 or value.shape[0] != n:
                raise ValueError(
                    f"infos[{key!r}] has shape {tuple(value.shape)}, expected leading "
                    f"dimension n_envs={n}"
                )
            store = stores.get(key)
            if store is None:
                stores[key] = torch.zeros(
                    (self.rows_per_env, *value.shape), dtype=value.dtype, device=self.device
                )
            elif value.shape[1:] != store.shape[2:]:
                raise ValueError(
                    f"infos[{key!r}] has shape {tuple(value.shape)}, expected "
                    f"{(n, *store.shape[2:])}"
                )
            elif torch.promote_types(store.dtype, value.dtype) != store.dtype:
                # The store took the dtype of the first value seen; a later value it cannot
                # hold widens it rather than being cast down.
                stores[key] = store.to(torch.promote_types(store.dtype, value.dtype))
            values[key] = value
        return values

    # ------------------------------------------------------------------ sampling
    def sample(self, batch_size: int, device: Any = None) -> HerBatch:
        """Samples ``batch_size`` transitions, each one's goal drawn from the relabelling
        mix (relabeled with probability k/(k+1) by a strategy's).

        Returns a :class:`HerBatch` of tensors on this buffer's device, or moved to
        ``device`` when it names another one. Every call returns fresh tensors (none is
        reused by the next call); under a captured CUDA graph the graph's outputs are its
        static tensors, rewritten by each replay. The float32 fields (observations,
        actions, rewards) are slices of one gathered tensor, so not contiguous:
        ``reshape``, not ``view``, if a caller reshapes them.

        Makes no host synchronisation once :meth:`can_sample` has returned True and no add
        has been made since (see the module docstring).
        """
        B = check_batch_size(batch_size)
        target = None if device is None else resolve_device(device)
        if not self.can_sample():
            if self._steps_added > self._nonempty_until:
                raise RuntimeError(NO_EPISODE_YET)
            raise no_other_episode_error(self.goal_mix, self.n_transitions)
        if self.prioritized:
            env, t, weights = self._draw_prioritized(B)
        else:
            env, t = self._draw_uniform(B)
            weights = torch.ones(B, dtype=torch.float32, device=self.device)
        index = self._flat_index(t, env)
        meta = self._meta_flat.index_select(0, index)
        relabel, goal = self._draw_goals(B, env, t, meta)
        records = self._records_flat.index_select(0, index)
        values = {field.name: _columns(records, field) for field in self._record_fields}
        for name, store in self._storage.separate.items():
            values[name] = _take(store, index)
        obs = {key: values[f"obs/{key}"] for key in self._obs_shapes}
        next_obs = {key: values[f"next_obs/{key}"] for key in self._obs_shapes}
        if goal is not None:
            mask = relabel.reshape((B,) + (1,) * (goal.ndim - 1))
            for side in (obs, next_obs):
                desired = side["desired_goal"]
                side["desired_goal"] = torch.where(mask, goal.to(desired.dtype), desired)
        info = {key: _take(store, index) for key, store in self._storage.infos.items()}
        new_reward = self._rewards_of(
            self.compute_reward(next_obs["achieved_goal"], obs["desired_goal"], info),
            B,
            tuple(next_obs["achieved_goal"].shape),
        )
        rewards = torch.where(relabel, new_reward, values["reward"])
        terminated = self._terminated(
            meta, relabel, next_obs["achieved_goal"], obs["desired_goal"], info
        )
        discounts = None
        if self.n_step > 1:
            rewards, terminated, discounts, next_obs = self._sum_steps(
                env, t, meta, relabel, obs["desired_goal"], rewards, terminated, next_obs
            )
        dones = terminated.to(torch.float32)
        batch = HerBatch(obs, values["action"], rewards, next_obs, dones, weights, index, discounts)
        if target is None or target == self.device:
            return batch
        return batch_to(batch, target)

    def _terminated(
        self,
        meta: torch.Tensor,
        relabel: torch.Tensor,
        next_achieved: torch.Tensor,
        goals: torch.Tensor,
        info: dict[str, torch.Tensor],
    ) -> torch.Tensor:
        """Whether each transition (rows' ``meta``, reaching ``next_achieved`` for
        ``goals``) must not bootstrap: its stored ``terminated``, recomputed for a
        relabeled goal by ``compute_terminated``, or truncated too without
        ``handle_timeout_termination``."""
        terminated = meta[:, META_TERMINATED].bool()
        if self.compute_terminated is not None:
            new_terminated = self._batch_of(
                "compute_terminated",
                self.compute_terminated(next_achieved, goals, info),
                len(relabel),
                torch.bool,
            )
            terminated = torch.where(relabel, new_terminated, terminated)
        if not self.handle_timeout_termination:
            terminated = terminated | meta[:, META_TRUNCATED].bool()
        return terminated

    def _sum_steps(
        self,
        env: torch.Tensor,
        t: torch.Tensor,
        meta: torch.Tensor,
        relabel: torch.Tensor,
        goals: torch.Tensor,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        next_obs: dict[str, torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """The n-step returns of the transitions (counter ``t`` of ``env``, their rows'
        ``meta``, one-step ``rewards`` and ``terminated`` for their ``goals``): the
        discounted rewards of the up to ``n_step - 1`` transitions after each in its
        episode added, stopping at the episode's last transition or a termination.
        Returns ``(returns, terminated, discounts, next_obs)`` of the last step summed.
        Static shapes: each step is gathered for the whole batch and masked."""
        gamma = self.gamma
        assert gamma is not None  # BufferSettings requires it with n_step > 1
        B = len(t)
        end = self._episode_end_flat.index_select(0, self._flat_index(meta[:, META_EPISODE], env))
        reward_field = next(field for field in self._record_fields if field.name == "reward")
        returns = rewards.to(torch.float64)
        steps = torch.ones_like(t)  # transitions summed so far
        alive = torch.ones(B, dtype=torch.bool, device=self.device)
        ended = terminated
        for k in range(1, self.n_step):
            alive = alive & (t + k < end) & ~ended
            step = self._flat_index(t + k, env)
            step_meta = self._meta_flat.index_select(0, step)
            next_achieved = self._goal_flat.index_select(0, step)
            info = {key: _take(store, step) for key, store in self._storage.infos.items()}
            new_reward = self._rewards_of(
                self.compute_reward(next_achieved, goals, info), B, tuple(next_achieved.shape)
            )
            stored = self._records_flat[:, reward_field.start].index_select(0, step)
            reward = torch.where(relabel, new_reward.to(stored.dtype), stored)
            step_terminated = self._terminated(step_meta, relabel, next_achieved, goals, info)
            returns = returns + torch.where(alive, gamma**k * reward.double(), 0.0)
            steps = steps + alive
            ended = torch.where(alive, step_terminated, ended)
        # The observation after the last step summed, with the (relabeled) goal.
        last = self._flat_index(t + steps - 1, env)  # the row of the last step summed
        records = self._records_flat.index_select(0, last)
        fields = {field.name: field for field in self._record_fields}
        after = {}
        for key in next_obs:
            name = f"next_obs/{key}"
            if name in fields:
                value = _columns(records, fields[name])
            else:
                value = _take(self._storage.separate[name], last)
            after[key] = value
        mask = relabel.reshape((B,) + (1,) * (goals.ndim - 1))
        after["desired_goal"] = torch.where(
            mask, goals.to(after["desired_goal"].dtype), after["desired_goal"]
        )
        discounts = torch.full_like(returns, gamma).pow(steps)
        return returns.to(torch.float32), ended, discounts.to(torch.float32), after

    def _flat_index(self, counter: torch.Tensor, env: torch.Tensor) -> torch.Tensor:
        """The flat index ``row * n_envs + env`` of each ``(counter, env)``: every
        ``(rows, n_envs, ...)`` store is gathered through its flat view, as index_select on
        one index runs several times faster than indexing by two."""
        rows, n = self.rows_per_env, self.n_envs
        if n == 1:
            return counter % rows
        return (counter % rows) * n + env

    def _uniform(self, count: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``count`` draws uniform in [0, 1) from :attr:`generator`."""
        return torch.rand(count, generator=self.generator, device=self.device, dtype=dtype)

    def _draw_uniform(self, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``count`` transitions drawn uniformly from every env's sampleable range:
        returns their ``(env, t)`` (t the unwrapped counter; env a 0-d zero with one env)."""
        storage = self._storage
        first = storage.sampleable_from
        width = storage.sampleable_to - first
        u = self._uniform(count, torch.float64)
        if self.n_envs == 1:
            # floor(u * width) can round up to width for u just below 1: clamp it.
            x = torch.minimum((u * width).long(), width - 1)
            return self._env_zero, first + x
        # x indexes the concatenation of the envs' ranges: widths (2, 0, 3) give
        # cum (2, 2, 5); x = 3 lies in env 2 (the first cum > 3), at first[2] + 3 - 2.
        cum = torch.cumsum(width, 0)
        total = cum[-1]
        x = torch.minimum((u * total).long(), total - 1)
        env = torch.searchsorted(cum, x, right=True)
        return env, x + (first - (cum - width)).index_select(0, env)

    def _draw_prioritized(self, count: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``count`` transitions drawn in proportion to ``priority ** alpha`` among the
        sampleable ones: returns ``(env, t, weights)``."""
        storage, rows, n = self._storage, self.rows_per_env, self.n_envs
        assert storage.priorities is not None
        if self._by_motion:
            # Each row's episode's whole path: the prefix its last row holds.
            episode = storage.row_meta[:, :, META_EPISODE] % rows
            last = (storage.episode_end.gather(0, episode) - 1) % rows
            path = storage.priorities.gather(0, last)
            priority = (path.double() + self.priority_eps) ** self.alpha
            mass = (priority * self._sampleable_rows()).reshape(-1)
        else:
            mass = (storage.priorities * self._sampleable_rows()).reshape(-1)
        cum = torch.cumsum(mass.double(), 0)
        total = cum[-1]
        u = self._uniform(count, torch.float64)
        flat = torch.searchsorted(cum, u * total, right=True).clamp_(max=rows * n - 1)
        row, env = flat // n, flat % n
        if self._by_motion:  # a curriculum: no importance weights
            return env, self._counter_of(row), torch.ones(count, device=self.device)
        probability = mass.index_select(0, flat).double() / total
        n_valid = (storage.sampleable_to - storage.sampleable_from).sum()
        weights = (n_valid * probability) ** -self._beta_tensor
        weights = (weights / weights.max()).float()
        return env, self._counter_of(row), weights

    def _counter_of(self, row: torch.Tensor) -> torch.Tensor:
        """The unwrapped counter ``t`` of the transition stored at ``row``: the one of
        ``t - rows .. t - 1`` (the ring's content after ``t`` adds) that is ``row`` mod
        rows."""
        rows = self.rows_per_env
        return row + ((self._storage.steps_added - 1 - row) // rows) * rows

    def _sampleable_rows(self) -> torch.Tensor:
        """A (rows, n_envs) mask of the rows whose transition can be sampled."""
        storage = self._storage
        counter = self._counter_of(torch.arange(self.rows_per_env, device=self.device))[:, None]
        return (counter >= storage.sampleable_from) & (counter < storage.sampleable_to)

    def _draw_goals(
        self, B: int, env: torch.Tensor, t: torch.Tensor, meta: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Which of the ``B`` transitions (counter ``t`` of ``env``, with their rows'
        ``meta``) are relabeled, and each one's new goal (None when the mix never
        relabels), drawn from the relabelling mix.

        One uniform draw per transition picks its source; then each source the buffer
        draws for the whole batch, in :data:`RELABELLING` order (one draw for the
        in-episode sources together), and ``torch.where`` keeps each transition's own: a
        single-source mix draws as a strategy did. Static shapes throughout; during a
        warm-up every transition takes a future goal (the thresholds are chosen on the
        device, so a captured graph follows the count of adds).
        """
        start, episode = meta[:, META_START], meta[:, META_EPISODE]
        end = self._episode_end_flat.index_select(0, self._flat_index(episode, env))
        u = self._uniform(B)
        thresholds = self._thresholds
        if self._warmup:
            warming_up = self._storage.steps_added * self.n_envs < self._warmup
            thresholds = torch.where(warming_up, self._warmup_thresholds, thresholds)
        relabel = u < thresholds[-1]
        # The source of each transition, as its position in RELABELLING (len: original).
        source = (u[:, None] >= thresholds).sum(1) if len(self._sources) > 1 else None

        def where(name: str, value: torch.Tensor, other: torch.Tensor | None) -> torch.Tensor:
            """``value`` on the transitions whose source is ``name``, ``other`` elsewhere."""
            if other is None or source is None:
                return value
            chosen = source == RELABELLING.index(name)
            return torch.where(chosen.reshape((B,) + (1,) * (value.ndim - 1)), value, other)

        goal_env: torch.Tensor | None = None
        goal_t: torch.Tensor | None = None
        first: torch.Tensor | None = None
        span: torch.Tensor | None = None
        for name in self._sources:
            if name not in IN_EPISODE:
                continue
            # Transition t of an episode [start, end): "future" picks j in t .. end - 1
            # (span end - t, t itself included), "final" end - 1, "episode" start .. end - 1.
            # The goal is transition j's next achieved goal.
            if name == "future":
                this_first, this_span = t, end - t
            elif name == "final":
                this_first, this_span = end - 1, torch.ones_like(t)
            else:
                this_first, this_span = start, end - start
            first, span = where(name, this_first, first), where(name, this_span, span)
        if first is not None and span is not None:
            # floor(u * span) can round up to span for u just below 1: clamp it.
            pick = torch.minimum((self._uniform(B) * span).long(), span - 1)
            goal_env, goal_t = env, first + pick
        if "achieved" in self._sources:
            any_env, any_t = self._draw_uniform(B)
            goal_env = where("achieved", any_env, goal_env)
            goal_t = where("achieved", any_t, goal_t)
        goal = None
        if goal_env is not None and goal_t is not None:
            goal = self._goal_flat.index_select(0, self._flat_index(goal_t, goal_env))
        if "desired" in self._sources:
            other_env, other_t = self._draw_other_episode(B, env, start, end)
            desired = self._desired_flat.index_select(0, self._flat_index(other_t, other_env))
            goal = where("desired", desired, goal)
        return relabel, goal

    def _draw_other_episode(
        self, B: int, env: torch.Tensor, start: torch.Tensor, end: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """For each of ``B`` transitions (of ``env``, in the episode ``[start, end)``), a
        transition drawn uniformly from every other sampleable episode: ``(env, t)``.

        The draw numbers the other episodes' transitions ``0 .. total - length - 1`` and
        skips over the own episode, which holds numbers ``begin .. begin + length - 1``
        of the envs' sampleable ranges laid end to end. Example: ranges of widths (4, 6)
        (numbers 0 .. 3 and 4 .. 9), an episode of env 1 at its numbers 2 .. 4, so
        begin = 4 + 2 = 6 and length 3: x is drawn in 0 .. 6; x = 5 stays 5 (env 1's
        second transition), x = 6 becomes 9 (its last). With one episode stored (sample()
        refuses that unless a warm-up leaves the draw unused) the indices stay valid.
        """
        storage = self._storage
        first = storage.sampleable_from
        width = storage.sampleable_to - first
        length = end - start
        u = self._uniform(B, torch.float64)
        if self.n_envs == 1:
            total = width
            offset = first
            begin = start - first
        else:
            cum = torch.cumsum(width, 0)
            total = cum[-1]
            offset = first - (cum - width)
            begin = start - offset.index_select(0, env)
        others = (total - length).clamp(min=1)
        x = torch.minimum((u * others).long(), others - 1)
        x = torch.minimum(x + length * (x >= begin), total - 1)
        if self.n_envs == 1:
            return self._env_zero, x + offset
        other_env = torch.searchsorted(cum, x, right=True).clamp_(max=self.n_envs - 1)
        return other_env, x + offset.index_select(0, other_env)

    def _read_other_episode(self) -> None:
        """The host read behind draws of other episodes' desired goals: after it, the
        buffer holds at least two complete, intact episodes while at most
        ``_other_episode_until`` adds have been made (-1: it does not hold two now).

        The two newest ended episodes are among each env's newest one and the one before
        it (still sampleable when the newest does not start at ``sampleable_from``); the
        older of the two stays intact until add ``start + rows`` overwrites its first row.
        """
        storage, rows, n = self._storage, self.rows_per_env, self.n_envs
        ended = storage.sampleable_from < storage.sampleable_to
        newest = torch.where(ended, storage.newest_start, -1)
        has_previous = ended & (storage.newest_start > storage.sampleable_from)
        previous_row = (storage.newest_start - 1) % rows
        envs = torch.arange(n, device=self.device)
        previous_start = storage.row_meta[previous_row, envs, META_START]
        previous = torch.where(has_previous, previous_start, -1)
        second = int(torch.topk(torch.cat([newest, previous]), 2).values[1])
        self._other_episode_until = second + rows if second >= 0 else -1

    def _rewards_of(
        self, value: object, batch_size: int, goal_shape: tuple[int, ...]
    ) -> torch.Tensor:
        """``compute_reward``'s result as a ``(batch_size,)`` float32 tensor on the device,
        or the error that names the function and the shapes (one value for the batch is
        refused, never broadcast)."""
        tensor = self._as_tensor(value)
        if tuple(tensor.shape) != (batch_size,):
            raise reward_shape_error(
                self.compute_reward, tuple(tensor.shape), batch_size, goal_shape
            )
        return tensor.to(device=self.device, dtype=torch.float32)

    def _as_tensor(self, value: object) -> torch.Tensor:
        """A goal function's result as a tensor (on this device when it was not one)."""
        if isinstance(value, torch.Tensor):
            return value
        return torch.as_tensor(np.asarray(value), device=self.device)

    def _batch_of(
        self, name: str, value: object, batch_size: int, dtype: torch.dtype
    ) -> torch.Tensor:
        """``value`` as a ``(batch_size,)`` tensor of ``dtype`` on the device; a scalar
        (Fetch's ``compute_terminated`` returns a constant ``False``) stands for the batch."""
        tensor = self._as_tensor(value).to(device=self.device, dtype=dtype)
        if tuple(tensor.shape) == (batch_size,):
            return tensor
        if tensor.numel() == 1 and tensor.ndim <= 1:
            return tensor.reshape(()).expand(batch_size)
        raise batch_shape_error(name, tuple(tensor.shape), batch_size)

    # The tensor operations of ReplayBufferBase.update_priorities (one host read of a flag
    # pair per call).
    def _priority_input(self, value: object) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            tensor = value.detach().to(self.device)
        else:
            tensor = torch.as_tensor(np.asarray(value), device=self.device)
        if tensor.ndim == 2 and tensor.shape[1] == 1:
            tensor = tensor.reshape(-1)
        return tensor

    def _priority_indices_are_integers(self, indices: torch.Tensor) -> bool:
        return not (indices.is_floating_point() or indices.dtype == torch.bool)

    def _priority_capacity(self) -> int:
        assert self._storage.priorities is not None
        return self._storage.priorities.numel()

    def _priority_of(
        self, indices: torch.Tensor, td_errors: torch.Tensor, capacity: int
    ) -> tuple[torch.Tensor, torch.Tensor, bool, bool]:
        indices = indices.long()
        priority = td_errors.detach().double().abs() + self.priority_eps
        out_of_range = (indices < 0) | (indices >= capacity)
        not_finite = ~torch.isfinite(priority)
        bad_index, bad_value = torch.stack([out_of_range.any(), not_finite.any()]).tolist()
        return indices, priority, bad_index, bad_value

    def _priority_set(self, indices: torch.Tensor, priority: torch.Tensor) -> None:
        assert self._storage.priorities is not None
        priorities = self._storage.priorities.view(-1)
        priority = priority.float()
        live = self._sampleable_rows().reshape(-1)[indices]
        priorities[indices] = torch.where(live, priority**self.alpha, priorities[indices])
        torch.maximum(self._max_priority, priority.max(), out=self._max_priority)

    # ------------------------------------------------------------------ save / load
    def save(self, path: str | os.PathLike) -> None:
        """Writes the whole buffer to ``path`` (a ``torch.save`` archive of CPU tensors and
        plain metadata, readable with ``weights_only=True``).

        As :meth:`HerReplayBuffer.save`: episodes in progress are written as truncated at
        their last stored transition while the live buffer goes on as it was, and the
        file is written whole beside ``path`` and renamed over it. The reward function is
        not saved: pass it again to :meth:`load`.
        """
        write_device_file(self.state(truncate_in_progress=True), path)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        compute_reward: object,
        compute_terminated: object = None,
        device: Any = None,
    ) -> DeviceHerReplayBuffer:
        """Reads a buffer written by :meth:`save` onto ``device`` (None: the device it was
        saved from); sampling continues where it left off.

        A file that is truncated, corrupt or not written by :meth:`save` raises a
        ValueError naming the file.
        """
        return cls.from_state(read_device_file(path, device), compute_reward, compute_terminated)


def _columns(records: torch.Tensor, field: RecordField) -> torch.Tensor:
    """The values of ``field`` in gathered ``records`` (batch, width): a view."""
    if not field.shape:
        return records[:, field.start]
    columns = records[:, field.start : field.stop]
    return columns if len(field.shape) == 1 else columns.unflatten(1, field.shape)


def _take(store: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Elements ``index`` (flat: ``row * n_envs + env``) of a ``(rows, n_envs, ...)`` store."""
    return store.reshape(-1, *store.shape[2:]).index_select(0, index)


def _info_dtype(value: Any) -> torch.dtype:
    """The storage dtype of an info value: its own, float64 numpy values as float32."""
    dtype = value.dtype if isinstance(value, torch.Tensor) else torch_dtype(value.dtype)
    return torch.float32 if dtype == torch.float64 else dtype
