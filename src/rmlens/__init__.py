"""rmlens: train reward models on preference data and audit what they learn.

The verbs a user calls, and their configs, are here; each is
``verb(data_or_dirs, config=None, *, out=None, **overrides)``, where ``overrides`` are
fields of the verb's config. Names load on first use, so ``import rmlens`` imports neither
torch nor pandas.

Examples
--------
>>> import rmlens
>>> config = rmlens.AuditConfig(runs=8, model="minilm")
>>> config.replace(folds=4).folds
4
>>> pairs = rmlens.load_pairs("pairs.jsonl")  # doctest: +SKIP
>>> table = rmlens.audit(pairs, config, out="audit")  # doctest: +SKIP
>>> rmlens.attribute("audit", regressors=("lightgbm",))  # doctest: +SKIP
>>> rmlens.write_report("audit")  # doctest: +SKIP
"""

from rmlens._lazy import attach

__version__ = "0.1.0"

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_errors": ["InputError", "RmlensNote", "RmlensWarning"],
        "experiment": ["AuditDir", "ExperimentDir"],
        "data": ["CandidatesConfig", "SynthConfig", "generate_candidates", "load_candidates",
                 "load_pairs", "load_rankings", "synthesize"],
        "rewards": ["HeadConfig", "TrainConfig"],
        "hub": ["load_rm", "train"],
        "memorization": ["AuditConfig", "audit"],
        "attribution": ["AttributeConfig", "attribute"],
        "sae": ["SAEConfig", "fit_sae"],
        "evaluation": ["EvaluateConfig", "evaluate"],
        "tokens": ["SweepConfig", "sweep"],
        "generalization": ["GeneralizeConfig", "generalize"],
        "comparison": ["CompareConfig", "MitigateConfig", "OveroptimizeConfig", "compare",
                       "mitigate", "overoptimize"],
        "report": ["ReportConfig", "write_report"],
    },
)
