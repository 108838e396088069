"""Multi-label ensembles: members' sigmoid probabilities averaged per label, label sets at the ensemble's thresholds."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from attnclf.classifier import Classifier
from attnclf.cli import main
from attnclf.data.generated import topics
from attnclf.data.multilabel import multi_hot
from attnclf.ensemble import Ensemble, load_run
from attnclf.errors import AttnclfError
from attnclf.evaluation.multilabel import multilabel_metrics, tune_thresholds
from attnclf.prediction import LabelSetPrediction
from attnclf.training.run_data import run_validation_data

TEXTS = ["the coach and the referee at the stadium", "bread soup and cheese for dinner with the orchestra",
         "today some people said more"]
TINY = ["--multi-label", "--label-column", "topics", "--epochs", "3", "--lr", "3e-3", "--set", "d_model=16",
        "--set", "layers=1", "--threads", "1", "--quiet", "--no-report"]


@pytest.fixture(scope="module")
def topic_files(tmp_path_factory) -> tuple[Path, Path]:
    """Generated topics, small: training data as JSON lines with lists, test data as CSV with "|"-joined cells."""
    root = tmp_path_factory.mktemp("topics")
    splits = topics(n_train=500, n_test=120)
    names = splits.train.label_names
    train = root / "train.jsonl"
    train.write_text("".join(json.dumps({"text": t, "topics": [names[i] for i in y]}) + "\n"
                             for t, y in zip(splits.train.texts, splits.train.labels)), encoding="utf-8")
    with open(root / "test.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "topics"])
        writer.writerows((t, "|".join(names[i] for i in y)) for t, y in zip(splits.test.texts, splits.test.labels))
    return train, root / "test.csv"


def _train_seeds(files: tuple[Path, Path], output: Path, *extra: str) -> Path:
    assert main(["train", "--train-file", str(files[0]), "--test-file", str(files[1]), *TINY, "--seeds", "0", "1",
                 *extra, "--output", str(output)]) == 0
    return output


@pytest.fixture(scope="module")
def shared_split(topic_files, tmp_path_factory) -> Path:
    """Two seeds holding out the same validation texts (--split-seed): the ensemble tunes its own thresholds there."""
    return _train_seeds(topic_files, tmp_path_factory.mktemp("runs") / "shared", "--split-seed", "0")


@pytest.fixture(scope="module")
def own_splits(topic_files, tmp_path_factory) -> Path:
    """Two seeds, each holding out its own validation texts: no texts the ensemble could tune thresholds on."""
    return _train_seeds(topic_files, tmp_path_factory.mktemp("runs") / "own")


def _members(folder: Path) -> list[Classifier]:
    return [Classifier.load(folder / f"seed-{seed}", device="cpu") for seed in (0, 1)]


def test_a_multi_label_ensemble_averages_each_labels_sigmoid_probability(shared_split):
    members = _members(shared_split)
    ensemble = Ensemble.load([shared_split], device="cpu")
    assert ensemble.multi_label and "multi_label=True" in repr(ensemble)
    expected = np.mean([member.predict_proba(TEXTS) for member in members], axis=0)
    assert np.allclose(ensemble.predict_proba(TEXTS), expected, atol=1e-6)
    predictions = ensemble.predict(TEXTS)
    assert all(isinstance(p, LabelSetPrediction) for p in predictions)
    for row, prediction in zip(expected, predictions):
        assert set(prediction.labels) == {name for name, p, t in zip(ensemble.label_names, row, ensemble.thresholds)
                                          if p >= t}
        assert prediction.probabilities == pytest.approx(dict(zip(ensemble.label_names, row.tolist())), abs=1e-6)
    # One label's threshold replaced, as a run's predict takes it; the others keep the ensemble's.
    sports = ensemble.predict(TEXTS, threshold=("sports", 0.999))
    assert all("sports" not in p.labels for p in sports)


def test_members_sharing_validation_texts_tune_the_ensembles_thresholds_there(shared_split, cli_error):
    saved = json.loads((shared_split / "ensemble.json").read_text())
    ensemble = Ensemble.load([shared_split], device="cpu")
    validation = run_validation_data([m.config for m in ensemble.members], ensemble.label_names)
    tuned, _ = tune_thresholds(multi_hot(validation.labels, len(ensemble.label_names)),
                               ensemble.predict_proba(validation.texts))
    assert saved["thresholds"] == pytest.approx(dict(zip(ensemble.label_names, tuned.tolist())))
    assert saved["thresholds_from"] == "validation"
    assert ensemble.thresholds.tolist() == pytest.approx(tuned.tolist())
    # Its validation texts tuned them: no validation metrics to flatter it, and none scored there on request.
    assert "validation_metrics" not in saved
    assert "tuned its thresholds on its validation texts" in cli_error(
        ["evaluate", str(shared_split), "--split", "validation", "--device", "cpu"])


def test_members_with_their_own_validation_texts_average_their_thresholds(own_splits, shared_split):
    saved = json.loads((own_splits / "ensemble.json").read_text())
    members = _members(own_splits)
    mean = np.mean([member.thresholds for member in members], axis=0)
    assert saved["thresholds_from"] == "members" and saved["thresholds"] == pytest.approx(
        dict(zip(members[0].label_names, mean.tolist())))
    assert Ensemble.load([own_splits], device="cpu").thresholds.tolist() == pytest.approx(mean.tolist())
    # Runs named one by one (no ensemble.json to hold tuned thresholds): theirs averaged, as well.
    named = Ensemble.load([shared_split / "seed-0", shared_split / "seed-1"], device="cpu")
    assert named.thresholds.tolist() == pytest.approx(np.mean([m.thresholds for m in _members(shared_split)],
                                                              axis=0).tolist())


def test_the_ensembles_test_metrics_are_its_label_sets_at_its_thresholds(shared_split, topic_files, capsys):
    saved = json.loads((shared_split / "ensemble.json").read_text())["metrics"]
    assert saved["multi_label"] and saved["per_class"]["sports"]["threshold"] == pytest.approx(
        json.loads((shared_split / "ensemble.json").read_text())["thresholds"]["sports"])
    assert main(["evaluate", str(shared_split), "--test-file", str(topic_files[1]), "--json", "--device", "cpu"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["micro_f1"] == pytest.approx(saved["micro_f1"], abs=1e-6)
    ensemble = Ensemble.load([shared_split], device="cpu")
    from attnclf.data.files import load_file
    test = load_file(topic_files[1], label_column="topics", multi_label=True, label_names=ensemble.label_names)
    expected = multilabel_metrics(multi_hot(test.labels, len(ensemble.label_names)),
                                  ensemble.predict_proba(test.texts), ensemble.label_names, ensemble.thresholds)
    assert evaluated["macro_f1"] == pytest.approx(expected["macro_f1"], abs=1e-6)


def test_predict_and_serve_give_a_multi_label_ensembles_label_sets(shared_split, capsys):
    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app

    ensemble = load_run(shared_split, device="cpu")
    expected = ensemble.predict(TEXTS)
    assert main(["predict", str(shared_split), TEXTS[1], "--device", "cpu"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["labels"] == expected[1].labels and "label" not in record
    with TestClient(create_app(ensemble)) as client:
        answer = client.post("/predict", json={"texts": TEXTS})
        assert answer.status_code == 200, answer.text
        assert [got["labels"] for got in answer.json()["predictions"]] == [p.labels for p in expected]
        about = client.get("/model").json()
        assert about["multi_label"] and about["ensemble_members"] == 2
        assert about["thresholds"] == pytest.approx(dict(zip(ensemble.label_names, ensemble.thresholds.tolist())))


def test_single_and_multi_label_runs_or_other_label_lists_do_not_average(shared_split, demo_run):
    members = _members(shared_split)
    with pytest.raises(AttnclfError) as refused:
        Ensemble.load([shared_split / "seed-0", demo_run], device="cpu")
    assert str(refused.value) == (f"{demo_run} is a single-label run and {shared_split / 'seed-0'} a multi-label one; "
                                  f"an ensemble's runs are all single-label or all multi-label")
    reordered = _members(shared_split)[1]
    reordered.label_names = list(reversed(reordered.label_names))
    with pytest.raises(AttnclfError, match="an ensemble's runs must share their labels"):
        Ensemble([members[0], reordered])


def test_an_ensemble_json_with_a_broken_threshold_is_one_line(shared_split, tmp_path):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(shared_split, folder)
    saved = json.loads((folder / "ensemble.json").read_text())
    saved["thresholds"]["sports"] = 7
    (folder / "ensemble.json").write_text(json.dumps(saved))
    with pytest.raises(AttnclfError) as refused:
        Ensemble.load([folder], device="cpu")
    assert str(refused.value) == (f"{folder / 'ensemble.json'}: the threshold of label 'sports' must be a number from "
                                  f"0 to 1, got 7")


def test_calibrate_refuses_a_multi_label_ensemble_as_multi_label(shared_split, cli_error):
    assert cli_error(["calibrate", str(shared_split), "--device", "cpu"]) == (
        f"{shared_split} holds a `train --seeds` ensemble of multi-label runs: their labels are thresholded one by "
        f"one (thresholds.json), not calibrated by one temperature")


def test_a_refitted_multi_label_ensemble_predicts_at_the_thresholds_its_ensemble_tuned(shared_split, own_splits,
                                                                                        tmp_path):
    from attnclf.training.refit import refit_runs

    # (as a refitted run predicts at the thresholds its run tuned: the refits have no validation texts left)
    refit_runs([shared_split], output=str(tmp_path / "shared-refit"), device="cpu", threads=1, report=False,
               progress=False)
    tuned = json.loads((shared_split / "ensemble.json").read_text())["thresholds"]
    saved = json.loads((tmp_path / "shared-refit" / "ensemble.json").read_text())
    assert saved["thresholds"] == tuned and saved["thresholds_from"] == "ensemble refitted"
    assert Ensemble.load([tmp_path / "shared-refit"], device="cpu").thresholds.tolist() == pytest.approx(
        [tuned[name] for name in saved["metrics"]["per_class"]])
    # An ensemble that tuned none: the refits' thresholds (their runs') averaged, as its own were.
    refit_runs([own_splits], output=str(tmp_path / "own-refit"), device="cpu", threads=1, report=False,
               progress=False)
    saved = json.loads((tmp_path / "own-refit" / "ensemble.json").read_text())
    assert saved["thresholds"] == json.loads((own_splits / "ensemble.json").read_text())["thresholds"]
    assert saved["thresholds_from"] == "members"
