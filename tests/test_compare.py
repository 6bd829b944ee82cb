"""rmlens compare: figures on hand-built audit directories (values worked out by hand), the
agreement beside its ceiling, the length-calibration reference, the page's safety, the
command line end to end on two tiny real audits, bad input (exit 2), and the console tables
of many audits at 80 and 120 columns."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

from conftest import assert_strict_json
from rmlens._errors import InputError
from rmlens.cli import main
from rmlens.comparison import CompareConfig, compare
from rmlens.comparison._margin import margin_terciles
from rmlens.comparison._shortcuts import is_shortcut, shortcut_share

# Six pairs in two groups; run 0 trains on u0 and holds out u1, run 1 the other way round.
IDS = [f"p{i}" for i in range(6)]
USERS = ["u0", "u0", "u0", "u1", "u1", "u1"]
# r_chosen per run (r_rejected = 0), so d = r+ - r- is this
D = np.array([[1, 1], [1, -1], [1, 1], [1, 2], [-1, 2], [0, 2]], dtype=float)  # (pair, run)
MEMBER = np.array([[1, 0], [1, 0], [1, 0], [0, 1], [0, 1], [0, 1]], dtype=bool)
# chosen shorter in words for p0, p3, p4; p1's chosen response is a refusal
CHOSEN = ["yes", "I'm sorry, but I can't help with that.", "a b c", "ok", "fine", "x y"]
REJECTED = ["no no", "no", "a b", "no no no", "not so", "x"]
CHOSEN_MODEL = ["A", "A", "B", "A", "B", "A"]  # B wins 2 of its 6 pairs, A 4 of 6
REJECTED_MODEL = ["B", "B", "A", "B", "A", "B"]


def write_audit(
    path: Path,
    d: np.ndarray = D,
    *,
    ids=IDS,
    objective: str = "bt",
    reliability=(0.9, 0.8, 0.5),
    sha: str = "abc",
    margin=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0),
) -> Path:
    """An experiment directory as `rmlens memorize` writes it, from per-run margins d."""
    n_runs = d.shape[1]
    path.mkdir(parents=True)
    record = {"audit": {"mode": "frozen", "model": "hand", "plan": "kfold", "seed": 0,
                        "runs": n_runs, "head": {"head": "linear", "objective": objective}},
              "group_by": "user_id", "data_sha1": sha, "n_pairs": len(ids)}  # fmt: skip
    (path / "config.json").write_text(json.dumps(record))
    plan = pd.DataFrame([{"run": r, "group": g, "in_train": bool(g == f"u{r}")}
                         for r in range(n_runs) for g in ("u0", "u1")])  # fmt: skip
    plan.to_parquet(path / "plan.parquet")
    for r in range(n_runs):
        folder = path / "runs" / f"{r:03d}"
        folder.mkdir(parents=True)
        pd.DataFrame({"id": ids, "r_chosen": d[:, r], "r_rejected": 0.0}).to_parquet(
            folder / "scores.parquet")  # fmt: skip
        train = [i for i, m in zip(ids, MEMBER[:, r]) if m]
        (folder / "manifest.json").write_text(json.dumps(
            {"run": r, "train_ids": train, "val_ids": []}))  # fmt: skip
    p = expit(d)
    tm = np.where(MEMBER, p, 0).sum(1)
    tg = np.where(~MEMBER, p, 0).sum(1)
    table = pd.DataFrame({"id": ids, "tm": tm, "tg": tg, "cm": tm - tg, "prompt": "q?",
                          "chosen": CHOSEN, "rejected": REJECTED, "user_id": USERS,
                          "group": USERS, "margin": list(margin), "chosen_model": CHOSEN_MODEL,
                          "rejected_model": REJECTED_MODEL})  # fmt: skip
    table.to_parquet(path / "memorization.parquet")
    rel = {s: {"spearman_brown": v} for s, v in zip(("tm", "tg", "cm"), reliability)}
    (path / "summary.json").write_text(json.dumps({"reliability": rel, "complete": True}))
    return path


def config(**kw) -> CompareConfig:
    base = {"shap": False, "probes": False, "n_boot": 50, "min_group_pairs": 3,
            "length_calibration": False}  # fmt: skip
    return CompareConfig(**{**base, **kw})


def figure(result, metric: str, audit: str = "a") -> pd.Series:
    f = result.figures
    return f[(f.audit == audit) & (f.metric == metric)].iloc[0]


def test_figures_worked_out_by_hand(tmp_path):
    a = write_audit(tmp_path / "a")
    result = compare([a], config(min_group_pairs=2), out=tmp_path / "out", quiet=True)
    # run 0 on p3 p4 p5: 1, 0, 1/2 (a tie) -> 1/2; run 1 on p0 p1 p2: 1, 0, 1 -> 2/3
    acc = figure(result, "heldout_accuracy")
    assert acc.value == pytest.approx((0.5 + 2 / 3) / 2) and acc.n == 6
    assert 0.5 <= acc.lo <= acc.value <= acc.hi <= 2 / 3  # draws: runs resampled
    # pooled per group: u0 2/3 (run 1), u1 1.5/3 (run 0); both have 3 held-out pairs
    worst = figure(result, "worst_group_accuracy")
    assert worst.value == pytest.approx(0.5) and worst.n == 3
    assert "'u1'" in worst.detail and "2 of 2 groups" in worst.detail
    assert result.details["worst_group"]["a"]["by_group"] == pytest.approx(
        {"u0": 2 / 3, "u1": 0.5})
    # chosen shorter: p0 (run 1: right), p3 (run 0: right), p4 (run 0: wrong)
    shorter = figure(result, "slice_chosen_shorter")
    assert shorter.value == pytest.approx((0.5 + 1.0) / 2) and shorter.n == 3
    # least-preferred system B wins p2 and p4: run 0 on p4 wrong, run 1 on p2 right
    minority = figure(result, "slice_minority_model")
    assert minority.value == pytest.approx(0.5) and "'B'" in minority.detail
    refusal = figure(result, "slice_chosen_refusal")  # p1, held out by run 1: wrong
    assert refusal.value == 0 and refusal.n == 1 and not refusal.near_chance
    # margins 1..6 -> terciles {p0, p1}, {p2, p3}, {p4, p5}; CM_i = p(in run) - p(out run)
    s = expit
    cm = np.array([0, s(1) - s(-1), 0, s(2) - s(1), s(2) - s(-1), s(2) - s(0)])
    for name, rows in (("low", [0, 1]), ("mid", [2, 3]), ("high", [4, 5])):
        assert figure(result, f"cm_margin_{name}").value == pytest.approx(cm[rows].mean())
    assert figure(result, "tg_low_margin").value == pytest.approx((s(1) + s(-1)) / 2)
    rho = figure(result, "cm_margin_spearman")
    assert rho.value == pytest.approx(spearmanr(cm, np.arange(6)).statistic)
    assert math.isnan(rho.lo)  # a correlation across pairs: no interval (see _margin_figures)
    # 0.583 is no accuracy near chance; the minority slice (2 pairs, >= --min-group-pairs) is
    assert figure(result, "slice_minority_model").near_chance
    assert any("least-preferred" in w for w in result.warnings)
    assert any(w.startswith("a: worst-group held-out accuracy 0.500") for w in result.warnings)
    assert not any(w.startswith("a: held-out accuracy") for w in result.warnings)


def test_worst_group_needs_enough_held_out_pairs(tmp_path):
    a = write_audit(tmp_path / "a")
    result = compare([a], config(min_group_pairs=4), out=tmp_path / "out", quiet=True)
    worst = figure(result, "worst_group_accuracy")
    assert math.isnan(worst.value) and "no group" in worst.detail
    # --groups: another column of the memorization table
    result = compare([a], config(groups="chosen_model"), out=tmp_path / "out", quiet=True)
    worst = figure(result, "worst_group_accuracy")
    assert "'chosen_model'" in worst.detail


def test_accuracy_near_chance_is_a_warning(tmp_path):
    d = D.copy()
    d[:, 1] = [1, -1, 0, 2, 2, 2]  # run 1 on u0: 1, 0, 1/2 -> both runs 1/2
    a = write_audit(tmp_path / "a", d)
    result = compare([a], config(), out=tmp_path / "out", quiet=True)
    assert figure(result, "heldout_accuracy").value == pytest.approx(0.5)
    assert any("held-out accuracy 0.500 is within 0.05 of chance" in w for w in result.warnings)


def test_agreement_beside_its_ceiling(tmp_path):
    a = write_audit(tmp_path / "a", reliability=(0.9, 0.8, 0.25))
    d = D + np.array([[0.5, 0], [0, 0], [0, -0.3], [0, 0], [0, 0.4], [0, 0]])
    b = write_audit(tmp_path / "b", d, objective="poe", reliability=(0.4, 0.8, 0.36))
    result = compare([a, b], config(), out=tmp_path / "out", quiet=True)
    agree = result.agreement.set_index("score")
    s = expit

    def scores(d):
        tm = np.where(MEMBER, s(d), 0).sum(1)
        tg = np.where(~MEMBER, s(d), 0).sum(1)
        return {"tm": tm, "tg": tg, "cm": tm - tg}

    sa, sb = scores(D), scores(d)
    for score, rel_a, rel_b in (("tm", 0.9, 0.4), ("tg", 0.8, 0.8), ("cm", 0.25, 0.36)):
        row = agree.loc[score]
        assert row.spearman == pytest.approx(spearmanr(sa[score], sb[score]).statistic)
        assert row.ceiling == pytest.approx(math.sqrt(rel_a * rel_b)) and row.n == 6
        assert row.above_ceiling == (row.spearman > row.ceiling)
    assert agree.loc["cm"].ceiling == pytest.approx(0.3) and agree.loc["cm"].above_ceiling
    # one plan for both (as mitigate runs them): one warning that says why, not one per score
    assert agree.same_plan.all()
    assert any("share their plan (a, b) are above the ceiling" in w for w in result.warnings)
    assert not any("CM agreement" in w for w in result.warnings)
    # audits of other plans (backbones, heads): one warning per agreement above its ceiling
    from rmlens.comparison._compare import _figure_warnings

    apart = result.agreement.assign(same_plan=False)
    flags, warned = _figure_warnings(result.figures.iloc[:0], apart, {})
    assert flags == []
    assert any("CM agreement" in w and "above its ceiling 0.300" in w for w in warned)
    assert len(warned) == int(apart.above_ceiling.sum())
    assert [x["objective"] for x in result.audits] == ["bt", "poe"]


def test_length_calibration_reference(tmp_path, monkeypatch):
    import rmlens.comparison._compare as compare_module
    import rmlens.evaluation

    a = write_audit(tmp_path / "a")
    b = write_audit(tmp_path / "b", objective="poe")
    seen = []

    def flat(rewards, lengths, frac=0.5):  # every reward the same: each pair a tie
        seen.append(len(rewards))
        return np.zeros_like(np.asarray(rewards, dtype=float))

    monkeypatch.setattr(rmlens.evaluation, "calibrate_length", flat, raising=False)
    result = compare([a, b], config(length_calibration=True), out=tmp_path / "out", quiet=True)
    assert [x["label"] for x in result.audits] == ["a", "a + length calibration", "b"]
    assert seen == [12, 12]  # per run: the chosen and rejected of all 6 pairs it scored
    ref = figure(result, "heldout_accuracy", "a + length calibration")
    assert ref.value == 0.5 and ref.near_chance  # ties count 1/2
    assert figure(result, "heldout_accuracy", "b").value == pytest.approx((0.5 + 2 / 3) / 2)
    assert set(result.agreement.audit_a) | set(result.agreement.audit_b) == {"a", "b"}
    monkeypatch.setattr(compare_module, "calibrator", lambda: None)  # an rmlens without it
    result = compare([a], config(length_calibration=True), out=tmp_path / "out", quiet=True)
    assert len(result.audits) == 1
    assert any("has no rmlens.evaluation.calibrate_length" in n for n in result.notes)


def test_outputs_and_a_safe_page(tmp_path):
    a = write_audit(tmp_path / "a")
    b = write_audit(tmp_path / "b", D * 2, sha="other")
    out = tmp_path / "out"
    label = '<script>alert("x")</script>'
    result = compare([a, b], config(labels=(label, "b")), out=out, quiet=True)
    assert any("data fingerprints differ" in w for w in result.warnings)
    table = pd.read_parquet(out / "compare.parquet")
    assert list(table.columns) == ["audit", "family", "metric", "value", "lo", "hi", "n",
                                   "detail", "near_chance", "few_pairs"]  # fmt: skip
    record = json.loads((out / "compare.json").read_text())
    assert {"figures", "agreement", "audits", "notes", "warnings", "config"} <= set(record)
    for name in ("compare_accuracy.png", "compare_slices.png", "compare_margin.png",
                 "compare_cm_by_margin.png", "compare_agreement.png"):  # fmt: skip
        assert (out / name).is_file() and name in record["files"]
    from rmlens.report import write_compare_report

    page = write_compare_report(out).read_text()
    assert "<script" not in page and "&lt;script&gt;" in page
    assert "Content-Security-Policy" in page and "data:image/png;base64," in page
    assert "http://" not in page and "https://" not in page


def test_margin_terciles_keep_ties_together():
    assert margin_terciles(np.array([1.0, 2, 3, 4, 5, 6])).tolist() == [0, 0, 1, 1, 2, 2]
    assert margin_terciles(np.array([1.0, 1, 1, 2, np.nan])).tolist() == [0, 0, 0, 2, -1]


def test_shortcut_share():
    assert is_shortcut("len_words_diff") and is_shortcut("chosen_model")
    assert is_shortcut("refusal_chosen") and not is_shortcut("sentiment_diff")
    imp = pd.DataFrame({"feature": ["len_chars_diff", "sentiment_diff", "rejected_model"],
                        "importance": [0.2, 0.5, 0.3]})  # fmt: skip
    assert shortcut_share(imp) == pytest.approx(0.5)


def test_disjoint_pairs_and_bad_input_exit_2(tmp_path, capsys):
    a = write_audit(tmp_path / "a")
    b = write_audit(tmp_path / "b", ids=[f"q{i}" for i in range(6)])
    with pytest.raises(InputError, match="share no pair ids"):
        compare([a, b], config(), out=tmp_path / "out", quiet=True)
    out = str(tmp_path / "out")
    for args in (
        [str(a), str(b), "--out", out],  # no common pairs
        [str(tmp_path / "nowhere"), "--out", out],  # no such directory
        [str(tmp_path), "--out", out, "--no-probes"],  # holds audits, but a and b disagree
        [str(a), "--out", out, "--labels", "x,y"],  # two names, one audit
        [str(a), "--out", out, "--groups", "nope"],
        [str(a), "--out", out, "--level", "2"],
        [str(a), str(a), "--out", out],  # the same audit twice
        [str(a), "--out", str(a)],  # into an experiment directory
    ):
        code = main(["compare", *args])
        err = capsys.readouterr().err
        assert code == 2, args
        assert err.startswith("error: ") and err.count("\n") == 1, err
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(tmp_path / "empty"), "--out", out]) == 2
    assert "not an audit directory" in capsys.readouterr().err


def test_cli_end_to_end_on_two_tiny_audits(tiny_encoder_dir, tmp_path, monkeypatch, capsys):
    """Two real audits (linear and MLP heads on a tiny random encoder) inside the comparison
    directory; `rmlens compare DIR --out DIR` finds them and writes every output."""
    from rmlens.memorization import AuditConfig, audit
    from rmlens.rewards import FrozenHeadTrainer, HeadConfig
    from test_audit import make_pairs

    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    pairs = make_pairs(48, users=4)
    pairs["chosen_model"] = np.where(np.arange(48) % 3 == 0, "m1", "m2")
    pairs["rejected_model"] = np.where(np.arange(48) % 3 == 0, "m2", "m1")
    root = tmp_path / "cmp"
    for name, head in (("linear", "linear"), ("mlp", "mlp")):
        cfg = AuditConfig(runs=4, folds=2, n_boot=20,
                          head=HeadConfig(head=head, epochs=5, batch_size=16))  # fmt: skip
        trainer = FrozenHeadTrainer(model=str(tiny_encoder_dir), cache_dir=tmp_path / "cache")
        audit(pairs, cfg, out=root / name, trainer=trainer, quiet=True)
    code = main(["compare", str(root), "--out", str(root), "--n-boot", "30",
                 "--probe-pairs", "8", "--min-group-pairs", "5", "--verbose", "-q"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "audits side by side" in out and "Agreement between audits" in out
    table = pd.read_parquet(root / "compare.parquet")
    audits = ["linear", "linear + length calibration", "mlp", "mlp + length calibration"]
    from rmlens.comparison._calibration import calibrator

    if calibrator() is None:  # an rmlens without calibrate_length: no reference rows
        audits = ["linear", "mlp"]
    assert sorted(table.audit.unique()) == sorted(audits)
    metrics = set(table.metric)
    assert {"heldout_accuracy", "worst_group_accuracy", "slice_chosen_shorter",
            "slice_minority_model", "cm_margin_low", "tg_low_margin", "reward_length_spearman",
            "shap_shortcut_share_tg", "shap_shortcut_share_cm"} <= metrics  # fmt: skip
    assert any(m.startswith("probe_flip_") for m in metrics)
    probes = table[table.metric.str.startswith("probe_flip_")]
    assert set(probes.audit) == {"linear", "mlp"} and probes.value.between(0, 1).all()
    record = json.loads((root / "compare.json").read_text())
    assert len(record["agreement"]) == 3 and record["config"]["n_boot"] == 30
    for name in ("compare.html", "compare.toml", "compare_accuracy.png", "compare_probes.png",
                 "compare_shortcuts.png", "compare_cm_by_margin.png", "compare_agreement.png"):
        assert (root / name).is_file(), name
    assert (root / "linear" / "memorization.parquet").is_file()  # the audits are untouched
    assert assert_strict_json(root) >= 5  # compare.json and the audits' own
    code = main(["compare", str(root / "linear"), str(root / "mlp"), "--out", str(tmp_path / "j"),
                 "--no-probes", "--no-shap", "--n-boot", "0", "--json", "-q"])  # fmt: skip
    out, _ = capsys.readouterr()
    assert code == 0 and json.loads(out)["audits"][0]["label"] == "linear"


def test_synthetic_quality_slices_from_the_planted_mechanism():
    from rmlens.comparison._heldout import counter_bias_slices

    table = pd.DataFrame({
        "prompt": ["q"] * 4,
        "chosen": ["a b", "a b c d", "a", "a b c"],
        "rejected": ["a b c", "a", "a b", "a"],
        "mechanism": ["quality", "quality", "length", "noise"],
    })  # fmt: skip
    slices = counter_bias_slices(table, min_pairs=1)
    assert slices["quality"][0].tolist() == [True, True, False, False]
    assert slices["quality_chosen_shorter"][0].tolist() == [True, False, False, False]
    assert "quality" not in counter_bias_slices(table.drop(columns="mechanism"), 1)


def test_figure_text_marks_few_pairs():
    from rmlens.comparison.metrics import figure_text

    assert figure_text(0.5, 0.25, 0.75, 40) == "0.500 [0.250, 0.750]"
    # a single pair's accuracy: its n, never a bare 0.000 [0.000, 0.000]
    assert figure_text(0.0, 0.0, 0.0, 1, few=True) == "0.000 (n 1)"
    assert figure_text(float("nan")) == figure_text(None) == "\u2013"
    assert figure_text(0.3, None, float("nan")) == "0.300"


def test_the_page_opens_with_the_answer_and_folds_flagged_figures_into_one_table(tmp_path):
    d = D.copy()
    d[:, 1] = [1, -1, 0, 2, 2, 2]  # audit "a": held-out accuracy 1/2, flagged
    a = write_audit(tmp_path / "a", d)
    b = write_audit(tmp_path / "b", D * 2, objective="poe", sha="other")
    out = tmp_path / "out"
    result = compare([a, b], config(), out=out, quiet=True)
    assert result.flags and set(result.flags) <= set(result.warnings)
    assert any("held-out accuracy 0.500" in f for f in result.flags)
    from rmlens.report import write_compare_report

    page = write_compare_report(out).read_text()
    assert page.index('id="glance"') < page.index('id="flags"') < page.index('id="audits"')
    glance = page[page.index('id="glance"'):page.index('id="flags"')]
    cost = figure(result, "heldout_accuracy", "b").value - figure(result, "heldout_accuracy").value
    assert f"{cost:+.3f}" in glance and "vs a" in glance  # a is the bt audit: the baseline
    flags = page[page.index('id="flags"'):page.index("</section>", page.index('id="flags"'))]
    assert "0.500 [" in flags and "\u26a0" in flags
    boxes = page.count('class="warning"')
    assert boxes == len(result.warnings) - len(result.flags) >= 1  # the fingerprint warning
    assert "held-out accuracy 0.500 is within" not in page  # folded, not repeated as a box


MITIGATE = ["bt", "bt + length calibration", "label_smoothing", "poe", "reweight", "group_dro",
            "low_margin", "complementary", "curate"]  # fmt: skip
PROBES = ["compliance", "markdown", "pad_filler", "pad_repeat", "politeness", "refusal",
          "signature_gpt", "signature_synth"]  # fmt: skip


def many_audits(labels):
    """A Comparison shaped like `rmlens mitigate`'s: every metric and probe per audit, signed
    differences, figures without an interval, missing ones, a few-pairs slice, flags."""
    from rmlens.comparison import metrics as M
    from rmlens.comparison._result import Comparison

    rng = np.random.default_rng(0)
    rows = []
    for label in labels:
        for metric in [*M.METRICS, *(M.PROBE_PREFIX + p for p in PROBES)]:
            if label.endswith("calibration") and metric.startswith(("probe_", "shap_")):
                continue
            if label == "bt" and metric == "heldout_accuracy_vs_baseline":
                continue
            signed = metric in M.DIFFERENCES
            value = rng.uniform(-0.2, 0.2) if signed else rng.uniform(0.3, 0.8)
            bare = metric in ("cm_margin_spearman", "shap_shortcut_share_tg")
            few = metric == "slice_chosen_refusal" and label == "poe"
            rows.append({"audit": label, "family": M.family(metric), "metric": metric,
                         "value": value, "lo": np.nan if bare else value - 0.03,
                         "hi": np.nan if bare else value + 0.031, "n": 12 if few else 500,
                         "detail": "", "near_chance": M.near_chance(metric, value),
                         "few_pairs": few})  # fmt: skip
    return Comparison(figures=pd.DataFrame(rows), agreement=pd.DataFrame(),
                      audits=[{"label": a} for a in labels])  # fmt: skip


def shown(result, audit: str, metric: str) -> str:
    from rmlens.comparison.metrics import DIFFERENCES, figure_text

    r = figure(result, metric, audit)
    if r.few_pairs:  # on too few pairs: a dash, as the page greys it
        return "\u2013"
    text = figure_text(r.value, r.lo, r.hi, r.n, r.few_pairs, metric in DIFFERENCES)
    return text + " !" if r.near_chance else text


@pytest.mark.parametrize("width", [80, 120])
def test_many_audits_print_one_row_each_and_no_figure_wraps(width, tmp_path, monkeypatch,
                                                             capsys):  # fmt: skip
    """Nine audits do not fit as columns: one row per audit, a table per family of metrics
    (split to fit), every figure and audit label whole on its line, nothing cut off."""
    import re

    from rmlens.cli.compare import print_comparison

    monkeypatch.setenv("COLUMNS", str(width))
    result = many_audits(MITIGATE)
    print_comparison(result, tmp_path)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(map(len, lines)) <= width and "\u2026" not in out  # no ellipsis
    assert "! near or below chance" in out and "(n 12)" not in out
    assert "\u2013 none, or on fewer than 20 pairs (min_group_pairs)" in " ".join(out.split())
    assert any(f.near_chance for f in result.figures.itertuples())
    for label in MITIGATE:  # its row: the label whole, then its held-out accuracy
        held = re.escape(shown(result, label, "heldout_accuracy"))
        row = re.compile(rf"^│ {re.escape(label)} +│ {held} +│")
        assert sum(bool(row.match(line)) for line in lines) == 1, label
    for r in result.figures.itertuples():
        assert any(shown(result, r.audit, r.metric) in line for line in lines), r
    for title in ("Held-out accuracy", "Counter-bias slices", "Shortcut-probe flip rates"):
        assert title in out


def test_few_audits_keep_one_column_each(tmp_path, monkeypatch, capsys):
    from rmlens.cli.compare import print_comparison

    monkeypatch.setenv("COLUMNS", "80")
    result = many_audits(["bt", "poe"])
    print_comparison(result, tmp_path)
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 80
    assert any(line.startswith("┃ metric ") and "┃ bt " in line and "┃ poe " in line
               for line in lines)  # fmt: skip
    for r in result.figures.itertuples():
        assert any(shown(result, r.audit, r.metric) in line for line in lines), r
