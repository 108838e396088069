"""Metrics and example picking."""

from .metrics import compute_metrics, evaluate, pick_examples

__all__ = ["compute_metrics", "evaluate", "pick_examples"]
