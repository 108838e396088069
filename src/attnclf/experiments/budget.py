"""The experiments' training budgets: what every cell of `compare` and `ablate` gets.

``DEFAULT`` fills only what the dataset's recipe leaves open (the generated
sets have recipes; the real corpora do not), so ``synthetic`` keeps the case
study's 20 epochs while IMDB is sampled down to a size a 2-core CPU trains
fifteen times within the hour. ``QUICK`` overrides the recipe as well: a
sanity run in minutes, not a result. Explicit flags beat both.

>>> from attnclf.training.run import DataSettings
>>> setup = Setup(DataSettings(dataset="imdb"), train={"epochs": 5})
>>> budgeted = with_budget(setup, QUICK)
>>> budgeted.train["epochs"], budgeted.data.max_train_examples
(5, 1500)
"""

from __future__ import annotations

from dataclasses import replace

from ..recipes import recipe_for
from .cells import Setup

DEFAULT = {
    "data": {"max_train_examples": 10000, "max_test_examples": 5000},
    "train": {"epochs": 3},
    "tokenizer": {"max_len": 256},
}
QUICK = {
    "data": {"max_train_examples": 1500, "max_test_examples": 500},
    "train": {"epochs": 3},
    "tokenizer": {"max_len": 128},
}


def with_budget(setup: Setup, budget: dict, under_recipe: bool = False) -> Setup:
    """``setup`` with ``budget`` filling each value the user did not set (nor the recipe, if ``under_recipe``)."""
    recipe = recipe_for(setup.data.dataset) if under_recipe else {}

    def fill(section: str, explicit: dict) -> dict:
        return {k: v for k, v in budget[section].items() if k not in recipe.get(section, {})} | explicit

    data = replace(setup.data, **{k: v for k, v in budget["data"].items() if getattr(setup.data, k) is None})
    return replace(setup, data=data, train=fill("train", setup.train), tokenizer=fill("tokenizer", setup.tokenizer))
