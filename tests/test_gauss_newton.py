"""Gauss-Newton influence through a fine-tuned RM's trained parameters: per-pair gradients
against autograd, the pair-space (Woodbury) solve against the step written out by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy.special import expit

from rmlens.influence import (
    gauss_newton_counterfactuals,
    last_layer_counterfactuals,
    pair_gradients,
)
from rmlens.influence._pair_gradients import _lora_layers, trainable_linears
from rmlens.rewards import TrainConfig, make_trainer
from test_paired import word_pairs


def _case(n=12, q=20, seed=0):
    rng = np.random.default_rng(seed)
    jac = rng.normal(0.2, 1, (n, q))
    d = rng.normal(0.3, 1, n)
    groups = np.array([0, 0, 0, 1, 2, 3, 4, 5, 5, 6, 7, 7])[:n]
    inside = np.zeros(n, dtype=bool)
    inside[:7] = True
    outside = ~inside
    outside[-1] = False  # a validation pair: neither in nor out
    return jac, d, groups, inside, outside


@pytest.mark.parametrize("q", [20, 4])  # pair space (q > |T| = 7) and parameter space
def test_gauss_newton_step_by_hand(q):
    jac, d, groups, inside, outside = _case(q=q)
    p, p_cf, lambdas = gauss_newton_counterfactuals(jac, d, groups, inside, outside,
                                                    damping=(0.3, 3.0))  # fmt: skip
    s = expit(d) * (1 - expit(d))
    scale = float(s[inside] @ (jac[inside] ** 2).sum(1)) / min(q, inside.sum())  # tr(G) / .
    np.testing.assert_allclose(lambdas, scale * np.array([0.3, 3.0]))
    np.testing.assert_allclose(p, expit(d))
    for k, lam in enumerate(lambdas):
        H = (jac[inside] * s[inside, None]).T @ jac[inside] + lam * np.eye(q)
        for i in np.flatnonzero(inside | outside):
            rows = np.flatnonzero((groups == groups[i]) & (inside | outside))
            sign = -1 if inside[i] else 1
            jg = jac[rows]
            changed = H + sign * (jg * s[rows, None]).T @ jg
            step = -sign * np.linalg.solve(changed, jg.T @ (expit(d[rows]) - 1))
            assert p_cf[i, k] == pytest.approx(expit(d[i] + jac[i] @ step), abs=1e-10)
    assert np.isnan(p_cf[~(inside | outside)]).all()


def test_gauss_newton_of_a_linear_rm_is_the_last_layer_step():
    """d = z . u is linear in u: J = z, and both steps coincide at the same lambda."""
    jac, _, groups, inside, outside = _case(q=20)
    u = np.random.default_rng(3).normal(0, 0.3, 20)
    _, ll, ll_lambdas = last_layer_counterfactuals(jac, u, groups, inside, outside,
                                                   damping=(0.5,))  # fmt: skip
    relative = 0.5 * inside.sum() / 20  # the two grids' scales: tr(G)/d and tr(G)/|T|
    _, gn, gn_lambdas = gauss_newton_counterfactuals(jac, jac @ u, groups, inside, outside,
                                                     damping=(relative,))  # fmt: skip
    np.testing.assert_allclose(gn_lambdas, ll_lambdas)
    np.testing.assert_allclose(gn, ll, atol=1e-10)


def _prepared(model_dir, **overrides):
    pairs = word_pairs(10, 5)
    cfg = TrainConfig(model=str(model_dir), epochs=1, batch_size=4, lr_grid=(), device="cpu",
                      max_length=24, **overrides)  # fmt: skip
    trainer = make_trainer(cfg)
    trainer.prepare(pairs, quiet=True)
    torch.manual_seed(1)
    with torch.no_grad():  # adapters away from B = 0, so every block has a gradient
        for param in trainer.net_.parameters():
            if param.requires_grad:
                param.add_(0.1 * torch.randn_like(param))
    return trainer


def _autograd_rows(trainer) -> np.ndarray:
    net, rows = trainer.net_, []
    linears, other = trainable_linears(net)
    params = [p for _, m in linears for p in (m.weight, m.bias) if p is not None
              and p.requires_grad] if not other else [  # fmt: skip
        p for p in net.parameters() if p.requires_grad]
    net.eval()
    for i in range(len(trainer.examples_)):
        net.zero_grad(set_to_none=True)
        r = net(trainer.runtime_.batch(trainer.examples_, [i]))
        (r[0, 0] - r[0, 1]).backward()
        # an unread layer (the pooler) has no gradient: zeros
        grads = [(p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
                 for p in params]  # fmt: skip
        rows.append(torch.cat(grads).numpy())
    return np.stack(rows)


def _batches(trainer, batch_size: int = 4) -> list[np.ndarray]:
    """The examples' batches as a run takes them: by length, longest first."""
    from rmlens.rewards._packing import length_batches

    return length_batches([ex.packed_length for ex in trainer.examples_], batch_size)


@pytest.mark.parametrize("which", ["encoder", "causal"])
def test_pair_gradients_are_autograd_per_pair(which, tiny_encoder_dir, tiny_causal_dir):
    from rmlens.rewards._nets import score_examples

    trainer = _prepared(tiny_encoder_dir if which == "encoder" else tiny_causal_dir)
    if which == "causal":  # flat batches, whatever their length
        trainer.runtime_ = replace(trainer.runtime_, mode="flat")
    r, jac = pair_gradients(trainer.net_, trainer.examples_, trainer.runtime_,
                            batches=_batches(trainer))
    expected = _autograd_rows(trainer)
    scored = score_examples(trainer.net_, trainer.examples_, trainer.runtime_, batch_size=4)
    np.testing.assert_allclose(r, scored, atol=1e-5)  # the same pass gives the rewards
    assert jac.shape == expected.shape and np.abs(expected).max() > 0
    np.testing.assert_allclose(jac, expected, atol=1e-5, rtol=1e-4)
    if which == "causal":  # a flat batch (summed per span), and one row per example
        _, rowwise = pair_gradients(trainer.net_, trainer.examples_,
                                    replace(trainer.runtime_, mode="packed"),
                                    batches=_batches(trainer))  # fmt: skip
        np.testing.assert_allclose(rowwise, expected, atol=1e-5, rtol=1e-4)
    # a sketch keeps the pairs' inner products (what the solve reads), up to its noise
    _, sketch = pair_gradients(trainer.net_, trainer.examples_, trainer.runtime_,
                               batches=_batches(trainer), dim=jac.shape[1] // 2)  # fmt: skip
    exact, approx = jac @ jac.T, sketch @ sketch.T
    assert np.corrcoef(exact.ravel(), approx.ravel())[0, 1] > 0.9


@pytest.mark.parametrize("which", ["encoder", "causal"])
def test_pair_gradients_read_fused_lora_layers(which, tiny_encoder_dir, tiny_causal_dir,
                                               monkeypatch):  # fmt: skip
    """The adapters are read at their peft layer, so fine-tuning's fused layers stay fused
    while the per-pair gradients are taken, with the same numbers."""
    from rmlens.rewards import _fast

    trainer = _prepared(tiny_encoder_dir if which == "encoder" else tiny_causal_dir)
    linears = trainable_linears(trainer.net_)[0]
    adapters = [name for name, _ in linears if ".lora_" in name]
    assert adapters and set(_lora_layers(trainer.net_, linears)) == set(adapters)
    calls = []
    apply = _fast._LoraLinear.apply
    monkeypatch.setattr(_fast._LoraLinear, "apply", lambda *a: calls.append(1) or apply(*a))
    with _fast.fused_layers(trainer.net_):
        r, jac = pair_gradients(trainer.net_, trainer.examples_, trainer.runtime_,
                                batches=_batches(trainer))  # fmt: skip
    assert len(calls) >= len(adapters) // 2
    np.testing.assert_allclose(jac, _autograd_rows(trainer), atol=1e-5, rtol=1e-4)


def test_full_finetuning_takes_its_gradients_pair_by_pair(tiny_encoder_dir):
    trainer = _prepared(tiny_encoder_dir, finetune="full")
    assert trainable_linears(trainer.net_)[1]  # embeddings and norms train too
    r, jac = pair_gradients(trainer.net_, trainer.examples_, trainer.runtime_,
                            batches=_batches(trainer))
    np.testing.assert_allclose(jac, _autograd_rows(trainer), atol=1e-5, rtol=1e-4)
    _, sketch = pair_gradients(trainer.net_, trainer.examples_, trainer.runtime_,
                               batches=_batches(trainer), dim=jac.shape[1] // 4)  # fmt: skip
    assert sketch.shape[1] == jac.shape[1] // 4
    exact, approx = jac @ jac.T, sketch @ sketch.T
    assert np.corrcoef(exact.ravel(), approx.ravel())[0, 1] > 0.9


def test_gauss_newton_through_the_last_block_reads_its_adapters_and_the_head(tiny_causal_dir):
    from rmlens.influence import DAMPING, through_last
    from rmlens.rewards._finetune_per_run import influence_scores
    from rmlens.rewards._paired import bt_terms
    from rmlens.rewards._trainer_base import inside_outside

    trainer = _prepared(tiny_causal_dir, influence_blocks=1)
    net, cfg, n = trainer.net_, trainer.config_, len(trainer.examples_)
    groups, fit, evals = np.arange(n) // 2, np.arange(6), np.array([], dtype=int)
    flags = [p.requires_grad for p in net.parameters()]
    r, (_, p_cf, _) = influence_scores(net, trainer.examples_, trainer.kept_, trainer.runtime_,
                                       cfg, groups, fit, evals)  # fmt: skip
    assert [p.requires_grad for p in net.parameters()] == flags  # restored after the pass
    through_last(net, 1)
    read = [name for name, _ in trainable_linears(net)[0]]
    jac = _autograd_rows(trainer)
    for param, flag in zip(net.parameters(), flags):
        param.requires_grad_(flag)
    assert read and all(".layers.1." in name or name.startswith("head") for name in read)
    inside, outside = inside_outside(n, trainer.kept_, fit, evals)
    _, target = bt_terms(cfg, None)
    _, expected, _ = gauss_newton_counterfactuals(jac, r[:, 0] - r[:, 1], groups, inside,
                                                  outside, target=target, damping=DAMPING)
    np.testing.assert_allclose(p_cf, expected, atol=1e-5)
    _, (_, every, _) = influence_scores(net, trainer.examples_, trainer.kept_, trainer.runtime_,
                                        cfg.replace(influence_blocks=0), groups, fit, evals)
    assert np.abs(every - p_cf).max() > 1e-3  # a different estimator
