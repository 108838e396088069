"""Long documents as overlapping windows: the settings, the arithmetic and the batches.

A text longer than the model's ``max_len`` is tokenised (almost) in full and
cut into windows of ``max_len`` tokens, each starting ``stride`` tokens after
the previous one; the last window ends with the text. A batch of windowed
texts is (batch, windows, window_len), padded with ``PAD_ID`` both inside a
window and with whole empty windows. A text of at most ``max_len`` tokens is
one window, so windowing a corpus of short texts changes nothing.

Memory is bounded by ``max_windows``: a text is first cut (by the tokenizer's
``truncation``, head + tail by default) to the ``window_len + (max_windows - 1)
* stride`` tokens that many windows cover.

>>> window_starts(10, window_len=4, stride=3)
[0, 3, 6]
>>> split_windows(list(range(10)), window_len=4, stride=3)
[[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
"""

from __future__ import annotations

from dataclasses import InitVar, asdict, dataclass
from typing import Callable, Sequence

import numpy as np

from ..checks import whole_number
from ..errors import AttnclfError, shown
from .batching import Batch, BucketBatches
from .cache import encode_packed
from .tokenizer import PAD_ID, Tokenizer

WINDOW_POOLINGS = ("attention", "mean", "max")


@dataclass
class WindowConfig:
    """How long texts become windows; the window length is the tokenizer's ``max_len``.

    ``stride``: tokens from one window's start to the next (None: three
    quarters of the window, so neighbours share a quarter). ``max_windows``:
    at most this many windows per text. ``pooling``: how the model combines
    the windows' summaries: ``attention`` (a learned query), ``mean`` or ``max``.

    >>> WindowConfig(stride=48, max_windows=4).covered(64)
    208
    """

    stride: int | None = None
    max_windows: int = 8
    pooling: str = "attention"
    # Not a setting (to_dict leaves it out), as TokenizerConfig's: how a refusal names a field (the command line: by
    # its flag, --window-stride), and the window's size, ``max_len`` (--max-len). None: as Python knows them, "window
    # stride". Kept for stride_for, which checks the stride only once the window's size is known.
    named: InitVar[Callable[[str], str] | None] = None

    def __post_init__(self, named: Callable[[str], str] | None) -> None:
        named = named or (lambda field: {"stride": "window stride", "pooling": "window pooling",
                                         "max_len": "tokenizer max_len"}.get(field, field))
        self._named = named
        if not (isinstance(self.pooling, str) and self.pooling in WINDOW_POOLINGS):  # (a list's `in` is no answer)
            raise AttnclfError(f"{named('pooling')} must be one of {', '.join(WINDOW_POOLINGS)}, "
                               f"got {shown(self.pooling)}")
        for name in ("max_windows", "stride"):
            value = getattr(self, name)
            if value is None and name == "stride":  # (three quarters of the window, stride_for)
                continue
            count = whole_number(value)
            if count is None:  # (numpy's integers are counts too, written to config.json as plain ones)
                raise AttnclfError(f"{named(name)} must be a whole number, got {shown(value)}")
            if count < 1:
                raise AttnclfError(f"{named(name)} must be at least 1, got {shown(count)}")
            setattr(self, name, count)

    def stride_for(self, window_len: int) -> int:
        """The stride in tokens for windows of ``window_len``; a stride longer than a window would skip text.

        >>> WindowConfig(stride=500).stride_for(64)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        attnclf.errors.AttnclfError: window stride 500 is longer than the window (tokenizer max_len 64): text ...
        """
        stride = self.stride if self.stride is not None else max(1, window_len - window_len // 4)
        if stride > window_len:
            raise AttnclfError(f"{self._named('stride')} {stride} is longer than the window "
                               f"({self._named('max_len')} {window_len}): text between windows would be skipped")
        return stride

    def covered(self, window_len: int) -> int:
        """How many tokens ``max_windows`` windows cover: the most of a text the model reads."""
        return window_len + (self.max_windows - 1) * self.stride_for(window_len)

    def to_dict(self) -> dict:
        return asdict(self)


def window_starts(length: int, window_len: int, stride: int) -> list[int]:
    """Where each window of a ``length``-token text starts; together they cover every token.

    Windows start every ``stride`` tokens while they end before the text does;
    the last one ends exactly with the text (so it is full, and may overlap its
    neighbour by more than the others do).

    >>> window_starts(3, window_len=4, stride=2), window_starts(9, window_len=4, stride=4)
    ([0], [0, 4, 5])
    """
    if length <= window_len:
        return [0]
    return list(range(0, length - window_len, stride)) + [length - window_len]


def split_windows(ids: Sequence[int], window_len: int, stride: int) -> list[list[int]]:
    """``ids`` cut into overlapping windows (see ``window_starts``).

    >>> split_windows(list(range(6)), window_len=4, stride=3)
    [[0, 1, 2, 3], [2, 3, 4, 5]]
    """
    return [list(ids[start:start + window_len]) for start in window_starts(len(ids), window_len, stride)]


def collate_windows(sequences: Sequence[Sequence[int]], labels: Sequence[int], indices: np.ndarray,
                    window_len: int, stride: int) -> Batch:
    """A (batch, windows, window_len) batch: as many windows as the longest text needs, padding elsewhere.

    >>> b = collate_windows([[5, 6, 7, 8, 9], [4]], [1, 0], np.arange(2), window_len=3, stride=2)
    >>> b.input_ids.tolist()
    [[[5, 6, 7], [7, 8, 9]], [[4, 0, 0], [0, 0, 0]]]
    """
    windows = [split_windows(seq, window_len, stride) for seq in sequences]
    width = max(len(w) for text in windows for w in text)
    ids = np.full((len(sequences), max(len(text) for text in windows), width), PAD_ID, dtype=np.int64)
    for row, text in enumerate(windows):
        for column, window in enumerate(text):
            ids[row, column, : len(window)] = window
    return Batch.of_padded(ids, labels, indices)


class WindowBatches(BucketBatches):
    """``BucketBatches`` of windowed texts: bucketed by whole length, so texts with as many windows go together."""

    def __init__(self, sequences: Sequence[Sequence[int]], labels: Sequence[int] | None = None, *,
                 window_len: int, stride: int, **options):
        super().__init__(sequences, labels, **options)
        self.window_len = window_len
        self.stride = stride

    def batch(self, idx: np.ndarray) -> Batch:
        return collate_windows([self.sequences[i] for i in idx], self.labels[idx].tolist(), idx,
                               self.window_len, self.stride)


def text_batches(tokenizer: Tokenizer, texts: Sequence[str], labels: Sequence[int] | None = None, *,
                 windows: WindowConfig | None = None, batch_size: int = 32, shuffle: bool = False, seed: int = 0,
                 balanced: bool = False, max_tokens: int | None = None, packed: bool = False,
                 done: Callable[[int], None] | None = None) -> BucketBatches:
    """Texts encoded and batched as a model reads them: truncated to ``max_len``, or as windows. ``packed``: their
    ids packed a chunk of texts at a time into one array (``encode_packed``, as training holds a whole file's;
    ``done(count)`` after each chunk, for a bar), else a list of ids per text (what a prediction reports).

    >>> from attnclf.text import TokenizerConfig
    >>> tok = Tokenizer.train(["a b c d e f g h"], TokenizerConfig(min_frequency=1, max_len=4))
    >>> next(iter(text_batches(tok, ["a b c d e f"], windows=WindowConfig(stride=2)))).input_ids.shape
    torch.Size([1, 2, 4])
    """
    options = {"batch_size": batch_size, "shuffle": shuffle, "seed": seed, "balanced": balanced,
               "max_tokens": max_tokens}
    window_len = tokenizer.config.max_len
    max_len = windows.covered(window_len) if windows is not None else None  # (None: the tokenizer's own)
    sequences = (encode_packed(tokenizer, texts, max_len, done=done) if packed else
                 tokenizer.encode(texts, max_len=max_len))
    if windows is None:
        return BucketBatches(sequences, labels, **options)
    return WindowBatches(sequences, labels, window_len=window_len, stride=windows.stride_for(window_len), **options)
