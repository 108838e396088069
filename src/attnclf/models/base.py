"""What every classifier returns, and the forward signature they share."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import ClassVar

import torch
from torch import nn

from ..checks import real_number, whole_number
from ..errors import AttnclfError, shown


@dataclass
class ModelOutput:
    """Logits plus whatever attention the model has.

    ``pooling_weights``: (batch, seq) weights of the pooling layer; exactly zero
    at padding and summing to one over real tokens; None for models that do not
    pool by attention. ``self_attentions``: per layer, (batch, heads, seq, seq),
    only when ``output_attentions=True`` was asked for; rows of padding queries
    are zero, columns of padding keys are zero.
    """

    logits: torch.Tensor
    pooling_weights: torch.Tensor | None = None
    self_attentions: list[torch.Tensor] | None = None


@dataclass
class Summary:
    """One vector per text, what the model's head classifies, and the attention that produced it.

    ``vector``: (batch, summary_dim). ``pooling_weights`` and
    ``self_attentions`` as in ``ModelOutput``.
    """

    vector: torch.Tensor
    pooling_weights: torch.Tensor | None = None
    self_attentions: list[torch.Tensor] | None = None


@dataclass
class ModelConfig:
    """Fields every model config has; subclasses add their own, all with defaults."""

    vocab_size: int = 1000
    num_classes: int = 2
    pad_id: int = 0
    max_len: int = 512
    # Fewest stacked layers the model runs with: 0 leaves a Transformer its embeddings and pooling; an LSTM needs 1.
    min_layers: ClassVar[int] = 0
    # Most: each layer is Python objects before it is tensors (some 40 kB of them in the outline that sizes a model,
    # ``memory.outlining``), so a config.json asking for a million would take 40 GB before its size could be refused.
    # Ten times the deepest published Transformer's.
    max_layers: ClassVar[int] = 1024

    def __post_init__(self) -> None:
        """Each field holds its default's type (``--set`` parses values from text) and a size is at least 1."""
        for f in fields(self):
            value, default = getattr(self, f.name), f.default
            if isinstance(default, float) and real_number(value) is not None:
                value = real_number(value)  # --set dropout=0 parses as an int; grids give numpy's numbers
            elif type(default) is int and whole_number(value) is not None:
                value = whole_number(value)  # (numpy's integers would not go into config.json)
            elif isinstance(default, bool) and type(value) is int and value in (0, 1):
                value = bool(value)  # --set embedding_norm=1 did too, and runs saved it so
            setattr(self, f.name, value)
            if type(value) is not type(default):
                raise AttnclfError(f"model field {f.name} takes {type(default).__name__} values like {default!r}, "
                                   f"got {shown(value)}")
            sized = f.name in ("vocab_size", "num_classes", "max_len", "d_model", "heads") or f.name.endswith("_dim")
            least = 1 if sized else self.min_layers if f.name == "layers" else 0
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < least:
                raise AttnclfError(f"model field {f.name} must be at least {least}, got {value!r}")
            if f.name == "layers" and value > self.max_layers:
                raise AttnclfError(f"model field layers must be at most {self.max_layers:,}, got {value!r}")
            if "dropout" in f.name and not value < 1:
                raise AttnclfError(f"model field {f.name} must be below 1, got {value!r}")
        if self.pad_id >= self.vocab_size:  # (the embedding's padding row: torch asserts it)
            raise AttnclfError(f"model field pad_id must be below vocab_size ({self.vocab_size:,}), got "
                               f"{self.pad_id!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def embedding_dim(self) -> int:
        """Width of the token embedding: ``d_model`` for the Transformer models, else ``embed_dim``."""
        return getattr(self, self.embedding_field)

    @property
    def embedding_field(self) -> str:
        """The field that sets ``embedding_dim`` (``--set FIELD=N``)."""
        return "d_model" if hasattr(self, "d_model") else "embed_dim"


class Classifier(nn.Module):
    """Base class: ``forward(input_ids, attention_mask, ...) -> ModelOutput``.

    - ``input_ids``: (batch, seq) long; ``attention_mask``: (batch, seq) bool,
      True at real tokens. Padding may sit anywhere the mask says.
    - ``token_embeddings``: optional (batch, seq, dim) tensor used in place of
      ``self.embed_tokens(input_ids)``, so gradient-based explanations can
      differentiate with respect to the embeddings. Positional information is
      still added inside the model.
    - ``pooling_override``: optional (batch, seq) weights used in place of the
      learned pooling weights (the uniform-attention check). Models without
      attention pooling ignore it.
    - ``output_attentions``: also return per-layer self-attention maps.

    A model is two halves: ``summarize`` reads a text into one vector of
    ``summary_dim`` numbers (taking the options above), ``classify`` turns
    vectors into logits. ``forward`` is the one composed with the other; a
    long document's windows are summarised one by one and their summaries
    pooled before ``classify`` (see ``windows.WindowedClassifier``).
    """

    config: ModelConfig
    summary_dim: int

    def summarize(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                  token_embeddings: torch.Tensor | None = None, pooling_override: torch.Tensor | None = None,
                  output_attentions: bool = False) -> Summary:
        raise NotImplementedError

    def classify(self, summary: torch.Tensor) -> torch.Tensor:
        """(batch, summary_dim) summaries -> (batch, num_classes) logits."""
        raise NotImplementedError

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **options) -> ModelOutput:
        summary = self.summarize(input_ids, attention_mask, **options)
        return ModelOutput(self.classify(summary.vector), summary.pooling_weights, summary.self_attentions)

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def model_device(model: torch.nn.Module) -> torch.device:
    """Where ``model``'s weights are, and so where its inputs must go.

    >>> model_device(nn.Linear(2, 2))
    device(type='cpu')
    """
    return next(model.parameters()).device
