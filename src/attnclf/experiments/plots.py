"""The experiments' figures, drawn with matplotlib's object API on the Agg canvas (no display needed).

Scores are drawn as dots with error bars, not bars: the axis is zoomed to
where the scores are, and a zoomed bar chart exaggerates differences.

>>> from attnclf.experiments.tables import summarize
>>> cells = [{"label": "boe", "model": "boe", "seed": s, "accuracy": a} for s, a in [(0, .8), (1, .9)]]
>>> score_plot(summarize(cells), cells, "accuracy", "boe on demo").axes[0].get_title()
'boe on demo'
"""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from ..rundir import atomic_write_bytes
from .tables import at_chance

DPI = 100
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)))
METRIC_NAMES = {"accuracy": "test accuracy", "macro_f1": "test macro-F1"}
TOY_METRIC_NAMES = {"accuracy": "accuracy on the training texts (toy set)",
                    "macro_f1": "macro-F1 on the training texts (toy set)"}  # a toy set tests on its training texts


def _figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def save_figure(figure: Figure, path: Path) -> None:
    """Write ``figure`` as a PNG, atomically."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    atomic_write_bytes(path, buffer.getvalue())


def _spread(mean: float, std: float | None) -> list[list[float]]:
    """The error bar of a score in [0, 1]: mean ± std, cut at the ends of the range (1.09 is no accuracy).

    >>> [[round(end, 3) for end in side] for side in _spread(0.99, 0.05)]
    [[0.05], [0.01]]
    """
    std = std or 0.0
    return [[min(std, mean)], [min(std, 1.0 - mean)]]


def _mark_at_chance(ax, rows: list[dict], positions, records: list[dict]) -> list[float]:
    """Label ``ax``'s rows by variant, those ``tables.at_chance`` names "(at chance)" in red, with the commonest
    class's share dashed where one is; the shares drawn, for another panel to draw too."""
    flagged, rates = at_chance(records)
    ax.set_yticks(positions, [row["label"] + (" (at chance)" if row["label"] in flagged else "") for row in rows])
    for tick in ax.get_yticklabels():
        if tick.get_text().endswith("(at chance)"):
            tick.set_color("tab:red")
    if not flagged:  # the line only where a model sits on it: beside models that all learned, it read as a warning
        return []
    for rate in sorted(rates):
        ax.axvline(rate, color="0.3", linestyle="--", lw=1, label=f"always the commonest class ({rate:.3f})")
    ax.legend(fontsize="small", loc="best")  # pinned to a corner, it hid the score of whichever row stood there
    return sorted(rates)


def score_plot(rows: list[dict], records: list[dict], metric: str, title: str, on_training: bool = False) -> Figure:
    """Mean ± std of ``metric`` per variant (black), every seed as a grey dot; for accuracy, the variants
    ``tables.at_chance`` names are marked as on ``compare_plot``. ``on_training``: a toy set's scores, which are on
    its training texts."""
    figure = _figure(6.4, 0.45 * len(rows) + 1.4)
    ax = figure.add_subplot()
    positions = np.arange(len(rows))[::-1]  # first row at the top, as in the table
    for y, row in zip(positions, rows):
        seeds = [r[metric] for r in records if r["label"] == row["label"]]
        ax.scatter(seeds, [y] * len(seeds), color="0.65", s=14, zorder=2)
        ax.errorbar(row[f"{metric}_mean"], y, xerr=_spread(row[f"{metric}_mean"], row[f"{metric}_std"]), fmt="o",
                    color="black", capsize=4, zorder=3)
    if metric == "accuracy":  # (at_chance judges accuracy)
        _mark_at_chance(ax, rows, positions, records)
    else:
        ax.set_yticks(positions, [row["label"] for row in rows])
    names = TOY_METRIC_NAMES if on_training else METRIC_NAMES
    ax.set_xlabel(f"{names.get(metric, metric)} (mean ± std over seeds; grey: each seed)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.4)
    return figure


def compare_plot(rows: list[dict], records: list[dict], title: str, budget: str, on_training: bool = False) -> Figure:
    """Left: test accuracy per model; right: accuracy against training time (log scale). Under the title, the
    ``budget`` (``tables.describe_budget``); the models ``tables.at_chance`` names are marked "(at chance)", with
    the commonest class's share dashed on both panels: the figure stands on a slide without comparison.md beside it.
    ``on_training``: a toy set's scores, which the axes say are on its training texts.
    """
    figure = _figure(11, 0.45 * len(rows) + 2.8)
    left, right = figure.subplots(1, 2, gridspec_kw={"width_ratios": [1.1, 1]})
    positions = np.arange(len(rows))[::-1]
    for y, row in zip(positions, rows):
        seeds = [r["accuracy"] for r in records if r["label"] == row["label"]]
        left.scatter(seeds, [y] * len(seeds), color="0.65", s=14, zorder=2)
        spread = _spread(row["accuracy_mean"], row["accuracy_std"])
        left.errorbar(row["accuracy_mean"], y, xerr=spread, fmt="o", color="black", capsize=4)
        right.errorbar(row["train_seconds_mean"], row["accuracy_mean"], yerr=spread, fmt="o",
                       capsize=4, label=row["label"])
    for rate in _mark_at_chance(left, rows, positions, records):
        right.axhline(rate, color="0.3", linestyle="--", lw=1, label=f"always the commonest class ({rate:.3f})")
    accuracy = (TOY_METRIC_NAMES if on_training else METRIC_NAMES)["accuracy"]
    left.set_xlabel(f"{accuracy} (mean ± std; grey: each seed)")
    left.grid(axis="x", alpha=0.4)
    right.set_xscale("log")
    right.xaxis.set_minor_formatter(NullFormatter())
    right.set_xlabel("training seconds (wall clock, log scale)")
    right.set_ylabel(accuracy)
    right.grid(alpha=0.4)
    right.legend(fontsize="small")
    figure.suptitle(title + "\n" + textwrap.fill(budget, 150), fontsize="medium")
    return figure


def loss_curves(curves: dict[str, list[list[float]]], title: str, ax) -> None:
    """Training loss per epoch on ``ax``: the mean over seeds as a line, their range shaded (the course's plot),
    beside the loss of a coin flip (ln 2: the course's sets have two classes)."""
    start = 0.0
    for index, (label, runs) in enumerate(curves.items()):
        length = min(len(run) for run in runs)  # early stopping may end seeds at different epochs
        losses = np.array([run[:length] for run in runs])
        epochs = np.arange(1, length + 1)
        # Dashes keep a curve visible where another lies on top of it.
        (line,) = ax.plot(epochs, losses.mean(axis=0), label=label, linestyle=LINESTYLES[index % len(LINESTYLES)])
        ax.fill_between(epochs, losses.min(axis=0), losses.max(axis=0), color=line.get_color(), alpha=0.2)
        start = max(start, losses[:, 0].max())
    # A spike of a constant-lr Adam run would squash every curve to the floor; clip it (the table has the numbers).
    ax.set_ylim(0, 1.5 * start)
    # Where a curve flattens onto it, the model learned nothing; curves of variants that did so lie on one another.
    ax.axhline(math.log(2), color="grey", linewidth=2.5, alpha=0.5, zorder=0,
               label=f"chance: ln 2 = {math.log(2):.3f} (a coin flip)")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss (cross-entropy, nats)")
    ax.set_title(title)
    ax.grid(alpha=0.4)
    ax.legend(fontsize="small")


def loss_panels(panels: dict[str, dict[str, list[list[float]]]], title: str) -> Figure:
    """One ``loss_curves`` panel per dataset, side by side, sharing the loss axis."""
    figure = _figure(5 * len(panels) + 2.5, 4)
    axes = np.atleast_1d(figure.subplots(1, len(panels), sharey=True))
    for ax, (name, curves) in zip(axes, panels.items()):
        loss_curves(curves, name, ax)
    # One legend beside the panels: inside, the best corner of one panel covered another panel's curves.
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes:
        ax.get_legend().remove()
    figure.legend(handles, labels, loc="outside right center", fontsize="small")
    figure.suptitle(title)
    return figure
