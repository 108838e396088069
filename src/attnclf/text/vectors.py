"""Word vectors: counted from unlabelled text, read and written as word2vec text, copied into a model.

``count_vectors`` is the counting route to word embeddings (Levy, Goldberg &
Dagan 2015): co-occurrences within a window, weighted by 1 / distance;
positive PMI with the context distribution smoothed (counts ** 0.75); a
truncated SVD, ``U * sqrt(S)``. On one CPU core it turns IMDB's 75,000
training and unlabelled reviews into 64-dimensional vectors in under two
minutes, where masked-token pretraining needs hours, and starting SST-2's
model from them lifts validation by 4 points (BENCHMARKS.md). The
words are split as the ``word`` tokenizer splits them with its default cleaning.

The file format is word2vec's text format (a ``count dim`` header line, then
``word v1 ... vdim`` per line), which gensim, fastText (``.vec``) and GloVe
(without the header) also use, so vectors from elsewhere load too.

>>> vectors = count_vectors(["a good film", "a great film", "a bad film", "a dull film"] * 20, dim=2, min_count=1)
>>> vectors.dim, "film" in vectors.index
(2, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..checks import by_field, whole_number
from ..errors import DataError, shown
from ..prediction import check_texts
from ..rundir import atomic_write_bytes
from .cleaning import CleaningConfig, clean, unicode_normalized, unicode_problem
from .tokenizer import PAD_ID, UNK_ID, Tokenizer, TokenizerConfig


@dataclass
class WordVectors:
    """``vectors[i]`` is the vector of ``words[i]``."""

    words: list[str]
    vectors: np.ndarray  # (words, dim) float32
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if np.ndim(self.vectors) != 2 or len(self.vectors) != len(self.words):
            raise DataError(f"word vectors need one row per word: {len(self.words)} words, vectors of shape "
                            f"{np.shape(self.vectors)}")
        # A word listed twice (a cased file lower-cased: "The", then "THE") keeps its first vector: word2vec and
        # fastText list words by frequency, so the first is the most trained, and gensim keeps it too.
        self.index = {}
        for i, word in enumerate(self.words):
            self.index.setdefault(word, i)

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    def save(self, path: str | Path) -> None:
        """Write word2vec text format, atomically; vectors ``load`` could not read back are refused instead."""
        if not self.words or self.dim < 1:
            raise DataError(f"no vectors to write: {len(self.words)} words of {self.dim} dimensions")
        for word in self.words:  # the format ends a word at a space, a line at a line break; UTF-8 takes no half pairs
            if not word or any(c in word for c in " \n\r"):
                raise DataError(f"word {shown(word)} is empty or holds a space or line break, which word2vec text "
                                f"cannot store")
            if problem := unicode_problem(word):
                raise DataError(f"word {shown(word)} is {problem}")
        with np.errstate(over="ignore"):  # load reads float32; what overflows it is the finding, below
            numbers = np.asarray(self.vectors, dtype=np.float32)
        if not np.isfinite(numbers).all():
            row = int(np.argwhere(~np.isfinite(numbers))[0][0])
            raise DataError(f"the vector of {shown(self.words[row])} holds a number that is not finite in float32")
        lines = [f"{len(self.words)} {self.dim}"]
        lines += [word + " " + " ".join(f"{v:.6g}" for v in row) for word, row in zip(self.words, self.vectors)]
        atomic_write_bytes(Path(path), ("\n".join(lines) + "\n").encode("utf-8"))

    @classmethod
    def load(cls, path: str | Path) -> "WordVectors":
        """Read word2vec / fastText ``.vec`` text (with its ``count dim`` header) or GloVe text (without), compressed
        or not, as they are distributed (``cc.en.300.vec.gz``; gzip, bzip2 or xz, by the suffix).

        A malformed line is a one-line ``DataError`` naming the file, line and column.

        >>> # WordVectors.load("cc.en.300.vec.gz").dim  # 300
        """
        from ..data.files import data_suffix, utf8_lines  # (the data files' reader: bad bytes told by line)

        path = Path(path)
        if path.is_dir():
            raise DataError(f"{path}: is a folder, not a file of word vectors")
        if not path.is_file():
            raise DataError(f"{path}: no such file of word vectors")
        words, rows, dim, number = [], [], None, 0
        try:
            for number, line in enumerate(utf8_lines(path), start=1):
                fields = line.rstrip("\r\n").rstrip(" ").split(" ")  # (Windows line endings too)
                if number == 1 and len(fields) == 2 and all(f.isdigit() for f in fields):
                    dim = int(fields[1])  # the word2vec header: count and dim
                    continue
                if fields == [""]:
                    continue
                dim = dim or len(fields) - 1
                if dim < 1:
                    raise DataError(f"{path}, line {number}: a word without numbers; word vectors are "
                                    "'word v1 v2 ...' separated by single spaces")
                if len(fields) != dim + 1:
                    raise DataError(f"{path}, line {number}: expected a word and {dim} numbers, got {len(fields)} "
                                    f"fields")
                words.append(fields[0])
                rows.append(_numbers(fields[1:], path, number))
        except DataError:
            # word2vec's .bin (GoogleNews-vectors-negative300.bin.gz) fails as its second line's bytes are read,
            # fastText's as its first's: told as bytes that are not UTF-8, to re-save, no one would know what to do.
            if data_suffix(path) == ".bin" and number <= 1:
                raise DataError(f"{path}: a binary file of vectors (word2vec's or fastText's .bin), which is not "
                                f"read: give their text format (fastText ships a .vec beside each .bin; gensim "
                                f"converts word2vec's: KeyedVectors.load_word2vec_format(FILE, binary=True)"
                                f".save_word2vec_format(TEXT_FILE))") from None
            raise
        if not rows:
            raise DataError(f"{path}: no word vectors in it")
        return cls(words, np.asarray(rows, dtype=np.float32))

    def check_width(self, width: int, field: str = "d_model") -> None:
        """A one-line error unless these vectors fit a token embedding ``width`` wide, set by the model's ``field``.

        >>> WordVectors(["film"], np.zeros((1, 128), dtype=np.float32)).check_width(64)
        Traceback (most recent call last):
        ...
        attnclf.errors.DataError: the word vectors have 128 dimensions but the model embeds tokens in 64; build \
vectors with --dim 64, or train at their width with --set d_model=128
        """
        if width != self.dim:
            raise DataError(f"the word vectors have {self.dim} dimensions but the model embeds tokens in {width}; "
                            f"build vectors with --dim {width}, or train at their width with --set {field}={self.dim}")

    def initialise(self, embedding: nn.Embedding, tokenizer: Tokenizer, std: float) -> int:
        """Set the embedding row of every vocabulary word that has a vector; return how many were set.

        Words are matched as ``Tokenizer.vocabulary`` shows them: a BPE word's first piece finds that word's vector
        ("good" of "good ##ness"), a later piece none. A vectors word is matched as written (in Unicode normalised as
        the text is: a file's "cafe" + U+0301 is the vocabulary's NFC "caf\u00e9"), else as the tokenizer cleans
        text, but for lemmatisation and social_media (a cased file's "Paris" is a lower-cased vocabulary's "paris"). A
        vocabulary word the file writes as it is keeps that vector: so runs matched so before match so still (the
        words of vectors counted here are cleaned already: cleaned again, they stay or vanish, as "the" does without
        stop-words). Of other words that clean alike, the first in the file wins: word2vec, fastText and GloVe list
        them most frequent first.

        The vectors are rescaled so their entries have standard deviation ``std``
        (the model's own rows start at 0.02). Large rows stand out from the
        positional encoding and move little under Adam's fixed-size steps, so
        the vectors stay nearly frozen. Padding, ``<unk>`` and words without a
        vector (or with a zero one) keep their initialisation.
        """
        self.check_width(embedding.embedding_dim)
        scaled = torch.from_numpy(self.vectors * (std / max(float(self.vectors.std()), 1e-12)))
        informative = self.vectors.any(axis=1)  # a word with no positive PMI has a zero vector: keep the init
        # Neither lemmatised nor read as a post: either makes a word another one ("is" "be", "sooooo" "sooo", whose
        # vectors the file may lack), which would start runs from vectors counted here otherwise than they started
        cleaning = replace(tokenizer.config.cleaning, lemmatize=False, social_media=False)
        index: dict[str, int] = {}
        for read in (unicode_normalized, clean):  # (as written first: that spelling's vector wins)
            for word, row in self.index.items():  # (in the file's order: a word spelt both ways keeps its first vector)
                index.setdefault(read(word, cleaning), row)
        rows = [(token_id, index[word]) for word, token_id in tokenizer.vocabulary().items()
                if token_id not in (PAD_ID, UNK_ID) and word in index and informative[index[word]]]
        if rows:
            targets, sources = zip(*rows)
            with torch.no_grad():
                # (to the table's dtype and device: a model already on a GPU holds it there)
                embedding.weight[list(targets)] = scaled[list(sources)].to(embedding.weight)
        return len(rows)


def _numbers(fields: Sequence[str], path: Path, line: int) -> np.ndarray:
    """The line's vector; the first field that is not a finite float32 is named by its column."""
    with np.errstate(over="ignore"):  # an overflow becomes inf, reported as not finite
        try:
            values = np.asarray(fields, dtype=np.float32)  # one parse: GloVe files hold millions of numbers
        except ValueError:
            values = np.array([_float32_or_nan(text) for text in fields])
    if np.isfinite(values).all():
        return values
    column = int(np.flatnonzero(~np.isfinite(values))[0])
    raise DataError(f"{path}, line {line}, column {column + 2}: {shown(fields[column])} is not a finite number")


def _float32_or_nan(text: str) -> float:
    try:
        return float(np.float32(text))
    except ValueError:
        return math.nan


def count_vectors(texts: Sequence[str], dim: int = 64, window: int = 5, min_count: int = 5,
                  vocab_size: int = 50000, seed: int = 0, cleaning: CleaningConfig | None = None,
                  named: Callable[[str], str] = by_field) -> WordVectors:
    """PPMI + SVD vectors of the most frequent words (at most ``vocab_size`` - 2) seen at least ``min_count`` times.

    Co-occurrences never cross from one text into the next. Words are cleaned (``cleaning``; default:
    lowercased) and split as the ``word`` tokenizer does; a run cleaned otherwise matches fewer of them. A bad
    argument is refused naming it as ``named`` spells it (the command line: by its flag).

    >>> count_vectors(["a good film"] * 20, min_count=0)
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: min_count must be at least 1, got 0
    """
    from sklearn.utils.extmath import randomized_svd

    texts = check_texts(texts)  # (a single string would count its characters, a generator be used up)
    sizes = whole_number(dim), whole_number(window)
    if None in sizes or min(sizes) < 1:
        raise DataError(f"{named('dim')} and {named('window')} must be whole numbers, at least 1, got {shown(dim)} "
                        f"and {shown(window)}")
    dim, window = sizes
    config = TokenizerConfig(kind="word", vocab_size=vocab_size, min_frequency=min_count, max_len=10 ** 9,
                             cleaning=cleaning or CleaningConfig(),
                             named=lambda name: named({"min_frequency": "min_count"}.get(name, name)))
    try:
        tokenizer = Tokenizer.train(texts, config)
    except DataError:  # (the tokenizer's message names its own flag, --min-frequency)
        raise DataError(f"no word occurs at least {min_count} times in the {len(texts):,} texts: nothing to count "
                        f"vectors for") from None
    size = tokenizer.vocab_size
    if size - 2 <= dim:
        raise DataError(f"{size - 2} distinct words seen at least {min_count} times: too few for {dim} dimensions")
    ppmi = _positive_pmi(tokenizer.encode_arrays(texts), size, window)
    left_vectors, strengths, _ = randomized_svd(ppmi, dim, n_iter=5, random_state=seed)
    vectors = (left_vectors * np.sqrt(strengths)).astype(np.float32)
    words = [tokenizer.backend.id_to_token(i) for i in range(size)]
    return WordVectors(words[2:], vectors[2:])  # not <pad> and <unk>


def _positive_pmi(texts_ids: Iterable[np.ndarray], size: int, window: int):
    """The (size, size) sparse matrix of positive PMI between words co-occurring within ``window`` ids of each other
    in the same text of ``texts_ids``, each co-occurrence weighted by 1 / distance; <pad> and <unk> take no part."""
    import scipy.sparse as sparse

    # (the list is built here, not by the caller, so that `del` frees it whatever the interpreter keeps of arguments)
    encoded = list(texts_ids)

    # All texts as one stream of ids; a pair counts when both ids are words of the same text.
    stream = np.concatenate(encoded)
    text_of = np.repeat(np.arange(len(encoded), dtype=np.int32), [len(ids) for ids in encoded])
    del encoded
    counts = sparse.csr_matrix((size, size), dtype=np.float64)
    for distance in range(1, window + 1):
        left, right = stream[:-distance], stream[distance:]
        real = (left > UNK_ID) & (right > UNK_ID) & (text_of[:-distance] == text_of[distance:])
        pairs = sparse.coo_matrix((np.full(int(real.sum()), 1.0 / distance), (left[real], right[real])),
                                  shape=(size, size)).tocsr()
        counts = counts + pairs + pairs.T
    counts = counts.tocoo()
    word_totals = np.asarray(counts.sum(axis=1)).ravel()
    context_totals = np.asarray(counts.sum(axis=0)).ravel() ** 0.75
    # PMI = log(P(w, c) / (P(w) P(c))) with P(c) from the smoothed context counts.
    pmi = np.log(counts.data * context_totals.sum() / (word_totals[counts.row] * context_totals[counts.col]))
    positive = pmi > 0
    return sparse.csr_matrix((pmi[positive], (counts.row[positive], counts.col[positive])), shape=(size, size))


def vectors_summary(vectors: WordVectors, text_count: int, output: str | Path) -> str:
    """The line closing `attnclf vectors`: how many words and dimensions ``count_vectors`` counted from how many
    texts, and the file ``output`` they were saved to.

    >>> vectors_summary(WordVectors(["good", "film"], np.zeros((2, 64), dtype=np.float32)), 12000, "v.vec")
    '2 words x 64 dimensions from 12,000 texts: v.vec'
    """
    return f"{len(vectors.words):,} words x {vectors.dim} dimensions from {text_count:,} texts: {output}"


def file_width_note(dim: int) -> str:
    """What vectors of ``dim`` dimensions, the width self-attn embeds tokens in on a single-label file
    (``embedding_width(None)``), fit: `attnclf vectors` says so when it picked that width, no --dim or --dataset
    given, since other models and multi-label runs on files embed tokens in 128 and refuse vectors of another width.

    >>> file_width_note(64)[:60]
    'note: 64 dimensions fit self-attn trained on a single-label '
    """
    return (f"note: {dim} dimensions fit self-attn trained on a single-label file; other models and multi-label runs "
            f"on files embed tokens in 128 (count vectors for them with --dim 128)")
