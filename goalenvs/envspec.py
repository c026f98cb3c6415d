"""One way to name an env in every command: ``check``, ``train`` and ``play`` resolve it here.

An env spec is one of:

- a registered id: ``goalenvs/PointReach-v0`` (gymnasium's ``gym.make``);
- gymnasium's ``module:EnvId``: ``highway_env:parking-v0`` (importing the module
  registers the id);
- ``package.module:ClassOrFactory``: an env class, or a function that returns an env;
- ``path/to/file.py:ClassOrFactory`` (or ``file.py:EnvId`` for a file that registers ids).

Modules are imported with the current folder importable, as ``python -m`` does, so a
user's ``my_env.py`` beside them works with the ``goalenvs`` console script too. A spec
resolves to a gymnasium :class:`~gymnasium.envs.registration.EnvSpec`, which
``gym.make(spec, **kwargs)`` and ``gym.make_vec(spec, ...)`` accept, so every command
builds the env the same way. Mistakes are :class:`EnvSpecError`, one line that names what
was given and what to type instead; a module that fails to import (the user's, or the one
a registered id's entry point names) is one line naming the module and the exception, with
the ``MUJOCO_GL`` setting to change when MuJoCo's rendering backend is what failed.

This module sits at the bottom of the package: it imports gymnasium and the standard
library only (and ``goalenvs`` itself, lazily, to register the goalenvs ids).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

# Import names whose pip name differs, and the goalenvs extra that installs one.
EXTRAS = {"gymnasium_robotics": "robotics"}
PIP_NAMES = {"highway_env": "highway-env", "panda_gym": "panda-gym"}
FORMS = (
    "a registered id (goalenvs/PointReach-v0), module:EnvId (highway_env:parking-v0), "
    "module:ClassOrFactory or path/to/file.py:ClassOrFactory"
)
# MuJoCo's rendering backends (the values of MUJOCO_GL) and what each needs.
GL_BACKENDS = {"egl": "needs libEGL", "osmesa": "needs libOSMesa", "glfw": "needs a display"}
# Words in an error that point at OpenGL.
_GL_WORDS = re.compile(r"EGL|OSMesa|OpenGL|GLFW|GLX|MUJOCO_GL|PYOPENGL_PLATFORM")


class EnvSpecError(ValueError):
    """An env spec that names no env; the message is one line saying what to type instead."""


@dataclass(frozen=True)
class ResolvedEnv:
    """What an env spec names.

    ``spec`` builds it (``gym.make(spec, **kwargs)``, ``gym.make_vec(spec, ...)``);
    ``creator`` is its entry point, loaded (the class or function ``gym.make`` calls: its
    ``metadata`` names the render modes it offers); ``factory`` is the class or function
    of a ``module:Class`` / ``file.py:factory`` spec (None for a registered id), for
    callers that build it without gymnasium's wrappers.
    """

    text: str  # the spec as given
    name: str  # a short name: the id, or module:Name
    spec: EnvSpec
    creator: Callable[..., Any] | None
    factory: Callable[..., Any] | None = None

    @property
    def render_modes(self) -> list[str] | None:
        """The render modes the env's class declares (``metadata["render_modes"]``); None
        when its creator declares none (a factory function)."""
        modes = getattr(self.creator, "metadata", {}).get("render_modes")
        return None if modes is None else list(modes)


def resolve(text: str) -> ResolvedEnv:
    """Resolves an env spec in any of the module docstring's forms.

    Raises :class:`EnvSpecError` when it names no env (an unknown id, a missing module or
    package, a file without ``:Name``, a name the module does not define) or when a module
    it imports fails (see :func:`import_failure`). A registered id's entry point is
    imported here, so its failure is reported the same way.
    """
    if not isinstance(text, str) or not text.strip():
        raise EnvSpecError(f"the env must be a non-empty string, got {text!r}; give {FORMS}")
    import goalenvs  # noqa: F401  (importing registers the goalenvs ids)

    left, sep, right = text.rpartition(":")
    if not sep:
        if text.endswith(".py"):
            raise EnvSpecError(_file_without_name(text))
        return _registered_env(text, text)
    if not left or not right:
        raise EnvSpecError(f"env {text!r} has an empty side of ':'; give {FORMS}")
    from_file = _names_file(left)
    module = _import_file(text, Path(left)) if from_file else _import_module(text, left)
    target = getattr(module, right, None) if right.isidentifier() else None
    if target is None:
        # ``Reach-v0`` is an id, ``Reach2D`` a Python name (ids carry a version).
        if right.isidentifier() and "-v" not in right and right not in gym.envs.registry:
            defines = _env_names(module)
            hint = f"; it defines {', '.join(defines)}" if defines else ""
            raise EnvSpecError(f"env {text!r}: {left} defines no {right!r}{hint}")
        # gymnasium's own "module:EnvId": importing the module registered the id.
        return _registered_env(right, text)
    if not callable(target):
        raise EnvSpecError(
            f"env {text!r}: {right} is a {type(target).__name__}, not a class or function "
            "that returns an env"
        )
    display = f"{Path(left).name if from_file else left}:{right}"
    spec = EnvSpec(id=display, entry_point=target)
    return ResolvedEnv(text, f"{left}:{right}", spec, target, target)


def env_file(text: str) -> Path | None:
    """The file a ``path/to/file.py:Name`` spec names, as given (relative paths stay
    relative); None for the other forms."""
    left, sep, right = text.rpartition(":") if isinstance(text, str) else ("", "", "")
    return Path(left) if sep and left and right and _names_file(left) else None


def recorded_file(text: str) -> str | None:
    """The absolute, resolved path of the file a ``path/to/file.py:Name`` spec names (a
    relative one from the current folder), as a run records it so that its policies play
    from any folder; None for the other forms."""
    path = env_file(text)
    return None if path is None else str(path.expanduser().resolve())


def locate(text: str, recorded: str | None) -> str:
    """The spec that builds ``text``'s env from the current folder.

    ``text`` itself, unless it names a file (``path/to/file.py:Name``) that is not there
    from the current folder; then the same name in ``recorded``, the absolute path of its
    file when it was recorded (:func:`recorded_file`). Raises :class:`EnvSpecError` naming
    both places when the file is in neither.
    """
    path = env_file(text)
    if path is None or recorded is None or path.is_file():
        return text
    name = text.rpartition(":")[2]
    if Path(recorded).is_file():
        return f"{recorded}:{name}"
    raise EnvSpecError(
        f"env {text!r}: its file is neither at {recorded} (where the run recorded it) nor at "
        f"{path} from the current folder {os.getcwd()}"
    )


def renders_frames(text: str) -> bool:
    """False when the env declares its render modes and ``rgb_array`` is not among them
    (``goalenvs play`` then watches it with ``--headless`` only); True otherwise, a factory
    that declares none and a spec that does not resolve included."""
    try:
        modes = resolve(text).render_modes
    except EnvSpecError:
        return True
    return modes is None or "rgb_array" in modes


def env_spec(text: str) -> EnvSpec:
    """The gymnasium :class:`EnvSpec` of an env spec (see :func:`resolve`)."""
    return resolve(text).spec


def make(text: str, **kwargs: Any) -> gym.Env:
    """``gym.make`` of an env spec in any form, with gymnasium's wrappers."""
    return gym.make(env_spec(text), **kwargs)


def suggestion(env_id: str) -> str | None:
    """The registered id a user probably meant by ``env_id`` (``goalenvs/`` in front)."""
    registry = gym.envs.registry
    if "/" not in env_id and f"goalenvs/{env_id}" in registry:
        return f"goalenvs/{env_id}"
    return None


def import_failure(module: str, error: BaseException) -> str:
    """One line saying that importing ``module`` (a module name or a file) failed with
    ``error``: see :func:`describe_error`."""
    return f"importing {module} failed: {describe_error(error)}"


def describe_error(error: BaseException) -> str:
    """``error`` in one line: its type and message, the exception that caused it when a
    library raised it as another (gymnasium turns MuJoCo's failed OpenGL import into
    "MuJoCo is not installed"), and, when ``MUJOCO_GL`` is set and OpenGL is what failed,
    the setting to change."""
    chain = _causes(error)
    text = f"{type(error).__name__}: {_message(error)}"
    root = chain[-1]
    if root is not error:
        text += f" (caused by {type(root).__name__}: {_message(root)})"
    hint = _gl_hint(chain)
    return f"{text}; {hint}" if hint else text


def rendering_error(error: BaseException) -> str | None:
    """One line for an error raised because MuJoCo found no OpenGL context to draw a frame
    with, and what to set instead (``MUJOCO_GL``); None for any other error."""
    chain = _causes(error)
    if not any(_about_opengl(one) for one in chain):
        return None
    hint = _gl_hint(chain) or f"set {_backends_but('glfw')} to draw offscreen"
    root = chain[-1]
    return f"{type(root).__name__}: {_message(root)}; {hint}"


# --------------------------------------------------------------------------- helpers


def _causes(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from, outermost first."""
    chain = [error]
    while len(chain) < 20:
        last = chain[-1]
        cause = last.__cause__ or (None if last.__suppress_context__ else last.__context__)
        if cause is None or cause in chain:
            break
        chain.append(cause)
    return chain


def _message(error: BaseException) -> str:
    """The message on one line; an exception made with several arguments (PyOpenGL's
    ``ImportError("Unable to load EGL library", reason, name, None)``) shows them joined,
    not as a tuple."""
    text = str(error)
    if len(error.args) > 1 and text == str(error.args):
        text = ": ".join(str(arg) for arg in error.args if arg is not None and str(arg))
    return " ".join(text.split()) or "(no message)"


def _gl_hint(chain: list[BaseException]) -> str | None:
    """What to set MUJOCO_GL to, when it is set and OpenGL failed to load under it."""
    value = os.environ.get("MUJOCO_GL", "").strip()
    if not value or not any(_about_opengl(error) for error in chain):
        return None
    return (
        f"MUJOCO_GL={value} is set and MuJoCo could not load that rendering backend here: "
        f"unset MUJOCO_GL, or set {_backends_but(value)}"
    )


def _backends_but(value: str) -> str:
    """``MUJOCO_GL=name (what it needs)`` for each backend but ``value``, joined by "or"."""
    return " or ".join(f"MUJOCO_GL={n} ({needs})" for n, needs in GL_BACKENDS.items() if n != value)


def _about_opengl(error: BaseException) -> bool:
    """Whether ``error`` speaks of OpenGL or was raised by the code that loads it."""
    if _GL_WORDS.search(f"{type(error).__name__} {error}"):
        return True
    for frame, _ in traceback.walk_tb(error.__traceback__):
        parts = Path(frame.f_code.co_filename).parts
        # PyOpenGL itself, or mujoco/gl_context.py and mujoco/{egl,osmesa,glfw,cgl}/.
        if "OpenGL" in parts or (
            "mujoco" in parts[-3:-1]
            and (parts[-1] == "gl_context.py" or parts[-2] in {*GL_BACKENDS, "cgl"})
        ):
            return True
    return False


def _names_file(left: str) -> bool:
    """Whether the part of a spec before its last ':' names a file (not a module)."""
    return left.endswith(".py") or "/" in left or "\\" in left


def _registered_env(env_id: str, text: str) -> ResolvedEnv:
    """The resolved env of a registered id, its entry point imported."""
    spec = _registered(env_id, text)
    return ResolvedEnv(text, env_id, spec, _entry_point(spec, text))


def _entry_point(spec: EnvSpec, text: str) -> Callable[..., Any] | None:
    """The class or function a registered ``module:Name`` entry point names, imported."""
    entry = spec.entry_point
    if entry is None or callable(entry):
        return entry
    module_name, sep, attribute = entry.partition(":")
    if not sep:
        raise EnvSpecError(f"env {text!r}: its registered entry point {entry!r} is not module:Name")
    target = getattr(_import_module(text, module_name), attribute, None)
    if not callable(target):
        raise EnvSpecError(
            f"env {text!r}: its registered entry point {entry!r} names nothing callable "
            f"in {module_name}"
        )
    return target


def _registered(env_id: str, text: str) -> EnvSpec:
    try:
        return gym.spec(env_id)
    except gym.error.Error as exc:
        message = str(exc).splitlines()[0].strip() if str(exc) else type(exc).__name__
        better = suggestion(env_id)
        if better is not None:
            raise EnvSpecError(
                f"unknown env id {text!r}; did you mean {better}? (goalenvs' ids "
                "carry the goalenvs/ namespace)"
            ) from None
        hint = (
            "`goalenvs list` prints goalenvs' ids; a third-party id needs its module "
            "first (module:EnvId, e.g. gymnasium_robotics:FetchReach-v4)"
            if env_id == text
            else "the module registered no such id"
        )
        raise EnvSpecError(f"unknown env id {text!r}: {message} {hint}") from None


def _file_without_name(text: str) -> str:
    path = Path(text)
    if not path.is_file():
        return f"env {text!r}: no such file: {path}; give path/to/file.py:ClassOrFactory"
    names: list[str] = []
    with contextlib.suppress(EnvSpecError):
        names = _env_names(_import_file(text, path))
    example = names[0] if names else "ClassOrFactory"
    found = f" ({path.name} defines {', '.join(names)})" if names else ""
    return (
        f"env {text!r} names a file but not the env in it: add ':' and the env class or "
        f"factory, e.g. {text}:{example}{found}"
    )


def _env_names(module: ModuleType) -> list[str]:
    """The env classes a module defines (not the ones it imports)."""
    return sorted(
        name
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and issubclass(value, gym.Env)
        and value.__module__ == module.__name__
    )


# The module name of a file a `file.py:Name` spec loads: known to this process only (a
# worker process loads the file itself, see goalenvs.train.env_workers.worker_source).
USER_MODULE_PREFIX = "_goalenvs_user_"


def _import_file(text: str, path: Path) -> ModuleType:
    if not path.is_file():
        raise EnvSpecError(f"env {text!r}: no such file: {path}")
    resolved = path.resolve()
    name = f"{USER_MODULE_PREFIX}{path.stem}_{abs(hash(str(resolved)))}"
    if name in sys.modules:
        return sys.modules[name]
    # As `python path/to/file.py` does: the file's folder is importable, so that the
    # file can import the modules beside it.
    folder = str(resolved.parent)
    if not any(_same_dir(entry, folder) for entry in sys.path):
        sys.path.insert(0, folder)
        importlib.invalidate_caches()
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise EnvSpecError(f"env {text!r}: {path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise EnvSpecError(f"env {text!r}: {import_failure(str(path), exc)}") from exc
    return module


def _import_module(text: str, module_name: str) -> ModuleType:
    _make_cwd_importable(module_name)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        package = module_name.split(".")[0]
        if exc.name is None or not f"{module_name}.".startswith(f"{exc.name}."):
            raise EnvSpecError(f"env {text!r}: {import_failure(module_name, exc)}") from exc
        if exc.name != package:
            raise EnvSpecError(
                f"env {text!r}: there is no module {exc.name!r}; check the spelling of "
                f"{module_name!r}"
            ) from None
        extra = EXTRAS.get(package)
        how = (
            f"pip install 'goalenvs[{extra}]'"
            if extra
            else f"pip install {PIP_NAMES[package]}"
            if package in PIP_NAMES
            else f"install the package that provides it ({package}), or run from the "
            f"folder that holds {package}.py"
        )
        raise EnvSpecError(
            f"env {text!r}: cannot import module {module_name!r}: it needs the package "
            f"{package!r}, which is not installed: {how}"
        ) from None
    except Exception as exc:
        raise EnvSpecError(f"env {text!r}: {import_failure(module_name, exc)}") from exc


def _make_cwd_importable(module_name: str) -> None:
    """Puts the current folder first on ``sys.path`` (as ``python -m`` does) when it holds
    the module's top-level package and is not importable yet."""
    cwd = os.getcwd()
    if "" in sys.path or any(_same_dir(entry, cwd) for entry in sys.path):
        return
    top = module_name.split(".")[0]
    if Path(cwd, f"{top}.py").is_file() or Path(cwd, top).is_dir():
        sys.path.insert(0, cwd)
        importlib.invalidate_caches()


def _same_dir(entry: str, cwd: str) -> bool:
    try:
        return os.path.samefile(entry or ".", cwd)
    except OSError:
        return False
