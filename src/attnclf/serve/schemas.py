"""The bodies /predict and /explain take and answer, and how a body of the wrong shape is told what to send
(``create_app``'s 422s).

Each body's docstring and each field's description are what /docs and /openapi.json tell a client: they name a limit
by its setting (``serve``'s flag, and GET /model's name for it), as a flag changes the number."""

from __future__ import annotations

import json
from itertools import islice
from typing import Literal

from fastapi import HTTPException, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator, model_validator

from ..data.files import repeated_key
from ..errors import NAME_LENGTH, AttnclfError, shown
from ..prediction import check_texts

SHOWN_ERRORS = 3  # a body of the wrong shape is answered naming its first this-many problems
_TEXT_CHARS = "at most --max-text-chars characters (GET /model's limits.max_text_chars)"
_IN_ORDER = "one per text, in the order the texts were sent"


class _KeysOnce(Request):
    """A request whose JSON body names each field once, else a 422 naming the field: JSON keeps a repeated key's last
    value alone, and {"texts": ["a"], "texts": ["b"]} was answered for "b", "a" dropped unsaid. Checked as the data
    readers check a JSON line (``repeated_key``), after the parse FastAPI makes anyway, and only where the body has
    more colons than fields."""

    async def json(self):
        if not hasattr(self, "_json"):
            body = await self.body()
            record = json.loads(body)
            if isinstance(record, dict) and body.count(b":") > len(record) and (repeated := repeated_key(
                    body.decode(json.detect_encoding(body), "surrogatepass"), record, None)):  # (as json.loads reads)
                key, count, _ = repeated
                raise HTTPException(422, f"body: {shown(key, most=NAME_LENGTH)} is given {count} times (JSON keeps "
                                         f"only the last); send it once")
            self._json = record
        return self._json


class BodyRoute(APIRoute):
    """The app's routes: each reads its request's JSON body as ``_KeysOnce`` does (FastAPI's way to read a body
    otherwise)."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def handled(request: Request):
            return await handler(_KeysOnce(request.scope, request.receive))
        return handled


class _Texts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    texts: list[str] | None = None  # (each request describes its own: the limit on how many differs)
    text: str | None = Field(None, description=f"one text, in place of texts, {_TEXT_CHARS}")

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
    """The texts to classify: {"texts": [...]}, or {"text": "..."} for one."""

    texts: list[str] | None = Field(None, description=f"the texts to classify, at most --max-batch of them (GET "
                                                      f"/model's limits.max_batch), each {_TEXT_CHARS}; or give text")
    model_config = ConfigDict(json_schema_extra={"examples": [{"texts": ["not good, but the ending was wonderful"]}]})


class ExplainRequest(_Texts):
    """The texts to explain ({"texts": [...]}, or {"text": "..."} for one), by which method or methods, and for which
    class."""

    texts: list[str] | None = Field(None, description=f"the texts to explain, each {_TEXT_CHARS}; a request's texts x "
                                                      f"methods is at most --max-explain-batch (see method); or give "
                                                      f"text")
    method: str | list[str] | None = Field(
        None, description="attention, rollout, grad-input, integrated-gradients or occlusion (default: occlusion); "
                          "several as a list, or all (every method GET /model lists), answered each text's "
                          "explanations together, in the order asked; a request's texts x methods (a multi-label "
                          "run's: x the labels each text is explained for) is at most --max-explain-batch (GET "
                          "/model's limits.max_explain_batch). "
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
    """One text's prediction: its class, each class's probability, and how much of the text the model read."""

    label: str = Field(description="the class predicted: the most probable, or by the service's threshold (GET "
                                   "/model's threshold) where it has one")
    confidence: float = Field(description="the label's probability, from 0 to 1")
    probabilities: dict[str, float] = Field(description="each class's probability by name, from 0 to 1, summing to 1 "
                                                        "(a calibrated run's after its temperature, GET /model's "
                                                        "temperatures; an ensemble's, its members' mean)")
    # (Every backend counts them: never null.)
    unknown_tokens: int = Field(description="how many of the tokens the model read are <unk>: words its vocabulary "
                                            "lacks, which tell it nothing; past a quarter of tokens_read, the answer "
                                            "rests on few known words")
    tokens_read: int = Field(description="how many tokens the model read: after truncation to its max_len, or for a "
                                         "run that reads long texts as windows, to what its windows cover; 0 for an "
                                         "empty or blank text, answered as every empty text is")


class PredictResponse(BaseModel):
    """/predict's answer."""

    predictions: list[PredictionOut] = Field(description=_IN_ORDER)


class LabelSetOut(BaseModel):
    """One text's prediction by a multi-label run: its set of labels, each label's probability, and how much of the
    text the model read."""

    labels: list[str] = Field(description="every label whose probability reaches its threshold (GET /model's "
                                          "thresholds, tuned on validation), most probable first; possibly none")
    probabilities: dict[str, float] = Field(description="each label's own sigmoid probability by name, from 0 to 1: "
                                                        "they need not sum to 1")
    unknown_tokens: int = PredictionOut.model_fields["unknown_tokens"]
    tokens_read: int = PredictionOut.model_fields["tokens_read"]


class LabelSetResponse(BaseModel):
    """/predict's answer from a multi-label run."""

    predictions: list[LabelSetOut] = Field(description=_IN_ORDER)


class PoolingAttentionOut(BaseModel):
    """The pooling layer's weight per token, answered beside another method's scores where the model pools by
    attention: where the pooling looked, the same for every class, not why the model decided."""

    weights: list[float] = Field(description="one per token, in the order of tokens, from 0 to 1, summing to 1")
    per_class: Literal[False] = Field(description="always false: the weights are the same whichever class is "
                                                  "explained")
    uniform_weight: float = Field(description="1 / the number of tokens: each token's weight were the pooling to "
                                              "look at every token alike")
    description: str = Field(description="what the weights are, in words")


_ONLY_IG = "integrated-gradients only"
_CUT = "only where the text was longer than the model reads (its max_len)"


class ExplanationOut(BaseModel):
    """One text's explanation by one method, for one class: a score per token the model read, and what a score
    means. A field said to be "only" somewhere is absent elsewhere. Each holds label (a single-label run's) or labels
    (a multi-label run's), never both nor neither."""

    # (One model for both kinds of run, not one per kind as /predict has: two would repeat every other field, in
    # to_dict's order. oneOf is how the schema itself says that exactly one of label and labels is there.)
    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["label"]}, {"required": ["labels"]}]})

    # In the order Explanation.to_dict gives its keys, which is the order the answer writes them in. (Its
    # self_attentions and attention_window are not here: /explain asks for no self-attention maps.)
    text: str = Field(description="the text, as sent")
    method: str = Field(description="the method that scored the tokens: attention, rollout, grad-input, "
                                    "integrated-gradients or occlusion")
    description: str = Field(description="what a score means by this method (attention's: where the pooling layer "
                                         "looked, not necessarily why the model decided)")
    label: str = Field(None, description="a single-label run's only (a multi-label run's has labels in its place): "
                                         "the class predicted, as /predict answers it (by the service's threshold, "
                                         "GET /model's threshold, where it has one)")
    labels: list[str] = Field(None, description="a multi-label run's only (a single-label run's has label in its "
                                                "place): the labels it predicts, as /predict answers them, most "
                                                "probable first; possibly none")
    target: str = Field(description="the class the scores explain: the request's target, else the predicted one (a "
                                    "multi-label run's: one label, each predicted one explained in turn, or its most "
                                    "probable if none)")
    probability: float = Field(description="the target's probability, from 0 to 1 (a multi-label run's: its own "
                                           "sigmoid probability)")
    probabilities: dict[str, float] = Field(description="each class's probability by name, as /predict answers them")
    tokens: list[str] = Field(description="the tokens the model read, in order (<unk> for a word its vocabulary "
                                          "lacks)")
    scores: list[float] = Field(description="one per token, in the order of tokens, meaning what description says; "
                                            "grad-input's, integrated-gradients' and occlusion's are signed, below 0 "
                                            "for evidence against the target")
    completeness_error: float = Field(None, description=f"{_ONLY_IG}: |sum(scores) - log_odds_change| / "
                                                        f"|log_odds_change|, how far its scores are from adding up "
                                                        f"to the change they share out")
    log_odds_change: float = Field(None, description=f"{_ONLY_IG}: the target's log-odds at the text minus at its "
                                                     f"baseline, <pad> at every token")
    steps: int = Field(None, description=f"{_ONLY_IG}: how many gradients it took along the path from the baseline")
    branch_margins: dict[str, float] = Field(
        None, description="only for a model of more than one branch (self-attn with its n-gram branch): how much "
                          "each branch (attention, n-gram) pushed the target, its logit of it minus the mean of its "
                          "other logits (a multi-label run's: its logit of it; a calibrated run's over its "
                          "temperature); they add up to the model's, so they show which branch decided")
    tokens_cut: int | None = Field(None, description=f"{_CUT}: how many of its tokens were cut before the model read "
                                                     f"them, which tokens lacks; null: some, not counted, as a text "
                                                     f"far longer is read by its ends only")
    cut_at: int = Field(None, description=f"{_CUT}: the index in tokens before which the cut ones stood")
    unknown_tokens: int = Field(description="how many of tokens are <unk>: words the model's vocabulary lacks, which "
                                            "tell it nothing (0 for an empty text, whose one <unk> stands in its "
                                            "place)")
    unknown_note: str | None = Field(description="a line saying so where more than a quarter of tokens are <unk>, "
                                                 "the answer resting on few known words, or where the text is empty; "
                                                 "null for fewer")
    pooling_attention: PoolingAttentionOut = Field(
        None, description="only where the model pools by attention and attention is not among the methods asked (its "
                          "scores are these weights): the pooling weights beside the scores")


class ExplainResponse(BaseModel):
    """/explain's answer."""

    explanations: list[ExplanationOut] = Field(
        description="text by text, in the order the texts were sent: a text's one per method, in the order asked (a "
                    "multi-label run's: per label it is explained for, most probable first, one per method)")


class ErrorOut(BaseModel):
    """An error's answer (its status says which kind)."""

    detail: str = Field(description="what was wrong, in one line")


def error_responses(statuses: dict[int, str]) -> dict:
    """FastAPI ``responses=`` for the error answers a route gives, each ``{"detail": "..."}``. Declaring 422
    replaces FastAPI's own schema for it, a list of validation errors, which this app never sends (``_invalid``).

    >>> error_responses({413: "over a limit"})[413]["description"]
    'over a limit'
    """
    return {status: {"model": ErrorOut, "description": text} for status, text in statuses.items()}


BUSY = "too many requests in flight, or the server stopping: retry after the Retry-After header's seconds"
BODY_ERRORS = {  # (the errors of a route that reads a JSON body)
    400: "the body is not JSON the server can read",
    408: "the body did not arrive within the limit's seconds",
    413: "over a limit (body bytes, texts, characters per text)",
    415: "the body was not sent as application/json, or was sent compressed (a Content-Encoding)",
    422: "a body of the wrong shape (a field named twice, too), or no text",
    503: BUSY,
}


def error_field(error: dict) -> str:
    """Where a validation error sits, e.g. ``texts.1`` (FastAPI's location starts with "body"); a field the body
    should not have is named by its start, as a megabyte-long name is no use echoed whole.

    >>> error_field({"loc": ("body", "texts", 1)}), error_field({"loc": ("body", "x" * 100)})
    ('texts.1', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...')
    """
    return shown(".".join(str(part) for part in error["loc"][1:]), write=str) or "body"


_SHAPE = 'send a JSON object: {"texts": ["a text", ...]} or {"text": "a text"}'
# The next step after pydantic's message, where a body's shape is wrong: (where, error type) -> (the input it
# describes, what to send). A text where a list goes is one text; a number there is neither, and told no next step.
_NEXT_STEP = {("body", "model_attributes_type"): (object, _SHAPE),
              ("texts", "list_type"): (str, 'one text goes as {"text": "..."}'),
              ("text", "string_type"): (list, 'several go as {"texts": [...]}')}


def error_message(error: dict) -> str:
    """A validation error's message; a validator's own without pydantic's "Value error, " before it; a body of the
    wrong shape told the shape to send.

    >>> error_message({"type": "value_error", "msg": "Value error, no text", "ctx": {"error": ValueError("no text")}})
    'no text'
    >>> error_message({"type": "list_type", "loc": ("body", "texts"), "msg": "Input should be a valid list",
    ...                "input": "a"})
    'Input should be a valid list; one text goes as {"text": "..."}'
    """
    if error["type"] == "value_error":
        return str(error["ctx"]["error"])
    where = error_field(error)
    if where == "body" and error["type"] == "missing":  # (no body at all: pydantic's "Field required")
        return f"empty; {_SHAPE}"
    described, next_step = _NEXT_STEP.get((where, error["type"]), (None, ""))
    return f"{error['msg']}; {next_step}" if described and isinstance(error.get("input"), described) else error["msg"]
