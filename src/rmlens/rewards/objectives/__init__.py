"""The training objectives of a reward model (DESIGN.md section 2), one class each.

Every objective is a loss on the reward differences d = r+ - r- of a run's training pairs
(m: the pair's margin, with ``use_margin``):

- :class:`BradleyTerry` ``bt``: BT(d) = -log sigmoid(d - m);
- :class:`LabelSmoothing` ``label_smoothing``: (1 - eps) BT(d) + eps BT(-d);
- :class:`ProductOfExperts` ``poe``: BT(d + w . dphi), w trained jointly, only d kept;
- :class:`Reweight` ``reweight``: (1 - sigmoid(d_bias))^gamma BT(d);
- :class:`GroupDRO` ``group_dro``: sum_g q_g BT_g(d), q moved toward the worst group;
- :class:`LowMargin`, :class:`Complementary`, :class:`Curate` (``low_margin``,
  ``complementary``, ``curate``): per-pair weights c_i BT(d_i) from the base model's frozen
  features, computed before training (``rmlens.rewards._guided``).

Each class holds its equation, its loss in the fine-tuning loop and for gradient-step heads
(:meth:`~Objective.per_pair`, :meth:`~Objective.reduce`), what early stopping watches
(:meth:`~Objective.validation_loss`), its terms in the convex head's problem
(:meth:`~Objective.convex_terms`, :meth:`~Objective.convex_fit`), its state
(:meth:`~Objective.setup`: the bias expert, the group weights, the loss weights), its
activity check (:meth:`~Objective.inactive_why`), its record (:meth:`~Objective.record`),
its words (:meth:`~Objective.words`), and its traits, which configs, trainers, audits and
reports ask instead of comparing names. Adding an objective is a subclass of
:class:`Objective` (the modules here group them by what they read) and its line in
``REGISTRY``.

The classes are stateless: the state of a training (bias expert, q, loss weights) lives on
the :class:`rmlens.rewards.losses.ObjectiveModule` that trains with it, passed as ``m``.
numpy and torch are imported inside the methods that compute, because configs, the command
line and the report read this module's traits and words at startup without them
(``rmlens --help`` in under half a second).
"""

from __future__ import annotations

from rmlens.rewards.objectives._base import (
    DRO_ROUNDS,
    INACTIVE_DRO,
    INACTIVE_EXPERT,
    INACTIVE_SPREAD,
    Objective,
    bt,
)
from rmlens.rewards.objectives._bias import ProductOfExperts, Reweight
from rmlens.rewards.objectives._groups import GroupDRO
from rmlens.rewards.objectives._pairwise import BradleyTerry, LabelSmoothing
from rmlens.rewards.objectives._weights import Complementary, Curate, LowMargin

__all__ = ["DRO_ROUNDS", "FIELDS", "INACTIVE_DRO", "INACTIVE_EXPERT", "INACTIVE_SPREAD",
           "OBJECTIVES", "REGISTRY", "BradleyTerry", "Complementary", "Curate", "GroupDRO",
           "LabelSmoothing", "LowMargin", "Objective", "ProductOfExperts", "Reweight", "bt",
           "names_where", "objective_help", "objective_of"]  # fmt: skip

REGISTRY: dict[str, type[Objective]] = {
    cls.name: cls
    for cls in (BradleyTerry, LabelSmoothing, ProductOfExperts, Reweight, GroupDRO, LowMargin,
                Complementary, Curate)  # fmt: skip
}
OBJECTIVES = tuple(REGISTRY)  # the names, in the order the help gives them
FIELDS = tuple(dict.fromkeys(f for cls in REGISTRY.values() for f in cls.fields))


def objective_of(config_or_name) -> Objective:
    """The objective a config (its ``objective``) or a name selects.

    Parameters
    ----------
    config_or_name : ObjectiveConfig or str
        A ``HeadConfig``, ``TrainConfig`` or objective name.

    Returns
    -------
    Objective
        An instance of its class.

    Raises
    ------
    ValueError
        An unknown name.
    """
    name = getattr(config_or_name, "objective", config_or_name)
    if name not in REGISTRY:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {name!r}")
    return REGISTRY[name]()


def objective_help() -> str:
    """The ``objective`` setting's help: each objective's name and equation."""
    parts = [f"{cls.name} ({cls.help})" for cls in REGISTRY.values()]
    return f"Training objective: {'; '.join(parts)}."


def names_where(trait: str, value=True) -> tuple[str, ...]:
    """The names of the objectives whose ``trait`` is ``value`` (for messages and lists).

    Parameters
    ----------
    trait : str
        A class attribute of :class:`Objective` (``pair_logistic``, ``reads_bias``, ...).
    value : object, default True
        The value it must have.

    Returns
    -------
    tuple of str
        Their names, in ``OBJECTIVES`` order.
    """
    return tuple(name for name, cls in REGISTRY.items() if getattr(cls, trait) == value)
