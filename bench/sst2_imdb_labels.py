"""SST-2 sentences trained beside IMDB's 25,000 labelled training reviews: does related labelled data help?

    python bench/sst2_vectors.py --threads 1 --run-dir runs/s28/base --out /tmp/base.json   # the base runs
    python bench/sst2_imdb_labels.py --base runs/s28/base/seed-{0,1,2} --output runs/tune/sst2-imdb --threads 1
    python bench/sst2_imdb_labels.py --baselines --output runs/tune/sst2-imdb   # the linear baselines, both files

Each student is its base run again (the sst2-sentences recipe with counted word vectors: the same settings, vectors
and seed) on a larger training file: stsa.binary's training sentences plus IMDB's labelled training reviews, ``neg``
as ``negative`` and ``pos`` as ``positive``. Reviews are long, so the student reads up to ``--max-len`` tokens
(head + tail; every SST sentence fits in 64) and keeps a ``--vocab-size`` vocabulary, so that IMDB's counts do not
push SST's rarer words out of the recipe's 20,000. It validates on the base run's validation sentences (stsa dev).
A rerun keeps the students that finished and continues one cut short. No test file is given: a student's test
accuracy is read only by an explicit ``attnclf evaluate STUDENTS --test-file OUTPUT/test.jsonl``. IMDB's test reviews are never read.
``--baselines`` instead fits ``bench/baselines.py``'s three linear models to stsa's training sentences alone and to
the students' larger file (OUTPUT/train-s0.jsonl: every seed's is the same, stsa's split being fixed), each C chosen
on stsa dev, and reads stsa test once for each.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from attnclf.data.imdb import load as load_imdb
from attnclf.training.run import train_or_continue
from attnclf.training.settings import DataSettings, resume_settings
from attnclf.training.trainer import best_epoch

from baselines import _models, fit_and_choose
from common import data_dir, labelled_rows, parser, splits, write_jsonl, write_result

SST_NAME_OF_IMDB = {"neg": "negative", "pos": "positive"}


def baselines(output: Path) -> dict:
    """Each linear baseline fitted to stsa's sentences alone and with IMDB's reviews, validated and tested on stsa's."""
    def read(path: Path) -> tuple[list[str], np.ndarray]:
        with open(path, encoding="utf-8") as lines:
            rows = [json.loads(line) for line in lines]
        return [row["text"] for row in rows], np.array([row["label"] == "positive" for row in rows], dtype=int)

    if not (output / "train-s0.jsonl").is_file():
        raise SystemExit(f"{output} holds no students' files (train-s0.jsonl): train the students (--base) first")
    larger, dev, test = read(output / "train-s0.jsonl"), read(output / "dev-s0.jsonl"), read(output / "test.jsonl")
    alone = (larger[0][:-25000], larger[1][:-25000])  # (the file is stsa's sentences, then the 25,000 reviews)
    result = {}
    for trained_on, train in (("stsa", alone), ("stsa+imdb", larger)):
        for name, vectorizer, make, grid in _models(2):
            entry = fit_and_choose(vectorizer, make, grid, train, dev, test)
            result[f"{name} ({trained_on})"] = entry
            print(f"{name:17s} {trained_on:10s} test {entry['test_accuracy']:.4f} "
                  f"(dev {entry['validation_accuracy']:.4f}, C={entry['C']})", flush=True)
    return result


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--base", nargs="+", help="the sst2-sentences runs with vectors, one per seed")
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--vocab-size", type=int, default=50000)
    p.add_argument("--output", default="runs/bench-sst2-imdb-labels")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--baselines", action="store_true", help="fit the linear baselines instead (see above)")
    args = p.parse_args()
    if args.baselines:
        write_result("sst2_imdb_labels-baselines", {"models": baselines(Path(args.output))}, args.out)
        return
    if not args.base:
        p.error("give the base runs (--base RUN ...), or --baselines")
    torch.set_num_threads(args.threads)
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    imdb = load_imdb([Path(data_dir(args.data_dir))]).train
    sst_names = list(SST_NAME_OF_IMDB.values())
    reviews = [{"text": text, "label": SST_NAME_OF_IMDB[imdb.label_names[label]]}
               for text, label in zip(imdb.texts, imdb.labels)]

    students = {}
    for base in args.base:
        settings = resume_settings(base, threads=args.threads)
        seed = settings.train.seed
        data = splits("sst2-sentences", args.data_dir, seed=seed)

        train_file, dev_file = output / f"train-s{seed}.jsonl", output / f"dev-s{seed}.jsonl"
        write_jsonl(train_file, labelled_rows(data.train, sst_names) + reviews)
        write_jsonl(dev_file, labelled_rows(data.validation, sst_names))
        # (the test file, for the one test reading the rule allows)
        write_jsonl(output / "test.jsonl", labelled_rows(data.test, sst_names))
        settings.data = DataSettings(train_file=str(train_file), validation_file=str(dev_file))
        settings.tokenizer = replace(settings.tokenizer, max_len=args.max_len, vocab_size=args.vocab_size)
        settings = replace(settings, output=str(output / f"s{seed}"), report=False)
        result = train_or_continue(settings, resume=True, progress=False)  # (a rerun keeps or continues each)
        best = best_epoch(result.history, settings.train.monitor)
        students[seed] = {"run": settings.output, "base": base, "best_epoch": best["epoch"],
                          "best_validation_accuracy": best["val_accuracy"],
                          "train_seconds": round(sum(h["seconds"] for h in result.history), 1),
                          "train_examples": len(data.train) + len(reviews)}
        print(f"seed {seed}: best validation {best['val_accuracy']:.4f} (epoch {best['epoch']})", flush=True)
    write_result("sst2_imdb_labels", {
        "max_len": args.max_len, "vocab_size": args.vocab_size, "imdb_reviews": len(reviews), "students": students,
        "mean_best_validation_accuracy": float(np.mean([s["best_validation_accuracy"] for s in students.values()])),
    }, args.out)


if __name__ == "__main__":
    main()
