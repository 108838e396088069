"""Does `attnclf serve` answer on while nobody reads its stdout? A log collector that stalls fills the pipe.

    python bench/serve_stalled_log.py RUN_DIR [--requests 1500]

Starts the server (one torch thread) on a free 127.0.0.1 port, its stdout a pipe of which only the serving line is
read, then sends ``--requests`` sequential one-text /predict requests (3 s timeout each) and one /health: how many
were answered before one timed out, in how long, and what /health answered. Prints and writes
bench/results/serve_stalled_log.json. To measure another checkout's server, put its src/ first on PYTHONPATH.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx

from common import free_port, parser, write_result


def main() -> None:
    p = parser("/predict and /health while the server's stdout is not read")
    p.add_argument("run_dir")
    p.add_argument("--requests", type=int, default=1500)
    args = p.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    read_end, write_end = os.pipe()
    server = subprocess.Popen([sys.executable, "-m", "attnclf", "serve", args.run_dir, "--port", str(port),
                               "--device", "cpu", "--threads", "1"], stdout=write_end)
    os.close(write_end)
    try:
        os.read(read_end, 4096)  # the serving line; nothing more is read
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(f"{url}/health", timeout=1)
                break
            except httpx.TransportError:
                if server.poll() is not None or time.monotonic() > deadline:
                    sys.exit("the server did not start")
                time.sleep(0.2)
        answered, started = 0, time.perf_counter()
        with httpx.Client(base_url=url, timeout=3) as client:
            for i in range(args.requests):
                try:
                    client.post("/predict", json={"text": "good " * (i % 7 + 1)}).raise_for_status()
                except httpx.TimeoutException:
                    break
                answered += 1
            seconds = time.perf_counter() - started
            try:
                health: int | str = client.get("/health").status_code
            except httpx.TimeoutException:
                health = "timed out"
    finally:
        server.kill()
        server.wait(timeout=60)
        os.close(read_end)
    write_result("serve_stalled_log", {"run_dir": args.run_dir, "requests": args.requests, "answered": answered,
                                       "seconds": seconds, "health_after": health}, args.out)


if __name__ == "__main__":
    main()
