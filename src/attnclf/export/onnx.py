"""Export a trained run to ONNX, and prove the export predicts what PyTorch predicts.

>>> # from attnclf.export import check_data, export_onnx
>>> # result = export_onnx("runs/demo", check=check_data("runs/demo"), quantize=True)
>>> # result.manifest["parity"]["max_abs_diff"], result.manifest["int8"]["accuracy_change"]
>>> # export_onnx("runs/demo", check=["the plot was dull", "a brilliant ending"])  # texts alone: parity, no accuracy

The graph comes from PyTorch's TorchScript exporter (``dynamo=False``): it traces these models in well under a
second, handles the dynamic batch and sequence axes, and needs no extra package. Models with an LSTM cannot be
exported: they pack each text to its real tokens, which has no ONNX equivalent that leaves padding out.

Parity is measured on held-out texts (the run's test split, or a file of the user's, labelled or not): every
prediction (a multi-label run's: every label set, at the run's thresholds, which the export records) must match
PyTorch's and every probability must lie within ``PARITY_TOLERANCE``, or the export fails and changes nothing (an
earlier export keeps working). The optional int8 graph (onnxruntime dynamic quantisation) is measured on the same
texts, its agreement and, where they are labelled, its accuracy change recorded, never assumed.
"""

from __future__ import annotations

import copy
import io
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .. import __version__
from ..checks import by_field, check_seed, whole_number
from ..classifier import Classifier
from ..data.base import TextDataset
from ..data.multilabel import multi_hot
from ..errors import AttnclfError, shown
from ..models.attention import MultiHeadSelfAttention
from ..models.base import model_device
from ..models.windows import window_config
from ..prediction import (check_texts, decided_rows, joined_text_columns, trained_label_delimiter,
                         trained_text_column)
from ..rundir import (ENSEMBLE_FILE, atomic_write_bytes, atomic_write_json, file_sha256, first_missing_folder,
                      folder_lock, is_multi_label, loaded_unchanged, prepare_output_dir, refuse_if_held,
                      remove_empty_folders, written_atomically)
from ..text.tokenizer import PAD_ID, UNK_ID
from ..training.pretrain import PRETRAIN_FILE
from .runtime import OnnxClassifier, export_format_version, imported_onnxruntime

OPSET = 17
PARITY_TOLERANCE = 1e-4


@dataclass
class OnnxExport:
    """What ``export_onnx`` wrote: the export's folder and its manifest (export.json)."""

    directory: Path
    manifest: dict  # the contents of export.json

    def summary(self) -> str:
        """Where the export went and how closely it answers as PyTorch does (its int8 graph too, where made).

        >>> OnnxExport(Path("onnx"), {"parity": {"texts": 8, "prediction_agreement": 1.0, "max_abs_diff": 2e-7,
        ...                                      "tolerance": 1e-4, "torch_accuracy": 0.875}}).summary().splitlines()[1]
        'parity on 8 texts: predictions agree 100.00%, max |p_onnx - p_torch| 2.00e-07 (tolerance 1e-04)'
        """
        parity = self.manifest["parity"]
        unlabelled = "" if "torch_accuracy" in parity else " (unlabelled: accuracy not measured)"
        lines = [f"exported to {self.directory}",
                 f"parity on {parity['texts']} text{'s' * (parity['texts'] != 1)}{unlabelled}: predictions agree "
                 f"{parity['prediction_agreement']:.2%}, max |p_onnx - p_torch| {parity['max_abs_diff']:.2e} "
                 f"(tolerance {parity['tolerance']:.0e})"]
        if int8 := self.manifest.get("int8"):
            accuracy = (f"accuracy {int8['accuracy']:.4f} ({int8['accuracy_change']:+.4f} vs PyTorch), "
                        if "accuracy" in int8 else "")
            lines.append(f"int8 ({int8['bytes'] / 1024:.0f} KiB vs {int8['fp32_bytes'] / 1024:.0f} KiB): {accuracy}"
                         f"predictions agree {int8['prediction_agreement']:.2%}, max |p_int8 - p_torch| "
                         f"{int8['max_abs_diff']:.2e}")
        return "\n".join(lines)


class _LogitsAndPooling(nn.Module):
    """The graph's whole interface: (input_ids, attention_mask) -> logits (, pooling weights)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        out = self.model(input_ids, attention_mask)
        return (out.logits,) if out.pooling_weights is None else (out.logits, out.pooling_weights)


def refuse_unexportable(clf: Classifier, run_dir: str | Path) -> None:
    """Raise ``AttnclfError`` saying why ``clf`` (loaded from ``run_dir``) cannot be exported, if it cannot: the
    one judgement `attnclf export` and a missing export's error (``OnnxClassifier.load``) both give.

    >>> # refuse_unexportable(Classifier.load("runs/lstm"), "runs/lstm")
    >>> # AttnclfError: LSTMMean runs an LSTM over each text's real tokens only (packed), which ONNX cannot ...
    """
    if window_config(clf.model) is not None:
        raise AttnclfError(f"{run_dir} reads long texts as windows (--windows); ONNX export of windowed runs is "
                           f"not supported: the runtime feeds one truncated sequence per text")
    _refuse_lstm(clf.model)


def _refuse_lstm(model: nn.Module) -> None:
    if any(isinstance(module, nn.LSTM) for module in model.modules()):
        raise AttnclfError(f"{type(model).__name__} runs an LSTM over each text's real tokens only (packed), which "
                           "ONNX cannot express; export a model without an LSTM, or predict with --backend torch")


def onnx_graph(model: nn.Module) -> bytes:
    """``model`` (in eval mode) as ONNX bytes, with dynamic batch and sequence axes; traced on the CPU, a copy of
    a model on a GPU.

    >>> from attnclf.models import build_model
    >>> len(onnx_graph(build_model("boe", vocab_size=20).eval())) > 0
    True
    """
    _refuse_lstm(model)
    if model_device(model).type != "cpu":  # (traced where onnxruntime runs it; the caller's model stays where it is)
        model = copy.deepcopy(model).cpu()
    # The second row is padded, so the traced graph holds the masking path; longer than any attention
    # window, so it holds block-local attention too (which also gives exact results on shorter texts).
    # A window of max_len or more never applies: such a model attends in full.
    windows = [module.window for module in model.modules() if isinstance(module, MultiHeadSelfAttention)
               and 0 < module.window < model.config.max_len]
    input_ids = torch.full((2, max([3] + [window + 1 for window in windows])), UNK_ID, dtype=torch.long)
    input_ids[1, 1:] = PAD_ID
    wrapper = _LogitsAndPooling(model).eval()
    with torch.no_grad():
        outputs = ["logits"] + (["pooling_weights"] if len(wrapper(input_ids, input_ids != PAD_ID)) == 2 else [])
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            "logits": {0: "batch"}, "pooling_weights": {0: "batch", 1: "seq"}}
    graph = io.BytesIO()
    with warnings.catch_warnings():
        # The TorchScript exporter is legacy, by choice (above). Its tracer warns about Python-side checks
        # (max_len, head split) that become constants; the parity check runs the graph on other shapes.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(wrapper, (input_ids, input_ids != PAD_ID), graph, input_names=["input_ids", "attention_mask"],
                          output_names=outputs, dynamic_axes={k: v for k, v in axes.items() if k in outputs
                                                              or k in ("input_ids", "attention_mask")},
                          opset_version=OPSET, dynamo=False)
    return graph.getvalue()


# What parity is measured on: labelled texts (a TextDataset, whose accuracies the manifest records too) or texts alone.
CheckTexts = TextDataset | Sequence[str]


def _texts(check: CheckTexts) -> list[str]:
    return check.texts if isinstance(check, TextDataset) else list(check)


def _checked(check) -> CheckTexts:
    """``check`` as ``export_onnx`` measures parity on it: a ``TextDataset`` as it is, anything else a list of texts
    (``check_texts``), or one line: a single string was measured on its characters, a text each, and published, and
    no texts at all were numpy's "zero-size array to reduction operation maximum".

    >>> _checked("a fine film")
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: pass a list of texts as check, not a single string
    """
    check = check if isinstance(check, TextDataset) else check_texts(check, name="check")
    if len(check) == 0:
        raise AttnclfError("check holds no texts to measure parity on")
    return check


def _accuracy(probabilities: np.ndarray, check: TextDataset, thresholds: np.ndarray | None) -> float:
    """The share of ``check``'s texts predicted right: their class, or a multi-label run's whole label set (the
    subset accuracy `evaluate` reports)."""
    truth = (multi_hot(check.labels, probabilities.shape[1]) if thresholds is not None
             else np.asarray(check.labels)[:, None])
    return float((decided_rows(probabilities, thresholds) == truth).all(axis=1).mean())


def _difference(reference: np.ndarray, probabilities: np.ndarray, thresholds: np.ndarray | None) -> dict:
    agree = (decided_rows(reference, thresholds) == decided_rows(probabilities, thresholds)).all(axis=1)
    return {"max_abs_diff": float(np.abs(reference - probabilities).max()), "prediction_agreement": float(agree.mean())}


def check_data(run_dir: str | Path, file: str | Path | None = None, *, text_column: str | list[str] | None = None,
               label_column: str | None = None, limit: int = 1000, seed: int = 0, data_dir: str | None = None,
               named: Callable[[str], str] = by_field) -> CheckTexts:
    """Texts to measure an export on: ``file``, else the run's own labelled test split (validation if none), its
    dataset looked for in ``data_dir`` first (as ``run_test_data`` does).

    At most ``limit`` texts, a seeded sample. ``file``'s columns default to those the run trained from; a file
    without the label column (unless ``label_column`` names one) or a plain-text file (a text per line) gives its
    texts alone, a list, on which parity is measured without accuracies. Labels are indexed as the run's
    ``labels.json``. Errors name these arguments as ``named`` spells them (the command line: by its flags,
    ``--check-file`` and ``--check-examples`` among them).

    >>> # check_data("runs/demo", limit=500).texts[:2]
    >>> # check_data("runs/demo", "to_score.txt")[:2]  # ['the plot was dull', 'a brilliant ending']: no labels
    """
    from ..data.files import check_file, has_rows, load_file, read_texts, run_columns
    from ..rundir import read_json, read_run_config
    from ..training.run_data import run_test_data

    count = whole_number(limit)
    if count is None:
        raise AttnclfError(f"{named('limit')} must be a whole number, got {shown(limit)}")
    if count < 1:
        raise AttnclfError(f"{named('limit')} must be at least 1, got {shown(count)}: parity is measured on texts")
    seed = check_seed(seed, named("seed"))  # (numpy's sampler took -1 to a traceback)
    if file is None and (text_column or label_column):
        raise AttnclfError(f"{named('text_column')} and {named('label_column')} name the columns of {named('file')}; "
                           f"give it too")
    if file is not None and data_dir:  # (else it would be ignored silently: the run's own data is not read)
        raise AttnclfError(f"{named('data_dir')} says where the run's own dataset is, which {named('file')} replaces; "
                           f"give one")
    config = read_run_config(run_dir)
    label_names = read_json(Path(run_dir) / "labels.json")
    if file is not None:
        saved = config["settings"]["data"]
        columns = text_column or saved.get("text_column", "text")
        labels_in = label_column or saved.get("label_column", "label")
        file = check_file(file)  # (read twice: for its columns, then its rows)
        if (text_column or label_column) and not has_rows(file):  # (read a text per line, the flag went unread)
            raise AttnclfError(f"{named('text_column' if text_column else 'label_column')} names a column of a CSV / "
                               f"TSV / JSONL / Parquet {named('file')}; {file} is read a text per line, which has none")
        with run_columns(text_column, label_column):
            if not label_column and not _labelled(file, columns, labels_in):
                texts = read_texts(file, columns)
                if not texts:
                    raise AttnclfError(f"{named('file')} {file} holds no texts to measure parity on")
                return [texts[i] for i in _sample(len(texts), count, seed)]
            data = load_file(file, columns, labels_in, label_names=label_names, split="check",
                             multi_label=is_multi_label(config),
                             label_delimiter=trained_label_delimiter(config))
    else:
        # (the other labelled texts it advises, where the run has none of its own, are this function's file)
        data = run_test_data(config, label_names, data_dir=data_dir,
                             named=lambda name: named("file" if name == "test_file" else name))
    return data.subset(_sample(len(data), count, seed)) if len(data) > count else data


def _sample(total: int, count: int, seed: int) -> list[int]:
    """``count`` of ``range(total)`` drawn by ``seed``, in order; all of them when there are no more."""
    if total <= count:
        return list(range(total))
    return sorted(np.random.default_rng(seed).choice(total, count, replace=False).tolist())


def _labelled(file: str | Path, text_column, label_column: str) -> bool:
    """Whether ``file`` holds ``label_column``, as its first row shows (a fastText file's lines always hold labels;
    a plain-text file none): a JSON line without it further down is refused as a missing label by ``load_file``."""
    from ..data.files import data_columns, has_rows, is_fasttext_file, iter_rows

    if not has_rows(file):
        return False
    if is_fasttext_file(file):
        return True
    first = next(iter_rows(file, text_column), None)
    return label_column in (data_columns(file) if first is None else first[2])


def export_onnx(run_dir: str | Path, output: str | Path | None = None, *, check: CheckTexts,
                quantize: bool = False) -> OnnxExport:
    """Write ``run_dir``'s model as ONNX (with tokenizer and labels) into ``output`` (default ``run_dir/onnx``).

    ``check`` holds the texts parity is measured on (see ``check_data``): labelled (a ``TextDataset``), the
    manifest records both backends' accuracies too; a list of texts, their agreement alone.
    Raises ``AttnclfError`` when a prediction differs from PyTorch's or a
    probability moves by more than ``PARITY_TOLERANCE``. The folder is held while it is written (``folder_lock``),
    and so is the run when the folder is inside it (a new run there deletes onnx/): one another process is writing
    is refused in one line, before the model is loaded.

    >>> # export_onnx("runs/demo", check=check_data("runs/demo", limit=300), quantize=True).summary()
    """
    check = _checked(check)  # (before the model is loaded)
    refuse_held(run_dir, output)
    *_, directory = written = _written(run_dir, output)
    clf, weights_sha256 = _load_unchanged(run_dir)
    refuse_unexportable(clf, run_dir)  # (before any folder exists)
    graph = onnx_graph(clf.model)
    if any((directory / name).exists() for name in ("config.json", "model.safetensors", ENSEMBLE_FILE,
                                                     PRETRAIN_FILE)):
        # (the export's tokenizer.json and labels.json would replace the run's own, which its model needs)
        raise AttnclfError(f"{directory} holds a trained run or pretraining; export into another --output (default: "
                           f"{Path(run_dir) / 'onnx'})")
    created = first_missing_folder(directory)
    prepare_output_dir(directory)
    try:
        with ExitStack() as held:
            for folder in written:
                held.enter_context(folder_lock(folder))
            manifest = _publish_checked(clf, weights_sha256, graph, Path(run_dir), directory, check, quantize)
    except BaseException:
        remove_empty_folders(directory, created)  # (its lock file gone first: the folder a failed export made goes)
        raise
    return OnnxExport(directory, manifest)


def _load_unchanged(run_dir: str | Path) -> tuple[Classifier, str]:
    """The run's classifier, on the CPU, and the sha256 of the weights file it was loaded from, unchanged meanwhile
    (``loaded_unchanged``). The load is not held (an export outside the run never holds it: the run may be
    read-only; one into run/onnx holds it once that folder exists), and a checksum taken after alone could name new
    weights beside a graph traced from the old."""
    clf, (weights_sha256,) = loaded_unchanged(
        [Path(run_dir) / "model.safetensors"], lambda: Classifier.load(run_dir, device="cpu"),
        lambda weights: f"{weights} changed while it was exported (trained on: `train --resume`?); nothing was "
                        f"written: export it again once the run is left alone")
    return clf, weights_sha256


def refuse_held(run_dir: str | Path, output: str | Path | None = None) -> None:
    """A one-line error if another process holds a folder ``export_onnx(run_dir, output)`` writes (``folder_lock``):
    ``output``, and the run when ``output`` is inside it. Nothing of the run is read first (one just begun has no
    config.json yet), so a caller that reads it before exporting (`attnclf export`, its ``check_data``) calls this
    before that.

    >>> refuse_held("no/such/run")
    """
    for folder in _written(run_dir, output):
        refuse_if_held(folder)


def _written(run_dir: str | Path, output: str | Path | None) -> list[Path]:
    """The folders ``export_onnx(run_dir, output)`` writes, the one it exports into last: ``output`` (default
    ``run_dir/onnx``), after the run when ``output`` is inside it (a new run there deletes onnx/).

    >>> _written("runs/demo", None), _written("runs/demo", "shipped")
    ([PosixPath('runs/demo'), PosixPath('runs/demo/onnx')], [PosixPath('shipped')])
    """
    if isinstance(output, str) and not output:  # (Path("") is the working folder: the export would land there)
        raise AttnclfError("output is empty: name the folder to export into, or leave it out for run_dir/onnx")
    directory = Path(run_dir) / "onnx" if output is None else Path(output)
    return [Path(run_dir), directory] if _is_inside(directory, run_dir) else [directory]


def _is_inside(folder: Path, run_dir: str | Path) -> bool:
    """Whether ``folder`` is in ``run_dir`` (or is it), however either is named.

    >>> _is_inside(Path("runs/demo/../demo/onnx"), "runs/demo"), _is_inside(Path("shipped"), "runs/demo")
    (True, False)
    """
    return Path(os.path.realpath(folder)).is_relative_to(os.path.realpath(run_dir))


def _publish_checked(clf: Classifier, weights_sha256: str, graph: bytes, run_dir: Path, directory: Path,
                     check: CheckTexts, quantize: bool) -> dict:
    """Build the export aside, measure its parity on ``check``, and publish it into ``directory`` (which this process
    holds) only once parity holds: a failed export leaves an earlier one working. Returns the manifest, which records
    ``weights_sha256``, that of the weights ``clf`` was loaded from (``_load_unchanged``)."""
    onnxruntime = imported_onnxruntime()
    _remove_abandoned_staging(directory)
    staging = Path(tempfile.mkdtemp(prefix=f".export-{os.getpid()}-", dir=directory))
    try:
        atomic_write_bytes(staging / "model.onnx", graph)
        for name in ("tokenizer.json", "labels.json"):
            atomic_write_bytes(staging / name, (Path(run_dir) / name).read_bytes())
        texts = _texts(check)
        reference = clf.predict_proba(texts)
        # What OnnxClassifier reads to answer as the run does: a multi-label run's sigmoids, and its thresholds.
        answers = ({"multi_label": True, "thresholds": dict(zip(clf.label_names, clf.thresholds.tolist()))}
                   if clf.multi_label else {})
        fp32 = OnnxClassifier(_session(staging / "model.onnx"), clf.tokenizer, clf.label_names,
                              {"temperature": clf.temperature} | answers)
        probabilities = fp32.predict_proba(texts)
        parity = _difference(reference, probabilities, fp32.thresholds) | {
            "texts": len(texts), "tolerance": PARITY_TOLERANCE}
        if isinstance(check, TextDataset):
            parity |= {"torch_accuracy": _accuracy(reference, check, fp32.thresholds),
                       "onnx_accuracy": _accuracy(probabilities, check, fp32.thresholds)}
        if parity["prediction_agreement"] < 1 or parity["max_abs_diff"] > PARITY_TOLERANCE:
            raise AttnclfError(f"ONNX export of {run_dir} does not match PyTorch: {parity['prediction_agreement']:.2%} "
                               f"of predictions agree, probabilities differ by up to {parity['max_abs_diff']:.2e}")
        manifest = _manifest(clf, weights_sha256, run_dir, fp32, answers, parity, onnxruntime.__version__)
        if quantize:
            manifest["int8"] = _quantize(staging, fp32, reference, check, parity.get("torch_accuracy"))
        # (labels.json is left out: renaming a class there is an edit users make, and its count is checked on load)
        manifest["files_sha256"] = {name: file_sha256(staging / name) for name in
                                    ("model.onnx", "model.int8.onnx", "tokenizer.json") if (staging / name).exists()}
        # The manifest goes first and comes back last: files without it are no export, never a mismatched one.
        (directory / "export.json").unlink(missing_ok=True)
        (directory / "model.int8.onnx").unlink(missing_ok=True)
        for built in staging.iterdir():
            os.replace(built, directory / built.name)
        atomic_write_json(directory / "export.json", manifest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    staging.rmdir()
    return manifest


def _manifest(clf: Classifier, weights_sha256: str, run_dir: Path, fp32: OnnxClassifier, answers: dict, parity: dict,
              onnxruntime_version: str) -> dict:
    """export.json's record of the graph ``fp32`` runs, before its int8 graph and files' sha256 join it: where it came
    from, the versions and settings it was made with, the ``answers`` ``OnnxClassifier`` reads to answer as the run
    does, and its ``parity``."""
    return {
        "format_version": export_format_version(clf.multi_label),
        "source": str(Path(run_dir).resolve()),
        "weights_sha256": weights_sha256,  # loading it from the run checks they are current
        "versions": {"attnclf": __version__, "torch": torch.__version__, "onnxruntime": onnxruntime_version},
        "opset": OPSET,
        # (its vocabulary: the tokenizer loaded beside the graph must have it, as the graph's embedding does)
        "model": {"name": clf.config["model"]["name"], "parameters": clf.config["model"]["parameters"],
                  "vocab_size": clf.model.config.vocab_size},
        "tokenizer": clf.config["settings"]["tokenizer"],
        "text_column": trained_text_column(clf.config),  # what `predict --file data.csv` reads by default
        "label_delimiter": trained_label_delimiter(clf.config),  # what its --output CSV joins label sets by
        # How a client must join them into a text, its dataset's way too (AG News: "title. description"), for
        # the ONNX service's /model: looking the dataset up there would import scikit-learn.
        "text_columns": joined_text_columns(clf.config),
        "outputs": ["logits"] + (["pooling_weights"] if fp32.has_pooling_weights else []),
        "temperature": clf.temperature,  # (attnclf calibrate's; probabilities are softmax(logits / temperature))
        **answers,
        "parity": parity,
    }


def _remove_abandoned_staging(directory: Path) -> None:
    """Remove staging folders of exports whose process is gone (killed mid-way): each holds a full-size graph."""
    for folder in directory.glob(".export-*-*"):
        pid = folder.name.split("-")[1]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)  # signal 0: does the process exist?
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:  # alive, another user's
            pass


def _session(path: Path):
    onnxruntime = imported_onnxruntime()
    # One thread: parity needs no speed, and spinning worker threads crawl on a busy shared machine.
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@contextmanager
def _root_logger_quiet() -> Iterator[None]:
    """Silence the root logger's warnings (onnxruntime's quantiser writes through it), then put the caller's logging
    back as it was: its ``logging.disable`` level, and no handler added. (``logging.warning`` on a root logger without
    handlers gives it one to stderr for good, which a notebook would then print every later record through.)

    >>> with _root_logger_quiet():
    ...     logging.warning("shape pre-processing advised")
    >>> logging.root.manager.disable
    0
    """
    disabled, handlers = logging.root.manager.disable, list(logging.root.handlers)
    logging.disable(max(disabled, logging.WARNING))
    try:
        yield
    finally:
        for handler in [h for h in logging.root.handlers if h not in handlers]:
            logging.root.removeHandler(handler)
        logging.disable(disabled)


def _quantize(directory: Path, fp32: OnnxClassifier, reference: np.ndarray, check: CheckTexts,
              torch_accuracy: float | None) -> dict:
    """Write model.int8.onnx (int8 weights, activations quantised on the fly) and measure what it changes: against
    PyTorch's ``reference`` probabilities of ``check``'s texts, and where they are labelled its accuracy on them,
    ``torch_accuracy``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with written_atomically(directory / "model.int8.onnx", suffix=".onnx") as tmp:
        with _root_logger_quiet():  # (it advises shape pre-processing, a step that fails on dynamic axes)
            quantize_dynamic(directory / "model.onnx", tmp, weight_type=QuantType.QInt8)
        probabilities = OnnxClassifier(_session(Path(tmp)), fp32.tokenizer, fp32.label_names,
                                       fp32.config).predict_proba(_texts(check))
    measured = _difference(reference, probabilities, fp32.thresholds) | {"texts": len(reference)}
    if isinstance(check, TextDataset):
        accuracy = _accuracy(probabilities, check, fp32.thresholds)
        measured |= {"accuracy": accuracy, "accuracy_change": accuracy - torch_accuracy}
    return measured | {"bytes": (directory / "model.int8.onnx").stat().st_size,
                       "fp32_bytes": (directory / "model.onnx").stat().st_size}
