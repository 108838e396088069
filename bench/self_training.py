"""Self-training: students learn their training texts plus unlabelled IMDB reviews a teacher labelled.

    python bench/self_training.py --teacher runs/bench-sst2-vectors/seed-{0,1,2} --n 20000 --seeds 0 1 2 \\
        --output runs/tune/selftrain --threads 1
    python bench/self_training.py --dataset imdb --teacher runs/bench-imdb runs/tune/imdb-count-s{1,2} --n 50000 \\
        --output runs/tune/selftrain-imdb --threads 1

The pool is IMDB's 50,000 unlabelled reviews: for ``sst2-sentences`` the sentences cut from them, for ``imdb`` the
reviews whole. A teacher labels the pool; the N/2 it is surest of in each class join the training texts. For SST-2
the teacher is the runs averaged (they all validate on stsa dev). For IMDB each seed holds out its own validation
reviews, which the other seeds trained on, so each student's teacher is its own seed's run alone.
Each student is its teacher seed's run again, the same settings, vectors and seed, on that larger training file,
validated on the teacher's validation split: ``attnclf train --train-file TRAIN --validation-file DEV`` with the
teacher's recipe. No test file is given, so a student's test accuracy is read only by an explicit
``attnclf evaluate STUDENTS --test-file OUTPUT/test.jsonl``. Writes OUTPUT/pool*.jsonl (every pool text with the
teacher's probabilities; kept, so a rerun with another N reuses it), the students in OUTPUT/nN-sS, and their best
validation.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from attnclf.data.imdb import load_unsup
from attnclf.ensemble import Ensemble
from attnclf.rundir import read_json
from attnclf.training.run import train_run
from attnclf.training.run_data import held_out_fingerprint, texts_fingerprint
from attnclf.training.settings import DataSettings, resume_settings
from attnclf.training.trainer import best_epoch

from common import data_dir, labelled_rows, parse_with_threads, parser, splits, write_jsonl, write_result

SENTENCE_END = re.compile(r"<br\s*/?>|(?<=[.!?])\s+")
MIN_WORDS, MAX_WORDS = 5, 40


def review_sentences(reviews: list[str]) -> list[str]:
    """Sentences of 5-40 words from ``reviews``, lowercased, each once, in first-seen order."""
    seen: dict[str, None] = {}
    for review in reviews:
        for sentence in SENTENCE_END.split(review):
            sentence = " ".join(sentence.lower().split())
            if MIN_WORDS <= len(sentence.split()) <= MAX_WORDS:
                seen.setdefault(sentence)
    return list(seen)


def pseudo_labelled(pool: list[dict], label_names: list[str], n: int) -> list[dict]:
    """The ``n // 2`` sentences of ``pool`` the teacher is surest of in each class, with its label."""
    probabilities = np.array([row["probabilities"] for row in pool])
    labels = probabilities.argmax(axis=1)
    rows = []
    for label, name in enumerate(label_names):
        ours = np.flatnonzero(labels == label)
        surest = ours[np.argsort(-probabilities[ours, label], kind="stable")[:n // 2]]
        rows += [{"text": pool[i]["text"], "label": name, "confidence": float(probabilities[i, label])}
                 for i in sorted(surest)]
    return rows


def labelled_pool(output: Path, name: str, teacher: Ensemble, texts) -> list[dict]:
    """``texts()`` with ``teacher``'s probabilities, from OUTPUT/NAME if an earlier run wrote it."""
    pool_file = output / name
    if not pool_file.is_file():
        texts = texts()
        print(f"the teacher labels {len(texts):,} unlabelled texts", flush=True)
        probabilities = teacher.predict_proba(texts)
        write_jsonl(pool_file, [{"text": text, "probabilities": [round(float(p), 6) for p in row]}
                                for text, row in zip(texts, probabilities)])
    with open(pool_file, encoding="utf-8") as lines:  # (not splitlines: a review may hold U+2028)
        return [json.loads(line) for line in lines]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--dataset", choices=["sst2-sentences", "imdb"], default="sst2-sentences")
    p.add_argument("--teacher", nargs="+", required=True, help="the validated runs, one per seed")
    p.add_argument("--n", type=int, required=True, help="pseudo-labelled texts added, half per class")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="teacher seeds to retrain as students")
    p.add_argument("--output", default="runs/bench-self-training")
    args = parse_with_threads(p)
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    reviews = lambda: load_unsup([Path(data_dir(args.data_dir))])  # noqa: E731 (read only when a pool is new)
    by_seed = {resume_settings(run).train.seed: run for run in args.teacher}

    if args.dataset == "imdb":
        def teacher_of(seed: int) -> tuple[Ensemble, list[dict]]:
            teacher = Ensemble.load([by_seed[seed]], device="cpu")
            return teacher, labelled_pool(output, f"pool-s{seed}.jsonl", teacher, reviews)
    else:
        shared = Ensemble.load(args.teacher, device="cpu")
        shared_pool = labelled_pool(output, "pool.jsonl", shared, lambda: review_sentences(reviews()))

        def teacher_of(seed: int) -> tuple[Ensemble, list[dict]]:
            return shared, shared_pool

    students, added = {}, {}
    for seed in args.seeds:
        teacher, pool = teacher_of(seed)
        pseudo = pseudo_labelled(pool, teacher.label_names, args.n)
        data = splits(args.dataset, args.data_dir, seed=seed)
        recorded = held_out_fingerprint(read_json(Path(by_seed[seed]) / "config.json"))
        if recorded is not None and recorded != texts_fingerprint(data.validation):
            raise SystemExit(f"{by_seed[seed]} held out other validation texts than {args.dataset} seed {seed} gives")

        train_file, dev_file = output / f"train-{args.n}-s{seed}.jsonl", output / f"dev-s{seed}.jsonl"
        names = teacher.label_names
        write_jsonl(train_file, labelled_rows(data.train, names)
                    + [{"text": r["text"], "label": r["label"]} for r in pseudo])
        write_jsonl(dev_file, labelled_rows(data.validation, names))
        # (the test file, for the one test reading the rule allows)
        write_jsonl(output / "test.jsonl", labelled_rows(data.test, names))

        settings = resume_settings(by_seed[seed], threads=args.threads)
        settings.data = DataSettings(train_file=str(train_file), validation_file=str(dev_file))
        settings = replace(settings, output=str(output / f"n{args.n}-s{seed}"), report=False)
        result = train_run(settings, progress=False)
        best = best_epoch(result.history, settings.train.monitor)
        students[seed] = {"run": settings.output, "best_epoch": best["epoch"],
                          "best_validation_accuracy": best["val_accuracy"],
                          "train_seconds": round(sum(h["seconds"] for h in result.history), 1),
                          "train_examples": len(data.train) + len(pseudo),
                          "least_confidence_kept": min(r["confidence"] for r in pseudo)}
        added[seed] = len(pseudo)
        print(f"seed {seed}: best validation {best['val_accuracy']:.4f} (epoch {best['epoch']})", flush=True)
    write_result(f"self_training-n{args.n}" if args.dataset == "sst2-sentences" else f"self_training-imdb-n{args.n}", {
        "dataset": args.dataset, "teacher": args.teacher, "n": args.n, "pseudo_labelled": added,
        "students": students,
        "mean_best_validation_accuracy": float(np.mean([s["best_validation_accuracy"] for s in students.values()])),
    }, args.out)


if __name__ == "__main__":
    main()
