"""Turns a SPEC string (:mod:`goalenvs.envspec`'s forms) into an env and a factory that
builds more of it; :func:`load_vector` builds a vector env from any form."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from goalenvs import envspec
from goalenvs.checker.vector_probe import VECTOR_ONLY_KWARGS, single_env_builder

# Sub-envs of a registered id checked as a vector env when no --num-envs is given.
DEFAULT_NUM_ENVS = 4
VECTORIZATION_MODES = ("vector_entry_point", "sync", "async")


class LoadError(Exception):
    """The SPEC could not be resolved or the env could not be built."""


def resolve(spec: str) -> tuple[Callable[..., gym.Env], str]:
    """Returns ``(factory, name)`` for a SPEC; ``factory(**kwargs)`` builds the env."""
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

    def build(max_episode_steps: int | None = None, **kwargs: object) -> gym.Env:
        env = factory(**kwargs)
        if max_episode_steps is None or not isinstance(env, gym.Env):
            return env
        return gym.wrappers.TimeLimit(env, max_episode_steps)

    return build


def load(
    spec: str, kwargs: dict[str, object] | None = None, max_episode_steps: int | None = None
) -> tuple[gym.Env, Callable, str]:
    """Builds the env of ``spec`` with ``kwargs`` (and gymnasium's ``max_episode_steps``):
    ``(env, factory, name)``, ``factory(**extra)`` building another with ``extra`` too.
    Raises :class:`LoadError` with the underlying error on one line."""
    kwargs = dict(kwargs or {})
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    factory, name = resolve(spec)

    def make(**extra: Any) -> gym.Env:
        return factory(**{**kwargs, **extra})

    env = _build(spec, make)  # a registered id is resolved when it is built
    _ensure_env(spec, env)
    return env, make, name


@dataclass
class LoadedVector:
    """A vector env built by :func:`load_vector`, its ``factory``, the ``single`` env of
    its kind when known, and ``notes`` on what was built instead of what was asked."""

    env: gym.vector.VectorEnv
    factory: Callable[..., gym.vector.VectorEnv]
    name: str
    single: Callable[[], gym.Env] | None = None
    notes: list[str] = field(default_factory=list)


def load_vector(
    spec: str,
    kwargs: dict[str, object] | None = None,
    *,
    num_envs: int | None = None,
    device: str | None = None,
    vectorization_mode: str | None = None,
    single: str | None = None,
) -> LoadedVector:
    """Builds the vector env of ``spec``: ``gym.make_vec`` of an id (SyncVectorEnv when it
    has no vector entry point), or a class or factory called with ``num_envs`` and
    ``device`` (SyncVectorEnv of a single env). ``num_envs=1`` becomes 2, with a note;
    ``single`` names the single env it must equal. Raises :class:`LoadError` in one line."""
    kwargs = dict(kwargs or {})
    notes: list[str] = []
    if num_envs is not None:
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise LoadError(f"--num-envs {num_envs!r}: expected a positive integer")
        if num_envs == 1:
            notes.append(
                "--num-envs 1 hides the defects between sub-envs (one sub-env's actions or "
                "success reaching another, a shared step counter or goal draw, a reduction "
                "over the batch axis); checking with --num-envs 2"
            )
            num_envs = 2
    if vectorization_mode is not None and vectorization_mode not in VECTORIZATION_MODES:
        raise LoadError(
            f"--vectorization-mode {vectorization_mode!r}: expected one of "
            f"{', '.join(VECTORIZATION_MODES)}"
        )
    try:
        resolved = envspec.resolve(spec)
    except envspec.EnvSpecError as error:
        raise LoadError(str(error)) from None
    if resolved.factory is None:
        loaded = _vector_of_id(resolved, kwargs, num_envs, device, vectorization_mode, notes)
    else:
        loaded = _vector_of_factory(resolved, kwargs, num_envs, device, vectorization_mode, notes)
    if single is not None:
        loaded.single = _single_of(single, kwargs)
    return loaded


def _vector_of_id(
    resolved: envspec.ResolvedEnv,
    kwargs: dict[str, object],
    num_envs: int | None,
    device: str | None,
    mode: str | None,
    notes: list[str],
) -> LoadedVector:
    spec = resolved.spec
    n = DEFAULT_NUM_ENVS if num_envs is None else num_envs
    if mode is None:
        mode = "vector_entry_point" if spec.vector_entry_point is not None else "sync"
        if mode == "sync":
            notes.append(
                f"{resolved.name} has no vector entry point: checking gymnasium's "
                f"SyncVectorEnv of {n} copies of its single env"
            )
    if mode == "vector_entry_point" and spec.vector_entry_point is None:
        raise LoadError(
            f"--vectorization-mode vector_entry_point: {resolved.name} has no vector entry "
            "point; use sync or async"
        )
    if device is not None:
        if mode != "vector_entry_point":
            raise LoadError(
                f"--device {device}: {resolved.name}'s {mode} vector env steps single numpy "
                "envs; --device needs a vector entry point that takes device="
            )
        kwargs = {**kwargs, "device": device}

    def make(**extra: Any) -> gym.vector.VectorEnv:
        return gym.make_vec(spec, num_envs=n, vectorization_mode=mode, **{**kwargs, **extra})

    env = _build(resolved.text, make)
    single = None
    if mode != "sync" and spec.entry_point is not None:
        # A native twin must equal its single env; an AsyncVectorEnv's goal functions
        # are read from a single env here (its own sub-envs live in other processes).
        single = single_env_builder(spec, {**spec.kwargs, **kwargs})
    return LoadedVector(env, make, resolved.name, single, notes)


def _vector_of_factory(
    resolved: envspec.ResolvedEnv,
    kwargs: dict[str, object],
    num_envs: int | None,
    device: str | None,
    mode: str | None,
    notes: list[str],
) -> LoadedVector:
    factory = resolved.factory
    assert factory is not None
    extra: dict[str, object] = {}
    for name, value in (("num_envs", num_envs), ("device", device)):
        if value is not None and _accepts(factory, name):
            extra[name] = value

    def make(**more: Any) -> Any:
        return factory(**{**kwargs, **extra, **more})

    env = _build(resolved.text, make)
    if isinstance(env, gym.vector.VectorEnv):
        if num_envs is not None and "num_envs" not in extra and env.num_envs != num_envs:
            notes.append(
                f"{resolved.name} takes no num_envs argument: checking its {env.num_envs} sub-envs"
            )
        return LoadedVector(env, make, resolved.name, None, notes)
    _ensure_env(resolved.text, env)
    if device is not None:
        raise LoadError(
            f"--device {device}: {resolved.name} builds a single env, and gymnasium's "
            "SyncVectorEnv of it steps numpy envs; drop --device"
        )
    env.close()
    n = DEFAULT_NUM_ENVS if num_envs is None else num_envs
    notes.append(
        f"{resolved.name} builds a single env: checking gymnasium's "
        f"{'AsyncVectorEnv' if mode == 'async' else 'SyncVectorEnv'} of {n} copies"
    )
    vector_cls = gym.vector.AsyncVectorEnv if mode == "async" else gym.vector.SyncVectorEnv

    def make_vector(**more: Any) -> gym.vector.VectorEnv:
        return vector_cls([lambda: make(**more)] * n)

    vector = _build(resolved.text, make_vector)
    single = (lambda: make()) if mode == "async" else None
    return LoadedVector(vector, make_vector, resolved.name, single, notes)


def _accepts(factory: Callable[..., Any], name: str) -> bool:
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _build(text: str, make: Callable[[], Any]) -> Any:
    try:
        return make()
    except envspec.EnvSpecError as error:
        raise LoadError(str(error)) from None
    except LoadError:
        raise
    except Exception as error:
        raise LoadError(f"building {text} failed: {envspec.describe_error(error)}") from error


def _ensure_env(text: str, env: object) -> None:
    if not isinstance(env, (gym.Env, gym.vector.VectorEnv)):
        raise LoadError(
            f"{text} built a {type(env).__name__}; expected a gymnasium.Env or a "
            "gymnasium.vector.VectorEnv"
        )


def _single_of(text: str, kwargs: dict[str, Any]) -> Callable[[], gym.Env]:
    """Builds the single env named by ``--single`` with the vector env's kwargs less the
    vector-only ones."""
    try:
        spec = envspec.env_spec(text)
    except envspec.EnvSpecError as error:
        raise LoadError(f"--single {text}: {error}") from None
    single_kwargs = {k: v for k, v in kwargs.items() if k not in VECTOR_ONLY_KWARGS}

    def make() -> gym.Env:
        return gym.make(spec, **single_kwargs)

    return make
