"""The training loop: optimiser, schedule, early stopping, checkpoints, resume.

Every epoch ends with a validation pass and a line of history. At most once per
``checkpoint_seconds`` (and always at the end) the run directory gets the best
weights so far in ``model.safetensors`` (by the monitored validation metric),
``history.jsonl``, and the full training state in ``checkpoint/``, so
``resume=True`` continues an interrupted run from its last checkpointed epoch
with the same result it would have reached uninterrupted.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from ..errors import AttnclfError
from ..evaluation.metrics import compute_metrics
from ..evaluation.predict import log_loss, predict_probabilities
from ..rundir import atomic_save_tensors, atomic_write_json, load_weights, read_json, write_jsonl
from ..text.batching import BucketBatches


@dataclass
class TrainConfig:
    epochs: int = 10
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    optimizer: str = "adamw"  # adamw | adam
    schedule: str = "linear"  # linear | cosine | constant, after warm-up
    warmup_ratio: float = 0.05
    grad_clip: float = 1.0  # 0 disables
    label_smoothing: float = 0.0
    class_weights: str = "none"  # none | balanced
    patience: int = 3  # epochs without improvement before stopping; 0 never stops early
    monitor: str = "macro_f1"  # validation accuracy | macro_f1 | loss
    bf16: bool = False  # bfloat16 autocast (CPU with AVX-512 bf16, or CUDA)
    checkpoint_seconds: float = 60.0  # at most one checkpoint per this many seconds, and one at the end
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def _make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    # Weight decay on matrices only: decaying biases, norms and embeddings' pad row helps nothing.
    decay = [p for n, p in model.named_parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if config.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=config.lr)
    if config.optimizer == "adam":
        return torch.optim.Adam([{"params": decay + no_decay}], lr=config.lr)
    raise AttnclfError(f"optimizer must be adamw or adam, got {config.optimizer!r}")


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
        return 1.0

    if config.schedule not in ("linear", "cosine", "constant"):
        raise AttnclfError(f"schedule must be linear, cosine or constant, got {config.schedule!r}")
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _class_weights(labels: np.ndarray, num_classes: int, how: str) -> torch.Tensor | None:
    if how == "none":
        return None
    if how != "balanced":
        raise AttnclfError(f"class weights must be none or balanced, got {how!r}")
    counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
    return torch.tensor(len(labels) / (num_classes * np.maximum(counts, 1)), dtype=torch.float32)


def _better(metric: str, value: float, best: float | None) -> bool:
    if best is None:
        return True
    return value < best if metric == "loss" else value > best


class Trainer:
    """Fits one model on bucketed batches, writing progress into ``run_dir``.

    >>> # trainer = Trainer(model, TrainConfig(epochs=3), run_dir, device)
    >>> # history = trainer.fit(train_batches, val_batches)
    """

    def __init__(self, model: nn.Module, config: TrainConfig, run_dir: Path, device: torch.device,
                 label_names: list[str], progress: bool = True):
        if config.monitor not in ("accuracy", "macro_f1", "loss"):
            raise AttnclfError(f"monitor must be accuracy, macro_f1 or loss, got {config.monitor!r}")
        self.model = model.to(device)
        self.config = config
        self.run_dir = Path(run_dir)
        self.device = device
        self.label_names = label_names
        self.progress = progress
        self.checkpoint_dir = self.run_dir / "checkpoint"

    def fit(self, train: BucketBatches, validation: BucketBatches, resume: bool = False) -> list[dict]:
        config = self.config
        torch.manual_seed(config.seed)
        optimizer = _make_optimizer(self.model, config)
        schedule = _make_schedule(optimizer, config, total_steps=config.epochs * len(train))
        weights = _class_weights(train.labels, len(self.label_names), config.class_weights)
        loss_fn = nn.CrossEntropyLoss(
            weight=None if weights is None else weights.to(self.device), label_smoothing=config.label_smoothing
        )
        state = {"epoch": 0, "best": None, "stale_epochs": 0, "history": []}
        if resume and (self.checkpoint_dir / "state.json").exists():
            state = self._load_checkpoint(optimizer, schedule)
        self.checkpoint_dir.mkdir(exist_ok=True)
        best_weights = None  # kept in memory; written with each checkpoint
        last_saved = time.perf_counter()
        print_every = max(1, config.epochs // 20)

        for epoch in range(state["epoch"] + 1, config.epochs + 1):
            started = time.perf_counter()
            train.set_epoch(epoch)
            train_loss, train_acc = self._train_epoch(train, optimizer, schedule, loss_fn, epoch)
            record = {"epoch": epoch, "train_loss": train_loss, "train_accuracy": train_acc,
                      **self._validate(validation), "lr": schedule.get_last_lr()[0],
                      "seconds": round(time.perf_counter() - started, 3)}
            state["history"].append(record)
            monitored = record[f"val_{config.monitor}"]
            if _better(config.monitor, monitored, state["best"]):
                state["best"], state["stale_epochs"] = monitored, 0
                best_weights = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            else:
                state["stale_epochs"] += 1
            state["epoch"] = epoch
            stopping = epoch == config.epochs or bool(config.patience and state["stale_epochs"] >= config.patience)
            # Checkpoints cost a write of the whole model; tiny epochs (toy sets) must not pay it every time.
            if stopping or time.perf_counter() - last_saved >= config.checkpoint_seconds:
                self._save_checkpoint(optimizer, schedule, state, best_weights)
                best_weights, last_saved = None, time.perf_counter()
            if self.progress and (epoch % print_every == 0 or stopping):
                tqdm.write(
                    f"epoch {epoch}: train loss {train_loss:.4f} acc {train_acc:.4f} | "
                    f"val loss {record['val_loss']:.4f} acc {record['val_accuracy']:.4f} "
                    f"macro-F1 {record['val_macro_f1']:.4f} | {record['seconds']:.1f}s"
                )
            if stopping:
                break
        # The run ends holding its best weights, not its last.
        self.model.load_state_dict(load_weights(self.run_dir / "model.safetensors"))
        return state["history"]

    def _validate(self, validation: BucketBatches) -> dict:
        probabilities = predict_probabilities(self.model, validation, self.device)
        metrics = compute_metrics(validation.labels, probabilities, self.label_names, report=False)
        return {
            "val_loss": log_loss(validation.labels, probabilities),
            "val_accuracy": metrics["accuracy"],
            "val_macro_f1": metrics["macro_f1"],
            "val_macro_precision": metrics["macro_precision"],
            "val_macro_recall": metrics["macro_recall"],
            "val_roc_auc": metrics["roc_auc"],
            **{f"val_{k}": v for k, v in metrics.get("binary", {}).items()},
        }

    def _train_epoch(self, batches, optimizer, schedule, loss_fn, epoch) -> tuple[float, float]:
        self.model.train()
        total_loss = torch.zeros((), device=self.device)
        correct = torch.zeros((), device=self.device, dtype=torch.long)
        seen = 0
        bar = tqdm(batches, desc=f"epoch {epoch}", total=len(batches), disable=not self.progress, leave=False)
        for step, batch in enumerate(bar):
            batch = batch.to(self.device)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.config.bf16):
                logits = self.model(batch.input_ids, batch.attention_mask).logits
            loss = loss_fn(logits.float(), batch.labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if self.config.grad_clip:
                nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
            optimizer.step()
            schedule.step()
            n = len(batch.labels)
            total_loss += loss.detach() * n
            correct += (logits.argmax(-1) == batch.labels).sum()
            seen += n
            if self.progress and step % 20 == 0:  # .item() syncs; do it rarely
                bar.set_postfix(loss=f"{total_loss.item() / seen:.4f}", acc=f"{correct.item() / seen:.4f}")
        return total_loss.item() / seen, correct.item() / seen

    def _save_checkpoint(self, optimizer, schedule, state: dict, best_weights: dict | None) -> None:
        """Best weights (if they changed), history, then the full state to resume from: in that order,
        so a crash between writes resumes from an older state that is still consistent."""
        if best_weights is not None:
            atomic_save_tensors(self.run_dir / "model.safetensors", best_weights)
        write_jsonl(self.run_dir / "history.jsonl", state["history"])
        tensors = {f"model.{k}": v for k, v in self.model.state_dict().items()}
        opt_state = optimizer.state_dict()
        for index, values in opt_state["state"].items():
            for key, value in values.items():
                tensors[f"optimizer.{index}.{key}"] = torch.as_tensor(value)
        tensors["rng.torch"] = torch.get_rng_state()
        atomic_save_tensors(self.checkpoint_dir / "last.safetensors", tensors)
        atomic_write_json(self.checkpoint_dir / "state.json", {
            **state,
            "optimizer_param_groups": opt_state["param_groups"],
            "schedule": schedule.state_dict(),
        })

    def _load_checkpoint(self, optimizer, schedule) -> dict:
        saved = read_json(self.checkpoint_dir / "state.json")
        tensors = load_weights(self.checkpoint_dir / "last.safetensors")
        self.model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
        opt_state: dict = {"state": {}, "param_groups": saved.pop("optimizer_param_groups")}
        for key, value in tensors.items():
            if key.startswith("optimizer."):
                _, index, name = key.split(".", 2)
                opt_state["state"].setdefault(int(index), {})[name] = value  # load_state_dict moves it
        optimizer.load_state_dict(opt_state)
        schedule.load_state_dict(saved.pop("schedule"))
        torch.set_rng_state(tensors["rng.torch"])
        return saved
