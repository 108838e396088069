"""A user's own labelled texts: CSV, TSV, JSON lines or Parquet, with named columns.

The format comes from the extension: ``.csv``, ``.tsv`` (a header row names the
columns; standard CSV quoting), ``.jsonl`` / ``.json`` / ``.ndjson`` (one JSON
object per line), ``.parquet`` (needs pyarrow). Rows are streamed, so only the
columns used are ever held in memory; ``iter_records`` hands them on one at
a time, for corpora larger than memory (``text/cache.py``).

The text may come from several columns (a title and a body): ``text_column``
is then a list, and a row's text is their values in that order, joined with a
newline; an empty or null value (a title left out) adds an empty string, but a
JSON line without one of the columns is an error, as with a single column.

Labels may be strings or integers. Training data defines the label names:
its distinct values, sorted (numerically when all are integers), as strings.
With ``multi_label=True`` each label field holds a set of labels (a JSON list,
or names split on ``label_delimiter`` in CSV/TSV; see ``data.multilabel``).
Every problem is a one-line ``DataError`` naming the file, the line (CSV, TSV,
JSON lines; the header is line 1) or row (Parquet, from 1), and the column.

fastText's supervised format works too, for files made for fastText (its tutorial's ``cooking.train``): a line per
text, its labels first as ``__label__NAME`` tokens, then the text (``__label__baking __label__bread how do i ...``).
A file is read so when its suffix is none of the data suffixes above and its first non-blank line starts with
``__label__``; every line must then have a label, and several labels are a label set (``multi_label``), as a JSON
list is. A ``__label__`` token later in a line is a label too, as fastText reads it, never text. Words end where
fastText's do, at ASCII whitespace alone: a no-break space is part of a label's name or of a word. Only fastText's
default prefix is known: its ``-label`` option takes any other, and with no prefix to look for, a plain text file whose
lines start with some word could not be told apart (``sed 's/__mine__/__label__/g'`` converts such a file). Such a file
has no columns: ``text_column`` and ``label_column`` name none of it (a run records them as given, and they name the
``text`` and ``label`` of ``iter_rows``' columns).

Texts without labels, to predict on or learn from (``read_texts``), come from
a data file's text column, from a fastText file's lines without their labels, or from plain UTF-8 text, one text per
line.

Any of these but Parquet (compressed inside already) may come compressed, as pandas and Hugging Face datasets read
them: ``reviews.csv.gz``, ``test.jsonl.bz2``, ``cooking.train.xz``. The suffix before ``.gz`` / ``.bz2`` / ``.xz``
says how to read what the file holds, and it is decompressed as a stream (the standard library's gzip, bz2, lzma),
never whole into memory; its lines are the decompressed text's, and a truncated or corrupt file is a one-line error.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import json
import lzma
import numbers
import re
import shlex
import sys
import zlib
from array import array
from contextlib import contextmanager
from decimal import Decimal
from itertools import islice
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from ..errors import NAME_LENGTH, DataError, first_few, shown
from ..text.cleaning import unicode_problem
from .base import ReadFrom, Splits, TextDataset
from .multilabel import DEFAULT_LABEL_DELIMITER, SUSPECT_LABEL_SEPARATORS, is_missing_label, parse_label_set

# (where, text values (one per text column), label value, every column's value by name), where = "line 7" or
# "row 7"; the label is None when no label column is read, the columns None unless the reader is asked for them
Row = tuple[str, tuple, Any, dict | None]
DATA_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json", ".ndjson", ".parquet")
# One text column's name, or several whose values are joined into one text per row
TextColumns = str | Sequence[str]
TEXT_JOINER = "\n"  # between a row's text columns: the title ends where the body starts, as a line does
COLUMNS_NAMED = 20  # a message lists a file's columns up to this many (a header-less file's first row may hold more)


def text_column_names(text_column: TextColumns) -> tuple[str, ...]:
    """The text columns ``text_column`` names, in order, or a one-line ``DataError`` for anything but a name or a
    list (or tuple) of names, an empty list, a non-string entry or a repeated column.

    >>> text_column_names("review"), text_column_names(["title", "body"])
    (('review',), ('title', 'body'))
    """
    if not isinstance(text_column, (str, list, tuple)):  # (None, a number; bytes or a dict would iterate as junk)
        raise DataError(f"text_column must be a column name or a list of them, not {type(text_column).__name__}")
    columns = (text_column,) if isinstance(text_column, str) else tuple(text_column)
    if not columns:
        raise DataError("no text column given: name one at least")
    for column in columns:
        if not isinstance(column, str):
            raise DataError(f"text column {column!r} is not a column name")
        if columns.count(column) > 1:
            raise DataError(f"text column {column!r} is named {columns.count(column)} times; name each once")
    return columns


def recorded_text_column(text_column: TextColumns) -> str | list[str]:
    """``text_column`` as config.json records it: one column as its name (as runs always have), several as a list.

    >>> recorded_text_column(["review"]), recorded_text_column(("title", "body"))
    ('review', ['title', 'body'])
    """
    columns = text_column_names(text_column)
    return columns[0] if len(columns) == 1 else list(columns)


UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")  # little- and big-endian


def _utf16(start: bytes) -> str | None:
    """What to say of bytes that start with UTF-16's byte-order mark, which Excel's "Unicode Text", Notepad's
    "Unicode" and Windows PowerShell's ``>`` write: else its first byte is named as one that is not UTF-8, which
    tells no one what to do.

    >>> _utf16("ok".encode("utf-16")), _utf16(b"ok")
    ("the file is UTF-16 (it starts with UTF-16's byte-order mark), not UTF-8; re-save the file as UTF-8", None)
    """
    if not start.startswith(UTF16_MARKS):
        return None
    return "the file is UTF-16 (it starts with UTF-16's byte-order mark), not UTF-8; re-save the file as UTF-8"


# How files of formats that are not text start (their "magic" bytes), what they are, what undoes that, and the suffix
# that reads them as they are: a download saved without its .gz, or a Parquet file named .csv, were told that a byte
# "is not UTF-8; re-save the file as UTF-8"
SIGNATURES = ((b"\x1f\x8b", "gzip-compressed", "decompress it (gunzip)", ".gz"),
              (b"BZh", "bzip2-compressed", "decompress it (bunzip2)", ".bz2"),
              (b"\xfd7zXZ\x00", "xz-compressed", "decompress it (unxz)", ".xz"),
              (b"\x28\xb5\x2f\xfd", "zstd-compressed", "decompress it (unzstd)", ""),
              (b"PK\x03\x04", "a zip archive", "unpack it (unzip)", ""),
              (b"PAR1", "a Parquet file", "", ".parquet"))


def _not_text(start: bytes, named: bool = True) -> str | None:
    """What to say of bytes, not UTF-8, that start as a compressed file's, an archive's or a Parquet file's do; else
    None. ``named``: the bytes are a file's, which a suffix can say how to read (not stdin's).

    >>> _not_text(b"\\x1f\\x8b\\x08\\x00"), _not_text(b"caf\\xe9")
    ('the file is gzip-compressed (it starts as those files do), not text: decompress it (gunzip), or add .gz to its \
name, which reads it decompressed', None)
    """
    for magic, kind, undo, suffix in SIGNATURES:
        if start.startswith(magic):
            if not undo:
                return f"the file is {kind} (it starts as those files do), not text: give it the suffix {suffix}"
            renamed = f", or add {suffix} to its name, which reads it decompressed" if suffix and named else ""
            return f"the file is {kind} (it starts as those files do), not text: {undo}{renamed}"
    return None


# A compressed file's last suffix: its format's name, how it is opened (decompressed as it is read), and the command
# that decompresses it
COMPRESSIONS = {".gz": ("gzip", gzip.open, "gunzip"), ".bz2": ("bzip2", bz2.open, "bunzip2"),
                ".xz": ("xz", lzma.open, "unxz")}
# What reading a truncated or corrupt compressed stream raises: gzip.BadGzipFile and bz2's "Invalid data stream" are
# OSErrors, a stream cut short an EOFError, a damaged deflate block zlib.error
DECOMPRESSION_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error)


def compression_suffix(path: str | Path) -> str:
    """The suffix that says ``path`` is compressed (``.gz``, ``.bz2``, ``.xz``, lower-cased), or "" for none.

    >>> compression_suffix("reviews.csv.GZ"), compression_suffix("reviews.csv")
    ('.gz', '')
    """
    suffix = Path(path).suffix.lower()
    return suffix if suffix in COMPRESSIONS else ""


def refuse_compressed_output(output: str | Path, command: str) -> None:
    """A one-line error for an output named as compressed: data files are read compressed, but written plain (a
    compressor is one command away); ``command`` is what writes it.

    >>> refuse_compressed_output("scored.csv", "predict")  # (plain: nothing said)
    >>> refuse_compressed_output("page.html.gz", "explain")
    Traceback (most recent call last):
    attnclf.errors.DataError: page.html.gz: explain writes uncompressed files; name the output page.html and \
compress it afterwards (gzip page.html)
    """
    output = Path(output)
    if suffix := compression_suffix(output):
        plain = output.with_suffix("")
        raise DataError(f"{output}: {command} writes uncompressed files; name the output {plain.name} and compress "
                        f"it afterwards ({COMPRESSIONS[suffix][0]} {shlex.quote(str(plain))})")


def data_suffix(path: str | Path) -> str:
    """The suffix that says how to read ``path`` (lower-cased): a compressed file's is the one before the
    compression's, "" for none.

    >>> data_suffix("reviews.CSV"), data_suffix("reviews.csv.gz"), data_suffix("cooking.train.xz"), data_suffix("a.gz")
    ('.csv', '.csv', '.train', '')
    """
    path = Path(path)
    return (path.with_suffix("") if compression_suffix(path) else path).suffix.lower()


def _raw_lines(path: Path) -> Iterator[bytes]:
    """The file's lines as bytes (each with its b"\\n"), decompressed as they are read if its suffix says it is
    compressed; a truncated or corrupt stream is a one-line ``DataError`` naming the file and the last line read."""
    compression = compression_suffix(path)
    if not compression:
        with open(path, "rb") as f:
            yield from f
        return
    name, opened, _ = COMPRESSIONS[compression]
    number = 0
    with opened(path, "rb") as f:
        lines = iter(f)
        while True:
            try:  # (the reading only: an error of the consumer's never enters a generator at its yield)
                raw = next(lines, None)
            except DECOMPRESSION_ERRORS as exc:
                detail = shown(" ".join(str(exc).split()), most=120, write=str)
                where = f": not a readable {name} file," if number == 0 else f", after line {number}:"
                raise DataError(f"{path}{where} truncated or corrupt {name} data ({detail}); "
                                f"{name} -t {shlex.quote(str(path))} tests the file") from None
            if raw is None:
                return
            number += 1
            yield raw


def _holds_nothing(path: Path) -> bool:
    """Whether the file holds no byte (a compressed one once decompressed); an empty Parquet file is a broken one."""
    if data_suffix(path) == ".parquet":
        return False
    if compression_suffix(path):
        return next(_raw_lines(path), b"") == b""
    return path.stat().st_size == 0


def utf8_lines(path: Path) -> Iterator[str]:
    """The file's lines, decoded (decompressed first, if it is compressed); a bad byte is reported by line and byte
    offset, in the decompressed text for a compressed file.

    >>> # next(utf8_lines(Path("cc.en.300.vec.gz")))  # '2000000 300\\n'
    """
    path = Path(path)
    offset, first = 0, b""
    decompressed = " of the decompressed text" * bool(compression_suffix(path))
    for number, raw in enumerate(_raw_lines(path), 1):
        first = first or raw  # (a binary file's first bytes say what it is, whichever of its lines fails)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            if number == 1 and (utf16 := _utf16(raw)):
                raise DataError(f"{path}, line 1: {utf16}") from None
            if not decompressed and (what := _not_text(first)):
                raise DataError(f"{path}: {what}") from None
            raise DataError(
                f"{path}, line {number}: byte 0x{raw[exc.start]:02x} at byte offset {offset + exc.start}"
                f"{decompressed} is not UTF-8; re-save the file as UTF-8"
            ) from None
        # A byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name.
        yield line.removeprefix("\ufeff") if number == 1 else line
        offset += len(raw)


def _looks_like_data(name: str) -> bool:
    """Whether a header's column name reads as a row's value: a number (a label, an id) or a sentence.

    >>> [_looks_like_data(name) for name in ("3", "-0.5", "Fears for T N pension", "review", "Topic (gold)")]
    [True, True, True, False, False]
    """
    try:
        float(name)
        return True
    except ValueError:
        return len(name.split()) > 3


def _near_miss(column: str, columns: Iterable[str]) -> str:
    """A hint naming the file's column that is ``column`` but for case or the spaces around it (``text, label``
    typed by hand, pandas' ``Label``), whose repr alone hardly shows the difference; else "".

    >>> _near_miss("label", ["text", " label"])
    " (the file's ' label' differs from it only in the spaces around it: name the column as the file does)"
    """
    for other in columns:
        if isinstance(other, str) and other != column and other.strip().casefold() == column.strip().casefold():
            differences = [what for what, differs in (("case", other.strip() != column.strip()),
                                                      ("the spaces around it", len(other) != len(column)))
                           if differs]
            return (f" (the file's {other!r} differs from it only in {' and '.join(differences)}: name the column as "
                    f"the file does)")
    return ""


def _fasttext_named_as_data(path: Path, first_line: str) -> str:
    """A hint for a data file whose first line starts with ``__label__``: fastText's format, read as such only from a
    file without a data suffix (the suffix says how to read a file), else "".

    >>> _fasttext_named_as_data(Path("reviews.csv"), "__label__pos a fine film").endswith("e.g. reviews.txt)")
    True
    """
    if not first_line.lstrip(FASTTEXT_SPACES).startswith(FASTTEXT_LABEL):
        return ""
    suffix, compression = data_suffix(path), compression_suffix(path)
    # (a compressed file keeps its compression's suffix, which says how to open it)
    renamed = f"{path.name[:len(path.name) - len(suffix) - len(compression)]}.txt{compression}"
    return (f" (its first line starts with {FASTTEXT_LABEL}: fastText's format is read from a file without a "
            f"{suffix} suffix; rename it, e.g. {renamed})")


def _default_named(column: str, role: str) -> str:
    """A hint for a file without the column of the default name for ``role`` ("text", "label"), which a user who
    named no column meets first: how to name the file's own; else "".

    >>> _default_named("text", "text")
    ' (say which holds the texts: --text-column NAME, text_column= in Python)'
    >>> _default_named("review", "text")
    ''
    """
    if column != role:  # (a column the user named: they know the flag)
        return ""
    return f" ({_how_to_name(role, 'the')})"


def _how_to_name(role: str, whose: str) -> str:
    """How to name the column holding ``whose`` texts or labels (``role``), on the command line and in Python.

    >>> _how_to_name("label", "this file's")
    "say which holds this file's labels: --label-column NAME, label_column= in Python"
    """
    return f"say which holds {whose} {role}s: --{role}-column NAME, {role}_column= in Python"


class MissingColumnError(DataError):
    """A file has no column of the name asked for: ``role`` is "text" or "label", ``hinted`` whether the message
    already says what to do (a near miss, a separator, the default's flag). ``run_columns`` adds a hint of its own."""

    def __init__(self, message: str, role: str, hinted: bool):
        super().__init__(message)
        self.role, self.hinted = role, hinted


@contextmanager
def run_columns(text_column: TextColumns | None = None, label_column: str | None = None):
    """Read a file inside it with a run's own columns wherever the caller named none (``text_column`` /
    ``label_column``: those named, None for the run's): a file lacking one, as a file of other columns' names does,
    is told that the name is the run's and how to name the file's own, where it would name only the columns.

    >>> # with run_columns(text_column=None):
    >>> #     read_texts("to_score.csv", "Review")  # DataError: ... (the run's, read from its training file; ...)
    """
    try:
        yield
    except MissingColumnError as exc:
        if exc.hinted or (text_column if exc.role == "text" else label_column):
            raise
        how = _how_to_name(exc.role, "this file's")
        raise DataError(f"{exc} (the run's, read from its training file; {how})") from None


# What an empty first column of a CSV header is, most often: pandas' DataFrame.to_csv writes the index by default.
PANDAS_INDEX = "(an unnamed first column: pandas' index, written by to_csv without index=False)"


def _missing_column(path: Path, column: str, columns: list[str], role: str) -> DataError:
    hint = _near_miss(column, columns)
    delimited = data_suffix(path) in (".csv", ".tsv")
    if len(columns) == 1 and delimited:
        # Excel in many locales saves "CSV" separated by semicolons; a .tsv may hold commas, a .csv tabs.
        other = next((char for char in (";", "\t", ",", "|") if char in columns[0]), None)
        if other:
            hint = (f" (the header looks separated by {'a tab' if other == chr(9) else repr(other)}: a .csv file is "
                    f"read as comma-separated, a .tsv as tab-separated; save it as one of those, or rename it)")
    if not hint and delimited and any(map(_looks_like_data, columns)):
        # (said as a condition: a header's column may be a question of a few words, a survey's)
        hint = " (the first line is read as the header naming the columns: if it is a row of data, add a header line)"
    if columns and isinstance(columns[0], str) and delimited:
        # (before any hint on its separators or header: a fastText line has commas and reads as data)
        hint = _fasttext_named_as_data(path, columns[0]) or hint
    hint = hint or _default_named(column, role)
    named = first_few(columns, most=COLUMNS_NAMED)
    if delimited and columns[0] == "":  # (a bare '' reads as a slip of the message's)
        named = named.replace("''", f"'' {PANDAS_INDEX}", 1)
    return MissingColumnError(f"{path}: no {role} column {column!r}; the columns are: {named}{hint}", role,
                              hinted=bool(hint))


def _quoted_after_space(field: str) -> bool:
    """Whether a CSV field, read, is spaces and then a quote: a quoted value typed after a separator and a space.

    >>> _quoted_after_space(' "pos"'), _quoted_after_space('"pos"'), _quoted_after_space(' 5" screen')
    (True, False, False)
    """
    return field[:1].isspace() and field.lstrip().startswith('"')


def _space_before_quote(separator: str) -> str:
    """What to say of such a field in a file separated by ``separator`` ("a comma", "a tab"). A quote opens a quoted
    field only as the field's first character: after a space (a hand-typed "a", "b") it and its closing quote are part
    of the value, which made a label '"pos"' a class of its own.

    >>> _space_before_quote("a tab").endswith(": remove the space after the tab")
    True
    """
    return (f"has a space before its opening quote, which CSV reads as part of the value, quotes and all: remove the "
            f"space after the {separator.removeprefix('a ')}")


def _csv_rows(path: Path, delimiter: str, text_columns: tuple[str, ...], label_column: str | None,
              whole: bool) -> Iterator[Row]:
    kind, separator = ("TSV", "a tab") if delimiter == "\t" else ("CSV", "a comma")
    # Texts longer than csv's default 128 KiB field limit are legitimate documents.
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))
    reader = csv.reader(utf8_lines(path), delimiter=delimiter, strict=True)
    start = 1  # line where the current record begins; a quoted field may span lines
    try:
        header = next(reader, None)
        if not header:
            raise DataError(f"{path}: empty file")
        for column, role in _wanted(text_columns, label_column):
            if column not in header:
                raise _missing_column(path, column, header, role)
            if header.count(column) > 1:  # which of them holds the texts (or labels) is anyone's guess
                raise DataError(f"{path}, line 1: the header names the {role} column {column!r} "
                                f"{header.count(column)} times; rename all but one")
        given = header  # (as the line wrote it, which a repeat of it is)
        if whole:
            header = _unnamed_columns_named(header)
            _refuse_repeated_columns(path, header, "line 1: the header")
        text_at = [header.index(column) for column in text_columns]
        label_at = None if label_column is None else header.index(label_column)
        start = reader.line_num + 1
        for row in reader:
            if row and not (len(row) == 1 < len(header) and not row[0].strip()):  # [] or ["  "]: a blank line
                if len(row) != len(header):
                    spaced = next((at for at, field in enumerate(row) if _quoted_after_space(field)), None)
                    raise DataError(
                        f"{path}, line {start}: {len(row)} fields but the header has {len(header)}; "
                        f"quote fields that contain {separator} or a quote"
                        + ("" if spaced is None else f" (field {spaced + 1}, {shown(row[spaced], most=10)}, "
                                                     f"{_space_before_quote(separator)})")
                    )
                # Files joined with `cat` (a job's part files, each with its header) repeat the header: read as a
                # row, it is a text "text" of a class "label", which a trained model then predicts. (A file of one
                # column is a list of texts, which may hold its name as one.)
                if len(given) > 1 and [row[0].removeprefix("\ufeff"), *row[1:]] == given:
                    raise DataError(f"{path}, line {start}: the header line again, read as a row (files joined with "
                                    f"their headers, as cat joins them?); remove it")
                if label_at is not None and _quoted_after_space(row[label_at]):
                    raise DataError(f"{path}, line {start}: label {shown(row[label_at])} in column {label_column!r} "
                                    f"{_space_before_quote(separator)}")
                yield (f"line {start}", tuple(row[at] for at in text_at), None if label_at is None else row[label_at],
                       dict(zip(header, row)) if whole else None)
            start = reader.line_num + 1
    except csv.Error as exc:
        if "new-line character seen in unquoted field" in str(exc):  # Python's own hint names no fix a user has
            raise DataError(f"{path}, line {start}: malformed {kind}: a line ends with a lone carriage return (CR); "
                            f"save the file with LF or CRLF line endings") from None
        raise DataError(f"{path}, line {start}: malformed {kind}: {exc}; a field that starts with a quote is read as "
                        f"quoted: quote the whole field and double the quotes inside it") from None


def _jsonl_rows(path: Path, text_columns: tuple[str, ...], label_column: str | None, whole: bool) -> Iterator[Row]:
    for number, line in enumerate(utf8_lines(path), 1):
        if not line.strip():
            continue
        line = line.rstrip("\r\n")
        try:
            record = json.loads(line)
            problem = ""
            if not isinstance(record, dict):
                problem = f"expected a JSON object, got {type(record).__name__}"
        except json.JSONDecodeError as exc:  # (its line and column count within this one line)
            where = "the end of the line" if exc.pos >= len(line) else f"column {exc.pos + 1}"
            problem = f"malformed JSON: {exc.msg} at {where}"
            if line.strip() == "{":  # (an object over several lines, as jq without -c and indent= write one)
                problem += ("; the object goes on over the next lines: JSON lines hold each object on one line "
                            "(jq -c writes them so)")
        except RecursionError:  # valid JSON beyond what Python's decoder reads
            problem = "values nested too deep to read (thousands of arrays or objects)"
        except ValueError as exc:  # (Python's own advice, set_int_max_str_digits, is not the user's to take)
            problem = f"a number too long to read ({str(exc).split(':')[0]}); write it as a string"
        if problem:
            if number == 1 and line.lstrip().startswith("["):
                problem += "; this is a JSON array, write one object per line (JSON lines)"
            if number == 1:
                problem += _fasttext_named_as_data(path, line)
            raise DataError(f"{path}, line {number}: {problem}")
        if line.count(":") > len(record) and (
                repeated := repeated_key(line, record, None if whole else _wanted(text_columns, label_column))):
            key, count, role = repeated
            named = f"the {role} column" if role else "column"
            raise DataError(f"{path}, line {number}: the line names {named} {shown(key, most=NAME_LENGTH)} {count} "
                            f"times (JSON keeps only the last); remove or rename all but one")
        for column, role in _wanted(text_columns, label_column):
            if column not in record:
                # (on a later line the file's rows just differ: the first line told the columns)
                hint = _near_miss(column, record) or (number == 1 and record and (
                    _pandas_orient(record, column) or _default_named(column, role)) or "")
                message = (f"{path}, line {number}: no {role} column {column!r}; this line has"
                           f"{': ' + first_few(record, most=COLUMNS_NAMED) if record else ' no columns'}{hint}")
                if number == 1 and record:  # (the file's columns, as a header names them)
                    raise MissingColumnError(message, role, hinted=bool(hint))
                raise DataError(message)
        yield (f"line {number}", tuple(record[column] for column in text_columns), record.get(label_column),
               record if whole else None)


def _pandas_orient(record: dict, column: str) -> str:
    """A hint for a JSON object that is a whole DataFrame as pandas' to_json writes it with orient='index' (an object
    per row, keyed by the row's index), 'split' or 'table' (its rows under "data"), without ``column`` where the rows
    have it; else "".

    >>> _pandas_orient({"0": {"text": "a", "label": "pos"}}, "text")[:60]
    " (pandas' to_json writes a DataFrame so with orient='index',"
    """
    orient = ("index" if all(isinstance(value, dict) and column in value for value in record.values()) else
              "split" if isinstance(record.get("data"), list) and "columns" in record else
              "table" if isinstance(record.get("data"), list) and "schema" in record else None)
    if orient is None:
        return ""
    return (f" (pandas' to_json writes a DataFrame so with orient={orient!r}, the whole table on one line: write one "
            f"object per row, df.to_json(path, orient='records', lines=True))")


KEY_END = re.compile(r'"[ \t\n\r]*:')  # a JSON key ends so (and, rarely, a text's escaped quote before a colon)


def repeated_key(line: str, record: dict, wanted: list[tuple[str, str]] | None) -> tuple[str, int, str] | None:
    """(key, times, role) for a JSON line whose object names a ``wanted`` column's key (any key, for ``None``) more
    than once, which ``json.loads`` reads as its last value alone, the others lost; else None. ``record`` is the line
    as read. Cheap tests on the raw line come first, so that a large file pays next to nothing: every key is followed
    by a colon, so a line with no more colons than ``record`` has keys repeats none (the caller's test, made before
    it calls, as a call per line costs too), and no more than one quote followed by a colon per key (``KEY_END``)
    either, where a text's colons are not (counted only that far: a text of many escaped quotes before colons cost
    4 times the parse of its line to count whole); only a line they cannot clear is parsed again, keeping its keys.

    >>> repeated_key('{"text": "a", "text": "b", "label": 1}', {"text": "b", "label": 1}, [("text", "text")])
    ('text', 2, 'text')
    >>> repeated_key('{"text": "a: b", "label": 1}', {"text": "a: b", "label": 1}, None)  # (a colon in a text)
    """
    if next(islice(KEY_END.finditer(line), len(record), None), None) is None:  # (the caller counted the colons)
        return None
    keys = [key for key, _ in json.loads(line, object_pairs_hook=list)]  # (the top level's pairs, in order)
    if len(set(keys)) == len(keys):
        return None
    for key, role in wanted if wanted is not None else ((key, "") for key in keys):
        if keys.count(key) > 1:
            return key, keys.count(key), role
    return None


def install_pyarrow() -> str:
    """The command that installs pyarrow, which Parquet files need, into this Python: its own pip (a bare `pip` may
    be another environment's, and an index's attnclf not this one).

    >>> install_pyarrow().endswith(" -m pip install 'pyarrow>=12'")
    True
    """
    return f"{shlex.quote(sys.executable)} -m pip install 'pyarrow>=12'"


def _parquet_rows(path: Path, text_columns: tuple[str, ...], label_column: str | None, whole: bool) -> Iterator[Row]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(f"{path}: reading Parquet needs pyarrow: {install_pyarrow()}") from None
    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises its own ArrowInvalid for a non-Parquet file
        raise DataError(f"{path}: not a readable Parquet file: {' '.join(str(exc).split())}") from None
    columns = parquet.schema_arrow.names
    for column, role in _wanted(text_columns, label_column):
        if column not in columns:
            raise _missing_column(path, column, columns, role)
        if columns.count(column) > 1:
            raise DataError(f"{path}: the schema names the {role} column {column!r} {columns.count(column)} times; "
                            f"rename all but one")
    if whole:
        _refuse_repeated_columns(path, columns, "the schema")
    number = 0
    wanted = None if whole else [column for column, _ in _wanted(text_columns, label_column)]
    try:  # (the reader's own errors only: a consumer's exceptions do not enter a generator at its yield)
        for batch in parquet.iter_batches(batch_size=8192, columns=wanted):
            labels = batch.column(label_column).to_pylist() if label_column is not None else [None] * batch.num_rows
            texts = zip(*(batch.column(column).to_pylist() for column in text_columns))
            rows = batch.to_pylist() if whole else [None] * batch.num_rows
            for values, label, row in zip(texts, labels, rows):
                number += 1
                yield f"row {number}", values, label, row
    except Exception as exc:  # corrupt data pages surface while reading, past the footer
        raise DataError(f"{path}, after row {number}: unreadable Parquet data: {' '.join(str(exc).split())}") from None


FASTTEXT_LABEL = "__label__"  # fastText's label prefix (its -label option's default)
# What ends a word for fastText (Dictionary::readWord): these ASCII characters alone, not str.split()'s or the regex
# \s's Unicode spaces, so a no-break space inside a label or beside one is part of its word there, and must be here.
FASTTEXT_SPACES = " \t\n\v\f\r\0"
_FASTTEXT_SPACE, _FASTTEXT_WORD = f"[{re.escape(FASTTEXT_SPACES)}]", f"[^{re.escape(FASTTEXT_SPACES)}]"
# A label token at the start of what is left of a line: a label ends at the next of fastText's spaces
_LEADING_LABEL = re.compile(rf"{_FASTTEXT_SPACE}*{FASTTEXT_LABEL}({_FASTTEXT_WORD}*)")


def _fasttext_rows(path: Path, whole: bool) -> Iterator[Row]:
    """A fastText file's texts and labels (``_rows``' label: the tuple of names after the prefix); with ``whole``,
    columns ``text`` and ``label`` (the names joined by ``DEFAULT_LABEL_DELIMITER``, as a CSV's label set is)."""
    for number, line in enumerate(utf8_lines(path), 1):
        if line.strip():
            labels, text = _labelled_line(line, f"{path}, line {number}")
            yield (f"line {number}", (text,), labels,
                   {"text": text, "label": DEFAULT_LABEL_DELIMITER.join(labels)} if whole else None)


def _labelled_line(line: str, where: str) -> tuple[tuple[str, ...], str]:
    """``_fasttext_line``'s labels and text of a line of a file in fastText's format, where every line has a label
    with a name: else a one-line ``DataError`` saying so, ``where`` naming the file and line."""
    labels, text = _fasttext_line(line)
    if not labels:
        raise DataError(f"{where}: no label; every line in fastText's format (the first non-blank line starts with "
                        f"{FASTTEXT_LABEL}) starts with {FASTTEXT_LABEL}NAME")
    if "" in labels:
        raise DataError(f"{where}: a label without a name ({FASTTEXT_LABEL!r} followed by a space): write "
                        f"{FASTTEXT_LABEL}NAME")
    return labels, text


def _fasttext_line(line: str) -> tuple[tuple[str, ...], str]:
    """A fastText line's label names, duplicates dropped, and its text: what follows the leading labels, less the
    spaces around it, less any label token further on (fastText takes those for labels as well, so they must not
    be read as text: the answer would leak into the input).

    >>> _fasttext_line("__label__baking __label__bread how do i get a crusty  loaf ?\\r\\n")
    (('baking', 'bread'), 'how do i get a crusty  loaf ?')
    >>> _fasttext_line("a dull film __label__neg")
    (('neg',), 'a dull film')
    """
    labels, at = [], 0
    while match := _LEADING_LABEL.match(line, at):
        labels.append(match.group(1))
        at = match.end()
    text = line[at:].strip(FASTTEXT_SPACES)
    if FASTTEXT_LABEL in text:
        words = re.findall(_FASTTEXT_WORD + "+", text)
        labels += [word.removeprefix(FASTTEXT_LABEL) for word in words if word.startswith(FASTTEXT_LABEL)]
        text = " ".join(word for word in words if not word.startswith(FASTTEXT_LABEL))
    return tuple(dict.fromkeys(labels)), text


def is_fasttext_file(path: str | Path) -> bool:
    """Whether ``path`` is a file in fastText's supervised format: its suffix (``data_suffix``) none of
    ``DATA_SUFFIXES`` and its first non-blank line (past a byte-order mark) starting with ``__label__``. A missing
    file is not.

    >>> # is_fasttext_file("cooking.train")  # True: its first line is '__label__sauce __label__cheese how much ...'
    """
    path = Path(path)
    if data_suffix(path) in DATA_SUFFIXES or not path.is_file():
        return False
    try:  # (a compressed file's first line is its decompressed text's: a corrupt one is a DataError here)
        for line in _raw_lines(path):
            if line.strip():
                unindented = line.removeprefix(b"\xef\xbb\xbf").lstrip(FASTTEXT_SPACES.encode())
                return unindented.startswith(FASTTEXT_LABEL.encode())
    except OSError:  # (unreadable: the reader that opens it next says why)
        return False
    return False


def columns_refusal(path: str | Path, flag: str) -> str:
    """What to say of ``flag`` (``--text-column``: a column's name or how one is read) given for ``path``, a file in
    fastText's format, which has no columns: it would go unread (and a run would record it).

    >>> columns_refusal("cooking.train", "--text-column")[:60]
    '--text-column names a column or how one is read, and cooking'
    """
    return (f"{flag} names a column or how one is read, and {path} is in fastText's format (a line per text, its "
            f"labels {FASTTEXT_LABEL}NAME first), which has none: drop {flag}")


def _in_label_column(path: str | Path, label_column: str) -> str:
    """Where a message says a label is, `` in column 'label'``: nowhere in a fastText file, which has no columns."""
    return f" in column {label_column!r}" * is_data_file(path)


def _unnamed_columns_named(header: list[str]) -> list[str]:
    """``header`` with its columns of no name named as pandas names them (``Unnamed: 3``, by position from 0) where
    there are several: a spreadsheet's trailing commas (``text,label,,``) give rows a column of no name each, which a
    copy of the rows (``predict --output``) could not tell apart. One such column (pandas' index) keeps its name.

    >>> _unnamed_columns_named(["text", "label", "", ""]), _unnamed_columns_named(["", "text"])
    (['text', 'label', 'Unnamed: 2', 'Unnamed: 3'], ['', 'text'])
    """
    if header.count("") < 2:
        return header
    return [name or f"Unnamed: {at}" for at, name in enumerate(header)]


def _refuse_repeated_columns(path: Path, columns: list[str], where: str) -> None:
    """One line for a file whose every column is read by name (``iter_rows``) where two share one: either's
    values would be lost.

    >>> _refuse_repeated_columns(Path("in.csv"), ["id", "text", "id"], "line 1: the header")
    Traceback (most recent call last):
    ...
    attnclf.errors.DataError: in.csv, line 1: the header names column 'id' 2 times; rename all but one
    """
    repeated = next((column for column in columns if columns.count(column) > 1), None)
    if repeated is not None:
        separator = ", " if where.startswith("line") else ": "
        raise DataError(f"{path}{separator}{where} names column {shown(repeated, most=NAME_LENGTH)} "
                        f"{columns.count(repeated)} times; rename all but one")


def _wanted(text_columns: tuple[str, ...], label_column: str | None) -> list[tuple[str, str]]:
    """The columns a reader needs, with their roles for error messages."""
    return [(column, "text") for column in text_columns] + ([] if label_column is None else [(label_column, "label")])


# Archives and compressions users meet that the standard library does not stream here (zip holds files, not a stream;
# zstd and lz4 need packages of their own): named, rather than read as text that is "not UTF-8"
UNREAD_PACKINGS = (".zip", ".zst", ".zstd", ".lz4", ".7z", ".rar", ".tar", ".tgz", ".br")


def _refuse_unread_packing(path: Path) -> None:
    """A one-line error for a file whose suffix says it is an archive or compressed in a way not read here, or an
    archive compressed in a way read here (``.tar.gz``: decompressed, it is still an archive).

    >>> _refuse_unread_packing(Path("reviews.csv.gz"))  # (read: nothing said)
    >>> _refuse_unread_packing(Path("reviews.tar.gz"))
    Traceback (most recent call last):
    attnclf.errors.DataError: reviews.tar.gz: a .tar.gz file is not read: a tar archive holds files, not one file's \
texts; unpack it
    """
    suffix = path.suffix.lower()
    if suffix in UNREAD_PACKINGS:
        raise DataError(f"{path}: a {suffix} file is not read: attnclf reads files compressed with gzip, bzip2 or xz "
                        f"(.gz, .bz2, .xz); unpack it, or compress it with gzip")
    if compression_suffix(path) and (inner := data_suffix(path)) in UNREAD_PACKINGS:
        raise DataError(f"{path}: a {inner}{suffix} file is not read: a {inner[1:]} archive holds files, not one "
                        f"file's texts; unpack it")


def check_file(path: str | Path) -> Path:
    """``path``, or a one-line error if it is a folder, missing, no regular file, or an archive (before a reader
    opens it).

    >>> check_file("/dev/null")
    Traceback (most recent call last):
    attnclf.errors.DataError: /dev/null: not a regular file (a pipe, socket or device): attnclf reads a file more \
than once; write it to a file first
    """
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path}: is a folder, not a file")
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if not path.is_file():  # (`--train-file <(zcat f.gz)` is a pipe, /dev/fd/63: read once, it would be gone)
        raise DataError(f"{path}: not a regular file (a pipe, socket or device): attnclf reads a file more than once; "
                        f"write it to a file first")
    _refuse_unread_packing(path)
    return path


def _rows(path: Path, text_columns: tuple[str, ...], label_column: str | None, whole: bool = False) -> Iterator[Row]:
    """The file's rows; with ``whole``, each with every column's value by name as well."""
    check_file(path)
    suffix, compression = data_suffix(path), compression_suffix(path)
    if suffix == ".parquet" and compression:
        raise DataError(f"{path}: Parquet is compressed inside already, so a compressed Parquet file is not read; "
                        f"decompress it ({COMPRESSIONS[compression][2]} {shlex.quote(str(path))})")
    if suffix in (".csv", ".tsv"):
        return _csv_rows(path, "\t" if suffix == ".tsv" else ",", text_columns, label_column, whole)
    if suffix in (".jsonl", ".json", ".ndjson"):
        return _jsonl_rows(path, text_columns, label_column, whole)
    if suffix == ".parquet":
        return _parquet_rows(path, text_columns, label_column, whole)
    if is_fasttext_file(path):  # (its columns' names name nothing in it: a run's own are passed whatever the file)
        return _fasttext_rows(path, whole)
    kind = repr(suffix + compression) if suffix else f"(no extension{f' before {compression}' * bool(compression)})"
    raise DataError(f"{path}: unknown file type {kind}; use .csv, .tsv, .jsonl or .parquet, or fastText's format "
                    f"(each line {FASTTEXT_LABEL}NAME, then the text)")


def _sorted_names(values: set[str]) -> list[str]:
    """Numbers by value (spellings of one value, "1" and "+1", by spelling), anything else alphabetically:
    the same order on every run, whatever order the set iterates in.

    >>> _sorted_names({"10", "+1", "2", "1"}), _sorted_names({"pos", "neg"})
    (['+1', '1', '2', '10'], ['neg', 'pos'])
    """
    try:
        return sorted(values, key=lambda name: (int(name), name))
    except ValueError:
        return sorted(values)


def _checked_text(path: Path, where: str, values: tuple, text_columns: tuple[str, ...]) -> str:
    """A row's text: its text columns' values joined, a missing value (None) as an empty string."""
    for value, column in zip(values, text_columns):
        if value is not None and not isinstance(value, str):
            pandas = (" (pandas' to_json writes a DataFrame's column so, as an object keyed by row, by default: write "
                      "one object per row, df.to_json(path, orient='records', lines=True))"
                      if isinstance(value, dict) and data_suffix(path) in (".jsonl", ".json", ".ndjson") else "")
            raise DataError(f"{path}, {where}: text column {column!r} holds {shown(value)}, not text{pandas}")
        if problem := unicode_problem(value or ""):
            raise DataError(f"{path}, {where}: the text{f' in column {column!r}' * is_data_file(path)} is {problem}")
    return TEXT_JOINER.join(value or "" for value in values)


def _named(text_columns: tuple[str, ...]) -> str:
    """``column 'text'``, or ``columns 'title', 'body'``, for messages."""
    return f"column{'s' * (len(text_columns) > 1)} {', '.join(map(repr, text_columns))}"


def _as_json(value: Any) -> str:
    """A label as its JSON line wrote it, for messages: ``"pos"``, ``1.5``, ``true``."""
    return json.dumps(value, default=str, ensure_ascii=False)


def _typed_kind(label: Any) -> str | None:
    """How a typed label (JSON, Parquet) is written, where two ways of writing would make two classes of one value
    (a string, or a CSV's every label, is None).

    >>> [_typed_kind(value) for value in (True, 1, 1.0, "1")]
    ['true/false', 'whole', 'decimal', None]
    """
    if isinstance(label, (bool, np.bool_)):
        return "true/false"
    if isinstance(label, numbers.Integral):
        return "whole"
    return "decimal" if isinstance(label, numbers.Real) else None


# A label written as a decimal number: ASCII digits, an optional sign, point and exponent (not "nan", "inf", "1_000")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def number_value(name: str) -> Decimal | None:
    """The number a label name writes, exactly (as a Decimal: two ids of 20 digits are two numbers, as floats they
    would be one), or None for a name that is no number.

    >>> number_value("1.0") == number_value("+1") == number_value("01") == number_value("1e0"), number_value("nan")
    (True, None)
    >>> number_value("12345678901234567890") == number_value("12345678901234567891")
    False
    """
    return Decimal(name) if _DECIMAL.fullmatch(name) else None


def _spelt_otherwise(name: str, label_names: list[str]) -> str:
    """A hint naming the training label that is the number ``name`` is, written another way: pandas writes a column
    of whole numbers with a gap in it as decimals (``1.0``), so one file's ``1`` is another's ``1.0``; or the one
    that ``name`` is but for its case: JSON's true and false are read as Python writes them (``True``), as a Parquet
    column's and pandas' to_csv's are, where a file typed by hand or written by another tool has ``true``; else "".

    >>> _spelt_otherwise("1.0", ["0", "1"]), _spelt_otherwise("pos", ["0", "1"])
    (" (the training labels write this number '1': write it as they do)", '')
    >>> _spelt_otherwise("true", ["False", "True"])
    " (the training labels write it 'True': write it as they do)"
    """
    value = number_value(name)
    same = next((label for label in label_names if value is not None and number_value(label) == value), None)
    if same is not None:
        return f" (the training labels write this number {same!r}: write it as they do)"
    same = next((label for label in label_names if label.casefold() == name.casefold()), None)
    return "" if same is None else f" (the training labels write it {same!r}: write it as they do)"


def _joined_otherwise(name: str, label_names: list[str], label_delimiter: str, run_made: bool) -> str:
    """A hint naming the --label-delimiter a multi-label file joined its labels by, when ``name`` split on it is
    labels the run knows: one flag reads such a file, where removing its rows would lose them all; else "".
    Training's own held-out file (not ``run_made``) is told to join them as the training file does: the flag would
    read the training file otherwise too.

    >>> [_joined_otherwise(name, ["autos", "rec"], "|", run_made=True) for name in ("rec;autos", "rec;food")]
    ["; the row's labels look joined by ';' (split on it, they are the run's): give --label-delimiter ';'", '']
    """
    for char in SUSPECT_LABEL_SEPARATORS.replace(label_delimiter, ""):
        pieces = [piece.strip() for piece in name.split(char)]
        if len(pieces) > 1 and all(piece in label_names for piece in pieces):
            way_on = f"give --label-delimiter {char!r}" if run_made else \
                f"join them by {label_delimiter!r} as the training file does"
            return f"; the row's labels look joined by {char!r} (split on it, they are the run's): {way_on}"
    return ""


def _unknown_labels_told(path: Path, text_column: TextColumns, label_column: str, allowed: set[str],
                         multi_label: bool, label_delimiter: str, run_made: bool) -> str:
    """What a test file holding a label outside ``allowed`` (the run's) is told after the first such label: how many
    of its rows hold such labels, which, and what to do with them; only their removal and the advice when a later row
    cannot be read (that row's error comes once these rows are gone). Reads the file again: the error path only.
    ``run_made``: a trained run reads the file (evaluate), whose predict can label those rows; else training reads it
    beside its training file (--validation-file, --test-file), before there is a run, and the training file can.

    >>> # _unknown_labels_told(Path("held_out.csv"), "text", "label", {"neg", "pos"}, False, "|", True)
    >>> # "; 3 of the file's 5 rows hold labels the run was not trained on ('neutral', 'mixed'): remove those ..."
    >>> # "; 2 of the file's 5 rows hold it: remove those rows, ..." (when the label named is the only one)
    """
    row = "row" if is_data_file(path) else "line"  # (a fastText file's texts are lines)
    predict = f"attnclf predict RUN --file {path}, which reads no labels"
    unknown: dict[str, None] = {}  # (in the order first met)
    rows = holding = 0
    try:
        for _, _, label in iter_records(path, text_column, label_column, multi_label=multi_label,
                                        label_delimiter=label_delimiter):
            outside = [name for name in (label if multi_label else (label,)) if name not in allowed]
            rows, holding = rows + 1, holding + bool(outside)
            unknown.update(dict.fromkeys(outside))
    except DataError:
        way_on = f"label them with {predict}" if run_made else "give the training file texts of them"
        return f"; remove the {row}s of labels the run was not trained on, or {way_on}"
    one = holding == 1
    # (the label the message names already is not written again: a long one would be, twice)
    what = ("it" if len(unknown) == 1 else
            f"{'a label' if one else 'labels'} the run was not trained on ({first_few(unknown, most=5)})")
    way_on = (f"label {'it' if one else 'them'} with {predict}" if run_made else
              f"give the training file texts of {'its label' if one else 'their labels'}")
    return (f"; {holding:,} of the file's {rows:,} {row}s {'holds' if one else 'hold'} {what}: remove "
            f"{'that' if one else 'those'} {row}{'' if one else 's'}, or {way_on}")


def iter_texts(path: str | Path, text_column: TextColumns = "text") -> Iterator[tuple[str, str]]:
    """Stream the texts of a CSV / TSV / JSONL / Parquet file's ``text_column`` (or columns, joined) as
    ``(where, text)``, for prediction: no label column is read, an empty text is kept (a model still labels it),
    and a file without rows, or without a byte (Parquet excepted), gives none.

    >>> # next(iter_texts("to_score.csv", text_column="review"))  # ('line 2', 'A fine film.')
    >>> # next(iter_texts("news.csv", ["title", "body"]))  # ('line 2', 'Rain due\\nShowers all day.')
    """
    for where, text, _ in _checked_rows(path, text_column, whole=False):
        yield where, text


def iter_rows(path: str | Path, text_column: TextColumns = "text") -> Iterator[tuple[str, str, dict]]:
    """Stream a CSV / TSV / JSONL / Parquet file's rows as ``(where, text, columns)``, for predictions written beside
    them: ``text`` as ``iter_texts`` reads it, ``columns`` every column's value by name, in the file's order, as read
    (CSV and TSV: strings; JSON lines: each line's own keys and values; Parquet: Python values of the columns' types).
    Two columns of one name are refused: one's values would be lost.

    >>> # next(iter_rows("to_score.csv", "review"))  # ('line 2', 'A fine film.', {'id': '7', 'review': 'A fine film.'})
    """
    yield from _checked_rows(path, text_column, whole=True)


def _checked_rows(path: str | Path, text_column: TextColumns, whole: bool) -> Iterator[tuple[str, str, dict | None]]:
    """``iter_texts``' and ``iter_rows``' rows, ``(where, text, columns)``: ``columns`` only with ``whole``."""
    columns = text_column_names(text_column)
    path = check_file(path)
    if _holds_nothing(path):
        return  # nothing to score, as with a header and no rows
    for where, values, _, row in _rows(path, columns, None, whole=whole):
        yield where, _checked_text(path, where, values, columns), row


def data_columns(path: str | Path) -> list[str]:
    """The columns a CSV / TSV file's header or a Parquet file's schema names, in order (for a file of no rows, whose
    columns ``iter_rows`` gives none of); none for JSON lines, whose every line names its own, or an empty file.

    >>> # data_columns("to_score.csv")  # ['id', 'review']: its header, with or without rows below it
    """
    path = Path(path)
    suffix = data_suffix(path)
    if suffix == ".parquet" and not compression_suffix(path):
        import pyarrow.parquet as pq  # (the file's rows were read already: pyarrow is there)

        return pq.read_schema(path).names
    if suffix in (".csv", ".tsv") and not _holds_nothing(path):
        # (named as iter_rows names them)
        return _unnamed_columns_named(next(csv.reader(utf8_lines(path), delimiter="\t" if suffix == ".tsv" else ","),
                                           []))
    return []


def refuse_repeated_header(path: str | Path) -> list[str]:
    """The one-line error ``iter_rows`` gives a CSV / TSV header or a Parquet schema that names a column twice, told
    from the header alone, before work that reads the rows after it (JSON lines, whose every line names its own
    columns, and an empty file: nothing said). Returns the header's columns (``data_columns``).

    >>> # refuse_repeated_header("train.csv")  # DataError: train.csv, line 1: the header names column 'id' 2 times; ...
    """
    columns = data_columns(path)
    if columns:
        _refuse_repeated_columns(Path(path), columns, "the schema" if data_suffix(path) == ".parquet" else
                                 "line 1: the header")
    return columns


def is_data_file(path: str | Path) -> bool:
    """Whether ``path`` names a CSV / TSV / JSONL / Parquet file (its text column is read), not plain text (a text
    per line), by its extension (``data_suffix``: a compressed file's is the one before the compression's).

    >>> is_data_file("reviews.CSV"), is_data_file("reviews.csv.gz"), is_data_file("reviews.txt")
    (True, True, False)
    """
    return data_suffix(path) in DATA_SUFFIXES


def has_rows(path: str | Path) -> bool:
    """Whether ``path``'s texts come in rows with columns to write back beside their predictions (``iter_rows``): a
    data file's, or a fastText file's (``text`` and ``label``), not a plain text file's lines.

    >>> has_rows("to_score.csv"), has_rows("notes.txt")  # (a notes.txt whose first line starts __label__: True)
    (True, False)
    """
    return is_data_file(path) or is_fasttext_file(path)


def known_row_count(path: str | Path) -> int | None:
    """How many rows ``iter_rows`` will give of ``path`` where that is known without reading them: a Parquet file's,
    from its footer; None for any other file (a CSV's quoted fields may hold newlines: only a pass through it counts
    them) or one whose footer is unreadable (reading its rows says what is wrong with it).

    >>> known_row_count("to_score.csv") is None  # (a Parquet file: its row count, read from its metadata)
    True
    """
    path = Path(path)
    if data_suffix(path) != ".parquet" or compression_suffix(path):
        return None
    try:
        import pyarrow.parquet as pq

        return pq.read_metadata(path).num_rows
    except Exception:  # no pyarrow, no such file, not Parquet: each the reader's one-line error, in its place
        return None


def text_lines(raw: bytes, source: str) -> list[str]:
    """The non-blank lines of UTF-8 ``raw`` (LF or CRLF), each a text, less their labels when the first starts with
    ``__label__`` (fastText's format, as ``is_fasttext_file`` tells a file's); ``source`` names where they came from (a
    file, "stdin") in the error a byte that is not UTF-8 gets.

    >>> text_lines(b"\\xef\\xbb\\xbfgood\\r\\n\\r\\nbad\\n", "stdin")  # a BOM, CRLF, a blank line
    ['good', 'bad']
    >>> text_lines(b"good\\rbad\\r", "notes.txt")
    Traceback (most recent call last):
    attnclf.errors.DataError: notes.txt: line 1: a line ends with a lone carriage return (CR); save the file with \
LF or CRLF line endings
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if utf16 := _utf16(raw):  # (stdin too: a file redirected, mostly)
            raise DataError(f"{source}: line 1: {utf16}") from None
        if what := _not_text(raw, named=source != "stdin"):
            raise DataError(f"{source}: {what}") from None
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{source}: line {line}: not UTF-8 (byte 0x{raw[exc.start]:02x})") from None
    text = text.removeprefix("\ufeff")  # a byte-order mark (Notepad's "UTF-8 with BOM") is not part of the text
    return _line_texts(text.split("\n"), source)


def _line_texts(lines: Iterable[str], source: str) -> list[str]:
    """``text_lines``' texts of decoded ``lines`` (each with or without its line ending), read one at a time."""
    texts: list[str] = []
    fasttext = None  # (whether the first non-blank line starts with a label: undecided until it is read)
    for number, line in enumerate(lines, 1):
        line = line.removesuffix("\n").removesuffix("\r")
        if "\r" in line:  # (old Mac OS line endings: the whole file read as one text, as a CSV's are refused)
            raise DataError(f"{source}: line {number}: a line ends with a lone carriage return (CR); save the file "
                            f"with LF or CRLF line endings")
        if not line.strip():
            continue
        # A file in fastText's format piped in: its labels are not text, as a file's are not, else the answer would
        # be read as part of the input.
        if fasttext is None:
            fasttext = line.lstrip(FASTTEXT_SPACES).startswith(FASTTEXT_LABEL)
        texts.append(_labelled_line(line, f"{source}: line {number}")[1] if fasttext else line)
    return texts


def read_texts(path: str | Path, text_column: TextColumns = "text") -> list[str]:
    """Every text of ``path``, to predict on or learn from without labels: a data file's ``text_column`` (or
    columns, joined; an empty text kept, as ``iter_texts`` keeps it), a fastText file's lines without their labels
    (``is_fasttext_file``), else plain UTF-8 text, one text per non-blank line (``text_lines``).

    >>> # read_texts("to_score.csv", text_column="review")  # ['A fine film.', ...]
    >>> # read_texts("notes.txt")  # a text per line: ['great acting', 'weak acting']
    """
    if has_rows(path):
        return [text for _, text in iter_texts(path, text_column)]
    path = Path(path)
    if path.is_dir():  # (as check_file says it; read_bytes said "Is a directory". A pipe is read, once: not refused)
        raise DataError(f"{path}: is a folder, not a file")
    _refuse_unread_packing(path)  # (read as plain text, a zip's bytes were "line 1: not UTF-8")
    try:
        if compression_suffix(path):  # (decompressed a line at a time, never whole into memory)
            return _line_texts(utf8_lines(path), str(path))
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: {exc.strerror}") from None
    return text_lines(raw, str(path))


def iter_records(
    path: str | Path,
    text_column: TextColumns = "text",
    label_column: str = "label",
    *,
    label_names: list[str] | None = None,
    multi_label: bool = False,
    label_delimiter: str = DEFAULT_LABEL_DELIMITER,
    run_made: bool = True,
) -> Iterator[tuple[str, str, Any]]:
    """Stream a file's checked records as ``(where, text, label)``, one row at a time.

    Only the current row (Parquet: the current 8,192-row batch) is in memory.
    The text must be non-empty and the label present (and, given
    ``label_names``, one of them); a bad record stops the stream with a
    one-line ``DataError`` naming the file, line or row, column and value.
    With ``multi_label`` the label is a tuple of names (possibly empty).
    Several text columns give one text, their values joined with a newline.
    ``run_made``: whether a trained run reads it, as evaluate's does (False: training's own held-out files), which
    says what a file of labels outside ``label_names`` is told to do.

    >>> # next(iter_records("train.jsonl"))  # ('line 1', 'A fine film.', 'pos')
    """
    path, columns = Path(path), text_column_names(text_column)
    if label_column in columns:
        raise DataError(f"{path}: the text and the labels cannot both come from column {label_column!r}")
    allowed = None if label_names is None else set(label_names)
    first = None  # (where, label) of the first label, which every later one must be written as (_refuse_mixed_kinds)
    joined = None  # (where, name) of the first single label joined as label sets are, which a missing label names
    fasttext = not is_data_file(path)  # (_rows refused any other file): its texts and labels have no columns to name
    in_text, in_label = f" in {_named(columns)}" * (not fasttext), _in_label_column(path, label_column)
    for where, values, label, _ in _rows(path, columns, label_column):
        text = _checked_text(path, where, values, columns)
        if not text.strip():  # (predict answers one; a text to learn from or to score against its label cannot be)
            row = "line" if fasttext else "row"
            raise DataError(f"{path}, {where}: empty text{in_text}; remove the {row} or give it a text (a file to "
                            f"train or evaluate on needs one in every {row})")
        if multi_label:
            try:
                names = parse_label_set(label, label_delimiter)
            except ValueError as exc:
                raise DataError(f"{path}, {where}: {exc}{in_label}") from None
        else:
            label = _one_label(path, where, label, label_column, fasttext)
            if not is_missing_label(label):  # (a gap in a true/false column is a missing label, not a mix)
                first = first or (where, label)
                _refuse_mixed_kinds(path, where, label, first, label_column)
            try:
                names = (_label_name(path, where, label, label_column),)
            except DataError as exc:  # (a multi-label file's text without labels, read as single-label data?)
                if joined is None:
                    raise
                raise DataError(f"{exc}; {joined[0]}'s label {shown(joined[1])} looks like a set of labels: for a "
                                f"multi-label file, train with --multi-label (an empty cell is then a text with no "
                                f"labels)") from None
            if joined is None and allowed is None and DEFAULT_LABEL_DELIMITER in names[0]:
                joined = (where, names[0])
        for name in names:
            if problem := unicode_problem(name):
                raise DataError(f"{path}, {where}: the label{in_label} is {problem}")
            if allowed is not None and name not in allowed:
                # (a number spelt otherwise is told how to spell it, a label set joined otherwise the flag that reads
                # it; else the whole file's count and a way on)
                way_on = (_spelt_otherwise(name, label_names)
                          or multi_label and _joined_otherwise(name, label_names, label_delimiter, run_made)
                          or _unknown_labels_told(path, text_column, label_column, allowed, multi_label,
                                                  label_delimiter, run_made))
                raise DataError(f"{path}, {where}: label {shown(name)}{in_label} is not one of the "
                                f"training labels [{first_few(label_names, most=10)}]{way_on}")
        yield where, text, names if multi_label else names[0]


def _one_label(path: Path, where: str, label: Any, label_column: str, fasttext: bool) -> Any:
    """A single-label row's label as read, or a one-line ``DataError`` where the row holds several: a fastText line's
    labels (always a tuple: one name is a single label), a JSON list or object."""
    if fasttext:
        if len(label) > 1:
            raise DataError(f"{path}, {where}: {len(label)} labels ({first_few(label, most=5)}); a text with "
                            f"several labels needs a run trained with --multi-label")
        label = label[0]
    if isinstance(label, (list, tuple, dict)):
        raise DataError(f"{path}, {where}: label {shown(label)} in column {label_column!r} is a "
                        f"{type(label).__name__}, not one label (a set of labels per text needs a run trained "
                        f"with --multi-label)")
    return label


def _refuse_mixed_kinds(path: Path, where: str, label: Any, first: tuple[str, Any], label_column: str) -> None:
    """A one-line ``DataError`` where ``label`` is written as another kind than the file's ``first`` label (its
    where and value): a JSON label written otherwise (true/false, a number or a string) is a mistake in the file, not
    a class of its own. A number among strings ("pos", "neg", 1.5) is a slip (a cell typed as a number, a column
    shifted), and one beside strings of digits would make 1.0 and "1" two classes: as the estimator's y, every label
    is one type. (Parquet's columns have one type, so only JSON lines can mix them.)

    >>> _refuse_mixed_kinds(Path("t.jsonl"), "line 3", 1.5, ("line 1", "pos"), "label")
    Traceback (most recent call last):
    ...
    attnclf.errors.DataError: t.jsonl, line 3: label 1.5 in column 'label' mixes numbers and strings (line 1: "pos"); \
write every label the same way
    """
    kind, first_kind = _typed_kind(label), _typed_kind(first[1])
    if kind != first_kind:
        written, earlier = (shown(value, write=_as_json) for value in (label, first[1]))
        mix = ("true/false with other labels" if "true/false" in (kind, first_kind) else
               "whole and decimal numbers, which would make 1 and 1.0 two classes" if kind and first_kind
               else "numbers and strings")
        raise DataError(f"{path}, {where}: label {written} in column {label_column!r} mixes {mix} "
                        f"({first[0]}: {earlier}); write every label the same way")


def _label_name(path: Path, where: str, label: Any, label_column: str) -> str:
    """A single label's name, as a string without the spaces around it (stray spaces would make a class of their
    own); a one-line ``DataError`` where it is missing (empty, null, NaN).

    >>> _label_name(Path("t.csv"), "line 2", " pos ", "label"), _label_name(Path("t.jsonl"), "line 2", 3, "label")
    ('pos', '3')
    """
    name = "" if is_missing_label(label) else str(label).strip()
    if not name:
        marker = f" ({label.strip()!r})" if isinstance(label, str) and label.strip() else ""
        raise DataError(f"{path}, {where}: missing label{marker} in column {label_column!r}")
    return name


def file_labels(
    path: str | Path,
    text_column: TextColumns = "text",
    label_column: str = "label",
    *,
    label_names: list[str] | None = None,
) -> tuple[np.ndarray, list[str]]:
    """Every row's label index and the label names, read in one streamed pass (texts are checked, not kept).

    Without ``label_names`` the file defines them (its distinct labels, sorted) and
    must hold two classes at least.

    >>> # labels, names = file_labels("train.csv", "review", "stars")
    >>> # names, labels[:3]  # (['1', '2', '3', '4', '5'], array([4, 0, 2], dtype=int32))
    """
    return _labels(path, label_column, label_names,
                   (name for _, _, name in iter_records(path, text_column, label_column, label_names=label_names)))


def _labels(path: str | Path, label_column: str, label_names: list[str] | None,
            names: Iterable[str]) -> tuple[np.ndarray, list[str]]:
    """Label indices for ``names``: first-seen codes while reading, re-indexed to the sorted names at the end."""
    seen: dict[str, int] = {name: i for i, name in enumerate(label_names or [])}
    codes = array("i", (seen.setdefault(name, len(seen)) for name in names))
    if not codes:
        raise DataError(f"{path}: empty file, no data rows")
    if label_names is None:
        label_names = _sorted_names(set(seen))
        if len(label_names) < 2:
            raise DataError(
                f"{path}: only one class ({shown(label_names[0])}){_in_label_column(path, label_column)}; "
                f"a classifier needs two at least"
            )
    recode = np.array([label_names.index(name) for name in seen], dtype=np.int32)
    return recode[np.frombuffer(codes, dtype=np.int32)], list(label_names)


def _label_sets(path: str | Path, label_column: str, label_names: list[str] | None,
                sets: list[tuple[str, ...]]) -> tuple[list[tuple[int, ...]], list[str]]:
    """Index tuples for multi-label ``sets``; without ``label_names`` the names seen, sorted."""
    if not sets:
        raise DataError(f"{path}: empty file, no data rows")
    if label_names is None:
        label_names = _sorted_names({name for names in sets for name in names})
        if not label_names:
            raise DataError(f"{path}: no text has a label{_in_label_column(path, label_column)}; "
                            f"a multi-label classifier needs one label at least")
    index = {name: i for i, name in enumerate(label_names)}
    return [tuple(sorted(index[name] for name in names)) for names in sets], list(label_names)


def load_file(
    path: str | Path,
    text_column: TextColumns = "text",
    label_column: str = "label",
    *,
    label_names: list[str] | None = None,
    split: str = "train",
    multi_label: bool = False,
    label_delimiter: str = DEFAULT_LABEL_DELIMITER,
    run_made: bool = True,
) -> TextDataset:
    """Read one file of labelled texts into memory (``iter_records`` streams it instead).

    Without ``label_names`` the file defines them, and must hold two classes
    at least (one label, for ``multi_label``); with them (a test file), every
    label must be one of them (``run_made``: read by a trained run, as
    ``iter_records`` says). ``multi_label`` reads a label set per text.
    A text's ``order`` is its row's position, so ``--hold-out latest`` holds out
    each class's last rows (of a file sorted by date, its newest).

    >>> # ds = load_file("reviews.csv", "review", "stars")
    >>> # ds.label_names, ds.texts[0]  # (['1', '2', '3', '4', '5'], 'Great value, would buy again.')
    """
    texts: list[str] = []
    raw_labels: list = []  # a name per text, or a tuple of names when multi_label
    for _, text, label in iter_records(path, text_column, label_column, label_names=label_names,
                                       multi_label=multi_label, label_delimiter=label_delimiter, run_made=run_made):
        texts.append(text)
        raw_labels.append(label)
    # (a fastText file's text and label are all it has: no other columns to read back)
    read_from = ReadFrom(str(path), text_column, label_column) if is_data_file(path) else None
    if multi_label:
        label_sets, label_names = _label_sets(path, label_column, label_names, raw_labels)
        return TextDataset(texts, label_sets, label_names, split, Path(path).name, multi_label=True,
                           order=list(range(len(texts))), read_from=read_from)
    labels, label_names = _labels(path, label_column, label_names, raw_labels)
    return TextDataset(texts, labels.tolist(), label_names, split, Path(path).name, order=list(range(len(texts))),
                       read_from=read_from)


def load_files(
    train_path: str | Path,
    test_path: str | Path | None = None,
    text_column: TextColumns = "text",
    label_column: str = "label",
    multi_label: bool = False,
    label_delimiter: str = DEFAULT_LABEL_DELIMITER,
    validation_path: str | Path | None = None,
) -> Splits:
    """Training (and optionally validation and test) data from the user's files; the others use train's labels.

    >>> # splits = load_files("train.jsonl", "test.jsonl", text_column="body", validation_path="dev.jsonl")
    >>> # splits.test.label_names == splits.validation.label_names == splits.train.label_names  # True
    """
    labels = {"multi_label": multi_label, "label_delimiter": label_delimiter}
    train = load_file(train_path, text_column, label_column, **labels)
    held_out = {}
    for split, path in (("validation", validation_path), ("test", test_path)):
        if path is not None:
            held_out[split] = load_file(path, text_column, label_column, label_names=train.label_names, split=split,
                                        run_made=False, **labels)
    return Splits(train=train, **held_out)
