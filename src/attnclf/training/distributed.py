"""Data-parallel training under ``torchrun``: one process per device, gradients averaged.

``torchrun --nproc-per-node N -m attnclf train ...`` starts N copies of the command with
RANK, WORLD_SIZE and LOCAL_RANK in their environment. Every copy loads the same data and
builds the same model; ``--batch-size`` is per process, so a step sees a global batch of
``batch_size x N`` examples. Each global batch (the one a single process with that batch
size would draw) is cut into N contiguous parts, one per rank, and DistributedDataParallel
averages the gradients: a step of N processes is the step one process takes on the whole
global batch. Rank 0 alone prints, validates, checkpoints and writes the run directory;
the others read what it wrote (the tokenizer, a checkpoint to resume from), so on several
machines the run directory must sit on a shared filesystem.
"""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from ..errors import AttnclfError
from .device import resolve_device


@dataclass(frozen=True)
class Distributed:
    """Where this process sits in a data-parallel run; the defaults are a lone process.

    >>> Distributed(rank=1, world_size=2).shard(np.arange(5))
    array([3, 4])
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, indices: np.ndarray) -> np.ndarray:
        """This rank's contiguous part of a global batch (parts differ in size by at most one)."""
        return np.array_split(indices, self.world_size)[self.rank]

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over all ranks (in place, and returned)."""
        if self.enabled:
            dist.all_reduce(tensor)
        return tensor

    def from_main(self, tensor: torch.Tensor) -> torch.Tensor:
        """Rank 0's ``tensor`` on every rank, so all ranks take rank 0's decisions."""
        if self.enabled:
            dist.broadcast(tensor, src=0)
        return tensor

    def gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's ``tensor`` (same shape everywhere), in rank order."""
        if not self.enabled:
            return [tensor]
        parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(parts, tensor)
        return parts


def from_environment() -> Distributed:
    """The rank and world size ``torchrun`` put in the environment (a lone process without them)."""
    try:
        return Distributed(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                           int(os.environ.get("LOCAL_RANK", 0)))
    except ValueError:
        raise AttnclfError("RANK, WORLD_SIZE and LOCAL_RANK must be integers (torchrun sets them)") from None


def rank_device(device_name: str = "auto") -> torch.device:
    """The device this process trains on: ``resolve_device``'s, and under torchrun on GPUs the one of its local rank.

    >>> rank_device("cpu")
    device(type='cpu')
    """
    device = resolve_device(device_name)
    where = from_environment()
    if where.enabled and device.type == "mps":
        raise AttnclfError("distributed training runs on CPU (gloo) or CUDA (nccl), not MPS; pass --device cpu")
    if where.enabled and device.index is not None:
        raise AttnclfError(f"under torchrun each process trains on the GPU of its local rank: pass --device cuda, not "
                           f"{device_name}")
    return torch.device("cuda", where.local_rank) if where.enabled and device.type == "cuda" else device


def init_distributed(device_name: str = "auto") -> tuple[Distributed, torch.device]:
    """Join the process group ``torchrun`` set up (gloo on CPU, nccl on CUDA) and pick this rank's device.

    Without torchrun this is ``resolve_device`` and a lone process. Calling it again
    reuses the group; it is torn down when the process exits.

    >>> init_distributed("cpu")  # outside torchrun
    (Distributed(rank=0, world_size=1, local_rank=0), device(type='cpu'))
    """
    where, device = from_environment(), rank_device(device_name)
    if not where.enabled:
        return where, device
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        # On GPUs nccl carries the gradients, and gloo what stays on the CPU: each rank's generator, gathered into
        # every checkpoint (nccl refuses CPU tensors).
        dist.init_process_group("cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo")
        atexit.register(dist.destroy_process_group)
    return where, device
