"""An operating point applied: one class predicted whenever its probability reaches a threshold, else the most probable
of the others, in predict, evaluate, serve and the Python API alike."""

import csv
import json

import numpy as np
import pytest

from attnclf.cli import main
from attnclf.errors import AttnclfError
from attnclf.prediction import ClassThreshold, class_threshold, decided_classes

TEXTS = ["the plot was brilliant", "the acting was not good", "a dull and tedious film", "a wonderful ending",
         "the music was fine"]


def test_a_binary_threshold_predicts_the_class_at_or_above_it_and_the_other_below():
    threshold = class_threshold(("pos", 0.3), ["neg", "pos"])
    probabilities = np.array([[.75, .25], [.6, .4], [.7, .3], [.1, .9]])
    assert decided_classes(probabilities, threshold).tolist() == [0, 1, 1, 1]  # (.3 itself reaches .3)
    assert decided_classes(probabilities, class_threshold(("neg", 0.8), ["neg", "pos"])).tolist() == [1, 1, 1, 1]


def test_with_three_classes_a_text_under_the_threshold_gets_the_most_probable_other_class():
    labels = ["a", "b", "c"]
    probabilities = np.array([[.5, .2, .3], [.5, .1, .4], [.1, .15, .75], [.6, .3, .1], [.34, .33, .33]])
    assert decided_classes(probabilities, class_threshold(("b", .2), labels)).tolist() == [1, 0, 2, 1, 1]
    # Above the argmax's own probability: the class it would have been becomes the next most probable one.
    assert decided_classes(probabilities, class_threshold(("a", .9), labels)).tolist() == [2, 2, 2, 1, 1]


def test_without_a_threshold_the_most_probable_class_is_predicted():
    probabilities = np.array([[.5, .2, .3], [.1, .15, .75]])
    assert decided_classes(probabilities, None).tolist() == [0, 2]


def test_a_threshold_is_written_as_a_pair_or_as_the_command_line_spells_it():
    assert class_threshold("pos=0.7", ["neg", "pos"]) == class_threshold(("pos", 0.7), ["neg", "pos"])
    assert class_threshold("a=b=0.5", ["a=b", "c"]).label == "a=b"  # (the last = splits: a class may hold one)
    assert class_threshold(("pos", 0.7), ["neg", "pos"]).to_dict() == {"class": "pos", "probability": 0.7}
    assert class_threshold(None, ["neg", "pos"]) is None


def test_a_threshold_names_a_class_by_the_number_or_boolean_the_run_names_as_text():
    # A notebook's estimator fitted on 0/1 saves a run of classes "0" and "1", whose Classifier refused
    # threshold=(1, 0.9) as "1 is not one of the run's 2 classes: '0', '1'" (the estimator itself took it).
    assert class_threshold((1, 0.9), ["0", "1"]) == ClassThreshold("1", 1, 0.9)
    assert class_threshold((np.int64(7), 0.9), ["3", "7"]) == ClassThreshold("7", 1, 0.9)
    assert class_threshold((np.bool_(False), 0.9), ["False", "True"]) == ClassThreshold("False", 0, 0.9)
    with pytest.raises(AttnclfError, match=r"^threshold: 2 is not one of the run's 2 classes: '0', '1'$"):
        class_threshold((2, 0.9), ["0", "1"])  # (a number is a name, never an index, as explain's target= is)


@pytest.mark.parametrize("threshold, words", [
    (("fraud", .5), ["'fraud' is not one of the run's 2 classes", "'neg', 'pos'"]),
    (("pos", 0), ["between 0 and 1"]), (("pos", 1), ["between 0 and 1"]), (("pos", 1.5), ["between 0 and 1"]),
    (("pos", float("nan")), ["between 0 and 1"]), (("pos", "high"), ["'high' is not a number"]),
    (("pos", True), ["True is not a number"]), ("pos", ["CLASS=P", "'pos'"]), ("pos=", ["CLASS=P"]),
    ("=0.5", ["CLASS=P"]), ("pos=high", ["'high' is not a number"]), (("pos",), ["a class and a probability"]),
    (0.5, ["a class and a probability"]),
    # (an int past a float's range: float() of it overflows, which is no one-line refusal)
    (("pos", 10 ** 400), ["between 0 and 1", "'pos'=inf"]),
])
def test_a_bad_threshold_is_refused_in_one_line_naming_it(threshold, words):
    with pytest.raises(AttnclfError) as caught:
        class_threshold(threshold, ["neg", "pos"], named=lambda name: f"--{name}")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("--threshold")
    for word in words:
        assert word in message


def test_a_multi_label_runs_label_threshold_replaces_that_labels_tuned_one_alone():
    labels, tuned = ["a", "b", "c"], np.array([.5, .2, .5])
    probabilities = np.array([[.6, .3, .1], [.45, .1, .7], [.4, .25, .4]])
    assert decided_classes(probabilities, None, tuned).tolist() == [[1, 1, 0], [0, 0, 1], [0, 1, 0]]
    lowered = class_threshold(("a", .4), labels, multi_label=True)
    assert decided_classes(probabilities, lowered, tuned).tolist() == [[1, 1, 0], [1, 0, 1], [1, 1, 0]]
    raised = class_threshold("b=0.9", labels, multi_label=True)
    assert decided_classes(probabilities, raised, tuned).tolist() == [[1, 0, 0], [0, 0, 1], [0, 0, 0]]
    assert tuned.tolist() == [.5, .2, .5]  # (the run's own thresholds stay as they were)


def test_a_multi_label_threshold_names_a_label_of_the_run_in_one_line():
    with pytest.raises(AttnclfError) as caught:
        class_threshold(("sport", .5), ["music", "sports"], multi_label=True, named=lambda name: f"--{name}")
    assert str(caught.value) == "--threshold: 'sport' is not one of the run's 2 labels: 'music', 'sports'"


def _thresholds_either_side(clf) -> list[float]:
    """Two thresholds of "positive" for ``TEXTS`` under ``clf``: one every text reaches (its least probable), one none
    does (above its most probable)."""
    positive = clf.predict_proba(TEXTS)[:, clf.label_names.index("positive")].astype(np.float64)
    assert 0 < positive.min() and positive.max() < 1
    return [float(positive.min()), float((positive.max() + 1) / 2)]


def _expected(probabilities: dict, p: float) -> str:
    return "positive" if probabilities["positive"] >= p else "negative"


def test_classifier_predict_applies_a_threshold_and_reports_the_chosen_class_s_probability(demo_run):
    from attnclf.classifier import Classifier
    from attnclf.ensemble import Ensemble

    clf = Classifier.load(demo_run, device="cpu")
    for p in _thresholds_either_side(clf):
        answers = clf.predict(TEXTS, threshold=("positive", p))
        assert [a.label for a in answers] == [_expected(a.probabilities, p) for a in answers]
        assert all(a.confidence == a.probabilities[a.label] for a in answers)
        members = Ensemble.load([demo_run], device="cpu").predict(TEXTS, threshold=("positive", p))
        assert [a.label for a in members] == [a.label for a in answers]
    assert {a.label for a in clf.predict(TEXTS, threshold=f"positive={_thresholds_either_side(clf)[0]!r}")} == {
        "positive"}


def test_predict_threshold_flags_the_class_on_stdout_in_an_output_file_and_on_onnx(demo_run, exported, tmp_path,
                                                                                    capsys):
    from attnclf.classifier import Classifier

    for p in _thresholds_either_side(Classifier.load(demo_run, device="cpu")):
        assert main(["predict", str(demo_run), *TEXTS, "--threshold", f"positive={p!r}"]) == 0
        answers = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [a["label"] for a in answers] == [_expected(a["probabilities"], p) for a in answers]
        assert all(a["confidence"] == a["probabilities"][a["label"]] for a in answers)
        output = tmp_path / f"scored-{p}.csv"
        assert main(["predict", str(demo_run), *TEXTS, "--threshold", f"positive={p!r}", "-o", str(output)]) == 0
        with open(output, encoding="utf-8", newline="") as handle:
            assert [row["predicted_label"] for row in csv.DictReader(handle)] == [a["label"] for a in answers]
        assert main(["predict", str(exported), *TEXTS, "--backend", "onnx", "--threshold", f"positive={p!r}"]) == 0
        onnx = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [a["label"] for a in onnx] == [_expected(a["probabilities"], p) for a in onnx]


@pytest.mark.parametrize("value, words", [
    ("fraud=0.5", ["'fraud' is not one of the run's 2 classes", "'negative', 'positive'"]),
    ("positive=1.5", ["between 0 and 1"]), ("positive", ["CLASS=P"]), ("positive=most", ["not a number"]),
])
def test_predict_evaluate_and_serve_refuse_a_bad_threshold_in_one_line(demo_run, cli_error, value, words):
    for argv in (["predict", str(demo_run), "a fine film"], ["evaluate", str(demo_run)],
                 ["serve", str(demo_run), "--port", "0"]):
        error = cli_error([*argv, "--threshold", value])
        assert error.startswith("--threshold")
        for word in words:
            assert word in error


def test_evaluate_threshold_scores_the_thresholded_predictions_and_records_the_threshold(sport_and_money_run,
                                                                                         tmp_path, capsys):
    run, test = sport_and_money_run
    for p in (.2, .5, .9):
        assert main(["evaluate", str(run), "--test-file", str(test), "--json", "--operating-points", "sport",
                     "--threshold", f"sport={p}"]) == 0
        metrics = json.loads(capsys.readouterr().out)
        assert metrics["threshold"] == {"class": "sport", "probability": p}
        # Sport is predicted exactly where the operating points flag it: the same precision and recall.
        row = next(row for row in metrics["operating_points"]["thresholds"] if row["threshold"] == p)
        assert metrics["per_class"]["sport"]["recall"] == pytest.approx(row["recall"])
        assert metrics["per_class"]["sport"]["precision"] == pytest.approx(row["precision"] or 0)
        wrong = tmp_path / f"wrong-{p}.csv"
        assert main(["evaluate", str(run), "--test-file", str(test), "--threshold", f"sport={p}",
                     "--errors", str(wrong)]) == 0
        out = capsys.readouterr().out
        assert f"'sport' when its probability is at least {p}" in out
        with open(wrong, encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == metrics["num_examples"] - np.trace(metrics["confusion_matrix"])
        assert all((row["predicted_label"] == "sport") == (float(row["probability:sport"]) >= p) for row in rows)
    assert main(["evaluate", str(run), "--test-file", str(test), "--json"]) == 0
    assert "threshold" not in json.loads(capsys.readouterr().out)


def test_the_operating_points_table_ends_naming_the_flag_that_applies_a_threshold(sport_and_money_run, capsys):
    run, test = sport_and_money_run
    assert main(["evaluate", str(run), "--test-file", str(test), "--operating-points", "money"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert "optimistic" in lines[-2] and "--split validation" in lines[-2]
    assert lines[-1].startswith("apply one: --threshold money=0.")
    assert "predict, evaluate and serve" in lines[-1]


class _GivenProbabilities:
    """A single-label model of three classes whose probabilities are given, one row per text, as evaluate scores it."""

    label_names, multi_label = ["a", "b", "rare"], False

    def __init__(self, probabilities):
        self.probabilities = probabilities

    def predict_proba(self, texts):
        return self.probabilities[:len(texts)]


def _rare_class_scored(rare_probability: float):
    """A near-uniform model of 60 texts, 4 of them 'rare', given 'rare' ``rare_probability`` each (the others 0.31):
    the model, the texts and their labels."""
    labels = ["a", "b"] * 28 + ["rare"] * 4
    rare = np.where(np.array(labels) == "rare", rare_probability, 0.31)
    probabilities = np.stack([(1 - rare) / 2 + 0.01, (1 - rare) / 2 - 0.01, rare], axis=1)
    return _GivenProbabilities(probabilities), [f"text {i}" for i in range(len(labels))], labels


def test_the_threshold_the_operating_points_advise_is_the_best_f1_of_every_row_they_print():
    # A near-uniform model put every 'rare' probability between 0.3 and 0.4: the grid's rows 0.1 to 0.3 flag every
    # text (F1 0.125), and "apply one" advised 0.1 as "the table's best F1" under a precision row of F1 1 at 0.36.
    from attnclf.evaluation.metrics import evaluate

    model, texts, labels = _rare_class_scored(0.36)
    points = evaluate(model, (texts, labels), operating_points="rare")["operating_points"]
    assert max(row["f1"] for row in points["thresholds"]) == pytest.approx(0.125)
    assert points["apply"] == "threshold rare=0.36 (predict, evaluate and serve take it; 0.36 has the table's best F1)"
    applied = evaluate(model, (texts, labels), threshold="rare=0.36")  # what it advises scores as it says
    assert applied["per_class"]["rare"]["f1"] == 1.0


def test_serve_applies_its_threshold_and_says_it_in_model(demo_run, exported):
    from fastapi.testclient import TestClient

    from attnclf.classifier import Classifier
    from attnclf.export.runtime import OnnxClassifier
    from attnclf.serve.app import create_app

    clf = Classifier.load(demo_run, device="cpu")
    with TestClient(create_app(clf)) as client:
        assert client.get("/model").json()["threshold"] is None
    for p in _thresholds_either_side(clf):
        for model in (clf, OnnxClassifier.load(exported)):
            with TestClient(create_app(model, threshold=("positive", p))) as client:
                assert client.get("/model").json()["threshold"] == {"class": "positive", "probability": p}
                answers = client.post("/predict", json={"texts": TEXTS}).json()["predictions"]
            assert [a["label"] for a in answers] == [_expected(a["probabilities"], p) for a in answers]
            assert all(a["confidence"] == a["probabilities"][a["label"]] for a in answers)


def test_serve_explains_the_class_its_threshold_predicts_as_predict_answers(demo_run):
    """/explain's default target is the class /predict answers: under the service's threshold, not the argmax."""
    from fastapi.testclient import TestClient

    from attnclf.classifier import Classifier
    from attnclf.serve.app import create_app

    clf = Classifier.load(demo_run, device="cpu")
    for p in _thresholds_either_side(clf):
        with TestClient(create_app(clf, threshold=("positive", p))) as client:
            answers = client.post("/predict", json={"texts": TEXTS}).json()["predictions"]
            explained = client.post("/explain", json={"texts": TEXTS}).json()["explanations"]
            several = client.post("/explain", json={"texts": TEXTS[:2], "method": ["occlusion", "grad-input"]}).json()
        assert [e["label"] for e in explained] == [e["target"] for e in explained] == [a["label"] for a in answers]
        assert [e["target"] for e in several["explanations"]] == [a["label"] for a in answers[:2] for _ in range(2)]


def test_classifier_explain_takes_the_threshold_predict_takes(demo_run):
    from attnclf.classifier import Classifier

    clf = Classifier.load(demo_run, device="cpu")
    for p in _thresholds_either_side(clf):
        answers = clf.predict(TEXTS, threshold=("positive", p))
        explained = clf.explain(TEXTS, threshold=("positive", p))
        assert [e.label for e in explained] == [e.target for e in explained] == [a.label for a in answers]


def test_the_advised_threshold_is_the_shortest_decimal_that_flags_the_same_texts():
    # The advice quoted a text's own probability whole ("--threshold rare=0.36219803278148174"): 17 digits to copy,
    # where 0.36 flags the same texts, no probability falling between them (0.4, rounded plainly, would flag none).
    from attnclf.evaluation.metrics import evaluate

    model, texts, labels = _rare_class_scored(0.36219803278148174)
    points = evaluate(model, (texts, labels), operating_points="rare")["operating_points"]
    assert points["apply"] == "threshold rare=0.36 (predict, evaluate and serve take it; 0.36 has the table's best F1)"
    assert evaluate(model, (texts, labels), threshold="rare=0.36")["per_class"]["rare"]["f1"] == 1.0


def test_the_shortest_threshold_rounds_down_to_flag_the_same_texts_and_keeps_edge_scores():
    # (0.38 rounded plainly is 0.4, above the threshold's own text: the shortest that still flags it is 0.3)
    from attnclf.evaluation.metrics import shortest_threshold

    scores = np.array([0.2, 0.38, 0.9], dtype=np.float32)
    assert shortest_threshold(float(scores[1]), scores) == 0.3
    # A threshold of 0 or 1 is already short; one a hair above the next score below needs every digit to tell them.
    assert shortest_threshold(0.0, np.array([0.0, 0.5])) == 0.0
    assert shortest_threshold(1.0, np.array([0.2, 1.0])) == 1.0
    above = np.nextafter(0.5, 1)
    assert shortest_threshold(above, np.array([0.5, above])) == above
