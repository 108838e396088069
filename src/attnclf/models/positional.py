"""Positional encodings: add "where am I" to token embeddings.

One family, three members, all ``forward(x) -> x + positions`` on (batch, seq, dim):

- ``sinusoidal``: the fixed sin/cos table of Vaswani et al. (2017), as in the
  lab slides (seed 001); no parameters.
- ``learned``: one trained vector per position (seed 000's code, seed 003's
  ``position_embedding``).
- ``none``: the identity, for the lab's position-free Transformer and ablations.

Positions are absolute and start at 0 at the first column, so appending padding
to the right never moves a real token.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attnclf.errors import AttnclfError, unknown_name


class PositionalEncoding(nn.Module):
    """Base: checks the sequence fits in ``max_len``; subclasses add positions. Every kind is built from
    ``(max_len, dim)`` (``positional_encoding``), the base and ``NoPositions`` needing no ``dim``."""

    def __init__(self, max_len: int, dim: int) -> None:
        super().__init__()
        self.max_len = max_len

    def check_length(self, x: torch.Tensor) -> int:
        """The length of (batch, seq, dim) ``x``, refused in one line past ``max_len``."""
        seq_len = x.size(1)
        if seq_len > self.max_len:
            raise AttnclfError(
                f"sequence length {seq_len} exceeds the model's max_len {self.max_len}; "
                "truncate the input or build the model with a larger max_len"
            )
        return seq_len


class SinusoidalPositions(PositionalEncoding):
    """Fixed table: even dims ``sin(t / 10000^(k/dim))``, odd dims the matching cos.

    >>> SinusoidalPositions(16, 4)(torch.zeros(1, 3, 4))[0, 0]
    tensor([0., 1., 0., 1.])
    """

    def __init__(self, max_len: int, dim: int) -> None:
        super().__init__(max_len, dim)
        table = torch.zeros(max_len, dim)
        if not table.is_meta:  # (an outline's table has its shape alone: torch.arange there imports torch's compiler)
            position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
            inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
            table[:, 0::2] = torch.sin(position * inv_freq)
            table[:, 1::2] = torch.cos(position * inv_freq)[:, : dim // 2]  # odd dim: one cos fewer
        # Not persistent: the table is a pure function of (max_len, dim), so it
        # stays out of checkpoints.
        self.register_buffer("table", table, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[: self.check_length(x)].to(x.dtype)


class LearnedPositions(PositionalEncoding):
    """A trained embedding per position (init N(0, 0.02), like the tokens').

    >>> LearnedPositions(16, 4)(torch.zeros(2, 3, 4)).shape
    torch.Size([2, 3, 4])
    """

    def __init__(self, max_len: int, dim: int) -> None:
        super().__init__(max_len, dim)
        self.embedding = nn.Embedding(max_len, dim)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(self.check_length(x), device=x.device)
        return x + self.embedding(positions)


class NoPositions(PositionalEncoding):
    """The identity: a bag of contextualised tokens.

    >>> x = torch.ones(1, 3, 4); NoPositions(16, 4)(x) is x
    True
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.check_length(x)  # keep max_len meaningful for every kind
        return x


_KINDS: dict[str, type[PositionalEncoding]] = {
    "sinusoidal": SinusoidalPositions,
    "learned": LearnedPositions,
    "none": NoPositions,
}
POSITIONAL_KINDS = tuple(_KINDS)


def positional_encoding(kind: str, max_len: int, dim: int) -> PositionalEncoding:
    """Build the positional encoding named ``kind`` (one of ``POSITIONAL_KINDS``).

    >>> positional_encoding("sinusoidal", 512, 128)(torch.zeros(2, 10, 128)).shape
    torch.Size([2, 10, 128])
    """
    if kind not in _KINDS:
        raise AttnclfError(unknown_name("positional encoding", kind, POSITIONAL_KINDS))
    return _KINDS[kind](max_len, dim)
