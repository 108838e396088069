"""The documentation stays true of the code: the commands it shows parse as the CLI stands, its Python examples
run, its run directory lists what a run writes, and its figures are BENCHMARKS.md's. A renamed or removed flag, a
moved function or a new file breaks these tests, not a newcomer's first try."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from attnclf.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
# (BENCHMARKS.md's code blocks too: a reviewer reruns a figure from the command beside it)
DOCUMENTS = ["README.md", "docs/experiments.md", "docs/attention-on-real-data.md", "docs/lab.md", "BENCHMARKS.md"]


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
    tutorial = [text for where, text in COMMANDS if where.startswith("docs/attention-on-real-data.md")]
    assert len(tutorial) >= 15 and tutorial[0] == "demo --quiet"
    lab = [text for where, text in COMMANDS if where.startswith("docs/lab.md")]
    assert len(lab) >= 8 and lab[0] == "demo"
    assert len([where for where, _ in COMMANDS if where.startswith("BENCHMARKS.md")]) >= 10


@pytest.mark.parametrize("where, text", COMMANDS, ids=[where for where, _ in COMMANDS])
def test_a_documented_command_parses(where, text, capsys):
    try:
        build_parser().parse_args(arguments(text))
    except SystemExit:
        pytest.fail(f"{where}: `attnclf {text}` does not parse: {capsys.readouterr().err.strip().splitlines()[-1]}")


def test_a_documented_command_names_a_dataset_attnclf_has():
    """``--dataset`` takes any string, so a command naming a renamed or removed dataset (``sst2-phrases`` was one)
    parses, and fails only for its reader; the guides' commands and every ``--help`` example name one that exists
    (BENCHMARKS.md records the runs of its day, removed datasets too)."""
    from attnclf.cli import EXAMPLES, TOY_ORDER
    from attnclf.data.registry import sources

    shown = [(where, text) for where, text in COMMANDS if not where.startswith("BENCHMARKS.md")]
    shown += [(f"attnclf {name} --help", example.split(" ", 1)[1]) for name, examples in EXAMPLES.items()
              for example in examples]
    known, parser, wrong = {*sources(), TOY_ORDER}, build_parser(), []
    for where, text in shown:
        named = getattr(parser.parse_args(arguments(text)), "dataset", None) or []  # (vectors': a list)
        for name in [named] if isinstance(named, str) else named:
            if name not in known and not name.isupper():  # (NAME, D: a synopsis' placeholder)
                wrong.append(f"{where}: `attnclf {text}`: no dataset {name}")
    assert len(shown) >= 100 and not wrong, "\n".join(wrong)


def bench_commands(path: Path) -> list[tuple[int, str, str]]:
    """(line number, script, arguments) of each ``python bench/X.py ...`` the file shows: an inline one to its closing
    backtick (a table cell's, or one wrapped over lines), one in a code block to its line's end (continuations
    joined)."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in re.finditer(r"python (bench/\w+\.py)", text):
        rest = text[match.end():]
        inline = match.start() > 0 and text[match.start() - 1] == "`"
        rest = rest[:rest.index("`")] if inline else re.split(r"(?<!\\)\n", rest)[0].replace("\\\n", " ")
        found.append((text.count("\n", 0, match.start()) + 1, match[1], rest))
    return found


def script_flags(script: Path) -> set[str]:
    """The options a bench script's parser takes: the ``add_argument``s of its own source and of the bench modules it
    imports (common.py's helpers; train_bench.py, which imdb.py runs)."""
    read, waiting, source = set(), [script], ""
    while waiting:
        module = waiting.pop()
        read.add(module)
        source += (text := module.read_text(encoding="utf-8"))
        waiting += {found for name in re.findall(r"^\s*(?:from|import) (\w+)", text, flags=re.M)
                    if (found := ROOT / "bench" / f"{name}.py").is_file() and found not in read}
    options = re.findall(r"add_argument\(\s*\"(--[\w-]+)\"(?:,\s*\"(--[\w-]+)\")?", source)
    return {flag for pair in options for flag in pair if flag} | {"--help"}


COMMAND_NAMES = set(next(action for action in build_parser()._actions if action.dest == "command").choices)
BENCH_DOCUMENTS = ["README.md", "docs/experiments.md", "docs/attention-on-real-data.md", "docs/lab.md",
                   "bench/README.md", "BENCHMARKS.md"]


def test_a_documented_bench_command_names_its_scripts_options(capsys):
    """Each ``python bench/X.py`` line names a script that exists and only options its parser takes, and what it
    passes on after ``--`` parses as ``attnclf train`` flags: a renamed option leaves a reviewer's rerun of a figure an
    argparse error."""
    shown = [(f"{name}:{number}", script, rest) for name in BENCH_DOCUMENTS
             for number, script, rest in bench_commands(ROOT / name)]
    assert len([where for where, _, _ in shown if where.startswith("bench/README.md")]) >= 40  # still found
    wrong = []
    for where, script, rest in shown:
        if not (ROOT / script).is_file():
            wrong.append(f"{where}: no {script}")
            continue
        own = re.split(r"\s(?:#|\||>|&&|;)\s", " " + rest + " ")[0]  # (not a comment's or a pipe's arguments)
        own, _, passed_on = own.partition(" -- ")
        unknown = sorted({flag for flag in re.findall(r"(?<![\w-])--[a-z][\w-]*", own)
                          if flag not in script_flags(ROOT / script)})
        if unknown:
            wrong.append(f"{where}: python {script} has no {', '.join(unknown)}")
        passed_on = arguments(passed_on)
        if passed_on and not re.fullmatch(r"[A-Z_]+", passed_on[0]):  # (not a placeholder, wall_profile's ATTNCLF_ARGS)
            try:  # (wall_profile.py runs any command; the recipe scripts, train)
                build_parser().parse_args(passed_on if passed_on[0] in COMMAND_NAMES else ["train", *passed_on])
            except SystemExit:
                wrong.append(f"{where}: after --, {capsys.readouterr().err.strip().splitlines()[-1]}")
    assert not wrong, "\n".join(wrong)


def command_options() -> dict[str, set[str]]:
    """Each attnclf command's options, by the command's name."""
    commands = next(action for action in build_parser()._actions if action.dest == "command").choices
    return {name: {option for action in parser._actions for option in action.option_strings}
            for name, parser in commands.items()}


# Options of other tools the documents show: torchrun's, around `-m attnclf train`
OTHER_TOOLS_OPTIONS = {"--standalone", "--nproc-per-node", "--nnodes", "--node-rank", "--rdzv-backend",
                       "--rdzv-endpoint", "--rdzv-id"}


def test_an_option_named_in_prose_is_one_its_command_takes():
    """An option the prose names exists: in the command a span names it with (`evaluate --threshold CLASS=P`), else
    in some attnclf command or bench script, so that a flag renamed or removed does not live on in a sentence."""
    options = command_options()
    anywhere = set().union(*options.values(), OTHER_TOOLS_OPTIONS, {"--help", "--version"},
                           *(script_flags(script) for script in (ROOT / "bench").glob("*.py")))
    wrong, spans = [], 0
    for name in DOCUMENTS[:-1] + ["bench/README.md"]:  # (BENCHMARKS.md records flags of experiments' branches too)
        text = (ROOT / name).read_text(encoding="utf-8")
        for option in sorted(set(re.findall(r"(?<![\w-])--[a-z][\w-]*", text)) - anywhere):
            wrong.append(f"{name}: {option} is no option of attnclf's or a bench script's")
        prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # (a fence's backticks would pair with a span's)
        for span in re.findall(r"`([^`]+)`", prose):
            named = re.match(rf"(?:\S*attnclf )?({'|'.join(options)}) (.*)", span, flags=re.S)
            spans += bool(named and "--" in named[2])
            for option in re.findall(r"(?<![\w-])--[a-z][\w-]*", named[2]) if named else ():
                if option not in options[named[1]]:
                    wrong.append(f"{name}: `{span}`: {named[1]} has no {option}")
    assert spans >= 50 and not wrong, "\n".join(wrong) or f"only {spans} spans of a command and its options found"


def test_serve_help_gives_the_service_limits_defaults():
    """``serve --help``'s "(default: N)" of each limit is ``ServeLimits``' default, which applies when the flag is not
    given (the flag's own default is None): the two are written apart, so a changed limit could leave the help
    stale."""
    from dataclasses import fields

    from attnclf.serve import ServeLimits

    serve = next(action for action in build_parser()._actions if action.dest == "command").choices["serve"]
    helps = {action.dest: action.help for action in serve._actions}
    stale = [f"--{field.name.replace('_', '-')}: {shown}, ServeLimits: {field.default}"
             for field in fields(ServeLimits)
             if (shown := re.search(r"\(default: (\d+)", helps[field.name])[1]) != str(field.default)]
    assert len(fields(ServeLimits)) >= 8 and not stale, stale


def code_blocks(path: Path, language: str) -> list[tuple[int, str]]:
    """(line number of its first line, text) of each fenced block of ``language`` in the file."""
    blocks, current, start, wanted = [], None, 0, False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith("```"):
            if current is None:
                current, start, wanted = [], number + 1, line[3:].strip() == language
            else:
                if wanted:
                    blocks.append((start, "\n".join(current)))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_readme_lines_fit_in_120_characters():
    long = [number for number, line in enumerate((ROOT / "README.md").read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > 120]
    assert not long, f"README.md lines over 120 characters: {long}"


def test_the_readme_python_examples_run(demo_run, tmp_path, monkeypatch, capsys):
    """Each Python block of the README, as pasted, beside a trained runs/demo (exported, as its comment says)."""
    from attnclf.training.device import torch_threads

    shutil.copytree(demo_run, tmp_path / "runs" / "demo")
    monkeypatch.chdir(tmp_path)
    assert main(["export", "runs/demo", "--format", "onnx", "--check-examples", "50", "--threads", "1"]) == 0
    blocks = code_blocks(ROOT / "README.md", "python")
    assert len(blocks) >= 2 and "Classifier.load" in blocks[0][1]  # the extraction still finds them
    capsys.readouterr()
    for line, block in blocks:
        # What a block leaves to the reader: `texts` and `labels` to fit on.
        namespace = {"texts": ["a good film", "a great film", "a dull film", "a bad film"] * 5,
                     "labels": ["pos", "pos", "neg", "neg"] * 5}
        with torch_threads(1):
            try:  # (padded, so that a traceback names the README's own line)
                exec(compile("\n" * (line - 1) + block, str(ROOT / "README.md"), "exec"), namespace)
            except Exception as exc:
                pytest.fail(f"README.md:{line}: the Python example fails: {type(exc).__name__}: {exc}")
        if "est" in namespace:
            assert list(namespace["est"].classes_) == ["neg", "pos"]
    assert capsys.readouterr().out.strip() in ("negative", "positive")  # the first block's print


def test_the_run_directory_listing_names_every_file_a_run_writes(demo_run):
    """A new file in a run directory is documented in the README's listing; a file listed as always written is."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listing = readme[readme.index("## The run directory"):].split("```")[1]
    documented = set(re.findall(r"^  ([\w.-]+/?)", listing, flags=re.M))
    written = {path.name + ("/" if path.is_dir() else "") for path in demo_run.iterdir()}
    assert written <= documented, f"not in the README's run directory: {sorted(written - documented)}"
    always = {"config.json", "model.safetensors", "tokenizer.json", "labels.json", "history.jsonl", "metrics.json"}
    assert always <= documented and always <= written


def test_the_readme_quotes_benchmark_figures_that_benchmarks_holds():
    """A figure given to the hundredth of a percent (91.62%) is one BENCHMARKS.md records, not a stale or mistyped
    one."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    benchmarks = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    figures = set(re.findall(r"\b\d+\.\d\d%", readme))
    assert len(figures) >= 5  # the pattern still finds them
    assert not {figure for figure in figures if figure not in benchmarks}


def test_the_package_offers_its_exports_to_dir_and_help():
    """A notebook's tab completion reads ``dir(attnclf)``, and ``help(attnclf)`` is where a newcomer starts: the lazy
    exports must be listed by the one and introduced, with where to begin, by the other."""
    import pydoc

    import attnclf

    assert set(attnclf.__all__) <= set(dir(attnclf))
    page = pydoc.render_doc(attnclf, renderer=pydoc.plaintext)
    for name in ("Classifier.load", "AttentionTextClassifier", "Ensemble", "evaluate", "OnnxClassifier"):
        assert name in page, name


def test_every_dotted_name_the_documents_give_resolves_after_a_bare_import():
    """README's ``attnclf.errors.AttnclfWarning`` (for ``warnings.filterwarnings``), ``attnclf.training.run_data.
    scoring_data`` and the like were an AttributeError after ``import attnclf`` alone, unless something had imported
    their module already; each is looked up in a fresh interpreter, the way a notebook's first cell would."""
    import subprocess
    import sys

    text = "\n".join(path.read_text(encoding="utf-8") for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    names = sorted(set(re.findall(r"(?<![\w./-])attnclf(?:\.\w+)+", text)))
    assert "attnclf.errors.AttnclfWarning" in names and "attnclf.training.run_data.scoring_data" in names
    code = ("import sys, attnclf\n"
            "for name in sys.argv[1:]:\n"
            "    value = attnclf\n"
            "    for part in name.split('.')[1:]:\n"
            "        value = getattr(value, part)\n"
            "for package, name in ((attnclf, 'nope'), (attnclf, 'nope.x'), (attnclf.training, 'run_data.x')):\n"
            "    print(getattr(package, name, 'no such attribute'))\n")
    done = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # A name no module has is Python's AttributeError still, a dotted one too (not the ModuleNotFoundError of looking
    # for a module of that name, which getattr's default and hasattr let through)
    assert done.stdout.split() == ["no", "such", "attribute"] * 3


def test_the_main_objects_public_methods_show_an_example():
    """What ``help(Classifier)`` and the rest show a notebook user: each method of attnclf's own, with an example."""
    import inspect

    from attnclf import Classifier, Ensemble
    from attnclf.export.runtime import OnnxClassifier
    from attnclf.sklearn import AttentionTextClassifier

    bare = [f"{kind.__name__}.{name}" for kind in (Classifier, Ensemble, OnnxClassifier, AttentionTextClassifier)
            for name, method in vars(kind).items()
            if not name.startswith("_") and callable(getattr(kind, name))
            and getattr(getattr(kind, name), "__module__", "").startswith("attnclf")  # (not scikit-learn's set_*)
            and ">>>" not in (inspect.getdoc(getattr(kind, name)) or "")]
    assert not bare, f"public methods without an example: {bare}"
