"""The macro-F1's and the ROC AUC's 95% intervals against a plain bootstrap of the texts, and what they cost.

    python bench/intervals.py [--draws 1000] [--repeats 21] [--label-sets-only]

Test splits as `attnclf evaluate` scores them: IMDB's 25,000 reviews, 20 Newsgroups' 7,532 posts (20 classes),
SST-2's stsa.binary test (1,821 sentences) and GLUE dev (872), their true labels; the probabilities are made up
(the true class's logit raised by 2 over standard normal noise, about 0.9 accuracy on two classes), as an
interval's width and cost depend on the sizes and the scores' spread, not on which model made them. Per split:
``metrics.macro_f1_interval`` (confusion-matrix cells drawn 1,000 times) and ``metrics.roc_auc_interval`` (DeLong's
variance) beside the 2.5th and 97.5th percentiles of ``--draws`` plain draws of the texts, each scored by
scikit-learn's ``f1_score`` and by ``_roc_auc`` as `evaluate` scores the whole set; and the median ms of
``--repeats`` calls of each interval and of ``compute_metrics`` with and without them.

Multi-label runs the same way (``multilabel.label_set_macro_f1_interval``, drawing the texts themselves, and
``label_auc_interval``, DeLong's over the labels): the generated `topics` test set's label sets (500 texts x 5
labels) and made-up ones at 20 Newsgroups' size (7,532 x 20, each label on 8% of texts), their probabilities a
sigmoid of the same noisy logits less 1.5; a plain bootstrap scores each draw's macro-F1 by scikit-learn over the
labels it holds or predicts and its macro AUC over the labels with texts on both sides. The interval's cost alone at
IMDB's size with 50 labels (25,000 x 50, 5% each): a plain bootstrap there would take longer than the rest together.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.metrics import f1_score, roc_auc_score

from attnclf.data.multilabel import multi_hot
from attnclf.evaluation.metrics import _roc_auc, compute_metrics, macro_f1_interval, roc_auc_interval
from attnclf.evaluation.multilabel import (_seen, label_auc_interval, label_set_macro_f1_interval, multilabel_metrics,
                                           predicted_sets)

from common import parser, splits, write_result
from ranking_metrics_cost import made_up_probabilities, median_ms

SPLITS = (("imdb", "test"), ("20newsgroups", "test"), ("sst2-sentences", "test"), ("sst2", "test"))


def compared(name: str, labels: np.ndarray, classes: int, draws: int, repeats: int, rng: np.random.Generator) -> dict:
    probabilities = made_up_probabilities(np.eye(classes)[labels], rng)
    predicted, names = probabilities.argmax(1), [str(c) for c in range(classes)]
    started = time.perf_counter()
    drawn = [rng.integers(0, len(labels), len(labels)) for _ in range(draws)]
    plain_f1 = np.percentile([f1_score(labels[i], predicted[i], average="macro") for i in drawn], [2.5, 97.5])
    plain_auc = np.percentile([_roc_auc(labels[i], probabilities[i], list(range(classes))) for i in drawn],
                              [2.5, 97.5])
    return {"split": name, "texts": len(labels), "classes": classes,
            "macro_f1": round(f1_score(labels, predicted, average="macro"), 4),
            "macro_f1_ci95": [round(b, 4) for b in macro_f1_interval(labels, predicted, classes)],
            "plain_bootstrap_macro_f1_ci95": [round(float(b), 4) for b in plain_f1],
            "roc_auc": round(_roc_auc(labels, probabilities, list(range(classes))), 4),
            "roc_auc_ci95": [round(b, 4) for b in roc_auc_interval(labels, probabilities)],
            "plain_bootstrap_roc_auc_ci95": [round(float(b), 4) for b in plain_auc],
            "plain_bootstrap_s": round(time.perf_counter() - started, 1),
            "macro_f1_interval_ms": median_ms(lambda: macro_f1_interval(labels, predicted, classes), repeats),
            "roc_auc_interval_ms": median_ms(lambda: roc_auc_interval(labels, probabilities), repeats),
            "compute_metrics_ms": median_ms(lambda: compute_metrics(labels, probabilities, names), repeats),
            "compute_metrics_without_intervals_ms": median_ms(
                lambda: compute_metrics(labels, probabilities, names, intervals=False), repeats)}


def compared_label_sets(name: str, truth: np.ndarray, draws: int, repeats: int, rng: np.random.Generator) -> dict:
    probabilities = 1 / (1 + np.exp(-(rng.normal(size=truth.shape) + 2.0 * truth - 1.5)))
    predicted, names = predicted_sets(probabilities), [str(c) for c in range(truth.shape[1])]

    def macro_auc(y: np.ndarray, scores: np.ndarray) -> float:
        defined = y.any(0) & ~y.all(0)
        return float(roc_auc_score(y[:, defined], scores[:, defined], average="macro"))

    row = {"split": name, "texts": len(truth), "labels": truth.shape[1],
           "macro_f1": round(float(f1_score(truth, predicted, average="macro", labels=_seen(truth, predicted),
                                            zero_division=0)), 4),
           "macro_f1_ci95": [round(b, 4) for b in label_set_macro_f1_interval(truth, predicted)],
           "roc_auc": round(macro_auc(truth, probabilities), 4),
           "roc_auc_ci95": [round(b, 4) for b in label_auc_interval(truth, probabilities)]}
    if draws:
        started = time.perf_counter()
        drawn = [rng.integers(0, len(truth), len(truth)) for _ in range(draws)]
        row["plain_bootstrap_macro_f1_ci95"] = [round(float(b), 4) for b in np.percentile(
            [f1_score(truth[i], predicted[i], average="macro", labels=_seen(truth[i], predicted[i]), zero_division=0)
             for i in drawn], [2.5, 97.5])]
        row["plain_bootstrap_roc_auc_ci95"] = [round(float(b), 4) for b in np.percentile(
            [macro_auc(truth[i], probabilities[i]) for i in drawn], [2.5, 97.5])]
        row["plain_bootstrap_s"] = round(time.perf_counter() - started, 1)
    return row | {
        "macro_f1_interval_ms": median_ms(lambda: label_set_macro_f1_interval(truth, predicted), repeats),
        "roc_auc_interval_ms": median_ms(lambda: label_auc_interval(truth, probabilities), repeats),
        "multilabel_metrics_ms": median_ms(lambda: multilabel_metrics(truth, probabilities, names), repeats),
        "multilabel_metrics_without_intervals_ms": median_ms(
            lambda: multilabel_metrics(truth, probabilities, names, intervals=False), repeats)}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--draws", type=int, default=1000, help="plain bootstrap draws of the texts per split")
    p.add_argument("--repeats", type=int, default=21)
    p.add_argument("--label-sets-only", action="store_true",
                   help="only the multi-label rows (the single-label ones take about 12 minutes), into "
                        "bench/results/intervals-label-sets.json")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for dataset, split in () if args.label_sets_only else SPLITS:
        data = getattr(splits(dataset, args.data_dir), split)
        rows.append(compared(f"{dataset} {split}", np.asarray(data.labels), data.num_classes, args.draws,
                             args.repeats, rng))
        print(rows[-1], flush=True)
    topics = splits("topics", args.data_dir).test
    for name, truth, draws in (("topics test", multi_hot(topics.labels, topics.num_classes), args.draws),
                               ("made up, 7,532 x 20", rng.random((7532, 20)) < 0.08, args.draws),
                               ("made up, 25,000 x 50", rng.random((25000, 50)) < 0.05, 0)):
        rows.append(compared_label_sets(name, np.asarray(truth, dtype=int), draws, args.repeats, rng))
        print(rows[-1], flush=True)
    write_result("intervals-label-sets" if args.label_sets_only else "intervals",
                 {"draws": args.draws, "repeats": args.repeats, "rows": rows}, args.out)


if __name__ == "__main__":
    main()
