"""Hardware efficiency: matrix-multiply peak (fp32, bf16) vs the FLOP/s a training step achieves.

    python bench/hardware.py                      # about 2 minutes on an idle machine

The peak is the best of several 2048 x 2048 matmuls; the training figure runs
real IMDB batches of the default recipe (forward, backward, AdamW step) and
counts only the matmul FLOPs of the network (3 x forward: linear layers,
attention scores and mixing, pooling, head), so the fraction is a lower bound
on how busy the multiply units are: embedding look-ups and the optimizer's
update of the embedding tables cost time but no matmul FLOPs. Rates are given
per wall second and per CPU second of this process; on a shared machine the
one-thread CPU-second figures are the ones that do not depend on other jobs.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from attnclf.models import build_model
from attnclf.text.batching import BucketBatches
from attnclf.text.tokenizer import Tokenizer

from common import cli_settings, parser, splits, write_result


def _clocks() -> tuple[float, float]:
    # CPU time excludes the time other jobs hold the core; with one thread it is the honest clock.
    return time.perf_counter(), time.process_time()


def matmul_peak(dtype: torch.dtype, size: int = 2048, repeats: int = 12) -> dict:
    """Best GFLOP/s of ``size``-square matmuls in ``dtype``, per wall second and per CPU second."""
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        wall, cpu = _clocks()
        a @ b
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    flops = 2 * size**3
    return {"wall": round(flops / best_wall / 1e9, 1), "cpu": round(flops / best_cpu / 1e9, 1)}


def forward_flops(config: dict, lengths: np.ndarray) -> float:
    """Matmul FLOPs of one self-attn forward pass over a batch padded to ``lengths.max()``; with ``attention_window``
    (block-local attention) each query scores the keys of its own block alone.

    >>> config = {"d_model": 4, "ff_dim": 8, "layers": 1, "num_classes": 2}
    >>> forward_flops(config | {"attention_window": 2}, np.array([4])) < forward_flops(config, np.array([4]))
    True
    """
    d, ff, layers, classes = config["d_model"], config["ff_dim"], config["layers"], config["num_classes"]
    length, window = int(lengths.max()), config.get("attention_window", 0)
    tokens = len(lengths) * length  # padded positions are computed too
    per_token = layers * 2 * (4 * d * d + 2 * d * ff) + 2 * d  # qkv + proj + ffn, pooling score
    keys = window if 0 < window < length else length
    attention = layers * 2 * 2 * tokens * keys * d  # QK^T and weights @ V
    return tokens * per_token + attention + len(lengths) * (2 * d + 2 * d * classes)


def training_flops_per_second(settings, tokenizer: Tokenizer, ids, labels, steps: int, bf16: bool) -> dict:
    torch.manual_seed(0)
    model = build_model(settings.model, vocab_size=tokenizer.vocab_size, max_len=settings.tokenizer.max_len,
                        **settings.model_config)
    config = model.config.to_dict()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = iter(BucketBatches(ids, labels, settings.train.batch_size, shuffle=True, seed=0))
    model.train()
    flops, wall_seconds, cpu_seconds = 0.0, 0.0, 0.0
    for step in range(steps + 2):
        batch = next(batches)
        wall, cpu = _clocks()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(batch.input_ids, batch.attention_mask).logits
        loss = torch.nn.functional.cross_entropy(logits.float(), batch.labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step >= 2:  # the first steps warm up allocators and kernels
            wall_seconds += time.perf_counter() - wall
            cpu_seconds += time.process_time() - cpu
            flops += 3 * forward_flops(config, batch.attention_mask.sum(1).numpy())
    return {"steps": steps, "wall_seconds": round(wall_seconds, 2), "cpu_seconds": round(cpu_seconds, 2),
            "wall": round(flops / wall_seconds / 1e9, 2), "cpu": round(flops / cpu_seconds / 1e9, 2)}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = p.parse_args()
    settings = cli_settings("imdb", "unused")
    if settings.model != "self-attn":
        raise SystemExit("the FLOP count here is written for self-attn")
    train = splits("imdb", settings.data.data_dir, 0).train
    tokenizer = Tokenizer.train(train.texts, settings.tokenizer)
    ids = tokenizer.encode(train.texts)
    results = {}
    for threads in args.threads:
        torch.set_num_threads(threads)
        row = {}
        for name, dtype, bf16 in (("fp32", torch.float32, False), ("bf16", torch.bfloat16, True)):
            peak = matmul_peak(dtype)
            achieved = training_flops_per_second(settings, tokenizer, ids, train.labels, args.steps, bf16)
            row[name] = {"matmul_peak_gflops": peak, "training_gflops": achieved,
                         "fraction_of_peak": {clock: round(achieved[clock] / peak[clock], 4) for clock in peak}}
            print(threads, name, row[name], flush=True)
        results[f"threads_{threads}"] = row
    write_result("hardware", {"model_config": settings.model_config, "tokenizer_max_len": settings.tokenizer.max_len,
                              "batch_size": settings.train.batch_size, "results": results}, args.out)


if __name__ == "__main__":
    main()
