"""The shared checks of values callers pass to the library (attnclf.checks)."""

import numpy as np
import pytest

from attnclf.checks import check_seed, check_threads, weight
from attnclf.errors import AttnclfError


@pytest.mark.parametrize("check, start", [
    (lambda: weight("w" * 100_000, "class_weight['spam']"), "class_weight['spam'] must be a finite number of at "
                                                             "least 0, got 'wwwwwwww"),
    (lambda: weight([-1] * 100_000, "sample_weight[3]"), "sample_weight[3] must be a finite number of at least 0, "
                                                          "got [-1, -1"),
    (lambda: check_threads("t" * 100_000), "threads must be a whole number, got 'tttttttt"),
    (lambda: check_threads(-10 ** 5000), "threads must be at least 1, got an integer of over"),
])
def test_a_huge_value_is_named_by_its_start_not_echoed_whole(check, start):
    # (a service's request, or a grid of settings, may hand these a megabyte; -10 ** 5000 has no str() at all)
    with pytest.raises(AttnclfError) as refused:
        check()
    assert str(refused.value).startswith(start) and len(str(refused.value)) < 300


def test_a_real_number_too_large_for_a_float_reads_as_infinite_and_is_refused_in_one_line():
    # float(10 ** 400) raises OverflowError: a float setting given a huge int from Python ended in a traceback.
    # As float("1e400") (and so `--lr 1e400`) reads, it is infinite: the checks that refuse infinity refuse it.
    import math

    from attnclf.checks import real_number
    from attnclf.training.trainer import TrainConfig

    assert real_number(10 ** 400) == math.inf and real_number(-10 ** 400) == -math.inf
    with pytest.raises(AttnclfError, match=r"^lr must be a finite number, at least 0, got inf$"):
        TrainConfig(lr=10 ** 400)
    with pytest.raises(AttnclfError, match=r"^sample_weight\[0\] must be a finite number of at least 0, got 1000"):
        weight(10 ** 400, "sample_weight[0]")
    assert TrainConfig(checkpoint_seconds=10 ** 400).checkpoint_seconds == math.inf  # (infinite: only at the end)


def test_a_seed_is_named_as_its_caller_gave_it():
    # One check for every seed (TrainConfig's, the split seed, faithfulness's, pretrain's); each names its own.
    assert check_seed(np.int64(3), "split_seed") == 3 and type(check_seed(np.int64(3))) is int
    with pytest.raises(AttnclfError, match=r"^--split-seed must be at least 0 and below 4294967296, got -2$"):
        check_seed(-2, "--split-seed")
    with pytest.raises(AttnclfError, match=r"^seed must be a whole number, got 1.5$"):
        check_seed(1.5)
