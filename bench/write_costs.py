"""Two costs session 20's fixes added, each measured alone.

    python bench/write_costs.py [--data-dir ../shared/datasets]

1. fsync before every atomic rename (``rundir.publish``), and of the folder after it: one tiny training (`attnclf
   train --dataset demo --epochs 1 --threads 1`), with ``os.fsync`` wrapped to count and time its calls on files
   and on folders apart.
2. The shared-texts warning, which compares texts as the run reads them (the tokenizer's ``clean``): IMDB's 25,000
   training reviews against its 25,000 test reviews, three times each way, the median, against comparing the texts
   as given.
"""

from __future__ import annotations

import argparse
import os
import stat
import statistics
import tempfile
import time

from attnclf.cli import main
from attnclf.data.registry import load_splits
from attnclf.text.cleaning import CleaningConfig
from attnclf.training.run_data import shared_text_warnings


def fsync_cost() -> None:
    spent, real = {"file": [], "folder": []}, os.fsync

    def timed(fd):
        kind = "folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        started = time.perf_counter()
        real(fd)
        spent[kind].append(time.perf_counter() - started)

    os.fsync = timed
    try:
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as out:
            assert main(["train", "--dataset", "demo", "--epochs", "1", "--threads", "1", "--output", f"{out}/run",
                         "--quiet"]) == 0
    finally:
        os.fsync = real
    print("fsync: " + ", ".join(f"{len(times)} of {kind}s, {sum(times) * 1000:.1f} ms"
                                for kind, times in spent.items())
          + f", in a run of {time.perf_counter() - started:.1f} s")


def shared_texts_cost(data_dir: str) -> None:
    splits = load_splits("imdb", data_dir)

    def exact() -> int:  # the comparison before: texts as given
        seen = set(splits.train.texts)
        return sum(text in seen for text in splits.test.texts)

    for name, measure in [("texts as given", exact),
                          ("as the run reads them", lambda: shared_text_warnings(splits, CleaningConfig()))]:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            found = measure()
            times.append(time.perf_counter() - started)
        print(f"shared texts, {name}: {statistics.median(times):.3f} s median of 3: {found}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("ATTNCLF_DATA_DIR", "../shared/datasets"))
    args = parser.parse_args()
    fsync_cost()
    shared_texts_cost(args.data_dir)
