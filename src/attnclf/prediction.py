"""What every prediction backend (PyTorch, ONNX) shares, in plain Python: the input check and the result."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .errors import AttnclfError
from .text.cleaning import unicode_problem


def shaped(values):
    """``values`` as a numpy array if it is an array-like that numpy reads but that has no shape of its own: pyarrow's
    arrays (a Parquet column), whose items are arrow scalars, not ``str`` or ``int``, and whose ``to_numpy`` refuses
    to copy strings or booleans; anything else (pandas, numpy, lists) as it is.

    >>> class Column:  # as pyarrow's arrays: numpy reads it, and it has no shape
    ...     def __array__(self, dtype=None, copy=None):
    ...         return np.array(["a", "b"], dtype=object)
    >>> shaped(Column()), shaped(["a", "b"])
    (array(['a', 'b'], dtype=object), ['a', 'b'])
    """
    return np.asarray(values) if hasattr(values, "__array__") and not hasattr(values, "shape") else values


def check_texts(texts: Sequence[str], name: str | None = None) -> list[str]:
    """``texts`` as a list, or one line saying which item is not a string, or not one UTF-8 can encode; ``name``:
    what the caller calls them (scikit-learn's ``X``: "X[1] is int").

    >>> check_texts(("good", "bad"))
    ['good', 'bad']
    >>> check_texts(["good", "half a pair " + chr(0xD800)])
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: text 1 is not valid Unicode: a lone surrogate (U+D800) at character 12
    """
    texts = shaped(texts)  # (pyarrow's strings would be StringScalars)
    expected = f"pass a list of texts{f' as {name}' if name else ''}"
    if isinstance(texts, str):
        raise AttnclfError(f"{expected}, not a single string")
    if isinstance(texts, (bytes, bytearray)):  # (whose items are ints)
        raise AttnclfError(f"{expected}, not {type(texts).__name__}; decode it first")
    if texts is None or isinstance(texts, (dict, set, frozenset)) or not hasattr(texts, "__iter__"):
        # (a dict would give its keys, a set an order of its own: answers that match no input)
        raise AttnclfError(f"{expected}, not {type(texts).__name__}")
    if getattr(texts, "ndim", 1) != 1:
        # A DataFrame iterates over its column names, a 2-D array over its rows: either would answer other texts than
        # the rows it holds, silently for a DataFrame (one answer, for the word "review"). A 0-d array cannot iterate.
        raise AttnclfError(f"{expected}, not a {texts.ndim}-dimensional {type(texts).__name__} (shape "
                           f"{tuple(texts.shape)}): pass one column of it (df['review'], not df[['review']])")
    texts = list(texts)
    for i, text in enumerate(texts):
        item = f"{name}[{i}]" if name else f"text {i}"
        if not isinstance(text, str):  # (the missing-value checks only for what cannot be a text anyway)
            nan = isinstance(text, (float, np.floating)) and np.isnan(text)  # (pandas' empty cell: NaN)
            pandas = sys.modules.get("pandas")  # (its NA, a nullable string column's empty cell: pandas is loaded)
            if text is None or nan or pandas is not None and text is pandas.NA:
                raise AttnclfError(f"{item} is {'nan' if nan else repr(text)}, a missing value, not a text")
            raise AttnclfError(f"{item} is {type(text).__name__}, not a string")
        if problem := unicode_problem(text):
            raise AttnclfError(f"{item} is {problem}")
    return [str(text) for text in texts]  # (numpy's str_ items become plain strings)


def trained_text_column(config: dict) -> str | list[str]:
    """The column a model read its texts from (a list: the columns joined into each text): a run's (or an
    ensemble's) config.json, or an ONNX export.json.

    >>> trained_text_column({"settings": {"data": {"text_column": "review"}}}), trained_text_column({})
    ('review', 'text')
    >>> trained_text_column({"text_column": ["title", "body"]})
    ['title', 'body']
    """
    return config.get("text_column") or config.get("settings", {}).get("data", {}).get("text_column") or "text"


def joined_text_columns(config: dict) -> dict | None:
    """The columns each text a model read was joined from, and what joined them, as a client must send a text: the
    run's own (``--text-column`` twice), or its dataset's (AG News: a title and a description); None for texts read
    whole, from one column.

    >>> joined_text_columns({"text_column": ["title", "body"]})
    {'names': ['title', 'body'], 'joined_by': '\\n'}
    >>> joined_text_columns({"settings": {"data": {"dataset": "ag_news"}}})
    {'names': ['title', 'description'], 'joined_by': '. '}
    """
    from .data.files import TEXT_JOINER

    if "text_columns" in config:  # an ONNX export's, recorded as it was made: it names no dataset to look up
        return config["text_columns"]
    columns = trained_text_column(config)
    if isinstance(columns, list):
        return {"names": columns, "joined_by": TEXT_JOINER}
    dataset = config.get("settings", {}).get("data", {}).get("dataset")
    if dataset is None:  # (the registry imports scikit-learn, which the ONNX service otherwise never does)
        return None
    from .data.registry import sources

    source = sources().get(dataset)
    if source is not None and source.text_fields:
        return {"names": list(source.text_fields), "joined_by": source.joined_by}
    return None


@dataclass
class Prediction:
    """One text's prediction.

    ``attention`` holds the pooling layer's weight per token (aligned with
    ``tokens``): where the pooling layer looked, not why the model decided.
    It is None for models that do not pool by attention.
    """

    label: str
    confidence: float
    probabilities: dict[str, float]
    tokens: list[str] = field(default_factory=list)
    attention: list[float] | None = None

    @classmethod
    def from_scores(cls, probabilities: np.ndarray, label_names: list[str], tokens: list[str],
                    attention: np.ndarray | None) -> "Prediction":
        """The prediction of one probability row (columns in ``label_names`` order).

        >>> Prediction.from_scores(np.array([0.2, 0.8]), ["neg", "pos"], ["fine"], None).label
        'pos'
        """
        best = int(np.argmax(probabilities))
        return cls(
            label=label_names[best],
            confidence=float(probabilities[best]),
            probabilities={name: float(p) for name, p in zip(label_names, probabilities)},
            tokens=tokens,
            attention=None if attention is None else [float(w) for w in attention],
        )

    def top_tokens(self, k: int = 3) -> list[tuple[str, float]]:
        """The ``k`` most attended tokens with their weights."""
        if self.attention is None:
            return []
        order = np.argsort(-np.asarray(self.attention), kind="stable")[:k]
        return [(self.tokens[i], float(self.attention[i])) for i in order]

    def to_dict(self) -> dict:
        return {"label": self.label, "confidence": self.confidence, "probabilities": self.probabilities,
                "tokens": self.tokens, "attention": self.attention}


@dataclass
class LabelSetPrediction:
    """One text's prediction by a multi-label model.

    ``labels`` holds every label whose probability reaches its threshold
    (tuned on validation, see ``thresholds.json``), most probable first; it
    may be empty. ``probabilities`` are independent per label (a sigmoid
    each), so they need not sum to 1. ``tokens`` and ``attention`` are as in
    ``Prediction``.
    """

    labels: list[str]
    probabilities: dict[str, float]
    tokens: list[str] = field(default_factory=list)
    attention: list[float] | None = None

    @classmethod
    def from_scores(cls, probabilities: np.ndarray, thresholds: np.ndarray, label_names: list[str],
                    tokens: list[str], attention: np.ndarray | None) -> "LabelSetPrediction":
        """The prediction of one row of per-label probabilities.

        >>> LabelSetPrediction.from_scores(np.array([0.6, 0.1, 0.9]), np.array([0.5, 0.5, 0.5]),
        ...                                ["a", "b", "c"], [], None).labels
        ['c', 'a']
        """
        order = np.argsort(-probabilities, kind="stable")
        return cls(
            labels=[label_names[i] for i in order if probabilities[i] >= thresholds[i]],
            probabilities={name: float(p) for name, p in zip(label_names, probabilities)},
            tokens=tokens,
            attention=None if attention is None else [float(w) for w in attention],
        )

    def to_dict(self) -> dict:
        return {"labels": self.labels, "probabilities": self.probabilities, "tokens": self.tokens,
                "attention": self.attention}
