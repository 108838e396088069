"""A whole training run: data -> tokenizer -> model -> fit -> test metrics -> run directory."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from .. import __version__
from ..data.base import Splits, TextDataset
from ..data.files import data_suffix
from ..data.multilabel import SUSPECT_LABEL_SEPARATORS, multi_hot
from ..data.registry import get_source
from ..checks import by_field, check_threads
from ..errors import AttnclfError, DataError, RunDirError, first_few, shown
from ..evaluation.metrics import compute_metrics, pick_examples
from ..evaluation.multilabel import multilabel_metrics, predicted_sets, tune_thresholds
from ..evaluation.predict import predict_probabilities
from ..models import build_model, config_for
from ..models.memory import SMALLEST_VOCABULARY, refuse_untrainable
from ..models.ngrams import BUCKETS_PER_BIGRAM, bucket_note, sized_buckets
from ..models.windows import window_config, windowed
from ..rundir import (EARLIER_MODEL, EARLIER_MODEL_STAGING, FORMAT_VERSION, TEMPERATURE_FILE, THRESHOLDS_FILE,
                      atomic_write_json, file_sha256, first_missing_folder, folder_lock, is_resumable,
                      prepare_output_dir, read_config, read_history, read_json, read_metrics,
                      remove_cut_short_writes, remove_empty_folders)
from ..text.batching import EVAL_MAX_TOKENS, BucketBatches
from ..text.cache import CachedDataset
from ..text.cleaning import social_media_note
from ..text.tokenizer import Tokenizer, unspaced_text_warning
from ..text.vectors import WordVectors, count_vectors
from ..text.windows import WindowConfig, text_batches
from .device import (blas_libraries, blas_threads, describe_device, forked_generators, resolve_device, seed_generators,
                     torch_threads)
from .distributed import Distributed, from_environment, init_distributed, rank_device
from .pretrain import (check_pretrained, check_pretrained_unchanged, describe_pretrained, encoder_fingerprint,
                       load_pretrained)
from .run_data import (FLATTERED_BY_VALIDATION, align_labels, describe_classes, held_out_fingerprint, load_data,
                       refuse_gone, shared_text_warnings, texts_fingerprint, warnings_among)
from .settings import (COUNT_EMBEDDINGS, DataSettings, RunSettings, check_resumed, checkpoint_state,
                       finished_training, refuse_derived_fields, resume_settings)
from .multilabel import CROWDED_NOTE_START, crowded_label_sets_note
from .trainer import (ONE_CLASS_NOTE_START, Trainer, imbalance_remedies, one_class_note,
                      refuse_undefined_monitor)


@dataclass
class RunResult:
    """What ``train_run`` returns: the run directory, its test ``metrics`` (metrics.json's), its ``history`` (a record
    per epoch) and the ``seconds`` it took.

    >>> # result = train_run(settings); result.metrics["accuracy"], len(result.history)
    """

    run_dir: Path
    metrics: dict
    history: list[dict]
    seconds: float


def _batches(tokenizer: Tokenizer, data: TextDataset, batch_size: int, shuffle: bool, seed: int,
             balanced: bool = False, windows: WindowConfig | None = None, progress: bool = False) -> BucketBatches:
    max_tokens = None if shuffle else EVAL_MAX_TOKENS  # evaluation batches: bounded in padded tokens too
    if isinstance(data, CachedDataset):  # encoded once, cut to max_len, when the cache was built
        return BucketBatches(data.sequences, data.labels, batch_size=batch_size, shuffle=shuffle, seed=seed,
                             balanced=balanced, max_tokens=max_tokens)
    labels = multi_hot(data.labels, data.num_classes) if data.multi_label else data.labels
    split = "training" if shuffle else "validation"
    if progress:  # (a line a log keeps too: a million texts take minutes, before the epoch's bar appears)
        _stderr(f"tokenising {len(data.texts):,} {split} texts")
    # Packed, windowed or not: a list of Python ints per text held 6.2 GB for 900,000 texts (BENCHMARKS.md).
    with tqdm(total=len(data.texts), desc=f"tokenising {split} texts", unit=" texts", leave=False,
              disable=None if progress else True) as bar:
        return text_batches(tokenizer, data.texts, labels, windows=windows, batch_size=batch_size, shuffle=shuffle,
                            seed=seed, balanced=balanced, max_tokens=max_tokens, packed=True, done=bar.update)


def _built_model_config(settings: RunSettings, tokenizer: Tokenizer, train: TextDataset, say: bool) -> dict:
    """The model fields the run builds: ``settings.model_config``, with the n-gram branch's buckets sized to the
    training texts ``train`` where ``settings.ngram_buckets_sized`` (``ngrams.sized_buckets``; a resume sizes them
    again, to the same texts: the same count). ``say``: tell stderr the count."""
    model_config = settings.model_config
    cap = model_config.get("nb_ngram_buckets")
    if not (settings.ngram_buckets_sized and cap):
        return model_config
    # A token cache's ids, else the texts encoded a chunk at a time, as far as the model reads them (windows read
    # past max_len): counting stops once the bigrams fill the cap.
    read = settings.windows.covered(settings.tokenizer.max_len) if settings.windows else None
    sequences = train.sequences if isinstance(train, CachedDataset) else tokenizer.encode_arrays(train.texts, read)
    buckets, bigrams = sized_buckets(cap, sequences)
    if say:
        counted = f"{bigrams:,}" if bigrams <= cap // BUCKETS_PER_BIGRAM else f"over {cap // BUCKETS_PER_BIGRAM:,}"
        _stderr(f"n-gram branch: {buckets:,} bigram buckets, {BUCKETS_PER_BIGRAM} per distinct bigram of the training "
                f"texts ({counted} of them; {cap:,} buckets at most); --set nb_ngram_buckets=N builds N")
    return model_config | {"nb_ngram_buckets": buckets}


def _count_embeddings(settings: RunSettings, splits: Splits, dim: int, log) -> tuple[WordVectors, dict]:
    """PPMI vectors of the training texts (not the validation ones) and the dataset's unlabelled texts
    (``splits.unlabelled``, which ``load_data`` samples with the training texts), less any copy of a validation or
    test text among those, and what counting them took (for config.json)."""
    started = time.perf_counter()
    held_out = {text for part in (splits.validation, splits.test) if part is not None for text in part.texts}
    unlabelled = [text for text in splits.unlabelled if text not in held_out]
    texts = list(splits.train.texts) + unlabelled
    try:
        with blas_threads(settings.threads):
            vectors = count_vectors(texts, dim=dim, cleaning=settings.tokenizer.cleaning)
    except DataError as exc:
        raise DataError(f"--embeddings count: {exc}; train without them (--embeddings none) or from a vectors "
                        f"file") from None
    record = {"texts": len(texts), "words": len(vectors.words), "seconds": round(time.perf_counter() - started, 1)}
    # Both parts named: a --max-train-examples run samples the unlabelled texts too, and its log says how many.
    parts = f" ({len(splits.train):,} training, {len(unlabelled):,} unlabelled)" if unlabelled else ""
    log(f"embeddings: counted {record['words']:,} word vectors from {record['texts']:,} texts{parts} in "
        f"{record['seconds']:.0f} s")
    return vectors, record


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


# Within each_warning_once: the runs (by their folder's name) that gave each data warning, and every run that
# described its data; None outside it, where every run prints its own.
_given_warnings: ContextVar[tuple[dict[str, list[str]], list[str]] | None] = ContextVar("given_warnings",
                                                                                        default=None)
# True within each_warning_once(folds=True): the runs are folds of rows a command wrote for itself (`suspects`).
_training_folds: ContextVar[bool] = ContextVar("training_folds", default=False)


@contextmanager
def each_warning_once(folds: bool = False) -> Iterator[None]:
    """Within it, ``train_run`` prints a data warning only if no run before it printed the same (each run still
    records its own, for its report): `compare`, `ablate`, `train --seeds` and `refit` train run after run on the
    same data, and its warning, once per run, buried the one a later run gave otherwise. Once they have all run, a
    note says which runs gave each warning (printed once, it read as the first run's). ``folds``: the runs train on
    folds of rows a command wrote for itself (`suspects`), which are not the user's to compare models on (no run
    prints ``small_data_note``'s `attnclf compare` command) and hold out no test split: no run warns of the rows it
    scores among those it trained on as of test texts (the command counts them across its folds at once,
    ``texts_in_other_folds``), and its validation texts among them flatter its early stopping alone.

    >>> # with each_warning_once(): results = [train_run(settings) for settings in cells]
    """
    given: dict[str, list[str]] = {}
    runs: list[str] = []
    token = _given_warnings.set((given, runs))
    training_folds = _training_folds.set(folds)
    try:
        yield
    finally:
        _training_folds.reset(training_folds)
        _given_warnings.reset(token)
    for line in who_warned(given, len(runs)):
        _stderr(line)


def who_warned(given: dict[str, list[str]], runs: int) -> list[str]:
    """A note per warning in ``given`` (each with the names of the runs that gave it) saying which of the ``runs``
    runs gave it; none where one run alone trained.

    >>> for note in who_warned({"warning: few texts": ["seed-0", "seed-1"], "warning: one class": ["seed-1"]}, 2):
    ...     print(note)
    note: the warning 'few texts' came from both runs
    note: the warning 'one class' came from 1 of the 2 runs ('seed-1')
    """
    if runs < 2:
        return []
    every = "both runs" if runs == 2 else f"all {runs} runs"
    return [f"note: the warning {shown(line.removeprefix('warning: '), most=60)} came from "
            + (every if len(names) == runs else f"{len(names)} of the {runs} runs ({first_few(names)})")
            for line, names in given.items()]


def evaluate_split(model, tokenizer: Tokenizer, data: TextDataset, device, batch_size: int = 128,
                   thresholds: np.ndarray | None = None) -> tuple[dict, np.ndarray]:
    """Test metrics plus three confident correct and incorrect examples, and the probabilities behind them.

    Multi-label data is scored by ``multilabel_metrics`` at ``thresholds``, without examples.

    >>> # metrics, probabilities = evaluate_split(model, tokenizer, splits.test, torch.device("cpu"))
    >>> # metrics["accuracy"], metrics["examples"]["correct"][0]["text"]
    """
    batches = _batches(tokenizer, data, batch_size, False, 0, windows=window_config(model))
    probabilities = predict_probabilities(model, batches, device, data.multi_label)
    if not np.isfinite(probabilities).all():  # (scikit-learn's metrics would stop on them with a traceback)
        raise AttnclfError(f"the model's outputs on the {data.split or 'held-out'} texts are not finite numbers: its "
                           f"weights are broken (by a training that diverged?); train it again with a lower --lr")
    if data.multi_label:
        metrics = multilabel_metrics(multi_hot(data.labels, data.num_classes), probabilities, data.label_names,
                                     thresholds)
        return metrics | {"split": data.split}, probabilities
    metrics = compute_metrics(data.labels, probabilities, data.label_names)
    metrics["split"] = data.split
    metrics["examples"] = pick_examples(data.texts, data.labels, probabilities, data.label_names)
    return metrics, probabilities


def train_run(settings: RunSettings, resume: bool = False, progress: bool = True,
              loaded: tuple[Splits, Tokenizer] | None = None, added: bool = False) -> RunResult:
    """Train, validate and test one model; everything lands in ``settings.output``.

    Under ``torchrun`` every process calls it and trains its share (see
    ``distributed``); rank 0 writes the run directory and alone returns test metrics. ``loaded``: what
    ``load_cached_data`` returned for these settings (a refit's check loads it first), so as not to load it again.
    ``added``: a new run that a resumed command adds to runs it recorded (an ensemble's member), checked as those
    were (``RunSettings.refusals``' ``resumed``).

    >>> # result = train_run(RunSettings(DataSettings(dataset="demo"), output="runs/demo"))
    >>> # result.metrics["accuracy"]
    """
    # The run seeds torch's generators (its initial weights, dropout) on a fork of them: called from Python (refit_runs,
    # a notebook), the caller's own seeded streams go on as if the run had not drawn from them.
    with torch_threads(settings.threads), forked_generators(rank_device(settings.device)), ExitStack() as held:
        return _train_run(settings, resume, progress, loaded, held, added)


def _train_run(settings: RunSettings, resume: bool, progress: bool, loaded: tuple[Splits, Tokenizer] | None,
               held: ExitStack, added: bool) -> RunResult:
    """``train_run``'s work; ``held`` holds the run folder's lock until the run returns."""
    started = time.perf_counter()
    _refuse_unworkable(settings, resume, added)
    counting = settings.embeddings == COUNT_EMBEDDINGS and not resume
    vectors = vectors_sha256 = None
    if settings.embeddings and not resume:
        config = config_for(settings.model, **settings.model_config)
        width = config.embedding_dim
        if not counting:
            vectors = WordVectors.load(settings.embeddings)
            vectors.check_width(width, config.embedding_field)
            vectors_sha256 = file_sha256(settings.embeddings)
    created = first_missing_folder(settings.output)
    run_dir = prepare_output_dir(settings.output)
    if from_environment().is_main:  # (torchrun's other ranks read the folder rank 0 writes)
        held.enter_context(folder_lock(run_dir))
        remove_cut_short_writes(run_dir, run_dir / "plots")  # (the checkpoint's go as it loads: Trainer)
    seed = settings.train.seed
    if resume and not is_resumable(run_dir):
        raise RunDirError(f"{run_dir}: nothing to resume: it stopped before its first checkpoint (written every "
                          f"--checkpoint-minutes within an epoch, and as epochs end); train it again")
    checkpointed = checkpoint_state(run_dir, resuming=True) if resume else {}
    finished = resume and finished_training(checkpointed, settings.train.epochs, settings.train.patience)
    distributed, device = init_distributed(settings.device)
    try:
        splits, trained = _checked_data(settings, run_dir, resume, progress, loaded, distributed.is_main,
                                        unlabelled=counting and distributed.is_main)
    except AttnclfError:
        if created:  # bad data: a run that never started leaves no folder behind, nor the empty parents it made
            shutil.rmtree(run_dir, ignore_errors=True)
            remove_empty_folders(run_dir.parent, created)
        raise
    if not resume and distributed.is_main:
        set_aside_earlier_model(run_dir, progress)
    elif distributed.is_main and checkpointed.get("epoch", 0) < settings.train.epochs:
        (run_dir / TEMPERATURE_FILE).unlink(missing_ok=True)  # training on changes the weights it was fitted to
    label_names = splits.train.label_names
    warned = _describe_data(settings, splits, progress) if distributed.is_main and not resume else None
    # One pass over the held-out texts (from disk for a token cache): later commands check they are unchanged.
    fingerprint = None if splits.validation is None else texts_fingerprint(splits.validation)
    # A refit checks the training texts too; a token cache's are not read again (its refit checks the rows its run
    # validated on, as it loads them).
    trained_on = None if settings.data.token_cache else texts_fingerprint(splits.train)
    # And the test texts, so that a resume given a moved test file can check it is the same one (a token cache's: the
    # key of its content, which load_cached_data compares as a resume starts).
    tested_on = None if settings.data.token_cache or splits.test is None else texts_fingerprint(splits.test)
    test_key = getattr(splits.test, "key", None) if settings.data.token_cache else None
    saved = read_config(run_dir) if resume else {}
    if resume:
        _check_same_texts(run_dir, saved, settings, label_names, trained_on, fingerprint, tested_on)
    if finished and progress and distributed.is_main:  # (a resume that trains nothing looks idle; once it may go on)
        _stderr(f"{run_dir} finished training already ({finished}): nothing to train; it is tested again")
    counted = saved.get("counted_embeddings")
    if warned is None:  # (a resume: what the run's start warned of, for the report)
        warned = saved.get("data", {}).get("warnings", [])
    if counting and distributed.is_main:  # DDP starts every rank from rank 0's parameters
        vectors, counted = _count_embeddings(settings, splits, width,
                                             _stderr if progress else lambda message: None)
        splits.unlabelled = []  # (read for counting alone: IMDB's 50,000 reviews need not stay through training)

    if not resume and distributed.is_main:
        trained.save(run_dir / "tokenizer.json")
    distributed.barrier()  # every rank reads the tokenizer rank 0 trained
    tokenizer = Tokenizer.load(run_dir / "tokenizer.json", settings.tokenizer)
    if resume and settings.data.token_cache and trained.backend.to_str() != tokenizer.backend.to_str():
        # Its caches hold the ids of a tokenizer trained on the files as they are now: they changed since. (Only a run
        # from before config.json recorded tokenizer_key gets here: load_cached_data refuses a newer one whose data
        # changed, and encodes with its own tokenizer otherwise.)
        raise RunDirError(f"{run_dir}: {settings.data.describe()} no longer gives the texts this run trained on (the "
                          f"data changed since); it cannot resume on other data")

    model_config = _built_model_config(settings, tokenizer, splits.train,
                                      progress and distributed.is_main and not resume)
    if resume:  # its vocabulary too (a new run's was sized once its words were counted, above)
        refuse_untrainable(settings.model, saved_in=run_dir, vocab_size=tokenizer.vocab_size,
                           num_classes=len(label_names), max_len=settings.tokenizer.max_len, **model_config)
    seed_generators(seed, device)
    model = build_model(settings.model, vocab_size=tokenizer.vocab_size, num_classes=len(label_names),
                        max_len=settings.tokenizer.max_len, **model_config)
    if vectors is not None:
        found = vectors.initialise(model.token_embedding, tokenizer, settings.embeddings_std)
        if progress and distributed.is_main:
            source = "vectors counted in this run" if counting else settings.embeddings
            _stderr(f"embeddings: {found:,} of {tokenizer.vocab_size - 2:,} words start from {source}")
    # What the weights started from, so that a refit or a member added later can check it is unchanged (a resumed
    # run's checkpoint holds what they became).
    starts = {key: saved[key] for key in ("embeddings_sha256", "pretrained_sha256") if key in saved}
    if vectors_sha256:
        starts["embeddings_sha256"] = vectors_sha256
    if settings.init_from and not resume:
        starts["pretrained_sha256"] = encoder_fingerprint(settings.init_from)
        found = load_pretrained(model, tokenizer, settings.init_from)
        if progress and distributed.is_main:
            _stderr(f"init-from: encoder from {settings.init_from} ({describe_pretrained(settings.init_from)}); "
                    f"{found:,} of {tokenizer.vocab_size - 2:,} words start from its embedding")
    model = windowed(model, settings.windows)
    note = bucket_note(model_config, len(label_names), lifted_by="`--set nb_ngram_bucket_budget=0`")
    if note and progress and distributed.is_main and not resume:
        _stderr(f"note: {note}")
    if distributed.is_main:
        atomic_write_json(run_dir / "labels.json", label_names)
        atomic_write_json(run_dir / "config.json", _config_record(settings, model, splits, counted, trained_on,
                                                                  fingerprint, starts, tested_on,
                                                                  getattr(trained, "data_key", None), test_key,
                                                                  warned, trained_where(device, distributed)))

    trainer = Trainer(model, settings.train, run_dir, device, label_names, progress=progress, distributed=distributed,
                      multi_label=settings.data.multi_label)
    history = trainer.fit(
        _batches(tokenizer, splits.train, settings.train.batch_size * distributed.world_size, True, seed,
                 balanced=settings.train.sampler == "balanced", windows=settings.windows, progress=trainer.progress),
        None if splits.validation is None else
        _batches(tokenizer, splits.validation, settings.eval_batch_size, False, seed, windows=settings.windows,
                 progress=trainer.progress),
        resume=resume,
    )
    metrics = {}  # (torchrun's other ranks leave testing and reporting to rank 0)
    if distributed.is_main:
        metrics = _test_trained(settings, run_dir, model, tokenizer, splits, device, history, warned)
    return RunResult(run_dir, metrics, history, time.perf_counter() - started)


def _test_trained(settings: RunSettings, run_dir: Path, model, tokenizer: Tokenizer, splits: Splits,
                  device: torch.device, history: list[dict], warned: list[str]) -> dict:
    """What follows training, on rank 0: the notes on what the kept weights gave on validation, a multi-label run's
    thresholds, then the test metrics (metrics.json, which marks the run finished) and its report. Returns the
    metrics."""
    label_names = splits.train.label_names
    if splits.validation is not None and not settings.data.multi_label:
        _note_one_class(run_dir, settings, history, splits.validation, warned)
    thresholds = None
    if settings.data.multi_label and splits.validation is None:
        thresholds = _refit_thresholds(settings.refit_of, run_dir, label_names)
    elif settings.data.multi_label:
        thresholds, crowded = _tune_thresholds(model, tokenizer, splits.validation, device, settings.eval_batch_size,
                                               run_dir)
        _record_note(run_dir, crowded, CROWDED_NOTE_START, warned)
    trained = {"train_seconds": round(sum(h["seconds"] for h in history), 3), "parameters": model.num_parameters()}
    if splits.test is None and splits.validation is None:  # a refit of data without a test split: nothing held out
        metrics = {"split": None, **trained,
                   "note": f"trained on every labelled text; {settings.refit_of['run']} estimates its accuracy"}
        _finished(run_dir, metrics)
        return metrics
    test = align_labels(splits.test if splits.test is not None else splits.validation, label_names)
    metrics, test_probabilities = evaluate_split(model, tokenizer, test, device, settings.eval_batch_size, thresholds)
    metrics |= trained
    _finished(run_dir, metrics)
    if settings.report:
        from ..classifier import Classifier
        from ..report import write_report

        write_report(run_dir, classifier=Classifier(model, tokenizer, label_names, device, read_json(
            run_dir / "config.json"), batch_size=settings.eval_batch_size, thresholds=thresholds), test=test,
                     test_probabilities=test_probabilities)
    return metrics


def _checked_data(settings: RunSettings, run_dir: Path, resume: bool, progress: bool,
                  loaded: tuple[Splits, Tokenizer] | None, main: bool,
                  unlabelled: bool) -> tuple[Splits, Tokenizer | None]:
    """The run's splits and, for a new run on rank 0 (``main``) or a token cache, the tokenizer trained on them
    (``loaded``: as ``train_run`` takes it), refused before the run writes anything where its validation texts leave
    the monitor undefined or the model cannot be built for the words they hold; ``unlabelled``: with the dataset's
    unlabelled texts, read with the splits (for the rank that counts word vectors)."""
    seed = settings.train.seed
    if settings.data.token_cache and loaded is not None:
        splits, trained = loaded
    elif settings.data.token_cache:
        from .cached import load_cached_data, run_tokenizer

        splits, trained = load_cached_data(settings, seed, log=_stderr if progress else lambda message: None,
                                           resume_with=run_tokenizer(run_dir, settings.tokenizer) if resume else None)
    else:
        splits, trained = load_data(settings.data, seed, unlabelled=unlabelled), None
    if trained is None and not resume and main:  # texts it cannot learn from fail here too
        trained = Tokenizer.train(splits.train.texts, settings.tokenizer)
    if splits.validation is not None:  # (a refit validates on nothing: the monitor picks no epoch)
        validation = splits.validation
        refuse_undefined_monitor(settings.train.monitor, multi_hot(validation.labels, validation.num_classes)
                                 if settings.data.multi_label else validation.labels, validation.label_names)
    if trained is not None and not resume:  # (the words the texts hold, not --vocab-size's cap on them)
        refuse_untrainable(settings.model, vocab_size=trained.vocab_size, num_classes=len(splits.train.label_names),
                           max_len=settings.tokenizer.max_len, **settings.model_config)
    return splits, trained


def _refuse_unworkable(settings: RunSettings, resume: bool, added: bool) -> None:
    """Settings that cannot work fail before anything is written (``RunSettings.check``: the CLI makes it as it reads
    its flags, and names them; RunSettings built in Python meet it here, named by their fields)."""
    resolve_device(settings.device)  # (--device cuda on a machine without one)
    refuse_derived_fields(settings.model_config)
    if resume:
        check_resumed(settings)
        # (README: the command that started it, given the files' new places, resumes it)
        refuse_gone(settings.output, settings.data, "train_file", "validation_file", "test_file",
                    then="; to resume it, give the command that started it with --resume and the file where it is now")
    elif settings.refit_of is None:  # (a refit's are its validated run's, checked when that was new)
        settings.check(resumed=added)
    settings.threads = check_threads(settings.threads)
    if settings.init_from and not resume:
        if settings.embeddings:
            raise AttnclfError("--init-from brings the token embedding its encoder was pretrained with; drop "
                               "--embeddings")
        check_pretrained(settings.model, config_for(settings.model, max_len=settings.tokenizer.max_len,
                                                    **settings.model_config), settings.init_from, settings.tokenizer)
    if settings.data.token_cache and (settings.data.multi_label or settings.windows):
        what = ("--windows" if settings.windows else "--multi-label" if settings.data.train_file else
                f"{settings.data.dataset}, a multi-label dataset")
        raise AttnclfError(f"--token-cache does not combine with {what} yet: the cache holds one label and one "
                           f"max_len-token sequence per text")
    if settings.windows:
        settings.windows.stride_for(settings.tokenizer.max_len)
    # A model the settings cannot build (heads that do not divide the width), or one too large to train whatever
    # the texts (--max-len 100000000 asks for a 51 GB position table), fails here, before minutes of loading data
    # and a half-written run folder. Its vocabulary is sized once the tokenizer has learned it.
    refuse_untrainable(settings.model, saved_in=settings.output if resume else None, vocab_size=SMALLEST_VOCABULARY,
                       num_classes=2, max_len=settings.tokenizer.max_len, **settings.model_config)
    if settings.embeddings == COUNT_EMBEDDINGS and not resume and settings.data.token_cache:
        raise AttnclfError("word vectors counted in the run (--embeddings count, which the dataset's recipe may "
                           "set) read every training text at once and do not combine with --token-cache; add "
                           "--embeddings none, or count them with `attnclf vectors` and pass the file")


def _note_one_class(run_dir: Path, settings: RunSettings, history: list[dict], validation: TextDataset,
                    warned: list[str]) -> None:
    """Say so where the kept weights answer one class for every validation text (``one_class_note``), --quiet or not:
    the scores that follow read as a model's, not as a count of the majority class. config.json's warnings keep it for
    the report, in place of the one a resumed run's start recorded."""
    _record_note(run_dir, one_class_note(history, settings.train.monitor, validation.labels, validation.label_names,
                                         imbalance_remedies(settings.train)), ONE_CLASS_NOTE_START, warned)


def _record_note(run_dir: Path, note: str | None, starts: str, warned: list[str]) -> None:
    """Print what the kept weights gave on validation (``note``), --quiet or not, and keep it among config.json's
    warnings for the report, in place of the one starting ``starts`` that a resumed run's start recorded."""
    if note:
        _stderr(f"note: {note}")
    kept = [line for line in warned if not line.startswith(starts)] + ([note] if note else [])
    if kept != warned:
        config = read_config(run_dir)
        config["data"] = {key: value for key, value in config["data"].items() if key != "warnings"} | (
            {"warnings": kept} if kept else {})
        atomic_write_json(run_dir / "config.json", config)


# Both corrections of the imbalance at once: the run warns as it starts (see _describe_data).
TWICE_BALANCED = ("--sampler balanced and --class-weight balanced each correct the class imbalance; together they "
                  "correct it twice (the rare classes drawn more often and weighed up as well), which over-corrects: "
                  "give one of them")


def _describe_data(settings: RunSettings, splits: Splits, progress: bool) -> list[str]:
    """The classes and their counts, and warnings about the labels and texts; --quiet hides progress, not what is
    wrong with the data. Returns the warnings, which config.json keeps for the report."""
    described = describe_classes(splits.train, _suspect_separators(settings.data.train_file), splits.validation)
    # Files, and generated sets, small and of short texts that repeat (176 of the demo's 1,000 test texts are training
    # texts too), but for the toy sets, which test on their training set by design (however sampled).
    source = get_source(settings.data.dataset) if settings.data.dataset else None
    generated = source is not None and source.generated and not source.tests_on_training
    folds = _training_folds.get()
    if (settings.data.train_file or generated) and not settings.data.token_cache:
        # (A cache's texts stay on disk.)
        described += shared_text_warnings(replace(splits, test=None) if folds else splits,
                                          settings.tokenizer.cleaning, validation_too=not generated,
                                          flattered="the fold's early stopping" if folds else FLATTERED_BY_VALIDATION)
    if not settings.data.token_cache:  # (a cache's texts stay on disk)
        unspaced = unspaced_text_warning(splits.train.texts, settings.tokenizer, settings.recorded_without)
        described += [unspaced] if unspaced else []
        posts = social_media_note(splits.train.texts, settings.tokenizer.cleaning)
        described += [posts] if posts else []
    if settings.train.sampler == "balanced" and settings.train.class_weights == "balanced":
        described.append(f"warning: {TWICE_BALANCED}")  # (a warning, not a refusal: it trains, only worse)
    given = _given_warnings.get()
    # Runs trained one after another on the same data (train --seeds) share the note: the first run's stands for all.
    first = given is None or not given[1]
    note = small_data_note(settings.data, len(splits.train), settings.threads) if first and not folds else None
    if note:
        described.append(note)
    if given is not None:
        given[1].append(Path(settings.output).name)
    for line in described:
        warning = line.startswith("warning:")
        if warning and given is not None:
            given[0].setdefault(line, []).append(Path(settings.output).name)
            if len(given[0][line]) > 1:  # (an earlier run printed it)
                continue
        if progress or warning:
            _stderr(line)
    return warnings_among(described)


# Below this many training texts a file's run says what else to try: on files of 3,000-6,920 texts TF-IDF + LR was
# 1.75 points behind to 0.6 ahead of the file recipe's self-attn on 2 and 4 classes, and 7.4 points ahead on 20 (test
# accuracy, the recipe reading 512 tokens: 78.8% against 71.4%; BENCHMARKS.md, Small data).
SMALL_DATA_TEXTS = 10_000


def small_data_note(data: DataSettings, training_texts: int, threads: int | None = None) -> str | None:
    """A line for a run on a small file of the user's: the command that compares models on it, at the run's
    ``threads``; None where there is nothing to say (a named dataset, whose recipe or BENCHMARKS.md says what to
    train on it; a refit; multi-label data, which `attnclf compare` does not take; a large file).

    >>> data = DataSettings(train_file="t.csv")
    >>> small_data_note(data, 2700)[:28], small_data_note(data, 10000)
    ('note: 2,700 training texts, ', None)
    """
    if not data.train_file or data.refit or data.multi_label or training_texts >= SMALL_DATA_TEXTS:
        return None
    test_file = shlex.quote(data.test_file) if data.test_file else "TEST_FILE"
    # The command must read the file as the run did: without its columns it would stop on a missing 'text' column.
    reading = [("--validation-file", data.validation_file)] if data.validation_file else []
    columns = [data.text_column] if isinstance(data.text_column, str) else data.text_column
    reading += [("--text-column", column) for column in columns if columns != ["text"]]
    reading += [("--label-column", data.label_column)] if data.label_column != "label" else []
    flags = "".join(f" {flag} {shlex.quote(value)}" for flag, value in reading)
    # A user who bounded this run's threads on a shared machine would have the comparison take every core.
    threaded = f" --threads {threads}" if threads is not None else ""
    # Its default seeds train self-attn several times over: said, as that takes several times this run's time.
    return (f"note: {training_texts:,} training texts, where boe or TF-IDF + LR may do as well as self-attn or better: "
            f"`attnclf compare --train-file {shlex.quote(data.train_file)} --test-file {test_file}{flags} "
            f"--models self-attn,boe{threaded}` scores self-attn, boe and TF-IDF + LR on your data, over several "
            f"seeds each (--seeds 1: one)")


def _suspect_separators(train_file: str | None) -> str:
    """Characters that, inside multi-label class names, may be a label delimiter the file used: CSV/TSV cells are
    split on --label-delimiter; JSON lines and Parquet labels too when given as one string, but as lists they are
    names, where "/" often spells a hierarchy ("science/physics")."""
    if not train_file:
        return ""
    csv_cells = data_suffix(train_file) in (".csv", ".tsv")
    return SUSPECT_LABEL_SEPARATORS if csv_cells else SUSPECT_LABEL_SEPARATORS.replace("/", "")


# What a run writes into its folder, and so what it replaces of an earlier run there.
_RUN_FILES = ("model.safetensors", "history.jsonl", "metrics.json", THRESHOLDS_FILE, TEMPERATURE_FILE, "report.html",
              "faithfulness.json", "config.json", "labels.json", "tokenizer.json")


def set_aside_earlier_model(run_dir: Path, progress: bool) -> None:
    """The data loaded (for `train --seeds`: before its first member trains), this run replaces the folder's earlier
    one. A finished earlier model moves into ``earlier-model/`` until this run finishes, so an interrupted or failed
    replacement loses no trained model; an unfinished one (its weights, history, checkpoint) is deleted, as it would
    describe another model (a checkpoint would invite --resume onto this run's tokenizer, a history `attnclf refit`
    onto its settings).

    >>> # set_aside_earlier_model(Path("runs/demo"), progress=True)  # a finished model there: into earlier-model/
    """
    earlier, staging = run_dir / EARLIER_MODEL, run_dir / EARLIER_MODEL_STAGING
    if staging.is_dir():  # a set-aside interrupted half-way: its files go back first, to move again as one
        for moved in staging.iterdir():
            os.replace(moved, run_dir / moved.name)
        staging.rmdir()
    exported = (run_dir / "onnx" / "export.json").is_file()  # (an onnx/ folder of the user's own is not ours)
    ours = [*_RUN_FILES, "plots", *(["onnx"] if exported else [])]
    if (run_dir / "metrics.json").is_file() and (run_dir / "model.safetensors").is_file():
        staging.mkdir()
        for name in ours:
            if (run_dir / name).exists():
                os.replace(run_dir / name, staging / name)
        shutil.rmtree(earlier, ignore_errors=True)  # (a finished model is newer than any kept before it)
        os.replace(staging, earlier)  # whole, or not at all
        if progress:
            _stderr(f"{run_dir} held a trained model; this run replaces it (kept in {earlier} until this run "
                    f"finishes)")
    for name in ours + ["checkpoint"]:
        if (run_dir / name).is_dir():
            shutil.rmtree(run_dir / name, ignore_errors=True)
        else:
            (run_dir / name).unlink(missing_ok=True)


def restore_earlier_model(run_dir: Path) -> None:
    """Undo ``set_aside_earlier_model`` for a run that never started (it wrote no config.json).

    >>> restore_earlier_model(Path("no/such/run"))  # (nothing set aside: nothing to do)
    """
    earlier = run_dir / EARLIER_MODEL
    if earlier.is_dir() and not (run_dir / "config.json").exists():
        for moved in earlier.iterdir():
            os.replace(moved, run_dir / moved.name)
        earlier.rmdir()


def _finished(run_dir: Path, metrics: dict) -> None:
    """Write the run's final metrics; the model it replaced, if any, is no longer needed."""
    atomic_write_json(run_dir / "metrics.json", metrics)
    shutil.rmtree(run_dir / EARLIER_MODEL, ignore_errors=True)


def _check_same_texts(run_dir: Path, saved: dict, settings: RunSettings, label_names: list[str],
                      trained_on: str | None, fingerprint: str | None, tested_on: str | None) -> None:
    """A resumed run must see the texts it trained, validated and tests on, as config.json recorded them."""
    if saved.get("data", {}).get("test_sha256") not in (None, tested_on):
        raise RunDirError(f"{run_dir}: {settings.data.test_file or 'its test split'} no longer gives the test texts "
                          f"this run recorded; it cannot resume on other data")
    if saved.get("data", {}).get("train_sha256") not in (None, trained_on):
        raise RunDirError(f"{run_dir}: {settings.data.describe()} no longer gives the texts this run trained on "
                          f"(the data or its split changed since); it cannot resume on other data")
    if held_out_fingerprint(saved) not in (None, fingerprint):
        changed = settings.data.describe_held_out(read_json(run_dir / "labels.json"), label_names)
        raise RunDirError(f"{run_dir}: {changed} no longer gives the validation texts this run held out (the data or "
                          f"its split changed since); it cannot resume on other data")


def _config_record(settings: RunSettings, model, splits, counted: dict | None, trained_on: str | None,
                   fingerprint: str | None, starts: dict, tested_on: str | None, tokenizer_key: str | None,
                   test_key: str | None = None, warnings: list[str] | None = None, device: str | None = None) -> dict:
    """config.json: the settings (absolute paths, where the dataset was found), the model, and the data's sizes and
    fingerprints (a token-cache run's ``tokenizer_key`` and ``test_key``: the data its tokenizer learned, and its test
    data, which a resume compares), the ``warnings`` training gave about the data (the report repeats them), and the
    ``device`` it trains on (``trained_where``: settings.device may say only "auto")."""
    return config_record(settings, model, {
        "train_examples": len(splits.train),
        "validation_examples": 0 if splits.validation is None else len(splits.validation),
        "test_examples": len(splits.test) if splits.test else 0,
        **({"validation_sha256": fingerprint} if fingerprint else {}),
        **({"train_sha256": trained_on} if trained_on else {}),
        **({"test_sha256": tested_on} if tested_on else {}),
        **({"tokenizer_key": tokenizer_key} if tokenizer_key else {}),
        **({"test_key": test_key} if test_key else {}),
        **({"warnings": warnings} if warnings else {})}, {
        **({"counted_embeddings": counted} if counted else {}), **starts, **({"device": device} if device else {})})


def trained_where(device: torch.device, distributed: Distributed) -> str:
    """Where a run trains, as config.json records it: its device (a GPU with its model), and how many processes.

    >>> trained_where(torch.device("cpu"), Distributed(world_size=2))
    'cpu, 2 processes'
    """
    processes = distributed.world_size
    return describe_device(device) + (f", {processes} processes" if processes > 1 else "")


def config_record(settings: RunSettings, model, data: dict, extra: dict | None = None) -> dict:
    """A run's config.json from its settings, its model, the record of its ``data`` and any ``extra`` entries: what
    `attnclf train` writes, and AttentionTextClassifier.save.

    >>> # config_record(settings, model, {"train_examples": 900})["model"]["parameters"]
    """
    recorded = settings.anchored()
    return {
        "format_version": FORMAT_VERSION,
        "versions": {"attnclf": __version__, "torch": torch.__version__, "numpy": np.__version__,
                     "blas": blas_libraries()},
        "settings": replace(recorded, data=recorded.data.located()).to_dict(),
        "model": {"name": settings.model, "config": model.config.to_dict(), "parameters": model.num_parameters()},
        **(extra or {}),
        "data": data,
    }


def _tune_thresholds(model, tokenizer: Tokenizer, validation: TextDataset, device, batch_size: int,
                     run_dir: Path) -> tuple[np.ndarray, str | None]:
    """Per-label thresholds maximising validation F1, saved as thresholds.json (what predict reads), and a note where
    at those thresholds the validation texts get far more labels than they hold (``crowded_label_sets_note``)."""
    targets = multi_hot(validation.labels, validation.num_classes)
    batches = _batches(tokenizer, validation, batch_size, False, 0, windows=window_config(model))
    probabilities = predict_probabilities(model, batches, device, True)
    thresholds, f1 = tune_thresholds(targets, probabilities)
    atomic_write_json(run_dir / THRESHOLDS_FILE, {
        "thresholds": {name: float(t) for name, t in zip(validation.label_names, thresholds)},
        "validation_f1": {name: float(f) for name, f in zip(validation.label_names, f1)},
        "validation_examples": len(validation),
        "note": "a label is predicted when its probability is at least its threshold; each threshold maximises "
                "that label's F1 on the validation split (0.5 where validation has no positive)",
    })
    return thresholds, crowded_label_sets_note(targets, predicted_sets(probabilities, thresholds))


def _refit_thresholds(refit_of: dict, run_dir: Path, label_names: list[str]) -> np.ndarray:
    """The validated run's per-label thresholds, saved as this refit's (it has no validation texts to tune on)."""
    atomic_write_json(run_dir / THRESHOLDS_FILE, {
        "thresholds": refit_of["thresholds"],
        "note": f"those of {refit_of['run']}, which tuned them on its validation split; this refit trained on it",
    })
    return np.array([refit_of["thresholds"][name] for name in label_names])


def check_starts_unchanged(run_config: dict, what: str) -> None:
    """A one-line error if what a run (its config.json) started from, its word vectors file or pretrained encoder,
    has changed since: a refit, or a member added to its ensemble, must start where it started.

    >>> check_starts_unchanged({"settings": {"embeddings": None}}, "runs/demo")  # (it started from neither)
    """
    check_pretrained_unchanged(run_config, what)
    recorded, vectors = run_config.get("embeddings_sha256"), run_config.get("settings", {}).get("embeddings")
    if recorded and Path(vectors).is_file() and file_sha256(vectors) != recorded:
        raise AttnclfError(f"{what} started from the word vectors {vectors}, which have changed since; it must start "
                           f"from the same ones")


def train_or_continue(settings: RunSettings, resume: bool, progress: bool = True,
                      loaded: tuple[Splits, Tokenizer] | None = None,
                      named: Callable[[str], str] = by_field, data_dir: str | None = None) -> RunResult:
    """``settings``' run trained afresh; with ``resume``, kept if it finished and continued from its checkpoint if not
    (``train --seeds --resume``, ``refit --resume``), and if not begun added as the others were begun (``train_run``'s
    ``added``). ``loaded``: as for ``train_run``; ``named``: as for
    ``resume_settings``; ``data_dir``: where the dataset lies now, for a run continued or reported (its own settings
    are read again, and record the folder it was given when it started).

    >>> # train_or_continue(replace(settings, output="runs/ens/seed-1"), resume=True).metrics  # kept, or continued
    """
    output = Path(settings.output)
    if resume and (output / "metrics.json").is_file():
        print(f"{output}: finished, kept", file=sys.stderr)
        finished = read_metrics(output)
        # A run trained with --no-report has none to finish; one stopped as it wrote it does (metrics.json comes
        # first, and marks the run finished). Rank 0 writes it, as it writes the run's other files.
        asked = settings.report and read_config(output)["settings"].get("report", True)
        if from_environment().is_main:
            # Held as it is finished: a kill -9 as it wrote its report left that report's figures cut short, and the
            # lock file, which go now.
            with folder_lock(output):
                remove_cut_short_writes(output, output / "plots")
                if asked and finished.get("split") is not None and not (output / "report.html").is_file():
                    from ..report import write_report

                    with torch_threads(settings.threads):
                        write_report(output, device=settings.device, data_dir=data_dir)
        return RunResult(output, finished, read_history(output), 0.0)
    if resume and is_resumable(output):
        continued = resume_settings(output, epochs=settings.train.epochs, device=settings.device,
                                    threads=settings.threads, named=named, data_dir=data_dir)
        continued.report = continued.report and settings.report  # (as `train --resume` reports)
        # How often it checkpoints within an epoch is the command's to say now, as `train --resume` lets it
        # (the weights come out the same at any interval).
        continued.train.checkpoint_minutes = settings.train.checkpoint_minutes
        return train_run(continued, resume=True, progress=progress, loaded=loaded)
    return train_run(settings, progress=progress, loaded=loaded, added=resume)
