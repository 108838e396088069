"""The steps of one long epoch, as `train` and `pretrain` both take them: from the step a checkpoint within the epoch
kept (a resume skips those before it), a bar at a terminal, else a plain progress line every
``PROGRESS_LINE_SECONDS`` (a log kept nothing between epochs hours apart), and a checkpoint due every
``checkpoint_minutes`` of training.

>>> steps = EpochSteps([[0, 1], [2, 3]], "epoch 1", progress=False, checkpoint_minutes=0)
>>> [(step, batch) for step, batch in steps]
[(0, [0, 1]), (1, [2, 3])]
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence

from tqdm.auto import tqdm

from ..checks import real_number
from ..errors import AttnclfError, shown

# Without a terminal (`nohup attnclf train ... > log 2>&1`), a plain line within an epoch this often.
PROGRESS_LINE_SECONDS = 120
# Within an epoch, a checkpoint every this many minutes of training by default: an epoch of a million texts takes 20
# minutes and more on two cores (one of 50,000 reviews pretraining, hours), and a stop before its end kept nothing.
CHECKPOINT_MINUTES = 10.0


def clock() -> float:
    """Seconds, for the checkpoint intervals and progress lines (a test's fake clock replaces it)."""
    return time.perf_counter()


def stderr_is_terminal() -> bool:
    """Whether the epoch's bar draws (as tqdm decides it): else progress goes to plain lines."""
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def duration(seconds: float) -> str:
    """``seconds`` as a progress line gives them.

    >>> duration(42.4), duration(200), duration(7384)
    ('42s', '3m 20s', '2h 03m')
    """
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


def checked_minutes(minutes: object, name: str = "checkpoint_minutes") -> float:
    """``minutes`` between checkpoints within an epoch as a float (0: none; infinity: none either), or a one-line
    error naming it as ``name``.

    >>> checked_minutes(10), checked_minutes(0)
    (10.0, 0.0)
    """
    number = real_number(minutes)
    if number is None:
        raise AttnclfError(f"{name} must be a number, got {shown(minutes)}")
    if math.isnan(number) or number < 0:
        raise AttnclfError(f"{name} must be at least 0, got {shown(number)}")
    return float(number)


class EpochSteps:
    """An epoch's steps over ``batches`` from ``first`` (the step a checkpoint within it kept; the epoch had run
    ``carried`` seconds by then), each as (step, batch). ``progress`` draws a bar at a terminal, named ``label``,
    else prints a line every ``PROGRESS_LINE_SECONDS``; ``after_step`` counts each step and says when a checkpoint
    is due. ``unit`` names what a batch holds, for the rate.

    >>> steps = EpochSteps([[0, 1], [2, 3], [4]], "epoch 2", progress=False, checkpoint_minutes=0, first=2)
    >>> [step for step, _ in steps], steps.steps
    ([2], 3)
    """

    def __init__(self, batches: Sequence, label: str, *, progress: bool, checkpoint_minutes: float, first: int = 0,
                 carried: float = 0.0, unit: str = "examples") -> None:
        self.steps, self.first, self.carried, self.label, self.unit = len(batches), first, carried, label, unit
        self.interval = checkpoint_minutes * 60
        self.plain = progress and not stderr_is_terminal()
        self.started = self.last_line = clock()
        self.examples = 0  # since this process started the epoch, for its rate
        # None: no bar when stderr is not a terminal (a log would fill with carriage returns)
        self.bar = tqdm(batches[first:], desc=label, initial=first, total=self.steps,
                        disable=None if progress else True, leave=False)

    def __iter__(self) -> Iterator[tuple[int, object]]:
        return enumerate(self.bar, start=self.first)

    def seconds(self) -> float:
        """The epoch's seconds of training so far, those before a resume included."""
        return self.carried + clock() - self.started

    def after_step(self, done: int, examples: int, loss: Callable[[], float], last_saved: float) -> bool | None:
        """Count step ``done`` (1 for the first) of ``examples``, printing a progress line with ``loss()`` when one
        is due; whether a checkpoint is due, ``checkpoint_minutes`` after ``last_saved`` (the clock's, at the last
        checkpoint); None where none is ever due (the epoch's last step, which checkpoints as epochs end, or no
        interval), so that every process of a distributed run asks alike."""
        self.examples += examples
        if done == self.steps or not (self.plain or self.interval):
            return None
        now = clock()
        if self.plain and now - self.last_line >= PROGRESS_LINE_SECONDS:
            elapsed = now - self.started
            rate, eta = self.examples / max(elapsed, 1e-9), (self.steps - done) * elapsed / (done - self.first)
            rated = f"{rate:,.0f}" if rate >= 100 else f"{rate:.1f}"
            print(f"{self.label}: step {done:,} of {self.steps:,} ({done / self.steps:.0%}) | {rated} {self.unit}/s | "
                  f"{duration(self.carried + elapsed)} elapsed, ETA {duration(eta)} | loss {loss():.4f}",
                  file=sys.stderr, flush=True)
            self.last_line = now
        return now - last_saved >= self.interval if self.interval else None
