"""Multi-label metrics and per-label decision thresholds, computed with scikit-learn.

A multi-label model gives each label its own probability (a sigmoid per
logit); a text gets every label whose probability reaches that label's
threshold. ``tune_thresholds`` picks each threshold to maximise the label's
F1 on validation data; ``multilabel_metrics`` scores the sets it yields.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
from sklearn.metrics import (
    classification_report,
    hamming_loss,
    precision_recall_fscore_support,
    roc_auc_score,
)

from ..prediction import decided_classes
from .metrics import (BOOTSTRAP_RESAMPLES, ECE_BINS, INTERVAL_MIN_TEXTS, average_precision, delong_interval,
                      macro_f1_percentiles, wilson_interval)
from .predict import DEFAULT_THRESHOLD


def predicted_sets(probabilities: np.ndarray, thresholds: Sequence[float] | float = DEFAULT_THRESHOLD) -> np.ndarray:
    """A (texts, labels) 0/1 matrix: 1 where a probability reaches its label's threshold.

    >>> predicted_sets(np.array([[0.7, 0.2], [0.4, 0.5]]), [0.5, 0.3]).tolist()
    [[1, 0], [0, 1]]
    """
    return decided_classes(probabilities, None, np.asarray(thresholds))


def tune_thresholds(y_true: np.ndarray, probabilities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per label, the threshold that maximises its F1 on these examples, and that F1.

    Every distinct probability is a candidate cut (ties fall on the same side);
    the threshold sits midway between the lowest probability kept and the next
    one below, so it does not hinge on one validation example. A label with no
    positive example keeps ``DEFAULT_THRESHOLD`` (no cut can give it F1 > 0).
    Among equal F1s the highest threshold wins.

    >>> t, f1 = tune_thresholds(np.array([[1], [1], [0], [1], [0]]), np.array([[.9], [.8], [.7], [.6], [.3]]))
    >>> round(float(t[0]), 2), round(float(f1[0]), 3)
    (0.45, 0.857)
    """
    y_true, probabilities = np.asarray(y_true), np.asarray(probabilities, dtype=np.float64)
    thresholds = np.full(y_true.shape[1], DEFAULT_THRESHOLD)
    best_f1 = np.zeros(y_true.shape[1])
    for label in range(y_true.shape[1]):
        positives = int(y_true[:, label].sum())
        if positives == 0:
            continue
        order = np.argsort(-probabilities[:, label], kind="stable")
        scores, hits = probabilities[order, label], y_true[order, label]
        # Keeping the top k: F1 = 2 TP / (2 TP + FP + FN) = 2 TP / (k + positives).
        f1 = 2 * np.cumsum(hits) / (np.arange(1, len(scores) + 1) + positives)
        cut_ends = np.r_[scores[1:] != scores[:-1], True]  # the last of each run of tied scores
        best = int(np.argmax(np.where(cut_ends, f1, -1.0)))
        below = scores[best + 1] if best + 1 < len(scores) else 0.0
        thresholds[label], best_f1[label] = (scores[best] + below) / 2, f1[best]
    return thresholds, best_f1


def _per_text_scores(y_true: np.ndarray, y_pred: np.ndarray) -> dict:
    """Precision, recall and F1 of each text's label set, averaged over texts. An empty set predicted for a text
    without labels is right: 1 for all three (scikit-learn's ``average="samples"`` can only score it 0 or 1
    together with the other undefined cases, such as precision when nothing was predicted for a labelled text).

    >>> scores = _per_text_scores(np.array([[0, 0], [1, 0], [1, 1]]), np.array([[0, 0], [0, 0], [1, 0]]))
    >>> {name: round(value, 3) for name, value in scores.items()}  # texts: (1, 1, 1), (0, 0, 0), (1, 0.5, 0.667)
    {'precision': 0.667, 'recall': 0.5, 'f1': 0.556}
    """
    y_true, y_pred = np.asarray(y_true).astype(bool), np.asarray(y_pred).astype(bool)  # (0/1 floats too)
    hits = (y_true & y_pred).sum(axis=1).astype(float)
    true, predicted = y_true.sum(axis=1), y_pred.sum(axis=1)
    both_empty = (true == 0) & (predicted == 0)
    precision = np.where(predicted > 0, hits / np.maximum(predicted, 1), both_empty)
    recall = np.where(true > 0, hits / np.maximum(true, 1), both_empty)
    f1 = np.where(both_empty, 1.0, 2 * hits / np.maximum(true + predicted, 1))
    return {"precision": float(precision.mean()), "recall": float(recall.mean()), "f1": float(f1.mean())}


def multilabel_metrics(y_true: np.ndarray, probabilities: np.ndarray, label_names: Sequence[str],
                       thresholds: Sequence[float] | None = None, report: bool = True, intervals: bool = True) -> dict:
    """Multi-label test metrics as a JSON-ready dict, label sets cut at ``thresholds`` (default 0.5 each).

    ``accuracy`` is subset accuracy (the whole set right; also under
    ``subset_accuracy``); ``hamming_loss`` the share of wrong (text, label)
    cells; precision, recall and F1 micro (over all cells), macro (mean over
    labels that occur in the truth or the predictions: a label neither has nor
    predicts is no evidence either way, as in ``compute_metrics``), weighted (by
    support) and samples (mean over texts); ``roc_auc``
    the mean of the per-label AUCs that are defined (a label needs positive and
    negative test texts), ``micro_roc_auc`` over all cells; ``average_precision``
    and ``micro_average_precision`` likewise (the area under a precision-recall
    curve, each label's own in ``per_class``); ``per_class`` per
    label with its threshold and the number of texts given it (``predicted``: a
    label without texts, never given, has no score, 0 as scikit-learn writes it,
    and the averages leave it out); with tuned thresholds, micro/macro F1 at 0.5 too.
    How far each label's probability can be taken at its word, as the yes-or-no
    probability it is (``calibrate``'s figures): ``log_loss`` the binary log loss
    over every (text, label) cell, each label's calibration error
    (``label_calibration_errors``) in ``per_class`` and their mean in ``ece``. Unless ``intervals=False`` (the
    trainer's per-epoch validation), the macro-F1's and the macro ROC AUC's 95% intervals
    (``label_set_macro_f1_interval``, ``label_auc_interval``), beside the subset accuracy's.

    >>> m = multilabel_metrics(np.array([[1, 0], [1, 1]]), np.array([[.9, .2], [.6, .4]]), ["a", "b"])
    >>> m["subset_accuracy"], m["hamming_loss"], round(m["micro_f1"], 3)
    (0.5, 0.25, 0.8)
    >>> round(m["log_loss"], 4), round(m["ece"], 3), round(m["per_class"]["b"]["ece"], 3)
    (0.4389, 0.325, 0.4)
    """
    y_true = np.asarray(y_true)
    thresholds = np.full(len(label_names), DEFAULT_THRESHOLD) if thresholds is None else np.asarray(thresholds)
    y_pred = predicted_sets(probabilities, thresholds)
    every_label_right = int(np.all(y_true == y_pred, axis=1).sum())  # (scikit-learn's accuracy_score of label sets)
    subset_accuracy = every_label_right / len(y_true)
    metrics: dict = {"multi_label": True, "accuracy": subset_accuracy, "subset_accuracy": subset_accuracy,
                     "subset_accuracy_ci95": list(wilson_interval(every_label_right, len(y_true))),
                     "hamming_loss": float(hamming_loss(y_true, y_pred)), "num_examples": int(len(y_true))}
    seen = _seen(y_true, y_pred)
    for average in ("micro", "macro", "weighted"):
        p, r, f, _ = precision_recall_fscore_support(y_true, y_pred, average=average, labels=seen, zero_division=0)
        metrics |= {f"{average}_precision": float(p), f"{average}_recall": float(r), f"{average}_f1": float(f)}
    per_text = _per_text_scores(y_true, y_pred)
    metrics |= {f"samples_{name}": value for name, value in per_text.items()}
    per_label_auc = [_auc(y_true[:, i], probabilities[:, i]) for i in range(len(label_names))]
    defined = [a for a in per_label_auc if a is not None]
    metrics["roc_auc"] = float(np.mean(defined)) if defined else None
    if intervals:
        metrics["macro_f1_ci95"] = label_set_macro_f1_interval(y_true, y_pred)
        metrics["roc_auc_ci95"] = label_auc_interval(y_true, probabilities)
    metrics["micro_roc_auc"] = _auc(y_true.ravel(), np.asarray(probabilities).ravel())
    per_label_ap = average_precision(y_true, probabilities)
    defined = [a for a in per_label_ap if a is not None]
    metrics["average_precision"] = float(np.mean(defined)) if defined else None
    metrics["micro_average_precision"] = average_precision(y_true.reshape(-1, 1),
                                                           np.asarray(probabilities).reshape(-1, 1))[0]
    metrics["log_loss"] = binary_cross_entropy(y_true, probabilities)
    per_label_ece = label_calibration_errors(y_true, np.asarray(probabilities))
    metrics["ece"] = float(np.mean(per_label_ece))
    precision, recall, f1, support = precision_recall_fscore_support(y_true, y_pred, zero_division=0)
    metrics["per_class"] = {
        name: {"precision": float(precision[i]), "recall": float(recall[i]), "f1": float(f1[i]),
               "support": int(support[i]), "roc_auc": per_label_auc[i], "average_precision": per_label_ap[i],
               "ece": per_label_ece[i], "threshold": float(thresholds[i]), "predicted": int(y_pred[:, i].sum())}
        for i, name in enumerate(label_names)
    }
    if not np.allclose(thresholds, DEFAULT_THRESHOLD):
        at_half = predicted_sets(probabilities)
        metrics["at_0.5"] = {f"{average}_f1": float(precision_recall_fscore_support(
            y_true, at_half, average=average, labels=_seen(y_true, at_half), zero_division=0)[2])
            for average in ("micro", "macro")}
    if report:
        metrics["classification_report"] = _with_samples_row(classification_report(
            y_true, y_pred, labels=seen, target_names=[label_names[i] for i in seen], zero_division=0, digits=4),
            per_text)
    return metrics


def label_set_macro_f1_interval(y_true: np.ndarray, y_pred: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES,
                                seed: int = 0) -> list[float] | None:
    """A multi-label macro-F1's 95% percentile-bootstrap interval: the texts drawn with replacement ``resamples``
    times, each draw's macro-F1 over the labels it holds or predicts, the middle 95% (``metrics.macro_f1_interval``'s
    for label sets, which cannot draw a confusion matrix's cells instead: a text's labels are not one cell). A text's
    part in a label's F1 is whether it is a true positive and whether it is an error, a sparse row, so each draw's
    counts are its times-drawn per text times those rows. Seeded; None below ``INTERVAL_MIN_TEXTS`` texts.

    >>> truth = np.stack([np.arange(400) % 2, np.arange(400) % 3 == 0], axis=1)
    >>> predicted = truth.copy(); predicted[::10, 0] ^= 1  # (label 0 wrong in every tenth text)
    >>> [round(bound, 3) for bound in label_set_macro_f1_interval(truth, predicted)]
    [0.939, 0.969]
    """
    from scipy import sparse

    y_true, y_pred = np.asarray(y_true).astype(bool), np.asarray(y_pred).astype(bool)
    count, labels = y_true.shape
    if count < INTERVAL_MIN_TEXTS:
        return None
    outcomes = sparse.csr_matrix(np.hstack([y_true & y_pred, y_true ^ y_pred]), dtype=np.int64)
    rng, totals = np.random.default_rng(seed), []
    block = max(1, min(resamples, 2_000_000 // count))  # (draws at a time: about 16 MB of drawn texts)
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        drawn = rng.integers(0, count, (size, count)) + count * np.arange(size)[:, None]
        times_drawn = np.bincount(drawn.ravel(), minlength=size * count).reshape(size, count)
        totals.append((outcomes.T @ times_drawn.T).T)
    totals = np.concatenate(totals)
    tp, wrong = totals[:, :labels], totals[:, labels:]
    return macro_f1_percentiles(tp, 2 * tp + wrong)


def label_auc_interval(y_true: np.ndarray, probabilities: np.ndarray) -> list[float] | None:
    """The 95% interval of a multi-label run's macro ROC AUC (the mean over the labels with texts on both sides,
    as ``multilabel_metrics`` reports it), by DeLong's variance (``metrics.delong_interval``): the labels' AUCs, read
    off the same texts, are not taken as independent. None where no label's AUC is defined, where a label scored has a
    single text on a side, or below ``INTERVAL_MIN_TEXTS`` texts.

    >>> truth = np.stack([np.arange(200) % 2, np.arange(200) % 4 == 0], axis=1)
    >>> scores = np.linspace(.2, .8, 200)[:, None] + .1 * truth
    >>> [round(bound, 3) for bound in label_auc_interval(truth, scores)]
    [0.614, 0.69]
    """
    y_true = np.asarray(y_true).astype(bool)
    defined = y_true.any(0) & ~y_true.all(0)
    if not defined.any():
        return None
    return delong_interval(y_true[:, defined], np.asarray(probabilities)[:, defined])


def _with_samples_row(report: str, per_text: dict) -> str:
    """scikit-learn's ``report`` with its "samples avg" row scored as ``_per_text_scores`` scores the texts: its own
    row counts an empty set predicted for a text without labels as wrong, and would contradict ``samples_f1``.
    That row is the report's last: a label of the user's may be called "samples avg" too.

    >>> _with_samples_row(" samples avg     0.5000    0.2500    0.3333         4", {"precision": 1, "recall": 0.75,
    ...                   "f1": 0.8})
    ' samples avg     1.0000    0.7500    0.8000         4'
    """
    rows = report.rstrip("\n")
    above, newline, last = rows.rpartition("\n")
    scores = iter(f"{per_text[name]:.4f}" for name in ("precision", "recall", "f1"))
    return above + newline + re.sub(r"\d+\.\d{4}", lambda _: next(scores), last, count=3) + report[len(rows):]


def _seen(y_true: np.ndarray, y_pred: np.ndarray) -> list[int]:
    """The labels a test text has or a prediction names (all of them if none does)."""
    seen = np.flatnonzero(np.asarray(y_true).any(0) | np.asarray(y_pred).any(0)).tolist()
    return seen or list(range(np.asarray(y_true).shape[1]))


def _auc(y_true: np.ndarray, scores: np.ndarray) -> float | None:
    if len(np.unique(y_true)) < 2:
        return None  # undefined without both positives and negatives
    return float(roc_auc_score(y_true, scores))


def binary_cross_entropy(y_true: np.ndarray, probabilities: np.ndarray) -> float:
    """Mean binary cross-entropy over every (text, label) cell.

    >>> round(binary_cross_entropy(np.array([[1, 0]]), np.array([[0.9, 0.1]])), 4)
    0.1054
    """
    p = np.clip(np.asarray(probabilities, dtype=np.float64), 1e-12, 1 - 1e-12)
    y = np.asarray(y_true)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def label_calibration_errors(label_sets: np.ndarray, probabilities: np.ndarray) -> list[float]:
    """Each label's expected calibration error: of its own yes-or-no prediction (``expected_calibration_error`` of
    the probability it is in the set against that it is not), label by label.

    >>> errors = label_calibration_errors(np.array([[1, 0], [0, 0]]), np.array([[0.9, 0.2], [0.1, 0.2]]))
    >>> [round(error, 3) for error in errors]
    [0.1, 0.2]
    """
    label_sets, given = np.asarray(label_sets), np.asarray(probabilities)  # (float32 too: binned as reliability bins)
    texts, labels = given.shape
    # All labels' reliability bins at once (a label a column of bins): reliability() label by label took 0.3 s a call
    # on 700 labels, paid every epoch. The same figures: the decision is argmax([1 - p, p]), "not given" on a tie.
    decided = given > 1 - given
    confidence = np.where(decided, given, 1 - given)
    bins = np.clip(np.ceil(confidence * ECE_BINS).astype(int) - 1, 0, ECE_BINS - 1) + ECE_BINS * np.arange(labels)
    right = np.bincount(bins.ravel(), (decided == label_sets.astype(bool)).ravel(), ECE_BINS * labels)
    sure = np.bincount(bins.ravel(), confidence.ravel(), ECE_BINS * labels)
    # A bin's count / texts x |accuracy - confidence| is |right - sure| / texts.
    return (np.abs(right - sure).reshape(labels, ECE_BINS).sum(axis=1) / texts).tolist()


def label_cells(label_sets: np.ndarray, probabilities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (text, label) cell as a yes-or-no prediction of its own: whether the label is given (0/1), and the
    probabilities of not and of being given, a row per cell, as single-label metrics read one row per text.

    >>> truth, pairs = label_cells(np.array([[1, 0]]), np.array([[0.9, 0.2]]))
    >>> truth.tolist(), pairs.round(1).tolist()
    ([1, 0], [[0.1, 0.9], [0.8, 0.2]])
    """
    given = np.asarray(probabilities, dtype=np.float64).ravel()
    return np.asarray(label_sets).ravel(), np.column_stack([1 - given, given])
