"""Multi-label training on the generated `topics` set: attnclf models against TF-IDF + one-vs-rest LR.

    python bench/multilabel.py --threads 1          # about 40 s of one thread (36 s wall at load 1.5)

Trains what ``attnclf train --dataset topics --multi-label --model MODEL --seed SEED``
trains, and a TF-IDF (1-2 grams) + one logistic regression per label on the same
train / validation / test texts, its thresholds tuned on validation the same way.
Records test micro/macro F1 at the tuned thresholds and at 0.5, subset accuracy
and Hamming loss. No real corpus here has label sets: the shared 20 Newsgroups
copy is the "bydate" version, whose posts lost their Newsgroups: header.
"""

from __future__ import annotations

import tempfile
import time

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier

from attnclf.data.multilabel import multi_hot
from attnclf.evaluation.multilabel import multilabel_metrics, tune_thresholds
from attnclf.training.run import train_run
from attnclf.training.run_data import load_data
from attnclf.training.settings import DataSettings

from common import cli_settings, parse_seeds_and_threads, parser, peak_rss_mb, write_result

KEPT = ("micro_f1", "macro_f1", "subset_accuracy", "hamming_loss", "roc_auc")


def _scores(metrics: dict) -> dict:
    return {key: round(metrics[key], 4) for key in KEPT} | {
        f"{key}_at_0.5": round(value, 4) for key, value in metrics.get("at_0.5", {}).items()}


def reference(seed: int) -> dict:
    """TF-IDF + one-vs-rest logistic regression, thresholds tuned on validation."""
    splits = load_data(DataSettings(dataset="topics", multi_label=True), seed)
    names = splits.train.label_names
    started = time.perf_counter()
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    model = OneVsRestClassifier(LogisticRegression(C=10.0, max_iter=1000))
    model.fit(vectorizer.fit_transform(splits.train.texts), multi_hot(splits.train.labels, len(names)))
    validation = model.predict_proba(vectorizer.transform(splits.validation.texts))
    thresholds, _ = tune_thresholds(multi_hot(splits.validation.labels, len(names)), validation)
    test = model.predict_proba(vectorizer.transform(splits.test.texts))
    metrics = multilabel_metrics(multi_hot(splits.test.labels, len(names)), test, names, thresholds, report=False)
    return {"model": "tfidf-lr", "seed": seed, **_scores(metrics),
            "train_seconds": round(time.perf_counter() - started, 3)}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["self-attn", "boe"])
    p.add_argument("--monitor", choices=["loss", "micro_f1", "macro_f1", "accuracy"],
                   help="validation metric early stopping watches (default: attnclf's, loss)")
    args = parse_seeds_and_threads(p)
    runs = []
    for seed in args.seeds:
        for model in args.models:
            with tempfile.TemporaryDirectory() as out:
                monitor = ["--monitor", args.monitor] if args.monitor else []
                settings = cli_settings("topics", out, "--multi-label", "--model", model, "--seed", str(seed), *monitor)
                settings.report = False
                result = train_run(settings, progress=False)
            runs.append({"model": model, "seed": seed, **_scores(result.metrics), "epochs": len(result.history),
                         "train_seconds": result.metrics["train_seconds"], "parameters": result.metrics["parameters"]})
            print(runs[-1], flush=True)
        runs.append(reference(seed))
        print(runs[-1], flush=True)
    summary = {}
    for model in [*args.models, "tfidf-lr"]:
        mine = [r for r in runs if r["model"] == model]
        summary[model] = {key: {"mean": round(float(np.mean([r[key] for r in mine])), 4),
                                "std": round(float(np.std([r[key] for r in mine], ddof=1)), 4) if len(mine) > 1
                                else 0.0}
                          for key in (*KEPT, "micro_f1_at_0.5", "macro_f1_at_0.5") if key in mine[0]}
    write_result("multilabel", {
        "command_equivalent": "attnclf train --dataset topics --multi-label --model MODEL --seed SEED [--monitor M]",
        "runs": runs,
        "summary": summary,
        "peak_rss_mb": round(peak_rss_mb()),
    }, args.out)


if __name__ == "__main__":
    main()
