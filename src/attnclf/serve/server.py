"""``serve``: a run loaded (its weights' sha256 taken as it is, ``load_fingerprinted``) and served on uvicorn until
stopped, and what its life takes: the host and port checked, uvicorn's options, a request's head bounded
(``TimedHeads``), the stop announced (``StopAnnouncingServer``), a SIGHUP's reload (``ModelReloader``)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import socket
import signal
import threading
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Callable

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..checks import ACCESS_LOGS, by_field, check_threads
from ..errors import AttnclfError, shown
from .app import create_app
from .limits import ServeLimits
from .logs import LOGGED_DETAIL_CHARS, StdoutLog, uvicorn_log_config
from .model import backend_name

_SIGHUP = getattr(signal, "SIGHUP", None)  # what reloads a service's run (None on Windows, which has no SIGHUP)


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
        return load_fingerprinted(run_dir, backend, lambda: ensemble.load_backend(
            run_dir, backend, int8=int8, device=device, bf16=bf16, threads=threads, named=named))

    # A SIGHUP while the run loads and the server starts (before its handler, with uvicorn's) would kill it, the
    # default action: it is ignored until then, the load under way being the reload it asks for.
    with _hangups_ignored():
        # The port first: a port in use is said at once, not after a load that can take seconds.
        port = _listenable_port(host, port)
        classifier, weights_sha256 = load()
        if threads is not None and backend == "torch":  # (onnxruntime took them as it loaded)
            import torch

            torch.set_num_threads(threads)
        # The service's lines in the access log's form, the requests' too unless it is off: with JSON, every stdout line
        # is an object, as a collector reading the stream line by line needs (stderr would split it from the requests).
        log_format = "json" if access_log == "json" else "text"
        log = StdoutLog(log_format)
        say = log.say
        # A line per request on stdout, beside "serving": what an operator reads (journalctl, docker logs) to tell
        # which request failed and why; uvicorn's own access log is off, as it says nothing of why.
        app = create_app(classifier, limits, access_log=None if access_log == "off" else log,
                         access_log_format=log_format,
                         served_from={"run": str(run_dir), "weights_sha256": weights_sha256}, threshold=threshold,
                         named=named)
        if not _loopback(host):
            say("warning", "warning: reachable from other machines, with no authentication or TLS: put a proxy "
                           "that has them in front")
        applied = app.state.served().threshold  # (the threshold as create_app checked it against the run's labels)
        decided = "" if applied is None else f"; {applied.label} from probability {applied.probability:g}"
        say("serving", f"serving {run_dir} ({backend_name(classifier)}{decided}) on {_where(host, port)} (API docs at "
                       f"/docs); Ctrl-C stops{'' if _SIGHUP is None else ', SIGHUP reloads'}")
        app.state.reloader = ModelReloader(run_dir, load, app, write=say)
        server = StopAnnouncingServer(uvicorn.Config(app, host=host, port=port, root_path=root_path,
                                                     log_config=uvicorn_log_config(log_format),
                                                     **_uvicorn_options(limits)),
                                      write=say, on_hangup=app.state.reloader.request,
                                      drain_seconds=limits.drain_seconds, on_drain=app.state.drain)
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


def load_fingerprinted(run_dir: str | Path, backend: str, load: Callable[[], object]) -> tuple[object, list]:
    """What ``load`` loads, and the sha256 of the weights it loaded, each member's: what GET /model tells a client,
    which can then tell which model answered after the folder was trained again. For PyTorch the weights files are
    hashed before the load and after, and a change between (`train --overwrite` in place) is refused in one line,
    where a hash taken after alone would name weights other than those served. An ONNX export names the run's weights
    it was exported from (export.json), checked as it loaded; an export older than that record, None.

    >>> # classifier, weights_sha256 = load_fingerprinted("runs/demo", "torch", lambda: Classifier.load("runs/demo"))
    """
    from ..ensemble import is_ensemble_dir, member_dirs
    from ..rundir import loaded_unchanged

    if backend != "torch":
        classifier = load()
        return classifier, [classifier.config.get("weights_sha256")]
    runs = member_dirs(run_dir) if is_ensemble_dir(run_dir) else [Path(run_dir)]
    return loaded_unchanged([Path(run) / "model.safetensors" for run in runs], load,
                            lambda weights: f"{weights} changed as it was loaded (trained again in place?); serve it "
                                            f"once it is written")


@contextmanager
def _hangups_ignored():
    """SIGHUP ignored within (where there is one, on the main thread), its handler before restored after."""
    if not _hangups_catchable():
        yield
        return
    before = signal.signal(_SIGHUP, signal.SIG_IGN)
    try:
        yield
    finally:  # (None: a handler set outside Python, which cannot be put back from here)
        signal.signal(_SIGHUP, signal.SIG_DFL if before is None else before)


def _hangups_catchable() -> bool:
    """Whether SIGHUP's handler can be set here: the platform has SIGHUP (Windows has none), and this is the main
    thread, the only one Python lets set a handler on."""
    return _SIGHUP is not None and threading.current_thread() is threading.main_thread()


class StopAnnouncingServer(uvicorn.Server):
    """uvicorn's server, saying to ``write`` (event, line) when a stop (Ctrl-C, SIGTERM) begins, with its signal and
    the requests in flight it waits for, and when it has stopped, with the requests served: uvicorn logs at warning,
    where a clean stop left no trace and could not be told from a crash. ``on_hangup`` is called on the event loop
    for a SIGHUP while it serves (where the platform has SIGHUP; a ``ModelReloader``'s ``request``).
    With ``drain_seconds``, a SIGTERM first drains: ``on_drain`` is called with why (``create_app``'s
    ``state.drain``, which has /health answer 503) and requests are served on for that long, so that a load balancer
    or Kubernetes, seeing the readiness lost, stops sending them; then the stop begins. A second signal begins it
    at once; Ctrl-C (SIGINT), a person's, never drains.

    >>> # StopAnnouncingServer(uvicorn.Config(app, **_uvicorn_options(limits)), write=StdoutLog("text").say).run()
    >>> # StopAnnouncingServer(config, write=say, drain_seconds=10, on_drain=app.state.drain)   # as serve does
    """

    CUT_OFF_SECONDS = 1  # how long the stop's last line waits for the requests it cut off to be answered

    def __init__(self, config: uvicorn.Config, write: Callable[[str, str], None],
                 on_hangup: Callable[[], None] | None = None, drain_seconds: int = 0,
                 on_drain: Callable[[str], None] = lambda why: None):
        super().__init__(config)
        self.write = write
        self.stop_signal: str | None = None
        self.on_hangup = on_hangup
        self._hung_up = False  # a SIGHUP not yet handed on (on the next tick of uvicorn's loop)
        self.drain_seconds = drain_seconds
        self.on_drain = on_drain
        self._drain_asked = False  # a SIGTERM's drain not yet begun (on the next tick, as a SIGHUP's reload)
        self._drain_ends: float | None = None  # (time.monotonic's) when the drain begun gives way to the stop

    @contextmanager
    def capture_signals(self):
        # As uvicorn catches its stop signals: by signal.signal, whose handler only notes the signal, and whose
        # handler before is restored after (a SIGHUP during the stop is left alone: there is no reload to do).
        if self.on_hangup is None or not _hangups_catchable():
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
        if self._drain_asked:
            # (a second signal since the first has begun the stop already: no drain runs, so none is announced)
            if not self.should_exit:
                self._drain_ends = time.monotonic() + self.drain_seconds
                self.on_drain(f"draining: this server got {self.stop_signal} and stops taking requests "
                              f"{self.drain_seconds} s after it; send new ones elsewhere")
                self.write("draining", f"draining on {self.stop_signal}: /health answers 503 for "
                                       f"{self.drain_seconds} s, other requests are still answered; then the stop")
            # (cleared last: a signal meanwhile finds the drain asked or begun, and stops, as a second signal does)
            self._drain_asked = False
        if self._drain_ends is not None and time.monotonic() >= self._drain_ends and not self.should_exit:
            super().handle_exit(signal.SIGTERM, None)  # (the signal it deferred, for uvicorn to raise again after)
        return await super().on_tick(counter)

    def handle_exit(self, sig: int, frame) -> None:
        # The first signal is the stop's; uvicorn keeps the signals it caught to itself (and a second Ctrl-C forces it)
        self.stop_signal = self.stop_signal or signal.Signals(sig).name
        draining = self._drain_asked or self._drain_ends is not None
        if sig == signal.SIGTERM and self.drain_seconds and not draining and not self.should_exit:
            # Noted only: the drain's line is written on the loop, as a handler that took the log's lock could find
            # it held by the code it interrupted.
            self._drain_asked = True
            return
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
    reached, answered every other client 503. Likewise an answer its client does not read: once the socket's buffers
    are full, writing waits, and a wait of ``head_seconds`` closes the connection, where the request held its place
    among the requests in flight for as long as its client kept it open (a few clients pipelining requests they never
    read had every other one answered 503, busy). A request it cannot parse is answered 400 in JSON, as the app's
    errors are (``send_400_response``).

    >>> # uvicorn.Config(app, http=partial(TimedHeads, head_seconds=10), ...)   # as _uvicorn_options gives it
    """

    def __init__(self, *args, head_seconds: float, **options):
        super().__init__(*args, **options)
        self.head_seconds = head_seconds
        self._head_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None  # (while writing waits for the client to read)

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
        self._stop_write_deadline()
        super().connection_lost(exc)

    def pause_writing(self) -> None:  # (the transport's buffer is full: the client has stopped reading, or is slow)
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.head_seconds, self._unread)

    def resume_writing(self) -> None:
        self._stop_write_deadline()
        super().resume_writing()

    def _stop_write_deadline(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _unread(self) -> None:
        # Nothing more can reach the client: the connection goes (its lost-connection handling lets the answer's
        # writer, waiting, end), and the request its place.
        self._write_deadline = None
        self.transport.abort()

    def _stop_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def send_400_response(self, msg: str) -> None:
        # uvicorn's answer to a request h11 cannot parse (a request line, header, Content-Length or chunk that is no
        # HTTP/1.1) was "Invalid HTTP request received." in plain text: in JSON here, as every other error is.
        body = json.dumps({"detail": "not an HTTP/1.1 request this server can parse: a malformed request line, "
                                     "header, Content-Length or chunk"}).encode()
        for event in (h11.Response(status_code=400, reason=b"Bad Request", headers=[
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"connection", b"close")]), h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()

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
