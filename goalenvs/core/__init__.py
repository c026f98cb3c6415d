"""The goal-env contract and what every goalenvs environment shares (docs/layout.md names
the modules); the names below are what an env written against goalenvs imports from here.
"""

from __future__ import annotations

from goalenvs.core.backend import (
    InfoLike,
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
    episode_length,
    goal_arrays,
    goal_batch,
    goal_dict_space,
    goal_obs,
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
    check_tensor_actions,
    parse_autoreset_mode,
    parse_json_object,
)
from goalenvs.core.vector import GoalVectorEnv, twin_metadata

__all__ = [
    "GOAL_KEYS",
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
    "episode_length",
    "goal_arrays",
    "goal_batch",
    "goal_dict_space",
    "goal_obs",
    "info_values",
    "is_tensor",
    "parse_autoreset_mode",
    "parse_json_object",
    "resolve_device",
    "torch_dtype",
    "torch_goal_arrays",
    "twin_metadata",
]
