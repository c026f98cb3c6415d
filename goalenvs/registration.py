"""The registered environment ids, each with its single entry point and native vector twin."""

from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium as gym


@dataclass(frozen=True)
class EnvEntry:
    """One registered id: where its single env and vector twin live, and its defaults."""

    id: str
    module: str
    single: str
    vector: str
    max_episode_steps: int | None
    kwargs: dict[str, object] = field(default_factory=dict)
    summary: str = ""


def _family(
    module: str, name: str, *variants: tuple[str, int | None, dict[str, object], str]
) -> tuple[EnvEntry, ...]:
    """The ids of the env module ``goalenvs.envs.{module}``: ``goalenvs/{name}{suffix}-v0``
    for each variant ``(suffix, max_episode_steps, kwargs, summary)``, each made by
    ``{name}Env`` and twinned by ``{name}VectorEnv``."""
    return tuple(
        EnvEntry(f"goalenvs/{name}{suffix}-v0", f"goalenvs.envs.{module}", f"{name}Env",
                 f"{name}VectorEnv", steps, kwargs, summary)
        for suffix, steps, kwargs, summary in variants
    )  # fmt: skip


# fmt: off
ENTRIES: tuple[EnvEntry, ...] = (
    # BitFlipping: n_bits steps, whatever n_bits is (the env counts its own steps).
    *_family("bit_flipping", "BitFlipping",
        ("", None, {},
         "flip bits until they match a random goal pattern (HER paper); Discrete(n_bits)"),
        ("Continuous", None, {"continuous": True},
         "bit flipping with Box(-1, 1, (n_bits,)) actions; every bit whose action > 0 flips"),
    ),
    *_family("point_reach", "PointReach",
        ("", 50, {}, "2D point mass reaches a random goal in [-1, 1]^2; sparse -1/0 reward"),
        ("Dense", 50, {"reward_type": "dense"},
         "2D point reach paying minus the distance to the goal"),
    ),
    *_family("parking", "Parking",
        ("", 100, {},
         "kinematic car parks into a random spot of an empty walled lot; sparse reward"),
        ("Crowded", 100, {"n_parked": 20},
         "parking between parked cars; collisions end the episode with a penalty"),
        ("Dense", 100, {"reward_type": "dense"},
         "parking in the empty lot, paying minus the weighted goal distance"),
    ),
    *_family("point_maze", "PointMaze",
        ("", 100, {"maze_map": "umaze"},
         "point mass in D4RL's U-maze reaches a goal in another cell; exact walls, sparse"),
        ("Medium", 200, {"maze_map": "medium"},
         "point maze on D4RL's medium layout (8x8 cells); sparse reward"),
        ("Large", 300, {"maze_map": "large"},
         "point maze on D4RL's large layout (9x12 cells); sparse reward"),
        ("Dense", 100, {"maze_map": "umaze", "reward_type": "dense"},
         "U-maze paying minus the BFS shortest-path distance (never through walls)"),
        ("MediumDense", 200, {"maze_map": "medium", "reward_type": "dense"},
         "medium maze paying minus the BFS shortest-path distance"),
        ("LargeDense", 300, {"maze_map": "large", "reward_type": "dense"},
         "large maze paying minus the BFS shortest-path distance"),
    ),
    *_family("push", "Push",
        ("", 50, {},
         "a disc pusher shoves a block onto a target spot (2D Fetch Push); sparse reward"),
        ("Dense", 50, {"reward_type": "dense"},
         "push paying minus the block's distance to the target"),
    ),
)
# fmt: on

ENV_IDS: tuple[str, ...] = tuple(entry.id for entry in ENTRIES)


def register_envs() -> None:
    """Registers every goalenvs id with gymnasium (idempotent)."""
    for entry in ENTRIES:
        if entry.id in gym.registry:
            continue
        gym.register(
            id=entry.id,
            entry_point=f"{entry.module}:{entry.single}",
            vector_entry_point=f"{entry.module}:{entry.vector}",
            max_episode_steps=entry.max_episode_steps,
            kwargs=dict(entry.kwargs),
        )
