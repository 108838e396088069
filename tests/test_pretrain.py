"""Masked-token pretraining (`attnclf pretrain`) and starting a run from it (`train --init-from`)."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from attnclf.cli import main
from attnclf.errors import AttnclfError, DataError, RunDirError
from attnclf.models import build_model
from attnclf.text.tokenizer import PAD_ID, UNK_ID, Tokenizer, TokenizerConfig
from attnclf.text.vectors import WordVectors
from attnclf.training import device
from attnclf.training.pretrain import (PretrainSettings, cut_pieces, encode_pieces, load_pretrained, mask_tokens,
                                       pretrain_encoder)

SMALL = {"d_model": 16, "heads": 2, "layers": 1, "ff_dim": 32, "dropout": 0.1, "positional": "learned"}
SMALL_FLAGS = [arg for key, value in SMALL.items() for arg in ("--set", f"{key}={value}")]


def cyclic_corpus(count: int = 400, seed: int = 0) -> list[str]:
    """Runs of 8 words from a fixed cycle of 24: every hidden word is given away by its neighbours."""
    cycle = [f"w{i}" for i in range(24)]
    starts = np.random.default_rng(seed).integers(0, len(cycle), count)
    return [" ".join(cycle[(start + k) % len(cycle)] for k in range(8)) for start in starts]


def quiet(message: str) -> None:
    pass


def test_masking_hides_only_real_tokens_at_least_one_per_text_mostly_as_unk():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(2, 50, (400, 12))
    ids[:, 9:] = PAD_ID
    ids[0, 1:] = PAD_ID  # a one-word text still teaches something
    corrupted, chosen = mask_tokens(ids, ids != PAD_ID, 0.15, 50, generator)
    assert not chosen[ids == PAD_ID].any()
    assert chosen.any(dim=1).all() and bool(chosen[0, 0])
    assert torch.equal(corrupted[~chosen], ids[~chosen])
    assert 0.13 < chosen.sum() / (ids != PAD_ID).sum() < 0.2
    share_unk = float((corrupted[chosen] == UNK_ID).float().mean())
    assert 0.7 < share_unk < 0.9  # BERT's 80%; the rest random words or kept
    kept = float((corrupted[chosen] == ids[chosen]).float().mean())
    assert 0.05 < kept < 0.15
    assert (corrupted[chosen] >= 2).float().mean() > 0.05  # random words are words, never <pad> or <unk>
    random_words = corrupted[chosen & (corrupted != UNK_ID) & (corrupted != ids)]
    assert len(random_words) and bool((random_words > UNK_ID).all())


def test_pieces_are_the_same_however_many_texts_are_tokenised_at_once():
    texts = cyclic_corpus(50) + ["w1 " * 40, "w2", "", "w3 w4 w5"]
    tokenizer = Tokenizer.train(texts, TokenizerConfig(kind="word", min_frequency=1, max_len=10 ** 9))
    whole = cut_pieces(tokenizer.encode(texts), 16)
    for chunk in (1, 7, 2048):
        assert [piece.tolist() for piece in encode_pieces(tokenizer, texts, 16, chunk)] == whole


def test_a_rerun_deletes_the_temporary_checkpoint_a_kill_9_left(tmp_path):
    # (three times the encoder's size: its weights and the optimiser's two moments)
    from attnclf.rundir import temporary_beside

    settings = PretrainSettings(model_config=SMALL, max_len=16, min_frequency=1, epochs=1, batch_size=32,
                                sampled_words=32)
    (tmp_path / "p").mkdir()
    os.close(temporary_beside(tmp_path / "p" / "checkpoint.safetensors")[0])  # as a write killed half-way leaves it
    pretrain_encoder(cyclic_corpus(100), settings, tmp_path / "p", log=quiet)
    assert not list((tmp_path / "p").glob("*.tmp"))


def test_pretraining_learns_to_restore_hidden_words(tmp_path):
    settings = PretrainSettings(model_config=SMALL, max_len=16, min_frequency=1, epochs=4, batch_size=32, lr=1e-2,
                                sampled_words=64)
    record = pretrain_encoder(cyclic_corpus(2000), settings, tmp_path / "p", log=quiet)
    losses = [epoch["loss"] for epoch in record["epochs"]]
    assert len(losses) == 4 and losses[0] < np.log(24) and losses[-1] < 0.6 * losses[0]  # (uniform guessing: ln 24)
    assert {path.name for path in (tmp_path / "p").iterdir()} >= {"encoder.safetensors", "tokenizer.json",
                                                                   "pretrain.json"}
    saved = json.loads((tmp_path / "p" / "pretrain.json").read_text())
    assert saved["model_config"]["d_model"] == 16 and saved["pieces"] == 2000 and saved["tokens"] == 16000


def test_pretraining_from_python_leaves_the_callers_random_stream_alone(tmp_path):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    settings = PretrainSettings(model_config=SMALL, max_len=16, min_frequency=1, epochs=1, batch_size=32)
    pretrain_encoder(cyclic_corpus(64), settings, tmp_path / "p", log=quiet)
    assert torch.equal(torch.rand(3), expected)


def test_a_rerun_continues_where_an_interrupted_one_stopped_and_ends_where_one_run_would(tmp_path):
    texts = cyclic_corpus(200)
    settings = PretrainSettings(model_config=SMALL, max_len=16, min_frequency=1, epochs=2, batch_size=32,
                                sampled_words=32)
    pretrain_encoder(texts, settings, tmp_path / "whole", log=quiet)
    def interrupt_after_the_first_epoch(message: str) -> None:
        if message.startswith("pretrain: epoch 1/2"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pretrain_encoder(texts, settings, tmp_path / "stopped", log=interrupt_after_the_first_epoch)
    said = []
    record = pretrain_encoder(texts, settings, tmp_path / "stopped", log=said.append)
    assert "pretrain: resuming after epoch 1 of 2" in said and len(record["epochs"]) == 2
    whole, resumed = (load_file(str(tmp_path / name / "encoder.safetensors")) for name in ("whole", "stopped"))
    assert whole.keys() == resumed.keys()
    assert all(torch.equal(whole[name], resumed[name]) for name in whole)
    def interrupt_in_the_first_epoch(message: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # before any epoch was saved: the same call starts afresh
        pretrain_encoder(texts, settings, tmp_path / "early", log=interrupt_in_the_first_epoch)
    assert len(pretrain_encoder(texts, settings, tmp_path / "early", log=quiet)["epochs"]) == 2
    said.clear()
    written = (tmp_path / "whole" / "encoder.safetensors").stat().st_mtime_ns
    pretrain_encoder(texts, settings, tmp_path / "whole", log=said.append)
    # A finished pretraining is not tokenised, trained or written again...
    assert said == [f"pretrain: {tmp_path / 'whole'} has pretrained all 2 epochs already; nothing to do"]
    assert (tmp_path / "whole" / "encoder.safetensors").stat().st_mtime_ns == written
    # ...unless what it published is incomplete: then it is published again from the checkpoint.
    published = json.loads((tmp_path / "whole" / "pretrain.json").read_text())
    (tmp_path / "whole" / "pretrain.json").write_text("{")
    said.clear()
    assert pretrain_encoder(texts, settings, tmp_path / "whole", log=said.append) == published
    assert json.loads((tmp_path / "whole" / "pretrain.json").read_text()) == published
    assert any("has pretrained all 2 epochs already; nothing to do" in line for line in said)
    with pytest.raises(RunDirError, match=r"holds a pretraining of other settings \(lr: 0.001 there, 0.0001 here\)"):
        pretrain_encoder(texts, PretrainSettings(**{**vars(settings), "lr": 1e-4}), tmp_path / "whole", log=quiet)
    with pytest.raises(RunDirError, match="holds a pretraining of other texts"):  # however alike they are in size
        pretrain_encoder([text.replace("w", "v") for text in texts], settings, tmp_path / "whole", log=quiet)
    with pytest.raises(RunDirError, match="holds a pretraining of other texts"):  # or in their bytes
        pretrain_encoder([f"{a}\n{b}" for a, b in zip(texts[::2], texts[1::2])], settings, tmp_path / "whole",
                         log=quiet)
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(1)}, str(tmp_path / "whole" / "checkpoint.safetensors"))
    with pytest.raises(RunDirError, match="not a checkpoint of `attnclf pretrain`"):
        pretrain_encoder(texts, settings, tmp_path / "whole", log=quiet)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "tokenizer.json").write_text("{}")
    with pytest.raises(RunDirError, match="holds other files and no pretraining; choose an empty or new --output"):
        pretrain_encoder(texts, settings, tmp_path / "run", log=quiet)
    assert (tmp_path / "run" / "tokenizer.json").read_text() == "{}"


def test_init_from_copies_the_encoder_and_embedding_rows_of_shared_words(tmp_path):
    pretrain_encoder(cyclic_corpus(), PretrainSettings(model_config=SMALL, max_len=16, min_frequency=1, epochs=1,
                                                       sampled_words=32), tmp_path / "p", log=quiet)
    pretrained = load_file(str(tmp_path / "p" / "encoder.safetensors"))
    theirs = Tokenizer.load(tmp_path / "p" / "tokenizer.json", TokenizerConfig(kind="word")).backend.get_vocab()
    tokenizer = Tokenizer.train(["w3 w4 unseen words here"] * 3, TokenizerConfig(kind="word", min_frequency=1))
    ours = tokenizer.backend.get_vocab()
    torch.manual_seed(0)
    model = build_model("self-attn", vocab_size=tokenizer.vocab_size, num_classes=2, max_len=8,
                        nb_ngram_buckets=64, **SMALL)
    before = model.token_embedding.weight.detach().clone()
    assert load_pretrained(model, tokenizer, tmp_path / "p") == 2  # w3 and w4
    state = model.state_dict()
    copied = [name for name in pretrained if name.startswith(("encoder.", "positions."))]
    assert any(name.startswith("positions.") for name in copied)  # learned positions, their first 8 rows
    for name in copied:
        assert torch.equal(state[name], pretrained[name][: state[name].shape[0]]), name
    table = pretrained["token_embedding.weight"]
    for word in ("w3", "w4"):
        assert torch.equal(model.token_embedding.weight[ours[word]], table[theirs[word]])
    for word in ("unseen", "words"):
        assert torch.equal(model.token_embedding.weight[ours[word]], before[ours[word]])
    for field, value in (("d_model", 32), ("heads", 4), ("layers", 2), ("ff_dim", 64), ("positional", "sinusoidal"),
                         ("embedding_norm", True), ("attention_window", 4)):
        other = build_model("self-attn", vocab_size=tokenizer.vocab_size, num_classes=2, max_len=8,
                            **{**SMALL, field: value})
        with pytest.raises(AttnclfError, match=f"{field}={SMALL.get(field, 0 if field == 'attention_window' else False)!r}, "
                                               f"but this model has {field}={value!r}; train with --set {field}="):
            load_pretrained(other, tokenizer, tmp_path / "p")
    bpe = Tokenizer.train(["w3 w4 unseen words here"] * 3, TokenizerConfig(kind="bpe", min_frequency=1))
    with pytest.raises(AttnclfError, match="^[^ ]+ was pretrained on word tokens with the default cleaning, but this "
                                           "run reads bpe tokens with the default cleaning: its embedding would meet "
                                           "other tokens; train with --tokenizer word$"):
        load_pretrained(model, bpe, tmp_path / "p")
    longer = build_model("self-attn", vocab_size=tokenizer.vocab_size, num_classes=2, max_len=32, **SMALL)
    with pytest.raises(AttnclfError, match="positions for 16 tokens, but this model reads 32; train with --max-len 16"):
        load_pretrained(longer, tokenizer, tmp_path / "p")


def test_word_vectors_seed_the_embedding_and_stay_fixed(tmp_path):
    words = [f"w{i}" for i in range(24)]
    vectors = WordVectors(words, np.random.default_rng(0).normal(size=(24, 16)).astype(np.float32))
    vectors.save(tmp_path / "v.vec")
    settings = PretrainSettings(model_config=SMALL, max_len=16, min_frequency=1, embeddings=str(tmp_path / "v.vec"),
                                embeddings_std=2.0, sampled_words=16)
    pretrain_encoder(cyclic_corpus(), settings, tmp_path / "p", log=quiet)
    table = load_file(str(tmp_path / "p" / "encoder.safetensors"))["token_embedding.weight"]
    vocab = Tokenizer.load(tmp_path / "p" / "tokenizer.json", TokenizerConfig(kind="word")).backend.get_vocab()
    scaled = vectors.vectors * (2.0 / vectors.vectors.std())
    for word in ("w0", "w7", "w23"):
        torch.testing.assert_close(table[vocab[word]], torch.from_numpy(scaled[vectors.index[word]]))
    with pytest.raises(DataError, match="the word vectors have 16 dimensions but the model embeds tokens in 32"):
        pretrain_encoder(cyclic_corpus(), PretrainSettings(**{**vars(settings), "model_config": {**SMALL, "d_model": 32}}),
                         tmp_path / "wider", log=quiet)
    assert not (tmp_path / "wider").exists()  # refused before the folder was made


def test_pretrain_then_train_from_it_on_the_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative --init-from is recorded absolute
    fixed = []
    monkeypatch.setattr(device, "fix_mmap_threshold", lambda: fixed.append(True))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(cyclic_corpus()) + "\n", encoding="utf-8")
    pretrained = tmp_path / "pretrained"
    assert main(["pretrain", "--dataset", "demo", "--file", str(corpus), "--output", "pretrained", "--max-len",
                 "32", "--min-frequency", "1", "--epochs", "1", "--threads", "1", *SMALL_FLAGS]) == 0
    captured = capsys.readouterr()
    record = json.loads((pretrained / "pretrain.json").read_text())
    assert captured.out == (f"pretrained on {record['tokens']:,} tokens, final loss {record['epochs'][-1]['loss']}: "
                            f"pretrained (`attnclf train --init-from pretrained`)\n")
    assert "4,400 texts" in captured.err  # demo's 4,000 training texts and the file's 400 lines
    assert fixed == [True]  # the command keeps its heap from growing epoch by epoch
    run = tmp_path / "run"
    command = ["train", "--dataset", "demo", "--epochs", "1", "--max-len", "32", "--max-train-examples", "200",
               "--output", str(run), "--no-report", "--threads", "1", *SMALL_FLAGS]
    assert main(command + ["--init-from", "pretrained"]) == 0
    assert "init-from: encoder from" in capsys.readouterr().err
    settings = json.loads((run / "config.json").read_text())["settings"]
    assert settings["init_from"] == str(pretrained) and settings["embeddings"] is None
    assert main(command + ["--resume", "--init-from", str(tmp_path)]) == 2
    assert "drop --init-from or give its own" in capsys.readouterr().err
    assert main(command + ["--resume", "--init-from", str(pretrained)]) == 0  # its own: continues its checkpoint
    assert "init-from: encoder from" not in capsys.readouterr().err
    assert main(["refit", str(run), "--threads", "1"]) == 0  # retrains from the same start
    assert "init-from: encoder from" in capsys.readouterr().err
    assert json.loads((tmp_path / "run-refit" / "config.json").read_text())["settings"]["init_from"] == str(pretrained)
    assert main(["pretrain", "--dataset", "demo", "--file", str(corpus), "--output", "pretrained", "--max-len",
                 "32", "--min-frequency", "1", "--epochs", "2", "--threads", "1", *SMALL_FLAGS]) == 2
    assert "holds a pretraining of other settings (epochs: 1 there, 2 here)" in capsys.readouterr().err
    (pretrained / "encoder.safetensors").write_bytes((pretrained / "encoder.safetensors").read_bytes()[:-4] + b"    ")
    assert main(["refit", str(run), "--output", str(tmp_path / "again")]) == 2
    assert "which has changed since (pretrained further, or replaced)" in capsys.readouterr().err



def test_pretrain_quiet_leaves_stderr_to_warnings_and_errors_as_train_quiet_does(tmp_path, capsys, monkeypatch):
    # pretrain had no --quiet (train, refit, demo, compare and ablate do): its progress could not be silenced.
    monkeypatch.setattr(device, "fix_mmap_threshold", lambda: None)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(cyclic_corpus(40)) + "\n", encoding="utf-8")
    command = ["pretrain", "--file", str(corpus), "--max-len", "16", "--min-frequency", "1", "--epochs", "1",
               "--threads", "1", *SMALL_FLAGS]
    assert main([*command, "--output", str(tmp_path / "loud")]) == 0
    assert "pretrain: 40 texts" in capsys.readouterr().err
    assert main([*command, "--output", str(tmp_path / "quiet"), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "final loss" in captured.out
    assert (tmp_path / "quiet" / "encoder.safetensors").is_file()


def test_pretrain_takes_a_device_as_train_does_and_on_the_cpu_pretrains_the_same_bytes(tmp_path, capsys,
                                                                                        monkeypatch):
    # It had no --device and ran on the CPU whatever the machine had; `--device cpu` and the default (auto, which
    # finds no GPU here) must pretrain the same encoder, and a GPU the machine lacks is one line before any text is
    # read or folder made.
    import attnclf.data.registry

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # (auto: the CPU, as on this machine)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(cyclic_corpus(120)) + "\n", encoding="utf-8")
    argv = ["pretrain", "--file", str(corpus), "--max-len", "16", "--min-frequency", "1", "--epochs", "2",
            "--threads", "1", *SMALL_FLAGS]
    assert main([*argv, "--output", str(tmp_path / "auto")]) == 0
    assert main([*argv, "--output", str(tmp_path / "cpu"), "--device", "cpu"]) == 0
    for name in ("encoder.safetensors", "tokenizer.json"):
        assert (tmp_path / "auto" / name).read_bytes() == (tmp_path / "cpu" / name).read_bytes(), name
    auto, cpu = (json.loads((tmp_path / run / "pretrain.json").read_text()) for run in ("auto", "cpu"))
    assert [epoch["loss"] for epoch in auto["epochs"]] == [epoch["loss"] for epoch in cpu["epochs"]]
    assert auto["device"] == cpu["device"] == "cpu"  # (where it pretrained, as a run records it)
    capsys.readouterr()
    monkeypatch.setattr(attnclf.data.registry, "unlabelled_corpus", lambda *args, **kwargs: pytest.fail("read"))
    assert main(["pretrain", "--dataset", "imdb", "--output", str(tmp_path / "gpu"), "--device", "cuda:1"]) == 2
    assert capsys.readouterr().err == "attnclf: error: device cuda:1 asked for, but no CUDA device is available\n"
    assert not (tmp_path / "gpu").exists()
    with pytest.raises(SystemExit):  # (argparse's one line, as train's)
        main(["pretrain", "--dataset", "imdb", "--output", str(tmp_path / "gpu"), "--device", "gpu"])
    assert "device must be auto, cpu, cuda, cuda:N (N counting from 0) or mps, not 'gpu'" in capsys.readouterr().err


def test_pretrain_encoder_takes_a_device_by_name_or_as_a_torch_device(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    settings = PretrainSettings(model_config=SMALL, max_len=16, min_frequency=1, epochs=1, batch_size=32,
                                sampled_words=32)
    texts = cyclic_corpus(64)
    by_name = pretrain_encoder(texts, settings, tmp_path / "named", log=quiet, device="cpu")
    as_device = pretrain_encoder(texts, settings, tmp_path / "device", log=quiet, device=torch.device("cpu"))
    assert by_name["epochs"][0]["loss"] == as_device["epochs"][0]["loss"]
    with pytest.raises(AttnclfError, match="^device cuda:0 asked for, but no CUDA device is available$"):
        pretrain_encoder(texts, settings, tmp_path / "gpu", log=quiet, device=torch.device("cuda", 0))
    assert not (tmp_path / "gpu").exists()

@pytest.mark.parametrize("args, message", [
    (["--embeddings", "{tmp}/v.vec"], "--init-from brings the token embedding its encoder was pretrained with"),
    (["--model", "bilstm-attn"], "--init-from starts self-attn models only"),
    (["--set", "d_model=32"], "pretrained an encoder with d_model=16, but this model has d_model=32"),
    (["--set", "positional=learned", "--max-len", "65"], "learned positions for 64 tokens, but this model reads 65"),
    (["--tokenizer", "bpe"], "pretrained on word tokens with the default cleaning, but this run reads bpe tokens with "
                             "the default cleaning: its embedding would meet other tokens; train with --tokenizer word\n"),
    (["--no-lowercase"], "but this run reads word tokens with cleaning lowercase=False: its embedding would meet other "
                         "tokens; train without --no-lowercase\n"),
])
def test_init_from_errors_are_one_line_and_write_no_run(tmp_path, capsys, args, message):
    pretrain_encoder(cyclic_corpus(50), PretrainSettings(model_config=SMALL, max_len=64, min_frequency=1,
                                                         sampled_words=16), tmp_path / "p", log=quiet)
    output = tmp_path / "run"
    flags = [] if "--model" in args else [arg for key, value in SMALL.items() if f"{key}=" not in " ".join(args)
                                          for arg in ("--set", f"{key}={value}")]
    assert main(["train", "--dataset", "demo", "--init-from", str(tmp_path / "p"), "--output", str(output),
                 *flags, *[a.format(tmp=tmp_path) for a in args]]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not output.exists()


def test_a_pretraining_begun_before_unicode_nfc_and_split_cjk_is_continued_by_its_own_command(tmp_path, monkeypatch):
    # Its checkpoint's tokenizer cleaning lacks both settings. The same command refused it as "a pretraining of another
    # tokenizer" and said to rerun its own command (it was; pretrain has no flag for either), finished or not: it
    # continues reading texts as it began, unsplit, and ends where one uninterrupted pretraining then would have.
    from dataclasses import asdict, replace

    from attnclf.text.cleaning import CleaningConfig
    from attnclf.training import pretrain

    texts = [*cyclic_corpus(100), *["这个产品很好", "电影很差", "质量很好"] * 10]
    settings = PretrainSettings(model_config=SMALL, max_len=16, min_frequency=1, epochs=2, batch_size=32,
                                sampled_words=32)
    def interrupt_after_the_first_epoch(message: str) -> None:
        if message.startswith("pretrain: epoch 1/2"):
            raise KeyboardInterrupt

    with monkeypatch.context() as edition_before:  # (what it read and recorded: no such settings)
        edition_before.setattr(pretrain, "TOKENIZER", replace(pretrain.TOKENIZER, cleaning=CleaningConfig(
            unicode_nfc=False, split_cjk=False)))
        edition_before.setattr(TokenizerConfig, "to_dict", lambda self: asdict(self) | {
            "cleaning": self.cleaning.keyed()})
        pretrain_encoder(texts, settings, tmp_path / "whole", log=quiet)
        with pytest.raises(KeyboardInterrupt):
            pretrain_encoder(texts, settings, tmp_path / "stopped", log=interrupt_after_the_first_epoch)
    said = []
    record = pretrain_encoder(texts, settings, tmp_path / "stopped", log=said.append)
    assert "pretrain: resuming after epoch 1 of 2" in said and "split_cjk" not in record["tokenizer"]["cleaning"]
    whole, resumed = (load_file(str(tmp_path / name / "encoder.safetensors")) for name in ("whole", "stopped"))
    assert all(torch.equal(whole[name], resumed[name]) for name in whole)
    said.clear()
    pretrain_encoder(texts, settings, tmp_path / "whole", log=said.append)
    assert said == [f"pretrain: {tmp_path / 'whole'} has pretrained all 2 epochs already; nothing to do"]


@pytest.mark.parametrize("setting, adopted", [
    ("unicode_nfc", "unicode_nfc=False, split_cjk=False, turkish_i=False"),
    ("split_cjk", "split_cjk=False, turkish_i=False"), ("turkish_i", "turkish_i=False")])
def test_an_encoder_pretrained_before_a_cleaning_setting_is_started_from_by_the_command_that_started_from_it(
        tmp_path, capsys, recorded_before, setting, adopted):
    # Its record's cleaning lacks the setting (and those added after it): yesterday's command, no flag for them, was
    # refused ("train with --no-unicode-nfc --no-split-cjk"). It reads texts as the encoder was pretrained, says so in
    # a note, and its run records the values it used; a flag that asks for other tokens is refused still.
    pretrain_encoder(cyclic_corpus(50), PretrainSettings(model_config=SMALL, max_len=64, min_frequency=1,
                                                         sampled_words=16), tmp_path / "p", log=quiet)
    recorded_before(tmp_path / "p", setting)
    command = ["train", "--dataset", "demo", "--init-from", str(tmp_path / "p"), "--epochs", "1", "--max-len", "32",
               "--max-train-examples", "200", "--no-report", "--threads", "1", "--output", str(tmp_path / "run"),
               *SMALL_FLAGS]
    assert main(command) == 0
    err = capsys.readouterr().err
    assert f"note: {tmp_path / 'p'} was pretrained before {setting}: this run reads texts as it was, {adopted}\n" \
        in err and "init-from: encoder from" in err
    cleaning = json.loads((tmp_path / "run" / "config.json").read_text())["settings"]["tokenizer"]["cleaning"]
    from attnclf.text.cleaning import CLEANING_ADDED

    added = list(CLEANING_ADDED)
    # (the setting and those added after it whose default is not the value they had before: social_media's is)
    adopted_names = [name for name in added[added.index(setting):] if name != "social_media"]
    assert {name: cleaning[name] for name in added} == {name: name not in adopted_names and name != "social_media"
                                                        for name in added}
    assert main([*command, "--resume"]) == 0  # its own command continues it
    assert "was pretrained before" not in capsys.readouterr().err  # (said as it began: its config records it)
    typed = [f"--no-{name.replace('_', '-')}" for name in adopted_names]  # (the encoder's values)
    assert main([*command[:-len(SMALL_FLAGS) - 2], "--output", str(tmp_path / "typed"), *typed, *SMALL_FLAGS]) == 0
    assert "note: " not in capsys.readouterr().err
    assert main([*command[:-len(SMALL_FLAGS) - 2], "--output", str(tmp_path / "refused"), "--no-lowercase",
                 *SMALL_FLAGS]) == 2
    assert capsys.readouterr().err.endswith(f"with cleaning lowercase=False, {adopted}: its embedding would meet "
                                            f"other tokens; train without --no-lowercase\n")
    assert not (tmp_path / "refused").exists()


@pytest.mark.parametrize("args, message", [
    # Each setting named by its flag, as train names its own
    (["--lr", "nan"], "error: --lr must be positive and finite, got nan"),
    (["--epochs", "0"], "error: --epochs must be a whole number, at least 1, got 0"),
    (["--max-len", "1"], "error: --max-len must be a whole number, at least 2, got 1"),
    (["--max-len", "0"], "error: --max-len must be a whole number, at least 2, got 0"),  # (not the recipe's, unsaid)
    # checks.check_seed, as train's and faithfulness's seeds: both bounds, in one wording
    (["--seed", "-1"], "error: --seed must be at least 0 and below 4294967296, got -1"),
    (["--seed", "4294967296"], "error: --seed must be at least 0 and below 4294967296, got 4294967296"),
    (["--embeddings", "{tmp}/v.vec", "--embeddings-std", "0"],
     "error: --embeddings-std must be positive and finite, got 0.0"),
    (["--embeddings-std", "2"], "--embeddings-std needs --embeddings FILE"),
    (["--set", "heads=3"], "heads"),
    (["--recipe", "sst2-sentencez"], "--recipe 'sst2-sentencez': no dataset has a recipe by that name"),
    (["--embeddings", "{tmp}/missing.vec"], "no such file of word vectors"),
    (["--file", "{tmp}/empty.txt"], "no text to pretrain on"),
    (["--file", "{tmp}/words.txt", "--min-frequency", "1"], "holds two words: nothing to pretrain on"),
    (["--dataset", "demo", "--min-frequency", "100000"], "no word seen at least 100000 time"),
])
def test_pretrain_errors_are_one_line_and_leave_no_folder(tmp_path, capsys, args, message):
    (tmp_path / "v.vec").write_text("w1 1 2\n", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "words.txt").write_text("one\nword\neach\n", encoding="utf-8")
    output = tmp_path / "out"
    source = [] if "--file" in args or "--dataset" in args else ["--dataset", "demo"]
    assert main(["pretrain", *source, "--output", str(output), *[a.format(tmp=tmp_path) for a in args]]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not output.exists()


def test_a_seed_from_python_is_checked_as_trains_is(tmp_path):
    # (pretrain had a seed check of its own, which echoed a value whole and said "at least 0" of 2 ** 32)
    with pytest.raises(AttnclfError) as refused:
        pretrain_encoder(cyclic_corpus(10), PretrainSettings(seed="s" * 100_000), tmp_path / "p", log=quiet)
    assert str(refused.value) == f"seed must be a whole number, got '{'s' * 39}..."
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("fields, message", [
    # Compared unchecked, these failed on a TypeError or an OverflowError; True trained at a learning rate of 1.
    ({"lr": "0.01"}, "lr must be a number, got '0.01'"),
    ({"lr": True}, "lr must be a number, got True"),
    ({"mask_rate": None}, "mask_rate must be a number, got None"),
    ({"lr": 10 ** 400}, "lr must be positive and finite, got inf"),
    ({"epochs": "1" * 1000}, f"epochs must be a whole number, at least 1, got '{'1' * 39}..."),
])
def test_pretrain_settings_refuse_what_is_not_a_number_in_one_line(fields, message):
    with pytest.raises(AttnclfError) as refused:
        PretrainSettings(**fields)
    assert str(refused.value) == message


def test_pretrain_settings_hold_plain_numbers_and_record_no_namer():
    # numpy's numbers (as a grid gives): a seed failed in torch ("an integer is required"); pretrain.json takes none.
    from dataclasses import asdict

    settings = PretrainSettings(seed=np.int64(3), lr=np.float32(0.5), epochs=np.int32(2), named=lambda name: name)
    assert [type(settings.seed), type(settings.lr), type(settings.epochs)] == [int, float, int]
    assert "named" not in asdict(settings)


def test_a_max_len_too_large_to_train_is_refused_before_the_texts_are_read(tmp_path, capsys, monkeypatch):
    from attnclf.models import memory

    # 500,000 learned positions at d_model 128: 256 MB of weights fit this pretend 400 MB machine, training's four
    # copies (weights, gradients, two AdamW moments) do not; `train` refused so already, pretrain ran out mid-epoch.
    monkeypatch.setattr(memory, "machine_memory", lambda: 400 * 10 ** 6)
    output = tmp_path / "out"
    assert main(["pretrain", "--dataset", "demo", "--max-len", "500000", "--set", "d_model=128", "--set",
                 "positional=learned", "--epochs", "1", "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnclf: error: model 'self-attn' with max_len 500,000 needs at least ") and \
        err.endswith(" GB for its weights, gradients and optimiser state, more than this machine's 0.4 GB; lower "
                     "max_len (--max-len)\n")
    assert not output.exists()


def test_a_vocabulary_cap_beyond_the_memory_pretrains_when_the_words_fit(tmp_path):
    # --vocab-size caps the vocabulary (10**9: keep every word); the tokenizer finds 26 here. Sizing the model by
    # the cap, 4 TB, refused a pretraining that takes kilobytes.
    record = pretrain_encoder(cyclic_corpus(40), PretrainSettings(model_config=SMALL, max_len=8, vocab_size=10 ** 9),
                              tmp_path / "enc", log=quiet)
    assert record["words"] == 26


def test_a_vocabulary_too_large_to_pretrain_is_refused_once_the_tokenizer_has_counted_it(tmp_path, monkeypatch):
    from attnclf.models import memory

    # 200,000 words at width 128: 102 MB of embedding, four times that to train, on a pretend 200 MB machine (the
    # flags alone, sized with the fewest words a tokenizer has, fit).
    monkeypatch.setattr(memory, "machine_memory", lambda: 200 * 10 ** 6)
    texts = [" ".join(f"w{i}x{j}" for j in range(1000)) for i in range(200)]
    output = tmp_path / "enc"
    with pytest.raises(AttnclfError, match=r"^model 'self-attn' with vocab_size 200,002 needs at least 0\.4 GB for its "
                                           r"weights, gradients and optimiser state, more than this machine's 0\.2 GB; "
                                           r"lower vocab_size \(--vocab-size\)$"):
        pretrain_encoder(texts, PretrainSettings(max_len=8, vocab_size=10 ** 6, min_frequency=1), output, log=quiet)
    assert not output.exists()


def test_init_from_a_folder_that_is_no_pretraining_is_one_line(tmp_path, capsys):
    assert main(["train", "--dataset", "demo", "--init-from", str(tmp_path), "--output", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "not a pretrained encoder" in err and err.count("\n") == 1


def test_init_from_a_file_is_one_line_naming_what_it_is_not(tmp_path, capsys):
    # A file given for the folder: read_json met NotADirectoryError ("FILE/pretrain.json: Not a directory").
    data = tmp_path / "train.csv"
    data.write_text("text,label\ngood,pos\nbad,neg\n")
    assert main(["train", "--dataset", "demo", "--init-from", str(data), "--output", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"{data}: not a pretrained encoder" in err and err.count("\n") == 1


def test_the_recipe_named_is_the_model_pretrained_so_its_runs_can_start_from_it(tmp_path, capsys):
    from attnclf.models import config_for
    from attnclf.recipes import recipe_for
    from attnclf.training.pretrain import check_pretrained

    folder = tmp_path / "p"
    assert main(["pretrain", "--dataset", "demo", "--recipe", "sst2-sentences", "--min-frequency", "1",
                 "--output", str(folder), "--threads", "1"]) == 0
    recipe = recipe_for("sst2-sentences")
    run_config = config_for("self-attn", max_len=recipe["tokenizer"]["max_len"], **recipe["model_config"])
    check_pretrained("self-attn", run_config, folder, TokenizerConfig(kind="word"))  # what train --dataset builds
    demo = recipe_for("demo")
    with pytest.raises(AttnclfError, match="ff_dim=256, but this model has ff_dim=512"):  # demo's model is another
        check_pretrained("self-attn", config_for("self-attn", max_len=64, **demo["model_config"]), folder)


def test_init_from_names_every_setting_to_change_in_one_line(tmp_path):
    # One refusal per setting made a recipe's pretraining (d_model, ff_dim, positional) three failed runs.
    from attnclf.models import config_for
    from attnclf.training.pretrain import check_pretrained

    pretrain_encoder(cyclic_corpus(50), PretrainSettings(model_config=SMALL, max_len=16, min_frequency=1,
                                                         sampled_words=16), tmp_path / "p", log=quiet)
    other = config_for("self-attn", max_len=64, **{**SMALL, "d_model": 32, "ff_dim": 64})
    with pytest.raises(AttnclfError) as caught:
        check_pretrained("self-attn", other, tmp_path / "p")
    assert str(caught.value) == (
        f"{tmp_path / 'p'} pretrained an encoder with d_model=16, ff_dim=32, but this model has d_model=32, ff_dim=64; "
        f"it learned positions for 16 tokens, but this model reads 64; "
        f"train with --set d_model=16 --set ff_dim=32 --max-len 16 (or fewer)")


def test_a_new_seed_refuses_a_changed_pretraining_and_finished_seeds_do_not_need_it(tmp_path, capsys):
    pretrain_encoder(cyclic_corpus(50), PretrainSettings(model_config=SMALL, max_len=64, min_frequency=1,
                                                         sampled_words=16), tmp_path / "p", log=quiet)
    command = ["train", "--dataset", "demo", "--init-from", str(tmp_path / "p"), "--epochs", "1",
               "--max-train-examples", "100", "--output", str(tmp_path / "ens"), "--no-report", "--threads", "1",
               *SMALL_FLAGS]
    assert main(command + ["--seeds", "0", "1"]) == 0
    pretrain_encoder(cyclic_corpus(60), PretrainSettings(model_config=SMALL, max_len=64, min_frequency=1,
                                                         sampled_words=16), tmp_path / "p2", log=quiet)
    for name in ("encoder.safetensors", "pretrain.json", "tokenizer.json"):  # the folder now holds another encoder
        (tmp_path / "p" / name).write_bytes((tmp_path / "p2" / name).read_bytes())
    capsys.readouterr()
    assert main(command + ["--seeds", "0", "1", "2", "--resume"]) == 2
    assert "which has changed since (pretrained further, or replaced)" in capsys.readouterr().err
    assert not (tmp_path / "ens" / "seed-2").exists()
    assert main(command + ["--seeds", "0", "1", "--resume"]) == 0


GLIBC_BLOCK_SCRIPT = """
import ctypes
from attnclf.training.device import fix_mmap_threshold

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
libc.free(libc.malloc(20 << 20))  # freeing a mapped 20 MB block raises glibc's dynamic threshold past 5 MB
fixed = fix_mmap_threshold()
mapped = libc.mallinfo2().hblks
block = libc.malloc(5 << 20)
print(fixed, libc.mallinfo2().hblks - mapped)
libc.free(block)
"""


# mallinfo2, which counts mapped blocks, came with glibc 2.33.
GLIBC_COUNTS_BLOCKS = platform.libc_ver()[0] == "glibc" and hasattr(ctypes.CDLL(None), "mallinfo2")


@pytest.mark.skipif(not GLIBC_COUNTS_BLOCKS, reason="the threshold is glibc's; counting mapped blocks needs 2.33")
@pytest.mark.parametrize("tunables, expected", [(None, "True 1"), ("glibc.malloc.mmap_threshold=65536", "False 1")])
def test_a_fixed_mmap_threshold_maps_blocks_of_5_mb_that_glibc_would_take_from_the_heap(tunables, expected):
    # With the environment's own threshold (65 KB here) the function leaves it alone: the block is mapped anyway.
    env = {key: value for key, value in os.environ.items() if key != "GLIBC_TUNABLES"}
    env |= {"GLIBC_TUNABLES": tunables} if tunables else {}
    done = subprocess.run([sys.executable, "-c", GLIBC_BLOCK_SCRIPT], env=env, capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == expected


@pytest.mark.skipif(not GLIBC_COUNTS_BLOCKS, reason="the threshold is glibc's; counting mapped blocks needs 2.33")
def test_without_the_fix_glibc_takes_a_5_mb_block_from_the_heap():  # (so the test above can fail)
    script = GLIBC_BLOCK_SCRIPT.replace("fixed = fix_mmap_threshold()", "fixed = None")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                          env={key: value for key, value in os.environ.items() if key != "GLIBC_TUNABLES"})
    assert done.stdout.strip() == "None 0"


def test_pretraining_on_files_builds_the_file_default_and_an_older_encoder_is_told_its_flags(tmp_path, capsys,
                                                                                            monkeypatch):
    # `train --train-file` builds the file recipe's self-attn (recipes.FILE_SELF_ATTN), so pretraining on files alone
    # builds its encoder, and the run starts from it without flags. One pretrained before, at the general defaults,
    # is refused in one line that gives its widths as the flags to train with.
    from attnclf import recipes

    monkeypatch.setattr(device, "fix_mmap_threshold", lambda: None)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(cyclic_corpus(100)) + "\n", encoding="utf-8")
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("text,label\n" + "".join(f"{text},{'ab'[i % 2]}\n" for i, text in enumerate(cyclic_corpus(40))))
    common = ["--min-frequency", "1", "--epochs", "1", "--threads", "1"]
    assert main(["pretrain", "--file", str(corpus), "--max-len", "16", *common, "--output", str(tmp_path / "p")]) == 0
    encoder = json.loads((tmp_path / "p" / "pretrain.json").read_text())["model_config"]
    assert {name: encoder[name] for name in ("d_model", "ff_dim", "positional")} == \
        {"d_model": 64, "ff_dim": 256, "positional": "sinusoidal"}
    train = ["train", "--train-file", str(labelled), *common, "--max-len", "16", "--no-report"]
    assert main([*train, "--init-from", str(tmp_path / "p"), "--output", str(tmp_path / "run")]) == 0
    assert "init-from: encoder from" in capsys.readouterr().err
    with monkeypatch.context() as before:
        before.setattr(recipes, "FILE_RECIPES", recipes.FILE_RECIPES[:1])  # (before any file recipe)
        assert main(["pretrain", "--file", str(corpus), "--max-len", "16", *common, "--output",
                     str(tmp_path / "old")]) == 0
    capsys.readouterr()
    # Its own command, given again (after an interruption: the same call continues it), goes on as it began.
    assert main(["pretrain", "--file", str(corpus), "--max-len", "16", *common, "--output", str(tmp_path / "old")]) == 0
    assert "has pretrained all 1 epochs already; nothing to do" in capsys.readouterr().err
    # The recipe's values typed as flags are flags, not the recipe: another pretraining than the one begun there.
    assert main(["pretrain", "--file", str(corpus), "--max-len", "16", *common, "--set", "d_model=64", "--set",
                 "positional=sinusoidal", "--output", str(tmp_path / "old")]) == 2
    assert f"{tmp_path / 'old'} holds a pretraining of other settings" in capsys.readouterr().err
    assert main([*train, "--init-from", str(tmp_path / "old"), "--output", str(tmp_path / "refused")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"attnclf: error: {tmp_path / 'old'} pretrained an encoder with d_model=128, ff_dim=512, positional='learned', "
        f"but this model has d_model=64, ff_dim=256, positional='sinusoidal'; train with --set d_model=128 "
        f"--set ff_dim=512 --set positional=learned")
    assert not (tmp_path / "refused").exists()


def test_pretraining_on_files_cuts_its_own_pieces_whatever_the_file_recipe_reads(tmp_path, capsys, monkeypatch):
    # The file recipe's tokenizer part is the classifier's: a pretraining on files cuts pieces of PretrainSettings'
    # max_len, under every edition of the recipe, so one begun under the model-only recipe goes on with its command,
    # and a run reading the recipe's tokens starts from it (sinusoidal positions have no length to match).
    from attnclf import recipes
    from attnclf.recipes import FILE_SELF_ATTN_TOKENIZER

    monkeypatch.setattr(device, "fix_mmap_threshold", lambda: None)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(cyclic_corpus(100)) + "\n", encoding="utf-8")
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("text,label\n" + "".join(f"{text},{'ab'[i % 2]}\n" for i, text in enumerate(cyclic_corpus(40))))
    pretrain = ["pretrain", "--file", str(corpus), "--min-frequency", "1", "--epochs", "1", "--threads", "1",
                "--output", str(tmp_path / "p")]
    with monkeypatch.context() as before:
        before.setattr(recipes, "FILE_RECIPES", recipes.FILE_RECIPES[:2])  # (the model-only recipe: the latest then)
        assert main(pretrain) == 0
    record = json.loads((tmp_path / "p" / "pretrain.json").read_text())
    assert record["settings"]["max_len"] == PretrainSettings.max_len
    encoder = ("d_model", "ff_dim", "positional")
    assert {name: record["model_config"][name] for name in encoder} == \
        {name: recipes.FILE_SELF_ATTN[name] for name in encoder}
    capsys.readouterr()
    assert main(pretrain) == 0
    assert "has pretrained all 1 epochs already; nothing to do" in capsys.readouterr().err
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(labelled), "--min-frequency", "1", "--epochs", "1", "--threads", "1",
                 "--no-report", "--init-from", str(tmp_path / "p"), "--output", str(run)]) == 0
    assert "init-from: encoder from" in capsys.readouterr().err
    assert json.loads((run / "config.json").read_text())["settings"]["tokenizer"]["max_len"] == \
        FILE_SELF_ATTN_TOKENIZER["max_len"]


@pytest.mark.parametrize("edit, message", [
    (lambda w: w.update({"encoder.0.extra": torch.zeros(2)}), "holds encoder.0.extra, which the model lacks"),
    (lambda w: w.update({k: v.to(torch.int64) for k, v in w.items() if k.startswith("encoder.")}),
     r"encoder\..* is torch.int64 in the file, torch.float32 in the model"),
    (lambda w: w.update({k: v[:, :3] for k, v in w.items() if k.startswith("encoder.") and v.ndim == 2}),
     r"encoder\..* is \(\d+, 3\) in the file, \(\d+, \d+\) in the model"),
    (lambda w: w.update({"token_embedding.weight": w["token_embedding.weight"][:3]}),
     r"token_embedding.weight is \(3, 16\) in the file: rows for the \d+ words of its tokenizer.json"),
    (lambda w: w.pop("token_embedding.weight"), "it lacks token_embedding.weight$"),
    (lambda w: [w.pop(k) for k in [k for k in w if k.startswith("encoder.")][:2]],
     r"it lacks encoder\.\S+ and 1 more the model has$"),
])
def test_init_from_an_encoder_file_out_of_shape_is_one_line_naming_it(tmp_path, edit, message):
    """An encoder folder may come from elsewhere: weights of another dtype were cast without a word, and a tensor the
    model lacks, or of another shape, was a KeyError or a RuntimeError from torch."""
    from safetensors.torch import save_file

    pretrain_encoder(cyclic_corpus(), PretrainSettings(model_config=SMALL, max_len=16, min_frequency=1, epochs=1,
                                                       sampled_words=32), tmp_path / "p", log=quiet)
    weights = load_file(str(tmp_path / "p" / "encoder.safetensors"))
    edit(weights)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(tmp_path / "p" / "encoder.safetensors"))
    tokenizer = Tokenizer.train(["w3 w4 unseen words here"] * 3, TokenizerConfig(kind="word", min_frequency=1))
    model = build_model("self-attn", vocab_size=tokenizer.vocab_size, num_classes=2, max_len=8, **SMALL)
    with pytest.raises(RunDirError, match=f"^{tmp_path / 'p' / 'encoder.safetensors'}: {message}"):
        load_pretrained(model, tokenizer, tmp_path / "p")


def stop_after_checkpointing(patch, epoch: int, step: int | None) -> list:
    """Make pretraining stop as Ctrl-C would once its checkpoint of ``step`` within ``epoch`` is written (step None:
    the epoch's end); the list fills with every checkpoint's (epoch, step)."""
    from attnclf.training import pretrain

    save, saved = pretrain._save_checkpoint, []

    def stopped_after(*args, position=None, **kwargs):
        save(*args, position=position, **kwargs)
        finished = len(args[1]["epochs"])  # (the record: the epochs finished)
        saved.append((finished + 1, position["step"]) if position else (finished, None))
        if saved[-1] == (epoch, step):
            raise KeyboardInterrupt

    patch.setattr(pretrain, "_save_checkpoint", stopped_after)
    return saved


@pytest.mark.parametrize("epoch, step", [(1, 2), (2, 5)])
def test_a_pretraining_stopped_within_an_epoch_resumes_from_the_next_step_to_the_same_bytes(epoch, step, tmp_path,
                                                                                            monkeypatch):
    """An epoch over 50,000 reviews takes hours, and a stop before its end kept nothing: a checkpoint every
    checkpoint_minutes within it (here after every step) resumes to the very encoder of a call never stopped."""
    from attnclf.rundir import file_sha256
    from attnclf.training.pretrain import pretrain_kept

    texts = cyclic_corpus(200)  # (200 pieces: 7 steps of 32)
    settings = PretrainSettings(model_config=SMALL, max_len=16, min_frequency=1, epochs=2, batch_size=32,
                                sampled_words=32)
    whole = pretrain_encoder(texts, settings, tmp_path / "whole", log=quiet)
    with monkeypatch.context() as patch:
        saved = stop_after_checkpointing(patch, epoch, step)
        with pytest.raises(KeyboardInterrupt):
            pretrain_encoder(texts, settings, tmp_path / "stopped", log=quiet, checkpoint_minutes=1e-9)
    assert saved[:3] == [(1, 1), (1, 2), (1, 3)][: len(saved[:3])] and saved[-1] == (epoch, step)
    assert pretrain_kept(tmp_path / "stopped") == (f"kept step {step} of 7 in epoch {epoch} of 2",
                                                   f"continues from step {step + 1}")
    # What --init-from reads stays the last finished epoch's: a step's weights are not published.
    published = tmp_path / "stopped" / "pretrain.json"
    assert (len(json.loads(published.read_text())["epochs"]) if published.is_file() else 0) == epoch - 1
    said = []
    resumed = pretrain_encoder(texts, settings, tmp_path / "stopped", log=said.append)
    assert f"pretrain: resuming from step {step + 1} of 7 in epoch {epoch} of 2" in said

    def without_times(record):
        return {**record, "epochs": [{k: v for k, v in e.items() if k not in ("seconds", "tokens_per_second")}
                                     for e in record["epochs"]], "device": None}

    assert without_times(resumed) == without_times(whole)
    assert file_sha256(tmp_path / "stopped" / "encoder.safetensors") == \
        file_sha256(tmp_path / "whole" / "encoder.safetensors")
    assert pretrain_kept(tmp_path / "stopped") == ("kept epoch 2 of 2", "has nothing left to do")


def test_the_pretrain_command_with_its_options_stopped_within_an_epoch_resumes_to_the_same_bytes(tmp_path, capsys,
                                                                                               monkeypatch):
    """`attnclf pretrain` with fixed word vectors (whose embedding the optimiser leaves out), a seed, batch size,
    learning rate, vocabulary and model of its own, stopped by Ctrl-C after a checkpoint within epoch 2 (the interval
    a tiny one): the same command again ends with the encoder bytes of one never stopped."""
    from attnclf.rundir import file_sha256
    from attnclf.training.pretrain import pretrain_kept

    words = [f"w{i}" for i in range(24)]
    WordVectors(words, np.random.default_rng(0).normal(size=(24, 16)).astype(np.float32)).save(tmp_path / "v.vec")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(cyclic_corpus(120)) + "\n", encoding="utf-8")
    options = ["--file", str(corpus), "--max-len", "12", "--min-frequency", "1", "--vocab-size", "20", "--epochs",
               "2", "--batch-size", "16", "--lr", "3e-3", "--seed", "4", "--embeddings", str(tmp_path / "v.vec"),
               "--embeddings-std", "2", "--threads", "1", "--quiet", *SMALL_FLAGS, "--set", "dropout=0.2"]
    assert main(["pretrain", *options, "--output", str(tmp_path / "whole")]) == 0
    stopped = ["pretrain", *options, "--output", str(tmp_path / "stopped"), "--checkpoint-minutes", "1e-9"]
    with monkeypatch.context() as patch:
        saved = stop_after_checkpointing(patch, 2, 3)
        assert main(stopped) == 130
    assert saved[-1] == (2, 3)
    # (from its checkpoint, not trained again from the start, which would end with the same bytes)
    assert pretrain_kept(tmp_path / "stopped")[1] == "continues from step 4"
    capsys.readouterr()
    assert main(stopped) == 0
    for name in ("encoder.safetensors", "tokenizer.json"):
        assert file_sha256(tmp_path / "stopped" / name) == file_sha256(tmp_path / "whole" / name), name


def test_pretraining_without_a_terminal_prints_progress_lines_and_checkpoints_every_interval(tmp_path, monkeypatch,
                                                                                           capsys):
    """`nohup attnclf pretrain ... > log 2>&1` showed nothing for hours: the lines train writes, every
    PROGRESS_LINE_SECONDS. By a fake clock, each step takes 100 s."""
    from attnclf.training import pace, pretrain

    now, mask = [0.0], pretrain.mask_tokens

    def a_step_of_100_seconds(*args):
        now[0] += 100.0
        return mask(*args)

    monkeypatch.setattr(pace, "clock", lambda: now[0])
    monkeypatch.setattr(pretrain, "mask_tokens", a_step_of_100_seconds)
    saved = stop_after_checkpointing(monkeypatch, epoch=0, step=0)  # (never stops)
    settings = PretrainSettings(model_config=SMALL, max_len=16, min_frequency=1, epochs=1, batch_size=32,
                                sampled_words=32)
    pretrain_encoder(cyclic_corpus(200), settings, tmp_path / "p", log=quiet, progress=True, checkpoint_minutes=5)
    assert saved == [(1, 3), (1, 6), (1, None)]  # every 300 s, then the epoch's end
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("pretrain epoch 1: step")]
    assert [line.split(" | ")[0] for line in lines] == [f"pretrain epoch 1: step {k} of 7 ({k / 7:.0%})"
                                                        for k in (2, 4, 6)]
    assert lines[0].split(" | ")[1:3] == ["0.3 pieces/s", "3m 20s elapsed, ETA 8m 20s"]
    assert re.fullmatch(r"loss \d+\.\d{4}", lines[0].split(" | ")[3])
    with pytest.raises(AttnclfError, match=r"^checkpoint_minutes must be at least 0, got -1.0$"):
        pretrain_encoder(cyclic_corpus(20), settings, tmp_path / "q", log=quiet, checkpoint_minutes=-1)


def test_an_interrupted_pretrain_says_what_it_kept_and_the_command_that_continues_it(tmp_path, capsys,
                                                                                      monkeypatch):
    import shlex

    monkeypatch.setattr(device, "fix_mmap_threshold", lambda: None)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(cyclic_corpus(200)) + "\n", encoding="utf-8")
    argv = ["pretrain", "--file", str(corpus), "--max-len", "16", "--min-frequency", "1", "--epochs", "2",
            "--batch-size", "32", "--threads", "1", "--quiet", *SMALL_FLAGS, "--output", str(tmp_path / "p")]
    again = shlex.join(["attnclf", *argv])
    with monkeypatch.context() as patch:
        stop_after_checkpointing(patch, 1, 3)
        assert main([*argv, "--checkpoint-minutes", "1e-9"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"attnclf: interrupted; kept step 3 of 7 in epoch 1 of 2: the same command again, "
        f"`{again} --checkpoint-minutes 1e-9`, continues from step 4")
    with monkeypatch.context() as patch:
        stop_after_checkpointing(patch, 1, None)
        assert main(argv) == 130  # (the interval may change as it goes on)
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"attnclf: interrupted; kept epoch 1 of 2: the same command again, `{again}`, continues from epoch 2")
    assert main(argv) == 0
    assert main([*argv[:-1], str(tmp_path / "q"), "--checkpoint-minutes", "-1"]) == 2
    assert capsys.readouterr().err == "attnclf: error: --checkpoint-minutes must be at least 0, got -1.0\n"


def test_init_from_a_pretraining_stopped_in_its_first_epoch_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    # Ctrl-C within the first epoch leaves its checkpoint alone: no folder "that is no pretraining" to write anew.
    monkeypatch.setattr(device, "fix_mmap_threshold", lambda: None)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(cyclic_corpus(200)) + "\n", encoding="utf-8")
    stopped = tmp_path / "p"
    with monkeypatch.context() as patch:
        stop_after_checkpointing(patch, 1, 3)
        assert main(["pretrain", "--file", str(corpus), "--max-len", "16", "--min-frequency", "1", "--batch-size",
                     "32", "--threads", "1", "--quiet", "--checkpoint-minutes", "1e-9", *SMALL_FLAGS,
                     "--output", str(stopped)]) == 130
    capsys.readouterr()
    assert main(["train", "--dataset", "demo", "--init-from", str(stopped), *SMALL_FLAGS,
                 "--output", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == (f"attnclf: error: {stopped} has not finished an epoch of pretraining yet; its "
                                       f"`attnclf pretrain` command, given again, continues it\n")
    assert not (tmp_path / "run").exists()


def test_pretrain_settings_start_from_the_recipe_as_the_command_builds_them(tmp_path):
    # From Python as `attnclf pretrain` builds them: the recipe's model with the caller's overrides on it, and its
    # tokens per piece; for files (no recipe) the file recipe's model and PretrainSettings' own max_len.
    from attnclf.recipes import model_defaults, recipe_for
    from attnclf.training.pretrain import pretrain_settings

    imdb = pretrain_settings(tmp_path / "pretrained", recipe="imdb", overrides={"layers": 1}, epochs=2)
    assert imdb.model_config == model_defaults("imdb") | {"layers": 1}
    assert (imdb.max_len, imdb.epochs) == (recipe_for("imdb")["tokenizer"]["max_len"], 2)
    files = pretrain_settings(tmp_path / "pretrained", max_len=None, lr=None)  # (None: the default, as no flag)
    assert (files.model_config, files.max_len, files.lr) == (model_defaults(None), PretrainSettings.max_len,
                                                             PretrainSettings.lr)
    assert pretrain_settings(tmp_path / "pretrained", recipe="imdb", max_len=32).max_len == 32
    with pytest.raises(AttnclfError, match="^--max-len must be a whole number, at least 2, got 1$"):
        pretrain_settings(tmp_path / "pretrained", max_len=1, named=lambda name: f"--{name.replace('_', '-')}")
    # (the vectors' scale, given without vectors to scale, would pretrain as if it were read)
    with pytest.raises(AttnclfError, match="^embeddings_std needs embeddings FILE$"):
        pretrain_settings(tmp_path / "pretrained", embeddings_std=2.0)


def test_a_recipe_tuned_for_other_models_pretrains_self_attn_with_the_fields_it_has(tmp_path):
    # The toy sets' recipe sets embed_dim (boe, pos-mean, the LSTMs); train's self-attn leaves it, as each model takes
    # the recipe's fields it has. Pretraining, which builds self-attn, refused it: "model 'self-attn' has no config
    # field 'embed_dim'".
    from attnclf.recipes import recipe_for
    from attnclf.training.pretrain import pretrain_settings
    from attnclf.training.settings import DataSettings, settings_for

    assert "embed_dim" in recipe_for("toy-reversal")["model_config"]
    toy = pretrain_settings(tmp_path / "pretrained", recipe="toy-reversal")
    trained = settings_for(DataSettings(dataset="toy-reversal"), "self-attn")
    assert toy.model_config == trained.model_config == {"dropout": 0.0}
    assert main(["pretrain", "--dataset", "toy-reversal", "--epochs", "1", "--min-frequency", "1",
                 "--output", str(tmp_path / "toy"), "--threads", "1", "--quiet"]) == 0


def test_the_closing_line_says_what_was_pretrained_and_how_a_run_starts_from_it():
    from attnclf.training.pretrain import pretrain_summary

    record = {"tokens": 1234567, "epochs": [{"loss": 5.5}, {"loss": 4.25}]}
    assert pretrain_summary(record, "runs/pretrained") == (
        "pretrained on 1,234,567 tokens, final loss 4.25: runs/pretrained "
        "(`attnclf train --init-from runs/pretrained`)")


def test_collect_unlabelled_texts_reads_datasets_and_files_and_names_the_callers_settings(tmp_path):
    # (`pretrain` and `vectors` collected them in the CLI, which Python callers could not reach)
    from attnclf.data.registry import collect_unlabelled_texts, unlabelled_corpus

    notes = tmp_path / "notes.txt"
    notes.write_text("great acting\n\nweak acting\n", encoding="utf-8")
    reviews = tmp_path / "reviews.csv"
    reviews.write_text("review\nA fine film.\n", encoding="utf-8")
    texts = collect_unlabelled_texts(["demo"], [notes, reviews], text_column="review")
    assert texts == [*unlabelled_corpus("demo"), "great acting", "weak acting", "A fine film."]
    assert collect_unlabelled_texts(files=[notes]) == ["great acting", "weak acting"]
    with pytest.raises(AttnclfError) as refused:
        collect_unlabelled_texts([], [], purpose="count")
    assert str(refused.value) == "no text to count: give datasets NAME and/or files PATH"
    with pytest.raises(AttnclfError) as refused:
        collect_unlabelled_texts(files=[notes], text_column="review", named=lambda name: f"<{name}>")
    assert str(refused.value) == "<text_column> picks the column of a CSV / TSV / JSONL / Parquet <files>"


def test_the_recipe_a_pretraining_follows_is_the_one_named_else_its_first_dataset_s():
    # Which recipe's model `attnclf pretrain` builds, and the refusal of a name no dataset has, are the library's.
    from attnclf.training.pretrain import pretrain_recipe

    assert pretrain_recipe("sst2-sentences", ["demo"]) == "sst2-sentences"
    assert pretrain_recipe(None, ["demo", "imdb"]) == "demo"
    assert pretrain_recipe(None, []) is None  # (files alone: the file recipe's model)
    with pytest.raises(AttnclfError, match=r"^--recipe 'sst2-sentencez': no dataset has a recipe by that name; "
                                           r"choose one of .*\bsst2-sentences\b"):
        pretrain_recipe("sst2-sentencez", ["demo"], named=lambda field: f"--{field}")


@pytest.mark.parametrize("pair, message", [
    ("vocab_size=5", "model_config sets vocab_size, which comes from the trained tokenizer (--vocab-size caps it)"),
    ("num_classes=3", "model_config sets num_classes, which comes from the labels, which pretraining has none of"),
    ("max_len=4", "model_config sets max_len, which comes from --max-len"),
    ("pad_id=1", "model_config sets pad_id, which comes from the tokenizer"),
])
def test_pretrain_refuses_a_model_field_it_derives_in_one_line(tmp_path, capsys, pair, message):
    # vocab_size, num_classes and max_len were a TypeError's traceback (given twice); pad_id=1 pretrained with every
    # <unk> hidden as padding.
    texts = tmp_path / "texts.txt"
    texts.write_text("a good film\na bad film\n" * 20, encoding="utf-8")
    assert main(["pretrain", "--file", str(texts), "--set", pair, "--output", str(tmp_path / "pre"),
                 "--threads", "1"]) == 2
    assert capsys.readouterr().err.strip() == f"attnclf: error: {message}"
    assert not (tmp_path / "pre").exists()
    with pytest.raises(AttnclfError, match="model_config sets vocab_size"):
        PretrainSettings(model_config={"vocab_size": 5})


def test_pretrain_names_only_the_fields_it_takes_for_one_no_self_attn_has():
    # It was config_for's list, at build time, which offered the four fields refused above (vocab_size, ...).
    with pytest.raises(AttnclfError) as refused:
        PretrainSettings(model_config={"dmodel": 32})
    message = str(refused.value)
    assert message.startswith("model 'self-attn' has no settable field 'dmodel'; valid: ")
    valid = set(message.split("valid: ")[1].split(", "))
    assert {"d_model", "layers", "heads"} <= valid
    assert not valid & {"vocab_size", "num_classes", "max_len", "pad_id"}
