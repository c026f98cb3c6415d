"""A run's plan: every choice ``goalenvs train`` makes for the machine it runs on, worked
out once, before any part of the run is built.

:func:`make_plan` turns the config, the machine and one look at the env (:func:`look_at`:
its :class:`EnvFacts`, which the plan keeps) into a frozen :class:`RunPlan`: where the
networks, the envs and the replay buffer are, the episode length, rollout length,
discount and target clip, the env workers and overlap, the update's precision and CUDA
graphs, each with why when the config left it to the machine. The CLI prints it,
config.json records it (the facts aside), and the
:class:`~goalenvs.train.trainer.Trainer` builds its parts from it alone.

A resume follows the recorded plan (:func:`follow_recorded`) where the config leaves a
choice to the machine. Where this machine cannot give it the run is refused in one line
naming what was recorded, what this machine gives and the flag that accepts the change;
where it can, only slower, it says so and goes on."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from goalenvs.agents.config import TrainConfig
from goalenvs.agents.precision import cpu_has_bf16, uses_bf16
from goalenvs.agents.registry import get_algo
from goalenvs.checker.preflight import Preflight, preflight
from goalenvs.core import episode_length
from goalenvs.core.types import GoalFunction
from goalenvs.envspec import env_spec
from goalenvs.train.env_workers import worker_problem
from goalenvs.train.envs import (
    device_twin_problem,
    goal_function,
    observation_dtype_note,
    probe_rewards,
    return_range,
    scalar_info_keys,
)
from goalenvs.train.machine import (
    WORKERS_PER_CORE,
    check_env_workers,
    default_env_workers,
    describe_machine,
    eval_env_workers,
    measure_step_seconds,
    usable_cores,
)


class PreflightError(ValueError):
    """The env failed a check the trainer cannot survive (one line: check, finding, fix)."""


class PlanError(ValueError):
    """The recorded plan of a resumed run asks what this machine cannot give."""


@dataclass(frozen=True)
class EnvFacts:
    """What the run knows of its env, asked once (:func:`look_at`): the plan decides from
    it, and the trainer builds its parts from it."""

    observation_space: spaces.Dict  # a goal Dict (validate_training_env checked it)
    action_space: spaces.Space
    declared_length: int | None  # the time limit the env declares (None: none)
    episode_length: int | None  # declared, else where the pre-training checks saw it end
    info_keys: tuple[str, ...]  # the config's, else the env's scalar info entries
    compute_reward: GoalFunction | None  # batched (None: the env has none)
    has_compute_terminated: bool
    native_twin: bool  # a native vector twin steps every env in one call
    twin_problem: str | None  # why it cannot run as a torch twin on a device (None: it can)
    step_seconds: float | None  # one step timed (only where it picks the env workers)
    reward_range: tuple[float, float] | None  # declared finite, else probed; None: not needed
    reward_declared: bool  # reward_range is the env's declared one (not a probe's)
    preflight_seconds: float | None  # what the pre-training checks cost (None: skipped)


@dataclass(frozen=True)
class RunPlan:
    """Every resolved choice of one run (worker ``rank`` of ``world``), and the facts of
    the env they were made from."""

    facts: EnvFacts = field(repr=False, compare=False)  # not recorded: the env tells it again
    device: str  # where the networks train ("cpu", "cuda:0")
    rank: int  # this worker (0: the one that writes the run folder)
    world: int  # workers of the run (torchrun)
    episode_length: int | None  # the env's time limit (None: it declares none)
    rollout_steps: int  # steps of every env per cycle
    gamma: float  # the discount
    clip_range: tuple[float, float] | None  # where Bellman targets are clipped (None: not)
    info_keys: tuple[str, ...]  # info entries stored for compute_reward
    env_device: str  # "numpy" (numpy envs on the host) or "device" (torch twins there)
    replay_device: str  # "host" (numpy) or "device" (torch, on ``device``)
    env_workers: int  # processes stepping the training envs (1: the trainer's own)
    eval_workers: int  # processes stepping the eval envs beside them (1: the trainer's own)
    step_seconds: float | None  # one env step as the probe timed it (None: not timed)
    overlap: bool  # collection runs beside the updates
    precision: str  # "bf16" (autocast) or "fp32"
    cuda_graphs: bool  # the updates run as captured CUDA graphs
    torch_threads: int  # torch's intra-op threads
    machine: dict[str, object] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # why, for each choice the config left to the machine
    preflight_seconds: float | None = None  # what the pre-training checks cost

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values (``config.json``'s ``plan``), the env's facts left out."""
        fields = [f.name for f in dataclasses.fields(self) if f.name != "facts"]
        data = {name: getattr(self, name) for name in fields}
        data["clip_range"] = None if self.clip_range is None else list(self.clip_range)
        data["info_keys"] = list(self.info_keys)
        data["notes"] = list(self.notes)
        return data

    def lines(self) -> list[str]:
        """The plan as ``goalenvs train`` prints it: a few short lines."""
        workers = f", worker {self.rank} of {self.world}" if self.world > 1 else ""
        length = "none declared" if self.episode_length is None else f"{self.episode_length}"
        low, high = self.clip_range or (0, 0)
        clip = "off" if self.clip_range is None else f"[{low:g}, {high:g}]"
        envs = "torch twins on the device" if self.env_device == "device" else "numpy"
        where = f"in {self.env_workers} worker processes"
        where = "in the trainer's process" if self.env_workers == 1 else where
        timed = "" if self.step_seconds is None else f" (a step {1e6 * self.step_seconds:.0f} us)"
        # the eval pool lives as long as the training one: a run holds both
        evaluation = f", eval envs in {self.eval_workers} more processes"
        evaluation = "" if self.eval_workers == 1 else evaluation
        replay = "in host memory" if self.replay_device == "host" else f"on {self.device}"
        machine = self.machine
        cores, total = machine.get("cores", "?"), machine.get("cores_total")
        counted = f"{cores} cores" if total in (None, cores) else f"{cores} of {total} cores usable"
        cpu = f"{machine.get('cpu', '?')}, {counted}"
        return [
            f"plan: networks on {self.device}{workers}, {self.precision} updates, CUDA graphs "
            f"{'on' if self.cuda_graphs else 'off'}, {self.torch_threads} torch threads; "
            f"machine: {cpu}, torch {machine.get('torch', '?')}",
            f"plan: episode length {length}, rollout {self.rollout_steps} steps, gamma "
            f"{self.gamma:.4g}, targets clipped {clip}",
            f"plan: envs {envs} {where}{timed}{evaluation}, overlap "
            f"{'on' if self.overlap else 'off'}; replay buffer {replay}",
        ]


def follow_recorded(config: TrainConfig, recorded: dict[str, object] | None) -> TrainConfig:
    """``config`` of a resumed run with every choice it leaves to the machine (``auto``,
    None) set to what the run recorded. A flag given at the resume is kept; a device other
    than the recorded one leaves the choices that depend on it to the machine again."""
    if not recorded:
        return config
    device = str(recorded.get("device", "cpu")).split(":")[0]
    moved = config.device not in ("auto", device)
    kept = ("env_device", "replay_device", "env_workers", "overlap", "precision")
    values: dict[str, object] = {"device": device, **{name: recorded.get(name) for name in kept}}
    values["cuda_graphs"] = "on" if recorded.get("cuda_graphs") else "off"
    follows: dict[str, Any] = {
        name: value
        for name, value in values.items()
        if value is not None
        and getattr(config, name) == TrainConfig.__dataclass_fields__[name].default
        and not (moved and name in ("env_device", "replay_device", "cuda_graphs"))
    }
    return dataclasses.replace(config, **follows) if follows else config


def check_device(config: TrainConfig, recorded: dict[str, object] | None) -> str:
    """``config.device``, or a :class:`PlanError` when a resumed run recorded a CUDA device
    and this machine has none."""
    if recorded and config.device == "cuda" and not torch.cuda.is_available():
        raise PlanError(
            f"the run was recorded on device {recorded.get('device')}; this machine gives no "
            "CUDA device (torch sees none); --device cpu accepts the change"
        )
    return config.device


def check_recorded(config: TrainConfig, recorded: dict[str, object] | None) -> list[str]:
    """A :class:`PlanError` when this machine cannot give what a resumed run's recorded
    plan asks; one line for each change it can give, only slower."""
    if not recorded:
        return []
    notes = []
    cores = usable_cores()
    workers = config.env_workers
    if workers is not None and workers > WORKERS_PER_CORE * cores:
        raise PlanError(
            f"the run was recorded with {workers} env workers; this machine's {cores} cores "
            f"carry at most {WORKERS_PER_CORE * cores}; --env-workers N accepts the change"
        )
    if workers is not None and workers > cores and workers != recorded.get("env_workers"):
        notes.append(f"{workers} env workers share this machine's {cores} cores")
    on_cpu = config.device == "cpu" or (config.device == "auto" and not torch.cuda.is_available())
    if config.precision == "bf16" and on_cpu and not cpu_has_bf16():
        notes.append(
            "the run was recorded in bf16; this CPU has no bfloat16 instructions, so bf16 runs "
            "emulated, slower, with the same numbers (--precision fp32 changes the arithmetic)"
        )
    return notes


def look_at(config: TrainConfig, env: gym.Env, notes: list[str]) -> EnvFacts:
    """One look at ``env`` (stepped, not closed): the pre-training checks (an error is a
    :class:`PreflightError`), its spaces, observation dtypes, episode length, info keys
    and goal functions, a timed step where the env workers are left to the machine, and
    its reward range where the targets are clipped; each finding worth a line goes to
    ``notes``."""
    checked: Preflight | None = None
    if config.preflight:  # an error stops the run here, before any run folder
        needs_length = config.rollout_steps is None or config.gamma is None
        checked = preflight(env, seed=config.seed, needs_length=needs_length)
        if not checked.ok:
            raise PreflightError(checked.error_line(config.env_id))
        notes.extend(checked.notes)
        if checked.episode_length is not None and config.max_episode_steps is None:
            notes.append(
                f"the episode length is taken as {checked.episode_length} steps, where "
                f"{config.env_id} truncated its episodes (--max-episode-steps sets it)"
            )
    dtype_note = observation_dtype_note(env, config.env_id, config.seed)
    if dtype_note is not None:
        notes.append(dtype_note)
    declared_length = episode_length(env)
    seen = None if checked is None else checked.episode_length
    horizon = declared_length if declared_length is not None else seen
    native_twin = env_spec(config.env_id).vector_entry_point is not None
    timed = config.env_workers is None and not native_twin
    step_seconds = measure_step_seconds(env, seed=config.seed) if timed else None
    info_keys = config.info_keys if config.info_keys is not None else scalar_info_keys(env)
    compute_reward = goal_function(env, env, "compute_reward")
    reward_range, declared = None, getattr(env.unwrapped, "reward_range", None)
    finite = declared is not None and bool(np.all(np.isfinite(declared)))
    if compute_reward is not None and config.clip_return and config.clip_range is None:
        if declared is not None and finite:
            reward_range = (float(declared[0]), float(declared[1]))
        else:
            reward_range = probe_rewards(env, compute_reward, tuple(info_keys), config.seed)
    return EnvFacts(
        observation_space=cast(spaces.Dict, env.observation_space),
        action_space=env.action_space, declared_length=declared_length, episode_length=horizon,
        info_keys=tuple(info_keys), compute_reward=compute_reward,
        has_compute_terminated=goal_function(env, env, "compute_terminated") is not None,
        native_twin=native_twin, twin_problem=device_twin_problem(config.env_id),
        step_seconds=step_seconds, reward_range=reward_range, reward_declared=finite,
        preflight_seconds=None if checked is None else round(checked.seconds, 3),
    )  # fmt: skip


def make_plan(
    config: TrainConfig,
    env: gym.Env,
    device: torch.device,
    rank: int = 0,
    world: int = 1,
    recorded: dict[str, Any] | None = None,
) -> RunPlan:
    """The plan of ``config`` on this machine (``device``, worker ``rank`` of ``world``),
    from one look at ``env``; a resumed run passes its ``recorded`` plan."""
    notes: list[str] = list(check_recorded(config, recorded))
    facts = look_at(config, env, notes)
    horizon = facts.episode_length
    if horizon is None and (config.rollout_steps is None or config.gamma is None):
        raise ValueError(
            f"{config.env_id} declares no episode length: give it one with "
            "--max-episode-steps N (gymnasium's time limit), or set rollout_steps and "
            "gamma in a --preset file"
        )
    rollout_steps = config.rollout_steps or int(horizon or 0)
    gamma = config.gamma if config.gamma is not None else 1.0 - 1.0 / (horizon or 1)
    _check_schedule(config, horizon or rollout_steps, rollout_steps, world)
    env_device = _env_device(config.env_device, config.env_id, device, facts, notes)
    replay_device = _replay_device(config.replay_device, env_device, device)
    env_workers, step_seconds = _env_workers(
        config.env_workers, config.env_id, config.env_kwargs, config.num_envs, facts, env_device,
        notes,
    )  # fmt: skip
    if config.env_workers is not None and env_device != "device":
        step_seconds = (recorded or {}).get("step_seconds")
    overlap = _overlap(config.overlap, env_workers, env_device)
    precision = "bf16" if uses_bf16(config.precision, device) else "fp32"
    if config.precision == "auto":
        notes.append(
            f"precision auto: {precision} on {device.type}"
            + (" (bfloat16 instructions)" if precision == "bf16" else "")
        )
    elif precision == "fp32" and device.type == "cpu" and cpu_has_bf16():
        notes.append(
            "precision fp32 as the config sets it (a flag, or the preset: its comment says "
            "why), though this CPU has bfloat16 instructions"
        )
    if facts.compute_reward is None:
        raise ValueError(
            f"{config.env_id} has no compute_reward(achieved_goal, desired_goal, info): HER "
            f"cannot relabel its transitions. Run `goalenvs check {config.env_id}`."
        )
    if not facts.has_compute_terminated:
        notes.append(
            f"{config.env_id} has no compute_terminated: relabeled transitions keep the "
            "terminated flag their real goal gave (a relabeled goal reached early does "
            "not end its episode), as stable-baselines3's HER does"
        )
    clip = _clip_range(config.clip_return, config.clip_range, config.env_id, facts, gamma, notes)
    return RunPlan(
        facts=facts, device=str(device), rank=rank, world=world, episode_length=horizon,
        rollout_steps=rollout_steps, gamma=gamma,
        clip_range=clip, info_keys=facts.info_keys,
        env_device=env_device, replay_device=replay_device, env_workers=env_workers,
        eval_workers=eval_env_workers(config.n_eval_episodes, env_workers),
        step_seconds=step_seconds, overlap=overlap, precision=precision,
        cuda_graphs=_cuda_graphs(config.cuda_graphs, config.algo, device, world),
        torch_threads=_torch_threads(config.torch_threads, notes), machine=describe_machine(),
        notes=tuple(notes), preflight_seconds=facts.preflight_seconds,
    )  # fmt: skip


def _check_schedule(config: TrainConfig, episode: int, rollout_steps: int, world: int) -> None:
    """A ValueError naming the field and its value when the schedule cannot run: a batch
    larger than the buffer, a buffer too small for one episode per env, or a goal-mix
    warm-up that outlasts the run."""
    size = config.buffer_size // world
    share = f"buffer_size {config.buffer_size}" + (f" over {world} workers" if world > 1 else "")
    if config.batch_size > size:
        raise ValueError(
            f"batch_size {config.batch_size} is larger than the replay buffer ({share} "
            f"holds {size} transitions): lower batch_size or raise buffer_size"
        )
    rows = size // config.num_envs
    if rows < episode + 1:
        raise ValueError(
            f"{share} gives each of the num_envs {config.num_envs} envs {rows} rows, fewer "
            f"than one episode of {episode} steps takes ({episode + 1}): no transition "
            f"could ever be sampled; raise buffer_size to at least "
            f"{(episode + 1) * config.num_envs * world} or lower num_envs"
        )
    stored = config.epochs * config.n_cycles * rollout_steps * config.num_envs
    if config.goal_mix_warmup > stored:
        raise ValueError(
            f"goal_mix_warmup {config.goal_mix_warmup} is longer than the run: each replay "
            f"buffer stores {stored:,} env steps (epochs {config.epochs} x n_cycles "
            f"{config.n_cycles} x {rollout_steps} steps x num_envs {config.num_envs}); "
            "lower goal_mix_warmup or lengthen the run"
        )


def _env_device(
    asked: str, env_id: str, device: torch.device, facts: EnvFacts, notes: list[str]
) -> str:
    """ "device" when the training envs run as torch twins on ``device``, else "numpy"."""
    if asked == "numpy":
        return "numpy"
    problem = facts.twin_problem
    if asked == "auto":
        if device.type != "cuda":
            return "numpy"
        if problem is not None:
            notes.append(
                f"env_device auto runs numpy envs: {env_id} cannot run on {device}, as {problem}"
            )
            return "numpy"
    elif problem is not None:
        raise ValueError(
            f"env_device='device': {env_id} cannot run on device {device}: "
            f"{problem}. Use env_device='numpy' (or 'auto')"
        )
    return "device"


def _replay_device(asked: str, env_device: str, device: torch.device) -> str:
    """Where the replay buffer lives: beside torch twins; for numpy envs, as ``asked``."""
    if env_device == "device" and asked == "host":
        raise ValueError(
            f"replay_device (--replay-device) 'host': the torch twins step on {device} and "
            "their replay buffer lives there; expected 'device' or 'auto' with env_device "
            "'device'"
        )
    return "device" if env_device == "device" or asked == "device" else "host"


def _env_workers(
    asked: int | None,
    env_id: str,
    env_kwargs: dict[str, object],
    num_envs: int,
    facts: EnvFacts,
    env_device: str,
    notes: list[str],
) -> tuple[int, float | None]:
    """The processes that step the training envs and the step time that chose them
    (``asked`` None: from the timed step; 1 for an env worker processes cannot build)."""
    if env_device == "device":
        if asked not in (None, 1):
            raise ValueError(
                f"env_workers (--env-workers) {asked}: the torch twins run on "
                "the device in the trainer's process; expected 1 with env_device 'device'"
            )
        return 1, None
    if asked not in (None, 1) and facts.native_twin:
        raise ValueError(
            f"env_workers (--env-workers) {asked}: {env_id} has a native vector twin, "
            "which steps all its envs in one call in the trainer's process; expected 1"
        )
    if asked is not None:
        return check_env_workers(asked, num_envs), None
    if facts.native_twin:
        notes.append("env workers 1: the native vector twin steps every env in one call")
        return 1, None
    seconds = facts.step_seconds
    assert seconds is not None  # look_at timed it: no workers asked, no native twin
    workers = default_env_workers(num_envs, False, step_seconds=seconds)
    problem = worker_problem(env_id, env_kwargs) if workers > 1 else None
    if problem is not None:
        notes.append(f"env workers 1, not {workers}: {problem}")
        return 1, seconds
    notes.append(
        f"env workers {workers}: a step took {1e6 * seconds:.0f} us on {usable_cores()} cores"
    )
    return workers, seconds


def _overlap(asked: bool | None, env_workers: int, env_device: str) -> bool:
    """Whether collection runs beside the updates (``asked`` None: with worker processes)."""
    if asked is None:
        return env_workers > 1
    if asked and env_device == "device":
        raise ValueError(
            "overlap=True collects in a background thread, which the on-device loop (torch "
            "twins on the GPU) has no use for; set overlap to None or False there"
        )
    return bool(asked)


def _cuda_graphs(asked: str, algo: str, device: torch.device, world: int) -> bool:
    """Whether the updates run as captured CUDA graphs (the learner's rule; "on" insists)."""
    safe = get_algo(algo).agent_class().graph_safe_update
    possible = device.type == "cuda" and world == 1 and safe
    if asked == "on" and not possible:
        why = (
            f"the networks are on {device}, and CUDA graphs need a CUDA device"
            if device.type != "cuda"
            else f"{world} workers all-reduce every update"
            if world > 1
            else f"{algo}'s update is not graph-safe"
        )
        raise ValueError(f"cuda_graphs (--cuda-graphs) 'on' cannot capture the updates: {why}")
    return possible and asked != "off"


def _torch_threads(threads: int, notes: list[str]) -> int:
    """``threads``, or fewer when torchrun's workers on this machine (``LOCAL_WORLD_SIZE``)
    would ask more threads than it has cores."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    fair = max(1, usable_cores() // local)
    if threads > fair:
        notes.append(
            f"torch_threads {threads} lowered to {fair}: {local} workers share this machine's "
            f"{usable_cores()} cores"
        )
        return fair
    return threads


def _clip_range(
    clip_return: bool,
    clip_range: tuple[float, float] | None,
    env_id: str,
    facts: EnvFacts,
    gamma: float,
    notes: list[str],
) -> tuple[float, float] | None:
    """The range Bellman targets are clipped to: ``clip_range``, else the returns the env's
    declared rewards allow, or baselines' [-1, 0] where a probe paid inside it; None: not."""
    if not clip_return or clip_range is not None:
        return clip_range if clip_return else None
    assert facts.reward_range is not None  # look_at read or probed it
    low, high = facts.reward_range
    if facts.reward_declared:
        return return_range(low, high, gamma)
    if low >= -1.0 and high <= 0.0:
        return return_range(-1.0, 0.0, gamma)
    notes.append(
        f"clip_return is off: {env_id} paid rewards in [{low:.3g}, {high:.3g}] on a "
        "random probe, outside baselines' [-1, 0], and declares no finite reward_range; "
        "set clip_range to clip the targets"
    )
    return None
