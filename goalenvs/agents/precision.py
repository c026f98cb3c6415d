"""Which arithmetic the gradient steps' networks use: float32, or bfloat16 autocast.

Under bf16 the hidden layers of every network compute in bfloat16 while the weights,
their gradients and the optimizers' state stay float32 (autocast casts a layer's float32
weights as it runs), and each network's output layer computes in float32 (see
:class:`goalenvs.agents.networks.MLP`): Q-values of -50 keep their float32 resolution,
where bfloat16 would round them to a quarter.

``TrainConfig.precision`` chooses: ``"fp32"``; ``"bf16"``; or ``"auto"``, which resolves
to bf16 on a CPU with bfloat16 instructions when :data:`AUTO_BF16_ON_CPU` is True, and
to fp32 everywhere else (a GPU included)."""

from __future__ import annotations

import contextlib
import functools

import torch

# What "auto" picks on a CPU with bfloat16 instructions (AVX512-BF16 or AMX). On a 2-core
# AMD EPYC with AVX512-BF16, a DDPG update through 3x256 networks took 40.1 ms in bf16
# against 71.2 ms in float32 at batch 2,048 (1.78x) and 8.4 against 11.7 ms at 256
# (benchmarks/update.py; benchmarks/results/update.jsonl, 2026-11-25).
AUTO_BF16_ON_CPU = True


@functools.cache
def cpu_has_bf16() -> bool:
    """True when this CPU has bfloat16 instructions (AVX512-BF16 or AMX tiles): there
    bfloat16 matrix products run natively; elsewhere they are emulated and no faster."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


def uses_bf16(precision: str, device: torch.device) -> bool:
    """True when the updates on ``device`` run in bf16 under ``precision``."""
    auto = precision == "auto" and AUTO_BF16_ON_CPU and device.type == "cpu"
    return precision == "bf16" or (auto and cpu_has_bf16())


def update_autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The context the networks' forward passes of an update run in on ``device``."""
    if not uses_bf16(precision, device):
        return contextlib.nullcontext()
    # The autocast weight cache is off on CUDA: a captured CUDA graph must not keep
    # tensors cast outside it (torch's CUDA graph notes).
    return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=device.type == "cpu")
