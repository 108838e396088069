"""Self-training on stsa.binary: students learn SST-2's sentences plus unlabelled review sentences a teacher labelled.

    python bench/self_training.py --teacher runs/bench-sst2-vectors/seed-{0,1,2} --n 20000 --seeds 0 1 2 \\
        --output runs/tune/selftrain --threads 1

The teacher (validated runs, averaged) labels sentences cut from IMDB's 50,000 unlabelled reviews; the N/2 it is
surest of in each class join SST-2's training sentences. Each student is its teacher seed's run again, the same
settings, vectors and seed, on that larger training file, validated on the teacher's validation split (stsa dev):
``attnclf train --train-file TRAIN --validation-file DEV`` with the teacher's recipe. No test file is given, so a
student's test accuracy is read only by an explicit ``attnclf evaluate STUDENTS --test-file OUTPUT/test.jsonl``.
Writes OUTPUT/pool.jsonl (every sentence with the teacher's probabilities; kept, so a rerun with another N reuses it),
the students in OUTPUT/nN-sS, and their best validation.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from attnclf.data.imdb import load_unsup
from attnclf.ensemble import Ensemble
from attnclf.rundir import atomic_write_bytes
from attnclf.training.run import DataSettings, align_labels, resume_settings, train_run
from attnclf.training.trainer import best_epoch

from common import data_dir, parser, splits, write_result

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


def write_jsonl(path: Path, rows: list[dict]) -> None:
    atomic_write_bytes(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8"))


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--teacher", nargs="+", required=True, help="the validated runs whose average labels the pool")
    p.add_argument("--n", type=int, required=True, help="pseudo-labelled sentences added, half per class")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="teacher seeds to retrain as students")
    p.add_argument("--output", default="runs/bench-self-training")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)

    teacher = Ensemble.load(args.teacher, device="cpu")
    data = splits("sst2-sentences", args.data_dir)
    pool_file = output / "pool.jsonl"  # every sentence with the teacher's probabilities, for any N
    if not pool_file.is_file():
        sentences = review_sentences(load_unsup([Path(data_dir(args.data_dir))]))
        print(f"{len(sentences):,} sentences from the unlabelled reviews; the teacher labels them", flush=True)
        probabilities = teacher.predict_proba(sentences)
        write_jsonl(pool_file, [{"text": text, "probabilities": [round(float(p), 6) for p in row]}
                                for text, row in zip(sentences, probabilities)])
    pool = [json.loads(line) for line in pool_file.read_text(encoding="utf-8").splitlines()]
    pseudo = pseudo_labelled(pool, teacher.label_names, args.n)

    def rows(dataset) -> list[dict]:
        dataset = align_labels(dataset, teacher.label_names)
        return [{"text": text, "label": teacher.label_names[label]} for text, label in zip(dataset.texts,
                                                                                           dataset.labels)]

    train_file, dev_file = output / f"train-{args.n}.jsonl", output / "dev.jsonl"
    write_jsonl(train_file, rows(data.train) + [{"text": r["text"], "label": r["label"]} for r in pseudo])
    write_jsonl(dev_file, rows(data.validation))
    write_jsonl(output / "test.jsonl", rows(data.test))  # for the one test reading the rule allows

    students = {}
    by_seed = {resume_settings(run).train.seed: run for run in args.teacher}
    for seed in args.seeds:
        settings = resume_settings(by_seed[seed], threads=args.threads)
        settings.data = DataSettings(train_file=str(train_file), validation_file=str(dev_file))
        settings = replace(settings, output=str(output / f"n{args.n}-s{seed}"), report=False)
        result = train_run(settings, progress=False)
        best = best_epoch(result.history, settings.train.monitor)
        students[seed] = {"run": settings.output, "best_epoch": best["epoch"],
                          "best_validation_accuracy": best["val_accuracy"],
                          "train_seconds": round(sum(h["seconds"] for h in result.history), 1)}
        print(f"seed {seed}: best validation {best['val_accuracy']:.4f} (epoch {best['epoch']})", flush=True)
    write_result(f"self_training-n{args.n}", {
        "teacher": args.teacher, "n": args.n, "pseudo_labelled": len(pseudo),
        "least_confidence_kept": min(r["confidence"] for r in pseudo), "train_examples": len(data.train) + len(pseudo),
        "students": students,
        "mean_best_validation_accuracy": float(np.mean([s["best_validation_accuracy"] for s in students.values()])),
    }, args.out)


if __name__ == "__main__":
    main()
