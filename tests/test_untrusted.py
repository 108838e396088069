"""What attnclf reads from others: a run directory, an ensemble folder or an ONNX export someone sent, edited by
hand or made to harm. Each bad file is one line naming it and what is wrong, read no further than the check needs,
and nothing outside the folder is read because a file inside it said so."""

import json
import shutil

import pytest

from attnclf.cli import main
from attnclf.errors import AttnclfError


def run_error(argv, capsys) -> str:
    """Run the CLI expecting a user error: exit 2 and one line on stderr."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnclf: error: ") and "\n" not in err, err
    return err


def copied(run, to):
    """The run's files (not its checkpoint or plots) copied into ``to``."""
    to.mkdir()
    for path in run.iterdir():
        if path.is_file():
            shutil.copy(path, to / path.name)
    return to


def edited_config(run, to, edit):
    """A copy of ``run`` whose config.json ``edit`` (config -> None) changed."""
    copy = copied(run, to)
    config = json.loads((copy / "config.json").read_text())
    edit(config)
    (copy / "config.json").write_text(json.dumps(config))
    return copy


@pytest.mark.parametrize("name, content, message", [
    ("config.json", "[" * 100_000 + "]" * 100_000, "config.json: JSON nested too deep to read"),
    ("labels.json", '["neg", 1' + "0" * 5000 + "]", "labels.json: a number too long to read"),
])
def test_json_too_deep_or_with_a_huge_number_is_one_line(demo_run, tmp_path, capsys, name, content, message):
    # Python's decoder raises RecursionError and ValueError for these, valid JSON both: they were tracebacks.
    copy = copied(demo_run, tmp_path / "run")
    (copy / name).write_text(content)
    assert message in run_error(["predict", str(copy), "a fine film"], capsys)


def test_a_history_line_too_deep_to_read_is_named_by_its_line(demo_run, tmp_path, capsys):
    copy = copied(demo_run, tmp_path / "run")
    (copy / "history.jsonl").write_text('{"epoch": 1}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    assert "history.jsonl, line 2: JSON nested too deep to read" in run_error(["report", str(copy)], capsys)
