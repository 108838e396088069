"""20 Newsgroups (by-date, 20 classes) with the default `self-attn` recipe.

    python bench/newsgroups.py
    python bench/newsgroups.py --name newsgroups-3ep -- --epochs 3   # any `attnclf train` flag after --

Trains what ``attnclf train --dataset 20newsgroups`` trains; validation is a
stratified 10% of the by-date train split. Target (issue 5): >= 87% test accuracy.
"""

from train_bench import main

if __name__ == "__main__":
    main("20newsgroups", __doc__)
