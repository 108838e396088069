"""Non-neural baselines on attnclf's own splits: TF-IDF + LR, NB-weighted bigram LR, linear SVM.

    python bench/baselines.py                      # imdb sst2 sst2-sentences 20newsgroups
    python bench/baselines.py --datasets imdb
    python bench/baselines.py --datasets 20newsgroups --hold-out latest   # validate on each group's newest posts

Each model's regularisation C is chosen on the validation split (the one
``attnclf train`` uses: IMDB's grouped by movie), the chosen model is the one
fitted on the training part, and test accuracy is read once. Features are
word unigrams + bigrams (lower-cased, ``<br />`` removed).
"""

from __future__ import annotations

import re
import time

import numpy as np
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC

from common import parser, peak_rss_mb, splits, write_result

DATASETS = ("imdb", "sst2", "sst2-sentences", "20newsgroups")
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
# Token pattern keeps punctuation like "!" and "?" and contractions' halves as tokens.
TOKENS = r"(?u)\b\w+\b|[!?]"


def preprocess(text: str) -> str:
    return _BREAK.sub(" ", text).lower()


def _tfidf() -> TfidfVectorizer:
    return TfidfVectorizer(preprocessor=preprocess, token_pattern=TOKENS, ngram_range=(1, 2), min_df=2,
                           max_df=0.95, sublinear_tf=True, dtype=np.float32)


class NBLogisticRegression:
    """Wang & Manning (2012)'s NB feature weighting with a logistic regression on top.

    Binary presence of uni+bigrams, each scaled by its log-count ratio
    r = log((p / |p|_1) / (q / |q|_1)) with add-one smoothing; one-vs-rest for
    more than two classes (one r and one regression per class).
    """

    def __init__(self, C: float = 1.0):
        self.C = C

    def _ratios(self, X, y: np.ndarray, positive: int) -> np.ndarray:
        p = 1 + np.asarray(X[y == positive].sum(0)).ravel()
        q = 1 + np.asarray(X[y != positive].sum(0)).ravel()
        return np.log((p / p.sum()) / (q / q.sum())).astype(np.float32)

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        targets = self.classes_[1:] if len(self.classes_) == 2 else self.classes_
        self.models_ = []
        for c in targets:
            r = self._ratios(X, y, c)
            lr = LogisticRegression(C=self.C, solver="liblinear", dual=True, max_iter=1000)
            self.models_.append((r, lr.fit(X.multiply(r).tocsr(), (y == c).astype(int))))
        return self

    def decision_function(self, X) -> np.ndarray:
        scores = np.stack([lr.decision_function(X.multiply(r).tocsr()) for r, lr in self.models_], axis=1)
        return np.hstack([-scores, scores]) if len(self.classes_) == 2 else scores

    def predict(self, X) -> np.ndarray:
        return self.classes_[self.decision_function(X).argmax(1)]


def _models(num_classes: int):
    """(name, vectorizer factory, model factory, C grid) per baseline."""
    lr_solver = "liblinear" if num_classes == 2 else "lbfgs"
    return [
        ("tfidf_lr", _tfidf, lambda C: LogisticRegression(C=C, solver=lr_solver, max_iter=2000), [1, 4, 16, 64]),
        ("nb_bigram_lr", lambda: CountVectorizer(preprocessor=preprocess, token_pattern=TOKENS,
                                                 ngram_range=(1, 2), min_df=1, binary=True, dtype=np.float32),
         NBLogisticRegression, [0.1, 0.3, 1, 3]),
        ("tfidf_linear_svm", _tfidf, lambda C: LinearSVC(C=C), [0.1, 0.3, 1, 3]),
    ]


def choose_C(accuracy_by_C: dict[float, float]) -> float:
    """The C of the highest validation accuracy; of tied ones, the smallest (the strongest regularisation).

    >>> choose_C({0.25: 0.8, 1: 0.85, 4: 0.85, 16: 0.84})
    1
    """
    return min(accuracy_by_C, key=lambda C: (-accuracy_by_C[C], C))


Texts = tuple[list[str], np.ndarray]  # texts and their labels


def fit_and_choose(vectorizer, make, grid, train: Texts, validation: Texts, test: Texts | None = None) -> dict:
    """Fit ``make(C)`` on ``vectorizer()``'s features of the training texts for each C of ``grid``, choose C on the
    validation texts' accuracy (``choose_C``) and score the chosen model on the test texts once (without ``test``:
    no test figures). ``train``, ``validation`` and ``test`` are (texts, labels)."""
    (train_texts, y_train), (val_texts, y_val) = train, validation
    started = time.perf_counter()
    vec = vectorizer()
    X_train = vec.fit_transform(train_texts)
    X_val = vec.transform(val_texts)
    vectorize_seconds = time.perf_counter() - started
    val_accuracy, fit_seconds, fitted = {}, {}, {}
    for C in grid:
        t = time.perf_counter()
        fitted[C] = make(C).fit(X_train, y_train)
        fit_seconds[C] = time.perf_counter() - t
        val_accuracy[C] = float((fitted[C].predict(X_val) == y_val).mean())
    best = choose_C(val_accuracy)
    entry = {
        "validation_accuracy": val_accuracy[best],
        "C": best,
        "validation_accuracy_by_C": {str(C): round(a, 4) for C, a in val_accuracy.items()},
        "features": int(X_train.shape[1]),
        # What a user pays for the chosen model: vectorise train + fit once.
        "train_seconds": round(vectorize_seconds + fit_seconds[best], 2),
        "search_seconds": round(time.perf_counter() - started, 2),
    }
    if test is not None:
        test_texts, y_test = test
        t = time.perf_counter()
        test_pred = fitted[best].predict(vec.transform(test_texts))
        predict_seconds = time.perf_counter() - t
        entry = {"test_accuracy": float((test_pred == y_test).mean()), **entry,
                 "predict_seconds": round(predict_seconds, 2),
                 "predict_texts_per_second": round(len(y_test) / predict_seconds)}
    return entry


def run_dataset(name: str, data_dir: str | None, hold_out: str = "random") -> dict:
    data = splits(name, data_dir, hold_out=hold_out)
    parts = [(d.texts, np.asarray(d.labels)) for d in (data.train, data.validation, data.test)]
    result = {"train_examples": len(parts[0][1]), "validation_examples": len(parts[1][1]),
              "test_examples": len(parts[2][1]), "models": {}}
    for model_name, vectorizer, make, grid in _models(data.train.num_classes):
        entry = fit_and_choose(vectorizer, make, grid, *parts)
        result["models"][model_name] = entry
        print(f"{name:15s} {model_name:17s} test {entry['test_accuracy']:.4f} (val {entry['validation_accuracy']:.4f}, "
              f"C={entry['C']}) train {entry['train_seconds']}s", flush=True)
    return result


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    p.add_argument("--name", default="baselines", help="result name (bench/results/NAME.json)")
    p.add_argument("--hold-out", choices=("random", "latest"), default="random",
                   help="which training texts validate, as `attnclf train --hold-out`")
    args = p.parse_args()
    results = {name: run_dataset(name, args.data_dir, args.hold_out) for name in args.datasets}
    write_result(args.name, {"datasets": results, "peak_rss_mb": round(peak_rss_mb())}, args.out)


if __name__ == "__main__":
    main()
