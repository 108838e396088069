"""glibc's allocator thresholds: attnclf training and prediction with and without large blocks kept.

    python bench/allocator.py --threads 1

Runs itself as a child process ``--rounds`` times each way, alternated: with the environment as it is, and with
``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=1073741824`` (glibc then
keeps freed blocks up to 1 GB for reuse instead of returning them to the system). Each child trains the IMDB
recipe's network on hf_peer's 1,000 reviews for one epoch and predicts its 1,000 test reviews: median CPU s of 3
after a warm-up, and the child's peak resident memory. About two minutes of one thread.
"""

from __future__ import annotations

import resource
import time

import numpy as np
import torch

from common import alternate_children, cli_settings, parent_args, parser, sample, splits, write_result

TUNABLES = "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=1073741824"


def child(args) -> dict:
    from attnclf.evaluation.predict import predict_probabilities
    from attnclf.text.batching import BucketBatches
    from attnclf.text.tokenizer import Tokenizer
    from hf_peer import train_attnclf

    settings = cli_settings("imdb", "unused", "--epochs", "1")
    data = splits("imdb", args.data_dir, settings.train.seed)
    train, val, test = sample(data.train, 1000, 1), sample(data.validation, 200, 2), sample(data.test, 1000, 3)
    tokenizer = Tokenizer.train(train.texts, settings.tokenizer)
    train_batches, val_batches, test_batches = (
        BucketBatches(tokenizer.encode(d.texts), d.labels, size, shuffle, settings.train.seed)
        for d, size, shuffle in ((train, settings.train.batch_size, True), (val, 128, False), (test, 128, False)))

    def round_() -> tuple[float, float]:
        model, _, cpu = train_attnclf(settings, tokenizer.vocab_size, 2, train.label_names, train_batches,
                                      val_batches, settings.model_config)
        started = time.process_time()
        predict_probabilities(model, test_batches, torch.device("cpu"))
        return cpu, time.process_time() - started

    round_()  # warm-up
    rounds = [round_() for _ in range(3)]
    return {"train_cpu_seconds": float(np.median([r[0] for r in rounds])),
            "predict_cpu_seconds": float(np.median([r[1] for r in rounds])),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    args = parent_args(p, child, rounds=2)
    if args is None:
        return
    runs = alternate_children(__file__, args, {"default": ([], {}),
                                               "large blocks kept": ([], {"GLIBC_TUNABLES": TUNABLES})})
    write_result("allocator", {"tunables": TUNABLES, "runs": runs}, args.out)


if __name__ == "__main__":
    main()
