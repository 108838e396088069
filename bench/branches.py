"""How a `self-attn` run with the n-gram branch decides: each branch alone, and which one wins.

    python bench/branches.py runs/bench-imdb --threads 1

For the run's own validation split (its data settings and seed) and its test split:
accuracy of the whole model, of the attention branch's logits alone and of the
n-gram branch's alone (argmax of one branch's share, see
``SelfAttentionClassifier.branch_logits``), the median absolute margin each
branch gives its own choice, and how often the two branches disagree and which
one the model then follows. Analysis of a trained model; nothing is tuned.
"""

from __future__ import annotations

import numpy as np
import torch

from attnclf.classifier import Classifier
from attnclf.models.windows import window_config
from attnclf.text.windows import text_batches
from attnclf.training.run_data import load_data
from attnclf.training.settings import DataSettings

from common import data_dir, parse_with_threads, parser, write_result


def branch_logits(clf: Classifier, texts: list[str]) -> dict[str, np.ndarray]:
    parts: dict[str, list[np.ndarray]] = {}
    order: list[np.ndarray] = []
    with torch.inference_mode():
        for batch in text_batches(clf.tokenizer, texts, batch_size=128):
            summary = clf.model.summarize(batch.input_ids, batch.attention_mask).vector
            for name, logits in clf.model.branch_logits(summary).items():
                parts.setdefault(name, []).append(logits.float().numpy())
            order.append(batch.indices)
    where = np.argsort(np.concatenate(order))
    return {name: np.concatenate(chunks)[where] for name, chunks in parts.items()}


def describe(parts: dict[str, np.ndarray], labels: np.ndarray) -> dict:
    whole = sum(parts.values())
    choice = {name: logits.argmax(axis=1) for name, logits in parts.items()}
    attention, ngram = choice["attention"], choice["n-gram"]
    disagree = attention != ngram
    model = whole.argmax(axis=1)

    def margin(logits: np.ndarray) -> float:
        top2 = np.sort(logits, axis=1)[:, -2:]
        return float(np.median(top2[:, 1] - top2[:, 0]))

    return {
        "texts": len(labels),
        "accuracy": {"model": float((model == labels).mean()),
                     **{f"{name} alone": float((c == labels).mean()) for name, c in choice.items()}},
        "median_margin": {name: margin(logits) for name, logits in parts.items()},
        "branches_disagree": float(disagree.mean()),
        "when_they_disagree": {
            "model follows attention": float((model[disagree] == attention[disagree]).mean()) if disagree.any() else None,
            "attention right": float((attention[disagree] == labels[disagree]).mean()) if disagree.any() else None,
            "n-gram right": float((ngram[disagree] == labels[disagree]).mean()) if disagree.any() else None,
        },
    }


def main() -> None:
    p = parser(__doc__)
    p.add_argument("run_dir")
    args = parse_with_threads(p)
    clf = Classifier.load(args.run_dir, device="cpu")
    if window_config(clf.model) is not None:
        raise SystemExit(f"{args.run_dir} reads windows (--windows); this analysis reads truncated texts only")
    if getattr(clf.model, "ngram_logits", None) is None:
        raise SystemExit(f"{args.run_dir}: the model has no n-gram branch (nb_ngram_buckets)")
    seed = clf.config["settings"]["train"]["seed"]
    saved = clf.config["settings"]["data"]
    data = load_data(DataSettings(**{**saved, "data_dir": data_dir(args.data_dir or saved.get("data_dir"))}), seed)
    result = {"run": args.run_dir, "dataset": saved.get("dataset") or saved.get("train_file"), "seed": seed}
    for split in ("validation", "test"):
        part = getattr(data, split)
        if part is None:
            continue
        labels = np.array([clf.label_names.index(part.label_names[y]) for y in part.labels])
        result[split] = describe(branch_logits(clf, list(part.texts)), labels)
    write_result("branches", result, args.out)


if __name__ == "__main__":
    main()
