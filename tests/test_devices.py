"""What attnclf does on a GPU, checked on a machine that may have none: which generators a run seeds, forks and
checkpoints, which device batches go to, the process group's backend, and one-line refusals of what a GPU cannot do.

A CUDA GPU's generator holds the same kind of state as a CPU generator, so ``fake_gpus`` stands two CPU generators
in for two GPUs' (torch.cuda.default_generators); a model on the ``meta`` device stands in for one on a GPU where
only the device its inputs reach matters.
"""

import torch

from attnclf.training import distributed

GPU = torch.device("cuda", 1)


def test_distributed_gpus_share_their_cpu_tensors_too(monkeypatch):
    # Under nccl alone, gathering each rank's CPU generator for a checkpoint failed: nccl moves GPU tensors only.
    for name, value in (("RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "1")):
        monkeypatch.setenv(name, value)
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(("set_device", device)))
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda backend: calls.append(("backend", backend)))
    monkeypatch.setattr(distributed.atexit, "register", lambda function: None)
    where, device = distributed.init_distributed("auto")
    assert (where.rank, device) == (1, GPU)
    assert calls[0] == ("set_device", GPU)
    assert calls[1] == ("backend", "cpu:gloo,cuda:nccl")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # CPUs: gloo, as before
    calls.clear()
    assert distributed.init_distributed("auto")[1] == torch.device("cpu") and calls == [("backend", "gloo")]
