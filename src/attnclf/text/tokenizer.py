"""Word-level and BPE tokenizers, saved in Hugging Face ``tokenizers`` format.

Both reserve id 0 for ``<pad>`` and id 1 for ``<unk>``. Cleaning happens
before tokenisation (see ``cleaning``); truncation happens after, here, because
``tokenizers`` only keeps the head or the tail and long reviews keep their
verdict at both ends.

BPE marks the first piece of each word with ``▁`` (``WORD_START``), as
SentencePiece does, and trains the same tokenizer from the same texts in every
process. Runs saved before marked the other pieces with ``##`` instead; they
load and encode as they did. Both kinds show their pieces the same way
(``Tokenizer.token_strings``): a word's first piece bare, the others after ``##``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from dataclasses import InitVar, asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from ..checks import whole_number
from ..errors import AttnclfError, DataError, RunDirError, shown
from .cleaning import CleaningConfig, clean

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
SPECIALS = [PAD, UNK]  # by their ids
# BPE marks where a word starts, not where it goes on ("##", WordPiece's mark, which BPE runs used before): tokenizers'
# BpeTrainer numbers the "##" pieces in the order of a hash map seeded afresh by each process and breaks ties between
# equally frequent merges by those numbers, so the same texts trained another tokenizer in every process
# (huggingface/tokenizers#1794). With no mark of its own to add, every piece it starts from is a character of the
# alphabet (WORD_START one of them), which it numbers in sorted order: its ids and merges are the same in any process.
WORD_START = "\u2581"  # "▁", SentencePiece's
CONTINUING = "##"  # how a piece after a word's first is shown, and was stored by BPE runs from before WORD_START
TRUNCATIONS = ("head", "tail", "head_tail")
# A text longer than this many characters per kept token is read by its two ends, for the tokens truncation keeps:
# read whole, a 20 MB text took 8 s and 2.8 GB to keep 800 tokens.
_CHARS_PER_TOKEN = 16
# Bytes of tokenizer.json a word takes at the most: 23 in a word-level vocabulary of IMDB reviews, 73 in a BPE one
# with its merges; a word of a thousand characters, JSON-escaped, fits.
_MOST_BYTES_PER_WORD = 4096
# Characters next to a cut whose tokens are not trusted: cleaning may see a "<br />" or a word there only in part.
_MARGIN = 64


@dataclass
class TokenizerConfig:
    """How a run reads text into tokens. A value that cannot work is refused as it is built, in one line naming its
    field (``tokenizer max_len``), or the field as ``named`` spells it (the command line: by its flag).

    >>> TokenizerConfig(max_len=0, named=lambda field: f"--{field.replace('_', '-')}")
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: --max-len must be at least 1, got 0
    """

    kind: str = "word"  # word | bpe
    vocab_size: int = 30000
    min_frequency: int = 2
    max_len: int = 256
    truncation: str = "head_tail"  # head | tail | head_tail
    cleaning: CleaningConfig = field(default_factory=CleaningConfig)
    # Not a setting (config.json and asdict leave it out), as TrainConfig's: how the checks name a field. None is
    # "tokenizer FIELD", not given as the default itself: replace() reads the default back off an instance.
    named: InitVar[Callable[[str], str] | None] = None

    def __post_init__(self, named: Callable[[str], str] | None) -> None:
        named = named or (lambda name: f"tokenizer {name}")
        for name, allowed in (("kind", ("word", "bpe")), ("truncation", TRUNCATIONS)):
            value = getattr(self, name)
            if not (isinstance(value, str) and value in allowed):  # (an array's `in` is elementwise, and ambiguous)
                raise AttnclfError(f"{named(name)} must be one of {', '.join(allowed)}, got {shown(value)}")
            setattr(self, name, str(value))  # (numpy's strings are strings too)
        if not isinstance(self.cleaning, CleaningConfig):  # (else refused only once a text is cleaned)
            raise AttnclfError(f"{named('cleaning')} must be a CleaningConfig, got {shown(self.cleaning)}")
        for name, low in (("vocab_size", 3), ("min_frequency", 1), ("max_len", 1)):  # 3: <pad>, <unk> and a word
            count = whole_number(getattr(self, name))
            if count is None:  # (numpy's integers, from a parameter grid, are counts too; 2.5 is not)
                raise AttnclfError(f"{named(name)} must be a whole number, got {shown(getattr(self, name))}")
            if count < low:
                raise AttnclfError(f"{named(name)} must be at least {low}, got {shown(count)}")
            setattr(self, name, count)

    def to_dict(self) -> dict:
        return asdict(self)

    def keyed(self) -> dict:
        """``to_dict`` as cache keys hash it, its cleaning as it was recorded before settings added since
        (``CleaningConfig.keyed``): a token-cache run made then keeps its key and its caches.

        >>> "split_cjk" in TokenizerConfig().keyed()["cleaning"], "split_cjk" in TokenizerConfig.from_dict({}).keyed()[
        ...     "cleaning"]
        (True, False)
        """
        return self.to_dict() | {"cleaning": self.cleaning.keyed()}

    @classmethod
    def from_dict(cls, data: dict, file: str | Path | None = None) -> "TokenizerConfig":
        """The settings ``to_dict`` wrote; ``file``, the JSON file they were read from (a run's config.json, an
        export's export.json), is named by the one line that refuses settings out of shape.

        >>> TokenizerConfig.from_dict({"kind": "bpe", "cleaning": {"lowercase": False}}).cleaning.lowercase
        False
        >>> TokenizerConfig.from_dict({"colour": "blue"}, file="runs/a/config.json")
        Traceback (most recent call last):
        ...
        attnclf.errors.RunDirError: runs/a/config.json: tokenizer has no setting 'colour'; its settings are kind, \
vocab_size, min_frequency, max_len, truncation, cleaning
        """
        try:
            data = dict(_settings(data, cls, "tokenizer"))
            cleaning = _settings(data.get("cleaning", {}), CleaningConfig, "tokenizer cleaning")
            # A run saved before a cleaning setting was added read texts without it: it reads them so still.
            data["cleaning"] = CleaningConfig.from_recorded(cleaning)
            return cls(**data)
        except AttnclfError as exc:
            if file is None:
                raise
            raise RunDirError(f"{file}: {exc}") from None


def _settings(data, kind: type, what: str) -> dict:
    """``data`` if it is a JSON object of ``kind``'s fields; refused in one line naming ``what`` otherwise (an unknown
    field would be a TypeError, as would a string where the object belongs)."""
    names = [f.name for f in fields(kind)]
    if not isinstance(data, dict):
        raise AttnclfError(f"{what} must be a JSON object of {', '.join(names)}, got {shown(data)}")
    unknown = next((key for key in data if key not in names), None)
    if unknown is not None:
        raise AttnclfError(f"{what} has no setting {shown(unknown)}; its settings are {', '.join(names)}")
    return data


def _foreign_part(saved: dict) -> str | None:
    """The first part of a tokenizer.json (as tokenizers writes it, ``saved``) that attnclf's tokenizers never have,
    or None: they split on whitespace (BPE then marks each word's start, ``WORD_START``) and do the rest in Python
    (cleaning, truncation). A normalizer or splitting pattern of another file's would run on every text read, and
    one made to backtrack panics in tokenizers' regular expressions; BPE dropout would answer at random.

    >>> _foreign_part({"normalizer": {"type": "Lowercase"}})
    'a normalizer (Lowercase)'
    >>> _foreign_part({"pre_tokenizer": {"type": "Whitespace"}, "model": {"type": "WordLevel"}})
    """
    def kind(part) -> str:
        return shown(part.get("type") if isinstance(part, dict) else part, write=str)

    pre = saved.get("pre_tokenizer")
    steps = pre.get("pretokenizers") if isinstance(pre, dict) and pre.get("type") == "Sequence" else [pre]
    model = saved.get("model") or {}
    for part, named in (("normalizer", "a normalizer"), ("post_processor", "a post-processor")):
        if saved.get(part) is not None:
            return f"{named} ({kind(saved[part])})"
    if [kind(step) for step in steps or [None]] not in (["Whitespace"], ["Whitespace", "Metaspace"]):
        return f"a pre-tokenizer of its own ({', '.join(kind(step) for step in steps or [None])})"
    if saved.get("truncation") is not None or saved.get("padding") is not None:
        return f"{'truncation' if saved.get('truncation') is not None else 'padding'} of its own"
    if model.get("type") not in ("WordLevel", "BPE") or model.get("dropout") is not None:
        return f"a model of its own ({kind(model)}{', with dropout' if model.get('dropout') is not None else ''})"
    return None


def truncate(ids: list[int], max_len: int, how: str) -> list[int]:
    """Keep at most ``max_len`` ids: the head, the tail, or a quarter head + three quarters tail.

    >>> truncate(list(range(10)), 4, "head_tail")
    [0, 7, 8, 9]
    """
    if len(ids) <= max_len:
        return ids
    head = _kept_head(max_len, how)
    return ids[:head] + ids[len(ids) - (max_len - head):]


def _kept_head(max_len: int, how: str) -> int:
    """How many of the ``max_len`` ids ``truncate`` keeps from the start of a longer text; the rest end it."""
    return {"head": max_len, "tail": 0}.get(how, max_len // 4)


def _last_space(text: str, before: int) -> int:
    """The position of the last whitespace before ``before`` (0 if none: nothing before it can be trusted)."""
    return max(text.rfind(space, 0, before) for space in " \n\t\r") + 1


def _first_space(text: str, after: int) -> int:
    """The position of the first whitespace at or after ``after`` (the text's length if none)."""
    found = [position for space in " \n\t\r" if (position := text.find(space, after)) >= 0]
    return min(found, default=len(text))


def shown_piece(token: str) -> str:
    """How a ``WORD_START``-marked BPE piece is shown: a word's first piece bare, a later one after ``##`` (as BPE runs
    from before stored them, and WordPiece shows them); ``<pad>``, ``<unk>`` and a lone mark as they are.

    >>> [shown_piece(token) for token in ["\u2581terr", "ible", "\u2581.", "<unk>", "\u2581"]]
    ['terr', '##ible', '.', '<unk>', '▁']
    """
    if token in (PAD, UNK, WORD_START):  # (a lone mark: a word whose first character has no merge with it)
        return token
    return token[len(WORD_START):] if token.startswith(WORD_START) else CONTINUING + token


def cut_position(tokens_cut: int | None, max_len: int, how: str) -> int | None:
    """Where ``truncate`` cut a text that lost ``tokens_cut`` ids (None: some, uncounted): the index among the
    ``max_len`` ids it kept before which the cut ids stood (None: nothing was cut).

    >>> cut_position(6, 4, "head_tail"), cut_position(6, 4, "head"), cut_position(None, 4, "tail"), cut_position(0, 4, "head")
    (1, 4, 0, None)
    """
    return None if tokens_cut == 0 else _kept_head(max_len, how)


# Runs of characters of scripts written without spaces between words, long enough to hold more than one word: the
# word tokenizer takes each run, often a whole clause, as a word. Han and kana (Chinese, Japanese) are such runs only
# where split_cjk is off; Thai, Lao, Khmer and Myanmar always are.
_UNSPACED_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff"
_UNSPACED_OTHERS = "\u0e00-\u0eff\u1780-\u17ff\u1000-\u109f"
_UNSPACED_RUN = {False: re.compile(f"[{_UNSPACED_CJK}{_UNSPACED_OTHERS}]{{4,}}"),
                 True: re.compile(f"[{_UNSPACED_OTHERS}]{{4,}}")}
# (BPE keeps whole clauses as pieces while its vocabulary has room: on 216 generated Chinese reviews, tested on 120
# of other sentences, its default 30,000 pieces scored chance, as the word tokenizer did, and 100 pieces 69%.)
# The share of training texts holding such runs from which a word-level run is warned: a few Chinese names among
# English reviews read fine as words.
_UNSPACED_SHARE = 0.05


def unspaced_text_warning(texts: Sequence[str], config: TokenizerConfig, begun_before: Collection[str] = (),
                          bpe_by: str = "--tokenizer bpe", vocab_size_by: str = "--vocab-size") -> str | None:
    """A warning for a word-level tokenizer trained on ``texts`` of which many are written without spaces between
    words (Thai; Chinese and Japanese too with ``split_cjk`` off): it reads a run of such characters, often a clause,
    as one word that few other texts share, and an unseen one as ``<unk>``; None if there is nothing to warn of.
    ``begun_before``: the cleaning settings the run predates (``RunSettings.recorded_without``): one begun before
    split_cjk reads Chinese unsplit as it began, not for a flag its command gave. ``bpe_by`` and ``vocab_size_by``:
    how the user sets the tokenizer and its vocabulary size (the command line's flags; the estimator's arguments).

    >>> unspaced_text_warning(["สินค้าดีมาก", "a good film"], TokenizerConfig())[:57]
    'warning: 1 of the 2 training texts (50%) hold Thai, Lao, '
    """
    if config.kind != "word":
        return None
    split = config.cleaning.split_cjk
    found = [match.group() for text in texts if (match := _UNSPACED_RUN[split].search(text))]
    if not texts or len(found) < _UNSPACED_SHARE * len(texts):
        return None
    scripts, fix = ("Thai, Lao, Khmer or Burmese", "") if split else (
        "Chinese, Japanese or Thai", "; this run, begun before split_cjk, reads them as it began, each run one word "
        "(a new run reads each character as a word)" if "split_cjk" in begun_before else
        "; without --no-split-cjk each character is a word")
    return (f"warning: {len(found):,} of the {len(texts):,} training texts ({len(found) / len(texts):.0%}) hold "
            f"{scripts} text with no spaces between words (such as {shown(found[0], most=20)}), "
            f"which the word tokenizer reads as one token per run: few texts share them, and unseen "
            f"ones read as <unk>{fix}; {bpe_by} cuts them into pieces texts share, given a {vocab_size_by} too "
            f"small to hold whole clauses")


def _untrained(config: TokenizerConfig) -> tuple[HFTokenizer, trainers.Trainer]:
    """The empty tokenizer of ``config.kind``, splitting and marking words as ``Tokenizer.train`` needs, and the
    trainer that learns its vocabulary."""
    if config.kind == "word":
        backend = HFTokenizer(models.WordLevel(unk_token=UNK))
        trainer = trainers.WordLevelTrainer(
            vocab_size=config.vocab_size, min_frequency=config.min_frequency, special_tokens=SPECIALS
        )
        backend.pre_tokenizer = pre_tokenizers.Whitespace()
    elif config.kind == "bpe":
        # No continuing_subword_prefix nor end_of_word_suffix: either makes the trainer's pieces depend on the
        # process (WORD_START).
        backend = HFTokenizer(models.BPE(unk_token=UNK))
        trainer = trainers.BpeTrainer(
            vocab_size=config.vocab_size, min_frequency=config.min_frequency,
            special_tokens=SPECIALS, show_progress=False,
        )
        # Words split as the word tokenizer splits them (the words of word vectors), each then starting with
        # WORD_START ("don't": "▁don", "▁'", "▁t"); offsets stay the word's, for _trusted.
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Whitespace(),
            pre_tokenizers.Metaspace(replacement=WORD_START, prepend_scheme="always", split=True)])
        backend.decoder = decoders.Metaspace(replacement=WORD_START, prepend_scheme="always", split=True)
    return backend, trainer


class Tokenizer:
    """Text to ids and back, with the cleaning and truncation the model was trained with.

    >>> tok = Tokenizer.train(["a good film", "a bad film"], TokenizerConfig(min_frequency=1))
    >>> tok.encode(["a good film"])[0] == tok.encode(["A GOOD film"])[0]
    True
    """

    def __init__(self, backend: HFTokenizer, config: TokenizerConfig):
        self.backend = backend
        # A text's literal "<pad>" or "<unk>" is words like any other: training reads them so, and tokenizers would
        # otherwise encode them as the special ids (a "<pad>" in a review masked from the model). Not saved in
        # tokenizer.json, so set on every load.
        self.backend.encode_special_tokens = True
        self.config = config
        # Known by its decoder: a BPE tokenizer.json from before WORD_START stores "##" pieces (and a WordPiece decoder).
        self.marks_word_starts = isinstance(backend.decoder, decoders.Metaspace)

    @classmethod
    def train(cls, texts: Iterable[str], config: TokenizerConfig = TokenizerConfig()) -> "Tokenizer":
        """A tokenizer of ``config.kind`` learned from ``texts`` cleaned as ``config.cleaning`` says: ``<pad>``,
        ``<unk>``, then at most ``config.vocab_size`` tokens in all, each seen at least ``config.min_frequency``
        times; a ``DataError`` if no token is.

        >>> tok = Tokenizer.train(["a good film", "a bad film"], TokenizerConfig(min_frequency=2))
        >>> tok.token_strings(range(tok.vocab_size))
        ['<pad>', '<unk>', 'a', 'film']
        """
        backend, trainer = _untrained(config)
        count = 0

        def cleaned():
            nonlocal count
            for text in texts:
                count += 1
                yield clean(text, config.cleaning)

        backend.train_from_iterator(cleaned(), trainer=trainer)
        if backend.get_vocab_size() <= len(SPECIALS):  # every text would read as <unk>
            texts_hold = "the one training text holds" if count == 1 else f"the {count:,} training texts hold"
            raise DataError(f"{texts_hold} no word seen at least {config.min_frequency} time(s), so the tokenizer "
                            f"learned nothing; lower --min-frequency (min_frequency= in Python) or give more texts")
        return cls(backend, config)

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size()

    def encode(self, texts: Sequence[str], max_len: int | None = None) -> list[list[int]]:
        """Ids per text, truncated to ``max_len`` (default ``config.max_len``); a text with no token to read
        (``reads_nothing``) becomes ``[<unk>]``, so that the model has one to read.

        Windowed models read more than ``config.max_len`` tokens (see ``windows``).

        >>> tokenizer = Tokenizer.train(["a good film", "a bad film"], TokenizerConfig(min_frequency=1))
        >>> tokenizer.encode(["a good film", "an unseen word", ""]), tokenizer.encode(["a good film"], max_len=2)
        ([[2, 5, 3], [1, 1, 1], [1]], [[5, 3]])
        """
        return [ids for ids, _ in self.encode_counting_cuts(texts, max_len)]

    def reads_nothing(self, text: str) -> bool:
        """Whether ``text`` holds no token once cleaned (empty, blank, or emptied by the cleaning), which ``encode``
        gives the one ``<unk>`` in its place: every such text reads the same.

        >>> tokenizer = Tokenizer.train(["a good film"], TokenizerConfig(min_frequency=1))
        >>> [tokenizer.reads_nothing(text) for text in ["", " \\t\\n", "zzz"]]
        [True, True, False]
        """
        return not self.backend.encode(clean(text, self.config.cleaning), add_special_tokens=False).ids

    def encode_counting_cuts(self, texts: Sequence[str],
                             max_len: int | None = None) -> list[tuple[list[int], int | None]]:
        """``encode``'s ids per text, each with how many tokens truncation cut: 0 for none, None for some, uncounted.

        None is a text read by its ends (``_ends``): counting what lies between them would mean tokenising it whole,
        which reading its ends avoids (explaining a 64 MB text took 46 s and 8 GB that way; BENCHMARKS.md).

        >>> tokenizer = Tokenizer.train(["a b c"], TokenizerConfig(min_frequency=1, max_len=2, truncation="head"))
        >>> tokenizer.encode_counting_cuts(["a b c", "c", "a " * 10_000])
        [([2, 3], 1), ([4], 0), ([2, 2], None)]
        """
        max_len = max_len or self.config.max_len
        ids: list[list[int] | None] = [self._ends(text, max_len) for text in texts]
        cuts: list[int | None] = [None] * len(texts)
        whole = [i for i, found in enumerate(ids) if found is None]
        # Only the ids are read: encode_batch_fast skips the offsets, the same ids 23% sooner on IMDB's reviews
        # (BENCHMARKS.md, where a small model's training time goes); tokenizers has it from 0.20.0, our floor.
        encodings = self.backend.encode_batch_fast([clean(texts[i], self.config.cleaning) for i in whole],
                                                   add_special_tokens=False)
        for i, encoding in zip(whole, encodings):
            ids[i] = truncate(encoding.ids or [UNK_ID], max_len, self.config.truncation)
            cuts[i] = max(len(encoding.ids) - max_len, 0)
        return list(zip(ids, cuts))

    def encode_arrays(self, texts: Sequence[str], max_len: int | None = None,
                      chunk: int = 2048) -> Iterator[np.ndarray]:
        """``encode``'s ids as int32 arrays, tokenising ``chunk`` texts at a time, for corpora: one call over all of
        IMDB's 81,920 training and unlabelled reviews held 3.6 GB of the tokenizer's objects and Python ints, a
        chunk at a time into arrays 0.65 GB (cut into pretraining's pieces; BENCHMARKS.md, `attnclf pretrain`).

        >>> tokenizer = Tokenizer.train(["a b c"], TokenizerConfig(min_frequency=1))
        >>> [ids.tolist() for ids in tokenizer.encode_arrays(["a b", "c"])]
        [[2, 3], [4]]
        """
        for start in range(0, len(texts), chunk):
            for ids in self.encode(texts[start:start + chunk], max_len):
                yield np.asarray(ids, dtype=np.int32)

    def _ends(self, text: str, max_len: int) -> list[int] | None:
        """The ids ``truncate`` keeps of a long text, tokenising only its ends; None for a text to read whole.

        Each end is cut at a whitespace (no word straddles it) and cleaned and tokenised alone, its tokens within
        ``_MARGIN`` of the cut dropped; ends that then hold too few tokens are read four times longer. Too few is
        also exactly ``max_len`` in all: more trusted tokens than that prove, from the ends alone, that truncation
        cut some, which ``encode_counting_cuts`` reports without counting them.
        """
        head_needed = _kept_head(max_len, self.config.truncation)
        tail_needed = max_len - head_needed
        span = _CHARS_PER_TOKEN * max_len
        while 2 * (span + _MARGIN) < len(text):
            head, tail = [], []
            if head_needed:
                head = self._trusted(text[:_last_space(text, span + _MARGIN)], at_start=True)
            if tail_needed:
                start = _first_space(text, len(text) - span - _MARGIN)
                tail = self._trusted(text[start:], at_start=False)
            if len(head) >= head_needed and len(tail) >= tail_needed and len(head) + len(tail) > max_len:
                return head[:head_needed] + tail[len(tail) - tail_needed:]
            span *= 4
        return None

    def _trusted(self, piece: str, at_start: bool) -> list[int]:
        """The ids of a cut ``piece`` of a text, less those within ``_MARGIN`` characters of the cut."""
        cleaned = clean(piece, self.config.cleaning)
        encoding = self.backend.encode(cleaned, add_special_tokens=False)
        if at_start:  # the cut ends the piece
            return [i for i, (_, end) in zip(encoding.ids, encoding.offsets) if end <= len(cleaned) - _MARGIN]
        return [i for i, (start, _) in zip(encoding.ids, encoding.offsets) if start >= _MARGIN]

    def tokens(self, texts: Sequence[str]) -> list[list[str]]:
        """The tokens the model sees, aligned with ``encode``, as ``token_strings`` shows them.

        >>> Tokenizer.train(["a good film"], TokenizerConfig(min_frequency=1)).tokens(["A good, GOOD film"])
        [['a', 'good', '<unk>', 'good', 'film']]
        """
        return [self.token_strings(ids) for ids in self.encode(texts)]

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        """The tokens of ``ids`` as explanations and predictions show them. A BPE tokenizer's: a word's first piece
        bare, the others after ``##``, whichever way it stores them (``shown_piece``), so that its pieces read as
        those of BPE runs from before ``WORD_START`` and no word carries a mark.

        >>> tok = Tokenizer.train(["not watchable", "unable", "unwatched"], TokenizerConfig(kind="bpe", min_frequency=1))
        >>> ids = tok.encode(["unwatchable"])[0]
        >>> tok.token_strings(ids), [tok.backend.id_to_token(i) for i in ids]
        (['unwatch', '##able'], ['\u2581unwatch', 'able'])
        """
        stored = [self.backend.id_to_token(i) for i in ids]
        return [shown_piece(token) for token in stored] if self.marks_word_starts else stored

    def vocabulary(self) -> dict[str, int]:
        """Each token's id by the string ``token_strings`` shows, to match the vocabulary with words from elsewhere
        (word vectors): a BPE word's first piece is the word, a later piece no word, however the tokenizer marks them.

        >>> tok = Tokenizer.train(["good film"] * 2, TokenizerConfig(kind="bpe", vocab_size=30, min_frequency=1))
        >>> tok.vocabulary()["good"] == tok.backend.token_to_id("\u2581good")
        True
        """
        stored = self.backend.get_vocab()
        if not self.marks_word_starts:
            return stored
        # A later piece can show as a word's first piece does ("#" after "##" and the word "\u2581###" both show "###"):
        # the word's keeps the form, not whichever get_vocab (a hash map's order, per process) happens to list last.
        later = {shown_piece(token): i for token, i in stored.items() if not token.startswith(WORD_START)}
        return later | {shown_piece(token): i for token, i in stored.items() if token.startswith(WORD_START)}

    def save(self, path: str | Path) -> None:
        """Write ``path`` atomically: a reader sees the old file or the whole new one."""
        from ..rundir import written_atomically

        with written_atomically(path) as tmp:
            try:
                self.backend.save(tmp)
            except Exception as exc:  # tokenizers raises a bare Exception for a full disk or a file-size limit too
                raise OSError(f"{path}: cannot write the tokenizer ({exc})") from None

    @classmethod
    def load(cls, path: str | Path, config: TokenizerConfig, words: int | None = None) -> "Tokenizer":
        """The tokenizer ``save`` wrote to ``path``, reading as ``config`` says. ``words``: the vocabulary of the model
        it is for, which it must have; a file larger than a tokenizer of so many words takes is refused before it is
        parsed (it may be gigabytes).

        >>> # Tokenizer.load("runs/demo/tokenizer.json", TokenizerConfig(), words=20_000).vocab_size   # -> 20000
        """
        if words is not None and (size := Path(path).stat().st_size) > _MOST_BYTES_PER_WORD * words + 1_000_000:
            raise RunDirError(f"{path} is {size / 1e6:,.1f} MB, more than a tokenizer of the model's {words:,} words "
                              f"takes: not this model's tokenizer")
        try:
            backend = HFTokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
            raise RunDirError(f"{path}: not a valid tokenizer.json ({exc})") from None
        foreign = _foreign_part(json.loads(backend.to_str()))
        if foreign is not None:
            raise RunDirError(f"{path}: {foreign}, which attnclf's tokenizers never have: not a tokenizer attnclf "
                              f"wrote")
        tokenizer = cls(backend, config)
        if words is not None and tokenizer.vocab_size != words:  # another model's: its ids would index other words
            raise RunDirError(f"{path} has {tokenizer.vocab_size:,} words and the model {words:,}: not this model's "
                              f"tokenizer")
        return tokenizer

