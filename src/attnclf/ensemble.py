"""Several trained runs of one task, voting by their averaged class probabilities.

The cheapest accuracy a from-scratch model can buy: a few seeds of one recipe
disagree on the texts none of them is sure about, and their mean probability
is more often right than any one of them (BENCHMARKS.md: +0.9 points on IMDB,
+3.7 on 20 Newsgroups for three seeds).

>>> # from attnclf.ensemble import Ensemble
>>> # ensemble = Ensemble.load(["runs/imdb-seed0", "runs/imdb-seed1", "runs/imdb-seed2"])
>>> # ensemble.predict(["a slow start, then a wonderful film"])
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .classifier import Classifier
from .errors import AttnclfError


class Ensemble:
    """Members trained on the same data with one label set (same names, same order); single-label runs only."""

    def __init__(self, members: Sequence[Classifier], names: Sequence[str] | None = None):
        if not members:
            raise AttnclfError("an ensemble needs at least one run")
        names = list(names or [f"member {i}" for i in range(len(members))])
        first = members[0]
        for member, name in zip(members, names, strict=True):
            if member.multi_label:
                raise AttnclfError(f"{name} is a multi-label run; ensembles average single-label runs only")
            if member.label_names != first.label_names:
                raise AttnclfError(f"{name} has labels {member.label_names}, but {names[0]} has {first.label_names}; "
                                   f"an ensemble's runs must share their labels")
            differ = [key for key, value in _data(member).items() if _data(first)[key] != value]
            if differ:
                raise AttnclfError(f"{name} was trained on other data than {names[0]} ({differ[0]}: "
                                   f"{_data(member)[differ[0]]!r} vs {_data(first)[differ[0]]!r}); "
                                   f"an ensemble's runs must share their data")
        self.members = list(members)
        self.label_names = first.label_names
        self.config = first.config  # where the test data came from, for `attnclf evaluate`
        self.multi_label = False

    @classmethod
    def load(cls, run_dirs: Sequence[str | Path], device: str = "auto") -> "Ensemble":
        """Load every run directory (see ``Classifier.load``)."""
        return cls([Classifier.load(run_dir, device=device) for run_dir in run_dirs], [str(d) for d in run_dirs])

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """(texts, classes): the members' probabilities, averaged."""
        return np.mean([member.predict_proba(texts) for member in self.members], axis=0)

    def predict(self, texts: Sequence[str]) -> list[str]:
        """The most probable label of each text under the averaged probabilities (names, not Predictions)."""
        return [self.label_names[i] for i in self.predict_proba(texts).argmax(axis=1)]


def _data(member: Classifier) -> dict:
    """What a member was trained on, with defaults filled in (older runs lack newer fields).

    Where the data was read from, and through which cache, may differ between runs of the same data.
    """
    from dataclasses import asdict

    from .training.run import DataSettings

    data = asdict(DataSettings(**member.config.get("settings", {}).get("data", {})))
    for where in ("data_dir", "token_cache", "token_cache_dir"):
        data.pop(where)
    return data
