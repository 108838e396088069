"""The service's log on stdout (``StdoutLog``): a line per request (``AccessLog``) and its own lines, as text or
JSON (``logged_line``), uvicorn's records too."""

from __future__ import annotations

import copy
import json
import logging
import os
import queue
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import partial
from typing import Callable
from urllib.parse import quote

import uvicorn

from ..errors import AttnclfError, shown
from .limits import CLIENT_GONE, client_gone, route_path

LOGGED_DETAIL_CHARS = 300  # an access log line's error detail at most: the app's details are one short line each
LOGGED_REQUEST_ID_CHARS = 64  # an X-Request-ID logged at most: a UUID is 36, nginx's $request_id 32


class AccessLog:
    """ASGI middleware: one line per request to ``write``, when it is answered: the time (UTC), client, method, path
    (percent-encoded, one field), status and milliseconds, and for an error the answer's one-line ``detail`` (for a
    bug, the 500 the client gets and the exception's type), so an operator can tell which request failed and why;
    the X-Request-ID a proxy tagged it with, if any (percent-encoded and bounded, one field), which joins the line to
    the proxy's.
    Never a text: the details name limits, fields and positions, not what was sent. ``quiet`` paths (liveness) are
    logged only when they fail: a probe every few seconds would bury the requests. ``log_format`` "json" writes each
    line as one JSON object (``logged_line``) for a log collector.
    An answer ready after its client closed the connection is logged ``CLIENT_GONE``, saying what it would have been:
    uvicorn drops it unsaid, where it was logged as answered. (One the client closes as it is being written is logged
    as sent: the server cannot know what of it arrived.)

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
        start, status, error, failed, gone = time.perf_counter(), None, [], None, False

        async def watched(message):
            nonlocal status, gone
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                if status is not None and status >= 400:
                    error.append(message.get("body", b""))  # (an error answer is one short JSON object)
                # Asked as its last part goes: after its start, which a 100 Continue may no longer precede, and where
                # a part of a body the app left unread, if the question takes it, is one nobody was to read
                if not message.get("more_body", False):
                    gone = status != CLIENT_GONE and client_gone(receive)
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:  # a bug: Starlette's outermost middleware answers it 500 where nothing was sent
            failed = type(exc).__name__  # (its type alone: its message may quote a text)
            raise
        finally:  # (a request the stop cut off mid-answer, too: logged with what it had sent)
            answered = status or (500 if failed else None)
            path = route_path(scope)
            if not (path in self.quiet and answered is not None and answered < 400):
                # The path as sent on the wire, percent-encoded: decoded, its spaces and newlines forge fields
                encoded = partial(quote, safe="/", errors="backslashreplace")
                written = shown(path, write=encoded)
                tagged = dict(scope["headers"]).get(b"x-request-id")
                detail = _detail(b"".join(error)) or (f"internal error ({failed})" if failed else None)
                if gone:
                    detail = (f"the client closed the connection before its answer was sent ({answered}"
                              f"{': ' + detail if detail else ''})")
                    answered = CLIENT_GONE
                self.write(logged_line(self.log_format, "request", client=(scope.get("client") or (None,))[0],
                                       method=scope["method"], path=written, status=answered,
                                       ms=round((time.perf_counter() - start) * 1000, 1), detail=detail,
                                       request_id=None if tagged is None else shown(
                                           tagged.decode("latin-1"), most=LOGGED_REQUEST_ID_CHARS, write=encoded)))


def logged_line(log_format: str, event: str, **fields) -> str:
    """One line of the service's log on stdout, ``log_format`` "text" or "json", for ``event``: a "request" (its
    fields as ``AccessLog`` gives them) or the service's own ("serving", "warning", "draining", "stopping",
    "stopped", "reloaded", "reload_failed", a ``message`` each). As JSON, one object a line, the time (UTC) and
    event first, escaped to ASCII: whatever a detail quotes of a request (a method name, say) can neither break the
    line nor garble it for a collector reading it as another encoding. As text, the service's own lines are their
    message alone, as they always were, on one line.

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


def uvicorn_log_config(log_format: str) -> dict:
    """uvicorn's logging set-up, its records written as JSON (``JsonLogRecords``) where the service's log is.

    >>> uvicorn_log_config("json")["formatters"]["default"]["()"].__name__
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
            stream.write(line + "\n")  # (one write: print's two let another thread's line in before the newline)
            stream.flush()
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
