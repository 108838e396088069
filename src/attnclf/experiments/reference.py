"""The reference that is not a neural network: TF-IDF of 1-2 grams + logistic regression.

It sees the same splits as the neural cells of a seed (same training sample,
same validation carve, same test texts), picks C on the validation split by
macro-F1, and is scored on test. Its record has the same keys as a neural
cell's, so it sits in the same table.

>>> # record = tfidf_reference(setup, seed=0, run_dir=Path("experiments/x/runs/tfidf-lr-seed0"))
>>> # record["accuracy"], record["parameters"]
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..errors import AttnclfError
from ..evaluation.metrics import compute_metrics
from ..rundir import atomic_write_json, check_fields, output_folder, read_json
from ..training.run_data import align_labels, load_data, texts_fingerprint
from ..training.settings import DataSettings
from .cells import Setup

LABEL = "tfidf-lr"
C_GRID = (0.25, 1.0, 4.0, 16.0)
# What the record cached in result.json holds that compare's log line and tables read, as a neural cell's record does.
RECORD_FIELDS = {"label": "a string", "model": "a string", "seed": "a whole number >= 0", "run_dir": "a string",
                 "accuracy": "a number", "macro_f1": "a number", "parameters": "a whole number >= 0",
                 "epochs": "a number or null", "train_seconds": "a number", "cpu_seconds": "a number or null",
                 "texts_per_second": "a number", "train_loss": "a list of numbers", "C": "a number"}


def _with_defaults(key: dict | None) -> dict | None:
    """A saved key with the data settings an older version did not have filled in with their defaults."""
    try:
        return {**key, "data": asdict(DataSettings(**key["data"]))}
    except (TypeError, KeyError):  # no key, or one from a newer version
        return key


def tfidf_reference(setup: Setup, seed: int, run_dir: Path) -> dict:
    """Fit, select and test the reference for one seed; cached in ``run_dir/result.json``, a folder held meanwhile as a
    neural cell's is (``output_folder``)."""
    with output_folder(run_dir) as run_dir:
        return _tfidf_reference(setup, seed, run_dir)


def _tfidf_reference(setup: Setup, seed: int, run_dir: Path) -> dict:
    """``tfidf_reference``'s work, in a folder it holds."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    key = {"data": asdict(setup.data), "seed": seed, "c_grid": list(C_GRID), "throughput_texts": setup.throughput_texts}
    splits = load_data(setup.data, seed)
    train, validation = splits.train, align_labels(splits.validation, splits.train.label_names)
    test = align_labels(splits.test, train.label_names) if splits.test is not None else validation
    # The texts too: a file edited since gives other splits under the same settings (an older cache lacks them)
    fingerprints = [texts_fingerprint(part) for part in (train, validation, test)]
    cache = run_dir / "result.json"
    if cache.exists():
        saved = check_fields(cache, read_json(cache), {})  # (an object; a key of other settings is refitted)
        if _with_defaults(saved.get("key")) == key and saved.get("texts", fingerprints) == fingerprints:
            return check_fields(cache, saved, {"record": RECORD_FIELDS})["record"]

    started_wall, started_cpu = time.perf_counter(), time.process_time()
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    try:
        features = vectorizer.fit_transform(train.texts)
    except ValueError as exc:  # e.g. no term occurs in two training texts
        raise AttnclfError(f"TF-IDF reference on {setup.data.describe()}: {exc}") from None
    val_features = vectorizer.transform(validation.texts)

    def fit(c: float) -> LogisticRegression:
        return LogisticRegression(C=c, max_iter=2000).fit(features, train.labels)

    scores = {c: f1_score(validation.labels, fit(c).predict(val_features), average="macro") for c in C_GRID}
    best_c = max(C_GRID, key=lambda c: scores[c])  # the first of equals: the strongest regularisation
    model = fit(best_c)
    train_seconds = time.perf_counter() - started_wall
    cpu_seconds = time.process_time() - started_cpu

    metrics = compute_metrics(test.labels, model.predict_proba(vectorizer.transform(test.texts)), train.label_names)
    texts = test.texts[: setup.throughput_texts]
    started = time.perf_counter()
    model.predict_proba(vectorizer.transform(texts))
    throughput = len(texts) / (time.perf_counter() - started)

    record = {
        "label": LABEL, "model": LABEL, "seed": seed, "run_dir": str(run_dir),
        "accuracy": metrics["accuracy"], "macro_f1": metrics["macro_f1"],
        "parameters": int(np.size(model.coef_) + np.size(model.intercept_)),
        "epochs": None, "train_seconds": round(train_seconds, 3), "cpu_seconds": round(cpu_seconds, 2),
        "texts_per_second": round(throughput, 1), "train_loss": [],
        "C": best_c, "validation_macro_f1_by_C": {str(c): scores[c] for c in C_GRID},
    }
    atomic_write_json(cache, {"key": key, "texts": fingerprints, "record": record})
    return record
