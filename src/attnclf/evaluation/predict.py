"""Batched inference: probabilities in dataset order."""

from __future__ import annotations

import numpy as np
import torch

from ..text.batching import BucketBatches


@torch.inference_mode()
def predict_probabilities(model: torch.nn.Module, batches: BucketBatches, device: torch.device) -> np.ndarray:
    """Softmax probabilities, one row per example, in the order the examples were given.

    Batches may come length-sorted; ``Batch.indices`` puts every row back in place.
    """
    model.eval()
    num_classes = model.config.num_classes
    probabilities = np.zeros((len(batches.sequences), num_classes), dtype=np.float32)
    for batch in batches:
        batch = batch.to(device)
        logits = model(batch.input_ids, batch.attention_mask).logits
        probabilities[batch.indices] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
    return probabilities


def log_loss(labels: np.ndarray, probabilities: np.ndarray) -> float:
    """Mean cross-entropy of the true class."""
    picked = probabilities[np.arange(len(labels)), labels]
    return float(-np.log(np.clip(picked, 1e-12, None)).mean())
