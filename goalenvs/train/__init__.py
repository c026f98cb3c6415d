"""The training loop, the run folder and resume, checkpoints, presets and ``goalenvs train``.

Importing this package loads nothing else. The package is also the one-call function:
``goalenvs.train(env_id, **fields)`` is :func:`goalenvs.train.api.train_env`."""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from goalenvs.train.trainer import TrainResult


class _TrainPackage(types.ModuleType):
    """This package, callable (a module's class may be a ModuleType subclass): it stays the
    package and ``goalenvs.train(...)`` trains, whichever of the two was imported first."""

    def __call__(self, env_id: str, **fields: Any) -> TrainResult:
        """Trains ``env_id``: :func:`goalenvs.train.api.train_env`."""
        from goalenvs.train.api import train_env

        return train_env(env_id, **fields)


sys.modules[__name__].__class__ = _TrainPackage
