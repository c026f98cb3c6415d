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
import dataclasses
import functools
import json
import os
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goalenvs import envspec
from goalenvs.agents.config import Option, TrainConfig, options, value_type
from goalenvs.agents.registry import ALGOS
from goalenvs.core import command_name, episode_length, parse_json_object
from goalenvs.core.io import stdout_to_stderr
from goalenvs.envspec import describe_error, renders_frames

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
USAGE = "%(prog)s [ENV_ID] [--preset NAME|PATH] [--FIELD VALUE ...] (--help lists them)"


# The forms of ENV_ID that train and play take (goalenvs.envspec resolves them).
ENV_ID_FORMS = (
    "a registered id (goalenvs/PointReach-v0), module:EnvId, module:ClassOrFactory or "
    "path/to/file.py:ClassOrFactory"
)


def add_env_id(parser: argparse.ArgumentParser, what: str, note: str = "") -> None:
    """The optional positional ``ENV_ID``: its help is ``what``, the forms it takes, ``note``."""
    parser.add_argument("env_id", nargs="?", metavar="ENV_ID", help=f"{what}: {ENV_ID_FORMS}{note}")


def add_max_episode_steps(parser: argparse.ArgumentParser) -> None:
    """``--max-episode-steps N`` (``check``, ``train`` and ``play`` take it alike)."""
    help = options(TrainConfig)["max_episode_steps"][1].help
    parser.add_argument("--max-episode-steps", type=int, metavar="N", help=help)


def add_env_kwargs(parser: argparse.ArgumentParser, example: str) -> None:
    """``--env-kwargs JSON``, with ``example`` (a JSON object) in its help."""
    help = f"{options(TrainConfig)['env_kwargs'][1].help}, as a JSON object, e.g. '{example}'"
    parser.add_argument("--env-kwargs", default=None, metavar="JSON", help=help)


@dataclass(frozen=True)
class Flag:
    """The command-line face of one config field (:func:`goalenvs.agents.config.option`)."""

    name: str  # the config field
    field: dataclasses.Field
    option: Option
    algos: tuple[str, ...]  # the algorithms whose config has it; (): every one

    @property
    def flags(self) -> list[str]:
        """``--field-name`` (``--no-field-name`` for a switch on by default), then its
        other names."""
        off = value_type(self.field) == "bool" and self.field.default is True
        return ["--" + ("no-" if off else "") + self.name.replace("_", "-"), *self.option.flags]

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """The flag, its help ending with where its default comes from."""
        help = self.option.help.replace("%", "%%")
        help += f" ({', '.join(self.algos)})" if self.algos else ""
        help += "" if "default" in help else f"; {PRESET_DEFAULT}"
        kind = value_type(self.field)
        settings: dict[str, Any] = {"dest": self.name, "help": help, "default": None}
        if kind == "bool" and self.field.default is None:
            settings["action"] = argparse.BooleanOptionalAction
        elif kind == "bool":
            settings.update(action="store_const", const=self.field.default is not True)
        elif self.option.choices:
            settings["choices"] = self.option.choices
        else:
            settings["action"] = _Typed
            settings["type"] = {"int": int, "float": float}.get(kind, str)
            shown = {"int": "N", "str": self.name.split("_")[-1].upper()}.get(kind, "X")
            settings["metavar"] = self.option.metavar or shown
        parser.add_argument(*self.flags, **settings)


class _Typed(argparse.Action):
    """Stores a flag's value and the flag as typed, which a message about it names."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.__dict__.setdefault("typed_flags", {})[self.dest] = option


@functools.cache
def config_flags() -> dict[str, Flag]:
    """Every field with a flag of every registered algorithm's config, by name."""
    shared = options(TrainConfig)
    found: dict[str, tuple[dataclasses.Field, Option, list[str]]] = {}
    for algo in ALGOS.values():
        for name, (f, option) in options(algo.config_class()).items():
            found.setdefault(name, (f, option, []))[2].append(algo.name)
    return {
        name: Flag(name, f, option, () if name in shared else tuple(algos))
        for name, (f, option, algos) in found.items()
        if option.cli
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``goalenvs train``: ENV_ID, the run's own, then a flag per config field."""
    add_env_id(parser, "the goal env")
    kinds = ", ".join(f"{a.name}: {a.action_space}" for a in ALGOS.values())
    parser.add_argument(
        "--algo",
        choices=list(ALGOS),
        help=f"a registered algorithm; default: the first that fits the action space ({kinds})",
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
    resume = options(TrainConfig)["resume"][1].help
    parser.add_argument("--resume", metavar="DIR", help=resume)
    parser.add_argument(
        "--seeds",
        metavar="RANGE",
        help="train one run per seed (0-4, or 0,3,7) into one folder (--out), side by side "
        "where the cores allow, then draw the set's curves (goalenvs.train.seeds)",
    )
    parser.add_argument(
        "--seeds-at-once",
        metavar="N",
        help="with --seeds: how many train side by side, each in its own process (default: "
        "as many as the cores hold; 1: one after another)",
    )
    add_env_kwargs(parser, '{"n_bits": 50}')
    for flag in config_flags().values():
        flag.add_to(parser)


class UsageError(ValueError):
    """A command-line argument is wrong."""


def parse_env_kwargs(text: str | None) -> dict[str, object]:
    """The ``--env-kwargs`` JSON object."""
    try:
        return parse_json_object("--env-kwargs", text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def check_env_workers_flag(workers: int) -> None:
    """A :class:`UsageError` naming ``--env-workers``, its value and this machine's range."""
    from goalenvs.train.machine import WORKERS_PER_CORE, usable_cores

    cores = usable_cores()
    if not 1 <= workers <= WORKERS_PER_CORE * cores:
        raise UsageError(
            f"--env-workers {workers}: expected 1 (the envs in the trainer's process) to "
            f"{WORKERS_PER_CORE * cores} ({WORKERS_PER_CORE} per core of this machine's {cores})"
        )


@dataclass
class Command:
    """What a ``goalenvs train`` command line asks: the config, its preset, the episode
    length, one env of the run built (the last two None when resuming: the trainer builds
    it) and a resumed run's recorded plan."""

    config: TrainConfig
    preset: Preset | None
    horizon: int | None
    env: gym.Env | None = None
    recorded: dict[str, object] | None = None


def read_command(args: argparse.Namespace) -> Command:
    """The :class:`Command` of the parsed arguments; bad input is a :class:`UsageError`."""
    from goalenvs.agents.registry import algo_for, config_from_dict, get_algo
    from goalenvs.train.envs import validate_training_env
    from goalenvs.train.presets import load_preset, preset_for, resolve_config

    given = {name: getattr(args, name) for name in config_flags()}
    given = {name: value for name, value in given.items() if value is not None}
    if "env_workers" in given:
        check_env_workers_flag(given["env_workers"])
    if "priority" in given:
        given["prioritized"] = True
    for name in ("max_env_steps", "max_minutes", "max_episode_steps"):
        if name in given and not given[name] > 0:
            raise UsageError(f"{flag_of(name, args)} {given[name]}: expected a positive number")
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
        _check_algo_has(given, get_algo(data.get("algo")).config_class(), args)
        recorded_plan = data.get("plan")
        # a path/to/file.py env resumed from another folder: its recorded file
        data["env_id"] = envspec.locate(data["env_id"], data.get("env_file"))
        before = config_from_dict(dict(data, resume=str(args.resume), out=None))
        data.update(given, resume=str(args.resume), out=None)
        with _flag_named(given, args):
            config = config_from_dict(data)
        _check_kept_on_resume(before, config)
        horizon = config.max_episode_steps or envspec.env_spec(config.env_id).max_episode_steps
        config = _fit_epochs(config, horizon, "epochs" in given)
        _check_priority_flags(given, config, args)
        return Command(config, None, horizon, recorded=recorded_plan)
    if args.env_id is None:
        raise UsageError("ENV_ID is required (or --resume DIR)")
    env_kwargs = parse_env_kwargs(args.env_kwargs)
    preset = load_preset(args.preset if args.preset is not None else preset_for(args.env_id))
    limit = {} if args.max_episode_steps is None else {"max_episode_steps": args.max_episode_steps}
    env = validate_training_env(args.env_id, {**env_kwargs, **limit}, args.algo or preset.algo)
    horizon = episode_length(env)
    try:
        algo = args.algo or preset.algo or algo_for(env.action_space)
        _check_algo_has(given, get_algo(algo).config_class(), args)
        with _flag_named(given, args):
            config = resolve_config(
                args.env_id, preset.path, algo, horizon, env_kwargs=env_kwargs, **given
            )
        _check_priority_flags(given, config, args)
    except BaseException:
        env.close()
        raise
    return Command(_fit_epochs(config, horizon, "epochs" in given), preset, horizon, env)


def flag_of(name: str, args: argparse.Namespace | None = None) -> str:
    """The flag of config field ``name`` as ``args`` gave it, else its own (``--n-cycles``)."""
    return getattr(args, "typed_flags", {}).get(name) or config_flags()[name].flags[0]


@contextlib.contextmanager
def _flag_named(given: dict[str, Any], args: argparse.Namespace) -> Iterator[None]:
    """A config's refusal of a value a flag gave, as a :class:`UsageError` that starts with
    the flag and the value (``--cycles 0: n_cycles must be > 0.0, got 0``)."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        name = next((n for n in given if re.match(rf"{n}\b(?!_)", str(exc))), None)
        if name is None:
            raise
        raise UsageError(f"{flag_of(name, args)} {given[name]}: {exc}") from None


def _check_algo_has(
    given: dict[str, Any], cls: type[TrainConfig], args: argparse.Namespace
) -> None:
    """A :class:`UsageError` for a flag of a field the run's algorithm has not."""
    for name, value in given.items():
        if name not in options(cls):
            algos = ", ".join(config_flags()[name].algos)
            raise UsageError(
                f"{flag_of(name, args)} {value}: the {cls.algo} algorithm has no {name} (a "
                f"setting of {algos}; choose one with --algo)"
            )


def _check_kept_on_resume(before: TrainConfig, after: TrainConfig) -> None:
    """A :class:`UsageError` naming the flag of a setting a resumed run keeps that its
    flags change."""
    for name, (_, option) in options(type(before)).items():
        old, new = getattr(before, name), getattr(after, name)
        if option.kept and old != new:
            raise UsageError(
                f"{flag_of(name)} cannot change when resuming a run: {option.kept} {name} "
                f"{old!r}, the flags ask for {new!r} (start a new run to change it)"
            )


def _check_priority_flags(
    given: dict[str, Any], config: TrainConfig, args: argparse.Namespace
) -> None:
    """A :class:`UsageError` for a ``--priority-*`` flag the run would ignore."""
    for name in ("priority_alpha", "priority_beta", "priority_eps"):
        if name in given and not config.prioritized:
            raise UsageError(
                f"{flag_of(name, args)} {given[name]} only applies to prioritized replay, and this "
                "run's is uniform: add --prioritized (by TD error) or --priority goal_motion"
            )
    if "priority_beta" in given and config.priority == "goal_motion":
        raise UsageError(
            f"--priority-beta {given['priority_beta']} only applies to priority td_error: "
            "draws by goal motion carry no importance weights"
        )


def _show_plan(command: Command) -> dict[str, object]:
    """The plan of ``command`` for ``--show-config``, without joining a torchrun group."""
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
    """``config`` with the epochs its ``max_env_steps`` needs, unless ``--epochs`` was given."""
    if config.max_env_steps is None or epochs_given:
        return config
    steps = config.rollout_steps or horizon
    world = int(os.environ.get("WORLD_SIZE", "1"))
    per_epoch = config.n_cycles * config.num_envs * world * steps if steps else 1
    config.epochs = -(-config.max_env_steps // per_epoch)
    return config


def _seeds_at_once(args: argparse.Namespace) -> int | None:
    """``--seeds-at-once`` as a count (None: not given), or the :class:`UsageError`."""
    given = args.seeds_at_once
    if given is None:
        return None
    if args.seeds is None:
        raise UsageError(f"--seeds-at-once {given}: it sets how --seeds trains; give --seeds")
    if not given.isdigit() or int(given) < 1:
        raise UsageError(f"--seeds-at-once {given!r}: expected a whole number >= 1")
    return int(given)


def _seeds(args: argparse.Namespace) -> list[int] | None:
    """``--seeds``' list (None: not given); a :class:`UsageError` beside ``--seed``,
    ``--resume`` or torchrun."""
    if args.seeds is None:
        return None
    from goalenvs.train.seeds import parse_seeds

    for flag, given in (("--seed", args.seed), ("--resume", args.resume)):
        if given is not None:
            raise UsageError(f"--seeds {args.seeds} and {flag} {given}: give one of them")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise UsageError(f"--seeds {args.seeds}: runs one process per seed, not under torchrun")
    return parse_seeds(args.seeds)


def run(args: argparse.Namespace) -> int:
    """``goalenvs train``: 0 when training finished, 1 when it failed, 2 on bad input."""
    from goalenvs.train.checkpoint import CheckpointError
    from goalenvs.train.env_workers import EnvWorkerError
    from goalenvs.train.estimate import estimate
    from goalenvs.train.plan import PlanError, PreflightError
    from goalenvs.train.presets import run_length
    from goalenvs.train.trainer import Trainer, TrainingError

    main_worker = int(os.environ.get("RANK", "0")) == 0  # under torchrun, worker 0 reports
    command = None
    try:
        seeds, at_once = _seeds(args), _seeds_at_once(args)
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
        header = f"goalenvs train: {config.algo} on {config.env_id}, {source}: {length}"
        if seeds is not None:
            from goalenvs.train.seeds import train_seeds

            built, command.env = command.env, None  # the first seed's trainer closes it
            return train_seeds(config, built, seeds, header, at_once)
        trainer = Trainer(config, env=command.env, recorded=command.recorded)
        command.env = None  # the trainer's now: it closes it
        if main_worker:
            timed = estimate(trainer) if command.preset is not None else None
            print(header if timed is None else f"{header}; {timed.line()}")
            for line in trainer.plan_lines():
                print(f"goalenvs train: {line}", flush=True)
        result = trainer.run()
    except (PreflightError, PlanError, TrainingError, EnvWorkerError) as exc:
        print(f"goalenvs train: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, (TrainingError, EnvWorkerError)) else 2
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
        state = f"ended at its budget ({flag_of(result.budget_spent, args)})"
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


OPTION_TABLE = re.compile(r"(<!-- options -->\n).*?(<!-- /options -->)", re.DOTALL)


def option_table() -> str:
    """docs/training.md's table of every config field: flags, default, algorithms, whether
    a resume keeps it, and its help."""
    rows = [
        "| field (preset key) | flag | default | algorithms | on resume | what it sets |",
        "|---|---|---|---|---|---|",
    ]
    classes = {algo.name: algo.config_class() for algo in ALGOS.values()}
    names = dict.fromkeys(name for cls in classes.values() for name in options(cls))
    for name in names:
        having = {algo: cls for algo, cls in classes.items() if name in options(cls)}
        option = next(options(cls)[name][1] for cls in having.values())
        helps: dict[str, str] = {}  # each help -> the first algorithm that gives it
        for algo, cls in having.items():
            helps.setdefault(options(cls)[name][1].help, algo)
        first, *others = helps
        said = "; ".join([first, *(f"{helps[help]}: {help}" for help in others)])
        defaults = {algo: _default(options(cls)[name][0]) for algo, cls in having.items()}
        usual = _default(options(TrainConfig)[name][0]) if name in options(TrainConfig) else None
        usual = usual or next(iter(defaults.values()))
        other = [f"{algo}: {value}" for algo, value in defaults.items() if value != usual]
        flags = ", ".join(f"`{flag}`" for flag in config_flags()[name].flags) if option.cli else "-"
        algos = "all" if len(having) == len(classes) else ", ".join(having)
        cells = [
            f"`{name}`",
            flags,
            usual + (f" ({', '.join(other)})" if other else ""),
            algos,
            "kept" if option.kept else "",
            said.replace("|", "\\|"),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _default(f: dataclasses.Field) -> str:
    value = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[operator]
    return f"`{value!r}`"


def with_option_table(text: str) -> str:
    """``text`` (docs/training.md) with its ``<!-- options -->`` block rebuilt::

    python -c "import pathlib, goalenvs.train.cli as c; p = pathlib.Path('docs/training.md');
    p.write_text(c.with_option_table(p.read_text()))"
    """
    return OPTION_TABLE.sub(lambda m: f"{m.group(1)}{option_table()}\n{m.group(2)}", text)
