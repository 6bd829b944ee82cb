import math

import numpy as np
import pytest
import torch

from rmlens.rewards import (
    HeadConfig,
    HeadRM,
    bradley_terry_loss,
    centering_loss,
    pairwise_accuracy,
    plackett_luce_loss,
)


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
    rm = HeadRM(cfg).fit(xc[:200], xr[:200])
    assert pairwise_accuracy(rm.score(xc[200:]), rm.score(xr[200:])) > 0.85
    again = HeadRM(cfg).fit(xc[:200], xr[:200])
    np.testing.assert_array_equal(rm.score(xc), again.score(xc))
    loaded = HeadRM.load(rm.save(tmp_path / "head"))
    np.testing.assert_allclose(loaded.score(xc), rm.score(xc), rtol=0, atol=1e-6)


def test_head_params_checked_and_unfitted():
    with pytest.raises(ValueError, match="The 'lr' parameter of HeadConfig must be a float > 0"):
        HeadRM(HeadConfig(lr=-1)).fit(np.zeros((2, 3)), np.ones((2, 3)))
    with pytest.raises(RuntimeError, match="not fitted yet"):
        HeadRM().score(np.zeros((1, 3)))
