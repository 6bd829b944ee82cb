"""Faults: failing runs retried then reported, SIGKILL then resume, unwritable or full output."""

import errno
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from rmlens.cli import main
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._runner import run_seed
from rmlens.rewards import FrozenHeadTrainer, HeadConfig


def make_pairs(n: int = 50, users: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    good, bad = ["good", "great", "help", "sure", "yes"], ["bad", "worst", "hate", "never", "no"]
    return pd.DataFrame(
        {
            "id": [f"q{i:03d}" for i in range(n)],
            "prompt": [f"what is the {rng.choice(['cat', 'dog', 'moon'])} ?" for _ in range(n)],
            "chosen": [" ".join(rng.choice(good, 3)) + f" {i % 7}" for i in range(n)],
            "rejected": [" ".join(rng.choice(bad, 3)) + f" {i % 5}" for i in range(n)],
            "user_id": [f"u{i % users}" for i in range(n)],
            "margin": [float(i % 3) for i in range(n)],
        }
    )


@pytest.fixture()
def data_file(tmp_path, monkeypatch):
    monkeypatch.setenv("RMLENS_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "pairs.jsonl"
    make_pairs().to_json(path, orient="records", lines=True)
    return path


def memorize(data, out, model, *extra) -> int:
    args = ["memorize", "--data", str(data), "--out", str(out), "--model", str(model)]
    return main([*args, "--quiet", "--no-report", *extra])


def test_failing_run_is_retried_then_reported(data_file, tiny_encoder_dir, tmp_path, monkeypatch,
                                              capsys):
    """Run 2 always raises (reported after 1 + 2 attempts), run 4 raises once (retried)."""
    attempts: list[int] = []
    fit = FrozenHeadTrainer.fit_score
    broken, flaky = run_seed(0, 2), run_seed(0, 4)

    def fit_score(self, train_index, *, seed, **kw):
        attempts.append(seed)
        if seed == broken or (seed == flaky and attempts.count(seed) == 1):
            raise RuntimeError(f"CUDA out of memory (seed {seed})")
        return fit(self, train_index, seed=seed, **kw)

    monkeypatch.setattr(FrozenHeadTrainer, "fit_score", fit_score)
    out = tmp_path / "exp"
    flags = ("--runs", "5", "--head", "linear", "--epochs", "3")
    assert memorize(data_file, out, tiny_encoder_dir, *flags) == 0
    assert attempts.count(broken) == 3 and attempts.count(flaky) == 2 and len(attempts) == 8
    std = capsys.readouterr()
    assert "run 2 failed 3 times (RuntimeError: CUDA out of memory" in std.err
    assert "warning: incomplete audit: 1 of 5 runs failed (runs 2;" in std.err
    assert "Memorization audit: 50 pairs, 4 runs" in std.out
    error = json.loads((out / "runs" / "002" / "error.json").read_text())
    assert error["attempts"] == 3 and "Traceback" in error["traceback"]
    assert sorted(p.name for p in (out / "runs" / "002").iterdir()) == ["error.json"]
    # run 2 held out one fold of users: their pairs have no out-run left, so NaN
    plan = pd.read_parquet(out / "plan.parquet")
    held = set(plan[(plan.run == 2) & ~plan.in_train & ~plan.validation].group)
    mem = pd.read_parquet(out / "memorization.parquet")
    lacking = mem.group.isin(held)
    assert lacking.any() and mem.cm[lacking].isna().all() and (mem.n_out[lacking] == 0).all()
    assert mem.cm[~lacking].notna().all() and (mem.category[lacking] == "undefined").all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["n_runs_finished"] == 4
    assert summary["failed_runs"][0]["run"] == 2
    assert "CUDA out of memory" in summary["failed_runs"][0]["error"]
    assert summary["pairs_lacking_runs"]["count"] == lacking.sum()

    # the same command again retries only run 2; then the audit is complete
    monkeypatch.setattr(FrozenHeadTrainer, "fit_score", fit)
    flags = ("--runs", "5", "--head", "linear", "--epochs", "3")
    assert memorize(data_file, out, tiny_encoder_dir, *flags) == 0
    assert "incomplete" not in capsys.readouterr().err
    assert not (out / "runs" / "002" / "error.json").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and summary["failed_runs"] == [] and summary["n_runs_finished"] == 5


def test_systematic_failure_stops_the_audit(data_file, tiny_encoder_dir, tmp_path, monkeypatch,
                                            capsys):
    calls = []

    def fit_score(self, train_index, *, seed, **kw):
        calls.append(seed)
        raise ValueError("shapes do not match")

    monkeypatch.setattr(FrozenHeadTrainer, "fit_score", fit_score)
    code = memorize(data_file, tmp_path / "o", tiny_encoder_dir, "--runs", "6", "--retries", "0")
    err = capsys.readouterr().err
    assert code == 1 and len(calls) == 3  # 3 runs in a row failed: stop
    assert "3 runs in a row failed, so the failure looks systematic" in err
    assert "ValueError: shapes do not match" in err
    assert not (tmp_path / "o" / "memorization.parquet").exists()


@pytest.mark.parametrize("where", ["under_a_file", "is_a_file"])
def test_unwritable_out_is_exit_2_and_one_line(data_file, tmp_path, capsys, where):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    out = blocker / "sub" if where == "under_a_file" else blocker
    code = main(["memorize", "--data", str(data_file), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: --out {out}") and err.count("\n") == 1
    assert blocker.read_text() == "not a folder"


@pytest.mark.parametrize(
    "exc",
    [
        OSError(errno.ENOSPC, "No space left on device", "scores.parquet"),
        OSError("[Errno 28] Error writing bytes to file. Detail: [errno 28] No space left"),
    ],
)
def test_full_disk_is_exit_2_and_one_line(data_file, tiny_encoder_dir, tmp_path, monkeypatch,
                                          capsys, exc):
    import rmlens.memorization._run_folders as runs

    def full(frame, path):
        raise exc

    monkeypatch.setattr(runs, "write_parquet", full)
    code = memorize(data_file, tmp_path / "o", tiny_encoder_dir, "--runs", "2", "--folds", "2")
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"error: --out {tmp_path / 'o'}: cannot write") and err.count("\n") == 1
    assert "no space left on the device" in err


def test_sigkill_then_resume_equals_an_uninterrupted_audit(data_file, tiny_encoder_dir,
                                                           tmp_path):
    args = ["--runs", "12", "--folds", "4", "--head", "linear", "--epochs", "200",
            "--patience", "0"]  # slow runs
    whole = tmp_path / "whole"
    assert memorize(data_file, whole, tiny_encoder_dir, *args) == 0  # also fills the cache
    killed = tmp_path / "killed"
    script = "import sys; from rmlens.cli import main; sys.exit(main(sys.argv[1:]))"
    command = [sys.executable, "-c", script, "memorize", "--data", str(data_file),
               "--out", str(killed), "--model", str(tiny_encoder_dir), "--quiet", "--no-report",
               *args]
    proc = subprocess.Popen(command, env=os.environ.copy(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    done: list = []
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        done = list(killed.glob("runs/*/manifest.json"))
        if len(done) >= 3:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    assert 3 <= len(done) < 12 and not (killed / "memorization.parquet").exists()
    leftovers = sorted(str(p.relative_to(killed)) for p in killed.rglob("*.tmp"))
    print(f"SIGKILL after {len(done)} of 12 runs finished; temporary files left: {leftovers}")
    # leftovers a kill can leave in an unfinished run: never read, redone
    last = killed / "runs" / "011"
    (last / ".rm.dead.tmp").mkdir(parents=True)
    (last / "scores.parquet").write_bytes(b"PAR1 half")
    (last / "manifest.json").write_text('{"run": 11, "train_')
    assert memorize(data_file, killed, tiny_encoder_dir, *args) == 0
    for name in ("plan.parquet", "memorization.parquet", "runs/011/scores.parquet"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(killed / name), pd.read_parquet(whole / name), check_exact=True
        )
    assert not list(killed.rglob(".*.tmp"))
    assert len(list(killed.glob("runs/*/manifest.json"))) == 12


def test_other_execution_options_resume_but_other_results_do_not(tmp_path, tiny_encoder_dir):
    from rmlens._errors import InputError

    pairs = make_pairs()
    cfg = {"runs": 3, "folds": 3, "n_boot": 10, "head": HeadConfig(epochs=2)}
    trainer = FrozenHeadTrainer(model=str(tiny_encoder_dir), cache_dir=tmp_path / "cache")
    audit(pairs, AuditConfig(**cfg), out=tmp_path / "x", trainer=trainer, quiet=True)
    audit(pairs, AuditConfig(**cfg, retries=5, cpus_per_run=2.0), out=tmp_path / "x", quiet=True)
    with pytest.raises(InputError, match="another configuration"):
        audit(pairs, AuditConfig(**{**cfg, "n_boot": 11}), out=tmp_path / "x", quiet=True)


def test_ray_options_need_the_ray_backend(data_file, tmp_path, capsys):
    out = tmp_path / "o"
    code = main(["memorize", "--data", str(data_file), "--out", str(out), "--gpus-per-run", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "error: --gpus-per-run must be unset unless backend='ray', got 1.0" in err
    assert main(["memorize", "--data", str(data_file), "--out", str(out), "--retries", "-1"]) == 2
