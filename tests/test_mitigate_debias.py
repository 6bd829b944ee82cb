"""rmlens mitigate --debias sae: the SAE lens on OUT/bt, its shortcut latents projected out of
every bt run's head into OUT/sae_debias, compared (and scored on a candidate pool) beside
the objectives; resumed; refused without bt, in finetune mode or with an MLP head."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import WORDS, run_cli
from rmlens.cli._options import read_toml
from test_sae import tiny_pairs


def tiny_pool(prompts: int = 4, per_prompt: int = 4) -> pd.DataFrame:
    """Candidates in the tiny pairs' vocabulary; gold: the response's length in words."""
    rng = np.random.default_rng(1)
    rows = []
    for p in range(prompts):
        prompt = " ".join(rng.choice(WORDS[:60], 4))
        for _ in range(per_prompt):
            response = " ".join(rng.choice(WORDS[:60], int(rng.integers(2, 12))))
            rows.append({"prompt_id": f"q{p}", "prompt": prompt, "response": response,
                         "gold": float(len(response.split()))})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_encoder_dir):
    """Tiny pairs and a candidate pool on disk, the mitigate arguments, and their cache."""
    root = tmp_path_factory.mktemp("mitigate-debias")
    data, pool = root / "pairs.jsonl", root / "pool.jsonl"
    tiny_pairs().to_json(data, orient="records", lines=True)
    tiny_pool().to_json(pool, orient="records", lines=True)
    args = ["mitigate", "--data", data, "--model", tiny_encoder_dir, "--runs", "4", "--folds",
            "2", "--n-boot", "0", "--no-probes", "--no-shap", "--quiet"]  # fmt: skip
    return root, args, pool, {"RMLENS_CACHE": str(root / "cache")}


def test_mitigate_debias_sae_adds_a_compared_row_and_resumes(world):
    root, args, pool, env = world
    out = root / "mit"
    run = [*args, "--out", out, "--objectives", "bt,poe", "--debias", "sae",
           "--candidates", pool]  # fmt: skip
    result = run_cli(run, env)
    assert result.exit_code == 0, result.output

    record = json.loads((out / "sae_debias" / "config.json").read_text())
    assert record["audit"]["head"]["objective"] == "sae_debias"
    assert record["debias"]["source_objective"] == "bt" and record["debias"]["latents"]
    assert (out / "bt" / "sae" / "sae_weights.safetensors").is_file()
    mitigate = json.loads((out / "mitigate.json").read_text())
    assert mitigate["debias"] == ["sae"] and mitigate["objectives"] == ["bt", "poe"]
    figures = pd.read_parquet(out / "compare.parquet")
    assert {"bt", "poe", "sae_debias"} <= set(figures.audit)
    held = figures[figures.metric == "heldout_accuracy"].set_index("audit")
    assert held.loc["sae_debias", "n"] > 0 and 0 <= held.loc["sae_debias", "value"] <= 1
    audits = json.loads((out / "compare.json").read_text())["audits"]
    assert {a["label"]: a["objective"] for a in audits}["sae_debias"] == "sae_debias"
    curves = pd.read_parquet(out / "overoptimization.parquet")
    assert {"bt", "poe", "sae_debias"} <= set(curves["rm"])
    assert "sae_debias" in (out / "compare.html").read_text()
    assert read_toml(out / "config.toml")["mitigate"]["debias"] == ["sae"]

    # started again: the SAE is reused and no run (audited or debiased) is redone
    stamps = {p: p.stat().st_mtime_ns for p in
              [*out.glob("*/runs/*/manifest.json"), out / "bt/sae/sae_weights.safetensors"]}
    assert len(stamps) == 3 * 4 + 1
    result = run_cli(run, env)
    assert result.exit_code == 0, result.output
    assert stamps == {p: p.stat().st_mtime_ns for p in stamps}
    assert json.loads((out / "bt" / "sae" / "config.json").read_text())["reused"] is True


def test_debias_sae_needs_bt_among_the_objectives(world):
    root, args, _, env = world
    out = root / "no-bt"
    result = run_cli([*args, "--out", out, "--objectives", "poe", "--debias", "sae"], env)
    assert result.exit_code == 2
    assert "--objectives" in result.stderr and "bt" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize("flags, words", [
    (["--head", "mlp"], "--head is mlp"),
    (["--mode", "finetune"], "--mode is finetune"),
])  # fmt: skip
def test_debias_sae_is_refused_before_training(world, flags, words):
    root, args, _, env = world
    out = root / "refused"
    result = run_cli([*args, "--out", out, "--objectives", "bt", "--debias", "sae", *flags], env)
    assert result.exit_code == 2
    assert words in result.stderr and "--debias" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()
    result = run_cli([*args, "--out", out, "--debias", "nope"], env)
    assert result.exit_code == 2 and "--debias must be" in result.stderr


def test_python_api_checks_debias_before_training(tmp_path):
    from rmlens._params import ParamError
    from rmlens.comparison import mitigate

    with pytest.raises(ParamError, match="holding bt with `debias` sae"):
        mitigate(tiny_pairs(), out=tmp_path / "m", objectives=("poe",), debias=("sae",))
    assert not (tmp_path / "m" / "poe").exists()
