"""Multi-worker training with ``torch.distributed``: each worker collects with its own
envs and buffer; gradients and normalizer statistics are averaged across workers.

Launch with ``torchrun --nproc-per-node N -m goalenvs train ...`` (or on several
machines, as torchrun documents). Without a process group every helper here is a no-op,
so single-process training pays nothing."""

from __future__ import annotations

import os
from collections.abc import Iterable

import torch
import torch.distributed as dist


def is_active() -> bool:
    """True inside an initialized process group of more than one worker."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    """This worker's rank (0 without a process group)."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def world_size() -> int:
    """Number of workers (1 without a process group)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def init_from_env(device: torch.device) -> bool:
    """Joins the process group torchrun describes (``WORLD_SIZE`` > 1) if not joined yet.
    The backend follows the device (:func:`backend_for`). Returns True when this call
    created the group (the caller then destroys it at the end)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1 or not dist.is_available() or dist.is_initialized():
        return False
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    dist.init_process_group(backend=backend_for(device, world, gpus))
    return True


def backend_for(device: torch.device, world: int, gpus: int) -> str:
    """``nccl`` when every worker of ``world`` has its own CUDA device, else ``gloo``.
    NCCL refuses two ranks on one GPU ("Duplicate GPU detected"), so more workers than
    GPUs share them through gloo, which reduces CUDA tensors too."""
    return "nccl" if device.type == "cuda" and gpus >= world else "gloo"


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """The sum of ``tensor`` over workers (``tensor`` itself when alone)."""
    if not is_active():
        return tensor
    # nccl reduces CUDA tensors only (on this worker's device); gloo takes them where they are.
    nccl = dist.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if nccl else tensor.device
    total = tensor.to(device, copy=True)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total.to(tensor.device)


def average_gradients(parameters: Iterable[torch.nn.Parameter]) -> None:
    """Replaces every gradient by its mean over workers, in one flat all_reduce."""
    if not is_active():
        return
    grads = [p.grad for p in parameters if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= dist.get_world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def broadcast_module(module: torch.nn.Module) -> None:
    """Copies rank 0's parameters and buffers to every worker (a common start)."""
    if not is_active():
        return
    for tensor in list(module.parameters()) + list(module.buffers()):
        dist.broadcast(tensor.data, src=0)
