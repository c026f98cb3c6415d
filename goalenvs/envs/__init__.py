"""The goalenvs environments: one module per env (kernel, single env, native vector twin).

Every env clips finite Box actions to its action space; NaN or inf, a wrong shape or
dtype, or a discrete action out of range raise an error naming the action and the space.
"""
