import csv
import html
import json
import os
import re
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]

# Tests train tiny models, where a second thread only adds synchronisation (and, on a shared
# machine, waits for a busy core): one thread is faster and just as deterministic.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _glibc_left_alone(monkeypatch):
    """`attnclf pretrain` fixes glibc's mmap threshold for its whole process; run in pytest's, it would change how
    every later test allocates. Tests that check the setting run it in a subprocess, or patch this again."""
    from attnclf.training import device

    monkeypatch.setattr(device, "fix_mmap_threshold", lambda *args: False)


@pytest.fixture
def characters_tokenised(monkeypatch):
    """``watch(tokenizer)`` returns a list that from then on holds the length of every piece of text the tokenizer's
    backend is asked to encode: how the tests see that a huge text is read by its ends, not whole."""

    class Spy:
        def __init__(self, backend, read: list):
            self.backend, self.read = backend, read

        def encode(self, piece, **options):
            self.read.append(len(piece))
            return self.backend.encode(piece, **options)

        def encode_batch(self, pieces, **options):
            self.read.extend(map(len, pieces))
            return self.backend.encode_batch(pieces, **options)

        def __getattr__(self, name):  # id_to_token and the rest, as they were
            return getattr(self.backend, name)

    def watch(tokenizer) -> list[int]:
        read: list[int] = []
        monkeypatch.setattr(tokenizer, "backend", Spy(tokenizer.backend, read))
        return read

    return watch


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """The real corpora (ATTNCLF_DATA_DIR, else ../shared/datasets); tests using it skip when absent."""
    path = Path(os.environ.get("ATTNCLF_DATA_DIR", REPO.parent / "shared" / "datasets"))
    if not path.is_dir():
        pytest.skip(f"real datasets not found at {path} (set ATTNCLF_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> Path:
    """A small self-attn model trained on `demo`, shared by the tests that only read it."""
    from attnclf.cli import main

    out = tmp_path_factory.mktemp("runs") / "demo"
    assert main(["train", "--dataset", "demo", "--epochs", "2", "--max-train-examples", "600",
                 "--set", "d_model=32", "--set", "layers=1", "--output", str(out), "--quiet"]) == 0
    return out


SPORT = ["the team won the match", "a late goal won the cup", "the striker scored twice", "the coach praised the team"]
MONEY = ["the bank raised its rates", "shares fell on the market", "the firm reported a profit", "stocks rose today"]


def undescribed(openapi: dict) -> list[str]:
    """The body schemas in ``openapi``'s components ("Name"), and their fields ("Name.field"), that say nothing of
    what they are: /docs and a client generated from /openapi.json would show a bare name."""
    schemas = openapi["components"]["schemas"]
    return [name for name, schema in schemas.items() if not schema.get("description")] + [
        f"{name}.{field}" for name, schema in schemas.items()
        for field, described in schema.get("properties", {}).items() if not described.get("description")]


def docs_tables(page: str) -> dict[str, dict[str, dict[str, str]]]:
    """/docs ``page``'s field tables by route ("POST /predict") and caption ("request", "answer (200)"): each field's
    meaning by its name, in the page's order, unescaped as a reader sees them. A route without a table has none."""
    sections = re.findall(r"<h2><code>(\w+ /\w+)</code></h2>(.*?)(?=<h2>|</body>)", page, re.S)
    return {route: {html.unescape(caption): {
        html.unescape(name): html.unescape(meaning)
        for name, meaning in re.findall(r"<tr><td><code>([^<]*)</code></td><td>[^<]*</td><td>([^<]*)</td></tr>", rows)}
        for caption, rows in re.findall(r"<caption>([^<]*)</caption>(.*?)</table>", section, re.S)}
        for route, section in sections}


def explains_as_to_dict(client, body: dict, explanations) -> None:
    """Assert /explain's answer to ``body`` is ``explanations``' ``to_dict()`` byte for byte (the service's JSON
    writing them, as it answered before its answer had a schema: no key dropped, moved or added, no number written
    otherwise), and that each has every field its schema requires, one of those its oneOf requires, and none it does
    not name."""
    from starlette.responses import JSONResponse

    response = client.post("/explain", json=body)
    assert response.status_code == 200, response.text
    assert response.content == JSONResponse({"explanations": [e.to_dict() for e in explanations]}).body
    schema = client.get("/openapi.json").json()["components"]["schemas"]["ExplanationOut"]
    for answer in response.json()["explanations"]:
        assert set(schema["required"]) <= set(answer) <= set(schema["properties"]), sorted(answer)
        # (and label or labels, as its oneOf says: the one its kind of run sends)
        assert [set(one["required"]) <= set(answer) for one in schema["oneOf"]].count(True) == 1, sorted(answer)


def intervals_shown(metrics: dict, auc_name: str) -> None:
    """Assert that ``metrics``' macro-F1 and ROC AUC lie inside their 95% intervals and that the scores line
    (``metrics_line``) prints each beside its interval, the AUC under ``auc_name``: single-label and multi-label
    runs alike."""
    from attnclf.evaluation.metrics import metrics_line

    (f1_low, f1_high), (auc_low, auc_high) = metrics["macro_f1_ci95"], metrics["roc_auc_ci95"]
    assert f1_low < metrics["macro_f1"] < f1_high and auc_low < metrics["roc_auc"] < auc_high
    line = metrics_line(metrics)
    assert f"macro-F1 {metrics['macro_f1']:.4f} (95% CI {f1_low:.4f}-{f1_high:.4f})" in line
    assert f"{auc_name} {metrics['roc_auc']:.4f} (95% CI {auc_low:.4f}-{auc_high:.4f})" in line


def write_csv(path, rows):
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return path


@pytest.fixture(scope="session")
def sport_and_money_run(tmp_path_factory):
    """A small boe run that learned sport from money, and a test file whose rows 2 and 5 carry the wrong label
    (shared by the tests of evaluate's error analysis and operating points, which only read it)."""
    from attnclf.cli import main

    folder = tmp_path_factory.mktemp("errors")
    train = write_csv(folder / "train.csv", [(t, "sport") for t in SPORT * 8] + [(t, "money") for t in MONEY * 8])
    test = write_csv(folder / "test.csv", [("the team won the cup", "sport"), ("the striker scored", "money"),
                                           ("shares rose today", "money"), ("the bank reported a profit", "money"),
                                           ("a late goal won the match", "money"), ("the coach praised", "sport")])
    run = folder / "run"
    assert main(["train", "--train-file", str(train), "--model", "boe", "--epochs", "15", "--lr", "0.01",
                 "--min-frequency", "1", "--output", str(run), "--quiet", "--no-report", "--seed", "1",
                 "--threads", "1"]) == 0
    return run, test


@pytest.fixture(scope="session")
def exported(demo_run, tmp_path_factory) -> Path:
    """``demo_run``'s ONNX export, float32 and int8 graphs, written outside the run (tests only read it)."""
    from attnclf.cli import main

    out = tmp_path_factory.mktemp("export") / "onnx"
    assert main(["export", str(demo_run), "--output", str(out), "--quantize", "--check-examples", "300"]) == 0
    return out


@pytest.fixture
def resume_after_interruption(monkeypatch):
    """``run(settings, epoch)``: train until interrupted as ``epoch`` starts, then resume the run to its end."""
    from attnclf.training.run import train_run
    from attnclf.training.settings import resume_settings
    from attnclf.training.trainer import Trainer

    def run(settings, epoch: int):
        original = Trainer._train_epoch

        def interrupted(self, batches, optimizer, schedule, loss_fn, current):
            if current == epoch:
                raise KeyboardInterrupt
            return original(self, batches, optimizer, schedule, loss_fn, current)

        with monkeypatch.context() as patch:
            patch.setattr(Trainer, "_train_epoch", interrupted)
            with pytest.raises(KeyboardInterrupt):
                train_run(settings, progress=False)
        return train_run(resume_settings(settings.output), resume=True, progress=False)

    return run


@pytest.fixture
def held_elsewhere():
    """``with held_elsewhere(folder) as pid:`` another process holds ``folder`` as a command writing into it does
    (``rundir.folder_lock``) until the block ends."""
    import subprocess
    import sys
    from contextlib import contextmanager

    holding = ("import sys\nfrom attnclf.rundir import folder_lock\nwith folder_lock(sys.argv[1]):\n"
               "    print('held', flush=True)\n    sys.stdin.read()\n")

    @contextmanager
    def hold(folder):
        Path(folder).mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen([sys.executable, "-c", holding, str(folder)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
        try:
            assert process.stdout.readline() == "held\n"
            yield process.pid
        finally:
            process.stdin.close()
            process.wait(timeout=60)

    return hold


@pytest.fixture
def serving_process():
    """``with serving_process(*arguments) as (process, url, answer):`` `attnclf serve ARGUMENTS --port 0` in a process
    of its own (stdout and stderr piped, as text; its "serving" line read), once it has answered a /predict of
    "good" (``answer``); killed after the block if it still runs. For what only a real process shows: signals."""
    import subprocess
    import sys
    import time
    from contextlib import contextmanager

    import httpx

    @contextmanager
    def serve(*arguments):
        process = subprocess.Popen([sys.executable, "-m", "attnclf", "serve", *arguments, "--port", "0"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            serving = process.stdout.readline()
            serving = json.loads(serving)["message"] if serving.startswith("{") else serving
            url = serving.split(" on ", 1)[1].split(" ", 1)[0]  # "serving RUN (torch) on URL ..."
            deadline = time.monotonic() + 120
            while True:
                try:
                    answer = httpx.post(f"{url}/predict", json={"text": "good"}, timeout=30)
                    break
                except httpx.TransportError:
                    assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
                    time.sleep(0.2)
            yield process, url, answer
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()

    return serve


@pytest.fixture
def files_but_the_lock():
    """``files_but_the_lock(folder)``: every file under ``folder`` by its path, and its bytes, but the lock file a
    holder keeps there (``rundir.LOCK_FILE``): what a command refused by that holder must leave as it was."""
    from attnclf.rundir import LOCK_FILE

    def contents(folder) -> dict[str, bytes]:
        folder = Path(folder)
        return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*"))
                if path.is_file() and path.name != LOCK_FILE}

    return contents


@pytest.fixture
def mangle():
    """``mangle(path, edit)``: a run's metrics.json or history.jsonl as a hand edit or a crash leaves it. ``edit``
    changes the file's content in place (metrics.json's object; history.jsonl's list of lines), or is "truncated":
    the file cut short half-way, as a crash or a full disk leaves a file written in place."""

    def edit_file(path: Path, edit) -> None:
        text = path.read_text()
        if edit == "truncated":  # (half-way through the middle line: a cut at a line's end would leave whole lines)
            start = text.rfind("\n", 0, len(text) // 2) + 1
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            path.write_text(text[: (start + end) // 2])
        elif path.suffix == ".jsonl":
            lines = [json.loads(line) for line in text.splitlines()]
            edit(lines)
            path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        else:
            content = json.loads(text)
            edit(content)
            path.write_text(json.dumps(content))

    return edit_file


@pytest.fixture
def cli_error(capsys):
    """``cli_error(argv)``: the error `attnclf ARGV` stops with, checked to be status 2 and one line, without its
    ``attnclf: error:`` prefix."""
    from attnclf.cli import main

    def error_of(argv: list[str]) -> str:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("attnclf: error: ") and "\n" not in err, err
        return err.removeprefix("attnclf: error: ")

    return error_of


@pytest.fixture
def recorded_before():
    """``recorded_before(folder, setting)``: the run's config.json (or a pretraining's pretrain.json) as attnclf wrote
    it before ``setting`` was a cleaning setting: its tokenizer cleaning without that field and those added after it
    (``CLEANING_ADDED``)."""
    from attnclf.text.cleaning import CLEANING_ADDED

    def recorded_so(folder, setting: str) -> None:
        pretraining = Path(folder) / "pretrain.json"
        record_file = pretraining if pretraining.is_file() else Path(folder) / "config.json"
        record = json.loads(record_file.read_text())
        tokenizer = record["tokenizer"] if record_file == pretraining else record["settings"]["tokenizer"]
        added = list(CLEANING_ADDED)
        for name in added[added.index(setting):]:
            tokenizer["cleaning"].pop(name, None)  # (a pretraining records none at its old value)
        record_file.write_text(json.dumps(record))

    return recorded_so
