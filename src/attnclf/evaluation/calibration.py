"""Temperature scaling (Guo et al., 2017): one number, fitted on a run's validation texts, that makes its
probabilities mean what they say.

softmax(logits / T) with T > 1 is less sure of every prediction, T < 1 more; no prediction changes. T is the
value with the lowest validation log loss. ``attnclf calibrate RUN`` fits it and writes ``temperature.json``,
which ``Classifier`` (and so predict, evaluate, serve, ensembles and the ONNX export) applies from then on.

A multi-label run gets one temperature too, shared by every label's sigmoid(logit / T), the one with the lowest
binary log loss over every (validation text, label) cell. One, not one per label: its labels share one network and
its over- or under-confidence, a validation split holds few positives of a rare label to fit a number of its own
on, and every consumer of a temperature (the ONNX graph, the explanations' log-odds) takes one number; the
calibration error is reported per label, so a label one temperature fits badly shows. Its thresholds move with
the probabilities (``prediction.tempered_thresholds``), so no label set changes either.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy.optimize import minimize_scalar

from ..errors import NAME_LENGTH, AttnclfError, shown
from .metrics import expected_calibration_error, log_loss
from .multilabel import binary_cross_entropy, label_calibration_errors

# Beyond these a model is either near-uniform or certain of everything: a fit there says the data is odd.
LOWEST, HIGHEST = 0.05, 20.0


def tempered(logits: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(logits / temperature), row by row, in float64.

    >>> tempered(np.array([[0.0, 2.0]]), 2.0).round(3).tolist()
    [[0.269, 0.731]]
    """
    scaled = logits.astype(np.float64) / temperature
    scaled -= scaled.max(axis=1, keepdims=True)
    exp = np.exp(scaled)
    return exp / exp.sum(axis=1, keepdims=True)


def fit_temperature(labels, logits: np.ndarray) -> float:
    """The temperature in [0.05, 20] whose probabilities have the lowest log loss on these texts.

    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(20_000, 2)) * 3
    >>> labels = (rng.uniform(size=20_000) < tempered(logits, 2.0)[:, 1]).astype(int)  # as sure as logits / 2
    >>> round(fit_temperature(labels, logits), 1)
    2.0
    """
    labels = np.asarray(labels)
    return _lowest(lambda temperature: log_loss(labels, tempered(logits, temperature)))


def sigmoids(logits: np.ndarray, temperature: float) -> np.ndarray:
    """sigmoid(logits / temperature), cell by cell, in float64: a multi-label run's probabilities.

    >>> sigmoids(np.array([[0.0, 2.0]]), 2.0).round(3).tolist()
    [[0.5, 0.731]]
    """
    return 1 / (1 + np.exp(-logits.astype(np.float64) / temperature))


def fit_multi_label_temperature(label_sets: np.ndarray, logits: np.ndarray) -> float:
    """The temperature in [0.05, 20] whose sigmoids have the lowest binary log loss over every (text, label) cell of
    ``label_sets`` (0/1, texts x labels).

    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(10_000, 3)) * 3
    >>> label_sets = (rng.uniform(size=logits.shape) < sigmoids(logits, 2.0)).astype(int)  # as sure as logits / 2
    >>> round(fit_multi_label_temperature(label_sets, logits), 1)
    2.0
    """
    return _lowest(lambda temperature: binary_cross_entropy(label_sets, sigmoids(logits, temperature)))


def _lowest(loss) -> float:
    """The temperature in [LOWEST, HIGHEST] where ``loss(temperature)`` is lowest, searched on its logarithm."""
    found = minimize_scalar(lambda log_t: loss(math.exp(log_t)), bounds=(math.log(LOWEST), math.log(HIGHEST)),
                            method="bounded", options={"xatol": 1e-4})
    return math.exp(found.x)


def calibrate_run(run_dir: str | Path, data_dir: str | None = None, device: str = "auto") -> dict:
    """Fit ``run_dir``'s temperature on the validation texts it held out and write ``temperature.json``; returns
    what was written (the temperature, and the validation log loss and calibration error before and after). The run
    is held meanwhile (``adding_to_run``): one another process is writing (training on) is refused in one line.

    >>> # calibrate_run("runs/20newsgroups")["temperature"]  # 1.79: the model was too sure of itself
    """
    from ..rundir import ENSEMBLE_FILE, adding_to_run, member_folders, read_config

    members = member_folders(run_dir, trained=True)
    if members and read_config(members[0])["settings"]["data"].get("refit"):
        raise AttnclfError(f"{run_dir} holds the refits of an ensemble's members: they trained on their validation "
                           f"texts, so none are left to calibrate on")
    if (Path(run_dir) / ENSEMBLE_FILE).is_file() or members:
        from ..ensemble import first_member, tuned_thresholds

        retune = (", and its thresholds, tuned on the members' probabilities, are tuned again on those by its "
                  "`train --seeds` command with --resume") if tuned_thresholds(run_dir) else ""
        raise AttnclfError(f"{run_dir} holds a `train --seeds` ensemble: calibrate each member "
                           f"(`attnclf calibrate {members[0] if members else first_member(run_dir)}`, ...); the "
                           f"ensemble then averages their calibrated probabilities{retune}")
    with adding_to_run(run_dir):
        return _calibrate(run_dir, data_dir, device)


def calibration_summary(record: dict) -> str:
    """What ``calibrate_run`` fitted (its ``record``), in words: the temperature and, on the validation texts, the log
    loss and calibration error before and after; a multi-label run's, each label's calibration error on a line of its
    own.

    >>> calibration_summary({"temperature": 1.79, "fitted_on": {"texts": 1131},
    ...                      "validation": {"log_loss": [0.61, 0.52], "ece": [0.08, 0.02]}}).split(": ")[1]
    'log loss 0.6100 -> 0.5200, calibration error 0.0800 -> 0.0200'
    """
    loss, ece = record["validation"]["log_loss"], record["validation"]["ece"]
    per_label = record["validation"].get("ece_per_label")  # (a multi-label run's: the mean is on the first line)
    lines = [f"temperature {record['temperature']:.3f} ({'less' if record['temperature'] > 1 else 'more'} sure than "
             f"trained), fitted on {record['fitted_on']['texts']:,} validation texts: {'binary ' if per_label else ''}"
             f"log loss {loss[0]:.4f} -> {loss[1]:.4f}, calibration error {'(mean over labels) ' if per_label else ''}"
             f"{ece[0]:.4f} -> {ece[1]:.4f}"]
    lines += [f"  {shown(label, most=NAME_LENGTH, write=str)}: calibration error {before:.4f} -> {after:.4f}"
              for label, (before, after) in (per_label or {}).items()]
    return "\n".join(lines)


def _calibrate(run_dir: str | Path, data_dir: str | None, device: str) -> dict:
    """``calibrate_run``'s work, in a run it holds."""
    from ..classifier import Classifier
    from ..rundir import TEMPERATURE_FILE, atomic_write_json, read_config
    from ..training.run_data import held_out_fingerprint, run_validation_data

    config = read_config(run_dir)
    if config["settings"]["data"].get("refit"):
        raise AttnclfError(f"{run_dir} is a refit: it trained on its validation texts, so none are left to calibrate "
                           f"on")
    clf = Classifier.load(run_dir, device=device)
    validation = run_validation_data([config], clf.label_names, data_dir)
    logits = clf.logits(validation.texts)
    if clf.multi_label:
        temperature, figures = _fit_multi_label(run_dir, clf.label_names, validation, logits)
    else:
        temperature, figures = _fit_single_label(run_dir, validation, logits)
    record = {"temperature": temperature,
              "fitted_on": {"split": "validation", "texts": len(validation), "sha256": held_out_fingerprint(config)},
              "validation": figures}
    atomic_write_json(Path(run_dir) / TEMPERATURE_FILE, record)
    return record


def _fit_single_label(run_dir: str | Path, validation, logits: np.ndarray) -> tuple[float, dict]:
    """The temperature of a single-label run's softmax, by log loss on its ``validation`` texts' ``logits``, and the
    validation log loss and calibration error before and after it."""
    right = int((logits.argmax(axis=1) == np.asarray(validation.labels)).sum())
    if right == len(validation):  # no minimum: the log loss only falls as T -> 0
        raise AttnclfError(f"{run_dir}: no temperature fits: the model is right on all {right} validation texts, so "
                           f"their log loss falls as T -> 0 and every probability would become 0 or 1, a certainty "
                           f"the test texts would not bear out; nothing written")
    temperature = _checked_fit(run_dir, fit_temperature(validation.labels, logits))
    before, after = tempered(logits, 1.0), tempered(logits, temperature)
    return temperature, {"log_loss": [log_loss(validation.labels, before), log_loss(validation.labels, after)],
                         "ece": [expected_calibration_error(validation.labels, before),
                                 expected_calibration_error(validation.labels, after)]}


def _fit_multi_label(run_dir: str | Path, label_names: list[str], validation, logits: np.ndarray
                     ) -> tuple[float, dict]:
    """``_fit_single_label`` for a multi-label run of labels ``label_names``: one temperature for every label's
    sigmoid, by binary log loss; the calibration error per label (``label_calibration_errors``) and their mean."""
    from ..data.multilabel import multi_hot

    label_sets = multi_hot(validation.labels, len(label_names))
    if (((logits > 0) == (label_sets == 1)) | (logits == 0)).all():  # no minimum, as a single-label run right on all
        raise AttnclfError(f"{run_dir}: no temperature fits: every label of all {len(validation)} validation texts "
                           f"is on its side of probability 0.5, so their log loss falls as T -> 0 and every "
                           f"probability would become 0 or 1, a certainty the test texts would not bear out; nothing "
                           f"written")
    temperature = _checked_fit(run_dir, fit_multi_label_temperature(label_sets, logits))
    before, after = sigmoids(logits, 1.0), sigmoids(logits, temperature)
    per_label = {name: [before_ece, after_ece] for name, before_ece, after_ece in zip(
        label_names, label_calibration_errors(label_sets, before), label_calibration_errors(label_sets, after))}
    return temperature, {
        "log_loss": [binary_cross_entropy(label_sets, before), binary_cross_entropy(label_sets, after)],
        "ece": [float(np.mean([pair[i] for pair in per_label.values()])) for i in (0, 1)],
        "ece_per_label": per_label}


def _checked_fit(run_dir: str | Path, temperature: float) -> float:
    """``temperature``, unless the fit ran to a bound of its search: one line, nothing written."""
    if temperature < LOWEST * 1.01:
        raise AttnclfError(f"{run_dir}: no temperature fits: its validation texts ask for one below {LOWEST} (its "
                           f"logits are nearly flat), where every probability would become 0 or 1; nothing written")
    if temperature > HIGHEST * 0.99:
        raise AttnclfError(f"{run_dir}: no temperature fits: its validation texts ask for one above {HIGHEST} (its "
                           f"logits say little about their labels), where every probability would become uniform; "
                           f"nothing written")
    return temperature
