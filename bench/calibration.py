"""How well trained runs' probabilities are calibrated, and what temperature scaling would change.

    python bench/calibration.py runs/bench-imdb runs/sst2 --threads 1

For each run, on its own validation split and its test split: accuracy, log loss and expected
calibration error (15 bins, top label; ``attnclf.evaluation.metrics``). Then one temperature T is
fitted on validation (Guo et al., 2017: the T that minimises validation log loss of softmax(logits / T),
the same fit as `attnclf calibrate`) and applied to test. T leaves every argmax, so accuracy,
unchanged. Analysis of trained models: nothing in the runs changes (`attnclf calibrate RUN` applies a
temperature to a run).
"""

from __future__ import annotations

import numpy as np
import torch

from attnclf.classifier import Classifier
from attnclf.evaluation.calibration import fit_temperature, tempered
from attnclf.evaluation.metrics import expected_calibration_error, log_loss
from attnclf.training.run_data import run_test_data, run_validation_data

from common import data_dir, parser, write_result


def scores(labels: np.ndarray, probabilities: np.ndarray) -> dict:
    return {"accuracy": float((probabilities.argmax(axis=1) == labels).mean()),
            "log_loss": log_loss(labels, probabilities), "ece": expected_calibration_error(labels, probabilities)}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    runs = []
    for run_dir in args.run_dirs:
        clf = Classifier.load(run_dir, device="cpu")
        saved = clf.config["settings"]["data"]
        where = data_dir(args.data_dir or saved.get("data_dir"))
        splits = {"validation": run_validation_data([clf.config], clf.label_names, where),
                  "test": run_test_data(clf.config, clf.label_names, test_only=True, data_dir=where)}
        logits = {name: clf.logits(list(part.texts)) for name, part in splits.items()}
        labels = {name: np.asarray(part.labels) for name, part in splits.items()}
        temperature = fit_temperature(labels["validation"], logits["validation"])
        result = {"run": run_dir, "dataset": saved.get("dataset") or saved.get("train_file"),
                  "temperature": temperature}
        for name in splits:
            result[name] = {"as trained": scores(labels[name], tempered(logits[name], 1.0)),
                            "temperature-scaled": scores(labels[name], tempered(logits[name], temperature))}
        print(f"{run_dir}: T = {temperature:.3f}; test ECE {result['test']['as trained']['ece']:.4f} -> "
              f"{result['test']['temperature-scaled']['ece']:.4f}, log loss "
              f"{result['test']['as trained']['log_loss']:.4f} -> {result['test']['temperature-scaled']['log_loss']:.4f}")
        runs.append(result)
    write_result("calibration", {"runs": runs}, args.out)


if __name__ == "__main__":
    main()
