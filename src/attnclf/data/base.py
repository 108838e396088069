"""The one object every data source returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence


@dataclass
class TextDataset:
    """Labelled texts of one split.

    ``labels[i]`` is an index into ``label_names``. ``groups`` optionally names
    the group each text belongs to (IMDB: the movie) so a validation split can
    keep a group on one side. ``order`` optionally says when each text was
    written, as a sortable number (20 Newsgroups: its article id; a file: its
    row), so a validation split can hold out the latest texts. When
    ``multi_label`` is set, ``labels[i]`` is instead a sorted tuple of indices
    (the text's label set, possibly empty); ``attnclf.data.multilabel.multi_hot``
    turns those into a 0/1 matrix.

    >>> ds = TextDataset(["good", "bad"], [1, 0], ["neg", "pos"], split="train")
    >>> len(ds), ds.label_names[ds.labels[0]]
    (2, 'pos')
    """

    texts: list[str]
    labels: list[int] | list[tuple[int, ...]]
    label_names: list[str]
    split: str = "train"
    name: str = ""
    groups: list[str] | None = None
    multi_label: bool = False
    order: list[int] | None = None

    def __post_init__(self) -> None:
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
        """The examples at ``indices``, in that order."""
        return TextDataset(
            texts=[self.texts[i] for i in indices],
            labels=[self.labels[i] for i in indices],
            label_names=list(self.label_names),
            split=split or self.split,
            name=self.name,
            groups=None if self.groups is None else [self.groups[i] for i in indices],
            multi_label=self.multi_label,
            order=None if self.order is None else [self.order[i] for i in indices],
        )


@dataclass
class Splits:
    """What a source yields: train, test, and an official validation split if it has one."""

    train: TextDataset
    test: TextDataset | None = None
    validation: TextDataset | None = None
    extra: dict[str, TextDataset] = field(default_factory=dict)  # e.g. IMDB "unsup"
