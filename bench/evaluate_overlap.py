"""What `evaluate --test-file` (and `--dataset` of another dataset) pays to count the test texts its runs learned.

    python bench/evaluate_overlap.py [--data-dir ../shared/datasets]

IMDB's 25,000 training reviews and 25,000 test reviews written as JSON-lines files, and ``learned_text_warnings``
timed (median of 3, wall and CPU) for runs trained on the training file: one run; three seeds of one split
(``--split-seed``); three seeds each splitting its own way (they learned the same texts: the file is read once); one
run trained on the built-in dataset (`--dataset imdb`), whose reviews are read from the archive, and three seeds of it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from attnclf.data.files import load_file
from attnclf.data.registry import load_splits
from attnclf.training.run_data import learned_text_warnings
from attnclf.training.settings import DataSettings


def write_jsonl(path: Path, data) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        for text, label in zip(data.texts, data.labels):
            out.write(json.dumps({"text": text, "label": data.label_names[label]}) + "\n")
    return path


def config(seed: int, split_seed: int | None = None, **data) -> dict:
    data = asdict(DataSettings(**data, split_seed=split_seed))
    return {"settings": {"data": data, "train": {"seed": seed}, "output": f"runs/seed-{seed}"}}


def main(data_dir: str) -> None:
    splits = load_splits("imdb", data_dir)
    with tempfile.TemporaryDirectory() as folder:
        train = write_jsonl(Path(folder) / "train.jsonl", splits.train)
        test = load_file(write_jsonl(Path(folder) / "test.jsonl", splits.test), split="test")
        cases = {"one run": [config(0, train_file=str(train))],
                 "3 seeds, one --split-seed": [config(seed, split_seed=0, train_file=str(train)) for seed in range(3)],
                 "3 seeds, 3 splits": [config(seed, train_file=str(train)) for seed in range(3)],
                 "one run of --dataset imdb": [config(0, dataset="imdb", data_dir=data_dir)],
                 "3 seeds of --dataset imdb": [config(seed, dataset="imdb", data_dir=data_dir) for seed in range(3)]}
        for name, configs in cases.items():
            wall, cpu = [], []
            for _ in range(3):
                started, started_cpu = time.perf_counter(), time.process_time()
                found = learned_text_warnings(configs, test)
                wall.append(time.perf_counter() - started)
                cpu.append(time.process_time() - started_cpu)
            print(f"{name}: {statistics.median(wall):.2f} s median of 3 ({statistics.median(cpu):.2f} s of CPU, "
                  f"which a busy machine inflates less): {found}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("ATTNCLF_DATA_DIR", "../shared/datasets"))
    main(parser.parse_args().data_dir)
