"""Configuration of attribution: light, so the command line builds its options fast."""

from __future__ import annotations

from dataclasses import dataclass, field

from rmlens._params import Config, ParamError, non_negative_int, positive_int

REGRESSORS = ("lightgbm", "mlp")
DEFAULT_EXCLUDE = ("mechanism",)


TARGETS = ("tm", "tg", "cm")
# In `features`, the keyword that adds the SAE latents of `rmlens sae DIR` (DIR/sae/).
SAE_FEATURES = "sae"


def _some_of(values, allowed) -> bool:
    return isinstance(values, (list, tuple)) and len(values) > 0 and set(values) <= set(allowed)


@dataclass
class AttributeConfig(Config):
    """Attribution of an audit's TM, TG and CM to pair features."""

    targets: tuple[str, ...] = field(
        default=TARGETS, metadata={"help": "Targets to explain, from tm, tg, cm."}
    )
    regressors: tuple[str, ...] = field(
        default=REGRESSORS, metadata={"help": "Regressors, from lightgbm, mlp."}
    )
    folds: int = field(
        default=5, metadata={"help": "K of the group K-fold (fewer when there are fewer groups)."}
    )
    seed: int = field(default=0, metadata={"help": "Seed of folds, regressors and SHAP samples."})
    tokenizer: str | None = field(
        default="auto",
        metadata={"help": "Tokenizer for len_tokens: auto (the audit's model), a preset, a "
                          "local path, or none."},
    )
    shap_rows: int = field(
        default=2000, metadata={"help": "Pairs explained by TreeSHAP (LightGBM)."}
    )
    mlp_shap_rows: int = field(
        default=100, metadata={"help": "Pairs explained by permutation SHAP (MLP)."}
    )
    shap_background: int = field(
        default=50, metadata={"help": "Background pairs of the MLP's permutation SHAP."}
    )
    max_categories: int = field(
        default=30, metadata={"help": "Categories kept per categorical feature; rest pooled."}
    )
    exclude: tuple[str, ...] = field(
        default=DEFAULT_EXCLUDE,
        metadata={"help": "Pair columns never used as features ('mechanism' is planted truth)."},
    )
    features: tuple[str, ...] = field(
        default=(),
        metadata={"help": "Identifier-like columns to use as features anyway (left out by "
                          "default: the audit's grouping column, columns named id or *_id, a "
                          "column with one value per group, text with more distinct values "
                          "than --max-unique-fraction of the pairs), e.g. passage_id; the "
                          "keyword sae adds the SAE latents of `rmlens sae DIR` (sae_<j>: "
                          "chosen minus rejected activation)."},
    )
    sae_latents: int = field(
        default=64,
        metadata={"help": "With the keyword sae in --features: how many latents join the pair "
                          "features, those whose pair activations vary most (0: every active "
                          "latent; the MLP's permutation SHAP grows with the square of the "
                          "features' count)."},
    )
    max_unique_fraction: float = field(
        default=0.5,
        metadata={"help": "A text column with more distinct values than this share of the "
                          "pairs is taken for free text or an id and left out."},
    )
    n_jobs: int = field(default=1, metadata={"help": "LightGBM threads."})
    stability: bool = field(
        default=True,
        metadata={"help": "Refit each regressor and SHAP on TM, TG, CM estimated from each half "
                          "of the audit's runs (alternating whole repeats) and compare the "
                          "feature rankings (rank Spearman, top-10 overlap, and both for fits "
                          "to pure noise); two more fits per target and regressor and three "
                          "per regressor, about twice the time."},
    )
    plots: bool = field(default=True, metadata={"help": "Write the PNG plots."})

    _constraints = {
        "targets": (lambda t: _some_of(t, TARGETS), "a subset of tm, tg, cm"),
        "regressors": (lambda r: _some_of(r, REGRESSORS), "a subset of lightgbm, mlp"),
        "folds": (lambda k: positive_int(k) and k >= 2, "an int >= 2"),
        "seed": (non_negative_int, "an int >= 0"),
        "shap_rows": (positive_int, "an int > 0"),
        "mlp_shap_rows": (positive_int, "an int > 0"),
        "shap_background": (positive_int, "an int > 0"),
        "sae_latents": (non_negative_int, "an int >= 0"),
        "max_categories": (lambda k: positive_int(k) and k >= 2, "an int >= 2"),
        "n_jobs": (lambda n: isinstance(n, int) and not isinstance(n, bool) and n != 0,
                   "a nonzero int"),
        "max_unique_fraction": (lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)
                                and 0 < x <= 1, "a float in (0, 1]"),
        "stability": (True, False),
        "plots": (True, False),
    }

    def _check_more(self) -> None:
        both = [c for c in self.features if c in self.exclude]
        if both:
            raise ParamError("features", type(self).__name__,
                             f"names not also in exclude ({', '.join(both)} are in both)",
                             self.features)
