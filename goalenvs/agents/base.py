"""What DDPG+HER and DQN+HER share: input normalization, targets, acting, state.

An agent is an ``nn.Module`` whose ``policy_modules`` (the normalizer and the acting
network) are all a saved policy needs, and whose ``training_modules`` add what resuming
a run needs (critics, target networks, optimizers). An algorithm's file names them in
``policy_module_names``, ``training_module_names`` and ``optimizer_names`` and builds them in
:meth:`Agent.make_networks`; the constructor is this module's.

:meth:`Agent.update` is one gradient step written as the equations read; the
:class:`goalenvs.agents.learner.Learner` runs a cycle of them, on CUDA as captured graphs
of that same method."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from goalenvs.agents import distributed, precision
from goalenvs.agents.config import TrainConfig
from goalenvs.agents.normalizer import GoalNormalizer
from goalenvs.core import GOAL_KEYS
from goalenvs.her.common import HerBatch


def flat_size(space: spaces.Space) -> int:
    """Number of scalars in one sample of ``space``."""
    return int(np.prod(space.shape)) if space.shape else 1


def adam(parameters: Iterable[nn.Parameter], lr: float) -> torch.optim.Adam:
    """The agents' Adam: the multi-tensor implementation on every device (torch's default
    on CUDA; on a CPU the same numbers as the per-tensor loop, with less Python per step)."""
    return torch.optim.Adam(parameters, lr=lr, foreach=True)


class Agent(nn.Module):
    """Base of the HER agents: the normalizer, the discount and target clipping (the module
    docstring says what a subclass declares); a subclass is registered in
    :data:`goalenvs.agents.registry.ALGOS`."""

    config: TrainConfig
    # the keys of the dict update() returns, which the trainer logs in that order
    loss_names: ClassVar[tuple[str, ...]] = ()
    # True when update() on tensors of fixed shapes reads no tensor on the host and branches
    # on no tensor's value, so the Learner may capture it: what varies between its steps
    # comes in as the options update_options plans ahead, one cycle at a time.
    graph_safe_update: ClassVar[bool] = False
    # Attributes a saved policy holds besides the normalizer (the acting network).
    policy_module_names: ClassVar[tuple[str, ...]] = ()
    # Attributes resuming training needs besides those: networks (critics, targets) ...
    training_module_names: ClassVar[tuple[str, ...]] = ()
    # ... and optimizers.
    optimizer_names: ClassVar[tuple[str, ...]] = ()
    # The online networks whose ``<name>_target`` copies update_targets moves.
    target_networks: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        config: TrainConfig,
        gamma: float,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.action_space = action_space
        self.gamma = float(gamma)
        # Bellman targets are not clipped until set_return_range gives the range: the run's
        # plan decides it once, from clip_return, clip_range and the env's rewards.
        self.clip_low, self.clip_high = -float("inf"), float("inf")
        self.normalizer = GoalNormalizer(
            flat_size(observation_space["observation"]),
            flat_size(observation_space["desired_goal"]),
            eps=config.norm_eps,
            clip=config.norm_clip,
            clip_obs=config.clip_obs,
        )
        self.rng = np.random.default_rng(seed)
        # Exploration of tensor observations draws on their device (see noise_generator).
        self._noise_seed = int(np.random.SeedSequence(seed).generate_state(1)[0])
        self._noise_generator: torch.Generator | None = None
        self.prepare_actions(action_space)
        self.make_networks()
        # config.policy_average: an averaged copy of each acting network ("actor" ->
        # "actor_average"), what deterministic acting uses while acting_average is True.
        self.average_names: tuple[str, ...] = ()
        self.acting_average = config.policy_average > 0
        if config.policy_average > 0:
            self.average_names = tuple(f"{name}_average" for name in self.policy_module_names)
            for name, average in zip(self.policy_module_names, self.average_names, strict=True):
                setattr(self, average, copy.deepcopy(getattr(self, name)).requires_grad_(False))

    def prepare_actions(self, action_space: spaces.Space) -> None:
        """Reads what the networks need of ``action_space`` (nothing by default)."""

    def make_networks(self) -> None:
        """Builds the algorithm's networks and optimizers from ``self.config`` (none by
        default)."""

    def gradient_steps(
        self, steps: Sequence[tuple[torch.optim.Optimizer, torch.Tensor, list[nn.Parameter]]]
    ) -> None:
        """One step of each ``(optimizer, loss, parameters)``: every loss's gradients reach
        its parameters only, all taken before any step, and averaged over workers in one
        all-reduce."""
        for optimizer, _, _ in steps:
            optimizer.zero_grad(set_to_none=True)
        for _, loss, parameters in steps:
            loss.backward(inputs=parameters)
        distributed.average_gradients([p for _, _, parameters in steps for p in parameters])
        for optimizer, _, _ in steps:
            optimizer.step()

    def gradient_step(
        self, optimizer: torch.optim.Optimizer, loss: torch.Tensor, parameters: list[nn.Parameter]
    ) -> None:
        """One optimizer step of ``loss`` on ``parameters`` (:meth:`gradient_steps` of one)."""
        self.gradient_steps([(optimizer, loss, parameters)])

    def autocast(self) -> contextlib.AbstractContextManager:
        """The context an update's forward passes run in: bf16 autocast or none, as
        ``config.precision`` resolves on the agent's device (:mod:`goalenvs.agents.precision`)."""
        return precision.update_autocast(self.config.precision, self.device)

    def set_return_range(self, low: float, high: float) -> None:
        """Bellman targets are clipped to ``[low, high]`` from now on (infinite: no clip)."""
        self.clip_low, self.clip_high = float(low), float(high)

    @property
    def device(self) -> torch.device:
        """Where the agent's tensors live."""
        return self.normalizer.obs.mean.device

    def noise_generator(self) -> torch.Generator:
        """The torch generator that explores on the agent's device (tensor observations),
        seeded from the agent's seed; numpy observations explore with ``self.rng``."""
        generator = self._noise_generator
        if generator is None or generator.device != self.device:
            generator = torch.Generator(self.device)
            generator.manual_seed(self._noise_seed)
            self._noise_generator = generator
        return generator

    def inputs(self, observations: dict[str, Any]) -> torch.Tensor:
        """Normalized network inputs from a batched observation dict (arrays or tensors)."""
        return self.normalizer({key: self.as_float(observations[key]) for key in GOAL_KEYS})

    def as_float(self, value: Any) -> torch.Tensor:
        """``value`` (an array or a tensor) as a float32 tensor on the agent's device."""
        if isinstance(value, torch.Tensor):
            return value.to(self.device, torch.float32)
        return torch.as_tensor(np.asarray(value, dtype=np.float32), device=self.device)

    def targets(
        self,
        rewards: torch.Tensor,
        dones: torch.Tensor,
        next_values: torch.Tensor,
        discounts: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Bellman targets ``r + gamma * (1 - done) * Q'``, clipped to the return range;
        an n-step batch's ``discounts`` (``gamma ** m`` per transition) take ``gamma``'s
        place."""
        discount = self.gamma if discounts is None else discounts.to(next_values.dtype)
        target = rewards + discount * (1.0 - dones) * next_values
        return target.clamp(self.clip_low, self.clip_high)

    def batch_targets(self, batch: Any, next_values: torch.Tensor) -> torch.Tensor:
        """:meth:`targets` of a HER batch (its n-step ``discounts`` where it has them)."""
        discounts = getattr(batch, "discounts", None)
        return self.targets(batch.rewards, batch.dones, next_values, discounts)

    @torch.no_grad()
    def soft_update(self, target: nn.Module, online: nn.Module, keep: float | None = None) -> None:
        """``target <- keep * target + (1 - keep) * online``, every tensor in one call;
        ``keep`` defaults to ``config.polyak``."""
        keep = self.config.polyak if keep is None else keep
        targets: list[torch.Tensor] = list(target.parameters())
        onlines: list[torch.Tensor] = list(online.parameters())
        if len(targets) != len(onlines):
            raise ValueError(f"{len(targets)} target parameters for {len(onlines)} online ones")
        torch._foreach_lerp_(targets, onlines, 1.0 - keep)

    def update_averages(self) -> None:
        """Moves each averaged acting network ``1 - config.policy_average`` of the way to
        the trained one (nothing when ``policy_average`` is 0); the learner calls it after
        each cycle's updates."""
        keep = self.config.policy_average
        for name, average in zip(self.policy_module_names, self.average_names, strict=False):
            self.soft_update(getattr(self, average), getattr(self, name), keep)

    def acting_module(self, name: str, explore: bool) -> nn.Module:
        """The network ``act`` uses for the policy module ``name``: its average when acting
        deterministically with ``config.policy_average`` set (see :meth:`online_acting`),
        else the trained network itself."""
        if self.average_names and self.acting_average and not explore:
            return getattr(self, f"{name}_average")
        return getattr(self, name)

    @contextlib.contextmanager
    def online_acting(self) -> Iterator[None]:
        """Within it, deterministic acting uses the trained networks, not their averages
        (the trainer's evaluation of the policy itself beside its average)."""
        before, self.acting_average = self.acting_average, False
        try:
            yield
        finally:
            self.acting_average = before

    def act(self, observations: dict[str, Any], explore: bool) -> np.ndarray | torch.Tensor:
        """Actions for a batch of observations; ``explore`` adds the training exploration.
        Arrays in, an array out; tensors in (a device twin's), a tensor on the agent's
        device out, drawn there with no host copy."""
        raise NotImplementedError

    def update(self, batch: HerBatch) -> dict[str, torch.Tensor]:
        """One gradient step on a HER batch; returns the losses as (detached) tensors, and
        the per-sample TD errors under ``"td_errors"`` (new replay priorities)."""
        raise NotImplementedError

    def update_options(self, n_batches: int) -> list[dict[str, object]]:
        """The keyword options of the next ``n_batches`` calls of :meth:`update` (none by
        default): an algorithm whose steps differ (TD3's delayed actor) plans them here,
        so a captured update needs no host read per step."""
        return [{} for _ in range(n_batches)]

    def update_targets(self) -> None:
        """Polyak-averages each of ``target_networks``' targets towards it."""
        for name in self.target_networks:
            self.soft_update(getattr(self, f"{name}_target"), getattr(self, name))

    def policy_modules(self) -> dict[str, nn.Module]:
        """The modules a saved policy needs to act: the normalizer,
        ``policy_module_names`` and, with ``config.policy_average``, their averages."""
        names = (*self.policy_module_names, *self.average_names)
        named = {name: getattr(self, name) for name in names}
        return {"normalizer": self.normalizer, **named}

    def training_modules(self) -> dict[str, Any]:
        """Everything else resuming training needs: ``training_module_names`` (modules),
        then ``optimizer_names``."""
        names = (*self.training_module_names, *self.optimizer_names)
        return {name: getattr(self, name) for name in names}


class BoxAgent(Agent):
    """An agent for Box actions: its networks act in [-1, 1], mapped affinely onto the
    env's bounds (``action_scale``, ``action_bias``)."""

    action_space: spaces.Box
    action_scale: torch.Tensor
    action_bias: torch.Tensor

    def prepare_actions(self, action_space: spaces.Space) -> None:
        """The action size and the affine map from [-1, 1] onto the Box's bounds."""
        if not isinstance(action_space, spaces.Box):
            raise TypeError(
                f"{type(self).__name__} needs a Box action space, got action_space={action_space}"
            )
        self.action_size = flat_size(action_space)
        low = np.asarray(action_space.low, dtype=np.float32).reshape(-1)
        high = np.asarray(action_space.high, dtype=np.float32).reshape(-1)
        self.register_buffer("action_scale", torch.from_numpy((high - low) / 2.0))
        self.register_buffer("action_bias", torch.from_numpy((high + low) / 2.0))

    def scaled_actions(self, actions: torch.Tensor, batch_size: int) -> torch.Tensor:
        """Stored env actions ``(B, ...)`` as float32 ``(B, A)`` in the networks' [-1, 1]."""
        # Stored actions keep the env's dtype (float64 Boxes too); the networks are float32.
        actions = actions.reshape(batch_size, -1).to(self.action_scale.device, torch.float32)
        return (actions - self.action_bias) / self.action_scale

    def env_actions(self, actions: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
        """Network actions ``(B, A)`` in [-1, 1] as env actions of the space's shape: an
        array of the space's dtype, or for a tensor a float32 tensor on its device."""
        if isinstance(actions, torch.Tensor):
            actions = actions * self.action_scale + self.action_bias
            return actions.reshape(-1, *self.action_space.shape)
        scale, bias = self.action_scale.cpu().numpy(), self.action_bias.cpu().numpy()
        env_units = actions * scale + bias
        return env_units.astype(self.action_space.dtype).reshape(-1, *self.action_space.shape)
