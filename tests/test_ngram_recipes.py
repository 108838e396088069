"""self-attn's hashed-bigram features, and the real-corpus recipes that use them."""

from __future__ import annotations

import pytest
import torch

from attnclf.cli import build_parser, build_settings
from attnclf.errors import AttnclfError
from attnclf.models import build_model
from attnclf.models.ngrams import bigram_buckets

REAL_CORPUS_RECIPES = ["imdb", "sst2", "sst2-sentences", "20newsgroups"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models; a second thread only waits on a busy machine
    yield
    torch.set_num_threads(threads)


def tiny(**overrides):
    config = dict(vocab_size=50, d_model=16, heads=2, ff_dim=32, layers=1, max_len=32, ngram_buckets=97)
    return build_model("self-attn", **(config | overrides)).eval()


def test_bigram_buckets_depend_on_order_and_are_zero_next_to_padding():
    ids = torch.tensor([[5, 6, 7, 0], [6, 5, 7, 0]])
    buckets = bigram_buckets(ids, 1000)
    assert buckets[0, 0] != buckets[1, 0]  # (5, 6) and (6, 5) are different bigrams
    assert buckets[0, 2:].tolist() == [0, 0]  # "7 <pad>" and "<pad> <pad>"
    assert ((buckets[:, :2] >= 1) & (buckets[:, :2] < 1000)).all()


def test_bigrams_change_the_embedding_and_padding_never_does():
    model = tiny()
    ids = torch.tensor([[5, 6, 7, 8]])
    assert not torch.equal(model.embed_tokens(ids), model.token_embedding(ids))
    padded = torch.tensor([[5, 6, 7, 8, 0, 0, 0]])
    with torch.no_grad():
        torch.testing.assert_close(model(padded, padded != 0).logits, model(ids, ids != 0).logits)


def test_token_embeddings_override_includes_the_bigrams():
    model = tiny()
    ids = torch.tensor([[5, 6, 7, 8, 0]])
    with torch.no_grad():
        normal = model(ids, ids != 0).logits
        override = model(ids, ids != 0, token_embeddings=model.embed_tokens(ids)).logits
    torch.testing.assert_close(override, normal)


def test_word_order_reaches_the_bigram_table_without_positions():
    # With positions off and mean pooling, only the bigrams can tell "a b" from "b a".
    model = tiny(positional="none", pooling="mean", layers=0)
    with torch.no_grad():
        ab, ba = model(torch.tensor([[5, 6]])).logits, model(torch.tensor([[6, 5]])).logits
    assert not torch.allclose(ab, ba)
    without = tiny(positional="none", pooling="mean", layers=0, ngram_buckets=0)
    with torch.no_grad():
        torch.testing.assert_close(without(torch.tensor([[5, 6]])).logits, without(torch.tensor([[6, 5]])).logits)


def test_padding_bucket_gets_no_gradient():
    model = tiny().train()
    ids = torch.tensor([[5, 6, 7, 0, 0]])
    model(ids, ids != 0).logits.sum().backward()
    assert model.bigram_embedding.weight.grad[0].abs().sum() == 0


@pytest.mark.parametrize("buckets", [1, -3])
def test_bad_bucket_counts_are_one_line_errors(buckets):
    with pytest.raises(AttnclfError, match="ngram_buckets"):
        tiny(ngram_buckets=buckets)


@pytest.mark.parametrize("dataset", REAL_CORPUS_RECIPES)
def test_real_corpus_recipes_build_their_model(dataset):
    args = build_parser().parse_args(["train", "--dataset", dataset, "--output", "unused"])
    settings = build_settings(args)
    model = build_model(settings.model, vocab_size=100, max_len=settings.tokenizer.max_len, **settings.model_config)
    assert settings.model_config, "a real-corpus recipe tunes its model"
    for field, value in settings.model_config.items():
        assert getattr(model.config, field) == value, field
    assert settings.train.epochs >= 1 and settings.tokenizer.max_len >= 64


def test_token_dropout_hides_tokens_in_training_only():
    torch.manual_seed(0)
    model = tiny(token_dropout=0.5)
    ids = torch.randint(1, 50, (8, 20))
    ids[:, 15:] = 0  # padding stays hidden whatever is drawn
    plain = tiny()
    plain.load_state_dict(model.state_dict())
    assert torch.equal(model(ids).logits, plain(ids).logits)  # eval mode: the switch does nothing
    model.train()
    model.config.dropout = 0.0
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    weights = model(ids).pooling_weights
    hidden = (weights[:, :15] == 0).float().mean().item()
    assert 0.3 < hidden < 0.7  # about half the real tokens get no pooling weight
    assert (weights[:, 15:] == 0).all() and (weights.sum(dim=1) > 0.99).all()


def test_token_dropout_keeps_one_token_and_checks_its_rate():
    from attnclf.models.classifiers import drop_tokens

    mask = torch.tensor([[True, True, True, False], [False, False, False, False]])
    kept = drop_tokens(mask, 0.999999)
    assert kept[0].sum() == 1 and not kept[1].any()  # an empty text stays empty
    with pytest.raises(AttnclfError, match="token_dropout"):
        tiny(token_dropout=1.0)


def test_embedding_norm_makes_the_model_blind_to_the_embeddings_scale():
    torch.manual_seed(0)
    ids = torch.randint(1, 50, (3, 12))
    for norm, blind in ((True, True), (False, False)):
        model = tiny(embedding_norm=norm, ngram_buckets=0, positional="none")
        before = model(ids).logits
        with torch.no_grad():
            model.token_embedding.weight.mul_(10)
        assert torch.allclose(model(ids).logits, before, atol=1e-4) == blind


def test_a_self_attn_model_trained_on_a_file_starts_from_the_file_recipe():
    # On small files these settings led the general defaults by 2.5-5.8 points of validation (BENCHMARKS.md, Small
    # data); other models and multi-label runs were not measured with them, and a flag still wins.
    from attnclf.models.memory import outlining
    from attnclf.recipes import FILE_SELF_ATTN

    def settings(*flags):
        return build_settings(build_parser().parse_args(["train", "--train-file", "t.csv", "--output", "unused",
                                                         *flags]))

    assert settings().model_config == FILE_SELF_ATTN
    assert FILE_SELF_ATTN["d_model"] == 64 and FILE_SELF_ATTN["positional"] == "sinusoidal"
    # Its n-gram branch keeps 2^20 buckets for 2 and 4 classes, as measured, and fewer for more classes.
    for classes, buckets in [(2, 1048576), (4, 1048576), (20, 131072), (150, 16384)]:
        with outlining():
            model = build_model("self-attn", vocab_size=100, max_len=64, num_classes=classes,
                                **settings().model_config)
        assert model.ngram_logits.buckets == buckets
    assert settings("--set", "d_model=32").model_config == FILE_SELF_ATTN | {"d_model": 32}
    assert settings("--set", "nb_ngram_bucket_budget=0").model_config["nb_ngram_bucket_budget"] == 0
    assert settings("--model", "boe").model_config == {}
    assert settings("--model", "transformer-mean").model_config == {}
    assert settings("--multi-label").model_config == {}
    # A named dataset keeps its recipe, or the general defaults where it has none.
    named = build_settings(build_parser().parse_args(["train", "--dataset", "ag_news", "--output", "unused"]))
    assert named.model_config == {}
    assert build_settings(build_parser().parse_args(["train", "--dataset", "sst2", "--output", "unused"])) \
        .model_config["nb_ngram_buckets"] == 1048576


def test_a_self_attn_model_trained_on_a_file_reads_the_file_recipes_tokens():
    # Longer inputs gained validation on files of long texts and changed nothing on short ones (BENCHMARKS.md, Small
    # data): the file recipe's tokenizer part, for a single-label self-attn only; a flag still wins.
    from attnclf.recipes import FILE_SELF_ATTN_TOKENIZER
    from attnclf.text.tokenizer import TokenizerConfig

    def tokenizer(*flags):
        return build_settings(build_parser().parse_args(["train", "--train-file", "t.csv", "--output", "unused",
                                                         *flags])).tokenizer

    assert tokenizer() == TokenizerConfig(**FILE_SELF_ATTN_TOKENIZER)
    assert tokenizer().max_len != TokenizerConfig().max_len  # (else this test would test nothing)
    general = TokenizerConfig()
    assert tokenizer("--model", "boe") == general
    assert tokenizer("--model", "transformer-mean") == general
    assert tokenizer("--multi-label") == general
    assert tokenizer("--max-len", "128") == TokenizerConfig(**FILE_SELF_ATTN_TOKENIZER | {"max_len": 128})
    assert tokenizer("--truncation", "tail").truncation == "tail"
    assert tokenizer("--truncation", "tail").max_len == FILE_SELF_ATTN_TOKENIZER["max_len"]
    # A named dataset keeps its recipe's tokens, or the general defaults where it has none.
    named = build_settings(build_parser().parse_args(["train", "--dataset", "ag_news", "--output", "unused"]))
    assert named.tokenizer == general
    assert build_settings(build_parser().parse_args(["train", "--dataset", "imdb", "--output", "unused"])) \
        .tokenizer.max_len == 800


def test_past_editions_of_the_file_recipe_stay_as_they_were_and_no_caller_can_change_one():
    # A run begun under an edition is told apart by rebuilding its command under it: an edition edited since, or
    # changed by a caller, would turn such runs into strangers.
    from attnclf.recipes import (FILE_BUCKETS_SIZED, FILE_RECIPES, FILE_SELF_ATTN, FILE_SELF_ATTN_TOKENIZER,
                                 file_recipe)

    model_config = {"d_model": 64, "ff_dim": 256, "dropout": 0.3, "positional": "sinusoidal",
                    "nb_ngram_buckets": 1048576, "nb_ngram_bucket_budget": 4194304}
    assert FILE_RECIPES[:-1] == (
        {},
        {"model_config": model_config},
        {"model_config": model_config, "tokenizer": {"max_len": 512}},
    )
    assert FILE_RECIPES[-1] == {"model_config": FILE_SELF_ATTN, "tokenizer": FILE_SELF_ATTN_TOKENIZER,
                                "ngram_buckets_sized": FILE_BUCKETS_SIZED}
    for edition in FILE_RECIPES:
        with pytest.raises(TypeError):
            edition["tokenizer"] = {"max_len": 1}
        for part in edition.values():
            with pytest.raises(TypeError):
                part["max_len"] = 1
    for latest in (file_recipe()["model_config"], FILE_SELF_ATTN, FILE_SELF_ATTN_TOKENIZER):
        with pytest.raises(TypeError):
            latest["d_model"] = 1
    assert all(FILE_RECIPES[edition]["model_config"] is not FILE_SELF_ATTN for edition in (1, 2))  # (copies: changing
    # the latest leaves them be)


def test_a_runs_config_records_the_file_recipes_tokens(tmp_path):
    import json

    from attnclf.cli import main
    from attnclf.recipes import FILE_SELF_ATTN_TOKENIZER
    from attnclf.text.tokenizer import TokenizerConfig

    data = tmp_path / "reviews.csv"
    data.write_text("text,label\n" + "".join(f"{word} film number {i},{label}\n" for i in range(8)
                                             for word, label in [("great", "pos"), ("dull", "neg")]))
    common = ["train", "--train-file", str(data), "--min-frequency", "1", "--epochs", "1", "--no-report",
              "--threads", "1", "--quiet"]
    recorded = {}
    for model in ("self-attn", "boe"):
        assert main([*common, "--model", model, "--set", "layers=1" if model == "self-attn" else "embed_dim=8",
                     "--output", str(tmp_path / model)]) == 0
        recorded[model] = json.loads((tmp_path / model / "config.json").read_text())["settings"]["tokenizer"]
    assert {name: recorded["self-attn"][name] for name in FILE_SELF_ATTN_TOKENIZER} == FILE_SELF_ATTN_TOKENIZER
    assert recorded["boe"]["max_len"] == TokenizerConfig().max_len


def test_the_estimator_starts_a_self_attn_where_train_on_a_file_does(tmp_path):
    # It built the general defaults (d_model 128, no n-gram branch) while `attnclf train --train-file` built the file
    # recipe, which led them on small files: the same texts gave another model through the estimator.
    from attnclf.classifier import Classifier
    from attnclf.sklearn import AttentionTextClassifier

    texts = ["a good film", "a great film", "a dull film", "a bad film"] * 4
    labels = ["pos", "pos", "neg", "neg"] * 4

    def fitted(model="self-attn", **params):
        return AttentionTextClassifier(model, layers=1, epochs=1, batch_size=8, max_len=8, min_frequency=1,
                                       validation_fraction=0, random_state=0, **params).fit(texts, labels)

    command = build_settings(build_parser().parse_args(["train", "--train-file", "t.csv", "--output", "unused"]))
    estimator = fitted()
    model = estimator.classifier_.model
    # The recipe's fields all, but the n-gram buckets: sized to these few texts' bigrams (16 each, a power of two),
    # where the recipe's 2^20 made tens of MB of model of a few hundred texts.
    sized = {**command.model_config, "nb_ngram_buckets": 128}
    assert {field: getattr(model.config, field) for field in command.model_config} == sized
    assert command.model_config["nb_ngram_buckets"] == 1048576
    assert model.config.d_model == 64 and model.ngram_logits.buckets == 128
    assert estimator.get_params()["d_model"] is None  # (the parameter stays as given: clone and grids see None)
    # Saved, the run rebuilds that very model, and so does the estimator loaded from it.
    path = estimator.save(tmp_path / "estimator")
    for again in (Classifier.load(path).model, AttentionTextClassifier.load(path).classifier_.model):
        assert again.config == model.config and again.ngram_logits.buckets == 128
        assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), model.state_dict().values()))
    # An argument given wins, as a --set flag does, and the rest of the recipe stays.
    wide = fitted(d_model=128).classifier_.model
    assert wide.config.d_model == 128 and wide.ngram_logits.buckets == 128
    assert fitted(model_config={"nb_ngram_buckets": 0}).classifier_.model.ngram_logits is None
    # Other models keep their general defaults, as the command does (the estimator fits no label sets: y of sets is
    # refused, so multi-label, which keeps them too, is the command's alone).
    assert fitted("boe").classifier_.model.config.embed_dim == 128


def test_the_estimator_reads_as_many_tokens_as_train_on_a_file_does():
    # Its max_len defaulted to 256 while `attnclf train --train-file` reads the file recipe's tokens for self-attn.
    from attnclf.sklearn import AttentionTextClassifier
    from attnclf.text.tokenizer import TokenizerConfig

    texts = ["a good film", "a great film", "a dull film", "a bad film"] * 4
    labels = ["pos", "pos", "neg", "neg"] * 4

    def read_with(model="self-attn", **params):
        estimator = AttentionTextClassifier(model, layers=1, d_model=16, epochs=1, batch_size=8, min_frequency=1,
                                            validation_fraction=0, random_state=0, **params).fit(texts, labels)
        return estimator, estimator.classifier_.tokenizer.config

    def train_reads(*flags):
        return build_settings(build_parser().parse_args(["train", "--train-file", "t.csv", "--output", "unused",
                                                         "--min-frequency", "1", *flags])).tokenizer

    estimator, config = read_with()
    assert config == train_reads()
    assert estimator.get_params()["max_len"] is None  # (as given: clone and grids see None)
    assert estimator.classifier_.model.config.max_len == config.max_len
    assert read_with(max_len=8)[1] == train_reads("--max-len", "8")
    assert read_with("boe")[1] == train_reads("--model", "boe") and read_with("boe")[1].max_len == \
        TokenizerConfig().max_len


def test_train_notes_that_the_budget_cut_the_bigram_buckets(tmp_path, capsys):
    # A file of many classes (or an explicit nb_ngram_buckets) built fewer buckets than asked, and nothing said so.
    from attnclf.cli import main

    data = tmp_path / "reviews.csv"
    data.write_text("text,label\n" + "".join(f"{word} film number {i},{label}\n" for i in range(8)
                                             for word, label in [("great", "pos"), ("dull", "neg")]))
    argv = ["train", "--train-file", str(data), "--min-frequency", "1", "--max-len", "8", "--epochs", "1",
            "--set", "layers=1", "--set", "d_model=16", "--set", "nb_ngram_buckets=4096", "--no-report",
            "--threads", "1"]
    assert main([*argv, "--set", "nb_ngram_bucket_budget=4096", "--output", str(tmp_path / "cut")]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "bigram buckets" in line]
    assert notes == ["note: the n-gram branch keeps 2,048 bigram buckets, not 4,096 (nb_ngram_buckets=4096): "
                     "nb_ngram_bucket_budget=4096 bounds buckets x classes, and this data has 2 classes; "
                     "`--set nb_ngram_bucket_budget=0` lifts it"]
    assert main([*argv, "--output", str(tmp_path / "whole")]) == 0  # (the file recipe's budget: room for 4096 x 2)
    assert "bigram buckets" not in capsys.readouterr().err


def test_ablate_notes_bucket_counts_the_budget_made_one_model(tmp_path, capsys):
    # nb_ngram_buckets=2048 and 4096 on 2 classes under a budget of 4096 both keep 2048 buckets: two identical
    # models, tabled as if they differed.
    from attnclf.cli import main

    out = tmp_path / "abl"
    assert main(["ablate", "--dataset", "synthetic", "--epochs", "1", "--max-train-examples", "100", "--threads", "1",
                 "--set", "d_model=16", "--set", "layers=1", "--set", "nb_ngram_bucket_budget=4096", "--quiet",
                 "--seeds", "1", "--sweep", "nb_ngram_buckets=1024,2048,4096", "--output", str(out)]) == 0
    note = ("note: nb_ngram_buckets=2048 and nb_ngram_buckets=4096 built the same model: the n-gram branch's "
            "nb_ngram_bucket_budget halved their buckets to one count for this data's classes; `--set "
            "nb_ngram_bucket_budget=0` sweeps nb_ngram_buckets as given")
    assert note in capsys.readouterr().out
    assert note in (out / "nb_ngram_buckets.md").read_text()


def test_ablate_notes_no_budget_cut_where_the_budget_is_what_is_swept(tmp_path):
    # Budgets of 0 and 4,194,304 on 2 classes both keep all 1,048,576 buckets: the same model, but no budget halved
    # them, and `--set nb_ngram_bucket_budget=0` is no way to sweep the budget (the note said both).
    import json

    from attnclf.experiments.ablate import same_branch_note

    def cell(label, **model_config):
        run = tmp_path / label
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"settings": {"model_config": model_config}}))
        (run / "labels.json").write_text(json.dumps(["neg", "pos"]))
        return {"label": label, "run_dir": str(run)}

    records = [cell(f"nb_ngram_bucket_budget={budget}", nb_ngram_buckets=1048576, nb_ngram_bucket_budget=budget)
               for budget in (0, 4194304)]
    assert same_branch_note("nb_ngram_bucket_budget", [r["label"] for r in records], records) == ""
    records = [cell(f"nb_ngram_buckets={buckets}", nb_ngram_buckets=buckets, nb_ngram_bucket_budget=4096)
               for buckets in (2048, 4096)]
    assert "nb_ngram_buckets=2048 and nb_ngram_buckets=4096 built the same model" in \
        same_branch_note("nb_ngram_buckets", [r["label"] for r in records], records)


def _reviews(path, count: int, start: int = 0):
    """A CSV of ``count`` short labelled reviews, numbered from ``start`` (their bigrams differ by the numbers)."""
    path.write_text("text,label\n" + "".join(f"{word} film number {i},{label}\n" for i in range(start, start + count)
                                             for word, label in [("great", "pos"), ("dull", "neg")]))
    return path


FILE_RUN = ["--min-frequency", "1", "--max-len", "8", "--epochs", "1", "--set", "layers=1", "--set", "d_model=16",
            "--no-report", "--threads", "1"]


def test_train_on_a_file_sizes_the_n_gram_buckets_to_its_training_texts_and_says_so(tmp_path, capsys):
    # The file recipe built 2^20 buckets (16.5 MiB of weights at 2 classes) whatever the file's size, as the estimator
    # did until it sized them; on 300 SST-2 sentences, 16 per distinct bigram validated as well (BENCHMARKS.md).
    import json

    from attnclf.classifier import Classifier
    from attnclf.cli import main
    from attnclf.models.ngrams import buckets_for, distinct_bigrams

    train, validation = _reviews(tmp_path / "train.csv", 8), _reviews(tmp_path / "validation.csv", 4, start=100)
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(train), "--validation-file", str(validation),
                 *(flag for flag in FILE_RUN if flag != "--no-report"), "--output", str(run)]) == 0
    texts = [line.split(",")[0] for line in train.read_text().splitlines()[1:]]
    bigrams = distinct_bigrams(Classifier.load(run).tokenizer.encode(texts))  # (the training texts' alone)
    expected = buckets_for(bigrams, cap=1048576)
    assert expected < 1048576
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["config"]["nb_ngram_buckets"] == expected
    assert config["settings"]["model_config"]["nb_ngram_buckets"] == 1048576  # (the recipe's, the cap)
    assert Classifier.load(run).model.ngram_logits.buckets == expected
    assert f"{expected:,} bigram buckets, sized to the training texts" in (run / "report.html").read_text()
    assert f"n-gram branch: {expected:,} bigram buckets, 16 per distinct bigram of the training texts " \
           f"({bigrams:,} of them; 1,048,576 buckets at most); --set nb_ngram_buckets=N builds N" \
           in capsys.readouterr().err
    # A token cache's ids give the same count, counted from the cache
    cached = tmp_path / "cached"
    assert main(["train", "--train-file", str(train), "--validation-file", str(validation), *FILE_RUN, "--quiet",
                 "--token-cache", "--token-cache-dir", str(tmp_path / "caches"), "--output", str(cached)]) == 0
    assert json.loads((cached / "config.json").read_text())["model"]["config"]["nb_ngram_buckets"] == expected
    # and it resumes as it began: the same texts, the same count (a checkpoint of another shape would not load)
    more = [flag if flag != "1" or previous != "--epochs" else "2" for previous, flag in zip(["", *FILE_RUN], FILE_RUN)]
    assert main(["train", "--train-file", str(train), "--validation-file", str(validation), *more, "--output", str(run),
                 "--resume"]) == 0
    assert len(json.loads((run / "checkpoint" / "state.json").read_text())["history"]) == 2
    assert json.loads((run / "config.json").read_text())["model"]["config"]["nb_ngram_buckets"] == expected


def test_a_bucket_count_given_with_set_is_built_as_given(tmp_path, capsys):
    import json

    from attnclf.cli import main

    train = _reviews(tmp_path / "train.csv", 8)
    for given in (1048576, 4096):
        run = tmp_path / f"given-{given}"
        assert main(["train", "--train-file", str(train), *FILE_RUN, "--set", f"nb_ngram_buckets={given}",
                     "--output", str(run), "--quiet"]) == 0
        assert json.loads((run / "config.json").read_text())["model"]["config"]["nb_ngram_buckets"] == given
    assert "16 per distinct bigram" not in capsys.readouterr().err


def test_only_the_latest_file_recipe_sizes_the_buckets_and_a_given_count_or_a_named_dataset_never():
    # A run begun under an earlier edition resumes as it began: its command rebuilt under that edition sizes nothing.
    from attnclf.training.settings import DataSettings, settings_for

    on_file = DataSettings(train_file="t.csv")
    assert settings_for(on_file, "self-attn").ngram_buckets_sized
    assert not any(settings_for(on_file, "self-attn", file_recipe=edition).ngram_buckets_sized for edition in (0, 1, 2))
    assert not settings_for(on_file, "self-attn", model_config={"nb_ngram_buckets": 1048576}).ngram_buckets_sized
    assert not settings_for(on_file, "boe").ngram_buckets_sized
    assert not settings_for(DataSettings(dataset="sst2"), "self-attn").ngram_buckets_sized
    earlier = build_settings(build_parser().parse_args(["train", "--train-file", "t.csv", "--output", "unused"]),
                             file_recipe=2)
    from attnclf.cli import built_under_earlier_file_recipes

    latest = build_settings(build_parser().parse_args(["train", "--train-file", "t.csv", "--output", "unused"]))
    assert earlier.first_difference(latest) == ("ngram_buckets_sized", False, True)
    assert [build.ngram_buckets_sized for build in built_under_earlier_file_recipes(
        build_parser().parse_args(["train", "--train-file", "t.csv", "--output", "unused"]), latest)] == [False] * 3


def test_a_windowed_run_sizes_its_buckets_to_the_tokens_its_windows_read(tmp_path):
    # Counted on texts cut to one window (max_len), the bigrams past it went uncounted, though the windows read them.
    import json

    from attnclf.classifier import Classifier
    from attnclf.cli import main
    from attnclf.models.ngrams import buckets_for, distinct_bigrams
    from attnclf.training.run_data import load_data
    from attnclf.training.settings import resume_settings

    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"{word} film number {i} with words {i + 1} then more {i + 2},{label}\n"
                                             for i in range(8) for word, label in [("great", "pos"), ("dull", "neg")]))
    run = tmp_path / "run"
    assert main(["train", "--train-file", str(train), *FILE_RUN[:2], "--max-len", "4", "--windows", *FILE_RUN[4:],
                 "--quiet", "--output", str(run)]) == 0
    settings = resume_settings(run)
    train_texts = load_data(settings.data, settings.train.seed).train.texts  # (the split the run trained on)
    tokenizer = Classifier.load(run).tokenizer
    read = distinct_bigrams(tokenizer.encode(train_texts, max_len=settings.windows.covered(4)))
    assert distinct_bigrams(tokenizer.encode(train_texts)) < read  # (else this test tests nothing)
    assert json.loads((run / "config.json").read_text())["model"]["config"]["nb_ngram_buckets"] == \
        buckets_for(read, cap=1048576)
