"""A run's data from token caches: ``load_data`` for corpora larger than memory (``DataSettings.token_cache``).

User files are streamed three times at most, and never held in memory: once
for the labels (to carve the validation split by index, seeded and
stratified as ``load_data`` carves it), once to train the tokenizer on the
training part, once to encode every row into a ``TokenCache``. A later run
with the same data, tokenizer settings and split finds the tokenizer and the
cache and reads nothing but the labels. Named datasets are loaded by their
loaders as usual (they fit in memory) and cached the same way, which saves
the encoding on later runs.

With the same seed, the splits, tokenizer and token ids equal ``load_data``'s
and ``Tokenizer.encode``'s, so a cached run trains to the same model. A cache
holds a whole file or split: ``max_train_examples`` and ``max_test_examples``
pick rows from it by index, so samples of any size share one cache.

A refit (``DataSettings.refit``) learns the rows the run trained and validated
on, in ``load_data``'s order: a validation split carved from the training file
is rows of its cache already; one of its own (``--validation-file``, a
dataset's) is cached after the training rows, as one cache. Its tokenizer is
trained on all of them, as an in-memory refit's is, so it builds caches of its
own and never needs the run's. Before training it checks that the rows the run
held out still give the texts the run recorded (``validation_sha256``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from ..data.base import WITHHELD, ReadFrom, Splits, TextDataset
from ..data.splits import check_hold_out, split_indices
from ..errors import AttnclfError, DataError, RunDirError
from ..rundir import atomic_write_bytes
from ..text.cache import CachedDataset, TokenCache, cache_key, cache_root, file_identity
from ..text.tokenizer import Tokenizer, TokenizerConfig
from .run_data import (align_labels, dataset_splits, refit_additions, refuse_one_class, sample_test,
                       texts_fingerprint, training_sample)
from .settings import DataSettings, RunSettings


@dataclass
class _Source:
    """One split's records, streamed on demand, and what names them in a cache key."""

    identity: dict
    records: Callable[[], Iterable[tuple[str, int]]]  # (text, label index) pairs
    label_names: list[str]
    name: str
    groups: list[str] | None = None
    order: Sequence[int] | None = None
    where: str = ""  # the file, as the user named it, for errors
    refit_learns: bool = True  # (a toy set's validation split is its training set again: a refit learns it once)


def load_cached_data(settings: RunSettings, seed: int, log: Callable[[str], None] = print,
                     resume_with: tuple[Tokenizer, dict] | None = None) -> tuple[Splits, Tokenizer]:
    """The run's splits as memory-mapped ``CachedDataset``s, and the tokenizer that encoded them (its
    ``data_key`` names the data it learned; config.json records it).

    ``resume_with``: a resumed run's own tokenizer and the record of its data in config.json (``run_tokenizer``).
    While the data still gives its ``tokenizer_key``, it encodes the caches and none is trained: training one again
    costs a pass over the data when the caches are gone, and gives another to a BPE run from before BPE marked word
    starts (``WORD_START``), whose tokenizer no process can train again. Training or test data that no longer gives
    the recorded ``tokenizer_key`` or ``test_key`` is refused before anything is built.

    >>> # splits, tokenizer = load_cached_data(RunSettings(DataSettings(train_file="big.jsonl", token_cache=True)), 0)
    >>> # splits.train.sequences[0]  # token ids, read from disk
    """
    data = settings.data
    seed = data.data_seed(seed)
    root = cache_root(data.token_cache_dir)
    # (mkdir would say "File exists" of a file there, "Not a directory" of one above it: as if a folder were amiss)
    if file := next((folder for folder in (root, *root.parents) if folder.is_file()), None):
        raise AttnclfError(f"token cache folder {root}{' is a file' if file == root else f': {file} is a file'}; "
                           f"give a folder")
    try:  # fail before reading any data
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AttnclfError(f"token cache folder {root}: {exc.strerror}") from None
    data.require_source()
    if data.dataset:
        sources, train_labels = _dataset_sources(data, seed)
    else:
        sources, train_labels = _file_sources(data)
    train_source = sources["train"]
    keep, fit, val = _split_rows(data, sources, train_labels, seed)
    if data.refit:
        fit, val = _refit_rows(sources, len(train_labels), keep, val)
        train_source = sources["train"]

    recorded = {} if resume_with is None else resume_with[1]
    tokenizer_key = _tokenizer_key(train_source, fit, settings.tokenizer)
    if recorded.get("tokenizer_key") not in (None, tokenizer_key):
        # Refused before a tokenizer is trained or a cache built on it: the bytes its tokenizer learned changed (a
        # label too: the cached run fingerprints no training texts, which would decode every one of them again).
        raise RunDirError(f"{settings.output}: {data.describe()} no longer gives the texts this run trained on (the "
                          f"data changed since); it cannot resume on other data")
    if recorded.get("test_key") not in (None, "test" in sources and cache_key(sources["test"].identity)):
        # As an in-memory run's test_sha256: by the test data's content, hashed for its cache key anyway.
        raise RunDirError(f"{settings.output}: {data.test_file or 'its test split'} no longer gives the test texts "
                          f"this run recorded; it cannot resume on other data")
    tokenizer = _tokenizer(train_source, fit, settings.tokenizer, tokenizer_key, data.token_cache_dir, log,
                           resume_with)
    caches = {}
    for split, source in sources.items():
        cache = TokenCache.open_or_build(source.records, tokenizer, train_source.label_names, source.identity,
                                         data.token_cache_dir, log)
        if not len(cache):  # (a training file without rows was refused when its labels were read)
            raise DataError(f"{source.where or source.name}: empty file, no data rows")
        caches[split] = cache.dataset(split, source.name, source.groups)
    train = caches["train"]
    validation = caches["validation"] if val is None else train.subset(val, "validation")
    test = sample_test(caches.get("test"), data.max_test_examples)
    if data.refit:
        _check_held_out(validation, settings)
        validation = None
    return Splits(train=train.subset(fit, "train"), validation=validation, test=test), tokenizer


def _split_rows(data: DataSettings, sources: dict[str, "_Source"], train_labels: np.ndarray,
                seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The training source's rows the run samples (``keep``), trains on (``fit``) and validates on (``val``, None when
    it validates on a source of its own): the same index arithmetic as load_data's train_validation_split calls, on
    labels alone."""
    train_source = sources["train"]
    groups = None if train_source.groups is None else np.asarray(train_source.groups)
    keep = np.arange(len(train_labels))
    if data.max_train_examples and len(keep) > data.max_train_examples:
        keep = split_indices(train_labels, groups, 1 - data.max_train_examples / len(keep), seed)[0]
    refuse_one_class(data, train_labels[keep].tolist(), train_source.label_names)
    check_hold_out(data.hold_out, data.describe(), train_source.order,
                   own_validation="validation" in sources and (Path(data.validation_file).name if data.validation_file
                                                               else True))
    if "validation" in sources:
        return keep, keep, None
    order = np.asarray(train_source.order)[keep] if data.hold_out == "latest" else None
    fit, val = (keep[part] for part in split_indices(
        train_labels[keep], None if groups is None else groups[keep], data.val_fraction, seed, order=order))
    return keep, fit, val


def held_out_texts(data: DataSettings, seed: int) -> TextDataset:
    """The texts a cached run of files held out to validate on, as ``load_data``'s validation split (its texts,
    labels and the file's rows they are, ``ReadFrom.rows``), streamed: a pass over the training file's labels carves
    the split, as the run carved it, and a second keeps its rows; the training texts, which may not fit in memory, are
    never held (evaluate, calibrate).

    >>> # validation = held_out_texts(DataSettings(train_file="big.jsonl", token_cache=True), seed=0)
    """
    from ..data.files import is_data_file

    seed = data.data_seed(seed)
    sources, train_labels = _file_sources(data, keyed=False)
    _, _, val = _split_rows(data, sources, train_labels, seed)
    source = sources["validation"] if val is None else sources["train"]
    # (as load_data's split keeps its file: `evaluate --errors` names each text by its row there, with its columns)
    read_from = (ReadFrom(source.where, data.text_column, data.label_column, None if val is None else
                          tuple(val.tolist())) if is_data_file(source.where) else None)
    if val is None:
        records = list(source.records())
    else:
        wanted, last = dict.fromkeys(val.tolist()), int(val.max())
        for row, record in enumerate(source.records()):
            if row in wanted:
                wanted[row] = record
            if row == last:
                break
        records = list(wanted.values())  # in the split's order, as CachedDataset.subset(val) gives them
    return TextDataset([text for text, _ in records], [label for _, label in records], list(source.label_names),
                       "validation", source.name, read_from=read_from)


def _refit_rows(sources: dict[str, _Source], rows: int, keep: np.ndarray,
                val: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The rows a refit learns, and those its run validated on, of ``sources["train"]``, which becomes the training
    source (``rows`` rows, ``keep`` those its run's sample took) followed by its own validation split, if it had one,
    and any texts withheld for that split's sake (``refit_additions``)."""
    parts = [sources.pop(name) for name in ("validation", WITHHELD) if name in sources]
    learned, held_out, start = [keep], val, rows  # (a carved validation split is among the kept rows)
    for part in parts:
        part_rows = np.arange(start, start + sum(1 for _ in part.records()))
        start += len(part_rows)
        if held_out is None:  # (the run's own validation split comes first)
            held_out = part_rows
        if part.refit_learns:
            learned.append(part_rows)
    if parts:
        first = sources["train"]
        sources["train"] = _Source({"joined": [part.identity for part in (first, *parts)]},
                                   lambda: chain(first.records(), *(part.records() for part in parts)),
                                   first.label_names, first.name, where=first.where)
    return np.concatenate(learned), held_out


def _check_held_out(held_out: CachedDataset, settings: RunSettings) -> None:
    """Refuse a refit whose run's validation rows no longer give the texts its run recorded (``validation_sha256``):
    the data or its split changed since it trained."""
    run, data = settings.refit_of or {}, settings.data
    if run.get("validation_sha256") and texts_fingerprint(held_out) != run["validation_sha256"]:
        named = [data.describe(), *([Path(data.validation_file).name] if data.validation_file else [])]
        raise DataError(f"{' and '.join(named)} no longer give{'' if len(named) > 1 else 's'} the texts "
                        f"{run['run']} trained and validated on (the data or its split changed since): a refit would "
                        f"learn other data")


def run_tokenizer(run_dir: str | Path, config: TokenizerConfig) -> tuple[Tokenizer, dict]:
    """A cached run's own tokenizer and config.json's record of its data: the ``tokenizer_key`` of the data its
    tokenizer learned and the ``test_key`` of its test data (each absent from runs from before it was recorded), for
    ``load_cached_data`` to resume the run with."""
    from ..rundir import read_config

    return Tokenizer.load(Path(run_dir) / "tokenizer.json", config), read_config(run_dir).get("data", {})


def _tokenizer(source: _Source, fit: np.ndarray, config: TokenizerConfig, key: str, root: str | None,
               log: Callable[[str], None], resume_with: tuple[Tokenizer, dict] | None = None) -> Tokenizer:
    """The tokenizer trained on the ``fit`` rows, streamed; kept beside the caches so a rerun skips training it (a
    resume on the same data takes its run's, ``resume_with``). ``key`` (``_tokenizer_key``), its ``data_key``,
    names the data and settings."""
    path = cache_root(root) / "tokenizers" / f"{key}.json"
    if resume_with is not None and resume_with[1].get("tokenizer_key") == key:
        log("resuming with the run's tokenizer (the data it learned is unchanged)")
        tokenizer = resume_with[0]
    elif path.is_file():
        log(f"reusing tokenizer {path}")
        tokenizer = Tokenizer.load(path, config)
    else:
        log(f"training the tokenizer on {len(fit)} streamed texts")
        wanted = np.zeros(int(fit.max()) + 1, dtype=bool)
        wanted[fit] = True
        texts = (text for row, (text, _) in enumerate(source.records()) if row < len(wanted) and wanted[row])
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, Tokenizer.train(texts, config).backend.to_str(pretty=True).encode())
        # Read back, so this run and every rerun hash the very same tokenizer JSON into the cache key.
        tokenizer = Tokenizer.load(path, config)
    tokenizer.data_key = key
    return tokenizer


def _tokenizer_key(source: _Source, fit: np.ndarray, config: TokenizerConfig) -> str:
    """What names the tokenizer trained on ``source``'s ``fit`` rows: the data, its rows, the settings."""
    return cache_key({"data": source.identity, "settings": config.keyed(),
                      "fit_rows": hashlib.sha256(np.ascontiguousarray(fit, dtype=np.int64).tobytes()).hexdigest()})


def _file_sources(data: DataSettings, keyed: bool = True) -> tuple[dict[str, _Source], np.ndarray]:
    """The files' sources and the training file's labels (``keyed``: their identities hashed, for cache keys)."""
    from ..data.files import check_file, file_labels, iter_records

    for path in (data.train_file, data.validation_file, data.test_file):
        if path:
            check_file(path)
    labels, label_names = file_labels(data.train_file, data.text_column, data.label_column)

    def source(path: str, order: np.ndarray | None = None) -> _Source:
        index = {name: i for i, name in enumerate(label_names)}

        def records():
            # (run_made=False: training's own held-out files, whose unknown labels the training file lacks)
            for _, text, name in iter_records(path, data.text_column, data.label_column, label_names=label_names,
                                              run_made=False):
                yield text, index[name]

        return _Source(_file_source_identity(data, path, keyed), records, label_names, name=Path(path).name,
                       order=order, where=str(path))

    # A row's order is its position, as load_file records it (an array: the file may not fit in memory).
    sources = {"train": source(data.train_file, order=np.arange(len(labels)))}
    if data.validation_file:
        sources["validation"] = source(data.validation_file)
    if data.test_file:
        sources["test"] = source(data.test_file)
    return sources, labels


def _file_source_identity(data: DataSettings, path: str, keyed: bool = True) -> dict:
    """What names a file's split in a cache key (``keyed``: its bytes' identity too): what is read from the bytes as
    well, their extension saying how (a .tsv copy of a .csv file holds other rows; a .csv.gz is read decompressed)."""
    from ..data.files import compression_suffix, data_suffix

    return (file_identity(path) if keyed else {}) | {"format": data_suffix(path) + compression_suffix(path),
                                                      "text_column": data.text_column,
                                                      "label_column": data.label_column}


def current_test_key(data: DataSettings, seed: int) -> str | None:
    """The ``test_key`` of a token-cache run's test data as its file or dataset gives it now (None: it has no test
    split): config.json records the one it was scored on, which a token-cache run has instead of a test_sha256.

    >>> # current_test_key(DataSettings(train_file="big.jsonl", test_file="test.jsonl", token_cache=True), seed=0)
    """
    if data.dataset:  # (the dataset's splits are loaded, as load_cached_data loads them, to hash the test split)
        source = _dataset_sources(data, data.data_seed(seed))[0].get("test")
        return None if source is None else cache_key(source.identity)
    return cache_key(_file_source_identity(data, data.test_file)) if data.test_file else None


def _dataset_sources(data: DataSettings, seed: int) -> tuple[dict[str, _Source], np.ndarray]:
    splits = dataset_splits(data, seed)
    label_names = splits.train.label_names

    def source(split: str, dataset: TextDataset) -> _Source:
        dataset = align_labels(dataset, label_names)
        # Loaders read archives whose timestamps say little; the content itself names the data.
        digest = hashlib.sha256()
        for text, label in zip(dataset.texts, dataset.labels):
            digest.update(f"{label}\t{text}\0".encode("utf-8"))
        return _Source({"dataset": data.dataset, "split": split, "sha256": digest.hexdigest()},
                       lambda: zip(dataset.texts, dataset.labels), label_names, data.dataset, dataset.groups,
                       dataset.order)

    sources = {"train": source("train", splits.train)}
    for split in ("validation", "test"):
        if getattr(splits, split) is not None:
            sources[split] = source(split, getattr(splits, split))
    if data.refit:
        # (what the run trained on, as load_data compares it: a sample is not the whole set)
        train = training_sample(splits.train, data.max_train_examples, seed)
        learned = refit_additions(splits, train, data)
        if "validation" in sources:
            sources["validation"].refit_learns = "validation" in learned
        if WITHHELD in learned:
            sources[WITHHELD] = source(WITHHELD, splits.extra[WITHHELD])
    return sources, np.asarray(splits.train.labels)
