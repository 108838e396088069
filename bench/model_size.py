"""How large `self-attn` is with the file default (recipes.FILE_SELF_ATTN at the file recipe's max_len, what `train
--train-file` builds) against the general defaults (at theirs), by number of classes: the n-gram branch holds a weight
and a ratio per feature and class, and its budget (nb_ngram_bucket_budget) halves its bigram buckets for more than four
classes. Models are built as outlines (no memory), so the sizes are exact and the script takes seconds.

    python bench/model_size.py [--vocab-size 20000] [--classes 2 4 20 150]
"""

from __future__ import annotations

import argparse

from attnclf.models import build_model
from attnclf.models.memory import model_bytes, outlining
from attnclf.recipes import file_recipe
from attnclf.text.tokenizer import TokenizerConfig


def outline(recipe: dict, vocab_size: int, classes: int):
    """The self-attn ``recipe`` builds (the tokens it reads size its positions), as an outline."""
    tokens = TokenizerConfig(**recipe.get("tokenizer", {})).max_len
    with outlining():
        return build_model("self-attn", vocab_size=vocab_size, num_classes=classes, max_len=tokens,
                           **recipe.get("model_config", {}))


def mib(model) -> float:
    return model_bytes(model) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab-size", type=int, default=20000)
    parser.add_argument("--classes", type=int, nargs="+", default=[2, 4, 20, 150])
    args = parser.parse_args()
    for classes in args.classes:
        file_default = outline(file_recipe(), args.vocab_size, classes)
        print(f"{classes} classes: file default {mib(file_default):,.1f} MiB ({file_default.ngram_logits.buckets:,} "
              f"bigram buckets), general defaults {mib(outline({}, args.vocab_size, classes)):,.1f} MiB")


if __name__ == "__main__":
    main()
