"""Does an explanation name the tokens the prediction depends on? Measured, three ways.

- Deletion test: remove the k tokens a method scores highest (k = 1, 3, 5 and
  10% of the text, at least one; tokens it scores alike in a random, seeded
  order) and take the drop in the predicted class's probability; the same for
  k random tokens. A method's AOPC is its mean drop
  over the distinct token counts those k give a text (on a 7-token text 10% is
  one token, already counted at k = 1: counting it twice would give k = 1, the
  very quantity occlusion ranks tokens by, double weight). It *beats random* when its per-text AOPC exceeds random's
  by more than two standard errors (paired over texts) and by at least
  ``MIN_ADVANTAGE`` (a probability point: a model at chance moves by 1e-4
  and would beat random on noise-sized drops), is *worse than random* when it
  falls short by as much, and *does not beat random* otherwise.
  Removal shortens the text (see ``methods``); k never exceeds the text.
- Agreement: Spearman rank correlation of two methods' token scores, averaged
  over texts with at least three tokens (texts where either method gives every
  token the same score have no ranking and are left out).
- Uniform-attention check: accuracy when the learned pooling weights are
  replaced by uniform weights over the real tokens, at test time only. If it
  barely moves, the weights were not what the model relied on. (Wiegreffe &
  Pinter 2019 retrain with frozen uniform weights, a stronger test: a drop here
  shows this model uses its weights, not that attention was necessary.)

A multi-label run is measured as ``explain`` explains it: each text once per label it predicts (its most
probable label where it predicts none), the deletions dropping that label's own sigmoid probability, and the
uniform-attention check on subset accuracy (every label of a text right) at the run's thresholds.

>>> # result = measure_faithfulness(Classifier.load("runs/demo"), load_splits("demo").test, examples=200)
>>> # print(result.table())
>>> # measure_run("runs/demo", examples=200).most_faithful  # saved as runs/demo/faithfulness.json, as the command does
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from ..checks import by_field, check_seed, whole_number
from ..data.base import TextDataset
from ..errors import AttnclfError, shown
from ..prediction import decided_rows
from .explanation import explained_labels, refuse_unexplainable
from .methods import (METHODS, attribute, available_methods, check_steps, chosen_methods, class_probability,
                      known_method, remove_positions, run_methods)
from .render import number_text

if TYPE_CHECKING:
    from ..classifier import Classifier

DELETION_KS: tuple = (1, 3, 5, "10%")
# 2 (2026-11-25): AOPC over each text's distinct token counts, an emptied text scored as "". 3 (2026-11-28): tokens a
# method scores alike deleted in a random order, not the text's. Saved results of another definition are not shown
# beside today's (their numbers mean something else).
AOPC_DEFINITION = 3
MIN_ADVANTAGE = 0.01  # AOPC above (or below) random's by less than this is no verdict either way
FAITHFULNESS_FILE = "faithfulness.json"  # in the run measured: the report shows it while it is newer than the weights


@dataclass
class MethodFaithfulness:
    """One method's deletion test: mean probability drop per k, AOPC, and the comparison with random."""

    drops: dict[str, float]
    aopc: float
    advantage: float  # mean over texts of (this AOPC - random AOPC)
    advantage_se: float
    verdict: str  # beats random | does not beat random | worse than random


@dataclass
class FaithfulnessResult:
    model: str
    dataset: str
    examples: int
    methods: dict[str, MethodFaithfulness]
    random_drops: dict[str, float]
    random_aopc: float
    random_draws: int
    agreement: dict[str, float]  # "a / b" -> mean Spearman correlation
    uniform_attention: dict | None  # accuracy with learned vs uniform pooling weights, or None
    completeness_error: dict | None  # integrated gradients: mean, median, max, share within 5%
    seconds: float
    seed: int = 0
    ks: list[str] = field(default_factory=lambda: [str(k) for k in DELETION_KS])
    aopc_definition: int = AOPC_DEFINITION
    temperature: float = 1.0  # the run's (`attnclf calibrate`) when measured: the probabilities deletions drop
    multi_label: bool = False  # a multi-label run's: a text's predicted labels each measured, by its own probability
    explained: int | None = None  # the (text, label) pairs measured: ``examples`` but for a multi-label run's

    @property
    def most_faithful_methods(self) -> list[str]:
        """Every method with the highest AOPC as the table shows it, in the order measured: more than one when they
        tie, as methods that put the same tokens first do (on a model that reads one word, all of them), or differ
        only past the digits shown (a winner by a digit no one sees, and no sample of texts could tell apart).

        >>> # measure_faithfulness(clf, data, methods=["grad-input", "occlusion"]).most_faithful_methods
        """
        best = number_text(max(r.aopc for r in self.methods.values()))
        return [name for name, r in self.methods.items() if number_text(r.aopc) == best]

    @property
    def most_faithful(self) -> str:
        """The method whose deletions drop the prediction most (highest AOPC), or, when several tie (as the table
        shows them), all of them: "grad-input and occlusion, tied" (never the first of them alone).

        >>> # measure_faithfulness(clf, data).most_faithful  # 'occlusion'
        """
        best = self.most_faithful_methods
        return best[0] if len(best) == 1 else f"{', '.join(best[:-1])} and {best[-1]}, tied"

    def beating_random(self) -> list[str]:
        return [m for m, r in self.methods.items() if r.verdict == "beats random"]

    def summary(self) -> str:
        """One plain sentence: the most faithful method (a tie named as one), which methods beat random deletion
        and which did not."""
        beat = self.beating_random()
        rest = [m for m in self.methods if m not in beat]
        best = self.most_faithful_methods
        tie = f" at AOPC {number_text(self.methods[best[0]].aopc)}" if len(best) > 1 else ""
        return (f"{self.model} on {self.dataset} ({self.examples} texts): most faithful by deletion: "
                f"{self.most_faithful}{tie}. Beat random deletion: {', '.join(beat) or 'none'}. "
                f"Did not: {', '.join(rest) or 'none'}.")

    def rows(self) -> tuple[list[str], list[tuple[str, ...]]]:
        """The deletion-test table: a header and one row per method (most faithful first), then random."""
        header = ["method", *(f"drop k={k}" for k in self.ks), "AOPC", "vs random", "verdict"]
        rows = [(name, *(number_text(r.drops[k]) for k in self.ks), number_text(r.aopc),
                 f"{number_text(r.advantage, '+')} ± {number_text(r.advantage_se)}", r.verdict)
                for name, r in sorted(self.methods.items(), key=lambda item: -item[1].aopc)]
        rows.append((f"random ({self.random_draws} draws)", *(number_text(self.random_drops[k]) for k in self.ks),
                     number_text(self.random_aopc), "", ""))
        return header, rows

    def table(self) -> str:
        """The deletion test as a Markdown table, then the notes, the rank agreement and how to read them."""
        header, rows = self.rows()
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines += ["", *self.notes()]
        if self.agreement:
            lines.append("Rank agreement (mean Spearman): "
                         + "; ".join(f"{pair} {rho:+.2f}" for pair, rho in self.agreement.items()) + ".")
        return "\n".join([*lines, "", *self.reading()])

    def section(self, run_dir: str | Path) -> str:
        """This result of the run in ``run_dir`` as `attnclf faithfulness` shows it: a Markdown heading naming the
        run, its model, data, texts and the seconds the measuring took, then the ``table``.

        >>> # print(measure_run("runs/demo").section("runs/demo"))   # ## runs/demo: self-attn on demo, 200 texts ...
        """
        return (f"## {run_dir}: {self.model} on {self.dataset}, {self.examples} texts ({self.seconds:.0f}s)\n\n"
                f"{self.table()}")

    def reading(self) -> list[str]:
        """What the table's numbers mean, a paragraph each: the deletion test, occlusion's head start in it (when
        measured), and the rank agreement (when there is one); `attnclf faithfulness` and the report print them."""
        explained = ("predicted class's probability" if not self.multi_label else
                     f"explained label's own probability (each label predicted for a text, or its most probable where "
                     f"none is: {self.explained} text-label pairs, each counted as a text below)")
        paragraphs = [
            f"Deletion test on {self.examples} texts of {self.dataset}: drop k=N is the mean fall in the {explained} "
            "when the N tokens a method scores highest are removed (k=10%: a tenth of the text's "
            "tokens, at least one; tokens it scores alike in a random order), and random deletion of as many tokens "
            "is the baseline. AOPC averages a text's drops over the distinct token counts the k give it (on a short "
            "text 10% is one token, counted once), then over the texts. vs random is the mean over texts of a "
            "method's AOPC minus random's, ± its standard error; a method beats random when that exceeds two "
            "standard errors and is at least "
            f"{MIN_ADVANTAGE} (and is worse than random when as far below). A higher AOPC means the method's top "
            "tokens matter more to this model's predictions; it says nothing about whether the predictions are "
            "right."]
        if "occlusion" in self.methods:
            paragraphs.append("Occlusion scores a token by the drop its own removal causes, what this test measures "
                              "at k=1: it is favoured by construction, and leading here does not show that it "
                              "explains best.")
        if self.agreement:
            paragraphs.append("Rank agreement: the mean over texts of the Spearman correlation of two methods' token "
                              "rankings, +1 the same order, 0 unrelated, -1 reversed.")
        return paragraphs

    def notes(self) -> list[str]:
        """Sentences that go under the table: the verdicts, IG's completeness, the uniform-attention check."""
        notes = [self.summary()]
        if self.completeness_error:
            e = self.completeness_error
            notes.append(f"Integrated gradients' completeness error: median {e['median']:.2%}, mean {e['mean']:.2%}, "
                         f"max {e['max']:.2%}; {e['within_5_percent']:.0%} of texts within 5%.")
        if self.uniform_attention:
            u = self.uniform_attention
            notes.append(f"Uniform-attention check (swapped in at test time, not retrained): "
                         f"{'subset accuracy' if self.multi_label else 'accuracy'} "
                         f"{u['accuracy']:.4f} with the learned pooling weights, {u['uniform_accuracy']:.4f} with "
                         f"uniform weights over the real tokens; {u['changed']:.1%} of predictions change.")
        return notes

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "FaithfulnessResult":
        data = dict(data)
        # The verdict is judged again: a result saved under an earlier rule is read under today's.
        data["methods"] = {name: MethodFaithfulness(**r | {"verdict": verdict(r["advantage"], r["advantage_se"])})
                           for name, r in data["methods"].items()}
        return cls(**data)


def verdict(advantage: float, se: float) -> str:
    """A method against random deletion: its mean AOPC advantage must clear two standard errors and
    ``MIN_ADVANTAGE`` (a NaN standard error, from one text, clears nothing).

    >>> verdict(0.2, 0.01), verdict(0.0005, 0.0001), verdict(-0.05, 0.01)
    ('beats random', 'does not beat random', 'worse than random')
    """
    if advantage - 2 * se > 0 and advantage >= MIN_ADVANTAGE:
        return "beats random"
    if advantage + 2 * se < 0 and advantage <= -MIN_ADVANTAGE:
        return "worse than random"
    return "does not beat random"


def measure_faithfulness(classifier: "Classifier", data: TextDataset, *, methods: Sequence[str] | None = None,
                         examples: int = 200, random_draws: int = 10, seed: int = 0,
                         **options) -> FaithfulnessResult:
    """Deletion test, agreement and uniform-attention check on a seeded sample of ``data``.

    ``methods`` default to all the model supports; ``options`` go to the
    methods that take them (integrated gradients: ``steps``). An ``Ensemble`` and a windowed run (``--windows``)
    are refused in one line, as ``explain`` refuses them.

    >>> # measure_faithfulness(clf, load_splits("demo").test, examples=100).most_faithful
    """
    started = time.perf_counter()
    refuse_unexplainable(classifier)  # (before "no methods": an ensemble has no model to ask, a windowed run none)
    methods = _checked_methods(classifier, methods, options)
    seed, examples, random_draws = check_seed(seed), _count(examples), _count(random_draws, "random_draws")
    if len(data) == 0:
        raise AttnclfError(f"{data.name or data.split}: no texts to measure on")
    rng = np.random.default_rng(seed)  # (draws the sample, then the random deletions)
    sample = np.sort(rng.choice(len(data), size=min(examples, len(data)), replace=False))
    texts = [data.texts[i] for i in sample]
    text_sequences = classifier.tokenizer.encode(texts)
    sequences, predicted = _explained_pairs(classifier, texts, text_sequences)
    full = _reported_probability(classifier, sequences, predicted)
    scores, completeness = _attributions(classifier, sequences, predicted, methods, options)

    distinct = _distinct_ks(sequences)
    random_orders = [[rng.permutation(len(s)) for _ in range(random_draws)] for s in sequences]
    random_drop = _probability_drops(classifier, sequences, predicted, full, random_orders)
    random_aopc = _aopc(random_drop, distinct)
    # Tokens a method scores alike are deleted in a random order: by position, a method weighing every token alike
    # (naming none) removed a text's first tokens, and was credited with whatever they carried. One order per text,
    # drawn after the random deletions (which stay as they were), for every method: equal scores, equal deletions.
    tie_breaks = [rng.random(len(s)) for s in sequences]
    per_method = {}
    for name, method_scores in scores.items():
        best_first = [[_best_first(s, tie_break)] for s, tie_break in zip(method_scores, tie_breaks)]
        drop = _probability_drops(classifier, sequences, predicted, full, best_first)
        per_method[name] = _against_random(drop, random_aopc, distinct)
    return FaithfulnessResult(
        model=classifier.config.get("model", {}).get("name", type(classifier.model).__name__),
        dataset=data.name or data.split,
        examples=len(sample),
        methods=per_method,
        random_drops=_mean_per_k(random_drop),
        random_aopc=float(random_aopc.mean()),
        random_draws=random_draws,
        agreement=rank_agreement(scores),
        uniform_attention=uniform_attention_check(classifier, text_sequences, [data.labels[i] for i in sample])
        if "attention" in available_methods(classifier.model) else None,
        completeness_error=completeness,
        seconds=round(time.perf_counter() - started, 2),
        seed=seed,
        temperature=classifier.temperature,
        multi_label=classifier.multi_label,
        explained=len(sequences),
    )


def _checked_methods(classifier: "Classifier", methods: Sequence[str] | None, options: dict) -> list[str]:
    """``methods`` as a list (None: every method the classifier's model supports), each known and every option one
    of theirs takes, or one line naming what is not: before minutes of measuring."""
    methods = available_methods(classifier.model) if methods is None else list(methods)
    if not methods:  # (not every method, the slowest measurement, as `methods or ...` made of an unset list)
        raise AttnclfError("methods is empty; give at least one, or None for all the model supports")
    for name in methods:
        known_method(name)
    unused = [key for key in options if not any(key in METHODS[name].options for name in methods)]
    if unused:
        raise AttnclfError(f"{shown(unused[0], write=str)} applies to none of the methods measured "
                           f"({', '.join(methods)})")
    check_steps(options.get("steps", "auto"))
    return methods


def _explained_pairs(classifier: "Classifier", texts: list[str], text_sequences: list[list[int]]
                     ) -> tuple[list[list[int]], np.ndarray]:
    """The (text, label) pairs measured, as ids and labels: each text once per class ``explain`` explains it for by
    default, its predicted class, a multi-label run's each predicted label."""
    explained = explained_labels(classifier, texts)
    sequences = [text_sequences[i] for i, text_labels in enumerate(explained) for _ in text_labels]
    predicted = np.array([label for text_labels in explained for label in text_labels], dtype=np.int64)
    return sequences, predicted


def _reported_probability(classifier: "Classifier", sequences: list[list[int]], classes: np.ndarray) -> np.ndarray:
    """Each sequence's probability of its class in ``classes`` as the classifier reports it (a calibrated run's
    temperature in it; a multi-label run's label's own sigmoid)."""
    return class_probability(classifier.model, sequences, classes, classifier.device, classifier.batch_size,
                             classifier.temperature, classifier.multi_label, max_tokens=classifier.max_tokens)


def _attributions(classifier: "Classifier", sequences: list[list[int]], predicted: np.ndarray,
                  methods: list[str], options: dict) -> tuple[dict[str, list[np.ndarray]], dict | None]:
    """Each method's token scores of every pair, and integrated gradients' completeness error summarised (mean,
    median, max, share within 5%), or None when it is not measured; each method gets the ``options`` it takes."""
    scores, completeness = {}, None
    for name in methods:
        method_options = {k: v for k, v in options.items() if k in METHODS[name].options}
        result = attribute(classifier.model, sequences, predicted, name, device=classifier.device,
                           batch_size=classifier.batch_size, max_tokens=classifier.max_tokens,
                           temperature=classifier.temperature, multi_label=classifier.multi_label, **method_options)
        scores[name] = result.scores
        if result.completeness_error is not None:
            error = result.completeness_error
            completeness = {"mean": float(error.mean()), "median": float(np.median(error)),
                            "max": float(error.max()), "within_5_percent": float((error <= 0.05).mean())}
    return scores, completeness


def _distinct_ks(sequences: list[list[int]]) -> np.ndarray:
    """(texts, ks): which of ``DELETION_KS`` remove a token count no earlier k removed from the text; AOPC averages
    over those.

    >>> _distinct_ks([[1] * 7, [1] * 30]).tolist()  # 10% of 7 tokens is one, as k = 1; of 30, three, as k = 3
    [[True, True, True, False], [True, True, True, False]]
    """
    counts = np.array([[_tokens_to_remove(k, len(s)) for k in DELETION_KS] for s in sequences])
    return np.array([[count not in row[:j] for j, count in enumerate(row)] for row in counts.tolist()])


def _aopc(drop: np.ndarray, distinct: np.ndarray) -> np.ndarray:
    """Per text, the mean of its (texts, ks) ``drop`` over its ``distinct`` ks.

    >>> _aopc(np.array([[0.4, 0.2, 0.3, 0.4]]), np.array([[True, True, True, False]]))
    array([0.3])
    """
    return (drop * distinct).sum(1) / distinct.sum(1)


def _probability_drops(classifier: "Classifier", sequences: list[list[int]], predicted: np.ndarray,
                       full: np.ndarray, rankings: list[list[np.ndarray]]) -> np.ndarray:
    """(texts, ks): the mean fall from ``full`` in each text's ``predicted`` class probability when the top k tokens
    of each of its candidate orders, ``rankings[i]`` for text i (best first), are removed."""
    variants, owners = [], []
    for i, orders in enumerate(rankings):
        for k in DELETION_KS:
            for order in orders:
                variants.append(remove_positions(sequences[i], order[: _tokens_to_remove(k, len(order))]))
                owners.append(i)
    probability = _reported_probability(classifier, variants, predicted[owners])
    per_order = len(rankings[0])
    return (full[:, None] - probability.reshape(len(rankings), len(DELETION_KS), per_order).mean(-1))


def _best_first(scores: np.ndarray, tie_break: np.ndarray) -> np.ndarray:
    """Positions by ``scores``, highest first; equal scores in the order of ``tie_break`` (random keys, smallest first).

    >>> _best_first(np.array([0.0, 0.5, 0.0, 0.0]), np.array([0.9, 0.1, 0.2, 0.5])).tolist()
    [1, 2, 3, 0]
    """
    return np.lexsort((tie_break, -np.asarray(scores, dtype=np.float64)))


def _against_random(drop: np.ndarray, random_aopc: np.ndarray, distinct: np.ndarray) -> MethodFaithfulness:
    """A method's deletion test from its (texts, ks) ``drop``: its mean drops and AOPC, and its per-text AOPC
    advantage over random deletion's, with that advantage's standard error and the ``verdict``."""
    advantage = _aopc(drop, distinct) - random_aopc
    se = float(advantage.std(ddof=1) / math.sqrt(len(advantage))) if len(advantage) > 1 else float("nan")
    mean = float(advantage.mean())
    return MethodFaithfulness(drops=_mean_per_k(drop), aopc=float(_aopc(drop, distinct).mean()), advantage=mean,
                              advantage_se=se, verdict=verdict(mean, se))


def _mean_per_k(drop: np.ndarray) -> dict[str, float]:
    """The (texts, ks) ``drop`` averaged over the texts, by k as the table names it.

    >>> _mean_per_k(np.array([[0.5, 0.25, 0.0, 1.0], [0.0, 0.25, 0.5, 0.0]]))
    {'1': 0.25, '3': 0.25, '5': 0.25, '10%': 0.5}
    """
    return dict(zip((str(k) for k in DELETION_KS), map(float, drop.mean(0))))


def measure_run(run_dir: str | Path, *, methods: str | Sequence[str] | None = None, examples: int = 200,
                seed: int = 0, steps: int | str | None = None, test_file: str | None = None,
                dataset: str | None = None, text_column: str | list[str] | None = None, label_column: str | None = None,
                label_delimiter: str | None = None, download: bool = False, data_dir: str | None = None,
                device: str = "auto", log: Callable[[str], None] = print,
                named: Callable[[str], str] = by_field) -> FaithfulnessResult:
    """Measure the faithfulness of ``run_dir``'s explanation methods (``measure_faithfulness``) on ``examples`` of
    its test texts, and save the result in the run as ``faithfulness.json`` (which its report shows); returns it, as
    `attnclf faithfulness` does. ``methods``: None or ``all`` for every method the model supports, else names,
    comma-separated or in a list (``chosen_methods``); ``steps``: integrated gradients'. The texts are those
    ``scoring_data`` reads from ``test_file``, ``dataset`` (and the other data arguments) or, without either, the
    run's own. ``log`` gets the notes: the run has not finished training, or the texts are not the run's own. Errors
    name arguments as ``named`` spells them (the command line: by its flags).

    The run is held meanwhile (``adding_to_run``): one another process is writing (training on) is refused in one
    line, as is a run this process cannot write into, before its weights are read.

    >>> # measure_run("runs/demo", methods="occlusion,attention", examples=100).most_faithful  # 'occlusion'
    """
    from ..classifier import Classifier
    from ..ensemble import refuse_ensemble_dir
    from ..rundir import adding_to_run, atomic_write_json, unfinished_warning
    from ..training.run_data import scoring_data

    # (measure_faithfulness checks them too, by its arguments' names)
    count, seed = _count(examples, named("examples")), check_seed(seed, named("seed"))
    refuse_ensemble_dir(run_dir)
    # Held from reading the weights to saving what they measured: a read-only run fails before, not after, and one
    # that another process is training is refused (the measurement would pass for one of its next weights).
    with adding_to_run(run_dir):
        classifier = Classifier.load(run_dir, device=device)
        if warning := unfinished_warning(run_dir):
            log(warning)
        available = run_methods(run_dir, classifier.model)
        chosen = available if methods is None else chosen_methods(methods, available, "methods", named)
        data = scoring_data(classifier, test_file, dataset, text_column=text_column, label_column=label_column,
                            label_delimiter=label_delimiter, download=download, data_dir=data_dir, log=log,
                            named=named)
        result = measure_faithfulness(classifier, data, methods=chosen, examples=count, seed=seed,
                                      **({} if steps is None else {"steps": steps}))
        atomic_write_json(Path(run_dir) / FAITHFULNESS_FILE, result.to_dict())
    return result


def _count(value, name: str = "examples") -> int:
    """``value``, a count (the texts to measure on, random deletions' draws), as an int; one line naming it as
    ``name`` unless it is a whole number of at least 1 (0 examples found no text to measure on only deep inside, in a
    traceback; 0 draws gave random deletion a NaN AOPC, and every method "does not beat random").

    >>> _count(np.int64(200))
    200
    """
    count = whole_number(value)
    if count is None or count < 1:
        raise AttnclfError(f"{name} must be at least 1, got {shown(value)}")
    return count


def _tokens_to_remove(k: int | str, n: int) -> int:
    """k tokens, or a percentage of the text rounded half up (at least one), never more than the text has.

    >>> _tokens_to_remove(3, 2), _tokens_to_remove("10%", 25), _tokens_to_remove("10%", 15), _tokens_to_remove("10%", 4)
    (2, 3, 2, 1)
    """
    if isinstance(k, str):
        return min(n, max(1, math.floor(float(k.rstrip("%")) / 100 * n + 0.5)))
    return min(n, k)


def rank_agreement(scores: dict[str, list[np.ndarray]]) -> dict[str, float]:
    """Mean Spearman correlation of every pair of methods' token scores, over texts with >= 3 tokens.

    >>> rank_agreement({"a": [np.array([1., 2, 3])], "b": [np.array([3., 2, 1])]})
    {'a / b': -1.0}
    """
    from scipy.stats import rankdata  # (here: scipy.stats is a second of every explain and serve start-up)

    agreement = {}
    for a, b in combinations(scores, 2):
        rhos = []
        for x, y in zip(scores[a], scores[b]):
            if len(x) >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0:
                rhos.append(np.corrcoef(rankdata(x), rankdata(y))[0, 1])
        agreement[f"{a} / {b}"] = float(np.mean(rhos)) if rhos else float("nan")
    return agreement


def uniform_attention_check(classifier: "Classifier", sequences: Sequence[Sequence[int]],
                            labels: Sequence) -> dict:
    """Accuracy with the learned pooling weights and with uniform ones over the real tokens; a multi-label run's
    (``labels``: a set of label indices per text), subset accuracy at its thresholds, and ``changed`` the share of
    texts whose predicted set changes. Both passes are ``Classifier.scores_of_ids``', batched and computed as predict
    computes (in bfloat16 for a ``bf16`` classifier): the learned weights' decisions are predict's to the bit.

    >>> # uniform_attention_check(clf, clf.tokenizer.encode(texts), labels)["uniform_accuracy"]
    """
    thresholds = classifier.thresholds if classifier.multi_label else None
    if thresholds is not None:
        from ..data.multilabel import multi_hot

        truth = multi_hot(labels, len(classifier.label_names))
    else:
        truth = np.asarray(labels)[:, None]
    # From the probabilities predict answers by (a calibrated run's temperature in them), by its own rule: a
    # probability at its label's threshold falls on the side it falls for predict.
    learned = decided_rows(classifier.scores_of_ids(sequences)[0], thresholds)
    uniform = decided_rows(classifier.scores_of_ids(sequences, uniform_pooling=True)[0], thresholds)
    return {"accuracy": float((learned == truth).all(1).mean()),
            "uniform_accuracy": float((uniform == truth).all(1).mean()),
            "changed": float((learned != uniform).any(1).mean()), "examples": len(sequences)}


def summary_table(results: Sequence[FaithfulnessResult]) -> str:
    """Per model and dataset: the most faithful method (or the methods tied for it), who beat random deletion, and the
    uniform check, whose figure is a multi-label run's subset accuracy (the column says so, and where single-label
    runs share the table, each multi-label row's figure too).

    >>> # print(summary_table([measure_faithfulness(clf, data) for clf, data in runs]))
    """
    kinds = {r.multi_label for r in results}
    scored = ("subset accuracy" if kinds == {True} else
              "accuracy (subset accuracy for a multi-label run)" if kinds == {True, False} else "accuracy")
    lines = [f"| model | dataset | texts | most faithful (AOPC) | beat random | did not | {scored}: learned -> "
             "uniform attention |", "|---|---|---|---|---|---|---|"]
    for r in results:
        u = r.uniform_attention
        uniform = f"{u['accuracy']:.3f} -> {u['uniform_accuracy']:.3f}" if u else "n/a (no attention pooling)"
        if u and r.multi_label and len(kinds) == 2:
            uniform += " (subset)"
        rest = [m for m in r.methods if m not in r.beating_random()]
        best = r.methods[r.most_faithful_methods[0]].aopc
        lines.append(f"| {r.model} | {r.dataset} | {r.examples} | {r.most_faithful} "
                     f"({number_text(best, decimals=3)}) | "
                     f"{', '.join(r.beating_random()) or 'none'} | {', '.join(rest) or 'none'} | {uniform} |")
    return "\n".join(lines)
