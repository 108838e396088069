"""bench/common.py: the settings a benchmark trains with are those `attnclf train` would use."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import common  # noqa: E402


def test_cli_settings_takes_threads_and_no_report_as_train_does(tmp_path):
    settings = common.cli_settings("synthetic", str(tmp_path / "run"), "--threads", "1", "--no-report")
    assert (settings.threads, settings.report) == (1, False)
    settings = common.cli_settings("synthetic", str(tmp_path / "run"))
    assert (settings.threads, settings.report) == (None, True)


def test_cpu_seconds_counts_this_processs_work_as_the_training_scripts_and_fasttext_peer_read_it():
    started = common.cpu_seconds()
    sum(i * i for i in range(2_000_000))
    assert common.cpu_seconds() - started > 0


def test_parse_with_threads_sets_torchs_threads_one_by_default_or_leaves_them_to_torch(monkeypatch):
    import torch

    before = torch.get_num_threads()
    try:
        monkeypatch.setattr(sys, "argv", ["bench/x.py"])
        assert common.parse_with_threads(common.parser("x")).threads == 1 and torch.get_num_threads() == 1
        torch.set_num_threads(before)
        assert common.parse_with_threads(common.parser("x"), default=None).threads is None
        assert torch.get_num_threads() == before
    finally:
        torch.set_num_threads(before)


def test_labelled_rows_name_each_label_among_the_runs_classes_and_write_jsonl_writes_them_as_read_back(tmp_path):
    import json

    from attnclf.data.base import TextDataset
    from attnclf.errors import DataError

    data = TextDataset(["très bien", "awful"], [1, 0], ["negative", "positive"])
    rows = common.labelled_rows(data, ["positive", "negative"])
    assert rows == [{"text": "très bien", "label": "positive"}, {"text": "awful", "label": "negative"}]
    common.write_jsonl(tmp_path / "train.jsonl", rows)
    lines = (tmp_path / "train.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == rows and "très" in lines[0]
    with pytest.raises(DataError, match="'negative'"):
        common.labelled_rows(data, ["positive"])


@pytest.mark.parametrize("default", [1, None])
def test_parse_with_threads_refuses_fewer_than_one_thread_in_one_line_not_torchs_traceback(monkeypatch, capsys,
                                                                                         default):
    # torch.set_num_threads(0) raises; the scripts that left threads to torch once skipped a 0, and since
    # parse_with_threads they passed it on to that traceback.
    monkeypatch.setattr(sys, "argv", ["bench/x.py", "--threads", "0"])
    with pytest.raises(SystemExit) as stopped:
        common.parse_with_threads(common.parser("x"), default=default)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == "x.py: error: --threads must be at least 1, got 0"
