"""Checks of values callers pass to the library, shared by its entry points. It imports nothing heavy: the ONNX
runtime, which runs without torch, uses them too, and the command line imports them as it starts."""

from __future__ import annotations

import math
import numbers
import re
from typing import Callable

from .errors import AttnclfError, shown


def by_field(name: str) -> str:
    """A setting as a Python user knows it, in an error: by its field's or argument's name. Checks that take
    ``named=`` default to it; the command line passes one that names its flags instead (``--max-train-examples``).

    >>> by_field("max_train_examples")
    'max_train_examples'
    """
    return name


def whole_number(value) -> int | None:
    """``value`` as an ``int`` if it is an integer of any type (numpy's too, as ``np.arange`` grids give), else
    None. A bool is not a number here: ``epochs=True`` is a mistake, not 1.

    >>> import numpy as np
    >>> whole_number(np.int64(3)), whole_number(2.0), whole_number(True), whole_number("2")
    (3, None, None, None)
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return None


def true_or_false(value, name: str) -> bool:
    """``value`` as a ``bool`` if it is True or False (numpy's too, as a grid of switches gives), else one line
    naming ``name``: 1, "yes" and an array are mistakes, and an array's truth fails only where it is asked.

    >>> import numpy as np
    >>> true_or_false(np.bool_(False), "cleaning lowercase")
    False
    >>> true_or_false("yes", "cleaning lemmatize")
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: cleaning lemmatize must be True or False, got 'yes'
    """
    if isinstance(value, bool):
        return value
    import numpy as np  # (here: imported at the top, it cost every command's start-up some 150 ms)

    if isinstance(value, np.bool_):
        return bool(value)
    raise AttnclfError(f"{name} must be True or False, got {shown(value)}")


def real_number(value) -> float | None:
    """``value`` as a ``float`` if it is a real number of any type (numpy's too, as ``np.linspace`` grids give),
    else None; not a bool, nor a string. One too large for a float is infinite, as ``float("1e400")`` reads.

    >>> import numpy as np
    >>> real_number(np.float32(0.5)), real_number(2), real_number(True), real_number("0.1"), real_number(-10 ** 400)
    (0.5, 2.0, None, None, -inf)
    """
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # (an int, or a Fraction, beyond the largest float)
            return math.inf if value > 0 else -math.inf
    return None


def weight(value, name: str) -> float:
    """``value`` as a ``float`` weight on a loss: a finite real number of at least 0 (0 leaves out what it weighs).
    Anything else is one line naming ``name``, the place the caller gave it (``class_weight['spam']``,
    ``sample_weight[3]``).

    >>> import numpy as np
    >>> weight(np.int64(2), "class_weight['spam']")
    2.0
    >>> weight(-1, "sample_weight[3]")
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: sample_weight[3] must be a finite number of at least 0, got -1
    """
    number = real_number(value)
    if number is None or not math.isfinite(number) or number < 0:
        raise AttnclfError(f"{name} must be a finite number of at least 0, got {shown(value)}")
    return number


def set_value(text: str):
    """What ``--set KEY=VALUE`` (and ``ablate --sweep``) makes of a VALUE typed: a whole number, a decimal, a bool
    (``true``/``false``, any case), else the text as it is.

    >>> set_value("4"), set_value("0.3"), set_value("True"), set_value("learned")
    (4, 0.3, True, 'learned')
    """
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def check_threads(threads, named: Callable[[str], str] = by_field) -> int | None:
    """``threads`` (None: the runtime's own choice) as an ``int`` of at least 1, or one line saying what is wrong
    (torch's and onnxruntime's own errors name their internals), naming it as ``named`` spells it (the command line:
    ``--threads``).

    >>> check_threads(2), check_threads(None)
    (2, None)
    """
    if threads is None:
        return None
    count = whole_number(threads)
    if count is None:
        raise AttnclfError(f"{named('threads')} must be a whole number, got {shown(threads)}")
    if count < 1:
        raise AttnclfError(f"{named('threads')} must be at least 1, got {shown(count)}")
    return count


BACKENDS = ("torch", "onnx")  # what runs a trained model: PyTorch, or its ONNX export on onnxruntime
ACCESS_LOGS = ("text", "json", "off")  # what `attnclf serve` writes on stdout of each request (here: the CLI's choices)


def check_backend(backend: str, *, int8: bool = False, device: str = "auto", bf16: bool = False,
                  named: Callable[[str], str] = by_field) -> None:
    """Refuse in one line the options ``backend`` has no use for (those of `attnclf predict` and `attnclf serve`),
    naming them by ``named`` (the command line: by their flags).

    >>> check_backend("onnx", int8=True)
    >>> check_backend("torch", int8=True)
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: int8 needs backend onnx
    """
    if backend not in BACKENDS:
        raise AttnclfError(f"{named('backend')} must be one of {', '.join(BACKENDS)}, got {shown(backend)}")
    if backend == "torch" and int8:
        raise AttnclfError(f"{named('int8')} needs {named('backend')} onnx")
    if backend == "onnx" and device not in ("auto", "cpu"):
        raise AttnclfError(f"{named('backend')} onnx runs on the CPU; drop {named('device')}")
    if backend == "onnx" and bf16:
        raise AttnclfError(f"{named('bf16')} is for {named('backend')} torch; the ONNX graph runs in float32 (or "
                           f"{named('int8')})")


def check_seed(seed, name: str = "seed") -> int:
    """``seed`` as an ``int`` that numpy's generators take (from 0 up to, not including, 2**32), or one line saying
    what is wrong (numpy's own error names no setting), naming ``name``, the setting the caller gave it as
    (``split_seed``, or a flag: ``--split-seed``).

    >>> check_seed(7)
    7
    >>> check_seed(-1, "split_seed")
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: split_seed must be at least 0 and below 4294967296, got -1
    """
    count = whole_number(seed)
    if count is None:
        raise AttnclfError(f"{name} must be a whole number, got {shown(seed)}")
    if not 0 <= count < 2 ** 32:
        raise AttnclfError(f"{name} must be at least 0 and below {2 ** 32}, got {shown(count)}")
    return count


DEVICES = ("auto", "cpu", "cuda", "mps")  # and cuda:N, a GPU by its index


def check_device_name(name: str) -> str:
    """``name`` if it names a device attnclf can run on (``cuda:N``: the GPU of index N), else a one-line error.
    (Here, not beside ``resolve_device``: the command line checks its flag without importing torch.)

    >>> check_device_name("cuda:1")
    'cuda:1'
    """
    if name not in DEVICES and not re.fullmatch(r"cuda:\d+", str(name)):
        raise AttnclfError(f"device must be auto, cpu, cuda, cuda:N (N counting from 0) or mps, not {shown(name)}")
    return name
