"""The HTTP service: `attnclf serve` on a free localhost port, exercised by a real HTTP client."""

import asyncio
import gzip
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import numpy as np
import pytest

from attnclf.classifier import Classifier
from attnclf.cli import main
from attnclf.serve import Batcher
from conftest import docs_tables, explains_as_to_dict, undescribed

LIMITS = ["--max-batch", "4", "--max-explain-batch", "2", "--max-text-chars", "300", "--max-body-bytes", "4000"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _running(server, before_stop=lambda: None):
    """``server`` (a ``uvicorn.Server``) serving on a free localhost port in a thread; yields the port. On leaving,
    ``before_stop`` runs (to free a model a test holds, which the server's stop would wait for), then the server
    stops."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)  # clients may connect now: the server accepts them once it has started
        thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]})
        thread.start()
        try:
            yield listener.getsockname()[1]
        finally:
            before_stop()
            server.should_exit = True
            thread.join(30)


@pytest.fixture(scope="module")
def server(demo_run):
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "attnclf", "serve", str(demo_run), "--port", str(port),
                                "--device", "cpu", *LIMITS], stderr=subprocess.PIPE, text=True,
                               stdout=subprocess.DEVNULL)  # (its access log: a pipe nobody reads would fill, and block it)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"server exited with {process.returncode}: {process.stderr.read()}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("server did not answer /health within 120 s")
            time.sleep(0.2)
        with httpx.Client(base_url=url, timeout=30) as client:
            yield client
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stderr.close()


@pytest.fixture(scope="module")
def local(demo_run):
    return Classifier.load(demo_run, device="cpu")


class _Held:
    """``classifier`` whose ``method`` (``predict``, ``explain``) holds each call in the model until ``release`` is
    set (30 s at most), setting ``arrived`` as a call comes: requests that come meanwhile stay in flight."""

    def __init__(self, classifier, method: str):
        self._classifier, self._method = classifier, method
        self.arrived, self.release = threading.Event(), threading.Event()

    def __getattr__(self, name):
        attribute = getattr(self._classifier, name)
        if name != self._method:
            return attribute

        def held(*args, **options):
            self.arrived.set()
            self.release.wait(30)
            return attribute(*args, **options)

        return held


def test_a_port_in_use_is_a_one_line_error_before_the_model_loads(demo_run, capsys, monkeypatch):
    import uvicorn

    from attnclf import ensemble

    def never(*args, **kwargs):  # a regression must fail here, not serve forever
        raise AssertionError("uvicorn was started on a port in use")

    def not_yet(*args, **kwargs):  # a large run's load took seconds before the port was found taken
        raise AssertionError("the model was loaded before the port was checked")

    monkeypatch.setattr(uvicorn.Server, "run", never)
    monkeypatch.setattr(ensemble, "load_backend", not_yet)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", str(demo_run), "--port", str(port), "--device", "cpu"]) == 2
    captured = capsys.readouterr()
    assert f"cannot listen on 127.0.0.1:{port}" in captured.err and captured.err.count("\n") == 1
    assert "serving" not in captured.out


def test_health_model_and_docs(server, local):
    assert server.get("/health").json()["status"] == "ok"
    info = server.get("/model").json()
    assert info["labels"] == local.label_names
    assert info["multi_label"] is False and info["thresholds"] is None  # (one label a text: no per-label cuts)
    assert info["model"]["name"] == "self-attn" and info["model"]["config"]["d_model"] == 32
    assert info["limits"]["max_batch"] == 4 and info["limits"]["max_body_bytes"] == 4000
    assert "attention" in info["explain_methods"] and info["explain_default"] == "occlusion" and info["version"]
    assert info["explain_pooling_attention"] is True  # /explain answers carry the pooling weights beside the scores
    assert info["windows"] is None and info["tokenizer"]["truncation"] in ("head", "tail", "head_tail")
    paths = server.get("/openapi.json").json()["paths"]
    assert {"/predict", "/explain", "/health", "/model"} <= set(paths)
    assert info["refit"] is None  # the demo run is a validated run, not a refit
    assert info["text_columns"] is None  # a dataset's texts: one text per text, as the service is sent them
    assert info["temperatures"] == [1.0]  # not calibrated
    # The docs page is this process's own: it lists the endpoints and loads nothing from elsewhere.
    docs = server.get("/docs")
    assert docs.headers["content-type"].startswith("text/html")
    assert "POST /predict" in docs.text and "texts" in docs.text and "curl -X POST" in docs.text
    assert "<script" not in docs.text and "://cdn" not in docs.text and "jsdelivr" not in docs.text
    assert server.get("/redoc").status_code == 404


def test_openapi_json_describes_every_body_and_field(server):
    schema = server.get("/openapi.json").json()
    assert undescribed(schema) == []  # (the answers' bodies too: /explain's explanations, each field of them)
    # /explain's answer has a schema, as /predict's has: a client generated from it gets typed explanations.
    answered = {path: schema["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
                for path in ("/predict", "/explain")}
    assert answered == {"/predict": {"$ref": "#/components/schemas/PredictResponse"},
                        "/explain": {"$ref": "#/components/schemas/ExplainResponse"}}
    assert {"ExplanationOut", "PoolingAttentionOut"} <= set(schema["components"]["schemas"])
    # (OpenAPI's descriptions are CommonMark, where Python's ``name`` shows its backticks; /docs shows the text as is)
    assert "``" not in json.dumps(schema)


def test_explain_answers_what_to_dict_gives_byte_for_byte_as_its_schema_describes(local):
    from fastapi.testclient import TestClient

    from attnclf.explain.explanation import explain_each
    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits

    # The keys the demo run's answers hold: the pooling weights beside, integrated gradients' completeness, a text cut
    # at max_len, unknown words past a quarter (a note, not null), none of them (attention asked); and scores such as
    # 3.2e-06, which FastAPI's own writing of a response model spells 3.2e-6.
    unknown, long = "zzq xxv qqz good", " ".join(["good film not bad"] * 40)
    negative = local.label_names[0]
    with TestClient(create_app(local, ServeLimits(max_explain_batch=4))) as client:
        explains_as_to_dict(client, {"text": "not good"}, local.explain(["not good"]))
        explains_as_to_dict(client, {"texts": [unknown, long], "method": ["integrated-gradients", "grad-input"]},
                            explain_each(local, [unknown, long], ["integrated-gradients", "grad-input"]))
        explains_as_to_dict(client, {"text": "not good", "method": ["occlusion", "attention"], "target": negative},
                            explain_each(local, ["not good"], ["occlusion", "attention"], target=negative))
        explains_as_to_dict(client, {"text": long, "method": "attention", "target": 1},
                            local.explain([long], method="attention", target=1))


def test_the_explanation_schema_keeps_every_key_to_dict_gives_in_its_order_and_its_numbers_as_written():
    from starlette.responses import JSONResponse

    from attnclf.explain.explanation import Explanation
    from attnclf.serve.schemas import ExplainResponse

    # What the demo run's answers cannot show: a model's branches, a cut not counted (null), a multi-label run's
    # label set, none predicted.
    single = Explanation("a b", ["a", "b"], [1e-05, -0.5], "integrated-gradients", "x", "y", 0.25,
                         {"x": 0.75, "y": 0.25}, completeness_error=3.2e-06, log_odds_change=-1.5, steps=48,
                         branch_margins={"attention": 0.5, "n-gram": -2e-07}, tokens_cut=None, cut_at=0,
                         pooling_attention=[0.75, 0.25], unknown_tokens=2)
    multi = Explanation("a", ["a"], [0.5], "occlusion", None, "y", 0.5, {"x": 0.5, "y": 0.5}, tokens_cut=7, cut_at=1,
                        unknown_tokens=0, labels=[])
    for explanation in (single, multi):
        answer = {"explanations": [explanation.to_dict()]}
        # (as /explain writes its answer: validated, then dumped without the fields it was not given)
        written = ExplainResponse.model_validate(answer).model_dump(mode="json", exclude_unset=True)
        assert JSONResponse(written).body == JSONResponse(answer).body


def test_the_explanation_schema_says_which_kind_of_run_sends_label_and_which_labels(server):
    # Both are optional fields of one model: the schema says which run sends which, and that one of them is always
    # there. (The answers of both kinds hold just one: explains_as_to_dict, here and in test_multilabel.py.)
    schema = server.get("/openapi.json").json()["components"]["schemas"]["ExplanationOut"]
    assert schema["properties"]["label"]["description"].startswith("a single-label run's only (a multi-label run's "
                                                                    "has labels in its place)")
    assert schema["properties"]["labels"]["description"].startswith("a multi-label run's only (a single-label run's "
                                                                     "has label in its place)")
    assert schema["oneOf"] == [{"required": ["label"]}, {"required": ["labels"]}]
    assert not {"label", "labels"} & set(schema["required"])


def test_docs_shows_each_fields_meaning_and_the_limit_that_bounds_it(server):
    docs = server.get("/docs")
    assert docs.status_code == 200 and docs.headers["content-type"].startswith("text/html")
    tables = docs_tables(docs.text)
    assert {"POST /predict", "POST /explain", "GET /health", "GET /model"} <= set(tables)
    predicted, explained = (tables[route]["request"] for route in ("POST /predict", "POST /explain"))
    assert list(predicted) == ["texts", "text"] and list(explained) == ["texts", "text", "method", "target"]
    assert all(meaning for route in tables.values() for fields in route.values() for meaning in fields.values())
    # Each limit named by its setting (the flag and GET /model's name), not by a number the flag changes.
    assert "--max-batch" in predicted["texts"] and "--max-explain-batch" in explained["texts"]
    assert all("--max-text-chars" in meaning for meaning in (predicted["texts"], predicted["text"], explained["text"]))
    assert "limits.max_batch" in predicted["texts"] and not re.search(r"\d", predicted["texts"] + predicted["text"])


def test_docs_shows_each_routes_answer_fields_and_their_meaning_a_nested_models_by_its_path(server):
    page = server.get("/docs").text
    tables = docs_tables(page)
    schemas = server.get("/openapi.json").json()["components"]["schemas"]
    meaning = {model: {name: field["description"] for name, field in schemas[model]["properties"].items()}
               for model in ("PredictResponse", "PredictionOut", "ExplainResponse", "ExplanationOut",
                             "PoolingAttentionOut")}
    predicted = tables["POST /predict"]["answer (200)"]
    assert predicted == {"predictions": meaning["PredictResponse"]["predictions"],
                         **{f"predictions[].{name}": said for name, said in meaning["PredictionOut"].items()}}
    explained = tables["POST /explain"]["answer (200)"]
    assert list(explained)[:3] == ["explanations", "explanations[].text", "explanations[].method"]
    assert explained["explanations[].scores"] == meaning["ExplanationOut"]["scores"]
    assert explained["explanations[].pooling_attention"] == meaning["ExplanationOut"]["pooling_attention"]
    pooling = "explanations[].pooling_attention."
    assert {name: said for name, said in explained.items() if name.startswith(pooling)} \
        == {pooling + name: said for name, said in meaning["PoolingAttentionOut"].items()}
    # A route whose answer has no schema (GET /health's, GET /model's) still shows what it does and its curl line.
    assert tables["GET /health"] == {} and tables["GET /model"] == {}
    assert re.search(r"<h2><code>GET /health</code></h2><p>Liveness and readiness[^<]*</p><pre>curl http://[^<]*/health"
                     r"</pre>", page)


def test_docs_page_follows_a_model_holding_itself_one_level_escapes_its_texts_and_shows_a_route_without_answers():
    from attnclf.serve.app import docs_page

    # A model that holds itself (a tree) is followed one level down, not for ever; the schema's texts escaped.
    node = {"$ref": "#/components/schemas/Node"}
    openapi = {"info": {"title": "t", "version": "1"},
               "components": {"schemas": {"Node": {"properties": {
                   "<b>": {"type": "string", "description": "<script>alert(1)</script>"},
                   "children": {"type": "array", "items": node, "description": "below"}}}}},
               "paths": {"/tree": {"get": {"summary": "Tree", "responses": {"200": {"content": {
                   "application/json": {"schema": node}}}}}},
                         "/gone": {"delete": {"summary": "Gone", "responses": {"204": {"description": "none"}}}},
                         "/up": {"get": {"summary": "Up"}}}}
    page = docs_page(openapi, "http://127.0.0.1:8000")
    assert docs_tables(page) == {"GET /tree": {"answer (200)": {"<b>": "<script>alert(1)</script>",
                                                                "children": "below",
                                                                "children[].<b>": "<script>alert(1)</script>",
                                                                "children[].children": "below"}},
                                 "DELETE /gone": {}, "GET /up": {}}
    assert "<script" not in page and "<b>" not in page
    assert "<td><code>children</code></td><td>array of object</td>" in page  # (a list of a model: no type of its own)
    assert "curl -X DELETE http://127.0.0.1:8000/gone" in page and "curl http://127.0.0.1:8000/up" in page


def test_docs_types_say_which_answer_fields_may_be_null_and_what_a_mapping_holds(server):
    # (an answer's tokens_cut read "integer" though it is null where not counted; probabilities read "object")
    rows = {}
    for row in re.findall(r"<tr><td><code>(.*?)</code></td><td>(.*?)</td>", server.get("/docs").text):
        rows.setdefault(row[0], row[1])
    assert rows["predictions[].probabilities"] == "object of number"
    assert rows["explanations[].tokens_cut"] == "integer or null"
    assert rows["explanations[].unknown_note"] == "string or null"
    assert rows["explanations[].tokens"] == "array of string" and rows["predictions[].label"] == "string"


def test_predict_one_text_or_a_batch_gives_the_library_s_answer(server, local):
    texts = ["the plot was not good", "great acting", "dull but the ending was wonderful"]
    expected = local.predict_proba(texts)
    batch = server.post("/predict", json={"texts": texts}).json()["predictions"]
    one = server.post("/predict", json={"text": texts[0]}).json()["predictions"]
    assert len(batch) == 3 and len(one) == 1 and one[0]["label"] == batch[0]["label"]
    for row, answer in zip(expected, batch):
        assert answer["label"] == local.label_names[row.argmax()]
        np.testing.assert_allclose([answer["probabilities"][n] for n in local.label_names], row, atol=1e-6)


def test_predict_counts_no_token_read_of_an_empty_text_as_the_library_does(server, local):
    # (the model reads one <unk> in an empty text's place: it was counted as one unknown token of one read)
    texts = ["", "  ", "zorbly"]
    answers = server.post("/predict", json={"texts": texts}).json()["predictions"]
    assert [(a["unknown_tokens"], a["tokens_read"]) for a in answers] == [(0, 0), (0, 0), (1, 1)]
    assert [(p.unknown_tokens, p.tokens_read) for p in local.predict(texts, tokens=False)] == [(0, 0), (0, 0), (1, 1)]


def test_predict_counts_the_tokens_the_model_does_not_know_as_the_library_does(server, local):
    texts = ["the plot was awesome and amazing", "the plot was not good"]
    answers = server.post("/predict", json={"texts": texts}).json()["predictions"]
    assert [(a["unknown_tokens"], a["tokens_read"]) for a in answers] == [(3, 6), (0, 5)]
    assert [(p.unknown_tokens, p.tokens_read) for p in local.predict(texts)] == [(3, 6), (0, 5)]
    bare = local.predict(texts, tokens=False)  # what /predict asks for: the counts without the token strings
    assert [(p.unknown_tokens, p.tokens, p.attention) for p in bare] == [(3, [], None), (0, [], None)]
    assert [p.probabilities for p in bare] == [p.probabilities for p in local.predict(texts)]
    # Documented as the integers every backend answers, never null; a windowed run reads past max_len.
    fields = server.get("/openapi.json").json()["components"]["schemas"]["PredictionOut"]["properties"]
    assert [fields[name]["type"] for name in ("unknown_tokens", "tokens_read")] == ["integer", "integer"]
    assert "windows" in fields["tokens_read"]["description"]


def test_explain_delegates_to_the_classifier(server, local):
    answer = server.post("/explain", json={"texts": ["not good"], "method": "attention"}).json()["explanations"][0]
    assert answer["tokens"] == ["not", "good"] and answer["method"] == "attention"
    assert sum(answer["scores"]) == pytest.approx(1.0, abs=1e-5)  # pooling weights over real tokens
    assert answer["description"].startswith("where the pooling layer looked")
    occlusion = server.post("/explain", json={"text": "not good", "method": "occlusion"}).json()["explanations"]
    assert occlusion[0]["scores"] == pytest.approx(local.explain(["not good"], method="occlusion")[0].scores,
                                                   abs=1e-5)
    assert "pooling_attention" not in answer  # attention asked for: its weights are the scores


def test_explain_by_default_answers_occlusion_with_the_pooling_attention_beside(server, local):
    (answer,) = server.post("/explain", json={"text": "not good"}).json()["explanations"]
    assert answer["method"] == "occlusion" and answer["description"].startswith("drop in the class probability")
    (weights,) = local.explain(["not good"], method="attention")
    beside = answer["pooling_attention"]
    assert beside["weights"] == pytest.approx(weights.scores, abs=1e-5) and beside["per_class"] is False
    assert beside["description"].endswith("the same for every class") and beside["uniform_weight"] == 0.5
    schema = server.get("/openapi.json").json()["components"]["schemas"]["ExplainRequest"]
    described = schema["properties"]["method"]["description"]
    assert "(default: occlusion)" in described and "pooling_attention (the same for every class)" in described
    about = server.get("/openapi.json").json()["info"]["description"]
    assert about.startswith("Text classifier (self-attn). Its attention weights show where the pooling layer looked")


def test_explain_takes_several_methods_in_one_request_grouped_by_text(server, local):
    # A notebook comparing methods sent one request per method; the CLI's --method took several.
    body = {"texts": ["not good"], "method": ["occlusion", "attention"], "target": 0}
    response = server.post("/explain", json=body)
    assert response.status_code == 200, response.text
    answers = response.json()["explanations"]
    assert [answer["method"] for answer in answers] == ["occlusion", "attention"]
    for answer in answers:
        (expected,) = local.explain(["not good"], method=answer["method"], target=0)
        assert answer["scores"] == pytest.approx(expected.scores, abs=1e-5)
    # Attention asked for is its own answer, as in the CLI: beside occlusion too, it would only repeat it.
    assert "pooling_attention" not in answers[0]
    # A list of one method answers as the string does, the pooling attention beside.
    one = {"text": "not good", "method": "grad-input"}
    assert server.post("/explain", json=one | {"method": ["grad-input"]}).json() == server.post("/explain",
                                                                                               json=one).json()


def test_explain_all_methods_answers_every_one_the_model_offers_text_by_text(local):
    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits

    with TestClient(create_app(local, ServeLimits(max_explain_batch=10))) as client:  # (2 texts x 5 methods)
        offered = client.get("/model").json()["explain_methods"]
        response = client.post("/explain", json={"texts": ["not good", "great"], "method": "all"})
    assert response.status_code == 200, response.text
    assert [answer["method"] for answer in response.json()["explanations"]] == offered * 2  # grouped by text
    assert [answer["tokens"][0] for answer in response.json()["explanations"]] == ["not"] * 5 + ["great"] * 5



def test_explain_all_in_a_list_of_its_own_answers_as_all_does(local):
    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app

    # A client building the list from its own choices sends ["all"]: that was refused as an unknown method.
    asked = {"text": "good", "method": "all"}
    with TestClient(create_app(local)) as client:
        response = client.post("/explain", json=asked | {"method": ["all"]})
        assert response.status_code == 200, response.text
        assert response.json() == client.post("/explain", json=asked).json()

@pytest.mark.parametrize("method, status, detail", [
    (["occlusion", "tea-leaves"], 400, "unknown explanation method 'tea-leaves'; choose one of attention, "
                                       "rollout, grad-input, integrated-gradients, occlusion, or all"),
    (["occlusion", "attention", "occlusion"], 400, "method names 'occlusion' twice"),
    ([], 400, "method is empty"),
    # (it said "unknown method 'all'; choose from ... or all": all was never unknown)
    (["occlusion", "all"], 400, "method names all among other methods: all alone names every one"),
    (["occlusion", 5], 422, "method: a method name, a list of them or \"all\", not 5"),
    ({"a": 1}, 422, "method: a method name, a list of them or \"all\", not {\"a\": 1}"),
])
def test_explain_refuses_an_unknown_repeated_or_empty_method_list_in_one_line(server, method, status, detail):
    response = server.post("/explain", json={"text": "good", "method": method})
    assert response.status_code == status and response.json() == {"detail": detail}


def test_explain_bounds_texts_times_methods_by_max_explain_batch(server):
    # The cost of a request is its texts times its methods: the limit counts explanations, a text per method.
    response = server.post("/explain", json={"texts": ["good", "bad"], "method": ["occlusion", "attention"]})
    assert response.status_code == 413
    assert response.json()["detail"] == "2 texts x 2 methods = 4 explanations in one request; the limit is 2"
    assert server.post("/explain", json={"text": "good", "method": ["occlusion", "attention"]}).status_code == 200
    one = server.post("/explain", json={"text": "good", "method": ["occlusion", "attention", "grad-input"]})
    assert one.json()["detail"] == "1 text x 3 methods = 3 explanations in one request; the limit is 2"  # (not "texts")
    described = server.get("/openapi.json").json()["components"]["schemas"]["ExplainRequest"]["properties"]["method"]
    assert "texts x methods" in described["description"]
    about = server.get("/openapi.json").json()["info"]["description"]  # (what /docs says of the service)
    assert "2 explanations a request at most (texts x methods)" in about


def test_explain_takes_a_target_as_the_python_api_does_by_name_or_by_index(server, local):
    for target in (local.label_names[0], 0):  # an int is always an index into the labels, as in Classifier.explain
        response = server.post("/explain", json={"text": "not good", "method": "grad-input", "target": target})
        assert response.status_code == 200, response.text
        answer = response.json()["explanations"][0]
        expected = local.explain(["not good"], method="grad-input", target=target)[0]
        assert answer["target"] == expected.target == local.label_names[0]
        assert answer["scores"] == pytest.approx(expected.scores, abs=1e-5)
    for target, status in ((True, 422), (0.5, 422), (len(local.label_names), 400)):  # JSON true is no class index
        assert server.post("/explain", json={"text": "not good", "target": target}).status_code == status
    # One line about the field, in JSON's words (not pydantic's per-type "target.str: ...; target.int: ...")
    for target, shown in ((True, "true"), (0.5, "0.5"), ([0], "[0]")):
        response = server.post("/explain", json={"text": "not good", "target": target})
        assert response.json() == {"detail": f"target: a class name (a string) or an index into the model's labels "
                                             f"(an integer), not {shown}"}


@pytest.mark.parametrize("path, body, message", [
    ("/predict", {"texts": ["w"] * 5}, "5 texts in one request; the limit is 4"),
    ("/explain", {"texts": ["w"] * 3}, "3 texts in one request; the limit is 2"),
    ("/predict", {"texts": ["ok", "x" * 301]}, "text 1 has 301 characters; the limit is 300"),
    ("/predict", {"text": "word " * 1000}, "bytes; the limit is 4000"),
])
def test_oversized_requests_get_413_naming_the_limit(server, path, body, message):
    response = server.post(path, json=body)
    assert response.status_code == 413 and response.json()["detail"].endswith(message)


def test_an_oversized_chunked_body_is_cut_off(server):
    chunks = (b'{"text": "' + b"x" * 1000 + b'"}' if i == 0 else b" " * 1000 for i in range(6))
    response = server.post("/predict", content=chunks, headers={"content-type": "application/json"})
    assert response.status_code == 413 and "the limit is 4000" in response.json()["detail"]


def _through_body_limit(body: bytes, max_bytes: int, declared: bool, split: int | None = None) -> tuple[int, bytes]:
    """The status BodyLimit(max_bytes) answers ``body`` with, sent in two parts cut at ``split`` (None: halves; with
    its Content-Length if ``declared``, else chunked), and the body the app behind it read."""
    from attnclf.serve.limits import BodyLimit

    read, sent = [], []

    async def app(scope, receive, send):
        message = {"more_body": True}
        while message.get("more_body"):
            message = await receive()
            read.append(message.get("body", b""))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    split = len(body) // 2 if split is None else split
    parts = [body[:split], body[split:]]
    messages = iter([{"type": "http.request", "body": part, "more_body": i == 0} for i, part in enumerate(parts)])

    async def receive():
        return next(messages)

    async def send(message):
        sent.append(message)

    headers = [(b"content-length", str(len(body)).encode())] if declared else []
    scope = {"type": "http", "method": "POST", "path": "/predict", "headers": headers}
    asyncio.run(BodyLimit(app, max_bytes=max_bytes, max_seconds=5)(scope, receive, send))
    return sent[0]["status"], b"".join(read)


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_body_of_exactly_the_limit_is_read_and_one_byte_more_is_413(declared):
    # (the limit is the most a body may hold: an off-by-one would refuse a client's largest allowed request)
    assert _through_body_limit(b"x" * 40, max_bytes=40, declared=declared) == (200, b"x" * 40)
    assert _through_body_limit(b"x" * 41, max_bytes=40, declared=declared) == (413, b"")
    # A first part of exactly the limit is no whole body while more follows: not passed on cut short.
    assert _through_body_limit(b"x" * 41, max_bytes=40, declared=declared, split=40) == (413, b"")


@pytest.mark.parametrize("path", ["/predict", "/explain"])
@pytest.mark.parametrize("body, message", [
    (b"", """body: empty; send a JSON object: {"texts": ["a text", ...]} or {"text": "a text"}"""),
    (b'["a list"]', """body: Input should be a valid dictionary or object to extract fields from; send a JSON object: """
                    """{"texts": ["a text", ...]} or {"text": "a text"}"""),
    (b'{"texts": "one string"}', 'texts: Input should be a valid list; one text goes as {"text": "..."}'),
    (b'{"text": ["a", "b"]}', 'text: Input should be a valid string; several go as {"texts": [...]}'),
    # (the next step for a text where a list goes, or a list where a text goes: a number is neither, nor told so)
    (b'{"text": 5}', 'text: Input should be a valid string'),
    (b'{"texts": 5}', 'texts: Input should be a valid list'),
    (b'{"texts": {"a": "b"}}', 'texts: Input should be a valid list'),
])
def test_a_body_of_the_wrong_shape_is_told_the_shape_to_send(server, path, body, message):
    # "body: Field required" for an empty body named no next step, nor did a list of texts sent as "text"
    response = server.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json() == {"detail": message}


@pytest.mark.parametrize("body, status, message", [
    (b'{"texts": ["unclosed"', 400, "not valid JSON"),
    (b'["a list"]', 422, "valid dictionary"),
    (b'{"texts": "one string"}', 422, "texts: Input should be a valid list"),
    (b'{"texts": ["ok", 7]}', 422, "texts.1: Input should be a valid string"),
    (b'{"texts": []}', 422, "texts is empty"),
    (b'{"text": "a", "texts": ["b"]}', 422, "either 'texts'"),
    (b'{"txt": "typo"}', 422, "txt: Extra inputs are not permitted"),
    (b'{"text": "\xff"}', 400, "not JSON the server can read (malformed, not UTF-8, or nested too deep)"),
    (b'{"text": ' + b"[" * 1500 + b"]" * 1500 + b"}", 400, "not JSON the server can read"),  # valid, but too deep
])
def test_malformed_requests_get_one_line_answers(server, body, status, message):
    response = server.post("/predict", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status and message in response.json()["detail"]


@pytest.mark.parametrize("options", [{"data": {"text": "good"}}, {"content": b'{"text": "good"}',
                                                                  "headers": {"content-type": "text/plain"}}])
def test_a_body_that_is_not_sent_as_json_gets_415_naming_the_content_type(server, options):
    response = server.post("/predict", **options)
    media = options.get("headers", {}).get("content-type", "application/x-www-form-urlencoded")
    assert response.status_code == 415 and response.json()["detail"].endswith(f"application/json, not {media}")
    assert server.post("/predict", content=b'{"text": "good"}',
                       headers={"content-type": "application/json; charset=utf-8"}).status_code == 200
    assert server.post("/predict", content=b'{"text": "good"}').status_code == 200  # no Content-Type: read as JSON
    assert server.post("/predict", content=b'{"text": "good"}', headers={"content-type": ""}).status_code == 200
    assert server.post("/health", **options).status_code == 405  # routes without a body answer as they did
    assert server.post("/nowhere", **options).status_code == 404


@pytest.mark.parametrize("path", ["/predict", "/explain"])
def test_a_compressed_body_gets_415_naming_its_content_encoding(server, path):
    # A gzipped body was read as it came, and answered 400 "not JSON the server can read": the client, whose JSON was
    # sound, was told nothing of the encoding the server does not decode.
    body = gzip.compress(b'{"text": "good"}')
    response = server.post(path, content=body, headers={"content-type": "application/json",
                                                        "content-encoding": "gzip"})
    assert response.status_code == 415 and response.headers["accept-encoding"] == "identity"
    assert response.json()["detail"] == ("the body is sent with Content-Encoding: gzip, which this server does not "
                                         "decode: send it uncompressed")
    layered = server.post(path, content=body, headers={"content-type": "application/json",
                                                       "content-encoding": "identity, br"})
    assert layered.status_code == 415 and "Content-Encoding: br," in layered.json()["detail"]
    assert server.post("/predict", content=b'{"text": "good"}', headers={"content-type": "application/json",
                                                                         "content-encoding": "identity"}
                       ).status_code == 200


def test_of_two_content_types_the_first_decides_as_it_decides_how_the_body_is_read(server):
    # The 415 looked at the last Content-Type and FastAPI reads the body by the first: text/plain then
    # application/json was let through and answered 422, "Input should be a valid dictionary", of a sound body.
    def sent(*media):
        request = server.build_request("POST", "/predict", content=b'{"text": "good"}')
        request.headers = httpx.Headers([(name, value) for name, value in request.headers.multi_items()
                                         if name != "content-type"] + [("content-type", each) for each in media])
        return server.send(request)

    refused = sent("text/plain", "application/json")
    assert refused.status_code == 415 and refused.json()["detail"].endswith("application/json, not text/plain")
    assert sent("application/json", "text/plain").status_code == 200


def test_a_huge_content_type_is_echoed_by_its_start_only(server):
    # The 415 named the request's Content-Type whole: kilobytes of a header came back in one error line.
    media = "text/" + "x" * 5000
    response = server.post("/predict", content=b'{"text": "good"}', headers={"content-type": media})
    assert response.status_code == 415
    assert response.json()["detail"] == ("send the body as JSON with Content-Type: application/json, not "
                                         f"{media[:40]}...")


def test_port_0_serves_on_the_port_it_announces_and_one_connection_is_served(demo_run):
    process = subprocess.Popen([sys.executable, "-m", "attnclf", "serve", str(demo_run), "--port", "0", "--device",
                                "cpu", "--max-connections", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        announced = process.stdout.readline()  # printed once the port is known, before the model serves
        url = announced.split(" on ", 1)[1].split(" ", 1)[0]
        assert not url.endswith(":0"), announced
        deadline = time.monotonic() + 120
        while True:
            try:
                response = httpx.get(f"{url}/health", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
                time.sleep(0.2)
        assert response.status_code == 200  # --max-connections 1 serves one at a time, not none
        assert httpx.post(f"{url}/predict", json={"text": "good"}, timeout=30).status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stdout.close()
        process.stderr.close()


def test_bad_explain_method_is_a_400_and_the_server_lives_on(server):
    response = server.post("/explain", json={"text": "good", "method": "tea-leaves"})
    assert response.status_code == 400 and "unknown explanation method 'tea-leaves'" in response.json()["detail"]
    # A long method, or a target of the wrong type, is named by its start, not echoed whole: the body may hold
    # a megabyte of it (this server's limit is 4000 bytes).
    for body in ({"method": "x" * 3000}, {"target": ["x" * 3000]}, {"x" * 3000: 1}):
        response = server.post("/explain", json={"text": "good", **body})
        assert response.status_code in (400, 422) and "xxxxxxxx" in response.text and len(response.text) < 400, \
            response.text[:300]
    assert server.post("/predict", json={"text": "good"}).status_code == 200


@pytest.mark.parametrize("method, path, status, detail", [
    ("GET", "/predict", 405, "'GET' is not allowed on '/predict', which takes POST (see /docs)"),
    ("POST", "/health", 405, "'POST' is not allowed on '/health', which takes GET, HEAD (see /docs)"),
    ("DELETE", "/model", 405, "'DELETE' is not allowed on '/model', which takes GET, HEAD (see /docs)"),
    ("PUT", "/openapi.json", 405, "'PUT' is not allowed on '/openapi.json', which takes GET, HEAD (see /docs)"),
    ("GET", "/predcit", 404, "no route '/predcit': /docs lists the API's routes"),
    ("GET", "/nope%0Afake%20200", 404, "no route '/nope\\nfake 200': /docs lists the API's routes"),
])
def test_a_wrong_method_or_path_is_told_what_it_asked_and_what_the_route_takes(server, method, path, status, detail):
    # Starlette's "Method Not Allowed" and "Not Found" named neither: `curl URL/predict`, a GET, was told the first
    # alone. (A path is quoted, escaped: it is the client's, and the access log writes the detail on its line.)
    response = server.request(method, path)
    assert (response.status_code, response.json()) == (status, {"detail": detail})
    if status == 405:  # (HEAD too where GET is: every GET route answers it)
        assert f"which takes {response.headers['allow']} (" in detail


def test_concurrent_requests_all_get_their_own_answers(server, local):
    texts = [f"{word} film" for word in ("great", "dull", "not good", "wonderful", "boring", "not bad")] * 4
    before = server.get("/health").json()
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda t: server.post("/predict", json={"text": t}), texts))
    assert all(a.status_code == 200 for a in answers)
    expected = local.predict_proba(texts)
    got = np.array([[a.json()["predictions"][0]["probabilities"][n] for n in local.label_names] for a in answers])
    np.testing.assert_allclose(got, expected, atol=1e-5)  # batching with strangers changes no answer
    after = server.get("/health").json()
    assert after["requests"] - before["requests"] == len(texts)
    assert 0 < after["batches"] - before["batches"] <= len(texts)


def test_predictions_are_not_held_up_by_a_slow_explanation(local):
    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app

    slow_to_explain = _Held(local, "explain")  # an occlusion of long texts, say

    with TestClient(create_app(slow_to_explain)) as client, ThreadPoolExecutor(1) as pool:
        pending = pool.submit(client.post, "/explain", json={"text": "good"})
        time.sleep(0.3)  # the explanation is being worked on
        started = time.monotonic()
        assert client.post("/predict", json={"text": "good"}).status_code == 200
        assert time.monotonic() - started < 10 and not pending.done()
        slow_to_explain.release.set()
        assert pending.result().status_code == 200


def test_explanations_hold_at_most_half_the_requests_in_flight_and_predictions_get_the_rest(local):
    # Explanations run one at a time, and those waiting their turn held places among the requests in flight as
    # predictions do: a queue of slow ones (an occlusion of long texts takes seconds) shut every prediction out.
    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits

    slow_to_explain = _Held(local, "explain")
    with TestClient(create_app(slow_to_explain, ServeLimits(max_connections=4))) as client, \
            ThreadPoolExecutor(2) as pool:
        pending = [pool.submit(client.post, "/explain", json={"text": "good"}) for _ in range(2)]
        assert slow_to_explain.arrived.wait(30)
        time.sleep(0.5)  # one explained, the other waiting for its turn
        refused = client.post("/explain", json={"text": "good"})
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert refused.json()["detail"] == ("the server is busy: 2 explanations in flight, the most it holds at once "
                                            "(half its requests in flight); retry after 1 s")
        assert [client.post("/predict", json={"text": "good"}).status_code for _ in range(3)] == [200] * 3
        slow_to_explain.release.set()
        assert [future.result().status_code for future in pending] == [200, 200]
        assert client.post("/explain", json={"text": "good"}).status_code == 200  # its places given back


@pytest.mark.parametrize("body, detail", [
    ({"text": "good", "method": "occlusoin"}, "unknown explanation method 'occlusoin' (did you mean 'occlusion'?); "
                                              "choose one of attention, rollout, grad-input, integrated-gradients, "
                                              "occlusion"),
    ({"text": "good", "target": "postive"}, "unknown target class 'postive' (did you mean 'positive'?); the classes "
                                            "are 'negative', 'positive'"),
    ({"text": "good", "target": 2}, "unknown target class 2; give a label name ('negative', 'positive') or an index "
                                    "from 0 to 1"),
])
def test_a_mistyped_method_or_target_is_refused_at_once_not_after_the_explanations_ahead(local, body, detail):
    # One method by name and the target were checked as the explanation began: a typo waited out every explanation
    # queued ahead (seconds each), or with the queue full was told 503, busy, and to retry what would fail again.
    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits

    slow_to_explain = _Held(local, "explain")
    with TestClient(create_app(slow_to_explain, ServeLimits(max_connections=2))) as client, \
            ThreadPoolExecutor(1) as pool:
        pending = pool.submit(client.post, "/explain", json={"text": "good"})
        assert slow_to_explain.arrived.wait(30)  # the one explanation slot is taken
        refused = client.post("/explain", json=body)
        assert (refused.status_code, refused.json()) == (400, {"detail": detail})
        assert not pending.done()
        slow_to_explain.release.set()
        assert pending.result().status_code == 200
        again = client.post("/explain", json=body)  # (nothing queued: answered as it always was)
        assert (again.status_code, again.json()) == (400, {"detail": detail})


def test_past_the_limit_a_request_gets_a_json_503_with_retry_after_at_once_and_health_still_answers(local):
    from concurrent.futures import as_completed

    import uvicorn

    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import _uvicorn_options

    limit, extra = 3, 4
    held = _Held(local, "predict")  # the first batch, until released
    arrived, release = held.arrived, held.release

    server = uvicorn.Server(uvicorn.Config(create_app(held, ServeLimits(max_connections=limit)),
                                           **_uvicorn_options(ServeLimits(max_connections=limit))))
    with ThreadPoolExecutor(limit + extra) as pool, _running(server, before_stop=release.set) as port, \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        first = pool.submit(client.post, "/predict", json={"text": "good"})
        assert arrived.wait(60), "the first request never reached the model"
        others = [pool.submit(client.post, "/predict", json={"text": f"not good {i}"})
                  for i in range(limit - 1 + extra)]
        # limit - 1 of them join the first in flight and wait with it; the rest are answered at once.
        refused = [future.result() for _, future in zip(range(extra), as_completed(others, timeout=30))]
        for response in refused:
            assert response.status_code == 503 and response.headers["retry-after"] == "1"
            assert response.json() == {"detail": f"the server is busy: {limit} requests in flight, the "
                                                 f"most it serves at once; retry after 1 s"}
        assert sum(not future.done() for future in others) == limit - 1 and not first.done()
        assert client.get("/health").status_code == 200 and client.head("/health").status_code == 200
        release.set()
        served = [first.result()] + [future.result() for future in others if future.result() not in refused]
        assert [response.status_code for response in served] == [200] * limit
        texts = [response.request.read().decode() for response in served]
        for text, response in zip(texts, served):  # each got its own text's answer
            expected = local.predict_proba([json.loads(text)["text"]])[0]
            got = response.json()["predictions"][0]["probabilities"]
            np.testing.assert_allclose([got[name] for name in local.label_names], expected, atol=1e-6)
        # Every slot is given back, by a request refused for its body as by one served.
        for _ in range(limit + 1):
            assert client.post("/predict", json={"texts": []}).status_code == 422
        assert client.post("/predict", json={"text": "good"}).status_code == 200


def test_a_request_stopping_cuts_off_is_answered_a_json_503_not_a_500_and_logs_no_traceback(local):
    """Ctrl-C or SIGTERM while an occlusion runs: uvicorn cancels what its graceful shutdown could not finish. The
    client must get an answer it can act on (retry elsewhere), and the log one line, not an ASGI traceback."""
    import logging

    import uvicorn

    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import StopAnnouncingServer, _uvicorn_options

    slow_to_explain = _Held(local, "explain")  # for longer than the graceful shutdown waits
    arrived, release = slow_to_explain.arrived, slow_to_explain.release

    limits = ServeLimits(stop_seconds=1)
    announced: list[str] = []
    server = StopAnnouncingServer(uvicorn.Config(create_app(slow_to_explain, limits), **_uvicorn_options(limits)),
                                  write=lambda event, line: announced.append(line))
    logged: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = logged.append
    logging.getLogger("uvicorn.error").addHandler(handler)  # (after Config, whose logging setup would remove it)
    try:
        with ThreadPoolExecutor(1) as pool, _running(server, before_stop=release.set) as port, \
                httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            pending = pool.submit(client.post, "/explain", json={"text": "good"})
            assert arrived.wait(60), "the explanation never started"
            server.should_exit = True  # as SIGTERM sets it
            response = pending.result(timeout=30)
    finally:
        logging.getLogger("uvicorn.error").removeHandler(handler)
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    assert response.json() == {"detail": "the server is stopping: this request was cut off unfinished; retry it "
                                         "(here once the server is back, or on another)"}
    assert not [record for record in logged if record.exc_info], "a traceback was logged"
    # The log says the stop began, what it waited for, and that it ended (not a crash).
    assert announced == ["stopping: waiting up to 1 s for 1 request in flight",
                         "stopped after serving 1 request (/health included)"]


def test_a_request_the_stop_cuts_off_mid_body_is_logged_before_the_stop_says_it_has_ended(local):
    """A request cut off while its body was still arriving (``BodyLimit``'s wait) answered its 503 a few turns of the
    loop after the cancel, and its line came after "stopped", which a log reader takes for the last word."""
    import uvicorn

    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import StopAnnouncingServer, _uvicorn_options

    limits = ServeLimits(stop_seconds=1)
    logged: list[str] = []
    app = create_app(local, limits, access_log=logged.append)
    server = StopAnnouncingServer(uvicorn.Config(app, **_uvicorn_options(limits)),
                                  write=lambda event, line: logged.append(line))
    with _running(server) as port, socket.create_connection(("127.0.0.1", port), timeout=30) as client:
        client.sendall(b"POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
                       b"Content-Length: 30\r\n\r\n{\"text\":")
        deadline = time.monotonic() + 30
        while not server.server_state.tasks and time.monotonic() < deadline:  # (its head read: the request runs)
            time.sleep(0.05)
        server.should_exit = True  # as SIGTERM sets it, the client still connected
        while not any(line.startswith("stopped") for line in logged) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # (a line the cut-off request writes late)
    assert logged[-1] == "stopped after serving 1 request (/health included)", logged
    assert " POST /predict 503 " in logged[-2] and "this request was cut off unfinished" in logged[-2], logged


def test_uvicorn_refuses_only_past_four_times_as_many_open_connections_as_the_app_serves(local):
    import uvicorn

    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import _uvicorn_options

    limits = ServeLimits(max_connections=1)
    server = uvicorn.Server(uvicorn.Config(create_app(local, limits), **_uvicorn_options(limits)))
    opened = []

    def close_them():
        for connection in opened:
            connection.close()

    with _running(server, before_stop=close_them) as port:
        statuses = []
        for _ in range(5):  # each kept open, idle after its answer, as a keep-alive client leaves it
            connection = socket.create_connection(("127.0.0.1", port), timeout=30)
            opened.append(connection)
            connection.sendall(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
            statuses.append(connection.recv(4096).split(b"\r\n", 1)[0])
        # README: past four times as many open connections (idle ones too) as --max-connections, uvicorn refuses.
        assert statuses == [b"HTTP/1.1 200 OK"] * 4 + [b"HTTP/1.1 503 Service Unavailable"]


def test_model_says_a_run_reads_each_text_from_several_columns_joined(tmp_path):
    # A run trained on a title and a body (--text-column twice) reads "title\nbody": a client must send them so.
    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app

    rows = "".join(f'"{title}","{body}",{label}\n' for title, body, label in
                   [("Review", "a good film", "pos"), ("", "a bad film", "neg")] * 20)
    (tmp_path / "reviews.csv").write_text("title,body,sentiment\n" + rows)
    assert main(["train", "--train-file", str(tmp_path / "reviews.csv"), "--text-column", "title", "--text-column",
                 "body", "--label-column", "sentiment", "--model", "boe", "--epochs", "1", "--min-frequency", "1",
                 "--output", str(tmp_path / "run"), "--quiet", "--no-report", "--threads", "1"]) == 0
    with TestClient(create_app(Classifier.load(tmp_path / "run", device="cpu"))) as client:
        info = client.get("/model").json()
    assert info["text_columns"] == {"names": ["title", "body"], "joined_by": "\n"}


def test_model_says_an_ag_news_run_reads_each_text_as_title_and_description_joined(demo_run, tmp_path):
    # AG News's loader joins each item's title and description ("title. description"): its run records no text
    # columns, yet a client that sends a headline alone sends what the model never read.
    import shutil

    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app

    run = shutil.copytree(demo_run, tmp_path / "run")
    config = json.loads((run / "config.json").read_text())
    config["settings"]["data"]["dataset"] = "ag_news"  # (as an ag_news run records it: training one needs the data)
    (run / "config.json").write_text(json.dumps(config))
    with TestClient(create_app(Classifier.load(run, device="cpu"))) as client:
        info = client.get("/model").json()
    assert info["text_columns"] == {"names": ["title", "description"], "joined_by": ". "}


def test_an_ag_news_run_s_onnx_export_says_so_in_its_service_s_model_as_the_run_does(demo_run, tmp_path):
    # The export holds no dataset name: unless it records the joined columns, its /model said None ("one column,
    # read whole") for a model that read "title. description".
    import shutil

    from fastapi.testclient import TestClient

    from attnclf.export import OnnxClassifier, check_data, export_onnx
    from attnclf.serve.app import create_app

    run = shutil.copytree(demo_run, tmp_path / "run", ignore=shutil.ignore_patterns("onnx"))
    config = json.loads((run / "config.json").read_text())
    config["settings"]["data"]["dataset"] = "ag_news"  # (as an ag_news run records it: training one needs the data)
    (run / "config.json").write_text(json.dumps(config))
    export_onnx(run, check=check_data(demo_run, limit=50))  # (the run's own test split would be AG News's)
    with TestClient(create_app(OnnxClassifier.load(run))) as client:
        info = client.get("/model").json()
    assert info["text_columns"] == {"names": ["title", "description"], "joined_by": ". "}


def test_one_app_serves_each_time_it_starts_and_says_when_it_has_not(local):
    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app

    app = create_app(local)
    unstarted = TestClient(app)  # (no `with`: the app's startup never ran)
    assert unstarted.post("/predict", json={"text": "good"}).status_code == 503
    assert "the app has not started" in unstarted.get("/health").json()["detail"]
    for _ in range(2):  # a shutdown ends the threads it started; the next start makes its own
        with TestClient(app) as client:
            assert client.post("/predict", json={"text": "good"}).status_code == 200
            assert client.post("/explain", json={"text": "good"}).status_code == 200
            assert client.head("/health").status_code == 200
    with warnings.catch_warnings():  # FastAPI warned of a duplicate operation id when HEAD shared GET's route
        warnings.simplefilter("error")
        assert list(create_app(local).openapi()["paths"]["/health"]) == ["get"]


def test_head_answers_as_get_does_on_every_get_route(local):
    # HEAD /model and HEAD /docs answered 405 (HTTP asks every server for HEAD where it answers GET), while /health
    # and /openapi.json answered it: `curl -I`, and a checker probing /model, were told the route refused them.
    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app

    app = create_app(local)
    with TestClient(app) as client:
        # (/docs and /openapi.json are outside the schema)
        paths = [path for path, operations in app.openapi()["paths"].items() if "get" in operations]
        assert paths == ["/health", "/model"]
        for path in [*paths, "/docs", "/openapi.json"]:
            got, head = client.get(path), client.head(path)
            assert (head.status_code, head.content) == (200, b""), path
            assert [head.headers[name] for name in ("content-type", "content-length")] == [
                got.headers[name] for name in ("content-type", "content-length")], path
        assert client.head("/predict").status_code == 405  # (a POST route has no GET to answer as)
    assert not [path for path, operations in app.openapi()["paths"].items() if "head" in operations]


def test_batcher_runs_requests_that_queue_together_as_one_batch():
    calls = []

    def predict_proba(texts):
        calls.append(list(texts))
        time.sleep(0.05)
        return np.array([[len(t), 0.0] for t in texts])

    async def scenario():
        batcher = Batcher(predict_proba, ThreadPoolExecutor(1), max_texts=4)
        worker = asyncio.create_task(batcher.run())
        results = await asyncio.gather(*(batcher.submit(["a" * n, "b" * n]) for n in (1, 2, 3)))
        worker.cancel()
        return batcher, results

    batcher, results = asyncio.run(scenario())
    assert calls == [["a", "b", "aa", "bb"], ["aaa", "bbb"]]  # 3 requests, max 4 texts: two batches
    assert [r[:, 0].tolist() for r in results] == [[1, 1], [2, 2], [3, 3]]
    assert (batcher.requests, batcher.batches) == (3, 2)


def test_batcher_answers_the_other_requests_when_one_breaks_the_batch():
    calls = []

    def predict_proba(texts):
        calls.append(list(texts))
        if "bad" in texts:
            raise ValueError("cannot read 'bad'")
        return np.array([[len(t), 0.0] for t in texts])

    async def scenario():
        batcher = Batcher(predict_proba, ThreadPoolExecutor(1), max_texts=8)
        worker = asyncio.create_task(batcher.run())
        results = await asyncio.gather(*(batcher.submit(texts) for texts in (["a"], ["bad"], ["ccc"])),
                                       return_exceptions=True)
        later = await batcher.submit(["dd", "e"])  # batching resumes once the failed batch is answered
        worker.cancel()
        return results, later

    results, later = asyncio.run(scenario())
    assert results[0][:, 0].tolist() == [1] and results[2][:, 0].tolist() == [3]
    assert isinstance(results[1], ValueError)
    assert calls == [["a", "bad", "ccc"], ["a"], ["bad"], ["ccc"], ["dd", "e"]]
    assert later[:, 0].tolist() == [2, 1]


def test_batcher_skips_a_request_whose_client_has_gone_and_fails_alone_one_whose_question_fails():
    """A request whose client hung up while it waited is answered 499 uncomputed; one whose question (``gone``) raised
    killed the worker, every later request answered 503, where it hung for ever, popped off the queue unanswered."""
    from fastapi import HTTPException

    calls = []

    def predict_proba(texts):
        calls.append(list(texts))
        return np.array([[len(t), 0.0] for t in texts])

    def broken():
        raise RuntimeError("a bug")

    async def scenario():
        batcher = Batcher(predict_proba, ThreadPoolExecutor(1), max_texts=8)
        worker = asyncio.create_task(batcher.run())
        results = await asyncio.wait_for(asyncio.gather(
            batcher.submit(["a"]), batcher.submit(["gone"], gone=lambda: True), batcher.submit(["bb"], gone=broken),
            batcher.submit(["ccc"], gone=lambda: False), return_exceptions=True), 30)
        worker.cancel()
        return results, batcher.stopped

    (first, gone, broken_one, last), stopped = asyncio.run(scenario())
    assert isinstance(gone, HTTPException) and gone.status_code == 499
    assert isinstance(broken_one, RuntimeError) and stopped is None
    assert calls == [["a", "ccc"]] and first[:, 0].tolist() == [1] and last[:, 0].tolist() == [3]


def test_a_text_the_model_cannot_read_is_refused_alone(server):
    # JSON may carry half a surrogate pair, which no UTF-8 tokenizer takes.
    response = server.post("/predict", content=b'{"texts": ["fine", "broken \\ud800"]}',
                           headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert "text 1 is not valid Unicode: a lone surrogate (U+D800)" in response.json()["detail"]
    assert server.post("/predict", json={"texts": ["fine"]}).status_code == 200


@pytest.mark.parametrize("path, body, detail", [
    ("/predict", {"texts": [1] * 100_000}, "texts.0: Input should be a valid string; texts.1: Input should be a "
                                           "valid string; texts.2: Input should be a valid string"),
    ("/explain", {"texts": ["fine", *[[[]]] * 100_000]}, "texts.1: Input should be a valid string; texts.2: "),
    ("/predict", {"text": "fine"} | {f"k{i}": 1 for i in range(100_000)}, "k0: Extra inputs are not permitted; k1: "
                                                                          "Extra inputs are not permitted; k2: "),
])
def test_a_body_of_many_wrong_items_is_judged_by_its_first_few(local, path, body, detail):
    # pydantic made an error for every wrong item or unknown field, and FastAPI a copy of each: a megabyte of
    # [1, 1, ...] held the event loop, and with it every request, for 4 s, to answer the first three.
    from fastapi.testclient import TestClient
    from pydantic import ValidationError

    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.schemas import ExplainRequest, PredictRequest

    with pytest.raises(ValidationError) as caught:
        (PredictRequest if path == "/predict" else ExplainRequest).model_validate(body)
    assert caught.value.error_count() == 3
    with TestClient(create_app(local, ServeLimits(max_body_bytes=2_000_000))) as client:
        response = client.post(path, json=body)
    assert response.status_code == 422 and response.json()["detail"].startswith(detail)


@pytest.mark.parametrize("path, body, detail", [
    ("/predict", b'{"texts": ["a"], "texts": ["b"]}', "body: 'texts' is given 2 times"),
    ("/explain", b'{"text": "a", "method": "attention", "target": 0, "method": "occlusion"}',
     "body: 'method' is given 2 times"),
    ("/predict", b'{"text": "a\\": \\"b", "text": "c", "text": "d"}', "body: 'text' is given 3 times"),
])
def test_a_body_naming_a_field_twice_is_refused_naming_it_before_any_model_work(local, path, body, detail):
    # JSON keeps a repeated key's last value alone: {"texts": ["a"], "texts": ["b"]} was answered for "b" only, the
    # client none the wiser that "a" was dropped. (The data readers refuse such a JSON line so too.)
    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app

    with TestClient(create_app(local)) as client:
        response = client.post(path, content=body, headers={"content-type": "application/json"})
        assert response.status_code == 422 and response.json() == {
            "detail": f"{detail} (JSON keeps only the last); send it once"}
        assert client.get("/health").json()["requests"] == 0
        # (a colon inside a text, or a key repeated in an object where a text goes, is no field named twice here)
        assert client.post("/predict", json={"texts": ['"a": 1, "a": 2', "b: c"]}).status_code == 200
        assert "texts.0: Input should be a valid string" in client.post(
            "/predict", content=b'{"texts": [{"a": 1, "a": 2}]}').json()["detail"]


@pytest.mark.parametrize("flags, message", [
    ([], "run directory {run} does not exist"),
    (["--port", "99999"], "--port must be 0-65535, got 99999"),
    (["--max-batch", "0"], "--max-batch must be a positive integer, got 0"),
    (["--max-body-seconds", "-1"], "--max-body-seconds must be a positive integer, got -1"),
    (["--drain-seconds", "-1"], "--drain-seconds must be 0 or a positive integer, got -1"),
    (["--threads", "0"], "--threads must be at least 1, got 0"),
])
def test_serve_refuses_bad_arguments_in_one_line(flags, message, tmp_path, capsys):
    assert main(["serve", str(tmp_path / "nope"), *flags]) == 2
    assert capsys.readouterr().err == f"attnclf: error: {message.format(run=tmp_path / 'nope')}\n"



@pytest.mark.parametrize("limits, message", [
    ({"max_batch": True}, "max_batch must be a positive integer, got True"),  # (not 1: a bool is a mistake)
    ({"stop_seconds": 2.0}, "stop_seconds must be a positive integer, got 2.0"),
    ({"max_connections": -10 ** 5000}, "max_connections must be a positive integer, got an integer of over 4300 "
                                       "digits"),
    ({"max_text_chars": "9" * 100}, f"max_text_chars must be a positive integer, got '{'9' * 39}..."),
])
def test_serve_limits_refuse_a_bad_value_in_one_line_however_large(limits, message):
    """From Python, as from the command line: a value shown by its start (repr of an integer of 5000 digits raises
    ValueError), and True is no count of 1."""
    from attnclf.errors import AttnclfError
    from attnclf.serve.limits import ServeLimits

    with pytest.raises(AttnclfError) as caught:
        ServeLimits(**limits)
    assert str(caught.value) == message


@pytest.mark.parametrize("name", ["max_body_seconds", "stop_seconds", "keep_alive_seconds"])
def test_serve_limits_refuse_seconds_no_timer_can_hold(name):
    """asyncio's timers take seconds as a float: 10 ** 400 was accepted, then raised OverflowError as a traceback
    on every request (the head's and body's deadlines), after every answer (keep-alive) or at the stop."""
    from attnclf.errors import AttnclfError
    from attnclf.serve.limits import ServeLimits

    with pytest.raises(AttnclfError) as caught:
        ServeLimits(**{name: 10 ** 400})
    assert str(caught.value).startswith(f"{name} must be a positive integer of at most 1000000000 seconds "
                                        f"(31 years), got 1000000000000000000000000000000000000000")
    assert getattr(ServeLimits(**{name: 10 ** 9}), name) == 10 ** 9


def test_serve_limits_drain_for_no_seconds_by_default_and_bound_the_drain_as_the_other_seconds():
    """``drain_seconds`` 0 is today's stop, no drain; past the other seconds' bound, no timer could hold it."""
    from attnclf.errors import AttnclfError
    from attnclf.serve.limits import ServeLimits

    assert ServeLimits().drain_seconds == 0 and ServeLimits(drain_seconds=30).drain_seconds == 30
    with pytest.raises(AttnclfError) as caught:
        ServeLimits(drain_seconds=10 ** 400)
    assert str(caught.value).startswith("drain_seconds must be 0 or a positive integer of at most 1000000000 seconds "
                                        "(31 years), got 1000000000000000000000000000000000000000")
    with pytest.raises(AttnclfError) as caught:
        ServeLimits(stop_seconds=0)  # (0 is no drain; a stop that waits for nothing is no limit of the others)
    assert str(caught.value) == "stop_seconds must be a positive integer, got 0"


def test_a_second_signal_before_the_drain_began_stops_without_announcing_a_drain(local):
    """Two signals within one tick of uvicorn's loop (0.1 s: a supervisor and a shell each passing SIGTERM on): the
    second begins the stop at once, so the drain never runs; the log said "draining ... for 600 s" all the same, and
    /health turned 503 for a drain that was not there."""
    import asyncio
    import signal

    import uvicorn

    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import StopAnnouncingServer, _uvicorn_options

    limits = ServeLimits(drain_seconds=600)
    logged, drained = [], []
    server = StopAnnouncingServer(uvicorn.Config(create_app(local, limits), **_uvicorn_options(limits)),
                                  write=lambda event, line: logged.append(line), drain_seconds=600,
                                  on_drain=drained.append)
    for second in (signal.SIGTERM, signal.SIGINT):
        server.should_exit, server.stop_signal, server._drain_ends, logged[:], drained[:] = False, None, None, [], []
        server.handle_exit(signal.SIGTERM, None)
        server.handle_exit(second, None)  # (before the loop's next tick begins the drain)
        assert asyncio.run(server.on_tick(1)) is True
        assert (logged, drained) == ([], []), second


def test_serve_limits_take_numpy_integers_as_ints():
    """A limit from a numpy grid is a count like any other, and /model's JSON writes it."""
    from attnclf.serve.limits import ServeLimits

    limits = ServeLimits(max_batch=np.int64(8))
    assert limits.max_batch == 8 and type(limits.max_batch) is int


def test_the_middlewares_match_routes_under_a_root_path(local):
    """Behind a proxy (``uvicorn --root-path /api``) ASGI's path carries the prefix: /health must stay exempt from
    the in-flight limit and /predict must still ask for JSON."""
    from fastapi.testclient import TestClient

    from fastapi.responses import PlainTextResponse

    from attnclf.serve.app import create_app
    from attnclf.serve.limits import InFlightLimit

    # (a limit of 0 turns away every request that is not exempt; no `with`: a response has no lifespan to start)
    client = TestClient(InFlightLimit(PlainTextResponse("ok"), limit=0, exempt={"/health"}), root_path="/api")
    assert client.get("/health").status_code == 200
    assert client.get("/model").status_code == 503
    with TestClient(create_app(local), root_path="/api") as client:
        assert client.post("/predict", data={"text": "good"}).status_code == 415
        assert client.post("/predict", json={"text": "good"}).status_code == 200


def test_every_error_answer_is_the_one_openapi_json_documents(local):
    """A client generated from /openapi.json parses each error by the schema documented for its status: FastAPI's
    default 422 promised a list of validation errors where the app sends one line, and 400, 413 and 415 went
    undocumented."""
    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits

    with TestClient(create_app(local, ServeLimits(max_batch=2, max_body_bytes=2000))) as client:
        openapi = client.get("/openapi.json").json()
        answers = [
            ("/predict", client.post("/predict", content=b'{"texts": [', headers={"content-type": "application/json"})),
            ("/predict", client.post("/predict", json={"texts": ["a", "b", "c"]})),
            ("/predict", client.post("/predict", json={"text": "x " * 1000})),
            ("/predict", client.post("/predict", data={"text": "good"})),
            ("/predict", client.post("/predict", json={"texts": [1]})),
            ("/predict", client.post("/predict", json={"texts": []})),
            ("/explain", client.post("/explain", json={"text": "good", "method": "nonsense"})),
            ("/explain", client.post("/explain", json={"text": "good", "steps": 3})),
        ]
    for path, response in answers:
        status = str(response.status_code)
        assert status in {"400", "413", "415", "422"}, (path, status)
        documented = openapi["paths"][path]["post"]["responses"].get(status)
        assert documented is not None, f"{path} answers {status}, which /openapi.json does not list"
        ref = documented["content"]["application/json"]["schema"]["$ref"]
        schema = openapi["components"]["schemas"][ref.rsplit("/", 1)[-1]]
        assert schema["properties"]["detail"]["type"] == "string" and list(response.json()) == ["detail"]
        assert isinstance(response.json()["detail"], str)
    assert "503" in openapi["paths"]["/predict"]["post"]["responses"]
    assert "HTTPValidationError" not in openapi["components"]["schemas"]  # described nothing the app sends


def _scope(method: str, path: str) -> dict:
    """An HTTP request's ASGI scope, as uvicorn would pass it."""
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
            "headers": [(b"content-type", b"application/json")], "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 9)}


async def _answer(app, method: str, path: str, receive) -> tuple[int, dict]:
    """``app``'s status and JSON answer to one request whose body ``receive`` gives, as a server would run it."""
    sent = []

    async def send(message):
        sent.append(message)

    await app(_scope(method, path), receive, send)
    return sent[0]["status"], json.loads(b"".join(message.get("body", b"") for message in sent[1:]))


async def _no_body():
    return {"type": "http.request", "body": b"", "more_body": False}


def test_bodies_that_stall_hold_their_places_until_answered_408(local):
    """Clients that send headers and part of a body, then nothing, held every place among --max-connections for
    as long as they kept their connections open: the server answered everyone else 503, indefinitely. (Run on
    one event loop, not over sockets: the 503 is asked for while the stalled requests are known to be waiting,
    however slow the machine, where a sleep could end before they arrive or after their deadline.)"""
    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits

    app = create_app(local, ServeLimits(max_connections=2, max_body_seconds=1))
    waiting = []

    def stalling():
        parts = [b'{"te']

        async def receive():
            if parts:
                return {"type": "http.request", "body": parts.pop(), "more_body": True}
            waiting.append(receive)
            await asyncio.Event().wait()  # the rest never comes
        return receive

    async def scenario():
        stalled = [asyncio.create_task(_answer(app, "POST", "/predict", stalling())) for _ in range(2)]
        while len(waiting) < 2:
            await asyncio.sleep(0)
        # (InFlightLimit counts before its first await: the timers cannot run between the loop above and this)
        busy = await _answer(app, "GET", "/model", _no_body)
        late = await asyncio.wait_for(asyncio.gather(*stalled), 30)  # (a regression fails, not hangs)
        return busy, late, await _answer(app, "GET", "/model", _no_body)

    busy, late, after = asyncio.run(scenario())
    assert busy[0] == 503  # they hold the places
    assert late == [(408, {"detail": "request body not received within 1 s (4 bytes came); the limit is 1 s"})] * 2
    assert after[0] == 200 and after[1]["limits"]["max_body_seconds"] == 1  # and gave them back


def test_a_stalled_body_is_answered_408_over_http_and_its_connection_closed(local):
    import uvicorn

    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits
    from attnclf.serve.server import _uvicorn_options

    limits = ServeLimits(max_connections=1, max_body_seconds=1)
    server = uvicorn.Server(uvicorn.Config(create_app(local, limits), **_uvicorn_options(limits)))
    with _running(server) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client, \
            socket.create_connection(("127.0.0.1", port), timeout=30) as stalled:
        assert client.post("/predict", json={"text": "good"}).status_code == 200  # (started)
        stalled.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 100\r\n\r\n{\"te")
        answer = b""
        while chunk := stalled.recv(4096):  # the server answers, then closes
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 ") and b"\r\nconnection: close\r\n" in head.lower()
        assert json.loads(body) == {"detail": "request body not received within 1 s (4 bytes came); "
                                              "the limit is 1 s"}
        # (the place is given back before the connection closes: the one place is free)
        assert client.post("/predict", json={"text": "good"}).status_code == 200


def test_a_body_in_hand_when_the_deadline_passes_is_read_not_refused(local):
    """--max-body-seconds judges the client: a body whose every part had arrived was refused 408 when the server
    itself came to it late (its event loop held up past the deadline, say by a busy CPU), the remaining seconds
    having run out while the rest of the body lay waiting to be read."""
    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits

    app = create_app(local, ServeLimits(max_body_seconds=1))
    parts = [b'{"text": ', b'"good"}']

    async def receive():
        if not parts:  # (the body read, a server's receive waits for the client to hang up)
            await asyncio.Event().wait()
        part = parts.pop(0)
        if parts:
            time.sleep(1.2)  # the server busy (its event loop blocked) while the rest arrives
        return {"type": "http.request", "body": part, "more_body": bool(parts)}

    async def scenario():
        async with app.router.lifespan_context(app):  # (starts the batcher, as a server does)
            return await _answer(app, "POST", "/predict", receive)

    status, answer = asyncio.run(scenario())
    assert status == 200 and answer["predictions"][0]["label"] in local.label_names


# ---------------------------------------------------------------- the ONNX backend


def _app_served(args: list[str], monkeypatch):
    """The app `attnclf serve ARGS` would run: uvicorn's start hands it back instead of serving it."""
    import uvicorn

    served = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets=None: served.append(server.config.app))
    assert main(["serve", *args, "--port", "0"]) == 0
    return served[0]


def _probabilities(answers: list[dict], names: list[str]) -> np.ndarray:
    return np.array([[answer["probabilities"][name] for name in names] for answer in answers])


def test_the_onnx_backend_answers_what_its_export_and_the_torch_service_answer(exported, server, monkeypatch):
    from fastapi.testclient import TestClient

    from attnclf.export import OnnxClassifier

    texts = ["the plot was not good", "great acting", "dull but the ending was wonderful", ""]
    with TestClient(_app_served([str(exported), "--backend", "onnx"], monkeypatch)) as client:
        answers = client.post("/predict", json={"texts": texts}).json()["predictions"]
        one = client.post("/predict", json={"text": texts[0]}).json()["predictions"]
    onnx = OnnxClassifier.load(exported)
    np.testing.assert_array_equal(_probabilities(answers, onnx.label_names), onnx.predict_proba(texts))
    assert one == answers[:1]
    torch_answers = server.post("/predict", json={"texts": texts}).json()["predictions"]
    assert [a["label"] for a in answers] == [a["label"] for a in torch_answers]


def test_a_calibrated_run_s_two_services_answer_the_same_probabilities_and_limits(demo_run, tmp_path):
    # The temperature is applied once either way (the graph gives logits; OnnxClassifier divides them), and the
    # request limits bound the ONNX service as they bound PyTorch's.
    import shutil

    from fastapi.testclient import TestClient

    from attnclf.export import OnnxClassifier, check_data, export_onnx
    from attnclf.export.onnx import PARITY_TOLERANCE
    from attnclf.serve.app import create_app
    from attnclf.serve.limits import ServeLimits

    run = shutil.copytree(demo_run, tmp_path / "run", ignore=shutil.ignore_patterns("onnx"))
    (run / "temperature.json").write_text(json.dumps({"temperature": 3.0}))
    export_onnx(run, check=check_data(run, limit=50))
    texts = ["the plot was not good", "great acting", "dull but the ending was wonderful", ""]
    limits = ServeLimits(max_batch=4, max_text_chars=300, max_body_bytes=4000)
    answers = {}
    for name, classifier in [("torch", Classifier.load(run, device="cpu")), ("onnx", OnnxClassifier.load(run))]:
        with TestClient(create_app(classifier, limits)) as client:
            answers[name] = client.post("/predict", json={"texts": texts}).json()["predictions"]
            assert client.get("/model").json()["temperatures"] == [3.0]
            too_many = client.post("/predict", json={"texts": texts + ["one more"]})
            assert (too_many.status_code, too_many.json()["detail"]) == (413, "5 texts in one request; the limit is 4")
            too_long = client.post("/predict", json={"text": "x" * 301})
            assert (too_long.status_code, too_long.json()["detail"]) == (413, "text 0 has 301 characters; the limit "
                                                                              "is 300")
            assert client.post("/predict", content=b"x" * 4001).status_code == 413
    names = Classifier.load(run, device="cpu").label_names
    np.testing.assert_allclose(_probabilities(answers["onnx"], names), _probabilities(answers["torch"], names),
                               atol=PARITY_TOLERANCE, rtol=0)
    assert [a["label"] for a in answers["onnx"]] == [a["label"] for a in answers["torch"]]


def test_int8_serves_the_int8_graph(exported, monkeypatch):
    from fastapi.testclient import TestClient

    from attnclf.export import OnnxClassifier

    texts = ["the plot was not good", "great acting", "dull but the ending was wonderful", "zzz qqq"]
    with TestClient(_app_served([str(exported), "--backend", "onnx", "--int8", "--threads", "1"],
                                monkeypatch)) as client:
        got = _probabilities(client.post("/predict", json={"texts": texts}).json()["predictions"],
                             OnnxClassifier.load(exported).label_names)
        assert client.get("/model").json()["backend"] == "onnx-int8"
    np.testing.assert_array_equal(got, OnnxClassifier.load(exported, int8=True).predict_proba(texts))
    assert not np.array_equal(got, OnnxClassifier.load(exported).predict_proba(texts))  # (not the float32 graph)


def test_threads_go_to_onnxruntime_not_pytorch(exported, monkeypatch):
    import onnxruntime
    import torch

    sessions = []
    real = onnxruntime.InferenceSession
    monkeypatch.setattr(onnxruntime, "InferenceSession", lambda graph, options, **kw: sessions.append(
        options.intra_op_num_threads) or real(graph, options, **kw))
    monkeypatch.setattr(torch, "set_num_threads", lambda count: pytest.fail("PyTorch's threads set"))
    _app_served([str(exported), "--backend", "onnx", "--threads", "1"], monkeypatch)
    assert sessions == [1]


def test_the_onnx_backend_refuses_explanations_in_one_line_and_says_what_it_serves(exported, server, monkeypatch):
    from fastapi.testclient import TestClient

    with TestClient(_app_served([str(exported), "--backend", "onnx", "--max-batch", "4"], monkeypatch)) as client:
        refused = client.post("/explain", json={"text": "not good", "method": "attention"})
        info = client.get("/model").json()
        docs = client.get("/docs").text  # (its description spoke of /explain's methods)
    assert refused.status_code == 400
    assert refused.json() == {"detail": "this service runs the exported ONNX graph, which gives no explanations: "
                                        "`attnclf serve RUN_DIR` (the PyTorch backend) explains"}
    manifest = json.loads((exported / "export.json").read_text())
    assert info["backend"] == "onnx" and info["labels"] == json.loads((exported / "labels.json").read_text())
    assert info["model"] == {"name": "self-attn", "parameters": manifest["model"]["parameters"]}
    assert info["tokenizer"]["kind"] == "word" and info["tokenizer"]["max_len"] == 64
    assert info["tokenizer"]["truncation"] == manifest["tokenizer"]["truncation"]
    assert info["tokenizer"]["vocab_size"] == server.get("/model").json()["tokenizer"]["vocab_size"]  # the real one
    assert info["temperatures"] == [1.0] and info["explain_methods"] == [] and info["explain_default"] is None
    assert info["explain_pooling_attention"] is False and info["text_columns"] is None  # (one column, read whole)
    assert info["limits"]["max_batch"] == 4 and info["version"]
    assert server.get("/model").json()["backend"] == "torch"
    assert "classifier (self-attn) on onnxruntime (onnx): /predict answers as" in docs
    assert "offers gradient attributions" not in docs


def test_the_onnx_backend_schema_lists_no_explain_route(exported, monkeypatch):
    # /explain answers 400 there: its request fields in /docs and /openapi.json would promise what it refuses.
    from fastapi.testclient import TestClient

    with TestClient(_app_served([str(exported), "--backend", "onnx"], monkeypatch)) as client:
        schema = client.get("/openapi.json").json()
        docs = client.get("/docs").text
        refused = client.post("/explain", json={"text": "not good"})
    assert "/explain" not in schema["paths"] and "ExplainRequest" not in schema["components"]["schemas"]
    assert "ExplainResponse" not in schema["components"]["schemas"]  # (nor what it would answer)
    assert "/predict" in schema["paths"] and "/explain" not in docs and "gives no explanations" in docs
    assert refused.status_code == 400 and "gives no explanations" in refused.json()["detail"]


def test_an_export_made_before_text_columns_were_recorded_serves_and_says_texts_are_read_whole(
        exported, tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    older = tmp_path / "older"
    shutil.copytree(exported, older)
    manifest = json.loads((older / "export.json").read_text())
    del manifest["text_columns"]
    (older / "export.json").write_text(json.dumps(manifest))
    with TestClient(_app_served([str(older), "--backend", "onnx"], monkeypatch)) as client:
        info = client.get("/model").json()
        answer = client.post("/predict", json={"text": "a fine film"})
    assert info["text_columns"] is None and info["backend"] == "onnx"
    assert answer.status_code == 200 and len(answer.json()["predictions"]) == 1


@pytest.mark.parametrize("flags, message", [
    (["--backend", "onnx", "--device", "cuda"], "--backend onnx runs on the CPU; drop --device"),
    (["--backend", "onnx", "--bf16"], "--bf16 is for --backend torch; the ONNX graph runs in float32 (or --int8)"),
    (["--int8"], "--int8 needs --backend onnx"),
    (["--backend", "onnx"], "no ONNX export in {run}: run `attnclf export {run} --format onnx` first"),
    (["--backend", "onnx", "--threads", "0"], "--threads must be at least 1, got 0"),
])
def test_serve_refuses_what_the_onnx_backend_cannot_do_as_predict_does(flags, message, demo_run, capsys, monkeypatch):
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "run", lambda *args, **kwargs: pytest.fail("served"))
    assert main(["serve", str(demo_run), *flags]) == 2
    assert capsys.readouterr().err == f"attnclf: error: {message.format(run=demo_run)}\n"


def test_serve_names_the_backends_it_knows_and_its_arguments_as_python_knows_them(demo_run):
    from attnclf.errors import AttnclfError
    from attnclf.serve import serve

    with pytest.raises(AttnclfError, match=r"^backend must be one of torch, onnx, got 'tensorrt'$"):
        serve(demo_run, backend="tensorrt")
    with pytest.raises(AttnclfError, match=r"^int8 needs backend onnx$"):  # (the command line's: --int8, --backend)
        serve(demo_run, int8=True)
    with pytest.raises(AttnclfError, match=r"^backend onnx runs on the CPU; drop device$"):
        serve(demo_run, backend="onnx", device="cuda")
    with pytest.raises(AttnclfError, match=r"^port must be 0-65535, got 70000$"):  # (the command line: --port)
        serve(demo_run, port=70000)


@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_a_service_starts_and_answers_without_scikit_learn_or_scipy(backend, request):
    """A lighter process: the ONNX backend loads neither PyTorch nor scikit-learn (with scipy, 1.5 s of imports,
    which /model's text columns once pulled in through the dataset registry); the PyTorch one answers /predict,
    /model and /explain without scikit-learn or scipy (scipy.stats alone was a second of every start)."""
    run = request.getfixturevalue("exported" if backend == "onnx" else "demo_run")
    explain = "client.post('/explain', json={'text': 'not good'}).json()['explanations'][0]['label']"
    # torch set to None in sys.modules makes any `import torch` fail; uvicorn's start is replaced by requests.
    code = ("import json, sys\n"
            + ("sys.modules['torch'] = None\n" if backend == "onnx" else "")
            + "import uvicorn\n"
            "from fastapi.testclient import TestClient\n"
            "def run(server, sockets=None):\n"
            "    with TestClient(server.config.app) as client:\n"
            "        sys.stdout.write(json.dumps([client.post('/predict', json={'text': 'not good'}).json(),\n"
            "                                     client.get('/model').json()['backend'],\n"
            f"                                     {explain if backend == 'torch' else None},\n"
            "                                     sorted({'sklearn', 'scipy'} & set(sys.modules))]) + '\\n')\n"
            "uvicorn.Server.run = run\n"
            "from attnclf.cli import main\n"
            f"sys.exit(main(['serve', {str(run)!r}, '--backend', {backend!r}, '--threads', '1', '--port', '0']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # (the access log's lines are written on a thread of their own: before or after this one, each in one write, as
    # this one is: print's two writes can let an access line in before its newline, the likely cause of one failure
    # on a loaded machine)
    answer, served_by, explained, heavy = json.loads(next(line for line in done.stdout.splitlines()
                                                          if line.startswith("[")))
    labels = json.loads((run / "labels.json").read_text())
    assert answer["predictions"][0]["label"] in labels
    assert served_by == backend and heavy == []
    assert explained in labels if backend == "torch" else explained is None
