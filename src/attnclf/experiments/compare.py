"""`attnclf compare`: several models on one dataset under one budget, over seeds, beside TF-IDF + LR.

Writes into the output directory ``comparison.md`` (the table and the budget
it was measured under), ``comparison.csv`` (the same numbers, unrounded),
``cells.csv`` (every model x seed), ``comparison.png``, and ``runs/`` (one
run directory per cell, reusable with ``Classifier.load``).

>>> from attnclf.training.settings import DataSettings
>>> setup = Setup(DataSettings(dataset="synthetic"), seeds=(0, 1))
>>> # result = compare(setup, "experiments/compare-synthetic", models=("boe", "self-attn"))
>>> # print(result.markdown)
"""

from __future__ import annotations

from pathlib import Path

from ..errors import AttnclfError
from ..models import MODELS
from ..rundir import atomic_write_bytes, output_folder
from .budget import with_caps, with_quick
from .cells import Log, Setup, Variant, run_variants
from .plots import compare_plot, save_figure
from .reference import LABEL, tfidf_reference
from .tables import (VARIANT_COLUMNS, ExperimentResult, chance_note, describe_budget, markdown_table, summarize,
                     scores_on_training, write_cells_csv, write_csv)

DEFAULT_MODELS = ("boe", "lstm-mean", "bilstm-attn", "transformer-mean", "self-attn")


def compared_models(models: tuple[str, ...]) -> tuple[str, ...]:
    """``models`` as named, or every model ``attnclf models`` lists for ``("all",)`` (the course's baselines beside
    self-attn, which the default leaves pos-mean and mha out of); one line for none, or for all among names.

    >>> compared_models(("all",))[:3], compared_models(("boe", "self-attn"))
    (('boe', 'pos-mean', 'lstm-mean'), ('boe', 'self-attn'))
    """
    if not models:
        raise AttnclfError("--models names no model; e.g. --models boe,self-attn (or all)")
    if "all" in models:
        if len(models) > 1:
            raise AttnclfError("--models all stands alone: it names every model already")
        return tuple(MODELS)
    return models


def compare(setup: Setup, output: str | Path, models: tuple[str, ...] = DEFAULT_MODELS, reference: bool = True,
            quick: bool = False, log: Log = lambda line: None) -> ExperimentResult:
    """Train each of ``models`` with each seed of ``setup``, plus the TF-IDF reference; write the table and plot.

    The budget is ``setup``'s explicit values, then ``QUICK`` if ``quick``,
    else the dataset's recipe within ``DEFAULT_CAPS`` (see ``budget``), which leave a file's ``self-attn``
    uncapped: its cells read the file recipe's tokens (``recipes.FILE_SELF_ATTN_TOKENIZER``), as
    ``train --train-file`` does.
    """
    models = compared_models(models)
    repeated = next((model for i, model in enumerate(models) if model in models[:i]), None)
    if repeated:  # its cells would count twice, as if they were seeds of their own
        raise AttnclfError(f"--models names {repeated} twice; each model is compared once (--seeds gives repeats)")
    setup = with_quick(setup) if quick else with_caps(setup)
    with output_folder(output) as output:
        records = run_variants(setup, [Variant(m, m) for m in models], output, log)
        if reference:
            for seed in setup.seeds:
                record = tfidf_reference(setup, seed, output / "runs" / f"{LABEL}-seed{seed}")
                records.append(record)
                log(f"{LABEL} seed {seed}: accuracy {record['accuracy']:.4f}, macro-F1 {record['macro_f1']:.4f} "
                    f"(C={record['C']})")

        rows = summarize(records)
        title = f"compare on {setup.data.describe()}"
        budget = describe_budget(setup, records)
        on_training = scores_on_training(setup)
        markdown = f"## {title}\n\n{budget}\n\n{markdown_table(rows, VARIANT_COLUMNS, on_training)}"
        if note := chance_note(records, on_training, quick):
            markdown += f"\n{note}\n"
        atomic_write_bytes(output / "comparison.md", markdown.encode())
        write_csv(output / "comparison.csv", rows)
        write_cells_csv(output / "cells.csv", records)
        save_figure(compare_plot(rows, records, title, budget, on_training), output / "comparison.png")
        files = [output / name for name in ("comparison.md", "comparison.csv", "cells.csv", "comparison.png")]
        return ExperimentResult(markdown, records, files)

