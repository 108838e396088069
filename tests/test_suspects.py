"""`attnclf suspects`: training rows ranked by their given label's out-of-fold probability."""

import csv
import json
import random
import re
from collections import Counter

import numpy as np
import pytest

from attnclf.cli import main
from attnclf.data.files import load_file
from attnclf.training.suspects import fold_of_each_row
from conftest import write_csv

SPORT_WORDS = ["team", "match", "goal", "striker", "coach", "cup", "league", "referee", "pitch", "keeper"]
MONEY_WORDS = ["bank", "shares", "market", "profit", "stocks", "rates", "investor", "bond", "dividend", "loan"]
FLIPPED = [3, 17, 42, 66]  # rows (from 0) whose label the fixture writes wrong


def topics_file(path, rows_per_class: int = 40, flipped=FLIPPED):
    """A CSV of sport and money texts, each four words of its topic's ten, interleaved; ``flipped`` carry the
    other topic's label."""
    draw = random.Random(7)
    rows = []
    for i in range(2 * rows_per_class):
        topic = "sport" if i % 2 == 0 else "money"
        words = SPORT_WORDS if topic == "sport" else MONEY_WORDS
        label = topic if i not in flipped else ("money" if topic == "sport" else "sport")
        rows.append((" ".join(draw.sample(words, 4)), label))
    return write_csv(path, rows)


def suspects_command(train, work, *more) -> list[str]:
    """`attnclf suspects` of a tiny boe model, 4 folds."""
    return ["suspects", "--train-file", str(train), "--folds", "4", "--epochs", "8", "--lr", "0.02",
            "--min-frequency", "1", "--set", "embed_dim=16", "--work-dir", str(work), "--quiet", "--threads", "1",
            *more]


def test_flipped_labels_rank_first_and_the_output_file_holds_every_row(tmp_path, capsys):
    train = topics_file(tmp_path / "train.csv")
    output = tmp_path / "suspects.csv"
    assert main(suspects_command(train, tmp_path / "work", "--output", str(output), "--top", "4")) == 0
    with open(output, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 80
    assert sorted(int(row["row"]) - 1 for row in rows[:4]) == FLIPPED
    first = rows[0]
    assert first["predicted_label"] != first["given_label"] and float(first["margin"]) < 0
    assert float(first["given_label_probability"]) == pytest.approx(float(first[f"probability:{first['given_label']}"]))
    given = [float(row["given_label_probability"]) for row in rows]
    assert given == sorted(given)  # lowest first
    printed, closing = capsys.readouterr()
    assert all(f"row {row + 1}:" in printed for row in FLIPPED), printed
    assert "row" not in printed.replace(f"row {rows[4]['row']}:", "").split("\n", 5)[-1]  # (--top 4: four rows)
    flagged = sum(float(row["margin"]) < 0 for row in rows)
    assert closing == (  # (the bytes the command printed before the library wrote this line)
        f"{flagged} of 80 rows are predicted out of fold as another label than the one given; folds in "
        f"{tmp_path / 'work'}; every row, lowest first, in {output}\n")


def test_a_dataset_whose_classes_are_not_in_sorted_order_is_ranked_by_each_rows_own_label(tmp_path, capsys,
                                                                                           monkeypatch):
    # A dataset numbers its classes its own way (AG News: World, Sports, Business, Sci/Tech); each fold's run numbers
    # them sorted, from the names its files hold. Read by position, the probabilities would be the other label's.
    from types import SimpleNamespace

    from attnclf.data.base import TextDataset
    from attnclf.training import suspects

    with open(topics_file(tmp_path / "train.csv"), encoding="utf-8", newline="") as handle:
        read = list(csv.DictReader(handle))
    order = ["sport", "money"]
    rows = TextDataset([row["text"] for row in read], [order.index(row["label"]) for row in read], order, "train")
    monkeypatch.setattr(suspects, "dataset_splits", lambda data, seed: SimpleNamespace(train=rows))
    output = tmp_path / "suspects.csv"
    command = suspects_command(tmp_path / "train.csv", tmp_path / "work", "--output", str(output))
    command[1:3] = ["--dataset", "demo"]  # (in place of --train-file: the patched dataset gives its rows)
    assert main(command) == 0, capsys.readouterr().err
    with open(output, encoding="utf-8", newline="") as handle:
        ranked = list(csv.DictReader(handle))
    assert sorted(int(row["row"]) - 1 for row in ranked[:4]) == FLIPPED


def test_the_folds_are_stratified_and_the_same_for_the_same_seed():
    from attnclf.training.suspects import fold_of_each_row

    labels = [0] * 30 + [1] * 12 + [2] * 8
    folds = fold_of_each_row(labels, 4, seed=3)
    assert sorted(set(folds.tolist())) == [0, 1, 2, 3]
    for label in (0, 1, 2):
        held = Counter(folds[np.asarray(labels) == label].tolist())
        assert max(held.values()) - min(held.values()) <= 1 and len(held) == 4
    assert np.array_equal(folds, fold_of_each_row(labels, 4, seed=3))
    assert not np.array_equal(folds, fold_of_each_row(labels, 4, seed=4))


def test_resume_keeps_finished_folds_and_trains_the_missing_one(tmp_path, monkeypatch, capsys):
    import shutil

    from attnclf.training import run

    train = topics_file(tmp_path / "train.csv")
    work = tmp_path / "work"
    assert main(suspects_command(train, work, "--output", str(tmp_path / "first.jsonl"))) == 0
    shutil.rmtree(work / "fold-3")
    trained = []
    real = run.train_run
    monkeypatch.setattr(run, "train_run", lambda settings, *a, **k: trained.append(settings.output) or
                        real(settings, *a, **k))
    assert main(suspects_command(train, work, "--output", str(tmp_path / "second.jsonl"), "--resume")) == 0
    assert trained == [str(work.absolute() / "fold-3")]
    first = [json.loads(line) for line in (tmp_path / "first.jsonl").read_text().splitlines()]
    second = [json.loads(line) for line in (tmp_path / "second.jsonl").read_text().splitlines()]
    assert [row["row"] for row in first][:4] == [row["row"] for row in second][:4]


def test_ctrl_c_says_the_command_that_keeps_the_finished_folds(tmp_path, monkeypatch, capsys):
    from attnclf.training import run

    train = topics_file(tmp_path / "train.csv")
    work = tmp_path / "work"
    real, trained = run.train_run, []

    def interrupted_at_fold_2(settings, *args, **kwargs):
        trained.append(settings.output)
        if len(trained) >= 2:
            raise KeyboardInterrupt
        return real(settings, *args, **kwargs)

    monkeypatch.setattr(run, "train_run", interrupted_at_fold_2)
    argv = suspects_command(train, work, "--overwrite")  # (--resume refuses --overwrite: left out)
    assert main(argv) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"attnclf: interrupted; `attnclf {' '.join(argv[:-1])} --resume` keeps the finished folds and continues "
        f"the others (fold 1 finished; fold 2 not started; fold 3 not started; fold 4 not started)")
    # An --overwrite replacing an --output file: the resumed command, without it, would refuse the file.
    output = tmp_path / "suspects.csv"
    output.write_text("earlier\n")
    assert main(suspects_command(train, work, "--output", str(output), "--overwrite")) == 130
    assert capsys.readouterr().err.strip().endswith(
        f"; move {output} aside first (without --overwrite the command keeps it)")


def test_a_work_dir_of_earlier_folds_needs_resume_or_overwrite(tmp_path, capsys):
    train = topics_file(tmp_path / "train.csv")
    work = tmp_path / "work"
    assert main(suspects_command(train, work)) == 0
    capsys.readouterr()
    assert main(suspects_command(train, work)) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "--resume" in error and "--overwrite" in error, error
    assert main(suspects_command(train, work, "--folds", "5", "--resume")) == 2  # (argparse: the last --folds wins)
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "4 folds" in error and "5" in error, error


@pytest.mark.parametrize("rows, more, message", [
    ([("a goal", "sport")] * 8, [], "only one class"),
    ([("a goal", "sport")] * 8 + [("the bank", "money")] * 3, [], "'money' has 3 rows, fewer than --folds 4"),
    ([("a goal", "sport")] * 8, ["--multi-label"], "single-label"),
    ([("a goal", "sport")] * 4 + [("the bank", "money")] * 4, ["--folds", "1"], "--folds must be at least 2"),
    ([("a goal", "sport")] * 4 + [("the bank", "money")] * 4, ["--test-file", "t.csv"], "--test-file"),
], ids=["one-class", "class-smaller-than-folds", "multi-label", "one-fold", "test-file"])
def test_bad_data_is_one_line(tmp_path, capsys, rows, more, message):
    train = write_csv(tmp_path / "train.csv", rows)
    assert main(suspects_command(train, tmp_path / "work", *more)) == 2
    captured = capsys.readouterr()
    error = captured.err.strip()
    assert error.startswith("attnclf: error: ") and error.count("\n") == 0 and message in error, error
    assert "Traceback" not in captured.err
    assert not (tmp_path / "work" / "fold-1").exists()


def test_the_help_s_timing_is_a_figure_benchmarks_holds():
    import argparse
    import re
    from pathlib import Path

    from attnclf.cli import build_parser

    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    description = " ".join(subcommands.choices["suspects"].description.split())
    took = re.search(r"took (\d+\.\d s) \(BENCHMARKS.md, 2026-11-28\)", description)
    benchmarks = (Path(__file__).resolve().parents[1] / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert took and f"| {took[1]} |" in benchmarks, description


def test_the_folds_do_not_point_compare_at_their_internal_files(tmp_path, capsys):
    # Each fold is a small file's run, whose note named `attnclf compare --train-file WORK/data/fold-1-train.jsonl
    # --test-file WORK/data/fold-1-held-out.jsonl`: files of the command's own, not the user's data.
    train = topics_file(tmp_path / "train.csv")
    command = [arg for arg in suspects_command(train, tmp_path / "work") if arg != "--quiet"]
    assert main(command) == 0
    err = capsys.readouterr().err
    assert "fold 4 of 4" in err and "attnclf compare" not in err and "fold-1-train" not in err, err


def test_rows_whose_text_another_fold_holds_are_warned_of_once_as_rows_not_as_test_texts(tmp_path, capsys):
    # Each fold warned as a run of a test split: "N of the N test texts also occur among the training or validation
    # texts: the test score will flatter the model", and a note that it came from every run, where suspects reports
    # no test score: a row whose copy another fold holds is scored by a model that learned that copy.
    rows = list(csv.reader(topics_file(tmp_path / "train.csv").open(encoding="utf-8")))[1:]
    rows += [rows[0], rows[1], rows[1]]  # (rows 81-83: a copy of row 1, two of row 2)
    train = write_csv(tmp_path / "train.csv", rows)
    assert main(suspects_command(train, tmp_path / "work")) == 0
    err = capsys.readouterr().err
    # (and the folds' validation texts among their training texts flatter their early stopping, no refit's epochs)
    assert "test texts" not in err and "refit" not in err and "the fold's early stopping" in err, err
    data = load_file(str(train))
    fold = fold_of_each_row(data.labels, 4, seed=0)
    shared = sum(any(other != i and data.texts[other] == text and fold[other] != fold[i]
                     for other in range(len(data))) for i, text in enumerate(data.texts))
    assert shared >= 2  # (of rows 1, 2 and their copies, those no fold holds out together)
    assert [line for line in err.splitlines() if "another fold" in line] == [
        f"warning: {shared} of the 83 rows share their text with a row of another fold (duplicates in the data?): the "
        f"model that scores such a row learned its copy, so it ranks as the copy is labelled, not out of fold"]


def test_an_interrupted_suspects_names_the_command_that_resumes_it(tmp_path, capsys, monkeypatch):
    import shlex

    from attnclf.training import run

    train = topics_file(tmp_path / "my train.csv")  # (a space: the command is quoted)
    output = tmp_path / "suspects.csv"
    command = suspects_command(train, tmp_path / "work", "--output", str(output), "--overwrite")
    real, trained = run.train_run, []

    def interrupted_in_fold_2(settings, *args, **kwargs):
        if settings.output.endswith("fold-2"):
            raise KeyboardInterrupt
        trained.append(settings.output)
        return real(settings, *args, **kwargs)

    monkeypatch.setattr(run, "train_run", interrupted_in_fold_2)
    assert main(command) == 130
    said = capsys.readouterr().err.strip().splitlines()[-1]
    again = shlex.join(["attnclf", *[arg for arg in command if arg != "--overwrite"], "--resume"])
    assert said == (f"attnclf: interrupted; `{again}` keeps the finished folds and continues the others (fold 1 "
                    f"finished; fold 2 not started; fold 3 not started; fold 4 not started)"), said
    monkeypatch.setattr(run, "train_run", lambda settings, *a, **k: trained.append(settings.output) or
                        real(settings, *a, **k))
    assert main(shlex.split(again)[1:]) == 0
    assert [name.rsplit("/", 1)[-1] for name in trained] == ["fold-1", "fold-2", "fold-3", "fold-4"]
    assert len(output.read_text().splitlines()) == 81


def with_column(path, name: str, values):
    """``path``'s CSV rewritten with a first column ``name`` of ``values``, a value a row."""
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    with open(path, "w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([[name, *rows[0]], *([value, *row] for value, row in zip(values, rows[1:]))])
    return path


def test_the_training_file_s_other_columns_are_carried_into_the_output(tmp_path, capsys):
    # As `evaluate --errors` carries a test file's: a row's id finds it in the user's own data.
    train = with_column(topics_file(tmp_path / "train.csv"), "review_id", [f"r{i:03}" for i in range(80)])
    output = tmp_path / "suspects.jsonl"
    assert main(suspects_command(train, tmp_path / "work", "--output", str(output))) == 0
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert list(rows[0])[:3] == ["row", "review_id", "text"]
    assert all(row["review_id"] == f"r{row['row'] - 1:03}" for row in rows)
    assert sorted(int(row["review_id"][1:]) for row in rows[:4]) == FLIPPED


def test_a_training_file_column_the_output_writes_itself_is_refused_before_any_fold_trains(tmp_path, capsys):
    train = with_column(topics_file(tmp_path / "train.csv"), "margin", ["0.5"] * 80)
    assert main(suspects_command(train, tmp_path / "work", "--output", str(tmp_path / "s.csv"))) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "column 'margin' is one suspects --output writes" in error, error
    assert not (tmp_path / "work" / "fold-1").exists()


def test_a_training_file_naming_a_column_twice_is_refused_before_any_fold_trains(tmp_path, capsys, cli_error):
    # (it trains without the column read; only the output, which copies every column, cannot hold both)
    train = with_column(with_column(topics_file(tmp_path / "train.csv"), "id", range(80)), "id", range(80))
    assert cli_error(suspects_command(train, tmp_path / "work", "--output", str(tmp_path / "s.csv"))) == \
        f"{train}, line 1: the header names column 'id' 2 times; rename all but one"
    assert not (tmp_path / "work" / "fold-1").exists()


def test_a_json_line_naming_a_column_twice_or_one_the_output_writes_is_refused_before_any_fold_trains(tmp_path,
                                                                                                       cli_error):
    # (a JSON line names its own columns: the first lines may have none of the trouble a later one has)
    rows = list(csv.DictReader(topics_file(tmp_path / "train.csv").open(encoding="utf-8", newline="")))
    for line, problem, message in (
            ('{"text": "%s", "id": 1, "id": 2, "label": "%s"}', "twice",
             "the line names column 'id' 2 times (JSON keeps only the last); remove or rename all but one"),
            ('{"text": "%s", "margin": 0.5, "label": "%s"}', "written",
             "column 'margin' is one suspects --output writes (row, text, given_label, given_label_probability, "
             "predicted_label, margin, fold, probability:LABEL); rename it in the file")):
        train = tmp_path / f"{problem}.jsonl"
        train.write_text("".join((line % (row["text"], row["label"]) if n == 60 else json.dumps(row)) + "\n"
                                 for n, row in enumerate(rows)), encoding="utf-8")
        work = tmp_path / f"work-{problem}"
        assert cli_error(suspects_command(train, work, "--output", str(tmp_path / "s.csv"))) == \
            f"{train}, line 61: {message}"
        assert not (work / "fold-1").exists()


def test_a_parquet_training_file_s_ranking_comes_back_whole_from_a_parquet_output(tmp_path, capsys):
    # The whole path on Parquet both ways: its rows read, folded, trained, scored, ranked and written with their id,
    # each column of its type, every probability a row's own (summing to 1), as find_suspects returned them.
    import pyarrow as pa
    import pyarrow.parquet as pq

    from attnclf.training.settings import DataSettings
    from attnclf.training.suspects import suspect_columns, training_rows

    with open(topics_file(tmp_path / "train.csv"), encoding="utf-8", newline="") as handle:
        csv_rows = list(csv.DictReader(handle))
    train = tmp_path / "train.parquet"
    pq.write_table(pa.table({"id": list(range(100, 180)), "text": [row["text"] for row in csv_rows],
                             "label": [row["label"] for row in csv_rows]}), train)
    output = tmp_path / "suspects.parquet"
    assert main(suspects_command(train, tmp_path / "work", "--output", str(output), "--top", "0")) == 0
    table = pq.read_table(output)
    names = training_rows(DataSettings(train_file=str(train)), 4, 0).label_names
    assert table.column_names == ["row", "id", *list(suspect_columns(names))[1:]]
    assert str(table.schema.field("id").type) == "int64" and str(table.schema.field("margin").type) == "double"
    rows = table.to_pylist()
    assert sorted(row["row"] for row in rows) == list(range(1, 81))
    assert all(row["id"] == row["row"] + 99 for row in rows)
    assert sorted(row["id"] - 100 for row in rows[:4]) == FLIPPED
    for row in rows:
        read = csv_rows[row["row"] - 1]
        assert (row["text"], row["given_label"]) == (read["text"], read["label"])
        assert sum(row[f"probability:{name}"] for name in names) == pytest.approx(1, abs=1e-5)
        assert row["given_label_probability"] == row[f"probability:{row['given_label']}"]
        assert 1 <= row["fold"] <= 4


def test_the_command_s_default_model_is_the_one_the_library_justifies():
    # The default is chosen by measured figures (recipes.SUSPECTS_MODEL's comment, BENCHMARKS.md); the command must
    # not default to another.
    from attnclf.cli import build_parser
    from attnclf.recipes import SUSPECTS_MODEL

    assert build_parser().parse_args(["suspects", "--train-file", "t.csv"]).model == SUSPECTS_MODEL == "boe"


def test_overwrite_removes_only_the_folds_an_earlier_suspects_left_not_a_users_own_folders(tmp_path):
    # With --overwrite into a folder no `suspects` planned, its fold-N folders are the user's: they stay. Folds an
    # earlier command of more folds trained there go, so the folder holds one command's folds.
    train = topics_file(tmp_path / "train.csv")
    mine = tmp_path / "mine"
    (mine / "fold-9").mkdir(parents=True)
    (mine / "fold-9" / "notes.txt").write_text("keep me")
    assert main(suspects_command(train, mine, "--overwrite")) == 0
    assert (mine / "fold-9" / "notes.txt").read_text() == "keep me"
    work = tmp_path / "work"
    assert main([*suspects_command(train, work), "--folds", "5"]) == 0
    assert (work / "fold-5").is_dir() and (work / "data" / "fold-5-train.jsonl").is_file()
    assert main(suspects_command(train, work, "--overwrite")) == 0  # 4 folds now
    assert sorted(p.name for p in work.glob("fold-*")) == ["fold-1", "fold-2", "fold-3", "fold-4"]
    assert not list((work / "data").glob("fold-5-*"))


def test_suspects_help_offers_no_flag_it_refuses(capsys):
    # It shares train's data flags; those whose data would go unread (or a multi-label file) are refused in one
    # line, so the help, which a user reads first, leaves them out. They still parse, to be refused so.
    with pytest.raises(SystemExit):
        main(["suspects", "--help"])
    shown = capsys.readouterr().out
    for flag in ("--validation-file", "--test-file", "--max-train-examples", "--max-test-examples", "--multi-label",
                 "--label-delimiter"):
        offered = re.search(rf"^  {flag}\b|\[{flag}\b", shown, re.MULTILINE)  # (its option line, or usage)
        assert offered is None, flag
    assert re.search(r"^  --train-file\b", shown, re.MULTILINE) and "[--folds" in shown


def test_overwrite_unlinks_an_earlier_fold_that_is_a_link_and_leaves_what_it_points_at(tmp_path):
    # A planned fold moved to another disk and linked back: rmtree refuses a link, so the command failed in one line
    # after every fold had trained, its ranking unwritten; and what the link names was never this command's to delete.
    train = topics_file(tmp_path / "train.csv")
    work = tmp_path / "work"
    assert main([*suspects_command(train, work), "--folds", "5"]) == 0
    moved = tmp_path / "elsewhere" / "fold-5"
    moved.parent.mkdir()
    (work / "fold-5").rename(moved)
    (work / "fold-5").symlink_to(moved, target_is_directory=True)
    assert main(suspects_command(train, work, "--overwrite")) == 0  # 4 folds now
    assert sorted(p.name for p in work.glob("fold-*")) == ["fold-1", "fold-2", "fold-3", "fold-4"]
    assert (moved / "config.json").is_file()


def test_the_closing_line_counts_the_rows_predicted_as_another_label_and_says_where_they_are():
    from attnclf.training.suspects import suspects_summary

    rows = [{"margin": -0.4}, {"margin": 0.0}, {"margin": 0.3}] * 500
    assert suspects_summary(rows, "runs/suspects") == (
        "500 of 1,500 rows are predicted out of fold as another label than the one given; folds in runs/suspects")
    assert suspects_summary(rows[:1], "work", output="suspects.csv") == (
        "1 of 1 rows are predicted out of fold as another label than the one given; folds in work; every row, "
        "lowest first, in suspects.csv")


def test_the_default_work_folder_is_named_for_the_model_and_the_data():
    # Where `attnclf suspects` trains its folds without --work-dir is the library's choice, as find_suspects' is.
    from attnclf.training.settings import DataSettings, RunSettings
    from attnclf.training.suspects import default_work_dir

    assert default_work_dir(RunSettings(model="boe", data=DataSettings(train_file="/data/reviews.csv"))) == \
        "runs/suspects-boe-reviews.csv"
    assert default_work_dir(RunSettings(model="self-attn", data=DataSettings(dataset="sst2"))) == \
        "runs/suspects-self-attn-sst2"


def test_a_text_joined_from_two_columns_is_written_as_those_columns_as_evaluate_errors_writes_it(tmp_path, capsys):
    # (the file's own title and body, each in its cell, where the output held them joined in one `text` cell)
    read = list(csv.DictReader(topics_file(tmp_path / "topics.csv").open(encoding="utf-8", newline="")))
    rows = [{"title": row["text"].split(" ", 1)[0], "body": row["text"].split(" ", 1)[1], "label": row["label"]}
            for row in read]
    train = tmp_path / "train.csv"
    with open(train, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, ["title", "body", "label"])
        writer.writeheader()
        writer.writerows(rows)
    output = tmp_path / "suspects.csv"
    assert main(suspects_command(train, tmp_path / "work", "--output", str(output), "--text-column", "title",
                                 "--text-column", "body")) == 0
    with open(output, encoding="utf-8", newline="") as handle:
        written = list(csv.DictReader(handle))
    assert list(written[0])[:4] == ["row", "title", "body", "given_label"]
    assert all((row["title"], row["body"]) == (rows[int(row["row"]) - 1]["title"], rows[int(row["row"]) - 1]["body"])
               for row in written)
    assert sorted(int(row["row"]) - 1 for row in written[:4]) == FLIPPED
