"""Fine-tuned explicit RMs: losses, packing, invariances, save/reload, resume, audits, CLI."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from rmlens._errors import InputError, RmlensWarning
from rmlens.backbones import load_backbone
from rmlens.backbones._featurize import encode_ids
from rmlens.backbones._tokenize import encode_pair_text
from rmlens.hub import EnsembleRM, load_rm, train
from rmlens.rewards import ExplicitRMTrainer, TrainConfig, make_trainer
from rmlens.rewards._base_model import trainable_state
from rmlens.rewards._nets import ExplicitNet, collate
from rmlens.rewards._packing import make_example
from rmlens.rewards.finetune import lr_factor
from rmlens.rewards.losses import ranking_loss

PROMPTS = [
    "what is the best thing ever ?",
    "how can i help the dog ?",
    "why is the sun big ?",
    "who is the cat ?",
    "where is the water ?",
    "can you help ?",
]
GOOD = [
    "the sun is great .",
    "please give the dog water .",
    "the sun is big .",
    "the cat is good",
    "here is the water .",
    "sure , i can help .",
]
BAD = [
    "bad",
    "no , never .",
    "i hate the moon and the sun and the dog .",
    "the dog is bad",
    "no",
    "never .",
]
PAIRS = pd.DataFrame(
    {
        "id": [f"p{i}" for i in range(12)],
        "prompt": PROMPTS * 2,
        "chosen": GOOD * 2,
        "rejected": BAD[::-1] + BAD,
        "user_id": ["u1", "u2", "u3", "u4"] * 3,
        "margin": [1.0, 0.5, 0.0, 2.0] * 3,
    }
)


def config(path, **kw) -> TrainConfig:
    base = dict(
        model=str(path), device="cpu", max_length=40, epochs=1, batch_size=4, lr=5e-3, head_lr=5e-3
    )
    return TrainConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def trained(tiny_causal_dir):
    return ExplicitRMTrainer(config(tiny_causal_dir, epochs=2)).fit(PAIRS, quiet=True)


def test_losses_in_training_by_hand():
    r = torch.tensor([[2.0, 1.0], [0.0, 0.5]])
    valid = torch.ones(2, 2, dtype=torch.bool)
    m = torch.tensor([1.0, 0.0])
    cfg = TrainConfig(use_margin=True, center_coef=0.1)
    bt = (math.log(2) + math.log(1 + math.exp(0.5))) / 2  # -log sigmoid(2 - 1 - 1), (0 - .5)
    center = 0.1 * ((2 + 1) ** 2 + (0 + 0.5) ** 2) / 2
    assert float(ranking_loss(r, valid, m, cfg)) == pytest.approx(bt + center)
    pl = TrainConfig(loss="plackett-luce")
    ranks = torch.tensor([[3.0, 1.0, 0.0], [2.0, 1.0, 9.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    first = (math.log(math.exp(3) + math.exp(1) + 1) - 3) + (math.log(math.exp(1) + 1) - 1)
    second = math.log(math.exp(2) + math.exp(1)) - 2
    assert float(ranking_loss(ranks, mask, m, pl)) == pytest.approx((first + second) / 2)


def test_lr_schedule():
    assert lr_factor(0, 10, 2, "linear") == pytest.approx(1 / 3)
    assert lr_factor(1, 10, 2, "linear") == pytest.approx(2 / 3)
    assert lr_factor(2, 10, 2, "linear") == pytest.approx(1.0)
    assert lr_factor(6, 10, 2, "linear") == pytest.approx(0.5)
    assert lr_factor(6, 10, 2, "cosine") == pytest.approx(0.5)
    assert lr_factor(4, 10, 2, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert lr_factor(9, 10, 0, "constant") == 1.0


def test_config_checked():
    with pytest.raises(ValueError, match="The 'lora_r' parameter of TrainConfig must be an int"):
        TrainConfig(lora_r=0).check()
    with pytest.raises(ValueError, match="unknown TrainConfig setting.*: learning_rate"):
        TrainConfig.from_dict({"lr": 1e-3, "learning_rate": 1})


def test_packed_batch_equals_separate_sequences(tiny_causal_dir):
    bb = load_backbone(str(tiny_causal_dir), max_length=40)
    torch.manual_seed(0)
    net = ExplicitNet(bb.model, bb.hidden_size, "last", True).eval()
    tok = bb.tokenizer
    examples = [
        make_example(tok, p, [c, r], 40)
        for p, c, r in zip(PAIRS.prompt[:4], PAIRS.chosen[:4], PAIRS.rejected[:4])
    ]
    examples.append(make_example(tok, "who ?", ["the cat is good", "the cat is bad", "no"], 40))
    assert examples[0].shared > 5
    pad = tok.pad_token_id
    with torch.no_grad():
        packed = net(collate(examples, range(5), pad_id=pad, mode="packed"))
        flat_batch = collate(examples, range(5), pad_id=pad, mode="flat")
        flat = net(flat_batch)
        separate = net(collate(examples, range(5), pad_id=pad, mode="causal"))
        seqs = [s for ex in examples for s in ex.seqs]
        alone = net.head(torch.as_tensor(encode_ids(bb, seqs, batch_size=1, quiet=True)))
    valid = collate(examples, range(5), pad_id=pad, mode="packed").valid
    np.testing.assert_allclose(packed[valid], separate[valid], atol=1e-5)
    np.testing.assert_allclose(packed[valid], alone.squeeze(-1), atol=1e-5)
    np.testing.assert_allclose(flat[valid], alone.squeeze(-1), atol=1e-5)
    assert flat_batch.input_ids.shape == (1, sum(ex.packed_length for ex in examples))
    assert bb.model.config._attn_implementation == "sdpa"  # restored after the flat batch


def test_flat_attention_is_each_examples_masked_attention():
    from types import SimpleNamespace

    from rmlens.rewards._fast import flat_attention
    gen = torch.Generator().manual_seed(0)
    examples = [(3, [2, 1]), (1, [3, 3, 1]), (0, [2, 2])]  # (shared, tail lengths)
    segs, spans, start = [], [], 0
    for shared, tails in examples:
        segs.append([0] * shared + [k + 1 for k, n in enumerate(tails) for _ in range(n)])
        spans.append((start, shared, tails))
        start += len(segs[-1])
    heads, kv, d = 4, 2, 8  # grouped-query attention
    q = torch.randn(1, heads, start, d, generator=gen)
    k, v = torch.randn(1, kv, start, d, generator=gen), torch.randn(1, kv, start, d, generator=gen)
    out, _ = flat_attention(SimpleNamespace(), q, k, v, None, scaling=0.5, rmlens_spans=spans)
    assert out.shape == (1, start, heads, d)
    for (a, _, _), seg in zip(spans, segs):
        for i in range(len(seg)):  # token a + i: softmax over the keys its block mask allows
            seen = [a + j for j in range(i + 1) if seg[j] in (0, seg[i])]
            for h in range(heads):
                keys, values = k[0, h // 2, seen], v[0, h // 2, seen]
                w = torch.softmax(keys @ q[0, h, a + i] * 0.5, 0)
                torch.testing.assert_close(out[0, a + i, h], w @ values, rtol=1e-5, atol=1e-6)


def test_scores_do_not_depend_on_batch_or_padding_side(trained):
    rm = trained.rm_
    examples = rm.examples(PAIRS.prompt, list(zip(PAIRS.chosen, PAIRS.rejected)))
    ref = rm.score_examples(examples, batch_size=1)
    for size in (3, 12):
        np.testing.assert_allclose(rm.score_examples(examples, batch_size=size), ref, atol=1e-5)
    rt = rm.runtime
    rt.side = "left"
    from rmlens.rewards._nets import score_examples

    left = score_examples(rm.net, examples, rt, batch_size=5)
    np.testing.assert_allclose(left, ref, atol=1e-5)
    mixed = rm.score_examples(examples[::-1][:5], batch_size=5)[::-1]
    np.testing.assert_allclose(mixed, ref[-5:], atol=1e-5)


def test_training_learns_and_token_ids_match_scoring(trained):
    assert trained.history_[-1]["train_loss"] < trained.history_[0]["train_loss"]
    r_c, r_r = trained.rm_.score_pairs(PAIRS)
    assert np.mean(r_c > r_r) >= 0.9
    tok = trained.base_.tokenizer
    ex = make_example(tok, PAIRS.prompt[0], [PAIRS.chosen[0]], 40)
    assert ex.seqs[0] == encode_pair_text(tok, PAIRS.prompt[0], PAIRS.chosen[0], 40)
    assert ex.seqs[0].count(tok.bos_token_id) == 1


def test_lora_rm_saves_and_reloads_identically(trained, tmp_path):
    rm = trained.rm_
    before = rm.score(PAIRS.prompt, PAIRS.chosen)
    rm.save(tmp_path / "rm")
    for name in (
        "rm_config.json",
        "head.safetensors",
        "adapter/adapter_model.safetensors",
        "adapter/adapter_config.json",
        "tokenizer.json",
    ):
        assert (tmp_path / "rm" / name).exists(), name
    loaded = load_rm(tmp_path / "rm", device="cpu")
    np.testing.assert_allclose(loaded.score(PAIRS.prompt, PAIRS.chosen), before, atol=1e-5)
    r_c, r_r = loaded.score_pairs(PAIRS)
    np.testing.assert_allclose(r_c, before, atol=1e-5)
    head = dict(loaded.net.head.named_parameters())
    for name, p in rm.net.head.named_parameters():
        torch.testing.assert_close(head[name], p)


def test_resume_from_checkpoint_gives_same_weights(tiny_causal_dir, tmp_path, monkeypatch):
    cfg = config(
        tiny_causal_dir, epochs=2, save_steps=1, grad_accum=2, batch_size=2, lora_dropout=0.1
    )
    full = ExplicitRMTrainer(cfg).fit(PAIRS, checkpoint_dir=tmp_path / "a", quiet=True)
    expected = trainable_state(full.net_)

    import rmlens.rewards.finetune as loop

    calls = {"n": 0}
    real = loop.lr_factor

    def interrupted(*args):
        calls["n"] += 1
        if calls["n"] == 5:  # the 5th optimizer step, in the second epoch
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(loop, "lr_factor", interrupted)
    trainer = ExplicitRMTrainer(cfg)
    with pytest.raises(KeyboardInterrupt):
        trainer.fit(PAIRS, checkpoint_dir=tmp_path / "b", quiet=True)
    state = json.loads((tmp_path / "b" / "latest.json").read_text())
    assert state["checkpoint"].startswith("step-00000004")
    monkeypatch.setattr(loop, "lr_factor", real)
    resumed = ExplicitRMTrainer(cfg).fit(PAIRS, checkpoint_dir=tmp_path / "b", quiet=True)
    got = trainable_state(resumed.net_)
    assert got.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-6)
    assert [h["train_loss"] for h in resumed.history_] == pytest.approx(
        [h["train_loss"] for h in full.history_]
    )


def test_full_finetune_encoder_learns(tiny_encoder_dir, tmp_path):
    pairs = PAIRS.assign(
        chosen=[f"{c} good" for c in PAIRS.chosen], rejected=[f"{r} bad" for r in PAIRS.rejected]
    )
    cfg = config(
        tiny_encoder_dir,
        finetune="full",
        epochs=3,
        lr=1e-3,
        head_lr=2e-2,
        eval_fraction=0.25,
        patience=2,
    )
    trainer = ExplicitRMTrainer(cfg).fit(pairs, quiet=True)
    assert "eval_accuracy" in trainer.history_[0]
    r_c, r_r = trainer.rm_.score_pairs(pairs)
    assert np.mean(r_c > r_r) >= 0.9
    base = load_backbone(str(tiny_encoder_dir)).model.state_dict()
    tuned = trainer.net_.body.state_dict()
    assert any(not torch.equal(base[k], tuned[k]) for k in base if k in tuned)
    loaded = load_rm(trainer.rm_.save(tmp_path / "enc"), device="cpu")
    assert (tmp_path / "enc" / "model" / "model.safetensors").exists()
    np.testing.assert_allclose(loaded.score_pairs(pairs)[0], r_c, atol=1e-5)
    with pytest.raises(ValueError, match="needs a new trainer"):
        trainer.config = cfg.replace(max_length=20)
        trainer.fit(pairs, quiet=True)


def test_plackett_luce_on_rankings(tiny_causal_dir):
    rankings = pd.DataFrame(
        {
            "ranking_id": ["a", "b", "c", "d"],
            "prompt": PROMPTS[:4],
            "responses": [[GOOD[i], "bad", "no , never ."] for i in range(4)],
            "scores": [[3.0, 1.0, 2.0]] * 4,
        }
    )
    with pytest.raises(ValueError, match="plackett-luce"):
        ExplicitRMTrainer(config(tiny_causal_dir)).fit(rankings, quiet=True)
    cfg = config(tiny_causal_dir, loss="plackett-luce", epochs=4, lr=1e-2, head_lr=1e-2)
    trainer = ExplicitRMTrainer(cfg).fit(rankings, quiet=True)
    assert trainer.history_[-1]["train_loss"] < trainer.history_[0]["train_loss"]
    r = trainer.rm_.score_examples(
        trainer.rm_.examples(rankings.prompt, [[rs[0], rs[2], rs[1]] for rs in rankings.responses])
    )
    assert (np.diff(r, axis=1) < 0).mean() >= 0.75  # best first after training


def test_pairs_identical_after_truncation_are_dropped(tiny_causal_dir):
    tail = " the sun is big ." * 4
    pairs = pd.DataFrame(
        {
            "prompt": ["why ?", "who ?"],
            "chosen": ["good" + tail, "the cat"],
            "rejected": ["bad" + tail, "the dog"],
        }
    )
    trainer = ExplicitRMTrainer(config(tiny_causal_dir, max_length=10))
    with pytest.warns(RmlensWarning, match="1 pairs dropped: chosen and rejected are the same tok"):
        trainer.fit(pairs, quiet=True)
    assert trainer.n_dropped_ == 1
    assert trainer.prepare(pairs, quiet=True).tolist() == [False, True]


def test_finetune_trainer_runs_an_audit(tiny_causal_dir, tmp_path):
    from rmlens.memorization import AuditConfig, audit

    trainer = make_trainer(config(tiny_causal_dir))
    from rmlens.rewards import HeadConfig

    # patience=0: no validation groups (2 folds leave too few groups to carve them from)
    cfg = AuditConfig(model=str(tiny_causal_dir), runs=2, folds=2, n_boot=20,
                      head=HeadConfig(patience=0))  # fmt: skip
    table = audit(PAIRS, cfg, out=tmp_path / "exp", trainer=trainer, quiet=True)
    assert len(table) == len(PAIRS) and table.tm.notna().all() and table.tg.notna().all()
    rm = load_rm(tmp_path / "exp" / "runs" / "000" / "rm", device="cpu")
    scores = pd.read_parquet(tmp_path / "exp" / "runs" / "000" / "scores.parquet")
    np.testing.assert_allclose(rm.score_pairs(PAIRS)[0], scores.r_chosen, atol=1e-5)
    ens = EnsembleRM.from_experiment(tmp_path / "exp", device="cpu")
    assert len(ens.members) == 2
    table = ens.disagreement(PAIRS)
    assert {"margin_mean", "margin_std", "p_chosen", "agreement"} <= set(table)
    assert (table.margin_std > 0).all()


def test_train_rm_ensemble_and_resume(tiny_causal_dir, tmp_path):
    cfg = config(tiny_causal_dir, ensemble=2)
    ens = train(PAIRS, cfg, out=tmp_path / "ens", quiet=True)
    assert isinstance(ens, EnsembleRM) and len(ens.members) == 2
    a, b = (m.score(PAIRS.prompt, PAIRS.chosen) for m in ens.members)
    assert not np.allclose(a, b)
    again = train(PAIRS, cfg, out=tmp_path / "ens", quiet=True)
    np.testing.assert_allclose(again.score(PAIRS.prompt, PAIRS.chosen), (a + b) / 2, atol=1e-5)
    out = tmp_path / "ens"
    with pytest.raises(ValueError) as err:
        train(PAIRS, cfg.replace(lr=1e-3), out=out, quiet=True)
    assert str(err.value) == (
        f"`out` {out} holds an RM with another configuration: lr {cfg.lr} (saved) vs 0.001 "
        "(now); use another `out`, or the saved settings and data (its train.json) to resume it"
    )
    with pytest.raises(ValueError, match=r"an RM with other data \(12 pairs \(saved\) vs 3"):
        train(PAIRS.iloc[:3], cfg, out=out, quiet=True)


def test_cli_train_and_score(tiny_causal_dir, tmp_path, capsys):
    from rmlens.cli import main
    from rmlens.data import save_pairs

    save_pairs(PAIRS, tmp_path / "pairs.jsonl")
    args = [
        "train",
        "--data",
        str(tmp_path / "pairs.jsonl"),
        "--out",
        str(tmp_path / "rm"),
        "--model",
        str(tiny_causal_dir),
        "--max-length",
        "40",
        "--device",
        "cpu",
        "-q",
    ]
    assert main(args) == 0
    assert (tmp_path / "rm" / "rm_config.json").exists()
    assert not (tmp_path / "rm" / "checkpoints").exists()
    out = tmp_path / "scored.parquet"
    code = main(
        [
            "score",
            "--rm",
            str(tmp_path / "rm"),
            "--data",
            str(tmp_path / "pairs.jsonl"),
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    scored = pd.read_parquet(out)
    assert {"r_chosen", "r_rejected", "user_id", "margin"} <= set(scored)
    printed = capsys.readouterr().out  # train's lines, then score's --json (indented)
    summary = json.loads(printed[printed.index("{\n"):])
    assert summary["n_pairs"] == len(PAIRS)
    assert main(args + ["--lora-r", "0"]) == 2
    assert "error: --lora-r must be an int > 0, got 0" in capsys.readouterr().err


def test_lr_grid_keeps_the_rate_with_the_lowest_validation_loss(tiny_causal_dir):
    """Each rate trains from the base weights; the kept one has the lowest validation loss,
    and a single-rate run with it gives the same scores."""
    train, val = np.arange(0, 8), np.arange(8, 12)
    grid = (1e-4, 5e-2)
    trainer = make_trainer(config(tiny_causal_dir, lr_grid=grid, patience=1, epochs=2))
    trainer.prepare(PAIRS)
    result = trainer.fit_score(train, seed=0, val_index=val)
    losses = {}
    for lr in grid:
        single = make_trainer(config(tiny_causal_dir, lr=lr, patience=1, epochs=2))
        single.prepare(PAIRS)
        history = single._train_best_lr(train, val, single.config_, 0)
        losses[lr] = min(h["eval_loss"] for h in history)
    assert result.metrics["lr"] == min(losses, key=losses.get)
    with pytest.raises(ValueError, match="lr_grid"):
        config(tiny_causal_dir, lr_grid=grid, patience=0, eval_fraction=0.0).check()


def test_finetuned_rm_trains_with_each_objective(tiny_causal_dir):
    from rmlens.attribution import bias_features

    bias = bias_features(PAIRS, ["len_words"])
    for name in ("label_smoothing", "poe", "reweight", "group_dro"):
        trainer = make_trainer(config(tiny_causal_dir, objective=name, epochs=1), bias=bias)
        trainer.prepare(PAIRS)
        result = trainer.fit_score(np.arange(8), seed=0, val_index=np.arange(8, 12))
        assert np.isfinite(result.r_chosen).all(), name


def test_train_rm_with_a_bias_objective_and_its_refusals(tiny_causal_dir, tmp_path, capsys):
    from rmlens.attribution import bias_features
    from rmlens.cli import main

    bias = bias_features(PAIRS, ["len_words"])
    cfg = config(tiny_causal_dir, objective="reweight", eval_fraction=0.25, patience=1, epochs=2)
    rm = train(PAIRS, cfg, out=tmp_path / "rw", bias=bias, quiet=True)
    assert np.isfinite(rm.score(list(PAIRS.prompt), list(PAIRS.chosen))).all()
    history = json.loads((tmp_path / "rw" / "history.json").read_text())
    assert "eval_loss" in history[0]  # early stopping watched the weighted validation loss
    with pytest.raises(InputError, match="needs bias features"):
        train(PAIRS, config(tiny_causal_dir, objective="poe"), out=tmp_path / "poe", quiet=True)
    data = tmp_path / "pairs.jsonl"
    PAIRS.to_json(data, orient="records", lines=True)
    args = ["train", "--data", str(data), "--model", str(tiny_causal_dir), "--device", "cpu",
            "--max-length", "40", "--epochs", "1", "--batch-size", "4", "--quiet"]  # fmt: skip
    assert main([*args, "--out", str(tmp_path / "cli"), "--objective", "poe",
                 "--bias-features", "len_words,model"]) == 0  # fmt: skip
    assert "bias feature model left out" in capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "dro"), "--objective", "group_dro",
                 "--dro-groups", "nope"]) == 2  # fmt: skip
    assert "--dro-groups" in capsys.readouterr().err


def test_finetuned_runs_train_with_the_audit_guided_weights(tiny_causal_dir):
    """Each run's weights come from a frozen paired audit of its own training pairs on the
    base model's features, recorded in the run's metrics."""
    for name in ("low_margin", "complementary", "curate"):
        trainer = make_trainer(config(tiny_causal_dir, objective=name, epochs=1))
        trainer.prepare(PAIRS)
        result = trainer.fit_score(np.arange(8), seed=0, val_index=np.arange(8, 12))
        assert np.isfinite(result.r_chosen).all(), name
        metrics = result.metrics
        assert metrics["objective"] == name
        assert metrics["guide"]["margin_from"] == "data"  # PAIRS has a margin column
        assert "objective_active" in metrics and "weight_cv" in metrics
        if name != "low_margin":
            assert metrics["guide"]["folds"] == 4  # 4 users among the training pairs


def test_train_records_the_loss_weights_beside_the_rm(tiny_causal_dir, tmp_path):
    from rmlens.backbones import featurize
    from rmlens.rewards._base_model import load_base
    from rmlens.rewards._guided import margin_quantile
    from rmlens.rewards._head_fit import loss_weights

    cfg = config(tiny_causal_dir, objective="low_margin", eval_fraction=0.25, epochs=1)
    train(PAIRS, cfg, out=tmp_path / "lm", quiet=True)
    table = pd.read_parquet(tmp_path / "lm" / "loss_weights.parquet")
    record = json.loads((tmp_path / "lm" / "loss_weights.json").read_text())
    assert len(table) == 9 and record["objective"] == "low_margin"
    margin = PAIRS.set_index("id").margin[table.id].to_numpy()
    # by hand: w = (2 - q) / mean(2 - q), q the margins' rank quantiles among the 9 pairs
    raw = 2 - margin_quantile(margin)
    np.testing.assert_allclose(table.weight, raw / raw.mean())
    assert record["weight_max"] == pytest.approx(table.weight.max())
    # the same weights as loss_weights on the base model's frozen features
    f = featurize(load_base(cfg), PAIRS.set_index("id").loc[table.id].reset_index(),
                  cache_dir=False, quiet=True)  # fmt: skip
    weights, _, _ = loss_weights(cfg, f.chosen, f.rejected, margin)
    np.testing.assert_allclose(table.weight, weights)
    assert load_rm_folder_ok(tmp_path / "lm")


def load_rm_folder_ok(folder) -> bool:
    from rmlens.hub import load_rm

    return np.isfinite(load_rm(folder).score_pairs(PAIRS)[0]).all()


def test_implicit_rms_refuse_the_guided_objectives():
    with pytest.raises(ValueError, match="for an implicit RM"):
        TrainConfig(rm_kind="implicit", objective="curate").check()


def test_train_and_the_audits_runs_share_their_defaults():
    """One regime (issue 58): the audit's runs differ only in choosing their rate from a grid
    and in validating on whole groups, which an audit owns (``eval_fraction`` unread)."""
    from rmlens.memorization import AuditConfig

    mine, runs = TrainConfig().to_dict(), AuditConfig().train.to_dict()
    assert {k for k in mine if mine[k] != runs[k]} == {"lr_grid", "eval_fraction"}
    assert (mine["epochs"], mine["patience"], mine["lr"], mine["eval_fraction"]) == (4, 1, 3e-4,
                                                                                      0.2)


def test_train_chooses_its_rate_on_its_evaluation_split(tiny_causal_dir, tmp_path):
    grid = (1e-4, 5e-2)
    cfg = config(tiny_causal_dir, epochs=2, lr_grid=grid, eval_fraction=0.25, patience=1)
    train(PAIRS, cfg, out=tmp_path / "rm", quiet=True)
    history = json.loads((tmp_path / "rm" / "history.json").read_text())
    assert history and all("eval_loss" in h for h in history)
    assert not (tmp_path / "rm" / "checkpoints").exists()
    losses = {}
    for lr in grid:  # each rate alone, on the same split: the kept one has the lower loss
        alone = make_trainer(config(tiny_causal_dir, epochs=2, lr=lr, eval_fraction=0.25,
                                    patience=1)).fit(PAIRS, quiet=True)  # fmt: skip
        losses[lr] = min(h["eval_loss"] for h in alone.history_)
    assert history[0]["lr_chosen"] == min(losses, key=losses.get)
    # pairs given apart replace the split: every pair trains, and the record says so
    train(PAIRS.iloc[:9], cfg.replace(lr_grid=()), out=tmp_path / "given",
          eval_data=PAIRS.iloc[9:], quiet=True)  # fmt: skip
    record = json.loads((tmp_path / "given" / "train.json").read_text())
    assert record["train_config"]["eval_fraction"] == 0.0 and record["n_train"] == 9
    with pytest.raises(InputError, match="--eval-fraction 0 --patience 0"):
        make_trainer(config(tiny_causal_dir, eval_fraction=0.0, patience=1)).fit(PAIRS)
