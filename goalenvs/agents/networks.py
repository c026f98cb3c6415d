"""The networks of the HER agents: plain ReLU multilayer perceptrons."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class MLP(nn.Sequential):
    """``Linear -> ReLU`` layers, then a linear output layer that computes in float32.
    Under autocast (bf16 updates, :mod:`goalenvs.agents.precision`) the hidden layers run
    in the low precision and the output layer takes their result back in float32: the
    outputs (Q-values, action means) keep float32's resolution at the cost of one small
    matrix product. Without autocast it is an ``nn.Sequential``, with the same state dict."""

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """The output ``(..., output_size)`` for inputs ``(..., input_size)``."""
        *hidden, output = self
        x = inputs
        for layer in hidden:
            x = layer(x)
        device_type = x.device.type
        if torch.is_autocast_enabled(device_type):
            with torch.autocast(device_type, enabled=False):
                return output(x.float())
        return output(x)


def mlp(
    input_size: int, hidden_sizes: Sequence[int], output_size: int, layer_norm: bool = False
) -> MLP:
    """``Linear -> ReLU`` for every hidden layer (``Linear -> LayerNorm -> ReLU`` with
    ``layer_norm``), then a linear output layer."""
    layers: list[nn.Module] = []
    size = input_size
    for hidden in hidden_sizes:
        layers.append(nn.Linear(size, hidden))
        if layer_norm:
            layers.append(nn.LayerNorm(hidden))
        # In place: the ReLU overwrites its input (which no backward needs) instead of
        # allocating another: the same numbers, one activation-sized allocation fewer per
        # layer.
        layers.append(nn.ReLU(inplace=True))
        size = hidden
    layers.append(nn.Linear(size, output_size))
    return MLP(*layers)


class Network(nn.Module):
    """A network whose ``net`` is an :func:`mlp` from ``input_size`` inputs (and the action,
    for a critic) to the outputs :meth:`sizes` gives for ``action_size``."""

    def __init__(
        self,
        input_size: int,
        hidden_sizes: Sequence[int],
        action_size: int,
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        inputs, outputs = self.sizes(input_size, action_size)
        self.net = mlp(inputs, hidden_sizes, outputs, layer_norm)

    def sizes(self, input_size: int, action_size: int) -> tuple[int, int]:
        """The MLP's input and output sizes (an actor's: one output per action dim)."""
        return input_size, action_size


class Actor(Network):
    """Deterministic policy ``pi(s, g)`` with outputs in [-1, 1] (tanh), one per action dim."""

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """Actions in [-1, 1] for normalized inputs ``(B, input_size)``."""
        return torch.tanh(self.net(inputs))


class Critic(Network):
    """Action-value ``Q(s, g, a)`` of an action scaled to [-1, 1]."""

    def sizes(self, input_size: int, action_size: int) -> tuple[int, int]:
        """The state, goal and action in; one value out."""
        return input_size + action_size, 1

    def forward(self, inputs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``(B,)`` values for inputs ``(B, input_size)`` and actions ``(B, action_size)``."""
        return self.net(torch.cat([inputs, actions], dim=-1)).squeeze(-1)


def twin_min(
    critics: tuple[Critic, Critic], inputs: torch.Tensor, actions: torch.Tensor
) -> torch.Tensor:
    """The smaller of two critics' values: twin critics' pessimistic estimate (TD3, SAC)."""
    return torch.minimum(critics[0](inputs, actions), critics[1](inputs, actions))
