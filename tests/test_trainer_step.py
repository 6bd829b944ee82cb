"""A fine-tuned training step reads in three files: the trainer (``rewards/finetune.py``),
the losses (``rewards/losses.py``) and the model wrapper (``rewards/_nets.py``)."""

from __future__ import annotations

import ast
import inspect
import textwrap

from rmlens.rewards import finetune

STEP_FILES = {"rmlens.rewards.finetune", "rmlens.rewards.losses", "rmlens.rewards._nets"}


def _method(cls, name: str) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(inspect.getsource(getattr(cls, name)))).body[0]


def _rmlens_imports(fn: ast.FunctionDef) -> set[str]:
    return {n.module for n in ast.walk(fn)
            if isinstance(n, ast.ImportFrom) and n.module.startswith("rmlens")}  # fmt: skip


def _calls_on_self(fn: ast.FunctionDef) -> set[str]:
    """``attr.method`` of every call ``self.attr.method(...)`` (also through a local
    ``x = self.attr``), and ``method`` of ``self.method(...)``."""
    alias = {t.id: n.value.attr for n in ast.walk(fn) if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Attribute)
             and isinstance(n.value.value, ast.Name) and n.value.value.id == "self"}  # fmt: skip
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            parts, value = [node.func.attr], node.func.value
            while isinstance(value, ast.Attribute):
                parts.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in alias:
                parts.insert(0, alias[value.id])
            if isinstance(value, ast.Name) and value.id in {"self", *alias}:
                out.add(".".join(parts))
    return out


def test_a_step_reads_in_the_trainer_the_losses_and_the_model_wrapper():
    from rmlens.rewards import _nets
    from rmlens.rewards.losses import ranking_loss

    step = _method(finetune._TunedTrainer, "_step")
    assert _rmlens_imports(step) == {"rmlens.rewards.losses"}
    assert _calls_on_self(step) == {"runtime_.batch", "runtime_.autocast", "net_.rewards"}
    reached = [ranking_loss, _nets.Runtime.batch, _nets.Runtime.autocast, _nets.collate,
               _nets.ExplicitNet.rewards, _nets.ImplicitNet.rewards]  # fmt: skip
    assert {f.__module__ for f in reached} <= STEP_FILES


def test_the_loop_around_a_step_is_the_trainers_own():
    epochs = _method(finetune._TunedTrainer, "_epochs")
    calls = _calls_on_self(epochs)
    assert {"_step", "_optimizer", "_evaluate"} <= calls
    assert all(hasattr(finetune._TunedTrainer, c) for c in calls if "." not in c)
