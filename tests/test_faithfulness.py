"""The faithfulness measurements, pinned on models where the faithful answer is known."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch
from torch import nn

from attnclf.classifier import Classifier
from attnclf.cli import main
from attnclf.data.base import TextDataset
from attnclf.ensemble import Ensemble
from attnclf.errors import AttnclfError
from attnclf.explain.faithfulness import (
    MIN_ADVANTAGE,
    FaithfulnessResult,
    MethodFaithfulness,
    _tokens_to_remove,
    measure_faithfulness,
    rank_agreement,
    summary_table,
    uniform_attention_check,
    verdict,
)
from attnclf.models import build_model
from attnclf.models.attention import masked_softmax
from attnclf.models.base import Classifier as BaseModel
from attnclf.models.base import ModelConfig, ModelOutput
from attnclf.models.windows import WindowedClassifier
from attnclf.text.windows import WindowConfig
from test_explain import (key_classifier, one_thread, recorded_batches, tiny,  # noqa: F401 (one_thread: autouse)
                          tokenizer)

FILLER = ["the", "film", "was", "plot", "acting", "long"]


def key_texts(n: int = 24, seed: int = 0) -> TextDataset:
    """Texts of 5-9 filler words with "great" somewhere, all labelled pos."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(n):
        words = list(rng.choice(FILLER, size=rng.integers(5, 10)))
        words.insert(int(rng.integers(0, len(words) + 1)), "great")
        texts.append(" ".join(words))
    return TextDataset(texts, [1] * n, ["neg", "pos"], "test", "key-texts")


def test_methods_that_name_the_deciding_token_beat_random():
    result = measure_faithfulness(key_classifier(), key_texts(), examples=24, random_draws=5)
    drop = 1 / (1 + math.exp(-2)) - 0.5  # p(pos) loses this when "great" goes
    for method in ("attention", "grad-input", "integrated-gradients", "occlusion"):
        r = result.methods[method]
        assert r.verdict == "beats random", method
        assert r.drops == pytest.approx({"1": drop, "3": drop, "5": drop, "10%": drop}, abs=1e-5)
    # Random deletion only removes "great" sometimes, more often the more it removes.
    assert 0 < result.random_drops["1"] < result.random_drops["3"] < result.random_drops["5"] < drop
    # On these 6-10 token texts 10% is one token, as k = 1: AOPC counts that deletion once, not twice.
    assert result.random_aopc == pytest.approx(np.mean([result.random_drops[k] for k in ("1", "3", "5")]))
    assert result.completeness_error["max"] < 1e-5
    # All four remove "great" first: their AOPCs are equal to the bit, a tie, not a win for whichever came first.
    assert result.most_faithful_methods == ["attention", "grad-input", "integrated-gradients", "occlusion"]
    assert "Beat random deletion: attention, grad-input, integrated-gradients, occlusion. Did not: none." \
        in result.summary()


def test_attention_on_a_token_that_does_not_matter_is_worse_than_random():
    texts = key_texts()
    data = TextDataset([f"{text} film film film film film" for text in texts.texts], texts.labels, texts.label_names,
                       "test", "key-and-films")
    result = measure_faithfulness(key_classifier(attend_to="film"), data, methods=["attention", "occlusion"],
                                  examples=24, random_draws=5)
    # Attention names a text's five "film"s first: its deletions (of at most five tokens) cost nothing, while random
    # deletion sometimes removes "great".
    assert result.methods["attention"].drops == {"1": 0.0, "3": 0.0, "5": 0.0, "10%": 0.0}
    assert result.methods["attention"].verdict == "worse than random"
    assert result.methods["occlusion"].verdict == "beats random"
    assert result.most_faithful == "occlusion"
    assert "Did not: attention." in result.summary()


def test_methods_that_tie_exactly_are_named_as_a_tie_not_one_winner():
    result = measure_faithfulness(key_classifier(attend_to="film"), key_texts(), examples=24, random_draws=5,
                                  methods=["attention", "grad-input", "occlusion"])
    tied = result.methods["grad-input"].aopc
    assert result.methods["occlusion"].aopc == tied > result.methods["attention"].aopc  # (both remove "great")
    assert result.most_faithful_methods == ["grad-input", "occlusion"]
    assert result.most_faithful == "grad-input and occlusion, tied"
    assert f"most faithful by deletion: grad-input and occlusion, tied at AOPC {tied:.4f}." in result.summary()
    assert f"| grad-input and occlusion, tied ({tied:.3f}) |" in summary_table([result])
    assert result.summary() in result.table()  # (what `attnclf faithfulness` and the report print)


def _result_with_aopcs(**aopcs: float) -> FaithfulnessResult:
    methods = {name.replace("_", "-"): MethodFaithfulness({"1": aopc, "3": aopc, "5": aopc, "10%": aopc}, aopc, 0.3,
                                                          0.01, "beats random") for name, aopc in aopcs.items()}
    return FaithfulnessResult("self-attn", "demo", 200, methods, {"1": 0.1, "3": 0.1, "5": 0.1, "10%": 0.1}, 0.1, 10,
                              {}, None, None, 1.0)


def test_the_summary_table_gives_a_near_chance_models_aopc_in_significant_digits():
    # "occlusion (0.000)" named a most faithful method by an AOPC the table showed as nothing.
    assert "| occlusion (3.2e-05) |" in summary_table([_result_with_aopcs(occlusion=3.2e-05, grad_input=1e-05)])


def test_the_summary_tables_uniform_column_names_a_multi_label_runs_figure_subset_accuracy():
    # A multi-label run's uniform-attention check is on subset accuracy (every label of a text right), which the
    # column called accuracy, and read beside single-label runs' accuracy, misnamed.
    from dataclasses import replace

    check = {"accuracy": 0.8, "uniform_accuracy": 0.7, "changed": 0.1, "examples": 200}
    single = replace(_result_with_aopcs(occlusion=0.3), uniform_attention=check)
    multi = replace(single, multi_label=True)

    def header(results):
        return summary_table(results).splitlines()[0].split(" | ")[-1]

    assert header([single]) == "accuracy: learned -> uniform attention |"
    assert header([multi]) == "subset accuracy: learned -> uniform attention |"
    mixed = summary_table([single, multi]).splitlines()
    assert mixed[0].endswith("| accuracy (subset accuracy for a multi-label run): learned -> uniform attention |")
    assert mixed[2].endswith("| 0.800 -> 0.700 |") and mixed[3].endswith("| 0.800 -> 0.700 (subset) |")


def test_aopcs_that_read_the_same_in_the_table_are_a_tie_not_a_winner_by_a_hidden_digit():
    # 0.41231 and 0.41234 both show as 0.4123: "most faithful: occlusion" beside two equal numbers was a winner by a
    # digit nobody sees (and by less than any sample of texts could tell apart).
    result = _result_with_aopcs(grad_input=0.41231, occlusion=0.41234, attention=0.2)
    assert [row[5] for row in result.rows()[1][:2]] == ["0.4123", "0.4123"]
    assert result.most_faithful == "grad-input and occlusion, tied"
    assert "most faithful by deletion: grad-input and occlusion, tied at AOPC 0.4123." in result.summary()
    assert "| grad-input and occlusion, tied (0.412) |" in summary_table([result])
    # A difference the table shows is a winner.
    assert _result_with_aopcs(grad_input=0.41231, occlusion=0.41261).most_faithful == "occlusion"


def test_a_method_no_better_than_random_is_called_so():
    # A constant model: nothing any method names moves its prediction, and neither does chance.
    clf = key_classifier()
    with torch.no_grad():
        clf.model.token_embedding.weight.zero_()
    result = measure_faithfulness(clf, key_texts(), methods=["occlusion"], examples=12, random_draws=3)
    assert result.methods["occlusion"].verdict == "does not beat random"
    assert result.methods["occlusion"].aopc == pytest.approx(0.0, abs=1e-7)


def test_a_consistent_but_negligible_advantage_is_no_verdict():
    # The key token moves p(pos) by 5e-4 only, in every text: two standard errors are cleared, a probability
    # point is not (a model at chance would otherwise "beat random" on drops this size).
    clf = key_classifier()
    with torch.no_grad():
        clf.model.token_embedding.weight.mul_(1e-3)
    result = measure_faithfulness(clf, key_texts(), methods=["occlusion"], examples=24, random_draws=5)
    occlusion = result.methods["occlusion"]
    assert 0 < occlusion.advantage - 2 * occlusion.advantage_se and occlusion.advantage < MIN_ADVANTAGE
    assert occlusion.verdict == "does not beat random"


def test_an_advantage_within_two_standard_errors_of_zero_is_no_verdict_however_large():
    # A big mean advantage from a handful of texts that disagree wildly is noise, either way round.
    assert verdict(0.2, 0.09) == "beats random" and verdict(0.2, 0.11) == "does not beat random"
    assert verdict(-0.2, 0.09) == "worse than random" and verdict(-0.2, 0.11) == "does not beat random"


def test_the_random_baseline_deletes_in_a_random_order_not_the_texts_own():
    # Every text opens with "great": deleting left to right would remove it first, as the methods do, and random
    # deletion would seem as faithful as they are.
    texts = [text.replace("great ", "").replace(" great", "") for text in key_texts().texts]
    data = TextDataset([f"great {text}" for text in texts], [1] * len(texts), ["neg", "pos"], "test", "key-first")
    result = measure_faithfulness(key_classifier(), data, methods=["occlusion"], examples=24, random_draws=5)
    drop = 1 / (1 + math.exp(-2)) - 0.5
    assert result.methods["occlusion"].drops["1"] == pytest.approx(drop, abs=1e-5)
    assert 0 < result.random_drops["1"] < drop / 2  # "great" is one of 6-10 tokens
    assert result.methods["occlusion"].verdict == "beats random"


def test_tokens_a_method_scores_alike_are_deleted_in_a_random_order_not_the_texts_own():
    # Every text opens with "great" and has no "film": attention (on "film") weighs every token alike, naming none.
    # Deleting its ties left to right removed "great" first and credited it with occlusion's drop, beating random.
    texts = [text.replace("great ", "").replace(" great", "").replace("film", "plot") for text in key_texts().texts]
    data = TextDataset([f"great {text}" for text in texts], [1] * len(texts), ["neg", "pos"], "test", "key-first")
    result = measure_faithfulness(key_classifier(attend_to="film"), data, methods=["attention", "occlusion"],
                                  examples=24, random_draws=5)
    drop = 1 / (1 + math.exp(-2)) - 0.5
    attention = result.methods["attention"]
    assert 0 < attention.drops["1"] < drop / 2 and attention.verdict == "does not beat random"
    assert attention.aopc < result.methods["occlusion"].aopc  # (occlusion names "great": its drop at k = 1)
    # The same seed breaks the ties the same way: a measurement is reproducible.
    again = measure_faithfulness(key_classifier(attend_to="film"), data, methods=["attention", "occlusion"],
                                 examples=24, random_draws=5)
    assert again.methods["attention"] == attention


def test_a_saved_result_is_judged_by_todays_rule():
    result = measure_faithfulness(key_classifier(), key_texts(), methods=["occlusion"], examples=12, random_draws=3)
    saved = result.to_dict()
    saved["methods"]["occlusion"] |= {"advantage": 1e-4, "advantage_se": 1e-5, "verdict": "beats random"}
    assert FaithfulnessResult.from_dict(saved).methods["occlusion"].verdict == "does not beat random"


def test_an_empty_list_of_methods_is_refused_not_read_as_all():
    with pytest.raises(AttnclfError, match="methods is empty"):
        measure_faithfulness(key_classifier(), key_texts(), methods=[], examples=4, random_draws=1)


@pytest.mark.parametrize("methods", [None, ["occlusion"]])
def test_an_ensemble_or_a_windowed_run_is_refused_in_one_line_as_explain_refuses_it(methods):
    # (the command refuses them by their folders; the function met them in an AttributeError, or in "methods is
    # empty" where none was given, or deep in a forward pass given the wrong shape of ids)
    tok = tokenizer()
    windowed_run = Classifier(WindowedClassifier(build_model("boe", vocab_size=tok.vocab_size), WindowConfig()), tok,
                              ["neg", "pos"], torch.device("cpu"))
    with pytest.raises(AttnclfError, match=r"^explanations of windowed runs \(trained with --windows\) are not"):
        measure_faithfulness(windowed_run, key_texts(), methods=methods, examples=4, random_draws=1)
    with pytest.raises(AttnclfError, match=r"use one member, such as ensemble\.members\[0\]$"):
        measure_faithfulness(Ensemble([key_classifier(), key_classifier()]), key_texts(), methods=methods,
                             examples=4, random_draws=1)


def test_an_example_count_below_one_is_refused_in_one_line():
    # measure_run checked it, measure_faithfulness (which it and write_report call) did not: 0 was an IndexError, -1
    # numpy's ValueError.
    for examples in (0, -1, 2.5):
        with pytest.raises(AttnclfError) as refused:
            measure_faithfulness(key_classifier(), key_texts(), methods=["occlusion"], examples=examples,
                                 random_draws=1)
        assert str(refused.value) == f"examples must be at least 1, got {examples}"


def test_a_count_of_random_draws_below_one_is_refused_in_one_line():
    # 0 (or -1) drew no random deletion: its AOPC was NaN, and every method "does not beat random"; 2.5 a TypeError.
    for draws in (0, -1, 2.5):
        with pytest.raises(AttnclfError) as refused:
            measure_faithfulness(key_classifier(), key_texts(), methods=["occlusion"], examples=4, random_draws=draws)
        assert str(refused.value) == f"random_draws must be at least 1, got {draws}"


def test_huge_arguments_are_named_by_their_start_not_echoed_whole():
    # A method name, an option's name or its value echo back in one line, cut as errors.shown cuts them.
    for arguments, start in (({"methods": ["x" * 100_000]}, "unknown explanation method 'xxxxxxxx"),
                             ({"methods": ["occlusion"], **{"y" * 100_000: 1}}, "yyyyyyyy"),
                             ({"methods": ["integrated-gradients"], "steps": "z" * 100_000},
                              "integrated gradients needs steps from 1 to 1024 or 'auto', got 'zzzzzzzz")):
        with pytest.raises(AttnclfError) as refused:
            measure_faithfulness(key_classifier(), key_texts(), examples=4, random_draws=1, **arguments)
        assert str(refused.value).startswith(start) and len(str(refused.value)) < 300


def test_tokens_to_remove():
    assert [_tokens_to_remove(k, 7) for k in (1, 3, 5, "10%")] == [1, 3, 5, 1]
    assert [_tokens_to_remove(k, 2) for k in (1, 3, 5, "10%")] == [1, 2, 2, 1]
    assert _tokens_to_remove("10%", 256) == 26


def test_rank_agreement():
    up, down = np.array([0.1, 0.5, 0.9, 2.0]), np.array([3.0, 2.0, 1.0, 0.0])
    flat = np.array([1.0, 1.0, 1.0, 1.0])
    agreement = rank_agreement({"a": [up, up], "b": [up * 10, down], "c": [flat, flat]})
    assert agreement["a / b"] == pytest.approx(0.0)  # +1 on the first text, -1 on the second
    assert math.isnan(agreement["a / c"])  # no ranking in a constant score
    assert math.isnan(rank_agreement({"a": [up[:2]], "b": [down[:2]]})["a / b"])  # two tokens: left out


class VotingModel(BaseModel):
    """Pools token votes (+1 for "great", -0.3 for any other word) by attention focused on "great".

    With its learned weights it says pos whenever "great" is there; with uniform
    weights five other words outvote it.
    """

    def __init__(self, vocab_size: int, key: int):
        super().__init__()
        self.config = ModelConfig(vocab_size=vocab_size, num_classes=2)
        self.token_embedding = nn.Embedding(vocab_size, 1, padding_idx=0)
        self.key = key
        with torch.no_grad():
            self.token_embedding.weight.fill_(-0.3)
            self.token_embedding.weight[0] = 0.0
            self.token_embedding.weight[key] = 1.0

    def embed_tokens(self, input_ids):
        return self.token_embedding(input_ids)

    def forward(self, input_ids, attention_mask=None, *, token_embeddings=None, pooling_override=None,
                output_attentions=False):
        mask = input_ids != 0 if attention_mask is None else attention_mask
        votes = (self.embed_tokens(input_ids) if token_embeddings is None else token_embeddings).squeeze(-1)
        weights = masked_softmax(20.0 * (input_ids == self.key).float(), mask)
        if pooling_override is not None:
            weights = pooling_override
        pooled = (weights * votes).sum(1)
        return ModelOutput(torch.stack([-pooled, pooled], dim=1), weights)


def test_uniform_attention_check_catches_a_model_that_needs_its_weights():
    tok = tokenizer()
    clf = Classifier(VotingModel(tok.vocab_size, tok.backend.token_to_id("great")), tok, ["neg", "pos"],
                     torch.device("cpu"))
    data = key_texts(12)
    check = uniform_attention_check(clf, tok.encode(data.texts), np.asarray(data.labels))
    assert check == {"accuracy": 1.0, "uniform_accuracy": 0.0, "changed": 1.0, "examples": 12}
    # A model that ignores its pooling weights is unmoved by the check.
    keyed = key_classifier()
    assert uniform_attention_check(keyed, tok.encode(data.texts), np.asarray(data.labels))["changed"] == 0.0


def test_result_round_trips_through_json_and_tabulates():
    result = measure_faithfulness(key_classifier(attend_to="film"), key_texts(), examples=16, random_draws=2)
    again = FaithfulnessResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    table = result.table()
    assert "| attention |" in table and f"| {result.methods['attention'].verdict} |" in table
    assert "Uniform-attention check" in table and "completeness error" in table
    summary = summary_table([result, result])
    assert summary.count("| KeyTokenModel | key-texts | 16 |") == 2 and "| attention | 1.000 -> 1.000 |" in summary


def test_the_table_says_what_its_numbers_mean_and_that_the_test_favours_occlusion():
    # `attnclf faithfulness` printed "drop k=1", "AOPC", "+0.2416 ± 0.0396" and "most faithful: occlusion" with no
    # word on what they are, nor that occlusion ranks tokens by the very drop the test measures at k = 1.
    result = _result_with_aopcs(grad_input=0.3, occlusion=0.5)
    reading = result.reading()
    assert reading[0].startswith("Deletion test on 200 texts of demo: drop k=N is the mean fall in the predicted "
                                 "class's probability when the N tokens a method scores highest are removed")
    # The column is the mean over texts of each text's AOPC, and the verdict wants at least MIN_ADVANTAGE.
    assert "AOPC averages a text's drops over the distinct token counts the k give it" in reading[0]
    assert "counted once), then over the texts. vs random" in reading[0]
    assert (f"a method beats random when that exceeds two standard errors and is at least {MIN_ADVANTAGE} (and is "
            "worse than random when as far below)") in reading[0]
    assert "it says nothing about whether the predictions are right" in reading[0]
    assert reading[1] == ("Occlusion scores a token by the drop its own removal causes, what this test measures at "
                          "k=1: it is favoured by construction, and leading here does not show that it explains best.")
    assert all(paragraph in result.table() for paragraph in reading)  # what `attnclf faithfulness` prints
    assert not any("Occlusion" in paragraph for paragraph in _result_with_aopcs(grad_input=0.3).reading())



def test_faithfulness_of_a_run_another_process_is_writing_into_is_not_measured_beside_it(
        demo_run, tmp_path, capsys, held_elsewhere, files_but_the_lock):
    # faithfulness took no lock: measured on a run `train --resume` was writing, its faithfulness.json, newer than the
    # weights it measured, passed for a measurement of the weights that replaced them. Now a holder is named.
    from attnclf.rundir import LOCK_FILE

    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    before = files_but_the_lock(run)
    with held_elsewhere(run) as pid:
        assert main(["faithfulness", str(run), "--examples", "4", "--methods", "attention"]) == 2
        assert capsys.readouterr().err == (f"attnclf: error: {run} is being written by another attnclf process (pid "
                                           f"{pid}); wait for it to finish\n")
        assert files_but_the_lock(run) == before
    assert main(["faithfulness", str(run), "--examples", "4", "--methods", "attention"]) == 0  # held no more
    assert (run / "faithfulness.json").is_file() and not (run / LOCK_FILE).exists()

def test_faithfulness_command(demo_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    assert main(["faithfulness", str(run), "--examples", "8", "--steps", "8"]) == 0
    out = capsys.readouterr().out
    assert "| self-attn | demo | 8 |" in out and "random (10 draws)" in out
    assert "Deletion test on 8 texts of demo: drop k=N is" in out and "Rank agreement: " in out
    saved = FaithfulnessResult.from_dict(json.loads((run / "faithfulness.json").read_text()))
    assert saved.examples == 8 and set(saved.methods) == {"attention", "rollout", "grad-input",
                                                          "integrated-gradients", "occlusion"}
    assert main(["faithfulness", str(run), "--examples", "0"]) == 2
    assert main(["faithfulness", str(run), "--methods", "saliency"]) == 2
    assert capsys.readouterr().err.count("\n") == 2
    assert main(["faithfulness", str(run), "--methods", "", "--examples", "8"]) == 2  # (not every method, slowly)
    assert capsys.readouterr().err == "attnclf: error: --methods is empty\n"


def test_measure_run_writes_what_the_command_writes_and_refuses_a_held_run(
        demo_run, tmp_path, held_elsewhere, files_but_the_lock):
    # The command held the run, measured and wrote faithfulness.json itself: from Python, none of it could be had
    # but by copying the command's body. Now measure_run does it, and the command calls it.
    from attnclf.explain.faithfulness import measure_run

    by_command, by_library = tmp_path / "command", tmp_path / "library"
    for run in (by_command, by_library):
        shutil.copytree(demo_run, run)
    assert main(["faithfulness", str(by_command), "--examples", "6", "--methods", "occlusion,grad-input",
                 "--seed", "3"]) == 0
    result = measure_run(by_library, methods=["occlusion", "grad-input"], examples=6, seed=3)

    def saved(run) -> list:  # (all but the seconds it took, in the file's order)
        return [(key, value) for key, value in json.loads((run / "faithfulness.json").read_text()).items()
                if key != "seconds"]

    assert saved(by_library) == saved(by_command) == [(k, v) for k, v in result.to_dict().items() if k != "seconds"]
    assert list(result.methods) == ["occlusion", "grad-input"] and result.examples == 6
    # Its errors name its arguments, not the command's flags, each on one line.
    for arguments, message in (({"methods": ""}, "methods is empty"),
                               ({"examples": 0}, "examples must be at least 1, got 0"),
                               ({"methods": "saliency"}, "unknown explanation method 'saliency'; choose one of"),
                               ({"seed": -1}, "seed must be at least 0 and below 4294967296, got -1")):
        with pytest.raises(AttnclfError) as refused:
            measure_run(by_library, **arguments)
        assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
    before = files_but_the_lock(by_library)
    with held_elsewhere(by_library) as pid:
        with pytest.raises(AttnclfError) as refused:
            measure_run(by_library, methods=["occlusion"], examples=4)
        assert files_but_the_lock(by_library) == before
    assert str(refused.value) == (f"{by_library} is being written by another attnclf process (pid {pid}); wait for "
                                  f"it to finish")
    # A run not finished training is measured (its best weights so far), and said to be through log.
    (by_library / "metrics.json").unlink()
    notes = []
    measure_run(by_library, methods=["occlusion"], examples=4, log=notes.append)
    assert len(notes) == 1 and notes[0].startswith(f"warning: {by_library} has not finished training")


def _multi_label_voter(thresholds, temperature: float = 1.0) -> Classifier:
    tok = tokenizer()
    return Classifier(VotingModel(tok.vocab_size, tok.backend.token_to_id("great")), tok, ["neg", "pos"],
                      torch.device("cpu"), {"settings": {"data": {"multi_label": True}}},
                      thresholds=np.asarray(thresholds, dtype=np.float64), temperature=temperature)


@pytest.mark.parametrize("temperature", [1.0, 3.0])
def test_the_uniform_check_decides_a_multi_label_set_as_predict_does_at_an_exact_tie(temperature):
    # A threshold a hair above a text's float32 probability (closer than float32 can tell apart): predict leaves
    # the label out, so the check must too, and with a calibrated run's temperature as predict applies it.
    texts = ["great film", "the plot"]
    probe = _multi_label_voter([0.5, 0.5], temperature)
    probabilities = probe.predict_proba(texts)
    tie = float(probabilities[0, 1]) * (1 + 2 ** -30)
    assert np.float32(tie) == probabilities[0, 1] and tie > float(probabilities[0, 1])
    clf = _multi_label_voter([0.5, tie], temperature)
    predicted = [[clf.label_names.index(label) for label in p.labels] for p in clf.predict(texts, tokens=False)]
    check = uniform_attention_check(clf, clf.tokenizer.encode(texts), predicted)
    assert check["accuracy"] == 1.0


def test_the_uniform_check_decides_as_a_bf16_classifier_predicts():
    # The check ran its own float32 passes: at a threshold between a bf16 classifier's probability and float32's,
    # the learned weights' decisions it scored were not the ones predict makes.
    texts, cpu, multi_label = key_texts(12).texts, torch.device("cpu"), {"settings": {"data": {"multi_label": True}}}
    model, labels = tiny("self-attn"), ["a", "b", "c"]
    exact = Classifier(model, tokenizer(), labels, cpu, multi_label).predict_proba(texts)
    clf = Classifier(model, tokenizer(), labels, cpu, multi_label, bf16=True)
    rounded = clf.predict_proba(texts)
    text, label = np.unravel_index(np.abs(rounded - exact).argmax(), exact.shape)
    assert rounded[text, label] != exact[text, label]
    clf.thresholds[label] = (float(rounded[text, label]) + float(exact[text, label])) / 2  # (they decide apart)
    predicted = [[labels.index(name) for name in p.labels] for p in clf.predict(texts, tokens=False)]
    assert uniform_attention_check(clf, clf.tokenizer.encode(texts), predicted)["accuracy"] == 1.0


def test_the_uniform_check_batches_both_passes_as_predict_does():
    # Predict's batches stay within a padded-token budget (long texts come fewer a batch) and run under its
    # autocast; the check's own, batch_size texts whatever their length, in float32, could decide otherwise.
    texts = key_texts(12).texts
    clf = Classifier(tiny("self-attn"), tokenizer(), ["a", "b", "c"], torch.device("cpu"), bf16=True)
    clf.max_tokens = 20
    passes = []  # (ids' shape, under autocast, pooling weights overridden) per forward pass

    def record(module, args, kwargs):
        passes.append((tuple(args[0].shape), torch.is_autocast_enabled("cpu"), "pooling_override" in kwargs))

    clf.model.register_forward_pre_hook(record, with_kwargs=True)
    clf.predict_proba(texts)
    predicted = [(shape, autocast) for shape, autocast, _ in passes]
    assert len(predicted) > 1 and all(rows * length <= 20 for (rows, length), _ in predicted)
    passes.clear()
    uniform_attention_check(clf, clf.tokenizer.encode(texts), [0] * len(texts))
    assert [(shape, autocast) for shape, autocast, uniform in passes if not uniform] == predicted
    assert [(shape, autocast) for shape, autocast, uniform in passes if uniform] == predicted


def test_the_deletion_test_batches_within_the_classifiers_token_cap_and_measures_as_without_it(monkeypatch):
    # Its probability passes (each text with its top k tokens removed, per k and order) and the methods' batches
    # held batch_size texts whatever their length; within the cap they are regrouped, the same rows measured.
    clf = Classifier(tiny("self-attn"), tokenizer(), ["a", "b", "c"], torch.device("cpu"))
    results, shapes = {}, recorded_batches(monkeypatch)
    for cap in (None, 20):
        clf.max_tokens = cap
        shapes.clear()
        results[cap] = measure_faithfulness(clf, key_texts(12), examples=12, random_draws=3, steps=16)
        if cap is None:
            uncapped_shapes = shapes.copy()
    assert max(rows * length for rows, length in uncapped_shapes) > 20
    assert shapes and all(rows * length <= 20 or rows == 1 for rows, length in shapes), shapes
    capped, uncapped = results[20], results[None]
    assert capped.methods.keys() == uncapped.methods.keys()
    for name, measured in uncapped.methods.items():
        assert capped.methods[name].drops == pytest.approx(measured.drops, abs=1e-6), name
        assert capped.methods[name].aopc == pytest.approx(measured.aopc, abs=1e-6), name
    assert capped.random_drops == pytest.approx(uncapped.random_drops, abs=1e-6)
    # Not occlusion's rank agreement: a repeated word's two removals are the same text, tied exactly in one batch and
    # 1e-7 apart in two differently padded ones, and Spearman's ranks read the tie (as any change of batches would).
    assert ({pair: rho for pair, rho in capped.agreement.items() if "occlusion" not in pair}
            == pytest.approx({pair: rho for pair, rho in uncapped.agreement.items() if "occlusion" not in pair},
                             abs=1e-6))


def test_a_runs_section_is_headed_by_its_folder_model_data_texts_and_time():
    # `attnclf faithfulness` prints each run's section as the result gives it: the header is the library's.
    result = _result_with_aopcs(occlusion=0.2)
    assert result.section("runs/demo") == f"## runs/demo: self-attn on demo, 200 texts (1s)\n\n{result.table()}"
