"""Objectives are things, not strings: outside ``rmlens.rewards.objectives`` no module compares
an objective's name (each asks the objective's class for its traits instead)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rmlens
from rmlens.rewards._config import OBJECTIVE_NAMES, ObjectiveConfig
from rmlens.rewards.objectives import FIELDS, OBJECTIVES, REGISTRY, Objective, objective_of

SRC = Path(rmlens.__file__).parent
HOME = SRC / "rewards" / "objectives"


def _names_in(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & set(OBJECTIVES)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names_in(e) for e in node.elts))
    return set()


def name_comparisons(path: Path, root: Path = SRC) -> list[str]:
    """``file:line name`` of every comparison (==, !=, in, not in) with an objective's name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            names = _names_in(node.left).union(*(_names_in(c) for c in node.comparators))
            if names:
                found.append(f"{path.relative_to(root)}:{node.lineno} {sorted(names)}")
    return found


def test_no_module_outside_the_objectives_compares_an_objective_name():
    modules = [p for p in SRC.rglob("*.py") if HOME not in p.parents]
    assert len(modules) > 100
    found = [hit for path in modules for hit in name_comparisons(path)]
    assert found == []


def test_the_check_sees_a_comparison(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('def f(c):\n    return c.objective == "poe" or c.x in ("a", "curate")\n')
    assert name_comparisons(planted, tmp_path) == ["planted.py:2 ['poe']",
                                                   "planted.py:2 ['curate']"]  # fmt: skip


def test_registry_names_fields_and_help_agree():
    assert OBJECTIVE_NAMES == OBJECTIVES == tuple(REGISTRY)
    assert all(cls.name == name for name, cls in REGISTRY.items())
    declared = set(ObjectiveConfig.__dataclass_fields__)
    assert set(FIELDS) <= declared  # every field an objective reads is a config field
    assert {"smoothing", "gamma", "dro_step", "curate_weight"} <= set(FIELDS)
    for name in OBJECTIVES:
        assert f"{name} (" in ObjectiveConfig.__dataclass_fields__["objective"].metadata["help"]


def test_traits_of_each_objective():
    assert [n for n, c in REGISTRY.items() if c.pair_logistic] == ["bt", "label_smoothing"]
    assert [n for n, c in REGISTRY.items() if c.reads_bias] == ["poe", "reweight"]
    assert [n for n, c in REGISTRY.items() if c.frozen_weights] == [
        "low_margin", "complementary", "curate"]  # fmt: skip
    assert [n for n, c in REGISTRY.items() if c.weighted] == [
        "reweight", "low_margin", "complementary", "curate"]  # fmt: skip
    assert REGISTRY["group_dro"].group_column == "required"
    assert REGISTRY["curate"].group_column == REGISTRY["complementary"].group_column == "or-prompt"
    assert [n for n, c in REGISTRY.items() if c.plain] == ["bt"]


def test_words_and_targets_come_from_the_config():
    config = ObjectiveConfig(objective="label_smoothing", smoothing=0.2)
    assert objective_of(config).target(config) == pytest.approx(0.8)
    assert objective_of(config).words(config) == "; objective label_smoothing (eps 0.2)"
    assert objective_of("bt").words(config) == ""
    dro = ObjectiveConfig(objective="group_dro", dro_groups="team", dro_step=0.3)
    assert objective_of(dro).words(dro) == "; objective group_dro over 'team' (step 0.3)"
    with pytest.raises(ValueError, match="objective must be one of"):
        objective_of("focal")


def test_a_new_objective_is_one_class(monkeypatch):
    """A subclass registered under its name trains through the same module as the others."""
    import torch

    from rmlens.rewards.losses import ObjectiveModule, PairExtras

    class Hinge(Objective):
        name = "hinge"

        def per_pair(self, m, d, extras):
            return torch.relu(1 - d)

    monkeypatch.setitem(REGISTRY, "hinge", Hinge)
    module = ObjectiveModule("hinge")
    loss = module(torch.tensor([0.5, 2.0]), PairExtras())
    assert float(loss) == pytest.approx(0.25)
    assert module.describe() == {"objective": "hinge"}
