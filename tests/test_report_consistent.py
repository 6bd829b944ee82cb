"""report.html never contradicts itself (issue 39, part 4): one rule per judgment (weak RMs are
never said to generalize), settings as labelled rows with the values that ran, a readable
table of the runs, and one number format (booleans as yes/no) throughout."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rmlens.memorization._config import AuditConfig
from rmlens.memorization._quality import audit_warnings
from rmlens.report import write_report
from rmlens.report._html import fmt
from rmlens.report._sections import attribution_section, config_section, quality_section
from test_report import make_experiment


def _text(html: str) -> str:
    """Visible text of an HTML fragment (scripts and styles left out), cells joined by ' | '."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    html = re.sub(r"</t[dh]>", " | ", html)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _section(page: str, section_id: str) -> str:
    start = page.index(f'<section id="{section_id}">')
    return page[start : page.index("</section>", start)]


# --- item 1: the weak-RM warning and the sentence under it follow one rule --------------------


def length_rule_pairs(n: int = 1000, longer_wins: int = 691) -> pd.DataFrame:
    """Pairs on which "the longer response wins" is right ``longer_wins`` times in ``n``; every
    pair learned (TM > 0.5), so length is the only reason the RMs can be weak."""
    rng = np.random.default_rng(0)
    long, short = "a careful and complete answer", "short"
    chosen = [long if i < longer_wins else short for i in range(n)]
    rejected = [short if i < longer_wins else long for i in range(n)]
    tm = rng.uniform(0.6, 0.95, n)
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "chosen": chosen,
                         "rejected": rejected, "tm": tm, "tg": tm - 0.1})  # fmt: skip


def audit_summary(held: float, pairs: pd.DataFrame) -> dict:
    """summary.json's rm_quality and warnings as the audit writes them (its own rule)."""
    quality = {
        "chance_accuracy": 0.5,
        "in_train": {"accuracy": {"mean": 0.835, "std": 0.01}, "log_loss": {"mean": 0.44}},
        "held_out": {"accuracy": {"mean": held, "std": 0.02}, "log_loss": {"mean": 0.55}},
    }
    return {"rm_quality": quality, "warnings": audit_warnings(pairs, quality)}


def test_weak_rms_are_not_said_to_generalize() -> None:
    summary = audit_summary(0.738, length_rule_pairs())
    (weak,) = summary["warnings"]
    assert weak["code"] == "weak_rm" and weak["length_rule_accuracy"] == pytest.approx(0.691)
    text = _text(quality_section(summary).body)
    assert "the RMs are weak: held-out accuracy 0.738 is +0.047 from a rule" in text  # warning
    assert ("Held-out accuracy 0.738 is 0.238 above chance (0.5) but only 0.047 above a rule "
            "that picks the longer response (0.691 on the same pairs): the RMs are weak, so TG "
            "measures what a weak RM carries over to unseen pairs (it may be mostly length)"
            ) in text  # fmt: skip
    assert "the RMs generalize" not in text

    strong = audit_summary(0.89, length_rule_pairs())
    assert strong["warnings"] == []
    text = _text(quality_section(strong).body)
    assert "0.390 above chance (0.5): the RMs generalize" in text and "weak" not in text


def test_weak_rule_holds_across_the_page(tmp_path: Path) -> None:
    root = make_experiment(tmp_path / "exp", full=False)
    summary = audit_summary(0.738, length_rule_pairs())
    (root / "summary.json").write_text(json.dumps(summary))
    page = _text(write_report(root).read_text(encoding="utf-8"))
    assert "the RMs are weak" in page and "the RMs generalize" not in page
    assert "held out (chance 0.5; a rule that picks the longer response: 0.691)" in page  # map
    # the weak rule by its accuracy threshold alone, and the other reasons of the warning
    low = audit_summary(0.58, length_rule_pairs(longer_wins=500))
    text = _text(quality_section(low).body)
    assert "0.080 above chance (0.5) but under 0.6: the RMs are weak" in text
    assert "the RMs generalize" not in text
    unlearned = {**low, "warnings": [{**low["warnings"][0], "not_learned_share": 0.3}]}
    text = _text(quality_section(unlearned).body)
    assert "but under 0.6 and with 30% of pairs not learned even when trained on" in text
    near = audit_summary(0.53, length_rule_pairs())
    assert near["warnings"][0]["code"] == "barely_generalize"
    assert "within 0.05 of chance" in _text(quality_section(near).body)


# --- item 2: the settings as labelled rows, with the values that ran --------------------------


def audit_config(**audit) -> dict:
    """config.json of a paired frozen audit, as ``make_record`` writes it: the settings with
    ``estimator`` and ``group_by`` left unset (null), and what the audit resolved beside them."""
    return {
        "version": "0.1.0",
        "audit": {**AuditConfig().resolved().to_dict(), **audit},
        "regime": "frozen minilm features, one logistic head per run",
        "estimator": "paired",
        "estimator_note": "paired: each run also scores every pair with its group removed",
        "data_sha1": "92a3d5049c6b51f1",
        "n_pairs": 30,
        "group_by": "user_id",
        "group_note": "grouped by 'user_id'",
        "n_groups": 5,
        "folds_used": 5,
        "dedupe": {"how": "none"},
        "truncation": {"max_length": 512, "pairs_cut": 0},
        "format": "pair",
    }


def test_configuration_is_labelled_settings() -> None:
    config = audit_config()
    assert config["audit"]["estimator"] is None
    body = config_section(config, "0.1.0", None, {"estimator": "paired"},
                          Path("/runs/squality")).body  # fmt: skip
    visible = _text(body)
    assert "null" not in visible and '"' not in visible and "{" not in visible
    assert "estimator | paired (left unset: chosen by the audit) | --estimator" in visible
    assert "grouped by | user_id (left unset: user_id if present, else the prompt); 5 groups" \
        in visible  # fmt: skip
    assert "tokens per prompt + response | 512 (left unset: the model's limit)" in visible
    assert "input format | pair (resolved from auto) | --format" in visible
    assert "target reliability of CM | none: --runs runs, no more" in visible
    assert "L2 penalties tried (lambda) | 1, 3, 10, 30, 100, 300, 1000, 3000, 10000 | --l2-grid" \
        in visible  # fmt: skip
    assert "Bradley-Terry with margin | no |" in visible
    for absent in ("LoRA rank", "learning rate", "hidden units", "label smoothing",
                   "Ray cluster address", "most runs a target"):  # fmt: skip
        assert absent not in visible, f"{absent!r}: a setting that did not run is shown"
    assert "backend | local | --backend" in visible
    # no raw file: one sentence says where every field is, the folder named as text
    assert "<details>" not in body and "<pre" not in body and "as written" not in visible
    assert ("Every field the audit recorded, including the settings of the training mode that "
            "did not run, is in config.json in the audit folder /runs/squality.") in visible

    # an older directory: the estimator that ran only in summary.json
    old = {k: v for k, v in config.items() if k != "estimator"}
    text = _text(config_section(old, "0.1.0", None, {"estimator": "brute"}).body)
    assert "estimator | brute (left unset: chosen by the audit)" in text
    # unknown fields of a newer record are labelled rows, never JSON
    newer = {**config, "debias": {"latents": 3, "settings": {"runs": [0, 1]}}}
    text = _text(config_section(newer, "0.1.0", None, None).body)
    assert "debias: latents | 3" in text and "debias: settings: runs | 0, 1" in text
    # a record that is no audit's: labelled rows as well
    text = _text(config_section({"seed": 0, "model": "x", "flags": {"fast": True}}, "0.1.0",
                                None).body)  # fmt: skip
    assert "seed | 0" in text and "flags: fast | yes" in text


def test_finetune_audit_shows_its_fine_tuning() -> None:
    config = {**audit_config(mode="finetune", estimator="brute"), "estimator": "brute"}
    text = _text(config_section(config, "0.1.0", None, None).body)
    assert "the fine-tuning of every run (finetune mode)" in text
    assert "LoRA rank | 8 | --lora-r" in text and "L2 penalties" not in text
    assert "estimator | brute |" in text


# --- item 3: one readable row per run --------------------------------------------------------


def write_runs(root: Path, n: int = 12) -> None:
    """Run manifests as an audit writes them: the quality per split, and many more metrics."""
    for run in range(n):
        folder = root / "runs" / f"{run:03d}"
        folder.mkdir(parents=True)
        quality = {
            "in_train": {"accuracy": 0.84 + run / 500, "log_loss": 0.41, "n": 950 + run},
            "validation": {"accuracy": 0.75, "log_loss": 0.54, "n": 250},
            "held_out": {"accuracy": 0.70 + run / 500, "log_loss": 0.573377, "n": 294},
        }
        metrics = {"l2": 100.0 if run % 2 else 300.0, "loss": 0.47,
                   "l2_path": {"10": 0.63, "100": 0.54, "10000": 0.66, "3": 0.7},
                   "exactness": {"groups": 1, "removed": run % 2, "p": [0.5, 0.6]},
                   "train_reward_mean": 1.14e-08, "objective_active": True}  # fmt: skip
        manifest = {"run": run, "n_train": 950 + run, "n_val": 250, "quality": quality,
                    "metrics": metrics, "train_ids": ["a"], "val_ids": ["b"]}  # fmt: skip
        (folder / "manifest.json").write_text(json.dumps(manifest))


def test_training_runs_are_a_readable_table(tmp_path: Path) -> None:
    root = make_experiment(tmp_path / "exp", full=False)
    write_runs(root)
    section = _section(write_report(root).read_text(encoding="utf-8"), "config")
    runs = _text(section.split("<h3>Training runs</h3>", 1)[1])
    assert (
        "manifest.json. run | pairs trained on | validation pairs | in-train accuracy | "
        "in-train log-loss | held-out accuracy | held-out log-loss | lambda kept | mean |"
    ) in runs
    cells = runs.split("manifest.json.", 1)[1]  # the table, after its note
    for raw in ("l2_path", "exactness", "reward", "objective", "True", "e-0"):
        assert raw not in cells, f"{raw!r}: a raw manifest column in the runs table"
    assert "mean | 955.5 | 250 | 0.851 | 0.410 | 0.711 | 0.573 | \u2013 |" in runs
    assert "| 0 | 950 | 250 | 0.840 | 0.410 | 0.700 | 0.573 | 300 |" in runs
    assert runs.index("| 9 | 959 |") < runs.index("| 10 | 960 |"), "runs in numeric order"
    assert "are in its file runs/<run>/manifest.json" in runs


# --- item 4: one number format, booleans as words -------------------------------------------


def test_numbers_and_booleans_read_alike() -> None:
    assert (fmt(True), fmt(np.bool_(False))) == ("yes", "no")
    assert fmt(9.57883168228868e-07, 5) == "9.6e-07" and fmt(0.000928567912138023, 5) == "0.00093"
    assert fmt(0.0314, 4) == "0.0314" and fmt(123456.7) == "123,457" and fmt(1500) == "1,500"
    assert fmt(float("nan")) == fmt(None) == "\u2013"
    fit = pd.DataFrame({"target": ["tm", "cm"], "regressor": ["gbm", "gbm"], "r2": [0.6, -0.05],
                        "r2_std": [0.04, 0.02], "informative": [True, False]})  # fmt: skip
    text = _text(attribution_section(None, fit).body)
    assert "tm | gbm | 0.600 | 0.040 | yes |" in text and "cm | gbm | -0.050 | 0.020 | no |" in text
    assert "True" not in text and "False" not in text
    exact = {"estimator": "paired", "exactness": {"groups": 25, "pairs": 1237,
             "median_abs_error": 9.57883168228868e-07, "p90_abs_error": 6.666e-06,
             "max_abs_error": 0.000928567912138023, "median_abs_effect": 0.0313524,
             "effect_spearman": 0.99999983}}  # fmt: skip
    text = _text(quality_section({**audit_summary(0.8, length_rule_pairs(longer_wins=500)),
                                  **exact}).body)  # fmt: skip
    assert "median 9.6e-07, 90th percentile 6.7e-06, max 0.00093" in text
    assert "9.5788e-07" not in text


def test_whole_page_has_no_python_literals(tmp_path: Path) -> None:
    root = make_experiment(tmp_path / "exp")
    (root / "config.json").write_text(json.dumps(audit_config()))
    write_runs(root, 3)
    mem = pd.read_parquet(root / "memorization.parquet").assign(flag=True)
    mem.to_parquet(root / "memorization.parquet", index=False)
    page = write_report(root).read_text(encoding="utf-8")
    visible = _text(page)  # config.json is no longer dumped in a details block
    for literal in ("True", "False", "None", "null", "NaN", "e-0"):
        assert not re.search(rf"(?<![\w-]){literal}(?!\w)", visible), literal
    data = re.search(r'<script type="application/json" id="rmlens-data">(.*?)</script>', page,
                     re.S)  # fmt: skip
    points = json.loads(data.group(1))["map"]["points"]
    flag = points["meta"][points["meta_columns"].index("flag")]
    assert set(flag) == {"yes"}, "booleans in the details panel read as words"


def test_what_held_out_accuracy_rests_on_is_said_beside_it() -> None:
    """Generalizing RMs whose TG follows one metadata column (SQuALITY: who wrote the
    response) say so in the section that says they generalize, not only in a table."""
    from rmlens.memorization import strongest_shortcut

    n = 200
    table = pd.DataFrame({"id": [f"p{i}" for i in range(n)],
                          "chosen_model": ["human"] * 150 + ["bart"] * 50,
                          "tg": [0.92] * 150 + [0.42] * 50})  # fmt: skip
    summary = {**audit_summary(0.885, length_rule_pairs()), "shortcut": strongest_shortcut(table)}
    body = quality_section(summary).body
    text = _text(body)
    assert "the RMs generalize" in text
    assert ('class="warning">Held-out accuracy rests on chosen_model: TG 0.92 for human (150 '
            "pairs) vs 0.42 for bart (50 pairs)") in body  # fmt: skip
    assert "shortcut" not in _text(quality_section(audit_summary(0.885, length_rule_pairs())).body)
