"""What drives memorization: regress TM, TG and CM on pair features, explain with SHAP.

DESIGN.md section 3, last paragraph. Per target and regressor: group K-fold held-out R^2
(no group of the audit in both train and test), then a fit on all pairs and mean |SHAP| per
feature. A feature much more important for TM than for TG is one the RMs use to memorize
rather than to generalize (the TM-vs-TG difference table). The same fit on the targets of
each half of the audit's runs says how stable the feature ranking is (``_stability``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

import rmlens
from rmlens._errors import InputError
from rmlens._io import write_json, write_parquet
from rmlens._params import ParamError
from rmlens.attribution._config import AttributeConfig
from rmlens.attribution._features import pair_features
from rmlens.attribution._identifiers import identifier_columns, metadata_columns
from rmlens.attribution._regress import (
    cross_validate,
    design_matrix,
    explain,
    make_regressor,
)
from rmlens.attribution._stability import (
    NOISE_FITS,
    STABILITY_COLUMNS,
    Halves,
    compare_importance,
    run_halves,
    stability_warnings,
)


class Attributor:
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
        ``target, regressor, r2, r2_std, n_pairs, n_dropped_nan, n_folds``: held-out R^2
        (mean and std over group K-fold folds); then the stability of the ranking between
        the halves of the runs (``_stability``): ``rank_spearman``, ``top10_overlap``,
        ``top10_half1``, ``top10_half2`` (lists of features), the chance level of the two
        figures (``rank_spearman_noise``, ``top10_overlap_noise``: fits to pure noise) and
        ``stability_note`` (what the halves are, or why the figures are NaN).
    importance_ : DataFrame
        ``target, regressor, feature, importance, rank``: mean |SHAP| of the model fit on
        all pairs, rank 1 = most important.
    diff_ : DataFrame
        ``regressor, feature, importance_tm, importance_tg, diff`` (TM minus TG), sorted by
        ``diff``, largest first; empty unless both tm and tg are targets.
    left_out_ : dict of str to str
        Identifier-like metadata columns left out of the features (``identifier_columns``),
        with the reason; ``config.features`` brings one back.
    halves_ : Halves or None
        The halves of the runs given to ``fit`` (None with ``config.stability`` off).
    half_importance_ : DataFrame
        ``target, regressor, half, feature, importance``: mean |SHAP| of the fits on each
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

    def __init__(self, *, config: AttributeConfig | None = None):
        self.config = config

    def get_params(self) -> dict:
        return {"config": self.config}

    def fit(
        self,
        table: pd.DataFrame,
        *,
        features: pd.DataFrame | None = None,
        groups: pd.Series | np.ndarray | None = None,
        group_by: str | None = None,
        tokenizer=None,
        halves: Halves | None = None,
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
        quiet : bool, default=True
            No progress bar.
        """
        cfg = self.config or AttributeConfig()
        cfg.check()  # ParamError (an InputError) names the field
        missing = [t for t in cfg.targets if t not in table.columns]
        if missing:
            raise InputError(f"memorization table: target columns {missing} are missing "
                             f"(found {list(table.columns)})")
        self.notes_ = []
        known_groups = groups is not None or "group" in table.columns
        if groups is None:
            if "group" in table.columns:
                groups = table["group"]
            else:
                groups = np.arange(len(table))
                self.notes_.append("no 'group' column: each pair is its own group")
        groups = pd.Series(np.asarray(groups)).astype(str).to_numpy()
        self.left_out_ = self._identifiers(table, groups if known_groups else None, group_by,
                                           cfg)
        if features is None:
            features = pair_features(table, tokenizer=tokenizer,
                                     exclude=(*cfg.exclude, *self.left_out_))
            skipped = features.attrs.get("skipped", {})
            skipped.update({c: f"identifier-like: {why}" for c, why in self.left_out_.items()})
            features.attrs["skipped"] = skipped
        else:
            features = features.drop(columns=[c for c in self.left_out_ if c in features])
        self.features_ = features
        self.design_ = design = design_matrix(features, max_categories=cfg.max_categories)
        if len(np.unique(groups)) < 2:
            groups = np.arange(len(table)).astype(str)
            self.notes_.append("fewer than 2 groups: K-fold over pairs instead of groups")

        from rmlens.progress import progress_bar

        fits, rows, self.explanations_, self.models_ = [], [], {}, {}
        half_rows: list[dict] = []
        noise: dict[str, dict] = {}  # per regressor: the figures of fits to pure noise
        rng = np.random.default_rng(cfg.seed)
        given = halves
        halves, why = self._halves(table, halves, cfg)  # aligned to the rows of table
        self.halves_ = given if halves is not None else None
        steps = len(cfg.targets) * len(cfg.regressors) * (3 if halves else 1)
        with progress_bar("attribution", total=steps, quiet=quiet) as advance:
            for target in cfg.targets:
                y_all = pd.to_numeric(table[target], errors="coerce").to_numpy(dtype=float)
                keep = np.flatnonzero(np.isfinite(y_all))
                n_nan = len(y_all) - len(keep)
                if n_nan:
                    self.notes_.append(f"{target}: {n_nan} pairs with NaN dropped")
                sub = _subset(design, keep)
                y, g = y_all[keep], groups[keep]
                for reg in cfg.regressors:
                    fit = {"target": target, "regressor": reg, "n_pairs": len(keep),
                           "n_dropped_nan": n_nan,
                           **_no_stability("no regressor fit" if halves else why)}
                    if len(keep) < 10 or len(np.unique(g)) < 2 or not sub.names:
                        self.notes_.append(f"{target}/{reg}: too few pairs, groups or features")
                        fits.append({**fit, "r2": np.nan, "r2_std": np.nan, "n_folds": 0})
                        advance(3 if halves else 1)
                        continue
                    scores, k = cross_validate(reg, sub, y, g, n_folds=cfg.folds,
                                               seed=cfg.seed, n_jobs=cfg.n_jobs)
                    fit.update({"r2": float(np.nanmean(scores)),
                                "r2_std": float(np.nanstd(scores, ddof=1)) if k > 1 else np.nan,
                                "n_folds": k})
                    model = _fit_all(reg, sub, y, cfg)
                    self.models_[(target, reg)] = model
                    n_rows = cfg.shap_rows if reg == "lightgbm" else cfg.mlp_shap_rows
                    explained = _sample(rng, len(y), n_rows)
                    background = _sample(rng, len(y), cfg.shap_background)
                    exp = explain(reg, model, sub, rows=explained, background=background,
                                  seed=cfg.seed)
                    self.explanations_[(target, reg)] = exp
                    mean_abs = np.abs(exp.values).mean(axis=0)
                    rows += [{"target": target, "regressor": reg, "feature": f,
                              "importance": float(v)} for f, v in zip(sub.names, mean_abs)]
                    advance(1)
                    if halves:
                        fit.update(_stability(target, reg, design, halves, why, cfg, n_rows,
                                              half_rows, noise))
                        advance(2)
                    fits.append(fit)
        self.fit_ = pd.DataFrame(fits, columns=["target", "regressor", "r2", "r2_std", "n_pairs",
                                                "n_dropped_nan", "n_folds", *STABILITY_COLUMNS])
        self.half_importance_ = pd.DataFrame(half_rows, columns=["target", "regressor", "half",
                                                                 "feature", "importance"])
        imp = pd.DataFrame(rows, columns=["target", "regressor", "feature", "importance"])
        imp["rank"] = imp.groupby(["target", "regressor"]).importance.rank(
            ascending=False, method="first").astype(int)
        order = {t: i for i, t in enumerate(cfg.targets)}
        imp = imp.assign(_t=imp.target.map(order))
        self.importance_ = imp.sort_values(["_t", "regressor", "rank"], ignore_index=True).drop(
            columns="_t")
        self.diff_ = tm_tg_difference(self.importance_)
        return self

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
        unknown = [c for c in cfg.features if c not in usable]
        if unknown:
            shown = ", ".join(found) or "none here"
            raise ParamError("features", type(cfg).__name__,
                             f"metadata columns of the table (left out by default: {shown})",
                             tuple(cfg.features))
        left = {c: why for c, why in found.items() if c not in cfg.features}
        if left:
            listed = "; ".join(f"{c} ({why})" for c, why in left.items())
            self.notes_.append(f"identifier-like columns left out of the features (name one in "
                               f"--features to use it): {listed}")
        back = [c for c in cfg.features if c in found]
        if back:
            self.notes_.append(f"used as features although identifier-like: {', '.join(back)}")
        return left

    def top(self, target: str, regressor: str = "lightgbm", k: int = 3) -> list[str]:
        """The ``k`` most important features for one target and regressor."""
        imp = self.importance_
        rows = imp[(imp.target == target) & (imp.regressor == regressor)]
        return rows.nsmallest(k, "rank").feature.tolist()


def _no_stability(why: str) -> dict:
    return {"rank_spearman": np.nan, "top10_overlap": np.nan, "top10_half1": [],
            "top10_half2": [], "rank_spearman_noise": np.nan, "top10_overlap_noise": np.nan,
            "stability_note": f"not computed: {why}"}


def _stability(target, reg, design, halves, note, cfg, n_rows, half_rows, noise) -> dict:
    """Fit ``reg`` and SHAP on each half's ``target``; compare the two importances, and
    give the same figures for fits to pure noise (``noise``: per regressor, cached).

    Both halves use the same pairs (finite in both), the same explained rows and the same
    background, so the rankings differ only through the targets.
    """
    ys = [pd.to_numeric(h[target], errors="coerce").to_numpy(dtype=float) for h in halves]
    keep = np.flatnonzero(np.isfinite(ys[0]) & np.isfinite(ys[1]))
    if len(keep) < 10 or not _subset(design, keep).names:
        return _no_stability(f"too few pairs with {target} in both halves ({len(keep)})")
    first, second = _half_importances(reg, design, keep, [y[keep] for y in ys], cfg, n_rows)
    half_rows.extend({"target": target, "regressor": reg, "half": half, "feature": f,
                      "importance": float(v)}
                     for half, imp in ((1, first), (2, second)) for f, v in imp.items())
    if reg not in noise:
        noise[reg] = _chance(reg, design, cfg, n_rows)
    return {**compare_importance(first, second),
            "rank_spearman_noise": noise[reg]["rank_spearman"],
            "top10_overlap_noise": noise[reg]["top10_overlap"], "stability_note": note}


def _chance(reg, design, cfg, n_rows) -> dict:
    """The chance level of the figures: fits to ``NOISE_FITS`` pure-noise targets on all
    pairs, the mean of ``rank_spearman`` and ``top10_overlap`` over their pairs (see
    ``_stability``)."""
    rng = np.random.default_rng([cfg.seed, 2])
    every = np.arange(len(design.X))
    pure = [rng.standard_normal(len(every)) for _ in range(NOISE_FITS)]
    imps = _half_importances(reg, design, every, pure, cfg, n_rows)
    pairs = [compare_importance(imps[i], imps[j]) for i in range(len(imps))
             for j in range(i + 1, len(imps))]
    return {k: float(np.nanmean([p[k] for p in pairs])) for k in ("rank_spearman",
                                                                  "top10_overlap")}


def _half_importances(reg, design, rows, ys, cfg, n_rows) -> list[pd.Series]:
    """Mean |SHAP| per feature of ``reg`` fit to each target of ``ys`` on ``design.X[rows]``,
    explained on the same sampled rows with the same background."""
    sub = _subset(design, rows)
    rng = np.random.default_rng([cfg.seed, 1])
    explained = _sample(rng, len(rows), n_rows)
    background = _sample(rng, len(rows), cfg.shap_background)
    out = []
    for y in ys:
        model = _fit_all(reg, sub, y, cfg)
        exp = explain(reg, model, sub, rows=explained, background=background, seed=cfg.seed)
        out.append(pd.Series(np.abs(exp.values).mean(axis=0), index=sub.names))
    return out


def _subset(design, rows: np.ndarray):
    from rmlens.attribution._regress import Design

    X = design.X[rows]
    varying = np.array([np.unique(c[np.isfinite(c)]).size > 1 for c in X.T], dtype=bool) \
        if X.shape[1] else np.zeros(0, dtype=bool)
    names = [n for n, v in zip(design.names, varying) if v]
    return Design(X[:, varying], names, design.categorical[varying],
                  {n: c for n, c in design.categories.items() if n in names}, design.dropped)


def _fit_all(kind: str, design, y: np.ndarray, cfg: AttributeConfig):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_regressor(kind, design, seed=cfg.seed, n_jobs=cfg.n_jobs).fit(design.X, y)


def _sample(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    return np.sort(rng.choice(n, size=k, replace=False)) if k < n else np.arange(n)


def tm_tg_difference(importance: pd.DataFrame) -> pd.DataFrame:
    """Per regressor and feature: importance for TM, for TG, and TM minus TG.

    Positive ``diff``: the feature explains what the RMs fit on pairs they trained on (TM)
    more than what they predict on held-out pairs (TG), i.e. memorization.
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


def _resolve_tokenizer(spec: str | None, record: dict):
    if spec is None or str(spec).lower() == "none":
        return None, "len_tokens off (no tokenizer)"
    model = record.get("audit", {}).get("model") if spec == "auto" else spec
    if not model:
        return None, "len_tokens off: config.json names no model"
    from transformers import AutoTokenizer

    from rmlens.backbones._presets import resolve_model

    try:
        source, _ = resolve_model(model)
        tok = AutoTokenizer.from_pretrained(source, local_files_only=True)
    except Exception as err:  # noqa: BLE001 - a missing tokenizer only drops len_tokens
        if spec != "auto":
            raise InputError(f"`tokenizer` {spec}: cannot load a tokenizer ({err})") from err
        return None, f"len_tokens off: tokenizer of '{model}' not loadable offline ({err})"
    return tok, f"len_tokens with the tokenizer of '{model}'"


def attribute(
    out_dir: str | Path, *, config: AttributeConfig | None = None, quiet: bool = False
) -> Attributor:
    """Attribute an audit's TM, TG and CM to pair features; write the results into the dir.

    Reads ``DIR/memorization.parquet`` (and ``DIR/config.json`` for the audit's model), then
    writes, each atomically: ``attribution.parquet`` (``target, regressor, feature,
    importance, rank``; importance = mean |SHAP|), ``attribution_fit.parquet`` (``target,
    regressor, r2, r2_std, n_pairs, n_dropped_nan, n_folds`` and the stability columns of
    ``Attributor.fit_``), ``attribution_diff.parquet`` (TM-vs-TG), ``attribution.json``
    (resolved config, notes, skipped features, the identifier-like columns left out as
    ``left_out``, ``stability``: the halves and, per target and regressor, rank_spearman,
    top10_overlap and the two top-10 lists, with plain warnings) and the plots
    ``attribution_importance.png``, ``attribution_beeswarm_<regressor>.png``,
    ``attribution_diff.png``.

    With ``config.stability`` (default), TM, TG and CM are also estimated from each half of
    the audit's runs (``run_halves``: alternating whole repeats of the plan) and every
    regressor is fit to each half's targets, to say how stable the feature ranking is; when
    ``out_dir`` has no runs or fewer than 2 whole repeats, the figures are NaN and the
    ``stability_note`` says why.

    Parameters
    ----------
    out_dir : path
        Experiment directory of ``rmlens memorize``.
    config : AttributeConfig, optional
    quiet : bool, default=False
        No progress bar.

    Returns
    -------
    Attributor
        Fitted; its tables are the ones written.

    Raises
    ------
    InputError
        No memorization table in ``out_dir``, or it lacks the target columns.
    """
    cfg = config or AttributeConfig()
    cfg.check()  # ParamError (an InputError) names the field
    out = Path(out_dir)
    path = out / "memorization.parquet"
    if not path.is_file():
        raise InputError(f"{path}: not found; run `rmlens memorize --out {out}` first")
    try:
        table = pd.read_parquet(path)
    except Exception as err:  # noqa: BLE001 - any unreadable file is bad input
        raise InputError(f"{path}: not a readable parquet file ({err})") from err
    record = {}
    if (out / "config.json").is_file():
        record = json.loads((out / "config.json").read_text())
    tokenizer, tok_note = _resolve_tokenizer(cfg.tokenizer, record)
    halves, why = None, None
    if cfg.stability:
        try:
            halves = run_halves(out, record)
        except InputError as err:  # no runs here (a copied table): the figures stay NaN
            why = str(err)
    attributor = Attributor(config=cfg).fit(table, group_by=record.get("group_by"),
                                            tokenizer=tokenizer, halves=halves, quiet=quiet)
    if why:
        attributor.fit_["stability_note"] = f"not computed: {why}"
    write_parquet(attributor.importance_, out / "attribution.parquet")
    write_parquet(attributor.fit_, out / "attribution_fit.parquet")
    write_parquet(attributor.diff_, out / "attribution_diff.parquet")
    plots = []
    if cfg.plots and len(attributor.importance_):
        from rmlens.attribution._plots import plot_beeswarm, plot_diff, plot_importance

        plots.append(plot_importance(attributor.importance_, out / "attribution_importance.png"))
        for reg in cfg.regressors:
            if any(r == reg for _, r in attributor.explanations_):
                plots.append(plot_beeswarm(attributor.explanations_, reg,
                                           out / f"attribution_beeswarm_{reg}.png"))
        if len(attributor.diff_):
            plots.append(plot_diff(attributor.diff_, out / "attribution_diff.png"))
    write_json({
        "version": rmlens.__version__,
        "attribute": cfg.to_dict(),
        "group_by": record.get("group_by"),
        "n_pairs": len(table),
        "tokenizer": tok_note,
        "features": attributor.design_.names,
        "left_out": attributor.left_out_,
        "skipped": {**attributor.features_.attrs.get("skipped", {}),
                    **attributor.design_.dropped},
        "notes": attributor.notes_,
        "stability": stability_record(attributor),
        "plots": [p.name for p in plots],
    }, out / "attribution.json")
    return attributor


def stability_record(attributor: Attributor) -> dict:
    """``attribution.json``'s ``stability``: the halves of the runs (None when not
    computed), per target and regressor the two figures and top-10 lists (NaN as null), and
    the plain warnings."""
    fit = attributor.fit_
    cols = ["target", "regressor", *STABILITY_COLUMNS]

    def plain(value):
        if isinstance(value, (list, tuple, np.ndarray)):
            return [str(v) for v in value]
        if isinstance(value, float) and not np.isfinite(value):
            return None
        return value

    entries = [{k: plain(v) for k, v in row.items()} for row in fit[cols].to_dict("records")]
    halves = attributor.halves_
    return {"halves": halves.to_dict() if halves is not None else None, "by_target": entries,
            "warnings": stability_warnings(fit)}
