"""Ensembles: runs of one task averaging their probabilities, from Python and `attnclf evaluate`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from attnclf.classifier import Classifier
from attnclf.cli import main
from attnclf.ensemble import Ensemble
from attnclf.errors import AttnclfError, shown
from attnclf.prediction import LabelSetPrediction

TEXTS = ["the plot was not good", "boring start but a brilliant ending", "a fine film", "dull"]


@pytest.fixture(scope="module")
def second_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "demo-boe"
    assert main(["train", "--dataset", "demo", "--model", "boe", "--epochs", "2", "--max-train-examples", "600",
                 "--threads", "1", "--output", str(out), "--quiet", "--no-report"]) == 0
    return out


def test_ensemble_averages_its_members(demo_run, second_run):
    first, second = Classifier.load(demo_run, device="cpu"), Classifier.load(second_run, device="cpu")
    ensemble = Ensemble([first, second])
    expected = (first.predict_proba(TEXTS) + second.predict_proba(TEXTS)) / 2
    assert np.allclose(ensemble.predict_proba(TEXTS), expected, atol=1e-6)
    assert not np.allclose(first.predict_proba(TEXTS), second.predict_proba(TEXTS))  # the mean is not a copy
    predictions = ensemble.predict(TEXTS)
    assert [p.label for p in predictions] == [ensemble.label_names[i] for i in expected.argmax(axis=1)]
    assert [p.confidence for p in predictions] == pytest.approx(expected.max(axis=1).tolist())


def test_an_ensemble_reads_texts_given_as_a_generator_once_for_every_member(demo_run, second_run):
    ensemble = Ensemble([Classifier.load(demo_run, device="cpu"), Classifier.load(second_run, device="cpu")])
    # (each member read the texts anew: the first used a generator up, and numpy refused the others' empty answers)
    assert np.array_equal(ensemble.predict_proba(text for text in TEXTS), ensemble.predict_proba(TEXTS))
    assert ensemble.predict(text for text in TEXTS) == ensemble.predict(TEXTS)



def test_a_classifier_s_scores_are_what_its_predictions_and_an_ensemble_read(demo_run):
    # (Ensemble averages its members through this public method, not through a private one of Classifier's)
    clf = Classifier.load(demo_run, device="cpu")
    probabilities, ids, attention = clf.scores(TEXTS)
    assert np.array_equal(probabilities, clf.predict_proba(TEXTS))
    assert np.array_equal(clf.scores(TEXTS, logits=True)[0], clf.logits(TEXTS))
    assert ids == [clf.tokenizer.encode([text])[0] for text in TEXTS]
    assert [a.tolist() for a in attention] == [pytest.approx(p.attention) for p in clf.predict(TEXTS)]

def test_an_ensemble_refuses_explanations_naming_a_member_to_explain(demo_run, second_run):
    first, second = Classifier.load(demo_run, device="cpu"), Classifier.load(second_run, device="cpu")
    with pytest.raises(AttnclfError, match=r"use one member, such as ensemble\.members\[0\]$"):
        Ensemble([first, second]).explain(TEXTS)
    with pytest.raises(AttnclfError, match=f"use one member, such as {second_run}$"):
        Ensemble.load([second_run, demo_run], device="cpu").explain(TEXTS)


def test_an_ensemble_counts_the_unknown_tokens_of_the_member_that_knows_the_fewest(demo_run, second_run):
    first, second = Classifier.load(demo_run, device="cpu"), Classifier.load(second_run, device="cpu")
    text = ["the plot was awesome and amazing"]
    assert (first.predict(text)[0].unknown_tokens, first.predict(text)[0].tokens_read) == (3, 6)
    # The second reads "the plot was <unk>": a quarter unknown, where the first reads half.
    second.tokenizer.config.max_len, second.tokenizer.config.truncation = 4, "head"
    assert (second.predict(text)[0].unknown_tokens, second.predict(text)[0].tokens_read) == (1, 4)
    for members in ([first, second], [second, first]):
        prediction = Ensemble(members).predict(text)[0]
        assert (prediction.unknown_tokens, prediction.tokens_read, prediction.tokens) == (3, 6, [])
        # An empty text, which no member reads a token of: no share of unknown tokens to compare.
        empty = Ensemble(members).predict([""])[0]
        assert (empty.unknown_tokens, empty.tokens_read) == (0, 0)


def test_a_loaded_model_and_its_predictions_show_briefly_in_a_notebook(demo_run, second_run):
    # A notebook echoes the last value: "<attnclf.classifier.Classifier object at 0x7f...>" said nothing of the model,
    # and a prediction's repr spelt out every token and attention weight (of a 512-token review, 14,000 characters).
    clf = Classifier.load(demo_run, device="cpu")
    assert repr(clf) == "Classifier(model='self-attn', labels=['negative', 'positive'], device='cpu')"
    assert repr(Ensemble.load([demo_run, second_run], device="cpu")) == \
        "Ensemble(members=2, labels=['negative', 'positive'])"
    prediction = clf.predict(["the film was good " * 200])[0]
    assert len(prediction.tokens) == prediction.tokens_read > 50 and prediction.attention is not None
    assert repr(prediction) == (f"Prediction(label={prediction.label!r}, confidence={prediction.confidence!r}, "
                                f"probabilities={prediction.probabilities!r}, unknown_tokens=0, tokens_read="
                                f"{prediction.tokens_read})")
    label_set = LabelSetPrediction.from_scores(np.array([0.6, 0.1]), np.array([0.5, 0.5]), ["a", "b"], ["w"] * 500,
                                               np.full(500, 1 / 500), (0, 500))
    assert repr(label_set) == ("LabelSetPrediction(labels=['a'], probabilities={'a': 0.6, 'b': 0.1}, unknown_tokens=0, "
                               "tokens_read=500)")


def test_ensemble_refuses_runs_with_other_labels(demo_run):
    member = Classifier.load(demo_run, device="cpu")
    other = Classifier(member.model, member.tokenizer, list(reversed(member.label_names)), member.device)
    with pytest.raises(AttnclfError, match="must share their labels"):
        Ensemble([member, other], ["a", "b"])


def test_evaluate_scores_several_runs_as_one(demo_run, second_run, capsys):
    scores = {}
    for name, runs in {"first": [demo_run], "second": [second_run], "both": [demo_run, second_run]}.items():
        assert main(["evaluate", *map(str, runs), "--json", "--device", "cpu"]) == 0
        scores[name] = json.loads(capsys.readouterr().out)
    from attnclf.training.run_data import run_test_data

    ensemble = Ensemble.load([demo_run, second_run], device="cpu")
    test = run_test_data(ensemble.config, ensemble.label_names)
    predicted = ensemble.predict_proba(test.texts).argmax(axis=1)
    assert scores["both"]["accuracy"] == pytest.approx(float((predicted == np.asarray(test.labels)).mean()))
    assert scores["both"]["roc_auc"] not in (scores["first"]["roc_auc"], scores["second"]["roc_auc"])


def test_ensemble_refuses_runs_trained_on_other_data(demo_run):
    member = Classifier.load(demo_run, device="cpu")
    config = json.loads(json.dumps(member.config))
    config["settings"]["data"]["max_train_examples"] = 300
    other = Classifier(member.model, member.tokenizer, member.label_names, member.device, config)
    with pytest.raises(AttnclfError, match="must share their data"):
        Ensemble([member, other], ["a", "b"])


def test_runs_trained_from_files_of_the_same_bytes_under_other_names_are_one_ensemble(demo_run, tmp_path):
    # Two seeds trained from copies of one file (a data folder moved, a file renamed) were refused as "trained on
    # other data"; the bytes decide, so a copy that differs by one byte still is.
    member = Classifier.load(demo_run, device="cpu")
    first, copy, edited = (tmp_path / name for name in ("train.csv", "copy.csv", "edited.csv"))
    first.write_text("text,label\ngood,pos\nbad,neg\n")
    copy.write_bytes(first.read_bytes())
    edited.write_text("text,label\ngood,pos\nbad,neg\nfine,pos\n")

    def trained_from(path: Path) -> Classifier:
        config = json.loads(json.dumps(member.config))
        config["settings"]["data"] = {"train_file": str(path)}
        return Classifier(member.model, member.tokenizer, member.label_names, member.device, config)

    assert len(Ensemble([trained_from(first), trained_from(copy)], ["a", "b"]).members) == 2
    with pytest.raises(AttnclfError, match=r"b was trained on other data than a \(train_file: "):
        Ensemble([trained_from(first), trained_from(edited)], ["a", "b"])
    copy.unlink()  # (gone: its bytes cannot be compared, so its name decides, as before)
    with pytest.raises(AttnclfError, match="must share their data"):
        Ensemble([trained_from(first), trained_from(copy)], ["a", "b"])


def test_evaluating_an_ensemble_needs_held_out_data(tmp_path, capsys):
    from attnclf.data.generated import synthetic

    data = synthetic().train
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"text": t, "label": data.label_names[y]}) + "\n"
                             for t, y in list(zip(data.texts, data.labels))[:300]))
    runs = []
    for seed in (0, 1):  # each seed holds out a different validation split
        runs.append(str(tmp_path / f"seed{seed}"))
        assert main(["train", "--train-file", str(train), "--model", "boe", "--epochs", "1", "--seed", str(seed),
                     "--threads", "1", "--output", runs[-1], "--quiet", "--no-report"]) == 0
    assert main(["evaluate", *runs, "--device", "cpu"]) == 2
    assert capsys.readouterr().err.endswith("has no test split; give held-out data with --test-file or --dataset, or "
                                           "score the texts the runs held out with --split validation (runs sharing "
                                           "--split-seed)\n")
    assert main(["evaluate", *runs, "--test-file", str(train), "--device", "cpu", "--json"]) == 0


def test_train_seeds_builds_an_ensemble_folder_that_evaluate_and_load_read(tmp_path, capsys):
    out = tmp_path / "ens"
    flags = ["train", "--dataset", "demo", "--max-train-examples", "300", "--epochs", "1", "--set", "d_model=16",
             "--set", "layers=1", "--output", str(out), "--quiet", "--no-report", "--seeds", "3", "4"]
    assert main(flags) == 0
    assert "ensemble of 2 runs" in capsys.readouterr().out
    saved = json.loads((out / "ensemble.json").read_text())
    assert saved["members"] == ["seed-3", "seed-4"]
    assert "validation_metrics" not in saved  # each seed held out its own texts
    assert [json.loads((out / m / "config.json").read_text())["settings"]["train"]["seed"] for m in saved["members"]] \
        == [3, 4]
    ensemble = Ensemble.load([out], device="cpu")
    assert len(ensemble.members) == 2
    assert len(Ensemble.load(str(out), device="cpu").members) == 2  # one folder given as a string
    assert main(["evaluate", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == pytest.approx(saved["metrics"]["accuracy"])
    assert main(["predict", str(out), "a wonderful film"]) == 0
    predicted = json.loads(capsys.readouterr().out)
    assert predicted["probabilities"] == pytest.approx(dict(zip(ensemble.label_names,
                                                                ensemble.predict_proba(["a wonderful film"])[0])))
    assert main(["predict", str(out), "a wonderful film", "--attention"]) != 0
    assert "is an ensemble" in capsys.readouterr().err

    # --resume keeps finished members (their weights are not written again); --overwrite retrains them.
    written = (out / "seed-3" / "model.safetensors").stat().st_mtime_ns
    (out / "ensemble.json").unlink()
    assert main(flags + ["--resume"]) == 0
    assert (out / "seed-3" / "model.safetensors").stat().st_mtime_ns == written
    assert json.loads((out / "ensemble.json").read_text())["metrics"]["accuracy"] == saved["metrics"]["accuracy"]
    # A member --resume adds trains as the others did: other settings are refused before anything trains.
    capsys.readouterr()
    assert main(flags + ["--resume", "--seeds", "3", "4", "5", "--lr", "0.01"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"attnclf: error: {out / 'seed-3'} trained with train.lr = 0.002, this command gives 0.01: --resume adds "
        f"and continues members as the others trained; give their flags, or train a new --output")
    assert not (out / "seed-5").exists()
    assert main(flags + ["--overwrite"]) == 0
    assert (out / "seed-3" / "model.safetensors").stat().st_mtime_ns != written
    # An ensemble that replaces another keeps none of its members: a later --resume would count them as its own.
    assert main(flags + ["--overwrite", "--seeds", "4", "5"]) == 0
    assert sorted(member.name for member in out.iterdir() if member.is_dir()) == ["seed-4", "seed-5"]
    assert main(flags + ["--resume", "--seeds", "4", "5"]) == 0
    # A member's refit lands beside the members (seed-4-refit) and is none of them: members are seed-<number>.
    assert main(["refit", str(out / "seed-4"), "--threads", "1", "--quiet"]) == 0
    assert main(flags + ["--resume", "--seeds", "4", "5", "6"]) == 0
    assert json.loads((out / "ensemble.json").read_text())["members"] == ["seed-4", "seed-5", "seed-6"]
    assert (out / "seed-4-refit" / "model.safetensors").is_file()


def tiny_seeds(output) -> list[str]:
    """`train --seeds 0 1` of two tiny members into ``output``, without a report."""
    return ["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", "1", "--set", "d_model=16",
            "--set", "layers=1", "--output", str(output), "--quiet", "--no-report", "--threads", "1", "--seeds", "0",
            "1"]


@pytest.fixture(scope="module")
def finished_seeds(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("seeds") / "ens"
    assert main(tiny_seeds(out)) == 0
    return out


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.pop("accuracy"), "metrics.json: accuracy is missing"),
    (lambda m: m.update(multi_label="no"), "metrics.json: multi_label is 'no', not true or false"),
    (lambda m: m.update(split="train"), "metrics.json: split is 'train', not one of None, test, validation"),
    ("truncated", "metrics.json: not valid JSON"),
], ids=["no-accuracy", "multi-label-text", "split-train", "truncated"])
def test_resuming_seeds_over_a_finished_member_whose_metrics_were_mangled_is_one_line(finished_seeds, tmp_path, capsys,
                                                                                      mangle, edit, message):
    # `train --seeds --resume` keeps a finished member as its result, metrics.json and all: one mangled there was
    # kept as if whole (or was an AttributeError), to fail later in whatever read it.
    out = tmp_path / "ens"
    shutil.copytree(finished_seeds, out)
    mangle(out / "seed-0" / "metrics.json", edit)
    capsys.readouterr()
    assert main(tiny_seeds(out) + ["--resume"]) == 2
    *_, error = capsys.readouterr().err.splitlines()  # (after "finished, kept", which it says however --quiet)
    assert error.startswith(f"attnclf: error: {out / 'seed-0' / 'metrics.json'}: ") and message in error, error


def test_members_a_resume_adds_train_for_the_epochs_the_others_planned(tmp_path, capsys):
    """Not the recipe's default: without --epochs a resumed ensemble's new members train as the others did."""
    out = tmp_path / "ens"
    flags = ["train", "--dataset", "demo", "--max-train-examples", "200", "--set", "d_model=16", "--set", "layers=1",
             "--output", str(out), "--quiet", "--no-report", "--threads", "1"]
    assert main(flags + ["--epochs", "1", "--seeds", "0", "1"]) == 0
    capsys.readouterr()  # (the warnings about the demo's data: its short texts repeat)
    # Only --output, as a single run resumes: the members' data is not in the command, and the error says so
    # (it had said "--seeds needs held-out data ...: give --test-file", which the members had).
    assert main(["train", "--output", str(out), "--resume", "--seeds", "0", "1", "2", "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == (f"attnclf: error: --resume --seeds takes the whole command that trained "
                                               f"the members in {out}, its --dataset or --train-file too, --resume added")
    assert not (out / "seed-2").exists()
    assert main(flags + ["--resume", "--seeds", "0", "1", "2"]) == 0
    planned = [json.loads((out / f"seed-{seed}" / "config.json").read_text())["settings"]["train"]["epochs"]
               for seed in (0, 1, 2)]
    assert planned == [1, 1, 1]


def test_train_seeds_prints_each_distinct_data_warning_once(tmp_path, capsys):
    # Each member printed its data's warnings: the demo's test texts seen in training, once per seed.
    out = tmp_path / "ens"
    assert main(["train", "--dataset", "demo", "--max-train-examples", "200", "--model", "boe", "--epochs", "1",
                 "--output", str(out), "--quiet", "--no-report", "--threads", "1", "--seeds", "0", "1", "2"]) == 0
    err = capsys.readouterr().err
    printed = [line for line in err.splitlines() if line.startswith("warning:")]
    recorded = [f"warning: {line}" for seed in (0, 1, 2)
                for line in json.loads((out / f"seed-{seed}" / "config.json").read_text())["data"]["warnings"]]
    assert len(recorded) > len(set(recorded)) > 1  # (seeds 0 and 1 warn alike, seed 2 otherwise)
    assert sorted(printed) == sorted(set(recorded))
    # Printed once, each says afterwards which members gave it (the line alone read as the first member's).
    by_seed = {seed: json.loads((out / f"seed-{seed}" / "config.json").read_text())["data"]["warnings"]
               for seed in (0, 1, 2)}
    notes = [line for line in err.splitlines() if line.startswith("note: the warning ")]
    assert sorted(notes) == sorted(_who_warned(warning, [f"seed-{seed}" for seed, given in by_seed.items()
                                                         if warning in given], 3)
                                   for warning in {line for given in by_seed.values() for line in given})
    # A refit of the folder refits every member on the same data: each of its warnings is printed once too.
    assert main(["refit", str(out), "--quiet", "--no-report", "--threads", "1"]) == 0
    printed = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert printed and len(printed) == len(set(printed))


def _who_warned(warning: str, runs: list[str], of: int) -> str:
    given = f"all {of} runs" if len(runs) == of else f"{len(runs)} of the {of} runs ({', '.join(map(repr, runs))})"
    return f"note: the warning {shown(warning, most=60)} came from {given}"


@pytest.mark.parametrize("setting", ["unicode_nfc", "split_cjk", "social_media", "turkish_i"])
def test_an_ensemble_recorded_before_a_cleaning_setting_resumes_and_its_new_members_read_texts_as_the_others(
        tmp_path, capsys, recorded_before, setting):
    # Its members read texts without the setting (no NFC, no CJK split: their command built neither then); the same
    # command, --resume added, was refused for giving it True. A member it adds trains as they did, never a mix.
    out = tmp_path / "ens"
    flags = ["train", "--dataset", "demo", "--max-train-examples", "200", "--set", "d_model=16", "--set", "layers=1",
             "--epochs", "1", "--output", str(out), "--quiet", "--no-report", "--threads", "1"]
    assert main(flags + ["--seeds", "0", "1"]) == 0
    for seed in (0, 1):
        recorded_before(out / f"seed-{seed}", setting)
    capsys.readouterr()
    assert main(flags + ["--resume", "--seeds", "0", "1", "2"]) == 0, capsys.readouterr().err
    # (recorded as the others, without the field: the same command, --resume added, takes them all again)
    cleaning = json.loads((out / "seed-2" / "config.json").read_text())["settings"]["tokenizer"]["cleaning"]
    assert setting not in cleaning
    assert getattr(Classifier.load(out / "seed-2").tokenizer.config.cleaning, setting) is False
    assert main(flags + ["--resume", "--seeds", "0", "1", "2"]) == 0, capsys.readouterr().err


def test_a_member_added_to_an_ensemble_begun_before_split_cjk_is_warned_of_its_unsplit_texts_truly(
        tmp_path, capsys, recorded_before):
    # Its new member reads Chinese unsplit, as the others did; the warning told the user "without --no-split-cjk each
    # character is a word", a flag they never gave: the ensemble is older than the setting.
    chinese = ["这个产品很好，6天就到了。", "电影很失望。", "我觉得质量很差，而且坏了。", "物流很快，非常满意。"]
    for name in ("train", "test"):
        (tmp_path / f"{name}.csv").write_text("text,label\n" + "".join(
            f"{text},{'good' if i % 2 else 'bad'}\n" for i, text in enumerate(chinese * 5 + ["a good film",
                                                                                             "a bad film"] * 20)))
    out = tmp_path / "ens"
    flags = ["train", "--train-file", str(tmp_path / "train.csv"), "--test-file", str(tmp_path / "test.csv"), "--model",
             "boe", "--min-frequency", "1", "--epochs", "1",
             "--output", str(out), "--quiet", "--no-report", "--threads", "1"]
    assert main(flags + ["--no-split-cjk", "--seeds", "0", "1"]) == 0  # (read as the code before split_cjk read them)
    for seed in (0, 1):
        recorded_before(out / f"seed-{seed}", "split_cjk")
    capsys.readouterr()
    assert main(flags + ["--resume", "--seeds", "0", "1", "2"]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "no spaces between words" in line]
    assert len(warned) == 1 and "--no-split-cjk" not in warned[0]
    assert warned[0].endswith("this run, begun before split_cjk, reads them as it began, each run one word (a new run "
                              "reads each character as a word); --tokenizer bpe cuts them into pieces texts share, "
                              "given a --vocab-size too small to hold whole clauses")


def test_a_resumed_member_s_epoch_budget_is_refused_by_its_flag(tmp_path, capsys):
    # resume_settings names the field to Python callers (epochs); a member continued by the command line, its flag.
    out = tmp_path / "ens"
    flags = ["train", "--dataset", "demo", "--max-train-examples", "200", "--set", "d_model=16", "--set", "layers=1",
             "--output", str(out), "--quiet", "--no-report", "--threads", "1", "--seeds", "0", "1"]
    assert main(flags + ["--epochs", "2"]) == 0
    for unfinished in (out / "seed-1" / "metrics.json", out / "ensemble.json"):  # (as if stopped as it tested)
        unfinished.unlink()
    capsys.readouterr()
    assert main(flags + ["--epochs", "1", "--resume"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"attnclf: error: {out / 'seed-1'} has trained 2 epochs already; "
                                                    f"--epochs 1 is fewer (give more to train on, or none to finish "
                                                    f"as planned)")


def test_an_ensemble_being_replaced_is_no_ensemble_to_load_until_every_member_is(tmp_path, capsys, monkeypatch):
    """Stopped after its first new member, an --overwrite would otherwise serve the new member averaged with the
    old ensemble's other, or an unfinished replacement of it."""
    from attnclf.training import run

    out = tmp_path / "ens"
    flags = ["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", "1", "--set", "d_model=16",
             "--set", "layers=1", "--output", str(out), "--quiet", "--no-report", "--threads", "1", "--seeds", "0", "1"]
    assert main(flags) == 0
    # A replacement that fails on its data (a tokenizer with nothing to learn) leaves the ensemble it replaces whole.
    before = (out / "ensemble.json").read_bytes()
    assert main(flags + ["--overwrite", "--min-frequency", "100000"]) == 2
    assert (out / "ensemble.json").read_bytes() == before and not list(out.glob("seed-*/earlier-model"))
    assert main(["predict", str(out), "a fine film"]) == 0
    train_or_continue = run.train_or_continue

    def stopped_at_the_second_member(settings, *args, **kwargs):
        if settings.output.endswith("seed-1"):
            raise KeyboardInterrupt
        return train_or_continue(settings, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(run, "train_or_continue", stopped_at_the_second_member)
        assert main(flags + ["--overwrite", "--lr", "0.01"]) == 130
    capsys.readouterr()
    assert main(["predict", str(out), "a fine film"]) == 2
    assert "whose training has not finished" in capsys.readouterr().err
    assert main(flags + ["--lr", "0.01", "--resume"]) == 0
    assert main(["predict", str(out), "a fine film"]) == 0
    # Replaced by fewer members and stopped, it resumes too: the member it drops was set aside with the others.
    assert main(flags[:-3] + ["--seeds", "0", "1", "2", "--lr", "0.01", "--overwrite"]) == 0
    with monkeypatch.context() as patch:
        patch.setattr(run, "train_or_continue", stopped_at_the_second_member)
        assert main(flags + ["--overwrite"]) == 130
    assert main(flags + ["--resume"]) == 0
    assert sorted(member.name for member in out.iterdir() if member.is_dir()) == ["seed-0", "seed-1"]


def test_train_seeds_with_one_split_seed_validates_the_ensemble(tmp_path, capsys):
    out = tmp_path / "ens"
    assert main(["train", "--dataset", "demo", "--max-train-examples", "300", "--epochs", "1", "--set", "d_model=16",
                 "--set", "layers=1", "--output", str(out), "--quiet", "--no-report", "--seeds", "3", "4",
                 "--split-seed", "7"]) == 0
    printed = capsys.readouterr().out
    validation = json.loads((out / "ensemble.json").read_text())["validation_metrics"]
    assert f"validation (held out by every member): accuracy {validation['accuracy']:.4f}" in printed
    assert main(["evaluate", str(out), "--split", "validation", "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["accuracy"] == pytest.approx(validation["accuracy"])
    assert scored["num_examples"] == validation["num_examples"]


@pytest.mark.parametrize("data, seeds, message", [
    (["--dataset", "demo"], ["1"], "at least two"),
    (["--dataset", "demo"], ["1", "1"], "at least two"),
    (["--train-file", "{csv}"], ["1", "2"], "give --test-file"),
    ([], ["1", "2"], "give a dataset (--dataset NAME) or a training file (--train-file PATH)"),
])
def test_train_seeds_errors_come_before_any_training(data, seeds, message, tmp_path, capsys):
    csv = tmp_path / "train.csv"
    csv.write_text("text,label\ngood,pos\nbad,neg\n")
    data = [arg.format(csv=csv) for arg in data]
    assert main(["train", *data, "--output", str(tmp_path / "e"), "--seeds", *seeds]) != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "e" / "seed-1").exists()


def test_a_seeds_folder_is_served_and_refuses_explanations(tmp_path):
    from fastapi.testclient import TestClient

    from attnclf.ensemble import load_run
    from attnclf.serve.app import create_app

    out = tmp_path / "ens"
    assert main(["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", "1", "--set", "d_model=16",
                 "--set", "layers=1", "--output", str(out), "--quiet", "--no-report", "--seeds", "0", "1"]) == 0
    ensemble = load_run(out, device="cpu")
    with TestClient(create_app(ensemble)) as client:
        info = client.get("/model").json()
        assert info["ensemble_members"] == 2 and info["explain_methods"] == [] and not info["explain_pooling_attention"]
        answer = client.post("/predict", json={"texts": ["a wonderful film"]}).json()["predictions"][0]
        assert answer["probabilities"] == pytest.approx(
            dict(zip(ensemble.label_names, ensemble.predict_proba(["a wonderful film"])[0])))
        for method in ("attention", "all", ["occlusion", "attention"]):  # (several, too: no "method ... does not apply")
            refused = client.post("/explain", json={"texts": ["a wonderful film"], "method": method})
            assert refused.status_code == 400
            assert f"use one member, such as {out / 'seed-0'}" in refused.json()["detail"], method
        # Out of the schema and /docs, as with the ONNX backend: its fields would promise what it refuses.
        assert "/explain" not in client.get("/openapi.json").json()["paths"]
        assert "POST /explain" not in client.get("/docs").text
    with pytest.raises(AttnclfError, match="use one member, such as .*seed-0"):
        ensemble.explain(["a wonderful film"], "attention")


ONE_MODEL_COMMANDS = [["explain", "{out}", "good"], ["export", "{out}"],
                      ["faithfulness", "{out}"], ["predict", "{out}", "good", "--backend", "onnx"],
                      ["serve", "{out}", "--backend", "onnx"]]


@pytest.mark.parametrize("command", ONE_MODEL_COMMANDS)
def test_one_model_commands_refuse_a_seeds_folder_naming_its_first_member(command, tmp_path, capsys):
    out = tmp_path / "ens"
    out.mkdir()
    (out / "ensemble.json").write_text('{"members": ["seed-3", "seed-4"]}')
    assert main([arg.format(out=out) for arg in command]) != 0
    err = capsys.readouterr().err
    assert f"use one member, such as {out / 'seed-3'}" in err and len(err.splitlines()) == 1


def test_report_of_a_seeds_folder_says_what_the_folder_is_and_which_report_to_ask_for(tmp_path, capsys):
    out = tmp_path / "ens"
    out.mkdir()
    (out / "ensemble.json").write_text('{"members": ["seed-3", "seed-4"]}')
    assert main(["report", str(out)]) != 0
    assert capsys.readouterr().err.strip() == (f"attnclf: error: {out}: an ensemble folder (train --seeds), not one "
                                               f"run: each seed's run has its own report; attnclf report "
                                               f"{out / 'seed-3'}")


def test_attention_asked_of_a_seeds_folder_names_its_first_member_to_ask(tmp_path, capsys):
    out = tmp_path / "ens"
    out.mkdir()
    (out / "ensemble.json").write_text('{"members": ["seed-3", "seed-4"]}')
    assert main(["predict", str(out), "good", "--attention"]) != 0
    err = capsys.readouterr().err
    assert f"ask one member (--attention with {out / 'seed-3'})" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("members", ['{"members": []}', '{"members": ["a/b"]}', "not json"])
def test_a_seeds_folder_whose_members_are_unreadable_is_still_refused_in_one_line(members, tmp_path, capsys):
    out = tmp_path / "ens"
    out.mkdir()
    (out / "ensemble.json").write_text(members)
    assert main(["explain", str(out), "good"]) != 0
    err = capsys.readouterr().err
    assert f"use one member, such as {out / 'seed-S'}" in err and len(err.splitlines()) == 1


def test_a_seeds_folder_s_huge_member_name_is_named_by_its_start(tmp_path, capsys):
    out = tmp_path / "ens"
    out.mkdir()
    (out / "ensemble.json").write_text(json.dumps({"members": ["s" * 100_000]}))
    assert main(["explain", str(out), "good"]) != 0
    err = capsys.readouterr().err
    assert f"such as {out / ('s' * 20)}" in err and len(err) < 1000 and len(err.splitlines()) == 1


def test_runs_that_held_out_different_texts_are_not_validated_together(tmp_path, capsys):
    from attnclf.rundir import read_json
    from attnclf.training.run_data import run_validation_data

    csv = tmp_path / "train.csv"
    csv.write_text("text,label\n" + "".join(f"{'good' if i % 2 else 'bad'} film {i},{'pos' if i % 2 else 'neg'}\n"
                                            for i in range(40)))
    for name, hold_out in (("a", "random"), ("b", "latest")):
        assert main(["train", "--train-file", str(csv), "--test-file", str(csv), "--model", "boe", "--epochs", "1",
                     "--hold-out", hold_out, "--split-seed", "0", "--token-cache", "--token-cache-dir",
                     str(tmp_path / "cache"), "--output", str(tmp_path / name), "--quiet", "--no-report"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "a"), str(tmp_path / "b"), "--split", "validation"]) == 2
    assert "hold_out" in capsys.readouterr().err
    configs = [read_json(tmp_path / name / "config.json") for name in ("a", "b")]
    with pytest.raises(AttnclfError, match="--hold-out random and latest"):
        run_validation_data(configs, ["neg", "pos"])


def test_resume_adds_a_member_beside_older_ones_with_their_vectors(tmp_path, monkeypatch, capsys):
    rows = "".join(f"a good film {i},pos\na bad film {i},neg\n" for i in range(20))
    (tmp_path / "train.csv").write_text("text,label\n" + rows)
    monkeypatch.chdir(tmp_path)
    assert main(["vectors", "--file", "train.csv", "--dim", "8", "--min-count", "1", "-o", "v.vec"]) == 0
    flags = ["train", "--train-file", "train.csv", "--test-file", "train.csv", "--model", "boe", "--set",
             "embed_dim=8", "--epochs", "1", "--min-frequency", "1", "--threads", "1", "--quiet", "--no-report",
             "--output", "ens"]
    assert main(flags + ["--seeds", "0", "1", "--embeddings", "v.vec"]) == 0
    # seed-0 as attnclf recorded runs before 2026-11-23: its paths as typed.
    config_file = tmp_path / "ens" / "seed-0" / "config.json"
    config = json.loads(config_file.read_text())
    config["settings"]["data"].update(train_file="train.csv", test_file="train.csv")
    config_file.write_text(json.dumps(config))
    capsys.readouterr()
    # --resume cannot take --embeddings: the new member starts from the vectors the others started from.
    assert main(flags + ["--seeds", "0", "1", "2", "--resume"]) == 0
    assert json.loads((tmp_path / "ens" / "ensemble.json").read_text())["members"] == ["seed-0", "seed-1", "seed-2"]
    settings = json.loads((tmp_path / "ens" / "seed-2" / "config.json").read_text())["settings"]
    assert settings["embeddings"] == str(tmp_path / "v.vec") and settings["data"]["train_file"] == str(
        tmp_path / "train.csv")


def test_resume_adds_a_member_to_an_ensemble_recorded_before_the_vectors_scale_changed(tmp_path, capsys):
    # Runs before 2026-11-22 recorded embeddings_std 0.5, the default then, vectors or not; a member added now takes
    # the others' vectors, and so their scale only with them: 0.5 without vectors is no setting to refuse it for.
    out = tmp_path / "ens"
    flags = ["train", "--dataset", "demo", "--model", "boe", "--max-train-examples", "200", "--epochs", "1",
             "--threads", "1", "--output", str(out), "--quiet", "--no-report"]
    assert main(flags + ["--seeds", "0", "1"]) == 0
    for seed in (0, 1):
        config_file = out / f"seed-{seed}" / "config.json"
        config = json.loads(config_file.read_text())
        config["settings"]["embeddings_std"] = 0.5
        config_file.write_text(json.dumps(config))
    capsys.readouterr()
    assert main(flags + ["--seeds", "0", "1", "2", "--resume"]) == 0, capsys.readouterr().err
    added = json.loads((out / "seed-2" / "config.json").read_text())["settings"]
    assert (added["embeddings"], added["embeddings_std"]) == (None, 4.0)


@pytest.mark.parametrize("run_dirs, message", [
    (None, "give a list of run folders, not NoneType"),
    ([], "give at least one run folder"),
    (5, "give a list of run folders, not int"),
    ({"runs/a": 1}, "give a list of run folders, not dict"),
    ({"runs/a", "runs/b"}, "give a list of run folders, not set"),
    (b"runs/a", "give a list of run folders, not bytes"),
    (bytearray(b"runs/a"), "give a list of run folders, not bytearray"),
])
def test_ensembles_and_refits_name_what_is_wrong_with_their_list_of_runs(run_dirs, message):
    from attnclf.training.refit import refit_runs

    with pytest.raises(AttnclfError, match=message):
        Ensemble.load(run_dirs)
    with pytest.raises(AttnclfError, match=message):
        refit_runs(run_dirs)


def test_one_folder_given_alone_is_one_run_not_the_characters_of_its_name(demo_run, tmp_path):
    from attnclf.training.refit import refit_runs

    assert len(Ensemble.load(str(demo_run)).members) == 1
    assert len(Ensemble.load(iter([demo_run])).members) == 1  # (a generator has no len())
    with pytest.raises(AttnclfError, match="does not exist"):  # not "/ is given twice"
        refit_runs(str(tmp_path / "no-such-run"))


def test_a_member_interrupted_while_writing_its_report_gets_it_when_the_ensemble_resumes(tmp_path, monkeypatch):
    """Its metrics.json is written before its report: `--resume` keeps it as finished, and must not leave it the one
    member without the report.html every other member has."""
    import attnclf.report
    from attnclf.rundir import LOCK_FILE, temporary_beside

    out = tmp_path / "ens"
    flags = ["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", "1", "--set", "d_model=16",
             "--set", "layers=1", "--output", str(out), "--quiet", "--threads", "1", "--seeds", "0", "1"]

    def interrupted(*args, **kwargs):  # Ctrl-C as seed 0's report is written
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(attnclf.report, "write_report", interrupted)
        assert main(flags) == 130
    assert (out / "seed-0" / "metrics.json").is_file() and not (out / "seed-0" / "report.html").exists()
    # What kill -9 there leaves too: the lock file it held, and a figure's write cut short
    (out / "seed-0" / LOCK_FILE).write_text("12345\n")
    (out / "seed-0" / "plots").mkdir(exist_ok=True)
    os.close(temporary_beside(out / "seed-0" / "plots" / "training.png")[0])
    assert main(flags + ["--resume"]) == 0
    assert (out / "seed-0" / "report.html").is_file() and (out / "seed-1" / "report.html").is_file()
    assert not [path.name for path in (out / "seed-0").rglob(".*")]
    # Asked for no report, a resume writes none.
    (out / "seed-0" / "report.html").unlink()
    assert main(flags + ["--resume", "--no-report"]) == 0
    assert not (out / "seed-0" / "report.html").exists()


def test_a_resume_writes_no_report_for_members_trained_without_one(tmp_path, monkeypatch):
    """--no-report is part of what the members were asked to do: a resume that leaves it off (adding a seed, say) must
    not predict finished members' test texts again, nor continued ones', for reports nobody asked for."""
    from attnclf.training.trainer import Trainer

    out = tmp_path / "ens"
    flags = ["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", "2", "--set", "d_model=16",
             "--set", "layers=1", "--output", str(out), "--quiet", "--threads", "1",
             "--seeds", "0", "1"]
    save = Trainer._save_checkpoint

    def interrupted_in_seed_1(self, *args):  # Ctrl-C after seed 1 checkpoints (before its test)
        save(self, *args)
        if self.run_dir.name == "seed-1":
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "_save_checkpoint", interrupted_in_seed_1)
        assert main(flags + ["--no-report"]) == 130
    assert main(flags + ["2", "--resume"]) == 0
    assert [(out / f"seed-{seed}" / "report.html").exists() for seed in (0, 1, 2)] == [False, False, True]


def test_evaluate_on_a_test_file_warns_of_texts_any_member_learned(tmp_path, capsys):
    # `evaluate --test-file` checked no member: texts some member trained or validated on flattered the ensemble's
    # score without a word. Each seed here learned its own sample of the file; the test texts are ones only the
    # second member learned.
    from attnclf.training.run_data import load_data
    from attnclf.training.settings import DataSettings

    rows = [(f"film number {i} was {'good' if i % 2 else 'bad'}", "pos" if i % 2 else "neg") for i in range(120)]
    train, held = tmp_path / "train.jsonl", tmp_path / "held.jsonl"
    for path, part in ((train, rows[:100]), (held, rows[100:])):
        path.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in part))
    out = tmp_path / "ens"
    assert main(["train", "--train-file", str(train), "--test-file", str(held), "--max-train-examples", "40",
                 "--model", "boe", "--epochs", "1", "--threads", "1", "--output", str(out), "--quiet", "--no-report",
                 "--seeds", "0", "1"]) == 0
    capsys.readouterr()
    learned = [load_data(DataSettings(train_file=str(train), max_train_examples=40), seed) for seed in (0, 1)]
    first = set(learned[0].train.texts + learned[0].validation.texts)
    only_second = [t for t in learned[1].train.texts + learned[1].validation.texts if t not in first]
    assert only_second
    test = tmp_path / "test.jsonl"
    test_rows = rows[100:] + [(t, y) for t, y in rows if t in only_second]
    test.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in test_rows))
    assert main(["evaluate", str(out), "--test-file", str(test), "--json"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {len(only_second)} of the {len(test_rows)} test texts also occur among the training or "
        f"validation texts: the test score will flatter the model"]
    assert main(["evaluate", str(out / "seed-0"), "--test-file", str(test), "--json"]) == 0
    assert capsys.readouterr().err == ""


def ensemble_begun_under_file_recipe(edition: int, tmp_path, monkeypatch, *typed: str) -> tuple[list[str], Path]:
    """The command (``typed`` added, --seeds not) and folder of a two-member self-attn ensemble on a small file, its
    members trained as attnclf did when ``recipes.FILE_RECIPES[edition]`` was the file recipe's latest edition."""
    from attnclf import recipes

    data = tmp_path / "reviews.csv"
    data.write_text("text,label\n" + "".join(f"{word} film number {i},{label}\n" for i in range(12)
                                             for word, label in [("great", "pos"), ("dull", "neg")]))
    out = tmp_path / "ens"
    flags = ["train", "--train-file", str(data), "--test-file", str(data), "--min-frequency", "1", *typed,
             "--set", "layers=1", "--epochs", "1", "--output", str(out), "--quiet", "--no-report", "--threads", "1"]
    with monkeypatch.context() as then:
        then.setattr(recipes, "FILE_RECIPES", recipes.FILE_RECIPES[:edition + 1])
        assert main(flags + ["--seeds", "0", "1"]) == 0
    return flags, out


def test_an_ensemble_on_a_file_from_before_the_file_recipe_resumes_as_its_members_trained(tmp_path, capsys,
                                                                                          monkeypatch):
    # Its members trained self-attn at the general defaults; the same command now builds the file recipe's model,
    # and an ensemble resumes only with its whole command: the members it adds and continues train as the others did.
    flags, out = ensemble_begun_under_file_recipe(0, tmp_path, monkeypatch, "--max-len", "8")
    # Flags typed that the members did not train with are refused, even where they are the recipe's values (the
    # members' settings were guessed from the values: seed-2 trained at ff_dim 512, dropout 0.1 despite the flags).
    capsys.readouterr()
    assert main(flags + ["--set", "ff_dim=256", "--set", "dropout=0.3", "--resume", "--seeds", "0", "1", "2"]) == 2
    assert "seed-0 trained with model_config.ff_dim = 512, this command gives 256" in capsys.readouterr().err
    assert not (out / "seed-2").exists()
    assert main(flags + ["--resume", "--seeds", "0", "1", "2"]) == 0, capsys.readouterr().err
    assert [json.loads((out / f"seed-{seed}" / "config.json").read_text())["settings"]["model_config"]
            for seed in (0, 1, 2)] == [{"layers": 1}] * 3
    # Another setting is still refused by its name.
    assert main(flags + ["--set", "layers=2", "--resume", "--seeds", "0", "1", "2", "3"]) == 2
    assert "trained with model_config.layers = 1, this command gives 2" in capsys.readouterr().err


def test_an_ensemble_on_a_file_from_the_model_only_file_recipe_resumes_as_its_members_trained(tmp_path, capsys,
                                                                                              monkeypatch):
    # Its members trained under the file recipe's first edition (model settings only, the general tokenizer); the same
    # command now reads the recipe's tokens, and the members it adds and continues read as many as the others did.
    from attnclf.recipes import FILE_SELF_ATTN, FILE_SELF_ATTN_TOKENIZER
    from attnclf.text.tokenizer import TokenizerConfig

    flags, out = ensemble_begun_under_file_recipe(1, tmp_path, monkeypatch)
    general, recipe_len = TokenizerConfig().max_len, FILE_SELF_ATTN_TOKENIZER["max_len"]
    # The recipe's tokens typed are a flag the members did not train with.
    capsys.readouterr()
    assert main(flags + ["--max-len", str(recipe_len), "--resume", "--seeds", "0", "1", "2"]) == 2
    assert f"seed-0 trained with tokenizer.max_len = {general}, this command gives {recipe_len}" in \
        capsys.readouterr().err
    assert not (out / "seed-2").exists()
    assert main(flags + ["--resume", "--seeds", "0", "1", "2"]) == 0, capsys.readouterr().err
    members = [json.loads((out / f"seed-{seed}" / "config.json").read_text())["settings"] for seed in (0, 1, 2)]
    assert [member["tokenizer"]["max_len"] for member in members] == [general] * 3
    assert [member["model_config"] for member in members] == [{"layers": 1} | FILE_SELF_ATTN] * 3
    # Another setting is still refused by its name.
    assert main(flags + ["--set", "layers=2", "--resume", "--seeds", "0", "1", "2", "3"]) == 2
    assert "trained with model_config.layers = 1, this command gives 2" in capsys.readouterr().err


def test_a_mixed_ensemble_served_names_every_model(tmp_path):
    """An ensemble built in Python may mix models: /model and /docs name them all, and give no one member's config."""
    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app

    runs = []
    for model, width in (("boe", "embed_dim=16"), ("self-attn", "d_model=16")):
        runs.append(tmp_path / model)
        assert main(["train", "--dataset", "demo", "--max-train-examples", "200", "--epochs", "1", "--model", model,
                     "--set", width, "--output", str(runs[-1]), "--quiet", "--no-report"]) == 0
    mixed = Ensemble.load(runs, device="cpu")
    with TestClient(create_app(mixed)) as client:
        info = client.get("/model").json()["model"]
        assert info["name"] == "boe + self-attn" and info["config"] is None
        assert info["parameters"] == sum(member.config["model"]["parameters"] for member in mixed.members)
        assert "Text classifier (boe + self-attn)" in client.get("/openapi.json").json()["info"]["description"]
    with TestClient(create_app(Ensemble.load(runs[:1], device="cpu"))) as client:
        assert client.get("/model").json()["model"]["config"]["embed_dim"] == 16


def test_an_ensemble_summary_says_its_scores_its_validation_and_where_its_thresholds_come_from(tmp_path):
    from attnclf.ensemble import ensemble_summary

    metrics = {"split": "test", "accuracy": 0.75, "macro_f1": 0.5}
    (tmp_path / "ensemble.json").write_text(json.dumps({"members": ["seed-0", "seed-1"]}))
    assert ensemble_summary(tmp_path, metrics, runs=2) == (f"ensemble of 2 runs ({tmp_path / 'ensemble.json'}), "
                                                           f"averaged:\ntest: accuracy 0.7500  macro-F1 0.5000")
    (tmp_path / "ensemble.json").write_text(json.dumps({"members": ["seed-0", "seed-1"], "thresholds_from": "members",
                                                        "validation_metrics": {"accuracy": 0.5, "macro_f1": 0.25}}))
    assert ensemble_summary(tmp_path, metrics, runs=2).splitlines()[2:] == [
        "validation (held out by every member): accuracy 0.5000  macro-F1 0.2500",
        "label sets at the members' thresholds, averaged: each held out validation texts of its own (one --split-seed "
        "would share them)"]


def test_a_multi_label_ensemble_summary_gives_the_calibration_lines_evaluate_prints_for_it(tmp_path):
    # `train --seeds --multi-label` closed on its scores' line alone, where `attnclf evaluate` of the same ensemble
    # (the same metrics: ensemble.json's) goes on with each label's calibration.
    from attnclf.ensemble import ensemble_summary
    from attnclf.evaluation.metrics import label_calibration_text, metrics_line

    metrics = {"split": "test", "multi_label": True, "micro_f1": 0.8, "macro_f1": 0.7, "subset_accuracy": 0.6,
               "hamming_loss": 0.1, "num_examples": 10, "log_loss": 0.3, "ece": 0.05,
               "per_class": {"a": {"ece": 0.04}, "b": {"ece": 0.06}}}
    (tmp_path / "ensemble.json").write_text(json.dumps({"members": ["seed-0", "seed-1"]}))
    assert ensemble_summary(tmp_path, metrics, runs=2).splitlines()[1:] == [
        metrics_line(metrics), *label_calibration_text(metrics).splitlines()]


@pytest.mark.parametrize("ids, message", [
    ([[2, 10 ** 9]], r"^ids\[0\] holds 1000000000, not a token id of this run \(0 to \d+\)$"),
    ([[3], [-1]], r"^ids\[1\] holds -1, not a token id of this run \(0 to \d+\)$"),
    ([[3, None]], r"^ids\[0\] holds None, not a token id of this run \(0 to \d+\)$"),
    ([[3], []], r"^ids\[1\] is empty: a text's ids hold one at least \(<unk> for an empty text\)$"),
    (["great film"], r"^ids\[0\] is 'great film', not a sequence of token ids$"),
    ("great film", r"^pass a list of token id sequences \(tokenizer.encode's\), not str$")])
def test_scores_of_ids_refuses_what_are_not_this_runs_token_ids_in_one_line(demo_run, ids, message):
    # (a public method: an id past the vocabulary was torch's IndexError, an empty row a reshape's RuntimeError)
    with pytest.raises(AttnclfError, match=message):
        Classifier.load(demo_run, device="cpu").scores_of_ids(ids)

def test_an_ensemble_of_onnx_exports_scores_its_members_as_a_classifiers(exported):
    # Ensemble reads its members through their public scores: an OnnxClassifier holds it as Classifier does (it
    # averaged exports before Classifier._run became scores, then raised AttributeError on them).
    from attnclf.export.runtime import OnnxClassifier

    fp32, int8 = OnnxClassifier.load(exported), OnnxClassifier.load(exported, int8=True)
    probabilities, ids, attention = fp32.scores(TEXTS)
    assert np.array_equal(probabilities, fp32.predict_proba(TEXTS))
    assert np.array_equal(fp32.scores(TEXTS, logits=True)[0], fp32.logits(TEXTS))
    assert ids == fp32.tokenizer.encode(TEXTS) and len(attention) == len(TEXTS)
    averaged = (fp32.predict_proba(TEXTS) + int8.predict_proba(TEXTS)) / 2
    assert np.allclose(Ensemble([fp32, int8]).predict_proba(TEXTS), averaged)


def test_resuming_with_fewer_seeds_than_the_folder_holds_is_refused_and_keeps_every_member(finished_seeds, tmp_path,
                                                                                            capsys):
    # `--seeds 0 1 --resume` into an ensemble of seeds 0 1 2 rewrote ensemble.json with two members, seed 2 dropped
    # without a word; a --resume keeps work, so the command that leaves a member out is refused instead.
    out = tmp_path / "ens"
    shutil.copytree(finished_seeds, out)
    assert main(tiny_seeds(out) + ["--resume", "--seeds", "0", "1", "2"]) == 0
    before = (out / "ensemble.json").read_bytes()
    assert json.loads(before)["members"] == ["seed-0", "seed-1", "seed-2"]
    capsys.readouterr()
    assert main(tiny_seeds(out) + ["--resume"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"attnclf: error: {out} holds seed 2's run too, which --seeds 0 1 leaves out: --resume continues every member "
        f"of the ensemble; give --seeds 0 1 2, or move {out / 'seed-2'} out of the folder first"]
    assert (out / "ensemble.json").read_bytes() == before
    assert (out / "seed-2" / "model.safetensors").is_file()
