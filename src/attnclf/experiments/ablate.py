"""`attnclf ablate`: change one axis of a model's config at a time, over seeds; and the course's toy-order study.

``ablate`` sweeps each axis around the base config (the recipe plus
``setup.model_config``); variants that equal the base share its run
directories, so the base is trained once per seed however many axes include
it. Any config field is an axis: ``{"heads": [1, 2, 4]}``. Per axis it
writes ``<axis>.md``, ``<axis>.csv`` and ``<axis>.png``; ``ablation.md``
holds all tables and ``cells.csv`` every cell.

``toy_order`` reruns the course notebook on its three 3-token sets: mean
pooling, positions, self-attention, self-attention without positions, and
with two heads, compared by training loss (``toy-order.md``,
``toy-order.png``).

>>> from attnclf.training.settings import DataSettings
>>> setup = Setup(DataSettings(dataset="sst2-sentences"))
>>> # print(ablate(setup, "experiments/ablate-sst2", axes={"heads": [1, 2, 4, 8]}).markdown)
"""

from __future__ import annotations

import json
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from pathlib import Path

from ..errors import AttnclfError, shown
from ..models import MODELS
from ..models.ngrams import bounded_buckets
from ..rundir import atomic_write_bytes, output_folder, read_json
from .budget import with_caps, with_quick
from .cells import Log, Setup, Variant, run_variants, variant_settings
from .plots import loss_panels, save_figure, score_plot
from .tables import (VARIANT_COLUMNS, ExperimentResult, chance_note, describe_budget, markdown_table, summarize,
                     scores_on_training, write_cells_csv, write_csv)

# The axes for the real-data ablation of `self-attn`.
AXES: dict[str, list] = {
    "positional": ["none", "learned", "sinusoidal"],
    "pooling": ["mean", "first", "attention"],
    "heads": [1, 2, 4, 8],
    "layers": [1, 2, 4],
    "pooling_score": ["dot", "scaled_dot", "general", "additive"],
}

TOY_SETS = ("toy-reversal", "toy-relative", "toy-both")
# Seed 003's models: its MeanClassifier is embedding -> residual MLP -> mean, i.e. pos-mean without positions.
TOY_VARIANTS = [
    Variant("mean", "pos-mean", {"positional": "none"}),
    Variant("positions", "pos-mean"),
    Variant("self-attention", "mha"),
    Variant("self-attention, no positions", "mha", {"positional": "none"}),
    Variant("self-attention, 2 heads", "mha", {"heads": 2}),
]
# The loss and accuracy of one epoch's weights, the last: the test (= training) accuracy of the kept weights, chosen by
# their loss at another epoch, showed 1.000 beside a final loss of ln 2 when training had diverged since.
TOY_COLUMNS = ["label", "model", "parameters", "final_train_loss", "final_train_accuracy", "seeds"]
# Seeds of `positions` on toy-relative ended at a loss of exactly ln 2 with a training accuracy of 0.75: equal
# probabilities, the winner picked by rounding. Without this note that reads as order half learned.
TOY_READING = ("A final training loss of 0.693 (ln 2) is a coin flip: the model gives both classes probability 0.5, "
               "so which one wins, and the accuracy beside that loss, is decided by rounding; any accuracy there "
               "is chance.")


def ablate(setup: Setup, output: str | Path, model: str = "self-attn", axes: dict[str, list] | None = None,
           quick: bool = False, log: Log = lambda line: None) -> ExperimentResult:
    """Train ``model`` once per value of each axis (one axis at a time) and seed; write a table and plot per axis.

    The budget is resolved as in ``compare``: explicit values, then ``QUICK``
    if ``quick``, else the recipe within ``DEFAULT_CAPS``. Without ``axes``, the default ones ``model`` has.
    """
    if axes is None:
        fields = {f.name for f in dataclass_fields(MODELS[model].config_class)} if model in MODELS else set(AXES)
        axes = {axis: values for axis, values in AXES.items() if axis in fields}
        if not axes:
            raise AttnclfError(f"model {shown(model)} has none of the default axes ({', '.join(AXES)}); "
                               f"name what to sweep with --sweep FIELD=V1,V2")
    empty = [axis for axis, values in axes.items() if not values]
    if empty:
        raise AttnclfError(f"axis {shown(empty[0])} has no values to sweep")
    setup = with_quick(setup) if quick else with_caps(setup)
    with output_folder(output) as output:
        runs_dir = output / "runs"
        base_dir = variant_settings(setup, Variant("base", model), setup.seeds[0], runs_dir).output

        variants = {}
        for axis, values in axes.items():
            for value in values:
                label = f"{axis}={value}"
                variant = Variant(label, model, {axis: value})
                is_base = variant_settings(setup, variant, setup.seeds[0], runs_dir).output == base_dir
                variants[axis, value] = replace(variant, label=label + " (base)") if is_base else variant
        records = run_variants(setup, list(variants.values()), output, log)

        sections = [f"## ablate {model} on {setup.data.describe()}\n\n{describe_budget(setup, records)}\n"]
        files = [output / "ablation.md", output / "cells.csv"]
        on_training = scores_on_training(setup)
        for axis, values in axes.items():
            labels = {variants[axis, value].label for value in values}
            axis_records = [r for r in records if r["label"] in labels]
            rows = summarize(axis_records)
            table = markdown_table(rows, VARIANT_COLUMNS, on_training) + same_branch_note(
                axis, [variants[axis, v].label for v in values], axis_records)
            if note := chance_note(axis_records, on_training, quick):  # per axis: a value at chance reads as a worse one
                table += f"\n{note}\n"
            atomic_write_bytes(output / f"{axis}.md", f"### {axis}\n\n{table}".encode())
            write_csv(output / f"{axis}.csv", rows)
            save_figure(score_plot(rows, axis_records, "accuracy", f"{model} on {setup.data.describe()}: {axis}",
                                   on_training), output / f"{axis}.png")
            sections.append(f"### {axis}\n\n{table}")
            files += [output / f"{axis}.{ext}" for ext in ("md", "csv", "png")]
        markdown = "\n".join(sections)
        atomic_write_bytes(output / "ablation.md", markdown.encode())
        write_cells_csv(output / "cells.csv", records)
        return ExperimentResult(markdown, records, files)


def same_branch_note(axis: str, labels: list[str], records: list[dict]) -> str:
    """A line under an axis' table naming its values that built the same model, the n-gram branch's budget of bucket
    x class weights halving their buckets to one count (``nb_ngram_buckets`` 262,144 and 1,048,576 on 25 classes
    both keep 131,072); empty where each value built its own.

    >>> same_branch_note("heads", ["heads=1", "heads=2"], [])
    ''
    """
    built, asked = {}, {}  # label -> the model a cell of it built (the branch's buckets as kept), and without budget
    for record in records:
        if record["label"] in built:
            continue
        run = Path(record["run_dir"])
        config = dict(read_json(run / "config.json")["settings"]["model_config"])
        kept = bounded_buckets(config.get("nb_ngram_buckets", 0), len(read_json(run / "labels.json")),
                               config.pop("nb_ngram_bucket_budget", 0))
        built[record["label"]] = json.dumps(config | {"nb_ngram_buckets": kept}, sort_keys=True)
        asked[record["label"]] = json.dumps(config, sort_keys=True)
    groups = {}
    for label in labels:
        groups.setdefault(built.get(label), []).append(label)
    # (values alike but for their budget built alike without one: swept budgets that cut nothing are not the budget's)
    same = [" and ".join(group) for model, group in groups.items()
            if model is not None and len({asked[label] for label in group}) > 1]
    if not same:
        return ""
    return (f"\nnote: {'; '.join(same)} built the same model: the n-gram branch's nb_ngram_bucket_budget halved "
            f"their buckets to one count for this data's classes; `--set nb_ngram_bucket_budget=0` sweeps {axis} as "
            f"given\n")


def toy_order(setup: Setup, output: str | Path, log: Log = lambda line: None) -> ExperimentResult:
    """The course's order experiment on ``TOY_SETS`` with ``TOY_VARIANTS``, under the toy recipe.

    The toy sets' test split is their training set, and the story is the training loss: the table gives the last
    epoch's training loss and accuracy, of the same weights (the runs keep another epoch's, the best validated).
    """
    records, sections, panels = [], [], {}
    with output_folder(output) as output:
        for dataset in TOY_SETS:
            toy_setup = replace(setup, data=replace(setup.data, dataset=dataset))
            cells = run_variants(toy_setup, TOY_VARIANTS, output / dataset, log, dataset_shown=dataset)
            rows = summarize(cells)
            sections.append(f"### {dataset}\n\n{markdown_table(rows, TOY_COLUMNS)}")
            panels[dataset] = {v.label: [c["train_loss"] for c in cells if c["label"] == v.label]
                               for v in TOY_VARIANTS}
            records += [c | {"label": f"{dataset}: {c['label']}"} for c in cells]
        budget = describe_budget(toy_setup, records)  # the three sets share one recipe
        markdown = "## ablate toy-order\n\n" + budget + "\n\n" + "\n".join(sections) + "\n" + TOY_READING + "\n"
        atomic_write_bytes(output / "toy-order.md", markdown.encode())
        write_cells_csv(output / "cells.csv", records)
        save_figure(loss_panels(panels, "training loss on the course's 3-token sets (mean of seeds, range shaded)"),
                    output / "toy-order.png")
        files = [output / name for name in ("toy-order.md", "cells.csv", "toy-order.png")]
        return ExperimentResult(markdown, records, files)
