"""Predictions written to a file beside the rows they answer: `attnclf predict RUN --file in.csv --output out.csv`.

Every input row comes back in input order with all its columns as read, then the prediction's columns:
``predicted_label`` and ``confidence`` (a multi-label run's ``predicted_labels`` instead: a list in JSON lines and
Parquet, ``|``-joined in CSV and TSV, as its training files write them), ``probability:LABEL`` per class, and
``unknown_tokens`` and ``tokens_read`` (as ``Prediction.to_dict`` names them). The output's suffix picks its format
(``.csv``, ``.tsv``, ``.jsonl``, ``.parquet``). Rows are read, predicted and written ``PREDICT_CHUNK`` at a time,
into a temporary file beside the output that becomes it only once whole.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from pathlib import Path

from .checks import by_field
from .data.base import ReadFrom, TextDataset
from .data.files import (TextColumns, data_columns, has_rows, install_pyarrow, is_data_file, iter_rows, read_texts,
                         refuse_compressed_output, refuse_repeated_header, run_columns, text_column_names)
from .data.multilabel import DEFAULT_LABEL_DELIMITER, LABEL_SET_COLUMNS
from .errors import AttnclfError, DataError, shown
from .prediction import (LabelSetPrediction, Prediction, class_threshold, trained_label_delimiter,
                         trained_text_column)
from .rundir import (first_missing_folder, prepare_output_dir, refuse_existing_output, refuse_folder_output,
                     refuse_output_read, remove_empty_folders, written_atomically)

PREDICT_CHUNK = 4096  # texts predicted (and, with an output file, rows written) at a time
OUTPUT_SUFFIXES = (".csv", ".tsv", ".jsonl", ".parquet")
PROBABILITY = "probability:"  # a class's probability column is this and its label


def prediction_columns(label_names: list[str], multi_label: bool = False) -> list[str]:
    """The columns a prediction adds to its row, in order.

    >>> prediction_columns(["neg", "pos"])
    ['predicted_label', 'confidence', 'probability:neg', 'probability:pos', 'unknown_tokens', 'tokens_read']
    >>> prediction_columns(["music", "sports"], multi_label=True)[:2]
    ['predicted_labels', 'probability:music']
    """
    chosen = ["predicted_labels"] if multi_label else ["predicted_label", "confidence"]
    return [*chosen, *(PROBABILITY + name for name in label_names), "unknown_tokens", "tokens_read"]


def prediction_values(prediction: Prediction | LabelSetPrediction) -> dict:
    """A prediction as the values of its ``prediction_columns``.

    >>> prediction_values(Prediction("pos", 0.75, {"neg": 0.25, "pos": 0.75}, unknown_tokens=0, tokens_read=3))
    {'predicted_label': 'pos', 'confidence': 0.75, 'probability:neg': 0.25, 'probability:pos': 0.75, \
'unknown_tokens': 0, 'tokens_read': 3}
    """
    chosen = ({"predicted_labels": prediction.labels} if isinstance(prediction, LabelSetPrediction)
              else {"predicted_label": prediction.label, "confidence": prediction.confidence})
    return {**chosen, **{PROBABILITY + name: p for name, p in prediction.probabilities.items()},
            "unknown_tokens": prediction.unknown_tokens, "tokens_read": prediction.tokens_read}


def check_output(output: str | Path, reads: str | Path | None = None, overwrite: bool = False,
                 named: Callable[[str], str] = by_field, writer: str = "predict") -> Path:
    """``output`` as a ``Path``, or a one-line error before any prediction: a suffix no writer has, a compressed one
    (which says ``writer``, the command that writes it, writes plain files), a folder, the file ``reads`` (the
    input), or a file that exists unless ``overwrite`` (named by ``named``).

    >>> check_output("scored.xlsx")
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: scored.xlsx: unknown output type '.xlsx'; use .csv, .tsv, .jsonl or .parquet
    """
    refuse_folder_output(output, named("output"))
    output = Path(output)
    suffix = output.suffix.lower()
    refuse_compressed_output(output, writer)
    if suffix not in OUTPUT_SUFFIXES:
        kind = repr(suffix) if suffix else "(no extension)"
        raise AttnclfError(f"{output}: unknown output type {kind}; use {', '.join(OUTPUT_SUFFIXES[:-1])} or "
                           f"{OUTPUT_SUFFIXES[-1]}")
    if suffix == ".parquet":  # (before a model is loaded and the rows predicted)
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise AttnclfError(f"{output}: writing Parquet needs pyarrow: {install_pyarrow()}") from None
    refuse_output_read(output, reads, named("output"), named("file"))  # (before overwrite: it would lose the input)
    refuse_existing_output(output, overwrite, named("overwrite"))
    return output


def predict_file(model, path: str | Path, output: str | Path, *, text_column: TextColumns | None = None,
                 overwrite: bool = False, noticed: Callable[[str, Prediction | LabelSetPrediction], None] | None = None,
                 named: Callable[[str], str] = by_field, threshold: tuple[str, float] | str | None = None,
                 done: Callable[[int], None] | None = None) -> int:
    """Predict every row of ``path`` (CSV / TSV / JSONL / Parquet: its ``text_column``, by default the one the model
    trained on; fastText's format: its ``text`` and its true ``label``, several ``|``-joined; anything else: plain
    text, a text per line, blank lines skipped) into ``output``, each row with all its columns (plain text: a ``text``
    column) and its prediction's; returns the number of rows written.

    ``model``: a ``Classifier``, ``Ensemble`` or ``OnnxClassifier``. ``noticed(text, prediction)`` is called for
    each row as it is written (the command line notes unknown tokens from it), ``done(count)`` after each chunk of
    rows (its progress bar). ``threshold``: one class's operating point, as ``Classifier.predict`` applies it.

    >>> # predict_file(Classifier.load("runs/mine"), "to_score.csv", "scored.csv")  # 1200: rows written
    """
    output = check_output(output, path, overwrite, named)
    if has_rows(path):
        rows = iter_rows(path, text_column or trained_text_column(model.config))
        with run_columns(text_column):
            return write_predictions(model, rows, output, source=path, overwrite=overwrite, noticed=noticed,
                                     named=named, threshold=threshold, done=done)
    return write_predictions(model, _text_rows(read_texts(path)), output, overwrite=overwrite, noticed=noticed,
                             named=named, threshold=threshold, done=done)


def predict_texts(model, texts: Iterable[str], output: str | Path, *, overwrite: bool = False,
                  noticed: Callable[[str, Prediction | LabelSetPrediction], None] | None = None,
                  named: Callable[[str], str] = by_field, threshold: tuple[str, float] | str | None = None,
                  done: Callable[[int], None] | None = None) -> int:
    """Predict ``texts`` into ``output``: a ``text`` column and the prediction's, a row per text; returns the number
    of rows written. ``noticed``, ``threshold`` and ``done`` as in ``predict_file``.

    >>> # predict_texts(clf, ["a fine film", "not good"], "scored.jsonl")  # 2
    """
    output = check_output(output, None, overwrite, named)
    return write_predictions(model, _text_rows(texts), output, overwrite=overwrite, noticed=noticed, named=named,
                             threshold=threshold, done=done)


def _text_rows(texts: Iterable[str]) -> Iterator[tuple[str, str, dict]]:
    """Texts given without a file as ``iter_rows``' rows: each its own ``text`` column."""
    return ((f"text {i + 1}", text, {"text": text}) for i, text in enumerate(texts))


def write_predictions(model, rows: Iterable[tuple[str, str, dict]], output: Path, *, source: str | Path | None = None,
                      overwrite: bool = False,
                      noticed: Callable[[str, Prediction | LabelSetPrediction], None] | None = None,
                      named: Callable[[str], str] = by_field, threshold: tuple[str, float] | str | None = None,
                      done: Callable[[int], None] | None = None) -> int:
    """Write ``rows`` (``(where, text, columns)``, as ``iter_rows`` reads them from ``source``), each with its
    prediction's columns, into ``output`` (checked already: ``check_output``), atomically; the rows written. Unless
    ``overwrite``, a file another process writes at ``output`` meanwhile is kept: a one-line error. ``threshold``:
    one class's operating point, as ``Classifier.predict`` applies it; ``done(count)`` is called after each chunk of
    rows is predicted.

    >>> # write_predictions(clf, iter_rows("in.csv"), Path("out.parquet"), source="in.csv")
    """
    multi_label = getattr(model, "multi_label", False)
    threshold = class_threshold(threshold, model.label_names, multi_label, named)  # (before any row is read)
    added = prediction_columns(model.label_names, multi_label)
    listed = prediction_columns(["LABEL"], multi_label)  # (as a clash's message names them)
    # (a multi-label run's label sets joined as its training file's were, so that its settings read them back)
    writer = _writer(output.suffix.lower(), trained_label_delimiter(model.config))
    created = first_missing_folder(output.parent)
    prepare_output_dir(output.parent)
    written = 0

    def chunks() -> Iterator[list[dict]]:
        nonlocal written
        rows_left = iter(rows)
        while chunk := list(islice(rows_left, PREDICT_CHUNK)):
            for where, _, columns in chunk:
                refuse_clashing_column(source, where, columns, added, "predict --output", listed)
            predictions = model.predict([text for _, text, _ in chunk], tokens=False, threshold=threshold)
            records = []
            for (where, text, columns), prediction in zip(chunk, predictions):
                records.append((where, {**columns, **prediction_values(prediction)}))
                if noticed is not None:
                    noticed(text, prediction)
            written += len(records)
            if done is not None:
                done(len(records))
            yield records

    try:
        with _written_new(output, overwrite, "predicting", named) as tmp:
            writer(tmp, chunks(), added, source)
    except BaseException:  # (a bad row, or Ctrl-C: the folders made for the output go with it, as export's do)
        remove_empty_folders(output.parent, created)
        raise
    return written


ColumnsOf = Callable[[Sequence[str]], dict]  # the rows' own columns, each to its type, of the classes' names


def with_file_columns(data: TextDataset, rows: list[dict], columns_of: ColumnsOf,
                      writer: str) -> tuple[list[dict], dict[str, type | None]]:
    """``rows`` about ``data``'s texts (each with its ``row``, from 1, among them) with, when the texts were read from
    a data file, ``row`` the file's (from 1, below its header: a split carved from the file holds some of its rows,
    ``ReadFrom.rows``) and each row's other columns there (not its text's or label's,
    which the rows hold already) after ``row``, named as in the file (a JSON line lacking one: None); and the rows'
    columns, each to its type (the file's: None, as read). ``columns_of(label_names)``: the rows' own columns, which
    a file's column must not be named as (a one-line error naming ``writer``): `evaluate --errors`' and `suspects`'.
    A text joined from several columns (a title and a description) is written as those columns, in the file's
    order among its others, in place of the rows' ``text`` (``_written_columns``).

    >>> rows, columns = with_file_columns(TextDataset(["fine"], [0], ["a", "b"]), [{"row": 1, "text": "fine"}],
    ...                                   lambda names: {"row": int, "text": str}, "suspects --output")
    >>> rows, columns  # (texts in memory: no file to read other columns from)
    ([{'row': 1, 'text': 'fine'}], {'row': <class 'int'>, 'text': <class 'str'>})
    """
    if data.read_from is None:  # (a dataset's split, or texts in memory)
        return rows, columns_of(data.label_names)
    read_from = data.read_from
    columns, listed = _written_columns(read_from, columns_of, data.label_names)
    at = [read_from.row_of(row["row"] - 1) for row in rows]  # (each row's in the file, from 0)
    wanted = set(at)
    # (CSV / TSV / Parquet: the header's columns, whichever rows are asked for; JSON lines: those their lines hold)
    names = dict.fromkeys(_other_columns(read_from, data_columns(read_from.path)))
    others: dict[int, dict] = {}
    for i, (where, _, values) in enumerate(iter_rows(read_from.path, read_from.text_column)):
        other = _other_columns(read_from, values)
        refuse_clashing_column(read_from.path, where, other, columns, writer, listed)
        if i in wanted:
            others[i] = other
            names.update(dict.fromkeys(other))
    written = [{"row": i + 1, **{name: others[i].get(name) for name in names},
                **{name: value for name, value in row.items() if name in columns and name != "row"}}
               for i, row in zip(at, rows)]
    return written, {"row": int, **dict.fromkeys(names), **{k: kind for k, kind in columns.items() if k != "row"}}


def refuse_clashing_header(read_from: ReadFrom, columns_of: ColumnsOf, label_names: Sequence[str],
                           writer: str) -> None:
    """``with_file_columns``' one-line errors for a column of the file ``read_from`` names, told before the work
    that would write the rows: a column the rows have already, or one named twice; from its header, or, JSON lines
    naming their own columns line by line, from every line (one pass through the file, where suspects trains a model
    per fold).

    >>> # refuse_clashing_header(data.read_from, suspect_columns, data.label_names, "suspects --output")
    """
    written, listed = _written_columns(read_from, columns_of, label_names)
    header = refuse_repeated_header(read_from.path)  # (else told by iter_rows once every suspects fold had trained)
    refuse_clashing_column(read_from.path, "line 1", _other_columns(read_from, header), written, writer, listed)
    if not header and is_data_file(read_from.path):  # (JSON lines, or a file of no byte, which has no lines)
        for where, _, values in iter_rows(read_from.path, read_from.text_column):
            refuse_clashing_column(read_from.path, where, _other_columns(read_from, values), written, writer, listed)


def _written_columns(read_from: ReadFrom, columns_of: ColumnsOf,
                     label_names: Sequence[str]) -> tuple[dict[str, type], list[str]]:
    """The columns ``columns_of`` gives rows about texts read from ``read_from``, each to its type, and as a clash's
    message lists them (a class's as ``LABEL``): less ``text`` where the texts join several columns, which are
    written as they are in the file (``_other_columns``), as `predict --output` writes them: joined, they ran into
    one cell, the title's end unmarked but by a newline."""
    dropped = {"text"} if _joins_columns(read_from) else set()
    columns = {name: kind for name, kind in columns_of(label_names).items() if name not in dropped}
    return columns, [name for name in columns_of(["LABEL"]) if name not in dropped]


def _joins_columns(read_from: ReadFrom) -> bool:
    """Whether ``read_from``'s texts are several columns' values joined (a title and a description)."""
    return len(text_column_names(read_from.text_column)) > 1


def _other_columns(read_from: ReadFrom, values: dict | list[str]) -> dict:
    """``values`` (a row's, or a header's names) less the label's column and a single text column, which the rows
    hold already (as ``text``; several text columns are kept, the rows holding no ``text``: ``_written_columns``)."""
    used = {read_from.label_column, *(() if _joins_columns(read_from) else text_column_names(read_from.text_column))}
    return {name: values[name] if isinstance(values, dict) else None for name in values if name not in used}


def refuse_clashing_column(source: str | Path | None, where: str, columns: Iterable[str], written: Iterable[str],
                           writer: str, listed: list[str]) -> None:
    """A one-line ``DataError`` where a row of ``source`` read at ``where`` has a column of a name among ``written``,
    the columns ``writer`` adds to each row (``listed`` in the message, a class's as ``LABEL``): the output would
    hold two columns of one name.

    >>> # refuse_clashing_column("in.csv", "line 2", {"id": "7", "confidence": "high"}, ["confidence"],
    >>> #                        "predict --output", ["confidence"])  # DataError: in.csv: column 'confidence' is ...
    """
    if clash := next((column for column in written if column in columns), None):
        # A CSV / TSV header or a Parquet schema names a column once for all rows; a JSON line names its own, so a
        # clash there is told by its line.
        at = source if source is not None and data_columns(source) else f"{source}, {where}"
        raise DataError(f"{at}: column {shown(clash)} is one {writer} writes ({', '.join(listed)}); rename it in "
                        f"the file")


@contextmanager
def _written_new(output: Path, overwrite: bool, doing: str, named: Callable[[str], str]) -> Iterator[str]:
    """``written_atomically(output)``, and unless ``overwrite``, a file another process wrote at ``output`` while
    the caller was ``doing`` its work kept: a one-line error, not FileExistsError's "File exists"."""
    try:
        with written_atomically(output, replace=overwrite) as tmp:
            yield tmp
    except FileExistsError as exc:
        if exc.filename != str(output):  # (only the final step's, which names the output: anything else is not ours)
            raise
        raise AttnclfError(f"{output} was written by another process while {doing}; give {named('overwrite')} to "
                           f"replace it") from None


def write_rows(rows: list[dict], output: Path, columns: dict[str, type | None], overwrite: bool = False,
               doing: str = "writing", named: Callable[[str], str] = by_field,
               label_delimiter: str = DEFAULT_LABEL_DELIMITER) -> None:
    """Write ``rows`` (each holding ``columns``, named in order, to the Python type of their values: ``str``,
    ``int``, ``float`` or ``list`` of strings; None: a data file's own column, its values as they were read) into
    ``output`` (checked already: ``check_output``), atomically, in the format its suffix names; no rows: a header
    alone (CSV, TSV), no line (JSON lines), a schema (Parquet); label sets ``label_delimiter``-joined in CSV and TSV.
    Unless ``overwrite``, a file another process writes at ``output`` meanwhile (while the caller was ``doing`` its
    work) is kept: a one-line error naming ``named("overwrite")``.

    >>> # write_rows([{"row": 2, "text": "dull"}], Path("wrong.csv"), {"row": int, "text": str})
    """
    suffix = output.suffix.lower()
    prepare_output_dir(output.parent)
    with _written_new(output, overwrite, doing, named) as tmp:
        if suffix == ".parquet":
            import pyarrow as pa  # (check_output saw that it is installed)
            import pyarrow.parquet as pq

            types = {str: pa.string(), int: pa.int64(), float: pa.float64(), list: pa.list_(pa.string())}
            try:
                schema = pa.schema([pa.field(name, types[kind] if kind else _read_type(pa, name, rows))
                                    for name, kind in columns.items()])
                pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
            # (a JSON lines column of numbers and strings, of empty objects, which Parquet has no type for, or of
            # an integer past 64 bits, which pyarrow refuses as an OverflowError)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError) as exc:
                raise DataError(f"{output}: a column's values are of more than one type, or of one Parquet has none "
                                f"for ({' '.join(str(exc).split())}); write .jsonl, which keeps each value as it "
                                f"is") from None
        elif rows or suffix == ".jsonl":
            _writer(suffix, label_delimiter)(tmp, iter([[(f"row {i + 1}", row) for i, row in enumerate(rows)]]),
                                             list(columns), None)
        else:  # (the writers' header of no rows is an input file's columns; these rows have no input file)
            with open(tmp, "w", encoding="utf-8", newline="") as handle:
                csv.writer(handle, delimiter="\t" if suffix == ".tsv" else ",", lineterminator="\n").writerow(columns)


def _read_type(pa, name: str, rows: list[dict]):
    """The Arrow type of a data file's column ``name`` as its values in ``rows`` were read (none: text)."""
    return pa.Table.from_pylist([{name: row[name]} for row in rows]).schema.field(name).type if rows else pa.string()


def _write_json_lines(tmp: str, chunks: Iterator[list[tuple[str, dict]]], added: list[str], source) -> None:
    with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
        for chunk in chunks:
            # (default=str: a Parquet input's dates and decimals, which JSON has no type for, as text)
            handle.writelines(json.dumps(_json_safe(record), ensure_ascii=False, default=str, allow_nan=False) + "\n"
                              for _, record in chunk)


def _json_safe(value):
    """``value`` with every NaN and infinity (a Parquet float column's) as None: JSON has no such numbers, and
    Python's ``NaN`` in a line is one that other readers refuse.

    >>> _json_safe({"score": float("nan"), "rank": [1.5, float("-inf")], "text": "ok"})
    {'score': None, 'rank': [1.5, None], 'text': 'ok'}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    return value


def _cell(value) -> str:
    """A value as a CSV cell: text as it is, a missing one empty, a list or an object (a JSON line's, a multi-label
    set's) as JSON, true/false as JSON writes them.

    >>> [_cell(value) for value in ("a, b", None, 0.5, True, {"k": [1]})]
    ['a, b', '', '0.5', 'true', '{"k": [1]}']
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, list, dict)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _write_delimited(delimiter: str, label_delimiter: str):
    """The writer of a file of ``delimiter``-separated columns, each label set's names joined by ``label_delimiter``."""
    def write(tmp: str, chunks: Iterator[list[tuple[str, dict]]], added: list[str], source) -> None:
        with open(tmp, "w", encoding="utf-8", newline="") as handle:
            # Lines end in \n, not csv's \r\n: `cut -f8 out.tsv` read the last column as "3\r". csv then quotes a field
            # holding \n but not one holding a lone \r, which would read back as two fields: such a row is all quoted.
            out = csv.writer(handle, delimiter=delimiter, lineterminator="\n")
            quoted = csv.writer(handle, delimiter=delimiter, lineterminator="\n", quoting=csv.QUOTE_ALL)
            header = None
            for chunk in chunks:
                for where, record in chunk:
                    for name in LABEL_SET_COLUMNS:  # (read back as label sets by `--multi-label`)
                        if name in added and isinstance(record.get(name), list):
                            record[name] = label_delimiter.join(record[name])
                    if header is None:
                        header = list(record)
                        out.writerow(header)
                    _refuse_other_columns(source, where, record, header)
                    cells = [_cell(record.get(column)) for column in header]
                    (quoted if any("\r" in cell for cell in cells) else out).writerow(cells)
            if header is None:  # no rows: the input's columns and the prediction's, as rows would have had them
                out.writerow([*_input_columns(source), *added])
    return write


def _refuse_other_columns(source, where: str, record: dict, header: list[str]) -> None:
    """One line for a JSON line holding a column the first one lacked: a table has the first row's columns (a row
    lacking one of them gets an empty cell)."""
    if extra := next((column for column in record if column not in header), None):
        raise DataError(f"{source}, {where}: column {shown(extra)} is not among the first line's columns, which the "
                        f"output's header holds: write .jsonl, whose lines each keep their own columns")


def _input_columns(source: str | Path | None) -> list[str]:
    """The columns of ``source``'s rows (texts given without a file: ``text``), for an output of no rows."""
    return ["text"] if source is None else data_columns(source)


def _write_parquet(tmp: str, chunks: Iterator[list[tuple[str, dict]]], added: list[str], source) -> None:
    import pyarrow as pa  # (check_output saw that it is installed)
    import pyarrow.parquet as pq

    writer = schema = None
    try:
        for chunk in chunks:
            # (a JSON line's values type the columns: the first rows' may mix types, 1 and "2", or hold an empty
            # object or an integer past 64 bits, which Parquet has no type for; a later row's may be unlike them)
            try:
                records = [record for _, record in chunk]
                if schema is None:
                    schema = _parquet_schema(pa, source, records, added)
                    writer = pq.ParquetWriter(tmp, schema)
                for where, record in chunk:
                    _refuse_other_columns(source, where, record, schema.names)
                if not _is_parquet(source) and (widened := _widened(pa, schema, records)):
                    # (the rows written are written again under it, their values cast: a null, or 1 as 1.0)
                    writer.close()
                    writer, written = None, pq.read_table(tmp).cast(widened)
                    schema, writer = widened, pq.ParquetWriter(tmp, widened)
                    writer.write_table(written)
                writer.write_table(pa.Table.from_pylist(records, schema=schema))
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError) as exc:
                raise DataError(f"{source}, {chunk[0][0]} to {chunk[-1][0]}: a column's values are of more than one "
                                f"type, or of one Parquet has none for ({' '.join(str(exc).split())}); write .jsonl, "
                                f"which keeps each value as it is") from None
        if writer is None:  # no rows: the input's columns (text, unless typed by a Parquet input) and the prediction's
            columns = [{column: "" for column in _input_columns(source)}]
            pq.write_table(pa.Table.from_pylist([], schema=_parquet_schema(pa, source, columns, added)), tmp)
    finally:
        if writer is not None:
            writer.close()


def _widened(pa, schema, records: list[dict]):
    """``schema``, typed by earlier rows' values, widened to hold ``records``' too, or None where it holds them
    already: a column null in every row so far (an optional one) typed by its first values, and one of whole numbers
    so far made one of floats by a fraction, which pyarrow would cut (1.5 written 1). Values of two kinds (1 and
    "2") are still refused, an ``ArrowTypeError``.

    >>> import pyarrow as pa
    >>> _widened(pa, pa.schema([("score", pa.int64()), ("note", pa.null())]), [{"score": 1.5, "note": None}])
    score: double
    note: null
    """
    # (every column of the schema, not the first record's alone, which pyarrow reads: a chunk whose first line
    # lacks an optional column typed none of that column's values)
    values = pa.Table.from_pylist([{name: record.get(name) for name in schema.names} for record in records])
    widened = pa.unify_schemas([schema, values.schema], promote_options="permissive")
    return None if widened.equals(schema) else widened


def _is_parquet(source: str | Path | None) -> bool:
    """Whether the rows were read from a Parquet file, whose own schema types the output's columns."""
    return source is not None and Path(source).suffix.lower() == ".parquet"


def _parquet_schema(pa, source, records: list[dict], added: list[str]):
    """The output's schema: a Parquet input's own columns as they are typed there (otherwise as the first rows'
    values type them), then the prediction's."""
    import pyarrow.parquet as pq

    predicted_types = {"confidence": pa.float64(), "unknown_tokens": pa.int64(), "tokens_read": pa.int64(),
                       "predicted_label": pa.string(), "predicted_labels": pa.list_(pa.string())}
    predicted = [pa.field(name, predicted_types.get(name, pa.float64())) for name in added]
    if _is_parquet(source):
        read = pq.read_schema(source)
    else:
        read = pa.Table.from_pylist([{k: v for k, v in record.items() if k not in added} for record in records]).schema
    return pa.schema([*read, *predicted])


def _writer(suffix: str, label_delimiter: str):
    """The writer of the format ``suffix`` names: CSV's and TSV's join label sets by ``label_delimiter``."""
    delimiters = {".csv": ",", ".tsv": "\t"}
    if suffix in delimiters:
        return _write_delimited(delimiters[suffix], label_delimiter)
    return {".jsonl": _write_json_lines, ".parquet": _write_parquet}[suffix]
