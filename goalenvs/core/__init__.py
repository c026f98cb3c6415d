"""The goal-env contract and what every goalenvs environment shares.

- :mod:`~goalenvs.core.contract`: :class:`GoalEnv`, :data:`GOAL_KEYS`, goal batches and
  goal spaces;
- :mod:`~goalenvs.core.vector`: :class:`GoalVectorEnv`, the base of the native vector
  twins (seeding, resets, the time limit, the autoreset modes);
- :mod:`~goalenvs.core.validate`: argument checks;
- :mod:`~goalenvs.core.backend`: the numpy|torch helpers (imports nothing else from
  goalenvs);
- :mod:`~goalenvs.core.io`: the one atomic write and the one space<->JSON codec.

Every name is importable from ``goalenvs.core`` itself, as before the split; the old
modules ``goalenvs.devices`` and ``goalenvs.atomic`` are aliases of :mod:`backend
<goalenvs.core.backend>` and :mod:`io <goalenvs.core.io>`, and ``goalenvs.crash_penalty``
and ``goalenvs.torch_envs`` of their homes in :mod:`goalenvs.wrappers` (:data:`MOVED`).
"""

from __future__ import annotations

from goalenvs.core.aliases import alias_modules
from goalenvs.core.backend import (
    InfoLike,
    check_tensor_actions,
    info_values,
    is_tensor,
    resolve_device,
    torch_dtype,
    torch_goal_arrays,
)
from goalenvs.core.contract import (
    GOAL_KEYS,
    GoalEnv,
    GoalFunctions,
    goal_arrays,
    goal_batch,
    goal_dict_space,
)
from goalenvs.core.io import command_name
from goalenvs.core.validate import (
    check_action,
    check_actions,
    check_choice,
    check_goal_option,
    check_in_range,
    check_int,
    check_positive,
    parse_autoreset_mode,
    parse_json_object,
)
from goalenvs.core.vector import GoalVectorEnv, twin_metadata

# Old module path -> where it lives now (an alias, see goalenvs.core.aliases): the modules
# that stood beside core at the package's top level. Registered here because importing
# goalenvs imports core first, so the old paths resolve before anything asks for them.
MOVED = {
    "goalenvs.devices": "goalenvs.core.backend",
    "goalenvs.atomic": "goalenvs.core.io",
    "goalenvs.crash_penalty": "goalenvs.wrappers.crash_penalty",
    "goalenvs.torch_envs": "goalenvs.wrappers.torch_envs",
}


alias_modules(MOVED)

__all__ = [
    "GOAL_KEYS",
    "MOVED",
    "GoalEnv",
    "GoalFunctions",
    "GoalVectorEnv",
    "InfoLike",
    "check_action",
    "check_actions",
    "check_choice",
    "check_goal_option",
    "check_in_range",
    "check_int",
    "check_positive",
    "check_tensor_actions",
    "command_name",
    "goal_arrays",
    "goal_batch",
    "goal_dict_space",
    "info_values",
    "is_tensor",
    "parse_autoreset_mode",
    "parse_json_object",
    "resolve_device",
    "torch_dtype",
    "torch_goal_arrays",
    "twin_metadata",
]
