"""The Ray backend: same tables as the local backend, retries and failures across processes."""

import json
import logging
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rmlens._errors import InputError, RmlensWarning
from rmlens.memorization import AuditConfig, audit
from rmlens.rewards import FrozenHeadTrainer, HeadConfig

HERE = Path(__file__).resolve().parent


def make_pairs(n: int = 48, users: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    good, bad = ["good", "great", "help", "sure"], ["bad", "worst", "hate", "never"]
    return pd.DataFrame(
        {
            "id": [f"p{i:03d}" for i in range(n)],
            "prompt": [f"what is the {rng.choice(['cat', 'dog', 'sun'])} ?" for _ in range(n)],
            "chosen": [" ".join(rng.choice(good, 3)) + f" {i % 7}" for i in range(n)],
            "rejected": [" ".join(rng.choice(bad, 3)) + f" {i % 5}" for i in range(n)],
            "user_id": [f"u{i % users}" for i in range(n)],
        }
    )


def config(**kw) -> AuditConfig:
    return AuditConfig(runs=6, folds=3, n_boot=40, head=HeadConfig(epochs=3, batch_size=16), **kw)


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray with 2 CPUs for the module (starting Ray is slow); tasks see tests/.

    Only the tests that use it need Ray: the missing-Ray test runs with or without it.
    """
    ray = pytest.importorskip("ray")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), old) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield
    ray.shutdown()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


class FlakyTrainer(FrozenHeadTrainer):
    """Run seeds in ``fail_once`` raise on their first attempt, ``fail_always`` on every one.

    Attempts are counted in files, since Ray runs them in other processes.
    """

    def __init__(self, *, log: Path, fail_once=(), fail_always=(), **kw):
        super().__init__(**kw)
        self.log, self.fail_once, self.fail_always = log, set(fail_once), set(fail_always)

    def fit_score(self, train_index, *, seed, **kw):
        with open(self.log, "a") as f:
            f.write(f"{seed}\n")
        tries = self.log.read_text().split().count(str(seed))
        if seed in self.fail_always or (seed in self.fail_once and tries == 1):
            raise RuntimeError(f"boom on seed {seed}")
        return super().fit_score(train_index, seed=seed, **kw)


def test_ray_backend_gives_the_local_tables(ray_session, tiny_encoder_dir, tmp_path):
    pairs = make_pairs()
    cache = tmp_path / "cache"
    local = audit(
        pairs, config(), out=tmp_path / "local",
        trainer=FrozenHeadTrainer(model=str(tiny_encoder_dir), cache_dir=cache), quiet=True,
    )
    remote = audit(
        pairs, config(backend="ray"), out=tmp_path / "ray",
        trainer=FrozenHeadTrainer(model=str(tiny_encoder_dir), cache_dir=cache), quiet=True,
    )
    pd.testing.assert_frame_equal(local, remote)
    for name in ("plan.parquet", "memorization.parquet", "runs/004/scores.parquet"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / "local" / name), pd.read_parquet(tmp_path / "ray" / name)
        )
    for run in range(6):
        a, b = (json.loads((tmp_path / d / f"runs/{run:03d}/manifest.json").read_text())
                for d in ("local", "ray"))
        assert a["train_ids"] == b["train_ids"] and a["seed"] == b["seed"]
    rm = tmp_path / "ray" / "runs" / "002" / "rm"
    assert (rm / "rm_config.json").exists() and (rm / "head.safetensors").exists()
    cfg = json.loads((tmp_path / "ray" / "config.json").read_text())
    assert cfg["audit"]["backend"] == "ray"
    # the Ray audit may be resumed with the local backend: execution options are not results
    again = audit(pairs, config(), out=tmp_path / "ray", trainer=None, quiet=True)
    pd.testing.assert_frame_equal(again, local)


def test_ray_retries_then_reports_a_failing_run(ray_session, tiny_encoder_dir, tmp_path):
    from rmlens.memorization._runner import run_seed

    pairs = make_pairs()
    log = tmp_path / "attempts.txt"
    flaky, broken = run_seed(0, 1), run_seed(0, 3)
    trainer = FlakyTrainer(
        log=log, fail_once=[flaky], fail_always=[broken],
        model=str(tiny_encoder_dir), cache_dir=tmp_path / "cache",
    )
    out = tmp_path / "exp"
    with pytest.warns(RmlensWarning) as caught:
        table = audit(pairs, config(backend="ray", retries=1), out=out, trainer=trainer, quiet=True)
    attempts = log.read_text().split()
    assert attempts.count(str(flaky)) == 2 and attempts.count(str(broken)) == 2
    assert len(attempts) == 6 + 2
    error = json.loads((out / "runs" / "003" / "error.json").read_text())
    assert error["attempts"] == 2 and error["error"] == f"RuntimeError: boom on seed {broken}"
    assert "fit_score" in error["traceback"]  # the worker's traceback is kept
    assert not (out / "runs" / "003" / "manifest.json").exists()
    assert (out / "runs" / "001" / "manifest.json").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["n_runs_finished"] == 5
    assert [f["run"] for f in summary["failed_runs"]] == [3]
    # 5 finished runs: each trains on a pair, holds it out, or holds it for validation
    manifests = sorted(out.glob("runs/*/manifest.json"))
    val = [set(json.loads(m.read_text())["val_ids"]) for m in manifests]
    n_val = table.id.map(lambda i: sum(i in v for v in val))
    assert (table.n_in + table.n_out + n_val == 5).all() and n_val.sum() > 0
    said = [str(w.message) for w in caught]
    assert any(f"run 3 failed 2 times (RuntimeError: boom on seed {broken})" in m for m in said)
    assert any(m.startswith("incomplete audit: 1 of 6 runs failed (runs 3;") for m in said)


def test_missing_ray_is_a_clear_input_error(monkeypatch, tmp_path):
    # None in sys.modules makes `import ray` fail as if Ray were not installed
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(InputError, match=r"pip install 'rmlens\[ray\]'"):
        audit(make_pairs(), config(backend="ray"), out=tmp_path / "x", quiet=True)
    assert not (tmp_path / "x").exists()


def test_paired_audit_under_ray_gives_the_local_tables(ray_session, tiny_encoder_dir, tmp_path):
    pairs = make_pairs()
    cache = tmp_path / "cache"
    cfg = AuditConfig(runs=6, folds=3, n_boot=40, estimator="paired", check_exact=2)

    def trainer():
        return FrozenHeadTrainer(cfg.head, model=str(tiny_encoder_dir), cache_dir=cache)

    local = audit(pairs, cfg, out=tmp_path / "local", trainer=trainer(), quiet=True)
    remote = audit(pairs, cfg.replace(backend="ray"), out=tmp_path / "ray", trainer=trainer(),
                   quiet=True)  # fmt: skip
    pd.testing.assert_frame_equal(local, remote)
    scores = pd.read_parquet(tmp_path / "ray" / "runs/003/scores.parquet")
    assert scores.p_cf.notna().any()
    here = pd.read_parquet(tmp_path / "local/runs/003/scores.parquet")
    pd.testing.assert_frame_equal(scores, here)
    summary = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert summary["estimator"] == "paired" and summary["exactness"]["groups"] == 12


def test_last_layer_paired_audit_under_ray_gives_the_local_tables(
    ray_session, tiny_encoder_dir, tmp_path
):
    pairs = make_pairs()
    cache = tmp_path / "cache"
    head = HeadConfig(head="mlp", hidden_dim=8, epochs=3)
    cfg = AuditConfig(runs=6, folds=3, n_boot=40, estimator="paired", head=head)

    def trainer():
        return FrozenHeadTrainer(head, model=str(tiny_encoder_dir), cache_dir=cache)

    local = audit(pairs, cfg, out=tmp_path / "local", trainer=trainer(), quiet=True)
    remote = audit(pairs, cfg.replace(backend="ray"), out=tmp_path / "ray", trainer=trainer(),
                   quiet=True)  # fmt: skip
    pd.testing.assert_frame_equal(local, remote)
    scores = pd.read_parquet(tmp_path / "ray" / "runs/003/scores.parquet")
    assert "p_cf_grid" in scores and "p_cf" not in scores
    summary = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert summary["estimator"] == "paired" and "damping" in summary
