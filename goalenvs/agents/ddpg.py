"""DDPG+HER (Plappert et al. 2018; OpenAI baselines' ``her/ddpg.py``).

Critic:  minimize (Q(s, g, a) - y)^2,  y = clip(r + gamma * Q'(s', g, pi'(s', g)), -1/(1-gamma), 0)
Actor:   minimize -Q(s, g, pi(s, g)) + action_l2 * mean(pi(s, g)^2)
Targets: theta' <- polyak * theta' + (1 - polyak) * theta, once per cycle.
Actions are handled in [-1, 1] and mapped affinely onto the env's Box bounds."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from goalenvs.agents.base import BoxAgent, adam
from goalenvs.agents.config import FRACTION, POSITIVE, TrainConfig, at_least_zero, option
from goalenvs.agents.losses import weighted_mean
from goalenvs.agents.networks import Actor, Critic


@dataclass
class DDPGConfig(TrainConfig):
    """DDPG+HER for continuous (Box) actions, with OpenAI baselines' defaults."""

    algo: ClassVar[str] = "ddpg"

    actor_lr: float = option(
        1e-3, "Adam step size of the policy (baselines' pi_lr)", check=POSITIVE
    )
    critic_lr: float = option(
        1e-3, "Adam step size of the Q-function (baselines' Q_lr)", check=POSITIVE
    )
    action_l2: float = option(
        1.0, "weight of the squared (scaled) action penalty in the actor loss", check=at_least_zero
    )
    random_eps: float = option(
        0.3, "probability of a uniformly random action while collecting", check=FRACTION
    )
    noise_eps: float = option(
        0.2, "std of the Gaussian action noise, on actions scaled to [-1, 1]", check=at_least_zero
    )


class DDPG(BoxAgent):
    """DDPG+HER agent for a Box action space."""

    config: DDPGConfig
    graph_safe_update: ClassVar[bool] = True
    loss_names: ClassVar[tuple[str, ...]] = ("critic_loss", "actor_loss", "q_mean")
    policy_module_names: ClassVar[tuple[str, ...]] = ("actor",)
    training_module_names: ClassVar[tuple[str, ...]] = ("critic", "actor_target", "critic_target")
    optimizer_names: ClassVar[tuple[str, ...]] = ("actor_optimizer", "critic_optimizer")
    target_networks: ClassVar[tuple[str, ...]] = ("actor", "critic")

    def make_networks(self) -> None:
        """Actor, critic, their targets and one Adam per network."""
        config = self.config
        size, hidden = self.normalizer.input_size, config.hidden_sizes
        self.actor = Actor(size, hidden, self.action_size, config.layer_norm)
        self.critic = Critic(size, hidden, self.action_size, config.layer_norm)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_optimizer = adam(self.actor.parameters(), lr=config.actor_lr)
        self.critic_optimizer = adam(self.critic.parameters(), lr=config.critic_lr)

    def update(self, batch: Any) -> dict[str, torch.Tensor]:
        """One critic step and one actor step on a HER batch."""
        inputs = self.inputs(batch.observations)
        next_inputs = self.inputs(batch.next_observations)
        actions = self.scaled_actions(batch.actions, len(inputs))
        with self.autocast():
            with torch.no_grad():
                next_values = self.critic_target(next_inputs, self.actor_target(next_inputs))
                target = self.batch_targets(batch, next_values)
            td_errors = self.critic(inputs, actions) - target
            critic_loss = weighted_mean(td_errors.square(), getattr(batch, "weights", None))
            pi = self.actor(inputs)
            q_pi = self.critic(inputs, pi)
            actor_loss = -q_pi.mean() + self.config.action_l2 * pi.square().mean()
        # As baselines, both gradients are taken at the same (pre-step) parameters; the
        # actor's loss differentiates through the critic but only the actor's are kept.
        self.gradient_steps(
            [
                (self.critic_optimizer, critic_loss, list(self.critic.parameters())),
                (self.actor_optimizer, actor_loss, list(self.actor.parameters())),
            ]
        )
        return {
            "critic_loss": critic_loss.detach(),
            "actor_loss": actor_loss.detach(),
            "q_mean": q_pi.detach().mean(),
            "td_errors": td_errors.detach(),
        }

    @torch.no_grad()
    def act(self, observations: dict[str, object], explore: bool) -> np.ndarray | torch.Tensor:
        """Deterministic ``pi(s, g)`` (by the averaged actor with ``policy_average``);
        exploring adds Gaussian noise and random actions to the trained actor's.
        Tensor observations give a tensor of actions, explored on their device."""
        actions = self.acting_module("actor", explore)(self.inputs(observations))
        if isinstance(observations["observation"], torch.Tensor):
            if explore:
                actions = self._explore_tensor(actions)
            return self.env_actions(actions)
        actions = actions.cpu().numpy()
        if explore:
            cfg = self.config
            actions = actions + cfg.noise_eps * self.rng.standard_normal(actions.shape)
            actions = np.clip(actions, -1.0, 1.0)
            random = self.rng.uniform(-1.0, 1.0, actions.shape)
            pick = self.rng.random(len(actions)) < cfg.random_eps
            actions[pick] = random[pick]
        return self.env_actions(actions)

    def _explore_tensor(self, actions: torch.Tensor) -> torch.Tensor:
        """``act``'s exploration on the device: the same noise and random actions, drawn
        from :meth:`noise_generator`."""
        cfg, generator = self.config, self.noise_generator()
        shape, device = actions.shape, actions.device
        noise = torch.randn(shape, generator=generator, device=device)
        actions = (actions + cfg.noise_eps * noise).clamp(-1.0, 1.0)
        random = torch.rand(shape, generator=generator, device=device) * 2.0 - 1.0
        pick = torch.rand(shape[0], generator=generator, device=device) < cfg.random_eps
        return torch.where(pick[:, None], random, actions)
