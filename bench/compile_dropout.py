"""Why a compiled encoder is slower than eager here: inductor's own dropout masks, or its generated code?

    python bench/compile_dropout.py          # 3 cases, each in its own process with a fresh inductor cache; < 8 min

The IMDB recipe's Transformer encoder alone (width 64, 4 heads, 1 layer, feed-forward 256, windows of 64 tokens),
on random inputs of 64 texts of 177, 353 and 800 tokens (the recipe's bucket lengths; each batch's texts of
random length, one at full length), forward and backward of the three batches as one step, ``dynamic=True``.
Three cases: dropout 0.2 as in the recipe, inductor drawing its own masks (its default); the same with
``fallback_random`` (the compiled graph calls eager's ``bernoulli_``); and dropout 0. In each, an eager encoder and
a compiled copy (same weights) take one warm-up step (the compiled one compiles there), then ``--repeats`` steps
each, alternated; CPU seconds of one thread, median. Prints one JSON line per case and writes them all to
``bench/results/compile-dropout.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = ("recipe_dropout", "fallback_random", "no_dropout")
LENGTHS = (177, 353, 800)


def measure(case: str, repeats: int) -> dict:
    """One case, in this process: eager and compiled steps alternated, medians of CPU seconds."""
    import torch
    import torch._inductor.config as inductor_config

    from attnclf.models.attention import TransformerEncoder

    torch.set_num_threads(1)
    torch.manual_seed(0)
    inductor_config.fallback_random = case == "fallback_random"
    eager = TransformerEncoder(64, 4, 1, 256, 0.0 if case == "no_dropout" else 0.2, attention_window=64)
    compiled = copy.deepcopy(eager)
    compiled.compile(dynamic=True)
    batches = []
    for length in LENGTHS:
        lengths = torch.randint(length // 2, length + 1, (64,))
        lengths[0] = length
        batches.append((torch.randn(64, length, 64, requires_grad=True), torch.arange(length)[None] < lengths[:, None]))

    def step(model) -> tuple[float, float]:
        started, forward = time.process_time(), 0.0
        for x, mask in batches:
            begun = time.process_time()
            y, _ = model(x, mask)
            forward += time.process_time() - begun
            y.sum().backward()
        return time.process_time() - started, forward

    began = time.process_time()
    step(compiled)
    compile_seconds = time.process_time() - began
    step(eager)
    times = {"eager": [], "compiled": []}
    for _ in range(repeats):
        for name, model in (("eager", eager), ("compiled", compiled)):
            times[name].append(step(model))
    result = {"case": case, "compile_warmup_cpu_s": round(compile_seconds, 1)}
    for name, steps in times.items():
        result[f"{name}_step_cpu_s"] = round(statistics.median(s for s, _ in steps), 3)
        result[f"{name}_forward_cpu_s"] = round(statistics.median(f for _, f in steps), 3)
    result["speed_ratio"] = round(result["eager_step_cpu_s"] / result["compiled_step_cpu_s"], 2)
    result["ratios_per_repeat"] = [round(e[0] / c[0], 2) for e, c in zip(times["eager"], times["compiled"])]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # (a child process's one case)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(measure(args.case, args.repeats)))
        return
    results = []
    for case in CASES:
        with tempfile.TemporaryDirectory(prefix="inductor-") as cache:  # every compile paid in full
            child = subprocess.run([sys.executable, __file__, "--case", case, "--repeats", str(args.repeats)],
                                   env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache,
                                        "TORCHINDUCTOR_COMPILE_THREADS": "1"},
                                   capture_output=True, text=True, check=True)
        results.append(json.loads(child.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    output = Path(__file__).parent / "results" / "compile-dropout.json"
    output.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
