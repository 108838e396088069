"""One optimiser step over the default IMDB recipe's parameter shapes, per PyTorch implementation.

    python bench/optimizer_step.py --threads 1

Why it exists: the recipe's 262,144 x 64 bigram table makes the optimiser step
a large share of a training step; this compares AdamW's default loop,
``foreach`` and ``fused`` kernels (attnclf's trainer uses fused on CPU and CUDA).
Median CPU milliseconds per step over --steps steps, after one warm-up step.
"""

from __future__ import annotations

import statistics
import time

import torch

from common import parse_with_threads, parser, write_result

SHAPES = [(262144, 64), (30000, 64), (64, 256), (256, 64), (192, 64), (64, 64)]  # bigrams, words, the block


def step_ms(steps: int, **kind) -> float:
    params = [torch.nn.Parameter(torch.randn(shape)) for shape in SHAPES]
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.AdamW(params, lr=1e-3, **kind)
    optimizer.step()
    times = []
    for _ in range(steps):
        started = time.process_time()
        optimizer.step()
        times.append((time.process_time() - started) * 1000)
    return round(statistics.median(times), 2)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    args = parse_with_threads(p)
    kinds = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}
    result = {"parameters": sum(a * b for a, b in SHAPES), "steps": args.steps,
              "median_cpu_ms_per_step": {name: step_ms(args.steps, **kind) for name, kind in kinds.items()}}
    write_result("optimizer_step", result, args.out)


if __name__ == "__main__":
    main()
