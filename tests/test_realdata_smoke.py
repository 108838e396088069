"""Real-data smoke test: a small self-attn model on real IMDB reviews beats chance clearly."""

import json

import pytest

from attnclf.cli import main


@pytest.mark.realdata
def test_self_attn_learns_imdb_from_a_2000_review_sample(shared_data_dir, tmp_path):
    out = tmp_path / "imdb"
    assert main(["train", "--dataset", "imdb", "--data-dir", str(shared_data_dir), "--model", "self-attn",
                 "--max-train-examples", "2000", "--max-test-examples", "1000", "--epochs", "1",
                 "--output", str(out), "--quiet", "--no-report", "--seed", "0"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["num_examples"] == 1000
    # Chance is 0.5 on balanced held-out reviews. The recipe (800 tokens, n-gram branch, block-local
    # attention, vectors counted from these reviews and the 50,000 unlabelled ones: 24 s of the ~40)
    # measured 0.780 accuracy and 0.922 ROC AUC here after one epoch on 2,000 reviews (0.761 and 0.904
    # without the vectors); a bigram-table recipe stayed at chance after those 32 steps.
    assert metrics["accuracy"] >= 0.7 and metrics["roc_auc"] >= 0.85


@pytest.mark.realdata
def test_the_file_recipe_learns_a_users_csv_of_real_sentences(shared_data_dir, tmp_path):
    # What a practitioner's first run is since the file recipe became the default: their own CSV, no flags but the
    # files. 3,000 of SST-2's training sentences and 1,000 of its test sentences, written as a user would have them.
    import csv

    folder = shared_data_dir / "sst2" / "stsa_binary"
    for split, name, count in (("train", "train.csv", 3000), ("test", "test.csv", 1000)):
        lines = (folder / f"stsa.binary.{split}").read_text(encoding="utf-8").splitlines()[:count]
        with open(tmp_path / name, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["text", "label"])
            writer.writerows([text, "positive" if label == "1" else "negative"]
                             for label, text in (line.split(" ", 1) for line in lines))
    out = tmp_path / "run"
    assert main(["train", "--train-file", str(tmp_path / "train.csv"), "--test-file", str(tmp_path / "test.csv"),
                 "--epochs", "3", "--threads", "1", "--output", str(out), "--quiet", "--no-report"]) == 0
    config = json.loads((out / "config.json").read_text())["settings"]["model_config"]
    assert config["d_model"] == 64 and config["nb_ngram_buckets"] == 1048576  # the recipe, not the general defaults
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["num_examples"] == 1000
    # Chance is about 0.5. Measured 0.763 here (2026-11-27); the first 600 of these test sentences read 0.768.
    assert metrics["accuracy"] >= 0.72
    # Then the practitioner's next step: label an unlabelled file of theirs, every row kept beside its prediction.
    # GLUE's SST-2 test.tsv (index, sentence; no labels), as one would for a leaderboard submission.
    predictions = tmp_path / "predictions.tsv"
    assert main(["predict", str(out), "--file", str(shared_data_dir / "sst2" / "SST-2" / "test.tsv"),
                 "--text-column", "sentence", "--output", str(predictions), "--threads", "1"]) == 0
    with open(predictions, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert [row["index"] for row in rows] == [str(i) for i in range(1821)]
    assert {row["predicted_label"] for row in rows} == {"negative", "positive"}
