"""Hindsight Experience Replay: replay buffer, agents, trainer.

Importing this package stays light (numpy and gymnasium): torch is imported only where a
tensor is made, and stable-baselines3 only by :mod:`goalenvs.her.sb3`.
"""

from goalenvs.her.buffer import GoalSelectionStrategy, HerBatch, HerReplayBuffer

__all__ = ["GoalSelectionStrategy", "HerBatch", "HerReplayBuffer"]
