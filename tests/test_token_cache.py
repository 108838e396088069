"""The memory-mapped token cache, streamed user files, and training from the cache."""

import csv
import json
import os
import random
import re

import numpy as np
import pytest

from attnclf.cli import main
from attnclf.data.files import file_labels, iter_records
from attnclf.errors import AttnclfError, DataError
from attnclf.text.cache import MappedSequences, TokenCache, build_cache, encode_packed, file_identity
from attnclf.text.tokenizer import Tokenizer, TokenizerConfig
from attnclf.training.run import train_run
from attnclf.training.settings import DataSettings, RunSettings
from attnclf.training.trainer import TrainConfig

POSITIVE, NEGATIVE = ["good", "great", "fine", "superb"], ["bad", "awful", "dull", "poor"]
FILLER = ["the", "film", "plot", "was", "and", "it", "movie", "cast"]


def corpus(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.randint(0, 1)
        words = [rng.choice(FILLER) for _ in range(rng.randint(2, 14))] + [rng.choice(POSITIVE if label else NEGATIVE)]
        if rng.random() < 0.3:  # a rare word: a tokenizer trained on other rows than load_data's would differ
            words.append(f"rare{rng.randint(0, 10**6)}")
        rng.shuffle(words)
        rows.append({"text": " ".join(words) + ("<br />Ünïcode!" if rng.random() < 0.1 else ""),
                     "label": "pos" if label else "neg"})
    return rows


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows([r["text"], r["label"]] for r in rows)
    return path


@pytest.fixture
def files(tmp_path):
    return write_jsonl(tmp_path / "train.jsonl", corpus(300, 0)), write_csv(tmp_path / "test.csv", corpus(80, 1))


def records(path, label_names=("neg", "pos")):
    index = {name: i for i, name in enumerate(label_names)}
    return lambda: ((text, index[label]) for _, text, label in iter_records(path, label_names=list(label_names)))


def test_cached_sequences_equal_the_tokenizer_encodings_across_chunks(files, tmp_path):
    train, test = files
    texts = [r["text"] for r in corpus(80, 1)]
    tokenizer = Tokenizer.train(texts, TokenizerConfig(min_frequency=1, max_len=8))  # max_len 8 truncates some
    directory = build_cache(tmp_path / "c", records(test)(), tokenizer, ["neg", "pos"], chunk_texts=7)
    cache = TokenCache(directory)
    assert len(cache) == 80 and cache.meta["texts"] == 80
    expected = tokenizer.encode(texts)
    assert any(len(ids) == 8 for ids in expected) and any(len(ids) < 8 for ids in expected)
    assert [cache.sequences[i].tolist() for i in range(80)] == expected
    assert cache.sequences.lengths.tolist() == [len(ids) for ids in expected]
    assert [cache.texts[i] for i in range(80)] == texts  # UTF-8 round trip, for examples and reports
    assert cache.labels.tolist() == [int(r["label"] == "pos") for r in corpus(80, 1)]
    part = cache.dataset("test").subset([5, 2])
    assert [s.tolist() for s in part.sequences] == [expected[5], expected[2]] and part.texts[1] == texts[2]
    (directory / "offsets.npy").unlink()
    with pytest.raises(DataError, match="damaged token cache"):
        TokenCache(directory)


def test_a_cache_that_stored_literal_special_tokens_as_their_ids_is_not_reused(tmp_path, monkeypatch):
    # Format 1 was built when the tokenizer encoded a text's "<pad>" as the padding id; the tokenizer's JSON, which
    # the key holds, is unchanged, so reused it would train on ids that predict and evaluate no longer give.
    from tokenizers import Tokenizer as HFTokenizer

    from attnclf.text import cache as cache_module

    tokenizer = Tokenizer.train(["a good <pad> film", "a bad film"] * 3, TokenizerConfig(min_frequency=1))
    old = Tokenizer(HFTokenizer.from_str(tokenizer.backend.to_str()), tokenizer.config)
    old.backend.encode_special_tokens = False  # (as it encoded before)

    def text():
        return iter([("a good <pad> film", 1)])

    monkeypatch.setattr(cache_module, "CACHE_FORMAT", 1)
    stale = TokenCache.open_or_build(text, old, ["neg", "pos"], {"path": "x"}, tmp_path, lambda message: None)
    assert 0 in stale.sequences[0].tolist()
    monkeypatch.undo()
    cache = TokenCache.open_or_build(text, tokenizer, ["neg", "pos"], {"path": "x"}, tmp_path, lambda message: None)
    assert cache.sequences[0].tolist() == tokenizer.encode(["a good <pad> film"])[0]
    assert 0 not in cache.sequences[0].tolist()


def test_second_open_reuses_the_cache_and_settings_or_data_change_the_key(files, tmp_path):
    train, _ = files
    tokenizer = Tokenizer.train((r["text"] for r in corpus(300, 0)), TokenizerConfig(min_frequency=1))
    calls, messages = [], []

    def counted():
        calls.append(1)
        return records(train)()

    def open_cache(tok=tokenizer, identity=None):
        return TokenCache.open_or_build(counted, tok, ["neg", "pos"], identity or file_identity(train),
                                        tmp_path / "root", messages.append)

    first = open_cache()
    stamp = (first.directory / "ids.bin").stat().st_mtime_ns
    second = open_cache()
    assert second.directory == first.directory and len(calls) == 1
    assert (first.directory / "ids.bin").stat().st_mtime_ns == stamp
    assert messages[0].startswith("building token cache") and messages[1] == f"reusing token cache {first.directory}"

    shorter = Tokenizer(tokenizer.backend, TokenizerConfig(min_frequency=1, max_len=4))
    assert open_cache(shorter).directory != first.directory and len(calls) == 2
    os.utime(train, ns=(stamp, stamp + 10**9))  # touched: the same data, the same cache
    assert open_cache(identity=file_identity(train)).directory == first.directory and len(calls) == 2
    # Rewritten at the same size and modification time (as within one tick of a coarse clock): new data, new key.
    before = train.stat()
    write_jsonl(train, [row | {"label": {"pos": "neg", "neg": "pos"}[row["label"]]} for row in corpus(300, 0)])
    os.utime(train, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (train.stat().st_size, train.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert open_cache(identity=file_identity(train)).directory != first.directory and len(calls) == 3
    assert not list((tmp_path / "root").glob(".*.tmp")), "temporary build directories left behind"


def test_the_same_data_numbered_in_another_class_order_is_not_given_the_first_ones_cache(files, tmp_path):
    # A cache holds class indices: reused for classes in another order, every label would silently be the other.
    train, _ = files
    tokenizer = Tokenizer.train((r["text"] for r in corpus(300, 0)), TokenizerConfig(min_frequency=1))
    caches = {order: TokenCache.open_or_build(records(train, order), tokenizer, list(order), file_identity(train),
                                              tmp_path / "root", lambda _: None)
              for order in (("neg", "pos"), ("pos", "neg"))}
    assert caches["neg", "pos"].directory != caches["pos", "neg"].directory
    assert (caches["neg", "pos"].labels == 1 - caches["pos", "neg"].labels).all()


def test_a_copy_read_in_another_format_is_not_given_the_first_ones_cache(tmp_path):
    # Keyed by content, a file and its copy share caches; but a .tsv copy of a .csv file is read otherwise (these bytes
    # hold a text and a label either way: TSV takes "w<i> ..." from the first cell, CSV "v<i> ..." after the comma).
    from attnclf.training.cached import load_cached_data

    lines = ["text\tlabel\tx,text,label"] + [f"w{i} good\t{y}\tz,v{i} good,{y}" for i, y in
                                              enumerate(["pos", "neg"] * 10)]
    (tmp_path / "rows.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "rows.tsv").write_text("\n".join(lines) + "\n")
    for name in ("rows.csv", "rows.tsv"):
        data = DataSettings(train_file=str(tmp_path / name), token_cache=True, token_cache_dir=str(tmp_path / "c"))
        splits, _ = load_cached_data(RunSettings(data, TokenizerConfig(min_frequency=1)), 0, log=lambda message: None)
        assert {text.split()[0][0] for text in splits.train.texts} == {"v" if name == "rows.csv" else "w"}


def test_tokenizer_trains_from_a_stream_like_from_a_list():
    texts = [r["text"] for r in corpus(200, 3)]
    config = TokenizerConfig(min_frequency=2)
    streamed = Tokenizer.train((t for t in texts), config)
    assert streamed.backend.get_vocab() == Tokenizer.train(texts, config).backend.get_vocab()


def test_records_stream_and_a_bad_row_is_named(tmp_path):
    rows = corpus(20, 0)
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]) + '{"text": "no label here"}\n', encoding="utf-8")
    stream = iter_records(path)
    assert [next(stream)[0] for _ in range(3)] == ["line 1", "line 2", "line 3"]  # read before the bad line
    with pytest.raises(DataError, match=r"bad.jsonl, line 4: no label column 'label'"):
        next(stream)

    bad_csv = write_csv(tmp_path / "bad.csv", rows[:2] + [{"text": "fine text", "label": "maybe"}])
    with pytest.raises(DataError, match=r"bad.csv, line 4: label 'maybe' in column 'label' is not one of"):
        file_labels(bad_csv, label_names=["neg", "pos"])
    labels, names = file_labels(write_csv(tmp_path / "ok.csv", rows))
    assert names == ["neg", "pos"] and labels.tolist() == [int(r["label"] == "pos") for r in rows]


def test_parquet_is_cached_batch_by_batch_and_a_bad_row_is_named(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    rows = corpus(40, 2)
    pq.write_table(pa.table({"text": [r["text"] for r in rows], "label": [r["label"] for r in rows]}),
                   tmp_path / "d.parquet", row_group_size=6)
    tokenizer = Tokenizer.train((r["text"] for r in rows), TokenizerConfig(min_frequency=1))
    cache = TokenCache(build_cache(tmp_path / "c", records(tmp_path / "d.parquet")(), tokenizer, ["neg", "pos"],
                                   chunk_texts=16))
    assert [cache.sequences[i].tolist() for i in range(40)] == tokenizer.encode([r["text"] for r in rows])
    texts = [r["text"] for r in rows]
    texts[33] = "  "
    pq.write_table(pa.table({"text": texts, "label": [r["label"] for r in rows]}), tmp_path / "bad.parquet",
                   row_group_size=6)
    with pytest.raises(DataError, match=r"bad.parquet, row 34: empty text in column 'text'"):
        file_labels(tmp_path / "bad.parquet")


def test_a_named_dataset_trains_from_the_cache_as_in_memory(tmp_path):
    def run(name, cached):
        settings = RunSettings(
            data=DataSettings(dataset="demo", max_train_examples=300, max_test_examples=100, token_cache=cached,
                              token_cache_dir=str(tmp_path / "cache")),
            tokenizer=TokenizerConfig(min_frequency=1, max_len=16), model="boe",
            train=TrainConfig(epochs=1, batch_size=32, patience=0, checkpoint_seconds=0, seed=2),
            output=str(tmp_path / name), device="cpu", report=False)
        return train_run(settings, progress=False)

    in_memory, cached = run("memory", False), run("cached", True)
    assert cached.history[0]["train_loss"] == in_memory.history[0]["train_loss"]
    assert cached.metrics["accuracy"] == in_memory.metrics["accuracy"]
    assert cached.metrics["examples"] == in_memory.metrics["examples"]
    config = json.loads((tmp_path / "cached" / "config.json").read_text())
    assert config["data"]["validation_examples"] == 30 and config["data"]["train_examples"] == 270
    # The same counts and the same fingerprint of the held-out texts, so later commands can check them.
    # The in-memory run also fingerprints its training texts, which its refit checks (a cached run's refit checks the
    # rows it validated on: fingerprinting every training text would decode them all again), and its test texts, which a
    # resume checks (a cached run records the keys of the data its tokenizer learned and of its test file instead).
    in_memory_data = json.loads((tmp_path / "memory" / "config.json").read_text())["data"]
    assert in_memory_data.pop("train_sha256") and in_memory_data.pop("test_sha256") and config["data"].pop(
        "tokenizer_key") and config["data"].pop("test_key") and config["data"] == in_memory_data


def test_a_failed_build_leaves_no_cache_behind(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in corpus(30, 0)) + '{"text": "", "label": "pos"}\n')
    tokenizer = Tokenizer.train(["good film", "bad film"], TokenizerConfig(min_frequency=1))
    with pytest.raises(DataError, match="line 31: empty text in column 'text'"):
        build_cache(tmp_path / "root" / "key", records(path)(), tokenizer, ["neg", "pos"], chunk_texts=8)
    assert list((tmp_path / "root").iterdir()) == []


def settings(train, test, output, cached: bool, cache_dir) -> RunSettings:
    return RunSettings(
        data=DataSettings(train_file=str(train), test_file=str(test), token_cache=cached,
                          token_cache_dir=str(cache_dir), max_train_examples=250),
        tokenizer=TokenizerConfig(min_frequency=1, max_len=16),
        model="self-attn",
        model_config={"d_model": 16, "layers": 1, "heads": 2},
        train=TrainConfig(epochs=2, batch_size=32, patience=0, checkpoint_seconds=0, seed=5),
        output=str(output),
        device="cpu",
        report=False,
    )


def test_training_from_the_cache_matches_training_in_memory(files, tmp_path):
    train, test = files
    in_memory = train_run(settings(train, test, tmp_path / "memory", False, tmp_path / "cache"), progress=False)
    cached = train_run(settings(train, test, tmp_path / "cached", True, tmp_path / "cache"), progress=False)
    assert (tmp_path / "cached" / "tokenizer.json").read_text() == (tmp_path / "memory" / "tokenizer.json").read_text()
    assert [h["train_loss"] for h in cached.history] == [h["train_loss"] for h in in_memory.history]
    for key in ("accuracy", "macro_f1", "examples"):
        assert cached.metrics[key] == in_memory.metrics[key], key
    assert len(list((tmp_path / "cache").glob("*/meta.json"))) == 2  # train and test caches
    config = json.loads((tmp_path / "cached" / "config.json").read_text())
    assert config["data"]["validation_examples"] == 25 and config["data"]["test_examples"] == 80
    # The in-memory run also fingerprints its training texts, which its refit checks (a cached run's refit checks the
    # rows it validated on: fingerprinting every training text would decode them all again), and its test texts, which a
    # resume checks (a cached run records the keys of the data its tokenizer learned and of its test file instead).
    in_memory_data = json.loads((tmp_path / "memory" / "config.json").read_text())["data"]
    assert in_memory_data.pop("train_sha256") and in_memory_data.pop("test_sha256") and config["data"].pop(
        "tokenizer_key") and config["data"].pop("test_key") and config["data"] == in_memory_data


def test_a_validation_file_is_cached_and_validates_as_in_memory(files, tmp_path):
    train, test = files
    dev = write_jsonl(tmp_path / "dev.jsonl", corpus(40, 2))
    results = {}
    for cached in (False, True):
        run_settings = settings(train, test, tmp_path / f"run-{cached}", cached, tmp_path / "cache")
        run_settings.data.validation_file = str(dev)
        results[cached] = train_run(run_settings, progress=False)
    assert [h["val_loss"] for h in results[True].history] == [h["val_loss"] for h in results[False].history]
    data = json.loads((tmp_path / "run-True" / "config.json").read_text())["data"]
    assert (data["train_examples"], data["validation_examples"]) == (250, 40)  # the sample, and the whole file


def test_cli_token_cache_reuses_and_reports_a_bad_row(files, tmp_path, capsys):
    train, test = files
    argv = ["train", "--train-file", str(train), "--token-cache", "--token-cache-dir", str(tmp_path / "c"),
            "--model", "boe", "--epochs", "1", "--min-frequency", "1", "--no-report", "--threads", "1"]
    assert main(argv + ["--output", str(tmp_path / "a")]) == 0
    capsys.readouterr()
    assert main(argv + ["--output", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert "reusing tokenizer" in err and "reusing token cache" in err and "building" not in err

    bad = tmp_path / "bad.jsonl"
    bad.write_text(train.read_text() + '{"text": "ok", "label": null}\n')
    assert main(["train", "--train-file", str(bad), "--token-cache", "--token-cache-dir", str(tmp_path / "c"),
                 "--quiet", "--output", str(tmp_path / "bad")]) == 2
    message = capsys.readouterr().err.strip()
    assert message == f"attnclf: error: {bad}, line 301: missing label in column 'label'"


@pytest.mark.parametrize("flag", ["--validation-file", "--test-file"])
def test_a_held_out_file_without_rows_is_named_and_no_run_is_left(files, tmp_path, capsys, flag):
    train, _ = files
    empty = tmp_path / "empty.csv"
    empty.write_text("text,label\n")
    assert main(["train", "--train-file", str(train), flag, str(empty), "--token-cache", "--token-cache-dir",
                 str(tmp_path / "c"), "--model", "boe", "--epochs", "1", "--min-frequency", "1", "--quiet",
                 "--threads", "1", "--output", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip() == f"attnclf: error: {empty}: empty file, no data rows"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("source, flag, named", [("file", "--multi-label", "--multi-label"),
                                                 ("file", "--windows", "--windows"),
                                                 ("topics", None, "topics, a multi-label dataset")])
def test_token_cache_refuses_what_it_cannot_hold(files, tmp_path, capsys, source, flag, named):
    data = ["--train-file", str(files[0])] if source == "file" else ["--dataset", source]
    assert main(["train", *data, "--token-cache", "--token-cache-dir", str(tmp_path / "c"), *([flag] if flag else []),
                 "--quiet", "--output", str(tmp_path / "run")]) == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith(f"attnclf: error: --token-cache does not combine with {named} yet")  # what was given
    assert "\n" not in message



def test_a_token_cache_folder_without_the_cache_is_refused_rather_than_ignored(files, tmp_path, capsys):
    # It used to train in memory, silently, and put nothing in the folder named
    assert main(["train", "--train-file", str(files[0]), "--token-cache-dir", str(tmp_path / "c"), "--quiet",
                 "--output", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip() == ("attnclf: error: --token-cache-dir says where --token-cache keeps its "
                                               "caches; add --token-cache, or drop --token-cache-dir")
    assert not (tmp_path / "run").exists() and not (tmp_path / "c").exists()
    with pytest.raises(AttnclfError, match="token_cache_dir says where token_cache keeps its caches"):
        DataSettings(train_file=str(files[0]), token_cache_dir=str(tmp_path / "c")).check(given={"token_cache_dir"})

@pytest.mark.parametrize("under", ["", "sub"])
def test_a_token_cache_folder_that_is_a_file_is_named_so(files, tmp_path, capsys, under):
    # (mkdir's own words were "File exists" and "Not a directory", as if a folder were amiss)
    taken = tmp_path / "taken"
    taken.write_text("")
    folder = taken / under if under else taken
    assert main(["train", "--train-file", str(files[0]), "--token-cache", "--token-cache-dir", str(folder),
                 "--quiet", "--threads", "1", "--output", str(tmp_path / "run")]) == 2
    told = f"{folder} is a file" if folder == taken else f"{folder}: {taken} is a file"
    assert capsys.readouterr().err.strip() == f"attnclf: error: token cache folder {told}; give a folder"
    assert not (tmp_path / "run").exists()


def test_mapped_sequences_feed_bucket_batches_without_reading_lengths(tmp_path, files):
    from attnclf.text.batching import BucketBatches

    _, test = files
    tokenizer = Tokenizer.train((r["text"] for r in corpus(80, 1)), TokenizerConfig(min_frequency=1))
    cache = TokenCache(build_cache(tmp_path / "c", records(test)(), tokenizer, ["neg", "pos"]))
    batches = BucketBatches(cache.sequences, cache.labels, batch_size=16, shuffle=True, seed=0)
    in_memory = BucketBatches(tokenizer.encode([r["text"] for r in corpus(80, 1)]), cache.labels.tolist(),
                              batch_size=16, shuffle=True, seed=0)
    for a, b in zip(batches, in_memory):
        assert np.array_equal(a.input_ids, b.input_ids) and np.array_equal(a.labels, b.labels)


def test_a_token_cache_run_refuses_validation_texts_that_changed(tmp_path, capsys):
    from attnclf.cli import main

    rows = [f"{'good' if i % 2 else 'bad'} day {i},{'pos' if i % 2 else 'neg'}\n" for i in range(40)]
    path = tmp_path / "by_date.csv"
    path.write_text("text,label\n" + "".join(rows))
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(path), "--hold-out", "latest", "--token-cache", "--token-cache-dir",
                 str(tmp_path / "cache"), "--model", "boe", "--epochs", "1", "--min-frequency", "1", "--output",
                 str(run), "--quiet", "--no-report"]) == 0
    assert main(["evaluate", str(run), "--split", "validation"]) == 0
    path.write_text("text,label\n" + "".join(reversed(rows)))  # re-sorted: the latest rows are now ones it learned
    capsys.readouterr()
    assert main(["evaluate", str(run), "--split", "validation"]) == 2
    assert "no longer gives the validation texts a run held out" in capsys.readouterr().err


def test_a_token_cache_run_whose_file_moved_is_named_by_refit_as_by_evaluate(tmp_path, capsys):
    # A cached run's refit read the moved file without refuse_gone: '<path>: no such file', a path never given
    from attnclf.cli import main

    data = tmp_path / "data"
    data.mkdir()
    path = data / "train.csv"
    path.write_text("text,label\n" + "".join(f"{'good' if i % 2 else 'bad'} day {i},{'pos' if i % 2 else 'neg'}\n"
                                             for i in range(40)))
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(path), "--token-cache", "--token-cache-dir", str(tmp_path / "cache"),
                 "--model", "boe", "--epochs", "1", "--min-frequency", "1", "--output", str(run), "--quiet",
                 "--no-report", "--threads", "1"]) == 0
    data.rename(tmp_path / "moved")
    capsys.readouterr()
    assert main(["refit", str(run), "--quiet", "--no-report", "--threads", "1"]) == 2
    assert capsys.readouterr().err == (f"attnclf: error: {run} trained on {path}, which is no longer there (moved or "
                                       f"deleted since)\n")


@pytest.fixture(scope="module")
def refitted(tmp_path_factory):
    """Runs trained in memory and from the cache, with and without a validation file, and their refits."""
    from attnclf.training.refit import refit_settings

    tmp = tmp_path_factory.mktemp("refits")
    train, test = write_jsonl(tmp / "train.jsonl", corpus(300, 0)), write_csv(tmp / "test.csv", corpus(80, 1))
    dev = write_jsonl(tmp / "dev.jsonl", corpus(40, 2))
    runs = {}
    for validation_file in (None, dev):
        for cached in (False, True):
            name = f"{'dev' if validation_file else 'carved'}-{'cached' if cached else 'memory'}"
            run_settings = settings(train, test, tmp / name, cached, tmp / "cache")
            run_settings.data.validation_file = validation_file and str(validation_file)
            run = train_run(run_settings, progress=False)
            runs[name] = run, train_run(refit_settings(run.run_dir), progress=False)
    return runs


@pytest.mark.parametrize("validation", ["carved", "dev"])
def test_a_cached_refit_learns_the_validation_texts_as_an_in_memory_refit_does(refitted, validation):
    from safetensors.torch import load_file

    (run, refit), (_, in_memory) = refitted[f"{validation}-cached"], refitted[f"{validation}-memory"]
    recorded, refit_record = (json.loads((r.run_dir / "config.json").read_text()) for r in (run, refit))
    assert refit_record["settings"]["data"]["token_cache"] and refit_record["settings"]["data"]["refit"]
    assert refit_record["data"]["train_examples"] == (
        recorded["data"]["train_examples"] + recorded["data"]["validation_examples"]) == (290 if validation == "dev"
                                                                                         else 250)
    assert refit_record["data"]["validation_examples"] == 0 and refit.metrics["split"] == "test"
    # Its tokenizer learned the validation texts too, and it trained the model the in-memory refit trained...
    assert (refit.run_dir / "tokenizer.json").read_text() == (in_memory.run_dir / "tokenizer.json").read_text()
    assert (refit.run_dir / "tokenizer.json").read_text() != (run.run_dir / "tokenizer.json").read_text()
    assert [h["train_loss"] for h in refit.history] == [h["train_loss"] for h in in_memory.history]
    weights, in_memory_weights, run_weights = (load_file(str(r.run_dir / "model.safetensors"))
                                               for r in (refit, in_memory, run))
    assert all(np.array_equal(weights[k], in_memory_weights[k]) for k in weights)
    # ...not the one its run trained on the training texts alone, for as many epochs (its vocabulary aside).
    assert refit.history[-1]["epoch"] == recorded["settings"]["train"]["epochs"] == 2
    assert not all(np.array_equal(weights[k], run_weights[k]) for k in weights if k != "token_embedding.weight")


def test_a_cached_refit_is_reproducible_and_resumes(refitted, tmp_path, resume_after_interruption):
    from attnclf.training.refit import refit_settings

    run, refit = refitted["carved-cached"]
    again = train_run(refit_settings(run.run_dir, output=str(tmp_path / "again")), progress=False)
    resumed = resume_after_interruption(refit_settings(run.run_dir, output=str(tmp_path / "resumed")), epoch=2)
    assert [h["epoch"] for h in resumed.history] == [1, 2]
    for other in (again, resumed):
        assert (other.run_dir / "model.safetensors").read_bytes() == (refit.run_dir / "model.safetensors").read_bytes()


def test_a_cached_refit_rebuilds_deleted_caches_and_refuses_changed_texts(files, tmp_path, capsys):
    import shutil

    train, test = files
    run = tmp_path / "run"
    argv = ["--token-cache-dir", str(tmp_path / "cache"), "--model", "boe", "--epochs", "1", "--min-frequency", "1",
            "--threads", "1", "--no-report"]
    assert main(["train", "--train-file", str(train), "--test-file", str(test), "--token-cache", *argv[:2],
                 *argv[2:], "--quiet", "--output", str(run)]) == 0
    shutil.rmtree(tmp_path / "cache")  # a refit needs none of its run's caches: it makes its own
    capsys.readouterr()
    assert main(["refit", str(run), "--threads", "1", "--no-report"]) == 0
    err = capsys.readouterr().err
    assert "training the tokenizer on 300 streamed texts" in err and "building token cache" in err
    assert json.loads((tmp_path / "run-refit" / "config.json").read_text())["data"]["train_examples"] == 300
    rows = corpus(300, 0)
    write_jsonl(train, rows[1:] + rows[:1])  # the same texts, one moved: the rows the run held out are others now
    assert main(["refit", str(run), "--overwrite", "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"attnclf: error: {train.name} no longer gives the texts {run} trained and validated on (the data or its "
        f"split changed since): a refit would learn other data")


@pytest.mark.parametrize("sample", [None, 10])
def test_a_cached_refit_of_a_dataset_learns_what_load_data_joins(tmp_path, sample):
    # GLUE SST-2 has a validation split of its own and phrases withheld for its sake; a toy set validates on its
    # training set. A refit learns each text once, and the withheld phrases unless the run trained on a sample. (A
    # toy set's sample is not its validation split: load_data joins the two.)
    from attnclf.training.cached import load_cached_data
    from attnclf.training.run_data import load_data
    from test_data_sources import GLUE_DEV, GLUE_TRAIN

    (tmp_path / "sst2" / "SST-2").mkdir(parents=True)
    (tmp_path / "sst2" / "SST-2" / "train.tsv").write_text(GLUE_TRAIN)
    (tmp_path / "sst2" / "SST-2" / "dev.tsv").write_text(GLUE_DEV)
    for data in (DataSettings(dataset="sst2", data_dir=str(tmp_path), max_train_examples=sample),
                 DataSettings(dataset="toy-both", max_train_examples=sample and 5)):
        data.refit, data.token_cache, data.token_cache_dir = True, True, str(tmp_path / "cache")
        splits, _ = load_cached_data(RunSettings(data, TokenizerConfig(min_frequency=1)), 0, log=lambda message: None)
        in_memory = load_data(data, 0)
        assert list(splits.train.texts) == in_memory.train.texts and splits.validation is None
        assert splits.train.labels.tolist() == in_memory.train.labels


def interrupt_in_epoch_2(monkeypatch, *unfinished: RunSettings) -> None:
    """Train each run until interrupted as its second epoch starts (its checkpoint holds the first)."""
    from attnclf.training.trainer import Trainer

    original = Trainer._train_epoch

    def interrupted(self, batches, optimizer, schedule, loss_fn, current):
        if current == 2:
            raise KeyboardInterrupt
        return original(self, batches, optimizer, schedule, loss_fn, current)

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "_train_epoch", interrupted)
        for run_settings in unfinished:
            with pytest.raises(KeyboardInterrupt):
                train_run(run_settings, progress=False)


@pytest.mark.parametrize("change", ["texts", "a label"])
def test_a_cached_refit_or_run_does_not_resume_on_training_texts_that_changed(files, tmp_path, monkeypatch, change):
    # Neither fingerprints its training texts (that would decode every one of them again); the key of the data its
    # tokenizer learned (config.json's tokenizer_key) tells, before a tokenizer is trained or a cache built: a label
    # corrected in the training file changes no tokenizer, and no validation text here (dev.jsonl validates).
    from attnclf.errors import RunDirError
    from attnclf.training.refit import refit_settings
    from attnclf.training.settings import resume_settings

    train, test = files
    dev = write_jsonl(tmp_path / "dev.jsonl", corpus(40, 2))

    def with_dev(output):
        run_settings = settings(train, test, output, True, tmp_path / "cache")
        run_settings.data.validation_file = str(dev)
        run_settings.data.max_train_examples = None  # (a label changes the rows a sample draws)
        return run_settings

    run = train_run(with_dev(tmp_path / "run"), progress=False)
    interrupt_in_epoch_2(monkeypatch, with_dev(tmp_path / "again"), refit_settings(run.run_dir))
    rows = [row | {"text": row["text"] + " zebra"} for row in corpus(300, 0)]  # not dev.jsonl's texts
    if change == "a label":
        rows = corpus(300, 0)
        rows[0]["label"] = {"pos": "neg", "neg": "pos"}[rows[0]["label"]]
    write_jsonl(train, rows)
    built, trained = sorted((tmp_path / "cache").rglob("*")), []
    train_tokenizer = Tokenizer.train
    monkeypatch.setattr(Tokenizer, "train", lambda texts, config: trained.append(1) or train_tokenizer(texts, config))
    for unfinished in (tmp_path / "again", tmp_path / "run-refit"):
        with pytest.raises(RunDirError, match=f"^{unfinished}: train.jsonl no longer gives the texts this run trained "
                                              f"on .the data changed since.; it cannot resume on other data$"):
            train_run(resume_settings(unfinished), resume=True, progress=False)
    assert not trained and sorted((tmp_path / "cache").rglob("*")) == built


def test_a_cached_run_or_refit_resumes_with_its_own_tokenizer_and_trains_none(files, tmp_path, monkeypatch):
    # Training a tokenizer again is a pass over the corpus, and a BPE run from before BPE marked word starts has one no
    # process trains again: a resume whose caches were deleted must encode with its run's tokenizer, not train one and
    # refuse as if the data had changed.
    import shutil

    from attnclf.training.refit import refit_runs, refit_settings
    from attnclf.training.settings import resume_settings

    train, test = files

    def bpe(output):
        run_settings = settings(train, test, output, True, tmp_path / "cache")
        run_settings.tokenizer = TokenizerConfig(kind="bpe", vocab_size=120, min_frequency=1, max_len=16)
        run_settings.train.epochs, run_settings.train.monitor = 3, "loss"  # (its refit trains 3 epochs too)
        return run_settings

    run = train_run(bpe(tmp_path / "run"), progress=False)
    refit = train_run(refit_settings(run.run_dir, output=str(tmp_path / "refit")), progress=False)
    interrupt_in_epoch_2(monkeypatch, bpe(tmp_path / "again"), refit_settings(run.run_dir))
    shutil.rmtree(tmp_path / "cache")
    trained = []
    train_tokenizer = Tokenizer.train
    monkeypatch.setattr(Tokenizer, "train", lambda texts, config: trained.append(1) or train_tokenizer(texts, config))
    again = train_run(resume_settings(tmp_path / "again"), resume=True, progress=False)
    (resumed,), _ = refit_runs([run.run_dir], resume=True, report=False, progress=False)
    assert not trained
    for finished, uninterrupted in ((again, run), (resumed, refit)):
        assert (finished.run_dir / "model.safetensors").read_bytes() == (
            uninterrupted.run_dir / "model.safetensors").read_bytes()


@pytest.mark.parametrize("setting", ["unicode_nfc", "split_cjk", "social_media", "turkish_i"])
def test_a_cached_run_recorded_before_a_cleaning_setting_resumes_on_its_caches(files, tmp_path, monkeypatch,
                                                                                recorded_before, setting):
    # Its tokenizer_key and caches hashed a cleaning without the setting: the key made on resuming must be that one,
    # not refuse the unchanged data as changed (nor build its caches again).
    from dataclasses import replace

    from attnclf.text.cleaning import CLEANING_ADDED
    from attnclf.training.settings import resume_settings

    train, test = files
    added = list(CLEANING_ADDED)[list(CLEANING_ADDED).index(setting):]
    then = settings(train, test, tmp_path / "run", True, tmp_path / "cache")
    then.tokenizer.cleaning = replace(then.tokenizer.cleaning, **{name: CLEANING_ADDED[name] for name in added})
    written = TokenizerConfig.to_dict

    def as_written_then(config):
        recorded = written(config)
        for name in added:
            del recorded["cleaning"][name]
        return recorded

    with monkeypatch.context() as patch:
        patch.setattr(TokenizerConfig, "to_dict", as_written_then)
        interrupt_in_epoch_2(monkeypatch, then)
    recorded_before(tmp_path / "run", setting)
    built = sorted((tmp_path / "cache").iterdir())
    resumed = train_run(resume_settings(tmp_path / "run"), resume=True, progress=False)
    assert (resumed.run_dir / "model.safetensors").is_file()
    assert setting not in json.loads((resumed.run_dir / "config.json").read_text())["settings"]["tokenizer"]["cleaning"]
    assert sorted((tmp_path / "cache").iterdir()) == built


def test_evaluate_scores_a_cached_run_on_its_held_out_rows_without_reading_the_training_file_whole(
        files, tmp_path, monkeypatch, capsys):
    # Without --test-file, evaluate scores a run on the texts it held out (a refit has none: refused). A cached run's
    # training file may not fit in memory: its held-out rows are streamed from it, the training texts never held.
    import attnclf.data.files
    from attnclf.training.run_data import load_data

    train, _ = files
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(train), "--token-cache", "--token-cache-dir", str(tmp_path / "cache"),
                 "--model", "boe", "--epochs", "1", "--min-frequency", "1", "--threads", "1", "--quiet",
                 "--no-report", "--output", str(run)]) == 0
    assert main(["refit", str(run), "--threads", "1", "--quiet", "--no-report"]) == 0
    recorded = json.loads((run / "metrics.json").read_text())
    seed = json.loads((run / "config.json").read_text())["settings"]["train"]["seed"]
    in_memory = load_data(DataSettings(train_file=str(train)), seed).validation
    capsys.readouterr()

    def whole(*args, **kwargs):
        raise AssertionError("the whole training file was read into memory")

    monkeypatch.setattr(attnclf.data.files, "load_files", whole)
    assert main(["evaluate", str(run), "--json", "--threads", "1"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["split"] == "validation" and scored["num_examples"] == len(in_memory) == 30
    assert scored["accuracy"] == recorded["accuracy"] and scored["log_loss"] == pytest.approx(recorded["log_loss"])
    assert main(["evaluate", str(run), "--split", "validation", "--json", "--threads", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == recorded["accuracy"]
    assert main(["evaluate", f"{run}-refit", "--threads", "1"]) == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith(f"attnclf: error: {train.name} has no test split, and this refit trained on every text")
    assert "\n" not in message


def test_a_cached_run_or_refit_does_not_resume_on_a_test_file_that_changed(files, tmp_path, monkeypatch):
    # An in-memory run records its test texts' fingerprint and a resume compares it; a cached one records the key of
    # the test file's content (its sha256, hashed for the cache key anyway) and compares it before building anything.
    from attnclf.errors import RunDirError
    from attnclf.training.refit import refit_settings
    from attnclf.training.settings import resume_settings

    train, test = files
    run = train_run(settings(train, test, tmp_path / "run", True, tmp_path / "cache"), progress=False)
    interrupt_in_epoch_2(monkeypatch, settings(train, test, tmp_path / "again", True, tmp_path / "cache"),
                         settings(train, test, tmp_path / "memory", False, tmp_path / "cache"),
                         refit_settings(run.run_dir))
    assert json.loads((tmp_path / "again" / "config.json").read_text())["data"]["test_key"]
    write_csv(test, corpus(80, 3))
    built = sorted((tmp_path / "cache").rglob("*"))
    for unfinished in (tmp_path / "memory", tmp_path / "again", tmp_path / "run-refit"):
        with pytest.raises(RunDirError, match=f"^{unfinished}: {test} no longer gives the test texts this run "
                                              f"recorded; it cannot resume on other data$"):
            train_run(resume_settings(unfinished), resume=True, progress=False)
    assert sorted((tmp_path / "cache").rglob("*")) == built


def test_a_cached_refit_reads_its_files_once_and_checks_every_run_before_training_one(files, tmp_path, monkeypatch,
                                                                                     capsys):
    # Every refit's data is checked before any trains; the first to train trains on what its check loaded: a single
    # run's refit streams its files' labels (and hashes them) once, not in the check and again to train.
    import shutil

    import attnclf.data.files

    train, test = files
    other = shutil.copy(train, tmp_path / "other.jsonl")
    argv = ["--test-file", str(test), "--token-cache", "--token-cache-dir", str(tmp_path / "cache"), "--model", "boe",
            "--epochs", "1", "--min-frequency", "1", "--threads", "1", "--quiet", "--no-report"]
    for name, path in (("a", train), ("b", other)):
        assert main(["train", "--train-file", str(path), *argv, "--output", str(tmp_path / name)]) == 0
    read = []
    file_labels = attnclf.data.files.file_labels
    monkeypatch.setattr(attnclf.data.files, "file_labels", lambda path, *a, **k: read.append(path) or
                        file_labels(path, *a, **k))
    assert main(["refit", str(tmp_path / "a"), "--threads", "1", "--quiet", "--no-report"]) == 0
    assert read == [str(train)]
    refitted = sorted((tmp_path / "a-refit").iterdir())
    write_jsonl(other, corpus(300, 0)[1:] + corpus(300, 0)[:1])  # b's held-out rows are others now
    capsys.readouterr()
    assert main(["refit", str(tmp_path / "a"), str(tmp_path / "b"), "--overwrite", "--quiet", "--no-report"]) == 2
    assert "other.jsonl no longer gives the texts" in capsys.readouterr().err
    assert sorted((tmp_path / "a-refit").iterdir()) == refitted  # refused before a's refit was trained again


@pytest.mark.parametrize("split", ["validation_file", "test_file"])
def test_a_cached_runs_held_out_file_with_labels_the_training_file_lacks_is_not_sent_to_a_run_not_yet_made(
        tmp_path, split):
    # As in memory (load_files): no run exists yet to predict with, and one scored on its own predictions scores itself
    from attnclf.training.cached import load_cached_data

    (tmp_path / "train.csv").write_text("text,label\n" + "good film,pos\nbad film,neg\n" * 5)
    (tmp_path / "held.csv").write_text("text,label\ngood,pos\nmeh,neutral\n")
    data = DataSettings(train_file=str(tmp_path / "train.csv"), token_cache=True, token_cache_dir=str(tmp_path / "c"),
                        **{split: str(tmp_path / "held.csv")})
    with pytest.raises(DataError, match=re.escape("remove that row, or give the training file texts of its label")
                       + "$"):
        load_cached_data(RunSettings(data, TokenizerConfig(min_frequency=1)), 0, log=lambda message: None)


def test_packed_ids_equal_the_tokenizer_encodings_across_chunks(files):
    texts = [row["text"] for row in corpus(50, 3)] + [""]
    tokenizer = Tokenizer.train(texts, TokenizerConfig(min_frequency=1, max_len=6))
    told = []
    packed = encode_packed(tokenizer, texts, chunk_texts=7, done=told.append)
    assert [row.tolist() for row in packed] == tokenizer.encode(texts)
    assert packed.flat.dtype == np.uint32 and packed.lengths.tolist() == [len(ids) for ids in tokenizer.encode(texts)]
    assert sum(told) == len(texts) and max(told) == 7  # a chunk at a time, for a progress bar


def test_training_batches_hold_packed_ids_not_a_python_list_per_text(files, tmp_path):
    """1,000,000 AG News texts as lists of Python ints held 6 GB before the first step (BENCHMARKS.md)."""
    from attnclf.data.base import TextDataset
    from attnclf.training.run import _batches

    texts = [row["text"] for row in corpus(40, 4)]
    tokenizer = Tokenizer.train(texts, TokenizerConfig(min_frequency=1, max_len=8))
    data = TextDataset(texts, [0, 1] * 20, ["neg", "pos"])
    batches = _batches(tokenizer, data, batch_size=8, shuffle=True, seed=0)
    assert isinstance(batches.sequences, MappedSequences)
    assert [row.tolist() for row in batches.sequences] == tokenizer.encode(texts)


def test_training_says_it_is_tokenising_before_the_first_step(files, tmp_path, capsys):
    """A big file's tokenising took minutes with nothing on stderr, in a log or at a terminal (BENCHMARKS.md)."""
    train, test = files
    train_run(settings(train, test, tmp_path / "run", False, tmp_path / "cache"), progress=True)
    told = capsys.readouterr()
    assert "tokenising 225 training texts" in told.err and "tokenising 25 validation texts" in told.err
    assert "epoch 1:" in told.out  # (the epochs' lines follow, on stdout)


def test_cached_texts_slice_as_a_list_of_texts_does(tmp_path):
    tokenizer = Tokenizer.train(["a good film", "a bad one"], TokenizerConfig(min_frequency=1))
    cache = TokenCache(build_cache(tmp_path / "c", [("a good film", 1), ("très bon", 1), ("a bad one", 0)], tokenizer,
                                   ["neg", "pos"]))
    texts = ["a good film", "très bon", "a bad one"]
    assert cache.texts[0:2] == texts[0:2] and cache.texts[::-1] == texts[::-1]
    assert cache.dataset("train").subset([2, 1]).texts[:] == ["a bad one", "très bon"]


def test_evaluate_errors_names_a_cached_runs_held_out_texts_by_their_rows_in_the_training_file(tmp_path):
    # As an in-memory run's: a --token-cache run's errors gave each text's place among the held-out texts and left out
    # the file's other columns (its id), so a wrong text could not be found in the file.
    rows = [{"id": f"id-{n}", **row, "label": row["label"] if n % 3 else ("pos", "neg")[row["label"] == "pos"]}
            for n, row in enumerate(corpus(300, 0))]
    train = tmp_path / "train.csv"
    with open(train, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, ["id", "text", "label"])
        writer.writeheader()
        writer.writerows(rows)
    run, out = tmp_path / "run", tmp_path / "errors.csv"
    assert main(["train", "--train-file", str(train), "--token-cache", "--token-cache-dir", str(tmp_path / "cache"),
                 "--model", "boe", "--epochs", "1", "--min-frequency", "1", "--threads", "1", "--quiet",
                 "--no-report", "--output", str(run)]) == 0
    assert main(["evaluate", str(run), "--errors", str(out), "--threads", "1"]) == 0
    with open(out, newline="", encoding="utf-8") as f:
        written = list(csv.DictReader(f))
    assert written and list(written[0])[:3] == ["row", "id", "text"]
    for row in written:  # (the file's row below its header, and that row's own id, text and label)
        assert (row["id"], row["text"], row["true_label"]) == tuple(rows[int(row["row"]) - 1].values())
