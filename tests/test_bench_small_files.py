"""bench/small_files.py: the n-gram buckets by class count, and the rule that chooses the file default."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import small_files  # noqa: E402

SETS = ["ag3k", "imdb3k", "sst2", "ng3k"]
A, D, F = "(a) defaults", "(d) scaled n-gram branch", "(f) small model, no branch"


def cells(**means: list[float]) -> dict:
    """Cells whose mean validation accuracies are ``means[candidate letter]`` (percent), one a set."""
    names = {"a": A, "d": D, "f": F}
    return {f"{name} {names[letter]}": {"mean_validation_accuracy": value / 100}
            for letter, values in means.items() for name, value in zip(SETS, values)}


def test_branch_buckets_shrink_with_the_classes():
    assert [small_files.branch_buckets(c) for c in (2, 4, 5, 20, 150)] == [2**20, 2**20, 2**19, 2**17, 2**14]


def test_f_is_chosen_when_both_pass_and_d_leads_by_half_a_point_or_less():
    chosen = small_files.verdict(cells(a=[80, 80, 80, 80], d=[82.5, 82.5, 82.5, 82.5], f=[82, 82, 82, 82]), SETS)
    assert chosen["chosen"] == F and chosen[D]["passes"] and chosen[F]["passes"]


def test_d_is_chosen_when_both_pass_and_d_leads_by_more():
    chosen = small_files.verdict(cells(a=[80, 80, 80, 80], d=[83, 83, 83, 83], f=[82, 82, 82, 82]), SETS)
    assert chosen["chosen"] == D


def test_a_set_lost_fails_a_candidate_whatever_its_average():
    chosen = small_files.verdict(cells(a=[80, 80, 80, 80], d=[90, 90, 90, 79.9], f=[80.5, 81, 81, 81]), SETS)
    assert not chosen[D]["passes"] and not chosen[F]["passes"] and chosen["chosen"] == A


def test_an_average_gain_under_one_point_fails():
    chosen = small_files.verdict(cells(a=[80, 80, 80, 80], d=[80.9, 80.9, 80.9, 80.9], f=[82, 82, 82, 82]), SETS)
    assert not chosen[D]["passes"] and chosen["chosen"] == F


def test_no_verdict_until_every_set_has_every_candidate():
    partial = cells(a=[80, 80, 80, 80], d=[83, 83, 83, 83], f=[82, 82, 82, 82])
    del partial[f"ng3k {F}"]
    assert small_files.verdict(partial, SETS)["chosen"] is None
