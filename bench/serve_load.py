"""Load test of `attnclf serve` on loopback: concurrent clients, requests per second, p50/p99 latency, failures.

    python bench/serve_load.py RUN_DIR [--clients 16] [--requests 3000] [--texts-per-request 1] [--server-threads N]
                               [--backend onnx [--int8]]

Starts the server on a free 127.0.0.1 port, warms it up, then lets ``--clients``
concurrent clients (asyncio + httpx, one connection each) send ``--requests``
POST /predict requests in all, each with texts from the run's own test split.
Bounded: it stops after ``--requests`` or ``--max-seconds``, whichever comes
first, then stops the server. Client and server share the machine's cores, so
the figures are for the pair. ``--backend onnx`` serves the run's ONNX export
(``attnclf export RUN_DIR`` first; ``--int8`` its quantised graph). Writes bench/results/serve_load.json.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import numpy as np

from attnclf.export.onnx import check_data
from common import free_port, parser, start_server, write_result


def _peak_rss_mib(pid: int) -> float | None:
    """The server's peak resident memory so far (Linux's VmHWM), or None where /proc does not say."""
    try:
        with open(f"/proc/{pid}/status") as status:
            kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        return None
    return round(kib / 1024, 1)


async def _load(url: str, bodies: list[dict], clients: int, max_seconds: float) -> tuple[list[float], list[str], float]:
    latencies: list[float] = []
    failures: list[str] = []
    next_index = iter(range(len(bodies)))
    deadline = time.perf_counter() + max_seconds

    async def client(http: httpx.AsyncClient) -> None:
        for i in next_index:  # a shared iterator: each request index is sent once
            if time.perf_counter() > deadline:
                return
            started = time.perf_counter()
            try:
                response = await http.post("/predict", json=bodies[i])
                if response.status_code != 200:
                    failures.append(f"{response.status_code}: {response.text[:200]}")
                    continue
            except httpx.HTTPError as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(max_connections=clients)) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    return latencies, failures, time.perf_counter() - started


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--clients", type=int, default=16, help="concurrent clients (default: 16)")
    p.add_argument("--requests", type=int, default=3000, help="requests in all (default: 3000)")
    p.add_argument("--texts-per-request", type=int, default=1, help="texts per request (default: 1)")
    p.add_argument("--max-seconds", type=float, default=300, help="stop sending after this long (default: 300)")
    p.add_argument("--warmup", type=int, default=50, help="requests before measuring (default: 50)")
    p.add_argument("--server-threads", type=int, help="the server's --threads (default: its runtime's, one per core)")
    p.add_argument("--backend", choices=["torch", "onnx"], default="torch", help="the server's --backend")
    p.add_argument("--int8", action="store_true", help="the server's --int8 (with --backend onnx)")
    args = p.parse_args()

    texts = check_data(args.run_dir, limit=2000).texts
    rng = np.random.default_rng(0)
    bodies = [{"texts": [texts[j] for j in rng.integers(0, len(texts), args.texts_per_request)]}
              for _ in range(args.requests + args.warmup)]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(args.run_dir, port, (["--threads", str(args.server_threads)] if args.server_threads else [])
                           + ["--backend", args.backend] + (["--int8"] if args.int8 else []))
    try:
        asyncio.run(_load(url, bodies[: args.warmup], min(args.clients, 4), args.max_seconds))
        before = httpx.get(f"{url}/health").json()
        latencies, failures, seconds = asyncio.run(_load(url, bodies[args.warmup:], args.clients, args.max_seconds))
        after = httpx.get(f"{url}/health").json()
        peak_rss = _peak_rss_mib(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)

    ms = np.asarray(latencies) * 1000
    batches = after["batches"] - before["batches"]
    served = after["requests"] - before["requests"]
    write_result("serve_load", {
        "run_dir": args.run_dir,
        "clients": args.clients,
        "server_threads": args.server_threads,
        "backend": args.backend + ("-int8" if args.int8 else ""),
        "texts_per_request": args.texts_per_request,
        "requests_sent": len(latencies) + len(failures),
        "requests_ok": len(latencies),
        "failed_requests": len(failures),
        "failure_examples": failures[:5],
        "seconds": round(seconds, 3),
        "requests_per_second": round(len(latencies) / seconds, 1),
        "texts_per_second": round(len(latencies) * args.texts_per_request / seconds, 1),
        "latency_ms": {"p50": round(float(np.percentile(ms, 50)), 2), "p90": round(float(np.percentile(ms, 90)), 2),
                       "p99": round(float(np.percentile(ms, 99)), 2), "max": round(float(ms.max()), 2)},
        "server_batches": batches,
        "mean_requests_per_batch": round(served / batches, 2) if batches else None,
        "server_peak_rss_mib": peak_rss,
    }, args.out)


if __name__ == "__main__":
    main()
