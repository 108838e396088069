"""The case study's synthetic set with the default `self-attn` recipe (target: >= 99% test accuracy).

    python bench/synthetic.py            # about a minute on 2 cores

Trains exactly what ``attnclf train --dataset synthetic`` trains, then records
test accuracy, training time and peak memory.
"""

from __future__ import annotations

import tempfile

from attnclf.training.run import train_run

from common import cli_settings, parse_seeds_and_threads, parser, peak_rss_mb, write_result


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    args = parse_seeds_and_threads(p)
    runs = []
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as out:
            result = train_run(cli_settings("synthetic", out, "--seed", str(seed)), progress=False)
        runs.append({"seed": seed, "test_accuracy": result.metrics["accuracy"], "epochs": len(result.history),
                     "train_seconds": result.metrics["train_seconds"], "parameters": result.metrics["parameters"]})
        print(runs[-1], flush=True)
    accuracies = sorted(r["test_accuracy"] for r in runs)
    write_result("synthetic", {
        "command_equivalent": "attnclf train --dataset synthetic --seed SEED",
        "runs": runs,
        "test_accuracy_min": accuracies[0],
        "test_accuracy_median": accuracies[len(accuracies) // 2],
        "peak_rss_mb": round(peak_rss_mb()),
    }, args.out)


if __name__ == "__main__":
    main()
