"""`attnclf serve` reloading its run on SIGHUP: the run trained again is served without a restart, and a reload that
fails keeps the model being served."""

import asyncio
import json
import shutil
import signal

import pytest
from fastapi.testclient import TestClient

from attnclf.rundir import file_sha256


@pytest.fixture
def run(demo_run, tmp_path):
    """A copy of demo_run, for a test to train again in place (``retrained``)."""
    return shutil.copytree(demo_run, tmp_path / "run")


def retrained(run, seed: int = 1) -> str:
    """Replaces ``run``'s weights with others of the same shapes, as `train --overwrite` would; their sha256."""
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(run / "model.safetensors")
    generator = torch.Generator().manual_seed(seed)
    save_file({name: tensor + 0.01 * torch.randn(tensor.shape, generator=generator) for name, tensor in
               weights.items()}, run / "model.safetensors.tmp")
    (run / "model.safetensors.tmp").replace(run / "model.safetensors")
    return file_sha256(run / "model.safetensors")


def served(monkeypatch, *arguments):
    """The app `attnclf serve ARGUMENTS` would run, uvicorn left unstarted (its requests unlogged, unless ARGUMENTS
    say otherwise: the service's own lines are the tests')."""
    import uvicorn

    from attnclf.cli import main

    apps = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets=None: apps.append(server.config.app))
    assert main(["serve", "--access-log", "off", *arguments, "--port", "0", "--device", "cpu", "--threads", "1"]) == 0
    return apps[0]


def reload(client: TestClient) -> None:
    """What SIGHUP sets off, run to its end on the app's event loop."""
    client.portal.call(client.app.state.reloader.reload)


def test_a_reload_serves_the_run_trained_again_and_says_which_weights_it_swapped(run, monkeypatch, capsys):
    old = file_sha256(run / "model.safetensors")
    with TestClient(served(monkeypatch, str(run))) as client:
        before = client.post("/predict", json={"text": "a fine film"}).json()
        new = retrained(run)
        assert client.get("/model").json()["weights_id"] == old  # (nothing changes until asked)
        reload(client)
        assert client.get("/model").json()["weights_sha256"] == [new]
        answer = client.post("/predict", json={"text": "a fine film"})
        assert answer.headers["x-attnclf-weights"] == new
        assert client.post("/explain", json={"text": "a fine film"}).headers["x-attnclf-weights"] == new
        reload(client)  # nothing trained since
    assert answer.json() != before, "the answer came from the old weights"
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [f"reloaded {run}: weights {old} -> {new}", f"reloaded {run}: weights {new} unchanged"], out


def test_a_reload_keeps_the_threshold_and_a_json_log_says_so_as_an_object(run, monkeypatch, capsys):
    old = file_sha256(run / "model.safetensors")
    with TestClient(served(monkeypatch, str(run), "--threshold", "positive=0.9", "--access-log", "json")) as client:
        new = retrained(run)
        reload(client)
        info = client.get("/model").json()
    assert info["weights_id"] == new and info["threshold"] == {"class": "positive", "probability": 0.9}, info
    record = json.loads(capsys.readouterr().out.splitlines()[-2])  # (the request to /model last)
    assert record["event"] == "reloaded" and record["message"] == f"reloaded {run}: weights {old} -> {new}", record



def test_a_reload_after_calibrate_keeps_the_weights_header_and_names_the_new_temperature(run, monkeypatch, capsys):
    """`attnclf calibrate` changes no weights but every answer's probabilities: X-Attnclf-Weights keeps naming the
    weights (their sha256, as clients compare it), and X-Attnclf-Model, GET /model's model_id, changes with them."""
    weights = file_sha256(run / "model.safetensors")
    with TestClient(served(monkeypatch, str(run))) as client:
        before = client.post("/predict", json={"text": "a fine film"})
        assert before.headers["x-attnclf-model"] == client.get("/model").json()["model_id"]
        (run / "temperature.json").write_text(json.dumps({"temperature": 0.5}))  # as calibrate writes it
        reload(client)
        after = client.post("/predict", json={"text": "a fine film"})
        explained = client.post("/explain", json={"text": "a fine film"})
        info = client.get("/model").json()
        reload(client)  # nothing changed since
        again = client.post("/predict", json={"text": "a fine film"})
    assert after.json() != before.json(), "the answer came from the temperature before"
    assert before.headers["x-attnclf-weights"] == after.headers["x-attnclf-weights"] == weights
    assert after.headers["x-attnclf-model"] != before.headers["x-attnclf-model"]
    assert after.headers["x-attnclf-model"] == explained.headers["x-attnclf-model"] == info["model_id"]
    assert again.headers["x-attnclf-model"] == info["model_id"] and info["temperatures"] == [0.5]
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [f"reloaded {run}: weights {weights} unchanged; temperature 1 -> 0.5",
                        f"reloaded {run}: weights {weights} unchanged"], out


def test_a_reload_after_thresholds_were_tuned_again_names_the_labels_whose_threshold_moved(tmp_path, monkeypatch,
                                                                                           capsys):
    from attnclf.cli import main
    from attnclf.rundir import THRESHOLDS_FILE
    from attnclf.serve.model import _exactly  # (each as long as it takes to be exact: test_serve_ops)

    run = tmp_path / "topics"
    assert main(["train", "--dataset", "topics", "--epochs", "1", "--max-train-examples", "300", "--set", "d_model=16",
                 "--set", "layers=1", "--threads", "1", "--output", str(run), "--quiet", "--no-report"]) == 0
    weights = file_sha256(run / "model.safetensors")
    saved = json.loads((run / THRESHOLDS_FILE).read_text())
    labels = list(saved["thresholds"])
    with TestClient(served(monkeypatch, str(run))) as client:
        before = client.get("/model").json()
        saved["thresholds"] = {label: 0.01 * (i + 1) for i, label in enumerate(labels)}
        saved["thresholds"][labels[1]] = before["thresholds"][labels[1]]  # (one label's as it was)
        (run / THRESHOLDS_FILE).write_text(json.dumps(saved))
        reload(client)
        after = client.post("/predict", json={"text": "bread soup and the orchestra"})
        info = client.get("/model").json()
    assert after.headers["x-attnclf-weights"] == weights and info["model_id"] != before["model_id"]
    assert after.headers["x-attnclf-model"] == info["model_id"]
    moved = [f"{label} {_exactly(before['thresholds'][label])} -> {_exactly(0.01 * (i + 1))}"
             for i, label in enumerate(labels) if i != 1]
    line = capsys.readouterr().out.splitlines()[-1]
    assert line == (f"reloaded {run}: weights {weights} unchanged; thresholds of {len(moved)} labels moved: "
                    f"{', '.join(moved[:3])}{', ...' if len(moved) > 3 else ''}"), line


def relabelled(run):
    (run / "labels.json").write_text(json.dumps(["bad", "good"]))


def unreadable(run):
    (run / "model.safetensors").write_bytes(b"not weights at all")


@pytest.mark.parametrize("change, reason", [
    (relabelled, "is now a run of other labels ('bad', 'good') than those served ('negative', 'positive'): restart "
                 "the service to serve it"),
    (unreadable, "model.safetensors"),
])
@pytest.mark.parametrize("access_log", ["text", "json"])
def test_a_reload_that_fails_keeps_the_old_model_and_says_why_in_one_line(run, monkeypatch, capsys, change, reason,
                                                                          access_log):
    old = file_sha256(run / "model.safetensors")
    with TestClient(served(monkeypatch, str(run), "--access-log", access_log)) as client:
        change(run)
        reload(client)
        assert client.get("/model").json()["weights_id"] == old
        answer = client.post("/predict", json={"text": "a fine film"})
    assert answer.status_code == 200 and answer.headers["x-attnclf-weights"] == old
    out = capsys.readouterr()
    lines = out.out.splitlines()
    failed = [line for line in lines if "reload failed" in line]
    assert len(failed) == 1 and "Traceback" not in out.out + out.err, out
    message = json.loads(failed[0])["message"] if access_log == "json" else failed[0]
    if access_log == "json":
        assert json.loads(failed[0])["event"] == "reload_failed"
    assert message.startswith("reload failed: ") and reason in message, message
    assert message.endswith(f"; still serving weights {old}"), message


def test_a_reload_refuses_a_threshold_whose_class_the_run_no_longer_has(run, monkeypatch, capsys):
    with TestClient(served(monkeypatch, str(run), "--threshold", "positive=0.9")) as client:
        relabelled(run)
        reload(client)
        assert client.get("/model").json()["threshold"]["class"] == "positive"
    failed = capsys.readouterr().out.splitlines()[-1]
    assert failed.startswith("reload failed: --threshold: 'positive' is not one of the run's 2 classes: 'bad', "
                             "'good'; still serving weights "), failed


def test_a_reload_refuses_weights_that_change_as_they_load(run, monkeypatch, capsys):
    import attnclf.ensemble

    old = file_sha256(run / "model.safetensors")
    app = served(monkeypatch, str(run))
    load = attnclf.ensemble.load_backend

    def retrained_meanwhile(*args, **kwargs):
        loaded = load(*args, **kwargs)
        retrained(run)
        return loaded

    monkeypatch.setattr(attnclf.ensemble, "load_backend", retrained_meanwhile)
    with TestClient(app) as client:
        reload(client)
        assert client.get("/model").json()["weights_id"] == old
    failed = capsys.readouterr().out.splitlines()[-1]
    assert failed == (f"reload failed: {run / 'model.safetensors'} changed as it was loaded (trained again in "
                      f"place?); serve it once it is written; still serving weights {old}"), failed


def test_a_reload_waits_for_a_run_being_written(run, monkeypatch, capsys, held_elsewhere):
    old = file_sha256(run / "model.safetensors")
    with TestClient(served(monkeypatch, str(run))) as client:
        with held_elsewhere(run) as pid:
            retrained(run)
            reload(client)
            assert client.get("/model").json()["weights_id"] == old
    failed = capsys.readouterr().out.splitlines()[-1]
    assert failed == (f"reload failed: {run} is being written by another attnclf process (pid {pid}); wait for it to "
                      f"finish; still serving weights {old}"), failed


def test_reloads_asked_for_together_run_one_at_a_time_and_one_more_covers_those_asked_meanwhile(run, monkeypatch,
                                                                                                  capsys):
    import threading
    import time

    import attnclf.ensemble

    app = served(monkeypatch, str(run))
    load = attnclf.ensemble.load_backend
    loading, most, loads = 0, 0, 0
    lock = threading.Lock()

    def slow(*args, **kwargs):
        nonlocal loading, most, loads
        with lock:
            loading += 1
            loads += 1
            most = max(most, loading)
        time.sleep(0.2)
        try:
            return load(*args, **kwargs)
        finally:
            with lock:
                loading -= 1

    monkeypatch.setattr(attnclf.ensemble, "load_backend", slow)

    async def signals_in_quick_succession():
        reloader = app.state.reloader
        for _ in range(4):  # the first begins; the others, while it runs, ask for one more after it
            reloader.request()
            await asyncio.sleep(0.01)
        await asyncio.gather(reloader.reload(), reloader.reload())  # (called directly: one at a time as well)
        while reloader.busy:
            await asyncio.sleep(0.05)

    with TestClient(app) as client:
        client.portal.call(signals_in_quick_succession)
        assert client.post("/predict", json={"text": "good"}).status_code == 200
    assert most == 1 and loads == 4, (most, loads)
    assert len([line for line in capsys.readouterr().out.splitlines() if line.startswith("reloaded ")]) == 4


def test_a_real_sighup_reloads_the_run_trained_again(run, serving_process):
    """What systemd's `ExecReload=kill -HUP $MAINPID` does: the service answers from the new weights, unrestarted."""
    import signal

    import httpx

    old = file_sha256(run / "model.safetensors")
    with serving_process(str(run), "--device", "cpu", "--threads", "1", "--access-log", "off") as (process, url,
                                                                                                   answer):
        assert answer.headers["x-attnclf-weights"] == old
        new = retrained(run)
        process.send_signal(signal.SIGHUP)
        reloaded = process.stdout.readline()
        assert httpx.post(f"{url}/predict", json={"text": "good"}, timeout=30).headers["x-attnclf-weights"] == new
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert reloaded == f"reloaded {run}: weights {old} -> {new}\n", reloaded
    assert out.splitlines() == ["stopping on SIGTERM: no requests in flight",
                                "stopped after serving 2 requests (/health included)"], out
    assert "Traceback" not in err, err


def test_the_batcher_never_mixes_models_in_a_batch_and_answers_each_request_from_the_one_it_was_sent_to():
    """Requests in flight when a reload swaps the model finish on the old one; those after it get the new one."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from attnclf.serve import Batcher

    calls = []

    def model(name):
        def predict(texts):
            calls.append((name, list(texts)))
            time.sleep(0.05)
            return [f"{name}:{text}" for text in texts]
        return predict

    old, new = model("old"), model("new")

    async def scenario():
        batcher = Batcher(old, ThreadPoolExecutor(1))
        worker = asyncio.create_task(batcher.run())
        first = asyncio.ensure_future(batcher.submit(["a"]))  # runs alone; the rest queue meanwhile
        await asyncio.sleep(0.01)
        answers = await asyncio.gather(first, batcher.submit(["b"]), batcher.submit(["c"], new),
                                       batcher.submit(["d"], new), batcher.submit(["e"]))
        worker.cancel()
        return answers

    answers = asyncio.run(scenario())
    assert answers == [["old:a"], ["old:b"], ["new:c"], ["new:d"], ["old:e"]]
    assert calls == [("old", ["a"]), ("old", ["b"]), ("new", ["c", "d"]), ("old", ["e"])]


def test_a_reload_of_another_kind_of_model_on_the_same_labels_says_so_in_model_and_docs(run, tmp_path, monkeypatch):
    from attnclf.cli import main

    other = tmp_path / "boe"
    assert main(["train", "--dataset", "demo", "--model", "boe", "--epochs", "1", "--max-train-examples", "200",
                 "--output", str(other), "--quiet", "--no-report", "--threads", "1"]) == 0
    with TestClient(served(monkeypatch, str(run))) as client:
        assert client.get("/model").json()["model"]["name"] == "self-attn"
        assert "Text classifier (self-attn)" in client.get("/docs").text
        shutil.rmtree(run)
        shutil.copytree(other, run)  # a second run copied over the one served
        reload(client)
        info = client.get("/model").json()
        assert info["model"]["name"] == "boe" and info["weights_id"] == file_sha256(other / "model.safetensors")
        assert "attention" not in info["explain_methods"]
        assert "Text classifier (boe)" in client.get("/docs").text
        assert client.post("/explain", json={"text": "a fine film"}).json()["explanations"][0]["method"] == "occlusion"


def test_a_reload_of_an_onnx_service_loads_the_export_again_on_onnxruntime(demo_run, exported, monkeypatch, capsys):
    weights = file_sha256(demo_run / "model.safetensors")  # (the export names the run's it was exported from)
    with TestClient(served(monkeypatch, str(exported), "--backend", "onnx", "--int8")) as client:
        reload(client)
        info = client.get("/model").json()
        answer = client.post("/predict", json={"text": "a fine film"})
    assert info["backend"] == "onnx-int8" and info["weights_id"] == weights, info
    assert answer.status_code == 200 and answer.headers["x-attnclf-weights"] == weights
    assert capsys.readouterr().out.splitlines()[-1] == f"reloaded {exported}: weights {weights} unchanged"


def test_a_request_in_flight_as_the_model_is_swapped_finishes_on_the_old_one_and_says_so(run, monkeypatch):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from attnclf.classifier import Classifier

    predict = Classifier.predict
    began, swapped = threading.Event(), threading.Event()
    models = []

    def held_until_swapped(self, *args, **kwargs):  # the first request's batch runs across the reload
        models.append(self)
        if len(models) == 1:
            began.set()
            assert swapped.wait(60)
        return predict(self, *args, **kwargs)

    monkeypatch.setattr(Classifier, "predict", held_until_swapped)
    old = file_sha256(run / "model.safetensors")
    with TestClient(served(monkeypatch, str(run))) as client, ThreadPoolExecutor(1) as requests:
        in_flight = requests.submit(client.post, "/predict", json={"text": "good"})
        assert began.wait(60)
        new = retrained(run)
        reload(client)
        swapped.set()
        answer = in_flight.result(timeout=60)
        later = client.post("/predict", json={"text": "good"})
    assert (answer.headers["x-attnclf-weights"], later.headers["x-attnclf-weights"]) == (old, new)
    assert len(models) == 2 and models[0] is not models[1]


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this platform (Windows)")
def test_a_sighup_while_the_run_loads_neither_kills_the_service_nor_is_lost_on_its_handler(demo_run):
    """A reload asked for before the server is up (systemd's ExecReload as the unit starts) was SIGHUP's default
    action: the process died. The load under way is the reload it asks for; the handler before is put back after."""
    import subprocess
    import sys

    script = f"""
import os, signal, sys, uvicorn
from attnclf import ensemble
from attnclf.cli import main
real = ensemble.load_backend
def load_hung_up(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGHUP)
    return real(*args, **kwargs)
ensemble.load_backend = load_hung_up
uvicorn.Server.run = lambda server, sockets=None: None
signal.signal(signal.SIGHUP, signal.SIG_DFL)
code = main(["serve", {str(demo_run)!r}, "--port", "0", "--device", "cpu", "--threads", "1"])
assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL, signal.getsignal(signal.SIGHUP)
sys.exit(code)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.startswith("serving "), done.stdout
