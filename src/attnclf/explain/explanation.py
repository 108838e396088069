"""Explanations of a trained classifier's predictions, one per text.

>>> # from attnclf import Classifier
>>> # clf = Classifier.load("runs/demo")
>>> # [e.top_tokens(2) for e in clf.explain(["not bad at all"], method="occlusion")]
>>> # clf.explain(["not bad at all"])[0].pooling_attention  # the default, occlusion, with the attention beside it
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

from ..errors import AttnclfError, first_few, nearest, shown
from ..prediction import check_texts, class_threshold, decided_classes, label_set, token_counts, unknown_tokens_note
from ..text.batching import EVAL_MAX_TOKENS, BucketBatches
from ..text.tokenizer import cut_position
from .methods import DEFAULT_METHOD, METHODS, attribute, available_methods, method_options, self_attention_maps

if TYPE_CHECKING:
    from ..classifier import Classifier


@dataclass
class Explanation:
    """Per-token scores of one text by one method, for the class ``target``.

    A multi-label run's explanation is of one label, ``target``, by its own sigmoid probability: ``label`` is None
    and ``labels`` holds the text's predicted set (most probable first, possibly empty), as its prediction does.

    ``description`` says what a score means (for ``attention``: where the
    pooling layer looked, not why the model decided). Integrated gradients
    also report ``completeness_error``, ``|sum(scores) - log_odds_change| /
    |log_odds_change|``, and the gradients along the path it took (``steps``). ``self_attentions``,
    when asked for, hold every layer's and head's map as (layers, heads, n, n),
    rows = queries (``to_dict`` carries ``attention_window`` with them, 0 when every token attends to the whole
    text). ``branch_margins``, for models with more than one branch (``self-attn``
    with its n-gram branch), say how much each branch pushed the target class: its logit of the
    target minus the mean of its other logits (a calibrated run's over its temperature). The branches'
    margins add up to the model's (for two classes: to the log-odds of ``probability``), so they show
    whether attention or the n-grams decided. ``pooling_attention``, for a model that pools by attention and a
    method other than ``attention``, holds the pooling layer's weight per token beside the scores
    (``BESIDE_DESCRIPTION`` says what they are): where the pooling looked, next to what the method measured.
    ``unknown_tokens``: how many of ``tokens`` are ``<unk>``, words the model's vocabulary lacks (None: not counted;
    0 for an empty text, whose one ``<unk>`` stands in its place: ``tokens_read`` 0), as in
    ``attnclf.prediction.Prediction``; ``unknown_note`` says when they are more than a quarter, or the text is empty
    (``to_dict`` carries it as ``"unknown_note"``: null for fewer, absent with the count where they were not counted).
    """

    text: str
    tokens: list[str]
    scores: list[float]
    method: str
    label: str | None  # the predicted class (None: a multi-label run's, whose predicted set is ``labels``)
    target: str  # the class the scores explain (the predicted one unless asked otherwise; multi-label: one label)
    probability: float  # p(target | text)
    probabilities: dict[str, float]
    completeness_error: float | None = None
    log_odds_change: float | None = None
    steps: int | None = None
    self_attentions: np.ndarray | None = None
    branch_margins: dict[str, float] | None = None
    # Tokens of the text beyond the model's max_len, cut before it read them (not in ``tokens``); None: some, not
    # counted, as a text far longer than the model reads is tokenised by its ends only (``Tokenizer._ends``).
    tokens_cut: int | None = 0
    cut_at: int | None = None  # where in ``tokens`` they stood (head + tail: between the two parts); None: no cut
    pooling_attention: list[float] | None = None
    unknown_tokens: int | None = None
    tokens_read: int | None = None  # how many of ``tokens`` are the text's: 0 for an empty text; None: all of them
    attention_window: int = 0  # the model's: > 0, each token attends within its block of this many (self_attentions)
    labels: list[str] | None = None  # a multi-label run's predicted labels (None: a single-label run's)

    @property
    def description(self) -> str:
        return METHODS[self.method].description

    @property
    def signed(self) -> bool:
        return METHODS[self.method].signed

    @property
    def per_class(self) -> bool:
        """Whether the scores are the target's own: attention and rollout weigh the tokens before the model's head
        reads them, so they are the same whichever class is explained."""
        return METHODS[self.method].per_class

    def __repr__(self) -> str:
        """One line: the text's start, the method, the classes, the strongest tokens, and where the rest is. (The
        dataclass's own repr spelt out every score and the self-attention maps: thousands of characters where a
        notebook echoes ``explain``'s answer.)

        >>> e = Explanation("a b", ["a", "b"], [0.1, -0.7], "occlusion", "pos", "pos", 0.9, {})
        >>> e  # doctest: +NORMALIZE_WHITESPACE
        Explanation(text='a b', method='occlusion', label='pos', target='pos', probability=0.9,
                    strongest_tokens=[('b', -0.7), ('a', 0.1)], 2 tokens: .tokens, .scores)
        """
        carried = [name for name in ("pooling_attention", "self_attentions") if getattr(self, name) is not None]
        predicted = f"label={self.label!r}" if self.labels is None else f"labels={self.labels!r}"
        return (f"Explanation(text={shown(self.text, most=60)}, method={self.method!r}, {predicted}, "
                f"target={self.target!r}, probability={self.probability!r}, "
                f"strongest_tokens={self.strongest_tokens(3)!r}, {len(self.tokens)} tokens: "
                f"{', '.join(f'.{name}' for name in ['tokens', 'scores', *carried])})")

    def top_tokens(self, k: int = 3) -> list[tuple[str, float]]:
        """The ``k`` highest-scoring tokens with their scores.

        >>> e = Explanation("a b", ["a", "b"], [0.1, 0.7], "attention", "pos", "pos", 0.9, {})
        >>> e.top_tokens(1)
        [('b', 0.7)]
        """
        order = np.argsort(-np.asarray(self.scores), kind="stable")[:k]
        return [(self.tokens[i], self.scores[i]) for i in order]

    def strongest_tokens(self, k: int = 3) -> list[tuple[str, float]]:
        """The ``k`` tokens with the largest scores in size, evidence against the class too (a signed method's
        token at -0.99 matters more than one at +0.01): the tokens coloured strongest.

        >>> e = Explanation("a b", ["a", "b"], [0.1, -0.7], "occlusion", "pos", "pos", 0.9, {})
        >>> e.strongest_tokens(1)
        [('b', -0.7)]
        """
        order = np.argsort(-np.abs(self.scores), kind="stable")[:k]
        return [(self.tokens[i], self.scores[i]) for i in order]

    def attention_beside(self) -> Explanation | None:
        """The ``pooling_attention`` carried beside the scores as an explanation by ``attention`` of its own, to be
        shown as attention is shown (None: none carried).

        >>> e = Explanation("a b", ["a", "b"], [0.1, -0.7], "occlusion", "pos", "pos", 0.9, {},
        ...                 pooling_attention=[0.8, 0.2])
        >>> e.attention_beside().method, e.attention_beside().top_tokens(1)
        ('attention', [('a', 0.8)])
        """
        if self.pooling_attention is None:
            return None
        return replace(self, scores=self.pooling_attention, method="attention", pooling_attention=None,
                       completeness_error=None, log_odds_change=None, steps=None, self_attentions=None)

    def unknown_note(self) -> str | None:
        """A line for a person when more than a quarter of the tokens the model read are unknown to it, else None.

        >>> Explanation("a zz", ["a", "<unk>"], [0.5, 0.5], "attention", "pos", "pos", 0.9, {}, unknown_tokens=1
        ...             ).unknown_note()
        '1 of the 2 tokens the model read is unknown to it (<unk>): its answer rests on the other 1'
        """
        tokens_read = len(self.tokens) if self.tokens_read is None else self.tokens_read
        return unknown_tokens_note(self.unknown_tokens, tokens_read)

    def _repr_html_(self) -> str:
        """What a notebook shows for it: the text, the prediction, the colour key and the coloured tokens (hover one:
        its score), as ``attnclf explain -o page.html`` shows them, without the page's bar chart.

        >>> e = Explanation("not bad", ["not", "bad"], [0.2, 0.3], "occlusion", "pos", "pos", 0.9, {"pos": 0.9})
        >>> 'title="+0.2000">not</span>' in e._repr_html_()
        True
        """
        from .render import notebook_html  # (render imports this module)

        return notebook_html([self])

    def to_dict(self) -> dict:
        # (a multi-label run's answer names its label set as /predict's does: one "label" would mislead)
        predicted = {"label": self.label} if self.labels is None else {"labels": self.labels}
        record = {"text": self.text, "method": self.method, "description": self.description, **predicted,
                  "target": self.target, "probability": self.probability, "probabilities": self.probabilities,
                  "tokens": self.tokens, "scores": self.scores}
        if self.completeness_error is not None:
            record |= {"completeness_error": self.completeness_error, "log_odds_change": self.log_odds_change,
                       "steps": self.steps}
        if self.self_attentions is not None:
            # The window with the maps: without it a reader cannot tell a head spread evenly over its block from one
            # looking at part of the text (render.spread_ratios), as the terminal can.
            record |= {"self_attentions": np.round(self.self_attentions, 5).tolist(),
                       "attention_window": self.attention_window}
        if self.branch_margins is not None:
            record["branch_margins"] = self.branch_margins
        if self.cut_at is not None:
            record |= {"tokens_cut": self.tokens_cut, "cut_at": self.cut_at}
        if self.unknown_tokens is not None:  # (the note null under a quarter: a key a program can always read)
            record |= {"unknown_tokens": self.unknown_tokens, "unknown_note": self.unknown_note()}
        if self.pooling_attention is not None:
            record["pooling_attention"] = {"weights": self.pooling_attention, "per_class": False,
                                           "uniform_weight": 1 / len(self.tokens), "description": BESIDE_DESCRIPTION}
        return record


class Explanations(list):
    """``explain``'s answer: a list of ``Explanation``, which a notebook shows as every text's coloured tokens
    (Jupyter shows a plain list by its items' reprs, whatever they can render).

    >>> e = Explanation("not bad", ["not", "bad"], [0.2, 0.3], "occlusion", "pos", "pos", 0.9, {"pos": 0.9})
    >>> Explanations([e, e])._repr_html_().count("<section>"), Explanations([e]) == [e]
    (2, True)
    >>> type(Explanations([e, e])[:1]).__name__  # (a notebook's `clf.explain(texts)[:5]` shows coloured too)
    'Explanations'
    """

    def __getitem__(self, index):
        item = super().__getitem__(index)
        return Explanations(item) if isinstance(index, slice) else item

    def _repr_html_(self) -> str:
        from .render import notebook_html

        return notebook_html(self)


# What the pooling weights carried beside another method's scores are, wherever they are shown.
BESIDE_DESCRIPTION = f"{METHODS['attention'].description}; the same for every class"


def explain(classifier: "Classifier", texts: Sequence[str], method: str | None = None, *,
            target: str | int | None = None, self_attentions: bool = False, attention_beside: bool = True,
            threshold: tuple[str, float] | str | None = None, **options) -> Explanations:
    """Explain ``classifier``'s prediction on every text by ``method`` (a key of ``METHODS``; default:
    ``DEFAULT_METHOD``, occlusion). Where the model pools by attention and ``method`` is another, each explanation
    also carries the pooling weights (``pooling_attention``), which cost one forward pass, unless
    ``attention_beside=False`` (for a caller that shows the ``attention`` method's explanation as well).

    ``target`` picks the class to explain (default: each text's predicted class): a label name (a str, as
    ``attnclf explain --target`` takes it) or an index into ``label_names`` (an int is always an index, even
    where the names are digits); an unknown name or an index out of range is refused in one line. A multi-label
    run explains one label at a time, by its own sigmoid; by default each label it predicts for a text (one
    explanation each, most probable first: why each label was given is what its reader asks), or where it predicts
    none, its most probable label, the one nearest to being given. ``threshold``: the operating point the prediction
    explained was made by, as ``Classifier.predict`` takes it (a service's ``--threshold``), so that the class (or label
    set) explained by default is the one predicted.
    ``self_attentions=True`` adds every layer's and head's attention map. Other options go to the method
    (integrated gradients: ``steps``, a number of Gauss-Legendre nodes or "auto", the default: 16, then the pieces
    of the path still off halved until the completeness error is at most 1% and each token's estimated error at
    most 3% of the largest score, or 1,008 gradients are spent). A run that reads windows (``--windows``) and an
    ``Ensemble`` are refused in one line: the methods attribute one model's one token sequence.

    >>> # clf.explain(["not bad at all"], method="integrated-gradients", steps=64)[0].completeness_error
    >>> # explain(clf, ["not bad at all"], target="neg")[0].target  # 'neg', as target=clf.label_names.index("neg")
    >>> # explain(clf, ["not bad at all"], attention_beside=False)[0].pooling_attention  # None
    """
    return Explanations(_explanations(classifier, texts, [(method, options)], target=target,
                                      self_attentions=self_attentions, attention_beside=attention_beside,
                                      threshold=threshold)[0])


def _explanations(classifier: "Classifier", texts: Sequence[str], asked: list[tuple[str | None, dict]], *,
                  target: str | int | None, self_attentions: bool, attention_beside: bool,
                  threshold: tuple[str, float] | str | None) -> list[list[Explanation]]:
    """``explain``'s work for each (method, its options) of ``asked``, a list of explanations per method: the texts
    are tokenised and predicted once, and what is the same whatever the method (the classes explained, the branches'
    margins, the pooling attention beside) is computed once; the self-attention maps go with the first method's."""
    refuse_unexplainable(classifier)
    texts = check_texts(texts)
    multi_label = getattr(classifier, "multi_label", False)
    threshold = class_threshold(threshold, classifier.label_names, multi_label)  # (before the texts are run)
    available = _available_checked(classifier.model, self_attentions, attention_beside)
    # ("" is no method, not the default)
    asked = [(DEFAULT_METHOD if method is None else method, options) for method, options in asked]
    for method, options in asked:  # (a mistyped method, option or target: one line before any text is run)
        method_options(classifier.model, method, options)
    target_index = None if target is None else class_index(target, classifier.label_names)
    # Where the pooling looked, beside any other method's scores (one forward pass): weights a reader would
    # otherwise take for the model's reasons, shown next to what was measured, neither read for the other.
    beside = attention_beside and any(method != "attention" for method, _ in asked) and "attention" in available
    shared = _shared_pass(classifier, multi_label, texts, threshold, target_index, self_attentions, beside)
    by_method = []
    for nth, (method, options) in enumerate(asked):
        result = attribute(classifier.model, shared.pair_ids, shared.targets, method, device=classifier.device,
                           batch_size=classifier.batch_size, max_tokens=classifier.max_tokens,
                           temperature=classifier.temperature, multi_label=multi_label, **options)
        by_method.append(_method_explanations(classifier, multi_label, shared, method, result, with_maps=nth == 0))
    return by_method


def refuse_unexplainable(classifier: "Classifier") -> None:
    """A one-line error for what the methods cannot attribute: an ensemble's several models, or a windowed run's
    several token sequences (``explain`` and ``measure_faithfulness`` check first).

    >>> # refuse_unexplainable(Classifier.load("runs/long-docs"))  # AttnclfError: explanations of windowed runs ...
    """
    from ..ensemble import Ensemble
    from ..models.windows import window_config

    if isinstance(classifier, Ensemble):
        classifier.explain([])  # (refused in one line, naming a member to explain instead)
    if window_config(classifier.model) is not None:
        raise AttnclfError("explanations of windowed runs (trained with --windows) are not supported yet: "
                           "the methods attribute one token sequence, a windowed model reads several")


def _available_checked(model, self_attentions: bool, attention_beside: bool) -> list[str]:
    """The explanation methods ``model`` supports, once the two switches are checked booleans and the self-attention
    maps asked of a model that has some."""
    if not isinstance(self_attentions, bool):
        raise AttnclfError(f"self_attentions must be True or False, got {self_attentions!r}")
    if not isinstance(attention_beside, bool):
        raise AttnclfError(f"attention_beside must be True or False, got {attention_beside!r}")
    available = available_methods(model)
    if self_attentions and "rollout" not in available:
        raise AttnclfError("self-attention maps (--heads): this model has no self-attention layers to show")
    return available


@dataclass
class _SharedPass:
    """What ``_explanations`` computes once, whatever the methods. Per text: its tokens (``encoded``: its ids and the
    tokens its cut dropped), probabilities, predicted classes, self-attention ``maps`` (None: not asked) and pooling
    attention ``beside`` (None: not shown). Per (text, class) pair explained, j: the text ``owners[j]``, its ids
    ``pair_ids[j]``, the class ``targets[j]`` and the branches' ``margins[j]``."""

    texts: list[str]
    encoded: list[tuple[list[int], int]]
    probabilities: np.ndarray
    predicted: list[list[int]]
    maps: list
    beside: np.ndarray | None
    owners: list[int]
    pair_ids: list[list[int]]
    targets: np.ndarray
    margins: list[dict[str, float] | None]


def _shared_pass(classifier: "Classifier", multi_label: bool, texts: list[str], threshold,
                 target_index: int | None, self_attentions: bool, beside: bool) -> _SharedPass:
    """The texts tokenised and predicted once, the pairs explained (one per text and label: the class of
    ``target_index``, else the predicted ones at ``threshold``), and what every method's explanation of them shows
    beside its scores."""
    encoded = classifier.tokenizer.encode_counting_cuts(texts)
    ids = [sequence for sequence, _ in encoded]
    probabilities = classifier.scores_of_ids(ids)[0]  # (the ids just read: not the texts tokenised again)
    predicted = _predicted(classifier, probabilities, threshold)
    explained = _explained(predicted, probabilities, target_index)
    owners = [i for i, labels in enumerate(explained) for _ in labels]
    targets = np.array([label for labels in explained for label in labels], dtype=np.int64)
    pair_ids = [ids[i] for i in owners]
    return _SharedPass(
        texts=texts, encoded=encoded, probabilities=probabilities, predicted=predicted,
        maps=(self_attention_maps(classifier.model, ids, device=classifier.device, batch_size=classifier.batch_size,
                                  max_tokens=classifier.max_tokens) if self_attentions else [None] * len(texts)),
        beside=(attribute(classifier.model, ids, np.zeros(len(ids), dtype=np.int64), "attention",
                          device=classifier.device, batch_size=classifier.batch_size,
                          max_tokens=classifier.max_tokens).scores if beside else None),
        owners=owners, pair_ids=pair_ids, targets=targets,
        margins=_branch_margins(classifier.model, pair_ids, targets, classifier.device, classifier.batch_size,
                                classifier.temperature, multi_label, max_tokens=classifier.max_tokens))


def _method_explanations(classifier: "Classifier", multi_label: bool, shared: _SharedPass, method: str, result,
                         with_maps: bool) -> list[Explanation]:
    """One explanation per pair of ``shared``, of ``method``'s attribution ``result``; the self-attention maps in
    them where ``with_maps``."""
    names, config = classifier.label_names, classifier.tokenizer.config
    window = getattr(classifier.model.config, "attention_window", 0)  # (only models with self-attention have one)
    explanations = []
    for j, (i, explained_label) in enumerate(zip(shared.owners, shared.targets)):
        ids, tokens_cut = shared.encoded[i]
        unknown_tokens, tokens_read = token_counts(ids, shared.texts[i], classifier.tokenizer)
        explanations.append(Explanation(
            text=shared.texts[i],
            tokens=classifier.tokenizer.token_strings(ids),
            scores=[float(s) for s in result.scores[j]],
            method=method,
            label=None if multi_label else names[shared.predicted[i][0]],
            target=names[explained_label],
            probability=float(shared.probabilities[i, explained_label]),
            probabilities={name: float(p) for name, p in zip(names, shared.probabilities[i])},
            completeness_error=None if result.completeness_error is None else float(result.completeness_error[j]),
            log_odds_change=None if result.log_odds_change is None else float(result.log_odds_change[j]),
            steps=None if result.steps is None else int(result.steps[j]),
            self_attentions=shared.maps[i] if with_maps else None,
            branch_margins=shared.margins[j],
            tokens_cut=tokens_cut,
            cut_at=cut_position(tokens_cut, config.max_len, config.truncation),
            pooling_attention=(None if shared.beside is None or method == "attention"
                               else [float(w) for w in shared.beside[i]]),
            unknown_tokens=unknown_tokens,
            tokens_read=tokens_read,
            attention_window=window,
            labels=[names[label] for label in shared.predicted[i]] if multi_label else None,
        ))
    return explanations


def explained_labels(classifier: "Classifier", texts: Sequence[str],
                     threshold: tuple[str, float] | str | None = None) -> list[list[int]]:
    """Per text, the classes ``explain`` explains it for by default, one explanation each (``target`` aside): its
    predicted class, or a multi-label run's predicted labels (its most probable where it predicts none), at
    ``threshold`` as ``explain`` takes it. One forward pass: what an explanation's cost is counted by before it runs.

    >>> # explained_labels(clf, ["bread soup and the orchestra", "today"])   # multi-label: [[0, 1], [0]]
    """
    texts = check_texts(texts)
    threshold = class_threshold(threshold, classifier.label_names, getattr(classifier, "multi_label", False))
    probabilities = classifier.predict_proba(texts)
    return _explained(_predicted(classifier, probabilities, threshold), probabilities, None)


def _predicted(classifier, probabilities: np.ndarray, threshold) -> list[list[int]]:
    """Each row's predicted class as a list of one, or a multi-label run's predicted labels (``label_set``)."""
    if getattr(classifier, "multi_label", False):
        return [label_set(row, classifier.thresholds, threshold) for row in probabilities]
    return [[int(decided_classes(row, threshold))] for row in probabilities]


def _explained(predicted: list[list[int]], probabilities: np.ndarray, asked: int | None) -> list[list[int]]:
    """Each row's classes to explain: ``asked``, else its ``predicted`` ones, else (none predicted) its most probable,
    the one nearest to being given."""
    return [[asked] if asked is not None else labels or [int(row.argmax())]
            for labels, row in zip(predicted, probabilities)]


def _branch_margins(model, sequences: list[list[int]], targets: np.ndarray, device, batch_size: int,
                    temperature: float = 1.0, multi_label: bool = False, *,
                    max_tokens: int | None = EVAL_MAX_TOKENS) -> list[dict[str, float] | None]:
    """Per text, each branch's logit of its target minus the mean of its other logits, over ``temperature`` (None: one
    branch): a calibrated run's probabilities are softmax(logits / T), so its margins add up to their log-odds. A
    ``multi_label`` run's label is a sigmoid of its own logit alone, its log-odds: each branch's logit of it."""
    if getattr(model, "ngram_logits", None) is None:
        return [None] * len(sequences)
    margins: list[dict[str, float] | None] = [None] * len(sequences)
    with torch.inference_mode():
        for batch in BucketBatches(sequences, batch_size=batch_size, shuffle=False, max_tokens=max_tokens):
            batch = batch.to(device)
            parts = model.branch_logits(model.summarize(batch.input_ids, batch.attention_mask).vector)
            for row, i in enumerate(batch.indices):
                target = int(targets[i])
                margins[i] = {name: float(z[row, target] - (0 if multi_label else
                                                            (z[row].sum() - z[row, target]) / (z.shape[1] - 1)))
                              / temperature for name, z in parts.items()}
    return margins


def class_index(target: str | int, label_names: list[str]) -> int:
    """The index in ``label_names`` of the class ``target`` names, by name or by index, or one line naming it and the
    classes to choose from (what ``explain``, and a service before the explanation's turn, refuse a target by).

    >>> class_index("positive", ["negative", "positive"]), class_index(0, ["negative", "positive"])
    (1, 0)
    """
    if isinstance(target, str) and target in label_names:
        return label_names.index(target)
    if isinstance(target, (int, np.integer)) and not isinstance(target, bool) and 0 <= target < len(label_names):
        return int(target)
    if isinstance(target, str):  # (a name was meant: an index comes as an int, which `explain --target` never gives)
        raise AttnclfError(f"unknown target class {shown(target)}{nearest(target, label_names)}; the classes are "
                           f"{first_few(label_names, most=10)}")
    # (an int is an index: the estimator's class 7 of [3, 7] is "7", and "the classes are 3, 7" alone baffled)
    raise AttnclfError(f"unknown target class {shown(target)}; give a label name "
                       f"({first_few(label_names, most=10)}) or an index from 0 to {len(label_names) - 1}")


def explain_each(classifier: "Classifier", texts: Sequence[str], methods: Sequence[str], *,
                 target: str | int | None = None, self_attentions: bool = False,
                 steps: int | str | None = None, threshold: tuple[str, float] | str | None = None) -> list[Explanation]:
    """Every text explained by each of ``methods`` (as ``explain`` explains by one, the texts predicted once for all
    of them), grouped by text, a text's explanations in the order of ``methods``, as `attnclf explain --method a,b`
    and /explain's list of methods give them: the pooling attention beside the scores only where attention is not
    among ``methods`` (it would repeat its scores); the self-attention maps (``self_attentions``) with the first
    method's; ``steps`` for integrated gradients, where asked; ``threshold``: the operating point the predictions
    were made by (``explain``).

    >>> # explain_each(clf, ["a", "b"], ["occlusion", "attention"])   # a's two explanations, then b's
    """
    asked = [(method, {"steps": steps} if steps is not None and method == "integrated-gradients" else {})
             for method in methods]
    by_method = _explanations(classifier, texts, asked, target=target, self_attentions=self_attentions,
                              attention_beside="attention" not in methods, threshold=threshold)
    return [explanation for per_text in zip(*by_method) for explanation in per_text]
