"""Refitting a validated run on its validation texts too, for the epochs it chose (``attnclf refit``)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Callable


from ..errors import AttnclfError, RunDirError
from ..rundir import (ENSEMBLE_FILE, TEMPERATURE_FILE, THRESHOLDS_FILE, is_resumable, read_config, read_history,
                      read_json, read_run_config, read_thresholds, refuse_if_held, run_dir_list)
from .cached import load_cached_data, run_tokenizer
from .run import RunResult, check_starts_unchanged, each_warning_once, train_or_continue
from .run_data import held_out_fingerprint, load_data, refuse_gone, texts_fingerprint
from .settings import COUNT_EMBEDDINGS, RunSettings, check_same_settings, resume_settings
from .trainer import best_epoch


def refit_runs(run_dirs: list[str | Path], output: str | None = None, *, resume: bool = False,
               overwrite: bool = False, device: str | None = None, threads: int | None = None, report: bool = True,
               progress: bool = True, data_dir: str | None = None,
               log: Callable[[str], None] = print) -> tuple[list[RunResult], dict | None]:
    """Refit runs (``refit_settings``), each into RUN-refit (one run: ``output``), or the members of one
    ``train --seeds`` folder into FOLDER-refit (or ``output``), which becomes an ensemble folder of its own.

    Every run is checked before any is trained. Returns each refit's result and, for a ``--seeds`` folder,
    the refits' ensemble test metrics (also in its ensemble.json). ``resume`` keeps finished refits and
    continues interrupted ones; a finished refit is otherwise refused unless ``overwrite``. ``data_dir``: where the
    runs' dataset lies now, looked in first (``refit_settings``). ``log`` gets the line saying what each refit does
    (and a note where its run is calibrated), and a token cache's progress where ``progress``.

    >>> # results, _ = refit_runs(["runs/a", "runs/b"])           # into runs/a-refit, runs/b-refit
    >>> # _, metrics = refit_runs(["runs/imdb-3"])                # a --seeds folder, into runs/imdb-3-refit
    >>> # refit_runs(["runs/a"], log=lambda line: print(line, file=sys.stderr))   # what it does said on stderr
    """
    from ..ensemble import write_ensemble_file
    from .distributed import from_environment

    folder, runs, refit_folder, outputs = _refits_of(run_dir_list(run_dirs), output)
    planned = [refit_settings(run, output=out, device=device, threads=threads, data_dir=data_dir)
               for run, out in zip(runs, outputs)]
    if from_environment().is_main:  # a refit another process is training is neither finished nor to continue here
        for written in ([refit_folder] if refit_folder else []) + [settings.output for settings in planned]:
            refuse_if_held(written)  # (the refits' folder too: their ensemble.json goes there)
    if not (resume or overwrite):  # as `train` refuses: a repeated command deletes no work, finished or checkpointed
        for earlier in (Path(settings.output) for settings in planned):
            if (earlier / "metrics.json").is_file():
                raise AttnclfError(f"{earlier} holds a finished refit; --resume keeps it (and continues the others), "
                                   f"--overwrite trains it again")
            if is_resumable(earlier):
                raise AttnclfError(f"{earlier} holds an unfinished refit; --resume continues it, --overwrite starts "
                                   f"again")
    elif resume:  # a refit kept or continued must be of the run as it is now, not as it was before it trained again
        for run, settings in zip(runs, planned):
            if (Path(settings.output) / "config.json").is_file():
                check_same_settings(resume_settings(settings.output, data_dir=data_dir), settings,
                                    f"it is a refit of {run} as it trained before; --overwrite refits it again")
                _refuse_other_texts(run, settings)
    # A token cache's texts are checked as its refit streams them into caches (reused later). The refit trained first
    # is checked last and trains on what its check loaded, which reads its files once; the others read theirs again
    # as they train (holding every run's labels and row indices until then would multiply the memory the cache bounds).
    to_train = [settings for settings in planned if settings.data.token_cache and
                not (resume and (Path(settings.output) / "metrics.json").is_file())]
    loaded = {}
    for settings in to_train[1:] + to_train[:1]:
        unfinished = resume and is_resumable(settings.output)
        loaded = {settings.output: load_cached_data(  # (an unfinished one's caches: its tokenizer's)
            settings, settings.train.seed, log=log if progress else lambda message: None,
            resume_with=run_tokenizer(settings.output, settings.tokenizer) if unfinished else None)}
    results = []
    with each_warning_once():  # (a --seeds folder's members, or runs of one task, refit on the same data)
        for run, settings in zip(runs, planned):
            settings.report = report
            log(f"{run}: refit on its validation texts too, for its best {settings.refit_of['epochs']} epoch(s) "
                f"(validation {settings.refit_of['monitor']} {settings.refit_of['value']:.4f}) -> {settings.output}")
            if (run / TEMPERATURE_FILE).is_file():  # (fitted to the run's weights, on the texts its refit learns)
                log(f"note: {run} is calibrated (temperature.json); its refit is not, and has no validation texts "
                    f"left to calibrate on")
            results.append(train_or_continue(settings, resume, progress, loaded.pop(settings.output, None),
                                             data_dir=data_dir))
    if refit_folder is None or not from_environment().is_main:
        return results, None
    seeds = read_json(folder / ENSEMBLE_FILE).get("seeds", [])
    return results, write_ensemble_file(refit_folder, [Path(s.output) for s in planned], seeds,
                                        device=planned[0].device, threads=threads, refitted=folder)


def _refuse_other_texts(run: Path, settings: RunSettings) -> None:
    """Refuse to keep or continue the refit ``settings`` describe (its config.json written) when its data no longer
    gives the texts it trained on: its run trained again on a changed file, with the same settings and validation
    record (which the settings compare), and the refit learned the earlier texts. A token-cache refit records no
    fingerprint of its texts to compare (its run's validation texts are checked as ``load_cached_data`` loads them)."""
    trained_on = read_config(settings.output).get("data", {}).get("train_sha256")
    if trained_on is not None and texts_fingerprint(load_data(settings.data, settings.train.seed).train) != trained_on:
        raise AttnclfError(f"{settings.output}: {settings.data.describe()} no longer gives the texts it was refitted "
                           f"on (the data changed since): it is a refit of {run} on other texts; --overwrite refits "
                           f"it again")


def refit_summary(results: list[RunResult], ensemble_metrics: dict | None) -> str:
    """What ``refit_runs`` returned, as `attnclf refit` closes with it: each refit's scores (or the note of one with
    no test texts) and its folder, then the scores of the refits' ensemble, or how to score several refits
    together; a refit without metrics (a torchrun rank other than 0: rank 0 reports) is left out.

    >>> # print(refit_summary(*refit_runs(["runs/a", "runs/b"])))   # ... score the refits together: attnclf ...
    """
    from ..evaluation.metrics import scores_text

    lines = []
    for result in results:
        if not result.metrics:
            continue
        lines.append(result.metrics["note"] if result.metrics["split"] is None else scores_text(result.metrics))
        lines.append(f"run directory: {result.run_dir}")
    if ensemble_metrics:
        lines.append(f"ensemble of {len(results)} refits ({results[0].run_dir.parent / ENSEMBLE_FILE}), averaged:")
        lines.append(scores_text(ensemble_metrics))
    elif len(results) > 1:
        lines.append(f"score the refits together: attnclf evaluate "
                     f"{' '.join(shlex.quote(str(r.run_dir)) for r in results)}")
    return "\n".join(lines)


def _refits_of(run_dirs: list[str], output: str | None) -> tuple[Path | None, list[Path], Path | None,
                                                               list[str | None]]:
    """What ``refit_runs`` refits: the `train --seeds` folder given (else None), the runs (its members, or the run
    directories), the folder their refits make an ensemble in (None for run directories), and each refit's output
    (None: RUN-refit); refused where they overlap, or would write over a run or an ensemble."""
    from ..ensemble import is_ensemble_dir, member_dirs

    folder = Path(run_dirs[0]) if is_ensemble_dir(run_dirs[0]) else None
    if (folder and len(run_dirs) > 1) or any(is_ensemble_dir(run) for run in run_dirs[1:]):
        raise AttnclfError("give one `train --seeds` folder, or run directories")
    if folder:  # its members' refits make an ensemble folder of their own, beside it
        runs, refit_folder = member_dirs(folder), Path(output or f"{folder}-refit")
        if refit_folder.resolve() == folder.resolve() or (refit_folder / "config.json").is_file():
            raise AttnclfError(f"{refit_folder} holds a run or the ensemble itself; give the refits another --output")
        if (refit_folder / ENSEMBLE_FILE).is_file():  # an earlier refit of this folder, or another ensemble
            for member in member_dirs(refit_folder):
                _check_refit_output(folder / member.name, member)
        outputs = [str(refit_folder / run.name) for run in runs]
    else:
        runs, refit_folder = [Path(run) for run in run_dirs], None
        if output and len(runs) > 1:
            raise AttnclfError("--output names one refit; several runs are each refitted into RUN-refit")
        outputs = [output] * len(runs)
    seen = set()
    for run in runs:
        if run.resolve() in seen:
            raise AttnclfError(f"{run} is given twice")
        seen.add(run.resolve())
    return folder, runs, refit_folder, outputs


def _check_refit_output(run_dir: Path, output: Path) -> None:
    """Refuse to write a refit over its own run, another run, or an ensemble: only over an earlier refit of it."""
    if output.resolve() == run_dir.resolve():
        raise AttnclfError(f"a refit of {run_dir} goes into another folder than the run it refits")
    if (output / ENSEMBLE_FILE).is_file():
        raise AttnclfError(f"{output} holds an ensemble (`train --seeds`); give the refit another --output")
    if (output / "config.json").is_file():
        earlier = read_config(output).get("settings", {}).get("refit_of")
        if not earlier or Path(earlier["run"]).resolve() != run_dir.resolve():
            raise AttnclfError(f"{output} holds another run; give the refit another --output (or remove it)")


def refit_settings(run_dir: str | Path, output: str | None = None, device: str | None = None,
                   threads: int | None = None, data_dir: str | None = None) -> RunSettings:
    """Settings that retrain a finished run on all its labelled texts, validation ones included, for the number
    of epochs after which it validated best (on the learning-rate schedule it followed), then test it as the run
    was tested.

    A validation split buys its epoch count and early stopping at the price of a tenth of the data; the
    refit pays it back once they are chosen (as scikit-learn's ``GridSearchCV(refit=True)`` does). Its
    accuracy cannot be validated: the run it refits is the validated one.

    A ``--token-cache`` run's texts are checked as its refit loads them (``load_cached_data``): the data is not read
    here. ``data_dir``: where the run's dataset lies now, looked in first (as `train --resume --data-dir`); the run
    checks it holds the texts it trained and validated on.

    >>> # result = train_run(refit_settings("runs/self-attn-imdb"))   # into runs/self-attn-imdb-refit
    """
    run_dir, config = Path(run_dir), read_run_config(run_dir)  # (checked a run, and its config read, once)
    saved = config["settings"]
    if saved["data"].get("refit"):
        raise AttnclfError(f"{run_dir} is a refit already; refit the run it refits ({saved['refit_of']['run']})")
    if not (run_dir / "metrics.json").is_file():
        raise RunDirError(f"{run_dir} has not finished training (no metrics.json); finish it with "
                          f"`attnclf train --resume --output {run_dir}`, then refit it")
    if not (run_dir / "history.jsonl").is_file():
        raise RunDirError(f"{run_dir} has no history.jsonl, so no epoch count to refit for")
    history = read_history(run_dir, needs=["epoch"])
    try:
        best = best_epoch(history, saved["train"]["monitor"])
    except AttnclfError as exc:
        raise AttnclfError(f"{run_dir}: {exc}") from None
    settings = resume_settings(run_dir, device=device, threads=threads, data_dir=data_dir)
    settings.output = output or f"{run_dir}-refit"
    _check_refit_output(run_dir, Path(settings.output))
    if settings.embeddings not in (None, COUNT_EMBEDDINGS) and not Path(settings.embeddings).is_file():
        raise AttnclfError(f"{run_dir} started from the word vectors {settings.embeddings}, which are gone (or "
                           f"relative to another folder); a refit starts from the same ones")
    check_starts_unchanged(config, str(run_dir))  # a refit starts where its run started
    # Its texts must still be there to learn: a changed file or split would refit on other data. (Loaded as the run
    # loaded them: `refit` is not set yet, which would join validation into train.)
    # (Every refit reads them, a token-cache run's and an older run's without fingerprints too)
    refuse_gone(str(run_dir), settings.data, "train_file", "validation_file", "test_file")
    held_out, trained_on = held_out_fingerprint(config), config.get("data", {}).get("train_sha256")
    if (held_out is not None or trained_on is not None) and not settings.data.token_cache:
        splits = load_data(settings.data, settings.train.seed)
        changed = (settings.data.describe() if trained_on not in (None, texts_fingerprint(splits.train)) else
                   settings.data.describe_held_out(read_json(run_dir / "labels.json"), splits.train.label_names)
                   if held_out not in (None, texts_fingerprint(splits.validation)) else None)
        if changed:
            raise AttnclfError(f"{changed} no longer gives the texts {run_dir} trained and validated on (the data or "
                               f"its split changed since): a refit would learn other data")
    # The schedule each epoch followed: `train --resume --epochs N` stretches it from then on. Runs from before
    # history recorded it are taken to have followed their final one, the settings' epochs.
    final = settings.train.schedule_epochs or settings.train.epochs
    schedules = {record.get("schedule_epochs", final) for record in history if record["epoch"] <= best["epoch"]}
    if len(schedules) > 1:
        raise AttnclfError(f"{run_dir} was resumed with other --epochs before epoch {best['epoch']}, the one it kept, "
                           f"so its learning rate followed schedules of {' and '.join(map(str, sorted(schedules)))} "
                           f"epochs; a refit follows one: train it again with --epochs N from the start to refit it")
    monitor = settings.train.monitor
    settings.data.refit = True
    settings.train.schedule_epochs = schedules.pop()
    settings.train.epochs, settings.train.patience = best["epoch"], 0
    settings.refit_of = {"run": str(run_dir.resolve()), "epochs": best["epoch"], "monitor": monitor,
                         "value": best[f"val_{monitor}"], "validation_sha256": held_out}
    if settings.data.multi_label:
        # (checked here, as loading the run checks them: the refit predicts at them, its own file holds them)
        thresholds = read_thresholds(run_dir, read_json(run_dir / "labels.json"))
        if thresholds is None:
            raise RunDirError(f"{run_dir / THRESHOLDS_FILE}: missing")
        settings.refit_of["thresholds"] = thresholds
    return settings
