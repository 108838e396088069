"""Training: device choice, the loop, and whole runs."""

from .device import resolve_device
from .trainer import TrainConfig, Trainer

__all__ = ["resolve_device", "TrainConfig", "Trainer"]
