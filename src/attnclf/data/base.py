"""The one object every data source returns."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Iterable
from typing import Sequence

from ..errors import DataError, shown


@dataclass(frozen=True)
class ReadFrom:
    """The data file (CSV / TSV / JSONL / Parquet) a split's texts were read from, a text per row in the file's order
    unless ``rows`` says which row (from 0, below the header) each text is (a split carved from the file), and the
    columns the texts and labels came from: its other columns (an ``id``) can be read back beside them.

    >>> ReadFrom("test.csv", "review", "stars").label_column
    'stars'
    """

    path: str
    text_column: str | Sequence[str]
    label_column: str
    rows: tuple[int, ...] | None = None

    def row_of(self, text: int) -> int:
        """The file's row (from 0, below the header) of the split's text ``text`` (from 0).

        >>> ReadFrom("train.csv", "text", "label", rows=(4, 9)).row_of(1), ReadFrom("t.csv", "text", "label").row_of(1)
        (9, 1)
        """
        return text if self.rows is None else self.rows[text]


@dataclass
class TextDataset:
    """Labelled texts of one split.

    ``labels[i]`` is an index into ``label_names``, which are strings (a name given as 1 is "1", as a run names
    the class 1). ``groups`` optionally names
    the group each text belongs to (IMDB: the movie) so a validation split can
    keep a group on one side. ``order`` optionally says when each text was
    written, as a sortable number (20 Newsgroups: its article id; a file: its
    row), so a validation split can hold out the latest texts. When
    ``multi_label`` is set, ``labels[i]`` is instead a sorted tuple of indices
    (the text's label set, possibly empty); ``attnclf.data.multilabel.multi_hot``
    turns those into a 0/1 matrix.
    ``read_from``: the data file the texts are the rows of, when read from one.

    >>> ds = TextDataset(["good", "bad"], [1, 0], ["neg", "pos"], split="train")
    >>> len(ds), ds.label_names[ds.labels[0]], TextDataset(["good"], [0], [1, 0]).label_names
    (2, 'pos', ['1', '0'])
    """

    texts: list[str]
    labels: list[int] | list[tuple[int, ...]]
    label_names: list[str]
    split: str = "train"
    name: str = ""
    groups: list[str] | None = None
    multi_label: bool = False
    order: list[int] | None = None
    read_from: ReadFrom | None = None  # (None once concatenated: its texts no longer rows of one file)

    def __post_init__(self) -> None:
        # A class is named by its label as a string, as runs name theirs ("1" for 1): names made of a notebook's
        # int labels must match a run's, not be "never seen in training (known: 0, 1)".
        self.label_names = [str(name) for name in self.label_names]
        if len(self.texts) != len(self.labels):
            raise ValueError(f"{len(self.texts)} texts but {len(self.labels)} labels")
        if self.groups is not None and len(self.groups) != len(self.texts):
            raise ValueError(f"{len(self.texts)} texts but {len(self.groups)} groups")
        if self.order is not None and len(self.order) != len(self.texts):
            raise ValueError(f"{len(self.texts)} texts but {len(self.order)} order keys")

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def num_classes(self) -> int:
        return len(self.label_names)

    def subset(self, indices: Sequence[int], split: str | None = None) -> "TextDataset":
        """The examples at ``indices``, in that order, as ``split`` (default: this one's).

        >>> TextDataset(["good", "bad", "fine"], [1, 0, 1], ["neg", "pos"]).subset([2, 0], "validation").texts
        ['fine', 'good']
        """
        return TextDataset(
            texts=[self.texts[i] for i in indices],
            labels=[self.labels[i] for i in indices],
            label_names=list(self.label_names),
            split=split or self.split,
            name=self.name,
            groups=None if self.groups is None else [self.groups[i] for i in indices],
            multi_label=self.multi_label,
            order=None if self.order is None else [self.order[i] for i in indices],
            # (a split carved from a file is still its rows: `evaluate --errors` names them and their other columns)
            read_from=None if self.read_from is None else
            replace(self.read_from, rows=tuple(self.read_from.row_of(i) for i in indices)),
        )

    @classmethod
    def of_named_labels(cls, texts: Sequence[str], labels: Sequence, split: str = "test",
                        multi_label: bool = False) -> "TextDataset":
        """Texts and their labels by name (a multi-label text's: a list of names), as a notebook holds them; numbers
        name classes as a run names them ("1" for 1), and the names are the labels', sorted.

        >>> data = TextDataset.of_named_labels(["a fine film", "a dull film"], ["pos", "neg"])
        >>> data.labels, data.label_names
        ([1, 0], ['neg', 'pos'])
        """
        # (a string is a sequence too: one text or one label would be read letter by letter)
        if isinstance(texts, str):
            raise DataError(f"texts: {shown(texts)} is one text, not a list of texts: give ([{shown(texts)}], labels)")
        if isinstance(labels, str):
            raise DataError(f"labels: {shown(labels)} is one label, not a list of labels: give (texts, "
                            f"[{shown(labels)}])")
        texts, labels = list(texts), list(labels)
        if multi_label and (single := next((label for label in labels if isinstance(label, str)), None)) is not None:
            raise DataError(f"labels: {shown(single)} is one name, not a list of names: give each text of multi-label "
                            f"data its labels as a list, [{shown(single)}]")
        if multi_label and (at := next((i for i, label in enumerate(labels) if not isinstance(label, Iterable)),
                                       None)) is not None:  # (a DataFrame's missing label set is None or NaN)
            raise DataError(f"labels[{at}]: {shown(labels[at])} is not a list of names; give each text of multi-label "
                            f"data its labels as a list ([] for none)")
        named = [tuple(map(str, label)) for label in labels] if multi_label else [str(label) for label in labels]
        names = sorted({name for label in named for name in label} if multi_label else set(named))
        index = {name: i for i, name in enumerate(names)}
        numbered = [tuple(index[name] for name in label) for label in named] if multi_label else \
            [index[name] for name in named]
        return cls(texts, numbered, names, split=split, multi_label=multi_label)

    @classmethod
    def join(cls, parts: Sequence["TextDataset"], split: str) -> "TextDataset":
        """The parts' texts one after another, as one split (groups and order kept where every part has them).

        >>> a, b = TextDataset(["good"], [1], ["neg", "pos"]), TextDataset(["bad"], [0], ["neg", "pos"])
        >>> TextDataset.join([a, b], "train").texts
        ['good', 'bad']
        """
        first = parts[0]
        if any(part.label_names != first.label_names for part in parts):
            raise DataError(f"{first.name}: the parts joined into {split} have different label names")

        def every(attribute: str) -> list | None:
            values = [getattr(part, attribute) for part in parts]
            return None if any(v is None for v in values) else [x for v in values for x in v]

        return TextDataset(texts=[t for part in parts for t in part.texts],
                           labels=[y for part in parts for y in part.labels],
                           label_names=list(first.label_names), split=split, name=first.name,
                           groups=every("groups"), multi_label=first.multi_label, order=every("order"))


@dataclass
class Splits:
    """What a source yields: train, test, and an official validation split if it has one; ``unlabelled``, where
    asked for (``registry.load_splits(..., unlabelled=True)``), the texts it ships without labels (IMDB's)."""

    train: TextDataset
    test: TextDataset | None = None
    validation: TextDataset | None = None
    extra: dict[str, TextDataset] = field(default_factory=dict)  # e.g. WITHHELD
    unlabelled: list[str] = field(default_factory=list)


# Splits.extra's key for training texts a source keeps out of training only so that its validation split stays
# unseen (GLUE SST-2: the phrases cut from its held-out sentences). A refit, which has no validation, trains on them.
WITHHELD = "withheld"


# The built-in sentiment sets name one pair of classes two ways (IMDB's folders neg/pos, SST-2's negative/positive):
# a run of one scored on the other (`evaluate --dataset`) reads them as the same classes. Nowhere else: a file of the
# user's may keep 'neg' and 'negative' apart, and a run's own test and validation texts share its names.
LABEL_SYNONYMS = {"neg": "negative", "negative": "neg", "pos": "positive", "positive": "pos"}
