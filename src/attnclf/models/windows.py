"""A classifier of long documents: any model's summary of every window, pooled across windows.

``WindowedClassifier(base, WindowConfig(pooling="attention"))`` reads a
(batch, windows, window_len) batch (see ``attnclf.text.windows``): the base
model summarises each real window into one vector (all windows of the batch in
one (windows, window_len) pass), the vectors are pooled across the text's
windows (learned-query attention, or masked mean / max), and the base model's
head classifies the pooled vector. A text of one window gets exactly the base
model's logits, whatever the pooling: pooling one vector returns it.

>>> from attnclf.models import build_model
>>> from attnclf.text.windows import WindowConfig
>>> model = WindowedClassifier(build_model("boe", vocab_size=20), WindowConfig()).eval()
>>> ids = torch.tensor([[[5, 6, 7], [7, 8, 0]]])  # one text, two windows
>>> out = model(ids, ids != 0)
>>> out.logits.shape, out.window_weights.shape
(torch.Size([1, 2]), torch.Size([1, 2]))
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnclf.errors import AttnclfError
from attnclf.models.attention import AttentionPooling, masked_pool
from attnclf.models.base import Classifier, ModelOutput
from attnclf.text.windows import WindowConfig


@dataclass
class WindowedOutput(ModelOutput):
    """``ModelOutput`` plus ``window_weights``: (batch, windows) attention across windows, 0 at padded
    windows (None unless ``pooling="attention"``). ``pooling_weights`` is None: no single token
    sequence was pooled."""

    window_weights: torch.Tensor | None = None


class WindowedClassifier(Classifier):
    """``base`` applied to every window of a long text, its summaries pooled, then ``base``'s head."""

    def __init__(self, base: Classifier, windows: WindowConfig) -> None:
        super().__init__()
        self.base = base
        self.windows = windows
        self.config = base.config  # what the run records and callers read (num_classes, max_len)
        self.summary_dim = base.summary_dim
        self.window_pool = AttentionPooling(base.summary_dim) if windows.pooling == "attention" else None

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                **options) -> WindowedOutput:
        if options:
            raise AttnclfError(f"a windowed model takes no {', '.join(options)}: explanations of windowed "
                               f"runs are not supported")
        if input_ids.dim() != 3:
            raise AttnclfError(f"a windowed model reads (batch, windows, window_len) ids, got shape "
                               f"{tuple(input_ids.shape)}; batch texts with attnclf.text.windows.text_batches")
        mask = input_ids != self.config.pad_id if attention_mask is None else attention_mask.bool()
        present = mask.any(dim=-1)  # (batch, windows): windows holding at least one token
        summaries = self.base.summarize(input_ids[present], mask[present]).vector
        per_window = summaries.new_zeros(*present.shape, summaries.size(-1)).index_put((present,), summaries)
        if self.window_pool is None:
            pooled, weights = masked_pool(per_window, present, self.windows.pooling), None
        else:
            pooled, weights = self.window_pool(per_window, present)
        return WindowedOutput(logits=self.base.classify(pooled), window_weights=weights)


def windowed(model: Classifier, windows: WindowConfig | None) -> Classifier:
    """``model`` wrapped to read windows, or ``model`` itself when ``windows`` is None.

    >>> from attnclf.models import build_model
    >>> type(windowed(build_model("boe", vocab_size=20), WindowConfig())).__name__
    'WindowedClassifier'
    """
    return model if windows is None else WindowedClassifier(model, windows)


def window_config(model: torch.nn.Module) -> WindowConfig | None:
    """The windows ``model`` reads, or None for a model that reads one truncated sequence per text.

    >>> from attnclf.models import build_model
    >>> model = build_model("boe", vocab_size=20)
    >>> window_config(model), window_config(windowed(model, WindowConfig(max_windows=4))).max_windows
    (None, 4)
    """
    return model.windows if isinstance(model, WindowedClassifier) else None
