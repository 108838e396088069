"""How well trained runs' probabilities are calibrated, and what temperature scaling would change.

    python bench/calibration.py runs/bench-imdb runs/sst2 --threads 1

For each run, on its own validation split and its test split: accuracy, log loss and expected
calibration error (15 bins, top label; ``attnclf.evaluation.metrics``). Then one temperature T is
fitted on validation (Guo et al., 2017: the T that minimises validation log loss of softmax(logits / T),
the same fit as `attnclf calibrate`) and applied to test. T leaves every argmax, so accuracy,
unchanged. Analysis of trained models: nothing in the runs changes (`attnclf calibrate RUN` applies a
temperature to a run).

A multi-label run's T is fitted as `attnclf calibrate` fits it, one for every label's sigmoid by binary log loss;
it reports micro-F1 at the run's thresholds moved with T (unchanged, as accuracy is), the binary log loss, and the
expected calibration error of each label's yes-or-no probability, per label and their mean.
"""

from __future__ import annotations

import numpy as np

from attnclf.classifier import Classifier
from attnclf.data.multilabel import multi_hot
from attnclf.evaluation.calibration import (fit_multi_label_temperature, fit_temperature, label_calibration_errors,
                                            sigmoids, tempered)
from attnclf.evaluation.metrics import expected_calibration_error, log_loss
from attnclf.evaluation.multilabel import binary_cross_entropy, multilabel_metrics
from attnclf.prediction import tempered_thresholds
from attnclf.rundir import read_thresholds
from attnclf.training.run_data import run_test_data, run_validation_data

from common import data_dir, parse_with_threads, parser, write_result


def scores(labels: np.ndarray, probabilities: np.ndarray) -> dict:
    return {"accuracy": float((probabilities.argmax(axis=1) == labels).mean()),
            "log_loss": log_loss(labels, probabilities), "ece": expected_calibration_error(labels, probabilities)}


def label_set_scores(label_sets: np.ndarray, probabilities: np.ndarray, thresholds: np.ndarray,
                     label_names: list[str]) -> dict:
    errors = label_calibration_errors(label_sets, probabilities)
    micro_f1 = multilabel_metrics(label_sets, probabilities, label_names, thresholds, report=False)["micro_f1"]
    return {"micro_f1": micro_f1, "log_loss": binary_cross_entropy(label_sets, probabilities),
            "ece": float(np.mean(errors)), "ece_per_label": dict(zip(label_names, errors))}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("run_dirs", nargs="+")
    args = parse_with_threads(p)
    runs = []
    for run_dir in args.run_dirs:
        clf = Classifier.load(run_dir, device="cpu")
        saved = clf.config["settings"]["data"]
        where = data_dir(args.data_dir or saved.get("data_dir"))
        splits = {"validation": run_validation_data([clf.config], clf.label_names, where),
                  "test": run_test_data(clf.config, clf.label_names, test_only=True, data_dir=where)}
        logits = {name: clf.logits(list(part.texts)) for name, part in splits.items()}
        if clf.multi_label:
            labels = {name: multi_hot(part.labels, len(clf.label_names)) for name, part in splits.items()}
            temperature = fit_multi_label_temperature(labels["validation"], logits["validation"])
            tuned = np.array(list(read_thresholds(run_dir, clf.label_names).values()))  # (as trained: at T = 1)
        else:
            labels = {name: np.asarray(part.labels) for name, part in splits.items()}
            temperature = fit_temperature(labels["validation"], logits["validation"])
        result = {"run": run_dir, "dataset": saved.get("dataset") or saved.get("train_file"),
                  "temperature": temperature}
        for name in splits:
            if clf.multi_label:
                result[name] = {kind: label_set_scores(labels[name], sigmoids(logits[name], t),
                                                       tempered_thresholds(tuned, t), clf.label_names)
                                for kind, t in (("as trained", 1.0), ("temperature-scaled", temperature))}
                continue
            result[name] = {"as trained": scores(labels[name], tempered(logits[name], 1.0)),
                            "temperature-scaled": scores(labels[name], tempered(logits[name], temperature))}
        print(f"{run_dir}: T = {temperature:.3f}; test ECE {result['test']['as trained']['ece']:.4f} -> "
              f"{result['test']['temperature-scaled']['ece']:.4f}, log loss "
              f"{result['test']['as trained']['log_loss']:.4f} -> {result['test']['temperature-scaled']['log_loss']:.4f}")
        runs.append(result)
    write_result("calibration", {"runs": runs}, args.out)


if __name__ == "__main__":
    main()
