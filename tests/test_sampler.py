"""The class-balanced sampler: every class equally likely per draw, and what it does to minority recall."""

import json
import random

import numpy as np

from attnclf.text.batching import BucketBatches
from attnclf.text.tokenizer import TokenizerConfig
from attnclf.training.run import train_run
from attnclf.training.settings import DataSettings, RunSettings
from attnclf.training.trainer import TrainConfig


def test_balanced_batches_draw_classes_equally_and_keep_the_epoch_length():
    labels = [0] * 900 + [1] * 100
    batches = BucketBatches([[5]] * 1000, labels, batch_size=50, seed=0, balanced=True)
    drawn = np.concatenate(batches.batch_indices())
    assert len(drawn) == 1000 and len(list(batches)) == len(batches) == 20
    minority_share = np.isin(drawn, np.arange(900, 1000)).mean()
    assert 0.45 < minority_share < 0.55  # 0.10 without balancing
    batches.set_epoch(1)
    assert not np.array_equal(np.concatenate(batches.batch_indices()), drawn), "a fresh draw every epoch"


def imbalanced_reviews(path, n, seed):
    """Texts of 8 common words plus one cue word; the cue names the class 70% of the time. 1 in 10 is 'rare'."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = "rare" if rng.random() < 0.1 else "common"
        cue_class = label if rng.random() < 0.7 else ("common" if label == "rare" else "rare")
        words = [f"w{rng.randrange(30)}" for _ in range(8)] + [f"{cue_class}{rng.randrange(5)}"]
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "label": label})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def minority_recall(tmp_path, sampler):
    settings = RunSettings(
        data=DataSettings(train_file=str(imbalanced_reviews(tmp_path / "train.jsonl", 2000, seed=1)),
                          test_file=str(imbalanced_reviews(tmp_path / "test.jsonl", 1000, seed=2))),
        tokenizer=TokenizerConfig(min_frequency=1, max_len=16),
        model="boe",
        model_config={"embed_dim": 16, "dropout": 0.0},
        train=TrainConfig(epochs=4, batch_size=32, lr=1e-2, patience=0, monitor="loss", sampler=sampler),
        output=str(tmp_path / sampler),
        device="cpu",
        report=False,
    )
    return train_run(settings, progress=False).metrics["per_class"]["rare"]["recall"]


def test_balanced_sampler_raises_minority_recall(tmp_path):
    # A cue that is right 70% of the time cannot outweigh a 9:1 prior, so plain training
    # mostly answers "common"; drawing both classes equally makes the cue decide.
    plain, balanced = minority_recall(tmp_path, "shuffle"), minority_recall(tmp_path, "balanced")
    assert balanced > plain + 0.25, (plain, balanced)
