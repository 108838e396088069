"""Where a training step of the default IMDB recipe spends its CPU time, by PyTorch operator.

    python bench/profile_step.py --threads 1      # about a minute: tokenising IMDB's training split, then 16 steps

The recipe's network (``self-attn`` with its n-gram branch counted on the sample; word vectors not counted: they
change where training starts, not what a step costs), trained as ``bench/compile.py``'s eager model is, on real
IMDB batches (``--train-examples`` reviews in the recipe's length-bucketed batches of 64). After ``--warmup`` steps,
``--steps`` steps run under ``torch.profiler``; the result lists the operators by self CPU time, with their share of
the profiled total, and the steps' CPU seconds by part (forward and loss; backward; clipping, AdamW and schedule).
For deciding what to speed up: a share is of this machine's CPU time, one thread unless ``--threads`` says otherwise.
"""

from __future__ import annotations

import time

import torch
from torch.profiler import ProfilerActivity, profile

from attnclf.models import build_model
from attnclf.training.trainer import count_ngram_prior

from common import cli_settings, parse_with_threads, parser, write_result
from compile import PARTS, _data, _Learner, _pass


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--train-examples", type=int, default=1536, help="training reviews sampled (default: 1536)")
    p.add_argument("--warmup", type=int, default=4, help="steps before profiling (default: 4)")
    p.add_argument("--steps", type=int, default=16, help="steps profiled (default: 16)")
    p.add_argument("--top", type=int, default=15, help="operators listed (default: 15)")
    args = parse_with_threads(p)
    settings = cli_settings("imdb", "unused")
    args.test_examples = 64  # (_data samples a test split too; no prediction is profiled)
    tokenizer, train, batches, _ = _data(args, settings)
    steps = [batches.batch(idx) for idx in batches.batch_indices()]
    if len(steps) < args.warmup + args.steps:
        raise SystemExit(f"{len(steps)} batches: give more --train-examples for {args.warmup} + {args.steps} steps")
    torch.manual_seed(settings.train.seed)
    model = build_model(settings.model, vocab_size=tokenizer.vocab_size, num_classes=len(train.label_names),
                        max_len=settings.tokenizer.max_len, **settings.model_config)
    count_ngram_prior(model, batches)
    learner = _Learner(model, settings, batches, train.label_names, len(steps))
    _pass(learner, steps[:args.warmup])
    measured = steps[args.warmup:args.warmup + args.steps]
    started = time.process_time()
    with profile(activities=[ProfilerActivity.CPU]) as profiled:
        seconds, _ = _pass(learner, measured)
    cpu = time.process_time() - started
    events = sorted(profiled.key_averages(), key=lambda event: -event.self_cpu_time_total)
    total = sum(event.self_cpu_time_total for event in events)
    write_result("profile_step", {
        "threads": args.threads, "steps": len(measured),
        "padded_tokens": sum(batch.input_ids.numel() for batch in measured),
        "cpu_seconds": round(cpu, 3),
        "cpu_seconds_by_part": {part: round(sum(seconds[part]), 3) for part in PARTS},
        "operators": [{"name": event.key, "self_cpu_share": round(event.self_cpu_time_total / total, 4),
                       "self_cpu_seconds": round(event.self_cpu_time_total / 1e6, 3), "calls": event.count}
                      for event in events[:args.top]],
    }, args.out)


if __name__ == "__main__":
    main()
