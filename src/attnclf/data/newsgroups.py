"""20 Newsgroups, "bydate" version: 11,314 train and 7,532 test posts, 20 groups.

Read from ``20news-bydate.tar.gz`` (streamed, nothing extracted) or from a
folder holding the extracted ``20news-bydate-{train,test}/<group>/<id>``.
A text is the raw post, headers included, decoded as Latin-1 (the files are
bytes, not all UTF-8). Posts come sorted by group, then numeric id; a
dataset's ``order`` is that id. Article ids grow with time on a news server:
in 16 of the 20 groups, 67-100% of test posts have ids above the 90th
percentile of the group's training ids (42-64% in the other four), so
``--hold-out latest`` holds out posts from the end of the training period,
as the test split comes after it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from ..errors import DataError
from .base import Splits, TextDataset
from .download import Remote, damaged, not_found, present, tar_files
from .registry import Source

ARCHIVE = "20news-bydate.tar.gz"
REMOTES = {
    # sklearn's mirror and checksum of the official archive (a rebuilt archive,
    # such as the shared datasets' copy, has other bytes but the same posts).
    "20newsgroups": (
        Remote(
            url="https://ndownloader.figshare.com/files/5975967",
            path=f"20newsgroups/{ARCHIVE}",
            sha256="8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610",
        ),
    )
}

# Only files named by a numeric article id are posts; this skips strays such as .DS_Store.
_POST = re.compile(r"20news-bydate-(train|test)/([^/]+)/(\d+)")


def locate(data_dirs: list[Path]) -> Path | None:
    """The archive, or the folder holding the extracted splits; first match wins (an empty archive counts as
    missing)."""
    for d in data_dirs:
        for folder in (d / "20newsgroups", d):
            if present(folder / ARCHIVE):
                return folder / ARCHIVE
            if (folder / "20news-bydate-train").is_dir():
                return folder
    return None


def _posts(path: Path) -> Iterator[tuple[str, str, int, bytes]]:
    """(split, group, id, raw bytes) of every post in the archive or folder."""
    if path.is_dir():
        for file in path.glob("20news-bydate-*/*/*"):
            match = _POST.fullmatch(file.relative_to(path).as_posix())
            if match and file.is_file():
                yield match.group(1), match.group(2), int(match.group(3)), file.read_bytes()
        return
    for match, data in tar_files(path, _POST, "20newsgroups", REMOTES["20newsgroups"][0]):
        yield match.group(1), match.group(2), int(match.group(3)), data


def load(data_dirs: list[Path], seed: int = 0) -> Splits:
    """Train and test; label names are the sorted group names of train.

    >>> # splits = load([Path("/work/shared/datasets")])
    >>> # len(splits.train), len(splits.test), splits.train.label_names[0]  # (11314, 7532, 'alt.atheism')
    """
    path = locate(data_dirs)
    if path is None:
        raise not_found("20newsgroups", data_dirs, REMOTES["20newsgroups"][0].path)
    posts = {"train": [], "test": []}
    for split, group, post_id, data in _posts(path):
        # Latin-1 maps every byte to a character, so no post can fail to decode.
        posts[split].append((group, post_id, data.decode("latin-1")))
    # A copy without one split (the train folder extracted alone) would train, then fail to score an empty test set.
    for split_name in ("train", "test"):
        if not posts[split_name]:
            raise damaged("20newsgroups", path, f"no posts under 20news-bydate-{split_name}/ (it holds "
                          f"{len(posts['train']):,} train and {len(posts['test']):,} test posts)", REMOTES["20newsgroups"][0])
    names = sorted({group for group, _, _ in posts["train"]})
    index = {name: i for i, name in enumerate(names)}

    def split(name: str) -> TextDataset:
        rows = sorted(posts[name])
        unknown = sorted({group for group, _, _ in rows} - index.keys())
        if unknown:
            raise DataError(f"20newsgroups: {path}: test groups {unknown} do not appear in train")
        texts = [text for _, _, text in rows]
        labels = [index[group] for group, _, _ in rows]
        order = [post_id for _, post_id, _ in rows]
        return TextDataset(texts, labels, list(names), name, "20newsgroups", order=order)

    return Splits(train=split("train"), test=split("test"))


SOURCE = Source(
    name="20newsgroups",
    description="20 Newsgroups (bydate), raw posts, 20 groups, 11,314 train / 7,532 test",
    load=load,
    locate=locate,
    num_classes=20,
)
