"""ONNX export: parity with PyTorch on a trained tiny model, the torch-free runtime, and its errors."""

import hashlib
import json
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch

from attnclf.classifier import Classifier
from attnclf.cli import main
from attnclf.errors import AttnclfError, RunDirError
from attnclf.export import OnnxClassifier
from attnclf.export import onnx as onnx_export
from attnclf.models import build_model

# Varied on purpose: empty, unknown words, punctuation, longer than max_len (64), repeated.
TEXTS = ["", "not good", "the plot was NOT wonderful, but the acting was great!", "zzz qqq unknownword",
         " ".join(["boring"] * 150), "great great great", "good but dull"] * 20


def test_export_writes_a_self_contained_directory_with_measured_parity(exported, demo_run, capsys):
    assert {p.name for p in exported.iterdir()} == {"model.onnx", "model.int8.onnx", "tokenizer.json",
                                                   "labels.json", "export.json"}
    manifest = json.loads((exported / "export.json").read_text())
    assert manifest["outputs"] == ["logits", "pooling_weights"]
    parity = manifest["parity"]
    assert parity["texts"] == 300 and parity["prediction_agreement"] == 1.0
    assert parity["max_abs_diff"] <= 1e-4 and parity["onnx_accuracy"] == parity["torch_accuracy"]
    int8 = manifest["int8"]
    assert int8["bytes"] < int8["fp32_bytes"]
    assert int8["accuracy_change"] == pytest.approx(int8["accuracy"] - parity["torch_accuracy"])
    assert (exported / "labels.json").read_bytes() == (demo_run / "labels.json").read_bytes()


def test_onnx_predictions_match_pytorch_across_batch_sizes_and_lengths(exported, demo_run):
    torch_clf = Classifier.load(demo_run, device="cpu")
    onnx_clf = OnnxClassifier.load(exported)
    assert onnx_clf.label_names == torch_clf.label_names
    for texts in (TEXTS[:1], TEXTS[:7], TEXTS):  # one text; one short batch; three batches of up to 64
        expected, got = torch_clf.predict_proba(texts), onnx_clf.predict_proba(texts)
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got.argmax(axis=1), expected.argmax(axis=1))
        assert np.abs(got - expected).max() <= 1e-4
        # The raw scores too, before the temperature and softmax, as Classifier.logits gives them.
        np.testing.assert_allclose(onnx_clf.logits(texts), torch_clf.logits(texts), atol=1e-4)
    for want, have in zip(torch_clf.predict(TEXTS[:7]), onnx_clf.predict(TEXTS[:7])):
        assert (have.label, have.tokens) == (want.label, want.tokens)
        np.testing.assert_allclose(have.attention, want.attention, atol=1e-4)
        assert (have.unknown_tokens, have.tokens_read) == (want.unknown_tokens, want.tokens_read)
    assert [(p.unknown_tokens, p.tokens_read, p.tokens) for p in onnx_clf.predict(TEXTS[:4], tokens=False)] == [
        (0, 0, []), (0, 2, []), (2, 12, []), (3, 3, [])]  # an empty text: nothing read; "," and "!" are unknown
    assert len(onnx_clf.predict([TEXTS[4]])[0].tokens) == 64  # truncated to the run's max_len, as in PyTorch


def test_runtime_needs_no_torch(exported):
    # torch set to None in sys.modules makes any `import torch` fail.
    code = ("import sys; sys.modules['torch'] = None\n"
            "from attnclf.export import OnnxClassifier\n"
            f"clf = OnnxClassifier.load({str(exported)!r}, int8=True)\n"
            "print(clf.predict(['not good at all'])[0].label)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in json.loads((exported / "labels.json").read_text())
    command = ("import sys; sys.modules['torch'] = None\n"
               "from attnclf.cli import main\n"
               f"sys.exit(main(['predict', {str(exported)!r}, 'not good at all', '--backend', 'onnx', '--threads', '1']))")
    done = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["label"] in json.loads((exported / "labels.json").read_text())


def test_predict_command_with_the_onnx_backend(exported, demo_run, capsys):
    text = "the acting was not wonderful"
    assert main(["predict", str(exported), text, "--backend", "onnx", "--attention"]) == 0
    onnx_record = json.loads(capsys.readouterr().out)
    assert main(["predict", str(demo_run), text, "--attention"]) == 0
    torch_record = json.loads(capsys.readouterr().out)
    assert onnx_record["label"] == torch_record["label"] and onnx_record["tokens"] == torch_record["tokens"]
    assert onnx_record["confidence"] == pytest.approx(torch_record["confidence"], abs=1e-4)


def test_a_run_directory_finds_its_default_export(demo_run, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "labels.json"):
        (run / name).write_bytes((demo_run / name).read_bytes())
    check = onnx_export.check_data(run, limit=50)
    result = onnx_export.export_onnx(run, check=check)
    assert result.directory == run / "onnx" and len(check) == 50
    assert OnnxClassifier.load(run).predict_proba(["good"]).shape == (1, 2)
    with pytest.raises(AttnclfError, match="--quantize"):
        OnnxClassifier.load(run, int8=True)
    # A graph file names its export; an ensemble folder is not one (its members export alone).
    assert OnnxClassifier.load(run / "onnx" / "model.onnx").predict_proba(["good"]).shape == (1, 2)
    with pytest.raises(AttnclfError, match="model.onnx is the float32 graph; give model.int8.onnx"):
        OnnxClassifier.load(run / "onnx" / "model.onnx", int8=True)
    (tmp_path / "ensemble").mkdir()
    (tmp_path / "ensemble" / "ensemble.json").write_text("{}")
    with pytest.raises(AttnclfError, match="is not explained or exported as one model"):
        OnnxClassifier.load(tmp_path / "ensemble")
    for other in (run / "config.json", run / "onnx" / "labels.json"):  # files, but not graphs
        with pytest.raises(AttnclfError, match="is not an ONNX export; give its folder"):
            OnnxClassifier.load(other)


def test_quantising_leaves_the_callers_logging_as_it_was(demo_run, tmp_path, monkeypatch):
    # onnxruntime's quantiser logs through the root logger, which, without handlers, gives itself one to stderr
    # (logging.basicConfig) for the rest of the process; and the export lifted a logging.disable its caller had set.
    import logging

    monkeypatch.setattr(logging.root, "handlers", [])  # (a fresh process's: pytest's own capture handler aside)
    logging.disable(logging.INFO)
    try:
        onnx_export.export_onnx(demo_run, tmp_path / "onnx", check=onnx_export.check_data(demo_run, limit=20),
                                quantize=True)
        assert (logging.root.handlers, logging.root.manager.disable) == ([], logging.INFO)
    finally:
        logging.disable(logging.NOTSET)


def test_an_export_inside_a_run_that_trained_on_since_is_refused(demo_run, tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "labels.json"):
        (run / name).write_bytes((demo_run / name).read_bytes())
    onnx_export.export_onnx(run, check=onnx_export.check_data(run, limit=20))
    elsewhere = tmp_path / "shipped"
    onnx_export.export_onnx(run, elsewhere, check=onnx_export.check_data(run, limit=20))
    weights = bytearray((run / "model.safetensors").read_bytes())
    weights[-1] ^= 1  # as `train --resume` would leave them: other weights, same file
    (run / "model.safetensors").write_bytes(bytes(weights))
    with pytest.raises(AttnclfError, match="exported from earlier weights of .*; export it again"):
        OnnxClassifier.load(run)
    assert main(["predict", str(run), "good", "--backend", "onnx"]) == 2
    assert "export it again" in capsys.readouterr().err
    with monkeypatch.context() as patch:  # named from inside the export folder
        patch.chdir(run / "onnx")
        with pytest.raises(AttnclfError, match="exported from earlier weights"):
            OnnxClassifier.load(".")
    assert OnnxClassifier.load(elsewhere).predict_proba(["good"]).shape == (1, 2)  # a copy stands alone
    # A copy of the run with its export, trained on, is checked as the run itself is.
    shutil.copytree(run, tmp_path / "copy")
    with pytest.raises(AttnclfError, match="exported from earlier weights"):
        OnnxClassifier.load(tmp_path / "copy")


@contextmanager
def _changed_once_loaded(change):
    """``Classifier.load`` calls ``change`` once it has read the weights: another process acting on the run then."""
    loaded = Classifier.load

    def load_then_change(run_dir, **options):
        classifier = loaded(run_dir, **options)
        change()
        return classifier

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Classifier, "load", staticmethod(load_then_change))
        yield


def test_weights_replaced_while_they_are_exported_are_refused_not_recorded_beside_the_graph_of_others(
        demo_run, tmp_path):
    # An export outside the run reads it without holding it, and took the weights' sha256 after loading them: a
    # `train --resume` replacing them meanwhile left export.json naming the new weights beside a graph of the old.
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    check = onnx_export.check_data(run, limit=20)

    def train_on():
        weights = bytearray((run / "model.safetensors").read_bytes())
        weights[-1] ^= 1  # as `train --resume` would leave them: other weights, same file
        (run / "model.safetensors").write_bytes(bytes(weights))

    with _changed_once_loaded(train_on), pytest.raises(AttnclfError) as refused:
        onnx_export.export_onnx(run, tmp_path / "shipped", check=check)
    assert str(refused.value) == (f"{run}/model.safetensors changed while it was exported (trained on: `train "
                                  f"--resume`?); nothing was written: export it again once the run is left alone")
    assert not (tmp_path / "shipped").exists()
    # Left alone, the export records the sha256 of the weights it traced, and the run's are those.
    manifest = onnx_export.export_onnx(run, tmp_path / "shipped", check=check).manifest
    assert manifest["weights_sha256"] == hashlib.sha256((run / "model.safetensors").read_bytes()).hexdigest()


def test_weights_set_aside_while_they_are_exported_are_refused_in_one_line(demo_run, tmp_path):
    # A `train --overwrite` into the run moves its model into earlier-model/ as it starts: the checksum taken after
    # the load then found no file, and the export ended in a FileNotFoundError traceback.
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    check = onnx_export.check_data(run, limit=20)

    def set_aside():
        (run / "earlier-model").mkdir()
        (run / "model.safetensors").replace(run / "earlier-model" / "model.safetensors")

    with _changed_once_loaded(set_aside), pytest.raises(AttnclfError, match=r"model\.safetensors changed while"):
        onnx_export.export_onnx(run, tmp_path / "shipped", check=check)
    assert not (tmp_path / "shipped").exists()


def test_export_that_disagrees_with_pytorch_fails_and_changes_nothing(demo_run, tmp_path, monkeypatch):
    other = Classifier.load(demo_run, device="cpu").model
    torch.manual_seed(123)
    other.apply(lambda m: m.reset_parameters() if hasattr(m, "reset_parameters") else None)  # other weights
    real_graph = onnx_export.onnx_graph
    check = onnx_export.check_data(demo_run, limit=50)
    onnx_export.export_onnx(demo_run, tmp_path / "earlier", check=check)
    before = {f.name: f.read_bytes() for f in (tmp_path / "earlier").iterdir()}
    monkeypatch.setattr(onnx_export, "onnx_graph", lambda model: real_graph(other))
    for folder in ("new", "earlier"):
        with pytest.raises(AttnclfError, match="does not match PyTorch"):
            onnx_export.export_onnx(demo_run, tmp_path / folder, check=check)
    assert not (tmp_path / "new").exists()  # nor an empty folder
    assert {f.name: f.read_bytes() for f in (tmp_path / "earlier").iterdir()} == before  # no staging left either
    assert OnnxClassifier.load(tmp_path / "earlier").predict(["not good"])[0].label in check.label_names


def test_block_local_attention_exports_for_every_length():
    """The graph is traced on a text longer than the window, and that path is exact for shorter texts too."""
    import onnxruntime

    torch.manual_seed(0)
    model = build_model("self-attn", vocab_size=50, d_model=16, heads=2, ff_dim=32, layers=2, max_len=64,
                        num_classes=3, attention_window=4).eval()
    session = onnxruntime.InferenceSession(onnx_export.onnx_graph(model))
    for seq in (2, 4, 5, 9, 40):
        ids = torch.randint(1, 50, (3, seq))
        ids[1, seq // 2:] = 0
        with torch.no_grad():
            expected = model(ids, ids != 0).logits.numpy()
        got = session.run(["logits"], {"input_ids": ids.numpy(), "attention_mask": (ids != 0).numpy()})[0]
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_a_window_as_long_as_the_model_exports_as_full_attention():
    model = build_model("self-attn", vocab_size=50, d_model=16, heads=2, ff_dim=32, layers=1, max_len=16,
                        attention_window=16).eval()
    assert len(onnx_export.onnx_graph(model)) > 0  # no tracing past max_len


def test_models_with_an_lstm_are_refused_with_a_reason():
    with pytest.raises(AttnclfError, match="LSTM.*--backend torch"):
        onnx_export.onnx_graph(build_model("bilstm-attn", vocab_size=20).eval())


@pytest.mark.parametrize("args, message", [
    (["predict", "{run}", "good", "--backend", "onnx"], "no ONNX export"),
    (["predict", "{run}", "good", "--int8"], "--int8 needs --backend onnx"),
    (["predict", "{run}", "good", "--backend", "onnx", "--bf16"], "--bf16 is for --backend torch"),
    (["predict", "{missing}", "good", "--backend", "onnx"], "does not exist"),
    (["predict", "{run}", "good", "--backend", "onnx", "--threads", "0"], "--threads must be at least 1, got 0"),
    (["export", "{run}", "--check-file", "{missing}"], "no such file"),
    (["export", "{run}", "--check-examples", "0"], "--check-examples must be at least 1, got 0"),
    (["export", "{run}", "--check-examples", "-3"], "--check-examples must be at least 1, got -3"),
    (["export", "{run}", "--text-column", "review"], "name the columns of --check-file; give it too"),
    (["export", "{missing}"], "run directory {missing} does not exist"),
    (["export", "{reference}"], "holds a reference baseline's scores (result.json) from `attnclf compare`, not a"),
])
def test_command_errors_are_one_line(args, message, demo_run, tmp_path, capsys):
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "result.json").write_text("{}")  # a compare cell of the TF-IDF reference
    args = [a.format(run=demo_run, missing=tmp_path / "missing", reference=tmp_path / "reference") for a in args]
    message = message.format(missing=tmp_path / "missing")
    assert main(args + (["--output", str(tmp_path / "onnx")] if args[0] == "export" else [])) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "onnx").exists()


def test_an_export_into_a_run_folder_is_refused_and_leaves_the_run_whole(demo_run, tmp_path, capsys):
    """Its tokenizer.json and labels.json would replace the run's own, which the run's model needs."""
    other, pretrained = tmp_path / "other", tmp_path / "pretrained"
    for folder, marker in ((other, "config.json"), (pretrained, "pretrain.json")):
        folder.mkdir()
        (folder / marker).write_text("{}")
        (folder / "tokenizer.json").write_text("its own")
    for into in (demo_run, other, pretrained):
        before = (into / "tokenizer.json").read_bytes()
        assert main(["export", str(demo_run), "--output", str(into)]) == 2
        assert capsys.readouterr().err.strip() == (f"attnclf: error: {into} holds a trained run or pretraining; "
                                                   f"export into another --output (default: {demo_run / 'onnx'})")
        assert (into / "tokenizer.json").read_bytes() == before and not (into / "export.json").exists()



def test_an_export_folder_another_process_is_writing_into_is_refused_and_left_as_it_was(demo_run, tmp_path, capsys,
                                                                                          held_elsewhere,
                                                                                          files_but_the_lock):
    # export took no lock: two into one --output published their files in turn, one's export.json beside the other's
    # graph; and one into the default run/onnx ran beside a `train --overwrite` of the run, which deletes onnx/.
    from attnclf.rundir import LOCK_FILE

    run, shipped = tmp_path / "run", tmp_path / "shipped"
    shutil.copytree(demo_run, run)
    shutil.rmtree(run / "onnx", ignore_errors=True)
    onnx_export.export_onnx(run, shipped, check=onnx_export.check_data(run, limit=20))
    for held, argv in ((shipped, ["export", str(run), "--output", str(shipped)]),
                       (run, ["export", str(run)]),  # (into run/onnx: the run is written too)
                       (run / "onnx", ["export", str(run)])):
        before = {folder: files_but_the_lock(folder) for folder in (run, shipped)}
        with held_elsewhere(held) as pid:
            assert main([*argv, "--check-examples", "20"]) == 2
            assert capsys.readouterr().err == (f"attnclf: error: {held} is being written by another attnclf process "
                                               f"(pid {pid}); wait for it to finish, or give another --output\n")
            assert {folder: files_but_the_lock(folder) for folder in (run, shipped)} == before, argv
        shutil.rmtree(run / "onnx", ignore_errors=True)  # (the holder's folder)
    for argv in (["export", str(run)], ["export", str(run), "--output", str(shipped)]):
        assert main([*argv, "--check-examples", "20"]) == 0  # held no more
    assert [path for path in tmp_path.rglob(LOCK_FILE)] == []
    assert OnnxClassifier.load(run).predict_proba(["good"]).shape == (1, 2)


def test_a_run_another_process_is_training_is_refused_before_it_is_read_or_called_unfinished(demo_run, tmp_path,
                                                                                              capsys, held_elsewhere):
    # Exported into the run (its onnx/), which is written too: a run being trained was warned of as unfinished (with
    # advice to `train --resume` it, as it was being), its check texts read, and only then refused; one just begun
    # (no config.json yet) was called incomplete, its holder unnamed. The holder alone is named, in one line.
    resumed, begun = tmp_path / "resumed", tmp_path / "begun"
    shutil.copytree(demo_run, resumed)
    shutil.rmtree(resumed / "onnx", ignore_errors=True)
    (resumed / "metrics.json").unlink()  # (its best weights so far)
    for run in (resumed, begun):
        with held_elsewhere(run) as pid:
            assert main(["export", str(run), "--check-examples", "20"]) == 2
            assert capsys.readouterr().err == (f"attnclf: error: {run} is being written by another attnclf process "
                                               f"(pid {pid}); wait for it to finish, or give another --output\n")
    assert main(["export", str(resumed), "--check-examples", "20"]) == 0  # held no more: exported, said unfinished
    assert f"warning: {resumed} has not finished training" in capsys.readouterr().err


def test_an_empty_output_is_refused_not_read_as_the_working_folder(demo_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AttnclfError, match=r"^output is empty: name the folder to export into, or leave it out"):
        onnx_export.export_onnx(demo_run, "", check=onnx_export.check_data(demo_run, limit=20))
    assert not any(tmp_path.iterdir())


def test_the_precision_switches_take_true_or_false_only(demo_run, exported):
    # int8="no" is truthy: it loaded the quantised graph; bf16 wrote a value of any length back whole.
    with pytest.raises(AttnclfError, match=r"^int8 must be True or False, got 'no'$"):
        OnnxClassifier.load(exported, int8="no")
    assert OnnxClassifier.load(exported, int8=np.bool_(True)).int8 is True
    with pytest.raises(AttnclfError, match=r"^bf16 must be True or False, got 'x{39}\.\.\.$"):
        Classifier.load(demo_run, device="cpu", bf16="x" * 10_000)
    assert Classifier.load(demo_run, device="cpu", bf16=np.bool_(False)).bf16 is False


def test_predict_takes_true_or_false_for_its_tokens(demo_run, exported):
    # tokens="false" is truthy: it answered the tokens and attention it was asked to leave out
    for clf in (Classifier.load(demo_run, device="cpu"), OnnxClassifier.load(exported)):
        with pytest.raises(AttnclfError, match=r"^tokens must be True or False, got 'false'$"):
            clf.predict(["good"], tokens="false")
        assert clf.predict(["good"], tokens=np.bool_(False))[0].tokens == []


def test_a_refused_model_leaves_no_export_folder_and_predict_says_why(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--dataset", "demo", "--model", "lstm-mean", "--epochs", "1", "--max-train-examples",
                 "200", "--output", str(run), "--quiet", "--no-report", "--threads", "1"]) == 0
    capsys.readouterr()  # (training's warning of test texts it trained on)
    assert main(["export", str(run)]) == 2
    reason = capsys.readouterr().err.removeprefix("attnclf: error: ").strip()
    assert "ONNX cannot express" in reason and not (run / "onnx").exists()
    # Asked for the export that cannot exist, predict gives export's reason rather than "export it first".
    assert main(["predict", str(run), "good", "--backend", "onnx"]) == 2
    assert capsys.readouterr().err == f"attnclf: error: no ONNX export in {run}, and it cannot have one: {reason}\n"
    with pytest.raises(RunDirError, match="ONNX cannot express"):
        OnnxClassifier.load(run)


def test_check_data_names_its_arguments_as_its_caller_spells_them(demo_run, tmp_path, capsys):
    # From Python it named `export`'s flags (--check-examples, --check-file...); the command passes them as named=.
    with pytest.raises(AttnclfError, match=r"^limit must be at least 1, got 0: parity is measured on texts$"):
        onnx_export.check_data(demo_run, limit=0)
    with pytest.raises(AttnclfError, match=r"^limit must be a whole number, got '5'$"):
        onnx_export.check_data(demo_run, limit="5")
    with pytest.raises(AttnclfError, match=r"^seed must be at least 0 and below 4294967296, got -1$"):
        onnx_export.check_data(demo_run, limit=2, seed=-1)  # (numpy's sampler: its traceback)
    with pytest.raises(AttnclfError, match=r"^text_column and label_column name the columns of file; give it too$"):
        onnx_export.check_data(demo_run, label_column="sentiment")
    # A refit of data without a test split has no texts of its own to check on: they are check_data's file.
    run = tmp_path / "refit"
    shutil.copytree(demo_run, run)
    config = json.loads((run / "config.json").read_text())
    config["settings"]["data"] |= {"dataset": None, "train_file": str(tmp_path / "train.csv"), "refit": True}
    (run / "config.json").write_text(json.dumps(config))
    with pytest.raises(AttnclfError, match=r"only other labelled texts can score it: give them with file$"):
        onnx_export.check_data(run)
    assert main(["export", str(run)]) == 2
    assert capsys.readouterr().err.endswith("only other labelled texts can score it: give them with --check-file\n")


def test_a_check_file_is_read_with_the_columns_the_run_trained_from(tmp_path):
    rows = "".join(f'"{text}",{label}\n' for text, label in [("a good film", "pos"), ("a bad film", "neg")] * 20)
    data = tmp_path / "reviews.csv"
    data.write_text("review,sentiment\n" + rows)
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(data), "--text-column", "review", "--label-column", "sentiment",
                 "--model", "boe", "--epochs", "1", "--min-frequency", "1", "--output", str(run), "--quiet",
                 "--no-report", "--threads", "1"]) == 0
    check = onnx_export.check_data(run, data)
    assert len(check) == 40 and check.texts[0] == "a good film"
    # The export records the column, so `predict --backend onnx --file` reads it; older exports ask their run.
    assert main(["export", str(run), "--check-file", str(data), "--threads", "1"]) == 0
    manifest = json.loads((run / "onnx" / "export.json").read_text())
    assert manifest["text_column"] == "review"
    manifest.pop("text_column")
    (run / "onnx" / "export.json").write_text(json.dumps(manifest))
    assert OnnxClassifier.load(run).config["text_column"] == "review"


def test_a_check_file_without_labels_measures_parity_alone(demo_run, tmp_path, capsys):
    # A practitioner with texts to score but no labels: parity is what proves the graph; accuracies need labels.
    texts = ["the acting was not good", "the plot was brilliant", "the ending was dull but the acting was great"]
    (unlabelled := tmp_path / "to_score.csv").write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in
                                                                              enumerate(texts * 4)))
    (lines := tmp_path / "to_score.txt").write_text("\n".join(texts) + "\n\n")
    assert onnx_export.check_data(demo_run, lines) == texts  # (blank lines are no texts, as `predict` reads them)
    sampled = onnx_export.check_data(demo_run, unlabelled, limit=5)
    assert len(sampled) == 5 and sampled == onnx_export.check_data(demo_run, unlabelled, limit=5)
    out = tmp_path / "onnx"
    assert main(["export", str(demo_run), "-o", str(out), "--check-file", str(unlabelled), "--quantize",
                 "--threads", "1"]) == 0
    assert "parity on 12 texts (unlabelled: accuracy not measured): predictions agree 100.00%" in capsys.readouterr().out
    manifest = json.loads((out / "export.json").read_text())
    assert manifest["parity"]["texts"] == 12 and "torch_accuracy" not in manifest["parity"]
    assert manifest["int8"]["texts"] == 12 and "accuracy" not in manifest["int8"]
    assert OnnxClassifier.load(out).predict_proba(texts).shape == (3, 2)
    def run_error(argv, capsys):
        assert main(argv + ["--threads", "1"]) == 2
        return capsys.readouterr().err.strip()

    # Labels asked for by name must be there; a JSON line lacking the label a first line had is a lost label.
    assert run_error(["export", str(demo_run), "-o", str(out), "--check-file", str(unlabelled), "--label-column",
                      "label"], capsys).startswith(f"attnclf: error: {unlabelled}: no label column 'label'")
    (mixed := tmp_path / "mixed.jsonl").write_text('{"text": "not good", "label": "negative"}\n{"text": "good"}\n')
    assert run_error(["export", str(demo_run), "-o", str(out), "--check-file", str(mixed)], capsys).startswith(
        f"attnclf: error: {mixed}, line 2: no label column 'label'")
    (header := tmp_path / "header.csv").write_text("text\n")
    assert run_error(["export", str(demo_run), "-o", str(out), "--check-file", str(header)], capsys) == (
        f"attnclf: error: --check-file {header} holds no texts to measure parity on")


def test_a_column_named_for_a_check_file_of_a_text_per_line_is_refused_not_left_unread(demo_run, tmp_path, capsys):
    # (--text-column review with to_score.txt measured parity on its lines as if the flag were not there)
    (lines := tmp_path / "to_score.txt").write_text("the plot was dull\na brilliant ending\n")
    for flag in ("--text-column", "--label-column"):
        assert main(["export", str(demo_run), "-o", str(tmp_path / "onnx"), "--check-file", str(lines), flag,
                     "review", "--threads", "1"]) == 2
        assert capsys.readouterr().err.strip() == (
            f"attnclf: error: {flag} names a column of a CSV / TSV / JSONL / Parquet --check-file; {lines} is read a "
            f"text per line, which has none")
    assert not (tmp_path / "onnx").exists()


@pytest.mark.parametrize("check, message", [
    ("a fine film", "pass a list of texts as check, not a single string"),  # (was parity on 11 texts, its characters)
    ({"a fine film": 1}, "pass a list of texts as check, not dict"),
    (None, "pass a list of texts as check, not NoneType"),
    ([], "check holds no texts to measure parity on"),  # (was numpy's "zero-size array to reduction operation")
])
def test_export_onnx_refuses_a_check_that_is_no_list_of_texts_in_one_line(demo_run, tmp_path, check, message):
    with pytest.raises(AttnclfError) as refused:
        onnx_export.export_onnx(demo_run, tmp_path / "onnx", check=check)
    assert str(refused.value) == message
    assert not (tmp_path / "onnx").exists()


def test_an_export_of_a_run_on_several_text_columns_records_and_reads_them(tmp_path, capsys):
    rows = "".join(f'"{title}","{body}",{label}\n' for title, body, label in
                   [("Review", "a good film", "pos"), ("", "a bad film", "neg")] * 20)
    data = tmp_path / "reviews.csv"
    data.write_text("title,body,sentiment\n" + rows)
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(data), "--text-column", "title", "--text-column", "body",
                 "--label-column", "sentiment", "--model", "boe", "--epochs", "1", "--min-frequency", "1", "--output",
                 str(run), "--quiet", "--no-report", "--threads", "1"]) == 0
    assert onnx_export.check_data(run, data).texts[:2] == ["Review\na good film", "\na bad film"]
    assert onnx_export.check_data(run, data, text_column=["body"]).texts[0] == "a good film"
    assert main(["export", str(run), "--check-file", str(data), "--text-column", "body", "--text-column", "title",
                 "--threads", "1"]) == 0
    assert json.loads((run / "onnx" / "export.json").read_text())["text_column"] == ["title", "body"]
    capsys.readouterr()
    to_score = tmp_path / "to_score.jsonl"
    to_score.write_text('{"title": "Review", "body": "a good film"}\n')
    assert main(["predict", str(run), "--file", str(to_score), "--backend", "onnx", "--threads", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == "Review\na good film"
    from fastapi.testclient import TestClient  # (the service says how to join them, as it does for the run)

    from attnclf.serve import create_app

    with TestClient(create_app(OnnxClassifier.load(run))) as client:
        assert client.get("/model").json()["text_columns"] == {"names": ["title", "body"], "joined_by": "\n"}


def test_a_corrupt_graph_is_reported_not_raised(exported, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for path in exported.iterdir():
        (broken / path.name).write_bytes(path.read_bytes())
    (broken / "model.onnx").write_bytes(b"not a graph")
    with pytest.raises(AttnclfError, match="not a loadable ONNX graph"):
        OnnxClassifier.load(broken)
    (broken / "model.onnx").write_bytes((exported / "model.onnx").read_bytes())
    labels = json.loads((exported / "labels.json").read_text())
    for damaged in (labels + ["third"], [labels[0]] * len(labels)):  # a shape mismatch inside numpy, or one lost
        (broken / "labels.json").write_text(json.dumps(damaged))
        with pytest.raises(AttnclfError, match=f"labels.json: expected {len(labels)} distinct label names"):
            OnnxClassifier.load(broken)


def test_a_staging_folder_left_by_a_killed_export_is_removed_by_the_next(demo_run, tmp_path):
    import os

    out = tmp_path / "onnx"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    abandoned = out / f".export-{int(dead.stdout)}-abc123"  # a process that has exited
    alive = out / f".export-{os.getpid()}-def456"  # this one: an export still running
    for folder in (abandoned, alive):
        folder.mkdir(parents=True)
        (folder / "model.onnx").write_bytes(b"partial")
    onnx_export.export_onnx(demo_run, out, check=onnx_export.check_data(demo_run, limit=20))
    assert not abandoned.exists() and alive.exists()
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "export.json", "labels.json", "model.onnx", "tokenizer.json"]


def test_an_export_shows_its_model_and_labels_in_a_notebook(exported):
    assert repr(OnnxClassifier.load(exported, int8=True)) == \
        "OnnxClassifier(model='self-attn', labels=['negative', 'positive'], int8=True)"


def test_a_path_to_the_int8_graph_loads_the_int8_graph(exported):
    named = OnnxClassifier.load(exported / "model.int8.onnx").predict_proba(TEXTS[:7])
    np.testing.assert_array_equal(named, OnnxClassifier.load(exported, int8=True).predict_proba(TEXTS[:7]))
    assert not np.array_equal(named, OnnxClassifier.load(exported).predict_proba(TEXTS[:7]))  # (not the float32 one)


@pytest.mark.parametrize("command", [["predict", "good"], ["serve"], ["export"], ["explain", "good"]])
def test_an_export_given_where_a_run_belongs_is_named_as_one(exported, command, capsys):
    # (it lacks config.json and model.safetensors: "incomplete run directory" sent users to look for them)
    assert main([command[0], str(exported), *command[1:]]) == 2
    assert capsys.readouterr().err == (f"attnclf: error: {exported} is an ONNX export, not a run directory: predict "
                                       f"from it or serve it with --backend onnx (`attnclf predict {exported} "
                                       f"--backend onnx`, `attnclf serve {exported} --backend onnx`) or "
                                       f"OnnxClassifier.load; give the other commands the run it came from\n")



def test_an_export_refuses_a_graph_or_tokenizer_that_is_not_the_one_exported(exported, demo_run, tmp_path):
    # Exports travel as folders; a model.onnx or tokenizer.json copied in from another export would answer in
    # ids the other model never learned, silently, whenever the vocabulary sizes agree.
    manifest = json.loads((exported / "export.json").read_text())
    assert manifest["files_sha256"] == {name: hashlib.sha256((exported / name).read_bytes()).hexdigest()
                                        for name in ("model.onnx", "model.int8.onnx", "tokenizer.json")}
    mixed = tmp_path / "mixed"
    shutil.copytree(exported, mixed)
    OnnxClassifier.load(mixed)  # a copy of the whole folder is the same export
    graph = mixed / "model.onnx"
    shutil.copy(exported / "model.int8.onnx", graph)  # a loadable graph of the same vocabulary, not the one exported
    with pytest.raises(RunDirError, match=f"^{graph} is not the file exported with {mixed / 'export.json'} "
                                          r"\(its sha256 differs\): export again"):
        OnnxClassifier.load(mixed)
    OnnxClassifier.load(mixed, int8=True)  # (the int8 graph itself loads)
    shutil.copy(exported / "model.onnx", graph)
    tokenizer = json.loads((mixed / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"] = dict(reversed(list(tokenizer["model"]["vocab"].items())))  # same size, other ids
    (mixed / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(RunDirError, match=f"^{mixed / 'tokenizer.json'} is not the file exported"):
        OnnxClassifier.load(mixed)


def test_an_export_from_before_its_files_were_fingerprinted_still_loads(exported, tmp_path):
    older = tmp_path / "older"
    shutil.copytree(exported, older)
    manifest = json.loads((older / "export.json").read_text())
    del manifest["files_sha256"]
    (older / "export.json").write_text(json.dumps(manifest))
    np.testing.assert_array_equal(OnnxClassifier.load(older).predict_proba(TEXTS[:7]),
                                  OnnxClassifier.load(exported).predict_proba(TEXTS[:7]))
    manifest["files_sha256"] = {"model.onnx": 3}
    (older / "export.json").write_text(json.dumps(manifest))
    with pytest.raises(RunDirError, match="files_sha256 must be a JSON object of file names and sha256 digests"):
        OnnxClassifier.load(older)


def test_a_single_label_export_stays_of_format_1_which_every_attnclf_reads_as_single_label(exported):
    # Written as exports were before multi-label ones (format 2): an older attnclf reads it, and this one reads
    # such older exports (no multi_label, no thresholds) as single-label.
    manifest = json.loads((exported / "export.json").read_text())
    assert manifest["format_version"] == 1 and "multi_label" not in manifest and "thresholds" not in manifest
    clf = OnnxClassifier.load(exported)
    assert clf.multi_label is False and clf.thresholds is None
    assert clf.predict(["not good"])[0].label in clf.label_names


def test_an_int8_graph_copied_into_an_export_made_without_one_is_refused(exported, tmp_path):
    # An export made without --quantize records no int8 graph's sha256: a model.int8.onnx copied in beside it (from
    # another export) loaded unchecked with int8=True, where its every other file is checked.
    plain = tmp_path / "plain"
    shutil.copytree(exported, plain)
    manifest = json.loads((plain / "export.json").read_text())
    del manifest["int8"], manifest["files_sha256"]["model.int8.onnx"]
    (plain / "export.json").write_text(json.dumps(manifest))
    OnnxClassifier.load(plain)
    with pytest.raises(RunDirError, match=f"^{plain / 'model.int8.onnx'} is not the file exported with "
                                          f"{plain / 'export.json'} \\(it records no sha256 for it\\): export again "
                                          r"\(`attnclf export RUN --format onnx --quantize`\)"):
        OnnxClassifier.load(plain, int8=True)


@pytest.mark.parametrize("command", [["predict", "good"], ["serve"]])
def test_a_folder_of_runs_given_to_the_onnx_backend_is_told_to_give_one_run(demo_run, tmp_path, command, cli_error):
    # It was told to `attnclf export FOLDER` first, which export then refused: the folder is no run.
    folder = tmp_path / "runs"
    for name in ("lstm", "self-attn"):  # (as `attnclf compare` names its runs)
        shutil.copytree(demo_run, folder / name, ignore=shutil.ignore_patterns("checkpoint", "plots"))
    assert cli_error([command[0], str(folder), *command[1:], "--backend", "onnx"]) == (
        f"{folder} is not a run directory but holds 2 runs ('lstm', 'self-attn'): give one of them instead, such as "
        f"{folder / 'lstm'}")


def _load_in_a_fresh_process(exported, home, **environment):
    """`OnnxClassifier.load(exported)` and a prediction in a process of its own, HOME set to ``home``: its stderr."""
    import os

    code = (f"from attnclf.export import OnnxClassifier\n"
            f"print(OnnxClassifier.load({str(exported)!r}).predict(['good'])[0].label)")
    # (nor CI: onnxruntime sends no telemetry where CI is set, so under CI=true the test could not fail)
    env = {name: value for name, value in os.environ.items() if name not in ("ORT_DISABLE_TELEMETRY", "CI")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=env | {"HOME": str(home)} | environment)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_loading_an_export_leaves_onnxruntime_telemetry_off_so_it_writes_nothing_home_nor_to_stderr(exported,
                                                                                                   tmp_path):
    """onnxruntime (1.32) starts Microsoft's telemetry as it is imported, persisting a device id under
    ~/.cache/Microsoft; on a read-only filesystem it printed a coloured "Failed to persist telemetry device ID" line
    on stderr instead, the one line under `serve --access-log json` that was no JSON object. A service sends no
    telemetry unless its operator asks (ORT_DISABLE_TELEMETRY=0, honoured)."""
    assert _load_in_a_fresh_process(exported, tmp_path / "home") == ""
    assert not (tmp_path / "home").exists()
    _load_in_a_fresh_process(exported, tmp_path / "asked", ORT_DISABLE_TELEMETRY="0")
    assert (tmp_path / "asked" / ".cache" / "Microsoft").is_dir()


def test_an_export_summarises_where_it_went_its_parity_and_its_int8_graph():
    from attnclf.export.onnx import OnnxExport

    parity = {"texts": 200, "prediction_agreement": 1.0, "max_abs_diff": 3.1e-7, "tolerance": 1e-4,
              "torch_accuracy": 0.8875, "onnx_accuracy": 0.8875}
    export = OnnxExport(Path("runs/demo/onnx"), {"parity": parity})
    assert export.summary() == ("exported to runs/demo/onnx\nparity on 200 texts: predictions agree 100.00%, "
                                "max |p_onnx - p_torch| 3.10e-07 (tolerance 1e-04)")
    unlabelled = OnnxExport(Path("onnx"), {"parity": {"texts": 1, "prediction_agreement": 1.0, "max_abs_diff": 0,
                                                      "tolerance": 1e-4}})
    assert unlabelled.summary().splitlines()[1].startswith("parity on 1 text (unlabelled: accuracy not measured): ")
    export.manifest["int8"] = {"bytes": 300 * 1024, "fp32_bytes": 1200 * 1024, "accuracy": 0.875,
                               "accuracy_change": -0.0125, "prediction_agreement": 0.985, "max_abs_diff": 0.02}
    assert export.summary().splitlines()[2] == ("int8 (300 KiB vs 1200 KiB): accuracy 0.8750 (-0.0125 vs PyTorch), "
                                                "predictions agree 98.50%, max |p_int8 - p_torch| 2.00e-02")
