"""What every prediction backend (PyTorch, ONNX) shares, in plain Python: the input check and the result."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .checks import by_field, true_or_false
from .errors import AttnclfError, first_few, shown
from .text.cleaning import unicode_problem
from .text.tokenizer import UNK, UNK_ID, Tokenizer

# A text is noted when more than this share of the tokens the model read are <unk>. Not at any share: a vocabulary of
# training texts lacks a word of most real texts (a name, a typo): under their recipes' tokenizers 56% of SST-2's test
# sentences, 83% of IMDB's and 98% of 20 Newsgroups' test posts hold one, against 0.46%, 0.00% and 0.04% past a quarter
# (BENCHMARKS.md, Unknown tokens). A note on most texts would be read on none; past a quarter, a text is off the
# training texts' ground, and a confident answer on it rests on the words left.
UNKNOWN_SHARE_NOTED = 0.25
NOTED_TEXTS = 5  # such notes per command: a file of thousands of such texts gets a count of the rest, not a note each
LABELS_SHOWN = 5  # a model's repr names this many of its labels: 20 Newsgroups' twenty would fill a line thrice


def shaped(values):
    """``values`` as a numpy array if it is an array-like that numpy reads but that has no shape of its own: pyarrow's
    arrays (a Parquet column), whose items are arrow scalars, not ``str`` or ``int``, and whose ``to_numpy`` refuses
    to copy strings or booleans; anything else (pandas, numpy, lists) as it is.

    >>> class Column:  # as pyarrow's arrays: numpy reads it, and it has no shape
    ...     def __array__(self, dtype=None, copy=None):
    ...         return np.array(["a", "b"], dtype=object)
    >>> shaped(Column()), shaped(["a", "b"])
    (array(['a', 'b'], dtype=object), ['a', 'b'])
    """
    return np.asarray(values) if hasattr(values, "__array__") and not hasattr(values, "shape") else values


def model_repr(kind: str, **fields) -> str:
    """How a model shows itself where a notebook echoes it: ``kind(field=value, ...)``, the fields that are None left
    out, and of ``labels`` the first ``LABELS_SHOWN`` and how many there are.

    >>> model_repr("Classifier", model="boe", labels=["neg", "pos"], device="cpu", bf16=None)
    "Classifier(model='boe', labels=['neg', 'pos'], device='cpu')"
    >>> model_repr("Ensemble", members=3, labels=[f"topic {i}" for i in range(20)])
    "Ensemble(members=3, labels=['topic 0', 'topic 1', 'topic 2', 'topic 3', 'topic 4', ...] (20))"
    """
    shown_fields = []
    for name, value in fields.items():
        if value is None:
            continue
        if name == "labels":
            count = f" ({len(value)})" if len(value) > LABELS_SHOWN else ""
            shown_fields.append(f"labels=[{first_few(value, most=LABELS_SHOWN)}]{count}")
        else:
            shown_fields.append(f"{name}={value!r}")
    return f"{kind}({', '.join(shown_fields)})"


def check_texts(texts: Sequence[str], name: str | None = None) -> list[str]:
    """``texts`` as a list, or one line saying which item is not a string, or not one UTF-8 can encode; ``name``:
    what the caller calls them (scikit-learn's ``X``: "X[1] is int").

    >>> check_texts(("good", "bad"))
    ['good', 'bad']
    >>> check_texts(["good", "half a pair " + chr(0xD800)])
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: text 1 is not valid Unicode: a lone surrogate (U+D800) at character 12
    """
    texts = shaped(texts)  # (pyarrow's strings would be StringScalars)
    expected = f"pass a list of texts{f' as {name}' if name else ''}"
    if isinstance(texts, str):
        raise AttnclfError(f"{expected}, not a single string")
    if isinstance(texts, (bytes, bytearray)):  # (whose items are ints)
        raise AttnclfError(f"{expected}, not {type(texts).__name__}; decode it first")
    if texts is None or isinstance(texts, (dict, set, frozenset)) or not hasattr(texts, "__iter__"):
        # (a dict would give its keys, a set an order of its own: answers that match no input)
        raise AttnclfError(f"{expected}, not {type(texts).__name__}")
    if getattr(texts, "ndim", 1) == 0:  # (np.array("a review"): one text, not a table's column)
        raise AttnclfError(f"{expected}, not a single value (a 0-dimensional {type(texts).__name__}: "
                           f"{shown(texts.item())}); wrap it in a list")
    if getattr(texts, "ndim", 1) != 1:
        # A DataFrame iterates over its column names, a 2-D array over its rows: either would answer other texts than
        # the rows it holds, silently for a DataFrame (one answer, for the word "review").
        raise AttnclfError(f"{expected}, not a {texts.ndim}-dimensional {type(texts).__name__} (shape "
                           f"{tuple(texts.shape)}): pass one column of it (df['review'], not df[['review']])")
    texts = list(texts)
    for i, text in enumerate(texts):
        item = f"{name}[{i}]" if name else f"text {i}"
        if not isinstance(text, str):  # (the missing-value checks only for what cannot be a text anyway)
            nan = isinstance(text, (float, np.floating)) and np.isnan(text)  # (pandas' empty cell: NaN)
            pandas = sys.modules.get("pandas")  # (its NA, a nullable string column's empty cell: pandas is loaded)
            if text is None or nan or pandas is not None and text is pandas.NA:
                raise AttnclfError(f"{item} is {'nan' if nan else repr(text)}, a missing value, not a text")
            raise AttnclfError(f"{item} is {type(text).__name__}, not a string")
        if problem := unicode_problem(text):
            raise AttnclfError(f"{item} is {problem}")
    return [str(text) for text in texts]  # (numpy's str_ items become plain strings)


def trained_text_column(config: dict) -> str | list[str]:
    """The column a model read its texts from (a list: the columns joined into each text): a run's (or an
    ensemble's) config.json, or an ONNX export.json.

    >>> trained_text_column({"settings": {"data": {"text_column": "review"}}}), trained_text_column({})
    ('review', 'text')
    >>> trained_text_column({"text_column": ["title", "body"]})
    ['title', 'body']
    """
    return config.get("text_column") or config.get("settings", {}).get("data", {}).get("text_column") or "text"


def trained_label_delimiter(config: dict) -> str:
    """What joined the label sets of the CSV/TSV file a multi-label run trained on (``--label-delimiter``), as its
    config.json (or its ONNX export.json) records it; ``DEFAULT_LABEL_DELIMITER`` where it records none (an export
    made before exports recorded it).

    >>> trained_label_delimiter({"settings": {"data": {"label_delimiter": ";"}}}), trained_label_delimiter({})
    (';', '|')
    """
    from .data.multilabel import DEFAULT_LABEL_DELIMITER

    return (config.get("label_delimiter") or config.get("settings", {}).get("data", {}).get("label_delimiter")
            or DEFAULT_LABEL_DELIMITER)


def joined_text_columns(config: dict) -> dict | None:
    """The columns each text a model read was joined from, and what joined them, as a client must send a text: the
    run's own (``--text-column`` twice), or its dataset's (AG News: a title and a description); None for texts read
    whole, from one column.

    >>> joined_text_columns({"text_column": ["title", "body"]})
    {'names': ['title', 'body'], 'joined_by': '\\n'}
    >>> joined_text_columns({"settings": {"data": {"dataset": "ag_news"}}})
    {'names': ['title', 'description'], 'joined_by': '. '}
    """
    from .data.files import TEXT_JOINER

    if "text_columns" in config:  # an ONNX export's, recorded as it was made: it names no dataset to look up
        return config["text_columns"]
    columns = trained_text_column(config)
    if isinstance(columns, list):
        return {"names": columns, "joined_by": TEXT_JOINER}
    dataset = config.get("settings", {}).get("data", {}).get("dataset")
    if dataset is None:  # (the registry imports scikit-learn, which the ONNX service otherwise never does)
        return None
    from .data.registry import sources

    source = sources().get(dataset)
    if source is not None and source.text_fields:
        return {"names": list(source.text_fields), "joined_by": source.joined_by}
    return None


def token_counts(ids: list[int], text: str, tokenizer: Tokenizer) -> tuple[int, int]:
    """How many of ``text``'s token ``ids`` (``tokenizer.encode``'s) are ``<unk>`` (words the vocabulary lacks,
    which tell the model nothing), and how many it read: a prediction's ``unknown_tokens`` and ``tokens_read``.
    A text with nothing to read (``Tokenizer.reads_nothing``: empty, or blank) counts none of either: the one
    ``<unk>`` the model is given in its place is no word of the text's.

    >>> from attnclf.text import TokenizerConfig
    >>> tokenizer = Tokenizer.train(["a good film"], TokenizerConfig(min_frequency=1))
    >>> texts = ["a bad film", "zzz", " "]
    >>> [token_counts(ids, text, tokenizer) for ids, text in zip(tokenizer.encode(texts), texts)]
    [(1, 3), (1, 1), (0, 0)]
    """
    if ids == [UNK_ID] and tokenizer.reads_nothing(text):  # (checked only where it may be: a text of one <unk>)
        return 0, 0
    return ids.count(UNK_ID), len(ids)


def unknown_tokens_note(unknown_tokens: int | None, tokens_read: int | None) -> str | None:
    """What a person should know of a text more than a quarter (``UNKNOWN_SHARE_NOTED``) of whose tokens the model
    read as ``<unk>``, or of which it read none (``token_counts``: an empty text); None for a text under that share,
    or whose tokens were not counted.

    >>> unknown_tokens_note(3, 6)
    '3 of the 6 tokens the model read are unknown to it (<unk>): its answer rests on the other 3'
    >>> unknown_tokens_note(1, 1), unknown_tokens_note(1, 5)
    ("the one token the model read is unknown to it (<unk>): its answer rests on none of the text's words", None)
    >>> unknown_tokens_note(0, 0)
    'it holds no word to read (empty once cleaned): its answer is the one the model gives every empty text'
    """
    if tokens_read == 0:
        return "it holds no word to read (empty once cleaned): its answer is the one the model gives every empty text"
    if unknown_tokens is None or tokens_read is None or unknown_tokens <= UNKNOWN_SHARE_NOTED * tokens_read:
        return None
    if unknown_tokens == tokens_read:
        which = ("the one token the model read is" if tokens_read == 1
                 else f"all {tokens_read} tokens the model read are")
        return f"{which} unknown to it ({UNK}): its answer rests on none of the text's words"
    return (f"{unknown_tokens} of the {tokens_read} tokens the model read {'is' if unknown_tokens == 1 else 'are'} "
            f"unknown to it ({UNK}): its answer rests on the other {tokens_read - unknown_tokens}")


class UnknownTokenNotes:
    """Notes on the texts past a quarter of whose tokens the model read as unknown, or empty
    (``unknown_tokens_note``): the first ``NOTED_TEXTS`` such texts a note each, then (``count_the_rest``) how many
    more, so that a file of thousands gets a count, not a note each. ``say`` writes a note's line (default: on
    stderr, where `attnclf predict` keeps them apart from its answers). Called with each text and its prediction:
    ``predict_file``'s ``noticed``.

    >>> notes = UnknownTokenNotes(say=print)
    >>> notes("zzz", Prediction("pos", 0.5, {"neg": 0.5, "pos": 0.5}, unknown_tokens=1, tokens_read=1))
    note: 'zzz': the one token the model read is unknown to it (<unk>): its answer rests on none of the text's words
    """

    def __init__(self, say: Callable[[str], None] | None = None):
        self.noted = 0
        self.say = say or (lambda line: print(line, file=sys.stderr))

    def __call__(self, text: str, prediction: Prediction | LabelSetPrediction) -> None:
        if note := unknown_tokens_note(prediction.unknown_tokens, prediction.tokens_read):
            self.noted += 1
            if self.noted <= NOTED_TEXTS:
                self.say(f"note: {shown(text)}: {note}")

    def count_the_rest(self) -> None:
        """The line counting the texts noted past the first ``NOTED_TEXTS``, where there were more.

        >>> notes = UnknownTokenNotes(say=print)
        >>> notes.noted = NOTED_TEXTS + 2  # (as after seven such texts, five of them noted)
        >>> notes.count_the_rest()
        note: and 2 more texts past a quarter of their tokens unknown, or empty: see each answer's unknown_tokens and \
tokens_read
        """
        if self.noted > NOTED_TEXTS:
            self.say(f"note: and {self.noted - NOTED_TEXTS:,} more texts past a quarter of their tokens "
                     f"unknown, or empty: see each answer's unknown_tokens and tokens_read")


def refuse_unknown_class(label_names: Sequence[str], name, asked: str, multi_label: bool = False) -> None:
    """One line where ``name`` is not one of ``label_names`` (``asked``: what named it; ``multi_label``: a
    multi-label run's, its labels), with the first few of them to pick from.

    >>> refuse_unknown_class(["neg", "pos"], "fraud", "--threshold")
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: --threshold: 'fraud' is not one of the run's 2 classes: 'neg', 'pos'
    """
    if name not in label_names:
        raise AttnclfError(f"{asked}: {shown(name)} is not one of the run's {len(label_names)} "
                           f"{'labels' if multi_label else 'classes'}: {first_few(label_names, most=5)}")


@dataclass(frozen=True)
class ClassThreshold:
    """An operating point applied: ``label`` (``label_names[index]``) is predicted whenever its probability is at
    least ``probability``, else the most probable of the other classes (``decided_classes``); a multi-label run's
    label is in a text's set from that probability on, in place of its tuned threshold, the other labels kept at
    theirs. Made by ``class_threshold``, which checks it against a run's classes.

    >>> ClassThreshold("pos", 1, 0.7).to_dict()
    {'class': 'pos', 'probability': 0.7}
    """

    label: str
    index: int
    probability: float

    def to_dict(self) -> dict:
        """As JSON answers name it (evaluate's, the service's), its index left out: the class by name.

        >>> ClassThreshold("pos", 1, 0.7).to_dict()["class"]
        'pos'
        """
        return {"class": self.label, "probability": self.probability}


def estimator_classifier(model):
    """A fitted ``AttentionTextClassifier``'s ``classifier_`` (scikit-learn's ``NotFittedError`` for an unfitted one,
    as its ``predict`` raises); None for anything else. An estimator means attnclf.sklearn is loaded already: nothing
    is imported to tell (serve's start-up included).

    >>> estimator_classifier("runs/demo") is None
    True
    """
    estimators = sys.modules.get("attnclf.sklearn")
    if estimators is None or not isinstance(model, estimators.AttentionTextClassifier):
        return None
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model, "classifier_")
    return model.classifier_


def class_threshold(threshold, label_names: Sequence[str], multi_label: bool = False,
                    named: Callable[[str], str] = by_field) -> ClassThreshold | None:
    """``threshold`` as a ``ClassThreshold`` of a run's ``label_names``: a pair ``(class, probability)``, or the
    command line's ``"CLASS=P"`` (split at its last ``=``: a class name may hold one); None stays None. A
    ``multi_label`` run's names one of its labels, whose tuned threshold it replaces. One line (naming
    ``named("threshold")``) for a malformed one, a class the run lacks, or a probability outside (0, 1). A pair's class
    named by a number or a boolean may be given as it (``(1, 0.7)`` for the class "1"), never as an index.

    >>> class_threshold("pos=0.7", ["neg", "pos"])
    ClassThreshold(label='pos', index=1, probability=0.7)
    >>> class_threshold(("pos", 1.2), ["neg", "pos"])
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: threshold 'pos'=1.2: the probability must be between 0 and 1, both left out
    """
    if threshold is None:
        return None
    asked = named("threshold")
    if isinstance(threshold, ClassThreshold):
        threshold = (threshold.label, threshold.probability)
    if isinstance(threshold, str):
        name, equals, value = threshold.rpartition("=")
        if not equals or not name or not value.strip():
            raise AttnclfError(f"{asked} takes CLASS=P, a class and the probability from which it is predicted "
                               f"(pos=0.7), got {shown(threshold)}")
        try:
            probability = float(value)
        except ValueError:
            raise AttnclfError(f"{asked} {shown(threshold)}: {shown(value)} is not a number") from None
    elif isinstance(threshold, (tuple, list)) and len(threshold) == 2:
        name, probability = threshold
        if isinstance(name, (int, np.integer, np.bool_)) and str(name) in label_names:
            # (a run names the class 1 "1", as the estimator's threshold and evaluate's labels read it; it was refused
            # as "1 is not one of the run's 2 classes: '0', '1'")
            name = str(name)
        if isinstance(probability, bool) or not isinstance(probability, (int, float, np.integer, np.floating)):
            raise AttnclfError(f"{asked}: the probability {shown(probability)} is not a number")
        try:
            probability = float(probability)
        except OverflowError:  # (an integer past a float's range: refused below as past 1, or below 0)
            probability = math.inf if probability > 0 else -math.inf
    else:
        raise AttnclfError(f"{asked} takes a class and a probability, ('pos', 0.7) or 'pos=0.7', got "
                           f"{shown(threshold)}")
    refuse_unknown_class(label_names, name, asked, multi_label)
    # 0 would predict the class for every text and 1 for almost none: neither is an operating point (NaN neither).
    if not 0 < probability < 1:
        raise AttnclfError(f"{asked} {shown(name)}={shown(probability)}: the probability must be between 0 and 1, "
                           f"both left out")
    return ClassThreshold(name, list(label_names).index(name), probability)


def applied_thresholds(thresholds: np.ndarray, threshold: ClassThreshold | None) -> np.ndarray:
    """The probability from which each label of a multi-label run is in a text's set: its tuned ``thresholds``
    (thresholds.json), ``threshold``'s label at ``threshold``'s probability instead; a copy, in float64.

    >>> applied_thresholds(np.array([.5, .2]), ClassThreshold("b", 1, .9)).tolist()
    [0.5, 0.9]
    """
    cuts = np.array(thresholds, dtype=np.float64)
    if threshold is not None:
        cuts[threshold.index] = threshold.probability
    return cuts


def tempered_thresholds(thresholds: np.ndarray, temperature: float) -> np.ndarray:
    """A multi-label run's ``thresholds``, tuned on its own sigmoid probabilities, moved onto those of a calibrated
    run (sigmoid(logit / ``temperature``)): each threshold's logit over the temperature, so every probability falls
    on the same side of its label's threshold as before and no label set changes; unchanged at temperature 1 (a
    round trip through the logit could move a threshold by a rounding, and a probability equal to it with it).

    >>> tempered_thresholds(np.array([0.5, 0.8, 1.0]), 2.0).round(3).tolist()
    [0.5, 0.667, 1.0]
    """
    thresholds = np.asarray(thresholds, dtype=np.float64)
    if temperature == 1:
        return thresholds
    with np.errstate(divide="ignore"):  # (a threshold of 0 or 1 has an infinite logit: it stays 0 or 1)
        logits = np.log(thresholds) - np.log1p(-thresholds)
    return 1 / (1 + np.exp(-logits / temperature))


def decided_classes(probabilities: np.ndarray, threshold: ClassThreshold | None,
                    thresholds: np.ndarray | None = None) -> np.ndarray:
    """The class predicted for each row of ``probabilities`` (columns in the run's class order): the most probable,
    or with ``threshold`` its class wherever that class's probability reaches it, else the most probable of the
    others. With a multi-label run's ``thresholds`` (one per label), each row's label set instead, as 0/1 flags:
    every label whose probability reaches its threshold, ``threshold``'s label its probability
    (``applied_thresholds``). The one rule every backend's ``predict``, ``evaluate``, the service and the ONNX
    export's parity answer by.

    >>> decided_classes(np.array([[.6, .3, .1], [.3, .1, .6]]), ClassThreshold("b", 1, .3)).tolist()
    [1, 2]
    >>> decided_classes(np.array([[.6, .3, .1]]), ClassThreshold("a", 0, .7), np.array([.5, .2, .5])).tolist()
    [[0, 1, 0]]
    """
    probabilities = np.asarray(probabilities)
    if thresholds is not None:
        # In float64, as tune_thresholds chose them: a float32 probability equal to its threshold reaches it.
        return (probabilities.astype(np.float64) >= applied_thresholds(thresholds, threshold)).astype(np.int64)
    if threshold is None:
        return probabilities.argmax(axis=-1)
    # Compared in float64, as class_operating_points flags texts: a threshold read off its table flags the same texts.
    flagged = probabilities[..., threshold.index].astype(np.float64) >= threshold.probability
    others = probabilities.astype(np.float64, copy=True)
    others[..., threshold.index] = -np.inf
    return np.where(flagged, threshold.index, others.argmax(axis=-1))


def decided_rows(probabilities: np.ndarray, thresholds: np.ndarray | None) -> np.ndarray:
    """Each text's prediction as a row of its own, by ``decided_classes``: its class (a column of one), or with a
    multi-label run's ``thresholds`` its 0/1 label set, so that a row is right only when all of it is. What a
    check of predictions (the ONNX export's parity, the uniform-attention check) compares, decided as ``predict``
    decides.

    >>> probabilities = np.array([[.2, .8]])
    >>> decided_rows(probabilities, None).tolist(), decided_rows(probabilities, np.array([.5, .5])).tolist()
    ([[1]], [[0, 1]])
    """
    decided = decided_classes(probabilities, None, thresholds)
    return decided if thresholds is not None else decided[:, None]


def _scored_fields(probabilities: np.ndarray, label_names: list[str], tokens: list[str],
                   attention: np.ndarray | None, counts: tuple[int, int] | None) -> dict:
    """The fields ``Prediction`` and ``LabelSetPrediction`` share, from one row of scores: each class's probability
    by name, the tokens and their attention (plain floats, for JSON), and the text's ``token_counts``.

    >>> _scored_fields(np.array([0.25, 0.75]), ["neg", "pos"], [], None, (1, 4))
    {'probabilities': {'neg': 0.25, 'pos': 0.75}, 'tokens': [], 'attention': None, 'unknown_tokens': 1, \
'tokens_read': 4}
    """
    unknown_tokens, tokens_read = (None, None) if counts is None else counts
    return {"probabilities": {name: float(p) for name, p in zip(label_names, probabilities)}, "tokens": tokens,
            "attention": None if attention is None else [float(w) for w in attention],
            "unknown_tokens": unknown_tokens, "tokens_read": tokens_read}


_SCORED_FIELDS = ("probabilities", "tokens", "attention", "unknown_tokens", "tokens_read")  # (_scored_fields's keys)


def _scored_dict(prediction: "Prediction | LabelSetPrediction") -> dict:
    """The fields ``_scored_fields`` fills, by name, in its order: what a prediction's ``to_dict`` gives after its
    label or labels. (The two classes declare these fields each, after their own first ones: a shared base class
    would put them first, before the label, and change both positional constructors.)

    >>> _scored_dict(Prediction("pos", 0.75, {"pos": 0.75}, tokens_read=3))
    {'probabilities': {'pos': 0.75}, 'tokens': [], 'attention': None, 'unknown_tokens': None, 'tokens_read': 3}
    """
    return {name: getattr(prediction, name) for name in _SCORED_FIELDS}


@dataclass
class Prediction:
    """One text's prediction.

    ``attention`` holds the pooling layer's weight per token (aligned with
    ``tokens``): where the pooling layer looked, not why the model decided.
    It is None for models that do not pool by attention.

    ``unknown_tokens`` of the ``tokens_read`` tokens the model read (after
    truncation) are ``<unk>``: words its vocabulary lacks, which tell it
    nothing, so a confident answer on a text of many rests on the others
    (``unknown_tokens_note`` says so). None where they were not counted; 0 and
    0 for an empty text, none of which the model read (``token_counts``).
    """

    label: str
    confidence: float
    probabilities: dict[str, float]
    # (out of the repr: a notebook echoing a 512-token text's prediction would spell out 14,000 characters)
    tokens: list[str] = field(default_factory=list, repr=False)
    attention: list[float] | None = field(default=None, repr=False)
    unknown_tokens: int | None = None
    tokens_read: int | None = None

    @classmethod
    def from_scores(cls, probabilities: np.ndarray, label_names: list[str], tokens: list[str],
                    attention: np.ndarray | None, counts: tuple[int, int] | None = None,
                    threshold: ClassThreshold | None = None) -> "Prediction":
        """The prediction of one probability row (columns in ``label_names`` order); ``counts``: the text's
        ``token_counts``; ``threshold``: the class chosen by it (``decided_classes``), not the most probable.

        >>> Prediction.from_scores(np.array([0.2, 0.8]), ["neg", "pos"], ["fine"], None).label
        'pos'
        >>> Prediction.from_scores(np.array([0.7, 0.3]), ["neg", "pos"], [], None,
        ...                        threshold=ClassThreshold("pos", 1, 0.25)).label
        'pos'
        """
        best = int(decided_classes(probabilities, threshold))
        return cls(label=label_names[best], confidence=float(probabilities[best]),
                   **_scored_fields(probabilities, label_names, tokens, attention, counts))

    def top_tokens(self, k: int = 3) -> list[tuple[str, float]]:
        """The ``k`` most attended tokens with their weights, most first (none without attention).

        >>> Prediction("pos", 0.9, {}, tokens=["a", "fine", "film"], attention=[0.1, 0.7, 0.2]).top_tokens(2)
        [('fine', 0.7), ('film', 0.2)]
        """
        if self.attention is None:
            return []
        order = np.argsort(-np.asarray(self.attention), kind="stable")[:k]
        return [(self.tokens[i], float(self.attention[i])) for i in order]

    def to_dict(self) -> dict:
        """Every field by name, as `attnclf predict` prints it a JSON line.

        >>> Prediction("pos", 0.75, {"neg": 0.25, "pos": 0.75}).to_dict()["probabilities"]
        {'neg': 0.25, 'pos': 0.75}
        """
        return {"label": self.label, "confidence": self.confidence, **_scored_dict(self)}


def label_set(probabilities: np.ndarray, thresholds: np.ndarray, threshold: ClassThreshold | None = None) -> list[int]:
    """The labels (indices) of one row of per-label probabilities that reach their thresholds (``threshold``'s label
    its probability: ``decided_classes``), most probable first.

    >>> label_set(np.array([0.6, 0.1, 0.9]), np.array([0.5, 0.5, 0.5]))
    [2, 0]
    """
    order = np.argsort(-probabilities, kind="stable")
    flagged = decided_classes(probabilities, threshold, thresholds)
    return [int(i) for i in order if flagged[i]]


@dataclass
class LabelSetPrediction:
    """One text's prediction by a multi-label model.

    ``labels`` holds every label whose probability reaches its threshold
    (tuned on validation, see ``thresholds.json``), most probable first; it
    may be empty. ``probabilities`` are independent per label (a sigmoid
    each), so they need not sum to 1. ``tokens``, ``attention``,
    ``unknown_tokens`` and ``tokens_read`` are as in ``Prediction``.
    """

    labels: list[str]
    probabilities: dict[str, float]
    # (out of the repr: a notebook echoing a 512-token text's prediction would spell out 14,000 characters)
    tokens: list[str] = field(default_factory=list, repr=False)
    attention: list[float] | None = field(default=None, repr=False)
    unknown_tokens: int | None = None
    tokens_read: int | None = None

    @classmethod
    def from_scores(cls, probabilities: np.ndarray, thresholds: np.ndarray, label_names: list[str],
                    tokens: list[str], attention: np.ndarray | None, counts: tuple[int, int] | None = None,
                    threshold: ClassThreshold | None = None) -> "LabelSetPrediction":
        """The prediction of one row of per-label probabilities; ``counts``: the text's ``token_counts``;
        ``threshold``: one label's in place of its tuned one (``decided_classes``).

        >>> LabelSetPrediction.from_scores(np.array([0.6, 0.1, 0.9]), np.array([0.5, 0.5, 0.5]),
        ...                                ["a", "b", "c"], [], None).labels
        ['c', 'a']
        """
        return cls(labels=[label_names[i] for i in label_set(probabilities, thresholds, threshold)],
                   **_scored_fields(probabilities, label_names, tokens, attention, counts))

    def to_dict(self) -> dict:
        """Every field by name, as `attnclf predict` prints it a JSON line.

        >>> LabelSetPrediction(["rock"], {"jazz": 0.1, "rock": 0.8}).to_dict()["labels"]
        ['rock']
        """
        return {"labels": self.labels, **_scored_dict(self)}


def predictions(texts: list[str], probabilities: np.ndarray, ids: list[list[int]], attention: list[np.ndarray | None],
                label_names: list[str], tokenizer: Tokenizer, tokens: bool = True,
                thresholds: np.ndarray | None = None,
                threshold: ClassThreshold | None = None) -> list[Prediction] | list[LabelSetPrediction]:
    """A backend's run of ``texts`` (probabilities, token ids and pooling weights per text) as what its ``predict``
    returns: a ``Prediction`` per text, each its class by ``threshold`` where given (``decided_classes``), or with
    ``thresholds`` (a multi-label run's) a ``LabelSetPrediction``, ``threshold``'s label at its probability; the
    tokens are ``tokenizer.token_strings(ids)``, and ``tokens=False`` leaves out them and the attention.

    >>> from attnclf.text import TokenizerConfig
    >>> tokenizer = Tokenizer.train(["a good film"], TokenizerConfig(min_frequency=1))
    >>> [p.label for p in predictions(["a zz"], np.array([[0.2, 0.8]]), [[2, UNK_ID]], [None], ["neg", "pos"],
    ...                               tokenizer)]
    ['pos']
    """
    tokens = true_or_false(tokens, "tokens")  # ("false" is truthy: it would answer what it was asked to leave out)
    counts = [token_counts(row, text, tokenizer) for row, text in zip(ids, texts)]
    strings = [tokenizer.token_strings(row) if tokens else [] for row in ids]
    attention = attention if tokens else [None] * len(ids)
    if thresholds is not None:
        return [LabelSetPrediction.from_scores(p, thresholds, label_names, t, a, c, threshold)
                for p, t, a, c in zip(probabilities, strings, attention, counts)]
    return [Prediction.from_scores(p, label_names, t, a, c, threshold)
            for p, t, a, c in zip(probabilities, strings, attention, counts)]
