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


def test_calibrate_points_a_multi_label_ensemble_to_its_members_and_to_tuning_its_thresholds_again(shared_split,
                                                                                                    cli_error):
    assert cli_error(["calibrate", str(shared_split), "--device", "cpu"]) == (
        f"{shared_split} holds a `train --seeds` ensemble: calibrate each member (`attnclf calibrate "
        f"{shared_split / 'seed-0'}`, ...); the ensemble then averages their calibrated probabilities, and its "
        f"thresholds, tuned on the members' probabilities, are tuned again on those by its `train --seeds` command "
        f"with --resume")


# --- calibrating a multi-label run ---------------------------------------------

def _sigmoid(z):
    return 1 / (1 + np.exp(-np.asarray(z, dtype=np.float64)))


def _binary_nll(y, z, temperature):
    p = np.clip(_sigmoid(z / temperature), 1e-12, 1 - 1e-12)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


@pytest.fixture(scope="module")
def calibrated(shared_split, tmp_path_factory) -> tuple[Path, Classifier, Path]:
    """A copy of the shared split's ensemble, its seed-0 calibrated; that member as it was before."""
    import shutil

    folder = tmp_path_factory.mktemp("calibrated") / "shared"
    shutil.copytree(shared_split, folder)
    before = Classifier.load(folder / "seed-0", device="cpu")
    assert main(["calibrate", str(folder / "seed-0"), "--device", "cpu"]) == 0
    return folder, before, folder / "seed-0"


def test_a_multi_label_run_is_calibrated_by_one_temperature_fitted_on_every_labels_binary_log_loss(calibrated):
    folder, before, run = calibrated
    record = json.loads((run / "temperature.json").read_text())
    temperature = record["temperature"]
    validation = run_validation_data([before.config], before.label_names)
    y, z = multi_hot(validation.labels, len(before.label_names)), before.logits(validation.texts)
    fitted = _binary_nll(y, z, temperature)
    assert fitted <= min(_binary_nll(y, z, temperature * 1.05), _binary_nll(y, z, temperature / 1.05))
    assert record["validation"]["log_loss"] == pytest.approx([_binary_nll(y, z, 1.0), fitted], abs=1e-9)
    assert set(record["validation"]["ece_per_label"]) == set(before.label_names)
    assert all(len(pair) == 2 for pair in record["validation"]["ece_per_label"].values())
    assert record["validation"]["ece"] == pytest.approx(
        [np.mean([pair[i] for pair in record["validation"]["ece_per_label"].values()]) for i in (0, 1)])
    after = Classifier.load(run, device="cpu")
    assert after.temperature == temperature
    assert np.allclose(after.predict_proba(TEXTS), _sigmoid(before.logits(TEXTS) / temperature), atol=1e-6)
    # The thresholds move with the probabilities, so every label set stays as it was: calibration changes how sure.
    assert after.thresholds == pytest.approx(_sigmoid(np.log(before.thresholds / (1 - before.thresholds))
                                                      / temperature))
    texts = validation.texts + TEXTS
    assert [p.labels for p in after.predict(texts)] == [p.labels for p in before.predict(texts)]


def test_an_export_of_a_calibrated_multi_label_run_gives_its_label_sets(calibrated, tmp_path):
    from attnclf.export.runtime import OnnxClassifier

    _, _, run = calibrated
    assert main(["export", str(run), "--check-examples", "50"]) == 0  # (into run/onnx: checked as it loads)
    exported = OnnxClassifier.load(run / "onnx")  # (checked against the run's thresholds and temperature)
    clf = Classifier.load(run, device="cpu")
    assert exported.thresholds == pytest.approx(clf.thresholds)
    assert [p.labels for p in exported.predict(TEXTS)] == [p.labels for p in clf.predict(TEXTS)]


def test_an_ensemble_whose_thresholds_were_tuned_before_a_member_was_calibrated_is_refused(calibrated, cli_error,
                                                                                           topic_files):
    folder, _, run = calibrated
    temperature = json.loads((run / "temperature.json").read_text())["temperature"]
    assert cli_error(["predict", str(folder), TEXTS[0], "--device", "cpu"]) == (
        f"{folder / 'ensemble.json'}: its thresholds were tuned on its members' probabilities at temperatures 1 and "
        f"1, and {run} now has {temperature:g} (`attnclf calibrate` since): they would cut other probabilities; tune "
        f"them again with its `train --seeds` command and --resume, or name the members one by one (their "
        f"thresholds' mean)")
    named = Ensemble.load([folder / "seed-0", folder / "seed-1"], device="cpu")
    assert named.thresholds == pytest.approx(np.mean([Classifier.load(folder / f"seed-{s}", device="cpu").thresholds
                                                      for s in (0, 1)], axis=0))
    # Its command with --resume keeps the finished members and tunes the thresholds again, on what they give now.
    _train_seeds(topic_files, folder, "--split-seed", "0", "--resume")
    saved = json.loads((folder / "ensemble.json").read_text())
    assert saved["member_temperatures"] == [temperature, 1.0]
    ensemble = Ensemble.load([folder], device="cpu")
    validation = run_validation_data([m.config for m in ensemble.members], ensemble.label_names)
    tuned, _ = tune_thresholds(multi_hot(validation.labels, len(ensemble.label_names)),
                               ensemble.predict_proba(validation.texts))
    assert ensemble.thresholds.tolist() == pytest.approx(tuned.tolist())


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


def test_calibrate_prints_a_multi_label_runs_calibration_error_label_by_label(shared_split, tmp_path, capsys):
    import shutil

    run = tmp_path / "seed-1"
    shutil.copytree(shared_split / "seed-1", run)
    assert main(["calibrate", str(run), "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    record = json.loads((run / "temperature.json").read_text())["validation"]
    assert ", calibration error (mean over labels) " in lines[0] and ": binary log loss " in lines[0]
    assert lines[1:1 + len(record["ece_per_label"])] == [
        f"  {label}: calibration error {before:.4f} -> {after:.4f}"
        for label, (before, after) in record["ece_per_label"].items()]


def test_train_seeds_says_where_a_multi_label_ensembles_thresholds_came_from(topic_files, shared_split, own_splits,
                                                                             capsys):
    # (--resume: the members are finished, so only the ensemble is tested and its ensemble.json written again)
    _train_seeds(topic_files, shared_split, "--split-seed", "0", "--resume")
    assert "label sets at thresholds tuned on the validation texts every member held out\n" in capsys.readouterr().out
    _train_seeds(topic_files, own_splits, "--resume")
    assert ("label sets at the members' thresholds, averaged: each held out validation texts of its own (one "
            "--split-seed would share them)\n") in capsys.readouterr().out


def test_no_temperature_is_written_for_a_multi_label_run_whose_labels_all_fall_on_their_side(shared_split, tmp_path,
                                                                                             cli_error, monkeypatch):
    import shutil

    run = tmp_path / "seed-0"
    shutil.copytree(shared_split / "seed-0", run)
    clf = Classifier.load(run, device="cpu")
    validation = run_validation_data([clf.config], clf.label_names)
    separated = 4.0 * (2 * multi_hot(validation.labels, len(clf.label_names)) - 1)  # (the log loss falls as T -> 0)
    monkeypatch.setattr(Classifier, "logits", lambda self, texts: separated)
    assert cli_error(["calibrate", str(run), "--device", "cpu"]) == (
        f"{run}: no temperature fits: every label of all {len(validation)} validation texts is on its side of "
        f"probability 0.5, so their log loss falls as T -> 0 and every probability would become 0 or 1, a certainty "
        f"the test texts would not bear out; nothing written")
    assert not (run / "temperature.json").exists()


def test_thresholds_given_in_python_are_one_per_label_each_a_probability(shared_split):
    members = _members(shared_split)
    given = Ensemble(members, thresholds=[0.3] * 5)
    assert given.thresholds.tolist() == [0.3] * 5 and given.thresholds_from == "those it was given"
    with pytest.raises(AttnclfError, match=r"^thresholds: 2 given, one per label needed \(5\)$"):
        Ensemble(members, thresholds=[0.3, 0.4])
    with pytest.raises(AttnclfError, match=r"^thresholds: 'sports' at nan: each must be a number from 0 to 1$"):
        Ensemble(members, thresholds=[0.3, 0.3, 0.3, 0.3, float("nan")])


def test_a_refit_of_an_ensemble_whose_thresholds_were_tuned_on_calibrated_members_does_not_carry_them(
        shared_split, topic_files, tmp_path):
    """The refits are not calibrated (no validation texts left), so thresholds the ensemble tuned on its calibrated
    members' sharper or softer probabilities would cut other ones: the refits' own (their runs') are averaged."""
    import shutil

    from attnclf.training.refit import refit_runs

    folder = tmp_path / "shared"
    shutil.copytree(shared_split, folder)
    assert main(["calibrate", str(folder / "seed-0"), "--device", "cpu"]) == 0
    _train_seeds(topic_files, folder, "--split-seed", "0", "--resume")  # (tuned again, at the new temperature)
    assert json.loads((folder / "ensemble.json").read_text())["member_temperatures"][0] != 1
    refit_runs([folder], output=str(tmp_path / "refit"), device="cpu", threads=1, report=False, progress=False)
    saved = json.loads((tmp_path / "refit" / "ensemble.json").read_text())
    assert saved["thresholds_from"] == "members"
    refits = [Classifier.load(tmp_path / "refit" / f"seed-{seed}", device="cpu") for seed in (0, 1)]
    assert list(saved["thresholds"].values()) == pytest.approx(np.mean([r.thresholds for r in refits], axis=0).tolist())


def test_evaluate_threshold_on_a_multi_label_ensemble_names_the_ensembles_thresholds_not_a_file_it_lacks(
        shared_split, own_splits, topic_files, capsys):
    """It said '(ensemble.json, or its members' averaged)', leaving the reader to find out which: it says which."""
    tuned, averaged = [str(shared_split)], [str(own_splits)]
    for runs, source in ((tuned, "ensemble.json's, tuned on the validation texts its members shared"),
                         (averaged, "its members' averaged"),
                         ([str(shared_split / "seed-0"), str(shared_split / "seed-1")], "its members' averaged")):
        assert main(["evaluate", *runs, "--test-file", str(topic_files[1]), "--threshold", "sports=0.9",
                     "--device", "cpu"]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == (
            f"predicted by --threshold: 'sports' when its probability is at least 0.9; the other labels at the "
            f"ensemble's thresholds ({source})"), runs
    assert json.loads((shared_split / "ensemble.json").read_text())["thresholds_from"] == "validation"
    assert json.loads((own_splits / "ensemble.json").read_text())["thresholds_from"] == "members"
    assert main(["evaluate", str(shared_split / "seed-0"), "--test-file", str(topic_files[1]), "--threshold",
                 "sports=0.9", "--device", "cpu"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("; the other labels at their own thresholds "
                                                             "(thresholds.json)")


@pytest.mark.parametrize("recorded", [0.5, [1.0], [1.0, "warm"], [1.0, True]])
def test_an_ensemble_json_whose_member_temperatures_are_not_one_number_a_member_is_one_line(shared_split, tmp_path,
                                                                                           recorded):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(shared_split, folder)
    saved = json.loads((folder / "ensemble.json").read_text())
    saved["member_temperatures"] = recorded
    (folder / "ensemble.json").write_text(json.dumps(saved))
    with pytest.raises(AttnclfError) as refused:
        Ensemble.load([folder], device="cpu")
    assert str(refused.value) == (f"{folder / 'ensemble.json'}: member_temperatures must be a list of 2 positive "
                                  f"numbers, one a member, got {recorded!r}")


def test_calibrate_help_says_how_a_multi_label_run_is_calibrated(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "2000")  # (argparse wraps at a hyphen, multi-label's too)
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "a multi-label run's: one T for every label's sigmoid(logit / T), by their binary log loss" in said
    assert "thresholds move with its probabilities" in said


@pytest.mark.parametrize("given", [0.3, {"sports": 0.3}, "0.3"])
def test_thresholds_given_in_python_as_other_than_a_list_are_one_line(shared_split, given):
    with pytest.raises(AttnclfError) as refused:
        Ensemble(_members(shared_split), thresholds=given)
    assert str(refused.value) == (f"thresholds: a list of 5 numbers from 0 to 1, one per label in label_names' "
                                  f"order, got {given!r}")
