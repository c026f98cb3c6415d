"""`goalenvs check`: the goal-env conformance checker."""
