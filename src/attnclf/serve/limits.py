"""What a request may be (``ServeLimits``), and the ASGI middlewares that refuse one past it, each in one line of
JSON: too large, too slow, too many in flight, not JSON, or cut off by a stop."""

from __future__ import annotations

import asyncio
from dataclasses import InitVar, asdict, dataclass
from typing import Callable

from fastapi.responses import JSONResponse

from ..checks import by_field, whole_number
from ..errors import AttnclfError, shown

RETRY_AFTER_SECONDS = 1  # a 503 for too many requests in flight says this: /predict's batches take milliseconds
# What a request the stop cut off is answered, a 503 with Retry-After (``AnswerCutOffRequests``)
STOPPED = ("the server is stopping: this request was cut off unfinished; retry it (here once the server is back, "
           "or on another)")
MOST_SECONDS = 10 ** 9  # a seconds limit's largest (31 years): any wait past it is no limit
NONE_IS_ZERO = {"drain_seconds"}  # the limits that may be 0, for none (every other limit of 0 would refuse all)


@dataclass(frozen=True)
class ServeLimits:
    """What a service accepts: each field a bound on one thing a request may take (``create_app`` and ``serve`` apply
    them), checked as it is made: a whole number, positive (``drain_seconds`` may be 0), in one line naming it by
    ``named`` otherwise.

    >>> ServeLimits(max_batch=32, max_connections=8).explain_slots
    4
    >>> ServeLimits(max_batch=0)
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: max_batch must be a positive integer, got 0
    """

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
    # long, and so does its answer's writing while the client reads none of it (``TimedHeads``).
    max_body_seconds: int = 10
    # Seconds a stop (Ctrl-C, SIGTERM) waits for requests in flight, then answers them 503 (``AnswerCutOffRequests``):
    # within Docker's default stop timeout (10 s); a long /explain wants more, and systemd (90 s) or Kubernetes (30 s)
    # wait longer.
    stop_seconds: int = 5
    # Seconds a SIGTERM has /health answer 503 (readiness lost) before that stop begins, every other request still
    # answered, so that a load balancer or Kubernetes stops sending traffic first (``StopAnnouncingServer``); 0: none.
    drain_seconds: int = 0
    # Seconds an idle keep-alive connection is kept open (uvicorn's default): behind a proxy or load balancer that
    # reuses its connections, longer than its own idle timeout, or it races the service's close and answers 502.
    keep_alive_seconds: int = 5
    named: InitVar[Callable[[str], str]] = by_field  # how errors name a limit (the command line: by its flag)

    def __post_init__(self, named: Callable[[str], str]):
        for name, value in asdict(self).items():
            count = whole_number(value)  # (True is no count of 1; numpy's integers are counts, kept as ints for JSON)
            what = "0 or a positive integer" if name in NONE_IS_ZERO else "a positive integer"
            if count is None or count < (0 if name in NONE_IS_ZERO else 1):
                raise AttnclfError(f"{named(name)} must be {what}, got {shown(value)}")
            # (asyncio's timers take seconds as a float: past it, each deadline raised OverflowError, a traceback)
            if name.endswith("_seconds") and count > MOST_SECONDS:
                raise AttnclfError(f"{named(name)} must be {what} of at most {MOST_SECONDS} seconds (31 years), got "
                                   f"{shown(value)}")
            object.__setattr__(self, name, count)

    @property
    def explain_slots(self) -> int:
        """How many /explain requests may be in flight, explained or waiting their turn: half of ``max_connections``
        (one at the least), so that predictions always have the other half.

        >>> ServeLimits(max_connections=64).explain_slots, ServeLimits(max_connections=1).explain_slots
        (32, 1)
        """
        return max(1, self.max_connections // 2)


class BodyLimit:
    """ASGI middleware: reads at most ``max_bytes`` of a request body, else answers 413, within ``max_seconds``,
    else answers 408 (and the request leaves ``InFlightLimit``'s count).

    A declared Content-Length over the limit is refused before reading; a chunked body is counted as it arrives. The
    seconds bound the whole body, not each wait: a client trickling a byte at a time is cut off as one sending
    nothing is.
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


# The status of a request whose client closed the connection before its answer was sent: nginx's "client closed
# request", which the client never reads (uvicorn sends nothing on a closed connection), for the access log
CLIENT_GONE = 499


def client_gone(receive) -> bool:
    """Whether the client has closed the connection, asked of the ASGI server's ``receive`` without waiting, once
    the request's body has been read: it then answers http.disconnect at once where the client has gone, and otherwise
    waits, which is taken here for "still there" (its first wait is cut short, as a poll). Starlette's
    ``Request.is_disconnected`` asks so through an anyio cancel scope, which cost a poll some 25 times as much, and
    the access log asks of every request (``AccessLog``), /predict once more (``Batcher``).

    >>> # client_gone(request.receive)   # False while the client waits for its answer
    """
    waiting = receive().__await__()
    try:
        waiting.send(None)
    except StopIteration as answered:  # (it did not wait)
        return answered.value.get("type") == "http.disconnect"
    waiting.close()  # (its wait given up: an asyncio.Event's waiter removed, say)
    return False


def route_path(scope) -> str:
    """The path the app's routes match: ASGI's ``path`` holds the ``root_path`` a proxy or ``uvicorn --root-path``
    mounts the app under, which routing strips and the middlewares must strip too.

    >>> route_path({"path": "/api/health", "root_path": "/api"}), route_path({"path": "/health"})
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
        if scope["type"] != "http" or route_path(scope) in self.exempt:
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


class JsonBodies:
    """ASGI middleware for the routes that take a JSON body: one sent as anything else (curl -d sends a form)
    is answered 415, naming the Content-Type to send, instead of a validation error about a body that looks
    right. One sent without a Content-Type (or an empty one) is read as JSON. One sent compressed (a
    Content-Encoding other than identity) is answered 415 too, with Accept-Encoding: identity (RFC 7694): the
    server does not decode it, and read as it came it was "not JSON the server can read", a body the client knew
    was sound."""

    def __init__(self, app, paths: set[str]):
        self.app = app
        self.paths = paths

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST" and route_path(scope) in self.paths:
            encodings = [coding.strip().lower() for name, value in scope["headers"] if name == b"content-encoding"
                         for coding in value.decode("latin-1").split(",")]
            if coded := [coding for coding in encodings if coding not in ("", "identity")]:
                return await JSONResponse({"detail": f"the body is sent with Content-Encoding: "
                                                     f"{shown(', '.join(coded), write=str)}, which this server does "
                                                     f"not decode: send it uncompressed"}, 415,
                                          headers={"Accept-Encoding": "identity"})(scope, receive, send)
            # The first Content-Type, which FastAPI reads the body by: of two, the last (a dict's) let a body FastAPI
            # then read as text/plain through, to a 422 about its shape.
            declared = next((value for name, value in scope["headers"] if name == b"content-type"), b"")
            media = declared.decode("latin-1").split(";", 1)[0].strip().lower()
            if not media:  # none, or empty: FastAPI would answer 422 about the body itself
                headers = [(name, value) for name, value in scope["headers"] if name != b"content-type"]
                scope = dict(scope, headers=[*headers, (b"content-type", b"application/json")])
            elif media != "application/json" and not media.endswith("+json"):
                return await JSONResponse({"detail": f"send the body as JSON with Content-Type: application/json, "
                                                     f"not {shown(media, write=str)}"}, 415)(scope, receive, send)
        await self.app(scope, receive, send)
