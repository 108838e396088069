"""Metrics and example picking."""

from .metrics import compute_metrics, pick_examples

__all__ = ["compute_metrics", "pick_examples"]
