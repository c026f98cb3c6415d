"""Presets: hyperparameters that work, one TOML file per env family, chosen by env id.

``goalenvs train ENV_ID`` starts from the preset whose ``envs`` patterns match ENV_ID;
when none does, ``one_cpu`` (a schedule for one CPU, sized to the env's episode length)
serves every env outside goalenvs' own ids, and ``baselines`` (the config dataclasses'
defaults) goalenvs' own; ``--preset NAME|PATH`` picks another; command-line flags
override the preset. A preset file holds::

    description = "one line"
    envs = ["goalenvs/PointReach-v*"]  # fnmatch patterns of the ids it is the default for
    algo = "ddpg"                      # optional: the algorithm its fields are for
    [config]                           # fields of that algorithm's config dataclass
    epochs = 30
    [per_episode_step]                 # optional: fields sized to the episode length T:
    n_cycles = 0.4                     # round(0.4 x T), at least 1 (T unknown: [config]'s)
    [device]                           # optional: fields set on top of [config] when the
    num_envs = 2048                    # run trains on a GPU (see takes_device_section)
    [measured]                         # optional: the speed measured with [config]
    env_steps_per_s = 580              # (a CPU run), and the machine and load it was on
    machine = "2 CPU cores, the run alone on them"

A ``module:EnvId`` id matches on ``EnvId``. The ``[device]`` section is the schedule of a
run whose device is CUDA (``--device cuda``, or none on a machine where torch sees a GPU):
for an env with a torch twin the on-device loop, unless ``--env-device numpy`` keeps the
envs on the host; for any other env a GPU learner beside env worker processes."""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from goalenvs.agents.config import TrainConfig
from goalenvs.agents.registry import get_algo

PRESET_DIR = Path(__file__).resolve().parent
DEFAULT_PRESET = "baselines"  # goalenvs' own ids that no preset names
OTHER_ENVS_PRESET = "one_cpu"  # every other env that no preset names: a user's, say


@dataclass(frozen=True)
class Preset:
    """One preset file, parsed."""

    name: str  # the file's stem
    path: Path  # where it was read
    description: str = ""  # one line
    envs: tuple[str, ...] = ()  # fnmatch patterns of the env ids it is the default for
    algo: str | None = None  # the algorithm its config fields are for (None: any)
    config: dict[str, Any] = field(default_factory=dict)  # config fields it sets
    device: dict[str, object] = field(default_factory=dict)  # on top of them on a GPU's device loop
    measured: dict[str, Any] = field(default_factory=dict)  # env_steps_per_s, machine
    per_episode_step: dict[str, float] = field(default_factory=dict)  # field -> x episode length


def preset_names() -> list[str]:
    """The names of the presets shipped in the package."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def load_preset(name_or_path: str | os.PathLike) -> Preset:
    """The shipped preset named ``name_or_path``, or that TOML file (an unknown name is a
    ValueError listing the shipped presets)."""
    text = str(name_or_path)
    if text in preset_names():
        path = PRESET_DIR / f"{text}.toml"
    elif text.endswith(".toml") or os.sep in text or "/" in text:
        path = Path(text)
        if not path.is_file():
            raise ValueError(f"preset={text!r}: no such file")
    else:
        close = difflib.get_close_matches(text, preset_names(), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"preset={text!r} is not a preset; expected one of {preset_names()} or a .toml "
            f"path{hint}"
        )
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"preset {str(path)!r} is not valid TOML: {exc}") from None
    known = {"description", "envs", "algo", "config", "device", "measured", "per_episode_step"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"preset {str(path)!r}: unknown keys {unknown}; expected {sorted(known)}")
    algo = data.get("algo")
    if algo is not None:
        get_algo(algo, argument=f"preset {path.stem!r}: algo")
    config, device = data.get("config", {}), data.get("device", {})
    measured, per_step = data.get("measured", {}), data.get("per_episode_step", {})
    tables = (("config", config), ("device", device), ("measured", measured))
    for name, table in (*tables, ("per_episode_step", per_step)):
        if not isinstance(table, dict):
            raise ValueError(f"preset {str(path)!r}: [{name}] must be a table")
    for name, factor in per_step.items():
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 0:
            raise ValueError(
                f"preset {str(path)!r}: [per_episode_step] {name} = {factor!r}: expected a "
                "number > 0 (the field is that many times the episode length)"
            )
    if measured and (
        set(measured) != {"env_steps_per_s", "machine"}
        or not isinstance(measured["env_steps_per_s"], (int, float))
        or not measured["env_steps_per_s"] > 0
    ):
        raise ValueError(
            f"preset {str(path)!r}: [measured] must hold env_steps_per_s (a number > 0) and "
            f"machine (where and under what load), got {measured}"
        )
    return Preset(
        name=path.stem,
        path=path,
        description=str(data.get("description", "")),
        envs=tuple(data.get("envs", ())),
        algo=algo,
        config=dict(config),
        device=dict(device),
        measured=dict(measured),
        per_episode_step=dict(per_step),
    )


def run_length(
    config: TrainConfig, horizon: int | None, preset: Preset | None = None, workers: int = 1
) -> str:
    """One line: how long a run of ``config`` is (epochs x cycles x steps x envs) and, when
    ``preset`` records a measured speed and the run trains on the CPU in one process,
    about how long on the machine measured. ``horizon`` is the episode length (a cycle's
    steps without ``rollout_steps``); ``workers`` multiplies the env steps (torchrun)."""
    steps = config.rollout_steps or horizon
    if steps is None:
        return (
            f"{config.epochs} epochs x {config.n_cycles} cycles of one episode on "
            f"{config.num_envs} envs"
        )
    per_epoch = config.n_cycles * steps * config.num_envs * workers
    total = config.epochs * per_epoch
    line = (
        f"{config.epochs} epochs x {config.n_cycles} cycles x {steps} steps x "
        f"{config.num_envs} envs = {per_epoch:,} env steps an epoch, {total:,} in all"
    )
    measured = preset.measured if preset is not None else {}
    if measured and not runs_on_cuda(config.device) and workers == 1:
        seconds = total / measured["env_steps_per_s"]
        duration = f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} minutes"
        line += (
            f"; about {duration} at the {measured['env_steps_per_s']:g} env steps/s "
            f"measured on {measured['machine']}"
        )
    if config.stop_success is not None:
        line += f" (it stops early at eval success {config.stop_success:g})"
    return line


def _bare_id(env_id: str) -> str:
    return env_id.rpartition(":")[2]


def preset_for(env_id: str) -> str:
    """The name of the shipped preset whose ``envs`` match ``env_id``; when none does,
    ``baselines`` for goalenvs' own ids and ``one_cpu`` for any other env."""
    for name in preset_names():
        preset = load_preset(name)
        if any(fnmatch.fnmatchcase(_bare_id(env_id), pattern) for pattern in preset.envs):
            return name
    return DEFAULT_PRESET if _bare_id(env_id).startswith("goalenvs/") else OTHER_ENVS_PRESET


def runs_on_cuda(device: str) -> bool:
    """Whether a run on ``device`` trains on a GPU: "cuda", or "auto" where torch sees one."""
    import torch

    return device == "cuda" or (device == "auto" and torch.cuda.is_available())


def takes_device_section(
    env_id: str, overrides: dict[str, object], settings: dict[str, object]
) -> bool:
    """Whether a preset's ``[device]`` section applies: the run (``overrides``, else the
    preset's ``settings``) trains on a GPU, and an env with a torch twin runs it there
    (``env_device`` "numpy" keeps the CPU schedule)."""
    from goalenvs.train.envs import device_twin_problem

    def value(name: str) -> Any:
        default = TrainConfig.__dataclass_fields__[name].default
        return overrides.get(name, settings.get(name, default))

    if not runs_on_cuda(value("device")):
        return False
    if device_twin_problem(env_id) is not None:
        return True
    return value("env_device") in ("auto", "device")


def resolve_config(
    env_id: str,
    preset: str | os.PathLike | None = None,
    algo: str | None = None,
    horizon: int | None = None,
    **overrides: Any,
) -> TrainConfig:
    """The config for ``env_id``: ``preset`` (default: :func:`preset_for`), then ``overrides``.
    ``horizon``, the episode length, sizes the ``[per_episode_step]`` fields (without it
    they keep their ``[config]`` values); ``[device]`` joins ``[config]`` when
    :func:`takes_device_section`. ``algo`` defaults to the preset's; with another one, the
    preset algorithm's own fields that ``algo`` lacks are left out, and any other field
    that is not one of the config's is a ValueError naming it and the valid fields."""
    chosen = load_preset(preset if preset is not None else preset_for(env_id))
    if chosen.device and takes_device_section(env_id, overrides, chosen.config):
        chosen = dataclasses.replace(chosen, config={**chosen.config, **chosen.device})
    algo = algo or chosen.algo
    if algo is None:
        raise ValueError(
            f"preset {chosen.name!r} names no algo: pass algo (e.g. {DEFAULT_PRESET!r} fits any)"
        )
    cls = get_algo(algo).config_class()
    names = {f.name for f in dataclasses.fields(cls)}
    settings = dict(chosen.config)
    if chosen.algo is not None and algo != chosen.algo:
        # Another algorithm on this env's preset: its schedule carries over, the preset
        # algorithm's own knobs (DDPG's action_l2 under SAC, say) do not.
        own = {f.name for f in dataclasses.fields(get_algo(chosen.algo).config_class())}
        settings = {k: v for k, v in settings.items() if k in names or k not in own}
    unknown = sorted(set(settings) - names)
    if unknown:
        raise ValueError(
            f"preset {chosen.name!r} sets {unknown}, not fields of {cls.__name__} (algo "
            f"{algo!r}); valid fields: {sorted(names)}"
        )
    if horizon is not None:
        for name, factor in chosen.per_episode_step.items():
            settings[name] = max(1, round(factor * horizon))
    try:
        return cls(**{**settings, "env_id": env_id, **overrides})
    except (ValueError, TypeError) as exc:
        # a value the preset gave (not an override): the message names the preset too
        own = set(settings) - set(overrides)
        if any(re.match(rf"{name}\b(?!_)", str(exc)) for name in own):
            raise type(exc)(f"preset {chosen.name!r}: {exc}") from None
        raise
