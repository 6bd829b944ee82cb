"""Objectives against shortcuts through a bias-only model on the pairs' shortcut feature
differences: product of experts and reweighting."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import torch

from rmlens.rewards.objectives._base import INACTIVE_EXPERT, Objective, bt


class _BiasOnly(Objective):
    """An objective with a bias-only model p = sigmoid(w . dphi / scale) on the pairs'
    shortcut feature differences (``bias_features``), fitted on the training pairs alone."""

    fields = ("bias_features",)
    reads_bias = True

    @staticmethod
    def bias_scale(dphi: np.ndarray) -> np.ndarray:
        """Root mean square of each bias feature difference (1 where it is always 0): dphi
        is antisymmetric in chosen and rejected, so it is scaled, never centred.

        Parameters
        ----------
        dphi : ndarray of shape (n, k)
            Shortcut feature differences.

        Returns
        -------
        ndarray of shape (k,)
        """
        import numpy as np

        rms = np.sqrt(np.mean(np.asarray(dphi, dtype=float) ** 2, axis=0))
        return np.where(rms > 0, rms, 1.0)

    @staticmethod
    def fit_bias_model(dphi: np.ndarray, scale: np.ndarray, seed: int = 0) -> np.ndarray:
        """Weights w of the bias-only model p(chosen wins) = sigmoid(w . dphi / scale):
        logistic regression without intercept on both orientations of every pair (dphi
        labelled 1, -dphi labelled 0), so symmetric in chosen and rejected; L2 penalty C = 1.

        Parameters
        ----------
        dphi : ndarray of shape (n, k)
            Shortcut feature differences.
        scale : ndarray of shape (k,)
            Their scale (:meth:`bias_scale`).
        seed : int, default 0
            The solver's random state.

        Returns
        -------
        ndarray of shape (k,)
        """
        import numpy as np
        from sklearn.linear_model import LogisticRegression

        z = dphi / scale
        if not len(z) or not np.any(z):
            return np.zeros(dphi.shape[1])
        x = np.concatenate([z, -z])
        y = np.r_[np.ones(len(z)), np.zeros(len(z))]
        model = LogisticRegression(fit_intercept=False, C=1.0, random_state=seed, max_iter=1000)
        return model.fit(x, y).coef_[0]

    def words(self, config) -> str:
        return f"; objective {self.name} (bias features {', '.join(config.bias_features)})"

    def setup(self, m, train, seed, weights):
        import torch

        if train.dphi is None:
            raise ValueError(f"objective {self.name!r} needs bias features (dphi) of its pairs")
        dphi = train.dphi.numpy()
        m.register_buffer("scale", torch.as_tensor(self.bias_scale(dphi), dtype=torch.float32))
        m.bias_coef_ = self.fit_bias_model(dphi, m.scale.numpy(), seed)

    def _bias_weights(self, m):
        return (m.bias_coef_ / m.scale.cpu().numpy()).tolist()


class ProductOfExperts(_BiasOnly):
    """BT(d_main + d_bias): a product of experts, p ~ sigmoid(d_main) * sigmoid(d_bias) in
    log-odds, so the main RM is pushed to explain what the bias-only expert cannot (Clark et
    al. 2019, He et al. 2019; ODIN's length head, Chen et al. 2024, is the case dphi =
    length). The expert d_bias = w . dphi / scale starts at the bias-only model's fit and
    trains with the RM; only d_main is the RM afterwards."""

    name = "poe"
    help = "product of experts with a bias-only model on --bias-features, only the main RM kept"

    @staticmethod
    def loss(d_main: torch.Tensor, d_bias: torch.Tensor, margin=None) -> torch.Tensor:
        """BT(d_main + d_bias - m), per pair.

        Parameters
        ----------
        d_main, d_bias : torch.Tensor of shape (n,)
            The RM's and the bias expert's log-odds.
        margin : torch.Tensor of shape (n,), optional
            Margins m.

        Returns
        -------
        torch.Tensor of shape (n,)
        """
        return bt(d_main + d_bias, margin)

    def setup(self, m, train, seed, weights):
        import torch
        from torch import nn

        super().setup(m, train, seed, weights)
        # warm start at the bias-only fit (Clark et al. 2019 train it first), then trained
        # jointly with the RM, as ODIN trains its length head
        m.bias = nn.Linear(train.dphi.shape[1], 1, bias=False)
        with torch.no_grad():
            m.bias.weight.copy_(torch.as_tensor(m.bias_coef_)[None])

    def expert(self, m, dphi: torch.Tensor) -> torch.Tensor:
        """The bias expert's log-odds w . dphi / scale.

        Parameters
        ----------
        m : ObjectiveModule
            The objective's state (its ``bias`` layer and ``scale``).
        dphi : torch.Tensor of shape (n, k)
            Shortcut feature differences.

        Returns
        -------
        torch.Tensor of shape (n,)
        """
        return m.bias(dphi / m.scale).squeeze(-1)

    def per_pair(self, m, d, extras):
        return self.loss(d, self.expert(m, extras.dphi), extras.margin)

    def convex_terms(self, m, z, c, extras):
        # The bias features dphi / scale appended to z, penalized by EXPERT_PENALTY times
        # lambda: an expert as penalized as the main head shares the shortcut with it, since
        # the main head's hundreds of coordinates express it at a lower L2 cost (the main
        # head's reward-length correlation fell 11% below bt's on synthetic pairs, and 78%
        # with the expert left free, benchmarks/guided.py).
        import numpy as np

        # lazy: scipy loads only when this runs (the command line imports this module)
        from rmlens.influence import EXPERT_PENALTY

        dphi = extras.dphi.double().numpy() / m.scale.double().numpy()
        penalty = np.r_[np.ones(z.shape[1]), np.full(dphi.shape[1], EXPERT_PENALTY)]
        return np.hstack([z, dphi]), c, penalty

    def inactive_why(self, m, config, extras):
        import torch

        with torch.no_grad():
            e = self.expert(m, extras.dphi)
        rms = float(e.pow(2).mean().sqrt()) if len(e) else 0.0
        if rms < INACTIVE_EXPERT:
            return (f"the bias expert stayed near 0 (RMS log-odds {rms:.3f} over the training "
                    "pairs): the main RM was left the shortcuts")  # fmt: skip
        return None

    def _bias_weights(self, m):
        return (m.bias.weight.detach()[0] / m.scale).cpu().tolist()


class Reweight(_BiasOnly):
    """(1 - sigmoid(d_bias))^gamma BT(d), normalized to mean 1 over the training pairs:
    pairs the bias-only model already gets right count less (example reweighting, Utama et
    al. 2020; the focal form of Karimi Mahabadi et al. 2020)."""

    name = "reweight"
    help = ("loss weights (1 - sigmoid(d_bias))^gamma from a bias-only model fitted on the "
            "run's training pairs")  # fmt: skip
    fields = ("bias_features", "gamma")
    weighted = True
    weights_of_any_pair = True

    @staticmethod
    def raw(d_bias: np.ndarray, gamma: float) -> np.ndarray:
        """(1 - sigmoid(d_bias))^gamma, before normalization.

        Parameters
        ----------
        d_bias : ndarray of shape (n,)
            The bias-only model's log-odds.
        gamma : float
            The exponent.

        Returns
        -------
        ndarray of shape (n,)
        """
        import numpy as np

        return (1.0 - 1.0 / (1.0 + np.exp(-np.asarray(d_bias, dtype=float)))) ** gamma

    @classmethod
    def weights(cls, d_bias: np.ndarray, gamma: float) -> np.ndarray:
        """:meth:`raw` normalized to mean 1 (all 1 where there is nothing to normalize).

        Parameters
        ----------
        d_bias : ndarray of shape (n,)
            The bias-only model's log-odds.
        gamma : float
            The exponent.

        Returns
        -------
        ndarray of shape (n,)
        """
        import numpy as np

        w = cls.raw(d_bias, gamma)
        return w / w.mean() if len(w) and w.mean() > 0 else np.ones_like(w)

    def words(self, config) -> str:
        return (f"; objective reweight (bias features {', '.join(config.bias_features)}, "
                f"gamma {config.gamma:g})")  # fmt: skip

    def setup(self, m, train, seed, weights):
        super().setup(m, train, seed, weights)
        m.weights_ = self.weights(m.d_bias_numpy(train.dphi.numpy()), m.gamma)

    def validation_loss(self, m, loss, extras):
        w = self.weights(m.d_bias_numpy(extras.dphi.cpu().numpy()), m.gamma)
        return float((loss.new_tensor(w) * loss).mean())

    def convex_start(self, m, extras):
        # the weights' normalizer: the mean raw weight over the training pairs (a pair added
        # by a counterfactual is weighted against the same mean)
        import numpy as np

        m.reweight_norm_ = float(np.mean(self.raw(m.d_bias_numpy(extras.dphi.numpy()), m.gamma)))

    def convex_terms(self, m, z, c, extras):
        return z, self.raw(m.d_bias_numpy(extras.dphi.numpy()), m.gamma) / m.reweight_norm_, None
