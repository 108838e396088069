"""The scikit-learn estimator's n-gram branch, its buckets sized to the training texts (ngrams.buckets_for) against the
file recipe's fixed 2^20 (``model_config={"nb_ngram_buckets": 1048576}``, what fit built before): the saved folder's
size on disk and test accuracy, on a sample of SST-2's training sentences and on all 6,920, tested on its 1,821.

    python bench/estimator_buckets.py --threads 1 [--sizes 300 6920] [--seeds 0 1 2]
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

import numpy as np
from common import parse_seeds_and_threads, parser, splits, write_result

from attnclf.sklearn import AttentionTextClassifier

BEFORE = {"nb_ngram_buckets": 1048576}  # the file recipe's count, as fit built it for every size of data until now


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[300, 6920])
    args = parse_seeds_and_threads(p)
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
    write_result("estimator_buckets", {"cells": cells}, args.out)


if __name__ == "__main__":
    main()
