"""bench/suspects.py: the flipped labels it plants, and the sample of a dataset it ranks (--sample)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import suspects  # noqa: E402

from attnclf.data.base import TextDataset  # noqa: E402


def rows(count: int) -> TextDataset:
    return TextDataset([f"text {i}" for i in range(count)], [i % 3 for i in range(count)], ["a", "b", "c"])


def test_a_sample_is_the_same_rows_each_time_in_their_order():
    # A figure measured on "10,000 IMDB reviews" is one command's again: the same reviews, as a file holds them.
    first, again = suspects.sampled(rows(50), 20), suspects.sampled(rows(50), 20)
    assert first.texts == again.texts and len(first) == 20
    numbers = [int(text.split()[1]) for text in first.texts]
    assert numbers == sorted(numbers) and first.labels == [n % 3 for n in numbers]
    assert first.label_names == ["a", "b", "c"]


def test_flipped_rows_carry_another_class():
    data = rows(100)
    before = list(data.labels)
    flipped = suspects.flipped_rows(data, 0.1, seed=0)
    assert len(flipped) == 10
    assert all(data.labels[i] != before[i] for i in flipped)
    assert all(data.labels[i] == before[i] for i in range(100) if i not in flipped)
