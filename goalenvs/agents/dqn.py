"""Double DQN+HER for discrete actions (the HER paper's bit-flipping agent).

Loss:    huber(Q(s, g, a) - y)
         y = clip(r + gamma * Q'(s', g, argmax_a Q(s', g, a)), -1/(1-gamma), 0)
Targets: theta' <- polyak * theta' + (1 - polyak) * theta, once per cycle.
Acting:  epsilon-greedy while collecting, greedy otherwise."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from gymnasium import spaces
from torch.nn import functional

from goalenvs.agents.base import Agent, adam
from goalenvs.agents.config import FRACTION, POSITIVE, TrainConfig, option
from goalenvs.agents.losses import weighted_mean
from goalenvs.agents.networks import mlp


@dataclass
class DQNConfig(TrainConfig):
    """Double DQN+HER for Discrete actions, as the HER paper's bit-flipping experiment."""

    algo: ClassVar[str] = "dqn"

    hidden_sizes: tuple[int, ...] = (256,)  # the HER paper: one hidden layer of 256 units
    batch_size: int = 128  # transitions per gradient step (the HER paper's bit flipping)
    num_envs: int = 16  # the HER paper collects 16 episodes per cycle
    learning_rate: float = option(1e-3, "Adam step size of the Q-network", check=POSITIVE)
    random_eps: float = option(0.2, "epsilon of the epsilon-greedy exploration", check=FRACTION)
    huber_delta: float = option(
        1.0, "the Huber loss is quadratic below this TD error, linear above", check=POSITIVE
    )


class DQN(Agent):
    """Double DQN+HER agent for a Discrete action space."""

    config: DQNConfig
    action_space: spaces.Discrete
    graph_safe_update: ClassVar[bool] = True
    loss_names: ClassVar[tuple[str, ...]] = ("q_loss", "q_mean")
    policy_module_names: ClassVar[tuple[str, ...]] = ("q",)
    training_module_names: ClassVar[tuple[str, ...]] = ("q_target",)
    optimizer_names: ClassVar[tuple[str, ...]] = ("optimizer",)
    target_networks: ClassVar[tuple[str, ...]] = ("q",)

    def prepare_actions(self, action_space: spaces.Space) -> None:
        """The number of actions, one Q-value each."""
        if not isinstance(action_space, spaces.Discrete):
            raise TypeError(f"DQN needs a Discrete action space, got action_space={action_space}")
        self.n_actions = int(action_space.n)

    def make_networks(self) -> None:
        """The Q-network, its target and its Adam."""
        config = self.config
        self.q = mlp(
            self.normalizer.input_size, config.hidden_sizes, self.n_actions, config.layer_norm
        )
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)
        self.optimizer = adam(self.q.parameters(), lr=config.learning_rate)

    def update(self, batch: Any) -> dict[str, torch.Tensor]:
        """One Huber-loss step on a HER batch, with the double-DQN target."""
        inputs = self.inputs(batch.observations)
        next_inputs = self.inputs(batch.next_observations)
        actions = batch.actions.reshape(-1, 1).long() - int(self.action_space.start)
        with self.autocast():
            with torch.no_grad():
                # Double DQN: the online net picks the next action, the target net values it.
                next_actions = self.q(next_inputs).argmax(dim=1, keepdim=True)
                next_values = self.q_target(next_inputs).gather(1, next_actions).squeeze(1)
                target = self.batch_targets(batch, next_values)
            q = self.q(inputs).gather(1, actions).squeeze(1)
            delta = self.config.huber_delta
            losses = functional.huber_loss(q, target, delta=delta, reduction="none")
            loss = weighted_mean(losses, getattr(batch, "weights", None))
        self.gradient_step(self.optimizer, loss, list(self.q.parameters()))
        return {
            "q_loss": loss.detach(),
            "q_mean": q.detach().mean(),
            "td_errors": (q - target).detach(),
        }

    @torch.no_grad()
    def act(self, observations: dict[str, object], explore: bool) -> np.ndarray | torch.Tensor:
        """Greedy actions; exploring replaces each with a random one with prob. random_eps.
        Tensor observations give a tensor of actions on their device."""
        actions = self.acting_module("q", explore)(self.inputs(observations)).argmax(dim=1)
        if isinstance(observations["observation"], torch.Tensor):
            # Tensor observations: explored on their device, a tensor of actions out.
            if explore:
                generator, n = self.noise_generator(), len(actions)
                random = torch.randint(
                    0, self.n_actions, (n,), generator=generator, device=actions.device
                )
                pick = torch.rand(n, generator=generator, device=actions.device)
                actions = torch.where(pick < self.config.random_eps, random, actions)
            return actions + int(self.action_space.start)
        greedy = actions.cpu().numpy()
        if explore:
            random_actions = self.rng.integers(0, self.n_actions, len(greedy))
            pick_random = self.rng.random(len(greedy)) < self.config.random_eps
            greedy = np.where(pick_random, random_actions, greedy)
        return (greedy + int(self.action_space.start)).astype(np.int64)
