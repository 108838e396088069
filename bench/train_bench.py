"""Train one dataset's default recipe and measure it: accuracy, speed, memory.

Shared by bench/imdb.py, bench/sst2.py and bench/newsgroups.py. Extra
``attnclf train`` flags after ``--`` override the recipe (for experiments).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from attnclf.classifier import Classifier
from attnclf.data.base import TextDataset
from attnclf.training.run import train_run

from common import cli_settings, cpu_seconds, data_dir, parse_with_threads, parser, peak_rss_mb, splits, write_result


def measure_inference(run_dir: Path, texts: list[str], repeats: int = 3, bf16: bool = False) -> dict:
    """Median texts/s and tokens/s of ``Classifier.predict_proba`` (tokenising included), and its labels."""
    clf = Classifier.load(run_dir, device="cpu", bf16=bf16)
    tokens = sum(len(ids) for ids in clf.tokenizer.encode(texts))
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        labels = clf.predict_proba(texts).argmax(1)
        seconds.append(time.perf_counter() - started)
    median = float(np.median(seconds))
    return {"texts": len(texts), "tokens": tokens, "seconds_median": round(median, 3),
            "texts_per_second": round(len(texts) / median, 1), "tokens_per_second": round(tokens / median),
            "labels": labels}


def inference_speeds(run_dir: Path, texts: list[str]) -> dict:
    """float32 and bf16-autocast inference (``attnclf predict --bf16``), and how many labels bf16 changes."""
    exact, fast = measure_inference(run_dir, texts), measure_inference(run_dir, texts, bf16=True)
    fast["labels_changed"] = int((fast.pop("labels") != exact.pop("labels")).sum())
    fast["speedup"] = round(exact["seconds_median"] / fast["seconds_median"], 3)
    return {**exact, "bf16": fast}


_REPORT_PEAK = (
    "import sys\n"
    "from attnclf.cli import main\n"
    "code = main(sys.argv[1:])\n"
    # VmHWM belongs to this process's own memory map, so unlike ru_maxrss it does not
    # inherit the parent's peak across fork + exec.
    "peak = next(l for l in open('/proc/self/status') if l.startswith('VmHWM'))\n"
    "print(peak.split()[1], file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def inference_process_memory(run_dir: Path, dataset: str) -> dict:
    """Peak RSS and wall time of a fresh ``attnclf evaluate`` process on the test split."""
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _REPORT_PEAK, "evaluate", str(run_dir), "--dataset", dataset,
                          "--data-dir", data_dir(), "--json"], capture_output=True, text=True, check=True)
    return {"command": f"attnclf evaluate RUN_DIR --dataset {dataset} --json",
            "accuracy": json.loads(out.stdout)["accuracy"],
            "wall_seconds": round(time.perf_counter() - started, 2),
            "peak_rss_mb": round(int(out.stderr.split()[-1]) / 1024)}


def main(dataset: str, doc: str, extra_tests: dict[str, TextDataset] | None = None) -> None:
    """Parse ``[--run-dir DIR] [--threads N] [-- TRAIN FLAGS]``, train, measure, write the JSON."""
    p = parser(doc.splitlines()[0])
    p.add_argument("--run-dir", default=f"runs/bench-{dataset}", help="where the trained run goes")
    p.add_argument("--name", default=dataset, help="result name: bench/results/<name>.json")
    p.add_argument("flags", nargs="*", help="extra `attnclf train` flags, after --")
    args = parse_with_threads(p, default=None)
    settings = cli_settings(dataset, args.run_dir, *args.flags)
    print(f"training {dataset}: model {settings.model} {settings.model_config} | tokenizer "
          f"{settings.tokenizer.kind} {settings.tokenizer.max_len} | train {settings.train}", flush=True)

    cpu_before = cpu_seconds()
    result = train_run(settings, progress=False)
    train_cpu = cpu_seconds() - cpu_before
    train_peak = peak_rss_mb()
    history = result.history
    train_seconds = result.metrics["train_seconds"]

    data = splits(dataset, args.data_dir, settings.train.seed)
    clf = Classifier.load(result.run_dir, device="cpu")
    tokens_per_epoch = sum(len(ids) for ids in clf.tokenizer.encode(data.train.texts))
    elapsed, reached_90 = 0.0, None
    for record in history:
        elapsed += record["seconds"]  # an epoch's seconds include its validation pass
        if reached_90 is None and record["val_accuracy"] >= 0.90:
            reached_90 = round(elapsed, 1)

    extra = {name: float((clf.predict_proba(test.texts).argmax(1) == np.asarray(test.labels)).mean())
             for name, test in (extra_tests or {}).items()}

    write_result(args.name, {
        "command_equivalent": " ".join(["attnclf train --dataset", dataset, *args.flags]),
        "settings": settings.to_dict(),
        "parameters": result.metrics["parameters"],
        "test_accuracy": result.metrics["accuracy"],
        "test_macro_f1": result.metrics["macro_f1"],
        "extra_tests": extra,
        "best_validation_accuracy": max(r["val_accuracy"] for r in history),
        "history": history,
        "train": {
            "wall_seconds": train_seconds,
            "cpu_seconds": round(train_cpu, 1),
            "epochs": len(history),
            "tokens_per_epoch": tokens_per_epoch,
            "tokens_per_second": round(tokens_per_epoch * len(history) / train_seconds),
            "texts_per_second": round(len(data.train) * len(history) / train_seconds, 1),
            "seconds_to_90_validation": reached_90,
            "peak_rss_mb": round(train_peak),
        },
        "inference": inference_speeds(result.run_dir, data.test.texts),
        "inference_process": inference_process_memory(result.run_dir, dataset),
    }, args.out)
