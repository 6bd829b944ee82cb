"""Best-of-n overoptimization: candidate pools, ensembles, curves, and ``rmlens overoptimize``."""

import json

import numpy as np
import pandas as pd
import pytest

from conftest import length_pairs, run_cli
from rmlens._errors import InputError
from rmlens.comparison._bon_curves import PoolCurves, combine_runs, standardize, summarize
from rmlens.data import CandidatesConfig, generate_candidates, load_candidates
from rmlens.data._synth_bank import FILLER


def test_candidates_are_seeded_and_record_gold_and_every_shortcut():
    config = CandidatesConfig(n_prompts=20, n_responses=16, seed=3)
    pool = generate_candidates(config)
    pd.testing.assert_frame_equal(pool, generate_candidates(config))
    assert not pool.equals(generate_candidates(config.replace(seed=4)))
    assert len(pool) == 320 and (pool.groupby("prompt_id").size() == 16).all()
    assert (pool.groupby("prompt_id")["prompt"].nunique() == 1).all()
    assert (pool["gold"] == pool["quality"]).all()
    assert pool["sound_tips"].tolist() == [(0, 0, 1, 3)[q] for q in pool["quality"]]
    signed = pool["signature"].to_numpy(bool)
    starts = pool["response"].str.startswith(config.signature_phrase).to_numpy(bool)
    assert signed.any() and (signed == starts).all()
    assert (pool.loc[signed, "model"] == config.signature_model).all()
    assert (pool.loc[~signed, "model"] != config.signature_model).all()
    padded = pool[pool["padding"] > 0]
    assert len(padded) and padded["padding"].between(2, 4).all()
    assert all(sum(f in r for f in FILLER) >= k for r, k in zip(padded.response, padded.padding))
    tasted = pool[pool["taste"] != ""]
    assert len(tasted) and all(r.endswith(t) for r, t in zip(tasted.response, tasted.taste))


def test_the_anticorrelated_policy_puts_shortcuts_on_worse_answers():
    config = CandidatesConfig(n_prompts=60, n_responses=64, policy="anticorrelated")
    pool = generate_candidates(config)
    padded = (pool["padding"] > 0).groupby(pool["quality"]).mean()
    signed = pool["signature"].groupby(pool["quality"]).mean()
    assert padded.is_monotonic_decreasing and padded[0] > 4 * padded[3]
    assert signed.is_monotonic_decreasing and signed[0] > 4 * signed[3]
    assert (pool["padding"] > 0).mean() == pytest.approx(config.padding, abs=0.03)
    independent = generate_candidates(config.replace(policy="independent"))
    shares = (independent["padding"] > 0).groupby(independent["quality"]).mean()
    assert shares.max() - shares.min() < 0.06


def _write(rows, path):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_pool_without_gold_or_with_bad_records_is_refused_naming_line_and_field(tmp_path):
    rows = [{"prompt_id": "a", "prompt": "q", "response": f"r{i}", "gold": i} for i in range(3)]
    without = _write([{k: v for k, v in r.items() if k != "gold"} for r in rows],
                     tmp_path / "nogold.jsonl")  # fmt: skip
    with pytest.raises(InputError, match=r"nogold.jsonl: not a candidate pool: no field 'gold'"):
        load_candidates(without)
    bad = _write([rows[0], {**rows[1], "gold": "high"}, rows[2]], tmp_path / "bad.jsonl")
    with pytest.raises(InputError, match=r"bad.jsonl line 2: 'gold' must be a number"):
        load_candidates(bad)
    other = _write([rows[0], {**rows[1], "prompt": "another"}], tmp_path / "two.jsonl")
    with pytest.raises(InputError, match=r"line 2: prompt_id 'a' has another 'prompt'"):
        load_candidates(other)
    ragged = _write([*rows, {**rows[0], "prompt_id": "b"}, {**rows[1], "prompt_id": "b"}],
                    tmp_path / "ragged.jsonl")  # fmt: skip
    with pytest.raises(InputError, match=r"'b' has 2 candidates but 'a' has 3"):
        load_candidates(ragged)
    assert load_candidates(_write(rows, tmp_path / "ok.jsonl"))["gold"].tolist() == [0, 1, 2]


def test_ensembles_match_hand_computed_mean_min_and_uncertainty_weighting():
    z = np.array([[[1.0, -2.0]], [[3.0, 0.0]], [[-1.0, 4.0]]])  # (R=3, P=1, N=2)
    np.testing.assert_allclose(combine_runs(z, "mean"), [[1.0, 2 / 3]])
    np.testing.assert_allclose(combine_runs(z, "min"), [[-1.0, -2.0]])
    var = np.array([(0 + 4 + 4) / 3, (64 / 9 + 4 / 9 + 100 / 9) / 3])  # population variances
    np.testing.assert_allclose(combine_runs(z, "uwo", lam=0.5), [[1.0, 2 / 3]] - 0.5 * var)
    drawn = np.array([2.0, 0.0, 1.0])  # run 0 twice, run 2 once: a bootstrap draw
    for kind in ("mean", "min", "uwo"):
        np.testing.assert_allclose(combine_runs(z, kind, drawn), combine_runs(z[[0, 0, 2]], kind))


def _anticorrelated_arrays(n_prompts=40, n=32, seed=0):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 4, (n_prompts, n)).astype(float)
    words = 60 - 12 * gold + rng.normal(0, 4, gold.shape)  # longer answers are worse
    return gold, words


def test_a_length_rm_on_a_pool_where_length_opposes_gold_falls_and_the_oracle_never_does():
    gold, words = _anticorrelated_arrays()
    bon = PoolCurves(np.stack([gold, words]), ("gold", "words"), (1, 2, 4, 8, 16, 32),
                     n_boot=200, seed=0)  # fmt: skip
    oracle = bon.oracle()
    noise = np.random.default_rng(1).normal(0, 1, (3, *gold.shape))
    runs = bon.runs(standardize(words[None] + noise))  # three runs of a length-only RM
    g = runs.values.index("gold")
    assert (np.diff(runs.curve[g]) < 0).all()  # every step of n picks worse answers
    assert (np.diff(oracle.curve[g]) >= -1e-12).all() and oracle.curve[g, -1] == 3.0
    assert runs.curve[g, 0] == pytest.approx(gold.mean())  # best of 1 is a random candidate
    assert (np.diff(runs.curve[runs.values.index("proxy")]) > 0).all()  # the proxy only rises
    lo, hi = np.quantile(runs.draws[:, g], [0.025, 0.975], axis=0)
    assert ((lo <= runs.curve[g]) & (runs.curve[g] <= hi)).all() and (hi - lo)[1] > 0
    summary = summarize(runs, oracle, bon.kl, bon.ns, 0.95)
    assert summary["peak_n"] == 1 and summary["gold_drop"] == pytest.approx(
        runs.curve[g, 0] - runs.curve[g, -1])
    area = np.sum(np.diff(bon.kl) * ((oracle.curve[g] - runs.curve[g])[1:] +
                                     (oracle.curve[g] - runs.curve[g])[:-1]) / 2)
    assert summary["oracle_gap_area"] == pytest.approx(area)
    assert summary["spearman_lo"] <= summary["spearman"] <= summary["spearman_hi"] < -0.5


def test_a_proxy_blind_to_gold_shows_no_fall_though_its_noisy_curve_has_a_peak():
    """Best-of-n by noise: gold of the pick is flat in expectation. The peak read from the
    same curve lies above its last point by noise alone; the cross-fitted fall does not."""
    rng = np.random.default_rng(0)
    gold = rng.normal(size=(200, 16))
    bon = PoolCurves(gold[None], ("gold",), (1, 2, 4, 8, 16), n_boot=300, seed=0)
    runs = bon.runs(standardize(rng.normal(size=(4, 200, 16))))
    summary = summarize(runs, bon.oracle(), bon.kl, bon.ns, 0.95)
    g = runs.values.index("gold")
    assert runs.curve[g].max() - runs.curve[g, -1] > 0 and summary["peak_n"] < 16
    assert summary["gold_drop_lo"] < 0 < summary["gold_drop_hi"]
    oracle = summarize(bon.oracle(), bon.oracle(), bon.kl, bon.ns, 0.95)
    assert oracle["gold_drop"] == 0.0 and bon.half.sum() == 100  # the oracle only rises


@pytest.fixture(scope="module")
def synthetic_audit(tiny_encoder_dir, tmp_path_factory):
    """A 4-run audit of synthetic pairs on the tiny encoder, and a small pool of its world."""
    from rmlens.cli import main
    from rmlens.data import save_pairs, synthesize
    from rmlens.data._synth_config import SynthConfig

    root = tmp_path_factory.mktemp("overoptimize")
    data = save_pairs(synthesize(SynthConfig(n_pairs=160, n_users=8)), root / "pairs.jsonl")
    audit = root / "audit"
    args = ["memorize", "--data", data, "--out", audit, "--model", tiny_encoder_dir,
            "--runs", "4", "--folds", "2", "--quiet"]  # fmt: skip
    assert main([str(a) for a in args]) == 0
    pool = save_pairs(generate_candidates(CandidatesConfig(n_prompts=6, n_responses=8)),
                      root / "pool.jsonl")  # fmt: skip
    return root, audit, pool


def test_cli_overoptimize_writes_curves_for_runs_ensembles_and_the_oracle(synthetic_audit):
    root, audit, pool = synthetic_audit
    out = root / "oo"
    env = {"RMLENS_CACHE": str(root / "cache")}
    result = run_cli(["overoptimize", audit, "--candidates", pool, "--out", out, "--n-boot",
                      "50", "--quiet"], env)  # fmt: skip
    assert result.exit_code == 0, result.output
    curves = pd.read_parquet(out / "overoptimization.parquet")
    assert set(curves["rm"]) == {"oracle", "audit", "audit ensemble mean",
                                 "audit ensemble min", "audit ensemble uwo"}  # fmt: skip
    assert sorted(set(curves["n"])) == [1, 2, 4, 8]
    assert curves.loc[curves["n"] == 1, "kl"].eq(0).all()
    one = curves[curves["n"] == 1]
    assert np.allclose(one["gold"], load_candidates(pool)["gold"].mean())
    assert (curves["lo"] <= curves["gold"] + 1e-9).all()
    assert (curves["gold"] <= curves["hi"] + 1e-9).all()
    oracle = curves[curves["rm"] == "oracle"].sort_values("n")
    assert (np.diff(oracle["gold"]) >= 0).all()
    runs = pd.read_parquet(out / "overoptimization_runs.parquet")
    assert len(runs) == 4 * 4 and set(runs["run"]) == {0, 1, 2, 3}
    record = json.loads((out / "overoptimization.json").read_text())
    assert record["prompts"] == 6 and record["candidates_per_prompt"] == 8
    rows = {r["rm"]: r for r in record["summary"]}
    assert rows["audit"]["gold_at_max_n_lo"] <= rows["audit"]["gold_at_max_n"]
    assert {"length_spearman", "shortcut_accuracy", "cm_shortcut"} <= set(
        record["hacking"]["audits"]["audit"])
    assert len(record["hacking"]["runs"]["audit"]) == 4
    for name in ("overoptimization.png", "overoptimization_ensembles.png",
                 "overoptimization_hacking.png", "overoptimization.toml"):  # fmt: skip
        assert (out / name).stat().st_size > 0, name


def test_cli_overoptimize_refuses_a_pool_without_gold_and_an_audit_of_other_data(
    synthetic_audit, tiny_encoder_dir, tmp_path
):
    root, audit, pool = synthetic_audit
    env = {"RMLENS_CACHE": str(root / "cache")}
    no_gold = tmp_path / "nogold.jsonl"
    load_candidates(pool).drop(columns=["gold"]).to_json(no_gold, orient="records", lines=True)
    result = run_cli(["overoptimize", audit, "--candidates", no_gold, "--out", tmp_path / "a"],
                     env)  # fmt: skip
    assert result.exit_code == 2 and "no field 'gold'" in result.stderr, result.output
    result = run_cli(["overoptimize", audit, "--candidates", pool, "--out", tmp_path / "b",
                      "--ns", "1,16"], env)  # fmt: skip
    assert result.exit_code == 2 and "--ns" in result.stderr and "has 8" in result.stderr
    data = tmp_path / "pairs.jsonl"
    length_pairs().to_json(data, orient="records", lines=True)
    other = tmp_path / "other"
    assert run_cli(["memorize", "--data", data, "--out", other, "--model", tiny_encoder_dir,
                    "--runs", "2", "--folds", "2", "--quiet"], env).exit_code == 0  # fmt: skip
    result = run_cli(["overoptimize", other, "--candidates", pool, "--out", tmp_path / "c"], env)
    assert result.exit_code == 2, result.output
    assert "an audit of other data than the pool" in result.stderr
    assert "no 'topic' column" in result.stderr


def test_the_reports_show_the_best_of_n_section(synthetic_audit):
    from rmlens.report import write_report

    root, audit, pool = synthetic_audit
    result = run_cli(["overoptimize", audit, "--candidates", pool, "--out", root, "--n-boot",
                      "20", "--ensembles", "min", "--quiet"],
                     {"RMLENS_CACHE": str(root / "cache")})  # fmt: skip
    assert result.exit_code == 0, result.output
    page = write_report(audit).read_text()
    section = page[page.index('id="overoptimization"'):]
    assert "audit ensemble min" in section and "oracle" in section
    assert "overopt-gold" in section and "overopt-proxy" in section


def test_a_real_pool_holds_out_prompts_and_relabels_the_rest_by_gold():
    from rmlens.data._candidates import candidates_from_pairs

    rows = []
    for p in range(10):
        texts = [f"answer {'x ' * k}to {p}" for k in range(3 + (p == 0))]  # prompt 0 has 4
        rows += [{"id": f"{p}-{i}", "prompt": f"question {p}", "chosen": texts[i],
                  "rejected": texts[(i + 1) % len(texts)], "user_id": f"u{p % 2}"}
                 for i in range(len(texts))]  # fmt: skip
    pairs = pd.DataFrame(rows)
    calls = []

    def gold(prompts, responses):  # the gold RM: longer is better
        calls.append(len(responses))
        return np.array([len(r) for r in responses], dtype=float)

    pool, gold_pairs = candidates_from_pairs(pairs, gold, holdout=0.4, seed=1)
    assert pool["prompt_id"].nunique() == 4 and (pool.groupby("prompt_id").size() == 3).all()
    assert np.allclose(pool["gold"], pool["response"].str.len())
    assert not set(pool["prompt"]) & set(gold_pairs["prompt"])  # held-out prompts
    assert len(gold_pairs) == len(pairs[~pairs["prompt"].isin(set(pool["prompt"]))])
    assert (gold_pairs["chosen"].str.len() >= gold_pairs["rejected"].str.len()).all()
    assert gold_pairs["flipped"].any() and (gold_pairs["margin"] >= 0).all()
    texts = (set(zip(pool.prompt, pool.response)) | set(zip(gold_pairs.prompt, gold_pairs.chosen))
             | set(zip(gold_pairs.prompt, gold_pairs.rejected)))
    assert calls == [len(texts)]  # one call, each distinct text scored once
    with pytest.raises(InputError, match="no prompt has 5 distinct responses"):
        candidates_from_pairs(pairs, gold, n_responses=5)


def test_cli_data_candidates_refuses_options_of_the_other_source(tmp_path):
    data = tmp_path / "pairs.jsonl"
    length_pairs().to_json(data, orient="records", lines=True)
    out = tmp_path / "pool.jsonl"
    result = run_cli(["data", "candidates", "--out", out, "--from", data])
    assert result.exit_code == 2 and "--from needs --gold-rm" in result.stderr
    result = run_cli(["data", "candidates", "--out", out, "--from", data, "--gold-rm", "x",
                      "--policy", "anticorrelated"])  # fmt: skip
    assert result.exit_code == 2 and "--policy applies to the synthetic world only" in (
        result.stderr)
    result = run_cli(["data", "candidates", "--out", out, "--pairs-out", tmp_path / "p.jsonl"])
    assert result.exit_code == 2 and "apply to --from" in result.stderr
    result = run_cli(["data", "candidates", "--out", out, "--prompts", "3", "--responses", "4",
                      "--policy", "anticorrelated"])  # fmt: skip
    assert result.exit_code == 0 and len(load_candidates(out)) == 12


def test_cli_mitigate_with_candidates_curves_every_objective_into_the_comparison(
    synthetic_audit, tiny_encoder_dir
):
    root, _, pool = synthetic_audit
    out = root / "mit"
    result = run_cli(["mitigate", "--data", root / "pairs.jsonl", "--out", out, "--model",
                      tiny_encoder_dir, "--runs", "4", "--folds", "2", "--objectives",
                      "bt,poe", "--bias-features", "len_words", "--no-probes", "--no-shap",
                      "--n-boot", "20", "--candidates", pool, "--ensembles", "mean",
                      "--quiet"], {"RMLENS_CACHE": str(root / "cache")})  # fmt: skip
    assert result.exit_code == 0, result.output
    record = json.loads((out / "overoptimization.json").read_text())
    assert [a["label"] for a in record["audits"]] == ["bt", "poe"]
    assert record["settings"]["n_boot"] == 20 and record["settings"]["ensembles"] == ["mean"]
    page = (out / "compare.html").read_text()
    assert 'id="overoptimization"' in page and "gold at best-of-8" in page
    assert "[overoptimize]" in (out / "config.toml").read_text()
