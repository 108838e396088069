"""The training loop: optimiser, schedule, early stopping, checkpoints, resume.

Every epoch ends with a validation pass and a line of history. At most once per
``checkpoint_seconds`` (and always at the end) the run directory gets the best
weights so far in ``model.safetensors`` (by the monitored validation metric; with
``ema_decay``, the best of the weights' moving average, which is what validates),
``history.jsonl``, and the full training state in ``checkpoint/``, so
``resume=True`` continues an interrupted run from its last checkpointed epoch
with the same result it would have reached uninterrupted. Within an epoch, every
``checkpoint_minutes`` of training, the checkpoint also takes the step reached and
the epoch's running totals: a resume goes on from the next step of the same batch
order (``BucketBatches`` draws it from the seed and the epoch), to the same bytes. Without validation
batches (a refit, whose epochs were chosen by the run it refits) every epoch
runs and the last one's weights are kept.

Under ``torchrun`` (see ``distributed``) every rank trains on its part of each
global batch through DistributedDataParallel; rank 0 validates, prints and writes,
and broadcasts when to checkpoint and when to stop.
"""

from __future__ import annotations

import copy
import gc
import inspect
import math
from collections.abc import Callable
from dataclasses import InitVar, asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from tqdm.auto import tqdm

from ..checks import by_field, check_seed, real_number, weight, whole_number
from ..errors import AttnclfError, RunDirError, shown
from ..evaluation.metrics import compute_metrics
from ..evaluation.predict import predict_probabilities
from ..rundir import atomic_save_tensors, atomic_write_json, load_weights, read_json, write_jsonl
from ..text.batching import BucketBatches
from . import multilabel
from .device import check_bf16, device_generator_state, seed_generators, set_device_generator_state
from .distributed import Distributed
from . import pace
from .pace import CHECKPOINT_MINUTES, EpochSteps

# What TrainConfig.monitor may name (micro_f1: multi-label runs); all but loss are better higher.
MONITORS = ("accuracy", "macro_f1", "micro_f1", "loss", "roc_auc", "average_precision")
# Undefined on validation texts without both sides of a class (or, multi-label, of a label): refuse_undefined_monitor.
RANKING_MONITORS = ("roc_auc", "average_precision")
# How the epoch lines and describe_kept name a monitored score.
MONITOR_NAMES = {"macro_f1": "macro-F1", "micro_f1": "micro-F1", "roc_auc": "ROC AUC",
                 "average_precision": "average precision"}
# Above a multi-label run's epoch lines: their label sets are cut at 0.5, the thresholds its tables use come later.
MULTI_LABEL_EPOCH_NOTE = ("note: each epoch's label sets take a label where its probability reaches 0.5; the per-label "
                          "thresholds are tuned on the validation split once training ends")

# What a checkpoint written within an epoch adds to the state: where the epoch was, so a resume goes on from there.
_WITHIN_EPOCH = ("step", "epoch_steps", "epoch_totals", "epoch_seconds")
# How a checkpoint's tensors name the best weights it commits, where they changed since the one before.
_BEST = "best."


# torch 2.13 renamed DDP's broadcast_buffers (and deprecated the old name); older releases know only that one.
_NO_BUFFER_SYNC = ({"forward_sync_buffers": False}
                   if "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
                   else {"broadcast_buffers": False})


@dataclass
class TrainConfig:
    """How a run trains. A value that cannot work is refused as it is built, in one line naming its field, or the
    field as ``named`` spells it (the command line: by its flag).

    >>> TrainConfig(epochs=0, named=lambda field: f"--{field}")
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: --epochs must be at least 1, got 0
    """

    epochs: int = 10
    batch_size: int = 32  # per process: under torchrun a step sees batch_size x processes examples
    lr: float = 1e-3
    weight_decay: float = 0.01
    optimizer: str = "adamw"  # adamw | adam
    schedule: str = "linear"  # linear | cosine | constant, after warm-up
    warmup_ratio: float = 0.05
    grad_clip: float = 1.0  # 0 disables
    label_smoothing: float = 0.0
    # > 0: validate, keep and save an exponential moving average of the weights, updated every step with
    # this decay (bias-corrected: see _ema_update); 0.999 averages over about the last thousand steps.
    ema_decay: float = 0.0
    # none | balanced (texts / (classes x the class's texts), as scikit-learn's) | {label name: weight}, a label
    # the dict leaves out weighing 1. Per-example weights (BucketBatches.weights) multiply them: see _WeightedLoss.
    class_weights: str | dict[str, float] = "none"
    sampler: str = "shuffle"  # shuffle | balanced (every class equally likely at each draw)
    patience: int = 3  # epochs without improvement before stopping; 0 never stops early
    # The learning-rate schedule's length in epochs, if not `epochs`: a refit stops after the epoch its validated
    # run kept, on the schedule that run followed (stopping early there had cut it short too).
    schedule_epochs: int | None = None
    # What picks the epoch kept: the first with the best validation value (a later epoch that only ties it does not
    # replace it), and what patience waits on.
    # validation accuracy | macro_f1 | loss (multi-label runs' default) | micro_f1 (multi-label) | roc_auc |
    # average_precision (the ranking scores, where classes are imbalanced: multi-label runs' macro averages)
    monitor: str = "macro_f1"
    bf16: bool = False  # bfloat16 autocast (CPU with AVX-512 bf16, or CUDA)
    checkpoint_seconds: float = 60.0  # as epochs end: at most one checkpoint per this many seconds, and one at the end
    # Within an epoch, a checkpoint every this many minutes of training (0: only as epochs end; pace says why)
    checkpoint_minutes: float = CHECKPOINT_MINUTES
    seed: int = 0
    # Not a setting (config.json and asdict leave it out): how the checks name a field. None is checks.by_field, not
    # given as the default itself: replace() reads the default back off an instance, where a function is a method.
    named: InitVar[Callable[[str], str] | None] = None

    def __post_init__(self, named: Callable[[str], str] | None) -> None:
        # Checked here, so a bad value stops a run before it writes anything
        named = named or by_field
        for name in ("epochs", "batch_size", "patience", "schedule_epochs"):
            if name == "schedule_epochs" and self.schedule_epochs is None:  # (the schedule spans `epochs`)
                continue
            count = whole_number(getattr(self, name))
            if count is None:  # (1.5 epochs would fail in range(), "2" in a comparison, inf in the schedule's steps)
                raise AttnclfError(f"{named(name)} must be a whole number, got {shown(getattr(self, name))}")
            setattr(self, name, count)  # (numpy's integers would not go into config.json)
        for name in ("lr", "weight_decay", "warmup_ratio", "grad_clip", "label_smoothing", "ema_decay",
                     "checkpoint_seconds", "checkpoint_minutes"):
            number = real_number(getattr(self, name))
            if number is None:  # ("0.01" would fail in a comparison, np.float32 in config.json after an epoch)
                raise AttnclfError(f"{named(name)} must be a number, got {shown(getattr(self, name))}")
            setattr(self, name, number)
        for name, low, high in (("epochs", 1, None), ("batch_size", 1, None), ("lr", 0, None),
                                ("weight_decay", 0, None), ("warmup_ratio", 0, 1), ("grad_clip", 0, None),
                                ("label_smoothing", 0, 1), ("ema_decay", 0, 1), ("patience", 0, None),
                                ("checkpoint_seconds", 0, None), ("checkpoint_minutes", 0, None)):
            value = getattr(self, name)
            # Infinity means something for the checkpoint intervals (never) and grad_clip (no clipping), not here.
            finite = name in ("lr", "weight_decay")
            nan = isinstance(value, float) and math.isnan(value)  # (an int has none, and may be too large for one)
            if nan or value < low or high is not None and value >= high or finite and math.isinf(value):
                bounds = ("a finite number, " if finite else "") + f"at least {low}" + (f" and below {high}" if high
                                                                                       else "")
                raise AttnclfError(f"{named(name)} must be {bounds}, got {shown(value)}")
        self.seed = check_seed(self.seed, named("seed"))
        if isinstance(self.class_weights, dict):
            for name in self.class_weights:
                if not isinstance(name, str):
                    raise AttnclfError(f"{named('class_weights')} are keyed by label name, a string; got {shown(name)}")
            # (plain floats: numpy's would not go into config.json)
            self.class_weights = {name: weight(value, f"{named('class_weights')}[{shown(name)}]")
                                  for name, value in self.class_weights.items()}
        elif self.class_weights not in ("none", "balanced"):
            raise AttnclfError(f"{named('class_weights')} must be none, balanced or a dict of label weights, got "
                               f"{shown(self.class_weights)}")
        if self.schedule_epochs is not None and self.schedule_epochs < self.epochs:
            raise AttnclfError(f"{named('schedule_epochs')} ({shown(self.schedule_epochs)}) cannot be fewer than "
                               f"{named('epochs')} ({shown(self.epochs)})")
        for name, allowed in (("optimizer", ("adamw", "adam")), ("schedule", ("linear", "cosine", "constant")),
                              ("sampler", ("shuffle", "balanced")),
                              ("monitor", MONITORS)):
            if getattr(self, name) not in allowed:
                raise AttnclfError(f"{named(name)} must be one of {', '.join(allowed)}, got "
                                   f"{shown(getattr(self, name))}")

    def to_dict(self) -> dict:
        """These settings as config.json's ``settings.train`` records them.

        >>> TrainConfig(epochs=3).to_dict()["epochs"]
        3
        """
        return asdict(self)


def _ema_update(decay: float):
    """AveragedModel's update for a bias-corrected exponential average (as Adam's moment estimates): after
    t steps each step's weights count (1 - decay) decay^age / (1 - decay^t). Early on that is a plain mean of
    the steps so far; after about 1 / (1 - decay) steps, the nominal moving average. Uncorrected, a copy of
    the first step's weights would keep decay^t of the average: 70% after an epoch of IMDB at 0.999."""
    def update(averaged: list[torch.Tensor], current: list[torch.Tensor], updates: torch.Tensor) -> None:
        steps = int(updates) + 1  # this one included; the first was a copy
        get_ema_multi_avg_fn(1 - (1 - decay) / (1 - decay ** steps))(averaged, current, updates)
    return update


def _make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    # Weight decay on matrices only: decaying biases, norms and embeddings' pad row helps nothing.
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # The fused kernels step the IMDB recipe's 18.7M parameters 10x faster than the default loop
    # on one CPU thread (bench/optimizer_step.py); they exist for CPU and CUDA only.
    fused = all(p.device.type in ("cpu", "cuda") for p in decay + no_decay)
    if config.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=config.lr, fused=fused)
    return torch.optim.Adam([{"params": decay + no_decay}], lr=config.lr, fused=fused)  # TrainConfig allows these two


def _make_schedule(optimizer: torch.optim.Optimizer, config: TrainConfig, total_steps: int):
    warmup = int(config.warmup_ratio * total_steps)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total_steps - warmup)
        if config.schedule == "linear":
            return max(0.0, 1.0 - progress)
        if config.schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0  # constant (TrainConfig allows no other)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _class_weights(labels: np.ndarray, label_names: list[str], how: str | dict,
                   example_weights: np.ndarray | None = None) -> torch.Tensor | None:
    """Each class's weight on the loss (None: ``how="none"``). ``"balanced"``: texts / (classes x the class's
    texts), each text counted by its example weight when there are any, as scikit-learn's ``compute_class_weight``
    counts ``sample_weight`` (a text of weight 2 counts as two copies); a dict: its weight per label name, 1 for
    a label it leaves out.

    >>> _class_weights(np.array([0, 0, 0, 1]), ["a", "b"], "balanced").tolist()
    [0.6666666865348816, 2.0]
    >>> _class_weights(np.array([0, 0, 1]), ["a", "b"], "balanced", np.array([1.0, 1.0, 2.0])).tolist()
    [1.0, 1.0]
    >>> _class_weights(np.array([0, 1]), ["a", "b"], {"b": 3.0}).tolist()
    [1.0, 3.0]
    """
    if isinstance(how, dict):
        unknown = [name for name in how if name not in label_names]
        if unknown:
            raise AttnclfError(f"class_weights names {unknown[0]!r}, which is not one of the labels")
        return torch.tensor([how.get(name, 1.0) for name in label_names], dtype=torch.float32)
    if how == "none":
        return None
    if how != "balanced":
        raise AttnclfError(f"class weights must be none, balanced or a dict of label weights, got {how!r}")
    counts = np.bincount(labels, weights=example_weights, minlength=len(label_names)).astype(np.float64)
    total = len(labels) if example_weights is None else example_weights.astype(np.float64).sum()
    # (a class without texts divides by 1: its weight never meets a loss)
    return torch.tensor(total / (len(label_names) * np.where(counts > 0, counts, 1)), dtype=torch.float32)


class _WeightedLoss:
    """The one place the training loss is weighted: each example's loss times its class's weight (inside the
    criterion, as PyTorch's weighted cross-entropy applies it, label smoothing included) and times its own
    (``train.weights``). A step minimises the global batch's weighted mean, sum(w * loss) / sum(w), as
    scikit-learn's ``MLPClassifier`` does with ``sample_weight``, and the epoch's reported loss is that mean over
    its examples. Weights of 1 train the very weights no weights do: 1 x a loss has that loss's gradient, to the bit.

    >>> # loss = _WeightedLoss(train_batches, ["neg", "pos"], TrainConfig(class_weights="balanced"), False)
    >>> # loss.summed(logits, batch.labels, batch.indices) / loss.weight(batch.indices)
    """

    def __init__(self, train: BucketBatches, label_names: list[str], config: TrainConfig, multi_label: bool):
        self.labels, self.example_weights = train.labels, train.weights
        if multi_label:  # (its class weights are per-label positive weights, inside the criterion: see multilabel)
            self.criterion = multilabel.multilabel_loss(train.labels, config.class_weights, train.weights)
            self.class_weights = None
        else:
            self.class_weights = _class_weights(train.labels, label_names, config.class_weights, train.weights)
            self.criterion = nn.CrossEntropyLoss(weight=self.class_weights, label_smoothing=config.label_smoothing,
                                                 reduction="none")
        if not self.weight(np.arange(len(train.labels))):
            raise AttnclfError("every training example weighs 0 (its class's weight times its own): nothing to "
                               "learn from")

    def to(self, device: torch.device) -> "_WeightedLoss":
        self.criterion.to(device)
        return self

    def summed(self, logits: torch.Tensor, targets: torch.Tensor, idx: np.ndarray) -> torch.Tensor:
        """sum(w * loss) over the examples at ``idx``, whose ``logits`` and ``targets`` these are."""
        losses = self.criterion(logits, targets)
        if self.example_weights is None:
            return losses.sum()
        per_example = losses.reshape(len(losses), -1).sum(dim=1)  # (multi-label: a text's cells, its labels' mean)
        return (per_example * torch.from_numpy(self.example_weights[idx]).to(per_example.device)).sum()

    def weight(self, idx: np.ndarray) -> float:
        """sum(w) over the examples at ``idx``: their count when nothing is weighted."""
        if self.class_weights is None and self.example_weights is None:
            return float(len(idx))
        weights = torch.ones(len(idx)) if self.class_weights is None else self.class_weights[self.labels[idx]]
        if self.example_weights is not None:
            weights = weights * torch.from_numpy(self.example_weights[idx])
        return float(weights.sum())


def _weighted_mean(summed: float, weight: float) -> float:
    """sum(w * loss) / sum(w); 0 for examples that weigh nothing (their steps learned nothing: a batch of them,
    the balanced sampler's epoch that drew only them, which it draws by class and not by weight).

    >>> _weighted_mean(3.0, 2.0), _weighted_mean(0.0, 0.0)
    (1.5, 0.0)
    """
    return summed / weight if weight else 0.0


def _better(metric: str, value: float, best: float | None) -> bool:
    if best is None:
        return True
    return value < best if metric == "loss" else value > best


def best_epoch(history: list[dict], monitor: str) -> dict:
    """The history line of the epoch whose weights a run kept: the first with the best ``val_<monitor>``.

    >>> best_epoch([{"epoch": 1, "val_loss": 0.5}, {"epoch": 2, "val_loss": 0.4}, {"epoch": 3, "val_loss": 0.4}],
    ...            "loss")["epoch"]
    2
    """
    best = None
    for record in history:
        if record.get(f"val_{monitor}") is None:  # (null, as history.jsonl may hold a validation metric: no value)
            raise AttnclfError(f"epoch {record['epoch']} recorded no validation {monitor}, so no epoch was chosen")
        if best is None or _better(monitor, record[f"val_{monitor}"], best[f"val_{monitor}"]):
            best = record
    if best is None:
        raise AttnclfError("the run recorded no epochs")
    return best


def refuse_undefined_monitor(monitor: str, labels: np.ndarray, label_names: list[str]) -> None:
    """Refuse a ranking monitor (``RANKING_MONITORS``) that validation ``labels`` leave undefined, before any epoch:
    class indices all of one class, or (a multi-hot matrix, multi-label) no label on some texts and off others.
    Whether it is defined depends on the labels alone, so a run that passes never meets a null score mid-run.

    >>> refuse_undefined_monitor("roc_auc", np.array([0, 1, 1]), ["neg", "pos"])  # (defined: nothing said)
    >>> refuse_undefined_monitor("roc_auc", np.array([1, 1]), ["neg", "pos"])
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: --monitor roc_auc (monitor= in Python) is undefined on these validation texts: all 2 \
are of one class, 'pos'; monitor loss, accuracy or macro_f1, or validate on texts of more than one class
    """
    if monitor not in RANKING_MONITORS:
        return
    labels = np.asarray(labels)
    said = f"--monitor {monitor} (monitor= in Python) is undefined on these validation texts"
    if labels.ndim == 2:
        positives = labels.sum(axis=0)
        if not ((positives > 0) & (positives < len(labels))).any():
            raise AttnclfError(f"{said}: no label is on some of the {len(labels)} and off others; monitor loss, "
                               f"accuracy, macro_f1 or micro_f1, or validate on texts whose label sets differ")
        return
    present = np.unique(labels)
    if len(present) < 2:
        which = f"all {len(labels)} are of one class, {shown(label_names[present[0]])}" if len(present) else \
            "there are none"
        raise AttnclfError(f"{said}: {which}; monitor loss, accuracy or macro_f1, or validate on texts of more "
                           f"than one class")


def _flag_spelling(field: str, value: str) -> str:
    """A setting as the command line gives it: ``--class-weight balanced``."""
    return f"--{'class-weight' if field == 'class_weights' else field} {value}"


def imbalance_remedies(config: TrainConfig, spelled: Callable[[str, str], str | None] = _flag_spelling) -> list[str]:
    """What a run trained with ``config`` could try where its kept weights answer the majority class, each setting as
    ``spelled(field, value)`` gives it (None: not a setting there): a loss that weighs classes evenly or a sampler
    that draws them evenly, unless one of them (or class weights of the user's own) already corrects the imbalance,
    as two together correct it twice; and a monitor that answering the majority class does not score well on.

    >>> imbalance_remedies(TrainConfig(monitor="loss"))
    ['--class-weight balanced', '--sampler balanced', '--monitor average_precision / macro_f1']
    """
    remedies = []
    if config.class_weights == "none" and config.sampler == "shuffle":
        remedies += [spelled("class_weights", "balanced"), spelled("sampler", "balanced")]
    monitors = [monitor for monitor in ("average_precision", "macro_f1") if monitor != config.monitor]
    remedies.append(spelled("monitor", " / ".join(monitors)))
    return [remedy for remedy in remedies if remedy]


# How one_class_note's line starts: a resumed run replaces the one its start recorded.
ONE_CLASS_NOTE_START = "the weights kept predict "


def one_class_note(history: list[dict], monitor: str, labels, label_names: list[str],
                   remedies: list[str], texts: str = "validation texts") -> str | None:
    """A line for a single-label run whose kept weights (``best_epoch``) predict one class for every validation text
    (its record's ``val_predicted_only``, the class's index) while those texts (``labels``, indices) hold several and
    that class is the most common, at least twice the rarest's texts, suggesting ``remedies``
    (``imbalance_remedies``); None where there is nothing to say. ``texts`` names what validated.

    >>> one_class_note([{"epoch": 1, "val_loss": 0.2, "val_predicted_only": 0}], "loss", [0, 0, 0, 1],
    ...                ["neg", "pos"], ["--class-weight balanced"])
    "the weights kept predict 'neg' for all 4 validation texts (75% of them are 'neg'): the classes are imbalanced; \
try --class-weight balanced"
    """
    only = best_epoch(history, monitor).get("val_predicted_only")
    labels = np.asarray(labels)
    counts = np.bincount(labels, minlength=len(label_names))
    if not isinstance(only, int) or not 0 <= only < len(label_names) or (counts > 0).sum() < 2:  # (an edited record)
        return None
    answered, name = counts[only], shown(label_names[only])
    said = (f"{ONE_CLASS_NOTE_START}{name} for all {len(labels):,} {texts} ({answered / len(labels):.0%} of "
            f"them are {name})")
    # Only where the class answered outnumbers another twice over: on near-even classes one answer for all is a model
    # that learned nothing yet (a smoke test's epoch), which reweighing the classes would not change.
    if answered < counts.max() or answered < 2 * counts[counts > 0].min():
        return None
    if not remedies:
        return f"{said}: the classes are imbalanced"
    listed = remedies[0] if len(remedies) == 1 else (f"{', '.join(remedies[:-1])}{',' if len(remedies) > 2 else ''} "
                                                     f"or {remedies[-1]}")
    return f"{said}: the classes are imbalanced; try {listed}"


def describe_kept(history: list[dict], monitor: str, refit: bool = False) -> str:
    """Which epoch's weights a run kept (``best_epoch``), and how many later epochs tied it: the first is kept, and
    where validation is perfect from the start (as on ``synthetic``) that is an early, barely confident model. A
    ``refit``, which validates on nothing, keeps its last.

    >>> describe_kept([{"epoch": 1, "val_macro_f1": 1.0}, {"epoch": 2, "val_macro_f1": 1.0}], "macro_f1")
    'epoch 1 of 2: the best validation macro-F1 (1.0000), which 1 later epoch tied (the first is kept)'
    >>> describe_kept([{"epoch": 1}, {"epoch": 2}], "macro_f1", refit=True)
    'epoch 2 of 2, the last (a refit validates on nothing)'
    """
    if refit:
        return f"epoch {history[-1]['epoch']} of {len(history)}, the last (a refit validates on nothing)"
    kept = best_epoch(history, monitor)
    ties = sum(record["epoch"] > kept["epoch"] and record[f"val_{monitor}"] == kept[f"val_{monitor}"]
               for record in history)
    tied = f", which {ties} later epoch{'s' if ties > 1 else ''} tied (the first is kept)" if ties else ""
    metric = MONITOR_NAMES.get(monitor, monitor)  # as the epoch lines above it name them
    return f"epoch {kept['epoch']} of {len(history)}: the best validation {metric} ({kept[f'val_{monitor}']:.4f}){tied}"


def epoch_line(record: dict, monitor: str, multi_label: bool = False) -> str:
    """The line an epoch's history ``record`` prints: its training loss and accuracy, then, where it validated (a
    refit validates on nothing), the validation loss and scores, with the ``monitor`` early stopping watches beside
    them when they do not hold it already.

    >>> epoch_line({"epoch": 2, "train_loss": 0.5, "train_accuracy": 0.75, "val_loss": 0.4, "val_accuracy": 0.8,
    ...             "val_macro_f1": 0.79, "val_roc_auc": 0.9, "seconds": 1.5}, "roc_auc")
    'epoch 2: train loss 0.5000 acc 0.7500 | val loss 0.4000 acc 0.8000 macro-F1 0.7900 ROC AUC 0.9000 | 1.5s'
    """
    # (a multi-label text counts as right only when its whole set is: 0.0000 early on is no fault)
    acc = "subset acc" if multi_label else "acc"
    validated = ""
    if "val_loss" in record:
        # A multi-label run's scores here cut at 0.5 (MULTI_LABEL_EPOCH_NOTE), its tuned thresholds' come after:
        # micro-F1 beside macro-F1, as its test line gives them, since a rare label sways macro-F1.
        scored = (f", at 0.5: {acc} {record['val_accuracy']:.4f} micro-F1 {record['val_micro_f1']:.4f}"
                  if multi_label else f" {acc} {record['val_accuracy']:.4f}")
        validated = f" | val loss {record['val_loss']:.4f}{scored} macro-F1 {record['val_macro_f1']:.4f}"
        if monitor not in ("loss", "accuracy", "macro_f1", *(("micro_f1",) if multi_label else ())):
            validated += f" {MONITOR_NAMES[monitor]} {record[f'val_{monitor}']:.4f}"
    return (f"epoch {record['epoch']}: train loss {record['train_loss']:.4f} {acc} {record['train_accuracy']:.4f}"
            f"{validated} | {record['seconds']:.1f}s")


class Trainer:
    """Fits one model on bucketed batches, writing progress into ``run_dir``.

    ``train`` holds the global batches: under torchrun, batches of
    ``batch_size x world_size`` that each rank cuts its part from.
    ``multi_label``: the batches' labels are 0/1 rows, one column per label
    (see ``training.multilabel``).

    >>> # trainer = Trainer(model, TrainConfig(epochs=3), run_dir, device)
    >>> # history = trainer.fit(train_batches, val_batches)
    """

    def __init__(self, model: nn.Module, config: TrainConfig, run_dir: Path, device: torch.device,
                 label_names: list[str], progress: bool = True, distributed: Distributed = Distributed(),
                 multi_label: bool = False):
        if multi_label:
            multilabel.check_config(config)
        # (TrainConfig checked it as made, not as changed since; a single-label run's micro-F1 is its accuracy)
        monitors = MONITORS if multi_label else tuple(name for name in MONITORS if name != "micro_f1")
        if config.monitor not in monitors:
            raise AttnclfError(f"monitor must be one of {', '.join(monitors)}, got {shown(config.monitor)}")
        if config.sampler not in ("shuffle", "balanced"):
            raise AttnclfError(f"sampler must be shuffle or balanced, got {config.sampler!r}")
        if config.bf16:
            check_bf16(device)
        self.model = model.to(device)
        self.config = config
        self.run_dir = Path(run_dir)
        self.device = device
        self.label_names = label_names
        self.distributed = distributed
        self.multi_label = multi_label
        self.progress = progress and distributed.is_main
        self.checkpoint_dir = self.run_dir / "checkpoint"
        self.training_model = self.model  # under torchrun, fit wraps it in DistributedDataParallel
        self.averaged: AveragedModel | None = None  # the weights' moving average, with ema_decay (rank 0)

    def fit(self, train: BucketBatches, validation: BucketBatches | None, resume: bool = False) -> list[dict]:
        """Train on ``train`` for ``config.epochs`` (fewer where early stopping ends it), validating each epoch on
        ``validation`` (None: a refit, which keeps its last epoch), from the run folder's checkpoint where ``resume``;
        the model ends holding the weights kept. Returns the history, a record per epoch (``epoch_line`` prints it).
        """
        config, distributed = self.config, self.distributed
        if validation is not None:  # (train_run refused it sooner, before writing anything; Trainer is public too)
            refuse_undefined_monitor(config.monitor, validation.labels, self.label_names)
        seed_generators(config.seed + distributed.rank, self.device)  # ranks draw different dropout masks
        optimizer = _make_optimizer(self.model, config)
        schedule = _make_schedule(optimizer, config, total_steps=(config.schedule_epochs or config.epochs) * len(train))
        # Summed, then divided by the global batch's weight in _train_epoch: ranks' parts may differ in size.
        loss_fn = _WeightedLoss(train, self.label_names, config, self.multi_label).to(self.device)
        state = {"epoch": 0, "best": None, "stale_epochs": 0, "history": [], "world_size": distributed.world_size}
        resuming = resume and (self.checkpoint_dir / "state.json").exists()
        if not resuming:
            count_ngram_prior(self.model, train)
        if config.ema_decay and distributed.is_main:
            # Parameters are averaged; buffers (n-gram counts, positions) are copied from the model each update.
            self.averaged = AveragedModel(self.model, multi_avg_fn=_ema_update(config.ema_decay))
        if resuming:
            state = self._load_checkpoint(optimizer, schedule)  # n-gram counts come back with the weights
        # Where a checkpoint within an epoch left that epoch (None: at an epoch's end), for _train_epoch to go on from
        self._within_epoch = {name: state.pop(name) for name in _WITHIN_EPOCH if name in state} or None
        if distributed.enabled:
            # Buffers (n-gram counts, sinusoidal positions) are equal on every rank: nothing to sync each step.
            self.training_model = DistributedDataParallel(self.model, device_ids=[self.device.index] if
                                                          self.device.type == "cuda" else None, **_NO_BUFFER_SYNC)
        if distributed.is_main:
            self.checkpoint_dir.mkdir(exist_ok=True)
        best_weights = None  # kept in memory; written with each checkpoint
        self._last_saved = pace.clock()

        def save_within_epoch(position: dict) -> None:
            nonlocal best_weights
            self._save_checkpoint(optimizer, schedule, {**state, **position}, best_weights)
            best_weights, self._last_saved = None, pace.clock()

        self._save_within_epoch = save_within_epoch
        print_every = max(1, config.epochs // 20)
        # A run that stopped early checkpointed as it stopped: interrupted after that (testing), it trains no more.
        first = config.epochs + 1 if stopped_early(state, config.patience) else state["epoch"] + 1

        if self.progress and self.multi_label and first <= config.epochs:
            tqdm.write(MULTI_LABEL_EPOCH_NOTE)
        for epoch in range(first, config.epochs + 1):
            started = pace.clock()
            carried = self._within_epoch["epoch_seconds"] if self._within_epoch else 0.0  # (before the stop)
            train.set_epoch(epoch)
            train_loss, train_acc = self._train_epoch(train, optimizer, schedule, loss_fn, epoch)
            # The loss is taken before each step, so weights the epoch's last step broke show only in the weights,
            # or, when they are huge but finite, in the outputs validation sees. (Every rank sees the same summed
            # loss and the same weights: all stop together.)
            if not math.isfinite(train_loss) or not all(p.isfinite().all() for p in self.model.parameters()):
                raise self._diverged(epoch)
            record = {"epoch": epoch, "train_loss": train_loss, "train_accuracy": train_acc,
                      **(self._validate(validation, epoch) if distributed.is_main and validation is not None else {}),
                      "lr": schedule.get_last_lr()[0], "schedule_epochs": config.schedule_epochs or config.epochs,
                      "seconds": round(carried + pace.clock() - started, 3)}
            state["history"].append(record)
            state["epoch"] = epoch
            stopping, saving = False, False
            if distributed.is_main:
                if validation is None:  # a refit has nothing to choose by: the last epoch is the model
                    improved = True
                else:
                    monitored = record[f"val_{config.monitor}"]
                    improved = _better(config.monitor, monitored, state["best"])
                    if improved:
                        state["best"], state["stale_epochs"] = monitored, 0
                    else:
                        state["stale_epochs"] += 1
                if improved:
                    best_weights = {k: v.detach().clone() for k, v in self._evaluated().state_dict().items()}
                stopping = epoch == config.epochs or stopped_early(state, config.patience)
                # Checkpoints cost a write of the whole model; tiny epochs (toy sets) must not pay it every time.
                saving = stopping or pace.clock() - self._last_saved >= config.checkpoint_seconds
            decision = distributed.from_main(torch.tensor([stopping, saving], dtype=torch.long, device=self.device))
            stopping, saving = bool(decision[0]), bool(decision[1])
            if saving:
                self._save_checkpoint(optimizer, schedule, state, best_weights)
                best_weights, self._last_saved = None, pace.clock()
            if self.progress and (epoch % print_every == 0 or stopping):
                tqdm.write(epoch_line(record, config.monitor, self.multi_label))
            if stopping:
                break
        # The run ends holding its best weights, not its last (on rank 0, which goes on to test them).
        if distributed.is_main:
            self.model.load_state_dict(load_weights(self.run_dir / "model.safetensors"))
        # The last step's gradients are a second copy of every weight, which a model kept to predict (the estimator's
        # classifier_) would otherwise carry for as long as it lives.
        self.model.zero_grad(set_to_none=True)
        if distributed.enabled:
            # DistributedDataParallel sits in a reference cycle: left to the interpreter's last collection it
            # is torn down after the process group, which can abort the process (seen once as a SIGABRT).
            self.training_model = self.model
            gc.collect()
        return state["history"]

    def _evaluated(self) -> nn.Module:
        """What validation scores and the run keeps: the weights' moving average if there is one."""
        return self.model if self.averaged is None else self.averaged.module

    def _diverged(self, epoch: int) -> AttnclfError:
        return AttnclfError(f"training diverged in epoch {epoch}: the loss, the weights or the outputs became infinite "
                            f"or NaN at learning rate {self.config.lr:g}; train again with a lower one (--lr; lr= in "
                            f"Python)")

    def _validate(self, validation: BucketBatches, epoch: int) -> dict:
        probabilities = predict_probabilities(self._evaluated(), validation, self.device, self.multi_label)
        if not np.isfinite(probabilities).all():
            raise self._diverged(epoch)
        if self.multi_label:
            return multilabel.validation_record(validation.labels, probabilities, self.label_names)
        metrics = compute_metrics(validation.labels, probabilities, self.label_names, report=False,
                                  intervals=False)
        predicted = probabilities.argmax(axis=1)
        # An epoch that answers one class for every text, by its index (history.jsonl holds numbers): kept, it is what
        # one_class_note tells of
        only = {"val_predicted_only": int(predicted[0])} if (predicted == predicted[0]).all() else {}
        return {
            "val_loss": metrics["log_loss"],
            "val_accuracy": metrics["accuracy"],
            "val_macro_f1": metrics["macro_f1"],
            "val_macro_precision": metrics["macro_precision"],
            "val_macro_recall": metrics["macro_recall"],
            "val_roc_auc": metrics["roc_auc"],
            "val_average_precision": metrics["average_precision"],
            **{f"val_{k}": v for k, v in metrics.get("binary", {}).items()},
            **only,
        }

    def _train_epoch(self, batches, optimizer, schedule, loss_fn, epoch) -> tuple[float, float]:
        """One pass over the global batches (from the step a checkpoint within it reached, resumed); the weighted mean
        loss and the accuracy over all ranks' examples. Checkpoints every ``checkpoint_minutes`` and, without a
        terminal, prints a progress line every ``pace.PROGRESS_LINE_SECONDS``."""
        self.model.train()
        distributed = self.distributed
        totals = torch.zeros(4, device=self.device)  # summed weighted loss, correct, seen, summed weight
        global_batches = batches.batch_indices()  # (the epoch's own order, drawn again the same on a resume)
        first, carried = 0, 0.0
        resumed, self._within_epoch = self._within_epoch, None
        if resumed:
            first, carried = resumed["step"], resumed["epoch_seconds"]
            totals = torch.tensor(resumed["epoch_totals"][distributed.rank], dtype=totals.dtype, device=self.device)
        steps = EpochSteps(global_batches, f"epoch {epoch}", progress=self.progress,
                           checkpoint_minutes=self.config.checkpoint_minutes, first=first, carried=carried)

        def running_loss() -> float:  # (for a progress line: asked for every few minutes, it syncs)
            loss, _, _, weighed = totals.tolist()
            return _weighted_mean(loss, weighed)

        for step, idx in steps:
            part = distributed.shard(idx)
            # A rank left without examples (a last batch smaller than the world) still joins the
            # gradient all-reduce, with a stand-in example that counts zero.
            batch = batches.batch(part if len(part) else idx[:1]).to(self.device)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.config.bf16):
                logits = self.training_model(batch.input_ids, batch.attention_mask).logits
            summed = loss_fn.summed(logits.float(), batch.labels.float() if self.multi_label else batch.labels,
                                    batch.indices)
            # DDP averages gradients over ranks; scaling by world / (global batch weight) makes that
            # average the gradient of the global batch's mean loss, as one process would compute it.
            # (A batch whose examples all weigh 0 teaches nothing.)
            batch_weight = loss_fn.weight(idx)
            scale = distributed.world_size / batch_weight if len(part) and batch_weight else 0.0
            optimizer.zero_grad(set_to_none=True)
            (summed * scale).backward()
            if self.config.grad_clip:
                nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
            optimizer.step()
            schedule.step()
            if self.averaged is not None:
                self.averaged.update_parameters(self.model)
            if len(part):
                totals[0] += summed.detach()
                totals[1] += (multilabel.exact_matches(logits, batch.labels) if self.multi_label
                              else (logits.argmax(-1) == batch.labels).sum())
                totals[2] += len(part)
                totals[3] += loss_fn.weight(part)
            if self.progress and step % 20 == 0:  # .item() syncs; do it rarely
                loss, correct, seen, weighed = totals.tolist()
                steps.bar.set_postfix(loss=f"{_weighted_mean(loss, weighed):.4f}", acc=f"{correct / seen:.4f}")
            due = steps.after_step(step + 1, len(idx), running_loss, self._last_saved)
            # Rank 0's clock decides, so that every rank joins the checkpoint (it gathers their generators).
            if due is not None and distributed.from_main(torch.tensor(due, device=self.device)):
                self._save_within_epoch({"step": step + 1, "epoch_steps": steps.steps,
                                         "epoch_seconds": steps.seconds(),
                                         "epoch_totals": [part.tolist() for part in distributed.gather(totals)]})
        loss, correct, seen, weighed = distributed.sum(totals).tolist()
        return _weighted_mean(loss, weighed), correct / seen

    def _save_checkpoint(self, optimizer, schedule, state: dict, best_weights: dict | None) -> None:
        """The full state to resume from, then the best weights (if they changed) and history: in that order, so a
        crash between writes leaves model.safetensors no newer than the state a resume starts from (written first,
        a resume that trained on differently, with another --epochs or --threads, kept the weights of epochs its
        history no longer holds). The state is two files: its tensors (with the best weights, when they changed),
        under a name of their own epoch, then state.json, which names them and commits the checkpoint; a resume
        publishes those best weights again (``_load_checkpoint``), and the tensors it named before are deleted
        only then. Every rank calls it (to hand over its dropout generator); rank 0 writes."""
        rngs = self.distributed.gather(torch.get_rng_state())
        # On a GPU, dropout draws from the GPU's generator: a run resumed there draws on from where it was.
        own = device_generator_state(self.device)
        device_rngs = [] if own is None else self.distributed.gather(own)
        if not self.distributed.is_main:
            return
        tensors = {f"model.{k}": v for k, v in self.model.state_dict().items()}
        if best_weights is not None:
            tensors.update({f"{_BEST}{k}": v for k, v in best_weights.items()})
        if self.averaged is not None:
            tensors.update({f"averaged.{k}": v for k, v in self.averaged.state_dict().items()})
        optimizer_state, param_groups = optimizer_tensors(optimizer)
        tensors.update(optimizer_state)
        # Every rank's generator, so a resumed run draws the dropout masks it would have drawn.
        for rank, rng in enumerate(rngs):
            tensors["rng.torch" if rank == 0 else f"rng.torch.{rank}"] = rng
        for rank, rng in enumerate(device_rngs):
            tensors[device_rng_key(self.device, rank)] = rng
        within = state.get("step")  # (a checkpoint within the epoch after state["epoch"])
        name = (f"epoch-{state['epoch'] + 1}-step-{within}.safetensors" if within else
                f"epoch-{state['epoch']}.safetensors")
        atomic_save_tensors(self.checkpoint_dir / name, tensors)
        atomic_write_json(self.checkpoint_dir / "state.json", {
            **state,
            "tensors": name,
            "optimizer_param_groups": param_groups,
            "schedule": schedule.state_dict(),
        })
        self._publish(best_weights, state["history"])
        self._remove_stale_tensors(name)

    def _publish(self, best_weights: dict | None, history: list[dict] | None) -> None:
        """What a checkpoint commits that others read: the best weights and the history (None: unchanged)."""
        if best_weights is not None:
            atomic_save_tensors(self.run_dir / "model.safetensors", best_weights)
        if history is not None:
            write_jsonl(self.run_dir / "history.jsonl", history)

    def _load_checkpoint(self, optimizer, schedule) -> dict:
        saved = checkpoint_state(self.run_dir, resuming=True)
        if saved.setdefault("world_size", 1) != self.distributed.world_size:
            raise AttnclfError(f"{self.run_dir} was trained by {saved['world_size']} process(es); resume it with "
                               f"as many (torchrun --nproc-per-node), so its global batch stays the same")
        committed = checkpoint_tensors(self.run_dir, saved)
        tensors = load_weights(committed)
        saved.pop("tensors", None)
        if self.distributed.is_main:
            # A stop after state.json may have kept them from model.safetensors and history.jsonl: published again.
            self._publish({k[len(_BEST):]: v for k, v in tensors.items() if k.startswith(_BEST)} or None,
                          saved.get("history"))
            self._remove_stale_tensors(committed.name)  # what a crash left beside it, which the run may not overwrite
        self.model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
        if self.averaged is not None:
            self.averaged.load_state_dict({k[9:]: v for k, v in tensors.items() if k.startswith("averaged.")})
        restore_optimizer(optimizer, tensors, saved.pop("optimizer_param_groups"))
        schedule.load_state_dict(saved.pop("schedule"))
        rank = self.distributed.rank
        torch.set_rng_state(tensors["rng.torch" if rank == 0 else f"rng.torch.{rank}"])
        # (A checkpoint of a run on the CPU has no GPU generator's state: resumed on a GPU, it draws from its seed.)
        if device_rng_key(self.device, rank) in tensors:
            set_device_generator_state(self.device, tensors[device_rng_key(self.device, rank)])
        return saved

    def _remove_stale_tensors(self, committed: str) -> None:
        """Delete the checkpoint's tensor files but the ``committed`` one state.json names, each the size of the
        whole state: an earlier checkpoint's (interrupted before this deleted it, a run can finish without writing
        another), an uncommitted one's, or the temporary file of a write cut short (kill -9)."""
        for path in self.checkpoint_dir.iterdir():
            if path.name != committed and (path.suffix == ".safetensors" or path.name.endswith(".tmp")):
                path.unlink(missing_ok=True)


def device_rng_key(device: torch.device, rank: int = 0) -> str:
    """Where a checkpoint keeps rank ``rank``'s generator of ``device`` (a GPU's; the CPU's is ``rng.torch``): a run's,
    and a pretraining's (one process, rank 0).

    >>> device_rng_key(torch.device("cuda", 1), 1)
    'rng.cuda.1'
    """
    return f"rng.{device.type}" if rank == 0 else f"rng.{device.type}.{rank}"


def stopped_early(state: dict, patience: int) -> bool:
    """Whether a run's checkpointed ``state`` had gone ``patience`` epochs without a better validation score: early
    stopping ended it there, whatever its epoch budget (a run without validation never stops early).

    >>> stopped_early({"stale_epochs": 3}, patience=3), stopped_early({"stale_epochs": 3}, patience=0)
    (True, False)
    """
    return bool(patience and state.get("stale_epochs", 0) >= patience)


def checkpoint_state(run_dir: str | Path, resuming: bool = False) -> dict:
    """What a run's last checkpoint recorded (its epoch, history, stale epochs...); empty without one. Each field it
    holds is checked here, once, as every reader of it asks it for fields: a hand-edited or damaged one is one line
    naming the file and the field. ``resuming``: the fields only loading it reads must be there too.

    >>> checkpoint_state("no/such/run")
    {}
    """
    path = Path(run_dir) / "checkpoint" / "state.json"
    recorded = read_json(path) if path.is_file() else {}
    if not isinstance(recorded, dict):
        raise RunDirError(f"{path}: expected a JSON object, the checkpoint's state, got {type(recorded).__name__}")
    refusal = _state_refusal(recorded, resuming)
    if refusal is not None:
        raise RunDirError(f"{path}: {refusal}")
    return recorded


def _state_refusal(state: dict, resuming: bool) -> str | None:
    """Why a checkpoint's ``state`` cannot be read, as ``_save_checkpoint`` writes it, or None. Fields may be
    missing (checkpoints of older versions lack some; tests write ``{}``), but for those ``resuming`` loads."""
    def counted(name: str, least: int) -> bool:
        value = state[name]
        return whole_number(value) is not None and value >= least

    def objects(name: str) -> bool:
        return isinstance(state[name], list) and all(isinstance(item, dict) for item in state[name])

    checks = [("epoch", lambda: counted("epoch", 0), "be a whole number of at least 0"),
              ("stale_epochs", lambda: counted("stale_epochs", 0), "be a whole number of at least 0"),
              ("world_size", lambda: counted("world_size", 1), "be a whole number of at least 1"),
              ("best", lambda: state["best"] is None or real_number(state["best"]) is not None, "be a number or null"),
              ("history", lambda: objects("history"), "be a list of JSON objects (the epochs' records)"),
              # (a bare name: a path would load, and keep, a file outside the checkpoint)
              ("tensors", lambda: isinstance(state["tensors"], str) and state["tensors"] not in ("", ".", "..")
               and Path(state["tensors"]).name == state["tensors"], "name a file in the checkpoint folder"),
              ("optimizer_param_groups", lambda: objects("optimizer_param_groups"), "be a list of JSON objects"),
              ("schedule", lambda: isinstance(state["schedule"], dict), "be a JSON object")]
    for name, holds, must in checks:
        if name in state and not holds():
            return f"{name} must {must}, got {shown(state[name])}"
    if resuming:
        for name in ("optimizer_param_groups", "schedule"):
            if name not in state:
                return f"{name} is missing, which a resume needs"
    within = [name for name in _WITHIN_EPOCH if name in state]
    if not within:
        return None
    if len(within) < len(_WITHIN_EPOCH):
        missing = next(name for name in _WITHIN_EPOCH if name not in state)
        return (f"{', '.join(_WITHIN_EPOCH[:-1])} and {_WITHIN_EPOCH[-1]} go together (a checkpoint within an "
                f"epoch), but {missing} is missing")
    if not counted("epoch_steps", 1):
        return f"epoch_steps must be a whole number of at least 1, got {shown(state['epoch_steps'])}"
    step, steps = state["step"], state["epoch_steps"]
    if whole_number(step) is None or not 1 <= step <= steps:
        return f"step must be a whole number from 1 to epoch_steps ({steps}), got {shown(step)}"
    seconds = real_number(state["epoch_seconds"])
    if seconds is None or not seconds >= 0:
        return f"epoch_seconds must be a number of at least 0, got {shown(state['epoch_seconds'])}"
    processes, totals = state.get("world_size", 1), state["epoch_totals"]
    # (each process's summed loss, correct, seen and summed weight, which it goes on adding to)
    if not (isinstance(totals, list) and len(totals) == processes and all(
            isinstance(part, list) and len(part) == 4 and all(real_number(n) is not None for n in part)
            for part in totals)):
        return f"epoch_totals must be a list of {processes} list(s) of 4 numbers (one a process), got {shown(totals)}"
    return None


def checkpoint_tensors(run_dir: str | Path, state: dict | None = None) -> Path:
    """The file of the tensors (weights, optimiser moments, generators) a run's last checkpoint holds, as its
    state.json (``state``, read when not given) names it; ``last.safetensors`` in checkpoints from before it did.

    >>> checkpoint_tensors("runs/demo", {"tensors": "epoch-3.safetensors"}).name
    'epoch-3.safetensors'
    """
    checkpoint = Path(run_dir) / "checkpoint"
    if state is None:
        state = read_json(checkpoint / "state.json")
    return checkpoint / state.get("tensors", "last.safetensors")


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], list[dict]]:
    """An optimiser's state as safetensors can store it: its tensors by name (``optimizer.INDEX.NAME``), and its
    parameter groups, which are plain numbers for JSON. ``restore_optimizer`` reads them back.

    >>> weight = nn.Parameter(torch.ones(2)); optimizer = torch.optim.Adam([weight])
    >>> weight.sum().backward(); optimizer.step()
    >>> tensors, groups = optimizer_tensors(optimizer)
    >>> sorted(tensors), groups[0]["lr"]
    (['optimizer.0.exp_avg', 'optimizer.0.exp_avg_sq', 'optimizer.0.step'], 0.001)
    """
    state = optimizer.state_dict()
    tensors = {f"optimizer.{index}.{key}": torch.as_tensor(value)
               for index, values in state["state"].items() for key, value in values.items()}
    return tensors, state["param_groups"]


def restore_optimizer(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor],
                      param_groups: list[dict]) -> None:
    """Load what ``optimizer_tensors`` saved (``tensors`` may hold other names too).

    >>> weight = nn.Parameter(torch.ones(2)); optimizer = torch.optim.Adam([weight])
    >>> restore_optimizer(optimizer, {"optimizer.0.step": torch.tensor(4.0), "rng.torch": torch.zeros(1)},
    ...                   optimizer_tensors(optimizer)[1])
    >>> optimizer.state_dict()["state"][0]["step"].item()
    4.0
    """
    state: dict = {"state": {}, "param_groups": param_groups}
    for key, value in tensors.items():
        if key.startswith("optimizer."):
            _, index, name = key.split(".", 2)
            state["state"].setdefault(int(index), {})[name] = value  # load_state_dict moves it
    optimizer.load_state_dict(state)


def count_ngram_prior(model: nn.Module, train: BucketBatches) -> None:
    """Let a model with a naive-Bayes n-gram branch count the training set once, each text (or window) once.

    The count reads the examples in order, without the balanced sampler's repeats and omissions.

    >>> # count_ngram_prior(model, train_batches)  # before the first epoch; a resume's checkpoint holds the counts
    """
    branch = getattr(getattr(model, "base", model), "ngram_logits", None)  # a windowed model's own network's
    if branch is None:
        return
    in_order = copy.copy(train)
    in_order.shuffle, in_order.balanced = False, False
    branch.fit(
        (b.input_ids.flatten(0, -2), b.labels.repeat_interleave(b.input_ids.shape[1], dim=0)
         if b.input_ids.dim() == 3 else b.labels) for b in in_order)
