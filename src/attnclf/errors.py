"""Errors a user can act on, and warnings they may want to.

Anything raised as an ``AttnclfError`` reaches the command line as one line,
``attnclf: error: <message>``, with exit status 2 and no traceback. Messages
name the problem precisely: the file, the line or row, the column, the value.
An ``AttnclfWarning`` is the Python side of the command line's ``note:`` lines.
"""

import difflib
import sys


NAME_LENGTH = 100  # first_few writes a value whole up to this many characters: a column, class or run name


def first_few(values, most: int = 3) -> str:
    """The first ``most`` of ``values``, quoted, for a message that would otherwise list hundreds. They are mostly
    names to pick one of (a file's columns, a run's classes, a folder's runs), typed back whole, so each is cut
    (``shown``) only past ``NAME_LENGTH`` characters: a header-less file's first row, read as its columns, may hold
    a whole text.

    >>> first_few(["a", "b"]), first_few(["a", "b", "c", "d"]), first_few([3, 7], most=1), len(first_few(["x" * 5000]))
    ("'a', 'b'", "'a', 'b', 'c', ...", '3, ...', 103)
    """
    values = list(values)
    named = ", ".join(shown(value, most=NAME_LENGTH) for value in values[:most])
    return f"{named}{', ...' if len(values) > most else ''}"


def unknown_name(kind: str, name, choices, tail: str = "") -> str:
    """The message for a ``name`` that is none of ``choices``, led by the nearest of them where one is close (a typo
    names what was meant better than a list does); ``tail`` ends the list.

    >>> unknown_name("model", "self-atn", ["boe", "self-attn"])
    "unknown model 'self-atn' (did you mean 'self-attn'?); choose one of boe, self-attn"
    >>> unknown_name("dataset", 7, ["imdb"], tail=", or a file")
    'unknown dataset 7; choose one of imdb, or a file'
    """
    choices = [str(choice) for choice in choices]
    return f"unknown {kind} {shown(name)}{nearest(name, choices)}; choose one of {', '.join(choices)}{tail}"


def nearest(name, choices) -> str:
    """`` (did you mean 'x'?)``, naming the choice ``name`` is a likely typo of, or "" where none is close.

    >>> nearest("postive", ["negative", "positive"]), nearest("neutral", ["negative", "positive"]), nearest(3, ["3"])
    (" (did you mean 'positive'?)", '', '')
    """
    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, [str(choice) for choice in choices], n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


def shown(value, most: int = 40, write=repr) -> str:
    """``value`` as ``write`` writes it (its repr), on one line and cut to its first ``most`` characters: a message
    names a huge value by its start (a service's request may hold a megabyte of it), and stays one line.

    >>> shown("x" * 100, most=5), shown(7), shown(10 ** 5000), shown([[1], [2]], write=lambda v: "[1],\\n [2]")
    ("'xxxx...", '7', 'an integer of over 4300 digits', '[1], [2]')
    """
    try:
        text = write(value)
    except Exception:  # (a repr that fails is no reason to lose the message it was for)
        if isinstance(value, int):  # (one past sys.get_int_max_str_digits() is not written out)
            return f"an integer of over {sys.get_int_max_str_digits()} digits"
        return f"a value of type {type(value).__name__}"
    text = " ".join(line.strip() for line in text.splitlines())  # (numpy's arrays, for one, span lines)
    return text if len(text) <= most else f"{text[:most]}..."


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is numpy's, torch's CPU allocator's or CUDA's out-of-memory error.

    >>> is_out_of_memory(RuntimeError("CUDA out of memory")), is_out_of_memory(RuntimeError("a docstring"))
    (True, False)
    """
    return isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and (
        "can't allocate memory" in str(exc) or "out of memory" in str(exc)))


class AttnclfError(ValueError):
    """A problem with the user's input, data, or environment (not a bug). A ``ValueError``, so code that catches bad
    input the Python way (scikit-learn's checks among it) catches it too."""


class DataError(AttnclfError):
    """A dataset or data file is missing, corrupt, or malformed."""


class RunDirError(AttnclfError):
    """A run directory is missing, incomplete, or from an incompatible version."""


class AttnclfWarning(UserWarning):
    """Something worth knowing that does not stop the work, told the Python way (``warnings.warn``) where the
    command line prints a ``note:`` line; ``warnings.filterwarnings("ignore", category=AttnclfWarning)`` silences it.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("the n-gram branch keeps fewer buckets", AttnclfWarning)
    >>> caught[0].category.__name__
    'AttnclfWarning'
    """
