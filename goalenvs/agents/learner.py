"""One training cycle's gradient steps: sample a batch, update, set replay priorities; then
the target networks move once.

Two ways to run the same :meth:`Agent.update <goalenvs.agents.base.Agent.update>`:

- eager (:class:`EagerUpdates`): each batch as the buffer samples it goes through
  ``agent.update``; on a CPU, with several workers, or for an algorithm whose update a
  graph cannot hold.
- captured (:class:`StaticUpdates`): on CUDA each batch is copied into tensors of fixed
  shapes and addresses, and ``agent.update`` on those tensors (normalization, the critic
  and actor steps, capturable Adam, the losses added up on the device) is captured once
  as a CUDA graph and replayed for every later batch: one launch per update instead of
  hundreds, and no host sync per update. The buffer's ``sample`` runs outside the graph
  (on the device where the replay buffer is there, as the plan puts it on a GPU).

Graphs are ``torch.cuda.CUDAGraph`` captures of the eager method rather than
``torch.compile``: the captured function is the readable one, nothing compiles at start,
and the launches it removes are the update's cost on a GPU (a plain-torch DDPG update of
2,048 through 3x256: 6.4 ms eager, 0.96 ms as one graph on an H100)."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable
from typing import Any, cast

import torch

from goalenvs.agents import distributed
from goalenvs.agents.base import Agent
from goalenvs.agents.config import GRAPH_MODES
from goalenvs.core import check_choice, check_positive
from goalenvs.core.types import Array
from goalenvs.her import HerBatch
from goalenvs.her.replay import ReplayBuffer

logger = logging.getLogger(__name__)

# Eager runs of each kind of update before its capture: they create the optimizers' state
# and the libraries' workspaces, which a capture must find in place (torch's CUDA graph
# notes warm up on a side stream the same way).
WARMUP_UPDATES = 3

Clock = Callable[[str], contextlib.AbstractContextManager]
_Options = tuple[tuple[str, Any], ...]


class GraphCaptureError(RuntimeError):
    """Capturing an update as a CUDA graph failed; the learner runs it eagerly instead."""


def graph_obstacle(agent: Agent) -> str | None:
    """Why ``agent``'s updates cannot run as CUDA graphs where it is, or None if they can."""
    if not type(agent).graph_safe_update:
        return f"{type(agent).__name__}.update is not marked graph_safe_update"
    workers = distributed.world_size()
    if workers > 1:
        return f"{workers} workers all-reduce every update's gradients, outside any graph"
    if agent.device.type != "cuda":
        return f"the agent is on {agent.device}, and CUDA graphs need a CUDA device"
    return None


class Learner:
    """Runs a training cycle's gradient steps for ``agent`` on batches of ``batch_size``.

    Args:
        agent: the agent to train, on its device, with any checkpoint already loaded.
        batch_size: transitions per gradient step.
        graphs: ``"auto"`` captures the updates as CUDA graphs when the agent is on a CUDA
            device, alone (one worker) and its algorithm allows it
            (:func:`graph_obstacle`); ``"on"`` insists (a ValueError says why it cannot);
            ``"off"`` runs them eagerly.
        clock: ``clock(phase)`` gives the context that times a phase (``"sample"``,
            ``"update"``), as the trainer's ``PhaseClock``; None: no timing.

    Graphs are captured again when a setting they hold or a tensor they read changed
    (:class:`StaticUpdates`); an agent moved to another device needs a new Learner."""

    def __init__(
        self, agent: Agent, batch_size: int, *, graphs: str = "auto", clock: Clock | None = None
    ) -> None:
        check_choice("graphs", graphs, GRAPH_MODES)
        check_positive("batch_size", batch_size, integer=True)
        obstacle = graph_obstacle(agent)
        if graphs == "on" and obstacle is not None:
            raise ValueError(f"graphs='on' cannot capture the updates: {obstacle}")
        self.agent = agent
        self.batch_size = int(batch_size)
        self.clock: Clock = clock if clock is not None else _untimed
        self.updates: EagerUpdates | StaticUpdates
        if graphs != "off" and obstacle is None:
            self.updates = StaticUpdates(agent, capture=True)
        else:
            self.updates = EagerUpdates(agent)

    def _run_eagerly(self, error: GraphCaptureError) -> EagerUpdates:
        """The updates from here on, after a failed capture: eager, with this cycle's loss
        sums so far carried over, and one line that says so."""
        logger.warning(
            "capturing the update as a CUDA graph failed (%s): the updates run eagerly from "
            "here; --cuda-graphs off skips the capture",
            error,
        )
        eager = EagerUpdates(self.agent)
        for name, total in self.updates.totals.items():
            eager.totals[name].copy_(total)
        self.updates = eager
        return eager

    @property
    def graphs(self) -> bool:
        """True when the updates run as captured CUDA graphs."""
        return isinstance(self.updates, StaticUpdates) and self.updates.capture

    def optimize(self, buffer: ReplayBuffer, n_batches: int) -> dict[str, torch.Tensor]:
        """``n_batches`` times: sample ``batch_size`` transitions from ``buffer``, update
        the agent on them, and set their replay priorities when ``buffer.prioritized`` by TD error;
        then the target networks move once, and the averaged acting networks once.
        Returns the mean of each of the agent's ``loss_names`` over the batches, as 0-dim
        tensors on the agent's device (read them once per cycle: each read waits for the
        device)."""
        check_positive("n_batches", n_batches, integer=True)
        agent, clock, updates = self.agent, self.clock, self.updates
        # TD errors set the priorities of a buffer prioritized by them (goal-motion
        # priorities are set as episodes end).
        prioritized = bool(getattr(buffer, "prioritized", False)) and (
            getattr(buffer, "priority", "td_error") == "td_error"
        )
        updates.begin()
        for options in agent.update_options(n_batches):
            with clock("sample"):
                batch = updates.sample(buffer, self.batch_size)
            with clock("update"):
                try:
                    td_errors = updates.step(batch, options)
                except GraphCaptureError as error:
                    updates = self._run_eagerly(error)
                    td_errors = updates.step(updates.sample(buffer, self.batch_size), options)
            if prioritized:
                with clock("sample"):
                    buffer.update_priorities(batch.indices, td_errors)
        with clock("update"):
            agent.update_targets()
            agent.update_averages()
            updates.end()
        return {name: total / n_batches for name, total in updates.totals.items()}


def _untimed(phase: str) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()


def _set_capturable(agent: Agent, capturable: bool) -> None:
    """Puts every optimizer of ``agent`` in the mode its updates need: ``capturable`` Adam
    keeps its step counts on the parameters' device (a graph increments them there)."""
    for name in agent.optimizer_names:
        optimizer: torch.optim.Optimizer = getattr(agent, name)
        for group in optimizer.param_groups:
            if "capturable" not in group:
                continue
            group["capturable"] = capturable
            for parameter in group["params"]:
                state = optimizer.state.get(parameter, {})
                step = state.get("step")
                if isinstance(step, torch.Tensor):
                    where = parameter.device if capturable else torch.device("cpu")
                    state["step"] = step.to(where, torch.float32)


class EagerUpdates:
    """``agent.update`` on each batch as sampled; the losses added up on the device."""

    capture = False

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        _set_capturable(agent, False)
        device = agent.device
        self.totals = {name: torch.zeros((), device=device) for name in agent.loss_names}

    def begin(self) -> None:
        """Starts a cycle: the loss sums back to zero, the optimizers in eager mode (a
        checkpoint loaded since may have brought capturable ones)."""
        for total in self.totals.values():
            total.zero_()
        _set_capturable(self.agent, False)

    def end(self) -> None:
        """Ends a cycle (nothing to do)."""

    def sample(self, buffer: ReplayBuffer, batch_size: int) -> HerBatch:
        """A batch from ``buffer`` as tensors on the agent's device."""
        return buffer.sample(batch_size, device=self.agent.device)

    def step(self, batch: HerBatch, options: dict[str, Any]) -> torch.Tensor:
        """One update on ``batch``; returns its per-sample TD errors."""
        out = self.agent.update(batch, **options)
        for name, total in self.totals.items():
            total.add_(out[name])
        return out["td_errors"]


class StaticUpdates(EagerUpdates):
    """``agent.update`` on static input tensors, each batch copied into them first; with
    ``capture`` each kind of update (each set of options) becomes a CUDA graph after
    :data:`WARMUP_UPDATES` eager runs on a side stream, replayed from then on; without it
    every update runs eagerly on the same tensors (the path the CPU tests hold to
    :class:`EagerUpdates`' numbers). A graph holds the agent's settings at its capture (the
    return range, the learning rates) and reads its tensors at the addresses they had: the
    graphs are captured again when a setting changed or a tensor was replaced (a
    checkpoint's optimizer state loaded)."""

    def __init__(self, agent: Agent, *, capture: bool) -> None:
        super().__init__(agent)
        self.capture = capture
        self._static: list[torch.Tensor | None] | None = None
        self._inputs: HerBatch | None = None
        self._shapes: list[tuple[int, ...] | None] = []
        # options -> (graph, its td_errors) once captured, or the eager runs made so far
        self._graphs: dict[_Options, Any] = {}
        self._fingerprint: tuple | None = None

    def begin(self) -> None:
        for total in self.totals.values():
            total.zero_()
        if self._graphs and self._state_fingerprint() != self._fingerprint:
            self._graphs.clear()
        if not self._graphs:  # before a capture, the optimizers made capturable
            _set_capturable(self.agent, self.capture)

    def end(self) -> None:
        self._fingerprint = self._state_fingerprint() if self.capture else None

    def sample(self, buffer: ReplayBuffer, batch_size: int) -> HerBatch:
        """A batch where ``buffer`` samples (host arrays or device tensors)."""
        return buffer.sample(batch_size)

    def step(self, batch: HerBatch, options: dict[str, Any]) -> torch.Tensor:
        """Copies ``batch`` into the static inputs and runs one update on them (a graph's
        replay once captured); the TD errors it returns, the next step overwrites."""
        fields = _batch_fields(batch)
        shapes = [None if value is None else tuple(value.shape) for value in fields]
        if self._static is None:
            self._static = [_empty_like(value, self.agent.device) for value in fields]
            self._inputs, self._shapes = _batch_from_fields(batch, self._static), shapes
        for got, first in zip(shapes, self._shapes, strict=True):
            if got != first:
                raise ValueError(
                    f"a batch field has shape {got}, the static input {first}: every batch "
                    "must have the first one's shapes"
                )
        # Host arrays go to a GPU through pinned memory (torch's caching host allocator
        # keeps each block until its copy is done), so the copies run beside the host.
        pin = self.agent.device.type == "cuda"
        for static, value in zip(self._static, fields, strict=True):
            if static is not None:
                source = torch.as_tensor(value)
                if pin and source.device.type == "cpu":
                    source = source.pin_memory()
                static.copy_(source, non_blocking=True)
        inputs = cast(HerBatch, self._inputs)
        if not self.capture:
            return super().step(inputs, options)
        key = tuple(sorted(options.items()))
        runs = self._graphs.get(key, 0)
        if isinstance(runs, int) and runs < WARMUP_UPDATES:
            self._graphs[key] = runs + 1
            device = self.agent.device
            side, main = torch.cuda.Stream(device), torch.cuda.current_stream(device)
            side.wait_stream(main)  # warm-ups on a side stream, as torch's notes do
            with torch.cuda.stream(side), warnings.catch_warnings():
                warnings.filterwarnings("ignore", "This instance was constructed with capturable")
                td_errors = super().step(inputs, options)
            main.wait_stream(side)
            return td_errors
        if isinstance(runs, int):
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    self._graphs[key] = (graph, super().step(inputs, options))
            except RuntimeError as error:  # an op the capture cannot hold, a driver limit
                raise GraphCaptureError(str(error).splitlines()[0]) from error
        graph, td_errors = self._graphs[key]
        graph.replay()
        return td_errors

    def _state_fingerprint(self) -> tuple:
        """Where every tensor a graph reads lives, and the settings it holds."""
        agent, rates = self.agent, []
        tensors = [*agent.parameters(), *agent.buffers()]
        for name in agent.optimizer_names:
            optimizer: torch.optim.Optimizer = getattr(agent, name)
            for state in optimizer.state.values():
                tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
            rates += [float(group["lr"]) for group in optimizer.param_groups]
        pointers = tuple(tensor.data_ptr() for tensor in tensors)
        return pointers, agent.clip_low, agent.clip_high, tuple(rates)


def _empty_like(value: Array | None, device: torch.device) -> torch.Tensor | None:
    """An uninitialized tensor on ``device`` of ``value``'s shape and dtype."""
    return None if value is None else torch.empty_like(torch.as_tensor(value), device=device)


def _batch_fields(batch: HerBatch) -> list[Array | None]:
    """The update's inputs of a HER batch in a fixed order: observations (by key),
    actions, rewards, next observations, dones, weights, discounts (None where absent)."""
    return [
        *(batch.observations[key] for key in sorted(batch.observations)),
        batch.actions,
        batch.rewards,
        *(batch.next_observations[key] for key in sorted(batch.next_observations)),
        batch.dones,
        getattr(batch, "weights", None),
        getattr(batch, "discounts", None),
    ]


def _batch_from_fields(batch: HerBatch, fields: list[torch.Tensor | None]) -> HerBatch:
    """A :class:`HerBatch` of ``fields`` laid out as :func:`_batch_fields` reads ``batch``
    (no indices: the update does not read them)."""
    values = iter(fields)
    observations = {key: next(values) for key in sorted(batch.observations)}
    actions, rewards = next(values), next(values)
    next_observations = {key: next(values) for key in sorted(batch.next_observations)}
    dones, weights, discounts = next(values), next(values), next(values)
    return HerBatch(
        observations, actions, rewards, next_observations, dones, weights, None, discounts
    )
