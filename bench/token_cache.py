"""Token cache: build rate and peak memory on IMDB and on generated corpora of 200k and 2M documents.

Every measurement runs in a fresh child process, so its peak memory is its own:

1. ``imdb``: IMDB train + test (50,000 reviews, the default IMDB recipe's tokenizer settings):
   loading, tokenizer training, then building the token caches (texts/s), then reopening them.
2. ``generate N``: write N generated labelled documents to a JSONL file in the work folder, one line
   at a time (never a list of documents in memory).
3. ``build N``: ``attnclf.training.cached.load_cached_data`` on that file, the path ``attnclf train
   --train-file F --token-cache`` takes: a streamed label pass, the tokenizer trained on a stream,
   the cache built chunk by chunk. Each stage is timed from the function's own log lines.
4. ``train N``: reopen the caches (reuse), then one full epoch of bucketed batches drawn from the
   memory-mapped ids (every batch padded into tensors: the data path of an epoch), then ``--steps``
   optimizer steps of a small ``self-attn`` model on those batches.

5. ``in-memory N`` (N <= ``--in-memory-max``): for comparison, ``load_data`` + tokenizer + ``encode``, what a
   run without ``--token-cache`` holds.

Memory is the peak resident set (``ru_maxrss``) and, sampled every 20 ms from ``/proc/self/status``,
the peak of its anonymous part (``RssAnon``: heap, what cannot be dropped) and of its file-backed part
(``RssFile``: pages of mapped files such as the cache, which the kernel reclaims under pressure).
The tokenizer runs on one thread (``RAYON_NUM_THREADS=1``) and so does torch.

    python bench/token_cache.py                       # IMDB, 200k and 2M documents (about 15 min here)
    python bench/token_cache.py --sizes 20000 --skip-imdb
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

WORDS = 20_000  # generated vocabulary: Zipf-distributed filler plus class-marked words


class MemorySampler:
    """Peak VmRSS / RssAnon / RssFile of this process, sampled in a thread."""

    FIELDS = ("VmRSS", "RssAnon", "RssFile")

    def __init__(self, every: float = 0.02):
        self.every = every
        self.peak = dict.fromkeys(self.FIELDS, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> dict:
        values = {}
        with open("/proc/self/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in self.FIELDS:
                    values[key] = int(rest.split()[0])  # KiB
        return values

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, value in self.sample().items():
                self.peak[key] = max(self.peak[key], value)
            time.sleep(self.every)

    def __enter__(self) -> "MemorySampler":
        self.start = self.sample()  # after the imports: the interpreter, torch, numpy, tokenizers
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def report(self) -> dict:
        return {"rss_at_start_mb": round(self.start["VmRSS"] / 1024, 1),
                "rssanon_at_start_mb": round(self.start["RssAnon"] / 1024, 1),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                **{f"peak_{k.lower()}_mb": round(v / 1024, 1) for k, v in self.peak.items()}}


def _du_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 1)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def phase_imdb(work: Path) -> dict:
    from common import cli_settings

    from attnclf.text.cache import TokenCache
    from attnclf.text.tokenizer import Tokenizer
    from attnclf.training.run_data import dataset_splits

    settings = cli_settings("imdb", str(work / "unused-run"))
    root = work / "cache-imdb"
    result = {"tokenizer": settings.tokenizer.to_dict()}
    with MemorySampler() as memory:
        t0 = time.perf_counter()
        splits = dataset_splits(settings.data, 0)
        t1 = time.perf_counter()
        rss_loaded = memory.sample()
        tokenizer = Tokenizer.train(splits.train.texts, settings.tokenizer)
        t2 = time.perf_counter()
        cpu = _cpu()
        texts = 0
        for split in (splits.train, splits.test):
            TokenCache.open_or_build(lambda: zip(split.texts, split.labels), tokenizer, split.label_names,
                                     {"dataset": "imdb", "split": split.split}, root)
            texts += len(split)
        t3 = time.perf_counter()
        cpu = _cpu() - cpu
        for split in (splits.train, splits.test):
            TokenCache.open_or_build(lambda: iter(()), tokenizer, split.label_names,
                                     {"dataset": "imdb", "split": split.split}, root)
        t4 = time.perf_counter()
    result |= {
        "texts": texts, "load_seconds": round(t1 - t0, 2), "tokenizer_train_seconds": round(t2 - t1, 2),
        "build_seconds": round(t3 - t2, 2), "build_cpu_seconds": round(cpu, 2),
        "build_texts_per_second_wall": round(texts / (t3 - t2)), "build_texts_per_cpu_second": round(texts / cpu), "reuse_seconds": round(t4 - t3, 3),
        "rss_after_loading_mb": round(rss_loaded["VmRSS"] / 1024, 1), "cache_disk_mb": _du_mb(root),
        **memory.report(),
    }
    shutil.rmtree(root)
    return result


def phase_generate(work: Path, n: int, seed: int = 0) -> dict:
    """Documents of 20-120 words: Zipf filler, plus a few words whose class share says the label."""
    import numpy as np

    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = np.array(["".join(rng.choice(letters, size=rng.integers(2, 9))) + str(i) for i in range(WORDS)])
    zipf = 1.0 / np.arange(1, WORDS + 1)
    zipf /= zipf.sum()
    marked = {0: np.arange(100, 300), 1: np.arange(300, 500)}  # rank 100-499 words lean to one class
    path = work / f"corpus-{n}.jsonl"
    t0 = time.perf_counter()
    with MemorySampler() as memory, open(path, "w", encoding="utf-8") as f:
        for start in range(0, n, 10_000):
            size = min(10_000, n - start)
            labels = rng.integers(0, 2, size)
            lengths = rng.integers(20, 121, size)
            ids = rng.choice(WORDS, size=(size, 120), p=zipf)
            cue = rng.random((size, 120)) < 0.05
            for row in range(size):
                words = ids[row, : lengths[row]].copy()
                hits = cue[row, : lengths[row]]
                words[hits] = rng.choice(marked[labels[row]], size=int(hits.sum()))
                f.write(json.dumps({"text": " ".join(vocab[words]), "label": ["neg", "pos"][labels[row]]}) + "\n")
    return {"documents": n, "seconds": round(time.perf_counter() - t0, 1),
            "file_mb": round(path.stat().st_size / 2**20, 1), **memory.report()}


def phase_build(work: Path, n: int) -> dict:
    from attnclf.training.cached import load_cached_data
    from attnclf.training.settings import DataSettings, RunSettings

    root = work / f"cache-{n}"
    settings = RunSettings(DataSettings(train_file=str(work / f"corpus-{n}.jsonl"), token_cache=True,
                                        token_cache_dir=str(root)))
    marks = {"start": (time.perf_counter(), _cpu())}

    def log(message: str) -> None:  # "training the tokenizer ...", "building token cache ..."
        marks[message.split()[0]] = (time.perf_counter(), _cpu())

    with MemorySampler() as memory:
        splits, _ = load_cached_data(settings, 0, log)
        marks["end"] = (time.perf_counter(), _cpu())

    def stage(first: str, last: str) -> dict:
        wall, cpu = (marks[last][k] - marks[first][k] for k in (0, 1))
        return {"wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1)}

    build = stage("building", "end")
    return {"documents": n, "train_texts": len(splits.train), "validation_texts": len(splits.validation),
            "tokens": int(splits.train.sequences.flat.shape[0]), "label_pass": stage("start", "training"),
            "tokenizer_train": stage("training", "building"), "build": build,
            "build_texts_per_second_wall": round(n / build["wall_seconds"]),
            "build_texts_per_cpu_second": round(n / build["cpu_seconds"]), "total": stage("start", "end"),
            "cache_disk_mb": _du_mb(root), **memory.report()}


def phase_train(work: Path, n: int, steps: int) -> dict:
    import torch

    from attnclf.models import build_model
    from attnclf.text.batching import BucketBatches
    from attnclf.training.cached import load_cached_data
    from attnclf.training.settings import DataSettings, RunSettings

    torch.set_num_threads(1)
    settings = RunSettings(DataSettings(train_file=str(work / f"corpus-{n}.jsonl"), token_cache=True,
                                        token_cache_dir=str(work / f"cache-{n}")))
    with MemorySampler() as memory:
        t0 = time.perf_counter()
        splits, tokenizer = load_cached_data(settings, 0, lambda message: None)
        t1 = time.perf_counter()
        batches = BucketBatches(splits.train.sequences, splits.train.labels, batch_size=64, shuffle=True, seed=0)
        tokens = 0
        for batch in batches:  # the data path of one whole epoch
            tokens += int(batch.attention_mask.sum())
        t2 = time.perf_counter()
        epoch_memory = memory.report()
        torch.manual_seed(0)
        model = build_model("self-attn", vocab_size=tokenizer.vocab_size, num_classes=2, max_len=256,
                            d_model=64, layers=1)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        batches.set_epoch(1)
        correct = seen = 0
        for step, batch in enumerate(batches):
            if step == steps:
                break
            logits = model(batch.input_ids, batch.attention_mask).logits
            loss = torch.nn.functional.cross_entropy(logits, batch.labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step >= steps - 50:  # accuracy on the last 50 training batches, as a sign it learns
                correct += int((logits.argmax(1) == batch.labels).sum())
                seen += len(batch.labels)
        t3 = time.perf_counter()
    return {"documents": n, "reopen_seconds": round(t1 - t0, 1), "epoch_batches": len(batches),
            "epoch_tokens": tokens, "epoch_data_seconds": round(t2 - t1, 1),
            "epoch_data_memory": epoch_memory, "steps": steps, "steps_seconds": round(t3 - t2, 1),
            "last_50_batches_train_accuracy": round(correct / max(seen, 1), 3), **memory.report()}


def phase_in_memory(work: Path, n: int) -> dict:
    """For comparison, what ``attnclf train --train-file`` without ``--token-cache`` holds: texts and id lists."""
    from attnclf.training.run_data import load_data
    from attnclf.training.settings import DataSettings, RunSettings
    from attnclf.text.tokenizer import Tokenizer

    settings = RunSettings(DataSettings(train_file=str(work / f"corpus-{n}.jsonl")))
    with MemorySampler() as memory:
        t0 = time.perf_counter()
        splits = load_data(settings.data, 0)
        tokenizer = Tokenizer.train(splits.train.texts, settings.tokenizer)
        sequences = [tokenizer.encode(data.texts) for data in (splits.train, splits.validation)]
        t1 = time.perf_counter()
    return {"documents": n, "texts_encoded": sum(map(len, sequences)), "seconds": round(t1 - t0, 1),
            **memory.report()}


def child(args) -> None:
    work = Path(args.work)
    if args.phase == "imdb":
        result = phase_imdb(work)
    elif args.phase == "generate":
        result = phase_generate(work, args.n)
    elif args.phase == "build":
        result = phase_build(work, args.n)
    elif args.phase == "in-memory":
        result = phase_in_memory(work, args.n)
    else:
        result = phase_train(work, args.n, args.steps)
    print("RESULT " + json.dumps(result), flush=True)


def run_child(phase: str, work: Path, n: int = 0, steps: int = 0) -> dict:
    env = os.environ | {"RAYON_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, __file__, "--child", phase, "--work", str(work), "--n", str(n), "--steps", str(steps)]
    started = time.perf_counter()
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{phase} {n}: failed\n{out.stderr[-3000:]}")
    result = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))[7:])
    print(f"{phase} {n or ''}: {time.perf_counter() - started:.0f} s {json.dumps(result)}", flush=True)
    return result


def main() -> None:
    from common import data_dir, parser, write_result

    p = parser(__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[200_000, 2_000_000], help="generated corpus sizes")
    p.add_argument("--steps", type=int, default=300, help="optimizer steps after the data-only epoch")
    p.add_argument("--work", default="/tmp/attnclf-token-cache-bench", help="folder for corpora and caches")
    p.add_argument("--skip-imdb", action="store_true")
    p.add_argument("--in-memory-max", type=int, default=200_000,
                   help="also measure the in-memory path (no cache) on corpora up to this size")
    p.add_argument("--keep", action="store_true", help="keep the corpora and caches")
    p.add_argument("--child", help=argparse_suppress())
    p.add_argument("--n", type=int, default=0, help=argparse_suppress())
    args = p.parse_args()
    if args.child:
        args.phase = args.child
        return child(args)
    if args.data_dir or data_dir():
        os.environ["ATTNCLF_DATA_DIR"] = args.data_dir or data_dir()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    result: dict = {"rayon_threads": 1, "torch_threads": 1}
    if not args.skip_imdb:
        result["imdb"] = run_child("imdb", work)
    for n in args.sizes:
        result[f"generated_{n}"] = {"generate": run_child("generate", work, n), "build": run_child("build", work, n),
                                    "train": run_child("train", work, n, args.steps)}
        if n <= args.in_memory_max:
            result[f"generated_{n}"]["in_memory"] = run_child("in-memory", work, n)
        if not args.keep:
            shutil.rmtree(work / f"cache-{n}")
            (work / f"corpus-{n}.jsonl").unlink()
    write_result("token_cache", result, args.out)


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
