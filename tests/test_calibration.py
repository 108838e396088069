"""Temperature scaling: `attnclf calibrate`, and every way a run's probabilities leave it."""

import json
import random
import shutil

import numpy as np
import pytest

from attnclf.classifier import Classifier
from attnclf.cli import main
from attnclf.ensemble import Ensemble
from attnclf.errors import RunDirError
from attnclf.evaluation.calibration import HIGHEST, LOWEST, fit_temperature, tempered
from attnclf.evaluation.metrics import log_loss

TEXTS = ["the acting was not good", "the plot was dull but the ending was brilliant", "a fine film", "not bad at all"]


def calibrate(run, capsys) -> float:
    assert main(["calibrate", str(run), "--threads", "1"]) == 0
    out = capsys.readouterr().out
    saved = json.loads((run / "temperature.json").read_text())
    assert out.startswith(f"temperature {saved['temperature']:.3f} (") and "validation texts: log loss" in out
    return saved["temperature"]


def train_on_words(root, flipped: float):
    """A bag-of-embeddings run on texts whose words decide the label, ``flipped`` of the labels then flipped."""
    rng = random.Random(0)
    good, bad = "good great fine lovely superb brilliant".split(), "bad dull awful poor weak boring".split()
    other = {"pos": "neg", "neg": "pos"}
    root.mkdir(parents=True, exist_ok=True)
    for name, count in (("train", 800), ("test", 200)):
        rows = ["text,label"]
        for _ in range(count):
            label = rng.choice(["pos", "neg"])
            words = rng.sample(good if label == "pos" else bad, 2) + ["the", "film", "plot", "was"]
            rng.shuffle(words)
            rows.append(f"{' '.join(words)},{other[label] if rng.random() < flipped else label}")
        (root / f"{name}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    run = root / "run"
    assert main(["train", "--train-file", str(root / "train.csv"), "--test-file", str(root / "test.csv"), "--model",
                 "boe", "--epochs", "10", "--lr", "0.01", "--min-frequency", "1", "--threads", "1", "--output",
                 str(run), "--quiet", "--no-report"]) == 0
    return run


@pytest.fixture(scope="module")
def noisy_run(tmp_path_factory):
    """Right on most validation texts, not all: its temperature has a minimum inside the bounds."""
    return train_on_words(tmp_path_factory.mktemp("noisy"), flipped=0.15)


@pytest.fixture
def calibrated(noisy_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(noisy_run, run)
    temperature = calibrate(run, capsys)
    assert LOWEST * 1.1 < temperature < HIGHEST * 0.9  # a minimum inside the bounds
    return run, temperature


def test_the_fit_finds_the_temperature_the_labels_were_drawn_at_and_lowers_the_log_loss():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(30_000, 3)) * 4
    for true in (0.5, 3.0):
        draws = tempered(logits, true)
        labels = np.array([rng.choice(3, p=p) for p in draws])
        found = fit_temperature(labels, logits)
        assert found == pytest.approx(true, rel=0.05)
        assert log_loss(labels, tempered(logits, found)) <= log_loss(labels, tempered(logits, 1.0))


def test_calibrate_fits_on_the_validation_texts_and_every_prediction_is_the_same(noisy_run, calibrated, capsys):
    run, temperature = calibrated
    saved = json.loads((run / "temperature.json").read_text())
    config = json.loads((run / "config.json").read_text())
    assert saved["fitted_on"] == {"split": "validation", "texts": config["data"]["validation_examples"],
                                  "sha256": config["data"]["validation_sha256"]}
    before, after = saved["validation"]["log_loss"]
    assert after <= before
    plain, scaled = Classifier.load(noisy_run, device="cpu"), Classifier.load(run, device="cpu")
    assert (plain.temperature, scaled.temperature) == (1.0, temperature) and temperature != 1.0
    logits = scaled.logits(TEXTS)
    np.testing.assert_allclose(scaled.predict_proba(TEXTS), tempered(logits, temperature), atol=1e-6)
    np.testing.assert_allclose(plain.predict_proba(TEXTS), tempered(logits, 1.0), atol=1e-6)
    assert (scaled.predict_proba(TEXTS).argmax(1) == plain.predict_proba(TEXTS).argmax(1)).all()
    # evaluate scores what the run now gives: the same accuracy, other probabilities.
    scores = {}
    for name, folder in (("plain", noisy_run), ("scaled", run)):
        assert main(["evaluate", str(folder), "--json"]) == 0
        scores[name] = json.loads(capsys.readouterr().out)
    assert scores["plain"]["accuracy"] == scores["scaled"]["accuracy"]
    assert scores["plain"]["log_loss"] != scores["scaled"]["log_loss"]
    # An ensemble averages what its members give.
    ensemble = Ensemble.load([noisy_run, run], device="cpu")
    np.testing.assert_allclose(ensemble.predict_proba(TEXTS),
                               (plain.predict_proba(TEXTS) + scaled.predict_proba(TEXTS)) / 2, atol=1e-6)
    # The report shows the calibrated probabilities, and says so.
    assert main(["report", str(run)]) == 0
    assert f"at temperature {temperature:.3f}, fitted by <code>attnclf calibrate</code>" in (
        run / "report.html").read_text(encoding="utf-8")


def test_the_recorded_scores_are_before_then_after_as_recomputed_on_the_validation_texts(noisy_run, calibrated):
    # calibrate prints "calibration error A -> B": a swapped pair would tell the user calibration made it worse.
    from attnclf.evaluation.metrics import expected_calibration_error
    from attnclf.rundir import read_config
    from attnclf.training.run_data import run_validation_data

    run, temperature = calibrated
    saved = json.loads((run / "temperature.json").read_text())
    plain = Classifier.load(noisy_run, device="cpu")
    validation = run_validation_data([read_config(run)], plain.label_names)
    logits = plain.logits(validation.texts)
    before, after = tempered(logits, 1.0), tempered(logits, temperature)
    assert saved["validation"]["ece"] == pytest.approx([expected_calibration_error(validation.labels, before),
                                                        expected_calibration_error(validation.labels, after)])
    assert saved["validation"]["log_loss"] == pytest.approx([log_loss(validation.labels, before),
                                                             log_loss(validation.labels, after)])


def test_occlusion_measures_drops_in_the_probabilities_the_run_reports(calibrated):
    run, _ = calibrated
    clf = Classifier.load(run, device="cpu")
    text = "the film was great"
    explanation = clf.explain([text], method="occlusion")[0]
    target = clf.label_names.index(explanation.target)
    assert explanation.probability == pytest.approx(float(clf.predict_proba([text])[0, target]), abs=1e-6)
    without = [" ".join(w for j, w in enumerate(text.split()) if j != i) for i in range(4)]
    drops = clf.predict_proba([text])[0, target] - clf.predict_proba(without)[:, target]
    np.testing.assert_allclose(explanation.scores, drops, atol=1e-5)


def test_an_ensemble_is_calibrated_member_by_member_and_a_refit_says_it_is_not(noisy_run, calibrated, tmp_path,
                                                                               capsys):
    run, _ = calibrated
    folder = tmp_path / "ens"
    for seed in (0, 1):
        shutil.copytree(run, folder / f"seed-{seed}")
    assert main(["calibrate", str(folder)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"holds a `train --seeds` ensemble: calibrate each member (`attnclf calibrate {folder / 'seed-0'}`, ...); the "
        f"ensemble then averages their calibrated probabilities")
    assert main(["refit", str(run), "--output", str(tmp_path / "refit"), "--quiet", "--no-report", "--threads",
                 "1"]) == 0
    assert (f"note: {run} is calibrated (temperature.json); its refit is not, and has no validation texts left to "
            f"calibrate on") in capsys.readouterr().err
    assert Classifier.load(tmp_path / "refit", device="cpu").temperature == 1.0
    refits = tmp_path / "ens-refit"  # (as `attnclf refit` of an ensemble folder writes it)
    for seed in (0, 1):
        shutil.copytree(tmp_path / "refit", refits / f"seed-{seed}")
    assert main(["calibrate", str(refits)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"{refits} holds the refits of an ensemble's members: they trained on their validation texts, so none are "
        f"left to calibrate on")


def test_the_onnx_export_carries_the_temperature_and_refuses_to_answer_once_it_changed(calibrated, capsys):
    pytest.importorskip("onnxruntime")
    from attnclf.export import OnnxClassifier

    run, temperature = calibrated
    assert main(["export", str(run), "--format", "onnx"]) == 0
    exported = OnnxClassifier.load(run / "onnx")
    assert json.loads((run / "onnx" / "export.json").read_text())["temperature"] == temperature
    np.testing.assert_allclose(exported.predict_proba(TEXTS), Classifier.load(run, device="cpu").predict_proba(TEXTS),
                               atol=1e-5)
    # Its logits are the graph's, before the temperature, as Classifier.logits gives a calibrated run's.
    np.testing.assert_allclose(exported.logits(TEXTS), Classifier.load(run, device="cpu").logits(TEXTS), atol=1e-4)
    assert exported.logits([]).shape == (0, 2)
    (run / "temperature.json").unlink()  # undone: the export would answer with the calibrated probabilities
    with pytest.raises(RunDirError, match=rf"was exported with temperature {temperature:g} and .* now has 1 "):
        OnnxClassifier.load(run / "onnx")


def test_training_on_or_again_drops_the_temperature_the_earlier_weights_had(calibrated, capsys, monkeypatch):
    from test_cli import interrupt_in_epoch_2

    run, _ = calibrated
    argv = ["train", "--dataset", "demo", "--epochs", "2", "--max-train-examples", "200", "--set", "d_model=16",
            "--set", "layers=1", "--threads", "1", "--output", str(run), "--quiet", "--no-report"]
    with monkeypatch.context() as patch:
        interrupt_in_epoch_2(patch)
        assert main(argv + ["--overwrite"]) == 130
    assert not (run / "temperature.json").exists()  # set aside with the model it belongs to
    assert (run / "earlier-model" / "temperature.json").is_file()
    calibrated_again = json.dumps({"temperature": 2.0})
    (run / "temperature.json").write_text(calibrated_again)  # as if the unfinished run had been calibrated
    assert main(["train", "--resume", "--output", str(run), "--quiet"]) == 0
    assert not (run / "temperature.json").exists() and Classifier.load(run, device="cpu").temperature == 1.0
    # A resume with no epoch left to train changes no weight, so it keeps what was fitted to them.
    (run / "temperature.json").write_text(calibrated_again)
    assert main(["train", "--resume", "--output", str(run), "--quiet"]) == 0
    assert Classifier.load(run, device="cpu").temperature == 2.0


def test_calibrate_refuses_what_it_cannot_calibrate_in_one_line(demo_run, tmp_path, capsys):
    def refused(run) -> str:
        assert main(["calibrate", str(run)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and not (run / "temperature.json").exists()
        return err

    refit = tmp_path / "refit"
    assert main(["refit", str(demo_run), "--output", str(refit), "--quiet", "--no-report", "--threads", "1"]) == 0
    capsys.readouterr()
    assert refused(refit).endswith("is a refit: it trained on its validation texts, so none are left to calibrate on")
    topics = tmp_path / "topics"
    assert main(["train", "--dataset", "topics", "--epochs", "1", "--max-train-examples", "200", "--set", "d_model=16",
                 "--threads", "1", "--output", str(topics), "--quiet", "--no-report"]) == 0
    capsys.readouterr()  # (its one epoch leaves it a note on the label sets it predicts, which is training's)
    assert main(["calibrate", str(topics)]) == 0  # (multi-label runs calibrate: tests/test_multilabel_ensemble.py)
    capsys.readouterr()
    assert refused(tmp_path).endswith("holds 2 runs ('refit', 'topics'): give one of them instead, such as "
                                      f"{refit}")  # (a folder of runs, as the other commands tell it)
    broken = tmp_path / "broken"
    shutil.copytree(demo_run, broken)
    for content in ('{"temperature": -1}', '{"temperature": "2"}', "[1]"):
        (broken / "temperature.json").write_text(content)
        with pytest.raises(RunDirError, match="temperature must be a positive number"):
            Classifier.load(broken, device="cpu")


def test_no_temperature_is_written_when_the_fit_runs_to_its_lower_bound(noisy_run, tmp_path, capsys, monkeypatch):
    from attnclf.evaluation import calibration

    def refused(run) -> str:
        assert main(["calibrate", str(run), "--threads", "1"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and not (run / "temperature.json").exists()
        return err

    # Validation texts the model gets all right: the log loss only falls as T -> 0, to probabilities of 0 and 1.
    logits = np.array([[1.0, -1.0], [-1.0, 1.0]] * 20)
    assert log_loss([0, 1] * 20, tempered(logits, fit_temperature([0, 1] * 20, logits))) < 1e-12
    clean = train_on_words(tmp_path / "clean", flipped=0.0)
    capsys.readouterr()
    assert "no temperature fits: the model is right on all 80 validation texts" in refused(clean)
    # Errors, but logits so flat that the fit asks for less than the lowest bound.
    run = tmp_path / "run"
    shutil.copytree(noisy_run, run)
    monkeypatch.setattr(calibration, "fit_temperature", lambda labels, logits: calibration.LOWEST * 1.0001)
    assert "no temperature fits: its validation texts ask for one below 0.05" in refused(run)
    monkeypatch.setattr(calibration, "fit_temperature", lambda labels, logits: calibration.HIGHEST * 0.9999)
    assert "no temperature fits: its validation texts ask for one above 20" in refused(run)
    # As the fit does where the logits carry no sign of the labels.
    rng = np.random.default_rng(0)
    assert fit_temperature(rng.integers(0, 2, 200), rng.normal(size=(200, 2)) * 3) > HIGHEST * 0.99


def test_gradient_attributions_add_up_to_the_log_odds_of_the_probability_the_run_reports(calibrated):
    run, _ = calibrated
    (run / "temperature.json").write_text(json.dumps({"temperature": 3.0}))  # far from 1, so units differ clearly
    clf = Classifier.load(run, device="cpu")
    text = "the film was great but dull"
    explanation = clf.explain([text], method="integrated-gradients", steps=64)[0]
    target = clf.label_names.index(explanation.target)
    plain = Classifier.load(run, device="cpu")
    plain.temperature = 1.0
    untempered = plain.explain([text], method="integrated-gradients", steps=64)[0]
    # Two classes: the log-odds of softmax(z / 3) are a third of the model's, and so are the attributions.
    assert explanation.log_odds_change == pytest.approx(untempered.log_odds_change / 3, rel=1e-4)
    np.testing.assert_allclose(explanation.scores, np.array(untempered.scores) / 3, rtol=1e-3, atol=1e-6)
    p = clf.predict_proba([text])[0, target]
    z = clf.logits([text])[0]
    assert np.log(p / (1 - p)) == pytest.approx((z[target] - z[1 - target]) / 3, rel=1e-4)
    grad_input = clf.explain([text], method="grad-input")[0].scores
    np.testing.assert_allclose(grad_input, np.array(plain.explain([text], method="grad-input")[0].scores) / 3,
                               rtol=1e-3, atol=1e-6)


def test_a_faithfulness_result_measured_at_another_temperature_is_not_reused(calibrated, capsys):
    run, temperature = calibrated
    assert main(["faithfulness", str(run), "--examples", "20", "--methods", "occlusion", "--threads", "1"]) == 0
    assert json.loads((run / "faithfulness.json").read_text())["temperature"] == temperature
    assert main(["report", str(run), "--threads", "1"]) == 0
    assert "Not measured for these weights" not in (run / "report.html").read_text(encoding="utf-8")
    (run / "temperature.json").unlink()  # undone: the drops were of the calibrated probabilities
    assert main(["report", str(run), "--threads", "1"]) == 0
    assert "Not measured for these weights" in (run / "report.html").read_text(encoding="utf-8")


def test_a_run_another_process_is_writing_into_is_not_calibrated_beside_it(noisy_run, tmp_path, capsys,
                                                                             held_elsewhere, files_but_the_lock):
    # calibrate took no lock: one of a run that `train --resume` was writing fitted its temperature to weights the
    # training then replaced, and two at once wrote temperature.json in turn. Now a holder is named, nothing read.
    from attnclf.rundir import LOCK_FILE

    run = tmp_path / "run"
    shutil.copytree(noisy_run, run)
    before = files_but_the_lock(run)
    with held_elsewhere(run) as pid:
        assert main(["calibrate", str(run), "--threads", "1"]) == 2
        assert capsys.readouterr().err == (f"attnclf: error: {run} is being written by another attnclf process (pid "
                                           f"{pid}); wait for it to finish\n")
        assert files_but_the_lock(run) == before
    calibrate(run, capsys)  # held no more
    assert not (run / LOCK_FILE).exists()


def test_a_run_another_process_is_training_is_refused_before_it_is_called_unfinished(noisy_run, tmp_path, capsys,
                                                                                    held_elsewhere):
    # Its best weights so far, no metrics.json yet: calibrate warned that the run had not finished and advised the
    # `train --resume` that was running, then was refused by it. The holder alone is named, in one line.
    run = tmp_path / "run"
    shutil.copytree(noisy_run, run)
    (run / "metrics.json").unlink()
    with held_elsewhere(run) as pid:
        assert main(["calibrate", str(run), "--threads", "1"]) == 2
        assert capsys.readouterr().err == (f"attnclf: error: {run} is being written by another attnclf process (pid "
                                           f"{pid}); wait for it to finish\n")
    assert main(["calibrate", str(run), "--threads", "1"]) == 0  # held no more: calibrated, and said unfinished
    assert f"warning: {run} has not finished training" in capsys.readouterr().err


def test_calibration_summary_says_the_temperature_and_each_score_before_and_after():
    from attnclf.evaluation.calibration import calibration_summary

    record = {"temperature": 1.5, "fitted_on": {"texts": 1200},
              "validation": {"log_loss": [0.5, 0.25], "ece": [0.125, 0.0625]}}
    assert calibration_summary(record) == ("temperature 1.500 (less sure than trained), fitted on 1,200 validation "
                                           "texts: log loss 0.5000 -> 0.2500, calibration error 0.1250 -> 0.0625")
    record["temperature"] = 0.5
    record["validation"]["ece_per_label"] = {"a" * 150: [0.25, 0.125]}
    first, label = calibration_summary(record).splitlines()
    assert first.startswith("temperature 0.500 (more sure than trained)") and "binary log loss" in first
    assert "calibration error (mean over labels) 0.1250 -> 0.0625" in first
    assert label.startswith("  aaa") and "..." in label and label.endswith(": calibration error 0.2500 -> 0.1250")
