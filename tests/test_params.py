"""One validation helper for every config: ParamError, the Config mixin, nested configs."""

import dataclasses
import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from rmlens._errors import InputError
from rmlens._params import Config, ParamConflict, ParamError, dict_changes

CONFIGS = {
    "rmlens.rewards.finetune": ["TrainConfig"],
    "rmlens.rewards.frozen": ["HeadConfig"],
    "rmlens.memorization._config": ["AuditConfig"],
    "rmlens.attribution._attribute": ["AttributeConfig"],
    "rmlens.evaluation._evaluate": ["EvaluateConfig"],
    "rmlens.tokens._run": ["SweepConfig"],
    "rmlens.generalization._config": ["GeneralizeConfig"],
    "rmlens.data._synth": ["SynthConfig"],
    "rmlens.report._config": ["ReportConfig"],
}
VALID = {"SweepConfig": {"rm": ["tiny"]}}  # the one config without a valid default


def each_config():
    for module, names in CONFIGS.items():
        for name in names:
            yield getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("cls", list(each_config()), ids=lambda c: c.__name__)
def test_every_config_uses_the_mixin(cls):
    assert issubclass(cls, Config) and dataclasses.is_dataclass(cls)
    for copy in ("check", "to_dict", "from_dict", "replace"):
        assert copy not in vars(cls), f"{cls.__name__} keeps its own {copy}"
    assert cls._constraints and set(cls._constraints) <= {f.name for f in dataclasses.fields(cls)}
    config = cls(**VALID.get(cls.__name__, {}))
    assert config.check() is config
    again = cls.from_dict(json.loads(json.dumps(config.to_dict())))  # through JSON and back
    assert again == config
    with pytest.raises(InputError, match=f"unknown {cls.__name__} setting"):
        cls.from_dict({**config.to_dict(), "no_such_option": 1})


def test_no_second_copy_of_check_params():
    import rmlens.rewards

    assert "check_params" not in rmlens.rewards.__all__
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("rmlens.rewards._params")


@pytest.mark.parametrize(
    ("cls", "kwargs", "param"),
    [
        ("TrainConfig", {"lr": -1.0}, "lr"),
        ("HeadConfig", {"epochs": 0}, "epochs"),
        ("AuditConfig", {"runs": 0}, "runs"),
        ("AuditConfig", {"gpus_per_run": 1.0}, "gpus_per_run"),  # a rule across fields
        ("AttributeConfig", {"targets": ("tm", "zz")}, "targets"),
        ("EvaluateConfig", {"n_bins": 0}, "n_bins"),
        ("SweepConfig", {"rm": []}, "rm"),
        ("GeneralizeConfig", {"test_fraction": 1.5}, "test_fraction"),
        ("SynthConfig", {"n_pairs": 0}, "n_pairs"),
        ("SynthConfig", {"noise": 0.2}, "noise"),  # shares that do not sum to 1
        ("ReportConfig", {"max_text_chars": 5}, "max_text_chars"),
    ],
)
def test_every_rule_raises_param_error_naming_the_field(cls, kwargs, param):
    cls = next(c for c in each_config() if c.__name__ == cls)
    with pytest.raises(ParamError) as err:
        cls(**kwargs).check()
    assert err.value.param == param and err.value.owner == cls.__name__
    assert err.value.value == kwargs[param]
    assert isinstance(err.value, InputError)


def test_synth_and_report_keep_their_wording():
    from rmlens.data import SynthConfig, synthesize
    from rmlens.report import ReportConfig

    with pytest.raises(ParamError, match="must sum to 1. Got 0.9"):
        synthesize(SynthConfig(quality=0.4))
    with pytest.raises(ParamError, match="'max_page_mb' parameter of ReportConfig must be a num"):
        ReportConfig(max_page_mb=1).check()


def test_nested_configs_from_a_toml_like_dict():
    from rmlens.generalization import GeneralizeConfig
    from rmlens.memorization import AuditConfig

    config = AuditConfig.from_dict(
        {"runs": 10, "head": {"head": "linear", "epochs": 3, "lr": 1}, "train": {"lora_r": 4}}
    ).check()
    assert (config.runs, config.head.epochs, config.head.lr, config.train.lora_r) == (10, 3, 1.0, 4)
    assert type(config.head.lr) is float and config.head.batch_size == 128  # defaults kept
    # a partial table updates the field's own default (here not TrainConfig's defaults)
    assert GeneralizeConfig.from_dict({"train": {"epochs": 5}}).train.model == "smollm2-135m"
    with pytest.raises(InputError, match="unknown HeadConfig setting.*: epoch "):
        AuditConfig.from_dict({"head": {"epoch": 3}})
    with pytest.raises(ParamError, match="'epochs' parameter of HeadConfig must be of type int"):
        AuditConfig.from_dict({"head": {"epochs": "many"}})
    with pytest.raises(ParamError, match="'runs' parameter of AuditConfig must be of type int"):
        AuditConfig.from_dict({"runs": True})
    assert config.replace(head={"lr": 0.5}).head.epochs == 3  # replace merges a nested dict


def test_from_dict_checks_list_items_and_makes_tuples():
    from rmlens.attribution import AttributeConfig
    from rmlens.tokens import SweepConfig

    assert AttributeConfig.from_dict({"targets": ["tm"]}).targets == ("tm",)
    with pytest.raises(ParamError, match="'prompts' parameter of SweepConfig"):
        SweepConfig.from_dict({"rm": ["x"], "prompts": ["ok", 3]})


def test_a_nested_setting_the_audit_owns_is_never_silently_overwritten():
    from rmlens.memorization import AuditConfig
    from rmlens.rewards import HeadConfig, TrainConfig

    with pytest.raises(ParamConflict) as err:
        AuditConfig.from_dict({"train": {"max_length": 256}}).check()
    assert str(err.value) == (
        "train.max_length=256 conflicts with max_length=None of AuditConfig; "
        "set max_length on the audit (its value is the one used)"
    )
    assert (err.value.param, err.value.other, err.value.other_value) == (
        "max_length", "train.max_length", 256
    )
    assert err.value.for_option("--max-length").startswith("--max-length None conflicts with")
    with pytest.raises(ParamConflict, match="head.seed=2 conflicts with seed=1 of AuditConfig"):
        AuditConfig(seed=1, head=HeadConfig(seed=2)).check()
    with pytest.raises(ParamConflict, match="train.model='x' conflicts with model='minilm'"):
        AuditConfig(train=TrainConfig(model="x")).check()
    # the same value, or the nested default, is no conflict; the audit's value is used
    fine = AuditConfig(seed=4, max_length=64, head=HeadConfig(seed=4), train=TrainConfig()).check()
    used = fine.resolved()
    assert (used.head.seed, used.train.seed, used.train.max_length) == (4, 4, 64)
    assert used.train.model == fine.model


def test_dict_changes_names_nested_settings():
    saved = {"runs": 25, "head": {"epochs": 40, "lr": 0.1}}
    now = {"runs": 10, "head": {"epochs": 10, "lr": 0.1}}
    assert dict_changes(saved, now) == [("runs", 25, 10), ("head.epochs", 40, 10)]


def test_the_audit_runner_uses_the_resolved_trainer_config():
    from rmlens.memorization import AuditConfig
    from rmlens.memorization._runner import default_trainer

    trainer = default_trainer(AuditConfig(model="m", max_length=32, seed=5, mode="frozen"))
    assert (trainer.model, trainer.max_length) == ("m", 32)


def pairs_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "prompt": ["q", [{"role": "user", "content": "hi"}], "q2"],
            "chosen": ["yes", "sure", "ok"],
            "rejected": ["no", "nope", "bad"],
            "margin": [1.0, 0.0, np.nan],
            "user_id": ["u1", "u2", "u1"],
        }
    )


def test_fingerprint_covers_what_training_reads():
    from rmlens.data._fingerprint import data_sha1

    table = pairs_table()
    base = data_sha1(table)
    assert len(base) == 16 and base == data_sha1(table.copy())
    assert data_sha1(table.assign(margin=[1.0, 0.5, np.nan])) != base
    assert data_sha1(table.drop(columns="margin")) != base
    assert data_sha1(table.assign(chosen=["yes", "sure", "ok!"])) != base
    assert data_sha1(table.assign(margin=[1, 0, None])) == base  # an int margin is the same
    assert data_sha1(table.assign(user_id="x")) == base  # not read by training ...
    grouped = data_sha1(table, ["id", "prompt", "chosen", "rejected", "margin", "user_id"])
    assert grouped != data_sha1(  # ... unless it groups the audit
        table.assign(user_id=["u1", "u1", "u2"]),
        ["id", "prompt", "chosen", "rejected", "margin", "user_id"],
    )
    assert data_sha1(table.iloc[::-1]) != base


def test_fingerprint_is_the_same_in_another_process():
    from rmlens.data._fingerprint import data_sha1

    code = (
        "import sys; sys.path.insert(0, 'tests'); from test_params import pairs_table; "
        "from rmlens.data._fingerprint import data_sha1; print(data_sha1(pairs_table()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "123"}  # another salt for Python's hash()
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == data_sha1(pairs_table())


def test_get_and_set_params_come_from_one_base():
    """Trainers, the attributor and the length calibrator share ``Params``: a config's fields,
    or ``__init__``'s arguments; an unknown name is a ParamError naming it."""
    from rmlens._base import Params
    from rmlens.attribution import AttributeConfig, Attributor
    from rmlens.evaluation import LengthCalibrator
    from rmlens.rewards import FrozenHeadTrainer

    for cls in (Attributor, LengthCalibrator, FrozenHeadTrainer):
        assert "get_params" not in vars(cls) and "set_params" not in vars(cls)
        assert isinstance(cls(), Params)
    attributor = Attributor(config=AttributeConfig(folds=3))
    assert attributor.get_params() == {
        f.name: getattr(attributor.config, f.name) for f in dataclasses.fields(AttributeConfig)
    }
    assert Attributor().get_params()["folds"] == AttributeConfig().folds
    assert attributor.set_params(folds=4) is attributor and attributor.config.folds == 4
    with pytest.raises(InputError, match="unknown AttributeConfig setting"):
        attributor.set_params(n_folds=4)
    calibrator = LengthCalibrator(frac=0.3)
    assert calibrator.get_params() == {"frac": 0.3, "it": 3}
    assert calibrator.set_params(it=1).it == 1
    with pytest.raises(ParamError, match="no parameter `span`") as err:
        calibrator.set_params(span=2)
    assert err.value.param == "span"


def test_every_verb_takes_config_fields_as_keywords():
    """``verb(data, config=None, *, out=None, **overrides)``: overrides are config fields (an
    unknown one is a ParamError naming it); a folder a verb needs is asked for as `out`."""
    import inspect

    import rmlens
    from rmlens._base import resolve_config

    for name in ("audit", "attribute", "evaluate", "compare", "mitigate", "sweep",
                 "generalize", "train", "write_report"):  # fmt: skip
        params = list(inspect.signature(getattr(rmlens, name)).parameters.values())
        assert [p.name for p in params[1:3]] == ["config", "out"], name
        assert params[2].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert params[-1].kind is inspect.Parameter.VAR_KEYWORD, name
    base = rmlens.AuditConfig(runs=4)
    assert resolve_config("audit", rmlens.AuditConfig, None, {"runs": 10}).runs == 10
    assert resolve_config("audit", rmlens.AuditConfig, base, {"folds": 2}).to_dict() == \
        base.replace(folds=2).to_dict()
    assert resolve_config("audit", rmlens.AuditConfig, base, {}) is base
    pairs = pd.DataFrame({"prompt": ["q"], "chosen": ["a"], "rejected": ["b"]})
    with pytest.raises(ParamError, match=r"audit\(\) got an unknown setting `runz`") as err:
        rmlens.audit(pairs, runz=3)
    assert err.value.param == "runz"
    with pytest.raises(InputError, match="`config` of audit\\(\\): expected AuditConfig"):
        rmlens.audit(pairs, "audit-dir")
    with pytest.raises(InputError, match="`out`: compare\\(\\) writes a folder"):
        rmlens.compare(["a", "b"])
    with pytest.raises(InputError, match="`out`: train\\(\\) writes a folder"):
        rmlens.train(pairs)


def test_evaluate_overrides_equal_a_config():
    import rmlens

    class LengthRM:
        def score(self, prompts, responses):
            return np.array([len(r) for r in responses], dtype=float)

    pairs = pd.DataFrame({"prompt": ["q"] * 4, "chosen": ["aaaa", "bb", "ccc", "d"],
                          "rejected": ["a", "bbb", "cc", "dddd"]})  # fmt: skip
    by_keyword = rmlens.evaluate(pairs, rm=LengthRM(), probes="none", n_bins=2, quiet=True)
    by_config = rmlens.evaluate(pairs, rmlens.EvaluateConfig(n_bins=2), rm=LengthRM(),
                                probes="none", quiet=True)  # fmt: skip
    assert by_keyword["ece"] == by_config["ece"] and by_keyword["accuracy"] == 0.5
