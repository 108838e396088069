"""A user's data file compressed with gzip, bzip2 or xz (reviews.csv.gz, test.jsonl.gz, cooking.train.xz) is read as
the file it holds, decompressed as a stream, its type from the suffix before the compression's; a corrupt or truncated
one is a one-line error naming it."""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import re

import pytest
from safetensors.numpy import load_file as load_weights

from attnclf.cli import main
from attnclf.data.files import (data_columns, has_rows, is_data_file, is_fasttext_file, iter_texts, load_file,
                                read_texts)
from attnclf.errors import DataError

COMPRESS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}
POSITIVE = ["a wonderful film", "great acting and a great story", "brilliant and moving", "i loved it"]
NEGATIVE = ["a boring film", "dull acting and a weak story", "awful and tedious", "i hated it"]
ROWS = [(text, "pos") for text in POSITIVE * 5] + [(text, "neg") for text in NEGATIVE * 5]


def csv_text(rows, delimiter=",") -> str:
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    writer.writerow(["text", "label"])
    writer.writerows(rows)
    return out.getvalue()


def jsonl_text(rows) -> str:
    return "".join(json.dumps({"text": text, "label": label}) + "\n" for text, label in rows)


def write(path, text: str):
    """``text`` written to ``path``, compressed as its last suffix says (none: as it is)."""
    data = text.encode("utf-8")
    path.write_bytes(COMPRESS[path.suffix](data) if path.suffix in COMPRESS else data)
    return path


def one_line(exc: pytest.ExceptionInfo) -> str:
    assert "\n" not in str(exc.value)
    return str(exc.value)


# --- reading ------------------------------------------------------------------

@pytest.mark.parametrize("compression", [".gz", ".bz2", ".xz"])
@pytest.mark.parametrize("kind", [".csv", ".tsv", ".jsonl"])
def test_a_compressed_data_file_reads_as_the_file_it_holds(tmp_path, kind, compression):
    text = jsonl_text(ROWS) if kind == ".jsonl" else csv_text(ROWS, "\t" if kind == ".tsv" else ",")
    plain, packed = write(tmp_path / f"r{kind}", text), write(tmp_path / f"r{kind}{compression}", text)
    assert is_data_file(packed) and has_rows(packed) and not is_fasttext_file(packed)
    ours, theirs = load_file(packed), load_file(plain)
    assert (ours.texts, ours.labels, ours.label_names) == (theirs.texts, theirs.labels, theirs.label_names)
    assert list(iter_texts(packed)) == list(iter_texts(plain)) and read_texts(packed) == read_texts(plain)
    assert data_columns(packed) == data_columns(plain)


@pytest.mark.parametrize("name", ["cooking.txt.xz", "cooking.train.gz", "cooking.bz2"])
def test_fasttexts_format_compressed_is_told_by_its_first_line_as_uncompressed(tmp_path, name):
    path = write(tmp_path / name, "__label__pos a fine film\n\n__label__neg a dull film\n")
    assert is_fasttext_file(path) and has_rows(path) and not is_data_file(path)
    data = load_file(path)
    assert data.texts == ["a fine film", "a dull film"] and data.label_names == ["neg", "pos"]
    assert read_texts(path) == ["a fine film", "a dull film"]


def test_a_compressed_plain_text_file_is_a_text_per_line(tmp_path):
    path = write(tmp_path / "notes.txt.gz", "\ufeffgreat acting\r\n\r\nweak acting\n")
    assert not has_rows(path) and read_texts(path) == ["great acting", "weak acting"]


def test_an_empty_compressed_file_has_no_texts_as_an_empty_one_has_none(tmp_path):
    assert list(iter_texts(write(tmp_path / "empty.csv.gz", ""))) == list(iter_texts(write(tmp_path / "e.csv", "")))
    assert data_columns(tmp_path / "empty.csv.gz") == []


@pytest.mark.parametrize("name, cut", [("r.csv.gz", 10), ("r.jsonl.bz2", 30), ("r.tsv.xz", 40), ("n.txt.gz", 10),
                                       ("cooking.train.xz", 40)])
def test_a_truncated_compressed_file_is_one_line_naming_it(tmp_path, name, cut):
    text = csv_text(ROWS * 20, "\t") if ".tsv" in name else jsonl_text(ROWS * 20) if ".jsonl" in name else \
        csv_text(ROWS * 20) if ".csv" in name else "__label__pos a fine film\n" * 400
    path = write(tmp_path / name, text)
    path.write_bytes(path.read_bytes()[:-cut])
    for read in (load_file, read_texts, lambda p: list(iter_texts(p))):
        with pytest.raises(DataError) as exc:
            read(path)
        assert one_line(exc).startswith(f"{path}") and "truncated or corrupt" in str(exc.value), str(exc.value)


def test_a_file_named_gz_that_is_no_gzip_file_is_one_line_naming_it(tmp_path):
    path = tmp_path / "r.csv.gz"
    path.write_text(csv_text(ROWS))
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert one_line(exc).startswith(f"{path}: not a readable gzip file")


def test_a_checksum_that_fails_at_the_end_is_one_line_naming_the_file_and_the_last_line_read(tmp_path):
    path = write(tmp_path / "r.csv.gz", csv_text(ROWS))
    data = bytearray(path.read_bytes())
    data[-8] ^= 0xFF  # (gzip's trailer: the CRC-32 of the data, which is checked once it is all read)
    path.write_bytes(bytes(data))
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert one_line(exc).startswith(f"{path}, after line {len(ROWS) + 1}: truncated or corrupt gzip data (CRC check")


def test_a_byte_that_is_not_utf8_is_placed_in_the_decompressed_text(tmp_path):
    path = tmp_path / "u.csv.gz"
    path.write_bytes(gzip.compress(b"text,label\nok,1\ncaf\xe9,0\n"))
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert one_line(exc) == (f"{path}, line 3: byte 0xe9 at byte offset 19 of the decompressed text is not UTF-8; "
                             f"re-save the file as UTF-8")


def test_compressed_parquet_is_refused_as_compressed_inside_already(tmp_path):
    path = tmp_path / "r.parquet.gz"
    path.write_bytes(gzip.compress(b"PAR1"))
    for read in (load_file, read_texts):
        with pytest.raises(DataError) as exc:
            read(path)
        assert one_line(exc) == (f"{path}: Parquet is compressed inside already, so a compressed Parquet file is not "
                                 f"read; decompress it (gunzip {path})")


def test_a_compressed_file_of_no_known_type_names_the_suffix_before_the_compressions(tmp_path):
    path = write(tmp_path / "r.xlsx.gz", "text,label\n")
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert one_line(exc).startswith(f"{path}: unknown file type '.xlsx.gz'; use .csv, .tsv, .jsonl or .parquet")


def test_fasttext_named_as_a_compressed_data_file_is_told_a_name_that_keeps_the_compression(tmp_path):
    path = write(tmp_path / "reviews.csv.gz", "__label__pos a fine film\n")
    with pytest.raises(DataError) as exc:
        load_file(path)
    assert "rename it, e.g. reviews.txt.gz" in one_line(exc)


# --- commands -----------------------------------------------------------------

TRAIN = ["--model", "boe", "--epochs", "3", "--lr", "0.01", "--min-frequency", "1", "--quiet", "--no-report",
         "--threads", "1", "--seed", "3"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A run trained on reviews.csv and one on the same file gzipped, each tested on its own copy of test rows."""
    folder = tmp_path_factory.mktemp("compressed")
    made = {}
    for name in ("plain", "gzipped"):
        suffix = ".gz" if name == "gzipped" else ""
        train = write(folder / f"reviews.csv{suffix}", csv_text(ROWS))
        test = write(folder / f"test.jsonl{suffix}", jsonl_text(ROWS[::3]))
        out = folder / name
        assert main(["train", "--train-file", str(train), "--test-file", str(test), "--output", str(out),
                     *TRAIN]) == 0
        made[name] = out
    return folder, made


def test_training_on_a_csv_gz_gives_the_model_and_metrics_of_the_csv(runs):
    _, made = runs
    plain, gzipped = (load_weights(made[name] / "model.safetensors") for name in ("plain", "gzipped"))
    assert plain.keys() == gzipped.keys() and all((plain[key] == gzipped[key]).all() for key in plain)
    metrics = [{key: value for key, value in json.loads((made[name] / "metrics.json").read_text()).items()
                if not key.endswith("_seconds")} for name in ("plain", "gzipped")]  # (all but the time taken)
    assert metrics[0] == metrics[1] and metrics[0]["num_examples"] == len(ROWS[::3])


def test_evaluate_reads_a_jsonl_gz_test_file(runs, capsys):
    folder, made = runs
    scores = []
    for test in ("test.jsonl", "test.jsonl.gz"):
        assert main(["evaluate", str(made["plain"]), "--test-file", str(folder / test), "--json"]) == 0
        scores.append(json.loads(capsys.readouterr().out))
    assert scores[0] == scores[1] and scores[0]["num_examples"] == len(ROWS[::3])


def test_predict_reads_a_tsv_bz2_file_and_writes_its_rows(runs, tmp_path, capsys):
    _, made = runs
    source = write(tmp_path / "to_score.tsv.bz2", csv_text(ROWS[:4], "\t"))
    output = tmp_path / "scored.csv"
    assert main(["predict", str(made["plain"]), "--file", str(source), "--output", str(output)]) == 0
    with open(output, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [row["text"] for row in rows] == [text for text, _ in ROWS[:4]]
    assert [row["label"] for row in rows] == ["pos"] * 4 and "predicted_label" in rows[0]


def test_a_truncated_training_file_is_one_line_on_the_command_line(runs, tmp_path, cli_error):
    path = write(tmp_path / "reviews.csv.gz", csv_text(ROWS * 20))
    path.write_bytes(path.read_bytes()[:-20])
    message = cli_error(["train", "--train-file", str(path), "--output", str(tmp_path / "run"), *TRAIN])
    assert message.startswith(str(path)) and "truncated or corrupt" in message


@pytest.mark.parametrize("name", ["scored.csv.gz", "scored.jsonl.bz2", "scored.tsv.xz"])
@pytest.mark.parametrize("writer", ["predict", "evaluate --errors", "suspects --output"])
def test_an_output_stays_uncompressed_and_the_command_writing_it_says_so(runs, tmp_path, cli_error, name, writer):
    # `evaluate --errors wrong.csv.gz` and `suspects --output` were refused as "predict writes uncompressed files".
    _, made = runs
    source = write(tmp_path / "to_score.csv", csv_text(ROWS[:4]))
    argv = {"predict": ["predict", str(made["plain"]), "--file", str(source), "--output"],
            "evaluate --errors": ["evaluate", str(made["plain"]), "--errors"],
            "suspects --output": ["suspects", "--train-file", str(source), "--work-dir", str(tmp_path / "folds"),
                                  "--output"]}[writer]
    message = cli_error([*argv, str(tmp_path / name)])
    plain = name.rsplit(".", 1)[0]
    assert message.startswith(f"{tmp_path / name}: {writer} writes uncompressed files; name the output {plain}")
    assert not (tmp_path / name).exists() and not (tmp_path / "folds").exists()


def test_a_token_cache_run_reads_a_csv_gz_and_keys_it_apart_from_the_csv(tmp_path):
    weights, caches = [], tmp_path / "caches"
    for name in ("reviews.csv", "reviews.csv.gz"):
        train = write(tmp_path / name, csv_text(ROWS))
        assert main(["train", "--train-file", str(train), "--output", str(tmp_path / f"run-{name}"), "--token-cache",
                     "--token-cache-dir", str(caches), *TRAIN]) == 0
        weights.append(load_weights(tmp_path / f"run-{name}" / "model.safetensors"))
    assert all((weights[0][key] == weights[1][key]).all() for key in weights[0])
    # (its bytes are the compressed file's: a cache of its own, its format recorded as it is read)
    assert len([entry for entry in caches.iterdir() if entry.name != "tokenizers"]) == 2


@pytest.mark.parametrize("name", ["reviews.csv.zip", "reviews.csv.zst", "notes.txt.7z", "reviews.tar"])
def test_an_archive_or_other_compression_is_named_not_read_as_text(tmp_path, name):
    # A zip read as plain text stopped on 'line 1: not UTF-8 (byte 0xaf)', which never said why.
    from attnclf.data.files import load_file, read_texts

    path = tmp_path / name
    path.write_bytes(b"PK\x03\x04\xaf\x00 binary")
    suffix = "." + name.rsplit(".", 1)[1]
    message = (rf"^{re.escape(str(path))}: a {re.escape(suffix)} file is not read: attnclf reads files compressed "
               rf"with gzip, bzip2 or xz \(\.gz, \.bz2, \.xz\); unpack it, or compress it with gzip$")
    with pytest.raises(DataError, match=message):
        read_texts(path)
    with pytest.raises(DataError, match=message):
        load_file(path)


@pytest.mark.parametrize("name", ["reviews.tar.gz", "reviews.TAR.bz2", "notes.tar.xz"])
def test_a_compressed_tar_archive_is_named_not_read_as_its_header_and_files(tmp_path, name):
    # Decompressed, a tar is still an archive: predict --file reviews.tar.gz scored its header ('reviews.csv\0\0...')
    # as a text, and the rows of every file in it after that
    import tarfile

    from attnclf.data.files import load_file, read_texts

    member = tmp_path / "reviews.csv"
    member.write_text("text,label\ngood film,pos\n")
    path = tmp_path / name
    with tarfile.open(path, f"w:{name.rsplit('.', 1)[1].lower()}") as archive:
        archive.add(member, arcname=member.name)
    suffix = re.escape(".tar." + name.rsplit(".", 1)[1].lower())
    message = rf"^{re.escape(str(path))}: a {suffix} file is not read: .*; unpack it$"
    with pytest.raises(DataError, match=message):
        read_texts(path)
    with pytest.raises(DataError, match=message):
        load_file(path)



@pytest.mark.parametrize("compression, kind, tool", [(".gz", "gzip", "gunzip"), (".bz2", "bzip2", "bunzip2"),
                                                     (".xz", "xz", "unxz")])
def test_a_compressed_file_named_without_its_compressions_suffix_is_told_so_not_to_re_save_it_as_utf8(
        tmp_path, compression, kind, tool):
    # (a download saved without its .gz was told 'byte 0x8b at byte offset 1 is not UTF-8; re-save the file as UTF-8')
    from attnclf.data.files import text_lines

    told = f"the file is {kind}-compressed (it starts as those files do), not text: decompress it ({tool})"
    for name, read in (("reviews.csv", load_file), ("reviews.tsv", load_file), ("notes.txt", read_texts)):
        path = tmp_path / name
        path.write_bytes(COMPRESS[compression](csv_text(ROWS, "\t" if name.endswith(".tsv") else ",").encode()))
        with pytest.raises(DataError) as exc:
            read(path)
        assert one_line(exc) == f"{path}: {told}, or add {compression} to its name, which reads it decompressed"
        read(path.rename(tmp_path / f"{name}{compression}"))  # (as told: read decompressed)
    with pytest.raises(DataError) as exc:  # (stdin has no name to add a suffix to)
        text_lines(COMPRESS[compression](b"a fine film\n"), "stdin")
    assert one_line(exc) == f"stdin: {told}"


def test_an_archive_or_a_parquet_file_named_as_text_is_told_what_it_is(tmp_path):
    import zipfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    zipped = tmp_path / "reviews.csv"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("reviews.csv", csv_text(ROWS))
    with pytest.raises(DataError) as exc:
        load_file(zipped)
    assert one_line(exc) == (f"{zipped}: the file is a zip archive (it starts as those files do), not text: unpack it "
                             f"(unzip)")
    parquet = tmp_path / "scores.csv"
    pq.write_table(pa.table({"text": ["a fine film", "a dull film"], "score": [0.1, 0.9]}), parquet)
    with pytest.raises(DataError) as exc:
        load_file(parquet)
    assert one_line(exc) == (f"{parquet}: the file is a Parquet file (it starts as those files do), not text: give it "
                             f"the suffix .parquet")
    latin1 = write(tmp_path / "latin1.csv", "")  # (text that is not UTF-8 is still told so)
    latin1.write_bytes(b"text,label\ncaf\xe9,pos\n")
    with pytest.raises(DataError) as exc:
        load_file(latin1)
    assert one_line(exc) == f"{latin1}, line 2: byte 0xe9 at byte offset 14 is not UTF-8; re-save the file as UTF-8"
