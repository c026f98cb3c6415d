"""Adapters around envs: the crash penalty moved into ``compute_reward`` for highway-env's
parking (:mod:`~goalenvs.wrappers.crash_penalty`), the Shadow Hand's manipulation goals
compared over any batch (:mod:`~goalenvs.wrappers.hand_goals`) and one sub-env of a device
twin seen as a plain numpy env (:mod:`~goalenvs.wrappers.torch_envs`)."""
