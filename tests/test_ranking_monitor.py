"""Ranking scores in training: ROC AUC and average precision per epoch in history.jsonl, and --monitor on them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attnclf.cli import main
from attnclf.errors import AttnclfError
from attnclf.evaluation.metrics import compute_metrics
from attnclf.evaluation.multilabel import multilabel_metrics
from attnclf.training.run import train_run
from attnclf.training.trainer import TrainConfig, describe_kept

from test_multilabel import _csv, _jsonl
from test_training import tiny_settings


@pytest.fixture(scope="module")
def ranked_run(tmp_path_factory) -> Path:
    """A tiny demo run that keeps the epoch of best validation average precision."""
    settings = tiny_settings(tmp_path_factory.mktemp("ranked") / "run", epochs=3, monitor="average_precision",
                             lr=3e-4)
    return train_run(settings, progress=False).run_dir


def _history(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]


def test_every_epoch_records_validation_roc_auc_and_average_precision_as_the_kept_weights_score_them(ranked_run):
    from attnclf.classifier import Classifier
    from attnclf.training.run_data import run_validation_data

    history = _history(ranked_run)
    assert all(0 < h["val_roc_auc"] <= 1 and 0 < h["val_average_precision"] <= 1 for h in history)
    clf = Classifier.load(ranked_run, device="cpu")
    validation = run_validation_data([clf.config], clf.label_names, None)
    scored = compute_metrics(validation.labels, clf.predict_proba(list(validation.texts)), clf.label_names)
    kept = max(history, key=lambda h: h["val_average_precision"])  # (the first of the best: max keeps the first)
    assert kept["val_average_precision"] == pytest.approx(scored["average_precision"], abs=1e-6)
    assert kept["val_roc_auc"] == pytest.approx(scored["roc_auc"], abs=1e-6)


def test_the_kept_epoch_is_named_by_its_ranking_score():
    history = [{"epoch": 1, "val_roc_auc": 0.8, "val_average_precision": 0.7},
               {"epoch": 2, "val_roc_auc": 0.9, "val_average_precision": 0.6}]
    assert describe_kept(history, "roc_auc") == "epoch 2 of 2: the best validation ROC AUC (0.9000)"
    assert describe_kept(history, "average_precision") == "epoch 1 of 2: the best validation average precision (0.7000)"


def test_a_run_monitored_on_average_precision_resumes_and_refits_on_it(ranked_run, tmp_path):
    from attnclf.training.refit import refit_runs
    from attnclf.training.settings import resume_settings

    assert resume_settings(ranked_run).train.monitor == "average_precision"
    (result,), _ = refit_runs([ranked_run], str(tmp_path / "refit"), device="cpu", report=False, progress=False)
    kept = max(_history(ranked_run), key=lambda h: h["val_average_precision"])
    refit_of = json.loads((result.run_dir / "config.json").read_text())["settings"]["refit_of"]
    assert (refit_of["monitor"], refit_of["epochs"], refit_of["value"]) == (
        "average_precision", kept["epoch"], kept["val_average_precision"])


@pytest.mark.parametrize("monitor", ["roc_auc", "average_precision"])
def test_the_ranking_scores_are_monitors_higher_being_better(monitor):
    assert TrainConfig(monitor=monitor).monitor == monitor
    with pytest.raises(AttnclfError, match="^monitor must be one of accuracy, macro_f1, micro_f1, loss, roc_auc, "
                                           "average_precision, got 'auc'$"):
        TrainConfig(monitor="auc")


def test_a_multi_label_epoch_records_the_macro_ranking_scores():
    from attnclf.training.multilabel import check_config, validation_record

    targets = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1]])
    probabilities = np.array([[.9, .2, .6], [.3, .7, .8], [.6, .4, .3], [.2, .1, .9]])
    record = validation_record(targets, probabilities, ["a", "b", "c"])
    macro = multilabel_metrics(targets, probabilities, ["a", "b", "c"], report=False)
    assert (record["val_roc_auc"], record["val_average_precision"]) == (macro["roc_auc"], macro["average_precision"])
    for monitor in ("roc_auc", "average_precision"):
        check_config(TrainConfig(monitor=monitor))  # (accepted: no error)


@pytest.mark.parametrize("monitor", ["roc_auc", "average_precision"])
def test_a_validation_split_of_one_class_is_refused_before_training_for_a_ranking_monitor(monitor, tmp_path, capsys):
    # Neither score is defined without texts on both sides of a class: the monitor would read null every epoch, and
    # each null would pass for an improvement on the last, the run silently keeping its last epoch, never stopping.
    train = _csv(tmp_path / "train.csv", [(f"good film {i}", "pos") if i % 2 else (f"bad film {i}", "neg")
                                          for i in range(60)])
    validation = _csv(tmp_path / "validation.csv", [(f"good movie {i}", "pos") for i in range(12)])
    out = tmp_path / "run"
    argv = ["train", "--train-file", str(train), "--validation-file", str(validation), "--epochs", "2",
            "--set", "d_model=16", "--set", "layers=1", "--threads", "1", "--output", str(out), "--quiet",
            "--no-report"]
    assert main([*argv, "--monitor", monitor]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"attnclf: error: --monitor {monitor} (monitor= in Python) is undefined on these validation "
                   f"texts: all 12 are of one class, 'pos'; monitor loss, accuracy or macro_f1, or validate on texts "
                   f"of more than one class")
    assert not out.exists()  # nothing written: the run never started
    assert main([*argv, "--monitor", "accuracy"]) == 0  # (the same data trains on another monitor)


def test_a_multi_label_validation_split_without_a_mixed_label_is_refused_for_a_ranking_monitor(tmp_path):
    from attnclf.training.settings import DataSettings

    train = _jsonl(tmp_path / "train.jsonl", [{"text": f"sport and food {i}", "label": ["sport", "food"][: 1 + i % 2]}
                                              for i in range(40)])
    # Every validation text has "sport" and none has "food": no label has both positives and negatives.
    validation = _jsonl(tmp_path / "validation.jsonl", [{"text": f"sport {i}", "label": ["sport"]} for i in range(6)])
    settings = tiny_settings(tmp_path / "run", monitor="roc_auc")
    settings.data = DataSettings(train_file=str(train), validation_file=str(validation), multi_label=True)
    with pytest.raises(AttnclfError, match=r"^--monitor roc_auc \(monitor= in Python\) is undefined on these "
                                           r"validation texts: no label is on some of the 6 and off others; monitor "
                                           r"loss, accuracy, macro_f1 or micro_f1, or validate on texts whose label "
                                           r"sets differ$"):
        train_run(settings, progress=False)
    assert not (tmp_path / "run").exists()


def test_train_accepts_a_ranking_monitor_and_prints_it_each_epoch_and_for_the_kept_weights(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", "2", "--set", "d_model=16",
                 "--set", "layers=1", "--threads", "1", "--monitor", "roc_auc", "--output", str(out),
                 "--no-report"]) == 0
    printed = capsys.readouterr().out
    history = _history(out)
    epoch_lines = [line for line in printed.splitlines() if line.startswith("epoch ") and "train loss" in line]
    assert [f"ROC AUC {h['val_roc_auc']:.4f}" in line for h, line in zip(history, epoch_lines)] == [True, True]
    assert f"weights kept: {describe_kept(history, 'roc_auc')}" in printed
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--monitor {accuracy,macro_f1,micro_f1,loss,roc_auc,average_precision}" in help_text


def test_the_trainer_itself_refuses_an_undefined_ranking_monitor_before_its_first_epoch(tmp_path):
    # Called from Python with batches of its own (as the estimator calls it), the trainer read a null ROC AUC every
    # epoch and took each for an improvement (checked: without the refusal, this fit trains all 10 epochs).
    import torch

    from attnclf.models import build_model
    from attnclf.text.batching import BucketBatches
    from attnclf.training.trainer import Trainer

    ids = [[2 + i % 5, 3 + i % 3] for i in range(32)]
    trainer = Trainer(build_model("boe", vocab_size=10, num_classes=2, embed_dim=8), TrainConfig(monitor="roc_auc"),
                      tmp_path, torch.device("cpu"), ["a", "b"], progress=False)
    with pytest.raises(AttnclfError, match=r"is undefined on these validation texts: all 8 are of one class, 'a'; "):
        trainer.fit(BucketBatches(ids, [i % 2 for i in range(32)], 16, shuffle=True, seed=0),
                    BucketBatches(ids[:8], [0] * 8, 16))
    assert list(tmp_path.iterdir()) == []  # no epoch trained, nothing written


def test_the_report_draws_average_precision_per_epoch_beside_roc_auc():
    from attnclf.report.plots import metric_history

    history = [{"epoch": e, "val_roc_auc": 0.8 + e / 100, "val_average_precision": 0.7 + e / 100} for e in (1, 2)]
    titles = [ax.get_title() for ax in metric_history(history).axes if ax.has_data()]
    assert titles == ["ROC AUC", "average precision"]
