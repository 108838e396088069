"""Classification metrics, all computed by scikit-learn from labels and probabilities."""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Sequence

import numpy as np
from sklearn.metrics import (
    average_precision_score,
    classification_report,
    confusion_matrix,
    precision_recall_curve,
    precision_recall_fscore_support,
    roc_auc_score,
)

from ..checks import by_field
from ..data.multilabel import LABEL_SET_COLUMNS
from ..errors import NAME_LENGTH, AttnclfError, DataError, shown
from ..prediction import (ClassThreshold, applied_thresholds, class_threshold, decided_classes, estimator_classifier,
                          label_set, refuse_unknown_class, trained_label_delimiter)

if TYPE_CHECKING:
    from ..data.base import TextDataset

Z_95 = 1.959963984540054  # the standard normal's 97.5th percentile: a two-sided 95% interval


def compute_metrics(
    y_true: Sequence[int], probabilities: np.ndarray, label_names: Sequence[str], report: bool = True,
    threshold: ClassThreshold | None = None, intervals: bool = True,
) -> dict:
    """Everything a practitioner reads off a test set, as a JSON-ready dict.

    Accuracy, with its 95% confidence interval (``wilson_interval``); precision/recall/F1 per class, macro and
    weighted; ROC AUC (binary, or one-vs-rest macro); unless ``intervals=False`` (the trainer's per-epoch validation,
    which reads none), the macro-F1's and the ROC AUC's 95% intervals (``macro_f1_interval``,
    ``roc_auc_interval``); average precision, the area under the precision-recall curve (binary: class 1's; more
    classes: one-vs-rest macro; per class too, one-vs-rest, null for a class without positive or negative texts); how
    far the probabilities can be taken at their word (log loss, and the expected calibration error of the top label's
    confidence); TP/FP/TN/FN when binary (class 1 is positive); the confusion matrix (rows true, columns predicted)
    and, unless ``report=False``, a text report. The texts are predicted their
    most probable class, or by ``threshold`` (``decided_classes``), then recorded as ``metrics["threshold"]``; the
    figures of the probabilities alone (ROC AUC, average precision, log loss, calibration error) are the same either
    way.

    >>> m = compute_metrics([0, 1, 1], np.array([[.9, .1], [.2, .8], [.6, .4]]), ["neg", "pos"])
    >>> round(m["accuracy"], 3), m["binary"]["fn"]
    (0.667, 1)
    >>> compute_metrics([0, 1, 1], np.array([[.9, .1], [.2, .8], [.6, .4]]), ["neg", "pos"],
    ...                 threshold=ClassThreshold("pos", 1, .4))["binary"]["fn"]
    0
    """
    y_true = np.asarray(y_true)
    y_pred = decided_classes(probabilities, threshold)
    classes = list(range(len(label_names)))
    # One scikit-learn call per figure costs ~3 ms of input checks each, which a 300-epoch toy training paid per
    # epoch; the averages and the accuracy follow from the per-class figures and the confusion matrix.
    precision, recall, f1, support = precision_recall_fscore_support(
        y_true, y_pred, labels=classes, zero_division=0
    )
    matrix = confusion_matrix(y_true, y_pred, labels=classes)
    correct = int(np.trace(matrix))
    metrics: dict = {"accuracy": float(correct / len(y_true)), "num_examples": int(len(y_true)),
                     "accuracy_ci95": list(wilson_interval(correct, len(y_true)))}
    if threshold is not None:
        metrics["threshold"] = threshold.to_dict()
    # Averaged over the classes that occur or are predicted, as scikit-learn does by default: a class the scored
    # texts lack, and that nothing was taken for, has no F1 to average (counted as 0 it would cap a perfect macro-F1).
    seen = np.union1d(y_true, y_pred)
    for name, per_class in (("precision", precision), ("recall", recall), ("f1", f1)):
        metrics[f"macro_{name}"] = float(per_class[seen].mean())
        metrics[f"weighted_{name}"] = float(np.average(per_class[seen], weights=support[seen]))
    metrics["roc_auc"] = _roc_auc(y_true, probabilities, classes)
    if intervals:
        metrics["macro_f1_ci95"] = macro_f1_interval(y_true, y_pred, len(classes))
        metrics["roc_auc_ci95"] = roc_auc_interval(y_true, probabilities)
    per_class_ap = average_precision(y_true[:, None] == np.arange(len(classes)), probabilities)
    defined = [ap for ap in per_class_ap if ap is not None]
    # Named as roc_auc is: the positive class's alone when binary, else the macro average over the classes that occur.
    metrics["average_precision"] = per_class_ap[1] if len(classes) == 2 else (
        float(np.mean(defined)) if defined else None)
    metrics["log_loss"] = log_loss(y_true, probabilities)
    metrics["ece"] = expected_calibration_error(y_true, probabilities)
    metrics["per_class"] = {
        name: {"precision": float(precision[i]), "recall": float(recall[i]), "f1": float(f1[i]),
               "support": int(support[i]), "average_precision": per_class_ap[i]}
        for i, name in enumerate(label_names)
    }
    metrics["confusion_matrix"] = matrix.tolist()
    if len(classes) == 2:
        (tn, fp), (fn, tp) = matrix.tolist()
        metrics["binary"] = {"tp": tp, "fp": fp, "tn": tn, "fn": fn}
    if report:
        # The same classes as the averages above, so the table's macro row is the macro-F1 printed beside it.
        metrics["classification_report"] = classification_report(
            y_true, y_pred, labels=seen, target_names=[label_names[i] for i in seen], zero_division=0, digits=4
        )
    return metrics


def wilson_interval(correct: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of an accuracy of ``correct`` in ``total`` (95% at the default ``z``): where the
    model's accuracy on texts drawn as the test texts were lies, by the test set's size alone. On 1,821 sentences it
    is 3.3 points wide; two models scored on the same texts can be told apart by a smaller gap than that (the texts
    only one of them gets right decide it: ``paired_comparison``), but a gap well inside it says little of either.
    (scipy.stats' ``binomtest(...).proportion_ci(method="wilson")`` gives the same; importing scipy.stats costs every
    evaluation a second.)

    >>> [round(bound, 4) for bound in wilson_interval(1547, 1821)]
    [0.8324, 0.8652]
    >>> wilson_interval(10, 10)[1], wilson_interval(0, 10)[0]
    (1.0, 0.0)
    """
    if total <= 0:
        raise ValueError(f"an accuracy needs at least one text, got {total}")
    share, spread = correct / total, z * z / total
    centre = (share + spread / 2) / (1 + spread)
    half = z * math.sqrt(share * (1 - share) / total + spread / (4 * total)) / (1 + spread)
    # (exact at the ends, where rounding leaves 1 - 1e-16: every text right has no accuracy above it to allow)
    return 0.0 if correct == 0 else centre - half, 1.0 if correct == total else centre + half


BOOTSTRAP_RESAMPLES = 1000
INTERVAL_MIN_TEXTS = 20  # fewer texts than this: too few distinct resamples for a bootstrap's percentiles to mean
# much, and too few for DeLong's asymptotic variance to hold


def macro_f1_interval(y_true: Sequence[int], y_pred: Sequence[int], num_classes: int,
                      resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> list[float] | None:
    """The macro-F1's 95% percentile-bootstrap interval: the texts drawn with replacement ``resamples`` times, the
    macro-F1 computed on each draw as ``compute_metrics`` computes it (``2 TP / (support + predicted)`` averaged over
    the classes a draw holds or predicts), the middle 95% of those values. A macro-F1 has no closed-form interval as
    an accuracy has (``wilson_interval``). It depends on the texts only through the confusion matrix, so each draw is
    a multinomial draw of the matrix's cells: the same distribution as drawing texts, at a cost that does not grow
    with their number. Seeded: the same predictions give the same interval. None below ``INTERVAL_MIN_TEXTS`` texts.

    >>> truth = np.arange(400) % 2
    >>> predicted = np.where(np.arange(400) % 10 == 0, 1 - truth, truth)  # (every tenth text wrong: macro-F1 0.9)
    >>> [round(bound, 3) for bound in macro_f1_interval(truth, predicted, 2)]
    [0.87, 0.928]
    >>> macro_f1_interval([0, 1], [0, 1], 2) is None
    True
    """
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if len(y_true) < INTERVAL_MIN_TEXTS:
        return None
    cells = np.bincount(y_true * num_classes + y_pred, minlength=num_classes ** 2)
    matrices = np.random.default_rng(seed).multinomial(len(y_true), cells / len(y_true), size=resamples)
    matrices = matrices.reshape(resamples, num_classes, num_classes)
    tp, support, predicted = np.diagonal(matrices, axis1=1, axis2=2), matrices.sum(2), matrices.sum(1)
    return macro_f1_percentiles(tp, support + predicted)


def macro_f1_percentiles(tp: np.ndarray, support_and_predicted: np.ndarray) -> list[float]:
    """The 2.5th and 97.5th percentiles of the macro-F1s of draws (rows) of per-class counts (columns): true
    positives, and texts of the class plus texts predicted it. Each draw averages over the classes it holds or
    predicts, as ``compute_metrics`` does (a draw holding none scores 0, as scikit-learn does a multi-label set
    without labels).

    >>> macro_f1_percentiles(np.array([[1, 0], [1, 0]]), np.array([[2, 0], [2, 2]]))  # (macro-F1s 1 and 0.5)
    [0.5125, 0.9875]
    """
    seen = support_and_predicted > 0
    f1s = (2 * tp / np.where(seen, support_and_predicted, 1)).sum(1) / np.maximum(seen.sum(1), 1)
    low, high = np.percentile(f1s, [2.5, 97.5])
    return [float(low), float(high)]


def roc_auc_interval(y_true: Sequence[int], probabilities: np.ndarray, z: float = Z_95) -> list[float] | None:
    """The ROC AUC's 95% interval (as ``_roc_auc`` computes the AUC: binary, class 1's; more classes, the macro over
    the classes that occur), by DeLong et al.'s (1988) variance: each text's placement (the share of the other side's
    texts it outscores, ties counted half) is its part in the AUC, and the spread of the placements around the AUC
    its variance; the macro AUC's is that of each text's parts averaged over the classes, so the classes' AUCs, read
    off the same texts, are not taken as independent. The interval is the AUC plus or minus ``z`` standard errors,
    within [0, 1]: exact to compute (no resampling), asymptotic in what it claims. A test set ranked without error
    has no spread left to show ([1.0, 1.0]), as a bootstrap would say. None where the AUC is undefined, where a class
    scored has a single text on one side, or below ``INTERVAL_MIN_TEXTS`` texts (as ``macro_f1_interval``).

    >>> truth = np.arange(200) % 2
    >>> scores = np.linspace(.2, .8, 200) + .1 * truth
    >>> [round(bound, 3) for bound in roc_auc_interval(truth, np.stack([1 - scores, scores], axis=1))]
    [0.585, 0.734]
    """
    y_true = np.asarray(y_true)
    num_classes = probabilities.shape[1]
    present = np.unique(y_true)
    if len(present) < 2:
        return None
    scored = [1] if num_classes == 2 else present
    return delong_interval(y_true[:, None] == np.asarray(scored), probabilities[:, scored], z)


def delong_interval(positive: np.ndarray, scores: np.ndarray, z: float = Z_95) -> list[float] | None:
    """The 95% interval of the mean of the ROC AUCs of the columns of ``scores`` (texts, columns), each column's
    texts split by the same column of the 0/1 matrix ``positive``: ``roc_auc_interval``'s arithmetic, shared by a
    multi-label run's macro AUC (``multilabel.label_auc_interval``). None below ``INTERVAL_MIN_TEXTS`` texts or where a
    column has fewer than two texts on a side.

    >>> [round(bound, 3) for bound in delong_interval(np.arange(40)[:, None] % 2, np.arange(40.)[:, None] % 3)]
    [0.311, 0.657]
    """
    positive, scores = np.asarray(positive, dtype=bool), np.asarray(scores)
    count = len(positive)
    if count < INTERVAL_MIN_TEXTS:
        return None
    aucs, parts = [], np.zeros(count)
    for column in range(positive.shape[1]):
        is_positive = positive[:, column]
        positives, negatives = int(is_positive.sum()), int((~is_positive).sum())
        if min(positives, negatives) < 2:
            return None  # (a side of one text has no spread to measure: DeLong's variance divides by its size less 1)
        _, group = np.unique(scores[:, column], return_inverse=True)
        group = group.ravel()
        negatives_at = np.bincount(group[~is_positive], minlength=group.max() + 1)
        positives_at = np.bincount(group[is_positive], minlength=group.max() + 1)
        negatives_below = np.cumsum(negatives_at) - negatives_at  # (texts at each tied score, scores ascending)
        positives_above = positives - np.cumsum(positives_at)
        placement = np.where(is_positive, (negatives_below + negatives_at / 2)[group] / negatives,
                             (positives_above + positives_at / 2)[group] / positives)
        auc = float(placement[is_positive].mean())
        aucs.append(auc)
        # A text's part in the AUC: its placement's distance from it, scaled so that the parts' squares sum to
        # DeLong's variance, the placements' sample variance on each side over that side's size
        side = np.where(is_positive, positives, negatives)
        parts += (placement - auc) / np.sqrt(side * (side - 1)) / positive.shape[1]
    auc, spread = float(np.mean(aucs)), z * float(np.sqrt(np.sum(parts ** 2)))
    return [max(0.0, auc - spread), min(1.0, auc + spread)]


def evaluate(classifier, data, errors: str | Path | None = None, overwrite: bool = False,
             operating_points: str | None = None, named=by_field,
             threshold: tuple[str, float] | str | None = None, against=None) -> dict:
    """``classifier``'s (a ``Classifier``'s or ``Ensemble``'s) metrics on labelled ``data``, as `attnclf evaluate`
    reports them: ``compute_metrics`` of its probabilities, or a multi-label run's ``multilabel_metrics`` at its
    thresholds; ``split`` names ``data``'s split. ``data`` is a ``TextDataset`` (``training.run_data.scoring_data``
    reads the data `attnclf evaluate` scores on) or a pair ``(texts, labels)`` in memory, labels by name (a
    multi-label run's: a list of names per text). Labels are read by name (another order is re-numbered to the
    classifier's; a label it never learned is a ``DataError``). ``errors``: a .csv / .tsv / .jsonl / .parquet file
    to write the misclassified texts into as well (``misclassified_rows``, a multi-label run's
    ``wrong_label_set_rows``; an existing one kept unless ``overwrite``), its row count then in
    ``metrics["errors_written"]``. ``operating_points``: a class, by name (a multi-label run's label, read off its own
    column of the label sets), whose precision, recall and F1 at thresholds of its probability go in
    ``metrics["operating_points"]`` (``class_operating_points``'), with ``["apply"]`` saying how to apply one.
    ``threshold``: one such operating point applied, ``("fraud", 0.7)`` or ``"fraud=0.7"``: the figures (and
    ``errors``) of the texts predicted as ``Classifier.predict(texts, threshold=...)`` predicts them (a multi-label
    run's: that label's tuned threshold replaced), the threshold in ``metrics["threshold"]``. ``named`` names those
    arguments in errors. ``against``: another single-label ``Classifier`` or ``Ensemble`` of the same classes, scored
    on the same texts (its most probable class), compared text by text in ``metrics["against"]``
    (``paired_comparison``'s).

    >>> # evaluate(clf := Classifier.load("runs/demo"), (df.text, df.label))["accuracy"]   # a notebook's DataFrame
    >>> # evaluate(clf, scoring_data(clf, test_file="held_out.csv"), errors="wrong.csv")["errors_written"]
    >>> # evaluate(clf, scoring_data(clf, split="validation"), operating_points="fraud")["operating_points"]
    >>> # evaluate(clf, scoring_data(clf), threshold=("fraud", 0.7))["per_class"]["fraud"]["precision"]
    >>> # evaluate(clf, scoring_data(clf), against=Classifier.load("runs/old"))["against"]["p_value"]

    A fitted ``AttentionTextClassifier`` is scored as its ``classifier_``, at its own ``threshold`` unless
    ``threshold`` is given, so the figures are those of its ``predict`` (as ``against``, at its own):

    >>> # evaluate(AttentionTextClassifier().fit(texts, labels), (test.text, test.label))["accuracy"]
    """
    classifier, own_threshold = _scoring_model(classifier, "classifier")
    threshold = class_threshold(own_threshold if threshold is None else threshold, classifier.label_names,
                                classifier.multi_label, named)
    if against is not None:  # (before predicting; an estimator compared as its predict answers, as it is scored)
        against, against_threshold = _scoring_model(against, named("against"))
        refuse_unpaired(classifier, against, named)
    if operating_points is not None:  # (before predicting, as a bad errors file is)
        refuse_unknown_class(classifier.label_names, operating_points, named("operating_points"),
                             classifier.multi_label)
    if errors is not None:  # (before predicting: a name that cannot be written is told at once, as a clash is)
        errors = _checked_errors_file(errors, overwrite, named)
        if read_from := getattr(data, "read_from", None):  # (a JSON line's own columns too: every line read first)
            from ..prediction_files import refuse_clashing_header

            refuse_clashing_header(read_from, _errors_columns(classifier.multi_label), classifier.label_names,
                                   ERRORS_WRITER)
    data, probabilities = _scored(classifier, data)
    truth = data.labels
    if classifier.multi_label:
        from ..data.multilabel import multi_hot
        from .multilabel import multilabel_metrics

        truth = multi_hot(data.labels, len(classifier.label_names))
        metrics = multilabel_metrics(truth, probabilities, classifier.label_names,
                                     applied_thresholds(classifier.thresholds, threshold))
        if threshold is not None:
            metrics["threshold"] = threshold.to_dict()
    else:
        metrics = compute_metrics(data.labels, probabilities, classifier.label_names, threshold=threshold)
        if against is not None:
            metrics["against"] = paired_comparison(data.labels, decided_classes(probabilities, threshold),
                                                   decided_classes(against.predict_proba(data.texts),
                                                                   against_threshold))
    metrics["split"] = data.split
    if operating_points is not None:
        points = class_operating_points(truth, probabilities, classifier.label_names, operating_points)
        if classifier.multi_label:  # (whose validation texts evaluate refuses: they tuned its thresholds)
            points["note"] = (f"thresholds chosen on the {data.split} texts are optimistic, and the run's validation "
                              f"texts tuned its own: choose one on labelled texts of neither ({named('test_file')}) "
                              f"and read its figures here")
        elif data.split != "validation":
            points["note"] = (f"thresholds chosen on the {data.split} texts are optimistic: choose one on the "
                              f"validation texts ({named('split')} validation) and read its figures here")
        # Of every row the table prints: a class whose probabilities crowd between two steps of the grid has its
        # best F1 at a target's threshold, where the grid's best alone (0.1, flagging every text) was named.
        rows = [*points["thresholds"], *(row for target in ("precision_at_least", "recall_at_least")
                                         for row in points[target].values() if row is not None)]
        best = repr(max(rows, key=lambda row: row["f1"])["threshold"])  # (each as short as its texts allow)
        points["apply"] = (f"{named('threshold')} {shlex.quote(f'{operating_points}={best}')} (predict, evaluate and "
                           f"serve take it; {best} has the table's best F1)")
        metrics["operating_points"] = points
    if errors is not None:
        from ..prediction_files import with_file_columns, write_rows

        rows, columns = with_file_columns(data, _wrong_rows(classifier, data, probabilities, threshold),
                                          _errors_columns(data.multi_label), ERRORS_WRITER)
        write_rows(rows, errors, columns, overwrite, "evaluating", named, trained_label_delimiter(classifier.config))
        metrics["errors_written"] = len(rows)
    return metrics


def refuse_unpaired(classifier, other, named=by_field) -> None:
    """An ``AttnclfError`` naming ``named("against")`` unless ``other`` can be compared text by text with
    ``classifier``: both single-label, of the same classes in the same order."""
    if classifier.multi_label or other.multi_label:
        raise AttnclfError(f"{named('against')} compares single-label runs, text by text; a multi-label run's "
                           f"figures are compared by evaluating each")
    if list(other.label_names) != list(classifier.label_names):
        raise AttnclfError(f"{named('against')} predicts other classes ({', '.join(map(shown, other.label_names))}) "
                           f"than the run evaluated ({', '.join(map(shown, classifier.label_names))}): nothing to "
                           f"compare text by text")


def paired_comparison(y_true: Sequence[int], predicted: Sequence[int], other_predicted: Sequence[int]) -> dict:
    """Two classifiers' predictions of the same texts, compared text by text: how many each alone got right,
    both, neither; the other's accuracy with its interval; and McNemar's exact test, whose ``p_value`` is the chance
    that the texts only one of them gets right split at least this unevenly between them were the two equally
    accurate (the two-sided binomial test of the split). (Not every text they disagree on: of more than two classes,
    both may be wrong, each its own way.) Texts both get right or both get wrong say nothing of which is better, so
    a gap the accuracies' intervals cannot separate may still be settled here, and a wide one may not be.

    >>> c = paired_comparison([1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 1], [1, 0, 0, 0, 0, 1])
    >>> c["right_here_alone"], c["right_there_alone"], c["both_right"], c["both_wrong"], round(c["p_value"], 3)
    (3, 0, 2, 1, 0.25)
    """
    from scipy.stats import binomtest  # (here: scipy.stats is a second of imports no other evaluation needs)

    truth, here, there = (np.asarray(x) for x in (y_true, predicted, other_predicted))
    right_here, right_there = here == truth, there == truth
    alone_here, alone_there = int(np.sum(right_here & ~right_there)), int(np.sum(right_there & ~right_here))
    alone = alone_here + alone_there
    return {"texts": len(truth), "right_here_alone": alone_here, "right_there_alone": alone_there,
            "both_right": int(np.sum(right_here & right_there)), "both_wrong": int(np.sum(~right_here & ~right_there)),
            "other_accuracy": float(np.mean(right_there)),
            "other_accuracy_ci95": list(wilson_interval(int(np.sum(right_there)), len(truth))),
            "test": "McNemar's exact (two-sided binomial of the texts only one of them gets right)",
            "p_value": 1.0 if alone == 0 else float(binomtest(alone_here, alone, 0.5).pvalue)}


def paired_text(comparison: dict, other: str) -> str:
    """``paired_comparison``'s ``comparison`` of the run evaluated with ``other`` (a name), as `attnclf evaluate
    --against` prints it.

    >>> print(paired_text({"texts": 6, "right_here_alone": 3, "right_there_alone": 0, "both_right": 2,
    ...                    "both_wrong": 1, "other_accuracy": 1 / 3, "other_accuracy_ci95": [0.0968, 0.7000],
    ...                    "p_value": 0.25}, "runs/old"))
    against runs/old on the same 6 texts: accuracy 0.3333 (95% CI 0.0968-0.7000)
      right here alone 3, there alone 0; both right 2, both wrong 1
      McNemar's exact test: p = 0.2500, the chance of the 3 texts only one of them gets right splitting at least this
      unevenly were the two equally accurate
    """
    # (not "the texts they disagree on": of three classes or more, both can be wrong, each its own way)
    c, alone = comparison, comparison["right_here_alone"] + comparison["right_there_alone"]
    # (a p below 0.00005 printed as "p = 0.0000", which reads as impossible where it is only very unlikely)
    p_shown = f"= {c['p_value']:.4f}" if c["p_value"] >= 5e-5 else "< 0.0001"
    return (f"against {other} on the same {c['texts']:,} texts: accuracy {c['other_accuracy']:.4f} "
            f"(95% CI {c['other_accuracy_ci95'][0]:.4f}-{c['other_accuracy_ci95'][1]:.4f})\n"
            f"  right here alone {c['right_here_alone']:,}, there alone {c['right_there_alone']:,}; "
            f"both right {c['both_right']:,}, both wrong {c['both_wrong']:,}\n"
            f"  McNemar's exact test: p {p_shown}, " + (
                f"the chance of the {alone:,} text{'s' * (alone != 1)} only one of them gets right splitting at "
                f"least this\n  unevenly were the two equally accurate" if alone else
                "as neither gets any text right that the other gets wrong"))


OPERATING_THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(1, 10))
OPERATING_TARGETS = (0.9, 0.95)


def class_operating_points(y_true: Sequence[int], probabilities: np.ndarray, label_names: Sequence[str],
                           name: str) -> dict:
    """Class ``name``'s figures when a text is flagged as it whenever its probability is at least a threshold, as an
    analyst trades precision for recall on the one class that matters (``y_true``: each text's class, or a
    multi-label run's 0/1 label sets, a row per text, of which ``name``'s column is read): ``thresholds``, a row per
    threshold of ``OPERATING_THRESHOLDS`` (``threshold``, ``flagged``, ``precision``, ``recall``, ``f1``; precision
    None where nothing is flagged); ``precision_at_least``, per target of ``OPERATING_TARGETS``, the smallest threshold whose
    precision reaches it (the one finding the most), and ``recall_at_least`` the largest whose recall does (the one
    flagging the fewest), each a row or None where none does; ``positives`` and ``num_examples``. Thresholds there
    are read off scikit-learn's ``precision_recall_curve`` (the texts' own probabilities), each written as the
    shortest decimal that flags the same texts (``shortest_threshold``), which a command line can carry whole.
    ``evaluate(..., operating_points=name)`` gives them for a classifier's texts.

    >>> p = class_operating_points([1, 0, 1], np.array([[.1, .9], [.4, .6], [.7, .3]]), ["ok", "fraud"], "fraud")
    >>> p["thresholds"][4], p["precision_at_least"]["0.9"]["threshold"], p["recall_at_least"]["0.9"]["flagged"]
    ({'threshold': 0.5, 'flagged': 2, 'precision': 0.5, 'recall': 0.5, 'f1': 0.5}, 0.9, 3)
    >>> class_operating_points([[1, 1], [0, 1]], np.array([[.8, .9], [.4, .6]]), ["a", "b"], "a")["positives"]
    1
    """
    refuse_unknown_class(label_names, name, "name")
    y_true = np.asarray(y_true)
    index = list(label_names).index(name)
    positive = y_true[:, index].astype(bool) if y_true.ndim == 2 else y_true == index
    scores = np.asarray(probabilities, dtype=np.float64)[:, index]
    if not positive.any():  # (no recall to read, and scikit-learn would only warn)
        raise DataError(f"operating points of {shown(name)}: the scored texts hold no {shown(name)} text")

    def point(threshold: float) -> dict:
        flagged = scores >= threshold
        found = int(np.sum(flagged & positive))
        precision = found / flagged.sum() if flagged.any() else None
        recall = found / positive.sum()
        f1 = 2 * precision * recall / (precision + recall) if precision else 0.0
        return {"threshold": float(threshold), "flagged": int(flagged.sum()),
                "precision": None if precision is None else float(precision), "recall": float(recall),
                "f1": float(f1)}

    # The curve's last point (precision 1, recall 0) has no threshold: flagging nothing is no operating point.
    precision, recall, thresholds = precision_recall_curve(positive, scores)
    precision, recall = precision[:-1], recall[:-1]
    # (written short once found: each is a pass over the scores)
    smallest = {str(target): next((point(shortest_threshold(t, scores)) for t, p in zip(thresholds, precision)
                                   if p >= target), None) for target in OPERATING_TARGETS}
    largest = {str(target): next((point(shortest_threshold(t, scores)) for t, r in zip(thresholds[::-1], recall[::-1])
                                  if r >= target), None) for target in OPERATING_TARGETS}
    return {"class": name, "positives": int(positive.sum()), "num_examples": int(len(scores)),
            "thresholds": [point(t) for t in OPERATING_THRESHOLDS], "precision_at_least": smallest,
            "recall_at_least": largest}


def shortest_threshold(threshold: float, scores: np.ndarray) -> float:
    """The decimal of fewest digits that flags the texts ``threshold`` flags among ``scores`` (those at least it):
    one above every score below it. A threshold read off the texts' probabilities has 17 digits, which a command
    line need not carry; rounded plainly, it could flag other texts.

    >>> shortest_threshold(0.7329184532, np.array([0.9, 0.7329184532, 0.41])), shortest_threshold(0.36, np.array([.31]))
    (0.7, 0.36)
    """
    below = scores[scores < threshold]
    floor = float(below.max()) if below.size else -math.inf
    for digits in range(1, 18):
        candidate = round(threshold, digits)
        if candidate > threshold:
            candidate = round(candidate - 10.0 ** -digits, digits)
        if floor < candidate <= threshold:
            return candidate
    return threshold


def operating_points_table(points: dict) -> str:
    """``class_operating_points``' figures as text: a row per threshold, then the thresholds that reach each target,
    then its note and how to apply one (``evaluate``'s), if any.

    >>> p = class_operating_points([1, 0, 1], np.array([[.1, .9], [.4, .6], [.7, .3]]), ["ok", "fraud"], "fraud")
    >>> print(operating_points_table(p).splitlines()[6])
          0.5        2     0.5000  0.5000  0.5000
    """
    def figure(value):
        return "     -" if value is None else f"{value:.4f}"

    lines = [f"operating points of {shown(points['class'])} ({points['positives']:,} of {points['num_examples']:,} "
             f"texts): flagged when its probability is at least the threshold",
             f"{'threshold':>9}  {'flagged':>7}  {'precision':>9}  {'recall':>6}  {'F1':>6}"]
    lines += [f"{row['threshold']:>9.1f}  {row['flagged']:>7,}  {figure(row['precision']):>9}  "
              f"{figure(row['recall']):>6}  {figure(row['f1']):>6}" for row in points["thresholds"]]
    for goal, key, which in (("precision", "precision_at_least", "smallest"), ("recall", "recall_at_least", "largest")):
        for target, row in points[key].items():
            lines.append(f"{goal} >= {target}: " + ("no threshold reaches it" if row is None else
                         f"{which} threshold {row['threshold']!r}, flagging {row['flagged']:,}: precision "
                         f"{figure(row['precision'])}, recall {figure(row['recall'])}, F1 {figure(row['f1'])}"))
    if "note" in points:
        lines.append(f"note: {points['note']}")
    if "apply" in points:
        lines.append(f"apply one: {points['apply']}")
    return "\n".join(lines)


def misclassified(classifier, data) -> list[dict]:
    """The texts of labelled ``data`` (as ``evaluate`` takes it) that ``classifier`` labels wrong, most confident
    first (``misclassified_rows``): where a confident model and its label disagree, the label is often the one that
    is wrong; a multi-label run's, the texts whose predicted set is not their set, most wrong labels first
    (``wrong_label_set_rows``). ``pandas.DataFrame(misclassified(clf, data))`` is a table of them. Texts read from a
    data file (``scoring_data(clf, test_file=...)``) have its other columns too, after ``row``, named as in the file
    (a text joined from several columns: those columns in place of ``text``).

    >>> # misclassified(clf, (df.text, df.label))[0]  # {'row': 17, 'text': ..., 'true_label': 'World', ...}
    """
    from ..prediction_files import with_file_columns

    classifier, threshold = _scoring_model(classifier, "classifier")
    threshold = class_threshold(threshold, classifier.label_names, classifier.multi_label)
    data, probabilities = _scored(classifier, data)
    return with_file_columns(data, _wrong_rows(classifier, data, probabilities, threshold),
                             _errors_columns(data.multi_label), ERRORS_WRITER)[0]


def _scoring_model(model, name: str) -> tuple:
    """``model`` as ``evaluate`` scores it, and the operating point its own predictions apply (None, or the
    ``threshold`` of an estimator): a ``Classifier``, ``Ensemble`` or ``OnnxClassifier`` as it is, a fitted
    ``AttentionTextClassifier`` as its ``classifier_``. Anything else, a run folder's path among them, is one line
    naming ``name``, where it was an AttributeError on ``label_names``.

    >>> _scoring_model("runs/demo", "classifier")
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: classifier is a path, not a model: load it first, Classifier.load('runs/demo')
    """
    if (classifier := estimator_classifier(model)) is not None:
        return classifier, model._class_threshold(classifier.label_names)
    if isinstance(model, (str, Path)):
        raise AttnclfError(f"{name} is a path, not a model: load it first, Classifier.load({str(model)!r})")
    if not all(hasattr(model, attribute) for attribute in ("label_names", "multi_label", "predict_proba")):
        raise AttnclfError(f"{name} must be a Classifier, an Ensemble or a fitted AttentionTextClassifier, not "
                           f"{type(model).__name__}")
    return model, None


ERRORS_WRITER = "evaluate --errors"  # (what a clash of the file's columns with the written ones names)


def _errors_columns(multi_label: bool) -> Callable[[Sequence[str]], dict[str, type]]:
    """The errors file's columns of the given classes' names: ``misclassified_columns``, single- or multi-label."""
    return lambda label_names: misclassified_columns(label_names, multi_label)


def _wrong_rows(classifier, data: TextDataset, probabilities: np.ndarray,
                threshold: ClassThreshold | None) -> list[dict]:
    if classifier.multi_label:
        return wrong_label_set_rows(data.texts, data.labels, probabilities,
                                    applied_thresholds(classifier.thresholds, threshold), classifier.label_names)
    return misclassified_rows(data.texts, data.labels, probabilities, classifier.label_names, threshold)


def misclassified_columns(label_names: Sequence[str], multi_label: bool = False) -> dict[str, type]:
    """The columns of ``misclassified_rows``' rows (``multi_label``: ``wrong_label_set_rows``'), in order, each to
    the type of its values.

    >>> list(misclassified_columns(["neg", "pos"]))[4:]
    ['confidence', 'true_label_probability', 'probability:neg', 'probability:pos']
    >>> list(misclassified_columns(["a"], multi_label=True))[2:]
    ['true_labels', 'predicted_labels', 'missed_labels', 'extra_labels', 'probability:a']
    """
    if multi_label:
        return {"row": int, "text": str, **dict.fromkeys(LABEL_SET_COLUMNS, list),
                **{f"probability:{name}": float for name in label_names}}
    return {"row": int, "text": str, "true_label": str, "predicted_label": str, "confidence": float,
            "true_label_probability": float, **{f"probability:{name}": float for name in label_names}}


def wrong_label_set_rows(texts: Sequence[str], y_true: Sequence[Sequence[int]], probabilities: np.ndarray,
                         thresholds: np.ndarray, label_names: Sequence[str]) -> list[dict]:
    """A row per text whose predicted label set (each label at least its threshold) is not its set of labels: its
    ``row`` among the texts (from 1), the text, its true and predicted labels (the predicted most probable first, as
    ``predict`` gives them), those it missed and those it added, and every label's probability; most wrong labels
    first (ties in row order), as a text wrong on every label says more than one a single rare label short.

    >>> rows = wrong_label_set_rows(["a", "b"], [(0,), (0, 1)], np.array([[.9, .1], [.2, .7]]), np.array([.5, .5]),
    ...                             ["x", "y"])
    >>> [(r["row"], r["missed_labels"], r["extra_labels"]) for r in rows]
    [(2, ['x'], [])]
    """
    return _most_wrong_first(_label_set_rows(texts, y_true, probabilities, thresholds, label_names))


def _most_wrong_first(rows: list[dict]) -> list[dict]:
    """The wrong ones of ``_label_set_rows``' ``rows``, most wrong labels first (ties in row order)."""
    wrong = [row for row in rows if row["missed_labels"] or row["extra_labels"]]
    return sorted(wrong, key=lambda r: -(len(r["missed_labels"]) + len(r["extra_labels"])))


def _label_set_rows(texts: Sequence[str], y_true: Sequence[Sequence[int]], probabilities: np.ndarray,
                    thresholds: np.ndarray, label_names: Sequence[str]) -> list[dict]:
    """``wrong_label_set_rows``' row of every text, right or wrong, in row order."""
    rows = []
    for i, (labels, row) in enumerate(zip(y_true, probabilities)):
        predicted = label_set(row, thresholds)  # (most probable first, as predict gives them)
        rows.append({"row": i + 1, "text": texts[i], "true_labels": [label_names[c] for c in sorted(labels)],
                     "predicted_labels": [label_names[c] for c in predicted],
                     "missed_labels": [label_names[c] for c in sorted(set(labels) - set(predicted))],
                     "extra_labels": [label_names[c] for c in predicted if c not in labels],
                     **{f"probability:{name}": float(row[c]) for c, name in enumerate(label_names)}})
    return rows


def pick_label_set_examples(texts: Sequence[str], y_true: Sequence[Sequence[int]], probabilities: np.ndarray,
                            thresholds: np.ndarray, label_names: Sequence[str], k: int = 3) -> dict[str, list[dict]]:
    """A multi-label run's ``pick_examples``: under ``"correct"``, the ``k`` texts whose predicted label set is
    exactly their (non-empty: an empty one has no label to explain) set, the surest first, by ``set_probability``,
    the product of each label's probability of being given or left out, the model's probability of that very set;
    under ``"incorrect"``, the first ``k`` of ``wrong_label_set_rows``, the most wrong labels first. Rows are
    ``wrong_label_set_rows``'.

    >>> ex = pick_label_set_examples(["a", "b"], [(0,), (1,)], np.array([[.9, .2], [.7, .4]]), np.array([.5, .5]),
    ...                              ["x", "y"], k=1)
    >>> [(r["text"], round(r["set_probability"], 2)) for r in ex["correct"]], ex["incorrect"][0]["extra_labels"]
    ([('a', 0.72)], ['x'])
    """
    rows, exact = _label_set_rows(texts, y_true, probabilities, thresholds, label_names), []
    for row in rows:
        if row["predicted_labels"] and not (row["missed_labels"] or row["extra_labels"]):
            given = [row[f"probability:{name}"] if name in row["predicted_labels"] else 1 - row[f"probability:{name}"]
                     for name in label_names]
            exact.append(row | {"set_probability": float(np.prod(given))})
    exact.sort(key=lambda r: -r["set_probability"])  # (stable: ties in row order)
    return {"correct": exact[:k], "incorrect": _most_wrong_first(rows)[:k]}


def misclassified_rows(texts: Sequence[str], y_true: Sequence[int], probabilities: np.ndarray,
                       label_names: Sequence[str], threshold: ClassThreshold | None = None) -> list[dict]:
    """A row per text whose predicted class (the most probable, or by ``threshold``: ``decided_classes``) is not its
    label: its ``row`` among the texts (from 1, as a data file's rows count below its header), the text, its true and
    predicted labels, the confidence (the predicted class's probability), the true label's probability and every
    class's; most confident first (ties in row order).

    >>> rows = misclassified_rows(["a", "b"], [0, 0], np.array([[.9, .1], [.3, .7]]), ["neg", "pos"])
    >>> [(r["row"], r["predicted_label"], r["true_label_probability"]) for r in rows]
    [(2, 'pos', 0.3)]
    """
    y_true = np.asarray(y_true)
    y_pred = decided_classes(probabilities, threshold)
    confidence = probabilities[np.arange(len(y_pred)), y_pred]
    wrong = np.flatnonzero(y_pred != y_true)
    wrong = wrong[np.argsort(-confidence[wrong], kind="stable")]
    return [{"row": int(i) + 1, "text": texts[i], "true_label": label_names[y_true[i]],
             "predicted_label": label_names[y_pred[i]], "confidence": float(confidence[i]),
             "true_label_probability": float(probabilities[i, y_true[i]]),
             **{f"probability:{name}": float(probabilities[i, c]) for c, name in enumerate(label_names)}}
            for i in wrong]


def _checked_errors_file(errors: str | Path, overwrite: bool, named: Callable[[str], str]) -> Path:
    """``errors`` checked as a file to write (``check_output``, whose ``output`` it is)."""
    from ..prediction_files import check_output

    return check_output(errors, overwrite=overwrite, writer=ERRORS_WRITER,
                        named=lambda field: named("errors" if field == "output" else field))


def _scored(classifier, data):
    """``data`` (as ``evaluate`` takes it) as a ``TextDataset`` numbered as ``classifier`` numbers its classes, and
    ``classifier``'s probabilities of its texts."""
    from ..data.base import TextDataset
    from ..training.run_data import align_labels

    if isinstance(data, tuple) and len(data) == 2:
        texts, labels = data
        if not classifier.multi_label and not isinstance(labels, str):  # (a bare string: refused below, as it is)
            labels = [_named_as_the_run_names(label, classifier.label_names) for label in labels]
        try:
            data = TextDataset.of_named_labels(texts, labels, multi_label=classifier.multi_label)
        except ValueError as exc:  # (TextDataset's own: texts and labels of different lengths)
            raise DataError(str(exc)) from None
    if not isinstance(data, TextDataset):  # (a pair of texts and labels failed on `'tuple' object has no attribute`)
        raise AttnclfError(f"data must be texts and their labels, (texts, labels), or a TextDataset "
                           f"(scoring_data(classifier, test_file=...) reads one from a file), not {type(data).__name__}")
    if len(data) == 0:  # (scikit-learn's "Found empty input array (e.g., `y_true` or `y_pred`)" named neither)
        raise DataError(f"{data.name or data.split}: no texts to score")
    _refuse_other_kind(classifier, data)
    # Scored by position, labels numbered in another order would give a wrong score, silently.
    data = align_labels(data, list(classifier.label_names))
    return data, classifier.predict_proba(data.texts)


def _named_as_the_run_names(label, label_names: list[str]):
    """``label`` as the run names its class where only the spelling differs: a whole number held as a float (7.0),
    as pandas holds an integer column with a missing value, for the class a run names "7"; else ``label`` itself.

    >>> _named_as_the_run_names(7.0, ["2", "7"]), _named_as_the_run_names(7.0, ["2.0", "7.0"])
    ('7', 7.0)
    """
    if (isinstance(label, (float, np.floating)) and str(label) not in label_names and float(label).is_integer()
            and str(int(label)) in label_names):
        return str(int(label))
    return label


def _refuse_other_kind(classifier, data: TextDataset) -> None:
    """Refuse label sets for a single-label classifier, single labels for a multi-label one, and labels of the other
    kind than ``data.multi_label`` says: numpy and scikit-learn would fail on them deep inside, or score them wrong."""
    where = data.name or data.split
    for i, label in enumerate(data.labels):
        single = isinstance(label, (int, np.integer))
        if data.multi_label and single:
            raise DataError(f"{where}: label {i} is {label!r}, one label, in multi_label data; give each text a tuple "
                            f"of label indices (empty for none)")
        if not data.multi_label and not single:
            sets = "; give TextDataset multi_label=True for label sets" if isinstance(label, (tuple, list)) else ""
            raise DataError(f"{where}: label {i} is {label!r}, not an index into label_names{sets}")
    if data.multi_label and not classifier.multi_label:
        raise DataError(f"{where}: a set of labels per text (multi-label data), and the classifier is single-label: "
                        f"score it on one label per text, as scoring_data(classifier, ...) reads its data")
    if classifier.multi_label and not data.multi_label:
        raise DataError(f"{where}: one label per text (single-label data), and the classifier is multi-label: score "
                        f"it on label sets (TextDataset(..., multi_label=True), a tuple of label indices per text), "
                        f"as scoring_data(classifier, ...) reads its data")


def metrics_line(metrics: dict) -> str:
    """The scores of ``metrics`` (``compute_metrics``' or ``evaluate``'s) on one line, led by the split they are of,
    as `attnclf train`, `refit` and `evaluate` print them.

    >>> metrics_line({"split": "test", "accuracy": 0.9, "macro_f1": 0.85, "roc_auc": None})
    'test: accuracy 0.9000  macro-F1 0.8500'
    >>> metrics_line({"split": "test", "accuracy": 0.9, "accuracy_ci95": [0.8825, 0.9152], "macro_f1": 0.85,
    ...               "macro_f1_ci95": [0.8301, 0.8687]})
    'test: accuracy 0.9000 (95% CI 0.8825-0.9152)  macro-F1 0.8500 (95% CI 0.8301-0.8687)'
    """
    # (metrics older than the intervals lack them)
    if metrics.get("multi_label"):
        scores = (f"micro-F1 {metrics['micro_f1']:.4f}  macro-F1 {metrics['macro_f1']:.4f}"
                  f"{_interval(metrics.get('macro_f1_ci95'))}  subset accuracy "
                  f"{metrics['subset_accuracy']:.4f}{_interval(metrics.get('subset_accuracy_ci95'))}  Hamming loss "
                  f"{metrics['hamming_loss']:.4f}")
        optional = (("macro ROC AUC", "roc_auc"), ("macro average precision", "average_precision"),
                    ("micro average precision", "micro_average_precision"))
    else:
        scores = (f"accuracy {metrics['accuracy']:.4f}{_interval(metrics.get('accuracy_ci95'))}  "
                  f"macro-F1 {metrics['macro_f1']:.4f}{_interval(metrics.get('macro_f1_ci95'))}")
        optional = (("ROC AUC", "roc_auc"), ("average precision", "average_precision"), ("calibration error", "ece"))
    # Left out where undefined (null: a test set without both sides of a class) or older than the score (no key).
    return f"{metrics.get('split', 'test')}: {scores}" + "".join(
        f"  {name} {metrics[key]:.4f}{_interval(metrics.get(f'{key}_ci95'))}" for name, key in optional
        if metrics.get(key) is not None)


def _interval(bounds: list[float] | None) -> str:
    """`` (95% CI 0.8825-0.9152)``, a score's interval as the scores' line gives it; "" for none."""
    return "" if bounds is None else " (95% CI {:.4f}-{:.4f})".format(*bounds)


def scores_text(metrics: dict) -> str:
    """The scores' line of ``metrics`` (``metrics_line``), then a multi-label run's calibration figures
    (``label_calibration_text``), where they hold them: what `attnclf evaluate` shows of a run's scores, and what
    `attnclf train` (an ensemble's, `--seeds`, too) and `refit` close with.

    >>> scores_text({"split": "test", "accuracy": 0.9, "macro_f1": 0.85, "ece": 0.05})
    'test: accuracy 0.9000  macro-F1 0.8500  calibration error 0.0500'
    """
    if metrics.get("multi_label") and "ece" in metrics:  # (an ensemble's scores, or older metrics, may lack them)
        return f"{metrics_line(metrics)}\n{label_calibration_text(metrics)}"
    return metrics_line(metrics)


def evaluation_text(metrics: dict, label_names: Sequence[str], multi_label: bool, named=by_field,
                    ensemble_thresholds: str | None = None) -> str:
    """``evaluate``'s ``metrics`` as `attnclf evaluate` prints them: the classification report, a single-label run's
    confusion matrix, the scores (``scores_text``), the threshold applied (``named("threshold")``: how the
    caller's argument is named; ``ensemble_thresholds``: which a multi-label ensemble's are, ``thresholds_from``, its
    other labels cut at them, not at a run's thresholds.json) and the operating points, where asked for.

    >>> # print(evaluation_text(evaluate(clf, ("great film", "dull plot"), ["pos", "neg"]), clf.label_names, False))
    """
    chunks = [metrics["classification_report"]]
    if "confusion_matrix" in metrics:  # (a single-label run's)
        chunks.append(confusion_table(metrics["confusion_matrix"], label_names) + "\n")
    chunks.append(scores_text(metrics))
    if threshold := metrics.get("threshold"):
        otherwise = (", else the most probable other class" if not multi_label else
                     f"; the other labels at the ensemble's thresholds ({ensemble_thresholds})"
                     if ensemble_thresholds else "; the other labels at their own thresholds (thresholds.json)")
        chunks.append(f"predicted by {named('threshold')}: {shown(threshold['class'])} when its probability is at "
                      f"least {threshold['probability']:g}{otherwise}")
    if "operating_points" in metrics:
        chunks.append("\n" + operating_points_table(metrics["operating_points"]))
    return "\n".join(chunks)


def label_calibration_text(metrics: dict) -> str:
    """A multi-label run's calibration figures of ``metrics`` (``multilabel_metrics``'), in words that say they are of
    each label's own yes-or-no probability: the binary log loss over every (text, label) cell and the calibration
    error, the mean over labels, then each label's on a line of its own.

    >>> text = label_calibration_text({"num_examples": 10, "log_loss": 0.2, "ece": 0.05,
    ...                                "per_class": {"a": {"ece": 0.04}, "b": {"ece": 0.06}}})
    >>> print(text.split("): ")[1])
    binary log loss 0.2000 over 20 text-label cells, calibration error 0.0500 (mean over labels)
      a: calibration error 0.0400
      b: calibration error 0.0600
    """
    per_class = metrics["per_class"]
    lines = [f"calibration of each label's own probability (given or not, text by text): binary log loss "
             f"{metrics['log_loss']:.4f} over {metrics['num_examples'] * len(per_class):,} text-label cells, "
             f"calibration error {metrics['ece']:.4f} (mean over labels)"]
    lines += [f"  {shown(name, most=NAME_LENGTH, write=str)}: calibration error {scores['ece']:.4f}"
              for name, scores in per_class.items()]
    return "\n".join(lines)


def confusion_table(matrix, label_names: Sequence[str], width: int = 120) -> str:
    """The confusion matrix as text, rows the true label and columns the predicted one, each named; where the class
    names would make it wider than ``width`` columns, the columns are numbered and each row starts with its number,
    its name cut (``...``) where the whole would still be wider (20 Newsgroups' names are).

    >>> print(confusion_table([[5, 1], [0, 4]], ["neg", "pos"]))
    confusion matrix (rows: true label, columns: predicted)
         neg  pos
    neg    5    1
    pos    0    4
    """
    matrix = np.asarray(matrix)
    digits = max(len(str(matrix.max(initial=0))), 3)
    rows = list(label_names)
    columns = list(label_names)
    cell = max(digits, *map(len, columns))
    if max(map(len, rows)) + len(columns) * (cell + 2) > width:
        columns = [str(i) for i in range(len(label_names))]
        cell = max(digits, *map(len, columns))
        numbers = len(columns[-1])
        # The number names the row (and its column); the name is cut to what the width leaves, down to a letter.
        room = max(width - len(columns) * (cell + 2) - numbers - 1, 4)
        rows = [f"{i:>{numbers}} {name if len(name) <= room else shown(name, most=room - 3, write=str)}"
                for i, name in enumerate(label_names)]
    first = max(map(len, rows))
    lines = ["confusion matrix (rows: true label, columns: predicted)",
             " " * first + "".join(f"  {name:>{cell}}" for name in columns)]
    lines += [f"{name:<{first}}" + "".join(f"  {count:>{cell}}" for count in counts)
              for name, counts in zip(rows, matrix.tolist())]
    return "\n".join(lines)


def log_loss(labels: Sequence[int], probabilities: np.ndarray) -> float:
    """Mean cross-entropy of the true class (what training minimises; a run's ``val_loss``).

    >>> round(log_loss([0, 1], np.array([[.9, .1], [.5, .5]])), 4)
    0.3993
    """
    picked = probabilities[np.arange(len(labels)), np.asarray(labels)]
    return float(-np.log(np.clip(picked, 1e-12, None)).mean()) + 0.0  # + 0.0: -0.0 (every p = 1) reads as 0.0


def _roc_auc(y_true: np.ndarray, probabilities: np.ndarray, classes: list[int]) -> float | None:
    """Binary: the AUC of class 1's probability. More classes: the macro one-vs-rest AUC over the classes that occur,
    each class's own probabilities ranked as they are (scikit-learn's ``multi_class="ovr"`` when all occur)."""
    present = np.unique(y_true)
    if len(present) < 2:
        return None  # undefined with one class present
    if len(classes) == 2:
        return float(roc_auc_score(y_true, probabilities[:, 1]))
    return float(np.mean([roc_auc_score(y_true == c, probabilities[:, c]) for c in present]))


def average_precision(truth: np.ndarray, scores: np.ndarray) -> list[float | None]:
    """Per column of ``truth`` (0/1 or bool, texts by classes or labels) and ``scores`` (the same shape): the area
    under its precision-recall curve, scikit-learn's ``average_precision_score``; None where the column lacks
    positive or negative texts (as for the ROC AUC: with no positives there is no recall, with no negatives every
    threshold is right; scikit-learn would say 0 or 1 with a warning).

    >>> ap = average_precision(np.array([[1, 1], [0, 1], [1, 1]]), np.array([[.9, .2], [.8, .5], [.3, .7]]))
    >>> round(ap[0], 4), ap[1]  # (1 * 1/2 + 2/3 * 1/2: the third text adds the other half of the recall)
    (0.8333, None)
    """
    truth, scores = np.asarray(truth, dtype=bool), np.asarray(scores, dtype=np.float64)
    return [float(average_precision_score(truth[:, c], scores[:, c])) if 0 < truth[:, c].sum() < len(truth) else None
            for c in range(truth.shape[1])]


ECE_BINS = 15  # equal-width confidence bins, as Guo et al. (2017) binned them


def reliability(y_true: Sequence[int], probabilities: np.ndarray, bins: int = ECE_BINS) -> list[dict]:
    """The top label's confidence against its accuracy, in ``bins`` equal-width confidence bins (the reliability
    diagram of Guo et al., 2017): each non-empty bin's upper edge, count, mean confidence and accuracy.

    >>> [(cell["upper"], cell["count"], round(cell["confidence"], 3)) for cell in
    ...  reliability([0, 1, 1], np.array([[.9, .1], [.2, .8], [.6, .4]]), bins=4)]
    [(0.75, 1, 0.6), (1.0, 2, 0.85)]
    """
    y_true = np.asarray(y_true)
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == y_true
    # Right-closed bins, (0, 1/bins], ..., ((bins-1)/bins, 1]: a confidence of exactly 1 falls in the last.
    index = np.clip(np.ceil(confidence * bins).astype(int) - 1, 0, bins - 1)
    return [{"upper": (b + 1) / bins, "count": int(np.sum(index == b)),
             "confidence": float(confidence[index == b].mean()), "accuracy": float(correct[index == b].mean())}
            for b in range(bins) if np.any(index == b)]


def expected_calibration_error(y_true: Sequence[int], probabilities: np.ndarray, bins: int = ECE_BINS) -> float:
    """How far, on average over texts, the top label's confidence is from how often such predictions are right
    (0: confidences are accuracies; an overconfident model that says 0.99 and is right 90% of the time: 0.09).

    >>> round(expected_calibration_error([0, 1, 1, 1], np.array([[.9, .1], [.1, .9], [.1, .9], [.9, .1]])), 3)
    0.15
    """
    cells = reliability(y_true, probabilities, bins)
    total = sum(cell["count"] for cell in cells)
    return float(sum(cell["count"] / total * abs(cell["accuracy"] - cell["confidence"]) for cell in cells))


def pick_examples(
    texts: Sequence[str], y_true: Sequence[int], probabilities: np.ndarray, label_names: Sequence[str], k: int = 3
) -> dict[str, list[dict]]:
    """The ``k`` most confident correct and incorrect predictions.

    >>> ex = pick_examples(["a", "b"], [0, 1], np.array([[.9, .1], [.7, .3]]), ["n", "p"], k=1)
    >>> ex["incorrect"][0]["text"], ex["incorrect"][0]["predicted"]
    ('b', 'n')
    """
    y_true = np.asarray(y_true)
    y_pred = probabilities.argmax(axis=1)
    confidence = probabilities.max(axis=1)
    picked = {}
    for name, selector in (("correct", y_pred == y_true), ("incorrect", y_pred != y_true)):
        idx = np.flatnonzero(selector)
        idx = idx[np.argsort(-confidence[idx], kind="stable")][:k]
        picked[name] = [
            {"index": int(i), "text": texts[i], "true": label_names[y_true[i]],
             "predicted": label_names[y_pred[i]], "confidence": float(confidence[i])}
            for i in idx
        ]
    return picked
