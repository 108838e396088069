"""`attnclf refit`: a validated run retrained on its validation texts too, for the epochs it validated best at."""

import json

import pytest
import torch
from safetensors.torch import load_file

from attnclf.cli import main
from attnclf.data.base import WITHHELD
from attnclf.errors import AttnclfError, RunDirError
from attnclf.training.run import DataSettings, load_data, refit_settings, resume_settings, train_run
from attnclf.training.trainer import TrainConfig, best_epoch

from test_training import tiny_settings


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    """A 4-epoch run whose history is rewritten so that it validated best after epoch 2 (as if it had)."""
    settings = tiny_settings(tmp_path_factory.mktemp("runs") / "validated", epochs=4)
    run_dir = train_run(settings, progress=False).run_dir
    history = read_jsonl(run_dir / "history.jsonl")
    for record, accuracy in zip(history, (0.6, 0.9, 0.8, 0.9)):
        record["val_macro_f1"] = accuracy
    (run_dir / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    return run_dir


@pytest.fixture(scope="module")
def refit(validated):
    return train_run(refit_settings(validated), progress=False)


def test_a_refit_trains_on_the_validation_texts_too_for_the_best_epochs(validated, refit):
    original, config = (json.loads((d / "config.json").read_text()) for d in (validated, refit.run_dir))
    assert refit.run_dir.name == "validated-refit"
    assert config["data"]["train_examples"] == original["data"]["train_examples"] + original["data"][
        "validation_examples"]
    assert config["data"]["validation_examples"] == 0 and "validation_sha256" not in config["data"]
    assert config["settings"]["refit_of"] == {"run": str(validated), "epochs": 2, "monitor": "macro_f1", "value": 0.9,
                                              "validation_sha256": original["data"]["validation_sha256"]}
    # Two epochs, nothing validated, and the test set scored as the validated run's was.
    assert [h["epoch"] for h in refit.history] == [1, 2] and not any(k.startswith("val_") for k in refit.history[0])
    assert refit.metrics["split"] == "test" and 0 <= refit.metrics["accuracy"] <= 1
    # It keeps its last weights, and differs from the run it refits.
    kept = load_file(str(refit.run_dir / "model.safetensors"))
    last = load_file(str(refit.run_dir / "checkpoint" / "last.safetensors"))
    assert all(torch.equal(v, last[f"model.{k}"]) for k, v in kept.items())
    assert any(not torch.equal(v, load_file(str(validated / "model.safetensors"))[k]) for k, v in kept.items())


def test_a_refit_stops_where_its_run_did_on_the_schedule_its_run_followed(validated, refit):
    # The validated run's learning rate after epoch 2 of 4 was about half its peak; a refit that decayed to zero
    # over its own two epochs would train another model than the one validation chose.
    validated_lr = read_jsonl(validated / "history.jsonl")[1]["lr"]
    assert refit.history[-1]["lr"] == pytest.approx(validated_lr, rel=0.05)
    assert refit.history[-1]["lr"] > 0.3 * TrainConfig().lr


def test_the_same_refit_twice_gives_the_same_weights(validated, refit, tmp_path):
    again = train_run(refit_settings(validated, output=str(tmp_path / "again")), progress=False)
    first, second = (load_file(str(r.run_dir / "model.safetensors")) for r in (refit, again))
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_an_interrupted_refit_resumes_as_a_refit(validated, tmp_path, resume_after_interruption):
    resumed = resume_after_interruption(refit_settings(validated, output=str(tmp_path / "resumed")), epoch=2)
    settings = resume_settings(tmp_path / "resumed")
    assert settings.data.refit and settings.refit_of["epochs"] == 2 and settings.train.schedule_epochs == 4
    assert [h["epoch"] for h in resumed.history] == [1, 2]


def test_best_epoch_is_the_first_with_the_best_monitored_value():
    history = [{"epoch": 1, "val_accuracy": 0.7}, {"epoch": 2, "val_accuracy": 0.8}, {"epoch": 3, "val_accuracy": 0.8}]
    assert best_epoch(history, "accuracy")["epoch"] == 2
    with pytest.raises(AttnclfError, match="recorded no validation macro_f1"):
        best_epoch(history, "macro_f1")


def test_a_refit_is_not_validated_refitted_again_or_made_from_an_unfinished_run(validated, refit, tmp_path, capsys):
    assert main(["evaluate", str(refit.run_dir), "--split", "validation", "--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"attnclf: error: {refit.run_dir} is a refit: it trained on its validation texts; validate the run it "
        f"refits ({validated})"]
    with pytest.raises(AttnclfError, match="is a refit already"):
        refit_settings(refit.run_dir)
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "labels.json"):
        (unfinished / name).write_bytes((validated / name).read_bytes())
    with pytest.raises(RunDirError, match="has not finished training"):
        refit_settings(unfinished)
    # A refit and the run it refits were trained on different texts: not one ensemble.
    assert main(["evaluate", str(validated), str(refit.run_dir), "--device", "cpu"]) == 2
    assert "trained on other data" in capsys.readouterr().err


def test_the_refit_command_refits_each_member_of_a_seeds_folder(tmp_path, capsys):
    ensemble = tmp_path / "ens"
    assert main(["train", "--dataset", "demo", "--max-train-examples", "300", "--epochs", "2", "--seeds", "0", "1",
                 "--set", "d_model=16", "--set", "layers=1", "--output", str(ensemble), "--quiet", "--no-report"]) == 0
    capsys.readouterr()
    assert main(["refit", str(ensemble), "--quiet", "--no-report", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    refits = [ensemble / "seed-0-refit", ensemble / "seed-1-refit"]
    assert all((r / "metrics.json").is_file() for r in refits)
    assert f"attnclf evaluate {refits[0]} {refits[1]}" in out
    assert main(["evaluate", *map(str, refits), "--device", "cpu", "--json"]) == 0
    assert 0.5 < json.loads(capsys.readouterr().out)["accuracy"] <= 1
    assert main(["refit", str(ensemble), "--output", str(tmp_path / "one")]) == 2
    assert "--output names one refit" in capsys.readouterr().err


def test_a_refit_of_data_without_a_test_split_trains_on_everything_and_says_so(tmp_path, capsys):
    import csv

    path = tmp_path / "reviews.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows((f"{word} film number {i}", word) for i in range(60) for word in ("good", "bad"))
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(path), "--epochs", "2", "--set", "d_model=16", "--set", "layers=1",
                 "--output", str(run), "--quiet", "--no-report", "--device", "cpu"]) == 0
    capsys.readouterr()
    assert main(["refit", str(run), "--quiet", "--device", "cpu"]) == 0
    assert capsys.readouterr().out.strip() == f"trained on every labelled text; {run} estimates its accuracy"
    config = json.loads((tmp_path / "run-refit" / "config.json").read_text())
    assert config["data"]["train_examples"] == 120 and not (tmp_path / "run-refit" / "report.html").exists()
    assert main(["evaluate", str(tmp_path / "run-refit"), "--device", "cpu"]) == 2
    assert "a refit trained on every text it has" in capsys.readouterr().err


def test_a_multi_label_refit_predicts_at_the_thresholds_its_run_tuned(tmp_path):
    from attnclf.data.generated import topics

    splits = topics(n_train=300, n_test=60)
    names = splits.train.label_names
    for split, data in (("train", splits.train), ("test", splits.test)):
        (tmp_path / f"{split}.jsonl").write_text("".join(
            json.dumps({"text": t, "label": [names[i] for i in y]}) + "\n" for t, y in zip(data.texts, data.labels)))
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(tmp_path / "train.jsonl"), "--test-file", str(tmp_path / "test.jsonl"),
                 "--multi-label", "--epochs", "2", "--set", "d_model=16", "--set", "layers=1", "--output", str(run),
                 "--quiet", "--no-report", "--device", "cpu"]) == 0
    assert main(["refit", str(run), "--quiet", "--no-report", "--device", "cpu"]) == 0
    tuned, copied = (json.loads((d / "thresholds.json").read_text()) for d in (run, tmp_path / "run-refit"))
    assert copied["thresholds"] == tuned["thresholds"] and str(run) in copied["note"]
    assert json.loads((tmp_path / "run-refit" / "metrics.json").read_text())["multi_label"]


def test_glue_refit_learns_the_phrases_withheld_with_its_held_out_sentences(tmp_path):
    from test_data_sources import GLUE_DEV, GLUE_TRAIN

    (tmp_path / "sst2" / "SST-2").mkdir(parents=True)
    (tmp_path / "sst2" / "SST-2" / "train.tsv").write_text(GLUE_TRAIN)
    (tmp_path / "sst2" / "SST-2" / "dev.tsv").write_text(GLUE_DEV)
    validated = load_data(DataSettings(dataset="sst2", data_dir=str(tmp_path)), 0)
    everything = load_data(DataSettings(dataset="sst2", data_dir=str(tmp_path), refit=True), 0)
    assert everything.validation is None and len(validated.extra[WITHHELD]) == 2
    assert sorted(everything.train.texts) == sorted(line.rpartition("\t")[0].strip()
                                                    for line in GLUE_TRAIN.splitlines()[1:])
