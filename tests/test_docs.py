"""The commands the documentation shows parse as the CLI stands: a renamed or removed flag breaks this test,
not a newcomer's first try."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from attnclf.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md", "docs/experiments.md"]


def shown_commands(path: Path) -> list[tuple[int, str]]:
    """(line number, arguments) of each `attnclf ...` line inside the file's code blocks, continuations joined."""
    found, in_code, pending = [], False, None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if pending is not None:  # a continuation line of the command before
            start, text = pending
            pending = (start, text + " " + line.strip())
        else:
            command = re.match(r"\s*(?:\.venv/bin/)?attnclf (.*)", line) if in_code else None
            if not command:
                continue
            pending = (number, command[1])
        start, text = pending
        if text.rstrip().endswith("\\"):
            pending = (start, text.rstrip()[:-1])
            continue
        found.append((start, text))
        pending = None
    return found


def arguments(text: str) -> list[str]:
    """The command's own arguments: no comment, pipe or redirection; a synopsis' [optional] parts taken as given."""
    text = re.split(r"\s(?:#|\||>|&&)\s", " " + text + " ")[0]
    return [arg for arg in shlex.split(text.replace("[", " ").replace("]", " ")) if arg not in ("...", "|")]


COMMANDS = [(f"{name}:{number}", text) for name in DOCUMENTS for number, text in shown_commands(ROOT / name)]


def test_the_documents_show_commands():
    assert len([c for c in COMMANDS if c[0].startswith("README.md")]) >= 15  # the extraction still finds them


@pytest.mark.parametrize("where, text", COMMANDS, ids=[where for where, _ in COMMANDS])
def test_a_documented_command_parses(where, text, capsys):
    try:
        build_parser().parse_args(arguments(text))
    except SystemExit:
        pytest.fail(f"{where}: `attnclf {text}` does not parse: {capsys.readouterr().err.strip().splitlines()[-1]}")
