"""TD3+HER (Fujimoto et al. 2018) on DDPG+HER's normalizer, exploration and action scaling.

Three changes to DDPG, each against overestimation:
Twin critics:      y = clip(r + gamma * min(Q1', Q2')(s', g, a'), return range)
Target smoothing:  a' = clip(pi'(s', g) + clip(eps, -c, c), -1, 1),  eps ~ N(0, target_noise)
Delayed actor:     the actor steps once per ``policy_delay`` critic steps.
Critics:  minimize (Q1(s, g, a) - y)^2 + (Q2(s, g, a) - y)^2
Actor:    minimize -Q1(s, g, pi(s, g)) + action_l2 * mean(pi(s, g)^2)
Targets move once per cycle (``update_targets``), as DDPG+HER's.
The actor's loss is taken after the critics' step (the paper's order), so a step with the
actor all-reduces gradients twice across workers, once per network."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from goalenvs.agents.base import adam
from goalenvs.agents.config import POSITIVE_INT, at_least_zero, option
from goalenvs.agents.ddpg import DDPG, DDPGConfig
from goalenvs.agents.losses import twin_critic_loss
from goalenvs.agents.networks import Critic, twin_min


@dataclass
class TD3Config(DDPGConfig):
    """TD3+HER: DDPG+HER's settings plus twin critics, a delayed actor and target smoothing."""

    algo: ClassVar[str] = "td3"

    policy_delay: int = option(
        2, "the actor (and its loss) steps once per policy_delay critic steps", check=POSITIVE_INT
    )
    target_noise: float = option(
        0.2, "std of the noise on the target action (in [-1, 1] units)", check=at_least_zero
    )
    target_noise_clip: float = option(
        0.5, "that noise is clipped to +-target_noise_clip", check=at_least_zero
    )


class TD3(DDPG):
    """TD3+HER agent for a Box action space."""

    config: TD3Config
    last_actor_loss: torch.Tensor
    last_q_pi: torch.Tensor
    # DDPG's, plus the second critic, its target and the delay's step counter.
    training_module_names: ClassVar[tuple[str, ...]] = (
        *DDPG.training_module_names,
        "critic2",
        "critic2_target",
        "critic_steps",
    )
    target_networks: ClassVar[tuple[str, ...]] = ("actor", "critic", "critic2")

    def make_networks(self) -> None:
        """DDPG's networks, a second critic and its target; one Adam over both critics."""
        super().make_networks()
        config = self.config
        size, hidden = self.normalizer.input_size, config.hidden_sizes
        self.critic2 = Critic(size, hidden, self.action_size, config.layer_norm)
        self.critic2_target = copy.deepcopy(self.critic2).requires_grad_(False)
        self.critic_optimizer = adam(
            [*self.critic.parameters(), *self.critic2.parameters()], lr=config.critic_lr
        )
        # Counts critic steps to delay the actor; saved so a resumed run keeps the rhythm.
        self.critic_steps = StepCounter()
        # The actor's last loss and mean Q, reported by the steps without an actor step.
        self.register_buffer("last_actor_loss", torch.zeros(()), persistent=False)
        self.register_buffer("last_q_pi", torch.zeros(()), persistent=False)

    def update(self, batch: Any, actor_step: bool | None = None) -> dict[str, torch.Tensor]:
        """One step of both critics; one actor step every ``policy_delay`` calls.
        ``actor_step`` says whether this call steps the actor; None reads it from the step
        counter (:meth:`update_options` plans it ahead without reading the device)."""
        cfg = self.config
        if actor_step is None:
            actor_step = (int(self.critic_steps.count) + 1) % cfg.policy_delay == 0
        inputs = self.inputs(batch.observations)
        next_inputs = self.inputs(batch.next_observations)
        actions = self.scaled_actions(batch.actions, len(inputs))
        with self.autocast():
            with torch.no_grad():
                next_pi = self.actor_target(next_inputs)
                noise = (torch.randn_like(next_pi) * cfg.target_noise).clamp(
                    -cfg.target_noise_clip, cfg.target_noise_clip
                )
                next_actions = (next_pi + noise).clamp(-1.0, 1.0)
                targets = (self.critic_target, self.critic2_target)
                next_values = twin_min(targets, next_inputs, next_actions)
                target = self.batch_targets(batch, next_values)
            q1, q2 = self.critic(inputs, actions), self.critic2(inputs, actions)
            critic_loss = twin_critic_loss(q1, q2, target, getattr(batch, "weights", None))
        critics = [*self.critic.parameters(), *self.critic2.parameters()]
        self.gradient_step(self.critic_optimizer, critic_loss, critics)
        self.critic_steps.count.add_(1)
        # Every worker plans the same steps, so all take the actor's all-reduce together.
        if actor_step:
            with self.autocast():
                pi = self.actor(inputs)
                q_pi = self.critic(inputs, pi)
                actor_loss = -q_pi.mean() + cfg.action_l2 * pi.square().mean()
            self.gradient_step(self.actor_optimizer, actor_loss, list(self.actor.parameters()))
            self.last_actor_loss.copy_(actor_loss.detach())
            self.last_q_pi.copy_(q_pi.detach().mean())
        return {
            "critic_loss": critic_loss.detach(),
            "actor_loss": self.last_actor_loss.clone(),
            "q_mean": self.last_q_pi.clone(),
            "td_errors": (torch.minimum(q1, q2) - target).detach(),
        }

    def update_options(self, n_batches: int) -> list[dict[str, object]]:
        """Which of the next ``n_batches`` updates step the actor (one read of the counter)."""
        done, delay = int(self.critic_steps.count), self.config.policy_delay
        return [{"actor_step": (done + i + 1) % delay == 0} for i in range(n_batches)]


class StepCounter(nn.Module):
    """An integer counter that travels with the module's state dict (checkpoints, devices)."""

    count: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
