"""Degenerate audits stopped or named before training (issue 39): too few groups to
validate on, runs that repeat one model, reliability that agrees by construction, and
errors that name their first cause."""

import json

import numpy as np
import pandas as pd
import pytest
from tests.conftest import run_cli

from rmlens._errors import InputError
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._reliability import split_half
from rmlens.rewards import FrozenHeadTrainer, HeadConfig

WORDS = ["good", "bad", "great", "fine", "poor", "nice", "awful", "kind", "rude", "helpful"]


def grouped_pairs(n_groups: int, per_group: int = 10) -> pd.DataFrame:
    rng = np.random.default_rng(n_groups)
    rows = []
    for g in range(n_groups):
        for i in range(per_group):
            rows.append({"id": f"g{g}p{i}", "prompt": f"question {g} {i}",
                         "chosen": " ".join(rng.choice(WORDS, 8)),
                         "rejected": " ".join(rng.choice(WORDS, 3)),
                         "user_id": f"u{g}"})  # fmt: skip
    return pd.DataFrame(rows)


def run_audit(n_groups, tmp_path, tiny_encoder_dir, **kw):
    config = AuditConfig(runs=8, n_boot=10, **kw)
    trainer = FrozenHeadTrainer(config.resolved().head, model=str(tiny_encoder_dir),
                                cache_dir=tmp_path / "cache")  # fmt: skip
    out = tmp_path / f"audit{n_groups}"
    audit(grouped_pairs(n_groups), config, out=out, trainer=trainer, quiet=True)
    return json.loads((out / "summary.json").read_text())


def test_two_groups_with_lambda_chosen_on_validation_are_refused_before_training(tmp_path):
    """Each run trains on one group: no group is left to validate lambda on, and the
    lambda would fall to the grid's largest in every run (the 2-user audit)."""
    with pytest.raises(InputError, match=r"2 groups \('user_id'\): 2 of the 2 runs of each "
                       r"repeat train on a single group.*one `l2_grid` value"):  # fmt: skip
        audit(grouped_pairs(2), AuditConfig(runs=4), out=tmp_path / "a", quiet=True)
    assert not (tmp_path / "a" / "runs").exists()  # nothing trained
    halves = AuditConfig(runs=4, plan="halves")
    with pytest.raises(InputError, match="train on a single group"):
        audit(grouped_pairs(3), halves, out=tmp_path / "b", quiet=True)
    early = AuditConfig(runs=4, head=HeadConfig(head="linear", patience=2))
    with pytest.raises(InputError, match=r"early stopping \(`patience`\).*`patience` 0"):
        audit(grouped_pairs(2), early, out=tmp_path / "c", quiet=True)


def test_the_cli_names_the_flag(tmp_path):
    data = tmp_path / "two.jsonl"
    grouped_pairs(2).to_json(data, orient="records", lines=True)
    result = run_cli(["memorize", "--data", data, "--out", tmp_path / "a", "--quiet"])
    assert result.exit_code == 2
    assert "pass one --l2-grid value (a fixed lambda, e.g. --l2-grid 1)" in result.stderr


def test_two_groups_and_a_fixed_lambda_report_no_reliability(tmp_path, tiny_encoder_dir):
    """With a fixed lambda the audit runs, but its 8 runs are 2 models repeated: the split
    halves agree by construction, so reliability is not reported, and says why."""
    summary = run_audit(2, tmp_path, tiny_encoder_dir,
                        head=HeadConfig(head="logistic", l2_grid=(1.0,)))  # fmt: skip
    rel = summary["reliability"]
    assert rel["distinct_training_sets"] == 2
    # undefined: null in strict JSON, the reason beside it
    assert rel["cm"]["spearman_brown"] is None and rel["tm"]["spearman_brown"] is None
    assert "2 distinct training sets" in rel["reason"] and "note" not in rel


@pytest.mark.parametrize("n_groups", [3, 4])
def test_three_and_four_groups_validate_on_a_whole_group(n_groups, tmp_path, tiny_encoder_dir):
    """3 groups: leave one out, the other 2 give 1 validation and 1 training group; 4: 1 of
    3. Lambda is chosen on validation in every run, and reliability is a reliability."""
    summary = run_audit(n_groups, tmp_path, tiny_encoder_dir)
    assert summary["validation"]["runs_without_validation"] == 0
    rel = summary["reliability"]
    assert rel["distinct_training_sets"] > 2
    if rel["distinct_training_sets"] < rel["n_runs"]:  # said: runs that share a set
        assert "distinct training sets" in rel["note"] or "seed" in rel["note"]
    for score in ("tm", "tg", "cm"):
        sb = rel[score]["spearman_brown"]
        assert np.isnan(sb) or 0.0 <= sb <= 1.0  # never the 2.32 a negative half gave


def test_reliability_of_runs_that_repeat_one_model_is_not_reported():
    """4 runs in 2 repeats (K=2), the second repeat the same training sets as the first: a
    solved head repeats its models, so the halves are copies."""
    rng = np.random.default_rng(0)
    member = np.zeros((40, 4), dtype=bool)
    member[:20, [0, 2]] = True
    member[20:, [1, 3]] = True
    p = np.where(member, 0.9, 0.5) + 0.01 * np.tile(rng.standard_normal((40, 2)), 2)
    val = np.zeros_like(member)
    repeat = np.array([0, 0, 1, 1])
    fixed = split_half(p, member, val, repeat, folds=2, deterministic=True)
    assert fixed["distinct_training_sets"] == 2 and "agree by construction" in fixed["reason"]
    assert np.isnan(fixed["cm"]["spearman_brown"])
    seeded = split_half(p, member, val, repeat, folds=2)  # seeded runs: measured, counted
    assert seeded["distinct_training_sets"] == 2 and "reason" not in seeded


def test_errors_name_the_first_cause(tmp_path):
    same = tmp_path / "same.jsonl"
    pd.DataFrame({"prompt": ["a", "b"], "chosen": ["x", "y"], "rejected": ["x", "y"]}).to_json(
        same, orient="records", lines=True)
    result = run_cli(["memorize", "--data", same, "--out", tmp_path / "a", "--quiet"])
    assert result.exit_code == 2
    assert "every one of its 2 pairs has chosen and rejected the same text" in result.stderr
    assert "groups" not in result.stderr
    one = tmp_path / "one.jsonl"
    grouped_pairs(1, per_group=1).to_json(one, orient="records", lines=True)
    result = run_cli(["memorize", "--data", one, "--out", tmp_path / "b", "--quiet"])
    assert result.exit_code == 2
    assert "1 pair(s) in 1 group ('user_id'): a plan needs at least 2 groups" in result.stderr
    assert "at least 5" not in result.stderr


def test_data_inspect_exits_2_when_no_pair_is_valid(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "q", "chosen": "", "rejected": "a"}\n')
    result = run_cli(["data", "inspect", bad])
    assert result.exit_code == 2
    assert "no valid pair (1 row not read)" in result.stderr
    assert "1 error (rows not read; memorize, train and score stop at the first" in result.stdout
    same = tmp_path / "same.jsonl"
    same.write_text('{"prompt": "q", "chosen": "a", "rejected": "a"}\n')
    result = run_cli(["data", "inspect", same])
    assert result.exit_code == 2 and "1 pair with chosen == rejected" in result.stderr
    good = tmp_path / "good.jsonl"
    good.write_text('{"prompt": "q", "chosen": "", "rejected": "a"}\n'
                    '{"prompt": "r", "chosen": "b", "rejected": "a"}\n')  # fmt: skip
    assert run_cli(["data", "inspect", good]).exit_code == 0


def test_a_target_reliability_stops_when_more_runs_only_repeat_the_models():
    from rmlens.memorization._reliability import target_status

    reliability = {"n_runs": 10, "distinct_training_sets": 2, "reason": "the 10 runs train on 2 "
                   "distinct training sets", "cm": {"spearman_brown": float("nan")}}  # fmt: skip
    status = target_status(reliability, 0.8, runs=10, max_runs=200, folds=2)
    assert status["stopped_because"] == "max_runs" and "only repeat them" in status["message"]
