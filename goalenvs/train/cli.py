"""``goalenvs train``: a registered HER algorithm (DDPG, DQN, ...) on a goal env, into a run folder.

Examples::

    goalenvs train goalenvs/PointReach-v0              # its preset: point_reach.toml
    goalenvs train goalenvs/PointReach-v0 --device cuda   # with point_reach's [device] section
    goalenvs train --show-config gymnasium_robotics:FetchReach-v4
    goalenvs train goalenvs/PointReach-v0 --preset baselines --epochs 5
    goalenvs train goalenvs/BitFlipping-v0 --env-kwargs '{"n_bits": 30}' --epochs 30
    goalenvs train --resume runs/goalenvs_PointReach-v0-ddpg-s0-20260101-120000 --epochs 10
    torchrun --nproc-per-node 2 -m goalenvs train goalenvs/PointReach-v0   # 2 workers
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from goalenvs import envspec
from goalenvs.agents.config import (
    DEVICES,
    ENV_DEVICES,
    GRAPH_MODES,
    PRECISIONS,
    REPLAY_DEVICES,
    STRATEGIES,
    TrainConfig,
)
from goalenvs.agents.registry import ALGOS
from goalenvs.core import command_name, episode_length, parse_json_object
from goalenvs.core.io import stdout_to_stderr
from goalenvs.envspec import describe_error, renders_frames
from goalenvs.her.settings import PRIORITIES

if TYPE_CHECKING:
    import gymnasium as gym

    from goalenvs.train.presets import Preset


def _algo_names() -> str:
    """``DDPG+HER, DQN+HER, SAC+HER or TD3+HER``: every registered algorithm."""
    names = [f"{name.upper()}+HER" for name in ALGOS]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


# The one-line help of ``goalenvs train`` in ``goalenvs --help``, from the registry.
SUMMARY = f"train {_algo_names()} on a goal env"
PRESET_DEFAULT = "default: the preset's"


# The forms of ENV_ID that train and play take (goalenvs.envspec resolves them).
ENV_ID_FORMS = (
    "a registered id (goalenvs/PointReach-v0), module:EnvId, module:ClassOrFactory or "
    "path/to/file.py:ClassOrFactory"
)

# flag -> help of the integer settings of a run's schedule, each the preset's by default
SCHEDULE_FLAGS = {
    "--epochs": "training epochs (total, when resuming)",
    "--cycles": "cycles per epoch",
    "--batches": "gradient steps per cycle",
    "--batch-size": "transitions per gradient step",
    "--num-envs": "parallel envs per worker",
}


def add_env_id(parser: argparse.ArgumentParser, what: str, note: str = "") -> None:
    """The optional positional ``ENV_ID``: its help is ``what``, the forms it takes, ``note``."""
    parser.add_argument("env_id", nargs="?", metavar="ENV_ID", help=f"{what}: {ENV_ID_FORMS}{note}")


def add_max_episode_steps(parser: argparse.ArgumentParser) -> None:
    """``--max-episode-steps N``: gymnasium's time limit on the env (``check``, ``train``
    and ``play`` take it alike)."""
    parser.add_argument(
        "--max-episode-steps",
        type=int,
        metavar="N",
        help="end every episode after N steps (gymnasium's TimeLimit), for an env that "
        "declares no episode length or to change it; default: the env's own",
    )


def add_env_kwargs(parser: argparse.ArgumentParser, example: str) -> None:
    """``--env-kwargs JSON``, with ``example`` (a JSON object) in its help."""
    parser.add_argument(
        "--env-kwargs",
        default=None,
        metavar="JSON",
        help=f"env constructor arguments as a JSON object, e.g. '{example}'",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``goalenvs train``."""
    add_env_id(parser, "the goal env")
    parser.add_argument(
        "--algo",
        choices=list(ALGOS),
        help="a registered algorithm; default: the first that fits the action space ("
        + ", ".join(f"{a.name}: {a.action_space}" for a in ALGOS.values())
        + ")",
    )
    parser.add_argument(
        "--preset",
        metavar="NAME|PATH",
        help="hyperparameter preset: a shipped name (baselines = Plappert et al.'s schedule) "
        "or a .toml file; default: the preset made for ENV_ID; flags override it",
    )
    parser.add_argument(
        "--show-config",
        action="store_true",
        help="print the resolved config as JSON (and, on stderr, the preset and the run's "
        "length) and exit",
    )
    for flag, text in SCHEDULE_FLAGS.items():
        parser.add_argument(flag, type=int, help=f"{text}; {PRESET_DEFAULT}")
    parser.add_argument("--seed", type=int, help="random seed; default: the preset's, else 0")
    parser.add_argument(
        "--n-sampled-goal",
        type=int,
        help=f"HER's k: relabeled goals per real one; {PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--strategy", choices=STRATEGIES, help=f"HER goal selection strategy; {PRESET_DEFAULT}"
    )
    parser.add_argument(
        "--goal-mix",
        metavar="SOURCE=FRACTION,...",
        help="HER relabelling mix in place of --strategy and --n-sampled-goal: fractions of "
        "future, final, episode, achieved, desired (other episodes' desired goals) and "
        f"original goals that sum to 1, e.g. future=0.4,desired=0.4,original=0.2; {PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--goal-mix-warmup",
        type=int,
        metavar="STEPS",
        help=f"env steps stored before the goal mix applies (future goals only until then); "
        f"{PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--device",
        choices=DEVICES,
        help="where the networks (and with --env-device device, the envs and the replay "
        "buffer) live; auto: cuda when torch sees one, else cpu; default: the preset's, "
        "else auto",
    )
    parser.add_argument(
        "--env-device",
        choices=ENV_DEVICES,
        help="where the training envs run: numpy twins, or torch twins on --device with the "
        "replay buffer there too (device); default auto: device when --device is cuda",
    )
    parser.add_argument(
        "--replay-device",
        choices=REPLAY_DEVICES,
        help="where the replay buffer lives: host memory (numpy) or --device (torch, sampled "
        "there); default auto: beside the envs",
    )
    parser.add_argument(
        "--env-workers",
        type=int,
        metavar="N",
        help="processes that step the training envs (1: the trainer's own); default: from "
        "the machine's cores, 1 for envs with a native vector twin",
    )
    parser.add_argument(
        "--overlap",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="collect the next cycle in the background while the learner updates (one cycle "
        "of policy lag); default: on with env worker processes",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="the networks' arithmetic in the updates: bf16 autocast or fp32; default: the "
        "preset's, else auto (bf16 on a CPU with bfloat16 instructions, fp32 elsewhere)",
    )
    parser.add_argument(
        "--cuda-graphs",
        choices=GRAPH_MODES,
        help="run each update as a captured CUDA graph; default auto: on a CUDA device",
    )
    parser.add_argument("--out", help="run folder (default runs/<env>-<algo>-s<seed>-<time>)")
    parser.add_argument("--resume", metavar="DIR", help="continue the run in this folder")
    parser.add_argument("--save-every", type=int, help="keep policy_epoch_K.pt every K epochs")
    parser.add_argument(
        "--prioritized",
        action="store_true",
        help="prioritized replay by TD error (importance weights in the critic loss)",
    )
    parser.add_argument(
        "--priority",
        choices=PRIORITIES,
        help="prioritized replay by this: td_error (as --prioritized), or goal_motion (each "
        "episode by how far its achieved goal moved: episodes that moved the object are "
        f"replayed more); {PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--priority-alpha",
        type=float,
        metavar="A",
        help="prioritized replay: how far the priorities skew the draws, in [0, 1] (0: "
        f"uniform, 1: in proportion); {PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--priority-beta",
        type=float,
        metavar="B",
        help="prioritized replay by td_error: how much the importance weights correct the "
        f"skew, in [0, 1] (1: fully); {PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--priority-eps",
        type=float,
        metavar="EPS",
        help="prioritized replay: added to each |TD error| or episode's goal motion before "
        "--priority-alpha, the draw weight of a transition with none (goal_motion: an "
        f"episode whose object never moved); {PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--motion-clip",
        type=float,
        metavar="DISTANCE",
        help=f"goal_motion: the most one step's move of the achieved goal counts; {PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--motion-weights",
        metavar="W,W,...",
        help="goal_motion: a weight per achieved-goal entry, applied to each step before its "
        f"length is taken (1,1,4: a lift counts four times a slide); {PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--policy-average",
        type=float,
        metavar="W",
        help="evaluate, save and play an average of the policy's weights that moves 1 - W of "
        "the way to the trained ones after each cycle, in [0, 1) (0: the policy itself; "
        f"training and exploring are unchanged); {PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--lr-decay-to",
        type=float,
        metavar="F",
        help="let every learning rate fall linearly, epoch by epoch, to F times itself in the "
        f"last epoch, in (0, 1] (1: constant); {PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--lr-decay-from",
        type=float,
        metavar="P",
        help="--lr-decay-to: the fraction of the run's epochs done before the learning rates "
        f"start to fall, in [0, 1); {PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--n-step",
        type=int,
        metavar="N",
        help="steps of each sampled return: the target sums a transition's reward and the "
        "next N-1 of its episode (recomputed for a relabeled goal) and bootstraps with "
        f"gamma**N (1: one-step targets); {PRESET_DEFAULT}",
    )
    parser.add_argument(
        "--save-buffer", action="store_true", help="save the replay buffer too (for --resume)"
    )
    parser.add_argument(
        "--stop-success", type=float, help="stop once the eval success rate reaches this"
    )
    parser.add_argument(
        "--max-env-steps",
        type=int,
        metavar="N",
        help="end at the first epoch that reaches N env steps (the run's total, resumed "
        "epochs included); without --epochs the run gets the epochs N needs",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        metavar="M",
        help="end at the first epoch that ends past M minutes of this call (committed, so "
        "--resume continues it)",
    )
    parser.add_argument(
        "--no-preflight",
        action="store_true",
        help="skip the goal-env checks run before the first step (the cheap ones of "
        "`goalenvs check`: goal Dict, batched goal functions, is_success, episode length, "
        "the replay buffer)",
    )
    add_max_episode_steps(parser)
    add_env_kwargs(parser, '{"n_bits": 50}')
    parser.add_argument("--tensorboard", action="store_true", help="also log to TensorBoard")
    parser.add_argument("--quiet", action="store_true", help="no progress display")


OVERRIDES = {
    "epochs": "epochs",
    "cycles": "n_cycles",
    "batches": "n_batches",
    "batch_size": "batch_size",
    "num_envs": "num_envs",
    "seed": "seed",
    "n_sampled_goal": "n_sampled_goal",
    "strategy": "goal_selection_strategy",
    "goal_mix": "goal_mix",
    "goal_mix_warmup": "goal_mix_warmup",
    "priority": "priority",
    "priority_alpha": "priority_alpha",
    "priority_beta": "priority_beta",
    "priority_eps": "priority_eps",
    "motion_clip": "motion_clip",
    "motion_weights": "motion_weights",
    "n_step": "n_step",
    "policy_average": "policy_average",
    "lr_decay_to": "lr_decay_to",
    "lr_decay_from": "lr_decay_from",
    "device": "device",
    "env_device": "env_device",
    "replay_device": "replay_device",
    "env_workers": "env_workers",
    "overlap": "overlap",
    "precision": "precision",
    "cuda_graphs": "cuda_graphs",
    "out": "out",
    "save_every": "save_every",
    "stop_success": "stop_success",
    "max_env_steps": "max_env_steps",
    "minutes": "max_minutes",
    "max_episode_steps": "max_episode_steps",
}


# the config field of a budget -> its flag
BUDGET_FLAGS = {"max_env_steps": "--max-env-steps", "max_minutes": "--minutes"}


class UsageError(ValueError):
    """A command-line argument is wrong."""


def parse_env_kwargs(text: str | None) -> dict[str, object]:
    """The ``--env-kwargs`` JSON object."""
    try:
        return parse_json_object("--env-kwargs", text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def check_env_workers_flag(workers: int) -> None:
    """A :class:`UsageError` naming ``--env-workers``, its value and the range this
    machine takes."""
    from goalenvs.train.machine import WORKERS_PER_CORE, usable_cores

    cores = usable_cores()
    if not 1 <= workers <= WORKERS_PER_CORE * cores:
        raise UsageError(
            f"--env-workers {workers}: expected 1 (the envs in the trainer's process) to "
            f"{WORKERS_PER_CORE * cores} ({WORKERS_PER_CORE} per core of this machine's {cores})"
        )


@dataclass
class Command:
    """What a ``goalenvs train`` command line asks: the config, the preset it started
    from (None when resuming), the env's episode length (or None), one env of the run
    built (None when resuming: the trainer builds it) and a resumed run's recorded plan."""

    config: TrainConfig
    preset: Preset | None
    horizon: int | None
    env: gym.Env | None = None
    recorded: dict[str, object] | None = None


def read_command(args: argparse.Namespace) -> Command:
    """The :class:`Command` of the parsed arguments; bad input is a :class:`UsageError`."""
    from goalenvs.agents.registry import algo_for, config_from_dict
    from goalenvs.train.envs import env_spec, validate_training_env
    from goalenvs.train.presets import load_preset, preset_for, resolve_config

    given = {
        field: getattr(args, name)
        for name, field in OVERRIDES.items()
        if getattr(args, name) is not None
    }
    if args.env_workers is not None:
        check_env_workers_flag(args.env_workers)
    if args.save_buffer:
        given["save_buffer"] = True
    if args.prioritized or args.priority is not None:
        given["prioritized"] = True
    if args.tensorboard:
        given["tensorboard"] = True
    if args.quiet:
        given["verbose"] = False
    if args.no_preflight:
        given["preflight"] = False
    for flag, value in (
        ("--max-env-steps", args.max_env_steps),
        ("--minutes", args.minutes),
        ("--max-episode-steps", args.max_episode_steps),
    ):
        if value is not None and not value > 0:
            raise UsageError(f"{flag} {value}: expected a positive number")
    if args.resume:
        config_path = Path(args.resume) / "config.json"
        if not config_path.is_file():
            raise UsageError(f"--resume {args.resume!r}: no config.json there (not a run folder)")
        data = json.loads(config_path.read_text())
        if args.env_id is not None and args.env_id != data.get("env_id"):
            raise UsageError(
                f"ENV_ID {args.env_id!r} differs from the resumed run's {data.get('env_id')!r}"
            )
        if args.algo is not None and args.algo != data.get("algo"):
            raise UsageError(
                f"--algo {args.algo} differs from the resumed run's {data.get('algo')}"
            )
        if args.env_kwargs is not None:
            raise UsageError("--env-kwargs cannot change when resuming a run")
        recorded = data.get("max_episode_steps")
        if args.max_episode_steps is not None and args.max_episode_steps != recorded:
            raise UsageError(
                f"--max-episode-steps {args.max_episode_steps} differs from the resumed run's "
                f"{recorded}: the episode length cannot change when resuming a run"
            )
        if args.preset is not None:
            raise UsageError("--preset cannot change when resuming a run (its config.json is kept)")
        given.pop("out", None)
        recorded_plan = data.get("plan")
        # a path/to/file.py env resumed from another folder: its recorded file
        data["env_id"] = envspec.locate(data["env_id"], data.get("env_file"))
        before = config_from_dict(dict(data, resume=str(args.resume), out=None))
        data.update(given, resume=str(args.resume), out=None)
        config = config_from_dict(data)
        _check_kept_on_resume(before, config)
        horizon = config.max_episode_steps or env_spec(config.env_id).max_episode_steps
        config = _fit_epochs(config, horizon, "epochs" in given)
        _check_priority_flags(args, config)
        return Command(config, None, horizon, recorded=recorded_plan)
    if args.env_id is None:
        raise UsageError("ENV_ID is required (or --resume DIR)")
    env_kwargs = parse_env_kwargs(args.env_kwargs)
    preset = load_preset(args.preset if args.preset is not None else preset_for(args.env_id))
    limit = {} if args.max_episode_steps is None else {"max_episode_steps": args.max_episode_steps}
    env = validate_training_env(args.env_id, {**env_kwargs, **limit}, args.algo or preset.algo)
    try:
        algo = args.algo or preset.algo or algo_for(env.action_space)
        config = resolve_config(args.env_id, preset.path, algo, env_kwargs=env_kwargs, **given)
        _check_priority_flags(args, config)
    except BaseException:
        env.close()
        raise
    horizon = episode_length(env)
    return Command(_fit_epochs(config, horizon, "epochs" in given), preset, horizon, env)


#: The replay settings a resumed run keeps: its saved buffer was filled and is drawn by them.
REPLAY_FIELDS = (
    "goal_selection_strategy",
    "n_sampled_goal",
    "goal_mix",
    "goal_mix_warmup",
    "prioritized",
    "priority",
    "priority_alpha",
    "priority_beta",
    "priority_eps",
    "motion_clip",
    "motion_weights",
    "n_step",
)


#: Each setting a resumed run keeps -> what holds it: the replay settings its saved buffer
#: was filled and is drawn by, the policy average its checkpoints' networks include, the
#: learning-rate schedule its epochs followed (and progress.csv's lr_factor column shows).
KEPT_ON_RESUME = {
    **{field: "the run's replay has" for field in REPLAY_FIELDS},
    "policy_average": "its checkpoints hold the networks of",
    "lr_decay_to": "its learning rates followed",
    "lr_decay_from": "its learning rates followed",
}


def _check_kept_on_resume(before: TrainConfig, after: TrainConfig) -> None:
    """A :class:`UsageError` naming the flag of a setting that a resumed run keeps
    (:data:`KEPT_ON_RESUME`) and its flags change."""
    flags = {field: "--" + name.replace("_", "-") for name, field in OVERRIDES.items()}
    for field, holder in KEPT_ON_RESUME.items():
        old, new = getattr(before, field), getattr(after, field)
        if old != new:
            flag = flags.get(field, "--prioritized")
            raise UsageError(
                f"{flag} cannot change when resuming a run: {holder} {field} {old!r}, the "
                f"flags ask for {new!r} (start a new run to change it)"
            )


def _check_priority_flags(args: argparse.Namespace, config: TrainConfig) -> None:
    """A :class:`UsageError` for a ``--priority-alpha``, ``--priority-beta`` or
    ``--priority-eps`` that the run would ignore: replay that is not prioritized, or (beta)
    drawn by goal motion, which carries no importance weights."""
    for flag, value in (
        ("--priority-alpha", args.priority_alpha),
        ("--priority-beta", args.priority_beta),
        ("--priority-eps", args.priority_eps),
    ):
        if value is not None and not config.prioritized:
            raise UsageError(
                f"{flag} {value} only applies to prioritized replay, and this run's is "
                "uniform: add --prioritized (by TD error) or --priority goal_motion"
            )
    if args.priority_beta is not None and config.priority == "goal_motion":
        raise UsageError(
            f"--priority-beta {args.priority_beta} only applies to priority td_error: draws by "
            "goal motion carry no importance weights"
        )


def _show_plan(command: Command) -> dict[str, object]:
    """The plan of ``command`` for ``--show-config`` (worked out as the run would, without
    joining a torchrun group or building the envs)."""
    from goalenvs.train.envs import validate_training_env
    from goalenvs.train.plan import follow_recorded, make_plan
    from goalenvs.train.trainer import training_device

    config = follow_recorded(command.config, command.recorded)
    env = command.env or validate_training_env(config.env_id, config.make_kwargs(), config.algo)
    command.env = env
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    try:
        device = training_device(config.device)
    except ValueError as exc:  # a config for another machine (a GPU's) shown here
        return {"unavailable": f"no plan on this machine: {exc}"}
    return make_plan(config, env, device, rank, world, command.recorded).to_dict()


def _fit_epochs(config: TrainConfig, horizon: int | None, epochs_given: bool) -> TrainConfig:
    """``config`` with the epochs its ``max_env_steps`` needs, unless ``--epochs`` was
    given (then the first of the two ends the run)."""
    if config.max_env_steps is None or epochs_given:
        return config
    steps = config.rollout_steps or horizon
    world = int(os.environ.get("WORLD_SIZE", "1"))
    per_epoch = config.n_cycles * config.num_envs * world * steps if steps else 1
    config.epochs = -(-config.max_env_steps // per_epoch)
    return config


def run(args: argparse.Namespace) -> int:
    """``goalenvs train``: 0 when training finished, 1 when it failed, 2 on bad input."""
    from goalenvs.train.checkpoint import CheckpointError
    from goalenvs.train.env_workers import EnvWorkerError
    from goalenvs.train.plan import PlanError, PreflightError
    from goalenvs.train.presets import run_length
    from goalenvs.train.trainer import Trainer, TrainingError

    main_worker = int(os.environ.get("RANK", "0")) == 0  # under torchrun, worker 0 reports
    command = None
    try:
        shown = None
        # --show-config's JSON is for programs: what an env's C library prints to stdout
        # while it is built and probed (pybullet's banner) goes to stderr
        with stdout_to_stderr() if args.show_config else contextlib.nullcontext():
            command = read_command(args)
            if args.show_config:
                shown = {**command.config.to_dict(), "plan": _show_plan(command)}
        config, preset = command.config, command.preset
        workers = int(os.environ.get("WORLD_SIZE", "1"))
        length = run_length(config, command.horizon, preset, workers)
        source = f"preset {preset.name}" if preset is not None else f"resumed run {args.resume}"
        if shown is not None:
            print(json.dumps(shown, indent=2))
            print(f"{source}: {length}", file=sys.stderr)
            return 0
        if main_worker:
            print(f"goalenvs train: {config.algo} on {config.env_id}, {source}: {length}")
        trainer = Trainer(config, env=command.env, recorded=command.recorded)
        command.env = None  # the trainer's now: it closes it
        if main_worker:
            for line in trainer.plan_lines():
                print(f"goalenvs train: {line}", flush=True)
        result = trainer.run()
    except (PreflightError, PlanError) as exc:
        print(f"goalenvs train: {exc}", file=sys.stderr)
        return 2
    except (TrainingError, EnvWorkerError) as exc:
        print(f"goalenvs train: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, CheckpointError, RuntimeError) as exc:
        print(f"goalenvs train: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:  # an env that imports a failing module when it is built
        print(f"goalenvs train: error: {describe_error(exc)}", file=sys.stderr)
        return 2
    finally:
        if command is not None and command.env is not None:
            command.env.close()
    if not main_worker:
        return 0
    state = "interrupted; saved" if result.interrupted else "finished"
    if result.budget_spent is not None:
        state = f"ended at its budget ({BUDGET_FLAGS[result.budget_spent]})"
    print(
        f"training {state}: {result.epochs} epochs, {result.env_steps} env steps, "
        f"{result.wall_time:.1f} s"
    )
    print(f"run folder:    {result.run_dir}")
    print(f"best success:  {result.best_success_rate:.2f}")
    print(f"best policy:   {result.best_policy}")
    print(f"curves:        {result.run_dir / 'curves.png'}")
    # Each next command runs as printed (tests/test_cli_road.py runs them).
    env, policy = shlex.quote(config.env_id), shlex.quote(str(result.best_policy))
    goalenvs = command_name()
    headless = "" if renders_frames(config.env_id) else " --headless"
    print(f"watch it:      {goalenvs} play {env} --policy {policy}{headless}")
    if result.interrupted or result.budget_spent is not None:
        more = ""
        if result.budget_spent == "max_env_steps" and config.max_env_steps:
            more = f" --max-env-steps {2 * config.max_env_steps}"
        print(f"continue with: {goalenvs} train --resume {shlex.quote(str(result.run_dir))}{more}")
    return 0
