"""The goalenvs environments: one module per env (kernel, single env, native vector twin)."""
