import math

import numpy as np
import pytest
import torch

from rmlens.rewards import (
    FrozenHeadTrainer,
    HeadConfig,
    HeadRM,
    bradley_terry_loss,
    centering_loss,
    plackett_luce_loss,
)
from rmlens.rewards._metrics import pairwise_accuracy


def test_bradley_terry_by_hand():
    rc, rr = torch.tensor([2.0, 0.0]), torch.tensor([1.0, 0.5])
    expected = (-math.log(1 / (1 + math.exp(-1))) - math.log(1 / (1 + math.exp(0.5)))) / 2
    assert float(bradley_terry_loss(rc, rr)) == pytest.approx(expected)
    m = torch.tensor([1.0, 0.0])
    expected_m = (math.log(2) - math.log(1 / (1 + math.exp(0.5)))) / 2
    assert float(bradley_terry_loss(rc, rr, m)) == pytest.approx(expected_m)


def test_margin_of_shape_b1_does_not_broadcast():
    rc, rr = torch.tensor([[2.0], [0.0]]), torch.tensor([1.0, 0.5])
    m = torch.tensor([[1.0], [0.0]])
    flat = bradley_terry_loss(rc.reshape(-1), rr, m.reshape(-1))
    assert float(bradley_terry_loss(rc, rr, m)) == pytest.approx(float(flat))


def test_centering_and_plackett_luce():
    assert float(centering_loss(torch.tensor([1.0, 2.0]), torch.tensor([1.0, -2.0]))) == 2.0
    s = torch.tensor([[3.0, 1.0, 0.0]])
    expected = (math.log(math.exp(3) + math.exp(1) + 1) - 3) + (math.log(math.exp(1) + 1) - 1)
    assert float(plackett_luce_loss(s)) == pytest.approx(expected)
    two = torch.tensor([[2.0, 1.0]])
    assert float(plackett_luce_loss(two)) == pytest.approx(
        float(bradley_terry_loss(torch.tensor([2.0]), torch.tensor([1.0])))
    )
    padded = torch.tensor([[2.0, 1.0, 9.0]])
    mask = torch.tensor([[True, True, False]])
    assert float(plackett_luce_loss(padded, mask)) == pytest.approx(float(plackett_luce_loss(two)))


@pytest.mark.parametrize("head", ["linear", "mlp"])
def test_head_learns_and_is_deterministic(head, tmp_path):
    rng = np.random.default_rng(0)
    w = rng.normal(size=16)
    x1, x2 = rng.normal(size=(300, 16)), rng.normal(size=(300, 16))
    better = (x1 @ w > x2 @ w)[:, None]
    xc, xr = np.where(better, x1, x2), np.where(better, x2, x1)
    cfg = HeadConfig(head=head, epochs=100, lr=3e-3, dropout=0.1, seed=3)
    rm = FrozenHeadTrainer(cfg).fit_features(xc[:200], xr[:200]).head_
    assert pairwise_accuracy(rm.score_features(xc[200:]), rm.score_features(xr[200:])) > 0.85
    again = FrozenHeadTrainer(cfg).fit_features(xc[:200], xr[:200]).head_
    np.testing.assert_array_equal(rm.score_features(xc), again.score_features(xc))
    loaded = HeadRM.load(rm.save(tmp_path / "head"))
    np.testing.assert_allclose(loaded.score_features(xc), rm.score_features(xc), rtol=0, atol=1e-6)


def test_head_params_checked_and_unfitted():
    with pytest.raises(ValueError, match="The 'lr' parameter of HeadConfig must be a float > 0"):
        FrozenHeadTrainer(HeadConfig(lr=-1)).fit_features(np.zeros((2, 3)), np.ones((2, 3)))
    with pytest.raises(RuntimeError, match="not fitted yet"):
        HeadRM(HeadConfig()).score_features(np.zeros((1, 3)))
    with pytest.raises(RuntimeError, match="FrozenHeadTrainer instance is not fitted yet"):
        FrozenHeadTrainer().score(None)


def test_bradley_terry_is_defined_once():
    from rmlens.rewards.finetune import TrainConfig
    from rmlens.rewards.losses import bt, ranking_loss

    rc, rr, m = torch.tensor([2.0, 0.0, -1.0]), torch.tensor([1.0, 0.5, 1.0]), torch.ones(3)
    assert torch.equal(bradley_terry_loss(rc, rr, m), bt(rc - rr, m).mean())
    rewards, valid = torch.stack([rc, rr], 1), torch.ones(3, 2, dtype=torch.bool)
    loss = ranking_loss(rewards, valid, m, TrainConfig(use_margin=True))
    assert torch.equal(loss, bradley_terry_loss(rc, rr, m))


def test_trainers_share_one_contract_and_params_from_their_config():
    from rmlens.rewards import (
        ExplicitRMTrainer,
        ImplicitRMTrainer,
        TrainConfig,
        Trainer,
    )

    for cls, config in ((FrozenHeadTrainer, HeadConfig(epochs=7)),
                        (ExplicitRMTrainer, TrainConfig(epochs=3)),
                        (ImplicitRMTrainer, TrainConfig(rm_kind="implicit"))):  # fmt: skip
        trainer = cls(config)
        assert isinstance(trainer, Trainer)
        assert trainer.get_params() == {f: getattr(config, f) for f in config.to_dict()}
        assert trainer.set_params(seed=4) is trainer and trainer.config.seed == 4
        assert trainer.config.to_dict() == {**config.to_dict(), "seed": 4}
        for name in ("fit", "score", "prepare", "fit_score"):
            assert callable(getattr(trainer, name))
    with pytest.raises(ValueError, match="'lr' parameter of HeadConfig"):
        FrozenHeadTrainer().set_params(lr="fast")
    assert ImplicitRMTrainer().config.rm_kind == "implicit"


def test_every_rm_kind_is_a_reward_model():
    from rmlens.hub import EnsembleRM, SequenceClassifierRM
    from rmlens.rewards import ExplicitHeadRM, RewardModel, TunedRM

    for cls in (ExplicitHeadRM, TunedRM, EnsembleRM, SequenceClassifierRM):
        assert issubclass(cls, RewardModel)
        assert cls.score is not RewardModel.score  # each scores texts its own way
    assert not hasattr(HeadRM, "score") and hasattr(HeadRM, "score_features")


def test_a_head_needs_training_pairs():
    from rmlens._errors import InputError

    with pytest.raises(InputError, match="no training pairs"):
        FrozenHeadTrainer().fit_features(np.zeros((0, 3)), np.zeros((0, 3)))
