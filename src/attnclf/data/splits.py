"""Validation splits carved from train: stratified, seeded, grouped when groups exist."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from sklearn.model_selection import StratifiedGroupKFold, StratifiedShuffleSplit

from ..errors import AttnclfError
from .base import TextDataset


def train_validation_split(
    train: TextDataset, fraction: float = 0.1, seed: int = 0
) -> tuple[TextDataset, TextDataset]:
    """Split ``train`` into (train, validation), keeping class proportions.

    When ``train.groups`` is set (IMDB: the movie), a group never straddles the
    split, so validation measures generalisation to unseen groups as test does.
    Multi-label data is split by a seeded shuffle, not stratified: label sets
    are too many and too rare to stratify on.

    >>> from attnclf.data.generated import synthetic
    >>> fit, val = train_validation_split(synthetic().train, 0.25, seed=0)
    >>> len(fit), len(val)
    (2400, 800)
    """
    labels = None if train.multi_label else train.labels
    fit_idx, val_idx = split_indices(labels, train.groups, fraction, seed, size=len(train))
    return train.subset(fit_idx.tolist(), "train"), train.subset(val_idx.tolist(), "validation")


def check_fraction(fraction: float) -> None:
    """A validation fraction must leave texts on both sides.

    >>> check_fraction(0.1)
    """
    if not 0 < fraction < 1:
        raise AttnclfError(f"validation fraction must be in (0, 1), got {fraction}")


def split_indices(labels: Sequence[int] | None, groups: Sequence[str] | None = None, fraction: float = 0.1,
                  seed: int = 0, *, size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted positions of the (train, validation) parts, from the labels (and groups) alone.

    ``train_validation_split`` on the indices, for data whose texts are not in memory.
    ``labels=None`` (multi-label data) shuffles ``size`` positions without stratifying.

    >>> fit, val = split_indices([0, 1] * 10, fraction=0.2, seed=0)
    >>> len(fit), len(val), sorted(set(fit) | set(val)) == list(range(20))
    (16, 4, True)
    """
    check_fraction(fraction)
    if labels is None:
        fit_idx, val_idx = _shuffle_split(size, fraction, seed)
    elif groups is not None:
        # One fold of k is the smaller side: the validation part when fraction <= 1/2, the kept part
        # otherwise (a --max-train-examples sample is fraction ~0.9, which 2 folds would make 0.5).
        small = min(fraction, 1 - fraction)
        folds = StratifiedGroupKFold(n_splits=max(2, round(1 / small)), shuffle=True, random_state=seed)
        rest_idx, fold_idx = next(folds.split(np.zeros(len(labels)), labels, groups=groups))
        fit_idx, val_idx = (rest_idx, fold_idx) if fraction <= 0.5 else (fold_idx, rest_idx)
    else:
        _, counts = np.unique(labels, return_counts=True)
        # Stratification needs two members per class; tiny sets fall back to a plain shuffle.
        stratify = counts.min() >= 2 and round(fraction * len(labels)) >= len(counts)
        splitter = StratifiedShuffleSplit(n_splits=1, test_size=fraction, random_state=seed)
        if stratify:
            fit_idx, val_idx = next(splitter.split(np.zeros(len(labels)), labels))
        else:
            fit_idx, val_idx = _shuffle_split(len(labels), fraction, seed)
    return np.sort(fit_idx), np.sort(val_idx)


def _shuffle_split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    n_val = max(1, round(fraction * n))
    return order[n_val:], order[:n_val]
