"""End-to-end audits on a tiny random backbone: outputs, resume, bad input."""

import json

import numpy as np
import pandas as pd
import pytest

from conftest import assert_strict_json
from rmlens._errors import RmlensWarning
from rmlens.cli import main
from rmlens.experiment import AuditDir
from rmlens.memorization import AuditConfig, audit
from rmlens.rewards import FrozenHeadTrainer, HeadConfig

WORDS = [
    "good",
    "great",
    "help",
    "answer",
    "sure",
    "yes",
    "bad",
    "worst",
    "hate",
    "never",
    "no",
    "sorry",
]


def make_pairs(n: int = 60, users: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    good, bad = WORDS[:6], WORDS[6:]
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": f"p{i:03d}",
                "prompt": f"what is the {rng.choice(['cat', 'dog', 'sun', 'moon'])} ?",
                "chosen": " ".join(rng.choice(good, 4)) + f" {i % 7}",
                "rejected": " ".join(rng.choice(bad, 4)) + f" {i % 5}",
                "user_id": f"u{i % users}",
                "margin": float(i % 3),
            }
        )
    return pd.DataFrame(rows)


def config(**kw) -> AuditConfig:
    head = HeadConfig(epochs=5, batch_size=16)
    return AuditConfig(runs=10, folds=5, n_boot=50, head=head, **kw)


@pytest.fixture()
def trainer_factory(tiny_encoder_dir, tmp_path):
    return lambda: FrozenHeadTrainer(model=str(tiny_encoder_dir), cache_dir=tmp_path / "cache")


def test_audit_writes_the_experiment_directory(trainer_factory, tmp_path):
    pairs = make_pairs()
    out = tmp_path / "exp"
    table = audit(pairs, config(), out=out, trainer=trainer_factory(), quiet=True)
    for name in (
        "config.json",
        "plan.parquet",
        "memorization.parquet",
        "memorization_map.png",
        "summary.json",
    ):
        assert (out / name).exists(), name
    assert sorted(p.name for p in (out / "runs").iterdir()) == [f"{r:03d}" for r in range(10)]
    scores = pd.read_parquet(out / "runs" / "003" / "scores.parquet")
    assert list(scores.columns) == ["id", "r_chosen", "r_rejected"] and len(scores) == 60
    mem = pd.read_parquet(out / "memorization.parquet")
    for col in (
        "id",
        "tm",
        "tg",
        "cm",
        "n_in",
        "n_out",
        "tm_lo",
        "tm_hi",
        "tg_lo",
        "tg_hi",
        "cm_lo",
        "cm_hi",
        "prompt",
        "chosen",
        "user_id",
        "margin",
        "group",
    ):
        assert col in mem, col
    # 8 runs train on each pair's group or hold it for validation (early stopping), 2 hold
    # it out; validation runs count neither in nor out
    manifests = [json.loads((out / "runs" / f"{r:03d}" / "manifest.json").read_text())
                 for r in range(10)]  # fmt: skip
    n_val = mem.id.map(lambda i: sum(i in m["val_ids"] for m in manifests))
    assert (mem.n_in + n_val == 8).all() and (mem.n_out == 2).all() and n_val.sum() > 0
    np.testing.assert_allclose(mem.cm, mem.tm - mem.tg)
    assert table.shape[0] == 60
    plan = pd.read_parquet(out / "plan.parquet")
    # membership in the manifests agrees with the plan, at the group level
    manifest = manifests[0]
    in_groups = set(plan[(plan.run == 0) & plan.in_train].group)
    val_groups = set(plan[(plan.run == 0) & plan.validation].group)
    assert set(manifest["train_ids"]) == set(pairs.id[pairs.user_id.isin(in_groups)])
    assert set(manifest["val_ids"]) == set(pairs.id[pairs.user_id.isin(val_groups)])
    assert val_groups and not val_groups & in_groups
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["group_by"] == "user_id" and cfg["audit"]["seed"] == 0 and cfg["version"]


def test_same_seed_same_tables(trainer_factory, tmp_path):
    pairs = make_pairs()
    a = audit(pairs, config(), out=tmp_path / "a", trainer=trainer_factory(), quiet=True)
    b = audit(pairs, config(), out=tmp_path / "b", trainer=trainer_factory(), quiet=True)
    pd.testing.assert_frame_equal(a, b)


class Crash(RuntimeError):
    pass


class CrashingTrainer:
    """Dies in the middle of run ``at`` after the earlier runs finished."""

    def __init__(self, inner, at):
        self.inner, self.at, self.calls = inner, at, 0

    def prepare(self, pairs, *, quiet=False):
        return self.inner.prepare(pairs, quiet=quiet)

    def fit_score(self, train_index, *, seed, **kw):
        if self.calls == self.at:
            raise Crash("killed")
        self.calls += 1
        return self.inner.fit_score(train_index, seed=seed, **kw)


def test_resume_after_a_crash_gives_the_same_tables(trainer_factory, tmp_path):
    pairs = make_pairs()
    whole = audit(pairs, config(), out=tmp_path / "whole", trainer=trainer_factory(), quiet=True)
    out = tmp_path / "crashed"
    with pytest.raises(Crash):
        audit(pairs, config(), out=out, trainer=CrashingTrainer(trainer_factory(), 4), quiet=True)
    assert [AuditDir(out).run_done(r) for r in range(6)] == [True] * 4 + [False] * 2
    # a half-written run: scores without a manifest, plus a stale temporary file
    half = out / "runs" / "004"
    half.mkdir(parents=True)
    (half / "scores.parquet").write_bytes(b"PAR1 truncated")
    (half / ".manifest.json.x.tmp").write_text("{")
    before = (out / "runs" / "001" / "scores.parquet").stat().st_mtime_ns
    counting = CrashingTrainer(trainer_factory(), at=-1)
    resumed = audit(pairs, config(), out=out, trainer=counting, quiet=True)
    assert counting.calls == 6  # runs 4..9 only: finished runs are never redone
    assert (out / "runs" / "001" / "scores.parquet").stat().st_mtime_ns == before
    pd.testing.assert_frame_equal(resumed, whole)


def test_a_finished_audit_started_again_returns_its_tables_untouched(trainer_factory, tmp_path):
    pairs = make_pairs()
    out = tmp_path / "done"
    first = audit(pairs, config(), out=out, trainer=trainer_factory(), quiet=True)
    outputs = [out / n for n in ("memorization.parquet", "summary.json", "memorization_map.png",
                                 "config.json", "plan.parquet")]
    stamps = [p.stat().st_mtime_ns for p in outputs]
    counting = CrashingTrainer(trainer_factory(), at=-1)
    again = audit(pairs, config(), out=out, trainer=counting, quiet=True)
    assert counting.calls == 0
    assert [p.stat().st_mtime_ns for p in outputs] == stamps  # nothing rewritten
    pd.testing.assert_frame_equal(again, first)
    # another execution option (it resumes): config.json changes, so the tables are made again
    stamp = (out / "summary.json").stat().st_mtime_ns
    audit(pairs, config(retries=3), out=out, trainer=trainer_factory(), quiet=True)
    assert (out / "summary.json").stat().st_mtime_ns > stamp
    # a run written after the tables (here: its manifest rewritten) also finishes again
    stamp = (out / "summary.json").stat().st_mtime_ns
    manifest = out / "runs" / "003" / "manifest.json"
    manifest.write_text(manifest.read_text())
    audit(pairs, config(retries=3), out=out, trainer=trainer_factory(), quiet=True)
    assert (out / "summary.json").stat().st_mtime_ns > stamp


def test_other_config_in_same_dir_is_refused(trainer_factory, tmp_path):
    from rmlens._errors import InputError

    pairs = make_pairs()
    audit(pairs, config(), out=tmp_path / "x", trainer=trainer_factory(), quiet=True)
    with pytest.raises(InputError, match="another configuration"):
        audit(pairs, config(seed=1), out=tmp_path / "x", trainer=trainer_factory(), quiet=True)


def test_group_by_prompt_when_no_users(trainer_factory, tmp_path):
    pairs = make_pairs().drop(columns="user_id")
    out = tmp_path / "p"
    audit(
        pairs,
        AuditConfig(runs=4, folds=2, n_boot=0, head=HeadConfig(epochs=2)),
        out=out,
        trainer=trainer_factory(),
        quiet=True,
    )
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["group_by"] == "prompt" and "grouped by prompt" in cfg["group_note"]
    assert cfg["n_groups"] == 4


def test_cli_memorize_end_to_end(tiny_encoder_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "pairs.jsonl"
    make_pairs().rename(columns={"user_id": "annotator"}).to_json(
        data, orient="records", lines=True
    )
    out = tmp_path / "cli"
    code = main(
        [
            "memorize",
            "--data",
            str(data),
            "--out",
            str(out),
            "--model",
            str(tiny_encoder_dir),
            "--runs",
            "5",
            "--map",
            "user_id=annotator",
            "--quiet",
            "--no-report",
        ]
    )
    assert code == 0
    assert "Memorization audit: 60 pairs, 5 runs" in capsys.readouterr().out
    assert len(pd.read_parquet(out / "memorization.parquet")) == 60
    assert assert_strict_json(out) >= 3  # config.json, summary.json, the runs' manifests


def test_cli_too_few_usable_pairs_is_one_line_exit_2(tiny_encoder_dir, tmp_path, monkeypatch,
                                                     capsys):
    """Two pairs, one with chosen == rejected after truncation: runs that would train on
    nothing are refused in one line saying what is left and what the plan needs (not a
    ZeroDivisionError). (A pair whose texts are the same before truncation is left out at
    load time, with its own warning: tests/test_bad_input.py.)"""
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "two.jsonl"
    data.write_text(
        '{"prompt": "how", "chosen": "this is how we do it", "rejected": "what are you"}\n'
        '{"prompt": "yo", "chosen": "good cat", "rejected": "good dog"}\n'
    )  # at 4 tokens, [CLS] prompt [SEP] and 1 response token: "good" == "good"
    args = ["memorize", "--data", data, "--out", tmp_path / "o", "--model", tiny_encoder_dir,
            "--max-length", "4", "--l2-grid", "1", "--quiet", "--no-report"]  # fmt: skip
    code = main([str(a) for a in args])  # a fixed lambda: 2 groups need no validation group
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("error: 1 usable pair(s) left of 2 (1 dropped: chosen == rejected")
    assert "would train on none, and every run needs at least one" in err
    assert "Traceback" not in err and "ZeroDivisionError" not in err


def test_a_refused_plan_writes_nothing_and_the_same_out_takes_other_data(
    tiny_encoder_dir, tmp_path, monkeypatch, capsys
):
    """The refusal of a run with no usable pair comes before config.json and plan.parquet,
    so the same `out` then takes the fixed data (not refused as an audit of other data)."""
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    data, out = tmp_path / "pairs.jsonl", tmp_path / "o"
    data.write_text(
        '{"prompt": "how", "chosen": "this is how we do it", "rejected": "what are you"}\n'
        '{"prompt": "yo", "chosen": "good cat", "rejected": "good dog"}\n'
    )  # the second pair's responses are the same after truncation to 4 tokens
    args = ["memorize", "--data", data, "--out", out, "--model", tiny_encoder_dir, "--runs",
            "2", "--max-length", "4", "--l2-grid", "1", "--quiet", "--no-report"]  # fmt: skip
    assert main([str(a) for a in args]) == 2
    assert "would train on none" in capsys.readouterr().err
    assert list(out.iterdir()) == []
    words = ["good", "great", "fine", "bad", "awful", "poor"]
    data.write_text("".join(
        f'{{"prompt": "q{i}", "chosen": "{words[i % 3]} answer {i}", '
        f'"rejected": "{words[3 + i % 3]} reply"}}\n'
        for i in range(8)
    ))  # fmt: skip
    assert main([str(a) for a in args]) == 0, capsys.readouterr().err
    assert json.loads((out / "config.json").read_text())["n_pairs"] == 8


def test_cli_bad_input_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "chosen": "b", "rejected": "c"}\n{not json\n')
    code = main(["memorize", "--data", str(bad), "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and "line 2" in err and err.count("\n") == 1
    assert (
        main(
            [
                "memorize",
                "--data",
                str(bad),
                "--out",
                str(tmp_path / "o"),
                "--group-by",
                "nope",
                "--runs",
                "0",
            ]
        )
        == 2
    )


def test_finetune_mode_runs_through_the_same_runner(tiny_causal_dir, tmp_path):
    from rmlens.rewards import TrainConfig

    pairs = make_pairs(24, users=4)
    train = TrainConfig(epochs=1, batch_size=8, finetune="lora", lora_r=2, patience=0)
    cfg = AuditConfig(
        model=str(tiny_causal_dir),
        runs=2,
        folds=2,
        n_boot=0,
        mode="finetune",
        train=train,
        max_length=48,
    )
    table = audit(pairs, cfg, out=tmp_path / "ft", quiet=True)
    assert len(table) == 24 and (table.n_in == 1).all() and (table.n_out == 1).all()
    assert table.tm.notna().all()
    record = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert record["audit"]["mode"] == "finetune" and record["audit"]["train"]["finetune"] == "lora"


def test_cli_usage_errors_exit_2(capsys):
    assert main(["memorize", "--bogus"]) == 2
    assert main(["no-such-command"]) == 2
    assert "No such command" in capsys.readouterr().err
    assert main(["--version"]) == 0


def test_cli_drop_invalid_records_the_rows_left_out(tiny_encoder_dir, tmp_path, monkeypatch,
                                                    capsys):
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    pairs = make_pairs()
    pairs.loc[3, "chosen"] = " "
    data = tmp_path / "pairs.jsonl"
    pairs.to_json(data, orient="records", lines=True)
    argv = ["memorize", "--data", str(data), "--out", str(tmp_path / "a"), "--model",
            str(tiny_encoder_dir), "--runs", "4", "--quiet", "--no-report"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "line 4: 'chosen'" in err and "--drop-invalid" in err
    assert main([*argv, "--drop-invalid"]) == 0
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["dropped_rows"]["n"] == 1 and "line 4" in summary["dropped_rows"]["first"][0]
    assert len(pd.read_parquet(tmp_path / "a" / "memorization.parquet")) == 59


def test_pairs_without_a_preference_are_recorded_as_left_out(tmp_path):
    from rmlens.data import load_pairs

    pairs = make_pairs().head(6)
    pairs.loc[2, "rejected"] = pairs.loc[2, "chosen"]
    data = tmp_path / "pairs.jsonl"
    pairs.to_json(data, orient="records", lines=True)
    with pytest.warns(RmlensWarning, match="same text"):
        loaded = load_pairs(data)  # left out whatever the flag, and recorded
    assert len(loaded) == 5 and loaded.attrs["dropped"]["same_text"] == 1
    assert "line 3" in loaded.attrs["dropped"]["first"][0]
    pairs.loc[4, "chosen"] = " "
    pairs.to_json(data, orient="records", lines=True)
    with pytest.warns(RmlensWarning):
        loaded = load_pairs(data, drop_invalid=True)
    dropped = loaded.attrs["dropped"]
    assert len(loaded) == 4 and dropped["n"] == 2 and dropped["same_text"] == 1
    assert "line 5" in dropped["first"][0] and "line 3" in dropped["first"][1]
