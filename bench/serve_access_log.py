"""What `attnclf serve`'s access log costs a /predict request: --access-log off, text and json.

    python bench/serve_access_log.py RUN_DIR [--requests 2000] [--rounds 5] [--threads 1]

Per round and form, ``--requests`` sequential single-text /predict requests sent straight to the ASGI app (no network,
so the log's share is not hidden by the socket's), each line printed and flushed as ``serve`` prints it, to
/dev/null here (a terminal, pipe or journald costs more per line). The forms take turns within a round, first one
then another, so a load change on a shared machine touches them alike. Per form: each round's mean ms per request
and their median.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from contextlib import AsyncExitStack
from functools import partial

from attnclf import Classifier
from attnclf.serve.app import create_app
from common import asgi_post, parse_with_threads, parser, write_result

BODY = json.dumps({"text": "the acting was not good, but the ending was wonderful"}).encode()
FORMS = ("off", "text", "json")


async def _round(app, requests: int) -> float:
    """Mean ms per request over ``requests`` sequential ones, each checked answered 200."""
    started = time.perf_counter()
    for _ in range(requests):
        status = await asgi_post(app, "/predict", BODY)
        assert status == 200, status
    return (time.perf_counter() - started) * 1000 / requests


async def _measure(apps: dict, requests: int, rounds: int) -> dict:
    per_round: dict[str, list[float]] = {form: [] for form in apps}
    async with AsyncExitStack() as started:
        for app in apps.values():  # (each app's batcher, all started together: the forms take turns below)
            await started.enter_async_context(app.router.lifespan_context(app))
        await asyncio.gather(*(_round(app, 200) for app in apps.values()))  # warm-up, not kept
        for round_number in range(rounds):
            for form in FORMS[round_number % 3:] + FORMS[:round_number % 3]:
                per_round[form].append(round(await _round(apps[form], requests), 4))
    return {form: {"ms_per_request": values, "median": statistics.median(values)} for form, values in per_round.items()}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("run_dir")
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5)
    args = parse_with_threads(p)
    classifier = Classifier.load(args.run_dir, device="cpu")
    with open(os.devnull, "w") as sink:
        write = partial(print, file=sink, flush=True)
        apps = {"off": create_app(classifier),
                "text": create_app(classifier, access_log=write),
                "json": create_app(classifier, access_log=write, access_log_format="json")}
        results = asyncio.run(_measure(apps, args.requests, args.rounds))
    write_result("serve_access_log", {"run_dir": args.run_dir, "requests": args.requests, "rounds": args.rounds,
                                      "threads": args.threads, "forms": results}, args.out)


if __name__ == "__main__":
    main()
