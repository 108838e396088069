"""Long documents: head + tail truncation against overlapping windows, on the longest 10% of test texts.

    python bench/long_documents.py                                   # imdb, then 20newsgroups
    python bench/long_documents.py --datasets imdb --out bench/results/long_documents-imdb.json \
        --max-train-examples 5000 --max-test-examples 5000              # a budget a busy machine affords
    python bench/long_documents.py --datasets imdb --epochs 3 -- --max-len 400   # any `attnclf train` flag after --

For each dataset, ``self-attn`` is trained twice with the dataset's recipe
(same max_len, seed and data) under a reduced epoch budget (``--epochs``,
default imdb 2 of the recipe's 3, 20newsgroups 4 of 8): once as the recipe says (texts cut to max_len,
head + tail) and once with ``--windows`` (the whole text, up to the default
8 windows of max_len tokens with a quarter overlap, attention-pooled). Both
are tested on the whole test set and on its longest 10% by token count (the
untruncated word-level tokens of the run's tokenizer).
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np

from attnclf.classifier import Classifier
from attnclf.training.run import train_run
from attnclf.training.run_data import align_labels, load_data
from attnclf.training.device import torch_threads
from common import cli_settings, parser, write_result

EPOCHS = {"imdb": 2, "20newsgroups": 4}
VARIANTS = {"head_tail": [], "windows": ["--windows"]}


def _accuracy(probabilities: np.ndarray, labels: np.ndarray) -> float:
    return round(float((probabilities.argmax(axis=1) == labels).mean()), 4)


def run_dataset(dataset: str, epochs: int, threads: int, runs_dir: Path, budget: list[str]) -> dict:
    result: dict = {"epochs": epochs, "flags": budget}
    longest = None
    for variant, flags in VARIANTS.items():
        settings = cli_settings(dataset, str(runs_dir / f"{dataset}-{variant}"), "--epochs", str(epochs), *budget,
                                *flags)
        settings.threads, settings.report = threads, False
        settings.embeddings = None  # reading strategies from the same random start, as the recorded results were
        cpu_started = resource.getrusage(resource.RUSAGE_SELF).ru_utime
        wall_started = time.perf_counter()
        run = train_run(settings, progress=False)
        clf = Classifier.load(run.run_dir, device="cpu")
        test = align_labels(load_data(settings.data, settings.train.seed).test, clf.label_names)
        labels = np.asarray(test.labels)
        if longest is None:  # the same tokenizer settings and train texts: the same counts for both variants
            lengths = np.array([len(ids) for ids in clf.tokenizer.encode(test.texts, max_len=10**9)])
            longest = np.argsort(-lengths, kind="stable")[: len(lengths) // 10]
            result["test_texts"] = len(labels)
            result["longest_10pct"] = {"texts": len(longest), "min_tokens": int(lengths[longest].min()),
                                       "median_tokens": int(np.median(lengths[longest])),
                                       "max_tokens": int(lengths[longest].max()),
                                       "max_len": settings.tokenizer.max_len,
                                       "test_median_tokens": int(np.median(lengths))}
        with torch_threads(threads):
            probabilities = clf.predict_proba(test.texts)
        result[variant] = {
            "test_accuracy": _accuracy(probabilities, labels),
            "longest_10pct_accuracy": _accuracy(probabilities[longest], labels[longest]),
            "metrics_json_accuracy": round(run.metrics["accuracy"], 4),
            "train_seconds": run.metrics["train_seconds"],
            "wall_seconds": round(time.perf_counter() - wall_started, 1),
            "cpu_seconds": round(resource.getrusage(resource.RUSAGE_SELF).ru_utime - cpu_started, 1),
            "windows": settings.windows.to_dict() if settings.windows else None,
            "truncation": settings.tokenizer.truncation,
        }
        print(dataset, variant, result[variant], flush=True)
    return result


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--datasets", nargs="+", default=list(EPOCHS))
    p.add_argument("--epochs", type=int, help="epochs for every dataset (default: imdb 2, 20newsgroups 4)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs-dir", default="runs/bench-long-documents")
    p.add_argument("--max-train-examples", type=int, help="train on a stratified sample (both variants the same)")
    p.add_argument("--max-test-examples", type=int, help="test on a stratified sample (both variants the same)")
    p.add_argument("flags", nargs="*", help="extra `attnclf train` flags for both variants, after --")
    args = p.parse_args()
    budget = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in ("max_train_examples", "max_test_examples")
              if getattr(args, name)] + args.flags
    results = {dataset: run_dataset(dataset, args.epochs or EPOCHS[dataset], args.threads, Path(args.runs_dir), budget)
               for dataset in args.datasets}
    write_result("long_documents", {"model": "self-attn", "datasets": results}, args.out)


if __name__ == "__main__":
    main()
