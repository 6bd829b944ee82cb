"""A command lists only the options it reads (issue 47): ``train`` and ``generalize`` train
RMs with ``fit``, which never reads the audit's paired estimator (``influence``, and the
blocks it reads, ``influence_blocks``: issue 57); ``train`` chooses its rate from ``lr_grid``
as the audit's runs do (issue 58), ``generalize`` trains at one rate and sets ``rm_kind``
itself."""

from __future__ import annotations

import pytest

from conftest import run_cli


def _help(*command: str) -> str:
    result = run_cli([*command, "--help"])
    assert result.exit_code == 0, result.stderr
    return " ".join(result.stdout.split())


@pytest.mark.parametrize("command", ["train", "generalize"])
def test_training_commands_do_not_list_the_audits_options(command):
    text = _help(command)
    for flag in ("--influence", "--influence-blocks"):
        assert f"{flag} " not in text
    assert ("--lr-grid " in text) == (command == "train")
    assert "--head-lr" in text and "--lora-r" in text


def test_generalize_does_not_list_the_rm_kind_it_sets_itself():
    assert "--rm-kind" not in _help("generalize")
    assert "--rm-kind" in _help("train")


def test_the_audit_still_lists_them():
    text = _help("memorize")
    assert "--influence " in text and "--influence-blocks" in text and "--lr-grid" in text


@pytest.mark.parametrize("flag", ["--influence", "--influence-blocks"])
def test_train_refuses_them(flag, tmp_path):
    result = run_cli(["train", "--data", tmp_path / "d.jsonl", "--out", tmp_path / "o", flag, "x"])
    assert result.exit_code == 2 and f"No such option: {flag}" in result.stderr
