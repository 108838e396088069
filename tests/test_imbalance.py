"""Imbalanced classes: a run whose kept weights answer one class says what to try, and two corrections of the imbalance
at once are warned of."""

import json
import random

import numpy as np
import pytest

from attnclf.cli import main
from attnclf.errors import AttnclfWarning
from attnclf.sklearn import AttentionTextClassifier
from attnclf.text.tokenizer import TokenizerConfig
from attnclf.training.run import train_run
from attnclf.training.settings import DataSettings, RunSettings
from attnclf.training.trainer import TrainConfig


def cueless_rows(n: int, seed: int) -> list[dict]:
    """95 'common' texts in 100, the rest 'rare', of words that say nothing of their class: the best a model can do
    is answer 'common' every time, which a run monitoring its loss keeps."""
    rng = random.Random(seed)
    return [{"text": " ".join(f"w{rng.randrange(20)}" for _ in range(6)), "label": "rare" if i % 20 == 0 else "common"}
            for i in range(n)]


def write_rows(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


SMALL = ["--model", "boe", "--set", "embed_dim=8", "--min-frequency", "1", "--max-len", "8", "--lr", "0.01",
         "--batch-size", "32", "--patience", "0", "--threads", "1", "--device", "cpu", "--no-report"]


def settings(tmp_path, output="run", epochs=3, **train) -> RunSettings:
    return RunSettings(
        data=DataSettings(train_file=write_rows(tmp_path / "train.jsonl", cueless_rows(300, seed=1)),
                          test_file=write_rows(tmp_path / "test.jsonl", cueless_rows(100, seed=2))),
        tokenizer=TokenizerConfig(min_frequency=1, max_len=8), model="boe", model_config={"embed_dim": 8},
        train=TrainConfig(epochs=epochs, batch_size=32, lr=1e-2, patience=0, checkpoint_seconds=0, **train),
        output=str(tmp_path / output), device="cpu", report=False)


def test_a_run_whose_kept_weights_answer_the_majority_class_says_what_to_try_and_records_it(tmp_path, capsys):
    argv = ["train", "--train-file", write_rows(tmp_path / "train.jsonl", cueless_rows(300, seed=1)),
            "--test-file", write_rows(tmp_path / "test.jsonl", cueless_rows(100, seed=2)), "--epochs", "3",
            "--monitor", "loss", "--output", str(tmp_path / "run"), "--quiet", *SMALL]
    assert main(argv) == 0
    err = capsys.readouterr().err
    note = next(line for line in err.splitlines() if "weights kept predict" in line)
    assert note == ("note: the weights kept predict 'common' for all 30 validation texts (97% of them are 'common'): "
                    "the classes are imbalanced; try --class-weight balanced, --sampler balanced, or --monitor "
                    "average_precision / macro_f1"), err
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())["data"]["warnings"]
    assert note.removeprefix("note: ") in recorded  # (the report lists them)


def test_the_note_suggests_only_what_the_run_did_not_use():
    from attnclf.training.trainer import imbalance_remedies, one_class_note

    history = [{"epoch": 1, "val_macro_f1": 0.48, "val_predicted_only": 0}]
    labels, names = np.array([0] * 19 + [1]), ["neg", "pos"]
    assert imbalance_remedies(TrainConfig()) == ["--class-weight balanced", "--sampler balanced",
                                                 "--monitor average_precision"]
    # One correction already in use: the other is not offered (together they correct the imbalance twice)
    assert imbalance_remedies(TrainConfig(sampler="balanced", monitor="average_precision")) == ["--monitor macro_f1"]
    assert imbalance_remedies(TrainConfig(class_weights={"pos": 5.0}, monitor="loss")) == [
        "--monitor average_precision / macro_f1"]
    note = one_class_note(history, "macro_f1", labels, names, ["--monitor average_precision"])
    assert note == ("the weights kept predict 'neg' for all 20 validation texts (95% of them are 'neg'): the classes "
                    "are imbalanced; try --monitor average_precision")
    # Nothing to say: a later epoch kept that answers both classes, validation texts of one class
    assert one_class_note([*history, {"epoch": 2, "val_macro_f1": 0.7}], "macro_f1", labels, names, []) is None
    assert one_class_note(history, "macro_f1", np.zeros(20, dtype=int), names, []) is None
    # Near-even classes, or the rarer one answered: no imbalance to blame (a model that learned nothing yet)
    assert one_class_note(history, "macro_f1", np.array([0] * 11 + [1] * 9), names, ["--sampler balanced"]) is None
    assert one_class_note(history, "macro_f1", np.array([0] + [1] * 19), names, ["--sampler balanced"]) is None


def test_a_resumed_or_retrained_run_records_the_note_once(tmp_path, capsys):
    run = settings(tmp_path, monitor="loss")
    train_run(run, progress=False)
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())["data"]["warnings"]
    assert [line for line in recorded if "weights kept predict" in line] != []
    run.train = TrainConfig(**{**run.train.to_dict(), "epochs": 4})
    train_run(run, resume=True, progress=False)
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())["data"]["warnings"]
    assert len([line for line in recorded if "weights kept predict" in line]) == 1, recorded


def test_fit_warns_when_the_kept_weights_answer_one_class():
    rows = cueless_rows(300, seed=1)
    texts, labels = [r["text"] for r in rows], [r["label"] for r in rows]
    clf = AttentionTextClassifier("boe", epochs=2, lr=1e-2, max_len=8, min_frequency=1, threads=1, device="cpu",
                                  model_config={"embed_dim": 8})
    with pytest.warns(AttnclfWarning, match=r"the weights kept predict 'common' for all 30 validation texts .*: the "
                                            r"classes are imbalanced; try class_weight='balanced'$"):
        clf.fit(texts, labels)
    # Validated on its training texts, it says so; given sample weights, which may balance the classes already, it
    # suggests no class weights on top of them.
    clf.set_params(validation_fraction=0)
    with pytest.warns(AttnclfWarning, match=r"for all 300 training texts \(validation_fraction=0 validates on them\) "
                                            r".*: the classes are imbalanced$"):
        clf.fit(texts, labels, sample_weight=np.ones(len(texts)))


def test_both_corrections_at_once_are_warned_of_as_the_run_starts(tmp_path, capsys):
    train_run(settings(tmp_path, sampler="balanced", class_weights="balanced", epochs=1), progress=False)
    err = capsys.readouterr().err
    first = next(line for line in err.splitlines() if "twice" in line)
    assert first == ("warning: --sampler balanced and --class-weight balanced each correct the class imbalance; "
                     "together they correct it twice (the rare classes drawn more often and weighed up as well), "
                     "which over-corrects: give one of them"), err
    assert first.removeprefix("warning: ") in json.loads((tmp_path / "run" / "config.json").read_text())["data"][
        "warnings"]
    capsys.readouterr()
    train_run(settings(tmp_path, "alone", sampler="balanced", epochs=1), progress=False)  # (one alone: nothing said)
    assert "twice" not in capsys.readouterr().err
