"""Device choice: CUDA, then Apple's MPS, then the CPU, unless told otherwise."""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from typing import Iterator

import torch
from threadpoolctl import threadpool_info, threadpool_limits

from ..checks import check_threads
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


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` intra-op threads (None: leave PyTorch's choice, one per core), then restore it.

    numpy's and scipy's BLAS (the word vectors' SVD) get the same limit: a product split over another number of
    threads adds its sums in another order, so the same ``--threads`` gives the same weights.
    Small models gain nothing from a second thread but synchronisation, and on a
    busy shared CPU every op then waits for the slower core: 1 is often fastest.

    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    """
    threads = check_threads(threads)
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
        # threadpoolctl bounds the libraries loaded so far: scipy's own BLAS (the SVD's QR) must be among them.
        importlib.import_module("scipy.linalg")
    try:
        with threadpool_limits(limits=threads, user_api="blas"):  # (None: no limit)
            yield
    finally:
        torch.set_num_threads(previous)


def blas_libraries() -> list[str]:
    """The BLAS libraries numpy and scipy loaded: which one, its version and the CPU kernel it chose. Beside the
    thread count, they decide the order of the vectors' sums, so a run records them.

    >>> # blas_libraries()  # ['openblas 0.3.31 SkylakeX', ...]
    """
    return sorted({f"{lib['internal_api']} {lib['version']} {lib.get('architecture') or ''}".strip()
                   for lib in threadpool_info() if lib["user_api"] == "blas"})
