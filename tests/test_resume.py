"""Resuming an audit: what an existing --out must match, and what the refusal says."""

import json

import numpy as np
import pandas as pd
import pytest

from rmlens._errors import InputError
from rmlens.cli._talk import in_flags
from rmlens.memorization import AuditConfig, audit
from rmlens.rewards import FrozenHeadTrainer, HeadConfig


def make_pairs(n: int = 40, users: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    good, bad = ["good", "great", "help", "sure", "yes"], ["bad", "worst", "hate", "never", "no"]
    return pd.DataFrame(
        {
            "id": [f"r{i:03d}" for i in range(n)],
            "prompt": [f"what is the {rng.choice(['cat', 'dog', 'moon'])} ?" for _ in range(n)],
            "chosen": [" ".join(rng.choice(good, 3)) + f" {i % 7}" for i in range(n)],
            "rejected": [" ".join(rng.choice(bad, 3)) + f" {i % 5}" for i in range(n)],
            "user_id": [f"u{i % users}" for i in range(n)],
            "margin": [float(i % 3) for i in range(n)],
        }
    )


def config(**kw) -> AuditConfig:
    # patience=0: every epoch trained, no validation groups (4 users, 2 folds: too few)
    head = kw.pop("head", HeadConfig(epochs=2, batch_size=16, use_margin=True, patience=0))
    return AuditConfig(**{"runs": 4, "folds": 2, "n_boot": 0, "head": head, **kw})


@pytest.fixture()
def trainer(tiny_encoder_dir, tmp_path):
    return lambda: FrozenHeadTrainer(model=str(tiny_encoder_dir), cache_dir=tmp_path / "cache")


def test_changed_margins_refuse_the_resume(trainer, tmp_path):
    # a --use-margin audit trained on the margins: other margins make every saved run stale
    pairs = make_pairs()
    out = tmp_path / "x"
    audit(pairs, config(), out=out, trainer=trainer(), quiet=True)
    changed = pairs.assign(margin=pairs.margin + 1.0)
    with pytest.raises(InputError, match="other data") as err:
        audit(changed, config(), out=out, trainer=trainer(), quiet=True)
    assert "margins" in str(err.value) and "another configuration" not in str(err.value)
    audit(pairs, config(), out=out, trainer=trainer(), quiet=True)  # the same data still resumes


def test_changed_groups_refuse_the_resume(trainer, tmp_path):
    pairs = make_pairs()
    audit(pairs, config(), out=tmp_path / "x", trainer=trainer(), quiet=True)
    regrouped = pairs.assign(user_id=pairs.user_id.iloc[::-1].to_numpy())
    with pytest.raises(InputError, match="other data"):
        audit(regrouped, config(), out=tmp_path / "x", trainer=trainer(), quiet=True)


def test_the_refusal_names_the_settings_that_differ(trainer, tmp_path):
    pairs = make_pairs()
    out = tmp_path / "runs"
    audit(pairs, config(), out=out, trainer=trainer(), quiet=True)
    other = config(runs=6, head=HeadConfig(epochs=3, batch_size=16, use_margin=True, patience=0))
    with pytest.raises(InputError) as err:
        audit(pairs, other, out=out, trainer=trainer(), quiet=True)
    message = str(err.value)  # parameters in backticks; the command line reads flags
    assert f"`out` {out} holds an audit with another configuration: " in message
    assert "runs 4 (saved) vs 6 (now), head.epochs 2 vs 3;" in message
    assert "use another `out`, or the saved settings" in message
    shown = in_flags(message, {"out": "--out", "runs": "--runs"})
    assert shown.startswith(f"--out {out} holds an audit with another configuration: ")
    assert "use another --out, or the saved settings" in shown
    assert "other data" not in message
    assert "\n" not in message
    both = config(runs=6)
    with pytest.raises(InputError, match=r"runs 4 \(saved\) vs 6 \(now\); and other data"):
        audit(pairs.assign(margin=0.5), both, out=out, trainer=trainer(), quiet=True)


def test_execution_settings_may_differ_on_resume(trainer, tmp_path):
    pairs = make_pairs()
    out = tmp_path / "x"
    first = audit(pairs, config(), out=out, trainer=trainer(), quiet=True)
    again = audit(pairs, config(retries=0, abort_after=1), out=out, trainer=trainer(), quiet=True)
    pd.testing.assert_frame_equal(first, again)


def test_config_json_holds_the_resolved_trainer_settings(trainer, tmp_path):
    pairs = make_pairs()
    out = tmp_path / "x"
    audit(pairs, config(seed=3, max_length=64), out=out, trainer=trainer(), quiet=True)
    saved = json.loads((out / "config.json").read_text())["audit"]
    assert saved["head"]["seed"] == 3
    assert (saved["train"]["seed"], saved["train"]["max_length"]) == (3, 64)
    assert AuditConfig.from_dict(saved).check().seed == 3  # loads back as it was


class NaNTrainer:
    """Scores pair 0 NaN in every run that trains on it."""

    def __init__(self, inner):
        self.inner = inner

    def prepare(self, pairs, *, quiet=False):
        return self.inner.prepare(pairs, quiet=quiet)

    def fit_score(self, train_index, *, seed, **kw):
        scores = self.inner.fit_score(train_index, seed=seed, **kw)
        if 0 in set(train_index.tolist()):
            scores.r_chosen[0] = np.nan
        return scores


def test_a_pair_no_in_run_scored_is_listed_as_lacking_runs(trainer, tmp_path):
    pairs = make_pairs()
    out = tmp_path / "x"
    table = audit(pairs, config(), out=out, trainer=NaNTrainer(trainer()), quiet=True)
    first = table.set_index("id").loc["r000"]
    assert (first.n_in, first.n_out) == (0, 2) and np.isnan(first.tm) and np.isnan(first.cm)
    assert first.category == "undefined"
    others = table[table.id != "r000"]
    assert (others.n_in == 2).all() and others.cm.notna().all()
    lacking = json.loads((out / "summary.json").read_text())["pairs_lacking_runs"]
    assert lacking["count"] == 1 and lacking["no_in_run"] == 1 and lacking["ids"] == ["r000"]


@pytest.mark.parametrize("kind", ["kfold", "halves"])
def test_a_longer_plan_starts_with_the_shorter_one(kind):
    # an audit grown by a target reliability keeps its finished runs: the plan of R runs must
    # be the first R runs of any longer plan, validation groups included
    from rmlens.memorization._plans import carve_validation, make_plan

    groups = [f"g{i}" for i in range(23)]
    plans = {
        runs: carve_validation(
            make_plan(groups, n_runs=runs, n_folds=5, kind=kind, seed=4), 0.2, seed=4
        )
        for runs in (10, 35)
    }
    head = plans[35][plans[35].run < 10].reset_index(drop=True)
    pd.testing.assert_frame_equal(head, plans[10])
    assert not plans[35][plans[35].run >= 10].empty


def test_growth_settings_may_differ_on_resume(tmp_path):
    from rmlens.experiment import ExperimentDir
    from rmlens.memorization._directory import check_resume

    def _difference(old: dict, now: dict) -> str | None:
        """What the resume check says of ``now`` against the saved ``old``; None: resumes."""
        exp = ExperimentDir(tmp_path / "d").create()
        exp.write_record(old)
        try:
            check_resume(exp, now)
        except InputError as err:
            head = f"`out` {exp.path} holds an audit with "
            tail = "; use another `out`, or the saved settings and data (its config.json) to " \
                "resume it"
            assert str(err).startswith(head) and str(err).endswith(tail), str(err)
            return str(err)[len(head) : -len(tail)]
        return None

    def record(**kw):
        audit_ = AuditConfig(**kw).to_dict()
        return {"audit": audit_, "group_by": "user_id", "data_sha1": "x", "n_pairs": 4}

    grown = record(runs=40, target_reliability=0.8)
    # with a target: another start, target or cap continues the audit
    assert _difference(grown, record(runs=10, target_reliability=0.9, max_runs=300)) is None
    # a plain audit may be grown by adding a target; an old config.json without the fields
    old = record(runs=25)
    del old["audit"]["target_reliability"], old["audit"]["max_runs"]
    assert _difference(old, record(runs=10, target_reliability=0.8)) is None
    assert _difference(old, record(runs=25)) is None
    # without a target the run count is fixed: the grown count resumes, another is refused
    assert _difference(grown, record(runs=40)) is None
    message = _difference(grown, record(runs=25))
    assert message.startswith("another configuration: runs 40 (saved) vs 25 (now) (it grew")
    assert "give `target_reliability`, or `runs` 40, to resume it" in message
    flags = {"runs": "--runs", "target_reliability": "--target-reliability"}
    assert "give --target-reliability, or --runs 40, to resume it" in in_flags(message, flags)
    assert _difference(old, record(runs=30)).startswith("another configuration: runs 25")
    assert "seed 0 (saved) vs 1 (now)" in _difference(grown, record(runs=4, seed=1,
                                                                    target_reliability=0.8))
    # the estimator is compared as resolved: an audit saved before it existed was brute force
    assert _difference(old, {**record(runs=25), "estimator": "brute"}) is None
    assert _difference(old, {**record(runs=25), "estimator": "paired"}) == (
        'another configuration: estimator "brute" (saved) vs "paired" (now)'
    )
