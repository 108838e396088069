"""A scikit-learn estimator: attnclf's models behind ``fit`` / ``predict`` / ``predict_proba``.

Texts in, the original label values out, so it drops into ``Pipeline``,
``cross_val_score`` and ``GridSearchCV``:

>>> from sklearn.model_selection import cross_val_score
>>> clf = AttentionTextClassifier(epochs=3, d_model=32, layers=1)
>>> # cross_val_score(clf, texts, labels, cv=3)
>>> # clf.fit(texts, labels).predict(["not good, not good at all"])
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import fields
from pathlib import Path

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted

from .classifier import Classifier
from .data.base import TextDataset
from .data.splits import train_validation_split
from .models import MODELS, build_model
from .prediction import check_texts
from .text.batching import BucketBatches
from .text.tokenizer import Tokenizer, TokenizerConfig
from .training.device import resolve_device
from .training.settings import refuse_derived_fields
from .training.trainer import TrainConfig, Trainer

# Plain constructor arguments that map onto model config fields; a model takes those it has.
# ``d_model`` is the model width, named ``embed_dim`` in the models without a Transformer encoder.
_WIDTH_FIELDS = ("d_model", "embed_dim")
_SHARED_FIELDS = ("heads", "layers", "ff_dim", "dropout")


class AttentionTextClassifier(ClassifierMixin, BaseEstimator):
    """Train one of attnclf's models (``MODELS``) on texts, the scikit-learn way.

    Architecture arguments left at None keep the model's own default; a model
    ignores those it has no field for (``boe`` has no ``heads``);
    ``model_config`` sets any other config field and wins over them all.
    ``validation_fraction`` of the training texts is held out to pick the best
    epoch (``patience`` > 0 also stops early); 0 validates on the training texts.
    ``classes_`` holds the label values as given (strings, ints, ...), sorted.
    After ``fit``, ``classifier_`` is an ``attnclf.Classifier`` (tokens,
    attention) and ``history_`` the per-epoch training record.

    >>> clf = AttentionTextClassifier(model="boe", epochs=2, d_model=16)
    >>> clf.get_params()["d_model"]
    16
    """

    def __init__(self, model: str = "self-attn", *, epochs: int = 5, batch_size: int = 32, lr: float = 1e-3,
                 weight_decay: float = 0.01, tokenizer: str = "word", vocab_size: int = 30000, min_frequency: int = 2,
                 max_len: int = 256, d_model: int | None = None, heads: int | None = None,
                 layers: int | None = None, ff_dim: int | None = None, dropout: float | None = None,
                 model_config: dict | None = None, validation_fraction: float = 0.1, patience: int = 0,
                 seed: int = 0, device: str = "cpu", verbose: bool = False):
        self.model = model
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.min_frequency = min_frequency
        self.max_len = max_len
        self.d_model = d_model
        self.heads = heads
        self.layers = layers
        self.ff_dim = ff_dim
        self.dropout = dropout
        self.model_config = model_config
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.seed = seed
        self.device = device
        self.verbose = verbose

    def fit(self, X, y) -> "AttentionTextClassifier":
        """Train a fresh model on texts ``X`` with labels ``y``; returns self."""
        return self._fit(_texts(X), y)  # (a bad setting or text is an AttnclfError, a ValueError as callers expect)

    def _fit(self, texts: list[str], y) -> "AttentionTextClassifier":
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        scalar = not hasattr(y, "__iter__") or getattr(y, "ndim", 1) == 0  # (np.array(3) has __iter__, and fails it)
        if scalar or isinstance(y, (str, bytes, dict, set, frozenset)):
            raise ValueError(f"y must be a sequence of labels, one per text, not {type(y).__name__}")
        if getattr(y, "ndim", 1) == 2 and y.shape[1] == 1:  # (a column, not label sets of one)
            raise ValueError(f"y must be one-dimensional, one label per text; got shape {y.shape}: pass y.ravel() "
                             f"(a DataFrame: y.iloc[:, 0])")
        # Labels come back in y's own dtype where it has one (uint8 as uint8, object as object), as scikit-learn's do
        given = None
        if hasattr(y, "to_numpy"):  # pandas
            given = y.to_numpy()
        elif isinstance(y, np.ndarray):
            given = y
        values = given.tolist() if given is not None else list(y)  # (a generator is read here, once)
        label_set = next((v for v in values if isinstance(v, (list, tuple, set, frozenset, np.ndarray))), None)
        if label_set is not None:
            raise ValueError(f"y holds a set of labels per text ({label_set!r}); this estimator is single-label "
                             f"(`attnclf train --multi-label` trains label sets)")
        # numpy would turn 1 into "1" (True into "True") and classes_ would not be y's
        kinds: dict[str, object] = {}  # the first label of each type, strings first
        for v in values:
            if not _missing(v):
                kinds.setdefault("strings" if isinstance(v, str) else
                                 "booleans" if isinstance(v, (bool, np.bool_)) else "numbers", v)
        if len(kinds) > 1:
            mixed = sorted(kinds, key=["strings", "numbers", "booleans"].index)
            raise ValueError(f"y mixes {' and '.join(mixed)} ({' and '.join(repr(kinds[k]) for k in mixed)}); give "
                             f"every label as one type")
        for i, label in enumerate(values):  # (before numpy turns a NaN among strings into the string "nan")
            if _missing(label):
                raise ValueError(f"y[{i}] is {label!r}: every text needs a label")
        y = given if given is not None else np.asarray(values)
        if y.ndim != 1 or len(y) != len(texts):
            raise ValueError(f"y must hold one label per text: {len(texts)} texts, y of shape {y.shape}")
        # (as scikit-learn's classifiers: 300 real values are not 300 classes; only floats can be, bytes cannot be asked)
        if y.dtype.kind == "f" and type_of_target(y) == "continuous":
            raise ValueError("Unknown label type: continuous; y must hold class labels, not real numbers "
                             "(a regression target)")
        classes, y_index = np.unique(y, return_inverse=True)
        if len(classes) == 0:
            raise ValueError("no texts to fit on")
        if len(classes) < 2:
            raise ValueError(f"y has only one class ({classes[0]!r}); a classifier needs two at least")
        if not 0 <= self.validation_fraction < 1:
            raise ValueError(f"validation_fraction must be in [0, 1), got {self.validation_fraction}")
        config = TrainConfig(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
                             weight_decay=self.weight_decay, patience=self.patience, seed=self.seed)  # checked first
        model_fields = self._model_fields()  # (so are these, before the split and the tokenizer)
        label_names = [str(c) for c in classes]
        data = TextDataset(texts, y_index.tolist(), label_names)
        train, validation = (data, data) if self.validation_fraction == 0 else \
            train_validation_split(data, self.validation_fraction, self.seed)

        device = resolve_device(self.device)
        tokenizer = Tokenizer.train(train.texts, TokenizerConfig(
            kind=self.tokenizer, vocab_size=self.vocab_size, min_frequency=self.min_frequency, max_len=self.max_len))
        # The Trainer keeps its best weights and checkpoints on disk; the estimator keeps them in memory. Seeding
        # happens on a fork of the generator: the caller's own random stream goes on as if fit had not run.
        with torch.random.fork_rng(devices=[]), tempfile.TemporaryDirectory(prefix="attnclf-fit-") as tmp:
            torch.manual_seed(self.seed)
            model = build_model(self.model, vocab_size=tokenizer.vocab_size, num_classes=len(label_names),
                                max_len=self.max_len, **model_fields)
            history = Trainer(model, config, Path(tmp), device, label_names, progress=self.verbose).fit(
                BucketBatches(tokenizer.encode(train.texts), train.labels, self.batch_size, shuffle=True,
                              seed=self.seed),
                BucketBatches(tokenizer.encode(validation.texts), validation.labels, 128, shuffle=False),
            )
        self.classes_, self.history_ = classes, history
        self.classifier_ = Classifier(model, tokenizer, label_names, device)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, one row per text, columns in ``classes_`` order."""
        check_is_fitted(self, "classifier_")
        return self.classifier_.predict_proba(_texts(X))

    def predict(self, X) -> np.ndarray:
        """The most probable label per text, as one of ``classes_``."""
        probabilities = self.predict_proba(X)
        return self.classes_[probabilities.argmax(axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        return tags

    def _model_fields(self) -> dict:
        if self.model not in MODELS:
            raise ValueError(f"unknown model {self.model!r}; choose one of {', '.join(MODELS)}")
        if self.model_config is not None and not isinstance(self.model_config, dict):
            raise ValueError(f"model_config must be a dict of model fields, got {self.model_config!r}")
        refuse_derived_fields(self.model_config or {}, _DERIVED_FROM)
        known = {f.name for f in fields(MODELS[self.model].config_class)}
        chosen = {name: getattr(self, name) for name in _SHARED_FIELDS if getattr(self, name) is not None}
        if self.d_model is not None:
            chosen |= {name: self.d_model for name in _WIDTH_FIELDS}
        return {k: v for k, v in chosen.items() if k in known} | dict(self.model_config or {})


# Where fit takes the model fields a run derives (settings.DERIVED_MODEL_FIELDS), in the estimator's own terms.
_DERIVED_FROM = {"vocab_size": "the texts (the estimator's vocab_size= caps it)", "num_classes": "the labels",
                 "max_len": "the estimator's max_len=", "pad_id": "the tokenizer"}


def _texts(X) -> list[str]:
    if getattr(X, "ndim", 1) == 2 and X.shape[1] == 1:  # one column, as a ColumnTransformer passes one through
        X = X.iloc[:, 0] if hasattr(X, "iloc") else X[:, 0]
    if getattr(X, "ndim", 1) != 1:
        raise ValueError(f"X must be one text per row, one-dimensional or one column; got shape {X.shape}")
    return check_texts(X, name="X")


def _missing(label) -> bool:
    """None, a NaN of any float type, or pandas' NA or NaT (which pandas' nullable columns hold)."""
    pandas = sys.modules.get("pandas")  # (a pandas value means pandas is loaded: no import needed)
    return (label is None or isinstance(label, (float, np.floating)) and np.isnan(label)
            or pandas is not None and (label is pandas.NA or label is pandas.NaT))
