"""Objectives whose per-pair loss weights come from the base model's frozen features, made
before training: low_margin, complementary, curate (``rmlens.rewards._guided``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import numpy as np

from rmlens.rewards.objectives._base import Objective


class _FrozenWeights(Objective):
    """Per-pair loss weights c_i BT(d_i) made before training from a Bradley-Terry logistic
    head on the base model's frozen features (``rmlens.rewards._guided``): the margin quantile
    q_i, and with a nested audit the in-run TM_i and TG_i."""

    weighted = True
    frozen_weights = True
    nested_audit: ClassVar[bool] = True

    def pair_weights(self, config, q: np.ndarray, tm: np.ndarray, tg: np.ndarray, raw):
        """The training pairs' weights from their margins ``raw`` (n,) and, with
        ``nested_audit``, their in-run TM and TG (n,)."""
        raise NotImplementedError

    def setup(self, m, train, seed, weights):
        import numpy as np

        if weights is None:
            raise ValueError(f"objective {self.name!r} needs the training pairs' `weights`")
        m.weights_ = np.array(weights, dtype=float)


class LowMargin(_FrozenWeights):
    """w_i ∝ 2 - q_i, q_i the pair's margin as a rank quantile: the no-audit baseline of the
    audit-guided objectives."""

    name = "low_margin"
    help = "loss weights 2 - q, q the margin's rank quantile: the no-audit baseline"
    nested_audit = False

    def words(self, config) -> str:
        return "; objective low_margin (weights 2 - margin quantile)"

    def pair_weights(self, config, q, tm, tg, raw):
        # lazy: scipy loads only when this runs (the command line imports this module)
        from rmlens.rewards._guided import low_margin_weights

        return low_margin_weights(raw)


class Complementary(_FrozenWeights):
    """w_i ∝ (2 - q_i) (1 - TG_i)^gamma, TG from a nested paired audit inside the run's
    training groups: complementary memorization (the paper's proposal)."""

    name = "complementary"
    help = ("weights (2 - q)(1 - TG)^gamma, TG from a nested paired audit inside the run's "
            "training groups")  # fmt: skip
    fields = ("gamma", "dro_groups", "guide_folds")
    group_column = "or-prompt"

    def words(self, config) -> str:
        return (f"; objective complementary (weights from a {config.guide_folds}-fold nested "
                f"audit of each run's training groups, gamma {config.gamma:g})")

    def pair_weights(self, config, q, tm, tg, raw):
        # lazy: scipy loads only when this runs (the command line imports this module)
        from rmlens.rewards._guided import complementary_weights

        return complementary_weights(tm, tg, raw, config.gamma)


class Curate(_FrozenWeights):
    """w_i = c where the nested audit finds pair i not learned even when trained on (in-run
    TM_i < 1/2), else 1 (c = ``curate_weight``; 0 drops the pair; not renormalized)."""

    name = "curate"
    help = ("weight --curate-weight for the pairs that audit finds not learned even when "
            "trained on: in-run TM < 0.5")  # fmt: skip
    fields = ("dro_groups", "guide_folds", "curate_weight")
    group_column = "or-prompt"

    def words(self, config) -> str:
        return (f"; objective curate (weight {config.curate_weight:g} for pairs a "
                f"{config.guide_folds}-fold nested audit finds not learned)")

    def pair_weights(self, config, q, tm, tg, raw):
        # lazy: scipy loads only when this runs (the command line imports this module)
        from rmlens.rewards._guided import curate_weights

        return curate_weights(tm, config.curate_weight)

    def inactive_why(self, m, config, extras):
        dropped = int((m.weights_ < 1).sum())
        if config.curate_weight == 1 or not dropped:
            return ("no training pair was down-weighted (none was not learned: in-run TM < 0.5)"
                    if config.curate_weight < 1 else "`curate_weight` is 1")  # fmt: skip
        return None
