"""Device choice: CUDA, then Apple's MPS, then the CPU, unless told otherwise."""

from __future__ import annotations

import torch

from ..errors import AttnclfError

DEVICES = ("auto", "cpu", "cuda", "mps")


def resolve_device(name: str = "auto") -> torch.device:
    """The device to run on.

    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if name not in DEVICES:
        raise AttnclfError(f"--device must be one of {', '.join(DEVICES)}, got {name!r}")
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise AttnclfError("--device cuda asked for, but no CUDA device is available")
    if name == "mps" and not torch.backends.mps.is_available():
        raise AttnclfError("--device mps asked for, but MPS is not available")
    return torch.device(name)
