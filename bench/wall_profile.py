"""Where the wall time of one `attnclf` command goes, by stage, from a wall-clock stack sampler.

    python bench/wall_profile.py -- train --dataset sst2-sentences --model boe --threads 1 --no-report \\
        --output /tmp/wallprof/sst2 --overwrite           # 10.4 s wall, 6.9 s of it the command
    python bench/wall_profile.py --name wall_profile-imdb -- train --dataset imdb --model boe --embeddings none \\
        --threads 1 --no-report --output /tmp/wallprof/imdb --overwrite   # 28.7 s wall, 25.4 s the command

(2026-11-28, load 2.7 on 2 cores; the rest is the child interpreter's start and the parent's imports and writing.)

The arguments after ``--`` are `attnclf`'s. They run in a fresh child interpreter (``--child``), as `python -m
attnclf ARGS` would, so that the imports the command pays are measured (this script's own imports of torch come
after, in the parent). In the child a thread reads the main thread's stack every ``--interval`` seconds
(``sys._current_frames()``); each frame is named ``module:qualname`` (``attnclf.training.trainer:Trainer.fit``).
A stage's share is the share of samples whose stack it claims, and its seconds that share of the command's wall time.

Each sample goes to the first stage in ``STAGES`` whose rule matches, so the stages do not overlap; a rule matches
when the stack passes through any of its ``through`` patterns and, if it has one, through its ``within`` pattern. A
pattern names a module (matching it and its submodules) or ``module:qualname`` (that function, or a class's
methods). In order:

- creating AdamW: ``trainer:_make_optimizer`` (PyTorch imports torch._dynamo on an optimizer's first use);
- reading the data: ``run_data:load_data`` (reading the files, the train / validation split);
- training the tokenizer: ``Tokenizer.train``;
- encoding: ``Tokenizer.encode``, ``encode_counting_cuts``, ``encode_arrays`` (train, validation and the test);
- validation, checkpoints, testing, writing: ``Trainer._validate``, ``Trainer._save_checkpoint``,
  ``run:evaluate_split`` (but for its encoding, above), ``attnclf.rundir`` (atomic writes, loading the weights back),
  ``run_data:texts_fingerprint``, ``Tokenizer.save`` and ``Tokenizer.load``;
- batching: ``attnclf.text.batching`` and ``windows``' collation (padding lists of ids into tensors);
- model arithmetic: within ``Trainer._train_epoch``, through torch.nn (forward, clip_grad_norm_), torch.autograd or
  torch._tensor (backward), torch.optim (AdamW's step, zero_grad, the schedule), attnclf.models or the loss;
- the loop's bookkeeping: the rest of ``Trainer._train_epoch`` (running sums, autocast, the progress bar);
- imports: ``importlib._bootstrap`` anywhere else (mostly torch's and scikit-learn's, before the command starts);
- other: everything else, its most frequent innermost attnclf frames listed in the result.

Limits: the sampler takes the GIL to read the stack, so a C call that holds the GIL is sampled only once it returns,
under whichever frame then runs (PyTorch's operators and tokenizers' batch encoding release it); the sampling thread
costs the command a little time (compare ``wall_seconds`` with the command run alone).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import runpy
import subprocess
import sys
import tempfile
import threading
import time

OTHER = "other"
# (stage, through: any of these in the stack, within: this too, if given)
STAGES: list[tuple[str, tuple[str, ...], str | None]] = [
    ("creating AdamW", ("attnclf.training.trainer:_make_optimizer",), None),
    ("reading the data", ("attnclf.training.run_data:load_data",), None),
    ("training the tokenizer", ("attnclf.text.tokenizer:Tokenizer.train",), None),
    ("encoding", ("attnclf.text.tokenizer:Tokenizer.encode", "attnclf.text.tokenizer:Tokenizer.encode_counting_cuts",
                  "attnclf.text.tokenizer:Tokenizer.encode_arrays"), None),
    ("validation, checkpoints, testing, writing",
     ("attnclf.training.trainer:Trainer._validate", "attnclf.training.trainer:Trainer._save_checkpoint",
      "attnclf.training.run:evaluate_split", "attnclf.rundir", "attnclf.training.run_data:texts_fingerprint",
      "attnclf.text.tokenizer:Tokenizer.save", "attnclf.text.tokenizer:Tokenizer.load"), None),
    ("batching", ("attnclf.text.batching", "attnclf.text.windows:collate_windows",
                  "attnclf.text.windows:WindowBatches.batch"), None),
    ("model arithmetic (forward, backward, clipping, optimizer)",
     ("torch.nn", "torch.autograd", "torch._tensor", "torch.optim", "attnclf.models",
      "attnclf.training.trainer:_WeightedLoss"), "attnclf.training.trainer:Trainer._train_epoch"),
    ("the loop's bookkeeping", ("attnclf.training.trainer:Trainer._train_epoch",), None),
    ("imports", ("importlib._bootstrap",), None),
]


def matches(frame: str, pattern: str) -> bool:
    """Whether ``frame`` (``module:qualname``) is what ``pattern`` names: a module and its submodules, or a function.

    >>> matches("torch.nn.modules.module:Module._call_impl", "torch.nn")
    True
    >>> matches("attnclf.text.tokenizer:Tokenizer.encode_arrays", "attnclf.text.tokenizer:Tokenizer.encode")
    False
    """
    module, _, qualname = frame.partition(":")
    if ":" not in pattern:
        return module == pattern or module.startswith(pattern + ".")
    return frame == pattern or (qualname and frame.startswith(pattern + "."))


def stage_of(stack: list[str]) -> str:
    """The first of ``STAGES`` whose rule ``stack`` (outermost frame first) matches, else ``OTHER``.

    >>> stage_of(["attnclf.cli:main", "attnclf.training.trainer:Trainer._train_epoch", "torch._tensor:Tensor.backward"])
    'model arithmetic (forward, backward, clipping, optimizer)'
    """
    def passes(pattern: str) -> bool:
        return any(matches(frame, pattern) for frame in stack)

    for stage, through, within in STAGES:
        if (within is None or passes(within)) and any(passes(pattern) for pattern in through):
            return stage
    return OTHER


def _frame_name(frame) -> str:
    return f"{frame.f_globals.get('__name__', '?')}:{frame.f_code.co_qualname}"


def sample_command(argv: list[str], interval: float) -> dict:
    """Run ``python -m attnclf ARGV`` in this process while a thread samples the main thread's stack every
    ``interval`` seconds; the wall seconds, exit code and each distinct stack's count (outermost frame first)."""
    main_thread = threading.get_ident()
    counts: collections.Counter = collections.Counter()
    done = threading.Event()

    def sample() -> None:
        while not done.wait(interval):
            frame, stack = sys._current_frames().get(main_thread), []
            while frame is not None:
                stack.append(_frame_name(frame))
                frame = frame.f_back
            counts[tuple(reversed(stack))] += 1

    sampler = threading.Thread(target=sample, daemon=True)
    # As `python -m attnclf` starts: the working folder first on the path, not bench/ (whose imdb.py, sst2.py...)
    sys.path[0] = os.getcwd()
    sys.argv = ["attnclf", *argv]
    started = time.perf_counter()
    sampler.start()
    code = 0
    try:
        runpy.run_module("attnclf", run_name="__main__")
    except SystemExit as stopped:  # (__main__ ends with sys.exit(main()))
        code = stopped.code if isinstance(stopped.code, int) else 1
    finally:
        done.set()
        sampler.join()
    return {"wall_seconds": time.perf_counter() - started, "exit_code": code,
            "stacks": [[list(stack), n] for stack, n in counts.items()]}


def summarise(sampled: dict, top_other: int = 10) -> dict:
    """Each stage's share of the samples and its seconds of the wall time, in ``STAGES``' order, ``OTHER`` last."""
    by_stage: collections.Counter = collections.Counter()
    other_frames: collections.Counter = collections.Counter()
    for stack, n in sampled["stacks"]:
        stage = stage_of(stack)
        by_stage[stage] += n
        if stage == OTHER:
            ours = [frame for frame in stack if frame.startswith("attnclf")]
            other_frames[ours[-1] if ours else stack[-1] if stack else "?"] += n
    total, wall = sum(by_stage.values()), sampled["wall_seconds"]
    return {
        "wall_seconds": round(wall, 3), "samples": total,
        "stages": {stage: {"share": round(by_stage[stage] / total, 4),
                           "seconds": round(wall * by_stage[stage] / total, 2)}
                   for stage in [stage for stage, _, _ in STAGES] + [OTHER]},
        "other_innermost_attnclf_frames": {frame: round(n / total, 4)
                                           for frame, n in other_frames.most_common(top_other)},
    }


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--interval", type=float, default=0.002, help="seconds between samples (default: 0.002)")
    p.add_argument("--name", default="wall_profile", help="result: bench/results/NAME.json (default: wall_profile)")
    p.add_argument("--out", help="result JSON (default: bench/results/<name>.json)")
    p.add_argument("--child", metavar="STACKS_JSON", help=argparse.SUPPRESS)  # the sampled process writes here
    p.add_argument("command", nargs=argparse.REMAINDER, help="`attnclf`'s arguments, after --")
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("give the attnclf command after --, e.g. -- train --dataset demo --threads 1 --no-report")
    if args.child:
        with open(args.child, "w", encoding="utf-8") as out:
            json.dump(sample_command(command, args.interval), out)
        return
    with tempfile.TemporaryDirectory() as folder:
        stacks = os.path.join(folder, "stacks.json")
        subprocess.run([sys.executable, __file__, "--interval", str(args.interval), "--child", stacks, "--", *command],
                       check=True)
        with open(stacks, encoding="utf-8") as given:
            sampled = json.load(given)
    if sampled["exit_code"]:
        raise SystemExit(f"attnclf {' '.join(command)} exited with {sampled['exit_code']}: nothing measured")
    # (imported only now: the child must start as `python -m attnclf` does, without torch loaded)
    from common import write_result

    write_result(args.name, {"attnclf_command": "attnclf " + " ".join(command), "interval": args.interval,
                             **summarise(sampled)}, args.out)


if __name__ == "__main__":
    main()
