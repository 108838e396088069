"""fastText's supervised format (`__label__baking __label__bread how do i ...`) read wherever attnclf reads labelled
texts or texts to predict, so fastText's tutorial files (cooking.train, cooking.valid) work unchanged."""

from __future__ import annotations

import csv
import io
import json

import pytest

from attnclf.cli import main
from attnclf.data.files import is_fasttext_file, load_file, read_texts
from attnclf.errors import DataError

POSITIVE = ["a wonderful film", "great acting and a great story", "brilliant and moving", "i loved it"]
NEGATIVE = ["a boring film", "dull acting and a weak story", "awful and tedious", "i hated it"]
# fastText's tutorial set is multi-label: stackexchange cooking questions, their tags as labels
COOKING = [("baking bread", "how do i get a crusty loaf ?"), ("baking", "why did my cake sink in the oven ?"),
           ("bread", "which flour for a sourdough starter ?"), ("eggs", "how long to boil an egg ?"),
           ("eggs baking", "can i bake a cake without eggs ?"), ("bread eggs", "egg wash on a loaf of bread ?")]


def fasttext_lines(rows: list[tuple[str, str]]) -> str:
    """Lines of fastText's format: each label (a space-separated name) as __label__NAME, then the text."""
    return "".join(" ".join(f"__label__{name}" for name in labels.split()) + f" {text}\n" for labels, text in rows)


@pytest.fixture(scope="module")
def reviews(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fasttext")
    rows = [("pos", text) for text in POSITIVE * 6] + [("neg", text) for text in NEGATIVE * 6]
    (folder / "reviews.train").write_text(fasttext_lines(rows), encoding="utf-8")
    (folder / "reviews.valid").write_text(fasttext_lines(rows[::3]), encoding="utf-8")
    return folder / "reviews.train", folder / "reviews.valid"


@pytest.fixture(scope="module")
def run(reviews, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "ft"
    assert main(["train", "--train-file", str(reviews[0]), "--test-file", str(reviews[1]), "--model", "boe",
                 "--epochs", "10", "--lr", "0.01", "--min-frequency", "1", "--output", str(out), "--quiet",
                 "--no-report", "--threads", "1"]) == 0
    return out


def one_line(exc: pytest.ExceptionInfo) -> str:
    assert "\n" not in str(exc.value)
    return str(exc.value)


# --- reading ------------------------------------------------------------------

@pytest.mark.parametrize("name", ["cooking.train", "cooking.valid", "cooking.txt", "cooking"])
def test_a_labelled_file_of_fasttexts_format_is_read_by_content_whatever_its_suffix(tmp_path, name):
    path = tmp_path / name
    path.write_text(fasttext_lines([("pos", "a fine film"), ("neg", "a dull  film ")]) + "\n", encoding="utf-8")
    data = load_file(path)
    assert data.texts == ["a fine film", "a dull  film"]  # (the text as written, less the spaces around it)
    assert data.label_names == ["neg", "pos"] and data.labels == [1, 0]


def test_crlf_line_endings_and_a_byte_order_mark_are_not_part_of_labels_or_texts(tmp_path):
    path = tmp_path / "windows.train"
    path.write_bytes(b"\xef\xbb\xbf__label__pos a fine film\r\n\r\n__label__neg a dull film\r\n")
    assert is_fasttext_file(path)
    data = load_file(path)
    assert data.texts == ["a fine film", "a dull film"] and data.label_names == ["neg", "pos"]
    assert read_texts(path) == ["a fine film", "a dull film"]


def test_several_labels_are_a_label_set_read_by_the_multi_label_machinery(tmp_path):
    path = tmp_path / "cooking.train"
    path.write_text(fasttext_lines(COOKING), encoding="utf-8")
    data = load_file(path, multi_label=True)
    assert data.multi_label and data.label_names == ["baking", "bread", "eggs"]
    assert data.labels[:2] == [(0, 1), (0,)] and data.texts[0] == "how do i get a crusty loaf ?"


def test_a_label_token_later_in_the_line_is_a_label_as_fasttext_reads_it_never_text(tmp_path):
    path = tmp_path / "late.train"
    path.write_text("__label__pos a fine film\nthe dull film __label__neg\n", encoding="utf-8")
    data = load_file(path)
    assert data.texts == ["a fine film", "the dull film"] and data.labels == [1, 0]


def test_words_are_split_on_ascii_whitespace_alone_as_fasttext_splits_them(tmp_path):
    # fastText ends a word only at a space, tab, newline, vertical tab, form feed, carriage return or NUL; str.split()
    # and the regex \s end one at a no-break space too, which cut a label in two (label "new", text "york ...") and
    # read a word a no-break space joins to a label token as a label.
    nbsp = "\u00a0"
    path = tmp_path / "cities.train"
    path.write_text(f"__label__new{nbsp}york\va fine{nbsp}film\n"
                    f"__label__pos\f{nbsp}a dull{nbsp}__label__neg film\x00\n"
                    f"{nbsp}__label__neg{nbsp}as text\t__label__pos\n", encoding="utf-8")
    data = load_file(path, multi_label=True)
    assert data.label_names == ["new\xa0york", "pos"] and data.labels == [(0,), (1,), (1,)]
    assert data.texts == ["a fine\xa0film", "\xa0a dull\xa0__label__neg film", "\xa0__label__neg\xa0as text"]
    assert read_texts(path) == data.texts
    from attnclf.data.files import text_lines  # (stdin: a first line whose first word is no label is plain text)

    assert text_lines(f"{nbsp}__label__pos a fine film\n".encode(), "stdin") == [f"{nbsp}__label__pos a fine film"]


def test_texts_to_predict_lose_their_labels_and_a_plain_text_file_stays_a_text_per_line(tmp_path):
    labelled, plain = tmp_path / "cooking.txt", tmp_path / "notes.txt"
    labelled.write_text(fasttext_lines(COOKING[:2]), encoding="utf-8")
    plain.write_text("a note on __label__baking\n", encoding="utf-8")
    assert read_texts(labelled) == ["how do i get a crusty loaf ?", "why did my cake sink in the oven ?"]
    assert read_texts(plain) == ["a note on __label__baking"] and not is_fasttext_file(plain)
    assert not is_fasttext_file(tmp_path / "missing.txt")


def test_a_later_line_without_a_label_is_refused_naming_file_and_line(tmp_path):
    path = tmp_path / "cooking.train"
    path.write_text("__label__pos a fine film\n\nno label here\n", encoding="utf-8")
    for read in (load_file, read_texts):
        with pytest.raises(DataError) as exc:
            read(path)
        assert one_line(exc).startswith(f"{path}, line 3: no label") and "__label__" in str(exc.value)


def test_several_labels_in_a_single_label_run_are_refused_suggesting_multi_label(tmp_path):
    path = tmp_path / "cooking.train"
    path.write_text(fasttext_lines(COOKING), encoding="utf-8")
    with pytest.raises(DataError) as exc:
        load_file(path)
    message = one_line(exc)
    assert message.startswith(f"{path}, line 1: 2 labels ") and "'baking', 'bread'" in message
    assert "--multi-label" in message and "column" not in message


def test_an_empty_label_name_or_an_empty_text_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "bad.train"
    path.write_text("__label__pos a fine film\n__label__ a dull film\n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert one_line(exc).startswith(f"{path}, line 2: ") and "'__label__'" in str(exc.value)
    path.write_text("__label__pos a fine film\n__label__neg\n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert one_line(exc) == (f"{path}, line 2: empty text; remove the line or give it a text (a file to train or "
                             f"evaluate on needs one in every line)")


def test_a_test_label_outside_training_is_named_without_a_column(tmp_path):
    path = tmp_path / "test.valid"
    path.write_text("__label__meh a film\n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        load_file(path, label_names=["neg", "pos"])
    assert one_line(exc).startswith(f"{path}, line 1: label 'meh' is not one of the training labels")


def test_a_file_of_no_known_kind_still_gets_the_unknown_file_type_line_naming_fasttext(tmp_path, cli_error):
    path = tmp_path / "data.train"
    path.write_text("pos a fine film\n", encoding="utf-8")
    message = cli_error(["train", "--train-file", str(path), "--output", str(tmp_path / "r")])
    assert message.startswith(f"{path}: unknown file type '.train'") and "__label__" in message


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_a_fasttext_file_with_a_data_suffix_is_told_to_drop_the_suffix(tmp_path, suffix, cli_error):
    # (a data suffix says how to read the file: its first line was taken for a header, or for malformed JSON)
    path = tmp_path / f"reviews{suffix}"
    path.write_text(fasttext_lines([("pos", "a fine film, truly"), ("neg", "a dull film")]), encoding="utf-8")
    message = cli_error(["train", "--train-file", str(path), "--output", str(tmp_path / "r")])
    assert message.startswith(str(path)) and f"fastText's format is read from a file without a {suffix} suffix" \
        in message, message


# --- commands -----------------------------------------------------------------

def test_train_and_evaluate_from_fasttext_files(run, reviews, capsys):
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["num_examples"] == 16 and metrics["accuracy"] == 1.0
    data = json.loads((run / "config.json").read_text())["settings"]["data"]
    assert data["train_file"].endswith("reviews.train") and data["text_column"] == "text"
    assert main(["evaluate", str(run), "--test-file", str(reviews[1]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == 1.0
    assert main(["evaluate", str(run), "--json"]) == 0  # the run's own test file, as recorded
    assert json.loads(capsys.readouterr().out)["accuracy"] == 1.0


def test_predict_file_reads_texts_without_their_labels(run, reviews, capsys, cli_error):
    assert main(["predict", str(run), "--file", str(reviews[1]), "--attention"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(records) == 16 and records[0]["text"] == POSITIVE[0]
    assert not any("label" in token for record in records for token in record["tokens"])
    assert cli_error(["predict", str(run), "--file", str(reviews[1]), "--text-column", "text"]).startswith(
        "--text-column picks the column of a CSV")


def test_predict_output_writes_each_text_its_labels_and_the_prediction(run, reviews, tmp_path, capsys):
    output = tmp_path / "scored.csv"
    assert main(["predict", str(run), "--file", str(reviews[1]), "--output", str(output)]) == 0
    assert capsys.readouterr().err == f"wrote 16 predictions to {output}\n"
    with open(output, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:3] == ["text", "label", "predicted_label"]
    assert (rows[0]["text"], rows[0]["label"], rows[0]["predicted_label"]) == (POSITIVE[0], "pos", "pos")


def test_multi_label_train_evaluate_and_predict_output_from_fasttext_files(tmp_path, capsys):
    train, valid = tmp_path / "cooking.train", tmp_path / "cooking.valid"
    train.write_text(fasttext_lines(COOKING * 4), encoding="utf-8")
    valid.write_text(fasttext_lines(COOKING), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "--train-file", str(train), "--test-file", str(valid), "--multi-label", "--model", "boe",
                 "--epochs", "3", "--min-frequency", "1", "--output", str(out), "--quiet", "--no-report",
                 "--threads", "1"]) == 0
    assert json.loads((out / "labels.json").read_text()) == ["baking", "bread", "eggs"]
    capsys.readouterr()
    assert main(["evaluate", str(out), "--test-file", str(valid), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_examples"] == len(COOKING)
    output = tmp_path / "scored.jsonl"
    assert main(["predict", str(out), "--file", str(valid), "--output", str(output)]) == 0
    first = json.loads(output.read_text().splitlines()[0])
    assert (first["text"], first["label"]) == (COOKING[0][1], "baking|bread") and "predicted_labels" in first


@pytest.mark.parametrize("flag", [["--text-column", "review"], ["--label-column", "stars"],
                                  ["--multi-label", "--label-delimiter", ","]])
def test_a_column_flag_for_a_fasttext_training_file_is_refused_as_naming_nothing_in_it(reviews, tmp_path, flag,
                                                                                         cli_error):
    message = cli_error(["train", "--train-file", str(reviews[0]), *flag, "--output", str(tmp_path / "r")])
    assert message.startswith(f"{flag[-2]} ") and "fastText's format" in message and str(reviews[0]) in message


def test_a_validation_file_and_the_token_cache_read_fasttext_files(reviews, tmp_path):
    for extra in (["--validation-file", str(reviews[1])],
                  ["--token-cache", "--token-cache-dir", str(tmp_path / "cache")]):
        out = tmp_path / extra[0].strip("-")
        assert main(["train", "--train-file", str(reviews[0]), "--test-file", str(reviews[1]), *extra, "--model",
                     "boe", "--epochs", "2", "--min-frequency", "1", "--output", str(out), "--quiet", "--no-report",
                     "--threads", "1"]) == 0
        assert json.loads((out / "metrics.json").read_text())["num_examples"] == 16


def test_explain_s_file_and_predict_s_stdin_read_texts_without_their_labels(run, reviews, capsys, monkeypatch):
    assert main(["explain", str(run), "--file", str(reviews[1]), "--json"]) == 0
    explained = capsys.readouterr().out
    assert POSITIVE[0] in explained and "__label__" not in explained
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(reviews[1].read_bytes())))  # (nothing left open)
    assert main(["predict", str(run), "--file", "-"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert records[0]["text"] == POSITIVE[0] and records[0]["label"] == "pos"


def test_text_lines_of_stdin_in_fasttexts_format_lose_their_labels_and_need_one_each():
    from attnclf.data.files import text_lines

    assert text_lines(b"__label__pos a fine film\r\n\r\n__label__neg  __label__x a dull film\n", "stdin") == [
        "a fine film", "a dull film"]
    with pytest.raises(DataError) as exc:
        text_lines(b"__label__pos a fine film\n\nno label\n", "stdin")
    assert one_line(exc).startswith("stdin: line 3: no label")


@pytest.mark.parametrize("flag", [["--text-column", "review"], ["--label-column", "stars"]])
def test_a_column_flag_for_a_fasttext_test_file_is_refused_not_ignored(run, reviews, flag, cli_error):
    message = cli_error(["evaluate", str(run), "--test-file", str(reviews[1]), *flag])
    assert message.startswith(f"{flag[0]} ") and "fastText's format" in message and str(reviews[1]) in message
