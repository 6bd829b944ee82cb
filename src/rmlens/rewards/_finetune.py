"""Fine-tuned reward models: one trainer per method (explicit head, implicit DPO reward).

Both train from the base weights with LoRA or fully, on pairs (Bradley-Terry, optional margin
and centering) or rankings (Plackett-Luce), and implement the ``PairTrainer`` protocol, so
``rmlens memorize --mode finetune`` runs each audit run this way.
"""

from __future__ import annotations

import copy
import hashlib
import json

import numpy as np
import pandas as pd
import torch

from rmlens._errors import InputError
from rmlens.backbones import Backbone
from rmlens.data import fingerprint
from rmlens.progress import stderr
from rmlens.rewards._config import TrainConfig, resolve_device
from rmlens.rewards._implicit import ImplicitNet
from rmlens.rewards._influence import DAMPING, OBJECTIVES, bt_terms, last_layer_counterfactuals
from rmlens.rewards._loop import length_batches, score_examples, train_loop
from rmlens.rewards._metrics import reward_stats
from rmlens.rewards._nets import (
    ExplicitNet,
    disable_dropout,
    load_base,
    load_trainable,
    reset_lora,
    trainable_state,
    wrap_lora,
)
from rmlens.rewards._objectives import PairExtras
from rmlens.rewards._packing import Example, make_example
from rmlens.rewards._trainer import RunScores, inside_outside, objective_inputs
from rmlens.rewards._tuned import TunedRM, runtime_for

_STRUCTURE = (
    "model",
    "rm",
    "finetune",
    "lora_r",
    "lora_alpha",
    "lora_dropout",
    "lora_targets",
    "beta",
    "max_length",
    "packing",
    "device",
    "bf16",
)


class _TunedTrainer:
    rm = ""

    def __init__(
        self, config: TrainConfig | None = None, *, backbone: Backbone | None = None, bias=None
    ):
        self.config = config
        self.backbone = backbone
        self.bias = bias

    def get_params(self) -> dict:
        return {"config": self.config, "backbone": self.backbone, "bias": self.bias}

    # -- setup -------------------------------------------------------------------------
    def _setup(self) -> None:
        cfg = (self.config or TrainConfig(rm=self.rm)).check()
        if cfg.rm != self.rm:
            raise ValueError(
                f"The 'rm' parameter of TrainConfig must be {self.rm!r} for "
                f"{type(self).__name__}. Got {cfg.rm!r}."
            )
        self.config_ = cfg
        structure = {k: getattr(cfg, k) for k in _STRUCTURE}
        if getattr(self, "structure_", None) == structure:
            return
        if hasattr(self, "net_"):
            raise ValueError(
                f"{type(self).__name__} was set up for {self.structure_}; a new model, "
                "adapter shape, length, device or precision needs a new trainer"
            )
        self.structure_ = structure
        bb = self.backbone or load_base(cfg)
        disable_dropout(bb.model)
        device = resolve_device(cfg.device)
        bb.model.to(device)
        self.base_ = bb
        self.runtime_ = runtime_for(bb, cfg, device)
        self._base_state = None
        if cfg.finetune == "full":
            self._base_state = {
                k: v.detach().to("cpu", copy=True) for k, v in bb.model.state_dict().items()
            }
        self.net_ = self._make_net(bb, cfg).to(device)

    def _model(self, bb: Backbone, cfg: TrainConfig):
        if cfg.finetune == "lora":
            return wrap_lora(bb.model, cfg)
        return bb.model.requires_grad_(True)

    def _reset(self, seed: int) -> None:
        """Back to the base weights, with fresh adapters and head drawn from ``seed``."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if self._base_state is None:
                reset_lora(self.net_)
            else:
                body = self.net_.lm if isinstance(self.net_, ImplicitNet) else self.net_.body
                body.load_state_dict(self._base_state, strict=False)
            if isinstance(self.net_, ExplicitNet):
                self.net_.reset_head()
        self.net_._owner = None

    # -- data --------------------------------------------------------------------------
    def _examples(self, data: pd.DataFrame) -> tuple[list[Example], np.ndarray]:
        tok, limit, cfg = self.base_.tokenizer, self.base_.max_length, self.config_
        implicit = self.rm == "implicit"
        if "responses" in data:
            if cfg.loss != "plackett-luce":
                raise InputError(
                    "rankings (a 'responses' column) need loss='plackett-luce' "
                    "(--loss plackett-luce); load_pairs expands them into pairs instead"
                )
            examples = []
            for prompt, responses, scores in zip(data.prompt, data.responses, data.scores):
                order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
                ranked = [responses[i] for i in order]
                examples.append(make_example(tok, prompt, ranked, limit, with_response=implicit))
        else:
            margins = (
                data["margin"].fillna(0.0).to_numpy(float)
                if "margin" in data
                else np.zeros(len(data))
            )
            examples = [
                make_example(tok, p, [c, r], limit, m, with_response=implicit)
                for p, c, r, m in zip(data.prompt, data.chosen, data.rejected, margins)
            ]
        kept = np.array([len(ex.seqs) >= 2 and ex.distinct for ex in examples], dtype=bool)
        return examples, kept

    def _split_eval(self, index: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """``eval_fraction`` of the pairs at ``index`` held out to evaluate each epoch."""
        frac = self.config_.eval_fraction
        if not frac or len(index) < 2:
            return index, index[:0]
        order = np.random.default_rng([seed, 1]).permutation(len(index))
        n_eval = min(len(index) - 1, max(1, int(round(frac * len(index)))))
        return index[order[n_eval:]], index[order[:n_eval]]

    def _extras(self, index: np.ndarray) -> PairExtras | None:
        """Bias features and groups of the pairs at ``index`` (None for ``bt``)."""
        if self.config_.objective == "bt":
            return None
        dphi, groups = self.bias_, self.groups_
        return PairExtras(
            dphi=None if dphi is None else torch.as_tensor(dphi[index], dtype=torch.float32),
            group=None if groups is None else torch.as_tensor(
                np.unique(groups[index], return_inverse=True)[1].ravel()
            ),
        )  # fmt: skip

    def _prepare_refs(self, examples: list[Example]) -> None:
        """Implicit RMs: reference log-probs, computed once per example."""

    def _fingerprint(self, data: pd.DataFrame, eval_data: pd.DataFrame | None) -> str:
        """Checkpoints' key: the settings, the base model and the data (``fingerprint``).

        The examples follow from these (tokenizer of the base, ``max_length``; the eval split
        from ``eval_fraction`` and ``seed``), so a checkpoint is resumed only for the same.
        """
        skip = {"device", "ensemble", "save_steps"}
        cfg = {k: v for k, v in self.config_.to_dict().items() if k not in skip}
        parts = [cfg, self.base_.identity, fingerprint(data)]
        parts.append(None if eval_data is None else fingerprint(eval_data))
        return hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]

    # -- training ----------------------------------------------------------------------
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

        Returns
        -------
        self, with ``rm_`` (a :class:`TunedRM`), ``history_`` (metrics per epoch) and
        ``n_dropped_`` (pairs that truncation made identical, left out).
        """
        self._setup()
        cfg = self.config_
        examples, kept = self._examples(data)
        self.n_dropped_ = int((~kept).sum())
        if self.n_dropped_ and not quiet:
            stderr.print(f"{self.n_dropped_} pairs dropped: identical after truncation")
        if not kept.any():
            raise InputError("no usable training pairs (all identical after truncation)")
        self.bias_, self.groups_ = objective_inputs(cfg, data, self.bias)
        train_index, eval_index = self._split_eval(np.flatnonzero(kept), cfg.seed)
        train = [examples[i] for i in train_index]
        evals, eval_extras = [examples[i] for i in eval_index] or None, self._extras(eval_index)
        if eval_data is not None:
            if cfg.objective != "bt":
                raise InputError(
                    f"objective {cfg.objective!r}: evaluation data from a second file is not "
                    "supported; use eval_fraction (--eval-fraction) instead"
                )
            ev, ev_kept = self._examples(eval_data)
            evals = [ex for ex, k in zip(ev, ev_kept) if k] or None
        self._reset(cfg.seed)
        self._prepare_refs(train + (evals or []))
        self.history_ = train_loop(
            self.net_,
            train,
            cfg,
            self.runtime_,
            eval_examples=evals,
            extras=self._extras(train_index),
            eval_extras=eval_extras,
            checkpoint_dir=checkpoint_dir,
            fingerprint=self._fingerprint(data, eval_data),
            quiet=quiet,
        )
        self.rm_ = self._make_rm()
        return self

    def _make_rm(self) -> TunedRM:
        return TunedRM(self.net_, self.base_, self.config_, weights=trainable_state(self.net_))

    # -- PairTrainer protocol ----------------------------------------------------------
    @property
    def counterfactuals(self) -> str | None:
        """``"last-layer"`` where runs give paired counterfactuals (an explicit RM on pairs,
        trained with ``bt`` or ``label_smoothing``: last-layer Gauss-Newton influence,
        ``rmlens.rewards._influence``), else None."""
        cfg = self.config or TrainConfig(rm=self.rm)
        pairwise = self.rm == "explicit" and cfg.loss == "bradley-terry"
        return "last-layer" if pairwise and cfg.objective in OBJECTIVES else None

    def prepare(
        self, pairs: pd.DataFrame, *, quiet: bool = False, groups=None, check_exact: int = 0
    ) -> np.ndarray:
        """Load the base model and tokenize every pair once; return the usable-pair mask.

        ``groups``: (n_pairs,) labels whose removal or addition each run's paired
        counterfactuals are of (``counterfactuals`` must be set); ``check_exact`` must be 0
        (no exact refit exists for a fine-tuned RM).
        """
        self._setup()
        self.examples_, self.kept_ = self._examples(pairs)
        self.bias_, self.groups_ = objective_inputs(self.config_, pairs, self.bias)
        self._prepare_refs([ex for ex, k in zip(self.examples_, self.kept_) if k])
        self.groups_codes_ = None
        if groups is not None:
            if not self.counterfactuals or check_exact:
                raise ValueError(
                    f"{type(self).__name__}: paired counterfactuals need an explicit RM on pairs "
                    f"trained with an objective of {OBJECTIVES}, and check_exact=0"
                )
            self.groups_codes_ = np.unique(np.asarray(groups, dtype=str), return_inverse=True)[1]
            self.margin_ = pairs["margin"].to_numpy(float) if "margin" in pairs else None
        return self.kept_

    def _train_best_lr(self, train_index, eval_index, cfg: TrainConfig, seed: int) -> list[dict]:
        """Train from the base weights once per learning rate of ``lr_grid`` (or ``lr``) and
        keep the weights with the lowest validation loss (a choice made on validation pairs
        only, never on the run's held-out pairs)."""
        grid = cfg.lr_grid or (cfg.lr,)
        train = [self.examples_[i] for i in train_index]
        evals = [self.examples_[i] for i in eval_index] or None
        extras = {"extras": self._extras(train_index), "eval_extras": self._extras(eval_index)}
        if len(grid) > 1 and not evals:
            raise InputError("lr_grid needs validation pairs: set patience > 0 (an audit "
                             "carves validation groups) or eval_fraction > 0")  # fmt: skip
        best = None
        for lr in grid:
            self._reset(seed)
            run_cfg = cfg.replace(seed=seed, lr=lr)
            history = train_loop(
                self.net_, train, run_cfg, self.runtime_, eval_examples=evals, quiet=True,
                **extras,
            )  # fmt: skip
            loss = min((h["eval_loss"] for h in history if "eval_loss" in h), default=0.0)
            if best is None or loss < best[0]:
                state = trainable_state(self.net_) if len(grid) > 1 else None
                best = (loss, lr, state, history)
        if len(grid) > 1:
            load_trainable(self.net_, best[2])
        for record in best[3]:
            record["lr_chosen"] = best[1]
        return best[3]

    def fit_score(
        self, train_index: np.ndarray, *, seed: int, val_index: np.ndarray | None = None
    ) -> RunScores:
        """Train from the base weights on the pairs at ``train_index``; score every pair.

        ``val_index``: validation pairs (never trained on) evaluated each epoch, for
        ``patience``; without them ``eval_fraction`` of the training pairs is held out.
        """
        cfg = self.config_
        train_index = np.asarray(train_index, dtype=int)
        fit_index = train_index[self.kept_[train_index]]
        if val_index is not None and len(val_index):
            eval_index = np.asarray(val_index, dtype=int)
            eval_index = eval_index[self.kept_[eval_index]]
        else:
            fit_index, eval_index = self._split_eval(fit_index, seed)
        history = self._train_best_lr(fit_index, eval_index, cfg, seed)
        paired = None
        if getattr(self, "groups_codes_", None) is not None:
            r, paired = self._influence(fit_index, eval_index)
        else:
            r = score_examples(self.net_, self.examples_, self.runtime_, batch_size=cfg.batch_size)
        r_c, r_r = r[:, 0], r[:, 1]
        seen = train_index if val_index is None else np.concatenate([train_index, val_index])
        held = np.setdiff1d(np.arange(len(r_c)), seen.astype(int))
        metrics = {
            f"train_{k}": v for k, v in reward_stats(r_c[train_index], r_r[train_index]).items()
        }
        metrics.update({f"test_{k}": v for k, v in reward_stats(r_c[held], r_r[held]).items()})
        metrics["loss"] = history[-1]["train_loss"] if history else float("nan")
        metrics["lr"] = history[-1].get("lr_chosen", cfg.lr) if history else cfg.lr
        metrics["epochs_trained"] = len(history)
        if paired is None:
            return RunScores(r_c, r_r, metrics, self._make_rm())
        p, p_cf, lambdas = paired
        metrics.update(damping_grid=list(DAMPING), damping_l2=lambdas.tolist())
        return RunScores(r_c, r_r, metrics, self._make_rm(), p, p_cf)

    def _influence(self, fit_index, eval_index):
        """Rewards (n, 2) of every pair from the pooled hidden states h, and p, p_cf over
        the damping grid from the score head's influence (``rmlens.rewards._influence``)."""
        cfg = self.config_
        h = score_examples(
            self.net_, self.examples_, self.runtime_, batch_size=cfg.batch_size, method="pooled"
        ).astype(np.float64)  # (n, 2, d); NaN for the unusable pairs
        h = np.nan_to_num(h)
        u = self.net_.head.weight.detach().double().cpu().numpy()[0]
        r = h @ u + float(self.net_.head.bias.detach())
        kept = np.asarray(self.kept_, dtype=bool)
        inside, outside = inside_outside(len(h), kept, fit_index, eval_index)
        offset, target = bt_terms(cfg, self.margin_)
        p, p_cf, lambdas = last_layer_counterfactuals(
            h[:, 0] - h[:, 1], u, self.groups_codes_, inside, outside, offset=offset,
            target=target,
        )  # fmt: skip
        r[~kept] = np.nan
        p[~kept] = np.nan
        return r, (p, p_cf, lambdas)


class ExplicitRMTrainer(_TunedTrainer):
    """Explicit RM: a linear head on the pooled hidden state, backbone tuned by LoRA or fully.

    Parameters
    ----------
    config : TrainConfig, optional
        ``rm`` must be ``"explicit"``.
    backbone : Backbone, optional
        An already loaded backbone (``load_backbone``); trained in place.

    Examples
    --------
    >>> trainer = ExplicitRMTrainer(TrainConfig(model="minilm", epochs=1))  # doctest: +SKIP
    >>> rm = trainer.fit(pairs).rm_                                        # doctest: +SKIP
    >>> rm.score(["2+2?"], ["4"])                                          # doctest: +SKIP
    """

    rm = "explicit"

    def _make_net(self, bb: Backbone, cfg: TrainConfig):
        net = ExplicitNet(self._model(bb, cfg), bb.hidden_size, bb.pooling, bb.kind == "causal")
        net.reset_head()
        return net


class ImplicitRMTrainer(_TunedTrainer):
    """Implicit RM: r = beta * (log pi(y|x) - log pi_ref(y|x)) of a causal LM (DPO loss).

    The reference is frozen: the LoRA policy with its adapters off, or a copy of the base
    weights for full fine-tuning. Its log-probs are computed once per pair.

    Parameters
    ----------
    config : TrainConfig, optional
        ``rm`` must be ``"implicit"``.
    backbone : Backbone, optional
        A causal LM loaded with ``AutoModelForCausalLM``; trained in place.
    """

    rm = "implicit"

    def _make_net(self, bb: Backbone, cfg: TrainConfig):
        if bb.kind != "causal" or bb.model.get_output_embeddings() is None:
            raise InputError(
                f"model '{bb.name}': an implicit RM needs a causal language model with an LM "
                "head (e.g. smollm2-135m), not an encoder"
            )
        reference = None
        if cfg.finetune == "full":
            reference = copy.deepcopy(bb.model).eval().requires_grad_(False)
        return ImplicitNet(self._model(bb, cfg), cfg.beta, reference)

    @torch.inference_mode()
    def _prepare_refs(self, examples: list[Example]) -> None:
        todo = [ex for ex in examples if ex.ref is None]
        rt, net = self.runtime_, self.net_
        for index in length_batches([ex.packed_length for ex in todo], self.config_.batch_size):
            batch = rt.batch(todo, index)
            with rt.autocast():
                ref = net.reference_logps(batch).float().cpu()
            for b, i in enumerate(index):
                todo[i].ref = ref[b, : len(todo[i].seqs)].tolist()


def make_trainer(
    config: TrainConfig | None = None, *, backbone: Backbone | None = None, bias=None
):
    """The trainer a config asks for: :class:`ExplicitRMTrainer` or :class:`ImplicitRMTrainer`.

    Both implement the ``PairTrainer`` protocol (``prepare``, ``fit_score``) of the
    memorization runner; each run trains from the base weights. ``bias``: the pairs' shortcut
    feature differences, for the ``poe`` and ``reweight`` objectives.
    """
    config = config or TrainConfig()
    cls = ImplicitRMTrainer if config.rm == "implicit" else ExplicitRMTrainer
    return cls(config, backbone=backbone, bias=bias)
