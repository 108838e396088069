"""What `build_model`'s size check costs: the model built on the meta device first (nothing allocated), so a
max_len or vocabulary too large for the machine is one line, then built for real; against the class alone.

    python bench/build_cost.py

CPU milliseconds of one thread, the median of 11 builds each, for the demo's `self-attn` shape and the IMDB recipe's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from attnclf.models.classifiers import MODELS, build_model, config_for

CASES = {
    "demo self-attn (defaults, 2,000 words)": dict(vocab_size=2000),
    "IMDB recipe shape (30,000 words, 800 tokens, n-gram branch)": dict(
        vocab_size=30000, max_len=800, d_model=64, heads=4, layers=1, ff_dim=256, attention_window=64,
        nb_ngram_buckets=2097152),
}


def median_cpu_ms(make, repeats: int = 11) -> float:
    times = []
    for _ in range(repeats):
        torch.manual_seed(0)
        started = time.process_time()
        make()
        times.append(time.process_time() - started)
    return statistics.median(times) * 1000


def main() -> None:
    # (no options: a parser all the same, so that --help answers instead of running the measurement)
    argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    torch.set_num_threads(1)
    for label, fields in CASES.items():
        config = config_for("self-attn", **fields)
        checked = median_cpu_ms(lambda: build_model("self-attn", **fields))
        alone = median_cpu_ms(lambda: MODELS["self-attn"].model_class(config))
        print(f"{label}: build_model {checked:.1f} CPU ms, the class alone {alone:.1f} ms: +{checked - alone:.1f} ms")


if __name__ == "__main__":
    main()
