"""What `attnclf serve` does with /explain requests whose clients gave up while they waited their turn.

    python bench/serve_gone.py RUN_DIR [--gone 5] [--patience 1] [--rounds 3]

Starts the server (one torch thread) on a free 127.0.0.1 port. Each round sends one /explain (occlusion of 8 texts of
200 words each), then ``--gone`` more whose clients hang up after ``--patience`` seconds, while they are still
queued, then one more that waits; it times that last one, from the moment the others have hung up to its answer.
Explanations run one at a time: were the abandoned ones computed, it would wait for every one of them. Prints and
writes the medians to bench/results/serve_gone.json. To measure another checkout's server, put its src/ first on
PYTHONPATH.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from common import free_port, parser, start_server, write_result
from serve_busy import EXPLAIN_BODY


def _given_up(url: str, patience: float) -> None:
    """An /explain from a client that hangs up after ``patience`` seconds."""
    try:
        httpx.post(f"{url}/explain", json=EXPLAIN_BODY, timeout=patience)
    except httpx.TimeoutException:
        pass


def main() -> None:
    p = parser("/explain latency behind explanations whose clients hung up")
    p.add_argument("run_dir")
    p.add_argument("--gone", type=int, default=5)
    p.add_argument("--patience", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(args.run_dir, port, ["--threads", "1", "--access-log", "off"])
    alone, behind = [], []
    try:
        with httpx.Client(base_url=url, timeout=600) as client, ThreadPoolExecutor(args.gone + 1) as pool:
            for _ in range(args.rounds):
                started = time.perf_counter()
                client.post("/explain", json=EXPLAIN_BODY).raise_for_status()
                alone.append(time.perf_counter() - started)
                first = pool.submit(client.post, "/explain", json=EXPLAIN_BODY)
                time.sleep(0.2)  # (it runs; the others queue behind it)
                for gone in [pool.submit(_given_up, url, args.patience) for _ in range(args.gone)]:
                    gone.result()
                started = time.perf_counter()
                client.post("/explain", json=EXPLAIN_BODY).raise_for_status()
                behind.append(time.perf_counter() - started)
                first.result().raise_for_status()
    finally:
        server.terminate()
        server.wait(timeout=60)
    write_result("serve_gone", {"run_dir": args.run_dir, "gone": args.gone, "patience_s": args.patience,
                                "rounds": args.rounds, "explain_alone_s": alone, "explain_behind_gone_s": behind,
                                "median_alone_s": statistics.median(alone),
                                "median_behind_gone_s": statistics.median(behind)}, args.out)


if __name__ == "__main__":
    main()
