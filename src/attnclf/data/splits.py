"""Validation splits carved from train: stratified, seeded, grouped when groups exist."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from sklearn.model_selection import StratifiedGroupKFold, StratifiedShuffleSplit

from .base import TextDataset


def train_validation_split(
    train: TextDataset, fraction: float = 0.1, seed: int = 0
) -> tuple[TextDataset, TextDataset]:
    """Split ``train`` into (train, validation), keeping class proportions.

    When ``train.groups`` is set (IMDB: the movie), a group never straddles the
    split, so validation measures generalisation to unseen groups as test does.

    >>> from attnclf.data.generated import synthetic
    >>> fit, val = train_validation_split(synthetic().train, 0.25, seed=0)
    >>> len(fit), len(val)
    (2400, 800)
    """
    fit_idx, val_idx = split_indices(train.labels, train.groups, fraction, seed)
    return train.subset(fit_idx.tolist(), "train"), train.subset(val_idx.tolist(), "validation")


def split_indices(labels: Sequence[int], groups: Sequence[str] | None = None, fraction: float = 0.1,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sorted positions of the (train, validation) parts, from the labels (and groups) alone.

    ``train_validation_split`` on the indices, for data whose texts are not in memory.

    >>> fit, val = split_indices([0, 1] * 10, fraction=0.2, seed=0)
    >>> len(fit), len(val), sorted(set(fit) | set(val)) == list(range(20))
    (16, 4, True)
    """
    if not 0 < fraction < 1:
        raise ValueError(f"validation fraction must be in (0, 1), got {fraction}")
    labels = np.asarray(labels)
    if groups is not None:
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
            order = np.random.default_rng(seed).permutation(len(labels))
            n_val = max(1, round(fraction * len(labels)))
            fit_idx, val_idx = order[n_val:], order[:n_val]
    return np.sort(fit_idx), np.sort(val_idx)
