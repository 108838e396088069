"""What a SIGHUP reload costs `attnclf serve` in memory: its resident memory before, at its peak during, and after.

    python bench/serve_reload_memory.py RUN_DIR [--reloads 3] [--server-threads 1] [--backend onnx [--int8]]

Starts the server on a free 127.0.0.1 port (``--access-log off``), answers a few
/predict requests with texts of the run's own test split, then sends ``--reloads``
SIGHUPs one after another, each once the one before has logged ``reloaded``. A
reload loads the run again beside the model served and swaps it in only once it
has loaded whole, so for a moment the process holds both. For each reload the
peak is Linux's VmHWM, reset before the SIGHUP (writing 5 to /proc/PID/clear_refs),
so it is the reload's own and not the start's; "after" is VmRSS once a /predict
has been answered by the new model. Linux only. Writes bench/results/serve_reload_memory.json.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from attnclf.export.onnx import check_data
from common import free_port, parser, write_result

MIB = 1024


def _status_mib(pid: int, field: str) -> float:
    """``field`` of /proc/PID/status (VmRSS, VmHWM), in MiB."""
    with open(f"/proc/{pid}/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith(f"{field}:"))
    return round(kib / MIB, 1)


def _reset_peak(pid: int) -> None:
    # (Linux 4.0 on: VmHWM starts again from the resident memory now)
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def _lines(process: subprocess.Popen) -> queue.Queue:
    """The server's stdout lines as they come (its own lines: the access log is off)."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in process.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait_for(lines: queue.Queue, start: str, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line.startswith(start):
            return line
        if line.startswith("reload failed"):
            sys.exit(f"the server said: {line}")
    sys.exit(f"the server said no line beginning {start!r} within {seconds:g} s")


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--reloads", type=int, default=3, help="SIGHUPs, one after another (default: 3)")
    p.add_argument("--server-threads", type=int, help="the server's --threads (default: its runtime's, one per core)")
    p.add_argument("--backend", choices=["torch", "onnx"], default="torch", help="the server's --backend")
    p.add_argument("--int8", action="store_true", help="the server's --int8 (with --backend onnx)")
    args = p.parse_args()
    if not Path("/proc/self/clear_refs").exists():
        sys.exit("this measures Linux's /proc/PID/status and clear_refs, which this system lacks")

    texts = check_data(args.run_dir, limit=64).texts
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "attnclf", "serve", args.run_dir, "--port", str(port),
                               "--device", "cpu", "--access-log", "off", "--backend", args.backend,
                               *(["--int8"] if args.int8 else []),
                               *(["--threads", str(args.server_threads)] if args.server_threads else [])],
                              stdout=subprocess.PIPE, text=True)
    lines = _lines(server)
    try:
        _wait_for(lines, "serving ", 300)
        with httpx.Client(base_url=url, timeout=120) as http:
            for start in range(0, len(texts), 8):
                http.post("/predict", json={"texts": texts[start:start + 8]}).raise_for_status()
            started_peak, before = _status_mib(server.pid, "VmHWM"), _status_mib(server.pid, "VmRSS")
            reloads = []
            for _ in range(args.reloads):
                rss = _status_mib(server.pid, "VmRSS")
                _reset_peak(server.pid)
                began = time.perf_counter()
                server.send_signal(signal.SIGHUP)
                said = _wait_for(lines, "reloaded ", 300)
                seconds = time.perf_counter() - began
                peak = _status_mib(server.pid, "VmHWM")
                http.post("/predict", json={"texts": texts[:8]}).raise_for_status()
                reloads.append({"rss_before_mib": rss, "peak_rss_mib": peak, "rss_after_mib":
                                _status_mib(server.pid, "VmRSS"), "peak_over_before_mib": round(peak - rss, 1),
                                "seconds": round(seconds, 2), "said": said})
    finally:
        server.terminate()
        server.wait(timeout=30)

    write_result("serve_reload_memory", {
        "run_dir": args.run_dir,
        "weights_mib": round((Path(args.run_dir) / "model.safetensors").stat().st_size / MIB / MIB, 1)
        if (Path(args.run_dir) / "model.safetensors").is_file() else None,
        "backend": args.backend + ("-int8" if args.int8 else ""),
        "server_threads": args.server_threads,
        "peak_rss_at_start_mib": started_peak,
        "rss_serving_mib": before,
        "reloads": reloads,
    }, args.out)


if __name__ == "__main__":
    main()
