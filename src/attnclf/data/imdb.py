"""IMDB Large Movie Review Dataset (Maas et al. 2011): 25k train, 25k test, pos/neg.

Read straight from ``aclImdb_v1.tar.gz`` (one streaming pass, nothing
extracted) or from an extracted ``aclImdb/`` folder. Streaming the archive
takes about 3 s, so there is no parsed cache to keep in sync.

``train.groups`` and ``test.groups`` hold each review's movie (its IMDB title
id, from ``urls_{pos,neg}.txt``) so a validation split can keep a movie on one
side, as test does. The 50k unlabelled reviews are not part of ``load``: they
have no label for a ``TextDataset`` to hold and would double its memory; get
them with ``load_unsup``.
"""

from __future__ import annotations

import re
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


def load(data_dirs: list[Path], seed: int = 0) -> Splits:
    """Train and test, each sorted by label then review id; ``groups`` = movie id.

    >>> # splits = load([Path("/work/shared/datasets")])
    >>> # len(splits.train), splits.train.label_names, splits.train.groups[0]  # (25000, ['neg', 'pos'], 'tt0064354')
    """
    path = locate(data_dirs)
    if path is None:
        raise not_found("imdb", data_dirs, REMOTES["imdb"][0].path)
    reviews: dict[tuple[str, str], list[tuple[int, str]]] = {}
    urls: dict[tuple[str, str], list[str]] = {}
    for name, data in _files(path, _LABELLED):
        if review := _REVIEW.fullmatch(name):
            split, label, review_id = review.groups()
            reviews.setdefault((split, label), []).append((int(review_id), data.decode("utf-8")))
        else:
            urls[_URLS.fullmatch(name).groups()] = data.decode("utf-8").splitlines()

    def split(name: str) -> TextDataset:
        texts, labels, groups = [], [], []
        for index, label in enumerate(LABEL_NAMES):
            if (name, label) not in reviews or (name, label) not in urls:
                raise damaged("imdb", path, f"it has no aclImdb/{name}/{label}/ reviews or no urls_{label}.txt",
                              REMOTES["imdb"][0])
            movies = urls[name, label]
            for review_id, text in sorted(reviews[name, label]):
                if review_id >= len(movies):
                    raise DataError(f"imdb: {path}: aclImdb/{name}/urls_{label}.txt has no line {review_id}")
                texts.append(text)
                labels.append(index)
                groups.append(_movie(movies[review_id]))
        return TextDataset(texts, labels, list(LABEL_NAMES), name, "imdb", groups)

    return Splits(train=split("train"), test=split("test"))


def load_unsup(data_dirs: list[Path]) -> list[str]:
    """The unlabelled reviews of ``aclImdb/train/unsup``, in id order, less the 270 of its 50,000 that copy a test
    review: whatever reads them (word vectors, pretraining, the bench scripts' pools) never reads a test text.

    >>> # texts = load_unsup([Path("/work/shared/datasets")])
    >>> # len(texts)  # 49730
    """
    path = locate(data_dirs)
    if path is None:
        raise not_found("imdb", data_dirs, REMOTES["imdb"][0].path)
    reviews, test = [], set()
    for name, data in _files(path, _UNSUP_OR_TEST):  # (one pass: the archive is read through either way)
        if match := _UNSUP.fullmatch(name):
            reviews.append((int(match.group(1)), data))
        else:
            test.add(data)
    return [data.decode("utf-8") for _, data in sorted(reviews) if data not in test]


SOURCE = Source(
    name="imdb",
    description="IMDB movie reviews, pos/neg, 25k train / 25k test (Maas et al. 2011)",
    load=load,
    locate=locate,
    num_classes=2,
    unlabelled=load_unsup,
)
