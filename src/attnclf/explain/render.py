"""Explanations for people and programs: coloured terminal text, JSON lines, HTML, and PNG images for slides.

Colour strength is a token's score over the text's largest absolute score, or
over a floor when every score is smaller, so scores too small to matter stay
pale: occlusion's drops (in the class probability) are full at a drop of
OCCLUSION_FULL_COLOUR_FLOOR at least, the gradient methods' contributions (to
the class log-odds) at GRADIENT_FULL_COLOUR_FLOOR. Signed methods colour
evidence for the explained class green and against it red; attention and rollout (never
negative, summing to 1) are orange, from uncoloured at the uniform weight 1/n
(or below) to full at the text's largest weight or twice uniform, whichever is
larger: near-uniform weights stay pale instead of filling every token. An
explanation carrying the pooling attention beside its scores shows it as a
second row, orange, under a label that says what it is.

>>> from attnclf.explain.explanation import Explanation
>>> e = Explanation("not bad", ["not", "bad"], [0.8, 0.2], "attention", "positive", "positive", 0.9, {})
>>> render_terminal([e], color=False).splitlines()[1]
'  not bad'
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import sys
import textwrap
import unicodedata
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence

import numpy as np

from ..checks import by_field
from ..errors import AttnclfError
from .explanation import BESIDE_DESCRIPTION, Explanation
from .methods import METHODS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FOR, AGAINST, UNSIGNED = (46, 160, 67), (207, 34, 46), (245, 140, 0)
BESIDE_LABEL = f"attention beside it: {BESIDE_DESCRIPTION}"  # heads the pooling weights' row

# Occlusion's scores are drops in the class probability, on a scale every text shares: full colour at the text's
# largest drop alone painted a saturated prediction whose tokens each moved it by 5e-05 full green, an effect of
# nothing read as a strong one. Below a 5-point change in the class probability a drop stays pale.
OCCLUSION_FULL_COLOUR_FLOOR = 0.05
# The gradient methods' contributions to the class log-odds have no natural scale, and relative to the largest a
# near-chance model's contributions of 5e-05 painted as sharp as a trained one's. Their floor is the log-odds change
# that moves a probability of 0.5 by occlusion's 5 points (d p / d log-odds = p (1 - p) = 0.25 there): 0.2. Nearer 0
# or 1 the same change moves the probability less, so the floor errs towards colouring, never towards hiding.
GRADIENT_FULL_COLOUR_FLOOR = 0.2
FULL_COLOUR_FLOOR = {"occlusion": OCCLUSION_FULL_COLOUR_FLOOR, "grad-input": GRADIENT_FULL_COLOUR_FLOOR,
                     "integrated-gradients": GRADIENT_FULL_COLOUR_FLOOR}

# unicode-bidi: plaintext gives each row of tokens, and each heading (a text's start), the direction of its first
# letter, as dir="auto" would: an Arabic or Hebrew text reads from the right on a page that is otherwise English.
TOKEN_CSS = """
h2 { unicode-bidi: plaintext; }
.tokens { line-height: 2.1; font-size: 1.05em; unicode-bidi: plaintext; }
.tok { padding: 0.15em 0.25em; margin: 0 0.05em; border-radius: 0.25em; color: #111; }
.legend { color: #555; font-size: 0.9em; }
.cut { color: #777; font-style: italic; padding: 0 0.3em; }
"""


# The format a file's suffix names, where --format is not given: `explain -o page.html` means a page
FORMAT_BY_SUFFIX = {".html": "html", ".htm": "html", ".json": "json", ".jsonl": "json", ".png": "png"}
# Images the charts are not drawn as: `explain -o slide.jpg` wrote the terminal's text into slide.jpg
OTHER_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".gif", ".svg", ".pdf", ".webp", ".bmp", ".tif", ".tiff", ".eps")


def format_for(output: str | None, asked: str | None = None) -> str:
    """The format to render in: ``asked`` when given, else the one ``output``'s suffix names (``.html``/``.htm``:
    a page; ``.json``/``.jsonl``: JSON lines; ``.png``: images), else the terminal's text. An image named other
    than ``.png`` is refused in one line, as text or PNG bytes under its name would not open as that image.

    >>> format_for("explained.HTML"), format_for("out.jsonl"), format_for(None), format_for("page.html", "terminal")
    ('html', 'json', 'terminal', 'terminal')
    >>> format_for("slide.JPG")
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: slide.JPG: explain draws its images as PNG only; name the output slide.png
    """
    suffix = output[output.rfind("."):].lower() if output and "." in output else ""
    if suffix in OTHER_IMAGE_SUFFIXES and asked in (None, "png"):
        raise AttnclfError(f"{output}: explain draws its images as PNG only; name the output "
                           f"{output[:-len(suffix)]}.png")
    if asked is not None:
        return asked
    return FORMAT_BY_SUFFIX.get(suffix, "terminal")


def wants_color(choice: str, output: str | None, terminal: bool | None = None,
                environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour explanations: ``choice`` "always", or "auto" where they are printed (no ``output`` file) to
    a terminal (``terminal``; by default whether stdout is one) and the environment (``environ``; by default the
    process's) has no NO_COLOR (https://no-color.org); "never" never.

    >>> wants_color("auto", None, terminal=True, environ={}), wants_color("auto", "page.html", terminal=True)
    (True, False)
    """
    if choice == "always":
        return True
    # (stdout is asked whether it is a terminal only where the text goes there, as a redirected run never asks it)
    return (choice == "auto" and output is None and (sys.stdout.isatty() if terminal is None else terminal)
            and "NO_COLOR" not in (os.environ if environ is None else environ))


def number_text(value: float, sign: str = "", decimals: int = 4) -> str:
    """``decimals`` decimals, or two significant digits below 0.0005: a near-chance model's scores and drops are
    that small, and "+0.000" beside a token coloured at full strength (or "+0.0000 ± 0.0000 beats random") would
    hide what is shown.

    >>> number_text(0.01234), number_text(3.2e-6, "+"), number_text(0.0), number_text(-4.6e-5, "+", decimals=3)
    ('0.0123', '+3.2e-06', '0.0000', '-4.6e-05')
    """
    if value == 0 or abs(value) >= 5e-4 or math.isnan(value):
        return f"{value:{sign}.{decimals}f}"
    return f"{value:{sign}.1e}"


def token_colour(score: float, scale: float, signed: bool, floor: float = 0.0) -> tuple[int, int, int]:
    """The token's background: white blended towards the method's colour by ``(|score| - floor) / (scale - floor)``
    (white at ``floor`` or below, full at ``scale``).

    >>> token_colour(0.0, 1.0, True), token_colour(1.0, 1.0, False), token_colour(0.2, 0.4, False, floor=0.2)
    ((255, 255, 255), (245, 140, 0), (255, 255, 255))
    """
    strength = min(1.0, max(0.0, abs(score) - floor) / (scale - floor)) if scale > floor else 0.0
    base = (FOR if score >= 0 else AGAINST) if signed else UNSIGNED
    return tuple(round(255 + strength * (c - 255)) for c in base)


def _colour_range(e: Explanation) -> tuple[float, float]:
    """``(floor, full)``: the scores a token is uncoloured at (or below) and fully coloured at. Weights (unsigned,
    summing to 1) start at the uniform 1/n, and are full at twice it at least: relative to the largest alone, a row
    of 0.118s and 0.104s against a uniform 0.111 painted every token full orange, as if the layer looked hard at all.
    Signed scores are full at their method's ``FULL_COLOUR_FLOOR`` at least, for the same reason.

    >>> _colour_range(Explanation("a b", ["a", "b"], [0.6, 0.4], "attention", "p", "p", 0.9, {}))
    (0.5, 1.0)
    >>> _colour_range(Explanation("a b", ["a", "b"], [5e-05, 0.0], "occlusion", "p", "p", 0.9, {}))
    (0.0, 0.05)
    >>> _colour_range(Explanation("a b", ["a", "b"], [1e-03, 0.0], "grad-input", "p", "p", 0.9, {}))
    (0.0, 0.2)
    """
    largest = float(np.max(np.abs(e.scores))) if e.scores else 0.0
    if e.signed or not e.tokens:
        return 0.0, max(largest, FULL_COLOUR_FLOOR.get(e.method, 0.0))
    uniform = 1 / len(e.tokens)
    return uniform, max(largest, 2 * uniform)


def _scale_note(e: Explanation) -> str:
    # Colours are relative, so say what full strength is: near-uniform weights would look decisive otherwise.
    floor, full = _colour_range(e)
    note = f"full colour = {full:.3g}"
    if e.scores and float(np.max(np.abs(e.scores))) < FULL_COLOUR_FLOOR.get(e.method, 0.0):
        note += f"; the floor: smaller {'drops' if e.method == 'occlusion' else 'contributions'} stay pale"
    if not e.signed and e.tokens:
        note += f"; uniform weight would be {floor:.3g}, uncoloured at or below it"
    return note


def prediction(e: Explanation) -> str:
    """What the model predicted, each with its probability, and the class explained where that is not all of it (a
    multi-label run's: always, one of the labels).

    >>> prediction(Explanation("a", ["a"], [1.0], "occlusion", "pos", "neg", 0.1, {"neg": 0.1, "pos": 0.9}))
    'pos (0.900), explaining neg (0.100)'
    >>> prediction(Explanation("a", ["a"], [1.0], "occlusion", None, "b", 0.3, {"b": 0.3}, labels=[]))
    'no label (none reaches its threshold), explaining b (0.300)'
    """
    if e.labels is None:
        predicted = f"{e.label} ({e.probabilities.get(e.label, e.probability):.3f})"
    else:
        predicted = (", ".join(f"{name} ({e.probabilities[name]:.3f})" for name in e.labels)
                     or "no label (none reaches its threshold)")
    if e.labels is None and e.target == e.label:
        return predicted
    return f"{predicted}, explaining {e.target} ({e.probability:.3f})"


def _headline(e: Explanation) -> str:
    # (a multi-label run's labels, listed before the one explained, would otherwise read as one class)
    line = ("" if e.labels is None else "predicted ") + prediction(e)
    if (e.labels is not None or e.target != e.label) and not e.per_class:
        line += f": {e.method} is the same for every class"  # its weights would otherwise read as the class's evidence
    line += f"  [{e.method}: {e.description}]"
    if e.completeness_error is not None:
        line += (f"  completeness error {e.completeness_error:.2%} of a log-odds change of "
                 f"{number_text(e.log_odds_change, '+', decimals=3)}"
                 f" ({e.steps} gradients along the path)")
    if e.branch_margins is not None:
        line += f"  {branches(e)}"
    if e.cut_at is not None and e.tokens_cut is None:
        line += (f"  (more tokens were cut before the model read the text: it reads {len(e.tokens)}, from the ends of "
                 f"{len(e.text):,} characters, and the rest were not tokenised to count them)")
    elif e.cut_at is not None:
        line += f"  ({e.tokens_cut} more tokens were cut before the model read the text: it reads {len(e.tokens)})"
    return line


def branches(e: Explanation) -> str:
    """How far each branch pushed the explained class (its logit minus the mean of the others, over the run's
    temperature); "" for one branch. Each named a branch: a bare "attention -0.03" beside attention's weights read as
    one of them.

    >>> e = Explanation("a", ["a"], [1.0], "attention", "pos", "pos", 0.6, {}, branch_margins={"attention": -0.03})
    >>> branches(e)
    'branches: attention branch -0.03 (how far each pushed pos)'
    """
    if e.branch_margins is None:
        return ""
    return ("branches: " + ", ".join(f"{name} branch {margin:+.2f}" for name, margin in e.branch_margins.items())
            + f" (how far each pushed {e.target})")


def render_terminal(explanations: Sequence[Explanation], color: bool = True, top: int = 5) -> str:
    """Headline, the tokens (coloured with 24-bit ANSI backgrounds when ``color``), the ``top`` strongest tokens, and
    the same for any pooling attention carried beside the scores, under its label.

    >>> e = Explanation("not bad", ["not", "bad"], [0.8, 0.2], "attention", "positive", "positive", 0.9, {})
    >>> print(render_terminal([e], color=False).splitlines()[2])
      top: not 0.800, bad 0.200  (full colour = 1; uniform weight would be 0.5, uncoloured at or below it)
    """
    blocks = []
    for e in explanations:
        e = _without_controls(e)
        note = e.unknown_note()
        lines = [_headline(e), *([f"  note: {note}"] if note else []), *_scored_lines(e, color, top)]
        if (weights := e.attention_beside()) is not None:
            beside = _scored_lines(weights, color, top)
            # (Uncoloured, its tokens would only repeat the line above.)
            lines += [f"  {BESIDE_LABEL}", *(beside if color else beside[1:])]
        if e.self_attentions is not None:
            lines += [f"  {HEADS_LEGEND}",
                      *(f"  {line}" for line in head_summary(e.self_attentions, e.tokens, window=e.attention_window))]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _escaped_controls(text: str) -> str:
    """``text`` with its control characters (Unicode's Cc: ESC, BEL, a newline) written as escapes. A vocabulary
    learns whatever its training texts held, ESC among it, and a terminal obeys such a token as a command (to
    clear the screen, recolour what follows) where it should show it.

    >>> _escaped_controls("\\x1b[2Jred"), _escaped_controls("naïve")
    ('\\\\x1b[2Jred', 'naïve')
    """
    return "".join(c.encode("unicode_escape").decode("ascii") if unicodedata.category(c) == "Cc" else c for c in text)


def _without_controls(e: Explanation) -> Explanation:
    """``e`` with the control characters of its tokens and class names escaped (``_escaped_controls``), for a
    terminal: what the data gave them, the terminal would obey."""
    names = {name: _escaped_controls(name) for name in [*e.probabilities, e.target, *([e.label] if e.label else []),
                                                       *(e.labels or [])]}
    return replace(e, tokens=[_escaped_controls(token) for token in e.tokens], target=names[e.target],
                   label=None if e.label is None else names[e.label],
                   labels=None if e.labels is None else [names[name] for name in e.labels],
                   probabilities={names[name]: p for name, p in e.probabilities.items()})


def _scored_lines(e: Explanation, color: bool, top: int) -> list[str]:
    """The tokens, coloured by their scores when ``color``, then the ``top`` strongest with the colour scale."""
    floor, full = _colour_range(e)
    if color:
        shown = ["\x1b[48;2;{};{};{}m\x1b[38;2;17;17;17m{}\x1b[0m".format(*token_colour(s, full, e.signed, floor),
                                                                         token)
                 for token, s in zip(e.tokens, e.scores)]
    else:
        shown = list(e.tokens)
    tokens = " ".join(_with_cut(e, shown, f"[... {e.tokens_cut or 'tokens'} cut ...]"))
    ranked = ", ".join(f"{token} {number_text(score, '+' if e.signed else '', decimals=3)}"
                       for token, score in e.strongest_tokens(top))
    return [f"  {tokens}", f"  top: {ranked}  ({_scale_note(e)})"]


# A token whose largest weight is at most this many times 1/n (attention spread evenly over the n tokens it can attend
# to) weighs them all alike: its most attended token would be a tie broken by position, or noise, not one the head
# picked out. Untrained heads (random init, four setups of bench/heads_uniformity.py) were within 1.25 on 99.98-100%
# of their rows, and at 1.1 one setup's were past it on 37% of them: arrows from noise. Trained demo heads were past
# 1.25 on 96.7% (BENCHMARKS.md, "How even is an even head?").
EVEN_WITHIN = 1.25

# Without it "mean distance 2.00; the->the acting->the" is a puzzle to a student.
HEADS_LEGEND = ("self-attention per layer and head: mean distance = how many tokens away the head looks, on average "
                "(0: each token at itself, 1: at its neighbours); a->b: b is the token a attends to most; a->(even): "
                f"a weighs every token alike, none above {EVEN_WITHIN:g} times 1/n, the weight each of the n tokens "
                "it can attend to (the text's, or its block's under attention_window) would get from attention "
                "spread evenly")


def spread_ratios(maps: np.ndarray, window: int = 0) -> np.ndarray:
    """Each query's largest weight times the number of tokens it can attend to, per layer and head: 1 for weight
    spread evenly, that number for all of it on one token. ``maps``: (layers, heads, n, n), rows = queries;
    ``window``: the model's ``attention_window`` (0: every token attends to all n; else to its own block of
    ``window`` consecutive tokens, the last block what is left).

    >>> spread_ratios(np.array([[[[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]]]), window=2)
    array([[[1., 1., 1.]]])
    """
    n = maps.shape[-1]
    visible = np.minimum(window, n - np.arange(n) // window * window) if window else np.full(n, n)
    return maps.max(axis=-1) * visible


def head_summary(maps: np.ndarray, tokens: Sequence[str], shown: int = 12, window: int = 0) -> list[str]:
    """Per layer and head: mean attention distance in tokens and each token's most attended token, or ``(even)`` for
    a token that weighs all it can attend to alike (``EVEN_WITHIN``, ``spread_ratios``; ``window``: the model's
    ``attention_window``); a head whose every token does is ``uniform``.

    Local heads (distance near 1) read neighbours, bigram-like; broad heads
    relate distant tokens (the case study's reading of its two layers).

    >>> maps = np.array([[[[0.0, 1.0], [1.0, 0.0]], [[0.5, 0.5], [0.5, 0.5]]]])
    >>> print("\\n".join(head_summary(maps, ["a", "b"])))
    layer 1 head 1: mean distance 1.00; a->b b->a
    layer 1 head 2: mean distance 0.50; uniform: every token weighs every token it can attend to alike
    """
    layers, heads, n, _ = maps.shape
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    evenly = spread_ratios(maps, window) <= EVEN_WITHIN
    lines = []
    for layer in range(layers):
        for head in range(heads):
            weights = maps[layer, head]
            mean_distance = float((weights * distance).sum() / max(weights.sum(), 1e-9))
            even = evenly[layer, head]
            if even.all():
                pairs = "uniform: every token weighs every token it can attend to alike"
            else:
                pairs = " ".join(f"{tokens[q]}->{'(even)' if even[q] else tokens[int(weights[q].argmax())]}"
                                 for q in range(min(n, shown))) + (" ..." if n > shown else "")
            lines.append(f"layer {layer + 1} head {head + 1}: mean distance {mean_distance:.2f}; {pairs}")
    return lines


def render_json(explanations: Sequence[Explanation]) -> str:
    """One JSON object per line, per explanation (``Explanation.to_dict``).

    >>> e = Explanation("not bad", ["not", "bad"], [0.8, 0.2], "attention", "positive", "positive", 0.9, {})
    >>> json.loads(render_json([e, e]).splitlines()[1])["scores"]
    [0.8, 0.2]
    """
    return "\n".join(json.dumps(e.to_dict(), ensure_ascii=False) for e in explanations)


def render_text(explanations: Sequence[Explanation], output_format: str, color: bool = False) -> str:
    """``explanations`` in the text format ``output_format`` names (``format_for``'s but png): JSON lines, an HTML
    page, or the terminal's text (coloured with ``color``).

    >>> e = Explanation("not bad", ["not", "bad"], [0.8, 0.2], "attention", "positive", "positive", 0.9, {})
    >>> render_text([e], "json") == render_json([e]), render_text([e], "terminal") == render_terminal([e], False)
    (True, True)
    """
    if output_format == "json":
        return render_json(explanations)
    if output_format == "html":
        return render_html(explanations)
    return render_terminal(explanations, color=color)


def write_explanations(explanations: Sequence[Explanation], output: str, output_format: str, methods_per_text: int,
                       color: bool = False, wrote: Callable[[str], None] = lambda name: None, overwrite: bool = False,
                       named: Callable[[str], str] = by_field) -> None:
    """Write ``explanations`` to the file ``output`` in ``output_format`` (``format_for``'s): png, an image per chart
    (``render_png``, ``methods_per_text`` the methods each text is explained by), else ``render_text``'s text and a
    newline; each file atomically, ``wrote(name)`` called once it is. A file that exists is refused in one line,
    before any is written, unless ``overwrite`` (named in it by ``named``; the command line: --overwrite).

    >>> # write_explanations(clf.explain(["not bad"]), "explained.html", "html", methods_per_text=1, wrote=print)
    >>> # write_explanations(clf.explain(["dull"]), "explained.html", "html", 1, overwrite=True)  # replaces it
    """
    from ..rundir import refuse_existing_output, write_output_file

    names = png_names(explanations, output, methods_per_text) if output_format == "png" else [output]
    for name in names:
        refuse_existing_output(name, overwrite, named("overwrite"))
    if output_format == "png":
        for name, png in render_png(explanations, output, methods_per_text):
            write_output_file(name, png)
            wrote(name)
        return
    write_output_file(output, (render_text(explanations, output_format, color) + "\n").encode("utf-8"))
    wrote(output)


def _with_cut(e: Explanation, shown: list[str], mark: str) -> list[str]:
    """``shown`` (one item per token) with ``mark`` where truncation cut tokens out: the parts either side of it were
    never next to each other in the text."""
    return shown if e.cut_at is None else shown[:e.cut_at] + [mark] + shown[e.cut_at:]


def tokens_html(e: Explanation) -> str:
    """The text's tokens as coloured spans (hovering a token shows its score), then any pooling attention carried
    beside the scores as a second row under its label.

    >>> e = Explanation("not bad", ["not", "bad"], [0.8, 0.2], "attention", "positive", "positive", 0.9, {})
    >>> tokens_html(e).split("</span>")[0]
    '<div class="tokens"><span class="tok" style="background: rgb(249, 186, 102)" title="+0.8000">not'
    """
    row = _token_row_html(e)
    if (weights := e.attention_beside()) is not None:
        row += f'<div class="legend">{html.escape(BESIDE_LABEL)}</div>' + _token_row_html(weights)
    return row


def _token_row_html(e: Explanation) -> str:
    floor, full = _colour_range(e)
    spans = []
    for token, score in zip(e.tokens, e.scores):
        r, g, b = token_colour(score, full, e.signed, floor)
        spans.append(f'<span class="tok" style="background: rgb({r}, {g}, {b})" title="{number_text(score, "+")}">'
                     f"{html.escape(token)}</span>")
    spans = _with_cut(e, spans, f'<span class="cut" title="cut before the model read the text">'
                                f'[&hellip; {e.tokens_cut or "more"} tokens cut &hellip;]</span>')
    return f'<div class="tokens">{" ".join(spans)}</div><div class="legend">{html.escape(_scale_note(e))}</div>'


def legend_html(method: str) -> str:
    """The colour key of ``method``'s tokens (a key of ``METHODS``), as a paragraph of a page.

    >>> "a drop of 0.05" in legend_html("occlusion"), "0.2 in the class log-odds" in legend_html("grad-input")
    (True, True)
    """
    if METHODS[method].signed:
        strength = ("strength relative to the text's largest drop, or to a drop of "
                    f"{OCCLUSION_FULL_COLOUR_FLOOR:g} in the class probability when every drop is smaller: "
                    "drops too small to matter stay pale" if method == "occlusion"
                    else "strength relative to the text's largest contribution, or to one of "
                    f"{GRADIENT_FULL_COLOUR_FLOOR:g} in the class log-odds (5 points of probability at 0.5) when "
                    "every one is smaller: contributions too small to matter stay pale")
        return ('<p class="legend"><span class="tok" style="background: rgb(%d, %d, %d)">for</span> the class, '
                '<span class="tok" style="background: rgb(%d, %d, %d)">against</span> it; '
                "%s.</p>" % (*FOR, *AGAINST, strength))
    return ('<p class="legend"><span class="tok" style="background: rgb(%d, %d, %d)">weight</span> above uniform '
            "(1/n, what weight spread evenly over the n tokens gives each), relative to the text's largest or to "
            "twice uniform, whichever is larger: a token at or below uniform is uncoloured, and weights near uniform "
            "stay pale.</p>" % UNSIGNED)


def unknown_note_html(e: Explanation) -> str:
    """``e``'s note on its unknown tokens as a paragraph of a page (``Explanation.unknown_note``), or "" for a text
    under that share: what explain's page and the report's examples show.

    >>> unknown_note_html(Explanation("zz", ["<unk>"], [1.0], "attention", "pos", "pos", 0.9, {}, unknown_tokens=1))
    '<p class="note">note: the one token the model read is unknown to it (&lt;unk&gt;): its answer rests on none of \
the text&#x27;s words</p>'
    """
    note = e.unknown_note()
    return f'<p class="note">note: {html.escape(note)}</p>' if note else ""


def png_img(png: bytes, alt: str) -> str:
    """An <img> with the PNG embedded, so the page needs no other file.

    >>> png_img(b"PNG", "a chart")
    '<img src="data:image/png;base64,UE5H" alt="a chart">'
    """
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def render_html(explanations: Sequence[Explanation], title: str = "attnclf explanations") -> str:
    """A standalone page: per explanation the headline, the colour key, coloured tokens, a bar chart and any head
    maps.

    >>> e = Explanation("not bad", ["not", "bad"], [0.8, 0.2], "attention", "positive", "positive", 0.9, {})
    >>> render_html([e], title="why").count("<img")   # the bar chart (no head maps without self_attentions)
    1
    """
    from ..report.plots import head_maps_figure, png_bytes, token_scores_figure

    sections = []
    for e in explanations:
        parts = [f"<h2>{_heading(e)}</h2>", *_scored_html(e),
                 png_img(png_bytes(token_scores_figure(e.tokens, e.scores, _chart_title(e), e.signed, e.cut_at)),
                         f"{e.method} scores per token")]
        if e.self_attentions is not None:
            parts.append(png_img(png_bytes(head_maps_figure(e.self_attentions, e.tokens, e.attention_window)),
                                 "self-attention per layer and head"))
        sections.append("<section>" + "\n".join(parts) + "</section>")
    return page(title, "\n".join(sections))


def _heading(e: Explanation) -> str:
    return f"{html.escape(e.text[:120])}{'…' if len(e.text) > 120 else ''}"


def _scored_html(e: Explanation) -> list[str]:
    """The headline, any unknown-token note, the colour key and the coloured tokens: what the page and a notebook
    show of every explanation."""
    # The scores' colour key comes first: under the attention row beside them, it would seem that row's.
    return [f"<p>{html.escape(_headline(e))}</p>", *([note] if (note := unknown_note_html(e)) else []),
            legend_html(e.method), tokens_html(e)]


# A notebook's page has classes of its own (a .legend, a .tokens): the fragment's rules reach inside its block alone.
NOTEBOOK_BLOCK = "attnclf-explanations"
NOTEBOOK_CSS = "\n".join(f".{NOTEBOOK_BLOCK} {rule}" for rule in
                         [*TOKEN_CSS.strip().splitlines(), ".text { font-weight: 600; unicode-bidi: plaintext; }"]
                         if not rule.startswith("h2 "))


def notebook_html(explanations: Sequence[Explanation]) -> str:
    """What a notebook shows for explanations (``Explanation._repr_html_``, and that of ``Classifier.explain``'s
    answer): per explanation the text, the headline, the colour key and the coloured tokens (hover one: its score),
    as the page has them, without its bar charts and head maps, in a block whose style touches nothing else.

    >>> e = Explanation("not bad", ["not", "bad"], [0.2, 0.3], "occlusion", "pos", "pos", 0.9, {"pos": 0.9})
    >>> 'title="+0.3000">bad</span>' in notebook_html([e]), "<img" in notebook_html([e])
    (True, False)
    """
    sections = "\n".join(f'<section><p class="text">{_heading(e)}</p>' + "\n".join(_scored_html(e)) + "</section>"
                         for e in explanations)
    return f'<div class="{NOTEBOOK_BLOCK}"><style>\n{NOTEBOOK_CSS}\n</style>\n{sections}</div>'


# A slide's title line holds about this many characters of the text at the bar chart's narrowest
SLIDE_TEXT_CHARS = 60
SLIDE_MIN_WIDTH = 9.0  # inches: narrower, a short sentence's chart cut its own title off
SLIDE_TITLE_CHARS = 95  # a chart title's line at SLIDE_MIN_WIDTH, the legend beside it
SLIDE_MIN_HEIGHT = 4.2  # inches of the head maps: the colour bar's label needs them
HEADS_CAVEAT = "where each head looked, not why the model decided"


def png_figures(explanations: Sequence[Explanation], output: str,
                methods_per_text: int) -> Iterator[tuple[str, "Figure"]]:
    """``(file name, figure)`` per image of ``explanations`` (grouped by text, ``methods_per_text`` each, as explain
    makes them), one at a time: a --file of many texts would hold every figure at once. One landscape image per
    text and method, its bar chart as the page draws it, and one per text of its head maps where it carries them. A
    slide is landscape: stacked, five methods and the maps made a strip too tall to read once shrunk onto one. One
    image is named ``output``; more are ``NAME-TEXT-METHOD.png`` (``NAME-TEXT-heads.png``), without TEXT (its number
    from 1) for one text, or METHOD for one image per text. A multi-label run's texts are explained once per label
    (``explain``): TEXT then numbers the texts and labels explained, in order, each image's title naming its label.

    >>> from attnclf.explain.explanation import Explanation
    >>> e = Explanation("not bad", ["not", "bad"], [0.2, 0.3], "occlusion", "positive", "positive", 0.9, {})
    >>> [name for name, _ in png_figures([e, e], "slides/why.png", methods_per_text=1)]
    ['slides/why-1.png', 'slides/why-2.png']
    """
    from ..report.plots import head_maps_figure, token_scores_figure

    name = _png_namer(explanations, output, methods_per_text)
    for text in range(len(explanations) // methods_per_text):
        maps = []  # the head maps come with the text's first method; after its last, its charts stay together
        for e in explanations[text * methods_per_text:(text + 1) * methods_per_text]:
            shortened = e.text if len(e.text) <= SLIDE_TEXT_CHARS else e.text[:SLIDE_TEXT_CHARS].rstrip() + "…"
            predicted = f"predicted {prediction(e)}"
            description = textwrap.fill(f"{_chart_title(e)} — {e.description}", SLIDE_TITLE_CHARS)
            figure = token_scores_figure(e.tokens, e.scores, description, e.signed, e.cut_at)
            figure.axes[0].title.set_fontsize("medium")
            width, height = figure.get_size_inches()
            figure.set_size_inches(max(width, SLIDE_MIN_WIDTH), height + 0.2 * description.count("\n") + 0.4)
            figure.suptitle(f'"{shortened}"  {predicted}', fontsize="large")
            yield name(text, e.method), figure
            if e.self_attentions is not None:
                # (the title above names the text, as the maps read it: its tokens)
                maps_figure = head_maps_figure(e.self_attentions, e.tokens, e.attention_window,
                                               f"{predicted}; self-attention shows {HEADS_CAVEAT}")
                width, height = maps_figure.get_size_inches()
                maps_figure.set_size_inches(width, max(height, SLIDE_MIN_HEIGHT))  # one layer's cut its bar's label
                maps.append((name(text, "heads"), maps_figure))
        yield from maps


def png_names(explanations: Sequence[Explanation], output: str, methods_per_text: int) -> list[str]:
    """The names of the images ``png_figures`` draws of ``explanations``, without drawing them: to check before any
    is written.

    >>> from attnclf.explain.explanation import Explanation
    >>> e = Explanation("not bad", ["not", "bad"], [0.2, 0.3], "occlusion", "positive", "positive", 0.9, {})
    >>> png_names([e, e], "why.png", methods_per_text=1)
    ['why-1.png', 'why-2.png']
    """
    name = _png_namer(explanations, output, methods_per_text)
    return [name(index // methods_per_text, part) for index, e in enumerate(explanations)
            for part in (e.method, *(["heads"] if e.self_attentions is not None else []))]


def _png_namer(explanations: Sequence[Explanation], output: str, methods_per_text: int) -> Callable[[int, str], str]:
    """``name(text, part)``: the file of ``explanations``' image of text ``text`` (from 0) and ``part`` (its method,
    or "heads"), as ``png_figures`` documents the names."""
    output = Path(output)
    texts = len(explanations) // methods_per_text
    heads = any(e.self_attentions is not None for e in explanations)

    def name(text: int, part: str) -> str:
        parts = [*([str(text + 1)] if texts > 1 else []), *([part] if methods_per_text > 1 or heads else [])]
        return str(output.with_name("-".join([output.stem, *parts]) + output.suffix) if parts else output)

    return name


def render_png(explanations: Sequence[Explanation], output: str, methods_per_text: int) -> Iterator[tuple[str, bytes]]:
    """``(file name, PNG bytes)`` per image ``png_figures`` draws, one at a time, for the caller to write.

    >>> e = Explanation("not bad", ["not", "bad"], [0.2, 0.3], "occlusion", "positive", "positive", 0.9, {})
    >>> [(name, png[:4]) for name, png in render_png([e], "why.png", methods_per_text=1)]
    [('why.png', b'\\x89PNG')]
    """
    from ..report.plots import png_bytes

    for name, figure in png_figures(explanations, output, methods_per_text):
        yield name, png_bytes(figure)


def _chart_title(e: Explanation) -> str:
    """The method and the class its scores are for: every class, for attention's weights.

    >>> _chart_title(Explanation("a", ["a"], [1.0], "attention", "pos", "neg", 0.1, {}))
    'attention: every class'
    """
    return f"{e.method}: {e.target if e.per_class else 'every class'}"


def page(title: str, body: str) -> str:
    """The HTML page around ``body``: UTF-8, responsive images, no scripts, no external files.

    >>> text = page("a <report>", "<p>body</p>"); "<title>a &lt;report&gt;</title>" in text, "<script" in text
    (True, False)
    """
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #222; }}
h1, h2, h3 {{ font-weight: 600; }}
img {{ max-width: 100%; height: auto; display: block; margin: 0.8em 0; }}
table {{ border-collapse: collapse; margin: 0.8em 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.7em; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
section {{ border-top: 1px solid #ddd; margin-top: 1.5em; }}
.note {{ color: #555; }}
.warnings {{ background: #fff4e0; border-left: 4px solid #e69500; padding: 0.5em 1em 0.5em 2em; }}
{TOKEN_CSS}
</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
{body}
</body>
</html>
"""
