"""Temperature scaling (Guo et al., 2017): one number, fitted on a run's validation texts, that makes its
probabilities mean what they say.

softmax(logits / T) with T > 1 is less sure of every prediction, T < 1 more; no prediction changes. T is the
value with the lowest validation log loss. ``attnclf calibrate RUN`` fits it and writes ``temperature.json``,
which ``Classifier`` (and so predict, evaluate, serve, ensembles and the ONNX export) applies from then on.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy.optimize import minimize_scalar

from ..errors import AttnclfError
from .metrics import expected_calibration_error, log_loss

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
    found = minimize_scalar(lambda log_t: log_loss(labels, tempered(logits, math.exp(log_t))),
                            bounds=(math.log(LOWEST), math.log(HIGHEST)), method="bounded", options={"xatol": 1e-4})
    return math.exp(found.x)


def calibrate_run(run_dir: str | Path, data_dir: str | None = None, device: str = "auto") -> dict:
    """Fit ``run_dir``'s temperature on the validation texts it held out and write ``temperature.json``; returns
    what was written (the temperature, and the validation log loss and calibration error before and after). The run
    is held meanwhile (``adding_to_run``): one another process is writing (training on) is refused in one line.

    >>> # calibrate_run("runs/20newsgroups")["temperature"]  # 1.79: the model was too sure of itself
    """
    from ..rundir import ENSEMBLE_FILE, adding_to_run, is_multi_label, member_folders, read_config

    members = member_folders(run_dir, trained=True)
    if members and read_config(members[0])["settings"]["data"].get("refit"):
        raise AttnclfError(f"{run_dir} holds the refits of an ensemble's members: they trained on their validation "
                           f"texts, so none are left to calibrate on")
    if members and is_multi_label(read_config(members[0])):  # (calibrating each member would be refused too)
        raise AttnclfError(f"{run_dir} holds a `train --seeds` ensemble of multi-label runs: their labels are "
                           f"thresholded one by one (thresholds.json), not calibrated by one temperature")
    if (Path(run_dir) / ENSEMBLE_FILE).is_file() or members:
        from ..ensemble import first_member

        raise AttnclfError(f"{run_dir} holds a `train --seeds` ensemble: calibrate each member "
                           f"(`attnclf calibrate {members[0] if members else first_member(run_dir)}`, ...); the "
                           f"ensemble then averages their calibrated probabilities")
    with adding_to_run(run_dir):
        return _calibrate(run_dir, data_dir, device)


def _calibrate(run_dir: str | Path, data_dir: str | None, device: str) -> dict:
    """``calibrate_run``'s work, in a run it holds."""
    from ..classifier import Classifier
    from ..rundir import TEMPERATURE_FILE, atomic_write_json, is_multi_label, read_config
    from ..training.run_data import held_out_fingerprint, run_validation_data

    config = read_config(run_dir)
    if is_multi_label(config):
        raise AttnclfError(f"{run_dir} is multi-label: its labels are thresholded one by one (thresholds.json), "
                           f"not calibrated by one temperature")
    if config["settings"]["data"].get("refit"):
        raise AttnclfError(f"{run_dir} is a refit: it trained on its validation texts, so none are left to calibrate "
                           f"on")
    clf = Classifier.load(run_dir, device=device)
    validation = run_validation_data([config], clf.label_names, data_dir)
    logits = clf.logits(validation.texts)
    right = int((logits.argmax(axis=1) == np.asarray(validation.labels)).sum())
    if right == len(validation):  # no minimum: the log loss only falls as T -> 0
        raise AttnclfError(f"{run_dir}: no temperature fits: the model is right on all {right} validation texts, so "
                           f"their log loss falls as T -> 0 and every probability would become 0 or 1, a certainty "
                           f"the test texts would not bear out; nothing written")
    temperature = fit_temperature(validation.labels, logits)
    if temperature < LOWEST * 1.01:
        raise AttnclfError(f"{run_dir}: no temperature fits: its validation texts ask for one below {LOWEST} (its "
                           f"logits are nearly flat), where every probability would become 0 or 1; nothing written")
    if temperature > HIGHEST * 0.99:
        raise AttnclfError(f"{run_dir}: no temperature fits: its validation texts ask for one above {HIGHEST} (its "
                           f"logits say little about their labels), where every probability would become uniform; "
                           f"nothing written")
    before, after = tempered(logits, 1.0), tempered(logits, temperature)
    record = {
        "temperature": temperature,
        "fitted_on": {"split": "validation", "texts": len(validation), "sha256": held_out_fingerprint(config)},
        "validation": {"log_loss": [log_loss(validation.labels, before), log_loss(validation.labels, after)],
                       "ece": [expected_calibration_error(validation.labels, before),
                               expected_calibration_error(validation.labels, after)]},
    }
    atomic_write_json(Path(run_dir) / TEMPERATURE_FILE, record)
    return record
