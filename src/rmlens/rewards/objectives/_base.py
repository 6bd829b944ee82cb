"""The base of every objective: Bradley-Terry's equation and behaviour, and the traits
the rest of rmlens asks (``rmlens.rewards.objectives``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import torch

INACTIVE_EXPERT = 0.1  # poe: RMS log-odds of the bias expert below this: it took nothing
INACTIVE_SPREAD = 0.05  # weighted objectives: weights' coefficient of variation below this
INACTIVE_DRO = 1.05  # group_dro: largest q below this times uniform: q never moved
DRO_ROUNDS = 20  # group_dro on the convex head: exponentiated-gradient rounds per lambda


def bt(d: torch.Tensor, margin: torch.Tensor | None = None) -> torch.Tensor:
    """Per-pair Bradley-Terry loss -log sigmoid(d - m), (n_pairs,) (Bradley & Terry 1952;
    margin as in Llama 2, Touvron et al. 2023).

    Parameters
    ----------
    d : torch.Tensor of shape (n,)
        Reward differences r+ - r-.
    margin : torch.Tensor of shape (n,), optional
        Margins m.

    Returns
    -------
    torch.Tensor of shape (n,)
        softplus(-(d - m)).
    """
    import torch.nn.functional as F

    if margin is not None:
        d = d - margin
    return F.softplus(-d)  # == -log sigmoid(d - m)


class Objective:
    """An objective's equation, losses, state, checks, record and traits (the base:
    Bradley-Terry's behaviour, which the subclasses change where they differ).

    Attributes
    ----------
    name : str
        The ``objective`` setting that selects it.
    help : str
        Its equation in a few words (the ``--objective`` help).
    fields : tuple of str
        The ``ObjectiveConfig`` fields it reads (the report shows them only under it).
    plain : bool
        Plain Bradley-Terry: the loops need no objective module at all.
    rankings : bool
        Defined for rankings too (``loss='plackett-luce'``).
    pair_logistic : bool
        The last layer of its RM solves the logistic problem of ``rmlens.influence``
        (targets and offsets aside), so last-layer and Gauss-Newton influence give its
        paired counterfactuals.
    reads_bias : bool
        Reads each pair's shortcut feature differences dphi (``bias_features``).
    group_column : {None, "required", "or-prompt"}
        Reads each pair's group: from ``dro_groups`` (default ``user_id``), which must exist
        (``required``), or else one group per prompt (``or-prompt``, as an audit groups).
    weighted : bool
        Trains with per-pair loss weights (the module's ``weights_``).
    frozen_weights : bool
        Those weights come from a head on the base model's frozen features, made before
        training (so only explicit RMs, which have such a head).
    weights_of_any_pair : bool
        The weights are a function of a pair, computed for any pair (a pair added by a
        counterfactual gets its own), not a list over the training pairs.
    """

    name: ClassVar[str] = "bt"
    help: ClassVar[str] = "Bradley-Terry"
    fields: ClassVar[tuple[str, ...]] = ()
    plain: ClassVar[bool] = False
    rankings: ClassVar[bool] = False
    pair_logistic: ClassVar[bool] = False
    reads_bias: ClassVar[bool] = False
    group_column: ClassVar[str | None] = None
    weighted: ClassVar[bool] = False
    frozen_weights: ClassVar[bool] = False
    weights_of_any_pair: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def words(self, config) -> str:
        """The objective in the words of ``config.json``'s ``regime`` (none for ``bt``).

        Parameters
        ----------
        config : ObjectiveConfig
            The settings it runs with.

        Returns
        -------
        str
            ``"; objective ..."`` or the empty string.
        """
        return ""

    def target(self, config) -> float:
        """The Bradley-Terry target of its logistic problem (1 but for label smoothing).

        Parameters
        ----------
        config : ObjectiveConfig
            The settings it runs with.

        Returns
        -------
        float
            The target t of -t log sigmoid(d) - (1 - t) log sigmoid(-d).
        """
        return 1.0

    def setup(self, m, train, seed: int, weights) -> None:
        """Give the module ``m`` this objective's state from the training pairs.

        Parameters
        ----------
        m : ObjectiveModule
            The module being built (``smoothing``, ``gamma``, ``dro_step`` already set).
        train : PairExtras
            The training pairs' margin, dphi and group.
        seed : int
            Seed of the bias-only model.
        weights : ndarray of shape (n_train,) or None
            The frozen-feature loss weights (``frozen_weights`` objectives).
        """

    def per_pair(self, m, d: torch.Tensor, extras) -> torch.Tensor:
        """Per-pair loss (n,) of the likelihood term.

        Parameters
        ----------
        m : ObjectiveModule
            The objective's state.
        d : torch.Tensor of shape (n,)
            Reward differences r+ - r-.
        extras : PairExtras
            The pairs' margins, bias features and groups.

        Returns
        -------
        torch.Tensor of shape (n,)
            The loss of each pair.
        """
        return bt(d, extras.margin)

    def reduce(self, m, loss: torch.Tensor, extras, weight) -> torch.Tensor:
        """The batch's training loss from its per-pair losses: their mean, weighted by
        ``weight`` for the ``weighted`` objectives.

        Parameters
        ----------
        m : ObjectiveModule
            The objective's state (updated in training mode where it moves).
        loss : torch.Tensor of shape (n,)
            :meth:`per_pair` of the batch.
        extras : PairExtras
            The batch's margins, bias features and groups.
        weight : torch.Tensor of shape (n,) or None
            The batch's loss weights (``weighted`` objectives).

        Returns
        -------
        torch.Tensor
            The scalar loss.
        """
        return (weight * loss).mean() if self.weighted else loss.mean()

    def validation_loss(self, m, loss: torch.Tensor, extras) -> float:
        """What early stopping watches, from the validation pairs' per-pair losses.

        Parameters
        ----------
        m : ObjectiveModule
            The objective's state.
        loss : torch.Tensor of shape (n,)
            :meth:`per_pair` of the validation pairs.
        extras : PairExtras
            Their margins, bias features and groups.

        Returns
        -------
        float
            The validation loss (the mean).
        """
        return float(loss.mean())

    def convex_terms(self, m, z, c, extras):
        """Its terms of the convex head's problem: the pairs' inputs ``z`` (n, d), loss
        weights ``c`` (n,) and per-coordinate L2 penalties (None: all 1).

        Parameters
        ----------
        m : ObjectiveModule
            The objective's state.
        z : ndarray of shape (n, d)
            Standardized feature differences.
        c : ndarray of shape (n,)
            Loss weights as given (1, or the training pairs' own).
        extras : PairExtras
            The pairs' margins, bias features and groups.

        Returns
        -------
        tuple
            ``(z, c, penalty)``.
        """
        return z, c, None

    def convex_start(self, m, extras) -> None:
        """Fix what the convex head's problem needs from the training pairs alone, before
        the path of L2 penalties (nothing but for ``reweight``).

        Parameters
        ----------
        m : ObjectiveModule
            The objective's state.
        extras : PairExtras
            The training pairs' margins, bias features and groups.
        """

    def convex_fit(self, m, codes):
        """A ``fit(problem, lam, w0, tol)`` of the convex head other than the plain
        L2-penalized optimum, or None (``group_dro``'s alternation).

        Parameters
        ----------
        m : ObjectiveModule
            The objective's state.
        codes : ndarray of shape (n_train,) or None
            The training pairs' group codes.

        Returns
        -------
        callable or None
        """
        return None

    def snapshot(self, m):
        """The state a convex path keeps with its best lambda (group_dro's q), or None.

        Parameters
        ----------
        m : ObjectiveModule
            The objective's state.
        """
        return None

    def restore(self, m, state) -> None:
        """Put back a :meth:`snapshot` (nothing to do for None).

        Parameters
        ----------
        m : ObjectiveModule
            The objective's state.
        state : object or None
            What :meth:`snapshot` returned.
        """

    def inactive_why(self, m, config, extras) -> str | None:
        """Why its mechanism did not act on the run's training pairs, or None when it did
        (DESIGN.md section 2: a run whose mechanism stayed inactive says so): loss weights
        with a coefficient of variation under ``INACTIVE_SPREAD``.

        Parameters
        ----------
        m : ObjectiveModule
            The trained objective's state.
        config : ObjectiveConfig
            The settings it ran with.
        extras : PairExtras or None
            The training pairs' margins, bias features and groups.

        Returns
        -------
        str or None
        """
        w = m.weights_
        if w is None:
            return None
        cv = float(w.std() / w.mean()) if len(w) and w.mean() > 0 else 0.0
        if cv < INACTIVE_SPREAD:
            return f"the loss weights are nearly uniform (coefficient of variation {cv:.3f})"
        return None

    def record(self, m) -> dict:
        """What the objective learned, for a run's metrics (JSON-ready).

        Parameters
        ----------
        m : ObjectiveModule
            The trained objective's state.

        Returns
        -------
        dict
            ``objective`` and, where they apply, ``bias_weights``, the loss weights'
            summary (``weight_min``, ``weight_median``, ``weight_max``, ``weight_cv``,
            ``n_zero_weight``, ...), ``dro_q`` and ``dro_q_max``, and ``guide`` (how the
            frozen-feature weights were made).
        """
        out: dict[str, Any] = {"objective": self.name}
        bias = self._bias_weights(m)
        if bias is not None:
            out["bias_weights"] = bias
        if m.weights_ is not None:
            # lazy: scipy loads only when this runs (the command line imports this module)
            from rmlens.rewards._guided import weight_summary

            out.update(weight_summary(m.weights_))
        out.update(self._state_record(m))
        if m.guide_:
            out["guide"] = dict(m.guide_)
        return out

    def _bias_weights(self, m) -> list | None:
        return None

    def _state_record(self, m) -> dict:
        return {}
