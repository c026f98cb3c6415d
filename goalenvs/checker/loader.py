"""Turns a SPEC string into an env and a factory that builds more of the same env.

SPEC forms:

- a registered id: ``goalenvs/PointReach-v0`` (gymnasium's ``gym.make``);
- gymnasium's ``module:EnvId``: ``highway_env:parking-v0`` (imports the module, which
  registers the id, then ``gym.make``);
- ``package.module:ClassOrFactory``: an env class or a function returning an env;
- ``path/to/file.py:ClassOrFactory``: the same, from a file.

The forms are :mod:`goalenvs.envspec`'s, shared by every command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from goalenvs import envspec


class LoadError(Exception):
    """The SPEC could not be resolved or the env could not be built."""


def resolve(spec: str) -> tuple[Callable[..., gym.Env], str]:
    """Returns ``(factory, name)`` for a SPEC; ``factory(**kwargs)`` builds the env.

    The SPEC is resolved by :func:`goalenvs.envspec.resolve`, as ``train`` and ``play``
    resolve theirs; a class or factory is called directly, an id goes through ``gym.make``.
    """
    if isinstance(spec, str) and spec.strip() and ":" not in spec and not spec.endswith(".py"):
        # A registered id is looked up when the env is built (a build error names it).
        return (lambda **kw: gym.make(envspec.env_spec(spec), **kw)), spec
    try:
        resolved = envspec.resolve(spec)
    except envspec.EnvSpecError as error:
        raise LoadError(str(error)) from None
    if resolved.factory is not None:
        return _with_time_limit(resolved.factory), resolved.name
    return (lambda **kw: gym.make(resolved.spec, **kw)), resolved.name


def _with_time_limit(factory: Callable[..., gym.Env]) -> Callable[..., gym.Env]:
    """``factory`` that also takes gymnasium's ``max_episode_steps`` as ``gym.make`` does
    (a ``TimeLimit`` around the env, never an argument of the user's constructor)."""

    def build(max_episode_steps: int | None = None, **kwargs: Any) -> gym.Env:
        env = factory(**kwargs)
        if max_episode_steps is None or not isinstance(env, gym.Env):
            return env
        return gym.wrappers.TimeLimit(env, max_episode_steps)

    return build


def load(
    spec: str, kwargs: dict[str, Any] | None = None, max_episode_steps: int | None = None
) -> tuple[gym.Env, Callable, str]:
    """Builds the env of ``spec`` with ``kwargs`` (and gymnasium's time limit of
    ``max_episode_steps``, as ``gym.make`` applies it, when given).

    Returns ``(env, factory, name)``, where ``factory(**extra)`` builds another env with
    the same kwargs plus ``extra`` (the render check uses ``render_mode=...``).
    Raises :class:`LoadError` with the underlying error's message on one line (a module
    that fails to import: its name, the exception and its cause; see
    :func:`goalenvs.envspec.describe_error`).
    """
    kwargs = dict(kwargs or {})
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    factory, name = resolve(spec)

    def make(**extra: Any) -> gym.Env:
        return factory(**{**kwargs, **extra})

    try:
        env = make()
    except envspec.EnvSpecError as error:  # a registered id, resolved when it is built
        raise LoadError(str(error)) from None
    except Exception as error:
        raise LoadError(f"building {spec} failed: {envspec.describe_error(error)}") from error
    if isinstance(env, gym.vector.VectorEnv) or not isinstance(env, gym.Env):
        raise LoadError(
            f"{spec} built a {type(env).__name__}; expected a single gymnasium.Env "
            "(check a vector env's single-env id instead)"
        )
    return env, make, name
