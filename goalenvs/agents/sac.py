"""SAC+HER (Haarnoja et al. 2018, with the learned temperature of the 2018 follow-up).

Policy:       a = tanh(u),  u ~ N(mu(s, g), sigma(s, g)),  log pi(a) = log N(u) - sum log(1 - a^2)
Critics:      minimize (Qi(s, g, a) - y)^2 for i = 1, 2
              y = clip(r + gamma * (min(Q1', Q2')(s', g, a') - alpha * log pi(a' | s', g)), range)
Actor:        minimize alpha * log pi(a | s, g) - min(Q1, Q2)(s, g, a),  a ~ pi(. | s, g)
Temperature:  minimize -log(alpha) * (log pi(a | s, g) + target_entropy)   (target: -|A|)
Targets move once per cycle (``update_targets``), as DDPG+HER's.
Actions are handled in [-1, 1] and mapped affinely onto the env's Box bounds.
The actor's loss is taken after the critics' step; the temperature's loss needs only the
actor's log-probabilities, so the actor and the temperature step together (one
all-reduce across workers for the critics, one for those two)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from goalenvs.agents.base import BoxAgent, adam
from goalenvs.agents.config import POSITIVE, TrainConfig, finite, option
from goalenvs.agents.losses import twin_critic_loss
from goalenvs.agents.networks import Critic, Network, twin_min

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # keeps sigma in a range where log-probs stay finite


@dataclass
class SACConfig(TrainConfig):
    """SAC+HER: a squashed-Gaussian policy, twin critics and a learned temperature."""

    algo: ClassVar[str] = "sac"

    actor_lr: float = option(1e-3, "Adam step size of the policy", check=POSITIVE)
    critic_lr: float = option(1e-3, "Adam step size of both Q-functions", check=POSITIVE)
    alpha_lr: float = option(1e-3, "Adam step size of log(alpha), the temperature", check=POSITIVE)
    initial_alpha: float = option(
        0.1, "starting temperature; 1.0 (SB3's) drowns a -1/step reward", check=POSITIVE
    )
    target_entropy: float | None = option(
        None, "the entropy alpha steers towards; None: -|A|", check=finite
    )


class GaussianActor(Network):
    """The squashed-Gaussian policy: a mean and a log-std per action dim."""

    def sizes(self, input_size: int, action_size: int) -> tuple[int, int]:
        """The state and goal in; a mean and a log-std per action dim out."""
        return input_size, 2 * action_size

    def forward(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, log_std)`` of the pre-squash Gaussian, each ``(B, A)``."""
        mean, log_std = self.net(inputs).chunk(2, dim=-1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(
        self, inputs: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterized action in [-1, 1] and its log-probability ``(B,)``; the noise
        comes from ``generator`` (torch's global one when None, as in the updates)."""
        mean, log_std = self(inputs)
        if generator is None:
            noise = torch.randn_like(mean)
        else:
            noise = torch.randn(mean.shape, generator=generator, device=mean.device).to(mean.dtype)
        u = mean + log_std.exp() * noise
        log_prob = (-0.5 * ((u - mean) / log_std.exp()).square() - log_std).sum(-1)
        log_prob = log_prob - 0.5 * math.log(2 * math.pi) * u.shape[-1]
        # log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u)), stable for large |u|.
        log_prob = log_prob - (2 * (math.log(2.0) - u - functional.softplus(-2 * u))).sum(-1)
        return torch.tanh(u), log_prob


class Temperature(nn.Module):
    """SAC's learned temperature, kept as log(alpha) so it stays positive."""

    def __init__(self, initial_alpha: float) -> None:
        super().__init__()
        self.log_alpha = nn.Parameter(torch.tensor(math.log(initial_alpha)))

    def forward(self) -> torch.Tensor:
        """alpha."""
        return self.log_alpha.exp()


class SAC(BoxAgent):
    """SAC+HER agent for a Box action space."""

    config: SACConfig
    graph_safe_update: ClassVar[bool] = True
    loss_names: ClassVar[tuple[str, ...]] = ("critic_loss", "actor_loss", "alpha", "q_mean")
    policy_module_names: ClassVar[tuple[str, ...]] = ("actor",)
    training_module_names: ClassVar[tuple[str, ...]] = (
        "critic1",
        "critic2",
        "critic1_target",
        "critic2_target",
        "temperature",
    )
    optimizer_names: ClassVar[tuple[str, ...]] = (
        "actor_optimizer",
        "critic_optimizer",
        "alpha_optimizer",
    )
    target_networks: ClassVar[tuple[str, ...]] = ("critic1", "critic2")

    def make_networks(self) -> None:
        """The Gaussian actor, twin critics and their targets, the temperature, and their
        Adams (one over both critics)."""
        config = self.config
        size, hidden = self.normalizer.input_size, config.hidden_sizes
        norm = config.layer_norm
        self.actor = GaussianActor(size, hidden, self.action_size, norm)
        self.critic1 = Critic(size, hidden, self.action_size, norm)
        self.critic2 = Critic(size, hidden, self.action_size, norm)
        self.critic1_target = copy.deepcopy(self.critic1).requires_grad_(False)
        self.critic2_target = copy.deepcopy(self.critic2).requires_grad_(False)
        self.temperature = Temperature(config.initial_alpha)
        self.target_entropy = (
            -float(self.action_size) if config.target_entropy is None else config.target_entropy
        )
        self.actor_optimizer = adam(self.actor.parameters(), lr=config.actor_lr)
        self.critic_optimizer = adam(
            [*self.critic1.parameters(), *self.critic2.parameters()], lr=config.critic_lr
        )
        self.alpha_optimizer = adam(self.temperature.parameters(), lr=config.alpha_lr)

    def update(self, batch: Any) -> dict[str, torch.Tensor]:
        """One step of both critics, the actor and the temperature on a HER batch."""
        inputs = self.inputs(batch.observations)
        next_inputs = self.inputs(batch.next_observations)
        actions = self.scaled_actions(batch.actions, len(inputs))
        alpha = self.temperature().detach()
        with self.autocast():
            with torch.no_grad():
                next_actions, next_log_prob = self.actor.sample(next_inputs)
                targets = (self.critic1_target, self.critic2_target)
                next_values = twin_min(targets, next_inputs, next_actions)
                soft_values = next_values - alpha * next_log_prob
                target = self.batch_targets(batch, soft_values)
            q1, q2 = self.critic1(inputs, actions), self.critic2(inputs, actions)
            critic_loss = twin_critic_loss(q1, q2, target, getattr(batch, "weights", None))
        critics = [*self.critic1.parameters(), *self.critic2.parameters()]
        self.gradient_step(self.critic_optimizer, critic_loss, critics)

        with self.autocast():
            pi, log_prob = self.actor.sample(inputs)
            q_pi = twin_min((self.critic1, self.critic2), inputs, pi)
            actor_loss = (alpha * log_prob - q_pi).mean()
        alpha_loss = -(self.temperature.log_alpha * (log_prob.detach() + self.target_entropy))
        self.gradient_steps(
            [
                (self.actor_optimizer, actor_loss, list(self.actor.parameters())),
                (self.alpha_optimizer, alpha_loss.mean(), list(self.temperature.parameters())),
            ]
        )
        return {
            "critic_loss": critic_loss.detach(),
            "actor_loss": actor_loss.detach(),
            "alpha": alpha,
            "q_mean": q_pi.detach().mean(),
            "td_errors": (torch.minimum(q1, q2) - target).detach(),
        }

    @torch.no_grad()
    def act(self, observations: dict[str, object], explore: bool) -> np.ndarray | torch.Tensor:
        """``tanh(mean)``; exploring samples from the policy instead, with the agent's own
        :meth:`noise_generator` (not torch's global one, which the updates draw from, so
        that collection beside the updates stays reproducible). Tensor observations give a
        tensor of actions on their device."""
        inputs = self.inputs(observations)
        if explore:
            actions, _ = self.actor.sample(inputs, self.noise_generator())
        else:
            actions = torch.tanh(self.acting_module("actor", explore)(inputs)[0])
        if isinstance(observations["observation"], torch.Tensor):
            return self.env_actions(actions)
        return self.env_actions(actions.cpu().numpy())
