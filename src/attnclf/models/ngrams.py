"""Hashed n-gram features: bigram buckets, and a naive-Bayes-weighted linear n-gram classifier.

``NaiveBayesNgrams`` is NBSVM (Wang & Manning 2012) as a layer: a linear model
over which words and hashed bigrams a text contains (present or not, not how
often), each feature's weight scaled by its naive-Bayes log-count ratio
``r[f, c] = log(p(f | c) / p(f | not c))`` counted once on the training set
(``fit``). The scaling lets the telling features move first: under Adam every
weight steps at the same rate, so a feature's logit moves ``|r|`` times as fast.
On IMDB this linear model alone reaches about 91% validation accuracy against
88.6% for the attention model (BENCHMARKS.md), and it is one switch of the
``self-attn`` model (``nb_ngram_buckets``), whose logits it adds to.

>>> layer = NaiveBayesNgrams(vocab_size=10, buckets=16, num_classes=2)
>>> ids = torch.tensor([[5, 6, 5, 0]])
>>> layer.fit([(ids, torch.tensor([1]))])
>>> layer(ids).shape
torch.Size([1, 2])
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import torch
from torch import nn

from ..errors import AttnclfError


def bigram_buckets(input_ids: torch.Tensor, buckets: int, pad_id: int = 0) -> torch.Tensor:
    """Hash each (token, next token) pair into 1..buckets-1; 0 (a zero embedding) when either is padding.

    Word order inside the pair counts; the last real token pairs with padding,
    so its bucket is 0 however much padding follows and padding never changes
    a prediction.

    >>> ids = torch.tensor([[5, 6, 7, 0]])
    >>> b = bigram_buckets(ids, 1000); (b[0, :2] > 0).tolist(), b[0, 2:].tolist()
    ([True, True], [0, 0])
    """
    following = torch.cat([input_ids[:, 1:], torch.full_like(input_ids[:, :1], pad_id)], dim=1)
    hashed = 1 + (input_ids * 1_000_003 + following) % (buckets - 1)
    return torch.where((input_ids == pad_id) | (following == pad_id), torch.zeros_like(hashed), hashed)


def bounded_buckets(buckets: int, num_classes: int, budget: int = 0) -> int:
    """The bigram buckets an n-gram branch keeps: ``buckets`` halved (never below 2) until buckets x ``num_classes``
    weights fit in ``budget``; 0 bounds nothing.

    The branch holds (vocabulary + buckets) x classes weights and as many ratios, so at 2^20 buckets each class costs
    about 8 MiB: a budget keeps a file of many classes from a model of gigabytes, while one of few keeps every bucket.
    The result follows from the three numbers alone, so a saved config rebuilds the same branch.

    >>> [bounded_buckets(1048576, classes, 4194304) for classes in (2, 4, 20, 150)]
    [1048576, 1048576, 131072, 16384]
    """
    if budget and 0 < buckets and 2 * num_classes > budget:
        raise AttnclfError(f"model field nb_ngram_bucket_budget {budget} holds fewer than the 2 buckets x "
                           f"{num_classes} classes ({2 * num_classes}) the smallest n-gram branch has; raise it, set "
                           f"it to 0 (no bound), or turn the branch off with nb_ngram_buckets=0")
    while budget and buckets * num_classes > budget:
        buckets = max(2, buckets // 2)
    return buckets


# Buckets per distinct training bigram that buckets_for keeps: a bigram unseen in training then lands on a trained
# bucket (and takes its evidence) about once in 16 at most, as on SST-2's 6,920 training sentences at the 2^20 buckets
# the branch was measured with there (62,856 distinct bigrams: once in 17; BENCHMARKS.md, "The estimator's n-gram
# buckets").
BUCKETS_PER_BIGRAM = 16


def distinct_bigrams(sequences: Iterable[Sequence[int]], most: int | None = None) -> int:
    """How many distinct (token id, next token id) pairs ``sequences`` of token ids (unpadded) hold in all; with
    ``most``, read only until that many are found (and say ``most``): a large file stops early.

    >>> distinct_bigrams([[5, 6, 5, 6], [6, 5], [7]]), distinct_bigrams([[5, 6, 5, 6], [6, 5], [7]], most=1)
    (2, 1)
    """
    seen: set[int] = set()
    for ids in sequences:
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) > 1:
            seen.update((ids[:-1] << 32 | ids[1:]).tolist())  # (one int a pair: token ids are below 2^31)
            if most is not None and len(seen) >= most:
                return most
    return len(seen)


def buckets_for(bigrams: int, cap: int) -> int:
    """The bigram buckets for training texts of ``bigrams`` distinct bigrams: ``BUCKETS_PER_BIGRAM`` per bigram,
    rounded up to a power of two, ``cap`` at most (and 2 at least, the fewest the branch takes).

    >>> buckets_for(2744, cap=1048576), buckets_for(62856, cap=1048576)
    (65536, 1048576)
    """
    return min(cap, max(2, 1 << (BUCKETS_PER_BIGRAM * bigrams - 1).bit_length()))


def sized_buckets(cap: int, sequences: Iterable[Sequence[int]]) -> tuple[int, int]:
    """The bigram buckets of an n-gram branch of at most ``cap`` trained on texts of token ids ``sequences``
    (``buckets_for`` their distinct bigrams), and the bigrams counted, read only until they fill the cap (then
    ``cap // BUCKETS_PER_BIGRAM + 1``). The one rule the file recipe's branch is built by, in `attnclf train
    --train-file` and the scikit-learn estimator alike: its 2^20 buckets made tens of MB of model of a few hundred
    texts. A count the user gives is built as given.

    >>> sized_buckets(1048576, [[5, 6, 7], [6, 7]]), sized_buckets(16, [[5, 6, 7, 8]])
    ((32, 2), (16, 2))
    """
    bigrams = distinct_bigrams(sequences, most=cap // BUCKETS_PER_BIGRAM + 1)
    return buckets_for(bigrams, cap), bigrams


def bucket_note(model_config: dict, num_classes: int, lifted_by: str) -> str | None:
    """What to tell a user whose n-gram branch keeps fewer bigram buckets than ``nb_ngram_buckets`` asks, its
    budget of bucket x class weights halving them for ``num_classes`` (a file of many classes); None when it keeps
    them all. ``lifted_by``: how that user sets the budget to 0 (`attnclf train`'s note: ``--set``; the scikit-learn
    estimator's warning: ``model_config=``).

    >>> bucket_note({"nb_ngram_buckets": 1048576, "nb_ngram_bucket_budget": 4194304}, 4, "--set")
    >>> bucket_note({"nb_ngram_buckets": 1048576, "nb_ngram_bucket_budget": 4194304}, 25, "--set")[:61]
    'the n-gram branch keeps 131,072 bigram buckets, not 1,048,576'
    """
    asked, budget = model_config.get("nb_ngram_buckets", 0), model_config.get("nb_ngram_bucket_budget", 0)
    kept = bounded_buckets(asked, num_classes, budget)
    if kept >= asked:
        return None
    return (f"the n-gram branch keeps {kept:,} bigram buckets, not {asked:,} (nb_ngram_buckets={asked}): "
            f"nb_ngram_bucket_budget={budget} bounds buckets x classes, and this data has {num_classes} classes; "
            f"{lifted_by} lifts it")


class NaiveBayesNgrams(nn.Module):
    """Logits of an NB-weighted linear model over a text's distinct words and hashed bigrams.

    Feature ``f`` is a word id (``0 < f < vocab_size``) or ``vocab_size + bucket``
    of a bigram. Until ``fit`` has counted a training set the ratios are zero and
    so is every token's evidence (the bias still learns). The ratios are a buffer:
    they are saved with the weights.

    The logits are a sum over tokens of ``token_evidence``: a word's weight at its
    first occurrence, plus half of each bigram it starts or ends (at the bigram's
    first occurrence). Carried as part of each token's embedding, that evidence is
    what gradient attributions see of this branch, exactly: it is linear in it.
    """

    def __init__(self, vocab_size: int, buckets: int, num_classes: int, pad_id: int = 0, smoothing: float = 1.0):
        super().__init__()
        self.vocab_size, self.buckets, self.pad_id, self.smoothing = vocab_size, buckets, pad_id, smoothing
        features = vocab_size + buckets
        self.weight = nn.Parameter(torch.zeros(features, num_classes))  # zero: the branch starts silent
        self.bias = nn.Parameter(torch.zeros(num_classes))
        self.register_buffer("log_count_ratio", torch.zeros(features, num_classes))

    def features(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(batch, 2 * seq) feature ids, words then bigrams by position, and True at the first copy of each
        real feature in its row (padding and bigrams with padding are no feature)."""
        bigrams = bigram_buckets(input_ids, self.buckets, self.pad_id)
        feature_ids = torch.cat([input_ids, self.vocab_size + bigrams], dim=1)
        real = torch.cat([input_ids != self.pad_id, bigrams != 0], dim=1)
        # Sorting by (feature, position) puts repeats side by side, earliest first; the first of a
        # run counts. One distinct key per slot keeps the order exact without a stable sort.
        slots = feature_ids.shape[1]
        keyed = torch.where(real, feature_ids, torch.full_like(feature_ids, -1)) * slots + torch.arange(
            slots, device=feature_ids.device)
        ordered, order = keyed.sort(dim=1)
        ordered = torch.div(ordered, slots, rounding_mode="floor")
        first_in_order = torch.ones_like(real)
        first_in_order[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        first = torch.zeros_like(real).scatter(1, order, first_in_order)
        return feature_ids, first & real

    def token_evidence(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(batch, seq, classes): each token's share of the logits (without the bias)."""
        feature_ids, counted = self.features(input_ids)
        per_feature = (nn.functional.embedding(feature_ids, self.weight) * self.log_count_ratio[feature_ids]
                       * counted.unsqueeze(-1).to(self.weight.dtype))
        words, bigrams = per_feature.chunk(2, dim=1)  # bigram t joins tokens t and t + 1
        return words + 0.5 * bigrams + 0.5 * torch.cat([torch.zeros_like(bigrams[:, :1]), bigrams[:, :-1]], dim=1)

    def logits(self, evidence: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(batch, classes) logits from ``token_evidence`` summed over the real tokens."""
        return (evidence * mask.unsqueeze(-1).to(evidence.dtype)).sum(dim=1) + self.bias

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.logits(self.token_evidence(input_ids), input_ids != self.pad_id)

    @torch.no_grad()
    def fit(self, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Set the ratios from ``(input_ids, labels)`` batches of the training set.

        ``labels`` are class ids, or (batch, classes) 0/1 rows for multi-label
        data; each class is weighed against all the others (one-vs-rest):
        ``p = smoothing + texts of class c with f``, ``q = smoothing + other texts
        with f``, ``r = log((p / sum p) / (q / sum q))``.
        """
        classes = self.weight.shape[1]
        with_class = torch.zeros(len(self.weight), classes, dtype=torch.float64)
        with_feature = torch.zeros(len(self.weight), dtype=torch.float64)
        for input_ids, labels in batches:
            labels = labels.cpu() if labels.dim() == 2 else nn.functional.one_hot(labels.cpu().long(), classes)
            feature_ids, counted = self.features(input_ids.cpu())
            counted = counted.to(torch.float64)
            with_feature.index_add_(0, feature_ids.flatten(), counted.flatten())
            per_feature = counted.unsqueeze(-1) * labels.to(torch.float64).unsqueeze(1)
            with_class.index_add_(0, feature_ids.flatten(), per_feature.flatten(0, 1))
        p = self.smoothing + with_class
        q = self.smoothing + (with_feature.unsqueeze(1) - with_class)
        ratio = (p / p.sum(dim=0)).log() - (q / q.sum(dim=0)).log()
        self.log_count_ratio.copy_(ratio.to(self.log_count_ratio.dtype))
