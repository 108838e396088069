"""Reproducible experiments: `compare` models under one budget, `ablate` one config axis at a time.

Every cell (a model config x a seed) is an ordinary run directory, so an
interrupted experiment continues where it stopped when run again, and every
number in a table can be traced to the run that produced it.

>>> from attnclf.training.settings import DataSettings
>>> setup = Setup(DataSettings(dataset="synthetic"), seeds=(0, 1, 2), threads=1)
>>> # print(compare(setup, "experiments/compare-synthetic").markdown)
>>> # print(ablate(setup, "experiments/ablate-synthetic", axes={"heads": [1, 2, 4]}).markdown)
"""

from .ablate import AXES, ablate, toy_order
from .cells import Setup, Variant, run_variants
from .compare import DEFAULT_MODELS, compare
from .tables import ExperimentResult

__all__ = ["AXES", "DEFAULT_MODELS", "ExperimentResult", "Setup", "Variant", "ablate", "compare", "run_variants",
           "toy_order"]
