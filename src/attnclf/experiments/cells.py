"""Experiment cells: one variant (a model and its config overrides) trained with one seed.

An experiment is a list of variants trained under one shared ``Setup``, once
per seed. Every cell is an ordinary run directory under ``<output>/runs/``, so
a rerun skips finished cells (``metrics.json`` exists), resumes interrupted
ones (``checkpoint/`` exists), and refuses a directory trained with other
settings, or on a split or test texts that have changed since, rather than mixing
two budgets or two datasets in one table.

>>> setup = Setup(DataSettings(dataset="synthetic"), train={"epochs": 1}, seeds=(0,))
>>> # records = run_variants(setup, [Variant("boe", "boe")], "experiments/demo")
>>> # records[0]["accuracy"], records[0]["texts_per_second"]
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import time
from dataclasses import InitVar, asdict, dataclass, field, fields
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..checks import by_field, check_seed, set_value
from ..errors import AttnclfError, RunDirError, shown, unknown_name
from ..models import MODELS, build_model
from ..recipes import earlier_file_recipes
from ..rundir import (atomic_write_json, check_fields, is_resumable, output_folder, read_history, read_json,
                      read_metrics)
from ..text.cleaning import CleaningConfig
from ..training.device import torch_threads
from ..training.run import each_warning_once, train_run
from ..training.run_data import held_out_fingerprint, load_data, texts_fingerprint
from ..training.settings import DataSettings, RunSettings, resume_settings, settings_for
from .tables import scores_on_training

Log = Callable[[str], None]
# What a cell's experiment.json holds: what the cell cost beyond metrics.json's figures, measured once.
COST_FIELDS = {"cpu_seconds": "a number or null", "texts_per_second": "a number"}


@dataclass
class Setup:
    """What every cell of an experiment shares: data, budget, seeds, and where it runs.

    ``train``, ``tokenizer`` and ``model_config`` override the dataset's recipe
    (see ``settings_for``); ``model_config`` goes to every model that has the
    field, so ``{"d_model": 64}`` shrinks the Transformers and leaves ``boe`` be.
    ``seeds`` are each run once per variant: one named twice would count its cells twice in the spread.

    >>> Setup(DataSettings(dataset="synthetic"), seeds=[2, 0]).seeds
    (2, 0)
    >>> Setup(DataSettings(dataset="synthetic"), seeds=(0, 0))
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: seeds names seed 0 twice; give each seed once
    """

    data: DataSettings
    train: dict = field(default_factory=dict)
    tokenizer: dict = field(default_factory=dict)
    cleaning: CleaningConfig | None = None
    model_config: dict = field(default_factory=dict)
    seeds: tuple[int, ...] = (0, 1, 2)
    device: str = "auto"
    threads: int | None = None  # torch threads; on a busy shared CPU 1 is fastest for small models
    throughput_texts: int = 1000  # test texts timed for inference speed
    # Not a field: how the checks name a setting (the command line: by its flag, --seeds).
    named: InitVar[Callable[[str], str] | None] = None

    def __post_init__(self, named: Callable[[str], str] | None):
        named = named or by_field
        self.seeds = tuple(check_seed(seed, named("seeds")) for seed in self.seeds)
        if not self.seeds:
            raise AttnclfError(f"{named('seeds')} names no seed")
        repeated = next((seed for i, seed in enumerate(self.seeds) if seed in self.seeds[:i]), None)
        if repeated is not None:
            raise AttnclfError(f"{named('seeds')} names seed {repeated} twice; give each seed once")
        self.data.check()
        if self.data.train_file and not self.data.test_file:  # (every named dataset has a test split)
            raise AttnclfError(f"{self.data.describe()} has no test texts: compare and ablate score every cell on "
                               f"the same held-out texts, and each seed's validation texts chose its epochs; give "
                               f"--test-file")
        if self.data.multi_label:  # its cells would score label sets with single-label metrics
            raise AttnclfError(f"compare and ablate support single-label data only for now, and "
                               f"{self.data.describe()} is multi-label; train multi-label runs one at a time "
                               f"with `attnclf train`")


@dataclass
class Variant:
    """One row of a results table: ``label`` names it, ``model`` and ``overrides`` define it."""

    label: str
    model: str
    overrides: dict = field(default_factory=dict)


def variant_settings(setup: Setup, variant: Variant, seed: int, runs_dir: Path, file_recipe: int = -1) -> RunSettings:
    """The run settings of one cell; the run directory is named by what differs from the base config. On a file,
    a self-attn cell starts from the file recipe's edition ``file_recipe`` (``settings_for``; the latest by default).

    Variants that resolve to the same model config share a directory (and a
    training run): in an ablation, ``heads=4`` and ``layers=2`` are both the
    base model when those are its defaults.
    """
    if variant.model not in MODELS:
        raise AttnclfError(unknown_name("model", variant.model, MODELS))
    config_fields = {f.name: f.default for f in fields(MODELS[variant.model].config_class)}
    shared = {k: v for k, v in setup.model_config.items() if k in config_fields}
    base = settings_for(setup.data, variant.model, model_config=shared, train={**setup.train, "seed": seed},
                        tokenizer=setup.tokenizer, cleaning=setup.cleaning, device=setup.device,
                        file_recipe=file_recipe)
    effective = config_fields | base.model_config
    changed = {k: v for k, v in variant.overrides.items() if effective.get(k, object()) != v}
    name = "-".join([variant.model, *(f"{k}={v}" for k, v in sorted(changed.items())), f"seed{seed}"])
    base.model_config = base.model_config | changed  # a value equal to the base's is no override
    base.output = str(runs_dir / re.sub(r"[^\w.=+-]", "_", name))
    base.report = False  # an HTML report per cell would cost more than a small cell's training
    base.embeddings = None  # the comparisons train every model from scratch, whatever a recipe starts from
    return base


def check_variants(setup: Setup, variants: list[Variant]) -> None:
    """Fail before any training if a variant names an unknown field or an impossible config."""
    models = {variant.model for variant in variants}
    for key in setup.model_config:
        if not any(key in {f.name for f in fields(MODELS[m].config_class)} for m in models if m in MODELS):
            raise AttnclfError(f"no model of this experiment has a config field {shown(key)}")
    for variant in variants:
        settings = variant_settings(setup, variant, setup.seeds[0], Path("."))
        settings_for(settings.data, settings.model, model_config=settings.model_config)  # field names
        build_model(settings.model, vocab_size=8, max_len=settings.tokenizer.max_len, **settings.model_config)


def run_variants(setup: Setup, variants: list[Variant], output: str | Path, log: Log = lambda line: None,
                 dataset_shown: str = "") -> list[dict]:
    """Train every variant with every seed into ``output/runs``; one record per cell, and a ``log`` line per cell
    (naming ``dataset_shown``, where an experiment runs several).

    A record holds the variant's label, model, seed and run directory, test
    accuracy and macro-F1, parameters, epochs run, training seconds (wall and
    this process's CPU; CPU is None for a cell finished by an earlier call),
    inference texts per second, the training loss per epoch, and whether the
    cell was finished by an earlier call (``reused``).
    """
    check_variants(setup, variants)
    runs_dir = Path(output) / "runs"
    cells = [(variant, seed) for variant in variants for seed in setup.seeds]
    records: list[dict] = []
    with torch_threads(setup.threads), each_warning_once():  # (the cells train on the same data)
        texts = throughput_texts(setup)
        scored = ("accuracy on the training texts (a toy set tests on them)" if scores_on_training(setup)
                  else "test accuracy")
        for number, (variant, seed) in enumerate(cells, 1):
            settings = variant_settings(setup, variant, seed, runs_dir)
            earlier = functools.partial(earlier_cells, setup, variants, seed, settings.output)
            record = {"label": variant.label, "model": variant.model, "seed": seed} | run_cell(settings, texts, earlier)
            records.append(record)
            where = f"{dataset_shown} " if dataset_shown else ""
            log(f"[{where}{number}/{len(cells)}] {variant.label} seed {seed}: {scored} {record['accuracy']:.4f}, "
                f"macro-F1 {record['macro_f1']:.4f}, {record['train_seconds']:.0f} s training"
                + (" (finished earlier, reused)" if record["reused"] else ""))
    return records


def earlier_cells(setup: Setup, variants: list[Variant], seed: int, output: str) -> list[RunSettings]:
    """The settings the cell in folder ``output`` may have been trained with under the earlier editions of the file
    recipe: those of every variant whose folder under an edition was ``output``. A folder is named by what a variant
    changes in the base, and an edition may change the base, so it may have held another variant then.

    >>> setup = Setup(DataSettings(train_file="t.csv", test_file="t.csv"), seeds=(0,))
    >>> sweep = [Variant("positional=learned", "self-attn", {"positional": "learned"})]
    >>> [cell.model_config for cell in earlier_cells(setup, sweep, 0, "out/runs/self-attn-seed0")]  # edition 0
    [{}]
    """
    runs_dir = Path(output).parent
    return [cell for edition in earlier_file_recipes() for variant in variants
            if (cell := variant_settings(setup, variant, seed, runs_dir, edition)).output == output]


def run_cell(settings: RunSettings, texts: list[str], earlier: Callable[[], Sequence[RunSettings]] = tuple) -> dict:
    """Train one cell unless its run directory already holds it, then measure its inference speed; ``earlier``: what
    gives the settings the cell's folder may have held under earlier editions of the file recipe (``earlier_cells``,
    built only where the folder's settings differ: ``check_same_settings``). The folder is held throughout
    (``output_folder``): a `train --resume` of the cell, or a second experiment given the same --output, is refused
    in one line naming its pid instead of writing the cell's files beside this one."""
    with output_folder(settings.output):
        return _run_cell(settings, texts, earlier)


def _run_cell(settings: RunSettings, texts: list[str], earlier: Callable[[], Sequence[RunSettings]]) -> dict:
    """``run_cell``'s work, in a cell it holds."""
    run_dir = Path(settings.output)
    cost_file = run_dir / "experiment.json"
    cpu = None  # unknown when an earlier call trained (part of) the cell
    reused = (run_dir / "metrics.json").exists()
    if reused:
        check_same_settings(run_dir, settings, earlier)
        check_same_split(run_dir, settings)
    else:
        resume = is_resumable(run_dir)
        if resume:
            check_same_settings(run_dir, settings, earlier)
        started = time.process_time()
        train_run(settings, resume=resume, progress=False)
        cpu = None if resume else round(time.process_time() - started, 2)
        cost_file.unlink(missing_ok=True)  # measured on weights this run replaced
    metrics = read_metrics(run_dir, scored=True, costs=True)  # (a reused cell's, checked before its speed is measured)
    history = read_history(run_dir, needs=["train_loss"])
    if not cost_file.exists():
        atomic_write_json(cost_file, {"cpu_seconds": cpu,
                                      "texts_per_second": measure_throughput(run_dir, texts, settings.device)})
    costs = check_fields(cost_file, read_json(cost_file), COST_FIELDS)  # (a reused cell's may have been edited)
    return {
        "run_dir": str(run_dir),
        "accuracy": metrics["accuracy"],
        "macro_f1": metrics["macro_f1"],
        "parameters": metrics["parameters"],
        "epochs": len(history),
        "train_seconds": metrics["train_seconds"],
        **{name: costs[name] for name in COST_FIELDS},
        "train_loss": [h["train_loss"] for h in history],
        # The last epoch's, beside its training loss: metrics.json's accuracy is of the kept (best validated) weights
        "final_train_accuracy": history[-1].get("train_accuracy") if history else None,
        "reused": reused,
        **majority_accuracy(metrics.get("confusion_matrix")),
    }


def majority_accuracy(confusion_matrix) -> dict:
    """What always answering the commonest test class would score, and the test texts counted, from a single-label
    run's confusion matrix (rows: true classes); None for anything else (a multi-label run's per-label matrices).

    >>> majority_accuracy([[12, 238], [12, 238]])
    {'majority_accuracy': 0.5, 'test_examples': 500}
    """
    matrix = np.asarray(confusion_matrix if confusion_matrix is not None else [], dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.sum() <= 0:
        return {"majority_accuracy": None, "test_examples": None}
    total = matrix.sum()
    return {"majority_accuracy": float(matrix.sum(axis=1).max() / total), "test_examples": int(total)}


def check_same_settings(run_dir: Path, settings: RunSettings,
                        earlier: Callable[[], Sequence[RunSettings]] = tuple) -> None:
    """Refuse to reuse a run directory trained with settings other than ``settings``; one trained with one of
    ``earlier()`` (what the folder may have held under an earlier edition of the file recipe, built only on a
    difference) is told that the file's defaults changed since, and which settings typed reuse it.

    The saved settings are rebuilt through the same dataclasses, so a field added
    to attnclf since the cell ran counts as its default, not as a difference.

    >>> # check_same_settings(Path("out/runs/self-attn-seed0"), settings)  # RunDirError if trained otherwise
    """
    try:
        saved = resume_settings(run_dir)
    except TypeError:  # the cell has a field this attnclf no longer knows
        differing = ("data",)
    else:  # (where the data lies is left out: check_same_split compares the texts held out)
        unused = () if saved.embeddings or settings.embeddings else ("embeddings_std",)  # (its default changed once)
        differing = saved.first_difference(settings, ignore=unused)
        if differing is not None and any(saved.first_difference(cell, ignore=unused) is None for cell in earlier()):
            (section, _, name), theirs, ours = differing[0].partition("."), differing[1], differing[2]
            typed = _typed_as(saved.differences(settings, ignore=unused), saved.model_config)
            what = (f"other {section} settings than this experiment's ({name}={theirs} there, {ours} here)" if name else
                    "a fixed count of n-gram buckets, which this experiment's sizes to the training texts")
            raise RunDirError(f"{run_dir} was trained with {what}: the defaults of self-attn on a file (the file "
                              f"recipe) changed since that cell was trained; delete it or give another --output"
                              + (f", or add its settings to reuse it: {typed}" if typed else ""))
    if differing is not None:
        raise RunDirError(f"{run_dir} was trained with other {differing[0].split('.')[0]} settings than this "
                          f"experiment's; delete it or give another --output")


def _typed_as(differences, model_config: dict) -> str | None:
    """The flags that give a cell's side of ``differences`` (model and tokenizer settings, and whether its n-gram
    buckets were sized: what an edition of the file recipe sets; ``model_config``: the cell's), or None where one
    cannot be typed so: a value that typed reads back as another (``set_value``: the text "1" as a number, "true" as
    a bool; None or a list as text), or buckets the cell sized and this command does not."""
    differences = list(differences)
    flags = []
    for key, theirs, _ in differences:
        if key == "ngram_buckets_sized":  # (a count typed is built as given, unsized)
            if theirs:
                return None
            if any(other == "model_config.nb_ngram_buckets" for other, _, _ in differences):
                continue  # (typed below, as the cell's count)
            key, theirs = "model_config.nb_ngram_buckets", model_config["nb_ngram_buckets"]
        section, _, name = key.partition(".")
        if section not in ("model_config", "tokenizer") or set_value(str(theirs)) != theirs:
            return None
        if section == "model_config":
            flags.append(f"--set {shlex.quote(f'{name}={theirs}')}")
        else:  # (the tokenizer's kind is --tokenizer; its other fields are their own flags)
            flags.append(f"{'--tokenizer' if name == 'kind' else '--' + name.replace('_', '-')} "
                         f"{shlex.quote(str(theirs))}")
    models = " (--set reaches every model that has the field)" if any(f.startswith("--set") for f in flags) else ""
    return " ".join(flags) + models


def check_same_split(run_dir: Path, settings: RunSettings) -> None:
    """Refuse a finished cell whose recorded validation or test texts the data no longer gives (a dataset's split
    changed since, or its file was edited): its scores would describe other data than the cells trained now, in one
    table. Older cells record neither."""
    recorded = read_json(run_dir / "config.json")
    held_out, tested = held_out_fingerprint(recorded), recorded.get("data", {}).get("test_sha256")
    test_key = recorded.get("data", {}).get("test_key")  # (a token-cache cell's, in place of test_sha256)
    if not (held_out or tested or test_key):
        return
    data = json.dumps(asdict(settings.data), sort_keys=True)
    seed = settings.data.data_seed(settings.train.seed)
    validation_now, test_now = _split_fingerprints(data, seed)
    if held_out and held_out != validation_now:
        raise RunDirError(f"{run_dir} was trained on another split of {settings.data.describe()} than it gives now; "
                          f"delete it or give another --output")
    # (the same test texts for every seed: each reused cell would be stale)
    if (tested and tested != test_now) or (test_key and test_key != _test_key(data, seed)):
        where = Path(settings.data.test_file).name if settings.data.test_file else settings.data.describe()
        raise RunDirError(f"{run_dir} was tested on other texts than {where} gives now (the data changed since), so "
                          f"its scores would sit beside scores on the new ones; delete it or give another --output")


@functools.lru_cache(maxsize=4)
def _split_fingerprints(data: str, seed: int) -> tuple[str, str | None]:
    """``texts_fingerprint`` of a split's validation and test texts (None: no test split), loaded once per
    experiment, not once per cell."""
    splits = load_data(DataSettings(**json.loads(data)), seed)
    return (texts_fingerprint(splits.validation),
            None if splits.test is None else texts_fingerprint(splits.test))


@functools.lru_cache(maxsize=4)
def _test_key(data: str, seed: int) -> str | None:
    """``current_test_key`` of a token-cache experiment's test data, read once per experiment, not once per cell."""
    from ..training.cached import current_test_key

    return current_test_key(DataSettings(**json.loads(data)), seed)


def measure_throughput(run_dir: Path, texts: list[str], device: str = "auto") -> float:
    """Texts per second through ``Classifier.predict_proba`` (tokenisation included)."""
    from ..classifier import Classifier

    classifier = Classifier.load(run_dir, device=device)
    classifier.predict_proba(texts[:64])  # warm-up: the first call pays one-off allocations
    started = time.perf_counter()
    classifier.predict_proba(texts)
    return round(len(texts) / (time.perf_counter() - started), 1)


def throughput_texts(setup: Setup) -> list[str]:
    """The first ``setup.throughput_texts`` texts the cells are tested on."""
    splits = load_data(setup.data, setup.seeds[0])
    texts = (splits.test or splits.validation).texts
    return texts[: setup.throughput_texts]
