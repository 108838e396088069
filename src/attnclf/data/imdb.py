"""IMDB Large Movie Review Dataset (Maas et al. 2011): 25k train, 25k test, pos/neg.

Read straight from ``aclImdb_v1.tar.gz`` (one streaming pass, nothing
extracted) or from an extracted ``aclImdb/`` folder. Streaming the archive
takes about 3 s, so there is no parsed cache to keep in sync.

``train.groups`` and ``test.groups`` hold each review's movie (its IMDB title
id, from ``urls_{pos,neg}.txt``) so a validation split can keep a movie on one
side, as test does. The 50k unlabelled reviews are not part of ``load``: they
have no label for a ``TextDataset`` to hold and would double its memory; get
them with ``load_unsup``, or with the splits in one pass with
``load_with_unsup``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

from ..errors import DataError
from .base import Splits, TextDataset
from .download import Remote, damaged, not_found, present, tar_files
from .registry import Source

ARCHIVE = "aclImdb_v1.tar.gz"
LABEL_NAMES = ["neg", "pos"]
REMOTES = {
    "imdb": (
        Remote(
            url="https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
            path=f"imdb/{ARCHIVE}",
            sha256="c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
        ),
    )
}

_REVIEW = re.compile(r"aclImdb/(train|test)/(pos|neg)/(\d+)_\d+\.txt")
_URLS = re.compile(r"aclImdb/(train|test)/urls_(pos|neg)\.txt")
_LABELLED = re.compile(f"{_REVIEW.pattern}|{_URLS.pattern}")
_UNSUP = re.compile(r"aclImdb/train/unsup/(\d+)_\d+\.txt")
_UNSUP_OR_TEST = re.compile(f"{_UNSUP.pattern}|aclImdb/test/(?:pos|neg)/\\d+_\\d+\\.txt")
_LABELLED_OR_UNSUP = re.compile(f"{_LABELLED.pattern}|{_UNSUP.pattern}")
_MOVIE = re.compile(r"/title/(tt\d+)")


def locate(data_dirs: list[Path]) -> Path | None:
    """The archive or ``aclImdb/`` folder to read, first match wins (an empty archive counts as missing)."""
    for d in data_dirs:
        for path in (d / "imdb" / ARCHIVE, d / "imdb" / "aclImdb", d / ARCHIVE, d / "aclImdb"):
            if present(path) or path.is_dir():
                return path
    return None


def _files(path: Path, pattern: re.Pattern[str]) -> Iterator[tuple[str, bytes]]:
    """(``aclImdb/...`` name, contents) of each file whose name matches ``pattern``."""
    if path.is_dir():
        for file in path.rglob("*.txt"):
            name = f"aclImdb/{file.relative_to(path).as_posix()}"
            if pattern.fullmatch(name):
                yield name, file.read_bytes()
        return
    for match, data in tar_files(path, pattern, "imdb", REMOTES["imdb"][0]):
        yield match.group(), data


def _movie(url_line: str) -> str:
    match = _MOVIE.search(url_line)
    return match.group(1) if match else url_line.strip()


def _located(data_dirs: list[Path]) -> Path:
    """``locate``'s path, or the error that says where it was looked for and how to get it."""
    path = locate(data_dirs)
    if path is None:
        raise not_found("imdb", data_dirs, REMOTES["imdb"][0].path)
    return path


@dataclass
class _Read:
    """What one pass over the files found: the labelled reviews, (id, text) by (split, label); the lines of each
    split's urls file by (split, label); the unlabelled reviews, (id, text)."""

    reviews: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    urls: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    unsup: list[tuple[int, str]] = field(default_factory=list)


def _read(path: Path, pattern: re.Pattern[str]) -> _Read:
    """The files of ``path`` that ``pattern`` matches (of ``_REVIEW``, ``_URLS`` and ``_UNSUP``), in one pass."""
    read = _Read()
    for name, data in _files(path, pattern):
        if review := _REVIEW.fullmatch(name):
            split, label, review_id = review.groups()
            read.reviews.setdefault((split, label), []).append((int(review_id), data.decode("utf-8")))
        elif unsup := _UNSUP.fullmatch(name):
            read.unsup.append((int(unsup.group(1)), data.decode("utf-8")))
        else:
            read.urls[_URLS.fullmatch(name).groups()] = data.decode("utf-8").splitlines()
    return read


def _splits(path: Path, read: _Read) -> Splits:
    """Train and test of ``read`` (read from ``path``), each sorted by label then review id; ``groups`` = movie id."""
    def split(name: str) -> TextDataset:
        texts, labels, groups = [], [], []
        for index, label in enumerate(LABEL_NAMES):
            if (name, label) not in read.reviews or (name, label) not in read.urls:
                raise damaged("imdb", path, f"it has no aclImdb/{name}/{label}/ reviews or no urls_{label}.txt",
                              REMOTES["imdb"][0])
            movies = read.urls[name, label]
            for review_id, text in sorted(read.reviews[name, label]):
                if review_id >= len(movies):
                    raise DataError(f"imdb: {path}: aclImdb/{name}/urls_{label}.txt has no line {review_id}")
                texts.append(text)
                labels.append(index)
                groups.append(_movie(movies[review_id]))
        return TextDataset(texts, labels, list(LABEL_NAMES), name, "imdb", groups)

    return Splits(train=split("train"), test=split("test"))


def _unsup_less_test(read: _Read) -> list[str]:
    """The unlabelled reviews of ``read`` in id order, less those that copy one of its test reviews."""
    test = {text for (split, _), reviews in read.reviews.items() if split == "test" for _, text in reviews}
    return [text for _, text in sorted(read.unsup) if text not in test]


def load(data_dirs: list[Path], seed: int = 0) -> Splits:
    """Train and test, each sorted by label then review id; ``groups`` = movie id.

    >>> # splits = load([Path("/work/shared/datasets")])
    >>> # len(splits.train), splits.train.label_names, splits.train.groups[0]  # (25000, ['neg', 'pos'], 'tt0064354')
    """
    path = _located(data_dirs)
    return _splits(path, _read(path, _LABELLED))


def load_unsup(data_dirs: list[Path]) -> list[str]:
    """The unlabelled reviews of ``aclImdb/train/unsup``, in id order, less the 270 of its 50,000 that copy a test
    review: whatever reads them (word vectors, pretraining, the bench scripts' pools) never reads a test text.

    >>> # texts = load_unsup([Path("/work/shared/datasets")])
    >>> # len(texts)  # 49730
    """
    # (the test reviews in the same pass: the archive is read through either way)
    return _unsup_less_test(_read(_located(data_dirs), _UNSUP_OR_TEST))


def load_with_unsup(data_dirs: list[Path], seed: int = 0) -> Splits:
    """``load``'s splits with ``load_unsup``'s reviews as their ``unlabelled``, in one pass over the archive, which
    `attnclf vectors`, `pretrain --dataset imdb` and a run counting word vectors read
    (``registry.load_splits(..., unlabelled=True)``): read apart, it was decompressed twice.

    >>> # splits = load_with_unsup([Path("/work/shared/datasets")])
    >>> # len(splits.train), len(splits.unlabelled)  # (25000, 49730)
    """
    path = _located(data_dirs)
    read = _read(path, _LABELLED_OR_UNSUP)
    return replace(_splits(path, read), unlabelled=_unsup_less_test(read))


SOURCE = Source(
    name="imdb",
    description="IMDB movie reviews, pos/neg, 25k train / 25k test (Maas et al. 2011)",
    load=load,
    locate=locate,
    num_classes=2,
    load_with_unlabelled=load_with_unsup,
)
