"""What the trainer asks of a replay buffer: the :class:`ReplayBuffer` protocol, which
the HER buffer satisfies and the collector, the learner and the run folder take."""

from __future__ import annotations

import os
from typing import Any, Protocol, runtime_checkable

from goalenvs.core.types import DeviceLike
from goalenvs.her.common import HerBatch


@runtime_checkable
class ReplayBuffer(Protocol):
    """A replay buffer the trainer fills, samples, prioritizes and saves."""

    @property
    def prioritized(self) -> bool:
        """True when batches are drawn by priority."""

    @property
    def priority(self) -> str:
        """What a prioritized buffer draws by: ``"td_error"`` or ``"goal_motion"``."""

    @property
    def n_transitions(self) -> int:
        """Transitions stored (and sampleable)."""

    def add(
        self,
        obs: Any,
        next_obs: Any,
        action: Any,
        reward: Any,
        terminated: Any,
        truncated: Any,
        infos: Any = None,
    ) -> None:
        """Stores one transition per env (arrays or tensors with leading ``n_envs``)."""

    def can_sample(self) -> bool:
        """True once a batch can be drawn (an episode has been stored)."""

    def sample(self, batch_size: int, device: DeviceLike = None) -> HerBatch:
        """A relabeled batch (tensors on ``device`` when given)."""

    def update_priorities(self, indices: object, td_errors: object) -> None:
        """Sets the priorities of the sampled transitions from their TD errors."""

    def truncate_last_trajectory(self) -> None:
        """Ends every episode in progress where it is (the envs start new ones)."""

    def save(self, path: str | os.PathLike) -> None:
        """Writes the buffer, its episodes in progress included, to ``path``."""
