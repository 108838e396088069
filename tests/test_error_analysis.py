"""Error analysis: the misclassified texts of a labelled set, listed with their probabilities."""

import csv
import json

import numpy as np
import pytest

from attnclf.cli import main



def test_misclassified_lists_each_wrong_text_most_confident_first():
    from attnclf.evaluation.metrics import misclassified_rows

    probabilities = np.array([[.9, .1], [.3, .7], [.6, .4], [.05, .95]])
    rows = misclassified_rows(["a", "b", "c", "d"], [0, 0, 1, 0], probabilities, ["neg", "pos"])
    assert [row["row"] for row in rows] == [4, 2, 3]  # (1-based, as the data's rows count; most confident first)
    assert list(rows[0]) == ["row", "text", "true_label", "predicted_label", "confidence", "true_label_probability",
                             "probability:neg", "probability:pos"]
    assert rows[0]["text"] == "d" and (rows[0]["true_label"], rows[0]["predicted_label"]) == ("neg", "pos")
    assert rows[0]["confidence"] == pytest.approx(.95) and rows[0]["true_label_probability"] == pytest.approx(.05)


def test_evaluate_errors_writes_the_misclassified_rows_of_the_test_file(sport_and_money_run, tmp_path, capsys):
    run, test = sport_and_money_run
    out = tmp_path / "errors.csv"
    assert main(["evaluate", str(run), "--test-file", str(test), "--errors", str(out), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    with open(out, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == round((1 - metrics["accuracy"]) * metrics["num_examples"]) >= 2
    assert {"2", "5"} <= {row["row"] for row in rows}
    by_row = {row["row"]: row for row in rows}
    assert by_row["2"]["text"] == "the striker scored" and by_row["2"]["true_label"] == "money"
    assert by_row["2"]["predicted_label"] == "sport"
    confidences = [float(row["confidence"]) for row in rows]
    assert confidences == sorted(confidences, reverse=True)
    assert sum(float(row["probability:money"]) + float(row["probability:sport"]) for row in rows) == \
        pytest.approx(len(rows), abs=1e-5)


def test_evaluate_errors_says_what_it_wrote_in_terminal_format(sport_and_money_run, tmp_path, capsys):
    run, test = sport_and_money_run
    out = tmp_path / "errors.jsonl"
    assert main(["evaluate", str(run), "--test-file", str(test), "--errors", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert f"wrote {len(lines)} misclassified texts of 6 to {out}" in capsys.readouterr().err


def test_evaluate_errors_keeps_an_existing_file_unless_overwrite(sport_and_money_run, tmp_path, cli_error):
    run, test = sport_and_money_run
    out = tmp_path / "errors.csv"
    out.write_text("mine\n", encoding="utf-8")
    assert cli_error(["evaluate", str(run), "--test-file", str(test), "--errors", str(out)]) == \
        f"{out} exists; give --overwrite to replace it"
    assert out.read_text(encoding="utf-8") == "mine\n"
    assert main(["evaluate", str(run), "--test-file", str(test), "--errors", str(out), "--overwrite"]) == 0
    assert out.read_text(encoding="utf-8").startswith("row,text,true_label,predicted_label,confidence,")


def test_evaluate_errors_refuses_an_unknown_file_type_before_scoring(sport_and_money_run, tmp_path, cli_error):
    run, test = sport_and_money_run
    assert cli_error(["evaluate", str(run), "--test-file", str(test), "--errors", str(tmp_path / "e.xlsx")]) == \
        f"{tmp_path / 'e.xlsx'}: unknown output type '.xlsx'; use .csv, .tsv, .jsonl or .parquet"


def test_misclassified_from_python_as_a_notebook_reads_them(sport_and_money_run):
    from attnclf import Classifier
    from attnclf.evaluation import misclassified

    run, _ = sport_and_money_run
    clf = Classifier.load(run)
    rows = misclassified(clf, (["the striker scored", "stocks rose today"], ["money", "money"]))
    assert [(row["row"], row["predicted_label"]) for row in rows] == [(1, "sport")]


def test_labels_of_one_class_given_from_python_are_scored_as_the_class_they_name(sport_and_money_run):
    # Texts of one class number it 0 among their own names: scored by that number, "sport" would read as the run's
    # first class, whichever that is.
    from attnclf import Classifier
    from attnclf.evaluation import evaluate, misclassified

    run, _ = sport_and_money_run
    clf = Classifier.load(run)
    for texts, name in ((["the team won the match", "the striker scored twice"], "sport"),
                        (["the bank raised its rates", "stocks rose today"], "money")):
        assert [p.label for p in clf.predict(texts)] == [name, name]
        assert evaluate(clf, (texts, [name, name]))["accuracy"] == 1.0
        assert misclassified(clf, (texts, [name, name])) == []


def test_evaluate_refuses_overwrite_without_errors(sport_and_money_run, cli_error):
    run, test = sport_and_money_run
    assert cli_error(["evaluate", str(run), "--test-file", str(test), "--overwrite"]) == \
        "--overwrite replaces an existing --errors file; give --errors FILE, or drop --overwrite"


def test_evaluate_prints_the_confusion_matrix_with_its_classes_named(sport_and_money_run, capsys):
    run, test = sport_and_money_run
    assert main(["evaluate", str(run), "--test-file", str(test), "--json"]) == 0
    (money, sport) = json.loads(capsys.readouterr().out)["confusion_matrix"]  # (classes in the run's order)
    assert main(["evaluate", str(run), "--test-file", str(test)]) == 0
    out = capsys.readouterr().out
    assert "confusion matrix (rows: true label, columns: predicted)" in out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("confusion matrix"))
    assert lines[at + 1].split() == ["money", "sport"]
    assert lines[at + 2].split() == ["money", *map(str, money)] and lines[at + 3].split() == ["sport", *map(str, sport)]


def test_confusion_table_numbers_the_columns_of_classes_too_wide_to_name():
    from attnclf.evaluation.metrics import confusion_table

    names = [f"comp.sys.class-{i}" for i in range(12)]
    table = confusion_table(np.eye(12, dtype=int) * 7, names).splitlines()
    assert table[1].split() == [str(i) for i in range(12)] and table[2].split()[:3] == ["0", names[0], "7"]
    assert max(map(len, table)) <= 120


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_evaluate_errors_keeps_a_file_another_process_writes_meanwhile_in_one_line(sport_and_money_run, tmp_path, cli_error,
                                                                                   monkeypatch, suffix):
    from attnclf.evaluation import metrics

    run, test = sport_and_money_run
    out = tmp_path / f"errors{suffix}"
    rows_of = metrics.misclassified_rows

    def another_process_writes_the_file_while_scoring(*args):
        out.write_text("theirs\n", encoding="utf-8")
        return rows_of(*args)

    monkeypatch.setattr(metrics, "misclassified_rows", another_process_writes_the_file_while_scoring)
    assert cli_error(["evaluate", str(run), "--test-file", str(test), "--errors", str(out)]) == \
        f"{out} was written by another process while evaluating; give --overwrite to replace it"
    assert out.read_text(encoding="utf-8") == "theirs\n" and list(tmp_path.iterdir()) == [out]


def test_confusion_table_of_the_twenty_newsgroups_fits_120_columns():
    from attnclf.evaluation.metrics import confusion_table

    names = ("alt.atheism comp.graphics comp.os.ms-windows.misc comp.sys.ibm.pc.hardware comp.sys.mac.hardware "
             "comp.windows.x misc.forsale rec.autos rec.motorcycles rec.sport.baseball rec.sport.hockey sci.crypt "
             "sci.electronics sci.med sci.space soc.religion.christian talk.politics.guns talk.politics.mideast "
             "talk.politics.misc talk.religion.misc").split()
    matrix = np.full((20, 20), 3) + np.eye(20, dtype=int) * 377  # (its 7,532 test texts: some 380 a class)
    table = confusion_table(matrix, names).splitlines()
    assert max(map(len, table)) <= 120, max(map(len, table))
    assert [line.split()[0] for line in table[2:]] == [str(i) for i in range(20)]  # (each row still numbered)
    assert table[2 + 3].split()[1].startswith("comp.sys.ibm")  # (and named, as far as the width lets it)


TEST_ROWS = [("the team won the cup", "sport"), ("the striker scored", "money"), ("shares rose today", "money"),
             ("the bank reported a profit", "money"), ("a late goal won the match", "money"),
             ("the coach praised", "sport")]


def write_test_file(path, columns: list[str]):
    """The six test rows of ``sport_and_money_run`` with ``columns`` of their own around text and label: row N's value
    of column C is "C-N"."""
    rows = [{"text": text, "label": label, **{column: f"{column}-{n}" for column in columns}}
            for n, (text, label) in enumerate(TEST_ROWS, start=1)]
    order = [columns[0], "text", *columns[1:], "label"]  # (a column before the text, others after it)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps({k: row[k] for k in order}) + "\n" for row in rows), encoding="utf-8")
    elif path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist([{k: row[k] for k in order} for row in rows]), path)
    else:
        with open(path, "w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, order, delimiter="\t" if path.suffix == ".tsv" else ",")
            writer.writeheader()
            writer.writerows(rows)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_evaluate_errors_carries_the_test_files_other_columns_after_row(sport_and_money_run, tmp_path, suffix):
    run, _ = sport_and_money_run
    test = write_test_file(tmp_path / f"test{suffix}", ["id", "source"])
    out = tmp_path / "errors.csv"
    assert main(["evaluate", str(run), "--test-file", str(test), "--errors", str(out)]) == 0
    with open(out, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:5] == ["row", "id", "source", "text", "true_label"]
    assert {"2", "5"} <= {row["row"] for row in rows}
    for row in rows:  # (each row's own values, not another's)
        assert (row["id"], row["source"]) == (f"id-{row['row']}", f"source-{row['row']}")
        assert row["text"] == TEST_ROWS[int(row["row"]) - 1][0]


def test_evaluate_errors_parquet_keeps_the_other_columns(sport_and_money_run, tmp_path):
    import pyarrow.parquet as pq

    run, _ = sport_and_money_run
    test = write_test_file(tmp_path / "test.csv", ["id", "source"])
    out = tmp_path / "errors.parquet"
    assert main(["evaluate", str(run), "--test-file", str(test), "--errors", str(out)]) == 0
    table = pq.read_table(out).to_pylist()
    assert list(table[0])[:4] == ["row", "id", "source", "text"]
    assert all(row["id"] == f"id-{row['row']}" for row in table)


def test_evaluate_errors_parquet_of_a_column_parquet_cannot_type_is_one_line(sport_and_money_run, tmp_path, capsys,
                                                                            cli_error):
    run, _ = sport_and_money_run
    out = tmp_path / "errors.parquet"
    for name, values, detail in (("empty.jsonl", [{}] * 6, "Cannot write struct type 'meta' with no child field"),
                                 ("mixed.jsonl", [n if n % 2 else str(n) for n in range(1, 7)], "Could not convert"),
                                 ("big.jsonl", [10 ** 22] * 6, "Python int too large to convert to C long")):
        test = tmp_path / name  # (a test file's other columns are written beside its wrong rows)
        test.write_text("".join(json.dumps({"text": text, "label": label, "meta": value}) + "\n"
                                for (text, label), value in zip(TEST_ROWS, values)), encoding="utf-8")
        err = cli_error(["evaluate", str(run), "--test-file", str(test), "--errors", str(out)])
        assert err.startswith(f"{out}: a column's values are of more than one type, or of one Parquet has none for "
                              f"({detail}") and err.endswith("); write .jsonl, which keeps each value as it is")
        assert list(tmp_path.glob("*errors.parquet*")) == []
        assert main(["evaluate", str(run), "--test-file", str(test), "--errors", str(tmp_path / f"{name}.jsonl")]) == 0
        capsys.readouterr()


def test_misclassified_of_a_test_file_read_in_python_has_its_columns(sport_and_money_run, tmp_path):
    from attnclf import Classifier
    from attnclf.evaluation import misclassified
    from attnclf.training.run_data import scoring_data

    run, _ = sport_and_money_run
    clf = Classifier.load(run)
    test = write_test_file(tmp_path / "test.jsonl", ["id", "source"])
    rows = misclassified(clf, scoring_data(clf, test_file=str(test), log=lambda line: None))
    assert rows and all(row["id"] == f"id-{row['row']}" for row in rows)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_evaluate_errors_refuses_a_test_file_column_it_writes_as_predict_output_does(sport_and_money_run, tmp_path,
                                                                                    cli_error, suffix):
    run, _ = sport_and_money_run
    test = write_test_file(tmp_path / f"test{suffix}", ["id", "confidence"])
    out = tmp_path / "errors.csv"
    at = f"{test}, line 1" if suffix == ".jsonl" else f"{test}"  # (a JSON line names its own columns)
    assert cli_error(["evaluate", str(run), "--test-file", str(test), "--errors", str(out)]) == \
        (f"{at}: column 'confidence' is one evaluate --errors writes (row, text, true_label, predicted_label, "
         f"confidence, true_label_probability, probability:LABEL); rename it in the file")
    assert not out.exists()


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_evaluate_errors_of_a_text_joined_from_two_columns_writes_those_columns_not_the_joined_text(
        sport_and_money_run, tmp_path, suffix):
    # As `predict --output` keeps them: the file's own title and body, each in its cell, where the errors file held
    # one `text` cell of the two joined by a newline (and a CSV row spread over two lines).
    run, _ = sport_and_money_run
    rows = [{"id": f"id-{n}", "title": text.split(" ", 1)[0], "body": text.split(" ", 1)[1], "label": label}
            for n, (text, label) in enumerate(TEST_ROWS, start=1)]
    test = tmp_path / f"test{suffix}"
    if suffix == ".jsonl":
        test.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    else:
        with open(test, "w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    out = tmp_path / "errors.jsonl"
    assert main(["evaluate", str(run), "--test-file", str(test), "--text-column", "title", "--text-column", "body",
                 "--errors", str(out)]) == 0
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {2, 5} <= {row["row"] for row in written}
    assert list(written[0])[:5] == ["row", "id", "title", "body", "true_label"]  # (the file's order; no `text`)
    for row in written:  # (each row's own values, as the file holds them)
        assert {k: row[k] for k in ("id", "title", "body")} == {k: rows[row["row"] - 1][k] for k in ("id", "title",
                                                                                                     "body")}


def test_evaluate_errors_refuses_a_text_column_named_as_a_column_it_writes(sport_and_money_run, tmp_path, cli_error):
    # (the text columns are written as the file holds them, so one named `confidence` would be written twice)
    run, _ = sport_and_money_run
    test = tmp_path / "test.csv"
    test.write_text("confidence,body,label\n" + "".join(f"{text.split(' ', 1)[0]},{text.split(' ', 1)[1]},{label}\n"
                                                        for text, label in TEST_ROWS), encoding="utf-8")
    out = tmp_path / "errors.csv"
    assert cli_error(["evaluate", str(run), "--test-file", str(test), "--text-column", "confidence", "--text-column",
                      "body", "--errors", str(out)]) == \
        (f"{test}: column 'confidence' is one evaluate --errors writes (row, true_label, predicted_label, "
         f"confidence, true_label_probability, probability:LABEL); rename it in the file")
    assert not out.exists()


def test_evaluate_errors_of_a_split_carved_from_the_training_file_names_each_row_as_the_file_does(tmp_path):
    # A run trained on one file validates on rows carved from it: the errors file's `row` was the text's place in the
    # split, and the file's other columns were left out, so a wrong row could not be found in the file.
    from conftest import MONEY, SPORT

    rows = [{"id": f"id-{n}", "text": f"{text} {n}", "label": label if n % 3 else ("money", "sport")[label == "money"]}
            for n, (text, label) in enumerate([(t, "sport") for t in SPORT * 8] + [(t, "money") for t in MONEY * 8])]
    train = tmp_path / "train.csv"
    with open(train, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    run, out = tmp_path / "run", tmp_path / "errors.csv"
    assert main(["train", "--train-file", str(train), "--model", "boe", "--epochs", "2", "--min-frequency", "1",
                 "--output", str(run), "--quiet", "--no-report", "--seed", "1", "--threads", "1"]) == 0
    assert main(["evaluate", str(run), "--split", "validation", "--errors", str(out), "--threads", "1"]) == 0
    with open(out, encoding="utf-8", newline="") as handle:
        written = list(csv.DictReader(handle))
    assert written and list(written[0])[:3] == ["row", "id", "text"]
    for row in written:  # (the file's row below its header, and that row's own id, text and label)
        assert (row["id"], row["text"], row["true_label"]) == tuple(rows[int(row["row"]) - 1].values())
