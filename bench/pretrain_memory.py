"""`attnclf pretrain`'s memory over epochs, with glibc's mmap threshold left dynamic and fixed at 4 MB.

    python bench/pretrain_memory.py --threads 1 [--texts 8000] [--epochs 4] [--rounds 1]

Runs itself as a child process ``--rounds`` times each way, alternated: the IMDB recipe's encoder pretrained on
the first ``--texts`` of IMDB's training and unlabelled reviews (800-token pieces, batch 128, as the IMDB probe in
BENCHMARKS.md), one child as glibc leaves the process and one after ``fix_mmap_threshold()``, what `attnclf
pretrain` calls. Each child reports, after every epoch, its resident memory and its peak so far, the epoch's CPU
seconds (the first epoch's include tokenising) and loss, and the sha256 of the encoder it wrote. About 3 minutes of one thread per child at the defaults.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


from common import alternate_children, data_dir, parent_args, parser, write_result


def _memory_mb() -> tuple[int, int]:
    """(resident now, peak resident so far) of this process, in MB."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(status["VmRSS"].split()[0]) // 1024, int(status["VmHWM"].split()[0]) // 1024


def child(args) -> dict:
    from attnclf.data.registry import unlabelled_corpus
    from attnclf.recipes import recipe_for
    from attnclf.rundir import file_sha256
    from attnclf.training.pretrain import ENCODER_FILE, PretrainSettings, pretrain_encoder

    from attnclf.training.device import fix_mmap_threshold

    fixed = fix_mmap_threshold() if args.fixed else False
    texts = list(unlabelled_corpus("imdb", data_dir(args.data_dir)))[: args.texts]
    recipe = recipe_for("imdb")
    settings = PretrainSettings(model_config=recipe["model_config"], max_len=recipe["tokenizer"]["max_len"],
                                epochs=args.epochs, batch_size=128)
    epochs, last = [], [time.process_time()]

    def log(message: str) -> None:
        if message.startswith("pretrain: epoch"):
            now = time.process_time()
            rss, peak = _memory_mb()
            epochs.append({"rss_mb": rss, "peak_rss_mb": peak, "cpu_seconds": round(now - last[0], 1)})
            last[0] = now

    with tempfile.TemporaryDirectory() as output:
        record = pretrain_encoder(texts, settings, output, log=log)
        encoder = file_sha256(Path(output) / ENCODER_FILE)
    assert len(epochs) == len(record["epochs"]), "the log's wording changed: no epoch was measured"
    for epoch, done in zip(epochs, record["epochs"]):
        epoch["loss"] = done["loss"]
    return {"threshold_fixed": fixed, "pieces": record["pieces"], "epochs": epochs, "encoder_sha256": encoder}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--texts", type=int, default=8000, help="IMDB texts to pretrain on")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--fixed", action="store_true", help=argparse.SUPPRESS)
    args = parent_args(p, child, rounds=1)
    if args is None:
        return
    sizes = ["--texts", str(args.texts), "--epochs", str(args.epochs)]
    runs = alternate_children(__file__, args, {"dynamic": (sizes, {}), "fixed at 4 MB": ([*sizes, "--fixed"], {})})
    write_result("pretrain_memory", {"texts": args.texts, "epochs": args.epochs, "runs": runs}, args.out)


if __name__ == "__main__":
    main()
