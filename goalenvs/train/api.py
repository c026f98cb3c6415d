"""Training in one call from Python: ``goalenvs.train("goalenvs/PointReach-v0", epochs=5)``.

The same road as ``goalenvs train ENV_ID``: the env's preset (or ``preset=``), the
algorithm it names or the one its action space takes (or ``algo=``), its fields sized
to the env's episode length, then the keywords, each a field of the algorithm's config
(``epochs``, ``seed``, ``actor_lr``, ``max_episode_steps``, ``out``...). The result's
``.policy`` is the best policy, loaded::

    import goalenvs

    result = goalenvs.train("goalenvs/PointReach-v0", epochs=5)
    action = result.policy.predict(obs)
    policy = goalenvs.load_policy(result.best_policy)
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Callable
from typing import Any

from goalenvs.agents.registry import ALGOS, algo_for, get_algo
from goalenvs.core import episode_length
from goalenvs.train.envs import validate_training_env
from goalenvs.train.presets import load_preset, preset_for, resolve_config
from goalenvs.train.trainer import Trainer, TrainResult


def train_env(
    env_id: str,
    *,
    preset: str | os.PathLike[str] | None = None,
    algo: str | None = None,
    callback: Callable[[dict], object] | None = None,
    **fields: Any,
) -> TrainResult:
    """Trains ``env_id`` (any env spec ``goalenvs train`` takes) and returns the
    :class:`~goalenvs.train.trainer.TrainResult`, whose ``.policy`` predicts. ``preset``
    and ``algo`` default as on the command line; ``fields`` override the preset, each a
    field of the algorithm's config; ``callback(row)`` gets each epoch's progress row."""
    _check_fields(fields, algo)
    chosen = load_preset(preset if preset is not None else preset_for(env_id))
    env_kwargs = dict(fields.pop("env_kwargs", None) or {})
    limit = fields.get("max_episode_steps")
    make_kwargs = {**env_kwargs, **({} if limit is None else {"max_episode_steps": limit})}
    env = validate_training_env(env_id, make_kwargs, algo or chosen.algo)
    try:
        algo = algo or chosen.algo or algo_for(env.action_space)
        _check_fields(fields, algo)
        config = resolve_config(
            env_id, chosen.path, algo, episode_length(env), env_kwargs=env_kwargs, **fields
        )
        trainer = Trainer(config, callback, env=env)
    except BaseException:
        env.close()
        raise
    return trainer.run()


def _check_fields(fields: dict[str, Any], algo: str | None) -> None:
    """A ValueError naming the first keyword that is not a field of ``algo``'s config
    (of any algorithm's, when ``algo`` is None)."""
    classes = (
        [get_algo(algo).config_class()] if algo else [a.config_class() for a in ALGOS.values()]
    )
    names = {f.name for cls in classes for f in dataclasses.fields(cls)} - {"env_id"}
    for name in fields:
        if name not in names:
            close = difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            owner = f"{classes[0].__name__} (algo {algo!r})" if algo else "any algorithm's config"
            raise ValueError(
                f"goalenvs.train: {name}={fields[name]!r} is not a field of {owner}{hint} "
                "(`goalenvs train ENV_ID --show-config` prints them all; the env's own "
                "arguments go in env_kwargs={...})"
            )
