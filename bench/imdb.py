"""IMDB with the default `self-attn` recipe: test accuracy, training/inference speed, memory.

    python bench/imdb.py                          # the recipe `attnclf train --dataset imdb` uses
    python bench/imdb.py --name imdb-bf16 -- --bf16   # any `attnclf train` flag after --

Target (issue 5): >= 91.5% test accuracy, trained in <= 15 minutes on 2 cores.
"""

from train_bench import main

if __name__ == "__main__":
    main("imdb", __doc__)
