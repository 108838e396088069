"""/predict latency of `attnclf serve` while /explain is busy: does a queue of slow explanations hold predictions up?

    python bench/serve_busy.py RUN_DIR [--explains 30] [--rounds 3]

Starts the server (one torch thread) on a free 127.0.0.1 port. Each round times one /predict on an idle server,
then sends ``--explains`` concurrent /explain requests (occlusion of 8 texts of 200 words each), waits half a second
and times one /predict while they are queued or running. Prints and writes the medians to
bench/results/serve_busy.json. To measure another checkout's server, put its src/ first on PYTHONPATH.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from common import free_port, parser, start_server, write_result

EXPLAIN_BODY = {"texts": ["the acting was not good " * 40] * 8, "method": "occlusion"}


def main() -> None:
    p = parser("/predict latency while /explain is busy")
    p.add_argument("run_dir")
    p.add_argument("--explains", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    port = free_port()
    server = start_server(args.run_dir, port, ["--threads", "1"])
    idle, busy = [], []
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client, \
                ThreadPoolExecutor(args.explains) as pool:
            for _ in range(args.rounds):
                started = time.perf_counter()
                client.post("/predict", json={"text": "good"}).raise_for_status()
                idle.append(time.perf_counter() - started)
                explains = [pool.submit(client.post, "/explain", json=EXPLAIN_BODY) for _ in range(args.explains)]
                time.sleep(0.5)  # the explanations are queued or running
                started = time.perf_counter()
                client.post("/predict", json={"text": "good"}).raise_for_status()
                busy.append(time.perf_counter() - started)
                for explain in explains:
                    explain.result().raise_for_status()
    finally:
        server.terminate()
        server.wait(timeout=60)
    write_result("serve_busy", {"run_dir": args.run_dir, "explains": args.explains, "rounds": args.rounds,
                                "predict_idle_s": idle, "predict_busy_s": busy,
                                "median_idle_s": statistics.median(idle), "median_busy_s": statistics.median(busy)},
                 args.out)


if __name__ == "__main__":
    main()
