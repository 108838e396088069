"""Plots and the self-contained HTML report of a run: ``write_report(run_dir)``."""

from .html import write_report

__all__ = ["write_report"]
