"""Attention building blocks: masked pooling, self-attention, encoder blocks.

Masks are (batch, seq) bool, True at real tokens. Every weight this module
computes is exactly 0 at padding (not just small), and a row with no real token
at all gives zeros, never NaN.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnclf.errors import AttnclfError, unknown_name

SCORES = ("dot", "scaled_dot", "general", "additive", "cosine", "location")
POOLINGS = ("attention", "mean", "first", "max")
# Inference on the CPU runs token-wise work in chunks of this many tokens. A chunk's 4x-wide feed-forward
# layer (2 MB at width 64) stays in cache and reuses freed memory instead of faulting in fresh pages: IMDB
# reviews predict 1.35x faster (BENCHMARKS.md, "Chunked inference"). Training keeps whole batches, whose
# activations backward needs; a GPU's caching allocator already reuses memory and wants large matrices.
INFERENCE_CHUNK_TOKENS = 2048


def in_chunks(fn, tensors: tuple[torch.Tensor, ...], rows: int) -> torch.Tensor:
    """``fn(*tensors)``, computed ``rows`` rows (first dim) at a time on the CPU when no gradient is recorded.

    ``fn`` must treat each row on its own, so the result is the same either way, up to float rounding
    (~1e-7: a short last chunk may take another matmul kernel). With gradients (training, gradient
    attributions), under tracing (ONNX export) or on a GPU it runs once on the whole.

    >>> with torch.no_grad():
    ...     in_chunks(lambda x: x * 2, (torch.arange(5.0),), rows=2)
    tensor([0., 2., 4., 6., 8.])
    """
    whole = torch.is_grad_enabled() or torch.jit.is_tracing() or tensors[0].device.type != "cpu"
    if whole or len(tensors[0]) <= rows:
        return fn(*tensors)
    return torch.cat([fn(*parts) for parts in zip(*(t.split(rows) for t in tensors))])


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim, exactly 0 where ``mask`` is False.

    A row with no True gives all zeros instead of NaN (filling with the dtype's
    most negative finite value rather than -inf keeps the softmax finite; the
    final multiply zeroes it). Computed in at least float32, so weights stay
    precise under bfloat16 autocast.

    >>> masked_softmax(torch.zeros(1, 3), torch.tensor([[True, True, False]]))
    tensor([[0.5000, 0.5000, 0.0000]])
    """
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32)) * mask


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the real positions of (batch, seq, dim) ``x``; zeros for an empty row.

    >>> masked_mean(torch.tensor([[[1.0], [3.0], [99.0]]]), torch.tensor([[True, True, False]]))
    tensor([[2.]])
    """
    weights = mask.to(x.dtype).unsqueeze(-1)
    return (x * weights).sum(1) / weights.sum(1).clamp(min=1)


def masked_pool(x: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    """Parameter-free pooling of (batch, seq, dim) ``x``: ``mean``, ``first`` or ``max``; zeros, for every ``how``,
    where a row is padding alone.

    ``first`` takes the first real token (there is no [CLS]; after
    bidirectional self-attention that position has seen the whole text).

    >>> x = torch.tensor([[[1.0], [3.0], [99.0]]]); m = torch.tensor([[True, True, False]])
    >>> [masked_pool(x, m, how).item() for how in ("mean", "first", "max")]
    [2.0, 1.0, 3.0]
    """
    if how == "mean":
        return masked_mean(x, mask)
    if how == "first":
        first = mask.int().argmax(dim=1)  # argmax returns the first maximal index
        pooled = x[torch.arange(x.size(0), device=x.device), first]
    elif how == "max":
        pooled = x.masked_fill(~mask.unsqueeze(-1), torch.finfo(x.dtype).min).amax(dim=1)
    else:
        raise AttnclfError(unknown_name("pooling", how, ("mean", "first", "max")))
    # Zeros for an all-padding row, as masked_mean gives: only a caller's own such row reaches this (the library's
    # batches give every text a token, <unk> for an empty one, and every text a window). Without it, max would pool
    # to finfo.min, which the head turns into inf or NaN, and first would pool a padding position's vector.
    return torch.where(mask.any(dim=1, keepdim=True), pooled, torch.zeros_like(pooled))


def _dot(keys: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """(B, T, D) keys . (B, D) query -> (B, T) scores."""
    return (keys @ query.unsqueeze(-1)).squeeze(-1)


class MultiHeadSelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention with a key-padding mask.

    Without ``need_weights`` it runs ``F.scaled_dot_product_attention`` (fused
    kernel, the fast path). With it, the softmax is computed explicitly and the
    (batch, heads, seq, seq) weights are returned: columns of padding keys are
    exactly 0, rows of padding queries are set to 0, rows of real queries sum
    to 1. Real positions get the same outputs either way; padding positions may
    differ, and nothing downstream reads them.

    ``window > 0`` makes it block-local: the sequence is cut into consecutive
    blocks of ``window`` tokens and each token attends within its own block
    (Longformer's local attention without the overlap), at a cost that grows as
    ``seq * window`` instead of ``seq ** 2``: at 800 tokens and a window of 64,
    a twelfth of the attention work. A sequence no longer than the window is
    attended in full.

    >>> attn = MultiHeadSelfAttention(8, heads=2)
    >>> y, w = attn(torch.randn(1, 3, 8), torch.tensor([[True, True, False]]), need_weights=True)
    >>> y.shape, w.shape, w[0, :, :, 2].abs().sum().item()
    (torch.Size([1, 3, 8]), torch.Size([1, 2, 3, 3]), 0.0)
    """

    def __init__(self, dim: int, heads: int, dropout: float = 0.0, window: int = 0) -> None:
        super().__init__()
        if dim % heads:
            raise AttnclfError(f"model dimension {dim} is not divisible by heads={heads}")
        if window < 0:
            raise AttnclfError(f"attention window must be 0 (full) or positive, got {window}")
        self.heads = heads
        self.dropout = dropout
        self.window = window
        self.qkv = nn.Linear(dim, 3 * dim)  # one matmul for q, k, v (same layout as nn.MultiheadAttention)
        self.proj = nn.Linear(dim, dim)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        seq = x.size(1)
        local = bool(self.window) and seq > self.window
        if local and not need_weights:
            return self._block_local(x, mask), None
        q, k, v = self._split_heads(x)
        keys = mask[:, None, None, :]  # (B, 1, 1, T): which keys every query may see
        if local:  # the same blocks as _block_local, as a mask, so the (seq, seq) maps can be returned
            block = torch.arange(seq, device=x.device) // self.window
            keys = keys & (block[:, None] == block[None, :])
        dropout = self.dropout if self.training else 0.0
        if need_weights:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
            weights = masked_softmax(scores, keys) * mask[:, None, :, None]
            y = F.dropout(weights, dropout) @ v
        else:
            weights = None
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keys, dropout_p=dropout)
        return self._merge_heads(y, x.shape), weights

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, dim) -> q, k and v stacked, (3, B, heads, T, dim / heads): one matmul, then each head's slice."""
        batch, seq, dim = x.shape
        return self.qkv(x).view(batch, seq, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)

    def _merge_heads(self, y: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        """(B, heads, T, dim / heads) attention outputs -> (B, T, dim), the heads side by side, projected; ``shape``:
        the input's, (B, T, dim)."""
        return self.proj(y.transpose(1, 2).reshape(shape))

    def _block_local(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Attention within blocks of ``window`` tokens, each folded into a sequence of its own.

        A block without a real token (padding alone, or tokens dropped in training) attends to all its
        positions: for a query with no key at all SDPA answers zeros since pytorch/pytorch#133882 (2024), but
        NaN before it (attnclf takes torch>=2.2, and CUDA's fused kernels were the ones users met it in),
        and a NaN at a position nothing reads still spoils the pooling that weighs it by 0.
        The input is padded to whole blocks, not q, k and v (3x the bytes), and the output is cut after
        the projection, which then reads contiguous rows. Blocks are independent, so inference takes them
        a cache-sized chunk at a time (``in_chunks``).
        """
        batch, seq, dim = x.shape
        pad = -seq % self.window
        blocks = F.pad(x, (0, 0, 0, pad)).reshape(-1, self.window, dim)
        keys = F.pad(mask, (0, pad)).view(-1, 1, 1, self.window)
        keys = keys | ~keys.any(dim=-1, keepdim=True)
        y = in_chunks(self._attend_blocks, (blocks, keys), max(1, INFERENCE_CHUNK_TOKENS // self.window))
        return y.view(batch, seq + pad, dim)[:, :seq]

    def _attend_blocks(self, blocks: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(n, window, dim) blocks, each attending within itself under its (n, 1, 1, window) key mask."""
        q, k, v = self._split_heads(blocks)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keys, dropout_p=self.dropout if self.training else 0.0)
        return self._merge_heads(y, blocks.shape)


class EncoderBlock(nn.Module):
    """Transformer encoder layer: self-attention and feed-forward, each residual.

    ``dropout`` acts on the two residual branches; ``attention_dropout`` on the
    attention probabilities, off by default because any nonzero value moves
    SDPA from its fused CPU kernel to the unfused math path (~1.7-2.3x the step time).

    ``norm_first=True`` is pre-norm (``x + f(LN(x))``, GPT/seed 000, trains
    stably without warm-up); ``False`` is the original post-norm
    (``LN(x + f(x))``, PyTorch's default layer used in the lab, seed 001).

    >>> block = EncoderBlock(8, heads=2, ff_dim=16)
    >>> block(torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.bool))[0].shape
    torch.Size([2, 5, 8])
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        ff_dim: int,
        dropout: float = 0.1,
        activation: str = "gelu",
        norm_first: bool = True,
        attention_dropout: float = 0.0,
        attention_window: int = 0,
    ) -> None:
        super().__init__()
        activations = {"gelu": nn.GELU, "relu": nn.ReLU}
        if activation not in activations:
            raise AttnclfError(unknown_name("activation", activation, ("gelu", "relu")))
        self.norm_first = norm_first
        self.attn_norm = nn.LayerNorm(dim)
        self.attn = MultiHeadSelfAttention(dim, heads, attention_dropout, attention_window)
        self.ff_norm = nn.LayerNorm(dim)
        # No dropout inside the feed-forward (as nanoGPT): on the 4x-wide hidden
        # layer it costs more CPU time than the rest of the block's dropouts.
        self.ff = nn.Sequential(nn.Linear(dim, ff_dim), activations[activation](), nn.Linear(ff_dim, dim))
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.norm_first:
            attended, weights = self.attn(self.attn_norm(x), mask, need_weights)
            x = x + self.dropout(attended)
            x = x + self.dropout(self._token_wise(lambda t: self.ff(self.ff_norm(t)), x))
        else:
            attended, weights = self.attn(x, mask, need_weights)
            x = self.attn_norm(x + self.dropout(attended))
            x = self.ff_norm(x + self.dropout(self._token_wise(self.ff, x)))
        return x, weights

    @staticmethod
    def _token_wise(fn, x: torch.Tensor) -> torch.Tensor:
        """``fn`` of (batch, seq, dim) ``x``, token by token: at inference a chunk of tokens at a time."""
        flat = x.reshape(-1, x.size(-1))
        return in_chunks(fn, (flat,), INFERENCE_CHUNK_TOKENS).view(*x.shape[:-1], -1)


class TransformerEncoder(nn.Module):
    """A stack of ``EncoderBlock``s; pre-norm stacks end with a LayerNorm.

    Returns the final states and, with ``output_attentions``, one
    (batch, heads, seq, seq) map per layer (else None).

    >>> enc = TransformerEncoder(8, heads=2, layers=3, ff_dim=16)
    >>> x, maps = enc(torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.bool), output_attentions=True)
    >>> x.shape, len(maps), maps[0].shape
    (torch.Size([2, 5, 8]), 3, torch.Size([2, 2, 5, 5]))
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        layers: int,
        ff_dim: int,
        dropout: float = 0.1,
        activation: str = "gelu",
        norm_first: bool = True,
        attention_dropout: float = 0.0,
        attention_window: int = 0,
    ) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            EncoderBlock(dim, heads, ff_dim, dropout, activation, norm_first, attention_dropout, attention_window)
            for _ in range(layers)
        )
        # Pre-norm leaves the residual stream unnormalised; post-norm already
        # ends every block with a LayerNorm.
        self.final_norm = nn.LayerNorm(dim) if norm_first else nn.Identity()

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, output_attentions: bool = False
    ) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        maps = []
        for block in self.blocks:
            x, weights = block(x, mask, need_weights=output_attentions)
            maps.append(weights)
        return self.final_norm(x), maps if output_attentions else None


class AttentionPooling(nn.Module):
    """Weighted average of a sequence; weights = masked softmax of score(query, key_t).

    The query is learned (one vector, seed 000) unless ``query_dim`` is given,
    in which case the caller passes one query per example (Bahdanau-style, the
    BiLSTM's final states in seed 002). Scores, for query ``q`` and key ``h_t``
    (the table in seed 002):

    - ``dot``: ``q . h_t``
    - ``scaled_dot``: ``q . h_t / sqrt(dim)``
    - ``general``: ``q^T W h_t`` (Luong's bilinear)
    - ``additive``: ``v^T tanh(W_h h_t + W_q q)`` (Bahdanau; "concat" in Luong)
    - ``cosine``: ``beta * cos(q, h_t)``, with a learned sharpness ``beta``
      (Graves' key strength; starts at sqrt(dim) because a bare cosine in
      [-1, 1] can barely move a softmax)
    - ``location``: ``(W q + b)_t`` (Luong's location-based: one score per
      *position* from a linear map of the query; the keys' content is never
      read). With the learned query this is a trained, content-blind prior
      over positions, softmaxed over the real ones; needs ``max_len``.

    ``forward`` returns (pooled (B, D), weights (B, T)); ``weights=`` replaces
    the computed weights as given (not masked or renormalised: the caller's
    experiment).

    >>> pool = AttentionPooling(8, score="additive")
    >>> pooled, w = pool(torch.randn(2, 4, 8), torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]]).bool())
    >>> pooled.shape, torch.allclose(w.sum(-1), torch.ones(2)), w[1, 2:].tolist()
    (torch.Size([2, 8]), True, [0.0, 0.0])
    """

    def __init__(
        self,
        dim: int,
        score: str = "scaled_dot",
        *,
        query_dim: int | None = None,
        hidden_dim: int | None = None,
        max_len: int = 512,
    ) -> None:
        super().__init__()
        if score not in SCORES:
            raise AttnclfError(unknown_name("attention score", score, SCORES))
        if query_dim is not None and query_dim != dim and score in ("dot", "scaled_dot", "cosine"):
            raise AttnclfError(f"score {score!r} needs query_dim == dim, got {query_dim} and {dim}")
        self.score = score
        self.max_len = max_len
        # Small init: all scores start near 0, so pooling starts as a mean. (0.02 * torch.randn(dim) to the bit, as
        # a fill that an outline skips: torch.randn on the meta device imports torch's compiler.)
        self.query = nn.Parameter(nn.init.normal_(torch.empty(dim)).mul_(0.02)) if query_dim is None else None
        query_dim = query_dim or dim
        if score == "general":
            self.bilinear = nn.Linear(dim, query_dim, bias=False)
        elif score == "additive":
            hidden_dim = hidden_dim or dim
            self.key_proj = nn.Linear(dim, hidden_dim)
            self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)  # key_proj has the bias
            self.energy = nn.Linear(hidden_dim, 1, bias=False)  # a bias would cancel in the softmax
        elif score == "cosine":
            self.log_sharpness = nn.Parameter(torch.tensor(0.5 * math.log(dim)))
        elif score == "location":
            self.location = nn.Linear(query_dim, max_len)

    def scores(self, keys: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """Unnormalised (B, T) scores of (B, T, D) keys against a (B, Dq) query."""
        if self.score == "dot":
            return _dot(keys, query)
        if self.score == "scaled_dot":
            return _dot(keys, query) / math.sqrt(keys.size(-1))
        if self.score == "general":
            return _dot(keys, query @ self.bilinear.weight)  # q^T W h without a (B, T, D) projection
        if self.score == "additive":
            return self.energy(torch.tanh(self.key_proj(keys) + self.query_proj(query).unsqueeze(1))).squeeze(-1)
        if self.score == "cosine":
            return self.log_sharpness.exp() * F.cosine_similarity(keys, query.unsqueeze(1), dim=-1)
        seq = keys.size(1)
        if seq > self.max_len:
            raise AttnclfError(f"sequence length {seq} exceeds max_len {self.max_len} of location attention")
        return self.location(query)[:, :seq]

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor,
        query: torch.Tensor | None = None,
        weights: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if weights is None:
            if query is None:
                if self.query is None:
                    raise ValueError("this AttentionPooling was built with query_dim: pass query=")
                query = self.query.expand(x.size(0), -1)
            weights = masked_softmax(self.scores(x, query), mask)
        pooled = (weights.to(x.dtype).unsqueeze(1) @ x).squeeze(1)
        return pooled, weights
