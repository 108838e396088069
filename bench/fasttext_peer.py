"""attnclf's default recipes against fastText's supervised classifier, on the same splits, side by side.

    python bench/fasttext_peer.py                              # imdb sst2-sentences 20newsgroups, one thread each
    python bench/fasttext_peer.py --datasets sst2-sentences --repeats 5

fastText (``pip install fasttext``; a benchmark dependency only) is what a practitioner reaches for when a linear
model must train in seconds. For each dataset its word n-gram order, epochs and learning rate are chosen on the
validation split attnclf validates on (IMDB's grouped by movie), from a small grid; the chosen setting is then fitted
with seeds 0 to ``--repeats`` - 1 on the training part and each fit read once on test; the median is the figure. Texts
are cleaned as bench/baselines.py cleans them (lower case, ``<br />`` removed, words and ``!`` ``?`` as tokens), and
shuffled once.

fastText 0.9.3 with fewer than 10 threads fills only the first ``thread``/10 of its input matrix at random and leaves
the rest as ``posix_memalign`` returned it: a bigram model's matrix (2M hash buckets) gets fresh, zeroed pages, a
unigram model's (a few MB) can reuse the heap's freed memory, whose leftovers made most one-thread unigram fits stop
with "Encountered NaN." and the rest start from garbage (BENCHMARKS.md, "fastText, side by side"). So fastText runs
in a child process of its own in which glibc clears every block it hands out (``zero_new_blocks``) and serves blocks
of 128 KiB or more with fresh pages when its free memory cannot: each unfilled row starts at zero, as a bigram
model's do. A fit that still stops with a NaN is recorded as diverged and left out.

attnclf's side is ``attnclf train --dataset NAME`` (the default recipe, seed 0) in ``--run-root/NAME``: trained here,
timed in this process, unless a finished run is already there (then its recorded training time is shown, not a
side-by-side one). Prediction of the whole test split (text in, label out, tokenising included) is timed for both,
alternated, the median of three.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import re
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch

from attnclf.classifier import Classifier
from attnclf.rundir import read_metrics
from attnclf.training.device import fix_mmap_threshold
from attnclf.training.run import train_run

from baselines import TOKENS, preprocess
from common import cli_settings, cpu_seconds, parser, peak_rss_mb, splits, timer, write_result

DATASETS = ("imdb", "sst2-sentences", "20newsgroups", "sst2")
# Small on purpose: every setting is a full fit, and a user tuning fastText by hand tries about this many. Earlier
# grids (lr 0.05-0.5 then 0.1-1.0, epochs 5-20 then 5-40) had choices on their edges (20 Newsgroups' largest lr,
# IMDB's fewest epochs), so this one reaches a step past them.
GRID = [{"wordNgrams": n, "epoch": e, "lr": lr}
        for n in (1, 2) for e in (2, 5, 10, 20, 40) for lr in (0.1, 0.25, 0.5, 1.0, 2.0)]
_TOKEN = re.compile(TOKENS)


def clean(text: str) -> str:
    """One line of space-separated lower-case tokens, as fastText reads them.

    >>> clean("Don't miss it!<br />Great.")
    'don t miss it ! great'
    """
    return " ".join(_TOKEN.findall(preprocess(text)))


def write_fasttext_file(path: Path, texts: list[str], labels: list[int]) -> Path:
    """fastText's training file, shuffled: it reads the file in order, and IMDB's lists every negative review
    first (unshuffled, fastText's validation accuracy there was 50-56%)."""
    order = np.random.default_rng(0).permutation(len(texts))
    path.write_text("".join(f"__label__{labels[i]} {clean(texts[i])}\n" for i in order))
    return path


def fit(train_file: Path, setting: dict, threads: int, seed: int = 0):
    """fastText's model for one grid ``setting``, with the wall and CPU seconds of ``train_supervised`` (reading the
    file included; writing it, as ``write_fasttext_file`` does, not); raises fastText's RuntimeError on a NaN."""
    import fasttext

    started, cpu = time.perf_counter(), cpu_seconds()
    model = fasttext.train_supervised(input=str(train_file), thread=threads, seed=seed, verbose=0, **setting)
    return model, round(time.perf_counter() - started, 2), round(cpu_seconds() - cpu, 2)


def predict(model, texts: list[str]) -> np.ndarray:
    """Class indices, from raw texts (cleaning included, as attnclf's timing includes its tokeniser)."""
    labels, _ = model.predict([clean(text) for text in texts], k=1)
    return np.array([int(label[0].removeprefix("__label__")) for label in labels])


def accuracy(predicted: np.ndarray, labels) -> float:
    """The share of ``predicted`` equal to ``labels``, to four places.

    >>> accuracy(np.array([0, 1, 1]), [0, 1, 0])
    0.6667
    """
    return round(float((predicted == np.asarray(labels)).mean()), 4)


def choose(grid: list[dict]) -> dict:
    """The grid's row best on validation, the first of equals (the grid runs from cheap to dear); diverged rows
    (``validation_accuracy`` None) left out.

    >>> choose([{"epoch": 5, "validation_accuracy": 0.8}, {"epoch": 10, "validation_accuracy": None},
    ...         {"epoch": 20, "validation_accuracy": 0.8}])
    {'epoch': 5, 'validation_accuracy': 0.8}
    """
    finished = (row for row in grid if row["validation_accuracy"] is not None)
    return max(finished, key=lambda row: row["validation_accuracy"])


def attnclf_run(dataset: str, run_root: Path, threads: int) -> tuple[Path, dict]:
    """The default recipe's seed-0 run for ``dataset``: trained here (timed) unless one is finished there already."""
    run_dir = run_root / dataset
    if (run_dir / "metrics.json").is_file():
        return run_dir, {"trained_here": False,
                         "recorded_train_seconds": read_metrics(run_dir, costs=True)["train_seconds"]}
    settings = cli_settings(dataset, str(run_dir), "--threads", str(threads), "--no-report")
    started, cpu = time.perf_counter(), cpu_seconds()
    train_run(settings, progress=False)
    return run_dir, {"trained_here": True, "wall_seconds": round(time.perf_counter() - started, 1),
                     "cpu_seconds": round(cpu_seconds() - cpu, 1)}


M_PERTURB = -6  # glibc's mallopt parameter: fill each block handed out with the complement of this byte


def zero_new_blocks() -> None:
    """Have glibc clear every block this process's malloc or posix_memalign hands out from now on (blocks of up to
    1 KiB from its per-thread cache excepted), by filling freed ones with 0xFF and new ones with its complement.

    The mmap threshold alone (``fix_mmap_threshold``) does not do it: glibc takes a large block from freed heap
    memory whenever some fits, and in a spawned child that had written an IMDB-sized training file, blocks of
    256 KiB to 8 MB came back 97% non-zero after the threshold was fixed. Raises RuntimeError off glibc.

    >>> # zero_new_blocks()  # in a child process of its own: every later block's bytes start at 0
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError) as error:
        raise RuntimeError("fastText's unfilled matrix rows need glibc's mallopt to start at zero") from error
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if mallopt(M_PERTURB, 0xFF) != 1:
        raise RuntimeError("glibc refused mallopt(M_PERTURB)")


def tune_and_fit(folder: Path, data, threads: int, repeats: int) -> dict:
    """fastText's grid on validation, then its chosen setting fitted with seeds 0 to ``repeats`` - 1 and read on test;
    the last fit saved to ``folder/model.bin``. Runs in a child process (``in_child``): it changes glibc's settings
    for good, so that fastText's unfilled matrix rows start at zero, not from the heap's leftovers."""
    zero_new_blocks()
    if not fix_mmap_threshold(128 * 1024):  # (large matrices on pages of their own, as when the figures were taken)
        raise RuntimeError("could not fix glibc's mmap threshold")
    train_file = write_fasttext_file(folder / "train.txt", data.train.texts, data.train.labels)
    grid, started = [], time.perf_counter()
    for setting in GRID:
        try:
            model, wall, cpu = fit(train_file, setting, threads)
        except RuntimeError as error:  # fastText's "Encountered NaN.": the setting diverged
            grid.append({**setting, "validation_accuracy": None, "diverged": str(error)})
            continue
        grid.append({**setting, "validation_accuracy": accuracy(predict(model, data.validation.texts),
                                                                data.validation.labels),
                     "train_seconds": wall, "train_cpu_seconds": cpu})
        print(f"fastText {grid[-1]}", flush=True)
    search_seconds = round(time.perf_counter() - started, 1)
    best = choose(grid)
    chosen = {key: best[key] for key in ("wordNgrams", "epoch", "lr")}
    fits = []
    for seed in range(repeats):
        try:
            model, wall, cpu = fit(train_file, chosen, threads, seed=seed)
        except RuntimeError as error:
            fits.append({"seed": seed, "diverged": str(error)})
            continue
        fits.append({"seed": seed, "test_accuracy": accuracy(predict(model, data.test.texts), data.test.labels),
                     "train_seconds": wall, "train_cpu_seconds": cpu})
        model.save_model(str(folder / "model.bin"))  # (prediction speed does not depend on which fit)
    finished = [f for f in fits if "diverged" not in f]
    return {"grid": grid, "search_seconds": search_seconds, "chosen": chosen,
            "chosen_validation_accuracy": best["validation_accuracy"], "fits": fits,
            "test_accuracy_median": statistics.median(f["test_accuracy"] for f in finished),
            "train_cpu_seconds_median": statistics.median(f["train_cpu_seconds"] for f in finished)}


def in_child(function, *args):
    """``function(*args)`` in a fresh Python process (spawned, not forked: a fork would inherit this one's heap)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as child:
        return child.submit(function, *args).result()


def run_dataset(name: str, args) -> dict:
    import fasttext

    data = splits(name, args.data_dir)
    with tempfile.TemporaryDirectory() as folder:
        tuned = in_child(tune_and_fit, Path(folder), data, args.threads, args.repeats)
        fasttext_model = fasttext.load_model(str(Path(folder) / "model.bin"))

    run_dir, attnclf_training = attnclf_run(name, Path(args.run_root), args.threads)
    clf = Classifier.load(run_dir, device="cpu")
    texts = data.test.texts
    seconds = {"attnclf": [], "fasttext": []}
    for _ in range(3):  # alternated, so a shared machine's load falls on both alike
        spent: dict = {}
        with timer(spent, "attnclf"):
            predicted = clf.predict_proba(texts).argmax(1)
        with timer(spent, "fasttext"):
            predict(fasttext_model, texts)
        for side in seconds:
            seconds[side].append(spent[side])
    attnclf_accuracy = accuracy(predicted, data.test.labels)
    attnclf_seconds, fasttext_seconds = (statistics.median(seconds[k]) for k in ("attnclf", "fasttext"))
    fasttext_train = tuned["train_cpu_seconds_median"]
    result = {
        "train_examples": len(data.train), "validation_examples": len(data.validation),
        "test_examples": len(data.test),
        "fasttext": {**tuned, "predict_texts_per_second": round(len(texts) / fasttext_seconds)},
        "attnclf": {"run": str(run_dir), "test_accuracy": attnclf_accuracy, "training": attnclf_training,
                    "predict_texts_per_second": round(len(texts) / attnclf_seconds)},
        "predict_seconds": seconds,
        "attnclf_predict_time_over_fasttext": round(attnclf_seconds / fasttext_seconds, 2),
    }
    if attnclf_training["trained_here"]:
        result["attnclf_train_cpu_over_fasttext"] = round(attnclf_training["cpu_seconds"] / fasttext_train, 1)
    print(f"{name}: fastText {tuned['test_accuracy_median']} ({tuned['chosen']}), attnclf {attnclf_accuracy}",
          flush=True)
    return result


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=list(DATASETS[:3]), choices=DATASETS)
    p.add_argument("--repeats", type=int, default=3, help="fits of fastText's chosen setting, each read on test")
    p.add_argument("--threads", type=int, default=1, help="threads for both (default 1)")
    p.add_argument("--run-root", default="runs/bench-fasttext", help="attnclf's runs: RUN_ROOT/DATASET")
    p.add_argument("--name", default="fasttext_peer", help="result name: bench/results/NAME.json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    results = {name: run_dataset(name, args) for name in args.datasets}
    write_result(args.name, {"datasets": results, "grid": GRID, "peak_rss_mb": round(peak_rss_mb())}, args.out)


if __name__ == "__main__":
    main()
