"""Word vectors: counting them, their file format and its errors, and starting a model from them."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import hashlib
import itertools
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from attnclf.cli import main
from attnclf.errors import DataError
from attnclf.text.cleaning import CleaningConfig, unicode_normalized
from attnclf.text.tokenizer import Tokenizer, TokenizerConfig
from attnclf.text.vectors import WordVectors, count_vectors

# Two word families that share contexts only within the family.
GOOD = ["wonderful", "superb", "brilliant"]
BAD = ["awful", "dreadful", "terrible"]


def corpus(repeats: int = 40) -> list[str]:
    rng = np.random.default_rng(0)
    texts = []
    for _ in range(repeats):
        for family, context in ((GOOD, "loved it truly"), (BAD, "hated it sadly")):
            texts.append(f"{context} {rng.choice(family)} {context}")
    return texts


def cosine(vectors: WordVectors, a: str, b: str) -> float:
    u, v = vectors.vectors[vectors.index[a]], vectors.vectors[vectors.index[b]]
    return float(u @ v / np.linalg.norm(u) / np.linalg.norm(v))


def test_words_sharing_contexts_get_close_vectors():
    vectors = count_vectors(corpus(), dim=4, min_count=1)
    assert vectors.vectors.shape == (len(vectors.words), 4) and "<pad>" not in vectors.index
    within = min(cosine(vectors, "wonderful", "superb"), cosine(vectors, "awful", "dreadful"))
    across = max(cosine(vectors, "wonderful", "awful"), cosine(vectors, "superb", "terrible"))
    assert within > 0.9 and within > across + 0.5


def test_counting_is_deterministic_and_keeps_texts_apart():
    first, second = count_vectors(corpus(), dim=3, min_count=1), count_vectors(corpus(), dim=3, min_count=1)
    np.testing.assert_array_equal(first.vectors, second.vectors)
    # "x" and "y" never share a text: had the stream run on, each would be the other's neighbour.
    apart = count_vectors(corpus() + ["x"] * 30 + ["y"] * 30, dim=3, min_count=1)
    np.testing.assert_allclose(apart.vectors[apart.index["x"]], 0, atol=1e-6)  # no context, no direction


def test_save_then_load_round_trips_and_glove_text_loads(tmp_path):
    vectors = count_vectors(corpus(), dim=3, min_count=1)
    path = tmp_path / "v.vec"
    vectors.save(path)
    assert path.read_text(encoding="utf-8").splitlines()[0] == f"{len(vectors.words)} 3"
    loaded = WordVectors.load(path)
    assert loaded.words == vectors.words
    np.testing.assert_allclose(loaded.vectors, vectors.vectors, rtol=1e-5, atol=1e-6)
    glove = tmp_path / "glove.txt"
    glove.write_text("good 0.1 0.2\nbad -0.1 -0.2\n", encoding="utf-8")
    assert WordVectors.load(glove).index == {"good": 0, "bad": 1}
    glove.write_bytes(b"\xef\xbb\xbfgood 0.1 0.2\r\nbad -0.1 -0.2\r\n")  # Notepad's: a byte-order mark, CRLF
    assert WordVectors.load(glove).index == {"good": 0, "bad": 1}


@pytest.mark.parametrize("suffix, opened", [(".gz", "gzip"), (".bz2", "bz2"), (".xz", "lzma")])
def test_compressed_vectors_load_as_they_are_distributed(tmp_path, suffix, opened):
    # fastText's vectors come as cc.en.300.vec.gz; data files are read compressed, so these are too.
    import importlib

    plain = tmp_path / "v.vec"
    count_vectors(corpus(), dim=3, min_count=1).save(plain)
    packed = tmp_path / f"v.vec{suffix}"
    with importlib.import_module(opened).open(packed, "wb") as f:
        f.write(plain.read_bytes())
    loaded, expected = WordVectors.load(packed), WordVectors.load(plain)
    assert loaded.words == expected.words
    np.testing.assert_array_equal(loaded.vectors, expected.vectors)
    packed.write_bytes(packed.read_bytes()[:-20])  # cut short in the download
    with pytest.raises(DataError, match=rf"^{re.escape(str(packed))}(: not a readable|, after line \d+:) .*truncated"):
        WordVectors.load(packed)


def test_vectors_that_are_not_utf8_are_named_by_line(tmp_path):
    path = tmp_path / "latin1.vec"
    path.write_bytes("good 0.1 0.2\ncaf\xe9 0.3 0.4\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1.vec, line 2: byte 0xe9 at byte offset 16 is not UTF-8"):
        WordVectors.load(path)


@pytest.mark.parametrize("name, content", [
    ("GoogleNews.bin", b"2 3\ngood " + np.array([0.1, 0.5, -0.2], dtype=np.float32).tobytes()),
    ("GoogleNews.bin.gz", gzip.compress(b"2 3\ngood " + np.array([0.1, 0.5, -0.2], dtype=np.float32).tobytes())),
    ("cc.en.300.bin", np.array([793712314, 12], dtype="<i4").tobytes() + bytes(64)),  # (fastText's magic number)
], ids=["word2vec", "word2vec-gzipped", "fasttext"])
def test_binary_vectors_are_told_as_binary_not_as_text_to_resave(tmp_path, name, content):
    # (their bytes read as text fail as not UTF-8, and "re-save the file as UTF-8" tells no one what to do)
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataError) as raised:
        WordVectors.load(path)
    assert str(raised.value).startswith(f"{path}: a binary file of vectors (word2vec's or fastText's .bin), which is "
                                        f"not read: give their text format")


@pytest.mark.parametrize("content, message", [
    ("2 2\ngood 0.1 0.2\nbad 0.3\n", "line 3: expected a word and 2 numbers, got 2 fields"),
    ("good 0.1 0.2\nbad 0.3 zero\n", "line 2, column 3: 'zero' is not a finite number"),
    ("good 0.1 nan\n", "line 1, column 3: 'nan' is not a finite number"),
    ("good 0.1 0.2\nbad 1e39 0.1\n", "line 2, column 2: '1e39' is not a finite number"),
    ("", "no word vectors"),
    ("good\nbad\n", "line 1: a word without numbers"),
])
def test_malformed_files_are_named_by_line_and_column(tmp_path, content, message):
    path = tmp_path / "bad.vec"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        WordVectors.load(path)


def test_initialise_copies_known_words_scaled_and_leaves_the_rest():
    tokenizer = Tokenizer.train(["good bad unseen"], TokenizerConfig(min_frequency=1))
    vectors = WordVectors(["good", "bad", "other"], np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32))
    embedding = torch.nn.Embedding(tokenizer.vocab_size, 2, padding_idx=0)
    before = embedding.weight.detach().clone()
    assert vectors.initialise(embedding, tokenizer, std=0.5) == 2
    scale = 0.5 / vectors.vectors.std()
    vocab = tokenizer.backend.get_vocab()
    torch.testing.assert_close(embedding.weight[vocab["good"]], torch.tensor([1.0, 2.0]) * scale)
    torch.testing.assert_close(embedding.weight[vocab["bad"]], torch.tensor([3.0, 4.0]) * scale)
    for untouched in (0, 1, vocab["unseen"]):  # padding, <unk>, a word without a vector
        torch.testing.assert_close(embedding.weight[untouched], before[untouched])
    with pytest.raises(DataError, match="3 dimensions but the model embeds tokens in 2"):
        WordVectors(["good"], np.ones((1, 3), dtype=np.float32)).initialise(embedding, tokenizer, 0.5)


def _started(vectors: WordVectors, tokenizer: Tokenizer) -> tuple[int, dict[str, list[float]]]:
    """How many vocabulary words ``vectors`` start, and each word's first row, in the file's units (rescaled back)."""
    embedding = torch.nn.Embedding(tokenizer.vocab_size, vectors.dim, padding_idx=0)
    found = vectors.initialise(embedding, tokenizer, std=1.0)
    rows = embedding.weight.detach() * float(vectors.vectors.std())
    return found, {word: rows[token_id].tolist() for word, token_id in tokenizer.vocabulary().items()}


def test_a_word_listed_twice_keeps_its_first_vector(tmp_path):
    # The last had won: a lower-cased fastText file's "good" took the vector of its rarest casing, "GOOD".
    path = tmp_path / "twice.vec"
    path.write_text("3 2\ngood 1 2\nbad 3 4\ngood 5 6\n", encoding="utf-8")
    found, rows = _started(WordVectors.load(path), Tokenizer.train(["good bad"], TokenizerConfig(min_frequency=1)))
    assert found == 2 and rows["good"] == pytest.approx([1, 2])


def test_a_vectors_file_in_decomposed_unicode_matches_the_normalised_words_of_the_text(tmp_path):
    # Its "cafe" + U+0301 (NFD, as macOS file names and some exports spell it) matched no word of the NFC-normalised
    # vocabulary, "caf\u00e9": only the count of words found, a line --quiet hides, showed it.
    path = tmp_path / "nfd.vec"
    path.write_text("2 2\ncafe\u0301 1 2\ngood 3 4\n", encoding="utf-8")
    tokenizer = Tokenizer.train(["cafe\u0301 good", "caf\u00e9 good"], TokenizerConfig(min_frequency=1))
    found, rows = _started(WordVectors.load(path), tokenizer)
    assert found == 2 and rows["caf\u00e9"] == pytest.approx([1, 2])


def test_a_cased_vectors_file_matches_a_lower_cased_vocabulary_through_its_cleaning(tmp_path):
    # Matched word for word, a cased file's "Paris" and "Film" found no vector for the vocabulary's "paris" and
    # "film": of the three words, one ("good") started from the file.
    path = tmp_path / "cased.vec"
    path.write_text("5 2\nParis 1 2\nGOOD 3 4\ngood 5 6\nFilm 7 8\nFILM 9 10\n", encoding="utf-8")
    vectors = WordVectors.load(path)
    found, rows = _started(vectors, Tokenizer.train(["Paris good film"], TokenizerConfig(min_frequency=1)))
    assert found == 3  # good: the file's "good" itself; film: the first of the two that clean to it
    expected = {"paris": [1, 2], "good": [5, 6], "film": [7, 8]}
    assert {word: rows[word] for word in expected} == {word: pytest.approx(row) for word, row in expected.items()}
    cased = TokenizerConfig(min_frequency=1, cleaning=CleaningConfig(lowercase=False))
    found, rows = _started(vectors, Tokenizer.train(["Paris good FILM"], cased))
    assert found == 3 and rows["FILM"] == pytest.approx([9, 10])


def test_vectors_counted_here_start_every_cleanings_run_as_they_did_word_for_word():
    # Their words are cleaned already, so matching them through the run's cleaning must set no other row than
    # matching them as written did, under every cleaning (lemmatised or read as posts, "films" and "sooooo" would
    # have started the "film" and "sooo" the file lacks); counted with the default cleaning (`attnclf vectors`) or
    # with the run's own (--embeddings count).
    texts = ["The films were sooooo GOOD!!!! I loved the cafe\u0301 scenes", "the films were awful, i hated it",
             "\u6771\u4eac films were good", "@ann https://t.co/x the scenes were awful"] * 3
    settings = [setting.name for setting in dataclasses.fields(CleaningConfig)]
    for values in itertools.product((False, True), repeat=len(settings)):
        cleaning = CleaningConfig(**dict(zip(settings, values)))
        tokenizer = Tokenizer.train(texts, TokenizerConfig(min_frequency=1, cleaning=cleaning))
        for counted_with in (CleaningConfig(), cleaning):
            vectors = count_vectors(texts, dim=2, min_count=1, cleaning=counted_with)
            as_written = {unicode_normalized(word, cleaning): row for word, row in reversed(vectors.index.items())}
            expected = torch.nn.Embedding(tokenizer.vocab_size, 2, padding_idx=0)
            embedding = copy.deepcopy(expected)
            scaled = torch.from_numpy(vectors.vectors / vectors.vectors.std())
            with torch.no_grad():
                for word, token_id in tokenizer.vocabulary().items():
                    if token_id > 1 and word in as_written and vectors.vectors[as_written[word]].any():
                        expected.weight[token_id] = scaled[as_written[word]]
            vectors.initialise(embedding, tokenizer, std=1.0)
            torch.testing.assert_close(embedding.weight, expected.weight, msg=f"{cleaning}, counted {counted_with}")


def test_a_bpe_words_first_piece_finds_the_words_vector_and_a_later_piece_none():
    # BPE stores a word's first piece as "\u2581good" and a later one bare ("ness" of "goodness"): matched as stored,
    # no word found its vector, and pieces inside words took the vectors of words that happen to be spelt alike.
    tokenizer = Tokenizer.train(["good", "ness", "goodness"], TokenizerConfig(kind="bpe", min_frequency=1))
    stored = tokenizer.backend.get_vocab()
    assert {"\u2581good", "\u2581ness", "ness", "od"} <= set(stored)
    vectors = WordVectors(["good", "ness", "od"], np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32))
    embedding = torch.nn.Embedding(tokenizer.vocab_size, 2, padding_idx=0)
    before = embedding.weight.detach().clone()
    assert vectors.initialise(embedding, tokenizer, std=0.5) == 2
    scale = 0.5 / vectors.vectors.std()
    torch.testing.assert_close(embedding.weight[stored["\u2581good"]], torch.tensor([1.0, 2.0]) * scale)
    torch.testing.assert_close(embedding.weight[stored["\u2581ness"]], torch.tensor([3.0, 4.0]) * scale)
    for piece in ("ness", "od"):  # inside a word
        torch.testing.assert_close(embedding.weight[stored[piece]], before[stored[piece]])


def test_vectors_then_train_from_them(tmp_path, capsys):
    texts = tmp_path / "corpus.txt"
    texts.write_text("\n".join(corpus()) + "\n", encoding="utf-8")
    vectors = tmp_path / "v.vec"
    vectors = tmp_path / "new" / "folder" / "v.vec"  # made for it
    assert main(["vectors", "--dataset", "demo", "--dataset", "synthetic", "--file", str(texts), "--dim", "16",
                 "-o", str(vectors)]) == 0
    from attnclf.data.registry import load_splits

    # Both datasets' training texts and the file's
    texts_counted = len(load_splits("demo").train) + len(load_splits("synthetic").train) + len(corpus())
    assert f"words x 16 dimensions from {texts_counted:,} texts" in capsys.readouterr().out
    run = tmp_path / "run"
    assert main(["train", "--dataset", "demo", "--epochs", "1", "--max-train-examples", "200", "--set", "d_model=16",
                 "--set", "layers=1", "--embeddings", str(vectors), "--embeddings-std", "0.3", "--output", str(run),
                 "--no-report"]) == 0
    found = re.search(r"embeddings: ([\d,]+) of ([\d,]+) words start from", capsys.readouterr().err)
    assert found and 0 < int(found[1].replace(",", "")) <= int(found[2].replace(",", ""))
    config = json.loads((run / "config.json").read_text())
    assert config["settings"]["embeddings"] == str(vectors) and config["settings"]["embeddings_std"] == 0.3
    assert config["embeddings_sha256"] == hashlib.sha256(vectors.read_bytes()).hexdigest()
    # Vectors counted again into the same file are other vectors: a refit must start where the run started.
    assert main(["vectors", "--dataset", "demo", "--dim", "16", "-o", str(vectors), "--overwrite"]) == 0
    capsys.readouterr()
    assert main(["refit", str(run)]) == 2
    assert capsys.readouterr().err.strip().endswith(f"started from the word vectors {vectors}, which have changed "
                                                    f"since; it must start from the same ones")


@pytest.mark.parametrize("flags, message", [
    (["--min-count", "0"], "--min-count must be at least 1, got 0"),
    (["--vocab-size", "2"], "--vocab-size must be at least 3, got 2"),
    (["--dim", "0"], "--dim and --window must be whole numbers, at least 1, got 0 and 5"),
])
def test_the_vectors_command_refuses_a_setting_by_its_flag(tmp_path, capsys, flags, message):
    assert main(["vectors", "--dataset", "demo", *flags, "-o", str(tmp_path / "v.vec")]) == 2
    assert capsys.readouterr().err == f"attnclf: error: {message}\n"


def test_vectors_read_a_data_files_text_column_not_its_lines(tmp_path, capsys):
    rows = [{"id": i, "title": "headline", "review": text, "stars": 5} for i, text in enumerate(corpus())]
    data = tmp_path / "reviews.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    vectors = tmp_path / "v.vec"
    assert main(["vectors", "--file", str(data), "--text-column", "review", "--dim", "8", "--min-count", "1",
                 "-o", str(vectors)]) == 0
    assert f"from {len(rows):,} texts" in capsys.readouterr().out
    words = {line.split(" ", 1)[0] for line in vectors.read_text(encoding="utf-8").splitlines()[1:]}
    assert "loved" in words and not words & {"id", "review", "stars"}  # the texts, not the JSON around them
    # the default column, "text", is absent
    assert main(["vectors", "--file", str(data), "-o", str(vectors), "--overwrite"]) == 2
    assert "no text column 'text'" in capsys.readouterr().err
    assert main(["vectors", "--file", str(data), "--text-column", "title", "--text-column", "review", "--dim", "8",
                 "--min-count", "1", "-o", str(vectors), "--overwrite"]) == 0  # several columns: each row's, joined
    words = {line.split(" ", 1)[0] for line in vectors.read_text(encoding="utf-8").splitlines()[1:]}
    assert {"headline", "loved"} <= words


def test_vectors_threads_bound_the_blas_the_counting_runs_in(tmp_path):
    """Both numpy's BLAS and scipy's (the SVD's QR), in a process that had loaded neither when --threads took effect:
    threadpoolctl bounds only the libraries loaded by then, and scipy's is loaded for the count alone."""
    texts = tmp_path / "corpus.txt"
    texts.write_text("\n".join(corpus()) + "\n", encoding="utf-8")
    code = ("import sys\n"
            "from threadpoolctl import threadpool_info\n"
            "import attnclf.text.vectors as vectors\n"
            "print('scipy' in sys.modules)\n"
            "pmi = vectors._positive_pmi  # (called after scipy is loaded, before the SVD)\n"
            "def counted(*args):\n"
            "    print(sorted(lib['num_threads'] for lib in threadpool_info() if lib['user_api'] == 'blas'))\n"
            "    return pmi(*args)\n"
            "vectors._positive_pmi = counted\n"
            "from attnclf.cli import main\n"
            f"sys.exit(main(['vectors', '--file', {str(texts)!r}, '--dim', '8', '--min-count', '1', '--threads', '1',\n"
            f"                '-o', {str(tmp_path / 'v.vec')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    scipy_loaded_before, threads = done.stdout.splitlines()[:2]
    assert scipy_loaded_before == "False"
    assert set(json.loads(threads)) == {1}


def test_vectors_default_to_the_width_the_default_model_trains_at(tmp_path, capsys, monkeypatch):
    from attnclf.recipes import RECIPES

    texts = tmp_path / "corpus.txt"  # 200 words, enough for 64 dimensions
    texts.write_text("".join(" ".join(f"w{(7 * i + j) % 200}" for j in range(8)) + "\n" for i in range(400)))
    assert main(["vectors", "--file", str(texts), "--min-count", "1", "-o", str(tmp_path / "v.vec")]) == 0
    printed = capsys.readouterr()
    assert "x 64 dimensions" in printed.out  # the width self-attn trains at on a file (FILE_SELF_ATTN)
    # ... and that of no other model on a file: the note says so (vectors counted at 64 were refused by them).
    assert printed.err == ("note: 64 dimensions fit self-attn trained on a single-label file; other models and "
                           "multi-label runs on files embed tokens in 128 (count vectors for them with --dim 128)\n")
    monkeypatch.setitem(RECIPES["demo"]["model_config"], "d_model", 16)  # demo's 46 words are too few for 64
    assert main(["vectors", "--dataset", "demo", "--min-count", "1", "-o", str(tmp_path / "demo.vec")]) == 0
    assert "x 16 dimensions" in capsys.readouterr().out
    # So the default model of that dataset takes them as they are.
    assert main(["train", "--dataset", "demo", "--epochs", "1", "--max-train-examples", "200", "--embeddings",
                 str(tmp_path / "demo.vec"), "--threads", "1", "--output", str(tmp_path / "run"), "--no-report"]) == 0


def test_too_few_words_for_vectors_names_the_flag_vectors_takes(tmp_path, capsys):
    (tmp_path / "few.txt").write_text("a good film\na bad film\n")
    assert main(["vectors", "--file", str(tmp_path / "few.txt"), "--min-count", "9", "-o", str(tmp_path / "v.vec")]) == 2
    assert capsys.readouterr().err == ("attnclf: error: no word occurs at least 9 times in the 2 texts: nothing to "
                                       "count vectors for\n")
    # Counted inside a run, the message names the run's own way out: train has no --min-count.
    (tmp_path / "few.csv").write_text("text,label\n" + "a good film,pos\na bad film,neg\n" * 3)
    assert main(["train", "--train-file", str(tmp_path / "few.csv"), "--min-frequency", "1", "--embeddings", "count",
                 "--output", str(tmp_path / "run"), "--quiet", "--no-report"]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("attnclf: error: --embeddings count: ")


def test_the_help_of_dim_names_every_dataset_whose_default_width_is_not_self_attns():
    from attnclf.cli import _subparser
    from attnclf.data.registry import sources
    from attnclf.models.classifiers import SelfAttentionConfig
    from attnclf.recipes import embedding_width

    dim = next(action for action in _subparser("vectors")._actions if "--dim" in action.option_strings)
    narrower = {name for name in sources() if embedding_width(name) != SelfAttentionConfig.d_model}
    assert {embedding_width(name) for name in narrower} == {64}
    assert narrower == {name for name in sources() if re.search(rf"\b{re.escape(name)}\b(?!-)", dim.help)}


@pytest.mark.parametrize("args, message", [
    (["vectors", "-o", "{tmp}/v.vec"], "give --dataset NAME and/or --file PATH"),
    (["train", "--dataset", "demo", "--embeddings-std", "0.3"], "--embeddings-std needs --embeddings FILE"),
    (["train", "--dataset", "demo", "--embeddings", "count", "--token-cache"], "do not combine with --token-cache"),
    (["train", "--resume", "--embeddings", "{tmp}/three.vec"], "no run to resume (no config.json there)"),
    (["train", "--dataset", "demo", "--embeddings", "{tmp}/missing.vec"], "no such file of word vectors"),
    (["train", "--dataset", "demo", "--embeddings", "{tmp}"], "is a folder, not a file of word vectors"),
    (["train", "--dataset", "demo", "--embeddings", "{tmp}/bad.vec", "--set", "d_model=16"],
     "line 1, column 2: 'x' is not a finite number"),
    (["train", "--dataset", "demo", "--embeddings", "{tmp}/three.vec", "--set", "d_model=16"],
     "the word vectors have 3 dimensions but the model embeds tokens in 16; build vectors with --dim 16, or train at "
     "their width with --set d_model=3"),
    (["train", "--dataset", "demo", "--model", "boe", "--embeddings", "{tmp}/three.vec", "--set", "embed_dim=16"],
     "build vectors with --dim 16, or train at their width with --set embed_dim=3"),
])
def test_command_errors_are_one_line_and_write_no_run(tmp_path, capsys, args, message):
    (tmp_path / "bad.vec").write_text("good x\n", encoding="utf-8")
    (tmp_path / "three.vec").write_text("good 1 2 3\n", encoding="utf-8")
    output = tmp_path / "run"
    assert main([a.format(tmp=tmp_path) for a in args] + (["--output", str(output)] if args[0] == "train" else [])) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not output.exists()


def test_count_embeddings_counts_the_training_texts_and_a_recipe_can_ask_for_it(tmp_path, capsys, monkeypatch):
    from attnclf import recipes
    from attnclf.cli import build_parser, build_settings

    run = tmp_path / "run"
    assert main(["train", "--dataset", "demo", "--epochs", "1", "--max-train-examples", "300", "--set", "d_model=16",
                 "--set", "layers=1", "--embeddings", "count", "--output", str(run), "--no-report"]) == 0
    counted = re.search(r"embeddings: counted ([\d,]+) word vectors from ([\d,]+) texts", capsys.readouterr().err)
    settings = json.loads((run / "config.json").read_text())
    train_texts = settings["data"]["train_examples"]  # the training part; validation texts are not counted
    assert counted and int(counted[2].replace(",", "")) == train_texts and int(counted[1].replace(",", "")) > 0
    assert settings["settings"]["embeddings"] == "count"
    assert settings["counted_embeddings"]["texts"] == train_texts and settings["counted_embeddings"]["seconds"] >= 0

    assert main(["train", "--resume", "--output", str(run), "--epochs", "2", "--quiet", "--no-report"]) == 0
    resumed = json.loads((run / "config.json").read_text())
    assert resumed["counted_embeddings"] == settings["counted_embeddings"]  # the record survives a resume

    monkeypatch.setitem(recipes.RECIPES, "demo", {**recipes.RECIPES.get("demo", {}), "embeddings": "count"})
    parse = build_parser().parse_args
    assert build_settings(parse(["train", "--dataset", "demo"])).embeddings == "count"
    assert build_settings(parse(["train", "--dataset", "demo", "--embeddings", "none"])).embeddings is None
    assert main(["train", "--dataset", "demo", "--token-cache", "--output", str(tmp_path / "cached")]) == 2
    assert "the dataset's recipe may set" in capsys.readouterr().err  # the recipe's count, named as such


def test_experiment_cells_train_from_scratch_and_ignore_the_scale_of_unused_vectors(tmp_path):
    from dataclasses import replace

    from attnclf.experiments.cells import Setup, Variant, check_same_settings, variant_settings
    from attnclf.rundir import FORMAT_VERSION, atomic_write_json
    from attnclf.training.settings import DataSettings

    cell = variant_settings(Setup(DataSettings(dataset="imdb")), Variant("self-attn", "self-attn"), 0, tmp_path)
    assert cell.embeddings is None  # the imdb recipe counts vectors; a comparison cell does not
    run = tmp_path / "cell"
    run.mkdir()
    older = replace(cell, embeddings_std=0.5)  # a cell saved when the unused default was 0.5
    saved = {"format_version": FORMAT_VERSION, "model": {"name": "self-attn", "config": {}, "parameters": 0}}
    atomic_write_json(run / "config.json", {**saved, "settings": older.to_dict()})
    check_same_settings(run, cell)  # no refusal: neither side uses vectors
    atomic_write_json(run / "config.json", {**saved, "settings": replace(older, embeddings="v.vec").to_dict()})
    with pytest.raises(Exception, match="other embeddings settings"):
        check_same_settings(run, cell)


def test_count_vectors_and_word_vectors_refuse_what_they_cannot_count_or_store(tmp_path):
    from attnclf.errors import AttnclfError

    with pytest.raises(AttnclfError, match="pass a list of texts, not a single string"):
        count_vectors("a good film " * 50, dim=2, min_count=1)  # (would count its characters)
    words = count_vectors((text for text in ["a good film", "a bad film"] * 20), dim=2, min_count=1).words
    assert sorted(words) == ["a", "bad", "film", "good"]  # a generator is read once, whole
    # Named as Python names them (the command line: by its flags, below).
    with pytest.raises(DataError, match="^dim and window must be whole numbers, at least 1, got 8.5 and 5$"):
        count_vectors(["a good film"] * 20, dim=8.5)
    with pytest.raises(AttnclfError, match="^min_count must be at least 1, got 0$"):  # (not tokenizer min_frequency)
        count_vectors(["a good film"] * 20, min_count=0)
    with pytest.raises(AttnclfError, match="^vocab_size must be at least 3, got 2$"):
        count_vectors(["a good film"] * 20, vocab_size=2)
    with pytest.raises(DataError, match=r"one row per word: 2 words, vectors of shape \(3, 4\)"):
        WordVectors(["a", "b"], np.zeros((3, 4), dtype=np.float32))
    # What load would refuse is refused when saving, not after.
    with pytest.raises(DataError, match="word 'a b' is empty or holds a space or line break"):
        WordVectors(["a b"], np.zeros((1, 2), dtype=np.float32)).save(tmp_path / "v.vec")
    with pytest.raises(DataError, match="the vector of 'a' holds a number that is not finite in float32"):
        WordVectors(["a"], np.full((1, 2), 1e39)).save(tmp_path / "v.vec")  # (finite in float64)
    with pytest.raises(DataError, match="word '\\\\ud800' is not valid Unicode: a lone surrogate"):
        WordVectors(["\ud800"], np.ones((1, 2), dtype=np.float32)).save(tmp_path / "v.vec")
    with pytest.raises(DataError, match="no vectors to write: 0 words"):
        WordVectors([], np.zeros((0, 2), dtype=np.float32)).save(tmp_path / "v.vec")
    assert not (tmp_path / "v.vec").exists()
    WordVectors(["a\xa0b"], np.ones((1, 2), dtype=np.float32)).save(tmp_path / "v.vec")  # what load reads, saves
    assert WordVectors.load(tmp_path / "v.vec").words == ["a\xa0b"]


def test_vectors_summary_says_what_was_counted_and_where_it_went():
    from attnclf.text.vectors import file_width_note, vectors_summary

    vectors = WordVectors(["good", "film", "bad"], np.zeros((3, 2), dtype=np.float32))
    assert vectors_summary(vectors, 12_000, "v.vec") == "3 words x 2 dimensions from 12,000 texts: v.vec"
    assert file_width_note(64) == ("note: 64 dimensions fit self-attn trained on a single-label file; other models "
                                   "and multi-label runs on files embed tokens in 128 (count vectors for them with "
                                   "--dim 128)")


def test_a_huge_word_or_number_is_named_by_its_start_in_one_line(tmp_path):
    path = tmp_path / "long.vec"
    path.write_text(f"good 0.1 {'9' * 10_000}x\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 1, column 3: '9999.*\.\.\. is not a finite number$") as refused:
        WordVectors.load(path)
    assert len(str(refused.value)) < 300
    for words, vectors in ((["a " * 5_000], np.zeros((1, 2))), (["w" * 10_000], np.full((1, 2), 1e39))):
        with pytest.raises(DataError) as refused:
            WordVectors(words, vectors).save(tmp_path / "v.vec")
        assert len(str(refused.value)) < 300 and "..." in str(refused.value)


def test_co_occurrences_weigh_one_over_their_distance_and_unknown_words_take_no_part():
    from attnclf.text.vectors import _positive_pmi

    # Text 2 3 4, window 2: the neighbours (2, 3) and (3, 4) count 1 each, (2, 4) at distance 2 counts 1/2.
    counts = np.zeros((6, 6))
    counts[2, 3] = counts[3, 2] = counts[3, 4] = counts[4, 3] = 1.0
    counts[2, 4] = counts[4, 2] = 0.5
    words, contexts = counts.sum(axis=1), counts.sum(axis=0) ** 0.75
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.log(counts * contexts.sum() / np.outer(words, contexts))
    expected = np.where(np.isfinite(expected) & (expected > 0), expected, 0.0)
    np.testing.assert_allclose(_positive_pmi([np.array([2, 3, 4])], 6, window=2).toarray(), expected)
    # <unk> (1) and <pad> (0) around the words change no count: the same matrix, their rows and columns empty.
    padded = _positive_pmi([np.array([1, 2, 3, 4, 1, 0])], 6, window=2).toarray()
    np.testing.assert_allclose(padded, expected)


def test_vectors_keep_an_existing_output_unless_overwrite(tmp_path, cli_error, monkeypatch):
    # `vectors -o FILE` replaced the vectors runs had trained from: they then refused to refit or add members.
    from attnclf.text import vectors as vectors_module

    texts = tmp_path / "corpus.txt"
    texts.write_text("".join(" ".join(f"w{(7 * i + j) % 40}" for j in range(8)) + "\n" for i in range(100)))
    out = tmp_path / "v.vec"
    out.write_text("1 2\nold 0.5 0.5\n", encoding="utf-8")
    counted = vectors_module.count_vectors
    monkeypatch.setattr(vectors_module, "count_vectors", lambda *args, **kwargs: pytest.fail("counted first"))
    flags = ["vectors", "--file", str(texts), "--dim", "4", "--min-count", "1", "-o", str(out)]
    assert cli_error(flags) == f"{out} exists; give --overwrite to replace it"
    assert out.read_text(encoding="utf-8") == "1 2\nold 0.5 0.5\n"
    # Its own input is refused even with --overwrite: the texts would be lost.
    assert cli_error([*flags[:-1], str(texts), "--overwrite"]) == f"--output {texts} is the --file it reads; give " \
                                                                  f"another file"
    monkeypatch.setattr(vectors_module, "count_vectors", counted)
    assert main([*flags, "--overwrite"]) == 0
    assert out.read_text(encoding="utf-8").startswith("40 4\n")
