"""Refit validated runs on their validation texts too, and score the refits' ensemble beside the runs'.

    python bench/refit.py --name refit-stsa runs/bench-sst2-vectors/seed-0 runs/bench-sst2-vectors/seed-1 \\
        runs/bench-sst2-vectors/seed-2 --threads 1
    python bench/refit.py --name refit-glue runs/tune/glue/fnb-s* --extra-test sst2-sentences --threads 1

Each run is refitted with ``attnclf refit RUN --output OUTPUT/NAME --resume`` (a finished refit of it is kept
and an interrupted one continues, so a rerun of the benchmark picks up where it stopped), then the runs' and the
refits' averaged probabilities are scored on the runs' test split, and on ``--extra-test`` datasets. The
runs were chosen on validation before this reads their refits' test; the refit has nothing to choose.
"""

from __future__ import annotations

import time
from pathlib import Path

from attnclf.cli import main as attnclf
from attnclf.ensemble import Ensemble
from attnclf.evaluation.metrics import compute_metrics
from attnclf.rundir import read_json
from attnclf.training.run_data import align_labels, load_data, run_test_data
from attnclf.training.settings import DataSettings

from common import data_dir, parser, write_result


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="validated run directories (an ensemble's members)")
    p.add_argument("--name", required=True, help="result file bench/results/NAME.json")
    p.add_argument("--output", default="runs/bench-refit",
                   help="refits go to OUTPUT/<the run's parent folder name>-<its folder name>")
    p.add_argument("--extra-test", action="append", default=[], metavar="DATASET",
                   help="also score both ensembles on this dataset's test split (e.g. sst2-sentences); repeatable")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    refits, seconds = [], {}
    for run in map(Path, args.runs):
        refit = Path(args.output) / f"{run.parent.name}-{run.name}"
        started = time.perf_counter()
        # --resume keeps a finished refit of this run (and only of this run: another run's folder is refused).
        code = attnclf(["refit", str(run), "--output", str(refit), "--threads", str(args.threads), "--no-report",
                        "--quiet", "--resume"])
        if code:
            raise SystemExit(code)
        seconds[str(refit)] = round(time.perf_counter() - started, 1)
        refits.append(refit)

    runs = Ensemble.load(args.runs, device="cpu")
    refitted = Ensemble.load(refits, device="cpu")
    tests = {"own": run_test_data(runs.config, runs.label_names, test_only=True)}
    for dataset in args.extra_test:
        test = load_data(DataSettings(dataset=dataset, data_dir=data_dir(args.data_dir)), 0).test
        tests[dataset] = align_labels(test, runs.label_names)
    scores = {}
    for name, test in tests.items():
        scores[name] = {"examples": len(test)}
        for label, ensemble in (("runs", runs), ("refits", refitted)):
            probabilities = ensemble.predict_proba(test.texts)
            scores[name][label] = compute_metrics(test.labels, probabilities, ensemble.label_names,
                                                  report=False)["accuracy"]
    members = []
    for run, refit in zip(args.runs, refits):
        config, metrics = read_json(refit / "config.json"), read_json(refit / "metrics.json")
        members.append({"run": run, "refit": str(refit), "epochs": config["settings"]["train"]["epochs"],
                        "schedule_epochs": config["settings"]["train"]["schedule_epochs"],
                        "train_examples": config["data"]["train_examples"],
                        "run_test_accuracy": read_json(Path(run) / "metrics.json")["accuracy"],
                        "refit_test_accuracy": metrics["accuracy"], "refit_train_seconds": metrics["train_seconds"]})
    # Wall seconds of this invocation's `attnclf refit` calls: about 0 for refits it found finished.
    write_result(args.name, {"ensemble_accuracy": scores, "members": members, "refit_wall_seconds": seconds},
                 args.out)


if __name__ == "__main__":
    main()
