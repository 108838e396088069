"""bench/small_files.py: the n-gram buckets by class count, and the rule that chooses the file default."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import small_files  # noqa: E402

SETS = ["ag3k", "imdb3k", "sst2", "ng3k"]
A, D, F = "(a) defaults", "(d) scaled n-gram branch", "(f) small model, no branch"


def cells(**means: list[float]) -> dict:
    """Cells whose mean validation accuracies are ``means[candidate letter]`` (percent), one a set."""
    names = {"a": A, "d": D, "f": F}
    return {f"{name} {names[letter]}": {"mean_validation_accuracy": value / 100}
            for letter, values in means.items() for name, value in zip(SETS, values)}


def test_branch_buckets_shrink_with_the_classes():
    assert [small_files.branch_buckets(c) for c in (2, 4, 5, 20, 150)] == [2**20, 2**20, 2**19, 2**17, 2**14]


def test_f_is_chosen_when_both_pass_and_d_leads_by_half_a_point_or_less():
    chosen = small_files.verdict(cells(a=[80, 80, 80, 80], d=[82.5, 82.5, 82.5, 82.5], f=[82, 82, 82, 82]), SETS)
    assert chosen["chosen"] == F and chosen[D]["passes"] and chosen[F]["passes"]


def test_d_is_chosen_when_both_pass_and_d_leads_by_more():
    chosen = small_files.verdict(cells(a=[80, 80, 80, 80], d=[83, 83, 83, 83], f=[82, 82, 82, 82]), SETS)
    assert chosen["chosen"] == D


def test_a_set_lost_fails_a_candidate_whatever_its_average():
    chosen = small_files.verdict(cells(a=[80, 80, 80, 80], d=[90, 90, 90, 79.9], f=[80.5, 81, 81, 81]), SETS)
    assert not chosen[D]["passes"] and not chosen[F]["passes"] and chosen["chosen"] == A


def test_an_average_gain_under_one_point_fails():
    chosen = small_files.verdict(cells(a=[80, 80, 80, 80], d=[80.9, 80.9, 80.9, 80.9], f=[82, 82, 82, 82]), SETS)
    assert not chosen[D]["passes"] and chosen["chosen"] == F


def test_no_verdict_until_every_set_has_every_candidate():
    partial = cells(a=[80, 80, 80, 80], d=[83, 83, 83, 83], f=[82, 82, 82, 82])
    del partial[f"ng3k {F}"]
    assert small_files.verdict(partial, SETS)["chosen"] is None


def test_c_is_chosen_by_validation_accuracy_and_ties_go_to_the_smaller():
    import baselines

    assert baselines.choose_C({0.25: 0.80, 1: 0.85, 4: 0.86, 16: 0.84}) == 4
    assert baselines.choose_C({64: 0.849, 16: 0.849, 4: 0.849, 1: 0.8387}) == 4  # whatever the order given
    assert baselines.choose_C({0.3: 0.5}) == 0.3


def test_a_written_file_reads_back_as_its_texts_and_labels(tmp_path):
    from attnclf.data.base import TextDataset

    texts = ['a "quoted", text', "two\nlines", "plain"]
    data = TextDataset(texts=texts, labels=[1, 0, 1], label_names=["neg", "pos"], name="t")
    (tmp_path / "f.csv").write_bytes(small_files.csv_bytes(data))
    read_texts, labels = small_files.read_file(tmp_path / "f.csv")
    assert read_texts == texts and list(labels) == ["pos", "neg", "pos"]


def test_reference_rows_fit_on_the_files_and_choose_c_on_validation(tmp_path):
    from attnclf.data.base import TextDataset

    def data(n: int) -> TextDataset:
        texts = [f"good fine great film {i}" if i % 2 else f"bad awful dull film {i}" for i in range(n)]
        return TextDataset(texts=texts, labels=[i % 2 for i in range(n)], label_names=["neg", "pos"], name="t")

    (tmp_path / "data").mkdir()
    for part, n in (("train", 40), ("validation", 20), ("test", 20)):
        (tmp_path / "data" / f"toy-{part}.csv").write_bytes(small_files.csv_bytes(data(n)))
    rows = small_files.fit_references(tmp_path, {"toy": {"classes": 2}}, test=True)["toy"]
    assert set(rows) == set(small_files.REFERENCES)
    for reference, entry in rows.items():
        assert entry["C"] in small_files.REFERENCES[reference][1]
        assert entry["validation_accuracy"] == 1.0 and entry["test_accuracy"] == 1.0
    no_test = small_files.fit_references(tmp_path, {"toy": {"classes": 2}}, test=False)["toy"]
    assert all("test_accuracy" not in entry for entry in no_test.values())


def test_every_candidate_trains_as_measured():
    # The study trained every candidate at the general tokenizer's 256 tokens, and (a) at the general defaults, the
    # file recipe's before: the candidates' flags must rebuild that whatever the file recipe holds now.
    from attnclf.cli import build_parser, build_settings
    from attnclf.text.tokenizer import TokenizerConfig
    from attnclf.training.settings import DataSettings, settings_for

    def built(flags: list[str]):
        return build_settings(build_parser().parse_args(["train", "--train-file", "t.csv", "--output", "unused",
                                                         *flags]))

    for candidate, flags in small_files.CANDIDATES.items():
        for classes in (2, 20):
            assert built(flags(classes)).tokenizer == TokenizerConfig(), candidate
    before_any_recipe = settings_for(DataSettings(train_file="t.csv"), "self-attn", output="unused", file_recipe=0)
    assert built(small_files.CANDIDATES[A](2)).first_difference(before_any_recipe) is None
