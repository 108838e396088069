"""The experiments' training budgets: what every cell of `compare` and `ablate` gets.

A recipe is tuned for one run; an experiment trains five models three times,
so by default it caps what the recipe asks for (``DEFAULT_CAPS``): at most
7,000 training and 5,000 test texts and 256 tokens per text. A recipe's
smaller values stand (SST-2 keeps its 64 tokens, every sentence of
``sst2-sentences`` stays), and nothing else of the recipe changes. On a file
a ``self-attn`` cell keeps the file recipe's tokens (``recipes.FILE_SELF_ATTN_TOKENIZER``,
uncapped: the cell is what ``train --train-file`` trains, which the small-file note
sends users to compare). ``QUICK`` replaces the recipe's values outright: a sanity
run in minutes, not a result. Explicit flags beat both.

>>> from attnclf.training.settings import DataSettings
>>> imdb = Setup(DataSettings(dataset="imdb"), train={"epochs": 5})
>>> quick = with_quick(imdb)
>>> quick.train["epochs"], quick.data.max_train_examples, quick.tokenizer["max_len"]
(5, 1500, 128)
>>> capped = with_caps(imdb)
>>> capped.data.max_train_examples, capped.tokenizer["max_len"]  # the IMDB recipe asks for 800 tokens
(7000, 256)
"""

from __future__ import annotations

from dataclasses import replace

from ..recipes import recipe_for
from ..text.tokenizer import TokenizerConfig
from .cells import Setup

DEFAULT_CAPS = {
    "data": {"max_train_examples": 7000, "max_test_examples": 5000},
    "tokenizer": {"max_len": 256},
}
QUICK = {
    "data": {"max_train_examples": 1500, "max_test_examples": 500},
    "train": {"epochs": 3},
    "tokenizer": {"max_len": 128},
}


def with_quick(setup: Setup) -> Setup:
    """``setup`` with ``QUICK`` in place of every value the user did not set."""
    data = replace(setup.data, **{k: v for k, v in QUICK["data"].items() if getattr(setup.data, k) is None})
    return replace(setup, data=data, train=QUICK["train"] | setup.train,
                   tokenizer=QUICK["tokenizer"] | setup.tokenizer)


def with_caps(setup: Setup) -> Setup:
    """``setup`` with ``DEFAULT_CAPS`` wherever the user set nothing and the recipe (or default) asks for more."""
    recipe = recipe_for(setup.data.dataset).get("tokenizer", {})
    tokenizer = dict(setup.tokenizer)
    for key, cap in DEFAULT_CAPS["tokenizer"].items():
        if key not in tokenizer and recipe.get(key, getattr(TokenizerConfig(), key)) > cap:
            tokenizer[key] = cap
    # No data setting means all of it, which is more than any cap.
    data = replace(setup.data, **{k: v for k, v in DEFAULT_CAPS["data"].items() if getattr(setup.data, k) is None})
    return replace(setup, data=data, tokenizer=tokenizer)
