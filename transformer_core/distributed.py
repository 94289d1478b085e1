"""Data-parallel training across processes: which process this is, and the few collective steps
:func:`transformer_core.train.train` needs.

``torchrun --nproc_per_node N -m transformer_core train ...`` starts N processes and tells each its
``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` through the environment. :func:`process_group` joins them
(NCCL between GPUs, gloo between CPUs); :func:`train` then wraps the model in PyTorch's
``DistributedDataParallel``, which averages the gradients of all processes after every backward
pass, so every process applies the same update to the same weights. Without ``torchrun`` everything
here is a no-op for a single process.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ["Ranks", "current", "from_environment", "process_group", "all_agree", "gather"]


@dataclass(frozen=True)
class Ranks:
    """This process's place among the training processes.

    Attributes:
        rank: 0 .. world_size - 1 over all machines; rank 0 writes logs and checkpoints.
        local_rank: the index on this machine, which picks the GPU.
        world_size: the number of processes.
    """

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def from_environment() -> Ranks:
    """The ranks ``torchrun`` gave this process (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``), known
    before the process group is joined; a single process without ``torchrun``."""
    return Ranks(rank=int(os.environ.get("RANK", 0)), local_rank=int(os.environ.get("LOCAL_RANK", 0)),
                 world_size=int(os.environ.get("WORLD_SIZE", 1)))


def current() -> Ranks:
    """The ranks of the joined process group, or a single process when none is joined."""
    if dist.is_available() and dist.is_initialized():
        return Ranks(rank=dist.get_rank(), local_rank=int(os.environ.get("LOCAL_RANK", 0)),
                     world_size=dist.get_world_size())
    return Ranks()


@contextlib.contextmanager
def process_group(device: torch.device) -> Iterator[Ranks]:
    """Join the processes ``torchrun`` started (if it did), and leave the group afterwards.

    Args:
        device: the device type decides the backend: NCCL for CUDA, gloo otherwise.

    Yields:
        This process's :class:`Ranks` (a single process without ``torchrun``).
    """
    ranks = from_environment()
    if ranks.world_size == 1 or (dist.is_available() and dist.is_initialized()):
        yield current()
        return
    if not dist.is_available():
        raise RuntimeError("this PyTorch build has no torch.distributed; run a single process instead")
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    try:
        yield current()
    finally:
        dist.destroy_process_group()


def all_agree(flag: bool, device: torch.device) -> bool:
    """True when any process says True (e.g. "stop"), the same answer on every process."""
    if current().world_size == 1:
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item() > 0)


def gather(value: object) -> list[object]:
    """Every process's ``value``, in rank order, on every process (picklable Python objects)."""
    if current().world_size == 1:
        return [value]
    gathered: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered
