"""What the benchmark scripts share: the data location, the splits and samples, the JSONL files they write, their
options, timing, memory, a server to measure, and the result file.

Every script loads its splits through ``attnclf.training.run_data.load_data``, the
function ``attnclf train`` uses, so baselines and attnclf see the same train,
validation and test examples (IMDB's validation grouped by movie).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy
import torch

from attnclf.data.base import Splits, TextDataset
from attnclf.rundir import atomic_write_bytes, atomic_write_json
from attnclf.training.device import blas_libraries
from attnclf.training.run_data import align_labels, load_data
from attnclf.training.settings import DataSettings

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
_SHARED_DATA = BENCH_DIR.parent.parent / "shared" / "datasets"


def data_dir(given: str | None = None) -> str | None:
    """``given``, else $ATTNCLF_DATA_DIR, else the shared datasets folder next to the repo."""
    if given or os.environ.get("ATTNCLF_DATA_DIR"):
        return given or os.environ["ATTNCLF_DATA_DIR"]
    return str(_SHARED_DATA) if _SHARED_DATA.is_dir() else None


def splits(dataset: str, data_dir_: str | None = None, seed: int = 0, hold_out: str = "random") -> Splits:
    """train / validation / test exactly as ``attnclf train --dataset NAME --seed SEED --hold-out H`` gets them."""
    return load_data(DataSettings(dataset=dataset, data_dir=data_dir(data_dir_), hold_out=hold_out), seed)


def sample(data: TextDataset, n: int, seed: int) -> TextDataset:
    """At most ``n`` of ``data``'s texts, drawn by ``seed``, in their order: the samples hf_peer.py trains and times
    attnclf and BERT on, and the scripts measured beside it read.

    >>> sample(TextDataset(["a", "b", "c"], [0, 1, 0], ["neg", "pos"]), 2, seed=1).texts
    ['a', 'b']
    """
    if n >= len(data):
        return data
    return data.subset(sorted(numpy.random.default_rng(seed).choice(len(data), n, replace=False).tolist()))


def labelled_rows(data: TextDataset, label_names: list[str]) -> list[dict]:
    """``data``'s texts and labels as the rows of a JSONL training file, each label by its name among ``label_names``
    (a run's classes; a text of another class is refused).

    >>> labelled_rows(TextDataset(["fine"], [0], ["positive"]), ["negative", "positive"])
    [{'text': 'fine', 'label': 'positive'}]
    """
    data = align_labels(data, label_names)
    return [{"text": text, "label": label_names[label]} for text, label in zip(data.texts, data.labels)]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """``rows`` as JSON lines in UTF-8, written atomically."""
    atomic_write_bytes(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8"))


def parser(description: str) -> argparse.ArgumentParser:
    # (as written: a docstring's usage lines must not run into its paragraphs)
    p = argparse.ArgumentParser(allow_abbrev=False, description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", help="datasets folder (default: $ATTNCLF_DATA_DIR, then ../shared/datasets)")
    p.add_argument("--out", help="result JSON (default: bench/results/<script>.json)")
    return p


def parse_with_threads(p: argparse.ArgumentParser, default: int | None = 1) -> argparse.Namespace:
    """Parse ``p``'s arguments plus ``--threads``, torch's threads (``default``; None: torch's choice), and set them.
    One by default: on a shared machine a second thread waits for a core another job holds (bench/README.md)."""
    told = "torch's choice" if default is None else default
    p.add_argument("--threads", type=int, default=default, help=f"torch threads (default: {told})")
    args = p.parse_args()
    if args.threads is not None:
        if args.threads < 1:  # (torch refuses it with a traceback)
            p.error(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    return args


def parse_seeds_and_threads(p: argparse.ArgumentParser) -> argparse.Namespace:
    """Parse ``p``'s arguments plus ``--seeds`` (default 0 1 2) and ``--threads`` (default: torch's choice), and set
    torch's threads."""
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    return parse_with_threads(p, default=None)


def cpu_seconds() -> float:
    """CPU seconds, user and system, of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@contextmanager
def timer(into: dict, key: str):
    """Wall seconds of the block, stored in ``into[key]``."""
    started = time.perf_counter()
    yield
    into[key] = round(time.perf_counter() - started, 3)


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The CPU's model name and family/model numbers from ``cpuinfo`` (Linux's), None where there is none (no file,
    or no model name in it, as on Arm): machines of one kind differ (an AVX-512 Zen 5, an AVX2 Zen 3), and float
    results and speeds with them."""
    try:
        first_cpu = cpuinfo.read_text().split("\n\n")[0]  # (a block per core, alike)
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in first_cpu.splitlines() if ":" in line)
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    if "model name" not in fields:
        return None
    return f"{fields['model name']} (family {fields.get('cpu family', '?')}, model {fields.get('model', '?')})"


def machine() -> dict:
    return {
        "cpu": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        # (the widest vector kernels torch dispatches to here: AVX512 or AVX2 move float32 results in the last bits)
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,  # (what device="auto" would take)
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "blas": blas_libraries(),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def parent_args(p: argparse.ArgumentParser, child, rounds: int) -> argparse.Namespace | None:
    """Add ``--rounds`` (default ``rounds``), ``--threads`` and the hidden ``--child`` to ``p`` and parse: in a child
    process, run ``child(args)`` and print its result as the JSON ``alternate_children`` reads, and return None;
    in the parent, return the arguments."""
    p.add_argument("--rounds", type=int, default=rounds, help="child processes each way, alternated")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one measured process
    args = parse_with_threads(p, default=None)
    if not args.child:
        return args
    print(json.dumps(child(args)))
    return None


def alternate_children(script: str, args: argparse.Namespace,
                       variants: dict[str, tuple[list[str], dict[str, str]]]) -> dict[str, list[dict]]:
    """Run ``script --child`` once per variant in each of ``args.rounds`` rounds, alternated so that a shared
    machine's load falls on every variant alike; each child prints its result as one JSON object, last. ``variants``
    maps a name to the child's extra arguments and environment; ``--threads`` and ``--data-dir`` pass through."""
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, (extra, env) in variants.items():
            command = [sys.executable, script, "--child", *extra,
                       *(["--threads", str(args.threads)] if args.threads else []),
                       *(["--data-dir", args.data_dir] if args.data_dir else [])]
            done = subprocess.run(command, env=dict(os.environ, **env), capture_output=True, text=True, check=True)
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(name, runs[name][-1], flush=True)
    return runs


def write_result(name: str, result: dict, out: str | None = None) -> None:
    """Write ``result`` (plus date, command and machine) to bench/results/<name>.json atomically."""
    path = Path(out) if out else RESULTS_DIR / f"{name}.json"
    payload = {
        "benchmark": name,
        "date": datetime.date.today().isoformat(),
        "command": "python " + " ".join([os.path.relpath(sys.argv[0], BENCH_DIR.parent)] + sys.argv[1:]),
        "machine": machine(),
        **result,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, payload)
    print(json.dumps({k: v for k, v in payload.items() if k != "machine"}, indent=1)[:4000])
    print(f"wrote {path}")


def cli_settings(dataset: str, output: str, *flags: str):
    """The RunSettings ``attnclf train --dataset DATASET --output OUTPUT FLAGS...`` would use, on the CPU unless
    ``flags`` name another ``--device``.

    Going through the CLI's own parser means a benchmark measures exactly the
    recipe a user gets without flags. The device is pinned: BENCHMARKS.md's seconds and peak resident memory are
    the CPU's, and on a machine with a GPU "auto" would train there, out of the resident memory's sight.
    """
    from attnclf.cli import build_parser, build_settings

    args = build_parser().parse_args(["train", "--dataset", dataset, "--output", output, "--device", "cpu", *flags])
    settings = build_settings(args)
    # (`attnclf train` sets these two itself, beside build_settings: without this the flags were ignored)
    settings.threads, settings.report = args.threads, not args.no_report
    if settings.data.data_dir is None:
        settings.data.data_dir = data_dir()
    return settings


def seed_members(folder: Path, seeds) -> dict:
    """Each ``folder/seed-S`` run's best validation accuracy, test accuracy, epochs and training time, printed too."""
    members = {}
    for seed in seeds:
        member = Path(folder) / f"seed-{seed}"
        history = [json.loads(line) for line in (member / "history.jsonl").read_text().splitlines()]
        metrics = json.loads((member / "metrics.json").read_text())
        members[seed] = {"best_validation_accuracy": max(h["val_accuracy"] for h in history),
                         "test_accuracy": metrics["accuracy"], "epochs": len(history),
                         "train_seconds": metrics["train_seconds"]}
        print(f"seed {seed}: {members[seed]}", flush=True)
    return members


def free_port() -> int:
    """A TCP port of 127.0.0.1 that no process listens on now, for a server a benchmark starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(run_dir: str, port: int, extra: list[str]) -> subprocess.Popen:
    """`attnclf serve RUN_DIR` on ``port`` of 127.0.0.1, on the CPU, with ``extra`` flags, once /health answers 200;
    the script exits saying why if it stops first or has not answered within 120 s."""
    import httpx  # (here: the service benchmarks' alone)

    process = subprocess.Popen([sys.executable, "-m", "attnclf", "serve", run_dir, "--port", str(port),
                                "--device", "cpu", *extra])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"server exited with status {process.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.2)
    process.terminate()
    sys.exit("server did not answer /health within 120 s")


async def asgi_post(app, path: str, body: bytes) -> int:
    """POST ``body`` (JSON) to ``path`` straight through ``app``'s ASGI interface, no network; the status answered.
    What a service benchmark times when the socket's share would hide the app's."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "root_path": "", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
             "scheme": "http", "server": ("localhost", 80), "client": ("127.0.0.1", 50000), "http_version": "1.1",
             "asgi": {"version": "3.0"}, "app": app}
    await app(scope, receive, send)
    return sent[0]["status"]
