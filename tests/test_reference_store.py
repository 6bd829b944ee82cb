"""Brute-force references committed in the repository (benchmarks/helpers/reference_store.py,
issue 59): exported whole and once, read back without the audit, restored so that a grown audit
trains only the runs not committed, and refused for another audit's runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rmlens._errors import InputError
from rmlens.data import synthesize
from rmlens.data._synth_config import SynthConfig
from rmlens.memorization import AuditConfig, audit
from rmlens.memorization._execute import run_seed
from rmlens.memorization._run_folders import load_matrices
from rmlens.rewards._trainer_base import RunScores

# the fake RM's quality and few-runs warnings are beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::rmlens._errors.RmlensWarning")
STORE = Path(__file__).resolve().parents[1] / "benchmarks" / "helpers" / "reference_store.py"
CONFIG = AuditConfig(runs=5, seed=1, estimator="brute", n_boot=0)
DROPPED = 3  # a pair the trainer cannot use: never scored, NaN in every run


def _store():
    spec = importlib.util.spec_from_file_location("reference_store_under_test", STORE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


store = _store()


class FakeTrainer:
    """A fake RM whose margins depend on the run's training pairs and seed; it records the
    seeds of the runs it trains, and raises ``KeyboardInterrupt`` at call ``stop_at``."""

    def __init__(self, n: int, stop_at: int | None = None):
        rng = np.random.default_rng(21)
        self.n, self.stop_at, self.seeds = n, stop_at, []
        self.signal, self.base = rng.standard_normal(n), rng.standard_normal(n)

    def prepare(self, pairs, *, quiet=False):
        kept = np.ones(len(pairs), dtype=bool)
        kept[DROPPED] = False
        return kept

    def fit_score(self, train_index, *, seed, val_index=None):
        if len(self.seeds) == self.stop_at:
            raise KeyboardInterrupt
        self.seeds.append(seed)
        inside = np.zeros(self.n, dtype=bool)
        inside[train_index] = True
        noise = 0.5 * np.random.default_rng(seed).standard_normal(self.n)
        margin = self.base + inside * (1 + 0.5 * self.signal) + noise
        return RunScores(margin, np.zeros(self.n), {"epochs": 2})


@pytest.fixture(scope="module")
def pairs() -> pd.DataFrame:
    return synthesize(SynthConfig(n_pairs=60, n_users=6, seed=0))


@pytest.fixture()
def audited(pairs, tmp_path) -> Path:
    """A finished 5-run brute-force audit of plan seed 1."""
    out = tmp_path / "audit"
    audit(pairs, CONFIG, out=out, trainer=FakeTrainer(len(pairs)), quiet=True)
    return out


def _same_matrices(a, b) -> None:
    assert list(a.ids) == list(b.ids) and a.runs == b.runs
    np.testing.assert_array_equal(a.member, b.member)
    np.testing.assert_array_equal(a.val, b.val)
    np.testing.assert_allclose(a.p, b.p, rtol=0, atol=1e-6)  # margins kept as float32


def test_exported_runs_load_as_the_audit_does(pairs, audited, tmp_path):
    ref = tmp_path / "ref"
    assert store.export_runs(audited, ref, ids=pairs.id, setting="tiny") == [0, 1, 2, 3, 4]
    _same_matrices(store.load_reference(ref), load_matrices(audited))
    info = json.loads((ref / "pairs.json").read_text())
    assert info["setting"] == "tiny" and info["ids"] == pairs.id.tolist()
    assert info["precision"] == "fp32" and info["folds"] == 5 and len(info["fingerprint"]) == 16
    with np.load(ref / "runs" / "0002.npz") as z:
        assert int(z["run"]) == 2 and int(z["seed"]) == run_seed(1, 2)
        assert z["margin"].dtype == np.float32 and np.isnan(z["margin"][DROPPED])
        assert z["member"].dtype == np.uint8 and len(z["member"]) == -(-len(pairs) // 8)


def test_a_run_is_written_once(audited, tmp_path):
    ref = tmp_path / "ref"
    store.export_runs(audited, ref)
    stamp = (ref / "runs" / "0000.npz").stat().st_mtime_ns
    assert store.export_runs(audited, ref) == []
    assert (ref / "runs" / "0000.npz").stat().st_mtime_ns == stamp


def test_a_half_written_run_is_never_read(audited, tmp_path, monkeypatch):
    ref = tmp_path / "ref"

    def killed(file, **arrays):
        file.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez_compressed", killed)
    with pytest.raises(KeyboardInterrupt):
        store.export_runs(audited, ref)
    monkeypatch.undo()
    assert list(store.committed_runs(ref)) == []
    (ref / "runs" / ".0000.npz.x1y2.tmp").write_bytes(b"PK\x03\x04 a killed writer's")
    assert store.export_runs(audited, ref) == [0, 1, 2, 3, 4]
    assert not list((ref / "runs").glob("*.tmp"))  # cleaned, never read
    _same_matrices(store.load_reference(ref), load_matrices(audited))


def test_restored_runs_are_not_trained_again(pairs, audited, tmp_path):
    ref = tmp_path / "ref"
    store.export_runs(audited, ref, ids=pairs.id)
    fresh = FakeTrainer(len(pairs))
    grown = store.grow(pairs, CONFIG, 10, work=tmp_path / "elsewhere", ref_dir=ref,
                       trainer=fresh)  # fmt: skip
    assert grown == list(range(5, 10))
    assert fresh.seeds == [run_seed(1, r) for r in range(5, 10)]  # runs 0-4 came from ref
    whole = tmp_path / "whole"
    audit(pairs, CONFIG.replace(runs=10), out=whole, trainer=FakeTrainer(len(pairs)), quiet=True)
    _same_matrices(store.load_reference(ref), load_matrices(whole))
    _same_matrices(load_matrices(tmp_path / "elsewhere"), load_matrices(whole))
    # the first audit's folder (a fixed 5-run audit) grows too: runs 5-9 restored, 10-14 new
    again = FakeTrainer(len(pairs))
    assert store.grow(pairs, CONFIG, 15, work=audited, ref_dir=ref, trainer=again) == [
        *range(10, 15)]  # fmt: skip
    assert again.seeds == [run_seed(1, r) for r in range(10, 15)]


def test_a_work_folder_grown_before_is_committed_without_training(pairs, audited, tmp_path):
    idle = FakeTrainer(len(pairs))
    assert store.grow(pairs, CONFIG, 5, work=audited, ref_dir=tmp_path / "ref",
                      trainer=idle) == [0, 1, 2, 3, 4]  # fmt: skip
    assert idle.seeds == []


def test_an_interrupted_growth_keeps_its_finished_runs(pairs, tmp_path):
    ref, work = tmp_path / "ref", tmp_path / "work"
    with pytest.raises(KeyboardInterrupt):
        store.grow(pairs, CONFIG, 10, work=work, ref_dir=ref, trainer=FakeTrainer(60, 7))
    assert list(store.committed_runs(ref)) == list(range(7))
    resumed = FakeTrainer(len(pairs))
    store.grow(pairs, CONFIG, 10, work=tmp_path / "new", ref_dir=ref, trainer=resumed)
    assert resumed.seeds == [run_seed(1, r) for r in (7, 8, 9)]


def test_another_audit_is_refused(pairs, audited, tmp_path):
    ref = tmp_path / "ref"
    store.export_runs(audited, ref, ids=pairs.id)
    other = tmp_path / "other"
    audit(pairs, CONFIG.replace(seed=2), out=other, trainer=FakeTrainer(len(pairs)), quiet=True)
    with pytest.raises(InputError, match=r"than the audit at .*other: .*seed 1 \(committed\) vs 2"):
        store.export_runs(other, ref)
    with pytest.raises(InputError, match="another audit than the audit asked for: .*seed 1"):
        store.restore_runs(ref, tmp_path / "new", expect=store.audit_record(pairs, CONFIG.replace(
            seed=2)))  # fmt: skip
    assert not (tmp_path / "new").exists()
    changed = pairs.assign(margin=pairs.margin + 1.0)
    with pytest.raises(InputError, match="data_sha1"):
        store.grow(changed, CONFIG, 10, work=tmp_path / "new", ref_dir=ref)
    assert list(store.committed_runs(ref)) == list(range(5))
