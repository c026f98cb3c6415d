"""Fingerprints: seeded rollouts of an env, written once and compared on every later run
(``goalenvs check ENV --fingerprint FILE``; docs/checks.md says what one holds).

For each of :data:`SEEDS`, a stored action sequence replayed from ``reset(seed=seed)``
(the goal arrays, reward, flags and is_success per step) and ``compute_reward`` along
the line from the reset's achieved goal to its desired goal; numbers kept to
:data:`DIGITS` significant digits and compared with :data:`RTOL` and :data:`ATOL`."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs.core.io import atomic_write, space_to_json

FORMAT_VERSION = 1
SEEDS = (0, 1, 2)
STEPS = 20  # per seed, fewer when the episode ends first
# Achieved goals at these fractions of the way from the reset's achieved goal to its
# desired goal, each paired with that desired goal in one compute_reward call.
PATH_POINTS = 21
RTOL = 1e-4
ATOL = 1e-5
DIGITS = 6
# The per-step keys in the order they are compared; step 0 (the reset) has no reward,
# terminated or truncated.
STEP_KEYS = (
    "observation", "achieved_goal", "desired_goal", "reward", "terminated", "truncated",
    "is_success",
)  # fmt: skip


class FingerprintError(ValueError):
    """A fingerprint file that cannot be compared with this env; one line saying why."""


@dataclass(frozen=True)
class Verdict:
    """What ``--fingerprint FILE`` found: ``status`` is ``written``, ``unchanged``,
    ``changed`` or ``error``; ``message`` is the one line printed."""

    path: str
    status: str
    message: str

    @property
    def changed(self) -> bool:
        """Whether the env moved away from the fingerprint."""
        return self.status == "changed"

    def to_dict(self) -> dict[str, str]:
        """The verdict for ``--json``."""
        return {"file": self.path, "status": self.status, "message": self.message}


# --------------------------------------------------------------------------- taking one


def take(
    env: gym.Env,
    env_id: str,
    *,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    seeds: tuple[int, ...] = SEEDS,
    steps: int = STEPS,
    actions: dict[int, list] | None = None,
) -> dict[str, Any]:
    """The fingerprint of ``env`` as plain JSON data; ``actions`` maps a seed to the
    actions to replay, else they are drawn from ``numpy.random.default_rng(seed)``."""
    rollouts = []
    for seed in seeds:
        sequence = (actions or {}).get(seed)
        if sequence is None:
            sequence = _draw_actions(env.action_space, seed, steps)
        rollouts.append(_rollout(env, seed, sequence))
    return {
        "format_version": FORMAT_VERSION,
        "env_id": env_id,
        **_settings(env_kwargs, max_episode_steps),
        "observation_space": _space(env.observation_space),
        "action_space": _space(env.action_space),
        "rtol": RTOL,
        "atol": ATOL,
        "rollouts": rollouts,
    }


def _draw_actions(space: spaces.Space, seed: int, steps: int) -> list:
    """``steps`` actions of ``space`` from ``numpy.random.default_rng(seed)``, as JSON
    lists (a Box's values rounded to 3 decimals, inside its bounds; an unbounded side
    draws from [-1, 1])."""
    rng = np.random.default_rng(seed)
    if isinstance(space, spaces.Box):
        low = np.where(np.isfinite(space.low), space.low, -1.0).astype(np.float64)
        high = np.where(np.isfinite(space.high), space.high, 1.0).astype(np.float64)
        drawn = np.clip(np.round(rng.uniform(low, high, (steps, *space.shape)), 3), low, high)
        drawn = drawn + 0.0  # no -0.0
        if np.issubdtype(space.dtype, np.integer):
            drawn = np.round(drawn)
        return drawn.tolist()
    if isinstance(space, spaces.Discrete):
        return (rng.integers(0, int(space.n), steps) + int(space.start)).tolist()
    if isinstance(space, spaces.MultiBinary):
        return rng.integers(0, 2, (steps, *space.shape)).tolist()
    if isinstance(space, spaces.MultiDiscrete):
        return (rng.integers(0, space.nvec, (steps, *space.shape)) + space.start).tolist()
    raise FingerprintError(
        f"action space {space}: a fingerprint takes a Box, Discrete, MultiBinary or "
        "MultiDiscrete action space"
    )


def _action(space: spaces.Space, value: Any) -> Any:
    if isinstance(space, spaces.Discrete):
        return np.int64(value)
    return np.asarray(value, dtype=space.dtype)


def _rollout(env: gym.Env, seed: int, actions: list) -> dict[str, Any]:
    """One seed's rollout: the stored columns, step 0 the reset."""
    obs, info = env.reset(seed=seed)
    columns: dict[str, list] = {key: [] for key in STEP_KEYS}
    _record(columns, obs, None, None, None, info)
    path = _path_rewards(env, obs, info)
    used = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(_action(env.action_space, action))
        used.append(action)
        _record(columns, obs, reward, terminated, truncated, info)
        if terminated or truncated:
            break
    present = {k: v for k, v in columns.items() if any(x is not None for x in v)}
    return {"seed": seed, "actions": used, **present, "compute_reward": path}


def _record(columns: dict[str, list], obs: Any, reward, terminated, truncated, info) -> None:
    arrays = obs if isinstance(obs, dict) else {"observation": obs}
    for key in ("observation", "achieved_goal", "desired_goal"):
        columns[key].append(_plain(_flat(arrays[key])) if key in arrays else None)
    columns["reward"].append(None if reward is None else _plain(float(reward)))
    columns["terminated"].append(None if terminated is None else bool(terminated))
    columns["truncated"].append(None if truncated is None else bool(truncated))
    success = info.get("is_success") if isinstance(info, dict) else None
    columns["is_success"].append(None if success is None else _plain(float(success)))


def _flat(value: Any) -> list:
    if isinstance(value, dict):
        return [x for key in sorted(value) for x in _flat(value[key])]
    return np.asarray(value, dtype=np.float64).ravel().tolist()


def _path_rewards(env: gym.Env, obs: Any, info: dict) -> list | None:
    """``compute_reward`` of achieved goals from the reset's achieved goal to its desired
    goal (:data:`PATH_POINTS` of them, one call each), against that desired goal."""
    if not isinstance(obs, dict) or not {"achieved_goal", "desired_goal"} <= set(obs):
        return None
    try:
        compute_reward = env.get_wrapper_attr("compute_reward")
    except AttributeError:
        return None
    achieved = np.asarray(obs["achieved_goal"])
    desired = np.asarray(obs["desired_goal"])
    rewards: list = []
    for fraction in np.linspace(0.0, 1.0, PATH_POINTS):
        goal = achieved + fraction * (desired.astype(np.float64) - achieved)
        if np.issubdtype(achieved.dtype, np.integer):
            goal = np.round(goal)
        try:
            value = compute_reward(goal.astype(achieved.dtype), desired.copy(), info)
            rewards.append(_plain(float(np.asarray(value, dtype=np.float64).reshape(-1)[0])))
        except Exception as error:  # a change in raising is a change too
            rewards.append(f"raised {type(error).__name__}")
    return rewards


def _plain(value: Any) -> Any:
    """JSON-ready data: floats to 6 significant digits (whole numbers as ints), non-finite
    floats as the strings ``nan``, ``inf`` and ``-inf``."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        number = float(value)
        if not math.isfinite(number):
            return str(number)
        rounded = float(f"{number:.{DIGITS}g}")
        return int(rounded) if rounded.is_integer() and abs(rounded) < 1e15 else rounded
    return value


def _space(space: spaces.Space) -> Any:
    """A space as JSON data: :func:`goalenvs.core.io.space_to_json`'s, its Box bounds exact,
    one number where a bound is the same for every element (``-Infinity`` and
    ``Infinity`` as strings); the text of a kind the codec does not describe."""
    try:
        described = space_to_json(space)
    except TypeError:
        return {"type": type(space).__name__, "text": str(space)}
    return json.loads(json.dumps(_bounds(described, uniform=True)), parse_constant=str)


def _bounds(described: Any, uniform: bool) -> Any:
    """``described`` with each Box bound one number where it is uniform (``uniform``), or
    back to one number per element (``not uniform``)."""
    if not isinstance(described, dict):
        return described
    if described.get("type") == "Dict":
        inner = {k: _bounds(v, uniform) for k, v in described["spaces"].items()}
        return {**described, "spaces": inner}
    if described.get("type") == "Box":
        for side in ("low", "high"):
            values = np.asarray(described[side], dtype=np.float64)
            if uniform and values.size and (values == values.flat[0]).all():
                described = {**described, side: values.flat[0].item()}
            elif not uniform and values.ndim == 0:
                described = {**described, side: np.full(described["shape"], values).tolist()}
    return described


# --------------------------------------------------------------------------- the file


def read(path: str | os.PathLike) -> dict[str, Any]:
    """The fingerprint stored in ``path``; :class:`FingerprintError` (one line) when it
    is not JSON, not a fingerprint or of another format version."""
    expected = "expected a fingerprint written by goalenvs check --fingerprint"
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as error:
        raise FingerprintError(f"--fingerprint {path}: cannot read it ({error})") from None
    except json.JSONDecodeError as error:
        where = f"{error.msg} at line {error.lineno}"
        raise FingerprintError(f"--fingerprint {path}: not JSON ({where}); {expected}") from None
    if not isinstance(data, dict) or "format_version" not in data:
        raise FingerprintError(f"--fingerprint {path}: no format_version; {expected}")
    if data["format_version"] != FORMAT_VERSION:
        raise FingerprintError(
            f"--fingerprint {path}: format version {data['format_version']!r}, this goalenvs "
            f"reads version {FORMAT_VERSION}; delete the file to write it again"
        )
    rollouts = data.get("rollouts")
    if not isinstance(rollouts, list) or not all(
        isinstance(r, dict) and isinstance(r.get("seed"), int) and "actions" in r for r in rollouts
    ):
        what = "its rollouts are not a list of seeded rollouts"
        raise FingerprintError(f"--fingerprint {path}: {what}; {expected}")
    return data


def write(path: str | os.PathLike, data: dict[str, Any]) -> None:
    """Writes ``data`` to ``path`` atomically (its folder made when missing), one step of
    one key per line."""
    text = _dumps(data) + "\n"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: f.write(text.encode()))


def _dumps(value: Any, depth: int = 0) -> str:
    """JSON with each list of numbers on one line (a change is one line of a diff)."""
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {_dumps(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value):
        rows = [f"{inner}{_dumps(v, depth + 1)}" for v in value]
        return "[\n" + ",\n".join(rows) + f"\n{pad}]"
    return json.dumps(value, separators=(", ", ": "))


# --------------------------------------------------------------------------- comparing


def env_id(env: Any, path: str | os.PathLike = "FILE") -> str:
    """The id a fingerprint of ``env`` carries: its registered id, else its class name;
    :class:`FingerprintError` for a vector env (a fingerprint takes a single env)."""
    if not isinstance(env, gym.Env):
        raise FingerprintError(
            f"--fingerprint {os.fspath(path)}: a fingerprint takes a single env; this one is a "
            f"{type(env).__name__}"
        )
    return env.spec.id if env.spec is not None else type(env.unwrapped).__name__


def check(
    env: gym.Env,
    env_id: str,
    path: str | os.PathLike,
    *,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
) -> Verdict:
    """Writes the fingerprint of ``env`` to ``path`` when missing, else compares with it;
    :class:`FingerprintError` for a file that cannot be compared."""
    shown = os.fspath(path)
    built: dict[str, Any] = {"env_kwargs": env_kwargs, "max_episode_steps": max_episode_steps}
    if not Path(path).exists():
        data = take(env, env_id, **built)
        write(path, data)
        steps = sum(len(r["actions"]) for r in data["rollouts"])
        return Verdict(
            shown,
            "written",
            f"fingerprint written to {shown}: {len(data['rollouts'])} seeds, {steps} steps; "
            "later runs compare against it",
        )
    expected = read(path)
    _ensure_comparable(expected, env, env_id, shown, **built)
    stored = {r["seed"]: r["actions"] for r in expected["rollouts"]}
    for seed, sequence in stored.items():
        _ensure_actions(env.action_space, seed, sequence, shown)
    actual = take(env, env_id, **built, seeds=tuple(stored), actions=stored)
    try:
        moved = compare(expected, actual)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as error:
        raise FingerprintError(
            f"--fingerprint {shown}: its rollouts cannot be read ({type(error).__name__}: "
            f"{error}); delete the file to write it again"
        ) from None
    if moved is None:
        return Verdict(shown, "unchanged", f"fingerprint unchanged: {shown}")
    return Verdict(shown, "changed", f"fingerprint changed ({shown}): {moved}")


def _ensure_actions(space: spaces.Space, seed: int, actions: Any, shown: str) -> None:
    """Raises :class:`FingerprintError` unless every stored action lies in ``space``."""
    if not isinstance(actions, list):
        raise FingerprintError(f"--fingerprint {shown}: seed {seed}'s actions are not a list")
    for step, action in enumerate(actions, 1):
        try:
            fits = space.contains(_action(space, action))
        except (TypeError, ValueError):
            fits = False
        if not fits:
            raise FingerprintError(
                f"--fingerprint {shown}: seed {seed}'s action {step} ({json.dumps(action)}) is "
                f"not in the action space {space}"
            )


def _settings(env_kwargs: dict[str, Any] | None, max_episode_steps: int | None) -> dict:
    return {"env_kwargs": _plain(env_kwargs or {}), "max_episode_steps": max_episode_steps}


def _setting(value: Any) -> str:
    return "none" if value is None else json.dumps(value)


def _ensure_comparable(
    expected: dict[str, Any],
    env: gym.Env,
    env_id: str,
    shown: str,
    *,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
) -> None:
    """Raises :class:`FingerprintError` naming what differs when the fingerprint is of
    another env id, env kwargs or episode length, or another observation or action
    space."""
    if expected.get("env_id") != env_id:
        raise FingerprintError(
            f"--fingerprint {shown}: a fingerprint of env {expected.get('env_id')!r}, not of "
            f"{env_id!r}"
        )
    flags = {"env_kwargs": "--env-kwargs", "max_episode_steps": "--max-episode-steps"}
    for key, now in _settings(env_kwargs, max_episode_steps).items():
        then = expected.get(key, {} if key == "env_kwargs" else None)
        if then != now:
            raise FingerprintError(
                f"--fingerprint {shown}: taken with {flags[key]} {_setting(then)}, this run "
                f"has {_setting(now)}"
            )
    for name in ("observation_space", "action_space"):
        current = _space(getattr(env, name))
        if expected.get(name) != current:
            where, old, new = _space_difference(expected.get(name), current)
            raise FingerprintError(
                f"--fingerprint {shown}: a different {name.replace('_', ' ')}{where}: "
                f"the file has {_space_text(old)}, this env has {_space_text(new)}"
            )


def _space_difference(stored: Any, current: Any) -> tuple[str, Any, Any]:
    """``(" at 'key'", stored part, current part)``: the first Dict key whose space
    differs, when both are Dicts (``("", stored, current)`` otherwise)."""
    both_dicts = all(isinstance(d, dict) and d.get("type") == "Dict" for d in (stored, current))
    if both_dicts:
        for key in sorted(set(stored["spaces"]) | set(current["spaces"])):
            old, new = stored["spaces"].get(key), current["spaces"].get(key)
            if old != new:
                where, old_part, new_part = _space_difference(old, new)
                return f" at {key!r}{where}", old_part, new_part
    return "", stored, current


def _space_text(stored: Any) -> str:
    """A stored space in gymnasium's words, where the codec can read it back."""
    from goalenvs.core.io import space_from_json

    if stored is None:
        return "none"
    try:
        return str(space_from_json(_bounds(stored, uniform=False)))
    except Exception:  # a kind the codec does not read: its stored text
        return str(stored.get("text")) if isinstance(stored, dict) else json.dumps(stored)


def compare(expected: dict[str, Any], actual: dict[str, Any]) -> str | None:
    """``None`` when every stored value is matched within the file's tolerance, else one
    line naming the first seed, step and key that moved, by how much, and how many
    values moved in all."""
    rtol, atol = float(expected.get("rtol", RTOL)), float(expected.get("atol", ATOL))
    first: str | None = None
    count = 0
    for stored, now in zip(expected["rollouts"], actual["rollouts"], strict=True):
        seed = stored["seed"]
        steps = max(len(stored.get("observation", [])), len(now.get("observation", [])))
        for step in range(steps):
            for key in STEP_KEYS:
                moved = _difference(_at(stored, key, step), _at(now, key, step), rtol, atol)
                if moved:
                    count += moved[0]
                    first = first or f"seed {seed}, step {step}, {key}{moved[1]}"
            if step > 0:
                continue
            # the reset's compute_reward along the way to the goal belongs to step 0
            old_path, new_path = stored.get("compute_reward"), now.get("compute_reward")
            for point in range(max(len(old_path or []), len(new_path or []))):
                moved = _difference(_item(old_path, point), _item(new_path, point), rtol, atol)
                if moved:
                    count += moved[0]
                    share = point / (PATH_POINTS - 1)
                    first = first or (
                        f"seed {seed}, step 0, compute_reward[{point}] (an achieved goal "
                        f"{share:.0%} of the way to the desired goal){moved[1]}"
                    )
    if first is None:
        return None
    return f"{first} ({count} value(s) moved in all)"


def _at(rollout: dict[str, Any], key: str, step: int) -> Any:
    """The value of ``key`` at ``step``, ``"absent"`` past the rollout's end."""
    column = rollout.get(key)
    if column is None:
        return None if step < len(rollout.get("observation", [])) else "absent"
    return _item(column, step)


def _item(column: list | None, index: int) -> Any:
    if column is None or index >= len(column):
        return "absent"
    return column[index]


def _difference(old: Any, new: Any, rtol: float, atol: float) -> tuple[int, str] | None:
    """``(values moved, text)`` when ``new`` is not ``old`` within the tolerance."""
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        try:
            a = np.asarray(old, dtype=np.float64)
            b = np.asarray(new, dtype=np.float64)
        except (TypeError, ValueError):
            return None if old == new else (1, f": {old} in the file, {new} now")
        close = np.isclose(b, a, rtol=rtol, atol=atol, equal_nan=True)
        if close.all():
            return None
        index = int(np.argmin(close))
        return int((~close).sum()), (
            f"[{index}]: {a[index]:.6g} in the file, {b[index]:.6g} now "
            f"(by {abs(b[index] - a[index]):.6g})"
        )
    if _is_number(old) and _is_number(new):
        x, y = float(old), float(new)
        if math.isclose(y, x, rel_tol=rtol, abs_tol=atol) or (math.isnan(x) and math.isnan(y)):
            return None
        return 1, f": {x:.6g} in the file, {y:.6g} now (by {abs(y - x):.6g})"
    if old == new:
        return None
    return 1, f": {_shown(old)} in the file, {_shown(new)} now"


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, str) and value in ("nan", "inf", "-inf")


def _shown(value: Any) -> str:
    if value == "absent":
        return "no such step"
    if isinstance(value, list):
        return f"{len(value)} values"
    return json.dumps(value)
