"""Metrics and example picking.

``compute_metrics``, ``evaluate``, ``misclassified`` and ``pick_examples`` load ``.metrics`` (and with it scikit-learn, two seconds) when
first asked for: predicting imports this package for ``.predict`` alone, and needs neither.
"""

import importlib

__all__ = ["compute_metrics", "evaluate", "misclassified", "pick_examples"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module(".metrics", __name__), name)
    from attnclf import _submodule  # its modules (.calibration, .multilabel, ...), as attnclf's own

    return _submodule(__name__, name)
