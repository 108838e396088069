"""Requests' texts batched together onto one prediction worker (``Batcher``)."""

from __future__ import annotations

import asyncio
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

from fastapi import HTTPException

from .limits import CLIENT_GONE

SERVER_BATCH_TEXTS = 256  # texts run together at most, across requests
# A request waiting its turn: its texts, the future its answers go to, the model's predict it was sent to, and
# whether its client has gone (None: never asked)
_Job = tuple[list[str], asyncio.Future, Callable[[list[str]], Sequence], Callable[[], bool] | None]


class Batcher:
    """Runs ``predict`` (texts -> one answer per text) on one worker thread, batching requests that queue up meanwhile.

    While a batch runs, new requests wait; the next batch takes all of them (up to ``max_texts`` texts). An idle server
    thus answers a lone request at once, and a busy one amortises each model call over many requests. A request may
    name its own ``predict`` (the model it was sent to, which a reload has since replaced): a batch runs one model,
    so it takes the requests waiting in turn while they name the same one.

    >>> # batcher = Batcher(served.predict, ThreadPoolExecutor(max_workers=1))   # as create_app's lifespan makes it
    >>> # asyncio.create_task(batcher.run()); await batcher.submit(["a fine film"])
    """

    def __init__(self, predict: Callable[[list[str]], Sequence], executor: ThreadPoolExecutor,
                 max_texts: int = SERVER_BATCH_TEXTS):
        self.predict = predict
        self.executor = executor
        self.max_texts = max_texts
        self.requests = 0
        self.batches = 0
        self._pending: deque[_Job] = deque()
        self._wakeup = asyncio.Event()
        self._solo = 0  # the next this-many batches take one request each (after a batch failed)
        # Why the worker loop ended, if a bug ended it: every request waiting and every later one is answered so,
        # and /health fails, rather than each waiting for ever on a worker that looks alive.
        self.stopped: str | None = None
        # The batch the worker took off the queue last: a bug ending the loop answers these too, in no queue any more.
        self._taken: list[_Job] = []

    async def submit(self, texts: list[str], predict: Callable[[list[str]], Sequence] | None = None,
                     gone: Callable[[], bool] | None = None) -> Sequence:
        """The answers for ``texts`` by ``predict`` (by default the batcher's), computed in whichever batch they land
        in; or, where ``gone`` says as their batch is formed that the client has hung up, a 499, not computed.

        >>> # await batcher.submit(["a fine film"], served.predict, partial(client_gone, request.receive))
        """
        if self.stopped:
            raise HTTPException(503, self.stopped)
        future = asyncio.get_running_loop().create_future()
        self._pending.append((texts, future, predict or self.predict, gone))
        self._wakeup.set()
        return await future

    async def run(self) -> None:
        """The worker loop; runs until cancelled, or until a bug of its own ends it (``stopped`` then says so)."""
        try:
            await self._batches()
        except Exception as exc:  # (its type alone: its message may quote a text)
            self.stopped = (f"the prediction worker stopped on an internal error ({type(exc).__name__}): this "
                            f"service answers no prediction until it is restarted")
            for _, future, _, _ in [*self._taken, *self._pending]:
                if not future.done():
                    future.set_exception(HTTPException(503, self.stopped))
            self._taken, self._pending = [], deque()

    async def _batches(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                jobs = self._taken = self._next_batch()
                if not jobs:
                    continue
                texts = [text for job_texts, _, _, _ in jobs for text in job_texts]
                try:
                    answers = await loop.run_in_executor(self.executor, jobs[0][2], texts)
                except Exception as exc:  # the worker lives on; only the request that failed fails
                    if len(jobs) == 1:
                        if not jobs[0][1].done():
                            jobs[0][1].set_exception(exc)
                    else:  # one request's texts broke the batch: run each alone, so the others still get answers
                        waiting = [job for job in jobs if not job[1].done()]
                        self._pending.extendleft(reversed(waiting))
                        self._solo = len(waiting)
                    continue
                self.batches += 1
                self.requests += len(jobs)
                start = 0
                for job_texts, future, _, _ in jobs:
                    if not future.done():  # (a request the stop cut off meanwhile cancelled its future)
                        future.set_result(answers[start : start + len(job_texts)])
                    start += len(job_texts)

    @staticmethod
    def _client_gone(job: _Job) -> bool:
        """Whether ``job``'s client has hung up, answered so: waiting its turn, it may have for a whole batch. A
        question that fails fails its request alone, as a batch does."""
        try:
            if job[3] is None or not job[3]():
                return False
        except Exception as exc:
            job[1].set_exception(exc)
            return True
        job[1].set_exception(HTTPException(CLIENT_GONE, "the client closed the connection before its prediction "
                                                        "began: not computed"))
        return True

    def _next_batch(self) -> list[_Job]:
        jobs, size = [], 0
        while self._pending and (not jobs or not self._solo and size + len(self._pending[0][0]) <= self.max_texts
                                 and self._pending[0][2] is jobs[0][2]):
            job = self._pending.popleft()
            if not job[1].cancelled() and not self._client_gone(job):
                jobs.append(job)
                size += len(job[0])
        if jobs and self._solo:
            self._solo -= 1
        return jobs
