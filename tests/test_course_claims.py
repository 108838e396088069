"""The course's claims, reproduced through the CLI on its own generated data."""

import json

import pytest

from attnclf.cli import main


def final_train_loss(run_dir) -> float:
    return json.loads((run_dir / "history.jsonl").read_text().splitlines()[-1])["train_loss"]


def train(tmp_path, dataset, model, *extra) -> dict:
    out = tmp_path / f"{dataset}-{model}"
    assert main(["train", "--dataset", dataset, "--model", model, "--output", str(out), "--quiet", "--no-report",
                 *extra]) == 0
    return out


@pytest.mark.parametrize("dataset", ["toy-reversal", "toy-relative", "toy-both"])
def test_self_attention_fits_what_a_mean_of_embeddings_cannot(tmp_path, dataset):
    # Course notebook: mean pooling cannot separate reordered tokens; one self-attention layer can.
    assert final_train_loss(train(tmp_path, dataset, "mha")) < 0.05
    assert final_train_loss(train(tmp_path, dataset, "boe")) > 0.6


def test_positions_fix_reversal_but_not_relative_order(tmp_path):
    assert final_train_loss(train(tmp_path, "toy-reversal", "pos-mean")) < 0.05
    assert final_train_loss(train(tmp_path, "toy-relative", "pos-mean")) > 0.3


def test_self_attn_on_the_case_study_synthetic_set(tmp_path):
    # The case study reports about 95%; the set is separable by vocabulary half.
    run = train(tmp_path, "synthetic", "self-attn", "--epochs", "2", "--set", "d_model=64")
    assert json.loads((run / "metrics.json").read_text())["accuracy"] >= 0.99
