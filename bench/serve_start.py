"""Seconds from `attnclf serve RUN_DIR` starting to its first answered GET /health: a service's start-up.

    farm-bench -n 7 -- python bench/serve_start.py RUN_DIR [--port 8941] [--threads 1]

Starts the server as a child, polls GET /health every 20 ms, prints the seconds to the first answer and stops the
server. Time it whole from outside (farm-bench), against another tree with PYTHONPATH=TREE/src, for the process's
peak memory too. It imports neither torch nor attnclf itself, so the timer adds only Python's own start.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import urllib.request


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", help="a run directory, as `attnclf serve` takes it")
    p.add_argument("--port", type=int, default=8941, help="port for the server (default: 8941)")
    p.add_argument("--threads", type=int, default=1, help="the server's --threads (default: 1)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for an answer (default: 60)")
    args = p.parse_args()
    started = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "attnclf", "serve", args.run_dir, "--port", str(args.port),
                               "--threads", str(args.threads)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{args.port}/health", timeout=1).read()
                break
            except OSError:
                if server.poll() is not None:  # (it exited: a bad run directory, a port in use)
                    sys.exit(f"serve exited {server.returncode}: {server.stderr.read().decode().strip()}")
                if time.perf_counter() - started > args.timeout:
                    sys.exit(f"no answer from GET /health in {args.timeout:g} s")
                time.sleep(0.02)
        print(f"{time.perf_counter() - started:.2f} s to the first GET /health")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
