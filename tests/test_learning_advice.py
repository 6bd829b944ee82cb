"""What the fine-tuned trainers say about a run that did not learn, or learned with its head
alone (issue 47): a backbone learning rate too small for the adapters to move."""

from __future__ import annotations

import pytest

from rmlens._errors import RmlensWarning
from rmlens.hub import train
from rmlens.rewards import ExplicitRMTrainer
from rmlens.rewards._metrics import STILL
from test_finetune import PAIRS, config


def fit(path, **kw) -> ExplicitRMTrainer:
    return ExplicitRMTrainer(config(path, **kw)).fit(PAIRS, quiet=True)


def test_a_run_that_learned_through_its_adapters_gets_no_advice(tiny_causal_dir):
    trainer = fit(tiny_causal_dir, epochs=2)
    assert trainer.moved_["body"] > STILL and trainer.moved_["head"] > STILL
    assert trainer.learning_advice() is None


def test_a_head_on_frozen_features_is_named(tiny_causal_dir, tmp_path):
    cfg = config(tiny_causal_dir, lr=1e-9, head_lr=0.1, epochs=4)
    with pytest.warns(RmlensWarning, match="only the head learned") as seen:
        train(PAIRS, cfg, out=tmp_path / "rm", quiet=True)
    (message,) = [str(w.message) for w in seen if issubclass(w.category, RmlensWarning)]
    assert "adapters did not move" in message and "`lr` 1e-09" in message
    assert "frozen features" in message and "did not learn" not in message


def test_advice_names_head_lr_when_the_head_did_not_move(tiny_causal_dir):
    trainer = fit(tiny_causal_dir, lr=1e-9, head_lr=1e-9, epochs=2)
    assert trainer.not_learned_ and trainer.moved_["head"] < STILL
    advice = trainer.learning_advice()
    assert advice.startswith("the RM did not learn")
    assert "`head_lr` (now 1e-09)" in advice and "adapters did not move" in advice


def test_advice_leaves_head_lr_out_when_the_head_moved(tiny_causal_dir):
    trainer = fit(tiny_causal_dir, lr=1e-9, head_lr=2e-3, epochs=2)
    assert trainer.not_learned_ and trainer.moved_["head"] > STILL
    advice = trainer.learning_advice()
    assert "`head_lr`" not in advice and "`lr` (now 1e-09)" in advice


def test_full_fine_tuning_measures_its_weights_against_the_base(tiny_causal_dir):
    trainer = fit(tiny_causal_dir, finetune="full", lr=1e-9, head_lr=0.1, epochs=4)
    assert 0 < trainer.moved_["body"] < STILL
    assert "backbone weights did not move" in trainer.learning_advice()
