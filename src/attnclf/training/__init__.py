"""Training: device choice, the loop, and whole runs.

``TrainConfig`` and ``Trainer`` load ``.trainer`` (and with it scikit-learn's metrics, two seconds) when first asked
for: predicting imports this package for ``.device`` alone.
"""

import importlib

from .device import resolve_device

__all__ = ["resolve_device", "TrainConfig", "Trainer"]


def __getattr__(name: str):
    if name in ("TrainConfig", "Trainer"):
        return getattr(importlib.import_module(".trainer", __name__), name)
    from attnclf import _submodule  # its modules (.run_data, .refit, .suspects, ...), as attnclf's own

    return _submodule(__name__, name)
