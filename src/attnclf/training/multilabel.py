"""What training does differently when each text has a label set: loss, accuracy, validation record.

The model is unchanged (one logit per label); the loss is a binary
cross-entropy per label (``BCEWithLogitsLoss``), and validation cuts the
probabilities at 0.5, since per-label thresholds are tuned only once training
has picked its weights (``tune_thresholds`` in ``evaluation.multilabel``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from ..errors import AttnclfError
from ..evaluation.multilabel import binary_cross_entropy, multilabel_metrics

if TYPE_CHECKING:
    from .trainer import TrainConfig


def check_config(config: "TrainConfig") -> None:
    """Refuse the training options that have no multi-label meaning."""
    if config.label_smoothing:
        raise AttnclfError("--label-smoothing applies to single-label runs; drop it with --multi-label")
    if config.sampler == "balanced":
        raise AttnclfError("--sampler balanced draws by class and a multi-label text has several; "
                           "use --class-weight balanced (a positive weight per label) instead")
    if isinstance(config.class_weights, dict):
        raise AttnclfError("class weights by label (a dict) weigh single-label runs' classes; a multi-label run takes "
                           "none or balanced (a positive weight per label)")


class LabelMeanBCE(nn.BCEWithLogitsLoss):
    """Binary cross-entropy per (text, label) cell, divided by the labels: a text's cells sum to its labels' mean.

    The trainer sums a batch's cells and divides by its texts, so the loss it
    reports is the mean over (text, label) cells, as the validation loss is.
    """

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return super().forward(logits, targets) / logits.shape[-1]


def multilabel_loss(targets: np.ndarray, class_weights: str,
                    example_weights: np.ndarray | None = None) -> LabelMeanBCE:
    """The loss; ``class_weights="balanced"`` weighs each label's positives by its negatives/positives ratio, each
    text counted by its example weight when there are any (a text of weight 2 counts as two copies, as single-label
    runs' balanced weights count it).

    >>> multilabel_loss(np.array([[1, 0], [0, 0], [0, 1], [0, 1]]), "balanced").pos_weight.tolist()
    [3.0, 1.0]
    """
    if class_weights not in ("none", "balanced"):
        raise AttnclfError(f"class weights must be none or balanced, got {class_weights!r}")
    pos_weight = None
    if class_weights == "balanced":
        if example_weights is None:
            texts, positives = len(targets), targets.sum(axis=0).astype(np.float64)
        else:
            counted = example_weights.astype(np.float64)
            texts, positives = counted.sum(), (targets * counted[:, None]).sum(axis=0)
        # (a label without positives divides by 1: its weight never meets a positive)
        pos_weight = torch.tensor((texts - positives) / np.where(positives > 0, positives, 1), dtype=torch.float32)
    return LabelMeanBCE(pos_weight=pos_weight, reduction="none")  # (the trainer weighs and sums the cells)


def exact_matches(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """How many texts have their whole label set right at probability 0.5 (logit 0)."""
    return ((logits > 0) == targets.bool()).all(dim=-1).sum()


def validation_record(targets: np.ndarray, probabilities: np.ndarray, label_names: list[str]) -> dict:
    """history.jsonl's validation fields for a multi-label run, at threshold 0.5."""
    metrics = multilabel_metrics(targets, probabilities, label_names, report=False)
    return {"val_loss": binary_cross_entropy(targets, probabilities),
            **{f"val_{key}": metrics[key] for key in ("accuracy", "micro_f1", "macro_f1", "macro_precision",
                                                      "macro_recall", "hamming_loss", "roc_auc",
                                                      "average_precision")}}
