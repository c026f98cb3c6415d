"""Turns a SPEC string into an env and a factory that builds more of the same env.

SPEC forms:

- a registered id: ``goalenvs/PointReach-v0`` (gymnasium's ``gym.make``);
- gymnasium's ``module:EnvId``: ``highway_env:parking-v0`` (imports the module, which
  registers the id, then ``gym.make``);
- ``package.module:ClassOrFactory``: an env class or a function returning an env;
- ``path/to/file.py:ClassOrFactory``: the same, from a file.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym


class LoadError(Exception):
    """The SPEC could not be resolved or the env could not be built."""


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise LoadError(f"no such file: {path}")
    name = f"_goalenvs_check_{path.stem}_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise LoadError(f"importing {path} failed: {_describe(error)}") from error
    return module


def resolve(spec: str) -> tuple[Callable[..., gym.Env], str]:
    """Returns ``(factory, name)`` for a SPEC; ``factory(**kwargs)`` builds the env."""
    if not isinstance(spec, str) or not spec.strip():
        raise LoadError(f"SPEC must be a non-empty string, got {spec!r}")
    import goalenvs  # noqa: F401  (registers the goalenvs ids)

    if ":" not in spec:
        return (lambda **kw: gym.make(spec, **kw)), spec
    left, _, right = spec.rpartition(":")
    if left.endswith(".py") or "/" in left or "\\" in left:
        module = _import_file(Path(left))
    else:
        try:
            module = importlib.import_module(left)
        except Exception as error:
            raise LoadError(f"cannot import module {left!r}: {_describe(error)}") from error
    target = getattr(module, right, None) if right.isidentifier() else None
    if target is None:
        if left.endswith(".py"):
            raise LoadError(f"{left} defines no {right!r}")
        # gymnasium's own "module:EnvId": importing the module registered the id.
        return (lambda **kw: gym.make(right, **kw)), right
    if not callable(target):
        raise LoadError(f"{spec}: {right} is a {type(target).__name__}, not a class or function")
    return target, f"{left}:{right}"


def load(spec: str, kwargs: dict[str, Any] | None = None) -> tuple[gym.Env, Callable, str]:
    """Builds the env of ``spec`` with ``kwargs``.

    Returns ``(env, factory, name)``, where ``factory(**extra)`` builds another env with
    the same kwargs plus ``extra`` (the render check uses ``render_mode=...``).
    Raises :class:`LoadError` with the underlying error's message.
    """
    kwargs = dict(kwargs or {})
    factory, name = resolve(spec)

    def make(**extra: Any) -> gym.Env:
        return factory(**{**kwargs, **extra})

    try:
        env = make()
    except Exception as error:
        raise LoadError(f"building {spec} failed: {_describe(error)}") from error
    if isinstance(env, gym.vector.VectorEnv) or not isinstance(env, gym.Env):
        raise LoadError(
            f"{spec} built a {type(env).__name__}; expected a single gymnasium.Env "
            "(check a vector env's single-env id instead)"
        )
    return env, make, name
