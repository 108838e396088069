"""Per-cell records -> one summary row per variant -> Markdown and CSV.

Spreads are the sample standard deviation over seeds (n - 1 in the
denominator); with one seed there is none. "training s" is the wall-clock
time of the epochs (validation included) from metrics.json; "cell CPU s" is
the CPU time of the whole cell (loading, tokenising, training, testing) in
the process that trained it, which on a busy shared machine is the better
guide to what the cell costs on an idle one with the same thread count.

>>> rows = summarize([{"label": "boe", "model": "boe", "accuracy": 0.8, "macro_f1": 0.8},
...                   {"label": "boe", "model": "boe", "accuracy": 0.9, "macro_f1": 0.7}])
>>> round(rows[0]["accuracy_mean"], 2), round(rows[0]["accuracy_std"], 3), rows[0]["seeds"]
(0.85, 0.071, 2)
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.registry import is_toy_set
from ..recipes import file_recipe, recipe_for
from ..rundir import atomic_write_bytes, check_fields, read_json

SPREAD = ("accuracy", "macro_f1", "final_train_loss", "final_train_accuracy")  # reported as mean ± std
AVERAGED = ("parameters", "epochs", "train_seconds", "cpu_seconds", "texts_per_second")  # reported as the mean

# column key -> (header, formatter of a summary row)
COLUMNS = {
    "label": ("variant", lambda r: r["label"]),
    "model": ("model", lambda r: r["model"]),
    "parameters": ("parameters", lambda r: _number(r["parameters_mean"], "{:,.0f}")),
    "accuracy": ("test accuracy", lambda r: _spread(r, "accuracy")),
    "macro_f1": ("test macro-F1", lambda r: _spread(r, "macro_f1")),
    "final_train_accuracy": ("final training accuracy", lambda r: _spread(r, "final_train_accuracy")),
    "final_train_loss": ("final training loss", lambda r: _spread(r, "final_train_loss", "{:.2e}")),
    "epochs": ("epochs", lambda r: _number(r["epochs_mean"], "{:.3g}")),
    "train_seconds": ("training s", lambda r: _seconds(r["train_seconds_mean"])),
    "cpu_seconds": ("cell CPU s", lambda r: _seconds(r["cpu_seconds_mean"])),
    "texts_per_second": ("texts/s", lambda r: _number(r["texts_per_second_mean"], "{:,.0f}")),
    "seeds": ("seeds", lambda r: str(r["seeds"])),
}
# The columns of compare's table and of each of ablate's axes: a variant's scores, size and costs.
VARIANT_COLUMNS = ["label", "parameters", "accuracy", "macro_f1", "epochs", "train_seconds", "cpu_seconds",
                   "texts_per_second", "seeds"]


# A toy set's test split is its training set by design: its scores are said to be on the training texts, everywhere.
ON_TRAINING = "on the training texts"
TRAINING_HEADERS = {"accuracy": f"accuracy {ON_TRAINING}", "macro_f1": f"macro-F1 {ON_TRAINING}"}


def scores_on_training(setup) -> bool:
    """Whether ``setup``'s dataset is a toy set, which tests (and validates) on its training texts.

    >>> from attnclf.experiments import Setup
    >>> from attnclf.training.settings import DataSettings
    >>> scores_on_training(Setup(DataSettings(dataset="toy-reversal"))), scores_on_training(Setup(DataSettings()))
    (True, False)
    """
    return is_toy_set(setup.data.dataset)


@dataclass
class ExperimentResult:
    """What an experiment produced: the Markdown it printed and wrote, every cell's record, the files."""

    markdown: str
    records: list[dict]
    files: list[Path]


def summarize(records: list[dict]) -> list[dict]:
    """One row per label, in first-seen order: mean and std of SPREAD, mean of AVERAGED."""
    rows: dict[str, dict] = {}
    for record in records:
        record = dict(record)
        if record.get("train_loss"):
            record["final_train_loss"] = record["train_loss"][-1]
        row = rows.setdefault(record["label"], {"label": record["label"], "model": record["model"], "_cells": []})
        row["_cells"].append(record)
    for row in rows.values():
        cells = row.pop("_cells")
        row["seeds"] = len(cells)
        for key in SPREAD + AVERAGED:
            values = [c[key] for c in cells if c.get(key) is not None]
            row[f"{key}_mean"] = float(np.mean(values)) if values else None
            if key in SPREAD:
                row[f"{key}_std"] = float(np.std(values, ddof=1)) if len(values) > 1 else None
    return list(rows.values())


def markdown_table(rows: list[dict], columns: list[str], on_training: bool = False) -> str:
    """A GitHub Markdown table of ``rows`` with the given ``COLUMNS`` keys; ``on_training``: the scores are on the
    training texts (a toy set's, ``scores_on_training``), which the headers say.

    >>> markdown_table([], ["label", "accuracy"], on_training=True).splitlines()[0]
    '| variant | accuracy on the training texts |'
    """
    headers = {c: (TRAINING_HEADERS.get(c) if on_training else None) or COLUMNS[c][0] for c in columns}
    lines = ["| " + " | ".join(headers[c] for c in columns) + " |",
             "|" + "|".join("---" if c in ("label", "model") else "---:" for c in columns) + "|"]
    lines += ["| " + " | ".join(COLUMNS[c][1](row) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def at_chance(records: list[dict]) -> tuple[list[str], set[float]]:
    """The neural models (or ablate's sweep values) whose every seed's test accuracy lies within two standard errors
    of what always answering the commonest test class scores (its record's ``majority_accuracy``, over
    ``test_examples``), and those rates (rounded to 3 decimals; one per dataset). Cells without such a rate (a
    multi-label run's, the TF-IDF reference's) are not judged.

    >>> cell = {"label": "pos-mean", "accuracy": 0.51, "epochs": 3, "majority_accuracy": 0.5, "test_examples": 500}
    >>> at_chance([cell, cell | {"label": "boe", "accuracy": 0.6}])
    (['pos-mean'], {0.5})
    """
    verdicts: dict[str, list[bool]] = {}
    rates = set()
    for record in records:
        rate, count = record.get("majority_accuracy"), record.get("test_examples")
        if record.get("epochs") is None or rate is None or not count:  # (the TF-IDF reference trains no epochs)
            continue
        margin = 2 * math.sqrt(rate * (1 - rate) / count)  # two binomial standard errors of that rate
        # Both sides: well below it on an imbalanced test set, a model traded common-class hits for rare-class ones
        verdicts.setdefault(record["label"], []).append(abs(record["accuracy"] - rate) <= margin)
        rates.add(round(rate, 3))
    return [label for label, at in verdicts.items() if all(at)], rates


def chance_note(records: list[dict], on_training: bool = False, quick: bool = False) -> str | None:
    """A line naming the models or sweep values ``at_chance``: under the experiment's budget they learned nothing
    the test set shows, which a table alone reads as a worse model or setting. None where none is there.
    ``on_training``: the scores are on the training texts (a toy set's, ``scores_on_training``), which it says;
    ``quick``: the budget was --quick's, which it offers to drop.

    >>> cell = {"label": "pos-mean", "accuracy": 0.51, "epochs": 3, "majority_accuracy": 0.5, "test_examples": 500}
    >>> chance_note([cell]).split(" (")[0]
    'At chance: pos-mean'
    """
    flagged, rates = at_chance(records)
    if not flagged:
        return None
    epochs = max(r["epochs"] for r in records if r["label"] in flagged)
    rate = f"{rates.pop():.3f}" if len(rates) == 1 else "the commonest class's share"
    accuracy, texts = ((f"accuracy {ON_TRAINING}", "the training texts") if on_training
                       else ("test accuracy", "the test set"))
    return (f"At chance: {', '.join(flagged)} (every seed's {accuracy} within two standard errors of {rate}, what "
            f"always answering the commonest {'class' if on_training else 'test class'} scores): they learned "
            f"nothing {texts} show{'s' * (not on_training)} under this budget (up to {epochs} "
            f"epoch{'s' * (epochs != 1)}). Before reading that as a worse model or setting, give them more: --epochs"
            + (", or the default budget in place of --quick." if quick else "."))


def write_csv(path: Path, rows: list[dict], keys: list[str] | None = None) -> None:
    """``rows`` as CSV (atomically); columns are ``keys`` or every key of the first row."""
    keys = keys or list(rows[0])
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=keys, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_bytes(path, buffer.getvalue().encode())


CELL_KEYS = ["label", "model", "seed", "accuracy", "macro_f1", "parameters", "epochs", "train_seconds",
             "cpu_seconds", "texts_per_second", "final_train_loss", "final_train_accuracy", "run_dir"]


def write_cells_csv(path: Path, records: list[dict]) -> None:
    """Every cell (variant x seed) as one CSV row, the raw material of the summary."""
    rows = [r | {"final_train_loss": r["train_loss"][-1] if r.get("train_loss") else None} for r in records]
    write_csv(path, rows, CELL_KEYS)


SPLIT_SIZES = ("train_examples", "validation_examples", "test_examples")  # in a cell's config.json, under data


def describe_budget(setup, records: list[dict]) -> str:
    """One paragraph stating what every neural cell was trained on and with, read from a cell's config.json."""
    neural = [r for r in records if r.get("epochs") is not None]
    if not neural:
        return f"seeds {', '.join(map(str, setup.seeds))}."
    # (a file's self-attn starts from its own recipe, which the settings shared by every cell do not hold)
    self_attn = any(r.get("model") == "self-attn" for r in neural)
    recipe = file_recipe(multi_label=setup.data.multi_label) if self_attn and setup.data.dataset is None else {}
    recipe_model = {k: v for k, v in recipe.get("model_config", {}).items() if k not in setup.model_config}
    recipe_tokens = {k: v for k, v in recipe.get("tokenizer", {}).items() if k not in setup.tokenizer}
    # The shared figures (tokens per text among them) from a cell the file recipe did not build, where there is one
    built = recipe_model or recipe_tokens
    shown = next((r for r in neural if not built or r.get("model") != "self-attn"), neural[0])
    settings = read_json(Path(shown["run_dir"]) / "config.json")["settings"]
    sizes = _split_sizes(neural)
    on_training = scores_on_training(setup)
    texts = "; ".join((f"{train:,} training texts" if on_training else
                       f"{train:,} training / {validation:,} validation / {test:,} test texts")
                      + (f" on {', '.join(map(str, names))}" if len(sizes) > 1 else "")
                      for (train, validation, test), names in sizes.items())
    if on_training:  # (its validation and test splits are the training set: their sizes would read as more texts)
        texts += ", which a toy set also validates and tests on"
    train, tokenizer = settings["train"], settings["tokenizer"]
    shared = recipe_for(setup.data.dataset).get("model_config", {}) | setup.model_config
    model = ", ".join(f"{k}={v}" for k, v in shared.items()) or "none"
    if recipe_model:
        # (its buckets sized to the training texts, the recipe's count their cap: 1,048,576 read as the 1,024 built)
        cell = next(r for r in neural if r.get("model") == "self-attn")
        sized = read_json(Path(cell["run_dir"]) / "config.json")["settings"].get("ngram_buckets_sized")
        capped = {"nb_ngram_buckets": " at most, sized to the training texts"} if sized else {}
        model += ("; self-attn's from the file recipe (recipes.FILE_SELF_ATTN): "
                  + ", ".join(f"{k}={v}{capped.get(k, '')}" for k, v in recipe_model.items()))
    reads = ", ".join(f"up to {v}" if k == "max_len" else f"{k}={v}" for k, v in recipe_tokens.items())
    reads = f" (self-attn reads {reads}: the file recipe's, recipes.FILE_SELF_ATTN_TOKENIZER)" if reads else ""
    stop = f"early stopping after {train['patience']} stale epochs" if train["patience"] else "no early stopping"
    return (
        f"Budget of every neural cell: {texts} (seed {neural[0]['seed']}); up to {train['epochs']} epoch{'s' * (train['epochs'] != 1)}, "
        f"{stop} on validation {train['monitor']}; batch {train['batch_size']}, {train['optimizer']} "
        f"lr {train['lr']:g} ({train['schedule']} schedule); {tokenizer['kind']} tokenizer, at most "
        f"{tokenizer['max_len']} tokens per text{reads}, vocabulary at most {tokenizer['vocab_size']:,}. "
        f"Model settings from the recipe and --set (each model takes the fields it has): {model}. "
        f"Seeds {', '.join(map(str, setup.seeds))}; torch threads: {setup.threads or 'default'}."
    )


def _split_sizes(neural: list[dict]) -> dict[tuple[int, int, int], list[str | None]]:
    """The (train, validation, test) sizes of the first seed's cells (grouped splits vary with the seed), each with
    the datasets of that size (the toy-order experiment's sets differ in size), read from each cell's config.json."""
    sizes: dict[tuple[int, int, int], list[str | None]] = {}
    for record in (r for r in neural if r["seed"] == neural[0]["seed"]):
        path = Path(record["run_dir"]) / "config.json"
        cell = check_fields(path, read_json(path), {"data": dict.fromkeys(SPLIT_SIZES, "a whole number >= 0"),
                                                    "settings": {"data": "an object"}})
        counts = tuple(cell["data"][size] for size in SPLIT_SIZES)
        names = sizes.setdefault(counts, [])
        dataset = cell["settings"]["data"].get("dataset")  # (a cell without one was reused: None is its default)
        if dataset not in names:
            names.append(dataset)
    return sizes


def _spread(row: dict, key: str, fmt: str = "{:.3f}") -> str:
    mean, std = row.get(f"{key}_mean"), row.get(f"{key}_std")
    if mean is None:
        return "-"
    return fmt.format(mean) + ("" if std is None else " ± " + fmt.format(std))


def _number(value: float | None, fmt: str) -> str:
    return "-" if value is None or math.isnan(value) else fmt.format(value)


def _seconds(value: float | None) -> str:
    """Whole seconds, or tenths below 100 s: the toy sets train in under a second, which read as 0.

    >>> _seconds(0.43), _seconds(12.34), _seconds(99.96), _seconds(1234.5)
    ('0.4', '12.3', '100', '1,234')
    """
    # (rounded first: 99.96 is "100", whole, not "100.0")
    return _number(value, "{:,.1f}" if value is not None and round(value, 1) < 100 else "{:,.0f}")
