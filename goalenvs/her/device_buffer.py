"""The HER buffer on a torch device: storage, relabeling and rewards beside the networks.

:class:`DeviceHerReplayBuffer` has the constructor, ``add``, ``sample``, ``save`` /
``load`` and ``update_priorities`` of :class:`goalenvs.her.HerReplayBuffer` and its
sampling semantics, but keeps every value in torch tensors on one device (a CUDA GPU, or
the CPU) and runs ``add`` and ``sample`` as tensor operations only: a device twin
(``gym.make_vec(id, num_envs=N, device="cuda")``) feeds it tensors, and the batches go
to the networks without a copy through the host.

Storage
-------
A time-major ring of ``rows = buffer_size // n_envs`` rows: every stored value is a
tensor of shape ``(rows, n_envs, ...)``. A vector env steps all its envs together, so
each ``add`` writes the same row, ``t % rows``, for every env, where ``t`` counts the
``add`` calls (unwrapped: it only grows). A row holds one transition per env, with both of
its observations: unlike HerReplayBuffer there is no extra row for an episode's final
observation, at the price of storing each observation twice (the rows of an env would no
longer line up across envs otherwise). The float32 fields of a row (observation keys,
next observation keys, action, reward) lie side by side in one ``records`` tensor, so that
a row is written with one copy and a batch read with one gather. Beside the transition, a
row stores two ints (``row_meta``): the counter ``t`` of its episode's first transition,
and the number of its episode among its env's episodes. ``episode_end[m % rows, env]`` holds
one past the counter of the last transition of the env's episode ``m``, written when the
episode ends (an episode spans at least one row, so the ``rows`` newest episode numbers of
an env never collide modulo ``rows``).

An env's episodes follow each other without gaps, so its sampleable transitions are one
range of counters ``[t_lo, t_hi)``: ``t_hi`` is the end of its newest complete episode and
``t_lo`` the start of its oldest intact one. When an ``add`` is about to overwrite the
first row of that oldest episode, ``t_lo`` jumps to its end, the next episode's start: the
whole episode leaves at once, so a partly overwritten episode is never sampled, and
neither is an episode in progress (its transitions are at or after ``t_hi``).

Sampling
--------
As HerReplayBuffer: a transition is drawn uniformly among those ranges (a cumulative sum
over the envs and a ``searchsorted``), or in proportion to ``priority ** alpha`` with
``prioritized=True`` (a cumulative sum over every row: ``O(rows * n_envs)`` per batch,
cheap on a GPU); it is relabeled with probability ``k / (k + 1)``; the relabeled goal is
the next achieved goal of a transition ``j`` of the same episode (``future``: ``j``
uniform in ``t .. T-1``, inclusive of ``t``; ``final``: ``T-1``; ``episode``: uniform in
``0 .. T-1``) or of any sampleable transition (``random``); and the rewards of the whole
batch come from one ``compute_reward(next_achieved_goal, desired_goal, infos)`` call on
tensors (the goalenvs twins' ``compute_reward`` takes tensors and returns tensors).

Host synchronisation
--------------------
``add`` and ``sample`` never copy a value to the host, with one exception: two facts the
host must know to raise the numpy buffer's errors (an episode that outgrows the ring in
``add``; sampling from a buffer without a complete episode) are read from the device in
one small transfer, and only when the last reading no longer vouches for them. Each
reading tells how many more ``add`` calls are safe (no episode in progress can reach
``rows + 1`` transitions before then, and the newest complete episode stays intact until
then), so with episodes much shorter than the ring it happens about once per
``rows - episode length`` adds, never per batch. ``n_transitions`` (and ``len``) read the
device each call: use them for logs, not in the inner loop.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs.core.backend import resolve_device, torch_dtype
from goalenvs.her.common import (
    NO_EPISODE_YET,
    HerBatch,
    ReplayBufferBase,
    batch_shape_error,
    batch_to,
)
from goalenvs.her.device_file import load_device_buffer, save_device_buffer
from goalenvs.her.settings import BufferSettings, GoalSelectionStrategy, check_batch_size

__all__ = ["DeviceHerReplayBuffer"]


class DeviceHerReplayBuffer(ReplayBufferBase):
    """Hindsight Experience Replay buffer whose storage and sampling live on a torch device.

    The arguments are those of :class:`goalenvs.her.HerReplayBuffer` (read its docs) plus
    ``device``; the differences:

    - ``buffer_size // n_envs`` rows per env, each holding one transition with both of its
      observations: an episode of ``T`` transitions takes ``T`` rows (numpy: ``T + 1``),
      and may be up to ``rows`` transitions long.
    - ``seed`` seeds a ``torch.Generator`` on ``device``: samples are reproducible on one
      device, not equal to the numpy buffer's draws.
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
        priority_eps: added to ``|td_error|`` so that no transition stops being drawn.
    """

    _NAME = "DeviceHerReplayBuffer"
    _INFO_VALUES = "values"
    _OBS_VALUES = "tensors"

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
        *,
        device: Any,
    ) -> None:
        import torch

        self.device = resolve_device(device)
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
        n, rows = self.n_envs, self.rows_per_env
        self._generator = torch.Generator(device=self.device)
        if seed is None:
            self._generator.seed()
        else:
            self._generator.manual_seed(int(seed))
        self._allocate(observation_space, action_space)
        state = self._state
        per_env = {"dtype": torch.int64, "device": self.device}
        state["episode_start"] = torch.zeros(n, **per_env)  # t of the episode in progress
        state["episode_count"] = torch.zeros(n, **per_env)  # episodes ended so far
        state["t_lo"] = torch.zeros(n, **per_env)  # sampleable transitions: [t_lo, t_hi)
        state["t_hi"] = torch.zeros(n, **per_env)
        state["newest_start"] = torch.full((n,), -1, **per_env)  # newest ended episode's t
        self._max_priority = torch.ones((), dtype=torch.float32, device=self.device)
        self._env = torch.arange(n, device=self.device)
        self._t = 0  # add() calls so far (unwrapped row counter)
        self._no_overflow_before = rows  # see _read_horizons
        self._nonempty_until = -1

    def _allocate(self, observation_space: spaces.Dict, action_space: spaces.Space) -> None:
        """The per-row storage, ``_state``: the records and the stores of the other fields,
        the flags, the rows' episode bookkeeping and the priorities."""
        import torch

        n, rows = self.n_envs, self.rows_per_env
        if isinstance(action_space, spaces.Discrete):
            self.action_shape: tuple[int, ...] = ()
            action_dtype = torch.int64
        else:
            self.action_shape = tuple(action_space.shape)
            action_dtype = torch_dtype(action_space.dtype)
            if action_dtype == torch.float64:  # actors emit float32, as HerReplayBuffer
                action_dtype = torch.float32

        # Sorted: a space read back from a saved file lists its keys sorted, and the records
        # layout follows this order.
        obs_spaces = {key: observation_space[key] for key in sorted(observation_space.spaces)}
        self._obs_shapes = {key: (n, *space.shape) for key, space in obs_spaces.items()}

        def zeros(*shape: int, dtype: Any) -> Any:
            return torch.zeros((rows, n, *shape), dtype=dtype, device=self.device)

        # The float32 fields of a row (observation keys, next observation keys, action,
        # reward; the usual case: all of them) lie side by side in one (rows, n_envs, width)
        # tensor, ``records``: add() writes them with one copy, sample() reads them with one
        # gather, where a store per field costs one per field (measured 2x slower to
        # sample on the CPU, and one kernel each on a GPU). The other fields get a
        # tensor of their own. Every field is reached through a (rows, n_envs, *shape) view.
        fields = [("obs", key, space.shape, space.dtype) for key, space in obs_spaces.items()]
        fields += [("next_obs", key, space.shape, space.dtype) for key, space in obs_spaces.items()]
        fields = [
            (side, key, tuple(shape), torch_dtype(dtype)) for side, key, shape, dtype in fields
        ]
        fields += [
            ("action", "", self.action_shape, action_dtype),
            ("reward", "", (), torch.float32),
        ]
        width = sum(int(np.prod(f[2])) for f in fields if f[3] == torch.float32)
        state = self._state = {"records": zeros(width, dtype=torch.float32)}
        self._layout: list[tuple[str, str, int, int, tuple[int, ...]]] = []
        self._separate: list[tuple[str, str, Any]] = []
        views: dict[tuple[str, str], Any] = {}
        at = 0
        for side, key, shape, dtype in fields:
            if dtype == torch.float32:
                size = int(np.prod(shape))
                column = state["records"][:, :, at : at + size]
                views[side, key] = column.unflatten(-1, shape) if shape else column[..., 0]
                self._layout.append((side, key, at, at + size, shape))
                at += size
            else:
                views[side, key] = zeros(*shape, dtype=dtype)
                self._separate.append((side, key, views[side, key]))
        self._obs = {key: views["obs", key] for key in obs_spaces}
        self._next_obs = {key: views["next_obs", key] for key in obs_spaces}
        self._actions, self._rewards = views["action", ""], views["reward", ""]
        self._infos: dict[str, Any] = {}  # allocated at the first add, in the values' dtype
        # Per row: the counter t of its episode's first transition and its episode's number.
        state["row_meta"] = zeros(2, dtype=torch.int64)
        self._row_start, self._row_episode = state["row_meta"].unbind(-1)
        state.update(
            {
                "terminated": zeros(dtype=torch.bool),
                "truncated": zeros(dtype=torch.bool),
                "episode_end": zeros(dtype=torch.int64),
                # p ** alpha of each row's transition (used only where it can be sampled).
                "priorities": zeros(dtype=torch.float32) if self.prioritized else None,
            }
        )

    # ------------------------------------------------------------------ properties
    @property
    def n_transitions(self) -> int:
        """Transitions that can be sampled (reads the device: one synchronisation)."""
        return int((self._state["t_hi"] - self._state["t_lo"]).sum())

    @property
    def episodes_in_progress(self) -> int:
        """Envs whose episode in progress has stored transitions (reads the device)."""
        return int((self._state["episode_start"] < self._t).sum())

    def __repr__(self) -> str:
        return (
            f"DeviceHerReplayBuffer(buffer_size={self.buffer_size}, n_envs={self.n_envs}, "
            f"device='{self.device}', n_sampled_goal={self.n_sampled_goal}, "
            f"goal_selection_strategy={self.goal_selection_strategy.value!r})"
        )

    # ------------------------------------------------------------------ writing
    def add(
        self,
        obs: Mapping[str, Any],
        next_obs: Mapping[str, Any],
        action: Any,
        reward: Any,
        terminated: Any,
        truncated: Any,
        infos: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Stores one transition per env; every value has leading dimension ``n_envs``.

        The same arguments, in the same order, as :meth:`HerReplayBuffer.add`: tensors on
        this buffer's device (array-likes are copied there; a tensor on another device is
        an error). ``next_obs`` is the true next observation (the final one on an
        episode's last step). An env's episode ends when ``terminated | truncated``.
        ``infos`` is a dict of per-env values (a device twin's info) or a sequence of
        per-env dicts; only ``info_keys`` are read.
        """
        import torch

        n, R = self.n_envs, self.rows_per_env
        obs = self._check_obs_fully("obs", obs)
        next_obs = self._check_obs_fully("next_obs", next_obs)
        action = self._check_action(action)
        reward = self._per_env("reward", reward, torch.float32)
        terminated = self._per_env("terminated", terminated, torch.bool)
        truncated = self._per_env("truncated", truncated, torch.bool)
        info_values = self._info_values(infos) if self.info_keys else {}

        t = self._t
        if t >= self._no_overflow_before:
            self._read_horizons()
            if t >= self._no_overflow_before:
                start = self._state["episode_start"]
                env = int(torch.argmin(start))
                raise ValueError(
                    f"the episode of env {env} has reached {t - int(start[env])} transitions "
                    f"without ending: one more does not fit in its {R} rows "
                    f"(buffer_size={self.buffer_size} // n_envs={n}); use a larger buffer_size"
                )
        s = self._state
        row = t % R
        if t >= R:
            # This add overwrites transition t - R of every env: an env whose oldest intact
            # episode starts there retires that episode whole (t_lo moves to its end).
            # Example, R = 4, episodes [0, 3) and [3, 4) stored: add t = 4 overwrites
            # transition 0 (row 0), so t_lo goes 0 -> 3 and transitions 1, 2 leave with it.
            # (t_lo == t - R with no ended episode left, t_lo == t_hi, would mean an episode
            # in progress since t - R: add() has refused it above as too long.)
            hit = s["t_lo"] == t - R
            end = s["episode_end"].gather(0, (self._row_episode[row] % R)[None])[0]
            s["t_lo"] = torch.where(hit, end, s["t_lo"])
        values = {"obs": obs, "next_obs": next_obs, "action": {"": action}, "reward": {"": reward}}
        if self._layout:
            parts = [values[side][key] for side, key, *_ in self._layout]
            parts = [v if v.dim() == 2 else v.reshape(n, -1) for v in parts]
            s["records"][row] = torch.cat(parts, 1) if len(parts) > 1 else parts[0]
        for side, key, store in self._separate:
            store[row] = values[side][key]
        s["terminated"][row] = terminated
        s["truncated"][row] = truncated
        self._row_start[row] = s["episode_start"]
        self._row_episode[row] = s["episode_count"]
        if s["priorities"] is not None:
            s["priorities"][row] = self._max_priority**self.alpha
        for key, value in info_values.items():
            self._infos[key][row] = value
        self._t = t + 1
        self._end_episodes(terminated | truncated)

    def _end_episodes(self, done: Any) -> None:
        """Ends the episodes in progress of the envs where ``done`` after ``self._t`` adds."""
        import torch

        s, t, R = self._state, self._t, self.rows_per_env
        # In place, with a Python scalar where it can: each op costs ~5 us on the CPU and a
        # kernel on a GPU, and add() runs once per env step.
        slot = (s["episode_count"] % R)[None]
        s["episode_end"].scatter_(0, slot, s["episode_end"].gather(0, slot).masked_fill_(done, t))
        s["t_hi"].masked_fill_(done, t)
        s["newest_start"] = torch.where(done, s["episode_start"], s["newest_start"])
        s["episode_start"].masked_fill_(done, t)
        s["episode_count"] += done

    def truncate_last_trajectory(self) -> None:
        """Ends every episode in progress at its last stored transition, as a truncation
        (see :meth:`HerReplayBuffer.truncate_last_trajectory`)."""
        if self._t == 0:
            return
        s = self._state
        open_ = s["episode_start"] < self._t
        last = (self._t - 1) % self.rows_per_env
        s["truncated"][last] = s["truncated"][last] | open_
        self._end_episodes(open_)

    def can_sample(self) -> bool:
        """Whether the buffer holds a complete, intact episode (``sample`` works).

        Unlike ``n_transitions > 0`` it reads the device only when the last reading no
        longer vouches for it (about once per ring cycle): cheap to ask every step.
        """
        if self._t > self._nonempty_until:
            self._read_horizons()
        return self._t <= self._nonempty_until

    def _read_horizons(self) -> None:
        """The one host read of add() and sample() (see the module docstring).

        After it, no episode in progress can outgrow the ring before ``add`` number
        ``_no_overflow_before`` (an episode that starts at ``s`` has ``rows`` transitions
        after add ``s + rows - 1``), and the newest ended episode (of any env) is intact
        while at most ``_nonempty_until`` adds have been made (its first row ``s`` is
        overwritten by add ``s + rows``); -1 when no episode has ended yet.
        """
        import torch

        s, R = self._state, self.rows_per_env
        ended = s["t_lo"] < s["t_hi"]
        newest = torch.where(ended, s["newest_start"], -1).max()
        oldest_open, newest = torch.stack([s["episode_start"].min(), newest]).tolist()
        self._no_overflow_before = oldest_open + R
        self._nonempty_until = newest + R if newest >= 0 else -1

    # ------------------------------------------------------------------ input checks
    def _convert(self, name: str, value: Any, dtype: Any) -> Any:
        """``value`` as a tensor of ``dtype`` on this buffer's device."""
        import torch

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

    def _info_values(self, infos: Any) -> dict[str, Any]:
        import torch

        n = self.n_envs
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
            store = self._infos.get(key)
            if store is None:
                store = torch.zeros(
                    (self.rows_per_env, *value.shape), dtype=value.dtype, device=self.device
                )
                self._infos[key] = store
            elif value.shape[1:] != store.shape[2:]:
                raise ValueError(
                    f"infos[{key!r}] has shape {tuple(value.shape)}, expected "
                    f"{(n, *store.shape[2:])}"
                )
            elif torch.promote_types(store.dtype, value.dtype) != store.dtype:
                # The store took the dtype of the first value seen; a later value it cannot
                # hold widens it rather than being cast down.
                store = store.to(torch.promote_types(store.dtype, value.dtype))
                self._infos[key] = store
            values[key] = value
        return values

    # ------------------------------------------------------------------ sampling
    def _draw_uniform(self, count: int) -> tuple[Any, Any]:
        """``count`` transitions drawn uniformly from every env's range ``[t_lo, t_hi)``:
        returns their ``(env, t)`` (t the unwrapped counter)."""
        import torch

        s = self._state
        width = s["t_hi"] - s["t_lo"]
        cum = torch.cumsum(width, 0)
        total = cum[-1]
        # x indexes the concatenation of the envs' ranges: widths (2, 0, 3) give
        # cum (2, 2, 5); x = 3 lies in env 2 (the first cum > 3), at t_lo[2] + 3 - 2.
        u = torch.rand(count, generator=self._generator, device=self.device, dtype=torch.float64)
        x = torch.minimum((u * total).long(), total - 1)
        env = torch.searchsorted(cum, x, right=True)
        t = s["t_lo"][env] + x - (cum - width)[env]
        return env, t

    def _draw_prioritized(self, count: int) -> tuple[Any, Any, Any]:
        """``count`` transitions drawn in proportion to ``priority ** alpha`` among the
        sampleable ones: returns ``(env, t, weights)``."""
        import torch

        s, R, n = self._state, self.rows_per_env, self.n_envs
        mass = s["priorities"] * self._sampleable_rows()
        cum = torch.cumsum(mass.reshape(-1).double(), 0)
        total = cum[-1]
        u = torch.rand(count, generator=self._generator, device=self.device, dtype=torch.float64)
        flat = torch.searchsorted(cum, u * total, right=True).clamp_(max=R * n - 1)
        row, env = flat // n, flat % n
        probability = mass.reshape(-1)[flat].double() / total
        n_valid = (s["t_hi"] - s["t_lo"]).sum()
        weights = (n_valid * probability) ** -self._beta
        weights = (weights / weights.max()).float()
        return env, self._counter_of(row), weights

    def _counter_of(self, row: Any) -> Any:
        """The unwrapped counter ``t`` of the transition stored at ``row``: the one of
        ``t - R .. t - 1`` (the ring's content after ``t`` adds) that is ``row`` mod R."""
        R = self.rows_per_env
        return row + ((self._t - 1 - row) // R) * R

    def _sampleable_rows(self) -> Any:
        """A (rows, n_envs) mask of the rows whose transition can be sampled."""
        import torch

        s = self._state
        counter = self._counter_of(torch.arange(self.rows_per_env, device=self.device))[:, None]
        return (counter >= s["t_lo"]) & (counter < s["t_hi"])

    def sample(self, batch_size: int, device: Any = None) -> HerBatch:
        """Samples ``batch_size`` transitions, relabeling each with probability k/(k+1).

        Returns a :class:`HerBatch` of fresh tensors on this buffer's device, or moved to
        ``device`` when it names another one. The float32 fields (observations, actions,
        rewards) are slices of one gathered tensor, so not contiguous: ``reshape``, not
        ``view``, if a caller reshapes them.
        """
        import torch

        B = check_batch_size(batch_size)
        target = None if device is None else resolve_device(device)
        if not self.can_sample():
            raise RuntimeError(NO_EPISODE_YET)
        R, n, s = self.rows_per_env, self.n_envs, self._state
        if self.prioritized:
            env, t, weights = self._draw_prioritized(B)
        else:
            env, t = self._draw_uniform(B)
            weights = torch.ones(B, dtype=torch.float32, device=self.device)
        row = t % R
        # Every (rows, n_envs, ...) store is read through its flat view at row * n + env:
        # index_select on one index runs several times faster than indexing by two.
        index = row * n + env
        relabel, goal = self._draw_goals(B, env, t, index)
        values = self._gather(B, index)
        obs = {key: values["obs", key] for key in self._obs}
        next_obs = {key: values["next_obs", key] for key in self._obs}
        mask = relabel.reshape((B,) + (1,) * (goal.ndim - 1))
        for side in (obs, next_obs):
            side["desired_goal"] = torch.where(
                mask, goal.to(side["desired_goal"].dtype), side["desired_goal"]
            )
        info = {key: _take(store, index) for key, store in self._infos.items()}
        new_reward = self._batch_of(
            "compute_reward",
            self.compute_reward(next_obs["achieved_goal"], obs["desired_goal"], info),
            B,
            torch.float32,
        )
        rewards = torch.where(relabel, new_reward, values["reward", ""])
        terminated = _take(s["terminated"], index)
        if self.compute_terminated is not None:
            new_terminated = self._batch_of(
                "compute_terminated",
                self.compute_terminated(next_obs["achieved_goal"], obs["desired_goal"], info),
                B,
                torch.bool,
            )
            terminated = torch.where(relabel, new_terminated, terminated)
        if not self.handle_timeout_termination:
            terminated = terminated | _take(s["truncated"], index)
        batch = HerBatch(
            obs,
            values["action", ""],
            rewards,
            next_obs,
            terminated.float(),
            weights,
            index,
        )
        if target is None or target == self.device:
            return batch
        return batch_to(batch, target)

    def _draw_goals(self, B: int, env: Any, t: Any, index: Any) -> tuple[Any, Any]:
        """Which of the ``B`` transitions (counter ``t`` of ``env``, flat ``index``) are
        relabeled, and each one's new goal (an achieved goal of the same episode, or of any
        sampleable transition for ``random``)."""
        import torch

        R, n, s, generator = self.rows_per_env, self.n_envs, self._state, self._generator
        start, episode = _take(s["row_meta"], index).unbind(1)
        end = _take(s["episode_end"], (episode % R) * n + env)

        def uniform() -> Any:
            return torch.rand(B, generator=generator, device=self.device)

        relabel = uniform() < self.her_ratio
        strategy = self.goal_selection_strategy
        if strategy is GoalSelectionStrategy.RANDOM:
            goal_env, goal_t = self._draw_uniform(B)
        else:
            # Transition t of an episode [start, end): "future" picks j in t .. end - 1
            # (span end - t, t itself included), "final" end - 1, "episode" start .. end - 1.
            # The goal is transition j's next achieved goal.
            if strategy is GoalSelectionStrategy.FUTURE:
                first, span = t, end - t
            elif strategy is GoalSelectionStrategy.FINAL:
                first, span = end - 1, torch.ones_like(t)
            else:
                first, span = start, end - start
            # floor(u * span) can round up to span for u just below 1: clamp it.
            pick = torch.minimum((uniform() * span).long(), span - 1)
            goal_env, goal_t = env, first + pick
        goal = _take(self._next_obs["achieved_goal"], (goal_t % R) * n + goal_env)

        return relabel, goal

    def _gather(self, B: int, index: Any) -> dict[tuple[str, str], Any]:
        """Every stored field of the transitions at flat ``index``, by (side, key): slices of
        one gathered records tensor, and one gather per separate store."""
        records = _take(self._state["records"], index)
        values = {
            (side, key): records[:, lo:hi].reshape(B, *shape)
            for side, key, lo, hi, shape in self._layout
        }
        for side, key, store in self._separate:
            values[side, key] = _take(store, index)
        return values

    def _batch_of(self, name: str, value: Any, batch_size: int, dtype: Any) -> Any:
        """``value`` as a ``(batch_size,)`` tensor of ``dtype`` on the device; a scalar
        (Fetch's ``compute_terminated`` returns a constant ``False``) stands for the batch."""
        import torch

        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(np.asarray(value), device=self.device)
        value = value.to(device=self.device, dtype=dtype)
        if tuple(value.shape) == (batch_size,):
            return value
        if value.numel() == 1 and value.ndim <= 1:
            return value.reshape(()).expand(batch_size)
        raise batch_shape_error(name, tuple(value.shape), batch_size)

    # The tensor operations of ReplayBufferBase.update_priorities (one host read of a flag
    # pair per call).
    def _priority_input(self, value: Any) -> Any:
        import torch

        if isinstance(value, torch.Tensor):
            value = value.detach().to(self.device)
        else:
            value = torch.as_tensor(np.asarray(value), device=self.device)
        if value.ndim == 2 and value.shape[1] == 1:
            value = value.reshape(-1)
        return value

    def _priority_indices_are_integers(self, indices: Any) -> bool:
        import torch

        return not (indices.is_floating_point() or indices.dtype == torch.bool)

    def _priority_capacity(self) -> int:
        return self._state["priorities"].numel()

    def _priority_of(self, indices: Any, td_errors: Any, capacity: int) -> tuple:
        import torch

        indices = indices.long()
        priority = td_errors.detach().double().abs() + self.priority_eps
        out_of_range = (indices < 0) | (indices >= capacity)
        not_finite = ~torch.isfinite(priority)
        bad_index, bad_value = torch.stack([out_of_range.any(), not_finite.any()]).tolist()
        return indices, priority, bad_index, bad_value

    def _priority_set(self, indices: Any, priority: Any) -> None:
        import torch

        priorities = self._state["priorities"].reshape(-1)
        priority = priority.float()
        live = self._sampleable_rows().reshape(-1)[indices]
        priorities[indices] = torch.where(live, priority**self.alpha, priorities[indices])
        self._max_priority = torch.maximum(self._max_priority, priority.max())

    # ------------------------------------------------------------------ save / load
    def save(self, path: str | os.PathLike) -> None:
        """Writes the whole buffer to ``path`` (a ``torch.save`` archive of CPU tensors and
        plain metadata, readable with ``weights_only=True``).

        As :meth:`HerReplayBuffer.save`: episodes in progress are written as truncated at
        their last stored transition while the live buffer goes on as it was, and the
        file is written whole beside ``path`` and renamed over it. The reward function is
        not saved: pass it again to :meth:`load`.
        """
        save_device_buffer(self, path)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        compute_reward: Any,
        compute_terminated: Any = None,
        device: Any = None,
    ) -> DeviceHerReplayBuffer:
        """Reads a buffer written by :meth:`save` onto ``device`` (None: the device it was
        saved from); sampling continues where it left off.

        A file that is truncated, corrupt or not written by :meth:`save` raises a
        ValueError naming the file.
        """
        return load_device_buffer(cls, path, compute_reward, compute_terminated, device)


def _take(store: Any, index: Any) -> Any:
    """Elements ``index`` (flat: ``row * n_envs + env``) of a ``(rows, n_envs, ...)`` store."""
    return store.reshape(-1, *store.shape[2:]).index_select(0, index)


def _info_dtype(value: Any) -> Any:
    """The storage dtype of an info value: its own, float64 numpy values as float32."""
    import torch

    dtype = value.dtype if isinstance(value, torch.Tensor) else torch_dtype(value.dtype)
    return torch.float32 if dtype == torch.float64 else dtype
