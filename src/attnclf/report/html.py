"""``report.html``: one self-contained page per run, readable offline, and its PNGs in ``plots/``.

Sections: the run at a glance; training curves and the validation metric history; the confusion matrix, ROC and
precision-recall curves and per-class table on the test set; the most confident correct and incorrect test examples
with their tokens highlighted by an explanation method (a multi-label run's: the surest exactly right label sets and
the most wrong ones, each predicted label explained); self-attention per layer and head for one example; and the
faithfulness measurements (a multi-label run's, per explained label), when they have been made
(``faithfulness=True``, or a ``faithfulness.json`` newer than the weights, written by ``attnclf faithfulness``).

>>> # write_report("runs/demo")  # -> runs/demo/report.html
>>> # write_report("runs/demo", output="pages/demo.html")  # the page there, the plots still in runs/demo/plots
"""

from __future__ import annotations

import html
import time
from pathlib import Path

import numpy as np

from ..data.base import TextDataset
from ..data.multilabel import multi_hot
from ..data.registry import is_toy_set
from ..data.files import refuse_compressed_output
from ..errors import AttnclfError, RunDirError, first_few, shown
from ..evaluation.metrics import expected_calibration_error, log_loss, pick_examples, pick_label_set_examples
from ..evaluation.multilabel import binary_cross_entropy, label_calibration_errors, label_cells
from ..explain.explanation import explain
from ..explain.faithfulness import (AOPC_DEFINITION, FAITHFULNESS_FILE, FaithfulnessResult,
                                    measure_faithfulness)
from ..explain.methods import DEFAULT_METHOD, METHODS, available_methods, left_out
from ..explain.render import branches, legend_html, page, png_img, tokens_html, unknown_note_html
from ..models.ngrams import bounded_buckets
from ..models.windows import window_config
from ..rundir import (adding_to_run, atomic_write_bytes, atomic_write_json, read_config, read_history,
                      read_json, read_metrics, refuse_estimator_run, write_output_file)
from ..training.trainer import best_epoch, describe_kept
from . import plots

PLOTS = ("training", "metric_history", "confusion_matrix", "roc", "precision_recall", "reliability",
         "self_attention", "deletion")  # plots/<name>.png
_CURVES = ("epoch", "train_loss", "train_accuracy")  # what the training curves draw of every epoch


def _interval(bounds: list[float] | None) -> str:
    """`` (95% confidence interval 0.8825-0.9152)``, a score's as metrics.json holds it; "" for a run scored
    before intervals were (or for none)."""
    return "" if bounds is None else " (95% confidence interval {:.4f}-{:.4f})".format(*bounds)


def write_report(run_dir: str | Path, *, classifier=None, test: TextDataset | None = None,
                 test_probabilities: np.ndarray | None = None, method: str | None = None,
                 faithfulness: bool = False, faithfulness_examples: int = 200, device: str = "auto",
                 data_dir: str | None = None, output: str | Path | None = None) -> Path:
    """Write ``report.html`` (or the page ``output`` names) and ``plots/*.png`` into ``run_dir``; returns the page's
    path.

    ``classifier`` and ``test`` default to the run's own model and test split
    (``train`` passes the ones it has in memory, with ``test_probabilities``,
    so the test set is not predicted twice). ``method`` highlights the
    examples (default: ``occlusion``; a model that pools by attention shows its
    weights beside any other method's scores). ``faithfulness=True`` measures it on
    ``faithfulness_examples`` test texts and saves ``faithfulness.json``. ``data_dir``: look for the run's dataset
    there first, as ``run_test_data`` does (where it moved since the run trained). The run is held meanwhile
    (``adding_to_run``): one another process is writing (training on) is refused in one line. An ``output`` that is
    a folder, or named other than ``.html``/``.htm`` (compressed, say), is refused in one line before any work.

    >>> # write_report("runs/demo", method="occlusion", faithfulness=True, output="pages/demo.html")
    """
    if output is not None:
        _refuse_page_output(Path(output))
    with adding_to_run(run_dir) as run_dir:
        return _write_report(run_dir, classifier, test, test_probabilities, method, faithfulness,
                             faithfulness_examples, device, data_dir, output)


def _refuse_page_output(output: Path) -> None:
    """A one-line error for a page ``write_report`` could not write to ``output``, or that would not open as one."""
    if output.is_dir():
        raise AttnclfError(f"{output} is a folder; give --output a file name")
    refuse_compressed_output(output, "report")
    if output.suffix.lower() not in (".html", ".htm"):
        raise AttnclfError(f"{output}: --output names the page: give it an .html or .htm name, not "
                           f"{shown(output.suffix)}")


def _write_report(run_dir: Path, classifier, test: TextDataset | None, test_probabilities: np.ndarray | None,
                  method: str | None, faithfulness: bool, faithfulness_examples: int, device: str,
                  data_dir: str | None, output: str | Path | None) -> Path:
    """``write_report``'s work, in a run it holds."""
    from ..classifier import Classifier

    config, metrics, history = _finished_run(run_dir)
    if classifier is None:
        classifier = Classifier.load(run_dir, device=device)
    if test is None:
        test = _run_test(run_dir, config, metrics, classifier, data_dir)
    windowed = window_config(classifier.model) is not None  # explanation methods read one token sequence
    supported = [] if windowed else available_methods(classifier.model)
    method = _checked_method(method, supported, windowed, faithfulness)

    probabilities = classifier.predict_proba(test.texts) if test_probabilities is None else test_probabilities
    has_heads = "rollout" in supported
    kept = _kept_epoch(config, history)
    # (a multi-label run's measured per explained label, as `attnclf faithfulness` measures it)
    result = None if windowed else _faithfulness(run_dir, classifier, test, faithfulness, faithfulness_examples)
    if classifier.multi_label:
        label_sets = multi_hot(test.labels, len(classifier.label_names))
        examples = pick_label_set_examples(test.texts, test.labels, probabilities, classifier.thresholds,
                                           classifier.label_names)
        by_text = [] if windowed else _explain_label_sets(classifier, examples, method, has_heads)
        explanations = [e for explained in by_text for e in explained]
    else:
        label_sets = None
        examples = pick_examples(test.texts, test.labels, probabilities, classifier.label_names)
        explanations = [] if windowed else _explain_examples(classifier, examples, method, has_heads)
    heads_shown = explanations[0] if has_heads and explanations else None
    images = _written_plots(run_dir / "plots", _figures(classifier, metrics, history, kept, test, probabilities,
                                                        label_sets, result, heads_shown))

    on_training = is_toy_set(config["settings"]["data"].get("dataset"))  # (a toy set's scores)
    if classifier.multi_label:
        details = [_multilabel_test_section(metrics, test)
                   + _label_calibration(images, label_sets, probabilities, classifier.temperature,
                                        classifier.label_names),
                   _WINDOWED_EXAMPLES if windowed else _label_set_examples_section(by_text, examples, method)]
    else:
        details = [_test_section(images, metrics, classifier.label_names, test, on_training)
                   + _calibration(images, test.labels, probabilities, classifier.temperature,
                                  classifier.label_names, kept and kept.get("val_predicted_only")),
                   _WINDOWED_EXAMPLES if windowed else _examples_section(explanations, examples, method)]
    details += [_heads_section(images, explanations),
                _WINDOWED_FAITHFULNESS if windowed else _faithfulness_section(images, result, left_out(supported))]
    sections = [_overview(run_dir, config, metrics, _kept_note(config, history) if kept else None, on_training),
                _training_section(images, classifier.multi_label), *details]
    return _written_page(run_dir, config, sections, output)


def _written_page(run_dir: Path, config: dict, sections: list[str], output: str | Path | None) -> Path:
    """The page of ``sections``, signed with the attnclf that trained the run and the time, written to ``output``
    (None: the run's report.html); returns its path."""
    body = "\n".join([
        *sections,
        f'<p class="note">Written by attnclf {html.escape(config.get("versions", {}).get("attnclf", "?"))} '
        f"on {time.strftime('%Y-%m-%d %H:%M')}.</p>",
    ])
    encoded = page(f"attnclf report: {run_dir.name}", body).encode("utf-8")
    if output is None:
        atomic_write_bytes(run_dir / "report.html", encoded)
        return run_dir / "report.html"
    return write_output_file(output, encoded)  # (its folder made if needed, as explain's and predict's are)


def _finished_run(run_dir: Path) -> tuple[dict, dict, list[dict]]:
    """The config, metrics (with their tables) and history of a run that has finished training and scored texts;
    a one-line error for one that has not."""
    if not (run_dir / "metrics.json").is_file():
        raise RunDirError(f"run directory {run_dir} has no metrics.json: training has not finished")
    config = read_config(run_dir)
    metrics = read_metrics(run_dir, tables=True)
    history = read_history(run_dir, needs=_CURVES)
    _refuse_unscored(run_dir, config, metrics)
    return config, metrics, history


def _run_test(run_dir: Path, config: dict, metrics: dict, classifier, data_dir: str | None) -> TextDataset:
    """The test texts the run was scored on, read again (from ``data_dir`` first), refused in one line where they
    are gone or changed since."""
    from ..training.run_data import run_test_data

    test = run_test_data(config, classifier.label_names, data_dir=data_dir,
                         if_moved=f"; report takes no test file: put it back there to report on the run, or score "
                                  f"the run on it where it is now with `attnclf evaluate {run_dir} --test-file "
                                  f"NEW_PATH`")
    _refuse_changed_test(run_dir, config, metrics, test)
    return test


def _checked_method(method: str | None, supported: list[str], windowed: bool, faithfulness: bool) -> str:
    """The explanation method the examples are highlighted by (None: the default), refused in one line where the
    model does not support it, or where ``faithfulness`` is asked of a windowed run."""
    method = DEFAULT_METHOD if method is None else method  # ("" is no method, not the default)
    if faithfulness and windowed:
        raise AttnclfError("report --faithfulness measures runs without --windows only, for now: the explanation "
                           "methods read one token sequence where a windowed run reads several")
    if not windowed and method not in supported:
        raise AttnclfError(f"method {method!r} does not apply to this model; it supports {', '.join(supported)}")
    return method


def _figures(classifier, metrics: dict, history: list[dict], kept: dict | None, test: TextDataset,
             probabilities: np.ndarray, label_sets: np.ndarray | None, result: FaithfulnessResult | None,
             heads_shown) -> dict:
    """The page's figures by their name in ``PLOTS`` (None: not drawn): a multi-label run's reliability is drawn per
    (text, label) cell of ``label_sets``, a single-label run's test set also as confusion matrix, ROC and
    precision-recall curves; the self-attention maps of ``heads_shown``, an explanation (None: not drawn)."""
    figures = {"training": plots.training_curves(history, kept and kept["epoch"], classifier.multi_label)
               if history else None,
               "metric_history": plots.metric_history(history)}
    if result is not None:
        figures["deletion"] = plots.deletion_figure({name: r.drops for name, r in result.methods.items()},
                                                    result.random_drops, result.multi_label)
    if classifier.multi_label:
        figures["reliability"] = plots.reliability_figure(*label_cells(label_sets, probabilities), label_cells=True)
    else:  # (one class per text)
        figures |= {"confusion_matrix": plots.confusion_matrix_figure(metrics["confusion_matrix"],
                                                                      classifier.label_names),
                    "roc": plots.roc_figure(test.labels, probabilities, classifier.label_names),
                    "precision_recall": plots.precision_recall_figure(test.labels, probabilities,
                                                                      classifier.label_names),
                    "reliability": plots.reliability_figure(test.labels, probabilities)}
    if heads_shown is not None:
        figures["self_attention"] = plots.head_maps_figure(heads_shown.self_attentions, heads_shown.tokens,
                                                             heads_shown.attention_window)
    return figures


def _refuse_unscored(run_dir: Path, config: dict, metrics: dict) -> None:
    """A one-line error for a run that scored no texts (saved by the scikit-learn estimator, or a refit of data
    without a test split): it has none of the scores the page shows, whatever test texts it is given; and report
    takes no test file."""
    if metrics.get("split", "test") is not None:
        return
    refuse_estimator_run(config, "test texts to report on (report takes no test file; `attnclf evaluate RUN_DIR "
                                 "--test-file FILE` scores it)")
    raise RunDirError(f"{run_dir} is a refit that scored no texts (its data has no test split, and it trained on "
                      f"every labelled one): nothing to report; {config['settings']['refit_of']['run']} estimates "
                      f"its accuracy, and `attnclf evaluate {run_dir} --test-file FILE` scores it on other texts")


def _written_plots(folder: Path, figures: dict) -> dict[str, bytes]:
    """Each drawn figure of ``figures`` (None: not drawn) as PNG bytes, written into ``folder`` as NAME.png, which the
    page embeds; a plot of ``PLOTS`` not drawn this time is removed: an earlier report's would contradict this one."""
    images = {name: plots.png_bytes(figure) for name, figure in figures.items() if figure is not None}
    folder.mkdir(exist_ok=True)
    for name in PLOTS:
        if name in images:
            atomic_write_bytes(folder / f"{name}.png", images[name])
        else:
            (folder / f"{name}.png").unlink(missing_ok=True)
    return images


def _refuse_changed_test(run_dir: Path, config: dict, metrics: dict, test: TextDataset) -> None:
    """The report shows metrics.json's per-class table and confusion matrix beside curves, calibration and examples
    drawn from the test texts read now: if those changed since the run was scored, the page would mix two data sets.
    (The validation split, which a run without test data is scored on, ``run_test_data`` checks itself; a token-cache
    run records the key of its test data's content instead of the texts' fingerprint.)"""
    from ..training.cached import current_test_key
    from ..training.run_data import texts_fingerprint
    from ..training.settings import DataSettings

    recorded, settings = config.get("data", {}), config["settings"]
    if metrics.get("split", "test") != "test":
        return
    if recorded.get("test_sha256") is not None:
        changed = texts_fingerprint(test) != recorded["test_sha256"]
    elif recorded.get("test_key") is not None:
        changed = current_test_key(DataSettings(**settings["data"]), settings["train"]["seed"]) != recorded["test_key"]
    else:  # (runs from before either was recorded)
        changed = False
    if changed:
        data = settings["data"]
        where = Path(data["test_file"]).name if data.get("test_file") else data.get("dataset") or "the test split"
        raise RunDirError(f"{run_dir}: {where} no longer gives the test texts metrics.json scored (the data changed "
                          f"since the run was trained), so a report would mix the two; `attnclf evaluate {run_dir} "
                          f"--test-file FILE` scores the run on other texts")


def _faithfulness(run_dir: Path, classifier, test: TextDataset, measure: bool,
                  examples: int) -> FaithfulnessResult | None:
    saved = run_dir / FAITHFULNESS_FILE
    if measure:
        result = measure_faithfulness(classifier, test, examples=examples)
        atomic_write_json(saved, result.to_dict())
        return result
    # A measurement of older weights describes another model (and one at another temperature, checked below).
    if saved.is_file() and saved.stat().st_mtime >= (run_dir / "model.safetensors").stat().st_mtime:
        data = read_json(saved)
        if data.get("aopc_definition", 1) != AOPC_DEFINITION:  # measured by an earlier deletion test: not comparable
            return None
        if data.get("temperature", 1.0) != classifier.temperature:  # calibrated, or undone (deleted), since
            return None
        try:
            return FaithfulnessResult.from_dict(data)
        except (KeyError, TypeError) as exc:
            raise RunDirError(f"{saved}: not a faithfulness result this attnclf reads ({exc!r}); "
                              "measure again with `attnclf faithfulness`") from None
    return None


def _image(images: dict[str, bytes], name: str, alt: str) -> str:
    return png_img(images[name], alt) if name in images else ""


def _kept_epoch(config: dict, history: list[dict]) -> dict | None:
    """The history line of the epoch whose weights model.safetensors holds, which the test scores are of: the first
    with the best validation metric (a refit, which validates on nothing, keeps its last); None if none can be told."""
    if not history:
        return None
    if config["settings"].get("refit_of"):
        return history[-1]
    try:
        return best_epoch(history, config["settings"]["train"]["monitor"])
    except (AttnclfError, KeyError):
        return None


def _overview(run_dir: Path, config: dict, metrics: dict, kept_note: str | None, on_training: bool = False) -> str:
    model, data = config["model"], config.get("data", {})
    settings = config["settings"]
    dataset = settings["data"].get("dataset") or Path(settings["data"].get("train_file") or "?").name
    auc, ap = metrics.get("roc_auc"), metrics.get("average_precision")
    multi = metrics.get("multi_label", False)
    rows = [("model", f"{model['name']} ({model['parameters']:,} parameters)"), *_ngram_rows(config),
            ("dataset", f"{dataset} (multi-label)" if multi else dataset),
            ("examples (train / validation / test)", f"{data.get('train_examples', '?')} / "
             f"{data.get('validation_examples', '?')} / {data.get('test_examples', '?')}"),
            *([("refit of", f"{refit['run']}: its {refit['epochs']} epoch(s), on its validation texts too")]
              if (refit := settings.get("refit_of")) else []),
            *([("weights kept", kept_note)] if kept_note else []),
            *([("micro-F1", f"{metrics['micro_f1']:.4f}")] if multi else []),
            (f"{metrics.get('split', 'test')} {'subset ' if multi else ''}accuracy"
             + (" (on the training texts: a toy set tests on them)" if on_training else ""),
             f"{metrics['accuracy']:.4f}"
             + _interval(metrics.get("subset_accuracy_ci95" if multi else "accuracy_ci95"))),
            ("macro-F1", f"{metrics['macro_f1']:.4f}" + _interval(metrics.get("macro_f1_ci95"))),
            ("ROC AUC" + (" (macro over labels)" if multi else ""),
             "n/a" if auc is None else f"{auc:.4f}" + _interval(metrics.get("roc_auc_ci95"))),
            # (runs scored before average precision was measured lack it)
            *([("average precision" + (" (macro over labels)" if multi else ""), "n/a" if ap is None else f"{ap:.4f}")]
              if "average_precision" in metrics else []),
            ("training time", f"{metrics.get('train_seconds', float('nan')):.1f} s"),
            ("run directory", str(run_dir))]
    # What training warned of the data on stderr: overlapping texts flatter the scores this page shows.
    lines = data.get("warnings", [])
    if not (isinstance(lines, list) and all(isinstance(line, str) for line in lines)):
        raise RunDirError(f"{run_dir / 'config.json'}: data.warnings is not a list of lines (was the file edited?)")
    warned = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    warnings = f'<p><b>Training warned about the data:</b></p><ul class="warnings">{warned}</ul>' if warned else ""
    return "<section><h2>Run</h2>" + _table(None, rows) + warnings + "</section>"


def _ngram_rows(config: dict) -> list[tuple[str, str]]:
    """The n-gram branch's bigram buckets, where the model has one: as many as the layer keeps, and whether they were
    sized to the training texts (the file recipe's) or a fixed count."""
    built = config["model"].get("config", {})
    asked = built.get("nb_ngram_buckets")
    if not (isinstance(asked, int) and asked > 0):
        return []
    kept = bounded_buckets(asked, built.get("num_classes", 2), built.get("nb_ngram_bucket_budget", 0))
    how = "sized to the training texts" if config["settings"].get("ngram_buckets_sized") else "a fixed count"
    return [("n-gram branch", f"{kept:,} bigram buckets, {how}")]


def _kept_note(config: dict, history: list[dict]) -> str:
    """Which epoch's weights the scores below are of (``_kept_epoch`` found one): the training curves go on past it."""
    settings = config["settings"]
    return describe_kept(history, settings["train"]["monitor"], refit=bool(settings.get("refit_of")))


def _training_section(images: dict[str, bytes], multi_label: bool) -> str:
    """The training curves and validation metric history; a multi-label run's say what threshold cut them."""
    if "training" not in images:
        return "<section><h2>Training</h2><p>No history.jsonl: no epochs were recorded.</p></section>"
    # A multi-label run validates each epoch at 0.5 (training.multilabel.validation_record), its thresholds being
    # tuned only once training has picked its weights: the curves and the tables disagree, and without this the
    # curve's lower macro-F1 reads as a mistake.
    cut = ('<p class="note">The validation curves are scored per epoch at a 0.5 threshold; the scores in the tables '
           "use the tuned thresholds, picked once training ended, so the two differ.</p>"
           if multi_label and "metric_history" in images else "")
    return ("<section><h2>Training</h2>" + cut + _image(images, "training", "loss and accuracy per epoch")
            + _image(images, "metric_history",
                     "validation precision, recall, ROC AUC, average precision and counts per epoch")
            + "</section>")


def _split_title(metrics: dict, on_training: bool = False) -> str:
    """What the metrics were measured on: a run without test data is scored on its validation split, a toy set on
    its training texts."""
    if metrics.get("split") == "validation":
        return "Validation set"
    return "Test set: the training texts (a toy set tests on them)" if on_training else "Test set"


def _test_section(images: dict[str, bytes], metrics: dict, label_names: list[str], test: TextDataset,
                  on_training: bool = False) -> str:
    # A class neither among the texts nor predicted has no score (sklearn's 0/0 reads 0), and the averages leave it
    # out (compute_metrics): "0.0000" would read as a class the model fails at. (A multi-label run's table alike.)
    predicted = np.asarray(metrics["confusion_matrix"]).sum(axis=0)
    unscored = {name for i, (name, c) in enumerate(metrics["per_class"].items())
                if c["support"] == 0 and predicted[i] == 0}
    rows = [(name, *_label_scores(c, name in unscored), str(c["support"])) for name, c in metrics["per_class"].items()]
    for average in ("macro", "weighted"):
        rows.append((f"{average} average", f"{metrics[f'{average}_precision']:.4f}",
                     f"{metrics[f'{average}_recall']:.4f}", f"{metrics[f'{average}_f1']:.4f}",
                     str(metrics["num_examples"])))
    roc_note = "" if len(label_names) == 2 else " (one-vs-rest per class)"
    undrawn = _undrawn_curves(test.labels, label_names)
    return (f"<section><h2>{_split_title(metrics, on_training)} ({len(test)} texts)</h2>"
            + _table(["class", "precision", "recall", "F1", "support"], rows)
            + _unscored_note(unscored, "class")
            + '<p class="note">Rows are the true classes, columns the predicted ones: the diagonal holds the texts '
              "labelled right, and a large count off it names the class a class is mistaken for.</p>"
            + _image(images, "confusion_matrix", "confusion matrix") + f"<h3>ROC curve{roc_note}</h3>"
            + '<p class="note">How well the model ranks a class\'s texts above the others, at every threshold: the '
              "curve hugging the top left corner is a good ranking (AUC 1), and the chance diagonal is a random "
              "ranking (AUC 0.5).</p>" + undrawn
            + _image(images, "roc", "ROC curve") + f"<h3>Precision-recall curve{roc_note}</h3>"
            + '<p class="note">For a rare class, read this curve rather than the ROC curve: that one looks good '
              "whenever negatives are plentiful, precision does not. Dashed: the precision a random ranking keeps, "
              "the class's share of the texts; AP, the average precision, is the area under the curve.</p>" + undrawn
            + _image(images, "precision_recall", "precision-recall curve") + "</section>")


def _undrawn_curves(labels, label_names: list[str]) -> str:
    """A note under the ROC and precision-recall headings where their figures leave classes out: a curve needs texts
    of its class and of others (``plots.roc_figure``), so texts all of one class have no figure at all (it was an
    empty chart under words describing curves), and a class without texts has no curve; "" where none is left out."""
    counts = np.bincount(np.asarray(labels, dtype=int), minlength=len(label_names))
    if counts.max() == len(labels):
        said = (f"Not drawn: every text here is of {shown(label_names[int(counts.argmax())])}, and a curve needs "
                f"texts of its class and of others.")
    elif len(label_names) > 2 and (absent := [name for name, count in zip(label_names, counts) if count == 0]):
        said = f"No curve for {first_few(absent)}: no text here is of {'it' if len(absent) == 1 else 'them'}."
    else:
        return ""
    return f'<p class="note">{html.escape(said, quote=False)}</p>'


def _label_scores(scores: dict, unscored: bool) -> tuple[str, str, str]:
    """A class's (or label's) precision, recall and F1 as the per-class tables write them: n/a where ``unscored``."""
    return ("n/a",) * 3 if unscored else tuple(f"{scores[key]:.4f}" for key in ("precision", "recall", "f1"))


def _unscored_note(unscored: set[str], kind: str) -> str:
    """The note under a per-``kind`` ("class", "label") table with ``unscored`` rows; "" for none."""
    return (f'<p class="note">n/a: no text of the {kind} here, and none predicted as it; the averages leave it '
            "out.</p>" if unscored else "")


def _calibration(images: dict[str, bytes], labels, probabilities: np.ndarray, temperature: float,
                 label_names: list[str], validation_only: int | None = None) -> str:
    """The probabilities the model gives now (after `attnclf calibrate`'s temperature, if any): metrics.json holds
    the ones it gave when it finished training. ``validation_only``: the class the kept epoch predicted for every
    validation text (its history record's ``val_predicted_only``), if it did."""
    return (f"<section><h2>Calibration</h2><p>Log loss {log_loss(labels, probabilities):.4f}; expected calibration "
            f"error {expected_calibration_error(labels, probabilities):.4f} (the mean gap between the top label's "
            f"confidence and how often it is right: 0 when a confidence of 0.9 is right 9 times in 10)."
            f"{_tempered(temperature)}</p>"
            + _one_class_caveat(labels, probabilities, label_names, validation_only)
            + _image(images, "reliability", "reliability diagram") + "</section>")


def _tempered(temperature: float) -> str:
    """The sentence saying the calibration section's probabilities are at `attnclf calibrate`'s temperature, if
    they are."""
    return ("" if temperature == 1.0 else f" These are its probabilities at temperature {temperature:.3f}, fitted by "
                                          f"<code>attnclf calibrate</code>.")


def _label_calibration(images: dict[str, bytes], label_sets: np.ndarray, probabilities: np.ndarray,
                       temperature: float, label_names: list[str]) -> str:
    """A multi-label run's calibration, of the probabilities it gives now as ``_calibration``'s: each label's
    probability read as the yes-or-no prediction it is, the binary log loss over every (text, label) cell, each
    label's calibration error and their mean, and the reliability diagram of all the cells."""
    errors = label_calibration_errors(label_sets, probabilities)
    return (f"<section><h2>Calibration</h2><p>Of each label's own probability, that the label is given to a text: "
            f"binary log loss {binary_cross_entropy(label_sets, probabilities):.4f} over {label_sets.size:,} "
            f"text-label cells; calibration error {np.mean(errors):.4f} (mean over labels), each label's below: the "
            f"mean gap between the confidence of its given-or-not decision and how often that decision is right."
            f"{_tempered(temperature)}</p>"
            + _table(["label", "calibration error"],
                     [(name, f"{error:.4f}") for name, error in zip(label_names, errors)])
            + '<p class="note">The diagram pools every text-label cell, so the many labels a text plainly lacks '
              "crowd its last bins; each label's row above is its own.</p>"
            + _image(images, "reliability", "reliability diagram of every text-label cell") + "</section>")


def _one_class_caveat(labels, probabilities: np.ndarray, label_names: list[str], validation_only: int | None) -> str:
    """Where the model answers one class for every text scored (the test split's, or the validation split's in a run
    without one) while they hold several, or the kept epoch did so for every validation text, a note that its
    calibration error says little; "" elsewhere."""
    predicted = np.asarray(probabilities).argmax(axis=1)
    if len(predicted) and (predicted == predicted[0]).all() and len(set(np.asarray(labels).tolist())) > 1:
        said = f"The model predicts {shown(label_names[predicted[0]])} for every text scored here"
    elif isinstance(validation_only, int) and 0 <= validation_only < len(label_names):  # (not an edited record)
        said = f"The kept weights predicted {shown(label_names[validation_only])} for every validation text"
    else:
        return ""
    return (f'<p class="note">{html.escape(said, quote=False)}: a low calibration error says little here, since a '
            "model that answers the majority class with its base rate as its confidence is well calibrated and "
            "useless.</p>")


def _multilabel_test_section(metrics: dict, test: TextDataset) -> str:
    # (runs scored before average precision was measured have the AUC alone)
    ranked = {key: title for key, title in (("roc_auc", "ROC AUC"), ("average_precision", "average precision"))
              if key in metrics}
    # (runs scored before the texts given each label were counted show its figures, whatever they are)
    unscored = {name for name, c in metrics["per_class"].items() if c["support"] == 0 and c.get("predicted") == 0}
    rows = [(name, f"{c['threshold']:.3f}", *_label_scores(c, name in unscored),
             *("n/a" if c[key] is None else f"{c[key]:.4f}" for key in ranked), str(c["support"]))
            for name, c in metrics["per_class"].items()]
    for average in ("micro", "macro", "weighted", "samples"):
        scores = [{"micro": metrics.get(f"micro_{key}"), "macro": metrics[key]}.get(average) for key in ranked]
        rows.append((f"{average} average", "", f"{metrics[f'{average}_precision']:.4f}",
                     f"{metrics[f'{average}_recall']:.4f}", f"{metrics[f'{average}_f1']:.4f}",
                     *("" if score is None else f"{score:.4f}" for score in scores), ""))
    summary = [("subset accuracy (every label of a text right)",
                f"{metrics['subset_accuracy']:.4f}" + _interval(metrics.get("subset_accuracy_ci95"))),
               ("Hamming loss (share of wrong text-label decisions)", f"{metrics['hamming_loss']:.4f}")]
    summary += [(f"{key.replace('_', '-')} at threshold 0.5", f"{value:.4f}")
                for key, value in metrics.get("at_0.5", {}).items()]
    tuned_here = (" These scores are on that same split, so they flatter the model."
                  if metrics.get("split") == "validation" else "")
    return (f"<section><h2>{_split_title(metrics)} ({len(test)} texts, multi-label)</h2>"
            '<p class="note">A label is predicted when its probability reaches its threshold, tuned on the '
            f"validation split to maximise that label's F1 (thresholds.json).{tuned_here}</p>"
            + _table(["label", "threshold", "precision", "recall", "F1", *ranked.values(), "support"], rows)
            + _unscored_note(unscored, "label") + _table(None, summary)
            + '<p class="note">The confusion matrix and the ROC and precision-recall curves show one class per '
              "text; they are not drawn for a multi-label run.</p></section>")


_WINDOWED_FAITHFULNESS = ("<section><h2>Faithfulness</h2><p>Not measured: the explanation methods whose "
                          "faithfulness it tests do not read windowed runs yet.</p></section>")
_WINDOWED_EXAMPLES = ("<section><h2>Examples</h2><p>Not explained: this model reads long texts as windows "
                      "(<code>--windows</code>), and the explanation methods attribute one token sequence.</p>"
                      "</section>")


def _pooling_beside_note(explanations: list) -> str:
    """The sentence of an examples section saying what the orange row under each text is, where any of its
    ``explanations`` carries the pooling weights beside its scores; "" where none does."""
    if not any(e.pooling_attention is not None for e in explanations):
        return ""
    return " Under each text, in orange, the pooling layer's weights: where it looked, beside what was measured."


def _examples_section(explanations: list, examples: dict, method: str) -> str:
    whose = ("the scores explain the predicted class" if METHODS[method].per_class
             else "the same weights whichever class is explained")
    beside = _pooling_beside_note(explanations)
    parts = [f"<section><h2>Examples, explained by {html.escape(method)}</h2>",
             f'<p class="note">{html.escape(METHODS[method].description)}; {whose}. '
             f"Hover a token for its score.{beside}</p>", legend_html(method)]
    explained = iter(explanations)  # in the order they were asked for: correct, then incorrect
    for kind in ("correct", "incorrect"):
        parts.append(f"<h3>Most confident {kind} predictions</h3>")
        if not examples[kind]:
            parts.append(f"<p>No {kind} predictions on the test set.</p>")
        for ex in examples[kind]:
            explanation = next(explained)
            split = branches(explanation)  # a token map shows one branch's view; the n-gram branch may decide
            # (under the headline, as `attnclf explain --format html` puts it: a map of <unk> tokens says little)
            parts.append(f"<p>true <b>{_name(ex['true'])}</b>, predicted <b>{_name(ex['predicted'])}"
                         f"</b> ({ex['confidence']:.3f}){'; ' + html.escape(split) if split else ''}</p>"
                         + unknown_note_html(explanation) + tokens_html(explanation))
    return "\n".join(parts) + "</section>"


def _explain_examples(classifier, examples: dict, method: str, self_attentions: bool) -> list:
    """The explanations by ``method`` of ``pick_examples``' ``examples`` (its correct, then its incorrect ones), one
    per text, of its predicted class."""
    texts = [ex["text"] for kind in ("correct", "incorrect") for ex in examples[kind]]
    return explain(classifier, texts, method, self_attentions=self_attentions) if texts else []


def _explain_label_sets(classifier, examples: dict, method: str, self_attentions: bool) -> list[list]:
    """Per text of ``pick_label_set_examples``' ``examples`` (its exact sets, then its wrong ones), its explanations
    by ``method``: one per label it predicts, as ``explain`` gives them, or where it predicts none, of the missed label
    nearest to being given (``explain`` alone would pick the most probable label, which may be one the text lacks)."""
    explained = []
    for row in examples["correct"] + examples["incorrect"]:
        missed = None if row["predicted_labels"] else max(row["missed_labels"],
                                                           key=lambda name: row[f"probability:{name}"])
        explained.append(explain(classifier, [row["text"]], method, target=missed, self_attentions=self_attentions))
    return explained


def _label_set_examples_section(by_text: list[list], examples: dict, method: str) -> str:
    """``pick_label_set_examples``' texts, each with its labels and its explanations (``_explain_label_sets``)."""
    whose = ("the scores explain one label at a time, by that label's own probability" if METHODS[method].per_class
             else "the same weights whichever label is explained")
    beside = _pooling_beside_note([e for explained in by_text for e in explained])
    parts = [f"<section><h2>Examples, explained by {html.escape(method)}</h2>",
             f'<p class="note">{html.escape(METHODS[method].description)}; {whose}: each label a text is given is '
             f"explained, or where it is given none, the label it missed that came nearest. Hover a token for its "
             f"score.{beside}</p>", legend_html(method)]
    explained = iter(by_text)  # in the order they were explained: exact sets, then wrong ones
    for kind, title, none in (
            ("correct", "Most confident exactly right label sets",
             "No text of the test set with at least one label has its label set predicted exactly."),
            ("incorrect", "Most wrong label sets (missed and extra labels, as <code>evaluate --errors</code> ranks "
                          "them)", "Every text of the test set has its label set predicted exactly.")):
        parts.append(f"<h3>{title}</h3>")
        if kind == "correct":
            parts.append('<p class="note">Texts with at least one label whose predicted set is exactly theirs, by '
                         "the model's probability of that very set (each label's probability of being given or "
                         "left out, multiplied).</p>")
        if not examples[kind]:
            parts.append(f"<p>{none}</p>")
        for row in examples[kind]:
            parts.append(f"<p>true <b>{_names(row['true_labels'])}</b>; predicted "
                         f"<b>{_names(row['predicted_labels'])}</b>"
                         + (f" (probability of exactly this set {row['set_probability']:.3f})" if kind == "correct"
                            else "".join(f"; {what} <b>{_names(row[f'{what}_labels'])}</b>"
                                         for what in ("missed", "extra") if row[f"{what}_labels"]))
                         + "</p>")
            for explanation in next(explained):
                missed = "" if explanation.labels else ", a missed label, none being predicted"
                split = branches(explanation)  # a token map shows one branch's view; the n-gram branch may decide
                parts.append(f"<p>explaining <b>{_name(explanation.target)}</b> ({explanation.probability:.3f})"
                             f"{missed}{'; ' + html.escape(split) if split else ''}</p>"
                             + unknown_note_html(explanation) + tokens_html(explanation))
    return "\n".join(parts) + "</section>"


def _name(name: str) -> str:
    """A class or label name as the page's sentences write it: escaped, and isolated (``<bdi>``) so that a name
    written right to left (Hebrew, Arabic) keeps to itself: the figure after it, " (0.340)", was drawn before it,
    and the names of a label set in reverse order."""
    return f"<bdi>{html.escape(name)}</bdi>"


def _names(labels: list[str]) -> str:
    """A label set as the page writes it: its names (``_name``), or "no label"."""
    return ", ".join(map(_name, labels)) if labels else "no label"


def _heads_section(images: dict[str, bytes], explanations: list) -> str:
    if "self_attention" not in images:
        return ""
    # (a local window spreads a row's weight over its w tokens, where the text is longer than one window)
    window = plots.binding_window(len(explanations[0].tokens), explanations[0].attention_window)
    uniform = (f"1/{window}, weight spread evenly over a window's {window} tokens" if window else
               "1/n, weight spread evenly over the n tokens")
    return ("<section><h2>Self-attention per layer and head</h2>"
            f"<p class=\"note\">For “{html.escape(explanations[0].text[:100])}”; rows are the attending tokens, "
            f"columns the attended ones; white at uniform ({uniform}), red "
            "above it, light blue below: a head that weighs every token alike is all but white.</p>"
            + _image(images, "self_attention", "self-attention maps") + "</section>")


def _faithfulness_section(images: dict[str, bytes], result: FaithfulnessResult | None,
                          lacking: list[str]) -> str:
    """``lacking``: the methods the model cannot have, with why (``left_out``), as `attnclf faithfulness` notes them:
    without them a reader cannot tell a method missing from the table from one not asked for."""
    if result is None:
        return ("<section><h2>Faithfulness</h2><p>Not measured for these weights (by this attnclf's deletion test). "
                "<code>attnclf report RUN_DIR --faithfulness</code> or <code>attnclf faithfulness RUN_DIR</code> "
                "measures it.</p></section>")
    agreement = [(pair, f"{rho:+.3f}") for pair, rho in result.agreement.items()]
    return ("<section><h2>Faithfulness</h2>"
            + "".join(f'<p class="note">{html.escape(paragraph)}</p>' for paragraph in result.reading())
            + _table(*result.rows())
            + "".join(f"<p>{html.escape(note)}</p>" for note in result.notes())
            + (f"<p>Left out for this model: {html.escape(' and '.join(lacking))}.</p>" if lacking else "")
            + _image(images, "deletion", "deletion test")
            + "<h3>Agreement between methods (mean Spearman rank correlation)</h3>"
            + _table(["methods", "rank correlation"], agreement) + "</section>")


def _table(header: list[str] | None, rows: list[tuple]) -> str:
    head = "" if header is None else "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"
