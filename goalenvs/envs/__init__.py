"""The goalenvs environments, one module per env: its checked constants (``*Params``), its
kernel (pure functions of arrays and their array module ``xp``, numpy or torch, over a
leading batch dimension), the single env and its vector twin (the ids'
``vector_entry_point``).

Every env clips finite Box actions to its action space; NaN or inf, a wrong shape or
dtype, or a discrete action out of range raise an error naming the action and the space.
"""
