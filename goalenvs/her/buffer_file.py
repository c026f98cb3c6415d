"""The HER buffer's file: one ``.npz`` (no pickle), the same on numpy and on torch. The
files and pickles of the two buffers it replaced (goalenvs 148f048 and earlier: the numpy
buffer's ``.npz``, the device buffer's torch file) read into its state; anything else is
the ValueError that names the file and what to do."""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from goalenvs.core.backend import is_tensor, resolve_device
from goalenvs.core.io import atomic_write
from goalenvs.her.buffer_state import (
    COUNTERS,
    BufferState,
    HerBufferState,
    HerStorage,
    NumpyOps,
    TorchOps,
    empty_state,
    field_views,
    packed_names,
)
from goalenvs.her.settings import IN_EVERY_FILE, BufferSettings

__all__ = ["FILE_FORMAT", "FILE_VERSION", "legacy_state", "read_file", "write_file"]


FILE_FORMAT = "goalenvs.her.buffer"
FILE_VERSION = 3  # after the numpy buffer's 2 and the device buffer's 1


def write_file(state: BufferState, path: str | os.PathLike) -> None:
    """Writes ``state`` to ``path`` (see :meth:`HerReplayBuffer.save`)."""
    torch_rng = is_tensor(state.rng_state)
    meta = {
        "format": FILE_FORMAT,
        "version": FILE_VERSION,
        **state.settings.to_meta(),
        "steps_added": state.steps_added,
        "max_priority": state.max_priority,
        "rng_state": None if torch_rng else state.rng_state,
        "device": None if state.device is None else str(state.device),
    }
    arrays: dict[str, Any] = {f"field__{name}": v for name, v in state.fields.items()}
    arrays.update({f"counter__{name}": value for name, value in state.counters.items()})
    if state.priorities is not None:
        arrays["priorities"] = state.priorities
    if torch_rng:
        arrays["torch_generator"] = state.rng_state
    arrays = {k: v.detach().cpu().numpy() if is_tensor(v) else v for k, v in arrays.items()}
    arrays["meta"] = np.array(json.dumps(meta))
    atomic_write(path, lambda file: np.savez(file, **arrays))


def read_file(path: str | os.PathLike, device: Any = "saved") -> BufferState:
    """The state :func:`write_file` wrote to ``path``, on numpy (``device=None``), torch's
    ``device`` or where it was saved from (``"saved"``)."""
    name = os.fspath(path)
    try:
        return _read_file(name, device)
    except FileNotFoundError:
        raise
    except ValueError as error:
        if name in str(error):
            raise
        failure: Exception = error
    except (OSError, EOFError, KeyError, zipfile.BadZipFile) as error:
        failure = error  # np.load's, or a member's read lazily after the archive opened
    raise ValueError(
        f"{name} cannot be read as a HER buffer file ({type(failure).__name__}: {failure}): "
        "it is truncated, corrupt or not written by HerReplayBuffer.save"
    ) from None


def _read_file(name: str, device: Any) -> BufferState:
    data = np.load(name, allow_pickle=False)
    if not hasattr(data, "files"):  # a .npy file: one array
        raise ValueError(f"{name} is not a HER buffer file: it holds one array, not an .npz")
    with data:
        if "meta" not in data.files:  # a torch file: the old device buffer's?
            return _read_old_device_file(name, device)
        meta = json.loads(str(data["meta"]))
        kind = meta.get("format") if isinstance(meta, dict) else None
        if kind == _OLD_NUMPY_FORMAT and meta.get("version") == 2:
            arrays = {key: data[key] for key in data.files}
            return _read_old_numpy_file(name, arrays, meta, device)
        if kind != FILE_FORMAT or meta.get("version") != FILE_VERSION:
            raise ValueError(
                f"{name} is not a HER buffer file of this goalenvs (format {kind!r}, version "
                f"{meta.get('version') if isinstance(meta, dict) else None!r}; expected "
                f"{FILE_FORMAT!r} version {FILE_VERSION}): a file of goalenvs 148f048 or "
                "earlier loads there; here, start with an empty buffer"
            )
        settings = _settings_of(name, meta)
        if device == "saved":
            device = meta.get("device")
        host = {key[7:]: data[key] for key in data.files if key.startswith("field__")}
        host.update({key: data[f"counter__{key}"] for key in COUNTERS})
        if "priorities" in data.files:
            host["priorities"] = data["priorities"]
            if not (np.isfinite(host["priorities"]) & (host["priorities"] >= 0)).all():
                raise ValueError(f"{name}: priorities hold negative or NaN values")
        rng_state: Any = meta.get("rng_state") if device is None else None
        saved_generator = "torch_generator" in data.files  # of a torch buffer on the CPU
        if saved_generator and device is not None and resolve_device(device).type == "cpu":
            import torch

            rng_state = torch.from_numpy(data["torch_generator"])
        steps, max_priority = int(meta["steps_added"]), float(meta["max_priority"])
    return _as_state(settings, device, host, steps, max_priority, rng_state, name)


# The files of goalenvs 148f048 and earlier: the numpy buffer's .npz (its own layout, an
# extra row per episode for the final observation) and the device buffer's torch file
# (this layout, packed), saved with every episode in progress truncated.
_OLD_NUMPY_FORMAT = "goalenvs.her.HerReplayBuffer"
_OLD_DEVICE_FORMAT = "goalenvs.her.DeviceHerReplayBuffer"


def _settings_of(name: str, meta: Mapping[str, Any]) -> BufferSettings:
    try:
        return BufferSettings.from_meta(meta)
    except KeyError as error:
        raise ValueError(f"{name}: the metadata has no {error} entry") from None
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None


def _as_state(
    settings: BufferSettings,
    device: Any,
    host: dict[str, Any],
    steps_added: int,
    max_priority: float,
    rng_state: Any,
    name: str,
) -> BufferState:
    """A state from numpy arrays ``host`` (fields and counters by name, ``priorities``) on
    numpy (``device`` None) or torch's ``device``, or the ValueError naming the file."""
    ops = NumpyOps() if device is None else TorchOps(device)
    empty = empty_state(settings, ops)
    fields = {key: ops.asarray(value) for key, value in host.items() if key in empty.fields}
    fields.update({k: ops.asarray(v) for k, v in host.items() if k.startswith("info/")})
    for field, value in empty.fields.items():
        if field not in fields or tuple(fields[field].shape) != tuple(value.shape):
            raise ValueError(f"{name}: the field {field!r} is missing or of another shape")
    counters = {key: ops.asarray(host[key]) for key in COUNTERS}
    priorities = host.get("priorities")
    if settings.prioritized and priorities is None:
        priorities = np.zeros((settings.rows_per_env, settings.n_envs))
    priorities = None if priorities is None else ops.asarray(priorities, np.float64)
    if rng_state is None:
        rng_state = empty.rng_state
    return BufferState(
        settings, ops.device, fields, counters, steps_added, priorities, max_priority, rng_state
    )


def _read_old_numpy_file(name: str, data: Any, meta: dict[str, Any], device: Any) -> BufferState:
    """The state of a file (or pickle) of the old numpy buffer: each env's sampleable
    counters ``[t_lo, t_hi)`` and its episode in progress ``[t_hi, t_count)`` (a pickle's)
    copied to rows ``k % rows``."""
    device = None if device == "saved" else device  # it was saved from the host
    settings = _settings_of(name, meta)
    R, n = settings.rows_per_env, settings.n_envs
    steps = int(data["t_count"][0])
    empty = empty_state(settings, NumpyOps())
    host: dict[str, Any] = {key: np.zeros_like(value) for key, value in empty.fields.items()}
    lo, hi = data["t_lo"].astype(np.int64), data["t_hi"].astype(np.int64)
    offset_of, length_of = data["to_start"], data["ep_len"]
    transition_row = data["trans_row"]
    # The old row of each env's episode in progress (a pickle's; a file holds none): its
    # transitions run on from it, while transition_row holds complete episodes' alone.
    open_row = data.get("open_row")
    # Each field's values by the old row * n + env (a next observation is its next row's).
    observations = [f"obs/{key}" for key in settings.observation_space.spaces]
    old = {key: data[key.replace("/", "__")] for key in observations}
    old.update(action=data["actions"], reward=data["rewards"])
    old.update(terminated=data["terminated"], truncated=data["truncated"])
    old.update({f"info/{key[6:]}": data[key] for key in data if key.startswith("info__")})
    for key, value in old.items():
        host.setdefault(key, np.zeros((R, n, *value.shape[1:]), value.dtype))
    old_priorities = data.get("priorities")
    priorities = np.zeros((R, n)) if settings.prioritized else None
    newest = np.zeros(n, np.int64)
    for e in range(n):
        k = np.arange(lo[e], steps)
        if k.size == 0:
            continue
        row = transition_row[(k % R) * n + e].astype(np.int64)
        if open_row is not None:
            row = np.where(k < hi[e], row, (int(open_row[e]) + k - hi[e]) % R)
        flat, next_flat = row * n + e, ((row + 1) % R) * n + e
        complete = k < hi[e]
        start = np.where(complete, k - offset_of[flat], hi[e])
        first = start[complete]
        end = first + length_of[((row[complete] - offset_of[flat[complete]]) % R) * n + e]
        host["episode_end"][first % R, e] = end
        at = k % R
        for key, values in old.items():
            host[key][at, e] = values[flat]
        for key in ("terminated", "truncated"):  # the old rows' flags were set at the end
            host[key][at, e] &= complete
        for key in observations:
            host["next_" + key][at, e] = old[key][next_flat]
        host["episode_start"][at, e] = start
        newest[e] = first[-1] if first.size else 0
        if priorities is not None and old_priorities is not None:
            leaf = old_priorities[flat]
            if settings.priority == "goal_motion":
                # The old leaves hold each episode's (motion + eps) ** alpha: its path.
                alpha = settings.alpha
                path = leaf ** (1 / alpha) - settings.priority_eps if alpha > 0 else 0 * leaf
                host["motion"][at, e] = np.maximum(path, 0.0)
            else:
                priorities[at, e] = leaf
    host.update(zip(COUNTERS, (hi.copy(), lo, hi, newest), strict=True), priorities=priorities)
    rng_state = meta.get("rng_state") if device is None else None
    max_priority = float(meta.get("max_priority", 1.0))
    return _as_state(settings, device, host, steps, max_priority, rng_state, name)


def legacy_state(pickled: Mapping[str, Any], name: str = "HerReplayBuffer") -> BufferState:
    """The state of a numpy buffer pickled by goalenvs 148f048 or earlier (its
    ``{"state": HerBufferState}``, or 0.1.0's bare ``__dict__``), episodes in progress
    kept; any other pickle (0.1.0's device buffer) is the ValueError saying what to do."""
    old = pickled.get("state")
    if not isinstance(old, HerBufferState) and "_records" not in pickled:
        raise ValueError(
            f"this {name} was pickled by an earlier goalenvs, whose layout this one does "
            f"not read: load that goalenvs, save the buffer with {name}.save and read the "
            f"file with {name}.load"
        )
    if old is not None:
        storage, settings = old.storage, old.settings
        steps, priorities = old.steps_added, old.priorities
        max_priority, rng_state = old.max_priority, old.rng_state
    else:  # 0.1.0: the buffer's own attributes
        names = ["_records", "_terminated", "_truncated", "_infos", "_to_start", "_ep_len"]
        names += ["_trans_row", "_ep_start", "_valid_lo", "_t_lo", "_t_hi", "_skip"]
        storage = HerStorage(*(pickled[name] for name in names))
        earlier = ("prioritized", "alpha", "priority_eps")
        settings = BufferSettings(
            **{key: pickled[key] for key in IN_EVERY_FILE},
            **{key: pickled[key] for key in earlier if key in pickled},
            beta=pickled.get("_beta", 0.4),
        )
        tree = pickled.get("_tree")
        steps, priorities = int(pickled["_t"]), None if tree is None else tree.leaves
        max_priority = float(pickled.get("_max_priority", 1.0))
        rng_state = dict(pickled["_rng"].bit_generator.state)
    records = storage.records
    data: dict[str, Any] = {
        f"obs__{key[4:]}": records[key] for key in records.dtype.names if key[:4] == "obs/"
    }
    data.update({f"info__{key}": value for key, value in storage.infos.items()})
    data.update(
        actions=records["action"],
        rewards=records["reward"],
        terminated=storage.terminated,
        truncated=storage.truncated,
        to_start=storage.offset_in_episode,
        ep_len=storage.episode_length,
        trans_row=storage.transition_row,
        t_lo=storage.sampleable_from,
        t_hi=storage.sampleable_to,
        t_count=[steps],
        open_row=storage.episode_start,
    )
    if priorities is not None:
        data["priorities"] = np.asarray(priorities)
    meta = {**settings.to_meta(), "rng_state": rng_state, "max_priority": max_priority}
    return _read_old_numpy_file("a pickled HerReplayBuffer", data, meta, None)


def _read_old_device_file(name: str, device: Any) -> BufferState:
    """The state of a file of the old device buffer: its packed records unpacked."""
    import torch

    try:
        data = torch.load(name, map_location="cpu", weights_only=True)
        meta, tensors = json.loads(data["meta"]), data["tensors"]
    except Exception as error:  # torch raises many kinds on a file that is not its own
        raise ValueError(
            f"{name} is not a HER buffer file ({type(error).__name__}): it is truncated, "
            "corrupt or not written by HerReplayBuffer.save; save the buffer again (or "
            "start with an empty one)"
        ) from None
    if meta.get("format") != _OLD_DEVICE_FORMAT or meta.get("version") != 1:
        raise ValueError(
            f"{name} is not a HER buffer file this goalenvs reads (format "
            f"{meta.get('format')!r}, version {meta.get('version')!r})"
        )
    settings = _settings_of(name, meta)
    R, n = settings.rows_per_env, settings.n_envs
    # The old records packed the float32 fields as today's do; the others had their own.
    host = field_views(tensors["records"].numpy(), packed_names(settings), flags=False)
    keys = settings.observation_space.spaces
    for field in [f"{side}/{key}" for side in ("obs", "next_obs") for key in keys] + ["action"]:
        if field not in host:
            side, _, key = field.partition("/")
            host[field] = tensors[f"{side}__{key}"].numpy()
    host.update({f"info/{key[6:]}": v.numpy() for key, v in tensors.items() if key[:6] == "info__"})
    old = {key: tensors[key].numpy() for key in ("terminated", "truncated", "episode_end")}
    start, episode = tensors["row_meta"].numpy()[..., 0], tensors["row_meta"].numpy()[..., 1]
    envs = np.broadcast_to(np.arange(n), (R, n))
    host["episode_end"] = np.zeros((R, n), np.int64)
    host["episode_end"][start % R, envs] = old["episode_end"][episode % R, envs]
    host.update(terminated=old["terminated"], truncated=old["truncated"], episode_start=start)
    if "priorities" in tensors:
        if settings.priority == "goal_motion":  # the old rows held the path so far
            host["motion"] = tensors["priorities"].numpy().astype(np.float64)
        else:
            host["priorities"] = tensors["priorities"].numpy()
    counters = zip(COUNTERS, ("episode_start", "t_lo", "t_hi", "newest_start"), strict=True)
    host.update({counter: tensors[old_name].numpy() for counter, old_name in counters})
    if device == "saved":
        device = meta.get("device")
    generator = tensors.get("generator")
    same_kind = device is not None and str(meta.get("device", "")).split(":")[0] == str(
        resolve_device(device).type
    )
    rng_state = generator if same_kind and generator is not None else None
    max_priority = float(tensors["max_priority"]) if "max_priority" in tensors else 1.0
    return _as_state(settings, device, host, int(meta["t"]), max_priority, rng_state, name)
