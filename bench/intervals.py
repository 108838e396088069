"""The macro-F1's and the ROC AUC's 95% intervals against a plain bootstrap of the texts, and what they cost.

    python bench/intervals.py [--draws 1000] [--repeats 21]

Test splits as `attnclf evaluate` scores them: IMDB's 25,000 reviews, 20 Newsgroups' 7,532 posts (20 classes),
SST-2's stsa.binary test (1,821 sentences) and GLUE dev (872), their true labels; the probabilities are made up
(the true class's logit raised by 2 over standard normal noise, about 0.9 accuracy on two classes), as an
interval's width and cost depend on the sizes and the scores' spread, not on which model made them. Per split:
``metrics.macro_f1_interval`` (confusion-matrix cells drawn 1,000 times) and ``metrics.roc_auc_interval`` (DeLong's
variance) beside the 2.5th and 97.5th percentiles of ``--draws`` plain draws of the texts, each scored by
scikit-learn's ``f1_score`` and by ``_roc_auc`` as `evaluate` scores the whole set; and the median ms of
``--repeats`` calls of each interval and of ``compute_metrics`` with and without them.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.metrics import f1_score

from attnclf.evaluation.metrics import _roc_auc, compute_metrics, macro_f1_interval, roc_auc_interval

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


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--draws", type=int, default=1000, help="plain bootstrap draws of the texts per split")
    p.add_argument("--repeats", type=int, default=21)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for dataset, split in SPLITS:
        data = getattr(splits(dataset, args.data_dir), split)
        rows.append(compared(f"{dataset} {split}", np.asarray(data.labels), data.num_classes, args.draws,
                             args.repeats, rng))
        print(rows[-1], flush=True)
    write_result("intervals", {"draws": args.draws, "repeats": args.repeats, "rows": rows}, args.out)


if __name__ == "__main__":
    main()
