"""IMDB validation: the naive-Bayes n-gram branch trained alone, and mixed with an attention run's log-odds.

    python bench/ngram_branch_alone.py --threads 1
    python bench/ngram_branch_alone.py --threads 1 --mix runs/tune/imdb-len800   # a run of seed 0

What the `self-attn` n-gram branch (`nb_ngram_buckets`) reaches without the
attention branch: the same layer (`attnclf.models.ngrams.NaiveBayesNgrams`),
the same tokenizer settings and ratios, Adam 1e-3, batch 64, seed 0's split.
With ``--mix``, a trained run's validation probabilities are mixed in at a few
weights on the log-odds (the run must have been trained with seed 0, so that
its validation split is this one). Validation only: test is not read.
"""

from __future__ import annotations

import numpy as np
import torch

from attnclf.classifier import Classifier
from attnclf.models.ngrams import NaiveBayesNgrams
from attnclf.recipes import recipe_for
from attnclf.text import Tokenizer, TokenizerConfig
from attnclf.text.batching import BucketBatches

from common import parse_with_threads, parser, splits, write_result

MIX_WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.3, 0.5)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--buckets", type=int, default=2_097_152)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--mix", help="a run directory trained on imdb with seed 0")
    args = parse_with_threads(p)
    torch.manual_seed(0)
    data = splits("imdb", args.data_dir, 0)
    tokenizer = Tokenizer.train(data.train.texts, TokenizerConfig(**recipe_for("imdb")["tokenizer"]))
    train = BucketBatches(tokenizer.encode(data.train.texts), data.train.labels, batch_size=64, shuffle=True, seed=0)
    validation = BucketBatches(tokenizer.encode(data.validation.texts), data.validation.labels, batch_size=256)
    labels = np.asarray(data.validation.labels)

    branch = NaiveBayesNgrams(tokenizer.vocab_size, args.buckets, num_classes=2)
    branch.fit((b.input_ids, b.labels) for b in train)
    optimizer = torch.optim.Adam(branch.parameters(), lr=1e-3)
    history, best = [], None
    for epoch in range(args.epochs):
        train.set_epoch(epoch)
        for batch in train:
            loss = torch.nn.functional.cross_entropy(branch(batch.input_ids), batch.labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            log_odds = np.zeros(len(labels))
            for batch in validation:
                logits = branch(batch.input_ids)
                log_odds[batch.indices] = (logits[:, 1] - logits[:, 0]).numpy()
        accuracy = float(((log_odds > 0) == labels).mean())
        history.append({"epoch": epoch + 1, "val_accuracy": accuracy})
        print(f"epoch {epoch + 1}: validation accuracy {accuracy:.4f}", flush=True)
        if best is None or accuracy > best[0]:
            best = (accuracy, log_odds)

    result = {"buckets": args.buckets, "history": history, "best_validation_accuracy": best[0]}
    if args.mix:
        probabilities = Classifier.load(args.mix, device="cpu").predict_proba(data.validation.texts)
        attention_log_odds = np.log(probabilities[:, 1] + 1e-12) - np.log(probabilities[:, 0] + 1e-12)
        result["mix"] = {
            "run": args.mix,
            "run_validation_accuracy": float(((attention_log_odds > 0) == labels).mean()),
            "median_abs_log_odds": {"run": float(np.median(np.abs(attention_log_odds))),
                                    "branch": float(np.median(np.abs(best[1])))},
            "accuracy_by_run_weight": {str(w): float(((((1 - w) * best[1] + w * attention_log_odds) > 0) == labels)
                                                     .mean()) for w in MIX_WEIGHTS},
        }
    write_result("ngram_branch_alone", result, args.out)


if __name__ == "__main__":
    main()
