"""How evenly do self-attention heads spread their weight, untrained and trained? A basis for `explain --heads`.

    python bench/heads_uniformity.py --threads 1 [--texts 400] [--setups synthetic sst2-sentences ...]

`attnclf explain --heads` marks a token "(even)", and a head whose every token is, "uniform", when its largest
weight is at most ``EVEN_WITHIN`` times 1/n (n: the tokens it can attend to). Per setup, a small model is trained as
`attnclf train --dataset D FLAGS` trains it, and the same model is built again as training built it before its
first step (same seed, same config: the untrained heads). On a seeded sample of test texts (two tokens or more:
one token has one weight, 1), every layer's and head's map is read, and each query row gives r = its largest weight
x n (1: spread evenly; n: all on one token; ``spread_ratios``, as `explain --heads` reads it). Recorded per setup
and state: quantiles of r, overall, per head and by text length; and, at several thresholds, the share of rows
marked "(even)" and of (text, head) pairs called "uniform". The setups are self-attn but the last, transformer-mean.
"""

from __future__ import annotations

import tempfile
import time

import numpy as np
import torch

from attnclf.classifier import Classifier
from attnclf.explain.methods import self_attention_maps
from attnclf.explain.render import EVEN_WITHIN, spread_ratios
from attnclf.models import build_model
from attnclf.training.run import train_run
from common import cli_settings, parse_with_threads, parser, splits, write_result

QUICK = ["--max-train-examples", "1500", "--epochs", "3", "--max-len", "128"]  # `compare --quick`'s budget
SETUPS = {  # name -> (dataset, train flags)
    "synthetic": ("synthetic", ["--epochs", "5"]),
    "sst2-sentences": ("sst2-sentences", QUICK),
    "demo": ("demo", []),  # (its recipe's 15 epochs: at 5 it had not left the plateau, 47% accuracy)
    # (On sst2-sentences at QUICK's budget it stayed at chance, 49.9%: no trained heads to speak of.)
    "synthetic-transformer-mean": ("synthetic", ["--epochs", "5", "--model", "transformer-mean"]),
}
THRESHOLDS = (1.05, 1.1, 1.2, 1.25, 1.3, 1.5, 2.0, 3.0)
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
LENGTHS = ((2, 10), (11, 20), (21, 40), (41, 128))  # text lengths in tokens, both ends included


def quantiles(values: np.ndarray) -> dict:
    """The ``QUANTILES`` of ``values`` (p5 ... p95) and its largest, rounded, with the count.

    >>> quantiles(np.arange(101.0))["p50"]
    50.0
    """
    if values.size == 0:
        return {"rows": 0}
    return {"rows": int(values.size),
            **{f"p{round(q * 100)}": round(float(np.quantile(values, q)), 3) for q in QUANTILES},
            "max": round(float(values.max()), 3)}


def ratios(maps: list[np.ndarray], window: int) -> tuple[list[np.ndarray], list[int]]:
    """Per text, (layers, heads, n) r of each query row, as `explain --heads` judges it, and the text's n."""
    return [spread_ratios(m, window) for m in maps], [m.shape[-1] for m in maps]


def summarise(per_text: list[np.ndarray], lengths: list[int]) -> dict:
    """Quantiles of r overall, per head and by length; shares marked even / uniform per threshold."""
    layers, heads, _ = per_text[0].shape
    rows = np.concatenate([r.reshape(-1) for r in per_text])
    per_head = {f"layer {layer + 1} head {head + 1}": quantiles(np.concatenate([r[layer, head] for r in per_text]))
                for layer in range(layers) for head in range(heads)}
    by_length = {f"{low}-{high} tokens": quantiles(np.concatenate(
        [r.reshape(-1) for r, n in zip(per_text, lengths) if low <= n <= high] or [np.zeros(0)]))
        for low, high in LENGTHS}
    # A (text, head) is called uniform when each of its rows is at most the threshold, as head_summary calls it.
    head_max = np.concatenate([r.max(axis=-1).reshape(-1) for r in per_text])
    return {
        "r": quantiles(rows),
        "per_head": per_head,
        "by_length": by_length,
        "rows_even": {f"{t:g}": round(float((rows <= t + 1e-9).mean()), 4) for t in THRESHOLDS},
        "heads_uniform": {f"{t:g}": round(float((head_max <= t + 1e-9).mean()), 4) for t in THRESHOLDS},
        "text_heads": int(head_max.size),
    }


def measure(name: str, dataset: str, flags: list[str], texts: int, seed: int, threads: int | None) -> dict:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        settings = cli_settings(dataset, out, *flags, "--seed", str(seed), "--no-report",
                                *(["--threads", str(threads)] if threads else []))
        result = train_run(settings, progress=False)
        trained = Classifier.load(out, device="cpu")
    train_seconds = time.perf_counter() - started
    # The model as training built it before its first step (train_run: manual_seed(seed), then build_model).
    torch.manual_seed(seed)
    untrained = build_model(settings.model, vocab_size=trained.tokenizer.vocab_size,
                            num_classes=len(trained.label_names), max_len=settings.tokenizer.max_len,
                            **settings.model_config)
    test = splits(dataset, settings.data.data_dir, seed).test
    ids = [s for s in trained.tokenizer.encode(test.texts) if len(s) >= 2]
    rng = np.random.default_rng(seed)
    ids = [ids[i] for i in np.sort(rng.choice(len(ids), size=min(texts, len(ids)), replace=False))]
    states = {}
    for state, model in (("untrained", untrained), ("trained", trained.model)):
        per_text, lengths = ratios(self_attention_maps(model, ids), getattr(model.config, "attention_window", 0))
        states[state] = summarise(per_text, lengths)
    lengths = [len(s) for s in ids]
    summary = {"dataset": dataset, "model": settings.model, "train_flags": flags, "seed": seed,
               "test_accuracy": result.metrics["accuracy"], "texts": len(ids),
               "tokens_median": float(np.median(lengths)), "tokens_max": int(max(lengths)),
               "train_seconds": round(train_seconds, 1), **states}
    print(name, {k: summary[k] for k in ("test_accuracy", "texts", "tokens_median", "train_seconds")},
          {state: (states[state]["r"], states[state]["heads_uniform"][f"{EVEN_WITHIN:g}"]) for state in states},
          flush=True)
    return summary


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--setups", nargs="+", choices=list(SETUPS), default=list(SETUPS))
    p.add_argument("--texts", type=int, default=400, help="test texts sampled per setup (default: 400)")
    p.add_argument("--seed", type=int, default=0)
    args = parse_with_threads(p, default=None)
    started = time.perf_counter()
    results = {name: measure(name, *SETUPS[name], args.texts, args.seed, args.threads) for name in args.setups}
    write_result("heads_uniformity", {"even_within": EVEN_WITHIN, "thresholds": list(THRESHOLDS),
                                      "setups": results, "seconds": round(time.perf_counter() - started, 1)},
                 args.out)


if __name__ == "__main__":
    main()
