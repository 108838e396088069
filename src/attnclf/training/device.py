"""How the process computes: the device (CUDA, then Apple's MPS, then the CPU, unless told otherwise), its random
generators, its threads, and how glibc's allocator hands out large blocks."""

from __future__ import annotations

import ctypes
import importlib
import os
import platform
import sys
import warnings
from contextlib import contextmanager
from typing import Iterator

import torch
from threadpoolctl import threadpool_info, threadpool_limits

from ..checks import check_device_name, check_threads
from ..errors import AttnclfError, AttnclfWarning

M_MMAP_THRESHOLD = -3  # mallopt's parameter number for the mmap threshold (glibc's malloc.h)
MMAP_THRESHOLD = 4 * 2 ** 20  # bytes: blocks from here up get pages of their own, returned when freed


def resolve_device(name: str = "auto") -> torch.device:
    """The device to run on: ``auto`` takes CUDA, else Apple's MPS, else the CPU; ``cuda:N`` the GPU of index N.

    >>> resolve_device("cpu")
    device(type='cpu')
    """
    name = check_device_name(str(name))  # (a torch.device from Python, as its string names it)
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise AttnclfError(f"device {name} asked for, but no CUDA device is available")
        device, count = torch.device(name), torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise AttnclfError(f"device {name} asked for, but this machine has {count} CUDA device"
                               f"{'s: cuda:0 to cuda:' + str(count - 1) if count > 1 else ': cuda:0'}")
        return device
    if name == "mps" and not torch.backends.mps.is_available():
        raise AttnclfError("device mps asked for, but MPS is not available")
    return torch.device(name)


def check_bf16(device: torch.device) -> None:
    """Refuse bfloat16 autocast on a GPU that cannot compute in it, in one line: torch refuses it only at the first
    batch, with a traceback. Warn of it on an x86 CPU without bfloat16 instructions (AVX-512 BF16 or AMX), where
    torch emulates them: slower than float32, not faster (2.8x the demo's training time on an AVX2 EPYC,
    BENCHMARKS.md).

    >>> check_bf16(torch.device("cpu"))
    """
    if device.type == "cpu" and not cpu_computes_bf16():
        warnings.warn("bf16: this CPU has no bfloat16 instructions (AVX-512 BF16 or AMX), so torch emulates them, "
                      "slower than float32; run without bf16 (--bf16)", AttnclfWarning, stacklevel=2)
    if device.type != "cuda":
        return
    with torch.cuda.device(device):  # (is_bf16_supported asks of the current GPU: make it the one named)
        supported = torch.cuda.is_bf16_supported()
    if not supported:
        raise AttnclfError(f"bf16: {torch.cuda.get_device_name(device)} cannot compute in bfloat16; run without bf16 "
                           f"(--bf16), in float32")


def cpu_computes_bf16() -> bool:
    """Whether this CPU has bfloat16 instructions torch uses (AVX-512 BF16 or AMX); True where it cannot tell (not
    x86, or a torch without the probes).

    >>> isinstance(cpu_computes_bf16(), bool)
    True
    """
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True
    probes = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return any(probe is None or probe() for probe in probes)


def describe_device(device: torch.device) -> str:
    """``device`` as a run records it: a GPU with its model, since the same settings train other bytes on another.

    >>> describe_device(torch.device("cpu"))
    'cpu'
    """
    if device.type != "cuda":
        return str(device)
    index = torch.cuda.current_device() if device.index is None else device.index  # ("auto" gives cuda alone)
    return f"cuda:{index} ({torch.cuda.get_device_name(index)})"


def _cuda_generator(device: torch.device) -> torch.Generator:
    """The generator of CUDA ``device`` (``cuda`` alone: the current GPU), which its dropout draws from."""
    torch.cuda.init()  # (the GPUs' generators exist once CUDA does; a seed given before waits until then)
    return torch.cuda.default_generators[torch.cuda.current_device() if device.index is None else device.index]


def seed_generators(seed: int, device: torch.device) -> None:
    """Seed torch's CPU generator (initial weights are drawn on the CPU) and the generator of ``device``, where
    dropout draws: nothing else. ``torch.manual_seed`` seeds every GPU too, which ``forked_generators`` would not put
    back, and on the CPU that would reseed a notebook's GPU stream for nothing.

    >>> seed_generators(0, torch.device("cpu")); round(torch.rand(1).item(), 4)
    0.4963
    """
    torch.random.default_generator.manual_seed(seed)
    if device.type == "cuda":
        _cuda_generator(device).manual_seed(seed)
    elif device.type == "mps":
        torch.mps.manual_seed(seed)


def device_generator_state(device: torch.device) -> torch.Tensor | None:
    """The state of the generator ``device``'s random draws come from, if it is not the CPU's (None on the CPU):
    what a checkpoint keeps beside the CPU's so that a run resumed on a GPU draws the dropout masks it would have.

    >>> device_generator_state(torch.device("cpu")) is None
    True
    """
    if device.type == "cuda":
        return _cuda_generator(device).get_state()
    if device.type == "mps":
        return torch.mps.get_rng_state()
    return None


def set_device_generator_state(device: torch.device, state: torch.Tensor) -> None:
    """Put back what ``device_generator_state`` returned for ``device``.

    >>> # set_device_generator_state(gpu, device_generator_state(gpu))  # gpu = torch.device("cuda", 0)
    """
    if device.type == "cuda":
        _cuda_generator(device).set_state(state)
    elif device.type == "mps":
        torch.mps.set_rng_state(state)


@contextmanager
def forked_generators(device: torch.device) -> Iterator[None]:
    """Run on a fork of torch's CPU generator and of ``device``'s: whatever is seeded and drawn inside, the caller's
    streams (a notebook's ``torch.manual_seed``) go on afterwards as if nothing had run. Other GPUs' generators are
    not touched (``seed_generators``), and on the CPU no GPU's is read: CUDA is not even started.

    >>> seed_generators(1, torch.device("cpu")); expected = torch.rand(1)
    >>> seed_generators(1, torch.device("cpu"))
    >>> with forked_generators(torch.device("cpu")):
    ...     seed_generators(5, torch.device("cpu")); drawn = torch.rand(1)
    >>> torch.equal(torch.rand(1), expected)
    True
    """
    cpu, own = torch.get_rng_state(), device_generator_state(device)
    try:
        yield
    finally:
        torch.set_rng_state(cpu)
        if own is not None:
            set_device_generator_state(device, own)


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` intra-op threads (None: leave PyTorch's choice, one per core), then restore it.

    numpy's BLAS gets the same limit: a product split over another number of threads adds its sums in another
    order, so the same ``--threads`` gives the same weights (scipy's, which only the word vectors' SVD uses, is
    bounded there: ``blas_threads``).
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
    try:
        with threadpool_limits(limits=threads, user_api="blas"):  # (None: no limit)
            yield
    finally:
        torch.set_num_threads(previous)


def blas_threads(threads: int | None) -> threadpool_limits:
    """A context in which numpy's and scipy's BLAS run ``threads`` threads (None: no limit), for the word vectors'
    SVD, whose sums' order that count decides. threadpoolctl bounds only the libraries loaded by then, so scipy's
    own BLAS (the SVD's QR) is loaded here, not by ``torch_threads``: it costs every command 0.3 s of imports.

    >>> with blas_threads(1):
    ...     {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}
    {1}
    """
    importlib.import_module("scipy.linalg")
    return threadpool_limits(limits=check_threads(threads), user_api="blas")


def blas_libraries() -> list[str]:
    """The BLAS libraries numpy and scipy loaded: which one, its version and the CPU kernel it chose. Beside the
    thread count, they decide the order of the vectors' sums, so a run records them.

    >>> # blas_libraries()  # ['openblas 0.3.31 SkylakeX', ...]
    """
    return sorted({f"{lib['internal_api']} {lib['version']} {lib.get('architecture') or ''}".strip()
                   for lib in threadpool_info() if lib["user_api"] == "blas"})


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Have glibc serve every block of ``threshold`` bytes or more with pages of its own, returned when it is
    freed; return whether the setting took (False off glibc, or when the environment already sets it).

    By default glibc raises this threshold to the size of each large block freed, up to 32 MB, so that a
    training step's activations (tens of MB, of a shape that changes with each batch's length) come from the
    heap, which fragments: ``attnclf pretrain`` of 8,000 IMDB reviews peaked at 3.2 GB in its first epoch and
    4.5-4.7 GB in its fourth; with the threshold fixed at 4 MB, at 2.1-2.2 GB in every epoch, to the same weights,
    for 18-46% more CPU time (fresh pages for each large block; BENCHMARKS.md). ``attnclf pretrain`` pays that for
    memory that stays put over hours; ``attnclf train`` (9% less memory, 5-9% more CPU) does not. The setting is the
    whole process's, so the command line makes it and the library leaves it to its caller.

    >>> # fix_mmap_threshold()  # True on Linux with glibc
    """
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if not sys.platform.startswith("linux") or "mmap_threshold" in tunables or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the process already runs on
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, threshold) == 1
