"""End-to-end through the `attnclf` command, and every bad-input case the user can hit."""

import argparse
import csv
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from attnclf.cli import _parse, main
from attnclf.errors import AttnclfError
from attnclf.text.tokenizer import TokenizerConfig

POSITIVE = ["a wonderful film", "great acting and a great story", "brilliant and moving", "i loved it",
            "fun clever and charming", "the best film this year"]
NEGATIVE = ["a boring film", "dull acting and a weak story", "awful and tedious", "i hated it",
            "bland predictable and clumsy", "the worst film this year"]


def write_csv(path, rows, header="text,label"):
    path.write_text(header + "\n" + "".join(f'"{t}",{y}\n' for t, y in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def csv_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("csv")
    train = [(t, "pos") for t in POSITIVE * 10] + [(t, "neg") for t in NEGATIVE * 10]
    test = [(t, "pos") for t in POSITIVE] + [(t, "neg") for t in NEGATIVE]
    return write_csv(folder / "train.csv", train), write_csv(folder / "test.csv", test)


@pytest.fixture(scope="module")
def csv_run(csv_files, tmp_path_factory):
    train, test = csv_files
    out = tmp_path_factory.mktemp("runs") / "csv"
    code = main(["train", "--train-file", str(train), "--test-file", str(test), "--model", "boe", "--epochs", "15",
                 "--lr", "0.01", "--min-frequency", "1", "--output", str(out), "--quiet", "--seed", "1"])
    assert code == 0
    return out


def tiny_demo_train(epochs: int, run, *flags: str) -> list[str]:
    """`attnclf train` of a small model on 200 demo texts into ``run``, quietly and without a report, for ``epochs``."""
    return ["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", str(epochs), "--set", "d_model=16",
            "--set", "layers=1", "--threads", "1", "--output", str(run), "--quiet", "--no-report", *flags]


def run_error(argv, capsys) -> str:
    """Run the CLI expecting a user error: exit 2 and one line on stderr."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnclf: error: ") and "\n" not in err, err
    return err


def test_train_on_user_csv_writes_test_metrics(csv_run):
    metrics = json.loads((csv_run / "metrics.json").read_text())
    assert metrics["accuracy"] >= 0.9  # the words alone separate these classes
    assert json.loads((csv_run / "labels.json").read_text()) == ["neg", "pos"]


def test_predict_from_arguments_file_and_stdin(csv_run, tmp_path, capsys, monkeypatch):
    assert main(["predict", str(csv_run), "a wonderful story", "a dull story"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["label"] for r in lines] == ["pos", "neg"]
    assert set(lines[0]["probabilities"]) == {"neg", "pos"} and "attention" not in lines[0]

    texts = tmp_path / "texts.txt"
    texts.write_text("great acting\n\nweak acting\n", encoding="utf-8")
    assert main(["predict", str(csv_run), "--file", str(texts)]) == 0
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(r["text"], r["label"]) for r in records] == [("great acting", "pos"), ("weak acting", "neg")]

    def stdin_holding(path):  # (in memory: nothing left open)
        return io.TextIOWrapper(io.BytesIO(path.read_bytes()), encoding="utf-8")

    texts.write_bytes(b"\xef\xbb\xbfgreat acting\r\n\r\nweak acting\r\n")  # CRLF and a BOM, as from Notepad
    monkeypatch.setattr(sys, "stdin", stdin_holding(texts))
    assert main(["predict", str(csv_run)]) == 0
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in records] == ["great acting", "weak acting"]  # the BOM is not part of the text

    texts.write_bytes(b"ok\n\xff\xfe bad\n")
    monkeypatch.setattr(sys, "stdin", stdin_holding(texts))
    assert run_error(["predict", str(csv_run)], capsys) == "attnclf: error: stdin: line 2: not UTF-8 (byte 0xff)"

    texts.write_bytes(b"")  # `grep never log | attnclf predict RUN`: nothing to score, no output
    monkeypatch.setattr(sys, "stdin", stdin_holding(texts))
    assert main(["predict", str(csv_run)]) == 0 and capsys.readouterr().out == ""
    monkeypatch.setattr(sys, "stdin", stdin_holding(texts))  # an explanation is asked for: say so
    assert run_error(["explain", str(csv_run)], capsys) == "attnclf: error: stdin: no texts to explain"
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)  # nothing given at a terminal: say how to give texts
    assert "no texts: give them as arguments" in run_error(["predict", str(csv_run)], capsys)


@pytest.mark.parametrize("command", ["predict", "explain"])
def test_a_csv_or_json_lines_piped_to_stdin_is_refused_not_read_a_row_a_text_labels_and_all(csv_run, capsys,
                                                                                            monkeypatch, command):
    # `cat test.csv | attnclf predict RUN` scored 'text,label' as a text, and each row with its label in its text
    def piped(raw):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))

    for header, kind in (("text,label", "CSV"), ("id\ttext", "TSV")):
        rows = header.replace("text", "a wonderful story").replace("label", "pos").replace("id", "7")
        piped(f"{header}\n{rows}\n".encode())
        assert run_error([command, str(csv_run)], capsys) == (
            f"attnclf: error: stdin: its first line, {header!r}, is a {kind} header naming the run's text column "
            f"'text': stdin is read as a text per line, every column of a row (its label too) part of its text; give "
            f"the file itself, named .{kind.lower()}, with --file, which reads that column")
    # `cat test.jsonl | attnclf predict RUN` scored each line's braces, keys and label as its text
    line = '{"text": "fine", "label": "pos"}'
    piped(f"{line}\n".encode())
    assert run_error([command, str(csv_run)], capsys) == (
        f"attnclf: error: stdin: its first line, {line!r}, is a JSON object naming the run's text column 'text': "
        f"stdin is read as a text per line, every key and value of a line (its label too) part of its text; give the "
        f"file itself, named .jsonl, with --file, which reads that column")
    # A text that starts with the column's name, a line of other names, JSON of other keys or none, are texts
    texts = ["text, of course, is what it reads", "id,review", '{"review": "fine"}', "[" * 100_000]
    piped("\n".join(texts).encode())
    assert main(["predict", str(csv_run)]) == 0
    assert [json.loads(line)["text"] for line in capsys.readouterr().out.splitlines()] == texts


@pytest.mark.parametrize("argv", [["evaluate"], ["faithfulness", "--methods", "occlusion", "--examples", "4"],
                                  ["explain", "--method", "occlusion", "a dull story"]])
def test_json_is_asked_for_as_format_json_or_json_by_every_command_that_prints_it(csv_run, capsys, argv):
    # explain took only --format json, evaluate and faithfulness only --json: the spelling learned on one was
    # "unrecognized arguments" on the others.
    def printed(spelling):
        assert main([argv[0], str(csv_run), *argv[1:], "--threads", "1", *spelling]) == 0
        out = capsys.readouterr().out
        if argv[0] == "explain":  # (a JSON line per text and method)
            return [json.loads(line) for line in out.splitlines()]
        if argv[0] == "faithfulness":  # (which times itself)
            return [{k: v for k, v in result.items() if k != "seconds"} for result in json.loads(out)]
        return json.loads(out)

    assert printed(["--format", "json"]) == printed(["--json"])


@pytest.mark.parametrize("command", ["predict", "explain"])
def test_file_dash_reads_stdin_as_no_file_does(csv_run, capsys, monkeypatch, command):
    # `-` is Unix's name for stdin: read as plain lines, as stdin without --file is (it read a file named "-").
    def stdin_holding(raw):
        return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8")

    def texts_answered(argv):
        assert main([command, str(csv_run), *argv, *(["--format", "json"] if command == "explain" else [])]) == 0
        return [json.loads(line)["text"] for line in capsys.readouterr().out.splitlines()]

    monkeypatch.setattr(sys, "stdin", stdin_holding(b"\xef\xbb\xbfgreat acting\r\n\r\nweak acting\r\n"))
    assert texts_answered(["--file", "-"]) == ["great acting", "weak acting"]
    # Arguments first, then stdin's lines, as with a --file PATH; asked for by name, stdin is read at a terminal too.
    monkeypatch.setattr(sys, "stdin", stdin_holding(b"weak acting\n"))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    assert texts_answered(["i loved it", "--file", "-"]) == ["i loved it", "weak acting"]
    monkeypatch.setattr(sys, "stdin", stdin_holding(b"ok\n\xff\xfe bad\n"))
    assert run_error([command, str(csv_run), "--file", "-"], capsys) == \
        "attnclf: error: stdin: line 2: not UTF-8 (byte 0xff)"
    monkeypatch.setattr(sys, "stdin", stdin_holding(b""))
    if command == "explain":
        assert run_error([command, str(csv_run), "--file", "-"], capsys) == "attnclf: error: stdin: no texts to explain"
    else:
        assert main([command, str(csv_run), "--file", "-"]) == 0 and capsys.readouterr().out == ""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "- reads stdin, a text per line (a file named - is ./-)" in " ".join(capsys.readouterr().out.split())


def test_an_ensemble_folder_reads_a_data_file_by_its_members_text_column(tmp_path, capsys):
    data = write_csv(tmp_path / "reviews.csv", [(t, "pos") for t in POSITIVE * 5] + [(t, "neg") for t in NEGATIVE * 5],
                     header="review,sentiment")
    folder = tmp_path / "seeds"  # members seed-1 and seed-2: no seed-0 to read the column from
    assert main(["train", "--train-file", str(data), "--test-file", str(data), "--text-column", "review",
                 "--label-column", "sentiment", "--model", "boe", "--epochs", "1", "--min-frequency", "1",
                 "--seeds", "1", "2", "--output",
                 str(folder), "--quiet", "--no-report", "--threads", "1"]) == 0
    capsys.readouterr()  # --text-column given once is recorded as a string, as before it could be repeated
    assert json.loads((folder / "seed-1" / "config.json").read_text())["settings"]["data"]["text_column"] == "review"
    assert main(["predict", str(folder), "--file", str(data)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 60
    assert "--text-column picks the column" in run_error(["predict", str(folder), "x", "--text-column", "review"],
                                                         capsys)


def test_a_file_without_the_runs_own_columns_is_told_how_to_name_its_own(csv_files, tmp_path, capsys):
    # A run trained from "Review" / "Sentiment" meets files whose columns are named otherwise; the user named no
    # column on this command, so the error says where the name came from and which flag names the file's own.
    train, test = csv_files
    named = tmp_path / "reviews.csv"
    named.write_text(train.read_text().replace("text,label", "Review,Sentiment", 1))
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(named), "--text-column", "Review", "--label-column", "Sentiment",
                 "--model", "boe", "--epochs", "1", "--output", str(run), "--quiet", "--no-report"]) == 0
    capsys.readouterr()
    hint = " (the run's, read from its training file; say which holds this file's {}s: --{}-column NAME, {}_column= in Python)"
    for argv in (["predict", str(run), "--file", str(test)], ["explain", str(run), "--file", str(test)],
                 ["predict", str(run), "--file", str(test), "--output", str(tmp_path / "scored.csv")],
                 ["evaluate", str(run), "--test-file", str(test)]):
        assert run_error(argv, capsys) == (f"attnclf: error: {test}: no text column 'Review'; the columns are: "
                                           f"'text', 'label'{hint.format(*['text'] * 3)}"), argv
    texts_named = write_csv(tmp_path / "texts_named.csv", [("a wonderful film", "pos")], header="Review,label")
    assert run_error(["evaluate", str(run), "--test-file", str(texts_named)], capsys) == (
        f"attnclf: error: {texts_named}: no label column 'Sentiment'; the columns are: 'Review', 'label'"
        f"{hint.format(*['label'] * 3)}")
    # A column named on the command, or one the run's name almost matches, keeps its own message.
    err = run_error(["predict", str(run), "--file", str(test), "--text-column", "body"], capsys)
    assert err == f"attnclf: error: {test}: no text column 'body'; the columns are: 'text', 'label'"
    near = write_csv(tmp_path / "near.csv", [("a wonderful film", "pos")], header="review,Sentiment")
    assert "'review' differs from it only in case" in run_error(["predict", str(run), "--file", str(near)], capsys)


def test_evaluate_on_a_file_with_labels_the_run_never_learned_counts_them_and_says_what_to_do(csv_run, tmp_path, capsys):
    held_out = write_csv(tmp_path / "held_out.csv", [("a wonderful film", "pos"), ("it was fine", "neutral"),
                                                     ("a dull film", "neg"), ("so so", "neutral"), ("odd", "mixed")])
    assert run_error(["evaluate", str(csv_run), "--test-file", str(held_out)], capsys) == (
        f"attnclf: error: {held_out}, line 3: label 'neutral' in column 'label' is not one of the training labels "
        f"['neg', 'pos']; 3 of the file's 5 rows hold labels the run was not trained on ('neutral', 'mixed'): remove "
        f"those rows, or label them with attnclf predict RUN --file {held_out}, which reads no labels")
    assert main(["predict", str(csv_run), "--file", str(held_out)]) == 0  # (the way on it names works on that file)
    assert len(capsys.readouterr().out.splitlines()) == 5


def test_a_file_pandas_wrote_with_its_index_names_that_unnamed_first_column(csv_run, tmp_path, capsys):
    indexed = tmp_path / "indexed.csv"
    indexed.write_text(",Review,Sentiment\n0,a wonderful film,pos\n")  # (df.to_csv(path): its index first)
    assert run_error(["predict", str(csv_run), "--file", str(indexed), "--text-column", "review"], capsys) == (
        f"attnclf: error: {indexed}: no text column 'review'; the columns are: '' (an unnamed first column: pandas' "
        f"index, written by to_csv without index=False), 'Review', 'Sentiment' (the file's 'Review' differs from it "
        f"only in case: name the column as the file does)")


def test_predict_and_explain_read_the_text_column_of_a_data_file(csv_run, tmp_path, capsys):
    rows = tmp_path / "to_score.jsonl"  # no label column: these are to be labelled
    rows.write_text('{"id": 1, "text": "a wonderful story"}\n{"id": 2, "text": "line one\\nline two"}\n'
                    '{"id": 3, "text": "a dull story"}\n')
    assert main(["predict", str(csv_run), "--file", str(rows)]) == 0  # the run's own text column
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in records] == ["a wonderful story", "line one\nline two", "a dull story"]
    assert records[0]["label"] == "pos" and records[2]["label"] == "neg"
    renamed = write_csv(tmp_path / "to_score.csv", [("a wonderful story", 1)], header="review,id")
    assert main(["predict", str(csv_run), "--file", str(renamed), "--text-column", "review"]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == "a wonderful story"
    err = run_error(["predict", str(csv_run), "--file", str(renamed)], capsys)
    assert err == (f"attnclf: error: {renamed}: no text column 'text'; the columns are: 'review', 'id' (say which "
                   f"holds the texts: --text-column NAME, text_column= in Python)")
    assert main(["predict", str(csv_run), "", "--file", str(renamed), "--text-column", "review"]) == 0  # "" skipped
    assert len(capsys.readouterr().out.splitlines()) == 1
    empty = write_csv(tmp_path / "empty.csv", [], header="review,id")  # a day with nothing to score
    assert main(["predict", str(csv_run), "--file", str(empty), "--text-column", "review"]) == 0
    assert capsys.readouterr().out == ""
    empty.write_bytes(b"")  # an export of nothing may not even write the header
    assert main(["predict", str(csv_run), "--file", str(empty)]) == 0
    assert capsys.readouterr().out == ""
    for plain in (tmp_path / "empty.txt", tmp_path / "blank.txt"):  # texts a line each: the same
        plain.write_text("" if plain.name == "empty.txt" else "\n  \n")
        assert main(["predict", str(csv_run), "--file", str(plain)]) == 0
        assert capsys.readouterr().out == ""
    assert main(["explain", str(csv_run), "--file", str(renamed), "--text-column", "review", "--method", "occlusion",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == ["a", "wonderful", "story"]


def write_titled_csv(path, rows, header="title,body,sentiment"):
    """Reviews split as a title and a body (the words that tell the class); an empty title for every third."""
    path.write_text(header + "\n" + "".join(f'"{"" if i % 3 == 0 else f"review {i}"}","{t}",{y}\n'
                                            for i, (t, y) in enumerate(rows)), encoding="utf-8")
    return path


def test_a_run_on_several_text_columns_records_them_and_reads_them_back(csv_run, tmp_path, capsys):
    train = write_titled_csv(tmp_path / "train.csv", [(t, "pos") for t in POSITIVE * 10] +
                             [(t, "neg") for t in NEGATIVE * 10])
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(train), "--test-file", str(train), "--text-column", "title",
                 "--text-column", "body", "--label-column", "sentiment", "--model", "boe", "--epochs", "15", "--lr",
                 "0.01", "--min-frequency", "1", "--output", str(run), "--quiet", "--no-report", "--threads", "1"]) == 0
    capsys.readouterr()
    assert json.loads((run / "config.json").read_text())["settings"]["data"]["text_column"] == ["title", "body"]
    assert json.loads((csv_run / "config.json").read_text())["settings"]["data"]["text_column"] == "text"  # as ever

    rows = tmp_path / "to_score.jsonl"  # the run's columns are read by default, a missing title as empty
    rows.write_text('{"title": "Loved it", "body": "a wonderful film"}\n{"title": null, "body": "a boring film"}\n')
    assert main(["predict", str(run), "--file", str(rows)]) == 0
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(r["text"], r["label"]) for r in records] == [("Loved it\na wonderful film", "pos"),
                                                          ("\na boring film", "neg")]
    assert main(["predict", str(run), "--file", str(rows), "--text-column", "body"]) == 0  # or the columns named
    assert [json.loads(x)["text"] for x in capsys.readouterr().out.splitlines()] == ["a wonderful film",
                                                                                     "a boring film"]
    assert main(["explain", str(run), "--file", str(rows), "--method", "occlusion", "--format", "json"]) == 0
    assert "Loved" in capsys.readouterr().out

    assert main(["evaluate", str(run), "--test-file", str(train), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["num_examples"] == 120 and metrics["accuracy"] >= 0.9
    bodies = write_csv(tmp_path / "bodies.csv", [("a wonderful story", "pos")], header="body,sentiment")
    assert run_error(["evaluate", str(run), "--test-file", str(bodies)], capsys) == (
        f"attnclf: error: {bodies}: no text column 'title'; the columns are: 'body', 'sentiment' (the run's, read "
        f"from its training file; say which holds this file's texts: --text-column NAME, text_column= in Python)")
    assert main(["evaluate", str(run), "--test-file", str(bodies), "--text-column", "body", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_examples"] == 1


@pytest.mark.parametrize("columns, message", [
    (["body", "body"], "text column 'body' is named 2 times; name each once"),
    (["title", "sentiment"], "the text and the labels cannot both come from column 'sentiment'"),
])
def test_text_columns_named_twice_or_holding_the_labels_are_refused(tmp_path, capsys, columns, message):
    train = write_titled_csv(tmp_path / "train.csv", [("good", "pos"), ("bad", "neg")] * 5)
    flags = [flag for column in columns for flag in ("--text-column", column)]
    err = run_error(["train", "--train-file", str(train), *flags, "--label-column", "sentiment", "--model", "boe",
                     "--output", str(tmp_path / "run"), "--quiet"], capsys)
    assert err.endswith(message)
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_evaluate_and_predict_run_under_their_threads(csv_run, csv_files, capsys, monkeypatch):
    import torch

    calls = []
    set_threads = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: calls.append(n) or set_threads(n))
    before = torch.get_num_threads()
    assert main(["predict", str(csv_run), "a fine film", "--threads", "1"]) == 0
    assert main(["evaluate", str(csv_run), "--test-file", str(csv_files[1]), "--threads", "1", "--json"]) == 0
    assert main(["explain", str(csv_run), "a fine film", "--method", "occlusion", "--threads", "1"]) == 0
    assert calls == [1, before] * 3  # set for the command, then put back
    capsys.readouterr()  # (evaluate warned: csv_run's test file holds texts it trained on)
    assert "got 0" in run_error(["predict", str(csv_run), "a fine film", "--threads", "0"], capsys)


@pytest.mark.parametrize("argv", [["serve", "RUN"], ["predict", "RUN", "a text"], ["evaluate", "RUN"],
                                  ["train", "--dataset", "sst2", "--output", "OUT"], ["vectors", "--output", "OUT"],
                                  ["compare", "--output", "OUT"]])
def test_threads_out_of_range_names_the_flag(argv, tmp_path, capsys):
    # Checked as the command starts, before any run or data is read: the flag as typed, not the library's field.
    argv = [str(tmp_path / arg) if arg in ("RUN", "OUT") else arg for arg in argv]
    assert run_error([*argv, "--threads", "0"], capsys) == "attnclf: error: --threads must be at least 1, got 0"
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [["train", "--dataset", "demo"], ["compare", "--dataset", "demo"], ["export", "RUN"],
                                  ["refit", "RUN"], ["demo"], ["vectors", "--dataset", "demo"],
                                  ["pretrain", "--dataset", "demo"], ["ablate", "--dataset", "demo"]])
def test_an_empty_output_is_refused_naming_the_flag(argv, demo_run, tmp_path, monkeypatch, capsys):
    # "" is no folder: it was read as unset (the default folder) or as the working directory (an export into it).
    monkeypatch.chdir(tmp_path)
    argv = [str(demo_run) if arg == "RUN" else arg for arg in argv]
    assert run_error([*argv, "--output", "", "--threads", "1"], capsys) == (
        "attnclf: error: --output is empty: name the folder (or file) to write to")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("argv, flag", [
    (["train", "--dataset", "demo", "--data-dir", ""], "--data-dir"),
    (["train", "--train-file", ""], "--train-file"),
    (["train", "--train-file", "t.csv", "--test-file", ""], "--test-file"),
    (["train", "--train-file", "t.csv", "--validation-file", ""], "--validation-file"),
    (["train", "--train-file", "t.csv", "--token-cache", "--token-cache-dir", ""], "--token-cache-dir"),
    (["train", "--train-file", "t.csv", "--init-from", ""], "--init-from"),
    (["train", "--train-file", "t.csv", "--embeddings", ""], "--embeddings"),
    (["evaluate", "RUN", "--test-file", ""], "--test-file"),
])
def test_an_empty_path_is_refused_naming_its_flag(argv, flag, demo_run, tmp_path, monkeypatch, capsys):
    # An unset $VAR: "" was read as unset (the default data folder, the run's own test split) or as the working folder
    monkeypatch.chdir(tmp_path)
    argv = [str(demo_run) if arg == "RUN" else arg for arg in argv]
    assert run_error([*argv, "--threads", "1"], capsys) == f"attnclf: error: {flag} is empty: name the file or folder"
    assert not any(tmp_path.iterdir())


def test_a_leading_tilde_is_the_home_folder_where_the_shell_left_it(demo_run, tmp_path, monkeypatch, capsys):
    # `--output=~/x.csv` is one word to the shell, which leaves its ~ as typed: predict made a folder named "~" in
    # the working one and wrote there; so with a quoted "~/runs/demo".
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(), work.mkdir()
    (home / "demo").symlink_to(demo_run)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    assert main(["predict", "~/demo", "not bad at all", "--output=~/scored.csv", "--threads", "1"]) == 0
    assert "predicted_label" in (home / "scored.csv").read_text().splitlines()[0]
    assert not any(work.iterdir())
    args = _parse(["evaluate", "~/a", "~/b", "--test-file=~/t.csv", "--errors=~/e.csv", "--data-dir=~/d"])
    assert (args.run_dirs, args.test_file, args.errors, args.data_dir) == (
        [str(home / "a"), str(home / "b")], str(home / "t.csv"), str(home / "e.csv"), str(home / "d"))
    assert _parse(["predict", "RUN", "--file", "-"]).file == "-"


def test_predict_attention_is_per_token(demo_run, capsys):
    assert main(["predict", str(demo_run), "the plot was not good", "--attention"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["tokens"] == ["the", "plot", "was", "not", "good"]
    assert len(record["attention"]) == 5 and sum(record["attention"]) == pytest.approx(1, abs=1e-5)


def test_predict_counts_the_tokens_the_model_does_not_know_and_notes_a_text_past_a_quarter_of_them(demo_run, capsys):
    # `predict runs/demo "the movie was awesome and amazing"` answered "negative (0.999)" on three words the model had
    # never seen (<unk>) of six, and said nothing unless --attention listed the tokens.
    assert main(["predict", str(demo_run), "the plot was awesome and amazing", "the plot was not good",
                 "--attention"]) == 0
    out, err = capsys.readouterr()
    unknown, known = [json.loads(line) for line in out.splitlines()]
    assert unknown["tokens"] == ["the", "plot", "was", "<unk>", "<unk>", "<unk>"]
    assert (unknown["unknown_tokens"], unknown["tokens_read"]) == (3, 6)
    assert (known["unknown_tokens"], known["tokens_read"]) == (0, 5)
    assert err == ("note: 'the plot was awesome and amazing': 3 of the 6 tokens the model read are unknown to it "
                   "(<unk>): its answer rests on the other 3\n")
    # One in five is no note (most real texts hold a name or a typo the vocabulary lacks); the counts are there.
    assert main(["predict", str(demo_run), "the plot was not zorbly"]) == 0
    out, err = capsys.readouterr()
    assert (json.loads(out)["unknown_tokens"], json.loads(out)["tokens_read"]) == (1, 5) and err == ""


def test_predict_notes_an_empty_text_as_empty_not_as_an_unknown_token(demo_run, tmp_path, capsys):
    # An empty text in a file's text column was answered with "the one token the model read is unknown to it (<unk>)",
    # unknown_tokens 1 of tokens_read 1: its user sent nothing, not an unknown word (the model is given one <unk> in
    # its place, so that it has something to read).
    texts, output = tmp_path / "texts.csv", tmp_path / "scored.csv"
    texts.write_text('text\nthe plot was good\n""\n" \t "\nzorbly\n', encoding="utf-8")
    assert main(["predict", str(demo_run), "--file", str(texts)]) == 0
    out, err = capsys.readouterr()
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["unknown_tokens"], r["tokens_read"]) for r in records] == [(0, 4), (0, 0), (0, 0), (1, 1)]
    assert records[1]["probabilities"] == records[2]["probabilities"]  # (what the note says: the same answer)
    empty = "it holds no word to read (empty once cleaned): its answer is the one the model gives every empty text"
    assert err.splitlines() == [f"note: '': {empty}", f"note: ' \\t ': {empty}",
                                "note: 'zorbly': the one token the model read is unknown to it (<unk>): its answer "
                                "rests on none of the text's words"]
    assert main(["predict", str(demo_run), "the plot was good", "", "--output", str(output)]) == 0
    with output.open(encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    assert [(row["unknown_tokens"], row["tokens_read"]) for row in rows] == [("0", "4"), ("0", "0")]
    assert f"note: '': {empty}" in capsys.readouterr().err.splitlines()


def test_predict_notes_the_first_few_texts_past_the_share_of_unknown_tokens_then_counts_the_rest(demo_run, tmp_path,
                                                                                                   capsys):
    from attnclf.prediction import NOTED_TEXTS

    texts = tmp_path / "texts.txt"  # a file of thousands of such texts must not bury the answers in notes
    texts.write_text("".join(f"zorbly blorft {i}\n" for i in range(NOTED_TEXTS + 3)) + "the plot was good\n",
                     encoding="utf-8")
    assert main(["predict", str(demo_run), "--file", str(texts)]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == NOTED_TEXTS + 4
    notes = err.splitlines()
    assert notes[:NOTED_TEXTS] == [f"note: 'zorbly blorft {i}': all 3 tokens the model read are unknown to it (<unk>): "
                                   f"its answer rests on none of the text's words" for i in range(NOTED_TEXTS)]
    assert notes[NOTED_TEXTS:] == ["note: and 3 more texts past a quarter of their tokens unknown, or empty: "
                                   "see each answer's unknown_tokens and tokens_read"]


def test_explain_notes_an_empty_text_as_predict_does(demo_run, capsys):
    # (explain read its one <unk>, which stands in an empty text's place, as the text's one unknown word)
    argv = ["explain", str(demo_run), "the plot was good", "", "--method", "attention"]
    empty = "it holds no word to read (empty once cleaned): its answer is the one the model gives every empty text"
    assert main([*argv, "--color", "never"]) == 0
    assert capsys.readouterr().out.split("\n\n")[1].splitlines()[1] == f"  note: {empty}"
    assert main([*argv, "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out.splitlines()[1])
    assert (record["tokens"], record["unknown_tokens"], record["unknown_note"]) == (["<unk>"], 0, empty)


def test_explain_notes_a_text_whose_tokens_the_model_mostly_does_not_know(demo_run, capsys):
    argv = ["explain", str(demo_run), "the plot was awesome and amazing", "the plot was not good", "--method",
            "attention"]
    assert main([*argv, "--color", "never"]) == 0
    unknown, known = capsys.readouterr().out.split("\n\n")
    assert unknown.splitlines()[1] == ("  note: 3 of the 6 tokens the model read are unknown to it (<unk>): its answer "
                                       "rests on the other 3")
    assert "note" not in known
    assert main([*argv, "--format", "json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [record["unknown_tokens"] for record in records] == [3, 0]
    assert [record["unknown_note"] for record in records] == [unknown.splitlines()[1].removeprefix("  note: "), None]


def test_a_run_too_large_to_load_here_is_told_where_to_go_not_to_lower_what_its_training_fixed(demo_run, capsys,
                                                                                                monkeypatch):
    from attnclf.models import memory

    monkeypatch.setattr(memory, "machine_memory", lambda: 1000)
    for argv in (["predict", str(demo_run), "a good film"], ["evaluate", str(demo_run)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"attnclf: error: {demo_run}: model 'self-attn' needs at least ") and err.count("\n") == 1
        assert "; its training fixed that size: load it where more memory is free, or train it again and lower" in err


def test_a_run_too_large_to_resume_here_is_told_where_to_go_not_to_lower_what_its_training_fixed(tmp_path, capsys,
                                                                                                  monkeypatch):
    from attnclf.models import memory

    run = tmp_path / "run"
    argv = ["train", "--dataset", "toy-reversal", "--epochs", "1", "--output", str(run), "--quiet", "--no-report"]
    assert main(argv) == 0
    monkeypatch.setattr(memory, "machine_memory", lambda: 1000)
    assert main(["train", "--resume", "--output", str(run), "--epochs", "2"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]  # (after a note on the longer schedule)
    assert err.startswith(f"attnclf: error: {run}: model 'self-attn' needs at least ")
    assert "for its weights, gradients and optimiser state, more than this machine's 0.0 GB; its training fixed " \
           "that size: resume it where more memory is free, or train it again and lower" in err
    assert json.loads((run / "config.json").read_text())["settings"]["train"]["epochs"] == 1  # the run is as it was


def test_a_resume_s_epoch_budget_is_refused_by_its_flag(tmp_path, capsys):
    # resume_settings names the field to Python callers (epochs); the command line names what was typed.
    run = tmp_path / "run"
    assert main(["train", "--dataset", "toy-reversal", "--epochs", "2", "--output", str(run), "--quiet",
                 "--no-report"]) == 0
    err = run_error(["train", "--resume", "--output", str(run), "--epochs", "1"], capsys)
    assert err == f"attnclf: error: {run} has trained 2 epochs already; --epochs 1 is fewer (give more to train on, " \
                  f"or none to finish as planned)"


def test_a_resume_is_sized_with_the_vocabulary_its_tokenizer_learned(tmp_path, capsys, monkeypatch):
    # The check before the texts are read sizes a model of SMALLEST_VOCABULARY words; the run's own words, which only
    # its tokenizer.json knows, can take it past the memory: the resume must be refused there, not die allocating.
    from attnclf.models import build_model, memory

    run = tmp_path / "run"
    assert main(["train", "--dataset", "toy-reversal", "--epochs", "1", "--output", str(run), "--quiet",
                 "--no-report"]) == 0
    fields = json.loads((run / "config.json").read_text())["model"]["config"]
    with torch.device("meta"):
        learned = memory.model_bytes(build_model("self-attn", **fields), 4)
        least = memory.model_bytes(build_model("self-attn", **fields | {
            "vocab_size": memory.SMALLEST_VOCABULARY, "num_classes": 2}), 4)
    assert least < learned
    monkeypatch.setattr(memory, "machine_memory", lambda: (least + learned) // 2)
    assert main(["train", "--resume", "--output", str(run), "--epochs", "2"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith(f"attnclf: error: {run}: model 'self-attn' needs at least ") and "resume it where" in err


def test_bf16_inference_runs_under_autocast_and_stays_close_to_float32(demo_run, capsys):
    import numpy as np

    from attnclf import Classifier

    texts = ["the plot was not good", "a wonderful and moving film", "dull", "fine acting, weak story"] * 5
    exact = Classifier.load(demo_run, device="cpu").predict_proba(texts)
    fast = Classifier.load(demo_run, device="cpu", bf16=True).predict_proba(texts)
    assert not np.array_equal(fast, exact)  # bfloat16 really ran
    assert np.abs(fast - exact).max() < 0.02
    with pytest.raises(AttnclfError, match="bf16 must be True or False, got 'no'"):  # not at the first prediction
        Classifier.load(demo_run, device="cpu", bf16="no")
    assert main(["predict", str(demo_run), *texts[:2], "--bf16"]) == 0
    labels = [json.loads(line)["label"] for line in capsys.readouterr().out.splitlines()]
    assert main(["predict", str(demo_run), *texts[:2]]) == 0
    assert labels == [json.loads(line)["label"] for line in capsys.readouterr().out.splitlines()]
    accuracy = {}
    for precision in ([], ["--bf16"]):
        assert main(["evaluate", str(demo_run), "--dataset", "demo", "--json", *precision]) == 0
        accuracy[bool(precision)] = json.loads(capsys.readouterr().out)["accuracy"]
    assert accuracy[True] == pytest.approx(accuracy[False], abs=0.02)


def test_evaluate_on_a_test_file(csv_run, csv_files, capsys):
    assert main(["evaluate", str(csv_run), "--test-file", str(csv_files[1]), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["num_examples"] == 12 and "binary" in metrics


@pytest.mark.parametrize("flags", [["--text-column", "review"], ["--label-column", "stars"],
                                   ["--label-delimiter", ","], ["--split", "validation", "--text-column", "review"]])
def test_evaluate_refuses_column_flags_without_a_test_file_they_would_describe(csv_run, capsys, flags):
    # Without --test-file the run's own data is scored, read as it trained: the flags would be ignored silently
    assert main(["evaluate", str(csv_run), *flags]) == 2
    err = capsys.readouterr().err
    assert f"{flags[-2]} describes a --test-file's columns" in err and err.count("\n") == 1


def test_evaluate_refuses_a_label_delimiter_for_a_single_label_run(csv_run, csv_files, capsys):
    # train refuses it without --multi-label; a single-label run's test labels are never split
    assert main(["evaluate", str(csv_run), "--test-file", str(csv_files[1]), "--label-delimiter", ","]) == 2
    err = capsys.readouterr().err
    assert "--label-delimiter applies to multi-label runs" in err and "drop --label-delimiter" in err
    assert err.count("\n") == 1


def test_a_run_trained_on_relative_paths_evaluates_and_refits_from_another_folder(csv_files, tmp_path, capsys,
                                                                                   monkeypatch):
    train, test = csv_files
    monkeypatch.chdir(train.parent)
    assert main(["train", "--train-file", train.name, "--test-file", test.name, "--model", "boe", "--epochs", "2",
                 "--min-frequency", "1", "--output", str(tmp_path / "run"), "--quiet", "--no-report",
                 "--threads", "1"]) == 0
    assert json.loads((tmp_path / "run" / "config.json").read_text())["settings"]["data"]["train_file"] == str(train)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["evaluate", "run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_examples"] == 12
    assert main(["refit", "run", "--quiet", "--no-report", "--threads", "1"]) == 0

    # Scoring on the test file needs that file alone: the training file may be cleaned up, or huge.
    moved = tmp_path / "train-elsewhere.csv"
    moved.write_bytes(train.read_bytes())
    train.unlink()
    capsys.readouterr()
    try:
        assert main(["evaluate", "run", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["num_examples"] == 12
    finally:
        train.write_bytes(moved.read_bytes())


@pytest.mark.parametrize("texts, shown", [(None, "NoneType"), ({"good": 1}, "dict"), ({"good"}, "set"), (5, "int"),
                                          ("good", "a single string")])
def test_the_python_api_refuses_what_is_not_a_list_of_texts_with_a_value_error(demo_run, texts, shown):
    from attnclf.classifier import Classifier

    clf = Classifier.load(demo_run, device="cpu")
    for call in (clf.predict, clf.predict_proba, clf.explain):
        with pytest.raises(ValueError, match=f"pass a list of texts, not {shown}"):  # (AttnclfError is one)
            call(texts)
    assert type(clf.explain(np.array(["good"]))[0].text) is str  # numpy's strings come back as plain ones


def test_the_python_api_refuses_a_table_of_texts_rather_than_reading_its_column_names(demo_run):
    # Iterating a DataFrame gives its column names: predict(df[["review"]]) answered one prediction, for the word
    # "review", however many rows the table held. A 2-D array gave rows, refused as "ndarray, not a string".
    pandas = pytest.importorskip("pandas")
    from attnclf.classifier import Classifier

    clf = Classifier.load(demo_run, device="cpu")
    table = pandas.DataFrame({"review": ["good", "bad", "fine"]})
    for texts, shown in [(table, r"2-dimensional DataFrame \(shape \(3, 1\)\)"),
                         (np.array([["good"], ["bad"]]), r"2-dimensional ndarray \(shape \(2, 1\)\)")]:
        for call in (clf.predict, clf.predict_proba, clf.explain):
            with pytest.raises(ValueError, match=f"^pass a list of texts, not a {shown}: pass one column of it"):
                call(texts)
    # (a 0-dimensional array is one value, which no column of a table is: it had been told to pass "df['review']")
    for call in (clf.predict, clf.predict_proba, clf.explain):
        with pytest.raises(ValueError, match=r"^pass a list of texts, not a single value \(a 0-dimensional ndarray: "
                                             r"'good'\); wrap it in a list$"):
            call(np.array("good"))
    assert [p.label for p in clf.predict(table["review"])] == [p.label for p in clf.predict(["good", "bad", "fine"])]


def test_evaluate_against_another_run_compares_them_text_by_text(sport_and_money_run, demo_run, capsys):
    run, test = sport_and_money_run
    assert main(["evaluate", str(run), "--test-file", str(test), "--against", str(run), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    against = metrics["against"]  # (a run against itself: every text a tie)
    assert against["right_here_alone"] == against["right_there_alone"] == 0 and against["p_value"] == 1.0
    assert against["both_right"] == round(metrics["accuracy"] * 6) and against["other_accuracy"] == metrics["accuracy"]
    # Texts the other run trained on are said to be so, as the run's own are.
    train = test.parent / "train.csv"
    assert main(["evaluate", str(run), "--test-file", str(train), "--against", str(run)]) == 0
    printed = capsys.readouterr()
    assert f"against {run} on the same 64 texts: accuracy" in printed.out
    assert "McNemar's exact test: p = 1.0000, as neither gets any text right that the other gets wrong" in printed.out
    assert f"{run}: warning: 64 of the 64 test texts also occur among the training" in printed.err
    # Runs of other classes are refused before any text is read.
    assert main(["evaluate", str(run), "--test-file", str(test.parent / "missing.csv"), "--against",
                 str(demo_run)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "attnclf: error: --against predicts other classes ('negative', 'positive') than the run evaluated")


def test_evaluate_on_a_named_dataset(demo_run, capsys):
    assert main(["evaluate", str(demo_run), "--dataset", "demo"]) == 0
    captured = capsys.readouterr()
    assert "note:" not in captured.err
    assert main(["evaluate", str(demo_run), "--dataset", "demo", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)
    low, high = m["accuracy_ci95"]
    (f1_low, f1_high), (auc_low, auc_high) = m["macro_f1_ci95"], m["roc_auc_ci95"]
    assert (f"test: accuracy {m['accuracy']:.4f} (95% CI {low:.4f}-{high:.4f})  macro-F1 {m['macro_f1']:.4f} "
            f"(95% CI {f1_low:.4f}-{f1_high:.4f})  ROC AUC {m['roc_auc']:.4f} (95% CI {auc_low:.4f}-{auc_high:.4f})  "
            f"average precision {m['average_precision']:.4f}  calibration error {m['ece']:.4f}"
            ) in captured.out.splitlines()
    negative, positive = m["per_class"].values()  # a binary run's average precision is its positive class's
    assert positive["average_precision"] == m["average_precision"] and 0 < negative["average_precision"] <= 1
    # Another dataset with the same label names scores (transfer), and says so.
    assert main(["evaluate", str(demo_run), "--dataset", "synthetic"]) == 0
    assert "note: the model trained on demo; scoring it on synthetic's test split" in capsys.readouterr().err




def test_a_run_labelled_neg_pos_scores_on_a_dataset_labelled_negative_positive(csv_run, capsys):
    # IMDB's classes are neg/pos, SST-2's negative/positive: an IMDB run scored on SST-2 was refused, "label(s)
    # 'negative', 'positive' never seen in training". csv_run's labels are neg/pos, demo's negative/positive.
    from attnclf.data.registry import load_splits

    assert main(["evaluate", str(csv_run), "--dataset", "demo", "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    test = load_splits("demo").test
    assert metrics["num_examples"] == len(test)
    # Class 0 of the data is the run's class 0 ("negative" is "neg"), so the confusion matrix rows count its texts.
    assert [sum(row) for row in metrics["confusion_matrix"]] == [test.labels.count(0), test.labels.count(1)]

def test_label_synonyms_never_merge_two_classes_the_data_keeps_apart():
    # LABEL_SYNONYMS applied in every align_labels: texts labelled 'neg' and 'negative' (two classes of a user's data)
    # were both scored as a neg/pos run's 'neg', and names differing only so passed unnoticed outside a transfer.
    from attnclf.data.base import TextDataset
    from attnclf.errors import DataError
    from attnclf.training.run_data import align_labels

    both = TextDataset(["bad", "meh", "good"], [0, 1, 2], ["neg", "negative", "pos"])
    with pytest.raises(DataError, match=r"label\(s\) 'negative' never seen in training \(known: neg, pos\)"):
        align_labels(both, ["neg", "pos"], synonyms=True)
    other_names = TextDataset(["awful", "fine"], [0, 1], ["negative", "positive"])
    with pytest.raises(DataError, match="'negative', 'positive' never seen in training"):
        align_labels(other_names, ["neg", "pos"])  # a run's own splits: only `evaluate --dataset` reads synonyms
    assert align_labels(other_names, ["neg", "pos"], synonyms=True).labels == [0, 1]


def test_evaluate_on_ag_news_test_split_alone_warns_of_texts_the_run_learned(tmp_path, capsys):
    # A copy of AG News with only test.csv (as the shared one) could not score a run: `evaluate --dataset ag_news`
    # loaded the training split too, and stopped on train.csv missing. And a run trained on some of those texts (as
    # BENCHMARKS.md's files cut from test.csv) was scored on them without a word.
    from attnclf.data import ag_news

    topics = {1: "world war peace", 2: "match goal team", 3: "stock market profit", 4: "chip software space"}
    rows = "".join(f'"{k}","{words.split()[i % 3]} news {i}","{words} item {i}"\n'
                   for i in range(10) for k, words in topics.items())
    data = tmp_path / "data"
    (data / "ag_news").mkdir(parents=True)
    (data / "ag_news" / "test.csv").write_text(rows)
    (data / "ag_news" / "classes.txt").write_text("World\nSports\nBusiness\nSci/Tech\n")
    test = ag_news.load_test([data])
    learned = write_csv(tmp_path / "learned.csv", [(test.texts[i], test.label_names[test.labels[i]]) for i in range(24)])
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(learned), "--model", "boe", "--epochs", "2", "--min-frequency", "1",
                 "--output", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(run), "--dataset", "ag_news", "--data-dir", str(data), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["num_examples"] == 40
    assert "note: the model trained on files; scoring it on ag_news's test split" in captured.err
    assert "warning: 24 of the 40 test texts also occur among the training or validation texts" in captured.err
    learned.unlink()  # the run's own data gone: scored all the same, and said to be unchecked
    assert main(["evaluate", str(run), "--dataset", "ag_news", "--data-dir", str(data)]) == 0
    assert f"note: not checked whether {run} trained on any of these texts: {learned}: no such file" in \
        capsys.readouterr().err.splitlines()


def test_training_on_a_generated_dataset_warns_of_test_texts_it_trained_on(demo_run):
    # 176 of the demo's 1,000 test texts are training texts too (its short generated reviews repeat), and its 99.6%
    # test accuracy was reported without a word: the warning files get, the report repeating it, said nothing.
    from attnclf.data.registry import load_splits

    splits = load_splits("demo")
    trained = json.loads((demo_run / "config.json").read_text())
    assert trained["settings"]["data"]["max_train_examples"] == 600  # (a sample of the 4,000: fewer are shared)
    assert sum(text in set(splits.train.texts) for text in splits.test.texts) == 176
    # Its validation texts, carved from training, repeat some too: not warned of, a generator's repeats being no one's
    # to remove ("duplicates in the data?"), and the demo's first lines, its first command's, two warnings.
    [test] = trained["data"]["warnings"]
    assert re.fullmatch(r"\d+ of the 1,000 test texts also occur among the training or validation texts: the test "
                        r"score will flatter the model", test)
    assert "Training warned about the data" in (demo_run / "report.html").read_text(encoding="utf-8")


def test_a_toy_set_sampled_is_not_warned_of_testing_on_its_training_texts(tmp_path, capsys):
    # A toy set tests on its training set by design. Sampled, its test texts were no longer the training list itself,
    # and training warned "4 of the 4 test texts also occur among the training or validation texts".
    for sampled in (["--max-test-examples", "4"], ["--max-train-examples", "6"]):
        assert main(["train", "--dataset", "toy-both", "--model", "boe", "--epochs", "1", "--quiet", "--no-report",
                     "--output", str(tmp_path / sampled[0]), *sampled]) == 0
        assert "warning" not in capsys.readouterr().err


def test_evaluate_on_a_test_file_warns_of_texts_the_run_learned(csv_run, tmp_path, capsys):
    # `evaluate --dataset` counted another dataset's texts against those the run trained and validated on;
    # `evaluate --test-file` did not, and a file holding some of them flattered the score without a word
    more = write_csv(tmp_path / "more.csv", [(POSITIVE[0], "pos"), (NEGATIVE[0].upper(), "neg"), (POSITIVE[1], "pos"),
                                             ("a new film i adored", "pos"), ("a new film i loathed", "neg")])
    assert main(["evaluate", str(csv_run), "--test-file", str(more), "--json"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["warning: 3 of the 5 test texts also occur among the training or validation texts: the test "
                   "score will flatter the model"]
    unseen = write_csv(tmp_path / "unseen.csv", [("a new film i adored", "pos"), ("a new film i loathed", "neg")])
    assert main(["evaluate", str(csv_run), "--test-file", str(unseen), "--json"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("record", ["a data setting this attnclf lacks", "no seed"])
def test_evaluate_on_a_test_file_scores_a_run_whose_data_record_it_cannot_read(csv_run, tmp_path, capsys, record):
    # The check of learned texts is a warning: a record it could not read (a setting from a newer attnclf, a hand-
    # edited file) stopped `evaluate --test-file`, which never reads the run's data, with a traceback
    import shutil

    run = tmp_path / "run"
    shutil.copytree(csv_run, run)
    config = json.loads((run / "config.json").read_text())
    if record == "no seed":
        del config["settings"]["train"]["seed"]
    else:
        config["settings"]["data"]["sample_weights"] = "weight"
    (run / "config.json").write_text(json.dumps(config))
    unseen = write_csv(tmp_path / "unseen.csv", [("a new film i adored", "pos"), ("a new film i loathed", "neg")])
    assert main(["evaluate", str(run), "--test-file", str(unseen), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["num_examples"] == 2
    reason = "'seed'" if record == "no seed" else "'sample_weights'"
    assert [line.startswith(f"note: not checked whether {csv_run} trained on any of these texts: ") and reason in line
            for line in captured.err.splitlines()] == [True]


def test_evaluate_on_a_test_file_looks_for_the_run_s_dataset_in_data_dir(tmp_path, monkeypatch, capsys):
    # `evaluate --data-dir` finds a run's dataset where it has moved, for its test split; the check of a test file's
    # texts against those the run learned looked only where the run trained, and named the run unchecked
    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    learned = [f"{'a fine' if i % 2 else 'a dull'} film number {i}" for i in range(40)]
    stsa = tmp_path / "data" / "sst2" / "stsa_binary"
    stsa.mkdir(parents=True)
    for split, texts in (("train", learned[:30]), ("dev", learned[30:]), ("test", ["a fine end", "a dull end"])):
        (stsa / f"stsa.binary.{split}").write_text("".join(f"{int('fine' in t)} {t}\n" for t in texts))
    run = tmp_path / "run"
    assert main(["train", "--dataset", "sst2-sentences", "--data-dir", str(tmp_path / "data"), "--model", "boe",
                 "--epochs", "1", "--min-frequency", "1", "--output", str(run), "--quiet", "--no-report"]) == 0
    (tmp_path / "data").rename(tmp_path / "moved")
    capsys.readouterr()
    test = write_csv(tmp_path / "test.csv", [(learned[1], "positive"), (learned[32], "negative"),
                                             ("a new film i adored", "positive")])
    assert main(["evaluate", str(run), "--test-file", str(test), "--data-dir", str(tmp_path / "moved"), "--json"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "warning: 2 of the 3 test texts also occur among the training or validation texts: the test score will "
        "flatter the model"]


def test_datasets_lists_generated_and_local_sources(shared_data_dir, capsys):
    assert main(["datasets", "--data-dir", str(shared_data_dir)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "generated" in rows["demo"] and "local" in rows["imdb"] and "ablate only" in rows["toy-order"]


def test_models_lists_every_model_with_parameter_counts(capsys):
    from attnclf.models import MODELS

    assert main(["models", "--vocab-size", "1000", "--set", "d_model=32"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("parameters at a 1,000-word vocabulary, 2 classes")  # what the counts assume
    for name in MODELS:
        assert name in out


def test_models_refuses_set_fields_it_cannot_take_in_one_line(capsys):
    # vocab_size was passed twice to build_model (a TypeError's traceback); a field no model has changed no count.
    for pair, says in (("vocab_size=2", "--set vocab_size: the counts' vocab size is --vocab-size"),
                       ("num_classes=3", "--set num_classes: the counts' num classes is --num-classes"),
                       ("dmodel=32", "--set dmodel: no model has a config field 'dmodel'")):
        assert main(["models", "--set", pair]) == 2
        captured = capsys.readouterr()
        assert captured.err.strip() == f"attnclf: error: {says}" and captured.out == ""
    assert main(["models", "--set", "hidden_dim=8"]) == 0  # a field of some models only is theirs
    rows = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()[2:]}
    assert rows["lstm-mean"] != "2,692,354" and rows["boe"] == "2,560,258"


def test_every_command_has_help():
    from attnclf.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name in commands:
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args([name, "--help"])
        assert exit_info.value.code == 0


def test_every_argument_of_every_command_says_what_it_is(capsys):
    # `attnclf demo --help` listed --output with nothing of what it writes or where by default; nor did 60 more.
    import argparse

    from attnclf.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    missing = [f"{name} {action.option_strings[0] if action.option_strings else action.dest}"
               for name, command in [("attnclf", parser), *commands.items()] for action in command._actions
               if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) and not action.help]
    assert missing == []
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    demo = " ".join(capsys.readouterr().out.split())
    assert "--output OUTPUT, -o OUTPUT run directory to write (default: runs/demo)" in demo


def test_every_option_with_a_default_states_it():
    # Most did; evaluate --split, predict's and serve's --backend, explain --color, faithfulness --seed and export
    # --format did not, so a reader could not tell what leaving them out does.
    import argparse

    from attnclf.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    unstated = [f"{name} {action.option_strings[0]}"
                for name, command in commands.items() for action in command._actions
                if action.option_strings and action.default not in (None, argparse.SUPPRESS)
                and not isinstance(action, (argparse._StoreTrueAction, argparse._HelpAction))
                and not any(said in action.help for said in (f"default: {action.default}", f"default {action.default}",
                                                              f"{action.default} (the default", "(default)"))]
    assert unstated == []


def test_a_run_directory_and_an_output_are_spelt_alike_in_every_command():
    # Usage lines said `run_dir` (faithfulness alone `RUN_DIR`, as the help texts name it), and -o stood for --output
    # in every command that has one but demo and explain: `attnclf explain RUN text -o page.html` was an error.
    from attnclf.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    run_dirs = {name: action.metavar for name, command in commands.items() for action in command._actions
                if action.dest in ("run_dir", "run_dirs")}
    assert set(run_dirs.values()) == {"RUN_DIR"} and len(run_dirs) == 9, run_dirs
    without_o = [name for name, command in commands.items()
                 if "--output" in command._option_string_actions
                 and command._option_string_actions.get("-o") is not command._option_string_actions["--output"]]
    assert without_o == []


def test_every_command_says_what_it_does_under_its_usage():
    # evaluate, predict, datasets, models, demo, explain and report showed their usage line and went straight to
    # the options: their one-line summary appears only in `attnclf --help`.
    from attnclf.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    assert [name for name, command in commands.items() if not command.description] == []


def test_no_option_help_is_only_its_default():
    # serve --port said "default: 8000" and pretrain --seed "default: 0", and nothing of what they set.
    from attnclf.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    bare = [f"{name} {action.option_strings[0]}" for name, command in commands.items()
            for action in command._actions if action.help and action.help.lower().startswith("default")]
    assert bare == []


def test_every_threads_flag_states_its_default():
    # compare's and ablate's --threads said "torch threads (1 is fastest...)" and not what leaving it out does.
    from attnclf.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    unstated = [name for name, command in commands.items()
                if "--threads" in command._option_string_actions
                and "default" not in command._option_string_actions["--threads"].help]
    assert unstated == []


def test_a_test_file_is_described_without_a_training_file_to_match(capsys):
    # evaluate's and faithfulness's --test-file said "a held-out file in the same format": they take no training
    # file for it to be the same as.
    from attnclf.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    for name in ("evaluate", "faithfulness"):
        help_text = commands[name]._option_string_actions["--test-file"].help
        assert "same format" not in help_text and "CSV" in help_text, name


def test_the_training_flags_name_the_defaults_a_run_without_a_recipe_gets(capsys):
    from attnclf.text.tokenizer import TokenizerConfig
    from attnclf.training.trainer import TrainConfig

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, default in (("--epochs EPOCHS", TrainConfig.epochs), ("--batch-size BATCH_SIZE", TrainConfig.batch_size),
                          ("--weight-decay WEIGHT_DECAY", TrainConfig.weight_decay),
                          ("--optimizer {adamw,adam}", TrainConfig.optimizer),
                          ("--label-smoothing LABEL_SMOOTHING", TrainConfig.label_smoothing),
                          ("--class-weight {none,balanced}", TrainConfig.class_weights),
                          ("--vocab-size VOCAB_SIZE", TokenizerConfig.vocab_size),
                          ("--min-frequency MIN_FREQUENCY", TokenizerConfig.min_frequency),
                          # these four said nothing of their defaults
                          ("--lr LR", TrainConfig.lr), ("--schedule {linear,cosine,constant}", TrainConfig.schedule),
                          ("--warmup-ratio WARMUP_RATIO", TrainConfig.warmup_ratio),
                          ("--patience PATIENCE", TrainConfig.patience)):
        help_text = text.split(f" {flag} ", 1)[1].split(" --", 1)[0]
        assert f"else {default if isinstance(default, str) else f'{default:g}'})" in help_text, flag
    sampler = text.split(" --sampler {shuffle,balanced} ", 1)[1].split(" --", 1)[0]
    assert f"(default: {TrainConfig.sampler})" in sampler  # no recipe sets it


def test_every_command_ends_its_help_with_examples_that_parse(capsys):
    # Examples a newcomer can copy, a line each; parsed by the real parser (nothing runs; it refuses abbreviations), so
    # an example naming a flag that does not exist, or no longer does, fails here rather than for its reader.
    import shlex

    from attnclf.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name, command in commands.items():
        examples = [line.strip() for line in (command.epilog or "").splitlines()
                    if line.strip().startswith("attnclf ")]
        assert 2 <= len(examples) <= 3, name
        for example in examples:
            argv = shlex.split(example, comments=True)[1:]
            assert argv[0] == name, example
            try:
                parser.parse_args(argv)
            except SystemExit:
                pytest.fail(f"{example}: {capsys.readouterr().err}")
        with pytest.raises(SystemExit):
            main([name, "--help"])
        shown = capsys.readouterr().out.splitlines()
        assert all(f"  {example}" in shown for example in examples), name  # a line each, as written


def test_the_examples_texts_for_the_demo_run_use_the_demos_words():
    # predict's and explain's examples sent runs/demo "a fine film" and "not good at all": 'a', 'fine', 'at' and 'all'
    # are not among the generated reviews' words, so a newcomer's first answers came with <unk> notes (and 'a fine
    # film' was labelled negative).
    import shlex

    from attnclf.cli import EXAMPLES, build_parser
    from attnclf.data.generated import demo

    words = {word for text in demo().train.texts for word in text.split()}
    parser = build_parser()
    typed = [(example, parser.parse_args(shlex.split(example, comments=True)[1:]))
             for name in ("predict", "explain") for example in EXAMPLES[name]]
    on_demo = [(example, args.texts) for example, args in typed if args.run_dir == "runs/demo" and args.texts]
    assert len(on_demo) == 3
    for example, texts in on_demo:
        assert all(set(text.split()) <= words for text in texts), example


def test_every_method_flag_names_the_methods_it_takes():
    # explain --method listed them; faithfulness --methods and report --method said only "methods" / "method".
    from attnclf.cli import build_parser
    from attnclf.explain import METHODS

    commands = build_parser()._subparsers._group_actions[0].choices
    for name in ("explain", "faithfulness", "report"):
        help_text = " ".join(commands[name]._option_string_actions["--method"].help.split())
        assert all(method in help_text for method in METHODS), name


def test_plain_words_where_the_help_used_jargon_or_riddles(capsys):
    # --steps led with "Gauss-Legendre nodes"; refit's description read "for N epochs, N the count after which each
    # validated best"; export's named predict alone as a user of its graph, though serve --backend onnx is one too;
    # ablate --axes said nothing of which axes run when it is left out.
    from attnclf.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    assert not commands["explain"]._option_string_actions["--steps"].help.startswith("integrated gradients' Gauss")
    assert "N the count after which" not in commands["refit"].description
    assert "attnclf serve" in commands["export"].description
    assert "default" in commands["ablate"]._option_string_actions["--axes"].help


def test_today_s_commands_help_says_what_they_do_with_a_multi_label_run_and_names_a_folder_a_folder():
    # serve and export learnt multi-label runs (label sets answered, label-set parity checked) with their --help
    # silent on it; suspects' --work-dir help spoke of FOLDER/fold-K under the metavar WORK_DIR.
    from attnclf.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    assert "multi-label run" in commands["serve"].description
    assert "label set" in commands["export"].description
    assert commands["suspects"]._option_string_actions["--work-dir"].metavar == "FOLDER"


def test_train_help_states_the_max_len_a_file_run_gets(capsys):
    # --max-len's default depends on the model (the file recipe's tokens for self-attn): its help says which, and
    # stays true when the recipe or the general default changes.
    from attnclf.recipes import FILE_SELF_ATTN_TOKENIZER
    from attnclf.text.tokenizer import TokenizerConfig

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"on a file {FILE_SELF_ATTN_TOKENIZER['max_len']} for a single-label self-attn" in text
    assert f"else {TokenizerConfig.max_len})" in text
    assert f"(the default, {TokenizerConfig.truncation})" in text



def test_strip_punctuation_help_says_it_removes_emoji_hashtag_and_mention_marks_too(capsys):
    # It removes every character that is neither a letter, a digit nor a space: a post's emoji go with its commas,
    # which "remove punctuation" did not tell a user whose labels the emoji carry.
    from attnclf.text import CleaningConfig, clean

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--strip-punctuation remove punctuation and every other symbol (emoji, # and @ among them)" in text
    assert clean("great! \U0001f60d #win @ann", CleaningConfig(strip_punctuation=True)) == "great win ann"

# ------------------------------------------------------------------ bad input


def test_a_validation_file_validates_instead_of_a_share_of_the_training_file(csv_files, tmp_path, capsys):
    train, test = csv_files
    dev = write_csv(tmp_path / "dev.csv", [(t, "pos") for t in POSITIVE[:4]] + [(t, "neg") for t in NEGATIVE[:3]])
    out = tmp_path / "run"
    assert main(["train", "--train-file", str(train), "--validation-file", str(dev), "--test-file", str(test),
                 "--model", "boe", "--epochs", "2", "--min-frequency", "1", "--output", str(out), "--quiet",
                 "--no-report", "--threads", "1"]) == 0
    data = json.loads((out / "config.json").read_text())["data"]
    assert (data["train_examples"], data["validation_examples"], data["test_examples"]) == (120, 7, 12)
    capsys.readouterr()
    assert main(["evaluate", str(out), "--split", "validation", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_examples"] == 7
    # A refit learns the file's texts too.
    assert main(["refit", str(out), "--quiet", "--no-report", "--threads", "1"]) == 0
    assert json.loads((tmp_path / "run-refit" / "config.json").read_text())["data"]["train_examples"] == 127
    # An edited validation file is named as the data that changed (not the training file).
    capsys.readouterr()
    write_csv(dev, [(t, "pos") for t in POSITIVE[:4]] + [(t, "neg") for t in NEGATIVE[:2]])
    assert run_error(["evaluate", str(out), "--split", "validation"], capsys).startswith(
        "attnclf: error: dev.csv no longer gives the validation texts a run held out")
    assert run_error(["refit", str(out), "--output", str(tmp_path / "again")], capsys).startswith(
        f"attnclf: error: dev.csv no longer gives the texts {out} trained and validated on")


def test_training_names_its_classes_and_warns_of_names_differing_only_in_case(tmp_path, capsys):
    rows = [(t, "pos") for t in POSITIVE * 3] + [(t, " Pos") for t in POSITIVE[:2]] + [(t, "neg") for t in NEGATIVE * 3]
    train = write_csv(tmp_path / "train.csv", rows)
    assert main(["train", "--train-file", str(train), "--validation-file", str(train), "--model", "boe", "--epochs",
                 "1", "--min-frequency", "1", "--output", str(tmp_path / "run"), "--no-report", "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert "training texts per class: Pos: 2, neg: 18, pos: 18" in err  # (the reader strips the space)
    assert "warning: classes 'Pos' and 'pos' differ only in case or spaces" in err
    assert "some classes are numbers" not in err
    mixed = write_csv(tmp_path / "mixed.csv", rows[:10] + [(t, "0") for t in NEGATIVE * 3])
    assert main(["train", "--train-file", str(mixed), "--validation-file", str(mixed), "--model", "boe", "--epochs",
                 "1", "--min-frequency", "1", "--output", str(tmp_path / "mixed"), "--no-report", "--threads",
                 "1"]) == 0
    assert "warning: some classes are numbers ('0') and some are names ('pos')" in capsys.readouterr().err


def test_classes_left_without_a_training_text_by_the_split_are_a_warning_even_when_quiet(tmp_path, capsys):
    rare = write_csv(tmp_path / "rare.csv", [(f"text number {i}", f"class{i}") for i in range(50)])
    assert main(["train", "--train-file", str(rare), "--model", "boe", "--epochs", "1", "--output",
                 str(tmp_path / "run"), "--no-report", "--quiet", "--threads", "1"]) == 0
    held_out = json.loads((tmp_path / "run" / "config.json").read_text())["data"]["validation_examples"]
    assert held_out == 5
    warning = [line for line in capsys.readouterr().err.splitlines() if "no training text" in line]
    assert warning and warning[0].startswith("warning: 5 of 50 classes have no training text, their only texts "
                                             "held out to validate or left out of a --max-train-examples sample "
                                             "('class")


def test_quiet_hides_what_its_help_says_and_keeps_the_results(tmp_path, capsys):
    # Its help said "no progress bars"; it hides a line per epoch (stdout) and the notes on the data (stderr) too.
    from attnclf.cli import _subparser

    told = {}
    for quiet in ([], ["--quiet"]):
        assert main(["train", "--dataset", "toy-reversal", "--model", "boe", "--epochs", "1", "--output",
                     str(tmp_path / f"run{len(quiet)}"), "--no-report", "--threads", "1", *quiet]) == 0
        told[bool(quiet)] = capsys.readouterr()
    assert "epoch 1:" in told[False].out and "tokenising" in told[False].err
    assert "epoch 1:" not in told[True].out and "tokenising" not in told[True].err
    assert "weights kept: " in told[True].out and "run directory: " in told[True].out
    for command in ("train", "refit", "suspects", "demo"):
        quiet = _subparser(command)._option_string_actions["--quiet"].help
        assert "no line per epoch" in quiet and "no notes on the data" in quiet, command


def test_a_class_of_one_training_text_is_a_warning_naming_it_even_when_quiet_and_still_trains(tmp_path, capsys):
    rows = [(f"{t} number {i}", y) for i in range(3) for t, y in [(p, "pos") for p in POSITIVE] +
            [(n, "neg") for n in NEGATIVE]] + [("a film about tax law", "legal"), ("a film about tides", "ocean")]
    train = write_csv(tmp_path / "train.csv", rows)
    common = ["--model", "boe", "--epochs", "1", "--min-frequency", "1", "--no-report", "--threads", "1", "--quiet"]
    assert main(["train", "--train-file", str(train), *common, "--output", str(tmp_path / "run")]) == 0
    assert json.loads((tmp_path / "run" / "labels.json").read_text()) == ["legal", "neg", "ocean", "pos"]
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    # The split keeps a class's only text for training: validation never holds it, and says so.
    assert warnings == ["warning: 2 of 4 classes have a single training text ('legal', 'ocean'): a model learns "
                        "little from one example; they have no validation text either (a class needs 2 texts for a "
                        "split to hold one out), so no validation score tells how they do; give them more texts, or "
                        "merge rare classes"]
    # A validation file that holds one of them scores it: only the other is said to have no validation text.
    dev = write_csv(tmp_path / "dev.csv",
                    [(t + " again", y) for t, y in rows[:4]] + [("a film about a court", "legal")])
    assert main(["train", "--train-file", str(train), "--validation-file", str(dev), *common,
                 "--output", str(tmp_path / "dev-run")]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2 and warnings[0].startswith(
        "warning: 2 of 4 classes have a single training text ('legal', 'ocean'): a model learns little from one "
        "example; 1 of them ('ocean') has no validation text either")
    assert warnings[1].startswith("warning: 1 of 4 classes has no validation text ('neg')")  # (the file holds none)


def test_a_run_recorded_with_split_seed_and_a_validation_file_resumes_with_the_command_that_started_it(csv_files,
                                                                                                     tmp_path, capsys):
    # Runs trained before --split-seed was refused beside --validation-file recorded it: their command, --resume
    # added, continues them (without it, the recorded split seed is another setting).
    run = tmp_path / "run"
    argv = ["train", "--train-file", str(csv_files[0]), "--validation-file", str(csv_files[1]), "--model", "boe",
            "--min-frequency", "1", "--no-report", "--threads", "1", "--quiet", "--output", str(run)]
    assert main([*argv, "--epochs", "1"]) == 0
    config = json.loads((run / "config.json").read_text())
    config["settings"]["data"]["split_seed"] = 3
    (run / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    assert main([*argv, "--split-seed", "3", "--epochs", "2", "--resume"]) == 0, capsys.readouterr().err
    assert len((run / "history.jsonl").read_text().splitlines()) == 2


def test_an_ensemble_recorded_with_split_seed_and_a_validation_file_adds_members_with_the_command_that_began_it(
        csv_files, tmp_path, capsys):
    # As a run of one: its members, recorded before --split-seed was refused beside --validation-file, trained with
    # it; the command that began them, --resume added, trains the members they lack as they trained.
    ensemble = tmp_path / "ensemble"
    argv = ["train", "--train-file", str(csv_files[0]), "--validation-file", str(csv_files[1]), "--test-file",
            str(csv_files[1]), "--model", "boe", "--min-frequency", "1", "--epochs", "1", "--no-report", "--threads",
            "1", "--quiet", "--output", str(ensemble)]
    assert main([*argv, "--seeds", "0", "1"]) == 0
    for member in ("seed-0", "seed-1"):
        config = json.loads((ensemble / member / "config.json").read_text())
        config["settings"]["data"]["split_seed"] = 3
        (ensemble / member / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    assert main([*argv, "--split-seed", "3", "--seeds", "0", "1", "2", "--resume"]) == 0, capsys.readouterr().err
    assert json.loads((ensemble / "seed-2" / "config.json").read_text())["settings"]["data"]["split_seed"] == 3


@pytest.mark.parametrize("setting, flag", [("unicode_nfc", "--no-unicode-nfc"), ("split_cjk", "--no-split-cjk"),
                                           ("social_media", "--social-media"), ("turkish_i", "--no-turkish-i")])
def test_a_run_from_before_a_cleaning_setting_resumes_with_the_command_that_started_it(
        csv_files, tmp_path, capsys, recorded_before, setting, flag):
    # Its config.json's cleaning lacks the setting: it read texts as every command did then (no NFC, no CJK split),
    # and that command with --resume added continues it so.
    run = tmp_path / "run"
    argv = ["train", "--train-file", str(csv_files[0]), "--model", "boe", "--min-frequency", "1", "--no-report",
            "--threads", "1", "--quiet", "--output", str(run)]
    assert main([*argv, "--epochs", "1"]) == 0
    recorded_before(run, setting)
    capsys.readouterr()
    assert main([*argv, "--epochs", "2", "--resume"]) == 0, capsys.readouterr().err
    assert len((run / "history.jsonl").read_text().splitlines()) == 2
    cleaning = json.loads((run / "config.json").read_text())["settings"]["tokenizer"]["cleaning"]
    assert setting not in cleaning
    # A run that chose the flag recorded the choice: a command without the flag would read texts otherwise.
    chosen = tmp_path / "chosen"
    argv[-1] = str(chosen)
    assert main([*argv, "--epochs", "1", flag]) == 0
    capsys.readouterr()
    assert main([*argv, "--epochs", "2", "--resume"]) == 2
    assert f"{chosen} trained with tokenizer.cleaning = " in capsys.readouterr().err


def test_a_run_from_before_social_media_resumed_with_social_media_is_refused_not_read_as_before(
        csv_files, tmp_path, capsys, recorded_before):
    # Every cleaning setting added before social_media had a flag that set it to the value runs had before it, so a
    # run recorded then was compared with its command at that value whatever was typed; --social-media sets one away
    # from it, and was taken silently: the run went on reading texts without it.
    run = tmp_path / "run"
    argv = ["train", "--train-file", str(csv_files[0]), "--model", "boe", "--min-frequency", "1", "--no-report",
            "--threads", "1", "--quiet", "--output", str(run)]
    assert main([*argv, "--epochs", "1"]) == 0
    recorded_before(run, "social_media")
    capsys.readouterr()
    assert main([*argv, "--epochs", "2", "--resume", "--social-media"]) == 2
    assert f"{run} trained with tokenizer.cleaning = " in capsys.readouterr().err
    assert len((run / "history.jsonl").read_text().splitlines()) == 1


def test_chinese_is_read_a_character_a_word_and_a_run_that_keeps_its_clauses_is_warned(tmp_path, capsys):
    from attnclf import Classifier

    rows = [(f"这个产品{word}，{days}天就到了。", label) for days in range(1, 10)
            for word, label in (("很好", "好评"), ("很差", "差评"))]
    data = write_csv(tmp_path / "reviews.csv", rows)
    argv = ["train", "--train-file", str(data), "--model", "boe", "--min-frequency", "1", "--epochs", "1",
            "--no-report", "--threads", "1", "--quiet"]
    assert main([*argv, "--output", str(tmp_path / "word")]) == 0
    assert "Chinese" not in capsys.readouterr().err
    assert Classifier.load(tmp_path / "word").tokenizer.tokens(["这个产品很好"]) == [["这", "个", "产", "品", "很", "好"]]
    assert main([*argv, "--no-split-cjk", "--output", str(tmp_path / "clauses")]) == 0
    err = capsys.readouterr().err
    assert "warning: 16 of the 16 training texts (100%) hold Chinese, Japanese or Thai text" in err
    config = json.loads((tmp_path / "clauses" / "config.json").read_text())
    assert any("without --no-split-cjk" in warning for warning in config["data"]["warnings"])


def test_posts_read_as_written_are_noted_with_the_flag_that_reads_them_as_posts(tmp_path, capsys):
    # social_media is off by default (the named corpora's recorded figures were measured without it): a file of posts
    # says what it would change, once, and --social-media reads them as tweet tokenizers do, without the note.
    from attnclf import Classifier

    rows = [(f"@fan{i} loved it!!😍😍 https://t.co/a{i}", "happy") for i in range(8)]
    rows += [(f"@fan{i} hated it!!😡😡 https://t.co/b{i}", "angry") for i in range(8)] + [("a plain text", "happy")]
    data = write_csv(tmp_path / "posts.csv", rows)
    argv = ["train", "--train-file", str(data), "--model", "boe", "--min-frequency", "1", "--epochs", "1",
            "--no-report", "--threads", "1"]  # (not --quiet, which hides notes)
    assert main([*argv, "--output", str(tmp_path / "written")]) == 0
    err = capsys.readouterr().err
    assert "note: 14 of the 15 training texts (93%) hold a URL, an @mention or an emoji" in err  # (2 validate)
    assert err.count("--social-media reads them as tweet tokenizers do") == 1
    assert main([*argv, "--social-media", "--output", str(tmp_path / "posts")]) == 0
    assert "--social-media" not in capsys.readouterr().err
    assert Classifier.load(tmp_path / "posts").tokenizer.tokens(["@ann loved it!!😍😍 https://t.co/zz"]) == [
        ["@", "user", "loved", "it", "!!", "😍", "😍", "httpurl"]]


# Every tokenizer field typed: a run begun before the file recipe then reads the tokens its command gives now, so only
# the recipe's model part is told (its tokenizer part is the model-only edition's test).
MODEL_PART_ONLY = ["--max-len", "16", "--truncation", TokenizerConfig().truncation]


# How a run begun before the file recipe sized its n-gram buckets is told its command now sizes them.
SIZED = "the n-gram buckets sized to the training texts (the run: a fixed count)"


def test_a_file_run_from_before_the_file_recipe_continues_under_it_when_resumed_by_its_command(tmp_path, capsys,
                                                                                              monkeypatch):
    # A self-attn run on a file started under the general defaults (d_model 128, no n-gram branch): its command,
    # --resume added, was refused (it would now build the file recipe's model), though it asked for nothing the run
    # did not record; it continues the run under its own settings, to the bytes --output alone gives, as an
    # ensemble's members continue. A note names what the command builds now.
    from attnclf import recipes

    data = write_csv(tmp_path / "reviews.csv", [(t, "pos") for t in POSITIVE * 3] + [(t, "neg") for t in NEGATIVE * 3])
    run, alone = tmp_path / "run", tmp_path / "alone"
    argv = ["train", "--train-file", str(data), "--set", "layers=1", "--min-frequency", "1", *MODEL_PART_ONLY,
            "--no-report", "--threads", "1", "--output", str(run)]
    with monkeypatch.context() as before:
        before.setattr(recipes, "FILE_RECIPES", recipes.FILE_RECIPES[:1])  # (before any file recipe)
        assert main([*argv, "--epochs", "1", "--quiet"]) == 0
    assert json.loads((run / "config.json").read_text())["settings"]["model_config"] == {"layers": 1}
    shutil.copytree(run, alone)
    capsys.readouterr()
    # A value the run differs by is refused by that setting, the recipe's own value too (d_model 64: it trained 128).
    assert "trained with model_config.layers = 1, this command gives 2" in run_error(
        [*argv, "--set", "layers=2", "--epochs", "2", "--resume"], capsys)
    assert "trained with model_config.d_model = 128, this command gives 64" in run_error(
        [*argv, "--set", "d_model=64", "--epochs", "2", "--resume"], capsys)
    assert main([*argv, "--epochs", "2", "--resume"]) == 0
    err = capsys.readouterr().err
    assert (f"note: {run} began under an earlier file recipe: this command now builds d_model=64 (the run: 128), "
            f"ff_dim=256 (the run: 512), dropout=0.3 (the run: 0.1), positional=sinusoidal (the run: learned), "
            f"nb_ngram_buckets=1048576 (the run: 0), nb_ngram_bucket_budget=4194304 (the run: 0), {SIZED}; the run "
            f"keeps its own settings") in err
    assert len((run / "history.jsonl").read_text().splitlines()) == 2
    assert json.loads((run / "config.json").read_text())["settings"]["model_config"] == {"layers": 1}
    assert main(["train", "--resume", "--output", str(alone), "--epochs", "2", "--quiet"]) == 0
    assert (run / "model.safetensors").read_bytes() == (alone / "model.safetensors").read_bytes()
    # Flags that give back one old default (d_model 128, no n-gram branch) describe the run as well.
    assert main([*argv, "--set", "d_model=128", "--set", "nb_ngram_buckets=0", "--epochs", "3", "--resume",
                 "--quiet"]) == 0
    assert len((run / "history.jsonl").read_text().splitlines()) == 3


def test_a_file_run_from_the_model_only_file_recipe_continues_under_it_when_resumed_by_its_command(tmp_path, capsys,
                                                                                                  monkeypatch):
    # Begun under the file recipe's first edition (model settings only, the general tokenizer): its command, --resume
    # added, continues it at its own tokens; a --max-len it did not read is refused, by that setting.
    from attnclf import recipes

    data = write_csv(tmp_path / "reviews.csv", [(t, "pos") for t in POSITIVE * 3] + [(t, "neg") for t in NEGATIVE * 3])
    run = tmp_path / "run"
    argv = ["train", "--train-file", str(data), "--set", "layers=1", "--min-frequency", "1", "--no-report",
            "--threads", "1", "--quiet", "--output", str(run)]
    with monkeypatch.context() as before:
        before.setattr(recipes, "FILE_RECIPES", recipes.FILE_RECIPES[:2])  # (the model-only recipe: the latest then)
        assert main([*argv, "--epochs", "1"]) == 0
    general = TokenizerConfig()
    settings = json.loads((run / "config.json").read_text())["settings"]
    assert settings["tokenizer"]["max_len"] == general.max_len
    assert settings["model_config"] == {"layers": 1} | recipes.FILE_SELF_ATTN
    capsys.readouterr()
    assert "trained with model_config.layers = 1, this command gives 2" in run_error(
        [*argv, "--set", "layers=2", "--epochs", "2", "--resume"], capsys)
    assert f"trained with tokenizer.max_len = {general.max_len}, this command gives 100" in run_error(
        [*argv, "--max-len", "100", "--epochs", "2", "--resume"], capsys)
    assert main([*argv, "--epochs", "2", "--resume"]) == 0, capsys.readouterr().err
    assert len((run / "history.jsonl").read_text().splitlines()) == 2
    assert json.loads((run / "config.json").read_text())["settings"]["tokenizer"]["max_len"] == general.max_len


def test_a_finished_file_run_from_an_earlier_file_recipe_resumed_by_its_command_says_it_is_finished(
        tmp_path, capsys, monkeypatch):
    # A file run finished under the edition before sized buckets (yesterday's release), its command rerun with
    # --resume (a script that resumes whatever stopped): it was told its command "now builds it with the n-gram
    # buckets sized" and exited 2, where there is nothing left to build; it is finished and tested again, as the
    # release said. More epochs than it ran train on under its own settings, as every earlier-recipe run continues.
    from attnclf import recipes

    data = write_csv(tmp_path / "reviews.csv", [(t, "pos") for t in POSITIVE * 3] + [(t, "neg") for t in NEGATIVE * 3])
    run = tmp_path / "run"
    argv = ["train", "--train-file", str(data), "--set", "layers=1", "--min-frequency", "1", "--no-report",
            "--threads", "1", "--output", str(run)]
    with monkeypatch.context() as before:
        before.setattr(recipes, "FILE_RECIPES", recipes.FILE_RECIPES[:3])  # (the latest before sized buckets)
        assert main([*argv, "--epochs", "1", "--quiet"]) == 0
    weights = (run / "model.safetensors").read_bytes()
    capsys.readouterr()
    assert main([*argv, "--epochs", "1", "--resume"]) == 0
    err = capsys.readouterr().err
    assert f"{run} finished training already (all 1 epochs): nothing to train; it is tested again" in err
    assert f"began under an earlier file recipe: this command now builds {SIZED}" in err
    assert (run / "model.safetensors").read_bytes() == weights
    # More epochs than it ran train on under its own settings, as --output alone would.
    assert main([*argv, "--epochs", "2", "--resume", "--quiet"]) == 0
    assert len((run / "history.jsonl").read_text().splitlines()) == 2


def test_a_resumed_command_is_rebuilt_under_earlier_file_recipes_only_where_it_differs(tmp_path, monkeypatch):
    # Rebuilding the command under every earlier edition tells apart runs and members begun under one; a run or an
    # ensemble its command describes as it is needs none of it.
    from attnclf import cli

    data = write_csv(tmp_path / "reviews.csv", [(t, "pos") for t in POSITIVE * 3] + [(t, "neg") for t in NEGATIVE * 3])
    common = ["train", "--train-file", str(data), "--test-file", str(data), "--set", "layers=1", "--min-frequency",
              "1", "--max-len", "16", "--no-report", "--threads", "1", "--quiet", "--epochs", "1"]
    assert main([*common, "--output", str(tmp_path / "run")]) == 0
    assert main([*common, "--output", str(tmp_path / "ens"), "--seeds", "0", "1"]) == 0
    editions = []
    build_settings = cli.build_settings

    def recorded(args, file_recipe=-1):
        editions.append(file_recipe)
        return build_settings(args, file_recipe)

    monkeypatch.setattr(cli, "build_settings", recorded)
    assert main([*common, "--output", str(tmp_path / "run"), "--resume"]) == 0
    assert main([*common, "--output", str(tmp_path / "ens"), "--seeds", "0", "1", "--resume"]) == 0
    assert editions and set(editions) == {-1}


def test_a_resume_refusal_names_a_value_the_command_gives(tmp_path, capsys):
    # A run begun under the file recipe with the general defaults typed (its budget the recipe's), resumed with those
    # flags left out: its command builds d_model 64, not the value of the build before the recipe (it said "trained
    # with model_config.nb_ngram_bucket_budget = 4194304, this command gives 0", where the command gives 4194304).
    data = write_csv(tmp_path / "reviews.csv", [(t, "pos") for t in POSITIVE * 3] + [(t, "neg") for t in NEGATIVE * 3])
    run = tmp_path / "run"
    argv = ["train", "--train-file", str(data), "--set", "layers=1", "--min-frequency", "1", "--max-len", "16",
            "--no-report", "--threads", "1", "--quiet", "--output", str(run)]
    general = ["--set", "d_model=128", "--set", "ff_dim=512", "--set", "dropout=0.1", "--set", "positional=learned",
               "--set", "nb_ngram_buckets=0"]
    assert main([*argv, *general, "--epochs", "1"]) == 0
    capsys.readouterr()
    assert f"{run} trained with model_config.d_model = 128, this command gives 64: " in \
        run_error([*argv, "--epochs", "2", "--resume"], capsys)


def test_a_file_run_begun_with_the_old_suggested_flags_is_told_only_the_budget_differs(tmp_path, capsys,
                                                                                     monkeypatch):
    # Before the file recipe, train's small-file note suggested its values as flags; a run begun with them differs
    # from what its command builds now by the n-gram budget alone: its command continues it, and the note names only
    # that.
    from attnclf import recipes

    data = write_csv(tmp_path / "reviews.csv", [(t, "pos") for t in POSITIVE * 3] + [(t, "neg") for t in NEGATIVE * 3])
    run = tmp_path / "run"
    argv = ["train", "--train-file", str(data), "--set", "layers=1", "--set", "nb_ngram_buckets=1048576", "--set",
            "d_model=64", "--set", "ff_dim=256", "--set", "dropout=0.3", "--set", "positional=sinusoidal",
            "--min-frequency", "1", *MODEL_PART_ONLY, "--no-report", "--threads", "1", "--output", str(run)]
    with monkeypatch.context() as before:
        before.setattr(recipes, "FILE_RECIPES", recipes.FILE_RECIPES[:1])  # (before any file recipe)
        assert main([*argv, "--epochs", "1", "--quiet"]) == 0
    capsys.readouterr()
    assert main([*argv, "--epochs", "2", "--resume"]) == 0
    assert (f"note: {run} began under an earlier file recipe: this command now builds nb_ngram_bucket_budget=4194304 "
            f"(the run: 0); the run keeps its own settings") in capsys.readouterr().err


def test_training_warns_of_texts_on_both_sides_of_a_split_even_when_quiet(tmp_path, capsys):
    rows = [(f"{t} number {i}", "pos") for i, t in enumerate(POSITIVE * 5)] + \
        [(f"{t} number {i}", "neg") for i, t in enumerate(NEGATIVE * 5)]
    test = write_csv(tmp_path / "test.csv", rows[:4] + rows[-4:])
    train = write_csv(tmp_path / "train.csv", rows * 2)  # every text twice, and the test texts among them
    common = ["--model", "boe", "--epochs", "1", "--min-frequency", "1", "--no-report", "--threads", "1", "--quiet"]
    assert main(["train", "--train-file", str(train), "--test-file", str(test), *common,
                 "--output", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    shared = re.search(r"warning: (\d+) of the (\d+) validation texts also occur among the training texts", err)
    assert shared and int(shared[1]) > 0
    assert "warning: 8 of the 8 test texts also occur among the training or validation texts" in err
    assert "training texts per class" not in err  # --quiet keeps the counts to itself, not the warnings
    clean = write_csv(tmp_path / "clean.csv", rows)
    other = write_csv(tmp_path / "other.csv", [(t + " again", y) for t, y in rows[:8]])
    assert main(["train", "--train-file", str(clean), "--test-file", str(other), *common,
                 "--output", str(tmp_path / "clean")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_labels_that_are_one_number_get_one_order_and_a_warning(tmp_path, capsys):
    rows = [(t, label) for t in POSITIVE for label in ("1", "+1")] + [(t, "-1") for t in NEGATIVE * 2]
    train = write_csv(tmp_path / "train.csv", rows)
    assert main(["train", "--train-file", str(train), "--model", "boe", "--epochs", "1", "--min-frequency", "1",
                 "--no-report", "--threads", "1", "--output", str(tmp_path / "run")]) == 0
    assert "warning: classes '+1' and '1' are one number written differently" in capsys.readouterr().err
    assert json.loads((tmp_path / "run" / "labels.json").read_text()) == ["-1", "+1", "1"]


def test_labels_pandas_wrote_as_floats_are_kept_with_a_warning_at_training(tmp_path, capsys):
    rows = [(t, "1.0") for t in POSITIVE * 2] + [(t, "0.0") for t in NEGATIVE * 2]
    train = write_csv(tmp_path / "train.csv", rows)
    assert main(["train", "--train-file", str(train), "--model", "boe", "--epochs", "1", "--min-frequency", "1",
                 "--no-report", "--threads", "1", "--quiet", "--output", str(tmp_path / "run")]) == 0
    assert ("warning: the classes ('0.0', '1.0') look like whole numbers written as decimals, as pandas writes an "
            "integer column holding a missing value: the run's labels will read '1.0', not '1'"
            in capsys.readouterr().err)
    assert json.loads((tmp_path / "run" / "labels.json").read_text()) == ["0.0", "1.0"]  # (what the file says)


def test_an_unfinished_seeds_folder_says_so_and_how_to_finish_it(tmp_path, capsys):
    folder = tmp_path / "ens"
    (folder / "seed-0").mkdir(parents=True)
    (folder / "seed-0" / "config.json").write_text("{}")
    err = run_error(["evaluate", str(folder)], capsys)
    assert "is a `train --seeds` folder whose training has not finished" in err and "--resume" in err


def test_an_ensemble_folder_is_not_one_model_and_a_run_is_not_two(csv_run, tmp_path, capsys, monkeypatch):
    from attnclf import ensemble
    from attnclf.classifier import Classifier
    from attnclf.errors import AttnclfError

    (tmp_path / "ensemble.json").write_text('{"members": ["seed-0"]}')
    with pytest.raises(AttnclfError, match="holds a `train --seeds` ensemble: load it with attnclf.Ensemble.load, "
                                           rf"or one member, such as {re.escape(str(tmp_path))}/seed-"):
        Classifier.load(tmp_path)
    assert run_error(["evaluate", str(csv_run), str(csv_run.parent / ".." / csv_run.parent.name / csv_run.name)],
                     capsys).endswith("is given twice; an ensemble's runs are different runs")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ensemble, "train_ensemble", interrupted)
    argv = ["train", "--dataset", "demo", "--seeds", "0", "1", "--output", str(tmp_path / "ens")]
    # The hint repeats the command without --overwrite, which --resume refuses.
    assert main(argv + ["--embeddings-std=2", "--embeddings", "v.vec", "--overwrite"]) == 130
    assert capsys.readouterr().err.strip() == (
        f"attnclf: interrupted; `attnclf train {' '.join(argv[1:])} --embeddings-std=2 --embeddings v.vec --resume` "
        f"keeps the finished members and continues the others (seed 0 not started; seed 1 not started)")
    monkeypatch.chdir(tmp_path)  # the default folder, runs/boe-demo, is where it resumes too
    assert main(["train", "--dataset", "demo", "--model", "boe", "--seeds", "0", "1"]) == 130
    assert capsys.readouterr().err.strip().endswith("--resume` keeps the finished members and continues the others "
                                                    "(seed 0 not started; seed 1 not started)")
    # Members an interrupted --overwrite was replacing say where their finished models are.
    for seed in (0, 1):
        (tmp_path / "runs" / "boe-demo" / f"seed-{seed}" / "earlier-model").mkdir(parents=True)
    assert main(["train", "--dataset", "demo", "--model", "boe", "--seeds", "0", "1", "--overwrite"]) == 130
    members = Path("runs") / "boe-demo"  # (as the command resolved it: relative to the current folder)
    assert capsys.readouterr().err.strip().endswith(
        f"continues the others (seed 0 not started; seed 1 not started); the models they replace are kept in "
        f"{members / 'seed-0' / 'earlier-model'}, "
        f"{members / 'seed-1' / 'earlier-model'}")
    assert run_error(["evaluate", str(tmp_path), str(csv_run)], capsys) == (
        f"attnclf: error: {tmp_path} is a `train --seeds` ensemble folder, which is scored alone; to combine runs with "
        f"its members, give {tmp_path / 'seed-S'} for each")
    assert run_error(["evaluate", str(csv_run), "--dataset", "demo", "--data-dir", str(tmp_path / "nowhere")],
                     capsys) == f"attnclf: error: --data-dir {tmp_path / 'nowhere'}: no such folder"


def test_a_new_class_in_the_training_file_is_named_as_the_change_not_the_validation_file(tmp_path, capsys):
    train = write_csv(tmp_path / "train.csv", [(t, "pos") for t in POSITIVE * 3] + [(t, "neg") for t in NEGATIVE * 3])
    dev = write_csv(tmp_path / "dev.csv", [(POSITIVE[0], "pos"), (NEGATIVE[0], "neg")])
    out = tmp_path / "run"
    assert main(["train", "--train-file", str(train), "--validation-file", str(dev), "--model", "boe", "--epochs",
                 "1", "--min-frequency", "1", "--output", str(out), "--quiet", "--no-report", "--threads", "1"]) == 0
    assert "warning: 2 of the 2 validation texts also occur among the training texts" in capsys.readouterr().err
    with open(train, "a") as f:
        f.write('"so so",meh\n')  # a class sorted first renumbers the others, in dev.csv's fingerprint too
    assert run_error(["evaluate", str(out), "--split", "validation"], capsys).startswith(
        "attnclf: error: train.csv no longer gives the validation texts")
    assert run_error(["refit", str(out)], capsys).startswith("attnclf: error: train.csv no longer gives the texts")


def test_a_validation_file_that_is_the_training_file_is_warned_of(tmp_path, capsys):
    # The training file given again as --validation-file validates on nothing but training texts: every validation
    # score flatters the model, as a dev file that merely overlaps it does (which was warned of, this was not)
    train = write_csv(tmp_path / "train.csv", [(t, "pos") for t in POSITIVE] + [(t, "neg") for t in NEGATIVE])
    assert main(["train", "--train-file", str(train), "--validation-file", str(train), "--model", "boe", "--epochs",
                 "1", "--min-frequency", "1", "--output", str(tmp_path / "run"), "--quiet", "--no-report",
                 "--threads", "1"]) == 0
    shared = len(POSITIVE) + len(NEGATIVE)
    assert (f"warning: {shared} of the {shared} validation texts also occur among the training texts (duplicates in "
            f"the data?): validation scores, early stopping and refit's epoch count will flatter the model"
            in capsys.readouterr().err)


def test_a_run_whose_files_moved_says_which_of_its_files_is_gone(tmp_path, capsys):
    # The reader's own "no such file" named a path the command never mentioned: say it is the run's, moved since
    data = tmp_path / "data"
    data.mkdir()
    train = write_csv(data / "train.csv", [(t, "pos") for t in POSITIVE * 2] + [(t, "neg") for t in NEGATIVE * 2])
    test = write_csv(data / "test.csv", [(t, "pos") for t in POSITIVE] + [(t, "neg") for t in NEGATIVE])
    run, lone = tmp_path / "run", tmp_path / "lone"
    for out, files in ((run, ["--test-file", str(test)]), (lone, [])):
        assert main(["train", "--train-file", str(train), *files, "--model", "boe", "--epochs", "1", "--min-frequency",
                     "1", "--output", str(out), "--quiet", "--no-report", "--threads", "1"]) == 0
    data.rename(tmp_path / "moved")
    capsys.readouterr()  # (training's warnings: the texts repeat)
    # ...and what to do about it: evaluate reads the file where it is now, report (which takes no file) only where
    # the run read it; export checks its copy on it where it is now
    assert run_error(["evaluate", str(run)], capsys) == (
        f"attnclf: error: {run} was tested on {test}, which is no longer there (moved or deleted since); to score the "
        f"run on it where it is now, give that path with --test-file")
    assert run_error(["report", str(run)], capsys) == (
        f"attnclf: error: {run} was tested on {test}, which is no longer there (moved or deleted since); report "
        f"takes no test file: put it back there to report on the run, or score the run on it where it is now with "
        f"`attnclf evaluate {run} --test-file NEW_PATH`")
    assert run_error(["export", str(run), "--output", str(tmp_path / "onnx")], capsys) == (
        f"attnclf: error: {run} was tested on {test}, which is no longer there (moved or deleted since); to read it "
        f"where it is now, give that path with --check-file")
    assert run_error(["calibrate", str(run)], capsys) == (
        f"attnclf: error: {run} trained on {train}, which is no longer there (moved or deleted since)")
    assert run_error(["evaluate", str(lone)], capsys) == (  # (no test file: scored on the texts it held out)
        f"attnclf: error: {lone} trained on {train}, which is no longer there (moved or deleted since)")
    assert run_error(["refit", str(run)], capsys) == (
        f"attnclf: error: {run} trained on {train}, which is no longer there (moved or deleted since)")
    assert run_error(["train", "--resume", "--output", str(run)], capsys) == (
        f"attnclf: error: {run} trained on {train}, which is no longer there (moved or deleted since); to resume it, "
        f"give the command that started it with --resume and the file where it is now")
    # A test file given instead needs none of them
    assert main(["evaluate", str(run), "--test-file", str(tmp_path / "moved" / "test.csv")]) == 0
    (tmp_path / "moved").rename(data)  # and back where the run read it, the report is written
    assert main(["report", str(run)]) == 0


@pytest.mark.parametrize("argv, message", [
    (["--dataset", "demo", "--test-file", "{train}"], "--dataset demo brings its own splits; --test-file is for your "
                                                      "own data"),
    (["--dataset", "demo", "--train-file", "{train}"], "--dataset demo brings its own splits; --train-file"),
    # (read as the dataset comes, the columns went unread without a word)
    (["--dataset", "demo", "--text-column", "review"], "--text-column names a column of your own file (--train-file); "
                                                       "--dataset demo is read as it comes: drop --text-column"),
    (["--dataset", "demo", "--label-column", "sentiment"], "--label-column names a column of your own file"),
    (["--validation-file", "{train}"], "--validation-file validates a --train-file run"),
    (["--train-file", "{train}", "--validation-file", "{odd}"], "odd.csv, line 2: label 'meh' in column 'label' is not one of the training labels"),
    # (it said "train.csv has its own validation split", of the training file, which has none)
    (["--train-file", "{train}", "--validation-file", "{train}", "--hold-out", "latest"],
     "attnclf: error: --validation-file train.csv gives the validation texts; drop --hold-out latest"),
    (["--train-file", "{train}", "--validation-file", "{train}", "--val-fraction", "0.2"],
     "--val-fraction carves validation from the training file; --validation-file replaces it"),
    # Typed at their default values they are as much a mistake: labels joined by | read as classes of their own.
    (["--train-file", "{train}", "--validation-file", "{train}", "--val-fraction", "0.1"],
     "--val-fraction carves validation from the training file; --validation-file replaces it"),
    (["--train-file", "{train}", "--label-delimiter", "|"], "--label-delimiter applies to multi-label data; add "
                                                            "--multi-label"),
    (["--train-file", "{train}", "--embeddings-std", "4"], "--embeddings-std needs --embeddings FILE (or count)"),
    (["--train-file", "{train}", "--validation-file", "{train}", "--split-seed", "3"],
     "--split-seed seeds the validation split carved from the training file (and a --max-train-examples sample); "
     "with --validation-file every run validates on that file: drop --split-seed"),
    # (with a sample to draw, it seeds that)
    (["--train-file", "{train}", "--validation-file", "{odd}", "--split-seed", "3", "--max-train-examples", "4"],
     "odd.csv, line 2: label 'meh'"),
    (["--dataset", "sst2", "--data-dir", "{tmp}/no-such-folder"], "--data-dir {tmp}/no-such-folder: no such folder"),
    # (a file named as one, not as a folder that is not there)
    (["--dataset", "sst2", "--data-dir", "{odd}"], "--data-dir {tmp}/odd.csv is a file; give the folder holding the "
                                                   "datasets"),
    (["--dataset", "demo", "--seeds", "0", "0", "1"], "--seeds needs at least two seeds, each once; got 0 0 1"),
    # One value is no ensemble: it says what to type for one model, and for that many runs (compare's count).
    (["--dataset", "demo", "--seeds", "3"], "--seeds lists an ensemble's seeds, at least two, and got only 3: for one "
                                            "model give --seed 3; for 3 runs, --seeds 0 1 2"),
    (["--dataset", "demo", "--seeds", "1"], "--seeds lists an ensemble's seeds, at least two, and got only 1: for one "
                                            "model give --seed 1"),
    # (not "give --seed -1", a seed it refuses in turn)
    (["--dataset", "demo", "--seeds", "-1"], "--seeds must be at least 0 and below 4294967296, got -1"),
])
def test_data_flags_that_do_not_go_together_are_refused_in_one_line(csv_files, tmp_path, capsys, argv, message):
    odd = write_csv(tmp_path / "odd.csv", [("so so", "meh")])
    argv = [a.format(train=csv_files[0], odd=odd, tmp=tmp_path) for a in argv]
    err = run_error(["train", *argv, "--output", str(tmp_path / "o"), "--quiet"], capsys)
    assert message.format(tmp=tmp_path) in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("flags, message", [
    (["--batch-size", "0"], "--batch-size must be at least 1, got 0"),
    (["--lr", "-1"], "--lr must be a finite number, at least 0, got -1.0"),
    (["--epochs", "0"], "--epochs must be at least 1, got 0"),
    (["--max-len", "0"], "--max-len must be at least 1, got 0"),  # (its flag, as typed: not tokenizer max_len)
    (["--vocab-size", "2"], "--vocab-size must be at least 3, got 2"),
    (["--min-frequency", "0"], "--min-frequency must be at least 1, got 0"),
    (["--set", "d_model=abc"], "model field d_model takes int values like 128, got 'abc'"),
    (["--set", "dropout=1.5"], "model field dropout must be below 1, got 1.5"),
    (["--warmup-ratio", "1"], "--warmup-ratio must be at least 0 and below 1, got 1.0"),
    # NaN compares false with every bound: each check must refuse it, not let it through to torch or config.json.
    (["--lr", "nan"], "--lr must be a finite number, at least 0, got nan"),
    (["--weight-decay", "inf"], "--weight-decay must be a finite number, at least 0, got inf"),
    (["--ema-decay", "nan"], "--ema-decay must be at least 0 and below 1, got nan"),
    (["--label-smoothing", "nan"], "--label-smoothing must be at least 0 and below 1, got nan"),
    (["--warmup-ratio", "nan"], "--warmup-ratio must be at least 0 and below 1, got nan"),
    (["--set", "token_dropout=nan"], "model field token_dropout must be below 1, got nan"),
    (["--embeddings", "count", "--embeddings-std", "inf"], "--embeddings-std must be positive and finite, got inf"),
    # A billion positions of learned embeddings: about 2 TB to train, refused before the data loads.
    (["--max-len", "1000000000"], "GB for its weights, gradients and optimiser state, more than this machine's"),
    (["--max-len", "1000000000"], "model 'self-attn' with max_len 1,000,000,000 needs at least"),  # ...what makes it
    (["--max-len", "1000000000"], "GB; lower max_len (--max-len)"),                                # large, its remedy
    (["--set", "d_model=100000", "--set", "ff_dim=100000"], "GB; lower the model's size (--set)"),
    (["--model", "boe", "--set", "embed_dim=10000000000"], "GB; lower the model's size (--set)"),  # wide, few words
    # Named by the flags typed, not the fields behind them (max_windows, window stride, threads)
    (["--windows", "--max-windows", "0"], "attnclf: error: --max-windows must be at least 1, got 0"),
    (["--windows", "--window-stride", "0"], "attnclf: error: --window-stride must be at least 1, got 0"),
    # ...and so is a stride longer than the window, which is checked once the window's size (--max-len) is known
    (["--windows", "--window-stride", "500", "--max-len", "64"],
     "attnclf: error: --window-stride 500 is longer than the window (--max-len 64): text between windows would be "
     "skipped"),
    (["--threads", "0"], "attnclf: error: --threads must be at least 1, got 0"),
])
def test_settings_out_of_range_are_refused_before_anything_is_written(csv_files, tmp_path, capsys, flags, message):
    err = run_error(["train", "--train-file", str(csv_files[0]), *flags, "--output", str(tmp_path / "o")], capsys)
    assert message in err
    assert not (tmp_path / "o").exists()


def test_a_vocabulary_cap_beyond_the_memory_trains_when_the_words_fit(csv_files, tmp_path):
    # --vocab-size caps the vocabulary (10**9: keep every word); these texts hold a few dozen. Sized by the cap, the
    # model needed 2 TB and was refused; the one trained needs kilobytes.
    output = tmp_path / "o"
    assert main(["train", "--train-file", str(csv_files[0]), "--vocab-size", "1000000000", "--model", "boe",
                 "--epochs", "1", "--output", str(output), "--quiet"]) == 0
    assert json.loads((output / "config.json").read_text())["model"]["config"]["vocab_size"] < 100


def test_a_vocabulary_too_large_to_train_is_refused_once_counted_and_leaves_no_folder(tmp_path, capsys,
                                                                                        monkeypatch):
    from attnclf.models import memory

    # 200,000 distinct words, 180,000 in the nine tenths left after validation: at width 128, 92 MB of embedding and
    # four times that to train, on a pretend 200 MB machine.
    monkeypatch.setattr(memory, "machine_memory", lambda: 200 * 10 ** 6)
    path = write_csv(tmp_path / "words.csv", [(" ".join(f"w{i}x{j}" for j in range(1000)), ("pos", "neg")[i % 2])
                                              for i in range(200)])
    err = run_error(["train", "--train-file", str(path), "--vocab-size", "1000000", "--min-frequency", "1",
                     "--model", "boe", "--output", str(tmp_path / "o")], capsys)
    assert err == ("attnclf: error: model 'boe' with vocab_size 180,002 needs at least 0.4 GB for its weights, "
                   "gradients and optimiser state, more than this machine's 0.2 GB; lower vocab_size (--vocab-size)")
    assert not (tmp_path / "o").exists()


def test_texts_with_no_word_to_learn_are_refused_before_training(tmp_path, capsys):
    path = write_csv(tmp_path / "two.csv", [("alpha beta", "pos"), ("gamma delta", "neg")])
    err = run_error(["train", "--train-file", str(path), "--output", str(tmp_path / "o")], capsys)
    assert "no word seen at least 2 time(s)" in err and "--min-frequency" in err
    assert not (tmp_path / "o").exists()


def test_a_list_label_without_multi_label_and_one_column_for_both_are_refused(tmp_path, capsys):
    path = tmp_path / "lists.jsonl"
    path.write_text('{"text": "good film", "label": ["a", "b"]}\n{"text": "bad film", "label": "c"}\n')
    err = run_error(["train", "--train-file", str(path), "--output", str(tmp_path / "o")], capsys)
    assert f"{path}, line 1: label ['a', 'b'] in column 'label' is a list" in err and "trained with --multi-label" in err
    err = run_error(["train", "--train-file", str(path), "--label-column", "text", "--output", str(tmp_path / "o")],
                    capsys)
    assert "the text and the labels cannot both come from column 'text'" in err


def test_faithfulness_refuses_steps_before_measuring(csv_run, capsys):
    err = run_error(["faithfulness", str(csv_run), "--methods", "grad-input", "--steps", "0"], capsys)
    assert "steps applies to none of the methods measured (grad-input)" in err
    err = run_error(["faithfulness", str(csv_run), "--steps", "0"], capsys)
    assert "integrated gradients needs steps from 1 to 1024 or 'auto', got 0" in err
    # The note on the methods left out comes with results only: before an error it made the error two lines.
    for argv in (["faithfulness", str(csv_run), "--methods", "all", "--steps", "0"],
                 ["explain", str(csv_run), "a dull story", "--method", "all", "--steps", "0"]):
        assert "integrated gradients needs steps from 1 to 1024 or 'auto', got 0" in run_error(argv, capsys)
    # (numpy's generator took --seed -1 to a traceback: checked as train checks its seed, named as train names it)
    err = run_error(["faithfulness", str(csv_run), "--seed", "-1"], capsys)
    assert err == "attnclf: error: --seed must be at least 0 and below 4294967296, got -1"


def test_explain_writes_into_new_folders_and_refuses_a_folder_or_zero_steps(csv_run, tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "why.html"
    assert main(["explain", str(csv_run), "a dull story", "--method", "occlusion", "--format", "html",
                 "--output", str(out)]) == 0
    assert "<html" in out.read_text()
    err = run_error(["explain", str(csv_run), "a dull story", "--method", "occlusion", "--output", str(tmp_path)],
                    capsys)
    assert f"{tmp_path} is a folder; give --output a file name" in err
    err = run_error(["explain", str(csv_run), "a dull story", "--method", "integrated-gradients", "--steps", "0"],
                    capsys)
    assert "integrated gradients needs steps from 1 to 1024 or 'auto', got 0" in err


def test_explain_target_is_a_class_name_and_its_error_offers_names_only(csv_run, capsys):
    # --target takes a name; an index in its error ("or an index from 0 to 1") sent the user to --target 0 again.
    assert main(["explain", str(csv_run), "a dull story", "--method", "occlusion", "--target", "pos",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["target"] == "pos"
    err = run_error(["explain", str(csv_run), "a dull story", "--method", "occlusion", "--target", "0"], capsys)
    assert err == "attnclf: error: unknown target class '0'; the classes are 'neg', 'pos'"


@pytest.mark.parametrize("command", ["predict", "explain"])
def test_a_closed_stdin_or_stdout_is_one_line_not_a_traceback(csv_run, capsys, monkeypatch, command):
    # `attnclf predict RUN <&-` and `>&-`: Python sets a closed stream to None. A closed stdin was an AttributeError's
    # traceback; into a closed stdout predict's answers vanished with status 0, and explain raised an AttributeError.
    monkeypatch.setattr(sys, "stdin", None)
    assert "no texts: give them as arguments" in run_error([command, str(csv_run)], capsys)
    assert run_error([command, str(csv_run), "--file", "-"], capsys) == \
        "attnclf: error: --file -: stdin is closed; give the texts as arguments or with --file PATH"
    monkeypatch.setattr(sys, "stdout", None)
    assert run_error([command, str(csv_run), "a wonderful story"], capsys) == \
        f"attnclf: error: stdout is closed: `attnclf {command}` prints there; redirect it to a file (or /dev/null)"


def test_predict_into_a_pipe_closed_early_ends_quietly(csv_run, tmp_path):
    texts = tmp_path / "many.txt"
    texts.write_text("a wonderful story\n" * 5000)  # (words the run knows: no note of unknown ones on stderr)
    process = subprocess.Popen([sys.executable, "-m", "attnclf", "predict", str(csv_run), "--file", str(texts),
                                "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = process.stdout.readline()  # like `| head -1`: read one line, then hang up
    process.stdout.close()
    _, err = process.communicate(timeout=120)
    assert json.loads(first)["label"] == "pos"
    assert process.returncode == 141 and err == b""


def test_running_out_of_memory_is_one_line_saying_what_to_lower(csv_run, tmp_path, capsys, monkeypatch):
    from attnclf.explain import explanation
    from attnclf.training import run

    def no_memory(*args, **kwargs):  # numpy's MemoryError, as an explanation of a huge batch of texts may raise
        raise MemoryError("Unable to allocate 74.5 GiB for an array with shape (100000, 100000) and data type float64")

    monkeypatch.setattr(explanation, "attribute", no_memory)
    assert run_error(["explain", str(csv_run), "good", "--method", "integrated-gradients", "--steps", "64"],
                     capsys) == "attnclf: error: out of memory; lower --steps"

    def too_large(*args, **kwargs):  # torch's CPU allocator, as --max-len 100000000 makes it fail
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
                           "you tried to allocate 51200000000 bytes. Error code 12 (Cannot allocate memory)")

    monkeypatch.setattr(run, "build_model", too_large)  # (synthetic: the demo's data is warned of first)
    assert run_error(["train", "--dataset", "synthetic", "--epochs", "1", "--output", str(tmp_path / "r"), "--quiet",
                      "--no-report"], capsys) == ("attnclf: error: out of memory (asked for 51.2 GB); lower --max-len, "
                                                  "--batch-size, the model's size (--set)")

    def broken(*args, **kwargs):  # any other RuntimeError is a bug to see whole, not a message to hide
        raise RuntimeError("shape mismatch in a layer")

    monkeypatch.setattr(run, "build_model", broken)
    with pytest.raises(RuntimeError, match="shape mismatch in a layer"):
        main(["train", "--dataset", "demo", "--epochs", "1", "--output", str(tmp_path / "r"), "--quiet"])


def test_a_file_that_cannot_be_written_is_one_line_naming_it(csv_run, tmp_path, capsys, monkeypatch):
    import errno

    from attnclf import report

    # As a folder made read-only (or a disk filled) while the command ran: no traceback.
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(csv_run / "plots" / ".training.png.tmp"))

    monkeypatch.setattr(report, "write_report", read_only)
    assert run_error(["report", str(csv_run)], capsys) == (
        f"attnclf: error: {csv_run / 'plots' / '.training.png.tmp'}: Read-only file system")
    assert run_error(["vectors", "--file", str(tmp_path), "-o", str(tmp_path)], capsys) == (
        f"attnclf: error: {tmp_path} is a folder; give --output a file name")


def test_training_into_a_folder_with_a_model_needs_overwrite_and_one_kind_of_run(csv_files, tmp_path, capsys):
    argv = ["train", "--train-file", str(csv_files[0]), "--test-file", str(csv_files[1]), "--model", "boe",
            "--epochs", "1", "--min-frequency", "1", "--no-report", "--threads", "1", "--output"]
    run = tmp_path / "run"
    assert main(argv + [str(run)]) == 0
    assert "replaces it" not in capsys.readouterr().err
    weights = (run / "model.safetensors").read_bytes()
    # A repeated command must not delete the finished run (an interrupted retrain would leave neither).
    assert run_error(argv + [str(run)], capsys) == (
        f"attnclf: error: {run} holds a trained model; add --overwrite to replace it, or give another --output")
    assert (run / "model.safetensors").read_bytes() == weights
    assert main(argv + [str(run), "--overwrite"]) == 0
    assert f"{run} held a trained model; this run replaces it" in capsys.readouterr().err
    (run / "metrics.json").unlink()  # as if interrupted after an epoch: weights, no test metrics yet
    assert run_error(argv + [str(run)], capsys) == (f"attnclf: error: {run} holds an unfinished run (--resume "
                                                    f"continues it); add --overwrite to replace it, or give another --output")
    # A single run and --seeds members in one folder would load as different models: refused either way.
    assert run_error(argv + [str(run), "--seeds", "0", "1"], capsys) == (
        f"attnclf: error: {run} holds a single run; train --seeds into another --output")
    assert main(argv + [str(tmp_path / "ens"), "--seeds", "0", "1", "--quiet"]) == 0
    capsys.readouterr()
    assert run_error(argv + [str(tmp_path / "ens"), "--overwrite"], capsys) == (
        f"attnclf: error: {tmp_path / 'ens'} holds a `train --seeds` ensemble; train a single run into another --output")
    assert run_error(argv + [str(tmp_path / "ens"), "--seeds", "0", "1"], capsys).endswith(
        "holds trained members (--resume keeps them and adds new seeds); add --overwrite to replace them, or give "
        "another --output")


def test_a_folder_another_process_is_writing_into_is_refused_by_the_commands_that_write_there(csv_files, tmp_path,
                                                                                               capsys, held_elsewhere):
    """A run being trained holds an unfinished run to the folder check, which advised --resume or --overwrite: either
    then wrote into it beside the training, as `train --seeds`, `refit` and `pretrain` did. Each is told who holds
    it."""
    train, test = csv_files
    run = tmp_path / "run"
    argv = ["train", "--train-file", str(train), "--test-file", str(test), "--model", "boe", "--epochs", "1",
            "--min-frequency", "1", "--quiet", "--no-report"]
    assert main([*argv, "--output", str(run)]) == 0
    shutil.copytree(run, tmp_path / "finished")
    assert main(["refit", str(tmp_path / "finished"), "--quiet", "--no-report"]) == 0
    capsys.readouterr()
    (run / "metrics.json").unlink()  # its checkpoint stays: as a run still training holds it
    texts = tmp_path / "texts.txt"
    texts.write_text("the plot was not good\nthe acting was brilliant\n" * 20)
    starting = tmp_path / "starting"  # (held by a run that has written nothing yet: no config.json to resume)
    for folder, command in ((run, [*argv, "--output", str(run)]), (run, ["train", "--resume", "--output", str(run)]),
                            (starting, ["train", "--resume", "--output", str(starting)]),
                            (run, [*argv, "--output", str(run), "--overwrite"]),
                            (tmp_path / "seeds", [*argv, "--seeds", "0", "1", "--output", str(tmp_path / "seeds")]),
                            (tmp_path / "finished-refit", ["refit", str(tmp_path / "finished")]),
                            (tmp_path / "pretrained", ["pretrain", "--file", str(texts), "--min-frequency", "1",
                                                       "--epochs", "1", "--output", str(tmp_path / "pretrained")])):
        before = sorted(path.name for path in folder.rglob("*")) if folder.exists() else []
        with held_elsewhere(folder) as pid:
            assert run_error(command, capsys) == (f"attnclf: error: {folder} is being written by another attnclf "
                                                  f"process (pid {pid}); wait for it to finish, or give another "
                                                  f"--output"), command
            assert sorted(path.name for path in folder.rglob("*") if path.name != ".attnclf.lock") == before
    assert main(["train", "--resume", "--output", str(run), "--quiet"]) == 0  # held no more


def test_an_interrupted_overwrite_keeps_the_model_it_replaces_until_the_new_one_finishes(tmp_path, capsys,
                                                                                           monkeypatch):
    run = tmp_path / "run"
    argv = ["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", "2", "--batch-size", "16",
            "--threads", "1", "--output", str(run), "--no-report"]
    assert main(argv + ["--quiet"]) == 0
    finished = {name: (run / name).read_bytes() for name in ("model.safetensors", "config.json", "metrics.json")}
    # Stopped half-way through setting the model aside, the next replacement first puts it back together.
    replace = os.replace

    def stopped_after_one_move(source, destination):
        if "earlier-model.partial" in str(destination) and any((run / "earlier-model.partial").iterdir()):
            raise KeyboardInterrupt
        replace(source, destination)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", stopped_after_one_move)
        assert main(argv + ["--overwrite", "--seed", "1", "--quiet"]) == 130
    assert (run / "earlier-model.partial").is_dir() and not (run / "earlier-model").exists()
    with monkeypatch.context() as patch:
        interrupt_in_epoch_2(patch)
        assert main(argv + ["--overwrite", "--seed", "1"]) == 130
    earlier = run / "earlier-model"
    assert not (run / "earlier-model.partial").exists()
    err = capsys.readouterr().err
    assert f"{run} held a trained model; this run replaces it (kept in {earlier} until this run finishes)" in err
    assert err.strip().endswith(f"continues after epoch 1 of 2, its last checkpoint; the model it replaces is kept in "
                                f"{earlier}")
    # The earlier model is whole where the message says, and still a run of its own; the folder holds the new one.
    assert {name: (earlier / name).read_bytes() for name in finished} == finished
    assert main(["evaluate", str(earlier)]) == 0
    assert json.loads((run / "config.json").read_text())["settings"]["train"]["seed"] == 1
    assert not (run / "metrics.json").exists()
    capsys.readouterr()
    # A replacement that fails says where the model it replaces is, as an interrupted one does (after the warnings
    # about the demo's data: its short texts repeat).
    assert main(argv + ["--overwrite", "--lr", "1e30", "--quiet"]) == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"train again with a lower one (--lr; lr= in Python); the model it replaces is kept in {earlier}")
    # Interrupted again, the kept model stays the finished one, not the unfinished replacement.
    with monkeypatch.context() as patch:
        interrupt_in_epoch_2(patch)
        assert main(argv + ["--overwrite", "--seed", "2", "--quiet"]) == 130
    assert (earlier / "model.safetensors").read_bytes() == finished["model.safetensors"]
    # Once the replacement finishes, the earlier model goes.
    assert main(["train", "--resume", "--output", str(run), "--quiet"]) == 0
    assert (run / "metrics.json").is_file() and not earlier.exists()


def test_a_run_whose_files_moved_resumes_from_where_they_are_now_if_they_hold_its_texts(csv_files, tmp_path,
                                                                                         capsys, monkeypatch):
    import shutil

    first, moved = tmp_path / "first", tmp_path / "moved"
    first.mkdir()
    for path in csv_files:
        shutil.copy(path, first / path.name)
    run = tmp_path / "run"
    flags = ["--model", "boe", "--epochs", "2", "--min-frequency", "1", "--threads", "1", "--output", str(run),
             "--quiet", "--no-report"]
    with monkeypatch.context() as patch:
        interrupt_in_epoch_2(patch)
        assert main(["train", "--train-file", str(first / "train.csv"), "--test-file", str(first / "test.csv"),
                     *flags]) == 130
    first.rename(moved)
    capsys.readouterr()
    assert "which is no longer there (moved or deleted since); to resume it, give the command that started it" in \
        run_error(["train", "--resume", "--output", str(run)], capsys)
    other = write_csv(tmp_path / "other.csv", [("a film", "pos"), ("a bore", "neg")] * 20)
    assert "no longer gives the texts this run trained on" in run_error(
        ["train", "--train-file", str(other), "--test-file", str(moved / "test.csv"), *flags, "--resume"], capsys)
    other_test = write_csv(tmp_path / "other-test.csv", [("a film", "pos"), ("a bore", "neg")])
    assert "no longer gives the test texts this run recorded" in run_error(
        ["train", "--train-file", str(moved / "train.csv"), "--test-file", str(other_test), *flags, "--resume"],
        capsys)
    assert main(["train", "--train-file", str(moved / "train.csv"), "--test-file", str(moved / "test.csv"), *flags,
                 "--resume"]) == 0
    assert json.loads((run / "config.json").read_text())["settings"]["data"]["train_file"] == str(moved / "train.csv")


def test_a_run_stopped_during_its_first_checkpoint_is_trained_again_by_its_own_command(tmp_path, capsys):
    """Its weights without checkpoint/state.json (written last) resume nothing: the messages say to train it again,
    and the same command does, without --overwrite."""
    run = tmp_path / "run"
    argv = tiny_demo_train(1, run)
    assert main(argv) == 0
    (run / "metrics.json").unlink()
    (run / "checkpoint" / "state.json").unlink()  # (a disk that filled, or Ctrl-C, as the first one was written)
    capsys.readouterr()
    assert main(["predict", str(run), "a fine film"]) == 0
    assert "it stopped during its first checkpoint: train it again" in capsys.readouterr().err
    assert main(argv) == 0 and (run / "metrics.json").is_file()


def test_a_model_an_interrupted_or_failed_overwrite_set_aside_is_not_deleted_by_a_train_without_overwrite(
        tmp_path, capsys, monkeypatch):
    """The folder's own weights are gone (set aside, or never written by the stopped replacement): the model kept in
    earlier-model/ (or earlier-model.partial/) still needs --overwrite, or the run that finishes deletes it."""
    from attnclf.training.trainer import Trainer

    run = tmp_path / "run"
    argv = ["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", "1", "--batch-size", "16",
            "--threads", "1", "--output", str(run), "--no-report", "--quiet"]
    assert main(argv) == 0
    weights = (run / "model.safetensors").read_bytes()
    with monkeypatch.context() as patch:  # stopped in its first epoch: no weights of its own yet
        patch.setattr(Trainer, "_train_epoch", lambda *args: (_ for _ in ()).throw(KeyboardInterrupt))
        assert main(argv + ["--overwrite"]) == 130
    assert not (run / "model.safetensors").exists() and (run / "earlier-model" / "model.safetensors").is_file()
    capsys.readouterr()
    assert run_error(argv, capsys).endswith("holds a trained model an interrupted --overwrite set aside; add "
                                            "--overwrite to replace it, or give another --output")
    assert (run / "earlier-model" / "model.safetensors").read_bytes() == weights
    # Setting it aside failed half-way (a subfolder that cannot move): the error says where it is.
    assert main(argv + ["--overwrite"]) == 0
    capsys.readouterr()  # (the warnings about the demo's data: its short texts repeat)
    weights = (run / "model.safetensors").read_bytes()
    (run / "plots").mkdir()
    replace = os.replace

    def refused(source, destination):
        if os.path.basename(source) == "plots":
            raise PermissionError(13, "Permission denied", str(source))
        replace(source, destination)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", refused)
        assert run_error(argv + ["--overwrite"], capsys).endswith(
            f"Permission denied; the model it replaces is kept in {run / 'earlier-model.partial'}")
    assert (run / "earlier-model.partial" / "model.safetensors").read_bytes() == weights
    assert run_error(argv, capsys).endswith("holds a trained model an interrupted --overwrite set aside; add "
                                            "--overwrite to replace it, or give another --output")


def test_options_may_come_between_the_run_and_its_texts_and_each_text_gets_its_answer(csv_run, capsys):
    assert main(["predict", str(csv_run), "--attention", "a wonderful story", " ", "--threads", "1",
                 "a dull story"]) == 0
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    # A blank text among others is answered too (as a file's empty row is): one line per text given, in order.
    assert [r["text"] for r in records] == ["a wonderful story", " ", "a dull story"] and "attention" in records[0]
    # Only blank texts given: an error, not a read of stdin (which belongs to whatever runs this in a loop).
    assert "every text given is blank" in run_error(["predict", str(csv_run), ""], capsys)
    assert main(["predict", str(csv_run), "--attention", "-5 stars, awful"]) == 0  # a text, not an option
    assert json.loads(capsys.readouterr().out)["text"] == "-5 stars, awful"
    with pytest.raises(SystemExit) as stop:  # argparse's own exit, as for any flag it does not know
        main(["predict", str(csv_run), "a story", "--no-such-flag"])
    assert stop.value.code == 2 and "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["train", "--dataset", "demo", "--text-colum", "review"],
     "attnclf train: error: unrecognized arguments: --text-colum review (did you mean --text-column?); "
     "see `attnclf train --help`"),
    # (the one option it is a prefix of, where difflib would have named --set)
    (["train", "--dataset", "demo", "--text", "review"],
     "attnclf train: error: unrecognized arguments: --text review (did you mean --text-column?); "
     "see `attnclf train --help`"),
    (["train", "--dataset", "demo", "--overw"],
     "attnclf train: error: unrecognized arguments: --overw (did you mean --overwrite?); see `attnclf train --help`"),
    # (was --text-column, refused as a column of no --file, for a user who meant a text)
    (["predict", "RUN", "--text", "a story"],
     "attnclf predict: error: unrecognized arguments: --text a story (texts are arguments: attnclf predict RUN_DIR "
     "\"a text\"); see `attnclf predict --help`"),
    (["explain", "RUN", "--texts=story"],
     "attnclf explain: error: unrecognized arguments: --texts=story (texts are arguments: attnclf explain RUN_DIR "
     "\"a text\"); see `attnclf explain --help`"),
    (["serve", "RUN", "--po", "8001"],
     "attnclf serve: error: unrecognized arguments: --po 8001 (did you mean --port?); see `attnclf serve --help`"),
    # A text that starts with "-", and the `--` before it that Python 3.11's argparse refuses after an option
    (["predict", "RUN", "-great"],
     "attnclf predict: error: unrecognized arguments: -great (a text that starts with \"-\" goes after --, every "
     "option before RUN_DIR: attnclf predict --threads 1 RUN_DIR -- \"-a text\"); see `attnclf predict --help`"),
    (["explain", "RUN", "--threads", "1", "--", "-great"]
     if sys.version_info < (3, 12) else ["explain", "RUN", "-great"],
     "attnclf explain: error: unrecognized arguments: " + ("-- " if sys.version_info < (3, 12) else "")
     + "-great (a text that starts with \"-\" goes after --, every option before RUN_DIR: attnclf explain --threads 1 "
     "RUN_DIR -- \"-a text\"); see `attnclf explain --help`"),
    (["predict", "RUN", "--no-such-flag"],  # (a mistyped flag, not a text)
     "attnclf predict: error: unrecognized arguments: --no-such-flag; see `attnclf predict --help`"),
])
def test_a_prefix_of_an_option_is_refused_not_read_as_it(argv, message, capsys):
    # A mistyped flag named as a mistake rather than guessed at; one a prefix names today would name another, or be
    # ambiguous, once an option is added.
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2 and capsys.readouterr().err == message + "\n"


@pytest.mark.parametrize("argv, message", [
    # was "argument COMMAND: invalid choice: '1'"
    (["--threads", "1", "predict", "runs/a b", "a text"],
     "attnclf: error: --threads is an option of the command: give it after 'predict', "
     "`attnclf predict --threads 1 'runs/a b' 'a text'`; see `attnclf --help`"),
    # was "unrecognized arguments: --quiet (did you mean --quiet?)"
    (["--quiet", "demo"], "attnclf: error: --quiet is an option of the command: give it after 'demo', "
                          "`attnclf demo --quiet`; see `attnclf --help`"),
    # was "the following arguments are required: COMMAND"
    # (the command is "train", "demo" the value of --output)
    (["--output", "demo", "train", "--dataset", "demo"],
     "attnclf: error: --output is an option of the command: give it after 'train', "
     "`attnclf train --output demo --dataset demo`; see `attnclf --help`"),
    # (the command is "train" again, though models, whose name is --dataset's value, has no --dataset: was
    # "unrecognized arguments: --dataset")
    (["--dataset", "models", "train"], "attnclf: error: --dataset is an option of the command: give it after 'train', "
                                       "`attnclf train --dataset models`; see `attnclf --help`"),
    # (no command at all: was "unrecognized arguments: --threads", an option every command knows)
    (["--threads", "1"], "attnclf: error: --threads is an option of a command, and none is given: "
                         "`attnclf COMMAND --threads ...`; see `attnclf --help`"),
    (["--verison"], "attnclf: error: unrecognized arguments: --verison (did you mean --version?); see `attnclf --help`"),
    (["--bogus", "predict", "RUN"], "attnclf: error: unrecognized arguments: --bogus; see `attnclf --help`"),
])
def test_an_option_before_the_command_is_named_with_where_it_goes(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2 and capsys.readouterr().err == message + "\n"


def test_attnclf_alone_lists_the_commands_on_stderr(capsys):
    # It said only "the following arguments are required: COMMAND".
    with pytest.raises(SystemExit) as stop:
        main([])
    told = capsys.readouterr()
    assert stop.value.code == 2 and told.out == ""
    assert all(name in told.err for name in ("predict", "explain", "serve", "Start with `attnclf demo`"))


@pytest.mark.parametrize("command", ["predict", "explain"])
def test_a_text_argument_not_in_utf8_is_named_by_its_place_and_byte(csv_run, capsys, command):
    # Python reads an argument's byte 0xe9 (a Latin-1 terminal's é) as U+DCE9: the message was
    # "text 0 is not valid Unicode: a lone surrogate (U+DCE9) at character 1", numbered from 0.
    assert main([command, str(csv_run), "fine", "x\udce9"]) == 2
    assert capsys.readouterr().err == "attnclf: error: text argument 2: not UTF-8 (byte 0xe9); pass texts as UTF-8\n"


@pytest.mark.parametrize("command", ["evaluate", "faithfulness"])
def test_a_dataset_and_a_test_file_to_score_are_refused_together(csv_run, csv_files, capsys, command):
    # evaluate scored the --test-file and left --dataset unread, silently: one of them was not what was meant.
    assert main([command, str(csv_run), "--dataset", "demo", "--test-file", str(csv_files[1])]) == 2
    assert capsys.readouterr().err == ("attnclf: error: --dataset and --test-file each name the texts to score; "
                                       "give one\n")


def test_predict_with_a_text_column_and_no_data_file_says_texts_are_arguments(csv_run, capsys):
    assert main(["predict", str(csv_run), "--text-column", "a story"]) == 2
    assert capsys.readouterr().err == (
        "attnclf: error: --text-column picks the column of a CSV / TSV / JSONL / Parquet --file; texts are arguments: "
        "attnclf predict RUN_DIR \"a text\"\n")


@pytest.mark.parametrize("argv, message", [
    (["train", "--dataset", "demo", "--lr", "abc"],
     "attnclf train: error: argument --lr: invalid float value: 'abc'; see `attnclf train --help`"),
    (["train", "--modle", "boe"],
     "attnclf train: error: unrecognized arguments: --modle boe (did you mean --model?); see `attnclf train --help`"),
    (["evaluate", "runs/x", "--split=valid"], "argument --split: invalid choice: 'valid'"),
    (["predict", "runs/x", "--no-such-flag"], "unrecognized arguments: --no-such-flag; see `attnclf predict --help`"),
    (["trian"], "attnclf: error: argument COMMAND: invalid choice: 'trian'"),
    # A mistyped command or choice gets the hint a mistyped option gets (the list alone named seventeen commands)
    (["trian", "--dataset", "demo"], "(did you mean train?); see `attnclf --help`"),
    (["explain", "runs/x", "--format", "jsn"], "(did you mean json?); see `attnclf explain --help`"),
    # Texts may come from --file or stdin instead: only the run is required (argparse named the texts too)
    (["predict"], "attnclf predict: error: the following arguments are required: RUN_DIR; see"),
    (["explain"], "attnclf explain: error: the following arguments are required: RUN_DIR; see"),
])
def test_a_mistyped_flag_is_one_line_naming_the_command_not_the_usage_text(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and message in err and len(err.splitlines()) == 1


def test_method_all_says_which_methods_the_model_lacks_and_why(csv_files, csv_run, demo_run, tmp_path, capsys):
    # `explain RUN --method all` on a mean-pooled model gave four methods of five, and nothing said attention was gone.
    train, _ = csv_files
    mean = tmp_path / "mean"
    assert main(["train", "--train-file", str(train), "--model", "transformer-mean", "--set", "d_model=16",
                 "--set", "layers=1", "--epochs", "1", "--min-frequency", "1", "--output", str(mean), "--quiet",
                 "--no-report", "--threads", "1"]) == 0
    capsys.readouterr()
    assert main(["explain", str(mean), "a dull story", "--method", "all", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["method"] for line in out.splitlines()] == [
        "rollout", "grad-input", "integrated-gradients", "occlusion"]
    assert err == "note: --method all leaves out attention (this model does not pool by attention)\n"
    assert main(["faithfulness", str(csv_run), "--methods", "all", "--examples", "4", "--json"]) == 0
    assert capsys.readouterr().err == ("note: --methods all leaves out attention (this model does not pool by "
                                       "attention) and rollout (it has no self-attention layers)\n")
    # Without --methods it measures the same methods, and said nothing of the two it left out.
    assert main(["faithfulness", str(csv_run), "--examples", "4", "--json"]) == 0
    assert capsys.readouterr().err == ("note: the default (every method this model supports, as --methods all) leaves "
                                       "out attention (this model does not pool by attention) and rollout (it has no "
                                       "self-attention layers)\n")
    # The report's faithfulness section, showing what was saved, says so too (a copy: report writes into the run).
    reported = tmp_path / "reported"
    shutil.copytree(csv_run, reported)
    assert main(["report", str(reported)]) == 0
    assert ("<p>Left out for this model: attention (this model does not pool by attention) and rollout (it has no "
            "self-attention layers).</p>") in (reported / "report.html").read_text(encoding="utf-8")
    assert main(["faithfulness", str(csv_run), "--methods", "occlusion", "--examples", "4", "--json"]) == 0
    assert capsys.readouterr().err == ""  # methods named are what was asked for
    demo = tmp_path / "demo"  # (a copy: faithfulness saves its result in the run, which the report then shows)
    shutil.copytree(demo_run, demo)
    for methods in ([], ["--methods", "all"]):  # of several runs, the note names the one it is about
        assert main(["faithfulness", str(demo), str(csv_run), *methods, "--examples", "4", "--json"]) == 0
        assert capsys.readouterr().err.startswith(f"note: {csv_run}: {methods and '--methods all' or 'the default'}")
    assert main(["explain", str(demo_run), "a dull story", "--method", "all", "--format", "json"]) == 0
    assert capsys.readouterr().err == ""  # self-attn has them all
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    assert "or all (every method the model supports: attention needs attention pooling, rollout self-attention " \
           "layers" in " ".join(capsys.readouterr().out.split())


def test_models_without_pooling_attention_or_layers_explain_by_default(csv_files, tmp_path, capsys):
    train, test = csv_files
    flat = tmp_path / "flat"  # self-attention with no self-attention layers: pooling only
    assert main(["train", "--train-file", str(train), "--test-file", str(test), "--set", "layers=0", "--set",
                 "d_model=16", "--epochs", "1", "--min-frequency", "1", "--output", str(flat), "--quiet",
                 "--threads", "1"]) == 0
    assert (flat / "report.html").is_file()
    capsys.readouterr()  # (the file's repeated texts are warned about)
    err = run_error(["explain", str(flat), "a dull story", "--heads"], capsys)
    assert "this model has no self-attention layers" in err
    assert main(["explain", str(flat), "a dull story", "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["method"] == "occlusion" and len(record["pooling_attention"]["weights"]) == 3  # it pools by attention
    boe = tmp_path / "boe"
    assert main(["train", "--train-file", str(train), "--model", "boe", "--epochs", "1", "--min-frequency", "1",
                 "--output", str(boe), "--quiet", "--no-report", "--threads", "1"]) == 0
    capsys.readouterr()
    assert main(["explain", str(boe), "a dull story", "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["method"] == "occlusion" and "pooling_attention" not in record  # boe pools without attention
    from fastapi.testclient import TestClient

    from attnclf.classifier import Classifier
    from attnclf.serve.app import create_app

    with TestClient(create_app(Classifier.load(boe, device="cpu"))) as client:  # and /model tells a client so
        info = client.get("/model").json()
        assert info["explain_default"] == "occlusion" and info["explain_pooling_attention"] is False
        # and /docs said "Attention-based text classifier. Attention weights show where the pooling layer looked ...,
        # with those weights beside": of a bag of embeddings with no attention at all.
        about = client.get("/openapi.json").json()["info"]["description"]
        assert "ttention" not in about and about.startswith("Text classifier (boe): /explain scores tokens by occlusion")


def test_none_is_a_positional_encoding_and_pad_id_is_not_settable(csv_files, tmp_path, capsys):
    argv = ["train", "--train-file", str(csv_files[0]), "--model", "pos-mean", "--epochs", "1", "--min-frequency",
            "1", "--output", str(tmp_path / "run"), "--quiet", "--no-report", "--threads", "1"]
    assert main([*argv, "--set", "positional=none"]) == 0
    capsys.readouterr()  # (the file's repeated texts are warned about)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["model"]["config"]["positional"] == "none"
    assert "no settable field 'pad_id'" in run_error([*argv, "--set", "pad_id=5"], capsys)


def test_missing_training_file(tmp_path, capsys):
    err = run_error(["train", "--train-file", str(tmp_path / "nope.csv"), "--output", str(tmp_path / "o")], capsys)
    assert "nope.csv" in err


def test_wrong_column_names_the_columns_that_exist(csv_files, tmp_path, capsys):
    err = run_error(["train", "--train-file", str(csv_files[0]), "--text-column", "review",
                     "--output", str(tmp_path / "o")], capsys)
    assert "'review'" in err and "'text'" in err and "'label'" in err


def test_only_one_class(tmp_path, capsys):
    path = write_csv(tmp_path / "one.csv", [(t, "pos") for t in POSITIVE])
    err = run_error(["train", "--train-file", str(path), "--output", str(tmp_path / "o")], capsys)
    assert "one class" in err
    assert not (tmp_path / "o").exists()  # a run that never started leaves no folder behind
    run_error(["train", "--train-file", str(path), "--output", str(tmp_path / "new" / "deeper" / "o")], capsys)
    assert not (tmp_path / "new").exists()  # nor the parents it made
    run_error(["train", "--train-file", str(path), "--test-file", str(path), "--seeds", "0", "1", "--output",
               str(tmp_path / "new" / "seeds"), "--quiet"], capsys)
    assert not (tmp_path / "new").exists()  # nor does an ensemble whose first member failed
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("kept")
    run_error(["train", "--train-file", str(path), "--output", str(tmp_path / "mine")], capsys)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "kept"  # a folder it did not create stays
    # ...even reached through a folder that did not exist: new/.. is tmp_path, so new/../mine is the same folder
    run_error(["train", "--train-file", str(path), "--output", str(tmp_path / "new" / ".." / "mine")], capsys)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "kept"


def test_empty_text_names_the_line(tmp_path, capsys):
    path = write_csv(tmp_path / "empty.csv", [("good", "pos"), ("", "neg")])
    err = run_error(["train", "--train-file", str(path), "--output", str(tmp_path / "o")], capsys)
    assert "line 3" in err and "empty" in err


def test_non_utf8_text_names_line_and_byte(tmp_path, capsys):
    path = tmp_path / "latin1.csv"
    path.write_bytes(b"text,label\ngood,pos\ncaf\xe9 bad,neg\n")
    err = run_error(["train", "--train-file", str(path), "--output", str(tmp_path / "o")], capsys)
    assert "line 3" in err and "0xe9" in err


def test_unknown_label_at_evaluation(csv_run, tmp_path, capsys):
    path = write_csv(tmp_path / "test.csv", [("good", "pos"), ("meh", "neutral")])
    err = run_error(["evaluate", str(csv_run), "--test-file", str(path)], capsys)
    assert "neutral" in err and "line 3" in err


def test_incomplete_run_directory(csv_run, tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "labels.json", "tokenizer.json"):
        (broken / name).write_bytes((csv_run / name).read_bytes())
    err = run_error(["predict", str(broken), "text"], capsys)
    assert "model.safetensors" in err


def test_a_folder_of_runs_is_told_to_name_them_not_that_it_is_incomplete(csv_run, tmp_path, capsys):
    runs = tmp_path / "runs"
    shutil.copytree(csv_run, runs / "csv")
    shutil.copytree(csv_run, runs / "again")
    (runs / "notes").mkdir()
    # (no "or several for their ensemble": predict takes one run and would read a second as a text to label, as
    # explain, serve, export and report take one; evaluate alone averages several)
    for command in (["predict", str(runs), "text"], ["explain", str(runs), "text"], ["export", str(runs)]):
        assert run_error(command, capsys) == (f"attnclf: error: {runs} is not a run directory but holds 2 runs "
                                              f"('again', 'csv'): give one of them instead, such as {runs / 'again'}")
    shutil.rmtree(runs / "again")
    assert run_error(["predict", str(runs), "text"], capsys) == (
        f"attnclf: error: {runs} is not a run directory but holds one ('csv'): give {runs / 'csv'} instead")


def test_a_folder_of_runs_names_each_run_whole(tmp_path):
    # Runs named alike but for their ends are told apart: the user gives one of them by the name the message writes.
    from attnclf.errors import RunDirError
    from attnclf.rundir import check_run_dir

    names = [f"self-attn-imdb-windows-d128-layers4-lr1e-3-seed{seed}" for seed in (0, 1)]
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    with pytest.raises(RunDirError, match=re.escape(f"holds 2 runs ('{names[0]}', '{names[1]}')")):
        check_run_dir(tmp_path)


def test_a_folder_of_runs_beside_one_that_cannot_be_read_still_names_the_runs(csv_run, tmp_path, capsys,
                                                                              monkeypatch):
    runs = tmp_path / "runs"
    shutil.copytree(csv_run, runs / "csv")
    (runs / "locked").mkdir()
    real_stat = os.stat

    def stat(path, *args, **kwargs):  # what a folder without search permission answers (root is never refused)
        if Path(path).parent == runs / "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    assert run_error(["predict", str(runs), "text"], capsys) == (
        f"attnclf: error: {runs} is not a run directory but holds one ('csv'): give {runs / 'csv'} instead")


def test_a_run_being_trained_again_is_not_taken_for_a_folder_of_runs(csv_run, tmp_path, capsys):
    # `train --overwrite` sets the finished model aside in earlier-model/ before the new run writes its config.json,
    # and deletes it when the new run finishes: no folder to send anyone to.
    run = tmp_path / "run"
    shutil.copytree(csv_run, run / "earlier-model")
    err = run_error(["predict", str(run), "text"], capsys)
    assert err.startswith(f"attnclf: error: run directory {run} is incomplete: missing config.json"), err


def test_a_folder_with_nothing_of_a_run_is_not_called_an_incomplete_run(csv_run, tmp_path, capsys):
    # (a newcomer's `attnclf predict /tmp/notes "x"` read "run directory /tmp/notes is incomplete: missing ...")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("x")
    assert run_error(["predict", str(notes), "text"], capsys) == (
        f"attnclf: error: {notes} is not a run directory: it holds none of a run's files (config.json, "
        f"model.safetensors, tokenizer.json, labels.json)")
    partial = tmp_path / "partial"  # (one of them: a run that lost files, incomplete as before)
    partial.mkdir()
    shutil.copy(csv_run / "config.json", partial / "config.json")
    assert run_error(["predict", str(partial), "text"], capsys).startswith(
        f"attnclf: error: run directory {partial} is incomplete: missing model.safetensors")


def test_run_directory_from_an_incompatible_version(csv_run, tmp_path, capsys):
    future = tmp_path / "future"
    future.mkdir()
    for path in csv_run.iterdir():
        if path.is_file():
            (future / path.name).write_bytes(path.read_bytes())
    config = json.loads((future / "config.json").read_text())
    config["format_version"] = 99
    (future / "config.json").write_text(json.dumps(config))
    err = run_error(["predict", str(future), "text"], capsys)
    assert "format_version 99" in err


def test_corrupt_weights(csv_run, tmp_path, capsys):
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    for path in csv_run.iterdir():
        if path.is_file():
            (corrupt / path.name).write_bytes(path.read_bytes())
    (corrupt / "model.safetensors").write_bytes(b"not safetensors")
    err = run_error(["predict", str(corrupt), "text"], capsys)
    assert "model.safetensors" in err


def _copy_run(run, to):
    to.mkdir()
    for path in run.iterdir():
        if path.is_file():
            (to / path.name).write_bytes(path.read_bytes())
    return to


@pytest.mark.parametrize("damage, message", [
    (lambda config: [], "config.json: expected a JSON object, got list"),
    (lambda config: {k: v for k, v in config.items() if k != "model"}, "config.json: model.name is missing or not a "
                                                                        "JSON string (was the file edited?)"),
    (lambda config: {**config, "model": "self-attn"}, "config.json: model.name is missing"),
    (lambda config: {**config, "settings": {**config["settings"], "tokenizer": None}},
     "config.json: settings.tokenizer is missing or not a JSON object"),
])
def test_a_config_json_of_the_wrong_shape_is_one_line_for_every_command(csv_run, tmp_path, capsys, damage, message):
    edited = _copy_run(csv_run, tmp_path / "edited")
    (edited / "config.json").write_text(json.dumps(damage(json.loads((csv_run / "config.json").read_text()))))
    for argv in (["predict", str(edited), "text"], ["evaluate", str(edited)], ["report", str(edited)],
                 ["train", "--resume", "--output", str(edited)], ["refit", str(edited)]):
        assert message in run_error(argv, capsys), argv


def test_weights_of_another_shape_name_the_first_tensor_that_differs(csv_run, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    other = _copy_run(csv_run, tmp_path / "other")
    weights = load_file(str(other / "model.safetensors"))
    name = next(iter(weights))
    shape = tuple(weights[name].shape)
    save_file({**weights, name: torch.zeros(shape[0] + 1, *shape[1:])}, str(other / "model.safetensors"))
    err = run_error(["predict", str(other), "text"], capsys)
    assert err.endswith(f"does not match config.json: {name} is ({', '.join(map(str, (shape[0] + 1, *shape[1:])))}) "
                        f"in the file, ({', '.join(map(str, shape))}) in the model")


def test_a_run_whose_files_do_not_belong_together_is_refused_in_one_line(csv_run, tmp_path, capsys):
    """Files a model cannot use right load no more: NaN weights, another run's tokenizer, labels that are not
    distinct names, window settings of another shape."""
    from safetensors.torch import load_file, save_file

    from attnclf import Classifier
    from attnclf.text.tokenizer import Tokenizer, TokenizerConfig

    nan = _copy_run(csv_run, tmp_path / "nan")
    weights = load_file(str(nan / "model.safetensors"))
    name = sorted(weights)[-1]
    save_file({**weights, name: torch.full_like(weights[name], float("nan"))}, str(nan / "model.safetensors"))
    assert run_error(["predict", str(nan), "text"], capsys).endswith(f"{name} holds NaN or infinite values")

    other = _copy_run(csv_run, tmp_path / "other-tokenizer")
    Tokenizer.train(["a b c d"] * 2, TokenizerConfig(vocab_size=100)).save(other / "tokenizer.json")
    words = Classifier.load(csv_run, device="cpu").model.config.vocab_size
    assert run_error(["predict", str(other), "text"], capsys).endswith(
        f"words and the model {words:,}: not this model's tokenizer")

    labels = json.loads((csv_run / "labels.json").read_text())
    for damaged in ([labels[0]] * len(labels), list(range(len(labels)))):
        edited = _copy_run(csv_run, tmp_path / f"labels-{damaged[0]}")
        (edited / "labels.json").write_text(json.dumps(damaged))
        assert run_error(["predict", str(edited), "text"], capsys).endswith(
            f"labels.json: expected {len(labels)} distinct label names")

    windows = _copy_run(csv_run, tmp_path / "windows")
    config = json.loads((csv_run / "config.json").read_text())
    config["settings"]["windows"] = {"colour": "blue"}
    (windows / "config.json").write_text(json.dumps(config))
    assert "config.json: settings.windows is not a window setting" in run_error(["predict", str(windows), "x"], capsys)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere; permission bits cannot be tested as root")
def test_unwritable_output_directory(csv_files, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    err = run_error(["train", "--train-file", str(csv_files[0]), "--output", str(locked / "run")], capsys)
    assert "not writable" in err


def test_an_output_folder_on_a_read_only_file_system_is_named_not_writable(csv_files, tmp_path, capsys, monkeypatch):
    # (root writes past permission bits, not past a read-only mount: where checking the folder's lock tried to create
    # its file, the error named the lock file, not the folder)
    import errno

    from attnclf.rundir import LOCK_FILE

    read_only, opened = tmp_path / "mounted read-only", os.open

    def refused(path, flags, *args, **kwargs):
        if Path(path).parent == read_only and flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return opened(path, flags, *args, **kwargs)

    read_only.mkdir()
    monkeypatch.setattr(os, "open", refused)
    assert run_error(["train", "--train-file", str(csv_files[0]), "--output", str(read_only)], capsys) == (
        f"attnclf: error: output directory {read_only} is not writable: Read-only file system")
    assert not (read_only / LOCK_FILE).exists()


def test_output_path_that_is_a_file(csv_files, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    err = run_error(["train", "--train-file", str(csv_files[0]), "--output", str(blocker / "run")], capsys)
    assert "not writable" in err
    assert run_error(["train", "--train-file", str(csv_files[0]), "--output", str(blocker)], capsys).endswith(
        f"output directory {blocker} is a file; give a folder")
    assert blocker.read_text() == "x"


def test_unknown_dataset_and_model(tmp_path, capsys):
    assert "unknown dataset 'nope'; choose one of demo, " in run_error(
        ["train", "--dataset", "nope", "--output", str(tmp_path / "o")], capsys)
    assert "unknown model 'nope'; choose one of boe, " in run_error(["train", "--dataset", "demo", "--model", "nope"],
                                                                    capsys)
    # A typo is told the name it is nearest, before the list
    assert "unknown dataset 'imbd' (did you mean 'imdb'?); choose one of " in run_error(
        ["train", "--dataset", "imbd", "--output", str(tmp_path / "o")], capsys)
    assert "unknown model 'self-atn' (did you mean 'self-attn'?); choose one of " in run_error(
        ["train", "--dataset", "demo", "--model", "self-atn"], capsys)


def test_bad_model_field(tmp_path, capsys):
    err = run_error(["train", "--dataset", "demo", "--set", "colour=blue", "--output", str(tmp_path / "o")], capsys)
    assert "colour" in err


def test_sigterm_stops_a_run_as_ctrl_c_does_and_says_how_to_resume(tmp_path, capsys, monkeypatch):
    import signal

    run = tmp_path / "run"
    argv = ["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", "2", "--output", str(run),
            "--quiet", "--no-report"]
    with monkeypatch.context() as patch:
        interrupt_in_epoch_2(patch)
        from attnclf.training.trainer import Trainer

        checkpointed = Trainer._train_epoch

        def terminated_in_epoch_2(self, batches, optimizer, schedule, loss_fn, current):
            if current == 2:
                os.kill(os.getpid(), signal.SIGTERM)  # as a scheduler or `docker stop` sends it
            return checkpointed(self, batches, optimizer, schedule, loss_fn, current)

        patch.setattr(Trainer, "_train_epoch", terminated_in_epoch_2)
        before = signal.getsignal(signal.SIGTERM)
        assert main(argv) == 143
        assert signal.getsignal(signal.SIGTERM) is before  # the caller's handler is back
    assert f"attnclf: terminated; `attnclf train --resume --output {run}` continues" in capsys.readouterr().err
    assert main(["train", "--resume", "--output", str(run), "--quiet"]) == 0


@pytest.fixture
def python_ctrl_c():
    """Python's own Ctrl-C handler for the test: a shell's background job (`pytest &`) starts with SIGINT ignored,
    which main rightly leaves alone."""
    import signal

    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, inherited)


def test_a_signal_at_start_up_stops_the_command_without_a_traceback(capsys, monkeypatch, python_ctrl_c):
    """A signal in a C extension's first import leaves it half-initialised; the error the import then raises (scipy's
    ImportError, numpy's AttributeError) is the signal's, not a bug to show as a traceback."""
    import signal

    from attnclf import cli

    def imports_when_terminated(args, error=AttributeError("partially initialized module 'numpy' has no attribute "
                                                             "'_core'"), sent=signal.SIGTERM):
        try:
            os.kill(os.getpid(), sent)
            time.sleep(5)  # (the handler runs at once, between bytecodes)
        except KeyboardInterrupt:
            pass  # (swallowed inside the import machinery)
        raise error

    monkeypatch.setitem(cli.COMMANDS, "datasets", imports_when_terminated)
    assert main(["datasets"]) == 143
    assert capsys.readouterr().err == "attnclf: terminated\n"
    # torch's, imported again after an interrupted import: a RuntimeError, which is also how it runs out of memory
    monkeypatch.setitem(cli.COMMANDS, "datasets", lambda args: imports_when_terminated(args, RuntimeError(
        "function '_has_torch_function' already has a docstring")))
    assert main(["datasets"]) == 143
    assert capsys.readouterr().err == "attnclf: terminated\n"
    # Ctrl-C, the same way (Python's own handler raised KeyboardInterrupt, but nothing remembered it)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # (what main replaces, and puts back)
    monkeypatch.setitem(cli.COMMANDS, "datasets", lambda args: imports_when_terminated(args, sent=signal.SIGINT))
    assert main(["datasets"]) == 130
    assert capsys.readouterr().err == "attnclf: interrupted\n"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    monkeypatch.setitem(cli.COMMANDS, "datasets", lambda args: {}["a bug"])  # no signal: a bug shows as one
    with pytest.raises(KeyError):
        main(["datasets"])

    def interrupts_a_main_inside_then_fails(args):  # a stop a main() inside reported is not this one's
        monkeypatch.setitem(cli.COMMANDS, "datasets", lambda args: imports_when_terminated(args, sent=signal.SIGINT))
        assert main(["datasets"]) == 130
        {}["a bug"]

    monkeypatch.setitem(cli.COMMANDS, "report", interrupts_a_main_inside_then_fails)
    with pytest.raises(KeyError):
        main(["report", "run"])
    assert capsys.readouterr().err == "attnclf: interrupted\n"  # (the inner one's, said once)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    def parser_built_when_terminated():  # (building the parser reads gettext's catalogues: a second at start-up)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)

    monkeypatch.setattr(cli, "build_parser", parser_built_when_terminated)
    assert main(["datasets"]) == 143
    assert capsys.readouterr().err == "attnclf: terminated\n"


@pytest.mark.parametrize("command", ["pretrain", "compare", "ablate"])
def test_an_interrupted_pretrain_or_experiment_says_the_same_command_again_continues_it(command, tmp_path, capsys,
                                                                                      monkeypatch):
    import shlex

    import attnclf.experiments
    import attnclf.training.pretrain

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(attnclf.training.pretrain, "pretrain_encoder", interrupted)
    monkeypatch.setattr(attnclf.experiments, command if command != "pretrain" else "compare", interrupted)
    texts = tmp_path / "my texts.txt"
    texts.write_text("the plot was not good\nthe acting was brilliant\n")
    argv = [command, *(["--file", str(texts)] if command == "pretrain" else ["--dataset", "demo", "--quick"]),
            "--output", str(tmp_path / "out")]
    assert main(argv) == 130
    said = capsys.readouterr().err.strip()
    again = shlex.join(["attnclf", *argv])  # (quoted: the file's name has a space)
    assert said == "attnclf: interrupted; " + (
        f"nothing was checkpointed yet (the first checkpoint comes 10 min into pretraining, or as the first epoch "
        f"ends): the same command again, `{again}`, starts it afresh" if command == "pretrain" else
        f"the same command again, `{again}`, keeps the finished cells and continues the others")


def test_an_interrupted_train_says_whether_it_can_resume(tmp_path, capsys, monkeypatch):
    from attnclf.training.trainer import Trainer

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    def interrupted_after_a_checkpoint(self, *args, **kwargs):
        (self.checkpoint_dir / "state.json").write_text("{}")  # as if this run had checkpointed (of no epoch known)
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)  # no --output: the run goes to runs/self-attn-demo here
    argv = ["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", "1", "--quiet", "--no-report"]
    stale = tmp_path / "runs" / "self-attn-demo" / "checkpoint"
    stale.mkdir(parents=True)
    (stale / "state.json").write_text("{}")  # an earlier run's: a fresh run must not offer to resume it
    monkeypatch.setattr(Trainer, "_train_epoch", interrupted)
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert err.strip().endswith("; nothing was checkpointed yet (the first checkpoint comes 10 min into training, or "
                                "as the first epoch ends 60 s in), so nothing is kept to resume from: train it again") \
        and "--resume" not in err
    assert not (stale / "state.json").exists()
    assert run_error([*argv, "--output", "runs/self-attn-demo", "--resume"], capsys) == (  # (it said: no state.json)
        "attnclf: error: runs/self-attn-demo: nothing to resume: it stopped before its first checkpoint (written every "
        "--checkpoint-minutes within an epoch, and as epochs end); train it again")
    monkeypatch.setattr(Trainer, "_train_epoch", interrupted_after_a_checkpoint)
    assert main(argv) == 130
    assert "`attnclf train --resume --output runs/self-attn-demo` continues from its last checkpoint" in \
        capsys.readouterr().err


def test_an_interrupted_train_says_which_epoch_a_resume_continues_after(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    argv = tiny_demo_train(3, run)
    with monkeypatch.context() as patch:
        interrupt_in_epoch_2(patch)
        assert main(argv) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (  # (after the demo data's warnings)
        f"attnclf: interrupted; `attnclf train --resume --output {run}` continues after epoch 1 of 3, "
        f"its last checkpoint")


def test_an_interrupted_seeds_train_says_how_far_each_member_got(tmp_path, capsys, monkeypatch):
    # It said the finished members are kept and the others continue, not which were finished nor from where.
    interrupt_in_epoch(monkeypatch, 3, seed=1)
    folder = tmp_path / "ens"
    argv = tiny_demo_train(3, folder, "--seeds", "0", "1", "2")
    assert main(argv) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (  # (after the demo data's warnings)
        f"attnclf: interrupted; `{shlex.join(['attnclf', *argv])} --resume` keeps the finished members and continues "
        f"the others (seed 0 finished; seed 1 after epoch 2 of 3; seed 2 not started)")


@pytest.mark.parametrize("stop, finished", [([], "all 2 epochs"),
                                            (["--epochs", "4", "--lr", "0", "--patience", "1", "--monitor", "loss"],
                                             "stopped early after epoch 2 of 4")])
def test_a_train_interrupted_while_testing_says_a_resume_only_tests_it(stop, finished, tmp_path, capsys, monkeypatch):
    import attnclf.training.run as run_module

    run = tmp_path / "run"
    argv = tiny_demo_train(2, run, *stop)
    monkeypatch.setattr(run_module, "evaluate_split", lambda *args, **kwargs: (_ for _ in ()).throw(KeyboardInterrupt))
    assert main(argv) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (  # (after the demo data's warnings)
        f"attnclf: interrupted; `attnclf train --resume --output {run}` tests it: its training had finished "
        f"({finished})")


@pytest.mark.parametrize("stop, finished", [([], "all 2 epochs"),
                                            (["--epochs", "4", "--lr", "0", "--patience", "1", "--monitor", "loss"],
                                             "stopped early after epoch 2 of 4")])
def test_resuming_a_finished_run_says_it_only_tests_it_again(stop, finished, tmp_path, capsys):
    run = tmp_path / "run"
    argv = tiny_demo_train(2, run, *stop)
    assert main(argv) == 0
    history = (run / "history.jsonl").read_text()
    capsys.readouterr()
    assert main(["train", "--resume", "--output", str(run), "--no-report"]) == 0
    out, err = capsys.readouterr()
    assert f"{run} finished training already ({finished}): nothing to train; it is tested again" in err
    assert "accuracy" in out and (run / "history.jsonl").read_text() == history


def test_a_finished_run_whose_data_changed_is_refused_without_first_saying_it_will_be_tested(tmp_path, capsys):
    # The note came before the data were read and checked: it promised a test the refusal then did not give.
    rows = [(f"good film {i}", "pos") if i % 2 else (f"bad film {i}", "neg") for i in range(60)]
    train = write_csv(tmp_path / "train.csv", rows)
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(train), "--model", "boe", "--epochs", "1", "--threads", "1",
                 "--min-frequency", "1", "--output", str(run), "--quiet", "--no-report"]) == 0
    write_csv(train, [(f"{text} again", label) for text, label in rows])
    capsys.readouterr()
    assert main(["train", "--resume", "--output", str(run), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "finished training already" not in err and err.startswith("attnclf: error: ") and err.count("\n") == 1


def test_resuming_a_finished_run_for_more_epochs_trains_on_without_that_note(tmp_path, capsys):
    run = tmp_path / "run"
    argv = tiny_demo_train(1, run)
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["train", "--resume", "--output", str(run), "--epochs", "2", "--no-report"]) == 0
    assert "finished training already" not in capsys.readouterr().err
    assert len((run / "history.jsonl").read_text().splitlines()) == 2


def test_the_installed_command_reports_errors_without_a_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "attnclf", "predict", str(tmp_path / "missing"), "x"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "does not exist" in result.stderr


def test_predict_and_explain_import_neither_scikit_learn_scipy_nor_torch_s_compiler(demo_run):
    # Predicting needs none of them, and each took 0.3 to three seconds of every predict, explain and serve start-up
    # (scipy: its BLAS was loaded for --threads to bound, which only the word vectors' SVD uses). Explaining, by
    # every method, needs none of them too.
    code = ("import sys; sys.modules['sklearn'] = None\n"  # (any `import sklearn` fails)
            "from attnclf.cli import main\n"
            f"assert main(['predict', {str(demo_run)!r}, 'not good at all', '--threads', '1']) == 0\n"
            f"assert main(['explain', {str(demo_run)!r}, 'not good', '--method', 'all', '--threads', '1']) == 0\n"
            "print('torch._dynamo' in sys.modules, 'scipy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "False False"


def test_the_command_line_starts_without_importing_numpy():
    # Every command, --help and a refused flag among them, imports the CLI and its shared checks first: numpy there
    # added some 150 ms to each start-up, before any command needed it.
    code = "import sys, attnclf.cli, attnclf.checks; print('numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("flags, message", [
    (["--max-train-examples", "0"], "--max-train-examples must be at least 1, got 0"),
    (["--val-fraction", "0"], "--val-fraction must be in (0, 1), got 0.0"),
    (["--multi-label", "--label-delimiter", ""], "--label-delimiter must be at least one character"),
    # --seed is checked where a seed from Python is, in TrainConfig: both bounds, one message. TrainConfig's checks
    # name its fields to Python and the flags here (they named the fields here too).
    (["--seed", "-1"], "--seed must be at least 0 and below 4294967296, got -1"),
    (["--seed", "4294967296"], "--seed must be at least 0 and below 4294967296, got 4294967296"),
    (["--split-seed", "-2"], "--split-seed must be at least 0 and below 4294967296, got -2"),
    (["--ema-decay", "1"], "--ema-decay must be at least 0 and below 1, got 1.0"),
    (["--epochs", "0"], "--epochs must be at least 1, got 0"),
    (["--lr", "-1"], "--lr must be a finite number, at least 0, got -1.0"),
    (["--patience", "-1"], "--patience must be at least 0, got -1"),
    pytest.param(["--device", "cuda"], "device cuda asked for, but no CUDA device is available",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")),
])
def test_bad_budget_flags_are_one_line_errors(flags, message, tmp_path, capsys):
    assert main(["train", "--dataset", "demo", "--epochs", "1", *flags, "--output", str(tmp_path / "x"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"error: {message}" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x").exists()  # stopped before writing anything


def test_resume_names_its_epochs_flag_as_a_new_run_does(demo_run, tmp_path, capsys):
    # The run's own settings are read back with the new --epochs, and TrainConfig's check of them named its field.
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    err = run_error(["train", "--resume", "--output", str(run), "--epochs", "0"], capsys)
    assert err == "attnclf: error: --epochs must be at least 1, got 0"
    assert (run / "config.json").read_bytes() == (demo_run / "config.json").read_bytes()


def test_split_seed_reaches_the_run_settings_and_runs_that_share_it_validate_as_an_ensemble(tmp_path, capsys):
    from attnclf.cli import build_parser, build_settings
    from attnclf.ensemble import Ensemble
    from attnclf.training.run_data import load_data
    from attnclf.training.settings import DataSettings

    args = build_parser().parse_args(["train", "--dataset", "demo", "--split-seed", "3"])
    assert build_settings(args).data.split_seed == 3
    for seed, split_seed in ((0, None), (1, 4), (2, 4)):
        assert main(["train", "--dataset", "demo", "--model", "boe", "--epochs", "1", "--seed", str(seed),
                     *(["--split-seed", str(split_seed)] if split_seed is not None else []),
                     "--output", str(tmp_path / f"s{seed}"), "--quiet", "--no-report"]) == 0
    saved = json.loads((tmp_path / "s1" / "config.json").read_text())["settings"]["data"]
    assert saved["split_seed"] == 4
    # The split seed picks which texts validate, like the run seed: members may differ in it...
    assert len(Ensemble.load([tmp_path / "s0", tmp_path / "s1"]).members) == 2
    capsys.readouterr()
    # ...but only runs that held out the same texts can be validated together.
    assert main(["evaluate", str(tmp_path / "s1"), str(tmp_path / "s2"), "--split", "validation", "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    held_out = load_data(DataSettings(dataset="demo", split_seed=4), seed=1).validation
    expected = Ensemble.load([tmp_path / "s1", tmp_path / "s2"]).predict_proba(held_out.texts).argmax(1)
    assert scored["split"] == "validation" and scored["num_examples"] == len(held_out)
    assert scored["accuracy"] == pytest.approx((expected == np.array(held_out.labels)).mean())
    history = [json.loads(line) for line in (tmp_path / "s1" / "history.jsonl").read_text().splitlines()]
    assert main(["evaluate", str(tmp_path / "s1"), "--split", "validation", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == pytest.approx(history[-1]["val_accuracy"])
    assert main(["evaluate", str(tmp_path / "s0"), str(tmp_path / "s1"), "--split", "validation"]) == 2
    err = capsys.readouterr().err.strip()
    assert "held out different validation texts" in err and "--split-seed" in err and len(err.splitlines()) == 1
    assert main(["evaluate", str(tmp_path / "s1"), "--split", "validation", "--dataset", "demo"]) == 2
    assert "drop --dataset/--test-file" in capsys.readouterr().err
    # A run whose held-out texts the data no longer gives is refused: they could be texts it trained on.
    config = json.loads((tmp_path / "s1" / "config.json").read_text())
    config["data"]["validation_sha256"] = "0" * 64
    (tmp_path / "s1" / "config.json").write_text(json.dumps(config))
    assert main(["evaluate", str(tmp_path / "s1"), "--split", "validation"]) == 2
    assert "no longer gives the validation texts" in capsys.readouterr().err


def test_a_multi_label_run_is_not_scored_on_the_texts_that_tuned_its_thresholds(tmp_path, capsys):
    assert main(["train", "--dataset", "topics", "--multi-label", "--model", "boe", "--epochs", "1",
                 "--output", str(tmp_path / "ml"), "--quiet", "--no-report"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "ml"), "--split", "validation"]) == 2
    assert "tuned its thresholds on its validation texts, which would flatter it there; score it on test data " \
           "(--test-file or --dataset)" in capsys.readouterr().err


def interrupt_in_epoch_2(patch) -> None:
    """Make training checkpoint after every epoch and stop as epoch 2 starts, as Ctrl-C would."""
    interrupt_in_epoch(patch, 2)


def interrupt_in_epoch(patch, epoch: int, seed: int | None = None) -> None:
    """Make training checkpoint after every epoch and stop as ``epoch`` starts, as Ctrl-C would: in the run of
    ``seed`` only, if given (one `train --seeds` member)."""
    from dataclasses import replace

    from attnclf.training.trainer import Trainer

    original, init = Trainer._train_epoch, Trainer.__init__

    def interrupted(self, batches, optimizer, schedule, loss_fn, current):
        if current == epoch and seed in (None, self.config.seed):
            raise KeyboardInterrupt
        return original(self, batches, optimizer, schedule, loss_fn, current)

    def checkpointing_every_epoch(self, model, config, *args, **kwargs):
        init(self, model, replace(config, checkpoint_seconds=0), *args, **kwargs)

    patch.setattr(Trainer, "_train_epoch", interrupted)
    patch.setattr(Trainer, "__init__", checkpointing_every_epoch)


def test_resume_refuses_other_text_columns_and_continues_with_the_same(tmp_path, capsys, monkeypatch):
    train = write_titled_csv(tmp_path / "train.csv", [(t, "pos") for t in POSITIVE * 5] +
                             [(t, "neg") for t in NEGATIVE * 5])
    run = tmp_path / "run"
    argv = ["train", "--train-file", str(train), "--label-column", "sentiment", "--model", "boe", "--epochs", "2",
            "--min-frequency", "1", "--threads", "1", "--output", str(run), "--quiet", "--no-report"]
    columns = ["--text-column", "title", "--text-column", "body"]
    with monkeypatch.context() as patch:
        interrupt_in_epoch_2(patch)
        assert main(argv + columns) == 130
    capsys.readouterr()
    for other, shown in ((["--text-column", "body"], "'body'"),
                         (["--text-column", "body", "--text-column", "title"], "['body', 'title']")):
        assert run_error(argv + other + ["--resume"], capsys).startswith(
            f"attnclf: error: {run} trained with data.text_column = ['title', 'body'], this command gives {shown}: "
            f"--resume continues the run with its own settings")
    assert main(argv + columns + ["--resume"]) == 0 and (run / "metrics.json").is_file()


def test_resume_takes_the_command_that_started_the_run_and_refuses_other_settings(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    argv = ["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", "2", "--batch-size", "16",
            "--threads", "1", "--output", str(run), "--quiet", "--no-report"]
    with monkeypatch.context() as patch:
        interrupt_in_epoch_2(patch)
        assert main(argv) == 130
    capsys.readouterr()

    def refused(*flags: str) -> str:
        assert main(flags) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and not (run / "metrics.json").exists()
        return err

    # Flags that would train another model are named with both values, not silently ignored...
    assert refused(*argv, "--lr", "0.1", "--epochs", "3", "--resume") == (
        f"attnclf: error: {run} trained with train.lr = 0.002, this command gives 0.1: --resume continues the run "
        f"with its own settings; give the command that started it, or only --output (and --epochs, --device, "
        f"--threads or --checkpoint-minutes to change them)")
    assert "model_config.heads = 4, this command gives 2" in refused(*argv, "--set", "heads=2", "--resume")
    # ...and so are too few: a flag typed alone (the run's own value too) asks for the whole command.
    for size in ("64", "16"):
        assert refused("train", "--resume", "--output", str(run), "--batch-size", size) == (
            f"attnclf: error: --resume with --batch-size takes the whole command that started {run}, its --dataset or "
            f"--train-file too, --resume added; or give only --output (and --epochs, --device, --threads or "
            f"--checkpoint-minutes to change them)")
    assert "data.max_train_examples = 200, this command gives None" in refused(
        "train", "--dataset", "demo", "--resume", "--output", str(run))
    assert "give one" in refused(*argv, "--resume", "--overwrite")
    assert refused(*argv, "--embeddings", "count", "--resume").endswith(
        "started from word vectors none, this command gives count: a resumed run continues from its checkpoint; "
        "drop --embeddings or give its own")
    assert "no run to resume (no config.json there)" in refused("train", "--resume", "--output", str(tmp_path / "x"))
    (tmp_path / "ens" / "seed-0").mkdir(parents=True)
    (tmp_path / "ens" / "seed-0" / "config.json").write_text("{}")
    assert "holds the members of `train --seeds`" in refused("train", "--resume", "--output", str(tmp_path / "ens"))
    # The run's own command with --resume added continues it, as does --output alone.
    assert main([*argv, "--embeddings", "none", "--resume"]) == 0  # its own vectors (none) pass
    assert json.loads((run / "metrics.json").read_text())["accuracy"] > 0.5
    with monkeypatch.context() as patch:
        interrupt_in_epoch_2(patch)
        assert main([*argv, "--overwrite"]) == 130
    capsys.readouterr()
    if not torch.cuda.is_available():  # a run trained on a GPU, resumed on this machine: the fix is named
        config = json.loads((run / "config.json").read_text())
        (run / "config.json").write_text(json.dumps(config | {"settings": config["settings"] | {"device": "cuda"}}))
        assert refused("train", "--resume", "--output", str(run)).endswith(
            f"{run} trained on cuda, which this machine lacks; add --device cpu (or auto) to continue it here")
        (run / "config.json").write_text(json.dumps(config))
    assert main(["train", "--resume", "--output", str(run), "--epochs", "3"]) == 0
    assert f"{run}: planned 2 epochs, now 3; the learning-rate schedule follows" in capsys.readouterr().err
    # It went on with the run's threads (the same arithmetic as without the interruption), and without a report.
    assert json.loads((run / "config.json").read_text())["settings"]["threads"] == 1
    assert (run / "metrics.json").is_file() and not (run / "report.html").exists()


def write_imdb_tree(data) -> None:
    """A tiny aclImdb/ folder: 30 training and 10 test reviews per class, each of its own movie."""
    for split, count in (("train", 30), ("test", 10)):
        for label, words in (("pos", POSITIVE), ("neg", NEGATIVE)):
            folder = data / "aclImdb" / split / label
            folder.mkdir(parents=True)
            for i in range(count):
                (folder / f"{i}_{7 if label == 'pos' else 2}.txt").write_text(words[i % len(words)])
            movies = [f"http://www.imdb.com/title/tt{split == 'test'}{label == 'pos'}{i:05d}/usercomments"
                      for i in range(count)]
            (data / "aclImdb" / split / f"urls_{label}.txt").write_text("\n".join(movies))


TINY_IMDB = ["--dataset", "imdb", "--model", "boe", "--embeddings", "none", "--epochs", "1", "--max-len", "16",
             "--threads", "1", "--no-report", "--quiet"]


def test_a_run_remembers_the_folder_its_dataset_was_found_in(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    write_imdb_tree(data)
    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(data))
    run = tmp_path / "run"
    assert main(["train", *TINY_IMDB, "--output", str(run)]) == 0
    recorded = json.loads((run / "config.json").read_text())["settings"]["data"]
    assert recorded["found_in"] == str(data) and recorded["data_dir"] is None  # what was given stays as given

    monkeypatch.delenv("ATTNCLF_DATA_DIR")  # a new shell, an empty cache: found where training found it
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    assert main(["evaluate", str(run)]) == 0
    data.rename(tmp_path / "moved")
    assert "set ATTNCLF_DATA_DIR (or --data-dir) to the folder holding" in run_error(["evaluate", str(run)], capsys)
    assert main(["evaluate", str(run), "--data-dir", str(tmp_path / "moved")]) == 0  # the run's own test split
    assert main(["evaluate", str(run), "--split", "validation", "--data-dir", str(tmp_path / "moved")]) == 0
    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(tmp_path / "moved"))  # searched before the folder recorded
    assert main(["evaluate", str(run)]) == 0

@pytest.fixture(scope="module")
def moved_imdb_run(tmp_path_factory):
    """A run trained on a tiny IMDB in a folder given with --data-dir, the folder then moved: (run, old, new)."""
    root = tmp_path_factory.mktemp("moved-imdb")
    write_imdb_tree(root / "data")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("ATTNCLF_DATA_DIR", raising=False)  # (CI points it at the real IMDB)
        # (logits calibrate can fit a temperature to: not flat, nor right on every validation text)
        assert main(["train", *TINY_IMDB, "--epochs", "4", "--lr", "0.03", "--patience", "0", "--data-dir", str(root / "data"),
                     "--output", str(root / "run")]) == 0
    (root / "data").rename(root / "moved")
    return root / "run", root / "data", root / "moved"


@pytest.mark.parametrize("command", [
    ["evaluate"], ["calibrate"], ["faithfulness", "--examples", "4"], ["export", "--output", "{tmp}/onnx"],
    ["report", "--faithfulness", "--examples", "4"], ["refit", "--output", "{tmp}/refit", "--overwrite", "--quiet", "--no-report"]])
def test_every_command_that_reads_a_run_s_dataset_again_finds_it_moved_with_data_dir(moved_imdb_run, command,
                                                                                      tmp_path, monkeypatch, capsys):
    # export (its check reads the test split), report (its examples, calibration and faithfulness) and refit read the
    # run's dataset again as evaluate and calibrate do, but had no --data-dir: a moved dataset could not be named
    run, old, new = moved_imdb_run
    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))  # (an empty cache)
    name, *rest = [arg.format(tmp=tmp_path) for arg in command]
    error = run_error([name, str(run), *rest], capsys)
    assert error.startswith(f"attnclf: error: imdb: not found in {old}, ") and "set ATTNCLF_DATA_DIR (or --data-dir)" \
        in error
    assert main([name, str(run), *rest, "--data-dir", str(new)]) == 0
    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(new))  # searched before the folder recorded, as by evaluate
    assert main([name, str(run), *rest]) == 0


def test_an_interrupted_refit_resumes_with_data_dir_where_its_dataset_moved_since(moved_imdb_run, tmp_path,
                                                                                   monkeypatch, capsys):
    # `refit --resume` read the refit's settings again, and with them the folder its first command gave
    run, _, new = moved_imdb_run
    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    shutil.copytree(new, tmp_path / "copy")
    refit = ["refit", str(run), "--output", str(tmp_path / "refit"), "--quiet", "--no-report"]
    with monkeypatch.context() as patch:
        interrupt_in_epoch_2(patch)
        assert main([*refit, "--data-dir", str(tmp_path / "copy")]) == 130
    capsys.readouterr()
    (tmp_path / "copy").rename(tmp_path / "moved")
    assert "imdb: not found in " in run_error([*refit, "--resume"], capsys)
    assert main([*refit, "--resume", "--data-dir", str(tmp_path / "moved")]) == 0
    assert json.loads((tmp_path / "refit" / "metrics.json").read_text())["num_examples"] == 20


def test_export_refuses_data_dir_beside_a_check_file(moved_imdb_run, tmp_path, capsys):
    run, _, new = moved_imdb_run  # (--data-dir would be ignored: the check file replaces the run's own data)
    check = write_csv(tmp_path / "check.csv", [("a wonderful film", "pos"), ("a boring film", "neg")])
    assert run_error(["export", str(run), "--check-file", str(check), "--data-dir", str(new)], capsys) == (
        "attnclf: error: --data-dir says where the run's own dataset is, which --check-file replaces; give one")


def data_dir_help(name):
    """The --data-dir help of command ``name``."""
    from attnclf.cli import _subparser

    return next(action.help for action in _subparser(name)._actions if "--data-dir" in action.option_strings)


def test_the_commands_that_read_a_run_s_dataset_again_say_the_same_of_data_dir():
    assert {data_dir_help(name) for name in ("calibrate", "export", "report", "refit")} == {data_dir_help("calibrate")}
    for name in ("evaluate", "faithfulness"):  # (their --data-dir holds a --dataset's files too)
        assert data_dir_help(name).endswith("then for the run's own, where it was found when the run trained)")


def test_data_dir_help_says_a_run_s_own_data_dir_is_searched_before_the_environment(tmp_path, monkeypatch, capsys):
    # The help said $ATTNCLF_DATA_DIR came first without --data-dir; the --data-dir the run trained with does.
    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    write_imdb_tree(tmp_path / "data")
    run = tmp_path / "run"
    assert main(["train", *TINY_IMDB, "--data-dir", str(tmp_path / "data"), "--output", str(run)]) == 0
    shutil.copytree(tmp_path / "data", tmp_path / "other")
    for review in sorted((tmp_path / "other" / "aclImdb" / "test" / "pos").iterdir())[1:]:
        review.unlink()  # (another copy: 11 test texts, not 20)
    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(tmp_path / "other"))
    capsys.readouterr()
    assert main(["evaluate", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_examples"] == 20  # the run's own --data-dir, read first
    for name in ("evaluate", "calibrate", "faithfulness", "report", "export", "refit"):
        assert "the --data-dir it trained with" in data_dir_help(name).split("$ATTNCLF_DATA_DIR")[0], name


def test_a_run_interrupted_before_its_dataset_moved_resumes_with_data_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)  # (CI points it at the real IMDB)
    write_imdb_tree(tmp_path / "data")
    run = tmp_path / "run"
    with monkeypatch.context() as patch:
        interrupt_in_epoch_2(patch)
        assert main(["train", *TINY_IMDB, "--epochs", "2", "--data-dir", str(tmp_path / "data"),
                     "--output", str(run)]) == 130
    capsys.readouterr()
    (tmp_path / "data").rename(tmp_path / "moved")
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    assert "set ATTNCLF_DATA_DIR (or --data-dir)" in run_error(["train", "--resume", "--output", str(run)], capsys)
    assert main(["train", "--resume", "--output", str(run), "--data-dir", str(tmp_path / "moved"), "--quiet"]) == 0
    assert json.loads((run / "metrics.json").read_text())["num_examples"] == 20


def test_an_interrupted_ensemble_resumes_with_data_dir_where_its_dataset_moved_since(tmp_path, monkeypatch, capsys):
    # As `train --resume --data-dir` and `refit --resume --data-dir` do: a member continued from its checkpoint read
    # its own settings again, and with them the folder the first command gave, not the one given now.
    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    write_imdb_tree(tmp_path / "data")
    runs = tmp_path / "runs"
    command = ["train", *TINY_IMDB, "--epochs", "2", "--seeds", "0", "1", "--output", str(runs)]
    with monkeypatch.context() as patch:
        interrupt_in_epoch_2(patch)
        assert main([*command, "--data-dir", str(tmp_path / "data")]) == 130
    capsys.readouterr()
    (tmp_path / "data").rename(tmp_path / "moved")
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    assert main([*command, "--resume", "--data-dir", str(tmp_path / "moved")]) == 0, capsys.readouterr().err
    assert json.loads((runs / "seed-0" / "metrics.json").read_text())["num_examples"] == 20


def test_a_copy_of_the_data_elsewhere_is_the_same_data_to_a_resumed_ensemble(tmp_path, monkeypatch, capsys):
    for folder in ("data", "copy"):
        write_imdb_tree(tmp_path / folder)
    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(tmp_path / "data"))
    runs = tmp_path / "runs"
    assert main(["train", *TINY_IMDB, "--seeds", "0", "1", "--output", str(runs)]) == 0
    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(tmp_path / "copy"))
    resumed = [arg for arg in TINY_IMDB if arg not in ("--embeddings", "none")]  # (the members keep theirs)
    assert main(["train", *resumed, "--seeds", "0", "1", "2", "--resume", "--output", str(runs)]) == 0
    assert json.loads((runs / "seed-2" / "config.json").read_text())["settings"]["data"]["found_in"] == \
        str(tmp_path / "copy")
    monkeypatch.delenv("ATTNCLF_DATA_DIR")  # a shell without it: a new member looks where the others found the data
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    assert main(["train", *resumed, "--seeds", "0", "1", "2", "3", "--resume", "--output", str(runs)]) == 0
    # and a copy named with --data-dir is the same data too (the members' texts are checked, not their folder)
    assert main(["train", *resumed, "--seeds", "0", "1", "2", "3", "4", "--resume", "--data-dir",
                 str(tmp_path / "data"), "--output", str(runs)]) == 0


def test_an_experiment_cell_trained_on_a_copy_elsewhere_is_still_its_cell(tmp_path, monkeypatch):
    from attnclf.experiments.cells import check_same_settings
    from attnclf.training.settings import resume_settings

    for folder in ("data", "copy"):
        write_imdb_tree(tmp_path / folder)
    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(tmp_path / "data"))
    cell = tmp_path / "cell"
    assert main(["train", *TINY_IMDB, "--output", str(cell)]) == 0
    wanted = resume_settings(cell)
    wanted.data.data_dir = wanted.data.found_in = None  # as a new command without --data-dir builds them
    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(tmp_path / "copy"))
    check_same_settings(cell, wanted)  # no "trained with other data settings"


def test_demo_shows_attention_as_weights_beside_the_uniform_weight(tmp_path, capsys, monkeypatch):
    import re
    from dataclasses import replace

    from attnclf import demo, recipes

    monkeypatch.setitem(recipes.RECIPES, "demo", {**recipes.RECIPES["demo"],
                                                  "train": {**recipes.RECIPES["demo"]["train"], "epochs": 1}})
    # Without its report: what the demo prints is all this test reads, and the report's plots took half its 14 s.
    train_run = demo.train_run
    monkeypatch.setattr(demo, "train_run", lambda settings, **options: train_run(replace(settings, report=False),
                                                                                 **options))
    # One text under both labels: whatever the model says, one of the two is a mistake, and it must show.
    monkeypatch.setattr(demo, "EXAMPLES", [("the acting was wonderful", "positive"),
                                           ("the acting was wonderful", "negative"), ("the plot was not good", "negative")])
    assert main(["demo", "--output", str(tmp_path / "demo"), "--quiet"]) == 0
    out = capsys.readouterr().out
    marked = [line for line in out.splitlines() if "WRONG: the rules say" in line]
    assert 1 <= len(marked) <= 2 and f"\n{len(marked)} of 3 wrong, at " in out
    lines = [line for line in out.splitlines() if "attention:" in line][1:]  # after the key
    assert len(lines) == 3
    for line in lines:  # weights are not signed effects, and near-uniform ones must read as such
        assert re.fullmatch(r"\s+attention: (\S+ 0\.\d{3}, ){2}\S+ 0\.\d{3}  \(uniform would be 0\.\d{3}\)", line), line
    # Run again it replaces its own earlier demo; another run in the folder is not its to replace.
    assert main(["demo", "--output", str(tmp_path / "demo"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["train", "--dataset", "demo", "--model", "boe", "--epochs", "1", "--output", str(tmp_path / "boe"),
                 "--quiet", "--no-report"]) == 0
    capsys.readouterr()  # (the warnings about the demo's data: its short texts repeat)
    weights = (tmp_path / "boe" / "model.safetensors").read_bytes()
    assert run_error(["demo", "--output", str(tmp_path / "boe")], capsys).endswith(
        "holds another run (its model differs from the demo's); give the demo another --output, or delete the folder")
    assert (tmp_path / "boe" / "model.safetensors").read_bytes() == weights
    (tmp_path / "ens" / "seed-0").mkdir(parents=True)
    (tmp_path / "ens" / "seed-0" / "config.json").write_text("{}")
    assert "holds the runs of `train --seeds`" in run_error(["demo", "--output", str(tmp_path / "ens")], capsys)


def test_commands_that_use_a_run_say_when_it_has_not_finished_training(csv_run, csv_files, tmp_path, capsys):
    import shutil

    interrupted = tmp_path / "interrupted"
    shutil.copytree(csv_run, interrupted)
    (interrupted / "metrics.json").unlink()  # as an interrupted run leaves it: weights, no test metrics
    warning = f"warning: {interrupted} has not finished training; these are its best weights so far"
    for command in (["evaluate", str(interrupted), "--test-file", str(csv_files[1])],
                    ["predict", str(interrupted), "a fine story"], ["explain", str(interrupted), "a fine story"]):
        assert main(command) == 0
        assert warning in capsys.readouterr().err, command
    assert main(["evaluate", str(csv_run), "--test-file", str(csv_files[1])]) == 0
    assert main(["predict", str(csv_run), "a fine story"]) == 0
    assert "has not finished training" not in capsys.readouterr().err


def test_a_refit_counts_its_vectors_where_its_run_found_the_data(tmp_path, monkeypatch):
    data = tmp_path / "data"
    write_imdb_tree(data)
    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(data))
    run = tmp_path / "run"
    counted = [arg for arg in TINY_IMDB if arg not in ("--embeddings", "none")] + ["--set", "embed_dim=8"]
    assert main(["train", *counted, "--epochs", "2", "--output", str(run)]) == 0  # the recipe counts vectors
    assert json.loads((run / "config.json").read_text())["settings"]["embeddings"] == "count"
    monkeypatch.delenv("ATTNCLF_DATA_DIR")  # a new shell, an empty cache
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    assert main(["refit", str(run), "--threads", "1"]) == 0


def test_training_on_a_small_file_points_to_compare_and_a_large_one_does_not(tmp_path, capsys):
    # On small files TF-IDF + LR and boe came close to self-attn (BENCHMARKS.md, Small data): a small file's run names
    # the command comparing them on it, with the user's own files. (The self-attn settings that led on small files are
    # a file's default now, so it names no settings.)
    small = write_csv(tmp_path / "my reviews.csv",
                      [(t, "pos") for t in POSITIVE * 3] + [(t, "neg") for t in NEGATIVE * 3])
    common = ["--model", "boe", "--epochs", "1", "--min-frequency", "1", "--no-report", "--threads", "1"]
    compare = (f"note: 32 training texts, where boe or TF-IDF + LR may do as well as self-attn or better: `attnclf "
               f"compare --train-file '{small}' --test-file '{small}' --models self-attn,boe --threads 1` scores "
               f"self-attn, boe and TF-IDF + LR on your data, over several seeds each (--seeds 1: one)")
    for model in ("boe", "self-attn"):
        assert main(["train", "--train-file", str(small), "--test-file", str(small), *common, "--model", model,
                     "--output", str(tmp_path / model)]) == 0
        assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")] == [compare]
    # Without a test file the command asks for one; --quiet hides the note, as it hides progress.
    assert main(["train", "--train-file", str(small), *common, "--output", str(tmp_path / "no-test")]) == 0
    assert "--test-file TEST_FILE --models self-attn,boe --threads 1`" in capsys.readouterr().err
    # The run's threads are the comparison's: a run left at one per core names none.
    unbounded = common[:common.index("--threads")]
    assert main(["train", "--train-file", str(small), *unbounded, "--output", str(tmp_path / "unbounded")]) == 0
    assert "--models self-attn,boe` scores" in capsys.readouterr().err
    assert main(["train", "--train-file", str(small), *common, "--quiet", "--output", str(tmp_path / "quiet")]) == 0
    assert "note:" not in capsys.readouterr().err
    large = write_csv(tmp_path / "large.csv", [(f"{t} {i}", y) for i in range(940) for t, y in
                                               [(p, "pos") for p in POSITIVE] + [(n, "neg") for n in NEGATIVE]])
    # (11,280 rows: 10,152 of them train)
    assert main(["train", "--train-file", str(large), *common, "--output", str(tmp_path / "large")]) == 0
    assert "note:" not in capsys.readouterr().err


def test_the_compare_command_a_small_file_names_reads_the_file_as_the_run_did(tmp_path, capsys):
    # A README walk: trained with --text-column review --label-column sentiment, the run named
    # `attnclf compare --train-file reviews.csv ...` without them, which stopped on "no text column 'text'".
    import shlex

    from attnclf.cli import build_parser

    rows = [(t, "pos") for t in POSITIVE * 3] + [(t, "neg") for t in NEGATIVE * 3]
    train = write_csv(tmp_path / "reviews.csv", rows, header="review,sentiment")
    dev = write_csv(tmp_path / "dev.csv", rows, header="review,sentiment")
    assert main(["train", "--train-file", str(train), "--validation-file", str(dev), "--test-file", str(dev),
                 "--text-column", "review", "--label-column", "sentiment", "--model", "boe", "--epochs", "1",
                 "--min-frequency", "1", "--no-report", "--threads", "1", "--output", str(tmp_path / "run")]) == 0
    note = next(line for line in capsys.readouterr().err.splitlines() if line.startswith("note:"))
    named = build_parser().parse_args(shlex.split(note.split("`")[1])[1:])
    assert (named.command, named.train_file, named.validation_file, named.text_column, named.label_column) == (
        "compare", str(train), str(dev), ["review"], "sentiment")


def test_train_seeds_on_a_small_file_names_the_compare_command_once(tmp_path, capsys):
    # Its seeds train on the same file: the note, a long line, stood after every seed's progress, once per seed.
    small = write_csv(tmp_path / "small.csv", [(t, "pos") for t in POSITIVE * 3] + [(t, "neg") for t in NEGATIVE * 3])
    assert main(["train", "--train-file", str(small), "--test-file", str(small), "--seeds", "0", "1", "2",
                 "--model", "boe", "--epochs", "1", "--min-frequency", "1", "--no-report", "--threads", "1",
                 "--output", str(tmp_path / "seeds")]) == 0
    err = capsys.readouterr().err
    assert err.count("seed 2: ") == 1 and err.count("`attnclf compare --train-file") == 1



def test_the_explanation_methods_flag_is_spelt_method_on_every_command_that_takes_it(capsys):
    # explain and report take --method; faithfulness took only --methods (--method reached it by argparse's prefix
    # matching, which its help did not show).
    from attnclf.cli import build_parser

    parser = build_parser()
    for command in ("explain", "report", "faithfulness"):
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        assert "--method " in capsys.readouterr().out.replace("\n", " "), command
    assert parser.parse_args(["faithfulness", "runs/x", "--method", "occlusion"]).methods == "occlusion"


@pytest.mark.parametrize("command", ["compare", "ablate"])
def test_experiment_help_says_how_long_it_takes_by_a_figure_benchmarks_holds(command):
    # A teacher planning a lab could not tell from --help whether compare --quick takes a minute or an hour.
    from attnclf.cli import build_parser

    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    description = " ".join(subcommands.choices[command].description.split())
    took = re.search(r"took (\d+ min \d+ s) \((\d+ s) of CPU\)", description)
    assert took and "BENCHMARKS.md, 2026-11-28" in description, description
    benchmarks = (Path(__file__).resolve().parents[1] / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert took[1] in benchmarks and took[2] in benchmarks


def test_a_library_warning_prints_as_one_note_line_and_python_s_own_as_python_shows_them(monkeypatch, capsys):
    # An AttnclfWarning the library gives Python callers (a chart's font lacking a script's characters, say) printed
    # in Python's two-line format from a command: "cli.py:123: AttnclfWarning: ..." and the source line under it.
    import warnings

    from attnclf import cli
    from attnclf.errors import AttnclfWarning

    def warns(args):
        warnings.warn("the charts' font lacks these characters", AttnclfWarning)
        warnings.warn("an old keyword", DeprecationWarning)
        return 0

    monkeypatch.setitem(cli.COMMANDS, "models", warns)
    shown_before = warnings.showwarning
    with pytest.warns(DeprecationWarning, match="an old keyword"):  # (not ours: shown as Python shows it)
        assert main(["models"]) == 0
    assert capsys.readouterr().err == "note: the charts' font lacks these characters\n"
    assert warnings.showwarning is shown_before  # set back after the command


def stopped_after_step_3(run, monkeypatch) -> None:
    """`tiny_demo_train` of 2 epochs into ``run``, a checkpoint every step, stopped (Ctrl-C) once step 3's is kept."""
    from attnclf.training.trainer import Trainer

    save = Trainer._save_checkpoint

    def stopping(self, optimizer, schedule, state, *rest, **more):
        save(self, optimizer, schedule, state, *rest, **more)
        if state.get("step") == 3:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "_save_checkpoint", stopping)
        assert main(tiny_demo_train(2, run, "--checkpoint-minutes", "1e-9")) == 130


def test_a_train_interrupted_within_an_epoch_says_which_step_it_kept_and_resumes_from_the_next(tmp_path, capsys,
                                                                                               monkeypatch):
    run = tmp_path / "run"
    stopped_after_step_3(run, monkeypatch)
    steps = json.loads((run / "checkpoint" / "state.json").read_text())["epoch_steps"]
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"attnclf: interrupted; kept step 3 of {steps} in epoch 1 of 2: `attnclf train --resume --output {run}` "
        f"continues from step 4")
    # A fresh command into that folder would delete the steps it kept (no weights yet): refused, as an unfinished run.
    assert run_error(tiny_demo_train(2, run), capsys) == (
        f"attnclf: error: {run} holds an unfinished run (--resume continues it); add --overwrite to replace it, or "
        f"give another --output")
    # The interval may change as it resumes (it is no setting of the model's); the run resumes to its end.
    assert main(["train", "--resume", "--output", str(run), "--checkpoint-minutes", "0", "--quiet",
                 "--no-report"]) == 0
    assert [record["epoch"] for record in map(json.loads, (run / "history.jsonl").read_text().splitlines())] == [1, 2]
    assert run_error(tiny_demo_train(2, tmp_path / "again", "--checkpoint-minutes", "-1"), capsys) == (
        "attnclf: error: --checkpoint-minutes must be at least 0, got -1.0")


def test_a_resumed_runs_state_json_that_is_no_object_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    # A truncated one is refused by read_json; one that parses as another JSON value (a hand edit, a list) was read
    # with .get(), and train --resume ended in an AttributeError's traceback.
    run = tmp_path / "run"
    stopped_after_step_3(run, monkeypatch)
    capsys.readouterr()
    state = run / "checkpoint" / "state.json"
    state.write_text("[]")
    assert run_error(["train", "--resume", "--output", str(run), "--quiet", "--no-report"], capsys) == (
        f"attnclf: error: {state}: expected a JSON object, the checkpoint's state, got list")


def test_a_resumed_runs_state_json_with_a_field_of_the_wrong_kind_is_refused_in_one_line(tmp_path, capsys,
                                                                                           monkeypatch):
    # A hand-edited or damaged state.json was read field by field wherever each was needed: "epoch": "x" ended
    # train --resume in a TypeError's traceback, a missing schedule in a KeyError's.
    run = tmp_path / "run"
    stopped_after_step_3(run, monkeypatch)
    capsys.readouterr()
    state = run / "checkpoint" / "state.json"
    kept = json.loads(state.read_text())
    steps = kept["epoch_steps"]
    edits = [
        ({"epoch": "x"}, "epoch must be a whole number of at least 0, got 'x'"),
        ({"epoch": -1}, "epoch must be a whole number of at least 0, got -1"),
        ({"stale_epochs": 1.5}, "stale_epochs must be a whole number of at least 0, got 1.5"),
        ({"world_size": 0}, "world_size must be a whole number of at least 1, got 0"),
        ({"best": "high"}, "best must be a number or null, got 'high'"),
        ({"history": 3}, "history must be a list of JSON objects (the epochs' records), got 3"),
        ({"history": [1]}, "history must be a list of JSON objects (the epochs' records), got [1]"),
        ({"tensors": "../config.json"}, "tensors must name a file in the checkpoint folder, got '../config.json'"),
        ({"optimizer_param_groups": {}}, "optimizer_param_groups must be a list of JSON objects, got {}"),
        ({"schedule": None}, "schedule must be a JSON object, got None"),
        ({"schedule": "missing"}, "schedule is missing, which a resume needs"),
        ({"step": -1}, f"step must be a whole number from 1 to epoch_steps ({steps}), got -1"),
        ({"step": steps + 1}, f"step must be a whole number from 1 to epoch_steps ({steps}), got {steps + 1}"),
        ({"epoch_steps": "many"}, "epoch_steps must be a whole number of at least 1, got 'many'"),
        ({"epoch_seconds": "x"}, "epoch_seconds must be a number of at least 0, got 'x'"),
        ({"epoch_totals": [[1, 2]]}, "epoch_totals must be a list of 1 list(s) of 4 numbers (one a process), "
                                     "got [[1, 2]]"),
        ({"epoch_totals": "missing"}, "step, epoch_steps, epoch_totals and epoch_seconds go together (a checkpoint "
                                      "within an epoch), but epoch_totals is missing"),
    ]
    for edit, refusal in edits:
        edited = {**kept, **edit}
        edited = {name: value for name, value in edited.items() if value != "missing"}
        state.write_text(json.dumps(edited))
        assert run_error(["train", "--resume", "--output", str(run), "--quiet", "--no-report"], capsys) == (
            f"attnclf: error: {state}: {refusal}"), edit
    # Python's Trainer loads the state through the same check (train --resume refuses it sooner, before the data)
    from attnclf.errors import RunDirError
    from attnclf.training.trainer import checkpoint_state

    state.write_text(json.dumps({**kept, "epoch": "x"}))
    with pytest.raises(RunDirError, match=r"epoch must be a whole number of at least 0, got 'x'$"):
        checkpoint_state(run, resuming=True)


def test_a_run_stopped_within_its_first_epoch_names_the_command_that_continues_it(tmp_path, capsys):
    # Weights come as its first epoch ends: before then, evaluate/predict/report said only "missing
    # model.safetensors", and not that `train --resume` carries the checkpoint kept within the epoch on.
    run = tmp_path / "run"
    (run / "checkpoint").mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "checkpoint" / "state.json").write_text("{}")
    assert main(["evaluate", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"attnclf: error: run directory {run} is unfinished: stopped within its first epoch, before "
                           f"any weights; `attnclf train --resume --output {run}` continues it"), err
