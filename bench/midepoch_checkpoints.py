"""Checkpoints within an epoch on real data: what one costs, and that Ctrl-C then --resume changes no weight.

    python bench/midepoch_checkpoints.py --rows 3000 --threads 1

Writes the first --rows rows of AG News's test.csv (title and description as the text) to a file and trains the
file recipe on it for --epochs, three times as separate `attnclf train` processes: straight through
(--checkpoint-minutes 0); with a checkpoint every --interval minutes, stopped by a real SIGINT once a checkpoint
within its last epoch is committed; then that run again with --resume. Prints each checkpoint's seconds (all of
Trainer._save_checkpoint: its tensors and state.json, synced to disk) and the size of its tensors, the interrupt's
message, and whether the resumed model.safetensors is the straight run's bytes; writes them to
bench/results/midepoch_checkpoints.json (or --out).
"""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import data_dir, parser, write_result

from attnclf.rundir import file_sha256

# Runs `attnclf train` with each checkpoint timed: one line per checkpoint on stderr.
_TIMED_TRAIN = """
import sys, time
from pathlib import Path
from attnclf.cli import main
from attnclf.training.trainer import Trainer, checkpoint_tensors
save = Trainer._save_checkpoint
def timed(self, optimizer, schedule, state, *rest, **more):
    started = time.perf_counter()
    save(self, optimizer, schedule, state, *rest, **more)
    size = checkpoint_tensors(self.run_dir).stat().st_size
    print(f"checkpoint epoch {state['epoch']} step {state.get('step')}: {time.perf_counter() - started:.3f} s, "
          f"{size} bytes", file=sys.stderr, flush=True)
Trainer._save_checkpoint = timed
sys.exit(main(sys.argv[1:]))
"""


def write_rows(source: Path, rows: int, target: Path) -> None:
    with source.open(newline="", encoding="utf-8") as given, target.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["text", "label"])
        for index, (label, title, description) in enumerate(csv.reader(given)):
            if index == rows:
                break
            writer.writerow([f"{title} {description}", label])


def train(argv: list[str], stop_within_epoch: int | None = None) -> tuple[float, str]:
    """Run `attnclf train argv` timed; with ``stop_within_epoch``, SIGINT it once its checkpoint within that epoch
    is committed. Its seconds and its stderr."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", _TIMED_TRAIN, "train", *argv], stderr=subprocess.PIPE,
                               text=True)
    if stop_within_epoch is not None:
        state = Path(argv[argv.index("--output") + 1]) / "checkpoint" / "state.json"
        while process.poll() is None:
            try:
                saved = json.loads(state.read_text())
            except (OSError, ValueError):
                saved = {}
            if saved.get("step") and saved["epoch"] + 1 == stop_within_epoch:
                process.send_signal(signal.SIGINT)
                break
            time.sleep(0.05)
    _, err = process.communicate()
    return time.perf_counter() - started, err


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--rows", type=int, default=3000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--interval", type=float, default=0.05, help="--checkpoint-minutes of the stopped run")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    result = {"rows": args.rows, "epochs": args.epochs, "interval_minutes": args.interval, "threads": args.threads}
    with tempfile.TemporaryDirectory(prefix="midepoch-") as tmp:
        folder = Path(tmp)
        rows = folder / "ag.csv"
        write_rows(Path(data_dir(args.data_dir)) / "ag_news" / "test.csv", args.rows, rows)
        common = ["--train-file", str(rows), "--epochs", str(args.epochs), "--threads", str(args.threads),
                  "--quiet", "--no-report"]
        runs = {"straight": ([*common, "--checkpoint-minutes", "0", "--output", str(folder / "straight")], None),
                "stopped": ([*common, "--checkpoint-minutes", str(args.interval), "--output", str(folder / "stopped")],
                            args.epochs),
                "resumed": (["--resume", "--output", str(folder / "stopped"), "--quiet", "--no-report"], None)}
        for name, (argv, stop_within_epoch) in runs.items():
            seconds, err = train(argv, stop_within_epoch)
            said = [line for line in err.splitlines() if line.startswith(("checkpoint", "attnclf:"))]
            result[name] = {"wall_seconds": round(seconds, 1), "checkpoint_and_attnclf_lines": said}
            print(f"{name}: {seconds:.1f} s", *([] if name == "straight" else said), sep="\n")
        result["resumed_bytes_equal_straight"] = file_sha256(folder / "straight" / "model.safetensors") == \
            file_sha256(folder / "stopped" / "model.safetensors")
        result["histories_equal_but_seconds"] = histories(folder / "straight") == histories(folder / "stopped")
        print(f"resumed model.safetensors is the straight run's bytes: {result['resumed_bytes_equal_straight']}")
        print(f"histories equal but for seconds: {result['histories_equal_but_seconds']}")
    write_result("midepoch_checkpoints", result, args.out)


def histories(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "seconds"}
            for line in (run / "history.jsonl").read_text().splitlines()]


if __name__ == "__main__":
    main()
