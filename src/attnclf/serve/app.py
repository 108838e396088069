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
                in flight; 503 where a bug has stopped the prediction worker, or while a SIGTERM's drain runs
                (``serve``'s ``ServeLimits.drain_seconds``)
GET  /model     the run and the weights served (weights_id, as each answer's X-Attnclf-Weights header; model_id,
                which changes with its temperature and thresholds too, as X-Attnclf-Model), the
                backend, labels, model and tokenizer summary, text columns, versions, explanation methods (and
                whether the pooling attention comes beside their scores), the threshold /predict applies (a
                multi-label run's: multi_label and each label's thresholds), limits
GET  /docs      the endpoints, the fields of their requests and answers, and a curl line each (schema at
                /openapi.json)
```

What it accepts is bounded (``limits.ServeLimits``): body bytes and the seconds the head and the body may take
(``server.TimedHeads``, ``limits.BodyLimit``), texts per request, characters per text, requests in flight. A request
over a limit
gets a 413 naming the limit; one past the requests in flight a 503 at once, with Retry-After; a body that has not
arrived in time a 408; malformed JSON a 400; a body of the wrong shape, or naming a field twice, a 422 (``schemas``);
one still running when a stop has waited ``stop_seconds`` for it a 503 with Retry-After; an /explain or /predict whose
client hung up while it waited its turn is not computed (499 in the access log, ``logs``); each with a one-line
``detail``.
Requests that arrive while a batch runs are batched together for the next one (``batcher.Batcher``).
This module builds the app (``create_app``); ``server.serve`` loads a run and serves it on uvicorn, and a SIGHUP has it
load its run again and answer by it from then on, without a restart (``server.ModelReloader``).

>>> # from attnclf import Classifier
>>> # from attnclf.serve import ServeLimits, create_app, serve
>>> # app = create_app(Classifier.load("runs/demo"), ServeLimits(max_batch=32))
>>> # serve("runs/demo", port=8000)   # what `attnclf serve runs/demo` runs
>>> # serve("runs/demo", backend="onnx", int8=True)   # its ONNX export's int8 graph (/explain refused, unlisted)
"""

from __future__ import annotations

import asyncio
import html
import json
import shlex
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import asdict
from functools import partial
from typing import Callable

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..checks import ACCESS_LOGS, by_field
from ..errors import AttnclfError, first_few, shown
from ..prediction import applied_thresholds
from .batcher import Batcher
from .limits import (CLIENT_GONE, RETRY_AFTER_SECONDS, AnswerCutOffRequests, BodyLimit, InFlightLimit, JsonBodies,
                     ServeLimits, client_gone, route_path)
from .logs import AccessLog
from .model import (MODEL_HEADER, NO_EXPLANATIONS, WEIGHTS_HEADER, ServedModel, backend_name, export_summary,
                    run_summary)
from .schemas import (BODY_ERRORS, BUSY, SHOWN_ERRORS, BodyRoute, ExplainRequest, ExplainResponse, LabelSetOut,
                      LabelSetResponse, PredictionOut, PredictRequest, PredictResponse, error_field, error_message,
                      error_responses)


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
    ``state.drain(why)`` has /health answer 503 saying ``why`` from then on, every other route answering as before
    (a stop's drain: ``StopAnnouncingServer``).

    >>> # with TestClient(create_app(Classifier.load("runs/demo"))) as client:   # (starts the batcher)
    >>> #     client.post("/predict", json={"text": "great"}).json()
    >>> # create_app(Classifier.load("runs/demo"), threshold=("positive", 0.9))  # positive from 0.9 on
    """
    served = ServedModel.of(classifier, served_from, threshold, named)
    multi_label = served.multi_label  # (the same for every model swapped in: the answers' schema rests on it)
    if access_log_format not in (formats := [name for name in ACCESS_LOGS if name != "off"]):  # (off: no access_log)
        raise AttnclfError(f"access_log_format must be {' or '.join(formats)}, got {shown(access_log_format)}")
    backend = backend_name(classifier)  # (a reload loads by the same backend)
    # (explaining: the /explain requests in flight, at most explain_slots; draining: why /health answers 503)
    state: dict = {"explaining": 0, "served": served, "draining": None}

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
    app.router.route_class = BodyRoute  # (before the routes are added: each is made of it)
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
        return JSONResponse({"detail": "; ".join(f"{error_field(e)}: {error_message(e)}"
                                                 for e in errors[:SHOWN_ERRORS])}, 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":  # not UTF-8, too deep
            return JSONResponse({"detail": "request body is not JSON the server can read (malformed, not UTF-8, or "
                                           "nested too deep)"}, 400)
        # Starlette's own "Not Found" and "Method Not Allowed" named neither the path nor what it takes: `curl
        # URL/predict` (a GET) was told "Method Not Allowed" alone. (The path quoted: it is the client's.)
        path = shown(route_path(request.scope))
        if exc.status_code == 405 and exc.detail == "Method Not Allowed":
            allowed = {method for method in (exc.headers or {}).get("Allow", "").split(", ") if method}
            # (Starlette names the methods of the path's first route: a GET route's, not its HEAD, answered by a
            # route of its own below, where RFC 9110's Allow lists every method the path answers; sorted, as
            # Starlette's come from a set in no set order)
            allowed = sorted(allowed | ({"HEAD"} if "GET" in allowed else set()))
            return JSONResponse({"detail": f"{shown(request.method)} is not allowed on {path}, which takes "
                                           f"{', '.join(allowed)} (see /docs)"}, 405,
                                headers={**(exc.headers or {}), "Allow": ", ".join(allowed)})
        if exc.status_code == 404 and exc.detail == "Not Found":
            return JSONResponse({"detail": f"no route {path}: /docs lists the API's routes"}, 404)
        return await http_exception_handler(request, exc)

    @app.exception_handler(AttnclfError)
    async def _user_error(request: Request, exc: AttnclfError):
        return JSONResponse({"detail": str(exc)}, 400)

    # (the headers /predict and /explain answer with, as /docs shows them)
    answer_headers = {200: {"headers": {WEIGHTS_HEADER: {
        "description": "the weights that answered: GET /model's weights_id (one model's sha256; an ensemble's, the "
                       "sha256 of its members' joined by commas)", "schema": {"type": "string"}}, MODEL_HEADER: {
        "description": "the model that answered, as a whole: GET /model's model_id, which changes with its weights, "
                       "temperature or thresholds", "schema": {"type": "string"}}}}}
    answer = LabelSetResponse if multi_label else PredictResponse  # (its schema is what /docs shows)
    answered_fields = (LabelSetOut if multi_label else PredictionOut).model_fields

    @app.post("/predict", response_model=answer, responses=error_responses(BODY_ERRORS) | answer_headers)
    async def predict(request: PredictRequest, response: Response, connection: Request):
        """Label and class probabilities for each text (one text, or a batch; a multi-label run's: its set of labels
        and each label's probability), and how many of the tokens the model read are unknown to it; the label is the
        most probable class, or by the service's threshold (GET /model's threshold) where it has one. The
        X-Attnclf-Weights header names the weights that answered (GET /model's weights_id), X-Attnclf-Model the model
        as a whole, its temperature and thresholds too (GET /model's model_id)."""
        served = state["served"]
        predictions = await started("batcher").submit(request.checked(limits.max_batch, limits.max_text_chars),
                                                      served.predict, partial(client_gone, connection.receive))
        response.headers.update(served.answered_by)
        return {"predictions": [{key: value for key, value in prediction.to_dict().items()
                                 if key in answered_fields} for prediction in predictions]}

    # Out of the schema (and /docs) where it can only refuse: its request fields would promise what it refuses.
    # Its answer is written as it was before it had a schema: without the fields an explanation lacks (not as null),
    # and by JSONResponse, as FastAPI's own writing of a response model spells some numbers otherwise (3.2e-6 for
    # 3.2e-06).
    @app.post("/explain", include_in_schema=bool(served.explain_methods), response_model=ExplainResponse,
              response_model_exclude_unset=True, response_class=JSONResponse,
              responses=error_responses(BODY_ERRORS | {400: f"{BODY_ERRORS[400]}, or an unknown method or target, or "
                                                            f"one this model cannot give (see GET /model)"})
              | answer_headers)
    async def explain(request: ExplainRequest, response: Response, connection: Request):
        """Per-token scores by `method`, or several, with what a score means; see GET /model for the methods
        available. The X-Attnclf-Weights header names the weights that answered (GET /model's weights_id),
        X-Attnclf-Model the model as a whole, its temperature and thresholds too (GET /model's model_id)."""
        if backend != "torch":
            raise HTTPException(400, NO_EXPLANATIONS)
        from ..explain.explanation import class_index, explain_each
        from ..explain.methods import method_options

        served = state["served"]
        texts = request.checked(limits.max_explain_batch, limits.max_text_chars)
        methods = request.methods(served.explain_methods)
        # Each method explains every text: the limit bounds the explanations, which is what a request costs.
        if methods is not None and len(texts) * len(methods) > limits.max_explain_batch:
            raise HTTPException(413, f"{len(texts)} text{'s' * (len(texts) > 1)} x {len(methods)} methods = "
                                     f"{len(texts) * len(methods)} explanations in one request; the limit is "
                                     f"{limits.max_explain_batch}")
        if served.explain_methods:
            # A mistyped method or target: refused at once, as a list of methods is, where it waited for the
            # explanations queued ahead of it (or was answered 503, busy) to be told so.
            if methods is None and request.method is not None:
                method_options(served.classifier.model, request.method, {})
            if request.target is not None:
                class_index(request.target, served.classifier.label_names)
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
                if client_gone(connection.receive):
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
        model has loaded (the port opens then), 503 where the service can no longer answer predictions, or while it
        drains before a stop (readiness lost, every other request still answered)."""
        batcher = started("batcher")
        if batcher.stopped:
            raise HTTPException(503, batcher.stopped)
        if state["draining"]:
            raise HTTPException(503, state["draining"])
        return {"status": "ok", "requests": batcher.requests, "batches": batcher.batches}

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    async def docs(request: Request):
        return docs_page(app.openapi(), str(request.base_url).rstrip("/"))

    @app.get("/model", responses=error_responses({503: BUSY}))
    async def model():
        """What is being served."""
        served = state["served"]
        classifier, threshold = served.classifier, served.threshold
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
            return {"backend": backend, **served.origin, **export_summary(classifier),
                    "text_columns": served.text_columns, **applied, "limits": asdict(limits)}
        return {"backend": backend, **served.origin,
                **run_summary(classifier, served.explain_methods, served.text_columns), **applied,
                "limits": asdict(limits)}

    # HEAD, what some health checkers and `curl -I` send, on every GET route, as HTTP asks of a server (RFC 9110,
    # 9.3.2: /model and /docs answered 405 while /health and /openapi.json answered it); outside the schema, where it
    # would repeat GET's operation id.
    for route in [route for route in app.routes if isinstance(route, APIRoute) and "GET" in route.methods]:
        app.add_api_route(route.path, route.endpoint, methods=["HEAD"], include_in_schema=False,
                          response_class=route.response_class)

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

    def drain(why: str) -> None:
        state["draining"] = why

    app.state.swap_model = swap_model
    app.state.served = lambda: state["served"]
    app.state.drain = drain
    return app


def docs_page(openapi: dict, base_url: str) -> str:
    """The API's endpoints as one self-contained HTML page: what each does, the fields it takes and those its
    successful answer holds (a nested model's by their path, ``predictions[].label``), a curl line.

    >>> page = docs_page({"info": {"title": "t", "version": "1"}, "paths": {"/health": {"get": {"summary": "Up"}}}},
    ...                  "http://127.0.0.1:8000")
    >>> "curl http://127.0.0.1:8000/health" in page
    True
    """
    def kind(field: dict) -> str:
        def named(option: dict) -> str:
            held = option.get("items", option.get("additionalProperties"))  # (a list's items, a mapping's values)
            of = f" of {named(held)}" if isinstance(held, dict) else ""
            return option.get("type", "object" if "$ref" in option else "?") + of

        return " or ".join(named(option) for option in field.get("anyOf", [field]))

    schemas = openapi.get("components", {}).get("schemas", {})

    def resolved(schema: dict) -> dict:
        return schemas.get(schema.get("$ref", "").rsplit("/", 1)[-1], schema)

    def fields(schema: dict, path: str = "", followed: tuple = ()):
        """Each (name, field) of ``schema``, a field holding a model (or a list of them) followed by that model's,
        named by their path; a model already followed on the way is not followed again (it would be for ever)."""
        for name, field in resolved(schema).get("properties", {}).items():
            yield path + name, field
            held = field.get("items", field)
            if "$ref" in held and held["$ref"] not in followed:
                yield from fields(held, f"{path}{name}{'[]' if 'items' in field else ''}.", followed + (held["$ref"],))

    def table(caption: str, schema: dict) -> str:
        rows = "".join(f"<tr><td><code>{html.escape(name)}</code></td><td>{html.escape(kind(field))}</td>"
                       f"<td>{html.escape(field.get('description', ''))}</td></tr>" for name, field in fields(schema))
        return (f"<table><caption>{html.escape(caption)}</caption><tr><th>field</th><th>type</th><th>meaning</th></tr>"
                f"{rows}</table>" if rows else "")

    def json_schema(part: dict) -> dict:
        return part.get("content", {}).get("application/json", {}).get("schema", {})

    sections = []
    for path, operations in openapi.get("paths", {}).items():
        for method, operation in operations.items():
            body = json_schema(operation.get("requestBody", {}))
            status, answer = next(((status, json_schema(response))
                                   for status, response in operation.get("responses", {}).items()
                                   if status.startswith("2")), ("", {}))
            example = json.dumps((resolved(body).get("examples") or [{"text": "a fine film"}])[0])
            url = shlex.quote(base_url + path)
            curl = f"curl {url}" if method == "get" else (
                f"curl -X {method.upper()} {url} -H 'Content-Type: application/json' -d {shlex.quote(example)}")
            sections.append(
                f"<h2><code>{method.upper()} {html.escape(path)}</code></h2>"
                f"<p>{html.escape(operation.get('description') or operation.get('summary', ''))}</p>"
                + table("request", body) + table(f"answer ({status})", answer)
                + f"<pre>{html.escape(curl)}</pre>")
    info = openapi.get("info", {})
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(info.get('title', ''))} API</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}pre{background:#f4f4f4;padding:.6em;"
            "overflow:auto}td,th{text-align:left;padding:.2em .8em .2em 0;vertical-align:top}caption{text-align:left;"
            "font-weight:bold;padding-top:.6em}</style></head><body>"
            f"<h1>{html.escape(info.get('title', ''))} {html.escape(info.get('version', ''))}</h1>"
            f"<p>{html.escape(info.get('description', ''))}</p>"
            f"<p>The full schema: <a href='{html.escape(base_url, quote=True)}/openapi.json'>/openapi.json</a>.</p>"
            f"{''.join(sections)}</body></html>")
