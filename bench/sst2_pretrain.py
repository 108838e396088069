"""SST-2 sentences from a pretrained encoder: count vectors, pretrain on them, train seeds, score the ensemble.

    python bench/sst2_pretrain.py --threads 1
    python bench/sst2_pretrain.py --threads 1 --lr 3e-4 --name sst2_pretrain-lr3e-4   # fine-tuning lr

Three steps, each timed on its own:
1. ``attnclf vectors --dataset imdb --dataset sst2-sentences --dim 64``: PPMI + SVD word vectors from IMDB's
   75,000 training and unlabelled reviews and stsa's 6,920 training sentences (no dev or test sentence);
2. ``attnclf pretrain`` on the same texts: the sst2-sentences recipe's encoder learns to restore masked words
   of 64-token pieces, its token embedding fixed at those vectors (std 4); an interrupted run continues;
3. ``attnclf train --dataset sst2-sentences --init-from P --seeds 0 1 2`` (plus ``--lr``): one run per seed,
   each validated on stsa dev, and their averaged probabilities on the 1,821 test sentences.
The result holds each seed's best dev accuracy, the ensemble's dev and test accuracy, and the costs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from attnclf.cli import main as attnclf
from attnclf.ensemble import ENSEMBLE_FILE

from common import data_dir, parser, peak_rss_mb, seed_members, timer, write_result


def run(flags: list[str]) -> None:
    if attnclf(flags) != 0:
        raise SystemExit(f"failed: attnclf {' '.join(flags)}")


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--pretrain-epochs", type=int, default=5)
    p.add_argument("--pretrain-batch-size", type=int, default=128)
    p.add_argument("--pretrain-lr", type=float, default=1e-3)
    p.add_argument("--lr", type=float, help="fine-tuning learning rate (default: the recipe's)")
    p.add_argument("--run-dir", default="runs/bench-sst2-pretrain")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--name", default="sst2_pretrain")
    args = p.parse_args()
    run_dir = Path(args.run_dir)
    data = ["--data-dir", data_dir(args.data_dir)]
    threads = ["--threads", str(args.threads)]
    sources = ["--dataset", "imdb", "--dataset", "sst2-sentences", *data]

    vectors = run_dir / "vectors.vec"
    costs = {}  # wall seconds of each step
    with timer(costs, "vectors"):
        run(["vectors", *sources, "--dim", "64", "--output", str(vectors), "--overwrite", *threads])  # (counted anew)
    pretrained = run_dir / "pretrained"
    with timer(costs, "pretrain"):
        run(["pretrain", *sources, "--recipe", "sst2-sentences", "--embeddings", str(vectors), "--epochs",
             str(args.pretrain_epochs), "--batch-size", str(args.pretrain_batch_size), "--lr", str(args.pretrain_lr),
             "--output", str(pretrained), *threads])
    pretraining = json.loads((pretrained / "pretrain.json").read_text())
    fine_tuned = run_dir / (f"seeds-lr{args.lr:g}" if args.lr else "seeds")
    with timer(costs, "train"):
        run(["train", "--dataset", "sst2-sentences", *data, "--init-from", str(pretrained), "--seeds",
             *map(str, args.seeds), "--output", str(fine_tuned), "--no-report", "--quiet", *threads,
             *(["--lr", str(args.lr)] if args.lr else [])])
    members = seed_members(fine_tuned, args.seeds)
    ensemble = json.loads((fine_tuned / ENSEMBLE_FILE).read_text())
    result = {
        "pretraining": {"epochs": pretraining["epochs"], "tokens": pretraining["tokens"],
                        "pieces": pretraining["pieces"], "words": pretraining["words"],
                        "settings": pretraining["settings"]},
        "fine_tuning_lr": args.lr, "costs": costs, "members": members,
        "member_best_validation_mean": float(np.mean([m["best_validation_accuracy"] for m in members.values()])),
        "member_test_accuracy_mean": float(np.mean([m["test_accuracy"] for m in members.values()])),
        "ensemble_validation_accuracy": (ensemble.get("validation_metrics") or {}).get("accuracy"),
        "ensemble_test_accuracy": ensemble["metrics"]["accuracy"],
        "test_sentences": ensemble["metrics"]["num_examples"],
        "peak_rss_mb": round(peak_rss_mb()),
    }
    write_result(args.name, result, args.out)


if __name__ == "__main__":
    main()
