"""The shared checks of values callers pass to the library (attnclf.checks)."""

import pytest

from attnclf.checks import check_threads, weight
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
