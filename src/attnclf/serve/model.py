"""The model a service answers with (``ServedModel``) and what it says of it: its backend, the weights' and the
whole model's ids (``weights_id``, ``model_id``), its temperatures and thresholds, GET /model's account of it
(``run_summary``, ``export_summary``), what /docs says of it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

from .. import __version__
from ..checks import by_field
from ..errors import shown
from ..export.runtime import OnnxClassifier
from ..prediction import ClassThreshold, class_threshold, joined_text_columns
from .limits import ServeLimits

WEIGHTS_HEADER = "X-Attnclf-Weights"  # on each /predict and /explain answer: ``weights_id``, as GET /model gives it
# Beside it: ``model_id``, which changes with anything that changes the answers (a temperature, thresholds) too
MODEL_HEADER = "X-Attnclf-Model"
SHOWN_THRESHOLDS = 3  # a reload's line names the first this-many labels whose threshold moved
NO_EXPLANATIONS = ("this service runs the exported ONNX graph, which gives no explanations: `attnclf serve RUN_DIR` "
                   "(the PyTorch backend) explains")


def backend_name(classifier) -> str:
    """What runs ``classifier``, as GET /model names it: "torch", or "onnx" / "onnx-int8" for an ``OnnxClassifier``
    (which of its graphs).

    >>> backend_name(object())
    'torch'
    """
    if isinstance(classifier, OnnxClassifier):
        return "onnx-int8" if classifier.int8 else "onnx"
    return "torch"


def export_summary(classifier: OnnxClassifier) -> dict:
    """GET /model's account of an ONNX export: what its export.json records, under the keys the PyTorch backend's
    answer uses (an export holds no model config, training versions or refit, and no explanation methods).

    >>> # export_summary(OnnxClassifier.load("runs/demo"))["explain_methods"]   # []
    """
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


def run_summary(classifier, explain_methods: list[str], text_columns: dict | None) -> dict:
    """GET /model's account of a PyTorch model (a run's, or an ``Ensemble``'s), as ``export_summary`` gives an
    export's: its labels, model, tokenizer, ``text_columns``, versions, refit, temperatures and ``explain_methods``.

    >>> # run_summary(Classifier.load("runs/demo"), ["attention", "occlusion"], None)["explain_default"]  # 'occlusion'
    """
    from ..explain.methods import DEFAULT_METHOD

    config = classifier.config  # an ensemble's: its first member's
    members = classifier.members if hasattr(classifier, "members") else [classifier]
    configs = [member.config["model"]["config"] for member in members]
    return {
        "labels": classifier.label_names,
        # A `train --seeds` ensemble's members share a recipe; one built in Python may mix models, whose names
        # are all given and whose configs differ (None). Its parameters are all of theirs.
        "model": {"name": served_model_name(classifier),
                  "parameters": sum(m.config["model"]["parameters"] for m in members),
                  "config": configs[0] if all(c == configs[0] for c in configs) else None},
        "ensemble_members": len(members),
        # (as the tokenizer read them: a field config.json leaves out is its default)
        "tokenizer": {"kind": members[0].tokenizer.config.kind, "max_len": members[0].tokenizer.config.max_len,
                      "vocab_size": members[0].tokenizer.vocab_size,
                      "truncation": members[0].tokenizer.config.truncation},
        "windows": config["settings"].get("windows"),  # long texts read as overlapping windows, or None
        "text_columns": text_columns,
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
    }


def _explain_methods(classifier) -> list[str]:
    """The explanation methods a PyTorch ``classifier`` gives: none from an ``Ensemble``, whose members tokenise and
    attend each their own way (``Ensemble.explain`` refuses)."""
    from ..explain import available_methods

    if hasattr(classifier, "members"):
        return []
    return available_methods(classifier.model)


def served_model_name(classifier) -> str:
    """What model ``classifier`` runs, by its run's config: an ensemble's distinct member models joined by " + ", in
    member order (``attnclf.models.model_name`` names a model by its class instead).

    >>> class Run:
    ...     def __init__(self, name): self.config = {"model": {"name": name}}
    >>> class Mixed:
    ...     members = [Run("boe"), Run("self-attn"), Run("boe")]
    >>> served_model_name(Mixed()), served_model_name(Run("lstm"))
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
        return _description(backend_name(self.classifier), self.explain_methods,
                            served_model_name(self.classifier), max_explanations, self.multi_label)
