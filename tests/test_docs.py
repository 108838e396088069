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
    """(line number, arguments) of each attnclf command in the file's shell code blocks: `attnclf ...`,
    `.venv/bin/attnclf ...` after other commands, or `-m attnclf ...` under torchrun; continuation lines joined."""
    found, language, logical = [], None, None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith("```"):
            language = line[3:].strip() or "text" if language is None else None
            continue
        if language in (None, "python"):
            continue
        start, text = logical if logical else (number, "")
        text += " " + line.strip()
        if text.endswith("\\"):
            logical = (start, text[:-1])
            continue
        logical = None
        command = re.search(r"-m attnclf (.*)", text) or re.search(r"(?:^|[\s;&|(])(?:\S*/)?attnclf (.*)", text)
        if command:
            found.append((start, command[1]))
    return found


def arguments(text: str) -> list[str]:
    """The command's own arguments: no comment, pipe or redirection; a synopsis' [optional] parts taken as given."""
    text = re.split(r"\s(?:#|\||>|&&)\s", " " + text + " ")[0]
    return [arg for arg in shlex.split(text.replace("[", " ").replace("]", " ")) if arg not in ("...", "|")]


COMMANDS = [(f"{name}:{number}", text) for name in DOCUMENTS for number, text in shown_commands(ROOT / name)]


def test_the_documents_show_commands():
    readme = [text for where, text in COMMANDS if where.startswith("README.md")]
    assert len(readme) >= 20 and arguments(readme[0]) == ["demo"]  # the extraction still finds them, the first too
    assert any(text.startswith("train --dataset imdb --output /shared/runs/imdb-ddp") for text in readme)  # torchrun


@pytest.mark.parametrize("where, text", COMMANDS, ids=[where for where, _ in COMMANDS])
def test_a_documented_command_parses(where, text, capsys):
    try:
        build_parser().parse_args(arguments(text))
    except SystemExit:
        pytest.fail(f"{where}: `attnclf {text}` does not parse: {capsys.readouterr().err.strip().splitlines()[-1]}")
