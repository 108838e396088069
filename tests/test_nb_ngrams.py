"""The naive-Bayes-weighted n-gram branch of self-attn (NBSVM as a layer) and its place in a run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from attnclf.classifier import Classifier
from attnclf.errors import AttnclfError
from attnclf.models import build_model
from attnclf.models.ngrams import NaiveBayesNgrams, buckets_for, distinct_bigrams
from attnclf.text.tokenizer import TokenizerConfig
from attnclf.training.run import train_run
from attnclf.training.settings import DataSettings, RunSettings
from attnclf.training.trainer import TrainConfig


def test_each_distinct_word_and_bigram_counts_once_and_padding_never():
    layer = NaiveBayesNgrams(vocab_size=10, buckets=50, num_classes=2)
    ids = torch.tensor([[5, 6, 5, 6, 0, 0]])  # words 5, 6; bigrams (5,6) twice and (6,5)
    feature_ids, counted = layer.features(ids)
    assert sorted(feature_ids[counted].tolist())[:2] == [5, 6]
    assert len(feature_ids[counted].unique()) == int(counted.sum()) == 4
    assert counted[0, :2].all() and not counted[0, 2:6].any()  # the repeated words count at their first copy
    unpadded = torch.tensor([[5, 6, 5, 6]])
    feature_ids_unpadded, counted_unpadded = layer.features(unpadded)
    assert sorted(feature_ids_unpadded[counted_unpadded].tolist()) == sorted(feature_ids[counted].tolist())


def test_token_evidence_adds_up_to_the_logits_and_splits_each_bigram_between_its_tokens():
    layer = NaiveBayesNgrams(vocab_size=10, buckets=50, num_classes=2)
    with torch.no_grad():
        layer.log_count_ratio.normal_()
        layer.weight.normal_()
    ids = torch.tensor([[5, 6, 7, 0]])
    evidence = layer.token_evidence(ids)
    torch.testing.assert_close(evidence.sum(dim=1) + layer.bias, layer(ids))
    assert evidence[0, 3].abs().sum() == 0  # padding carries nothing
    scaled = layer.weight * layer.log_count_ratio
    five_six, six_seven = layer.features(ids)[0][0, 4:6]  # the bigram features follow the 4 word features
    torch.testing.assert_close(evidence[0, 0], scaled[5] + 0.5 * scaled[five_six])
    torch.testing.assert_close(evidence[0, 1], scaled[6] + 0.5 * scaled[five_six] + 0.5 * scaled[six_seven])


def test_fit_gives_a_class_its_own_words_and_the_other_class_the_opposite_ratio():
    layer = NaiveBayesNgrams(vocab_size=10, buckets=50, num_classes=2)
    ids = torch.tensor([[3, 4, 0], [3, 4, 0], [5, 4, 0], [5, 4, 4]])
    layer.fit([(ids, torch.tensor([1, 1, 0, 0]))])
    ratio = layer.log_count_ratio
    assert ratio[3, 1] > 0 > ratio[3, 0]  # word 3 only in class 1 texts
    assert ratio[5, 0] > 0 > ratio[5, 1]
    torch.testing.assert_close(ratio[:, 0], -ratio[:, 1])  # two classes: one-vs-rest is symmetric
    assert abs(ratio[4, 1]) < ratio[3, 1]  # in every text: evidence for neither


def test_multi_label_rows_are_counted_per_label():
    layer = NaiveBayesNgrams(vocab_size=10, buckets=50, num_classes=3)
    ids = torch.tensor([[3, 0], [5, 0]])
    layer.fit([(ids, torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))])
    ratio = layer.log_count_ratio
    assert ratio[3, 0] > 0 and ratio[3, 2] < 0 and ratio[5, 2] > 0 and ratio[5, 0] < 0


def tiny(**overrides):
    config = dict(vocab_size=50, d_model=16, heads=2, ff_dim=32, layers=1, max_len=32, nb_ngram_buckets=101)
    return build_model("self-attn", **(config | overrides)).eval()


def test_the_branch_adds_its_logits_and_padding_still_changes_nothing():
    model = tiny()
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        model.ngram_logits.log_count_ratio.normal_()
        model.ngram_logits.weight.normal_()
        without_branch = model.head(model.summarize(ids).vector[:, :16])
        logits = model(ids).logits
        padded = torch.tensor([[5, 6, 7, 8, 0, 0]])
        torch.testing.assert_close(model(padded, padded != 0).logits, logits)
    torch.testing.assert_close(logits - without_branch, model.ngram_logits(ids))
    assert not torch.allclose(logits, without_branch)


@pytest.mark.parametrize("buckets", [1, -2])
def test_bad_bucket_counts_are_one_line_errors(buckets):
    with pytest.raises(AttnclfError, match="nb_ngram_buckets"):
        tiny(nb_ngram_buckets=buckets)


def settings(output, epochs=2) -> RunSettings:
    return RunSettings(
        data=DataSettings(dataset="demo", max_train_examples=300),
        tokenizer=TokenizerConfig(min_frequency=1, max_len=32),
        model_config={"d_model": 16, "layers": 1, "heads": 2, "nb_ngram_buckets": 4096},
        train=TrainConfig(epochs=epochs, batch_size=32, patience=0, checkpoint_seconds=0),
        output=str(output),
        device="cpu",
        report=False,  # (its plots took 5 of a run's 5.5 s; no test here reads it)
    )


def test_distinct_bigrams_counts_each_pair_of_neighbouring_ids_once_across_texts():
    assert distinct_bigrams([[5, 6, 5, 6], [6, 5], [7], []]) == 2  # (5, 6) and (6, 5); a text of one token has none
    assert distinct_bigrams([[1, 2], [2, 1], [1, 20000]]) == 3  # (ids as wide as a vocabulary of any size)


def test_buckets_for_holds_sixteen_per_distinct_bigram_in_a_power_of_two_within_the_cap():
    # SST-2's 6,920 training sentences have 62,856 distinct bigrams under the file recipe's tokenizer: 2^20 buckets,
    # the cap, as before; 300 of them (bench/estimator_buckets.py's sample) have 2,744: 2^16
    assert buckets_for(62856, cap=1048576) == 1048576
    assert buckets_for(2744, cap=1048576) == 65536
    assert buckets_for(4096, cap=1048576) == 65536 and buckets_for(4097, cap=1048576) == 131072
    assert buckets_for(0, cap=1048576) == 2 and buckets_for(10 ** 9, cap=1000) == 1000


def test_a_run_counts_the_training_set_and_the_saved_model_scores_as_the_trained_one(tmp_path, capsys):
    from attnclf.cli import main

    result = train_run(settings(tmp_path / "run"), progress=False)
    saved = load_file(str(result.run_dir / "model.safetensors"))
    assert saved["ngram_logits.log_count_ratio"].abs().sum() > 0
    loaded = Classifier.load(result.run_dir, device="cpu")
    torch.testing.assert_close(loaded.model.ngram_logits.log_count_ratio, saved["ngram_logits.log_count_ratio"])
    # The trained model scored the test split in memory; the loaded one must score it the same.
    assert main(["evaluate", str(result.run_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == result.metrics["accuracy"]


def test_the_count_reads_each_text_once_even_under_the_balanced_sampler():
    from attnclf.text.batching import BucketBatches
    from attnclf.training.trainer import count_ngram_prior

    sequences, labels = [[5 + i % 7, 20 + i % 3] for i in range(40)], [0] * 36 + [1] * 4
    counted = []
    for balanced in (False, True):
        model = tiny()
        count_ngram_prior(model, BucketBatches(sequences, labels, batch_size=8, shuffle=True, seed=1,
                                               balanced=balanced))
        counted.append(model.ngram_logits.log_count_ratio.clone())
    assert counted[0].abs().sum() > 0
    torch.testing.assert_close(counted[1], counted[0])


def test_a_token_the_mask_hides_counts_as_padding():
    model = tiny()
    with torch.no_grad():
        model.ngram_logits.log_count_ratio.normal_()
        model.ngram_logits.weight.normal_()
        ids = torch.tensor([[5, 6, 5, 7, 8]])
        hidden = torch.tensor([[False, True, True, True, True]])
        torch.testing.assert_close(model(ids, hidden).logits, model(torch.tensor([[0, 6, 5, 7, 8]]), hidden).logits)


def test_the_scikit_learn_estimator_counts_too():
    from attnclf.sklearn import AttentionTextClassifier

    texts = ["a good film", "a great film", "a dull film", "a bad film"] * 10
    estimator = AttentionTextClassifier(epochs=1, d_model=16, heads=2, layers=1, min_frequency=1,
                                        model_config={"nb_ngram_buckets": 64}).fit(texts, [1, 1, 0, 0] * 10)
    assert estimator.classifier_.model.ngram_logits.log_count_ratio.abs().sum() > 0


def test_a_resumed_run_keeps_its_counts_and_reaches_the_uninterrupted_result(tmp_path, resume_after_interruption):
    straight = train_run(settings(tmp_path / "straight", epochs=2), progress=False)
    resumed = resume_after_interruption(settings(tmp_path / "resumed", epochs=2), epoch=2)
    a = load_file(str(straight.run_dir / "model.safetensors"))
    b = load_file(str(resumed.run_dir / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_windowed_and_multi_label_runs_count_their_training_set(tmp_path):
    from dataclasses import replace

    from attnclf.text.windows import WindowConfig

    windowed = replace(settings(tmp_path / "windowed", epochs=1), windows=WindowConfig(max_windows=3))
    windowed.tokenizer = TokenizerConfig(min_frequency=1, max_len=8)  # demo reviews span several windows
    result = train_run(windowed, progress=False)
    assert load_file(str(result.run_dir / "model.safetensors"))["base.ngram_logits.log_count_ratio"].abs().sum() > 0

    topics = replace(settings(tmp_path / "topics", epochs=1),
                     data=DataSettings(dataset="topics", max_train_examples=300, multi_label=True))
    result = train_run(topics, progress=False)
    ratio = load_file(str(result.run_dir / "model.safetensors"))["ngram_logits.log_count_ratio"]
    assert ratio.shape[1] > 2 and ratio.abs().sum() > 0


def test_the_branch_exports_to_onnx_with_the_same_logits():
    import onnxruntime

    from attnclf.export.onnx import onnx_graph

    model = tiny()
    with torch.no_grad():
        model.ngram_logits.log_count_ratio.normal_()
        model.ngram_logits.weight.normal_()
    session = onnxruntime.InferenceSession(onnx_graph(model))
    ids = torch.tensor([[5, 6, 5, 7, 8, 6, 5, 0, 0], [9, 9, 9, 3, 0, 0, 0, 0, 0]])  # repeats and padding
    logits = session.run(None, {"input_ids": ids.numpy(), "attention_mask": (ids != 0).numpy()})[0]
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(logits), model(ids, ids != 0).logits, atol=1e-5, rtol=1e-5)


def test_explanations_split_the_log_odds_between_the_branches(tmp_path, demo_run):
    run = train_run(settings(tmp_path / "run"), progress=False).run_dir
    clf = Classifier.load(run, device="cpu")
    (explanation,) = clf.explain(["a wonderful film, not dull"], method="attention")
    p = explanation.probability
    assert sum(explanation.branch_margins.values()) == pytest.approx(float(np.log(p / (1 - p))), abs=1e-4)
    ids = torch.tensor(clf.tokenizer.encode(["a wonderful film, not dull"]))
    with torch.no_grad():
        ngram = clf.model.ngram_logits(ids)[0]
    target = clf.label_names.index(explanation.target)
    assert explanation.branch_margins["n-gram"] == pytest.approx(float(ngram[target] - ngram[1 - target]), abs=1e-5)
    assert explanation.to_dict()["branch_margins"] == explanation.branch_margins
    (single,) = Classifier.load(demo_run, device="cpu").explain(["a wonderful film"], method="attention")
    assert single.branch_margins is None and "branch_margins" not in single.to_dict()


def test_a_calibrated_runs_branch_margins_add_up_to_the_log_odds_it_reports(tmp_path):
    # attnclf calibrate's temperature divides the logits: margins of the raw logits were T times the log-odds shown.
    run = train_run(settings(tmp_path / "run"), progress=False).run_dir
    text = "a wonderful film, not dull"
    (raw,) = Classifier.load(run, device="cpu").explain([text], method="attention")
    (run / "temperature.json").write_text(json.dumps({"temperature": 0.4}))
    (explanation,) = Classifier.load(run, device="cpu").explain([text], method="attention")
    p = explanation.probability
    assert sum(explanation.branch_margins.values()) == pytest.approx(float(np.log(p / (1 - p))), abs=1e-4)
    for name, margin in raw.branch_margins.items():
        assert explanation.branch_margins[name] == pytest.approx(margin / 0.4, rel=1e-5)


def test_with_three_classes_a_branch_margin_is_its_target_logit_minus_the_mean_of_the_others():
    from attnclf.explain.explanation import _branch_margins

    model = tiny(num_classes=3)
    with torch.no_grad():
        model.ngram_logits.log_count_ratio.normal_()
        model.ngram_logits.weight.normal_()
        ids = torch.tensor([[5, 6, 7, 8]])
        parts = model.branch_logits(model.summarize(ids).vector)
    (margins,) = _branch_margins(model, [[5, 6, 7, 8]], np.array([2]), "cpu", 8)
    for name, logits in parts.items():
        z = logits[0]
        assert margins[name] == pytest.approx(float(z[2] - (z[0] + z[1]) / 2), abs=1e-5)
    torch.testing.assert_close(sum(parts.values()), model(ids).logits)


@pytest.mark.parametrize("classes, buckets", [(2, 1048576), (4, 1048576), (20, 131072), (150, 16384)])
def test_a_bucket_budget_halves_the_bigram_buckets_until_they_fit_the_classes(classes, buckets):
    # The file recipe's branch: 2^20 buckets cost about 8 MiB of model per class; the budget (bucket x class weights)
    # bounds them, so a 150-class file does not build a 1.2 GiB model. Outlines: the shapes, no memory.
    from attnclf.models.memory import outlining

    with outlining():
        model = build_model("self-attn", vocab_size=50, num_classes=classes, max_len=32, d_model=16, heads=2,
                            nb_ngram_buckets=1048576, nb_ngram_bucket_budget=4194304)
    branch = model.ngram_logits
    assert branch.buckets == buckets
    assert branch.weight.shape == branch.log_count_ratio.shape == (50 + buckets, classes)
    assert model.config.nb_ngram_buckets == 1048576  # the config stays as given: it rebuilds the same model
    with outlining():
        unbounded = build_model("self-attn", vocab_size=50, num_classes=classes, max_len=32, d_model=16, heads=2,
                                nb_ngram_buckets=1048576)
    assert unbounded.ngram_logits.buckets == 1048576


def test_an_odd_bucket_count_halves_to_two_buckets_at_least_and_a_budget_below_that_is_refused():
    assert tiny(nb_ngram_buckets=101, nb_ngram_bucket_budget=4).ngram_logits.buckets == 2  # 101, 50, 25, 12, 6, 3, 2
    assert tiny(nb_ngram_buckets=101, nb_ngram_bucket_budget=12).ngram_logits.buckets == 6
    assert tiny(nb_ngram_buckets=0, nb_ngram_bucket_budget=4).ngram_logits is None  # no branch: nothing to bound
    with pytest.raises(AttnclfError, match=r"^model field nb_ngram_bucket_budget 3 holds fewer than the 2 buckets x 2 "
                                           r"classes .*nb_ngram_buckets=0"):
        tiny(nb_ngram_bucket_budget=3)
    with pytest.raises(AttnclfError, match=r"^model field nb_ngram_bucket_budget must be at least 0, got -1$"):
        tiny(nb_ngram_bucket_budget=-1)


def test_a_budgeted_branch_saves_loads_and_exports_as_it_trained(tmp_path, capsys):
    # Nothing but the config records the bound: loading (evaluate, resume) and export rebuild the same model from it.
    import onnxruntime

    from attnclf.cli import main
    from attnclf.export.onnx import onnx_graph

    run = settings(tmp_path / "run", epochs=1)
    run.model_config = {**run.model_config, "nb_ngram_bucket_budget": 2048}  # 4096 x 2 classes: halved twice, to 1024
    result = train_run(run, progress=False)
    loaded = Classifier.load(result.run_dir, device="cpu")
    assert loaded.model.ngram_logits.buckets == 1024
    assert load_file(str(result.run_dir / "model.safetensors"))["ngram_logits.weight"].shape[0] == \
        loaded.tokenizer.vocab_size + 1024
    assert main(["evaluate", str(result.run_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == result.metrics["accuracy"]
    ids = torch.nn.functional.pad(torch.tensor(loaded.tokenizer.encode(["a wonderful film, not dull"])), (0, 3))
    session = onnxruntime.InferenceSession(onnx_graph(loaded.model))
    logits = session.run(None, {"input_ids": ids.numpy(), "attention_mask": (ids != 0).numpy()})[0]
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(logits), loaded.model(ids, ids != 0).logits, atol=1e-5, rtol=1e-5)
