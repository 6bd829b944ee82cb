"""What each run of an audit trains: the trainers' defaults, and the regime in words.

``audit_head`` and ``audit_train`` are the defaults of :class:`AuditConfig`'s ``head`` and
``train`` (so of ``rmlens memorize``'s options); :func:`regime_words` is ``config.json``'s
``regime``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmlens.rewards.finetune import TrainConfig
from rmlens.rewards.frozen import HeadConfig

if TYPE_CHECKING:
    from rmlens.memorization._config import AuditConfig


def audit_head() -> HeadConfig:
    """Frozen runs of an audit: the convex head, whose paired counterfactuals are exact up
    to about 1e-6 (its Newton steps against exact refits)."""
    return HeadConfig(head="logistic")


def audit_train() -> TrainConfig:
    """Fine-tuned runs of an audit: LoRA that fits its training pairs, as a practitioner's RM.

    Epochs and learning rate are chosen per run by the validation rule (validation groups
    carved from the run's own training groups, never its held-out groups): each rate of
    ``lr_grid`` trains from the base weights with early stopping (patience 1, best epoch
    kept), and the rate with the lowest validation loss is kept. Budget: 2 rates x at most 4
    epochs per run.
    """
    return TrainConfig(epochs=4, patience=1, lr=3e-4, lr_grid=(1e-4, 3e-4), head_lr=2e-3)


def objective_words(trainer: HeadConfig | TrainConfig) -> str:
    """The objective of a ``HeadConfig`` or ``TrainConfig`` in words (none for ``bt``)."""
    name = trainer.objective
    if name == "label_smoothing":
        return f"; objective label_smoothing (eps {trainer.smoothing:g})"
    if name in ("poe", "reweight"):
        extra = f", gamma {trainer.gamma:g}" if name == "reweight" else ""
        return f"; objective {name} (bias features {', '.join(trainer.bias_features)}{extra})"
    if name == "group_dro":
        groups = trainer.dro_groups or "user_id"
        step = "default" if trainer.dro_step is None else f"{trainer.dro_step:g}"
        return f"; objective group_dro over '{groups}' (step {step})"
    if name == "complementary":
        return (f"; objective complementary (weights from a {trainer.guide_folds}-fold nested "
                f"audit of each run's training groups, gamma {trainer.gamma:g})")
    if name == "curate":
        return (f"; objective curate (weight {trainer.curate_weight:g} for pairs a "
                f"{trainer.guide_folds}-fold nested audit finds not learned)")
    if name == "low_margin":
        return "; objective low_margin (weights 2 - margin quantile)"
    return ""


def regime_words(config: AuditConfig) -> str:
    """The training regime of every run of ``config``, in words (``config.json``'s ``regime``)."""
    if config.mode == "frozen" and config.head.convex:
        grid = ", ".join(f"{x:g}" for x in config.head.l2_grid)
        what = (
            f"frozen {config.model} features, one logistic head per run: linear "
            "Bradley-Terry with an L2 penalty solved to its optimum (Newton's method), "
            f"lambda from {{{grid}}}"
        )
    elif config.mode == "frozen":
        h = config.head
        what = (
            f"frozen {config.model} features, one {h.head} head per run: AdamW lr {h.lr:g}, "
            f"weight decay {h.weight_decay:g}, batch {h.batch_size}, at most {h.epochs} epochs"
        )
    else:
        t = config.train
        what = (
            f"{config.model} fine-tuned ({t.finetune}, {t.rm} RM) per run: lr {t.lr:g}, "
            f"head lr {t.head_lr:g}, weight decay {t.weight_decay:g}, at most {t.epochs} "
            "epochs"
        )
    what += objective_words(config.head if config.mode == "frozen" else config.train)
    if config.mode == "frozen" and config.head.convex:
        if not config.validates:
            return what + "; the largest lambda (no validation pairs)"
        return what + (
            f", the one with the lowest validation loss on validation pairs, "
            f"{config.val_fraction:g} of each run's training groups (never its held-out "
            "groups); a run trains only on its other training pairs, and its validation "
            "pairs count neither in nor out"
        )
    if not config.validates:
        return what + "; every epoch trained (no early stopping, no validation pairs)"
    return what + (
        f"; early stopping with patience {config.patience} on the validation loss of "
        f"validation pairs, {config.val_fraction:g} of each run's training groups (never its "
        "held-out groups), keeping the best epoch's weights; a run takes gradients only "
        "on its other training pairs, and its validation pairs count neither in nor out"
    )
