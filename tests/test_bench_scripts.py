"""bench/ as a reviewer meets it: every script answers --help, bench/README.md lists it, and every command that
BENCHMARKS.md, the READMEs, docs/ and the scripts' own docstrings quote parses with the script's flags as they stand
(and its `attnclf` flags after --, with attnclf's). A renamed flag fails here, not in the hands of someone rerunning a
published figure. Nothing is measured: each script is stopped as soon as it has parsed its arguments."""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from attnclf.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
# A script is a file with a __main__ block; common.py and train_bench.py are code the scripts share.
SCRIPTS = sorted(path.stem for path in BENCH.glob("*.py") if 'if __name__ == "__main__":' in path.read_text("utf-8"))
QUOTING = ["BENCHMARKS.md", "bench/README.md", "README.md", *sorted(str(path.relative_to(ROOT))
                                                                     for path in (ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"python bench/(\w+)\.py\b(.*)")


def quoted_commands(text: str) -> list[tuple[int, str, str]]:
    """(line number, script, its arguments) of each `python bench/X.py ...` in ``text``: in fenced or indented code
    (continuation lines joined) and in inline code spans, which may run over a line break."""
    found, prose, fenced, pending = [], [], False, None
    for number, line in enumerate(text.splitlines(), start=1):
        is_code = fenced or pending or line.startswith("    ") and line.strip().startswith("python bench/")
        if line.startswith("```"):
            fenced, is_code = not fenced, True
        prose.append("" if is_code else line)
        if not is_code or line.startswith("```"):
            continue
        start, joined = pending or (number, "")
        joined += " " + line.strip()
        if joined.endswith("\\"):
            pending = (start, joined[:-1])
            continue
        pending = None
        command = COMMAND.search(joined)
        if command:
            found.append((start, command[1], command[2]))
    prose_text = "\n".join(prose)
    for span in re.finditer(r"`([^`]+)`", prose_text):
        command = COMMAND.search(" ".join(span[1].replace("\\\n", " ").split()))
        if command:
            found.append((prose_text.count("\n", 0, span.start()) + 1, command[1], command[2]))
    return found


def docstring(script: str) -> str:
    return ast.get_docstring(ast.parse((BENCH / f"{script}.py").read_text("utf-8"))) or ""


QUOTED = [(f"{name}:{line}", script, rest) for name in QUOTING
          for line, script, rest in quoted_commands((ROOT / name).read_text("utf-8"))]
QUOTED += [(f"bench/{name}.py docstring:{line}", script, rest) for name in SCRIPTS
           for line, script, rest in quoted_commands(docstring(name))]


def arguments(text: str) -> list[str]:
    """The command's own arguments: no comment, pipe or redirection; a synopsis' [optional] parts taken as given."""
    text = re.split(r"\s(?:#|\||>|&&)\s", " " + text + " ")[0]
    return [arg for arg in shlex.split(text.replace("[", " ").replace("]", " ")) if arg != "|"]


def is_placeholder(arg: str) -> bool:
    return re.fullmatch(r"[A-Z][A-Z0-9_]*(\.\.\.)?|\.\.\.", arg) is not None


def with_placeholders_filled(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """A synopsis' placeholder after an option (``--split S``, ``--n N``, ``--setups ...``) replaced by a value the
    option accepts, so that the option's name is what is checked; any other ``...`` dropped."""
    filled = []
    for arg in argv:
        action = parser._option_string_actions.get(filled[-1]) if filled else None
        if action and action.nargs != 0 and is_placeholder(arg):
            arg = str(next(iter(action.choices))) if action.choices else "1"
        elif arg == "...":
            continue
        filled.append(arg)
    return filled


class Parsed(Exception):
    """Raised where a script would parse its command line: the parser, to parse the quoted arguments with."""


def script_parser(script: str, monkeypatch) -> argparse.ArgumentParser:
    """The parser ``python bench/SCRIPT.py`` builds, caught at its parse_args (so nothing after it runs)."""
    def caught(self, args=None, namespace=None):
        if args is None:  # (the script's own command line; attnclf's parser is given a list)
            raise Parsed(self)
        return parse_args(self, args, namespace)

    parse_args = argparse.ArgumentParser.parse_args
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", caught)
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(sys, "argv", [f"bench/{script}.py"])
    try:
        runpy.run_path(str(BENCH / f"{script}.py"), run_name="__main__")
    except Parsed as parsed:
        monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
        return parsed.args[0]
    pytest.fail(f"bench/{script}.py parsed no command line")


def test_the_extraction_finds_the_quoted_commands():
    where = {place.split(":")[0] for place, _, _ in QUOTED}
    assert {"BENCHMARKS.md", "bench/README.md", "README.md", "bench/sst2.py docstring"} <= where
    assert len([place for place in QUOTED if place[0].startswith("BENCHMARKS.md")]) >= 100
    joined = [rest for place, script, rest in QUOTED if script == "wall_profile" and place.startswith("BENCHMARKS")]
    assert any(rest.endswith("--output /tmp/wallprof/sst2 --overwrite") for rest in joined)  # a continuation line


@pytest.mark.parametrize("where, script, rest", QUOTED, ids=[f"{where} {script}" for where, script, _ in QUOTED])
def test_a_quoted_bench_command_parses(where, script, rest, monkeypatch, capsys):
    assert script in SCRIPTS, f"{where}: bench/{script}.py is no script of bench/"
    parser = script_parser(script, monkeypatch)
    argv = with_placeholders_filled(parser, arguments(rest))
    try:
        args = parser.parse_args(argv)
        # What the script hands to `attnclf train` (flags after --) or runs as a whole attnclf command.
        if getattr(args, "flags", None):
            build_parser().parse_args(["train", "--dataset", "demo", "--output", "runs/x", *args.flags])
        command = getattr(args, "command", None) or []
        command = command[1:] if command[:1] == ["--"] else command  # (as wall_profile.py takes it)
        if command and not all(map(is_placeholder, command)):  # (not a synopsis' `-- ATTNCLF_ARGS`)
            build_parser().parse_args(command)
    except SystemExit:
        error = capsys.readouterr().err.strip().splitlines()[-1]
        pytest.fail(f"{where}: `python bench/{script}.py{rest}` does not parse: {error}")


def test_the_bench_readme_lists_every_script():
    readme = (BENCH / "README.md").read_text("utf-8")
    assert not [script for script in SCRIPTS if f"`python bench/{script}.py" not in readme]


def test_a_script_offering_out_writes_its_result():
    """bench/common.py's parser gives a script --out ("result JSON"): a script that takes it and writes nothing
    leaves a reviewer's --out empty."""
    sources = {script: (BENCH / f"{script}.py").read_text("utf-8") for script in SCRIPTS}
    offering = [script for script, source in sources.items()
                if re.search(r"^from common import .*\bparser\b", source, flags=re.M)]
    assert len(offering) >= 30  # (the pattern still finds them)
    assert not [script for script in offering if "write_result(" not in sources[script]]


HELP_EACH = r"""
import ast, contextlib, io, json, runpy, sys
sys.path.insert(0, "bench")  # (as `python bench/X.py` puts its folder first)
answers = {}
for script in sys.argv[1:]:
    print(script, file=sys.stderr, flush=True)  # (the last one named is the one that hung)
    out = io.StringIO()
    sys.argv = [script, "--help"]
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(script, run_name="__main__")
        answers[script] = "ran without printing help"
    except SystemExit as exit:
        shown = out.getvalue()
        # A description taken as the docstring's first line stops mid-sentence where the first paragraph runs on.
        described = " ".join(shown.split("\n\n")[1].split()) if shown.count("\n\n") > 1 else ""
        opening = " ".join((ast.get_docstring(ast.parse(open(script).read())) or "").split("\n\n")[0].split())
        cut = described != opening and opening.startswith(described)
        answers[script] = (f"help cut short: ...{described[-60:]!r}" if cut else "ok") \
            if exit.code in (0, None) and shown.startswith("usage:") else f"exit {exit.code!r}: {shown[:200]!r}"
    except BaseException as error:
        answers[script] = f"{type(error).__name__}: {error}"
print(json.dumps(answers))
"""


def test_every_bench_script_answers_help():
    """``python bench/X.py --help`` prints its usage and a description that ends a sentence, and exits 0: one child
    process goes through all the scripts, so that none of them changes this one."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    child = subprocess.run([sys.executable, "-c", HELP_EACH, *(f"bench/{script}.py" for script in SCRIPTS)],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert child.returncode == 0, child.stderr[-2000:]
    answers = json.loads(child.stdout.strip().splitlines()[-1])
    assert len(answers) == len(SCRIPTS) >= 40
    assert not {script: answer for script, answer in answers.items() if answer != "ok"}


DOCTEST_EACH = r"""
import doctest, importlib, json, sys
sys.path.insert(0, "bench")  # (as `python bench/X.py` puts its folder first)
results = {}
for name in sys.argv[1:]:
    failed, attempted = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    results[name] = [failed, attempted]
print(json.dumps(results))
"""


def test_the_bench_docstrings_examples_hold():
    """pytest collects doctests from src/ only (bench/ is no package, and its scripts would be imported under names
    that clash), so the examples in bench/'s docstrings run here, in a child process with bench/ on its path."""
    modules = sorted(path.stem for path in BENCH.glob("*.py") if ">>> " in path.read_text("utf-8"))
    assert len(modules) >= 5 and "common" in modules  # (the pattern still finds them)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    child = subprocess.run([sys.executable, "-c", DOCTEST_EACH, *modules], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=240)
    assert child.returncode == 0, child.stderr[-2000:]
    results = json.loads(child.stdout.strip().splitlines()[-1])
    assert {name: failed for name, (failed, _) in results.items() if failed} == {}, child.stdout[-3000:]
    assert all(attempted for _, attempted in results.values())
