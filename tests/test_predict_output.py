"""`attnclf predict RUN --file in.csv --output out.csv`: every input row and column back, with its prediction beside."""

import csv
import json
import sys
from pathlib import Path

import pytest

from attnclf.cli import main

POSITIVE = ["a wonderful film", "great acting and a great story", "brilliant and moving", "i loved it"]
NEGATIVE = ["a boring film", "dull acting and a weak story", "awful and tedious", "i hated it"]
COLUMNS = ["predicted_label", "confidence", "probability:neg", "probability:pos", "unknown_tokens", "tokens_read"]


def write_rows(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t" if path.suffix == ".tsv" else ",")
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    rows = [(t, "pos") for t in POSITIVE * 8] + [(t, "neg") for t in NEGATIVE * 8]
    return write_rows(folder / "train.csv", ["text", "label"], rows)


@pytest.fixture(scope="module")
def run(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "boe"
    assert main(["train", "--train-file", str(data), "--test-file", str(data), "--model", "boe", "--epochs", "10",
                 "--lr", "0.01", "--min-frequency", "1", "--output", str(out), "--quiet", "--no-report",
                 "--threads", "1"]) == 0
    return out


def stdout_labels(run, texts, capsys) -> list[str]:
    assert main(["predict", str(run), *texts]) == 0
    return [json.loads(line)["label"] for line in capsys.readouterr().out.splitlines()]


def test_a_csv_comes_back_with_every_column_in_order_and_the_predictions_beside(run, tmp_path, capsys):
    texts = ["a wonderful film, i loved it", "dull acting\nand a weak story", "brilliant"]
    source = write_rows(tmp_path / "in.csv", ["id", "text", "date"],
                        [(7, texts[0], "2026-01-02"), ("008", texts[1], ""), ("9", texts[2], "2026-01-04")])
    output = tmp_path / "out.csv"
    assert main(["predict", str(run), "--file", str(source), "--output", str(output)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"wrote 3 predictions to {output}\n"
    with open(output, newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    assert header == ["id", "text", "date", *COLUMNS]
    assert [row[:3] for row in rows] == [["7", texts[0], "2026-01-02"], ["008", texts[1], ""],
                                         ["9", texts[2], "2026-01-04"]]
    assert [row[3] for row in rows] == stdout_labels(run, texts, capsys)
    for row in rows:
        confidence, neg, pos = float(row[4]), float(row[5]), float(row[6])
        assert confidence == max(neg, pos) and abs(neg + pos - 1) < 1e-5
        assert int(row[7]) <= int(row[8])


def test_a_spreadsheets_trailing_empty_columns_come_back_named_as_pandas_names_them(run, tmp_path, capsys):
    # Excel's `text,label,,`: two columns of no name, which the copied rows could not tell apart (it was refused)
    source = tmp_path / "in.csv"
    source.write_text("text,label,,\na wonderful film,pos,,\na boring film,neg,,\n", encoding="utf-8")
    output, errors = tmp_path / "out.csv", tmp_path / "wrong.csv"
    assert main(["predict", str(run), "--file", str(source), "--output", str(output)]) == 0
    with open(output, newline="", encoding="utf-8") as f:
        header, *rows = list(csv.reader(f))
    assert header == ["text", "label", "Unnamed: 2", "Unnamed: 3", *COLUMNS]
    assert [row[:4] for row in rows] == [["a wonderful film", "pos", "", ""], ["a boring film", "neg", "", ""]]
    # evaluate --errors names them alike (from the header, as for a file of no wrong rows)
    assert main(["evaluate", str(run), "--test-file", str(source), "--errors", str(errors)]) == 0
    with open(errors, newline="", encoding="utf-8") as f:
        assert next(csv.reader(f))[:3] == ["row", "Unnamed: 2", "Unnamed: 3"]
    capsys.readouterr()


def test_json_lines_keep_each_row_s_values_and_types(run, tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    records = [{"id": 1, "text": "i loved it", "meta": {"source": "web", "tags": ["a"]}},
               {"id": 2, "text": "awful and tedious", "meta": None}]
    source.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    output = tmp_path / "out.jsonl"
    assert main(["predict", str(run), "--file", str(source), "--output", str(output)]) == 0
    written = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [list(record) for record in written] == [["id", "text", "meta", *COLUMNS]] * 2
    assert [{key: record[key] for key in ("id", "text", "meta")} for record in written] == records
    assert [record["predicted_label"] for record in written] == ["pos", "neg"]


def test_parquet_keeps_the_input_s_column_types(run, tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                             "text": ["i loved it", "awful and tedious", "brilliant and moving"],
                             "score": pa.array([0.5, None, 2.0], pa.float64())}), source)
    output = tmp_path / "out.parquet"
    assert main(["predict", str(run), "--file", str(source), "--output", str(output)]) == 0
    table = pq.read_table(output)
    assert table.column_names == ["id", "text", "score", *COLUMNS]
    assert table.schema.field("id").type == pa.int64() and table.schema.field("confidence").type == pa.float64()
    assert table.column("score").to_pylist() == [0.5, None, 2.0]
    assert table.column("predicted_label").to_pylist() == ["pos", "neg", "pos"]


def test_a_json_lines_column_in_parquet_is_typed_by_every_chunk_not_by_the_first_alone(run, tmp_path, capsys,
                                                                                        monkeypatch):
    # The first 4,096 lines typed each column: an optional one, null in all of them, stopped the run at its first
    # value after them as "of more than one type", and one of whole numbers there wrote a later 2.5 as 2, silently.
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from attnclf import prediction_files

    monkeypatch.setattr(prediction_files, "PREDICT_CHUNK", 2)
    records = [{"text": "i loved it", "note": None, "tags": None, "score": 1},
               {"text": "i hated it", "note": None, "score": 2},
               {"text": "a boring film", "note": "checked", "tags": None, "score": 2.5},
               {"text": "a wonderful film", "note": None, "score": 3},
               {"text": "awful and tedious", "note": "late", "tags": ["x", "y"], "score": None}]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    output = tmp_path / "out.parquet"
    assert main(["predict", str(run), "--file", str(source), "--output", str(output)]) == 0
    table = pq.read_table(output)
    assert table.schema.field("note").type == pa.string() and table.schema.field("tags").type == pa.list_(pa.string())
    assert table.schema.field("score").type == pa.float64()
    assert table.column("note").to_pylist() == [None, None, "checked", None, "late"]
    assert table.column("tags").to_pylist() == [None, None, None, None, ["x", "y"]]
    assert table.column("score").to_pylist() == [1.0, 2.0, 2.5, 3.0, None]
    assert table.column("predicted_label").to_pylist() == ["pos", "neg", "neg", "pos", "neg"]
    # A chunk's first line without the column (not null: absent) types it by the lines after it too, which pyarrow
    # alone would not read: 2.5 was written 2, and the note refused as "of more than one type"
    records = [{"text": "i loved it", "note": None, "score": 1}, {"text": "i hated it", "score": 2},
               {"text": "a boring film"}, {"text": "a wonderful film", "note": "checked", "score": 2.5}]
    source.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    assert main(["predict", str(run), "--file", str(source), "--output", str(output), "--overwrite"]) == 0
    table = pq.read_table(output)
    assert table.column("score").to_pylist() == [1.0, 2.0, None, 2.5]
    assert table.column("note").to_pylist() == [None, None, None, "checked"]
    # Values of two kinds are still refused, by the lines that hold the second
    source.write_text("".join(json.dumps({"text": "i loved it", "id": i if i < 2 else str(i)}) + "\n"
                              for i in range(4)), encoding="utf-8")
    capsys.readouterr()
    assert main(["predict", str(run), "--file", str(source), "--output", str(output), "--overwrite"]) == 2
    assert capsys.readouterr().err.startswith(f"attnclf: error: {source}, line 3 to line 4: a column's values are of "
                                              f"more than one type")


def test_parquet_output_without_pyarrow_is_one_line(run, tmp_path, capsys, monkeypatch, cli_error):
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # (an import of it raises ImportError)
    output = tmp_path / "out.parquet"
    err = cli_error(["predict", str(run), "i loved it", "--output", str(output)])
    assert err.startswith(f"{output}: writing Parquet needs pyarrow: ") and not output.exists()


def test_a_text_file_arguments_and_stdin_give_a_text_column(run, tmp_path, capsys):
    plain = tmp_path / "texts.txt"
    plain.write_text("i loved it\n\nawful and tedious\n", encoding="utf-8")
    output = tmp_path / "out.tsv"
    assert main(["predict", str(run), "--file", str(plain), "--output", str(output)]) == 0
    with open(output, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["text", *COLUMNS]
    assert [(row[0], row[1]) for row in rows[1:]] == [("i loved it", "pos"), ("awful and tedious", "neg")]
    output = tmp_path / "args.jsonl"
    assert main(["predict", str(run), "i loved it", "i hated it", "--output", str(output)]) == 0
    written = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [(record["text"], record["predicted_label"]) for record in written] == [("i loved it", "pos"),
                                                                                  ("i hated it", "neg")]


def test_an_input_column_named_as_a_prediction_column_is_refused(run, tmp_path, capsys, cli_error):
    source = write_rows(tmp_path / "in.csv", ["text", "confidence"], [("i loved it", "high")])
    output = tmp_path / "out.csv"
    err = cli_error(["predict", str(run), "--file", str(source), "--output", str(output)])
    assert err == (f"{source}: column 'confidence' is one predict --output writes (predicted_label, confidence, "
                   f"probability:LABEL, unknown_tokens, tokens_read); rename it in the file")
    assert not output.exists()
    # A JSON line names its own columns: the message named only the file, leaving a reader to search a million lines.
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "i loved it"}\n\n{"text": "i hated it", "probability:pos": 0.9}\n', encoding="utf-8")
    err = cli_error(["predict", str(run), "--file", str(source), "--output", str(output)])
    assert err.startswith(f"{source}, line 3: column 'probability:pos' is one predict --output writes (")
    assert not output.exists()


def test_an_existing_output_is_refused_unless_overwrite_and_the_input_always(run, tmp_path, capsys, cli_error):
    source = write_rows(tmp_path / "in.csv", ["text"], [("i loved it",)])
    output = tmp_path / "out.csv"
    output.write_text("keep me\n")
    err = cli_error(["predict", str(run), "--file", str(source), "--output", str(output)])
    assert err == f"{output} exists; give --overwrite to replace it"
    assert output.read_text() == "keep me\n"
    assert main(["predict", str(run), "--file", str(source), "--output", str(output), "--overwrite"]) == 0
    assert output.read_text().startswith("text,predicted_label,") and capsys.readouterr().err.startswith("wrote 1 ")
    for same in (source, tmp_path / "." / "in.csv"):
        err = cli_error(["predict", str(run), "--file", str(source), "--output", str(same), "--overwrite"])
        assert err == f"--output {same} is the --file it reads; give another file"
    err = cli_error(["predict", str(run), "i loved it", "--output", str(tmp_path)])
    assert err == f"{tmp_path} is a folder; give --output a file name"
    err = cli_error(["predict", str(run), "i loved it", "--output", f"{tmp_path}/scored.csv/"])  # (wrote scored.csv)
    assert err == f"{tmp_path}/scored.csv/ is a folder; give --output a file name"


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
@pytest.mark.parametrize("hard_links", [True, False])
def test_a_file_written_at_the_output_during_the_run_is_kept_unless_overwrite(run, tmp_path, capsys, monkeypatch,
                                                                              cli_error, suffix, hard_links):
    # The output was checked before the run, then the finished file renamed over whatever was there by then: a file
    # another process wrote at that name meanwhile was replaced without --overwrite.
    import errno
    import os

    from attnclf import prediction_files

    if not hard_links:  # (FAT and some network mounts make none: the output is looked for once more, then renamed)
        def no_hard_links(source, destination, **kwargs):
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), source, None, destination)

        monkeypatch.setattr(os, "link", no_hard_links)
    output = tmp_path / "out" / f"scored{suffix}"
    writer_of, theirs = prediction_files._writer, []

    def another_process_may_write_the_output_meanwhile(*format_args):
        def write(tmp, *args):
            writer_of(*format_args)(tmp, *args)
            for text in theirs:
                output.write_text(text)
        return write

    monkeypatch.setattr(prediction_files, "_writer", another_process_may_write_the_output_meanwhile)
    ours = ("text,predicted_label,", '{"text": "i loved it"')
    assert main(["predict", str(run), "i loved it", "--output", str(output)]) == 0
    assert output.read_text().startswith(ours) and list(output.parent.iterdir()) == [output]
    capsys.readouterr()
    output.unlink()
    theirs.append("theirs\n")
    err = cli_error(["predict", str(run), "i loved it", "--output", str(output)])
    assert err == f"{output} was written by another process while predicting; give --overwrite to replace it"
    assert output.read_text() == "theirs\n" and list(output.parent.iterdir()) == [output]
    output.unlink()
    assert main(["predict", str(run), "i loved it", "--output", str(output), "--overwrite"]) == 0
    assert output.read_text().startswith(ours) and list(output.parent.iterdir()) == [output]


def test_an_output_suffix_not_written_is_refused_listing_those_that_are(run, tmp_path, capsys, cli_error):
    output = tmp_path / "out.xlsx"
    err = cli_error(["predict", str(run), "i loved it", "--output", str(output)])
    assert err == f"{output}: unknown output type '.xlsx'; use .csv, .tsv, .jsonl or .parquet"
    assert not output.exists()


def test_attention_is_refused_with_an_output(run, tmp_path, capsys, cli_error):
    err = cli_error(["predict", str(run), "i loved it", "--attention", "--output", str(tmp_path / "o.jsonl")])
    assert err.startswith("--attention prints tokens and attention as JSON lines on stdout")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_prediction_failing_midway_leaves_no_output_no_temporary_file_and_no_folder_made_for_it(
        run, tmp_path, capsys, monkeypatch, suffix):
    from attnclf import prediction_files
    from attnclf.classifier import Classifier

    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    source = write_rows(tmp_path / "in.csv", ["text"], [(text,) for text in POSITIVE + NEGATIVE])
    monkeypatch.setattr(prediction_files, "PREDICT_CHUNK", 3)
    original, calls = Classifier.predict, []

    def failing_after_the_first_chunk(self, texts, tokens=True, **options):
        calls.append(len(texts))
        if len(calls) > 1:
            raise RuntimeError("the model broke")
        return original(self, texts, tokens, **options)

    monkeypatch.setattr(Classifier, "predict", failing_after_the_first_chunk)
    output = tmp_path / "out" / f"scored{suffix}"
    with pytest.raises(RuntimeError, match="the model broke"):
        main(["predict", str(run), "--file", str(source), "--output", str(output)])
    assert calls == [3, 3] and not (tmp_path / "out").exists()  # (the folder made for it was left behind, empty)
    output.parent.mkdir()  # (one that was there stays)
    output.write_text("earlier\n")  # an output replaced keeps its old bytes until the new ones are whole
    calls.clear()
    with pytest.raises(RuntimeError, match="the model broke"):
        main(["predict", str(run), "--file", str(source), "--output", str(output), "--overwrite"])
    assert output.read_text() == "earlier\n" and list(output.parent.iterdir()) == [output]


def test_an_ensemble_folder_writes_its_averaged_predictions(data, tmp_path, capsys):
    folder = tmp_path / "seeds"
    assert main(["train", "--train-file", str(data), "--test-file", str(data), "--model", "boe", "--epochs", "1",
                 "--min-frequency", "1", "--seeds", "1", "2", "--output", str(folder), "--quiet", "--no-report",
                 "--threads", "1"]) == 0
    output = tmp_path / "out.csv"
    assert main(["predict", str(folder), "--file", str(data), "--output", str(output)]) == 0
    with open(output, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 64 and list(rows[0]) == ["text", "label", *COLUMNS]


def test_a_multi_label_run_writes_its_label_set(tmp_path, capsys):
    train = tmp_path / "train.jsonl"
    sets = {"the coach praised the team": ["sports"], "the new album is loud": ["music"],
            "the team sang the album": ["music", "sports"], "the weather was grey": []}
    train.write_text("".join(json.dumps({"text": t, "topics": y}) + "\n" for t, y in sets.items()) * 10)
    run = tmp_path / "topics"
    assert main(["train", "--train-file", str(train), "--test-file", str(train), "--label-column", "topics",
                 "--multi-label", "--model", "boe", "--epochs", "2", "--min-frequency", "1", "--output", str(run),
                 "--quiet", "--no-report", "--threads", "1"]) == 0
    output = tmp_path / "out.csv"
    assert main(["predict", str(run), "the team sang the album", "--output", str(output)]) == 0
    with open(output, newline="", encoding="utf-8") as f:
        row = next(csv.DictReader(f))
    assert list(row) == ["text", "predicted_labels", "probability:music", "probability:sports", "unknown_tokens",
                         "tokens_read"]
    assert set(filter(None, row["predicted_labels"].split("|"))) <= {"music", "sports"}
    output = tmp_path / "out.jsonl"
    assert main(["predict", str(run), "the team sang the album", "--output", str(output)]) == 0
    assert isinstance(json.loads(output.read_text())["predicted_labels"], list)


def test_the_python_api_writes_a_file_of_predictions(run, tmp_path):
    from attnclf.classifier import Classifier
    from attnclf.prediction_files import predict_file

    source = write_rows(tmp_path / "in.csv", ["id", "text"], [("a", "i loved it"), ("b", "i hated it")])
    assert predict_file(Classifier.load(run, device="cpu"), source, tmp_path / "out.jsonl") == 2
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(record["id"], record["predicted_label"]) for record in written] == [("a", "pos"), ("b", "neg")]


def test_the_onnx_backend_writes_what_pytorch_writes(demo_run, exported, tmp_path, capsys):
    output = {backend: tmp_path / f"{backend}.jsonl" for backend in ("torch", "onnx")}
    for backend, path in output.items():
        run = exported if backend == "onnx" else demo_run
        assert main(["predict", str(run), "the plot was not good", "a fine film", "--backend", backend,
                     "--output", str(path)]) == 0
    torch_rows, onnx_rows = ([json.loads(line) for line in path.read_text().splitlines()] for path in output.values())
    assert [row["predicted_label"] for row in onnx_rows] == [row["predicted_label"] for row in torch_rows]
    assert list(onnx_rows[0]) == list(torch_rows[0])


def test_rows_a_table_cannot_hold_are_one_line(run, tmp_path, capsys, cli_error):
    source = tmp_path / "in.jsonl"  # a later line with a key the first lacks: no column of the header holds it
    source.write_text('{"text": "i loved it"}\n{"text": "i hated it", "id": 2}\n', encoding="utf-8")
    output = tmp_path / "out.csv"
    err = cli_error(["predict", str(run), "--file", str(source), "--output", str(output)])
    assert err == (f"{source}, line 2: column 'id' is not among the first line's columns, which the output's header "
                   f"holds: write .jsonl, whose lines each keep their own columns")
    assert not output.exists()
    assert main(["predict", str(run), "--file", str(source), "--output", str(tmp_path / "out.jsonl")]) == 0
    capsys.readouterr()
    repeated = write_rows(tmp_path / "in.csv", ["id", "text", "id"], [("1", "i loved it", "2")])
    err = cli_error(["predict", str(run), "--file", str(repeated), "--output", str(output)])
    assert err == f"{repeated}, line 1: the header names column 'id' 2 times; rename all but one"


def test_json_lines_values_parquet_cannot_type_are_one_line_and_leave_no_output(run, tmp_path, capsys, cli_error):
    output = tmp_path / "out.parquet"
    for name, lines, detail in (
            ("mixed.jsonl", ['{"text": "i loved it", "id": 1}', '{"text": "i hated it", "id": "2"}'],
             "Could not convert '2' with type str: tried to convert to int64"),
            ("empty.jsonl", ['{"text": "i loved it", "meta": {}}', '{"text": "i hated it", "meta": {}}'],
             "Cannot write struct type 'meta' with no child field to Parquet"),
            ("big.jsonl", ['{"text": "i loved it", "id": 1}', '{"text": "i hated it", "id": 10000000000000000000000}'],
             "Python int too large to convert to C long")):
        source = tmp_path / name
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        err = cli_error(["predict", str(run), "--file", str(source), "--output", str(output)])
        assert err.startswith(f"{source}, line 1 to line 2: a column's values are of more than one type, or of one "
                              f"Parquet has none for ({detail}")
        assert err.endswith("); write .jsonl, which keeps each value as it is")
        assert list(tmp_path.glob("*out.parquet*")) == []
        assert main(["predict", str(run), "--file", str(source), "--output", str(tmp_path / f"{name}.jsonl")]) == 0
        capsys.readouterr()


def test_a_parquet_nan_or_infinity_is_valid_json_in_json_lines(run, tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["i loved it", "awful and tedious"],
                             "score": pa.array([float("nan"), float("inf")], pa.float64())}), source)
    output = tmp_path / "out.jsonl"
    assert main(["predict", str(run), "--file", str(source), "--output", str(output)]) == 0
    lines = output.read_text(encoding="utf-8").splitlines()
    # (strict JSON: Python's json.loads alone would accept NaN and Infinity, which other readers reject)
    written = [json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} is not JSON")) for line in lines]
    assert [record["score"] for record in written] == [None, None]


def test_the_python_api_replaces_an_output_from_a_text_file_when_asked(run, tmp_path):
    # predict_file handed a plain-text file on to predict_texts without overwrite, which then refused the output.
    from attnclf.classifier import Classifier
    from attnclf.prediction_files import predict_file

    plain = tmp_path / "texts.txt"
    plain.write_text("i loved it\ni hated it\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    output.write_text("earlier\n")
    assert predict_file(Classifier.load(run, device="cpu"), plain, output, overwrite=True) == 2
    assert [json.loads(line)["text"] for line in output.read_text().splitlines()] == ["i loved it", "i hated it"]


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_csv_and_tsv_lines_end_in_a_newline_alone(run, tmp_path, capsys, suffix):
    # csv.writer ends lines in \r\n by default: `cut -f8 out.tsv` then gave "3\r", a number no longer.
    output = tmp_path / f"out{suffix}"
    assert main(["predict", str(run), "i loved it", "i hated it", "--output", str(output)]) == 0
    written = output.read_bytes()
    assert b"\r" not in written and written.count(b"\n") == 3
    source = tmp_path / "in.jsonl"  # a text's own lone \r, which csv leaves unquoted with \n line ends, stays one field
    source.write_text(json.dumps({"id": 1, "text": "i loved it\rreally"}) + "\n", encoding="utf-8")
    assert main(["predict", str(run), "--file", str(source), "--output", str(output), "--overwrite"]) == 0
    with open(output, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t" if suffix == ".tsv" else ","))
    assert [row[:2] for row in rows] == [["id", "text"], ["1", "i loved it\rreally"]] and len(rows[1]) == len(rows[0])


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet"])
def test_a_file_of_no_rows_gives_its_own_columns_and_the_prediction_s(run, tmp_path, capsys, suffix):
    # A header-only file (a day with nothing to score) lost its columns: the output's header held only the
    # prediction's, so a pipeline reading `id` from it broke on the quiet days.
    if suffix == ".parquet":
        pa = pytest.importorskip("pyarrow")
        pq = pytest.importorskip("pyarrow.parquet")
        source = tmp_path / "in.parquet"
        pq.write_table(pa.table({"id": pa.array([], pa.int64()), "text": pa.array([], pa.string())}), source)
    else:
        source = write_rows(tmp_path / f"in{suffix}", ["id", "text"], [])
    for written in (".csv", ".parquet"):
        output = tmp_path / f"out{written}"
        assert main(["predict", str(run), "--file", str(source), "--output", str(output)]) == 0
        if written == ".csv":
            assert output.read_text(encoding="utf-8").splitlines() == [",".join(["id", "text", *COLUMNS])]
        else:
            assert pytest.importorskip("pyarrow.parquet").read_table(output).column_names == ["id", "text", *COLUMNS]
    assert capsys.readouterr().err.endswith(f"wrote 0 predictions to {output}\n")


def test_no_texts_give_a_text_column_and_the_prediction_s(run, tmp_path, capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\n")))
    output = tmp_path / "out.csv"
    assert main(["predict", str(run), "--file", "-", "--output", str(output)]) == 0
    assert output.read_text(encoding="utf-8").splitlines() == [",".join(["text", *COLUMNS])]


def test_a_failing_hard_link_other_than_none_made_here_is_not_taken_for_a_filesystem_without_them(tmp_path,
                                                                                                  monkeypatch):
    # Only the errors that say a filesystem makes no hard links fall back to look-then-rename; a disk error or a
    # full disk is the write's failure, and the temporary file goes with it.
    import errno
    import os

    from attnclf.rundir import written_atomically

    def broken_disk(source, destination, **kwargs):
        raise OSError(errno.EIO, os.strerror(errno.EIO), source, None, destination)

    monkeypatch.setattr(os, "link", broken_disk)
    output = tmp_path / "scored.csv"
    with pytest.raises(OSError) as raised:
        with written_atomically(output, replace=False) as tmp:
            Path(tmp).write_text("ours\n")
    assert raised.value.errno == errno.EIO
    assert list(tmp_path.iterdir()) == []


def test_predict_file_tells_each_chunk_written_as_it_goes(run, tmp_path, monkeypatch):
    from attnclf import prediction_files
    from attnclf.classifier import Classifier

    monkeypatch.setattr(prediction_files, "PREDICT_CHUNK", 3)
    source = write_rows(tmp_path / "in.csv", ["id", "text"], [(i, POSITIVE[i % 4]) for i in range(8)])
    told = []
    written = prediction_files.predict_file(Classifier.load(run), source, tmp_path / "out.csv", done=told.append)
    assert written == 8 and told == [3, 3, 2]


class _Terminal:
    """stderr as a terminal sees it: tqdm draws its bar only there."""

    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass

    def isatty(self):
        return True


def test_a_long_predict_into_a_file_shows_its_rows_and_rate_at_a_terminal(run, tmp_path, monkeypatch):
    """1,000,000 rows took minutes with nothing on the screen but the last line (BENCHMARKS.md)."""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    source = write_rows(tmp_path / "in.csv", ["id", "text"], [(i, POSITIVE[i % 4]) for i in range(5)])
    assert main(["predict", str(run), "--file", str(source), "--output", str(tmp_path / "out.csv")]) == 0
    # (the chunks' counts reach the bar: test_predict_file_tells_each_chunk_written_as_it_goes)
    assert "\rpredicting: " in terminal.text and " texts/s]" in terminal.text
    assert terminal.text.rstrip().endswith("wrote 5 predictions to " + str(tmp_path / "out.csv"))


def _bar_total_shown(terminal: _Terminal, rows: int) -> bool:
    """Whether the bar drew its total (rows done of it, as `| 0/5 [`), whence its time left."""
    return f"/{rows} [" in terminal.text and "%|" in terminal.text


def test_a_parquet_file_gives_the_bar_its_row_count_from_its_metadata(run, tmp_path, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": [POSITIVE[i % 4] for i in range(5)]}), source)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["predict", str(run), "--file", str(source), "--output", str(tmp_path / "out.csv")]) == 0
    assert _bar_total_shown(terminal, 5)


def test_a_plain_text_file_read_whole_gives_the_bar_its_count(run, tmp_path, monkeypatch):
    source = tmp_path / "in.txt"
    source.write_text("".join(f"{POSITIVE[i % 4]}\n\n" for i in range(5)), encoding="utf-8")  # (blank lines skipped)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["predict", str(run), "--file", str(source), "--output", str(tmp_path / "out.csv")]) == 0
    assert _bar_total_shown(terminal, 5)


def test_a_csv_s_bar_goes_without_a_total_it_would_take_a_pass_to_count(run, tmp_path, monkeypatch):
    source = write_rows(tmp_path / "in.csv", ["id", "text"], [(i, POSITIVE[i % 4]) for i in range(5)])
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["predict", str(run), "--file", str(source), "--output", str(tmp_path / "out.csv")]) == 0
    assert "\rpredicting: " in terminal.text and not _bar_total_shown(terminal, 5)


def test_unknown_token_notes_take_a_line_of_their_own_under_the_bar(run, tmp_path, monkeypatch):
    source = write_rows(tmp_path / "in.csv", ["id", "text"], [(1, "zzqx wqvy plok"), (2, "i loved it")])
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["predict", str(run), "--file", str(source), "--output", str(tmp_path / "out.csv")]) == 0
    noted = [line for line in terminal.text.split("\n") if "note: " in line]
    assert len(noted) == 1
    # What the terminal shows of the line: the text after its last carriage return, the bar's drawing cleared.
    assert noted[0].rsplit("\r", 1)[-1].startswith("note: 'zzqx wqvy plok': ")


def test_unknown_token_notes_name_the_first_few_texts_then_count_the_rest():
    from attnclf.prediction import NOTED_TEXTS, Prediction, UnknownTokenNotes

    said = []
    notes = UnknownTokenNotes(say=said.append)
    for i in range(NOTED_TEXTS + 3):
        notes(f"zzz {i}", Prediction("pos", 0.5, {"neg": 0.5, "pos": 0.5}, unknown_tokens=2, tokens_read=2))
    notes("good film", Prediction("pos", 0.9, {"neg": 0.1, "pos": 0.9}, unknown_tokens=0, tokens_read=2))
    notes.count_the_rest()
    assert len(said) == NOTED_TEXTS + 1 and said[0].startswith("note: 'zzz 0': all 2 tokens the model read are")
    assert said[-1].startswith("note: and 3 more texts past a quarter of their tokens unknown")


def test_a_multi_label_run_joins_its_label_sets_in_csv_by_its_own_label_delimiter(tmp_path, capsys):
    # A run trained with --label-delimiter ';' wrote 'music|sports', which its own settings read back as one label.
    from attnclf.data.files import load_file

    train = write_rows(tmp_path / "train.csv", ["text", "topics"],
                       [("the coach praised the team", "sports"), ("the new album is loud", "music"),
                        ("the team sang the album", "music;sports"), ("the weather was grey", "")] * 10)
    run = tmp_path / "topics"
    assert main(["train", "--train-file", str(train), "--test-file", str(train), "--label-column", "topics",
                 "--multi-label", "--label-delimiter", ";", "--model", "boe", "--epochs", "1", "--min-frequency", "1",
                 "--output", str(run), "--quiet", "--no-report", "--threads", "1"]) == 0
    thresholds = json.loads((run / "thresholds.json").read_text())  # every label predicted: sets of two to join
    thresholds["thresholds"] = dict.fromkeys(thresholds["thresholds"], 0.001)
    (run / "thresholds.json").write_text(json.dumps(thresholds))
    output, wrong = tmp_path / "out.csv", tmp_path / "wrong.tsv"
    assert main(["predict", str(run), "--file", str(train), "--output", str(output), "--threads", "1"]) == 0
    assert main(["evaluate", str(run), "--errors", str(wrong), "--threads", "1"]) == 0
    with open(output, newline="", encoding="utf-8") as f:
        assert {frozenset(row["predicted_labels"].split(";")) for row in csv.DictReader(f)} == {
            frozenset({"music", "sports"})}
    with open(wrong, newline="", encoding="utf-8") as f:
        assert frozenset({"music", "sports"}) in {frozenset(row["extra_labels"].split(";"))
                                                  for row in csv.DictReader(f, delimiter="\t")}
    back = load_file(output, label_column="predicted_labels", multi_label=True, label_delimiter=";")
    assert sorted(back.label_names) == ["music", "sports"]  # read back by the run's own settings
    # Its ONNX export answers as the run does: its export.json records the delimiter.
    assert main(["export", str(run), "--threads", "1"]) == 0
    assert main(["predict", str(run), "--backend", "onnx", "--file", str(train), "--output",
                 str(tmp_path / "onnx.csv"), "--threads", "1"]) == 0
    with open(tmp_path / "onnx.csv", newline="", encoding="utf-8") as f:
        assert {frozenset(row["predicted_labels"].split(";")) for row in csv.DictReader(f)} == {
            frozenset({"music", "sports"})}
