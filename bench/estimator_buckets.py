"""The file recipe's n-gram branch with its buckets sized to the training texts (ngrams.sized_buckets) against its fixed
2^20 (``nb_ngram_buckets=1048576``), on two routes: the scikit-learn estimator (the default route: saved folder size
and test accuracy on a sample of SST-2's training sentences and on all 6,920, tested on its 1,821), and
`attnclf train --train-file` (``--route command``: model size and validation accuracy, the test files never read).

    python bench/estimator_buckets.py --threads 1 [--sizes 300 6920] [--seeds 0 1 2]
    python bench/estimator_buckets.py --route command [--files sst2:300 sst2:3000 ag:1000] [--seeds 0 1 2]
        [--work runs/command-buckets]

The command route writes each file as bench/small_files.py builds its sets: ``sst2:N`` a sample of N of stsa.binary's
6,920 training sentences (drawn once, seed 0), validated on its 872 dev sentences; ``ag:N`` a sample of N of the
small-files study's 3,000 AG News training rows, validated on its 2,600. Each cell is
`nice -n 5 attnclf train --train-file TRAIN --validation-file VAL --seed S --threads 1 --quiet --no-report
--set nb_ngram_buckets=B`, B the fixed 2^20 ("before") or what the rule train now applies gives for the training
file's distinct bigrams as the recipe's tokenizer reads them ("after": ngrams.sized_buckets; the same model as no
--set builds since); with no test file, metrics.json scores the validation file.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import small_files
from common import parse_seeds_and_threads, parser, splits, write_result

from attnclf.data.base import TextDataset
from attnclf.models.ngrams import sized_buckets
from attnclf.rundir import atomic_write_bytes
from attnclf.sklearn import AttentionTextClassifier
from attnclf.text.tokenizer import Tokenizer
from attnclf.training.settings import DataSettings, settings_for

BEFORE = {"nb_ngram_buckets": 1048576}  # the file recipe's count, as fit built it for every size of data until now


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def estimator_route(args) -> list[dict]:
    data = splits("sst2-sentences", args.data_dir)
    test_y = np.array(data.test.labels)
    cells = []
    for size in args.sizes:
        # (a sample drawn once per size, seed 0: the seeds below vary the fit, not the texts)
        chosen = sorted(random.Random(0).sample(range(len(data.train)), min(size, len(data.train))))
        texts, labels = [data.train.texts[i] for i in chosen], [data.train.labels[i] for i in chosen]
        for seed in args.seeds:
            for name, model_config in (("before", BEFORE), ("after", None)):
                clf = AttentionTextClassifier(model_config=model_config, random_state=seed, threads=args.threads)
                started = time.perf_counter()
                clf.fit(texts, labels)
                seconds = time.perf_counter() - started
                with tempfile.TemporaryDirectory() as tmp:
                    size_bytes = folder_bytes(clf.save(Path(tmp) / "estimator"))
                cell = {"texts": len(texts), "seed": seed, "buckets": name,
                        "nb_ngram_buckets": clf.classifier_.model.config.nb_ngram_buckets,
                        "folder_mib": round(size_bytes / 2 ** 20, 2),
                        "test_accuracy": round(float((clf.predict(data.test.texts) == test_y).mean()), 4),
                        "fit_seconds": round(seconds, 1), "epochs": clf.n_iter_}
                print(cell, flush=True)
                cells.append(cell)
    return cells


def command_files(spec: str, data_dir: str | None) -> tuple[TextDataset, TextDataset]:
    """The training and validation texts of ``spec`` ("sst2:300", "ag:1000"), as the module docstring says."""
    name, size = spec.split(":")
    study_set = {"sst2": "sst2", "ag": "ag3k"}[name]  # (seeded as the small-files study seeds it)
    files = small_files.MAKERS[study_set](data_dir, random.Random(f"small-files {study_set}"), 1.0)
    train = files["train"]
    chosen = sorted(random.Random(0).sample(range(len(train)), min(int(size), len(train))))
    return train.subset(chosen, "train"), files["validation"]


def command_route(args) -> list[dict]:
    work = Path(args.work)
    recipe_tokenizer = settings_for(DataSettings(train_file="train.csv"), "self-attn").tokenizer
    cells = []
    for spec in args.files:
        train, validation = command_files(spec, args.data_dir)
        paths = {part: work / "data" / f"{spec.replace(':', '-')}-{part}.csv" for part in ("train", "validation")}
        for part, data in (("train", train), ("validation", validation)):
            paths[part].parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(paths[part], small_files.csv_bytes(data))
        sized, bigrams = sized_buckets(BEFORE["nb_ngram_buckets"],
                                       Tokenizer.train(train.texts, recipe_tokenizer).encode(train.texts))
        counts = {"before": BEFORE["nb_ngram_buckets"], "after": sized}
        for seed in args.seeds:
            for name, buckets in counts.items():
                output = work / "runs" / spec.replace(":", "-") / name / f"seed-{seed}"
                if not (output / "metrics.json").exists():
                    subprocess.run(["nice", "-n", "5", sys.executable, "-m", "attnclf", "train",
                                    "--train-file", str(paths["train"]), "--validation-file", str(paths["validation"]),
                                    "--seed", str(seed), "--threads", str(args.threads or 1), "--quiet",
                                    "--no-report", "--output", str(output), "--set", f"nb_ngram_buckets={buckets}"],
                                   check=True)
                cell = {"file": spec, "texts": len(train), "validation_texts": len(validation),
                        "distinct_bigrams": bigrams, "seed": seed, "buckets": name, "nb_ngram_buckets": buckets,
                        **small_files.read_cell(output), "folder_mib": round(folder_bytes(output) / 2 ** 20, 2)}
                print(cell, flush=True)
                cells.append(cell)
    return cells


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--route", choices=["estimator", "command"], default="estimator")
    p.add_argument("--sizes", type=int, nargs="+", default=[300, 6920], help="estimator route: training sentences")
    p.add_argument("--files", nargs="+", default=["sst2:300", "sst2:3000", "ag:1000"],
                   help="command route: SET:N, SET sst2 or ag")
    p.add_argument("--work", default="runs/command-buckets", help="command route: folder for the files and runs")
    args = parse_seeds_and_threads(p)
    if args.route == "estimator":
        write_result("estimator_buckets", {"cells": estimator_route(args)}, args.out)
    else:
        write_result("command_buckets", {"cells": command_route(args)}, args.out)


if __name__ == "__main__":
    main()
