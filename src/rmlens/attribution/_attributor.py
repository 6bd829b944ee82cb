"""The attributor: regress TM, TG and CM on pair features and explain them with SHAP.

Per target and regressor: group K-fold held-out R^2 (no group of the audit in both train and
test), then a fit on all pairs and mean ``|SHAP|`` per feature (``_fits``). A feature much more
important for TM than for TG is one the RMs use to memorize rather than to generalize
(:func:`tm_tg_difference`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rmlens._base import Params
from rmlens._errors import InputError
from rmlens._params import ParamError
from rmlens.attribution._config import SAE_FEATURES, AttributeConfig
from rmlens.attribution._features import pair_features
from rmlens.attribution._fits import (
    fit_all,
    half_stability,
    no_stability,
    sample,
    shap_rows,
    subset,
)
from rmlens.attribution._identifiers import identifier_columns, metadata_columns
from rmlens.attribution._informative import informative_column
from rmlens.attribution._regress import Design, cross_validate, design_matrix, explain
from rmlens.attribution._stability import STABILITY_COLUMNS, Halves
from rmlens.progress import progress_bar


class Attributor(Params):
    """Regress memorization targets on pair features and explain them with SHAP.

    Parameters
    ----------
    config : AttributeConfig, optional

    Attributes
    ----------
    features_ : DataFrame, shape (n_pairs, n_columns)
        The pair features (``pair_features``).
    design_ : Design
        The encoded feature matrix both regressors use.
    fit_ : DataFrame
        ``target, regressor, r2, r2_std, informative, n_pairs, n_dropped_nan, n_folds``:
        held-out R^2 (mean and std over group K-fold folds) and whether it reaches
        ``R2_FLOOR`` (``_informative``: below it the fit explains nothing and its features are
        not ranked, only listed); then the stability of the ranking between
        the halves of the runs (``_stability``): ``rank_spearman``, ``top10_overlap``,
        ``top10_half1``, ``top10_half2`` (lists of features), the chance level of the two
        figures (``rank_spearman_noise``, ``top10_overlap_noise``: fits to pure noise) and
        ``stability_note`` (what the halves are, or why the figures are NaN).
    importance_ : DataFrame
        ``target, regressor, feature, importance, rank, informative``: mean ``|SHAP|`` of the
        model fit on all pairs, rank 1 = most important; ``informative`` is the fit's (False:
        the ranking describes a fit of noise, not shown as a ranking).
    diff_ : DataFrame
        ``regressor, feature, importance_tm, importance_tg, diff`` (TM minus TG), sorted by
        ``diff``, largest first; empty unless both tm and tg are targets.
    left_out_ : dict of str to str
        Identifier-like metadata columns left out of the features (``identifier_columns``),
        with the reason; ``config.features`` brings one back.
    halves_ : Halves or None
        The halves of the runs given to ``fit`` (None with ``config.stability`` off).
    half_importance_ : DataFrame
        ``target, regressor, half, feature, importance``: mean ``|SHAP|`` of the fits on each
        half's targets (half 1 or 2); empty without ``halves``.
    explanations_ : dict of (target, regressor) to shap.Explanation
        SHAP values on a sample of pairs (``.data`` holds their ``design_`` rows).
    models_ : dict of (target, regressor) to fitted regressor
        Fit on all pairs with a finite target; ``predict`` takes ``design_``-like rows.
    notes_ : list of str

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from rmlens.attribution import Attributor, AttributeConfig
    >>> rng = np.random.default_rng(0)
    >>> n = 200
    >>> words = rng.integers(1, 30, n)
    >>> table = pd.DataFrame({"prompt": ["q"] * n, "chosen": ["word " * w for w in words],
    ...     "rejected": ["word"] * n, "group": np.arange(n) % 10,
    ...     "tm": 0.5 + words / 60 + rng.normal(0, 0.02, n)})
    >>> cfg = AttributeConfig(targets=("tm",), regressors=("lightgbm",), tokenizer=None)
    >>> a = Attributor(config=cfg).fit(table)
    >>> bool(a.fit_.r2.iloc[0] > 0.5)
    True
    """

    config_class = AttributeConfig

    def __init__(self, *, config: AttributeConfig | None = None):
        self.config = config

    def fit(
        self,
        table: pd.DataFrame,
        *,
        features: pd.DataFrame | None = None,
        groups: pd.Series | np.ndarray | None = None,
        group_by: str | None = None,
        tokenizer=None,
        halves: Halves | None = None,
        extra: pd.DataFrame | None = None,
        quiet: bool = True,
    ) -> Attributor:
        """Fit the regressors on ``table`` (a memorization table) and compute SHAP.

        Parameters
        ----------
        table : DataFrame, shape (n_pairs, ...)
            Pair columns and the target columns (``tm``, ``tg``, ``cm``).
        features : DataFrame, optional
            Precomputed features (default: ``pair_features(table, tokenizer=tokenizer)``).
        groups : array-like, shape (n_pairs,), optional
            Groups for the K-fold (default: the ``group`` column; else one group per pair).
        group_by : str, optional
            The audit's grouping column (``config.json``'s ``group_by``): left out of the
            features unless ``config.features`` names it.
        tokenizer : transformers tokenizer, optional
        halves : Halves, optional
            TM, TG, CM from each half of the runs (``run_halves``), matched to ``table`` by
            ``id``: each regressor and SHAP are fit to each half too, and the two feature
            rankings compared (``config.stability`` turns it off).
        extra : DataFrame, optional
            More pair features, ``id`` and one numeric column each, matched to ``table`` by
            ``id`` (NaN for a pair it lacks): the SAE latents of ``rmlens sae``
            (``rmlens.sae.load_latents``).
        quiet : bool, default=True
            No progress bar.

        Returns
        -------
        Attributor
            ``self``, fitted: ``importance_``, the fits and the stability tables set.
        """
        cfg = self.config or AttributeConfig()
        cfg.check()  # ParamError (an InputError) names the field
        _check_targets(table, cfg)
        self.notes_ = []
        groups, known_groups = self._groups(table, groups)
        self.left_out_ = self._identifiers(table, groups if known_groups else None, group_by,
                                           cfg)
        self.features_ = self._features(table, features, tokenizer, cfg)
        if extra is not None:
            self.features_ = _joined(self.features_, table, extra)
        self.design_ = design = design_matrix(self.features_, max_categories=cfg.max_categories)
        if len(np.unique(groups)) < 2:
            groups = np.arange(len(table)).astype(str)
            self.notes_.append("fewer than 2 groups: K-fold over pairs instead of groups")
        aligned, why = self._halves(table, halves, cfg)  # aligned to the rows of table
        self.halves_ = halves if aligned is not None else None
        fits, rows, half_rows = self._fit_targets(table, design, groups, aligned, why, cfg, quiet)
        self._tables(fits, rows, half_rows, cfg)
        return self

    def _groups(self, table: pd.DataFrame, groups) -> tuple[np.ndarray, bool]:
        """The K-fold groups as strings, and whether they were known (given or a column)."""
        known_groups = groups is not None or "group" in table.columns
        if groups is None:
            if "group" in table.columns:
                groups = table["group"]
            else:
                groups = np.arange(len(table))
                self.notes_.append("no 'group' column: each pair is its own group")
        return pd.Series(np.asarray(groups)).astype(str).to_numpy(), known_groups

    def _features(self, table: pd.DataFrame, features: pd.DataFrame | None, tokenizer,
                  cfg: AttributeConfig) -> pd.DataFrame:
        """The pair features, without the identifier-like columns left out."""
        if features is None:
            features = pair_features(table, tokenizer=tokenizer,
                                     exclude=(*cfg.exclude, *self.left_out_))
            skipped = features.attrs.get("skipped", {})
            skipped.update({c: f"identifier-like: {why}" for c, why in self.left_out_.items()})
            features.attrs["skipped"] = skipped
        else:
            features = features.drop(columns=[c for c in self.left_out_ if c in features])
        return features

    def _fit_targets(self, table, design: Design, groups: np.ndarray, halves, why,
                     cfg: AttributeConfig, quiet: bool) -> tuple[list, list, list]:
        """Per target and regressor: held-out R^2, the fit on all pairs and its SHAP, and
        with ``halves`` the stability figures; returns the fit, importance and half rows."""
        fits, rows, self.explanations_, self.models_ = [], [], {}, {}
        half_rows: list[dict] = []
        noise: dict[str, dict] = {}  # per regressor: the figures of fits to pure noise
        rng = np.random.default_rng(cfg.seed)
        steps = len(cfg.targets) * len(cfg.regressors) * (3 if halves else 1)
        with progress_bar("attribution", total=steps, quiet=quiet) as advance:
            for target in cfg.targets:
                y_all = pd.to_numeric(table[target], errors="coerce").to_numpy(dtype=float)
                keep = np.flatnonzero(np.isfinite(y_all))
                n_nan = len(y_all) - len(keep)
                if n_nan:
                    self.notes_.append(f"{target}: {n_nan} pairs with NaN dropped")
                sub = subset(design, keep)
                y, g = y_all[keep], groups[keep]
                for reg in cfg.regressors:
                    fit = {"target": target, "regressor": reg, "n_pairs": len(keep),
                           "n_dropped_nan": n_nan,
                           **no_stability("no regressor fit" if halves else why)}
                    if len(keep) < 10 or len(np.unique(g)) < 2 or not sub.names:
                        self.notes_.append(f"{target}/{reg}: too few pairs, groups or features")
                        fits.append({**fit, "r2": np.nan, "r2_std": np.nan, "n_folds": 0})
                        advance(3 if halves else 1)
                        continue
                    fit.update(self._explain(target, reg, sub, y, g, rng, cfg, rows))
                    advance(1)
                    if halves:
                        fit.update(half_stability(target, reg, design, halves, why, cfg,
                                                  shap_rows(reg, cfg), half_rows, noise))
                        advance(2)
                    fits.append(fit)
        return fits, rows, half_rows

    def _explain(self, target: str, reg: str, sub: Design, y: np.ndarray, g: np.ndarray,
                 rng: np.random.Generator, cfg: AttributeConfig, rows: list[dict]) -> dict:
        """Held-out R^2 of ``reg`` on ``target``, then its fit on all pairs and mean ``|SHAP|``
        per feature (appended to ``rows``)."""
        scores, k = cross_validate(reg, sub, y, g, n_folds=cfg.folds,
                                   seed=cfg.seed, n_jobs=cfg.n_jobs)
        model = fit_all(reg, sub, y, cfg)
        self.models_[(target, reg)] = model
        explained = sample(rng, len(y), shap_rows(reg, cfg))
        background = sample(rng, len(y), cfg.shap_background)
        exp = explain(reg, model, sub, rows=explained, background=background,
                      seed=cfg.seed)
        self.explanations_[(target, reg)] = exp
        mean_abs = np.abs(exp.values).mean(axis=0)
        rows += [{"target": target, "regressor": reg, "feature": f,
                  "importance": float(v)} for f, v in zip(sub.names, mean_abs)]
        return {"r2": float(np.nanmean(scores)),
                "r2_std": float(np.nanstd(scores, ddof=1)) if k > 1 else np.nan,
                "n_folds": k}

    def _tables(self, fits: list[dict], rows: list[dict], half_rows: list[dict],
                cfg: AttributeConfig) -> None:
        """``fit_``, ``half_importance_``, ``importance_`` (ranked) and ``diff_``."""
        fit = pd.DataFrame(fits, columns=["target", "regressor", "r2", "r2_std", "n_pairs",
                                          "n_dropped_nan", "n_folds", *STABILITY_COLUMNS])
        fit.insert(4, "informative", informative_column(fit))
        self.fit_ = fit
        self.half_importance_ = pd.DataFrame(half_rows, columns=["target", "regressor", "half",
                                                                 "feature", "importance"])
        imp = pd.DataFrame(rows, columns=["target", "regressor", "feature", "importance"])
        imp["rank"] = imp.groupby(["target", "regressor"]).importance.rank(
            ascending=False, method="first").astype(int)
        useful = {(t, r) for t, r, ok in zip(fit.target, fit.regressor, fit.informative) if ok}
        imp["informative"] = np.array([(t, r) in useful for t, r in zip(imp.target,
                                                                         imp.regressor)], bool)
        order = {t: i for i, t in enumerate(cfg.targets)}
        imp = imp.assign(_t=imp.target.map(order))
        self.importance_ = imp.sort_values(["_t", "regressor", "rank"], ignore_index=True).drop(
            columns="_t")
        self.diff_ = tm_tg_difference(self.importance_)

    def _halves(self, table, halves: Halves | None, cfg: AttributeConfig):
        """Each half's targets as (n_pairs,)-aligned tables, or None and the reason."""
        if not cfg.stability:
            return None, "stability is off"
        if halves is None:
            return None, "no halves of the runs given"
        if "id" not in table.columns:
            self.notes_.append("stability: the table has no 'id' column to match the halves")
            return None, "the table has no 'id' column to match the halves"
        return [h.drop_duplicates("id").set_index("id").reindex(table["id"]) for h in
                (halves.first, halves.second)], halves.note

    def _identifiers(self, table, groups, group_by, cfg: AttributeConfig) -> dict[str, str]:
        """Identifier-like columns to leave out (those ``cfg.features`` keeps aside)."""
        found = identifier_columns(table, groups=groups, group_by=group_by,
                                   max_unique_fraction=cfg.max_unique_fraction,
                                   exclude=cfg.exclude)
        usable = set(metadata_columns(table, cfg.exclude))
        unknown = [c for c in cfg.features if c not in usable and c != SAE_FEATURES]
        if unknown:
            shown = ", ".join(found) or "none here"
            raise ParamError("features", type(cfg).__name__,
                             f"metadata columns of the table (left out by default: {shown})",
                             tuple(cfg.features))
        left = {c: why for c, why in found.items() if c not in cfg.features}
        if left:
            listed = "; ".join(f"{c} ({why})" for c, why in left.items())
            self.notes_.append(f"identifier-like columns left out of the features (name one in "
                               f"`features` to use it): {listed}")
        back = [c for c in cfg.features if c in found]
        if back:
            self.notes_.append(f"used as features although identifier-like: {', '.join(back)}")
        return left

    def top(self, target: str, regressor: str = "lightgbm", k: int = 3) -> list[str]:
        """The ``k`` most important features for one target and regressor.

        Parameters
        ----------
        target : str
            ``"tm"``, ``"tg"`` or ``"cm"``.
        regressor : str, default="lightgbm"
            A regressor of the fit.
        k : int, default=3
            How many features.

        Returns
        -------
        list of str
            Feature names, most important first (by ``importance_``'s rank), whatever the
            fit's held-out R^2: check ``fit_.informative`` before reading them as a ranking.
        """
        imp = self.importance_
        rows = imp[(imp.target == target) & (imp.regressor == regressor)]
        return rows.nsmallest(k, "rank").feature.tolist()


def _joined(features: pd.DataFrame, table: pd.DataFrame, extra: pd.DataFrame) -> pd.DataFrame:
    """``features`` with the columns of ``extra`` beside them, matched on ``id``."""
    if "id" not in table.columns or "id" not in extra.columns:
        raise InputError("extra pair features need an 'id' column, as the table has")
    more = extra.drop_duplicates("id")
    more = more.set_index(more["id"].astype(str)).drop(columns="id")
    more = more.reindex(table["id"].astype(str).to_numpy())
    more.index = features.index
    attrs = features.attrs
    out = pd.concat([features, more.astype(float)], axis=1)
    out.attrs = attrs
    return out


def _check_targets(table: pd.DataFrame, cfg: AttributeConfig) -> None:
    """Refuse a table without the target columns."""
    missing = [t for t in cfg.targets if t not in table.columns]
    if missing:
        raise InputError(f"memorization table: target columns {missing} are missing "
                         f"(found {list(table.columns)})")


def tm_tg_difference(importance: pd.DataFrame) -> pd.DataFrame:
    """Per regressor and feature: importance for TM, for TG, and TM minus TG.

    Positive ``diff``: the feature explains what the RMs fit on pairs they trained on (TM)
    more than what they predict on held-out pairs (TG), i.e. memorization.

    Parameters
    ----------
    importance : DataFrame
        ``target, regressor, feature, importance`` (an Attributor's ``importance_``).

    Returns
    -------
    DataFrame
        ``regressor, feature, importance_tm, importance_tg, diff``, by regressor and
        decreasing ``diff``; empty when TM or TG is not a target.
    """
    cols = ["regressor", "feature", "importance_tm", "importance_tg", "diff"]
    if not {"tm", "tg"} <= set(importance.target):
        return pd.DataFrame(columns=cols)
    wide = importance[importance.target.isin(["tm", "tg"])].pivot_table(
        index=["regressor", "feature"], columns="target", values="importance", fill_value=0.0
    )
    out = pd.DataFrame({"importance_tm": wide["tm"], "importance_tg": wide["tg"]}).reset_index()
    out["diff"] = out.importance_tm - out.importance_tg
    return out.sort_values(["regressor", "diff"], ascending=[True, False], ignore_index=True)[cols]
