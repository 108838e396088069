"""The classifiers, one small class and one config each, plus the registry.

Every model follows ``Classifier``'s contract (see ``base.py``): padding never
changes a prediction (in eval mode a text gives the same logits however many
pad tokens follow it), ``token_embeddings=`` replaces ``embed_tokens(ids)``
with positions still added inside, ``pooling_override=`` replaces the pooling
weights of models that pool by attention, and ``output_attentions=True``
returns per-layer self-attention maps of models that have self-attention.

>>> model = build_model("self-attn", vocab_size=100, layers=1)
>>> ids = torch.tensor([[5, 6, 7, 0]])
>>> out = model(ids, ids != 0)
>>> out.logits.shape, out.pooling_weights.shape
(torch.Size([1, 2]), torch.Size([1, 4]))
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import ClassVar

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnclf.errors import AttnclfError, RunDirError, is_out_of_memory, shown, unknown_name
from attnclf.models.attention import (
    POOLINGS,
    AttentionPooling,
    MultiHeadSelfAttention,
    TransformerEncoder,
    masked_mean,
    masked_pool,
)
from attnclf.models.base import Classifier, ModelConfig, Summary
from attnclf.models.memory import model_bytes, outlining, refuse_oversized, too_large
from attnclf.models.ngrams import NaiveBayesNgrams, bigram_buckets, bounded_buckets
from attnclf.models.positional import positional_encoding


def init_weights(module: nn.Module) -> None:
    """N(0, 0.02) for linear and embedding weights, zero biases, zero padding row.

    LSTMs keep PyTorch's uniform(+-1/sqrt(hidden)) init, which suits their gates.

    >>> embedding = nn.Embedding(4, 2, padding_idx=0); init_weights(embedding); embedding.weight[0].tolist()
    [0.0, 0.0]
    """
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)
        if module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()


class TokenClassifier(Classifier):
    """Shared plumbing: the config, the token embedding, the input handling and the usual head."""

    def __init__(self, config: ModelConfig, dim: int) -> None:
        super().__init__()
        self.config = config
        self.summary_dim = dim
        # padding_idx also keeps the pad row's gradient at zero.
        self.token_embedding = nn.Embedding(config.vocab_size, dim, padding_idx=config.pad_id)

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(batch, seq) ids -> (batch, seq, dim) embeddings, before any position."""
        return self.token_embedding(input_ids)

    def embed(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        token_embeddings: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Token embeddings (or the override) and a bool mask (default: ids != pad_id)."""
        mask = input_ids != self.config.pad_id if attention_mask is None else attention_mask.bool()
        x = self.embed_tokens(input_ids) if token_embeddings is None else token_embeddings
        return x, mask

    def classify(self, summary: torch.Tensor) -> torch.Tensor:
        """The usual head: dropout, then the linear ``self.head`` the model builds; a model with another head
        (``bilstm-attn``'s dense layer, ``self-attn``'s branches) has its own ``classify``."""
        return self.head(self.dropout(summary))


class ResidualMLP(nn.Module):
    """``x + W2 relu(W1 x)`` per position: seed 003's ResidualBlock.

    The seed initialises W1, W2 to the identity; with the usual small init the
    block still starts close to the identity through the residual.
    """

    def __init__(self, dim: int, hidden_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, dim), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


def run_lstm(lstm: nn.LSTM, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``lstm`` over the real tokens only; returns (outputs (B, T, H*dirs), h_n).

    Packing stops the recurrence at each text's last real token, so padding
    never reaches a state; outputs at padding positions are 0. Real tokens are
    first moved (in order) to the front, so padding may sit anywhere the mask
    says. An empty text runs over one pad token so packing accepts it.

    >>> lstm, mask = nn.LSTM(3, 2, batch_first=True), torch.tensor([[True, True, False]])
    >>> states, h_n = run_lstm(lstm, torch.randn(1, 3, 3), mask)
    >>> states.shape, states[0, 2].tolist(), h_n.shape
    (torch.Size([1, 3, 2]), [0.0, 0.0], torch.Size([1, 1, 2]))
    """
    order = torch.sort((~mask).to(torch.uint8), dim=1, stable=True).indices  # real tokens first
    gather = order.unsqueeze(-1)
    x = x.gather(1, gather.expand(-1, -1, x.size(-1)))
    lengths = mask.sum(dim=1).clamp(min=1).cpu()
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    outputs, (h_n, _) = lstm(packed)
    outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=x.size(1))
    outputs = torch.zeros_like(outputs).scatter(1, gather.expand(-1, -1, outputs.size(-1)), outputs)
    return outputs * mask.unsqueeze(-1), h_n  # the multiply only matters for an empty text's one step


# ---------------------------------------------------------------------------- boe


@dataclass
class BoEConfig(ModelConfig):
    embed_dim: int = 128
    dropout: float = 0.1


class BagOfEmbeddings(TokenClassifier):
    """``boe``: masked mean of token embeddings -> linear.

    Seed 000's bag-of-embeddings baseline (and seed 003's MeanClassifier
    without its MLP): word order and context are invisible to it.
    """

    def __init__(self, config: BoEConfig) -> None:
        super().__init__(config, config.embed_dim)
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.embed_dim, config.num_classes)
        self.apply(init_weights)

    def summarize(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                  token_embeddings: torch.Tensor | None = None, pooling_override: torch.Tensor | None = None,
                  output_attentions: bool = False) -> Summary:
        x, mask = self.embed(input_ids, attention_mask, token_embeddings)
        return Summary(masked_mean(x, mask))


# ---------------------------------------------------------------------------- pos-mean


@dataclass
class PosMeanConfig(ModelConfig):
    embed_dim: int = 128
    ff_dim: int = 128
    positional: str = "learned"
    dropout: float = 0.1


class PositionalMean(TokenClassifier):
    """``pos-mean``: token + position embeddings -> residual MLP -> masked mean -> linear.

    Seed 003's ClassifierWithPositionEncoding: positions let the MLP treat a
    word differently by where it is, but words still never see each other.
    """

    def __init__(self, config: PosMeanConfig) -> None:
        super().__init__(config, config.embed_dim)
        self.positions = positional_encoding(config.positional, config.max_len, config.embed_dim)
        self.mlp = ResidualMLP(config.embed_dim, config.ff_dim, config.dropout)
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.embed_dim, config.num_classes)
        self.apply(init_weights)

    def summarize(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                  token_embeddings: torch.Tensor | None = None, pooling_override: torch.Tensor | None = None,
                  output_attentions: bool = False) -> Summary:
        x, mask = self.embed(input_ids, attention_mask, token_embeddings)
        x = self.mlp(self.positions(x))
        return Summary(masked_mean(x, mask))


# ---------------------------------------------------------------------------- lstm-mean


@dataclass
class LSTMMeanConfig(ModelConfig):
    embed_dim: int = 128
    hidden_dim: int = 128
    layers: int = 1
    dropout: float = 0.1
    min_layers: ClassVar[int] = 1


class LSTMMean(TokenClassifier):
    """``lstm-mean``: embedding -> LSTM (packed) -> masked mean -> linear.

    Seed 000's "single-layer LSTM + mean pool" baseline.
    """

    def __init__(self, config: LSTMMeanConfig) -> None:
        super().__init__(config, config.embed_dim)
        self.lstm = nn.LSTM(
            config.embed_dim, config.hidden_dim, num_layers=config.layers, batch_first=True,
            dropout=config.dropout if config.layers > 1 else 0.0,  # between layers only
        )
        self.summary_dim = config.hidden_dim
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.hidden_dim, config.num_classes)
        self.apply(init_weights)

    def summarize(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                  token_embeddings: torch.Tensor | None = None, pooling_override: torch.Tensor | None = None,
                  output_attentions: bool = False) -> Summary:
        x, mask = self.embed(input_ids, attention_mask, token_embeddings)
        states, _ = run_lstm(self.lstm, x, mask)
        return Summary(masked_mean(states, mask))


# ---------------------------------------------------------------------------- bilstm-attn


@dataclass
class BiLSTMAttentionConfig(ModelConfig):
    embed_dim: int = 128
    hidden_dim: int = 128  # per direction
    layers: int = 1  # the seed stacks 2; 1 is half the CPU time
    attention_dim: int = 128
    pooling_score: str = "additive"
    dense_dim: int = 64
    dropout: float = 0.1
    min_layers: ClassVar[int] = 1


class BiLSTMAttention(TokenClassifier):
    """``bilstm-attn``: BiLSTM -> attention queried by its final states -> dense -> linear.

    Seed 002 (Keras blog): the concatenated final forward/backward hidden
    states query the BiLSTM outputs with additive (Bahdanau) attention; the
    context vector goes through dense+ReLU, dropout and the output layer.
    ``pooling_score`` swaps in any other score of seed 002's table.
    """

    def __init__(self, config: BiLSTMAttentionConfig) -> None:
        super().__init__(config, config.embed_dim)
        states = self.summary_dim = 2 * config.hidden_dim
        self.lstm = nn.LSTM(
            config.embed_dim, config.hidden_dim, num_layers=config.layers, batch_first=True, bidirectional=True,
            dropout=config.dropout if config.layers > 1 else 0.0,
        )
        self.attention = AttentionPooling(
            states, config.pooling_score, query_dim=states, hidden_dim=config.attention_dim, max_len=config.max_len
        )
        self.dense = nn.Linear(states, config.dense_dim)
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.dense_dim, config.num_classes)
        self.apply(init_weights)

    def summarize(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                  token_embeddings: torch.Tensor | None = None, pooling_override: torch.Tensor | None = None,
                  output_attentions: bool = False) -> Summary:
        x, mask = self.embed(input_ids, attention_mask, token_embeddings)
        states, h_n = run_lstm(self.lstm, x, mask)
        query = torch.cat([h_n[-2], h_n[-1]], dim=-1)  # last layer: forward final, backward final
        context, weights = self.attention(states, mask, query=query, weights=pooling_override)
        return Summary(context, pooling_weights=weights)

    def classify(self, summary: torch.Tensor) -> torch.Tensor:
        return self.head(self.dropout(torch.relu(self.dense(summary))))


# ---------------------------------------------------------------------------- transformer-mean


@dataclass
class TransformerMeanConfig(ModelConfig):
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    ff_dim: int = 256
    dropout: float = 0.1
    attention_dropout: float = 0.0  # the lab's layer used 0.1; nonzero roughly doubles CPU step time
    positional: str = "sinusoidal"  # the lab had none: positional="none"
    norm_first: bool = False  # the lab's nn.TransformerEncoderLayer is post-norm
    activation: str = "relu"


class TransformerMean(TokenClassifier):
    """``transformer-mean``: embedding (+ positions) -> encoder blocks -> masked mean -> linear.

    Seed 001 (UW lab 6, IMDB): nn.TransformerEncoder with ReLU, feed-forward
    2 x d_model, post-norm, mean over tokens, dropout, linear. Unlike the lab
    the mean ignores padding, and positions are a switch (the lab had none).
    """

    def __init__(self, config: TransformerMeanConfig) -> None:
        super().__init__(config, config.d_model)
        self.positions = positional_encoding(config.positional, config.max_len, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = TransformerEncoder(
            config.d_model, config.heads, config.layers, config.ff_dim, config.dropout,
            activation=config.activation, norm_first=config.norm_first, attention_dropout=config.attention_dropout,
        )
        self.head = nn.Linear(config.d_model, config.num_classes)
        self.apply(init_weights)

    def summarize(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                  token_embeddings: torch.Tensor | None = None, pooling_override: torch.Tensor | None = None,
                  output_attentions: bool = False) -> Summary:
        x, mask = self.embed(input_ids, attention_mask, token_embeddings)
        x = self.dropout(self.positions(x))
        x, maps = self.encoder(x, mask, output_attentions)
        return Summary(masked_mean(x, mask), self_attentions=maps)


# ---------------------------------------------------------------------------- self-attn


@dataclass
class SelfAttentionConfig(ModelConfig):
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    ff_dim: int = 512
    dropout: float = 0.1
    attention_dropout: float = 0.0  # the seed's layer used 0.1; nonzero roughly doubles CPU step time
    attention_window: int = 0  # > 0: tokens attend within blocks of this many (MultiHeadSelfAttention)
    positional: str = "learned"  # the seed's code (its prose says sinusoidal)
    pooling: str = "attention"  # attention | mean | first | max
    pooling_score: str = "scaled_dot"
    ngram_buckets: int = 0  # > 0: add a hashed-bigram embedding to each token (see bigram_buckets)
    token_dropout: float = 0.0  # training only: hide tokens from attention, pooling, n-gram sums (drop_tokens)
    embedding_norm: bool = False  # LayerNorm over token + position embeddings, as BERT has
    nb_ngram_buckets: int = 0  # > 0: add an NB-weighted linear model over words + hashed bigrams (ngrams.py)
    nb_ngram_dropout: float = 0.0  # training only: the share of texts whose n-gram logits are hidden
    # > 0: at most this many bigram bucket x class weights; nb_ngram_buckets is halved to fit (ngrams.bounded_buckets)
    nb_ngram_bucket_budget: int = 0


def drop_tokens(mask: torch.Tensor, rate: float) -> torch.Tensor:
    """Word dropout: ``mask`` with each real token hidden with probability ``rate``; every text keeps one.

    A model that can no longer count on any single word or bigram being there
    has to spread its evidence, which is what a 99%-train-accuracy bigram
    model on IMDB lacks.

    >>> kept = drop_tokens(torch.tensor([[True, True, False]]), 0.99)
    >>> int(kept.sum()), bool(kept[0, 2])
    (1, False)
    """
    kept = mask & (torch.rand(mask.shape, device=mask.device) >= rate)
    emptied = mask.any(dim=1) & ~kept.any(dim=1)
    if emptied.any():  # give such a text back its first real token
        first = mask.to(torch.uint8).argmax(dim=1)
        kept[emptied, first[emptied]] = True
    return kept


class SelfAttentionClassifier(TokenClassifier):
    """``self-attn``: the flagship, seed 000's SelfAttentionClassifier.

    Embedding + positions -> dropout -> pre-norm GELU encoder blocks -> final
    LayerNorm -> pooling -> LayerNorm, dropout, linear. ``pooling="attention"``
    is seed 000's learned-query attention pooling (any score of seed 002's
    table); ``mean``/``first``/``max`` are the ablations, for which
    ``pooling_weights`` is None and ``pooling_override`` is ignored (they do
    not pool by attention).

    ``ngram_buckets > 0`` adds fastText-style bigram features: every token's
    embedding gains the embedding of its hashed (token, next token) pair, part
    of ``embed_tokens`` so explanations see it too. On IMDB-sized corpora it
    lets the encoder start from phrases ("not good") instead of words.

    ``nb_ngram_buckets > 0`` adds the logits of ``NaiveBayesNgrams``, NBSVM as a
    layer, to the head's; ``Trainer.fit`` counts the training set for it before
    the first step. Each token's n-gram evidence rides at the
    end of its embedding (``embed_tokens`` is d_model + num_classes wide), so
    gradient attributions and occlusion see both branches; attention weights
    describe the attention branch only. The summary is the pooled vector followed
    by the n-gram logits. ``nb_ngram_bucket_budget > 0`` bounds the branch's bigram
    buckets x classes (``bounded_buckets``): the layer's own ``buckets`` is the count
    it hashes into, which may be fewer than ``nb_ngram_buckets``.
    """

    def __init__(self, config: SelfAttentionConfig) -> None:
        super().__init__(config, config.d_model)
        if config.pooling not in POOLINGS:
            raise AttnclfError(unknown_name("pooling", config.pooling, POOLINGS))
        # (Negative sizes and dropout rates of 1 or more are refused by SelfAttentionConfig itself.)
        if config.ngram_buckets == 1:
            raise AttnclfError(f"ngram_buckets must be 0 (off) or at least 2, got {config.ngram_buckets}")
        if config.nb_ngram_buckets == 1:
            raise AttnclfError(f"nb_ngram_buckets must be 0 (off) or at least 2, got {config.nb_ngram_buckets}")
        self.bigram_embedding = (
            nn.Embedding(config.ngram_buckets, config.d_model, padding_idx=0) if config.ngram_buckets else None
        )
        self.positions = positional_encoding(config.positional, config.max_len, config.d_model)
        # BERT normalises token + position embeddings before its encoder; an ablation switch here.
        self.embedding_norm = nn.LayerNorm(config.d_model) if config.embedding_norm else nn.Identity()
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = TransformerEncoder(
            config.d_model, config.heads, config.layers, config.ff_dim, config.dropout,
            activation="gelu", norm_first=True, attention_dropout=config.attention_dropout,
            attention_window=config.attention_window,
        )
        self.pool = (
            AttentionPooling(config.d_model, config.pooling_score, max_len=config.max_len)
            if config.pooling == "attention"
            else None
        )
        self.head = nn.Sequential(
            nn.LayerNorm(config.d_model), nn.Dropout(config.dropout), nn.Linear(config.d_model, config.num_classes)
        )
        self.apply(init_weights)
        buckets = bounded_buckets(config.nb_ngram_buckets, config.num_classes, config.nb_ngram_bucket_budget)
        self.ngram_logits = (
            NaiveBayesNgrams(config.vocab_size, buckets, config.num_classes, config.pad_id) if buckets else None
        )
        if self.ngram_logits is not None:
            self.summary_dim += config.num_classes

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.token_embedding(input_ids)
        if self.bigram_embedding is not None:
            x = x + self.bigram_embedding(bigram_buckets(input_ids, self.config.ngram_buckets, self.config.pad_id))
        if self.ngram_logits is not None:
            x = torch.cat([x, self.ngram_logits.token_evidence(input_ids)], dim=-1)
        return x

    def summarize(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                  token_embeddings: torch.Tensor | None = None, pooling_override: torch.Tensor | None = None,
                  output_attentions: bool = False) -> Summary:
        if attention_mask is not None and token_embeddings is None:
            # A token the mask hides is padding to the bigram table and the n-gram branch too.
            input_ids = input_ids.masked_fill(~attention_mask.bool(), self.config.pad_id)
        x, mask = self.embed(input_ids, attention_mask, token_embeddings)
        if self.training and self.config.token_dropout > 0:
            mask = drop_tokens(mask, self.config.token_dropout)
        if self.ngram_logits is not None:
            x, ngram_evidence = x.split([self.config.d_model, self.config.num_classes], dim=-1)
        x = self.dropout(self.embedding_norm(self.positions(x)))
        x, maps = self.encoder(x, mask, output_attentions)
        if self.pool is None:
            pooled, weights = masked_pool(x, mask, self.config.pooling), None
        else:
            pooled, weights = self.pool(x, mask, weights=pooling_override)
        if self.ngram_logits is not None:
            ngram_logits = self.ngram_logits.logits(ngram_evidence, mask)
            if self.training and self.config.nb_ngram_dropout > 0:
                # The n-gram branch fits the training set within an epoch; texts it sits out
                # are the attention branch's to classify alone, so that branch keeps learning.
                kept = torch.rand(len(ngram_logits), 1, device=ngram_logits.device) >= self.config.nb_ngram_dropout
                ngram_logits = ngram_logits * kept
            pooled = torch.cat([pooled, ngram_logits], dim=-1)
        return Summary(pooled, pooling_weights=weights, self_attentions=maps)

    def classify(self, summary: torch.Tensor) -> torch.Tensor:
        return sum(self.branch_logits(summary).values())

    def branch_logits(self, summary: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each branch's share of the logits (they add up to ``classify``'s): ``attention`` and ``n-gram``."""
        if self.ngram_logits is None:
            return {"attention": self.head(summary)}
        return {"attention": self.head(summary[:, :self.config.d_model]), "n-gram": summary[:, self.config.d_model:]}


# ---------------------------------------------------------------------------- mha


@dataclass
class MHAConfig(ModelConfig):
    embed_dim: int = 128
    heads: int = 1
    ff_dim: int = 128
    positional: str = "learned"
    dropout: float = 0.1


class MHAClassifier(TokenClassifier):
    """``mha``: token + positions -> one self-attention layer + residual -> residual MLP -> mean -> linear.

    Seed 003's ClassifierWithMHAPositionEncoding: the smallest model in which
    words see each other. No LayerNorm, as in the notebook.
    """

    def __init__(self, config: MHAConfig) -> None:
        super().__init__(config, config.embed_dim)
        self.positions = positional_encoding(config.positional, config.max_len, config.embed_dim)
        self.attn = MultiHeadSelfAttention(config.embed_dim, config.heads)
        self.mlp = ResidualMLP(config.embed_dim, config.ff_dim, config.dropout)
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.embed_dim, config.num_classes)
        self.apply(init_weights)

    def summarize(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                  token_embeddings: torch.Tensor | None = None, pooling_override: torch.Tensor | None = None,
                  output_attentions: bool = False) -> Summary:
        x, mask = self.embed(input_ids, attention_mask, token_embeddings)
        x = self.positions(x)
        attended, weights = self.attn(x, mask, need_weights=output_attentions)
        x = self.mlp(x + self.dropout(attended))
        return Summary(masked_mean(x, mask), self_attentions=[weights] if output_attentions else None)


# ---------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class ModelSpec:
    name: str
    config_class: type[ModelConfig]
    model_class: type[Classifier]
    description: str


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in [
        ModelSpec("boe", BoEConfig, BagOfEmbeddings, "mean of token embeddings -> linear"),
        ModelSpec("pos-mean", PosMeanConfig, PositionalMean, "token + position embeddings -> residual MLP -> mean"),
        ModelSpec("lstm-mean", LSTMMeanConfig, LSTMMean, "LSTM -> mean of its states -> linear"),
        ModelSpec("bilstm-attn", BiLSTMAttentionConfig, BiLSTMAttention,
                  "BiLSTM -> additive attention queried by its final states -> dense"),
        ModelSpec("transformer-mean", TransformerMeanConfig, TransformerMean,
                  "post-norm Transformer encoder -> mean -> linear"),
        ModelSpec("self-attn", SelfAttentionConfig, SelfAttentionClassifier,
                  "pre-norm Transformer encoder -> learned-query attention pooling -> linear"),
        ModelSpec("mha", MHAConfig, MHAClassifier, "one self-attention layer + residual MLP -> mean"),
    ]
}


def model_name(model: torch.nn.Module) -> str | None:
    """The name in ``MODELS`` of ``model``'s class, or None for a class of no such name (a windowed model's wrapper).

    >>> model_name(build_model("mha", vocab_size=20)), model_name(nn.Linear(2, 2))
    ('mha', None)
    """
    return next((name for name, spec in MODELS.items() if type(model) is spec.model_class), None)


def build_model(name: str, **config_fields) -> Classifier:
    """Build model ``name`` (a key of ``MODELS``); unspecified config fields keep their defaults.

    A model whose tensors cannot fit in this machine's memory (``max_len=100_000_000`` with learned positions: a
    51 GB table) is refused in one line naming what to lower, before any of it is allocated.

    >>> build_model("boe", vocab_size=50, embed_dim=8).num_parameters()
    418
    >>> build_model("boe", d_model=8)
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: model 'boe' has no config field 'd_model'; valid fields: vocab_size, \
num_classes, pad_id, max_len, embed_dim, dropout
    """
    return _built(name, config_for(name, **config_fields))  # an unknown name is a one-line error before MODELS[name]


def _built(name: str, config: ModelConfig, saved_in: str | Path | None = None) -> Classifier:
    """Model ``name`` of ``config``, sized first (``build_model``); ``saved_in``: the run it is loaded from, which a
    model too large for this machine names (``memory.too_large``)."""
    model_class = MODELS[name].model_class
    if torch.empty(0).is_meta:  # the caller's `with outlining()`: an outline, nothing to allocate
        return model_class(config)
    with outlining():  # its size first: a huge max_len is our one line, not torch's allocator's
        try:
            outline = model_class(config)
        except RuntimeError as exc:  # a tensor of more bytes than torch counts (d_model 10**9: 3e18 of them)
            if "overflow" not in str(exc):
                raise
            size, largest = max((getattr(config, f.name), f.name) for f in fields(config)
                                if type(getattr(config, f.name)) is int)
            raise AttnclfError(f"{f'{saved_in}: ' if saved_in is not None else ''}model {name!r} is too large to "
                               f"build: a tensor of its sizes (the largest, {largest} {size:,}) has more elements "
                               f"than torch can count; lower them (--set)") from None
    refuse_oversized(name, outline, saved_in=saved_in)
    try:
        return model_class(config)
    except (RuntimeError, MemoryError) as exc:  # the machine has the memory, but a limit or other programs hold it
        if not is_out_of_memory(exc):
            raise
        raise too_large(name, outline, model_bytes(outline), "its weights", "and not that much is free",
                        saved_in) from None


def config_for(name: str, **config_fields) -> ModelConfig:
    """Model ``name``'s config with these fields set; an unknown model or field is a one-line error.

    >>> config_for("self-attn", d_model=32).embedding_dim
    32
    """
    if name not in MODELS:
        raise AttnclfError(unknown_name("model", name, MODELS))
    spec = MODELS[name]
    valid = [f.name for f in fields(spec.config_class)]
    unknown = [key for key in config_fields if key not in valid]
    if unknown:
        raise AttnclfError(
            f"model {name!r} has no config field {shown(unknown[0])}; valid fields: {', '.join(valid)}"
        )
    return spec.config_class(**config_fields)


def model_from_config(name: str, config_dict: dict, saved_in: str | Path | None = None) -> Classifier:
    """Rebuild a model from ``model.config.to_dict()`` (weights are loaded separately); ``saved_in``: the run
    directory it comes from, which a model too large for this machine names, its size fixed by training, and whose
    config.json a field out of shape names.

    >>> model = build_model("mha", vocab_size=50, embed_dim=8)
    >>> model_from_config("mha", model.config.to_dict()).config == model.config
    True
    """
    try:
        config = config_for(name, **config_dict)
    except AttnclfError as exc:  # (a run's config.json, edited or made elsewhere: named)
        if saved_in is None:
            raise
        raise RunDirError(f"{Path(saved_in) / 'config.json'}: {exc}") from None
    # Drawn on a fork of torch's generator: the weights drawn are replaced by the saved ones, and a caller's seeded
    # stream (a notebook's torch.manual_seed) goes on as if the model had not been loaded.
    with torch.random.fork_rng(devices=[]):
        return _built(name, config, saved_in)


def parameter_table_heading(vocab_size: int, num_classes: int, overrides: dict | None = None,
                            overrides_named: str = "overrides") -> str:
    """The line ``parameter_table`` is read under: what it counts at, ``overrides`` named as ``overrides_named``
    says (the command line: --set) where there are any, and that a run's count differs.

    >>> parameter_table_heading(20000, 2, {"d_model": 32})
    "parameters at a 20,000-word vocabulary, 2 classes and each model's default config with overrides (a run's count \
follows its vocabulary and recipe)"
    """
    return (f"parameters at a {vocab_size:,}-word vocabulary, {num_classes} classes and each model's default config"
            f"{f' with {overrides_named}' if overrides else ''} (a run's count follows its vocabulary and recipe)")


def parameter_table(vocab_size: int, num_classes: int, overrides: dict | None = None) -> str:
    """Each model's parameter count at ``vocab_size`` tokens and ``num_classes`` classes, from its default config with
    ``overrides`` (each given only to the models whose config has that field), a row a model under a header.

    >>> print(parameter_table(vocab_size=50, num_classes=2).splitlines()[1])
    boe                      6,658  mean of token embeddings -> linear
    """
    rows = [f"{'name':<18} {'parameters':>11}  description"]
    for name, spec in MODELS.items():
        model_fields = {f.name for f in fields(spec.config_class)}
        model = build_model(name, vocab_size=vocab_size, num_classes=num_classes,
                            **{k: v for k, v in (overrides or {}).items() if k in model_fields})
        rows.append(f"{name:<18} {model.num_parameters():>11,}  {spec.description}")
    return "\n".join(rows)
