"""Predict from an ONNX export with onnxruntime, tokenizers and numpy only: this module imports no torch.

An export directory (written by ``attnclf export RUN_DIR --format onnx``, by
default ``RUN_DIR/onnx``) holds everything inference needs:

```
model.onnx        inputs input_ids (int64) and attention_mask (bool), both [batch, seq];
                  outputs logits [batch, classes] and, for attention-pooling models,
                  pooling_weights [batch, seq]; probabilities are softmax(logits / temperature),
                  or for a multi-label run sigmoid(logits / temperature) per label
model.int8.onnx   the same graph with int8 dynamic quantisation (only with --quantize)
tokenizer.json    the run's tokenizer (Hugging Face tokenizers format)
labels.json       label names in class-index order
export.json       what was exported from where (and a sha256 of those weights), the tokenizer settings, and the
                  measured parity, and the sha256 of each graph and the tokenizer (a file copied in from
                  another export is refused); loaded from inside its run, an export of weights the run has
                  since replaced (`train --resume`) is refused; a multi-label run's also holds multi_label
                  (true) and its thresholds.json's threshold per label, which a label's probability must reach
```

>>> # from attnclf.export import OnnxClassifier
>>> # clf = OnnxClassifier.load("runs/demo")          # finds runs/demo/onnx
>>> # clf.predict(["not good, but the ending was wonderful"])[0].label
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ..checks import check_threads, true_or_false
from ..ensemble import refuse_ensemble_dir
from ..errors import AttnclfError, RunDirError, shown
from ..prediction import (LabelSetPrediction, Prediction, check_texts, class_threshold, model_repr, predictions,
                          tempered_thresholds)
from ..rundir import (check_label_names, checked_temperature, checked_thresholds, file_sha256, read_json,
                      read_temperature, read_thresholds, what_else_the_folder_is)
from ..text.tokenizer import PAD_ID, Tokenizer, TokenizerConfig

EXPORT_FORMAT_VERSION = 1
# A multi-label export's: a reader of format 1 knows no sigmoid, and would read its label probabilities as a
# softmax's and answer one label a text; it refuses format 2 instead. Single-label exports stay format 1, which every
# attnclf reads.
MULTI_LABEL_FORMAT_VERSION = 2
EXPORT_FILES = ("model.onnx", "tokenizer.json", "labels.json", "export.json")
GRAPHS = ("model.onnx", "model.int8.onnx")  # float32 and, after --quantize, int8


def imported_onnxruntime():
    """onnxruntime, imported with its telemetry off unless the environment's ORT_DISABLE_TELEMETRY asks otherwise (0).

    Its official builds (1.32) start Microsoft's telemetry as they are imported: an upload over HTTPS, and a device
    id persisted under ~/.cache/Microsoft, which on a read-only filesystem printed a coloured warning on stderr, where
    `serve --access-log json` promises JSON. Its logging is left as it is: its real warnings and errors still show.
    Set before its first import in the process, or it has no effect.

    >>> imported_onnxruntime().__name__
    'onnxruntime'
    """
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime

    return onnxruntime


def find_export(path: str | Path) -> Path:
    """The export directory at ``path``, or in its ``onnx/`` folder (a run directory that was exported); ``path`` may
    name one of an export's graphs too. Anything else is one line saying what to give or to run first.

    >>> find_export("no/such/folder")
    Traceback (most recent call last):
    ...
    attnclf.errors.RunDirError: no/such/folder does not exist
    """
    path = Path(path)
    if path.is_file() and path.name in GRAPHS and (path.parent / "export.json").is_file():  # a graph: its export
        return find_export(path.parent)
    for candidate in (path, path / "onnx"):
        if (candidate / "export.json").is_file():
            missing = [name for name in EXPORT_FILES if not (candidate / name).is_file()]
            if missing:
                raise RunDirError(f"ONNX export {candidate} is incomplete: missing {', '.join(missing)}")
            return candidate
    if not path.is_dir():
        raise RunDirError(f"{path} is not an ONNX export; give its folder" if path.exists()
                          else f"{path} does not exist")
    refuse_ensemble_dir(path)
    if (path / "config.json").is_file():
        _refuse_unexportable_run(path)
    elif other := what_else_the_folder_is(path):  # (a folder of runs: "export it first" would be refused)
        raise RunDirError(other)
    raise RunDirError(f"no ONNX export in {path}: run `attnclf export {path} --format onnx` first")


def _refuse_unexportable_run(run_dir: Path) -> None:
    """Export's own reason, if ``run_dir`` cannot be exported: "export it first" would only lead to it."""
    try:  # (the judgement needs PyTorch, as export does; without it, exporting first is the advice)
        from ..classifier import Classifier
        from .onnx import refuse_unexportable
    except ImportError:
        return
    try:
        clf = Classifier.load(run_dir, device="cpu")
    except AttnclfError:
        return  # (a run that does not load: export says what is wrong with it)
    try:
        refuse_unexportable(clf, run_dir)
    except AttnclfError as exc:
        raise RunDirError(f"no ONNX export in {run_dir}, and it cannot have one: {exc}") from None


def weights_fingerprint(run_dir: Path) -> str:
    """sha256 of a run's model.safetensors: whether an export still holds the run's weights.

    >>> # weights_fingerprint(Path("runs/demo")) == read_manifest(Path("runs/demo/onnx"))["weights_sha256"]
    """
    return file_sha256(run_dir / "model.safetensors")


def export_format_version(multi_label: bool) -> int:
    """The format_version an export's manifest records: ``MULTI_LABEL_FORMAT_VERSION`` for a multi-label run's.

    >>> export_format_version(False), export_format_version(True)
    (1, 2)
    """
    return MULTI_LABEL_FORMAT_VERSION if multi_label else EXPORT_FORMAT_VERSION


def _check_current(directory: Path, config: dict) -> None:
    """Refuse an export in a run directory's onnx/ whose weights changed since (`train --resume` trained on, in the
    run or a copy of it), or whose temperature or thresholds did: it would answer for the earlier model. An export
    elsewhere stands alone, unchecked."""
    directory = directory.resolve()  # (`predict . --backend onnx` from inside the export)
    run_dir = directory.parent
    if "weights_sha256" not in config or directory.name != "onnx" or not (run_dir / "model.safetensors").is_file():
        return
    if weights_fingerprint(run_dir) != config["weights_sha256"]:
        raise RunDirError(f"{directory} was exported from earlier weights of {run_dir} (it trained on since); "
                          f"export it again: `attnclf export {run_dir} --format onnx`")
    temperature = read_temperature(run_dir)
    if temperature != config.get("temperature", 1.0):
        raise RunDirError(f"{directory} was exported with temperature {config.get('temperature', 1.0):g} and "
                          f"{run_dir} now has {temperature:g} (`attnclf calibrate` since): its probabilities would not "
                          f"be the run's; export it again: `attnclf export {run_dir} --format onnx`")
    exported = config.get("thresholds")  # (checked against labels.json as the export loads)
    # (the thresholds it cuts its probabilities at: a calibrated run's, moved with them)
    if (config.get("multi_label") and isinstance(exported, dict)
            and _tempered(read_thresholds(run_dir, list(exported)), temperature) != exported):
        raise RunDirError(f"{directory} was exported with other thresholds than {run_dir / 'thresholds.json'} now "
                          f"holds: its label sets would not be the run's; export it again: "
                          f"`attnclf export {run_dir} --format onnx`")


def _tempered(thresholds: dict[str, float] | None, temperature: float) -> dict[str, float] | None:
    """A run's ``thresholds`` (thresholds.json) as its ``Classifier`` applies them at ``temperature``."""
    if thresholds is None:
        return None
    return dict(zip(thresholds, tempered_thresholds(list(thresholds.values()), temperature).tolist()))


def _check_exported(file: Path, config: dict) -> None:
    """Refuse ``file`` unless it is the one exported beside this export.json: a graph or tokenizer copied in from
    another export would be read in ids its partner never learned, silently whenever the vocabulary sizes agree.
    An export that records none (from before 2026-11-28) is not checked; one that records others but not ``file``
    made none (an int8 graph beside an export without --quantize came from elsewhere)."""
    if "files_sha256" not in config:
        return
    recorded = config["files_sha256"].get(file.name)
    if recorded is None or file_sha256(file) != recorded:
        why = "it records no sha256 for it" if recorded is None else "its sha256 differs"
        raise RunDirError(f"{file} is not the file exported with {file.parent / 'export.json'} ({why}): "
                          f"export again (`attnclf export RUN --format onnx"
                          f"{' --quantize' if file.name == 'model.int8.onnx' else ''}`) rather than mixing the files "
                          f"of two")


def _text_column_from_source(directory: Path, config: dict) -> dict:
    """``{"text_column": ...}`` of the run an export came from, for an export from before export.json recorded it,
    if the export is in that run's folder (onnx/, where `attnclf export` puts them); ``{}`` where the export records
    it, is elsewhere, or the run's config.json does not say. A run elsewhere that export.json names is not read: a
    folder someone sent would have any config.json on this machine read."""
    run_dir = directory.resolve().parent
    if "text_column" in config or str(run_dir) != config.get("source"):
        return {}
    try:
        source = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        return {"text_column": source["settings"]["data"]["text_column"]}
    except (OSError, ValueError, RecursionError, KeyError, TypeError):
        return {}


def read_manifest(directory: Path) -> dict:
    """An export's export.json, refused in one line naming it and its field unless it is of this format and holds
    what its readers rely on (its tokenizer settings are checked as they are read, ``TokenizerConfig.from_dict``).

    >>> # read_manifest(Path("runs/demo/onnx"))["model"]["name"]   # -> 'self-attn'
    """
    path = directory / "export.json"
    manifest = read_json(path)
    if not isinstance(manifest, dict):
        raise RunDirError(f"{path}: expected a JSON object, got {type(manifest).__name__}")
    if manifest.get("format_version") not in (EXPORT_FORMAT_VERSION, MULTI_LABEL_FORMAT_VERSION):
        raise RunDirError(f"{path} has format_version {shown(manifest.get('format_version'))}; this attnclf reads "
                          f"{EXPORT_FORMAT_VERSION} and {MULTI_LABEL_FORMAT_VERSION}")
    multi_label = manifest.get("multi_label", False)  # (exports of format 1 record none: single-label)
    if not isinstance(multi_label, bool):
        raise RunDirError(f"{path}: multi_label must be true or false, got {shown(multi_label)}")
    if manifest["format_version"] != export_format_version(multi_label):
        raise RunDirError(f"{path}: multi_label needs format_version {MULTI_LABEL_FORMAT_VERSION} and single-label "
                          f"{EXPORT_FORMAT_VERSION}, got multi_label {str(multi_label).lower()} with format_version "
                          f"{manifest['format_version']}")
    checked_temperature(manifest.get("temperature", 1.0), path)
    model = manifest.get("model")
    if not (isinstance(model, dict) and isinstance(model.get("name"), str) and type(model.get("parameters")) is int
            and type(model.get("vocab_size", 0)) is int):  # (exports from before 2026-11-27 record no vocab_size)
        raise RunDirError(f"{path}: model must be a JSON object with a name (a string), parameters and vocab_size "
                          f"(whole numbers), got {shown(model)}")
    column = manifest.get("text_column", "text")
    if not (isinstance(column, str) or isinstance(column, list) and column and all(isinstance(c, str) for c in column)):
        raise RunDirError(f"{path}: text_column must be a column's name or a list of them, got {shown(column)}")
    fingerprints = manifest.get("files_sha256", {})  # (exports from before 2026-11-28 record none)
    if not (isinstance(fingerprints, dict) and all(isinstance(name, str) and isinstance(digest, str)
                                                   for name, digest in fingerprints.items())):
        raise RunDirError(f"{path}: files_sha256 must be a JSON object of file names and sha256 digests, got "
                          f"{shown(fingerprints)}")
    joined = manifest.get("text_columns")
    if joined is not None and not (isinstance(joined, dict) and isinstance(joined.get("joined_by"), str) and
                                   isinstance(joined.get("names"), list) and
                                   all(isinstance(name, str) for name in joined["names"])):
        raise RunDirError(f"{path}: text_columns must be null or a JSON object of names (a list) and joined_by (a "
                          f"string), got {shown(joined)}")
    return manifest


def sigmoid(logits: np.ndarray) -> np.ndarray:
    """Element-wise sigmoid in float32, a multi-label run's probability per label, without overflow warnings.

    >>> sigmoid(np.array([[0.0, -1000.0, 1000.0]])).round(3).tolist()
    [[0.5, 0.0, 1.0]]
    """
    return (0.5 * (1 + np.tanh(0.5 * np.asarray(logits, dtype=np.float64)))).astype(np.float32)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float32, stable for large logits.

    >>> softmax(np.array([[0.0, 0.0], [1000.0, 0.0]])).round(3).tolist()
    [[0.5, 0.5], [1.0, 0.0]]
    """
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return (shifted / shifted.sum(axis=-1, keepdims=True)).astype(np.float32)


class OnnxClassifier:
    """An exported model: the ``predict`` / ``predict_proba`` / ``logits`` of ``attnclf.Classifier``, on onnxruntime.

    An export of a multi-label run (``multi_label``, from its manifest) predicts a label set per text, as
    ``Classifier`` does: each label whose sigmoid probability reaches its threshold in ``thresholds`` (the run's
    thresholds.json as exported; None for a single-label export).

    >>> # OnnxClassifier.load("runs/demo/onnx", int8=True).predict_proba(["great film"])
    """

    def __init__(self, session, tokenizer: Tokenizer, label_names: list[str], config: dict | None = None,
                 batch_size: int = 64, int8: bool = False):
        self.session = session
        self.tokenizer = tokenizer
        self.label_names = label_names
        self.config = config or {}
        self.batch_size = batch_size
        self.int8 = int8  # which graph the session runs, the quantised one or float32
        self.has_pooling_weights = any(o.name == "pooling_weights" for o in session.get_outputs())
        self.multi_label = self.config.get("multi_label", False)
        self.thresholds = (np.array([self.config["thresholds"][name] for name in label_names])
                           if self.multi_label else None)

    def __repr__(self) -> str:
        temperature = self.config.get("temperature", 1.0)
        return model_repr("OnnxClassifier", model=self.config.get("model", {}).get("name"), labels=self.label_names,
                          multi_label=self.multi_label or None, int8=self.int8 or None,
                          temperature=None if temperature == 1 else temperature)

    @classmethod
    def load(cls, path: str | Path, *, int8: bool = False, threads: int | None = None) -> "OnnxClassifier":
        """Load an export directory, the ``onnx/`` export inside a run directory, or one of an export's graphs.

        ``int8`` picks the quantised graph (a path to ``model.int8.onnx`` picks it too); ``threads`` caps
        onnxruntime's intra-op threads (default: onnxruntime's choice, one per core).

        >>> # OnnxClassifier.load("runs/demo", int8=True, threads=1)  # after `attnclf export runs/demo --quantize`
        """
        onnxruntime = imported_onnxruntime()
        threads = check_threads(threads)
        int8 = true_or_false(int8, "int8")  # ("no" is truthy: it would load the quantised graph)
        named = Path(path).name if Path(path).is_file() else None
        if named == "model.onnx" and int8:
            raise AttnclfError(f"{path} is the float32 graph; give model.int8.onnx, or the folder, with int8")
        int8 = int8 or named == "model.int8.onnx"  # the graph named is the graph loaded
        directory = find_export(path)
        config = read_manifest(directory)
        _check_current(directory, config)
        graph = directory / ("model.int8.onnx" if int8 else "model.onnx")
        if not graph.is_file():
            raise RunDirError(f"{graph} missing: export again with --quantize for an int8 graph")
        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        try:
            session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for corrupt graphs
            raise RunDirError(f"{graph}: not a loadable ONNX graph ({str(exc).splitlines()[0]})") from None
        _check_exported(graph, config)
        tokenizer = Tokenizer.load(directory / "tokenizer.json",
                                   TokenizerConfig.from_dict(config.get("tokenizer"), directory / "export.json"),
                                   words=config["model"].get("vocab_size"))
        _check_exported(directory / "tokenizer.json", config)  # (after the size check: its message says more)
        classes = session.get_outputs()[0].shape[-1]  # (the logits' width is fixed in the graph)
        labels = check_label_names(read_json(directory / "labels.json"), classes, directory / "labels.json")
        if config.get("multi_label"):
            config["thresholds"] = checked_thresholds(config.get("thresholds"), labels, directory / "export.json")
        config |= _text_column_from_source(directory, config)
        return cls(session, tokenizer, labels, config, int8=int8)

    def scores(self, texts: Sequence[str], logits: bool = False
               ) -> tuple[np.ndarray, list[list[int]], list[np.ndarray | None]]:
        """One pass over ``texts``, as ``Classifier.scores`` gives it (what ``predict_proba``, ``logits`` and
        ``predict`` read, and an ``Ensemble`` of exports averages): the probabilities (or, with ``logits``, the
        graph's logits), one row per text; each text's token ids; and each text's pooling weights (None for a graph
        without them).

        >>> # probabilities, ids, attention = OnnxClassifier.load("runs/demo").scores(["great film"])
        """
        ids = self.tokenizer.encode(check_texts(texts))
        scores = np.zeros((len(ids), len(self.label_names)), dtype=np.float32)
        attention: list[np.ndarray | None] = [None] * len(ids)
        to_probabilities = sigmoid if self.multi_label else softmax  # (the graph gives logits)
        temperature = self.config.get("temperature", 1.0)
        # Length-sorted batches keep padding small, as attnclf.text.BucketBatches does for PyTorch.
        order = np.argsort([len(seq) for seq in ids], kind="stable")
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            input_ids = np.full((len(rows), max(len(ids[i]) for i in rows)), PAD_ID, dtype=np.int64)
            for row, i in enumerate(rows):
                input_ids[row, : len(ids[i])] = ids[i]
            outputs = self.session.run(None, {"input_ids": input_ids, "attention_mask": input_ids != PAD_ID})
            scores[rows] = outputs[0] if logits else to_probabilities(outputs[0] / temperature)
            if self.has_pooling_weights:
                for row, i in enumerate(rows):
                    attention[i] = outputs[1][row, : len(ids[i])]
        return scores, ids, attention

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities, one row per text, columns in ``label_names`` order (a multi-label export's: each
        label's own sigmoid probability; rows need not sum to 1).

        >>> # OnnxClassifier.load("runs/demo").predict_proba(["great film"])  # array([[0.08, 0.92]], dtype=float32)
        """
        return self.scores(texts)[0]

    def logits(self, texts: Sequence[str]) -> np.ndarray:
        """The model's logits, one row per text, before the temperature and the softmax or sigmoids
        (``Classifier.logits``).

        >>> # OnnxClassifier.load("runs/demo").logits(["great film"])  # array([[-2.1,  2.3]], dtype=float32)
        """
        return self.scores(texts, logits=True)[0]

    def predict(self, texts: Sequence[str], tokens: bool = True, threshold: tuple[str, float] | str | None = None
                ) -> list[Prediction] | list[LabelSetPrediction]:
        """Label, confidence, probabilities, tokens, pooling attention and unknown tokens per text, as
        ``Classifier.predict`` gives them (``tokens=False``: without the tokens and attention; ``threshold``: one
        class's operating point applied); a multi-label export's, a ``LabelSetPrediction`` per text.

        >>> # OnnxClassifier.load("runs/demo").predict(["the acting was not bad"])[0].label  # 'positive'
        >>> # OnnxClassifier.load("runs/topics").predict(["the coach praised the album"])[0].labels  # ['sports']
        """
        threshold = class_threshold(threshold, self.label_names, self.multi_label)  # (before the texts are run)
        texts = check_texts(texts)  # (a list, read twice: by the model and by the counts of its tokens)
        return predictions(texts, *self.scores(texts), self.label_names, self.tokenizer, tokens, self.thresholds,
                           threshold)
