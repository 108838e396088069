"""Integrated gradients' per-token error: steps="auto" against a tight reference, text by text.

    python bench/ig_per_token.py RUN_DIR [--texts 16] [--seed 1] [--threads 1]

The run's own test split; the texts ``np.random.default_rng(SEED).choice(len(test), TEXTS, replace=False)`` picks,
encoded by the run's tokenizer and explained for their predicted class (as `attnclf explain` does) by
``attribute(model, ids, targets, "integrated-gradients", steps="auto")``, all in one call, its CPU seconds by
``time.process_time`` (one thread by default). Then, text by text, a tight reference: steps="auto" again with the
module's ``IG_TOLERANCE`` and ``IG_AUTO_BUDGET`` set to ``--reference-tolerance`` (1e-5) and ``--reference-budget``
(20,000) in this process only (``IG_TOKEN_TOLERANCE`` as it is). Per text: the per-token error max |auto -
reference| / max |reference|, how many of the reference's 5 highest-scoring positions are among auto's 5 (and of
its 5 largest in size), both completeness errors and the gradients each took. Summary: the per-token error's median,
max and count over 2%, the top 5's minima, auto's completeness error median, its gradients' median, mean
and max, its CPU seconds; the reference's gradients, completeness error and CPU seconds.

It runs on older code too: ``PYTHONPATH=OLD/src`` (say a ``git worktree`` of c434bed, before the per-token check)
explains with that checkout's attnclf, and the result names its commit. On IMDB's default run (16 reviews) the
references are most of the CPU: 43 s of "auto", 55 s of references (17 s of them one review at the budget), under
2 min wall (2026-11-28).
"""

from __future__ import annotations

import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import attnclf
from attnclf.classifier import Classifier
from attnclf.explain import methods
from attnclf.training.run_data import run_test_data

from common import data_dir, parse_with_threads, parser, write_result

TOP = 5  # the top positions compared
OFF = 0.02  # a per-token error above this is counted


@contextmanager
def tight(tolerance: float, budget: int):
    """steps="auto" refined to ``tolerance`` completeness within ``budget`` gradients, for the block only."""
    saved = methods.IG_TOLERANCE, methods.IG_AUTO_BUDGET
    methods.IG_TOLERANCE, methods.IG_AUTO_BUDGET = tolerance, budget
    try:
        yield
    finally:
        methods.IG_TOLERANCE, methods.IG_AUTO_BUDGET = saved


def top_positions(scores: np.ndarray) -> set[int]:
    """The ``TOP`` highest-scoring positions (``Explanation.top_tokens``'s order)."""
    return set(np.argsort(-scores, kind="stable")[:TOP].tolist())


def strongest_positions(scores: np.ndarray) -> set[int]:
    """The ``TOP`` positions with the largest scores in size (``Explanation.strongest_tokens``'s: the strongest
    colours), evidence against the class too."""
    return top_positions(np.abs(scores))


def per_token_error(auto: np.ndarray, reference: np.ndarray) -> float:
    """max |auto - reference| over the text's tokens, as a share of the reference's largest score in size."""
    return float(np.abs(auto - reference).max() / max(np.abs(reference).max(), 1e-12))


def code_commit() -> str | None:
    """The commit of the checkout whose attnclf was imported (PYTHONPATH may name another than this script's), with
    "+changes" if the package's tracked files differ from it; None outside git."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=Path(attnclf.__file__).parent, capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        changed = git("status", "--porcelain", "--untracked-files=no", "--", ".")
        return git("rev-parse", "HEAD") + ("+changes" if changed else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def main() -> None:
    p = parser(__doc__)
    p.add_argument("run_dir")
    p.add_argument("--texts", type=int, default=16, help="test texts explained (default 16)")
    p.add_argument("--seed", type=int, default=1, help="the picking generator's seed (default 1)")
    p.add_argument("--reference-tolerance", type=float, default=1e-5)
    p.add_argument("--reference-budget", type=int, default=20_000)
    args = parse_with_threads(p)
    clf = Classifier.load(args.run_dir, device="cpu")
    saved = clf.config["settings"]["data"]
    test = run_test_data(clf.config, clf.label_names, test_only=True,
                         data_dir=data_dir(args.data_dir or saved.get("data_dir")))
    picked = np.random.default_rng(args.seed).choice(len(test), args.texts, replace=False)
    texts = [test.texts[i] for i in picked]
    ids = clf.tokenizer.encode(texts)
    targets = clf.predict_proba(texts).argmax(axis=1)

    started = time.process_time()
    auto = methods.attribute(clf.model, ids, targets, "integrated-gradients", steps="auto",
                             temperature=clf.temperature)
    auto_cpu = time.process_time() - started
    print(f"auto: {auto_cpu:.1f} CPU s, gradients {auto.steps.astype(int).tolist()}", flush=True)

    rows = []
    reference_cpu = 0.0
    with tight(args.reference_tolerance, args.reference_budget):
        for i, text_ids in enumerate(ids):
            # (one text a call: each reference's progress and CPU seconds show, and one slow text holds no others)
            started = time.process_time()
            reference = methods.attribute(clf.model, [text_ids], targets[i:i + 1], "integrated-gradients",
                                          steps="auto", temperature=clf.temperature)
            seconds = time.process_time() - started
            reference_cpu += seconds
            rows.append({"test_index": int(picked[i]), "tokens": len(text_ids),
                         "per_token_error": per_token_error(auto.scores[i], reference.scores[0]),
                         "top5_shared": len(top_positions(auto.scores[i]) & top_positions(reference.scores[0])),
                         "strongest5_shared": len(strongest_positions(auto.scores[i])
                                                  & strongest_positions(reference.scores[0])),
                         "completeness_error": float(auto.completeness_error[i]),
                         "log_odds_change": float(auto.log_odds_change[i]),
                         "gradients": int(auto.steps[i]),
                         "reference_completeness_error": float(reference.completeness_error[0]),
                         "reference_gradients": int(reference.steps[0]),
                         "reference_cpu_seconds": round(seconds, 2)})
            print(f"{i + 1}/{len(ids)}", rows[-1], flush=True)

    errors = np.array([row["per_token_error"] for row in rows])
    gradients = np.array([row["gradients"] for row in rows])
    summary = {
        "per_token_error": {"median": float(np.median(errors)), "max": float(errors.max()),
                            f"over_{OFF:.0%}": int((errors > OFF).sum())},
        "top5_shared_min": min(row["top5_shared"] for row in rows),
        "strongest5_shared_min": min(row["strongest5_shared"] for row in rows),
        "completeness_error_median": float(np.median([row["completeness_error"] for row in rows])),
        "gradients": {"median": float(np.median(gradients)), "mean": float(gradients.mean()),
                      "max": int(gradients.max())},
        "cpu_seconds": round(auto_cpu, 2),
        "reference": {"gradients_min": min(row["reference_gradients"] for row in rows),
                      "gradients_max": max(row["reference_gradients"] for row in rows),
                      "completeness_error_max": max(row["reference_completeness_error"] for row in rows),
                      "cpu_seconds": round(reference_cpu, 2)},
    }
    dataset = saved.get("dataset") or Path(saved.get("train_file") or args.run_dir).stem
    write_result(f"ig_per_token-{dataset}", {
        "run": args.run_dir, "code": code_commit(), "texts": args.texts, "seed": args.seed,
        "reference_tolerance": args.reference_tolerance, "reference_budget": args.reference_budget,
        # (None: code from before the per-token check, such as the "before" rows' c434bed, which this script runs on)
        "token_tolerance": getattr(methods, "IG_TOKEN_TOLERANCE", None),
        "summary": summary, "per_text": rows}, args.out)


if __name__ == "__main__":
    main()
