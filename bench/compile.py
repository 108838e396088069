"""torch.compile (inductor) against eager PyTorch for the default IMDB recipe: training steps, prediction, parity.

    python bench/compile.py --threads 1       # 13 CPU min, 8.5 in the passes that compile; 15 min wall at load 2-3
    python bench/compile.py --threads 1 --part encoder     # 8.8 CPU min, 4.9 compiling; 10 min wall at load 2

The recipe's network (``self-attn``, built from the recipe as ``hf_peer`` builds it, word vectors not counted:
they change where training starts, not what a step costs), its n-gram branch counted on the sample, trained on
real IMDB batches: ``--train-examples`` training reviews in the recipe's length-bucketed batches of 64 (a pass
is one step on each), and predicted on ``--test-examples`` test reviews in the batches ``Classifier.predict`` uses
(64 texts, at most 16,384 padded tokens). One child process per compiled variant (``torch.compile(model)``,
whose first recompile for a new shape makes it dynamic, and ``dynamic=True``), each with a fresh inductor
cache, so every compile is paid in full; inductor compiles in the process (``compile_threads = 1``), and its
gcc runs count as the child's children. ``--part encoder`` compiles only the Transformer encoder (the
self-attention blocks and final norm, ``model.encoder`` compiled in place, so the weights and their names stay the
eager model's), the embeddings, the n-gram branch, pooling and head running eagerly in both models; its result
goes to ``compile-encoder.json``.

In each child an eager model and a compiled copy of it (same weights, own fused AdamW and schedule) first take
one warm-up pass over the batches (the compiled one compiles there, and again on any shape or mode it has not
seen), then ``--repeats`` passes each, alternated (eager, compiled, eager, ...), every step timed in CPU seconds
of this process, whole and by part: forward and loss; backward; gradient clipping, AdamW step and schedule step,
as ``Trainer`` steps. Prediction is ``predict_probabilities`` over the test batches, the compiled copy holding
the eager model's weights; its warm-up pass compiles the inference graphs. Eager prediction runs as shipped, in
chunks of 2,048 tokens (``in_chunks``); compiled prediction runs whole batches, because dynamo would compile a
graph for every number of chunks it meets (the result lists the test batches' (token-wise, attention-block)
chunk counts: 9 pairs on the default sample, against dynamo's default limit of 8 compiles of a function).
Dynamo's counters tell how many frames were compiled (the first compile and every recompile), the graph breaks
and whether the recompile limit stopped it compiling (the frame then runs eagerly).

Parity: the logits of the two models on every test batch (same weights, inference mode), and a third child
that trains both from the same weights and the same generator state for ``--parity-steps`` steps with
inductor's ``fallback_random`` (the compiled graph draws dropout masks with eager's generator; by default it
draws its own, so the two would train on different masks): each step's loss and, after the last step, the
largest difference of any weight.
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import resource
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn

from attnclf.evaluation.predict import predict_probabilities
from attnclf.models import attention, build_model
from attnclf.text.batching import EVAL_MAX_TOKENS, BucketBatches
from attnclf.text.tokenizer import Tokenizer
from attnclf.training.trainer import _make_optimizer, _make_schedule, _WeightedLoss, count_ngram_prior

from common import alternate_children, cli_settings, parent_args, parser, peak_rss_mb, sample, splits, write_result

VARIANTS = {"default": {}, "dynamic": {"dynamic": True}}
PREDICT_BATCH_SIZE = 64  # Classifier's, which `attnclf predict` and `evaluate` use
PARTS = ("forward", "backward", "optimizer")  # forward + loss; zero_grad + backward; clipping, AdamW, schedule


def _cpu() -> tuple[float, float]:
    """CPU seconds of this process, and of its finished children: inductor runs gcc as a child process."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class _LimitWarnings(logging.Handler):
    """Counts dynamo's "hit config.recompile_limit" warnings: past the limit a frame runs eagerly."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.hits = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.hits += "recompile_limit" in record.getMessage()


def _dynamo_counts(limit: _LimitWarnings) -> dict:
    from torch._dynamo.utils import counters

    return {"frames_compiled": counters["frames"]["ok"], "unique_graphs": counters["stats"]["unique_graphs"],
            "graph_breaks": sum(counters["graph_break"].values()), "recompile_limit_hits": limit.hits}


def _since(before: dict, after: dict) -> dict:
    return {key: after[key] - before[key] for key in after}


class _Learner:
    """A model with its own optimiser, schedule and loss, stepped as ``Trainer._train_epoch`` steps it."""

    def __init__(self, model: nn.Module, settings, train: BucketBatches, label_names: list[str], total_steps: int):
        self.model, self.grad_clip = model, settings.train.grad_clip
        self.optimizer = _make_optimizer(model, settings.train)  # fused AdamW, decay on matrices only
        self.schedule = _make_schedule(self.optimizer, settings.train, total_steps)
        self.loss_fn = _WeightedLoss(train, label_names, settings.train, multi_label=False)

    def step(self, batch) -> tuple[float, dict[str, float]]:
        """One training step: the batch's mean loss before it, and the CPU seconds of its parts."""
        clock = [time.process_time()]
        logits = self.model(batch.input_ids, batch.attention_mask).logits
        summed = self.loss_fn.summed(logits.float(), batch.labels, batch.indices)
        clock.append(time.process_time())
        self.optimizer.zero_grad(set_to_none=True)
        (summed / self.loss_fn.weight(batch.indices)).backward()
        clock.append(time.process_time())
        if self.grad_clip:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        self.schedule.step()
        clock.append(time.process_time())
        parts = dict(zip(PARTS, np.diff(clock).tolist()))
        return float(summed.detach()) / len(batch.indices), {"step": clock[-1] - clock[0], **parts}


def _pass(learner: _Learner, batches: list) -> tuple[dict[str, list[float]], list[float]]:
    """Train ``learner`` one step on each batch: CPU seconds per step and per part of it, losses."""
    learner.model.train()
    seconds, losses = {}, []
    for batch in batches:
        loss, parts = learner.step(batch)
        losses.append(loss)
        for part, value in parts.items():
            seconds.setdefault(part, []).append(value)
    return seconds, losses


def _warm_up(fn) -> dict:
    """Wall and CPU seconds of ``fn()``, the pass that compiles: this process's and gcc's, and their sum."""
    wall, (own, children) = time.perf_counter(), _cpu()
    fn()
    own, children = (after - before for after, before in zip(_cpu(), (own, children)))
    return {"cpu_seconds": round(own + children, 2), "own_cpu_seconds": round(own, 2),
            "children_cpu_seconds": round(children, 2), "wall_seconds": round(time.perf_counter() - wall, 2)}


def _unchunked(fn):
    """``fn`` with inference in whole batches. ``in_chunks`` loops in Python over a number of chunks that
    depends on the batch's size, and dynamo compiles a graph for every such number it meets (8 at most by
    default, then the frame runs eagerly); a whole batch is one graph of dynamic size."""
    def run():
        saved, attention.INFERENCE_CHUNK_TOKENS = attention.INFERENCE_CHUNK_TOKENS, 10**12
        try:
            return fn()
        finally:
            attention.INFERENCE_CHUNK_TOKENS = saved
    return run


def _chunk_counts(batches: BucketBatches, window: int) -> list[tuple[int, int]]:
    """The distinct (token-wise chunks, attention-block chunks) pairs ``in_chunks`` cuts ``batches`` into."""
    tokens, blocks = attention.INFERENCE_CHUNK_TOKENS, max(1, attention.INFERENCE_CHUNK_TOKENS // window)
    pairs = set()
    for idx in batches.batch_indices():
        rows, seq = len(idx), int(batches.lengths[idx].max())
        pairs.add((-(-rows * seq // tokens), -(-rows * -(-seq // window) // blocks) if seq > window else 0))
    return sorted(pairs)


def _data(args, settings):
    """Tokenizer trained on the whole training split (the recipe's vocabulary), the sampled reviews' batches."""
    data = splits("imdb", args.data_dir, settings.train.seed)
    tokenizer = Tokenizer.train(data.train.texts, settings.tokenizer)
    train, test = sample(data.train, args.train_examples, 1), sample(data.test, args.test_examples, 3)
    train_batches = BucketBatches(tokenizer.encode(train.texts), train.labels, settings.train.batch_size,
                                  shuffle=True, seed=settings.train.seed)
    train_batches.set_epoch(1)
    test_batches = BucketBatches(tokenizer.encode(test.texts), test.labels, PREDICT_BATCH_SIZE, shuffle=False,
                                 max_tokens=EVAL_MAX_TOKENS)
    return tokenizer, train, train_batches, test_batches


def child(args) -> dict:
    with tempfile.TemporaryDirectory() as cache:  # a fresh inductor cache: every compile is paid in full
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        return _measure(args)


def _compiled(model: nn.Module, part: str, options: dict) -> nn.Module:
    """``model`` with ``part`` compiled: the whole network, or only its Transformer encoder (``--part``)."""
    if part == "model":
        return torch.compile(model, **options)
    model.encoder.compile(**options)  # in place: state_dict keys, and the weights, stay the eager model's
    return model


def _measure(args) -> dict:
    import torch._inductor.config as inductor_config

    inductor_config.compile_threads = 1  # compile here, on this process's clock, not in a worker pool
    inductor_config.fallback_random = args.variant == "parity"
    limit = _LimitWarnings()
    logging.getLogger("torch._dynamo").addHandler(limit)
    settings = cli_settings("imdb", "unused")
    tokenizer, train, train_batches, test_batches = _data(args, settings)
    steps = [train_batches.batch(idx) for idx in train_batches.batch_indices()]
    torch.manual_seed(settings.train.seed)
    model = build_model(settings.model, vocab_size=tokenizer.vocab_size, num_classes=len(train.label_names),
                        max_len=settings.tokenizer.max_len, **settings.model_config)
    count_ngram_prior(model, train_batches)
    twin = copy.deepcopy(model)
    compiled = _compiled(twin, args.part, VARIANTS.get(args.variant, VARIANTS["dynamic"]))
    passes = 1 + (args.repeats if args.variant != "parity" else 0)
    eager = _Learner(model, settings, train_batches, train.label_names, passes * len(steps))
    fast = _Learner(compiled, settings, train_batches, train.label_names, passes * len(steps))
    padded = [b.input_ids.numel() for b in steps]
    result = {"variant": args.variant, "part": args.part, "steps": len(steps),
              "vocab_size": tokenizer.vocab_size,
              "train_tokens": int(sum(b.attention_mask.sum() for b in steps)), "train_padded_tokens": sum(padded),
              "train_batch_lengths": sorted({b.input_ids.shape[1] for b in steps})}

    if args.variant == "parity":
        batches, losses, cost = steps[:args.parity_steps], {}, {}
        for name, learner in (("eager", eager), ("compiled", fast)):
            torch.manual_seed(1234)  # the same dropout masks for both (fallback_random)
            cost[name] = _warm_up(lambda: losses.__setitem__(name, _pass(learner, batches)[1]))
        weights = max(float((a - b).abs().max())
                      for a, b in zip(model.state_dict().values(), twin.state_dict().values()))
        return {**result, "parity_steps": len(batches), "cpu_seconds_with_compile": cost, "losses": losses,
                "max_abs_loss_difference": max(abs(a - b) for a, b in zip(losses["eager"], losses["compiled"])),
                "last_loss_difference": abs(losses["eager"][-1] - losses["compiled"][-1]),
                "max_abs_weight_difference": weights, "dynamo": _dynamo_counts(limit),
                "child_cpu_seconds": round(sum(_cpu()), 1)}

    at_start = _dynamo_counts(limit)
    train_result = {"warm_up": {name: _warm_up(lambda: _pass(learner, steps))
                                for name, learner in (("eager", eager), ("compiled", fast))}}
    after_warm_up = _dynamo_counts(limit)
    seconds = {"eager": [], "compiled": []}
    for _ in range(args.repeats):
        for name, learner in (("eager", eager), ("compiled", fast)):
            seconds[name].append(_pass(learner, steps)[0])
    train_result |= _summary({name: [p["step"] for p in passes] for name, passes in seconds.items()})
    train_result["median_part_cpu_seconds"] = {
        name: {part: round(float(np.median([s for p in passes for s in p[part]])), 4) for part in PARTS}
        for name, passes in seconds.items()}
    train_result["dynamo_warm_up"] = _since(at_start, after_warm_up)
    train_result["dynamo_counted"] = _since(after_warm_up, _dynamo_counts(limit))
    print("train", train_result, file=sys.stderr, flush=True)

    twin.load_state_dict(model.state_dict())  # predict with the same weights both ways
    device = torch.device("cpu")
    predictors = {"eager": lambda: predict_probabilities(model, test_batches, device),
                  "compiled": _unchunked(lambda: predict_probabilities(compiled, test_batches, device))}
    before = _dynamo_counts(limit)
    predict_result = {"warm_up": {name: _warm_up(fn) for name, fn in predictors.items()}}
    after_warm_up = _dynamo_counts(limit)
    seconds = {"eager": [], "compiled": []}
    for _ in range(args.repeats):
        for name, fn in predictors.items():
            started = time.process_time()
            fn()
            seconds[name].append([time.process_time() - started])
    predict_result |= _summary(seconds)
    predict_result["dynamo_warm_up"] = _since(before, after_warm_up)
    predict_result["dynamo_counted"] = _since(after_warm_up, _dynamo_counts(limit))
    with torch.inference_mode():
        eager_logits = [model(b.input_ids, b.attention_mask).logits for b in test_batches]
        compiled_logits = _unchunked(lambda: [compiled(b.input_ids, b.attention_mask).logits for b in test_batches])()
    differences = [float((a - b).abs().max()) for a, b in zip(eager_logits, compiled_logits)]
    predict_result |= {"batches": len(test_batches), "max_abs_logit_difference": max(differences),
                       "chunk_counts_eager": _chunk_counts(test_batches, settings.model_config["attention_window"])}
    print("predict", predict_result, file=sys.stderr, flush=True)
    return {**result, "train": train_result, "predict": predict_result, "dynamo_total": _dynamo_counts(limit),
            "peak_rss_mb": round(peak_rss_mb()), "child_cpu_seconds": round(sum(_cpu()), 1)}


def _summary(seconds: dict[str, list[list[float]]]) -> dict:
    """Per pass: total CPU seconds; over all counted steps (or calls): the median; ratios eager / compiled."""
    totals = {name: [round(sum(p), 3) for p in passes] for name, passes in seconds.items()}
    medians = {name: round(float(np.median([s for p in passes for s in p])), 4) for name, passes in seconds.items()}
    return {"pass_cpu_seconds": totals, "median_cpu_seconds": medians,
            "pass_cpu_seconds_median": {name: float(np.median(t)) for name, t in totals.items()},
            "speedup_pairs": [round(e / c, 3) for e, c in zip(totals["eager"], totals["compiled"])],
            "speedup_of_median_pass": round(float(np.median(totals["eager"]) / np.median(totals["compiled"])), 3),
            "speedup_of_median_step": round(medians["eager"] / medians["compiled"], 3)}


def _over_a_run(train: dict, steps: int, run_steps: int) -> dict:
    """Eager and compiled CPU seconds for ``run_steps`` training steps at the measured mean step, the compiled
    side plus its compile cost (its warm-up pass less what that pass's steps cost once compiled)."""
    eager_step = train["pass_cpu_seconds_median"]["eager"] / steps
    compiled_step = train["pass_cpu_seconds_median"]["compiled"] / steps
    compile_cost = train["warm_up"]["compiled"]["cpu_seconds"] - train["pass_cpu_seconds_median"]["compiled"]
    gain = eager_step - compiled_step
    return {"compile_cpu_seconds": round(compile_cost, 1), "eager_cpu_seconds": round(run_steps * eager_step, 1),
            "compiled_cpu_seconds": round(compile_cost + run_steps * compiled_step, 1),
            "speedup": round(run_steps * eager_step / (compile_cost + run_steps * compiled_step), 3),
            "break_even_steps": round(compile_cost / gain) if gain > 0 else None}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--train-examples", type=int, default=2000,
                   help="training reviews: their batches are the steps (2,000: 31 of 64 and one of 16, as an epoch "
                        "ends with a short batch)")
    p.add_argument("--test-examples", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3, help="counted passes each way, alternated, after a warm-up")
    p.add_argument("--parity-steps", type=int, default=20)
    p.add_argument("--part", choices=("model", "encoder"), default="model",
                   help="what is compiled: the whole network, or only its Transformer encoder (result: "
                        "bench/results/compile-encoder.json)")
    p.add_argument("--run-steps", type=int, default=1000, help="training run length the compile cost is spread over")
    p.add_argument("--variant", default="dynamic", help=argparse.SUPPRESS)  # a child's
    p.set_defaults(threads=1)
    args = parent_args(p, child, rounds=1)
    if args is None:
        return
    started = time.perf_counter()
    variants = {name: (["--variant", name, "--train-examples", str(args.train_examples), "--test-examples",
                        str(args.test_examples), "--repeats", str(args.repeats), "--parity-steps",
                        str(args.parity_steps), "--part", args.part], {}) for name in (*VARIANTS, "parity")}
    results = alternate_children(__file__, args, variants)  # each variant's children, one per --rounds
    for name in VARIANTS:
        for run in results[name]:
            run["over_a_run"] = _over_a_run(run["train"], run["steps"], args.run_steps)
    write_result("compile" if args.part == "model" else "compile-encoder",
                 {"threads": args.threads, "part": args.part, "train_examples": args.train_examples,
                  "test_examples": args.test_examples, "repeats": args.repeats, "run_steps": args.run_steps,
                  "results": results, "wall_seconds": round(time.perf_counter() - started, 1)}, args.out)


if __name__ == "__main__":
    main()
