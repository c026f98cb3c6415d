"""The reference Hindsight Experience Replay buffer, in host memory (numpy).

:class:`HerReplayBuffer` is :class:`~goalenvs.her.xp_buffer.XpHerBuffer` on numpy: the one
buffer, written once over the array module (its storage, sampling, priorities and file
are described there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs.her.goal_mix import GoalMix
from goalenvs.her.settings import GoalSelectionStrategy
from goalenvs.her.xp_buffer import XpHerBuffer

__all__ = ["HerReplayBuffer"]


class HerReplayBuffer(XpHerBuffer):
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
    :class:`~goalenvs.her.device_buffer.DeviceHerReplayBuffer` is the same buffer on a
    torch device.
    """

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
        super().__init__(
            buffer_size, observation_space, action_space, compute_reward, compute_terminated,
            None, n_envs=n_envs, n_sampled_goal=n_sampled_goal,
            goal_selection_strategy=goal_selection_strategy,
            handle_timeout_termination=handle_timeout_termination, info_keys=info_keys,
            seed=seed, prioritized=prioritized, alpha=alpha, beta=beta,
            priority_eps=priority_eps, goal_mix=goal_mix, goal_mix_warmup=goal_mix_warmup,
            priority=priority, motion_clip=motion_clip, motion_weights=motion_weights,
            n_step=n_step, gamma=gamma,
        )  # fmt: skip

    @property
    def rng(self) -> np.random.Generator:
        """The generator of every draw of :meth:`sample`."""
        return self.ops.rng

    @classmethod
    def load(
        cls,
        path: Any,
        compute_reward: object,
        compute_terminated: object = None,
        device: Any = None,
    ) -> Any:
        """Reads a file ``save`` wrote (this buffer's, or a device buffer's, or one of
        goalenvs 148f048 and earlier) into host memory."""
        return super().load(path, compute_reward, compute_terminated, device)
