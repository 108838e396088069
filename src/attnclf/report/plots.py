"""The report's figures, drawn with matplotlib's object API on the Agg canvas.

Every function returns a ``Figure`` and touches no global pyplot state, so
plotting works without a display and from any thread; ``png_bytes`` renders one.

>>> fig = training_curves([{"epoch": 1, "train_loss": 0.7, "val_loss": 0.6, "train_accuracy": 0.5,
...                         "val_accuracy": 0.6}])
>>> png_bytes(fig)[:8]
b'\\x89PNG\\r\\n\\x1a\\n'
"""

from __future__ import annotations

import io
import re
import warnings
from collections import Counter
from typing import Iterator, Sequence

import numpy as np
from matplotlib import colormaps, rc_context
from matplotlib.colors import ListedColormap, TwoSlopeNorm
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter
from sklearn.metrics import auc, average_precision_score, precision_recall_curve, roc_curve

from ..errors import AttnclfWarning
from ..evaluation.metrics import ECE_BINS, expected_calibration_error, reliability

DPI = 100
# matplotlib's warning of a character its font has no glyph for (a Chinese or Devanagari token in a chart)
_MISSING_GLYPH = re.compile(r"Glyph \d+ .* missing from font\(s\) (.+)\.$")
_FONTS_WARNED_OF: set[str] = set()
# The Keras-blog seed's metric history: what history.jsonl records per epoch besides loss and accuracy.
HISTORY_METRICS = [("val_macro_precision", "precision (macro)"), ("val_macro_recall", "recall (macro)"),
                   ("val_roc_auc", "ROC AUC"), ("val_average_precision", "average precision"),
                   ("val_macro_f1", "F1 (macro)"),
                   ("val_micro_f1", "F1 (micro, multi-label)"), ("val_tp", "true positives"),
                   ("val_fp", "false positives"), ("val_tn", "true negatives"), ("val_fn", "false negatives")]


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes, its every text drawn as it is: class names and tokens come from the data, and
    matplotlib would read one between dollar signs as LaTeX (mathtext), failing on ``$\\frac{a}{$``. (The texts made
    so far are told so; those the drawing makes, such as ticks, take it from the setting it runs under.)

    >>> png_bytes(confusion_matrix_figure([[1, 0], [0, 1]], ["$\\\\frac{a}{$", "b"]))[:4]
    b'\\x89PNG'
    """
    for text in fig.findobj(Text):
        text.set_parse_math(False)
    buffer = io.BytesIO()
    with rc_context({"text.parse_math": False}), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(buffer, format="png", dpi=DPI)
    fonts = []
    for warning in caught:
        lacking = _MISSING_GLYPH.match(str(warning.message))
        if lacking is None:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        elif lacking.group(1) not in fonts:
            fonts.append(lacking.group(1))
    fonts = [font for font in fonts if font not in _FONTS_WARNED_OF]
    if fonts:
        # matplotlib warns of each character, twice, in every chart: 26 lines for four short Hindi and Chinese texts.
        # Told once a font, for all the charts a process draws (the catching above defeats the warning filter's once).
        _FONTS_WARNED_OF.update(fonts)
        warnings.warn(f"the charts' font ({', '.join(fonts)}) lacks characters of these texts, which show as empty "
                      f"boxes in them; the coloured tokens beside each chart show them all", AttnclfWarning,
                      stacklevel=2)
    return buffer.getvalue()


def training_curves(history: Sequence[dict], kept: int | None = None, multi_label: bool = False) -> Figure:
    """Loss and accuracy per epoch, training and validation (training alone for a refit, which validates on none);
    a dashed line at epoch ``kept``, whose weights the run kept. A ``multi_label`` run's accuracy is subset accuracy
    (a text's whole label set right), and its panel says so.

    >>> training_curves([{"epoch": 1, "train_loss": 0.7, "train_accuracy": 0.1}], multi_label=True).axes[1].get_title()
    'subset accuracy'
    """
    epochs = [h["epoch"] for h in history]
    fig = _figure(9, 3.4)
    for ax, metric in zip(fig.subplots(1, 2), ("loss", "accuracy")):
        named = "subset accuracy" if multi_label and metric == "accuracy" else metric
        ax.plot(epochs, [h[f"train_{metric}"] for h in history], "o-", label="training")
        if f"val_{metric}" in history[0]:
            ax.plot(epochs, [h[f"val_{metric}"] for h in history], "s-", label="validation")
        if kept is not None:
            ax.axvline(kept, color="grey", linestyle="--", lw=1, label=f"kept (epoch {kept})")
        ax.set(xlabel="epoch", ylabel=named, title=named)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend()
    return fig


def metric_history(history: Sequence[dict]) -> Figure | None:
    """Validation precision, recall, ROC AUC, average precision, F1 and TP/FP/TN/FN per epoch (those recorded); None
    if none are.

    >>> [ax.get_title() for ax in metric_history([{"epoch": 1, "val_macro_f1": 0.8}]).axes if ax.get_visible()]
    ['F1 (macro)']
    >>> metric_history([{"epoch": 1, "train_loss": 0.7}]) is None
    True
    """
    present = [(key, title) for key, title in HISTORY_METRICS if any(h.get(key) is not None for h in history)]
    if not present:
        return None
    columns = 4
    rows = -(-len(present) // columns)
    fig = _figure(11, 2.6 * rows)
    axes = np.atleast_1d(fig.subplots(rows, columns)).ravel()
    epochs = [h["epoch"] for h in history]
    for ax, (key, title) in zip(axes, present):
        values = [np.nan if h.get(key) is None else h[key] for h in history]
        ax.plot(epochs, values, "o-", color="tab:green")
        ax.set(title=title, xlabel="epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    for ax in axes[len(present):]:
        ax.set_visible(False)
    fig.suptitle("validation metrics per epoch", fontsize="medium")
    return fig


CHART_NAME_LENGTH = 24  # 20 Newsgroups' longest name, comp.sys.ibm.pc.hardware, is drawn whole


def chart_name(name: str) -> str:
    """A class name as a chart's tick or legend writes it: whole up to ``CHART_NAME_LENGTH`` characters, else its
    start and end around "…", so that names differing at either end stay apart. Whole, a few names of 40 characters
    squeezed a binary confusion matrix to a corner of its picture, and 30 of 120 left matplotlib no room to lay a
    chart out at all; the page's tables name each class whole.

    >>> chart_name("comp.sys.ibm.pc.hardware"), chart_name("customer complaint about late delivery")
    ('comp.sys.ibm.pc.hardware', 'customer compla…delivery')
    """
    if len(name) <= CHART_NAME_LENGTH:
        return name
    tail = CHART_NAME_LENGTH // 3
    return f"{name[:CHART_NAME_LENGTH - tail - 1]}…{name[-tail:]}"


def chart_names(label_names: Sequence[str]) -> list[str]:
    """Every class's ``chart_name``, those cut alike (long names differing only in their middles) told apart by
    their class's number, from 1 as the page's tables count them, so that no two ticks or curves read the same.

    >>> chart_names(["customer complaint about late delivery", "customer complaint regarding late delivery", "ok"])
    ['customer compla…delivery #1', 'customer compla…delivery #2', 'ok']
    """
    names = [chart_name(name) for name in label_names]
    counts = Counter(names)
    return [f"{name} #{i + 1}" if counts[name] > 1 else name for i, name in enumerate(names)]


def confusion_matrix_figure(matrix: Sequence[Sequence[int]], label_names: Sequence[str]) -> Figure:
    """Counts with rows = true class, columns = predicted class, each written in its cell for up to 12 classes; the
    classes named by ``chart_names``, the columns' slanted where more than 4 or longer than a word would overlap.

    >>> [text.get_text() for text in confusion_matrix_figure([[3, 1], [0, 2]], ["neg", "pos"]).axes[0].texts]
    ['3', '1', '0', '2']
    """
    matrix = np.asarray(matrix)
    size = min(12.0, 2.5 + 0.45 * len(label_names))
    fig = _figure(size + 1, size)
    ax = fig.subplots()
    image = ax.imshow(matrix, cmap="Blues")
    fig.colorbar(image, ax=ax, shrink=0.8)
    ticks, names = np.arange(len(label_names)), chart_names(label_names)
    slanted = len(names) > 4 or max(map(len, names), default=0) > 10
    ax.set_xticks(ticks, names, rotation=45 if slanted else 0, ha="right" if slanted else "center")
    ax.set_yticks(ticks, names)
    ax.set(xlabel="predicted", ylabel="true", title="confusion matrix")
    if len(label_names) <= 12:
        threshold = matrix.max() / 2 if matrix.size else 0
        for (row, col), count in np.ndenumerate(matrix):
            ax.text(col, row, str(count), ha="center", va="center",
                    color="white" if count > threshold else "black")
    return fig


# Classes up to which a curve figure's legend sits inside its axes; past them it stands beside them, where a
# legend as tall as the plot (20 Newsgroups') hides no curve.
LEGEND_INSIDE_CLASSES = 6


def _curves_size(classes: int, beside: bool = False) -> tuple[float, float]:
    """A curve figure's inches: wider when its legend stands beside the axes, so the plot keeps its size."""
    return (8.5, 5) if beside or classes > LEGEND_INSIDE_CLASSES else (5.5, 5)


def _class_legend(ax, classes: int, inside: str | None) -> None:
    """The legend of a figure with a curve per class: at ``inside`` for a few classes, beside the axes for more or
    when ``inside`` is None."""
    if inside is not None and classes <= LEGEND_INSIDE_CLASSES:
        ax.legend(loc=inside, fontsize="small")
    else:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1),
                  fontsize="small" if classes <= LEGEND_INSIDE_CLASSES else "x-small")


def _drawn_classes(y_true: np.ndarray, label_names: Sequence[str]) -> Iterator[tuple[str, int, np.ndarray, str]]:
    """The classes a curve figure draws, as ``(colour, class, its texts as a mask, curve name)`` (``chart_names``):
    the positive class (index 1) when binary, each class against the rest otherwise, skipping a class without both
    positive and negative texts (its curve is undefined). The colour is the class's own, so that a class absent from
    the texts shifts no other class's colour, and a class has the same one in every such figure.

    >>> [(colour, c, name) for colour, c, _, name in _drawn_classes(np.array([1, 2, 1]), ["a", "b", "c"])]
    [('C1', 1, 'b vs rest'), ('C2', 2, 'c vs rest')]
    """
    binary, names = len(label_names) == 2, chart_names(label_names)
    for colour, c in enumerate([1] if binary else range(len(label_names))):
        positives = y_true == c
        if positives.any() and not positives.all():
            yield f"C{colour}", c, positives, names[c] + ("" if binary else " vs rest")


def roc_figure(y_true: Sequence[int], probabilities: np.ndarray, label_names: Sequence[str]) -> Figure | None:
    """ROC curve: the positive class (index 1) when binary, one-vs-rest per class otherwise (``_drawn_classes``);
    None where no class has one (every text is of one class), which would leave a chart of the chance line alone.

    >>> [line.get_label() for line in roc_figure([0, 1, 1], np.array([[.8, .2], [.3, .7], [.6, .4]]), ["n", "p"])
    ...  .axes[0].get_lines()]
    ['p (AUC 1.000)', 'chance']
    """
    drawn = list(_drawn_classes(np.asarray(y_true), label_names))
    if not drawn:
        return None
    fig = _figure(*_curves_size(len(label_names)))
    ax = fig.subplots()
    for colour, c, positives, name in drawn:
        fpr, tpr, _ = roc_curve(positives, probabilities[:, c])
        ax.plot(fpr, tpr, color=colour, lw=1.8 if len(label_names) == 2 else 1.2,
                label=f"{name} (AUC {auc(fpr, tpr):.3f})")
    ax.plot([0, 1], [0, 1], "--", color="grey", lw=1, label="chance")
    # Untitled: the page heads it ("ROC curve"), and the legend carries each curve's AUC.
    ax.set(xlabel="false positive rate", ylabel="true positive rate", xlim=(0, 1), ylim=(0, 1.01))
    _class_legend(ax, len(label_names), inside="lower right")
    ax.grid(alpha=0.3)
    return fig


def precision_recall_figure(y_true: Sequence[int], probabilities: np.ndarray,
                            label_names: Sequence[str]) -> Figure | None:
    """Precision against recall, the classes ``roc_figure`` draws (the positive class when binary, one-vs-rest per
    class otherwise; None where it draws none), each labelled with its average precision; each class's chance level,
    its share of the texts (what precision a random ranking keeps), dashed in its colour. A rare class's curve starts
    its reading there, where its ROC curve, flattered by the many negatives, would not show it.

    >>> fig = precision_recall_figure([0, 1, 1, 0], np.array([[.8, .2], [.3, .7], [.6, .4], [.9, .1]]), ["n", "p"])
    >>> [line.get_label() for line in fig.axes[0].get_lines()]
    ['p (AP 1.000)', 'chance (p: 50% of the texts)']
    """
    drawn = list(_drawn_classes(np.asarray(y_true), label_names))
    if not drawn:
        return None
    binary = len(label_names) == 2
    fig = _figure(*_curves_size(len(label_names), beside=True))
    ax = fig.subplots()
    shares = []
    for colour, c, positives, name in drawn:
        precision, recall, _ = precision_recall_curve(positives, probabilities[:, c])
        ax.plot(recall, precision, drawstyle="steps-post", color=colour, lw=1.8 if binary else 1.2,
                label=f"{name} (AP {average_precision_score(positives, probabilities[:, c]):.3f})")
        shares.append((colour, name, positives.mean()))
    for i, (colour, name, share) in enumerate(shares):  # after the curves, so their key comes last in the legend
        # One legend entry says what the dashed lines are; binary, it names the class (its curve's name) and its share.
        chance = (f"chance ({name}: {share:.0%} of the texts)" if binary else
                  "_" if i else "chance (each class's share of the texts)")
        ax.axhline(share, linestyle="--", color=colour, lw=1, label=chance)
    # Untitled, as the ROC figure: the page heads it, and the legend carries each curve's AP.
    ax.set(xlabel="recall", ylabel="precision", xlim=(0, 1), ylim=(0, 1.01))
    # Beside the axes, however few the classes: inside, any corner covers a dashed chance line (a rare class's sits
    # at the bottom) or the curves.
    _class_legend(ax, len(label_names), inside=None)
    ax.grid(alpha=0.3)
    return fig


def reliability_figure(y_true: Sequence[int], probabilities: np.ndarray, bins: int = ECE_BINS,
                       label_cells: bool = False) -> Figure:
    """The reliability diagram: in each confidence bin, how often the top label was right, against the diagonal
    a calibrated model would follow; below it, how many texts each bin holds (most sit near 1). ``label_cells``: the
    rows are a multi-label run's (text, label) cells, each a label's probability of not being given and of being
    given (``label_cells``), and the figure says so.

    >>> reliability_figure([1, 0], np.array([[.2, .8], [.7, .3]]), label_cells=True).axes[1].get_ylabel()
    'text-label cells'
    """
    cells = reliability(y_true, probabilities, bins)
    fig = _figure(7.5, 6)  # wide enough for the legend beside the bars, where it hides none of them
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1))
    centres = [cell["upper"] - 0.5 / bins for cell in cells]
    top.bar(centres, [cell["accuracy"] for cell in cells], width=1 / bins, edgecolor="black", lw=0.5,
            label="accuracy in the bin")
    top.plot([cell["confidence"] for cell in cells], [cell["accuracy"] for cell in cells], "o", color="C1", ms=4,
             label="at its mean confidence")
    top.plot([0, 1], [0, 1], "--", color="grey", lw=1, label="calibrated")
    ece = expected_calibration_error(y_true, probabilities, bins)
    lowest = np.floor(bins / probabilities.shape[1]) / bins  # the top label of K classes has 1/K at least
    title = (f"Reliability of every text-label cell (calibration error {ece:.3f})" if label_cells
             else f"Reliability (expected calibration error {ece:.3f})")
    top.set(ylabel="accuracy", xlim=(lowest, 1), ylim=(0, 1.01), title=title)
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    top.grid(alpha=0.3)
    bottom.bar(centres, [cell["count"] for cell in cells], width=1 / bins, color="grey")
    # From below one text: autoscaled, a log axis starts near the smallest count, whose bar then looks empty.
    bottom.set(xlabel="confidence that a label is given, or is not" if label_cells else
               "confidence of the predicted label", ylabel="text-label cells" if label_cells else "texts",
               yscale="log", ylim=(0.5, None))
    # Plain counts: the log axis's own labels are mathtext, which png_bytes draws as it is ("$\\mathdefault{10^{2}}$").
    bottom.yaxis.set_major_formatter(FuncFormatter(lambda count, _: f"{count:g}"))
    bottom.yaxis.set_minor_formatter(NullFormatter())
    return fig


def token_scores_figure(tokens: Sequence[str], scores: Sequence[float], title: str, signed: bool,
                        cut_at: int | None = None) -> Figure:
    """One bar per token (the case study's attention bar chart), for any method's scores, coloured as the token
    spans beside it are: a ``signed`` method's evidence for the class green and against it red, whatever the
    signs of one text's scores happen to be; weights orange, with the uniform weight 1/n dashed. ``cut_at``: where
    truncation cut tokens out.

    >>> fig = token_scores_figure(["not", "bad"], [0.3, 0.1], "grad-input: positive", signed=True)
    >>> [tuple(round(c, 3) for c in bar.get_facecolor()[:3]) for bar in fig.axes[0].patches][0]
    (0.18, 0.627, 0.263)
    """
    from ..explain.render import AGAINST, FOR, UNSIGNED

    scores = np.asarray(scores, dtype=float)
    fig = _figure(min(16.0, 2.0 + 0.38 * len(tokens)), 3.2)
    ax = fig.subplots()
    rgb = [(FOR if score >= 0 else AGAINST) if signed else UNSIGNED for score in scores]
    ax.bar(np.arange(len(tokens)), scores, color=[tuple(c / 255 for c in colour) for colour in rgb])
    ax.set_xticks(np.arange(len(tokens)), tokens, rotation=60 if len(tokens) > 8 else 0,
                  ha="right" if len(tokens) > 8 else "center", fontsize="small")
    ax.axhline(0, color="black", lw=0.6)
    if not signed and len(tokens):  # weights (summing to 1) read against weight spread evenly, not against 0
        ax.axhline(1 / len(tokens), color="grey", linestyle="--", lw=1, label="uniform weight (1/n)")
    if cut_at is not None:  # the bars either side of it were never next to each other in the text
        ax.axvline(cut_at - 0.5, color="grey", linestyle=":", lw=1.2, label="tokens cut here")
    if not signed or cut_at is not None:  # beside the bars: inside, "best" still sat on the tallest ones
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    ax.set(title=title)
    ax.grid(alpha=0.3, axis="y")
    return fig


# Self-attention maps: white at uniform, red above it, and a light blue at most below it: with RdBu's full blue the
# zeros of a head that looks at one token filled its map, louder than the token it looks at.
_DIVERGING = colormaps["RdBu_r"]
HEAD_MAP_COLOURS = ListedColormap(np.vstack([_DIVERGING(np.linspace(0.3, 0.5, 128)),
                                             _DIVERGING(np.linspace(0.5, 1.0, 128))]), name="attnclf_heads")


def binding_window(n: int, window: int) -> int:
    """The ``attention_window`` that bounds what a query of an ``n``-token text attends to, or 0 where none does: no
    window, or a text no longer than one block, whose every token attends to all n (uniform is 1/n there, not 1/w).

    >>> binding_window(10, 4), binding_window(3, 4), binding_window(10, 0)
    (4, 0, 0)
    """
    return window if 0 < window < n else 0


HEAD_MAP_TITLE_TOKENS = 24  # a longer text's title shows its first tokens, as its unlabelled axes show none


def head_maps_figure(maps: np.ndarray, tokens: Sequence[str], window: int = 0, heading: str = "") -> Figure:
    """Every layer's (rows) and head's (columns) self-attention map; rows of a map are queries. ``window``: the
    model's ``attention_window`` (0: each token attends to all n; else to its block of ``window``). ``heading``:
    a line to put under the title (explain's PNG names the prediction there, the page does beside the maps).

    All maps share one diverging colour scale centred on the uniform weight 1/n (1/``window`` under a window the text
    is longer than, ``binding_window``: what weight spread evenly gives each token): white there, red above it up to
    the largest weight or twice uniform, whichever is larger, light blue below it down to 0. On a 0-to-largest scale
    a near-uniform head looked patterned.

    >>> fig = head_maps_figure(np.full((1, 1, 4, 4), 0.25), list("abcd"))
    >>> float(fig.axes[0].get_images()[0].norm(0.25)), fig.axes[-1].get_ylabel()
    (0.5, 'attention weight (white: uniform, 1/n = 0.25)')
    """
    layers, heads, n, _ = maps.shape
    cell = 2.4 if n <= 12 else 3.2
    fig = _figure(1.4 + cell * heads, 0.5 + cell * layers)
    axes = np.asarray(fig.subplots(layers, heads, squeeze=False))
    labelled = n <= 24
    window = binding_window(n, window)
    uniform = 1 / (window or n)
    norm = TwoSlopeNorm(vmin=0.0, vcenter=uniform, vmax=max(float(maps.max()), 2 * uniform))
    for layer in range(layers):
        for head in range(heads):
            ax = axes[layer, head]
            image = ax.imshow(maps[layer, head], cmap=HEAD_MAP_COLOURS, norm=norm)
            ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize="small")
            if labelled:
                ax.set_xticks(range(n), tokens, rotation=90, fontsize="x-small")
                ax.set_yticks(range(n), tokens, fontsize="x-small")
            else:
                ax.set_xticks([]), ax.set_yticks([])
    # Cut from the report, a map reads either way round; name the direction on the outer axes only, to save room.
    for ax in axes[:, 0]:
        ax.set_ylabel("attends from (query)", fontsize="small")
    for ax in axes[-1, :]:
        ax.set_xlabel("attends to (key)", fontsize="small")
    shown = " ".join(tokens[:HEAD_MAP_TITLE_TOKENS]) + (" ..." if n > HEAD_MAP_TITLE_TOKENS else "")
    fig.suptitle(f"self-attention of every layer and head on: {shown}" + (f"\n{heading}" if heading else ""),
                 fontsize="medium")
    bar = fig.colorbar(image, ax=axes, shrink=0.6,
                       label=f"attention weight (white: uniform, 1/{'window' if window else 'n'} = {uniform:.3g})")
    ticks = sorted({0.0, uniform, norm.vmax})  # TwoSlopeNorm's own ticks crowd the shorter half
    bar.set_ticks(ticks, labels=[f"{tick:.3g}" for tick in ticks])
    return fig


def deletion_figure(drops: dict[str, dict[str, float]], random_drops: dict[str, float],
                    multi_label: bool = False) -> Figure:
    """Mean probability drop per number of tokens deleted: one bar per method, random deletion in grey; a multi-label
    run's (``multi_label``) from each explained label's own probability, as ``measure_faithfulness`` deletes.

    >>> deletion_figure({"occlusion": {"1": 0.2}}, {"1": 0.05}, multi_label=True).axes[0].get_ylabel()
    'mean drop in p(explained label)'
    """
    ks = list(random_drops)
    series = {**drops, "random": random_drops}
    width = 0.8 / len(series)
    fig = _figure(9, 3.8)
    ax = fig.subplots()
    for i, (name, values) in enumerate(series.items()):
        offsets = np.arange(len(ks)) + (i - (len(series) - 1) / 2) * width
        style = {"color": "grey", "hatch": "//", "edgecolor": "white"} if name == "random" else {}
        ax.bar(offsets, [values[k] for k in ks], width, label=name, **style)
    ax.set_xticks(np.arange(len(ks)), [f"k = {k}" for k in ks])
    explained = "explained label" if multi_label else "predicted class"
    ax.set(ylabel=f"mean drop in p({explained})", title="deletion test: top-k tokens removed")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the bars, never over them
    return fig
