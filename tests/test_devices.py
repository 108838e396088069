"""What attnclf does on a GPU, checked on a machine that may have none: which generators a run seeds, forks and
checkpoints, which device batches go to, the process group's backend, and one-line refusals of what a GPU cannot do.

A CUDA GPU's generator holds the same kind of state as a CPU generator, so ``fake_gpus`` stands two CPU generators
in for two GPUs' (torch.cuda.default_generators); a model on the ``meta`` device stands in for one on a GPU where
only the device its inputs reach matters.
"""

import json
import platform
import re
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch

from attnclf.classifier import Classifier
from attnclf.cli import main
from attnclf.data.generated import synthetic
from attnclf.errors import AttnclfError, AttnclfWarning
from attnclf.explain import methods
from attnclf.models import build_model
from attnclf.sklearn import AttentionTextClassifier
from attnclf.text.tokenizer import TokenizerConfig
from attnclf.training import distributed
from attnclf.training.device import describe_device, forked_generators, resolve_device, seed_generators
from attnclf.training.pretrain import PretrainSettings, pretrain_encoder
from attnclf.training.run import train_run, trained_where
from attnclf.training.settings import DataSettings, RunSettings
from attnclf.training.trainer import TrainConfig, Trainer, _make_optimizer, _make_schedule

GPU = torch.device("cuda", 1)


@pytest.fixture
def fake_gpus(monkeypatch) -> tuple[torch.Generator, torch.Generator]:
    """Two stand-in GPUs' generators, the current GPU being the first."""
    generators = (torch.Generator().manual_seed(100), torch.Generator().manual_seed(101))
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "default_generators", generators)
    return generators


def test_training_on_the_cpu_seeds_no_gpus_generator(tmp_path, monkeypatch):
    # torch.manual_seed seeds every GPU's generator as well, which the runs' fork of the CPU's did not put back: on a
    # machine with a GPU, training on the CPU from a notebook reseeded the notebook's GPU stream.
    seeded = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", seeded.append)
    monkeypatch.setattr(torch.cuda, "manual_seed", seeded.append)
    train_run(RunSettings(data=DataSettings(dataset="demo", max_train_examples=100),
                          tokenizer=TokenizerConfig(min_frequency=1, max_len=16), model="boe",
                          model_config={"embed_dim": 8}, train=TrainConfig(epochs=1), output=str(tmp_path / "run"),
                          device="cpu", report=False), progress=False)
    splits = synthetic(n_samples=100, n_train=60)
    AttentionTextClassifier("boe", d_model=8, epochs=1, device="cpu").fit(splits.train.texts, splits.train.labels)
    pretrain_encoder([f"w{i} w{i + 1} w{i + 2}" for i in range(40)],
                     PretrainSettings(model_config={"d_model": 8, "heads": 2, "layers": 1, "ff_dim": 16}, max_len=8,
                                      min_frequency=1, epochs=1, batch_size=16), tmp_path / "pretrained",
                     log=lambda message: None)
    assert seeded == []


def test_a_run_records_the_device_it_trained_on_where_its_settings_say_auto(tmp_path, monkeypatch):
    # config.json held settings.device alone, "auto": nothing told a run on a GPU from one on the CPU, whose weights
    # the same settings do not make the same.
    run = train_run(RunSettings(data=DataSettings(dataset="demo", max_train_examples=100),
                                tokenizer=TokenizerConfig(min_frequency=1, max_len=16), model="boe",
                                model_config={"embed_dim": 8}, train=TrainConfig(epochs=1), output=str(tmp_path),
                                report=False), progress=False).run_dir
    config = json.loads((run / "config.json").read_text())
    assert (config["settings"]["device"], config["device"]) == ("auto", describe_device(resolve_device("auto")))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: f"Tesla P100 #{device}")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert describe_device(torch.device("cpu")) == "cpu"
    assert describe_device(torch.device("cuda")) == "cuda:0 (Tesla P100 #0)"  # what "auto" gives on a GPU
    assert trained_where(GPU, distributed.Distributed(world_size=2)) == "cuda:1 (Tesla P100 #1), 2 processes"


def test_a_gpu_run_seeds_and_forks_its_own_gpus_generator_and_no_other(fake_gpus):
    other, own = fake_gpus
    before = other.get_state(), own.get_state()
    with forked_generators(GPU):
        seed_generators(7, GPU)
        drawn = torch.rand(3, generator=own)
    assert torch.equal(drawn, torch.rand(3, generator=torch.Generator().manual_seed(7)))
    assert torch.equal(other.get_state(), before[0]) and torch.equal(own.get_state(), before[1])
    with forked_generators(torch.device("cuda")):  # `cuda` alone: the current GPU
        seed_generators(7, torch.device("cuda"))
        assert torch.equal(torch.rand(3, generator=other), drawn)
    assert torch.equal(other.get_state(), before[0])


def test_a_checkpoint_keeps_the_gpus_generator_so_a_resumed_run_draws_the_dropout_it_would_have(tmp_path,
                                                                                                 fake_gpus):
    # Dropout on a GPU draws from the GPU's generator: a checkpoint of the CPU's alone resumed from a reseeded one.
    model = build_model("boe", vocab_size=20, embed_dim=8)
    trainer = Trainer(model, TrainConfig(epochs=1), tmp_path, torch.device("cpu"), ["a", "b"])
    trainer.device = GPU  # (the model stays on the CPU: only the checkpoint's generators are at stake)
    trainer.checkpoint_dir.mkdir()
    optimizer = _make_optimizer(model, trainer.config)
    schedule = _make_schedule(optimizer, trainer.config, total_steps=10)
    trainer._save_checkpoint(optimizer, schedule, {"epoch": 1, "history": []}, None)
    expected = torch.rand(3, generator=fake_gpus[1])
    trainer._load_checkpoint(optimizer, schedule)
    assert torch.equal(torch.rand(3, generator=fake_gpus[1]), expected)

    trainer.device = torch.device("cpu")  # resumed on the CPU: the GPU's generator serves none of its dropout
    untouched = fake_gpus[1].get_state()
    trainer._load_checkpoint(optimizer, schedule)
    assert torch.equal(fake_gpus[1].get_state(), untouched)



def test_a_pretraining_checkpoint_keeps_the_gpus_generator_as_a_runs_does(tmp_path, fake_gpus):
    # Pretraining ran on the CPU alone and its checkpoint kept the CPU's generator: on a GPU (--device, now) its
    # dropout draws from the GPU's, which a resumed pretraining would have drawn from a reseeded one.
    from attnclf.training import pretrain

    model = build_model("self-attn", vocab_size=20, d_model=8, heads=2, layers=1, ff_dim=16)
    head = pretrain.MaskedWordHead(8, 20)
    optimizer = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()))
    sum(parameter.sum() for group in optimizer.param_groups for parameter in group["params"]).backward()
    optimizer.step()  # (a checkpoint holds the state of a step taken)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    generator, record = torch.Generator().manual_seed(0), {"epochs": []}
    # (the model stays on the CPU: only the checkpoint's generators are at stake)
    pretrain._save_checkpoint(tmp_path, record, model, head, optimizer, schedule, generator, GPU)
    saved = {"record": record, "optimizer_param_groups": optimizer.state_dict()["param_groups"],
             "schedule": schedule.state_dict()}
    expected = torch.rand(3, generator=fake_gpus[1])
    pretrain._restore(tmp_path, saved, model, head, optimizer, schedule, generator, GPU)
    assert torch.equal(torch.rand(3, generator=fake_gpus[1]), expected)

    untouched = fake_gpus[1].get_state()  # resumed on the CPU: the GPU's generator serves none of its dropout
    pretrain._restore(tmp_path, saved, model, head, optimizer, schedule, generator, torch.device("cpu"))
    assert torch.equal(fake_gpus[1].get_state(), untouched)
    pretrain._save_checkpoint(tmp_path, record, model, head, optimizer, schedule, generator, torch.device("cpu"))
    pretrain._restore(tmp_path, saved, model, head, optimizer, schedule, generator, GPU)  # (from the seed on)
    assert torch.equal(fake_gpus[1].get_state(), untouched)

def test_distributed_gpus_share_their_cpu_tensors_too(monkeypatch):
    # Under nccl alone, gathering each rank's CPU generator for a checkpoint failed: nccl moves GPU tensors only.
    for name, value in (("RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "1")):
        monkeypatch.setenv(name, value)
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(("set_device", device)))
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda backend: calls.append(("backend", backend)))
    monkeypatch.setattr(distributed.atexit, "register", lambda function: None)
    where, device = distributed.init_distributed("auto")
    assert (where.rank, device) == (1, GPU)
    assert calls[0] == ("set_device", GPU)
    assert calls[1] == ("backend", "cpu:gloo,cuda:nccl")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # CPUs: gloo, as before
    calls.clear()
    assert distributed.init_distributed("auto")[1] == torch.device("cpu") and calls == [("backend", "gloo")]


def test_bf16_on_a_gpu_that_cannot_compute_in_it_is_one_line_before_anything_moves(demo_run, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla P100")
    asked_of = []  # the GPUs made current while is_bf16_supported asked: it asks of the current one only

    @contextmanager
    def current(device):
        asked_of.append(device)
        yield

    monkeypatch.setattr(torch.cuda, "device", current)
    refusal = r"^bf16: Tesla P100 cannot compute in bfloat16; run without bf16 \(--bf16\), in float32$"
    with pytest.raises(AttnclfError, match=refusal):
        Classifier.load(demo_run, device="cuda", bf16=True)
    with pytest.raises(AttnclfError, match=refusal):
        Trainer(build_model("boe", vocab_size=20), TrainConfig(bf16=True), tmp_path, GPU, ["a", "b"])
    assert asked_of == [torch.device("cuda"), GPU]  # (--device cuda:1 was judged by the first GPU's bfloat16)


@pytest.mark.parametrize("avx512_bf16, amx, warned", [(False, False, True), (True, False, False),
                                                       (False, True, False)])
def test_bf16_on_a_cpu_without_bfloat16_instructions_is_warned_of(demo_run, tmp_path, monkeypatch, capsys,
                                                                   avx512_bf16, amx, warned):
    # torch emulates bfloat16 there: 2.8x the demo's training time on an AVX2 EPYC, where the flag promised speed.
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    warning = r"^bf16: this CPU has no bfloat16 instructions \(AVX-512 BF16 or AMX\), so torch emulates them, " \
              r"slower than float32; run without bf16 \(--bf16\)$"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Classifier.load(demo_run, device="cpu", bf16=True)
        Trainer(build_model("boe", vocab_size=20), TrainConfig(bf16=True), tmp_path, torch.device("cpu"), ["a", "b"])
        Classifier.load(demo_run, device="cpu")  # (float32: nothing to warn of)
    assert [(w.category, bool(re.match(warning, str(w.message)))) for w in caught] == [(AttnclfWarning, True)] * (
        2 if warned else 0)
    assert main(["predict", str(demo_run), "good", "--bf16"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: bf16")]
    assert len(notes) == (1 if warned else 0)


def test_a_command_training_several_runs_under_bf16_notes_the_emulation_once(tmp_path, monkeypatch, capsys):
    # Each seed's Trainer warns, and scikit-learn's metrics between them (warnings.catch_warnings) undo Python's
    # once-a-place filter: `train --seeds 0 1 2 --bf16` printed the same note three times.
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert main(["train", "--dataset", "toy-reversal", "--seeds", "0", "1", "--epochs", "1", "--bf16", "--no-report",
                 "--quiet", "--threads", "1", "--output", str(tmp_path / "seeds")]) == 0
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: bf16")] == [
        "note: bf16: this CPU has no bfloat16 instructions (AVX-512 BF16 or AMX), so torch emulates them, slower than "
        "float32; run without bf16 (--bf16)"]


def test_loading_onto_a_gpu_this_machine_lacks_is_one_line_before_any_weights_are_read(demo_run, monkeypatch):
    import attnclf.classifier

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(attnclf.classifier, "load_weights", lambda path: pytest.fail("read the weights first"))
    with pytest.raises(AttnclfError, match="^device cuda asked for, but no CUDA device is available$"):
        Classifier.load(demo_run, device="cuda")


def test_attributions_and_attention_maps_run_where_the_model_is_unless_told(monkeypatch):
    # Their device defaulted to the CPU: attribute(clf.model, ...) of a model on a GPU failed on mismatched devices.
    model = build_model("self-attn", vocab_size=20, d_model=16, heads=2, layers=1).to("meta")
    seen = []

    def gradient_times_input(model, ids, mask, target, **options):
        seen.append({ids.device, mask.device, target.device})
        return torch.zeros(ids.shape), {}

    def self_attentions(model, ids, mask):
        seen.append({ids.device, mask.device})
        return [torch.zeros(len(ids), 2, ids.shape[1], ids.shape[1])]

    monkeypatch.setattr(methods, "_grad_input", gradient_times_input)
    monkeypatch.setattr(methods, "_self_attentions", self_attentions)
    methods.attribute(model, [[5, 6, 7]], np.array([1]), "grad-input")
    methods.self_attention_maps(model, [[5, 6, 7]])
    assert seen == [{torch.device("meta")}] * 2
    methods.attribute(model, [[5, 6, 7]], np.array([1]), "grad-input", device="cpu")  # as told
    assert seen[-1] == {torch.device("cpu")}


def test_benchmarks_train_on_the_cpu_unless_told_and_record_whether_a_gpu_was_there(monkeypatch):
    # BENCHMARKS.md's seconds and peak resident memory are the CPU's: on a machine with a GPU, "auto" trained the
    # benchmarks' runs there, and the result files named the CPU alone.
    monkeypatch.syspath_prepend(Path(__file__).resolve().parents[1] / "bench")
    import common

    assert common.cli_settings("demo", "unused").device == "cpu"
    assert common.cli_settings("demo", "unused", "--device", "auto").device == "auto"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla P100")
    assert common.machine()["gpu"] == "Tesla P100"


def test_bench_results_name_the_cpu_model_and_the_kernels_torch_dispatches_to(tmp_path, monkeypatch):
    # (machines of one kind differ: float results and speeds move with AVX-512 against AVX2)
    monkeypatch.syspath_prepend(Path(__file__).resolve().parents[1] / "bench")
    import common

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
                       "model name\t: AMD EPYC\nflags\t\t: fpu avx2\n\nprocessor\t: 1\nmodel name\t: other\n")
    assert common.cpu_model(cpuinfo) == "AMD EPYC (family 25, model 1)"
    assert common.cpu_model(tmp_path / "absent") is None
    # An Arm server's (a Neoverse N1's) names no model: nothing to record, not "? (family ?, model ?)"
    cpuinfo.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n"
                       "CPU architecture: 8\nCPU part\t: 0xd0c\n")
    assert common.cpu_model(cpuinfo) is None
    assert common.machine()["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()


def test_block_local_attention_never_asks_for_a_query_without_a_key_to_attend(monkeypatch):
    # For a query whose every key is masked SDPA answers zeros since pytorch/pytorch#133882 (2024) and NaN before it,
    # as its CUDA kernels did for the users who reported it (attnclf takes torch>=2.2). A block of padding alone (a
    # shorter text in the batch), or of tokens dropped in training, is such a block; its NaN reaches the prediction
    # through the pooling, which weighs it by 0 (0 x NaN is NaN).
    attend, asked = torch.nn.functional.scaled_dot_product_attention, []

    def recorded(query, key, value, attn_mask=None, **options):
        asked.append(attn_mask)
        return attend(query, key, value, attn_mask=attn_mask, **options)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recorded)
    torch.manual_seed(0)
    model = build_model("self-attn", vocab_size=30, d_model=16, heads=2, layers=2, attention_window=4,
                        token_dropout=0.5)
    ids = torch.zeros(2, 12, dtype=torch.long)
    ids[0], ids[1, :3] = torch.arange(2, 14), torch.tensor([5, 6, 7])  # row 1: two blocks of padding alone
    with torch.no_grad():
        in_a_batch = model.eval()(ids, ids != 0).logits[1]
        model.train()(ids, ids != 0)
    assert asked and all(mask.any(dim=-1).all() for mask in asked)
    with torch.no_grad():
        torch.testing.assert_close(in_a_batch, model.eval()(ids[1:, :3], ids[1:, :3] != 0).logits[0])


def test_a_gpu_is_named_by_its_index_and_one_the_machine_lacks_is_one_line(monkeypatch, capsys):
    # `--device cuda:1` (the second GPU) was refused by the command line, and CUDA_VISIBLE_DEVICES was the only way.
    from attnclf.cli import main

    assert main(["predict", "no/such/run", "text", "--device", "cuda:1"]) == 2  # parsed; the machine has no GPU
    assert capsys.readouterr().err.strip() == "attnclf: error: device cuda:1 asked for, but no CUDA device is available"
    with pytest.raises(SystemExit):  # (argparse's one line, as for a choice it lacks)
        main(["predict", "no/such/run", "text", "--device", "gpu"])
    assert "device must be auto, cpu, cuda, cuda:N (N counting from 0) or mps, not 'gpu'" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(AttnclfError, match=r"^device cuda:2 asked for, but this machine has 2 CUDA devices: cuda:0 "
                                           r"to cuda:1$"):
        resolve_device("cuda:2")
    with pytest.raises(AttnclfError, match="device must be auto, cpu, cuda, cuda:N"):
        resolve_device("cuda:one")


def test_under_torchrun_a_gpu_named_by_its_index_is_refused_as_each_process_takes_its_local_ranks(monkeypatch):
    from attnclf.training.distributed import rank_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert rank_device("cuda") == torch.device("cuda", 1)
    with pytest.raises(AttnclfError, match=r"^under torchrun each process trains on the GPU of its local rank: pass "
                                           r"--device cuda, not cuda:0$"):
        rank_device("cuda:0")  # (it trained rank 1 on its local rank's GPU, saying nothing of the index given)


def test_a_torch_device_names_its_device_as_its_string_does():
    # A torch.device from Python passed the name check on its string, then failed on .startswith: an AttributeError.
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(AttnclfError, match="^device cuda:0 asked for, but no CUDA device is available$"):
        resolve_device(torch.device("cuda", 0))
