"""``goalenvs train``: a registered HER algorithm (DDPG, DQN, ...) on a goal env, into a run folder.

Examples::

    goalenvs train goalenvs/PointReach-v0              # its preset: point_reach.toml
    goalenvs train goalenvs/PointReach-v0 --preset point_reach_device --device cuda
    goalenvs train --show-config gymnasium_robotics:FetchReach-v4
    goalenvs train goalenvs/PointReach-v0 --preset baselines --epochs 5
    goalenvs train goalenvs/BitFlipping-v0 --env-kwargs '{"n_bits": 30}' --epochs 30
    goalenvs train --resume runs/goalenvs_PointReach-v0-ddpg-s0-20260101-120000 --epochs 10
    torchrun --nproc-per-node 2 -m goalenvs train goalenvs/PointReach-v0   # 2 workers
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from goalenvs.agents.config import (
    DEVICES,
    ENV_DEVICES,
    GRAPH_MODES,
    PRECISIONS,
    REPLAY_DEVICES,
    STRATEGIES,
)
from goalenvs.agents.registry import ALGOS
from goalenvs.core import command_name, parse_json_object
from goalenvs.envspec import describe_error, renders_frames


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
        "--save-buffer", action="store_true", help="save the replay buffer too (for --resume)"
    )
    parser.add_argument(
        "--stop-success", type=float, help="stop once the eval success rate reaches this"
    )
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
}


class UsageError(ValueError):
    """A command-line argument is wrong."""


def parse_env_kwargs(text: str | None) -> dict[str, Any]:
    """The ``--env-kwargs`` JSON object."""
    try:
        return parse_json_object("--env-kwargs", text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def check_env_workers_flag(workers: int) -> None:
    """A :class:`UsageError` naming ``--env-workers``, its value and the range this
    machine takes."""
    from goalenvs.train.env_workers import WORKERS_PER_CORE, machine_cores

    cores = machine_cores()
    if not 1 <= workers <= WORKERS_PER_CORE * cores:
        raise UsageError(
            f"--env-workers {workers}: expected 1 (the envs in the trainer's process) to "
            f"{WORKERS_PER_CORE * cores} ({WORKERS_PER_CORE} per core of this machine's {cores})"
        )


def build_config(args: argparse.Namespace):
    """The training config the command line describes."""
    return plan(args)[0]


def plan(args: argparse.Namespace) -> tuple[Any, Any, int | None]:
    """``(config, preset, horizon)``: the training config the command line describes, the
    preset it started from (None when resuming) and the env's episode length (or None)."""
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
    if args.prioritized:
        given["prioritized"] = True
    if args.tensorboard:
        given["tensorboard"] = True
    if args.quiet:
        given["verbose"] = False
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
        if args.preset is not None:
            raise UsageError("--preset cannot change when resuming a run (its config.json is kept)")
        given.pop("out", None)
        data.update(given, resume=str(args.resume), out=None)
        config = config_from_dict(data)
        return config, None, env_spec(config.env_id).max_episode_steps
    if args.env_id is None:
        raise UsageError("ENV_ID is required (or --resume DIR)")
    env_kwargs = parse_env_kwargs(args.env_kwargs)
    preset = load_preset(args.preset if args.preset is not None else preset_for(args.env_id))
    env = validate_training_env(args.env_id, env_kwargs, args.algo or preset.algo)
    algo = args.algo or preset.algo or algo_for(env.action_space)
    horizon = getattr(env.unwrapped, "max_episode_steps", None) or (
        env.spec.max_episode_steps if env.spec is not None else None
    )
    env.close()
    config = resolve_config(args.env_id, preset.path, algo, env_kwargs=env_kwargs, **given)
    return config, preset, horizon


def run(args: argparse.Namespace) -> int:
    """``goalenvs train``: 0 when training finished, 1 when it failed, 2 on bad input."""
    from goalenvs.train.checkpoint import CheckpointError
    from goalenvs.train.env_workers import EnvWorkerError
    from goalenvs.train.presets import run_length
    from goalenvs.train.trainer import Trainer, TrainingError

    main_worker = int(os.environ.get("RANK", "0")) == 0  # under torchrun, worker 0 reports
    try:
        config, preset, horizon = plan(args)
        workers = int(os.environ.get("WORLD_SIZE", "1"))
        length = run_length(config, horizon, preset, workers)
        source = f"preset {preset.name}" if preset is not None else f"resumed run {args.resume}"
        if args.show_config:
            print(json.dumps(config.to_dict(), indent=2))
            print(f"{source}: {length}", file=sys.stderr)
            return 0
        if main_worker:
            print(f"goalenvs train: {config.algo} on {config.env_id}, {source}: {length}")
        trainer = Trainer(config)
        if main_worker:
            print(f"goalenvs train: {trainer.placement()}", flush=True)
        result = trainer.run()
    except (TrainingError, EnvWorkerError) as exc:
        print(f"goalenvs train: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, CheckpointError, RuntimeError) as exc:
        print(f"goalenvs train: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:  # an env that imports a failing module when it is built
        print(f"goalenvs train: error: {describe_error(exc)}", file=sys.stderr)
        return 2
    if not main_worker:
        return 0
    state = "interrupted; saved" if result.interrupted else "finished"
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
    if result.interrupted:
        print(f"continue with: {goalenvs} train --resume {shlex.quote(str(result.run_dir))}")
    return 0
