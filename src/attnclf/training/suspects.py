"""Training rows whose given label looks wrong, each scored by a model that never saw it (out of fold).

A model scoring its own training texts (`attnclf evaluate --errors` on the training file) has learned their labels,
the wrong ones among them. Here the rows are split into K stratified folds; a model trained on the other K-1 folds
scores each fold, and every row is ranked by the probability its model gave the row's own label, lowest first: the
simplest honest form of confident learning's ranking (cleanlab's ``find_label_issues`` by self-confidence).

Each fold trains as a run of its own into ``WORK/fold-K`` (``train_or_continue``, as `train --seeds` trains its
members), from the rows written to ``WORK/data/``; ``WORK/suspects.json`` records which rows went to which fold, so a
resumed command keeps the finished folds and continues the others.

>>> # rows = find_suspects(settings_for(DataSettings(train_file="reviews.csv"), "boe", output="runs/suspects"))
>>> # rows[0]  # {'row': 812, 'text': ..., 'given_label': 'pos', 'given_label_probability': 0.02, ...}
"""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..checks import by_field
from ..data.base import TextDataset
from ..errors import AttnclfError, DataError, RunDirError, shown
from ..rundir import atomic_write_bytes, atomic_write_json, folder_lock, prepare_output_dir, read_json
from .run_data import dataset_splits, texts_fingerprint, texts_in_other_folds
from .settings import DataSettings, RunSettings, check_same_settings, resume_settings

DEFAULT_FOLDS = 5
OUTPUT_WRITER = "suspects --output"  # (what a clash of the training file's columns with the written ones names)
PLAN_FILE = "suspects.json"  # in the work folder: the folds' rows, as a resumed command must find them again
# What a resumed fold may train with otherwise than the command says: how long (a fold continues its own schedule).
_PER_FOLD = {"train.epochs", "train.schedule_epochs"}


def suspect_columns(label_names: Sequence[str]) -> dict[str, type]:
    """The columns of ``find_suspects``' rows, in order, each to the type of its values.

    >>> list(suspect_columns(["neg", "pos"]))[2:6]
    ['given_label', 'given_label_probability', 'predicted_label', 'margin']
    """
    return {"row": int, "text": str, "given_label": str, "given_label_probability": float, "predicted_label": str,
            "margin": float, "fold": int, **{f"probability:{name}": float for name in label_names}}


def suspect_line(rank: int, row: dict, width: int = 120) -> str:
    """One of ``ranked_suspects``' rows as the command line prints it, its text cut to fit ``width`` characters.

    >>> print(suspect_line(1, {"row": 7, "text": "a dull film", "given_label": "pos", "given_label_probability": 0.03,
    ...                        "predicted_label": "neg", "margin": -0.94}))
    1. row 7: given 'pos' (p 0.030), predicted 'neg' (margin -0.940): a dull film
    """
    head = (f"{rank}. row {row['row']}: given {shown(row['given_label'])} (p {row['given_label_probability']:.3f}), "
            f"predicted {shown(row['predicted_label'])} (margin {row['margin']:+.3f}): ")
    return head + shown(row["text"], most=max(width - len(head), 20), write=str)


def suspects_summary(rows: Sequence[dict], work: str | Path, output: str | Path | None = None) -> str:
    """The line closing `attnclf suspects`: how many of ``find_suspects``' ``rows`` are predicted out of fold as
    another label than the given one (a negative margin), where the folds trained (``work``), and where every row was
    written (``output``), if anywhere.

    >>> suspects_summary([{"margin": -0.4}, {"margin": 0.3}], "work")
    '1 of 2 rows are predicted out of fold as another label than the one given; folds in work'
    """
    flagged = sum(row["margin"] < 0 for row in rows)
    return (f"{flagged:,} of {len(rows):,} rows are predicted out of fold as another label than the one given; "
            f"folds in {work}" + (f"; every row, lowest first, in {output}" if output else ""))


def fold_of_each_row(labels: Sequence[int], folds: int, seed: int) -> np.ndarray:
    """The fold (0 to ``folds`` - 1) that holds out each row: stratified, so each fold holds out its share of every
    class, and seeded, so the same labels and seed give the same folds.

    >>> fold_of_each_row([0, 0, 0, 1, 1, 1], 3, seed=0).tolist()
    [2, 1, 0, 2, 0, 1]
    """
    from sklearn.model_selection import StratifiedKFold

    folded = np.empty(len(labels), dtype=int)
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for fold, (_, held_out) in enumerate(splitter.split(np.zeros(len(labels)), labels)):
        folded[held_out] = fold
    return folded


def ranked_suspects(data: TextDataset, probabilities: np.ndarray, folds: np.ndarray) -> list[dict]:
    """A row per text of ``data``, lowest probability of its given label first (ties in row order): its ``row``
    (from 1, as a data file's rows count below its header), text, given label and that label's probability, the
    predicted label, the ``margin`` (the given label's probability less the likeliest other label's: below 0 where
    the model prefers another), the ``fold`` that held it out (from 1) and every class's probability.

    >>> data = TextDataset(["good", "dull"], [1, 1], ["neg", "pos"])
    >>> rows = ranked_suspects(data, np.array([[.2, .8], [.9, .1]]), np.array([0, 1]))
    >>> [(r["row"], r["predicted_label"], round(r["margin"], 2)) for r in rows]
    [(2, 'neg', -0.8), (1, 'pos', 0.6)]
    """
    given = np.asarray(data.labels)
    given_probability = probabilities[np.arange(len(given)), given]
    others = probabilities.copy()
    others[np.arange(len(given)), given] = -np.inf
    margin = given_probability - others.max(axis=1)
    predicted = probabilities.argmax(axis=1)
    names = data.label_names
    return [{"row": int(i) + 1, "text": data.texts[i], "given_label": names[given[i]],
             "given_label_probability": float(given_probability[i]), "predicted_label": names[predicted[i]],
             "margin": float(margin[i]), "fold": int(folds[i]) + 1,
             **{f"probability:{name}": float(probabilities[i, c]) for c, name in enumerate(names)}}
            for i in np.argsort(given_probability, kind="stable")]


def training_rows(data: DataSettings, folds: int, seed: int, named: Callable[[str], str] = by_field) -> TextDataset:
    """Every labelled row of ``data``'s training file (or its dataset's training split), in order, checked as
    ``find_suspects`` needs them: single-label, two classes or more, each with a row for every one of ``folds``."""
    data.require_source()
    if data.multi_label:
        raise AttnclfError("suspects ranks single-label rows by their one label's probability; a multi-label row's "
                           "labels are each partly right: drop --multi-label")
    if folds < 2:
        raise AttnclfError(f"{named('folds')} must be at least 2 (each fold is scored by a model trained on the "
                           f"others), got {folds}")
    unread = next((name for name in ("validation_file", "test_file", "max_train_examples", "max_test_examples")
                   if getattr(data, name)), None)
    if unread:  # (every training row is ranked, numbered as in the file; a fold validates on a share of its own)
        raise AttnclfError(f"suspects ranks every row of the training data; {named(unread)} would go unread: drop it")
    if data.dataset:
        rows = dataset_splits(data, seed).train
    else:
        from ..data.files import load_file

        rows = load_file(data.train_file, data.text_column, data.label_column)
    counts = Counter(rows.labels)
    if len(counts) < 2:
        raise DataError(f"{data.describe()}: every row has only one class ({shown(rows.label_names[rows.labels[0]])})"
                        f"; suspect labels are found among two classes or more")
    label, fewest = min(counts.items(), key=lambda item: (item[1], item[0]))
    if fewest < folds:
        # (a fold's model must have seen the class, and each fold must hold out one of its rows)
        advice = (f"give {named('folds')} {fewest} or fewer" if fewest >= 2 else
                  "no model trained without its one row can learn the class: relabel it, or drop it")
        raise DataError(f"{data.describe()}: class {shown(rows.label_names[label])} has {fewest} row"
                        f"{'s' if fewest != 1 else ''}, fewer than {named('folds')} {folds}; {advice}")
    return rows


def find_suspects(settings: RunSettings, folds: int = DEFAULT_FOLDS, *, output: str | Path | None = None,
                  resume: bool = False, overwrite: bool = False, progress: bool = True,
                  named: Callable[[str], str] = by_field) -> list[dict]:
    """Rank every training row of ``settings.data`` by its given label's out-of-fold probability, lowest first
    (``ranked_suspects``' rows): split the rows into ``folds`` stratified folds seeded by ``settings.train.seed``,
    train ``settings``' model on all folds but one into ``settings.output``/fold-K, and score the fold it left out.

    ``output``: a .csv / .tsv / .jsonl / .parquet file to write the rows into as well, atomically (an existing one is
    kept unless ``overwrite``), checked before anything trains; each row with the training file's other columns
    after ``row``, as `evaluate --errors` writes a test file's (``with_file_columns``). A work folder that holds folds
    already is refused unless ``resume`` (finished folds are kept, unfinished ones continue from their checkpoints;
    they must be of the same rows, folds and settings) or ``overwrite`` (every fold trains afresh). ``named`` names
    the settings in errors.

    >>> # from attnclf.training.settings import DataSettings, settings_for
    >>> # settings = settings_for(DataSettings(train_file="reviews.csv"), "boe", output="runs/suspects-reviews")
    >>> # find_suspects(settings, folds=5, output="suspects.csv")[:3]   # the three likeliest mislabelled rows
    """
    from ..classifier import Classifier
    from ..prediction_files import check_output, refuse_clashing_header, with_file_columns, write_rows
    from .run import each_warning_once, train_or_continue

    if resume and overwrite:
        raise AttnclfError(f"{named('resume')} keeps the finished folds and {named('overwrite')} trains them again: "
                           f"give one")
    if output is not None:  # (before hours of training: a name that cannot be written is told at once)
        output = check_output(output, overwrite=overwrite, named=named, writer=OUTPUT_WRITER)
    seed = settings.train.seed
    rows = training_rows(settings.data, folds, seed, named)
    if output is not None and rows.read_from is not None:  # (as is a column of the file's the output writes too)
        refuse_clashing_header(rows.read_from, suspect_columns, rows.label_names, OUTPUT_WRITER)
    fold_of_row = fold_of_each_row(rows.labels, folds, seed)
    # (once, of the rows: each fold's run would warn of its share as of a test split's texts; each_warning_once(folds))
    if shared := texts_in_other_folds(rows.texts, fold_of_row, settings.tokenizer.cleaning):
        print(f"warning: {shared:,} of the {len(rows):,} rows share their text with a row of another fold (duplicates "
              f"in the data?): the model that scores such a row learned its copy, so it ranks as the copy is "
              f"labelled, not out of fold", file=sys.stderr)
    work = Path(settings.output).absolute()
    plan = {"folds": folds, "seed": seed, "rows": len(rows), "texts_sha256": texts_fingerprint(rows)}
    prepare_output_dir(work)
    with folder_lock(work, instead=f"give another {named('work_dir')}"):
        _check_plan(work, plan, resume, overwrite, named)
        earlier_folds = _planned_folds(work)
        atomic_write_json(work / PLAN_FILE, plan)
        probabilities = np.zeros((len(rows), len(rows.label_names)))
        # (The folds train on the same data; their files are this command's, no `attnclf compare` of the user's.)
        with each_warning_once(folds=True):
            for fold in range(folds):
                fold_settings = _fold_settings(settings, rows, fold_of_row, fold, work, written=resume)
                if resume and (Path(fold_settings.output) / "config.json").is_file():
                    check_same_settings(resume_settings(fold_settings.output), fold_settings,
                                        f"{named('resume')} continues the folds as they trained; give their flags, "
                                        f"or {named('overwrite')}", ignore=_PER_FOLD)
                if progress:
                    print(f"fold {fold + 1} of {folds}: {fold_settings.output}", file=sys.stderr)
                train_or_continue(fold_settings, resume, progress, named=named)
                held_out = np.flatnonzero(fold_of_row == fold)
                classifier = Classifier.load(fold_settings.output, device=settings.device)
                scored = classifier.predict_proba([rows.texts[i] for i in held_out])
                # (a fold's file names the classes as the rows do; its run numbers them in its own order)
                probabilities[held_out] = scored[:, [classifier.label_names.index(name) for name in rows.label_names]]
        _remove_folds_beyond(work, folds, earlier_folds)
    ranked = ranked_suspects(rows, probabilities, fold_of_row)
    if output is not None:
        # (The training file's other columns, an id, come along: the row found in the user's own data.)
        ranked_with_columns, columns = with_file_columns(rows, ranked, suspect_columns, OUTPUT_WRITER)
        write_rows(ranked_with_columns, output, columns, overwrite, "finding suspects", named)
    return ranked


def _remove_folds_beyond(work: Path, folds: int, planned: int) -> None:
    """Delete the folds (their run folders and data files) an earlier command's plan named beyond this one's
    ``folds``, up to the ``planned`` it named: a fold-N folder of a work folder no `suspects` planned is the user's."""
    for other in [*work.glob("fold-*"), *work.glob("data/fold-*.jsonl")]:
        number = other.name.removesuffix(".jsonl").removesuffix("-train").removesuffix("-held-out")[5:]
        if number.isdigit() and folds < int(number) <= planned:
            # (a fold linked from elsewhere loses its link alone: rmtree refuses one, and the folder it names was
            # never this command's)
            shutil.rmtree(other) if other.is_dir() and not other.is_symlink() else other.unlink()


def _planned_folds(work: Path) -> int:
    """How many folds the plan an earlier command left in ``work`` names (0: none, or one unreadable)."""
    try:
        folds = read_json(work / PLAN_FILE).get("folds") if (work / PLAN_FILE).is_file() else 0
    except (AttnclfError, AttributeError):
        return 0
    return folds if isinstance(folds, int) and not isinstance(folds, bool) and folds > 0 else 0


def _check_plan(work: Path, plan: dict, resume: bool, overwrite: bool, named: Callable[[str], str]) -> None:
    """Refuse a work folder whose folds this command would mix with its own: without ``resume`` or ``overwrite``
    any, and with ``resume`` those of other rows, folds or seed."""
    if not (work / PLAN_FILE).is_file():
        return
    if overwrite:
        return
    if not resume:
        raise RunDirError(f"{work} holds the folds of an earlier `attnclf suspects`: give {named('resume')} to keep "
                          f"the finished ones and continue the others, or {named('overwrite')} to train them again")
    earlier = read_json(work / PLAN_FILE)
    if not isinstance(earlier, dict):
        raise RunDirError(f"{work / PLAN_FILE}: expected the folds' plan, an object; give {named('overwrite')}")
    if earlier != plan:
        other_texts = "" if earlier.get("texts_sha256") == plan["texts_sha256"] else ", of other texts or labels"
        raise RunDirError(f"{work} holds {earlier.get('folds')} folds of seed {earlier.get('seed')} over "
                          f"{earlier.get('rows')} rows; this command splits {plan['rows']} rows{other_texts} into "
                          f"{plan['folds']} folds of seed {plan['seed']}: give the command that began them, or "
                          f"{named('overwrite')}")


def _fold_settings(settings: RunSettings, rows: TextDataset, fold_of_row: np.ndarray, fold: int, work: Path,
                   written: bool) -> RunSettings:
    """The settings of fold ``fold``'s run: ``settings`` trained on the rows of the other folds, tested on its own,
    each part written into ``work``/data as JSON lines, a text and its label's name a line (``written``: kept where
    there already, as a resume whose plan matched finds them)."""
    files = {}
    for part, chosen in (("train", fold_of_row != fold), ("held-out", fold_of_row == fold)):
        path = work / "data" / f"fold-{fold + 1}-{part}.jsonl"
        if not (written and path.is_file()):
            prepare_output_dir(path.parent)
            atomic_write_bytes(path, "".join(
                json.dumps({"text": rows.texts[i], "label": rows.label_names[rows.labels[i]]}, ensure_ascii=False)
                + "\n" for i in np.flatnonzero(chosen)).encode())
        files[part] = str(path)
    data = settings.data
    fold_data = DataSettings(train_file=files["train"], test_file=files["held-out"], val_fraction=data.val_fraction,
                             split_seed=data.split_seed, hold_out=data.hold_out, token_cache=data.token_cache,
                             token_cache_dir=data.token_cache_dir)
    return replace(settings, data=fold_data, output=str(fold_dir(work, fold)), report=False)


def default_work_dir(settings: RunSettings) -> str:
    """Where ``find_suspects`` trains the folds of ``settings``' model and data when the caller names no folder
    (`attnclf suspects` without --work-dir): runs/suspects-MODEL-DATA.

    >>> default_work_dir(RunSettings(model="boe", data=DataSettings(dataset="imdb")))
    'runs/suspects-boe-imdb'
    """
    return f"runs/suspects-{settings.model}-{settings.data.describe()}"


def fold_dir(work: str | Path, fold: int) -> Path:
    """Where fold ``fold`` (from 0) of ``find_suspects`` trains: ``work``/fold-K, K from 1.

    >>> fold_dir("runs/suspects-boe-reviews", 0).name
    'fold-1'
    """
    return Path(work) / f"fold-{fold + 1}"


def folds_progress(work: str | Path, folds: int) -> str:
    """How far each of the ``folds`` runs ``find_suspects`` trains into ``work`` got, in one line: what a resumed
    command keeps and what it continues from (``run_progress``).

    >>> folds_progress("no/such/folder", 2)
    'fold 1 not started; fold 2 not started'
    """
    from .settings import run_progress

    return "; ".join(f"fold {fold + 1} {run_progress(fold_dir(work, fold))}" for fold in range(folds))
