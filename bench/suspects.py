"""How many deliberately flipped labels `attnclf suspects` ranks first, against scoring the training rows in sample.

    python bench/suspects.py --dataset sst2-sentences --flip 0.05 --threads 1
    python bench/suspects.py --dataset imdb --sample 10000 --flip 0.05 --threads 1 --model self-attn

Flips ``--flip`` of the dataset's training labels (seeded; to another class, drawn at random), writes the rows to
OUTPUT/train-flipped.csv, then times two rankings of them by their given label's probability, lowest first:
``attnclf suspects`` (each row scored by a model trained on the other folds) and the in-sample contrast, one model
`attnclf train` trains on the file (a share held out to validate, as it does) scoring every row of it, as
`attnclf evaluate --errors` on the training file would. Each is scored by the precision of its top N rows, N the
number flipped (its recall too, then), and by the rows it predicts as another label than the given. ``--sample N``
ranks N of the training rows instead of all, drawn by ``numpy.random.default_rng(0).choice(rows, N, replace=False)``
and kept in their order (before any flip): a user's file of N texts, the same N every time.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import numpy as np

from attnclf.classifier import Classifier
from attnclf.data.base import TextDataset
from attnclf.cli import main as attnclf
from attnclf.training.settings import DataSettings
from attnclf.training.suspects import ranked_suspects, training_rows

from common import data_dir, parser, write_result


def flipped_rows(rows, share: float, seed: int) -> list[int]:
    """Flip ``share`` of ``rows``' labels in place, each to another class drawn at random; the rows flipped."""
    draw = np.random.default_rng(seed)
    chosen = sorted(draw.choice(len(rows), size=round(share * len(rows)), replace=False).tolist())
    classes = len(rows.label_names)
    for i in chosen:
        rows.labels[i] = (rows.labels[i] + int(draw.integers(1, classes))) % classes
    return chosen


def sampled(rows, size: int):
    """``size`` of ``rows``, drawn reproducibly (seed 0) and kept in their order: a user's file of that many texts."""
    chosen = np.sort(np.random.default_rng(0).choice(len(rows), size=size, replace=False))
    return TextDataset([rows.texts[i] for i in chosen], [rows.labels[i] for i in chosen], rows.label_names)


def scored(ranked: list[dict], flipped: set[int]) -> dict:
    """The precision of the top len(flipped) rows at finding the flipped ones, and of the rows predicted otherwise."""
    top = {row["row"] - 1 for row in ranked[:len(flipped)]}
    disagreeing = {row["row"] - 1 for row in ranked if row["margin"] < 0}
    return {"precision_at_flipped": round(len(top & flipped) / len(flipped), 4),
            "predicted_otherwise": len(disagreeing),
            "predicted_otherwise_precision": round(len(disagreeing & flipped) / max(len(disagreeing), 1), 4),
            "predicted_otherwise_recall": round(len(disagreeing & flipped) / len(flipped), 4)}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--dataset", default="sst2-sentences")
    p.add_argument("--flip", type=float, default=0.05, help="share of the training labels flipped (default: 0.05)")
    p.add_argument("--seed", type=int, default=0, help="seeds the flips (the folds and models: attnclf's --seed 0)")
    p.add_argument("--sample", type=int, help="rank this many of the training rows, drawn with seed 0 (default: all)")
    p.add_argument("--model", default="boe")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--output", default="runs/bench-suspects", help="folder of the file, the folds and the model")
    args = p.parse_args()

    rows = training_rows(DataSettings(dataset=args.dataset, data_dir=data_dir(args.data_dir)), args.folds, 0)
    if args.sample is not None and args.sample < len(rows):
        rows = sampled(rows, args.sample)
    flipped = flipped_rows(rows, args.flip, args.seed)
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    train = output / "train-flipped.csv"
    with open(train, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows((text, rows.label_names[label]) for text, label in zip(rows.texts, rows.labels))
    common = ["--train-file", str(train), "--model", args.model, "--threads", str(args.threads), "--quiet",
              "--overwrite", "--device", "cpu"]

    started, cpu_started = time.perf_counter(), time.process_time()
    assert attnclf(["suspects", *common, "--folds", str(args.folds), "--work-dir", str(output / "folds"),
                    "--output", str(output / "suspects.csv"), "--top", "0"]) == 0
    out_of_fold_seconds = time.perf_counter() - started
    out_of_fold_cpu = time.process_time() - cpu_started
    with open(output / "suspects.csv", encoding="utf-8", newline="") as handle:
        out_of_fold = [{"row": int(row["row"]), "margin": float(row["margin"])} for row in csv.DictReader(handle)]

    started, cpu_started = time.perf_counter(), time.process_time()
    assert attnclf(["train", *common, "--output", str(output / "in-sample"), "--no-report"]) == 0
    model = Classifier.load(output / "in-sample", device="cpu")
    probabilities = model.predict_proba(rows.texts)[:, [model.label_names.index(n) for n in rows.label_names]]
    in_sample = ranked_suspects(rows, probabilities, np.zeros(len(rows), dtype=int))
    in_sample_seconds = time.perf_counter() - started
    in_sample_cpu = time.process_time() - cpu_started

    flipped_set = set(flipped)
    write_result("suspects", {
        "dataset": args.dataset, "sample": args.sample, "rows": len(rows), "flipped": len(flipped),
        "flip_seed": args.seed,
        "model": args.model, "folds": args.folds, "threads": args.threads,
        "out_of_fold": {"seconds": round(out_of_fold_seconds, 1), "cpu_seconds": round(out_of_fold_cpu, 1),
                        **scored(out_of_fold, flipped_set)},
        "in_sample": {"seconds": round(in_sample_seconds, 1), "cpu_seconds": round(in_sample_cpu, 1),
                      **scored(in_sample, flipped_set)},
    }, args.out)


if __name__ == "__main__":
    main()
