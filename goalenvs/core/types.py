"""The types of the values the package's numpy-or-torch code passes around.

The envs' native twins, the backends and the HER buffers run one code path on numpy
arrays and on torch tensors (``xp`` is the module, numpy or torch). :data:`Array` names
such a value for the type checker, which then sees where a function takes or gives one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias, TypeVar

import numpy as np

if TYPE_CHECKING:
    import torch

# A numpy array or a torch tensor: a value of the numpy-or-torch code path.
Array: TypeAlias = "np.ndarray | torch.Tensor"
# The same, for a function whose values are all of one library: the type checker reads
# its body once with numpy arrays and once with torch tensors.
ArrayT = TypeVar("ArrayT", np.ndarray, "torch.Tensor")
# A device as torch takes one: a name ("cpu", "cuda:0"), a torch.device, or None for the
# default.
DeviceLike: TypeAlias = "str | torch.device | None"
# An env's batched goal method, compute_reward or compute_terminated: (achieved goals,
# desired goals, infos) -> one value per goal pair; numpy arrays in and out for the numpy
# buffer, tensors for the device buffer.
GoalFunction: TypeAlias = "Callable[[Array, Array, object], Array]"
