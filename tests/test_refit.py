"""`attnclf refit`: a validated run retrained on its validation texts too, for the epochs it validated best at."""

import json
import shutil
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file

from attnclf.cli import main
from attnclf.data.base import WITHHELD
from attnclf.errors import AttnclfError, RunDirError
from attnclf.training.refit import refit_runs, refit_settings
from attnclf.training.run import train_run
from attnclf.training.run_data import load_data
from attnclf.training.settings import DataSettings, resume_settings
from attnclf.training.trainer import TrainConfig, best_epoch, checkpoint_tensors

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
    before = load_data(DataSettings(**original["settings"]["data"]), 0)
    after = load_data(DataSettings(**config["settings"]["data"]), 0)
    assert sorted(after.train.texts) == sorted(before.train.texts + before.validation.texts)
    assert after.test.texts == before.test.texts
    assert config["data"]["train_examples"] == len(after.train.texts)
    assert config["data"]["validation_examples"] == 0 and "validation_sha256" not in config["data"]
    assert config["settings"]["refit_of"] == {"run": str(validated), "epochs": 2, "monitor": "macro_f1", "value": 0.9,
                                              "validation_sha256": original["data"]["validation_sha256"]}
    # Two epochs, nothing validated, and the test set scored as the validated run's was.
    assert [h["epoch"] for h in refit.history] == [1, 2] and not any(k.startswith("val_") for k in refit.history[0])
    assert refit.metrics["split"] == "test" and 0 <= refit.metrics["accuracy"] <= 1
    # It keeps its last weights.
    kept = load_file(str(refit.run_dir / "model.safetensors"))
    last = load_file(str(checkpoint_tensors(refit.run_dir)))
    assert all(torch.equal(v, last[f"model.{k}"]) for k, v in kept.items())


def test_reports_say_a_run_kept_its_best_validated_epoch_and_a_refit_its_last(validated, refit, tmp_path):
    from attnclf.report import write_report

    for run, kept in ((validated, "epoch 2 of 4: the best validation macro-F1 (0.9000), which 1 later epoch tied "
                                  "(the first is kept)"),
                      (refit.run_dir, "epoch 2 of 2, the last (a refit validates on nothing)")):
        copy = tmp_path / run.name
        shutil.copytree(run, copy)
        page = write_report(copy, device="cpu").read_text(encoding="utf-8")
        assert f"<tr><td>weights kept</td><td>{kept}</td></tr>" in page


def test_train_resuming_a_refit_says_it_kept_its_last_epoch(refit, tmp_path, capsys):
    # `train --resume` of a refit trained and tested it, then failed on the line saying which epoch it kept ("epoch 1
    # recorded no validation macro_f1, so no epoch was chosen"): a refit validates on nothing and keeps its last.
    copy = tmp_path / refit.run_dir.name
    shutil.copytree(refit.run_dir, copy)
    assert main(["train", "--resume", "--output", str(copy), "--quiet", "--no-report", "--device", "cpu"]) == 0
    assert "weights kept: epoch 2 of 2, the last (a refit validates on nothing)\n" in capsys.readouterr().out


def test_a_refit_stops_where_its_run_did_on_the_schedule_its_run_followed(validated, refit):
    # The validated run's learning rate after epoch 2 of 4 was about half its peak; a refit that decayed to zero
    # over its own two epochs would train another model than the one validation chose.
    validated_lr = read_jsonl(validated / "history.jsonl")[1]["lr"]
    assert refit.history[-1]["lr"] == pytest.approx(validated_lr, rel=0.05)
    assert refit.history[-1]["lr"] > 0.3 * TrainConfig().lr


def test_history_records_the_schedule_each_epoch_followed(tmp_path):
    run = train_run(tiny_settings(tmp_path / "run", epochs=2), progress=False)
    resumed = train_run(resume_settings(run.run_dir, epochs=3), resume=True, progress=False)
    assert [h["schedule_epochs"] for h in resumed.history] == [2, 2, 3]


def test_a_refit_follows_the_schedule_its_kept_epochs_followed(validated, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(validated, moved)
    config = json.loads((moved / "config.json").read_text())
    config["settings"]["train"]["epochs"] = 6  # resumed with --epochs 6 after epoch 2, the best
    (moved / "config.json").write_text(json.dumps(config))
    history = read_jsonl(moved / "history.jsonl")  # best: epoch 2 of 4

    def write(schedules):
        for record, schedule in zip(history, schedules):
            record.pop("schedule_epochs", None)
            if schedule is not None:
                record["schedule_epochs"] = schedule
        (moved / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))

    write([4, 4, 6, 6])
    assert refit_settings(moved).train.schedule_epochs == 4
    write([4, 6, 6, 6])
    with pytest.raises(AttnclfError, match="resumed with other --epochs before epoch 2, the one it kept, so its "
                                           "learning rate followed schedules of 4 and 6 epochs"):
        refit_settings(moved)
    write([None] * 4)  # a run from before history recorded it: its final schedule
    assert refit_settings(moved).train.schedule_epochs == 6


def test_the_same_refit_twice_gives_the_same_weights(validated, refit, tmp_path):
    again = train_run(refit_settings(validated, output=str(tmp_path / "again")), progress=False)
    first, second = (load_file(str(r.run_dir / "model.safetensors")) for r in (refit, again))
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_an_interrupted_refit_resumes_as_a_refit(validated, refit, tmp_path, resume_after_interruption):
    resumed = resume_after_interruption(refit_settings(validated, output=str(tmp_path / "resumed")), epoch=2)
    settings = resume_settings(tmp_path / "resumed")
    assert settings.data.refit and settings.refit_of["epochs"] == 2 and settings.train.schedule_epochs == 4
    assert [h["epoch"] for h in resumed.history] == [1, 2]
    straight, continued = (load_file(str(d / "model.safetensors")) for d in (refit.run_dir, resumed.run_dir))
    assert all(torch.equal(straight[k], continued[k]) for k in straight)
    with pytest.raises(AttnclfError, match="resume it without epochs$"):  # (no flag: Python)
        resume_settings(tmp_path / "resumed", epochs=3)


def test_best_epoch_names_the_weights_the_trainer_kept(tmp_path):
    # Weight averaging, the loss monitored, and early stopping: the kept weights score the chosen epoch's loss.
    from attnclf.classifier import Classifier
    from attnclf.evaluation.metrics import log_loss

    settings = tiny_settings(tmp_path / "run", epochs=6, ema_decay=0.8, monitor="loss", lr=3e-3)
    settings.train.patience = 1
    run = train_run(settings, progress=False)
    best = best_epoch(run.history, "loss")
    validation = load_data(settings.data, 0).validation
    probabilities = Classifier.load(run.run_dir, device="cpu").predict_proba(validation.texts)
    assert log_loss(validation.labels, probabilities) == pytest.approx(best["val_loss"], rel=1e-5)
    assert refit_settings(run.run_dir).train.epochs == best["epoch"]


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
    assert capsys.readouterr().err.strip() == (
        f"attnclf: error: {refit.run_dir} is a refit (trained on its validation texts too) and {validated} is not; "
        f"an ensemble's runs must share their training texts: refit them all or none")


def test_the_refit_command_refits_each_member_of_a_seeds_folder(tmp_path, capsys):
    ensemble = tmp_path / "ens"
    assert main(["train", "--dataset", "synthetic", "--max-train-examples", "500", "--epochs", "2", "--seeds", "0",
                 "1", "--set", "d_model=16", "--set", "layers=1", "--output", str(ensemble), "--quiet",
                 "--no-report"]) == 0
    capsys.readouterr()
    assert main(["refit", str(ensemble), "--quiet", "--no-report", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    # The refits make an ensemble folder beside the original, which every command reads as one model.
    refitted = tmp_path / "ens-refit"
    assert all((refitted / f"seed-{seed}" / "metrics.json").is_file() for seed in (0, 1))
    saved = json.loads((refitted / "ensemble.json").read_text())
    assert saved["members"] == ["seed-0", "seed-1"] and saved["seeds"] == [0, 1]
    assert "validation_metrics" not in saved and saved["metrics"]["accuracy"] > 0.9  # the validated one's, or near
    assert f"ensemble of 2 refits ({refitted / 'ensemble.json'}), averaged:" in out
    assert main(["evaluate", str(refitted), "--device", "cpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == pytest.approx(saved["metrics"]["accuracy"])
    assert main(["refit", str(ensemble), str(ensemble / "seed-0")]) == 2
    assert "give one `train --seeds` folder, or run directories" in capsys.readouterr().err
    for taken in (ensemble, ensemble / "seed-0"):  # the folder itself, or a run: never written over
        assert main(["refit", str(ensemble), "--output", str(taken)]) == 2
        assert "holds a run or the ensemble itself" in capsys.readouterr().err
    assert main(["refit", str(ensemble), "--resume", "--quiet", "--device", "cpu"]) == 0
    assert capsys.readouterr().err.count("finished, kept") == 2



def test_the_refits_folder_of_a_seeds_folder_another_process_is_writing_into_is_refused(tmp_path, capsys,
                                                                                       held_elsewhere,
                                                                                       files_but_the_lock):
    # Its members' folders were held as they trained, but not the folder their ensemble.json goes into: a refit
    # beside another writing there (another refit of the folder, say) wrote its ensemble.json over the other's.
    from attnclf.rundir import LOCK_FILE

    ensemble, refitted = tmp_path / "ens", tmp_path / "ens-refit"
    assert main(["train", "--dataset", "synthetic", "--max-train-examples", "200", "--epochs", "1", "--seeds", "0",
                 "1", "--model", "boe", "--output", str(ensemble), "--quiet", "--no-report", "--threads", "1"]) == 0
    argv = ["refit", str(ensemble), "--resume", "--quiet", "--no-report", "--threads", "1"]
    for trained in (False, True):  # refused before its members train, and as it writes their ensemble.json
        before = files_but_the_lock(refitted) if trained else {}
        capsys.readouterr()
        with held_elsewhere(refitted) as pid:
            assert main(argv) == 2
            assert capsys.readouterr().err == (f"attnclf: error: {refitted} is being written by another attnclf "
                                               f"process (pid {pid}); wait for it to finish, or give another "
                                               f"--output\n")
            assert files_but_the_lock(refitted) == before
        assert main(argv) == 0  # held no more
    assert (refitted / "ensemble.json").is_file() and list(tmp_path.rglob(LOCK_FILE)) == []

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
    assert capsys.readouterr().out.strip().splitlines() == [
        f"trained on every labelled text; {run} estimates its accuracy", f"run directory: {run}-refit"]
    config = json.loads((tmp_path / "run-refit" / "config.json").read_text())
    assert config["data"]["train_examples"] == 120 and not (tmp_path / "run-refit" / "report.html").exists()
    assert main(["evaluate", str(tmp_path / "run-refit"), "--device", "cpu"]) == 2
    assert capsys.readouterr().err.endswith("this refit trained on every text it has: only other labelled texts can "
                                            "score it: give them with --test-file\n")  # (each command its own flag)
    assert main(["export", str(tmp_path / "run-refit")]) == 2
    assert capsys.readouterr().err.endswith("give them with --check-file\n")
    assert main(["export", str(tmp_path / "run-refit"), "--check-file", str(path)]) == 0


def topic_files(folder, train: int, test: int) -> None:
    """Generated multi-label topics as ``folder``/train.jsonl and test.jsonl, each text's labels a list."""
    from attnclf.data.generated import topics

    splits = topics(n_train=train, n_test=test)
    names = splits.train.label_names
    for split, data in (("train", splits.train), ("test", splits.test)):
        (folder / f"{split}.jsonl").write_text("".join(
            json.dumps({"text": t, "label": [names[i] for i in y]}) + "\n" for t, y in zip(data.texts, data.labels)))


def test_a_multi_label_refit_predicts_at_the_thresholds_its_run_tuned(tmp_path):
    topic_files(tmp_path, 300, 60)
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
    # A sample's refit learns the sample and the held-out sentences, not phrases withheld from the whole set.
    sample = DataSettings(dataset="sst2", data_dir=str(tmp_path), max_train_examples=10)
    sampled, sample_refit = load_data(sample, 0), load_data(replace(sample, refit=True), 0)
    assert sorted(sample_refit.train.texts) == sorted(sampled.train.texts + sampled.validation.texts)


def test_a_toy_set_that_validates_on_its_training_set_is_refitted_on_it_once():
    toy = load_data(DataSettings(dataset="toy-reversal", refit=True), 0)
    assert toy.train.texts == load_data(DataSettings(dataset="toy-reversal"), 0).train.texts


def test_refits_that_cannot_work_stop_before_training(validated, tmp_path):
    with pytest.raises(AttnclfError, match="goes into another folder than the run it refits"):
        refit_settings(validated, output=str(validated))
    moved = tmp_path / "moved"
    shutil.copytree(validated, moved)
    config = json.loads((moved / "config.json").read_text())
    config["settings"]["embeddings"] = str(tmp_path / "gone.vec")
    (moved / "config.json").write_text(json.dumps(config))
    with pytest.raises(AttnclfError, match="gone.vec, which are gone"):
        refit_settings(moved)
    changed = tmp_path / "changed.vec"  # vectors still there but no longer the ones the run recorded
    changed.write_text("good 0.1 0.2\n")
    config["settings"]["embeddings"], config["embeddings_sha256"] = str(changed), "0" * 64
    (moved / "config.json").write_text(json.dumps(config))
    with pytest.raises(AttnclfError, match="changed.vec, which have changed since; it must start from the same ones"):
        refit_settings(moved)
    config.pop("embeddings_sha256")
    config["settings"]["embeddings"] = None
    config["data"]["validation_sha256"] = "0" * 64  # as if the data had changed since
    (moved / "config.json").write_text(json.dumps(config))
    with pytest.raises(AttnclfError, match="no longer gives the texts .* trained and validated on"):
        refit_settings(moved)
    config["data"].pop("validation_sha256")
    config["data"]["train_sha256"] = "0" * 64  # the training texts edited, the validation ones kept
    (moved / "config.json").write_text(json.dumps(config))
    with pytest.raises(AttnclfError, match="a refit would learn other data"):
        refit_settings(moved)
    (moved / "history.jsonl").write_text('{"epoch": 1, "val_macro')  # cut short
    config["data"].pop("train_sha256")
    (moved / "config.json").write_text(json.dumps(config))
    with pytest.raises(RunDirError, match="history.jsonl, line 1, column 14: not valid JSON"):
        refit_settings(moved)


def test_a_refit_writes_over_nothing_but_an_earlier_refit_of_its_run(validated, refit, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(validated, other)
    with pytest.raises(AttnclfError, match="holds another run"):
        refit_settings(validated, output=str(other))
    (tmp_path / "ens").mkdir()
    (tmp_path / "ens" / "ensemble.json").write_text('{"members": ["seed-0"]}')
    with pytest.raises(AttnclfError, match="holds an ensemble"):
        refit_settings(validated, output=str(tmp_path / "ens"))
    assert refit_settings(validated, output=str(refit.run_dir)).output == str(refit.run_dir)
    assert main(["refit", str(validated), str(validated)]) == 2
    assert capsys.readouterr().err.strip() == f"attnclf: error: {validated} is given twice"
    (tmp_path / "ens" / "ensemble.json").write_text("{}")
    assert main(["refit", str(tmp_path / "ens")]) == 2
    assert "ensemble.json: expected" in capsys.readouterr().err
    assert main(["refit", str(tmp_path / "ens" / "ensemble.json")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_a_run_interrupted_in_an_old_folder_leaves_nothing_a_refit_could_take_for_it(validated, tmp_path,
                                                                                    monkeypatch):
    from attnclf.training.trainer import Trainer

    folder = tmp_path / "reused"
    shutil.copytree(validated, folder)
    settings = tiny_settings(folder, epochs=3, seed=5)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "_train_epoch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_run(settings, progress=False)
    assert not any((folder / name).exists() for name in ("model.safetensors", "history.jsonl", "metrics.json"))
    with pytest.raises(RunDirError, match="incomplete: missing model.safetensors"):
        refit_settings(folder)


def test_an_interrupted_refit_says_how_to_go_on_and_which_runs_remain(validated, refit, tmp_path, capsys,
                                                                      monkeypatch):
    from attnclf.training.trainer import Trainer

    second = tmp_path / "second"
    shutil.copytree(validated, second)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "_train_epoch", interrupted)
    assert main(["refit", str(validated), str(second), "--output", str(tmp_path / "x")]) == 2  # one --output, two runs
    capsys.readouterr()
    # validated's refit has finished (the module's): a repeated command does not train it again unasked...
    assert main(["refit", str(second), str(validated), "--quiet", "--no-report", "--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"attnclf: error: {validated}-refit holds a finished refit; --resume keeps it (and continues the others), "
        f"--overwrite trains it again")
    assert main(["refit", str(validated), "--resume", "--overwrite"]) == 2
    assert "give one" in capsys.readouterr().err
    # ...and the hint after an interruption keeps what is finished, whatever the command asked.
    assert main(["refit", str(second), str(validated), "--quiet", "--no-report", "--device", "cpu",
                 "--overwrite"]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"attnclf: interrupted; `attnclf refit {second} {validated} --quiet --no-report --device cpu --resume` keeps "
        f"finished refits and continues the others")
    # An interrupted refit is work too (its checkpoint, here made by hand: this one stopped before its first).
    (tmp_path / "second-refit" / "checkpoint").mkdir(parents=True, exist_ok=True)
    (tmp_path / "second-refit" / "checkpoint" / "state.json").write_text("{}")
    assert main(["refit", str(second)]) == 2
    assert f"{second}-refit holds an unfinished refit; --resume continues it" in capsys.readouterr().err


def test_refit_resume_keeps_finished_refits_and_continues_the_others(validated, refit, tmp_path, capsys,
                                                                      resume_after_interruption):
    second = tmp_path / "second"
    shutil.copytree(validated, second)
    written = (refit.run_dir / "model.safetensors").stat().st_mtime_ns
    assert main(["refit", str(validated), str(second), "--resume", "--quiet", "--no-report", "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert f"{refit.run_dir}: finished, kept" in err and f"{second}: refit on its validation texts too" in err
    assert (refit.run_dir / "model.safetensors").stat().st_mtime_ns == written
    kept = load_file(str(refit.run_dir / "model.safetensors"))
    again = load_file(str(tmp_path / "second-refit" / "model.safetensors"))
    assert all(torch.equal(kept[k], again[k]) for k in kept)  # the same run, refitted twice: the same model


def test_refit_resume_refuses_a_refit_of_its_run_as_it_was_before_it_trained_again(validated, tmp_path, capsys):
    # `train --overwrite` retrains a run into its folder; a refit of the earlier run is not its refit to keep.
    run = tmp_path / "run"
    shutil.copytree(validated, run)
    assert main(["refit", str(run), "--quiet", "--no-report", "--device", "cpu"]) == 0
    history = read_jsonl(run / "history.jsonl")
    for record, score in zip(history, (0.6, 0.7, 0.8, 0.9)):  # (its new training validated best at its last epoch)
        record["val_macro_f1"] = score
    (run / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    kept = (tmp_path / "run-refit" / "model.safetensors").stat().st_mtime_ns
    capsys.readouterr()
    assert main(["refit", str(run), "--resume", "--quiet", "--no-report", "--device", "cpu"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"attnclf: error: {run}-refit trained with train.epochs = 2, this command gives 4: it is a refit of {run} as "
        f"it trained before; --overwrite refits it again"]
    assert (tmp_path / "run-refit" / "model.safetensors").stat().st_mtime_ns == kept


def test_refit_resume_refuses_a_refit_of_data_that_changed_since(tmp_path, capsys):
    # Its run trained again, with the same settings, on a training file changed since the refit, and validated as
    # well on the same validation file: --resume compared settings and the run's validation record alone, and kept
    # the refit of the earlier texts as the run's.
    from conftest import MONEY, SPORT, write_csv

    train = write_csv(tmp_path / "train.csv", [(t, "sport") for t in SPORT * 8] + [(t, "money") for t in MONEY * 8])
    validation = write_csv(tmp_path / "dev.csv", [(SPORT[0], "sport"), (MONEY[0], "money")])
    run = tmp_path / "run"
    flags = ["--quiet", "--no-report", "--threads", "1"]
    trained = ["train", "--train-file", str(train), "--validation-file", str(validation), "--test-file", str(train),
               "--model", "boe", "--epochs", "1", "--lr", "0.05", "--monitor", "accuracy", "--min-frequency", "1",
               "--output", str(run), *flags]
    assert main(trained) == 0
    assert main(["refit", str(run), *flags]) == 0
    refitted = (tmp_path / "run-refit" / "model.safetensors").read_bytes()
    write_csv(train, [(t, "sport") for t in SPORT * 8] + [(t, "money") for t in MONEY * 9])
    assert main([*trained, "--overwrite"]) == 0
    capsys.readouterr()
    assert main(["refit", str(run), "--resume", *flags]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"attnclf: error: {run}-refit: {train.name} no longer gives the texts it was refitted on (the data changed "
        f"since): it is a refit of {run} on other texts; --overwrite refits it again"]
    assert (tmp_path / "run-refit" / "model.safetensors").read_bytes() == refitted
    assert main(["refit", str(run), "--overwrite", *flags]) == 0
    assert main(["refit", str(run), "--resume", *flags]) == 0  # (the refit of the texts as they are now: kept)


def test_refit_runs_says_what_it_refits_through_its_log_and_prints_none_of_it(validated, tmp_path, capsys):
    calibrated = tmp_path / "calibrated"
    shutil.copytree(validated, calibrated)
    (calibrated / "temperature.json").write_text('{"temperature": 2.0}')
    capsys.readouterr()
    said = []
    refit_runs([calibrated], str(tmp_path / "logged"), device="cpu", report=False, progress=False, log=said.append)
    assert said == [f"{calibrated}: refit on its validation texts too, for its best 2 epoch(s) (validation macro_f1 "
                    f"0.9000) -> {tmp_path / 'logged'}",
                    f"note: {calibrated} is calibrated (temperature.json); its refit is not, and has no validation "
                    f"texts left to calibrate on"]
    assert "refit on its validation texts too" not in capsys.readouterr().err


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.pop("macro_f1"), "metrics.json: macro_f1 is missing"),
    (lambda m: m.update(accuracy="0.9"), "metrics.json: accuracy is '0.9', not a number"),
    (lambda m: m.update(split="train"), "metrics.json: split is 'train', not one of None, test, validation"),
    (lambda m: m.update(split=None), "metrics.json: note is missing"),
    ("truncated", "metrics.json: not valid JSON"),
], ids=["no-macro-f1", "accuracy-text", "split-train", "unscored-without-note", "truncated"])
def test_refit_resume_of_a_refit_whose_metrics_were_mangled_is_one_line_naming_the_file_and_field(
        validated, refit, tmp_path, capsys, mangle, edit, message):
    # `refit --resume` keeps a finished refit and prints the scores its metrics.json holds: a field deleted or quoted
    # there was a KeyError or a TypeError as they were printed, and a split of another name printed as if scored.
    kept = tmp_path / "kept-refit"
    shutil.copytree(refit.run_dir, kept)
    mangle(kept / "metrics.json", edit)
    capsys.readouterr()
    assert main(["refit", str(validated), "--output", str(kept), "--resume", "--quiet", "--no-report",
                 "--device", "cpu"]) == 2
    err = capsys.readouterr().err  # (after the lines saying what refit does, which it says however --quiet)
    *_, said, error = err.splitlines()
    assert said == f"{kept}: finished, kept" and error.startswith(f"attnclf: error: {kept / 'metrics.json'}: ")
    assert message in error, error


@pytest.mark.parametrize("edit, message", [
    (lambda h: h[1].update(val_macro_f1="0.9"), "history.jsonl, line 2: val_macro_f1 is '0.9', not a number or null"),
    (lambda h: h[2].update(epoch="3"), "history.jsonl, line 3: epoch is '3', not a whole number >= 0"),
    (lambda h: h[1].pop("epoch"), "history.jsonl, line 2: epoch is missing"),
    (lambda h: h[1].update(val_macro_f1=None), ": epoch 2 recorded no validation macro_f1, so no epoch was chosen"),
    ("truncated", "history.jsonl, line "),  # (then the column, and "not valid JSON")
], ids=["val-macro-f1-text", "epoch-text", "no-epoch", "val-macro-f1-null", "truncated"])
def test_a_refit_of_a_run_whose_history_was_mangled_is_one_line_naming_the_file_and_field(validated, tmp_path, capsys,
                                                                                           mangle, edit, message):
    # The refit picks its epochs from the run's history.jsonl: a quoted number there was a TypeError as epochs were
    # compared, a line without its epoch a KeyError.
    run = tmp_path / "validated"
    shutil.copytree(validated, run)
    mangle(run / "history.jsonl", edit)
    capsys.readouterr()
    assert main(["refit", str(run), "--quiet", "--no-report", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"attnclf: error: {run}") and message in err and err.count("\n") == 1, err
    assert edit != "truncated" or "not valid JSON" in err
    assert not (tmp_path / "validated-refit").exists()


@pytest.mark.parametrize("thresholds, problem", [
    (["sports"], 'expected {"thresholds": {label: threshold, ...}}'),
    ({"sports": "high"}, "the threshold of label 'sports' must be a number from 0 to 1, got 'high'"),
])
def test_a_refit_of_a_run_with_thresholds_out_of_shape_is_refused_before_it_trains(tmp_path, capsys, thresholds,
                                                                                  problem):
    # Refit copied thresholds.json's thresholds unchecked: a list was a traceback after training, a string or 2 was
    # written into the refit's own file.
    topic_files(tmp_path, 120, 30)
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(tmp_path / "train.jsonl"), "--test-file", str(tmp_path / "test.jsonl"),
                 "--multi-label", "--model", "boe", "--epochs", "1", "--output", str(run), "--quiet", "--no-report",
                 "--device", "cpu", "--threads", "1"]) == 0
    saved = json.loads((run / "thresholds.json").read_text())
    if isinstance(thresholds, dict):
        thresholds = saved["thresholds"] | thresholds
    (run / "thresholds.json").write_text(json.dumps(saved | {"thresholds": thresholds}))
    capsys.readouterr()
    assert main(["refit", str(run), "--quiet", "--no-report", "--device", "cpu", "--threads", "1"]) == 2
    assert capsys.readouterr().err == f"attnclf: error: {run / 'thresholds.json'}: {problem}\n"
    assert not (tmp_path / "run-refit").exists()


def test_refit_summary_says_what_each_refit_scored_and_where_it_is(tmp_path):
    # What `attnclf refit` prints is the library's: each refit's scores (or the note of one without test texts) and
    # its folder, then the refits' ensemble, or how to score several refits together.
    from attnclf.training.refit import refit_summary
    from attnclf.training.run import RunResult

    scored = RunResult(tmp_path / "a b-refit", {"split": "test", "accuracy": 0.9, "macro_f1": 0.85}, [], 1.0)
    noted = RunResult(tmp_path / "c-refit", {"split": None, "note": "no test texts: nothing scored"}, [], 1.0)
    other_rank = RunResult(tmp_path / "d-refit", {}, [], 1.0)
    assert refit_summary([scored, noted, other_rank], None) == (
        f"test: accuracy 0.9000  macro-F1 0.8500\nrun directory: {tmp_path / 'a b-refit'}\n"
        f"no test texts: nothing scored\nrun directory: {tmp_path / 'c-refit'}\n"
        f"score the refits together: attnclf evaluate '{tmp_path / 'a b-refit'}' {tmp_path / 'c-refit'} "
        f"{tmp_path / 'd-refit'}")
    assert refit_summary([scored], None) == f"test: accuracy 0.9000  macro-F1 0.8500\nrun directory: " \
                                            f"{tmp_path / 'a b-refit'}"
    assert refit_summary([other_rank], None) == ""
    assert refit_summary([scored, other_rank], {"split": "test", "accuracy": 0.5, "macro_f1": 0.5}).endswith(
        f"ensemble of 2 refits ({tmp_path / 'ensemble.json'}), averaged:\ntest: accuracy 0.5000  macro-F1 0.5000")
