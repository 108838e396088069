"""A model's size, known before a byte of it is allocated: a ``max_len`` or vocabulary too large for the machine is a
one-line error naming it, not torch's allocator failing deep inside the construction (or the machine swapping).

A model built under ``outlining()`` (the meta device) has every tensor's shape and none of its memory, so its size is
exact.
The bound is the machine's physical memory (or its container's limit, when lower), never a fixed cap: a
4,096-position table at d_model 128 is 2 MB.

>>> from attnclf.models import build_model
>>> with outlining():
...     outline = build_model("self-attn", vocab_size=20, max_len=100_000_000, positional="learned")
>>> f"{model_bytes(outline) / 1e9:.1f} GB", largest_table(outline)
('51.2 GB', ('max_len', 100000000, 'max_len (--max-len)'))
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch
from torch.overrides import TorchFunctionMode

from ..errors import AttnclfError

SMALLEST_VOCABULARY = 3  # <pad>, <unk> and a word (TokenizerConfig's least vocab_size)
PROC_CGROUP = Path("/proc/self/cgroup")  # which cgroups this process is in
CGROUP_ROOT = Path("/sys/fs/cgroup")  # where their limits are mounted


def machine_memory() -> int | None:
    """The memory this process may use, in bytes: the machine's physical memory, or its container's (cgroup's) limit
    where that is lower (past it the kernel kills the process without a word); None where the system says neither
    (Windows).

    >>> machine_memory() > 0
    True
    """
    try:
        # (SC_PAGESIZE, POSIX's name: macOS's Python knows no SC_PAGE_SIZE)
        physical = os.sysconf("SC_PAGESIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # (not POSIX)
        physical = None
    bounds = [bound for bound in (physical, cgroup_memory_limit()) if bound]
    return min(bounds) if bounds else None


def cgroup_memory_limit() -> int | None:
    """The lowest memory limit of this process's cgroup and of those above it (cgroup v2's ``memory.max``, v1's
    ``memory.limit_in_bytes``), or None: no limit, or no cgroups (not Linux).

    Each level from the process's cgroup up to the mount's root is read where it exists: a limit above binds too, and
    inside a container the path names the host's hierarchy while the mount's root is the container's own cgroup.
    """
    try:
        memberships = PROC_CGROUP.read_text().splitlines()
    except OSError:
        return None
    limits = []
    for membership in memberships:
        if membership.count(":") < 2:  # (not "id:controllers:path")
            continue
        _, controllers, path = membership.split(":", 2)
        if not controllers:
            mount, name = CGROUP_ROOT, "memory.max"
        elif "memory" in controllers.split(","):
            mount, name = CGROUP_ROOT / "memory", "memory.limit_in_bytes"
        else:
            continue
        parts = [part for part in path.split("/") if part]
        for depth in range(len(parts), -1, -1):
            try:
                limit = (mount.joinpath(*parts[:depth]) / name).read_text().strip()
            except OSError:
                continue
            if limit.isdigit():  # ("max": none)
                limits.append(int(limit))
    return min(limits) if limits else None


class _InitSkipped(TorchFunctionMode):
    """Leaves ``torch.nn.init``'s random fills undone, each returning its tensor: an outline has no values to fill, and
    torch fills meta tensors with Python reference code whose first use imports its compiler, torch._dynamo (2-3 s of
    every command that loads a model). (The fills that reach a mode are those torch lets one override: normal_,
    uniform_, constant_, kaiming_uniform_; zeros_ and ones_ run on as ``Tensor.zero_`` and ``fill_``, which cost
    nothing on the meta device.)"""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # (each init takes its tensor first: torch passes it by name)
        if getattr(func, "__module__", None) == "torch.nn.init":
            return kwargs["tensor"] if "tensor" in kwargs else args[0]
        return func(*args, **kwargs)


@contextmanager
def outlining() -> Iterator[None]:
    """Build models as outlines: on the meta device, every tensor's shape and none of its memory or values. The
    models themselves compute no values on it (``torch.empty(0).is_meta`` says when they are outlined), for the same
    reason as ``_InitSkipped``.

    >>> from attnclf.models import build_model
    >>> with outlining():
    ...     build_model("boe", vocab_size=20).token_embedding.weight.is_meta
    True
    """
    with torch.device("meta"), _InitSkipped():
        yield


def model_bytes(model: torch.nn.Module, copies: int = 1) -> int:
    """Bytes of ``copies`` of the model's parameters (training holds four: weights, gradients, two AdamW moments)
    plus its buffers (one copy: nothing trains them).

    >>> model_bytes(torch.nn.Linear(2, 2)), model_bytes(torch.nn.Linear(2, 2), copies=4)  # 6 float32 parameters
    (24, 96)
    """
    return (copies * sum(p.numel() * p.element_size() for p in model.parameters())
            + sum(b.numel() * b.element_size() for b in model.buffers()))


def largest_table(model: torch.nn.Module) -> tuple[str, int, str] | None:
    """What makes the model large, as (config field, its value, what to lower), when its largest tensor is a table
    with a row per word or per position (more rows than columns); None: its widths do."""
    largest = max([*model.parameters(), *model.buffers()], key=lambda tensor: tensor.numel())
    if largest.ndim != 2 or largest.shape[0] <= largest.shape[1]:
        return None
    for field, flag in (("vocab_size", "--vocab-size"), ("max_len", "--max-len")):
        if largest.shape[0] == getattr(model.config, field, None):
            return field, largest.shape[0], f"{field} ({flag})"
    return None


def too_large(name: str, model: torch.nn.Module, needed: int, purpose: str, shortfall: str,
              saved_in: str | Path | None = None, resuming: bool = False) -> AttnclfError:
    """The one-line error for model ``name`` (``model``, its outline) needing ``needed`` bytes for ``purpose``; the
    model of the run ``saved_in`` is not told to lower what its training fixed, but where to load it (``resuming``:
    to resume it).

    >>> from attnclf.models import build_model
    >>> with outlining():
    ...     outline = build_model("boe", vocab_size=10 ** 9, embed_dim=8)
    >>> str(too_large("boe", outline, 32 * 10 ** 9, "its weights", "more than this machine's 16.0 GB", "runs/big"))
    ... # doctest: +NORMALIZE_WHITESPACE
    "runs/big: model 'boe' with vocab_size 1,000,000,000 needs at least 32.0 GB for its weights, more than this \
machine's 16.0 GB; its training fixed that size: load it where more memory is free, or train it again and lower \
vocab_size (--vocab-size)"
    """
    table = largest_table(model)
    cause, lower = (f" with {table[0]} {table[1]:,}", table[2]) if table else ("", "the model's size (--set)")
    needs = f"model {name!r}{cause} needs at least {needed / 1e9:,.1f} GB for {purpose}, {shortfall}"
    if saved_in is None:
        return AttnclfError(f"{needs}; lower {lower}")
    # The weights alone: what a batch of texts needs comes on top, so no inference option (--max-batch) shrinks them.
    return AttnclfError(f"{saved_in}: {needs}; its training fixed that size: {'resume' if resuming else 'load'} it "
                        f"where more memory is free, or train it again and lower {lower}")


def refuse_oversized(name: str, model: torch.nn.Module, *, training: bool = False,
                     saved_in: str | Path | None = None) -> None:
    """Refuse model ``name`` (best its meta-device outline: nothing allocated yet) when its weights and buffers
    exceed this machine's memory, or, ``training`` it, four copies of its weights (with gradients and AdamW's two
    moments) and its buffers do. ``saved_in``: the run it is loaded (or, ``training``, resumed) from (``too_large``).

    >>> from attnclf.models import build_model
    >>> with outlining():
    ...     refuse_oversized("boe", build_model("boe", vocab_size=20))  # a few kB: nothing to say
    """
    copies, purpose = (4, "its weights, gradients and optimiser state") if training else (1, "its weights")
    memory, needed = machine_memory(), model_bytes(model, copies)
    if memory is not None and needed > memory:
        raise too_large(name, model, needed, purpose, f"more than this machine's {memory / 1e9:,.1f} GB", saved_in,
                        resuming=training)


def refuse_untrainable(name: str, saved_in: str | Path | None = None, **config_fields) -> None:
    """Refuse training model ``name`` (``build_model``'s fields) where four copies of its weights and its buffers
    exceed this machine's memory; an impossible one (heads that do not divide d_model) fails in its own words. It is
    sized on the meta device: nothing is allocated.

    ``vocab_size`` only caps the vocabulary a tokenizer learns (10**9: every word), so the check before the texts
    are read passes the fewest words a tokenizer has, ``SMALLEST_VOCABULARY``, and the one after passes what it
    learned: a cap is never refused for what the texts do not hold. ``saved_in``: the run being resumed, whose size
    its training fixed (``too_large``).

    >>> refuse_untrainable("self-attn", vocab_size=SMALLEST_VOCABULARY, max_len=512)  # a few MB: nothing to say
    """
    from .classifiers import build_model  # (it refuses untrainable sizes with this module's help)

    with outlining():
        outline = build_model(name, **config_fields)
    refuse_oversized(name, outline, training=True, saved_in=saved_in)
