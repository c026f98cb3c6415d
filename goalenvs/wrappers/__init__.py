"""Adapters around envs: the crash penalty moved into ``compute_reward`` for highway-env's
parking (:mod:`~goalenvs.wrappers.crash_penalty`) and one sub-env of a device twin seen as
a plain numpy env (:mod:`~goalenvs.wrappers.torch_envs`)."""
