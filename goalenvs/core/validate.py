"""Argument checks: each fails with a message that names the argument, the value and
what was expected."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

_V = TypeVar("_V")  # a checked value, returned as it was given


def parse_json_object(flag: str, text: str | None) -> dict[str, object]:
    """The JSON object given to a ``--kwargs``-style flag (``{}`` when it is absent).

    Raises ValueError naming the flag and the text when it is not JSON or not an object.
    """
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{flag} {text!r} is not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag} must be a JSON object like '{{\"n_bits\": 50}}', got {text!r}")
    return value


def check_choice(name: str, value: _V, choices: Iterable[object]) -> _V:
    """Returns ``value`` when it is one of ``choices``, else raises a ValueError naming both."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not valid; expected one of {list(choices)}")
    return value


def check_positive(name: str, value: _V, *, integer: bool = False, minimum: float = 0.0) -> _V:
    """Checks that a constructor constant is a finite number above ``minimum``."""
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, kinds):
        kind = "an integer" if integer else "a number"
        raise TypeError(f"{name} must be {kind}, got {value!r} ({type(value).__name__})")
    if not np.isfinite(value) or float(value) <= minimum:
        raise ValueError(f"{name} must be > {minimum}, got {value!r}")
    return value


def check_int(name: str, value: _V, minimum: int) -> _V:
    """Checks that ``value`` is an integer (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_in_range(
    name: str,
    value: _V,
    low: float = 0.0,
    high: float = 1.0,
    *,
    open_low: bool = False,
    open_high: bool = False,
    none_ok: bool = False,
) -> _V:
    """Checks that ``value`` is a number in the interval from ``low`` to ``high``.

    The ends are included unless ``open_low`` / ``open_high``; ``none_ok`` lets None
    through (a setting that is off). The message writes the interval as a reader would,
    e.g. ``gamma must be in (0, 1) or None, got 1.0``.
    """
    if value is None and none_ok:
        return value
    interval = f"{'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
    interval += " or None" if none_ok else ""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a float in {interval}, got {value!r}")
    number = float(value)
    above = number > low if open_low else number >= low
    below = number < high if open_high else number <= high
    if not (above and below):
        raise ValueError(f"{name} must be in {interval}, got {value}")
    return value


def check_action(action: object, space: spaces.Space, name: str = "action") -> np.ndarray:
    """Validates one action for ``space`` and returns it as an array.

    Box actions: the shape must match and the values must be finite (NaN or inf is an
    error); finite values outside the bounds are clipped to them, as noisy policies
    routinely overshoot. Discrete actions: an integer in ``[start, start + n)``, else an
    error. MultiBinary: a 0/1 array of the space's shape.
    """
    if isinstance(space, spaces.Box):
        arr = np.asarray(action)
        if arr.dtype.kind not in "fiu":
            raise TypeError(
                f"{name} must be a real-valued array for {space}, got dtype {arr.dtype}: {action!r}"
            )
        if arr.shape != space.shape:
            raise ValueError(
                f"{name} has shape {arr.shape}, expected {space.shape} for {space}: {action!r}"
            )
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} must be finite, got {arr!r} for {space}")
        # maximum/minimum rather than np.clip, whose Python wrapper dominates on one action.
        return np.minimum(np.maximum(arr, space.low), space.high).astype(space.dtype, copy=False)
    if isinstance(space, spaces.Discrete):
        if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
            value = action  # the common case, an int: no array round trip
        else:
            arr = np.asarray(action)
            if arr.shape not in ((), (1,)) or arr.dtype.kind not in "iu":
                raise TypeError(
                    f"{name} must be an integer for {space}, got {action!r} "
                    f"(shape {arr.shape}, dtype {arr.dtype})"
                )
            value = int(arr.reshape(()))
        if not space.start <= value < space.start + space.n:
            raise ValueError(
                f"{name}={value} is outside {space}: expected an integer in "
                f"[{space.start}, {space.start + space.n})"
            )
        return np.asarray(value, dtype=np.int64)
    if isinstance(space, spaces.MultiBinary):
        arr = np.asarray(action)
        if arr.shape != space.shape or not np.isin(arr, (0, 1)).all():
            raise ValueError(f"{name} must be a 0/1 array of shape {space.shape}, got {action!r}")
        return arr.astype(np.int8)
    raise TypeError(f"check_action does not support {space}")


def check_actions(
    actions: object,
    single_space: spaces.Space,
    num_envs: int,
    device: Any = None,
    bounds: Any = None,
) -> Any:
    """Validates a batch of ``num_envs`` actions with the rules of :func:`check_action`.

    With a torch ``device`` (a vector twin's), ``actions`` is a tensor there or an
    array-like (copied there) and comes back as a tensor there; ``bounds`` is the Box's
    ``(low, high)``, as tensors there or two floats. One host synchronisation per call.
    """
    torch: Any = None
    if device is None:
        arr: Any = np.asarray(actions)
        real, integer = arr.dtype.kind in "fiu", arr.dtype.kind in "iu"
    else:
        torch = importlib.import_module("torch")
        if isinstance(actions, torch.Tensor) and actions.device != device:
            raise ValueError(
                f"actions is a tensor on {actions.device}, expected one on this env's device "
                f"{device} (or an array-like)"
            )
        if not isinstance(actions, torch.Tensor):
            actions = torch.as_tensor(np.asarray(actions), device=device)
        arr = actions
        real = not (arr.is_complex() or arr.dtype == torch.bool)
        integer = real and not arr.is_floating_point()
    shape = tuple(arr.shape)
    if isinstance(single_space, spaces.Box):
        expected = (num_envs, *single_space.shape)
        if not real:
            raise TypeError(f"actions must be a real-valued array, got dtype {arr.dtype}")
        if shape != expected:
            raise ValueError(
                f"actions has shape {shape}, expected {expected} (num_envs, *{single_space.shape})"
            )
        low, high = (single_space.low, single_space.high) if torch is None else bounds
        # Fast path (numpy): every value inside every dimension's bounds needs no clipping
        # and is finite (NaN fails both comparisons). Flat min/max cost a fraction of
        # np.clip or of comparisons broadcast over a short last axis.
        if torch is None and arr.size and arr.min() >= low.max() and arr.max() <= high.min():
            return arr.astype(single_space.dtype, copy=False)
        if torch is not None and arr.dtype != torch.float32:
            arr = arr.to(torch.float32)
        finite = (np if torch is None else torch).isfinite(arr).reshape(num_envs, -1).all(1)
        if not bool(finite.all()):
            bad = [i for i, ok in enumerate(finite.tolist()) if not ok][:8]
            raise ValueError(f"actions must be finite; sub-envs {bad} got {arr[bad[0]]!r}")
        if torch is not None:
            return torch.clamp(arr, low, high)
        return np.minimum(np.maximum(arr, low), high).astype(single_space.dtype, copy=False)
    if isinstance(single_space, spaces.Discrete):
        if not integer:
            raise TypeError(f"actions must be integers for {single_space}, got dtype {arr.dtype}")
        if shape != (num_envs,):
            raise ValueError(f"actions has shape {shape}, expected ({num_envs},)")
        lo, hi = single_space.start, single_space.start + single_space.n
        # numpy: two reductions first; the per-element scan only runs to name a bad sub-env.
        if torch is None:
            outside = bool(arr.size) and (arr.min() < lo or arr.max() >= hi)
        else:
            outside = bool(((arr < lo) | (arr >= hi)).any())
        if outside:
            first = next(i for i, a in enumerate(arr.tolist()) if not lo <= a < hi)
            raise ValueError(
                f"actions[{first}]={int(arr[first])} is outside {single_space}: expected "
                f"integers in [{lo}, {hi})"
            )
        return arr.astype(np.int64, copy=False) if torch is None else arr.to(torch.int64)
    raise TypeError(f"check_actions does not support {single_space}")


def check_tensor_actions(
    actions: object, single_space: spaces.Space, num_envs: int, device: Any, bounds: Any = None
) -> Any:
    """:func:`check_actions` for a vector twin on the torch ``device``."""
    return check_actions(actions, single_space, num_envs, device, bounds)


def check_goal_option(goal: object, space: spaces.Space, batch: int | None = None) -> np.ndarray:
    """Validates a goal passed as ``reset(options={"goal": ...})`` against the desired-goal
    ``space``, a Box.

    For a vector env (``batch`` given) the goal may be one goal, used for every reset
    sub-env, or one per sub-env.
    """
    if not isinstance(space, spaces.Box):
        raise TypeError(f"a pinned goal is checked against a Box goal space, got {space}")
    arr = np.asarray(goal, dtype=np.float64)
    shapes = [space.shape] if batch is None else [space.shape, (batch, *space.shape)]
    if arr.shape not in shapes:
        raise ValueError(
            f"options['goal'] has shape {arr.shape}, expected one of {shapes} for {space}"
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < space.low) or np.any(arr > space.high):
        raise ValueError(
            f"options['goal']={arr.tolist()} is outside the goal space [{space.low.tolist()}, "
            f"{space.high.tolist()}]"
        )
    return arr.astype(space.dtype)


_AUTORESET_NAMES = {
    **{mode.value: mode for mode in AutoresetMode},
    **{mode.name.lower(): mode for mode in AutoresetMode},
}


def parse_autoreset_mode(value: str | AutoresetMode) -> AutoresetMode:
    """An :class:`AutoresetMode` from itself, its value (``"NextStep"``) or its snake-case
    name (``"next_step"``, ``"same_step"``, ``"disabled"``), as the docstrings spell them."""
    if isinstance(value, AutoresetMode):
        return value
    mode = _AUTORESET_NAMES.get(value) if isinstance(value, str) else None
    if mode is None:
        raise ValueError(
            f"autoreset_mode={value!r} is not valid; expected one of {sorted(_AUTORESET_NAMES)}"
        )
    return mode
