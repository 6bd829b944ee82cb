"""Regressors and SHAP: planted targets are recovered, folds respect groups, tables add up."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rmlens.attribution import AttributeConfig, Attributor, tm_tg_difference
from rmlens.attribution._regress import design_matrix, make_regressor, mlp_forward, permutation_shap

FAST = dict(folds=3, tokenizer=None, shap_rows=150, mlp_shap_rows=30, shap_background=15)
VOCAB = ("the", "a", "cat", "dog", "sat", "ran", "on", "mat", "happy", "sad", "good", "bad",
         "big", "small", "quick", "slow")


def planted_table(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """TM is a function of the margin, TG of the `source` category, each plus noise."""
    rng = np.random.default_rng(seed)

    def text() -> str:
        return " ".join(rng.choice(VOCAB, rng.integers(3, 40))) + "."

    table = pd.DataFrame({
        "id": [f"p{i}" for i in range(n)],
        "prompt": ["Tell me something."] * n,
        "chosen": [text() for _ in range(n)],
        "rejected": [text() for _ in range(n)],
        "user_id": [f"u{i % 15}" for i in range(n)],
        "margin": rng.uniform(0, 1, n),
        "source": rng.choice(["forum", "chat", "mail"], n),
        "mechanism": rng.choice(["quality", "noise"], n),
    })
    table["group"] = table.user_id
    effect = table.source.map({"forum": 0.2, "chat": 0.5, "mail": 0.8}).to_numpy()
    table["tg"] = effect + rng.normal(0, 0.05, n)
    table["tm"] = 0.3 + 0.6 * table.margin + rng.normal(0, 0.05, n)
    table["cm"] = table.tm - table.tg
    return table


@pytest.fixture(scope="module")
def fitted() -> Attributor:
    return Attributor(config=AttributeConfig(targets=("tm", "tg"), **FAST)).fit(planted_table())


@pytest.mark.parametrize("regressor", ["lightgbm", "mlp"])
def test_planted_feature_ranks_first_with_high_r2(fitted, regressor):
    fit = fitted.fit_.set_index(["target", "regressor"])
    assert fit.loc[("tm", regressor), "r2"] > 0.5
    assert fit.loc[("tg", regressor), "r2"] > 0.5
    assert fitted.top("tm", regressor, 1) == ["margin"]
    assert fitted.top("tg", regressor, 1) == ["source"]


def test_tables_have_the_contract_columns(fitted):
    assert list(fitted.fit_.columns[:4]) == ["target", "regressor", "r2", "r2_std"]
    assert list(fitted.importance_.columns[:4]) == ["target", "regressor", "feature", "importance"]
    assert (fitted.fit_.n_folds == 3).all()
    assert fitted.fit_.r2_std.notna().all()
    assert "mechanism" not in set(fitted.importance_.feature)
    assert (fitted.importance_.importance >= 0).all()
    diff = fitted.diff_.set_index(["regressor", "feature"])
    assert diff.loc[("lightgbm", "margin"), "diff"] > 0  # margin drives TM, not TG
    assert diff.loc[("lightgbm", "source"), "diff"] < 0
    assert set(fitted.explanations_) == {(t, r) for t in ("tm", "tg") for r in ("lightgbm", "mlp")}


@pytest.mark.parametrize("regressor", ["lightgbm", "mlp"])
def test_shap_values_add_up_to_the_prediction(fitted, regressor):
    exp = fitted.explanations_[("tm", regressor)]
    prediction = fitted.models_[("tm", regressor)].predict(exp.data)
    np.testing.assert_allclose(exp.base_values + exp.values.sum(axis=1), prediction, atol=1e-6)


def test_nan_targets_are_dropped_and_counted():
    table = planted_table(200)
    table.loc[:9, "tm"] = np.nan
    cfg = AttributeConfig(targets=("tm",), regressors=("lightgbm",), **FAST)
    a = Attributor(config=cfg).fit(table)
    assert a.fit_.n_dropped_nan.iloc[0] == 10
    assert a.fit_.n_pairs.iloc[0] == 190
    assert any("10 pairs with NaN" in note for note in a.notes_)


def test_group_folds_keep_group_effects_out_of_held_out_r2():
    # The target is a per-user effect: learnable from user_id only if a user's pairs are on
    # both sides of a split. Group K-fold must give no held-out skill.
    table = planted_table(300, seed=1)
    effect = {u: e for u, e in zip(sorted(table.user_id.unique()),
                                   np.random.default_rng(3).uniform(0, 1, 15))}
    table["tm"] = table.user_id.map(effect) + np.random.default_rng(4).normal(0, 0.02, 300)
    # user_id is the grouping column, left out unless named in `features`
    cfg = AttributeConfig(targets=("tm",), regressors=("lightgbm",), features=("user_id",),
                          **FAST)
    grouped = Attributor(config=cfg).fit(table)
    per_pair = Attributor(config=cfg).fit(table, groups=np.arange(300))
    assert grouped.fit_.r2.iloc[0] < 0.2
    assert per_pair.fit_.r2.iloc[0] > 0.8
    assert grouped.top("tm", "lightgbm", 1) == ["user_id"]


def test_design_matrix_drops_constants_and_pools_rare_categories():
    f = pd.DataFrame({
        "const": [1.0] * 6,
        "num": [0.0, 1, 2, 3, np.nan, 5],
        "cat": pd.Series(["a", "a", "b", "c", "d", None], dtype="category"),
    })
    d = design_matrix(f, max_categories=3)
    assert d.names == ["num", "cat"]
    assert d.dropped["const"] == "constant"
    assert d.categorical.tolist() == [False, True]
    assert d.categories["cat"] == ["a", "b", "(other)"]
    assert d.X[:, 1].tolist()[:5] == [0, 0, 1, 2, 2]
    assert np.isnan(d.X[5, 1]) and np.isnan(d.X[4, 0])


def test_fast_mlp_forward_equals_the_pipeline():
    table = planted_table(150)
    from rmlens.attribution import pair_features

    d = design_matrix(pair_features(table))
    model = make_regressor("mlp", d, seed=0).fit(d.X, table.tm.to_numpy())
    X = d.X.copy()
    X[::4, 0] = np.nan
    cat = int(np.flatnonzero(d.categorical)[0])
    X[1, cat], X[2, cat] = np.nan, 99.0  # missing and unseen category codes
    np.testing.assert_allclose(mlp_forward(model)(X), model.predict(X), rtol=1e-9, atol=1e-9)


def test_permutation_shap_is_exact_for_additive_models():
    rng = np.random.default_rng(0)
    X, bg = rng.normal(size=(7, 4)), rng.normal(size=(5, 4))
    w = np.array([1.0, -2.0, 0.5, 0.0])

    def f(Z):
        return Z @ w + 0.3 * np.sin(Z[:, 2])

    values, base = permutation_shap(f, X, bg, seed=1)
    expected = w * (X - bg.mean(axis=0))
    expected[:, 2] += 0.3 * (np.sin(X[:, 2]) - np.sin(bg[:, 2]).mean())
    np.testing.assert_allclose(values, expected, atol=1e-12)
    assert base == pytest.approx(f(bg).mean())
    g = lambda Z: Z[:, 0] * Z[:, 1]  # noqa: E731 - an interaction: values still add up
    values, base = permutation_shap(g, X, bg, permutations=2, seed=2)
    np.testing.assert_allclose(values.sum(axis=1) + base, g(X), atol=1e-12)


def test_tm_tg_difference_table():
    imp = pd.DataFrame({
        "target": ["tm", "tm", "tg", "tg", "cm"],
        "regressor": ["lightgbm"] * 5,
        "feature": ["a", "b", "a", "b", "a"],
        "importance": [0.5, 0.1, 0.1, 0.3, 0.9],
    })
    d = tm_tg_difference(imp)
    assert d.feature.tolist() == ["a", "b"]
    assert d["diff"].tolist() == pytest.approx([0.4, -0.2])
    assert tm_tg_difference(imp[imp.target != "tg"]).empty


def test_config_is_checked():
    from rmlens._errors import InputError

    with pytest.raises(InputError, match="'targets' parameter of AttributeConfig"):
        Attributor(config=AttributeConfig(targets=("xx",))).fit(planted_table(20))
    with pytest.raises(InputError, match="'folds'"):
        Attributor(config=AttributeConfig(folds=1)).fit(planted_table(20))


def id_table(n: int = 300) -> pd.DataFrame:
    """TM is a function of `item_id` alone (20 items, mixed across users); the other
    metadata: the grouping column, an alias of it, free text, and a low-cardinality `wave`."""
    table = planted_table(n, seed=5)
    rng = np.random.default_rng(6)
    table["item_id"] = rng.integers(0, 20, n)
    table["tm"] = table.item_id / 20 + rng.normal(0, 0.01, n)
    table["annotator"] = table.user_id.map(lambda u: f"Dr. {u.upper()}")
    table["comment"] = [f"pair {i} looked fine to me" for i in range(n)]
    table["wave"] = rng.integers(1, 3, n)
    return table


def test_identifier_columns_are_left_out_by_default():
    table = id_table()
    cfg = AttributeConfig(targets=("tm",), regressors=("lightgbm",), **FAST)
    a = Attributor(config=cfg).fit(table, group_by="user_id")
    assert a.left_out_ == {
        "user_id": "the audit's grouping column",
        "item_id": "named like an identifier",
        "annotator": "one value per group of the audit (the grouping column under another name)",
        "comment": "300 distinct values in 300 pairs: free text or a high-cardinality id",
    }
    leaked = set(a.left_out_)
    assert not leaked & set(a.design_.names)
    assert not leaked & set(a.importance_.feature)  # no SHAP importance either
    assert {"wave", "source", "margin"} <= set(a.design_.names)
    assert a.features_.attrs["skipped"]["item_id"] == "identifier-like: named like an identifier"
    assert any("item_id (named like an identifier)" in note and "`features`" in note
               for note in a.notes_)
    assert a.fit_.r2.iloc[0] < 0.3  # without the id, TM is not explained

    back = Attributor(config=cfg.replace(features=("item_id",))).fit(table, group_by="user_id")
    assert "item_id" not in back.left_out_ and "item_id" in back.design_.names
    assert back.top("tm", "lightgbm", 1) == ["item_id"] and back.fit_.r2.iloc[0] > 0.9
    assert {"user_id", "annotator", "comment"} <= set(back.left_out_)


def test_grouping_column_is_recognised_without_its_name():
    # no group_by given: user_id is named like an id; an unnamed copy is one value per group
    table = id_table().rename(columns={"user_id": "rater"})
    cfg = AttributeConfig(targets=("tm",), regressors=("lightgbm",), **FAST)
    a = Attributor(config=cfg).fit(table)
    assert a.left_out_["rater"].startswith("one value per group")


def test_features_must_name_metadata_columns():
    from rmlens._params import ParamError

    cfg = AttributeConfig(targets=("tm",), regressors=("lightgbm",), features=("nope",), **FAST)
    with pytest.raises(ParamError, match="left out by default: user_id, item_id"):
        Attributor(config=cfg).fit(id_table(), group_by="user_id")
    with pytest.raises(ParamError, match="not also in exclude"):
        AttributeConfig(features=("mechanism",)).check()
