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
    """Refuse the training options that have no multi-label meaning.

    >>> from attnclf.training.trainer import TrainConfig
    >>> check_config(TrainConfig(label_smoothing=0.1))
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: --label-smoothing applies to single-label runs; drop it with --multi-label
    """
    if config.label_smoothing:
        raise AttnclfError("--label-smoothing applies to single-label runs; drop it with --multi-label")
    if config.sampler == "balanced":
        raise AttnclfError("--sampler balanced draws by class and a multi-label text has several; "
                           "use --class-weight balanced (a positive weight per label) instead")
    if isinstance(config.class_weights, dict):
        raise AttnclfError("class weights by label (a dict) weigh single-label runs' classes; a multi-label run takes "
                           "none or balanced (a positive weight per label)")


# How many times the labels a validation text holds on average the run may predict a text before it says so. Each
# label's F1-maximising threshold leans toward recall, the more so the rarer the label, so a trained run predicts
# somewhat more labels than the texts hold; a model that has not learned to tell the labels apart gives every label
# about the same probability on every text, and each label's best cut then keeps nearly every text: the label sets
# crowd toward all the labels, many times what the texts hold. On generated topics (5 labels, 1.45 a text) runs
# predicted 1.55 a test text trained 8 epochs, 1.98 after 1 epoch (micro-F1 0.65), 4.35 untrained (--lr 1e-6).
CROWDED_FACTOR = 2
# How crowded_label_sets_note's line starts: a resumed run, which tunes the thresholds again, replaces the last one.
CROWDED_NOTE_START = "at the tuned thresholds the run predicts "


def crowded_label_sets_note(targets: np.ndarray, predicted: np.ndarray) -> str | None:
    """A line for a multi-label run whose tuned thresholds give the validation texts (``targets``, 0/1 per text and
    label) more than ``CROWDED_FACTOR`` times as many labels on average (``predicted``, 0/1 likewise) as they hold;
    None where there is nothing to say, or the texts hold no labels to compare with.

    >>> crowded_label_sets_note(np.array([[1, 0, 0], [0, 1, 0]]), np.array([[1, 1, 1], [1, 1, 0]]))
    'at the tuned thresholds the run predicts 2.5 of the 3 labels per validation text, which hold 1.0 on average: \
it has not learned to tell the labels apart yet; train longer (--epochs) or on more texts'
    >>> crowded_label_sets_note(np.array([[1, 0, 0], [0, 1, 0]]), np.array([[1, 1, 0], [0, 1, 0]])) is None
    True
    """
    held, predicts = float(np.asarray(targets).sum(axis=1).mean()), float(np.asarray(predicted).sum(axis=1).mean())
    if held == 0 or predicts <= CROWDED_FACTOR * held:
        return None
    return (f"{CROWDED_NOTE_START}{predicts:.1f} of the {targets.shape[1]:,} labels per validation text, which hold "
            f"{held:.1f} on average: it has not learned to tell the labels apart yet; train longer (--epochs) or on "
            f"more texts")


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
    """How many texts have their whole label set right at probability 0.5 (logit 0).

    >>> exact_matches(torch.tensor([[2.0, -1.0], [2.0, 1.0]]), torch.tensor([[1, 0], [1, 0]])).item()
    1
    """
    return ((logits > 0) == targets.bool()).all(dim=-1).sum()


def validation_record(targets: np.ndarray, probabilities: np.ndarray, label_names: list[str]) -> dict:
    """history.jsonl's validation fields for a multi-label run, at threshold 0.5.

    >>> record = validation_record(np.array([[1, 0], [0, 1]]), np.array([[0.9, 0.2], [0.3, 0.6]]), ["a", "b"])
    >>> record["val_accuracy"], record["val_micro_f1"]
    (1.0, 1.0)
    """
    metrics = multilabel_metrics(targets, probabilities, label_names, report=False, intervals=False)
    return {"val_loss": binary_cross_entropy(targets, probabilities),
            **{f"val_{key}": metrics[key] for key in ("accuracy", "micro_f1", "macro_f1", "macro_precision",
                                                      "macro_recall", "hamming_loss", "roc_auc",
                                                      "average_precision")}}
