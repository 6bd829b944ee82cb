"""The fine-tuned mode's trainers, one per method (their ``TrainConfig``, defined in
``rmlens.rewards._config``, is re-exported here).

:class:`ExplicitRMTrainer` (a linear head on the pooled hidden state) and
:class:`ImplicitRMTrainer` (the DPO reward beta * log pi/pi_ref of a causal LM) train from the
base weights with LoRA or fully, on pairs (Bradley-Terry, optional margin and centering, or
an objective of ``rmlens.rewards.objectives``) or rankings (Plackett-Luce). Both follow the
trainer contract
(``rmlens.rewards._trainer_base.Trainer``): ``fit(pairs)`` sets ``rm_`` (a ``TunedRM``), and
``prepare`` + ``fit_score`` (``_finetune_per_run``) train one RM per audit run (``rmlens memorize
--mode finetune``).

The epoch loop is ``_finetune_loop.train_loop`` (its checkpoints ``_checkpoint``); the
networks are built and reset in ``_nets``, the examples tokenized in ``_packing``, the
objective's extras and loss weights made in ``_tuned_inputs``, a run's counterfactuals in
``_pair_gradients``: all imported when a trainer runs, so the command line reads
``TrainConfig`` (``rmlens.rewards._config`` imports nothing heavy) without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rmlens._errors import InputError
from rmlens._params import ParamError
from rmlens.backbones import resolve_format, warn_truncation
from rmlens.rewards._config import TrainConfig, resolve_device
from rmlens.rewards._finetune_per_run import PerRun
from rmlens.rewards._metrics import not_learned
from rmlens.rewards._trainer_base import (
    Trainer,
    objective_inputs,
    warn_dropped,
)
from rmlens.rewards.objectives import objective_of

if TYPE_CHECKING:
    import pandas as pd

    from rmlens.backbones import Backbone
    from rmlens.rewards._tuned import TunedRM

# The settings that shape the network: a trainer is set up once for them
_STRUCTURE = ("model", "rm_kind", "finetune", "lora_r", "lora_alpha", "lora_dropout",
              "lora_targets", "beta", "max_length", "format", "packing", "device",
              "bf16")  # fmt: skip


class _TunedTrainer(PerRun, Trainer):
    """What both fine-tuned trainers share: set-up and ``fit``; the per-run protocol is
    ``_finetune_per_run.PerRun``."""

    config_class = TrainConfig
    rm_kind = ""

    def __init__(
        self, config: TrainConfig | None = None, *, backbone: Backbone | None = None, bias=None
    ):
        self.config = config if config is not None else TrainConfig(rm_kind=self.rm_kind)
        self.backbone = backbone
        self.bias = bias

    def _setup(self) -> None:
        """Load the base model and build the network, once per network shape."""
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._nets import base_state, disable_dropout, load_base
        from rmlens.rewards._tuned import runtime_for

        cfg = self.config.check()
        if cfg.rm_kind != self.rm_kind:
            raise ParamError("rm_kind", "TrainConfig", f"{self.rm_kind!r} for "
                             f"{type(self).__name__}", cfg.rm_kind)  # fmt: skip
        self.config_ = cfg
        structure = {k: getattr(cfg, k) for k in _STRUCTURE}
        if getattr(self, "structure_", None) == structure:
            self.config_ = self._resolved(cfg)
            return
        if hasattr(self, "net_"):
            raise ValueError(
                f"{type(self).__name__} was set up for {self.structure_}; a new model, "
                "adapter shape, length, device or precision needs a new trainer"
            )
        self.structure_ = structure
        bb = self.backbone or load_base(cfg)
        if self.backbone is not None and cfg.format != "auto":  # the config's choice wins
            bb.format = resolve_format(cfg.format, bb.tokenizer, bb.kind)
        disable_dropout(bb.model)
        device = resolve_device(cfg.device)
        bb.model.to(device)
        self.base_ = bb
        self.config_ = self._resolved(cfg)
        self.runtime_ = runtime_for(bb, cfg, device)
        self._base_state = base_state(bb, cfg)
        self.net_ = self._make_net(bb, cfg).to(device)

    def _resolved(self, cfg: TrainConfig) -> TrainConfig:
        """``cfg`` with the format its base model resolved (chat, raw or pair), so the RM's
        saved ``train_config`` says how its texts were tokenized."""
        return cfg if cfg.format == self.base_.format else cfg.replace(format=self.base_.format)

    def _reset(self, seed: int) -> None:
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._nets import reset

        reset(self.net_, self._base_state, seed)

    def _examples(self, data: pd.DataFrame):
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._packing import examples_of

        return examples_of(data, self.base_, self.config_, self.rm_kind == "implicit")

    def _extras(self, index: np.ndarray):
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._tuned_inputs import extras_at

        return extras_at(self.config_.objective, self.bias_, self.groups_, index)

    def _split_eval(self, index: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        return eval_split(index, self.config_.eval_fraction, seed)

    def _prepare_refs(self, examples) -> None:
        """Implicit RMs: reference log-probs, computed once per example."""

    # -- once ---------------------------------------------------------------------------
    def fit(
        self,
        data: pd.DataFrame,
        *,
        eval_data: pd.DataFrame | None = None,
        checkpoint_dir=None,
        quiet: bool = False,
    ):
        """Train an RM from the base weights.

        Parameters
        ----------
        data : DataFrame
            A pair table (``prompt``, ``chosen``, ``rejected``, optional ``margin``) or, with
            ``loss="plackett-luce"``, rankings (``prompt``, ``responses``, ``scores``).
        eval_data : DataFrame, optional
            Evaluated each epoch; default: ``eval_fraction`` of ``data``.
        checkpoint_dir : path, optional
            Checkpoints go here; an interrupted ``fit`` with the same data and config resumes.
        quiet : bool, default=False
            No progress bar.

        Returns
        -------
        self, with ``rm_`` (a :class:`TunedRM`), ``history_`` (metrics per epoch) and
        ``n_dropped_`` (pairs that truncation made identical, left out, with a warning),
        ``format_`` (chat, raw or pair) and ``truncation_`` (what ``max_length`` cut: the
        pairs cut are warned about), ``eval_truncation_`` the same of ``eval_data`` (None
        without it), ``not_learned_`` (``rewards._metrics.not_learned``: why the RM did not
        learn, None when it did).
        """
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._checkpoint import checkpoint_key
        from rmlens.rewards._finetune_loop import train_loop
        from rmlens.rewards._packing import examples_truncation
        from rmlens.rewards._tuned_inputs import loss_weights_table

        self._setup()
        cfg = self.config_
        examples, kept = self._examples(data)
        self.format_ = self.base_.format
        self.truncation_ = examples_truncation(examples, self.base_.max_length)
        self.eval_truncation_ = None
        warn_truncation(self.truncation_, len(examples))
        self.n_dropped_ = int((~kept).sum())
        warn_dropped(self.n_dropped_)
        if not kept.any():
            raise InputError("no usable training pairs (all identical after truncation)")
        self.bias_, self.groups_ = objective_inputs(cfg, data, self.bias)
        train_index, eval_index = self._split_eval(np.flatnonzero(kept), cfg.seed)
        self._reset(cfg.seed)  # the base weights: what the guided weights' features read
        self.loss_weights_ = loss_weights_table(self, data, train_index, eval_index)
        train = [examples[i] for i in train_index]
        evals, eval_extras = [examples[i] for i in eval_index] or None, self._extras(eval_index)
        if eval_data is not None:
            if not objective_of(cfg).plain:
                raise InputError(
                    f"objective {cfg.objective!r}: `eval_data` from a second file is not "
                    "supported; use `eval_fraction` instead"
                )
            ev, ev_kept = self._examples(eval_data)
            self.eval_truncation_ = examples_truncation(ev, self.base_.max_length)
            warn_truncation(self.eval_truncation_, len(ev), what="evaluation pairs")
            warn_dropped(int((~ev_kept).sum()), what="evaluation pairs")
            evals = [ex for ex, k in zip(ev, ev_kept) if k] or None
        self._prepare_refs(train + (evals or []))
        weights, guide = (None, None)
        if self.loss_weights_ is not None:
            weights = self.loss_weights_.weight.to_numpy()
            guide = self.loss_weights_.attrs.get("guide")
        self.history_ = train_loop(
            self.net_, train, cfg, self.runtime_, eval_examples=evals,
            extras=self._extras(train_index), eval_extras=eval_extras,
            checkpoint_dir=checkpoint_dir, quiet=quiet,
            fingerprint=checkpoint_key(cfg, self.base_.identity, data, eval_data),
            weights=weights, guide=guide,
        )  # fmt: skip
        last = self.history_[-1] if self.history_ else {}
        self.not_learned_ = not_learned(
            last.get("train_accuracy", float("nan")), len(train),
            [h.get("train_loss", float("nan")) for h in self.history_],
        )  # fmt: skip
        self.rm_ = self._make_rm()
        return self

    def learning_advice(self) -> str | None:
        """One line naming an RM that did not learn (``not_learned_``) and the settings
        to change; None when it learned."""
        if not getattr(self, "not_learned_", None):
            return None
        cfg = self.config_
        knobs = [f"`epochs` (now {cfg.epochs})", f"`lr` (now {cfg.lr:g})"]
        if cfg.finetune == "lora":
            knobs.append(f"`lora_r` (now {cfg.lora_r})")
        return (f"the RM did not learn: {self.not_learned_}; raise " + ", ".join(knobs[:-1])
                + f" or {knobs[-1]}")

    def _make_rm(self) -> TunedRM:
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._nets import trainable_state
        from rmlens.rewards._tuned import TunedRM

        return TunedRM(self.net_, self.base_, self.config_, weights=trainable_state(self.net_))


class ExplicitRMTrainer(_TunedTrainer):
    """Explicit RM: a linear head on the pooled hidden state, backbone tuned by LoRA or fully.

    Parameters
    ----------
    config : TrainConfig, optional
        ``rm_kind`` must be ``"explicit"``.
    backbone : Backbone, optional
        An already loaded backbone (``load_backbone``); trained in place.
    bias : DataFrame of shape (n_pairs, k), optional
        Shortcut feature differences of the pairs, for ``poe`` and ``reweight``.

    Examples
    --------
    >>> trainer = ExplicitRMTrainer(TrainConfig(model="minilm", epochs=1))  # doctest: +SKIP
    >>> rm = trainer.fit(pairs).rm_                                        # doctest: +SKIP
    >>> rm.score(["2+2?"], ["4"])                                          # doctest: +SKIP
    """

    rm_kind = "explicit"

    def _make_net(self, bb: Backbone, cfg: TrainConfig):
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._nets import explicit_net

        return explicit_net(bb, cfg)


class ImplicitRMTrainer(_TunedTrainer):
    """Implicit RM: r = beta * (log pi(y|x) - log pi_ref(y|x)) of a causal LM (DPO loss).

    The reference is frozen: the LoRA policy with its adapters off, or a copy of the base
    weights for full fine-tuning. Its log-probs are computed once per pair.

    Parameters
    ----------
    config : TrainConfig, optional
        ``rm_kind`` must be ``"implicit"``.
    backbone : Backbone, optional
        A causal LM loaded with ``AutoModelForCausalLM``; trained in place.
    bias : DataFrame of shape (n_pairs, k), optional
        Shortcut feature differences of the pairs, for ``poe`` and ``reweight``.
    """

    rm_kind = "implicit"

    def _make_net(self, bb: Backbone, cfg: TrainConfig):
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._nets import implicit_net

        return implicit_net(bb, cfg)

    def _prepare_refs(self, examples) -> None:
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._implicit import reference_logps

        reference_logps(self.net_, examples, self.runtime_, self.config_.batch_size)


def eval_split(index: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``fraction`` of the pairs at ``index`` held out to evaluate each epoch: (train, eval).
    The one rule of ``train`` and of an audit run without validation groups, so a
    one-checkpoint audit finds the same split again."""
    if not fraction or len(index) < 2:
        return index, index[:0]
    order = np.random.default_rng([seed, 1]).permutation(len(index))
    n_eval = min(len(index) - 1, max(1, int(round(fraction * len(index)))))
    return index[order[n_eval:]], index[order[:n_eval]]


def make_trainer(
    config: TrainConfig | None = None, *, backbone: Backbone | None = None, bias=None
) -> _TunedTrainer:
    """The trainer a config asks for: :class:`ExplicitRMTrainer` or :class:`ImplicitRMTrainer`.

    Parameters
    ----------
    config : TrainConfig, optional
        The fine-tuning settings; default ``TrainConfig()``. ``config.rm_kind`` picks the class.
    backbone : Backbone, optional
        A loaded backbone to fine-tune; default loaded from ``config.model``.
    bias : ndarray of shape (n_pairs, k), optional
        The pairs' shortcut feature differences, for the ``poe`` and ``reweight``
        objectives.

    Returns
    -------
    ExplicitRMTrainer or ImplicitRMTrainer
        The trainer, not yet fitted.
    """
    config = config or TrainConfig()
    cls = ImplicitRMTrainer if config.rm_kind == "implicit" else ExplicitRMTrainer
    return cls(config, backbone=backbone, bias=bias)
