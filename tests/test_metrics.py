import numpy as np
import pytest
from sklearn.metrics import (accuracy_score, average_precision_score, f1_score, log_loss, precision_recall_fscore_support,
                             roc_auc_score)

from attnclf.evaluation import compute_metrics, pick_examples
from attnclf.evaluation.metrics import expected_calibration_error, reliability
from conftest import intervals_shown


def test_binary_metrics_match_scikit_learn_and_count_outcomes():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    p1 = np.clip(y * 0.6 + rng.random(200) * 0.5, 0, 1)
    probs = np.stack([1 - p1, p1], 1)
    m = compute_metrics(y, probs, ["neg", "pos"])
    pred = probs.argmax(1)
    assert m["accuracy"] == pytest.approx((pred == y).mean())
    assert m["macro_f1"] == pytest.approx(f1_score(y, pred, average="macro"))
    assert m["roc_auc"] == pytest.approx(roc_auc_score(y, p1))
    b = m["binary"]
    assert b["tp"] == int(((pred == 1) & (y == 1)).sum()) and b["fn"] == int(((pred == 0) & (y == 1)).sum())
    assert b["tp"] + b["fp"] + b["tn"] + b["fn"] == 200
    assert sum(map(sum, m["confusion_matrix"])) == 200


def test_the_confusion_matrix_has_true_classes_in_rows_and_predictions_in_columns():
    # Two texts of class 0 taken for class 2, none the other way: only cell [0][2] holds them. (Transposed, the
    # report's matrix and its recall-per-row reading would swap what was missed for what was wrongly taken.)
    probabilities = np.array([[.1, .1, .8], [.2, .1, .7], [.1, .8, .1], [.1, .1, .8]])
    matrix = compute_metrics([0, 0, 1, 2], probabilities, ["a", "b", "c"], report=False)["confusion_matrix"]
    assert matrix == [[0, 0, 2], [0, 1, 0], [0, 0, 1]]


def test_multiclass_auc_is_one_vs_rest_and_handles_absent_classes():
    probs = np.array([[.8, .1, .1], [.1, .8, .1], [.2, .2, .6], [.7, .2, .1]])
    m = compute_metrics([0, 1, 2, 0], probs, ["a", "b", "c"])
    assert m["roc_auc"] == pytest.approx(1.0)
    assert "binary" not in m
    partial = compute_metrics([0, 1, 0], probs[:3], ["a", "b", "c"])
    assert partial["roc_auc"] is not None
    # A class absent from the scored texts: each present class's probabilities are ranked as they are, not
    # renormalised over the present classes (which reorders them: here it turned 0.5 into 0.0).
    absent = np.array([[.60, .35, .05], [.02, .30, .68]])
    expected = np.mean([roc_auc_score([0, 1], absent[:, 1]), roc_auc_score([1, 0], absent[:, 0])])
    assert compute_metrics([1, 0], absent, ["a", "b", "c"])["roc_auc"] == pytest.approx(expected) == 0.5
    rng = np.random.default_rng(0)
    for _ in range(50):  # every class present: scikit-learn's one-vs-rest macro AUC
        y, p = rng.integers(0, 4, 40), rng.dirichlet(np.ones(4), 40)
        if len(set(y)) == 4:
            assert compute_metrics(y, p, list("abcd"))["roc_auc"] == pytest.approx(
                roc_auc_score(y, p, multi_class="ovr", average="macro"))
    assert compute_metrics([0, 0], probs[:2], ["a", "b", "c"])["roc_auc"] is None


def test_binary_average_precision_is_scikit_learns_for_the_positive_class_and_each_class_has_its_own():
    rng = np.random.default_rng(2)
    y = (rng.random(300) < 0.1).astype(int)  # a rare positive class, where precision-recall tells what ROC hides
    p1 = np.round(np.clip(y * 0.3 + rng.random(300) * 0.7, 0, 1), 1)  # rounded: tied scores share a threshold
    probs = np.stack([1 - p1, p1], 1)
    m = compute_metrics(y, probs, ["ham", "spam"])
    assert m["average_precision"] == pytest.approx(average_precision_score(y, p1))
    assert m["per_class"]["spam"]["average_precision"] == pytest.approx(average_precision_score(y, p1))
    assert m["per_class"]["ham"]["average_precision"] == pytest.approx(average_precision_score(1 - y, 1 - p1))
    assert compute_metrics([1, 1], probs[:2], ["ham", "spam"])["average_precision"] is None  # as roc_auc is


def test_multiclass_average_precision_is_one_vs_rest_macro_over_the_classes_that_occur():
    rng = np.random.default_rng(3)
    for _ in range(30):  # every class present: scikit-learn's one-vs-rest macro average precision
        y, p = rng.integers(0, 3, 50), np.round(rng.dirichlet(np.ones(3), 50), 2)
        m = compute_metrics(y, p, ["a", "b", "c"], report=False)
        assert m["average_precision"] == pytest.approx(average_precision_score(np.eye(3)[y], p, average="macro"))
        assert [m["per_class"][name]["average_precision"] for name in "abc"] == pytest.approx(
            [average_precision_score(y == c, p[:, c]) for c in range(3)])
    # A class absent from the scored texts has no precision-recall curve (no positives): left out of the macro
    # average and null in its row, as the ROC AUC leaves it out.
    y, p = np.array([0, 1, 0, 1, 1]), rng.dirichlet(np.ones(3), 5)
    m = compute_metrics(y, p, ["a", "b", "c"])
    assert m["per_class"]["c"]["average_precision"] is None
    assert m["average_precision"] == pytest.approx(np.mean([average_precision_score(y == c, p[:, c]) for c in (0, 1)]))
    assert compute_metrics([2, 2], p[:2], ["a", "b", "c"])["average_precision"] is None  # one class: as roc_auc


def test_averages_skip_a_class_the_scored_texts_lack_unless_it_was_predicted():
    probs = np.array([[.8, .1, .1], [.1, .8, .1], [.7, .2, .1], [.2, .7, .1]])
    perfect = compute_metrics([0, 1, 0, 1], probs, ["a", "b", "c"])  # "c" neither occurs nor is predicted
    assert perfect["accuracy"] == 1.0 and perfect["macro_f1"] == 1.0 and perfect["weighted_f1"] == 1.0
    assert perfect["per_class"]["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0,
                                         "average_precision": None}
    macro_row = next(line for line in perfect["classification_report"].splitlines() if "macro avg" in line)
    assert macro_row.split()[-2] == "1.0000"  # the table's macro F1 is the one printed beside it
    wrong = np.array([[.8, .1, .1], [.1, .1, .8], [.7, .2, .1], [.2, .7, .1]])  # "c" predicted once, never true
    y, pred = [0, 1, 0, 1], wrong.argmax(1)
    m = compute_metrics(y, wrong, ["a", "b", "c"])
    for average in ("macro", "weighted"):
        assert m[f"{average}_f1"] == pytest.approx(f1_score(y, pred, average=average))


def test_every_average_is_scikit_learns_over_the_classes_seen():
    # compute_metrics derives the averages and the accuracy from its per-class figures (one scikit-learn call, not
    # seven); here they are checked against scikit-learn's own, with classes absent, predicted only, or neither.
    rng = np.random.default_rng(1)
    for _ in range(100):
        n, k = int(rng.integers(1, 30)), int(rng.integers(2, 6))
        y, p = rng.integers(0, k - 1, n), rng.dirichlet(np.ones(k) * 0.3, n)  # the last class never occurs
        pred = p.argmax(1)
        m = compute_metrics(y, p, [str(c) for c in range(k)], report=False)
        assert m["accuracy"] == pytest.approx(accuracy_score(y, pred))
        for average in ("macro", "weighted"):
            expected = precision_recall_fscore_support(y, pred, average=average, zero_division=0)[:3]
            got = [m[f"{average}_{name}"] for name in ("precision", "recall", "f1")]
            assert got == pytest.approx(expected), (y, pred, average)


def test_examples_are_the_most_confident_of_each_kind():
    probs = np.array([[.9, .1], [.6, .4], [.2, .8], [.45, .55]])
    ex = pick_examples(["a", "b", "c", "d"], [0, 0, 0, 1], probs, ["n", "p"], k=3)
    assert [e["text"] for e in ex["correct"]] == ["a", "b", "d"]
    assert [e["text"] for e in ex["incorrect"]] == ["c"]
    assert ex["incorrect"][0]["confidence"] == pytest.approx(0.8)


def test_calibration_error_is_zero_when_confidence_is_accuracy_and_grows_with_overconfidence():
    rng = np.random.default_rng(0)
    confidence = rng.uniform(0.5, 1.0, 200_000)
    right = rng.uniform(size=confidence.size) < confidence  # right exactly as often as it claims
    y_true = np.where(right, 0, 1)
    calibrated = np.stack([confidence, 1 - confidence], axis=1)
    assert expected_calibration_error(y_true, calibrated) < 0.005
    # The same predictions claimed with more confidence: the gap is the added confidence, bin by bin.
    sharpened = np.stack([np.sqrt(confidence), 1 - np.sqrt(confidence)], axis=1)
    assert expected_calibration_error(y_true, sharpened) == pytest.approx(np.mean(np.sqrt(confidence) - confidence),
                                                                          abs=0.005)
    cells = reliability(y_true, calibrated, bins=5)
    assert [cell["upper"] for cell in cells] == [0.6, 0.8, 1.0]  # confidences of 0.5 and more: three of five bins
    assert sum(cell["count"] for cell in cells) == confidence.size
    for cell in cells:
        assert cell["upper"] - 0.2 < cell["confidence"] <= cell["upper"]
        assert cell["accuracy"] == pytest.approx(cell["confidence"], abs=0.01)


def test_metrics_report_log_loss_and_calibration_with_every_class_counted():
    y_true = [0, 1, 2, 2]
    probabilities = np.array([[.7, .2, .1], [.1, .8, .1], [.2, .2, .6], [.5, .3, .2]])
    metrics = compute_metrics(y_true, probabilities, ["a", "b", "c"])
    assert metrics["log_loss"] == pytest.approx(log_loss(y_true, probabilities))
    # Top-label confidences .7, .8, .6 (right) and .5 (wrong), each in its own bin of 15.
    assert metrics["ece"] == pytest.approx((0.3 + 0.2 + 0.4 + 0.5) / 4)
    # The true class's probability alone counts, whichever classes the scored texts hold; a certain right answer
    # costs nothing and a certain wrong one a finite (clipped) amount.
    two = compute_metrics([0, 0], np.array([[.6, .3, .1], [.9, .05, .05]]), ["a", "b", "c"])
    assert two["log_loss"] == pytest.approx(-np.mean(np.log([.6, .9])))
    assert compute_metrics([0, 1], np.array([[1., 0.], [0., 1.]]), ["a", "b"])["log_loss"] == 0.0
    assert compute_metrics([0, 1], np.array([[0., 1.], [0., 1.]]), ["a", "b"])["log_loss"] == pytest.approx(
        -np.log(1e-12) / 2)


def test_the_reliability_counts_start_below_one_text_so_no_bin_looks_empty():
    from attnclf.report.plots import reliability_figure

    confidence = np.array([0.55] * 682 + [0.62] * 318)
    figure = reliability_figure(np.zeros(confidence.size, dtype=int), np.stack([confidence, 1 - confidence], axis=1))
    low, high = figure.axes[1].get_ylim()
    assert low < 1 and high > 682


class _ByWord:
    """A classifier as `evaluate` sees one: "bad" in a text means neg, else pos."""

    label_names, multi_label = ["neg", "pos"], False

    def predict_proba(self, texts):
        return np.array([[0.9, 0.1] if "bad" in text else [0.2, 0.8] for text in texts])


def test_evaluate_reads_the_data_labels_by_name_not_by_position():
    from attnclf.data.base import TextDataset
    from attnclf.errors import DataError
    from attnclf.evaluation import evaluate

    texts = ["bad", "good", "good"]
    ours = evaluate(_ByWord(), TextDataset(texts, [0, 1, 1], ["neg", "pos"], split="test"))
    # The same truth, its labels numbered the other way round (a file or dataset whose label order is not the run's)
    theirs = evaluate(_ByWord(), TextDataset(texts, [1, 0, 0], ["pos", "neg"], split="test"))
    assert ours["accuracy"] == theirs["accuracy"] == 1.0 and theirs["split"] == "test"
    assert ours["average_precision"] == theirs["average_precision"] == 1.0
    with pytest.raises(DataError, match="'meh'.*never seen in training"):
        evaluate(_ByWord(), TextDataset(texts, [0, 1, 2], ["neg", "pos", "meh"], split="test"))


class _AlwaysPos(_ByWord):
    def predict_proba(self, texts):
        return np.array([[0.3, 0.7]] * len(texts))


def test_evaluate_against_another_classifier_counts_each_texts_verdicts_and_tests_the_split():
    from scipy.stats import binomtest

    from attnclf.evaluation import evaluate
    from attnclf.evaluation.metrics import paired_text

    texts = ["bad", "bad one", "good", "fine", "bad", "good but bad"]  # _ByWord: neg neg pos pos neg neg
    labels = ["neg", "neg", "pos", "pos", "pos", "pos"]  # _AlwaysPos: pos everywhere
    metrics = evaluate(_ByWord(), (texts, labels), against=_AlwaysPos())
    assert metrics["accuracy"] == 4 / 6
    against = metrics["against"]
    # Right by words alone: the two "bad" negatives; by "pos" alone: the last two; both: "good" and "fine".
    assert (against["right_here_alone"], against["right_there_alone"], against["both_right"],
            against["both_wrong"]) == (2, 2, 2, 0)
    assert against["other_accuracy"] == 4 / 6 and against["texts"] == 6
    assert against["p_value"] == pytest.approx(binomtest(2, 4, 0.5).pvalue) == 1.0
    lopsided = evaluate(_ByWord(), (["bad"] * 9 + ["good"], ["neg"] * 9 + ["pos"]), against=_AlwaysPos())["against"]
    assert lopsided["right_here_alone"] == 9 and lopsided["p_value"] == pytest.approx(2 * 0.5 ** 9)
    assert "right here alone 9, there alone 0; both right 1, both wrong 0" in paired_text(lopsided, "old")
    assert "McNemar's exact test: p = 0.0039, the chance of the 9 texts" in paired_text(lopsided, "old")
    # The demo model against a bag of embeddings: 430 texts right by one alone. It printed "p = 0.0000".
    wide = evaluate(_ByWord(), (["bad"] * 430, ["neg"] * 430), against=_AlwaysPos())["against"]
    assert 0 < wide["p_value"] < 1e-100
    assert "McNemar's exact test: p < 0.0001, the chance of the 430 texts" in paired_text(wide, "old")
    # One classifier against itself: nothing to tell them apart.
    assert evaluate(_ByWord(), (texts, labels), against=_ByWord())["against"]["p_value"] == 1.0


def test_the_paired_comparison_tests_the_texts_only_one_gets_right_not_every_text_they_disagree_on():
    from attnclf.evaluation.metrics import paired_comparison, paired_text

    # Of three classes, the first text is wrong both ways, each its own way: they disagree on it, yet it tells
    # neither apart. It said "p = 1.0000, as they disagree on no text", and "the N texts they disagree on" where N
    # counted only the texts one alone got right.
    tie = paired_comparison([0, 0, 1, 2], [1, 0, 1, 2], [2, 0, 1, 2])
    assert (tie["right_here_alone"], tie["right_there_alone"], tie["both_wrong"], tie["p_value"]) == (0, 0, 1, 1.0)
    assert paired_text(tie, "old").endswith("p = 1.0000, as neither gets any text right that the other gets wrong")
    split = paired_comparison([0, 0, 1, 2], [1, 0, 1, 2], [2, 1, 1, 2])  # (and the second: here alone)
    assert "the chance of the 1 text only one of them gets right splitting" in paired_text(split, "old")
    assert "disagree" not in paired_text(tie, "old") + paired_text(split, "old") + split["test"]


@pytest.mark.parametrize("other, message", [
    (type("Other", (_ByWord,), {"label_names": ["pos", "neg"]})(),
     r"^against predicts other classes \('pos', 'neg'\) than the run evaluated \('neg', 'pos'\)"),
    (type("Sets", (_ByWord,), {"multi_label": True})(), r"^against compares single-label runs"),
])
def test_evaluate_refuses_a_classifier_it_cannot_compare_text_by_text(other, message):
    from attnclf.errors import AttnclfError
    from attnclf.evaluation import evaluate

    with pytest.raises(AttnclfError, match=message):
        evaluate(_ByWord(), (["bad"], ["neg"]), against=other)


class _BySet(_ByWord):
    """A multi-label classifier as `evaluate` sees one: each label's probability on its own."""

    multi_label, thresholds = True, np.array([0.5, 0.5])


@pytest.mark.parametrize("classifier, data, message", [
    (_ByWord(), dict(labels=[(0,), (0, 1)], multi_label=True),
     r"^test: a set of labels per text \(multi-label data\), and the classifier is single-label"),
    (_BySet(), dict(labels=[0, 1]),
     r"^test: one label per text \(single-label data\), and the classifier is multi-label"),
    # The flag says one thing and the labels another: label sets read as single-label data, or the reverse.
    (_ByWord(), dict(labels=[(0,), (1,)]), r"^test: label 0 is \(0,\), not an index into label_names; give "
                                           r"TextDataset multi_label=True for label sets"),
    (_BySet(), dict(labels=[(0,), 1], multi_label=True), r"^test: label 1 is 1, one label, in multi_label data"),
])
def test_evaluate_refuses_data_of_the_other_kind_in_one_line(classifier, data, message):
    # numpy and scikit-learn failed deep inside on these (tuples as class numbers, ints as label sets)
    from attnclf.data.base import TextDataset
    from attnclf.errors import DataError
    from attnclf.evaluation import evaluate

    with pytest.raises(DataError, match=message) as refused:
        evaluate(classifier, TextDataset(["bad", "good"], label_names=["neg", "pos"], split="test", **data))
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("data", [{"texts": ["bad"], "labels": ["neg"]}, None, (["bad"], ["neg"], ["extra"])])
def test_evaluate_refuses_what_is_neither_a_text_dataset_nor_texts_and_labels_in_one_line_naming_data(data):
    from attnclf.errors import AttnclfError
    from attnclf.evaluation import evaluate

    with pytest.raises(AttnclfError, match=rf"^data must be texts and their labels, \(texts, labels\), or a "
                                           rf"TextDataset .*, not {type(data).__name__}") as refused:
        evaluate(_ByWord(), data)
    assert "\n" not in str(refused.value)


def test_evaluate_takes_texts_and_labels_in_memory_by_name():
    # A notebook's held-out texts and labels, passed as they are, failed on `'tuple' object has no attribute 'name'`;
    # then, made into a TextDataset by hand, they needed their labels numbered.
    import pandas as pd

    from attnclf.errors import DataError
    from attnclf.evaluation import evaluate

    frame = pd.DataFrame({"text": ["bad", "good", "good", "bad"], "label": ["neg", "pos", "pos", "pos"]})
    metrics = evaluate(_ByWord(), (frame.text, frame.label))
    assert metrics["accuracy"] == 0.75 and metrics["split"] == "test"
    assert evaluate(_ByWord(), (["good"], ["pos"]))["accuracy"] == 1  # (one class present: scored by the run's names)

    class ByNumber(_ByWord):
        label_names = ["0", "1"]  # (a run names the class 1 "1")

    assert evaluate(ByNumber(), (["bad", "good"], np.array([0, 1])))["accuracy"] == 1
    # pandas holds an integer column with a missing value as floats: 1.0 is the class the run names "1"
    assert evaluate(ByNumber(), (pd.Series(["bad", "good"]), pd.Series([0.0, 1.0])))["accuracy"] == 1
    with pytest.raises(DataError, match=r"^test: label\(s\) 'meh' never seen in training"):
        evaluate(_ByWord(), (["bad", "so so"], ["neg", "meh"]))
    with pytest.raises(DataError, match=r"^2 texts but 1 labels"):
        evaluate(_ByWord(), (["bad", "good"], ["neg"]))

    class Tagger(_ByWord):
        multi_label, thresholds = True, np.array([0.5, 0.5])

    assert evaluate(Tagger(), (["bad", "good"], [["neg"], ["pos"]]))["subset_accuracy"] == 1
    with pytest.raises(DataError, match=r"^labels: 'pos' is one name, not a list of names"):  # (not 'p', 'o', 's')
        evaluate(Tagger(), (["bad", "good"], [["neg"], "pos"]))


@pytest.mark.parametrize("multi_label, texts, labels, message", [
    # a DataFrame's missing label set (None, NaN) or a number where a list of names goes: TypeError tracebacks
    (True, ["bad", "good"], [["neg"], None], r"^labels\[1\]: None is not a list of names; give each text of "
                                             r"multi-label data its labels as a list \(\[\] for none\)$"),
    (True, ["bad", "good"], [["neg"], float("nan")], r"^labels\[1\]: nan is not a list of names"),
    (True, ["bad", "good"], [3, ["pos"]], r"^labels\[0\]: 3 is not a list of names"),
    # one text or one label where a list of them goes: read letter by letter, silently when the lengths agreed
    (False, "ok", "np", r"^texts: 'ok' is one text, not a list of texts: give \(\['ok'\], labels\)$"),
    (False, ["bad", "good"], "np", r"^labels: 'np' is one label, not a list of labels: give \(texts, \['np'\]\)$"),
    (True, "ok", [["neg"], ["pos"]], r"^texts: 'ok' is one text, not a list of texts"),
])
def test_evaluate_refuses_texts_and_labels_of_the_wrong_shape_in_one_line(multi_label, texts, labels, message):
    from attnclf.errors import DataError
    from attnclf.evaluation import evaluate

    with pytest.raises(DataError, match=message) as refused:
        evaluate(_BySet() if multi_label else _ByWord(), (texts, labels))
    assert "\n" not in str(refused.value)


def test_evaluate_reads_whole_number_label_names_as_the_run_names_its_classes():
    # A run names the class 1 "1"; names made of a notebook's int labels were refused as
    # "label(s) 0, 1 never seen in training (known: 0, 1)".
    from attnclf.data.base import TextDataset
    from attnclf.evaluation import evaluate

    class ByNumber(_ByWord):
        label_names = ["0", "1"]

    texts, labels = ["bad", "good", "good"], [0, 1, 1]
    names = sorted(set(labels))
    data = TextDataset(texts, [names.index(label) for label in labels], names, split="test")
    assert data.label_names == ["0", "1"] and evaluate(ByNumber(), data)["accuracy"] == 1


def test_metrics_line_names_the_split_and_leaves_out_undefined_scores():
    from attnclf.evaluation.metrics import metrics_line

    single = {"split": "validation", "accuracy": 0.5, "macro_f1": 0.25, "roc_auc": None, "ece": 0.125}
    assert metrics_line(single) == "validation: accuracy 0.5000  macro-F1 0.2500  calibration error 0.1250"
    multi = {"multi_label": True, "micro_f1": 0.5, "macro_f1": 0.25, "subset_accuracy": 0.125, "hamming_loss": 0.0625,
             "roc_auc": 0.75}
    assert metrics_line(multi) == ("test: micro-F1 0.5000  macro-F1 0.2500  subset accuracy 0.1250  Hamming loss "
                                   "0.0625  macro ROC AUC 0.7500")


@pytest.mark.parametrize("correct, total", [(1547, 1821), (22885, 25000), (3, 7), (0, 10), (10, 10), (1, 1)])
def test_the_accuracy_interval_is_scipys_wilson_interval(correct, total):
    from scipy.stats import binomtest

    from attnclf.evaluation.metrics import wilson_interval

    expected = binomtest(correct, total).proportion_ci(0.95, method="wilson")
    assert wilson_interval(correct, total) == pytest.approx((expected.low, expected.high), abs=1e-12)
    low, high = wilson_interval(correct, total)
    assert 0 <= low <= correct / total <= high <= 1


def test_metrics_give_the_accuracys_interval_and_the_line_shows_it():
    from attnclf.evaluation.metrics import metrics_line, wilson_interval

    probabilities = np.array([[.9, .1], [.2, .8], [.6, .4], [.3, .7]])
    metrics = compute_metrics([0, 1, 1, 1], probabilities, ["neg", "pos"])
    assert metrics["accuracy_ci95"] == list(wilson_interval(3, 4))  # (3 of 4 right)
    low, high = metrics["accuracy_ci95"]
    assert metrics_line(metrics).startswith(f"test: accuracy 0.7500 (95% CI {low:.4f}-{high:.4f})  macro-F1 ")
    # A wider test set, the same accuracy: a narrower interval.
    wider = compute_metrics([0, 1, 1, 1] * 100, np.tile(probabilities, (100, 1)), ["neg", "pos"])["accuracy_ci95"]
    assert low < wider[0] < 0.75 < wider[1] < high


def test_evaluation_text_reads_as_evaluate_prints_it():
    from attnclf.evaluation.metrics import confusion_table, evaluation_text, metrics_line

    y, probs = [0, 1, 1, 0], np.array([[.9, .1], [.3, .7], [.6, .4], [.2, .8]])
    m = compute_metrics(y, probs, ["neg", "pos"])
    m["threshold"] = {"class": "pos", "probability": 0.7}
    lines = evaluation_text(m, ["neg", "pos"], multi_label=False, named=lambda name: f"--{name}")
    assert lines == (m["classification_report"] + "\n" + confusion_table(m["confusion_matrix"], ["neg", "pos"]) +
                     "\n\n" + metrics_line(m) + "\npredicted by --threshold: 'pos' when its probability is at least "
                     "0.7, else the most probable other class")


def _three_class_predictions(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Labels of three uneven classes and a model's probabilities for them, right about four times in five, rounded to
    two places so that scores tie."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(3, size=count, p=[0.5, 0.3, 0.2])
    logits = rng.normal(size=(count, 3))
    logits[np.arange(count), truth] += 1.6
    probabilities = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    return truth, np.round(probabilities, 2)


def test_the_macro_f1_interval_is_that_of_drawing_texts_again():
    """Drawing the confusion matrix's cells stands in for drawing texts: the percentiles of a plain bootstrap of the
    texts, scored by scikit-learn, are within its Monte Carlo noise of the interval's bounds."""
    from attnclf.evaluation.metrics import macro_f1_interval

    truth, probabilities = _three_class_predictions(600)
    predicted = probabilities.argmax(1)
    rng = np.random.default_rng(1)
    drawn = [rng.integers(0, 600, 600) for _ in range(2000)]
    plain = np.percentile([f1_score(truth[i], predicted[i], average="macro") for i in drawn], [2.5, 97.5])
    low, high = macro_f1_interval(truth, predicted, 3)
    assert low == pytest.approx(plain[0], abs=0.006) and high == pytest.approx(plain[1], abs=0.006)
    assert low < f1_score(truth, predicted, average="macro") < high
    assert macro_f1_interval(truth, predicted, 3) == [low, high]  # (seeded)


def test_the_binary_auc_interval_is_delongs_variance_around_scikit_learns_auc():
    from scipy.stats import norm

    from attnclf.evaluation.metrics import roc_auc_interval

    truth, probabilities = _three_class_predictions(300, seed=2)
    truth = (truth == 1).astype(int)
    scores = probabilities[:, 1]
    # DeLong et al. (1988) from the definition: every positive-negative pair's verdict, ties counted half
    positive, negative = scores[truth == 1], scores[truth == 0]
    verdicts = (positive[:, None] > negative[None, :]) + 0.5 * (positive[:, None] == negative[None, :])
    variance = verdicts.mean(1).var(ddof=1) / len(positive) + verdicts.mean(0).var(ddof=1) / len(negative)
    auc = roc_auc_score(truth, scores)
    half = norm.ppf(0.975) * np.sqrt(variance)
    assert roc_auc_interval(truth, np.stack([1 - scores, scores], axis=1)) == pytest.approx(
        [auc - half, auc + half], abs=1e-12)


def test_the_macro_auc_interval_spans_what_drawing_texts_again_spans():
    """The classes' AUCs are read off the same texts; an interval that took them as independent would be too narrow
    or too wide. A plain bootstrap of the texts is the reference."""
    from attnclf.evaluation.metrics import _roc_auc, roc_auc_interval

    truth, probabilities = _three_class_predictions(900, seed=3)
    rng = np.random.default_rng(4)
    drawn = [rng.integers(0, 900, 900) for _ in range(600)]
    plain = np.percentile([_roc_auc(truth[i], probabilities[i], [0, 1, 2]) for i in drawn], [2.5, 97.5])
    low, high = roc_auc_interval(truth, probabilities)
    assert (high - low) == pytest.approx(plain[1] - plain[0], rel=0.15)
    assert (low + high) / 2 == pytest.approx(_roc_auc(truth, probabilities, [0, 1, 2]), abs=1e-12)


@pytest.mark.parametrize("truth, why", [([0] * 10 + [1] * 9, "fewer texts than the floor"),
                                        ([0] * 40, "one class: no AUC"),
                                        ([0] * 39 + [1], "a single positive: no spread on its side")])
def test_no_interval_where_the_texts_cannot_give_one(truth, why):
    from attnclf.evaluation.metrics import macro_f1_interval, roc_auc_interval

    probabilities = np.tile([[.7, .3], [.4, .6]], (len(truth), 1))[:len(truth)]
    assert roc_auc_interval(truth, probabilities) is None, why
    assert (macro_f1_interval(truth, probabilities.argmax(1), 2) is None) == (len(truth) < 20), why


def test_a_test_set_ranked_without_error_has_an_auc_interval_of_one():
    from attnclf.evaluation.metrics import roc_auc_interval

    truth = np.arange(40) % 2
    assert roc_auc_interval(truth, np.stack([1 - truth * .8 - .1, truth * .8 + .1], axis=1)) == [1.0, 1.0]


def test_metrics_give_the_macro_f1_and_auc_intervals_and_the_line_shows_them_unless_asked_not_to():
    from attnclf.evaluation.metrics import macro_f1_interval, metrics_line, roc_auc_interval

    truth, probabilities = _three_class_predictions(300, seed=5)
    metrics = compute_metrics(truth, probabilities, ["a", "b", "c"])
    assert metrics["macro_f1_ci95"] == macro_f1_interval(truth, probabilities.argmax(1), 3)
    assert metrics["roc_auc_ci95"] == roc_auc_interval(truth, probabilities)
    intervals_shown(metrics, "ROC AUC")
    # (the trainer's per-epoch validation reads none of them)
    lean = compute_metrics(truth, probabilities, ["a", "b", "c"], intervals=False)
    assert "macro_f1_ci95" not in lean and "roc_auc_ci95" not in lean and "(95% CI" in metrics_line(lean)
