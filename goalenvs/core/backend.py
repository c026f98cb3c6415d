"""The numpy|torch helpers of the native twins: devices, tensor goals, tensor actions, info
values, and the two array modules' helpers (:class:`NumpyArrays`, :class:`TorchArrays`) that a
twin's state helpers run on.

Nothing here imports torch at module level: numpy users never load it; nor anything else
from goalenvs. The twins reach these helpers through
:class:`goalenvs.core.GoalVectorEnv` (its ``device`` argument picks the backend) and
:func:`goalenvs.core.goal_batch`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch
    from typing_extensions import TypeIs

InfoLike = Mapping[str, Any] | Sequence[Mapping[str, object]] | np.ndarray | None


def is_tensor(value: object) -> TypeIs[torch.Tensor]:
    """Whether ``value`` is a torch tensor (without importing torch when it is not loaded);
    the type checker narrows ``value`` by it, to a tensor or to what else it may be."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def cast(array: Any, dtype: str) -> Any:
    """``array``, a numpy array (or scalar) or a tensor, as the dtype named ``dtype``."""
    return (
        array.to(getattr(sys.modules["torch"], dtype)) if is_tensor(array) else array.astype(dtype)
    )


def goal_pair(
    achieved_goal: object, desired_goal: object, goal_size: int | None, torch: Any = None
) -> tuple[tuple[int, ...], Any, Any]:
    """The checks of :func:`goalenvs.core.goal_arrays` (``torch`` None: numpy arrays) and of
    :func:`torch_goal_arrays` (tensors on the device of the goal that is a tensor): the
    pair as float arrays (integers become float32) and their broadcast leading shape."""
    as_array: Any
    if torch is None:
        as_array, xp = np.asarray, np
    else:
        like: Any = achieved_goal if is_tensor(achieved_goal) else desired_goal
        device = like.device
        as_array, xp = (lambda value: torch.as_tensor(value, device=device)), torch
    pair = []
    for name, value in (("achieved_goal", achieved_goal), ("desired_goal", desired_goal)):
        arr: Any = as_array(value)
        if arr.ndim == 0:
            raise ValueError(f"{name} must have at least one dimension (the goal), got a scalar")
        if (arr.dtype.kind not in "fiub") if torch is None else arr.is_complex():
            kind = "a numeric array" if torch is None else "a real-valued tensor"
            raise TypeError(f"{name} must be {kind}, got dtype {arr.dtype}")
        if goal_size is not None and arr.shape[-1] != goal_size:
            raise ValueError(
                f"{name} has shape {tuple(arr.shape)}: its last dimension must be the goal "
                f"size {goal_size}"
            )
        is_float = arr.dtype.kind == "f" if torch is None else arr.is_floating_point()
        pair.append(arr if is_float else cast(arr, "float32"))
    achieved, desired = pair
    shapes = (
        f"achieved_goal shape {tuple(achieved.shape)} and desired_goal shape {tuple(desired.shape)}"
    )
    if achieved.shape[-1] != desired.shape[-1]:
        raise ValueError(f"{shapes} differ in the goal dimension")
    try:
        batch_shape = tuple(xp.broadcast_shapes(achieved.shape[:-1], desired.shape[:-1]))
    except (ValueError, RuntimeError):
        raise ValueError(
            f"{shapes} have leading (batch) dimensions that do not broadcast"
        ) from None
    return batch_shape, achieved, desired


def torch_goal_arrays(
    achieved_goal: object, desired_goal: Any, goal_size: int | None = None
) -> tuple[tuple[int, ...], Any, Any, Any]:
    """The tensor half of :func:`goalenvs.core.goal_batch` (:func:`goal_pair` on tensors):
    ``(shape, achieved, desired, torch)``."""
    import torch

    return (*goal_pair(achieved_goal, desired_goal, goal_size, torch), torch)


def constant_like(value: np.ndarray, like: object, cache: dict[Any, Any]) -> object:
    """The numpy constant ``value`` as an array beside ``like``: itself for numpy, else a
    tensor on ``like``'s device, copied there once and kept in ``cache`` (keyed by device).
    """
    if not is_tensor(like):
        return value
    tensor = cache.get(like.device)
    if tensor is None:
        import torch

        tensor = cache[like.device] = torch.as_tensor(value, device=like.device)
    return tensor


def resolve_device(device: str | torch.device) -> torch.device:
    """``device`` (a string or ``torch.device``) as a ``torch.device`` that torch can use.

    Raises ImportError when torch is missing and ValueError for a name torch does not
    know or a CUDA device this machine does not have.
    """
    try:
        import torch
    except ImportError:
        raise ImportError(
            f"device={device!r} runs the env on torch, which is not installed: "
            "pip install 'goalenvs[train]' (or omit device for the numpy twin)"
        ) from None
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device={device!r} is not a torch device; expected e.g. 'cpu', 'cuda', 'cuda:0' "
            "or None (numpy)"
        ) from None
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r}: torch.cuda.is_available() is False on this machine"
            )
        if resolved.index is None:
            # Tensors made on "cuda" report "cuda:0": name the index so devices compare equal.
            resolved = torch.device("cuda", torch.cuda.current_device())
    return resolved


def torch_dtype(dtype: object) -> torch.dtype:
    """The torch dtype of a numpy ``dtype`` (any dtype torch has, as torch maps it)."""
    import torch

    return torch.from_numpy(np.zeros(0, dtype=dtype)).dtype


def info_tensor(
    info: Any, key: str, like: Any, batch_shape: tuple[int, ...], default: object
) -> Any:
    """:func:`info_values` for a goal batch of tensors: ``info[key]`` per element as a bool
    (bool ``default``) or float32 tensor of ``batch_shape`` on ``like``'s device; a dict of
    tensors is read there without a host round trip."""
    import torch

    dtype = torch.bool if isinstance(default, bool) else torch.float32
    if isinstance(info, dict) and is_tensor(info.get(key)):
        value = info[key].to(device=like.device, dtype=dtype)
        try:
            return value.broadcast_to(batch_shape).clone()
        except RuntimeError:
            raise ValueError(
                f"info[{key!r}] has shape {tuple(value.shape)}, which does not broadcast to "
                f"the goal batch shape {batch_shape}"
            ) from None
    np_dtype = bool if dtype == torch.bool else np.float32
    values = info_values(info, key, batch_shape, default, np_dtype)
    return torch.as_tensor(values, device=like.device)


def clear_points(
    generator: Any, centres: Any, half_width: float, min_distance: float, tries: int = 8
) -> Any:
    """For each row of ``centres`` ``(n, 2)``, a float32 point uniform in ``[-half_width,
    half_width]^2`` at least ``min_distance`` from it, drawn from ``generator``: batched
    rejection sampling, ``tries`` candidates a row (the first accepted is kept)."""
    import torch

    device = centres.device

    def draw(rows: Any) -> tuple[Any, Any]:
        shape = (len(rows), tries, 2)
        points = (torch.rand(shape, generator=generator, device=device) - 0.5) * (2 * half_width)
        d = points - centres[rows][:, None]
        accepted = torch.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]) >= min_distance
        pick = accepted.int().argmax(dim=1)  # the first accepted, or 0 where none is
        index = torch.arange(len(rows), device=device)
        return points[index, pick], accepted[index, pick]

    out, accepted = draw(torch.arange(len(centres), device=device))
    while not bool(accepted.all()):
        left = (~accepted).nonzero(as_tuple=True)[0]
        out[left], accepted[left] = draw(left)
    return out


def info_values(
    info: InfoLike,
    key: str,
    batch_shape: tuple[int, ...],
    default: object,
    dtype: Any,
) -> np.ndarray:
    """Extracts ``info[key]`` for every element of a goal batch as an array of ``batch_shape``.

    ``info`` may be None (every element gets ``default``), one dict (its value, scalar or
    batched, is broadcast to ``batch_shape``), or a list, tuple or object array of dicts,
    one per element (missing keys get ``default``). This is the one place where the
    shapes stable-baselines3, gymnasium vector envs and HER buffers pass are reconciled.
    """
    if info is None:
        return np.full(batch_shape, default, dtype=dtype)
    if isinstance(info, Mapping):
        value = info.get(key, default)
        try:
            return np.broadcast_to(np.asarray(value, dtype=dtype), batch_shape).copy()
        except ValueError:
            raise ValueError(
                f"info[{key!r}] has shape {np.shape(value)}, which does not broadcast to "
                f"the goal batch shape {batch_shape}"
            ) from None
    if isinstance(info, np.ndarray) and info.dtype != object:
        raise TypeError(f"info must be None, a dict or dicts, got an array of dtype {info.dtype}")
    if isinstance(info, (list, tuple, np.ndarray)):
        items = np.asarray(info, dtype=object)
        n = int(np.prod(batch_shape)) if batch_shape else 1
        if items.size != n:
            raise ValueError(
                f"info holds {items.size} dicts but the goal batch has shape {batch_shape} "
                f"({n} elements)"
            )
        flat = [
            (d.get(key, default) if isinstance(d, Mapping) else _not_a_dict(d))
            for d in items.reshape(-1)
        ]
        return np.asarray(flat, dtype=dtype).reshape(batch_shape)
    raise TypeError(
        f"info must be None, a dict, or a list / object array of dicts, got {type(info).__name__}"
    )


def _not_a_dict(item: object) -> object:
    raise TypeError(f"every element of info must be a dict, got {type(item).__name__}")


# --------------------------------------------------------------------------- array backends


def _reset_mask_error(num_envs: int, dtype: object, shape: tuple[int, ...]) -> ValueError:
    return ValueError(
        f"options['reset_mask'] must be a bool array of shape ({num_envs},), "
        f"got dtype {dtype} shape {shape}"
    )


class NumpyArrays:
    """The array helpers of a vector twin whose state lives in numpy arrays
    (:class:`TorchArrays`: the same for tensors; neither holds a module, so both pickle)."""

    device = None

    @property
    def xp(self) -> ModuleType:
        """The array module: numpy."""
        return np

    def zeros(self, shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
        """Zeros of a numpy ``dtype`` (float32, int64, bool)."""
        return np.zeros(shape, dtype)

    def constant(self, value: object) -> np.ndarray:
        """A numpy constant (a wall map, bounds) as an array of this backend."""
        return np.asarray(value)

    def fresh(self, value: Any) -> Any:
        """A copy that shares no memory with ``value``."""
        return value.copy()

    def float32(self, value: Any) -> Any:
        """``value`` (bool, int or float) as float32."""
        return value.astype(np.float32)

    def to_numpy(self, value: object) -> np.ndarray:
        """A numpy copy of ``value`` (for drawing and printing)."""
        return np.array(value)

    def any(self, mask: Any) -> bool:
        """Whether any element of ``mask`` is true."""
        # count_nonzero: a fraction of the cost of any() on the small arrays of every step.
        return bool(np.count_nonzero(mask))

    def where_true(self, mask: Any) -> Any:
        """The indices of the true elements of a 1-D ``mask``."""
        return mask.nonzero()[0]

    def arange(self, n: int) -> Any:
        """The indices ``0 .. n - 1``."""
        return np.arange(n)

    def rows(self, value: np.ndarray, index: Any) -> Any:
        """A checked numpy option (one value, or one row per sub-env) for the sub-envs
        ``index``, as an array of this backend: the value itself, or the rows of ``index``."""
        return value if value.ndim < 2 else value[index]

    def reset_mask(self, mask: object, num_envs: int) -> Any:
        """``options["reset_mask"]`` as a bool array; a ValueError names a wrong one."""
        mask = np.asarray(mask)
        if mask.dtype.kind != "b" or mask.shape != (num_envs,):
            raise _reset_mask_error(num_envs, mask.dtype, mask.shape)
        return mask

    def outcomes(
        self, reward: object, terminated: object, truncated: object
    ) -> tuple[Any, Any, Any]:
        """Fresh, writable float32 / bool / bool copies of a step's goal outcomes."""
        return (
            np.array(reward, np.float32),
            np.array(terminated, bool),
            np.array(truncated, bool),
        )


class TorchArrays(NumpyArrays):
    """:class:`NumpyArrays`'s helpers for tensors on the torch device ``device``."""

    def __init__(self, device: Any) -> None:
        self.device = device

    @property
    def xp(self) -> ModuleType:
        import torch

        return torch

    def zeros(self, shape: int | tuple[int, ...], dtype: object) -> Any:
        return self.xp.zeros(shape, dtype=torch_dtype(dtype), device=self.device)

    def constant(self, value: object) -> Any:
        return self.xp.as_tensor(np.asarray(value), device=self.device)

    def fresh(self, value: Any) -> Any:
        return value.clone()

    def float32(self, value: Any) -> Any:
        return value.float()

    def to_numpy(self, value: Any) -> np.ndarray:
        return value.detach().cpu().numpy().copy()

    def any(self, mask: Any) -> bool:
        return bool(mask.any())

    def where_true(self, mask: Any) -> Any:
        return mask.nonzero(as_tuple=True)[0]

    def arange(self, n: int) -> Any:
        return self.xp.arange(n, device=self.device)

    def rows(self, value: np.ndarray, index: object) -> Any:
        return self.constant(value if value.ndim < 2 else value[self.to_numpy(index)])

    def reset_mask(self, mask: Any, num_envs: int) -> Any:
        torch = self.xp
        if not isinstance(mask, torch.Tensor):
            mask = torch.as_tensor(np.asarray(mask))
        if mask.dtype != torch.bool or tuple(mask.shape) != (num_envs,):
            raise _reset_mask_error(num_envs, mask.dtype, tuple(mask.shape))
        return mask.to(self.device)

    def outcomes(
        self, reward: object, terminated: object, truncated: object
    ) -> tuple[Any, Any, Any]:
        torch = self.xp
        return (
            torch.as_tensor(reward, device=self.device).float().clone(),
            torch.as_tensor(terminated, device=self.device).bool().clone(),
            torch.as_tensor(truncated, device=self.device).bool().clone(),
        )


def array_backend(device: Any = None) -> NumpyArrays:
    """The backend of a twin: numpy for ``device=None``, else torch on ``device``
    (resolved by :func:`resolve_device`, which names a device torch cannot use)."""
    return NumpyArrays() if device is None else TorchArrays(resolve_device(device))
