"""Data-parallel training: 2 torchrun processes take the steps 1 process takes on the same global batch."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from attnclf.cli import main
from attnclf.errors import AttnclfError
from attnclf.training.distributed import Distributed
from attnclf.training.run import train_run
from attnclf.training.settings import resume_settings
from attnclf.training.trainer import checkpoint_tensors

# Tiny, dropout-free (ranks draw different masks than one process would), constant learning rate
# (so extending a finished run by --resume --epochs 3 is well defined), a learning rate high
# enough that the weights move far more than the tolerance. 250 examples leave 225 to train on:
# each epoch's last global batch of 16 holds one example, so rank 1 trains on a zero-weight stand-in.
# Class weights make the global batch's loss a weighted mean, which each rank must divide the same way.
TRAIN = ["train", "--dataset", "demo", "--max-train-examples", "250", "--set", "d_model=16", "--set", "layers=1",
         "--set", "heads=2", "--set", "dropout=0", "--schedule", "constant", "--warmup-ratio", "0", "--lr", "0.01",
         "--class-weight", "balanced", "--patience", "0", "--device", "cpu", "--quiet", "--no-report"]


def torchrun(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                             "-m", "attnclf", *args], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-6000:]
    return result


def final_weights(run_dir) -> dict[str, torch.Tensor]:
    """The weights after the last epoch (model.safetensors holds the best epoch's)."""
    tensors = load_file(str(checkpoint_tensors(run_dir)))
    return {k: v for k, v in tensors.items() if k.startswith("model.")}


def max_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


def history(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]


def test_two_processes_match_one_process_with_the_same_global_batch_and_resume(tmp_path):
    two, one, half = tmp_path / "two", tmp_path / "one", tmp_path / "half"
    trained = torchrun(*TRAIN, "--epochs", "2", "--batch-size", "8", "--output", str(two))
    assert trained.stdout.count("test: accuracy") == 1, "only rank 0 reports"
    assert "Warning" not in trained.stderr, trained.stderr  # e.g. torch's deprecation of DDP's broadcast_buffers
    assert main([*TRAIN, "--epochs", "2", "--batch-size", "16", "--output", str(one)]) == 0
    assert main([*TRAIN, "--epochs", "2", "--batch-size", "8", "--output", str(half)]) == 0

    same, moved = max_difference(final_weights(two), final_weights(one)), max_difference(final_weights(one),
                                                                                          final_weights(half))
    assert same < 1e-4, f"2 processes x batch 8 differ from 1 process x batch 16 by {same}"
    assert moved > 1e-2, "the comparison is blind: a different global batch should change the weights"
    assert [h["train_loss"] for h in history(two)] == pytest.approx([h["train_loss"] for h in history(one)], rel=1e-5)
    assert history(two)[-1]["val_accuracy"] == history(one)[-1]["val_accuracy"]
    assert json.loads((two / "metrics.json").read_text())["accuracy"] == pytest.approx(
        json.loads((one / "metrics.json").read_text())["accuracy"])

    # --resume under torchrun: every rank loads the checkpoint and goes on as one process would.
    torchrun("train", "--resume", "--epochs", "3", "--output", str(two), "--quiet")
    assert main(["train", "--resume", "--epochs", "3", "--output", str(one), "--quiet"]) == 0
    assert [h["epoch"] for h in history(two)] == [1, 2, 3]
    assert max_difference(final_weights(two), final_weights(one)) < 1e-4

    # The global batch is per-process batch x processes: resuming with another count would change it.
    with pytest.raises(AttnclfError, match="trained by 2 process"):
        train_run(resume_settings(two, epochs=4), resume=True, progress=False)


def test_each_rank_takes_a_contiguous_part_of_every_global_batch():
    batch = np.arange(10, 17)
    parts = [Distributed(rank, 3).shard(batch) for rank in range(3)]
    assert np.concatenate(parts).tolist() == batch.tolist()
    assert [len(p) for p in parts] == [3, 2, 2]
    assert Distributed(1, 2).shard(np.array([5])).size == 0  # the trainer gives such a rank a zero-weight stand-in
