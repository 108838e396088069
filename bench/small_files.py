"""What `attnclf train --train-file F` (a user's file, no --dataset) should train by default: four small sets, one of
them with 20 classes, each a train, a validation and a test file, and candidate settings trained on each with seeds
0-2, validated on the validation file. The test files are read only with --test, after the choice.

    python bench/small_files.py [--work runs/small-files] [--seeds 0 1 2] [--jobs 2] [--test]
    python bench/small_files.py --smoke --work /tmp/small-files-smoke   # tiny files, one epoch: checks the plumbing
    python bench/small_files.py --no-train   # the table of the runs finished so far
    python bench/small_files.py --baselines-only [--test]   # the reference rows only, added to the result file

Writes the sets as `label,text` CSVs under WORK/data through attnclf's own data sources (seeded, the same files on
every run), checks that no text (whitespace normalised) is in two files of a set, then trains each cell
`nice -n 5 attnclf train --train-file TRAIN --validation-file VAL --seed S --threads 1 --quiet --no-report
--output WORK/runs/SET/CANDIDATE/seed-S [flags]`, JOBS at a time, seed 0 of every set and candidate first. A cell
whose run has metrics.json is read, not trained again; an interrupted one resumes (`--resume`). Sets:

- ag3k: AG News' test.csv (7,600 rows, the only split the shared datasets hold), shuffled: 3,000 train, 2,000 test,
  2,600 validation.
- imdb3k: 3,000 IMDB training reviews (1,500 a class); validation 3,000 other training reviews (1,500 a class) of
  movies with no review in the training file; test 2,000 IMDB test reviews (1,000 a class).
- sst2: stsa.binary's train (6,920), dev (872) and test sentences (1,821, less the 2 that repeat training ones).
- ng3k: 20 Newsgroups by-date, raw posts as `--dataset 20newsgroups` reads them: 3,000 training-split posts (150 a
  group) train, 2,000 other training-split posts (100 a group) validation, 2,000 test-split posts (100 a group) test.

Reference rows, no part of the rule: what practitioners compare with, bench/baselines.py's TF-IDF (1-2 grams,
sublinear tf) + logistic regression and NB-weighted bigram LR, each fitted on the training file at every C of a
small grid, C chosen by accuracy on the validation file (which flatters their validation figure), the chosen model
scored on the test file with --test. Deterministic: one figure a set. --baselines-only fits them alone (no training,
no test reading of runs) and adds them to an existing result file, keeping its runs' figures.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import random
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import baselines
import numpy as np
from common import RESULTS_DIR, data_dir, parser, write_result

from attnclf.data.base import TextDataset
from attnclf.data.registry import load_splits, load_test_split
from attnclf.models.classifiers import SelfAttentionConfig
from attnclf.models.ngrams import bounded_buckets
from attnclf.recipes import FILE_SELF_ATTN, FILE_SELF_ATTN_TOKENIZER
from attnclf.rundir import (atomic_write_bytes, atomic_write_json, is_resumable, read_config, read_history,
                            read_metrics)
from attnclf.text.tokenizer import TokenizerConfig
from attnclf.training.trainer import best_epoch

SETS = ("ag3k", "imdb3k", "sst2", "ng3k")
SMALL_MODEL = ["--set", "d_model=64", "--set", "ff_dim=256", "--set", "dropout=0.3", "--set", "positional=sinusoidal"]
# A hashed n-gram branch of B buckets holds (vocabulary + B) x classes weights and as many log-count ratios; B
# shrinks with the classes so that the branch stays near the 2-class size (2**22 weights a matrix): the file
# recipe's budget, which was this study's rule before it became the recipe's.
BRANCH_WEIGHTS = FILE_SELF_ATTN["nb_ngram_bucket_budget"]


def branch_buckets(classes: int) -> int:
    """The n-gram buckets candidate (d) uses for ``classes`` classes: 2**20 halved until buckets x classes fit in
    ``BRANCH_WEIGHTS`` (``ngrams.bounded_buckets``, as the file recipe builds it).

    >>> branch_buckets(2), branch_buckets(4), branch_buckets(20)
    (1048576, 1048576, 131072)
    """
    return bounded_buckets(2**20, classes, BRANCH_WEIGHTS)


# The general defaults, given as flags: since this study, a file's self-attn starts from (d) (recipes.FILE_SELF_ATTN)
# and reads the file recipe's tokens (FILE_SELF_ATTN_TOKENIZER); (a) is what it trained at before, and every candidate
# read the general tokenizer's (256 tokens), so the study reruns as measured.
GENERAL_TOKENIZER = [flag for name in FILE_SELF_ATTN_TOKENIZER
                     for flag in (f"--{name.replace('_', '-')}", str(getattr(TokenizerConfig, name)))]
GENERAL_DEFAULTS = [*(flag for name in FILE_SELF_ATTN
                      for flag in ("--set", f"{name}={getattr(SelfAttentionConfig, name)}")), *GENERAL_TOKENIZER]

CANDIDATES = {
    "(a) defaults": lambda classes: list(GENERAL_DEFAULTS),
    "(d) scaled n-gram branch": lambda classes: ["--set", f"nb_ngram_buckets={branch_buckets(classes)}", *SMALL_MODEL,
                                                 *GENERAL_TOKENIZER],
    "(f) small model, no branch": lambda classes: [*SMALL_MODEL, "--set", "nb_ngram_buckets=0", *GENERAL_TOKENIZER],
}


# The reference rows: bench/baselines.py's model by name, and the grid of C its validation accuracy chooses from.
REFERENCES = {"TF-IDF + LR": ("tfidf_lr", [0.25, 1, 4, 16, 64]),
              "NB-weighted bigram LR": ("nb_bigram_lr", [0.03, 0.1, 0.3, 1, 3])}


def normalised(text: str) -> str:
    return " ".join(text.split())


def distinct(data: TextDataset) -> list[int]:
    """Indices of ``data``'s texts that appear once (whitespace normalised): a repeated text could land in two files."""
    seen: dict[str, int] = {}
    for text in data.texts:
        seen[normalised(text)] = seen.get(normalised(text), 0) + 1
    return [i for i, text in enumerate(data.texts) if seen[normalised(text)] == 1]


def per_class(data: TextDataset, indices: list[int], count: int, rng: random.Random) -> list[int]:
    """``count`` of ``indices`` drawn from each class of ``data``, in a seeded random order."""
    chosen = []
    for label in range(data.num_classes):
        pool = [i for i in indices if data.labels[i] == label]
        if len(pool) < count:
            raise SystemExit(f"{data.name}: class {data.label_names[label]!r} has {len(pool)} texts, {count} wanted")
        chosen += rng.sample(pool, count)
    rng.shuffle(chosen)
    return chosen


def without(data: TextDataset, indices: list[int], taken: list[TextDataset]) -> list[int]:
    """``indices`` whose text is in none of ``taken``."""
    used = {normalised(text) for part in taken for text in part.texts}
    return [i for i in indices if normalised(data.texts[i]) not in used]


def ag3k(dirs: str | None, rng: random.Random, scale: float) -> dict[str, TextDataset]:
    rows = load_test_split("ag_news", dirs)
    order = distinct(rows)
    rng.shuffle(order)
    sizes = [round(3000 * scale), round(2000 * scale), round(2600 * scale)]
    train, test, validation = order[:sizes[0]], order[sizes[0]:sum(sizes[:2])], order[sum(sizes[:2]):sum(sizes)]
    return {"train": rows.subset(train, "train"), "validation": rows.subset(validation, "validation"),
            "test": rows.subset(test, "test")}


def imdb3k(dirs: str | None, rng: random.Random, scale: float) -> dict[str, TextDataset]:
    splits = load_splits("imdb", dirs)
    reviews, test_reviews = splits.train, splits.test
    # IMDB repeats a few reviews, within and across its splits: a text seen twice anywhere is left out.
    counts: dict[str, int] = {}
    for text in [*reviews.texts, *test_reviews.texts]:
        counts[normalised(text)] = counts.get(normalised(text), 0) + 1
    once = [i for i, text in enumerate(reviews.texts) if counts[normalised(text)] == 1]
    train = reviews.subset(per_class(reviews, once, round(1500 * scale), rng), "train")
    movies = set(train.groups)
    others = [i for i in once if reviews.groups[i] not in movies]
    validation = reviews.subset(per_class(reviews, others, round(1500 * scale), rng), "validation")
    test_once = [i for i, text in enumerate(test_reviews.texts) if counts[normalised(text)] == 1]
    test = test_reviews.subset(per_class(test_reviews, test_once, round(1000 * scale), rng), "test")
    return {"train": train, "validation": validation, "test": test}


def sst2(dirs: str | None, rng: random.Random, scale: float) -> dict[str, TextDataset]:
    splits = load_splits("sst2-sentences", dirs)
    # stsa.binary's test file repeats two training sentences: they leave the test file.
    test = splits.test.subset(without(splits.test, list(range(len(splits.test))), [splits.train, splits.validation]))
    files = {"train": splits.train, "validation": splits.validation, "test": test}
    if scale < 1:  # (--smoke) a seeded sample of each file
        files = {name: data.subset(sorted(rng.sample(range(len(data)), round(len(data) * scale))))
                 for name, data in files.items()}
    return files


def ng3k(dirs: str | None, rng: random.Random, scale: float) -> dict[str, TextDataset]:
    splits = load_splits("20newsgroups", dirs)
    posts, test_posts = splits.train, splits.test
    order = distinct(posts)
    train = posts.subset(per_class(posts, order, round(150 * scale), rng), "train")
    validation = posts.subset(per_class(posts, without(posts, order, [train]), round(100 * scale), rng), "validation")
    test_order = without(test_posts, distinct(test_posts), [train, validation])
    test = test_posts.subset(per_class(test_posts, test_order, round(100 * scale), rng), "test")
    return {"train": train, "validation": validation, "test": test}


MAKERS = {"ag3k": ag3k, "imdb3k": imdb3k, "sst2": sst2, "ng3k": ng3k}


def check_disjoint(name: str, files: dict[str, TextDataset]) -> None:
    """Stop if any two files share a text (whitespace normalised): the study needs none."""
    texts = {part: {normalised(text) for text in data.texts} for part, data in files.items()}
    shared = {f"{a}&{b}": len(texts[a] & texts[b]) for a in texts for b in texts if a < b}
    if any(shared.values()):
        raise SystemExit(f"{name}: files share texts: {shared}")


def csv_bytes(data: TextDataset) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["label", "text"])
    writer.writerows((data.label_names[label], text) for label, text in zip(data.labels, data.texts))
    return out.getvalue().encode("utf-8")


def write_sets(work: Path, dirs: str | None, sets: list[str], scale: float) -> dict:
    """Write each set's train, validation and test CSVs under ``work/data`` and return their sizes and class
    counts (printed too)."""
    described = {}
    for name in sets:
        files = MAKERS[name](dirs, random.Random(f"small-files {name}"), scale)
        check_disjoint(name, files)
        described[name] = {"classes": files["train"].num_classes}
        for part, data in files.items():
            path = work / "data" / f"{name}-{part}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, csv_bytes(data))
            counts = {data.label_names[k]: data.labels.count(k) for k in range(data.num_classes)}
            described[name][part] = {"texts": len(data), "classes": counts}
            print(f"{name} {part}: {len(data):,} texts, {counts}", flush=True)
    return described


def read_file(path: Path) -> tuple[list[str], np.ndarray]:
    """The texts and labels of a ``label,text`` CSV as ``csv_bytes`` writes it."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))[1:]
    return [text for _, text in rows], np.asarray([label for label, _ in rows])


def fit_references(work: Path, sets: dict, test: bool) -> dict:
    """Each set's reference rows fitted on its files under ``work/data`` (bench/baselines.py's ``fit_and_choose``):
    the chosen C, its validation accuracy (and the grid's), training seconds, and with ``test`` test accuracy."""
    fitted = {}
    for name, described in sets.items():
        files = {part: read_file(work / "data" / f"{name}-{part}.csv") for part in ("train", "validation", "test")}
        models = {model: (vectorizer, make) for model, vectorizer, make, _ in baselines._models(described["classes"])}
        fitted[name] = {}
        for reference, (model, grid) in REFERENCES.items():
            entry = baselines.fit_and_choose(*models[model], grid, files["train"], files["validation"],
                                             files["test"] if test else None)
            fitted[name][reference] = {"model": model, "grid": grid, **entry}
            print(f"{name} {reference}: validation {100 * entry['validation_accuracy']:.2f}% at C={entry['C']}"
                  + (f", test {100 * entry['test_accuracy']:.2f}%" if test else "")
                  + f", {entry['search_seconds']} s", flush=True)
    return fitted


def run_dir(work: Path, name: str, candidate: str, seed: int) -> Path:
    return work / "runs" / name / candidate.split()[0].strip("()") / f"seed-{seed}"


def train_cell(work: Path, name: str, candidate: str, seed: int, classes: int, extra: list[str]) -> str:
    """Train one cell unless its run is finished: resume an interrupted one, start again one that never saved."""
    output = run_dir(work, name, candidate, seed)
    if (output / "metrics.json").exists():
        return f"{output}: done before"
    command = ["nice", "-n", "5", sys.executable, "-m", "attnclf", "train",
               "--train-file", str(work / "data" / f"{name}-train.csv"),
               "--validation-file", str(work / "data" / f"{name}-validation.csv"),
               "--seed", str(seed), "--threads", "1", "--quiet", "--no-report", "--output", str(output),
               *CANDIDATES[candidate](classes), *extra]
    if output.exists() and is_resumable(output):
        command.append("--resume")
    elif output.exists():
        shutil.rmtree(output)  # nothing of it was saved to go on from
    output.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with open(output.parent / f"seed-{seed}.log", "w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    status = "ok" if done.returncode == 0 else f"failed ({done.returncode}), see {log.name}"
    return f"{output}: {status}, {time.time() - started:.0f} s wall"


def read_cell(output: Path) -> dict | None:
    """The kept epoch's validation accuracy, epochs run and kept, training seconds, parameters and the size of
    model.safetensors of a finished run."""
    if not (output / "metrics.json").exists():
        return None
    metrics = read_metrics(output, scored=True, costs=True)
    if metrics.get("split", "test") != "validation":
        raise SystemExit(f"{output}: metrics.json scores the {metrics.get('split', 'test')} split, not the validation "
                         f"file")
    history = read_history(output, needs=["epoch"])
    kept = best_epoch(history, read_config(output)["settings"]["train"]["monitor"])["epoch"]
    return {"validation_accuracy": metrics["accuracy"], "epochs": len(history),
            "kept_epoch": kept, "train_seconds": metrics["train_seconds"],
            "parameters": metrics["parameters"],
            "model_mib": round((output / "model.safetensors").stat().st_size / 2**20, 2)}


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def summarise(work: Path, sets: list[str], seeds: list[int]) -> dict:
    """Each set and candidate's runs, and their means over the seeds that finished."""
    cells = {}
    for name in sets:
        for candidate in CANDIDATES:
            runs = {seed: read_cell(run_dir(work, name, candidate, seed)) for seed in seeds}
            runs = {seed: run for seed, run in runs.items() if run}
            if runs:
                cells[f"{name} {candidate}"] = {
                    "set": name, "candidate": candidate, "seeds": runs,
                    "mean_validation_accuracy": mean([r["validation_accuracy"] for r in runs.values()]),
                    "mean_train_seconds": mean([r["train_seconds"] for r in runs.values()])}
    return cells


def verdict(cells: dict, sets: list[str]) -> dict:
    """THE RULE of BENCHMARKS.md, fixed before any result: a candidate passes if its mean validation accuracy beats
    (a)'s on every set and by at least 1 point averaged over the sets; of (d) and (f) both passing, (f) unless (d)'s
    average is more than 0.5 points above it; one passing: that one; none: the defaults."""
    def means(candidate: str) -> list[float] | None:
        found = [cells.get(f"{name} {candidate}") for name in sets]
        return None if None in found else [100 * cell["mean_validation_accuracy"] for cell in found]

    base = means("(a) defaults")
    if base is None:
        return {"chosen": None, "why": "not every set has a finished (a) run"}
    standing, average = {}, {}
    for candidate in ("(d) scaled n-gram branch", "(f) small model, no branch"):
        own = means(candidate)
        average[candidate] = None if own is None else mean(own)
        if own is None:
            standing[candidate] = {"passes": None, "why": "not every set has a finished run"}
            continue
        margins = [m - b for m, b in zip(own, base)]
        standing[candidate] = {"margins_points": [round(m, 2) for m in margins],
                               "average_margin_points": round(mean(margins), 2), "average_points": round(mean(own), 2),
                               "passes": all(m > 0 for m in margins) and mean(margins) >= 1}
    d, f = standing["(d) scaled n-gram branch"], standing["(f) small model, no branch"]
    if d.get("passes") is None or f.get("passes") is None:
        chosen = None
    elif d["passes"] and f["passes"]:
        chosen = "(f) small model, no branch" \
            if average["(d) scaled n-gram branch"] - average["(f) small model, no branch"] <= 0.5 \
            else "(d) scaled n-gram branch"
    else:
        chosen = next((c for c, s in standing.items() if s["passes"]), "(a) defaults")
    return {"chosen": chosen, "base_average_points": round(mean(base), 2), **standing}


def evaluate(work: Path, name: str, candidate: str, seed: int) -> float | None:
    """Test accuracy of one run on its set's test file (`attnclf evaluate RUN --test-file TEST --json`)."""
    output = run_dir(work, name, candidate, seed)
    if not (output / "metrics.json").exists():
        return None
    done = subprocess.run(["nice", "-n", "5", sys.executable, "-m", "attnclf", "evaluate", str(output),
                           "--test-file", str(work / "data" / f"{name}-test.csv"), "--threads", "1", "--json"],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["accuracy"]


def table(cells: dict, seeds: list[int], references: dict | None = None) -> str:
    lines = ["| set | candidate | validation: mean | " + " | ".join(f"seed {s}" for s in seeds)
             + " | epochs (kept) | training s | parameters | model.safetensors MiB |",
             "|---|---|---:|" + "---:|" * len(seeds) + "---:|---:|---:|---:|"]
    for cell in cells.values():
        runs = cell["seeds"]
        first = next(iter(runs.values()))
        lines.append(
            f"| {cell['set']} | {cell['candidate']} | {100 * cell['mean_validation_accuracy']:.2f}% | "
            + " | ".join(f"{100 * runs[s]['validation_accuracy']:.2f}" if s in runs else "-" for s in seeds)
            + " | " + ", ".join(f"{r['epochs']} ({r['kept_epoch']})" for r in runs.values())
            + f" | {cell['mean_train_seconds']:.0f} | {first['parameters']:,} | {first['model_mib']:.1f} |")
    for name, rows in (references or {}).items():  # one figure a set: deterministic, C chosen on validation
        for reference, entry in rows.items():
            lines.append(f"| {name} | reference: {reference}, C={entry['C']} | "
                         f"{100 * entry['validation_accuracy']:.2f}% | " + " | ".join("-" for _ in seeds)
                         + f" | - | {entry['train_seconds']:.1f} | - | - |")
    return "\n".join(lines)


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--work", default="runs/small-files", help="folder for the data files and the runs")
    p.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--jobs", type=int, default=2, help="runs trained at once")
    p.add_argument("--test", action="store_true",
                   help="after the choice: the chosen candidate's and (a)'s runs, and the reference rows, on test")
    p.add_argument("--no-train", action="store_true", help="read the finished runs only (another queue may be running)")
    p.add_argument("--smoke", action="store_true", help="a twentieth of each file and one epoch: checks the plumbing")
    p.add_argument("--baselines-only", action="store_true",
                   help="write the files and fit the reference rows only, added to the result file as it is")
    args = p.parse_args()
    work, dirs = Path(args.work), data_dir(args.data_dir)
    started = time.time()
    sets = write_sets(work, dirs, args.sets, 0.05 if args.smoke else 1.0)
    name = "small-files-smoke" if args.smoke else "small-files"
    if args.baselines_only:
        add_references(args, work, sets, name, started)
        return
    queue = [] if args.no_train else \
        [(name, candidate, seed) for seed in args.seeds for name in args.sets for candidate in CANDIDATES]
    extra = ["--epochs", "1"] if args.smoke else []
    with ThreadPoolExecutor(args.jobs) as pool:
        for line in pool.map(lambda cell: train_cell(work, *cell, sets[cell[0]]["classes"], extra), queue):
            print(line, flush=True)
    cells = summarise(work, args.sets, args.seeds)
    references = fit_references(work, sets, args.test)
    result = {"work": str(work), "sets": sets, "seeds": args.seeds, "smoke": args.smoke,
              "flags": {name: {c: CANDIDATES[c](sets[name]["classes"]) + extra for c in CANDIDATES} for name in args.sets},
              "cells": cells, "verdict": verdict(cells, args.sets), "references": references}
    if args.test:
        chosen = result["verdict"]["chosen"]
        read = ["(a) defaults"] + ([chosen] if chosen and chosen != "(a) defaults" else [])
        result["test"] = {f"{name} {c}": {seed: evaluate(work, name, c, seed) for seed in args.seeds}
                          for name in args.sets for c in read}
    result["wall_seconds"] = round(time.time() - started)  # this command's: the runs it trained, the test reading
    write_result(name, result, args.out)
    print_tables(result, args.seeds)


def print_tables(result: dict, seeds: list[int]) -> None:
    # (a result file read back has its seeds as strings)
    cells = {key: {**cell, "seeds": {int(seed): run for seed, run in cell["seeds"].items()}}
             for key, cell in result.get("cells", {}).items()}
    print(table(cells, seeds, result.get("references")))
    if result.get("verdict"):
        print(json.dumps(result["verdict"], indent=1))
    for key, accuracies in result.get("test", {}).items():
        found = [a for a in accuracies.values() if a is not None]
        print(f"test {key}: mean {100 * mean(found):.2f}% of {len(found)} seeds "
              + ", ".join(f"{100 * a:.2f}" for a in found))
    for name, rows in (result.get("references") or {}).items():
        for reference, entry in rows.items():
            if "test_accuracy" in entry:
                print(f"test {name} reference: {reference}, C={entry['C']}: {100 * entry['test_accuracy']:.2f}%")


def add_references(args, work: Path, sets: dict, name: str, started: float) -> None:
    """--baselines-only: fit the reference rows on the files just written and add them to the result file, whose
    runs' figures (and date, command) stay as they were; the rows carry their own command, date and wall time."""
    path = Path(args.out) if args.out else RESULTS_DIR / f"{name}.json"
    result = json.loads(path.read_text()) if path.exists() else {"benchmark": name, "work": str(work), "sets": sets}
    differ = [name for name in sets if result.get("sets", {}).get(name, sets[name]) != sets[name]]
    if differ:
        raise SystemExit(f"{path} describes other files than these for {differ} (sizes or class counts differ)")
    result.setdefault("references", {}).update(fit_references(work, sets, args.test))
    result["references_run"] = {"command": "python " + " ".join(["bench/small_files.py", *sys.argv[1:]]),
                                "date": datetime.date.today().isoformat(),
                                "wall_seconds": round(time.time() - started)}
    atomic_write_json(path, result)
    print(f"wrote {path}")
    print_tables(result, result.get("seeds", args.seeds))


if __name__ == "__main__":
    main()
