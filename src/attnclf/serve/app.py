"""A trained model behind a small HTTP API: FastAPI on uvicorn.

```
POST /predict   {"texts": [...]} or {"text": "..."}   -> {"predictions": [{label, confidence, probabilities,
                                                          unknown_tokens, tokens_read}]}
                (a multi-label run's: {labels, probabilities, unknown_tokens, tokens_read}, each label whose
                probability reaches its threshold from thresholds.json, most probable first; under a --threshold,
                decided by it)
POST /explain   {"texts"|"text", "method", "target"}   -> {"explanations": [{tokens, scores, method, ...}]}
                (by default occlusion's scores, with the pooling attention beside them as "pooling_attention";
                "method": [...] or "all" for several, each text's explanations together, texts x methods bounded;
                a multi-label run's: one per label explained, each predicted one by default, with "labels";
                by default the class, or labels, /predict answers, its --threshold applied)
GET  /health    liveness and readiness, plus requests served and batches run; answered however many requests are
                in flight; 503 where a bug has stopped the prediction worker
GET  /model     the run and the weights served (weights_id, as each answer's X-Attnclf-Weights header; model_id,
                which changes with its temperature and thresholds too, as X-Attnclf-Model), the
                backend, labels, model and tokenizer summary, text columns, versions, explanation methods (and
                whether the pooling attention comes beside their scores), the threshold /predict applies (a
                multi-label run's: multi_label and each label's thresholds), limits
GET  /docs      the endpoints, their request schemas and a curl line each (schema at /openapi.json)
```

What it accepts is bounded (``ServeLimits``): body bytes and the seconds the head and the body
may take (``TimedHeads``, ``BodyLimit``), texts per request, characters per text, requests in flight. A request over a limit gets a
413 naming the limit; one past the requests in flight a 503 at once, with
Retry-After; a body that has not arrived in time a 408; malformed JSON a 400; a body of the wrong shape a 422;
one still running when a stop has waited ``stop_seconds`` for it a 503 with Retry-After; an /explain whose client
hung up while it waited its turn is not computed (499 in the access log); each with a one-line ``detail``.
Requests that arrive while a batch runs are batched together for the next one (``Batcher``).
A SIGHUP has ``serve`` load its run again and answer by it from then on, without a restart (``ModelReloader``).

>>> # from attnclf import Classifier
>>> # app = create_app(Classifier.load("runs/demo"), ServeLimits(max_batch=32))
>>> # serve("runs/demo", port=8000)   # what `attnclf serve runs/demo` runs
>>> # serve("runs/demo", backend="onnx", int8=True)   # its ONNX export's int8 graph (/explain refused, unlisted)
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import html
import ipaddress
import json
import logging
import os
import queue
import shlex
import socket
import signal
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import InitVar, asdict, dataclass
from datetime import datetime, timezone
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Callable, Sequence
from urllib.parse import quote

import h11
import uvicorn
from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator, model_validator
from starlette.exceptions import HTTPException as StarletteHTTPException
from uvicorn.protocols.http.h11_impl import H11Protocol

from .. import __version__
from ..checks import ACCESS_LOGS, by_field, check_threads, whole_number
from ..errors import AttnclfError, first_few, shown
from ..export.runtime import OnnxClassifier
from ..prediction import ClassThreshold, applied_thresholds, check_texts, class_threshold, joined_text_columns

SERVER_BATCH_TEXTS = 256  # texts run together at most, across requests
RETRY_AFTER_SECONDS = 1  # a 503 for too many requests in flight says this: /predict's batches take milliseconds
_SIGHUP = getattr(signal, "SIGHUP", None)  # what reloads a service's run (None on Windows, which has no SIGHUP)
# What a request the stop cut off is answered, a 503 with Retry-After (``AnswerCutOffRequests``)
STOPPED = ("the server is stopping: this request was cut off unfinished; retry it (here once the server is back, "
           "or on another)")
LOGGED_DETAIL_CHARS = 300  # an access log line's error detail at most: the app's details are one short line each
LOGGED_REQUEST_ID_CHARS = 64  # an X-Request-ID logged at most: a UUID is 36, nginx's $request_id 32
SHOWN_ERRORS = 3  # a body of the wrong shape is answered naming its first this-many problems
WEIGHTS_HEADER = "X-Attnclf-Weights"  # on each /predict and /explain answer: ``weights_id``, as GET /model gives it
# Beside it: ``model_id``, which changes with anything that changes the answers (a temperature, thresholds) too
MODEL_HEADER = "X-Attnclf-Model"
SHOWN_THRESHOLDS = 3  # a reload's line names the first this-many labels whose threshold moved
# A request skipped because its client went away before its work began: nginx's "client closed request", which
# the client never reads (uvicorn sends nothing on a closed connection), for the access log
CLIENT_GONE = 499
NO_EXPLANATIONS = ("this service runs the exported ONNX graph, which gives no explanations: `attnclf serve RUN_DIR` "
                   "(the PyTorch backend) explains")


MOST_SECONDS = 10 ** 9  # a seconds limit's largest (31 years): any wait past it is no limit


@dataclass(frozen=True)
class ServeLimits:
    max_batch: int = 64  # texts per /predict request
    # Explanations per /explain request, texts x methods (a multi-label run's: x each text's labels explained):
    # occlusion, the default, runs the model once per token.
    max_explain_batch: int = 8
    max_text_chars: int = 20_000  # characters per text (tokens beyond max_len are cut anyway)
    max_body_bytes: int = 1_000_000  # bytes per request body
    # Requests in flight (/health aside); more are answered 503 at once (``InFlightLimit``). Half of them at most may be
    # explanations (``explain_slots``), which run one at a time: a queue of slow ones would otherwise hold them all.
    max_connections: int = 64
    # Seconds a request's body may take to arrive, then 408 (``BodyLimit``): a client that stalls mid-body would
    # otherwise hold its slot among max_connections for as long as it keeps the connection open. Its head gets as
    # long (``TimedHeads``).
    max_body_seconds: int = 10
    # Seconds a stop (Ctrl-C, SIGTERM) waits for requests in flight, then answers them 503 (``AnswerCutOffRequests``):
    # within Docker's default stop timeout (10 s); a long /explain wants more, and systemd (90 s) or Kubernetes (30 s)
    # wait longer.
    stop_seconds: int = 5
    # Seconds an idle keep-alive connection is kept open (uvicorn's default): behind a proxy or load balancer that
    # reuses its connections, longer than its own idle timeout, or it races the service's close and answers 502.
    keep_alive_seconds: int = 5
    named: InitVar[Callable[[str], str]] = by_field  # how errors name a limit (the command line: by its flag)

    def __post_init__(self, named: Callable[[str], str]):
        for name, value in asdict(self).items():
            count = whole_number(value)  # (True is no count of 1; numpy's integers are counts, kept as ints for JSON)
            if count is None or count < 1:
                raise AttnclfError(f"{named(name)} must be a positive integer, got {shown(value)}")
            # (asyncio's timers take seconds as a float: past it, each deadline raised OverflowError, a traceback)
            if name.endswith("_seconds") and count > MOST_SECONDS:
                raise AttnclfError(f"{named(name)} must be a positive integer of at most {MOST_SECONDS} seconds "
                                   f"(31 years), got {shown(value)}")
            object.__setattr__(self, name, count)

    @property
    def explain_slots(self) -> int:
        """How many /explain requests may be in flight, explained or waiting their turn: half of ``max_connections``
        (one at the least), so that predictions always have the other half.

        >>> ServeLimits(max_connections=64).explain_slots, ServeLimits(max_connections=1).explain_slots
        (32, 1)
        """
        return max(1, self.max_connections // 2)


# ---------------------------------------------------------------- request and response bodies


class _Texts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    texts: list[str] | None = Field(None, description="texts to classify")
    text: str | None = Field(None, description="one text (instead of texts)")

    @model_validator(mode="before")
    @classmethod
    def _first_problems(cls, body):
        """The body cut to its first ``SHOWN_ERRORS`` unknown fields and wrong texts, if it has that many: pydantic
        makes an error of every one (and FastAPI a copy of each), and a megabyte of ``[1, 1, ...]`` held the event
        loop 4 s for an answer that names the first few. A body so cut is refused all the same, for the same ones.

        >>> len(PredictRequest._first_problems({"texts": [1] * 10, "a": 1, "b": 2, "c": 3, "d": 4}))
        4
        """
        if not isinstance(body, dict):
            return body
        unknown = [name for name in body if name not in cls.model_fields]
        if len(unknown) > SHOWN_ERRORS:
            kept = set(unknown[:SHOWN_ERRORS])
            body = {name: value for name, value in body.items() if name in cls.model_fields or name in kept}
        texts = body.get("texts")
        if isinstance(texts, list):
            wrong = list(islice((i for i, text in enumerate(texts) if not isinstance(text, str)), SHOWN_ERRORS))
            if len(wrong) == SHOWN_ERRORS:
                body = body | {"texts": texts[:wrong[-1] + 1]}
        return body

    @model_validator(mode="after")
    def _one_of(self):
        if (self.texts is None) == (self.text is None):
            raise ValueError("give either 'texts' (a list) or 'text' (one string)")
        return self

    def checked(self, max_texts: int, max_chars: int) -> list[str]:
        """The texts, or an HTTP error naming the limit they break."""
        texts = [self.text] if self.text is not None else self.texts
        if not texts:
            raise HTTPException(422, "texts is empty: give one text at least")
        if len(texts) > max_texts:
            raise HTTPException(413, f"{len(texts)} texts in one request; the limit is {max_texts}")
        for i, text in enumerate(texts):
            if len(text) > max_chars:
                raise HTTPException(413, f"text {i} has {len(text)} characters; the limit is {max_chars}")
        try:  # here, not in the batch it would join: a text the model cannot read must not fail other requests
            return check_texts(texts)
        except AttnclfError as exc:
            raise HTTPException(422, str(exc)) from None


class PredictRequest(_Texts):
    model_config = ConfigDict(json_schema_extra={"examples": [{"texts": ["not good, but the ending was wonderful"]}]})


class ExplainRequest(_Texts):
    method: str | list[str] | None = Field(
        None, description="attention, rollout, grad-input, integrated-gradients or occlusion (default: occlusion); "
                          "several as a list, or all (every method GET /model lists), answered each text's "
                          "explanations together, in the order asked; a request's texts x methods (a multi-label "
                          "run's: x the labels each text is explained for) is at most limits.max_explain_batch. "
                          "Where the model pools by attention, every method but attention answers the pooling "
                          "weights beside its scores, as pooling_attention (the same for every class), unless "
                          "attention is among the methods asked for; `attnclf faithfulness` measures which method "
                          "to trust")
    # Strict: JSON's true and 1.0 are no class index (pydantic would read them as 1).
    target: StrictStr | StrictInt | None = Field(None, description="class to explain, by name or by index into the "
                                                                   "model's labels (default: the predicted one; a "
                                                                   "multi-label run's: each label it predicts, one "
                                                                   "explanation each, or its most probable if none)")

    @field_validator("method", mode="before")
    @classmethod
    def _name_or_names(cls, value):
        """One error for the field, naming the first value that is no name: the union's own is one per type, and one
        per item of a list."""
        if value is None or isinstance(value, str):
            return value
        wrong = next((item for item in value if not isinstance(item, str)), None) if isinstance(value, list) else value
        if wrong is None:
            return value
        raise ValueError(f'a method name, a list of them or "all", not {shown(wrong, write=json.dumps)}')

    def methods(self, available: list[str]) -> list[str] | None:
        """The methods asked for as a list or ``all``, each one ``available`` (the model's), or a one-line error; None
        where one was asked by name, or none (the default), which the explanation itself checks as it always has.

        >>> ExplainRequest(text="a", method=["occlusion"]).methods(["occlusion"]), ExplainRequest(text="a").methods([])
        (['occlusion'], None)
        """
        from ..explain.methods import DEFAULT_METHOD, chosen_methods

        if self.method is None or isinstance(self.method, str) and self.method != "all":
            return None
        if not available:  # an ensemble, a run that reads windows: refused as for one method, in the model's words
            return [DEFAULT_METHOD]
        return chosen_methods(self.method, available, "method")

    @field_validator("target", mode="before")
    @classmethod
    def _name_or_index(cls, value):
        """One error for the field, in JSON's words: the union's own is one per type ("target.str: ...; target.int:
        ...")."""
        if value is None or isinstance(value, str) or isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ValueError(f"a class name (a string) or an index into the model's labels (an integer), not "
                         f"{shown(value, write=json.dumps)}")


class PredictionOut(BaseModel):
    label: str
    confidence: float
    probabilities: dict[str, float]
    # (Every backend counts them: never null.)
    unknown_tokens: int = Field(description="how many of the tokens the model read are <unk>: words its vocabulary "
                                            "lacks, which tell it nothing; past a quarter of tokens_read, the answer "
                                            "rests on few known words")
    tokens_read: int = Field(description="how many tokens the model read: after truncation to its max_len, or for a "
                                         "run that reads long texts as windows, to what its windows cover")


class PredictResponse(BaseModel):
    predictions: list[PredictionOut]


class LabelSetOut(BaseModel):
    labels: list[str] = Field(description="every label whose probability reaches its threshold (GET /model's "
                                          "thresholds, tuned on validation), most probable first; possibly none")
    probabilities: dict[str, float] = Field(description="each label's own sigmoid probability: they need not sum "
                                                        "to 1")
    unknown_tokens: int = PredictionOut.model_fields["unknown_tokens"]
    tokens_read: int = PredictionOut.model_fields["tokens_read"]


class LabelSetResponse(BaseModel):
    predictions: list[LabelSetOut]


class ErrorOut(BaseModel):
    detail: str = Field(description="what was wrong, in one line")


def _error_responses(statuses: dict[int, str]) -> dict:
    """FastAPI ``responses=`` for the error answers a route gives, each ``{"detail": "..."}``. Declaring 422
    replaces FastAPI's own schema for it, a list of validation errors, which this app never sends (``_invalid``).

    >>> _error_responses({413: "over a limit"})[413]["description"]
    'over a limit'
    """
    return {status: {"model": ErrorOut, "description": text} for status, text in statuses.items()}


_BUSY = "too many requests in flight, or the server stopping: retry after the Retry-After header's seconds"
_BODY_ERRORS = {  # (the errors of a route that reads a JSON body)
    400: "the body is not JSON the server can read",
    408: "the body did not arrive within the limit's seconds",
    413: "over a limit (body bytes, texts, characters per text)",
    415: "the body was not sent as application/json",
    422: "a body of the wrong shape, or no text",
    503: _BUSY,
}


# ---------------------------------------------------------------- batching


class Batcher:
    """Runs ``predict`` (texts -> one answer per text) on one worker thread, batching requests that queue up meanwhile.

    While a batch runs, new requests wait; the next batch takes all of them
    (up to ``max_texts`` texts). An idle server thus answers a lone request at
    once, and a busy one amortises each model call over many requests. A request may name its own ``predict`` (the
    model it was sent to, which a reload has since replaced): a batch runs one model, so it takes the requests
    waiting in turn while they name the same one.
    """

    def __init__(self, predict: Callable[[list[str]], Sequence], executor: ThreadPoolExecutor,
                 max_texts: int = SERVER_BATCH_TEXTS):
        self.predict = predict
        self.executor = executor
        self.max_texts = max_texts
        self.requests = 0
        self.batches = 0
        self._pending: deque[tuple[list[str], asyncio.Future, Callable[[list[str]], Sequence]]] = deque()
        self._wakeup = asyncio.Event()
        self._solo = 0  # the next this-many batches take one request each (after a batch failed)
        # Why the worker loop ended, if a bug ended it: every request waiting and every later one is answered so,
        # and /health fails, rather than each waiting for ever on a worker that looks alive.
        self.stopped: str | None = None
        # The batch the worker took off the queue last: a bug ending the loop answers these too, in no queue any more.
        self._taken: list[tuple[list[str], asyncio.Future, Callable[[list[str]], Sequence]]] = []

    async def submit(self, texts: list[str], predict: Callable[[list[str]], Sequence] | None = None) -> Sequence:
        """The answers for ``texts`` by ``predict`` (by default the batcher's), computed in whichever batch they land
        in.

        >>> # await batcher.submit(["a fine film"], served.predict)   # the model the request began with
        """
        if self.stopped:
            raise HTTPException(503, self.stopped)
        future = asyncio.get_running_loop().create_future()
        self._pending.append((texts, future, predict or self.predict))
        self._wakeup.set()
        return await future

    async def run(self) -> None:
        """The worker loop; runs until cancelled, or until a bug of its own ends it (``stopped`` then says so)."""
        try:
            await self._batches()
        except Exception as exc:  # (its type alone: its message may quote a text)
            self.stopped = (f"the prediction worker stopped on an internal error ({type(exc).__name__}): this "
                            f"service answers no prediction until it is restarted")
            for _, future, _ in [*self._taken, *self._pending]:
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
                texts = [text for job_texts, _, _ in jobs for text in job_texts]
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
                for job_texts, future, _ in jobs:
                    if not future.done():  # a client that hung up cancelled its future
                        future.set_result(answers[start : start + len(job_texts)])
                    start += len(job_texts)

    def _next_batch(self) -> list[tuple[list[str], asyncio.Future, Callable[[list[str]], Sequence]]]:
        jobs, size = [], 0
        while self._pending and (not jobs or not self._solo and size + len(self._pending[0][0]) <= self.max_texts
                                 and self._pending[0][2] is jobs[0][2]):
            job = self._pending.popleft()
            if not job[1].cancelled():
                jobs.append(job)
                size += len(job[0])
        if jobs and self._solo:
            self._solo -= 1
        return jobs


# ---------------------------------------------------------------- request body bound


class BodyLimit:
    """ASGI middleware: reads at most ``max_bytes`` of a request body, else answers 413, within ``max_seconds``,
    else answers 408 (and the request leaves ``InFlightLimit``'s count).

    A declared Content-Length over the limit is refused before reading; a
    chunked body is counted as it arrives. The seconds bound the whole body, not
    each wait: a client trickling a byte at a time is cut off as one sending nothing is.
    """

    def __init__(self, app, max_bytes: int, max_seconds: float):
        self.app = app
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self._too_large(int(declared), scope, receive, send)
        parts, size, more = [], 0, True  # (joined once: adding each part to the body so far copied it all again)

        async def read() -> bool:
            """Reads the body, or up to the first part past ``max_bytes``; False if the client left first."""
            nonlocal size, more
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return False
                parts.append(message.get("body", b""))
                size += len(parts[-1])
                more = message.get("more_body", False)
                if size > self.max_bytes:
                    break
            return True

        # One timer for the whole read, which is cut only while waiting for the client: parts that have arrived
        # when the time is up are still read (the server having come to them late is not the client's fault).
        try:
            if not await asyncio.wait_for(read(), self.max_seconds):
                return
        except asyncio.TimeoutError:  # (not the builtin TimeoutError before Python 3.11)
            late = JSONResponse({"detail": f"request body not received within {self.max_seconds:g} s ({size} "
                                           f"bytes came); the limit is {self.max_seconds:g} s"}, 408,
                                headers={"Connection": "close"})
            return await late(scope, receive, send)
        if size > self.max_bytes:
            return await self._too_large(size, scope, receive, send, at_least=more)
        body, replayed = b"".join(parts), False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _too_large(self, size: int, scope, receive, send, at_least: bool = False):
        what = f"{'more than ' if at_least else ''}{size} bytes"
        await JSONResponse({"detail": f"request body is {what}; the limit is {self.max_bytes}"}, 413)(
            scope, receive, send)


def _route_path(scope) -> str:
    """The path the app's routes match: ASGI's ``path`` holds the ``root_path`` a proxy or ``uvicorn --root-path``
    mounts the app under, which routing strips and the middlewares must strip too.

    >>> _route_path({"path": "/api/health", "root_path": "/api"}), _route_path({"path": "/health"})
    ('/health', '/health')
    """
    root, path = scope.get("root_path", ""), scope["path"]
    return path[len(root):] if root and path.startswith(root) else path


class InFlightLimit:
    """ASGI middleware: at most ``limit`` requests in the app at once; one more is answered at once, a 503 in the
    app's JSON error format with Retry-After, rather than queued behind the others. ``exempt`` paths (liveness) are
    always let through: a health check failing under load would have a busy server restarted.

    It counts requests, not connections: an idle keep-alive connection holds no slot.

    >>> # app.add_middleware(InFlightLimit, limit=64, exempt={"/health"})   # as create_app does
    """

    def __init__(self, app, limit: int, exempt: set[str]):
        self.app = app
        self.limit = limit
        self.exempt = exempt
        self.in_flight = 0  # (one event loop: no lock needed)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or _route_path(scope) in self.exempt:
            return await self.app(scope, receive, send)
        if self.in_flight >= self.limit:
            busy = JSONResponse({"detail": f"the server is busy: {self.limit} requests in flight, the most it serves "
                                           f"at once; retry after {RETRY_AFTER_SECONDS} s"},
                                503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
            return await busy(scope, receive, send)
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


class AnswerCutOffRequests:
    """ASGI middleware: a request still running when a stop (Ctrl-C, SIGTERM) has waited out uvicorn's graceful
    seconds is cancelled, and uvicorn would answer it a plain-text 500 and log the cancellation as the app's
    traceback. The request was sound and the server went away under it: it is answered a JSON 503 with Retry-After,
    which a client or a load balancer knows to retry.

    >>> # app.add_middleware(AnswerCutOffRequests)   # outermost, as create_app adds it
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def watched(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except asyncio.CancelledError:
            if started:  # (half an answer cannot be taken back: uvicorn closes the connection)
                raise
            # Not raised on: this task ends here, and nothing awaits it but the server that cancelled it.
            await JSONResponse({"detail": STOPPED}, 503, headers={"Retry-After": str(RETRY_AFTER_SECONDS),
                                                                  "Connection": "close"})(scope, receive, send)


class AccessLog:
    """ASGI middleware: one line per request to ``write``, when it is answered: the time (UTC), client, method, path
    (percent-encoded, one field), status and milliseconds, and for an error the answer's one-line ``detail`` (for a
    bug, the 500 the client gets and the exception's type), so an operator can tell which request failed and why;
    the X-Request-ID a proxy tagged it with, if any (percent-encoded and bounded, one field), which joins the line to
    the proxy's.
    Never a text: the details name limits, fields and positions, not what was sent. ``quiet`` paths (liveness) are
    logged only when they fail: a probe every few seconds would bury the requests. ``log_format`` "json" writes each
    line as one JSON object (``logged_line``) for a log collector.

    >>> # app.add_middleware(AccessLog, write=print, quiet={"/health"})   # as create_app does, asked for a log
    """

    def __init__(self, app, write: Callable[[str], None], quiet: set[str], log_format: str = "text"):
        self.app = app
        self.write = write
        self.quiet = quiet
        self.log_format = log_format

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status, error, failed = time.perf_counter(), None, [], None

        async def watched(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status is not None and status >= 400:
                error.append(message.get("body", b""))  # (an error answer is one short JSON object)
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:  # a bug: Starlette's outermost middleware answers it 500 where nothing was sent
            failed = type(exc).__name__  # (its type alone: its message may quote a text)
            raise
        finally:  # (a request the stop cut off mid-answer, too: logged with what it had sent)
            answered = status or (500 if failed else None)
            path = _route_path(scope)
            if not (path in self.quiet and answered is not None and answered < 400):
                # The path as sent on the wire, percent-encoded: decoded, its spaces and newlines forge fields
                encoded = partial(quote, safe="/", errors="backslashreplace")
                written = shown(path, write=encoded)
                tagged = dict(scope["headers"]).get(b"x-request-id")
                detail = _detail(b"".join(error)) or (f"internal error ({failed})" if failed else None)
                self.write(logged_line(self.log_format, "request", client=(scope.get("client") or (None,))[0],
                                       method=scope["method"], path=written, status=answered,
                                       ms=round((time.perf_counter() - start) * 1000, 1), detail=detail,
                                       request_id=None if tagged is None else shown(
                                           tagged.decode("latin-1"), most=LOGGED_REQUEST_ID_CHARS, write=encoded)))


def logged_line(log_format: str, event: str, **fields) -> str:
    """One line of the service's log on stdout, ``log_format`` "text" or "json", for ``event``: a "request" (its
    fields as ``AccessLog`` gives them) or the service's own ("serving", "warning", "stopping", "stopped",
    "reloaded", "reload_failed", a ``message`` each). As JSON, one object a line, the time (UTC) and event first,
    escaped to ASCII: whatever a detail quotes of a request (a method name, say) can neither break the line nor
    garble it for a collector reading it as another encoding. As text, the service's own lines are their message
    alone, as they always were, on one line.

    >>> logged_line("text", "request", client="10.0.0.1", method="GET", path="/x", status=404, ms=1.0,
    ...             detail="Not Found")[21:]
    '10.0.0.1 GET /x 404 1.0 ms: Not Found'
    >>> record = json.loads(logged_line("json", "stopped", message="stopped after serving 1 request"))
    >>> list(record), record["message"]
    (['time', 'event', 'message'], 'stopped after serving 1 request')
    """
    when = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if log_format == "json":
        return json.dumps({"time": when, "event": event, **fields})
    if event != "request":  # (a run path or a label, the operator's, quoted in it stays on the line)
        return " ".join(fields["message"].splitlines())
    line = (f"{when} {fields['client'] or '-'} {fields['method']} {fields['path']} {fields['status'] or 'unanswered'} "
            f"{fields['ms']:.1f} ms" + (f" {fields['request_id']}" if fields.get("request_id") else ""))
    return line + (f": {fields['detail']}" if fields["detail"] else "")


class JsonLogRecords(logging.Formatter):
    """uvicorn's own log records (its warnings, an error's traceback) as ``logged_line`` JSON objects, one a line, the
    event their level: under ``--access-log json`` a collector reading a container's stdout and stderr as one stream
    (Docker's, Kubernetes's) parses every line, and a traceback is one record, not a line each.

    >>> json.loads(JsonLogRecords().format(logging.makeLogRecord({"msg": "Exceeded concurrency limit.",
    ...                                                            "levelname": "WARNING"})))["event"]
    'warning'
    """

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        return logged_line("json", record.levelname.lower(), message=message)


def _uvicorn_log_config(log_format: str) -> dict:
    """uvicorn's logging set-up, its records written as JSON (``JsonLogRecords``) where the service's log is.

    >>> _uvicorn_log_config("json")["formatters"]["default"]["()"].__name__
    'JsonLogRecords'
    """
    if log_format != "json":
        return uvicorn.config.LOGGING_CONFIG
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["formatters"]["default"] = {"()": JsonLogRecords}
    return config


def _detail(body: bytes) -> str:
    """An error answer's ``detail``, bounded; empty where the body holds none.

    >>> _detail(b'{"detail": "texts is empty"}'), _detail(b"Internal Server Error")
    ('texts is empty', '')
    """
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        return ""
    return shown(detail, most=LOGGED_DETAIL_CHARS, write=str) if isinstance(detail, str) else ""


class JsonBodies:
    """ASGI middleware for the routes that take a JSON body: one sent as anything else (curl -d sends a form)
    is answered 415, naming the Content-Type to send, instead of a validation error about a body that looks
    right. One sent without a Content-Type (or an empty one) is read as JSON."""

    def __init__(self, app, paths: set[str]):
        self.app = app
        self.paths = paths

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST" and _route_path(scope) in self.paths:
            declared = dict(scope["headers"]).get(b"content-type", b"")
            media = declared.decode("latin-1").split(";", 1)[0].strip().lower()
            if not media:  # none, or empty: FastAPI would answer 422 about the body itself
                headers = [(name, value) for name, value in scope["headers"] if name != b"content-type"]
                scope = dict(scope, headers=[*headers, (b"content-type", b"application/json")])
            elif media != "application/json" and not media.endswith("+json"):
                return await JSONResponse({"detail": f"send the body as JSON with Content-Type: application/json, "
                                                     f"not {shown(media, write=str)}"}, 415)(scope, receive, send)
        await self.app(scope, receive, send)


# ---------------------------------------------------------------- the app


def _field(error: dict) -> str:
    """Where a validation error sits, e.g. ``texts.1`` (FastAPI's location starts with "body"); a field the body
    should not have is named by its start, as a megabyte-long name is no use echoed whole.

    >>> _field({"loc": ("body", "texts", 1)}), _field({"loc": ("body", "x" * 100)})
    ('texts.1', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...')
    """
    return shown(".".join(str(part) for part in error["loc"][1:]), write=str) or "body"


_SHAPE = 'send a JSON object: {"texts": ["a text", ...]} or {"text": "a text"}'
# The next step after pydantic's message, where a body's shape is wrong: (where, error type) -> (the input it
# describes, what to send). A text where a list goes is one text; a number there is neither, and told no next step.
_NEXT_STEP = {("body", "model_attributes_type"): (object, _SHAPE),
              ("texts", "list_type"): (str, 'one text goes as {"text": "..."}'),
              ("text", "string_type"): (list, 'several go as {"texts": [...]}')}


def _message(error: dict) -> str:
    """A validation error's message; a validator's own without pydantic's "Value error, " before it; a body of the
    wrong shape told the shape to send.

    >>> _message({"type": "value_error", "msg": "Value error, no text", "ctx": {"error": ValueError("no text")}})
    'no text'
    >>> _message({"type": "list_type", "loc": ("body", "texts"), "msg": "Input should be a valid list", "input": "a"})
    'Input should be a valid list; one text goes as {"text": "..."}'
    """
    if error["type"] == "value_error":
        return str(error["ctx"]["error"])
    where = _field(error)
    if where == "body" and error["type"] == "missing":  # (no body at all: pydantic's "Field required")
        return f"empty; {_SHAPE}"
    described, next_step = _NEXT_STEP.get((where, error["type"]), (None, ""))
    return f"{error['msg']}; {next_step}" if described and isinstance(error.get("input"), described) else error["msg"]


def backend_name(classifier) -> str:
    """What runs ``classifier``, as GET /model names it: "torch", or "onnx" / "onnx-int8" for an ``OnnxClassifier``
    (which of its graphs).

    >>> backend_name(object())
    'torch'
    """
    if isinstance(classifier, OnnxClassifier):
        return "onnx-int8" if classifier.int8 else "onnx"
    return "torch"


def _export_summary(classifier: OnnxClassifier) -> dict:
    """GET /model's account of an ONNX export: what its export.json records, under the keys the PyTorch backend's
    answer uses (an export holds no model config, training versions or refit, and no explanation methods)."""
    config, tokenizer = classifier.config, classifier.config["tokenizer"]
    return {
        "labels": classifier.label_names,
        "model": {"name": config["model"]["name"], "parameters": config["model"]["parameters"]},
        "ensemble_members": 1,
        "tokenizer": {"kind": tokenizer["kind"], "max_len": tokenizer["max_len"],
                      "vocab_size": classifier.tokenizer.vocab_size, "truncation": tokenizer.get("truncation")},
        "windows": None,  # (runs that read windows are not exported)
        "version": __version__,
        "exported_with": config.get("versions", {}),
        "temperatures": [config.get("temperature", 1.0)],
        "explain_methods": [],
        "explain_default": None,
        "explain_pooling_attention": False,
    }


def _explain_methods(classifier) -> list[str]:
    """The explanation methods a PyTorch ``classifier`` gives: none from an ``Ensemble``, whose members tokenise and
    attend each their own way (``Ensemble.explain`` refuses)."""
    from ..explain import available_methods

    if hasattr(classifier, "members"):
        return []
    return available_methods(classifier.model)


def _model_name(classifier) -> str:
    """What model ``classifier`` runs: an ensemble's distinct member models joined by " + ", in member order.

    >>> class Run:
    ...     def __init__(self, name): self.config = {"model": {"name": name}}
    >>> class Mixed:
    ...     members = [Run("boe"), Run("self-attn"), Run("boe")]
    >>> _model_name(Mixed()), _model_name(Run("lstm"))
    ('boe + self-attn', 'lstm')
    """
    members = getattr(classifier, "members", [classifier])
    names = [member.config.get("model", {}).get("name", "of unknown kind") for member in members]
    return " + ".join(dict.fromkeys(names))


def _description(backend: str, methods: list[str], model: str,
                 max_explanations: int = ServeLimits.max_explain_batch, multi_label: bool = False) -> str:
    """What /docs says of the service (``model``: its name): of /explain where it gives ``methods`` (at most
    ``max_explanations`` a request, texts x methods, a ``multi_label`` run's x each text's labels explained), and of
    the pooling attention where it pools by attention (a bag of embeddings has none to speak of), else why it does
    not; of a ``multi_label`` run's label sets.

    >>> about = _description("torch", ["grad-input", "integrated-gradients", "occlusion"], "boe")
    >>> about.split(":")[0], "attention" in about
    ('Text classifier (boe)', False)
    """
    # (a multi-label text is explained once per label: _refuse_past_the_labels counts them)
    counted = ("texts x methods x the labels each text is explained for, as a multi-label text is explained once "
               "per label: its predicted ones, 1 where it predicts none or a target is given" if multi_label
               else "texts x methods")
    several = (f"Several methods go in one request, as a list or \"all\", each text's explanations together: "
               f"{max_explanations} explanations a request at most ({counted}), as a slow method (occlusion, "
               f"integrated gradients) runs the model many times per text.")
    if multi_label and methods:
        return (f"Multi-label text classifier ({model}): /predict answers each text's set of labels, every label whose "
                "sigmoid probability reaches its threshold (GET /model's thresholds), possibly none. /explain scores "
                "tokens for each label it predicts (its most probable where it predicts none), or the target asked "
                "for, by that label's own probability, by occlusion unless asked otherwise; GET /model lists its "
                f"methods. {several}")
    if multi_label:
        # (an export explains nothing, whatever its model; a run's own model only where it reads no windows)
        why = (NO_EXPLANATIONS if backend != "torch" else
               "/explain does not for this model (a run that reads windows: not yet)")
        return (f"Multi-label text classifier ({model}){f' on onnxruntime ({backend})' if backend != 'torch' else ''}: "
                "/predict answers each text's set of labels, every label whose sigmoid probability reaches its "
                f"threshold (GET /model's thresholds), possibly none; {why}.")
    if "attention" in methods:
        return (f"Text classifier ({model}). Its attention weights show where the pooling layer looked, not why the "
                "model decided: /explain scores tokens by occlusion unless asked otherwise, with those weights beside, "
                f"and offers gradient attributions too, whose faithfulness `attnclf faithfulness` measures. {several}")
    if methods:
        return (f"Text classifier ({model}): /explain scores tokens by occlusion unless asked otherwise, and offers "
                "gradient attributions too, whose faithfulness `attnclf faithfulness` measures; GET /model lists its "
                f"methods. {several}")
    if backend != "torch":
        return (f"Text classifier ({model}) on onnxruntime ({backend}): /predict answers as the PyTorch service "
                f"does; {NO_EXPLANATIONS}.")
    return (f"Text classifier ({model}): /predict answers; /explain does not for this model (an ensemble: explain "
            "one of its members; a run that reads windows: not yet).")


def weights_id(weights_sha256: list[str | None] | None) -> str | None:
    """One value naming the weights a service answers with, as its answers' X-Attnclf-Weights header and GET /model's
    ``weights_id`` give it: one model's sha256 (what ``sha256sum model.safetensors`` prints), or for an ensemble the
    sha256 of its members' sha256s joined by commas, in member order (64 characters however many members). None where
    a weights' hash is unknown (an app not told them, an export older than its record of them).

    >>> weights_id(["ab" * 32]) == "ab" * 32, weights_id([None]), weights_id(["a", "b"])[:12]
    (True, None, '1eb7c54d5283')
    """
    if not weights_sha256 or None in weights_sha256:
        return None
    if len(weights_sha256) == 1:
        return weights_sha256[0]
    return hashlib.sha256(",".join(weights_sha256).encode()).hexdigest()


def temperatures(classifier) -> list[float]:
    """Each member's temperature (`attnclf calibrate`'s; 1: the model's own probabilities), one for one model,
    an ONNX export's as exported.

    >>> # temperatures(Classifier.load("runs/demo"))   # [1.0], or [0.82] once calibrated
    """
    if isinstance(classifier, OnnxClassifier):
        return [float(classifier.config.get("temperature", 1.0))]
    return [float(member.temperature) for member in getattr(classifier, "members", [classifier])]


def model_id(weights: str | None, member_temperatures: list[float], thresholds: dict[str, float] | None) -> str | None:
    """One value naming the run's model a service answers with as a whole, as its answers' X-Attnclf-Model header and
    GET /model's ``model_id`` give it: the sha256 of its ``weights`` (``weights_id``), the temperatures its
    probabilities are divided by and a multi-label model's thresholds, by label, written as JSON (the service's own
    settings, its backend and --threshold, are GET /model's, fixed for its life). X-Attnclf-Weights stays the
    weights' own sha256 (what clients compare with ``sha256sum``), unchanged by `attnclf calibrate` or thresholds
    tuned again, which change every answer's probabilities or label sets; this changes with them. None where the
    weights are unknown (two unknown weights are no evidence of one model).

    >>> model_id("ab" * 32, [1.0], None) == model_id("ab" * 32, [1.0], None) != model_id("ab" * 32, [0.5], None)
    True
    >>> model_id(None, [1.0], None) is None
    True
    """
    if weights is None:
        return None
    decided_by = {"weights": weights, "temperatures": member_temperatures, "thresholds": thresholds}
    return hashlib.sha256(json.dumps(decided_by, sort_keys=True).encode()).hexdigest()


def _thresholds(classifier) -> dict[str, float] | None:
    """A multi-label model's own thresholds by label (a calibrated run's moved with its probabilities; the service's
    --threshold, the same for its whole life, aside); None for a single-label one, which has none."""
    if not getattr(classifier, "multi_label", False):
        return None
    return dict(zip(classifier.label_names, (float(cut) for cut in classifier.thresholds)))


def _exactly(value: float) -> str:
    """``value`` as short as it is exact: :g's six significant digits where they are all it has, else its shortest
    round trip (repr), so that a change past the sixth digit (a temperature calibrated again) shows in a reload line.

    >>> _exactly(1.0), _exactly(0.5), _exactly(0.4123456)
    ('1', '0.5', '0.4123456')
    """
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


@dataclass(frozen=True)
class ServedModel:
    """The model a service answers with, and what it says of it, as one value: a reload swaps it whole
    (``create_app``'s ``swap_model``), and a request reads it once, as it begins, so that one model answers it
    throughout and its X-Attnclf-Weights header names that model.

    >>> # served = ServedModel.of(Classifier.load("runs/demo"), {"run": "runs/demo", "weights_sha256": [...]})
    """

    classifier: object
    threshold: ClassThreshold | None  # the service's operating point, of this model's labels
    origin: dict  # the run, weights_sha256, weights_id and model_id GET /model names
    explain_methods: list[str]
    # A run trained on several columns (a title and a body; AG News's title and description) read each text as their
    # values joined: a client sends "title\nbody" so. None: one column, one text. Found here, off the event loop: it
    # may import the data package (0.6 s), which a first GET /model held every request for.
    text_columns: dict | None
    # /predict's call: one object per model, by which the Batcher keeps each batch to one model
    predict: Callable[[list[str]], Sequence]

    @classmethod
    def of(cls, classifier, served_from: dict | None = None, threshold: tuple[str, float] | str | None = None,
           named: Callable[[str], str] = by_field) -> "ServedModel":
        """``classifier`` as served from ``served_from`` (``create_app``'s), ``threshold`` checked against its labels
        (a one-line error naming ``named("threshold")`` for a class it lacks)."""
        threshold = class_threshold(threshold, classifier.label_names, getattr(classifier, "multi_label", False),
                                    named=named)
        # Which model answers: a client tells a service still holding the weights it loaded from one whose run was
        # trained again since, and a torch service from an ONNX one serving the same weights.
        origin = {"run": None, "weights_sha256": None} | (served_from or {})
        origin["weights_id"] = weights_id(origin["weights_sha256"])
        origin["model_id"] = model_id(origin["weights_id"], temperatures(classifier), _thresholds(classifier))
        # No methods from an ONNX graph, an ensemble (its members tokenise each their own way) or a run that reads
        # windows: there /explain only refuses, and is left out of the schema and /docs.
        methods = _explain_methods(classifier) if backend_name(classifier) == "torch" else []
        # (Without the token strings and attention, which /predict does not answer; its unknown tokens are counted
        # from the ids the model reads, at 0.2% of a batch's time or less: BENCHMARKS.md, Unknown tokens.)
        return cls(classifier, threshold, origin, methods, joined_text_columns(classifier.config),
                   partial(classifier.predict, tokens=False, threshold=threshold))

    @property
    def multi_label(self) -> bool:
        return getattr(self.classifier, "multi_label", False)

    @property
    def answered_by(self) -> dict[str, str]:
        """The headers each of its answers carries, naming its weights and the model as a whole (none where the
        weights are unknown): asking /model separately could reach a service that has reloaded or restarted on others
        in between."""
        if not self.origin["weights_id"]:
            return {}
        return {WEIGHTS_HEADER: self.origin["weights_id"], MODEL_HEADER: self.origin["model_id"]}

    def changed_from(self, old: "ServedModel") -> str:
        """What a reload from ``old`` to this model changed, as its log line says it: the weights (or that they are
        unchanged), then the temperature and the labels whose threshold moved, where they did: a run calibrated or
        tuned again answers otherwise on the same weights.

        >>> # served.changed_from(before)   # 'weights 3f2a... unchanged; temperature 1 -> 0.82'
        """
        def named(weights):
            return weights or "of unknown sha256"

        old_weights, new_weights = old.origin["weights_id"], self.origin["weights_id"]
        if new_weights is None and old_weights is None:  # (two unknown weights are no evidence of the same ones)
            changes = ["weights of unknown sha256, before as after"]
        else:
            changes = [f"weights {new_weights} unchanged" if new_weights == old_weights else
                       f"weights {named(old_weights)} -> {named(new_weights)}"]
        if (before := temperatures(old.classifier)) != (after := temperatures(self.classifier)):
            def written(each):
                return _exactly(each[0]) if len(each) == 1 else f"[{', '.join(_exactly(t) for t in each)}]"

            changes.append(f"temperature{'s' * (len(after) > 1)} {written(before)} -> {written(after)}")
        old_cuts, new_cuts = _thresholds(old.classifier) or {}, _thresholds(self.classifier) or {}
        moved = [f"{shown(label, write=str)} {_exactly(old_cuts[label])} -> {_exactly(cut)}"
                 for label, cut in new_cuts.items() if label in old_cuts and cut != old_cuts[label]]
        if moved:
            plural = "s" * (len(moved) > 1)
            changes.append(f"threshold{plural} of {len(moved)} label{plural} moved: "
                           f"{', '.join(moved[:SHOWN_THRESHOLDS])}{', ...' if len(moved) > SHOWN_THRESHOLDS else ''}")
        return "; ".join(changes)

    def description(self, max_explanations: int) -> str:
        """What /docs says of the service serving it (``_description``)."""
        return _description(backend_name(self.classifier), self.explain_methods, _model_name(self.classifier),
                            max_explanations, self.multi_label)


def _refuse_past_the_labels(served: ServedModel, texts: list[str], methods: int, limit: int) -> None:
    """A 413 where ``texts`` x ``methods`` x the labels each text is explained for (``explained_labels``: its
    predicted ones, or its most probable where it predicts none) is more than ``limit`` explanations, saying how they
    were counted.

    >>> # _refuse_past_the_labels(served, ["bread soup and the orchestra"] * 8, 1, 8)   # 413: 16 explanations
    """
    from ..explain.explanation import explained_labels

    labels = sum(len(each) for each in explained_labels(served.classifier, texts, threshold=served.threshold))
    if labels * methods > limit:
        raise HTTPException(413, f"{labels * methods} explanations in one request ({len(texts)} "
                                 f"text{'s' if len(texts) > 1 else ''} x {methods} method{'s' if methods > 1 else ''} "
                                 f"x their predicted labels, 1 where none: "
                                 f"{labels} in all); the limit is {limit}")


def create_app(classifier, limits: ServeLimits = ServeLimits(),
               access_log: Callable[[str], None] | None = None, served_from: dict | None = None,
               access_log_format: str = "text", threshold: tuple[str, float] | str | None = None,
               named: Callable[[str], str] = by_field) -> FastAPI:
    """The API around ``classifier``: an ``attnclf.Classifier``, an ``Ensemble`` or an ``OnnxClassifier`` (which two
    /explain refuses). ``access_log``: given a line per request (``AccessLog``); none by default, as a library's app;
    ``access_log_format`` "text" or "json" (one JSON object a line, ``logged_line``).
    ``served_from``: the ``run`` and ``weights_sha256`` (each member's) GET /model names, as ``serve`` gives them;
    None for each by default (a classifier knows neither). ``threshold``: one class's operating point (a multi-label
    run's label, in place of its tuned threshold), which every /predict answer applies (``Classifier.predict``) and
    GET /model names; ``named`` names it in its error.
    The app's ``state.swap_model(classifier, served_from)`` serves another model from the next request on (a
    reload's: ``ModelReloader``), whose labels must be the same, and the threshold's class among them; requests
    already in flight finish on the model they began with. ``state.served()`` is the model being served.

    >>> # with TestClient(create_app(Classifier.load("runs/demo"))) as client:   # (starts the batcher)
    >>> #     client.post("/predict", json={"text": "great"}).json()
    >>> # create_app(Classifier.load("runs/demo"), threshold=("positive", 0.9))  # positive from 0.9 on
    """
    served = ServedModel.of(classifier, served_from, threshold, named)
    multi_label = served.multi_label  # (the same for every model swapped in: the answers' schema rests on it)
    if access_log_format not in (formats := [name for name in ACCESS_LOGS if name != "off"]):  # (off: no access_log)
        raise AttnclfError(f"access_log_format must be {' or '.join(formats)}, got {shown(access_log_format)}")
    backend = backend_name(classifier)  # (a reload loads by the same backend)
    state: dict = {"explaining": 0, "served": served}  # (the /explain requests in flight: at most explain_slots)
    answer_headers = {200: {"headers": {WEIGHTS_HEADER: {
        "description": "the weights that answered: GET /model's weights_id (one model's sha256; an ensemble's, the "
                       "sha256 of its members' joined by commas)", "schema": {"type": "string"}}, MODEL_HEADER: {
        "description": "the model that answered, as a whole: GET /model's model_id, which changes with its weights, "
                       "temperature or thresholds", "schema": {"type": "string"}}}}}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # Predictions and explanations each make one model call at a time, on threads of their own: a queue of slow
        # explanations (occlusion of long texts takes seconds) must not hold up predictions. Made per start, as
        # a shutdown ends them: the same app may be started again (a test client per test, say).
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnclf-predict")
        state["explainer"] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnclf-explain")
        # Their turns, in order of arrival: taken on the event loop, so that one whose client has gone meanwhile is
        # skipped as it comes, where queued in the executor it would run for nobody.
        state["explain_turn"] = asyncio.Lock()
        state["batcher"] = Batcher(state["served"].predict, executor)
        worker = asyncio.create_task(state["batcher"].run())
        yield
        worker.cancel()
        executor.shutdown(wait=True)
        state.pop("explainer").shutdown(wait=True)
        state.pop("explain_turn")
        state.pop("batcher")

    def started(what: str):
        if what not in state:
            raise HTTPException(503, "the app has not started: serve it (`attnclf serve`, uvicorn) or, in Python, "
                                     "use it inside `with TestClient(app)`")
        return state[what]

    # FastAPI's own /docs and /redoc pages load their scripts from a CDN: a browser opening them reaches the
    # internet (or shows nothing offline). /docs is served from this process instead.
    app = FastAPI(title="attnclf", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description=served.description(limits.max_explain_batch))
    app.add_middleware(JsonBodies, paths={"/predict", "/explain"})
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes, max_seconds=limits.max_body_seconds)
    # Outside the body's bound (added after it): a request holds its slot while its body is still arriving, too.
    app.add_middleware(InFlightLimit, limit=limits.max_connections, exempt={"/health"})
    app.add_middleware(AnswerCutOffRequests)  # (whatever was running when the stop cut it off)
    if access_log is not None:  # (outermost: it logs every answer, the middlewares' own refusals too)
        app.add_middleware(AccessLog, write=access_log, quiet={"/health"}, log_format=access_log_format)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errors = exc.errors()
        if any(e["type"] == "json_invalid" for e in errors):
            return JSONResponse({"detail": "request body is not valid JSON"}, 400)
        return JSONResponse({"detail": "; ".join(f"{_field(e)}: {_message(e)}" for e in errors[:SHOWN_ERRORS])}, 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":  # not UTF-8, too deep
            return JSONResponse({"detail": "request body is not JSON the server can read (malformed, not UTF-8, or "
                                           "nested too deep)"}, 400)
        return await http_exception_handler(request, exc)

    @app.exception_handler(AttnclfError)
    async def _user_error(request: Request, exc: AttnclfError):
        return JSONResponse({"detail": str(exc)}, 400)

    answer = LabelSetResponse if multi_label else PredictResponse  # (its schema is what /docs shows)
    answered_fields = (LabelSetOut if multi_label else PredictionOut).model_fields

    @app.post("/predict", response_model=answer, responses=_error_responses(_BODY_ERRORS) | answer_headers)
    async def predict(request: PredictRequest, response: Response):
        """Label and class probabilities for each text (one text, or a batch; a multi-label run's: its set of labels
        and each label's probability), and how many of the tokens the model read are unknown to it; the label is the
        most probable class, or by the service's threshold (GET /model's threshold) where it has one. The
        X-Attnclf-Weights header names the weights that answered (GET /model's weights_id), X-Attnclf-Model the model
        as a whole, its temperature and thresholds too (GET /model's model_id)."""
        served = state["served"]
        predictions = await started("batcher").submit(request.checked(limits.max_batch, limits.max_text_chars),
                                                      served.predict)
        response.headers.update(served.answered_by)
        return {"predictions": [{key: value for key, value in prediction.to_dict().items()
                                 if key in answered_fields} for prediction in predictions]}

    # Out of the schema (and /docs) where it can only refuse: its request fields would promise what it refuses.
    @app.post("/explain", include_in_schema=bool(served.explain_methods), responses=_error_responses(_BODY_ERRORS | {
        400: f"{_BODY_ERRORS[400]}, or an unknown method or target, or one this model cannot give (see GET /model)"})
        | answer_headers)
    async def explain(request: ExplainRequest, response: Response, connection: Request):
        """Per-token scores by ``method``, or several, with what a score means; see GET /model for the methods
        available. The X-Attnclf-Weights header names the weights that answered (GET /model's weights_id),
        X-Attnclf-Model the model as a whole, its temperature and thresholds too (GET /model's model_id)."""
        if backend != "torch":
            raise HTTPException(400, NO_EXPLANATIONS)
        from ..explain.explanation import explain_each

        served = state["served"]
        texts = request.checked(limits.max_explain_batch, limits.max_text_chars)
        methods = request.methods(served.explain_methods)
        # Each method explains every text: the limit bounds the explanations, which is what a request costs.
        if methods is not None and len(texts) * len(methods) > limits.max_explain_batch:
            raise HTTPException(413, f"{len(texts)} texts x {len(methods)} methods = {len(texts) * len(methods)} "
                                     f"explanations in one request; the limit is {limits.max_explain_batch}")
        explainer = started("explainer")
        if state["explaining"] >= limits.explain_slots:
            raise HTTPException(503, f"the server is busy: {limits.explain_slots} explanations in flight, the most it "
                                     f"holds at once (half its requests in flight); retry after "
                                     f"{RETRY_AFTER_SECONDS} s", headers={"Retry-After": str(RETRY_AFTER_SECONDS)})

        def explained():
            # A multi-label text is explained once per label it predicts, which multiplies its cost: counted by one
            # forward pass, on the explainer's thread (not the event loop's), before any explanation runs.
            if served.multi_label and request.target is None and served.explain_methods:
                _refuse_past_the_labels(served, texts, 1 if methods is None else len(methods),
                                        limits.max_explain_batch)
            # (by the service's threshold: the class explained by default is the one /predict answers)
            if methods is None:
                return served.classifier.explain(texts, method=request.method, target=request.target,
                                                 threshold=served.threshold)
            return explain_each(served.classifier, texts, methods, target=request.target, threshold=served.threshold)

        state["explaining"] += 1
        try:
            async with state["explain_turn"]:
                # (A started explanation runs to its end: the thread computing it cannot be stopped.)
                if await connection.is_disconnected():
                    raise HTTPException(CLIENT_GONE, "the client closed the connection before its explanation "
                                                     "began: not computed")
                explanations = await asyncio.get_running_loop().run_in_executor(explainer, explained)
        finally:
            state["explaining"] -= 1
        response.headers.update(served.answered_by)
        return {"explanations": [e.to_dict() for e in explanations]}

    @app.get("/health")
    async def health():
        """Liveness and readiness, with the requests served by /predict and the batches they ran in: 200 once the
        model has loaded (the port opens then), 503 where the service can no longer answer predictions."""
        batcher = started("batcher")
        if batcher.stopped:
            raise HTTPException(503, batcher.stopped)
        return {"status": "ok", "requests": batcher.requests, "batches": batcher.batches}

    # HEAD, what some health checkers send, outside the schema: there it would repeat GET's operation id.
    app.add_api_route("/health", health, methods=["HEAD"], include_in_schema=False)

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    async def docs(request: Request):
        return docs_page(app.openapi(), str(request.base_url).rstrip("/"))

    @app.get("/model", responses=_error_responses({503: _BUSY}))
    async def model():
        """What is being served."""
        served = state["served"]
        classifier, threshold, explain_methods = served.classifier, served.threshold, served.explain_methods
        # The operating point /predict applies: its class wherever that class's probability reaches it, else the most
        # probable other class (None: the most probable class).
        applied = {"threshold": None if threshold is None else threshold.to_dict(),
                   "multi_label": multi_label,
                   # Each label's cut (thresholds.json; the threshold's label at its probability), which its
                   # probability must reach to be predicted; None: single-label.
                   "thresholds": dict(zip(classifier.label_names, applied_thresholds(classifier.thresholds,
                                                                                     threshold).tolist()))
                   if multi_label else None}
        if backend != "torch":
            return {"backend": backend, **served.origin, **_export_summary(classifier),
                    "text_columns": served.text_columns, **applied, "limits": asdict(limits)}
        from ..explain.methods import DEFAULT_METHOD

        config = classifier.config  # an ensemble's: its first member's
        members = classifier.members if hasattr(classifier, "members") else [classifier]
        configs = [member.config["model"]["config"] for member in members]
        return {
            "backend": backend,
            **served.origin,
            "labels": classifier.label_names,
            # A `train --seeds` ensemble's members share a recipe; one built in Python may mix models, whose names
            # are all given and whose configs differ (None). Its parameters are all of theirs.
            "model": {"name": _model_name(classifier),
                      "parameters": sum(m.config["model"]["parameters"] for m in members),
                      "config": configs[0] if all(c == configs[0] for c in configs) else None},
            "ensemble_members": len(members),
            # (as the tokenizer read them: a field config.json leaves out is its default)
            "tokenizer": {"kind": members[0].tokenizer.config.kind, "max_len": members[0].tokenizer.config.max_len,
                          "vocab_size": members[0].tokenizer.vocab_size,
                          "truncation": members[0].tokenizer.config.truncation},
            "windows": config["settings"].get("windows"),  # long texts read as overlapping windows, or None
            "text_columns": served.text_columns,
            "version": __version__,
            "trained_with": config.get("versions", {}),
            # A refit trained on its validation texts too, for the epochs its run chose (not where it lives).
            "refit": {key: refit[key] for key in ("epochs", "monitor", "value")}
            if (refit := config["settings"].get("refit_of")) else None,
            # `attnclf calibrate`'s temperature, each member's (1: the probabilities as trained).
            "temperatures": temperatures(classifier),
            "explain_methods": explain_methods,
            "explain_default": DEFAULT_METHOD if explain_methods else None,
            # Whether /explain answers by any method but attention carry the pooling weights beside their scores.
            "explain_pooling_attention": "attention" in explain_methods,
            **applied,
            "limits": asdict(limits),
        }

    def swap_model(new_classifier, new_served_from: dict | None = None) -> tuple[ServedModel, ServedModel]:
        """Serve ``new_classifier`` from the next request on, after the checks the service started with (the
        threshold's class among its labels) and that its answers keep their shape: the same labels, single- or
        multi-label as before. The model it replaced, and the one it serves now."""
        current = state["served"]
        new = ServedModel.of(new_classifier, new_served_from, current.threshold, named)
        run = new.origin["run"] or "the run"
        if list(new_classifier.label_names) != list(current.classifier.label_names):
            raise AttnclfError(f"{run} is now a run of other labels ({first_few(new_classifier.label_names)}) than "
                               f"those served ({first_few(current.classifier.label_names)}): restart the service to "
                               f"serve it")
        if new.multi_label != current.multi_label:
            raise AttnclfError(f"{run} is now a {'multi' if new.multi_label else 'single'}-label run, not "
                               f"{'multi' if current.multi_label else 'single'}-label as served: restart the service "
                               f"to serve it")
        state["served"] = new  # (one assignment, on the event loop: a request begins on the old model or the new)
        # Another kind of model (a boe run trained in place of a self-attn one): /docs says what it explains.
        if (described := new.description(limits.max_explain_batch)) != app.description:
            app.description = described
            for route in app.routes:
                if getattr(route, "path", None) == "/explain":
                    route.include_in_schema = bool(new.explain_methods)
            app.openapi_schema = None  # (FastAPI's cache of it)
        return current, new

    app.state.swap_model = swap_model
    app.state.served = lambda: state["served"]
    return app


def docs_page(openapi: dict, base_url: str) -> str:
    """The API's endpoints as one self-contained HTML page: what each does, the fields it takes, a curl line.

    >>> page = docs_page({"info": {"title": "t", "version": "1"}, "paths": {"/health": {"get": {"summary": "Up"}}}},
    ...                  "http://127.0.0.1:8000")
    >>> "curl http://127.0.0.1:8000/health" in page
    True
    """
    def kind(field: dict) -> str:
        options = field.get("anyOf", [field])
        return " or ".join(o.get("type", "?") + (f" of {o['items'].get('type', '?')}" if "items" in o else "")
                           for o in options if o.get("type") != "null")

    schemas = openapi.get("components", {}).get("schemas", {})
    sections = []
    for path, operations in openapi.get("paths", {}).items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            schema = schemas.get(body.get("$ref", "").rsplit("/", 1)[-1], body)
            rows = "".join(f"<tr><td><code>{html.escape(name)}</code></td><td>{html.escape(kind(field))}</td>"
                           f"<td>{html.escape(field.get('description', ''))}</td></tr>"
                           for name, field in schema.get("properties", {}).items())
            example = json.dumps((schema.get("examples") or [{"text": "a fine film"}])[0])
            url = shlex.quote(base_url + path)
            curl = f"curl {url}" if method == "get" else (
                f"curl -X {method.upper()} {url} -H 'Content-Type: application/json' -d {shlex.quote(example)}")
            sections.append(
                f"<h2><code>{method.upper()} {html.escape(path)}</code></h2>"
                f"<p>{html.escape(operation.get('description') or operation.get('summary', ''))}</p>"
                + (f"<table><tr><th>field</th><th>type</th><th>meaning</th></tr>{rows}</table>" if rows else "")
                + f"<pre>{html.escape(curl)}</pre>")
    info = openapi.get("info", {})
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(info.get('title', ''))} API</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}pre{background:#f4f4f4;padding:.6em;"
            "overflow:auto}td,th{text-align:left;padding:.2em .8em .2em 0;vertical-align:top}</style></head><body>"
            f"<h1>{html.escape(info.get('title', ''))} {html.escape(info.get('version', ''))}</h1>"
            f"<p>{html.escape(info.get('description', ''))}</p>"
            f"<p>The full schema: <a href='{html.escape(base_url, quote=True)}/openapi.json'>/openapi.json</a>.</p>"
            f"{''.join(sections)}</body></html>")


def serve(run_dir: str | Path, host: str = "127.0.0.1", port: int = 8000, limits: ServeLimits = ServeLimits(),
          device: str = "auto", threads: int | None = None, bf16: bool = False, backend: str = "torch",
          int8: bool = False, named: Callable[[str], str] = by_field, access_log: str = "text",
          threshold: tuple[str, float] | str | None = None, root_path: str = "") -> None:
    """Load ``run_dir`` (or a ``train --seeds`` folder) and serve it until interrupted (``attnclf serve``).

    ``backend="onnx"`` serves the run's ONNX export (``attnclf export``; ``run_dir`` may be the export) on
    onnxruntime, without PyTorch; ``int8`` its quantised graph. /explain is then refused (and left out of /docs):
    the graph gives none. ``threads`` sets the backend's intra-op threads (default: its choice, one per core);
    BENCHMARKS.md has the load test at 1 and 2 threads, and with each backend.
    ``bf16``: /predict under bfloat16 autocast (see ``Classifier``). ``named`` names the arguments in errors (the
    command line: by their flags). ``access_log``: a line per request on stdout, "text" (the default), "json" (one
    object a line, the service's own lines too: see ``logged_line``) or "off" (a proxy in front logs them already).
    ``threshold``: one class's operating point, applied to every /predict answer (``create_app``). A SIGHUP (not on
    Windows, which has none) loads ``run_dir`` again as it was loaded here and serves it (``ModelReloader``).
    ``root_path``: the prefix a proxy serves the API under and strips before passing a request on (/docs links by it).

    >>> # serve("runs/demo", backend="onnx", int8=True, threads=1)
    >>> # serve("runs/demo", root_path="/attnclf")   # behind a proxy's https://host/attnclf/
    >>> # serve("runs/demo", threshold="positive=0.9")   # `attnclf serve runs/demo --threshold positive=0.9`
    >>> # serve("runs/demo", access_log="json")   # for a log collector reading stdout
    """
    from .. import ensemble

    if not 0 <= port <= 65535:
        raise AttnclfError(f"{named('port')} must be 0-65535, got {port}")
    if access_log not in ACCESS_LOGS:
        raise AttnclfError(f"{named('access_log')} must be {', '.join(ACCESS_LOGS[:-1])} or {ACCESS_LOGS[-1]}, got "
                           f"{shown(access_log)}")
    threads = check_threads(threads)
    if root_path and (not root_path.startswith("/") or root_path.endswith("/")):
        raise AttnclfError(f"{named('root_path')} must start with / and not end with it (as /attnclf), got "
                           f"{shown(root_path)}")

    def load() -> tuple[object, list]:  # at the start, and again on each reload, as it was asked for
        return _load_fingerprinted(run_dir, backend, lambda: ensemble.load_backend(
            run_dir, backend, int8=int8, device=device, bf16=bf16, threads=threads, named=named))

    # A SIGHUP while the run loads and the server starts (before its handler, with uvicorn's) would kill it, the
    # default action: it is ignored until then, the load under way being the reload it asks for.
    with _hangups_ignored():
        classifier, weights_sha256 = load()
        if threads is not None and backend == "torch":  # (onnxruntime took them as it loaded)
            import torch

            torch.set_num_threads(threads)
        # The service's lines in the access log's form, the requests' too unless it is off: with JSON, every stdout line
        # is an object, as a collector reading the stream line by line needs (stderr would split it from the requests).
        log_format = "json" if access_log == "json" else "text"
        log = StdoutLog(log_format)
        say = log.say
        threshold = class_threshold(threshold, classifier.label_names, getattr(classifier, "multi_label", False),
                                    named=named)
        # A line per request on stdout, beside "serving": what an operator reads (journalctl, docker logs) to tell
        # which request failed and why; uvicorn's own access log is off, as it says nothing of why.
        app = create_app(classifier, limits, access_log=None if access_log == "off" else log,
                         access_log_format=log_format,
                         served_from={"run": str(run_dir), "weights_sha256": weights_sha256}, threshold=threshold,
                         named=named)
        port = _listenable_port(host, port)
        if not _loopback(host):
            say("warning", "warning: reachable from other machines, with no authentication or TLS: put a proxy "
                           "that has them in front")
        decided = "" if threshold is None else f"; {threshold.label} from probability {threshold.probability:g}"
        say("serving", f"serving {run_dir} ({backend_name(classifier)}{decided}) on {_where(host, port)} (API docs at "
                       f"/docs); Ctrl-C stops{'' if _SIGHUP is None else ', SIGHUP reloads'}")
        app.state.reloader = ModelReloader(run_dir, load, app, write=say)
        server = StopAnnouncingServer(uvicorn.Config(app, host=host, port=port, root_path=root_path,
                                                     log_config=_uvicorn_log_config(log_format),
                                                     **_uvicorn_options(limits)),
                                      write=say, on_hangup=app.state.reloader.request)
        exited = False
        try:
            with log.in_background():
                server.run()
        except KeyboardInterrupt:  # the stop's signal, raised again once the server has stopped (as uvicorn.run does)
            pass
        except SystemExit:  # uvicorn (0.54 here) gives up a start, a bind or the app's lifespan, by sys.exit(3)
            if server.started:
                raise
            exited = True
        # (older uvicorn gave up a lifespan by should_exit, unstarted; either way it has logged why)
        if exited or (server.should_exit and not server.started):
            raise AttnclfError(f"the server on {host}:{port} failed to start")


@contextmanager
def _hangups_ignored():
    """SIGHUP ignored within (where there is one, on the main thread), its handler before restored after."""
    if _SIGHUP is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(_SIGHUP, signal.SIG_IGN)
    try:
        yield
    finally:  # (None: a handler set outside Python, which cannot be put back from here)
        signal.signal(_SIGHUP, signal.SIG_DFL if before is None else before)


class StopAnnouncingServer(uvicorn.Server):
    """uvicorn's server, saying to ``write`` (event, line) when a stop (Ctrl-C, SIGTERM) begins, with its signal and
    the requests in flight it waits for, and when it has stopped, with the requests served: uvicorn logs at warning,
    where a clean stop left no trace and could not be told from a crash. ``on_hangup`` is called on the event loop
    for a SIGHUP while it serves (where the platform has SIGHUP; a ``ModelReloader``'s ``request``).

    >>> # StopAnnouncingServer(uvicorn.Config(app, **_uvicorn_options(limits)), write=StdoutLog("text").say).run()
    """

    CUT_OFF_SECONDS = 1  # how long the stop's last line waits for the requests it cut off to be answered

    def __init__(self, config: uvicorn.Config, write: Callable[[str, str], None],
                 on_hangup: Callable[[], None] | None = None):
        super().__init__(config)
        self.write = write
        self.stop_signal: str | None = None
        self.on_hangup = on_hangup
        self._hung_up = False  # a SIGHUP not yet handed on (on the next tick of uvicorn's loop)

    @contextmanager
    def capture_signals(self):
        # As uvicorn catches its stop signals: by signal.signal, whose handler only notes the signal, and whose
        # handler before is restored after (a SIGHUP during the stop is left alone: there is no reload to do).
        if self.on_hangup is None or _SIGHUP is None or threading.current_thread() is not threading.main_thread():
            with super().capture_signals():
                yield
            return
        before = signal.signal(_SIGHUP, self._note_hangup)
        try:
            with super().capture_signals():
                yield
        finally:
            signal.signal(_SIGHUP, before)

    def _note_hangup(self, sig: int, frame) -> None:
        self._hung_up = True

    async def on_tick(self, counter: int) -> bool:
        if self._hung_up:  # (uvicorn's loop ticks every 0.1 s)
            self._hung_up = False
            self.on_hangup()
        return await super().on_tick(counter)

    def handle_exit(self, sig: int, frame) -> None:
        # The first signal is the stop's; uvicorn keeps the signals it caught to itself (and a second Ctrl-C forces it)
        self.stop_signal = self.stop_signal or signal.Signals(sig).name
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets=None):
        in_flight = len(self.server_state.tasks)  # (requests being answered: an idle connection runs none)
        stopping = f"stopping on {self.stop_signal}" if self.stop_signal else "stopping"
        self.write("stopping", f"{stopping}: waiting up to {self.config.timeout_graceful_shutdown} s for {in_flight} "
                               f"request{'s' * (in_flight != 1)} in flight" if in_flight
                   else f"{stopping}: no requests in flight")
        await super().shutdown(sockets)
        # Requests it cut off (past the graceful seconds) answer their 503 some turns of the loop after the cancel,
        # one waiting for its body a few more: their lines go before this last one, which says the stop is over.
        if not self.force_exit and (cut_off := set(self.server_state.tasks)):  # (forced: nothing was cut off)
            await asyncio.wait(cut_off, timeout=self.CUT_OFF_SECONDS)
        served = self.server_state.total_requests
        self.write("stopped", f"stopped after serving {served} request{'s' * (served != 1)} (/health included)")


class ModelReloader:
    """Loads a service's run again and serves it (``attnclf serve`` on SIGHUP): ``load`` (as the service loaded it at
    start, with the same checks) runs off the event loop, so that requests go on being answered meanwhile, and only
    a model loaded whole replaces the one ``app`` serves (``create_app``'s ``state.swap_model``). One line to
    ``write`` (event, line) either way: ``reloaded RUN: weights OLD -> NEW`` (or ``unchanged``, then what else changed:
    ``; temperature 1 -> 0.82``, ``; thresholds of 2 labels moved: ...``), or ``reload failed: why; still serving
    weights OLD``; a reload that fails never stops the service. One reload runs at a time.

    >>> # app.state.reloader = ModelReloader("runs/demo", load, app, write=StdoutLog("text").say)   # as serve does
    >>> # await app.state.reloader.reload()   # what a SIGHUP sets off (``request``), waited for
    """

    def __init__(self, run: str | Path, load: Callable[[], tuple[object, list]], app: FastAPI,
                 write: Callable[[str, str], None]):
        self.run = run
        self.load = load
        self.app = app
        self.write = write
        self._one_at_a_time = asyncio.Lock()
        self._asked = False  # a reload asked for (``request``) that has not begun
        self._tasks: set[asyncio.Task] = set()  # (held until done: the loop keeps only a weak reference to a task)

    @property
    def busy(self) -> bool:
        """Whether a reload is running or waiting to."""
        return self._asked or self._one_at_a_time.locked()

    def request(self) -> None:
        """A reload in the background (SIGHUP's handler, called on the event loop). Asked for while one runs, it runs
        after that one, once however many times it was asked meanwhile: it reads the files as they are then."""
        if self._asked:
            return
        self._asked = True
        task = asyncio.get_running_loop().create_task(self.reload())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def reload(self) -> bool:
        """Load the run again and serve it from the next request on, or keep the model served and say why: whether
        it was swapped."""
        from ..rundir import refuse_if_held

        async with self._one_at_a_time:
            self._asked = False
            def load():
                # A run being trained again (`train --overwrite`, `calibrate`) is read once its writer is done:
                # weights of the new run beside a config.json of the old may load, and answer wrongly.
                refuse_if_held(self.run, instead=None)
                return self.load()

            try:
                classifier, weights_sha256 = await asyncio.get_running_loop().run_in_executor(None, load)
                replaced, new = self.app.state.swap_model(classifier, {"run": str(self.run),
                                                                       "weights_sha256": weights_sha256})
            except Exception as exc:  # (a bug's too: the service goes on serving what it served)
                why = str(exc) if isinstance(exc, AttnclfError) else f"{type(exc).__name__}: {exc}"
                served = self.app.state.served().origin["weights_id"]
                self.write("reload_failed", f"reload failed: {shown(why, most=LOGGED_DETAIL_CHARS, write=str)}; still "
                                            f"serving weights {served or 'of unknown sha256'}")
                return False
        self.write("reloaded", f"reloaded {self.run}: {new.changed_from(replaced)}")
        return True


class StdoutLog:
    """The service's log on stdout, in ``log_format`` ("text" or "json"): called with an access log line, or ``say``
    with one of its own (``logged_line``), each flushed, so a log reader sees it as it happens.

    Its first line failing (a stdout closed, or a pipe whose reader has gone) is a one-line error: the service does
    not start, where it exited 141 (SIGPIPE's status) saying nothing, or uvicorn failed on a closed stdout with a
    traceback. A line failing later (the log's reader died) stops the log, said once on stderr, and the service
    answers on, where each request raised the broken pipe into uvicorn's log as a traceback.

    ``in_background`` (while the service serves) writes the lines on a thread of its own: a reader that stalls fills
    the pipe, and a line written on the event loop then held every request, /health too, until it read again. Past
    ``most`` lines waiting, the next are dropped and counted, the count written once the reader has caught up.

    >>> StdoutLog("text").say("serving", "serving runs/demo on http://127.0.0.1:8000")
    serving runs/demo on http://127.0.0.1:8000
    """

    LAST_SECONDS = 5  # how long a stop waits for the lines still waiting to be written

    def __init__(self, log_format: str, most: int = 10_000):
        self.log_format = log_format
        self.most = most  # lines waiting at most (at 200-300 bytes a request line, 2-3 MB)
        self.written = 0
        self.stopped = False
        self._waiting: queue.Queue | None = None  # (None: written as they come, on the caller's thread)
        self._dropped = 0
        self._counting = threading.Lock()

    def say(self, event: str, message: str) -> None:
        """One of the service's own lines ("serving", "stopping", ...)."""
        self(logged_line(self.log_format, event, message=message))

    def __call__(self, line: str) -> None:
        if self.stopped:
            return
        if self._waiting is None:
            self._write(line)
            return
        try:
            self._waiting.put_nowait(line)
        except queue.Full:
            with self._counting:
                self._dropped += 1

    @contextmanager
    def in_background(self):
        """Lines written on a thread of their own within, those still waiting at the end written before it ends
        (``LAST_SECONDS`` at most: a reader stalled for good must not hold the stop).

        >>> # with log.in_background(): server.run()   # as serve does, once its first line is written
        """
        self._waiting = queue.Queue(self.most)
        writer = threading.Thread(target=self._write_waiting, args=(self._waiting,), name="attnclf-log", daemon=True)
        writer.start()
        try:
            yield self
        finally:
            deadline = time.monotonic() + self.LAST_SECONDS  # (one deadline for both waits: each its own took twice it)
            try:
                self._waiting.put(None, timeout=self.LAST_SECONDS)
            except queue.Full:
                pass
            writer.join(max(0.0, deadline - time.monotonic()))
            self._waiting = None

    def _write_waiting(self, waiting: queue.Queue) -> None:
        # (its own queue, not self._waiting: a stop whose writer outlived LAST_SECONDS sets that to None meanwhile)
        while (line := waiting.get()) is not None:
            self._write(line)
            if waiting.empty():  # (caught up: the count goes after the lines that came before the drops)
                self._write_dropped()
        # (the stop's None queued behind the last lines: the queue never looked empty after them)
        self._write_dropped()

    def _write_dropped(self) -> None:
        with self._counting:
            dropped, self._dropped = self._dropped, 0
        if dropped:
            self._write(logged_line(self.log_format, "warning", message=(
                f"warning: {dropped} log line{'s' * (dropped != 1)} dropped: stdout was not read as fast as they "
                f"came")))

    def _write(self, line: str) -> None:
        if self.stopped:
            return
        stream = sys.stdout  # (once: the stream a failure stops is the one written to)
        try:
            if stream is None:  # (what Python makes of a file descriptor 1 closed as it started)
                raise OSError("stdout is closed")
            print(line, file=stream, flush=True)
        except (OSError, ValueError) as exc:  # (ValueError: a stream closed from within)
            self._stop(getattr(exc, "strerror", None) or str(exc), stream)
            return
        self.written += 1

    def _stop(self, why: str, stream) -> None:
        self.stopped = True
        if _file_descriptor(stream) == 1:
            # Python flushes stdout once more at exit, into the same broken pipe: /dev/null takes it instead. Only fd 1,
            # the process's stdout: a stream on another descriptor (stdout redirected to a file) is its owner's.
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, 1)
            finally:
                os.close(devnull)
        if not self.written and self._waiting is None:
            raise AttnclfError(f"cannot write the service's log to stdout ({why}): start it with a stdout that is "
                               f"read (a terminal, a file, a log collector's pipe; /dev/null keeps no log)")
        try:
            print(logged_line(self.log_format, "warning", message=f"warning: the log on stdout stopped ({why}): "
                                                                  f"requests go on being answered, unlogged"),
                  file=sys.stderr, flush=True)
        except (OSError, ValueError, AttributeError):  # (stderr gone too: nowhere left to say it)
            pass


def _file_descriptor(stream) -> int | None:
    """The descriptor ``stream`` writes to; None for a closed one, or one of no file (a StringIO).

    >>> import io; _file_descriptor(io.StringIO()), _file_descriptor(None)
    (None, None)
    """
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # (UnsupportedOperation is both of the last two)
        return None

def _load_fingerprinted(run_dir: str | Path, backend: str, load: Callable[[], object]) -> tuple[object, list]:
    """What ``load`` loads, and the sha256 of the weights it loaded, each member's: what GET /model tells a client,
    which can then tell which model answered after the folder was trained again. For PyTorch the weights files are
    hashed before the load and after, and a change between (`train --overwrite` in place) is refused in one line,
    where a hash taken after alone would name weights other than those served. An ONNX export names the run's weights
    it was exported from (export.json), checked as it loaded; an export older than that record, None."""
    from ..ensemble import is_ensemble_dir, member_dirs
    from ..rundir import loaded_unchanged

    if backend != "torch":
        classifier = load()
        return classifier, [classifier.config.get("weights_sha256")]
    runs = member_dirs(run_dir) if is_ensemble_dir(run_dir) else [Path(run_dir)]
    return loaded_unchanged([Path(run) / "model.safetensors" for run in runs], load,
                            lambda weights: f"{weights} changed as it was loaded (trained again in place?); serve it "
                                            f"once it is written")


def _where(host: str, port: int) -> str:
    """Where a client reaches a service bound to ``host``: its URL, or bound to every interface (0.0.0.0; ::, every
    IPv6 one alone), where that address is no URL a teammate can use, this machine's name (as it names itself: the
    network may know it otherwise, hence its address too).

    >>> _where("127.0.0.1", 8000), _where("::1", 8000)
    ('http://127.0.0.1:8000', 'http://[::1]:8000')
    >>> _where("0.0.0.0", 8000).replace(socket.gethostname(), "NAME")
    "all interfaces: reach it at http://NAME:8000 (or at this machine's address)"
    >>> _where("::", 8000).split(":")[0]
    'all IPv6 interfaces, not IPv4 (--host 0.0.0.0 for those)'
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a name
        return f"http://{host}:{port}"
    if address.is_unspecified and address.version == 6:  # (asyncio binds it IPv6-only, as nginx's [::] is)
        return (f"all IPv6 interfaces, not IPv4 (--host 0.0.0.0 for those): reach it at "
                f"http://{socket.gethostname()}:{port} (or at this machine's IPv6 address)")
    if address.is_unspecified:
        return f"all interfaces: reach it at http://{socket.gethostname()}:{port} (or at this machine's address)"
    return f"http://[{host}]:{port}" if address.version == 6 else f"http://{host}:{port}"


def _loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the service on this machine: any loopback address (all of 127.0.0.0/8), or
    ``localhost``; another name may resolve anywhere, so it counts as reachable.

    >>> [_loopback(host) for host in ("127.0.0.2", "::1", "localhost", "0.0.0.0", "192.168.1.5", "example.org")]
    [True, True, True, False, False, False]
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class TimedHeads(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with the bounds it lacks on a request's head: a connection that has sent nothing is
    closed after the keep-alive seconds, as an idle one is after an answer, and a head begun is closed unless it ends
    within ``head_seconds`` (``ServeLimits.max_body_seconds``, as its body gets). Without them, connections sending
    half a head (or nothing) were held for as long as their clients liked, and uvicorn's own limit of open ones,
    reached, answered every other client 503.

    >>> # uvicorn.Config(app, http=partial(TimedHeads, head_seconds=10), ...)   # as _uvicorn_options gives it
    """

    def __init__(self, *args, head_seconds: float, **options):
        super().__init__(*args, **options)
        self.head_seconds = head_seconds
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def data_received(self, data: bytes) -> None:
        if self._head_deadline is None and self.conn.their_state is h11.IDLE:  # a head begins
            self._head_deadline = self.loop.call_later(self.head_seconds, self._head_late)
        super().data_received(data)
        if self._head_deadline is not None and self.conn.their_state is not h11.IDLE:  # it has ended
            self._stop_head_deadline()

    def connection_lost(self, exc) -> None:
        self._stop_head_deadline()
        super().connection_lost(exc)

    def _stop_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_late(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE:  # (no answer: nothing can be answered before a head has ended)
            self.timeout_keep_alive_handler()


def _uvicorn_options(limits: ServeLimits) -> dict:
    """What ``serve`` passes ``uvicorn.Config`` besides the app, host and port (the tests serve with the same).

    >>> _uvicorn_options(ServeLimits(max_connections=2))["limit_concurrency"]
    9
    """
    # The app bounds requests in flight itself (InFlightLimit), answering in JSON. uvicorn's own limit stays as a
    # backstop against a flood of connections: it counts every open connection, idle keep-alive ones too, and
    # past it answers a plain-text 503 before the app sees the request. Set at four times the app's, it leaves room
    # for the clients the app is telling to retry and for /health, and still bounds the sockets a flood holds open
    # (256 by default, within the usual 1,024 file descriptors). uvicorn counts the connection asking among those
    # open: at its limit N it serves N - 1, hence the + 1.
    return {"limit_concurrency": 4 * limits.max_connections + 1, "access_log": False, "log_level": "warning",
            "timeout_graceful_shutdown": limits.stop_seconds, "timeout_keep_alive": limits.keep_alive_seconds,
            "http": partial(TimedHeads, head_seconds=limits.max_body_seconds)}


def _listenable_port(host: str, port: int) -> int:
    """``port``, or for 0 a free one the system picks, after proving ``host`` can listen on it: a one-line error,
    before "serving" is announced, where uvicorn would log the failure and exit 3. Every address the host
    resolves to is tried as uvicorn will bind it, then released; a port taken in the instant between is left
    to uvicorn's own message."""
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                                  flags=socket.AI_PASSIVE):
            with socket.socket(family, kind, proto) as probe:
                if os.name == "posix":  # as asyncio binds: a port in TIME_WAIT is free
                    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind((address[0], port, *address[2:]))  # a port picked for one address, for them all
                probe.listen()
                port = probe.getsockname()[1]
    except OSError as exc:
        raise AttnclfError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return port
