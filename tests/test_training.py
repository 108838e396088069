"""The trainer and whole runs: determinism, checkpoints, resume, early stopping, the run directory."""

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from attnclf.classifier import Classifier
from attnclf.errors import AttnclfError, DataError, RunDirError
from attnclf.models import MODELS
from attnclf.text.tokenizer import TokenizerConfig
from attnclf.training.run import train_run
from attnclf.training.settings import DataSettings, RunSettings
from attnclf.training.trainer import TrainConfig, checkpoint_tensors, describe_kept


def tiny_settings(output, epochs=2, report=False, **train) -> RunSettings:
    """A run of a few seconds. Without report.html unless asked: its plots took 5 of a run's 5.5 s, and only the tests
    of what a whole run writes read it (test_report.py tests the report itself)."""
    train.setdefault("checkpoint_seconds", 0)
    return RunSettings(
        data=DataSettings(dataset="demo", max_train_examples=400),
        tokenizer=TokenizerConfig(min_frequency=1, max_len=32),
        model="self-attn",
        model_config={"d_model": 16, "layers": 1, "heads": 2},
        train=TrainConfig(epochs=epochs, batch_size=32, patience=0, **train),
        output=str(output),
        device="cpu",
        report=report,
    )


def weights(run_dir):
    return load_file(str(run_dir / "model.safetensors"))


def test_run_directory_holds_everything_a_model_needs(tmp_path):
    result = train_run(tiny_settings(tmp_path / "run", report=True), progress=False)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "labels.json", "history.jsonl", "metrics.json"):
        assert (result.run_dir / name).is_file(), name
    history = [json.loads(line) for line in (result.run_dir / "history.jsonl").read_text().splitlines()]
    assert [h["epoch"] for h in history] == [1, 2]
    assert {"train_loss", "val_loss", "val_accuracy", "val_macro_f1", "seconds"} <= history[0].keys()
    metrics = json.loads((result.run_dir / "metrics.json").read_text())
    assert 0 <= metrics["accuracy"] <= 1 and "macro_f1" in metrics
    assert len(metrics["examples"]["correct"]) + len(metrics["examples"]["incorrect"]) > 0
    assert json.loads((result.run_dir / "labels.json").read_text()) == ["negative", "positive"]
    assert not list(result.run_dir.glob("**/*.tmp")), "temporary files left behind"


def test_same_seed_same_weights_and_different_seed_different_weights(tmp_path):
    a = weights(train_run(tiny_settings(tmp_path / "a", seed=3), progress=False).run_dir)
    b = weights(train_run(tiny_settings(tmp_path / "b", seed=3), progress=False).run_dir)
    c = weights(train_run(tiny_settings(tmp_path / "c", seed=4), progress=False).run_dir)
    assert all((a[k] == b[k]).all() for k in a)
    assert any((a[k] != c[k]).any() for k in a)


def test_training_and_loading_a_run_from_python_leave_the_callers_random_stream_alone(tmp_path):
    # train_run (refit_runs', compare's) seeded torch's global generator and left it there, and Classifier.load drew
    # weights its saved ones replace: a notebook's torch.manual_seed stream moved under it.
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    result = train_run(tiny_settings(tmp_path / "run", epochs=1), progress=False)
    Classifier.load(result.run_dir, device="cpu")
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("model", list(MODELS))
def test_every_model_trains_to_the_same_bytes_from_the_same_seed_and_thread_count(model, threads, tmp_path):
    """README: the same seed, data and --threads give the same weights on the CPU; their model.safetensors files are
    the same bytes, for every model (its LSTM, attention and dropout kernels), with one thread or two."""
    from dataclasses import fields

    from attnclf.rundir import file_sha256

    valid = {field.name for field in fields(MODELS[model].config_class)}
    small = {"embed_dim": 16, "d_model": 16, "ff_dim": 32, "hidden_dim": 16, "attention_dim": 16, "dense_dim": 8,
             "heads": 2, "layers": 1, "dropout": 0.1}

    def trained(name):
        settings = replace(tiny_settings(tmp_path / name, epochs=1), model=model, threads=threads)
        settings.model_config = {key: value for key, value in small.items() if key in valid}
        return file_sha256(train_run(settings, progress=False).run_dir / "model.safetensors")

    assert trained("a") == trained("b")


def test_a_runs_threads_bound_numpys_blas_too_and_its_config_names_the_blas(tmp_path, monkeypatch):
    """The counted vectors' SVD runs in numpy's and scipy's BLAS: its thread count orders its sums, as torch's does."""
    from threadpoolctl import threadpool_info

    import attnclf.training.run as run

    def blas_threads():
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    before, seen, bounded = blas_threads(), [], []
    count, bound = run._count_embeddings, run.blas_threads
    monkeypatch.setattr(run, "_count_embeddings", lambda *args: (seen.append(blas_threads()), count(*args))[1])
    # (scipy's BLAS, loaded in this process already, is bounded for the count alone where it is not: a test apart,
    # in tests/test_vectors.py, takes a fresh process)
    monkeypatch.setattr(run, "blas_threads", lambda threads: (bounded.append(threads), bound(threads))[1])
    settings = replace(tiny_settings(tmp_path / "run", epochs=1), embeddings="count", threads=1)
    settings.model_config = {**settings.model_config, "d_model": 8}
    train_run(settings, progress=False)
    assert before and seen == [[1] * len(before)] and bounded == [1]
    assert blas_threads() == before  # restored afterwards
    versions = json.loads((tmp_path / "run" / "config.json").read_text())["versions"]
    assert versions["numpy"] == np.__version__
    assert versions["blas"] and all(isinstance(name, str) and name for name in versions["blas"])


def test_resume_after_interruption_reaches_the_uninterrupted_result(tmp_path, resume_after_interruption):
    straight = train_run(tiny_settings(tmp_path / "straight", epochs=3), progress=False)
    resumed = resume_after_interruption(tiny_settings(tmp_path / "resumed", epochs=3), epoch=2)
    assert [h["epoch"] for h in resumed.history] == [1, 2, 3]
    assert resumed.history[-1]["train_loss"] == pytest.approx(straight.history[-1]["train_loss"], rel=1e-6)
    a, b = weights(straight.run_dir), weights(resumed.run_dir)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_weight_averaging_is_what_validation_scores_and_the_run_keeps_and_resumes(tmp_path,
                                                                                 resume_after_interruption):
    def settings(name, **train):  # with an n-gram branch, whose counts the average must carry
        run = tiny_settings(tmp_path / name, epochs=3, **train)
        run.model_config = {**run.model_config, "nb_ngram_buckets": 64}
        return run

    plain = train_run(settings("plain"), progress=False)
    averaged = train_run(settings("ema", ema_decay=0.9), progress=False)

    def last_checkpoint(run, prefix):
        return {k: v for k, v in load_file(str(checkpoint_tensors(run.run_dir))).items()
                if k.startswith(prefix)}

    # The average does not steer training: the raw weights follow the plain run's path exactly...
    raw, plain_raw = last_checkpoint(averaged, "model."), last_checkpoint(plain, "model.")
    assert all(torch.equal(raw[k], plain_raw[k]) for k in raw)
    assert [h["train_loss"] for h in averaged.history] == [h["train_loss"] for h in plain.history]
    # ...but validation scores the lagging average, and the run keeps it.
    assert all(a["val_loss"] != b["val_loss"] for a, b in zip(averaged.history, plain.history))
    kept, plain_kept = weights(averaged.run_dir), weights(plain.run_dir)
    assert all(not torch.equal(kept[k], plain_kept[k]) for k in kept if k.endswith("weight") and "norm" not in k)
    # An interrupted run resumes the average where it was: the same average, update count and counts at the end.
    resumed = resume_after_interruption(settings("resumed", ema_decay=0.9), epoch=3)
    average, resumed_average = last_checkpoint(averaged, "averaged."), last_checkpoint(resumed, "averaged.")
    assert "averaged.n_averaged" in average and any("ngram" in k for k in average)
    assert average.keys() == resumed_average.keys()
    assert all(torch.equal(average[k], resumed_average[k]) for k in average)
    assert all(torch.equal(kept[k], v) for k, v in weights(resumed.run_dir).items())


def test_weight_averaging_is_bias_corrected():
    # Steps' weights 1, 2, 3, ...: at first their plain mean, later the nominal exponential average.
    from attnclf.training.trainer import _ema_update

    for decay in (0.5, 0.999):
        averaged, expected, total = [torch.ones(1)], 1.0, 1.0
        for step in range(2, 41):
            _ema_update(decay)(averaged, [torch.full((1,), float(step))], torch.tensor(step - 1))
            expected, total = decay * expected + step, decay * total + 1  # sum of decay^age * value, of decay^age
        torch.testing.assert_close(averaged[0], torch.tensor([expected / total]))
    assert expected / total == pytest.approx(20.5, abs=0.25)  # 0.999 over 40 steps: nearly their mean


def test_weight_averaging_decay_must_be_below_one():
    with pytest.raises(AttnclfError, match="ema_decay must be at least 0 and below 1, got 1.0"):
        TrainConfig(ema_decay=1.0)


def test_resume_checks_its_new_epoch_budget_and_old_runs_with_an_unread_file_still_load(tmp_path):
    from attnclf.training.refit import refit_settings
    from attnclf.training.run_data import run_test_data
    from attnclf.training.settings import resume_settings

    run = train_run(tiny_settings(tmp_path / "run", epochs=1), progress=False)
    with pytest.raises(AttnclfError, match="epochs must be at least 1, got 0"):
        resume_settings(run.run_dir, epochs=0)
    two = train_run(tiny_settings(tmp_path / "two", epochs=2), progress=False)
    with pytest.raises(AttnclfError, match="has trained 2 epochs already; epochs 1 is fewer"):  # (no flag: Python)
        resume_settings(two.run_dir, epochs=1)
    with pytest.raises(AttnclfError, match="has trained 2 epochs already; --epochs 1 is fewer"):
        resume_settings(two.run_dir, epochs=1, named=lambda field: f"--{field}")  # (as the command line names it)
    assert resume_settings(two.run_dir, epochs=3).train.epochs == 3
    # Runs trained before --dataset refused files beside it recorded the file it ignored; they still load.
    config_file = run.run_dir / "config.json"
    config = json.loads(config_file.read_text())
    config["settings"]["data"]["test_file"] = str(tmp_path / "ignored.csv")
    config_file.write_text(json.dumps(config))
    assert resume_settings(run.run_dir).data.dataset == "demo"
    assert len(run_test_data(config, json.loads((run.run_dir / "labels.json").read_text()))) > 0
    # Its refit reads no such file either: not refused as a run whose test file moved (refuse_gone)
    assert refit_settings(run.run_dir).data.dataset == "demo"
    # A new run with such settings is refused, from Python too, not trained on the dataset's own test split.
    stray = tiny_settings(tmp_path / "stray", epochs=1)
    stray.data.test_file = str(tmp_path / "mine.csv")
    with pytest.raises(AttnclfError, match="^dataset demo brings its own splits; test_file is for your own data"):
        train_run(stray, progress=False)


def test_a_resume_in_python_meets_the_settings_checks_and_an_older_runs_own_record_still_resumes(tmp_path):
    # train_run(settings, resume=True) checked nothing: eval_batch_size 0 trained on, and the run recorded it.
    from attnclf.training.settings import resume_settings

    run_dir = train_run(tiny_settings(tmp_path / "run", epochs=1), progress=False).run_dir
    before = {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()}
    changed = resume_settings(run_dir, epochs=2)
    changed.eval_batch_size = 0
    with pytest.raises(AttnclfError, match="^eval_batch_size must be at least 1, got 0$"):
        train_run(changed, resume=True, progress=False)
    changed = resume_settings(run_dir, epochs=2)
    changed.data.data_dir = str(tmp_path / "missing")
    with pytest.raises(AttnclfError, match=f"^data_dir {tmp_path / 'missing'}: no such folder$"):
        train_run(changed, resume=True, progress=False)
    changed.data.data_dir = str(run_dir / "config.json")
    with pytest.raises(AttnclfError, match=f"^data_dir {run_dir / 'config.json'} is a file; give the folder holding "
                                           f"the datasets$"):
        train_run(changed, resume=True, progress=False)
    assert {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()} == before
    # A run trained before a check was added (here: a test file recorded beside its dataset, which it never read)
    # resumes on what it recorded; the check refuses only what the caller changed.
    config = json.loads((run_dir / "config.json").read_text())
    config["settings"]["data"]["test_file"] = str(tmp_path / "ignored.csv")
    (run_dir / "config.json").write_text(json.dumps(config))
    # What the caller changes meets every check still, those after the record's own refusal too.
    changed = resume_settings(run_dir, epochs=2)
    changed.eval_batch_size = 0
    with pytest.raises(AttnclfError, match="^eval_batch_size must be at least 1, got 0$"):
        train_run(changed, resume=True, progress=False)
    resumed = train_run(resume_settings(run_dir, epochs=2), resume=True, progress=False)
    assert [h["epoch"] for h in resumed.history] == [1, 2]


def test_resume_refuses_a_split_that_changed_since(tmp_path):
    from attnclf.training.settings import resume_settings

    run = train_run(tiny_settings(tmp_path / "run", epochs=1), progress=False)
    config_file = run.run_dir / "config.json"
    config = json.loads(config_file.read_text())
    config["data"]["validation_sha256"] = "0" * 64  # as if the data had changed since
    config_file.write_text(json.dumps(config))
    with pytest.raises(RunDirError, match="no longer gives the validation texts this run held out"):
        train_run(resume_settings(run.run_dir, epochs=2), resume=True, progress=False)


def test_resume_refuses_training_texts_that_changed_since(tmp_path):
    from attnclf.training.settings import resume_settings

    run = train_run(tiny_settings(tmp_path / "run", epochs=1), progress=False)
    config_file = run.run_dir / "config.json"
    config = json.loads(config_file.read_text())
    config["data"]["train_sha256"] = "0" * 64  # as if training rows had been edited, the validation ones kept
    config_file.write_text(json.dumps(config))
    with pytest.raises(RunDirError, match="no longer gives the texts this run trained on"):
        train_run(resume_settings(run.run_dir, epochs=2), resume=True, progress=False)


def test_a_run_split_before_every_class_was_kept_for_training_is_told_its_split_changed(tmp_path, monkeypatch):
    # Seed 4 used to hold out class 24's only text; the split now keeps it for training. Nothing in the file changed,
    # so a refusal blaming the data alone would send its user looking for an edit that never happened.
    from attnclf.data import splits
    from attnclf.training.settings import resume_settings

    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"text {i} of w{i % 24},c{i % 24}\n" for i in range(192))
                     + "the rare one,c24\n")
    settings = replace(tiny_settings(tmp_path / "run", epochs=1, seed=4), data=DataSettings(train_file=str(train)),
                       model="boe", model_config={})
    with monkeypatch.context() as before:
        before.setattr(splits, "_keep_every_class", lambda labels, fit, validation: (fit, validation))
        run = train_run(settings, progress=False)
    with pytest.raises(RunDirError, match=r"no longer gives the texts this run trained on \(the data or its split "
                                          r"changed since\)"):
        train_run(resume_settings(run.run_dir, epochs=2), resume=True, progress=False)


def test_settings_that_cannot_build_a_model_touch_no_earlier_run_in_the_folder(tmp_path):
    run_dir = train_run(tiny_settings(tmp_path / "run", epochs=1, report=True), progress=False).run_dir
    before = {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()}
    broken = tiny_settings(tmp_path / "run", epochs=1)
    broken.model_config = {**broken.model_config, "heads": 3}  # 16 is not divisible by 3
    with pytest.raises(AttnclfError, match="not divisible by heads=3"):
        train_run(broken, progress=False)
    assert {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()} == before


def test_a_fresh_run_in_an_old_folder_drops_what_was_derived_from_the_old_weights(tmp_path):
    run_dir = train_run(tiny_settings(tmp_path / "run", epochs=1), progress=False).run_dir
    (run_dir / "onnx").mkdir()
    (run_dir / "onnx" / "export.json").write_text("{}")  # as `attnclf export` leaves it
    train_run(tiny_settings(tmp_path / "run", epochs=1, seed=1), progress=False)
    assert not (run_dir / "onnx").exists()


def test_run_files_get_the_permissions_of_any_file_the_user_creates(tmp_path):
    import os
    import stat

    umask = os.umask(0)
    os.umask(umask)
    run_dir = train_run(tiny_settings(tmp_path / "run", epochs=1), progress=False).run_dir
    for name in ("config.json", "model.safetensors", "metrics.json"):
        assert stat.S_IMODE((run_dir / name).stat().st_mode) == 0o666 & ~umask, name


def test_a_second_process_writing_into_a_running_run_s_folder_is_refused_and_the_run_stays_whole(tmp_path,
                                                                                                  monkeypatch):
    """Two trainings given one --output interleaved their files: both said they had finished, and the folder held the
    config.json of one beside the weights of the other, which no command could load. Now the second is refused while
    the first runs, naming it; the first finishes whole and leaves no lock file behind."""
    import subprocess
    import sys

    from attnclf.rundir import LOCK_FILE
    from attnclf.training.trainer import Trainer

    run, second = tmp_path / "run", []
    train_epoch = Trainer._train_epoch

    def another_training_meanwhile(self, batches, optimizer, schedule, loss_fn, epoch):
        if epoch == 2:  # (epoch 1 is checkpointed: the folder holds an unfinished run, which --overwrite replaces)
            second.append(subprocess.run(
                [sys.executable, "-m", "attnclf", "train", "--dataset", "demo", "--max-train-examples", "200",
                 "--model", "boe", "--epochs", "1", "--threads", "1", "--output", str(run), "--overwrite", "--quiet",
                 "--no-report"], capture_output=True, text=True, timeout=300))
        return train_epoch(self, batches, optimizer, schedule, loss_fn, epoch)

    monkeypatch.setattr(Trainer, "_train_epoch", another_training_meanwhile)
    train_run(tiny_settings(run, epochs=2), progress=False)
    assert second[0].returncode == 2 and second[0].stderr == (
        f"attnclf: error: {run} is being written by another attnclf process (pid {os.getpid()}); wait for it to "
        f"finish, or give another --output\n")
    assert Classifier.load(run, device="cpu").predict(["a fine film"])  # its config.json and weights are one run's
    assert not (run / LOCK_FILE).exists()


def test_a_folder_on_a_file_system_without_locks_is_written_unlocked(tmp_path, monkeypatch):
    # (some network mounts refuse flock with ENOLCK: a run there trains as it did before folders were locked)
    import errno
    import fcntl

    from attnclf.rundir import LOCK_FILE

    def no_locks_here(handle, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks_here)
    train_run(tiny_settings(tmp_path / "run", epochs=1), progress=False)
    assert (tmp_path / "run" / "metrics.json").is_file() and not (tmp_path / "run" / LOCK_FILE).exists()


def test_a_lock_whose_holder_cannot_be_written_is_let_go(tmp_path, monkeypatch):
    # A full disk (or `ulimit -f 0`) as folder_lock wrote its pid into the lock file left the file locked by a
    # descriptor nothing closed: from Python (a notebook) every later run into that folder was refused, naming this very
    # process, until it was restarted.
    import errno

    import attnclf.rundir
    from attnclf.rundir import LOCK_FILE, folder_lock

    with monkeypatch.context() as patch:
        def disk_full(handle, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        patch.setattr(attnclf.rundir.os, "write", disk_full)
        with pytest.raises(OSError, match="No space left") as failed:
            with folder_lock(tmp_path):
                pass
    assert failed.value.filename == str(tmp_path / LOCK_FILE)
    with folder_lock(tmp_path):  # (refused, before: the first lock was never let go)
        assert (tmp_path / LOCK_FILE).is_file()
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_folder_held_again_within_its_hold_stays_held_until_the_outer_hold_ends(tmp_path):
    import subprocess
    import sys

    from attnclf.rundir import LOCK_FILE, folder_lock

    def another_process_asks():
        return subprocess.run([sys.executable, "-c", "import sys\nfrom attnclf.rundir import folder_lock\n"
                               "with folder_lock(sys.argv[1]):\n    pass\n", str(tmp_path)],
                              capture_output=True, text=True, timeout=60)

    with folder_lock(tmp_path):
        with folder_lock(tmp_path / ".." / tmp_path.name):  # (the same folder, named otherwise)
            pass
        refused = another_process_asks()
        assert refused.returncode == 1 and "is being written by another attnclf process" in refused.stderr
    assert not (tmp_path / LOCK_FILE).exists() and another_process_asks().returncode == 0


def test_resume_without_a_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(RunDirError, match="nothing to resume"):
        train_run(tiny_settings(tmp_path / "empty"), resume=True, progress=False)


def test_train_resume_of_a_finished_run_whose_metrics_were_mangled_tests_it_again(tmp_path, mangle):
    # `train --resume` of a finished run trains no further and tests it again, writing its metrics.json anew: a mangled
    # one is replaced, never read (`train --seeds --resume` and `refit --resume` keep a finished run's, so refuse one).
    from attnclf.cli import main

    run = train_run(tiny_settings(tmp_path / "run", epochs=1), progress=False).run_dir
    scored = json.loads((run / "metrics.json").read_text())
    mangle(run / "metrics.json", "truncated")
    assert main(["train", "--resume", "--output", str(run), "--quiet", "--no-report", "--device", "cpu"]) == 0
    assert json.loads((run / "metrics.json").read_text())["accuracy"] == scored["accuracy"]


def test_the_temporary_files_kill_9_left_beside_a_run_s_files_go_when_it_resumes_or_trains_again(tmp_path,
                                                                                                 monkeypatch):
    """kill -9 in a write leaves its temporary file (.model.safetensors.XXXXXXXX.tmp, as large as the weights) in the
    run folder or plots/: a resume, or the run trained again, deleted the checkpoint's but kept these for good."""
    from attnclf.rundir import temporary_beside
    from attnclf.training.settings import resume_settings
    from attnclf.training.trainer import Trainer

    train_epoch = Trainer._train_epoch

    def interrupted_in_epoch_2(self, batches, optimizer, schedule, loss_fn, epoch):
        if epoch == 2:
            raise KeyboardInterrupt
        return train_epoch(self, batches, optimizer, schedule, loss_fn, epoch)

    for again in (lambda run: train_run(resume_settings(run), resume=True, progress=False),
                  lambda run: train_run(tiny_settings(run, report=True), progress=False)):
        run = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        with monkeypatch.context() as patch:
            patch.setattr(Trainer, "_train_epoch", interrupted_in_epoch_2)
            with pytest.raises(KeyboardInterrupt):
                train_run(tiny_settings(run, report=True), progress=False)
        (run / "plots").mkdir()
        for name in ("model.safetensors", "history.jsonl", "plots/training.png", "checkpoint/epoch-2.safetensors"):
            os.close(temporary_beside(run / name)[0])  # as a write killed half-way leaves it
        again(run)
        assert not list(run.rglob("*.tmp"))


def test_the_learning_rate_warms_up_over_its_ratio_then_follows_its_schedule_to_the_last_step():
    import math

    from attnclf.training.trainer import _make_schedule

    def rates(schedule: str) -> list[float]:
        """The learning rate each of 100 steps takes, warming up over the first 10."""
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        steps = _make_schedule(optimizer, TrainConfig(lr=1.0, warmup_ratio=0.1, schedule=schedule), total_steps=100)
        taken = []
        for _ in range(100):
            taken.append(steps.get_last_lr()[0])
            optimizer.step()
            steps.step()
        return taken

    linear = rates("linear")
    assert linear[:10] == pytest.approx([(step + 1) / 10 for step in range(10)])  # the first step learns already
    assert linear[10:] == pytest.approx([1 - (step - 10) / 90 for step in range(10, 100)])  # to 0 at the end
    cosine = rates("cosine")
    assert cosine[:10] == linear[:10]
    assert cosine[10:] == pytest.approx([0.5 * (1 + math.cos(math.pi * (step - 10) / 90)) for step in range(10, 100)])
    assert rates("constant")[10:] == [1.0] * 90


def test_early_stopping_keeps_the_best_epoch(tmp_path):
    # With lr 0 nothing improves on epoch 1, so patience 1 stops after epoch 2.
    settings = tiny_settings(tmp_path / "run", epochs=6)
    settings.train = TrainConfig(epochs=6, lr=0.0, patience=1, monitor="loss")
    result = train_run(settings, progress=False)
    assert len(result.history) == 2


def test_a_tie_on_the_monitored_metric_keeps_the_earlier_epoch(tmp_path, monkeypatch):
    # Every epoch scores the same on validation while its weights move on: the first of them is kept and tested.
    from attnclf.training.trainer import Trainer

    validate, at_epoch = Trainer._validate, {}

    def tied(self, validation, epoch):
        at_epoch[epoch] = {k: v.detach().clone() for k, v in self._evaluated().state_dict().items()}
        return validate(self, validation, epoch) | {"val_macro_f1": 0.5}

    monkeypatch.setattr(Trainer, "_validate", tied)
    result = train_run(tiny_settings(tmp_path / "run", epochs=3), progress=False)
    kept = weights(result.run_dir)
    assert not all(torch.equal(at_epoch[1][k], at_epoch[3][k]) for k in kept)  # (the weights did move)
    assert all(torch.equal(kept[k], at_epoch[1][k]) for k in kept)
    assert "which 2 later epochs tied (the first is kept)" in describe_kept(result.history, "macro_f1")


def test_a_run_stopped_early_then_interrupted_while_testing_resumes_to_its_test_not_to_more_epochs(tmp_path,
                                                                                                monkeypatch):
    import attnclf.training.run as run
    from attnclf.training.settings import resume_settings

    def settings(name):  # lr 0: epoch 2 does not improve on epoch 1, so patience 1 stops there
        stopping = tiny_settings(tmp_path / name, epochs=6)
        stopping.train = replace(stopping.train, lr=0.0, patience=1, monitor="loss")
        return stopping

    straight = train_run(settings("straight"), progress=False)
    assert [h["epoch"] for h in straight.history] == [1, 2]

    def interrupted(*args, **kwargs):  # Ctrl-C during the test pass, after the last checkpoint
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(run, "evaluate_split", interrupted)
        with pytest.raises(KeyboardInterrupt):
            train_run(settings("resumed"), progress=False)
    resumed = train_run(resume_settings(tmp_path / "resumed"), resume=True, progress=False)
    assert [h["epoch"] for h in resumed.history] == [1, 2]  # it had stopped: no third epoch
    assert len((tmp_path / "resumed" / "history.jsonl").read_text().splitlines()) == 2
    assert {k: v for k, v in resumed.metrics.items() if k != "train_seconds"} == \
        {k: v for k, v in straight.metrics.items() if k != "train_seconds"}


def test_a_run_that_stopped_early_is_not_resumed_with_another_epoch_budget(tmp_path):
    """Its patience ran out, so a longer --epochs trains nothing (as a run started with it stops at the same epoch):
    said, rather than recorded as a budget the run never used, its calibration deleted as if its weights changed."""
    from attnclf.training.settings import resume_settings

    stopping = tiny_settings(tmp_path / "run", epochs=6)
    stopping.train = replace(stopping.train, lr=0.0, patience=1, monitor="loss")  # stops at epoch 2
    train_run(stopping, progress=False)
    with pytest.raises(AttnclfError, match=r"run stopped early, at epoch 2: its validation loss had not improved for "
                                           r"1 epochs \(patience\), so another epoch budget \(epochs\) would train "
                                           r"nothing; resume it without epochs, or train it again with a larger "
                                           r"patience$"):
        resume_settings(tmp_path / "run", epochs=10)  # (named as Python names them, not by the command line's flags)
    # A smaller budget than planned, but past the epoch it stopped at, trains nothing either: not "a larger" one.
    with pytest.raises(AttnclfError, match=r"\(--patience\), so another epoch budget \(--epochs\) would train nothing"):
        resume_settings(tmp_path / "run", epochs=3, named=lambda field: f"--{field}")
    assert resume_settings(tmp_path / "run", epochs=6).train.epochs == 6  # its own budget (train --seeds --resume)


def test_a_run_interrupted_while_its_checkpoint_is_written_resumes_to_the_uninterrupted_result(tmp_path,
                                                                                               monkeypatch):
    import attnclf.training.trainer as trainer
    from attnclf.training.settings import resume_settings

    straight = train_run(tiny_settings(tmp_path / "straight", epochs=3), progress=False)
    write_json, written = trainer.atomic_write_json, []

    def interrupted_before_its_state(path, obj):  # Ctrl-C between epoch 2's tensors and its state.json
        if Path(path).name == "state.json":
            written.append(obj["epoch"])
            if obj["epoch"] == 2:
                raise KeyboardInterrupt
        write_json(path, obj)

    with monkeypatch.context() as patch:
        patch.setattr(trainer, "atomic_write_json", interrupted_before_its_state)
        with pytest.raises(KeyboardInterrupt):
            train_run(tiny_settings(tmp_path / "resumed", epochs=3), progress=False)
    assert written == [1, 2]
    resumed = train_run(resume_settings(tmp_path / "resumed"), resume=True, progress=False)
    assert [h["train_loss"] for h in resumed.history] == [h["train_loss"] for h in straight.history]
    a, b = weights(straight.run_dir), weights(resumed.run_dir)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert len(list((tmp_path / "resumed" / "checkpoint").glob("*.safetensors"))) == 1  # no stale tensors kept


def _scripted_validation(patch, losses):
    """Have each epoch's validation score the loss ``losses[epoch]`` (its other figures its own): which epoch improves
    is the test's to say, as a resume trained on with another --epochs or --threads may score otherwise."""
    from attnclf.training.trainer import Trainer

    validate = Trainer._validate
    patch.setattr(Trainer, "_validate", lambda self, validation, epoch: {**validate(self, validation, epoch),
                                                                         "val_loss": losses[epoch]})


def test_a_stop_before_a_checkpoint_commits_leaves_the_weights_its_state_kept(tmp_path, monkeypatch):
    """Stopped as epoch 2's checkpoint was written, before its state.json: a resume goes on from epoch 1, so
    model.safetensors must still hold epoch 1's weights. Written first, it held epoch 2's, which a resume that scored
    its epochs otherwise (another --epochs, --threads) kept as its model while its history said epoch 1."""
    import attnclf.training.trainer as trainer
    from attnclf.rundir import load_weights
    from attnclf.training.settings import resume_settings

    write_json = trainer.atomic_write_json

    def interrupted_before_its_state(path, obj):
        if Path(path).name == "state.json" and obj["epoch"] == 2:
            raise KeyboardInterrupt
        write_json(path, obj)

    with monkeypatch.context() as patch:
        _scripted_validation(patch, {1: 0.9, 2: 0.5})  # epoch 2 improves
        patch.setattr(trainer, "atomic_write_json", interrupted_before_its_state)
        with pytest.raises(KeyboardInterrupt):
            train_run(tiny_settings(tmp_path / "run", epochs=3, monitor="loss"), progress=False)
    run = tmp_path / "run"
    epoch_1 = {name[6:]: tensor for name, tensor in load_weights(checkpoint_tensors(run)).items()
               if name.startswith("model.")}
    with monkeypatch.context() as patch:
        _scripted_validation(patch, {2: 0.95, 3: 0.97})  # resumed, no epoch improves on epoch 1
        resumed = train_run(resume_settings(run), resume=True, progress=False)
    assert "epoch 1 of 3" in describe_kept(resumed.history, "loss")
    kept = weights(run)
    assert kept.keys() == epoch_1.keys() and all(torch.equal(kept[k], epoch_1[k]) for k in kept)


def test_a_stop_after_a_checkpoint_commits_publishes_its_weights_as_the_run_resumes(tmp_path, monkeypatch):
    """Stopped once epoch 2's state.json committed it but before model.safetensors took its weights: the resume,
    which goes on from epoch 2 and does not train it again, must publish them, as the uninterrupted run kept them."""
    import attnclf.training.trainer as trainer
    from attnclf.training.settings import resume_settings

    losses = {1: 0.9, 2: 0.5, 3: 0.7}  # epoch 2 is the one kept
    with monkeypatch.context() as patch:
        _scripted_validation(patch, losses)
        straight = train_run(tiny_settings(tmp_path / "straight", epochs=3, monitor="loss"), progress=False)
    save_tensors, published = trainer.atomic_save_tensors, []

    def interrupted_before_the_weights(path, tensors, *args):
        if Path(path).name == "model.safetensors":
            published.append(path)
            if len(published) == 2:  # epoch 2's
                raise KeyboardInterrupt
        save_tensors(path, tensors, *args)

    with monkeypatch.context() as patch:
        _scripted_validation(patch, losses)
        patch.setattr(trainer, "atomic_save_tensors", interrupted_before_the_weights)
        with pytest.raises(KeyboardInterrupt):
            train_run(tiny_settings(tmp_path / "resumed", epochs=3, monitor="loss"), progress=False)
    assert json.loads((tmp_path / "resumed" / "checkpoint" / "state.json").read_text())["epoch"] == 2
    with monkeypatch.context() as patch:
        _scripted_validation(patch, losses)
        resumed = train_run(resume_settings(tmp_path / "resumed"), resume=True, progress=False)
    assert [h["train_loss"] for h in resumed.history] == [h["train_loss"] for h in straight.history]
    a, b = weights(straight.run_dir), weights(resumed.run_dir)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_checkpoint_in_the_earlier_format_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch):
    """Checkpoints written before state.json named its tensors kept them in last.safetensors: they still resume."""
    import attnclf.training.trainer as trainer
    from attnclf.training.settings import resume_settings

    straight = train_run(tiny_settings(tmp_path / "straight", epochs=3), progress=False)
    save = trainer.Trainer._save_checkpoint

    def interrupted_after_epoch_1(self, optimizer, schedule, state, best_weights):
        save(self, optimizer, schedule, state, best_weights)
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(trainer.Trainer, "_save_checkpoint", interrupted_after_epoch_1)
        with pytest.raises(KeyboardInterrupt):
            train_run(tiny_settings(tmp_path / "resumed", epochs=3), progress=False)
    checkpoint = tmp_path / "resumed" / "checkpoint"
    state = json.loads((checkpoint / "state.json").read_text())
    (checkpoint / state.pop("tensors")).rename(checkpoint / "last.safetensors")
    (checkpoint / "state.json").write_text(json.dumps(state))
    resumed = train_run(resume_settings(tmp_path / "resumed"), resume=True, progress=False)
    assert [h["train_loss"] for h in resumed.history] == [h["train_loss"] for h in straight.history]
    a, b = weights(straight.run_dir), weights(resumed.run_dir)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert sorted(p.name for p in checkpoint.iterdir()) == ["epoch-3.safetensors", "state.json"]


def test_a_resumed_run_deletes_the_tensor_files_its_checkpoint_does_not_name(tmp_path, monkeypatch):
    """Interrupted after its last state.json but before the tensors it replaced were deleted, a run resumes to its
    test and writes no checkpoint again: the earlier tensors (and a write kill -9 cut short) must go as it resumes."""
    import attnclf.training.trainer as trainer
    from attnclf.rundir import temporary_beside
    from attnclf.training.settings import resume_settings

    write_json = trainer.atomic_write_json

    def interrupted_after_its_state(path, obj):  # Ctrl-C once epoch 2's state.json commits it
        write_json(path, obj)
        if Path(path).name == "state.json" and obj["epoch"] == 2:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(trainer, "atomic_write_json", interrupted_after_its_state)
        with pytest.raises(KeyboardInterrupt):
            train_run(tiny_settings(tmp_path / "run", epochs=2), progress=False)
    checkpoint = tmp_path / "run" / "checkpoint"
    os.close(temporary_beside(checkpoint / "epoch-3.safetensors")[0])  # as a write killed half-way leaves it
    assert len(list(checkpoint.iterdir())) == 4  # state.json, epoch 1's and 2's tensors, the cut-short write
    train_run(resume_settings(tmp_path / "run"), resume=True, progress=False)
    assert sorted(p.name for p in checkpoint.iterdir()) == ["epoch-2.safetensors", "state.json"]


def test_saved_model_predicts_exactly_as_the_trained_one(tmp_path):
    result = train_run(tiny_settings(tmp_path / "run"), progress=False)
    texts = ["the plot was not good", "the acting was brilliant but the ending was dull", ""]
    first = Classifier.load(result.run_dir, device="cpu").predict_proba(texts)
    again = Classifier.load(result.run_dir, device="cpu").predict_proba(texts)
    assert (first == again).all()
    predictions = Classifier.load(result.run_dir, device="cpu").predict(texts)
    assert [p.label for p in predictions] == [["negative", "positive"][i] for i in first.argmax(1)]
    attention = predictions[0].attention
    assert len(attention) == len(predictions[0].tokens) and sum(attention) == pytest.approx(1, abs=1e-5)


def test_class_weights_and_label_smoothing_train(tmp_path):
    result = train_run(tiny_settings(tmp_path / "run", epochs=1, class_weights="balanced", label_smoothing=0.1,
                                     optimizer="adam", schedule="cosine"), progress=False)
    assert result.history[0]["train_loss"] > 0


def test_a_failed_run_keeps_what_another_run_wrote_into_a_parent_it_created(tmp_path, monkeypatch):
    from attnclf.training import run as run_module

    def data_that_fails_after_another_run_wrote(settings, seed, **kwargs):
        (tmp_path / "new" / "other").mkdir()
        (tmp_path / "new" / "other" / "metrics.json").write_text("{}")
        raise DataError("bad data")

    monkeypatch.setattr(run_module, "load_data", data_that_fails_after_another_run_wrote)
    with pytest.raises(DataError):
        run_module.train_run(RunSettings(DataSettings(dataset="demo"), output=str(tmp_path / "new" / "mine")))
    assert not (tmp_path / "new" / "mine").exists() and (tmp_path / "new" / "other" / "metrics.json").is_file()


def test_weights_that_cannot_be_written_leave_no_partial_file_and_say_where(tmp_path, monkeypatch):
    import safetensors.torch
    from safetensors import SafetensorError

    from attnclf.rundir import atomic_save_tensors

    def disk_full(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"half")
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })")

    monkeypatch.setattr(safetensors.torch, "save_file", disk_full)
    with pytest.raises(OSError, match="model.safetensors: cannot write the weights .*StorageFull"):
        atomic_save_tensors(tmp_path / "model.safetensors", {"w": torch.zeros(2)})
    assert list(tmp_path.iterdir()) == []


_PAST_THE_FILE_SIZE_LIMIT = """
import resource, signal, sys
from pathlib import Path
from attnclf.rundir import atomic_write_json
from attnclf.text.cache import build_cache
from attnclf.text.tokenizer import Tokenizer, TokenizerConfig

folder = Path(sys.argv[2])
tokenizer = Tokenizer.train([f"a good film number{i}" for i in range(200)], TokenizerConfig(min_frequency=1))
writes = {"json": ("metrics.json", lambda path: atomic_write_json(path, {"texts": "a text " * 1000})),
          "tokenizer": ("tokenizer.json", tokenizer.save),
          "token cache": ("cache", lambda path: build_cache(path, [("a good film " * 500, 0)], tokenizer, ["neg"]))}
name, write = writes[sys.argv[1]]
(folder / name).write_text("the earlier file") if name != "cache" else None
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (a write past the limit fails with EFBIG, as under a shell's handler)
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    write(folder / name)
except OSError as exc:
    where = exc.filename2 or exc.filename  # (as the command line names it)
    print(f"{where + ': ' if where else ''}{exc.strerror or exc}")
"""


@pytest.mark.parametrize("writer", ["json", "tokenizer", "token cache"])
def test_a_write_past_the_file_size_limit_names_its_file_and_keeps_the_earlier_one(writer, tmp_path):
    """Under `ulimit -f` a write past the limit fails with EFBIG, which names no file: the command line said only
    "attnclf: error: File too large" for a JSON file or a token cache, and the tokenizer's (a bare Exception from
    its Rust library) was a traceback. Each names the file (the cache: its folder) and keeps the one there."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _PAST_THE_FILE_SIZE_LIMIT, writer, str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    name = {"json": "metrics.json", "tokenizer": "tokenizer.json", "token cache": "cache"}[writer]
    assert done.stdout.startswith(f"{tmp_path / name}: ") and "File too large" in done.stdout, done.stdout
    assert sorted(path.name for path in tmp_path.iterdir()) == ([name] if writer != "token cache" else [])
    if writer != "token cache":
        assert (tmp_path / name).read_text() == "the earlier file"


@pytest.mark.parametrize("write", ["tensors", "json"])
def test_a_files_bytes_reach_the_disk_before_its_name_does_and_its_name_before_the_writer_goes_on(write, tmp_path,
                                                                                                  monkeypatch):
    # A checkpoint's state.json names its tensor file once it is in place, and the older file is then deleted:
    # after a power cut the named file, and state.json itself, must hold their bytes, which only an fsync before
    # the rename promises; and the new state.json must be the one found, which only the folder's fsync promises.
    import os

    from attnclf.rundir import atomic_save_tensors, atomic_write_json

    happened = []
    fsync, replace_file = os.fsync, os.replace
    synced = lambda fd: (os.fstat(fd).st_ino, os.fstat(fd).st_size)  # noqa: E731 (the file, whole; no /proc needed)
    monkeypatch.setattr(os, "fsync", lambda fd: happened.append(("fsync", synced(fd))) or fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: happened.append(("replace", Path(b).name)) or replace_file(a, b))
    name = {"tensors": "epoch-1.safetensors", "json": "state.json"}[write]
    if write == "tensors":
        atomic_save_tensors(tmp_path / name, {"w": torch.zeros(2)})
    else:
        atomic_write_json(tmp_path / name, {"epoch": 1, "tensors": "epoch-1.safetensors"})
    named = (tmp_path / name).stat()
    folder = tmp_path.stat()
    assert happened == [("fsync", (named.st_ino, named.st_size)), ("replace", name),
                        ("fsync", (folder.st_ino, folder.st_size))]


@pytest.mark.parametrize("refusal, kept", [("EOPNOTSUPP", True), ("EINVAL", True), ("EIO", False), ("ENOSPC", False)])
def test_a_filesystem_without_fsync_still_gets_the_file_and_a_failed_sync_names_it(refusal, kept, tmp_path,
                                                                                   monkeypatch):
    # An SMB share or a FUSE mount may have no fsync at all: the write still lands (atomically, by the rename).
    # A sync that failed lost the bytes: the file's error, naming it, as every other write error does.
    import errno

    from attnclf.rundir import atomic_write_json

    code = getattr(errno, refusal)

    def fsync(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", fsync)
    if kept:
        atomic_write_json(tmp_path / "state.json", {"epoch": 1})
        assert json.loads((tmp_path / "state.json").read_text()) == {"epoch": 1}
    else:
        with pytest.raises(OSError) as raised:
            atomic_write_json(tmp_path / "state.json", {"epoch": 1})
        assert (raised.value.errno, raised.value.filename) == (code, str(tmp_path / "state.json"))
    assert [p.name for p in tmp_path.iterdir()] == (["state.json"] if kept else [])


@pytest.mark.parametrize("step, refusal, kept", [("open", "EACCES", True), ("open", "EPERM", True),
                                                  ("fsync", "EBADF", True), ("fsync", "EINVAL", True),
                                                  ("fsync", "EIO", False)])
def test_a_folder_that_cannot_be_synced_still_gets_the_file_and_a_failed_sync_names_it(step, refusal, kept, tmp_path,
                                                                                       monkeypatch):
    # The folder's fsync comes after the rename, so the file is in place by then. A folder that may be written into
    # but not opened (mode -wx), or a system that refuses to fsync a folder's read-only descriptor, cannot give the
    # rename that extra promise, as a filesystem without fsync cannot: the write stands. A sync that failed (EIO)
    # is the file's error, named, so that a checkpoint does not go on to delete the tensors its old state.json named.
    import errno

    from attnclf.rundir import atomic_write_json

    code = getattr(errno, refusal)
    folder = os.stat(tmp_path).st_ino
    real_open, real_fsync = os.open, os.fsync

    def refuse(fd):
        raise OSError(code, os.strerror(code))

    def opened(target, flags, *args, **kwargs):
        if step == "open" and Path(target) == tmp_path:
            refuse(None)
        return real_open(target, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", opened)
    monkeypatch.setattr(os, "fsync", lambda fd: refuse(fd) if step == "fsync" and os.fstat(fd).st_ino == folder
                        else real_fsync(fd))
    if kept:
        atomic_write_json(tmp_path / "state.json", {"epoch": 2})
    else:
        with pytest.raises(OSError) as raised:
            atomic_write_json(tmp_path / "state.json", {"epoch": 2})
        assert (raised.value.errno, raised.value.filename) == (code, str(tmp_path / "state.json"))
    assert json.loads((tmp_path / "state.json").read_text()) == {"epoch": 2}  # (in place either way: renamed first)
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


@pytest.mark.parametrize("replacing", [False, True])
def test_a_published_folder_is_named_on_disk_before_the_one_it_replaces_is_deleted(replacing, tmp_path, monkeypatch):
    # AttentionTextClassifier.save publishes a whole folder over an earlier model, which is then deleted: its new name
    # must reach the disk first (the parent folder's fsync), or a power cut may leave neither model.
    import shutil

    from attnclf.rundir import publish_folder

    target, new = tmp_path / "model", tmp_path / ".model.new"
    new.mkdir()
    (new / "config.json").write_text("{}")
    if replacing:
        target.mkdir()
        (target / "config.json").write_text('{"old": true}')
    happened = []
    fsync, replace_file, rmtree = os.fsync, os.replace, shutil.rmtree
    monkeypatch.setattr(os, "fsync", lambda fd: happened.append(("fsync", os.fstat(fd).st_ino)) or fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: happened.append(("replace", Path(b).name)) or replace_file(a, b))
    monkeypatch.setattr(shutil, "rmtree", lambda p, **kw: happened.append(("rmtree", Path(p).suffix)) or rmtree(p,
                                                                                                           **kw))
    publish_folder(new, target, replace=replacing)
    parent = ("fsync", tmp_path.stat().st_ino)
    assert happened == ([("replace", "old"), ("replace", "model"), parent, ("rmtree", ".replaced")] if replacing
                        else [("replace", "model"), parent])
    assert json.loads((target / "config.json").read_text()) == {}
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


@pytest.mark.parametrize("change, message", [
    (lambda s: replace(s, model_config={**s.model_config, "vocab_size": 5}),
     r"model_config sets vocab_size, which comes from the trained tokenizer \(TokenizerConfig.vocab_size"),
    (lambda s: replace(s, data=replace(s.data, max_train_examples=0)), "max_train_examples must be at least 1, got 0"),
    (lambda s: replace(s, data=replace(s.data, max_test_examples=True)), "max_test_examples must be a whole number, "
                                                                         "got True"),
    (lambda s: replace(s, data=replace(s.data, split_seed=-1)), "split_seed must be at least 0 and below 4294967296"),
    (lambda s: replace(s, eval_batch_size=0), "eval_batch_size must be at least 1, got 0"),
    (lambda s: replace(s, embeddings="count", embeddings_std=float("nan")), "embeddings_std must be positive and "
                                                                              "finite, got nan"),
    (lambda s: replace(s, threads=1.5), "threads must be a whole number, got 1.5"),
    (lambda s: replace(s, data=replace(s.data, split_seed=np.int64(2 ** 32))), "split_seed must be at least 0 and "
                                                                               "below 4294967296, got 4294967296"),
    # Settings the command line refused as it read its flags, and a run built in Python took silently (or failed on
    # deep inside, after its folder was made): named by their fields here, by their flags there.
    (lambda s: replace(s, data=replace(s.data, label_delimiter=";")),
     "^label_delimiter applies to multi-label data; add multi_label$"),
    (lambda s: replace(s, data=replace(s.data, multi_label=True, label_delimiter="")),
     "^label_delimiter must be at least one character$"),
    (lambda s: replace(s, data=DataSettings(train_file="t.csv", validation_file="v.csv", val_fraction=0.2)),
     "^val_fraction carves validation from the training file; validation_file replaces it$"),
    (lambda s: replace(s, data=replace(s.data, val_fraction=1.5)), r"^val_fraction must be in \(0, 1\), got 1.5$"),
    # (compared unchecked, a string failed on a TypeError)
    (lambda s: replace(s, data=replace(s.data, val_fraction="0.1")), r"^val_fraction must be a number, got '0.1'$"),
    (lambda s: replace(s, embeddings_std=2.0), r"^embeddings_std needs embeddings FILE \(or count\)$"),
])
def test_settings_built_in_python_are_checked_before_anything_is_written(tmp_path, change, message):
    # The command line checks these as it reads its flags; train_run meets RunSettings built by hand.
    with pytest.raises(AttnclfError, match=message):
        train_run(change(tiny_settings(tmp_path / "run")), progress=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("build, start", [
    (lambda: TrainConfig(seed=-10 ** 5000), "seed must be at least 0 and below 4294967296, got an integer of over"),
    (lambda: TrainConfig(lr="l" * 100_000), "lr must be a number, got 'llllllll"),
    (lambda: TrainConfig(optimizer="o" * 100_000), "optimizer must be one of adamw, adam, got 'oooooooo"),
    (lambda: TrainConfig(class_weights="c" * 100_000), "class_weights must be none, balanced or a dict of label "
                                                       "weights, got 'cccccccc"),
    (lambda: TrainConfig(class_weights={("k",) * 100_000: 1}), "class_weights are keyed by label name, a string; "
                                                               "got ('k', 'k'"),
    (lambda: RunSettings(eval_batch_size=-10 ** 5000).check(), "eval_batch_size must be at least 1, got an integer"),
    (lambda: DataSettings(max_train_examples="m" * 100_000).check(), "max_train_examples must be a whole number, "
                                                                     "got 'mmmmmmmm"),
    (lambda: DataSettings(val_fraction=10 ** 5000).check(), "val_fraction must be in (0, 1), got an integer"),
])
def test_a_huge_setting_is_named_by_its_start_not_echoed_whole(build, start):
    # (a grid of settings, or a service, may hand these anything; an int of over 4300 digits has no str() at all)
    with pytest.raises(AttnclfError) as refused:
        build()
    assert str(refused.value).startswith(start) and len(str(refused.value)) < 300


def test_a_setting_given_at_its_default_value_is_refused_where_it_does_not_apply():
    # Settings alone cannot tell "|" typed from no delimiter given; the caller that can says so (the CLI: its flags).
    data = DataSettings(train_file="t.csv", validation_file="v.csv", label_delimiter="|", val_fraction=0.1)
    data.check()
    with pytest.raises(AttnclfError, match="^label_delimiter applies to multi-label data; add multi_label$"):
        data.check(given={"label_delimiter"})
    with pytest.raises(AttnclfError, match="^val_fraction carves validation from the training file"):
        data.check(given={"val_fraction"})
    with pytest.raises(AttnclfError, match=r"^embeddings_std needs embeddings FILE \(or count\)$"):
        RunSettings().check(given={"embeddings_std"})


def test_settings_for_checks_the_data_settings_it_is_given():
    from attnclf.training.settings import settings_for

    with pytest.raises(AttnclfError, match="^max_test_examples must be at least 1, got 0$"):
        settings_for(DataSettings(dataset="demo", max_test_examples=0), "boe")
    with pytest.raises(AttnclfError, match="^label_delimiter applies to multi-label data; add multi_label$"):
        settings_for(DataSettings(train_file="t.csv", label_delimiter=","), "boe")


@pytest.mark.parametrize("fields, message", [
    ({"epochs": 1.5}, "epochs must be a whole number, got 1.5"),
    ({"batch_size": "32"}, "batch_size must be a whole number, got '32'"),
    ({"seed": 2 ** 32}, "seed must be at least 0 and below 4294967296"),
    ({"checkpoint_seconds": float("inf"), "grad_clip": float("inf")}, None),  # only at the end; no clipping
    ({"epochs": True}, "epochs must be a whole number, got True"),
    # The schedule's length is a count too: inf overflowed int() in the schedule once training began, after
    # config.json recorded it (as Infinity, which JSON has not); a string failed on its comparison with epochs.
    ({"schedule_epochs": float("inf")}, "^schedule_epochs must be a whole number, got inf$"),
    ({"schedule_epochs": "12"}, "^schedule_epochs must be a whole number, got '12'$"),
    ({"schedule_epochs": 12.0}, "^schedule_epochs must be a whole number, got 12.0$"),
    ({"schedule_epochs": None, "epochs": 2}, None),
])
def test_train_config_takes_whole_numbers_and_infinity_only_where_it_means_something(fields, message):
    if message is None:
        TrainConfig(**fields)
    else:
        with pytest.raises(AttnclfError, match=message):
            TrainConfig(**fields)


def test_train_config_names_its_fields_as_its_caller_spells_them_and_records_no_namer():
    # The command line names its flags (--class-weight for class_weights); the namer is no setting of the run's.
    from dataclasses import asdict

    def flag(field):
        return {"class_weights": "--class-weight"}.get(field, f"--{field.replace('_', '-')}")

    for fields, message in (({"warmup_ratio": 1}, "--warmup-ratio must be at least 0 and below 1, got 1.0"),
                            ({"seed": -1}, "--seed must be at least 0 and below 4294967296, got -1"),
                            ({"class_weights": "even"}, "--class-weight must be none, balanced or a dict of label "
                                                        "weights, got 'even'")):
        with pytest.raises(AttnclfError) as refused:
            TrainConfig(**fields, named=flag)
        assert str(refused.value) == message
    config = TrainConfig(epochs=2, named=flag)
    assert "named" not in asdict(config) and replace(config, lr=0.1).lr == 0.1  # (replace() passes no namer on)
    with pytest.raises(AttnclfError, match="^epochs must be at least 1, got 0$"):
        replace(config, epochs=0)


@pytest.mark.parametrize("batch_size", [32, 1024])  # many steps an epoch; one, whose broken weights no loss saw
def test_a_diverging_run_stops_with_one_line_naming_the_epoch_and_learning_rate(tmp_path, batch_size):
    settings = tiny_settings(tmp_path / "run", epochs=3, lr=1e7)
    settings.train = replace(settings.train, batch_size=batch_size)
    with pytest.raises(AttnclfError, match=r"training diverged in epoch \d: the loss, the weights or the "
                                           r"outputs became infinite or NaN at learning rate 1e\+07"):
        train_run(settings, progress=False)


def test_numpy_integers_are_whole_numbers_and_become_plain_ints():
    config = TrainConfig(epochs=np.int64(2), batch_size=np.int32(8), seed=np.int64(3))  # np.arange grids give these
    assert (config.epochs, config.batch_size, config.seed) == (2, 8, 3)
    assert {type(config.epochs), type(config.batch_size), type(config.seed)} == {int}  # (JSON takes them)


def test_numpy_numbers_in_run_settings_become_plain_numbers_in_config_json(tmp_path):
    # (a numpy float32 val_fraction passed its check, then stopped the run in a traceback writing config.json)
    settings = tiny_settings(tmp_path / "run", epochs=1)
    settings = replace(settings, data=replace(settings.data, max_train_examples=np.int64(200), split_seed=np.int64(3),
                                              val_fraction=np.float32(0.25)),
                       eval_batch_size=np.int64(64), threads=np.int64(1))
    run_dir = train_run(settings, progress=False).run_dir
    saved = json.loads((run_dir / "config.json").read_text())["settings"]
    assert (saved["data"]["max_train_examples"], saved["data"]["split_seed"], saved["data"]["val_fraction"],
            saved["eval_batch_size"], saved["threads"]) == (200, 3, 0.25, 64, 1)


def test_a_run_without_validation_stops_when_one_step_breaks_its_weights(tmp_path):
    from attnclf.models import build_model
    from attnclf.text.batching import BucketBatches
    from attnclf.training.trainer import Trainer

    # One step an epoch at a learning rate past float32's range: the step's loss was taken before it and is finite,
    # and with no validation (a refit) only the weights show what it did.
    ids, labels = [[2 + i % 5, 3 + i % 3] for i in range(64)], [i % 2 for i in range(64)]
    model = build_model("boe", vocab_size=10, num_classes=2, embed_dim=8)
    trainer = Trainer(model, TrainConfig(epochs=2, batch_size=64, lr=1e39), tmp_path, torch.device("cpu"), ["a", "b"],
                      progress=False)
    with pytest.raises(AttnclfError, match="training diverged in epoch 1: "):
        trainer.fit(BucketBatches(ids, labels, 64, shuffle=True, seed=0), None)


def test_scoring_a_model_with_broken_weights_is_one_line(tmp_path):
    from attnclf.data.base import TextDataset
    from attnclf.training.run import evaluate_split

    run_dir = train_run(tiny_settings(tmp_path / "run", epochs=1), progress=False).run_dir
    classifier = Classifier.load(run_dir, device="cpu")
    with torch.no_grad():  # huge but finite weights, as a refit (no validation to notice) could end with
        for parameter in classifier.model.parameters():
            parameter.fill_(1e30)
    test = TextDataset(["a good film", "a dull film"], [0, 1], classifier.label_names, split="test")
    with pytest.raises(AttnclfError, match="the model's outputs on the test texts are not finite numbers"):
        evaluate_split(classifier.model, classifier.tokenizer, test, torch.device("cpu"))


@pytest.mark.parametrize("multi_label", [False, True])
def test_the_logged_loss_is_the_weighted_mean_with_each_weight_on_its_own_example(tmp_path, multi_label):
    from attnclf.models import build_model
    from attnclf.text.batching import BucketBatches
    from attnclf.training.trainer import Trainer

    rng = np.random.default_rng(0)
    ids = [rng.integers(2, 10, size=rng.integers(1, 6)).tolist() for _ in range(40)]  # lengths vary: bucketed
    labels = rng.integers(0, 2, size=(40, 3)) if multi_label else rng.integers(0, 3, size=40)
    weights = rng.uniform(0, 3, size=40)
    model = build_model("boe", vocab_size=10, num_classes=3, embed_dim=8, dropout=0.0)
    with torch.no_grad():  # (weights far from their start, so texts' losses differ: a weight on the wrong text shows)
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=torch.Generator().manual_seed(1)))
    # lr 0: the model never moves, so each text's loss is the same in whichever shuffled batch it lands
    config = TrainConfig(epochs=1, batch_size=4, lr=0, class_weights="none" if multi_label else {"c": 2.5})
    history = Trainer(model, config, tmp_path, torch.device("cpu"), ["a", "b", "c"], progress=False,
                      multi_label=multi_label).fit(BucketBatches(ids, labels, 4, seed=0, weights=weights), None)
    in_order = BucketBatches(ids, labels, 40, shuffle=False)
    batch = next(iter(in_order))
    with torch.no_grad():
        logits = model(batch.input_ids, batch.attention_mask).logits
    if multi_label:
        losses = torch.nn.functional.binary_cross_entropy_with_logits(
            logits, batch.labels.float(), reduction="none").mean(dim=1)
        effective = weights[batch.indices]
    else:
        losses = torch.nn.functional.cross_entropy(logits, batch.labels, reduction="none")
        effective = weights[batch.indices] * np.where(labels[batch.indices] == 2, 2.5, 1.0)
    expected = (effective * losses.numpy()).sum() / effective.sum()
    assert history[0]["train_loss"] == pytest.approx(expected, rel=1e-5)
    assert history[0]["train_loss"] != pytest.approx(losses.mean().item(), rel=1e-2)  # (the weights did count)


def test_weights_the_trainer_cannot_use_are_one_line_errors(tmp_path):
    from attnclf.models import build_model
    from attnclf.text.batching import BucketBatches
    from attnclf.training import multilabel
    from attnclf.training.trainer import Trainer

    assert TrainConfig(class_weights={"a": np.float32(2)}).class_weights == {"a": 2.0}  # (a float config.json takes)
    for weights, message in [
        ({"a": -1}, r"class_weights\['a'\] must be a finite number of at least 0, got -1"),
        ({"a": float("inf")}, r"class_weights\['a'\] must be a finite number of at least 0, got inf"),
        ({1: 2.0}, "class_weights are keyed by label name, a string; got 1"),
        ("auto", "class_weights must be none, balanced or a dict of label weights, got 'auto'"),
    ]:
        with pytest.raises(AttnclfError, match=message):
            TrainConfig(class_weights=weights)
    with pytest.raises(AttnclfError, match=r"class weights by label \(a dict\) weigh single-label runs' classes"):
        multilabel.check_config(TrainConfig(class_weights={"a": 2.0}))
    with pytest.raises(ValueError, match=r"weights must hold one number per example: 2 examples, weights of shape "
                                         r"\(3,\)"):
        BucketBatches([[2], [3]], [0, 1], weights=[1, 2, 3])

    def fit(config, weights=None):
        model = build_model("boe", vocab_size=10, num_classes=2, embed_dim=8)
        Trainer(model, config, tmp_path, torch.device("cpu"), ["a", "b"], progress=False).fit(
            BucketBatches([[2], [3], [4]], [0, 1, 1], 2, weights=weights), None)

    with pytest.raises(AttnclfError, match="class_weights names 'z', which is not one of the labels"):
        fit(TrainConfig(epochs=1, class_weights={"z": 2.0}))
    with pytest.raises(AttnclfError, match=r"every training example weighs 0 \(its class's weight times its own\)"):
        fit(TrainConfig(epochs=1, class_weights={"a": 0.0}), weights=[1.0, 0.0, 0.0])


@pytest.mark.parametrize("sampler", ["shuffle", "balanced"])
def test_batches_and_epochs_that_weigh_nothing_train_on_with_the_progress_bar_on(tmp_path, sampler):
    from attnclf.models import build_model
    from attnclf.text.batching import BucketBatches
    from attnclf.training.trainer import Trainer

    ids, labels = [[2 + i % 8] for i in range(20)], [i % 2 for i in range(20)]
    balanced = sampler == "balanced"
    probe = BucketBatches(ids, labels, 2, seed=0, balanced=balanced)
    probe.set_epoch(1)
    drawn = probe.batch_indices()
    # One text weighs 1, all others 0: shuffled, the first batch (which the bar shows) weighs nothing; drawn by the
    # balanced sampler, which draws by class and not by weight, the first epoch never meets that text at all.
    unseen = sorted(set(range(20)) - set(np.concatenate(drawn).tolist())) if balanced else \
        sorted(set(range(20)) - set(drawn[0].tolist()))
    weights = np.zeros(20)
    weights[unseen[0]] = 1.0
    history = Trainer(build_model("boe", vocab_size=12, num_classes=2, embed_dim=8), TrainConfig(
        epochs=2, batch_size=2, sampler=sampler), tmp_path, torch.device("cpu"), ["a", "b"], progress=True).fit(
        BucketBatches(ids, labels, 2, seed=0, balanced=balanced, weights=weights), None)
    assert [h["epoch"] for h in history] == [1, 2]
    if balanced:  # (an epoch of texts that weigh nothing learned nothing: its weighted mean loss counts as 0)
        assert history[0]["train_loss"] == 0.0


class _SavedRun:
    """A run as ``scoring_data`` reads one: its config.json's settings, its labels and whether it is multi-label."""

    def __init__(self, data: DataSettings, seed: int = 0):
        from dataclasses import asdict

        from attnclf.training.run_data import load_data

        self.config = {"settings": {"data": asdict(data), "train": {"seed": seed}, "output": "run"}}
        self.label_names = load_data(data, seed).train.label_names
        self.multi_label = data.multi_label


def test_scoring_data_refuses_a_multi_label_runs_own_validation_texts_as_the_cli_does(tmp_path):
    # Its thresholds were tuned on them: `evaluate` refused them, and scoring_data, its Python form, gave them silently
    # when the run's data had no test split.
    from attnclf.training.run_data import scoring_data

    rows = [{"text": f"{topic} story {i}", "label": [topic] + (["news"] if i % 3 == 0 else [])}
            for i in range(40) for topic in ("sport", "music")]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    run = _SavedRun(DataSettings(train_file=str(tmp_path / "train.jsonl"), multi_label=True))
    for split in ("test", "validation"):
        # (named as Python knows the arguments; `evaluate` names its flags)
        with pytest.raises(AttnclfError, match=r"^a multi-label run tuned its thresholds on its validation texts, "
                                               r"which would flatter it there; score it on test data \(test_file or "
                                               r"dataset\)$"):
            scoring_data(run, split=split)


def test_scoring_data_gives_the_texts_a_run_held_out_as_evaluate_split_validation_does():
    from attnclf.training.run_data import load_data, scoring_data

    data = DataSettings(dataset="demo", split_seed=4)
    run, held_out = _SavedRun(data, seed=1), load_data(data, 1).validation
    scored = scoring_data(run, split="validation")
    assert (scored.split, scored.texts, scored.labels) == ("validation", held_out.texts, held_out.labels)
    assert scoring_data(run).split == "test"  # (the demo dataset has a test split)
    # Its errors name its arguments as Python knows them; `evaluate` passes its flags' names (named=).
    with pytest.raises(AttnclfError, match="^split validation scores the texts the runs held out; drop "
                                           "dataset/test_file$"):
        scoring_data(run, dataset="demo", split="validation")
    # (both: the file was scored and the dataset left unread, without a word)
    with pytest.raises(AttnclfError, match="^dataset and test_file each name the texts to score; give one$"):
        scoring_data(run, dataset="demo", test_file="held_out.csv")
    with pytest.raises(AttnclfError, match="^split must be test or validation, got 'train'$"):
        scoring_data(run, split="train")
    with pytest.raises(AttnclfError) as refused:
        scoring_data(run, split="t" * 100_000)  # (named by its start: it may be anything a caller passed)
    assert str(refused.value) == f"split must be test or validation, got '{'t' * 39}..."
    with pytest.raises(AttnclfError, match="^label_delimiter applies to multi-label runs, and this one is "
                                           "single-label: its test labels are read whole; drop label_delimiter$"):
        scoring_data(run, test_file="held_out.csv", label_delimiter=",")
    with pytest.raises(AttnclfError, match="^--split must be test or validation, got 'train'$"):
        scoring_data(run, split="train", named=lambda name: f"--{name.replace('_', '-')}")


def test_run_test_data_names_what_to_give_as_its_caller_spells_it(tmp_path):
    # An ensemble is scored on a test split only (its members each held out other texts): without one, the
    # advice names the arguments (scoring_data's), or the flags `evaluate` passes as named=.
    from attnclf.training.run_data import run_test_data

    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"text {i},{'ab'[i % 2]}\n" for i in range(20)))
    run = _SavedRun(DataSettings(train_file=str(tmp_path / "train.csv")))
    with pytest.raises(AttnclfError, match=r"^train.csv has no test split; give held-out data with test_file or "
                                           r"dataset, or score the texts the runs held out with split validation "
                                           r"\(runs sharing split_seed\)$"):
        run_test_data(run.config, run.label_names, test_only=True)
    # A refit that trained on every text, and a run the scikit-learn estimator saved, have none to score either: the
    # advice named `evaluate`'s and `export`'s flags to every caller.
    from attnclf.rundir import ESTIMATOR
    from attnclf.training.run_data import scoring_data

    refit = _SavedRun(DataSettings(train_file=str(tmp_path / "train.csv"), refit=True))
    estimator = _SavedRun(DataSettings(train_file=str(tmp_path / "train.csv")))
    estimator.config["trained_by"] = ESTIMATOR
    for named, test_file in (({}, "test_file"), ({"named": lambda name: f"--{name.replace('_', '-')}"}, "--test-file")):
        with pytest.raises(AttnclfError, match=r"^train.csv has no test split, and this refit trained on every text it "
                                               rf"has: only other labelled texts can score it: give them with "
                                               rf"{test_file}$"):
            scoring_data(refit, **named)
        with pytest.raises(AttnclfError, match=r"^this run was saved by the scikit-learn estimator \(.*\): it has no "
                                               rf"recorded test texts; give it a file of labelled test texts "
                                               rf"\({test_file}\)$"):
            scoring_data(estimator, **named)


def test_a_class_too_small_for_the_split_to_hold_any_out_is_a_warning_that_validation_says_nothing_of_it():
    # A file where one class has 3 texts: a tenth held out is none of them, so validation (which picks the epoch
    # kept) never scores it, and the run said nothing of that.
    from attnclf.data.base import TextDataset
    from attnclf.training.run_data import describe_classes

    train = TextDataset(["a"] * 10, [0] * 4 + [1] * 3 + [2] * 3, ["neg", "neutral", "pos"])
    validation = TextDataset(["b", "c"], [0, 2], ["neg", "neutral", "pos"])
    assert describe_classes(train, validation=validation)[1:] == [
        "warning: 1 of 3 classes has no validation text ('neutral'): no validation score tells how it does; give it "
        "more texts, or a --validation-file that holds some"]
    assert describe_classes(train, validation=TextDataset(["b"] * 3, [0, 1, 2], ["neg", "neutral", "pos"])) == [
        "training texts per class: neg: 4, neutral: 3, pos: 3"]
    assert len(describe_classes(train)) == 1  # (a refit validates on nothing: no warning of what it does not do)


def test_a_text_column_given_as_labels_is_named_so_and_its_thousands_of_classes_are_not_all_listed():
    # --label-column title on AG News printed all 7,569 titles with their counts, one line of 330,000 characters.
    from attnclf.data.base import TextDataset
    from attnclf.training.run_data import describe_classes

    names = [f"title {i:02d}" for i in range(25)]
    counts = describe_classes(TextDataset(["a"] * 50, [i % 25 for i in range(50)], names))[0]
    assert counts == ("training texts per class: " + ", ".join(f"{name}: 2" for name in names[:20]) + ", ... 5 more")
    twenty = describe_classes(TextDataset(["a"] * 40, [i % 20 for i in range(40)], names[:20]))[0]
    assert twenty.endswith("title 19: 2")  # (20 Newsgroups' classes are all named)
    # A class a text says what went wrong; a few rare classes among common ones do not suggest it.
    titles = describe_classes(TextDataset(["a"] * 25, list(range(25)), names))[1]
    assert titles.endswith("or merge rare classes: most training texts are a class of their own; is the label column "
                           "a column of texts?"), titles
    rare = describe_classes(TextDataset(["a"] * 25, [0] * 20 + [1, 2, 3, 4, 5], names[:6]))[1]
    assert rare.startswith("warning: 5 of 6 classes have a single training text") and "column" not in rare, rare


def test_the_validation_texts_are_read_once_for_the_classes_they_hold_not_once_a_class(monkeypatch):
    # describe_classes ran over every validation label once per class (and for multi-label runs, which never warn of
    # it): 5.6 s on 1,000 labels and 20,000 validation texts of 5 labels each, before the first epoch.
    from attnclf.data.base import TextDataset
    from attnclf.training import run_data

    read = []
    validated = run_data._validated
    monkeypatch.setattr(run_data, "_validated", lambda validation: read.append(1) or validated(validation))
    names = [f"c{i}" for i in range(50)]
    for multi_label, labels in ((False, list(range(50)) * 2), (True, [[i] for i in range(50)] * 2)):
        read.clear()
        train = TextDataset(["a"] * 100, labels, names, multi_label=multi_label)
        run_data.describe_classes(train, validation=TextDataset(["b"], labels[:1], names, multi_label=multi_label))
        assert len(read) == (0 if multi_label else 1), multi_label  # (a multi-label run never warns of them)


def test_the_class_warnings_agree_with_how_many_classes_they_count():
    from attnclf.data.base import TextDataset
    from attnclf.training.run_data import describe_classes

    one_each = describe_classes(TextDataset(["a", "b", "c", "d"], [0, 0, 0, 2], ["many", "none", "one"]))
    assert one_each[1] == ("warning: 1 of 3 classes has no training text, its only texts held out to validate or "
                           "left out of a --max-train-examples sample ('none'); give it more texts, or merge rare "
                           "classes")
    assert one_each[2] == ("warning: 1 of 3 classes has a single training text ('one'): a model learns little from "
                           "one example; give it more texts, or merge rare classes")
    two_each = describe_classes(TextDataset(["a", "b", "c", "d"], [0, 0, 2, 3], ["many", "x", "y", "z"]))
    assert two_each[1].startswith("warning: 1 of 4 classes has no training text")
    assert two_each[2].startswith("warning: 2 of 4 classes have a single training text ('y', 'z')")


def stop_after_checkpointing_step(patch, step: int, epoch: int) -> list:
    """Make training stop as Ctrl-C would once its checkpoint of ``step`` within ``epoch`` is written; the list
    fills with every checkpoint's (epoch, step), step None for an epoch's end."""
    from attnclf.training.trainer import Trainer

    save, saved = Trainer._save_checkpoint, []

    def stopped_after(self, optimizer, schedule, state, *rest, **more):
        save(self, optimizer, schedule, state, *rest, **more)
        within = state.get("step")
        saved.append((state["epoch"] + 1 if within else state["epoch"], within))
        if saved[-1] == (epoch, step):
            raise KeyboardInterrupt

    patch.setattr(Trainer, "_save_checkpoint", stopped_after)
    return saved


@pytest.mark.parametrize("epoch, step, train", [(1, 4, {}), (2, 7, {"ema_decay": 0.9})])
def test_a_run_interrupted_within_an_epoch_resumes_from_the_next_step_to_the_same_bytes(epoch, step, train, tmp_path,
                                                                                       monkeypatch):
    """A 20-minute epoch stopped before its end kept nothing: a checkpoint every --checkpoint-minutes within it holds
    the step, the epoch's running totals, generators, optimiser, schedule and average, and resumes to the very
    weights (the same bytes) and history of a run never stopped. (A tiny interval: one after every step.)"""
    from attnclf.rundir import file_sha256
    from attnclf.training.settings import resume_settings, resume_start

    straight = train_run(tiny_settings(tmp_path / "straight", **train), progress=False)
    with monkeypatch.context() as patch:
        saved = stop_after_checkpointing_step(patch, step, epoch)
        with pytest.raises(KeyboardInterrupt):
            train_run(tiny_settings(tmp_path / "resumed", checkpoint_minutes=1e-9, **train), progress=False)
    assert saved[:step] == [(1, k) for k in range(1, step + 1)]  # (each step's, within the epoch)
    state = json.loads((tmp_path / "resumed" / "checkpoint" / "state.json").read_text())
    steps = state["epoch_steps"]
    assert (state["epoch"], state["step"]) == (epoch - 1, step) and steps > step
    assert resume_start(tmp_path / "resumed") == f"continues from step {step + 1}"
    resumed = train_run(resume_settings(tmp_path / "resumed"), resume=True, progress=False)

    def without_times(history):
        return [{k: v for k, v in record.items() if k != "seconds"} for record in history]

    assert without_times(resumed.history) == without_times(straight.history)
    assert file_sha256(resumed.run_dir / "model.safetensors") == file_sha256(straight.run_dir / "model.safetensors")
    assert sorted(p.name for p in (tmp_path / "resumed" / "checkpoint").iterdir()) == ["epoch-2.safetensors",
                                                                                      "state.json"]


@pytest.mark.parametrize("mode", ["windows", "token cache", "token cache deleted"])
def test_a_windowed_or_cached_run_interrupted_within_an_epoch_resumes_to_the_same_bytes(mode, tmp_path, monkeypatch):
    """Long documents (--windows) and corpora larger than memory (--token-cache) train in epochs long enough to need
    checkpoints within them most: stopped after step 3 of epoch 2 and resumed, each ends with the bytes of a run
    never stopped, a cached one too when its caches were deleted meanwhile (built again on the resume)."""
    import shutil

    from attnclf.rundir import file_sha256
    from attnclf.text.windows import WindowConfig
    from attnclf.training.settings import resume_settings, resume_start

    def settings(output):
        plain = tiny_settings(output, checkpoint_minutes=1e-9)
        if mode == "windows":  # (8-token windows: the demo's reviews run to several)
            return replace(plain, tokenizer=TokenizerConfig(min_frequency=1, max_len=8),
                           windows=WindowConfig(stride=6, max_windows=4))
        return replace(plain, data=replace(plain.data, token_cache=True, token_cache_dir=str(tmp_path / "cache")))

    straight = train_run(replace(settings(tmp_path / "straight"), train=replace(
        settings(tmp_path / "straight").train, checkpoint_minutes=0)), progress=False)
    with monkeypatch.context() as patch:
        saved = stop_after_checkpointing_step(patch, 3, 2)
        with pytest.raises(KeyboardInterrupt):
            train_run(settings(tmp_path / "resumed"), progress=False)
    assert saved[-1] == (2, 3)
    if mode == "token cache deleted":
        shutil.rmtree(tmp_path / "cache")
    assert resume_start(tmp_path / "resumed") == "continues from step 4"  # (not from the start: as fast as it can)
    resumed_settings = resume_settings(tmp_path / "resumed")
    assert (resumed_settings.windows is not None, resumed_settings.data.token_cache) == (mode == "windows",
                                                                                         mode != "windows")
    resumed = train_run(resumed_settings, resume=True, progress=False)
    assert [record["train_loss"] for record in resumed.history] == [record["train_loss"]
                                                                   for record in straight.history]
    assert file_sha256(resumed.run_dir / "model.safetensors") == file_sha256(straight.run_dir / "model.safetensors")
    if mode != "windows":
        assert list((tmp_path / "cache").glob("*/meta.json"))  # (read from the caches, built again where deleted)


def test_without_a_terminal_training_prints_progress_within_an_epoch_and_checkpoints_every_interval(tmp_path,
                                                                                                  monkeypatch, capsys):
    """`nohup attnclf train ... > log 2>&1` saw nothing within an epoch (the bar draws at a terminal only): a plain
    line every PROGRESS_LINE_SECONDS says where it is. By a fake clock, each step takes 100 s."""
    import attnclf.training.trainer as trainer
    from attnclf.training import pace

    now = [0.0]
    summed = trainer._WeightedLoss.summed

    def a_step_of_100_seconds(self, *args):
        now[0] += 100.0
        return summed(self, *args)

    monkeypatch.setattr(pace, "clock", lambda: now[0])
    monkeypatch.setattr(trainer._WeightedLoss, "summed", a_step_of_100_seconds)
    assert pace.PROGRESS_LINE_SECONDS == 120
    saved = stop_after_checkpointing_step(monkeypatch, step=-1, epoch=0)  # (never stops)
    train_run(tiny_settings(tmp_path / "run", epochs=1, checkpoint_minutes=5), progress=True)
    steps = -(-json.loads((tmp_path / "run" / "config.json").read_text())["data"]["train_examples"] // 32)
    assert saved == [(1, k) for k in range(3, steps, 3)] + [(1, None)]  # every 300 s, then the epoch's end
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("epoch 1: step")]
    assert [line.split(" | ")[0] for line in lines] == [f"epoch 1: step {k} of {steps} ({k / steps:.0%})"
                                                        for k in range(2, steps, 2)]
    remaining = (steps - 2) * 100
    assert lines[0].split(" | ")[1:3] == ["0.3 examples/s", f"3m 20s elapsed, ETA {remaining // 60}m "
                                                            f"{remaining % 60:02d}s"]
    assert re.fullmatch(r"loss \d\.\d{4}", lines[0].split(" | ")[3])
    # At a terminal the bar says it, and with the interval 0 nothing is written within an epoch.
    monkeypatch.setattr(pace, "stderr_is_terminal", lambda: True)
    saved.clear()
    train_run(tiny_settings(tmp_path / "other", epochs=1, checkpoint_minutes=0), progress=True)
    assert saved == [(1, None)]
    assert "epoch 1: step" not in capsys.readouterr().err


def test_the_checkpoint_interval_is_refused_below_zero_by_its_flag():
    with pytest.raises(AttnclfError, match=r"^--checkpoint-minutes must be at least 0, got -1.0$"):
        TrainConfig(checkpoint_minutes=-1, named=lambda field: "--" + field.replace("_", "-"))


def test_continuing_an_unfinished_member_takes_the_commands_checkpoint_interval(tmp_path, monkeypatch):
    # `train --seeds --resume --checkpoint-minutes 0` continued each unfinished member at the interval it began with:
    # the flag, which --help says may change on a resume, was read by a single run's --resume alone.
    from attnclf.training import run

    member = tiny_settings(tmp_path / "seed-0", checkpoint_minutes=10)
    continued = []
    monkeypatch.setattr(run, "is_resumable", lambda output: True)
    monkeypatch.setattr(run, "resume_settings", lambda output, **kwargs: tiny_settings(output, checkpoint_minutes=10))
    monkeypatch.setattr(run, "train_run", lambda settings, **kwargs: continued.append(settings))
    run.train_or_continue(replace(member, train=replace(member.train, checkpoint_minutes=0.0)), resume=True)
    assert continued[0].train.checkpoint_minutes == 0.0


def test_a_split_seed_beside_a_validation_file_is_refused_from_python_where_it_would_seed_nothing(tmp_path):
    # Every run validates on the file, so the seed chose nothing; the CLI refused it, Python callers trained with it.
    data = DataSettings(train_file="t.csv", validation_file="v.csv", split_seed=3)
    message = ("split_seed seeds the validation split carved from the training file (and a max_train_examples "
               "sample); with validation_file every run validates on that file: drop split_seed")
    with pytest.raises(AttnclfError, match=f"^{re.escape(message)}$"):
        RunSettings(data=data).check()
    with pytest.raises(AttnclfError, match=f"^{re.escape(message)}$"):
        train_run(RunSettings(data=data, model="boe", output=str(tmp_path / "run")))
    assert not (tmp_path / "run").exists()
    # With a sample to draw it seeds that; and compare's and ablate's data, whose cells are capped samples, keep it.
    RunSettings(data=replace(data, max_train_examples=4)).check()
    data.check()


def test_check_resume_refuses_flags_that_do_not_describe_the_run_and_notes_an_earlier_file_recipe():
    # What `train --resume` may be given is decided by the library, from the typed option names and the settings the
    # command builds: Python callers (and the command line, naming flags) meet the same refusals and note.
    from attnclf.training.settings import check_resume_command

    run = RunSettings(output="runs/demo", device="cpu")
    def flag(field): return f"--{field.replace('_', '-')}"
    def never(): raise AssertionError("built only where the flags may describe the run")

    notes = []
    check_resume_command(run, {"output", "resume", "epochs"}, never, lambda built: [], named=flag, log=notes.append)
    with pytest.raises(AttnclfError, match=r"^--resume with --lr takes the whole command that started runs/demo, "
                                           r"its --dataset or --train-file too"):
        check_resume_command(run, {"output", "resume", "lr"}, never, lambda built: [], named=flag)
    other = replace(run, train=TrainConfig(lr=0.5))
    with pytest.raises(AttnclfError, match=r"^runs/demo trained with train.lr = 0.001, this command gives 0.5"):
        check_resume_command(run, {"output", "resume", "lr", "dataset"}, lambda: other, lambda built: [], named=flag)
    wider = replace(run, model_config={"d_model": 64})
    check_resume_command(replace(run, model_config={"d_model": 32}), {"output", "resume", "dataset"}, lambda: wider,
                 lambda built: [replace(built, model_config={"d_model": 32})], named=flag, log=notes.append)
    assert notes == ["note: runs/demo began under an earlier file recipe: this command now builds d_model=64 (the run: "
                     "32); the run keeps its own settings"]


def test_one_check_refuses_a_resumed_run_or_fold_trained_otherwise_naming_the_remedy_given():
    # train --resume and suspects --resume both refuse a run trained with other settings than the command gives,
    # naming the first that differs: one function, each command its own remedy.
    from attnclf.training.settings import check_same_settings

    run = RunSettings(output="runs/demo/fold-1")
    assert check_same_settings(run, replace(run, train=TrainConfig(epochs=7)), "remedy",
                               ignore={"train.epochs"}) is None
    with pytest.raises(AttnclfError, match=r"^runs/demo/fold-1 trained with train.lr = 0.001, this command gives "
                                           r"0.5: --resume continues the folds as they trained$"):
        check_same_settings(run, replace(run, train=TrainConfig(lr=0.5)), "--resume continues the folds as they "
                                                                          "trained")
