"""Validation splits carved from train: stratified, seeded, grouped when groups exist, or the latest texts."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from sklearn.model_selection import StratifiedGroupKFold, StratifiedShuffleSplit

from ..checks import real_number
from ..errors import AttnclfError, DataError, shown
from .base import TextDataset


def train_validation_split(
    train: TextDataset, fraction: float = 0.1, seed: int = 0, hold_out: str = "random"
) -> tuple[TextDataset, TextDataset]:
    """Split ``train`` into (train, validation), keeping class proportions.

    When ``train.groups`` is set (IMDB: the movie), a group never straddles the
    split, so validation measures generalisation to unseen groups as test does.
    Multi-label data is split by a seeded shuffle, not stratified: label sets
    are too many and too rare to stratify on.

    ``hold_out="latest"`` instead holds out the latest texts of each class
    (multi-label: of all texts) by ``train.order``, the same for every seed:
    for data whose test split was written later than its training split
    (20 Newsgroups), a random split hides that shift. (A ``--max-train-examples``
    sample is drawn first, by the split seed: give runs one ``--split-seed``
    to share it.)

    >>> from attnclf.data.generated import synthetic
    >>> fit, val = train_validation_split(synthetic().train, 0.25, seed=0)
    >>> len(fit), len(val)
    (2400, 800)
    """
    check_hold_out(hold_out, train.name or "the training data", train.order)
    labels = None if train.multi_label else train.labels
    order = train.order if hold_out == "latest" else None
    fit_idx, val_idx = split_indices(labels, train.groups, fraction, seed, size=len(train), order=order)
    return train.subset(fit_idx.tolist(), "train"), train.subset(val_idx.tolist(), "validation")


def check_hold_out(hold_out: str, name: str, order: Sequence[int] | None, own_validation: bool | str = False) -> None:
    """Refuse a hold-out that ``name``'s data cannot give: none where it has validation texts of its own
    (``own_validation``: True, or the name of the --validation-file that gives them).

    >>> check_hold_out("latest", "20newsgroups", order=[3, 1, 2])
    >>> check_hold_out("latest", "train.csv", order=[3, 1, 2], own_validation="dev.csv")
    Traceback (most recent call last):
    ...
    attnclf.errors.DataError: --validation-file dev.csv gives the validation texts; drop --hold-out latest
    """
    if hold_out not in ("random", "latest"):
        raise AttnclfError(f"hold-out must be random or latest, got {shown(hold_out)}")
    if own_validation and hold_out != "random":
        # (a file's: "train.csv has its own validation split" named the training file, which has none)
        given = (f"{name} has its own validation split" if own_validation is True
                 else f"--validation-file {own_validation} gives the validation texts")
        raise DataError(f"{given}; drop --hold-out {hold_out}")
    if hold_out == "latest" and order is None:
        raise DataError(f"{name} records no order of its texts, so it has no latest ones to hold out; "
                        f"use --hold-out random")


def check_fraction(fraction: float, name: str = "validation fraction") -> float:
    """``fraction`` as a ``float`` that leaves texts on both sides of a validation split, or one line saying what is
    wrong, naming ``name``, the setting the caller gave it as (``val_fraction``, or a flag: ``--val-fraction``).

    >>> check_fraction(1, "val_fraction")
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: val_fraction must be in (0, 1), got 1
    """
    number = real_number(fraction)
    if number is None:  # ("0.1" failed on the comparison; numpy's float32 would not go into config.json)
        raise AttnclfError(f"{name} must be a number, got {shown(fraction)}")
    if not 0 < number < 1:
        raise AttnclfError(f"{name} must be in (0, 1), got {shown(fraction)}")
    return number


def split_indices(labels: Sequence[int] | None, groups: Sequence[str] | None = None, fraction: float = 0.1,
                  seed: int = 0, *, size: int | None = None, order: Sequence[int] | None = None,
                  keep_every_class: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Sorted positions of the (train, validation) parts, from the labels (and groups) alone.

    ``train_validation_split`` on the indices, for data whose texts are not in memory.
    ``labels=None`` (multi-label data) shuffles ``size`` positions without stratifying.
    With ``order``, validation is the latest ``fraction`` of each class (of all texts when
    ``labels=None``), ties broken by position; the seed and the groups are unused.
    Labels too few to stratify are shuffled, and the train part still gets a text of every class
    while another class has two there; ``keep_every_class=False`` leaves the shuffle as it is, for
    a sample (the validation part) whose other part is dropped.

    >>> fit, val = split_indices([0, 1] * 10, fraction=0.2, seed=0)
    >>> len(fit), len(val), sorted(set(fit) | set(val)) == list(range(20))
    (16, 4, True)
    """
    check_fraction(fraction)
    if order is not None:
        fit_idx, val_idx = _latest_split(labels, order, fraction)
    elif labels is None:
        fit_idx, val_idx = _shuffle_split(size, fraction, seed)
    elif groups is not None:
        fit_idx, val_idx = _grouped_split(labels, groups, fraction, seed)
    else:
        fit_idx, val_idx = _stratified_split(np.asarray(labels), fraction, seed, keep_every_class)
    if len(val_idx) and not len(fit_idx):  # (else the tokenizer, given no text, advised lowering --min-frequency)
        raise DataError(f"a validation fraction of {fraction:g} holds out all {len(val_idx)} texts, leaving none to "
                        f"train on; hold out a smaller fraction, or give more texts")
    return np.sort(fit_idx), np.sort(val_idx)


def _grouped_split(labels: Sequence[int], groups: Sequence[str], fraction: float,
                   seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``split_indices``' (fit, validation) where no group straddles the two, each stratified by class."""
    # The smaller side is drawn: the validation part when fraction <= 1/2, the kept part otherwise (a
    # --max-train-examples sample is fraction ~0.9, which 2 folds would make 0.5).
    small = min(fraction, 1 - fraction)
    n_folds = max(2, round(1 / small))
    if math.isclose(n_folds * small, 1, rel_tol=0.01):  # one fold of n_folds is that side (runs' splits so far)
        folds = StratifiedGroupKFold(n_splits=n_folds, shuffle=True, random_state=seed)
        rest_idx, drawn_idx = next(folds.split(np.zeros(len(labels)), labels, groups=groups))
    else:  # a fold would be 1/n_folds, up to a fifth off (0.4 would draw half; IMDB 7,000 of 25,000 drew 6,248)
        drawn_idx, rest_idx = _grouped_draw(labels, groups, small, seed)
    return (rest_idx, drawn_idx) if fraction <= 0.5 else (drawn_idx, rest_idx)


def _stratified_split(labels: np.ndarray, fraction: float, seed: int,
                      keep_every_class: bool) -> tuple[np.ndarray, np.ndarray]:
    """``split_indices``' (fit, validation) keeping class proportions, or a shuffle where the classes are too few."""
    values, counts = np.unique(labels, return_counts=True)
    # Stratification needs two texts per class: a class with one trains on it, and the others stay stratified.
    alone = np.isin(labels, values[counts < 2])
    paired, classes = np.flatnonzero(~alone), int((counts >= 2).sum())
    # Both sides need a text of every class: the held side as this check always counted it (a change would move
    # the splits of runs already trained), the kept side as StratifiedShuffleSplit counts it (ceil).
    fits = round(fraction * len(paired)) >= classes and len(paired) - math.ceil(fraction * len(paired)) >= classes
    if classes and fits:  # (else tiny sets fall back to a plain shuffle that keeps every class a fit text)
        splitter = StratifiedShuffleSplit(n_splits=1, test_size=fraction, random_state=seed)
        fit, val = next(splitter.split(np.zeros(len(paired)), labels[paired]))
        return np.concatenate([paired[fit], np.flatnonzero(alone)]), paired[val]
    fit_idx, val_idx = _shuffle_split(len(labels), fraction, seed)
    return _keep_every_class(labels, fit_idx, val_idx) if keep_every_class else (fit_idx, val_idx)


def _grouped_draw(labels: Sequence[int], groups: Sequence[str], fraction: float,
                  seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(drawn, rest): whole groups, in a seeded order, drawn while each class stays within ``fraction`` of its
    texts (rounded), so the drawn side is that fraction of every class, short by less than a group's texts.

    >>> drawn, rest = _grouped_draw([0, 1] * 50, [str(i // 2) for i in range(100)], 0.3, seed=0)
    >>> len(drawn), len(rest)
    (30, 70)
    """
    classes, label_index = np.unique(np.asarray(labels), return_inverse=True)
    _, group_index = np.unique(np.asarray(groups), return_inverse=True)
    per_group = np.zeros((group_index.max() + 1, len(classes)), dtype=np.int64)
    np.add.at(per_group, (group_index, label_index), 1)
    room = np.floor(fraction * per_group.sum(axis=0) + 0.5)  # each class's share, halves rounded up
    drawn = np.zeros(len(per_group), dtype=bool)
    for group in np.random.default_rng(seed).permutation(len(per_group)):
        if (per_group[group] <= room).all():
            drawn[group] = True
            room -= per_group[group]
    return np.flatnonzero(drawn[group_index]), np.flatnonzero(~drawn[group_index])


def _keep_every_class(labels: np.ndarray, fit_idx: np.ndarray, val_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A shuffled (fit, validation) where each class without a fit text swaps its first validation text for the first
    fit text of a class with two or more there, while one exists: a class's only text trains, as the stratified split
    keeps it, and no class goes unlearned. A shuffle that needs no swap is left as it was (runs trained on it).

    >>> fit, val = _keep_every_class(np.array([0, 0, 0, 1]), np.array([0, 1]), np.array([3, 2]))
    >>> fit.tolist(), val.tolist()
    ([3, 1], [0, 2])
    """
    names, classes = np.unique(labels, return_inverse=True)
    classes = classes.ravel()
    fit_idx, val_idx = fit_idx.copy(), val_idx.copy()
    counts = np.bincount(classes[fit_idx], minlength=len(names))
    for v, held in enumerate(val_idx):
        if counts[classes[held]]:
            continue
        spare = np.flatnonzero(counts[classes[fit_idx]] >= 2)
        if not len(spare):
            break
        f = spare[0]
        counts[classes[fit_idx[f]]] -= 1
        counts[classes[held]] += 1
        fit_idx[f], val_idx[v] = held, fit_idx[f]
    return fit_idx, val_idx


def _shuffle_split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    n_val = max(1, round(fraction * n))
    return order[n_val:], order[:n_val]


def _latest_split(labels: Sequence[int] | None, order: Sequence[int], fraction: float) -> tuple[np.ndarray, np.ndarray]:
    classes = np.zeros(len(order), dtype=np.int64) if labels is None else np.asarray(labels)
    # Sorting by (class, order, position) lines each class's texts up oldest first.
    ranked = np.lexsort((np.arange(len(order)), np.asarray(order), classes))
    held = np.zeros(len(order), dtype=bool)
    start = 0
    for count in np.unique(classes, return_counts=True)[1]:
        # Halves round up (round() would take 2 of 25 at 10%); a class always keeps a text to train on.
        n_val = min(count - 1, math.floor(fraction * count + 0.5))
        held[ranked[start + count - n_val:start + count]] = True
        start += count
    if not held.any():
        raise DataError(f"too few texts per class to hold out the latest {fraction:.0%} of each "
                        f"({len(order)} texts in all); train on more, or use --hold-out random")
    return np.flatnonzero(~held), np.flatnonzero(held)
