"""The training loop: collection and evaluation per backend, the run folder and resume,
checkpoints, presets, display and curves, and ``goalenvs train``.

Importing this package loads nothing else; :func:`goalenvs.train.trainer.train` is the
entry point.
"""
