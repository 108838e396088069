"""The `attnclf` command: parses arguments, calls the library, prints.

Errors the user can fix arrive as one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shlex
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path

from . import __version__
from .checks import ACCESS_LOGS, BACKENDS, check_device_name, check_threads, set_value
from .errors import AttnclfError, AttnclfWarning, is_out_of_memory, shown, unknown_name
from .rundir import (check_output_folder, kept_earlier_models, member_folders, read_config,
                     refuse_if_held, unfinished_warning)

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str, threads: bool | Callable[[argparse.Namespace], bool] = False):
    """Register ``handler`` as the command ``name``; with ``threads`` it runs under its ``--threads`` as PyTorch's
    (``threads`` a function of its arguments: where that says they are PyTorch's).

    >>> # @command("calibrate", threads=True)
    >>> # def cmd_calibrate(args: argparse.Namespace) -> int: ...
    """
    def register(handler: Callable[[argparse.Namespace], int]):
        def under_threads(args: argparse.Namespace) -> int:
            if args.threads is None or (callable(threads) and not threads(args)):
                return handler(args)
            from .training.device import torch_threads

            with torch_threads(args.threads):
                return handler(args)

        COMMANDS[name] = under_threads if threads else handler
        return handler

    return register


def _parse_overrides(pairs: list[str]) -> dict:
    overrides = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise AttnclfError(f"--set expects key=value, got {pair!r}")
        overrides[key.replace("-", "_")] = set_value(value)
    return overrides


# ---------------------------------------------------------------- settings


_TRAIN_FLAGS = (("epochs", "epochs"), ("batch_size", "batch_size"), ("lr", "lr"), ("optimizer", "optimizer"),
                ("schedule", "schedule"), ("warmup_ratio", "warmup_ratio"), ("label_smoothing", "label_smoothing"),
                ("class_weight", "class_weights"), ("patience", "patience"), ("monitor", "monitor"),
                ("weight_decay", "weight_decay"), ("sampler", "sampler"),
                ("ema_decay", "ema_decay"), ("seed", "seed"),
                ("checkpoint_minutes", "checkpoint_minutes"))  # flag -> TrainConfig field (train alone takes the last)
_TOKENIZER_FLAGS = (("tokenizer", "kind"), ("vocab_size", "vocab_size"), ("min_frequency", "min_frequency"),
                    ("max_len", "max_len"), ("truncation", "truncation"))  # flag -> TokenizerConfig field


def _train_flags(args: argparse.Namespace) -> dict:
    """The ``TrainConfig`` fields the training flags typed set, checked as ``TrainConfig`` checks them, naming the
    flags (``settings_for`` and ``resume_settings`` check them again among the recipe's or the run's, by field)."""
    from .training.trainer import TrainConfig

    # (compare and ablate take no --seed)
    train = {name: getattr(args, flag) for flag, name in _TRAIN_FLAGS if getattr(args, flag, None) is not None}
    if args.bf16:
        train["bf16"] = True
    TrainConfig(**train, named=_flag)
    return train


def _budget(args: argparse.Namespace) -> dict:
    """``settings_for`` keyword arguments from the data, tokenizer and training flags."""
    from .text.cleaning import CleaningConfig
    from .text.tokenizer import TokenizerConfig
    from .training.settings import DataSettings

    train = _train_flags(args)
    tokenizer = {name: getattr(args, flag) for flag, name in _TOKENIZER_FLAGS if getattr(args, flag) is not None}
    TokenizerConfig(**tokenizer, named=_flag)  # (named by their flags; settings_for checks them again by field)
    cleaning = CleaningConfig(lowercase=not args.no_lowercase, strip_punctuation=args.strip_punctuation,
                              remove_stopwords=args.remove_stopwords, lemmatize=args.lemmatize,
                              unicode_nfc=not args.no_unicode_nfc, split_cjk=not args.no_split_cjk,
                              social_media=args.social_media, turkish_i=not args.no_turkish_i)
    data = DataSettings(dataset=args.dataset, data_dir=args.data_dir, download=args.download,
                        train_file=args.train_file, test_file=args.test_file, validation_file=args.validation_file,
                        text_column=args.text_column or "text", label_column=args.label_column,
                        split_seed=args.split_seed, hold_out=args.hold_out,
                        max_train_examples=args.max_train_examples, max_test_examples=args.max_test_examples,
                        multi_label=args.multi_label, token_cache=args.token_cache,
                        token_cache_dir=args.token_cache_dir,
                        **{name: getattr(args, name) for name in _given(args) & {"val_fraction", "label_delimiter"}})
    data.check(_flag, _given(args))  # before anything is written (saved runs are not re-checked)
    return {"data": data, "train": train, "tokenizer": tokenizer, "cleaning": cleaning, "device": args.device}


def build_settings(args: argparse.Namespace, file_recipe: int = -1):
    """RunSettings from general defaults, then the dataset's recipe, then explicit flags; a file's single-label
    self-attn from the file recipe's edition ``file_recipe`` (an index into ``recipes.FILE_RECIPES``: the latest by
    default, an earlier one as the command built it then).

    >>> # build_settings(_parse(["train", "--dataset", "sst2", "--epochs", "2"])).train.epochs  # 2
    """
    from .training.settings import settings_for

    budget = _budget(args)
    settings = settings_for(model=args.model, model_config=_parse_overrides(args.set), output=args.output,
                            file_recipe=file_recipe, **budget)
    settings.windows = _windows(args)
    if args.embeddings:  # else the recipe's
        settings.embeddings = None if args.embeddings == "none" else args.embeddings
    if args.embeddings_std is not None:
        settings.embeddings_std = args.embeddings_std
    if args.init_from:  # it brings its own token embedding, not the recipe's vectors (given ones are refused)
        settings.init_from = args.init_from
        settings.embeddings = args.embeddings if args.embeddings and args.embeddings != "none" else None
        # (said once, as a run begins: a resume, or a finished run's command rerun, reads as its config records)
        _read_as_pretrained(settings, args, noted=file_recipe == -1 and not args.resume)
    settings.check(_flag, _given(args), resumed=args.resume)
    return settings


def _read_as_pretrained(settings, args: argparse.Namespace, noted: bool) -> None:
    """Texts read as the encoder of --init-from was pretrained, where it predates a cleaning setting whose flag the
    command left out (``cleaning_as_pretrained``): the command that started from it then does so still. The flags
    only set them away from their defaults, so only their absence is the default; ``noted``: say so, in one note."""
    from .text.cleaning import CLEANING_ADDED
    from .training.pretrain import cleaning_as_pretrained

    # (each added with a --no-... flag, but social_media, off by default, with --social-media)
    typed = {name for name in CLEANING_ADDED if getattr(args, f"no_{name}", False) or getattr(args, name, False)}
    cleaning, taken = cleaning_as_pretrained(settings.init_from, settings.tokenizer.cleaning, typed)
    if not taken:
        return
    settings.tokenizer = replace(settings.tokenizer, cleaning=cleaning)
    if noted:
        print(f"note: {settings.init_from} was pretrained before {taken[0]}: this run reads texts as it was, "
              f"{', '.join(f'{name}={getattr(cleaning, name)}' for name in taken)}", file=sys.stderr)


def built_under_earlier_file_recipes(args: argparse.Namespace, settings) -> list:
    """What this command built under each earlier edition of the file recipe (``recipes.FILE_RECIPES``), oldest
    first, where other than ``settings`` (what it builds now): a run, ensemble or cell recorded with one of these was
    begun by this command then.

    >>> args = _parse(["train", "--train-file", "t.csv"])
    >>> built_under_earlier_file_recipes(args, build_settings(args))[0].model_config
    {}
    """
    from .recipes import earlier_file_recipes

    builds = [build_settings(args, file_recipe=edition) for edition in earlier_file_recipes()]
    return [build for build in builds if (build.model_config, build.tokenizer, build.ngram_buckets_sized) !=
            (settings.model_config, settings.tokenizer, settings.ngram_buckets_sized)]


def _given(args: argparse.Namespace) -> set[str]:
    """The settings fields, of those that apply only beside another, whose flags were typed: ``RunSettings.check``
    refuses them where they do not apply even at their default value, which the settings cannot tell from no flag."""
    return {name for name in ("val_fraction", "label_delimiter", "embeddings_std", "token_cache_dir")
            if getattr(args, name, None) is not None}


def _flag(field: str) -> str:
    """The flag that sets the settings field ``field`` (of the run's, data's, training's or tokenizer's settings), as
    the command line's errors name it.

    >>> _flag("max_train_examples"), _flag("class_weights"), _flag("kind")
    ('--max-train-examples', '--class-weight', '--tokenizer')
    """
    flag = next((flag for flag, name in (*_TRAIN_FLAGS, *_TOKENIZER_FLAGS) if name == field), field)
    return f"--{flag.replace('_', '-')}"


def _windows(args: argparse.Namespace):
    """The --windows settings, or None; window flags without --windows are a mistake worth a line."""
    from .text.windows import WindowConfig

    fields = {"window_stride": "stride", "max_windows": "max_windows", "window_pooling": "pooling"}  # flag -> field
    given = {flag: getattr(args, flag) for flag in fields if getattr(args, flag) is not None}
    if not args.windows:
        if given:
            raise AttnclfError(f"{_flag(next(iter(given)))} needs --windows")
        return None
    flags = {field: flag for flag, field in fields.items()}
    return WindowConfig(**{fields[flag]: value for flag, value in given.items()},
                        named=lambda field: _flag(flags.get(field, field)))  # (max_len: the window's size)


# ---------------------------------------------------------------- commands


def _print_metrics(metrics: dict) -> None:
    from .evaluation.metrics import scores_text

    print(scores_text(metrics))


@command("train")
def cmd_train(args: argparse.Namespace) -> int:
    from .training.run import train_run
    from .training.trainer import describe_kept

    if args.resume and args.overwrite:
        raise AttnclfError("--resume continues the run in --output and --overwrite replaces it: give one")
    if args.seeds:
        return _train_seeds(args)
    if args.resume:
        settings = _resumed_settings(args)
    else:
        settings = build_settings(args)
        settings.threads = args.threads
        args.output = settings.output  # resolved (runs/MODEL-DATA by default): where an interrupted run resumes
        _refuse_if_held(settings.output)
        check_output_folder(settings.output, ensemble=False, replace=args.overwrite)
    settings.report = settings.report and not args.no_report  # (a resumed run reports as it was asked to)
    result = train_run(settings, resume=args.resume, progress=not args.quiet)
    if not result.metrics:  # a torchrun rank other than 0; rank 0 reports
        return 0
    # What the scores below are of (a resumed refit's too: its last epoch)
    print(f"weights kept: {describe_kept(result.history, settings.train.monitor, settings.refit_of is not None)}")
    _print_metrics(result.metrics)
    print(f"run directory: {result.run_dir}")
    if settings.report:
        print(f"report: {result.run_dir / 'report.html'}")
    return 0


def _train_seeds(args: argparse.Namespace) -> int:
    """`train --seeds`: a member run per seed into OUTPUT/seed-SEED (with --resume: finished members kept, the others
    continued), then their ensemble tested."""
    from .ensemble import ensemble_summary, train_ensemble
    from .training.settings import refuse_other_vectors, resume_settings

    if args.seed is not None:
        raise AttnclfError("give --seed or --seeds, not both")
    typed = _typed(args) if args.resume else set()
    if args.resume and not typed & {"dataset", "train_file"}:  # (else: "--seeds needs held-out data")
        raise AttnclfError(f"--resume --seeds takes the whole command that trained the members in "
                           f"{args.output or 'the default --output'}, its --dataset or --train-file too, "
                           f"--resume added")
    settings = build_settings(args)
    settings.threads, settings.report = args.threads, not args.no_report
    args.output = settings.output  # resolved (runs/MODEL-DATA by default): where an interrupted ensemble resumes
    _refuse_if_held(settings.output)
    check_output_folder(settings.output, ensemble=True, replace=args.overwrite or args.resume)
    members = member_folders(settings.output, trained=True)
    if args.resume and members:
        trained = resume_settings(members[0])
        refuse_other_vectors(settings, trained, typed, named=_flag)
        if "epochs" not in typed:  # (not the recipe's default: members added or continued train as planned)
            settings.train = replace(settings.train, epochs=trained.train.epochs)
    earlier = functools.partial(built_under_earlier_file_recipes, args, settings) if args.resume else tuple
    metrics = train_ensemble(settings, args.seeds, resume=args.resume, progress=not args.quiet, named=_flag,
                             earlier=earlier)
    if metrics:  # torchrun's other ranks leave the testing to rank 0
        print(ensemble_summary(settings.output, metrics, runs=len(args.seeds)))
    return 0


def _resumed_settings(args: argparse.Namespace):
    """`train --resume`'s settings: the run's own in --output, with what may change (--epochs, --device, --threads,
    --checkpoint-minutes, where its data lies now); a whole command given with --resume must describe the run
    (``check_resume_command``)."""
    from .training.settings import check_resume_command, resume_settings

    if not args.output:
        raise AttnclfError("--resume needs --output RUN_DIR, the run to continue")
    output = Path(args.output)
    _refuse_if_held(output)  # (before reading it: a run just started there has no config.json yet)
    if not (output / "config.json").is_file():
        if member_folders(output, trained=True):
            raise AttnclfError(f"{output} holds the members of `train --seeds`: resume them with the command "
                               f"that trained them, --resume added")
        raise AttnclfError(f"{output}: no run to resume (no config.json there)")
    typed = _typed(args)
    planned = read_config(output)["settings"]["train"]["epochs"]
    _train_flags(args)  # (--epochs, named by its flag before the run's own settings take it)
    settings = resume_settings(output, epochs=args.epochs, device=args.device if "device" in typed else None,
                               threads=args.threads, named=_flag)
    check_resume_command(settings, typed, functools.partial(build_settings, args),
                         functools.partial(built_under_earlier_file_recipes, args), named=_flag,
                         log=(lambda line: None) if args.quiet else lambda line: print(line, file=sys.stderr))
    if settings.train.epochs != planned and not args.quiet:
        print(f"{output}: planned {planned} epochs, now {settings.train.epochs}; the learning-rate schedule "
              f"follows the new length from here on", file=sys.stderr)
    if args.data_dir:  # the dataset moved (the run checks it is the same data)
        settings.data.data_dir = args.data_dir
    if args.checkpoint_minutes is not None:  # (checked with the other training flags, by its flag)
        settings.train.checkpoint_minutes = float(args.checkpoint_minutes)
    return settings


def _refuse_if_held(output: str | Path) -> None:
    """``refuse_if_held`` on rank 0 (torchrun's other ranks leave the folder to it)."""
    from .training.distributed import from_environment

    if from_environment().is_main:
        refuse_if_held(output)


def _typed(args: argparse.Namespace) -> set[str]:
    """The `train` options the command typed, by their names in ``args``."""
    train = _subparser("train")
    for action in train._actions:  # parsed again with no defaults: what is left was typed
        action.default = argparse.SUPPRESS
    return set(vars(train.parse_known_args(args.argv)[0]))


def _subparser(name: str) -> argparse.ArgumentParser:
    """The parser of one command, for what only it knows (its option strings)."""
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices[name]


@command("refit")
def cmd_refit(args: argparse.Namespace) -> int:
    from .training.refit import refit_runs, refit_summary

    args.resume_hint = f"; `{_rerun_resuming(args)}` keeps finished refits and continues the others"
    if args.resume and args.overwrite:
        raise AttnclfError("--resume keeps finished refits and --overwrite trains them again: give one")
    results, ensemble_metrics = refit_runs(args.run_dirs, args.output, resume=args.resume, overwrite=args.overwrite,
                                           device=args.device, threads=args.threads, report=not args.no_report,
                                           progress=not args.quiet, data_dir=args.data_dir,
                                           log=lambda line: print(line, file=sys.stderr))
    if summary := refit_summary(results, ensemble_metrics):
        print(summary)
    return 0


@command("evaluate", threads=True)
def cmd_evaluate(args: argparse.Namespace) -> int:
    from .ensemble import Ensemble, load_run
    from .evaluation.metrics import evaluate, evaluation_text, paired_text, refuse_unpaired

    _refuse_columns_without_test_file(args)
    clf = Ensemble.load(args.run_dirs, device=args.device, bf16=args.bf16) if len(args.run_dirs) > 1 else \
        load_run(args.run_dirs[0], device=args.device, bf16=args.bf16)
    against = None if args.against is None else load_run(args.against, device=args.device, bf16=args.bf16)
    if against is not None:  # (before the texts are read)
        refuse_unpaired(clf, against, _flag)
    for run_dir in [*args.run_dirs, *([args.against] if args.against else [])]:
        _warn_if_unfinished(run_dir)
    if args.overwrite and not args.errors:
        raise AttnclfError("--overwrite replaces an existing --errors file; give --errors FILE, or drop --overwrite")
    data = _test_data(args, clf, split=args.split)  # (a run without test data: its validation)
    if against is not None:
        from .training.run_data import learned_by_another

        source = None if args.test_file or args.split == "validation" else (
            args.dataset or clf.config["settings"]["data"].get("dataset"))
        for line in learned_by_another(against, data, source, args.data_dir):
            print(f"{args.against}: {line}", file=sys.stderr)
    metrics = evaluate(clf, data, errors=args.errors, overwrite=args.overwrite, operating_points=args.operating_points,
                       named=_flag, threshold=args.threshold, against=against)
    written = metrics.pop("errors_written", None)
    if args.format == "json":
        print(json.dumps({k: v for k, v in metrics.items() if k != "classification_report"}, indent=2))
    else:
        print(evaluation_text(metrics, clf.label_names, clf.multi_label, named=_flag,
                              ensemble_thresholds=clf.thresholds_from if isinstance(clf, Ensemble) else None))
        if "against" in metrics:
            print(paired_text(metrics["against"], args.against))
    if written is not None:
        order = "most wrong labels first" if clf.multi_label else "most confident first"
        print(f"wrote {written:,} misclassified texts of {metrics['num_examples']:,} to {args.errors} ({order})",
              file=sys.stderr)
    return 0


@command("suspects", threads=True)
def cmd_suspects(args: argparse.Namespace) -> int:
    from .training.suspects import default_work_dir, find_suspects, suspect_line, suspects_summary

    # The settings `train` builds from the same flags; its run directory is the folds' work folder.
    settings = build_settings(argparse.Namespace(**vars(args) | {"output": args.work_dir, "resume": False}))
    if not args.work_dir:
        settings.output = default_work_dir(settings)
    settings.threads = args.threads
    args.folds_folder = settings.output  # (where an interruption's hint finds how far each fold got)
    _refuse_if_held(settings.output)
    rows = find_suspects(settings, args.folds, output=args.output, resume=args.resume, overwrite=args.overwrite,
                         progress=not args.quiet, named=_flag)
    for rank, row in enumerate(rows[:args.top], start=1):
        print(suspect_line(rank, row))
    print(suspects_summary(rows, settings.output, args.output), file=sys.stderr)
    return 0


@command("calibrate", threads=True)
def cmd_calibrate(args: argparse.Namespace) -> int:
    from .evaluation.calibration import calibrate_run, calibration_summary
    from .rundir import TEMPERATURE_FILE

    record = calibrate_run(args.run_dir, data_dir=args.data_dir, device=args.device)
    _warn_if_unfinished(args.run_dir)  # (after: one another process is training is refused, not told to resume)
    print(calibration_summary(record))
    print(f"written: {Path(args.run_dir) / TEMPERATURE_FILE} (predict, evaluate, serve, explain and export apply it; "
          f"delete it to undo)")
    return 0


def _warn_if_unfinished(run_dir: str | Path) -> None:
    """``unfinished_warning``'s line on stderr, where the run has not finished training."""
    if warning := unfinished_warning(run_dir):
        print(warning, file=sys.stderr)


# (onnxruntime takes --threads itself, without PyTorch)
@command("predict", threads=lambda args: args.backend != "onnx")
def cmd_predict(args: argparse.Namespace) -> int:
    from .ensemble import first_member, is_ensemble_dir, load_backend
    from .prediction import class_threshold
    from .prediction_files import check_output

    if args.output is None:
        _refuse_closed_stdout(args.command)
    else:
        _refuse_with_output(args)
        check_output(args.output, None if args.file in (None, STDIN_FILE) else args.file, args.overwrite, _flag)
    if args.attention and args.backend == "torch" and is_ensemble_dir(args.run_dir):
        raise AttnclfError(f"{args.run_dir} is an ensemble: its members attend each their own way; "
                           f"ask one member (--attention with {first_member(args.run_dir)})")
    clf = load_backend(args.run_dir, args.backend, int8=args.int8, device=args.device, bf16=args.bf16,
                       threads=args.threads, named=_flag)
    # (checked before any text is read, named by its flag)
    threshold = class_threshold(args.threshold, clf.label_names, getattr(clf, "multi_label", False), _flag)
    _warn_if_unfinished(args.run_dir)  # (an export of a run holds its best weights so far, as the run does)
    if args.output is None:
        _print_predictions(args, clf, threshold)
    else:
        _predict_into_file(args, clf, threshold)
    return 0


def _predict_into_file(args: argparse.Namespace, clf, threshold) -> None:
    """predict --output: the rows of a data --file, else the texts given, written with their predictions; a
    progress bar at a terminal, and the count written on stderr."""
    from tqdm.auto import tqdm

    from .data.files import has_rows, known_row_count
    from .prediction import UnknownTokenNotes
    from .prediction_files import predict_file, predict_texts

    if args.file is not None and has_rows(args.file):
        texts, total = None, known_row_count(args.file)
    else:
        texts = _input_texts(args, clf.config)
        total = len(texts)
    # At a terminal only (a log would fill with it): rows done, their rate, and the time left where the count of
    # rows is known without a pass through them (a CSV's is not).
    with tqdm(desc="predicting", unit=" texts", total=total, disable=None, leave=False) as bar:
        notes = UnknownTokenNotes(say=lambda line: tqdm.write(line, file=sys.stderr))  # (its line not the bar's)
        if texts is None:
            written = predict_file(clf, args.file, args.output, text_column=args.text_column,
                                   overwrite=args.overwrite, noticed=notes, named=_flag, threshold=threshold,
                                   done=bar.update)
        else:
            written = predict_texts(clf, texts, args.output, overwrite=args.overwrite, noticed=notes,
                                    named=_flag, threshold=threshold, done=bar.update)
    notes.count_the_rest()
    print(f"wrote {written:,} prediction{'s' * (written != 1)} to {args.output}", file=sys.stderr)


def _print_predictions(args: argparse.Namespace, clf, threshold) -> None:
    """predict without --output: a JSON line per text on stdout, chunk by chunk as they are answered."""
    from .prediction import UnknownTokenNotes
    from .prediction_files import PREDICT_CHUNK

    notes = UnknownTokenNotes()
    texts = _input_texts(args, clf.config)
    for start in range(0, len(texts), PREDICT_CHUNK):  # answers flow out chunk by chunk, not all at the end
        chunk = texts[start:start + PREDICT_CHUNK]
        for text, prediction in zip(chunk, clf.predict(chunk, tokens=args.attention, threshold=threshold)):
            record = {"text": text, **prediction.to_dict()}  # blank input lines are skipped: say which text this is
            if not args.attention:
                record.pop("tokens"), record.pop("attention")
            print(json.dumps(record, ensure_ascii=False))
            notes(text, prediction)
    notes.count_the_rest()


def _refuse_with_output(args: argparse.Namespace) -> None:
    """What predict --output cannot write: attention (a list per token), texts from two places (arguments beside a
    data file, whose rows keep their own columns)."""
    from .data.files import has_rows

    if args.attention:
        raise AttnclfError("--attention prints tokens and attention as JSON lines on stdout; --output writes one row "
                           "per text without them: leave out one of the two")
    if args.texts and args.file and has_rows(args.file):
        raise AttnclfError(f"--output writes the rows of {args.file}: give texts as arguments or a data --file, "
                           f"not both")


# Unix's name for stdin as a --file (cat -, sort -).
STDIN_FILE = "-"


def _refuse_closed_stdout(command: str) -> None:
    """One line for `attnclf predict RUN >&-`: Python makes a closed stdout None, which print() writes nothing to,
    so the answers would vanish under status 0."""
    if sys.stdout is None:
        raise AttnclfError(f"stdout is closed: `attnclf {command}` prints there; redirect it to a file (or /dev/null)")


def _stdin_bytes() -> bytes:
    """All of stdin, asked for by name (--file -); one line if it is closed (`<&-`: Python's None)."""
    if sys.stdin is None:
        raise AttnclfError(f"--file {STDIN_FILE}: stdin is closed; give the texts as arguments or with --file PATH")
    return sys.stdin.buffer.read()


def _stdin_texts(raw: bytes, config: dict) -> list[str]:
    """stdin's texts, a line each (``text_lines``), or a one-line error where its first is a CSV or TSV header, or a
    JSON object, naming the text column of the run (``config``'s): `cat test.csv | attnclf predict RUN` read the
    header as a text, and each row whole, its label too, as one, the answer part of the input (`cat test.jsonl`: each
    line's braces, keys and label).

    >>> # _stdin_texts(b"id,text,label\\n1,a fine film,pos\\n", {})  # AttnclfError: stdin: its first line, ...
    """
    import csv

    from .data.files import text_column_names, text_lines
    from .prediction import trained_text_column

    texts = text_lines(raw, "stdin")
    if texts:
        columns = text_column_names(trained_text_column(config))
        try:
            record = json.loads(texts[0])
        except (ValueError, RecursionError):  # (a text, which JSON need not parse: "[[[..." nests past Python's stack)
            record = None
        if isinstance(record, dict) and (named := next((column for column in columns if column in record), None)):
            raise AttnclfError(f"stdin: its first line, {shown(texts[0])}, is a JSON object naming the run's text "
                               f"column {named!r}: stdin is read as a text per line, every key and value of a line "
                               f"(its label too) part of its text; give the file itself, named .jsonl, with --file, "
                               f"which reads that column")
        for delimiter, kind in ((",", "CSV"), ("\t", "TSV")):
            names = next(csv.reader([texts[0]], delimiter=delimiter))
            # (a header's names, unpadded, as pandas and spreadsheets write them: not a text that starts "text, ...")
            if len(names) > 1 and all(name and name == name.strip() for name in names) and set(columns) & set(names):
                named = next(column for column in columns if column in names)
                raise AttnclfError(f"stdin: its first line, {shown(texts[0])}, is a {kind} header naming the run's "
                                   f"text column {named!r}: stdin is read as a text per line, every column of a row "
                                   f"(its label too) part of its text; give the file itself, named .{kind.lower()}, "
                                   f"with --file, which reads that column")
    return texts


def _input_texts(args: argparse.Namespace, config: dict) -> list[str]:
    """Texts from the arguments and --file (``-``: stdin), else from stdin when it is not a terminal (blank lines
    skipped; a blank argument among others is a text, as a data file's empty row is: one answer per argument).

    ``config``: the loaded model's, whose text column a data --file is read from unless --text-column names one."""
    from .data.files import is_data_file, read_texts, run_columns
    from .prediction import trained_text_column

    if args.text_column and not (args.file and is_data_file(args.file)):
        raise AttnclfError(f"--text-column picks the column of a CSV / TSV / JSONL / Parquet --file; texts are "
                           f"arguments: attnclf {args.command} RUN_DIR \"a text\"")
    if args.texts and not args.file and not any(text.strip() for text in args.texts):
        raise AttnclfError("every text given is blank")
    for number, text in enumerate(args.texts, 1):  # (Python keeps an argument's non-UTF-8 bytes as U+DC80-U+DCFF)
        if byte := next((ord(c) - 0xDC00 for c in text if 0xDC80 <= ord(c) <= 0xDCFF), None):
            raise AttnclfError(f"text argument {number}: not UTF-8 (byte 0x{byte:02x}); pass texts as UTF-8")
    # Blank arguments alone (`predict RUN "$EMPTY" --file f`) give no texts; among others they are texts.
    texts = list(args.texts) if any(text.strip() for text in args.texts) else []
    # A file or a pipe with nothing in it gives no texts, and predict no output: a day with nothing to score.
    if args.file == STDIN_FILE:  # (asked for by name, stdin is read at a terminal too, as cat - reads it)
        return texts + _stdin_texts(_stdin_bytes(), config)
    if args.file:
        with run_columns(args.text_column):
            return texts + read_texts(args.file, args.text_column or trained_text_column(config))
    if not texts and sys.stdin is not None and not sys.stdin.isatty():  # (closed, `<&-`: None, no texts there)
        return _stdin_texts(sys.stdin.buffer.read(), config)
    if not texts:
        raise AttnclfError("no texts: give them as arguments, with --file PATH, or on stdin")
    return texts


@command("datasets")
def cmd_datasets(args: argparse.Namespace) -> int:
    from .data.registry import datasets_table

    toy_order = (TOY_ORDER, "ablate only",
                 f"the course's order experiment on the three toy sets: `attnclf ablate --dataset {TOY_ORDER}`")
    print(datasets_table(args.data_dir, extra=[toy_order]))
    return 0


@command("models")
def cmd_models(args: argparse.Namespace) -> int:
    from .models import MODELS, parameter_table, parameter_table_heading

    overrides = _parse_overrides(args.set)
    for key in overrides:
        if key in ("vocab_size", "num_classes"):  # (the table passes them itself: build_model got them twice)
            raise AttnclfError(f"--set {key}: the counts' {key.replace('_', ' ')} is --{key.replace('_', '-')}")
        if not any(key in {f.name for f in fields(spec.config_class)} for spec in MODELS.values()):
            # (each field goes to the models that have it: one no model has changed no count, silently)
            raise AttnclfError(f"--set {key}: no model has a config field {key!r}")
    table = parameter_table(args.vocab_size, args.num_classes, overrides)  # (refused first, then the heading)
    print(parameter_table_heading(args.vocab_size, args.num_classes, overrides, overrides_named="--set"))
    print(table)
    return 0


@command("demo")
def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(output=args.output, device=args.device, threads=args.threads, progress=not args.quiet)
    return 0


@command("explain", threads=True)
def cmd_explain(args: argparse.Namespace) -> int:
    from .classifier import Classifier
    from .data.files import refuse_compressed_output
    from .explain import render
    from .rundir import refuse_existing_output, refuse_folder_output, refuse_output_read
    from .ensemble import refuse_ensemble_dir
    from .explain.explanation import explain_each
    from .explain.methods import DEFAULT_METHOD, chosen_methods, refuse_methods_as_texts, run_methods

    if args.output is None and args.format == "png":
        raise AttnclfError("--format png writes images: give --output NAME.png")
    if args.output is None:
        _refuse_closed_stdout(args.command)
    else:  # (before the explaining: what explain -o page.html.gz wrote was the terminal's text, and plain)
        refuse_compressed_output(args.output, "explain")
        refuse_folder_output(args.output)
        # (the page replaced the texts it explained, `explain --file texts.jsonl -o texts.jsonl`)
        refuse_output_read(args.output, None if args.file in (None, STDIN_FILE) else args.file)
    output_format = render.format_for(args.output, args.format)
    if args.output and output_format != "png":  # (the images' names are known once the texts are explained)
        refuse_existing_output(args.output, args.overwrite)
    refuse_ensemble_dir(args.run_dir)  # (one line, not a missing file)
    clf = Classifier.load(args.run_dir, device=args.device)
    _warn_if_unfinished(args.run_dir)
    texts = _input_texts(args, clf.config)
    if not texts:
        raise AttnclfError(f"{'stdin' if not args.file or args.file == STDIN_FILE else args.file}: no texts to explain")
    refuse_methods_as_texts(args.method, args.texts, named=_flag)
    available = run_methods(args.run_dir, clf.model)
    methods = chosen_methods(DEFAULT_METHOD if args.method is None else args.method, available, "method", _flag)
    if args.steps is not None and "integrated-gradients" not in methods:
        raise AttnclfError("--steps applies to integrated-gradients only")
    explanations = explain_each(clf, texts, methods, target=args.target, self_attentions=args.heads,
                                steps=args.steps)
    if args.method == "all":
        _note_left_out(available, "--method all")
    color = render.wants_color(args.color, args.output)
    if args.output or output_format == "png":
        render.write_explanations(explanations, args.output, output_format, len(methods), color=color,
                                  wrote=lambda name: print(f"wrote {name}"), overwrite=args.overwrite, named=_flag)
    else:
        print(render.render_text(explanations, output_format, color=color))
    return 0


def _note_left_out(available: list[str], asked: str, run: str = "") -> None:
    """A line on stderr naming the methods ``asked`` (what was asked for, in the user's words) leaves out of those
    a model could have, and why, for ``run`` (named when given); none where it leaves out none. (stderr: what stdout
    holds may be JSON or a page.) Printed with the results, never before an error: that would be two lines."""
    from .explain.methods import left_out

    if lacking := left_out(available):
        print(f"note: {f'{run}: ' if run else ''}{asked} leaves out {' and '.join(lacking)}", file=sys.stderr)


def _refuse_columns_without_test_file(args: argparse.Namespace) -> None:
    """--text-column, --label-column and --label-delimiter say how to read a --test-file; the run's own data and a
    named dataset are read as they trained, so without one the flags would be ignored silently."""
    given = [flag for flag, value in (("--text-column", args.text_column), ("--label-column", args.label_column),
                                      ("--label-delimiter", args.label_delimiter)) if value is not None]
    if given and not args.test_file:
        raise AttnclfError(f"{given[0]} describes a --test-file's columns; without one, the run's own data (or "
                           f"--dataset's) is read as it trained: give --test-file, or drop {given[0]}")


def _test_data(args: argparse.Namespace, clf, split: str):
    """The data --test-file, --dataset (or neither: the run's own) name, or the texts the runs held out (``split``
    "validation"), to score ``clf`` on; notes on stderr."""
    from .training.run_data import scoring_data

    return scoring_data(clf, split=split, log=lambda line: print(line, file=sys.stderr), named=_flag,
                        **_scoring_arguments(args))


def _scoring_arguments(args: argparse.Namespace) -> dict:
    """``scoring_data``'s data arguments, as the flags of ``_add_data_args(test_only=True)`` give them."""
    return {"test_file": args.test_file, "dataset": args.dataset, "text_column": args.text_column,
            "label_column": args.label_column, "label_delimiter": args.label_delimiter, "download": args.download,
            "data_dir": args.data_dir}


@command("faithfulness", threads=True)
def cmd_faithfulness(args: argparse.Namespace) -> int:
    from .explain.faithfulness import measure_run, summary_table

    _refuse_columns_without_test_file(args)
    results = []
    for run_dir in args.run_dirs:
        result = measure_run(run_dir, methods=args.methods, examples=args.examples, seed=args.seed, steps=args.steps,
                             device=args.device, log=lambda line: print(line, file=sys.stderr), named=_flag,
                             **_scoring_arguments(args))
        # Without --methods, the same methods as --methods all: say so, as that says what it leaves out. (Either way
        # the methods measured are all the model supports.)
        if (asked := {None: "the default (every method this model supports, as --methods all)",
                      "all": "--methods all"}.get(args.methods)):
            _note_left_out(list(result.methods), asked, run_dir if len(args.run_dirs) > 1 else "")
        results.append(result)
        if args.format == "terminal":
            print(result.section(run_dir), end="\n\n")
    if args.format == "json":
        print(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        print(summary_table(results))
    return 0


@command("report", threads=True)
def cmd_report(args: argparse.Namespace) -> int:
    from .ensemble import refuse_ensemble_report
    from .report import write_report

    if args.examples < 1:
        raise AttnclfError(f"--examples must be at least 1, got {args.examples}")
    refuse_ensemble_report(args.run_dir)  # (one line, not a missing file)
    path = write_report(args.run_dir, method=args.method, faithfulness=args.faithfulness,
                        faithfulness_examples=args.examples, device=args.device, data_dir=args.data_dir,
                        output=args.output)
    print(f"report: {path}")
    return 0


def _experiment_setup(args: argparse.Namespace):
    from .experiments import Setup

    return Setup(**_budget(args), model_config=_parse_overrides(args.set), seeds=_experiment_seeds(args.seeds),
                 threads=args.threads, named=_flag)


MAX_SEED_COUNT = 1000  # compare's and ablate's --seeds as a count: each seed trains every model again


def _experiment_seeds(given: int | list[int]) -> tuple[int, ...]:
    """The seeds of compare's and ablate's ``--seeds``: one value is a count N (seeds 0 to N-1), two or more are the
    seeds themselves (as `train --seeds` takes them; ``Setup`` checks them). ``given`` as parsed: the values typed, or
    the default count, 3 (an int, so that the help's "default: 3" is argparse's own default).

    >>> _experiment_seeds(3), _experiment_seeds([3]), _experiment_seeds([3, 5])
    ((0, 1, 2), (0, 1, 2), (3, 5))
    """
    given = [given] if isinstance(given, int) else given
    if len(given) == 1:
        if given[0] < 1:
            raise AttnclfError(f"--seeds must be at least 1, got {given[0]} (one value is a count: seeds 0 to N-1)")
        if given[0] > MAX_SEED_COUNT:  # (its seeds, listed, would fill the memory before a run began)
            raise AttnclfError(f"--seeds {given[0]} is a count: that many runs of each model; at most "
                               f"{MAX_SEED_COUNT} (two or more values are the seeds themselves: --seeds 3 4)")
        return tuple(range(given[0]))
    return tuple(given)


def _progress_log(args: argparse.Namespace):
    return (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))


def _print_experiment(result, output: str) -> None:
    """compare's and ablate's closing lines: their tables, and the files written into ``output``."""
    print(result.markdown)
    print(f"written to {output}: {', '.join(f.name for f in result.files)}")


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


@command("compare")
def cmd_compare(args: argparse.Namespace) -> int:
    from .experiments import compare

    setup = _experiment_setup(args)
    output = args.output or f"experiments/compare-{setup.data.describe()}"
    result = compare(setup, output, models=tuple(_comma_list(args.models)), reference=not args.no_reference,
                     quick=args.quick, log=_progress_log(args))
    _print_experiment(result, output)
    return 0


TOY_ORDER = "toy-order"  # what `ablate --dataset` takes besides the datasets: the course's fixed experiment


def _refuse_toy_order_outside_ablate(args: argparse.Namespace) -> None:
    """`attnclf datasets` lists toy-order beside the datasets: another command's "unknown dataset" would baffle."""
    named = getattr(args, "dataset", None)
    if args.command != "ablate" and TOY_ORDER in (named if isinstance(named, list) else [named]):
        from .experiments.ablate import TOY_SETS

        raise AttnclfError(f"{TOY_ORDER} is the course's order experiment, `attnclf ablate --dataset {TOY_ORDER}`; "
                           f"`attnclf {args.command}` takes one of its sets: {', '.join(TOY_SETS[:-1])} or "
                           f"{TOY_SETS[-1]}")


@command("ablate")
def cmd_ablate(args: argparse.Namespace) -> int:
    from .data.registry import sources
    from .experiments import ablate, toy_order

    if args.dataset and args.dataset != TOY_ORDER and args.dataset not in sources():
        # The registry's names and the experiment only ablate knows, all matched against a typo ('toy-ordr')
        raise AttnclfError(unknown_name("dataset", args.dataset, [*sources(), TOY_ORDER],
                                        tail=f" ({TOY_ORDER} is the course's order experiment)"))
    setup = _experiment_setup(args)
    output = args.output or f"experiments/ablate-{setup.data.describe()}"
    log = _progress_log(args)
    if args.dataset == TOY_ORDER:
        if args.quick or args.sweep or args.axes or args.model:
            raise AttnclfError("toy-order runs the course's fixed experiment, whose models are fixed; --model, "
                               "--quick, --axes and --sweep apply to other datasets (sweep toy-reversal, "
                               "toy-relative or toy-both instead)")
        result = toy_order(setup, output, log=log)
    else:
        result = ablate(setup, output, model=args.model or "self-attn", axes=_ablation_axes(args), quick=args.quick,
                        log=log)
    _print_experiment(result, output)
    return 0


def _ablation_axes(args: argparse.Namespace) -> dict[str, list] | None:
    """The axes --axes names and --sweep spells out, in that order; None for neither: the default axes the model has.

    >>> _ablation_axes(argparse.Namespace(axes="heads", sweep=["embed-dim=8,16"]))
    {'heads': [1, 2, 4, 8], 'embed_dim': [8, 16]}
    """
    from .experiments import AXES

    if args.axes is not None and not _comma_list(args.axes):
        raise AttnclfError(f"--axes names no axis; known: {', '.join(AXES)}")
    if not (args.axes or args.sweep):
        return None
    axes = {}
    for name in _comma_list(args.axes or ""):
        if name not in AXES:
            raise AttnclfError(unknown_name("axis", name, AXES, tail=" (or --sweep FIELD=V1,V2)"))
        axes[name] = AXES[name]
    for sweep in args.sweep or []:
        key, sep, values = sweep.partition("=")
        if not sep or not key or not _comma_list(values):
            raise AttnclfError(f"--sweep expects FIELD=VALUE1,VALUE2,..., got {sweep!r}")
        axes[key.replace("-", "_")] = [set_value(v) for v in _comma_list(values)]
    return axes


@command("serve")
def cmd_serve(args: argparse.Namespace) -> int:
    from .serve import ServeLimits, serve

    limits = {name: getattr(args, name) for name in ("max_batch", "max_explain_batch", "max_text_chars",
                                                     "max_body_bytes", "max_body_seconds", "max_connections",
                                                     "stop_seconds", "drain_seconds", "keep_alive_seconds")}
    limits = ServeLimits(**{k: v for k, v in limits.items() if v is not None}, named=_flag)
    _warn_if_unfinished(args.run_dir)
    serve(args.run_dir, host=args.host, port=args.port, device=args.device, threads=args.threads, bf16=args.bf16,
          backend=args.backend, int8=args.int8, named=_flag, limits=limits, access_log=args.access_log,
          threshold=args.threshold, root_path=args.root_path)
    return 0


@command("vectors", threads=True)
def cmd_vectors(args: argparse.Namespace) -> int:
    from .recipes import embedding_width
    from .rundir import prepare_output_file, refuse_existing_output, refuse_output_read
    from .text.vectors import count_vectors, file_width_note, vectors_summary
    from .training.device import blas_threads

    prepare_output_file(args.output)  # (before a minute of counting, not after)
    for read in args.file or ():
        refuse_output_read(args.output, read)
    # (runs trained from the vectors there would refuse to refit or add members: their vectors changed since)
    refuse_existing_output(args.output, args.overwrite)
    texts = _unlabelled_texts(args, "count")
    dim = args.dim if args.dim is not None else embedding_width(args.dataset[0] if args.dataset else None)
    with blas_threads(args.threads):
        vectors = count_vectors(texts, dim=dim, window=args.window, min_count=args.min_count,
                                vocab_size=args.vocab_size, named=_flag)
    vectors.save(args.output)
    print(vectors_summary(vectors, len(texts), args.output))
    if args.dim is None and not args.dataset:  # (the width is the file recipe's, which only some runs start from)
        print(file_width_note(dim), file=sys.stderr)
    return 0


@command("pretrain", threads=True)
def cmd_pretrain(args: argparse.Namespace) -> int:
    from .training.device import fix_mmap_threshold, resolve_device
    from .training.pace import CHECKPOINT_MINUTES, checked_minutes
    from .training.pretrain import pretrain_encoder, pretrain_recipe, pretrain_settings, pretrain_summary

    recipe = pretrain_recipe(args.recipe, args.dataset or (), named=_flag)
    settings = pretrain_settings(args.output, recipe, _parse_overrides(args.set), named=_flag,
                                 **{name: getattr(args, name) for name in ("embeddings", "embeddings_std", "epochs",
                                    "batch_size", "lr", "seed", "vocab_size", "min_frequency", "max_len")})
    device = resolve_device(args.device)  # (a GPU the machine lacks: one line before the texts are read, not after)
    minutes = checked_minutes(CHECKPOINT_MINUTES if args.checkpoint_minutes is None else args.checkpoint_minutes,
                              "--checkpoint-minutes")
    texts = _unlabelled_texts(args, "pretrain on")
    # Else its heap grows epoch by epoch (8,000 reviews: 3.2 to 4.7 GB over 4 epochs; fixed at 4 MB, 2.1-2.2 GB).
    fix_mmap_threshold()
    record = pretrain_encoder(texts, settings, args.output, progress=not args.quiet, device=device,
                              checkpoint_minutes=minutes, log=(lambda message: None) if args.quiet else
                              lambda message: print(message, file=sys.stderr, flush=True))
    print(pretrain_summary(record, args.output))
    return 0


def _unlabelled_texts(args: argparse.Namespace, purpose: str) -> list[str]:
    """The texts of --dataset and --file, for `pretrain` and `vectors` (``collect_unlabelled_texts``)."""
    from .data.registry import collect_unlabelled_texts

    flags = {"datasets": "dataset", "files": "file"}  # collect_unlabelled_texts' arguments named otherwise here
    return collect_unlabelled_texts(args.dataset or (), args.file or (), text_column=args.text_column,
                                    data_dir=args.data_dir, download=args.download, purpose=purpose,
                                    named=lambda name: _flag(flags.get(name, name)))


@command("export", threads=True)
def cmd_export(args: argparse.Namespace) -> int:
    from .ensemble import refuse_ensemble_dir
    from .export.onnx import check_data, export_onnx, refuse_held

    refuse_ensemble_dir(args.run_dir)  # (one line, not a missing file)
    refuse_held(args.run_dir, args.output)  # (before the run is read, or called unfinished: its holder is training it)
    _warn_if_unfinished(args.run_dir)
    flags = {"file": "check_file", "limit": "check_examples"}  # check_data's arguments named otherwise here
    check = check_data(args.run_dir, args.check_file, text_column=args.text_column, label_column=args.label_column,
                       limit=args.check_examples, data_dir=args.data_dir,
                       named=lambda name: _flag(flags.get(name, name)))
    result = export_onnx(args.run_dir, args.output, check=check, quantize=args.quantize)
    print(result.summary())
    return 0


# ---------------------------------------------------------------- parser


def _add_text_column_arg(p: argparse.ArgumentParser, help: str) -> None:
    """--text-column, repeatable: a title and a body, say, read as one text (data/files.py joins them)."""
    p.add_argument("--text-column", action="append", metavar="COLUMN",
                   help=f"{help}; repeat it to join several columns into one text, in order, a newline between "
                        f"them (--text-column title --text-column body)")


# --data-dir of the commands that read a run's named dataset again: the run records the --data-dir it was given,
# searched first, and where it found the dataset, searched last (registry.candidate_dirs)
RUN_DATA_DIR_HELP = ("folder holding the run's dataset (default: the --data-dir it trained with, then "
                     "$ATTNCLF_DATA_DIR, then ~/.cache/attnclf, then where it was found when the run trained)")
# --data-dir and --download of the commands that read a named dataset afresh (train, the experiments, vectors, pretrain)
DATA_DIR_HELP = "folder holding dataset files (default: $ATTNCLF_DATA_DIR, then ~/.cache/attnclf)"
DOWNLOAD_HELP = "download a missing public dataset (checksum-verified)"


def _add_data_args(p: argparse.ArgumentParser, *, test_only: bool = False) -> None:
    p.add_argument("--dataset", help="a dataset name (see `attnclf datasets`)")
    p.add_argument("--data-dir", help="folder holding dataset files, --dataset's or the run's own (default: for the "
                                      "run's own, the --data-dir it trained with; then $ATTNCLF_DATA_DIR, then "
                                      "~/.cache/attnclf, then for the run's own, where it was found when the run "
                                      "trained)" if test_only else DATA_DIR_HELP)
    p.add_argument("--download", action="store_true", help=DOWNLOAD_HELP)
    if not test_only:
        p.add_argument("--train-file", help="your own CSV / TSV / JSONL / Parquet training file, or one in "
                                            "fastText's format (a line per text: __label__NAME ... then the text); "
                                            "all but Parquet may be compressed (.csv.gz, .jsonl.bz2, .train.xz)")
        p.add_argument("--validation-file", help="a file in the same format to validate on (choosing the epoch to "
                                                 "keep) instead of a --val-fraction share of the training file")
    p.add_argument("--test-file", help="a labelled CSV / TSV / JSONL / Parquet or fastText-format file to score "
                                       "(default: --dataset's test split, else the run's own)" if test_only else
                                       "a held-out file in the same format, to test on once training ends")
    if test_only:  # a run's test file is laid out like its training file, unless told otherwise
        _add_text_column_arg(p, "column holding the text (default: the run's)")
        p.add_argument("--label-column", help="column holding the label (default: the run's)")
    else:
        _add_text_column_arg(p, "column holding the text (default: text)")
        p.add_argument("--label-column", default="label", help="column holding the label (default: label)")
    if not test_only:
        p.add_argument("--multi-label", action="store_true",
                       help="a set of labels per text: a JSON list, or a CSV/TSV cell split on --label-delimiter")
    p.add_argument("--label-delimiter", help="separates a multi-label CSV/TSV cell's labels (default: "
                                             + ("the run's)" if test_only else "|)"))


def _add_budget_args(p: argparse.ArgumentParser) -> None:
    """Data, training and tokenizer flags: what `train` and the experiments share."""
    _add_data_args(p)
    # (Their help writes out the general defaults as TrainConfig and TokenizerConfig hold them: those modules import
    # torch and tokenizers, which every command's parser would then wait for. tests/test_cli.py holds them equal.)
    _add_training_args(p)
    _add_tokenizer_args(p)
    _add_sample_args(p)
    _add_device_arg(p)


def _add_training_args(p: argparse.ArgumentParser) -> None:
    """The flags of how a model trains: its optimiser, schedule, loss, sampler and when it stops."""
    p.add_argument("--epochs", type=int,
                   help="passes over the training texts (default: the dataset's recipe's, else 10)")
    p.add_argument("--batch-size", type=int, help="training texts per step (default: the dataset's recipe's, else 32)")
    p.add_argument("--lr", type=float, help="learning rate at its peak, reached after warm-up (default: the "
                                            "dataset's recipe's, else 0.001)")
    p.add_argument("--weight-decay", type=float, help="AdamW's weight decay of the weight matrices (--optimizer adam "
                                                      "has none) (default: the dataset's recipe's, else 0.01)")
    p.add_argument("--optimizer", choices=["adamw", "adam"], help="adamw: Adam with decoupled weight decay; adam: "
                                                                   "without weight decay (default: the dataset's "
                                                                   "recipe's, else adamw)")
    p.add_argument("--schedule", choices=["linear", "cosine", "constant"],
                   help="how the learning rate falls after warm-up: in a line or a cosine curve to zero at the last "
                        "step, or not at all (default: the dataset's recipe's, else linear)")
    p.add_argument("--warmup-ratio", type=float, help="share of the training steps over which the learning rate "
                                                      "climbs from near zero to its peak (default: the dataset's "
                                                      "recipe's, else 0.05)")
    p.add_argument("--label-smoothing", type=float, help="share of each target spread evenly over all classes, a "
                                                         "single-label run's (default: the dataset's recipe's, else 0)")
    p.add_argument("--ema-decay", type=float, help="validate and keep a moving average of the weights with this "
                                                  "decay per step (e.g. 0.999; default 0: off)")
    p.add_argument("--class-weight", choices=["none", "balanced"],
                   help="balanced: weigh each class's texts in the loss by texts / (classes x the class's texts), as "
                        "scikit-learn does (multi-label: a positive weight per label) (default: the dataset's "
                        "recipe's, else none)")
    p.add_argument("--sampler", choices=["shuffle", "balanced"],
                   help="shuffle: every training text once per epoch, in a random order; balanced: draw every "
                        "class equally often (minority texts repeat) (default: shuffle)")
    p.add_argument("--patience", type=int, help="stop training after this many epochs without a better "
                                                "validation score (0: never stop early; default: the dataset's "
                                                "recipe's, else 3)")
    p.add_argument("--monitor", choices=["accuracy", "macro_f1", "micro_f1", "loss", "roc_auc", "average_precision"],
                   help="validation metric to select on (micro_f1: multi-label runs; roc_auc, average_precision: "
                        "ranking scores, for imbalanced classes, multi-label runs' macro averages; default: the "
                        "dataset's recipe's, else macro_f1, multi-label runs' loss)")
    p.add_argument("--bf16", action="store_true", help="train under bfloat16 autocast (16-bit floats where "
                                                       "safe): faster on CUDA GPUs and CPUs with AVX-512 BF16 or "
                                                       "AMX (slower on other CPUs), a little less precise")


def _add_tokenizer_args(p: argparse.ArgumentParser) -> None:
    """The flags of how texts become tokens: the tokenizer, its vocabulary and length, and the cleaning before it."""
    p.add_argument("--tokenizer", choices=["word", "bpe"],
                   help="word: whole words; bpe: words in pieces, which explanations show as 'good ##ness'")
    p.add_argument("--vocab-size", type=int, help="words kept at most (bpe: pieces merged up to, every character "
                                                  "seen kept beside them) (default: the dataset's recipe's, else "
                                                  "30000)")
    p.add_argument("--min-frequency", type=int, help="a word seen fewer times in the training texts is left out and "
                                                     "reads as <unk> (bpe: a pair seen fewer times is not merged) "
                                                     "(default: the dataset's recipe's, else 2)")
    from .recipes import FILE_SELF_ATTN_TOKENIZER

    p.add_argument("--max-len", type=int, help=f"tokens kept per text (default: the dataset's recipe's; on a file "
                                               f"{FILE_SELF_ATTN_TOKENIZER['max_len']} for a single-label self-attn, "
                                               f"the file recipe's, else 256)")
    p.add_argument("--truncation", choices=["head", "tail", "head_tail"],
                   help="what a longer text keeps: its start, its end, or (the default, head_tail) a quarter of "
                        "--max-len from its start and the rest from its end")
    p.add_argument("--no-lowercase", action="store_true", help="keep the texts' case (by default they are "
                                                               "lower-cased before tokenising)")
    p.add_argument("--no-unicode-nfc", action="store_true",
                   help="keep accents as the texts spell them (by default a letter and its combining accent, "
                        "e + U+0301, are composed into one, \u00e9: Unicode NFC)")
    p.add_argument("--no-split-cjk", action="store_true",
                   help="keep Chinese and Japanese text as written (by default each ideograph and kana is read as a "
                        "word, as those scripts put no spaces between words)")
    p.add_argument("--social-media", action="store_true",
                   help="read posts as tweet tokenizers do: URLs as the word httpurl, @mentions as @user, HTML "
                        "entities (&amp;) as their characters, each emoji as a word, and a letter typed four or more "
                        "times in a row as three (by default texts are read as written)")
    p.add_argument("--no-turkish-i", action="store_true",
                   help="lower-case a capital dotted \u0130 (Turkish) as Python does, to i + a combining dot U+0307 "
                        "(by default it is i, so \u0130stanbul and istanbul are one word)")
    p.add_argument("--strip-punctuation", action="store_true",
                   help="remove punctuation and every other symbol (emoji, # and @ among them) before tokenising")
    p.add_argument("--remove-stopwords", action="store_true",
                   help="remove scikit-learn's English stop words but not, no, nor, never and but before tokenising")
    p.add_argument("--lemmatize", action="store_true",
                   help="reduce English words to their lemma (simplemma) before tokenising")


def _add_sample_args(p: argparse.ArgumentParser) -> None:
    """The flags of which texts are read and held out: the validation split, samples of the splits, and the token
    cache they are read from."""
    p.add_argument("--val-fraction", type=float, help="validation share carved from train (default: 0.1)")
    p.add_argument("--split-seed", type=int,
                   help="seed of the validation split carved from train, and of a --max-train-examples sample "
                        "(default: the run's): runs sharing it hold out the same texts")
    p.add_argument("--hold-out", choices=("random", "latest"), default="random",
                   help="which training texts validate: a random stratified share (default), or the latest of "
                        "each class (multi-label: of all texts), for data whose test texts were written later: by "
                        "article id for 20newsgroups, by row order for your files (sort them by date)")
    p.add_argument("--max-train-examples", type=int,
                   help="train on a stratified sample of this size (default: every training text); word vectors "
                        "counted in the run (--embeddings count) read the same fraction of the dataset's unlabelled "
                        "texts, a sample the seed draws")
    p.add_argument("--max-test-examples", type=int,
                   help="test on a stratified sample of this size (default: every test text)")
    p.add_argument("--token-cache", action="store_true",
                   help="tokenise once into a memory-mapped cache and train from it (files are streamed)")
    p.add_argument("--token-cache-dir", help="where token caches live (default: $ATTNCLF_CACHE_DIR, "
                   "then ~/.cache/attnclf/tokens)")


def _add_text_source_args(p: argparse.ArgumentParser) -> None:
    """Where `vectors` and `pretrain` read unlabelled text from."""
    p.add_argument("--dataset", action="append", help="a dataset name (see `attnclf datasets`; repeatable)")
    p.add_argument("--data-dir", help=DATA_DIR_HELP)
    p.add_argument("--download", action="store_true", help=DOWNLOAD_HELP)
    p.add_argument("--file", action="append", help="a CSV / TSV / JSONL / Parquet file (its text column is read), or "
                   "plain UTF-8 text, one text per line (repeatable)")
    _add_text_column_arg(p, "the column a data --file's texts are in (default: text)")


def _add_model_args(p: argparse.ArgumentParser, default_model: str) -> None:
    """The data, training and tokenizer flags, and what builds the model: what `train` and `suspects` share."""
    _add_budget_args(p)
    p.add_argument("--model", default=default_model,
                   help=f"model name (see `attnclf models`; default: {default_model})")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="model config field, e.g. --set heads=8")
    p.add_argument("--seed", type=int, help="seeds the initial weights, dropout, shuffling and (unless --split-seed) "
                   "the validation split and a --max-train-examples sample (default: 0)")
    p.add_argument("--embeddings", metavar="FILE",
                   help="start the token embedding from these word vectors (word2vec/fastText .vec or GloVe text, "
                        "e.g. from `attnclf vectors`; their dimension must be the model's width); `count`: count "
                        "them first from the training texts and the dataset's unlabelled ones (the imdb recipe "
                        "does); `none`: not even the recipe's (a file named count or none: ./count)")
    p.add_argument("--embeddings-std", type=float,
                   help="standard deviation the vectors are scaled to (default: 4, chosen on SST-2 validation)")
    p.add_argument("--init-from", metavar="FOLDER",
                   help="start a self-attn model's encoder and token embedding from `attnclf pretrain`'s FOLDER "
                        "(its width, heads, layers, feed-forward, positions, attention window, tokenizer and "
                        "cleaning must be the pretraining's)")
    p.add_argument("--windows", action="store_true",
                   help="read long texts whole, as overlapping windows of --max-len tokens pooled across windows")
    p.add_argument("--window-stride", type=int, help="with --windows: tokens between window starts "
                   "(default: three quarters of --max-len)")
    p.add_argument("--max-windows", type=int, help="with --windows: windows per text at most (default: 8)")
    p.add_argument("--window-pooling", choices=["attention", "mean", "max"],
                   help="with --windows: how the windows' summaries combine (default: attention)")


def _hide_flags(p: argparse.ArgumentParser, names: set[str]) -> None:
    """Leave the flags of ``names`` (their dests) out of ``p``'s help and usage; they still parse."""
    for action in p._actions:  # (argparse has no public way to hide a flag already added)
        if action.dest in names:
            action.help = argparse.SUPPRESS


# What --quiet hides of a command that trains (train_run's progress): "no progress bars" left out the other two.
QUIET_HELP = "no progress bars, no line per epoch, no notes on the data (its warnings and the results still print)"


def _add_threads_and_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=int, help="PyTorch's and numpy's BLAS threads (default: one per core; 1 is "
                   "often faster for small models or on a busy machine); the same seed, data and --threads give "
                   "the same weights on the CPU")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)


def _add_format_args(p: argparse.ArgumentParser, default: str | None = None, **formats: str) -> None:
    """``--format`` with ``formats`` (name: what it prints; the first is the default), and ``--json`` for
    ``--format json``: explain took only the one and evaluate and faithfulness only the other, so the spelling
    learned on one command was "unrecognized arguments" on the next. ``default``: the default's description, where
    the command chooses it itself (``args.format`` None when not given)."""
    described = "; ".join(f"{name}: {what}" for name, what in formats.items())
    p.add_argument("--format", choices=list(formats), default=None if default else next(iter(formats)),
                   help=f"{described} (default: {default or next(iter(formats))})")
    p.add_argument("--json", action="store_const", dest="format", const="json", help="the same as --format json")


def _add_experiment_args(p: argparse.ArgumentParser, default_output: str) -> None:
    _add_budget_args(p)
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="base config field for every model that has it, e.g. --set d_model=64")
    p.add_argument("--seeds", type=int, nargs="+", default=3, metavar="N",
                   help="a count N, seeds 0..N-1 per cell (default: 3); or two or more seeds themselves, as train "
                        "--seeds takes them: --seeds 3 4 5")
    p.add_argument("--quick", action="store_true",
                   help="sanity budget: 1,500 training and 500 test texts, 3 epochs, 128 tokens")
    p.add_argument("--threads", type=int, help="PyTorch threads (default: one per core; 1 is often faster for "
                                               "small models or on a busy machine)")
    p.add_argument("--output", "-o", help=f"experiment directory (default: experiments/{default_output})")
    p.add_argument("--quiet", action="store_true", help="no line per finished cell")


def _device_flag(name: str) -> str:
    """--device's value, checked as argparse's choices would be but with cuda:N among them."""
    try:
        return check_device_name(name)
    except AttnclfError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _steps_flag(value: str) -> int | str:
    """--steps's value: a whole number of points, or auto, the default the help names (``check_steps`` checks the
    number's range, with the method's other options)."""
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number of points or auto, got {shown(value)}") from None


def _add_device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto", type=_device_flag,
                   help="where the model runs: auto (the default) takes CUDA, else Apple's MPS, else the CPU; cpu, "
                        "cuda, cuda:N (the GPU of index N) or mps")


# predict's and explain's --file. A plain file's blank lines are skipped, so its answers can be fewer than its lines:
# each answer carries its text. A data file's empty row is answered.
TEXTS_FILE_HELP = ("a UTF-8 file with one text per line (blank lines skipped), or a CSV / TSV / JSONL / Parquet file "
                   "whose --text-column holds them (an empty row answered too), or fastText's format (a line's "
                   "__label__NAME tokens left out), any but Parquet compressed too (.gz, .bz2, .xz); - reads stdin, "
                   "a text per line (a file named - is ./-)")
STEPS_HELP = ("points on the path from the baseline to the text at which integrated gradients takes gradients "
              "(Gauss-Legendre nodes), 1 to 1024, or auto (the default: 16, then halving the pieces of the path still "
              "off until within 1%% completeness and each token's estimated error within 3%% of the largest score, or "
              "1,008 gradients are spent)")
INFERENCE_BF16_HELP = ("predict under bfloat16 autocast: faster on CPUs with AVX-512 BF16 or AMX (slower on other "
                       "CPUs), probabilities within about 1e-3 of float32")
INFERENCE_THREADS_HELP = (
    "PyTorch threads for the model (default: one per core; 1 is steadier on a machine busy with other jobs)")


def _add_threshold_arg(p: argparse.ArgumentParser, applied: str) -> None:
    """--threshold CLASS=P of the commands that apply an operating point (predict, evaluate, serve); ``applied``: to
    what."""
    p.add_argument("--threshold", metavar="CLASS=P",
                   help=f"{applied}: CLASS (by name) wherever its probability is at least P (0 < P < 1), else "
                        f"the most probable other class; the confidence stays the predicted class's probability "
                        f"(find P with `evaluate --split validation --operating-points CLASS`); a multi-label run's "
                        f"label from P on, in place of its thresholds.json's, the other labels at theirs")


def _add_backend_args(p: argparse.ArgumentParser) -> None:
    """--backend, --int8, --bf16 and --threads of the commands that run a model either way (predict, serve)."""
    p.add_argument("--backend", choices=BACKENDS, default="torch",
                   help="torch (the default): PyTorch; onnx: the export of `attnclf export RUN_DIR` (onnxruntime, "
                        "no PyTorch)")
    p.add_argument("--int8", action="store_true", help="with --backend onnx: the int8-quantised graph")
    p.add_argument("--bf16", action="store_true", help=INFERENCE_BF16_HELP)
    p.add_argument("--threads", type=int, help="threads for the model, PyTorch's or onnxruntime's (default: one per "
                                               "core; 1 is steadier on a machine busy with other jobs)")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the lines of a text written in lines (a command's examples, to copy as typed); a text of one
    paragraph (a description) is wrapped to the terminal as argparse wraps it."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return super()._fill_text(text, width, indent)
        return argparse.HelpFormatter._fill_text(self, text, width, indent)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: the problem, a close match for a mistyped option, command or choice, and
    where help is, in place of the whole usage text (subcommands' parsers are of this class too).

    A prefix of an option is refused, not read as the option: a mistyped ``--text-colum`` is a mistake to name, and
    a prefix that names one option today would name another, or two, once an option is added."""

    def __init__(self, *args, formatter_class=_HelpFormatter, allow_abbrev=False, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, allow_abbrev=allow_abbrev, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}{self._suggestion(message)}; see `{self.prog} --help`\n")

    def _suggestion(self, message: str) -> str:
        import difflib

        if message.startswith("unrecognized arguments: "):
            typed = message.removeprefix("unrecognized arguments: ").split()[0].split("=")[0]
            known = [option for action in self._actions for option in action.option_strings]
            takes_texts = any(action.dest == "texts" for action in self._actions)
            # `predict RUN --text "a story"`: the texts are what follows the run, no option before them
            if typed in ("--text", "--texts") and takes_texts:
                return f' (texts are arguments: {self.prog} RUN_DIR "a text")'
            # `predict RUN "-great"`, or `predict RUN --threads 1 -- "-great"`, which Python 3.11's argparse refuses
            # (an unknown --word is a mistyped flag, told so below)
            if takes_texts and (typed == "--" or typed.startswith("-") and not typed.startswith("--")
                                and not difflib.get_close_matches(typed, known, n=1, cutoff=0.7)):
                return (f' (a text that starts with "-" goes after --, every option before RUN_DIR: {self.prog} '
                        f'--threads 1 RUN_DIR -- "-a text")')
        # argparse names the argument as it does here ("COMMAND", "--format") and quotes the value with repr
        elif choice := re.match(r"argument (.+?): invalid choice: '([^']*)'", message):
            name, typed = choice.groups()
            known = next((list(action.choices) for action in self._actions
                          if action.choices and name in ("/".join(action.option_strings), action.metavar, action.dest)),
                         [])
        else:
            return ""
        # A prefix of one option (refused as an abbreviation) names it best: `train --text` meant --text-column, to
        # which difflib prefers --set
        extended = [option for option in known if option.startswith(typed)] if typed.startswith("--") else []
        close = extended if len(extended) == 1 else difflib.get_close_matches(typed, known, n=1, cutoff=0.7)
        return f" (did you mean {close[0]}?)" if close else ""


def build_parser() -> argparse.ArgumentParser:
    """The parser of `attnclf` and its commands, each command's help ending in its ``EXAMPLES``.

    >>> build_parser().parse_args(["models", "--vocab-size", "5000"]).vocab_size
    5000
    """
    parser = _Parser(
        prog="attnclf", description="Train, evaluate, compare, explain and serve attention-based text classifiers.",
        epilog="Start with `attnclf demo`; every command has --help.")
    parser.add_argument("--version", action="version", version=f"attnclf {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # (in the order `attnclf --help` lists them)
    for add_command_parser in (_add_train_parser, _add_refit_parser, _add_evaluate_parser, _add_suspects_parser,
                               _add_calibrate_parser, _add_predict_parser, _add_datasets_parser, _add_models_parser,
                               _add_demo_parser, _add_explain_parser, _add_faithfulness_parser, _add_report_parser,
                               _add_compare_parser, _add_ablate_parser, _add_serve_parser, _add_vectors_parser,
                               _add_pretrain_parser, _add_export_parser):
        add_command_parser(sub)

    for name, command_parser in sub.choices.items():
        command_parser.epilog = "examples:\n" + "".join(f"  {example}\n" for example in EXAMPLES[name])
    return parser


def _add_train_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a model and test it", description="Train, validate and test one model.")
    _add_model_args(p, default_model="self-attn")
    p.add_argument("--output", "-o", help="run directory (default: runs/<model>-<dataset>)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the trained model (or --seeds members) already in --output: once this run's data "
                        "has loaded the earlier model moves to OUTPUT/earlier-model, deleted when this run finishes "
                        "(an interrupted replacement resumes, and keeps it; with --seeds every member's moves before "
                        "the first member trains, and back if that one stops before it starts); without --overwrite "
                        "such a folder is refused, so a repeated command cannot delete a finished run")
    p.add_argument("--resume", action="store_true",
                   help="continue the interrupted run in --output with its own settings, from its last checkpoint "
                        "(an epoch's end or, within one, a --checkpoint-minutes mark): give the command that started "
                        "it, or only --output; --epochs, --device, --threads and --checkpoint-minutes may change, "
                        "--data-dir and --train-file/--validation-file/--test-file say where its data lies now "
                        "(checked against the texts it recorded), flags that describe another run are refused (with "
                        "--seeds: finished members are kept, unfinished ones continue, new seeds train as the others "
                        "did)")
    p.add_argument("--checkpoint-minutes", type=float,
                   help="within an epoch, save a checkpoint to resume from every this many minutes of training "
                        "(0: only as epochs end; default: 10); it may change with --resume")
    _add_threads_and_quiet(p)
    p.add_argument("--no-report", action="store_true", help="skip report.html and plots/ at the end")
    p.add_argument("--seeds", type=int, nargs="+", metavar="SEED",
                   help="two or more seeds (not a count: --seeds 0 1 2 trains three): train one run per seed into "
                        "OUTPUT/seed-SEED and test their averaged probabilities (an ensemble; OUTPUT/ensemble.json); "
                        "with --resume, finished members are kept. One model: --seed")


def _add_refit_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("refit", help="retrain a validated run on its validation texts too, for its best epochs",
                       description="Retrain finished runs with their own settings and seed on their training texts and "
                                   "the ones they validated on, for as many epochs as each took to reach its best "
                                   "validation score (on the learning-rate schedule it followed then); then test. A "
                                   "refit has no texts left to validate on: the run it came from is its validated "
                                   "estimate. It is not averaged with runs that "
                                   "are not refits. An interrupted refit continues with the same command and "
                                   "--resume. Without a test split it scores nothing; export it with --check-file.")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="a finished run directory; several, each into RUN-refit; or a folder of `train --seeds`, "
                        "whose refitted members make an ensemble folder of their own (FOLDER-refit)")
    p.add_argument("--output", "-o", help="the refit's run directory, or a --seeds folder's refit folder "
                                                 "(default: RUN-refit, FOLDER-refit)")
    p.add_argument("--device", type=_device_flag, help="auto, cpu, cuda, cuda:N or mps (default: the run's)")
    p.add_argument("--threads", type=int, help="PyTorch threads (default: the run's)")
    p.add_argument("--no-report", action="store_true", help="skip report.html and plots/ at the end")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    p.add_argument("--overwrite", action="store_true", help="train again a refit that has finished")
    p.add_argument("--data-dir", help=RUN_DATA_DIR_HELP)
    p.add_argument("--resume", action="store_true",
                   help="keep the refits already finished and continue interrupted ones from their checkpoints")


def _add_evaluate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="score a trained model on a labelled test set (default: the run's own)",
                       description="Score trained runs on labelled texts: the run's own test split, unless "
                                   "--test-file or --dataset names others, or --split validation asks for the texts "
                                   "it validated on. Several runs, or a `train --seeds` folder, are scored as one "
                                   "ensemble: the average of their probabilities.")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="a run directory; several, or a folder of `train --seeds`, score their ensemble "
                        "(averaged probabilities)")
    _add_data_args(p, test_only=True)
    p.add_argument("--split", choices=["test", "validation"], default="test",
                   help="test (the default): --test-file, --dataset's test split, or the run's own; validation: "
                        "the texts the runs held out (an ensemble's runs must have held out the same: a shared "
                        "--split-seed, --hold-out latest, or the dataset's own validation split)")
    _add_format_args(p, terminal="the classification report, the confusion matrix and the headline metrics",
                     json="all metrics as one JSON object")
    p.add_argument("--errors", metavar="FILE",
                   help="also write the misclassified texts to FILE, its type by its suffix (.csv, .tsv, .jsonl, "
                        ".parquet), most confident first: each text's row in the file it was read from (from 1, "
                        "below the header: a --test-file, or the training file for a split carved from it), that "
                        "file's other columns (an id), the text "
                        "(several --text-column: those columns, as the file holds them), true_label, "
                        "predicted_label, confidence, true_label_probability and probability:LABEL per class; a "
                        "multi-label run's texts whose label set is wrong, most wrong labels first, with "
                        "true_labels, predicted_labels, missed_labels and extra_labels (|-joined in CSV and TSV) "
                        "instead of the four after the text")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --errors file")
    p.add_argument("--operating-points", metavar="CLASS",
                   help="also the precision, recall, F1 and number flagged of CLASS (by name; a multi-label run's "
                        "label, against its own column of the label sets) when flagged at a probability of at least "
                        "0.1, 0.2, ..., 0.9, and the thresholds reaching precision or recall 0.9 and 0.95; choose one "
                        "with --split validation (on test it is optimistic; a multi-label run: on a --test-file of "
                        "other texts), apply it with --threshold")
    _add_threshold_arg(p, "score the texts as predicted by one class's threshold")
    p.add_argument("--against", metavar="OTHER_RUN",
                   help="also score OTHER_RUN (a run, or a `train --seeds` folder) on the same texts and compare the "
                        "two text by text: the texts each alone gets right, and McNemar's exact test of whether the "
                        "difference could be chance (single-label runs of the same classes)")
    _add_device_arg(p)
    p.add_argument("--bf16", action="store_true", help=INFERENCE_BF16_HELP)
    p.add_argument("--threads", type=int, help=INFERENCE_THREADS_HELP)


def _add_suspects_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("suspects", help="rank training rows by how likely their label is wrong (out of fold)",
                       description="Split the training rows into K stratified folds, train the model on all folds but "
                                   "one and score the fold it left out; rank every row by the probability its "
                                   "model gave the row's own label, lowest first (a row the model memorised is "
                                   "never scored by it). On SST-2's 6,920 training sentences, 5 folds of boe with "
                                   "--threads 1 took 48.6 s (BENCHMARKS.md, 2026-11-28); on 10,000 IMDB reviews, "
                                   "4 min 28 s on a busy machine.")
    from .recipes import SUSPECTS_MODEL

    _add_model_args(p, default_model=SUSPECTS_MODEL)
    # Train's flags whose data suspects would leave unread (it ranks every training row) or cannot rank: refused in
    # one line when typed (training_rows), and left out of its help.
    _hide_flags(p, {"validation_file", "test_file", "max_train_examples", "max_test_examples", "multi_label",
                    "label_delimiter"})
    p.add_argument("--folds", type=int, default=5, help="K: each row is scored by a model trained on the other K-1 "
                                                        "folds (default: 5)")
    p.add_argument("--work-dir", metavar="FOLDER", help="where each fold's run trains, as FOLDER/fold-K (default: "
                                                       "runs/suspects-<model>-<dataset>)")
    p.add_argument("--output", "-o", metavar="FILE",
                   help="write every row, lowest given-label probability first, to a .csv, .tsv, .jsonl or .parquet "
                        "file: row, the training file's other columns (an id), text (several --text-column: those "
                        "columns, as the file holds them), given_label, "
                        "given_label_probability, predicted_label, margin (the given label's probability less the "
                        "likeliest other's), fold, probability:CLASS...")
    p.add_argument("--top", type=int, default=20, help="rows printed, likeliest mislabelled first (default: 20)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --output file, and train the folds already in --work-dir again")
    p.add_argument("--resume", action="store_true",
                   help="keep the finished folds in --work-dir and continue the others (the same command, "
                        "--resume added: the same rows, folds, seed and settings)")
    _add_threads_and_quiet(p)


def _add_calibrate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="fit a run's temperature on its validation texts, so its probabilities "
                                         "mean what they say",
                       description="Fit one temperature T on the validation texts RUN_DIR held out: the T whose "
                                   "softmax(logits / T) has the lowest log loss there (Guo et al., 2017; a "
                                   "multi-label run's: one T for every label's sigmoid(logit / T), by their binary "
                                   "log loss, each label's calibration error printed). It is "
                                   "written to RUN_DIR/temperature.json, which predict, evaluate, serve, explanations "
                                   "and the ONNX export apply from then on (an ensemble averages its members' "
                                   "calibrated probabilities: calibrate each). No prediction changes, only how sure "
                                   "each is (a multi-label run's thresholds move with its probabilities); a new "
                                   "training run in the folder removes it.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory that held out validation texts")
    p.add_argument("--data-dir", help=RUN_DATA_DIR_HELP)
    _add_device_arg(p)
    p.add_argument("--threads", type=int, help=INFERENCE_THREADS_HELP)


def _add_predict_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="label texts (arguments, --file, or stdin); JSON lines out",
                       description="Label texts with a trained run: texts typed after RUN_DIR, a --file, or stdin. "
                                   "Each answer is a JSON line on stdout (the text, its label, the confidence, each "
                                   "class's probability, and how many of its tokens the model did not know; a "
                                   "multi-label run's: its labels, every one reaching its threshold, and each "
                                   "label's probability), or a row of the --output file.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory, a `train --seeds` folder (its ensemble "
                                                       "answers), or with --backend onnx an export or a run holding "
                                                       "one")
    # default=[]: argparse requires a "*" positional without a default, and named the texts as missing; they may
    # come from --file or stdin instead
    p.add_argument("texts", nargs="*", default=[],
                   help="texts to label (else --file, or stdin when it is not a terminal)")
    p.add_argument("--file", help=TEXTS_FILE_HELP)
    _add_text_column_arg(p, "with a data --file (default: the column the run trained from)")
    p.add_argument("--attention", action="store_true",
                   help="include tokens and pooling attention (JSON lines on stdout: not with --output)")
    p.add_argument("--output", "-o",
                   help="write a file instead of stdout, its type by its suffix (.csv, .tsv, .jsonl, .parquet): each "
                        "row of a data --file with all its columns (else a text column), then predicted_label, "
                        "confidence (multi-label: predicted_labels), probability:LABEL per class, unknown_tokens "
                        "and tokens_read")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    _add_threshold_arg(p, "label each text by one class's threshold")
    _add_device_arg(p)
    _add_backend_args(p)


def _add_datasets_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("datasets", help="list datasets and whether they are available locally",
                       description="List the datasets --dataset takes, each with where it is: generated on the fly, "
                                   "found on this machine (and the folder), or not found locally (`attnclf train "
                                   "--dataset NAME --download` fetches a public one).")
    p.add_argument("--data-dir", help="folder holding dataset files, searched first (then $ATTNCLF_DATA_DIR, then "
                                      "~/.cache/attnclf)")


def _add_models_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list models with parameter counts",
                       description="List the models --model takes, each with its layers in one line and its number "
                                   "of trainable weights (parameters) for a given vocabulary and number of classes.")
    p.add_argument("--vocab-size", type=int, default=20000, help="vocabulary the counts are for (default: 20000)")
    p.add_argument("--num-classes", type=int, default=2, help="classes the counts are for (default: 2)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="config field, e.g. --set d_model=256")


def _add_demo_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="train self-attn on generated reviews and show what it attends to",
                       description="Train a small self-attn model on generated short reviews whose label turns on "
                                   "negation and contrast ('not bad', 'boring but brilliant'), test it, and show for "
                                   "a few texts where its attention looked and which words decided (occlusion). No "
                                   "download; under a minute on a CPU. Then try `attnclf explain runs/demo TEXT`.")
    p.add_argument("--output", "-o", default="runs/demo", help="run directory to write (default: runs/demo); an "
                                                               "earlier demo there is replaced, any other run refused")
    _add_device_arg(p)
    p.add_argument("--threads", type=int, default=1,
                   help="PyTorch threads (default 1: the demo model is too small to gain from more)")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)


def _add_explain_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="per-token explanations of predictions (terminal, JSON, HTML or PNG)",
                       description="Predict each text's label and score how much each of its tokens mattered to "
                                   "that answer, by one or more --method (occlusion by default: how much the "
                                   "class's probability drops when the token is removed); shown as coloured text, "
                                   "JSON lines, an HTML page, or PNG images for slides (--output NAME.png: one "
                                   "landscape image per text and method, and per text for --heads' maps; one image "
                                   "is NAME.png, more NAME-TEXT-METHOD.png and NAME-TEXT-heads.png, without TEXT for "
                                   "one text or METHOD for one method and no --heads).")
    p.add_argument("run_dir", metavar="RUN_DIR",
                   help="a run directory (of one model: explain one member of a `train --seeds` folder)")
    p.add_argument("texts", nargs="*", default=[],  # (not required: as predict's)
                   help="texts to explain (else --file, or stdin when it is not a terminal)")
    p.add_argument("--file", help=TEXTS_FILE_HELP)
    _add_text_column_arg(p, "with a data --file (default: the column the run trained from)")
    p.add_argument("--method",
                   help="attention, rollout, grad-input, integrated-gradients, occlusion; several comma-separated, "
                        "or all (every method the model supports: attention needs attention pooling, rollout "
                        "self-attention layers; a note names any left out) (default: occlusion; where the model "
                        "pools by attention, its weights are shown beside the scores, unless attention is among the "
                        "methods asked for)")
    p.add_argument("--target", help="class to explain (default: the predicted one; a multi-label run's: each label "
                                    "it predicts, or its most probable if none)")
    p.add_argument("--steps", type=_steps_flag, help=STEPS_HELP)
    p.add_argument("--heads", action="store_true", help="also every layer's and head's self-attention")
    _add_format_args(p, terminal="tokens coloured by score and the strongest listed",
                     json="a JSON line per text and method", html="a page of its own, with charts",
                     png="images for slides, needs --output",
                     default="terminal, or the format --output's suffix names: .html/.htm html, .json/.jsonl json, "
                             ".png png")
    p.add_argument("--output", "-o", help="write to this file instead of stdout (in the format its suffix names, "
                                          "unless --format); an existing one (or image, for png) is kept unless "
                                          "--overwrite")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output file (or images)")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="terminal colours: auto (the default) when stdout is a terminal and NO_COLOR is unset, "
                        "always or never")
    _add_device_arg(p)
    p.add_argument("--threads", type=int, help=INFERENCE_THREADS_HELP)


def _add_faithfulness_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("faithfulness", help="measure how faithful each explanation method is",
                       description="Deletion test against random deletion, rank agreement between methods, and "
                                   "the uniform-attention check, on a sample of test texts. Each run's result is "
                                   "also saved as RUN_DIR/faithfulness.json (the report shows it).")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories, each measured on its own")
    _add_data_args(p, test_only=True)
    p.add_argument("--examples", type=int, default=200, help="test texts sampled (default: 200)")
    # (--method too, as explain and report spell it: one spelling works on all three)
    p.add_argument("--methods", "--method", dest="methods",
                   help="attention, rollout, grad-input, integrated-gradients, occlusion; several comma-separated, "
                        "or all (default: all the model supports: attention needs attention pooling, rollout "
                        "self-attention layers)")
    p.add_argument("--steps", type=_steps_flag, help=STEPS_HELP)
    p.add_argument("--seed", type=int, default=0, help="sample and random-deletion seed (default: 0)")
    _add_format_args(p, terminal="a table per run, then a summary", json="every run's results as one JSON list")
    _add_device_arg(p)
    p.add_argument("--threads", type=int, help=INFERENCE_THREADS_HELP)


def _add_report_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write report.html (plots embedded) and plots/*.png for a run",
                       description="Write RUN_DIR/report.html (or --output), one page to read offline: the run's "
                                   "settings, its training curves, its test scores and confusion matrix, explained "
                                   "examples and, once measured, faithfulness; and its plots as RUN_DIR/plots/*.png. "
                                   "`attnclf train` writes it at the end unless --no-report.")
    p.add_argument("run_dir", metavar="RUN_DIR",
                   help="a run directory, which the plots (and, without --output, the report) are written into")
    p.add_argument("--output", "-o", help="write the page to this .html/.htm file instead (default: "
                                          "RUN_DIR/report.html); the plots still go into RUN_DIR/plots")
    p.add_argument("--method", help="method highlighting the examples: attention, rollout, grad-input, "
                                    "integrated-gradients or occlusion (default: occlusion; where the model pools "
                                    "by attention, its weights are shown beside any method but attention itself)")
    p.add_argument("--faithfulness", action="store_true", help="measure faithfulness too (slower)")
    p.add_argument("--examples", type=int, default=200, help="test texts for --faithfulness (default: 200)")
    p.add_argument("--data-dir", help=RUN_DATA_DIR_HELP)
    p.add_argument("--threads", type=int, help=INFERENCE_THREADS_HELP)
    _add_device_arg(p)


def _add_compare_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="train several models under one budget over seeds; table + plot",
                       description="Train each model with each seed on one dataset under the same budget, plus "
                                   "TF-IDF (1-2 grams) + logistic regression; write a Markdown and CSV table and "
                                   "a plot. Finished cells are reused when rerun with the same --output. How long: "
                                   "--dataset sst2-sentences --quick --threads 1 (5 models x 3 seeds) took 2 min 34 "
                                   "s (61 s of CPU) on a shared 2-core CPU (BENCHMARKS.md, 2026-11-28); the default "
                                   "budget and more models take longer.")
    _add_experiment_args(p, "compare-<dataset>")
    p.add_argument("--models", default="boe,lstm-mean,bilstm-attn,transformer-mean,self-attn",
                   help="comma-separated models, or all: every model `attnclf models` lists, the course's "
                        "baselines among them (default: boe,lstm-mean,bilstm-attn,transformer-mean,self-attn)")
    p.add_argument("--no-reference", action="store_true", help="skip the TF-IDF + logistic regression reference")


def _add_ablate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ablate", help="sweep model config axes one at a time over seeds; a table + plot per axis",
                       description="--dataset toy-order reruns the course's order experiment (mean vs positions "
                                   "vs self-attention, no positions, 2 heads) on its three 3-token sets, by "
                                   "training loss. Any other dataset sweeps --model's config one axis at a time: "
                                   "by default positional, pooling, heads, layers and pooling_score. How long: "
                                   "--dataset toy-order --threads 1 (3 sets x 5 variants x 3 seeds) took 2 min 5 s "
                                   "(88 s of CPU) on a shared 2-core CPU (BENCHMARKS.md, 2026-11-28); a real "
                                   "dataset's sweep trains a model per value and seed, far longer.")
    _add_experiment_args(p, "ablate-<dataset>")
    p.add_argument("--model", help="the model whose config is swept (default: self-attn)")
    p.add_argument("--axes", help="comma-separated built-in axes: positional,pooling,heads,layers,pooling_score "
                                  "(default: every one of them --model's config has)")
    p.add_argument("--sweep", action="append", metavar="FIELD=V1,V2",
                   help="sweep any config field, e.g. --sweep heads=1,2,4 (repeatable; replaces the default axes)")


def _add_serve_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a trained model over HTTP: /predict, /explain, /health, /model",
                       description="FastAPI + uvicorn; API docs at /docs. Binds 127.0.0.1 (this machine only) "
                                   "unless --host says otherwise. Requests over a limit get a 413 naming it; "
                                   "one past --max-connections in flight, a 503 with Retry-After. --backend onnx "
                                   "serves the run's ONNX export (`attnclf export`) on onnxruntime, faster and "
                                   "without PyTorch, and answers /explain with a 400: the graph gives no "
                                   "explanations. A multi-label run's /predict answers each text's set of labels, "
                                   "every label whose probability reaches its threshold (GET /model's), possibly "
                                   "none. SIGHUP (where there is one: not on Windows) loads RUN_DIR again and serves "
                                   "it without a restart, keeping the model served if that fails.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory or a `train --seeds` folder (its ensemble "
                                                       "answers); with --backend onnx, an export or a run holding one")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    p.add_argument("--max-batch", type=int, help="texts per /predict request (default: 64)")
    p.add_argument("--max-explain-batch", type=int, help="explanations per /explain request, texts x methods "
                                                          "(a multi-label run's: x each text's predicted labels, 1 "
                                                          "where none) (default: 8)")
    p.add_argument("--max-text-chars", type=int, help="characters per text (default: 20000)")
    p.add_argument("--max-body-bytes", type=int, help="bytes per request body (default: 1000000)")
    p.add_argument("--max-body-seconds", type=int, help="seconds a request body may take to arrive; a slower one "
                                                         "is answered 408, freeing its place (a request's head gets as "
                                                         "long, and an answer its client stops reading, then its "
                                                         "connection is closed) (default: 10)")
    p.add_argument("--max-connections", type=int, help="requests served at once (/health aside), half of them at "
                                                        "most /explain; more are answered 503 at once, with "
                                                        "Retry-After (default: 64)")
    p.add_argument("--stop-seconds", type=int, help="seconds a stop (SIGTERM, Ctrl-C) waits for requests in "
                                                     "flight, then answers them 503 with Retry-After; within the stop "
                                                     "timeout of what runs the service (Docker's: 10 s) (default: 5)")
    p.add_argument("--drain-seconds", type=int, help="seconds a SIGTERM first has /health answer 503 (readiness "
                                                      "lost), every other request still answered, so that a load "
                                                      "balancer or Kubernetes stops sending traffic; then the stop "
                                                      "of --stop-seconds (default: 0, none)")
    p.add_argument("--keep-alive-seconds", type=int, help="seconds an idle keep-alive connection is kept open; "
                                                           "behind a proxy or load balancer that reuses connections, "
                                                           "more than its idle timeout (nginx's, AWS ALB's: 60 s) "
                                                           "(default: 5)")
    p.add_argument("--root-path", default="", help="the path prefix a proxy serves the API under and strips "
                                                    "before passing requests on (e.g. /attnclf for "
                                                    "https://host/attnclf/): /docs links by it (default: none, "
                                                    "the host's root)")
    p.add_argument("--access-log", choices=ACCESS_LOGS, default="text",
                   help="a line on stdout per request answered (time, client, method, path, status, ms, a proxy's "
                        "X-Request-ID, an error's reason; never a text): text, json (one object a line, the start "
                        "and stop lines too, for a log collector) or off (a proxy in front logs them) (default: "
                        "text)")
    _add_threshold_arg(p, "answer /predict by one class's threshold (GET /model names it; /explain explains the "
                          "class so answered)")
    _add_device_arg(p)
    _add_backend_args(p)


def _add_vectors_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("vectors", help="word vectors from unlabelled text (PPMI + SVD), for `train --embeddings`",
                       description="Count which words occur near which in unlabelled text and factorise the "
                                   "counts (positive PMI, truncated SVD) into one vector per word, split as the "
                                   "word tokenizer splits. A dataset gives its training texts (never its test "
                                   "texts) and any unlabelled ones it ships (IMDB: 50,000 reviews).")
    _add_text_source_args(p)
    p.add_argument("--output", "-o", required=True, help="vectors file to write (word2vec text format); an "
                                                          "existing one is kept unless --overwrite")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --output file (runs trained from the old vectors then refuse to refit "
                        "or add members)")
    p.add_argument("--dim", type=int, help="dimensions: the width of the model that will use them (default: that "
                                          "of the first --dataset's default model: 64 for demo, imdb, sst2, "
                                          "sst2-sentences and 20newsgroups, and for --file alone, the width of "
                                          "self-attn on a single-label file; otherwise 128, self-attn's; other "
                                          "models and multi-label runs on files embed in 128: give --dim 128)")
    p.add_argument("--window", type=int, default=5, help="words either side that count as context (default: 5)")
    p.add_argument("--min-count", type=int, default=5, help="words seen fewer times get no vector (default: 5)")
    p.add_argument("--vocab-size", type=int, default=50000, help="at most this many words (default: 50000)")
    p.add_argument("--threads", type=int, help="threads of the SVD's BLAS (default: one per core); the same "
                   "--threads, texts and options give the same vectors")


def _add_pretrain_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pretrain", help="masked-token pretraining of a self-attn encoder, for `train --init-from`",
                       description="Teach the self-attn encoder to restore hidden words of unlabelled text (15% "
                                   "of tokens, as BERT), texts cut into pieces of --max-len tokens. The model is "
                                   "the --recipe dataset's (with --set), so `attnclf train --dataset D "
                                   "--init-from OUTPUT` can start from it. A dataset gives its training texts "
                                   "(never its test texts) and any unlabelled ones it ships. Each finished epoch "
                                   "is saved, and within an epoch every --checkpoint-minutes; the same command "
                                   "again continues an interrupted one.")
    _add_text_source_args(p)
    p.add_argument("--output", "-o", required=True, help="folder to write (encoder.safetensors, tokenizer.json, "
                                                          "pretrain.json; checkpoint.safetensors to resume from)")
    p.add_argument("--recipe", help="dataset whose default self-attn model and max length to pretrain (default: "
                                    "the first --dataset; for --file alone, the model `train --train-file` builds)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="model config field, e.g. --set layers=4")
    p.add_argument("--max-len", type=int, help="tokens per piece of text (default: the dataset recipe's, else 64)")
    p.add_argument("--embeddings", metavar="FILE", help="word vectors (e.g. from `attnclf vectors`) that the token "
                                                        "embedding starts from and keeps")
    p.add_argument("--embeddings-std", type=float, help="standard deviation the vectors are scaled to (default: 4)")
    p.add_argument("--epochs", type=int, help="passes over the texts (default: 1)")
    p.add_argument("--batch-size", type=int, help="pieces per step (default: 64)")
    p.add_argument("--lr", type=float, help="peak learning rate of AdamW (default: 1e-3)")
    p.add_argument("--vocab-size", type=int, help="at most this many words (default: 50000)")
    p.add_argument("--min-frequency", type=int, help="words seen fewer times read as <unk> (default: 5)")
    p.add_argument("--seed", type=int, help="seeds the initial weights, dropout, the order of the pieces and "
                                            "which words are hidden (default: 0)")
    p.add_argument("--checkpoint-minutes", type=float,
                   help="within an epoch, save the state to continue from every this many minutes of pretraining "
                        "(0: only as epochs end; default: 10); it may change when the command is run again")
    _add_device_arg(p)
    p.add_argument("--threads", type=int, help="PyTorch threads (default: one per core)")
    p.add_argument("--quiet", action="store_true", help="no progress bars, nor a line per epoch")


def _add_export_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export a trained model for inference without PyTorch (ONNX)",
                       description="Write RUN_DIR's model as ONNX with its tokenizer and labels (a multi-label "
                                   "run's: with its thresholds), and check that it predicts what PyTorch predicts "
                                   "(a multi-label run: the same label sets); `attnclf predict --backend onnx` and "
                                   "`attnclf serve --backend onnx` use it.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run directory to export")
    p.add_argument("--format", choices=["onnx"], default="onnx", help="only onnx for now (default: onnx)")
    p.add_argument("--output", "-o", help="export directory (default: RUN_DIR/onnx)")
    p.add_argument("--quantize", action="store_true",
                   help="also write an int8 graph (dynamic quantisation), its accuracy change measured")
    p.add_argument("--check-file", help="CSV/TSV/JSONL/Parquet file, or a text per line, to check parity on; "
                                        "its accuracies are recorded too where it holds labels "
                                        "(default: the run's own test split)")
    _add_text_column_arg(p, "with --check-file (default: the run's)")
    p.add_argument("--label-column", help="with --check-file (default: the run's)")
    p.add_argument("--check-examples", type=int, default=1000, help="texts checked at most (default: 1000)")
    p.add_argument("--data-dir", help=RUN_DATA_DIR_HELP)
    p.add_argument("--threads", type=int, help=INFERENCE_THREADS_HELP)


# What `attnclf COMMAND --help` ends with: what a newcomer would type (runs/demo is `attnclf demo`'s run, and the
# texts sent to it use its generated reviews' words: any other reads as <unk>, and its answer says little).
# tests/test_cli.py parses each with the parser above.
EXAMPLES = {
    "train": ("attnclf train --dataset imdb --download --output runs/imdb",
              "attnclf train --train-file reviews.csv --text-column review --label-column sentiment",
              "attnclf train --dataset imdb --seeds 0 1 2 --output runs/imdb-3"),
    "refit": ("attnclf refit runs/imdb",
              "attnclf refit runs/imdb-3    # a --seeds folder: into runs/imdb-3-refit"),
    "evaluate": ("attnclf evaluate runs/imdb --split validation --operating-points pos    # pos's precision vs recall",
                 "attnclf evaluate runs/demo --test-file more.csv --errors wrong.csv    # and its misclassified texts",
                 "attnclf evaluate runs/new --against runs/old    # better, or lucky? text by text, McNemar's test"),
    "suspects": ("attnclf suspects --train-file reviews.csv --output suspects.csv"
                 "    # every row, likeliest wrong first",
                 "attnclf suspects --train-file reviews.csv --output suspects.csv --resume    # after an interruption",
                 "attnclf suspects --dataset sst2-sentences --folds 10 --top 50 --threads 1"),
    "calibrate": ("attnclf calibrate runs/imdb",
                  "attnclf calibrate runs/imdb-3/seed-0    # each member of a --seeds folder"),
    "predict": ('attnclf predict runs/demo "the plot was brilliant" "the acting was not good"',
                "attnclf predict runs/demo --file texts.txt --threshold positive=0.9    # a text per line; "
                "positive only from 0.9 on",
                "attnclf predict runs/mine --file to_score.csv --output scored.csv    # each row with its prediction"),
    "datasets": ("attnclf datasets",
                 "attnclf datasets --data-dir ../shared/datasets"),
    "models": ("attnclf models",
               "attnclf models --vocab-size 50000 --set d_model=256"),
    "demo": ("attnclf demo",
             "attnclf demo --quiet --output runs/tour"),
    "explain": ('attnclf explain runs/demo "the acting was not good"',
                'attnclf explain runs/demo "the ending was not bad" --method all --heads -o slide.png'
                "    # slide-attention.png, ..., slide-heads.png",
                "attnclf explain runs/demo --file texts.txt --format html -o explained.html"),
    "faithfulness": ("attnclf faithfulness runs/demo",
                     "attnclf faithfulness runs/imdb --methods attention,occlusion --examples 100"),
    "report": ("attnclf report runs/demo",
               "attnclf report runs/imdb --faithfulness",
               "attnclf report runs/imdb --output pages/imdb.html    # the page there, the plots in runs/imdb/plots"),
    "compare": ("attnclf compare --dataset sst2-sentences --quick",
                "attnclf compare --train-file train.csv --test-file test.csv --models self-attn,boe"),
    "ablate": ("attnclf ablate --dataset toy-order",
               "attnclf ablate --dataset sst2-sentences --sweep heads=1,2,4 --quick"),
    "serve": ("attnclf serve runs/demo    # http://127.0.0.1:8000/docs",
              "attnclf serve runs/demo --backend onnx    # after `attnclf export runs/demo`",
              "attnclf serve runs/demo --threshold positive=0.9    # /predict says positive only from 0.9 on"),
    "vectors": ("attnclf vectors --dataset imdb --dataset sst2-sentences -o vectors/movies.vec",
                "attnclf vectors --file my_texts.txt -o vectors/mine.vec    # a text per line"),
    "pretrain": ("attnclf pretrain --dataset imdb --download -o pretrained/imdb",
                 "attnclf pretrain --file my_texts.txt --recipe sst2-sentences -o pretrained/mine"),
    "export": ("attnclf export runs/demo",
               "attnclf export runs/demo --quantize    # and an int8 graph"),
}


def _looks_like_option(arg: str) -> bool:
    """``--flag`` or ``-x``, not a text such as "-5 stars" (as argparse tells them apart)."""
    return len(arg) > 1 and arg[0] == "-" and (arg[1] == "-" or arg[1].isalpha())


class _Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler, `docker stop`, `kill`), stopped as Ctrl-C stops: checkpoints stay resumable."""


_signalled: list[KeyboardInterrupt] = []  # the stop a signal raised during this main(), if one did


def _terminate(signum, frame):
    _signalled.append(_Terminated())
    raise _signalled[-1]


def _interrupt(signum, frame):
    _signalled.append(KeyboardInterrupt())
    raise _signalled[-1]


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` names (default: the process's arguments) and return its exit status: 0, 2 after a
    one-line error, 130 or 143 after Ctrl-C or SIGTERM (with how to continue), 141 when stdout's reader hung up.

    >>> # main(["predict", "runs/demo", "not bad at all"])  # 0, its answer a JSON line on stdout
    """
    # A main() this one runs inside (a command or a script calling main) keeps its own record: a stop this one
    # reported is not the outer's, whose later bug would otherwise show as "interrupted".
    outer = _signalled[:]
    _signalled.clear()
    try:
        return _main_with_signal_handlers(argv)
    finally:
        _signalled[:] = outer


def _main_with_signal_handlers(argv: list[str] | None) -> int:
    import signal

    if threading.current_thread() is not threading.main_thread():  # (signals reach the main thread only)
        return _main_with_warnings_as_notes(argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    # Ctrl-C raises as Python's own handler does, and is remembered; a caller's own handler is left alone.
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    try:
        return _main_with_warnings_as_notes(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if previous_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous_int)


def _stopped(stop: KeyboardInterrupt, args: argparse.Namespace | None) -> int:
    """Say that a signal stopped the command, and how to continue it; the status a shell gives such a process."""
    terminated = isinstance(stop, _Terminated)
    print(f"attnclf: {'terminated' if terminated else 'interrupted'}{_resume_hint(args)}", file=sys.stderr)
    return 143 if terminated else 130


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = build_parser()
    typed = list(sys.argv[1:] if argv is None else argv)
    if not typed:  # `attnclf` alone: the commands, and where to start, rather than "COMMAND is required"
        parser.print_help(sys.stderr)
        parser.exit(2)
    _refuse_options_before_the_command(parser, typed)
    args, extras = parser.parse_known_args(argv)
    if extras:
        if getattr(args, "texts", None) is not None and not any(_looks_like_option(extra) for extra in extras):
            # `predict RUN --attention "text"`: argparse stops collecting texts at an option. (Not +=, which would
            # grow the parser's default list in place.)
            args.texts = args.texts + extras
        else:  # named by the command's own parser, which knows its options
            _subparser(args.command).error(f"unrecognized arguments: {' '.join(extras)}")
    args.argv = list(sys.argv[1:] if argv is None else argv)[1:]  # the command's own arguments, as typed
    _expand_home(args)
    return args


def _refuse_options_before_the_command(parser: argparse.ArgumentParser, typed: list[str]) -> None:
    """One line for a command's option typed before the command (`attnclf --threads 1 predict ...`), which argparse
    answered with "invalid choice: '1'", "COMMAND is required", or "--quiet (did you mean --quiet?)"."""
    if not typed or not _looks_like_option(typed[0]) or typed[0] in ("-h", "--help", "--version"):
        return
    flag = typed[0].split("=")[0]
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    # A command's name after an option that takes a value is that value (`--output demo train`). Any command's option:
    # the one it belongs to may be the later word (`--dataset models train`, where models has no --dataset).
    valued = {option for command in commands.values() for option, action in command._option_string_actions.items()
              if action.nargs != 0}
    at = next((i for i, arg in enumerate(typed) if arg in commands and typed[i - 1] not in valued), None)
    if at is not None and flag in commands[typed[at]]._option_string_actions:
        moved = shlex.join(["attnclf", typed[at], *typed[:at], *typed[at + 1:]])
        parser.error(f"{flag} is an option of the command: give it after {typed[at]!r}, `{moved}`")
    if at is None and any(flag in command._option_string_actions for command in commands.values()):
        parser.error(f"{flag} is an option of a command, and none is given: `attnclf COMMAND {flag} ...`")
    parser.error(f"unrecognized arguments: {typed[0]}")


# Options that name a file or folder: none may be given empty.
_PATH_OPTIONS = ("output", "data_dir", "token_cache_dir", "train_file", "validation_file", "test_file", "init_from",
                 "embeddings")


# Every option or argument that names a file or folder, as its dest.
_ALL_PATHS = (*_PATH_OPTIONS, "file", "errors", "check_file", "against", "work_dir", "run_dir", "run_dirs")


def _expand_home(args: argparse.Namespace) -> None:
    """A leading ``~`` of every path given, read as the shell reads it: the shell leaves it as typed in
    ``--output=~/x.csv`` (not a word of its own) and in quotes, where it made a folder named ``~`` in the working one.

    >>> args = argparse.Namespace(output="~/scored.csv", file="-")
    >>> _expand_home(args); args.output == os.path.expanduser("~/scored.csv"), args.file
    (True, '-')
    """
    for name in _ALL_PATHS:
        value = getattr(args, name, None)
        if isinstance(value, list):
            setattr(args, name, [os.path.expanduser(item) for item in value])
        elif isinstance(value, str):
            setattr(args, name, os.path.expanduser(value))


def _main_with_warnings_as_notes(argv: list[str] | None) -> int:
    # The library tells Python callers by warnings.warn (AttnclfWarning); a command prints them as its own notes,
    # one line each, not Python's "file:line: AttnclfWarning:" with the source line under it. Each once: a command
    # that trains run after run (train --seeds, compare) is warned by each, and the catch_warnings of scikit-learn's
    # metrics between them undo Python's once-a-place filter.
    with warnings.catch_warnings():
        others = warnings.showwarning
        noted: set[str] = set()

        def shown_as_note(message, category, *where, **more) -> None:
            if not issubclass(category, AttnclfWarning):
                others(message, category, *where, **more)
            elif str(message) not in noted:
                noted.add(str(message))
                print(f"note: {message}", file=sys.stderr)

        warnings.showwarning = shown_as_note
        return _run(argv)


def _check_shared_flags(args: argparse.Namespace) -> None:
    """The checks of flags many commands take, before the command runs: --threads, a path option given empty,
    --data-dir, and toy-order named outside ablate."""
    # Every command's --threads, by its flag, before anything loads (the library's checks name its field)
    check_threads(getattr(args, "threads", None), named=_flag)
    # An empty path (an unset $VAR) would be read as unset, a default, or as the working folder
    empty = next((name for name in _PATH_OPTIONS if getattr(args, name, None) == ""), None)
    if empty == "output":
        raise AttnclfError("--output is empty: name the folder (or file) to write to")
    if empty:
        raise AttnclfError(f"{_flag(empty)} is empty: name the file or folder")
    from .data.registry import data_dir_refusal

    if refusal := data_dir_refusal(getattr(args, "data_dir", None)):
        raise AttnclfError(refusal)
    _refuse_toy_order_outside_ablate(args)


def _run(argv: list[str] | None) -> int:
    args = None  # (until parsed: a Ctrl-C while the parser is built stops a command that has not started)
    try:
        args = _parse(argv)
        _check_shared_flags(args)
        return COMMANDS[args.command](args)
    except AttnclfError as exc:
        return _failed(str(exc), args)
    except KeyboardInterrupt as stop:
        return _stopped(stop, args)
    except BrokenPipeError:  # `attnclf predict ... | head`: the reader hung up; no traceback, and the status a
        # shell gives a command its pipe's SIGPIPE stopped (128 + 13), since whatever was writing did not finish.
        # Python flushes stdout once more at exit, into the same closed pipe; point it at /dev/null instead.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # a disk that fills, a folder made read-only mid-run: the file and the reason, one line
        where = exc.filename2 or exc.filename
        return _failed(f"{where + ': ' if where else ''}{exc.strerror or exc}", args)
    except Exception as exc:
        if is_out_of_memory(exc):
            asked = re.search(r"allocate (\d+) bytes", str(exc))
            print(f"attnclf: error: out of memory{f' (asked for {int(asked[1]) / 1e9:,.1f} GB)' if asked else ''}; "
                  f"{_what_to_lower(args.command)}", file=sys.stderr)
            return 2
        # A signal while a library still imports (the first second of a run) can surface as another error from its
        # half-initialised modules (scipy's "initialization failed", numpy's AttributeError, torch's RuntimeError):
        # still the stop. (In the out-of-memory handler's clause: a RuntimeError it re-raised skipped this one.)
        if not _signalled:
            raise
        return _stopped(_signalled[-1], args)


def _failed(problem: str, args: argparse.Namespace | None) -> int:
    """Say in one line on stderr why the command failed, and where a failed replacement (--overwrite) keeps the
    model it was replacing; the status 2."""
    replacing = getattr(args, "overwrite", False)
    print(f"attnclf: error: {problem}{_kept_model(args) if replacing else ''}", file=sys.stderr)
    return 2


def _what_to_lower(command: str) -> str:
    """The options of ``command`` that size what it holds in memory, as advice."""
    options = _subparser(command)._option_string_actions
    sizes = [flag for flag in ("--max-len", "--batch-size", "--steps", "--examples") if flag in options]
    sizes += ["the model's size (--set)"] if "--set" in options else []
    return f"lower {', '.join(sizes)}" if sizes else "give fewer or shorter texts at a time"


def _rerun_resuming(args: argparse.Namespace) -> str:
    """The command as typed, less --overwrite (which --resume refuses: it keeps what has finished), with --resume:
    what continues an interrupted `train --seeds`, `refit` or `suspects`, quoted for a shell.

    >>> _rerun_resuming(argparse.Namespace(command="refit", argv=["runs/a b", "--overwrite"], resume=False))
    "attnclf refit 'runs/a b' --resume"
    """
    resumed = [] if args.resume else ["--resume"]
    return shlex.join(["attnclf", args.command, *(arg for arg in args.argv if arg != "--overwrite"), *resumed])


def _kept_model(args: argparse.Namespace) -> str:
    """Where a `train` that stopped or failed keeps the finished models it was replacing (its own, or its
    --seeds members'), if it does."""
    if args.command != "train" or not args.output:
        return ""
    kept = kept_earlier_models(args.output, ensemble=bool(args.seeds))
    if not kept:
        return ""
    return (f"; the model it replaces is kept in {kept[0]}" if len(kept) == 1 else
            f"; the models they replace are kept in {', '.join(map(str, kept))}")


# Commands that an interruption leaves resumable by running them again, and what the second run keeps.
_RERUN_CONTINUES = {"compare": "keeps the finished cells and continues the others",
                    "ablate": "keeps the finished cells and continues the others"}


def _resume_hint(args: argparse.Namespace | None) -> str:
    """What the line saying a command was stopped adds: how to continue it, where it can be (``args.resume_hint``,
    where the command set one itself, else its command's hint); "" for a command that keeps nothing."""
    if hasattr(args, "resume_hint"):
        return args.resume_hint
    if args is None:  # (stopped while its arguments were parsed)
        return ""
    if args.command == "pretrain":
        return _pretrain_hint(args)
    if args.command == "suspects":
        return _suspects_hint(args)
    if args.command in _RERUN_CONTINUES:
        return f"; the same command again, `{shlex.join(['attnclf', args.command, *args.argv])}`, " \
               f"{_RERUN_CONTINUES[args.command]}"
    if args.command != "train" or not args.output:
        return ""
    return _train_hint(args)


def _train_hint(args: argparse.Namespace) -> str:
    """How to continue an interrupted `train --seeds` (its finished members kept), or a single run, which continues
    only if it got as far as a checkpoint of its own (a fresh run removes the folder's earlier checkpoint once its
    data has loaded); and where the models it was replacing are kept."""
    if args.seeds:
        from .ensemble import members_progress

        return (f"; `{_rerun_resuming(args)}` keeps the finished members and continues the "
                f"others ({members_progress(args.output, args.seeds)}){_kept_model(args)}")
    from .training.settings import checkpoint_kept, resume_start
    from .training.trainer import TrainConfig

    kept, start = _kept_model(args), resume_start(args.output)
    if start:
        within = checkpoint_kept(args.output)
        return (f"; {within + ': ' if within else ''}`attnclf train --resume --output {shlex.quote(args.output)}` "
                f"{start}{kept}")
    minutes = TrainConfig.checkpoint_minutes if args.checkpoint_minutes is None else args.checkpoint_minutes
    first = (f"{minutes:g} min into training, or as the first epoch ends {TrainConfig.checkpoint_seconds:g} s in" if
             minutes else f"as the first epoch ends {TrainConfig.checkpoint_seconds:g} s in")
    return f"; nothing was checkpointed yet (the first checkpoint comes {first}), so nothing is kept to resume " \
           f"from: train it again{kept}"


def _suspects_hint(args: argparse.Namespace) -> str:
    """The command that keeps an interrupted `suspects`' finished folds and continues the others
    (``_rerun_resuming``), with how far each fold got; nothing before its work folder is known."""
    if not hasattr(args, "folds_folder"):
        return ""
    from .training.suspects import folds_progress

    # (without --overwrite, the existing file at --output is refused: the folds are not what it waits on)
    output_kept = (f"; move {args.output} aside first (without --overwrite the command keeps it)"
                   if args.overwrite and args.output and Path(args.output).exists() else "")
    return (f"; `{_rerun_resuming(args)}` keeps the finished folds and continues the others "
            f"({folds_progress(args.folds_folder, args.folds)}){output_kept}")


def _pretrain_hint(args: argparse.Namespace) -> str:
    """What an interrupted `pretrain` kept, and that its own command again continues from there (or starts afresh)."""
    from .training.pace import CHECKPOINT_MINUTES
    from .training.pretrain import pretrain_kept

    again = f"the same command again, `{shlex.join(['attnclf', args.command, *args.argv])}`"
    if kept := pretrain_kept(args.output):
        return f"; {kept[0]}: {again}, {kept[1]}"
    minutes = CHECKPOINT_MINUTES if args.checkpoint_minutes is None else args.checkpoint_minutes
    first = f"{minutes:g} min into pretraining, or as the first epoch ends" if minutes else "as the first epoch ends"
    return f"; nothing was checkpointed yet (the first checkpoint comes {first}): {again}, starts it afresh"


if __name__ == "__main__":
    sys.exit(main())
