"""The HTML report: what train writes, what `attnclf report` writes, and how it renders in Chromium."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from attnclf.cli import main
from attnclf.report import plots

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def measured_run(demo_run, tmp_path_factory) -> Path:
    """A copy of the demo run with a report that includes the faithfulness section."""
    run = tmp_path_factory.mktemp("report") / "run"
    shutil.copytree(demo_run, run)
    assert main(["report", str(run), "--faithfulness", "--examples", "12", "--method", "integrated-gradients"]) == 0
    return run


def images(page: str) -> list[bytes]:
    return [base64.b64decode(data) for data in re.findall(r'<img src="data:image/png;base64,([^"]+)"', page)]


def test_train_writes_the_report(demo_run):
    page = (demo_run / "report.html").read_text(encoding="utf-8")
    assert "branches:" not in page  # one branch: its token map is the whole story
    embedded = images(page)
    written = sorted(p.name for p in (demo_run / "plots").glob("*.png"))
    assert written == ["confusion_matrix.png", "metric_history.png", "precision_recall.png", "reliability.png", "roc.png",
                       "self_attention.png", "training.png"]
    assert len(embedded) == page.count("<img ") == len(written)  # every image embedded, none linked
    assert all(png.startswith(PNG) for png in embedded)
    assert sorted(embedded) == sorted((demo_run / "plots" / name).read_bytes() for name in written)
    metrics = json.loads((demo_run / "metrics.json").read_text())
    assert f"Log loss {metrics['log_loss']:.4f}; expected calibration error {metrics['ece']:.4f}" in page
    assert f"<tr><td>average precision</td><td>{metrics['average_precision']:.4f}</td></tr>" in page
    low, high = metrics["accuracy_ci95"]
    assert (f"<tr><td>test accuracy</td><td>{metrics['accuracy']:.4f} (95% confidence interval {low:.4f}-{high:.4f})"
            f"</td></tr>") in page
    for row, key in (("macro-F1", "macro_f1"), ("ROC AUC", "roc_auc")):
        low, high = metrics[f"{key}_ci95"]
        assert (f"<tr><td>{row}</td><td>{metrics[key]:.4f} (95% confidence interval {low:.4f}-{high:.4f})</td></tr>"
                in page)
    for heading in ("Training", "Test set (1000 texts)", "ROC curve",
                    "Precision-recall curve", "Calibration",
                    "Examples, explained by occlusion", "Most confident correct predictions",
                    "Most confident incorrect predictions", "Self-attention per layer and head"):
        assert heading in page
    # The measured effect colours the examples; the pooling weights come beside each, labelled as what they are.
    assert "drop in the class probability when the token is removed; the scores explain the predicted class." in page
    examples = page[page.index("<h2>Examples, explained by"):page.index("<h2>Self-attention")]
    shown = examples.count("<p>true <b>")
    assert shown > 0 and examples.count('<div class="tokens">') == 2 * shown
    assert examples.count("attention beside it: where the pooling layer looked (its weight per token), not "
                          "necessarily why the model decided; the same for every class") == shown
    assert "Not measured for these weights" in page  # faithfulness is on request only
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing outside the file


def test_examples_of_a_two_branch_model_say_what_each_branch_contributed(tmp_path):
    run = tmp_path / "run"
    assert main(["train", "--dataset", "demo", "--epochs", "1", "--max-train-examples", "300", "--set",
                 "nb_ngram_buckets=4096", "--set", "d_model=16", "--set", "layers=1", "--threads", "1", "--quiet",
                 "--output", str(run)]) == 0
    page = (run / "report.html").read_text(encoding="utf-8")
    examples = page[page.index("<h2>Examples, explained by"):]
    assert re.search(r"\(\d\.\d{3}\); branches: attention branch [+-]\d+\.\d\d, n-gram branch [+-]\d+\.\d\d "
                     r"\(how far each pushed (positive|negative)\)</p>", examples)


def test_the_report_says_which_epoch_the_scored_weights_are_of(demo_run, tmp_path):
    # The curves run to the last epoch, the test scores are of the best validated one: a reader must see which.
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert len(history) == 2 and json.loads((run / "config.json").read_text())["settings"]["train"]["monitor"] == \
        "macro_f1"
    history[0]["val_macro_f1"], history[1]["val_macro_f1"] = 0.875, 0.75  # as if epoch 2 had validated worse
    (run / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "<tr><td>weights kept</td><td>epoch 1 of 2: the best validation macro-F1 (0.8750)</td></tr>" in page
    # Tied by a later epoch, the first is kept: on synthetic every model kept epoch 1 of 6, its confidence near 0.5,
    # and a reader comparing calibration errors compared first epochs, unaware.
    history[1]["val_macro_f1"] = 0.875
    (run / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    assert main(["report", str(run)]) == 0
    assert ("<td>epoch 1 of 2: the best validation macro-F1 (0.8750), which 1 later epoch tied (the first is kept)"
            "</td>") in (run / "report.html").read_text(encoding="utf-8")
    figure = plots.training_curves(history, kept=1)
    for ax in figure.axes:
        assert "kept (epoch 1)" in [text.get_text() for text in ax.get_legend().get_texts()]
        assert [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"] == [1]


def test_no_report_flag(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--dataset", "toy-reversal", "--model", "boe", "--epochs", "1", "--output", str(out),
                 "--quiet", "--no-report"]) == 0
    # (The command's own lines say which epoch the test scores are of, as the report does.)
    assert "weights kept: epoch 1 of 1: the best validation loss (" in capsys.readouterr().out
    assert (out / "metrics.json").is_file() and not (out / "report.html").exists()
    assert not (out / "plots").exists()


def test_a_toy_sets_report_says_its_scores_are_on_its_training_texts(tmp_path):
    # A toy set tests on its training set by design: "test accuracy" alone would read as held-out texts.
    out = tmp_path / "run"
    assert main(["train", "--dataset", "toy-reversal", "--model", "boe", "--epochs", "1", "--output", str(out),
                 "--quiet", "--threads", "1"]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<h2>Test set: the training texts (a toy set tests on them) (" in page
    assert "test accuracy (on the training texts: a toy set tests on them)" in page


def test_a_run_without_test_data_reports_its_validation_set_as_such(tmp_path):
    data = tmp_path / "train.csv"
    data.write_text("text,label\n" + "".join(f"good film {i},pos\nbad film {i},neg\n" for i in range(40)))
    out = tmp_path / "run"
    assert main(["train", "--train-file", str(data), "--model", "boe", "--epochs", "1", "--min-frequency", "1",
                 "--output", str(out), "--quiet"]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<h2>Validation set (8 texts)</h2>" in page and "Test set" not in page


def test_the_report_repeats_what_training_warned_about_the_data_and_a_resume_keeps_it(tmp_path):
    # The test score in the report's table is flattered when test texts were trained on: training warned on stderr,
    # and the page shown to others must say so too (a report written after a resume as well).
    from attnclf.errors import RunDirError
    from attnclf.report.html import _overview

    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    train.write_text("text,label\n" + "".join(f"good film {i},pos\nbad film {i},neg\n" for i in range(40)))
    test.write_text("text,label\n" + "".join(f"good film {i},pos\nbad show {i},neg\n" for i in range(10)))
    out = tmp_path / "run"
    command = ["train", "--train-file", str(train), "--test-file", str(test), "--model", "boe", "--epochs", "1",
               "--min-frequency", "1", "--output", str(out), "--quiet", "--no-report", "--threads", "1"]
    assert main(command) == 0
    assert main([*command, "--resume", "--epochs", "2"]) == 0
    config, metrics = (json.loads((out / name).read_text()) for name in ("config.json", "metrics.json"))
    warned = ("10 of the 20 test texts also occur among the training or validation texts: the test score will "
              "flatter the model")
    assert config["data"]["warnings"] == [warned]
    assert f"<li>{warned}</li>" in _overview(out, config, metrics, None)
    del config["data"]["warnings"]  # a run that was warned of nothing (or trained before they were recorded)
    assert "warned" not in _overview(out, config, metrics, None)
    for edited in ([1], "a line"):  # not a list of lines: one line naming the field, not an AttributeError
        config["data"]["warnings"] = edited
        with pytest.raises(RunDirError, match=r"config\.json: data\.warnings is not a list of lines \(was the file "
                                              r"edited\?\)$"):
            _overview(out, config, metrics, None)


@pytest.mark.parametrize("cache", [[], ["--token-cache"]], ids=["in-memory", "token-cache"])
def test_a_report_refuses_a_test_file_changed_since_the_run_was_scored(tmp_path, capsys, cache):
    # Its per-class table and confusion matrix come from metrics.json, its curves and examples from the file read now.
    # (A token-cache run records no test_sha256, but the test_key of its test file's content.)
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    train.write_text("text,label\n" + "".join(f"good film {i},pos\nbad film {i},neg\n" for i in range(40)))
    test.write_text("text,label\n" + "".join(f"good show {i},pos\nbad show {i},neg\n" for i in range(10)))
    out = tmp_path / "run"
    assert main(["train", "--train-file", str(train), "--test-file", str(test), "--model", "boe", "--epochs", "1",
                 "--min-frequency", "1", "--output", str(out), "--quiet", "--no-report", *cache,
                 *(["--token-cache-dir", str(tmp_path / "cache")] if cache else [])]) == 0
    test.write_bytes(test.read_bytes())  # written again, the same bytes
    assert main(["report", str(out)]) == 0  # the same texts: reported
    assert "<h2>Test set (20 texts)</h2>" in (out / "report.html").read_text(encoding="utf-8")
    report = (out / "report.html").read_bytes()
    test.write_text("text,label\n" + "".join(f"good show {i},pos\nbad show {i},neg\n" for i in range(7)))
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith(f"attnclf: error: {out}: test.csv no longer gives the test texts metrics.json scored")
    assert (out / "report.html").read_bytes() == report  # the earlier report stands


def test_report_with_faithfulness(measured_run):
    page = (measured_run / "report.html").read_text(encoding="utf-8")
    assert "Examples, explained by integrated-gradients" in page and "attention beside it: " in page
    assert "Deletion test on 12 texts of demo" in page and "random (10 draws)" in page
    assert re.search(r"Beat random deletion: [^.]*\. Did not: [^.]*\.", page)
    assert "Uniform-attention check" in page and "rank correlation" in page
    assert (measured_run / "plots" / "deletion.png").read_bytes().startswith(PNG)
    assert json.loads((measured_run / "faithfulness.json").read_text())["examples"] == 12


def test_faithfulness_of_older_weights_is_not_shown(measured_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(measured_run, run)
    later = time.time() + 10
    os.utime(run / "model.safetensors", (later, later))  # weights newer than faithfulness.json
    assert main(["report", str(run)]) == 0
    assert "Not measured for these weights" in (run / "report.html").read_text(encoding="utf-8")
    assert not (run / "plots" / "deletion.png").exists()  # no plot left over from the earlier report


def test_faithfulness_measured_by_an_earlier_deletion_test_is_not_shown(measured_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(measured_run, run)
    saved = json.loads((run / "faithfulness.json").read_text())
    assert saved["aopc_definition"] == 3
    del saved["aopc_definition"]  # as files written before 2026-11-25 are: AOPC then counted k = 1 twice
    (run / "faithfulness.json").write_text(json.dumps(saved))
    os.utime(run / "faithfulness.json", (time.time() + 10, time.time() + 10))  # newer than the weights
    assert main(["report", str(run)]) == 0
    assert "Not measured for these weights" in (run / "report.html").read_text(encoding="utf-8")


def test_examples_explained_by_attention_say_its_weights_are_every_classs():
    # (The weights come before the head: "the scores explain the predicted class" said otherwise.)
    from attnclf.explain.explanation import Explanation
    from attnclf.report.html import _examples_section

    weights = Explanation("a b", ["a", "b"], [0.4, 0.6], "attention", "pos", "pos", 0.9, {"neg": 0.1, "pos": 0.9})
    example = {"text": "a b", "true": "pos", "predicted": "pos", "confidence": 0.9}
    section = _examples_section([weights], {"correct": [example], "incorrect": []}, "attention")
    assert "not necessarily why the model decided; the same weights whichever class is explained." in section
    assert "attention beside it" not in section and section.count('<div class="tokens">') == 1


def test_an_example_mostly_of_unknown_tokens_is_noted_as_explain_notes_it():
    # As `attnclf explain --format html` notes it, under the example's headline; a text under the share gets none.
    from attnclf.explain.explanation import Explanation
    from attnclf.report.html import _examples_section

    probabilities = {"neg": 0.1, "pos": 0.9}
    mostly_unknown = Explanation("zz qq fine", ["<unk>", "<unk>", "fine"], [0.1, 0.2, 0.7], "occlusion", "pos", "pos",
                                 0.9, probabilities, unknown_tokens=2)
    known = Explanation("a fine film", ["a", "fine", "film"], [0.1, 0.7, 0.2], "occlusion", "pos", "pos", 0.9,
                        probabilities, unknown_tokens=0)
    examples = {"correct": [{"text": e.text, "true": "pos", "predicted": "pos", "confidence": 0.9}
                            for e in (mostly_unknown, known)], "incorrect": []}
    section = _examples_section([mostly_unknown, known], examples, "occlusion")
    note = ('<p class="note">note: 2 of the 3 tokens the model read are unknown to it (&lt;unk&gt;): its answer rests '
            'on the other 1</p>')
    assert section.count('<p class="note">note: ') == 1
    assert re.search(r"<p>true <b><bdi>pos</bdi></b>, predicted <b><bdi>pos</bdi></b> \(0\.900\)</p>\n?" +
                     re.escape(note) +
                     r"\n?<div class=\"tokens\">", section)


def test_report_errors_are_one_line(demo_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    (run / "metrics.json").unlink()
    assert main(["report", str(run)]) == 2
    assert main(["report", str(demo_run), "--method", "saliency"]) == 2
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert main(["report", str(demo_run), "--method", ""]) == 2  # (an unset $METHOD, say: not the default)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and all(line.startswith("attnclf: error: ") for line in err)
    assert "no metrics.json" in err[0] and "'saliency'" in err[1] and "does not exist" in err[2]
    assert "method '' does not apply" in err[3]



def test_report_output_writes_the_page_there_and_the_plots_into_the_run(demo_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    (run / "report.html").unlink()
    shutil.rmtree(run / "plots")
    page = tmp_path / "pages" / "imdb.html"  # (a folder not there yet is made)
    assert main(["report", str(run), "--output", str(page)]) == 0
    assert capsys.readouterr().out.strip() == f"report: {page}"
    assert images(page.read_text(encoding="utf-8")) and not (run / "report.html").exists()
    assert (run / "plots" / "confusion_matrix.png").read_bytes().startswith(PNG)
    assert [p.name for p in page.parent.iterdir()] == ["imdb.html"]  # (atomic: no temporary file left beside it)


@pytest.mark.parametrize("output, message", [
    ("pages", "is a folder; give --output a file name"),
    ("page.txt", "--output names the page: give it an .html or .htm name, not '.txt'"),
    ("page", "--output names the page: give it an .html or .htm name, not ''"),
    ("page.html.gz", "report writes uncompressed files; name the output page.html and compress it afterwards"),
])
def test_report_output_it_cannot_write_is_refused_in_one_line_before_the_work(demo_run, tmp_path, capsys, output,
                                                                               message):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    shutil.rmtree(run / "plots")
    (tmp_path / "pages").mkdir()
    assert main(["report", str(run), "-o", str(tmp_path / output)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"attnclf: error: {tmp_path / output}") and message in err[0]
    assert not (run / "plots").exists()  # refused before the plots were drawn


def test_a_run_another_process_is_writing_into_gets_no_report_beside_it(demo_run, tmp_path, capsys, held_elsewhere,
                                                                          files_but_the_lock):
    # report took no lock: one of a run `train --resume` was writing drew its curves and scores from files the
    # training was replacing, and two at once wrote report.html and plots/ in turn. Now a holder is named, nothing
    # read or written.
    from attnclf.rundir import LOCK_FILE

    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    before = files_but_the_lock(run)
    with held_elsewhere(run) as pid:
        assert main(["report", str(run), "--faithfulness", "--examples", "4"]) == 2
        assert capsys.readouterr().err == (f"attnclf: error: {run} is being written by another attnclf process (pid "
                                           f"{pid}); wait for it to finish\n")
        assert files_but_the_lock(run) == before
    assert main(["report", str(run)]) == 0  # held no more
    assert (run / "report.html").read_bytes() != before["report.html"] and not (run / LOCK_FILE).exists()

@pytest.mark.parametrize("file, edit, message", [
    ("metrics.json", lambda m: m.pop("accuracy"), "metrics.json: accuracy is missing"),
    ("metrics.json", lambda m: m.update(macro_f1="0.8"), "metrics.json: macro_f1 is '0.8', not a number"),
    ("metrics.json", lambda m: m.update(roc_auc=[0.9]), "metrics.json: roc_auc is [0.9], not a number or null"),
    ("metrics.json", lambda m: m.update(per_class=[]), "metrics.json: per_class is [], not an object"),
    ("metrics.json", lambda m: m.update(average_precision="0.9"),
     "metrics.json: average_precision is '0.9', not a number or null"),
    ("metrics.json", lambda m: next(iter(m["per_class"].values())).update(average_precision=[1]),
     "metrics.json: per_class.negative.average_precision is [1], not a number or null"),
    ("metrics.json", lambda m: next(iter(m["per_class"].values())).pop("recall"),
     "metrics.json: per_class.negative.recall is missing"),
    ("metrics.json", lambda m: m.update(confusion_matrix=[[1, 2]]),
     "metrics.json: confusion_matrix is [[1, 2]], not a square table of counts"),
    ("metrics.json", lambda m: m.update(split="train"), "metrics.json: split is 'train', not one of"),
    ("history.jsonl", lambda h: h[0].pop("epoch"), "history.jsonl, line 1: epoch is missing"),
    ("history.jsonl", lambda h: h[1].update(train_loss=None),
     "history.jsonl, line 2: train_loss is None, not a number"),
    ("history.jsonl", lambda h: h[1].update(val_macro_f1="x"),
     "history.jsonl, line 2: val_macro_f1 is 'x', not a number or null"),
    ("history.jsonl", lambda h: h.__setitem__(0, [1]), "history.jsonl, line 1: [1] is not an object"),
])
def test_a_hand_edited_metrics_or_history_file_is_one_line_naming_the_field(demo_run, tmp_path, capsys, mangle, file,
                                                                           edit, message):
    # A metrics.json or history.jsonl edited by hand (a key deleted, a number quoted) was a KeyError or a TypeError
    # from deep in the page's tables and plots, a traceback instead of the file and field at fault.
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    path = run / file
    mangle(path, edit)
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith(f"attnclf: error: {path}") and message in err, err


def test_a_run_scored_before_average_precision_was_measured_still_reports(demo_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    metrics = json.loads((run / "metrics.json").read_text())
    del metrics["average_precision"], metrics["accuracy_ci95"]  # (nor the intervals)
    del metrics["macro_f1_ci95"], metrics["roc_auc_ci95"]
    for scores in metrics["per_class"].values():
        del scores["average_precision"]
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "<td>average precision</td>" not in page and "Precision-recall curve" in page  # drawn from the texts
    assert f"<tr><td>test accuracy</td><td>{metrics['accuracy']:.4f}</td></tr>" in page
    assert f"<tr><td>macro-F1</td><td>{metrics['macro_f1']:.4f}</td></tr>" in page
    assert f"<tr><td>ROC AUC</td><td>{metrics['roc_auc']:.4f}</td></tr>" in page


def _relabelled(metrics: dict, label: str, scores) -> None:
    """``metrics``' first class renamed ``label`` (as a run of those labels writes it), its scores ``scores``."""
    per_class = metrics["per_class"]
    per_class[label] = scores(per_class.pop(next(iter(per_class))))


@pytest.mark.parametrize("file, edit, message", [
    # (a label read from a quoted CSV cell may hold a line break; labels.json and metrics.json keep it)
    ("metrics.json", lambda m: _relabelled(m, "neg\native", lambda s: s | {"support": "3"}),
     "metrics.json: per_class.neg ative.support is '3', not a whole number >= 0"),
    ("metrics.json", lambda m: _relabelled(m, "neg\native", lambda s: "?"),
     "metrics.json: per_class.neg ative is '?', not an object"),
    ("metrics.json", lambda m: _relabelled(m, "n" * 5000, lambda s: s | {"f1": None}),
     f"metrics.json: per_class.{'n' * 100}....f1 is None, not a number"),
    ("history.jsonl", lambda h: h[1].update({"val_\nf1": "x"}), "history.jsonl, line 2: val_ f1 is 'x', not a number"),
], ids=["label-with-line-break", "label-with-line-break-not-an-object", "label-of-5000-characters",
        "validation-field-with-line-break"])
def test_a_field_named_by_the_file_is_named_on_one_line(demo_run, tmp_path, capsys, mangle, file, edit, message):
    # The field's name was written into the message as the file held it: a class whose label holds a line break split
    # the one-line error in two, and one of 5,000 characters was written out whole.
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    mangle(run / file, edit)
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_a_history_line_is_named_by_its_line_in_the_file_blank_lines_and_all(demo_run, tmp_path, capsys):
    # Blank lines are passed over as the file is read; the line named was the record's count, one short after each.
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    first, second = (run / "history.jsonl").read_text().splitlines()
    edited = json.loads(second) | {"train_loss": "0.69"}
    (run / "history.jsonl").write_text(f"{first}\n\n{json.dumps(edited)}\n")
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    assert capsys.readouterr().err == (f"attnclf: error: {run / 'history.jsonl'}, line 3: train_loss is '0.69', not a "
                                       f"number (was the file edited?)\n")


def test_a_refit_that_scored_no_texts_is_refused_in_one_line(demo_run, tmp_path, capsys):
    # A refit of data without a test split trains on every text and scores none. `report` passed on the advice to give
    # a test file (no flag of its own), and write_report given test texts from Python failed on the scores that
    # metrics.json lacks (a KeyError).
    from attnclf.data.base import TextDataset
    from attnclf.errors import AttnclfError
    from attnclf.report import write_report

    run = tmp_path / "run-refit"
    shutil.copytree(demo_run, run)
    config = json.loads((run / "config.json").read_text())
    config["settings"]["data"] |= {"dataset": None, "train_file": str(tmp_path / "train.csv"), "refit": True}
    config["settings"]["refit_of"] = {"run": str(tmp_path / "run"), "epochs": 2}
    (run / "config.json").write_text(json.dumps(config))
    (run / "metrics.json").write_text(json.dumps({"split": None, "note": "trained on every labelled text"}))
    (run / "report.html").unlink()
    refusal = (f"{run} is a refit that scored no texts (its data has no test split, and it trained on every labelled "
               f"one): nothing to report; {tmp_path / 'run'} estimates its accuracy, and `attnclf evaluate {run} "
               f"--test-file FILE` scores it on other texts")
    assert main(["report", str(run)]) == 2
    assert capsys.readouterr().err == f"attnclf: error: {refusal}\n"
    labels = json.loads((run / "labels.json").read_text())
    with pytest.raises(AttnclfError) as refused:
        write_report(run, test=TextDataset(["a good film"], [0], labels))
    assert str(refused.value) == refusal
    assert not (run / "report.html").exists()


def test_multiclass_roc_draws_one_curve_per_class():
    import numpy as np

    rng = np.random.default_rng(0)
    y = np.arange(60) % 3
    probabilities = rng.dirichlet(np.ones(3), size=60)
    ax = plots.roc_figure(y, probabilities, ["a", "b", "c"]).axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert [label.split(" (")[0] for label in labels] == ["a vs rest", "b vs rest", "c vs rest", "chance"]


def test_the_precision_recall_figure_draws_each_class_against_its_share_of_the_texts():
    import numpy as np
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(0)
    y = np.array([0] * 40 + [1] * 15 + [2] * 5)  # imbalanced: chance is each class's share, not one line for all
    probabilities = rng.dirichlet(np.ones(3), size=60)
    ax = plots.precision_recall_figure(y, probabilities, ["a", "b", "c"]).axes[0]
    curves = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
    assert [line.get_label() for line in curves] == [
        f"{name} vs rest (AP {average_precision_score(y == c, probabilities[:, c]):.3f})"
        for c, name in enumerate("abc")]
    chance = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert [line.get_ydata()[0] for line in chance] == pytest.approx([40 / 60, 15 / 60, 5 / 60])
    assert [line.get_color() for line in chance] == [line.get_color() for line in curves]  # each beside its curve
    binary = plots.precision_recall_figure(y[:55], probabilities[:55, :2], ["neg", "pos"]).axes[0]
    assert [line.get_label() for line in binary.get_lines()] == [
        f"pos (AP {average_precision_score(y[:55] == 1, probabilities[:55, 1]):.3f})", "chance (pos: 27% of the texts)"]


def test_a_class_has_one_colour_in_the_roc_and_precision_recall_figures_when_another_is_not_drawn():
    # Class "a" has no test text, so neither figure draws it: the ROC figure gave "b" the first colour and the
    # precision-recall figure the second, and the two figures side by side told "b" and "c" apart by other colours.
    import numpy as np

    y = np.array([1, 2, 1, 2, 2])
    probabilities = np.random.default_rng(0).dirichlet(np.ones(3), size=5)
    colours = []
    for figure in (plots.roc_figure, plots.precision_recall_figure):
        curves = [line for line in figure(y, probabilities, ["a", "b", "c"]).axes[0].get_lines()
                  if line.get_linestyle() == "-"]
        colours.append({line.get_label().split(" (")[0]: line.get_color() for line in curves})
    assert colours[0] == colours[1] and list(colours[0]) == ["b vs rest", "c vs rest"]


def test_the_deletion_legend_stays_off_the_bars():
    methods = ["attention", "rollout", "grad-input", "integrated-gradients", "occlusion"]
    ks = ["1", "3", "5", "10%"]
    fig = plots.deletion_figure({m: {k: 0.6 for k in ks} for m in methods}, {k: 0.6 for k in ks})  # tall bars
    plots.png_bytes(fig)  # lays the figure out
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend, plot_area = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
    assert legend.x0 >= plot_area.x1  # beside the axes: no bar hidden under it
    assert legend.x1 <= fig.get_window_extent(renderer).x1  # and inside the picture


@pytest.mark.parametrize("figure", ["roc_figure"])
def test_many_classes_keep_their_legend_beside_the_curves(figure):
    # 20 newsgroups' legend inside the axes, tall as the plot, hid half the curves; a few classes keep it inside.
    # (The precision-recall figure's stands beside them always: test_the_precision_recall_legend_stays_off_...)
    import numpy as np

    rng = np.random.default_rng(0)
    for classes, beside in ((20, True), (3, False)):
        y = np.arange(200) % classes
        fig = getattr(plots, figure)(y, rng.dirichlet(np.ones(classes), size=200), [f"group {c}" for c in range(classes)])
        plots.png_bytes(fig)
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        legend, plot_area = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
        assert (legend.x0 >= plot_area.x1) == beside, classes
        assert legend.x1 <= fig.get_window_extent(renderer).x1  # inside the picture


@pytest.mark.parametrize("classes", [2, 30])
def test_long_class_names_leave_the_charts_room_to_lay_out(classes):
    # Two names of 60 characters squeezed the confusion matrix into a corner of its picture, and 30 of 120 left
    # matplotlib no room at all ("constrained_layout not applied"), its axes drawn over its labels and its legend cut.
    import warnings

    import numpy as np

    names = [f"{c}: a customer complaint " + "about a late delivery" * (2 if classes == 2 else 5)
             for c in range(classes)]
    y = np.arange(120) % classes
    probabilities = np.random.default_rng(0).dirichlet(np.ones(classes), size=120)
    figures = [plots.confusion_matrix_figure(np.eye(classes, dtype=int) * 4, names),
               plots.roc_figure(y, probabilities, names), plots.precision_recall_figure(y, probabilities, names)]
    for fig in figures:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            plots.png_bytes(fig)
        assert not [str(w.message) for w in caught], fig
        renderer, ax = fig.canvas.get_renderer(), fig.axes[0]
        picture, plot_area = fig.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert plot_area.width > picture.width / 4 and plot_area.height > picture.height / 4
        if legend := ax.get_legend():
            box = legend.get_window_extent(renderer)
            assert box.x1 <= picture.x1 and box.y0 >= picture.y0  # inside the picture
            named = [text.get_text().split(" (")[0].removesuffix(" vs rest") for text in legend.get_texts()
                     if not text.get_text().startswith("chance")]
        else:
            named = [label.get_text() for label in ax.get_xticklabels()]
        assert len(set(named)) == len(named) > 0 and all(len(name) <= plots.CHART_NAME_LENGTH for name in named)


def test_long_names_that_differ_only_in_their_middles_are_told_apart_in_the_charts():
    import numpy as np

    names = ["customer complaint about a late delivery", "customer complaint regarding a late delivery", "praise"]
    assert plots.chart_name(names[0]) == plots.chart_name(names[1])  # (cut alike: start and end the same)
    ticks = [label.get_text() for label in
             plots.confusion_matrix_figure(np.eye(3, dtype=int), names).axes[0].get_xticklabels()]
    assert ticks == [f"{plots.chart_name(names[0])} #1", f"{plots.chart_name(names[1])} #2", "praise"]
    y = np.arange(60) % 3
    legend = plots.roc_figure(y, np.random.default_rng(0).dirichlet(np.ones(3), size=60), names).axes[0].get_legend()
    curves = [text.get_text().split(" (")[0] for text in legend.get_texts() if not text.get_text().startswith("chance")]
    assert curves == [f"{tick} vs rest" for tick in ticks]


# ---------------------------------------------------------------- in a real browser


class DevTools:
    """Headless Chromium driven over the DevTools protocol (a websocket on 127.0.0.1)."""

    FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--remote-debugging-port=0", "--window-size=1200,900"]

    def __init__(self, binary: str, profile: str):
        import websocket

        self.process = subprocess.Popen([binary, *self.FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.socket = None
        self.events: list[dict] = []
        self.next_id = 0
        try:
            port = None
            for line in self.process.stderr:  # Chromium announces its port here once it listens
                match = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
                if match:
                    port = int(match.group(1))
                    break
            if port is None:
                raise RuntimeError(f"chromium exited ({self.process.wait()}) before opening DevTools")
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=10))
            page = next(t for t in targets if t["type"] == "page")
            # Chromium rejects websocket handshakes that carry an Origin it was not told to allow.
            self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        except BaseException:
            self.close()  # never leave a browser running behind a failed start
            raise

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            self.events.append(message)

    def wait_for(self, event: str) -> None:
        while not any(e.get("method") == event for e in self.events):
            self.events.append(json.loads(self.socket.recv()))

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)")
def test_report_renders_in_chromium(measured_run):
    # Chromium's helper processes may still write to the profile as it shuts down; its leftovers are no failure.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        browser = DevTools(CHROMIUM, profile)
        try:
            for domain in ("Runtime", "Log", "Page"):
                browser.call(f"{domain}.enable")
            browser.call("Page.navigate", url=(measured_run / "report.html").resolve().as_uri())
            browser.wait_for("Page.loadEventFired")
            state = json.loads(browser.call("Runtime.evaluate", returnByValue=True, expression="""JSON.stringify({
                title: document.title,
                images: Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth, i.clientWidth]),
                height: document.documentElement.scrollHeight,
                tables: document.querySelectorAll('table').length})""")["result"]["value"])
            shot = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        finally:
            browser.close()
    artefacts = REPO / "test-artifacts"
    artefacts.mkdir(exist_ok=True)
    (artefacts / "report.png").write_bytes(base64.b64decode(shot["data"]))

    problems = [e for e in browser.events if e.get("method") == "Runtime.exceptionThrown"
                or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
                or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    assert problems == []
    assert state["title"] == "attnclf report: run"
    assert len(state["images"]) == 8  # training, metric history, confusion, ROC, PR, reliability, heads, deletion
    broken = [alt for alt, complete, natural, shown in state["images"] if not (complete and natural > 0 and shown > 0)]
    assert broken == []
    assert state["tables"] >= 4 and state["height"] > 2000


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)")
def test_a_right_to_left_class_name_keeps_the_confidence_after_it_in_chromium(tmp_path):
    # "predicted <b>שלום עולם</b> (0.340)" drew as "predicted (0.340) שלום עולם": the bidi algorithm took the
    # parenthesis and the number into the Hebrew name's right-to-left run.
    from attnclf.explain.explanation import Explanation
    from attnclf.explain.render import page
    from attnclf.report.html import _examples_section

    name = "שלום עולם"
    explained = Explanation("a fine film", ["a", "fine", "film"], [0.1, 0.7, 0.2], "occlusion", name, name, 0.34,
                            {"pos": 0.66, name: 0.34})
    example = {"text": "a fine film", "true": "pos", "predicted": name, "confidence": 0.34}
    (tmp_path / "rtl.html").write_text(page("rtl", _examples_section([explained], {"correct": [], "incorrect": [
        example]}, "occlusion")), encoding="utf-8")
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        browser = DevTools(CHROMIUM, profile)
        try:
            browser.call("Page.enable")
            browser.call("Page.navigate", url=(tmp_path / "rtl.html").as_uri())
            browser.wait_for("Page.loadEventFired")
            # The left edge of the text after the predicted name, and the name's right edge, on the screen.
            edges = browser.call("Runtime.evaluate", returnByValue=True, expression="""(() => {
                const line = [...document.querySelectorAll('p')].find(p => p.textContent.startsWith('true'));
                const after = document.createRange();
                after.selectNodeContents(line.lastChild);
                const predicted = line.querySelectorAll('b')[1];
                return [after.getBoundingClientRect().left, predicted.getBoundingClientRect().right];
            })()""")["result"]["value"]
        finally:
            browser.close()
    assert edges[0] >= edges[1] - 1, edges


MARKUP_LABELS = ["<script>alert(1)</script>", "\"><img src=x onerror=alert(2)>", "$\\frac{a}{$"]
MARKUP_TEXT = "</div><img src=x onerror=alert(3)> \"'><script>alert(4)</script>"


def test_class_names_and_texts_from_the_data_are_text_on_every_page_not_markup_or_latex(tmp_path):
    # matplotlib read a class name between dollar signs as LaTeX (mathtext): "$\frac{a}{$" failed the report that
    # training writes, with a traceback, and `explain --format html` (its chart's title names the class).
    rows = [(f"w{k}a w{k}b w{k}c" + (f" {MARKUP_TEXT}" if n % 3 == 0 else ""), label)
            for n in range(30) for k, label in enumerate(MARKUP_LABELS)]
    data = tmp_path / "markup.csv"
    data.write_text("text,label\n" + "".join('"{}",{}\n'.format(text.replace('"', '""'), '"{}"'.format(
        label.replace('"', '""'))) for text, label in rows), encoding="utf-8")
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(data), "--test-file", str(data), "--model", "self-attn", "--set",
                 "d_model=16", "--set", "layers=1", "--epochs", "1", "--min-frequency", "1", "--output", str(run),
                 "--quiet", "--threads", "1"]) == 0
    assert main(["explain", str(run), f"w2a {MARKUP_TEXT}", "--target", MARKUP_LABELS[2], "--format", "html",
                 "--output", str(tmp_path / "explained.html")]) == 0
    for page in (run / "report.html", tmp_path / "explained.html"):
        html_text = page.read_text(encoding="utf-8")
        assert "<script" not in html_text and "<img src=x" not in html_text, page
        assert "&lt;img src=x onerror=alert(3)&gt;" in html_text and len(images(html_text)) >= 1, page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in (run / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["$\\frac{a}{$", "$\\nosuchcommand$"])
def test_every_figure_draws_a_name_between_dollar_signs_as_it_is(name):
    import numpy as np

    figures = [plots.confusion_matrix_figure([[1, 0], [0, 1]], [name, "b"]),
               plots.roc_figure([0, 1, 0, 1], np.array([[0.8, 0.2], [0.3, 0.7]] * 2), [name, "b"]),
               plots.precision_recall_figure([0, 1, 0, 1], np.array([[0.8, 0.2], [0.3, 0.7]] * 2), [name, "b"]),
               plots.token_scores_figure([name, "x"], [0.5, -0.2], f"occlusion: {name}", signed=True),
               plots.head_maps_figure(np.full((1, 1, 2, 2), 0.5), [name, "x"])]
    for figure in figures:
        assert plots.png_bytes(figure).startswith(PNG)


def test_the_reliability_figure_reads_plainly_and_keeps_its_legend_off_the_bars():
    # Drawn with mathtext off (png_bytes), the log axis's ticks read "$\mathdefault{10^{2}}$"; the legend sat over the
    # bars of an underconfident model, and the title ran past the picture's edge.
    import numpy as np

    rng = np.random.default_rng(0)
    y = np.arange(400) % 4
    probabilities = rng.dirichlet(np.ones(4), size=400)
    fig = plots.reliability_figure(y, probabilities)
    plots.png_bytes(fig)
    renderer = fig.canvas.get_renderer()
    top, bottom = fig.axes
    counts = [label.get_text() for label in bottom.get_yticklabels() if label.get_text()]
    assert counts and not any("$" in text or "mathdefault" in text for text in counts), counts
    legend = top.get_legend().get_window_extent(renderer)
    assert legend.x0 >= top.get_window_extent(renderer).x1  # beside the bars, never over them
    picture = fig.get_window_extent(renderer)
    for text in (top.title, top.get_legend()):
        box = text.get_window_extent(renderer)
        assert picture.x0 <= box.x0 and box.x1 <= picture.x1  # nothing cut at the edges


def test_the_precision_recall_legend_stays_off_the_chance_lines():
    # Inside the axes, at the lower left, the legend covered the dashed chance lines a rare class's reading starts at.
    import numpy as np

    rng = np.random.default_rng(0)
    for classes in (2, 4):
        y = np.arange(200) % classes
        fig = plots.precision_recall_figure(y, rng.dirichlet(np.ones(classes), size=200),
                                            [f"class {c}" for c in range(classes)])
        plots.png_bytes(fig)
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        legend = ax.get_legend()
        assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1, classes
        assert legend.get_window_extent(renderer).x1 <= fig.get_window_extent(renderer).x1
        assert legend.get_texts()[-1].get_text().startswith("chance"), classes  # the key after the curves


def test_a_class_without_texts_or_predictions_reads_n_a_in_the_per_class_table_not_zero():
    # The imbalanced run's one 'Business' text went to training: the validation table showed Business at
    # precision, recall and F1 0.0000, a score of a class the split could not score and the averages leave out.
    import numpy as np

    from attnclf.data.base import TextDataset
    from attnclf.evaluation.metrics import compute_metrics
    from attnclf.report.html import _test_section

    names = ["Business", "Sports", "World"]
    labels = [2] * 9 + [1]
    metrics = compute_metrics(labels, np.array([[0.1, 0.2, 0.7]] * 10), names)
    page = _test_section({}, metrics, names, TextDataset(["t"] * 10, labels, names))
    assert "<tr><td>Business</td><td>n/a</td><td>n/a</td><td>n/a</td><td>0</td></tr>" in page
    assert "<tr><td>Sports</td><td>0.0000</td><td>0.0000</td><td>0.0000</td><td>1</td></tr>" in page  # scored: 0
    assert "n/a: no text of the class here, and none predicted as it; the averages leave it out" in page
    # Predicted once, still without texts: a wrong prediction, scored 0 (the matrix's column sum, not its row sum).
    metrics = compute_metrics(labels, np.array([[0.8, 0.1, 0.1]] + [[0.1, 0.2, 0.7]] * 9), names)
    page = _test_section({}, metrics, names, TextDataset(["t"] * 10, labels, names))
    assert "<tr><td>Business</td><td>0.0000</td><td>0.0000</td><td>0.0000</td><td>0</td></tr>" in page


def test_a_label_without_texts_or_predictions_reads_n_a_in_a_multi_label_runs_table_not_zero():
    # As the single-label table: 'rare' had no test text and was given none, the macro average left it out, and the
    # multi-label table still showed it at precision, recall and F1 0.0000, a label the model fails at.
    import numpy as np

    from attnclf.data.base import TextDataset
    from attnclf.evaluation.multilabel import multilabel_metrics
    from attnclf.report.html import _multilabel_test_section

    names, truth = ["a", "b", "rare"], np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 1, 0]])
    test = TextDataset(["t"] * 4, [(0,), (1,), (0, 1), (1,)], names, multi_label=True)
    metrics = multilabel_metrics(truth, np.array([[.9, .1, .1], [.2, .8, .1], [.7, .6, .2], [.6, .7, .1]]), names)
    assert metrics["macro_f1"] == pytest.approx(0.9)  # (a's 0.8 and b's 1)
    page = _multilabel_test_section(metrics, test)
    assert "<tr><td>rare</td><td>0.500</td><td>n/a</td><td>n/a</td><td>n/a</td>" in page
    assert "<tr><td>b</td><td>0.500</td><td>1.0000</td><td>1.0000</td><td>1.0000</td>" in page
    assert "n/a: no text of the label here, and none predicted as it; the averages leave it out." in page
    # Given to a text, still without texts: a wrong label, scored 0.
    metrics = multilabel_metrics(truth, np.array([[.9, .1, .9], [.2, .8, .1], [.7, .6, .2], [.6, .7, .1]]), names)
    assert metrics["per_class"]["rare"]["predicted"] == 1
    assert "<tr><td>rare</td><td>0.500</td><td>0.0000</td><td>0.0000</td><td>0.0000</td>" in (
        _multilabel_test_section(metrics, test))


def test_a_hand_edited_count_of_texts_given_a_label_is_one_line_naming_it(tmp_path):
    # The report reads per_class.LABEL.predicted (whether a label without texts reads n/a), as it reads the others.
    import numpy as np

    from attnclf.errors import RunDirError
    from attnclf.evaluation.multilabel import multilabel_metrics
    from attnclf.rundir import read_metrics

    metrics = multilabel_metrics(np.array([[1, 0], [0, 1]]), np.array([[.9, .1], [.2, .8]]), ["a", "b"])
    (tmp_path / "metrics.json").write_text(json.dumps(metrics | {"split": "test"}))
    assert read_metrics(tmp_path, tables=True)["per_class"]["a"]["predicted"] == 1
    metrics["per_class"]["a"]["predicted"] = "1"
    (tmp_path / "metrics.json").write_text(json.dumps(metrics | {"split": "test"}))
    with pytest.raises(RunDirError, match=r"metrics.json: per_class.a.predicted is '1', not a whole number >= 0"):
        read_metrics(tmp_path, tables=True)


def test_texts_of_one_class_draw_no_empty_roc_or_precision_recall_chart_and_the_page_says_why():
    # A test file of positive texts alone gave a ROC and a precision-recall chart of the chance line alone, under
    # notes describing curves; a class without texts was left out of the curves without a word.
    import numpy as np

    from attnclf.data.base import TextDataset
    from attnclf.evaluation.metrics import compute_metrics
    from attnclf.report.html import _test_section

    probabilities = np.random.default_rng(0).dirichlet(np.ones(2), size=6)
    for figure in (plots.roc_figure, plots.precision_recall_figure):
        assert figure([1] * 6, probabilities, ["neg", "pos"]) is None
        assert figure([0, 1] * 3, probabilities, ["neg", "pos"]) is not None
    metrics = compute_metrics([1] * 6, probabilities, ["neg", "pos"])
    page = _test_section({}, metrics, ["neg", "pos"], TextDataset(["t"] * 6, [1] * 6, ["neg", "pos"]))
    said = "Not drawn: every text here is of 'pos', and a curve needs texts of its class and of others."
    assert page.count(said) == 2
    names, labels = ["a&b", "c", "d"], [1, 2, 2, 1]
    metrics = compute_metrics(labels, np.eye(3)[[1, 2, 1, 1]], names)
    page = _test_section({}, metrics, names, TextDataset(["t"] * 4, labels, names))
    assert page.count("No curve for 'a&amp;b': no text here is of it.") == 2 and "Not drawn" not in page
    metrics = compute_metrics([0, 1, 2], np.eye(3), names)  # every class has texts: nothing to say
    assert "No curve" not in _test_section({}, metrics, names, TextDataset(["t"] * 3, [0, 1, 2], names))


def test_the_confusion_matrix_figure_puts_true_classes_in_rows_and_predictions_in_columns():
    # 3 neg texts, 1 of them predicted pos; 2 pos texts: the 1 must stand under "predicted pos", in the "true neg" row.
    import numpy as np

    fig = plots.confusion_matrix_figure([[3, 1], [0, 2]], ["neg", "pos"])
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("predicted", "true")
    np.testing.assert_array_equal(ax.images[0].get_array(), [[3, 1], [0, 2]])  # imshow: rows down, columns across
    cells = {text.get_text(): tuple(int(v) for v in text.get_position()) for text in ax.texts}  # (x, y) = (col, row)
    assert cells == {"3": (0, 0), "1": (1, 0), "0": (0, 1), "2": (1, 1)}


def test_the_test_section_says_how_to_read_its_confusion_matrix_and_roc_curve():
    # The confusion matrix and ROC curve came with no word on how to read them; the precision-recall note opened
    # "What a rare class needs read:".
    import numpy as np

    from attnclf.data.base import TextDataset
    from attnclf.evaluation.metrics import compute_metrics
    from attnclf.report.html import _test_section

    names, labels = ["a", "b", "c"], [0, 1, 2, 2]
    metrics = compute_metrics(labels, np.eye(3)[[0, 1, 2, 1]], names)
    page = _test_section({}, metrics, names, TextDataset(["t"] * 4, labels, names))
    assert "Rows are the true classes, columns the predicted ones" in page
    assert "the diagonal holds the texts labelled right" in page
    assert "the chance diagonal is a random ranking" in page
    assert "needs read" not in page and "For a rare class, read this curve rather than the ROC curve" in page


def test_what_training_warned_of_stands_out_on_the_page():
    # The imbalance note and the class without a validation text sat in the overview as plain text under a
    # table, easy to scroll past; a boxed, coloured list stands out.
    from attnclf.explain.render import page

    styled = page("t", "")
    rule = styled[styled.index(".warnings {"):]
    assert "background:" in rule[:rule.index("}")] and "border-left:" in rule[:rule.index("}")]


def test_a_multi_label_runs_validation_curves_say_they_are_cut_at_0_5_not_at_the_tuned_thresholds():
    # A walkthrough run's curve read macro-F1 0.70 at its kept epoch while the tables read 0.777: the epochs are
    # validated at 0.5 (training.multilabel.validation_record), the tables at the thresholds tuned after training.
    from attnclf.report.html import _training_section

    drawn = {"training": PNG, "metric_history": PNG}
    note = "per epoch at a 0.5 threshold; the scores in the tables use the tuned thresholds"
    assert note in _training_section(drawn, multi_label=True)
    assert "threshold" not in _training_section(drawn, multi_label=False)
    assert "threshold" not in _training_section({"training": PNG}, multi_label=True)  # a refit validates on nothing


def test_a_multi_label_runs_training_curves_call_their_accuracy_subset_accuracy():
    # A multi-label text counts as right only when its whole label set is (as the epoch lines say "subset acc"): the
    # panel titled "accuracy" read as the share of right labels, far higher.
    history = [{"epoch": 1, "train_loss": 0.7, "val_loss": 0.6, "train_accuracy": 0.1, "val_accuracy": 0.2}]
    axis = plots.training_curves(history, multi_label=True).axes[1]
    assert (axis.get_title(), axis.get_ylabel()) == ("subset accuracy", "subset accuracy")
    axis = plots.training_curves(history).axes[1]
    assert (axis.get_title(), axis.get_ylabel()) == ("accuracy", "accuracy")


def test_the_validation_metrics_per_epoch_are_headed_once():
    # The section's heading stood over the figure's own title, the same words twice; the figure keeps its title, which
    # plots/metric_history.png needs on its own.
    from attnclf.report.html import _training_section

    page = _training_section({"training": PNG, "metric_history": PNG}, multi_label=False)
    assert "validation metrics per epoch" not in page.lower()
    history = [{"epoch": 1, "val_macro_f1": 0.5}]
    assert plots.metric_history(history).get_suptitle() == "validation metrics per epoch"


def test_the_calibration_section_says_a_low_error_says_little_of_a_model_answering_one_class():
    # A model answering the majority class with its base rate as its confidence scores a near-zero calibration error:
    # well calibrated, and useless. The section said nothing of it.
    import numpy as np

    from attnclf.report.html import _calibration

    names, labels = ["neg", "pos"], [0, 0, 0, 1]
    base_rate = np.array([[0.75, 0.25]] * 4)
    caveat = "a low calibration error says little here"
    page = _calibration({}, labels, base_rate, 1.0, names)
    assert "The model predicts 'neg' for every text scored here: " + caveat in page
    assert "well calibrated and useless" in page
    mixed = np.array([[0.75, 0.25]] * 3 + [[0.2, 0.8]])
    assert caveat not in _calibration({}, labels, mixed, 1.0, names)
    assert caveat not in _calibration({}, [0, 0, 0, 0], base_rate, 1.0, names)  # one class among the texts: right
    # The kept epoch answered one class for every validation text (history's val_predicted_only), though not here.
    page = _calibration({}, labels, mixed, 1.0, names, validation_only=0)
    assert "The kept weights predicted 'neg' for every validation text: " + caveat in page
    assert caveat not in _calibration({}, labels, mixed, 1.0, names, validation_only=7)  # (an edited record)


def test_self_attention_maps_colour_against_uniform_so_an_even_head_looks_even():
    # On a 0-to-largest scale a head weighing five tokens 0.19-0.21 was drawn in four shades of viridis, patterned as
    # if it chose; against uniform (1/n), weights near it are all but white, and the colour bar says so.
    import numpy as np

    n = 5
    maps = np.full((1, 2, n, n), 1 / n) + np.random.default_rng(0).uniform(-0.01, 0.01, (1, 2, n, n))
    maps[0, 1] = np.eye(n)  # a head whose every token looks at itself
    fig = plots.head_maps_figure(maps, list("abcde"))
    even, sharp = (ax.get_images()[0] for ax in fig.axes[:2])
    assert (even.cmap(even.norm(maps[0, 0]))[..., :3] > 0.85).all()  # near uniform: pale
    assert even.norm(1 / n) == pytest.approx(0.5)  # uniform at the middle of the scale, white
    assert sharp.norm(1.0) == pytest.approx(1.0) and sharp.norm(0.0) == pytest.approx(0.0)
    assert "uniform" in fig.axes[-1].get_ylabel()  # the colour bar names its middle
    # Under attention_window a token attends to its block: uniform is one over the block's tokens.
    windowed = plots.head_maps_figure(np.full((1, 1, 4, 4), 0.5), list("abcd"), window=2).axes[0].get_images()[0]
    assert windowed.norm(0.5) == pytest.approx(0.5)


def test_self_attention_maps_say_which_axis_attends_to_which():
    # Shown on a slide without the report's prose, a map's rows and columns read either way round: a student took
    # column "not" in layer 1 for "not" looking at every word. The axes say rows look at columns, and the figure
    # names the text it maps.
    import numpy as np

    fig = plots.head_maps_figure(np.full((2, 2, 3, 3), 1 / 3), ["not", "very", "good"])
    bottom_left = fig.axes[2]
    assert "attends from" in bottom_left.get_ylabel() and "attends to" in bottom_left.get_xlabel()
    assert fig.get_suptitle() == "self-attention of every layer and head on: not very good"


def test_the_report_says_how_its_self_attention_colours_read():
    from attnclf.explain.explanation import Explanation
    from attnclf.report.html import _heads_section

    e = Explanation("a b", ["a", "b"], [0.5, 0.5], "attention", "p", "p", 0.9, {})
    assert "white at uniform (1/n, weight spread evenly over the n tokens)" in _heads_section(
        {"self_attention": PNG}, [e])
    # Under a local window each token's weight is spread over its window's tokens: uniform is 1/w, as the colour
    # bar says, not 1/n.
    tokens = list("abcdef")
    windowed = Explanation(" ".join(tokens), tokens, [1 / 6] * 6, "attention", "p", "p", 0.9, {}, attention_window=4)
    assert "white at uniform (1/4, weight spread evenly over a window's 4 tokens)" in _heads_section(
        {"self_attention": PNG}, [windowed])
    # A text shorter than the window is one block: its map is white at 1/n, and the caption said 1/4 all the same.
    short = Explanation("a b", ["a", "b"], [0.5, 0.5], "attention", "p", "p", 0.9, {}, attention_window=4)
    assert "white at uniform (1/n, weight spread evenly over the n tokens)" in _heads_section(
        {"self_attention": PNG}, [short])


def test_a_text_shorter_than_the_attention_window_has_its_maps_named_uniform_at_1_over_n():
    import numpy as np

    # Within one block the window does not bind: the bar's middle is 1/n, which it named "1/window = 0.25".
    fig = plots.head_maps_figure(np.full((1, 1, 4, 4), 0.25), list("abcd"), window=8)
    assert fig.axes[-1].get_ylabel() == "attention weight (white: uniform, 1/n = 0.25)"
    fig = plots.head_maps_figure(np.full((1, 1, 6, 6), 0.25), list("abcdef"), window=4)
    assert fig.axes[-1].get_ylabel() == "attention weight (white: uniform, 1/window = 0.25)"


@pytest.mark.parametrize("figure", ["roc_figure", "precision_recall_figure"])
def test_the_roc_and_precision_recall_figures_leave_their_heading_to_the_page(figure):
    # "ROC curve (one-vs-rest per class)" stood over a figure titled "ROC curve": the same words twice. The page's
    # heading names the figure; what the title could add, each curve's AUC or AP, its legend carries.
    import numpy as np

    y = np.arange(30) % 3
    ax = getattr(plots, figure)(y, np.random.default_rng(0).dirichlet(np.ones(3), size=30), list("abc")).axes[0]
    assert ax.get_title() == ""
    assert all(("AUC " if figure == "roc_figure" else "AP ") in line.get_label() for line in ax.get_lines()
               if line.get_linestyle() == "-")


def test_a_chart_of_characters_its_font_lacks_warns_once_not_per_glyph_and_figure(monkeypatch):
    # A Hindi or Chinese explanation's HTML page printed matplotlib's "Glyph 2313 (DEVANAGARI LETTER U) missing from
    # font(s) DejaVu Sans." twice over per character and chart: 26 lines for four short texts.
    import warnings

    from attnclf.errors import AttnclfWarning
    from attnclf.report import plots
    from attnclf.report.plots import png_bytes, token_scores_figure

    monkeypatch.setattr(plots, "_FONTS_WARNED_OF", set())  # (as a process that drew none yet)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for tokens in (["यह", "उत्पाद", "बढ़िया"], ["电影", "很差"], ["电影", "很差"]):
            assert png_bytes(token_scores_figure(tokens, [0.1, 0.2, 0.3][:len(tokens)], "t", True))[:4] == b"\x89PNG"
    messages = [str(w.message) for w in caught]
    assert not any("missing from font" in message for message in messages), messages
    ours = [w for w in caught if w.category is AttnclfWarning]
    assert len(ours) == 1 and "\n" not in str(ours[0].message)
    assert str(ours[0].message).startswith("the charts' font (DejaVu Sans) lacks characters of these texts")
