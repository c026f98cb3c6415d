"""Checks of every declared render mode."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from goalenvs.checker.context import Context, EnvCallError, SkipCheckError, uses_mujoco
from goalenvs.checker.registry import Outcome, register

_RENDER_FORMS = {
    "rgb_array": "a uint8 array of shape (H, W, 3)",
    "rgb_array_list": "a list of uint8 arrays of shape (H, W, 3)",
    "depth_array": "a 2-D array",
    "ansi": "a str",
}


def _rgb(x: object) -> bool:
    if not isinstance(x, np.ndarray):
        return False
    return x.dtype == np.uint8 and x.ndim == 3 and x.shape[-1] == 3 and x.size > 0


def _render_problem(mode: str, frame: object) -> str | None:
    ok = {
        "rgb_array": lambda: _rgb(frame),
        "rgb_array_list": lambda: (
            isinstance(frame, list) and len(frame) > 0 and all(map(_rgb, frame))
        ),
        "depth_array": lambda: isinstance(frame, np.ndarray) and frame.ndim == 2,
        "ansi": lambda: isinstance(frame, str),
    }[mode]()
    if ok:
        return None
    desc = (
        f"{type(frame).__name__} dtype {frame.dtype} shape {frame.shape}"
        if isinstance(frame, np.ndarray)
        else type(frame).__name__
    )
    return f"render_mode={mode!r} rendered {desc}, expected {_RENDER_FORMS[mode]}"


# What renderers say when the process has no OpenGL context (a headless machine):
# mujoco's FatalError, GLFW and EGL / OSMesa failures, pyglet / pybullet display errors.
_NO_GL = re.compile(
    r"OpenGL platform library has not been loaded|mjr_makeContext|GLFW|\bEGL\b|eglInitialize"
    r"|OSMesa|gladLoadGL|No OpenGL context|could not (open|connect to) display|"
    r"cannot connect to X server",
    re.IGNORECASE,
)


def _no_gl(error: BaseException) -> bool:
    return bool(_NO_GL.search(f"{type(error).__name__}: {error}"))


# Renderer family -> the error its context creation raised in this process: not tried
# again (mujoco blocks or aborts on a second attempt).
_GL_FAILED: dict[str, EnvCallError] = {}


def _renderer_family(env: object) -> str:
    if uses_mujoco(env):  # one OpenGL context family, whichever env failed it first
        return "mujoco"
    cls = type(getattr(env, "unwrapped", env))
    return f"{cls.__module__}.{cls.__qualname__}"


@contextlib.contextmanager
def _offscreen_video() -> Iterator[None]:
    """SDL's dummy video driver while the check renders off screen, unless the user chose
    a driver: pygame renderers (gymnasium's classic control) otherwise open the display
    and print ``XDG_RUNTIME_DIR`` errors on a machine without one."""
    if "SDL_VIDEODRIVER" in os.environ:
        yield
        return
    os.environ["SDL_VIDEODRIVER"] = "dummy"
    try:
        yield
    finally:
        os.environ.pop("SDL_VIDEODRIVER", None)


@register("render.modes", "error", "each declared render mode returns what gymnasium specifies")
def check_render_modes(ctx: Context, out: Outcome) -> None:
    modes = list(ctx.env.metadata.get("render_modes", []) or [])
    checkable = [m for m in modes if m in _RENDER_FORMS]
    if not checkable:
        raise SkipCheckError(f"declares no render mode that can be checked headless ({modes})")
    with _offscreen_video():
        _check_modes(ctx, out, modes, checkable)


def _check_modes(ctx: Context, out: Outcome, modes: list, checkable: list) -> None:
    own = getattr(ctx.env, "render_mode", None)
    notes: list[str] = []
    no_gl: list[tuple[str, Any]] = []
    family = _renderer_family(ctx.env)
    earlier = _GL_FAILED.get(family)
    for mode in checkable:
        if (no_gl or earlier) and mode != "ansi":
            # Another GL mode after a failed context creation can abort the process or
            # block it (mujoco: recursive static initialization in libc++): not tried.
            no_gl.append((mode, no_gl[0][1] if no_gl else earlier))
            continue
        if mode == own:
            env, built = ctx.env, False
        elif ctx.factory is not None:
            try:
                env = ctx.call(f"make(render_mode={mode!r})", ctx.factory, render_mode=mode)
            except EnvCallError as error:
                if _no_gl(error.error):
                    no_gl.append((mode, error))
                    _GL_FAILED[family] = error
                else:
                    out.fail(f"building the env with render_mode={mode!r} failed: {error.error}")
                continue
            built = True
        else:
            notes.append(mode)
            continue
        try:
            ctx.call("reset", env.reset, seed=ctx.seed)
            if mode == "rgb_array_list":
                ctx.call("step", env.step, env.action_space.sample())
            frame = ctx.call(f"render() with render_mode={mode!r}", env.render)
        except EnvCallError as error:
            if not _no_gl(error.error):
                raise
            no_gl.append((mode, error))
            _GL_FAILED[family] = error
            continue
        finally:
            if built:
                try:
                    ctx.call("close", env.close)
                except EnvCallError as error:
                    if not _no_gl(error.error):
                        raise
        problem = _render_problem(mode, frame)
        if problem:
            out.fail(problem)
    fps = ctx.env.metadata.get("render_fps")
    # gymnasium accepts an int or a float (panda-gym declares 25.0); video recorders too.
    bad_fps = (
        isinstance(fps, bool)
        or not isinstance(fps, (int, float, np.integer, np.floating))
        or not np.isfinite(fps)
        or fps <= 0
    )
    if ("rgb_array" in modes or "human" in modes) and bad_fps:
        out.fail(
            f"metadata['render_fps'] = {fps!r}, expected a positive number "
            "(video recorders and play loops read it)"
        )
    if out.failed:
        return
    if no_gl:
        first = no_gl[0][1]
        modes_gl = [m for m, _ in no_gl]
        again = " (failed earlier in this process; not retried)" if earlier else ""
        raise SkipCheckError(
            f"render modes {modes_gl} need an OpenGL context this process does not have{again} "
            f"({type(first.error).__name__}: {str(first.error).splitlines()[0][:90]}...): a setup "
            "fact, not an env defect; on a headless machine set MUJOCO_GL=egl (GPU) or "
            "MUJOCO_GL=osmesa (CPU, with libosmesa) and PYOPENGL_PLATFORM to match"
        )
    if notes and len(notes) == len(checkable):
        raise SkipCheckError(f"modes {notes} need a way to build the env (a spec, not an object)")
