"""What attnclf reads from others: a run directory, an ensemble folder or an ONNX export someone sent, edited by
hand or made to harm. Each bad file is one line naming it and what is wrong, read no further than the check needs,
and nothing outside the folder is read because a file inside it said so."""

import json
import shutil

import pytest
import torch

from attnclf.errors import NAME_LENGTH, AttnclfError, shown


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
def test_json_too_deep_or_with_a_huge_number_is_one_line(demo_run, tmp_path, name, content, message, cli_error):
    # Python's decoder raises RecursionError and ValueError for these, valid JSON both: they were tracebacks.
    copy = copied(demo_run, tmp_path / "run")
    (copy / name).write_text(content)
    assert message in cli_error(["predict", str(copy), "a fine film"])


def test_a_history_line_too_deep_to_read_is_named_by_its_line(demo_run, tmp_path, cli_error):
    copy = copied(demo_run, tmp_path / "run")
    (copy / "history.jsonl").write_text('{"epoch": 1}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    assert "history.jsonl, line 2: JSON nested too deep to read" in cli_error(["report", str(copy)])


@pytest.mark.parametrize("field, value, message", [
    ("d_model", -4, "model field d_model must be at least 1, got -4"),
    ("d_model", "16", "model field d_model takes int values like 128, got '16'"),
    # torch's own overflow, building the outline that sizes the model: a traceback
    ("d_model", 10 ** 9, "model 'self-attn' is too large to build: a tensor of its sizes (the largest, d_model "
                         "1,000,000,000) has more elements than torch can count"),
    ("pad_id", 10 ** 6, "model field pad_id must be below vocab_size"),  # torch's AssertionError
    ("layers", 10 ** 6, "model field layers must be at most 1,024, got 1000000"),  # 40 GB of outline to size it
])
def test_a_model_config_out_of_shape_names_config_json_and_the_field(demo_run, tmp_path, field, value, message,
                                                                     cli_error):
    run = edited_config(demo_run, tmp_path / "run", lambda config: config["model"]["config"].update({field: value}))
    err = cli_error(["predict", str(run), "a fine film"])
    # (a size too large names the run, as one too large for this machine does: its config is sound, but unbuildable)
    named = run if "too large" in message else run / "config.json"
    assert err.startswith(f"{named}: ") and message in err, err


def test_too_many_layers_are_refused_before_any_is_built():
    from attnclf.models import config_for

    with pytest.raises(AttnclfError, match="layers must be at most 1,024"):
        config_for("self-attn", layers=10 ** 9)
    assert config_for("self-attn", layers=1024).layers == 1024


@pytest.mark.parametrize("edit, message", [
    (lambda tokenizer: tokenizer.update(colour="blue"), "tokenizer has no setting 'colour'; its settings are kind, "),
    (lambda tokenizer: tokenizer.update(cleaning="x"), "tokenizer cleaning must be a JSON object of "),
    (lambda tokenizer: tokenizer.update(cleaning={"shout": True}), "tokenizer cleaning has no setting 'shout'"),
    (lambda tokenizer: tokenizer.update(max_len=-1), "tokenizer max_len must be at least 1, got -1"),
])
def test_tokenizer_settings_out_of_shape_name_config_json(demo_run, tmp_path, edit, message, cli_error):
    run = edited_config(demo_run, tmp_path / "run", lambda config: edit(config["settings"]["tokenizer"]))
    err = cli_error(["predict", str(run), "a fine film"])
    assert err.startswith(f"{run / 'config.json'}: ") and message in err, err


@pytest.mark.parametrize("dtype, written", [(torch.int64, "I64"), (torch.bool, "BOOL"), (torch.float16, "F16")])
def test_weights_of_another_dtype_are_refused_naming_the_tensor(demo_run, tmp_path, dtype, written, cli_error):
    # torch's load_state_dict casts them: integer or boolean weights predicted nonsense without a word.
    from safetensors.torch import load_file, save_file

    run = copied(demo_run, tmp_path / "run")
    weights = load_file(str(run / "model.safetensors"))
    name = sorted(weights)[0]
    save_file({**weights, name: weights[name].to(dtype)}, str(run / "model.safetensors"))
    assert cli_error(["predict", str(run), "a fine film"]).endswith(
        f"{run / 'model.safetensors'} does not match config.json: {name} is {written} in the file, F32 in the model")


def test_weights_of_other_shapes_are_refused_from_the_header_before_a_tensor_is_read(demo_run, tmp_path, monkeypatch,
                                                                                     cli_error):
    # A tensor of other sizes may be gigabytes: it was read whole, then compared.
    import safetensors.torch
    from safetensors.torch import load_file, save_file

    run = copied(demo_run, tmp_path / "run")
    weights = load_file(str(run / "model.safetensors"))
    name = "token_embedding.weight"
    rows, width = weights[name].shape
    extra = {"unused.weight": torch.zeros(2)}
    save_file({**weights, name: torch.zeros(rows * 100, width), **extra}, str(run / "model.safetensors"))

    def unread(*args, **kwargs):
        raise AssertionError("a tensor was read before the header was checked")

    monkeypatch.setattr(safetensors.torch, "load_file", unread)
    assert cli_error(["predict", str(run), "a fine film"]).endswith(
        f"does not match config.json: {name} is ({rows * 100}, {width}) in the file, ({rows}, {width}) in the model; "
        f"and 1 more tensor")


@pytest.mark.parametrize("outside", ["absolute", "../elsewhere"])
def test_an_ensemble_file_naming_a_member_outside_its_folder_is_refused(demo_run, tmp_path, outside, cli_error):
    # ensemble.json's members were joined to the folder as they came: an absolute path, or one up and out, loaded
    # (and `refit` wrote beside) whatever run it named.
    folder = tmp_path / "ensemble"
    folder.mkdir()
    copied(demo_run, folder / "seed-0")
    copied(demo_run, tmp_path / "elsewhere")
    member = str(demo_run) if outside == "absolute" else outside
    (folder / "ensemble.json").write_text(json.dumps({"members": ["seed-0", member], "seeds": [0, 1]}))
    assert cli_error(["predict", str(folder), "a fine film"]).endswith(
        f"{folder / 'ensemble.json'}: member {shown(member, most=NAME_LENGTH)} is not a folder's name: the members "
        f"are folders inside {folder}")


def edited_export(exported, to, edit):
    """A copy of the ONNX export ``exported`` whose export.json ``edit`` (manifest -> manifest) changed."""
    shutil.copytree(exported, to)
    (to / "export.json").write_text(json.dumps(edit(json.loads((to / "export.json").read_text()))))
    return to


@pytest.mark.parametrize("edit, message", [
    (lambda manifest: [manifest], "export.json: expected a JSON object, got list"),
    (lambda manifest: {key: value for key, value in manifest.items() if key != "tokenizer"},
     "export.json: tokenizer must be a JSON object of kind, vocab_size, "),
    (lambda manifest: manifest | {"tokenizer": manifest["tokenizer"] | {"max_len": 0}},
     "export.json: tokenizer max_len must be at least 1, got 0"),
    # a string failed in numpy's division; 0 and NaN gave NaN probabilities, a negative one turned them around
    *[(lambda manifest, value=value: manifest | {"temperature": value},
       f"export.json: temperature must be a positive number, got {value!r}") for value in ("x", 0, -1.0)],
    (lambda manifest: manifest | {"model": "self-attn"}, "export.json: model must be a JSON object with a name "
                                                         "(a string), parameters and vocab_size (whole numbers)"),
    (lambda manifest: manifest | {"text_column": {"a": 1}}, "export.json: text_column must be a column's name or "
                                                            "a list of them"),
])
def test_an_export_json_out_of_shape_is_one_line_naming_it(exported, tmp_path, edit, message, cli_error):
    export = edited_export(exported, tmp_path / "onnx-copy", edit)
    err = cli_error(["predict", str(export), "a fine film", "--backend", "onnx"])
    assert err.startswith(f"{export / 'export.json'}: ") and message in err, err


def test_an_export_reads_no_run_but_its_own_folder_s_for_its_text_column(demo_run, exported, tmp_path):
    # Exports from before the text column was recorded ask the run they came from, which export.json names: read
    # from anywhere it said, another run's config.json chose the column `predict --file` reads.
    from attnclf.export import OnnxClassifier

    elsewhere = edited_config(demo_run, tmp_path / "elsewhere",
                              lambda config: config["settings"]["data"].update(text_column="secret"))
    export = edited_export(exported, tmp_path / "onnx-copy", lambda manifest: {
        key: value for key, value in manifest.items() if key != "text_column"} | {"source": str(elsewhere)})
    assert "text_column" not in OnnxClassifier.load(export).config


def test_an_export_with_another_tokenizer_is_refused_as_it_loads(exported, tmp_path, cli_error):
    # Its ids past the graph's embedding failed every prediction in onnxruntime's words: a traceback, or a 500 from
    # the service, for each request.
    from attnclf.text.tokenizer import Tokenizer, TokenizerConfig

    export = edited_export(exported, tmp_path / "onnx-copy", lambda manifest: manifest)
    words = json.loads((exported / "export.json").read_text())["model"]["vocab_size"]
    other = Tokenizer.train([f"w{i} w{i}" for i in range(words * 2)], TokenizerConfig(min_frequency=1))
    other.save(export / "tokenizer.json")
    assert cli_error(["predict", str(export), "w5 w6", "--backend", "onnx"]).endswith(
        f"{export / 'tokenizer.json'} has {other.vocab_size:,} words and the model {words:,}: not this model's "
        f"tokenizer")


def test_a_tokenizer_file_far_larger_than_its_words_take_is_refused_before_it_is_parsed(demo_run, tmp_path, monkeypatch,
                                                                                        cli_error):
    from attnclf.text import tokenizer

    run = copied(demo_run, tmp_path / "run")
    saved = (run / "tokenizer.json").read_text()
    (run / "tokenizer.json").write_text(saved[:-2] + " " * 10_000_000 + saved[-2:])  # valid JSON, 10 MB of it

    def unparsed(path):
        raise AssertionError("parsed before its size was checked")

    monkeypatch.setattr(tokenizer.HFTokenizer, "from_file", unparsed)
    words = json.loads((run / "config.json").read_text())["model"]["config"]["vocab_size"]
    assert cli_error(["predict", str(run), "a fine film"]).endswith(
        f"{run / 'tokenizer.json'} is {len(saved) / 1e6 + 10:.1f} MB, more than a tokenizer of the model's {words:,} "
        f"words takes: not this model's tokenizer")


@pytest.mark.parametrize("saved, message", [
    ([], "thresholds.json: expected {\"thresholds\": {label: threshold, ...}}"),
    ({"thresholds": ["sports"]}, "thresholds.json: expected {\"thresholds\": {label: threshold, ...}}"),
    ({"thresholds": {"sports": 0.4}}, "thresholds.json: no threshold for label 'music'"),
    # float() of a string failed with a traceback; NaN or 2 never predicted the label, a negative one always did
    *[({"thresholds": {"sports": 0.4, "music": value}}, f"thresholds.json: the threshold of label 'music' must be a "
                                                        f"number from 0 to 1, got {shown(value)}")
      for value in ("high", 2, -0.5)],
])
def test_thresholds_out_of_shape_are_one_line_naming_the_label(tmp_path, saved, message):
    from attnclf.errors import RunDirError
    from attnclf.rundir import read_thresholds

    (tmp_path / "thresholds.json").write_text(json.dumps(saved))
    with pytest.raises(RunDirError) as caught:
        read_thresholds(tmp_path, ["sports", "music"])
    assert str(caught.value) == f"{tmp_path / message.split(': ')[0]}: {message.split(': ', 1)[1]}"


def test_a_nan_threshold_is_refused(tmp_path):
    from attnclf.rundir import read_thresholds

    (tmp_path / "thresholds.json").write_text('{"thresholds": {"sports": NaN}}')
    with pytest.raises(AttnclfError, match="threshold of label 'sports' must be a number from 0 to 1, got nan"):
        read_thresholds(tmp_path, ["sports"])


def test_a_served_run_s_model_answer_gives_the_tokenizer_settings_as_they_were_read(demo_run, tmp_path):
    # GET /model read config.json's tokenizer fields as they stood: one left out (its default) was a 500.
    from fastapi.testclient import TestClient

    from attnclf import Classifier
    from attnclf.serve.app import create_app

    run = edited_config(demo_run, tmp_path / "run", lambda config: config["settings"]["tokenizer"].pop("kind"))
    with TestClient(create_app(Classifier.load(run, device="cpu")), raise_server_exceptions=False) as client:
        answer = client.get("/model")
    assert answer.status_code == 200 and answer.json()["tokenizer"]["kind"] == "word"


def test_a_run_without_its_parameter_count_is_refused_as_it_loads(demo_run, tmp_path, cli_error):
    # The service's GET /model, the report and an ensemble's count read it: a 500, and tracebacks.
    run = edited_config(demo_run, tmp_path / "run", lambda config: config["model"].pop("parameters"))
    assert cli_error(["predict", str(run), "a fine film"]).endswith(
        f"{run / 'config.json'}: model.parameters is missing or not a JSON whole number (was the file edited?)")


@pytest.mark.parametrize("kind", ["device", "folder"])
def test_a_history_that_is_no_regular_file_is_refused_not_read(demo_run, tmp_path, kind, cli_error):
    # history.jsonl was read if it existed at all: a link to /dev/null read as no epochs, one to /dev/zero without end.
    run = copied(demo_run, tmp_path / "run")
    (run / "history.jsonl").unlink()
    (run / "history.jsonl").symlink_to("/dev/null") if kind == "device" else (run / "history.jsonl").mkdir()
    assert cli_error(["report", str(run)]).endswith(
        f"{run / 'history.jsonl'}: not a regular file (a folder, a device or a pipe)")


@pytest.mark.parametrize("part, value, named", [
    # A backtracking pattern: 28 characters of "a" took 0.03 s, every two more about 2.6 times as long, and past
    # Oniguruma's retry limit tokenizers panics (a BaseException: the service's batcher would not survive it).
    ("normalizer", {"type": "Replace", "pattern": {"Regex": "(a|aa)+$"}, "content": "x"}, "a normalizer (Replace)"),
    ("pre_tokenizer", {"type": "Split", "pattern": {"Regex": "(a|aa)+$"}, "behavior": "Isolated", "invert": False},
     "a pre-tokenizer of its own (Split)"),
    ("post_processor", {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
     "a post-processor (ByteLevel)"),
    ("truncation", {"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 0},
     "truncation of its own"),
])
def test_a_tokenizer_file_with_parts_attnclf_never_writes_is_refused_as_it_loads(demo_run, tmp_path, part, value, named,
                                                                                 cli_error):
    # Its normalizers and patterns run on every text a service is sent, and change what the model reads.
    run = copied(demo_run, tmp_path / "run")
    saved = json.loads((run / "tokenizer.json").read_text())
    (run / "tokenizer.json").write_text(json.dumps(saved | {part: value}))
    assert cli_error(["predict", str(run), "a" * 40 + "!"]).endswith(
        f"{run / 'tokenizer.json'}: {named}, which attnclf's tokenizers never have: not a tokenizer attnclf wrote")
