"""Real-data smoke test: a small self-attn model on real IMDB reviews beats chance clearly."""

import json

import pytest

from attnclf.cli import main


@pytest.mark.realdata
def test_self_attn_learns_imdb_from_a_2000_review_sample(shared_data_dir, tmp_path):
    out = tmp_path / "imdb"
    assert main(["train", "--dataset", "imdb", "--data-dir", str(shared_data_dir), "--model", "self-attn",
                 "--max-train-examples", "2000", "--max-test-examples", "1000", "--epochs", "1", "--max-len", "400",
                 "--output", str(out), "--quiet", "--no-report", "--seed", "0"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["num_examples"] == 1000
    # Chance is 0.5 on balanced held-out reviews; one epoch on 2,000 reviews measured 0.70 here at 400
    # tokens. (The recipe's 800 tokens need more than 32 steps to leave chance: 0.50 after one epoch.)
    assert metrics["accuracy"] >= 0.6 and metrics["roc_auc"] >= 0.7
