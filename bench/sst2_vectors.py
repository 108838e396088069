"""SST-2 from PPMI word vectors: count them, train seeds from them, score their ensemble.

    python bench/sst2_vectors.py --threads 1                  # sst2-sentences, seeds 0 1 2
    python bench/sst2_vectors.py --dataset sst2 --threads 1   # GLUE phrases; GLUE dev and stsa.binary test
    python bench/sst2_vectors.py --seeds 0 1 --vectors-from sst2-sentences --name sst2_vectors-own

The pretraining is ``attnclf vectors --dataset imdb --dataset DATASET``:
positive PMI + SVD over IMDB's 75,000 training and unlabelled reviews and the
dataset's training texts, no labels, nothing from its validation, dev or test
sentences; its cost is reported on its own. Then ``attnclf train --dataset
DATASET --embeddings VECTORS --seeds 0 1 2``: one run per seed, and the
members' averaged probabilities on the test sentences (stsa.binary's 1,821;
for ``sst2``, GLUE dev's 872, and stsa.binary's test too). Validation chose the
recipe; test is read once here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from attnclf.cli import main as attnclf
from attnclf.data.registry import unlabelled_corpus
from attnclf.ensemble import ENSEMBLE_FILE, Ensemble
from attnclf.text.vectors import count_vectors

from common import data_dir, parse_with_threads, parser, peak_rss_mb, seed_members, splits, write_result


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--dataset", choices=["sst2-sentences", "sst2"], default="sst2-sentences")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--vectors-from", nargs="+", help="datasets counted (default: imdb and --dataset)")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--embeddings-std", type=float, default=4.0, help="train --embeddings-std (default: train's)")
    p.add_argument("--run-dir", help="default: runs/bench-sst2-vectors, or runs/bench-glue-vectors for sst2")
    p.add_argument("--name", help="result name (default: sst2_vectors, or glue_vectors for sst2)")
    args = parse_with_threads(p, default=None)
    glue = args.dataset == "sst2"
    run_dir = Path(args.run_dir or f"runs/bench-{'glue' if glue else 'sst2'}-vectors")
    args.name = args.name or f"{'glue' if glue else 'sst2'}_vectors"
    run_dir.mkdir(parents=True, exist_ok=True)

    started, cpu = time.perf_counter(), time.process_time()
    args.vectors_from = args.vectors_from or ["imdb", args.dataset]
    texts = [text for name in args.vectors_from for text in unlabelled_corpus(name, data_dir(args.data_dir))]
    vectors = count_vectors(texts, dim=args.dim)
    vectors_path = run_dir / "vectors.vec"
    vectors.save(vectors_path)
    pretraining = {"datasets": args.vectors_from, "texts": len(texts), "words": len(vectors.words),
                   "dim": vectors.dim, "wall_seconds": round(time.perf_counter() - started, 1),
                   "cpu_seconds": round(time.process_time() - cpu, 1)}
    print(f"vectors: {pretraining}", flush=True)

    started, cpu = time.perf_counter(), time.process_time()
    flags = ["train", "--dataset", args.dataset, "--data-dir", data_dir(args.data_dir), "--seeds",
             *map(str, args.seeds), "--embeddings", str(vectors_path), "--embeddings-std", str(args.embeddings_std),
             "--output", str(run_dir), "--no-report", "--quiet"]  # one run per seed, then their ensemble
    if attnclf(flags + (["--threads", str(args.threads)] if args.threads else [])) != 0:
        raise SystemExit("training failed")
    training = {"wall_seconds": round(time.perf_counter() - started, 1),
                "cpu_seconds": round(time.process_time() - cpu, 1)}
    members = seed_members(run_dir, args.seeds)
    ensemble = json.loads((run_dir / ENSEMBLE_FILE).read_text())["metrics"]
    extra = {}
    if glue:  # the same models on SST's test sentences, which GLUE keeps unlabelled
        test = splits("sst2-sentences", args.data_dir).test
        probabilities = Ensemble.load([run_dir]).predict_proba(test.texts)
        extra["stsa_binary_ensemble_test_accuracy"] = float((probabilities.argmax(1) == np.array(test.labels)).mean())
        print(f"ensemble on stsa.binary test: {extra['stsa_binary_ensemble_test_accuracy']:.4f}", flush=True)
    write_result(args.name, {
        "pretraining": pretraining, "embeddings_std": args.embeddings_std, "training": training, "members": members,
        "member_test_accuracy_mean": float(np.mean([m["test_accuracy"] for m in members.values()])),
        "dataset": args.dataset, "ensemble_test_accuracy": ensemble["accuracy"],
        "test_sentences": ensemble["num_examples"], **extra,
        "peak_rss_mb": round(peak_rss_mb()),
    }, args.out)
    print(f"ensemble of {len(args.seeds)}: {ensemble['accuracy']:.4f} on {ensemble['num_examples']} test sentences",
          flush=True)


if __name__ == "__main__":
    main()
