"""How long a /predict body of many wrong items holds the service's event loop (no request is answered meanwhile).

    python bench/serve_bad_bodies.py RUN_DIR [--rounds 3]

Two bodies sent straight to the ASGI app (no network): `{"texts": [1, 1, ...]}` with 300,000 integers where texts go,
and `{"text": "a", "k0": 1, ...}` with 90,000 unknown fields. Per body: the status answered and the seconds each call
took, the least of ``--rounds`` (the loop is held for all of it: validation runs on it). Run it with another
checkout's code first on PYTHONPATH to compare.
"""

from __future__ import annotations

import asyncio
import time

from attnclf import Classifier
from attnclf.serve.app import create_app
from common import asgi_post, parser, write_result

BODIES = {
    "300,000 integers as texts": b'{"texts":[' + b"1," * 299_999 + b"1]}",
    "90,000 unknown fields": b'{"text":"a",' + b",".join(b'"k%d":1' % i for i in range(90_000)) + b"}",
}


async def _measure(app, rounds: int) -> dict:
    results = {}
    async with app.router.lifespan_context(app):
        for name, body in BODIES.items():
            seconds = []
            for _ in range(rounds):
                started = time.perf_counter()
                status = await asgi_post(app, "/predict", body)
                seconds.append(round(time.perf_counter() - started, 4))
            results[name] = {"bytes": len(body), "status": status, "seconds": seconds, "least": min(seconds)}
    return results


def main() -> None:
    p = parser(__doc__)
    p.add_argument("run_dir")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    app = create_app(Classifier.load(args.run_dir, device="cpu"))
    write_result("serve_bad_bodies", {"run_dir": args.run_dir, "bodies": asyncio.run(_measure(app, args.rounds))},
                 args.out)


if __name__ == "__main__":
    main()
