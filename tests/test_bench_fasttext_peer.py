"""bench/fasttext_peer.py: the file fastText trains from, and which grid setting it keeps."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import fasttext_peer  # noqa: E402


def test_the_training_file_holds_every_text_with_its_label_shuffled(tmp_path):
    # fastText reads its file in order: a corpus listing one class first (IMDB does) must not reach it so.
    texts = [f"Review {i}<br />Was GOOD!" for i in range(100)]
    labels = [0] * 50 + [1] * 50
    lines = fasttext_peer.write_fasttext_file(tmp_path / "train.txt", texts, labels).read_text().splitlines()
    assert sorted(lines) == sorted(f"__label__{label} review {i} was good !" for i, label in enumerate(labels))
    assert {line.split()[0] for line in lines[:50]} == {"__label__0", "__label__1"}


def test_the_first_best_setting_is_kept_and_diverged_ones_are_not():
    grid = [{"lr": 0.1, "validation_accuracy": 0.7}, {"lr": 0.25, "validation_accuracy": None},
            {"lr": 0.5, "validation_accuracy": 0.8}, {"lr": 1.0, "validation_accuracy": 0.8}]
    assert fasttext_peer.choose(grid)["lr"] == 0.5
    assert fasttext_peer.choose(grid[:2])["lr"] == 0.1


def _leftover_bytes_after_training_file(folder: Path, zero: bool) -> int:
    """In a spawned child: the child's set-up, an IMDB-sized training file written, then how many bytes of a 1 MB
    ``posix_memalign`` block (the size of a small unigram matrix) are not zero."""
    import ctypes

    from attnclf.training.device import fix_mmap_threshold

    if zero:
        fasttext_peer.zero_new_blocks()
    fix_mmap_threshold(128 * 1024)
    texts = [" ".join(["Great", "film<br />", "seen", "twice!"] * 80) + str(i) for i in range(20_000)]
    fasttext_peer.write_fasttext_file(folder / "train.txt", texts, [i % 2 for i in range(20_000)])
    block, size = ctypes.c_void_p(), 1 << 20
    assert ctypes.CDLL(None).posix_memalign(ctypes.byref(block), 64, ctypes.c_size_t(size)) == 0
    return size - ctypes.string_at(block, size).count(0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_fasttexts_child_hands_out_cleared_blocks_after_the_heap_held_text(tmp_path):
    # fastText 0.9.3 leaves nine tenths of a one-thread model's input matrix as posix_memalign returned it
    assert fasttext_peer.in_child(_leftover_bytes_after_training_file, tmp_path, True) == 0
