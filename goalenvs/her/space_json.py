"""Observation and action spaces as the JSON a saved HER buffer's metadata holds, and back.

Box, Discrete, MultiBinary and Dict of them: the spaces the HER buffers accept. Both
buffers' files store their spaces this way, and any file written so far reads back here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces


def _space_to_json(space: spaces.Space) -> dict[str, Any]:
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: _space_to_json(v) for k, v in space.spaces.items()}}
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "low": space.low.tolist(),
            "high": space.high.tolist(),
            "shape": list(space.shape),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    raise TypeError(f"cannot save a buffer over the space {space}")


def _space_from_json(spec: Mapping[str, Any]) -> spaces.Space:
    kind = spec.get("type")
    if kind == "Dict":
        return spaces.Dict({k: _space_from_json(v) for k, v in spec["spaces"].items()})
    if kind == "Box":
        dtype = np.dtype(spec["dtype"])
        return spaces.Box(
            np.asarray(spec["low"], dtype),
            np.asarray(spec["high"], dtype),
            tuple(spec["shape"]),
            dtype,
        )
    if kind == "Discrete":
        return spaces.Discrete(spec["n"], start=spec["start"])
    if kind == "MultiBinary":
        return spaces.MultiBinary(spec["n"])
    raise ValueError(f"unknown space type {kind!r} in a HER buffer file")
