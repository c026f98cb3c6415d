"""Sampling from a :class:`~goalenvs.her.buffer.HerReplayBuffer`: the draws, the relabeling
index arithmetic, the batch's reused output arrays and prioritized replay's draws.

:class:`HerSampler` is a part of the buffer: it reads the buffer's storage through the
named arrays of a :class:`~goalenvs.her.buffer_state.HerStorage` (and the sum-tree of the
priorities) and never writes them. The buffer hands it the generator, the goal functions
and ``beta`` at each call, so that replacing them on the buffer takes effect at once.
"""

from __future__ import annotations

import numpy as np

from goalenvs.core.types import DeviceLike, GoalFunction
from goalenvs.her.buffer_state import HerStorage
from goalenvs.her.common import (
    NO_EPISODE_YET,
    HerBatch,
    batch_shape_error,
    batch_to,
    no_other_episode_error,
    reward_shape_error,
)
from goalenvs.her.goal_mix import FUTURE_ONLY, IN_EPISODE, RELABELLING, GoalMix
from goalenvs.her.settings import BufferSettings
from goalenvs.her.sumtree import SumTree

# The env of sampled transitions: 0 when the buffer has one env, else one per transition.
EnvIndex = int | np.ndarray

__all__ = ["HerSampler"]


class _Outputs:
    """The arrays one batch size samples into, and the torch views of them."""

    def __init__(self, batch_size: int, storage: HerStorage, n_step: int = 1) -> None:
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
        self.discounts = np.empty(B, np.float32) if n_step > 1 else None
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
            self.discounts,
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
        self.mix = _MixDraws(settings.relabel_mix)
        self.warmup_mix = _MixDraws(FUTURE_ONLY)
        self.goal_mix_warmup = settings.goal_mix_warmup
        self.handle_timeout_termination = settings.handle_timeout_termination
        self.n_step = settings.n_step
        self.gamma = settings.gamma
        self.storage = storage
        self.tree = tree
        # Goal-motion priorities are a curriculum, drawn without importance weights.
        self.weighted = settings.priority == "td_error"
        self._achieved_goals = storage.observations["achieved_goal"]
        self._desired_goals = storage.observations["desired_goal"]
        self._reused: dict[int, _Outputs] = {}

    @property
    def n_transitions(self) -> int:
        """Transitions that can be sampled: those of complete, intact episodes."""
        storage = self.storage
        return int((storage.sampleable_to - storage.sampleable_from).sum())

    def needs_other_episode(self, steps_added: int) -> bool:
        """Whether a sample after ``steps_added`` adds draws other episodes' desired goals
        (the mix has some, and its warm-up is over)."""
        warming_up = steps_added * self.n_envs < self.goal_mix_warmup
        return "desired" in self.mix.sources and not warming_up

    def holds_two_episodes(self) -> bool:
        """Whether the sampleable transitions span at least two episodes: those of two
        streams, or more transitions in one stream than its oldest episode holds."""
        storage, R, n = self.storage, self.rows_per_env, self.n_envs
        width = storage.sampleable_to - storage.sampleable_from
        streams = np.flatnonzero(width)
        if streams.size != 1:
            return streams.size > 1
        env = int(streams[0])
        # The stream's oldest sampleable transition is its oldest episode's first.
        first_row = int(storage.transition_row[(storage.sampleable_from[env] % R) * n + env])
        return bool(width[env] > storage.episode_length[first_row * n + env])

    def sample(
        self,
        batch_size: int,
        rng: np.random.Generator,
        compute_reward: GoalFunction,
        compute_terminated: GoalFunction | None,
        beta: float,
        steps_added: int,
        device: DeviceLike = None,
        copy: bool = False,
    ) -> HerBatch:
        """A batch of ``batch_size`` transitions drawn with ``rng``, their goals drawn from
        the relabelling mix (only future ones while fewer than ``goal_mix_warmup`` env
        steps are stored: ``steps_added`` adds of ``n_envs`` each; see
        :meth:`goalenvs.her.buffer.HerReplayBuffer.sample`)."""
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
        warming_up = steps_added * n < self.goal_mix_warmup
        mix = self.warmup_mix if warming_up else self.mix
        relabel, goals = self._draw_goals(rng, mix, B, env, row, index)

        out = _Outputs(B, storage, self.n_step) if copy else self._outputs(B)
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
        mask = relabel.reshape((B,) + (1,) * (goals.ndim - 1))
        np.copyto(obs["desired_goal"], goals, where=mask)
        np.copyto(next_obs["desired_goal"], goals, where=mask)

        info = {key: values[index] for key, values in storage.infos.items()}
        new_reward = _rewards_of(
            compute_reward,
            compute_reward(next_obs["achieved_goal"], obs["desired_goal"], info),
            B,
            next_obs["achieved_goal"].shape,
        )
        np.copyto(out.rewards, new_reward, where=relabel, casting="unsafe")

        terminated = self._terminated(
            compute_terminated, index, relabel, next_obs["achieved_goal"], obs["desired_goal"], info
        )
        if self.n_step > 1:
            terminated = self._sum_steps(
                out, compute_reward, compute_terminated, relabel, env, row, index, terminated
            )
        np.copyto(out.dones, terminated)
        return _deliver(out, device)

    def _terminated(
        self,
        compute_terminated: GoalFunction | None,
        index: np.ndarray,
        relabel: np.ndarray,
        next_achieved: np.ndarray,
        goals: np.ndarray,
        info: dict[str, np.ndarray],
    ) -> np.ndarray:
        """Whether each transition (flat ``index``, reaching ``next_achieved`` for
        ``goals``) must not bootstrap: its stored ``terminated``, recomputed for a
        relabeled goal by ``compute_terminated``, or truncated too without
        ``handle_timeout_termination``."""
        storage = self.storage
        terminated = storage.terminated[index]
        if compute_terminated is not None:
            new_terminated = _batch_of(
                "compute_terminated", compute_terminated(next_achieved, goals, info), len(index)
            ).astype(bool)
            terminated = np.where(relabel, new_terminated, terminated)
        if not self.handle_timeout_termination:
            terminated = terminated | storage.truncated[index]
        return terminated

    def _sum_steps(
        self,
        out: _Outputs,
        compute_reward: GoalFunction,
        compute_terminated: GoalFunction | None,
        relabel: np.ndarray,
        env: EnvIndex,
        row: np.ndarray,
        index: np.ndarray,
        terminated: np.ndarray,
    ) -> np.ndarray:
        """Makes ``out``'s one-step transitions n-step returns: adds the discounted rewards
        of the up to ``n_step - 1`` transitions after each one in its episode (for its
        goal, relabeled or not), stopping at the episode's last transition or at a
        termination, sets ``discounts`` to ``gamma`` to the power of the steps summed and
        the next observations to those after the last step. Returns the dones of the
        last step summed."""
        R, n, storage, gamma = self.rows_per_env, self.n_envs, self.storage, self.gamma
        n_step = self.n_step
        assert gamma is not None  # BufferSettings requires it with n_step > 1
        B = len(row)
        offset = storage.offset_in_episode[index]
        length = storage.episode_length[((row - offset) % R) * n + env]
        goals = out.observations["desired_goal"]
        returns = out.rewards.astype(np.float64)
        steps = np.ones(B, np.int64)  # transitions summed so far
        alive = np.ones(B, bool)  # whether the return goes on
        ended = terminated.copy()  # whether the last step summed terminated
        for k in range(1, n_step):
            alive &= (offset + k < length) & ~ended
            if not alive.any():
                break
            step = ((row + k) % R) * n + env
            next_achieved = self._achieved_goals[((row + k + 1) % R) * n + env]
            info = {key: values[step] for key, values in storage.infos.items()}
            reward = np.where(
                relabel,
                _rewards_of(
                    compute_reward,
                    compute_reward(next_achieved, goals, info),
                    B,
                    next_achieved.shape,
                ),
                storage.rewards[step],
            )
            step_terminated = self._terminated(
                compute_terminated, step, relabel, next_achieved, goals, info
            )
            returns += np.where(alive, gamma**k * reward, 0.0)
            steps += alive
            ended = np.where(alive, step_terminated, ended)
        np.copyto(out.rewards, returns, casting="unsafe")
        assert out.discounts is not None
        np.copyto(out.discounts, gamma**steps, casting="unsafe")
        # The observation after the last step summed, with the (relabeled) goal.
        np.take(storage.records, ((row + steps) % R) * n + env, out=out.next_records)
        for key, values in out.next_observations.items():
            np.copyto(values, out.next_records[f"obs/{key}"])
        mask = relabel.reshape((B,) + (1,) * (goals.ndim - 1))
        np.copyto(out.next_observations["desired_goal"], goals, where=mask)
        return ended

    def _draw_transitions(
        self, rng: np.random.Generator, count: int
    ) -> tuple[EnvIndex, np.ndarray]:
        """Draws ``count`` transitions uniformly from the complete, intact episodes.

        Returns ``(env, row)``: each transition's env (an int when there is one env) and
        physical row.
        """
        total = self.n_transitions
        if total == 0:
            raise RuntimeError(NO_EPISODE_YET)
        return self._locate(rng.integers(0, total, size=count))

    def _locate(self, x: np.ndarray) -> tuple[EnvIndex, np.ndarray]:
        """The ``(env, row)`` of the sampleable transitions numbered ``x``: the streams'
        sampleable transitions laid end to end, each stream's oldest first."""
        storage = self.storage
        first = storage.sampleable_from
        R, n = self.rows_per_env, self.n_envs
        if n == 1:
            return 0, storage.transition_row[(x + first[0]) % R].astype(np.int64)
        # x indexes the concatenation of the streams' sampleable transitions: find the
        # stream, then the transition counter within it.
        width = storage.sampleable_to - first
        cum = np.cumsum(width)
        env = np.searchsorted(cum, x, side="right")
        k = x + (first - (cum - width))[env]
        return env, storage.transition_row[(k % R) * n + env].astype(np.int64)

    def _draw_prioritized(
        self, rng: np.random.Generator, count: int, beta: float
    ) -> tuple[EnvIndex, np.ndarray, np.ndarray | None]:
        """Draws ``count`` transitions in proportion to their priority ** alpha.

        Returns ``(env, row, weights)`` as :meth:`_draw_transitions`, with the
        importance-sampling weights ``(N * P(i)) ** -beta`` over their largest (None for
        goal-motion priorities, which carry none).
        """
        tree = self.tree
        assert tree is not None
        total = tree.total
        if not total > 0:
            raise RuntimeError(NO_EPISODE_YET)
        flat = tree.find(rng.random(count) * total)
        weights = None
        if self.weighted:
            probability = tree.nodes[tree.size + flat] / total
            weights = (self.n_transitions * probability) ** -beta
            weights /= weights.max()
        n = self.n_envs
        if n == 1:
            return 0, flat, weights
        return flat % n, flat // n, weights

    def _draw_goals(
        self,
        rng: np.random.Generator,
        mix: _MixDraws,
        B: int,
        env: EnvIndex,
        row: np.ndarray,
        index: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Which of the ``B`` transitions (at physical ``row`` of ``env``, flat ``index``)
        are relabeled, and the new goal of each (one row per transition; the rows that
        keep their goal hold any goal).

        One uniform draw per transition picks its source from ``mix``; then each source
        of the mix draws for the whole batch, in :data:`RELABELLING` order (one draw for
        the in-episode sources together): a single-source mix draws as a strategy did.

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
        u = rng.random(B)
        relabel = u < mix.thresholds[-1]
        # The source of each transition, as its position in RELABELLING (len: original).
        source = np.searchsorted(mix.thresholds, u, side="right") if mix.mixed else None

        def where(name: str, value: np.ndarray, other: np.ndarray | None) -> np.ndarray:
            """``value`` on the transitions whose source is ``name``, ``other`` elsewhere."""
            if other is None or source is None:
                return value
            chosen = np.equal(source, RELABELLING.index(name))
            return np.where(chosen.reshape((B,) + (1,) * (np.ndim(value) - 1)), value, other)

        goal_index: np.ndarray | None = None
        in_episode = [name for name in mix.sources if name in IN_EPISODE]
        if in_episode:
            first: np.ndarray | None = None
            span: np.ndarray | None = None
            for name in in_episode:
                if name == "future":
                    this_first, this_span = row + 1, length - offset
                elif name == "final":
                    this_first, this_span = start + length, np.ones_like(length)
                else:
                    this_first, this_span = start + 1, length
                first, span = where(name, this_first, first), where(name, this_span, span)
            assert first is not None and span is not None  # in_episode is not empty
            # floor(r * span) can round up to span for r just below 1: clamp it.
            pick = np.minimum((rng.random(B) * span).astype(np.int64), np.subtract(span, 1))
            goal_index = ((first + pick) % R) * n + env
        if "achieved" in mix.sources:
            goal_env, goal_row = self._draw_transitions(rng, B)
            goal_index = where("achieved", ((goal_row + 1) % R) * n + goal_env, goal_index)
        goals: np.ndarray | None = None if goal_index is None else self._achieved_goals[goal_index]
        if "desired" in mix.sources:
            other_env, other_row = self._draw_other_episode(rng, B, env, start, length)
            goals = where("desired", self._desired_goals[other_row * n + other_env], goals)
        if goals is None:  # nothing is relabeled: the transitions' own goals
            goals = self._desired_goals[index]
        return relabel, goals

    def _draw_other_episode(
        self,
        rng: np.random.Generator,
        B: int,
        env: EnvIndex,
        start: np.ndarray,
        length: np.ndarray,
    ) -> tuple[EnvIndex, np.ndarray]:
        """For each of ``B`` transitions (of ``env``, in the episode of ``length``
        transitions that starts at unwrapped row ``start``), a transition drawn uniformly
        from every other sampleable episode: ``(env, row)``.

        A candidate drawn from the whole buffer is kept unless it lies in the
        transition's own episode; there, its number ``x`` and offset ``a`` place that
        episode at numbers ``x - a .. x - a + length - 1``, and a second draw among the
        ``total - length`` other numbers skips over them. Either way the draw is uniform
        over the other episodes, with static shapes.
        """
        R, n, storage = self.rows_per_env, self.n_envs, self.storage
        total = self.n_transitions
        if not self.holds_two_episodes():
            raise no_other_episode_error(self.mix.mix, total)
        x = rng.integers(0, total, size=B)
        candidate_env, candidate_row = self._locate(x)
        candidate_offset = storage.offset_in_episode[candidate_row * n + candidate_env]
        same = (candidate_env == env) & ((candidate_row - candidate_offset - start) % R == 0)
        y = rng.integers(0, total - length)
        y = y + length * (y >= x - candidate_offset)
        other_env, other_row = self._locate(y)
        return np.where(same, other_env, candidate_env), np.where(same, other_row, candidate_row)

    def _outputs(self, batch_size: int) -> _Outputs:
        """The reused output arrays of ``batch_size``."""
        out = self._reused.get(batch_size)
        if out is None:
            out = self._reused[batch_size] = _Outputs(batch_size, self.storage, self.n_step)
        return out


def _deliver(out: _Outputs, device: DeviceLike) -> HerBatch:
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
            None if batch.discounts is None else torch.from_numpy(batch.discounts),
        )
    if torch.device(device).type == "cpu":
        return views
    return batch_to(views, device)


def _rewards_of(
    function: GoalFunction, value: object, batch_size: int, goal_shape: tuple[int, ...]
) -> np.ndarray:
    """``compute_reward``'s result as a ``(batch_size,)`` array, or the error that names the
    function and the shapes: one value for the whole batch would pay every relabeled
    transition the same reward, so it is refused, never broadcast."""
    array = np.asarray(value)
    if array.shape == (batch_size,):
        return array
    raise reward_shape_error(function, array.shape, batch_size, goal_shape)


def _batch_of(name: str, value: object, batch_size: int) -> np.ndarray:
    """``value`` as a ``(batch_size,)`` array; a scalar (Fetch's ``compute_terminated``
    returns a constant ``False``) stands for the whole batch."""
    array = np.asarray(value)
    if array.shape == (batch_size,):
        return array
    if array.size == 1 and array.ndim <= 1:
        return np.broadcast_to(array.reshape(()), (batch_size,))
    raise batch_shape_error(name, array.shape, batch_size)


class _MixDraws:
    """A :class:`GoalMix` as the sampler draws from it: its cumulative thresholds (a
    uniform ``u`` picks the first source with ``u < threshold``; ``u`` at or past the
    last keeps the original goal) and its sources."""

    def __init__(self, mix: GoalMix) -> None:
        self.mix = mix
        self.thresholds = np.array(mix.thresholds())
        self.sources = mix.sources
        #: Whether more than one source relabels (else no per-transition choice is drawn).
        self.mixed = len(self.sources) > 1
