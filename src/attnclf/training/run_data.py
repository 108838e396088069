"""The texts a run trains, validates and tests on: its splits, their fingerprints in config.json, and warnings
about the labels and texts that nothing else would show.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import numpy as np

from ..checks import by_field
from ..data.base import LABEL_SYNONYMS, WITHHELD, Splits, TextDataset
from ..data.files import number_value
from ..data.registry import candidate_dirs, load_splits
from ..data.splits import check_hold_out, split_indices, train_validation_split
from ..errors import AttnclfError, DataError, RunDirError, first_few, shown
from ..rundir import refuse_estimator_run
from ..text.cleaning import CleaningConfig, clean
from ..text.tokenizer import TokenizerConfig
from .settings import DataSettings


def dataset_splits(settings: DataSettings, seed: int, unlabelled: bool = False) -> Splits:
    """The named dataset's own splits, downloaded first if the settings allow it; ``unlabelled``: with the texts it
    ships without labels (``registry.load_splits``).

    >>> dataset_splits(DataSettings(dataset="demo"), seed=0).train.label_names  # (generated: nothing to download)
    ['negative', 'positive']
    """
    if settings.download:
        from ..data.download import ensure_available

        ensure_available(settings.dataset, candidate_dirs(settings.data_dir, settings.found_in), download=True)
    splits = load_splits(settings.dataset, settings.data_dir, seed, found_in=settings.found_in, unlabelled=unlabelled)
    if settings.multi_label and not splits.train.multi_label:  # (a multi-label source implies the flag)
        raise DataError(f"{settings.dataset} is a single-label dataset; drop --multi-label")
    return splits


def load_data(settings: DataSettings, seed: int, unlabelled: bool = False) -> Splits:
    """The splits a run trains, validates and tests on (validation carved from train if needed); ``unlabelled``: with
    the dataset's texts without labels (``--embeddings count`` counts them), as many as a training sample keeps.

    >>> # splits = load_data(DataSettings(train_file="reviews.csv", test_file="test.csv"), seed=0)
    >>> # len(splits.train), len(splits.validation)  # 90% and 10% of reviews.csv, stratified
    """
    settings.require_source()
    seed = settings.data_seed(seed)
    if settings.dataset:
        splits = dataset_splits(settings, seed, unlabelled)
    else:
        from ..data.files import load_files

        splits = load_files(settings.train_file, settings.test_file,
                            text_column=settings.text_column, label_column=settings.label_column,
                            multi_label=settings.multi_label, label_delimiter=settings.label_delimiter,
                            validation_path=settings.validation_file)
    train = training_sample(splits.train, settings.max_train_examples, seed)
    if not train.multi_label:
        refuse_one_class(settings, train.labels, train.label_names)
    validation = splits.validation
    if settings.refit:
        parts = [splits.validation if part == "validation" else splits.extra[part]
                 for part in refit_additions(splits, train, settings)]
        train, validation = TextDataset.join([train, *parts], "train"), None
    elif validation is None:
        train, validation = train_validation_split(train, settings.val_fraction, seed, settings.hold_out)
    else:
        check_hold_out(settings.hold_out, settings.describe(), train.order,
                        own_validation=Path(settings.validation_file).name if settings.validation_file else True)
    return Splits(train=train, validation=validation, test=sample_test(splits.test, settings.max_test_examples),
                  extra=splits.extra, unlabelled=unlabelled_sample(splits.unlabelled, settings.max_train_examples,
                                                                   len(splits.train), seed))


def training_sample(train: TextDataset, max_examples: int | None, seed: int) -> TextDataset:
    """At most ``max_examples`` of the training texts ``train`` (``--max-train-examples``): a sample the seed draws,
    stratified (and grouped where the data has groups) as a validation split is carved; all of them without a cap.

    >>> train = TextDataset(["a", "b", "c", "d"], [0, 1, 0, 1], ["neg", "pos"])
    >>> sorted(training_sample(train, 2, seed=0).labels), training_sample(train, None, seed=0) is train
    ([0, 1], True)
    """
    if not max_examples or len(train) <= max_examples:
        return train
    return train_validation_split(train, 1 - max_examples / len(train), seed)[0]


def unlabelled_sample(texts: list[str], max_examples: int | None, training_count: int, seed: int) -> list[str]:
    """The unlabelled ``texts`` a run given ``max_examples`` (``--max-train-examples``) of its ``training_count``
    training texts reads: the same fraction of them, a sample the seed draws, in their order; all of them without a
    cap (or with one the training texts fit), so that a quick sample counts its word vectors quickly.

    >>> texts = [f"review {i}" for i in range(8)]
    >>> unlabelled_sample(texts, 100, training_count=400, seed=0), unlabelled_sample(texts, None, 400, seed=0) is texts
    (['review 5', 'review 7'], True)
    """
    if not max_examples or training_count <= max_examples:
        return texts
    count = round(len(texts) * max_examples / training_count)
    return [texts[i] for i in sorted(np.random.default_rng(seed).choice(len(texts), count, replace=False).tolist())]


def refuse_one_class(data: DataSettings, labels: Sequence[int], label_names: Sequence[str]) -> None:
    """Refuse single-label training texts (their ``labels``, indices into ``label_names``) all of one class.

    >>> refuse_one_class(DataSettings(train_file="t.csv"), [1, 1], ["neg", "pos"])
    Traceback (most recent call last):
    ...
    attnclf.errors.DataError: t.csv: training data has only one class ('pos'); a classifier needs at least two
    """
    if len(set(labels)) < 2:
        raise DataError(f"{data.describe()}: training data has only one class ({label_names[labels[0]]!r}); a "
                        f"classifier needs at least two")


def refit_additions(splits: Splits, train: TextDataset, settings: DataSettings) -> list[str]:
    """The parts of ``splits`` a refit learns after ``train``, the run's training texts, in order: every text
    validation would have held out, and those withheld for its sake (``load_data``, and the token cache's refit).

    >>> train, dev = TextDataset(["good"], [1], ["neg", "pos"]), TextDataset(["bad"], [0], ["neg", "pos"])
    >>> [refit_additions(Splits(train, validation=v), train, DataSettings()) for v in (dev, train)]
    [['validation'], []]
    """
    parts = []
    validation = splits.validation
    if validation is not None and (validation.texts, validation.labels) != (train.texts, train.labels):
        parts.append("validation")  # (the course's toy sets validate on their training set: nothing to add)
    if splits.extra.get(WITHHELD) is not None and not settings.max_train_examples:
        parts.append(WITHHELD)  # (a sample's refit learns the sample and its validation only)
    return parts


def sample_test(test: TextDataset | None, max_examples: int | None) -> TextDataset | None:
    """At most ``max_examples`` texts of ``test``, a stratified sample that every run of an experiment shares.

    Seed 0, not the run's seed, so every seed is tested on the same texts; ungrouped, because a
    sample of the test set has no validation to keep apart, and its size is exact. A sample too small
    to stratify is a plain shuffle's: the texts left out need no class kept, as a training split does.

    >>> test = TextDataset(["a", "b", "c", "d"], [0, 1, 0, 1], ["neg", "pos"], "test")
    >>> sorted(sample_test(test, 2).labels), sample_test(test, None) is test
    ([0, 1], True)
    """
    if not max_examples or test is None or len(test) <= max_examples:
        return test
    labels = None if test.multi_label else test.labels
    _, sample = split_indices(labels, None, max_examples / len(test), 0, size=len(test), keep_every_class=False)
    return test.subset(sample.tolist(), "test")


def _saved_data(config: dict, data_dir: str | None, lacks: str) -> DataSettings:
    """A run's data settings, looking for its dataset in ``data_dir`` first when one is given; a folder the
    scikit-learn estimator saved has none, and so no ``lacks``."""
    refuse_estimator_run(config, lacks)
    return DataSettings(**config["settings"]["data"] | ({"data_dir": data_dir} if data_dir else {}))


def refuse_gone(run: str, data: DataSettings, *files: str, then: str = "") -> None:
    """Refuse, naming the ``run``, a file of ``data``'s ``files`` (its fields) that is no longer where the run read
    it: the reader's own "no such file" would name a path the command was never given. ``then``: what to do about it.

    >>> refuse_gone("runs/a", DataSettings(test_file="/gone.csv"), "test_file")
    Traceback (most recent call last):
    ...
    attnclf.errors.RunDirError: runs/a was tested on /gone.csv, which is no longer there (moved or deleted since)
    >>> refuse_gone("runs/b", DataSettings(dataset="demo", test_file="/gone.csv"), "test_file")  # (never read)
    """
    if data.dataset:  # (a named dataset's run reads none of them: an older run recorded a file beside it, unread)
        return
    for name in files:
        path = getattr(data, name)
        if path and not Path(path).exists():
            done = {"train_file": "trained on", "validation_file": "validated on", "test_file": "was tested on"}[name]
            raise RunDirError(f"{run} {done} {path}, which is no longer there (moved or deleted since){then}")


def run_test_data(config: dict, label_names: list[str], test_only: bool = False,
                  data_dir: str | None = None, named: Callable[[str], str] = by_field,
                  if_moved: str | None = None) -> TextDataset:
    """A run's own test split, labels in the run's order (its validation split when the data has no
    test split, unless ``test_only``); ``data_dir``: look for its dataset there first. The advice for a run without
    test texts of its own names ``scoring_data``'s arguments as ``named`` spells them, that is as the caller knows
    them (the command line: by its flags; ``check_data``: its ``file`` for ``test_file``). A test file moved since the
    run read it is refused naming it, then ``if_moved``: what to do (default: give its new path as ``test_file``).

    >>> # test = run_test_data(read_json(Path("runs/demo") / "config.json"), ["negative", "positive"])
    """
    settings = config["settings"]
    data = _saved_data(config, data_dir, f"test texts; give it a file of labelled test texts ({named('test_file')})")
    if data.test_file and not data.dataset:  # the file alone: the training file may be large, or gone since
        from ..data.files import load_file

        refuse_gone(settings.get("output", "the run"), data, "test_file",
                    then=if_moved or f"; to read it where it is now, give that path with {named('test_file')}")
        return sample_test(load_file(data.test_file, data.text_column, data.label_column, label_names=label_names,
                                     split="test", multi_label=data.multi_label,
                                     label_delimiter=data.label_delimiter), data.max_test_examples)
    # Files without a test file have no test split: refused, or validated on, before the training file is read whole.
    splits = load_data(data, settings["train"]["seed"]) if data.dataset else None
    test = splits and splits.test
    if data.refit and test is None:
        raise AttnclfError(f"{data.describe()} has no test split, and this refit trained on every text it has: only "
                           f"other labelled texts can score it: give them with {named('test_file')}")
    if test_only and test is None:
        raise AttnclfError(f"{data.describe()} has no test split; give held-out data with {named('test_file')} or "
                           f"{named('dataset')}, or score the texts the runs held out with {named('split')} validation "
                           f"(runs sharing {named('split_seed')})")
    if test is None:
        refuse_gone(settings.get("output", "the run"), data, "train_file", "validation_file")
        validation = splits.validation if splits else held_out_split(data, settings["train"]["seed"])
        held_out = held_out_fingerprint(config)
        if held_out is not None and held_out != texts_fingerprint(validation):
            raise AttnclfError(_CHANGED_SPLIT.format(data.describe_held_out(label_names, validation.label_names)))
        return align_labels(validation, label_names)
    return align_labels(test, label_names)


def held_out_split(data: DataSettings, seed: int) -> TextDataset:
    """The texts a run held out to validate on (``load_data``'s validation split); a token-cache run's of files
    streamed from them, without reading its training texts into memory (``held_out_texts``)."""
    # Carved from the training file (or read from its validation file): a test file, perhaps moved or deleted since
    # the run trained, has no part in it.
    data = replace(data, test_file=None)
    if data.token_cache and not data.dataset:
        from .cached import held_out_texts

        return held_out_texts(data, seed)
    return load_data(data, seed).validation


def texts_fingerprint(data: TextDataset) -> str:
    """sha256 of the labelled texts, in order: whether a split is still the one a run held out.

    >>> texts_fingerprint(TextDataset(["good"], [1], ["neg", "pos"]))[:12]
    '7e854b0e3ff1'
    """
    digest = hashlib.sha256()
    for text, label in zip(data.texts, data.labels):
        digest.update(f"{label}\t{text}\n".encode())
    return digest.hexdigest()


def held_out_fingerprint(config: dict) -> str | None:
    """The ``texts_fingerprint`` of the validation texts a run held out, from its config.json (runs trained before
    it was recorded, and token-cache runs before 2026-11-23, have none).

    >>> held_out_fingerprint({"data": {"validation_sha256": "7e85"}}), held_out_fingerprint({"data": {}})
    ('7e85', None)
    """
    return config.get("data", {}).get("validation_sha256")


def run_validation_data(configs: list[dict], label_names: list[str], data_dir: str | None = None) -> TextDataset:
    """The texts the runs held out to validate on, labels in the runs' order: one set for all of them
    (``data_dir``: look for their dataset there first).

    Runs of different seeds hold out different texts unless they shared ``--split-seed``, held out the latest
    texts (``--hold-out latest``), or the dataset has its own validation split; their ensemble can only be
    validated on texts none of them trained on.

    >>> # val = run_validation_data([read_json(Path(d) / "config.json") for d in runs], ["neg", "pos"])
    """
    def data_and_seed(config: dict) -> tuple[DataSettings, int]:
        data = _saved_data(config, data_dir, "validation texts to calibrate on or to score (--split validation)")
        if data.refit:
            raise AttnclfError(f"{config['settings']['output']} is a refit: it trained on its validation texts; "
                               f"validate the run it refits ({config['settings']['refit_of']['run']})")
        refuse_gone(config["settings"].get("output", "the run"), data, "train_file", "validation_file")
        return data, data.data_seed(config["settings"]["train"]["seed"])

    first_data, first_seed = data_and_seed(configs[0])
    validation = held_out_split(first_data, first_seed)
    fingerprint = texts_fingerprint(validation)
    for config in configs:
        data, seed = data_and_seed(config)
        if data.hold_out != first_data.hold_out:
            raise AttnclfError(f"the runs held out different validation texts (--hold-out {first_data.hold_out} "
                               f"and {data.hold_out}); an ensemble validates on texts all its runs held out")
        # A run records what it held out; only older runs, or token-cache ones, need their split rebuilt.
        held_out = held_out_fingerprint(config)
        if held_out is None and seed != first_seed:
            held_out = texts_fingerprint(held_out_split(data, seed))
        if held_out is not None and held_out != fingerprint:
            if seed != first_seed:
                raise AttnclfError(f"the runs held out different validation texts (split seeds {first_seed} and "
                                   f"{seed}); train them with one --split-seed to validate their ensemble")
            raise AttnclfError(_CHANGED_SPLIT.format(data.describe_held_out(label_names, validation.label_names)))
    return align_labels(validation, label_names)


_CHANGED_SPLIT = ("{} no longer gives the validation texts a run held out (the data or its split changed since it "
                  "was trained): they may be texts it learned")


# Classes the counts line names at most: past them it is a screenful no one reads (a text column given as the labels
# listed all 7,569 of AG News's titles), and the warnings below name the classes that need attention.
CLASSES_LISTED = 20


def describe_classes(train: TextDataset, suspect_separators: str = "", validation: TextDataset | None = None,
                     look_alikes: bool = True, left_out: Collection[str] = (),
                     held_out_by: str = "a --validation-file that holds some") -> list[str]:
    """The training classes with their counts, and a warning for names that differ only in case or spaces
    ("Positive" beside "positive" is a class of its own: the file probably meant one) or in how their accents are
    encoded ("é" composed or as "e" and a combining accent), and for classes of fewer than
    2 training texts (``validation``, the run's, says which of those it cannot score). ``suspect_separators``: for
    multi-label data read from a file, the characters that, inside class names, may be a label delimiter the file
    used other than --label-delimiter (see ``_delimiter_warnings``). ``look_alikes=False`` leaves out the warnings for
    names that look like one class written two ways (``_look_alike_warnings``): for labels that were numbers, not
    text (the estimator's), whose names are ``str``'s one way of writing each. ``left_out``: classes the caller
    trains on no text of by choice (the estimator's, weighted 0), not warned of as lacking training texts.
    ``held_out_by``: how the user gives a class validation texts (the command line's flag; the estimator's argument).

    >>> describe_classes(TextDataset(["good", "fine", "bad"], [1, 1, 0], ["neg", "pos"]))
    ['training texts per class: neg: 1, pos: 2', "warning: 1 of 2 classes has a single training text ('neg'): a \
model learns little from one example; give it more texts, or merge rare classes"]
    """
    names = train.label_names
    if train.multi_label:
        counts = np.bincount([i for labels in train.labels for i in labels], minlength=len(names))
    else:
        counts = np.bincount(np.asarray(train.labels, dtype=np.int64), minlength=len(names))
    listed = ", ".join(f"{name}: {count:,}" for name, count in list(zip(names, counts))[:CLASSES_LISTED])
    listed += f", ... {len(names) - CLASSES_LISTED:,} more" if len(names) > CLASSES_LISTED else ""
    if train.multi_label:  # (texts without a label are in none of the counts: without this, nowhere)
        unlabelled = sum(not labels for labels in train.labels)
        lines = [f"training texts per label: {listed}; {unlabelled:,} of {len(train):,} texts carry no label"]
    else:
        lines = [f"training texts per class: {listed}"]
    untrained = [name for name, count in zip(names, counts) if count == 0 and name not in left_out]
    if untrained:  # their only texts were held out to validate (or sampled away): never predicted, always wrong
        one = len(untrained) == 1
        lines.append(f"warning: {_of_classes(untrained, names)} no training text, {'its' if one else 'their'} only "
                     f"texts held out to validate or left out of a --max-train-examples sample "
                     f"({first_few(untrained)}); give {'it' if one else 'them'} more texts, or merge rare classes")
    single = [name for name, count in zip(names, counts) if count == 1]
    if single:  # next to nothing to learn from, and often nothing to validate on: no refusal, a run still trains
        # Most texts in a class of their own are no rare classes but texts given as the labels (--label-column title)
        texts_as_labels = (": most training texts are a class of their own; is the label column a column of texts?"
                           if len(single) > len(train) / 2 else "")
        lines.append(f"warning: {_of_classes(single, names)} a single training text "
                     f"({first_few(single)}): a model learns little from one example"
                     f"{_unvalidated(single, validation)}; give {'it' if len(single) == 1 else 'them'} more texts, "
                     f"or merge rare classes{texts_as_labels}")
    # (a class of one text has its own warning, which says so too; a multi-label split is a shuffle of the texts, in
    # which rare labels are often missing: their thresholds are tuned on what validation holds, as documented)
    held = _validated(validation) if validation is not None and not train.multi_label else None
    unvalidated = [] if held is None else [name for name, count in zip(names, counts) if count > 1 and name not in held]
    if unvalidated:
        one = len(unvalidated) == 1
        lines.append(f"warning: {_of_classes(unvalidated, names)} no validation text ({first_few(unvalidated)}): no "
                     f"validation score tells how {'it does' if one else 'they do'}; give "
                     f"{'it' if one else 'them'} more texts, or {held_out_by}")
    lines += _look_alike_warnings(names) if look_alikes else []
    if train.multi_label:
        lines += _delimiter_warnings(names, suspect_separators)
    return lines


def warnings_among(lines: list[str]) -> list[str]:
    """The warnings among lines that describe a run's data (``describe_classes``'s and the like), without their
    "warning: ": as config.json keeps them for the report, and as the estimator's fit warns of them.

    >>> warnings_among(["training texts per class: neg: 2, pos: 2", "warning: classes 'a' and 'A' differ"])
    ["classes 'a' and 'A' differ"]
    """
    return [line.removeprefix("warning: ") for line in lines if line.startswith("warning:")]


def _look_alike_warnings(names: list[str]) -> list[str]:
    """Warnings for class ``names`` that look like one class written in two ways: accents encoded otherwise, case or
    spaces, characters that show as nothing, a number written otherwise, numbers beside words, whole numbers written
    as decimals.

    >>> _look_alike_warnings(["Positive", "positive"])
    ["warning: classes 'Positive' and 'positive' differ only in case or spaces; make them one label in the data if \
they mean one class"]
    """
    lines = []
    by_encoding: dict[str, list[str]] = {}
    for name in names:
        by_encoding.setdefault(unicodedata.normalize("NFC", name), []).append(name)
    # (escaped, the composed first: printed as they are, the two look the same)
    lines += [f"warning: classes {' and '.join(map(ascii, sorted(same, key=lambda name: name != form)))} are one "
              f"word with its accents written composed (as \u00e9) and decomposed (as e + U+0301); make them one "
              f"label in the data (Unicode NFC) if they mean one class" for form, same in by_encoding.items()
              if len(same) > 1]
    by_form: dict[str, list[str]] = {}
    for same in by_encoding.values():  # (a name per encoding: those differing in no more are warned of above)
        by_form.setdefault(" ".join(same[0].casefold().split()), []).append(same[0])
    lines += [f"warning: classes {' and '.join(map(repr, same))} differ only in case or spaces; make them one "
              f"label in the data if they mean one class" for same in by_form.values() if len(same) > 1]
    # Characters that show as nothing (Unicode's format characters: a zero-width space pasted with a label, the
    # byte-order mark of a file joined after another) make a class that prints as another's
    by_visible: dict[str, list[str]] = {}
    for form, same in by_form.items():  # (a name per form: those differing in no more are warned of above)
        by_visible.setdefault("".join(c for c in form if unicodedata.category(c) != "Cf"), []).append(same[0])
    lines += [f"warning: classes {' and '.join(map(repr, same))} differ only in characters that show as nothing "
              f"(a zero-width space, a byte-order mark), case or spaces; make them one label in the data if they mean "
              f"one class"
              for same in by_visible.values() if len(same) > 1]
    numbers = [name for name in names if number_value(name) is not None]
    by_value: dict[Decimal, list[str]] = {}
    # (exactly: as floats, two ids of 20 digits would be one number, and "1_0" would be 10)
    for name in numbers:
        by_value.setdefault(number_value(name), []).append(name)
    lines += [f"warning: classes {' and '.join(map(repr, same))} are one number written differently; make them one "
              f"label in the data if they mean one class" for same in by_value.values() if len(same) > 1]
    words = [name for name in names if name not in numbers]
    # "1" beside "positive": two codings of the labels, mixed (as strings: a JSON number among strings is refused)
    if numbers and words:
        lines.append(f"warning: some classes are numbers ({', '.join(map(repr, numbers[:3]))}) and some are names "
                     f"({', '.join(map(repr, words[:3]))}); give every text one coding if they mean the same classes")
    return lines + _float_written_warnings(names)


def _float_written_warnings(names: list[str]) -> list[str]:
    """A warning for classes that are all whole numbers written as decimals ("0.0", "1.0"): pandas turns an integer
    column holding a missing value into floats, which to_csv writes so, and a run's labels are what the file says
    (predict answers "1.0"). Not for a mix: "1.0" beside "2.5" or "pos" is no column of whole numbers.

    >>> "the run's labels will read '1.0', not '1'" in _float_written_warnings(["0.0", "1.0"])[0]
    True
    >>> _float_written_warnings(["0", "1"]), _float_written_warnings(["0.5", "1.0"])
    ([], [])
    """
    if not names or not all(re.fullmatch(r"[+-]?\d+\.0+", name) for name in names):
        return []
    example = names[-1]
    return [f"warning: the classes ({first_few(names)}) look like whole numbers written as decimals, as pandas writes "
            f"an integer column holding a missing value: the run's labels will read {example!r}, not "
            f"{example.partition('.')[0]!r}; write them as whole numbers (e.g. df[col].astype('Int64') before "
            f"to_csv)"]


def _of_classes(some: list[str], names: list[str]) -> str:
    """How many of the classes ``names`` are ``some``, with the verb to match.

    >>> _of_classes(["a"], ["a", "b"]), _of_classes(["a", "b"], ["a", "b", "c"])
    ('1 of 2 classes has', '2 of 3 classes have')
    """
    return f"{len(some)} of {len(names)} classes {'has' if len(some) == 1 else 'have'}"


def _unvalidated(names: list[str], validation: TextDataset | None) -> str:
    """The clause a warning about ``names`` adds for those of them no validation text holds, or "". The split keeps
    a class's only text for training (it cannot be on both sides), so a validation split carved from the file never
    holds a class of one text: validation, which chooses the epoch, then says nothing of how it does.

    >>> _unvalidated(["a", "b", "c"], TextDataset(["a text"], [0], ["a", "b", "c"])).split(" either")[0]
    "; 2 of them ('b', 'c') have no validation text"
    >>> _unvalidated(["c"], TextDataset(["a text"], [0], ["a", "b", "c"])).split(" (")[0]
    '; it has no validation text either'
    """
    if validation is None:  # (a refit: no validation at all)
        return ""
    held = _validated(validation)
    unseen = [name for name in names if name not in held]
    if not unseen:
        return ""
    one = len(unseen) == 1
    which = ("it has" if one else "they have") if len(unseen) == len(names) else \
        f"{len(unseen)} of them ({first_few(unseen)}) {'has' if one else 'have'}"
    return (f"; {which} no validation text either (a class needs 2 texts for a split to hold one out), so no "
            f"validation score tells how {'it does' if one else 'they do'}")


def _validated(validation: TextDataset | None) -> set[str]:
    """The classes at least one of ``validation``'s texts holds (none without validation texts).

    >>> sorted(_validated(TextDataset(["x", "y"], [2, 0], ["a", "b", "c"]))), _validated(None)
    (['a', 'c'], set())
    """
    if validation is None:
        return set()
    labels = [i for held in validation.labels for i in held] if validation.multi_label else validation.labels
    return {validation.label_names[i] for i in set(np.asarray(labels, dtype=np.int64).tolist())}


def _delimiter_warnings(names: list[str], separators: str) -> list[str]:
    """Label sets split on another character than the file's read as classes of their own ("Business,reuters"). One
    of ``separators`` inside classes whose pieces are classes too, or recur across classes, probably separates
    labels."""
    lines = []
    for char in separators:
        joined = [name for name in names if char in name]
        pieces = Counter(piece.strip() for name in joined for piece in set(name.split(char)))
        if any(piece in names or count > 1 for piece, count in pieces.items() if piece):
            lines.append(f"warning: {len(joined)} {'class holds' if len(joined) == 1 else 'classes hold'} {char!r} "
                         f"({first_few(joined)}); if it separates the labels in the data, give --label-delimiter "
                         f"{char!r}")
    return lines


# What validation texts among the training texts flatter, in a run's warning of them (``shared_text_warnings``).
FLATTERED_BY_VALIDATION = "validation scores, early stopping and refit's epoch count"


def shared_text_warnings(splits: Splits, cleaning: CleaningConfig = CleaningConfig(), validation_too: bool = True,
                         flattered: str = FLATTERED_BY_VALIDATION) -> list[str]:
    """Warnings for texts on both sides of a line the scores rely on: duplicates in a file, split between training
    and validation, or test texts inside the training file. Either flatters the scores; nothing else would say so.
    And for training texts labelled twice, each way (``conflicting_labels_warning``): no model fits both.
    Without ``validation_too``, the test texts alone: a generated set repeats its short texts by design, and its
    validation texts' repeats, which no one can remove, only choose the epoch; the test score is the one reported.
    ``flattered``: what validation texts among the training texts flatter (the command line's; the estimator has no
    refit).

    Texts are compared as the run's ``cleaning`` leaves them, as the model reads them: spacing, line endings (a CRLF
    file's quoted line breaks), HTML line breaks and, as the run cleans, case and punctuation set no texts apart.
    (Stop-word removal and lemmatisation are left out: word by word they are slow, some 20 s to lemmatise IMDB's
    50,000 texts, for duplicates that differ only there, which are rare.)

    >>> train, test = TextDataset(["A film<br />so good "], [0], ["pos"]), TextDataset(["a film so good"], [0], ["pos"])
    >>> shared_text_warnings(Splits(train=train, test=test))[0][:48]
    'warning: 1 of the 1 test texts also occur among '
    """
    cleaning = _compared(cleaning)
    train_read = _as_read(splits.train.texts, cleaning)
    lines, seen = conflicting_labels_warning(train_read, splits.train) if validation_too else [], set(train_read)
    validation = splits.validation
    if validation is not None:  # (the toy sets, which validate on their training set by design, never come here)
        validation_read = _as_read(validation.texts, cleaning)
        shared = sum(text in seen for text in validation_read)
        if shared and validation_too:
            lines.append(f"warning: {shared:,} of the {len(validation):,} validation texts also occur among the "
                         f"training texts (duplicates in the data?): {flattered} will flatter the model")
        seen |= set(validation_read)
    if splits.test is not None:
        lines += _learned_test_warnings({cleaning: seen}, splits.test)
    return lines


def conflicting_labels_warning(read: Sequence[str], train: TextDataset) -> list[str]:
    """A warning, where ``train`` holds one text (as ``read``: each of its texts as the run reads it) under more
    than one label (a multi-label set's: more than one label set): a labelling slip, or a text its labels cannot
    tell apart; either way a model can fit only one of them, and `attnclf suspects` ranks (single-label) rows whose
    label is likely wrong. GLUE's SST-2 training phrases hold four such ("excruciatingly", negative and positive).

    >>> rows = TextDataset(["Great film", "great film", "dull", "great  film"], [1, 0, 0, 1], ["neg", "pos"])
    >>> conflicting_labels_warning(["great film", "great film", "dull", "great film"], rows)[0].split(";")[0]
    'warning: 1 training text occurs under more than one label (3 rows'
    """
    label_of: dict[str, object] = {}
    conflicting: dict[str, set] = {}
    for text, label in zip(read, train.labels):
        if label_of.setdefault(text, label) != label:
            conflicting.setdefault(text, {label_of[text]}).add(label)
    if not conflicting:
        return []
    text, labels = next(iter(conflicting.items()))
    named = " and ".join(sorted("|".join(train.label_names[i] for i in label) or "no label" if train.multi_label
                                else train.label_names[label] for label in labels))
    rows = sum(text in conflicting for text in read)
    counted = f"{len(conflicting):,} training texts occur" if len(conflicting) > 1 else "1 training text occurs"
    remedy = "" if train.multi_label else "; `attnclf suspects` ranks rows whose label is likely wrong"
    kind = "label set" if train.multi_label else "label"  # (a multi-label text's labels are one answer, not two)
    return [f"warning: {counted} under more than one {kind} ({rows:,} rows; {shown(text)} as {named}): a model can "
            f"fit only one {kind} of each{remedy}"]


def _compared(cleaning: CleaningConfig) -> CleaningConfig:
    """How texts are compared for a run that cleans as ``cleaning`` says: without its stop-word removal and
    lemmatisation (``shared_text_warnings``)."""
    return replace(cleaning, remove_stopwords=False, lemmatize=False)


def _as_read(texts: Iterable[str], cleaning: CleaningConfig) -> list[str]:
    return [clean(text, cleaning) for text in texts]


def _learned_test_warnings(seen: dict[CleaningConfig, set[str]], test: TextDataset) -> list[str]:
    """The warning for ``test`` texts among ``seen``: by cleaning, the training and validation texts of the runs that
    clean so, as it reads them. A test text counts once, however many of those runs read it as one they learned."""
    learned = [False] * len(test)
    for cleaning, texts in seen.items():
        learned = [before or text in texts for before, text in zip(learned, _as_read(test.texts, cleaning))]
    shared = sum(learned)
    if not shared:
        return []
    return [f"warning: {shared:,} of the {len(test):,} test texts also occur among the training or validation "
            f"texts: the test score will flatter the model"]


def texts_in_other_folds(texts: Sequence[str], fold_of_text: Sequence[int], cleaning: CleaningConfig) -> int:
    """How many of ``texts`` occur in another fold than their own (``fold_of_text``), compared as a run that cleans
    as ``cleaning`` reads them (``shared_text_warnings``): texts that a model trained without their fold learned all
    the same, from a copy.

    >>> texts_in_other_folds(["Good film", "good film", "dull", "dull"], [0, 1, 0, 0], CleaningConfig())
    2
    """
    folds_of: dict[str, set[int]] = {}
    read = _as_read(texts, _compared(cleaning))
    for text, fold in zip(read, fold_of_text):
        folds_of.setdefault(text, set()).add(fold)
    return sum(len(folds_of[text]) > 1 for text in read)


def learned_text_warnings(configs: list[dict], test: TextDataset, data_dir: str | None = None) -> list[str]:
    """``shared_text_warnings`` for runs scored on texts other than their own test split (`evaluate --test-file`, or
    `evaluate --dataset` of another dataset): how many of those texts the runs trained or validated on. Another
    dataset may hold them, as SST-2's two forms share their dev sentences (GLUE's test is the sentences' validation).
    ``data_dir``: look for the runs' dataset there first.

    Every run whose data is still there is checked, and each run whose data is not is named in a note. Runs whose
    texts are not to be held in memory (a token cache, a saved estimator, which records none) are left unchecked.
    Texts are compared as each run reads them (its cleaning: a --no-lowercase run's "GOOD" is not "good").

    >>> # learned_text_warnings([read_json(Path("runs/sst2-sentences") / "config.json")], load_test_split("sst2"))
    >>> # -> ['warning: 872 of the 872 test texts also occur among the training or validation texts: ...']
    """
    read: dict[str, list[str]] = {}  # by the settings that chose each split read: the texts it trained, validated on
    learned: dict[CleaningConfig, dict[str, None]] = {}  # by how runs read texts: the texts those runs learned, once
    unchecked = []
    for config in configs:
        data = config.get("settings", {}).get("data")
        if config.get("trained_by") or not data or data.get("token_cache"):
            continue
        try:
            settings, seed = _saved_data(config, data_dir, "texts"), config["settings"]["train"]["seed"]
            cleaning = _compared(TokenizerConfig.from_dict(config["settings"].get("tokenizer", {})).cleaning)
            # Runs of one training set learned the same texts: every seed's validation is carved from it (a source's
            # own splits take no seed), so only a --max-train-examples sample is the seed's. Their test file (perhaps
            # moved since) holds none of them; and a warning is not worth a dataset's download.
            split_seed = settings.data_seed(seed) if settings.max_train_examples else 0
            chosen_by = replace(settings, split_seed=split_seed, test_file=None, max_test_examples=None,
                                download=False)
            split = repr(chosen_by)
            if split not in read:
                splits = load_data(chosen_by, seed)
                read[split] = [text for part in (splits.train, splits.validation) if part is not None
                               for text in part.texts]
        except Exception as exc:  # (the run's data gone, a record from a newer attnclf): a warning never stops a score
            why = exc if isinstance(exc, AttnclfError) else f"{type(exc).__name__}: {exc}"
            unchecked.append(f"note: not checked whether {config['settings'].get('output', 'a run')} trained on any "
                             f"of these texts: {why}")
            continue
        learned.setdefault(cleaning, {}).update(dict.fromkeys(read[split]))
    # Each text cleaned once for each way the runs read it, however many splits learned it: the cleaning is what
    # costs (BENCHMARKS.md)
    seen = {cleaning: set(_as_read(texts, cleaning)) for cleaning, texts in learned.items()}
    return _learned_test_warnings(seen, test) + unchecked


def scoring_data(classifier, test_file: str | None = None, dataset: str | None = None, *, split: str = "test",
                 text_column: str | list[str] | None = None, label_column: str | None = None,
                 label_delimiter: str | None = None, download: bool = False, data_dir: str | None = None,
                 log: Callable[[str], None] = print, named: Callable[[str], str] = by_field) -> TextDataset:
    """The labelled texts to score ``classifier`` (a ``Classifier``, or an ``Ensemble`` of runs) on, labels in its
    order, as `attnclf evaluate` scores it: ``test_file``, read by the run's own columns unless told otherwise; else
    ``dataset``'s test split (``download``: fetch it first if it is missing); else the run's own test data, or its
    validation split when its data has no test split (never an ensemble's: its members each held out different
    texts). ``split="validation"``: the texts the runs held out to validate on (``run_validation_data``), neither
    ``test_file`` nor ``dataset``. ``data_dir``: look for the datasets there first. Errors name these arguments
    as ``named`` spells them (the command line: by their flags, as ``RunSettings.check`` does).

    A multi-label run is never scored on its validation texts: its thresholds were tuned to fit them.
    Texts other than the run's own may be texts it learned: ``log`` gets ``learned_text_warnings`` about them, and a
    note when ``dataset`` is not the one the run trained on (labels it knows by another name are read as its own).

    >>> # scoring_data(Classifier.load("runs/demo"), test_file="held_out.csv").split  # 'test'
    >>> # scoring_data(Classifier.load("runs/demo"), split="validation").split  # 'validation'
    """
    from ..ensemble import Ensemble

    if split not in ("test", "validation"):
        raise AttnclfError(f"{named('split')} must be test or validation, got {shown(split)}")
    members = classifier.members if isinstance(classifier, Ensemble) else [classifier]
    if split == "validation":
        if dataset or test_file:
            raise AttnclfError(f"{named('split')} validation scores the texts the runs held out; drop "
                               f"{named('dataset')}/{named('test_file')}")
        _refuse_tuned_validation(classifier, named)
        return run_validation_data([member.config for member in members], classifier.label_names, data_dir=data_dir)
    if dataset and test_file:  # (the file was scored, and the dataset left unread without a word)
        raise AttnclfError(f"{named('dataset')} and {named('test_file')} each name the texts to score; give one")
    if test_file:
        from ..data.files import columns_refusal, is_fasttext_file, load_file, run_columns
        from ..prediction import trained_label_delimiter

        if label_delimiter is not None and not classifier.multi_label:  # (train refuses it without --multi-label)
            raise AttnclfError(f"{named('label_delimiter')} applies to multi-label runs, and this one is "
                               f"single-label: its test labels are read whole; drop {named('label_delimiter')}")
        given = {"text_column": text_column, "label_column": label_column, "label_delimiter": label_delimiter}
        if is_fasttext_file(test_file) and (flag := next((name for name, value in given.items() if value), None)):
            raise AttnclfError(columns_refusal(test_file, named(flag)))
        saved = classifier.config["settings"]["data"]
        with run_columns(text_column, label_column):
            data = load_file(test_file, text_column or saved.get("text_column", "text"),
                             label_column or saved.get("label_column", "label"), label_names=classifier.label_names,
                             split="test", multi_label=classifier.multi_label,
                             label_delimiter=label_delimiter or trained_label_delimiter(classifier.config))
    elif dataset:
        from ..data.registry import load_test_split

        if download:
            from ..data.download import ensure_available

            ensure_available(dataset, candidate_dirs(data_dir), download=True)
        data = load_test_split(dataset, data_dir)
        trained_on = classifier.config["settings"]["data"].get("dataset")
        if trained_on == dataset:
            return align_labels(data, classifier.label_names)
        # Legitimate (transfer), but not what a typo should look like; and another dataset may hold the run's texts.
        log(f"note: the model trained on {trained_on or 'files'}; scoring it on {dataset}'s {data.split} split")
        data = align_labels(data, classifier.label_names, synonyms=True)
    else:
        data = run_test_data(classifier.config, classifier.label_names, test_only=isinstance(classifier, Ensemble),
                             data_dir=data_dir, named=named,
                             if_moved=f"; to score the run on it where it is now, give that path with "
                                      f"{named('test_file')}")
        if data.split == "validation":  # the run's data has no test split
            _refuse_tuned_validation(classifier, named)
        return data
    for line in learned_text_warnings([member.config for member in members], data, data_dir):
        log(line)
    return data


def learned_by_another(other, data: TextDataset, source: str | None, data_dir: str | None = None) -> list[str]:
    """``learned_text_warnings`` for ``other`` (a ``Classifier`` or ``Ensemble`` compared with a run on ``data``, as
    `evaluate --against` compares them): which of ``data``'s texts it trained or validated on. ``source``: the
    dataset whose test split ``data`` is, which a run trained on that dataset never learned (None: a file, or the
    texts a run held out, which another run may have trained on).

    >>> # learned_by_another(Classifier.load("runs/old"), scoring_data(clf), "imdb")  # [] when runs/old is IMDB's
    """
    from ..ensemble import Ensemble

    members = other.members if isinstance(other, Ensemble) else [other]
    configs = [member.config for member in members
               if source is None or member.config["settings"]["data"].get("dataset") != source]
    return learned_text_warnings(configs, data, data_dir) if configs else []


def _refuse_tuned_validation(classifier, named: Callable[[str], str]) -> None:
    """A multi-label run's scores on its validation texts are flattered: its thresholds were tuned to fit them."""
    if classifier.multi_label:
        raise AttnclfError(f"a multi-label run tuned its thresholds on its validation texts, which would "
                           f"flatter it there; score it on test data ({named('test_file')} or {named('dataset')})")


def align_labels(data: TextDataset, label_names: list[str], synonyms: bool = False) -> TextDataset:
    """``data`` with labels re-indexed to the training label order. With ``synonyms`` (a run scored on a built-in
    dataset it did not train on), a name the run lacks but knows by another name (``LABEL_SYNONYMS``: IMDB's ``pos``
    is SST-2's ``positive``) is read as that one, unless ``data`` has that other name too: two of its classes would
    merge into one.

    >>> align_labels(TextDataset(["fine", "awful"], [1, 0], ["negative", "positive"]), ["neg", "pos"], True).labels
    [1, 0]
    """
    if data.label_names == label_names:
        return data
    index = {name: i for i, name in enumerate(label_names)}
    if synonyms:
        index |= {name: index[known] for name, known in LABEL_SYNONYMS.items()
                  if known in index and name not in index and known not in data.label_names}
    used = {y for labels in data.labels for y in labels} if data.multi_label else set(data.labels)
    unknown = sorted({data.label_names[y] for y in used} - index.keys())
    if unknown:
        raise DataError(f"{data.name or data.split}: label(s) {', '.join(map(repr, unknown))} "
                        f"never seen in training (known: {', '.join(label_names)})")
    if data.multi_label:
        labels = [tuple(sorted(index[data.label_names[y]] for y in ys)) for ys in data.labels]
    else:
        labels = [index[data.label_names[y]] for y in data.labels]
    return replace(data, labels=labels, label_names=list(label_names))
