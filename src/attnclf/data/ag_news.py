"""AG News topic classification (Zhang, Zhao & LeCun 2015): 4 classes, 120k train, 7.6k test.

Read from an ``ag_news/`` (or ``ag_news_csv/``) folder holding ``train.csv``,
``test.csv`` and ``classes.txt``. The CSVs have no header; each row is
``"class","title","description"`` with class 1..4 (line k of ``classes.txt``).
A text is the title and the description joined as one passage.

The crawl behind AG News mangled its text, and ``clean`` undoes it: a
backslash stood for a line break (``social\\network``), ``\\$`` for ``$``,
and each ``&`` of an HTML entity became a space (``company #39;s``,
``Johnson  amp; Johnson``, `` quot;``).
"""

from __future__ import annotations

import csv
import html
import re
from pathlib import Path

from ..errors import DataError, shown
from .base import Splits, TextDataset
from .download import Remote, first_complete, lacking, not_found, present, refuse_partial
from .registry import Source

_MIRROR = "https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/555590db4219b1243abb1918effd6a7425a2d75f"
# The mirror torchtext and Hugging Face download from; sha256s as in ag_news/MANIFEST.md.
REMOTES = {
    "ag_news": tuple(
        Remote(f"{_MIRROR}/data/ag_news_csv/{name}", f"ag_news/{name}", sha256)
        for name, sha256 in [
            ("train.csv", "76a0a2d2f92b286371fe4d4044640910a04a803fdd2538e0f3f29a5c6f6b672e"),
            ("test.csv", "521465c2428ed7f02f8d6db6ffdd4b5447c1c701962353eb2c40d548c3c85699"),
            ("classes.txt", "612dbfa932f07a6ed837295a7d5746ce7412e7bb4bc32ba919fdb3cda3a1b9b5"),
        ]
    )
}

# What a whole copy holds; the shared datasets' has all but train.csv.
FILES = tuple(Path(remote.path).name for remote in REMOTES["ag_news"])
# What the test split alone needs (`evaluate --dataset`).
TEST_FILES = ("test.csv", "classes.txt")

_BARE_ENTITY = re.compile(r" ?(#\d+|quot|amp|lt|gt|hellip);")
_LINE_BREAK = re.compile(r"\\+(?!\$)")


_JOINER = ". "  # between an item's title and its description: one passage, the title its first sentence


def clean(text: str) -> str:
    """AG News text with its crawl escapes undone and whitespace collapsed.

    >>> clean(r"Johnson  amp; Johnson #39;s \\$10 bid\\for  quot;Guidant quot;")
    'Johnson & Johnson\\'s $10 bid for "Guidant"'
    """
    text = _LINE_BREAK.sub(" ", text).replace("\\$", "$")
    text = _BARE_ENTITY.sub(lambda m: f"&{m.group(1)};", text)
    return " ".join(html.unescape(text).split())


def _folders(data_dirs: list[Path]) -> list[Path]:
    return [d / name for d in data_dirs for name in ("ag_news", "ag_news_csv")]


def locate(data_dirs: list[Path]) -> Path | None:
    """The first whole folder, else the first with ``train.csv``, else the first with ``test.csv``."""
    folders = _folders(data_dirs)
    holding = [folder for wanted in ("train.csv", "test.csv") for folder in folders if present(folder / wanted)]
    return first_complete(holding, lambda folder: True, is_complete)


def is_complete(folder: Path) -> bool:
    """Whether ``folder`` holds all three files (with something in each): the shared datasets lack train.csv, and a
    download cut short may have fetched train.csv alone."""
    return not lacking(folder, FILES)


def _names(folder: Path) -> list[str]:
    classes = (folder / "classes.txt").read_text(encoding="utf-8")
    return [line.strip() for line in classes.splitlines() if line.strip()]


def _read(path: Path, names: list[str], split: str) -> TextDataset:
    classes = [str(k) for k in range(1, len(names) + 1)]
    texts, labels = [], []
    with open(path, newline="", encoding="utf-8") as f:
        rows = csv.reader(f, strict=True)
        try:
            for row in rows:
                if len(row) != 3 or row[0] not in classes:
                    raise DataError(f"ag_news: {path}, line {rows.line_num}: expected class 1-{len(names)}, "
                                    f"title, description, got {shown(row, most=200)}")
                title, description = clean(row[1]), clean(row[2])
                sep = " " if title.endswith((".", "!", "?")) else _JOINER  # (a title that ends a sentence: a space)
                texts.append(f"{title}{sep}{description}")
                labels.append(int(row[0]) - 1)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise DataError(f"ag_news: {path}, line {rows.line_num}: {exc}") from None
    return TextDataset(texts, labels, names, split, "ag_news")


def load(data_dirs: list[Path], seed: int = 0) -> Splits:
    """Train and test in file order; label names from ``classes.txt``.

    >>> # splits = load([Path("/data")])
    >>> # len(splits.train), len(splits.test), splits.train.label_names
    >>> # -> (120000, 7600, ['World', 'Sports', 'Business', 'Sci/Tech'])
    """
    folder = locate(data_dirs)
    if folder is None:
        raise not_found("ag_news", data_dirs, REMOTES["ag_news"][0].path)
    refuse_partial("ag_news", folder, FILES, REMOTES["ag_news"])
    names = _names(folder)
    return Splits(
        train=_read(folder / "train.csv", names, "train"),
        test=_read(folder / "test.csv", list(names), "test"),
    )


def load_test(data_dirs: list[Path]) -> TextDataset:
    """Only the test split, for folders without ``train.csv`` (such as the shared datasets): read from the first
    folder holding ``test.csv`` and ``classes.txt``, else from the first with ``test.csv``, which says what it lacks
    (not from ``locate``'s, which may hold ``train.csv`` alone).

    >>> # len(load_test([Path("/work/shared/datasets")]))  # 7600
    """
    holding = [folder for folder in _folders(data_dirs) if present(folder / "test.csv")]
    folder = first_complete(holding, lambda folder: True, lambda folder: not lacking(folder, TEST_FILES))
    if folder is None:
        raise not_found("ag_news", data_dirs, REMOTES["ag_news"][1].path)
    refuse_partial("ag_news", folder, TEST_FILES, REMOTES["ag_news"])
    return _read(folder / "test.csv", _names(folder), "test")


SOURCE = Source(
    name="ag_news",
    description="AG News topics (World, Sports, Business, Sci/Tech), 120k train / 7.6k test",
    load=load,
    locate=locate,
    num_classes=4,
    is_complete=is_complete,
    load_test=load_test,
    text_fields=("title", "description"),
    joined_by=_JOINER,
)
