"""SST-2 with the default `self-attn` recipe: GLUE dev accuracy and stsa.binary test accuracy.

    python bench/sst2.py
    python bench/sst2.py --name sst2-small -- --epochs 2    # any `attnclf train` flag after --

Trains what ``attnclf train --dataset sst2`` trains (GLUE train's 60,818
phrases and sentences left once a tenth of its sentences is held out to
validate; its test split is GLUE dev), then scores the same model on the 1,821
sentences of stsa.binary's test set (SST's test sentences; one, "what 's next
?", is also a phrase of GLUE train). Target (issue 5): >= 85% on both.
"""

from common import splits
from train_bench import main

if __name__ == "__main__":
    main("sst2", __doc__, extra_tests={"stsa_binary_test_accuracy": splits("sst2-sentences").test})
