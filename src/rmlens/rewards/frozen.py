"""The frozen-feature mode: ``HeadConfig`` and its trainer, ``FrozenHeadTrainer``.

A frozen backbone encodes every text once (cached on disk); a head (linear, MLP, or the
convex ``logistic`` head) is trained on the pooled features, once (``fit``) or once per
audit run (``prepare`` + ``fit_score``, with paired counterfactuals where the head allows).
How a head is fitted is in ``_head_fit`` (AdamW epochs, the convex path), the head network
and the fitted head in ``_head``, the convex problem and the paired counterfactuals in
``rmlens.influence`` (called through ``_paired``). ``HeadConfig`` is defined in
``rmlens.rewards._config`` (which imports nothing heavy: the command line builds its
options from it) and re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rmlens._errors import InputError
from rmlens.backbones import warn_truncation
from rmlens.influence import DAMPING, one_blas_thread
from rmlens.rewards._config import HeadConfig
from rmlens.rewards._metrics import reward_stats
from rmlens.rewards._paired import convex_paired, head_influence
from rmlens.rewards._trainer_base import (
    RunScores,
    Trainer,
    dropped_ids,
    group_codes,
    objective_inputs,
    warn_dropped,
    warn_inactive,
)
from rmlens.rewards.objectives import names_where, objective_of

if TYPE_CHECKING:
    import pandas as pd


class FrozenHeadTrainer(Trainer):
    """Frozen backbone: features computed once (cached on disk), a head trained on them.

    Follows the trainer contract (``rmlens.rewards._trainer_base.Trainer``): ``fit(pairs)`` trains
    one head and sets ``rm_`` (an ``ExplicitHeadRM``: texts in, rewards out);
    ``fit_features`` trains on features you already have and sets ``head_`` (a ``HeadRM``:
    features in); ``prepare`` + ``fit_score`` train one head per audit run.

    Parameters
    ----------
    config : HeadConfig, optional
        The head and how it is trained.
    model : str, default="minilm"
        Backbone preset, local path or hub id.
    max_length, batch_size : int, optional
        Tokens per sequence and texts per encoding batch.
    cache_dir : path or False, optional
        Embedding cache root; ``False`` disables it.
    format : {"auto", "chat", "raw", "pair"}, default="auto"
        How a (prompt, response) becomes tokens (``rmlens.backbones.load_backbone``);
        auto: the backbone's.
    precision : {"auto", "fp32", "bf16"}, default="auto"
        The precision the backbone encodes in (``rmlens.backbones.resolve_precision``); the
        heads train in fp32 on fp32 features either way.
    backbone : Backbone, optional
        An already loaded backbone (then ``model`` and ``max_length`` are not read).
    bias : DataFrame or array of shape (n_pairs, k), optional
        Shortcut feature differences phi(chosen) - phi(rejected) of every pair, for the
        ``poe`` and ``reweight`` objectives (``rmlens.attribution.bias_features``).
    check_exact : int, optional
        Paired counterfactuals: per run, refit the head exactly with this many random
        groups removed or added, and record how far the counterfactuals are from the refits
        (``metrics["exactness"]``); None: what ``prepare`` is given (an audit gives its
        ``check_exact``).

    Attributes
    ----------
    head_ : HeadRM
        After ``fit`` or ``fit_features``: the fitted head (its ``history_``, ``l2_``, ...).
    rm_ : ExplicitHeadRM
        After ``fit``: the backbone with the fitted head.
    n_dropped_ : int
        After ``fit``: pairs left out, their chosen and rejected identical after truncation.
    format_ : str
        After ``prepare`` (and ``fit``): the format the texts were tokenized in (chat, raw
        or pair).
    truncation_ : dict
        After ``prepare`` (and ``fit``): what ``max_length`` cut
        (``rmlens.backbones._formats.truncation_summary``); ``fit`` warns of cut pairs (an
        audit records them in ``summary.json``, with its warnings).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> xc, xr = rng.normal(1, 1, (50, 8)), rng.normal(0, 1, (50, 8))
    >>> head = FrozenHeadTrainer(HeadConfig(epochs=5)).fit_features(xc, xr).head_
    >>> head.score_features(xc).shape
    (50,)
    >>> trainer = FrozenHeadTrainer(HeadConfig(epochs=50, patience=3))
    >>> head = trainer.fit_features(xc[:40], xr[:40], validation=(xc[40:], xr[40:])).head_
    >>> head.best_epoch_ <= head.n_epochs_ <= 50
    True
    >>> trainer = FrozenHeadTrainer(HeadConfig(head="logistic"))
    >>> head = trainer.fit_features(xc[:40], xr[:40], validation=(xc[40:], xr[40:])).head_
    >>> head.l2_ in HeadConfig().l2_grid
    True
    """

    config_class = HeadConfig

    def __init__(
        self,
        config: HeadConfig | None = None,
        *,
        model: str = "minilm",
        max_length: int | None = None,
        batch_size: int = 32,
        cache_dir=None,
        backbone=None,
        bias=None,
        check_exact: int | None = None,
        format: str = "auto",
        precision: str = "auto",
    ):
        self.config = config if config is not None else HeadConfig()
        self.model = model
        self.precision = precision
        self.max_length = max_length
        self.format = format
        self.batch_size = batch_size
        self.cache_dir = cache_dir
        self.backbone = backbone
        self.bias = bias
        self.check_exact = check_exact

    # -- once ---------------------------------------------------------------------------
    def fit(
        self, pairs: pd.DataFrame, *, eval_data: pd.DataFrame | None = None, quiet: bool = False
    ) -> FrozenHeadTrainer:
        """Encode ``pairs`` and train one head on its usable pairs.

        Parameters
        ----------
        pairs : DataFrame
            ``prompt``, ``chosen``, ``rejected``, optional ``margin`` (``load_pairs``).
        eval_data : DataFrame, optional
            Validation pairs, never trained on: early stopping (``patience``) or the choice
            of lambda (``logistic``). Not with the bias-aware objectives.
        quiet : bool, default=False
            No progress bar while encoding.

        Returns
        -------
        self, with ``rm_``, ``head_``, ``n_dropped_``, ``format_`` and ``truncation_``.
        """
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._models import ExplicitHeadRM

        kept = self.prepare(pairs, quiet=quiet)
        warn_truncation(self.truncation_, len(pairs))
        self.n_dropped_ = int((~kept).sum())
        warn_dropped(self.n_dropped_)
        train = np.flatnonzero(kept)
        if not len(train):
            raise InputError("no usable training pairs (all identical after truncation)")
        f, pick = self.features_, _picker(train)
        validation = None
        if eval_data is not None:
            validation = self._eval_features(eval_data, quiet)
        self.fit_features(
            f.chosen[train], f.rejected[train], pick(self.margin_), validation=validation,
            bias=pick(self.bias_), groups=pick(self.groups_),
        )  # fmt: skip
        self.rm_ = ExplicitHeadRM(self.backbone_, self.head_, cache_dir=self.cache_dir,
                                  format=self.format_)  # fmt: skip
        warn_inactive(self.config.objective, [self.head_.activity_])
        return self

    def _eval_features(self, eval_data: pd.DataFrame, quiet: bool) -> tuple:
        # lazy: torch, transformers load only when this runs
        from rmlens.backbones import featurize

        if not objective_of(self.config).plain:
            raise InputError(
                f"objective {self.config.objective!r}: `eval_data` from a second table is not "
                "supported; train with the default bt objective or without `eval_data`"
            )
        f = featurize(self.backbone_, eval_data, cache_dir=self.cache_dir,
                      batch_size=self.batch_size, quiet=quiet, format=self.format_)  # fmt: skip
        kept = np.asarray(f.kept, dtype=bool)
        margin = eval_data["margin"].to_numpy(float)[kept] if "margin" in eval_data else None
        return f.chosen[kept], f.rejected[kept], margin

    def fit_features(
        self, x_chosen, x_rejected, margin=None, *, validation=None, bias=None, groups=None
    ) -> FrozenHeadTrainer:
        """Train a head on (n_pairs, d) chosen and rejected features; set ``head_``.

        ``margin`` (n_pairs,); ``bias`` (n_pairs, k): the shortcut feature differences
        phi(chosen) - phi(rejected) that ``poe`` and ``reweight`` read; ``groups``
        (n_pairs,): the group labels that ``group_dro`` balances. ``validation`` is
        ``(x_chosen, x_rejected[, margin[, bias[, groups]]])`` of pairs that are never
        trained on: their loss after each epoch decides early stopping (``patience``) and
        which epoch's weights are kept, or, for the ``logistic`` head, which lambda of
        ``l2_grid`` is kept (without validation pairs: the largest). Only the training
        features set the head's standardization.

        Parameters
        ----------
        x_chosen, x_rejected : ndarray of shape (n_pairs, d)
            Features of the chosen and rejected responses.
        margin : ndarray of shape (n_pairs,), optional
            Preference strengths.
        validation : tuple of ndarray, optional
            ``(x_chosen, x_rejected[, margin[, bias[, groups]]])`` of the validation pairs.
        bias : ndarray of shape (n_pairs, k), optional
            Shortcut feature differences (``poe``, ``reweight``).
        groups : ndarray of shape (n_pairs,), optional
            Group labels (``group_dro``).

        Returns
        -------
        FrozenHeadTrainer
            ``self``, with the fitted head in ``head_``.
        """
        # lazy: torch loads only when this runs
        from rmlens.rewards._head_fit import fit_head

        self.head_ = fit_head(self.config, x_chosen, x_rejected, margin,
                              validation=validation, bias=bias, groups=groups)  # fmt: skip
        return self

    # -- per audit run ------------------------------------------------------------------
    @property
    def counterfactuals(self) -> str | None:
        """How runs give paired counterfactuals: ``"newton"`` (the convex head: Newton steps,
        exact up to about 1e-6), ``"last-layer"`` (AdamW heads trained with ``bt`` or
        ``label_smoothing``: last-layer Gauss-Newton influence over a damping grid,
        ``rmlens.influence``), or None (other objectives)."""
        if self.config.convex:
            return "newton"
        return "last-layer" if objective_of(self.config).pair_logistic else None

    def prepare(
        self, pairs: pd.DataFrame, *, quiet: bool = False, groups=None, check_exact: int = 0
    ) -> np.ndarray:
        """Encode every pair once (through the cache); return the usable-pair mask.

        Parameters
        ----------
        pairs : DataFrame
            All pairs of the audit (``margin`` and the objective's columns read if present).
        quiet : bool, default=False
            No progress bar.
        groups : array-like of shape (n_pairs,), optional
            The audit's groups: each run then also scores paired counterfactuals (a head
            or objective that has none is an InputError).
        check_exact : int, default=0
            Groups refitted exactly per run to check the counterfactuals (the convex head
            only); the trainer's own ``check_exact`` wins when set.

        Returns
        -------
        ndarray of shape (n_pairs,), bool
            The pairs that could be encoded.
        """
        # lazy: torch, transformers load only when this runs
        from rmlens.backbones import featurize, load_backbone, resolve_format, resolve_precision

        held = resolve_precision(self.precision, "cpu", task="encode")
        backbone = self.backbone or load_backbone(self.model, max_length=self.max_length,
                                                  format=self.format, precision=held)  # fmt: skip
        self.backbone_ = backbone
        self.format_ = resolve_format(self.format, backbone.tokenizer, backbone.kind) \
            if self.format != "auto" else backbone.format  # fmt: skip
        self.features_ = featurize(
            backbone, pairs, cache_dir=self.cache_dir, batch_size=self.batch_size, quiet=quiet,
            format=self.format_,
        )
        self.truncation_ = self.features_.truncation
        self.margin_ = pairs["margin"].to_numpy(float) if "margin" in pairs else None
        self.ids_ = pairs["id"].astype(str).to_numpy() if "id" in pairs else None
        self.bias_, self.groups_ = objective_inputs(self.config, pairs, self.bias)
        self.identity_ = backbone.identity
        self.precision_ = backbone.precision
        self.groups_codes_ = None
        self.check_exact_ = check_exact if self.check_exact is None else self.check_exact
        if groups is not None:
            if not self.counterfactuals:
                raise InputError(
                    f"paired counterfactuals need `head` 'logistic', or an `objective` of "
                    f"{names_where('pair_logistic')}; this trainer's is {self.config.objective!r}"
                )
            if self.check_exact_ and self.counterfactuals != "newton":
                raise InputError(
                    "`check_exact` refits the convex head (`head` 'logistic'); last-layer "
                    "influence has no exact refit (set `check_exact` to 0)"
                )
            self.groups_codes_ = group_codes(groups)
        return self.features_.kept

    def fit_score(
        self, train_index: np.ndarray, *, seed: int, val_index: np.ndarray | None = None
    ) -> RunScores:
        """Train a head on the prepared pairs at ``train_index``; score every pair.

        Parameters
        ----------
        train_index : ndarray of int
            Positions (in the prepared pairs) of the run's training pairs.
        seed : int
            The run's seed.
        val_index : ndarray of int, optional
            Positions of the run's validation pairs (early stopping, lambda).

        Returns
        -------
        RunScores
            Every pair's rewards, the run's metrics, its RM and, when prepared with groups,
            ``p`` and ``p_cf``.
        """
        # lazy: torch, transformers load only when this runs
        from rmlens.rewards._head_fit import fit_head, training_record
        from rmlens.rewards._models import ExplicitHeadRM
        from rmlens.rewards.losses import describe_objective

        f = self.features_
        cfg = self.config.replace(seed=seed)  # each run its own seed (the audit's, per run)
        train_index = np.asarray(train_index, dtype=int)
        val_index = np.asarray([] if val_index is None else val_index, dtype=int)
        pick, validation = _picker(train_index), None
        if len(val_index):
            validation = (f.chosen[val_index], f.rejected[val_index],
                          *map(_picker(val_index), (self.margin_, self.bias_, self.groups_)))
        rm = fit_head(cfg, f.chosen[train_index], f.rejected[train_index],
                      pick(self.margin_), validation=validation, bias=pick(self.bias_),
                      groups=pick(self.groups_))  # fmt: skip
        r_c, r_r = rm.score_features(f.chosen), rm.score_features(f.rejected)
        held = np.setdiff1d(np.arange(len(r_c)), np.concatenate([train_index, val_index]))
        metrics = {}
        for split, index in (("train", train_index), ("val", val_index), ("test", held)):
            if len(index) or split != "val":
                stats = reward_stats(r_c[index], r_r[index])
                metrics.update({f"{split}_{k}": v for k, v in stats.items()})
        metrics.update(training_record(rm))
        metrics.update(describe_objective(rm.objective_, self.bias, rm.activity_))
        metrics.update(dropped_ids(self.ids_, train_index, rm.objective_.weights_))
        p = p_cf = None
        if self.groups_codes_ is not None and self.counterfactuals == "last-layer":
            p, p_cf, lambdas = head_influence(
                rm, f, self.margin_, self.groups_codes_, train_index, val_index
            )
            metrics.update(damping_grid=list(DAMPING), damping_l2=lambdas.tolist())
        elif self.groups_codes_ is not None:
            with one_blas_thread():
                p, p_cf, exactness = convex_paired(
                    rm, f, self.margin_, self.bias_, self.groups_codes_, train_index,
                    val_index, self.check_exact_, seed,
                )  # fmt: skip
            if exactness is not None:
                metrics["exactness"] = exactness
        model = ExplicitHeadRM(self.backbone_, rm, format=self.format_)
        return RunScores(r_c, r_r, metrics, model, p, p_cf)


def _picker(index):
    """``pick(a)``: ``a[index]``, or None for None."""
    return lambda a: None if a is None else a[index]
