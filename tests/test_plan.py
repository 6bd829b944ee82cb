import numpy as np
import pytest

from rmlens.memorization import make_plan

GROUPS = [f"g{i:02d}" for i in range(23)]


def test_kfold_default_in_20_out_5():
    plan = make_plan(GROUPS, seed=0)
    assert set(plan.columns) == {"run", "group", "in_train"}
    counts = plan.groupby("group").in_train.agg(["sum", "count"])
    assert (counts["sum"] == 20).all() and (counts["count"] == 25).all()
    # each run holds out one fold: about a fifth of the groups
    held = plan[~plan.in_train].groupby("run").size()
    assert held.between(4, 5).all()


def test_one_row_per_run_and_group_so_no_group_crosses():
    plan = make_plan(GROUPS, n_runs=10, seed=0)
    assert not plan.duplicated(["run", "group"]).any()
    assert len(plan) == 10 * len(GROUPS)


def test_folds_of_a_repeat_partition_the_groups():
    plan = make_plan(GROUPS, seed=4)
    for repeat in range(5):
        runs = plan[plan.run.between(5 * repeat, 5 * repeat + 4) & ~plan.in_train]
        assert sorted(runs.group) == sorted(GROUPS)


def test_same_seed_same_plan_other_seed_other_plan():
    a, b, c = make_plan(GROUPS, seed=1), make_plan(GROUPS, seed=1), make_plan(GROUPS, seed=2)
    assert a.equals(b)
    assert not a.equals(c)


def test_partial_repeat_and_halves():
    plan = make_plan(GROUPS, n_runs=7, n_folds=5)
    n_in = plan.groupby("group").in_train.sum()
    assert n_in.between(5, 6).all() and (plan.groupby("group").size() == 7).all()
    halves = make_plan(GROUPS, n_runs=10, kind="halves", seed=0)
    assert (halves.groupby("group").in_train.sum() == 5).all()
    per_run = halves.groupby("run").in_train.sum()
    assert per_run.between(11, 12).all()


@pytest.mark.parametrize("kwargs", [{"kind": "bogus"}, {"n_runs": 0}, {"n_folds": 1}])
def test_bad_plan_arguments(kwargs):
    with pytest.raises(ValueError):
        make_plan(GROUPS, **kwargs)


def test_too_few_groups():
    with pytest.raises(ValueError, match="at least 5 groups"):
        make_plan(["a", "b", "c"], n_folds=5)


def test_groups_are_deduplicated():
    plan = make_plan(np.repeat(GROUPS, 3), n_runs=5)
    assert plan.group.nunique() == len(GROUPS) and len(plan) == 5 * len(GROUPS)
