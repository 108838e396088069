"""What reading a compressed data file costs: IMDB's 25,000 training reviews written as one ``label,text`` CSV, then
gzipped, bzip2-ed and xz-ed (each tool's default level: gzip 6, bzip2 9, xz 6), each read with ``load_file`` five
times, the median and range of the wall times printed beside the file's size.

    python bench/compressed_reading.py [--data-dir ../shared/datasets] [--runs 5]
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import lzma
import statistics
import tempfile
import time
from pathlib import Path

from attnclf.data.files import load_file
from attnclf.data.registry import load_splits
from small_files import csv_bytes

COMPRESS = {"": lambda data: data, ".gz": lambda data: gzip.compress(data, compresslevel=6),
            ".bz2": lambda data: bz2.compress(data, compresslevel=9), ".xz": lambda data: lzma.compress(data, preset=6)}


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    written = csv_bytes(load_splits("imdb", args.data_dir).train)
    with tempfile.TemporaryDirectory() as work:
        base = None
        for compression, compress in COMPRESS.items():
            path = Path(work) / f"imdb_train.csv{compression}"
            path.write_bytes(compress(written))
            times = []
            for _ in range(args.runs):
                started = time.perf_counter()
                data = load_file(path, label_column="label")
                times.append(time.perf_counter() - started)
            median = statistics.median(times)
            base = base or median
            print(f"{path.name:<20} {path.stat().st_size / 1e6:6.1f} MB  {len(data.texts):,} texts  load_file median "
                  f"{median:.2f} s ({min(times):.2f}-{max(times):.2f})  x{median / base:.2f} of the .csv's")


if __name__ == "__main__":
    main()
