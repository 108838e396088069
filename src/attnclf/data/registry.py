"""Data sources by name, and where their files are looked for.

A source is a small module exposing ``SOURCE = Source(...)``. Generated sources
need no files; file-backed ones look in, in order: an explicit ``data_dir``,
``$ATTNCLF_DATA_DIR``, the user cache (``$ATTNCLF_CACHE`` or
``~/.cache/attnclf``), and only then download, if the caller allows it.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..checks import by_field
from ..errors import AttnclfError, DataError, unknown_name
from .base import Splits, TextDataset

# Modules that define a SOURCE; order is the order `attnclf datasets` lists them.
_SOURCE_MODULES = [
    "attnclf.data.generated",
    "attnclf.data.imdb",
    "attnclf.data.sst2",
    "attnclf.data.ag_news",
    "attnclf.data.newsgroups",
]


@dataclass(frozen=True)
class Source:
    """A named dataset.

    ``load(data_dirs, seed)`` returns the splits, the same for every seed (a run's seed carves its validation
    split from train later, in ``load_data``; ``learned_text_warnings`` reads one copy for all seeds); ``data_dirs``
    are the folders to search (see ``candidate_dirs``). ``locate(data_dirs)`` returns the path
    the data would be read from, or None when it is not available locally.
    Generated sources set ``generated=True`` and ignore ``data_dirs``; ``tests_on_training``, the toy sets, whose
    test and validation splits are their training set by design (training warns of no texts shared between them).
    ``load_with_unlabelled(data_dirs, seed)``, where a corpus ships texts without labels (IMDB's 50,000), returns
    ``load``'s splits with those, less any copy of a test text, as ``Splits.unlabelled``, in one read of the files
    (``load_splits(..., unlabelled=True)``): `attnclf vectors` and a run's ``--embeddings count`` count them with the
    training texts.
    ``multi_label``: each text has a set of labels; runs on it train multi-label without being told.
    ``is_complete(path)``, for a located copy that may hold only some splits (the shared AG News has only its
    test split), tells whether it is whole; a download then fetches the rest. ``load_test(data_dirs)``, for such a
    source, reads the test split alone (what `evaluate --dataset` needs), from a copy with or without the rest.
    ``text_fields``, where the loader joins each text from several fields of a record (AG News: a title and a
    description), names them, and ``joined_by`` is what it puts between them: serve's /model tells clients so.
    """

    name: str
    description: str
    load: Callable[[list[Path], int], Splits]
    locate: Callable[[list[Path]], Path | None] = lambda dirs: None
    generated: bool = False
    tests_on_training: bool = False
    num_classes: int | None = None
    load_with_unlabelled: Callable[[list[Path], int], Splits] | None = None
    multi_label: bool = False
    is_complete: Callable[[Path], bool] = lambda path: True
    load_test: Callable[[list[Path]], TextDataset] | None = None
    text_fields: tuple[str, ...] = ()
    joined_by: str = ""


def user_cache_dir() -> Path:
    """Where downloads (and token caches, ``text.cache``) go: ``$ATTNCLF_CACHE``, else ``~/.cache/attnclf``.

    >>> # user_cache_dir()  # -> PosixPath('/home/me/.cache/attnclf')
    """
    return Path(os.environ.get("ATTNCLF_CACHE", Path.home() / ".cache" / "attnclf"))


def candidate_dirs(data_dir: str | Path | None = None, found_in: str | Path | None = None) -> list[Path]:
    """Folders searched for dataset files, most specific first; ``found_in``, where a run found its data, last."""
    dirs: list[Path] = []
    if data_dir:
        dirs.append(Path(data_dir))
    if os.environ.get("ATTNCLF_DATA_DIR"):
        dirs.append(Path(os.environ["ATTNCLF_DATA_DIR"]))
    dirs.append(user_cache_dir())
    if found_in and Path(found_in) not in dirs:
        dirs.append(Path(found_in))
    return dirs


def data_dir_refusal(data_dir: str | Path | None, flag: str = "--data-dir") -> str | None:
    """Why ``data_dir`` (given with ``flag``) cannot be searched for datasets: it is missing, or a file; None where it
    is a folder, or not given. (Refused, not skipped: the default places searched instead would hide the typo.)

    >>> data_dir_refusal("/no/such/place")
    '--data-dir /no/such/place: no such folder'
    """
    if not data_dir or Path(data_dir).expanduser().is_dir():
        return None
    if Path(data_dir).expanduser().exists():
        return f"{flag} {data_dir} is a file; give the folder holding the datasets"
    return f"{flag} {data_dir}: no such folder"


_registry: dict[str, Source] | None = None


def sources() -> dict[str, Source]:
    """All registered sources by name, in the order `attnclf datasets` lists them.

    >>> list(sources())[:3]
    ['demo', 'topics', 'synthetic']
    """
    global _registry
    if _registry is None:
        found: dict[str, Source] = {}
        for module_name in _SOURCE_MODULES:
            module = importlib.import_module(module_name)
            for source in getattr(module, "SOURCES", [getattr(module, "SOURCE", None)]):
                if source is not None:
                    found[source.name] = source
        _registry = found
    return _registry


def get_source(name: str) -> Source:
    """The source called ``name``; a ``DataError`` naming the known ones for any other.

    >>> get_source("imdb").num_classes
    2
    """
    known = sources()
    if name not in known:
        raise DataError(unknown_name("dataset", name, known))
    return known[name]


def is_toy_set(dataset: str | None) -> bool:
    """Whether ``dataset`` is a toy set, whose test (and validation) split is its training set by design: its scores
    are on its training texts. False for no dataset (a user's files) or one not registered here.

    >>> is_toy_set("toy-reversal"), is_toy_set("imdb"), is_toy_set(None)
    (True, False, False)
    """
    source = sources().get(dataset or "")
    return source is not None and source.tests_on_training


def datasets_table(data_dir: str | Path | None = None, extra: Sequence[tuple[str, str, str]] = ()) -> str:
    """A row per dataset, its name, where it stands (generated, found locally and where, not found locally) and what
    it is, then ``extra`` rows (name, status, description) as given; under them the folders searched, in order (those
    of ``candidate_dirs(data_dir)``, a missing one said to be missing).

    >>> datasets_table().splitlines()[1].split()[:2]
    ['demo', 'generated']
    """
    dirs = candidate_dirs(data_dir)
    rows = []
    for name, source in sources().items():
        where = None if source.generated else source.locate(dirs)
        if source.generated:
            status = "generated"
        elif where is None:
            status = "not found locally"
        else:
            status = f"local: {where}" if source.is_complete(where) else f"local, some splits only: {where}"
        rows.append((name, status, source.description))
    rows += extra
    width = max(len(status) for _, status, _ in rows)
    lines = [f"{'name':<16} {'status':<{width}}  description"]
    lines += [f"{name:<16} {status:<{width}}  {description}" for name, status, description in rows]
    # Else a misspelt ATTNCLF_DATA_DIR reads as "not found locally", with nothing to say where that was.
    lines.append(f"searched, in order: "
                 f"{', '.join(str(d) if d.is_dir() else f'{d} (no such folder)' for d in dirs)}")
    return "\n".join(lines)


def load_splits(name: str, data_dir: str | Path | None = None, seed: int = 0,
                found_in: str | Path | None = None, unlabelled: bool = False) -> Splits:
    """Load a dataset by name; ``unlabelled``: with the texts it ships without labels in ``Splits.unlabelled``
    (``Source.load_with_unlabelled``; none for most).

    >>> splits = load_splits("synthetic")
    >>> len(splits.train), len(splits.test), load_splits("synthetic", unlabelled=True).unlabelled
    (3200, 800, [])
    """
    source = get_source(name)
    dirs = candidate_dirs(data_dir, found_in)
    if unlabelled and source.load_with_unlabelled is not None:
        return source.load_with_unlabelled(dirs, seed)
    return source.load(dirs, seed)


def load_test_split(name: str, data_dir: str | Path | None = None) -> TextDataset:
    """The split a model is scored on with ``--dataset name``: its test split, else its official validation split,
    read without the training split where the source can (the shared AG News has only its test split).

    >>> len(load_test_split("synthetic"))
    800
    """
    source = get_source(name)
    dirs = candidate_dirs(data_dir)
    if source.load_test is not None:
        return source.load_test(dirs)
    splits = source.load(dirs, 0)
    data = splits.test or splits.validation
    if data is None:
        raise DataError(f"{name} has no test split")
    return data


def folder_holding(name: str, data_dir: str | Path | None = None, found_in: str | Path | None = None) -> Path | None:
    """The folder searched (``candidate_dirs``) that ``name`` is read from; None for a generated source, or
    one not found. (Not the first folder holding some of its files: a source may prefer a later, complete copy.)

    >>> folder_holding("synthetic") is None
    True
    """
    source = sources().get(name)
    if source is None or source.generated:
        return None
    folders = candidate_dirs(data_dir, found_in)
    located = source.locate(folders)
    if located is None:
        return None
    return next((folder for folder in folders if source.locate([folder]) == located), None)


def unlabelled_corpus(name: str, data_dir: str | Path | None = None, download: bool = False) -> list[str]:
    """Every text a dataset offers for unsupervised learning: its training split (without the labels) and
    any texts it ships unlabelled; never its test split. ``download``: fetch a missing public dataset first.

    >>> len(unlabelled_corpus("synthetic"))
    3200
    """
    if download:
        from .download import ensure_available

        ensure_available(name, candidate_dirs(data_dir), download=True)
    splits = load_splits(name, data_dir, unlabelled=True)
    return list(splits.train.texts) + splits.unlabelled


def collect_unlabelled_texts(datasets: Sequence[str] = (), files: Sequence[str | Path] = (),
                             text_column: str | Sequence[str] | None = None, data_dir: str | Path | None = None,
                             download: bool = False, purpose: str = "learn from",
                             named: Callable[[str], str] = by_field) -> list[str]:
    """The texts to learn from without labels: each of ``datasets``' ``unlabelled_corpus`` (never a test split), then
    each of ``files``' texts (``read_texts``; ``text_column``, "text" if None, is a data file's column). Refuses no
    source at all and a ``text_column`` no file has columns for, naming the settings by ``named`` and what the
    texts are for by ``purpose`` ("count", "pretrain on").

    >>> len(collect_unlabelled_texts(["synthetic"]))
    3200
    >>> # collect_unlabelled_texts(files=["notes.txt", "reviews.csv"], text_column="review")
    """
    from .files import is_data_file, read_texts

    if not datasets and not files:
        raise AttnclfError(f"no text to {purpose}: give {named('datasets')} NAME and/or {named('files')} PATH")
    if text_column and not any(is_data_file(path) for path in files):
        raise AttnclfError(f"{named('text_column')} picks the column of a CSV / TSV / JSONL / Parquet {named('files')}")
    texts = []
    for name in datasets:
        texts += unlabelled_corpus(name, data_dir, download=download)
    for path in files:
        texts += read_texts(path, text_column or "text")
    return texts

