"""Regressors of TM, TG and CM on pair features: group-aware cross-validation and SHAP.

One design matrix serves both regressors: numeric features as floats (NaN kept), each
categorical feature as one column of category codes. LightGBM splits on the codes as
categories; the MLP one-hot encodes them inside its pipeline. SHAP values are computed on
this matrix, so a categorical feature gets one SHAP value per pair, equal to the sum over its
one-hot columns (masking the feature masks all of them together).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rmlens.attribution._config import REGRESSORS
from rmlens.attribution._features import _AUDIT_COLUMN, NON_FEATURE_COLUMNS

OTHER = "(other)"


@dataclass
class Design:
    """Feature matrix shared by the regressors.

    Attributes
    ----------
    X : ndarray, shape (n_pairs, n_features)
        Floats; categorical columns hold codes 0..k-1, NaN when missing.
    names : list of str, length n_features
    categorical : ndarray of bool, shape (n_features,)
    categories : dict of str to list of str
        Code -> category label, per categorical feature.
    dropped : dict of str to str
        Feature columns left out, with the reason.
    """

    X: np.ndarray
    names: list[str]
    categorical: np.ndarray
    categories: dict[str, list[str]] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)


def design_matrix(features: pd.DataFrame, *, max_categories: int = 30) -> Design:
    """Encode a feature table: constant columns dropped, rare categories pooled.

    Parameters
    ----------
    features : DataFrame, shape (n_pairs, n_columns)
        Output of ``pair_features`` (float and ``category`` columns).
    max_categories : int, default=30
        Per categorical feature, the most frequent ``max_categories - 1`` categories keep
        their own code; the rest are pooled as "(other)".
    """
    cols, names, cat, categories, dropped = [], [], [], {}, {}
    for name in features.columns:
        s = features[name]
        if name in NON_FEATURE_COLUMNS or _AUDIT_COLUMN.match(str(name)):
            dropped[name] = "not a feature (pair identity or audit output)"
            continue
        if s.nunique(dropna=True) <= 1:
            dropped[name] = "constant"
            continue
        if isinstance(s.dtype, pd.CategoricalDtype) or not pd.api.types.is_numeric_dtype(s):
            s = s.astype(object).where(s.notna(), None)
            counts = s.value_counts()
            keep = list(counts.index[: max_categories - 1 if len(counts) > max_categories
                                     else len(counts)])
            labels = keep + ([OTHER] if len(counts) > len(keep) else [])
            index = {v: i for i, v in enumerate(keep)}
            other = len(keep)
            codes = s.map(lambda v, index=index, other=other: np.nan if v is None
                          else index.get(v, other)).astype(float)
            cols.append(codes.to_numpy())
            categories[name] = [str(v) for v in labels]
            cat.append(True)
        else:
            cols.append(s.to_numpy(dtype=float))
            cat.append(False)
        names.append(name)
    X = np.column_stack(cols) if cols else np.zeros((len(features), 0))
    return Design(X, names, np.array(cat, dtype=bool), categories, dropped)


def make_regressor(
    kind: str, design: Design, *, seed: int = 0, n_jobs: int = 1, n_rows: int | None = None
):
    """An unfitted regressor taking ``design.X`` (LightGBM or a scaled, one-hot MLP).

    ``n_rows``: training rows it will see (default all of ``design``); the MLP stops early
    on a 10% validation split from 1,000 rows on (a split of 100+ rows); below that it
    runs all iterations, regularized by its L2 penalty.
    """
    cat_idx = np.flatnonzero(design.categorical).tolist()
    if kind == "lightgbm":
        import lightgbm as lgb

        return _LGBM(
            lgb.LGBMRegressor(
                n_estimators=300, learning_rate=0.03, num_leaves=15, min_child_samples=10,
                subsample=0.8, subsample_freq=1, colsample_bytree=0.8, reg_lambda=1.0,
                max_cat_to_onehot=64, random_state=seed, n_jobs=n_jobs, verbose=-1,
            ),
            cat_idx,
        )
    if kind == "mlp":
        from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
        from sklearn.impute import SimpleImputer
        from sklearn.neural_network import MLPRegressor
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import OneHotEncoder, StandardScaler

        num_idx = np.flatnonzero(~design.categorical).tolist()
        pre = ColumnTransformer([
            ("num", make_pipeline(SimpleImputer(strategy="median", keep_empty_features=True),
                                  StandardScaler()), num_idx),
            ("cat", make_pipeline(SimpleImputer(strategy="constant", fill_value=-1.0),
                                  OneHotEncoder(handle_unknown="ignore")), cat_idx),
        ])
        mlp = MLPRegressor(
            hidden_layer_sizes=(32,), alpha=1.0, learning_rate_init=1e-3, max_iter=300,
            early_stopping=(n_rows or len(design.X)) >= 1000, n_iter_no_change=20,
            random_state=seed,
        )
        return TransformedTargetRegressor(make_pipeline(pre, mlp), transformer=StandardScaler())
    raise ValueError(f"unknown regressor {kind!r}; expected one of {REGRESSORS}")


class _LGBM:
    """LightGBM regressor that knows which design columns are categorical."""

    def __init__(self, model, cat_idx: list[int]):
        self.model, self.cat_idx = model, cat_idx

    def fit(self, X: np.ndarray, y: np.ndarray) -> _LGBM:
        self.model.fit(X, y, categorical_feature=self.cat_idx or "auto")
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.model.predict(X)


def cross_validate(
    kind: str, design: Design, y: np.ndarray, groups: np.ndarray, *, n_folds: int = 5,
    seed: int = 0, n_jobs: int = 1,
) -> tuple[np.ndarray, int]:
    """Held-out R^2 per fold of group K-fold (no group in both train and test).

    Returns the R^2 of each fold and the number of folds (fewer than ``n_folds`` when there
    are fewer groups).
    """
    from sklearn.metrics import r2_score
    from sklearn.model_selection import GroupKFold

    k = min(n_folds, len(np.unique(groups)))
    if k < 2:
        raise ValueError("cross-validation needs at least 2 groups")
    scores = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for train, test in GroupKFold(n_splits=k, shuffle=True, random_state=seed).split(
            design.X, y, groups
        ):
            model = make_regressor(kind, design, seed=seed, n_jobs=n_jobs, n_rows=len(train))
            model = model.fit(design.X[train], y[train])
            score = r2_score(y[test], model.predict(design.X[test])) if len(test) > 1 else np.nan
            scores.append(score)
    return np.asarray(scores, dtype=float), k


def mlp_forward(model):
    """The fitted MLP pipeline as one numpy function of the design matrix, for SHAP's many
    calls: impute and scale numeric columns, one-hot the codes, ReLU layers, undo the target
    scaling. Same output as ``model.predict`` (tested), several times faster."""
    pipe = model.regressor_
    pre, mlp = pipe[0], pipe[-1]
    num_idx, cat_idx = pre.transformers_[0][2], pre.transformers_[1][2]
    imputer, scaler = pre.named_transformers_["num"][0], pre.named_transformers_["num"][-1]
    fill = np.nan_to_num(np.asarray(imputer.statistics_, dtype=float))
    cats = pre.named_transformers_["cat"][-1].categories_ if len(cat_idx) else []
    y_scale = model.transformer_

    def forward(X: np.ndarray) -> np.ndarray:
        num = X[:, num_idx]
        num = (np.where(np.isnan(num), fill, num) - scaler.mean_) / scaler.scale_
        parts = [num]
        for j, c in zip(cat_idx, cats):
            parts.append((np.nan_to_num(X[:, j], nan=-1.0)[:, None] == c[None, :]).astype(float))
        h = np.hstack(parts)
        for W, b in zip(mlp.coefs_[:-1], mlp.intercepts_[:-1]):
            h = np.maximum(h @ W + b, 0.0)
        out = h @ mlp.coefs_[-1] + mlp.intercepts_[-1]
        return (out * y_scale.scale_ + y_scale.mean_).ravel()

    return forward


def permutation_shap(
    f, X: np.ndarray, background: np.ndarray, *, permutations: int = 1, seed: int = 0
) -> tuple[np.ndarray, float]:
    """Permutation SHAP values of any function, vectorized over the explained rows.

    The estimator of ``shap.PermutationExplainer``: per row, a random order of the features;
    a forward pass switches them one by one from background values to the row's value, a
    backward pass switches them back; a feature's value is the mean change of
    ``E_background[f]`` when it switches (Strumbelj & Kononenko 2014; antithetic passes).
    Exact for additive ``f``, and each row's values sum to ``f(x) - E_background[f]``.

    Parameters
    ----------
    f : callable, (m, n_features) -> (m,)
    X : ndarray, shape (n_rows, n_features)
    background : ndarray, shape (n_background, n_features)
    permutations : int, default=1

    Returns
    -------
    values : ndarray, shape (n_rows, n_features)
    base : float
        ``E_background[f]``.
    """
    rng = np.random.default_rng(seed)
    n, p = X.shape
    b = len(background)

    def value(mask: np.ndarray) -> np.ndarray:  # E_bg f(x with features outside mask from bg)
        mixed = np.where(mask[:, None, :], X[:, None, :], background[None, :, :])
        return f(mixed.reshape(n * b, p)).reshape(n, b).mean(axis=1)

    rows = np.arange(n)
    values = np.zeros((n, p))
    base = float(np.mean(f(background)))
    for _ in range(permutations):
        order = np.argsort(rng.random((n, p)), axis=1)  # one permutation per row
        for forward in (True, False):
            mask = np.full((n, p), not forward)
            previous = value(mask)
            for k in range(p):
                mask[rows, order[:, k]] = forward
                current = value(mask)
                change = current - previous if forward else previous - current
                values[rows, order[:, k]] += change
                previous = current
    return values / (2 * permutations), base


def explain(
    kind: str, model, design: Design, *, rows: np.ndarray, background: np.ndarray, seed: int = 0
):
    """SHAP values of a fitted regressor on ``design.X[rows]``.

    LightGBM: exact TreeSHAP (``shap.TreeExplainer``). MLP: ``permutation_shap`` (model
    agnostic) with ``design.X[background]`` as the background distribution.

    Returns
    -------
    shap.Explanation, values shape (len(rows), n_features)
    """
    import shap

    X = design.X[rows]
    if kind == "lightgbm":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            explanation = shap.TreeExplainer(model.model)(X)
    else:
        values, base = permutation_shap(mlp_forward(model), X, design.X[background], seed=seed)
        explanation = shap.Explanation(values, base_values=np.full(len(X), base), data=X)
    explanation.feature_names = list(design.names)
    return explanation
