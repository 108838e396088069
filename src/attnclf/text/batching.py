"""Length-bucketed batches, so a batch of short texts is not padded to the longest text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from .tokenizer import PAD_ID

# Padded tokens per length-sorted evaluation batch, at most. At 16,384 tokens the feed-forward activations
# (x 256 floats) stay under glibc's 32 MB mmap threshold, so each batch reuses freed heap instead of
# faulting in fresh pages: IMDB's 800-token reviews predict about 11% faster (BENCHMARKS.md).
EVAL_MAX_TOKENS = 16384


@dataclass
class Batch:
    """Texts' ids padded into one tensor, as a model reads them, with their labels and their places in the dataset.

    >>> collate([[5, 6], [7]], [1, 0], np.array([3, 8])).indices.tolist()
    [3, 8]
    """

    input_ids: torch.Tensor  # (batch, seq) long, PAD_ID where padded
    attention_mask: torch.Tensor  # (batch, seq) bool, True at real tokens
    labels: torch.Tensor  # (batch,) long
    indices: np.ndarray  # positions of these examples in the dataset

    @classmethod
    def of_padded(cls, ids: np.ndarray, labels: Sequence[int], indices: np.ndarray) -> "Batch":
        """The batch of ``ids``, padded with ``PAD_ID`` (texts first, in any shape): its mask is where they are not.

        >>> Batch.of_padded(np.array([[5, 0]]), [1], np.arange(1)).attention_mask.tolist()
        [[True, False]]
        """
        input_ids = torch.from_numpy(ids)
        return cls(input_ids, input_ids != PAD_ID, torch.as_tensor(list(labels), dtype=torch.long), indices)

    def to(self, device: torch.device) -> "Batch":
        return Batch(self.input_ids.to(device), self.attention_mask.to(device), self.labels.to(device), self.indices)


def collate(sequences: Sequence[Sequence[int]], labels: Sequence[int], indices: np.ndarray) -> Batch:
    """Right-pad ``sequences`` to the longest one.

    >>> b = collate([[5, 6, 7], [8]], [1, 0], np.arange(2))
    >>> b.input_ids.tolist(), b.attention_mask.sum(1).tolist()
    ([[5, 6, 7], [8, 0, 0]], [3, 1])
    """
    width = max(len(s) for s in sequences)
    ids = np.full((len(sequences), width), PAD_ID, dtype=np.int64)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = seq
    return Batch.of_padded(ids, labels, indices)


class BucketBatches:
    """Batches of similar length, in a seeded random order that changes every epoch.

    Examples are shuffled, cut into pools of ``pool_factor`` batches, sorted by
    length within each pool and batched; batch order is then shuffled. This keeps
    padding small without ever putting all the short texts first. With
    ``shuffle=False`` batches are length-sorted for the fastest evaluation, and
    ``indices`` tells where each example came from.

    ``balanced=True`` (training) draws each epoch's examples so that every class
    is equally likely at each draw: minority examples repeat and majority ones
    are skipped, while the epoch keeps its length (and the schedule its steps).

    ``max_tokens`` (unshuffled batches only) also caps a batch's padded size,
    examples x longest length: long texts come in smaller batches.

    ``weights`` (training; None: every example weighs 1) holds each example's
    weight on the loss. Batches hold positions, so a batch's weights are
    ``weights[batch.indices]``, wherever shuffling and bucketing put its examples.

    >>> batches = BucketBatches([[1]] * 5, [0] * 5, batch_size=2, shuffle=False)
    >>> [len(b.labels) for b in batches]
    [2, 2, 1]
    >>> weighted = BucketBatches([[1], [2], [3]], [0, 1, 0], batch_size=1, weights=[10, 20, 30])
    >>> [(b.input_ids[0, 0].item(), weighted.weights[b.indices].item()) for b in weighted]  # shuffled, still paired
    [(2, 20.0), (1, 10.0), (3, 30.0)]
    """

    def __init__(
        self,
        sequences: Sequence[Sequence[int]],
        labels: Sequence[int] | None = None,
        batch_size: int = 32,
        shuffle: bool = True,
        seed: int = 0,
        pool_factor: int = 50,
        balanced: bool = False,
        max_tokens: int | None = None,
        weights: Sequence[float] | None = None,
    ):
        self.sequences = sequences
        self.labels = np.asarray(labels if labels is not None else [0] * len(sequences), dtype=np.int64)
        # float32, as the losses they multiply (callers check their values: the estimator's sample_weight)
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float32)
        if self.weights is not None and self.weights.shape != (len(sequences),):
            raise ValueError(f"weights must hold one number per example: {len(sequences)} examples, weights of shape "
                             f"{self.weights.shape}")
        lengths = getattr(sequences, "lengths", None)  # memory-mapped sequences know theirs without reading
        self.lengths = np.asarray(lengths, dtype=np.int64) if lengths is not None else np.fromiter(
            (len(s) for s in sequences), dtype=np.int64, count=len(sequences))
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.pool_factor = pool_factor
        self.balanced = balanced
        self.max_tokens = max_tokens
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Shuffle (and draw, if ``balanced``) for ``epoch`` from now on: each epoch has its own seeded order."""
        self.epoch = epoch

    def __len__(self) -> int:
        if self.max_tokens is not None and not self.shuffle:
            return len(self.batch_indices())
        return -(-len(self.sequences) // self.batch_size)

    def batch_indices(self) -> list[np.ndarray]:
        """The dataset positions of each batch of this epoch, in the order they come (see the class's docstring).

        >>> [b.tolist() for b in BucketBatches([[1] * 3, [1], [1] * 2, [1] * 5], batch_size=2, shuffle=False)
        ...  .batch_indices()]
        [[1, 2], [0, 3]]
        """
        if not self.shuffle:
            order = np.argsort(self.lengths, kind="stable")
            if self.max_tokens is not None:
                return within_token_budget(order, self.lengths, self.batch_size, self.max_tokens)
            return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        rng = np.random.default_rng((self.seed, self.epoch))
        if self.balanced:
            draw = 1.0 / np.bincount(self.labels)[self.labels]
            order = rng.choice(len(self.sequences), size=len(self.sequences), p=draw / draw.sum())
        else:
            order = rng.permutation(len(self.sequences))
        pool = self.batch_size * self.pool_factor
        batches = []
        for start in range(0, len(order), pool):
            chunk = order[start : start + pool]
            chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")]
            batches += [chunk[i : i + self.batch_size] for i in range(0, len(chunk), self.batch_size)]
        rng.shuffle(batches)
        return batches

    def batch(self, idx: np.ndarray) -> Batch:
        """The examples at ``idx``, padded into one batch."""
        return collate([self.sequences[i] for i in idx], self.labels[idx].tolist(), idx)

    def __iter__(self) -> Iterator[Batch]:
        for idx in self.batch_indices():
            yield self.batch(idx)


def within_token_budget(order: np.ndarray, lengths: np.ndarray, batch_size: int, max_tokens: int) -> list[np.ndarray]:
    """Cut ``order`` (indices by ascending length) into runs of at most ``batch_size`` whose padded size,
    count x longest length, stays within ``max_tokens``; a text longer than that goes alone.

    >>> [b.tolist() for b in within_token_budget(np.arange(4), np.array([2, 2, 5, 9]), 8, 10)]
    [[0, 1], [2], [3]]
    """
    batches, start = [], 0
    while start < len(order):
        end = start + 1
        while end < len(order) and end - start < batch_size and (end - start + 1) * lengths[order[end]] <= max_tokens:
            end += 1
        batches.append(order[start:end])
        start = end
    return batches
