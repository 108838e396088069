"""The scikit-learn estimator: fits, predicts original labels, clones, and composes with sklearn's tools."""

import re
import warnings
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.validation import has_fit_parameter

from attnclf.data.generated import synthetic
from attnclf.errors import AttnclfError, AttnclfWarning
from attnclf.sklearn import AttentionTextClassifier
from attnclf.text.tokenizer import TokenizerConfig
from attnclf.training.settings import DataSettings, RunSettings
from attnclf.training.trainer import TrainConfig

TINY = dict(d_model=16, heads=2, layers=1, lr=1e-2, epochs=2, batch_size=16)


@pytest.fixture(scope="module")
def data():
    """Separable generated texts (words from the upper vs lower half of a vocabulary), string labels."""
    splits = synthetic(n_samples=500, n_train=300)
    names = splits.train.label_names
    return (splits.train.texts, [names[i] for i in splits.train.labels],
            splits.test.texts, [names[i] for i in splits.test.labels])


def _shout(texts):
    return [t.upper() for t in texts]


def test_pipeline_learns_and_returns_the_original_labels(data):
    train_x, train_y, test_x, test_y = data
    pipe = Pipeline([("shout", FunctionTransformer(_shout)), ("clf", AttentionTextClassifier(**TINY))])
    pipe.fit(train_x, train_y)
    clf = pipe.named_steps["clf"]
    assert list(clf.classes_) == ["negative", "positive"]
    assert set(pipe.predict(test_x)) <= {"negative", "positive"}
    probabilities = pipe.predict_proba(test_x)
    assert probabilities.shape == (len(test_x), 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert pipe.score(test_x, test_y) > 0.9  # chance is 0.5
    # As scikit-learn's classifiers: the log of the probabilities, from the logits (finite where a probability
    # rounds to 0), through a Pipeline too.
    log_probabilities = pipe.predict_log_proba(test_x)
    assert np.isfinite(log_probabilities).all()
    np.testing.assert_allclose(np.exp(log_probabilities), probabilities, rtol=1e-4, atol=1e-7)
    assert len(clf.history_) == TINY["epochs"]
    assert clf.classifier_.predict(["w150 w160"])[0].tokens == ["w150", "w160"]


def test_integer_labels_keep_their_values_and_type(data):
    train_x, train_y, test_x, _ = data
    y = [7 if label == "positive" else 3 for label in train_y]
    clf = AttentionTextClassifier("boe", **TINY)  # boe has no heads or layers: they are left out
    predicted = clf.fit(train_x, y).predict(test_x[:20])
    assert clf.classes_.tolist() == [3, 7]
    assert predicted.dtype.kind == "i" and set(predicted.tolist()) <= {3, 7}
    # (its classifier_ has no run config naming its model: its repr names it by the model's class)
    assert repr(clf.classifier_).startswith("Classifier(model='boe', labels=['3', '7'], device=")


def test_grid_search_picks_the_learning_rate_that_learns(data):
    train_x, train_y, test_x, test_y = data
    base = AttentionTextClassifier("boe", d_model=16, epochs=2, batch_size=16)
    search = GridSearchCV(base, {"lr": [1e-6, 1e-2]}, cv=2).fit(train_x, train_y)
    scores = search.cv_results_["mean_test_score"]
    assert len(scores) == 2 and scores[1] > scores[0] + 0.2  # 1e-6 barely moves from its init
    assert search.best_params_ == {"lr": 1e-2}
    assert search.best_estimator_.score(test_x, test_y) > 0.9
    assert not hasattr(base, "classes_")  # GridSearchCV fitted clones, not the estimator it was given


def test_cross_val_score_runs_one_fit_per_fold(data):
    train_x, train_y, _, _ = data
    scores = cross_val_score(AttentionTextClassifier("boe", d_model=16, epochs=2, lr=1e-2, batch_size=16),
                             train_x[:200], train_y[:200], cv=2)
    assert scores.shape == (2,) and scores.min() > 0.8


def test_params_round_trip_through_clone_and_set_params():
    clf = AttentionTextClassifier("mha", d_model=24, model_config={"positional": "sinusoidal"}, random_state=3)
    twin = clone(clf)
    assert twin is not clf and twin.get_params() == clf.get_params()
    assert twin.set_params(epochs=9, heads=2) is twin
    assert (twin.epochs, twin.heads, clf.epochs) == (9, 2, TrainConfig.epochs)
    assert clf._model_fields() == {"embed_dim": 24, "positional": "sinusoidal"}  # mha has no d_model
    with pytest.raises(NotFittedError):
        clf.predict(["w1"])


# Each training argument and the setting of `attnclf train --train-file` it stands for (owner class, field).
_TRAIN_DEFAULTS = {"epochs": (TrainConfig, "epochs"), "batch_size": (TrainConfig, "batch_size"),
                   "lr": (TrainConfig, "lr"), "weight_decay": (TrainConfig, "weight_decay"),
                   "patience": (TrainConfig, "patience"), "random_state": (TrainConfig, "seed"),
                   "tokenizer": (TokenizerConfig, "kind"), "vocab_size": (TokenizerConfig, "vocab_size"),
                   "min_frequency": (TokenizerConfig, "min_frequency"),
                   "validation_fraction": (DataSettings, "val_fraction"), "device": (RunSettings, "device"),
                   "threads": (RunSettings, "threads")}


def test_the_training_arguments_default_to_the_config_classes_own_plain_values():
    params = AttentionTextClassifier().get_params()
    for name, (owner, field) in _TRAIN_DEFAULTS.items():
        default = next(f.default for f in fields(owner) if f.name == field)
        assert (name, params[name]) == (name, default)
        assert type(params[name]) in (int, float, str, type(None)), name  # (scikit-learn's rule: plain values)


def test_an_estimator_left_at_its_defaults_builds_what_train_on_a_file_builds():
    # Every TrainConfig field (epochs, patience, monitor, schedule...), the tokenizer, the model and the validation
    # share, as `attnclf train --train-file F` builds them without flags: the same data trains the same model.
    from attnclf.cli import build_parser, build_settings

    train = build_settings(build_parser().parse_args(["train", "--train-file", "t.csv", "--output", "unused"]))
    clf = AttentionTextClassifier()
    # (all but when to checkpoint within an epoch, which shapes no model: test_a_fit_checkpoints_only_as_epochs_end)
    assert clf._train_config(np.array(["a", "b"]), clf.random_state).to_dict() == {
        **train.train.to_dict(), "checkpoint_minutes": 0}
    assert clf._tokenizer_config() == train.tokenizer
    assert (clf.model, clf._model_fields()) == (train.model, train.model_config)
    assert (clf.validation_fraction, clf.device, clf.threads) == (train.data.val_fraction, train.device, train.threads)


def test_a_fit_checkpoints_only_as_epochs_end():
    # The Trainer trains into a temporary folder that goes with the fit: a checkpoint every 10 minutes within an epoch
    # (train's default, for a resume) would be written there for nobody to resume from.
    assert AttentionTextClassifier()._train_config(np.array(["a", "b"]), 0).checkpoint_minutes == 0


def test_a_fit_at_the_default_epochs_stops_early_where_train_stops(data, tmp_path):
    # 160 texts at lr 2e-3: validation macro-F1 climbs for 4 epochs, then 3 bring nothing better and patience ends
    # both at 7 (the estimator's former 5 epochs without patience ran 5). The same flags, so the same training.
    import csv
    import json

    from attnclf.cli import main

    texts, labels = data[0][:160], data[1][:160]
    with open(tmp_path / "train.csv", "w", newline="") as file:
        csv.writer(file).writerows([("text", "label"), *zip(texts, labels)])
    assert main(["train", "--train-file", str(tmp_path / "train.csv"), "--model", "boe", "--set", "embed_dim=16",
                 "--lr", "2e-3", "--threads", "1", "--no-report", "--output", str(tmp_path / "run")]) == 0
    trained = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").read_text().splitlines()]
    clf = AttentionTextClassifier("boe", d_model=16, lr=2e-3, threads=1).fit(texts, labels)
    assert TrainConfig.patience < len(trained) < TrainConfig.epochs  # (what this test is for: patience ended it)
    validated = lambda history: [(h["val_macro_f1"], h["val_loss"]) for h in history]  # noqa: E731
    assert validated(clf.history_) == validated(trained)


def test_n_iter_is_the_epochs_run_as_early_stopping_left_them(data):
    # scikit-learn's iterative estimators (MLPClassifier, SGDClassifier) say how long they trained in n_iter_; at lr 0
    # validation never improves after epoch 1, so patience 1 stops at epoch 2 of the 10 allowed
    clf = AttentionTextClassifier("boe", d_model=16, lr=0.0, epochs=10, patience=1, threads=1)
    assert not hasattr(clf, "n_iter_")
    clf.fit(data[0][:60], data[1][:60])
    assert clf.n_iter_ == len(clf.history_) == 2


def test_fit_validates_in_the_batches_train_validates_in(data, monkeypatch):
    # train's: RunSettings' eval_batch_size texts at most, bounded in padded tokens too, which 512-token texts reach
    import attnclf.sklearn as estimator_module
    from attnclf.text.batching import EVAL_MAX_TOKENS

    validated_in = []
    fit = estimator_module.Trainer.fit
    monkeypatch.setattr(estimator_module.Trainer, "fit", lambda trainer, train, validation, **options: (
        validated_in.append(validation), fit(trainer, train, validation, **options))[1])
    AttentionTextClassifier("boe", d_model=16, epochs=1).fit(data[0][:60], data[1][:60])
    assert [(batches.batch_size, batches.max_tokens) for batches in validated_in] == [
        (RunSettings().eval_batch_size, EVAL_MAX_TOKENS)]


def _weights(clf) -> dict:
    return {name: tensor.clone() for name, tensor in clf.classifier_.model.state_dict().items()}


def test_the_same_random_state_gives_the_same_model_and_another_other_weights(data):
    train_x, train_y, test_x, _ = data
    make = lambda random_state: AttentionTextClassifier("boe", d_model=16, epochs=1,  # noqa: E731
                                                       random_state=random_state).fit(train_x[:120], train_y[:120])
    first, again, other = make(0), make(0), make(1)
    np.testing.assert_array_equal(first.predict_proba(test_x[:30]), again.predict_proba(test_x[:30]))
    assert not np.allclose(first.predict_proba(test_x[:30]), other.predict_proba(test_x[:30]))
    assert any(not torch.equal(w, _weights(other)[name]) for name, w in _weights(first).items())
    assert (first.seed_, other.seed_) == (0, 1)


def test_random_state_none_draws_a_seed_each_fit_and_records_it_in_seed_(data):
    # scikit-learn's convention: None draws from numpy's global RandomState, so each fit differs (and
    # np.random.seed makes a script's fits repeat); seed_ says what was drawn, so one fit can be repeated alone
    train_x, train_y, test_x, _ = data
    make = lambda random_state: AttentionTextClassifier("boe", d_model=16, epochs=1,  # noqa: E731
                                                       random_state=random_state).fit(train_x[:60], train_y[:60])
    drawn, redrawn = make(None), make(None)
    assert drawn.random_state is None and type(drawn.seed_) is int and 0 <= drawn.seed_ < 2 ** 32
    assert drawn.seed_ != redrawn.seed_
    np.testing.assert_array_equal(make(drawn.seed_).predict_proba(test_x[:20]), drawn.predict_proba(test_x[:20]))
    before = np.random.get_state()  # (put back: the other tests' draws stay their own)
    try:
        np.random.seed(5)
        seeded = make(None).seed_
        np.random.seed(5)
        assert make(None).seed_ == seeded
    finally:
        np.random.set_state(before)


def test_a_random_state_instance_gives_the_seed_drawn_from_it(data):
    # as scikit-learn's estimators built on another generator do: one integer drawn from it per fit
    given = np.random.RandomState(7)
    clf = AttentionTextClassifier("boe", d_model=16, epochs=1, random_state=given).fit(data[0][:60], data[1][:60])
    assert clf.seed_ == np.random.RandomState(7).randint(2 ** 32, dtype=np.int64)
    assert clf.random_state is given  # (a parameter stays as given)


@pytest.mark.parametrize("random_state, message", [
    (2 ** 40, "random_state must be at least 0 and below 4294967296, got 1099511627776"),
    (-1, "random_state must be at least 0 and below 4294967296, got -1"),
    ("7", "random_state must be None, a whole number or a numpy.random.RandomState, got '7'"),
    (1.5, "random_state must be None, a whole number or a numpy.random.RandomState, got 1.5"),
    (True, "random_state must be None, a whole number or a numpy.random.RandomState, got True"),
])
def test_a_bad_random_state_is_a_one_line_error_at_fit(data, random_state, message):
    with pytest.raises(AttnclfError, match=f"^{re.escape(message)}$"):
        AttentionTextClassifier("boe", epochs=1, random_state=random_state).fit(data[0][:20], data[1][:20])


def test_bagging_gives_each_member_a_seed_of_its_own(data):
    # BaggingClassifier sets each member's parameter named random_state (and only that) to a draw of its own:
    # under the name seed, every member trained from seed 0 and the bag was not diverse
    from sklearn.ensemble import BaggingClassifier

    texts = np.array(data[0][:60], dtype=object).reshape(-1, 1)  # (Bagging wants a 2-D X: one text column)
    bag = BaggingClassifier(AttentionTextClassifier("boe", d_model=16, epochs=1), n_estimators=2, random_state=0)
    bag.fit(texts, data[1][:60])
    seeds = [member.seed_ for member in bag.estimators_]
    assert seeds == [member.random_state for member in bag.estimators_] and seeds[0] != seeds[1]
    assert bag.predict_proba(texts[:5]).shape == (5, 2)


def test_seed_is_refused_in_one_line_naming_random_state():
    with pytest.raises(AttnclfError, match=r"^AttentionTextClassifier takes random_state=, not seed= \(renamed, as "
                                           r"scikit-learn names it\): pass random_state=3$"):
        AttentionTextClassifier("boe", seed=3)
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'epoch'"):  # (any other: Python's own)
        AttentionTextClassifier(epoch=3)
    assert "seed" not in AttentionTextClassifier().get_params()
    # set_params, as GridSearchCV and clone's callers use it, says the same, not scikit-learn's "Invalid parameter"
    with pytest.raises(AttnclfError, match=r"^AttentionTextClassifier takes random_state=, not seed= \(renamed, as "
                                           r"scikit-learn names it\): pass random_state=5$"):
        AttentionTextClassifier("boe").set_params(epochs=2, seed=5)
    with pytest.raises(ValueError, match="Invalid parameter 'epoch'"):  # (any other: scikit-learn's own)
        AttentionTextClassifier().set_params(epoch=3)


def test_an_estimator_pickled_under_the_name_seed_unpickles_with_random_state(data):
    import pickle

    clf = AttentionTextClassifier("boe", d_model=16, epochs=1, random_state=4).fit(data[0][:60], data[1][:60])
    state = dict(clf.__getstate__())  # (a copy: it is clf's own __dict__)
    state["seed"] = state.pop("random_state")
    del state["seed_"]
    old = AttentionTextClassifier.__new__(AttentionTextClassifier)
    old.__setstate__(state)
    assert (old.random_state, old.seed_, "seed" in vars(old)) == (4, 4, False)
    assert clone(old).get_params() == clf.get_params()
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(old)).predict_proba(data[2][:10]),
                                  clf.predict_proba(data[2][:10]))


def test_a_missing_text_in_a_nullable_string_column_is_named_as_missing(data):
    # pandas' nullable strings (dtype="string", as convert_dtypes gives) hold pd.NA where a cell is empty: a gap, as
    # NaN is, not a type ("X[1] is NAType, not a string"); the columns of a DataFrame read it as missing already
    pandas = pytest.importorskip("pandas")
    with pytest.raises(ValueError, match=r"^X\[1\] is <NA>, a missing value, not a text$"):
        AttentionTextClassifier(**TINY).fit(pandas.Series(["w1", None, "w2"], dtype="string"), ["a", "b", "a"])


@pytest.mark.parametrize("X, y, message", [
    ("one string", ["a"], "pass a list of texts as X, not a single string"),
    # numpy's one text (an item of an array of texts, or a 0-dimensional array) was "got shape ()"
    (np.array(["one string"])[0], ["a"], "^pass a list of texts as X, not a single string$"),
    (np.array("one string"), ["a"], r"^pass a list of texts as X, not a single value \(a 0-dimensional ndarray: "
                                    r"'one string'\); wrap it in a list$"),
    (b"bytes", ["a"], "pass a list of texts as X, not bytes; decode it first"),
    (["w1", "half a pair \udc80"], ["a", "b"], r"X\[1\] is not valid Unicode: a lone surrogate \(U\+DC80\)"),
    (["w1", 5], ["a", "b"], r"X\[1\] is int"),
    # A text column pandas read with an empty cell holds NaN there: named as the gap it is, not as "float"
    (["w1", float("nan")], ["a", "b"], r"^X\[1\] is nan, a missing value, not a text$"),
    (["w1", None], ["a", "b"], r"^X\[1\] is None, a missing value, not a text$"),
    (np.array([[["w1"]], [["w2"]]]), ["a", "b"], r"one-dimensional or text columns; got shape \(2, 1, 1\)"),
    (np.array([["w1", "x"], ["w2", 3]], dtype=object), ["a", "b"], r"X\[1, 1\] is int, not a string"),
    (np.array([[1.5, 2.5], [3.5, 4.5]]), ["a", "b"], r"X\[0, 0\] is float, not a string"),
    (np.array([["w1", "x"], ["w2", "y \udc80"]], dtype=object), ["a", "b"],
     r"X\[1, 1\] is not valid Unicode: a lone surrogate \(U\+DC80\) at character 2"),
    (["w1", "w2"], None, "requires y to be passed, but the target y is None"),
    (["w1", "w2"], "ab", "y must be a sequence of labels, one per text, not str"),  # (not the classes 'a', 'b')
    (["w1", "w2"], {"a": 1, "b": 2}, "one per text, not dict"),
    (["w1", "w2"], {"a", "b"}, "one per text, not set"),
    (["w1", "w2"], 3, "one per text, not int"),
    (["w1", "w2"], np.array(3), "one per text, not ndarray"),
    (["w1", "w2", "w3"], [0.1, 0.7, 0.35], "Unknown label type: continuous"),  # (not three classes)
    (["w1", "w2"], ["a", "a"], r"^y has only one class \('a'\); a classifier needs two at least$"),
    (["w1", "w2"], ["a", "b"], r"the one training text holds no word seen at least 2 time\(s\), so the tokenizer "
                               r"learned nothing; lower --min-frequency \(min_frequency= in Python\) or give more"),
    ([], [], "no texts to fit on"),
    (["w1", "w2"], ["a"], "one label per text"),
    (["w1", "w2"], np.array([["a"], ["b"]]), r"y must be one-dimensional, one label per text; got shape \(2, 1\): "
                                             r"pass y.ravel\(\)"),
    (["w1", "w2", "w3"], ["a", None, "b"], r"y\[1\] is None: every text needs a label"),
    (["w1", "w2", "w3"], [1.0, float("nan"), 2.0], r"y\[1\] is nan"),
    (["w1", "w2", "w3"], np.array([np.nan, "pos", "neg"], dtype=object), r"y\[0\] is nan"),  # pandas' gap
    (["w1", "w2", "w3"], [np.float32(1), np.float32("nan"), np.float32(0)], r"y\[1\] is np.float32\(nan\)|y\[1\] is nan"),
    (["w1", "w2", "w3"], [1, "pos", 1], r"y mixes strings and numbers \('pos' and 1\)"),
    (["w1", "w2"], np.array(["neg", 0.5], dtype=object), r"y mixes strings and numbers \('neg' and 0.5\)"),
    (["w1", "w2"], [True, "neg"], r"y mixes strings and booleans \('neg' and True\)"),
    (["w1", "w2"], [["a", "b"], ["a"]], r"y holds a set of labels per text \(\['a', 'b'\]\); this estimator is single"),
    # As a training file's empty text is refused (predicting on one still answers, as predict --file does)
    (["w1", " ", "w3"], ["a", "b", "a"], r"^X\[1\] is an empty text, nothing to learn from \(a training file's is "
                                         r"refused too\); drop it$"),
    (np.array([["w1", "x"], [None, np.nan]], dtype=object), ["a", "b"], r"^X\[1\] is an empty text"),
    (None, ["a"], "pass a list of texts as X, not NoneType"),
    ({"w1": "a"}, ["a"], "pass a list of texts as X, not dict"),
])
def test_bad_input_is_a_clear_value_error(X, y, message):
    with pytest.raises(ValueError, match=message):
        AttentionTextClassifier("boe", epochs=1).fit(X, y)


LONG = "x" * 5000  # a label or a setting far longer than a message should repeat


@pytest.mark.parametrize("X, y, params, start", [
    (["w1", "w2"], None, {}, r"^AttentionTextClassifier requires y to be passed"),
    (["w1", "w2"], [[LONG], ["a"]], {}, r"^y holds a set of labels per text \(\['xxx"),
    (["w1", "w2"], [LONG, 1], {}, r"^y mixes strings and numbers \('xxx"),
    (["w1", "w2"], [LONG, LONG], {}, r"^y has only one class \('xxx"),
    (["w1", "w2"], ["a", "b"], {"validation_fraction": LONG}, r"^validation_fraction must be a number in \[0, 1\), got 'xxx"),
    (["w1", "w2"], ["a", "b"], {"model": LONG}, r"^unknown model 'xxx"),
    (["w1", "w2"], ["a", "b"], {"model_config": LONG}, r"^model_config must be a dict of model fields, got 'xxx"),
])
def test_bad_input_is_an_attnclf_error_naming_values_by_their_start(X, y, params, start):
    # README: bad input to the Python API raises AttnclfError (a ValueError, as scikit-learn expects).
    from attnclf.errors import AttnclfError

    with pytest.raises(AttnclfError, match=start) as err:
        AttentionTextClassifier(**{"model": "boe", "epochs": 1, **params}).fit(X, y)
    assert len(str(err.value)) < 300


def test_fit_leaves_the_callers_random_stream_alone(data):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    AttentionTextClassifier("boe", d_model=16, epochs=1).fit(data[0][:60], data[1][:60])
    assert torch.equal(torch.rand(3), expected)


def test_a_fitted_estimator_keeps_no_gradients(data):
    # The last training step's gradients doubled the memory of every weight classifier_ holds, for its whole life.
    clf = AttentionTextClassifier(d_model=16, heads=2, layers=1, epochs=1).fit(data[0][:60], data[1][:60])
    parameters = dict(clf.classifier_.model.named_parameters())
    assert parameters and [name for name, p in parameters.items() if p.grad is not None] == []


def test_a_bad_setting_is_a_value_error(data):
    with pytest.raises(ValueError, match="epochs must be at least 1, got 0"):
        AttentionTextClassifier("boe", epochs=0).fit(data[0], data[1])
    with pytest.raises(ValueError, match="lr must be a number, got '0.01'"):
        AttentionTextClassifier("boe", lr="0.01").fit(data[0], data[1])
    for fraction in ("0.1", None, 1, -0.1, float("nan")):  # (a string and None were a TypeError about '<=')
        with pytest.raises(ValueError, match=rf"^validation_fraction must be a number in \[0, 1\), got "
                                             rf"{re.escape(repr(fraction))}$"):
            AttentionTextClassifier("boe", validation_fraction=fraction).fit(data[0], data[1])
    with pytest.raises(ValueError, match="model_config must be a dict of model fields, got 'x'"):
        AttentionTextClassifier("boe", model_config="x").fit(data[0], data[1])
    with pytest.raises(ValueError, match=r"class_weight must be None, 'balanced' or a dict \{label: weight\}, got "
                                         r"'auto'"):
        AttentionTextClassifier("boe", class_weight="auto").fit(data[0], data[1])
    # The message names the parameter as Python spells it, not a command-line flag.
    with pytest.raises(ValueError, match=r"^device must be auto, cpu, cuda, cuda:N \(N counting from 0\) or mps, "
                                         r"not 'gpu'$"):
        AttentionTextClassifier("boe", device="gpu").fit(data[0], data[1])


@pytest.mark.parametrize("params, message", [
    ({"tokenizer": "wordpiece"}, "tokenizer must be one of word, bpe, got 'wordpiece'"),
    ({"max_len": 0}, "max_len must be at least 1, got 0"),
    ({"min_frequency": 0}, "min_frequency must be at least 1, got 0"),
], ids=["tokenizer", "max_len", "min_frequency"])
def test_a_bad_tokenizer_setting_is_named_as_the_estimator_s_parameter(params, message):
    # TokenizerConfig names its fields (tokenizer kind, tokenizer max_len): the estimator has no such parameters.
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        AttentionTextClassifier("boe", epochs=1, **params).fit(["w1", "w2", "w3", "w4"], ["a", "b", "a", "b"])


def test_the_default_device_is_chosen_as_the_command_line_chooses_it(data, monkeypatch):
    """CUDA (or MPS) when present, else the CPU: a GPU user's estimator should not train on the CPU unasked."""
    from attnclf import sklearn as estimator_module

    asked = []
    monkeypatch.setattr(estimator_module, "resolve_device",
                        lambda name: asked.append(name) or torch.device("cpu"))
    AttentionTextClassifier("boe", epochs=1, d_model=8).fit(data[0], data[1])
    assert asked == ["auto"]


def test_numpy_numbers_from_a_grid_are_settings_like_any_other(data):
    # np.array / np.linspace grids hand out numpy scalars; float32 lr reached config.json and failed after an epoch
    clf = AttentionTextClassifier(d_model=np.int64(16), heads=np.int64(2), layers=np.int32(1), ff_dim=np.int64(32),
                                  dropout=np.float64(0.1), lr=np.float32(1e-2), epochs=np.int64(1), max_len=np.int64(32))
    clf.fit(data[0][:80], data[1][:80])
    config = clf.classifier_.model.config
    assert (type(config.d_model), type(config.dropout), config.d_model, config.max_len) == (int, float, 16, 32)
    assert type(clf.classifier_.tokenizer.config.max_len) is int  # (a config that reaches JSON one day)


def test_labels_keep_the_dtype_they_came_in_and_one_column_of_texts_is_texts(data):
    train_x, train_y, test_x, _ = data
    y = np.array([1 if label == "positive" else 0 for label in train_y[:80]], dtype=np.uint8)
    column = np.array(train_x[:80], dtype=object)[:, None]  # as a ColumnTransformer passes one text column
    clf = AttentionTextClassifier("boe", d_model=16, epochs=1).fit(column, y)
    assert clf.classes_.dtype == np.uint8 and clf.predict(test_x[:5]).dtype == np.uint8
    np.testing.assert_array_equal(clf.predict_proba(np.array(test_x[:5], dtype=object)[:, None]),
                                  clf.predict_proba(test_x[:5]))


def _title_and_body(texts: list[str]) -> np.ndarray:
    """Each text as two columns: its first word (None for every fifth, a missing title) and the rest."""
    return np.array([[None if i % 5 == 0 else text.split(" ", 1)[0], text.split(" ", 1)[1]]
                     for i, text in enumerate(texts)], dtype=object)


def test_several_text_columns_are_one_text_per_row_joined_by_a_newline(data):
    train_x, train_y, test_x, test_y = data
    columns, test_columns = _title_and_body(train_x), _title_and_body(test_x[:40])
    joined = ["\n".join(cell or "" for cell in row) for row in columns]
    test_joined = ["\n".join(cell or "" for cell in row) for row in test_columns]
    clf = AttentionTextClassifier(**TINY).fit(columns, train_y)
    same = AttentionTextClassifier(**TINY).fit(joined, train_y)  # fit joins them as predict does
    np.testing.assert_array_equal(clf.predict_proba(test_columns), same.predict_proba(test_joined))
    np.testing.assert_array_equal(clf.predict(test_columns), same.predict(test_joined))
    assert clf.score(test_columns, test_y[:40]) == same.score(test_joined, test_y[:40]) > 0.8


def test_a_dataframe_of_text_columns_is_read_in_column_order(data, tmp_path, capsys):
    pandas = pytest.importorskip("pandas")
    train_x, train_y, test_x, _ = data
    frame = pandas.DataFrame(_title_and_body(train_x[:80]), columns=["title", "body"])
    clf = AttentionTextClassifier(**TINY).fit(frame, train_y[:80])  # (self-attention: the order of words counts)
    test = pandas.DataFrame(_title_and_body(test_x[:5]), columns=["title", "body"])
    # (pandas holds the missing titles as NaN)
    joined = ["\n".join(cell if isinstance(cell, str) else "" for cell in row) for row in test.itertuples(index=False)]
    np.testing.assert_array_equal(clf.predict_proba(test), clf.predict_proba(joined))
    assert (clf.n_text_columns_, clf.text_column_names_) == (2, ["title", "body"])
    # The same columns in another order, or others, would be other texts: refused, not joined silently.
    with pytest.raises(ValueError, match=r"^X's text columns are \['body', 'title'\], but this estimator was fitted "
                                         r"on \['title', 'body'\], in that order$"):
        clf.predict(test[["body", "title"]])
    with pytest.raises(ValueError, match="^X has 3 text columns, but this estimator was fitted on 2 text columns$"):
        clf.predict(test.assign(extra=test["body"]))
    # One of them alone, as a column or a Series, is not the text fit read either (it was taken silently).
    for body in (test[["body"]], test["body"]):
        with pytest.raises(ValueError, match=r"^X is the text column 'body' alone, but this estimator was fitted on "
                                             r"\['title', 'body'\]: pass them all, or each row's texts joined by a "
                                             r"newline$"):
            clf.predict(body)
    # Texts joined already are read as they are, under another name (or none) or under one of the columns' own:
    # pandas' str.cat, the way to join them, names its Series after the first column (it was refused as 'title').
    for already in (pandas.DataFrame({"text": joined}), pandas.Series(joined, name="text"),
                    test["title"].str.cat(test["body"], sep="\n", na_rep=""), test.assign(body=joined)[["body"]]):
        np.testing.assert_array_equal(clf.predict_proba(already), clf.predict_proba(joined))
    # Saved and loaded, it checks the same.
    loaded = AttentionTextClassifier.load(clf.save(tmp_path / "saved"))
    assert (loaded.n_text_columns_, loaded.text_column_names_) == (2, ["title", "body"])
    with pytest.raises(ValueError, match="fitted on \\['title', 'body'\\]"):
        loaded.predict_proba(test[["body", "title"]])
    np.testing.assert_array_equal(loaded.predict_proba(test), clf.predict_proba(test))
    # The command line reads the same columns from a file of them.
    import json

    from attnclf.cli import main
    test.to_csv(tmp_path / "test.csv", index=False)
    assert main(["predict", str(tmp_path / "saved"), "--file", str(tmp_path / "test.csv")]) == 0
    labels = [json.loads(line)["label"] for line in capsys.readouterr().out.splitlines()]
    assert labels == clf.predict(test).tolist()


def test_several_columns_at_predict_need_as_many_at_fit(data):
    train_x, train_y, test_x, _ = data
    clf = AttentionTextClassifier("boe", d_model=16, epochs=1).fit(train_x[:60], train_y[:60])
    assert (clf.n_text_columns_, clf.text_column_names_) == (1, None)
    with pytest.raises(ValueError, match="^X has 2 text columns, but this estimator was fitted on one text per row$"):
        clf.predict(_title_and_body(test_x[:5]))
    clf.predict(np.array(test_x[:5], dtype=object)[:, None])  # one column is one text per row


def test_pyarrow_columns_are_texts_labels_and_weights_like_any_other(data):
    pyarrow = pytest.importorskip("pyarrow")  # (the [parquet] extra)
    train_x, train_y, test_x, _ = data
    y = [label == "positive" for label in train_y[:60]]  # (booleans: pyarrow's to_numpy refused them as strings)
    expected = AttentionTextClassifier("boe", d_model=16, epochs=1).fit(train_x[:60], y, sample_weight=[2.0] * 60)
    for column in (pyarrow.array, lambda values: pyarrow.chunked_array([values[:30], values[30:]])):
        # Texts were "X[0] is StringScalar, not a string"; labels an ArrowInvalid about zero-copy conversions.
        clf = AttentionTextClassifier("boe", d_model=16, epochs=1).fit(
            column(train_x[:60]), column(y), sample_weight=column([2.0] * 60))
        assert clf.classes_.tolist() == [False, True] and clf.classes_.dtype == bool
        np.testing.assert_array_equal(clf.predict_proba(column(test_x[:5])), expected.predict_proba(test_x[:5]))
        assert [p.label for p in clf.classifier_.predict(column(test_x[:5]))] == \
            [p.label for p in clf.classifier_.predict(test_x[:5])]  # (attnclf.Classifier too)
    with pytest.raises(ValueError, match=r"^y\[1\] is None: every text needs a label$"):
        AttentionTextClassifier("boe").fit(pyarrow.array(["w1", "w2", "w3"]), pyarrow.array(["a", None, "b"]))
    # A weight left out (null) or given as a boolean is named as a list's is (both were an ArrowInvalid from to_numpy).
    for weights, bad in (([1.0, None, 2.0], r"\[1\] .* got nan"), ([True, False, True], r"\[0\] .* got True")):
        with pytest.raises(ValueError, match=rf"^sample_weight{bad}$"):
            AttentionTextClassifier("boe").fit(["w1", "w2", "w3"], ["a", "b", "a"],
                                               sample_weight=pyarrow.array(weights))


def test_a_vectorizer_s_sparse_matrix_is_refused_in_one_line_at_fit_and_predict(data, saved):
    from sklearn.feature_extraction.text import TfidfVectorizer

    train_x, train_y, test_x, _ = data
    message = r"^X is a sparse csr_matrix, a vectorizer's output\? This estimator tokenizes texts itself: pass the " \
              r"texts, not their features$"
    # (numpy made one object of the matrix: "not enough values to unpack", from deep in the column joining)
    with pytest.raises(ValueError, match=message):
        Pipeline([("tfidf", TfidfVectorizer()), ("clf", AttentionTextClassifier("boe", epochs=1))]).fit(
            train_x[:40], train_y[:40])
    features = TfidfVectorizer().fit_transform(test_x[:5])
    with pytest.raises(ValueError, match=message):  # (was "X has 61 text columns, but ... one text per row")
        saved[0].predict(features)
    with pytest.raises(ValueError, match=message):  # (was "got shape (5, 1)", as if it were text columns)
        saved[0].predict_proba(features[:, :1])


def test_an_estimator_saved_or_pickled_before_the_columns_were_recorded_takes_them_unchecked(data, tmp_path):
    import json
    import pickle

    from attnclf.errors import RunDirError

    train_x, train_y, test_x, _ = data
    clf = AttentionTextClassifier("boe", d_model=16, epochs=1).fit(_title_and_body(train_x[:60]), train_y[:60])
    test = _title_and_body(test_x[:5])
    folder = clf.save(tmp_path / "saved")
    config = json.loads((folder / "config.json").read_text())
    del config["estimator"]["text_columns"]  # as saves before 386714c: fitted on two columns, it had not said so
    (folder / "config.json").write_text(json.dumps(config))
    old = AttentionTextClassifier.load(folder)
    assert (old.n_text_columns_, old.text_column_names_) == (None, None)
    # (it had said "X has 2 text columns, but this estimator was fitted on one text per row")
    np.testing.assert_array_equal(old.predict_proba(test), clf.predict_proba(test))
    assert AttentionTextClassifier.load(old.save(tmp_path / "again")).predict_proba(test).shape == (5, 2)
    del clf.n_text_columns_, clf.text_column_names_  # as an estimator pickled before 386714c unpickles
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(clf)).predict_proba(test), old.predict_proba(test))
    for edited in (None, {}, {"count": 0, "names": None}, {"count": True, "names": None},
                   {"count": 2, "names": ["title"]}, {"count": 2, "names": ["title", 1]}):
        config["estimator"]["text_columns"] = edited
        (folder / "config.json").write_text(json.dumps(config))
        with pytest.raises(RunDirError, match=r"estimator.text_columns is not a count of columns and their names "
                                              r"\(was the file edited\?\)$"):
            AttentionTextClassifier.load(folder)


@pytest.mark.parametrize("labels", [np.array(["neg", "pos"], dtype=object), np.array([b"neg", b"pos"]),
                                    np.array([False, True])])
def test_labels_of_every_kind_come_back_as_given(data, labels):
    y = labels[[1 if label == "positive" else 0 for label in data[1][:60]]]
    clf = AttentionTextClassifier("boe", d_model=16, epochs=1).fit(data[0][:60], y)
    assert clf.classes_.dtype == labels.dtype and clf.classes_.tolist() == labels.tolist()
    assert clf.predict(data[2][:5]).dtype == labels.dtype


def test_pandas_missing_values_in_y_are_missing_labels(data, monkeypatch):
    import sys
    import types

    class Missing:  # as pandas.NA: no truth value, equal to nothing
        def __bool__(self):
            raise TypeError("boolean value of NA is ambiguous")

        def __repr__(self):
            return "<NA>"

    pandas = types.SimpleNamespace(NA=Missing(), NaT=object())  # (pandas itself is not a dependency)
    monkeypatch.setitem(sys.modules, "pandas", pandas)
    with pytest.raises(ValueError, match=r"y\[2\] is <NA>: every text needs a label"):
        AttentionTextClassifier("boe", epochs=1).fit(data[0][:3], ["pos", "neg", pandas.NA])
    with pytest.raises(ValueError, match=r"y\[0\] is <NA>: every text needs a label"):
        AttentionTextClassifier("boe", epochs=1).fit(data[0][:3], np.array([pandas.NA, 1, 0], dtype=object))


def test_fit_raises_attnclf_errors_checked_before_any_work_and_says_when_training_diverges(data):
    from attnclf.errors import AttnclfError

    with pytest.raises(AttnclfError, match="random_state must be at least 0 and below 4294967296, got 1099511627"):
        AttentionTextClassifier("boe", epochs=1, random_state=2 ** 40).fit(data[0], data[1])  # (numpy's limit)
    with pytest.raises(AttnclfError, match="training diverged in epoch 1: the loss, the weights or the outputs"):
        AttentionTextClassifier(d_model=16, epochs=2, lr=1e6).fit(data[0][:120], data[1][:120])


def test_model_config_cannot_set_what_fit_derives_from_the_data(data):
    with pytest.raises(ValueError, match=r"model_config sets max_len, which comes from the estimator's max_len="):
        AttentionTextClassifier("boe", epochs=1, model_config={"max_len": 64}).fit(data[0], data[1])


def test_labels_given_as_a_generator_are_read_once(data):
    fitted = AttentionTextClassifier("boe", d_model=16, epochs=1).fit(data[0][:60], (label for label in data[1][:60]))
    assert list(fitted.classes_) == sorted(set(data[1][:60]))


# ---------------------------------------------------------------- save / load: a run directory, never pickle

SMALL = dict(d_model=16, epochs=1, batch_size=16, lr=1e-2)


@pytest.fixture(scope="module")
def saved(data, tmp_path_factory):
    """An estimator fitted on integer labels (uint8: a dtype of their own) and the folder it saved."""
    train_x, train_y, _, _ = data
    y = np.array([7 if label == "positive" else 3 for label in train_y[:120]], dtype=np.uint8)
    clf = AttentionTextClassifier("boe", **SMALL).fit(train_x[:120], y)
    return clf, clf.save(tmp_path_factory.mktemp("saved") / "estimator")


def test_log_probabilities_are_the_logits_log_softmax_at_the_temperature_the_loaded_run_holds(data, saved, tmp_path,
                                                                                              monkeypatch):
    import json
    import shutil

    # (an estimator's run records no texts, so `attnclf calibrate` refuses it; a temperature.json put there by hand
    # is read all the same, by predict_proba and so by its log)
    folder = Path(shutil.copytree(saved[1], tmp_path / "tempered"))
    (folder / "temperature.json").write_text(json.dumps({"temperature": 2.5}))
    tempered = AttentionTextClassifier.load(folder)
    test = data[2][:20]
    np.testing.assert_allclose(np.exp(tempered.predict_log_proba(test)), tempered.predict_proba(test), rtol=1e-5,
                               atol=1e-7)
    assert not np.allclose(tempered.predict_log_proba(test), saved[0].predict_log_proba(test), atol=1e-3)
    # Finite where the probability is 0 in float32: a log-softmax of the logits, not the log of predict_proba
    monkeypatch.setattr(tempered.classifier_, "logits", lambda texts: np.array([[0.0, -500.0]], dtype=np.float32))
    np.testing.assert_allclose(tempered.predict_log_proba(["w1"]), [[0.0, -200.0]], atol=1e-9)


def test_a_saved_estimator_is_a_run_that_predicts_what_the_estimator_predicts(data, saved, capsys):
    import json

    from attnclf import Classifier
    from attnclf.cli import main

    clf, path = saved
    test_x = data[2][:40]
    # (the same probabilities: the Classifier's in float32, the estimator's in float64, as scikit-learn's are)
    np.testing.assert_allclose(Classifier.load(path, device="cpu").predict_proba(test_x), clf.predict_proba(test_x),
                               rtol=1e-6)
    config = json.loads((path / "config.json").read_text())
    assert config["trained_by"] == "attnclf.sklearn.AttentionTextClassifier"
    assert config["estimator"]["params"] == clf.get_params() and config["settings"]["model"] == "boe"
    assert config["settings"]["train"]["lr"] == 1e-2 and config["model"]["config"]["embed_dim"] == 16
    capsys.readouterr()
    assert main(["predict", str(path), test_x[0], "--device", "cpu"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["label"] == str(clf.predict(test_x[:1])[0])
    np.testing.assert_allclose([answer["probabilities"][name] for name in ("3", "7")], clf.predict_proba(test_x[:1])[0],
                               atol=1e-6)
    assert main(["explain", str(path), test_x[0]]) == 0


def test_evaluate_and_misclassified_score_a_fitted_estimator_as_its_predict_answers(data, saved, tmp_path):
    # A notebook's `evaluate(est, (texts, labels))` was an AttributeError on label_names; a run folder's path one on
    # its str, an empty (texts, labels) scikit-learn's "Found empty input array (e.g., `y_true` or `y_pred`)".
    from attnclf.errors import DataError
    from attnclf.evaluation import evaluate, misclassified

    clf, path = saved
    test_x = data[2][:60]
    test_y = np.array([7 if label == "positive" else 3 for label in data[3][:60]], dtype=np.uint8)
    assert evaluate(clf, (test_x, test_y))["accuracy"] == clf.score(test_x, test_y)
    # At its own operating point, as its predict answers (and not at another given to evaluate)
    pointed = AttentionTextClassifier.load(path).set_params(threshold=(7, 0.9))
    assert pointed.score(test_x, test_y) != clf.score(test_x, test_y)
    assert evaluate(pointed, (test_x, test_y))["accuracy"] == pointed.score(test_x, test_y)
    assert evaluate(pointed, (test_x, test_y), threshold=None)["threshold"]["probability"] == 0.9
    assert evaluate(pointed, (test_x, test_y), threshold="7=0.1")["threshold"]["probability"] == 0.1
    predicted = pointed.predict(test_x)
    wrong = misclassified(pointed, (test_x, test_y))
    assert len(wrong) == int((predicted != test_y).sum())
    assert all(row["predicted_label"] == str(predicted[row["row"] - 1]) for row in wrong)
    # Compared against, too, as its predict answers: at its own operating point, not at the most probable class
    assert evaluate(clf.classifier_, (test_x, test_y), against=pointed)["against"]["other_accuracy"] == \
        pointed.score(test_x, test_y)
    with pytest.raises(NotFittedError):
        evaluate(AttentionTextClassifier(), (test_x, test_y))
    with pytest.raises(AttnclfError, match=rf"^classifier is a path, not a model: load it first, "
                                           rf"Classifier.load\('{re.escape(str(path))}'\)$"):
        evaluate(str(path), (test_x, test_y))
    with pytest.raises(AttnclfError, match=r"^classifier must be a Classifier, an Ensemble or a fitted "
                                           r"AttentionTextClassifier, not dict$"):
        misclassified({}, (test_x, test_y))
    with pytest.raises(DataError, match=r"^test: no texts to score$"):
        evaluate(clf, ([], []))


def test_an_ensemble_of_fitted_estimators_averages_their_probabilities(data, saved):
    # Ensemble([est_a, est_b]) was an AttributeError on config, Ensemble.load([clf]) a TypeError from Path.
    from attnclf import Classifier, Ensemble

    clf, path = saved
    y = np.array([7 if label == "positive" else 3 for label in data[1][:120]], dtype=np.uint8)  # (saved's)
    other = AttentionTextClassifier("boe", **SMALL, random_state=1).fit(data[0][:120], y)
    test_x = data[2][:30]
    averaged = Ensemble([clf, other]).predict_proba(test_x)
    assert not np.allclose(clf.predict_proba(test_x), other.predict_proba(test_x))  # (the mean is not a copy)
    np.testing.assert_allclose(averaged, (clf.predict_proba(test_x) + other.predict_proba(test_x)) / 2, atol=1e-6)
    with pytest.raises(NotFittedError):
        Ensemble([clf, AttentionTextClassifier()])
    with pytest.raises(AttnclfError, match=rf"^members\[1\] is a path, not a loaded run: "
                                           rf"Ensemble.load\(\['{re.escape(str(path))}', \.\.\.\]\) loads folders$"):
        Ensemble([clf, path])
    with pytest.raises(AttnclfError, match=r"^members\[0\] must be a Classifier or a fitted AttentionTextClassifier, "
                                           r"not int$"):
        Ensemble([3])
    with pytest.raises(AttnclfError, match=r"^Ensemble.load takes run folders, not Classifier: runs loaded already, "
                                           r"or fitted estimators, make one as Ensemble\(\[first, second, \.\.\.\]\)$"):
        Ensemble.load([path, Classifier.load(path)])


def test_load_gives_back_the_fitted_estimator(data, saved):
    clf, path = saved
    again = AttentionTextClassifier.load(path)
    assert again.get_params() == clf.get_params() and again.history_ == clf.history_
    assert again.classes_.dtype == np.uint8 and again.classes_.tolist() == [3, 7]
    predicted = again.predict(data[2][:40])
    assert predicted.dtype == np.uint8
    np.testing.assert_array_equal(predicted, clf.predict(data[2][:40]))
    np.testing.assert_array_equal(again.predict_proba(data[2][:40]), clf.predict_proba(data[2][:40]))


def test_probabilities_are_float64_rows_summing_to_one_fitted_or_loaded(data, saved):
    # As scikit-learn's classifiers return them, for np.allclose and sklearn's metrics and calibration; they came as
    # float32, whose rows sum to 1 only to about 1e-7.
    clf, path = saved
    test = data[2][:40]
    for estimator in (clf, AttentionTextClassifier.load(path)):
        probabilities, log_probabilities = estimator.predict_proba(test), estimator.predict_log_proba(test)
        assert probabilities.dtype == log_probabilities.dtype == np.float64
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=0, atol=1e-15)
        np.testing.assert_allclose(np.exp(log_probabilities), probabilities, rtol=1e-12, atol=0)
        np.testing.assert_array_equal(estimator.predict(test), estimator.classes_[probabilities.argmax(axis=1)])


def test_a_loaded_or_unpickled_estimator_knows_its_n_iter_(saved):
    import pickle

    clf, path = saved
    assert AttentionTextClassifier.load(path).n_iter_ == pickle.loads(pickle.dumps(clf)).n_iter_ == 1


@pytest.mark.parametrize("edit, message", [
    (lambda h: h[0].update(seconds="0.4"), "history.jsonl, line 1: seconds is '0.4', not a number"),
    (lambda h: h[0].pop("seconds"), "history.jsonl, line 1: seconds is missing"),
    (lambda h: h.__setitem__(0, [1]), "history.jsonl, line 1: [1] is not an object"),
], ids=["seconds-text", "no-seconds", "not-an-object"])
def test_an_estimator_whose_history_was_mangled_is_refused_as_it_loads(saved, tmp_path, mangle, edit, message):
    # history_ came back as the file held it, and a save of the loaded estimator (which sums its seconds) failed on it
    # with a TypeError or a KeyError, far from the file at fault.
    import shutil

    from attnclf.errors import RunDirError

    folder = Path(shutil.copytree(saved[1], tmp_path / "mangled"))
    mangle(folder / "history.jsonl", edit)
    with pytest.raises(RunDirError, match=re.escape(f"{folder / 'history.jsonl'}, line 1: ")) as refused:
        AttentionTextClassifier.load(folder)
    assert message in str(refused.value)


def test_an_estimator_saved_at_the_former_defaults_loads_with_them(data, saved, tmp_path):
    # save records every parameter: one saved before the defaults became train's (5 epochs, no patience) recorded
    # those, and loads, predicts and refits (clone) with them, not with today's defaults.
    import json
    import shutil

    clf, path = saved
    folder = Path(shutil.copytree(path, tmp_path / "former"))
    config = json.loads((folder / "config.json").read_text())
    config["estimator"]["params"] |= {"epochs": 5, "patience": 0}
    (folder / "config.json").write_text(json.dumps(config))
    old = AttentionTextClassifier.load(folder)
    assert (old.epochs, old.patience) == (clone(old).epochs, clone(old).patience) == (5, 0)
    np.testing.assert_array_equal(old.predict_proba(data[2][:40]), clf.predict_proba(data[2][:40]))


def test_an_estimator_saved_under_the_name_seed_loads_and_predicts_the_same(data, saved, tmp_path):
    # Saved before the parameter was random_state, its config.json records params.seed: it loads with that seed
    import json
    import shutil

    clf, path = saved
    folder = Path(shutil.copytree(path, tmp_path / "seed"))
    config = json.loads((folder / "config.json").read_text())
    params = config["estimator"]["params"]
    params["seed"] = params.pop("random_state")
    (folder / "config.json").write_text(json.dumps(config))
    old = AttentionTextClassifier.load(folder)
    assert old.get_params() == clf.get_params() and old.seed_ == clf.seed_ == clf.random_state
    np.testing.assert_array_equal(old.predict_proba(data[2][:40]), clf.predict_proba(data[2][:40]))


@pytest.mark.parametrize("random_state", [None, np.random.RandomState(3)], ids=["none", "instance"])
def test_a_drawn_seed_round_trips_through_save_and_load(data, tmp_path, random_state):
    # JSON holds None but no generator: an instance is recorded as the seed it gave, which refits the same model
    clf = AttentionTextClassifier("boe", d_model=16, epochs=1, random_state=random_state).fit(data[0][:60],
                                                                                               data[1][:60])
    again = AttentionTextClassifier.load(clf.save(tmp_path / "run"))
    assert again.seed_ == clf.seed_
    assert again.random_state == (None if random_state is None else clf.seed_)


def test_string_labels_and_self_attention_round_trip_and_serve(data, tmp_path):
    from fastapi.testclient import TestClient

    from attnclf.ensemble import load_run
    from attnclf.serve.app import create_app

    train_x, train_y, test_x, _ = data
    clf = AttentionTextClassifier(heads=2, layers=1, **SMALL).fit(train_x[:120], train_y[:120])
    path = clf.save(tmp_path / "strings")
    again = AttentionTextClassifier.load(path)
    assert again.classes_.dtype == clf.classes_.dtype and again.classes_.tolist() == ["negative", "positive"]
    np.testing.assert_array_equal(again.predict(test_x[:40]), clf.predict(test_x[:40]))
    with TestClient(create_app(load_run(path, device="cpu"))) as client:  # what `attnclf serve` serves
        answer = client.post("/predict", json={"text": test_x[0]}).json()["predictions"][0]
    np.testing.assert_allclose([answer["probabilities"][name] for name in clf.classes_], clf.predict_proba(test_x[:1])[0],
                               atol=1e-6)


@pytest.mark.parametrize("labels", [np.array(["neg", "pos"], dtype=object), np.array([False, True]),
                                    np.array([-1.0, 2.0], dtype=np.float32), np.array([0, 2 ** 63], dtype=np.uint64)])
def test_labels_of_every_savable_kind_come_back_as_given(data, tmp_path, labels):
    y = labels[[1 if label == "positive" else 0 for label in data[1][:60]]]
    clf = AttentionTextClassifier("boe", d_model=16, epochs=1).fit(data[0][:60], y)
    again = AttentionTextClassifier.load(clf.save(tmp_path / "run"))
    assert again.classes_.dtype == labels.dtype and again.classes_.tolist() == labels.tolist()
    assert [type(c) for c in again.classes_.tolist()] == [type(c) for c in labels.tolist()]


@pytest.mark.parametrize("labels, message", [
    (np.array([b"neg", b"pos"]), r"\|S3 labels would not read back"),
    (np.array(["2024-01-01", "2024-06-01"], dtype="datetime64[D]"), r"datetime64\[D\] labels would not read back"),
    (np.array([0.5, 2], dtype=object), r"the label 0.5 \(object labels\) would not read back"),
])
def test_labels_json_cannot_hold_exactly_are_refused_with_a_pointer_to_pickle(data, tmp_path, labels, message):
    y = labels[[1 if label == "positive" else 0 for label in data[1][:60]]]
    clf = AttentionTextClassifier("boe", d_model=16, epochs=1).fit(data[0][:60], y)
    with pytest.raises(ValueError, match=message + ".*keep this estimator with pickle or joblib instead"):
        clf.save(tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_save_refuses_an_unfitted_estimator_a_file_and_a_folder_that_is_not_empty(saved, tmp_path):
    from attnclf.errors import AttnclfError

    clf, path = saved
    with pytest.raises(NotFittedError):
        AttentionTextClassifier().save(tmp_path / "unfitted")
    assert not (tmp_path / "unfitted").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(AttnclfError, match="is a file; save into a folder"):
        clf.save(tmp_path / "file")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("mine")
    for overwrite in (False, True):  # a user's own files are never the estimator's to replace
        with pytest.raises(AttnclfError, match=r"holds other files; save into another folder \(overwrite replaces"):
            clf.save(tmp_path / "notes", overwrite=overwrite)
    assert (tmp_path / "notes" / "notes.txt").read_text() == "mine"
    with pytest.raises(AttnclfError, match="holds a fitted estimator; pass overwrite=True"):
        clf.save(path)
    (tmp_path / "empty").mkdir()
    clf.save(tmp_path / "empty")  # an empty folder is no one's
    assert AttentionTextClassifier.load(tmp_path / "empty").classes_.tolist() == [3, 7]
    clf.save(tmp_path / "empty", overwrite=True)  # an earlier save is replaced as a whole
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == sorted(p.name for p in path.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "file", "notes"]  # no temporary folder left
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    with pytest.raises(AttnclfError, match="is a symbolic link; save into a folder of its own"):
        clf.save(tmp_path / "link", overwrite=True)



def test_save_will_not_replace_a_folder_another_process_is_writing_into(saved, tmp_path, held_elsewhere,
                                                                        files_but_the_lock):
    # It swapped the folder out whole (overwrite) from under a process writing there, an `attnclf export` into its
    # onnx/ say, whose files went with the old folder; or said an empty folder being written "holds other files".
    import shutil

    from attnclf.rundir import LOCK_FILE

    clf, path = saved
    target = tmp_path / "estimator"
    shutil.copytree(path, target)
    for folder in (target, tmp_path / "new"):
        before = files_but_the_lock(folder) if folder.exists() else {}
        with held_elsewhere(folder) as pid:
            with pytest.raises(AttnclfError, match=rf"^{re.escape(str(folder))} is being written by another attnclf "
                                                   rf"process \(pid {pid}\); wait for it to finish, or save into "
                                                   rf"another folder$"):
                clf.save(folder, overwrite=True)
            assert files_but_the_lock(folder) == before
        clf.save(folder, overwrite=True)  # held no more
        assert AttentionTextClassifier.load(folder).classes_.tolist() == [3, 7] and not (folder / LOCK_FILE).exists()

def test_save_never_replaces_the_current_folder_and_finds_what_an_interrupted_save_set_aside(
        saved, tmp_path, monkeypatch):
    from attnclf import rundir
    from attnclf.errors import AttnclfError

    clf, _ = saved
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    for target in (".", "..", str(tmp_path / "work")):  # renamed over, the process would stand in a deleted folder
        with pytest.raises(AttnclfError, match="is the current folder or holds it"):
            clf.save(target, overwrite=True)
    clf.save("model")
    real_replace = rundir.os.replace

    def stop_after_setting_aside(source, destination):  # a crash between the two renames of publish_folder
        if str(source).endswith(".tmp"):
            raise KeyboardInterrupt
        real_replace(source, destination)

    monkeypatch.setattr(rundir.os, "replace", stop_after_setting_aside)
    with pytest.raises(KeyboardInterrupt):
        clf.save("model", overwrite=True)
    monkeypatch.setattr(rundir.os, "replace", real_replace)
    assert AttentionTextClassifier.load("model").classes_.tolist() == [3, 7]  # put back: the old save survives
    aside = Path(".model.x1y2.replaced")  # as a kill between the renames leaves it: set aside, the new one not in
    aside.mkdir()
    Path("model").rename(aside / "old")
    with pytest.raises(AttnclfError, match=r"left the earlier model in \S*/\.model\.x1y2\.replaced/old; move it back"):
        clf.save("model")
    assert (aside / "old" / "model.safetensors").is_file()


def test_save_will_not_replace_a_trained_run_without_overwrite_nor_load_one(saved, tmp_path):
    import json
    import shutil

    from attnclf.errors import AttnclfError

    trained = shutil.copytree(saved[1], tmp_path / "trained")  # as `attnclf train` writes it: no "trained_by"
    config = json.loads((trained / "config.json").read_text())
    del config["trained_by"], config["estimator"]
    (trained / "config.json").write_text(json.dumps(config))
    for overwrite in (False, True):
        with pytest.raises(AttnclfError, match="holds a run trained by `attnclf train`; save into another folder"):
            saved[0].save(trained, overwrite=overwrite)
    with pytest.raises(AttnclfError, match="not saved by AttentionTextClassifier.save: load it with attnclf.Classifier"):
        AttentionTextClassifier.load(trained)
    (tmp_path / "seeds" / "seed-0").mkdir(parents=True)
    (tmp_path / "seeds" / "seed-0" / "config.json").write_text("{}")
    with pytest.raises(AttnclfError, match="holds a `train --seeds` ensemble; save into another folder"):
        saved[0].save(tmp_path / "seeds")


@pytest.mark.parametrize("argv, message", [
    (["evaluate"], r"has no recorded test texts; give it a file of labelled test texts \(--test-file\)$"),
    (["evaluate", "--split", "validation"], "has no recorded validation texts to calibrate on or to score"),
    (["calibrate"], "has no recorded validation texts to calibrate on"),
    (["refit"], "has no recorded training data to resume or refit on; fit the estimator again"),
    (["report"], r"has no recorded test texts to report on \(report takes no test file; `attnclf evaluate "
                 r"RUN_DIR --test-file FILE` scores it\)$"),
    (["export"], r"has no recorded test texts; give it a file of labelled test texts \(--check-file\)$"),
    (["train", "--resume", "--output"], "has no recorded training data to resume or refit on"),
])
def test_commands_that_need_the_runs_own_data_refuse_a_saved_estimator_in_one_line(saved, capsys, tmp_path, argv,
                                                                                       message):
    import re
    import shutil

    from attnclf.cli import main

    path = shutil.copytree(saved[1], tmp_path / "moved")  # (a message must not name the folder it was saved in)
    before = sorted(p.name for p in path.iterdir())
    capsys.readouterr()
    assert main([*argv, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "saved by the scikit-learn estimator (AttentionTextClassifier.save)" in err
    assert re.match(rf"attnclf: error: ({re.escape(str(path))}|this run) was saved", err) and re.search(message, err)
    assert str(saved[1]) not in err
    assert sorted(p.name for p in path.iterdir()) == before  # nothing written beside it


def test_evaluate_scores_a_saved_estimator_on_a_test_file(data, saved, tmp_path, capsys):
    import csv
    import json

    from attnclf.cli import main

    clf, path = saved
    test_x, test_y = data[2][:40], data[3][:40]
    with open(tmp_path / "test.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([("text", "label"), *((t, 7 if y == "positive" else 3) for t, y in
                                                           zip(test_x, test_y))])
    capsys.readouterr()
    assert main(["evaluate", str(path), "--test-file", str(tmp_path / "test.csv"), "--json"]) == 0
    expected = clf.score(test_x, np.array([7 if y == "positive" else 3 for y in test_y], dtype=np.uint8))
    assert json.loads(capsys.readouterr().out)["accuracy"] == pytest.approx(expected)


def test_save_records_the_model_fit_built_not_what_the_file_recipe_builds_now(data, tmp_path, monkeypatch):
    # Fitted under the general defaults (before any file recipe), saved under today's recipe: the record must name
    # the model the weights belong to, not the recipe's n-gram branch and widths, as must one loaded and one pickled.
    import csv
    import json
    import pickle

    from attnclf import Classifier, recipes
    from attnclf.cli import main
    from attnclf.models import config_for
    from attnclf.training.settings import DERIVED_MODEL_FIELDS

    train_x, train_y, test_x, test_y = data
    with monkeypatch.context() as before:
        before.setattr(recipes, "FILE_RECIPES", recipes.FILE_RECIPES[:1])
        clf = AttentionTextClassifier(heads=2, layers=1, **SMALL).fit(train_x[:120], train_y[:120])
    built = clf.classifier_.model.config
    derived = {name: getattr(built, name) for name in DERIVED_MODEL_FIELDS}
    with open(tmp_path / "test.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([("text", "label"), *zip(test_x[:40], test_y[:40])])
    fresh = clf.save(tmp_path / "fresh")
    loaded = AttentionTextClassifier.load(fresh).save(tmp_path / "loaded")
    pickled = pickle.loads(pickle.dumps(clf)).save(tmp_path / "pickled")
    for folder in (fresh, loaded, pickled):
        recorded = json.loads((folder / "config.json").read_text())["settings"]["model_config"]
        assert recorded == {"d_model": 16, "heads": 2, "layers": 1}
        assert config_for("self-attn", **derived, **recorded) == built
        np.testing.assert_allclose(Classifier.load(folder, device="cpu").predict_proba(test_x[:40]),
                                   clf.predict_proba(test_x[:40]), rtol=1e-6)  # (float32 beside float64)
        assert main(["evaluate", str(folder), "--test-file", str(tmp_path / "test.csv"), "--json"]) == 0


def test_save_after_set_params_records_the_model_fit_built_not_the_one_set_since(data, tmp_path):
    # set_params changes the next fit, not the fitted model: a save after set_params(model="boe") recorded "boe" beside
    # a self-attn's weights and fields, and Classifier.load refused the folder ('boe' has no config field 'd_model').
    from attnclf import Classifier

    train_x, train_y, test_x, _ = data
    clf = AttentionTextClassifier(heads=2, layers=1, **SMALL).fit(train_x[:120], train_y[:120])
    clf.set_params(model="boe")
    fresh = clf.save(tmp_path / "fresh")
    for folder in (fresh, AttentionTextClassifier.load(fresh).save(tmp_path / "again")):
        loaded = Classifier.load(folder, device="cpu")
        assert loaded.config["model"]["name"] == "self-attn"
        np.testing.assert_allclose(loaded.predict_proba(test_x[:20]), clf.predict_proba(test_x[:20]), rtol=1e-6)
    assert AttentionTextClassifier.load(fresh).model == "boe"  # (the parameter, for the next fit)


def test_load_reads_only_the_label_dtypes_save_writes(saved, tmp_path):
    import json
    import shutil

    from attnclf.errors import RunDirError

    folder = shutil.copytree(saved[1], tmp_path / "edited")
    config = json.loads((folder / "config.json").read_text())
    for dtype, fine in (("<U50000000", True), ("V8", False), ("<M8[s]", False), ("<i16", False)):
        config["estimator"]["classes_dtype"] = dtype
        (folder / "config.json").write_text(json.dumps(config))
        if fine:  # as wide as its longest label, not 200 MB per label
            assert AttentionTextClassifier.load(folder).classes_.dtype.itemsize <= 8
        else:
            with pytest.raises(RunDirError, match="estimator.classes are not labels"):
                AttentionTextClassifier.load(folder)


def test_balanced_class_weights_raise_a_rare_class_s_probabilities(data, tmp_path):
    import json

    train_x, train_y, test_x, _ = data
    rare = [i for i, label in enumerate(train_y) if label == "negative"][:12]
    common = [i for i, label in enumerate(train_y) if label == "positive"][:120]
    x, y = [train_x[i] for i in rare + common], [train_y[i] for i in rare + common]
    settings = dict(d_model=16, epochs=5, batch_size=16, lr=3e-2, validation_fraction=0)
    plain = AttentionTextClassifier("boe", **settings).fit(x, y)
    balanced = AttentionTextClassifier("boe", class_weight="balanced", **settings).fit(x, y)
    negative = list(plain.classes_).index("negative")
    # Each rare text's loss counts ten times a common one's: the model leans toward the rare class.
    assert balanced.predict_proba(test_x)[:, negative].mean() > plain.predict_proba(test_x)[:, negative].mean() + 0.05
    saved = json.loads((balanced.save(tmp_path / "saved") / "config.json").read_text())
    assert saved["settings"]["train"]["class_weights"] == "balanced"
    assert AttentionTextClassifier.load(tmp_path / "saved").class_weight == "balanced"


# ---------------------------------------------------------------- class_weight as a dict, and sample_weight


def _state(clf) -> dict:
    return clf.classifier_.model.state_dict()


def _same_weights(a, b) -> bool:
    first, second = _state(a), _state(b)
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


@pytest.mark.parametrize("class_weight", [None, "balanced"])
def test_unit_sample_weights_train_the_very_weights_no_weights_do(data, class_weight):
    train_x, train_y, _, _ = data
    make = lambda: AttentionTextClassifier(class_weight=class_weight, **TINY)  # noqa: E731 (self-attn: dropout too)
    plain = make().fit(train_x[:150], train_y[:150])
    # (through a Pipeline, as scikit-learn users route it)
    piped = Pipeline([("clf", make())]).fit(train_x[:150], train_y[:150], clf__sample_weight=np.ones(150))
    assert has_fit_parameter(plain, "sample_weight")
    assert _same_weights(plain, piped.named_steps["clf"])
    untimed = lambda clf: [{k: v for k, v in h.items() if k != "seconds"} for h in clf.history_]  # noqa: E731
    assert untimed(plain) == untimed(piped.named_steps["clf"])


def test_each_step_divides_by_its_batch_s_summed_weight_so_scaling_every_weight_changes_nothing(data):
    # sum(w * loss) / sum(w) is the same mean for w and 2w (to the bit: scaling by a power of 2 is exact); a step
    # that divided by the batch's count instead would take steps twice as large, and Adam's epsilon and the
    # gradient clipping would show it in the weights.
    train_x, train_y, _, _ = data
    x, y = train_x[:150], train_y[:150]
    settings = dict(d_model=16, epochs=2, batch_size=16, lr=3e-2, validation_fraction=0)
    plain = AttentionTextClassifier("boe", **settings).fit(x, y)
    for scale in (2.0, 0.25):
        scaled = AttentionTextClassifier("boe", **settings).fit(x, y, sample_weight=np.full(150, scale))
        assert _same_weights(plain, scaled)
    doubled = AttentionTextClassifier("boe", class_weight={label: 2 for label in set(y)}, **settings).fit(x, y)
    assert _same_weights(plain, doubled)

def test_a_text_of_weight_zero_is_as_if_it_had_not_been_given(data):
    train_x, train_y, test_x, _ = data
    weights = np.tile([1.0, 0.0, 1.0], 50)  # a third of the texts weigh 0
    kept = [i for i in range(150) if weights[i]]
    weighted = AttentionTextClassifier(**TINY).fit(train_x[:150], train_y[:150], sample_weight=weights)
    without = AttentionTextClassifier(**TINY).fit([train_x[i] for i in kept], [train_y[i] for i in kept])
    assert _same_weights(weighted, without)
    assert weighted.classifier_.tokenizer.vocab_size == without.classifier_.tokenizer.vocab_size
    np.testing.assert_array_equal(weighted.predict_proba(test_x[:40]), without.predict_proba(test_x[:40]))


def test_class_weight_by_label_is_sample_weight_on_that_class_s_texts_and_leans_toward_it(data):
    train_x, train_y, test_x, _ = data
    x, y = train_x[:150], np.array([7 if label == "negative" else 3 for label in train_y[:150]])  # integer labels
    settings = dict(d_model=16, epochs=3, batch_size=16, lr=3e-2, validation_fraction=0)
    plain = AttentionTextClassifier("boe", **settings).fit(x, y)
    by_class = AttentionTextClassifier("boe", class_weight={np.int64(7): 20}, **settings).fit(x, y)  # (a grid's key)
    by_text = AttentionTextClassifier("boe", **settings).fit(x, y, sample_weight=np.where(y == 7, 20.0, 1.0))
    # The product of the two weights is the one weight each text's loss is multiplied by, wherever it comes from.
    assert _same_weights(by_class, by_text)
    seven = list(plain.classes_).index(7)
    assert by_class.predict_proba(test_x)[:, seven].mean() > plain.predict_proba(test_x)[:, seven].mean() + 0.05
    # A weighted mean: the loss an epoch reports is the mean of 20 parts class 7, 1 part class 3.
    assert by_class.history_[0]["train_loss"] != pytest.approx(plain.history_[0]["train_loss"], rel=1e-3)


@pytest.mark.parametrize("y, class_weight", [
    (np.array([3, 7] * 60, dtype=np.uint8), {7: 2.5, 3: 0.5}),
    (["spam", "ham"] * 60, {"spam": 2.5}),
    ([True, False] * 60, {True: 3}),
])
def test_class_weight_by_label_round_trips_through_save_and_load_keys_and_all(data, tmp_path, y, class_weight):
    import json

    clf = AttentionTextClassifier("boe", class_weight=class_weight, **SMALL).fit(data[0][:120], y)
    path = clf.save(tmp_path / "saved")
    again = AttentionTextClassifier.load(path)
    assert again.class_weight == class_weight
    assert [type(k) for k in again.class_weight] == [type(k) for k in class_weight]  # (7 is not "7")
    assert again.get_params() == clf.get_params()
    # The run's own record weighs label names, as labels.json names them.
    train = json.loads((path / "config.json").read_text())["settings"]["train"]
    assert train["class_weights"] == {str(k): float(v) for k, v in class_weight.items()}
    np.testing.assert_array_equal(again.predict_proba(data[2][:20]), clf.predict_proba(data[2][:20]))


def test_an_edited_class_weight_in_a_saved_estimator_is_refused(saved, tmp_path):
    import json
    import shutil

    from attnclf.errors import RunDirError

    folder = shutil.copytree(saved[1], tmp_path / "edited")
    config = json.loads((folder / "config.json").read_text())
    config["estimator"]["params"]["class_weight"] = [[[7], 2.0]]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(RunDirError, match=r"estimator.params.class_weight is not None, 'balanced' or a list of "
                                          r"\[label, weight\] pairs"):
        AttentionTextClassifier.load(folder)


@pytest.mark.parametrize("sample_weight, class_weight, message", [
    ([1, 1], None, r"sample_weight must hold one weight per text: 3 texts, sample_weight of shape \(2,\)"),
    (np.ones((3, 1)), None, r"3 texts, sample_weight of shape \(3, 1\)"),
    ([1, float("nan"), 1], None, r"^sample_weight\[1\] must be a finite number of at least 0, got nan$"),
    (np.array([1, 1, np.inf]), None, r"sample_weight\[2\] must be a finite number of at least 0, got inf"),
    (np.array([1, -2, 1]), None, r"sample_weight\[1\] must be a finite number of at least 0, got -2$"),
    ([1, "2", 1], None, r"sample_weight\[1\] must be a finite number of at least 0, got '2'"),
    ([1, None, 1], None, r"sample_weight\[1\] must be a finite number of at least 0, got None"),
    ([1, True, 1], None, r"sample_weight\[1\] must be a finite number of at least 0, got True"),
    ([0, 0.0, 0], None, "sample_weight is 0 for every text: nothing to fit on"),
    ({"a": 1}, None, "sample_weight must be a sequence of numbers, one per text, not dict"),
    ("111", None, "sample_weight must be a sequence of numbers, one per text, not str"),
    (None, {"c": 2}, r"class_weight has 'c', which is not a class of y \(its classes: 'a', 'b'\)"),
    (None, {"a": -1}, r"class_weight\['a'\] must be a finite number of at least 0, got -1"),
    (None, ["a", 2], r"class_weight must be None, 'balanced' or a dict \{label: weight\}, got \['a', 2\]"),
    (None, {"a": 0, "b": 0}, "class_weight times sample_weight is 0 for every text: nothing to fit on"),
    ([0, 1, 0], {"b": 0}, "class_weight times sample_weight is 0 for every text"),
])
def test_bad_weights_are_one_line_value_errors_naming_the_weight(sample_weight, class_weight, message):
    clf = AttentionTextClassifier("boe", epochs=1, class_weight=class_weight)
    with pytest.raises(ValueError, match=message):
        clf.fit(["w1", "w2", "w3"], ["a", "b", "a"], sample_weight=sample_weight)


@pytest.mark.parametrize("class_weight, start", [
    (LONG, r"^class_weight must be None, 'balanced' or a dict \{label: weight\}, got 'xxx"),
    (np.arange(5_000).reshape(50, 100), r"^class_weight must be None, 'balanced' or a dict \{label: weight\}, got "
                                        r"array\(\[\[ "),
    ({LONG * 2: 2}, r"^class_weight has 'xxx"),
    ({LONG: -1}, r"^class_weight\['xxx.*\] must be a finite number of at least 0, got -1$"),
], ids=["string", "array", "key", "weight"])
def test_a_class_weight_error_names_a_long_value_by_its_start(class_weight, start):
    # Echoed whole (repr), a 5,000-character label made the message as long, and an array's repr spanned lines.
    with pytest.raises(AttnclfError, match=start) as refused:
        AttentionTextClassifier("boe", epochs=1, class_weight=class_weight).fit(["w1", "w2", "w3"], ["a", LONG, "a"])
    assert len(str(refused.value)) < 300 and "\n" not in str(refused.value)


def test_class_weight_keys_are_label_values_as_y_gives_them(data):
    x, y = data[0][:60], [1, 2] * 30
    with pytest.raises(ValueError, match=r"class_weight has '1', which is not a class of y \(its classes: 1, 2\)"):
        AttentionTextClassifier("boe", epochs=1, class_weight={"1": 2}).fit(x, y)


# ---------------------------------------------------------------- threads


@pytest.fixture
def global_threads():
    """Set PyTorch's process-wide thread count for one test, and put back the one the suite runs with."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


@pytest.mark.parametrize("threads, message", [
    (0, "threads must be at least 1, got 0"),
    ("2", "threads must be a whole number, got '2'"),
    (True, "threads must be a whole number, got True"),
    (1.0, "threads must be a whole number, got 1.0"),
])
def test_a_bad_thread_count_is_a_one_line_value_error_at_fit_and_predict(data, saved, threads, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        AttentionTextClassifier("boe", threads=threads, **SMALL).fit(data[0][:60], data[1][:60])
    clf = clone(saved[0]).set_params(threads=threads)
    clf.classes_, clf.classifier_ = saved[0].classes_, saved[0].classifier_  # (fitted, then set_params)
    with pytest.raises(ValueError, match=f"^{message}$"):
        clf.predict(data[2][:5])


def test_threads_apply_while_fit_and_predict_run_and_the_global_count_is_put_back(data, monkeypatch, global_threads):
    import attnclf.sklearn as module

    seen = []

    class Watched(module.Trainer):
        def fit(self, *args, **kwargs):
            seen.append(("fit", torch.get_num_threads()))
            return super().fit(*args, **kwargs)

    monkeypatch.setattr(module, "Trainer", Watched)
    global_threads(2)
    clf = AttentionTextClassifier("boe", threads=1, **SMALL).fit(data[0][:60], data[1][:60])
    assert torch.get_num_threads() == 2
    real_logits = clf.classifier_.logits  # (predict, predict_proba and predict_log_proba all read the logits)
    monkeypatch.setattr(clf.classifier_, "logits",
                        lambda texts: seen.append(("logits", torch.get_num_threads())) or real_logits(texts))
    clf.predict(data[2][:5])
    assert torch.get_num_threads() == 2
    clf.predict_log_proba(data[2][:5])
    assert torch.get_num_threads() == 2
    assert seen == [("fit", 1), ("logits", 1), ("logits", 1)]
    with pytest.raises(ValueError, match="y has only one class"):  # (put back when fit fails, too)
        AttentionTextClassifier("boe", threads=1).fit(data[0][:2], ["a", "a"])
    assert torch.get_num_threads() == 2
    seen.clear()
    AttentionTextClassifier("boe", **SMALL).fit(data[0][:60], data[1][:60])  # None: the process's own setting
    assert seen == [("fit", 2)]


def test_threads_1_under_a_global_count_of_2_trains_what_a_global_count_of_1_does(data, global_threads):
    # Wide enough that 2 threads split its products (and give other weights, on the machines this was written on)
    settings = dict(d_model=64, heads=2, layers=1, ff_dim=256, epochs=2, batch_size=64, lr=1e-2)
    x, y = data[0][:150], data[1][:150]
    global_threads(1)
    one = AttentionTextClassifier(**settings).fit(x, y)
    global_threads(2)
    told = AttentionTextClassifier(threads=1, **settings).fit(x, y)
    assert _same_weights(one, told)
    np.testing.assert_array_equal(told.predict_proba(data[2][:40]), one.predict_proba(data[2][:40]))


def test_threads_round_trip_through_save_and_load(data, tmp_path):
    import json

    clf = AttentionTextClassifier("boe", threads=np.int64(1), **SMALL).fit(data[0][:60], data[1][:60])
    config = json.loads((clf.save(tmp_path / "saved") / "config.json").read_text())
    assert config["estimator"]["params"]["threads"] == 1 and config["settings"]["threads"] == 1
    assert AttentionTextClassifier.load(tmp_path / "saved").threads == 1


def test_fit_warns_when_the_bucket_budget_cuts_the_ngram_branch():
    # `attnclf train` notes that a file of more than 4 classes keeps fewer bigram buckets than the file recipe asks;
    # fit built the same cut branch and said nothing.
    words = ["great", "dull", "scary", "funny", "long", "sad"]
    texts = [f"{word} film number {i}" for i in range(4) for word in words]
    small = dict(d_model=16, heads=2, layers=1, epochs=1, min_frequency=1, max_len=8, validation_fraction=0)
    asked = {"nb_ngram_buckets": 1048576}  # (as given: fit scales only the recipe's count to the data)
    with pytest.warns(AttnclfWarning) as caught:
        clf = AttentionTextClassifier(**small, model_config=asked).fit(texts, [w for _ in range(4) for w in words])
    assert [str(w.message) for w in caught] == [
        "the n-gram branch keeps 524,288 bigram buckets, not 1,048,576 (nb_ngram_buckets=1048576): "
        "nb_ngram_bucket_budget=4194304 bounds buckets x classes, and this data has 6 classes; "
        "model_config={'nb_ngram_bucket_budget': 0} lifts it"]
    assert caught[0].filename == __file__  # (pointing at the caller's fit, not inside the library)
    assert clf.classifier_.model.config.nb_ngram_bucket_budget == 4194304  # (the file recipe's)
    with warnings.catch_warnings():  # two classes keep every bucket: nothing to say
        warnings.simplefilter("error", AttnclfWarning)
        AttentionTextClassifier(**small, model_config=asked).fit(texts, [i % 2 for i in range(len(texts))])
        AttentionTextClassifier(**small).fit(texts, [word for _ in range(4) for word in words])  # (24 texts: 512)


def test_fit_warns_of_a_text_labelled_both_ways_with_or_without_validation_texts():
    texts = [f"film number {i}" for i in range(20)] + ["film number 3"]
    labels = [i % 2 for i in range(20)] + [0]  # ("film number 3" is 1 above)
    small = dict(d_model=16, heads=2, layers=1, epochs=1, min_frequency=1, max_len=8)
    for validation_fraction in (0, 0.2):
        with pytest.warns(AttnclfWarning) as caught:
            AttentionTextClassifier(**small, validation_fraction=validation_fraction).fit(texts, labels)
        both_ways = [str(w.message) for w in caught if "more than one label" in str(w.message)]
        # (with validation texts, seed 0 holds out neither of the two rows)
        assert both_ways == ["1 training text occurs under more than one label (2 rows; 'film number 3' as 0 and 1): a "
                             "model can fit only one label of each; `attnclf suspects` ranks rows whose label is likely "
                             "wrong"]


def test_the_ngram_branch_has_sixteen_buckets_per_distinct_training_bigram_unless_given(data, tmp_path):
    # The file recipe's 2^20 buckets made tens of MB of model of a few hundred texts; fit holds 16 buckets per distinct
    # bigram of its training texts (a power of two, the recipe's count at most), as crowded as the recipe was on SST-2's
    # 6,920 sentences, where it was measured. A count given in model_config is built as given.
    from attnclf import Classifier
    from attnclf.models.ngrams import distinct_bigrams

    train_x, train_y, test_x, _ = data
    small = dict(heads=2, layers=1, epochs=1, validation_fraction=0)
    clf = AttentionTextClassifier(**small).fit(train_x[:100], train_y[:100])
    bigrams = distinct_bigrams(clf.classifier_.tokenizer.encode(train_x[:100]))
    buckets = clf.classifier_.model.config.nb_ngram_buckets
    assert buckets == clf.classifier_.model.ngram_logits.buckets and buckets & (buckets - 1) == 0
    assert 16 * bigrams <= buckets < 32 * bigrams and buckets < 1048576
    # (saved, the folder records the count fit built, which a loaded estimator and `attnclf predict` build again)
    again = AttentionTextClassifier.load(clf.save(tmp_path / "saved"))
    assert again.classifier_.model.config.nb_ngram_buckets == buckets
    assert Classifier.load(tmp_path / "saved").model.config.nb_ngram_buckets == buckets
    np.testing.assert_array_equal(again.predict_proba(test_x[:20]), clf.predict_proba(test_x[:20]))
    given = AttentionTextClassifier(**small, model_config={"nb_ngram_buckets": 1048576})
    assert given.fit(train_x[:100], train_y[:100]).classifier_.model.config.nb_ngram_buckets == 1048576


def test_the_package_offers_the_estimator_to_train_from_python_without_importing_it_first():
    # A newcomer's `import attnclf; attnclf.<tab>` listed Classifier and Ensemble, what loads a trained run, and
    # nothing that trains one from texts in memory: the estimator was one import away, under attnclf.sklearn.
    import subprocess
    import sys

    import attnclf

    assert attnclf.AttentionTextClassifier is AttentionTextClassifier
    assert "AttentionTextClassifier" in attnclf.__all__ and "AttentionTextClassifier" in dir(attnclf)
    # Still lazy: `import attnclf` (and the command line's start) pays for neither scikit-learn nor torch.
    code = "import sys, attnclf; print('sklearn' in sys.modules, 'torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False False"


# ---------------------------------------------------------------- threshold=: the command line's --threshold CLASS=P


def test_threshold_predicts_its_class_from_that_probability_on_and_leaves_probabilities_alone(data, saved):
    clf, path = saved  # (classes 3 and 7, uint8)
    test = data[2][:60]
    probabilities = clf.predict_proba(test)
    cut = float(np.quantile(probabilities[:, 1], 0.75))  # (7 from its top quarter on: not where argmax puts it)
    expected = np.where(probabilities[:, 1] >= cut, 7, 3)
    assert (expected != clf.predict(test)).any()
    for threshold in ((7, cut), (np.uint8(7), cut), f"7={cut!r}"):  # a class as y gives it, or as CLASS=P names it
        tuned = clone(clf).set_params(threshold=threshold)
        tuned.classes_, tuned.classifier_ = clf.classes_, clf.classifier_  # (fitted as clf, without a fit)
        predicted = tuned.predict(test)
        np.testing.assert_array_equal(predicted, expected)
        assert predicted.dtype == np.uint8
        np.testing.assert_array_equal(tuned.predict_proba(test), probabilities)


def test_threshold_round_trips_through_get_params_clone_set_params_and_save(data, tmp_path):
    train_x, train_y, test_x, _ = data
    clf = AttentionTextClassifier("boe", threshold=("positive", 0.8), **SMALL)
    assert clone(clf).get_params()["threshold"] == ("positive", 0.8)
    assert clone(clf).set_params(threshold="negative=0.6").threshold == "negative=0.6"
    clf.fit(train_x[:120], train_y[:120])
    # The folder's other readers answer without it, which saving says.
    with pytest.warns(AttnclfWarning, match=r"^threshold positive=0.8 is this estimator's: AttentionTextClassifier.load "
                                            r"keeps it, but `attnclf predict`, `serve` and Classifier.load of .*saved "
                                            r"answer the most probable class unless told it \(--threshold "
                                            r"positive=0.8\)$"):
        saved = clf.save(tmp_path / "saved")
    again = AttentionTextClassifier.load(saved)
    assert tuple(again.threshold) == ("positive", 0.8)
    np.testing.assert_array_equal(again.predict(test_x[:60]), clf.predict(test_x[:60]))


@pytest.mark.parametrize("threshold, message", [
    ("fraud=0.5", r"^threshold: 'fraud' is not one of the run's 2 classes: 'negative', 'positive'$"),
    (("positive", 1.5), r"^threshold 'positive'=1\.5: the probability must be between 0 and 1, both left out$"),
    ("positive", r"^threshold takes CLASS=P, a class and the probability from which it is predicted \(pos=0\.7\), "
                 r"got 'positive'$"),
    (0.7, r"^threshold takes a class and a probability, \('pos', 0\.7\) or 'pos=0\.7', got 0\.7$"),
])
def test_a_bad_threshold_is_one_line_at_fit_before_any_training(data, monkeypatch, threshold, message):
    from attnclf.training import trainer

    monkeypatch.setattr(trainer.Trainer, "fit", lambda *args, **kwargs: pytest.fail("trained"))
    with pytest.raises(AttnclfError, match=message):
        AttentionTextClassifier("boe", threshold=threshold, **SMALL).fit(data[0][:60], data[1][:60])


def test_an_estimator_pickled_before_threshold_unpickles_without_one(data, saved):
    clf = saved[0]
    state = dict(clf.__getstate__())
    state.pop("threshold", None)  # (as pickled before the parameter was)
    old = AttentionTextClassifier.__new__(AttentionTextClassifier)
    old.__setstate__(state)
    assert old.get_params()["threshold"] is None
    np.testing.assert_array_equal(old.predict(data[2][:10]), clf.predict(data[2][:10]))


def test_fit_warns_of_the_labels_as_train_does_each_once():
    # `attnclf train` warns of a class of one text and of two classes differing only in case; fit on the same labels
    # trained three classes and said nothing.
    texts = [f"{word} film number {i}" for i in range(10) for word in ("good", "bad")] + ["a Good film"]
    labels = [label for _ in range(10) for label in ("positive", "negative")] + ["Positive"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        AttentionTextClassifier("boe", d_model=16, epochs=1, min_frequency=1).fit(texts, labels)
    assert [(w.category, str(w.message)) for w in caught] == [
        (AttnclfWarning, "1 of 3 classes has a single training text ('Positive'): a model learns little from one "
                         "example; it has no validation text either (a class needs 2 texts for a split to hold one "
                         "out), so no validation score tells how it does; give it more texts, or merge rare classes"),
        (AttnclfWarning, "classes 'Positive' and 'positive' differ only in case or spaces; make them one label in the "
                         "data if they mean one class")]
    assert {w.filename for w in caught} == {__file__}  # (pointing at the caller's fit, not inside the library)
    with warnings.catch_warnings():  # clean labels: nothing to say
        warnings.simplefilter("error")
        AttentionTextClassifier("boe", d_model=16, epochs=1, min_frequency=1).fit(texts[:-1], labels[:-1])
        # (numbers are written one way, their own: 1.0 is no "1" a file wrote as "1.0", and predict answers 1.0)
        floats = np.array([float(label == "positive") for label in labels[:-1]])
        AttentionTextClassifier("boe", d_model=16, epochs=1, min_frequency=1).fit(texts[:-1], floats)
        # (a class weighted 0 has no training text by the caller's choice, not for want of texts)
        AttentionTextClassifier("boe", d_model=16, epochs=1, min_frequency=1, class_weight={"neutral": 0}).fit(
            texts[:-1] + ["a fair film"], labels[:-1] + ["neutral"])


def test_fit_warns_of_its_texts_as_train_does():
    # `attnclf train` warns of a file's texts that validation shares with training (it flatters the epoch chosen)
    # and of Thai texts the word tokenizer reads a clause at a time; fit said nothing of either.
    texts = [f"{word} film number {i}" for i in range(20) for word in ("good", "bad")]
    labels = [label for _ in range(20) for label in ("positive", "negative")]
    small = dict(d_model=16, epochs=1, min_frequency=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        AttentionTextClassifier("boe", **small).fit(texts * 2, labels * 2)
    assert len(caught) == 1 and caught[0].category is AttnclfWarning and caught[0].filename == __file__
    # (in the estimator's terms: train's names refit's epoch count too, of a command the estimator has no part in)
    assert re.fullmatch(r"\d+ of the 8 validation texts also occur among the training texts \(duplicates in the "
                        r"data\?\): validation scores and early stopping will flatter the model",
                        str(caught[0].message))
    thai = [f"สินค้าดีมาก{i}" for i in range(20)] + [f"แย่มาก{i}" for i in range(20)]
    with pytest.warns(AttnclfWarning) as caught:
        AttentionTextClassifier("boe", **small).fit(thai, labels)
    assert [str(w.message) for w in caught] == [
        "36 of the 36 training texts (100%) hold Thai, Lao, Khmer or Burmese text with no spaces between words (such "
        "as 'สินค้าดีมาก'), which the word tokenizer reads as one token per run: few texts share them, and unseen "
        "ones read as <unk>; tokenizer='bpe' cuts them into pieces texts share, given a vocab_size too small to hold "
        "whole clauses"]
    with warnings.catch_warnings():  # validated on its training texts by design, or bpe: nothing to say
        warnings.simplefilter("error")
        AttentionTextClassifier("boe", **small, validation_fraction=0).fit(texts * 2, labels * 2)
        AttentionTextClassifier("boe", **small, tokenizer="bpe").fit(thai, labels)


def test_fit_warns_of_a_class_without_validation_text_in_the_estimator_s_terms():
    # (fit's warning advised "a --validation-file that holds some", a flag of `attnclf train`, not a parameter of fit)
    texts = [f"{word} film number {i}" for i in range(20) for word in ("good", "bad")] + ["so so film", "meh film"]
    labels = [label for _ in range(20) for label in ("positive", "negative")] + ["neutral", "neutral"]
    with pytest.warns(AttnclfWarning) as caught:
        AttentionTextClassifier("boe", d_model=16, epochs=1, min_frequency=1).fit(texts, labels)
    assert [str(w.message) for w in caught] == [
        "1 of 3 classes has no validation text ('neutral'): no validation score tells how it does; give it more "
        "texts, or a larger validation_fraction"]
