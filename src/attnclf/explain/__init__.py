"""Why did the model decide? Per-token explanations, and measurements of how faithful they are.

- ``explain(classifier, texts, method)`` (also ``Classifier.explain``): ``Explanations``, an ``Explanation`` per
  text (a multi-label run's: per label explained), by attention, rollout, grad-input, integrated-gradients or
  occlusion (``METHODS``); a notebook shows them as coloured tokens (``render.notebook_html``).
- ``measure_faithfulness(classifier, data)``: deletion test against random deletion, rank
  agreement between methods, and the uniform-attention check.
- ``render``: coloured terminal text, JSON lines, HTML pages and PNG images for slides.
"""

from .explanation import Explanation, Explanations, explain
from .faithfulness import FaithfulnessResult, measure_faithfulness, summary_table
from .methods import METHODS, Attribution, attribute, available_methods, self_attention_maps

__all__ = ["METHODS", "Attribution", "Explanation", "Explanations", "FaithfulnessResult", "attribute",
           "available_methods", "explain", "measure_faithfulness", "self_attention_maps", "summary_table"]
