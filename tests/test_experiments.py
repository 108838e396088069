"""`attnclf compare` and `attnclf ablate` end to end on tiny generated data, and the pieces they rest on."""

import csv
import dataclasses
import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from attnclf.cli import main
from attnclf.data.base import TextDataset
from attnclf.data.splits import train_validation_split
from attnclf.errors import AttnclfError, DataError
from attnclf.experiments import Setup
from attnclf.experiments.budget import DEFAULT_CAPS, QUICK, with_caps, with_quick
from attnclf.experiments.tables import chance_note, markdown_table, summarize
from attnclf.training.cached import load_cached_data
from attnclf.training.run_data import load_data
from attnclf.training.settings import DataSettings, RunSettings, settings_for

# A tiny budget: small models, one epoch on 200 synthetic texts.
TINY = ["--dataset", "synthetic", "--epochs", "1", "--max-train-examples", "200", "--threads", "1",
        "--set", "d_model=16", "--set", "layers=1", "--quiet"]


def read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    assert main(["compare", *TINY, "--set", "embed_dim=16", "--models", "boe,self-attn", "--seeds", "2",
                 "--output", str(out)]) == 0
    return out


def test_compare_writes_table_csv_plot_and_one_run_per_cell(compared):
    rows = {row["label"]: row for row in read_csv(compared / "comparison.csv")}
    assert list(rows) == ["boe", "self-attn", "tfidf-lr"]
    for row in rows.values():
        assert row["seeds"] == "2"
        assert 0 <= float(row["accuracy_mean"]) <= 1 and float(row["accuracy_std"]) >= 0
        assert float(row["texts_per_second_mean"]) > 0 and float(row["parameters_mean"]) > 0
    # The reference sees words, and on `synthetic` the words decide.
    assert float(rows["tfidf-lr"]["accuracy_mean"]) > 0.95
    cells = read_csv(compared / "cells.csv")
    assert sorted((c["label"], c["seed"]) for c in cells) == [
        (label, seed) for label in ("boe", "self-attn", "tfidf-lr") for seed in ("0", "1")]
    for name in ("boe-seed0", "boe-seed1", "self-attn-seed0", "self-attn-seed1"):
        assert (compared / "runs" / name / "metrics.json").is_file()
    table = (compared / "comparison.md").read_text()
    assert "| self-attn |" in table and " ± " in table
    assert "Budget of every neural cell: 180 training / 20 validation / 800 test texts (seed 0)" in table
    assert "up to 1 epoch," in table  # (one dataset: no list of sets)
    assert (compared / "comparison.png").read_bytes()[:4] == b"\x89PNG"


def test_compare_rerun_reuses_finished_cells(compared, capsys):
    metrics = compared / "runs" / "self-attn-seed0" / "metrics.json"
    before = metrics.stat().st_mtime_ns
    # A cell from an attnclf without some later TrainConfig field still counts as the same cell.
    config_file = compared / "runs" / "self-attn-seed0" / "config.json"
    config = json.loads(config_file.read_text())
    del config["settings"]["train"]["checkpoint_seconds"]
    config_file.write_text(json.dumps(config))
    loud = [arg for arg in TINY if arg != "--quiet"]
    assert main(["compare", *loud, "--set", "embed_dim=16", "--models", "boe,self-attn", "--seeds", "2",
                 "--output", str(compared)]) == 0
    assert metrics.stat().st_mtime_ns == before
    captured = capsys.readouterr()
    assert "| tfidf-lr |" in captured.out
    cell_lines = [line for line in (captured.out + captured.err).splitlines() if line.startswith("[")]
    assert len(cell_lines) == 4 and all(line.endswith("s training (finished earlier, reused)") for line in cell_lines)


def test_compare_seeds_take_a_count_or_the_seeds_themselves_and_a_rerun_with_other_seeds_reuses_the_shared_cells(
        tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", *TINY, "--models", "self-attn", "--no-reference", "--output", str(out)]
    assert main([*argv, "--seeds", "1", "2"]) == 0  # two values: exactly these seeds
    assert sorted(path.name for path in (out / "runs").iterdir()) == ["self-attn-seed1", "self-attn-seed2"]
    assert [cell["seed"] for cell in read_csv(out / "cells.csv")] == ["1", "2"]
    assert "Seeds 1, 2;" in (out / "comparison.md").read_text()
    capsys.readouterr()
    loud = [arg for arg in argv if arg != "--quiet"]
    assert main([*loud, "--seeds", "3"]) == 0  # one value: a count, seeds 0, 1 and 2
    said = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in said if line.startswith("[")] == [
        "[1/3] self-attn seed 0", "[2/3] self-attn seed 1", "[3/3] self-attn seed 2"]
    assert [line.endswith("(finished earlier, reused)") for line in said if line.startswith("[")] == [
        False, True, True]
    assert [cell["seed"] for cell in read_csv(out / "cells.csv")] == ["0", "1", "2"]
    assert read_csv(out / "comparison.csv")[0]["seeds"] == "3"


@pytest.mark.parametrize("command", ["compare", "ablate"])
@pytest.mark.parametrize("given, seeds", [(["3"], (0, 1, 2)), (["1"], (0,)), (["3", "5"], (3, 5)),
                                          (["0", "1", "2"], (0, 1, 2))])
def test_experiment_seeds_are_a_count_or_a_list_of_two_or_more(command, given, seeds, tmp_path, monkeypatch):
    import attnclf.experiments

    class Stop(Exception):
        """The stand-in's way out: the seeds seen, nothing trained."""

    def stand_in(setup, *args, **kwargs):
        raise Stop(setup.seeds)

    monkeypatch.setattr(attnclf.experiments, command, stand_in)
    with pytest.raises(Stop) as stopped:
        main([command, "--dataset", "synthetic", "--seeds", *given, "--output", str(tmp_path / "x")])
    assert stopped.value.args == (seeds,)


def test_compare_refuses_a_directory_trained_with_another_budget(compared, capsys):
    # The last --epochs wins: same cells, another budget.
    assert main(["compare", *TINY, "--epochs", "2", "--models", "self-attn", "--seeds", "1",
                 "--output", str(compared)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "other train settings" in err and "Traceback" not in err


def test_compare_refuses_a_cell_trained_on_a_split_the_data_no_longer_gives(compared, capsys):
    config_file = compared / "runs" / "boe-seed0" / "config.json"
    saved = config_file.read_text()
    config = json.loads(saved)
    assert len(config["data"]["validation_sha256"]) == 64
    config["data"]["validation_sha256"] = "0" * 64  # as if the dataset's split had changed since
    config_file.write_text(json.dumps(config))
    try:
        assert main(["compare", *TINY, "--set", "embed_dim=16", "--models", "boe,self-attn", "--seeds", "1",
                     "--output", str(compared)]) == 2
    finally:
        config_file.write_text(saved)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "another split of synthetic" in err and "boe-seed0" in err



@pytest.mark.parametrize("cached", [False, True], ids=["in-memory", "token-cache"])
def test_compare_refuses_a_cell_tested_on_texts_the_test_file_no_longer_gives(tmp_path, capsys, cached):
    # Reused, the seed-0 cell kept its score on the old test file beside seed 1's on the new one, in one mean
    # (a token-cache cell records its test data's key, not its texts' fingerprint).
    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"good {i},pos\nbad {i},neg\n" for i in range(30)))
    test = tmp_path / "test.csv"
    test.write_text("text,label\n" + "".join(f"good {i},pos\nbad {i},neg\n" for i in range(10)))
    argv = ["compare", "--train-file", str(tmp_path / "train.csv"), "--test-file", str(test), "--models", "boe",
            "--no-reference", "--epochs", "1", "--min-frequency", "1", "--threads", "1", "--quiet",
            "--output", str(tmp_path / "exp")]
    argv += ["--token-cache", "--token-cache-dir", str(tmp_path / "cache")] if cached else []
    assert main(argv + ["--seeds", "1"]) == 0
    test.write_text("text,label\n" + "".join(f"good {i},pos\nbad {i},neg\n" for i in range(5)))  # edited since
    capsys.readouterr()
    assert main(argv + ["--seeds", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "boe-seed0 was tested on other texts than test.csv" in err
    assert not (tmp_path / "exp" / "runs" / "boe-seed1").exists()  # refused before any other cell trained


def test_a_cell_another_process_is_writing_into_is_refused_and_left_as_it_was(tmp_path, capsys, held_elsewhere,
                                                                            files_but_the_lock):
    # Experiments took no lock of their own: two given one --output wrote their tables in turn, one's comparison.md
    # beside the other's cells.csv, and a `train --resume` of a cell wrote its files beside the experiment measuring
    # or reusing it (experiment.json, the reference's result.json). Now either is refused, naming its holder.
    from attnclf.rundir import LOCK_FILE

    out = tmp_path / "out"
    argv = ["compare", "--dataset", "synthetic", "--epochs", "1", "--max-train-examples", "200", "--threads", "1",
            "--set", "embed_dim=16", "--models", "boe", "--seeds", "1", "--quiet", "--output", str(out)]
    cell, reference = out / "runs" / "boe-seed0", out / "runs" / "tfidf-lr-seed0"

    def refused(held: Path, pid: int) -> None:
        assert main(argv) == 2
        assert capsys.readouterr().err == (f"attnclf: error: {held} is being written by another attnclf process "
                                           f"(pid {pid}); wait for it to finish, or give another --output\n")

    for held in (out, cell):  # the experiment's folder (its tables), and a cell not trained yet
        with held_elsewhere(held) as pid:
            refused(held, pid)
            assert files_but_the_lock(out) == {}
    assert main(argv) == 0
    for held in (cell, reference):  # finished: a rerun reuses them, and writes the tables they go into
        before = files_but_the_lock(out)
        with held_elsewhere(held) as pid:
            refused(held, pid)
            assert files_but_the_lock(out) == before, held
    assert main(argv) == 0  # held no more
    assert list(out.rglob(LOCK_FILE)) == []


@pytest.fixture(scope="module")
def finished_experiments(tmp_path_factory) -> tuple[Path, dict[str, list[str]]]:
    """A compare (boe, beside the TF-IDF reference) and an ablate (self-attn, one variant) of one cell each on 24
    reviews, and their commands (without --output): run again, each reuses its cell, reading the cell's metrics.json,
    history.jsonl and experiment.json, and compare its reference's result.json."""
    root = tmp_path_factory.mktemp("experiments")
    data = reviews_csv(root)
    common = ["--train-file", str(data), "--test-file", str(data), "--seeds", "1", "--epochs", "1", "--threads", "1",
              "--quiet"]
    # (ablate without the file recipe's n-gram branch, whose cell would be 49 MB to copy for each test)
    commands = {"compare": ["compare", *common, "--models", "boe"],
                "ablate": ["ablate", *common, "--sweep", "layers=1", "--set", "d_model=16", "--set",
                           "nb_ngram_buckets=0", "--max-len", "16"]}
    for command, argv in commands.items():
        assert main([*argv, "--output", str(root / command)]) == 0
    return root, commands


@pytest.mark.parametrize("command", ["compare", "ablate"])
@pytest.mark.parametrize("file, edit, message", [
    ("metrics.json", lambda m: m.pop("accuracy"), "metrics.json: accuracy is missing"),
    ("metrics.json", lambda m: m.pop("train_seconds"), "metrics.json: train_seconds is missing"),
    ("metrics.json", lambda m: m.update(parameters="2,178"), "metrics.json: parameters is '2,178', not a whole number"),
    ("metrics.json", lambda m: m.update(macro_f1=None), "metrics.json: macro_f1 is None, not a number"),
    ("metrics.json", lambda m: m.update(split=None), "metrics.json: split is None: the run scored no texts"),
    ("metrics.json", "truncated", "metrics.json: not valid JSON"),
    ("history.jsonl", lambda h: h[0].update(train_loss="0.69"),
     "history.jsonl, line 1: train_loss is '0.69', not a number"),
    ("history.jsonl", lambda h: h[0].pop("train_loss"), "history.jsonl, line 1: train_loss is missing"),
    ("experiment.json", lambda e: e.pop("texts_per_second"), "experiment.json: texts_per_second is missing"),
    ("experiment.json", lambda e: e.update(cpu_seconds="12 s"),
     "experiment.json: cpu_seconds is '12 s', not a number or null"),
    ("experiment.json", "truncated", "experiment.json: not valid JSON"),
    # (the training and test texts the budget paragraph counts, recorded when the cell trained)
    ("config.json", lambda c: c["data"].pop("train_examples"), "config.json: data.train_examples is missing"),
], ids=["no-accuracy", "no-train-seconds", "parameters-text", "macro-f1-null", "split-null", "metrics-truncated",
        "train-loss-text", "no-train-loss", "no-texts-per-second", "cpu-seconds-text", "experiment-truncated",
        "no-train-examples"])
def test_a_reused_cell_whose_files_were_mangled_is_one_line_naming_the_file_and_field(
        finished_experiments, tmp_path, capsys, mangle, command, file, edit, message):
    # A cell an editor or a copy mangled (an experiment folder someone sent) was a KeyError or a TypeError from the
    # cell's record or the tables summing it, a traceback instead of the file and field at fault.
    path, err = rerun_mangled(finished_experiments, tmp_path, capsys, mangle, command, file, edit)
    assert err.startswith(f"attnclf: error: {path}") and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["record"].pop("accuracy"), "result.json: record.accuracy is missing"),
    (lambda r: r["record"].update(texts_per_second="fast"), "result.json: record.texts_per_second is 'fast', not a "
                                                            "number"),
    (lambda r: r["record"].update(train_loss=None), "result.json: record.train_loss is None, not a list of numbers"),
    (lambda r: r.update(record=[0.9]), "result.json: record is [0.9], not an object"),
    (lambda r: r.pop("record"), "result.json: record is missing"),
], ids=["no-accuracy", "texts-per-second-text", "train-loss-null", "record-list", "no-record"])
def test_a_reused_reference_whose_result_was_mangled_is_one_line_naming_the_file_and_field(
        finished_experiments, tmp_path, capsys, mangle, edit, message):
    # The TF-IDF reference's cached result.json, hand-edited, was a KeyError or a TypeError from the record it
    # returned or the tables summing it.
    path, err = rerun_mangled(finished_experiments, tmp_path, capsys, mangle, "compare", "result.json", edit)
    assert err.startswith(f"attnclf: error: {path}") and message in err and err.count("\n") == 1, err


def rerun_mangled(finished_experiments, tmp_path, capsys, mangle, command: str, file: str, edit) -> tuple[Path, str]:
    """Copy ``finished_experiments``' ``command``, mangle ``file`` in the one cell holding it, run the command again:
    refused (exit 2); returns the file mangled and what was printed on stderr."""
    root, commands = finished_experiments
    output = tmp_path / command
    shutil.copytree(root / command, output)
    (path,) = (output / "runs").glob(f"*/{file}")
    mangle(path, edit)
    capsys.readouterr()
    assert main([*commands[command], "--output", str(output)]) == 2
    return path, capsys.readouterr().err


@pytest.mark.parametrize("command", ["compare", "ablate"])
def test_cells_recorded_before_unicode_nfc_are_reused_by_their_command(command, finished_experiments, tmp_path,
                                                                        capsys, recorded_before):
    # Their command built cleaning without NFC then (the field did not exist): it was refused as "trained with other
    # tokenizer settings than this experiment's" once the default became unicode_nfc=True.
    root, commands = finished_experiments
    output = tmp_path / command
    shutil.copytree(root / command, output)
    for config in (output / "runs").glob("*/config.json"):  # (compare's reference, tfidf-lr, has none)
        recorded_before(config.parent, "unicode_nfc")
    loud = [flag for flag in commands[command] if flag != "--quiet"]
    assert main([*loud, "--output", str(output)]) == 0, capsys.readouterr().err
    assert "(finished earlier, reused)" in capsys.readouterr().out
    for config in (output / "runs").glob("*/config.json"):  # (read as they trained: without NFC)
        assert "unicode_nfc" not in json.loads(config.read_text())["settings"]["tokenizer"]["cleaning"]


@pytest.mark.parametrize("command", ["compare", "ablate"])
def test_cells_recorded_before_social_media_are_not_reused_by_a_command_that_adds_it(command, finished_experiments,
                                                                                    tmp_path, capsys, recorded_before):
    # They read texts without it; the command with --social-media was compared as if it had not typed the flag, and
    # reused them, its table then scoring models that read posts otherwise than it said.
    root, commands = finished_experiments
    output = tmp_path / command
    shutil.copytree(root / command, output)
    for config in (output / "runs").glob("*/config.json"):
        recorded_before(config.parent, "social_media")
    capsys.readouterr()
    assert main([*commands[command], "--social-media", "--output", str(output)]) == 2
    assert "was trained with other tokenizer settings than this experiment's" in capsys.readouterr().err


def recorded_warnings(runs: Path) -> list[str]:
    """The data warnings each run under ``runs`` recorded (the report repeats them), as training printed them."""
    return [f"warning: {line}" for config in sorted(runs.glob("*/config.json"))
            for line in json.loads(config.read_text())["data"].get("warnings", [])]


@pytest.mark.parametrize("command", [
    ["compare", "--models", "boe", "--seeds", "3", "--no-reference"],  # seeds 0 and 1 warn alike, seed 2 otherwise
    ["ablate", "--model", "boe", "--sweep", "embed_dim=8,16", "--seeds", "1"],  # both cells: the same texts
], ids=["compare", "ablate"])
def test_an_experiment_prints_each_distinct_data_warning_once(tmp_path, capsys, command):
    # Every cell printed its data's warnings: the same test-texts-seen-in-training line once per cell and seed.
    out = tmp_path / "out"
    assert main([*command, "--dataset", "demo", "--epochs", "1", "--max-train-examples", "200", "--threads", "1",
                 "--set", "embed_dim=16", "--quiet", "--output", str(out)]) == 0
    printed = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    recorded = recorded_warnings(out / "runs")
    assert len(recorded) > len(set(recorded))  # (cells that warned alike, printed once)
    assert sorted(printed) == sorted(set(recorded))  # each, even one only a later cell gave, and once


def test_ablate_toy_order_reports_loss_per_set_and_variant(tmp_path, capsys):
    out = tmp_path / "toy"
    assert main(["ablate", "--dataset", "toy-order", "--seeds", "1", "--epochs", "3", "--threads", "1",
                 "--output", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    # It ends by naming the files it wrote, after its tables.
    assert printed[-1] == f"written to {out}: toy-order.md, cells.csv, toy-order.png"
    # A line per finished cell names its set: "[1/5] mean seed 0" came three times over, the sets unnamed.
    progress = [line for line in printed if line.startswith("[")]
    assert [line.split(":")[0] for line in progress[::5]] == ["[toy-reversal 1/5] mean seed 0",
                                                              "[toy-relative 1/5] mean seed 0",
                                                              "[toy-both 1/5] mean seed 0"]
    # A toy set tests on its training texts: the line says which accuracy it is, where a student read "accuracy" as
    # the model's on texts it had not seen.
    assert all(": accuracy on the training texts (a toy set tests on them) " in line for line in progress)
    cells = read_csv(out / "cells.csv")
    assert len(cells) == 3 * 5
    assert {c["label"].split(": ")[0] for c in cells} == {"toy-reversal", "toy-relative", "toy-both"}
    assert all(0 < float(c["final_train_loss"]) < 5 for c in cells)
    for cell in cells:  # the loss and the accuracy shown beside it are of the same (last) epoch's weights
        last = json.loads((Path(cell["run_dir"]) / "history.jsonl").read_text().splitlines()[-1])
        # No warning that the test texts are training texts: a toy set tests on its training set by design.
        assert "warnings" not in json.loads((Path(cell["run_dir"]) / "config.json").read_text())["data"]
        assert (float(cell["final_train_loss"]), float(cell["final_train_accuracy"])) == \
            (last["train_loss"], last["train_accuracy"])
    text = (out / "toy-order.md").read_text()
    assert text.count("### toy-") == 3 and "| self-attention, no positions | mha |" in text
    assert "| final training loss | final training accuracy | seeds |" in text
    # At a loss of ln 2 the two classes' probabilities tie to rounding, so the accuracy beside it (0.75 on two seeds
    # of toy-relative's positions, 2026-11-27) is noise: a student would read it as half-learned order.
    assert "A final training loss of 0.693 (ln 2) is a coin flip" in text
    assert ("4 training texts on toy-reversal, toy-relative; 8 training texts on toy-both, which a toy set also "
            "validates and tests on (seed 0)") in text  # each set's own size
    assert (out / "toy-order.png").read_bytes()[:4] == b"\x89PNG"


def test_ablate_sweeps_any_field_and_trains_the_base_once(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["ablate", *TINY, "--set", "heads=2", "--sweep", "heads=1,2", "--sweep", "layers=1,2",
                 "--sweep", "pooling=mean,attention", "--seeds", "1", "--output", str(out)]) == 0
    # heads=2, layers=1 (both set) and pooling=attention (the default) are all the base config:
    # one run, listed under each axis.
    assert sorted(p.name for p in (out / "runs").iterdir()) == [
        "self-attn-heads=1-seed0", "self-attn-layers=2-seed0", "self-attn-pooling=mean-seed0", "self-attn-seed0"]
    heads = read_csv(out / "heads.csv")
    assert [r["label"] for r in heads] == ["heads=1", "heads=2 (base)"]
    assert [r["label"] for r in read_csv(out / "layers.csv")] == ["layers=1 (base)", "layers=2"]
    assert [r["label"] for r in read_csv(out / "pooling.csv")] == ["pooling=mean", "pooling=attention (base)"]
    for name in ("heads.md", "heads.png", "layers.md", "layers.png", "ablation.md"):
        assert (out / name).is_file()
    assert "### heads" in capsys.readouterr().out


def test_ablate_sweeps_the_default_axes_the_model_has(tmp_path, monkeypatch):
    import sys

    from attnclf.training.settings import DataSettings

    module = sys.modules["attnclf.experiments.ablate"]
    swept = []

    def record(setup, variants, output, log):  # stop before training: the variants are what is tested
        swept.extend(variant.label.split("=")[0] for variant in variants)
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "run_variants", record)
    with pytest.raises(KeyboardInterrupt):
        module.ablate(Setup(DataSettings(dataset="demo"), seeds=(0,)), tmp_path / "out", model="bilstm-attn")
    assert sorted(set(swept)) == ["layers", "pooling_score"]  # bilstm-attn has no positions, pooling or heads


@pytest.mark.parametrize("args, message", [
    (["ablate", "--dataset", "synthetic", "--sweep", "heads"], "--sweep expects FIELD=VALUE1,VALUE2"),
    (["ablate", "--dataset", "synthetic", "--axes", "width"], "unknown axis 'width'"),
    (["ablate", "--dataset", "synthetic", "--axes", ","], "--axes names no axis"),
    (["ablate", "--dataset", "synthetic", "--axes", ""], "--axes names no axis"),  # (not the default axes)
    (["ablate", "--dataset", "synthetic", "--sweep", "width=1,2"], "no settable field 'width'"),
    (["ablate", "--dataset", "synthetic", "--set", "d_model=16", "--sweep", "heads=3"], "not divisible"),
    (["ablate", "--dataset", "toy-order", "--sweep", "heads=1,2"], "toy-order runs the course's fixed"),
    (["ablate", "--dataset", "toy-order", "--model", "boe"], "whose models are fixed; --model"),
    # (toy-order, which only ablate takes, is among the names a typo is matched against)
    (["ablate", "--dataset", "toy-ordr"], "unknown dataset 'toy-ordr' (did you mean 'toy-order'?); choose one of "),
    (["ablate", "--dataset", "imbd"], "(did you mean 'imdb'?); choose one of demo, "),
    (["ablate", "--dataset", "toy-ordr"], ", 20newsgroups, toy-order (toy-order is the course's order experiment)"),
    # `attnclf datasets` lists toy-order ("ablate only"): elsewhere it was an unknown dataset, the list leaving it out.
    (["compare", "--dataset", "toy-order"], "toy-order is the course's order experiment, `attnclf ablate --dataset "
                                            "toy-order`; `attnclf compare` takes one of its sets: toy-reversal, "
                                            "toy-relative or toy-both"),
    (["train", "--dataset", "toy-order"], "; `attnclf train` takes one of its sets: toy-reversal,"),
    (["compare", "--dataset", "synthetic", "--models", "boe,gpt"], "unknown model 'gpt'"),
    (["compare", "--dataset", "synthetic", "--models", "boe, boe"], "--models names boe twice"),
    (["compare", "--dataset", "synthetic", "--models", ","], "--models names no model"),
    (["compare", "--dataset", "synthetic", "--models", "boe,all"], "--models all stands alone"),
    (["compare", "--dataset", "synthetic", "--models", "boe", "--set", "heads=2"], "no model of this experiment has a config field 'heads'"),
    (["compare", "--dataset", "synthetic", "--seeds", "0"], "--seeds must be at least 1"),
    # A huge count was "out of memory; lower --max-len, --batch-size, ..." (its seeds, listed, filled the memory)
    (["compare", "--dataset", "synthetic", "--seeds", "100000000000"], "--seeds 100000000000 is a count: that many "
                                                                         "runs of each model; at most 1000"),
    # Two or more values are the seeds themselves (as `train --seeds` takes them), each once: a repeat would count its
    # cells twice in the spread.
    (["compare", "--dataset", "synthetic", "--seeds", "1", "2", "1"], "--seeds names seed 1 twice"),
    (["ablate", "--dataset", "synthetic", "--seeds", "3", "-1"], "--seeds must be at least 0 and below 4294967296, "
                                                                 "got -1"),
    (["compare", "--dataset", "synthetic", "--lr", "-1"], "error: --lr must be a finite number, at least 0, got -1.0"),
    (["ablate", "--dataset", "synthetic", "--lr", "-1"], "error: --lr must be a finite number, at least 0, got -1.0"),
    (["ablate", "--dataset", "toy-order", "--lr", "-1"], "error: --lr must be a finite number, at least 0, got -1.0"),
    (["compare", "--dataset", "synthetic", "--device", "cuda"] if not torch.cuda.is_available() else
     ["compare", "--dataset", "synthetic", "--device", "mps"], "asked for, but"),
])
def test_bad_experiment_input_is_one_line_before_any_training(tmp_path, capsys, args, message):
    out = tmp_path / "new" / "x"
    assert main([*args, "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "new").exists()  # no folder left behind, nor the parents it would have made


@pytest.mark.parametrize("seeds, message", [((1, 2, 1), "seeds names seed 1 twice; give each seed once"),
                                            ((), "seeds names no seed"),
                                            ((3, -1), "seeds must be at least 0 and below 4294967296, got -1")])
def test_a_setup_from_python_refuses_seeds_an_experiment_cannot_use(seeds, message):
    # Only the command line checked them: a repeat counted its cells twice in the spread, none was an IndexError.
    with pytest.raises(AttnclfError) as exc:
        Setup(DataSettings(dataset="synthetic"), seeds=seeds)
    assert str(exc.value) == message


def test_a_huge_model_field_or_axis_from_python_is_named_by_its_start_in_one_line(tmp_path):
    from attnclf.experiments import Variant, ablate, run_variants

    huge = "x" * 10_000
    setup = Setup(DataSettings(dataset="synthetic"), seeds=(0,))
    for refuse in (lambda: run_variants(setup, [Variant("v", huge)], tmp_path / "a"),
                   lambda: run_variants(dataclasses.replace(setup, model_config={huge: 1}), [Variant("boe", "boe")],
                                        tmp_path / "b"),
                   lambda: ablate(setup, tmp_path / "c", model=huge),
                   lambda: ablate(setup, tmp_path / "d", axes={huge: []})):
        with pytest.raises(AttnclfError) as refused:
            refuse()
        assert len(str(refused.value)) < 400 and "'xxx" in str(refused.value) and "..." in str(refused.value)


def test_failed_experiment_settings_keep_an_empty_folder_the_user_made(tmp_path, capsys):
    (tmp_path / "mine").mkdir()  # reached through new/.., a folder that did not exist
    assert main(["compare", "--dataset", "synthetic", "--lr", "-1", "--output", str(tmp_path / "new" / ".." / "mine")]) == 2
    assert (tmp_path / "mine").is_dir()


@pytest.mark.parametrize("command", [["compare", "--models", "boe"], ["ablate", "--model", "boe", "--sweep",
                                                                      "embed_dim=8,16"]])
def test_an_experiment_on_a_training_file_without_a_test_file_is_refused(tmp_path, capsys, command):
    # Its cells would be scored on each seed's own validation texts, which chose their epochs, under "test accuracy"
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"good {i},pos\nbad {i},neg\n" for i in range(30)))
    out = tmp_path / "x"
    assert main([*command, "--train-file", str(train), "--epochs", "1", "--seeds", "1", "--threads", "1",
                 "--quiet", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "has no test texts" in err and "--test-file" in err and err.count("\n") == 1
    assert not (out / "runs").exists()


def test_summary_spread_is_sample_std_and_absent_for_one_seed():
    records = [{"label": "a", "model": "boe", "accuracy": acc, "macro_f1": acc, "train_loss": [1.0, loss]}
               for acc, loss in [(0.8, 0.5), (0.9, 0.3)]]
    records.append({"label": "b", "model": "mha", "accuracy": 0.7, "macro_f1": 0.6})
    a, b = summarize(records)
    assert math.isclose(a["accuracy_std"], 0.0707107, rel_tol=1e-5)
    assert math.isclose(a["final_train_loss_mean"], 0.4)
    assert b["accuracy_std"] is None and b["seeds"] == 1
    table = markdown_table([a, b], ["label", "accuracy", "seeds"])
    assert "| a | 0.850 ± 0.071 | 2 |" in table and "| b | 0.700 | 1 |" in table


def test_a_model_at_chance_on_every_seed_is_named_under_the_table_as_not_having_learned():
    # `compare --quick` on SST-2 sentences put transformer-mean at 0.500 and pos-mean at 0.509 on 500 balanced test
    # texts: a student reads "a Transformer is worse than a bag of words" where it learned nothing in 3 epochs.
    def cell(label, accuracy):  # 500 test texts, 250 of the commonest class
        return {"label": label, "model": label, "accuracy": accuracy, "epochs": 3, "majority_accuracy": 0.5,
                "test_examples": 500}

    records = [cell("boe", 0.576), cell("boe", 0.56), cell("pos-mean", 0.5), cell("pos-mean", 0.526),
               cell("transformer-mean", 0.5), cell("transformer-mean", 0.5),
               {"label": "tfidf-lr", "model": "tfidf-lr", "accuracy": 0.5, "epochs": None}]
    note = chance_note(records)
    assert note.startswith("At chance: pos-mean, transformer-mean (every seed's test accuracy within two standard "
                           "errors of 0.500, what always answering the commonest test class scores)")
    assert "learned nothing the test set shows under this budget (up to 3 epochs)" in note and "--epochs" in note
    # (the default budget is offered only in place of --quick's: told to drop a flag not given, a user is lost)
    assert note.endswith("give them more: --epochs.")
    assert chance_note(records, quick=True).endswith("give them more: --epochs, or the default budget in place of "
                                                     "--quick.")
    assert "boe" not in note and "tfidf" not in note  # 0.56 is more than two standard errors (0.045) above 0.5
    assert chance_note([cell("boe", 0.576)]) is None
    assert chance_note([cell("boe", 0.5) | {"majority_accuracy": None}]) is None  # (a multi-label cell: no such rate)



def test_a_model_well_below_the_commonest_class_share_is_not_named_at_chance():
    # On a 90/10 test set, a model that catches the rare class at the cost of some common ones scores 0.80 (majority
    # 0.90): it learned what the test set shows, and is not "within two standard errors" (0.019) of 0.90.
    cell = {"label": "boe", "model": "boe", "accuracy": 0.80, "epochs": 3, "majority_accuracy": 0.9,
            "test_examples": 1000}
    assert chance_note([cell]) is None
    assert chance_note([cell | {"accuracy": 0.89}]).startswith("At chance: boe")


def test_the_comparison_figure_states_its_budget_and_marks_the_models_at_chance():
    # comparison.png on a slide said neither what the models were trained with (--quick: 1,500 texts, 3 epochs)
    # nor which of them learned nothing: the table's note was in comparison.md only.
    from attnclf.experiments.plots import compare_plot

    def cell(label, accuracy, seed):
        return {"label": label, "model": label, "seed": seed, "accuracy": accuracy, "epochs": 3,
                "majority_accuracy": 0.5, "test_examples": 500, "train_seconds": 2.0}

    records = [cell("boe", 0.58, 0), cell("boe", 0.57, 1), cell("pos-mean", 0.5, 0), cell("pos-mean", 0.51, 1)]
    budget = "Budget of every neural cell: 1,500 training / 150 validation / 500 test texts (seed 0); up to 3 epochs"
    figure = compare_plot(summarize(records), records, "compare on sst2-sentences", budget)
    texts = " ".join(text.get_text() for text in figure.texts + [figure._suptitle]).replace("\n", " ")
    assert "1,500 training / 150 validation / 500 test texts" in texts and "up to 3 epochs" in texts
    left = figure.axes[0]
    assert [label.get_text() for label in left.get_yticklabels()] == ["boe", "pos-mean (at chance)"]
    chance = [line for line in left.get_lines() if line.get_linestyle() == "--"]
    assert [list(line.get_xdata()) for line in chance] == [[0.5, 0.5]]
    assert "commonest class" in chance[0].get_label() and "0.500" in chance[0].get_label()
    assert "commonest class" in " ".join(text.get_text() for text in left.get_legend().get_texts())
    # No model at chance, no line: a dashed mark beside good models would read as a warning
    records = [cell("boe", 0.58, 0), cell("boe", 0.57, 1)]
    figure = compare_plot(summarize(records), records, "compare", budget)
    assert not [line for line in figure.axes[0].get_lines() if line.get_linestyle() == "--"]


def test_the_chance_legend_hides_no_score():
    # compare --quick on SST-2 sentences (2026-11-28): the legend of the dashed chance line, pinned to the lower
    # right, lay over the last row's dot, so comparison.png showed tfidf-lr's row empty at 0.701.
    import numpy as np

    from attnclf.experiments.plots import compare_plot, score_plot

    scores = {"boe": [0.576, 0.56, 0.57], "bilstm-attn": [0.706, 0.738, 0.716], "transformer-mean": [0.5] * 3,
              "self-attn": [0.66, 0.711, 0.726], "tfidf-lr": [0.698, 0.74, 0.664]}
    records = [{"label": label, "model": label, "seed": seed, "accuracy": accuracy, "epochs": 3,
                "majority_accuracy": 0.5, "test_examples": 500, "train_seconds": 2.0}
               for label, seeds in scores.items() for seed, accuracy in enumerate(seeds)]
    rows = summarize(records)
    for ax in (compare_plot(rows, records, "compare", "Budget").axes[0],
               score_plot(rows, records, "accuracy", "ablate").axes[0]):
        ax.figure.canvas.draw()
        legend = ax.get_legend().get_window_extent()
        points = np.concatenate([collection.get_offsets() for collection in ax.collections if
                                 len(collection.get_offsets())] +
                                [line.get_xydata() for line in ax.get_lines() if line.get_marker() == "o"])
        hidden = [tuple(point) for point, shown in zip(points, ax.transData.transform(points))
                  if legend.contains(*shown)]
        assert not hidden, f"the legend covers {hidden}"


def test_compare_models_all_is_every_model_attnclf_models_lists():
    # A teacher's six baselines (pos-mean among them, which the default leaves out) without typing each name.
    from attnclf.experiments.compare import compared_models
    from attnclf.models import MODELS

    assert compared_models(("all",)) == tuple(MODELS)
    assert {"boe", "pos-mean", "lstm-mean", "bilstm-attn", "transformer-mean", "self-attn"} <= set(MODELS)
    assert compared_models(("pos-mean", "boe")) == ("pos-mean", "boe")


def test_ablate_names_the_sweep_values_left_at_chance_under_each_axis_and_marks_them_on_its_figure(tmp_path,
                                                                                                 monkeypatch):
    # A sweep value whose cells all sit at chance (too few epochs, too high a learning rate) read as a worse setting:
    # compare said so under its table, ablate did not. boe cannot tell a text from its reversal: at chance at any size.
    import importlib

    ablate_module = importlib.import_module("attnclf.experiments.ablate")  # (the package exports the function)

    figures = {}
    save = ablate_module.save_figure
    monkeypatch.setattr(ablate_module, "save_figure", lambda figure, path: (figures.setdefault(path.name, figure),
                                                                           save(figure, path)))
    out = tmp_path / "sweep"
    assert main(["ablate", "--dataset", "toy-reversal", "--model", "boe", "--sweep", "embed_dim=8,16", "--seeds", "1",
                 "--epochs", "1", "--threads", "1", "--quiet", "--output", str(out)]) == 0
    note = "At chance: embed_dim=8, embed_dim=16 (every seed's accuracy on the training texts"
    assert note in (out / "embed_dim.md").read_text() and note in (out / "ablation.md").read_text()
    assert "worse model or setting" in (out / "embed_dim.md").read_text()
    assert "--quick" not in (out / "embed_dim.md").read_text()  # (not given: a note saying to drop it baffled)
    labels = [tick.get_text() for tick in figures["embed_dim.png"].axes[0].get_yticklabels()]
    assert labels == ["embed_dim=8 (at chance)", "embed_dim=16 (at chance)"]
    assert [line for line in figures["embed_dim.png"].axes[0].get_lines() if line.get_linestyle() == "--"]


def test_compare_on_a_toy_set_says_its_scores_are_on_the_training_texts_everywhere(tmp_path, monkeypatch):
    # The progress lines said "accuracy on the training texts (a toy set tests on them)"; the table, the budget line,
    # the chance note and the figure still said "test", which on a toy set are the training texts by design.
    # A mean of embeddings cannot tell a text from its reversal: on toy-reversal it stays at chance whatever it trains,
    # which the note under the table says.
    import importlib

    compare_module = importlib.import_module("attnclf.experiments.compare")  # (the package exports the function)

    figures = []
    monkeypatch.setattr(compare_module, "save_figure", lambda figure, path: figures.append(figure))
    out = tmp_path / "cmp"
    assert main(["compare", "--dataset", "toy-reversal", "--models", "boe", "--seeds", "1", "--epochs", "1",
                 "--no-reference", "--threads", "1", "--quiet", "--output", str(out)]) == 0
    text = (out / "comparison.md").read_text()
    assert "| accuracy on the training texts | macro-F1 on the training texts |" in text
    assert "4 training texts, which a toy set also validates and tests on (seed 0)" in text
    assert "At chance: boe (every seed's accuracy on the training texts within two standard errors" in text
    assert "test" not in text.replace("tests on", "")
    left, right = figures[0].axes
    assert left.get_xlabel().startswith("accuracy on the training texts (toy set)")
    assert right.get_ylabel() == "accuracy on the training texts (toy set)"


def test_the_toy_loss_panels_draw_the_coin_flip_line_and_name_the_loss():
    # On toy-reversal "mean" and "self-attention, no positions" lie on one line at 0.693: on a slide a student saw one
    # curve, and no mark said that 0.693 is a coin flip. The line is drawn, named in the legend, and the axis says
    # which loss it is.
    from attnclf.experiments.plots import loss_panels

    figure = loss_panels({"toy-reversal": {"mean": [[0.693, 0.693]], "positions": [[0.693, 0.1]]}}, "title")
    ax = figure.axes[0]
    chance = [line for line in ax.get_lines() if line.get_label().startswith("chance")]
    assert len(chance) == 1 and chance[0].get_ydata()[0] == pytest.approx(math.log(2))
    assert chance[0].get_label() == "chance: ln 2 = 0.693 (a coin flip)"
    assert ax.get_ylabel() == "training loss (cross-entropy, nats)"


def test_budget_flags_beat_quick_which_beats_the_recipe():
    explicit = Setup(DataSettings(dataset="synthetic", max_train_examples=123), train={"lr": 0.5})
    quick = with_quick(explicit)
    assert quick.train == {"epochs": QUICK["train"]["epochs"], "lr": 0.5} and quick.data.max_train_examples == 123
    settings = settings_for(quick.data, "boe", train=quick.train, tokenizer=quick.tokenizer)
    assert settings.train.epochs == QUICK["train"]["epochs"] and settings.train.batch_size == 64  # recipe's
    assert settings.tokenizer.max_len == QUICK["tokenizer"]["max_len"]  # over the recipe's 32


def test_default_caps_only_lower_what_the_recipe_asks_for():
    cap = DEFAULT_CAPS["tokenizer"]["max_len"]
    imdb = with_caps(Setup(DataSettings(dataset="imdb")))  # its recipe asks for 400 tokens
    assert imdb.tokenizer == {"max_len": cap} and imdb.train == {}
    assert imdb.data.max_train_examples == DEFAULT_CAPS["data"]["max_train_examples"]
    synthetic = with_caps(Setup(DataSettings(dataset="synthetic")))  # 32 tokens, 20 epochs stand
    assert synthetic.tokenizer == {} and synthetic.train == {}
    mine = with_caps(Setup(DataSettings(dataset="imdb", max_train_examples=20000), tokenizer={"max_len": 512}))
    assert mine.tokenizer == {"max_len": 512} and mine.data.max_train_examples == 20000


def test_settings_for_rejects_unknown_and_run_owned_fields():
    with pytest.raises(AttnclfError, match="TrainConfig has no settable field 'epoch'"):
        settings_for(DataSettings(dataset="synthetic"), "boe", train={"epoch": 3})
    with pytest.raises(AttnclfError, match="no settable field 'max_len'"):
        settings_for(DataSettings(dataset="synthetic"), "self-attn", model_config={"max_len": 64})


def test_max_test_examples_samples_the_same_test_texts_for_every_seed():
    data = DataSettings(dataset="synthetic", max_test_examples=100)
    first, second = load_data(data, seed=0), load_data(data, seed=1)
    assert len(first.test) == 100 and first.test.split == "test"
    assert first.test.texts == second.test.texts
    assert first.train.texts != second.train.texts or first.validation.texts != second.validation.texts


def test_split_seed_gives_runs_of_any_seed_the_same_validation_texts(tmp_path):
    shared = DataSettings(dataset="synthetic", split_seed=7)
    assert load_data(shared, seed=0).validation.texts == load_data(shared, seed=1).validation.texts
    assert load_data(shared, seed=0).validation.texts == load_data(DataSettings(dataset="synthetic"), 7).validation.texts
    assert load_data(shared, seed=0).validation.texts != load_data(DataSettings(dataset="synthetic"), 0).validation.texts
    cached = DataSettings(dataset="synthetic", split_seed=7, token_cache=True, token_cache_dir=str(tmp_path))
    splits, tokenizer = load_cached_data(RunSettings(data=cached), seed=0)
    validation = splits.validation
    assert [validation.sequences[i].tolist() for i in range(len(validation))] == tokenizer.encode(
        load_data(shared, seed=0).validation.texts)


def test_grouped_split_keeps_the_requested_side_small_for_large_fractions():
    # --max-train-examples on IMDB asks for fraction ~0.9; two folds used to give 0.5.
    labels = [i % 2 for i in range(400)]
    data = TextDataset([f"t{i}" for i in range(400)], labels, ["a", "b"], groups=[str(i // 4) for i in range(400)])
    kept, rest = train_validation_split(data, 0.9, seed=0)
    assert 30 <= len(kept) <= 50 and len(kept) + len(rest) == 400
    assert not {data.groups[i] for i in range(400) if data.texts[i] in set(kept.texts)} & set(rest.groups)


def test_latest_hold_out_takes_the_newest_texts_of_each_class_and_needs_an_order():
    data = TextDataset([f"t{i}" for i in range(9)], [0, 0, 0, 0, 1, 1, 1, 1, 1], ["a", "b"],
                       order=[40, 10, 30, 20, 5, 9, 1, 7, 3])
    fit, validation = train_validation_split(data, 0.4, seed=0, hold_out="latest")
    assert validation.texts == ["t0", "t2", "t5", "t7"] and validation.order == [40, 30, 9, 7]
    assert fit.order == [10, 20, 5, 1, 3]
    assert train_validation_split(data, 0.4, seed=9, hold_out="latest")[1].texts == validation.texts
    halves = TextDataset([f"t{i}" for i in range(50)], [i % 2 for i in range(50)], ["a", "b"], order=list(range(50)))
    assert len(train_validation_split(halves, 0.1, hold_out="latest")[1]) == 6  # 2.5 per class rounds up
    sparse = TextDataset(["x", "y", "z", "w"], [0, 1, 0, 1], ["a", "b"], order=[1, 2, 3, 4])
    with pytest.raises(DataError, match="too few texts per class to hold out the latest 10% of each"):
        train_validation_split(sparse, 0.1, hold_out="latest")  # a random split would hold out one text
    unordered = TextDataset(["x", "y", "z", "w"], [0, 1, 0, 1], ["a", "b"], name="mine.csv")
    with pytest.raises(DataError, match="mine.csv records no order of its texts"):
        train_validation_split(unordered, 0.5, hold_out="latest")


def test_hold_out_latest_on_unordered_data_is_a_one_line_error(tmp_path, capsys):
    assert main(["train", "--dataset", "synthetic", "--hold-out", "latest", "--epochs", "1",
                 "--output", str(tmp_path / "x"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "records no order of its texts" in err and "--hold-out random" in err and len(err.splitlines()) == 1


def test_reference_result_cached_by_an_older_version_is_reused(tmp_path):
    from attnclf.experiments.reference import tfidf_reference

    setup = Setup(data=DataSettings(dataset="synthetic", max_train_examples=200), throughput_texts=10)
    record = tfidf_reference(setup, 0, tmp_path)
    saved = json.loads((tmp_path / "result.json").read_text())
    del saved["key"]["data"]["hold_out"]  # written before the setting existed
    saved["record"] = {**record, "accuracy": -1.0}  # a refit would not give this
    (tmp_path / "result.json").write_text(json.dumps(saved))
    assert tfidf_reference(setup, 0, tmp_path)["accuracy"] == -1.0
    assert tfidf_reference(Setup(data=DataSettings(dataset="synthetic", max_train_examples=300), throughput_texts=10),
                           0, tmp_path)["accuracy"] != -1.0  # other data: refitted


def test_reference_result_is_refitted_when_its_file_was_edited_since(tmp_path):
    # Same settings, other texts: the cached record scored the old test file, beside neural cells on the new one.
    from attnclf.experiments.reference import tfidf_reference

    test = tmp_path / "test.csv"
    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"good {i},pos\nbad {i},neg\n" for i in range(30)))
    test.write_text("text,label\n" + "".join(f"good {i},pos\nbad {i},neg\n" for i in range(10)))
    setup = Setup(data=DataSettings(train_file=str(tmp_path / "train.csv"), test_file=str(test)), throughput_texts=10)
    tfidf_reference(setup, 0, tmp_path / "ref")
    saved = json.loads((tmp_path / "ref" / "result.json").read_text())
    saved["record"]["accuracy"] = -1.0  # a refit would not give this
    (tmp_path / "ref" / "result.json").write_text(json.dumps(saved))
    assert tfidf_reference(setup, 0, tmp_path / "ref")["accuracy"] == -1.0  # unchanged: reused
    test.write_text("text,label\n" + "".join(f"good {i},pos\nbad {i},neg\n" for i in range(5)))
    assert tfidf_reference(setup, 0, tmp_path / "ref")["accuracy"] != -1.0


def test_hold_out_latest_on_a_file_validates_on_each_classs_last_rows(tmp_path):
    path = tmp_path / "by_date.csv"
    path.write_text("text,label\n" + "".join(f"text {i},{'neg' if i % 3 == 0 else 'pos'}\n" for i in range(30)))
    settings = DataSettings(train_file=str(path), hold_out="latest")
    validation = load_data(settings, seed=0).validation
    assert validation.texts == ["text 27", "text 28", "text 29"]  # neg's last row of 10, pos's last 2 of 20
    cached = DataSettings(**{**settings.__dict__, "token_cache": True, "token_cache_dir": str(tmp_path / "cache")})
    splits, tokenizer = load_cached_data(RunSettings(data=cached), seed=4)
    assert [splits.validation.sequences[i].tolist() for i in range(3)] == tokenizer.encode(validation.texts)


def test_compare_on_relative_paths_reuses_its_cells_on_a_rerun(tmp_path, monkeypatch, capsys):
    # Runs record absolute paths; the experiment's own settings keep them as typed, and both must still match.
    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"good {i},pos\nbad {i},neg\n" for i in range(30)))
    monkeypatch.chdir(tmp_path)
    argv = ["compare", "--train-file", "train.csv", "--test-file", "train.csv", "--models", "boe,lstm-mean",
            "--no-reference", "--epochs", "1", "--min-frequency", "1", "--threads", "1", "--quiet", "--output", "exp"]
    assert main(argv + ["--seeds", "1"]) == 0
    metrics = tmp_path / "exp" / "runs" / "lstm-mean-seed0" / "metrics.json"
    before = metrics.stat().st_mtime_ns
    assert main(argv + ["--seeds", "2"]) == 0  # a second seed trains, and the first seed's cells are kept
    assert metrics.stat().st_mtime_ns == before
    assert (tmp_path / "exp" / "runs" / "boe-seed1" / "metrics.json").is_file()


def test_the_budget_line_gives_the_first_seeds_sizes_when_a_grouped_split_varies_by_seed(tmp_path):
    from attnclf.experiments.tables import describe_budget
    from attnclf.rundir import atomic_write_json

    train = {"patience": 1, "epochs": 3, "monitor": "accuracy", "batch_size": 64, "optimizer": "adamw", "lr": 2e-3,
             "schedule": "linear"}
    records = []
    for seed, (n_train, n_validation) in enumerate([(540, 60), (539, 61)]):  # movies of several reviews each
        run = tmp_path / f"seed{seed}"
        run.mkdir()
        atomic_write_json(run / "config.json", {
            "data": {"train_examples": n_train, "validation_examples": n_validation, "test_examples": 20},
            "settings": {"data": {"dataset": "imdb"}, "train": train,
                         "tokenizer": {"kind": "word", "max_len": 800, "vocab_size": 30000}}})
        records.append({"run_dir": str(run), "seed": seed, "epochs": 3})
    line = describe_budget(Setup(DataSettings(dataset="imdb"), seeds=[0, 1]), records)
    assert "Budget of every neural cell: 540 training / 60 validation / 20 test texts (seed 0)" in line


def reviews_csv(tmp_path) -> Path:
    """24 short labelled reviews in a CSV, two classes: a file to compare or ablate on in seconds."""
    data = tmp_path / "reviews.csv"
    data.write_text("text,label\n" + "".join(f"{word} film number {i},{label}\n" for i in range(12)
                                             for word, label in [("great", "pos"), ("dull", "neg")]))
    return data


def refused_as_begun_before_the_file_recipe(argv: list[str], capsys, monkeypatch) -> list[str]:
    """Run the experiment ``argv`` as attnclf did before any file recipe, then as it does now: its self-attn-seed0
    cell is refused, saying the file defaults changed and which settings typed reuse it; returns those flags."""
    from attnclf import recipes
    from attnclf.models.classifiers import SelfAttentionConfig

    with monkeypatch.context() as before:
        before.setattr(recipes, "FILE_RECIPES", recipes.FILE_RECIPES[:1])  # (before any file recipe)
        assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 2
    typed = [flag for f in dataclasses.fields(SelfAttentionConfig) if f.name in recipes.FILE_SELF_ATTN
             for flag in ("--set", f"{f.name}={f.default}")]  # (the general defaults, in the config's field order)
    assert capsys.readouterr().err.strip().endswith(
        "self-attn-seed0 was trained with other model_config settings than this experiment's (d_model=128 there, 64 "
        "here): the defaults of self-attn on a file (the file recipe) changed since that cell was trained; delete it "
        f"or give another --output, or add its settings to reuse it: {' '.join(typed)} (--set reaches every model "
        "that has the field)")
    return typed


def test_a_compare_cell_from_before_the_file_recipe_is_refused_saying_the_file_defaults_changed(tmp_path, capsys,
                                                                                              monkeypatch):
    # Its self-attn cell trained at the general defaults; the same command now trains the file recipe's model there
    # (its tokens typed in full: the recipe's tokenizer part is the model-only edition's test).
    from attnclf.text.tokenizer import TokenizerConfig

    data = reviews_csv(tmp_path)
    argv = ["compare", "--train-file", str(data), "--test-file", str(data), "--models", "self-attn", "--seeds", "1",
            "--epochs", "1", "--set", "layers=1", "--max-len", "16", "--truncation", TokenizerConfig().truncation,
            "--no-reference", "--threads", "1", "--quiet", "--output", str(tmp_path / "cmp")]
    typed = refused_as_begun_before_the_file_recipe(argv, capsys, monkeypatch)
    # As said: with them typed, the cell is the experiment's, and reused (not trained again).
    metrics = tmp_path / "cmp" / "runs" / "self-attn-seed0" / "metrics.json"
    written = metrics.stat().st_mtime_ns
    assert main([*argv, *typed]) == 0
    assert metrics.stat().st_mtime_ns == written


def test_a_compare_cell_from_the_model_only_file_recipe_is_refused_saying_the_file_defaults_changed(tmp_path, capsys,
                                                                                                  monkeypatch):
    # Its self-attn cell read the general tokenizer's tokens; the same command now reads the file recipe's there (not
    # capped: compare scores what `train --train-file` trains), and boe's cell, which it does not change, is reused.
    from attnclf import recipes
    from attnclf.recipes import FILE_SELF_ATTN_TOKENIZER
    from attnclf.text.tokenizer import TokenizerConfig

    data = reviews_csv(tmp_path)
    argv = ["compare", "--train-file", str(data), "--test-file", str(data), "--models", "self-attn,boe", "--seeds",
            "1", "--epochs", "1", "--set", "layers=1", "--no-reference", "--threads", "1", "--quiet", "--output",
            str(tmp_path / "cmp")]
    with monkeypatch.context() as before:
        before.setattr(recipes, "FILE_RECIPES", recipes.FILE_RECIPES[:2])  # (the model-only recipe: the latest then)
        assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 2
    general, recipe_len = TokenizerConfig().max_len, FILE_SELF_ATTN_TOKENIZER["max_len"]
    assert capsys.readouterr().err.strip().endswith(
        f"self-attn-seed0 was trained with other tokenizer settings than this experiment's (max_len={general} there, "
        f"{recipe_len} here): the defaults of self-attn on a file (the file recipe) changed since that cell was "
        f"trained; delete it or give another --output, or add its settings to reuse it: --max-len {general} --set "
        f"nb_ngram_buckets=1048576 (--set reaches every model that has the field)")  # (the count it built, not sized)
    cells = tmp_path / "cmp" / "runs"
    written = {cell.name: (cell / "metrics.json").stat().st_mtime_ns for cell in cells.iterdir()}
    assert main([*argv, "--max-len", str(general), "--set", "nb_ngram_buckets=1048576"]) == 0  # (as said: both cells
    # reused, neither trained again)
    assert {cell.name: (cell / "metrics.json").stat().st_mtime_ns for cell in cells.iterdir()} == written
    shutil.rmtree(cells / "self-attn-seed0")
    assert main(argv) == 0
    read = {cell: json.loads((cells / cell / "config.json").read_text())["settings"]["tokenizer"]["max_len"]
            for cell in ("self-attn-seed0", "boe-seed0")}
    assert read == {"self-attn-seed0": recipe_len, "boe-seed0": general}
    assert f"at most {general} tokens per text" in (tmp_path / "cmp" / "comparison.md").read_text()


def test_a_compare_cell_from_before_the_buckets_were_sized_is_told_so_and_reused_given_its_count(tmp_path, capsys,
                                                                                                monkeypatch):
    # Its self-attn cell built the file recipe's fixed 2^20 buckets; the same command now sizes them to the texts.
    from attnclf import recipes

    data = reviews_csv(tmp_path)
    argv = ["compare", "--train-file", str(data), "--test-file", str(data), "--models", "self-attn", "--seeds", "1",
            "--epochs", "1", "--set", "layers=1", "--no-reference", "--threads", "1", "--quiet", "--output",
            str(tmp_path / "cmp")]
    with monkeypatch.context() as before:
        before.setattr(recipes, "FILE_RECIPES", recipes.FILE_RECIPES[:3])  # (512 tokens, the buckets fixed)
        assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 2
    assert capsys.readouterr().err.strip().endswith(
        "self-attn-seed0 was trained with a fixed count of n-gram buckets, which this experiment's sizes to the "
        "training texts: the defaults of self-attn on a file (the file recipe) changed since that cell was trained; "
        "delete it or give another --output, or add its settings to reuse it: --set nb_ngram_buckets=1048576 (--set "
        "reaches every model that has the field)")
    metrics = tmp_path / "cmp" / "runs" / "self-attn-seed0" / "metrics.json"
    written = metrics.stat().st_mtime_ns
    assert main([*argv, "--set", "nb_ngram_buckets=1048576"]) == 0
    assert metrics.stat().st_mtime_ns == written


def test_an_ablate_cell_from_before_the_file_recipe_that_held_another_variant_is_told_the_file_defaults_changed(
        tmp_path, capsys, monkeypatch):
    # Before the file recipe, the base had learned positions, so self-attn-seed0 held the learned variant; now the
    # base is sinusoidal and that folder is the sinusoidal variant's. The folder is matched across variants, not the
    # variant across editions, so the cell is told the file defaults changed; typing its settings reuses both cells.
    from attnclf.text.tokenizer import TokenizerConfig

    data = reviews_csv(tmp_path)
    argv = ["ablate", "--train-file", str(data), "--test-file", str(data), "--sweep", "positional=sinusoidal,learned",
            "--seeds", "1", "--epochs", "1", "--set", "layers=1", "--max-len", "16", "--truncation",
            TokenizerConfig().truncation, "--threads", "1", "--quiet", "--output", str(tmp_path / "abl")]
    typed = refused_as_begun_before_the_file_recipe(argv, capsys, monkeypatch)
    cells = tmp_path / "abl" / "runs"
    assert json.loads((cells / "self-attn-seed0" / "config.json").read_text())["settings"]["model_config"] == \
        {"layers": 1}  # (learned positions, the general default, then)
    assert "--set positional=learned" in " ".join(typed)  # (the variant's value there: the base's then)
    written = {cell.name: (cell / "metrics.json").stat().st_mtime_ns for cell in cells.iterdir()}
    assert sorted(written) == ["self-attn-positional=sinusoidal-seed0", "self-attn-seed0"]
    assert main([*argv, *typed]) == 0
    assert {cell.name: (cell / "metrics.json").stat().st_mtime_ns for cell in cells.iterdir()} == written


def test_a_refused_cell_is_offered_flags_only_where_flags_give_its_settings_back():
    # --set reads "1" as a number and "true" as a bool, and has no way to give None: no offer then, rather than a
    # command that would build another model.
    from attnclf.experiments.cells import _typed_as

    assert _typed_as([("tokenizer.max_len", 256, 512), ("model_config.positional", "learned", "sinusoidal")], {}) == \
        "--max-len 256 --set positional=learned (--set reaches every model that has the field)"
    assert _typed_as([("tokenizer.kind", "word", "char")], {}) == "--tokenizer word"
    for value in (None, "1", "true", [1]):
        assert _typed_as([("tokenizer.max_len", 256, 512), ("model_config.x", value, 0)], {}) is None
    # A cell whose n-gram buckets were a fixed count is given it back by its count (a count given is not sized); one
    # that sized them cannot be typed so.
    fixed = {"nb_ngram_buckets": 1048576}
    assert _typed_as([("ngram_buckets_sized", False, True)], fixed) == \
        "--set nb_ngram_buckets=1048576 (--set reaches every model that has the field)"
    assert _typed_as([("model_config.nb_ngram_buckets", 0, 1048576), ("ngram_buckets_sized", False, True)], {}) == \
        "--set nb_ngram_buckets=0 (--set reaches every model that has the field)"
    assert _typed_as([("ngram_buckets_sized", True, False)], fixed) is None


def test_a_cells_settings_under_earlier_file_recipes_are_built_only_where_its_folder_differs(tmp_path, monkeypatch):
    # Rebuilding every variant under every edition is work for the rare cell an earlier edition trained: a fresh
    # folder, or one that holds this experiment's cell, needs none of it.
    from attnclf.experiments import cells

    editions = []
    variant_settings = cells.variant_settings

    def recorded(setup, variant, seed, runs_dir, file_recipe=-1):
        editions.append(file_recipe)
        return variant_settings(setup, variant, seed, runs_dir, file_recipe)

    monkeypatch.setattr(cells, "variant_settings", recorded)
    data = reviews_csv(tmp_path)
    argv = ["compare", "--train-file", str(data), "--test-file", str(data), "--models", "self-attn", "--seeds", "1",
            "--epochs", "1", "--set", "layers=1", "--max-len", "16", "--no-reference", "--threads", "1", "--quiet",
            "--output", str(tmp_path / "cmp")]
    assert main(argv) == 0  # (a fresh folder)
    assert main(argv) == 0  # (the same cell, reused)
    assert editions and set(editions) == {-1}


def test_the_budget_line_says_self_attn_on_a_file_starts_from_the_file_recipe(tmp_path):
    # compare on a file trains self-attn from the file recipe (its model and tokenizer parts), and other models from
    # the general defaults: the tokens every cell reads are a cell's that the recipe did not build.
    from attnclf.experiments.tables import describe_budget
    from attnclf.recipes import FILE_SELF_ATTN, FILE_SELF_ATTN_TOKENIZER
    from attnclf.rundir import atomic_write_json
    from attnclf.text.tokenizer import TokenizerConfig

    cells = []
    for model, max_len in (("self-attn", FILE_SELF_ATTN_TOKENIZER["max_len"]), ("boe", TokenizerConfig().max_len)):
        run = tmp_path / model
        run.mkdir()
        atomic_write_json(run / "config.json", {
            "data": {"train_examples": 90, "validation_examples": 10, "test_examples": 20},
            "settings": {"data": {"dataset": None}, "ngram_buckets_sized": model == "self-attn",
                         "tokenizer": {"kind": "word", "max_len": max_len, "vocab_size": 30000},
                         "train": {"patience": 0, "epochs": 10, "monitor": "macro_f1", "batch_size": 32,
                                   "optimizer": "adamw", "lr": 1e-3, "schedule": "linear"}}})
        cells.append({"run_dir": str(run), "seed": 0, "epochs": 3, "model": model})
    setup = Setup(DataSettings(train_file="t.csv", test_file="t.csv"), seeds=[0])
    line = describe_budget(setup, cells)
    # (its buckets sized to the training texts: the recipe's count is their cap, not what was built)
    recipe = ", ".join(f"{k}={v}" + " at most, sized to the training texts" * (k == "nb_ngram_buckets")
                       for k, v in FILE_SELF_ATTN.items())
    assert ("Model settings from the recipe and --set (each model takes the fields it has): none; self-attn's from "
            f"the file recipe (recipes.FILE_SELF_ATTN): {recipe}.") in line
    assert (f"at most {TokenizerConfig().max_len} tokens per text (self-attn reads up to "
            f"{FILE_SELF_ATTN_TOKENIZER['max_len']}") in line
    assert "the file recipe's, recipes.FILE_SELF_ATTN_TOKENIZER), vocabulary" in line
    assert "max_len=" not in line  # (the tokens are a clause of their own, not a model setting)
    assert "file recipe" not in describe_budget(setup, cells[1:])
    assert "file recipe" not in describe_budget(Setup(DataSettings(dataset="imdb"), seeds=[0]), cells)
    # What --set and --max-len give is every cell's, not the recipe's.
    given = Setup(DataSettings(train_file="t.csv", test_file="t.csv"), seeds=[0], model_config={"d_model": 32},
                  tokenizer={"max_len": 100})
    assert "d_model=64" not in describe_budget(given, cells) and "self-attn reads" not in describe_budget(given, cells)


def test_error_bars_of_a_score_stay_within_zero_and_one():
    from attnclf.experiments.plots import score_plot
    from attnclf.experiments.tables import summarize

    cells = [{"label": "lstm", "model": "lstm-mean", "seed": s, "accuracy": a} for s, a in [(0, 1.0), (1, 0.88)]]
    axes = score_plot(summarize(cells), cells, "accuracy", "two seeds").axes[0]
    ends = [x for collection in axes.collections if hasattr(collection, "get_segments")
            for segment in collection.get_segments() for x, _ in segment]
    assert ends and max(ends) == 1.0 and min(ends) < 0.88  # mean 0.94 ± 0.085, cut at 1


def test_compare_takes_split_seed_beside_a_validation_file_as_the_seed_of_its_capped_sample(tmp_path, monkeypatch):
    # compare caps the training texts (--quick: 1,500): --split-seed chooses that sample, --validation-file or not.
    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"good {i},pos\nbad {i},neg\n" for i in range(800)))
    (tmp_path / "dev.csv").write_text("text,label\nfine film,pos\nawful film,neg\n")
    monkeypatch.chdir(tmp_path)
    argv = ["compare", "--train-file", "train.csv", "--validation-file", "dev.csv", "--test-file", "dev.csv",
            "--models", "boe", "--no-reference", "--quick", "--epochs", "1", "--min-frequency", "1", "--threads", "1",
            "--quiet"]
    trained_on = []
    for seed in ("3", "4"):
        assert main([*argv, "--split-seed", seed, "--output", f"exp{seed}"]) == 0
        config = json.loads((tmp_path / f"exp{seed}" / "runs" / "boe-seed0" / "config.json").read_text())
        assert (config["settings"]["data"]["split_seed"], config["data"]["train_examples"]) == (int(seed), 1500)
        trained_on.append(config["data"]["train_sha256"])
    assert trained_on[0] != trained_on[1]
