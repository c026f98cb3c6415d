"""The HER buffer on a torch device: storage, relabeling and rewards beside the networks.

:class:`DeviceHerReplayBuffer` is :class:`~goalenvs.her.xp_buffer.XpHerBuffer` on torch:
the one buffer, written once over the array module, its tensors on one device (a CUDA GPU
or the CPU), ``add`` and ``sample`` tensor operations only. ``sample`` reads nothing on
the host once ``can_sample()`` has said yes, draws from :attr:`generator` and has static
shapes, so it can be captured in a CUDA graph
(``graph.register_generator_state(buffer.generator)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gymnasium import spaces

from goalenvs.her.goal_mix import GoalMix
from goalenvs.her.settings import GoalSelectionStrategy
from goalenvs.her.xp_buffer import XpHerBuffer

__all__ = ["DeviceHerReplayBuffer"]


class DeviceHerReplayBuffer(XpHerBuffer):
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
        super().__init__(
            buffer_size, observation_space, action_space, compute_reward, compute_terminated,
            device, n_envs=n_envs, n_sampled_goal=n_sampled_goal,
            goal_selection_strategy=goal_selection_strategy,
            handle_timeout_termination=handle_timeout_termination, info_keys=info_keys,
            seed=seed, prioritized=prioritized, alpha=alpha, beta=beta,
            priority_eps=priority_eps, goal_mix=goal_mix, goal_mix_warmup=goal_mix_warmup,
            priority=priority, motion_clip=motion_clip, motion_weights=motion_weights,
            n_step=n_step, gamma=gamma,
        )  # fmt: skip
