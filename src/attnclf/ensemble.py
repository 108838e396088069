"""Several trained runs of one task, voting by their averaged class probabilities.

The cheapest accuracy a from-scratch model can buy: a few seeds of one recipe
disagree on the texts none of them is sure about, and their mean probability
is more often right than any one of them (BENCHMARKS.md, three seeds: the IMDB recipe's ensemble 0.4 points
above their mean test accuracy; under the recipes of 2026-11-22, 0.9 above the best seed on IMDB and 3.7 above
every seed on 20 Newsgroups).

``attnclf train --seeds 0 1 2`` trains such members into ``OUTPUT/seed-S``
(``train_ensemble``) and writes ``OUTPUT/ensemble.json``; ``Ensemble.load``
takes that folder or the members' own.

Multi-label runs average too, label by label (each label's sigmoid probability), and predict the labels whose
averaged probability reaches the ensemble's threshold: tuned on the members' shared validation texts when they
held out the same ones (``--split-seed``), else the mean of the members' own thresholds (``ensemble_thresholds``).

>>> # from attnclf.ensemble import Ensemble
>>> # ensemble = Ensemble.load(["runs/imdb-seed0", "runs/imdb-seed1", "runs/imdb-seed2"])
>>> # ensemble = Ensemble.load(["runs/imdb-ensemble"])   # written by `attnclf train --seeds 0 1 2`
>>> # ensemble.predict(["a slow start, then a wonderful film"])
"""

from __future__ import annotations

import os
import shutil
from functools import lru_cache
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from .checks import by_field, check_backend, check_seed
from .errors import NAME_LENGTH, AttnclfError, RunDirError, shown
from .prediction import (LabelSetPrediction, Prediction, check_texts, class_threshold, estimator_classifier,
                         model_repr, token_counts)
from .rundir import (ENSEMBLE_FILE, atomic_write_bytes, atomic_write_json, checked_thresholds, file_sha256,
                     first_missing_folder, folder_lock, member_folders, prepare_output_dir, read_json,
                     remove_cut_short_writes, remove_empty_folders, run_dir_list)

if TYPE_CHECKING:  # loaded where used: `predict --backend onnx` asks is_ensemble_dir without PyTorch
    from .classifier import Classifier
    from .export.runtime import OnnxClassifier


def not_explained(member: str | Path) -> str:
    """Why an ensemble is not explained or exported as one model, pointing at ``member`` to use instead.

    >>> not_explained("runs/ens/seed-0").endswith("use one member, such as runs/ens/seed-0")
    True
    """
    return ("an ensemble is not explained or exported as one model: its members tokenise and attend each their own "
            f"way; use one member, such as {member}")


def refuse_ensemble_dir(path: str | Path) -> None:
    """One line, naming the folder's first member to use instead, when a `train --seeds` folder reaches a command
    that needs one model (explain, export, faithfulness, the ONNX backend; report says its own,
    ``refuse_ensemble_report``).

    >>> refuse_ensemble_dir("no/such/folder")  # (not an ensemble folder: nothing to refuse)
    """
    if is_ensemble_dir(path):
        raise RunDirError(f"{path}: {not_explained(first_member(path))}")


def refuse_ensemble_report(path: str | Path) -> None:
    """One line for `attnclf report` given a `train --seeds` folder: what the folder is, and that each seed's run has a
    report of its own, naming the first's command (``refuse_ensemble_dir``'s words, "not explained or exported", name
    other commands).

    >>> refuse_ensemble_report("no/such/folder")  # (not an ensemble folder: nothing to refuse)
    """
    if is_ensemble_dir(path):
        member = first_member(path)
        raise RunDirError(f"{path}: an ensemble folder (train --seeds), not one run: each seed's run has its own "
                          f"report; attnclf report {member}")


def first_member(path: str | Path) -> str:
    """The first member of the `train --seeds` folder at ``path``, its name cut to ``NAME_LENGTH`` characters: the
    run a message refusing the folder points to.

    >>> first_member("no/such/folder")  # (its ensemble.json unread: the name `train --seeds` gives members)
    'no/such/folder/seed-S'
    """
    try:
        first = member_dirs(path)[0]
    except AttnclfError:  # (a mangled ensemble.json is no reason to lose the refusal: the folders' usual names)
        return str(Path(path) / "seed-S")
    return str(first.parent / shown(first.name, most=NAME_LENGTH, write=str))


class Ensemble:
    """Members trained on the same data with one label set (same names, same order), all single-label or all
    multi-label. A multi-label ensemble's ``thresholds`` (one per label, in ``label_names`` order) cut its averaged
    probabilities into label sets: by default the mean of its members' (``ensemble_thresholds``); ``thresholds_from``
    says which they are, as `attnclf evaluate --threshold` names them (None for a single-label ensemble).

    >>> # Ensemble.load(["runs/topics-3"]).thresholds_from   # "ensemble.json's, tuned on the validation texts ..."
    """

    def __init__(self, members: Sequence[Classifier], names: Sequence[str] | None = None,
                 thresholds: Sequence[float] | None = None):
        if not members:
            raise AttnclfError("an ensemble needs at least one run")
        members = [_member(member, i) for i, member in enumerate(members)]
        # The member `explain` points to: a run directory when loaded from one, else the member in Python.
        self._first_member = names[0] if names else "ensemble.members[0]"
        names = list(names or [f"member {i}" for i in range(len(members))])
        first, reference = members[0], _data(members[0])
        for member, name in zip(members[1:], names[1:], strict=True):  # (each against the first)
            if member.multi_label != first.multi_label:
                single, multi = (name, names[0]) if first.multi_label else (names[0], name)
                raise AttnclfError(f"{single} is a single-label run and {multi} a multi-label one; an ensemble's "
                                   f"runs are all single-label or all multi-label")
            if member.label_names != first.label_names:
                raise AttnclfError(f"{name} has labels {member.label_names}, but {names[0]} has {first.label_names}; "
                                   f"an ensemble's runs must share their labels")
            data = _data(member)
            if data["refit"] != reference["refit"]:
                refit, other = (name, names[0]) if data["refit"] else (names[0], name)
                raise AttnclfError(f"{refit} is a refit (trained on its validation texts too) and {other} is not; "
                                   f"an ensemble's runs must share their training texts: refit them all or none")
            differ = [key for key, value in data.items() if reference[key] != value
                      and not _same_file_bytes(key, reference[key], value)]
            if differ:
                raise AttnclfError(f"{name} was trained on other data than {names[0]} ({differ[0]}: "
                                   f"{data[differ[0]]!r} vs {reference[differ[0]]!r}); "
                                   f"an ensemble's runs must share their data")
        self.members = list(members)
        self.label_names = first.label_names
        self.config = first.config  # where the test data came from, for `attnclf evaluate`
        self.multi_label = first.multi_label
        if thresholds is not None and not self.multi_label:
            raise AttnclfError("thresholds cut a multi-label ensemble's probabilities; these runs are single-label")
        self.thresholds = (_given_thresholds(thresholds, self.label_names) if thresholds is not None else
                           ensemble_thresholds(self.members) if self.multi_label else None)
        self.thresholds_from = (None if not self.multi_label else "its members' averaged" if thresholds is None else
                                "those it was given")

    def __repr__(self) -> str:
        return model_repr("Ensemble", members=len(self.members), labels=self.label_names,
                          multi_label=self.multi_label or None)

    @classmethod
    def load(cls, run_dirs: Sequence[str | Path], device: str = "auto", bf16: bool = False) -> "Ensemble":
        """Load every run directory (see ``Classifier.load``), or the members of one ``train --seeds`` folder.

        >>> # Ensemble.load(["runs/a", "runs/b", "runs/c"])  # Ensemble(members=3, labels=['neg', 'pos'])
        >>> # Ensemble.load(["runs/imdb-3"]).predict(["not bad at all"])[0].label  # its seed-S members
        """
        from .classifier import Classifier

        run_dirs = run_dir_list(run_dirs)
        loaded = next((run_dir for run_dir in run_dirs if not isinstance(run_dir, (str, os.PathLike))), None)
        if loaded is not None:  # (Path() of it was a TypeError naming no remedy)
            raise AttnclfError(f"Ensemble.load takes run folders, not {type(loaded).__name__}: runs loaded already, "
                               f"or fitted estimators, make one as Ensemble([first, second, ...])")
        ensemble_folder = run_dirs[0] if len(run_dirs) == 1 and is_ensemble_dir(run_dirs[0]) else None
        run_dirs = member_dirs(ensemble_folder) if ensemble_folder else run_dirs
        folder = next((run_dir for run_dir in run_dirs if is_ensemble_dir(run_dir)), None)
        if folder is not None:  # (its members are runs of their own: name them instead)
            raise AttnclfError(f"{folder} is a `train --seeds` ensemble folder, which is scored alone; to combine "
                               f"runs with its members, give {Path(folder) / 'seed-S'} for each")
        seen: set[Path] = set()
        for run_dir in run_dirs:  # the same run twice would count its vote twice
            if Path(run_dir).resolve() in seen:
                raise AttnclfError(f"{run_dir} is given twice; an ensemble's runs are different runs")
            seen.add(Path(run_dir).resolve())
        members = [Classifier.load(run_dir, device=device, bf16=bf16) for run_dir in run_dirs]
        thresholds = None
        if ensemble_folder and members[0].multi_label and tuned_thresholds(ensemble_folder):
            path = Path(ensemble_folder) / ENSEMBLE_FILE
            saved = read_json(path)  # (a dict: tuned_thresholds found its thresholds_from)
            _refuse_calibrated_since(path, saved, members, run_dirs)
            thresholds = _checked_thresholds(saved, members[0].label_names, path)
        ensemble = cls(members, [str(d) for d in run_dirs], thresholds)
        if thresholds is not None:
            ensemble.thresholds_from = TUNED_THRESHOLDS[saved["thresholds_from"]]
        return ensemble

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """(texts, classes): the members' probabilities, averaged, columns in ``label_names`` order.

        >>> # Ensemble.load(["runs/a", "runs/b"]).predict_proba(["great film"])  # array([[0.1, 0.9]], dtype=float32)
        """
        # (a list, read once per member: a generator would be used up by the first, and the others read no text)
        return self._averaged(check_texts(texts))[0]

    def _averaged(self, texts: Sequence[str]) -> tuple[np.ndarray, list[list[list[int]]]]:
        """The members' probabilities averaged (what ``predict_proba`` and ``predict`` both give), and each member's
        token ids per text."""
        runs = [member.scores(texts) for member in self.members]
        return np.mean([scores for scores, _, _ in runs], axis=0), [ids for _, ids, _ in runs]

    def explain(self, texts: Sequence[str], method: str | None = None, **options):
        """Refused in one line: members tokenise and attend each their own way, so explain one of them.

        >>> # ensemble.members[0].explain(["not bad at all"])  # one member's explanation instead
        """
        raise AttnclfError(not_explained(self._first_member))

    def predict(self, texts: Sequence[str], tokens: bool = True,
                threshold: tuple[str, float] | str | None = None) -> list[Prediction] | list[LabelSetPrediction]:
        """Each text's label, confidence and probabilities under the averaged probabilities, and its unknown tokens
        as the member that knows the smallest share of them reads it (``unknown_tokens`` of ``tokens_read``);
        ``threshold``: one class's operating point applied to the averaged probabilities (``Classifier.predict``).
        A multi-label ensemble's: a ``LabelSetPrediction`` per text, the labels whose averaged probability reaches
        the ensemble's ``thresholds`` (``threshold``'s label at its probability instead).

        No tokens or attention, whatever ``tokens`` (which the service passes every backend alike): every member
        tokenises and attends its own way, and an average of attention weights would describe no model.

        >>> # [p.label for p in Ensemble.load(["runs/a", "runs/b"]).predict(["great film", "dull film"])]
        """
        threshold = class_threshold(threshold, self.label_names, self.multi_label)
        texts = check_texts(texts)  # (a list, read twice: by the members and by the counts of their tokens)
        probabilities, member_ids = self._averaged(texts)
        # (an empty text's counts are (0, 0): a share of none)
        counts = [max((token_counts(ids[i], text, member.tokenizer) for member, ids in zip(self.members, member_ids)),
                      key=lambda count: count[0] / max(count[1], 1))
                  for i, text in enumerate(texts)]
        if self.multi_label:
            return [LabelSetPrediction.from_scores(row, self.thresholds, self.label_names, [], None, count, threshold)
                    for row, count in zip(probabilities, counts)]
        return [Prediction.from_scores(row, self.label_names, [], None, count, threshold)
                for row, count in zip(probabilities, counts)]


def _member(member, i: int):
    """``member`` as an ensemble reads it: a ``Classifier`` (or ``OnnxClassifier``) as it is, a fitted
    ``AttentionTextClassifier`` as its ``classifier_``; anything else, a run folder's path among them, one line
    naming it, where it was an AttributeError on ``config``.

    >>> _member("runs/a", 0)
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: members[0] is a path, not a loaded run: Ensemble.load(['runs/a', ...]) loads folders
    """
    if (classifier := estimator_classifier(member)) is not None:
        return classifier
    if isinstance(member, (str, os.PathLike)):
        raise AttnclfError(f"members[{i}] is a path, not a loaded run: Ensemble.load([{str(member)!r}, ...]) loads "
                           f"folders")
    if not all(hasattr(member, attribute) for attribute in ("label_names", "multi_label", "config", "scores")):
        raise AttnclfError(f"members[{i}] must be a Classifier or a fitted AttentionTextClassifier, not "
                           f"{type(member).__name__}")
    return member


def _given_thresholds(thresholds, label_names: list[str]) -> np.ndarray:
    """The ``thresholds`` a multi-label ``Ensemble`` is given, one per label in ``label_names``' order, as float64;
    anything but a list of that many numbers from 0 to 1 is a one-line error naming the first that is wrong.

    >>> _given_thresholds([0.2, 1], ["a", "b"]).tolist()
    [0.2, 1.0]
    >>> _given_thresholds([0.2, 1.5], ["a", "b"])
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: thresholds: 'b' at 1.5: each must be a number from 0 to 1
    """
    # (a dict, thresholds.json's shape, or one number would fail below with a KeyError or TypeError)
    listed = isinstance(thresholds, (list, tuple)) or isinstance(thresholds, np.ndarray) and thresholds.ndim == 1
    if not listed:
        raise AttnclfError(f"thresholds: a list of {len(label_names)} numbers from 0 to 1, one per label in "
                           f"label_names' order, got {shown(thresholds)}")
    if len(thresholds) != len(label_names):
        raise AttnclfError(f"thresholds: {len(thresholds)} given, one per label needed ({len(label_names)})")
    # (NaN or one past 1 would never predict its label, one below 0 always would)
    wrong = next((i for i, cut in enumerate(thresholds)
                  if isinstance(cut, bool) or not isinstance(cut, (int, float, np.number)) or not 0 <= cut <= 1), None)
    if wrong is not None:
        raise AttnclfError(f"thresholds: {shown(label_names[wrong])} at {shown(thresholds[wrong])}: each must be a "
                           f"number from 0 to 1")
    return np.asarray(thresholds, dtype=np.float64)


def ensemble_thresholds(members: Sequence[Classifier]) -> np.ndarray:
    """A multi-label ensemble's thresholds when no texts are left to tune them on: the mean of its members' own,
    label by label. Averaging the members' probabilities moves each label's averaged probability toward the middle
    of theirs, so the mean of the cuts that suited each member is the nearest guess that asks no more data (0.5 would
    throw away what the members' tuning learned: a rare label's cut often sits far below it).

    >>> class Member: thresholds = np.array([0.2, 0.6])
    >>> ensemble_thresholds([Member(), Member()]).tolist()
    [0.2, 0.6]
    """
    return np.mean([member.thresholds for member in members], axis=0)


# What each source of tuned thresholds ensemble.json records ("thresholds_from") is, as Ensemble.thresholds_from says
TUNED_THRESHOLDS = {"validation": "ensemble.json's, tuned on the validation texts its members shared",
                    "ensemble refitted": "ensemble.json's, tuned by the ensemble its members refit"}


def tuned_thresholds(folder: str | Path) -> bool:
    """Whether the `train --seeds` folder's ensemble.json holds thresholds its multi-label ensemble tuned (on the
    members' shared validation texts, or those of the ensemble its members refit), which ``Ensemble.load`` applies;
    a mean of the members' thresholds is recorded only, and taken from the members as they are when it loads.

    >>> tuned_thresholds("no/such/folder")
    False
    """
    path = Path(folder) / ENSEMBLE_FILE
    saved = read_json(path) if path.is_file() else None
    return isinstance(saved, dict) and saved.get("thresholds_from") in TUNED_THRESHOLDS


def saved_thresholds(folder: str | Path, label_names: list[str]) -> np.ndarray:
    """The thresholds a `train --seeds` folder's ensemble.json holds for its multi-label ensemble, in ``label_names``'
    order; one line naming the file and the label unless each is a number from 0 to 1.

    >>> saved_thresholds("no/such/folder", ["sports"])
    Traceback (most recent call last):
    ...
    attnclf.errors.RunDirError: no/such/folder/ensemble.json: missing
    """
    path = Path(folder) / ENSEMBLE_FILE
    return _checked_thresholds(read_json(path), label_names, path)


def _checked_thresholds(saved, label_names: list[str], path: Path) -> np.ndarray:
    """``saved_thresholds`` of an ensemble.json already read (``saved``, from ``path``)."""
    return np.array(list(checked_thresholds(saved.get("thresholds") if isinstance(saved, dict) else None,
                                            label_names, path).values()))


def _refuse_calibrated_since(path: Path, saved: dict, members: Sequence[Classifier],
                             names: Sequence[str | Path]) -> None:
    """One line where a member's temperature is not the one its ensemble's thresholds were tuned at (ensemble.json's,
    ``saved`` from ``path``: ``member_temperatures``, 1 each where it records none): they would cut probabilities
    other than those."""
    recorded = _recorded_temperatures(saved, path, len(members))
    changed = next((i for i, (member, then) in enumerate(zip(members, recorded, strict=True))
                    if member.temperature != then), None)
    if changed is not None:
        spoken = [f"{t:g}" for t in recorded]
        raise RunDirError(f"{path}: its thresholds were tuned on its members' probabilities at temperatures "
                          f"{', '.join(spoken[:-1])} and {spoken[-1]}, and {names[changed]} now has "
                          f"{members[changed].temperature:g} (`attnclf calibrate` since): they would cut other "
                          f"probabilities; tune them again with its `train --seeds` command and --resume, or name the "
                          f"members one by one (their thresholds' mean)")


def _recorded_temperatures(saved: dict, path: Path, count: int) -> list[float]:
    """The members' temperatures an ensemble.json (``saved``, read from ``path``) records its thresholds were tuned at,
    1 each where it records none (written before they were); one line naming the file unless one a member.

    >>> _recorded_temperatures({"member_temperatures": [1, 0.5]}, Path("e/ensemble.json"), 2)
    [1, 0.5]
    >>> _recorded_temperatures({"member_temperatures": 0.5}, Path("e/ensemble.json"), 2)
    Traceback (most recent call last):
    ...
    attnclf.errors.RunDirError: e/ensemble.json: member_temperatures must be a list of 2 positive numbers, one a \
member, got 0.5
    """
    recorded = saved.get("member_temperatures")
    if recorded is None:
        return [1.0] * count
    if not (isinstance(recorded, list) and len(recorded) == count and all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0 for t in recorded)):
        raise RunDirError(f"{path}: member_temperatures must be a list of {count} positive numbers, one a member, got "
                          f"{shown(recorded)}")
    return recorded


def load_run(path: str | Path, device: str = "auto", bf16: bool = False) -> "Classifier | Ensemble":
    """A run directory as a ``Classifier``, or a ``train --seeds`` folder as an ``Ensemble``.

    >>> # load_run("runs/imdb-3").predict(["a fine film"])[0].label  # an Ensemble of its seed-S members
    """
    from .classifier import Classifier

    if is_ensemble_dir(path):
        return Ensemble.load([path], device=device, bf16=bf16)
    return Classifier.load(path, device=device, bf16=bf16)


def load_backend(path: str | Path, backend: str = "torch", *, int8: bool = False, device: str = "auto",
                 bf16: bool = False, threads: int | None = None,
                 named: Callable[[str], str] = by_field) -> "Classifier | Ensemble | OnnxClassifier":
    """What `attnclf predict` and `attnclf serve` run: ``load_run(path)`` on PyTorch, or with ``backend="onnx"`` the
    run's ONNX export on onnxruntime (``OnnxClassifier``; ``path`` may be the export itself, ``int8`` picks its
    quantised graph), after ``check_backend`` refused the options the backend has no use for (named by ``named``).

    ``threads`` caps onnxruntime's threads; PyTorch's are the process's, which the caller sets (``torch_threads``).

    >>> # load_backend("runs/demo", "onnx", int8=True).predict_proba(["a fine film"])
    """
    check_backend(backend, int8=int8, device=device, bf16=bf16, named=named)
    if backend == "torch":
        return load_run(path, device=device, bf16=bf16)
    from .export.runtime import OnnxClassifier

    return OnnxClassifier.load(path, int8=int8, threads=threads)  # (it refuses an ensemble folder: no export)


def is_ensemble_dir(path: str | Path) -> bool:
    """Whether ``path`` is a folder ``attnclf train --seeds`` wrote (it holds an ensemble.json).

    >>> is_ensemble_dir("no/such/folder")
    False
    """
    return (Path(path) / ENSEMBLE_FILE).is_file()


def member_dirs(path: str | Path) -> list[Path]:
    """The member run directories of a ``train --seeds`` folder: folders inside it, as ensemble.json names them.

    >>> member_dirs("no/such/folder")
    Traceback (most recent call last):
    ...
    attnclf.errors.RunDirError: no/such/folder/ensemble.json: missing
    """
    members = read_json(Path(path) / ENSEMBLE_FILE)
    if not isinstance(members, dict) or not isinstance(members.get("members"), list) or not members["members"] \
            or not all(isinstance(name, str) for name in members["members"]):
        raise AttnclfError(f"{Path(path) / ENSEMBLE_FILE}: expected {{\"members\": [\"seed-0\", ...]}}, the folders of "
                           f"the ensemble's runs")
    # A folder's name, no path: one the file sent with it names would otherwise load (and `refit` write beside) any run.
    outside = next((name for name in members["members"] if name in ("", ".", "..") or Path(name).name != name
                    or "\\" in name), None)
    if outside is not None:
        raise RunDirError(f"{Path(path) / ENSEMBLE_FILE}: member {shown(outside, most=NAME_LENGTH)} is not a folder's "
                          f"name: the members are folders inside {path}")
    return [Path(path) / name for name in members["members"]]


def train_ensemble(settings, seeds: Sequence[int], resume: bool = False, progress: bool = True,
                   named: Callable[[str], str] = by_field, earlier: Callable[[], Sequence] = tuple) -> dict:
    """Train ``settings`` once per seed into ``OUTPUT/seed-S``, then test the members' averaged probabilities.

    Writes ``OUTPUT/ensemble.json`` (member folders, test metrics) and returns the metrics. When the members
    held out the same validation texts (``--split-seed``, ``--hold-out latest``, or a dataset's own validation
    split), it also holds the ensemble's validation metrics, to compare ensembles without reading test. With
    ``resume`` a member that has its test metrics is kept and an unfinished one continues from its
    checkpoint, so an interrupted ensemble loses at most a checkpoint interval of work (``seeds`` that leave out a
    member the folder holds are refused: ``_refuse_members_left_out``); without it every member is trained afresh,
    and once they are tested the folder's other ``seed-*`` members go. A member's refused settings are named as
    ``named`` spells them (``resume_settings``; the command line: by its flag).
    ``earlier``: what gives the settings the command built under earlier editions of the file recipe
    (``cli.built_under_earlier_file_recipes``; called only if a member differs from ``settings``); members that trained
    with one's are added and continued with its model and tokenizer settings.
    Under ``torchrun`` every rank trains every member and only rank 0 tests (the others get ``{}``).

    >>> # from attnclf.training.settings import RunSettings, DataSettings
    >>> # train_ensemble(RunSettings(DataSettings(dataset="imdb"), output="runs/imdb-3"), [0, 1, 2])["accuracy"]
    """
    import sys
    from dataclasses import replace

    from .training.distributed import from_environment
    from .training.run import each_warning_once, train_or_continue

    if len(seeds) == 1:  # one value, as `compare --seeds 3` takes a count: which was meant, one model or three?
        seed = check_seed(seeds[0], "--seeds")  # (a seed --seed takes, before it is offered as one)
        count = f"; for {seed} runs, --seeds {' '.join(map(str, range(seed)))}" if 2 <= seed <= 10 else ""
        raise AttnclfError(f"--seeds lists an ensemble's seeds, at least two, and got only {seed}: for one model give "
                           f"--seed {seed}{count}")
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise AttnclfError(f"--seeds needs at least two seeds, each once; got {' '.join(map(str, seeds))} (it takes "
                           f"the seeds themselves: --seeds 0 1 2 trains three runs)")
    settings.data.require_source()  # (before the advice below, which assumes one)
    if not settings.data.dataset and not settings.data.test_file:
        # Each member holds out its own validation split, so only a test split can score their average.
        raise AttnclfError("--seeds needs held-out data to test the ensemble on: give --test-file")
    data_dir = settings.data.data_dir  # (this command's: a member continued reads its own settings again)
    if resume:
        _refuse_members_left_out(Path(settings.output), seeds)
        adds = any(not (Path(settings.output) / f"seed-{seed}").is_dir() for seed in seeds)
        settings = _as_members_trained(settings, Path(settings.output), adds=adds, earlier=earlier)
    created = first_missing_folder(settings.output)
    output = prepare_output_dir(settings.output)
    with ExitStack() as held:
        if from_environment().is_main:  # (torchrun's other ranks read what rank 0 writes)
            held.enter_context(folder_lock(output))
            remove_cut_short_writes(output)
        members = [output / f"seed-{seed}" for seed in seeds]
        replacing = not resume and from_environment().is_main
        replaced = _set_aside(output, progress) if replacing else None
        with each_warning_once():  # (the members train on the same data)
            for seed, member in zip(seeds, members):
                if progress and from_environment().is_main:
                    print(f"seed {seed}: {member}", file=sys.stderr)
                try:
                    train_or_continue(replace(settings, output=str(member), train=replace(settings.train, seed=seed)),
                                      resume, progress, named=named, data_dir=data_dir)
                except BaseException as stopped:
                    if replacing and not any((new / "config.json").is_file() for new in members):
                        _put_back(output, replaced)  # nothing of the new ensemble was written: its data failed, say
                    if isinstance(stopped, AttnclfError):
                        held.close()  # (its lock file would keep the folder from counting as empty)
                        remove_empty_folders(output, created)  # a member that failed on its data left its folder empty
                    raise
        if not from_environment().is_main:
            return {}
        metrics = write_ensemble_file(output, members, seeds, device=settings.device, threads=settings.threads)
        for other in sorted(set(member_folders(output)) - set(members)):
            if not resume or not (other / "config.json").is_file():  # (the replaced ensemble's, set aside)
                shutil.rmtree(other)
        return metrics


def _refuse_members_left_out(output: Path, seeds: Sequence[int]) -> None:
    """Refuse a resumed ensemble whose ``seeds`` leave out a member ``output`` holds (one that began training): its
    ensemble.json would be written without it, dropping work without a word. Moving the member out of the folder
    is how to drop it and keep it.

    >>> _refuse_members_left_out(Path("no/such/folder"), [0, 1])  # (no members: none left out)
    """
    given = {output / f"seed-{seed}" for seed in seeds}
    left_out = [member.name[len("seed-"):] for member in member_folders(output, trained=True) if member not in given]
    if left_out:
        runs = f"seed {left_out[0]}'s run" if len(left_out) == 1 else f"the runs of seeds {' '.join(left_out)}"
        where = output / f"seed-{left_out[0]}" if len(left_out) == 1 else "them"
        raise AttnclfError(f"{output} holds {runs} too, which --seeds {' '.join(map(str, seeds))} leaves out: "
                           f"--resume continues every member of the ensemble; give --seeds "
                           f"{' '.join([*map(str, seeds), *left_out])}, or move {where} out of the folder first")


def ensemble_summary(output: str | Path, metrics: dict, runs: int) -> str:
    """What ``train_ensemble`` trained into ``output`` scored (its ``metrics``, of ``runs`` members averaged), then,
    from its ensemble file, its scores on the validation texts every member held out and where its label sets'
    thresholds come from, where it records them.

    >>> # print(ensemble_summary("runs/self-attn-imdb", train_ensemble(settings, seeds=[0, 1, 2]), runs=3))
    """
    from .evaluation.metrics import scores_text

    lines = [f"ensemble of {runs} runs ({Path(output) / ENSEMBLE_FILE}), averaged:", scores_text(metrics)]
    saved = read_json(Path(output) / ENSEMBLE_FILE)
    if validation := saved.get("validation_metrics"):
        lines.append(f"validation (held out by every member): accuracy {validation['accuracy']:.4f}  "
                     f"macro-F1 {validation['macro_f1']:.4f}")
    if saved.get("thresholds_from") == "validation":
        lines.append("label sets at thresholds tuned on the validation texts every member held out")
    elif saved.get("thresholds_from") == "members":
        lines.append("label sets at the members' thresholds, averaged: each held out validation texts of its own "
                     "(one --split-seed would share them)")
    return "\n".join(lines)


def members_progress(output: str | Path, seeds: Sequence[int]) -> str:
    """How far each of the members ``train_ensemble`` trains into ``output`` got, in one line: what a `--resume`
    keeps and what it continues from (``run_progress``).

    >>> members_progress("no/such/folder", [0, 1])
    'seed 0 not started; seed 1 not started'
    """
    from .training.settings import run_progress

    return "; ".join(f"seed {seed} {run_progress(Path(output) / f'seed-{seed}')}" for seed in seeds)


def _set_aside(output: Path, progress: bool) -> bytes | None:
    """Before a new ensemble's first member trains, the folder's earlier one stops being an ensemble: its
    ensemble.json goes (loading would mix old and new members) and every member's model moves into its
    earlier-model/, so none counts as finished (a --resume after an interruption trains them all, keeping the new
    ones) and none is lost. Returns the ensemble.json it removed, for ``_put_back``."""
    from .training.run import set_aside_earlier_model

    path = output / ENSEMBLE_FILE
    saved = path.read_bytes() if path.is_file() else None
    path.unlink(missing_ok=True)
    for member in member_folders(output):
        set_aside_earlier_model(member, progress)
    return saved


def _put_back(output: Path, saved: bytes | None) -> None:
    """Undo ``_set_aside`` when the new ensemble stopped before any of its members was written."""
    from .training.run import restore_earlier_model

    for member in member_folders(output):
        restore_earlier_model(member)
    if saved is not None:
        atomic_write_bytes(output / ENSEMBLE_FILE, saved)


# What may differ between members, or between a resumed ensemble's command and its members, besides how and where
# they train. (New members start from the word vectors or pretrained encoder the others started from; a resumed
# command that names others is refused before this, by the CLI.)
_PER_MEMBER = {"train.seed", "train.epochs", "train.schedule_epochs", "embeddings", "embeddings_std", "init_from"}


def _as_members_trained(settings, output: Path, adds: bool, earlier: Callable[[], Sequence]):
    """``settings`` for the members a resumed ensemble adds or continues: refused if they differ from the finished
    members' (those it adds would train otherwise), with the members' word vectors; with the model and tokenizer
    settings of one of ``earlier()`` (what the command built under an earlier edition of the file recipe, built only
    if a member differs) where the members trained with those: the command that began them built these.

    >>> # settings = _as_members_trained(build_settings(args), Path("runs/imdb-3"), adds=False, earlier=tuple)
    """
    from dataclasses import replace

    from .rundir import read_config
    from .training.run import check_starts_unchanged
    from .training.settings import nearest_difference, resume_settings

    checked = set()  # (what members started from, checked once: hashing a large vectors file takes a while)
    builds = None  # (earlier(), once a member differs)
    for member in member_folders(output, trained=True):
        trained = resume_settings(member)
        config = read_config(member)
        start = (trained.embeddings, config.get("embeddings_sha256"), trained.init_from,
                 config.get("pretrained_sha256"))
        if adds and start not in checked:  # a new member starts where the others started (others resume checkpoints)
            check_starts_unchanged(config, str(member))
            checked.add(start)
        differing = trained.first_difference(settings, ignore=_PER_MEMBER)
        # Members trained on a file under an earlier file recipe: their command builds today's now, and an ensemble
        # resumes only with its command, so the members train as they did. (Of an earlier build, the parts a recipe
        # sets: the rest is this command's, as settings holds it.)
        if differing is not None:
            builds = earlier() if builds is None else builds
            begun = [replace(settings, model_config=build.model_config, tokenizer=build.tokenizer,
                             ngram_buckets_sized=build.ngram_buckets_sized) for build in builds]
            same = next((build for build in begun if trained.first_difference(build, ignore=_PER_MEMBER) is None), None)
            if same is not None:
                settings, differing = same, None
        if differing is not None:
            key, theirs, ours = nearest_difference(trained, [settings, *begun], _PER_MEMBER)
            raise AttnclfError(f"{member} trained with {key} = {theirs!r}, this command gives {ours!r}: "
                               f"--resume adds and continues members as the others trained; give their flags, or "
                               f"train a new --output")
        # Where the data lies may differ (a copy elsewhere: the members check their texts' fingerprints), and a
        # new member looks where the others found it too.
        data = replace(settings.data, data_dir=settings.data.data_dir or trained.data.data_dir,
                       found_in=trained.data.found_in)
        # Their scale only with their vectors: runs recorded one without any (0.5, the default before 2026-11-22),
        # which a new run's check refuses as scaling nothing.
        scale = trained.embeddings_std if trained.embeddings else settings.embeddings_std
        # (Members recorded before a cleaning setting read texts without it: those added do so too, never a mix.)
        settings = replace(trained.as_begun(settings), data=data, embeddings=trained.embeddings, embeddings_std=scale,
                           init_from=trained.init_from)
    return settings


def write_ensemble_file(output: Path, members: Sequence[Path], seeds: Sequence[int], device: str = "auto",
                        threads: int | None = None, refitted: str | Path | None = None) -> dict:
    """Test the members' averaged probabilities and write ``output/ensemble.json``; returns the test metrics.

    The validation metrics are saved too when every member recorded the same validation texts. Multi-label members
    instead tune the ensemble's thresholds on those texts from the averaged probabilities (``"thresholds_from":
    "validation"``), which would flatter validation metrics, so none are saved; members that held out texts of their
    own leave none to tune on, and their thresholds' mean is the ensemble's (``"members"``, ``ensemble_thresholds``).
    Either way ensemble.json holds them (``"thresholds"``), and the test metrics are the label sets they cut.
    ``refitted``: the folder whose members ``members`` refit; where its ensemble tuned thresholds on uncalibrated
    members (``_tuned_uncalibrated``), the refits' ensemble predicts at those (``"ensemble refitted"``), as a refitted
    run predicts at those its run tuned.
    ``output`` is held meanwhile (``folder_lock``; already, within `train --seeds`): another process writing there is
    refused in one line.

    >>> # write_ensemble_file(Path("runs/imdb-3"), [Path("runs/imdb-3/seed-0"), Path("runs/imdb-3/seed-1")], [0, 1])
    """
    with folder_lock(output):
        return _write_ensemble_file(output, members, seeds, device, threads, refitted)


def _write_ensemble_file(output: Path, members: Sequence[Path], seeds: Sequence[int], device: str,
                         threads: int | None, refitted: str | Path | None) -> dict:
    """``write_ensemble_file``'s work, in a folder it holds."""
    from .data.multilabel import multi_hot
    from .evaluation.metrics import compute_metrics, evaluate
    from .evaluation.multilabel import tune_thresholds
    from .training.device import torch_threads
    from .training.run_data import held_out_fingerprint, run_test_data, run_validation_data

    ensemble = Ensemble.load(members, device=device)
    saved: dict = {"members": [str(Path(member).relative_to(output)) for member in members], "seeds": list(seeds)}
    with torch_threads(threads):
        # Members that recorded one set of validation texts (older runs, and refits, record none).
        held_out = {held_out_fingerprint(member.config) for member in ensemble.members}
        validation = run_validation_data([member.config for member in ensemble.members], ensemble.label_names) \
            if len(held_out) == 1 and None not in held_out else None
        probabilities = None if validation is None else ensemble.predict_proba(validation.texts)
        if ensemble.multi_label:
            source = "members"
            if validation is not None:  # (as a run tunes its own: on texts none of the members trained on)
                ensemble.thresholds = tune_thresholds(multi_hot(validation.labels, len(ensemble.label_names)),
                                                      probabilities)[0]
                source = "validation"
            elif refitted and _tuned_uncalibrated(refitted, len(members)):
                ensemble.thresholds, source = saved_thresholds(refitted, ensemble.label_names), "ensemble refitted"
            saved |= {"thresholds": dict(zip(ensemble.label_names, ensemble.thresholds.tolist())),
                      "thresholds_from": source,
                      # (what a member's later calibration would change under tuned thresholds: Ensemble.load checks)
                      "member_temperatures": [member.temperature for member in ensemble.members]}
        elif validation is not None:
            saved["validation_metrics"] = compute_metrics(validation.labels, probabilities, ensemble.label_names,
                                                          report=False)
        test = run_test_data(ensemble.config, ensemble.label_names, test_only=True)
        saved["metrics"] = evaluate(ensemble, test)
    atomic_write_json(output / ENSEMBLE_FILE, saved)
    return saved["metrics"]


def _tuned_uncalibrated(folder: str | Path, count: int) -> bool:
    """Whether ``folder``'s ensemble tuned its thresholds on validation texts, its members uncalibrated then: what its
    refits, never calibrated, can predict at. Thresholds tuned on calibrated members' probabilities would cut the
    refits' other ones; the refits' own thresholds (their runs') are averaged instead."""
    path = Path(folder) / ENSEMBLE_FILE
    saved = read_json(path)
    return (saved.get("thresholds_from") == "validation"
            and all(temperature == 1 for temperature in _recorded_temperatures(saved, path, count)))


_DATA_FILES = ("train_file", "validation_file", "test_file")


def _same_file_bytes(key: str, path: str | None, other: str | None) -> bool:
    """Whether data setting ``key`` names two files of the same bytes (seeds trained from a copy, or after the data
    moved); a file that is gone cannot be compared, so its name decides.

    >>> _same_file_bytes("train_file", __file__, __file__), _same_file_bytes("dataset", "imdb", "sst2")
    (True, False)
    """
    if key not in _DATA_FILES or not (isinstance(path, str) and isinstance(other, str)):
        return False
    if not (Path(path).is_file() and Path(other).is_file()):
        return False
    stats = Path(path).stat(), Path(other).stat()
    return stats[0].st_size == stats[1].st_size and \
        _sha256_of(path, *_identity(stats[0])) == _sha256_of(other, *_identity(stats[1]))


def _identity(stat) -> tuple[int, int]:
    return stat.st_size, stat.st_mtime_ns


@lru_cache(maxsize=8)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    """``file_sha256`` of ``path`` as it is now (its size and modification time in the key, so a file rewritten since
    is read again): each member is compared with the first, whose data file is then read once, not once per member."""
    return file_sha256(path)


def _data(member: Classifier) -> dict:
    """What a member was trained on, with defaults filled in (older runs lack newer fields).

    Where the data was read from, and through which cache, may differ between runs of the same data; so may
    the seed of the validation split, as the run seed may.
    """
    from dataclasses import asdict

    from .training.settings import DataSettings

    data = asdict(DataSettings(**member.config.get("settings", {}).get("data", {})).anchored())
    for where in ("data_dir", "found_in", "token_cache", "token_cache_dir", "split_seed"):
        data.pop(where)
    if data["refit"]:  # trained on every training text, whichever ones its run had held out
        for held_out in ("val_fraction", "hold_out"):
            data.pop(held_out)
    return data
