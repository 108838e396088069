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
