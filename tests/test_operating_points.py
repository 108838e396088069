"""Operating points: one class's precision, recall and F1 when it is flagged above a threshold of its probability."""

import json

import numpy as np
import pytest

from attnclf.cli import main
from attnclf.errors import AttnclfError



def test_operating_points_counts_flagged_texts_and_their_precision_and_recall():
    from attnclf.evaluation.metrics import class_operating_points

    # fraud's probabilities .95 (fraud), .8 (ok), .6 (fraud), .3 (fraud), .1 (ok)
    probabilities = np.array([[.05, .95], [.2, .8], [.4, .6], [.7, .3], [.9, .1]])
    points = class_operating_points([1, 0, 1, 1, 0], probabilities, ["ok", "fraud"], "fraud")
    assert points["class"] == "fraud" and points["positives"] == 3 and points["num_examples"] == 5
    by_threshold = {round(row["threshold"], 1): row for row in points["thresholds"]}
    assert sorted(by_threshold) == [.1, .2, .3, .4, .5, .6, .7, .8, .9]
    assert by_threshold[.5]["flagged"] == 3 and by_threshold[.5]["precision"] == pytest.approx(2 / 3)
    assert by_threshold[.5]["recall"] == pytest.approx(2 / 3) and by_threshold[.5]["f1"] == pytest.approx(2 / 3)
    assert by_threshold[.1]["flagged"] == 5 and by_threshold[.1]["recall"] == 1  # (a probability of t is flagged)
    # The smallest threshold with precision >= .9 flags the most texts at that precision: .95 alone, which 0.9 flags
    # too (written so: the shortest decimal above the .8 below it)
    assert points["precision_at_least"]["0.9"]["threshold"] == 0.9
    assert points["precision_at_least"]["0.9"]["flagged"] == 1
    # The largest with recall >= .9 flags the fewest that still find every fraud: down to .3.
    assert points["recall_at_least"]["0.9"]["threshold"] == pytest.approx(.3)
    assert points["recall_at_least"]["0.9"]["precision"] == pytest.approx(3 / 4)


def test_the_precise_threshold_is_the_smallest_of_several_that_reach_the_target():
    from attnclf.evaluation.metrics import class_operating_points

    # Every threshold from .7 up flags frauds alone: .7 finds all three, .9 one; the table offers .7.
    probabilities = np.array([[.1, .9], [.2, .8], [.3, .7], [.7, .3], [.8, .2]])
    points = class_operating_points([1, 1, 1, 0, 0], probabilities, ["ok", "fraud"], "fraud")
    for target in ("0.9", "0.95"):
        assert points["precision_at_least"][target]["threshold"] == pytest.approx(.7)
        assert points["precision_at_least"][target]["flagged"] == 3


def test_operating_points_says_none_where_a_target_is_out_of_reach():
    from attnclf.evaluation.metrics import class_operating_points

    probabilities = np.array([[.1, .9], [.8, .2]])  # the surest text is not fraud: no threshold is precise
    points = class_operating_points([0, 1], probabilities, ["ok", "fraud"], "fraud")
    assert points["precision_at_least"] == {"0.9": None, "0.95": None}
    assert points["thresholds"][-1]["flagged"] == 1 and points["thresholds"][-1]["precision"] == 0


def test_evaluate_json_holds_the_operating_points_of_the_class_asked(sport_and_money_run, capsys):
    run, test = sport_and_money_run
    assert main(["evaluate", str(run), "--test-file", str(test), "--json", "--operating-points", "sport"]) == 0
    points = json.loads(capsys.readouterr().out)["operating_points"]
    assert points["class"] == "sport" and points["positives"] == 2 and len(points["thresholds"]) == 9
    assert "optimistic" in points["note"]


def test_evaluate_prints_the_operating_points_table_and_warns_on_test(sport_and_money_run, capsys):
    run, test = sport_and_money_run
    assert main(["evaluate", str(run), "--test-file", str(test), "--operating-points", "money"]) == 0
    out = capsys.readouterr().out
    assert "operating points of 'money'" in out and "threshold" in out and "flagged" in out
    assert "precision >= 0.9" in out and "recall >= 0.95" in out
    assert "optimistic" in out and "--split validation" in out


def test_evaluate_on_validation_does_not_warn(sport_and_money_run, capsys):
    run, _ = sport_and_money_run
    assert main(["evaluate", str(run), "--split", "validation", "--json", "--operating-points", "money"]) == 0
    points = json.loads(capsys.readouterr().out)["operating_points"]
    assert "note" not in points


def test_evaluate_python_returns_the_operating_points_key(sport_and_money_run):
    from attnclf.ensemble import load_run
    from attnclf.evaluation import evaluate

    run, _ = sport_and_money_run
    clf = load_run(run)
    metrics = evaluate(clf, (["the team won", "shares fell"], ["sport", "money"]), operating_points="sport")
    assert metrics["operating_points"]["positives"] == 1
    assert "operating_points" not in evaluate(clf, (["the team won"], ["sport"]))


def test_evaluate_refuses_an_unknown_class_in_one_line(sport_and_money_run, cli_error):
    run, test = sport_and_money_run
    error = cli_error(["evaluate", str(run), "--test-file", str(test), "--operating-points", "fraud"])
    assert "--operating-points" in error and "'fraud'" in error and "'money'" in error


def test_operating_points_refuses_a_class_the_scored_texts_lack():
    from attnclf.evaluation.metrics import class_operating_points

    with pytest.raises(AttnclfError, match="no 'fraud' text"):
        class_operating_points([0, 0], np.array([[.9, .1], [.8, .2]]), ["ok", "fraud"], "fraud")


def test_a_targets_threshold_is_printed_as_a_decimal_that_flags_its_texts():
    # Printed to 4 places, a threshold read off the texts could flag others: 0.50657 showed as 0.5066, which flags
    # neither of the texts at 0.50657. Each is written as the shortest decimal above the probability below it, whole.
    from attnclf.evaluation.metrics import class_operating_points, operating_points_table

    fraud = np.array([.9, .50657, .50657, .50655, .2])
    points = class_operating_points([1, 1, 1, 0, 0], np.stack([1 - fraud, fraud], axis=1), ["ok", "fraud"], "fraud")
    row = points["precision_at_least"]["0.9"]
    assert row["threshold"] == 0.50657 and row["flagged"] == 3 and row["precision"] == 1.0
    assert int(np.sum(fraud >= row["threshold"])) == 3
    assert "precision >= 0.9: smallest threshold 0.50657, flagging 3:" in operating_points_table(points)
