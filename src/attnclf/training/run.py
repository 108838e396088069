"""A whole training run: data -> tokenizer -> model -> fit -> test metrics -> run directory."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import __version__
from ..data.base import WITHHELD, Splits, TextDataset
from ..data.multilabel import DEFAULT_LABEL_DELIMITER, multi_hot
from ..data.registry import candidate_dirs, folder_holding, load_splits, sources, unlabelled_texts
from ..data.splits import check_hold_out, split_indices, train_validation_split
from ..errors import AttnclfError, DataError, RunDirError
from ..evaluation.metrics import compute_metrics, pick_examples
from ..evaluation.multilabel import multilabel_metrics, tune_thresholds
from ..evaluation.predict import predict_probabilities
from ..models import MODELS, build_model, config_for
from ..models.windows import window_config, windowed
from ..recipes import recipe_for
from ..rundir import (ENSEMBLE_FILE, FORMAT_VERSION, THRESHOLDS_FILE, atomic_write_bytes, atomic_write_json,
                      check_run_dir, first_missing_folder, prepare_output_dir, read_json, read_jsonl,
                      remove_empty_folders)
from ..text.batching import EVAL_MAX_TOKENS, BucketBatches
from ..text.cache import CachedDataset
from ..text.cleaning import CleaningConfig
from ..text.tokenizer import Tokenizer, TokenizerConfig
from ..text.vectors import WordVectors, count_vectors
from ..text.windows import WindowConfig, text_batches
from .device import torch_threads
from .distributed import init_distributed
from .trainer import TrainConfig, Trainer, best_epoch


@dataclass
class DataSettings:
    dataset: str | None = None  # a registered source, or None for user files
    data_dir: str | None = None
    download: bool = False  # fetch a missing public dataset (users only; tests never download)
    train_file: str | None = None
    test_file: str | None = None
    validation_file: str | None = None  # validate on this file's texts, instead of a share carved from train_file
    text_column: str = "text"
    label_column: str = "label"
    val_fraction: float = 0.1
    # Seeds the validation split and any --max-train-examples sample; None: the run's seed. Runs that share
    # it validate on the same texts, so their ensemble can be validated (and chosen) there too.
    split_seed: int | None = None
    # "random" (stratified, seeded, grouped when the data has groups) or "latest": the latest texts of each class
    # by the order the data records, for data whose test split was written later than its training split.
    hold_out: str = "random"
    max_train_examples: int | None = None  # a stratified sample, for quick runs
    max_test_examples: int | None = None  # a stratified sample, the same for every seed
    multi_label: bool = False  # a set of labels per text (see data.multilabel); implied by a multi-label dataset
    label_delimiter: str = DEFAULT_LABEL_DELIMITER  # separates a CSV/TSV cell's labels when multi_label
    token_cache: bool = False  # train from memory-mapped token caches (text/cache.py), built once, reused
    token_cache_dir: str | None = None  # default: $ATTNCLF_CACHE_DIR, else ~/.cache/attnclf/tokens
    # Train on every labelled training text, the validation ones included, and validate on none: a refit of a
    # validated run (``refit_settings``), whose epochs were chosen where this run can no longer look.
    refit: bool = False
    # Where the named dataset was found when the run trained (through $ATTNCLF_DATA_DIR, the cache or data_dir),
    # searched after them: report, export and refit find it from a shell without them. A record, not a setting:
    # comparisons of runs leave it out.
    found_in: str | None = None

    def __post_init__(self):
        source = sources().get(self.dataset) if self.dataset else None
        if source is not None and source.multi_label:
            self.multi_label = True  # nothing else could train on it; files need the flag: their cells could be either

    def check_sources(self) -> None:
        """Refuse files beside a named dataset, which brings its own splits (new runs only: runs trained before
        this check may record a file that went unread)."""
        files = [flag for flag, path in (("--train-file", self.train_file), ("--validation-file", self.validation_file),
                                         ("--test-file", self.test_file)) if path]
        if self.dataset and files:
            raise AttnclfError(f"--dataset {self.dataset} brings its own splits; {files[0]} is for your own data "
                               f"(--train-file with optional --validation-file and --test-file): give one or the other")
        if self.validation_file and not self.train_file:
            raise AttnclfError("--validation-file validates a --train-file run; give the training file too")
        if self.data_dir and not Path(self.data_dir).expanduser().is_dir():  # (else the default places are searched)
            raise AttnclfError(f"--data-dir {self.data_dir}: no such folder")

    def anchored(self) -> DataSettings:
        """These settings with absolute paths, as config.json records them: evaluate, refit and resume may run
        from another folder than the one ``train`` ran in (and runs are compared so, wherever they were typed).

        >>> DataSettings(train_file="/data/train.csv").anchored().train_file
        '/data/train.csv'
        """
        return replace(self, **{name: _absolute(getattr(self, name)) for name in
                                ("data_dir", "train_file", "validation_file", "test_file", "token_cache_dir")})

    def located(self) -> DataSettings:
        """These settings recording the folder their named dataset is read from now (``found_in``), as
        config.json keeps them; comparisons of runs leave it out, so only the run's record looks it up."""
        found = folder_holding(self.dataset, self.data_dir, self.found_in) if self.dataset else None
        return self if found is None else replace(self, found_in=str(found.absolute()))

    def describe(self) -> str:
        return self.dataset or Path(self.train_file or "?").name

    def describe_held_out(self, trained_labels: list[str], labels: list[str]) -> str:
        """What to name when validation texts changed: the training data when its classes did (``labels`` now
        against the run's ``trained_labels``: they number every label), else where the validation texts come from.
        """
        return Path(self.validation_file).name if self.validation_file and labels == trained_labels else \
            self.describe()

    def data_seed(self, run_seed: int) -> int:
        """The seed that chooses which texts train and which validate."""
        return run_seed if self.split_seed is None else self.split_seed


COUNT_EMBEDDINGS = "count"


@dataclass
class RunSettings:
    data: DataSettings = field(default_factory=DataSettings)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    windows: WindowConfig | None = None  # read long texts as overlapping windows of max_len tokens
    model: str = "self-attn"
    model_config: dict = field(default_factory=dict)  # overrides of the model's config defaults
    train: TrainConfig = field(default_factory=TrainConfig)
    output: str = "runs/latest"
    device: str = "auto"
    threads: int | None = None  # PyTorch intra-op threads; None: one per core
    eval_batch_size: int = 128
    report: bool = True  # write report.html and plots/ when training ends
    # Word vectors (word2vec text) the token embedding starts from; "count": PPMI vectors counted first
    # from the training texts and the dataset's unlabelled ones (text/vectors.py).
    embeddings: str | None = None
    # Their entries' standard deviation once copied in (WordVectors.initialise). Rows this large barely
    # move under Adam's steps, so the vectors stay close to frozen: on SST-2 sentences validation rose
    # from 83.3% (0.5) through 84.1% (1), 84.4% (2) to 85.0% (4), and 84.9% at 8 (3 seeds each).
    embeddings_std: float = 4.0
    # A refit's record of the validated run it retrains: {"run", "epochs", "monitor", "value", "validation_sha256"},
    # and a multi-label run's "thresholds" (by label), which the refit predicts at.
    refit_of: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def anchored(self) -> RunSettings:
        """These settings with absolute data and word-vector paths (``DataSettings.anchored``)."""
        embeddings = self.embeddings if self.embeddings == COUNT_EMBEDDINGS else _absolute(self.embeddings)
        return replace(self, data=self.data.anchored(), embeddings=embeddings)

    def first_difference(self, other: RunSettings, ignore: Collection[str] = ()) -> tuple[str, Any, Any] | None:
        """The first setting, named "section.field", in which ``other`` differs from these, with its value here and
        there; None if they agree. Paths compare absolute, where the data lies is left out (a copy elsewhere is the
        same data: runs check their texts' fingerprints), and so is how and where a run trains (its output, device,
        threads, report, checkpoint interval) and whatever ``ignore`` names.

        >>> RunSettings(train=TrainConfig(lr=0.1)).first_difference(RunSettings())
        ('train.lr', 0.1, 0.001)
        """
        ours, theirs = self._flat(), other._flat()
        ignored = {"output", "device", "threads", "report", "train.checkpoint_seconds", "data.data_dir",
                   "data.found_in", *ignore}
        keys = [*ours, *(key for key in theirs if key not in ours)]
        return next(((key, ours.get(key), theirs.get(key)) for key in keys
                     if key not in ignored and ours.get(key) != theirs.get(key)), None)

    def _flat(self) -> dict:
        flat = {}
        for key, value in self.anchored().to_dict().items():
            for name, inner in (value.items() if isinstance(value, dict) else [(None, value)]):
                flat[key if name is None else f"{key}.{name}"] = inner
        return flat


def _absolute(path: str | None) -> str | None:
    return os.path.abspath(os.path.expanduser(path)) if path else path


@dataclass
class RunResult:
    run_dir: Path
    metrics: dict
    history: list[dict]
    seconds: float


def settings_for(data: DataSettings, model: str, *, model_config: dict | None = None, train: dict | None = None,
                 tokenizer: dict | None = None, cleaning: CleaningConfig | None = None, output: str | None = None,
                 device: str = "auto") -> RunSettings:
    """RunSettings from general defaults, then the dataset's recipe, then the given overrides.

    ``model_config``, ``train`` and ``tokenizer`` override fields of the model's
    config, ``TrainConfig`` and ``TokenizerConfig``; an unknown field is an
    error, and so are the model fields the run sets itself (vocab_size,
    num_classes, max_len: set --max-len through the tokenizer; pad_id: the tokenizer's).

    >>> s = settings_for(DataSettings(dataset="synthetic"), "boe", train={"epochs": 2})
    >>> s.train.epochs, s.train.batch_size, s.tokenizer.max_len
    (2, 64, 32)
    """
    if model not in MODELS:
        raise AttnclfError(f"unknown model {model!r}; known: {', '.join(MODELS)}")
    data.check_sources()
    recipe = recipe_for(data.dataset)
    model_fields = {f.name for f in fields(MODELS[model].config_class)}
    # A recipe tunes several models at once; each takes the fields it has.
    merged_model = {k: v for k, v in recipe.get("model_config", {}).items() if k in model_fields}
    merged_model |= model_config or {}
    merged_train = recipe.get("train", {}) | (train or {})
    if data.multi_label:
        # Not F1 at 0.5: it stays 0 while a label's probabilities are all below 0.5 (early on, for any label on
        # fewer than half the texts), which ends slow learners after `patience` epochs (boe on topics: epoch 4).
        merged_train.setdefault("monitor", "loss")
    merged_tokenizer = recipe.get("tokenizer", {}) | (tokenizer or {})
    for what, overrides, valid in (
        (f"model {model!r}", merged_model, model_fields - {"vocab_size", "num_classes", "max_len", "pad_id"}),
        ("TrainConfig", merged_train, {f.name for f in fields(TrainConfig)}),
        ("TokenizerConfig", merged_tokenizer, {f.name for f in fields(TokenizerConfig)} - {"cleaning"}),
    ):
        unknown = sorted(overrides.keys() - valid)
        if unknown:
            raise AttnclfError(f"{what} has no settable field {unknown[0]!r}; valid: {', '.join(sorted(valid))}")
    return RunSettings(
        data=data,
        tokenizer=TokenizerConfig(**merged_tokenizer, cleaning=cleaning or CleaningConfig()),
        model=model,
        model_config=merged_model,
        train=TrainConfig(**merged_train),
        output=output or f"runs/{model}-{data.describe()}",
        device=device,
        embeddings=recipe.get("embeddings"),
    )


def dataset_splits(settings: DataSettings, seed: int) -> Splits:
    """The named dataset's own splits, downloaded first if the settings allow it."""
    if settings.download:
        from ..data.download import ensure_available

        ensure_available(settings.dataset, candidate_dirs(settings.data_dir, settings.found_in), download=True)
    splits = load_splits(settings.dataset, settings.data_dir, seed, found_in=settings.found_in)
    if settings.multi_label and not splits.train.multi_label:  # (a multi-label source implies the flag)
        raise DataError(f"{settings.dataset} is a single-label dataset; drop --multi-label")
    return splits


def load_data(settings: DataSettings, seed: int) -> Splits:
    """The splits a run trains, validates and tests on (validation carved from train if needed)."""
    seed = settings.data_seed(seed)
    if settings.dataset:
        splits = dataset_splits(settings, seed)
    elif settings.train_file:
        from ..data.files import load_files

        splits = load_files(settings.train_file, settings.test_file,
                            text_column=settings.text_column, label_column=settings.label_column,
                            multi_label=settings.multi_label, label_delimiter=settings.label_delimiter,
                            validation_path=settings.validation_file)
    else:
        raise AttnclfError("give a dataset (--dataset NAME) or a training file (--train-file PATH)")
    train = splits.train
    if settings.max_train_examples and len(train) > settings.max_train_examples:
        train, _ = train_validation_split(train, 1 - settings.max_train_examples / len(train), seed)
    if not train.multi_label and len(set(train.labels)) < 2:
        raise DataError(f"{settings.describe()}: training data has only one class "
                        f"({train.label_names[train.labels[0]]!r}); a classifier needs at least two")
    validation = splits.validation
    if settings.refit:  # every text validation would have held out, and those withheld for its sake
        parts = [train]
        if validation is not None and (validation.texts, validation.labels) != (train.texts, train.labels):
            parts.append(validation)  # (the course's toy sets validate on their training set: nothing to add)
        if splits.extra.get(WITHHELD) is not None and not settings.max_train_examples:
            parts.append(splits.extra[WITHHELD])  # (a sample's refit learns the sample and its validation only)
        train, validation = TextDataset.join(parts, "train"), None
    elif validation is None:
        train, validation = train_validation_split(train, settings.val_fraction, seed, settings.hold_out)
    else:
        check_hold_out(settings.hold_out, settings.describe(), train.order, own_validation=True)
    return Splits(train=train, validation=validation, test=sample_test(splits.test, settings.max_test_examples),
                  extra=splits.extra)


def sample_test(test: TextDataset | None, max_examples: int | None) -> TextDataset | None:
    """At most ``max_examples`` texts of ``test``, a stratified sample that every run of an experiment shares.

    Seed 0, not the run's seed, so every seed is tested on the same texts; ungrouped, because a
    sample of the test set has no validation to keep apart, and its size is exact.
    """
    if not max_examples or test is None or len(test) <= max_examples:
        return test
    labels = None if test.multi_label else test.labels
    _, sample = split_indices(labels, None, max_examples / len(test), 0, size=len(test))
    return test.subset(sample.tolist(), "test")


def _saved_data(config: dict, data_dir: str | None) -> DataSettings:
    """A run's data settings, looking for its dataset in ``data_dir`` first when one is given."""
    return DataSettings(**config["settings"]["data"] | ({"data_dir": data_dir} if data_dir else {}))


def run_test_data(config: dict, label_names: list[str], test_only: bool = False,
                  data_dir: str | None = None) -> TextDataset:
    """A run's own test split, labels in the run's order (its validation split when the data has no
    test split, unless ``test_only``); ``data_dir``: look for its dataset there first.

    >>> # test = run_test_data(read_json(Path("runs/demo") / "config.json"), ["negative", "positive"])
    """
    settings = config["settings"]
    data = _saved_data(config, data_dir)
    if data.test_file and not data.dataset:  # the file alone: the training file may be large, or gone since
        from ..data.files import load_file

        return sample_test(load_file(data.test_file, data.text_column, data.label_column, label_names=label_names,
                                     split="test", multi_label=data.multi_label,
                                     label_delimiter=data.label_delimiter), data.max_test_examples)
    splits = load_data(data, settings["train"]["seed"])
    if data.refit and splits.test is None:
        raise AttnclfError(f"{data.describe()} has no test split, and this refit trained on every text it has: only "
                           f"other labelled texts can score it (attnclf evaluate RUN --test-file FILE)")
    if test_only and splits.test is None:
        raise AttnclfError(f"{data.describe()} has no test split; give held-out data with --test-file or --dataset, "
                           f"or score the texts the runs held out with --split validation (runs sharing --split-seed)")
    if splits.test is None:
        held_out = held_out_fingerprint(config)
        if held_out is not None and held_out != texts_fingerprint(splits.validation):
            raise AttnclfError(_CHANGED_SPLIT.format(data.describe_held_out(label_names, splits.train.label_names)))
        return align_labels(splits.validation, label_names)
    return align_labels(splits.test, label_names)


def texts_fingerprint(data: TextDataset) -> str:
    """sha256 of the labelled texts, in order: whether a split is still the one a run held out.

    >>> texts_fingerprint(TextDataset(["good"], [1], ["neg", "pos"]))[:12]
    '7e854b0e3ff1'
    """
    digest = hashlib.sha256()
    for text, label in zip(data.texts, data.labels):
        digest.update(f"{label}\t{text}\n".encode())
    return digest.hexdigest()


def held_out_fingerprint(config: dict) -> str | None:
    """The ``texts_fingerprint`` of the validation texts a run held out, from its config.json (runs trained before
    it was recorded, and token-cache runs before 2026-11-23, have none)."""
    return config.get("data", {}).get("validation_sha256")


def run_validation_data(configs: list[dict], label_names: list[str], data_dir: str | None = None) -> TextDataset:
    """The texts the runs held out to validate on, labels in the runs' order: one set for all of them
    (``data_dir``: look for their dataset there first).

    Runs of different seeds hold out different texts unless they shared ``--split-seed``, held out the latest
    texts (``--hold-out latest``), or the dataset has its own validation split; their ensemble can only be
    validated on texts none of them trained on.

    >>> # val = run_validation_data([read_json(Path(d) / "config.json") for d in runs], ["neg", "pos"])
    """
    def data_and_seed(config: dict) -> tuple[DataSettings, int]:
        data = _saved_data(config, data_dir)
        if data.refit:
            raise AttnclfError(f"{config['settings']['output']} is a refit: it trained on its validation texts; "
                               f"validate the run it refits ({config['settings']['refit_of']['run']})")
        return data, data.data_seed(config["settings"]["train"]["seed"])

    first_data, first_seed = data_and_seed(configs[0])
    first_splits = load_data(first_data, first_seed)
    validation = first_splits.validation
    fingerprint = texts_fingerprint(validation)
    for config in configs:
        data, seed = data_and_seed(config)
        if data.hold_out != first_data.hold_out:
            raise AttnclfError(f"the runs held out different validation texts (--hold-out {first_data.hold_out} "
                               f"and {data.hold_out}); an ensemble validates on texts all its runs held out")
        # A run records what it held out; only older runs, or token-cache ones, need their split rebuilt.
        held_out = held_out_fingerprint(config)
        if held_out is None and seed != first_seed:
            held_out = texts_fingerprint(load_data(data, seed).validation)
        if held_out is not None and held_out != fingerprint:
            if seed != first_seed:
                raise AttnclfError(f"the runs held out different validation texts (split seeds {first_seed} and "
                                   f"{seed}); train them with one --split-seed to validate their ensemble")
            raise AttnclfError(_CHANGED_SPLIT.format(data.describe_held_out(label_names,
                                                                            first_splits.train.label_names)))
    return align_labels(validation, label_names)


_NO_CACHED_REFIT = "{} trained from a token cache, which keeps validation apart: it cannot be refitted yet"
_CHANGED_SPLIT = ("{} no longer gives the validation texts a run held out (the data or its split changed since it "
                  "was trained): they may be texts it learned")

def _batches(tokenizer: Tokenizer, data: TextDataset, batch_size: int, shuffle: bool, seed: int,
             balanced: bool = False, windows: WindowConfig | None = None) -> BucketBatches:
    max_tokens = None if shuffle else EVAL_MAX_TOKENS  # evaluation batches: bounded in padded tokens too
    if isinstance(data, CachedDataset):  # encoded once, cut to max_len, when the cache was built
        return BucketBatches(data.sequences, data.labels, batch_size=batch_size, shuffle=shuffle, seed=seed,
                             balanced=balanced, max_tokens=max_tokens)
    labels = multi_hot(data.labels, data.num_classes) if data.multi_label else data.labels
    return text_batches(tokenizer, data.texts, labels, windows=windows, batch_size=batch_size, shuffle=shuffle,
                        seed=seed, balanced=balanced, max_tokens=max_tokens)


def _count_embeddings(settings: RunSettings, train: TextDataset, dim: int, log) -> tuple[WordVectors, dict]:
    """PPMI vectors of the training texts (not the validation ones) and the dataset's unlabelled texts,
    and what counting them took (for config.json)."""
    started = time.perf_counter()
    texts = list(train.texts) + (unlabelled_texts(settings.data.dataset, settings.data.data_dir,
                                                  settings.data.found_in) if settings.data.dataset else [])
    vectors = count_vectors(texts, dim=dim, cleaning=settings.tokenizer.cleaning)
    record = {"texts": len(texts), "words": len(vectors.words), "seconds": round(time.perf_counter() - started, 1)}
    log(f"embeddings: counted {record['words']:,} word vectors from {record['texts']:,} texts in "
        f"{record['seconds']:.0f} s")
    return vectors, record


def _describe_classes(train: TextDataset) -> list[str]:
    """The training classes with their counts, and a warning for names that differ only in case or spaces
    ("Positive" beside "positive" is a class of its own: the file probably meant one)."""
    names = train.label_names
    if train.multi_label:
        counts = np.bincount([i for labels in train.labels for i in labels], minlength=len(names))
    else:
        counts = np.bincount(np.asarray(train.labels, dtype=np.int64), minlength=len(names))
    lines = [f"training texts per class: {', '.join(f'{name} {count:,}' for name, count in zip(names, counts))}"]
    by_form: dict[str, list[str]] = {}
    for name in names:
        by_form.setdefault(" ".join(name.casefold().split()), []).append(name)
    lines += [f"warning: classes {' and '.join(map(repr, same))} differ only in case or spaces; make them one "
              f"label in the data if they mean one class" for same in by_form.values() if len(same) > 1]
    numbers = [name for name in names if _is_number(name)]
    by_value: dict[float, list[str]] = {}
    for name in numbers:
        by_value.setdefault(float(name), []).append(name)
    lines += [f"warning: classes {' and '.join(map(repr, same))} are one number written differently; make them one "
              f"label in the data if they mean one class" for same in by_value.values() if len(same) > 1]
    words = [name for name in names if name not in numbers]
    if numbers and words:  # JSON's 1 beside "positive": two codings of the labels, mixed
        lines.append(f"warning: some classes are numbers ({', '.join(map(repr, numbers[:3]))}) and some are names "
                     f"({', '.join(map(repr, words[:3]))}); give every text one coding if they mean the same classes")
    if train.multi_label:
        lines += _delimiter_warnings(names)
    return lines


def _delimiter_warnings(names: list[str]) -> list[str]:
    """Label sets split on another character than the file's read as classes of their own ("Business,reuters"). A
    character inside classes whose pieces are classes too, or recur across classes, probably separates labels."""
    lines = []
    for char in ",;|/":
        joined = [name for name in names if char in name]
        pieces = Counter(piece.strip() for name in joined for piece in set(name.split(char)))
        if any(piece in names or count > 1 for piece, count in pieces.items() if piece):
            lines.append(f"warning: {len(joined)} {'class holds' if len(joined) == 1 else 'classes hold'} {char!r} "
                         f"({', '.join(map(repr, joined[:3]))}"
                         f"{', ...' if len(joined) > 3 else ''}); if it separates the labels in the data, give "
                         f"--label-delimiter {char!r}")
    return lines


def _shared_texts(splits: Splits) -> list[str]:
    """Warnings for texts on both sides of a line the scores rely on: duplicates in a file, split between training
    and validation, or test texts inside the training file. Either flatters the scores; nothing else would say so."""
    lines, seen = [], set(splits.train.texts)
    validation = splits.validation
    if validation is not None and (validation.texts, validation.labels) != (splits.train.texts, splits.train.labels):
        shared = sum(text in seen for text in validation.texts)
        if shared:
            lines.append(f"warning: {shared:,} of the {len(validation):,} validation texts also occur among the "
                         f"training texts (duplicates in the data?): validation scores, early stopping and refit's "
                         f"epoch count will flatter the model")
        seen |= set(validation.texts)
    if splits.test is not None:
        shared = sum(text in seen for text in splits.test.texts)
        if shared:
            lines.append(f"warning: {shared:,} of the {len(splits.test):,} test texts also occur among the training "
                         f"or validation texts: the test score will flatter the model")
    return lines


def _is_number(name: str) -> bool:
    try:
        float(name)
    except ValueError:
        return False
    return True


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _save_tokenizer(tokenizer: Tokenizer, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tokenizer.save(tmp)
    atomic_write_bytes(path, tmp.read_bytes())
    tmp.unlink()


def evaluate_split(model, tokenizer: Tokenizer, data: TextDataset, device, batch_size: int = 128,
                   thresholds: np.ndarray | None = None) -> tuple[dict, np.ndarray]:
    """Test metrics plus three confident correct and incorrect examples, and the probabilities behind them.

    Multi-label data is scored by ``multilabel_metrics`` at ``thresholds``, without examples.
    """
    batches = _batches(tokenizer, data, batch_size, False, 0, windows=window_config(model))
    probabilities = predict_probabilities(model, batches, device, data.multi_label)
    if data.multi_label:
        metrics = multilabel_metrics(multi_hot(data.labels, data.num_classes), probabilities, data.label_names,
                                     thresholds)
        return metrics | {"split": data.split}, probabilities
    metrics = compute_metrics(data.labels, probabilities, data.label_names)
    metrics["split"] = data.split
    metrics["examples"] = pick_examples(data.texts, data.labels, probabilities, data.label_names)
    return metrics, probabilities


def train_run(settings: RunSettings, resume: bool = False, progress: bool = True) -> RunResult:
    """Train, validate and test one model; everything lands in ``settings.output``.

    Under ``torchrun`` every process calls it and trains its share (see
    ``distributed``); rank 0 writes the run directory and alone returns test metrics.

    >>> # result = train_run(RunSettings(DataSettings(dataset="demo"), output="runs/demo"))
    >>> # result.metrics["accuracy"]
    """
    with torch_threads(settings.threads):
        return _train_run(settings, resume, progress)


def _train_run(settings: RunSettings, resume: bool, progress: bool) -> RunResult:
    started = time.perf_counter()
    # Settings that cannot work fail before anything is written.
    if not resume and settings.refit_of is None:
        settings.data.check_sources()
    if settings.data.token_cache and settings.data.refit:
        raise AttnclfError(_NO_CACHED_REFIT.format("the run"))
    if settings.data.token_cache and (settings.data.multi_label or settings.windows):
        raise AttnclfError("--token-cache does not combine with --multi-label or --windows yet: the cache holds "
                           "one label and one max_len-token sequence per text")
    if settings.windows:
        settings.windows.stride_for(settings.tokenizer.max_len)
    with torch.device("meta"):  # a model the settings cannot build (heads that do not divide the width) fails here
        build_model(settings.model, vocab_size=8, num_classes=2, max_len=settings.tokenizer.max_len,
                    **settings.model_config)
    counting = settings.embeddings == COUNT_EMBEDDINGS and not resume
    if counting and settings.data.token_cache:
        raise AttnclfError("word vectors counted in the run (--embeddings count, which the dataset's recipe may "
                           "set) read every training text at once and do not combine with --token-cache; add "
                           "--embeddings none, or count them with `attnclf vectors` and pass the file")
    vectors = None
    if settings.embeddings and not resume:
        width = config_for(settings.model, **settings.model_config).embedding_dim
        if not counting:
            vectors = WordVectors.load(settings.embeddings)
            vectors.check_width(width)
    created = first_missing_folder(settings.output)
    run_dir = prepare_output_dir(settings.output)
    seed = settings.train.seed
    if resume and not (run_dir / "checkpoint" / "state.json").exists():
        raise RunDirError(f"{run_dir}: nothing to resume (no checkpoint/state.json)")
    distributed, device = init_distributed(settings.device)
    try:
        if settings.data.token_cache:
            from .cached import load_cached_data

            splits, trained = load_cached_data(settings, seed, log=_stderr if progress else lambda message: None)
        else:
            splits, trained = load_data(settings.data, seed), None
        if trained is None and not resume and distributed.is_main:  # texts it cannot learn from fail here too
            trained = Tokenizer.train(splits.train.texts, settings.tokenizer)
    except AttnclfError:
        if created:  # bad data: a run that never started leaves no folder behind, nor the empty parents it made
            shutil.rmtree(run_dir, ignore_errors=True)
            remove_empty_folders(run_dir.parent, created)
        raise
    if not resume and distributed.is_main:
        # The data loaded: this run replaces the folder's earlier one. Its weights, history, metrics, thresholds, ONNX
        # export and checkpoint would describe another model (a checkpoint would invite --resume onto this run's
        # tokenizer, a history `attnclf refit` onto its settings), and this run writes its own as it goes.
        if progress and (run_dir / "model.safetensors").is_file():
            _stderr(f"{run_dir} held a trained model; this run replaces it")
        for stale in ("model.safetensors", "history.jsonl", "metrics.json", THRESHOLDS_FILE, "report.html",
                      "faithfulness.json"):
            (run_dir / stale).unlink(missing_ok=True)
        if (run_dir / "onnx" / "export.json").is_file():
            shutil.rmtree(run_dir / "onnx", ignore_errors=True)
        for derived in ("checkpoint", "plots"):
            shutil.rmtree(run_dir / derived, ignore_errors=True)
    label_names = splits.train.label_names
    if distributed.is_main and not resume:
        described = _describe_classes(splits.train)
        if settings.data.train_file and not settings.data.token_cache:  # (a cache's texts stay on disk)
            described += _shared_texts(splits)
        for line in described:
            if progress or line.startswith("warning:"):  # --quiet hides progress, not what is wrong with the data
                _stderr(line)
    # One pass over the held-out texts (from disk for a token cache): later commands check they are unchanged.
    fingerprint = None if splits.validation is None else texts_fingerprint(splits.validation)
    # A refit checks the training texts too; they are not read again from a token cache, which refits refuse.
    trained_on = None if settings.data.token_cache else texts_fingerprint(splits.train)
    saved = read_json(run_dir / "config.json") if resume else {}
    if saved.get("data", {}).get("train_sha256") not in (None, trained_on):
        raise RunDirError(f"{run_dir}: {settings.data.describe()} no longer gives the texts this run trained on "
                          f"(the data changed since); it cannot resume on other data")
    if held_out_fingerprint(saved) not in (None, fingerprint):
        changed = settings.data.describe_held_out(read_json(run_dir / "labels.json"), label_names)
        raise RunDirError(f"{run_dir}: {changed} no longer gives the validation texts this run held out (the data or "
                          f"its split changed since); it cannot resume on other data")
    counted = saved.get("counted_embeddings")
    if counting and distributed.is_main:  # DDP starts every rank from rank 0's parameters
        vectors, counted = _count_embeddings(settings, splits.train, width,
                                             _stderr if progress else lambda message: None)

    if not resume and distributed.is_main:
        _save_tokenizer(trained, run_dir / "tokenizer.json")
    distributed.barrier()  # every rank reads the tokenizer rank 0 trained
    tokenizer = Tokenizer.load(run_dir / "tokenizer.json", settings.tokenizer)

    torch.manual_seed(seed)
    model = build_model(settings.model, vocab_size=tokenizer.vocab_size, num_classes=len(label_names),
                        max_len=settings.tokenizer.max_len, **settings.model_config)
    if vectors is not None:
        found = vectors.initialise(model.token_embedding, tokenizer, settings.embeddings_std)
        if progress and distributed.is_main:
            source = "vectors counted in this run" if counting else settings.embeddings
            _stderr(f"embeddings: {found:,} of {tokenizer.vocab_size - 2:,} words start from {source}")
    model = windowed(model, settings.windows)
    if distributed.is_main:
        recorded = settings.anchored()
        atomic_write_json(run_dir / "labels.json", label_names)
        atomic_write_json(run_dir / "config.json", {
            "format_version": FORMAT_VERSION,
            "versions": {"attnclf": __version__, "torch": torch.__version__},
            "settings": replace(recorded, data=recorded.data.located()).to_dict(),
            "model": {"name": settings.model, "config": model.config.to_dict(), "parameters": model.num_parameters()},
            **({"counted_embeddings": counted} if counted else {}),
            "data": {"train_examples": len(splits.train),
                     "validation_examples": 0 if splits.validation is None else len(splits.validation),
                     "test_examples": len(splits.test) if splits.test else 0,
                     **({"validation_sha256": fingerprint} if fingerprint else {}),
                     **({"train_sha256": trained_on} if trained_on else {})},
        })

    trainer = Trainer(model, settings.train, run_dir, device, label_names, progress=progress, distributed=distributed,
                      multi_label=settings.data.multi_label)
    history = trainer.fit(
        _batches(tokenizer, splits.train, settings.train.batch_size * distributed.world_size, True, seed,
                 balanced=settings.train.sampler == "balanced", windows=settings.windows),
        None if splits.validation is None else
        _batches(tokenizer, splits.validation, settings.eval_batch_size, False, seed, windows=settings.windows),
        resume=resume,
    )
    if not distributed.is_main:  # rank 0 tests and reports
        return RunResult(run_dir, {}, history, time.perf_counter() - started)
    thresholds = None
    if settings.data.multi_label and splits.validation is None:
        thresholds = _refit_thresholds(settings.refit_of, run_dir, label_names)
    elif settings.data.multi_label:
        thresholds = _tune_thresholds(model, tokenizer, splits.validation, device, settings.eval_batch_size, run_dir)
    trained = {"train_seconds": round(sum(h["seconds"] for h in history), 3), "parameters": model.num_parameters()}
    if splits.test is None and splits.validation is None:  # a refit of data without a test split: nothing held out
        metrics = {"split": None, **trained,
                   "note": f"trained on every labelled text; {settings.refit_of['run']} estimates its accuracy"}
        atomic_write_json(run_dir / "metrics.json", metrics)
        return RunResult(run_dir, metrics, history, time.perf_counter() - started)
    test = align_labels(splits.test if splits.test is not None else splits.validation, label_names)
    metrics, test_probabilities = evaluate_split(model, tokenizer, test, device, settings.eval_batch_size, thresholds)
    metrics |= trained
    atomic_write_json(run_dir / "metrics.json", metrics)
    if settings.report:
        from ..classifier import Classifier
        from ..report import write_report

        write_report(run_dir, classifier=Classifier(model, tokenizer, label_names, device, read_json(
            run_dir / "config.json"), batch_size=settings.eval_batch_size, thresholds=thresholds), test=test,
                     test_probabilities=test_probabilities)
    return RunResult(run_dir, metrics, history, time.perf_counter() - started)


def _tune_thresholds(model, tokenizer: Tokenizer, validation: TextDataset, device, batch_size: int,
                     run_dir: Path) -> np.ndarray:
    """Per-label thresholds maximising validation F1, saved as thresholds.json (what predict reads)."""
    targets = multi_hot(validation.labels, validation.num_classes)
    batches = _batches(tokenizer, validation, batch_size, False, 0, windows=window_config(model))
    probabilities = predict_probabilities(model, batches, device, True)
    thresholds, f1 = tune_thresholds(targets, probabilities)
    atomic_write_json(run_dir / THRESHOLDS_FILE, {
        "thresholds": {name: float(t) for name, t in zip(validation.label_names, thresholds)},
        "validation_f1": {name: float(f) for name, f in zip(validation.label_names, f1)},
        "validation_examples": len(validation),
        "note": "a label is predicted when its probability is at least its threshold; each threshold maximises "
                "that label's F1 on the validation split (0.5 where validation has no positive)",
    })
    return thresholds


def _refit_thresholds(refit_of: dict, run_dir: Path, label_names: list[str]) -> np.ndarray:
    """The validated run's per-label thresholds, saved as this refit's (it has no validation texts to tune on)."""
    atomic_write_json(run_dir / THRESHOLDS_FILE, {
        "thresholds": refit_of["thresholds"],
        "note": f"those of {refit_of['run']}, which tuned them on its validation split; this refit trained on it",
    })
    return np.array([refit_of["thresholds"][name] for name in label_names])


def train_or_continue(settings: RunSettings, resume: bool, progress: bool = True) -> RunResult:
    """``settings``' run trained afresh; with ``resume``, kept if it finished and continued from its checkpoint if not
    (``train --seeds --resume``, ``refit --resume``)."""
    output = Path(settings.output)
    if resume and (output / "metrics.json").is_file():
        print(f"{output}: finished, kept", file=sys.stderr)
        return RunResult(output, read_json(output / "metrics.json"), read_jsonl(output / "history.jsonl"), 0.0)
    if resume and (output / "checkpoint" / "state.json").is_file():
        continued = resume_settings(output, epochs=settings.train.epochs, device=settings.device,
                                    threads=settings.threads)
        continued.report = settings.report
        return train_run(continued, resume=True, progress=progress)
    return train_run(settings, progress=progress)


def refit_runs(run_dirs: list[str | Path], output: str | None = None, *, resume: bool = False,
               device: str | None = None, threads: int | None = None, report: bool = True,
               progress: bool = True) -> tuple[list[RunResult], dict | None]:
    """Refit runs (``refit_settings``), each into RUN-refit (one run: ``output``), or the members of one
    ``train --seeds`` folder into FOLDER-refit (or ``output``), which becomes an ensemble folder of its own.

    Every run is checked before any is trained. Returns each refit's result and, for a ``--seeds`` folder,
    the refits' ensemble test metrics (also in its ensemble.json). ``resume`` keeps finished refits and
    continues interrupted ones.

    >>> # results, _ = refit_runs(["runs/a", "runs/b"])           # into runs/a-refit, runs/b-refit
    >>> # _, metrics = refit_runs(["runs/imdb-3"])                # a --seeds folder, into runs/imdb-3-refit
    """
    from ..ensemble import is_ensemble_dir, member_dirs, write_ensemble_file
    from .distributed import from_environment

    folder = Path(run_dirs[0]) if is_ensemble_dir(run_dirs[0]) else None
    if (folder and len(run_dirs) > 1) or any(is_ensemble_dir(run) for run in run_dirs[1:]):
        raise AttnclfError("give one `train --seeds` folder, or run directories")
    if folder:  # its members' refits make an ensemble folder of their own, beside it
        runs, refit_folder = member_dirs(folder), Path(output or f"{folder}-refit")
        if refit_folder.resolve() == folder.resolve() or (refit_folder / "config.json").is_file():
            raise AttnclfError(f"{refit_folder} holds a run or the ensemble itself; give the refits another --output")
        if (refit_folder / ENSEMBLE_FILE).is_file():  # an earlier refit of this folder, or another ensemble
            for member in member_dirs(refit_folder):
                _check_refit_output(folder / member.name, member)
        outputs = [str(refit_folder / run.name) for run in runs]
    else:
        runs, refit_folder = [Path(run) for run in run_dirs], None
        if output and len(runs) > 1:
            raise AttnclfError("--output names one refit; several runs are each refitted into RUN-refit")
        outputs = [output] * len(runs)
    seen = set()
    for run in runs:
        if run.resolve() in seen:
            raise AttnclfError(f"{run} is given twice")
        seen.add(run.resolve())
    planned = [refit_settings(run, output=out, device=device, threads=threads) for run, out in zip(runs, outputs)]
    results = []
    for run, settings in zip(runs, planned):
        settings.report = report
        print(f"{run}: refit on its validation texts too, for its best {settings.refit_of['epochs']} epoch(s) "
              f"(validation {settings.refit_of['monitor']} {settings.refit_of['value']:.4f}) -> {settings.output}",
              file=sys.stderr)
        results.append(train_or_continue(settings, resume, progress))
    if refit_folder is None or not from_environment().is_main:
        return results, None
    seeds = read_json(folder / ENSEMBLE_FILE).get("seeds", [])
    return results, write_ensemble_file(refit_folder, [Path(s.output) for s in planned], seeds,
                                        device=planned[0].device, threads=threads)


def _check_refit_output(run_dir: Path, output: Path) -> None:
    """Refuse to write a refit over its own run, another run, or an ensemble: only over an earlier refit of it."""
    if output.resolve() == run_dir.resolve():
        raise AttnclfError(f"a refit of {run_dir} goes into another folder than the run it refits")
    if (output / ENSEMBLE_FILE).is_file():
        raise AttnclfError(f"{output} holds an ensemble (`train --seeds`); give the refit another --output")
    if (output / "config.json").is_file():
        earlier = read_json(output / "config.json").get("settings", {}).get("refit_of")
        if not earlier or Path(earlier["run"]).resolve() != run_dir.resolve():
            raise AttnclfError(f"{output} holds another run; give the refit another --output (or remove it)")


def align_labels(data: TextDataset, label_names: list[str]) -> TextDataset:
    """``data`` with labels re-indexed to the training label order."""
    if data.label_names == label_names:
        return data
    index = {name: i for i, name in enumerate(label_names)}
    used = {y for labels in data.labels for y in labels} if data.multi_label else set(data.labels)
    unknown = sorted({data.label_names[y] for y in used} - index.keys())
    if unknown:
        raise DataError(f"{data.name or data.split}: label(s) {', '.join(map(repr, unknown))} "
                        f"never seen in training (known: {', '.join(label_names)})")
    if data.multi_label:
        labels = [tuple(sorted(index[data.label_names[y]] for y in ys)) for ys in data.labels]
    else:
        labels = [index[data.label_names[y]] for y in data.labels]
    return replace(data, labels=labels, label_names=list(label_names))


def resume_settings(run_dir: str | Path, epochs: int | None = None, device: str | None = None,
                    threads: int | None = None) -> RunSettings:
    """The interrupted run's own settings; only the epoch budget, the device and the threads may change."""
    saved = read_json(Path(run_dir) / "config.json")["settings"]
    train = TrainConfig(**saved["train"])
    if epochs is not None and saved["data"].get("refit") and epochs != train.epochs:
        raise AttnclfError(f"{run_dir} is a refit for the {train.epochs} epoch(s) its run chose; it resumes without "
                           f"--epochs")
    if epochs is not None:
        train = TrainConfig(**{**saved["train"], "epochs": epochs})  # checked like a new setting
    return RunSettings(
        data=DataSettings(**saved["data"]),
        tokenizer=TokenizerConfig.from_dict(saved["tokenizer"]),
        windows=WindowConfig(**saved["windows"]) if saved.get("windows") else None,
        model=saved["model"],
        model_config=saved["model_config"],
        train=train,
        output=str(run_dir),
        device=device or saved["device"],
        threads=threads,
        eval_batch_size=saved["eval_batch_size"],
        embeddings=saved.get("embeddings"),  # the checkpoint holds what they started; kept for the record
        embeddings_std=saved.get("embeddings_std", RunSettings.embeddings_std),
        refit_of=saved.get("refit_of"),
    )


def refit_settings(run_dir: str | Path, output: str | None = None, device: str | None = None,
                   threads: int | None = None) -> RunSettings:
    """Settings that retrain a finished run on all its labelled texts, validation ones included, for the number
    of epochs after which it validated best (on the learning-rate schedule it followed), then test it as the run
    was tested.

    A validation split buys its epoch count and early stopping at the price of a tenth of the data; the
    refit pays it back once they are chosen (as scikit-learn's ``GridSearchCV(refit=True)`` does). Its
    accuracy cannot be validated: the run it refits is the validated one.

    >>> # result = train_run(refit_settings("runs/self-attn-imdb"))   # into runs/self-attn-imdb-refit
    """
    run_dir = check_run_dir(run_dir)
    config = read_json(run_dir / "config.json")
    saved = config["settings"]
    if saved["data"].get("refit"):
        raise AttnclfError(f"{run_dir} is a refit already; refit the run it refits ({saved['refit_of']['run']})")
    if saved["data"].get("token_cache"):
        raise AttnclfError(_NO_CACHED_REFIT.format(run_dir))
    if not (run_dir / "metrics.json").is_file():
        raise RunDirError(f"{run_dir} has not finished training (no metrics.json); finish it with "
                          f"`attnclf train --resume --output {run_dir}`, then refit it")
    if not (run_dir / "history.jsonl").is_file():
        raise RunDirError(f"{run_dir} has no history.jsonl, so no epoch count to refit for")
    history = read_jsonl(run_dir / "history.jsonl")
    try:
        best = best_epoch(history, saved["train"]["monitor"])
    except AttnclfError as exc:
        raise AttnclfError(f"{run_dir}: {exc}") from None
    settings = resume_settings(run_dir, device=device, threads=threads)
    settings.output = output or f"{run_dir}-refit"
    _check_refit_output(run_dir, Path(settings.output))
    if settings.embeddings not in (None, COUNT_EMBEDDINGS) and not Path(settings.embeddings).is_file():
        raise AttnclfError(f"{run_dir} started from the word vectors {settings.embeddings}, which are gone (or "
                           f"relative to another folder); a refit starts from the same ones")
    # Its texts must still be there to learn: a changed file or split would refit on other data. (Loaded as the run
    # loaded them: `refit` is not set yet, which would join validation into train.)
    held_out, trained_on = held_out_fingerprint(config), config.get("data", {}).get("train_sha256")
    if held_out is not None or trained_on is not None:
        splits = load_data(settings.data, settings.train.seed)
        changed = (settings.data.describe() if trained_on not in (None, texts_fingerprint(splits.train)) else
                   settings.data.describe_held_out(read_json(run_dir / "labels.json"), splits.train.label_names)
                   if held_out not in (None, texts_fingerprint(splits.validation)) else None)
        if changed:
            raise AttnclfError(f"{changed} no longer gives the texts {run_dir} trained and validated on (the data or "
                               f"its split changed since): a refit would learn other data")
    # The schedule each epoch followed: `train --resume --epochs N` stretches it from then on. Runs from before
    # history recorded it are taken to have followed their final one, the settings' epochs.
    final = settings.train.schedule_epochs or settings.train.epochs
    schedules = {record.get("schedule_epochs", final) for record in history if record["epoch"] <= best["epoch"]}
    if len(schedules) > 1:
        raise AttnclfError(f"{run_dir} was resumed with other --epochs before epoch {best['epoch']}, the one it kept, "
                           f"so its learning rate followed schedules of {' and '.join(map(str, sorted(schedules)))} "
                           f"epochs; a refit follows one: train it again with --epochs N from the start to refit it")
    monitor = settings.train.monitor
    settings.data.refit = True
    settings.train.schedule_epochs = schedules.pop()
    settings.train.epochs, settings.train.patience = best["epoch"], 0
    settings.refit_of = {"run": str(run_dir.resolve()), "epochs": best["epoch"], "monitor": monitor,
                         "value": best[f"val_{monitor}"], "validation_sha256": held_out}
    if settings.data.multi_label:
        settings.refit_of["thresholds"] = read_json(run_dir / THRESHOLDS_FILE)["thresholds"]
    return settings
