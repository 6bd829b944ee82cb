"""The contract every trainer follows, frozen (``frozen.py``) and fine-tuned (``finetune.py``).

Light on purpose (numpy only): the configs that subclass modules define are read by the
command line without torch or pandas.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rmlens._base import Params
from rmlens._errors import InputError, RmlensWarning
from rmlens._params import Config
from rmlens.rewards.objectives import objective_of


@dataclass
class RunScores:
    """Rewards of every pair from one run's RM, and its training metrics.

    With paired counterfactuals (a trainer prepared with ``groups``): ``p`` is
    sigmoid(r+ - r-) of every usable pair under the run's RM and ``p_cf`` under the RM with
    the pair's group removed (if the run trained on it) or added (if it held it out), NaN
    for the run's validation pairs (neither in nor out: no counterfactual).
    """

    r_chosen: np.ndarray  # (n_pairs,)
    r_rejected: np.ndarray  # (n_pairs,)
    metrics: dict
    model: Any = None  # the run's RM, saved beside its scores when it has ``save(folder)``
    p: np.ndarray | None = None  # (n_pairs,)
    p_cf: np.ndarray | None = None  # (n_pairs,)


class Trainer(Params):
    """One way of training reward models: a config, ``fit`` once, or one RM per audit run.

    Every trainer is built as ``Trainer(config, **where_from)`` (``config``: its mode's
    config dataclass; keyword-only arguments say where the model and extra inputs come
    from) and offers two uses.

    **Once:** ``fit(pairs, ...)`` trains one RM and returns ``self``; the fitted RM (a
    :class:`~rmlens.rewards.RewardModel`: texts in, rewards out) is ``rm_`` and
    ``score(pairs)`` gives its ``(r_chosen, r_rejected)``.

    **Per run** (what ``rmlens.memorization.audit`` asks of a trainer):

    ``prepare(pairs, *, quiet=False, groups=None, check_exact=0) -> kept``
        Get ready to train on ``pairs`` (a frozen backbone encodes every text here, a
        fine-tuned one tokenizes); return the (n_pairs,) bool mask of usable pairs. A trainer
        whose ``counterfactuals`` is set also takes ``groups`` (n_pairs,), the labels whose
        removal or addition each run's paired counterfactuals are of, and ``check_exact``,
        the groups per run to refit exactly as a check.
    ``fit_score(train_index, *, seed, val_index=None) -> RunScores``
        Train an RM on the prepared pairs at ``train_index`` and score every prepared pair.
        ``val_index``: validation pairs, never trained on, that the trainer may use for
        choices such as early stopping (an audit carves them from the run's own training
        groups, never from its held-out groups, which would leak into TG).
    ``counterfactuals``
        How runs give paired counterfactuals (``"newton"``, ``"last-layer"``) or None.

    ``get_params`` and ``set_params`` (``rmlens._base.Params``) read and change the
    config's fields.
    """

    config_class: ClassVar[type[Config]]
    config: Config

    @property
    def counterfactuals(self) -> str | None:
        """How runs give paired counterfactuals (``"newton"``, ``"last-layer"``) or None."""
        return None

    def fit(self, pairs, **kwargs) -> Trainer:
        """Train one RM on ``pairs``; the fitted RM is ``rm_``.

        Parameters
        ----------
        pairs : DataFrame
            The pair table.
        **kwargs
            What the trainer's kind also takes (evaluation pairs, ``quiet``, ...).

        Returns
        -------
        Trainer
            ``self``, fitted.
        """
        raise NotImplementedError

    def prepare(self, pairs, *, quiet: bool = False, groups=None, check_exact: int = 0):
        """Get ready to train on ``pairs``, once per audit (see the class docstring).

        Parameters
        ----------
        pairs : DataFrame
            All pairs of the audit.
        quiet : bool, default=False
            No progress bar.
        groups : array-like of shape (n_pairs,), optional
            Labels whose removal or addition each run's paired counterfactuals are of.
        check_exact : int, default=0
            Groups per run refitted exactly as a check.

        Returns
        -------
        ndarray of shape (n_pairs,), bool
            The usable pairs.
        """
        raise NotImplementedError

    def fit_score(
        self, train_index: np.ndarray, *, seed: int, val_index: np.ndarray | None = None
    ) -> RunScores:
        """Train an RM on the prepared pairs at ``train_index``; score every prepared pair.

        Parameters
        ----------
        train_index : ndarray of int
            Positions of the run's training pairs.
        seed : int
            The run's seed.
        val_index : ndarray of int, optional
            Validation pairs, never trained on, for choices such as early stopping.

        Returns
        -------
        RunScores
            The run's rewards of every pair, its metrics and its RM.
        """
        raise NotImplementedError

    def score(self, pairs) -> tuple[np.ndarray, np.ndarray]:
        """(r_chosen, r_rejected) of ``pairs``, each (n_pairs,), under the fitted ``rm_``.

        Parameters
        ----------
        pairs : DataFrame
            A pair table with ``prompt``, ``chosen`` and ``rejected``.

        Returns
        -------
        r_chosen, r_rejected : ndarray of shape (n_pairs,)
            The rewards; an unfitted trainer is a RuntimeError.
        """
        if not hasattr(self, "rm_"):
            raise RuntimeError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' first."
            )
        return self.rm_.score_pairs(pairs)


def objective_inputs(config, pairs, bias) -> tuple[np.ndarray | None, ...]:
    """The bias feature differences (n_pairs, k) and group labels (n_pairs,) that the
    objective of ``config`` (a ``HeadConfig`` or ``TrainConfig``) reads, else None: the
    groups from the column ``dro_groups`` (default ``user_id``), which must exist for a
    ``group_column`` ``required`` objective (``group_dro``); for an ``or-prompt`` one (the
    nested audit of ``complementary`` and ``curate``) a complete column, else (no
    ``dro_groups`` set) the prompt, as an audit groups such data."""
    objective = objective_of(config)
    dphi = groups = None
    if objective.reads_bias:
        if bias is None:
            raise InputError(
                f"objective {config.objective!r} needs bias features: pass `bias`="
                "rmlens.attribution.bias_features(pairs, config.bias_features)"
            )
        dphi = np.asarray(bias, dtype=float)
        if dphi.ndim != 2 or len(dphi) != len(pairs):
            raise InputError(
                f"`bias`: expected ({len(pairs)}, k) values, one row per pair; got "
                f"shape {dphi.shape}"
            )
    if objective.group_column is None:
        return dphi, groups
    column = config.dro_groups or "user_id"
    if objective.group_column == "or-prompt":
        if column in pairs and pairs[column].notna().all():
            return dphi, pairs[column].astype(str).to_numpy()
        if config.dro_groups is None:  # no users: one group per prompt, as the audit's
            return dphi, pairs["prompt"].map(str).to_numpy()
    if column not in pairs:
        raise InputError(
            f"`dro_groups`: objective {config.objective} needs a group column; no column "
            f"'{column}' in the data (columns: {', '.join(map(str, pairs))})"
        )
    return dphi, pairs[column].astype(str).to_numpy()


def inside_outside(n: int, kept, train_index, val_index) -> tuple[np.ndarray, np.ndarray]:
    """A run's training pairs, and the usable pairs it holds out (validation: neither)."""
    inside = np.zeros(n, dtype=bool)
    inside[train_index] = True
    outside = np.asarray(kept, dtype=bool) & ~inside
    outside[val_index] = False
    return inside, outside


def eval_split(index: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Hold out ``fraction`` of the pairs at ``index`` to evaluate each epoch.

    The one rule of ``train`` and of an audit run without validation groups, so a
    one-checkpoint audit finds the same split again.

    Parameters
    ----------
    index : ndarray of int
        The usable pairs.
    fraction : float
        The share held out (``TrainConfig.eval_fraction``); 0 holds out none.
    seed : int
        The training seed.

    Returns
    -------
    train, eval : ndarray of int
        Disjoint parts of ``index``; ``eval`` has at least one pair when ``fraction`` > 0
        and ``train`` keeps at least one.

    Examples
    --------
    >>> train, held = eval_split(np.arange(10), 0.2, seed=0)
    >>> len(train), len(held)
    (8, 2)
    """
    if not fraction or len(index) < 2:
        return index, index[:0]
    order = np.random.default_rng([seed, 1]).permutation(len(index))
    n_eval = min(len(index) - 1, max(1, int(round(fraction * len(index)))))
    return index[order[n_eval:]], index[order[:n_eval]]


def group_codes(groups) -> np.ndarray:
    """Integer codes of the group labels, in the order of the labels sorted as strings.

    Parameters
    ----------
    groups : array-like of shape (n_pairs,)
        Each pair's group label.

    Returns
    -------
    ndarray of shape (n_pairs,), int
    """
    return np.unique(np.asarray(groups, dtype=str), return_inverse=True)[1]


def without_evaluation(cfg, has_evals: bool, n_train: int):
    """``cfg`` as ``fit`` trains it: unchanged with evaluation pairs; without them, early
    stopping and a choice of rates are refused in one line naming the flags, except on a
    training set too small to split (one pair), trained every epoch with a warning."""
    if has_evals or not (cfg.patience or len(cfg.lr_grid) > 1):
        return cfg
    if n_train < 2:
        warnings.warn(f"{n_train} training pair, too few for an evaluation split: trained on "
                      f"it for every epoch at lr {cfg.lr:g}, without early stopping",
                      RmlensWarning, stacklevel=3)  # fmt: skip
        return cfg.replace(patience=0, lr_grid=())
    raise InputError(
        f"no evaluation pairs (eval_fraction {cfg.eval_fraction:g} of {n_train} pairs, no "
        "eval_data): early stopping (patience) and the choice among lr_grid need them. Give "
        "--eval-fraction > 0 or --eval-data, or train on every pair for every epoch at one "
        "rate: --eval-fraction 0 --patience 0, no --lr-grid"
    )


def warn_dropped(n: int, what: str = "pairs") -> None:
    """Say how many pairs were left out (never silently, DESIGN.md 2)."""
    if n:
        warnings.warn(
            f"{n} {what} dropped: chosen and rejected are the same tokens as the model reads "
            "them (cut to `max_length`, or different only where the tokenizer does not look, "
            "such as letter case)",
            RmlensWarning, stacklevel=3,
        )  # fmt: skip


def inactive_message(objective: str, activities: list[dict]) -> str | None:
    """One line saying in how many runs the objective's mechanism stayed inactive, and why.

    Parameters
    ----------
    objective : str
        The objective's name.
    activities : list of dict
        Each run's activity check (``active`` and, when inactive, ``why``).

    Returns
    -------
    str or None
        The line, with the first inactive run's reason; None when it acted in every run.
    """
    idle = [a for a in activities if not a.get("active", True)]
    if not idle:
        return None
    where = "" if len(activities) == 1 else f" in {len(idle)} of {len(activities)} runs"
    return (f"objective {objective}: its mechanism stayed inactive{where}: {idle[0]['why']}; "
            "these RMs are Bradley-Terry RMs in effect")  # fmt: skip


def warn_inactive(objective: str, activities: list[dict]) -> None:
    """Warn when an objective did nothing (DESIGN.md 2: a run whose mechanism stayed
    inactive says so)."""
    message = inactive_message(objective, activities)
    if message:
        warnings.warn(message, RmlensWarning, stacklevel=3)


def dropped_ids(ids, train_index, weights) -> dict:
    """``{"dropped_ids": [...]}``: the training pairs an objective gave weight 0 (``curate``
    drops the pairs not learned even when trained on), for a run's record; {} when none."""
    if ids is None or weights is None:
        return {}
    zero = np.asarray(train_index, dtype=int)[np.asarray(weights) == 0]
    return {"dropped_ids": [str(i) for i in np.asarray(ids)[zero]]} if len(zero) else {}


def lr_factor(step: int, total: int, warmup: int, schedule: str) -> float:
    """Multiplier of the base learning rate at optimizer step ``step`` (0-based)."""
    if step < warmup:
        return (step + 1) / (warmup + 1)  # linear warmup
    progress = (step - warmup) / max(1, total - warmup)
    if schedule == "linear":
        return max(0.0, 1.0 - progress)
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    return 1.0


def adamw(net, cfg, objective=None):
    """AdamW over ``net``'s trainable weights: the body at ``cfg.lr``, the head (and a
    ``poe`` bias expert of ``objective``) at ``cfg.head_lr``."""
    import torch

    head, body = [], []
    for name, p in net.named_parameters():
        if p.requires_grad:
            (head if name.startswith("head.") else body).append(p)
    if objective is not None:
        head += list(objective.parameters())
    groups = [{"params": body, "lr": cfg.lr, "base_lr": cfg.lr},
              {"params": head, "lr": cfg.head_lr, "base_lr": cfg.head_lr}]  # fmt: skip
    return torch.optim.AdamW([g for g in groups if g["params"]], weight_decay=cfg.weight_decay)
