"""BPE tokenizers trained on the same IMDB reviews in separate processes: how many differ, and how fast they train.

    python bench/bpe_determinism.py [--reviews 4000] [--vocab-sizes 1000 8000 30000] [--processes 10]

Each child process trains attnclf's ``--tokenizer bpe`` (min_frequency 2) on the first --reviews training
reviews of ``attnclf train --dataset imdb``'s split, then encodes them, and reports the sha256 of the
tokenizer's JSON, the seconds ``Tokenizer.train`` took (cleaning included), the seconds ``encode`` took and
the mean tokens per review. One sha256 per vocabulary size: the same texts gave the same tokenizer in every
process. Run it from a checkout before and after BPE marked word starts to compare the two.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(texts_file: str, vocab_size: int) -> None:
    from attnclf.text.tokenizer import Tokenizer, TokenizerConfig

    texts = json.loads(Path(texts_file).read_text(encoding="utf-8"))
    started = time.perf_counter()
    tokenizer = Tokenizer.train(texts, TokenizerConfig(kind="bpe", vocab_size=vocab_size, min_frequency=2))
    trained = time.perf_counter() - started
    started = time.perf_counter()
    lengths = [len(ids) for ids in tokenizer.encode(texts, max_len=10 ** 9)]
    encoded = time.perf_counter() - started
    print(json.dumps({"sha256": hashlib.sha256(tokenizer.backend.to_str().encode()).hexdigest(),
                      "train_s": trained, "encode_s": encoded, "tokens_per_review": statistics.mean(lengths)}))


def main() -> None:
    from common import parser, splits, write_result

    p = parser(__doc__.splitlines()[0])
    p.add_argument("--reviews", type=int, default=4000)
    p.add_argument("--vocab-sizes", type=int, nargs="+", default=[1000, 8000, 30000])
    p.add_argument("--processes", type=int, default=10)
    p.add_argument("--threads", type=int, default=1, help="the tokenizers library's threads (RAYON_NUM_THREADS)")
    args = p.parse_args()
    texts = list(splits("imdb", args.data_dir).train.texts[: args.reviews])
    result = {"reviews": len(texts), "characters": sum(map(len, texts)), "threads": args.threads, "vocab_sizes": {}}
    environment = {**os.environ, "RAYON_NUM_THREADS": str(args.threads)}
    with tempfile.TemporaryDirectory() as folder:
        texts_file = Path(folder) / "texts.json"
        texts_file.write_text(json.dumps(texts), encoding="utf-8")
        for vocab_size in args.vocab_sizes:
            runs = []
            for _ in range(args.processes):  # one after another: each times its training alone
                done = subprocess.run([sys.executable, __file__, "--child", str(texts_file), str(vocab_size)],
                                      capture_output=True, text=True, env=environment, check=True)
                runs.append(json.loads(done.stdout))
            result["vocab_sizes"][vocab_size] = {
                "distinct_tokenizers": len({run["sha256"] for run in runs}),
                "train_s_median": round(statistics.median(run["train_s"] for run in runs), 2),
                "encode_s_median": round(statistics.median(run["encode_s"] for run in runs), 2),
                "tokens_per_review": sorted({round(run["tokens_per_review"], 1) for run in runs})}
            print(vocab_size, result["vocab_sizes"][vocab_size], flush=True)
    write_result("bpe_determinism", result, args.out)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]))
    else:
        main()
