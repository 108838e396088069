"""Average the probabilities of ensembles trained on different data for one label set ("routes").

    python bench/routes.py --dataset sst2-sentences --split validation --name routes-stsa-dev \\
        --route runs/bench-sst2-vectors/seed-{0,1,2} --route runs/tune/glue/fnb-s{0..4} runs/tune/glue/fnbvec4-s{0..4}

An ensemble (``attnclf evaluate RUNS``) refuses runs trained on other data than each other: its members are seeds of
one recipe. Here each ``--route`` is such an ensemble, and the routes, which learned from different texts (SST-2's
sentences, GLUE's phrases), are averaged with equal weight, so a route with ten members counts as much as one with
three. Scores each route alone and the route average on ``--dataset``'s ``--split``.
"""

from __future__ import annotations

import numpy as np

from attnclf.ensemble import Ensemble
from attnclf.evaluation.metrics import compute_metrics
from attnclf.training.run_data import align_labels

from common import parser, splits, write_result


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--route", nargs="+", action="append", required=True, metavar="RUN",
                   help="one route's run directories (one ensemble); give --route once per route")
    p.add_argument("--dataset", required=True, help="the dataset to score on")
    p.add_argument("--split", choices=["validation", "test"], required=True)
    p.add_argument("--name", required=True, help="result file bench/results/NAME.json")
    args = p.parse_args()

    routes = [Ensemble.load(runs, device="cpu") for runs in args.route]
    for runs, route in zip(args.route, routes):
        if route.label_names != routes[0].label_names:
            raise SystemExit(f"{runs[0]} has labels {route.label_names}, {args.route[0][0]} {routes[0].label_names}")
    data = getattr(splits(args.dataset, args.data_dir), args.split)
    data = align_labels(data, routes[0].label_names)
    probabilities = [route.predict_proba(data.texts) for route in routes]

    def accuracy(probability: np.ndarray) -> dict:
        metrics = compute_metrics(data.labels, probability, routes[0].label_names, report=False)
        return {"accuracy": metrics["accuracy"], "correct": int(round(metrics["accuracy"] * len(data)))}

    result = {"dataset": args.dataset, "split": args.split, "examples": len(data),
              "routes": [{"runs": runs, **accuracy(probability)} for runs, probability in zip(args.route, probabilities)],
              "route_average": accuracy(np.mean(probabilities, axis=0))}
    print(result["routes"], result["route_average"])
    write_result(args.name, result, args.out)


if __name__ == "__main__":
    main()
