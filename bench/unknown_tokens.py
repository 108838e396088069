"""Unknown tokens: how many real texts hold words a recipe's vocabulary lacks, and what counting them costs /predict.

    python bench/unknown_tokens.py [--datasets sst2 imdb 20newsgroups] [--rounds 7]

Per dataset, its recipe's tokenizer is trained on the training texts a run of the recipe trains on (validation held
out, as `attnclf train --dataset NAME` holds it out), and the test texts are read as such a run reads them (truncated to
the recipe's max_len): the share of test texts with any `<unk>` token and with more than a quarter of them `<unk>`
(where `attnclf predict` notes a text). Then, on an untrained model of the recipe's shape (the same computation as a
trained one), one thread: the median milliseconds of a batch of 64 test texts through `predict_proba` (what /predict
ran before it counted) and through `predict(tokens=False)` (what it runs now), alternated, and of the counting alone.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch

from attnclf.classifier import Classifier
from attnclf.models import build_model
from attnclf.prediction import UNKNOWN_SHARE_NOTED, token_counts
from attnclf.recipes import RECIPES
from attnclf.text.tokenizer import Tokenizer, TokenizerConfig
from common import parser, splits, write_result

BATCH = 64


def median_ms(timings: list[float]) -> float:
    return round(statistics.median(timings) * 1000, 3)


def measure(dataset: str, data_dir: str | None, rounds: int) -> dict:
    data = splits(dataset, data_dir)
    recipe = RECIPES[dataset]
    tokenizer = Tokenizer.train(data.train.texts, TokenizerConfig(**recipe["tokenizer"]))
    counts = [token_counts(ids) for ids in tokenizer.encode(data.test.texts)]
    shares = np.array([unknown / read for unknown, read in counts])
    torch.manual_seed(0)
    model = build_model("self-attn", vocab_size=tokenizer.vocab_size, num_classes=data.train.num_classes,
                        max_len=tokenizer.config.max_len, **recipe["model_config"])
    clf = Classifier(model, tokenizer, data.train.label_names, torch.device("cpu"))
    texts = data.test.texts[:BATCH]
    clf.predict_proba(texts), clf.predict(texts, tokens=False)  # (warm-up)
    timings: dict[str, list[float]] = {"predict_proba": [], "predict_tokens_false": [], "counting_alone": []}
    ids = tokenizer.encode(texts)
    for _ in range(rounds):
        for name, run in (("predict_proba", lambda: clf.predict_proba(texts)),
                          ("predict_tokens_false", lambda: clf.predict(texts, tokens=False)),
                          ("counting_alone", lambda: [token_counts(row) for row in ids])):
            started = time.perf_counter()
            run()
            timings[name].append(time.perf_counter() - started)
    result = {
        "test_texts": len(shares),
        "any_unknown": round(float((shares > 0).mean()), 4),
        "past_the_noted_share": round(float((shares > UNKNOWN_SHARE_NOTED).mean()), 4),
        "median_unknown_share": round(float(np.median(shares)), 4),
        "tokens_per_text_median": int(np.median([read for _, read in counts])),
        "batch_ms": {name: median_ms(times) for name, times in timings.items()},
    }
    print(dataset, result, flush=True)
    return result


if __name__ == "__main__":
    p = parser(__doc__)
    p.add_argument("--datasets", nargs="+", default=["sst2", "imdb", "20newsgroups"])
    p.add_argument("--rounds", type=int, default=7, help="timed batches each way, alternated (default: 7)")
    args = p.parse_args()
    torch.set_num_threads(1)
    write_result("unknown_tokens", {"noted_share": UNKNOWN_SHARE_NOTED, "batch": BATCH,
                                    "datasets": {name: measure(name, args.data_dir, args.rounds)
                                                 for name in args.datasets}}, args.out)
