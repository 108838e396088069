"""Label sets: reading them from a file's label field, and the 0/1 matrix models train on.

A multi-label text carries a set of labels, possibly empty. In JSON lines and
Parquet the label field is a list (``["sports", "politics"]``, ``[]`` for no
label); in CSV and TSV it is one cell split on a delimiter (``sports|politics``,
an empty cell for no label). ``DEFAULT_LABEL_DELIMITER`` is ``|``, which rarely
occurs in label names and needs no quoting in CSV.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Sequence

import numpy as np

from ..errors import shown

DEFAULT_LABEL_DELIMITER = "|"
# The columns of the files attnclf writes (predict --output, evaluate --errors) that hold label sets: "|"-joined in CSV
# and TSV, as a multi-label file's labels are, so that `--label-column predicted_labels` reads them back.
LABEL_SET_COLUMNS = ("true_labels", "predicted_labels", "missed_labels", "extra_labels")
# Characters files join label sets by, other than the delimiter given: a class name holding one is probably a set
SUSPECT_LABEL_SEPARATORS = ",;|/"


def is_missing_label(value: Any) -> bool:
    """Whether a label field holds no value: null, or a NaN (JSON's NaN, a Parquet float column's gap, the "NaN"
    pandas writes for one with na_rep or astype(str)), which is a gap in the data, not a class called "nan".

    >>> [is_missing_label(value) for value in (None, float("nan"), " NaN", "nano", 0)]
    [True, True, True, False, False]
    """
    return (value is None or isinstance(value, float) and math.isnan(value)
            or isinstance(value, str) and value.strip().lower() == "nan")


def parse_label_set(value: Any, delimiter: str = DEFAULT_LABEL_DELIMITER) -> tuple[str, ...]:
    """The label names in one label field, duplicates dropped, in the order given.

    Raises ``ValueError`` with the problem (the caller adds file, line and column): a missing field, a member
    that is empty or missing (``x||y``, ``x|NaN``), which is a gap in the data, never a label, or a cell holding a
    list, tuple or set written as text (``['x', 'y']``), which split on the delimiter would be one class, or a
    delimiter escaped (``x\\|y``), which no reading of a cell undoes.

    >>> parse_label_set("sports | politics")
    ('sports', 'politics')
    >>> parse_label_set(["b", "a", "b"]), parse_label_set(""), parse_label_set([])
    (('b', 'a'), (), ())
    """
    if is_missing_label(value):  # (an empty cell is an empty set; a NaN is not a label called "NaN")
        marker = "" if value is None else f" ({value!r})"
        raise ValueError(f"missing label set{marker} (write [] in JSON, or an empty cell, for a text with no labels)")
    if isinstance(value, str):
        if not value.strip():
            return ()
        if kind := _written_collection(value):
            raise ValueError(f"label set {shown(value)} is a {kind} written as text, as pandas' to_csv writes one, not "
                             f"labels joined by {delimiter!r} (df[column].str.join({delimiter!r}) joins them; "
                             f"JSON lines and Parquet take lists)")
        items: Sequence[Any] = value.split(delimiter)
        if any(item.endswith("\\") for item in items[:-1]):  # (split there, "a\\|b" would be a class "a\\")
            raise ValueError(f"label set {shown(value)} escapes {delimiter!r} with a backslash, which is read as no "
                             f"escape (a label holding {delimiter!r} needs another --label-delimiter)")
    elif isinstance(value, (list, tuple)):
        items = value
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    else:
        raise ValueError(f"label set {shown(value)} is a {type(value).__name__}; expected a list of labels "
                         f"or labels separated by {delimiter!r}")
    names: dict[str, None] = {}  # ordered and unique
    for item in items:
        if is_missing_label(item):  # (a pandas join of a set with a gap: as a whole NaN cell, no class "NaN")
            raise ValueError(f"label set {shown(value)} holds {shown(item)}, a missing value, not a label name")
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise ValueError(f"label set {shown(value)} holds {shown(item)}, not a label name")
        name = str(item).strip()
        if not name:
            raise ValueError(f"label set {shown(value)} holds an empty label name")
        names[name] = None
    return tuple(names)


def _written_collection(cell: str) -> str | None:
    """The kind ("list", "tuple", "set") of Python or JSON literal a CSV/TSV cell is, as pandas writes a column of
    them ("['a', 'b']", '["a"]', "[]"; scikit-learn's MultiLabelBinarizer.inverse_transform gives tuples, "('a',)"),
    or None for labels: a name in brackets ("[draft]", "(draft)") is no literal, and stays a label.

    >>> [_written_collection(cell) for cell in ("['a', 'b']", '["a"]', " [] ", "('a',)", "()", "{'a'}", "set()")]
    ['list', 'list', 'list', 'tuple', 'tuple', 'set', 'set']
    >>> [_written_collection(cell) for cell in ("[draft]", "(draft)", "a|[b]", "{}", "('a')")]
    [None, None, None, None, None]
    """
    cell = cell.strip()
    if cell[:1] + cell[-1:] not in ("[]", "()", "{}") and cell != "set()":
        return None
    try:
        value = ast.literal_eval(cell)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return type(value).__name__ if isinstance(value, (list, tuple, set)) else None


def multi_hot(label_sets: Sequence[Sequence[int]], num_labels: int) -> np.ndarray:
    """A (texts, labels) 0/1 matrix from label-index sets.

    >>> multi_hot([(0, 2), ()], 3).tolist()
    [[1, 0, 1], [0, 0, 0]]
    """
    matrix = np.zeros((len(label_sets), num_labels), dtype=np.int64)
    for row, indices in enumerate(label_sets):
        matrix[row, list(indices)] = 1
    return matrix
