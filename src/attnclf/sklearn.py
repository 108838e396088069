"""A scikit-learn estimator: attnclf's models behind ``fit`` / ``predict`` / ``predict_proba``.

Texts in, the original label values out, so it drops into ``Pipeline``,
``cross_val_score`` and ``GridSearchCV``. Texts in several columns (a 2-D array
or a DataFrame of a title and a body) are one text per row, its columns joined
with a newline, as ``attnclf train --text-column title --text-column body`` joins a file's:

>>> from sklearn.model_selection import cross_val_score
>>> clf = AttentionTextClassifier(epochs=3, d_model=32, layers=1)
>>> # cross_val_score(clf, texts, labels, cv=3)
>>> # clf.fit(texts, labels).predict(["not good, not good at all"])

A fitted estimator saves as a run directory (safetensors weights and JSON, never pickle), which
``attnclf.Classifier.load`` and ``attnclf predict`` / ``explain`` / ``serve`` / ``export`` read, and
``AttentionTextClassifier.load`` makes the fitted estimator again, labels and parameters included:

>>> # clf.save("runs/estimator")
>>> # AttentionTextClassifier.load("runs/estimator").predict(["not good, not good at all"])
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
import warnings
from contextlib import nullcontext
from dataclasses import fields
from pathlib import Path

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted

from .checks import check_seed, check_threads, real_number, weight, whole_number
from .classifier import Classifier
from .data.base import Splits, TextDataset
from .data.files import TEXT_JOINER
from .data.splits import split_indices
from .errors import AttnclfError, AttnclfWarning, RunDirError, first_few, shown, unknown_name
from .models import MODELS, build_model, model_name
from .models.ngrams import bucket_note, sized_buckets
from .prediction import ClassThreshold, check_texts, class_threshold, decided_classes, shaped
from .recipes import file_recipe
from .text.batching import EVAL_MAX_TOKENS, BucketBatches
from .text.cleaning import unicode_problem
from .text.tokenizer import Tokenizer, TokenizerConfig, unspaced_text_warning
from .training.device import forked_generators, resolve_device, seed_generators, torch_threads
from .training.run_data import describe_classes, shared_text_warnings, warnings_among
from .training.settings import DERIVED_MODEL_FIELDS, DataSettings, RunSettings, refuse_derived_fields
from .training.trainer import TrainConfig, Trainer, imbalance_remedies, one_class_note

# Plain constructor arguments that map onto model config fields; a model takes those it has.
# ``d_model`` is the model width, named ``embed_dim`` in the models without a Transformer encoder.
_WIDTH_FIELDS = ("d_model", "embed_dim")
_SHARED_FIELDS = ("heads", "layers", "ff_dim", "dropout")


class AttentionTextClassifier(ClassifierMixin, BaseEstimator):
    """Train one of attnclf's models (``MODELS``) on texts, the scikit-learn way.

    Architecture arguments left at None keep the defaults ``attnclf train --train-file`` builds the model with: for
    ``self-attn``, the file recipe (``recipes.FILE_SELF_ATTN``: d_model 64, ff_dim 256, dropout 0.3, sinusoidal
    positions and the naive-Bayes n-gram branch), which led the general defaults on files of a few thousand texts
    (BENCHMARKS.md, Small data); for the other models, their own. So does ``max_len`` left at None: the file recipe's
    tokens for ``self-attn`` (``recipes.FILE_SELF_ATTN_TOKENIZER``: 512; it sets no truncation, so a longer text keeps
    its head and tail, the general default), the general 256 for the others. An argument given wins, as ``--set``
    does, and the rest of the recipe stays (``d_model=128`` keeps the n-gram branch;
    ``model_config={"nb_ngram_buckets": 0}`` drops it). The branch's bigram buckets, unless ``model_config`` gives
    them, are sized to the training texts: 16 per distinct bigram, a power of two, the recipe's 2^20 at most
    (``ngrams.buckets_for``; 65,536 for 300 SST-2 sentences, 2^20 for its 6,920). A model ignores those it has no
    field for (``boe`` has no ``heads``); ``model_config`` sets any other config field and wins over them all. The
    parameters stay as given: ``get_params()["d_model"]`` and ``["max_len"]`` are None, and the fitted
    ``classifier_.model.config`` and ``classifier_.tokenizer.config`` hold what was built.
    The training arguments left out train as ``attnclf train --train-file`` does without flags, their defaults
    read from the same places: ``TrainConfig``'s (up to ``epochs`` 10, stopping once ``patience`` 3 epochs bring
    no better validation macro-F1; batch 32, AdamW at ``lr`` 1e-3 with ``weight_decay`` 0.01), ``TokenizerConfig``'s
    (``tokenizer`` "word", ``vocab_size`` 30000, ``min_frequency`` 2) and ``DataSettings.val_fraction`` (0.1).
    TrainConfig's other settings (schedule, warm-up, gradient clipping, the monitored metric) are its defaults too.
    (Until 2026-11-27 the estimator trained 5 epochs without stopping early; one saved or pickled then keeps the
    ``epochs=5, patience=0`` it recorded.)
    ``validation_fraction`` of the training texts is held out to pick the best
    epoch (``patience`` > 0 also stops early); 0 validates on the training texts.
    ``class_weight="balanced"`` weighs each text's loss inversely to its class's
    share of the training texts, as scikit-learn's classifiers do; a dict
    ``{label: weight}``, keyed by labels as y gives them, weighs those classes
    (a class it leaves out weighs 1, a key that is no class is an error).
    ``fit``'s ``sample_weight`` multiplies each text's weight, as there.
    ``classes_`` holds the label values as given (strings, ints, ...), sorted.
    ``device`` ("auto": CUDA, then MPS, then the CPU, as ``attnclf train`` picks) is where ``fit`` trains and the
    fitted model predicts.
    ``threads`` is PyTorch's thread count (and numpy's BLAS's) while ``fit``, ``predict``, ``predict_proba`` and
    ``predict_log_proba`` run, set back afterwards, as ``attnclf train --threads`` does; None leaves the process's
    setting as it is.
    ``random_state`` seeds the fit, as scikit-learn's estimators name it (so ``BaggingClassifier`` and the like give
    each member a seed of its own): a whole number (the default 0, as `attnclf train --seed`) trains the same model
    each fit; None draws a seed from numpy's global ``RandomState`` each fit, and a ``numpy.random.RandomState``
    draws one from itself, as scikit-learn's estimators built on another generator do. ``seed_`` holds the seed fit
    used: ``random_state=clf.seed_`` repeats a fit that drew one. (Before 2026-11-28 the parameter was ``seed``,
    which is now refused in one line; a folder saved or an estimator pickled then loads with its seed as
    ``random_state``.) The same seed, data and threads give the same weights on the CPU: another thread count adds
    sums in another order.
    ``threshold`` (``"pos=0.7"`` or ``("pos", 0.7)``, a class as y gives it; None: the most probable class) is an
    operating point, as `attnclf predict --threshold` applies it: ``predict`` answers that class wherever its
    probability reaches 0.7, else the most probable of the others; ``predict_proba`` is unchanged. ``fit`` checks it
    against the classes before it trains. It is the estimator's alone: `attnclf predict` on a saved folder takes its
    own ``--threshold``.
    After ``fit``, ``classifier_`` is an ``attnclf.Classifier`` (tokens,
    attention), ``history_`` the per-epoch training record, ``n_iter_`` the epochs run and ``seed_`` the seed;
    ``n_text_columns_`` and ``text_column_names_`` (a DataFrame's, else None)
    say which text columns X had, which a two-dimensional X must have again
    (both None, and not checked, for an estimator saved or pickled before they were recorded).

    >>> clf = AttentionTextClassifier(model="boe", epochs=2, d_model=16)
    >>> clf.get_params()["d_model"]
    16
    >>> AttentionTextClassifier(threshold="spam=0.9").get_params()["threshold"]  # (fit then checks "spam" is a class)
    'spam=0.9'
    >>> built = AttentionTextClassifier(d_model=128)._model_fields()  # (what fit builds, the buckets at most)
    >>> built["d_model"], built["nb_ngram_buckets"], AttentionTextClassifier()._model_fields()["d_model"]
    (128, 1048576, 64)
    """

    # Training defaults are read off the classes `attnclf train` takes its own from (a dataclass field's default is
    # its class attribute), so a change there follows here; they stay plain values, as scikit-learn's clone needs.
    def __init__(self, model: str = RunSettings.model, *, epochs: int = TrainConfig.epochs,
                 batch_size: int = TrainConfig.batch_size, lr: float = TrainConfig.lr,
                 weight_decay: float = TrainConfig.weight_decay, tokenizer: str = TokenizerConfig.kind,
                 vocab_size: int = TokenizerConfig.vocab_size, min_frequency: int = TokenizerConfig.min_frequency,
                 max_len: int | None = None, d_model: int | None = None, heads: int | None = None,
                 layers: int | None = None, ff_dim: int | None = None, dropout: float | None = None,
                 model_config: dict | None = None, validation_fraction: float = DataSettings.val_fraction,
                 patience: int = TrainConfig.patience, class_weight: str | dict | None = None,
                 random_state: int | np.random.RandomState | None = TrainConfig.seed,
                 device: str = RunSettings.device, threads: int | None = RunSettings.threads, verbose: bool = False,
                 threshold: tuple | str | None = None, **renamed):
        # A former name gets a line saying the new one, where Python would say only that it is unexpected; any other
        # unknown argument is Python's own TypeError. (**renamed is no parameter: get_params skips it.)
        if "seed" in renamed:
            raise self._seed_renamed(renamed["seed"])
        if renamed:
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                            f"{next(iter(renamed))!r}")
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
        self.class_weight = class_weight
        self.random_state = random_state
        self.device = device
        self.threads = threads
        self.verbose = verbose
        self.threshold = threshold

    def set_params(self, **params) -> "AttentionTextClassifier":
        """scikit-learn's ``set_params``, but ``seed=`` (the parameter's former name) gets the constructor's one line
        naming ``random_state``, not scikit-learn's list of every valid parameter; returns self.

        >>> AttentionTextClassifier("boe").set_params(epochs=2, random_state=7).random_state
        7
        """
        if "seed" in params:
            raise self._seed_renamed(params["seed"])
        return super().set_params(**params)

    def _seed_renamed(self, seed) -> AttnclfError:
        return AttnclfError(f"{type(self).__name__} takes random_state=, not seed= (renamed, as scikit-learn names "
                            f"it): pass random_state={shown(seed)}")

    def fit(self, X, y, sample_weight=None) -> "AttentionTextClassifier":
        """Train a fresh model on texts ``X`` with labels ``y``; returns self.

        ``sample_weight`` (one finite number of at least 0 per text, or one number for all) multiplies each text's
        loss, on top of its class's weight (``class_weight``): each step minimises its batch's weighted mean loss,
        as scikit-learn's ``MLPClassifier`` does, and ``history_``'s ``train_loss`` is that mean over the epoch.
        A text of weight 0 is left out, from the vocabulary and the validation split too, so it changes nothing,
        as if it had not been given. Validation is unweighted: its loss, accuracy and macro-F1, which choose the
        epoch kept, count every held-out text once (MLPClassifier weighs its early-stopping score; here the
        validation figures stay the ones every attnclf run records). The n-gram branch's naive-Bayes counts
        (``model_config={"nb_ngram_buckets": ...}``) count each kept text once. In a ``Pipeline``, pass
        ``clf__sample_weight=w``. A branch its bucket budget cuts (the file recipe's, at more than 4 classes) is
        warned of with an ``AttnclfWarning``, as `attnclf train` notes it; so is what `attnclf train` warns of in its
        training labels and texts (``_training_data_warnings``: a class of a single text, "Positive" beside
        "positive", validation texts among the training texts).

        >>> # AttentionTextClassifier(epochs=3).fit(texts, labels, sample_weight=[1.0, 0.5, 2.0, ...])
        """
        columns = _columns(X)  # (first: a sparse X is refused before anything reads it)
        texts = _texts(X)
        # (as `attnclf train` refuses a file's: a text it learns nothing from only biases the model to its label)
        if (blank := next((i for i, text in enumerate(texts) if not text.strip()), None)) is not None:
            raise AttnclfError(f"X[{blank}] is an empty text, nothing to learn from (a training file's is refused "
                               f"too); drop it")
        with _under_threads(self.threads):  # (a bad setting or text is an AttnclfError, a ValueError as expected)
            self._fit(texts, y, sample_weight)
        self.n_text_columns_, self.text_column_names_ = columns
        return self

    def _fit(self, texts: list[str], y, sample_weight) -> None:
        """``fit``'s work on its checked ``texts``, under its thread count."""
        classes, y_index = _classes_of(y, len(texts), type(self).__name__)
        weights = _sample_weights(sample_weight, len(texts))
        fraction = real_number(self.validation_fraction)  # (a string or None failed on the comparison's TypeError)
        if fraction is None or not 0 <= fraction < 1:
            raise AttnclfError(f"validation_fraction must be a number in [0, 1), got {shown(self.validation_fraction)}")
        seed = _seed(self.random_state)
        config = self._train_config(classes, seed)  # checked first
        model_fields = self._model_fields()  # (so are these, before the split and the tokenizer)
        tokenizer_config = self._tokenizer_config()
        label_names = [str(c) for c in classes]
        self._class_threshold(label_names)  # (a bad one is refused before any training, as --threshold is)
        # Weight 0 means absent, as in scikit-learn: such texts are dropped before anything reads them.
        by_name = config.class_weights if isinstance(config.class_weights, dict) else {}
        kept = np.ones(len(texts), dtype=bool) if weights is None else weights > 0
        kept &= ~np.isin(y_index, [label_names.index(name) for name, w in by_name.items() if w == 0])
        if not kept.any():
            raise AttnclfError("class_weight times sample_weight is 0 for every text: nothing to fit on")
        if not kept.all():
            texts, y_index = [t for t, keep in zip(texts, kept) if keep], y_index[kept]
            weights = None if weights is None else weights[kept]
        data = TextDataset(texts, y_index.tolist(), label_names)
        present = set(data.labels)  # (y gave every class a text: a class without one had them all weighted 0)
        weighted_out = [name for i, name in enumerate(label_names) if i not in present]
        fit_idx = np.arange(len(data))
        train, validation = data, data
        if fraction > 0:
            fit_idx, val_idx = split_indices(data.labels, fraction=fraction, seed=seed)
            train, validation = data.subset(fit_idx.tolist(), "train"), data.subset(val_idx.tolist(), "validation")
        # (a warning, not progress: verbose=False keeps it, as --quiet does; stacklevel: the line that called fit)
        for warning in _training_data_warnings(train, validation if fraction > 0 else None, tokenizer_config,
                                               look_alikes=isinstance(classes[0], str), weighted_out=weighted_out):
            warnings.warn(warning, AttnclfWarning, stacklevel=3)

        device = resolve_device(self.device)
        tokenizer = Tokenizer.train(train.texts, tokenizer_config)
        train_ids = tokenizer.encode(train.texts)
        if model_fields.get("nb_ngram_buckets") and "nb_ngram_buckets" not in (self.model_config or {}):
            # The recipe's count sized to these texts, as `attnclf train --train-file` sizes it
            model_fields["nb_ngram_buckets"] = sized_buckets(model_fields["nb_ngram_buckets"], train_ids)[0]
        # (as `attnclf train` notes it; stacklevel: the line that called fit)
        lifted_by = "model_config={'nb_ngram_bucket_budget': 0}"
        if note := bucket_note(model_fields, len(label_names), lifted_by=lifted_by):
            warnings.warn(note, AttnclfWarning, stacklevel=3)
        # The Trainer keeps its best weights and checkpoints on disk; the estimator keeps them in memory. Seeding
        # happens on a fork of the generators (the CPU's and the device's): the caller's own random streams go on as
        # if fit had not run.
        with forked_generators(device), tempfile.TemporaryDirectory(prefix="attnclf-fit-") as tmp:
            seed_generators(seed, device)
            model = build_model(self.model, vocab_size=tokenizer.vocab_size, num_classes=len(label_names),
                                max_len=tokenizer_config.max_len, **model_fields)
            history = Trainer(model, config, Path(tmp), device, label_names, progress=self.verbose).fit(
                BucketBatches(train_ids, train.labels, self.batch_size, shuffle=True,
                              seed=seed, weights=None if weights is None else weights[fit_idx]),
                # (validated in train's batches: bounded in padded tokens too, which 512-token texts reach)
                BucketBatches(tokenizer.encode(validation.texts), validation.labels, RunSettings.eval_batch_size,
                              shuffle=False, max_tokens=EVAL_MAX_TOKENS),
            )
        # (as `attnclf train` notes it; the estimator sets neither the sampler nor the monitor, and sample weights
        # may balance the classes already)
        spelled = {"class_weights": "class_weight='balanced'"} if weights is None else {}
        texts = "training texts (validation_fraction=0 validates on them)" if validation is data else \
            "validation texts"
        if note := one_class_note(history, config.monitor, validation.labels, label_names,
                                  imbalance_remedies(config, lambda field, value: spelled.get(field)), texts):
            warnings.warn(note, AttnclfWarning, stacklevel=3)
        self.classes_, self.history_, self.seed_ = classes, history, seed
        self.classifier_ = Classifier(model, tokenizer, label_names, device)
        self._fitted_on = {"train_examples": len(train),  # (for save; validation_fraction 0 validated on train)
                           "validation_examples": 0 if validation is data else len(validation)}

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, one row per text, columns in ``classes_`` order: float64, as scikit-learn's
        classifiers give them, each row a softmax of the logits in float64, so it sums to 1 to float64's precision.

        >>> # clf.predict_proba(["not good", "very good"])  # array([[0.9, 0.1], [0.2, 0.8]])
        """
        return torch.softmax(self._tempered_logits(X), dim=1).numpy()

    def predict_log_proba(self, X) -> np.ndarray:
        """The log of ``predict_proba``, computed from the logits (a log-softmax), so it stays finite where a
        probability rounds to 0.

        >>> # clf.predict_log_proba(["not good"])  # array([[-0.02, -3.9]])
        """
        return torch.log_softmax(self._tempered_logits(X), dim=1).numpy()

    def _tempered_logits(self, X) -> torch.Tensor:
        """The model's logits for ``X`` over the run's temperature (1 unless a temperature.json was put beside a
        saved estimator), in float64: the model computes in float32, the probabilities are taken in float64."""
        check_is_fitted(self, "classifier_")
        self._check_columns(X)
        with _under_threads(self.threads):
            logits = self.classifier_.logits(_texts(X))
        return torch.from_numpy(logits).double() / self.classifier_.temperature

    def _check_columns(self, X) -> None:
        """Refuse text columns other than fit's: joined in another order or number, they would be other texts,
        silently. One text per row (already joined, or one column) is read as it is, unless it is one of the several
        columns fit named (``df["body"]``, ``df[["body"]]``) and cannot be them joined: a text holds fewer newlines
        than joining puts in. (Joined texts may carry a column's name: pandas' ``str.cat`` names them after the
        first; a column whose every cell holds enough newlines is taken, as it cannot be told from them.)"""
        count, names = _columns(X)
        fitted, fitted_names = getattr(self, "n_text_columns_", None), getattr(self, "text_column_names_", None)
        if count == 1 and fitted_names is not None and len(fitted_names) > 1:
            column = X.iloc[:, 0] if getattr(X, "ndim", 1) == 2 and hasattr(X, "iloc") else X
            alone = getattr(column, "name", None)
            if alone is not None and str(alone) in fitted_names and any(
                    isinstance(text, str) and text.count(TEXT_JOINER) < len(fitted_names) - 1 for text in column):
                raise AttnclfError(f"X is the text column {str(alone)!r} alone, but this estimator was fitted on "
                                   f"{fitted_names}: pass them all, or each row's texts joined by a newline")
        if count == 1 or fitted is None:  # (None: fitted before the columns were recorded, on as many as it took)
            return
        if count != fitted:
            raise AttnclfError(f"X has {count} text columns, but this estimator was fitted on "
                               f"{'one text per row' if fitted == 1 else f'{fitted} text columns'}")
        if names is not None and fitted_names is not None and names != fitted_names:
            raise AttnclfError(f"X's text columns are {names}, but this estimator was fitted on {fitted_names}, in "
                               f"that order")

    def predict(self, X) -> np.ndarray:
        """The label per text, as one of ``classes_`` (y's values and dtype): the most probable, or with ``threshold``
        its class wherever that class's probability reaches it, else the most probable of the others
        (``prediction.decided_classes``, the rule of `attnclf predict --threshold`).

        >>> # clf.fit(texts, ["neg", "pos", ...]).predict(["not good", "very good"])  # array(['neg', 'pos'], ...)
        >>> # clf.set_params(threshold="pos=0.9").predict(["not good", "very good"])  # array(['neg', 'neg'], ...)
        """
        probabilities = self.predict_proba(X)
        return self.classes_[decided_classes(probabilities, self._class_threshold(self.classifier_.label_names))]

    def _class_threshold(self, label_names: list[str]) -> ClassThreshold | None:
        """``threshold`` checked against the classes named ``label_names`` (``str`` of each of ``classes_``); a pair's
        class may be given as y gives it (``(7, 0.9)`` for ``"7=0.9"``). None without one, and for an estimator
        pickled before the parameter was."""
        threshold = getattr(self, "threshold", None)
        if isinstance(threshold, (tuple, list)) and len(threshold) == 2 and not isinstance(threshold[0], str):
            threshold = (str(threshold[0]), threshold[1])
        return class_threshold(threshold, label_names)

    @property
    def n_iter_(self) -> int:
        """The epochs ``fit`` ran, as scikit-learn's iterative estimators (``MLPClassifier``) report theirs: fewer
        than ``epochs`` where ``patience`` stopped it early. The weights kept are the best validated epoch's, which
        ``history_`` shows. Read off ``history_``, so a loaded or unpickled estimator has it too.

        >>> # AttentionTextClassifier(epochs=10).fit(texts, labels).n_iter_  # 7: patience 3 ended it
        """
        check_is_fitted(self, "history_")  # (unfitted: scikit-learn's NotFittedError, not a word on history_)
        return len(self.history_)

    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write the fitted estimator as a run directory (safetensors weights and JSON, never pickle) into ``path``,
        which ``attnclf.Classifier.load``, ``attnclf predict``, ``explain``, ``serve`` and ``export`` read, and
        ``AttentionTextClassifier.load`` makes an estimator of again. Returns ``path``.

        The folder appears whole or not at all. ``overwrite`` replaces an earlier save there; any other folder that
        is not empty (a trained run, a user's files), the current folder and a link are refused. Its config.json
        records the estimator's parameters (a ``class_weight`` dict as [label, weight] pairs, which keep the labels'
        types) and ``classes_``, which must be strings, whole numbers or booleans, and the model fit built: its name
        and settings (not what ``model`` set since, or the file recipe today, would build).
        It records no texts: commands that need the run's own data (`attnclf calibrate`, `refit`, `report`,
        `evaluate` without --test-file, `train --resume`) refuse it. A folder another attnclf process is writing into
        (``rundir.folder_lock``: an export into its onnx/, say) is refused in one line naming the process.

        >>> # AttentionTextClassifier("boe").fit(texts, labels).save("runs/estimator")
        """
        from .rundir import (ESTIMATOR, atomic_save_tensors, atomic_write_json, prepare_output_dir, publish_folder,
                             refuse_if_held, write_jsonl)
        from .training.run import config_record

        check_is_fitted(self, "classifier_")
        classes = _json_labels(self.classes_)
        # (JSON holds no generator: a RandomState is recorded as the seed it gave, which refits the same model)
        drawn = {"random_state": self.seed_} if isinstance(self.random_state, np.random.RandomState) else {}
        params = _json_params(self.get_params() | {"class_weight": _class_weight_json(self.class_weight)} | drawn)
        target = Path(os.path.abspath(path))  # ("." has no name to put a temporary folder beside)
        # (It writes into a folder of its own and swaps it in whole, so it takes no lock: it would be swapped out.)
        refuse_if_held(path, instead="save into another folder")
        _check_save_target(Path(path), target, overwrite)
        prepare_output_dir(target.parent)
        model = self.classifier_.model
        built_name, built_fields = self._built_model()
        settings = RunSettings(
            # A DataFrame's text columns are what `attnclf predict --file` reads from a file, as a trained run's are.
            data=DataSettings(val_fraction=params["validation_fraction"],
                              text_column=getattr(self, "text_column_names_", None) or "text"),
            tokenizer=self.classifier_.tokenizer.config,
            model=built_name, model_config=_json_params(built_fields),
            train=self._train_config(self.classes_, self.seed_),
            output=str(path), device=params["device"], threads=check_threads(params["threads"]), report=False)
        record = config_record(settings, model, {**getattr(self, "_fitted_on", {}), "test_examples": 0}, {
            "trained_by": ESTIMATOR,
            "estimator": {"params": params, "classes": classes, "classes_dtype": self.classes_.dtype.str,
                          "text_columns": {"count": getattr(self, "n_text_columns_", None),
                                           "names": getattr(self, "text_column_names_", None)}}})
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
        try:
            atomic_write_json(tmp / "config.json", record)
            atomic_write_json(tmp / "labels.json", self.classifier_.label_names)
            self.classifier_.tokenizer.save(tmp / "tokenizer.json")
            atomic_save_tensors(tmp / "model.safetensors", model.state_dict())
            write_jsonl(tmp / "history.jsonl", self.history_)
            atomic_write_json(tmp / "metrics.json", {
                "split": None, "train_seconds": round(sum(h["seconds"] for h in self.history_), 3),
                "parameters": model.num_parameters(),
                "note": "fitted by the scikit-learn estimator, which recorded no test texts; score it with "
                        "`attnclf evaluate RUN --test-file FILE`"})
            publish_folder(tmp, target, replace=overwrite)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if (threshold := self._class_threshold(self.classifier_.label_names)) is not None:
            # (documented above, and easy to miss: the folder's other readers would answer otherwise, silently)
            point = shlex.quote(f"{threshold.label}={threshold.probability:g}")
            warnings.warn(f"threshold {point} is this estimator's: AttentionTextClassifier.load keeps it, but "
                          f"`attnclf predict`, `serve` and Classifier.load of {path} answer the most probable class "
                          f"unless told it (--threshold {point})", AttnclfWarning, stacklevel=2)
        return Path(path)

    @classmethod
    def load(cls, path: str | Path, device: str | None = None) -> "AttentionTextClassifier":
        """The fitted estimator ``save`` wrote into ``path``: its parameters, ``classes_`` (their values and dtype),
        ``classifier_`` and ``history_``. ``device`` overrides the one it was fitted with.

        >>> # AttentionTextClassifier.load("runs/estimator").predict(["not good at all"])
        """
        from .rundir import ESTIMATOR, read_history, read_run_config

        config, config_path = read_run_config(path), Path(path) / "config.json"
        if config.get("trained_by") != ESTIMATOR:
            raise RunDirError(f"{path} was trained by `attnclf train`, not saved by AttentionTextClassifier.save: load "
                              f"it with attnclf.Classifier.load")
        saved = config.get("estimator")
        if not (isinstance(saved, dict) and isinstance(saved.get("params"), dict) and
                isinstance(saved.get("classes"), list) and isinstance(saved.get("classes_dtype"), str)):
            raise RunDirError(f"{config_path}: estimator is not a record of params, classes and classes_dtype (was the "
                              f"file edited?)")
        params = saved["params"]
        if "seed" in params and "random_state" not in params:  # (saved before the parameter took scikit-learn's name)
            params["random_state"] = params.pop("seed")
        unknown = sorted(set(params) - set(cls().get_params()))
        if unknown:
            raise RunDirError(f"{config_path}: estimator.params has {unknown[0]!r}, which this AttentionTextClassifier "
                              f"does not take")
        classes = _saved_classes(saved, config_path)
        try:  # (a dict of class weights is saved as [label, weight] pairs, which keep the labels' types)
            params["class_weight"] = _class_weight_from_json(params.get("class_weight"))
        except (TypeError, ValueError):
            raise RunDirError(f"{config_path}: estimator.params.class_weight is not None, 'balanced' or a list of "
                              f"[label, weight] pairs (was the file edited?)") from None
        estimator = cls(**params)
        if device is not None:
            estimator.device = device
        classifier = Classifier.load(path, device=estimator.device)
        if [str(c) for c in classes] != classifier.label_names:
            raise RunDirError(f"{config_path}: estimator.classes do not match labels.json")
        estimator.classes_, estimator.classifier_ = classes, classifier
        estimator.n_text_columns_, estimator.text_column_names_ = _saved_text_columns(saved, config_path)
        estimator.history_ = read_history(path, needs=["seconds"])  # (save sums them)
        try:  # (the seed fit used, which the run's training settings record, whatever random_state drew it)
            estimator.seed_ = check_seed(config["settings"]["train"].get("seed"), "settings.train.seed")
        except AttnclfError as exc:
            raise RunDirError(f"{config_path}: {exc} (was the file edited?)") from None
        data = config.get("data") if isinstance(config.get("data"), dict) else {}
        estimator._fitted_on = {key: data[key] for key in ("train_examples", "validation_examples") if key in data}
        return estimator

    def _train_config(self, classes: np.ndarray, seed: int) -> TrainConfig:
        """The Trainer's settings, for labels ``classes`` (which a dict of class weights is keyed by) and the seed
        ``random_state`` gave (``_seed``). No checkpoint within an epoch: the fit's folder is a temporary one."""
        return TrainConfig(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, weight_decay=self.weight_decay,
                           patience=self.patience, class_weights=_class_weights_by_name(self.class_weight, classes),
                           seed=seed, checkpoint_minutes=0)

    def __setstate__(self, state: dict) -> None:
        if "seed" in state:  # (pickled before the parameter took scikit-learn's name: the same seed, renamed)
            state = dict(state)
            state["random_state"] = state.pop("seed")
            if "classifier_" in state:
                state.setdefault("seed_", state["random_state"])
        state = {"threshold": None, **state}  # (pickled before the parameter was: get_params and clone read it)
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        return tags

    def _model_fields(self) -> dict:
        if self.model not in MODELS:
            raise AttnclfError(unknown_name("model", self.model, MODELS))
        if self.model_config is not None and not isinstance(self.model_config, dict):
            raise AttnclfError(f"model_config must be a dict of model fields, got {shown(self.model_config)}")
        refuse_derived_fields(self.model_config or {}, _DERIVED_FROM)
        known = {f.name for f in fields(MODELS[self.model].config_class)}
        # Where `attnclf train --train-file` starts the same model (the estimator fits single-label only): a self-attn
        # from recipes.FILE_SELF_ATTN, which led the general defaults on files of a few thousand texts (BENCHMARKS.md).
        chosen = dict(file_recipe(self.model).get("model_config", {}))
        chosen |= {name: getattr(self, name) for name in _SHARED_FIELDS if getattr(self, name) is not None}
        if self.d_model is not None:
            chosen |= {name: self.d_model for name in _WIDTH_FIELDS}
        return {k: v for k, v in chosen.items() if k in known} | dict(self.model_config or {})

    def _built_model(self) -> tuple[str, dict]:
        """The model fit built, whatever ``set_params(model=...)`` or the file recipe has made of the estimator's
        since: its name in ``MODELS`` (by its class) and the fields of its config that differ from the config's
        defaults, less the derived ones (the model those build is the same), read off the model itself, so a
        fitted, loaded or unpickled estimator records it alike."""
        model = self.classifier_.model
        return model_name(model), {f.name: getattr(model.config, f.name) for f in fields(model.config)
                                   if f.name not in DERIVED_MODEL_FIELDS and getattr(model.config, f.name) != f.default}

    def _tokenizer_config(self) -> TokenizerConfig:
        """How fit reads texts: as `attnclf train --train-file` does for this model (a self-attn: the file recipe's
        tokens), then the estimator's own arguments, ``max_len`` where given."""
        given = {"kind": self.tokenizer, "vocab_size": self.vocab_size, "min_frequency": self.min_frequency}
        if self.max_len is not None:
            given["max_len"] = self.max_len
        return TokenizerConfig(**file_recipe(self.model).get("tokenizer", {}) | given,
                               named=lambda field: "tokenizer" if field == "kind" else field)  # (as the parameters)


# Where fit takes the model fields a run derives (settings.DERIVED_MODEL_FIELDS), in the estimator's own terms.
_DERIVED_FROM = {"vocab_size": "the texts (the estimator's vocab_size= caps it)", "num_classes": "the labels",
                 "max_len": "the estimator's max_len=", "pad_id": "the tokenizer"}


def _training_data_warnings(train: TextDataset, validation: TextDataset | None, tokenizer_config: TokenizerConfig,
                            look_alikes: bool, weighted_out: list[str]) -> list[str]:
    """What `attnclf train` warns of in its training data, in its words, less its "warning: ", where it applies to a
    fit on ``train``, held out ``validation`` (None: validated on ``train``, so sharing texts by design) and read as
    ``tokenizer_config`` says: its labels (``describe_classes``: a class of one text, "Positive" beside "positive";
    ``look_alikes=False`` for labels that were numbers, which ``str`` writes one way; none for ``weighted_out``,
    classes of no text but those weight 0 dropped, lacking training texts), validation texts among the training
    texts, and texts the word tokenizer reads a clause at a time. (Not train's others: the estimator has no
    test split, no sampler, no social_media setting, and no command to compare models with.)

    >>> _training_data_warnings(TextDataset(["good", "fine", "bad", "poor"], [2, 2, 1, 1], ["Pos", "neg", "pos"]),
    ...                         None, TokenizerConfig(), look_alikes=True, weighted_out=[])[-1]
    "classes 'Pos' and 'pos' differ only in case or spaces; make them one label in the data if they mean one class"
    """
    described = describe_classes(train, validation=train if validation is None else validation,
                                 look_alikes=look_alikes, left_out=weighted_out,
                                 held_out_by="a larger validation_fraction")
    # (without validation texts too: a text labelled both ways is warned of either way)
    described += shared_text_warnings(Splits(train=train, validation=validation), tokenizer_config.cleaning,
                                      flattered="validation scores and early stopping")
    unspaced = unspaced_text_warning(train.texts, tokenizer_config, bpe_by="tokenizer='bpe'",
                                     vocab_size_by="vocab_size")
    return warnings_among(described + ([unspaced] if unspaced else []))


def _classes_of(y, count: int, estimator: str) -> tuple[np.ndarray, np.ndarray]:
    """The classes of ``y``, one label per each of ``count`` texts, sorted and in y's own dtype, and each text's index
    among them; anything but single labels of one type, at least two classes of them, is a one-line error naming
    ``estimator``'s y.

    >>> classes, index = _classes_of(["spam", "ham", "spam"], 3, "AttentionTextClassifier")
    >>> classes.tolist(), index.tolist()
    (['ham', 'spam'], [1, 0, 1])
    """
    if y is None:
        raise AttnclfError(f"{estimator} requires y to be passed, but the target y is None")
    y = shaped(y)
    scalar = not hasattr(y, "__iter__") or getattr(y, "ndim", 1) == 0  # (np.array(3) has __iter__, and fails it)
    if scalar or isinstance(y, (str, bytes, dict, set, frozenset)):
        raise AttnclfError(f"y must be a sequence of labels, one per text, not {type(y).__name__}")
    if getattr(y, "ndim", 1) == 2 and y.shape[1] == 1:  # (a column, not label sets of one)
        raise AttnclfError(f"y must be one-dimensional, one label per text; got shape {y.shape}: pass y.ravel() "
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
        raise AttnclfError(f"y holds a set of labels per text ({shown(label_set)}); this estimator is single-label "
                           f"(`attnclf train --multi-label` trains label sets)")
    # numpy would turn 1 into "1" (True into "True") and classes_ would not be y's
    kinds: dict[str, object] = {}  # the first label of each type, strings first
    for v in values:
        if not _missing(v):
            kinds.setdefault("strings" if isinstance(v, str) else
                             "booleans" if isinstance(v, (bool, np.bool_)) else "numbers", v)
    if len(kinds) > 1:
        mixed = sorted(kinds, key=["strings", "numbers", "booleans"].index)
        raise AttnclfError(f"y mixes {' and '.join(mixed)} ({' and '.join(shown(kinds[k]) for k in mixed)}); give "
                           f"every label as one type")
    for i, label in enumerate(values):  # (before numpy turns a NaN among strings into the string "nan")
        if _missing(label):
            raise AttnclfError(f"y[{i}] is {label!r}: every text needs a label")
    y = given if given is not None else np.asarray(values)
    if y.ndim != 1 or len(y) != count:
        raise AttnclfError(f"y must hold one label per text: {count} texts, y of shape {y.shape}")
    # (as scikit-learn's classifiers: 300 real values are not 300 classes; only floats can be, bytes cannot be asked)
    if y.dtype.kind == "f" and type_of_target(y) == "continuous":
        raise AttnclfError("Unknown label type: continuous; y must hold class labels, not real numbers "
                           "(a regression target)")
    classes, y_index = np.unique(y, return_inverse=True)
    if len(classes) == 0:
        raise AttnclfError("no texts to fit on")
    if len(classes) < 2:
        raise AttnclfError(f"y has only one class ({shown(classes.tolist()[0])}); a classifier needs two at least")
    return classes, y_index


def _saved_classes(saved: dict, config_path: Path) -> np.ndarray:
    """The ``classes_`` a saved estimator's record (config.json's ``estimator``, read from ``config_path``) holds, in
    their recorded dtype; one line naming the file unless they are labels ``save`` writes.

    >>> _saved_classes({"classes": [3, 7], "classes_dtype": "<i8"}, Path("runs/e/config.json"))
    array([3, 7])
    >>> _saved_classes({"classes": [3, 7], "classes_dtype": "<M8[s]"}, Path("runs/e/config.json"))
    Traceback (most recent call last):
    attnclf.errors.RunDirError: runs/e/config.json: estimator.classes are not labels (datetime64[s] is not a dtype \
save writes)
    """
    try:
        dtype = np.dtype(saved["classes_dtype"])
        if dtype.kind not in "biufOU" or dtype.kind in "biuf" and dtype.itemsize > 8:  # (save writes no other)
            raise ValueError(f"{dtype} is not a dtype save writes")
        # A string dtype as wide as its longest label: an edited "<U50000000" would make every prediction huge.
        classes = np.array(saved["classes"], dtype=None if dtype.kind == "U" else dtype)
    except (TypeError, ValueError) as exc:
        raise RunDirError(f"{config_path}: estimator.classes are not labels ({exc})") from None
    if classes.ndim != 1:
        raise RunDirError(f"{config_path}: estimator.classes is not a list of labels")
    return classes


def _saved_text_columns(saved: dict, config_path: Path) -> tuple[int | None, list[str] | None]:
    """How many text columns a saved estimator was fitted on and their names (config.json's
    ``estimator.text_columns``, read from ``config_path``): both None where it was saved before they were recorded,
    and not checked then, as they were not; one line naming the file unless they are a count and its names.

    >>> _saved_text_columns({"text_columns": {"count": 2, "names": ["title", "body"]}}, Path("config.json"))
    (2, ['title', 'body'])
    >>> _saved_text_columns({}, Path("config.json"))
    (None, None)
    """
    unrecorded = {"count": None, "names": None}
    columns = saved.get("text_columns", unrecorded)
    count, names = (columns.get("count"), columns.get("names")) if isinstance(columns, dict) else (None, None)
    if not (columns == unrecorded or type(count) is int and count >= 1 and (
            names is None or isinstance(names, list) and len(names) == count and
            all(isinstance(n, str) for n in names))):
        raise RunDirError(f"{config_path}: estimator.text_columns is not a count of columns and their names (was the "
                          f"file edited?)")
    return count, names


def _seed(random_state) -> int:
    """The seed a fit trains from, by scikit-learn's rules for ``random_state``: a whole number is the seed itself;
    None draws one from numpy's global ``RandomState`` (``np.random.seed`` repeats it), and a
    ``numpy.random.RandomState`` draws one from itself, as scikit-learn's estimators built on another generator do.
    Anything else, or a number numpy's generators cannot take, is a one-line error.

    >>> _seed(7), _seed(np.random.RandomState(0))
    (7, 2357136044)
    """
    if random_state is None or isinstance(random_state, np.random.RandomState):
        return int(check_random_state(random_state).randint(2 ** 32, dtype=np.int64))
    if whole_number(random_state) is None:
        raise AttnclfError(f"random_state must be None, a whole number or a numpy.random.RandomState, got "
                           f"{shown(random_state)}")
    return check_seed(random_state, "random_state")


def _under_threads(threads):
    """``torch_threads(threads)`` (a bad count is a one-line ValueError), or nothing at all for None: the caller's
    own setting stands, and predict_proba in a loop does not ask threadpoolctl about the BLAS libraries each time.

    >>> with _under_threads(1):
    ...     torch.get_num_threads()
    1
    """
    return nullcontext() if threads is None else torch_threads(threads)


def _columns(X) -> tuple[int, list[str] | None]:
    """How many text columns ``X`` holds (1: one text per row) and, for a DataFrame of several, their names.

    >>> _columns(["a text"]), _columns(np.array([["a title", "a body"]]))
    ((1, None), (2, None))
    """
    sparse = sys.modules.get("scipy.sparse")  # (a sparse X means scipy is loaded: no import needed)
    if sparse is not None and sparse.issparse(X):  # (numpy would make one object of it, and fail far from here)
        raise AttnclfError(f"X is a sparse {type(X).__name__}, a vectorizer's output? This estimator tokenizes "
                           f"texts itself: pass the texts, not their features")
    if getattr(X, "ndim", 1) != 2 or X.shape[1] == 1:
        return 1, None
    return X.shape[1], [str(name) for name in X.columns] if hasattr(X, "columns") else None


def _texts(X) -> list[str]:
    if getattr(X, "ndim", 1) == 2 and X.shape[1] == 1:  # one column, as a ColumnTransformer passes one through
        X = X.iloc[:, 0] if hasattr(X, "iloc") else X[:, 0]
    if getattr(X, "ndim", 1) == 2 and X.shape[1] > 1:
        return _joined_columns(X)
    if getattr(X, "ndim", 1) > 1:  # (a 0-dimensional one is one text: check_texts says so, "got shape ()" did not)
        raise AttnclfError(f"X must be one text per row, one-dimensional or text columns; got shape {X.shape}")
    return check_texts(X, name="X")


def _joined_columns(X) -> list[str]:
    """Each row's text columns joined with a newline, in column order; a missing cell (None, NaN: a title left
    out) adds an empty string, as a data file's does, and any other non-text cell is refused.

    >>> _joined_columns(np.array([["Rain due", "Showers all day."], [None, "Sun."]], dtype=object))
    ['Rain due\\nShowers all day.', '\\nSun.']
    """
    rows = X.to_numpy(dtype=object) if hasattr(X, "to_numpy") else np.asarray(X, dtype=object)
    for (i, j), cell in np.ndenumerate(rows):
        if not isinstance(cell, str) and not _missing(cell):
            raise AttnclfError(f"X[{i}, {j}] is {type(cell).__name__}, not a string")
        if isinstance(cell, str) and (problem := unicode_problem(cell)):  # (its cell and place, not the joined row's)
            raise AttnclfError(f"X[{i}, {j}] is {problem}")
    return check_texts([TEXT_JOINER.join("" if _missing(cell) else cell for cell in row) for row in rows], name="X")


def _sample_weights(sample_weight, count: int) -> np.ndarray | None:
    """``sample_weight`` as float64: one finite number of at least 0 per text of ``count``, not all 0 (one number:
    every text weighs it, as scikit-learn reads it); None stays None. Anything else is a one-line error naming the
    first weight that is wrong.

    >>> _sample_weights([1, 0.5, 0], 3).tolist()
    [1.0, 0.5, 0.0]
    >>> _sample_weights([1, -2], 2)
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: sample_weight[1] must be a finite number of at least 0, got -2
    """
    if sample_weight is None:
        return None
    sample_weight = shaped(sample_weight)
    if real_number(sample_weight) is not None:
        sample_weight = [sample_weight] * count
    if isinstance(sample_weight, (str, bytes, dict, set, frozenset)) or not hasattr(sample_weight, "__len__"):
        raise AttnclfError(f"sample_weight must be a sequence of numbers, one per text, not "
                           f"{type(sample_weight).__name__}")
    # (a list as objects: numpy would read [1, True] as integers, and the True must be refused, as epochs=True is)
    values = np.asarray(sample_weight, dtype=object) if isinstance(sample_weight, (list, tuple)) else \
        np.asarray(sample_weight.to_numpy() if hasattr(sample_weight, "to_numpy") else sample_weight)
    if values.shape != (count,):
        raise AttnclfError(f"sample_weight must hold one weight per text: {count} texts, sample_weight of shape "
                           f"{values.shape}")
    if values.dtype.kind not in "iuf":  # (a list, objects, booleans: each one looked at, so the first bad is named)
        for i, value in enumerate(values.tolist()):
            weight(value, f"sample_weight[{i}]")
        values = values.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
    if len(bad):
        weight(values[bad[0]].item(), f"sample_weight[{bad[0]}]")
    if not values.any():
        raise AttnclfError("sample_weight is 0 for every text: nothing to fit on")
    return values.astype(np.float64)


def _class_weights_by_name(class_weight, classes: np.ndarray) -> str | dict[str, float]:
    """``class_weight`` as ``TrainConfig.class_weights`` takes it: "none", "balanced", or a dict keyed by label name
    from one keyed by the label values y gives, matched as scikit-learn matches them (``3`` is the class 3, ``"3"``
    is not); a key that is no class, or a weight that is not a finite number of at least 0, is a one-line error.

    >>> _class_weights_by_name({"spam": 3, "ham": 0.5}, np.array(["ham", "spam"]))
    {'spam': 3.0, 'ham': 0.5}
    >>> _class_weights_by_name({np.int64(7): 2}, np.array([3, 7]))
    {'7': 2.0}
    """
    if class_weight is None:
        return "none"
    if isinstance(class_weight, str) and class_weight == "balanced":
        return class_weight
    if not isinstance(class_weight, dict):
        raise AttnclfError(f"class_weight must be None, 'balanced' or a dict {{label: weight}}, got "
                           f"{shown(class_weight)}")
    index = {label: i for i, label in enumerate(classes.tolist())}
    by_name = {}
    for label, value in class_weight.items():
        label = label.item() if isinstance(label, np.generic) else label
        if label not in index:
            raise AttnclfError(f"class_weight has {shown(label)}, which is not a class of y (its classes: "
                               f"{first_few(classes.tolist(), most=10)})")
        by_name[str(classes[index[label]])] = weight(value, f"class_weight[{shown(label)}]")
    return by_name


def _class_weight_json(class_weight):
    """``class_weight`` as JSON keeps it: a dict as a list of [label, weight] pairs, since JSON's keys are strings
    and the class 3 would come back as "3"; anything else as it is.

    >>> _class_weight_json({np.int64(3): 2.5, "b": 1})
    [[3, 2.5], ['b', 1]]
    """
    if not isinstance(class_weight, dict):
        return class_weight
    return [[value.item() if isinstance(value, np.generic) else value for value in pair]
            for pair in class_weight.items()]


def _class_weight_from_json(saved):
    """The ``class_weight`` ``_class_weight_json`` wrote; a TypeError or ValueError if it is not one it writes.

    >>> _class_weight_from_json([[3, 2.5], ["b", 1]])
    {3: 2.5, 'b': 1}
    """
    if not isinstance(saved, list):
        return saved
    if not all(isinstance(pair, list) and len(pair) == 2 for pair in saved):
        raise ValueError("not a list of pairs")
    return {label: value for label, value in saved}  # (a list as a label is a TypeError: unhashable)


def _check_save_target(given: Path, target: Path, overwrite: bool) -> None:
    """Refuse, in one line, to save where it could cost anything: over a file or a link, into the current folder
    or one that holds it, over a folder an interrupted save left set aside, and over a folder that holds anything
    but an earlier save (``overwrite`` replaces that, and only that)."""
    from .rundir import ENSEMBLE_FILE, ESTIMATOR, member_folders, read_json

    if given.is_symlink():
        raise AttnclfError(f"{given} is a symbolic link; save into a folder of its own")
    if target.is_file():
        raise AttnclfError(f"{given} is a file; save into a folder")
    here = Path.cwd().resolve()
    if target.resolve() == here or target.resolve() in here.parents:  # (replacing it would pull the floor away)
        raise AttnclfError(f"{given} is the current folder or holds it; save into a folder of its own")
    for aside in target.parent.glob(f".{target.name}.*.replaced"):  # publish_folder's, when a save stopped midway
        if (aside / "old").exists():
            raise AttnclfError(f"an interrupted save left the earlier {given} in {aside / 'old'}; move it back (or "
                               f"delete it), then save again")
    if not target.is_dir() or not any(target.iterdir()):
        return
    saved = read_json(target / "config.json") if (target / "config.json").is_file() else None
    if isinstance(saved, dict) and saved.get("trained_by") == ESTIMATOR:
        if not overwrite:
            raise AttnclfError(f"{given} holds a fitted estimator; pass overwrite=True to replace it, or save into "
                               f"another folder")
        return
    what = ("a run trained by `attnclf train`" if saved is not None else
            "a `train --seeds` ensemble" if (target / ENSEMBLE_FILE).is_file() or member_folders(target) else
            "other files")
    raise AttnclfError(f"{given} holds {what}; save into another folder (overwrite replaces only an earlier save)")


def _json_labels(classes: np.ndarray) -> list:
    """``classes`` as JSON values that read back as the same labels (strings, whole numbers, booleans); others are
    a one-line error."""
    if classes.dtype.kind not in "biufUO":  # (bytes; datetime64 labels would list as integers)
        raise AttnclfError(f"cannot save classes_ as JSON: {classes.dtype} labels would not read back as themselves "
                           f"(strings, whole numbers and booleans do); keep this estimator with pickle or joblib "
                           f"instead")
    values = [value.item() if isinstance(value, np.generic) else value for value in classes.tolist()]
    for value in values:
        exact = isinstance(value, (bool, int)) or isinstance(value, float) and value.is_integer() or \
            isinstance(value, str) and unicode_problem(value) is None
        if not exact:
            raise AttnclfError(f"cannot save classes_ as JSON: the label {value!r} ({classes.dtype} labels) would not "
                               f"read back as itself (strings, whole numbers and booleans do); keep this estimator "
                               f"with pickle or joblib instead")
    return values


def _json_params(params: dict) -> dict:
    """``params`` with numpy numbers as Python ones (parameter grids hand them out), as JSON holds them; a value
    JSON cannot hold is a one-line error."""
    plain = {name: _json_params(value) if isinstance(value, dict) else
             value.item() if isinstance(value, np.generic) else value for name, value in params.items()}
    try:
        json.dumps(plain, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise AttnclfError(f"cannot save the estimator's parameters as JSON ({exc}); keep it with pickle or joblib "
                           f"instead") from None
    return plain


def _missing(label) -> bool:
    """None, a NaN of any float type, or pandas' NA or NaT (which pandas' nullable columns hold)."""
    pandas = sys.modules.get("pandas")  # (a pandas value means pandas is loaded: no import needed)
    return (label is None or isinstance(label, (float, np.floating)) and np.isnan(label)
            or pandas is not None and (label is pandas.NA or label is pandas.NaT))
