"""What ROC AUC and average precision cost per epoch's validation, and what the whole validation scoring costs.

    python bench/ranking_metrics_cost.py [--repeats 51]

Validation splits as `attnclf train` draws them: IMDB's 2,496 reviews (2 classes) and 20 Newsgroups' 1,132 posts
(20 classes), their true labels; the probabilities are made up (the true class's logit raised by 2 over standard
normal noise, about 0.9 accuracy), as the cost of ranking depends on the sizes, not on how good a model is. A
multi-label set of the same 1,132 x 20 has 1 to 3 labels per text. Each figure is the median of ``--repeats`` calls
(time.perf_counter) of the function the trainer calls each epoch (``compute_metrics(report=False)``,
``training.multilabel.validation_record``) and of its ROC AUC and average precision parts alone.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from attnclf.evaluation.metrics import _roc_auc, average_precision, compute_metrics
from attnclf.evaluation.multilabel import _auc
from attnclf.training.multilabel import validation_record

from common import parser, splits, write_result


def median_ms(call, repeats: int) -> float:
    call()  # (first-call imports and caches are not what every epoch pays)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 2)


def made_up_probabilities(truth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Softmax of noisy logits whose true classes (one-hot or multi-hot ``truth``) stand 2 higher."""
    logits = rng.normal(size=truth.shape) + 2.0 * truth
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return exp / exp.sum(axis=1, keepdims=True)


def single_label(name: str, labels: np.ndarray, classes: int, repeats: int, rng: np.random.Generator) -> dict:
    probabilities = made_up_probabilities(np.eye(classes)[labels], rng)
    names = [str(c) for c in range(classes)]
    return {"split": name, "texts": len(labels), "classes": classes,
            "validation_scoring_ms": median_ms(lambda: compute_metrics(labels, probabilities, names, report=False),
                                               repeats),
            "roc_auc_ms": median_ms(lambda: _roc_auc(labels, probabilities, list(range(classes))), repeats),
            "average_precision_ms": median_ms(
                lambda: average_precision(labels[:, None] == np.arange(classes), probabilities), repeats)}


def multi_label(texts: int, labels: int, repeats: int, rng: np.random.Generator) -> dict:
    truth = np.zeros((texts, labels), dtype=int)
    for row in truth:
        row[rng.choice(labels, size=rng.integers(1, 4), replace=False)] = 1
    logits = rng.normal(size=truth.shape) + 2.0 * truth - 1.0
    probabilities = 1 / (1 + np.exp(-logits))
    names = [str(c) for c in range(labels)]
    return {"split": "multi-label, made up", "texts": texts, "classes": labels,
            "validation_scoring_ms": median_ms(lambda: validation_record(truth, probabilities, names), repeats),
            "roc_auc_ms": median_ms(lambda: ([_auc(truth[:, i], probabilities[:, i]) for i in range(labels)],
                                             _auc(truth.ravel(), probabilities.ravel())), repeats),
            "average_precision_ms": median_ms(lambda: (average_precision(truth, probabilities), average_precision(
                truth.reshape(-1, 1), probabilities.reshape(-1, 1))), repeats)}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--repeats", type=int, default=51)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for dataset in ("imdb", "20newsgroups"):
        validation = splits(dataset, args.data_dir).validation
        rows.append(single_label(f"{dataset} validation", np.asarray(validation.labels), validation.num_classes,
                                 args.repeats, rng))
        print(rows[-1], flush=True)
    rows.append(multi_label(1132, 20, args.repeats, rng))
    print(rows[-1], flush=True)
    write_result("ranking_metrics_cost", {"repeats": args.repeats, "rows": rows}, args.out)


if __name__ == "__main__":
    main()
