"""Long documents as overlapping windows: the arithmetic, the model, and a corpus only windows can read."""

from __future__ import annotations

import csv
import json
import random

import numpy as np
import pytest
import torch

from attnclf.classifier import Classifier
from attnclf.cli import main
from attnclf.errors import AttnclfError
from attnclf.models import MODELS, build_model
from attnclf.models.windows import WindowedClassifier
from attnclf.text.tokenizer import Tokenizer, TokenizerConfig
from attnclf.text.windows import WindowConfig, collate_windows, split_windows, text_batches, window_starts
from attnclf.training.run import train_run
from attnclf.training.settings import DataSettings, RunSettings, resume_settings
from attnclf.training.trainer import TrainConfig

# ---------------------------------------------------------------- arithmetic


@pytest.mark.parametrize("length", [1, 7, 8, 9, 14, 15, 16, 37, 100])
@pytest.mark.parametrize("stride", [1, 3, 6, 8])
def test_windows_cover_every_token_in_order_with_the_stride(length, stride):
    window_len = 8
    starts = window_starts(length, window_len, stride)
    windows = split_windows(list(range(length)), window_len, stride)
    assert sorted({i for w in windows for i in w}) == list(range(length))  # nothing skipped
    assert all(w == list(range(s, s + len(w))) for s, w in zip(starts, windows))  # contiguous slices
    assert starts[0] == 0 and starts[-1] + len(windows[-1]) == length  # the last window ends with the text
    if length <= window_len:
        assert windows == [list(range(length))]
    else:
        assert all(len(w) == window_len for w in windows)
        steps = np.diff(starts)
        assert (steps[:-1] == stride).all() and 0 < steps[-1] <= stride  # only the last step may be shorter
        assert len(starts) == 1 + -(-(length - window_len) // stride)


def test_default_stride_overlaps_a_quarter_and_too_long_a_stride_is_refused():
    assert WindowConfig().stride_for(64) == 48
    assert WindowConfig(stride=5, max_windows=3).covered(8) == 18
    with pytest.raises(AttnclfError, match="longer than the window"):
        WindowConfig(stride=9).stride_for(8)
    with pytest.raises(AttnclfError, match="window pooling"):
        WindowConfig(pooling="first")
    with pytest.raises(AttnclfError, match="max_windows"):
        WindowConfig(max_windows=0)


@pytest.mark.parametrize("settings, start", [
    ({"max_windows": "8"}, "max_windows must be a whole number, got '8'"),
    ({"stride": 2.5}, "window stride must be a whole number, got 2.5"),
    ({"max_windows": True}, "max_windows must be a whole number, got True"),
    ({"pooling": "x" * 5000}, "window pooling must be one of attention, mean, max, got 'xxx"),
    ({"pooling": ["mean"]}, "window pooling must be one of attention, mean, max, got ['mean']"),
])
def test_a_window_setting_of_another_type_is_refused_in_one_bounded_line_naming_it(settings, start):
    with pytest.raises(AttnclfError) as refused:
        WindowConfig(**settings)
    message = str(refused.value)
    assert message.startswith(start) and len(message) < 200 and "\n" not in message


def test_numpy_window_counts_are_counts_and_written_as_plain_ints():
    windows = WindowConfig(stride=np.int64(48), max_windows=np.int32(4))
    assert windows.to_dict() == {"stride": 48, "max_windows": 4, "pooling": "attention"}
    assert json.dumps(windows.to_dict()) and type(windows.stride) is int and type(windows.max_windows) is int


def test_encoding_caps_the_windows_and_keeps_head_and_tail():
    words = [f"w{i}" for i in range(100)]
    tok = Tokenizer.train([" ".join(words)], TokenizerConfig(min_frequency=1, max_len=8, truncation="head_tail"))
    batches = text_batches(tok, [" ".join(words), "w5 w6"], [0, 1], windows=WindowConfig(stride=6, max_windows=3))
    assert [len(s) for s in batches.sequences] == [8 + 2 * 6, 2]  # what 3 windows cover, and the short text whole
    batch = next(iter(batches))
    assert batch.input_ids.shape == (2, 3, 8)
    long_row = batch.indices.tolist().index(0)
    ids = batch.input_ids[long_row]
    assert ids[0, 0].item() == tok.encode(["w0"])[0][0] and ids[-1, -1].item() == tok.encode(["w99"])[0][0]
    short_mask = batch.attention_mask[1 - long_row]
    assert short_mask.sum().item() == 2 and short_mask[0, :2].all()  # one window; the rest is padding


def test_collate_windows_masks_padded_tokens_and_windows():
    batch = collate_windows([[5, 6, 7, 8, 9], [4]], [1, 0], np.arange(2), window_len=3, stride=2)
    assert batch.attention_mask.tolist() == [[[True] * 3, [True] * 3], [[True, False, False], [False] * 3]]


# ---------------------------------------------------------------- the model


def _windowed(name: str, pooling: str) -> WindowedClassifier:
    torch.manual_seed(0)
    fields = {"d_model": 16, "layers": 1} if name in ("self-attn", "transformer-mean") else {}
    return WindowedClassifier(build_model(name, vocab_size=30, **fields), WindowConfig(pooling=pooling)).eval()


@pytest.mark.parametrize("name", list(MODELS))
def test_a_one_window_text_gets_the_base_models_logits(name):
    model = _windowed(name, "attention")
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    with torch.no_grad():
        windowed, base = model(ids.unsqueeze(1)).logits, model.base(ids, ids != 0).logits
    torch.testing.assert_close(windowed, base)


@pytest.mark.parametrize("pooling", ["attention", "mean", "max"])
def test_padded_windows_and_batch_mates_change_nothing(pooling):
    model = _windowed("self-attn", pooling)
    text = torch.tensor([[[5, 6, 7, 8], [7, 8, 9, 0]]])  # two windows
    other = torch.tensor([[[11, 12, 13, 14], [12, 13, 14, 15], [13, 14, 15, 16]]])  # three
    padded = torch.zeros(2, 3, 4, dtype=torch.long)
    padded[0, :2], padded[1] = text[0], other[0]
    with torch.no_grad():
        alone, together = model(text).logits, model(padded).logits
    torch.testing.assert_close(together[0], alone[0])
    if pooling == "attention":
        weights = model(padded).window_weights
        assert weights[0, 2].item() == 0.0 and torch.allclose(weights.sum(-1), torch.ones(2))


def test_every_window_counts():
    model = _windowed("boe", "mean")
    first, second = torch.tensor([[[5, 6], [7, 8]]]), torch.tensor([[[5, 6], [7, 9]]])
    with torch.no_grad():
        assert not torch.allclose(model(first).logits, model(second).logits)


def test_windowed_model_refuses_flat_ids_and_explanation_options():
    model = _windowed("self-attn", "attention")
    with pytest.raises(AttnclfError, match="windows, window_len"):
        model(torch.tensor([[5, 6]]))
    with pytest.raises(AttnclfError, match="output_attentions"):
        model(torch.tensor([[[5, 6]]]), output_attentions=True)


# ---------------------------------------------------------------- a corpus only windows can read


def _documents(n: int, seed: int) -> list[tuple[str, str]]:
    """~600-token texts of filler whose label is a marker word among their last 20 tokens."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.choice(["pos", "neg"])
        words = [f"w{rng.randrange(8)}" for _ in range(600)]
        words[600 - 1 - rng.randrange(20)] = "good" if label == "pos" else "bad"
        rows.append((" ".join(words), label))
    return rows


def _write(path, rows) -> str:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return str(path)


@pytest.fixture(scope="module")
def end_runs(tmp_path_factory):
    """The same model trained twice on end-labelled documents: head truncation, then windows."""
    root = tmp_path_factory.mktemp("long")
    data = DataSettings(train_file=_write(root / "train.csv", _documents(200, 0)),
                        test_file=_write(root / "test.csv", _documents(100, 1)))
    results = {}
    for name, windows in (("head", None), ("windows", WindowConfig(stride=64, max_windows=10, pooling="max"))):
        settings = RunSettings(
            data=data, tokenizer=TokenizerConfig(min_frequency=1, max_len=64, truncation="head"), windows=windows,
            model="self-attn",
            # Max pooling finds one marker among 64 tokens in an epoch or two; attention pooling needs ~7 here.
            model_config={"d_model": 32, "heads": 2, "layers": 1, "ff_dim": 64, "dropout": 0.0, "pooling": "max"},
            train=TrainConfig(epochs=4, batch_size=16, lr=1e-2, schedule="constant", patience=0, monitor="accuracy"),
            output=str(root / name), threads=1, report=windows is not None)
        results[name] = train_run(settings, progress=False)
    return results


def test_windows_read_the_end_that_head_truncation_cuts_off(end_runs):
    assert end_runs["head"].metrics["accuracy"] <= 0.65  # the marker is never in the first 64 tokens
    assert end_runs["windows"].metrics["accuracy"] >= 0.95


def test_a_windowed_run_loads_predicts_and_resumes_with_its_windows(end_runs, capsys):
    run_dir = end_runs["windows"].run_dir
    config = json.loads((run_dir / "config.json").read_text())
    assert config["settings"]["windows"] == {"stride": 64, "max_windows": 10, "pooling": "max"}
    clf = Classifier.load(run_dir, device="cpu")
    assert isinstance(clf.model, WindowedClassifier)
    texts, labels = zip(*_documents(40, 2))
    predictions = clf.predict(list(texts))
    assert np.mean([p.label == y for p, y in zip(predictions, labels)]) >= 0.95
    assert len(predictions[0].tokens) == 600 and predictions[0].attention is None  # read whole; no token weights
    assert resume_settings(run_dir).windows == WindowConfig(stride=64, max_windows=10, pooling="max")
    with pytest.raises(AttnclfError, match="windowed runs"):
        clf.explain(["w1 good"])
    report = (run_dir / "report.html").read_text()
    assert "Not explained" in report and "attnclf faithfulness RUN_DIR" not in report  # no command that would fail

    from fastapi.testclient import TestClient

    from attnclf.serve.app import create_app

    with TestClient(create_app(clf)) as client:  # the service describes a windowed model: no explanation methods
        described = client.get("/model")
        assert described.status_code == 200 and described.json()["explain_pooling_attention"] is False
        assert "/explain" not in client.get("/openapi.json").json()["paths"]  # (nor in /docs: it only refuses)
        assert client.post("/explain", json={"text": "w1 good"}).status_code == 400
    for command in (["faithfulness", str(run_dir), "--examples", "2"], ["explain", str(run_dir), "w1 good"],
                    ["explain", str(run_dir), "w1 good", "--method", "attention"]):
        assert main(command + ["--device", "cpu"]) == 2
        assert capsys.readouterr().err.strip() == (f"attnclf: error: {run_dir} reads long texts as windows (--windows); "
                                                   f"its explanations, and so their faithfulness, are not supported yet")


def test_cli_window_flags(tmp_path, capsys):
    from attnclf.cli import build_parser, build_settings

    args = build_parser().parse_args(["train", "--dataset", "demo", "--windows", "--max-windows", "3",
                                      "--window-pooling", "mean"])
    assert build_settings(args).windows == WindowConfig(max_windows=3, pooling="mean")
    assert build_settings(build_parser().parse_args(["train", "--dataset", "demo"])).windows is None
    assert main(["train", "--dataset", "demo", "--window-stride", "4", "--output", str(tmp_path / "x")]) != 0
    assert "--window-stride needs --windows" in capsys.readouterr().err


def test_windowed_training_batches_hold_packed_ids_and_say_they_are_tokenising(capsys):
    """`train --windows` still encoded every text in one call into a list of Python ints per text (28 bytes an id and
    more) while the plain path packs them, a chunk at a time, into one array of 4-byte ids."""
    from attnclf.data.base import TextDataset
    from attnclf.text.cache import MappedSequences
    from attnclf.training.run import _batches

    words = [f"w{i}" for i in range(40)]
    texts = [" ".join(words[i:]) for i in range(20)]
    tok = Tokenizer.train(texts, TokenizerConfig(min_frequency=1, max_len=8))
    windows = WindowConfig(stride=6, max_windows=3)
    batches = _batches(tok, TextDataset(texts, [0, 1] * 10, ["a", "b"]), batch_size=4, shuffle=True, seed=0,
                       windows=windows, progress=True)
    assert isinstance(batches.sequences, MappedSequences)
    assert [ids.tolist() for ids in batches.sequences] == tok.encode(texts, max_len=windows.covered(8))
    assert "tokenising 20 training texts" in capsys.readouterr().err


def test_scores_of_ids_refuses_a_windowed_run_naming_scores_instead(end_runs):
    # (it raised the model's own error, whose remedy, batching texts with text_batches, is what scores does)
    clf = Classifier.load(end_runs["windows"].run_dir, device="cpu")
    with pytest.raises(AttnclfError, match=r"^this run reads long texts as windows \(--windows\), several token "
                                           r"sequences a text: scores_of_ids reads one; give the texts to scores$"):
        clf.scores_of_ids(clf.tokenizer.encode(["w1 good"]))
    assert clf.scores(["w1 good"])[0].shape == (1, 2)
