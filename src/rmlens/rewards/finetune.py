"""The fine-tuned mode's trainers, one per method, and their training loop (their
``TrainConfig``, defined in ``rmlens.rewards._config``, is re-exported here).

:class:`ExplicitRMTrainer` (a linear head on the pooled hidden state) and
:class:`ImplicitRMTrainer` (the DPO reward beta * log pi/pi_ref of a causal LM) train from the
base weights with LoRA or fully, on pairs (Bradley-Terry, optional margin and centering, or
an objective of ``rmlens.rewards.objectives``) or rankings (Plackett-Luce). Both follow the
trainer contract (``rmlens.rewards._trainer_base.Trainer``): ``fit(pairs)`` sets ``rm_`` (a
``TunedRM``), and ``prepare`` + ``fit_score`` (``_finetune_per_run``) train one RM per audit
run (``rmlens memorize --mode finetune``).

A training step reads in three files: this one (``_TunedTrainer._train``, ``_epochs`` and
``_step``), ``losses`` (``ranking_loss``) and the model wrapper ``_nets`` (the batch and the
network's rewards). Around it: ``_base_model`` builds and resets a run's network,
``_packing`` tokenizes the examples, ``_checkpoint`` saves and resumes, ``_tuned_inputs``
makes the objective's extras and loss weights. All are imported when a trainer runs, so the
command line reads ``TrainConfig`` (``rmlens.rewards._config`` imports nothing heavy)
without torch.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rmlens._errors import InputError
from rmlens._params import ParamError
from rmlens.backbones import resolve_format, warn_truncation
from rmlens.rewards._config import TrainConfig, resolve_device
from rmlens.rewards._finetune_per_run import PerRun
from rmlens.rewards._metrics import learning_advice, not_learned
from rmlens.rewards._trainer_base import (
    Trainer,
    adamw,
    eval_split,
    lr_factor,
    objective_inputs,
    warn_dropped,
    without_evaluation,
)
from rmlens.rewards.objectives import objective_of

if TYPE_CHECKING:
    import pandas as pd

    from rmlens.backbones import Backbone
    from rmlens.rewards._tuned import TunedRM

# The settings that shape the network: a trainer is set up once for them
_STRUCTURE = ("model", "rm_kind", "finetune", "lora_r", "lora_alpha", "lora_dropout",
              "lora_targets", "beta", "max_length", "format", "packing", "device",
              "precision")  # fmt: skip


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
        from rmlens.backbones import resolve_precision
        from rmlens.rewards._base_model import (
            base_state,
            disable_dropout,
            hold_frozen,
            load_base,
            make_net,
        )
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
        self.precision_ = resolve_precision(cfg.precision, device)
        if cfg.finetune == "lora":  # trained in full: fp32 weights under autocast
            hold_frozen(bb.model, self.precision_)
        bb.model.to(device)
        self.base_ = bb
        self.config_ = self._resolved(cfg)
        self.runtime_ = runtime_for(bb, cfg, device, self.precision_)
        self._base_state = base_state(bb, cfg)
        self.net_ = make_net(bb, cfg).to(device)

    def _resolved(self, cfg: TrainConfig) -> TrainConfig:
        """``cfg`` with its resolved format and precision, so the RM's saved ``train_config``
        says how its texts were tokenized and multiplied (a checkpoint resumes in its own)."""
        return cfg.replace(format=self.base_.format, precision=self.precision_)

    def _reset(self, seed: int) -> None:
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._base_model import reset

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
            Evaluated each epoch, for early stopping and the choice among ``lr_grid``;
            default: ``eval_fraction`` of ``data`` (given, every pair of ``data`` is trained).
        checkpoint_dir : path, optional
            Checkpoints go here; an interrupted ``fit`` with the same data and config resumes.
        quiet : bool, default=False
            No progress bar.

        Returns
        -------
        self, with ``rm_`` (a :class:`TunedRM`), ``history_`` (metrics per epoch of the rate
        kept, each with ``lr_chosen``), ``n_dropped_`` (pairs that truncation made identical,
        left out, with a warning), ``format_`` (chat, raw or pair) and ``truncation_`` (what
        ``max_length`` cut: the pairs cut are warned about), ``eval_truncation_`` the same of
        ``eval_data`` (None without it), ``not_learned_`` (``rewards._metrics.not_learned``:
        why the RM did not learn, None when it did).
        """
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._base_model import head_state, moved
        from rmlens.rewards._checkpoint import checkpoint_key
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
        train_index, eval_index = np.flatnonzero(kept), np.array([], dtype=int)
        if eval_data is None:  # pairs given apart replace the split
            train_index, eval_index = self._split_eval(train_index, cfg.seed)
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
        cfg = without_evaluation(cfg, bool(evals), len(train))
        self._prepare_refs(train + (evals or []))
        weights, guide = (None, None)
        if self.loss_weights_ is not None:
            weights = self.loss_weights_.weight.to_numpy()
            guide = self.loss_weights_.attrs.get("guide")
        head_start = head_state(self.net_)
        self.history_ = self._train_grid(
            train, evals, cfg, dict(extras=self._extras(train_index), eval_extras=eval_extras,
                                    weights=weights, guide=guide),
            checkpoint_dir=checkpoint_dir, quiet=quiet,
            fingerprint=checkpoint_key(cfg, self.base_.identity, data, eval_data),
        )  # fmt: skip
        last = self.history_[-1] if self.history_ else {}
        self.not_learned_ = not_learned(
            last.get("train_accuracy", float("nan")), len(train),
            [h.get("train_loss", float("nan")) for h in self.history_],
        )  # fmt: skip
        self.moved_ = moved(self.net_, self._base_state, head_start)
        self.rm_ = self._make_rm()
        return self

    def learning_advice(self) -> str | None:
        """One line on what did not learn and the settings to change; None when all did
        (``_metrics.learning_advice``, from ``not_learned_`` and ``moved_``)."""
        return learning_advice(self.config_, self.rm_kind, getattr(self, "not_learned_", None),
                               getattr(self, "moved_", None) or {})  # fmt: skip

    def _make_rm(self) -> TunedRM:
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._base_model import trainable_state
        from rmlens.rewards._tuned import TunedRM

        return TunedRM(self.net_, self.base_, self.config_, weights=trainable_state(self.net_),
                       precision=self.precision_)

    # -- the training loop ----------------------------------------------------------------
    def _train(
        self, train: list, cfg: TrainConfig, *, eval_examples: list | None = None, extras=None,
        eval_extras=None, checkpoint_dir=None, fingerprint: str = "", quiet: bool = False,
        weights: np.ndarray | None = None, guide: dict | None = None,
    ) -> list[dict]:
        """Train ``net_`` on the examples ``train``; return the history, one entry per epoch
        (``epoch``, ``step``, ``lr``, ``train_*`` and, with ``eval_examples``, ``eval_*``
        metrics: ``loss``, ``accuracy``, ``margin``, ``reward_mean/min/max``).

        ``extras`` and ``eval_extras``: the bias features and groups of the training and
        evaluation examples, in their order, for objectives other than plain Bradley-Terry;
        ``weights``: the training examples' loss weights of the audit-guided objectives
        (``guide``: how they were made). With ``patience``, training stops after that many
        epochs without a lower eval loss and the best epoch's weights are restored. With
        ``checkpoint_dir``, a checkpoint is written every ``save_steps`` optimizer steps
        and at each epoch end, and an interrupted run resumes from the newest one.
        """
        # lazy: torch, transformers load only when this runs
        import torch

        from rmlens.rewards.losses import ObjectiveModule

        if cfg.patience and not eval_examples:
            raise ValueError(
                "The 'patience' parameter of TrainConfig needs evaluation pairs: set "
                f"`eval_fraction` > 0 or pass eval pairs. Got patience={cfg.patience}."
            )
        rt = self.runtime_
        devices = [torch.device(rt.device)] if rt.device.startswith("cuda") else []
        with torch.random.fork_rng(devices=devices, device_type="cuda"):
            torch.manual_seed(cfg.seed)  # dropout; a resumed run restores the saved state
            objective = None
            if not objective_of(cfg).plain:
                objective = ObjectiveModule.from_config(
                    cfg, train=extras, seed=cfg.seed, weights=weights, guide=guide
                ).to(rt.device)
            try:
                return self._epochs(train, cfg, objective, extras, (eval_examples, eval_extras),
                                    checkpoint_dir, fingerprint, quiet)  # fmt: skip
            finally:
                self.runtime_ = rt  # the compiled layers are out again, however it ended

    def _epochs(self, train, cfg, objective, extras, evals, checkpoint_dir, fingerprint, quiet):
        """``_train``'s epochs: optimizer steps of ``grad_accum`` length-grouped batches at a
        warmed-up, decaying rate, then evaluation, early stopping and a checkpoint."""
        # lazy: torch, transformers load only when this runs
        import torch

        from rmlens.progress import progress_bar
        from rmlens.rewards._base_model import load_trainable, trainable_state
        from rmlens.rewards._checkpoint import restore, save
        from rmlens.rewards._fast import fast_passes
        from rmlens.rewards._metrics import RunningStats
        from rmlens.rewards._packing import length_batches

        net, rt = self.net_, self.runtime_
        eval_examples, eval_extras = evals
        extras = None if extras is None else extras.to(rt.device)
        eval_extras = None if eval_extras is None else eval_extras.to(rt.device)
        opt = self._optimizer(cfg, objective)
        params = [p for pg in opt.param_groups for p in pg["params"]]
        weight = None
        if objective is not None and objective.weights_ is not None:
            weight = torch.as_tensor(objective.weights_, dtype=torch.float32, device=rt.device)
        lengths = [ex.packed_length for ex in train]
        n_batches = math.ceil(len(train) / cfg.batch_size)
        total = math.ceil(n_batches / cfg.grad_accum) * cfg.epochs
        warmup = int(round(cfg.warmup_ratio * total))
        state = {"epoch": 0, "batch": 0, "step": 0, "best": None, "bad": 0, "stopped": False,
                 "history": [], "stats": None}  # fmt: skip
        best = None
        ckpt = Path(checkpoint_dir) if checkpoint_dir else None
        if ckpt is not None and (ckpt / "latest.json").exists():
            state, best = restore(ckpt, net, opt, fingerprint, objective)
        net.train()
        if objective is not None:
            objective.train()
        done = state["epoch"] * n_batches + state["batch"]
        bar = progress_bar("training", total=cfg.epochs * n_batches, quiet=quiet)
        passes = fast_passes(net, rt, self.base_.model.config, self.rm_kind == "explicit")
        with passes as compiled, bar as advance:
            self.runtime_ = replace(rt, compiled=compiled)  # flat batches, short ones too
            advance(done)
            while state["epoch"] < cfg.epochs and not state["stopped"]:
                epoch = state["epoch"]
                batches = length_batches(
                    lengths, cfg.batch_size, np.random.default_rng([cfg.seed, epoch])
                )
                stats = RunningStats(state["stats"])
                for g in range(0, len(batches), cfg.grad_accum):
                    group = batches[g : g + cfg.grad_accum]
                    if g < state["batch"]:
                        continue
                    self._step(train, group, cfg, objective, extras, weight, stats)
                    factor = lr_factor(state["step"], total, warmup, cfg.schedule)
                    for pg in opt.param_groups:
                        pg["lr"] = pg["base_lr"] * factor
                    if cfg.max_grad_norm:
                        torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    state["step"] += 1
                    state["batch"] = g + len(group)
                    state["stats"] = stats.s
                    advance(len(group))
                    if ckpt is not None and cfg.save_steps and state["step"] % cfg.save_steps == 0:
                        save(ckpt, net, opt, state, fingerprint, best, objective)
                record = {"epoch": epoch + 1, "step": state["step"],
                          "lr": opt.param_groups[0]["lr"]}  # fmt: skip
                record.update({f"train_{k}": v for k, v in stats.metrics().items()})
                if eval_examples:
                    metrics = self._evaluate(eval_examples, cfg, objective, eval_extras)
                    record.update({f"eval_{k}": v for k, v in metrics.items()})
                    if cfg.patience:
                        if state["best"] is None or record["eval_loss"] < state["best"]:
                            state["best"], state["bad"] = record["eval_loss"], 0
                            best = trainable_state(net)
                        else:
                            state["bad"] += 1
                            state["stopped"] = state["bad"] >= cfg.patience
                state["history"].append(record)
                state.update(epoch=epoch + 1, batch=0, stats=None)
                if ckpt is not None:
                    save(ckpt, net, opt, state, fingerprint, best, objective)
        if best is not None:
            load_trainable(net, best)
        net.eval()
        return state["history"]

    def _step(self, train, group, cfg, objective, extras, weight, stats) -> None:
        """The gradients of one optimizer step: the batches of ``group`` (indices into
        ``train``), each loss scaled by its share of the step's examples."""
        # lazy: torch, transformers load only when this runs
        import torch

        from rmlens.rewards.losses import ranking_loss

        rt = self.runtime_
        n_group = sum(len(b) for b in group)
        for index in group:
            batch = rt.batch(train, index)
            pick = torch.as_tensor(index, device=rt.device)
            with rt.autocast():
                rewards = self.net_.rewards(batch)
                loss = ranking_loss(
                    rewards, batch.valid, batch.margin, cfg, objective,
                    None if extras is None else extras.take(pick),
                    None if weight is None else weight[pick],
                )  # fmt: skip
            (loss * (len(index) / n_group)).backward()
            stats.add(rewards, batch.valid, float(loss.detach()))

    def _optimizer(self, cfg: TrainConfig, objective=None):
        """AdamW over the trainable weights (``_trainer_base.adamw``)."""
        return adamw(self.net_, cfg, objective)

    def _evaluate(self, examples: list, cfg: TrainConfig, objective=None, extras=None) -> dict:
        """Loss and pairwise metrics of ``examples`` (names as in ``reward_stats``); with an
        ``objective``, its validation loss (``ObjectiveModule.validation_loss``)."""
        # lazy: torch, transformers load only when this runs
        import torch

        from rmlens.rewards._metrics import RunningStats
        from rmlens.rewards._nets import score_examples
        from rmlens.rewards.losses import PairExtras, ranking_loss

        r = score_examples(self.net_, examples, self.runtime_, batch_size=cfg.batch_size)
        valid = torch.as_tensor(~np.isnan(r))
        rewards = torch.as_tensor(np.nan_to_num(r), dtype=torch.float32)
        margin = torch.tensor([ex.margin for ex in examples], dtype=torch.float32)
        if objective is None:
            loss = float(ranking_loss(rewards, valid, margin, cfg))
        else:
            e = extras or PairExtras()
            m = margin if cfg.use_margin else None
            loss = objective.validation_loss(rewards[:, 0] - rewards[:, 1],
                                             PairExtras(m, e.dphi, e.group))  # fmt: skip
        stats = RunningStats()
        stats.add(rewards, valid, loss)
        return stats.metrics()


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

    def _prepare_refs(self, examples) -> None:
        self.net_.fill_references(examples, self.runtime_, self.config_.batch_size)



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
