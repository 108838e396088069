"""Batched inference: probabilities in dataset order."""

from __future__ import annotations

import numpy as np
import torch

from ..text.batching import BucketBatches

DEFAULT_THRESHOLD = 0.5  # a multi-label run's probability that puts a label in a text's set, until tuned


@torch.inference_mode()
def predict_probabilities(model: torch.nn.Module, batches: BucketBatches, device: torch.device,
                          multi_label: bool = False, temperature: float = 1.0) -> np.ndarray:
    """Softmax probabilities, one row per example, in the order the examples were given.

    ``multi_label``: a sigmoid per label instead, each label's own probability. ``temperature``: softmax(logits / T),
    a calibrated run's probabilities (``attnclf calibrate``).

    Batches may come length-sorted; ``Batch.indices`` puts every row back in place.

    >>> from attnclf.models import build_model
    >>> model = build_model("boe", vocab_size=20, num_classes=3)
    >>> predict_probabilities(model, BucketBatches([[5, 6], [7]], batch_size=2), torch.device("cpu")).shape
    (2, 3)
    """
    model.eval()
    num_classes = model.config.num_classes
    probabilities = np.zeros((len(batches.sequences), num_classes), dtype=np.float32)
    for batch in batches:
        batch = batch.to(device)
        logits = model(batch.input_ids, batch.attention_mask).logits
        probabilities[batch.indices] = output_probabilities(logits, multi_label, temperature).cpu().numpy()
    return probabilities


def output_probabilities(logits: torch.Tensor, multi_label: bool, temperature: float = 1.0) -> torch.Tensor:
    """Probabilities from logits over ``temperature``: softmax over classes, or a sigmoid per label when
    ``multi_label``.

    >>> logits = torch.tensor([[0.0, 2.0]])
    >>> output_probabilities(logits, False, 2.0).round(decimals=3), output_probabilities(logits, True)
    (tensor([[0.2690, 0.7310]]), tensor([[0.5000, 0.8808]]))
    """
    scaled = logits.float() / temperature
    return torch.sigmoid(scaled) if multi_label else torch.softmax(scaled, dim=-1)

