"""Multi-label classification: label-set files, metrics against scikit-learn, thresholds, a run end to end."""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from sklearn import metrics as skm

from attnclf.cli import main
from attnclf.data.files import load_file
from attnclf.data.generated import topics
from attnclf.data.multilabel import multi_hot
from attnclf.data.splits import train_validation_split
from attnclf.errors import DataError
from attnclf.prediction import decided_rows, label_set
from attnclf.evaluation.multilabel import multilabel_metrics, predicted_sets, tune_thresholds
from attnclf.rundir import THRESHOLDS_FILE
from conftest import docs_tables, explains_as_to_dict, intervals_shown, undescribed


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return path


# --- files --------------------------------------------------------------------

def test_jsonl_list_labels_become_sorted_index_sets(tmp_path):
    path = _jsonl(tmp_path / "train.jsonl", [
        {"text": "goal and vote", "label": ["sports", "politics"]},
        {"text": "nothing", "label": []},
        {"text": "album", "label": ["music", "music"]},
    ])
    ds = load_file(path, multi_label=True)
    assert ds.multi_label and ds.label_names == ["music", "politics", "sports"]
    assert ds.labels == [(1, 2), (), (0,)]


def test_csv_cells_split_on_the_delimiter_and_an_empty_cell_is_no_label(tmp_path):
    path = _csv(tmp_path / "train.csv", [("a", "x | y"), ("b", ""), ("c", "y")])
    assert load_file(path, multi_label=True).labels == [(0, 1), (), (1,)]
    path = _csv(tmp_path / "semi.csv", [("a", "x;y|z"), ("b", "y|z")])
    ds = load_file(path, multi_label=True, label_delimiter=";")
    assert ds.label_names == ["x", "y|z"] and ds.labels == [(0, 1), (1,)]


def test_training_warns_when_label_sets_look_split_on_the_wrong_character(tmp_path, capsys):
    rows = [("stocks fell", "business,reuters"), ("a late goal", "sports,reuters"), ("rates rose", "business"),
            ("a new law", "politics;business"), ("a vote", "politics")]
    train = _csv(tmp_path / "train.csv", [(f"{text} {i}", labels) for i in range(4) for text, labels in rows])
    assert main(["train", "--train-file", str(train), "--multi-label", "--model", "boe", "--epochs", "1",
                 "--output", str(tmp_path / "run"), "--quiet", "--no-report"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    # ',' joins two classes that share a piece; ';' joins one whose pieces are classes; '|' split the sets.
    assert warnings == [
        "warning: 2 classes hold ',' ('business,reuters', 'sports,reuters'); if it separates the labels in the "
        "data, give --label-delimiter ','",
        "warning: 1 class holds ';' ('politics;business'); if it separates the labels in the data, give "
        "--label-delimiter ';'"]
    # In JSON lines a label set given as one string is split on --label-delimiter too: the same warning...
    joined = _jsonl(tmp_path / "joined.jsonl", [{"text": f"{text} {i}", "label": labels} for i in range(4)
                                                for text, labels in rows])
    assert main(["train", "--train-file", str(joined), "--multi-label", "--model", "boe", "--epochs", "1",
                 "--output", str(tmp_path / "joined"), "--quiet", "--no-report"]) == 0
    assert "warning: 2 classes hold ',' ('business,reuters', 'sports,reuters')" in capsys.readouterr().err
    # ...but given as lists, "a/b" is a name (a hierarchy), and --label-delimiter would change nothing.
    listed = _jsonl(tmp_path / "tree.jsonl", [{"text": f"t {i}", "label": [f"science/{topic}"]}
                                              for i, topic in enumerate(["physics", "biology"] * 4)])
    assert main(["train", "--train-file", str(listed), "--multi-label", "--model", "boe", "--epochs", "1",
                 "--output", str(tmp_path / "tree"), "--quiet", "--no-report"]) == 0
    assert "warning:" not in capsys.readouterr().err
    # A class that merely holds the character is not flagged.
    rows = [("a", "rock/pop"), ("b", "jazz"), ("c", "rock/pop | jazz")]
    genres = _csv(tmp_path / "genres.csv", [(f"{text} {i}", labels) for i in range(4) for text, labels in rows])
    assert main(["train", "--train-file", str(genres), "--multi-label", "--model",
                 "boe", "--epochs", "1", "--output", str(tmp_path / "genres"), "--quiet", "--no-report"]) == 0
    assert "warning:" not in capsys.readouterr().err


def test_a_multi_label_runs_epoch_lines_call_its_accuracy_subset_accuracy(tmp_path, capsys):
    # "acc 0.0000" beside a falling loss read as a broken run: a multi-label text counts only when its whole set is
    # right, as the test line's "subset accuracy" says.
    # Its F1 at a fixed 0.5 read as the run's own, which the tuned thresholds give only once training ends.
    rows = [("stocks fell", "business"), ("a late goal", "sports"), ("a vote on rates", "politics|business"),
            ("nothing to say", "")]
    train = _csv(tmp_path / "train.csv", [(f"{text} {i}", labels) for i in range(6) for text, labels in rows]
                 + [("a lone storm", "weather")])
    assert main(["train", "--train-file", str(train), "--multi-label", "--model", "boe", "--epochs", "1",
                 "--output", str(tmp_path / "run"), "--no-report"]) == 0
    out = capsys.readouterr()
    lines = (out.out + "\n" + out.err).splitlines()
    epoch = next(line for line in lines if line.startswith("epoch 1:"))
    assert re.match(r"epoch 1: train loss \S+ subset acc \S+ \| val loss \S+, at 0\.5: subset acc \S+ micro-F1 \S+ "
                    r"macro-F1 \S+ \|", epoch), epoch
    assert ("note: each epoch's label sets take a label where its probability reaches 0.5; the per-label thresholds "
            "are tuned on the validation split once training ends") in lines
    # The counts say how many texts carry no label (a share the labels' counts do not show), and a label of one
    # text (or none, held out) is warned of, as a single-label run's class is.
    counts = next(line for line in lines if line.startswith("training texts per label:"))
    assert re.fullmatch(r"training texts per label: business: \d+, politics: \d+, sports: \d+, weather: [01]; "
                        r"\d+ of \d+ texts carry no label", counts), counts
    assert any(line.startswith("warning: 1 of 4 classes has") and "('weather')" in line for line in lines), lines


def test_parquet_list_column(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"text": ["a", "b"], "label": [["x"], ["y", "x"]]}), path)
    assert load_file(path, multi_label=True).labels == [(0,), (0, 1)]


@pytest.mark.parametrize("bad, shown", [({"x": 1}, "{'x': 1}"), ([1.5], "1.5"), (["ok", ""], "empty label"),
                                        (None, "missing label set")])
def test_a_bad_label_set_names_file_line_column_and_value(tmp_path, bad, shown):
    path = _jsonl(tmp_path / "bad.jsonl", [{"text": "fine", "tags": ["a"]}, {"text": "broken", "tags": bad}])
    with pytest.raises(DataError) as err:
        load_file(path, label_column="tags", multi_label=True)
    message = str(err.value)
    assert "\n" not in message
    assert str(path) in message and "line 2" in message and "'tags'" in message and shown in message


@pytest.mark.parametrize("cell", ["NaN", " nan "])
def test_a_nan_label_cell_is_a_missing_label_set_not_a_class(tmp_path, cell):
    # pandas writes a missing value as "NaN" (na_rep, astype(str)): as in a single-label file, a gap in the data
    path = _csv(tmp_path / "tags.csv", [("fine", "a|b"), ("broken", cell)])
    with pytest.raises(DataError, match=rf"tags.csv, line 3: missing label set \({cell!r}\) .* in column 'label'$"):
        load_file(path, multi_label=True)
    rows = [{"text": "fine", "label": ["a"]}, {"text": "broken", "label": float("nan")}]
    path = _jsonl(tmp_path / "tags.jsonl", rows)
    with pytest.raises(DataError, match=r"tags.jsonl, line 2: missing label set \(nan\)"):
        load_file(path, multi_label=True)



@pytest.mark.parametrize("cell, kind", [("['a', 'b']", "list"), ('["a"]', "list"), ("[]", "list"),
                                        ("('a', 'b')", "tuple"), ("('a',)", "tuple"), ("()", "tuple"),
                                        ("{'a', 'b'}", "set"), ("set()", "set")])
def test_a_list_written_as_text_is_refused_not_made_one_class(tmp_path, cell, kind):
    # pandas' to_csv writes a column of lists so: read as written, "['a', 'b']" and "[]" were classes of their own;
    # tuples alike (MultiLabelBinarizer.inverse_transform's label sets, "('a',)"), and sets
    path = _csv(tmp_path / "tags.csv", [("fine", "a|b"), ("listed", cell)])
    with pytest.raises(DataError) as err:
        load_file(path, multi_label=True)
    message = str(err.value)
    assert "\n" not in message and f"{path}, line 3: label set {cell!r} is a {kind} written as text" in message
    assert "str.join('|')" in message and message.endswith("in column 'label'")


def test_a_label_in_brackets_is_still_a_label(tmp_path):
    path = _csv(tmp_path / "tags.csv", [("a", "[draft]|news"), ("b", "[draft]"), ("c", "(draft)"), ("d", "{}")])
    assert load_file(path, multi_label=True).label_names == ["(draft)", "[draft]", "news", "{}"]


def test_an_escaped_delimiter_is_refused_not_read_as_a_class_ending_in_a_backslash(tmp_path):
    path = _csv(tmp_path / "tags.csv", [("fine", "a|b"), ("escaped", "a\\|b|c")])
    with pytest.raises(DataError) as err:
        load_file(path, multi_label=True)
    message = str(err.value)
    assert "\n" not in message and f"{path}, line 3: label set 'a\\\\|b|c' escapes '|' with a backslash" in message
    assert "another --label-delimiter" in message
    # a backslash elsewhere in a name is the name's own
    assert load_file(_csv(tmp_path / "ok.csv", [("a", "x\\y|b")]), multi_label=True).label_names == ["b", "x\\y"]


@pytest.mark.parametrize("cell, member", [("x|NaN", "'NaN'"), ("x| nan |y", "' nan '"), ("x||y", "an empty label name")])
def test_a_nan_or_empty_member_of_a_label_set_is_refused_not_made_a_class(tmp_path, cell, member):
    # A whole NaN cell is a missing set (above); a NaN among names is the same gap (a pandas join of a set with a
    # missing value), not a class called "NaN" that a model would learn and predict.
    path = _csv(tmp_path / "tags.csv", [("fine", "x|y"), ("broken", cell)])
    with pytest.raises(DataError) as err:
        load_file(path, multi_label=True)
    message = str(err.value)
    assert "\n" not in message and f"{path}, line 3: label set {cell!r} holds " in message and member in message
    path = _jsonl(tmp_path / "tags.jsonl", [{"text": "fine", "label": ["x"]}, {"text": "broken", "label": ["x", "NaN"]}])
    with pytest.raises(DataError, match=r"tags.jsonl, line 2: label set \['x', 'NaN'\] holds 'NaN', a missing value"):
        load_file(path, multi_label=True)


def test_a_test_file_label_outside_training_is_refused(tmp_path):
    path = _jsonl(tmp_path / "test.jsonl", [{"text": "t", "label": ["x", "new"]}])
    with pytest.raises(DataError, match=r"line 1: label 'new'.*training labels"):
        load_file(path, multi_label=True, label_names=["x", "y"])


def test_validation_split_is_a_seeded_shuffle_that_keeps_label_sets():
    train = topics(n_train=300, n_test=10).train
    fit, val = train_validation_split(train, 0.2, seed=3)
    again, _ = train_validation_split(train, 0.2, seed=3)
    other, _ = train_validation_split(train, 0.2, seed=4)
    assert (len(fit), len(val)) == (240, 60) and fit.texts == again.texts and fit.texts != other.texts
    assert val.multi_label and all(isinstance(y, tuple) for y in val.labels)
    assert sorted(fit.texts + val.texts) == sorted(train.texts)


# --- metrics and thresholds ---------------------------------------------------

def _random_case(seed: int, n: int = 200, k: int = 4):
    rng = np.random.default_rng(seed)
    y = (rng.random((n, k)) < 0.3).astype(int)
    p = np.clip(0.6 * y + 0.5 * rng.random((n, k)) - 0.05, 0, 1)
    return y, p


@pytest.mark.parametrize("seed", [0, 1])
def test_metrics_match_scikit_learn(seed):
    y, p = _random_case(seed)
    thresholds = np.array([0.5, 0.3, 0.6, 0.45])
    m = multilabel_metrics(y, p, ["a", "b", "c", "d"], thresholds)
    pred = (p >= thresholds).astype(int)
    assert m["subset_accuracy"] == m["accuracy"] == pytest.approx(skm.accuracy_score(y, pred))
    assert m["hamming_loss"] == pytest.approx(skm.hamming_loss(y, pred))
    for average in ("micro", "macro", "weighted"):
        prf = skm.precision_recall_fscore_support(y, pred, average=average, zero_division=0)
        assert (m[f"{average}_precision"], m[f"{average}_recall"], m[f"{average}_f1"]) == pytest.approx(prf[:3])
    # Per text as scikit-learn scores it, except that an empty set predicted for a text without labels is right.
    both_empty = (y.sum(axis=1) == 0) & (pred.sum(axis=1) == 0)
    assert both_empty.sum() > 10  # the case is there to score
    prf = skm.precision_recall_fscore_support(y[~both_empty], pred[~both_empty], average="samples", zero_division=0)
    expected = [(value * (~both_empty).sum() + both_empty.sum()) / len(y) for value in prf[:3]]
    assert (m["samples_precision"], m["samples_recall"], m["samples_f1"]) == pytest.approx(expected)
    assert m["roc_auc"] == pytest.approx(skm.roc_auc_score(y, p, average="macro"))
    assert m["micro_roc_auc"] == pytest.approx(skm.roc_auc_score(y, p, average="micro"))
    assert m["average_precision"] == pytest.approx(skm.average_precision_score(y, p, average="macro"))
    assert m["micro_average_precision"] == pytest.approx(skm.average_precision_score(y, p, average="micro"))
    assert [m["per_class"][name]["average_precision"] for name in "abcd"] == pytest.approx(
        skm.average_precision_score(y, p, average=None))
    f1 = skm.f1_score(y, pred, average=None)
    assert [m["per_class"][name]["f1"] for name in "abcd"] == pytest.approx(f1)
    assert [m["per_class"][name]["support"] for name in "abcd"] == y.sum(axis=0).tolist()
    assert m["at_0.5"]["micro_f1"] == pytest.approx(skm.f1_score(y, (p >= 0.5).astype(int), average="micro"))


def test_the_label_set_macro_f1_interval_is_that_of_drawing_texts_again():
    """A multi-label macro-F1 has no confusion matrix whose cells could be drawn: the texts are drawn. Its bounds are
    within Monte Carlo noise of a plain bootstrap's, each draw scored by scikit-learn over the labels it holds or
    predicts (as ``multilabel_metrics`` scores the whole set), and they move with the seed only as noise does."""
    from attnclf.evaluation.multilabel import _seen, label_set_macro_f1_interval

    y, _ = _random_case(2, n=600, k=5)
    predicted = (0.3 * y + 0.6 * np.random.default_rng(3).random(y.shape) >= 0.5).astype(int)  # (some wrong)
    # A label one text has, and that was missed: a draw without that text neither holds nor predicts it, and its
    # macro-F1 leaves the label out (about a third of the draws); the others count it 0.
    y[:, 4], predicted[:, 4], y[7, 4] = 0, 0, 1
    rng = np.random.default_rng(3)
    drawn = [rng.integers(0, 600, 600) for _ in range(2000)]
    plain = np.percentile([skm.f1_score(y[i], predicted[i], average="macro", labels=_seen(y[i], predicted[i]),
                                        zero_division=0) for i in drawn], [2.5, 97.5])
    low, high = label_set_macro_f1_interval(y, predicted)
    assert low == pytest.approx(plain[0], abs=0.006) and high == pytest.approx(plain[1], abs=0.006)
    assert label_set_macro_f1_interval(y, predicted) == [low, high]  # (seeded)
    other = label_set_macro_f1_interval(y, predicted, seed=1)
    assert other != [low, high] and other == pytest.approx([low, high], abs=0.006)


def test_the_label_auc_interval_is_delongs_over_the_labels_an_auc_is_defined_for():
    """One label: the binary interval of a single-label run. Several: the interval of the mean of the defined labels'
    AUCs, as wide as a plain bootstrap of the texts finds (the labels' AUCs are read off the same texts)."""
    from attnclf.evaluation.metrics import roc_auc_interval
    from attnclf.evaluation.multilabel import label_auc_interval

    y, p = _random_case(4, n=500, k=4)
    assert label_auc_interval(y[:, :1], p[:, :1]) == roc_auc_interval(y[:, 0], np.stack([1 - p[:, 0], p[:, 0]], 1))
    y[:, 3] = 0  # (a label no text has: no AUC, left out of the mean as ``roc_auc`` leaves it out)
    low, high = label_auc_interval(y, p)
    assert (low + high) / 2 == pytest.approx(multilabel_metrics(y, p, list("abcd"))["roc_auc"], abs=1e-12)
    rng = np.random.default_rng(5)
    drawn = [rng.integers(0, 500, 500) for _ in range(600)]
    plain = np.percentile([skm.roc_auc_score(y[i][:, :3], p[i][:, :3], average="macro") for i in drawn], [2.5, 97.5])
    assert (high - low) == pytest.approx(plain[1] - plain[0], rel=0.15)
    assert label_auc_interval(np.zeros((40, 2)), p[:40, :2]) is None  # (no label with texts on both sides)
    assert label_auc_interval(y[:19], p[:19]) is None  # (fewer texts than the floor)


def test_multilabel_metrics_give_the_intervals_unless_asked_not_to():
    from attnclf.evaluation.multilabel import label_auc_interval, label_set_macro_f1_interval

    y, _ = _random_case(6, n=300)
    p = 0.3 * y + 0.6 * np.random.default_rng(7).random(y.shape)  # (overlapping: errors, and AUCs below 1)
    m = multilabel_metrics(y, p, list("abcd"))
    assert m["macro_f1_ci95"] == label_set_macro_f1_interval(y, predicted_sets(p))
    assert m["roc_auc_ci95"] == label_auc_interval(y, p)
    intervals_shown(m, "macro ROC AUC")
    lean = multilabel_metrics(y, p, list("abcd"), intervals=False)  # (the trainer's per-epoch validation)
    assert "macro_f1_ci95" not in lean and "roc_auc_ci95" not in lean


def test_the_printed_report_gives_the_samples_scores_the_metrics_give():
    # A text without labels, predicted none, is right: the report's "samples avg" row must say what samples_* say
    # (scikit-learn's own row scores it 0), or `evaluate` prints two samples-averaged F1s for one set of predictions.
    y, p = np.array([[1, 0], [0, 0], [1, 1]]), np.array([[.9, .1], [.1, .2], [.8, .3]])
    m = multilabel_metrics(y, p, ["a", "b"])
    samples_row = next(line for line in m["classification_report"].splitlines() if "samples avg" in line)
    precision, recall, f1 = (float(value) for value in samples_row.split()[2:5])
    assert (precision, recall, f1) == pytest.approx(
        (m["samples_precision"], m["samples_recall"], m["samples_f1"]), abs=5e-5)
    assert (precision, recall, f1) == pytest.approx((1.0, 5 / 6, 8 / 9), abs=5e-5)


def test_a_label_named_like_the_samples_row_keeps_its_own_scores():
    # Labels come from the user's file: one called "samples avg" has a row that reads like scikit-learn's last one.
    # Only that last row takes the per-text scores (rewriting the label's row too ran out of them: a traceback).
    from sklearn.metrics import classification_report

    y, p = np.array([[1, 0], [0, 0], [1, 1], [0, 1]]), np.array([[.9, .1], [.1, .2], [.8, .3], [.2, .2]])
    m = multilabel_metrics(y, p, ["samples avg", "b"])
    ours = m["classification_report"].rstrip().splitlines()
    theirs = classification_report(y, (p >= 0.5).astype(int), target_names=["samples avg", "b"], zero_division=0,
                                   digits=4).rstrip().splitlines()
    assert ours[:-1] == theirs[:-1]  # the label's row as scikit-learn wrote it
    assert [float(value) for value in ours[-1].split()[2:5]] == pytest.approx(
        [m["samples_precision"], m["samples_recall"], m["samples_f1"]], abs=5e-5)


def test_a_label_neither_true_nor_predicted_is_left_out_of_the_macro_average():
    y, p = np.array([[1, 0], [1, 0], [0, 0]]), np.array([[.9, .1], [.8, .2], [.1, .1]])
    m = multilabel_metrics(y, p, ["a", "b"])  # perfect on a; b never occurs and is never predicted
    assert m["macro_f1"] == m["macro_precision"] == m["macro_recall"] == 1.0  # as single-label macro-F1 skips it
    assert m["per_class"]["b"]["support"] == 0 and "b" not in m["classification_report"]
    y[2, 1] = 1  # b occurs and is missed: it counts again
    assert multilabel_metrics(y, p, ["a", "b"])["macro_f1"] == pytest.approx(0.5)


def test_roc_auc_skips_a_label_without_positives():
    y, p = _random_case(2)
    y[:, 1] = 0
    m = multilabel_metrics(y, p, ["a", "b", "c", "d"])
    assert m["per_class"]["b"]["roc_auc"] is None
    defined = [skm.roc_auc_score(y[:, i], p[:, i]) for i in (0, 2, 3)]
    assert m["roc_auc"] == pytest.approx(np.mean(defined))
    assert m["per_class"]["b"]["average_precision"] is None  # (scikit-learn scores it 0, with a warning)
    defined = [skm.average_precision_score(y[:, i], p[:, i]) for i in (0, 2, 3)]
    assert m["average_precision"] == pytest.approx(np.mean(defined))


def test_threshold_tuning_picks_the_f1_maximising_cut():
    # Keeping the top 4 (0.9, 0.8, 0.7, 0.6) gives F1 6/7, better than any other cut.
    y = np.array([[1], [1], [0], [1], [0], [0]])
    p = np.array([[0.9], [0.8], [0.7], [0.6], [0.3], [0.2]])
    thresholds, f1 = tune_thresholds(y, p)
    assert 0.3 < thresholds[0] <= 0.6 and f1[0] == pytest.approx(6 / 7)
    assert skm.f1_score(y[:, 0], predicted_sets(p, thresholds)[:, 0]) == pytest.approx(6 / 7)


@pytest.mark.parametrize("seed", [0, 5])
def test_tuned_thresholds_beat_every_other_threshold_on_random_data(seed):
    y, p = _random_case(seed, n=80, k=3)
    p = np.round(p, 2)  # ties: equal probabilities must fall on the same side
    thresholds, f1 = tune_thresholds(y, p)
    for label in range(3):
        achieved = skm.f1_score(y[:, label], p[:, label] >= thresholds[label])
        assert achieved == pytest.approx(f1[label])
        best = max(skm.f1_score(y[:, label], p[:, label] >= t) for t in np.unique(p[:, label]))
        assert achieved == pytest.approx(best)


def test_tied_probabilities_are_cut_together_and_the_tuned_f1_is_the_one_the_threshold_gives():
    # Keeping the top two would score F1 1.0, but the second ties with a negative: no threshold keeps one of them
    # without the other, so the best reachable cut keeps both (F1 0.8), and that is the F1 reported.
    y = np.array([[1], [1], [0], [0]])
    p = np.array([[0.9], [0.8], [0.8], [0.1]])
    thresholds, f1 = tune_thresholds(y, p)
    assert 0.1 < thresholds[0] < 0.8
    assert f1[0] == pytest.approx(0.8) == skm.f1_score(y[:, 0], predicted_sets(p, thresholds)[:, 0])


def test_a_label_without_validation_positives_keeps_threshold_half():
    thresholds, f1 = tune_thresholds(np.array([[0, 1], [0, 0]]), np.array([[0.9, 0.8], [0.1, 0.2]]))
    assert thresholds[0] == 0.5 and f1[0] == 0.0 and f1[1] == 1.0


def test_loss_is_the_mean_over_cells_once_divided_by_texts_and_balanced_weights_positives():
    import torch

    from attnclf.training.multilabel import multilabel_loss

    targets = np.array([[1, 0, 0], [0, 0, 1], [0, 0, 1], [0, 0, 1]])
    logits = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    plain = multilabel_loss(targets, "none")(logits, torch.tensor(targets).float()).sum() / len(targets)
    assert plain.item() == pytest.approx(
        torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.tensor(targets).float()).item())
    balanced = multilabel_loss(targets, "balanced")
    assert balanced.pos_weight.tolist() == pytest.approx([3.0, 4.0, 1 / 3])  # negatives / positives, 0 counted as 1


def test_balanced_positive_weights_count_each_text_by_its_example_weight():
    from attnclf.text.batching import BucketBatches
    from attnclf.training.trainer import TrainConfig, _WeightedLoss

    targets = np.array([[1, 0, 0], [0, 0, 1], [0, 0, 1], [0, 0, 1], [1, 1, 0]])
    config, names = TrainConfig(class_weights="balanced"), ["a", "b", "c"]
    weighted = _WeightedLoss(BucketBatches([[2]] * 5, targets, weights=[1, 2, 1, 1, 0]), names, config, True)
    # As single-label runs' balanced weights: a text of weight 2 counts as two copies, one of weight 0 as none.
    copies = _WeightedLoss(BucketBatches([[2]] * 5, targets[[0, 1, 1, 2, 3]]), names, config, True)
    assert weighted.criterion.pos_weight.tolist() == copies.criterion.pos_weight.tolist() == [4.0, 5.0, 0.25]


# --- a run end to end ---------------------------------------------------------

@pytest.fixture(scope="module")
def topic_files(tmp_path_factory) -> tuple[Path, Path]:
    """Generated topics: training data as JSON lines with lists, test data as CSV with "|"-joined cells."""
    root = tmp_path_factory.mktemp("topics")
    splits = topics(n_train=1200, n_test=300)
    names = splits.train.label_names
    train = _jsonl(root / "train.jsonl", [{"text": t, "topics": [names[i] for i in y]}
                                         for t, y in zip(splits.train.texts, splits.train.labels)])
    with open(root / "test.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "topics"])
        writer.writerows((t, "|".join(names[i] for i in y)) for t, y in zip(splits.test.texts, splits.test.labels))
    return train, root / "test.csv"


@pytest.fixture(scope="module")
def topic_run(topic_files, tmp_path_factory) -> Path:
    train, test = topic_files
    out = tmp_path_factory.mktemp("runs") / "topics"
    assert main(["train", "--train-file", str(train), "--test-file", str(test), "--label-column", "topics",
                 "--multi-label", "--epochs", "8", "--lr", "3e-3", "--set", "d_model=32", "--set", "layers=1",
                 "--threads", "1", "--output", str(out), "--quiet"]) == 0
    return out


def test_training_learns_label_sets_well_above_a_constant_guess(topic_run, topic_files):
    metrics = json.loads((topic_run / "metrics.json").read_text())
    test = load_file(topic_files[1], label_column="topics", multi_label=True,
                     label_names=json.loads((topic_run / "labels.json").read_text()))
    y = multi_hot(test.labels, test.num_classes)
    # The best constant guess for micro-F1 predicts every label for every text.
    baseline = skm.f1_score(y, np.ones_like(y), average="micro")
    assert baseline < 0.5 and metrics["micro_f1"] > baseline + 0.3
    assert metrics["multi_label"] and metrics["num_examples"] == 300
    history = [json.loads(line) for line in (topic_run / "history.jsonl").read_text().splitlines()]
    assert "val_micro_f1" in history[0] and history[-1]["train_loss"] < history[0]["train_loss"]
    config = json.loads((topic_run / "config.json").read_text())
    assert config["settings"]["data"]["multi_label"] and config["settings"]["train"]["monitor"] == "loss"
    page = (topic_run / "report.html").read_text()
    assert "multi-label" in page
    assert f"<tr><td>average precision (macro over labels)</td><td>{metrics['average_precision']:.4f}</td></tr>" in page
    assert "<th>ROC AUC</th><th>average precision</th><th>support</th>" in page
    assert f"<td>{metrics['micro_average_precision']:.4f}</td><td></td></tr>" in page  # the micro average's row
    # (the note of what is not drawn named the ROC curve alone once the precision-recall curve was added beside it)
    assert "The confusion matrix and the ROC and precision-recall curves show one class per text" in page


def test_a_loaded_run_predicts_label_sets_at_its_tuned_thresholds(topic_run):
    from attnclf import Classifier

    clf = Classifier.load(topic_run, device="cpu")
    saved = json.loads((topic_run / "thresholds.json").read_text())["thresholds"]
    assert clf.multi_label and clf.thresholds.tolist() == [saved[name] for name in clf.label_names]
    texts = ["the coach and the referee at the stadium", "bread soup and cheese for dinner with the orchestra",
             "today some people said more"]
    probabilities = clf.predict_proba(texts)
    predictions = clf.predict(texts)
    assert predictions[0].labels == ["sports"]
    assert set(predictions[1].labels) == {"food", "music"}
    assert predictions[2].labels == []
    for row, prediction in zip(probabilities, predictions):
        expected = {name for name, p, t in zip(clf.label_names, row, clf.thresholds) if p >= t}
        assert set(prediction.labels) == expected
        assert prediction.probabilities == pytest.approx(dict(zip(clf.label_names, row.tolist())))


def test_evaluate_and_predict_commands(topic_run, topic_files, capsys):
    assert main(["evaluate", str(topic_run), "--test-file", str(topic_files[1]), "--label-column", "topics",
                 "--json", "--device", "cpu"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    saved = json.loads((topic_run / "metrics.json").read_text())
    assert evaluated["micro_f1"] == pytest.approx(saved["micro_f1"], abs=1e-6)
    # Without --label-column the test file is read with the run's own columns.
    assert main(["evaluate", str(topic_run), "--test-file", str(topic_files[1]), "--json", "--device", "cpu"]) == 0
    assert json.loads(capsys.readouterr().out)["micro_f1"] == pytest.approx(saved["micro_f1"], abs=1e-6)
    assert main(["predict", str(topic_run), "a goal by the athlete", "--device", "cpu"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["labels"] == ["sports"] and set(record["probabilities"]) == {
        "food", "music", "politics", "science", "sports"}


MIXED, NEITHER = "bread soup and cheese for dinner with the orchestra", "today some people said more"


def test_a_multi_label_run_explains_each_predicted_label_or_its_most_probable_one(topic_run):
    from attnclf import Classifier

    clf = Classifier.load(topic_run, device="cpu")
    predicted = clf.predict([MIXED, NEITHER])
    mixed = clf.explain([MIXED], method="integrated-gradients")
    # One explanation per predicted label, most probable first, each on the label's own sigmoid.
    assert [e.target for e in mixed] == predicted[0].labels and len(mixed) == 2
    for e in mixed:
        assert e.labels == predicted[0].labels and e.label is None
        assert e.probability == pytest.approx(predicted[0].probabilities[e.target])
        assert e.completeness_error <= 0.01 and e.log_odds_change > 0  # the label's logit rose from the baseline
        record = e.to_dict()
        assert record["labels"] == predicted[0].labels and "label" not in record and record["target"] == e.target
    assert mixed[0].scores != mixed[1].scores  # each label's own evidence
    # None predicted: the most probable label, which a reader can still ask about.
    (neither,) = clf.explain([NEITHER])
    assert neither.labels == [] and neither.target == max(predicted[1].probabilities,
                                                          key=predicted[1].probabilities.get)
    # Asked for one label: that one only, predicted or not.
    asked = clf.explain([MIXED, NEITHER], target="sports", method="occlusion")
    assert [e.target for e in asked] == ["sports", "sports"]
    music = clf.explain([MIXED], method="occlusion", target="music")[0]
    assert max(music.top_tokens(3), key=lambda pair: pair[1])[0] in {"orchestra"}


def test_label_set_examples_are_the_surest_exact_sets_and_the_most_wrong_ones_as_evaluate_errors_ranks_them():
    from attnclf.evaluation.metrics import pick_label_set_examples, wrong_label_set_rows

    texts, names, thresholds = ["t1", "t2", "t3", "t4", "t5", "t6"], ["a", "b", "c"], np.array([.5, .5, .5])
    probabilities = np.array([[.9, .1, .1], [.6, .8, .2], [.99, .01, .01], [.1, .1, .1], [.7, .7, .7], [.2, .1, .1]])
    labels = [(0,), (0, 1), (0,), (), (0,), (0,)]
    picked = pick_label_set_examples(texts, labels, probabilities, thresholds, names, k=2)
    # Exactly right, most probable set first (each label's probability of being given or not, multiplied); t4's
    # empty set is right too, but has no label to explain.
    assert [(r["row"], r["predicted_labels"]) for r in picked["correct"]] == [(3, ["a"]), (1, ["a"])]
    assert [r["set_probability"] for r in picked["correct"]] == pytest.approx([.99 ** 3, .9 ** 3])
    assert picked["incorrect"] == wrong_label_set_rows(texts, labels, probabilities, thresholds, names)[:2]
    assert [(r["row"], r["missed_labels"], r["extra_labels"]) for r in picked["incorrect"]] == [
        (5, [], ["b", "c"]), (6, ["a"], [])]


def test_the_report_explains_exact_and_most_wrong_label_sets_for_their_labels(topic_run, topic_files):
    # The report drew no examples for a multi-label run: pick_examples reads one class per text.
    from attnclf import Classifier
    from attnclf.evaluation.metrics import pick_label_set_examples

    clf = Classifier.load(topic_run, device="cpu")
    test = load_file(topic_files[1], label_column="topics", multi_label=True, label_names=clf.label_names)
    picked = pick_label_set_examples(test.texts, test.labels, clf.predict_proba(test.texts), clf.thresholds,
                                     clf.label_names)
    assert len(picked["correct"]) == len(picked["incorrect"]) == 3
    page = (topic_run / "report.html").read_text()
    section = page.split("<h2>Examples, explained by occlusion</h2>")[1].split("</section>")[0]
    exact, wrong = section.split("<h3>Most wrong label sets")
    assert "<h3>Most confident exactly right label sets</h3>" in exact
    for part, rows in ((exact, picked["correct"]), (wrong, picked["incorrect"])):
        for row in rows:  # each text named with its labels, then a token map per label explained
            assert html.escape(f"true {', '.join(row['true_labels'])}; predicted "
                               f"{', '.join(row['predicted_labels']) or 'no label'}") in re.sub("</?b(di)?>", "", part)
    # Each predicted label; where none is, the missed label nearest to being given, said to be one.
    explained = re.findall(r"explaining <b><bdi>([^<]+)</bdi></b>", section)
    def nearest_missed(row):
        return max(row["missed_labels"], key=lambda name: row[f"probability:{name}"])

    assert explained == [label for row in picked["correct"] + picked["incorrect"]
                         for label in row["predicted_labels"] or [nearest_missed(row)]]
    assert section.count('<div class="tokens">') in (len(explained), 2 * len(explained))  # (pooling beside)
    assert ("a missed label, none being predicted" in section) == any(not row["predicted_labels"]
                                                                      for row in picked["incorrect"])


def test_explain_command_on_a_multi_label_run(topic_run, tmp_path, capsys):
    assert main(["explain", str(topic_run), MIXED, "--device", "cpu", "--format", "json",
                 "--method", "occlusion,grad-input"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["target"], r["method"]) for r in records] == [
        (records[0]["labels"][0], "occlusion"), (records[0]["labels"][0], "grad-input"),
        (records[0]["labels"][1], "occlusion"), (records[0]["labels"][1], "grad-input")]
    assert set(records[0]["labels"]) == {"food", "music"}
    assert main(["explain", str(topic_run), MIXED, NEITHER, "--device", "cpu", "--color", "never"]) == 0
    out = capsys.readouterr().out
    first, second = records[0]["labels"]
    assert f"predicted {first} (" in out and f"explaining {second} (" in out
    assert "predicted no label (none reaches its threshold), explaining " in out
    assert main(["explain", str(topic_run), NEITHER, "--device", "cpu", "--target", "music", "-o",
                 str(tmp_path / "why.html")]) == 0
    page = (tmp_path / "why.html").read_text()
    assert "explaining music (" in page
    assert main(["explain", str(topic_run), MIXED, "--device", "cpu", "-o", str(tmp_path / "why.png")]) == 0
    assert sorted(p.name for p in tmp_path.glob("why*.png")) == ["why-1.png", "why-2.png"]
    assert main(["explain", str(topic_run), MIXED, "--device", "cpu", "--target", "cats"]) == 2
    err = capsys.readouterr().err
    assert "unknown target class 'cats'" in err and len(err.strip().splitlines()) == 1


def test_faithfulness_of_a_multi_label_run_deletes_from_each_explained_labels_probability(topic_run, capsys):
    assert main(["faithfulness", str(topic_run), "--examples", "6", "--methods", "occlusion,grad-input",
                 "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    saved = json.loads((topic_run / "faithfulness.json").read_text())
    assert saved["multi_label"] and saved["examples"] == 6 and saved["explained"] >= 6
    assert set(saved["methods"]) == {"occlusion", "grad-input"}
    assert "explained label's own probability" in out


def _faithfulness_section(page: str) -> str:
    return page.split("<h2>Faithfulness</h2>")[1].split("</section>")[0]


def test_report_faithfulness_measures_a_multi_label_run_and_shows_it_for_its_labels(topic_run, tmp_path):
    # report --faithfulness refused a multi-label run, whose page had no faithfulness section to show it in.
    run = tmp_path / "topics"
    shutil.copytree(topic_run, run)
    (run / "faithfulness.json").unlink(missing_ok=True)  # (another test's measurement, saved in the fixture)
    assert main(["report", str(run), "--faithfulness", "--examples", "6", "--device", "cpu"]) == 0
    saved = json.loads((run / "faithfulness.json").read_text())
    assert saved["multi_label"] and saved["examples"] == 6 and saved["explained"] >= 6
    page = (run / "report.html").read_text(encoding="utf-8")
    section = html.unescape(_faithfulness_section(page))
    assert "Deletion test on 6 texts" in section and "explained label's own probability" in section
    assert f"{saved['explained']} text-label pairs" in section and "predicted class" not in section
    assert "Uniform-attention check" in section and "subset accuracy" in section
    assert "rank correlation" in section and 'alt="deletion test"' in section
    assert (run / "plots" / "deletion.png").read_bytes().startswith(b"\x89PNG")
    # The test section no longer says the faithfulness measurements are not drawn for a multi-label run.
    assert "faithfulness" not in page.split("<h2>Faithfulness</h2>")[0].split("multi-label)</h2>")[1]


def test_a_multi_label_runs_page_shows_the_faithfulness_attnclf_faithfulness_saved(topic_run, tmp_path):
    run = tmp_path / "topics"
    shutil.copytree(topic_run, run)
    (run / "faithfulness.json").unlink(missing_ok=True)  # (an earlier test measures the module's run)
    assert main(["report", str(run), "--device", "cpu"]) == 0
    assert "Not measured for these weights" in _faithfulness_section((run / "report.html").read_text())
    assert main(["faithfulness", str(run), "--examples", "5", "--methods", "occlusion", "--device", "cpu"]) == 0
    assert main(["report", str(run), "--device", "cpu"]) == 0
    section = html.unescape(_faithfulness_section((run / "report.html").read_text()))
    assert "Deletion test on 5 texts" in section and "explained label's own probability" in section


def test_a_multi_label_runs_deletion_plot_drops_the_explained_labels_probability():
    from attnclf.report import plots

    ks = ["1", "3", "5", "10%"]
    drops, random_drops = {"occlusion": {k: 0.2 for k in ks}}, {k: 0.1 for k in ks}
    assert plots.deletion_figure(drops, random_drops).axes[0].get_ylabel() == "mean drop in p(predicted class)"
    assert (plots.deletion_figure(drops, random_drops, multi_label=True).axes[0].get_ylabel()
            == "mean drop in p(explained label)")


TOPIC_TEXTS = ["the coach and the referee at the stadium", "bread soup and cheese for dinner with the orchestra",
               "today some people said more", "", "a goal by the athlete " * 30]


@pytest.fixture(scope="module")
def topic_export(topic_run, tmp_path_factory) -> Path:
    """``topic_run``'s ONNX export, float32 and int8, measured on its own test texts (tests only read it)."""
    out = tmp_path_factory.mktemp("topic-export") / "onnx"
    assert main(["export", str(topic_run), "--output", str(out), "--quantize", "--check-examples", "200"]) == 0
    return out


def test_a_multi_label_export_records_its_thresholds_and_label_set_parity(topic_run, topic_export, topic_files,
                                                                          tmp_path):
    from attnclf.export.onnx import PARITY_TOLERANCE

    manifest = json.loads((topic_export / "export.json").read_text())
    saved = json.loads((topic_run / THRESHOLDS_FILE).read_text())["thresholds"]
    assert manifest["multi_label"] is True and manifest["thresholds"] == saved
    parity = manifest["parity"]
    assert parity["texts"] == 200 and parity["prediction_agreement"] == 1.0
    assert parity["max_abs_diff"] <= PARITY_TOLERANCE
    # Accuracy of a label set is the whole set right (subset accuracy), as `evaluate` reports it.
    assert 0 < parity["torch_accuracy"] == parity["onnx_accuracy"] <= 1
    assert manifest["int8"]["accuracy_change"] == pytest.approx(manifest["int8"]["accuracy"] - parity["torch_accuracy"])
    # A file of the user's is read as the run read its test file: label sets, "|"-joined in CSV.
    assert main(["export", str(topic_run), "--output", str(tmp_path / "checked"), "--check-file", str(topic_files[1]),
                 "--check-examples", "50"]) == 0
    assert json.loads((tmp_path / "checked" / "export.json").read_text())["parity"]["texts"] == 50


def test_a_multi_label_export_predicts_the_label_sets_pytorch_predicts(topic_run, topic_export):
    from attnclf import Classifier
    from attnclf.export import OnnxClassifier
    from attnclf.prediction import LabelSetPrediction

    torch_clf, onnx_clf = Classifier.load(topic_run, device="cpu"), OnnxClassifier.load(topic_export)
    assert onnx_clf.multi_label and onnx_clf.thresholds.tolist() == torch_clf.thresholds.tolist()
    np.testing.assert_allclose(onnx_clf.predict_proba(TOPIC_TEXTS), torch_clf.predict_proba(TOPIC_TEXTS), atol=1e-4)
    np.testing.assert_allclose(onnx_clf.logits(TOPIC_TEXTS), torch_clf.logits(TOPIC_TEXTS), atol=1e-4)
    for want, have in zip(torch_clf.predict(TOPIC_TEXTS), onnx_clf.predict(TOPIC_TEXTS)):
        assert isinstance(have, LabelSetPrediction)
        assert (have.labels, have.tokens) == (want.labels, want.tokens)
        assert have.probabilities == pytest.approx(want.probabilities, abs=1e-4)
    int8 = OnnxClassifier.load(topic_export, int8=True).predict(TOPIC_TEXTS[:2])
    assert all(isinstance(p, LabelSetPrediction) for p in int8)
    assert "multi_label=True" in repr(onnx_clf)


def test_predict_with_the_onnx_backend_writes_a_multi_label_runs_label_sets(topic_run, topic_export, tmp_path, capsys):
    texts = TOPIC_TEXTS[:3]
    answers = {}
    for backend, where in (("torch", topic_run), ("onnx", topic_export)):
        assert main(["predict", str(where), *texts, "--backend", backend]) == 0
        answers[backend] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        output = tmp_path / f"{backend}.csv"
        assert main(["predict", str(where), *texts, "--backend", backend, "--output", str(output)]) == 0
        with open(output, newline="", encoding="utf-8") as f:
            answers[f"{backend} file"] = [row["predicted_labels"] for row in csv.DictReader(f)]
    assert [a["labels"] for a in answers["onnx"]] == [a["labels"] for a in answers["torch"]]
    assert answers["onnx"][0]["labels"] == ["sports"] and "label" not in answers["onnx"][0]
    assert answers["onnx file"] == answers["torch file"] == ["|".join(a["labels"]) for a in answers["torch"]]


def test_serve_with_the_onnx_backend_answers_a_multi_label_runs_label_sets(topic_run, topic_export):
    from fastapi.testclient import TestClient

    from attnclf import Classifier
    from attnclf.export import OnnxClassifier
    from attnclf.serve.app import create_app

    expected = Classifier.load(topic_run, device="cpu").predict(TOPIC_TEXTS)
    with TestClient(create_app(OnnxClassifier.load(topic_export))) as client:
        answer = client.post("/predict", json={"texts": TOPIC_TEXTS})
        assert answer.status_code == 200, answer.text
        assert [got["labels"] for got in answer.json()["predictions"]] == [want.labels for want in expected]
        assert "label" not in answer.json()["predictions"][0]
        about = client.get("/model").json()
        saved = json.loads((topic_run / THRESHOLDS_FILE).read_text())["thresholds"]
        assert about["backend"] == "onnx" and about["multi_label"] is True and about["thresholds"] == saved


def test_a_multi_label_exports_thresholds_are_checked_and_an_older_attnclf_cannot_misread_it(topic_export, tmp_path):
    import shutil

    from attnclf.errors import RunDirError
    from attnclf.export import OnnxClassifier

    manifest = json.loads((topic_export / "export.json").read_text())
    # A reader of format 1 knows no sigmoid: it would take the label probabilities for a softmax's, so it is refused.
    assert manifest["format_version"] == 2
    edited = tmp_path / "edited"
    for field, value, words in (("thresholds", {"sports": 0.5}, "no threshold for label 'food'"),
                                ("thresholds", dict.fromkeys(manifest["thresholds"], 1.5), "from 0 to 1, got 1.5"),
                                ("multi_label", "yes", "multi_label must be true or false"),
                                ("format_version", 1, "multi_label needs format_version 2")):
        shutil.rmtree(edited, ignore_errors=True)
        shutil.copytree(topic_export, edited)
        (edited / "export.json").write_text(json.dumps(manifest | {field: value}))
        with pytest.raises(RunDirError) as caught:
            OnnxClassifier.load(edited)
        message = str(caught.value)
        assert words in message and "export.json" in message and "\n" not in message


def _sports_threshold_between(clf, texts) -> float:
    """A threshold of "sports" that some of ``texts`` reach and some do not, on the other side of its tuned one for
    at least one text: applying it changes some label set."""
    sports = clf.predict_proba(texts)[:, clf.label_names.index("sports")].astype(np.float64)
    tuned = clf.thresholds[clf.label_names.index("sports")]
    below = sports[sports < tuned]
    assert len(below) and (sports >= tuned).any()
    return float(below.max())  # the most probable text under the tuned threshold now reaches it


def test_a_label_threshold_changes_that_label_alone_in_predict_on_either_backend(topic_run, topic_export, capsys):
    from attnclf import Classifier
    from attnclf.export import OnnxClassifier

    clf = Classifier.load(topic_run, device="cpu")
    texts = ["the coach and the referee at the stadium", "a goal by the athlete at dinner", "the band at the match",
             "bread soup and cheese for dinner with the orchestra", "today some people said more"] * 2
    p = _sports_threshold_between(clf, texts)
    plain, applied = clf.predict(texts), clf.predict(texts, threshold=("sports", p))
    assert [a.labels for a in applied] != [a.labels for a in plain]
    for before, after in zip(plain, applied):
        assert ("sports" in after.labels) == (after.probabilities["sports"] >= p)
        assert [x for x in after.labels if x != "sports"] == [x for x in before.labels if x != "sports"]
    onnx = OnnxClassifier.load(topic_export).predict(texts, threshold=f"sports={p!r}")
    assert [a.labels for a in onnx] == [a.labels for a in applied]
    for where, backend in ((topic_run, "torch"), (topic_export, "onnx")):
        assert main(["predict", str(where), *texts, "--backend", backend, "--threshold", f"sports={p!r}"]) == 0
        assert [json.loads(line)["labels"] for line in capsys.readouterr().out.splitlines()] == [
            a.labels for a in applied]
    assert main(["predict", str(topic_run), "a goal", "--threshold", "sport=0.5"]) == 2
    err = capsys.readouterr().err
    assert "--threshold: 'sport' is not one of the run's 5 labels" in err and len(err.strip().splitlines()) == 1


def test_evaluate_scores_a_multi_label_run_with_one_labels_threshold_replaced(topic_run, topic_files, capsys):
    assert main(["evaluate", str(topic_run), "--test-file", str(topic_files[1]), "--json", "--device", "cpu"]) == 0
    tuned = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(topic_run), "--test-file", str(topic_files[1]), "--json", "--device", "cpu",
                 "--threshold", "sports=0.99"]) == 0
    applied = json.loads(capsys.readouterr().out)
    assert applied["threshold"] == {"class": "sports", "probability": 0.99}
    assert applied["per_class"]["sports"]["threshold"] == 0.99
    assert applied["per_class"]["sports"]["recall"] < tuned["per_class"]["sports"]["recall"]
    for label in ("food", "music", "politics", "science"):
        assert applied["per_class"][label] == tuned["per_class"][label]
    assert main(["evaluate", str(topic_run), "--test-file", str(topic_files[1]), "--device", "cpu",
                 "--threshold", "sports=0.99"]) == 0
    assert ("predicted by --threshold: 'sports' when its probability is at least 0.99; the other labels at their "
            "own thresholds (thresholds.json)") in capsys.readouterr().out


def test_operating_points_of_a_label_read_its_own_column_of_the_label_sets(topic_run, topic_files, capsys):
    from attnclf import Classifier

    assert main(["evaluate", str(topic_run), "--test-file", str(topic_files[1]), "--json", "--device", "cpu",
                 "--operating-points", "sports"]) == 0
    points = json.loads(capsys.readouterr().out)["operating_points"]
    clf = Classifier.load(topic_run, device="cpu")
    test = load_file(topic_files[1], label_column="topics", multi_label=True, label_names=clf.label_names)
    truth = multi_hot(test.labels, len(clf.label_names))[:, clf.label_names.index("sports")].astype(bool)
    sports = clf.predict_proba(test.texts)[:, clf.label_names.index("sports")].astype(np.float64)
    assert points["class"] == "sports" and points["positives"] == truth.sum() and points["num_examples"] == 300
    at_half = points["thresholds"][4]
    flagged = sports >= 0.5
    assert at_half["threshold"] == 0.5 and at_half["flagged"] == flagged.sum()
    assert at_half["precision"] == pytest.approx((flagged & truth).sum() / flagged.sum())
    assert at_half["recall"] == pytest.approx((flagged & truth).sum() / truth.sum())
    assert points["apply"].startswith("--threshold sports=")
    assert "--split validation" not in points["note"] and "tuned" in points["note"]


def test_serve_applies_a_labels_threshold_and_says_so(topic_run, topic_export):
    from fastapi.testclient import TestClient

    from attnclf import Classifier
    from attnclf.export import OnnxClassifier
    from attnclf.serve.app import create_app

    texts = ["the coach and the referee at the stadium", "a goal by the athlete at dinner", "the band at the match"]
    clf = Classifier.load(topic_run, device="cpu")
    expected = [a.labels for a in clf.predict(texts, threshold=("sports", 0.99))]
    for model in (clf, OnnxClassifier.load(topic_export)):
        with TestClient(create_app(model, threshold=("sports", 0.99))) as client:
            answer = client.post("/predict", json={"texts": texts})
            assert [got["labels"] for got in answer.json()["predictions"]] == expected
            about = client.get("/model").json()
            assert about["threshold"] == {"class": "sports", "probability": 0.99}
            assert about["thresholds"]["sports"] == 0.99  # (the cut /predict applies)


def test_serve_answers_a_multi_label_runs_label_sets_at_its_thresholds(topic_run):
    from fastapi.testclient import TestClient

    from attnclf import Classifier
    from attnclf.explain.explanation import explain_each
    from attnclf.serve.app import create_app

    clf = Classifier.load(topic_run, device="cpu")
    texts = ["the coach and the referee at the stadium", "bread soup and cheese for dinner with the orchestra",
             "today some people said more"]
    with TestClient(create_app(clf)) as client:
        answer = client.post("/predict", json={"texts": texts})
        assert answer.status_code == 200, answer.text
        for got, expected in zip(answer.json()["predictions"], clf.predict(texts)):
            assert got["labels"] == expected.labels
            assert got["probabilities"] == pytest.approx(expected.probabilities)
            assert (got["unknown_tokens"], got["tokens_read"]) == (expected.unknown_tokens, expected.tokens_read)
            assert "label" not in got and "confidence" not in got  # (a single label's fields would mislead)
        assert answer.json()["predictions"][2]["labels"] == []
        about = client.get("/model").json()
        assert about["multi_label"] and about["thresholds"] == pytest.approx(dict(zip(clf.label_names,
                                                                                      clf.thresholds.tolist())))
        schema = client.get("/openapi.json").json()
        answered = schema["components"]["schemas"]["LabelSetOut"]["properties"]
        assert set(answered) == {"labels", "probabilities", "unknown_tokens", "tokens_read"}
        assert undescribed(schema) == []  # (the label sets' schemas too, which only a multi-label run's shows)
        assert "/explain" in schema["paths"]
        explained = client.post("/explain", json={"text": texts[1], "method": ["occlusion", "grad-input"]})
        assert explained.status_code == 200, explained.text
        answers = explained.json()["explanations"]
        predicted = clf.predict(texts[1:2])[0].labels
        assert [(e["target"], e["method"]) for e in answers] == [
            (label, method) for label in predicted for method in ("occlusion", "grad-input")]
        assert all(e["labels"] == predicted and "label" not in e for e in answers)
        one = client.post("/explain", json={"text": texts[2], "target": "food"}).json()["explanations"]
        assert [e["target"] for e in one] == ["food"]
        # Its label sets in place of a label, as /explain answered them before its answer had a schema.
        explains_as_to_dict(client, {"text": texts[1], "method": ["occlusion", "integrated-gradients"]},
                            explain_each(clf, texts[1:2], ["occlusion", "integrated-gradients"]))
        explains_as_to_dict(client, {"text": texts[2]}, clf.explain(texts[2:]))  # (none predicted: labels [])
        explains_as_to_dict(client, {"text": texts[2], "target": "food"}, clf.explain(texts[2:], target="food"))
        description = schema["info"]["description"]
        assert "multi-label" in description and "not for a multi-label run" not in description
        assert "each label it predicts" in description
        assert about["explain_methods"] and about["explain_default"] == "occlusion"


def test_the_docs_of_a_multi_label_service_show_its_label_sets_answer_fields(topic_run):
    from fastapi.testclient import TestClient

    from attnclf import Classifier
    from attnclf.serve.app import create_app

    with TestClient(create_app(Classifier.load(topic_run, device="cpu"))) as client:
        tables = docs_tables(client.get("/docs").text)
        schemas = client.get("/openapi.json").json()["components"]["schemas"]
    predicted = tables["POST /predict"]["answer (200)"]
    assert predicted == {"predictions": schemas["LabelSetResponse"]["properties"]["predictions"]["description"],
                         **{f"predictions[].{name}": field["description"]
                            for name, field in schemas["LabelSetOut"]["properties"].items()}}
    assert "predictions[].labels" in predicted and "predictions[].label" not in predicted  # (a single label's: none)
    explained = tables["POST /explain"]["answer (200)"]
    assert explained["explanations[].labels"] == schemas["ExplanationOut"]["properties"]["labels"]["description"]


def test_serve_bounds_a_multi_label_explain_by_the_labels_each_text_is_explained_for(topic_run):
    from fastapi.testclient import TestClient

    from attnclf import Classifier
    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits

    clf = Classifier.load(topic_run, device="cpu")
    two, none = "bread soup and cheese for dinner with the orchestra", "today some people said more"
    assert len(clf.predict([two])[0].labels) == 2 and clf.predict([none])[0].labels == []  # (what is counted)
    methods = ["occlusion", "grad-input"]
    # 2 methods x (2 labels of one text + 1, the most probable, of the other): 6 explanations, where texts x methods
    # counted 4.
    with TestClient(create_app(clf, ServeLimits(max_explain_batch=5))) as client:
        refused = client.post("/explain", json={"texts": [two, none], "method": methods})
        assert refused.status_code == 413, refused.text
        assert refused.json()["detail"] == ("6 explanations in one request (2 texts x 2 methods x their predicted "
                                            "labels, 1 where none: 3 in all); the limit is 5")
        one_method = client.post("/explain", json={"texts": [two, two, two]})  # (by name: texts x 1 x 2 labels)
        assert one_method.status_code == 413 and one_method.json()["detail"].startswith("6 explanations")
        # A target is one label a text: texts x methods, as a single-label run's.
        aimed = client.post("/explain", json={"texts": [two, none], "method": methods, "target": "food"})
        assert aimed.status_code == 200, aimed.text
        assert len(aimed.json()["explanations"]) == 4
    with TestClient(create_app(clf, ServeLimits(max_explain_batch=6))) as client:
        answered = client.post("/explain", json={"texts": [two, none], "method": methods})
        assert answered.status_code == 200, answered.text
        assert len(answered.json()["explanations"]) == 6
        assert "texts x methods x the labels each text is explained for" in client.get("/openapi.json").json()[
            "info"]["description"]


def test_a_multi_label_dataset_trains_multi_label_without_the_flag(tmp_path):
    out = tmp_path / "topics"
    assert main(["train", "--dataset", "topics", "--epochs", "1", "--max-train-examples", "300", "--set", "d_model=16",
                 "--set", "layers=1", "--threads", "1", "--output", str(out), "--quiet", "--no-report"]) == 0
    assert json.loads((out / "config.json").read_text())["settings"]["data"]["multi_label"] is True
    assert (out / THRESHOLDS_FILE).exists()


@pytest.mark.parametrize("command", [["compare", "--models", "boe"], ["ablate", "--sweep", "dropout=0.1,0.2"]])
def test_compare_and_ablate_refuse_multi_label_data_in_one_line(command, tmp_path, capsys):
    assert main([*command, "--dataset", "topics", "--seeds", "1", "--epochs", "1",
                 "--output", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "single-label data only" in err and "topics is multi-label" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_multi_label_flag_must_match_the_data(tmp_path, capsys):
    assert main(["train", "--dataset", "demo", "--multi-label", "--output", str(tmp_path / "b"), "--quiet"]) == 2
    assert "single-label dataset; drop --multi-label" in capsys.readouterr().err
    assert main(["train", "--dataset", "topics", "--multi-label", "--sampler", "balanced",
                 "--output", str(tmp_path / "c"), "--quiet"]) == 2
    assert "--class-weight balanced" in capsys.readouterr().err
    assert main(["train", "--dataset", "demo", "--label-delimiter", ";", "--output", str(tmp_path / "d")]) == 2
    assert "add --multi-label" in capsys.readouterr().err


def test_a_single_label_run_in_a_multi_label_runs_folder_drops_its_thresholds(topic_files, tmp_path, capsys):
    train, test = topic_files
    out = tmp_path / "reused"
    assert main(["train", "--train-file", str(train), "--label-column", "topics", "--multi-label", "--epochs", "1",
                 "--set", "d_model=16", "--set", "layers=1", "--threads", "1", "--output", str(out), "--quiet",
                 "--no-report"]) == 0
    assert (out / "thresholds.json").is_file()
    assert main(["train", "--dataset", "demo", "--epochs", "1", "--max-train-examples", "200", "--set", "d_model=16",
                 "--set", "layers=1", "--threads", "1", "--output", str(out), "--quiet", "--no-report",
                 "--overwrite"]) == 0
    assert not (out / "thresholds.json").exists()
    capsys.readouterr()
    assert main(["predict", str(out), "a fine film", "--device", "cpu"]) == 0
    assert '"label"' in capsys.readouterr().out


def test_per_text_scores_take_label_sets_as_ints_bools_or_floats():
    y = np.array([[0, 0], [1, 0], [1, 1]])
    p = np.array([[0.1, 0.2], [0.3, 0.1], [0.9, 0.2]])
    expected = multilabel_metrics(y, p, ["a", "b"])["samples_f1"]
    assert expected == pytest.approx((1 + 0 + 2 / 3) / 3)
    for kind in (bool, float):
        assert multilabel_metrics(y.astype(kind), p, ["a", "b"])["samples_f1"] == pytest.approx(expected)


def test_evaluate_refuses_a_multi_label_run_without_test_data_as_it_refuses_its_validation_split(topic_files, tmp_path,
                                                                                               capsys):
    # Without test data, evaluate falls back to the texts the run held out: the very texts its thresholds were tuned
    # on, whose scores `--split validation` refuses as flattered. It gave them silently instead.
    out = tmp_path / "no-test"
    assert main(["train", "--train-file", str(topic_files[0]), "--label-column", "topics", "--multi-label",
                 "--epochs", "1", "--max-train-examples", "300", "--set", "d_model=16", "--set", "layers=1",
                 "--threads", "1", "--output", str(out), "--quiet", "--no-report"]) == 0
    capsys.readouterr()
    for argv in (["evaluate", str(out)], ["evaluate", str(out), "--split", "validation"]):
        assert main([*argv, "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        assert "tuned its thresholds on its validation texts" in err and len(err.strip().splitlines()) == 1
    assert main(["evaluate", str(out), "--test-file", str(topic_files[1]), "--device", "cpu"]) == 0


def test_evaluate_prints_the_ranking_scores_a_multi_label_run_has_as_the_single_label_line_does(topic_run, topic_files,
                                                                                               capsys):
    # The single-label line gave ROC AUC and average precision; the multi-label line left both out, though
    # metrics.json holds them (macro over labels, and a micro average precision over all cells).
    assert main(["evaluate", str(topic_run), "--test-file", str(topic_files[1]), "--device", "cpu"]) == 0
    m = json.loads((topic_run / "metrics.json").read_text())
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("test: "))
    from attnclf.evaluation.metrics import wilson_interval

    low, high = m["subset_accuracy_ci95"]  # (its 95% interval too, as a single-label run's accuracy has)
    assert [low, high] == list(wilson_interval(round(m["subset_accuracy"] * m["num_examples"]), m["num_examples"]))
    (f1_low, f1_high), (auc_low, auc_high) = m["macro_f1_ci95"], m["roc_auc_ci95"]
    assert line == (f"test: micro-F1 {m['micro_f1']:.4f}  macro-F1 {m['macro_f1']:.4f} "
                    f"(95% CI {f1_low:.4f}-{f1_high:.4f})  "
                    f"subset accuracy {m['subset_accuracy']:.4f} (95% CI {low:.4f}-{high:.4f})  "
                    f"Hamming loss {m['hamming_loss']:.4f}  "
                    f"macro ROC AUC {m['roc_auc']:.4f} (95% CI {auc_low:.4f}-{auc_high:.4f})  "
                    f"macro average precision {m['average_precision']:.4f}  "
                    f"micro average precision {m['micro_average_precision']:.4f}")


def test_the_multi_label_line_leaves_out_ranking_scores_that_are_undefined_or_absent(capsys):
    # A test set where no label has both positive and negative texts scores neither (null in metrics.json); a
    # metrics.json written before average precision existed has no such keys at all.
    from attnclf.cli import _print_metrics

    scores = {"multi_label": True, "micro_f1": 0.5, "macro_f1": 0.25, "subset_accuracy": 0.5, "hamming_loss": 0.125}
    _print_metrics(scores | {"roc_auc": None, "average_precision": None, "micro_average_precision": 0.75})
    _print_metrics(scores)
    assert capsys.readouterr().out.splitlines() == [
        "test: micro-F1 0.5000  macro-F1 0.2500  subset accuracy 0.5000  Hamming loss 0.1250  "
        "micro average precision 0.7500",
        "test: micro-F1 0.5000  macro-F1 0.2500  subset accuracy 0.5000  Hamming loss 0.1250"]


def test_an_untrained_run_whose_tuned_thresholds_predict_most_labels_says_so(tmp_path, capsys):
    """A learning rate that leaves the model untrained gives every label about the same probability on every text,
    so each label's F1-maximising cut keeps nearly every text: far more labels a text than the texts hold."""
    splits = topics(n_train=1000, n_test=0)
    names = splits.train.label_names
    train = _jsonl(tmp_path / "train.jsonl", [{"text": t, "topics": [names[i] for i in y]}
                                              for t, y in zip(splits.train.texts, splits.train.labels)])
    out = tmp_path / "untrained"
    assert main(["train", "--train-file", str(train), "--label-column", "topics", "--multi-label", "--model", "boe",
                 "--epochs", "1", "--lr", "1e-6", "--threads", "1", "--output", str(out), "--quiet", "--no-report"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "tuned thresholds" in line]
    assert len(notes) == 1 and re.fullmatch(
        r"note: at the tuned thresholds the run predicts \d\.\d of the 5 labels per validation text, which hold "
        r"\d\.\d on average: it has not learned to tell the labels apart yet; train longer \(--epochs\) or on more "
        r"texts", notes[0]), notes
    predicted, held = (float(n) for n in re.findall(r"\d\.\d", notes[0]))
    assert predicted > 2 * held
    config = json.loads((out / "config.json").read_text())
    assert notes[0].removeprefix("note: ") in config["data"]["warnings"]


def test_a_trained_multi_label_run_does_not_note_crowded_label_sets(topic_run):
    config = json.loads((topic_run / "config.json").read_text())
    assert not any("tuned thresholds" in line for line in config["data"].get("warnings", []))


def test_evaluate_errors_lists_a_multi_label_runs_wrong_label_sets_with_what_each_missed_and_added(
        topic_run, topic_files, tmp_path, capsys):
    from attnclf import Classifier
    from attnclf.evaluation import misclassified

    test = topic_files[1]
    assert main(["evaluate", str(topic_run), "--test-file", str(test), "--errors", str(tmp_path / "wrong.jsonl"),
                 "--device", "cpu"]) == 0
    assert "most wrong labels first" in capsys.readouterr().err
    rows = [json.loads(line) for line in (tmp_path / "wrong.jsonl").read_text().splitlines()]
    with open(test, newline="", encoding="utf-8") as f:
        truth = [(row["text"], set(filter(None, row["topics"].split("|")))) for row in csv.DictReader(f)]
    predicted = Classifier.load(topic_run, device="cpu").predict([text for text, _ in truth])
    wrong = [i for i, ((_, labels), p) in enumerate(zip(truth, predicted)) if set(p.labels) != labels]
    assert wrong and sorted(row["row"] - 1 for row in rows) == wrong
    for row in rows:
        text, labels = truth[row["row"] - 1]
        p = predicted[row["row"] - 1]
        assert row["text"] == text and set(row["true_labels"]) == labels and row["predicted_labels"] == p.labels
        assert set(row["missed_labels"]) == labels - set(p.labels)
        assert set(row["extra_labels"]) == set(p.labels) - labels
        assert row["probability:sports"] == pytest.approx(p.probabilities["sports"])
    counts = [len(row["missed_labels"]) + len(row["extra_labels"]) for row in rows]
    assert counts == sorted(counts, reverse=True)
    assert misclassified(Classifier.load(topic_run, device="cpu"), (texts := [text for text, _ in truth],
                         [sorted(labels) for _, labels in truth]))[0]["text"] in texts  # (in Python too)
    # In CSV each set is one cell joined by "|", as a multi-label file gives it: it reads back as label sets.
    assert main(["evaluate", str(topic_run), "--test-file", str(test), "--errors", str(tmp_path / "wrong.csv"),
                 "--device", "cpu"]) == 0
    assert f"wrote {len(rows)} misclassified texts of 300 " in capsys.readouterr().err
    back = load_file(tmp_path / "wrong.csv", label_column="true_labels", multi_label=True,
                     label_names=json.loads((topic_run / "labels.json").read_text()))
    assert [sorted(back.label_names[i] for i in labels) for labels in back.labels] == [
        sorted(row["true_labels"]) for row in rows]


def test_the_docs_of_a_multi_label_onnx_service_say_why_explain_refuses():
    """/explain of an ONNX service refuses for the backend's sake (NO_EXPLANATIONS), not for windows'."""
    from attnclf.serve.model import NO_EXPLANATIONS, _description

    about = _description("onnx", [], "self-attn", multi_label=True)
    assert about.startswith("Multi-label text classifier (self-attn) on onnxruntime (onnx)")
    assert NO_EXPLANATIONS in about and "windows" not in about
    assert "windows" in _description("torch", [], "self-attn", multi_label=True)


@pytest.mark.parametrize("seed", [0, 1])
def test_multi_label_metrics_give_the_binary_log_loss_of_every_cell_and_each_labels_calibration_error(seed):
    # A multi-label run's metrics gave no calibration figure, though its probabilities are per-label yes-or-no
    # probabilities that `attnclf calibrate` fits a temperature to.
    from attnclf.evaluation.metrics import expected_calibration_error

    y, p = _random_case(seed)
    m = multilabel_metrics(y, p, ["a", "b", "c", "d"])
    assert m["log_loss"] == pytest.approx(skm.log_loss(y.ravel(), p.ravel()))
    each = [expected_calibration_error(y[:, k], np.column_stack([1 - p[:, k], p[:, k]])) for k in range(4)]
    assert [m["per_class"][name]["ece"] for name in "abcd"] == pytest.approx(each)
    assert m["ece"] == pytest.approx(np.mean(each)) and 0 < m["ece"] < 1


def test_evaluate_prints_and_saves_a_multi_label_runs_calibration_as_per_label_binary_probabilities(
        topic_run, topic_files, capsys):
    saved = json.loads((topic_run / "metrics.json").read_text())
    assert {"log_loss", "ece"} <= saved.keys() and all("ece" in c for c in saved["per_class"].values())
    assert main(["evaluate", str(topic_run), "--test-file", str(topic_files[1]), "--json", "--device", "cpu"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["log_loss"] == pytest.approx(saved["log_loss"], abs=1e-6)
    assert evaluated["ece"] == pytest.approx(saved["ece"], abs=1e-6)
    assert main(["evaluate", str(topic_run), "--test-file", str(topic_files[1]), "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    cells = saved["num_examples"] * len(saved["per_class"])
    assert (f"calibration of each label's own probability (given or not, text by text): binary log loss "
            f"{saved['log_loss']:.4f} over {cells:,} text-label cells, calibration error {saved['ece']:.4f} "
            f"(mean over labels)") in out
    for name, scores in saved["per_class"].items():
        assert f"  {name}: calibration error {scores['ece']:.4f}" in out


def test_the_report_shows_a_multi_label_runs_calibration_over_every_text_label_cell(topic_run, topic_files):
    from attnclf import Classifier
    from attnclf.evaluation.metrics import expected_calibration_error
    from attnclf.evaluation.multilabel import binary_cross_entropy

    clf = Classifier.load(topic_run, device="cpu")
    test = load_file(topic_files[1], label_column="topics", multi_label=True, label_names=clf.label_names)
    y, p = multi_hot(test.labels, len(clf.label_names)), clf.predict_proba(test.texts)
    page = (topic_run / "report.html").read_text()
    section = page.split("<h2>Calibration</h2>")[1].split("</section>")[0]
    assert f"binary log loss {binary_cross_entropy(y, p):.4f}" in section
    each = [expected_calibration_error(y[:, k], np.column_stack([1 - p[:, k], p[:, k]])) for k in range(y.shape[1])]
    assert f"calibration error {np.mean(each):.4f} (mean over labels)" in section
    for name, error in zip(clf.label_names, each):
        assert f"<tr><td>{name}</td><td>{error:.4f}</td></tr>" in section
    assert "reliability diagram" in section and (topic_run / "plots" / "reliability.png").is_file()
    assert "each label's own probability" in section


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_each_labels_calibration_error_is_expected_calibration_error_of_its_yes_or_no_column(dtype):
    # label_calibration_errors bins every label at once; ties at 0.5 ("not given", as argmax reads [1 - p, p]), bin
    # edges and certainties must fall where expected_calibration_error puts them, label by label.
    from attnclf.evaluation.calibration import label_calibration_errors
    from attnclf.evaluation.metrics import expected_calibration_error

    rng = np.random.default_rng(3)
    y = (rng.random((120, 6)) < 0.3).astype(int)
    p = rng.random((120, 6)).astype(dtype)
    p[:15, 0], p[:15, 1], p[:3, 2] = 0.5, np.arange(15) / 15, [0.0, 1.0, 0.5]
    expected = [expected_calibration_error(y[:, k], np.column_stack([1 - p[:, k], p[:, k]])) for k in range(6)]
    assert label_calibration_errors(y, p) == pytest.approx(expected, abs=1e-6)


def test_train_multi_label_closes_with_the_calibration_lines_evaluate_prints_for_the_run(tmp_path, capsys):
    # A multi-label run's test line gave no calibration figure, which its metrics.json, its report and `attnclf
    # evaluate` give: train's closing lines are evaluate's scores for the same run.
    from attnclf.evaluation.metrics import label_calibration_text

    rows = [("stocks fell", "business"), ("a late goal", "sports"), ("a vote on rates", "politics|business"),
            ("nothing to say", "")]
    train = _csv(tmp_path / "train.csv", [(f"{text} {i}", labels) for i in range(6) for text, labels in rows])
    test = _csv(tmp_path / "test.csv", [(f"{text} again", labels) for text, labels in rows])
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(train), "--test-file", str(test), "--multi-label", "--model", "boe",
                 "--epochs", "1", "--output", str(run), "--no-report", "--quiet", "--threads", "1"]) == 0
    trained = capsys.readouterr().out
    calibration = label_calibration_text(json.loads((run / "metrics.json").read_text()))
    assert calibration in trained
    assert main(["evaluate", str(run), "--test-file", str(test), "--device", "cpu"]) == 0
    assert calibration in capsys.readouterr().out


def test_a_probability_at_its_threshold_is_decided_alike_by_predict_and_by_the_checks_of_predictions():
    # predict's label set (label_set) and what the ONNX parity and the uniform-attention check compare
    # (decided_rows) at an exact tie, and a hair past it that float32 cannot tell from the probability.
    probability = np.float32(0.7310586)
    for threshold, given in ((float(probability), True), (float(probability) * (1 + 2 ** -30), False)):
        thresholds = np.array([0.5, threshold])
        row = np.array([0.1, probability], dtype=np.float32)
        assert (1 in label_set(row, thresholds)) is given
        assert decided_rows(row[None], thresholds).tolist() == [[0, int(given)]]
