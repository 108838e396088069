"""bench/fasttext_peer.py: the file fastText trains from, and which grid setting it keeps."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import fasttext_peer  # noqa: E402


def test_the_training_file_holds_every_text_with_its_label_shuffled(tmp_path):
    # fastText reads its file in order: a corpus listing one class first (IMDB does) must not reach it so.
    texts = [f"Review {i}<br />Was GOOD!" for i in range(100)]
    labels = [0] * 50 + [1] * 50
    lines = fasttext_peer.write_fasttext_file(tmp_path / "train.txt", texts, labels).read_text().splitlines()
    assert sorted(lines) == sorted(f"__label__{label} review {i} was good !" for i, label in enumerate(labels))
    assert {line.split()[0] for line in lines[:50]} == {"__label__0", "__label__1"}


def test_the_first_best_setting_is_kept_and_diverged_ones_are_not():
    grid = [{"lr": 0.1, "validation_accuracy": 0.7}, {"lr": 0.25, "validation_accuracy": None},
            {"lr": 0.5, "validation_accuracy": 0.8}, {"lr": 1.0, "validation_accuracy": 0.8}]
    assert fasttext_peer.choose(grid)["lr"] == 0.5
    assert fasttext_peer.choose(grid[:2])["lr"] == 0.1
