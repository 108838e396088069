"""Smoke tests on the real corpora: counts from each dataset's MANIFEST.md.

They read ``$ATTNCLF_DATA_DIR`` or ``../shared/datasets`` next to the repository,
and are skipped, with the reason, when a corpus is not there.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from attnclf.data import ag_news, imdb, newsgroups, sst2
from attnclf.errors import DataError

pytestmark = pytest.mark.realdata

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("ATTNCLF_DATA_DIR") or (REPO.parent / "shared" / "datasets"))


def _dirs(locate) -> list[Path]:
    if locate([DATA_DIR]) is None:
        pytest.skip(f"real dataset not found under {DATA_DIR} (set ATTNCLF_DATA_DIR)")
    return [DATA_DIR]


def _per_class(ds) -> dict[str, int]:
    counts = Counter(ds.labels)
    return {name: counts[i] for i, name in enumerate(ds.label_names)}


@pytest.fixture(scope="module")
def imdb_splits():
    return imdb.load(_dirs(imdb.locate))  # (about 7 s: the archive is read through)


def test_imdb_counts_and_movie_groups(imdb_splits):
    splits = imdb_splits
    for ds in (splits.train, splits.test):
        assert _per_class(ds) == {"neg": 12_500, "pos": 12_500}
        assert all(group.startswith("tt") for group in ds.groups)
    # Test movies were chosen to be (almost) disjoint from train's; a grouped validation relies on it.
    assert len(set(splits.train.groups) & set(splits.test.groups)) <= 1
    assert splits.train.texts[0].startswith("Story of a man who has unnatural feelings for a pig.")


def test_sst2_glue_counts_and_sentence_validation():
    splits = sst2.load_glue(_dirs(sst2.locate_glue))
    # 6,885 of the 67,349 rows are no other row's run of words: a tenth of those validate, and
    # their 5,842 phrases leave training with them.
    assert _per_class(splits.validation) == {"negative": 329, "positive": 360}
    assert len(splits.train) == 67_349 - 689 - 5_842
    assert not set(splits.validation.texts) & set(splits.train.texts)
    assert _per_class(splits.test) == {"negative": 428, "positive": 444}


def test_sst2_glue_train_holds_no_dev_sentence_and_one_test_sentence():
    # GLUE's phrases come from SST's train sentences; one test sentence also occurs inside one of them.
    learned = set(sst2.load_glue(_dirs(sst2.locate_glue)).train.texts)
    sentences = sst2.load_sentences(_dirs(sst2.locate_sentences))
    assert not learned & set(sentences.validation.texts)
    assert learned & set(sentences.test.texts) == {"what 's next ?"}


def test_sst2_sentences_counts_and_dev_matches_glue_dev():
    splits = sst2.load_sentences(_dirs(sst2.locate_sentences))
    assert _per_class(splits.train) == {"negative": 3_310, "positive": 3_610}
    assert _per_class(splits.validation) == {"negative": 428, "positive": 444}
    assert _per_class(splits.test) == {"negative": 912, "positive": 909}
    # Once -lrb- and \/ are undone, every dev sentence is a GLUE dev sentence (sst2/MANIFEST.md).
    glue_dev = sst2.load_glue(_dirs(sst2.locate_glue)).test
    stsa_dev = sorted(zip(splits.validation.texts, splits.validation.labels))
    assert stsa_dev == sorted(zip(glue_dev.texts, glue_dev.labels))


def test_ag_news_test_split_and_missing_train_error():
    dirs = _dirs(ag_news.locate)
    test = ag_news.load_test(dirs)
    assert _per_class(test) == {"World": 1_900, "Sports": 1_900, "Business": 1_900, "Sci/Tech": 1_900}
    assert not any("\\" in text or "#39;" in text or " quot;" in text for text in test.texts)
    if not ag_news.is_complete(ag_news.locate(dirs)):
        with pytest.raises(DataError, match=r"ag_news: .*train.csv is missing .*--download"):
            ag_news.load(dirs)


def test_20newsgroups_counts():
    splits = newsgroups.load(_dirs(newsgroups.locate))
    assert (len(splits.train), len(splits.test)) == (11_314, 7_532)
    assert len(splits.train.label_names) == 20
    assert _per_class(splits.train)["talk.religion.misc"] == 377
    assert _per_class(splits.test)["alt.atheism"] == 319
    # 44 train posts hold bytes above 0x7F; Latin-1 keeps them (20newsgroups/MANIFEST.md).
    assert sum(any(ord(ch) > 127 for ch in text) for text in splits.train.texts) == 44


def test_imdb_unlabelled_corpus_holds_no_test_review(imdb_splits):
    # 270 of the 50,000 unsup files copy one of 269 test reviews; word vectors and pretraining leave them out.
    from attnclf.data.registry import unlabelled_corpus

    texts = unlabelled_corpus("imdb", _dirs(imdb.locate)[0])
    assert len(texts) == 25_000 + 50_000 - 270
    # (The training reviews themselves share 123 texts with test, as in the original data: they are labelled training.)
    assert not set(texts[25_000:]) & set(imdb_splits.test.texts)
