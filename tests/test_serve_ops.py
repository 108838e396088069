"""Operating the HTTP service: what its log says of each request, and what it says of the model it serves."""

import re
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from test_serve import _Held, _running

from attnclf.classifier import Classifier
from attnclf.serve.app import create_app


@pytest.fixture(scope="module")
def local(demo_run):
    return Classifier.load(demo_run, device="cpu")


def test_the_access_log_has_a_line_per_request_naming_why_one_failed_and_never_its_texts(local):
    logged: list[str] = []
    secret = "patient 4711 was denied the claim"
    with TestClient(create_app(local, access_log=logged.append)) as client:
        assert client.post("/predict", json={"text": secret}).status_code == 200
        assert client.post("/predict", json={"texts": [secret, 5]}).status_code == 422
        assert client.post("/predict", content=secret, headers={"content-type": "text/plain"}).status_code == 415
        assert client.post("/explain", json={"text": secret, "method": "bogus"}).status_code == 400
        assert client.get("/health").status_code == 200  # a probe's every few seconds: not logged when it answers
        assert client.get("/model").status_code == 200
    assert len(logged) == 5, logged
    assert not [line for line in logged if "4711" in line], "a text reached the log"
    pattern = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \S+ (GET|POST) /\w+ \d{3} \d+\.\d ms"
    assert all(re.match(pattern, line) for line in logged), logged
    assert " POST /predict 200 " in logged[0] and ":" not in logged[0].split(" ms")[1]
    assert logged[1].endswith(" ms: texts.1: Input should be a valid string")
    assert " 415 " in logged[2] and logged[2].endswith("not text/plain")
    assert " POST /explain 400 " in logged[3] and "unknown explanation method 'bogus'" in logged[3]
    assert " GET /model 200 " in logged[4]


def test_the_app_logs_nothing_unless_asked(local, capsys):
    with TestClient(create_app(local)) as client:
        assert client.post("/predict", json={"text": "good"}).status_code == 200
    assert capsys.readouterr() == ("", "")


def test_attnclf_serve_logs_each_request_on_stdout(demo_run, capsys, monkeypatch):
    import uvicorn

    from attnclf.cli import main

    served = {}
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets=None: served.update(app=server.config.app))
    assert main(["serve", str(demo_run), "--port", "0", "--device", "cpu"]) == 0
    with TestClient(served["app"]) as client:
        client.post("/predict", json={"texts": []})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("serving ") and out[1].endswith(" ms: texts is empty: give one text at least"), out


def test_the_serving_line_names_the_threshold_every_answer_is_decided_by(demo_run, capsys, monkeypatch):
    """An operator reading the log (journalctl, docker logs) sees which rule labels the answers, not only GET /model."""
    import uvicorn

    from attnclf.cli import main

    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets=None: None)
    assert main(["serve", str(demo_run), "--port", "0", "--device", "cpu", "--threshold", "positive=0.9"]) == 0
    serving = capsys.readouterr().out.splitlines()[0]
    assert serving.startswith(f"serving {demo_run} (torch; positive from probability 0.9) on "), serving


def _served_app(monkeypatch, *arguments):
    """The app `attnclf serve ARGUMENTS` would run, uvicorn left unstarted."""
    import uvicorn

    from attnclf.cli import main

    served = {}
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets=None: served.update(app=server.config.app))
    assert main(["serve", *arguments, "--port", "0"]) == 0
    return served["app"]


def test_model_names_the_run_and_the_sha256_of_the_weights_each_backend_serves(demo_run, exported, monkeypatch):
    from attnclf.rundir import file_sha256

    weights = file_sha256(demo_run / "model.safetensors")
    with TestClient(_served_app(monkeypatch, str(demo_run), "--device", "cpu")) as client:
        info = client.get("/model").json()
    assert info["run"] == str(demo_run) and info["weights_sha256"] == [weights]
    # The export answers for the same weights, and says so: a client can tell the two services agree.
    with TestClient(_served_app(monkeypatch, str(exported), "--backend", "onnx")) as client:
        info = client.get("/model").json()
    assert info["run"] == str(exported) and info["weights_sha256"] == [weights]


def test_a_run_retrained_as_it_loads_is_refused_in_one_line(demo_run, tmp_path, monkeypatch, capsys):
    import shutil

    import attnclf.ensemble

    run = shutil.copytree(demo_run, tmp_path / "run")
    load = attnclf.ensemble.load_backend

    def retrained_meanwhile(*args, **kwargs):
        loaded = load(*args, **kwargs)
        (run / "model.safetensors").write_bytes(b"other weights")  # as `train --overwrite` replaces them
        return loaded

    monkeypatch.setattr(attnclf.ensemble, "load_backend", retrained_meanwhile)

    def never(*args, **kwargs):  # a regression must fail here, not serve forever
        raise AssertionError("a run that changed as it loaded was served")

    import uvicorn

    from attnclf.cli import main

    monkeypatch.setattr(uvicorn.Server, "run", never)

    assert main(["serve", str(run), "--port", "0", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err == (f"attnclf: error: {run / 'model.safetensors'} changed as it was loaded (trained again in place?); "
                   f"serve it once it is written\n")


def test_each_answer_names_the_weights_that_gave_it_as_model_does(demo_run, exported, tmp_path, monkeypatch):
    """A client (or a proxy's log) ties an answer to weights from the answer itself: asking /model after could reach a
    service restarted on other weights in between."""
    import hashlib
    import json
    import shutil

    from attnclf.rundir import file_sha256

    weights = file_sha256(demo_run / "model.safetensors")
    with TestClient(_served_app(monkeypatch, str(demo_run), "--device", "cpu")) as client:
        assert client.get("/model").json()["weights_id"] == weights
        assert client.post("/predict", json={"text": "good"}).headers["x-attnclf-weights"] == weights
        assert client.post("/explain", json={"text": "good"}).headers["x-attnclf-weights"] == weights
        model = client.get("/model").json()["model_id"]
        assert client.post("/predict", json={"text": "good"}).headers["x-attnclf-model"] == model != weights
    # Its export: the same weights, temperature and thresholds, so the same model (/model's backend tells them apart).
    with TestClient(_served_app(monkeypatch, str(exported), "--backend", "onnx")) as client:
        assert client.get("/model").json()["weights_id"] == weights
        assert client.post("/predict", json={"text": "good"}).headers["x-attnclf-weights"] == weights
        assert client.get("/model").json()["model_id"] == model
    # An ensemble: one short value for all its members, the sha256 of their sha256s joined by commas, in order.
    for seed in (0, 1):
        shutil.copytree(demo_run, tmp_path / "seeds" / f"seed-{seed}")
    (tmp_path / "seeds" / "ensemble.json").write_text(json.dumps({"members": ["seed-0", "seed-1"]}))
    with TestClient(_served_app(monkeypatch, str(tmp_path / "seeds"), "--device", "cpu")) as client:
        info = client.get("/model").json()
        answered = client.post("/predict", json={"text": "good"}).headers["x-attnclf-weights"]
    assert info["weights_sha256"] == [weights, weights]
    assert answered == info["weights_id"] == hashlib.sha256(f"{weights},{weights}".encode()).hexdigest()


def test_an_app_not_told_its_weights_names_none(local):
    with TestClient(create_app(local)) as client:
        assert client.get("/model").json()["weights_id"] is None and client.get("/model").json()["model_id"] is None
        headers = client.post("/predict", json={"text": "good"}).headers
        assert "x-attnclf-weights" not in headers and "x-attnclf-model" not in headers
        # Documented where a client reads of the answers: /docs and the schema.
        assert "X-Attnclf-Weights header names the weights that answered" in client.get("/docs").text
        for path in ("/predict", "/explain"):
            assert {"X-Attnclf-Weights", "X-Attnclf-Model"} <= set(client.get("/openapi.json").json()["paths"][path][
                "post"]["responses"]["200"]["headers"])


@pytest.mark.parametrize("access_log", ["text", "json"])
def test_a_sigterm_stop_says_when_it_begins_why_and_when_it_has_stopped(demo_run, access_log, serving_process):
    """uvicorn logs at warning: without these lines, a clean stop under systemd or Docker left no trace, and could
    not be told from a crash. As JSON, they are objects like the requests': a collector reads stdout line by line.
    The JSON service is also sent bytes that are not HTTP, whose warning on stderr must be an object too (as
    test_with_a_json_log_uvicorn_s_own_lines_are_json_objects_too says): one process for both, a start costs 5 s."""
    import json
    import signal
    import socket

    with serving_process(str(demo_run), "--device", "cpu", "--threads", "1", "--access-log", access_log) as (
            process, url, answer):
        assert answer.status_code == 200
        if access_log == "json":  # (refused by uvicorn before the app: not a request the stop counts)
            host, port = url.removeprefix("http://").rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=30) as connection:
                connection.sendall(b"NOT HTTP AT ALL\r\n\r\n")
                assert connection.recv(4096).startswith(b"HTTP/1.1 400")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0  # (README: a stop by signal once serving is a clean exit, for systemd's Restart=)
    lines = out.splitlines()
    if access_log == "json":
        # uvicorn's own warning, on stderr, is an object too
        assert [(record["event"], record["message"]) for record in map(json.loads, err.splitlines())] == [
            ("warning", "Invalid HTTP request received.")], err
        records = [json.loads(line) for line in lines]
        assert [record["event"] for record in records] == ["request", "stopping", "stopped"], out
        lines = [records[0]["method"] + " " + records[0]["path"] + " " + str(records[0]["status"])] + [
            record["message"] for record in records[1:]]
    assert "POST /predict 200" in lines[0], out
    # The stop names its signal: an operator tells systemd's or Docker's SIGTERM from a Ctrl-C in a terminal
    assert lines[1:] == ["stopping on SIGTERM: no requests in flight",
                         "stopped after serving 1 request (/health included)"], out
    assert "Traceback" not in err, err


def test_drain_seconds_has_health_answer_503_while_requests_are_still_served_then_the_stop_runs(demo_run,
                                                                                                  serving_process):
    """Under Kubernetes, SIGTERM closed the port at once, while the pod stayed in its Service's endpoints a few seconds
    more, and the requests sent to it meanwhile were refused. With --drain-seconds, SIGTERM first has /health (the
    readiness probe) answer 503 for that long, every other request still answered, so that traffic stops coming;
    then the graceful stop runs as it always has."""
    import signal
    import time

    import httpx

    with serving_process(str(demo_run), "--device", "cpu", "--threads", "1", "--drain-seconds", "3") as (
            process, url, answer):
        assert answer.status_code == 200 and httpx.get(f"{url}/health", timeout=30).status_code == 200
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        health = httpx.get(f"{url}/health", timeout=30)
        while health.status_code == 200 and time.monotonic() < signalled + 2:  # (the signal's handling takes a tick)
            time.sleep(0.05)
            health = httpx.get(f"{url}/health", timeout=30)
        assert health.status_code == 503, health.text
        assert health.json() == {"detail": "draining: this server got SIGTERM and stops taking requests 3 s after it; "
                                           "send new ones elsewhere"}
        assert httpx.post(f"{url}/predict", json={"text": "good"}, timeout=30).status_code == 200  # still served
        assert process.poll() is None
        out, err = process.communicate(timeout=30)
        stopped = time.monotonic()
    assert process.returncode == 0 and stopped - signalled >= 3, (process.returncode, stopped - signalled)
    own = [line for line in out.splitlines() if not line[:4].isdigit()]  # (the service's lines, not the requests')
    assert own[:2] == ["draining on SIGTERM: /health answers 503 for 3 s, other requests are still answered; then the "
                       "stop", "stopping on SIGTERM: no requests in flight"], out
    assert len(own) == 3 and own[2].startswith("stopped after serving "), out
    assert " GET /health 503 " in out and "Traceback" not in err, (out, err)


def test_a_second_signal_ends_the_drain_at_once(demo_run, serving_process):
    """A drain of a minute is an operator's to cut short (as README says): a second SIGTERM begins the stop."""
    import signal
    import time

    import httpx

    with serving_process(str(demo_run), "--device", "cpu", "--threads", "1", "--drain-seconds", "600") as (
            process, url, answer):
        process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        while httpx.get(f"{url}/health", timeout=30).status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert [line for line in out.splitlines() if line.startswith(("draining", "stopping"))] == [
        "draining on SIGTERM: /health answers 503 for 600 s, other requests are still answered; then the stop",
        "stopping on SIGTERM: no requests in flight"], out


def test_a_server_that_fails_to_start_is_a_one_line_error_not_a_clean_exit(demo_run, monkeypatch, capsys):
    import uvicorn

    from attnclf.cli import main

    def startup_failed(server, sockets=None):  # as uvicorn's startup gives up (the app's lifespan failed, say)
        server.should_exit = True

    monkeypatch.setattr(uvicorn.Server, "run", startup_failed)
    assert main(["serve", str(demo_run), "--port", "0", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnclf: error: the server on 127.0.0.1:") and err.endswith(" failed to start\n"), err


def test_a_port_taken_after_it_was_checked_is_the_same_one_line_error_not_uvicorn_s_exit_3(demo_run, monkeypatch,
                                                                                            capsys):
    # uvicorn (0.54 here) gives up a start by sys.exit(3), not by should_exit: the port check's instant before the bind
    # let another process take it, and serve escaped the command as a bare exit 3.
    import socket

    from attnclf.cli import main
    from attnclf.serve import server

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        monkeypatch.setattr(server, "_listenable_port", lambda host, port: taken)
        assert main(["serve", str(demo_run), "--port", "0", "--device", "cpu", "--threads", "1"]) == 2
    err = capsys.readouterr().err
    assert err.endswith(f"attnclf: error: the server on 127.0.0.1:{taken} failed to start\n"), err


def test_serving_on_all_interfaces_names_a_url_teammates_can_use_and_says_there_is_no_authentication(
        demo_run, monkeypatch, capsys):
    import socket

    _served_app(monkeypatch, str(demo_run), "--device", "cpu", "--host", "0.0.0.0")
    warning, serving = capsys.readouterr().out.splitlines()
    assert warning == ("warning: reachable from other machines, with no authentication or TLS: put a proxy that has "
                       "them in front"), warning
    port = serving.rsplit(":", 1)[1].split(" ", 1)[0]
    assert serving.startswith(f"serving {demo_run} (torch) on all interfaces: reach it at "
                              f"http://{socket.gethostname()}:{port} (or at this machine's address)"), serving
    assert "0.0.0.0" not in serving and port.isdigit() and port != "0"



def test_serving_on_every_ipv6_address_says_it_refuses_ipv4_clients(demo_run, local, monkeypatch, capsys):
    """`--host ::` listens on IPv6 alone (asyncio binds it IPv6-only, as nginx's `listen [::]` does): "all
    interfaces" sent teammates to an IPv4 address that refused them."""
    import socket
    import time

    import uvicorn

    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import _uvicorn_options

    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    _served_app(monkeypatch, str(demo_run), "--device", "cpu", "--host", "::")
    serving = capsys.readouterr().out.splitlines()[1]
    port = serving.rsplit(":", 1)[1].split(" ", 1)[0]
    assert serving.startswith(f"serving {demo_run} (torch) on all IPv6 interfaces, not IPv4 (--host 0.0.0.0 for "
                              f"those): reach it at http://{socket.gethostname()}:{port} (or at this machine's IPv6 "
                              f"address)"), serving
    monkeypatch.undo()
    # As uvicorn binds it: IPv4 refused
    server = uvicorn.Server(uvicorn.Config(create_app(local), host="::", port=int(port), **_uvicorn_options(
        ServeLimits())))
    thread = threading.Thread(target=server.run)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive(), "the server did not start"
            time.sleep(0.05)
        socket.create_connection(("::1", int(port)), timeout=10).close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    finally:
        server.should_exit = True
        thread.join(30)


def test_the_access_log_names_an_internal_error_500_as_the_client_is_answered_not_unanswered(local, monkeypatch):
    def broken(*args, **options):
        raise RuntimeError("patient 4711: a bug's message may quote the text")

    monkeypatch.setattr(local, "explain", broken)
    logged: list[str] = []
    with TestClient(create_app(local, access_log=logged.append), raise_server_exceptions=False) as client:
        assert client.post("/explain", json={"text": "patient 4711"}).status_code == 500
    assert len(logged) == 1 and " POST /explain 500 " in logged[0], logged
    assert logged[0].endswith(" ms: internal error (RuntimeError)") and "4711" not in logged[0], logged


def test_the_access_log_writes_a_path_as_one_field_so_a_request_cannot_forge_its_status(local):
    # A path decoded from "%0A" and "%20" put "fake 200" where the status goes: a line a reader or a parser misreads.
    logged: list[str] = []
    with TestClient(create_app(local, access_log=logged.append)) as client:
        assert client.get("/nope%0Afake%20200").status_code == 404
    assert logged[0].split()[2:5] == ["GET", "/nope%0Afake%20200", "404"], logged


def test_the_json_access_log_writes_one_valid_object_per_request_whatever_its_path_and_detail(local):
    """For a log collector: each line one JSON object, parsed whole, its quotes, backslashes, newlines and non-ASCII
    (a method name the client chose, quoted back in the detail) escaped; still never a text."""
    import json

    logged: list[str] = []
    secret = "patient 4711 was denied the claim"
    with TestClient(create_app(local, access_log=logged.append, access_log_format="json")) as client:
        assert client.post("/predict", json={"text": secret}).status_code == 200
        assert client.post("/predict", json={"texts": [secret, 5]}).status_code == 422
        assert client.get('/nope%0A"fake\\ 200"').status_code == 404
        assert client.post("/explain", json={"text": secret, "method": 'bo"g\\us\n\u2028é}'}).status_code == 400
        assert client.get("/health").status_code == 200  # (not logged, as in text)
    assert len(logged) == 4 and not [line for line in logged if "\n" in line or "4711" in line], logged
    records = [json.loads(line) for line in logged]
    assert [list(record) for record in records] == [
        ["time", "event", "client", "method", "path", "status", "ms", "detail", "request_id"]] * 4, records
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["time"]) and record["event"] == "request"
               and isinstance(record["ms"], float) for record in records), records
    assert records[0] | {"time": "T", "ms": 0.0} == {"time": "T", "event": "request", "client": "testclient",
                                                      "method": "POST", "path": "/predict", "status": 200, "ms": 0.0,
                                                      "detail": None, "request_id": None}
    assert records[1]["status"] == 422 and records[1]["detail"] == "texts.1: Input should be a valid string"
    assert records[2]["path"] == "/nope%0A%22fake%5C%20200%22" and records[2]["status"] == 404
    assert records[3]["status"] == 400 and "unknown explanation method 'bo\"g\\\\us\\n\\u2028é}'" in records[3][
        "detail"], records[3]
    assert all(line.isascii() for line in logged), "a line a collector reading ASCII or Latin-1 would garble"


def test_attnclf_serve_access_log_off_logs_no_request_and_json_writes_every_stdout_line_as_json(demo_run, capsys,
                                                                                               monkeypatch):
    import json

    with TestClient(_served_app(monkeypatch, str(demo_run), "--device", "cpu", "--access-log", "off")) as client:
        assert client.post("/predict", json={"texts": []}).status_code == 422
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("serving "), out  # (what it serves, and where, is no request's line)
    with TestClient(_served_app(monkeypatch, str(demo_run), "--device", "cpu", "--access-log", "json",
                                "--host", "0.0.0.0")) as client:
        assert client.post("/predict", json={"texts": []}).status_code == 422
    warning, serving, request = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    # The same sentences as in text, whole: the event is what a collector keys on.
    assert warning["event"] == "warning" and warning["message"].startswith("warning: reachable from other"), warning
    assert serving["event"] == "serving" and serving["message"].startswith(f"serving {demo_run} (torch) on "), serving
    assert request["event"] == "request" and request["detail"] == "texts is empty: give one text at least", request


def test_serve_refuses_an_access_log_it_does_not_know_in_one_line_naming_the_choices(demo_run):
    from attnclf.errors import AttnclfError
    from attnclf.serve import serve

    with pytest.raises(AttnclfError, match=r"^access_log must be text, json or off, got 'xml'$"):
        serve(demo_run, port=0, access_log="xml")


def test_serve_help_names_the_access_log_choices_and_default(capsys):
    from attnclf.cli import main

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--access-log {text,json,off}" in help_text and "(default: text)" in help_text, help_text


def test_create_app_refuses_an_access_log_format_it_does_not_know_rather_than_writing_text(local):
    """A typo ("jsno") gave text lines silently: a collector reading them as JSON then parses none."""
    from attnclf.errors import AttnclfError

    with pytest.raises(AttnclfError, match=r"^access_log_format must be text or json, got 'jsno'$"):
        create_app(local, access_log=print, access_log_format="jsno")


def test_the_services_own_text_lines_stay_one_line_whatever_a_run_path_or_label_holds():
    # The serving and reloaded lines quote the operator's run path and threshold label as given; a newline in either
    # would split the line and could forge a request line after it (JSON escapes it already).
    from attnclf.serve.logs import logged_line

    forged = "runs/x\n2026-11-28T00:00:00Z 10.0.0.1 POST /predict 200 1.0 ms"
    line = logged_line("text", "reloaded", message=f"reloaded {forged}: weights a -> b")
    assert line.splitlines() == [line] and "\u2028" not in logged_line("text", "serving", message="a\u2028b")
    assert line == "reloaded runs/x 2026-11-28T00:00:00Z 10.0.0.1 POST /predict 200 1.0 ms: weights a -> b"


def test_a_prediction_worker_that_died_fails_health_and_every_prediction_at_once_rather_than_hanging(local,
                                                                                                     monkeypatch):
    """A bug that ends the batcher's loop left /health answering "ok" while every /predict waited for ever, holding
    its place until the service refused all: a liveness probe must see it (and have the service restarted), and a
    client must get an answer saying so. Only the exception's type is told: its message may quote a text."""
    from concurrent.futures import ThreadPoolExecutor

    from attnclf.serve.batcher import Batcher

    def broken(self):
        raise RuntimeError("a bug that quotes a secret text")

    monkeypatch.setattr(Batcher, "_next_batch", broken)
    lines = []
    with TestClient(create_app(local, access_log=lines.append)) as client, ThreadPoolExecutor(1) as pool:
        first = pool.submit(client.post, "/predict", json={"text": "good"}).result(timeout=30)
        later = pool.submit(client.post, "/predict", json={"text": "good"}).result(timeout=30)
        health, head = client.get("/health"), client.head("/health")
    stopped = ("the prediction worker stopped on an internal error (RuntimeError): this service answers no "
               "prediction until it is restarted")
    for answer in (first, later, health):
        assert (answer.status_code, answer.json()) == (503, {"detail": stopped})
        assert "retry-after" not in answer.headers  # (retrying here is no use)
    assert head.status_code == 503
    assert "secret" not in "".join(lines)
    assert re.fullmatch(rf"\S+ testclient GET /health 503 [\d.]+ ms: {re.escape(stopped)}", lines[-2]), lines


def test_stop_seconds_sets_how_long_a_stop_waits_for_requests_in_flight(demo_run, monkeypatch, capsys):
    """An /explain of long texts takes 14-15 s (README): a stop fixed at 5 s cut it off, where systemd (90 s) and
    Kubernetes (30 s) would have waited for it. The operator sets the wait to fit the stop timeout it runs under."""
    import uvicorn

    from attnclf.cli import main

    waited = []
    monkeypatch.setattr(uvicorn.Server, "run",
                        lambda server, sockets=None: waited.append(server.config.timeout_graceful_shutdown))
    serve = ["serve", str(demo_run), "--port", "0", "--device", "cpu", "--threads", "1"]
    assert main(serve) == 0 and main([*serve, "--stop-seconds", "25"]) == 0
    assert waited == [5, 25]
    assert main([*serve, "--stop-seconds", "0"]) == 2
    assert capsys.readouterr().err.endswith("attnclf: error: --stop-seconds must be a positive integer, got 0\n")


def test_keep_alive_seconds_sets_how_long_an_idle_connection_is_kept_open(demo_run, local, monkeypatch):
    """A load balancer or proxy keeps its connections to the service open to reuse them (AWS's ALB for 60 s, nginx's
    upstream keepalive for 60 s): a service closing them sooner (uvicorn's 5 s) races the proxy's next request on them,
    which it answers 502. The operator sets the service's wait past the proxy's."""
    import socket
    import time

    import uvicorn

    from attnclf.cli import main
    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import _uvicorn_options

    kept = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets=None: kept.append(server.config.timeout_keep_alive))
    serve = ["serve", str(demo_run), "--port", "0", "--device", "cpu", "--threads", "1"]
    assert main(serve) == 0 and main([*serve, "--keep-alive-seconds", "75"]) == 0
    assert kept == [5, 75]
    monkeypatch.undo()

    limits = ServeLimits(keep_alive_seconds=1)
    server = uvicorn.Server(uvicorn.Config(create_app(local, limits), **_uvicorn_options(limits)))
    with _running(server) as port, socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
        answer = b""
        while not answer.endswith(b"}"):  # (the head and the body may come apart)
            answer += connection.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200 OK")
        time.sleep(2)
        connection.settimeout(2)  # (uvicorn's own 5 s would still hold it open: recv would time out)
        assert connection.recv(4096) == b""  # closed by the server, idle past its second


def test_root_path_serves_behind_a_proxy_that_mounts_it_under_a_prefix(demo_run, serving_process, cli_error):
    """A proxy serving the API at https://host/attnclf/ strips the prefix before passing a request on: without being
    told it, /docs sent every curl line and the schema's link to the host's root, where nothing answers."""
    import httpx

    with serving_process(str(demo_run), "--device", "cpu", "--threads", "1", "--root-path", "/attnclf") as (
            process, url, answer):
        assert answer.status_code == 200  # (as the proxy passes it on: the prefix stripped)
        docs = httpx.get(f"{url}/docs", timeout=30).text
        assert httpx.get(f"{url}/openapi.json", timeout=30).status_code == 200
    assert f"{url}/attnclf/predict" in docs and f"{url}/attnclf/openapi.json" in docs, docs
    for wrong in ("attnclf", "/attnclf/"):
        assert cli_error(["serve", str(demo_run), "--root-path", wrong]) == (
            f"--root-path must start with / and not end with it (as /attnclf), got {wrong!r}")


def test_the_access_log_names_the_request_id_a_proxy_sent_so_its_log_and_the_service_s_join_up(local):
    """nginx (`proxy_set_header X-Request-ID $request_id`) and most load balancers tag each request: without it in
    the service's line, an operator matched a 5xx in the proxy's log to the service's by time alone. Sent by a client,
    it is one bounded field like the path, that no value can break."""
    import json

    uuid = "0b6e4f1c-6f2a-4a8e-9d4a-2f0c7e1b9a33"
    for log_format in ("text", "json"):
        logged: list[str] = []
        with TestClient(create_app(local, access_log=logged.append, access_log_format=log_format)) as client:
            client.post("/predict", json={"text": "good"}, headers={"X-Request-ID": uuid})
            client.post("/predict", json={"texts": []}, headers={"X-Request-ID": 'x 200 1.0 ms\n"' + "y" * 100})
            client.post("/predict", json={"text": "good"})
        if log_format == "json":
            records = [json.loads(line) for line in logged]
            assert [record["request_id"] for record in records] == [
                uuid, "x%20200%201.0%20ms%0A%22yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy...", None], records
        else:
            assert logged[0].endswith(f" POST /predict 200 {logged[0].split()[-3]} ms {uuid}"), logged
            assert logged[1].endswith(" ms x%20200%201.0%20ms%0A%22yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy...: texts "
                                      "is empty: give one text at least"), logged
            assert logged[2].endswith(" ms"), logged


def test_a_connection_whose_request_head_never_ends_is_closed_not_held_for_ever(local):
    """uvicorn bounds no request head: connections that send half a head (or nothing) were held open for as long as
    their clients liked, and a few hundred of them (uvicorn's own limit, 4 x --max-connections + 1) had every other
    client answered 503. A head gets --max-body-seconds, as its body does; a connection that sends nothing, the
    keep-alive seconds an idle one gets."""
    import socket
    import time

    import httpx
    import uvicorn

    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import _uvicorn_options

    limits = ServeLimits(max_body_seconds=1, keep_alive_seconds=1)
    server = uvicorn.Server(uvicorn.Config(create_app(local, limits), **_uvicorn_options(limits)))
    with _running(server) as port:
        half, silent, trickled = (socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(3))
        half.sendall(b"GET /health HTTP/1.1\r\nHost: test\r\n")
        try:
            for byte in b"GET /health HTTP/1.1\r\nHost: test\r\nX-Slow: aaaaaaaaaa":  # never idle for a second
                trickled.sendall(bytes([byte]))
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):  # closed as it trickled
            pass
        for connection in (half, silent, trickled):
            connection.settimeout(3)  # (with no bound, recv waits: a TimeoutError)
            try:
                assert connection.recv(4096) == b""
            except ConnectionResetError:  # (closed with bytes of ours unread)
                pass
            connection.close()
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200


def test_a_client_that_does_not_read_its_answers_loses_its_connection_and_gives_its_place_back(local):
    """A client that sent requests and never read the answers held its place among --max-connections for as long as
    it kept the connection open: once the socket's buffers filled, the answer's writer waited for ever. A few such
    clients had every other one answered 503, busy. Writing that waits --max-body-seconds closes the connection."""
    import socket
    import time

    import httpx
    import uvicorn

    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import _uvicorn_options

    limits = ServeLimits(max_connections=1, max_body_seconds=2)
    server = uvicorn.Server(uvicorn.Config(create_app(local, limits), **_uvicorn_options(limits)))
    with _running(server) as port:
        reader = socket.socket()
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)  # (the buffers fill sooner)
        reader.connect(("127.0.0.1", port))
        # Megabytes of answers it never reads: more than the two sockets' buffers hold.
        reader.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: test\r\n\r\n" * 1000)
        answers, deadline = [], time.monotonic() + 20
        # Its place taken (503), then given back (200): without the bound, 503 for as long as it stays connected.
        while time.monotonic() < deadline and not (503 in answers and answers[-1] == 200):
            time.sleep(0.2)
            answers.append(httpx.post(f"http://127.0.0.1:{port}/predict", json={"text": "good"}).status_code)
        assert 503 in answers and answers[-1] == 200, answers
        reader.settimeout(10)
        try:
            while reader.recv(1 << 16):  # what reached it, then the close
                pass
        except ConnectionResetError:  # (closed with its answers unsent)
            pass
        reader.close()


@pytest.mark.parametrize("request_bytes", [
    b"GET /h\xc3\xa9alth HTTP/1.1\r\nHost: test\r\n\r\n",  # (a path not in ASCII)
    b"POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: -1\r\n\r\n{}",
    b"POST /predict HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  # (a chunk of no size)
])
def test_a_request_that_is_not_http_gets_a_json_400_as_every_other_error(local, request_bytes):
    """uvicorn answered a request h11 cannot parse "Invalid HTTP request received." in plain text, where every other
    error is one line of JSON a client reads the detail of."""
    import json
    import socket

    import uvicorn

    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import _uvicorn_options

    limits = ServeLimits()
    server = uvicorn.Server(uvicorn.Config(create_app(local, limits), **_uvicorn_options(limits)))
    with _running(server) as port, socket.create_connection(("127.0.0.1", port), timeout=30) as client:
        client.sendall(request_bytes)
        answer = b""
        while chunk := client.recv(4096):  # (the connection is closed after it)
            answer += chunk
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 400 ") and b"content-type: application/json" in head.lower(), answer
    assert json.loads(body) == {"detail": "not an HTTP/1.1 request this server can parse: a malformed request line, "
                                          "header, Content-Length or chunk"}


def test_the_first_model_request_imports_nothing_on_the_event_loop(demo_run):
    """GET /model looked up the run's text columns through the data package, whose first import (pandas, scipy,
    joblib: 0.6 s, 1.4 s on a busy 2-core box) ran on the event loop: every request in flight, /health too, waited
    for a monitor's first /model. What /model says is found as the model is served."""
    import subprocess
    import sys

    code = f"""
import sys
from fastapi.testclient import TestClient
from attnclf.classifier import Classifier
from attnclf.serve.app import create_app
with TestClient(create_app(Classifier.load({str(demo_run)!r}, device="cpu"))) as client:
    before = set(sys.modules)
    assert client.get("/model").status_code == 200
    print(sorted(name for name in set(sys.modules) - before if "." not in name))
"""
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert imported.stdout == "[]\n", imported.stdout + imported.stderr


def test_with_a_json_log_uvicorn_s_own_lines_are_json_objects_too():
    """Docker and Kubernetes hand a collector a container's stdout and stderr as one stream: under --access-log json,
    uvicorn's own warnings on stderr ("WARNING:  Invalid HTTP request received.") were the lines it could not parse,
    and an error's traceback came as thirty of them. Each is one object, the traceback inside its message. (A real
    service's warning: test_a_sigterm_stop_says_when_it_begins_why_and_when_it_has_stopped[json].)"""
    import json
    import logging
    import sys

    from attnclf.serve.logs import JsonLogRecords

    try:
        raise RuntimeError("a bug")
    except RuntimeError:
        record = logging.LogRecord("uvicorn.error", logging.ERROR, "", 0, "Exception in ASGI application", (),
                                   sys.exc_info())
    line = JsonLogRecords().format(record)
    assert "\n" not in line and json.loads(line)["event"] == "error"
    message = json.loads(line)["message"]
    assert message.startswith("Exception in ASGI application\nTraceback") and message.endswith("RuntimeError: a bug")


def _raw_post(port: int, path: str, body: bytes):
    """A connection to ``port`` that has sent a POST of ``body`` to ``path`` and reads nothing: closing it is a client
    hanging up."""
    import socket

    connection = socket.create_connection(("127.0.0.1", port), timeout=30)
    connection.sendall(b"POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                       b"\r\n%s" % (path.encode(), len(body), body))
    return connection


@pytest.mark.parametrize("path, work", [("/explain", "explanation"), ("/predict", "prediction")])
def test_a_request_whose_client_hung_up_while_it_waited_its_turn_is_not_computed(local, path, work):
    """Explanations run one at a time, occlusion of a long text for seconds: one whose client gave up (a timeout, a
    closed tab) while it waited was computed all the same, and every explanation behind it waited for it. So was a
    prediction waiting for the batch running to end, in the next batch. Each is skipped as its turn comes, logged 499
    (nginx's "client closed request"); one already running runs to its end."""
    import time

    import httpx
    import uvicorn

    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import _uvicorn_options

    method = path[1:]
    computed: list[list[str]] = []

    class Recorded:
        """``local``, recording the texts it explains or predicts."""

        def __getattr__(self, name):
            if name != method:
                return getattr(local, name)

            def recorded(texts, **options):
                computed.append(list(texts))
                return getattr(local, name)(texts, **options)
            return recorded

    held = _Held(Recorded(), method)
    logged: list[str] = []
    limits = ServeLimits()
    server = uvicorn.Server(uvicorn.Config(create_app(held, limits, access_log=logged.append),
                                          **_uvicorn_options(limits)))
    with _running(server, before_stop=held.release.set) as port, \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        running = threading.Thread(target=client.post, args=(path,), kwargs={"json": {"text": "good"}})
        running.start()
        assert held.arrived.wait(60), f"the first {work} never started"
        with _raw_post(port, path, b'{"text": "a client that gave up"}'):
            time.sleep(1)  # (read by the server and waiting its turn, as its client hangs up)
        time.sleep(1)  # (the hang-up seen by the server before the turn comes)
        held.release.set()
        running.join(30)
        deadline = time.monotonic() + 30
        while len(logged) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.post(path, json={"text": "not good"}).status_code == 200  # the next one is served
    assert computed == [["good"], ["not good"]], computed
    gone = [line for line in logged if f" POST {path} 499 " in line]  # (logged as it ends, maybe before the first)
    assert len(gone) == 1 and gone[0].endswith(
        f"the client closed the connection before its {work} began: not computed"), logged


def test_an_answer_to_a_client_that_hung_up_as_it_was_computed_is_logged_undelivered_not_200(local):
    """A client that sent a /predict and closed the connection before the answer came was logged 200, as if it had
    been answered: uvicorn drops an answer to a closed connection, saying nothing. It is logged 499, with the status
    the client would have had."""
    import time

    import uvicorn

    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import _uvicorn_options

    held = _Held(local, "predict")
    logged: list[str] = []
    limits = ServeLimits()
    server = uvicorn.Server(uvicorn.Config(create_app(held, limits, access_log=logged.append),
                                          **_uvicorn_options(limits)))
    with _running(server, before_stop=held.release.set) as port:
        with _raw_post(port, "/predict", b'{"text": "a client that gave up"}'):
            assert held.arrived.wait(60), "the prediction never started"
        time.sleep(1)  # (the server sees the connection close while the prediction runs)
        held.release.set()
        with _raw_post(port, "/predict", b'{"texts": []}') as answered:  # (read: an answer delivered is logged so)
            assert b" 422 " in answered.recv(4096)
        deadline = time.monotonic() + 30
        while len(logged) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    gone, answered = sorted(logged, key=lambda line: " 422 " in line)  # (each logged as it ends: in either order)
    assert " POST /predict 499 " in gone and gone.endswith(
        "the client closed the connection before its answer was sent (200)"), logged
    assert " POST /predict 422 " in answered and answered.endswith(": texts is empty: give one text at least"), logged


def test_answers_pipelined_on_one_connection_are_logged_as_sent_each_request_read_whole(local):
    """The access log asks uvicorn's receive whether the client has gone as each answer's last part goes. On one
    kept-alive connection, a body the app refused unread (413: the question may take a part of it, which nobody was to
    read), a HEAD and a /predict pipelined behind them are each answered, the /predict's body whole, and logged as
    sent: a question that took the next request's bytes, or read a part of a body as a hang-up, would not be."""
    import socket
    import time

    import uvicorn

    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import _uvicorn_options

    logged: list[str] = []
    limits = ServeLimits(max_body_bytes=100)
    server = uvicorn.Server(uvicorn.Config(create_app(local, limits, access_log=logged.append),
                                          **_uvicorn_options(limits)))
    refused, wanted = b'{"text": "%s"}' % (b"x" * 200), b'{"texts": ["good", "not good"]}'
    with _running(server) as port, socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(b"".join(
            b"POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body) if body else b"HEAD /model HTTP/1.1\r\nHost: test\r\n\r\n"
            for body in (refused, None, wanted)))
        answers = b""
        while answers.count(b"HTTP/1.1 ") < 3 or not answers.endswith(b"]}"):
            answers += connection.recv(65536) or pytest.fail(f"the connection closed: {answers!r}")
        deadline = time.monotonic() + 30
        while len(logged) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert re.findall(rb"HTTP/1\.1 (\d+) ", answers) == [b"413", b"200", b"200"], answers
    assert answers.count(b'"label"') == 2, answers  # (both texts of the /predict read)
    assert [line.split()[2:5] for line in logged] == [
        ["POST", "/predict", "413"], ["HEAD", "/model", "200"], ["POST", "/predict", "200"]], logged


@pytest.mark.parametrize("stdout", ["closed", "a pipe nobody reads"])
def test_a_stdout_that_cannot_take_the_log_stops_the_start_in_one_line(demo_run, stdout):
    """Its reader gone, `attnclf serve` exited 141 (SIGPIPE's status) and said nothing; closed, uvicorn failed with a
    traceback. A service whose log has nowhere to go says so and does not start."""
    import os
    import subprocess
    import sys

    command = [sys.executable, "-m", "attnclf", "serve", str(demo_run), "--port", "0", "--device", "cpu",
               "--threads", "1"]
    if stdout == "closed":
        done = subprocess.run(command, preexec_fn=lambda: os.close(1), stderr=subprocess.PIPE, text=True, timeout=120)
        why = "stdout is closed"
    else:
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            done = subprocess.run(command, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
        finally:
            os.close(write_end)
        why = "Broken pipe"
    assert done.returncode == 2 and done.stderr == (
        f"attnclf: error: cannot write the service's log to stdout ({why}): start it with a stdout that is read (a "
        f"terminal, a file, a log collector's pipe; /dev/null keeps no log)\n"), done.stderr


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_stdout_whose_reader_dies_mid_run_stops_the_log_saying_so_once_and_the_service_answers_on(
        local, monkeypatch, capsys, log_format):
    """Each request then raised BrokenPipeError into uvicorn, which logged it as a traceback on stderr."""
    import io
    import json

    from attnclf.serve.logs import StdoutLog

    class ReaderDies(io.StringIO):
        def write(self, text):
            if "\n" in self.getvalue():  # (after the first line)
                raise BrokenPipeError(32, "Broken pipe")
            return super().write(text)

    monkeypatch.setattr("sys.stdout", ReaderDies())
    log = StdoutLog(log_format)
    log.say("serving", "serving runs/demo")
    with TestClient(create_app(local, access_log=log, access_log_format=log_format)) as client:
        assert [client.post("/predict", json={"text": "good"}).status_code for _ in range(3)] == [200] * 3
    log.say("stopped", "stopped after serving 3 requests")
    err = capsys.readouterr().err.splitlines()
    message = "warning: the log on stdout stopped (Broken pipe): requests go on being answered, unlogged"
    assert err == [message] if log_format == "text" else [json.loads(line)["message"] for line in err] == [message]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts the open descriptors in /proc")
def test_a_stopped_log_on_a_stream_other_than_fd_1_leaves_its_file_alone_and_opens_no_descriptor(tmp_path,
                                                                                                 monkeypatch, capsys):
    """The stop pointed whatever descriptor sys.stdout had at /dev/null (here a file the log was redirected to, not
    the process's stdout it is for), and left the /dev/null descriptor it opened for that open."""
    import io
    import os

    from attnclf.serve.logs import StdoutLog

    target = (tmp_path / "log").open("w")

    class ReaderDies(io.StringIO):
        def fileno(self):
            return target.fileno()

        def write(self, text):
            if "\n" in self.getvalue():
                raise BrokenPipeError(32, "Broken pipe")
            return super().write(text)

    monkeypatch.setattr("sys.stdout", ReaderDies())
    try:
        before = sorted(os.listdir("/proc/self/fd"))
        log = StdoutLog("text")
        log.say("serving", "serving runs/demo")
        log.say("stopped", "stopped")
        assert log.stopped
        assert sorted(os.listdir("/proc/self/fd")) == before, "a descriptor was left open"
        assert os.path.samestat(os.fstat(target.fileno()), os.stat(tmp_path / "log")), "the file was pointed away"
    finally:
        target.close()
    assert "the log on stdout stopped (Broken pipe)" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads where fd 1 points in /proc")
def test_a_stopped_log_points_fd_1_at_dev_null_and_leaves_no_descriptor_of_its_own_open():
    """Python flushes stdout once more as it exits, into the pipe whose reader has gone: fd 1 takes /dev/null instead
    (the process ends 0, saying nothing more), and the descriptor opened on /dev/null for it is closed again."""
    import os
    import subprocess
    import sys

    code = "\n".join([
        "import os, sys",
        "from attnclf.serve.logs import StdoutLog",
        "read_end, write_end = os.pipe(); os.close(read_end); os.dup2(write_end, 1); os.close(write_end)",
        "before = sorted(os.listdir('/proc/self/fd'))",
        "log = StdoutLog('text')",
        "with log.in_background():",
        "    log('a line nobody reads')",
        "print(log.stopped, sorted(os.listdir('/proc/self/fd')) == before, os.readlink('/proc/self/fd/1'),",
        "      file=sys.stderr)"])
    done = subprocess.run([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr.splitlines()[-1] == f"True True {os.devnull}", done.stderr


def test_a_stdout_read_slowly_holds_up_no_request_and_lines_past_the_buffer_are_counted_not_waited_for(
        local, monkeypatch):
    """A log reader that stalls (a collector, a terminal scrolled back) filled the pipe, and then each access log
    line held the event loop, every request and /health with it, for as long as the reader slept: a liveness probe
    failing then has the service restarted. Lines are written on a thread of their own; past ``most`` waiting, they
    are dropped and counted, the count written once the reader is back."""
    import io
    import time

    from attnclf.serve.logs import StdoutLog

    class Stalled(io.StringIO):
        def __init__(self):
            super().__init__()
            self.back = threading.Event()

        def write(self, text):
            self.back.wait(10)  # (a regression waits 10 s a line, and fails on the time below)
            return super().write(text)

    stalled = Stalled()
    monkeypatch.setattr("sys.stdout", stalled)
    log = StdoutLog("text", most=2)
    with log.in_background(), TestClient(create_app(local, access_log=log)) as client:
        began = time.perf_counter()
        assert [client.post("/predict", json={"text": "good"}).status_code for _ in range(5)] == [200] * 5
        assert client.get("/health").status_code == 200
        assert time.perf_counter() - began < 5
        stalled.back.set()
    *written, dropped = stalled.getvalue().splitlines()
    # Two waiting, and one more if the writer had taken one as it stalled; the others dropped, and said so.
    assert all(" POST /predict 200 " in line for line in written) and len(written) in (2, 3), written
    assert dropped == f"warning: {5 - len(written)} log lines dropped: stdout was not read as fast as they came"


def test_a_worker_that_dies_mid_batch_answers_the_requests_of_that_batch_too(local, monkeypatch):
    """A bug can end the worker loop after it took a batch's requests off the queue (here: answers it cannot slice):
    those requests were in no queue any more, so they waited for ever while /health failed and later ones were
    answered; they are answered 503 like every other."""
    import httpx
    import uvicorn

    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import _uvicorn_options

    predict = Classifier.predict
    monkeypatch.setattr(Classifier, "predict", lambda self, texts, **options: iter(predict(self, texts, **options)))
    limits = ServeLimits(stop_seconds=1)
    server = uvicorn.Server(uvicorn.Config(create_app(local, limits), **_uvicorn_options(limits)))
    with _running(server) as port:  # (served, not a TestClient: a request waiting for ever times out, not hangs)
        answer = httpx.post(f"http://127.0.0.1:{port}/predict", json={"text": "good"}, timeout=20)
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 503
    assert answer.status_code == 503
    assert answer.json()["detail"].startswith("the prediction worker stopped on an internal error (TypeError)")


def test_lines_dropped_while_the_reader_stalled_are_counted_when_it_comes_back_only_as_the_service_stops(monkeypatch):
    """A reader back only after the stop began (a collector restarted as the service was) saw the lines that had
    waited and no word of those dropped: the stop's end marker queued behind them kept the queue from ever looking
    caught up, where the count is written."""
    import io

    from attnclf.serve.logs import StdoutLog

    class Stalled(io.StringIO):
        def __init__(self):
            super().__init__()
            self.back = threading.Event()

        def write(self, text):
            self.back.wait(10)
            return super().write(text)

    stalled = Stalled()
    monkeypatch.setattr("sys.stdout", stalled)
    log = StdoutLog("text", most=2)
    back = threading.Timer(0.5, stalled.back.set)  # (as the stop waits for the lines still waiting)
    with log.in_background():
        for number in range(5):
            log(f"line {number}")
        back.start()
    back.join()
    *written, dropped = stalled.getvalue().splitlines()
    assert written == [f"line {number}" for number in range(len(written))] and len(written) in (2, 3), written
    assert dropped == f"warning: {5 - len(written)} log lines dropped: stdout was not read as fast as they came"


def test_a_reload_between_weights_of_unknown_sha256_does_not_call_them_unchanged(local):
    """An ONNX export older than its record of the run's weights names none: two unknown weights are no evidence of
    one model (model_id is None for them), and the reload line said 'weights None unchanged'."""
    from attnclf.serve.model import ServedModel

    unknown = {"run": "runs/old-export", "weights_sha256": [None]}
    before, after = ServedModel.of(local, unknown), ServedModel.of(local, unknown)
    assert after.changed_from(before) == "weights of unknown sha256, before as after"
    known = ServedModel.of(local, {"run": "runs/demo", "weights_sha256": ["ab" * 32]})
    assert known.changed_from(before) == f"weights of unknown sha256 -> {'ab' * 32}"
    assert known.changed_from(known) == f"weights {'ab' * 32} unchanged"


def test_a_reload_line_shows_a_temperature_or_threshold_change_past_the_sixth_significant_digit(local):
    """Written with :g, a change past the sixth significant digit read '0.412346 -> 0.412346': no change seen, where
    the model answers otherwise. Each value is written as long as it takes to be exact, and no longer."""
    from dataclasses import replace
    from types import SimpleNamespace

    from attnclf.serve.model import ServedModel

    served = ServedModel.of(local, {"run": "runs/demo", "weights_sha256": ["ab" * 32]})

    def tuned(temperature, thresholds):
        return replace(served, classifier=SimpleNamespace(temperature=temperature, multi_label=True,
                                                          label_names=["sports", "arts"], thresholds=thresholds))

    before, after = tuned(0.4123456, [0.3, 0.71234561]), tuned(0.4123461, [0.3, 0.71234564])
    assert after.changed_from(before) == (f"weights {'ab' * 32} unchanged; temperature 0.4123456 -> 0.4123461; "
                                          f"threshold of 1 label moved: arts 0.71234561 -> 0.71234564")
    assert tuned(0.5, [0.3, 0.25]).changed_from(tuned(1.0, [0.3, 0.5])) == (
        f"weights {'ab' * 32} unchanged; temperature 1 -> 0.5; threshold of 1 label moved: arts 0.5 -> 0.25")


def test_a_reader_stalled_for_good_holds_the_stop_last_seconds_at_most(monkeypatch):
    """The stop waited LAST_SECONDS for room to mark the end in a full queue, then LAST_SECONDS more for the writer:
    twice what it promised, 10 s past the requests' own wait, beyond Docker's stop timeout (10 s) and killed there."""
    import io
    import time

    from attnclf.serve.logs import StdoutLog

    stalled_for_good = threading.Event()

    class Stalled(io.StringIO):
        def write(self, text):
            stalled_for_good.wait(30)
            return super().write(text)

    monkeypatch.setattr("sys.stdout", Stalled())
    monkeypatch.setattr(StdoutLog, "LAST_SECONDS", 1)
    log = StdoutLog("text", most=2)
    try:
        with log.in_background():
            waiting, writer = log._waiting, next(t for t in threading.enumerate() if t.name == "attnclf-log")
            log("line 0")
            time.sleep(0.2)  # (the writer takes it, and stalls writing it)
            for number in range(1, 5):
                log(f"line {number}")  # (two fill the queue, two are dropped)
            began = time.perf_counter()
        assert time.perf_counter() - began < 1.5
    finally:
        stalled_for_good.set()  # (the writer writes what waits, and ends before stdout is given back)
        waiting.put(None)
        writer.join(30)
